"""The SDK's own keep-alive transport (``chainfence._node.lean_http.LeanHttp``) under broken connections.

Keeping connections open is what makes a request cheap, and what opens two
doubts: a connection the node closed while it sat idle (the request must not
go out on it and come back "maybe delivered"), and a connection that breaks
while a request is on it (the sender must reconcile by hash, never re-sign).
Each scenario runs through a keep-alive proxy that closes or drops on cue
(tests/support/rpc_proxy.py); the controls show what a client without the
idle check, or one that re-signs after a drop, gets.
"""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_utils import keccak

from chainfence import AcquireReason, Chain, Registry, Timeouts
from chainfence._node.lean_http import LeanHttp
from chainfence._node.rpc import Rpc, connect_http
from chainfence._node.transports import NotDelivered
from chainfence.errors import NodeUnreachable
from chainfence.testing.anvil import free_port
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import wait_until

RESOURCE = "jobs/keep-alive"
KEY = 7  # a dev key no other fault test sends from


@pytest.fixture
def proxy(anvil_node, on_anvil):
    with RpcProxy(anvil_node.url, keep_alive=True) as proxy:
        yield proxy


def agent_via(proxy, on_anvil):
    chain = Chain.connect(proxy.url, private_key=dev_keys(10)[KEY], timeouts=Timeouts(request=60, poll=0.01))
    return Registry.at(chain, on_anvil.address)


def signed_acquire(agent, name: str, nonce_offset: int = 0) -> bytes:
    key = Account.from_key(dev_keys(10)[KEY])
    fees = agent.chain._sender.fees()
    nonce = agent.chain.rpc.nonce(key.address, "pending") + nonce_offset
    tx = {
        "to": agent.address,
        "data": agent._encode("acquire", [name, 60]),
        "gas": 200_000,
        "nonce": nonce,
        "chainId": agent.chain.chain_id,
        **fees,
    }
    return bytes(key.sign_transaction(tx).raw_transaction)


def test_requests_share_one_kept_alive_connection(proxy, on_anvil):
    """Sequential requests travel on one connection: the keep-alive the speed comes from is real."""
    agent = agent_via(proxy, on_anvil)
    opened = proxy.connections
    agent.acquire(RESOURCE, ttl=60)
    assert proxy.connections == opened, "an acquisition (estimate, send, receipt) opened no new connection"


def test_an_idle_connection_the_node_closed_is_replaced_before_a_send_goes_out(proxy, on_anvil):
    """The node closed the idle connection (its keep-alive timeout): the transport notices before
    reusing it, so the send goes out once, on a new connection, and is answered: no doubt at all."""
    agent = agent_via(proxy, on_anvil)
    raw = signed_acquire(agent, RESOURCE)
    closed = proxy.closed
    proxy.plan("eth_blockNumber", "close_after_reply")
    agent.chain.rpc.block_number()
    proxy.wait_closed(closed + 1)  # the node has hung up the idle connection
    agent.chain.rpc.send_raw(raw)  # no error: nothing to reconcile
    assert len(proxy.sent("eth_sendRawTransaction")) == 1


def test_control_reusing_the_closed_connection_unchecked_leaves_the_send_in_doubt(proxy, on_anvil, monkeypatch):
    """The control: a client that reuses the closed connection without looking writes the send into
    a dead socket and can only say "maybe delivered", which costs a lookup and a resend."""
    agent = agent_via(proxy, on_anvil)
    raw = signed_acquire(agent, RESOURCE)
    closed = proxy.closed
    proxy.plan("eth_blockNumber", "close_after_reply")
    agent.chain.rpc.block_number()
    proxy.wait_closed(closed + 1)
    monkeypatch.setattr("chainfence._node.lean_http.select.select", lambda r, w, x, timeout=None: ([], [], []))
    with pytest.raises(NodeUnreachable) as raised:
        agent.chain.rpc.send_raw(raw)
    assert raised.value.maybe_delivered is True


def test_a_read_on_a_connection_closed_as_it_arrives_is_retried_once(proxy, on_anvil):
    """The node's idle timeout races the request: a read is asked again on a new connection."""
    agent = agent_via(proxy, on_anvil)
    agent.chain.rpc.block_number()  # a kept-alive connection exists
    proxy.plan("eth_blockNumber", "drop_request")
    assert agent.chain.rpc.block_number() >= 0
    assert [fault for _, fault in proxy.sent("eth_blockNumber")][-2:] == ["drop_request", None]


def test_a_send_on_a_connection_that_breaks_is_never_resent_by_the_transport(proxy, on_anvil):
    """A send whose connection breaks is reported "maybe delivered", once: only the sender resends."""
    agent = agent_via(proxy, on_anvil)
    raw = signed_acquire(agent, RESOURCE)
    agent.chain.rpc.block_number()
    proxy.plan("eth_sendRawTransaction", "drop_reply")
    with pytest.raises(NodeUnreachable) as raised:
        agent.chain.rpc.send_raw(raw)
    assert raised.value.maybe_delivered is True
    assert len(proxy.sent("eth_sendRawTransaction")) == 1


def test_a_reply_lost_mid_request_on_a_kept_alive_connection_yields_exactly_one_lease(proxy, on_anvil):
    """The connection drops after the node took the acquisition: the SDK finds its own hash and
    never signs a second transaction; one lease, one nonce."""
    agent = agent_via(proxy, on_anvil)
    agent.acquire("jobs/warm-up", ttl=60)  # the connection is kept alive and reused below
    nonce = agent.chain.rpc.nonce(agent.sender, "latest")
    before = on_anvil.latest_token()
    proxy.plan("eth_sendRawTransaction", "drop_reply")
    lease = agent.acquire(RESOURCE, ttl=60)
    assert lease.reason is AcquireReason.UNHELD
    assert on_anvil.latest_token() == before + 1 == lease.token, "exactly one acquisition"
    assert agent.chain.rpc.nonce(agent.sender, "latest") == nonce + 1, "exactly one transaction mined"
    assert len({tuple(params) for params, _ in proxy.sent("eth_sendRawTransaction")}) == 1 + 1  # warm-up, then one


def test_control_re_signing_after_the_drop_acquires_twice(proxy, on_anvil):
    """The control: after the same drop, a client that trusts "it failed" and signs the next nonce
    lands two acquisitions for one intent."""
    agent = agent_via(proxy, on_anvil)
    before = on_anvil.latest_token()
    first, second = signed_acquire(agent, RESOURCE), signed_acquire(agent, RESOURCE, nonce_offset=1)
    proxy.plan("eth_sendRawTransaction", "drop_reply")
    with pytest.raises(NodeUnreachable):
        agent.chain.rpc.send_raw(first)
    agent.chain.rpc.send_raw(second)  # "it failed": a new transaction
    wait_until(lambda: agent.chain.rpc.receipt("0x" + keccak(second).hex()) is not None, "the second one is mined")
    assert on_anvil.latest_token() == before + 2, "two acquisitions for one intent"


def test_a_refused_connection_means_nothing_was_sent():
    """No connection could be made: the send is reported as never delivered (safe to sign again)."""
    url = f"http://127.0.0.1:{free_port()}"
    rpc = Rpc(connect_http(url, timeout=60), embedded=False)
    with pytest.raises(NodeUnreachable) as raised:
        rpc.send_raw(b"\x02\x01")
    assert raised.value.maybe_delivered is False
    with pytest.raises(NotDelivered):
        LeanHttp(url, timeout=60).request("eth_blockNumber", [])
