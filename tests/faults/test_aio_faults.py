"""The asyncio SDK under RPC faults: a late reply, a lost reply, a stuck transaction, a stalled node.

The asyncio path runs the same sender steps as the sync one
(chainfence._core.effects), so the late-reply rule (ask for our own hash; resend
only identical bytes; never sign twice for one intent) must hold through
``AsyncHTTPProvider`` too. Sequenced as tests/faults/test_late_replies.py
is: the proxy forwards the send at once and answers only after the client
gave up (``time_out_only`` shortens that one request's timeout, on the
asyncio provider here), on automine and on interval mining.
"""

from __future__ import annotations

import asyncio

import pytest
from eth_account import Account
from web3 import AsyncWeb3

from chainfence import Chain, Registry, Timeouts
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import TransactionTimeout
from tests.support.anvil import Anvil, dev_keys
from tests.support.rpc_proxy import RpcProxy, time_out_only
from tests.support.virtual_time import SteppedClock

RESOURCE = "aio/late"


@pytest.fixture(scope="module")
def interval_node():
    """An anvil that mines a block every second, whatever arrives (a chain with real block times)."""
    with Anvil(extra_args=("--block-time", "1")) as node:
        yield node


@pytest.fixture(params=["automine", "interval"])
def node_and_registry(request, anvil_node, anvil_session):
    if request.param == "automine":
        chain, registry = anvil_session
        snapshot = chain.snapshot()
        yield anvil_node, registry
        chain.revert(snapshot)
        return
    node = request.getfixturevalue("interval_node")
    chain = Chain.connect(node.url, private_keys=dev_keys(10), timeouts=Timeouts(poll=0.05))
    yield node, Registry.deploy(chain, max_ttl=3_600)


def test_a_late_reply_to_an_async_acquisition_lands_exactly_one(node_and_registry):
    node, registry = node_and_registry

    async def agent(proxy):
        async with await AsyncChain.connect(
            proxy.url, private_key=dev_keys(10)[5], timeouts=Timeouts(request=60, poll=0.05)
        ) as chain:
            time_out_only(chain.rpc.w3, "eth_sendRawTransaction", 1.0)  # the late one: the client gives up
            agent = await AsyncRegistry.at(chain, registry.address)
            proxy.plan("eth_sendRawTransaction", "late_reply")
            return agent.sender, await agent.acquire(RESOURCE, ttl=3_600)

    with RpcProxy(node.url) as proxy:
        sender = Account.from_key(dev_keys(10)[5]).address
        nonce_before = registry.chain.rpc.nonce(sender, "latest")
        before = registry.latest_token()
        sender, lease = asyncio.run(asyncio.wait_for(agent(proxy), 120))
        sends = proxy.sent("eth_sendRawTransaction")
    assert sends[0][1] == "late_reply", "the reply to the send really was late"
    assert registry.latest_token() == before + 1 == lease.token, "exactly one acquisition"
    assert registry.chain.rpc.nonce(sender, "latest") == nonce_before + 1, "exactly one transaction mined"
    assert len({tuple(params) for params, _ in sends}) == 1, "only identical bytes were ever sent"
    assert registry.lease_of(RESOURCE).holder == sender


def test_control_an_async_client_that_reads_a_timeout_as_failure_acquires_twice(node_and_registry):
    """The control: a plain AsyncWeb3 client whose send timed out takes it as "not sent" and signs
    again with the next nonce: both transactions land, two acquisitions for one intent."""
    node, registry = node_and_registry
    key = Account.from_key(dev_keys(10)[6])

    async def naive(proxy):
        w3 = AsyncWeb3(AsyncWeb3.AsyncHTTPProvider(proxy.url, exception_retry_configuration=None))
        try:
            time_out_only(w3, "eth_sendRawTransaction", 1.0)
            data = registry._encode("acquire", [RESOURCE, 60])
            nonce = await w3.eth.get_transaction_count(key.address, "pending")
            base = {
                "to": registry.address,
                "data": data,
                "gas": 300_000,
                "chainId": await w3.eth.chain_id,
                "gasPrice": await w3.eth.gas_price,
            }
            proxy.plan("eth_sendRawTransaction", "late_reply")
            try:
                await w3.eth.send_raw_transaction(key.sign_transaction(dict(base, nonce=nonce)).raw_transaction)
            except Exception:  # timed out: "it failed", sign again
                second = key.sign_transaction(dict(base, nonce=nonce + 1)).raw_transaction
                await w3.eth.wait_for_transaction_receipt(await w3.eth.send_raw_transaction(second), timeout=60)
        finally:
            await w3.provider.disconnect()

    with RpcProxy(node.url) as proxy:
        before = registry.latest_token()
        asyncio.run(asyncio.wait_for(naive(proxy), 120))
    assert registry.latest_token() == before + 2, "the control must land two acquisitions"


