"""Signing while the preflight is on its way (issue #19), on anvil over IPC and HTTP, sync and asyncio.

On a dev node whose preflight is an ``eth_call`` the transaction an acquisition or a release will send is
known before the preflight's answer: the gas ceiling, the fee quote in use, the nonce counted for the
key. The sender signs it while the node runs the preflight (the transport writes the preflight, signs,
then reads the answer: ``chainfence._node.transports.Meanwhile``) and, under the key's lock, sends those
bytes only if the transaction it would sign now, nonce included, is the one signed: signing is
deterministic, so the bytes are the ones it would have made. Each case journals, in order, every
exchange with the node and every signature (and in which exchange it ran):

- an acquisition and a release sign once each, inside the preflight's exchange, and send those bytes;
- a preflight that refuses sends nothing and leaves the key's nonce where it was (the signature made
  meanwhile is dropped: the next transaction takes that nonce);
- another transaction of the same key that takes the nonce meanwhile makes it sign again, with the next
  nonce, before anything is sent; the control (the signature used whatever changed) sends a transaction
  the node refuses ("nonce too low");
- a sender that cannot pay for the gas ceiling signs again with the estimate; the control sends the
  ceiling and is refused (InsufficientFunds);
- on the embedded chain (no transport that overlaps) the signature is made after the preflight, as before.
"""

from __future__ import annotations

import asyncio

import pytest
from eth_account import Account

from chainfence import Chain, Registry
from chainfence._node import sending
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import InsufficientFunds, LeaseHeld
from tests.support.anvil import dev_keys

KEY = 8  # a dev key no other test of this module's neighbours sends from
PREFLIGHT = "eth_call+anvil_getAutomine+eth_getBalance"
SEND = "eth_sendRawTransactionSync"
#: One acquisition or release over a transport that overlaps: the signature is made inside the preflight.
OVERLAPPED = [
    f"exchange {PREFLIGHT}",
    f"sign during {PREFLIGHT}",
    f"answered {PREFLIGHT}",
    f"exchange {SEND}",
    f"answered {SEND}",
]


@pytest.fixture(autouse=True)
def frozen_fee_quote(monkeypatch):
    """One fee quote for the whole test (its requests are not per call)."""
    monkeypatch.setattr(sending, "_FEE_QUOTE_SECONDS", float("inf"))


def _key(body) -> str:
    return "+".join(item["method"] for item in body) if isinstance(body, list) else body["method"]


def journal(transport, monkeypatch) -> list[str]:
    """Every exchange ``transport`` makes from now on (when it starts, when it is answered) and every
    signature, named by the exchange it ran in (``sign during ...``) or ``sign`` when it ran apart."""
    events: list[str] = []
    inside: list[str] = []
    exchange = transport.exchange

    def journaled(body, **kwargs):
        events.append(f"exchange {_key(body)}")
        inside.append(_key(body))
        try:
            return exchange(body, **kwargs)
        finally:
            inside.pop()
            events.append(f"answered {_key(body)}")

    async def ajournaled(body, **kwargs):
        events.append(f"exchange {_key(body)}")
        inside.append(_key(body))
        try:
            return await exchange(body, **kwargs)
        finally:
            inside.pop()
            events.append(f"answered {_key(body)}")

    real_sign = sending.sign

    def signing(account, tx):
        events.append(f"sign during {inside[-1]}" if inside else "sign")
        return real_sign(account, tx)

    monkeypatch.setattr(transport, "exchange", ajournaled if asyncio.iscoroutinefunction(exchange) else journaled)
    monkeypatch.setattr(sending, "sign", signing)
    return events


def agent_on(anvil_node, on_anvil, transport: str, key: int = KEY) -> Registry:
    url = anvil_node.url if transport == "http" else anvil_node.ipc_path
    agent = Registry.at(Chain.connect(url, private_key=dev_keys(10)[key]), on_anvil.address)
    agent.release("jobs/warm-up", agent.acquire("jobs/warm-up", ttl=60).token)  # the nonce and the fee quote
    return agent


