"""Round trips per acquisition and per release, counted at the transport: more requests fail here, not in a
benchmark.

On anvil's automine, over HTTP and over its IPC socket, sync and asyncio, an
acquisition and a release take two round trips each: the preflight (an
``eth_call`` at ``pending``, in one JSON-RPC batch with ``anvil_getAutomine`` and the sender's
balance)
and the send, answered once the transaction is mined, receipt included
(``eth_sendRawTransactionSync``, EIP-7966). Before: ``eth_estimateGas``,
``eth_sendRawTransaction``, then ``eth_getTransactionReceipt`` until it is
there (1.6 on average on the development machine, and a 1 ms sleep before
each one after the first). docs/benchmarks/history.md, "The profile: where an acquisition's time went", has
what each costs.

Not counted here because they are not per call: the nonce (asked once per key,
then counted locally) and the fee quote (two requests, at most once a second;
the tests freeze its clock). The control: the same acquisition on a node the
SDK does not know for a dev chain (a proxy that says it is geth) still takes
the estimate, the send and at least one receipt request.
"""

from __future__ import annotations

import asyncio

import pytest
from eth_account import Account

from chainfence import Chain, Registry, Timeouts
from chainfence._node import sending
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import InsufficientFunds
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy

NAME = "jobs/round-trips"
KEY = 9  # a dev key no other test of this module's neighbours sends from

ANVIL_ACQUIRE = ["eth_call+anvil_getAutomine+eth_getBalance", "eth_sendRawTransactionSync"]
ANVIL_RELEASE = ["eth_call+anvil_getAutomine+eth_getBalance", "eth_sendRawTransactionSync"]


@pytest.fixture(autouse=True)
def frozen_fee_quote(monkeypatch):
    """One fee quote for the whole test: its two requests are asked at most once a second, not per call."""
    monkeypatch.setattr(sending, "_FEE_QUOTE_SECONDS", float("inf"))


def counting(transport, monkeypatch) -> list[str]:
    """Every request ``transport`` carries from now on, by method (a batch as its methods joined by ``+``)."""
    seen: list[str] = []
    request, batch = transport.request, transport.batch

    def counted_request(method, params, **kwargs):
        seen.append(method)
        return request(method, params, **kwargs)

    def counted_batch(calls, **kwargs):
        seen.append("+".join(method for method, _ in calls))
        return batch(calls, **kwargs)

    async def acounted_request(method, params, **kwargs):
        seen.append(method)
        return await request(method, params, **kwargs)

    async def acounted_batch(calls, **kwargs):
        seen.append("+".join(method for method, _ in calls))
        return await batch(calls, **kwargs)

    on_asyncio = asyncio.iscoroutinefunction(request)
    monkeypatch.setattr(transport, "request", acounted_request if on_asyncio else counted_request)
    monkeypatch.setattr(transport, "batch", acounted_batch if on_asyncio else counted_batch)
    return seen


def round_trips(seen: list[str], action) -> list[str]:
    start = len(seen)
    action()
    return seen[start:]


@pytest.mark.parametrize("transport", ["http", "ipc"])
def test_an_acquisition_and_a_release_on_anvil_take_two_round_trips_each(anvil_node, on_anvil, transport, monkeypatch):
    url = anvil_node.url if transport == "http" else anvil_node.ipc_path
    agent = Registry.at(Chain.connect(url, private_key=dev_keys(10)[KEY]), on_anvil.address)
    agent.release("jobs/warm-up", agent.acquire("jobs/warm-up", ttl=60).token)  # the nonce and the fee quote
    seen = counting(agent.chain.rpc.transport, monkeypatch)
    lease = None

    def acquire():
        nonlocal lease
        lease = agent.acquire(NAME, ttl=60)

    assert round_trips(seen, acquire) == ANVIL_ACQUIRE
    assert round_trips(seen, lambda: agent.release(NAME, lease.token)) == ANVIL_RELEASE
    assert on_anvil.lease_of(NAME) is None