def test_the_event_loop_runs_while_a_request_hangs_on_a_stalled_node(on_anvil, anvil_node):
    """An acquisition whose request the node holds does not block the loop: other tasks run (here
    the test's own, which waits in a thread for the proxy to hold the request), and the acquisition
    completes once the node answers."""
    registry = on_anvil

    async def main(proxy):
        async with await AsyncChain.connect(
            proxy.url, private_key=dev_keys(10)[4], timeouts=Timeouts(request=60)
        ) as chain:
            agent = await AsyncRegistry.at(chain, registry.address)
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            held = proxy.held
            proxy.stall()
            acquiring = asyncio.create_task(agent.acquire(RESOURCE, ttl=60))
            ticking = asyncio.create_task(ticker())
            await asyncio.to_thread(proxy.wait_held, held + 1)  # returns only if the loop is free
            ticks_while_held = ticks
            assert not acquiring.done()
            proxy.resume()
            lease = await acquiring
            ticking.cancel()
            return lease, ticks_while_held

    with RpcProxy(anvil_node.url) as proxy:
        lease, ticks = asyncio.run(asyncio.wait_for(main(proxy), 120))
    assert ticks > 0, "other tasks ran while the request was held"
    assert registry.lease_of(RESOURCE).token == lease.token


async def agent_via(proxy: RpcProxy, registry: Registry, key_index: int, receipt: float = 120.0) -> AsyncRegistry:
    chain = await AsyncChain.connect(
        proxy.url, private_key=dev_keys(10)[key_index], timeouts=Timeouts(request=60, receipt=receipt, poll=0.01)
    )
    return await AsyncRegistry.at(chain, registry.address)


def test_a_lost_reply_to_an_async_send_yields_exactly_one_lease(on_anvil, anvil_node):
    """The node got the acquisition but the reply was lost (the connection dropped): the asyncio path
    finds it by hash and waits for it; only identical bytes are ever sent."""

    async def main(proxy):
        agent = await agent_via(proxy, on_anvil, 6)
        try:
            proxy.plan("eth_sendRawTransaction", "drop_reply")
            return agent.sender, await agent.acquire(RESOURCE, ttl=60)
        finally:
            await agent.chain.aclose()

    before = on_anvil.latest_token()
    with RpcProxy(anvil_node.url) as proxy:
        sender, lease = asyncio.run(asyncio.wait_for(main(proxy), 120))
        sends = proxy.sent("eth_sendRawTransaction")
    assert sends[0][1] == "drop_reply"
    assert lease.token == before + 1 == on_anvil.latest_token()
    assert len({tuple(p) for p, _ in sends}) == 1, "only identical bytes were ever sent"


@pytest.fixture
def automine_off(anvil_chain):
    anvil_chain._rpc("evm_setAutomine", [False])
    try:
        yield
    finally:
        anvil_chain._rpc("evm_setAutomine", [True])
        anvil_chain._rpc("evm_mine", [])


def test_a_stuck_async_acquisition_is_cancelled_and_nothing_happens(on_anvil, anvil_node, automine_off):
    """Not mined within the timeout: the asyncio path, too, replaces it by a no-op with the same nonce,
    and says TransactionTimeout once that is mined. Sequenced at the sender's pauses between polls (its
    clock and its asyncio sleep are the test's): the block is mined once the node has the cancellation."""

    async def main(proxy):
        agent = await agent_via(proxy, on_anvil, 7, receipt=0.5)
        sends_before = proxy.completed_count("eth_sendRawTransaction")
        mined = []

        def mine_once_the_cancellation_is_out():
            if proxy.completed_count("eth_sendRawTransaction") == sends_before + 2 and not mined:
                on_anvil.chain._rpc("evm_mine", [])
                mined.append(True)

        clock = SteppedClock(on_sleep=mine_once_the_cancellation_is_out)
        agent.chain.chain._sender._clock = clock

        async def sleep(seconds):
            clock.sleep(seconds)
            await asyncio.sleep(0)

        agent.chain._sleep = sleep
        try:
            with pytest.raises(TransactionTimeout) as timeout:
                await agent.acquire(RESOURCE, ttl=60)
            return mined, timeout.value
        finally:
            await agent.chain.aclose()

    before = on_anvil.latest_token()
    with RpcProxy(anvil_node.url) as proxy:
        mined, timeout = asyncio.run(asyncio.wait_for(main(proxy), 120))
    assert mined and len(timeout.tx_hashes) == 2
    assert on_anvil.latest_token() == before
    assert on_anvil.lease_from_tx(timeout.tx_hash) is None