def nonce_of(chain: Chain, tx_hash: str) -> int:
    return int(chain.rpc.transaction(tx_hash)["nonce"])


@pytest.mark.parametrize("transport", ["ipc", "http"])
def test_an_acquisition_and_a_release_sign_once_while_the_preflight_is_on_its_way(
    anvil_node, on_anvil, transport, monkeypatch
):
    agent = agent_on(anvil_node, on_anvil, transport)
    events = journal(agent.chain.rpc.transport, monkeypatch)
    lease = agent.acquire("jobs/presigned", ttl=60)
    assert events == OVERLAPPED
    events.clear()
    agent.release(lease.resource, lease.token)
    assert events == OVERLAPPED
    assert on_anvil.lease_of("jobs/presigned") is None


def test_asyncio_over_ipc_signs_while_the_preflight_is_on_its_way_too(anvil_node, on_anvil, monkeypatch):
    async def main():
        async with await AsyncChain.connect(anvil_node.ipc_path, private_key=dev_keys(10)[KEY]) as chain:
            agent = await AsyncRegistry.at(chain, on_anvil.address)
            warm = await agent.acquire("jobs/warm-up", ttl=60)
            await agent.release("jobs/warm-up", warm.token)
            events = journal(chain.rpc.transport, monkeypatch)
            lease = await agent.acquire("jobs/presigned", ttl=60)
            acquired = list(events)
            await agent.release(lease.resource, lease.token)
            return acquired, events[len(acquired) :]

    acquired, released = asyncio.run(main())
    assert acquired == OVERLAPPED
    assert released == OVERLAPPED


def test_a_refused_preflight_sends_nothing_and_the_signature_takes_no_nonce(anvil_node, on_anvil, monkeypatch):
    holder = on_anvil.connect(on_anvil.chain.accounts[1])
    held = holder.acquire("jobs/presigned", ttl=60)
    agent = agent_on(anvil_node, on_anvil, "ipc")
    key = agent.sender
    counted = agent.chain._sender._next_nonce[key]
    events = journal(agent.chain.rpc.transport, monkeypatch)
    with pytest.raises(LeaseHeld):
        agent.acquire("jobs/presigned", ttl=60)
    assert events == [f"exchange {PREFLIGHT}", f"sign during {PREFLIGHT}", f"answered {PREFLIGHT}"]  # no send
    assert agent.chain._sender._next_nonce[key] == counted
    holder.release(held.resource, held.token)
    lease = agent.acquire("jobs/presigned", ttl=60)
    assert nonce_of(on_anvil.chain, lease.tx_hash) == counted  # the nonce the dropped signature had
    agent.release(lease.resource, lease.token)


def _nonce_taken_meanwhile(agent: Registry, monkeypatch) -> list:
    """The first signature made meanwhile is followed, still inside the preflight's exchange, by a whole
    acquisition of the same key (another thread of the process would do it the same way): it takes the
    nonce the signature was made with."""
    presign = sending._Presigned.__call__
    done: list = []
    started: list[bool] = []

    def then_another_takes_the_nonce(self):
        presign(self)
        if not started:  # the first time only (the other acquisition signs meanwhile too)
            started.append(True)
            done.append(agent.acquire("jobs/other", ttl=60))

    monkeypatch.setattr(sending._Presigned, "__call__", then_another_takes_the_nonce)
    return done


def _sends(agent: Registry, monkeypatch) -> list[str]:
    seen: list[str] = []
    request, batch = agent.chain.rpc.transport.request, agent.chain.rpc.transport.batch

    def counted(method, params, **kwargs):
        seen.append(method)
        return request(method, params, **kwargs)

    def counted_batch(calls, **kwargs):
        seen.append("+".join(method for method, _ in calls))
        return batch(calls, **kwargs)

    monkeypatch.setattr(agent.chain.rpc.transport, "request", counted)
    monkeypatch.setattr(agent.chain.rpc.transport, "batch", counted_batch)
    return seen