@pytest.mark.parametrize("transport", ["http", "ipc"])
def test_asyncio_takes_the_same_two_round_trips(anvil_node, on_anvil, transport, monkeypatch):
    url = anvil_node.url if transport == "http" else anvil_node.ipc_path

    async def main():
        async with await AsyncChain.connect(url, private_key=dev_keys(10)[KEY]) as chain:
            agent = await AsyncRegistry.at(chain, on_anvil.address)
            warm = await agent.acquire("jobs/warm-up", ttl=60)
            await agent.release("jobs/warm-up", warm.token)
            seen = counting(chain.rpc.transport, monkeypatch)
            lease = await agent.acquire(NAME, ttl=60)
            acquired = list(seen)
            await agent.release(NAME, lease.token)
            return acquired, seen[len(acquired) :]

    acquired, released = asyncio.run(main())
    assert acquired == ANVIL_ACQUIRE
    assert released == ANVIL_RELEASE


def test_on_the_embedded_chain_the_send_is_followed_by_one_receipt_request(embedded, monkeypatch):
    """In process there is no round trip to save; the journey is the general one: a preflight call, the
    send, the receipt (mined before the send returns: asked once)."""
    agent = embedded.connect(embedded.chain.accounts[KEY])
    agent.release("jobs/warm-up", agent.acquire("jobs/warm-up", ttl=60).token)
    seen = counting(embedded.chain.rpc.transport, monkeypatch)
    lease = None

    def acquire():
        nonlocal lease
        lease = agent.acquire(NAME, ttl=60)

    journey = ["eth_call", "eth_sendRawTransaction", "eth_getTransactionReceipt"]
    assert round_trips(seen, acquire) == journey
    assert round_trips(seen, lambda: agent.release(NAME, lease.token)) == journey


def test_control_on_a_node_that_is_not_a_dev_chain_the_receipt_is_asked_apart(anvil_node, on_anvil, monkeypatch):
    """The same acquisition where the SDK cannot know the node mines on arrival (it says it is geth): the
    estimate, the send, and the receipt asked apart (at least once): three round trips or more."""
    with RpcProxy(anvil_node.url) as proxy:
        proxy.client_version = "Geth/v1.16.7-stable/linux-amd64/go1.24"
        chain = Chain.connect(proxy.url, private_key=dev_keys(10)[KEY], confirmations=0, timeouts=Timeouts(poll=0.01))
        agent = Registry.at(chain, on_anvil.address)
        agent.release("jobs/warm-up", agent.acquire("jobs/warm-up", ttl=60).token)
        seen = counting(chain.rpc.transport, monkeypatch)
        acquired = round_trips(seen, lambda: agent.acquire(NAME, ttl=60))
    assert acquired[:2] == ["eth_estimateGas", "eth_sendRawTransaction"]
    assert acquired[2:] and set(acquired[2:]) == {"eth_getTransactionReceipt"}, acquired


def test_a_sender_funded_for_a_few_transactions_gets_the_estimate_and_acquires(anvil_node, on_anvil, monkeypatch):
    """The gas ceiling costs nothing on a dev node, but a sender must hold ceiling x fee: one funded with
    0.001 ETH (5,000,000 gas at 1 gwei is 0.005) is given the estimate, as on any node, one round trip more."""
    poor = Account.create()
    on_anvil.chain.rpc.request("anvil_setBalance", [poor.address, hex(10**15)])
    agent = Registry.at(Chain.connect(anvil_node.url, private_key=poor.key), on_anvil.address)
    seen = counting(agent.chain.rpc.transport, monkeypatch)
    lease = agent.acquire(NAME, ttl=60)
    assert lease.holder == poor.address and on_anvil.lease_of(NAME).token == lease.token
    assert "eth_estimateGas" in seen and "eth_sendRawTransactionSync" in seen, seen


def test_control_the_ceiling_for_a_sender_who_cannot_pay_for_it_is_refused(anvil_node, on_anvil, monkeypatch):
    """The control: the same sender given the ceiling (as if it held enough) is refused by the node."""
    poor = Account.create()
    on_anvil.chain.rpc.request("anvil_setBalance", [poor.address, hex(10**15)])
    agent = Registry.at(Chain.connect(anvil_node.url, private_key=poor.key), on_anvil.address)
    real = agent.chain.rpc.dev_preflight
    monkeypatch.setattr(
        agent.chain.rpc, "dev_preflight", lambda call, probe, **kw: real(call, probe, **kw)._replace(balance=10**30)
    )
    before = on_anvil.latest_token()
    with pytest.raises(InsufficientFunds):
        agent.acquire(NAME, ttl=60)
    assert on_anvil.latest_token() == before