def test_a_nonce_taken_meanwhile_is_signed_again_before_anything_is_sent(anvil_node, on_anvil, monkeypatch):
    agent = agent_on(anvil_node, on_anvil, "ipc")
    other = _nonce_taken_meanwhile(agent, monkeypatch)
    seen = _sends(agent, monkeypatch)
    lease = agent.acquire("jobs/presigned", ttl=60)
    assert nonce_of(on_anvil.chain, lease.tx_hash) == nonce_of(on_anvil.chain, other[0].tx_hash) + 1
    assert seen.count(SEND) == 2 and "eth_getTransactionByHash" not in seen, seen  # each sent once, none refused
    assert on_anvil.lease_of("jobs/presigned").token == lease.token


def test_control_a_signature_used_whatever_changed_sends_a_transaction_the_node_refuses(
    anvil_node, on_anvil, monkeypatch
):
    """The naive overlap (send what was signed meanwhile): its nonce is taken, the node refuses it, and only
    the sending rules' lookup and re-signing save the acquisition: a send and a lookup more."""
    agent = agent_on(anvil_node, on_anvil, "ipc")
    monkeypatch.setattr(sending._Presigned, "matches", lambda self, signer, tx: True)
    other = _nonce_taken_meanwhile(agent, monkeypatch)
    seen = _sends(agent, monkeypatch)
    lease = agent.acquire("jobs/presigned", ttl=60)
    assert nonce_of(on_anvil.chain, lease.tx_hash) == nonce_of(on_anvil.chain, other[0].tx_hash) + 1
    assert seen.count(SEND) == 3 and "eth_getTransactionByHash" in seen, seen


def _poor_agent(anvil_node, on_anvil) -> Registry:
    poor = Account.create()
    on_anvil.chain.rpc.request("anvil_setBalance", [poor.address, hex(10**15)])  # 0.001 ETH: not the ceiling
    agent = Registry.at(Chain.connect(anvil_node.ipc_path, private_key=poor.key), on_anvil.address)
    agent.release("jobs/warm-up", agent.acquire("jobs/warm-up", ttl=60).token)
    return agent


def test_a_sender_who_cannot_pay_for_the_ceiling_signs_again_with_the_estimate(anvil_node, on_anvil, monkeypatch):
    agent = _poor_agent(anvil_node, on_anvil)
    events = journal(agent.chain.rpc.transport, monkeypatch)
    lease = agent.acquire("jobs/presigned", ttl=60)
    assert events[:3] == [f"exchange {PREFLIGHT}", f"sign during {PREFLIGHT}", f"answered {PREFLIGHT}"]
    assert "exchange eth_estimateGas" in events and events.count("sign") == 1, events  # the estimate's, apart
    assert on_anvil.lease_of("jobs/presigned").token == lease.token


def test_control_the_ceiling_signed_meanwhile_for_a_sender_who_cannot_pay_is_refused(anvil_node, on_anvil, monkeypatch):
    agent = _poor_agent(anvil_node, on_anvil)
    monkeypatch.setattr(sending._Presigned, "matches", lambda self, signer, tx: True)
    before = on_anvil.latest_token()
    with pytest.raises(InsufficientFunds):
        agent.acquire("jobs/presigned", ttl=60)
    assert on_anvil.latest_token() == before


def test_on_the_embedded_chain_the_signature_follows_the_preflight(embedded, monkeypatch):
    """No transport that overlaps: nothing is signed before the preflight has answered."""
    agent = embedded.connect(embedded.chain.accounts[KEY])
    agent.release("jobs/warm-up", agent.acquire("jobs/warm-up", ttl=60).token)
    events: list[str] = []
    request = embedded.chain.rpc.transport.request
    real_sign = sending.sign
    monkeypatch.setattr(
        embedded.chain.rpc.transport, "request", lambda m, p, **kw: (events.append(m), request(m, p, **kw))[1]
    )
    monkeypatch.setattr(sending, "sign", lambda account, tx: (events.append("sign"), real_sign(account, tx))[1])
    agent.acquire("jobs/presigned", ttl=60)
    assert events == ["eth_call", "sign", "eth_sendRawTransaction", "eth_getTransactionReceipt"]
