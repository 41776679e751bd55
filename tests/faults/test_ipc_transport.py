"""The IPC transport (``chainfence._node.ipc.LeanIpc`` and its asyncio twin) under broken connections.

The same attacks as the HTTP transport's (tests/faults/test_lean_transport.py),
through a Unix-socket proxy in front of the session's anvil that closes or
drops on cue (tests/support/ipc_proxy.py): an idle connection the node closed
must not carry a send (it would come back "maybe delivered"); a connection
that breaks while a send is on it is reported "maybe delivered", once, never
resent by the transport, and the sender reconciles by hash (here the send is
``eth_sendRawTransactionSync``: anvil automines); a socket nobody listens on
means nothing was sent. The controls show what a client without the idle
check, or one that re-signs after a drop, gets.
"""

from __future__ import annotations

import asyncio

import pytest
from eth_account import Account
from eth_utils import keccak

from chainfence import AcquireReason, Chain, Registry, Timeouts
from chainfence._node.ipc import AsyncLeanIpc, LeanIpc
from chainfence._node.rpc import AsyncRpc, Rpc, connect_node
from chainfence._node.transports import NotDelivered
from chainfence.errors import NodeUnreachable
from tests.support.anvil import dev_keys, ipc_path
from tests.support.ipc_proxy import IpcProxy
from tests.support.sequencer import wait_until

RESOURCE = "jobs/ipc"
KEY = 8  # a dev key no other fault test sends from


@pytest.fixture
def proxy(anvil_node, on_anvil):
    with IpcProxy(anvil_node.url) as proxy:
        yield proxy


def agent_via(proxy, on_anvil):
    chain = Chain.connect(proxy.path, private_key=dev_keys(10)[KEY], timeouts=Timeouts(request=60, poll=0.01))
    assert isinstance(chain.rpc.transport, LeanIpc)
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


def test_an_acquisition_over_the_session_nodes_own_socket(anvil_node, on_anvil):
    """Chain.connect takes anvil's socket path where it takes a URL: the same registry, the same answers."""
    chain = Chain.connect(anvil_node.ipc_path, private_key=dev_keys(10)[KEY], timeouts=Timeouts(poll=0.01))
    assert isinstance(chain.rpc.transport, LeanIpc) and chain.is_dev
    agent = Registry.at(chain, on_anvil.address)
    lease = agent.acquire(RESOURCE, ttl=60)
    assert on_anvil.lease_of(RESOURCE).token == lease.token and lease.holder == agent.sender
    agent.release(RESOURCE, lease.token)
    assert on_anvil.lease_of(RESOURCE) is None


def test_requests_share_one_kept_connection(proxy, on_anvil):
    """Sequential requests travel on one connection: no connect per request."""
    agent = agent_via(proxy, on_anvil)
    opened = proxy.connections
    agent.acquire(RESOURCE, ttl=60)
    assert proxy.connections == opened, "an acquisition (preflight, send) opened no new connection"


def test_an_idle_connection_the_node_closed_is_replaced_before_a_send_goes_out(proxy, on_anvil):
    """The node closed the idle connection: the transport notices before reusing it, so the send goes out
    once, on a new connection, and is answered: no doubt at all."""
    agent = agent_via(proxy, on_anvil)
    raw = signed_acquire(agent, RESOURCE)
    closed = proxy.closed
    proxy.plan("eth_blockNumber", "close_after_reply")
    agent.chain.rpc.block_number()
    proxy.wait_closed(closed + 1)
    agent.chain.rpc.send_raw(raw)  # no error: nothing to reconcile
    assert len(proxy.sent("eth_sendRawTransaction")) == 1


def test_control_reusing_the_closed_connection_unchecked_leaves_the_send_in_doubt(proxy, on_anvil, monkeypatch):
    """The control: a client that reuses the closed connection without looking writes the send into a
    dead socket and can only say "maybe delivered"."""
    agent = agent_via(proxy, on_anvil)
    raw = signed_acquire(agent, RESOURCE)
    closed = proxy.closed
    proxy.plan("eth_blockNumber", "close_after_reply")
    agent.chain.rpc.block_number()
    proxy.wait_closed(closed + 1)
    monkeypatch.setattr("chainfence._node.ipc.select.select", lambda r, w, x, timeout=None: ([], [], []))
    with pytest.raises(NodeUnreachable) as raised:
        agent.chain.rpc.send_raw(raw)
    assert raised.value.maybe_delivered is True


def test_a_read_on_a_connection_dropped_as_it_arrives_is_retried_once(proxy, on_anvil):
    agent = agent_via(proxy, on_anvil)
    agent.chain.rpc.block_number()
    proxy.plan("eth_blockNumber", "drop_request")
    assert agent.chain.rpc.block_number() >= 0
    assert [fault for _, fault in proxy.sent("eth_blockNumber")][-2:] == ["drop_request", None]


@pytest.mark.parametrize("method", ["send_raw", "send_raw_sync"])
def test_a_send_on_a_connection_that_breaks_is_never_resent_by_the_transport(proxy, on_anvil, method):
    """A send whose connection breaks after the node took it is reported "maybe delivered", once."""
    agent = agent_via(proxy, on_anvil)
    raw = signed_acquire(agent, RESOURCE)
    agent.chain.rpc.block_number()
    proxy.plan("eth_sendRawTransaction", "drop_reply")
    with pytest.raises(NodeUnreachable) as raised:
        getattr(agent.chain.rpc, method)(raw)
    assert raised.value.maybe_delivered is True
    assert len(proxy.sent("eth_sendRawTransaction")) == 1
    # The node took it: mined before the test's snapshot is reverted (a transaction still in the pool
    # then would be mined on the reverted chain, into the next test).
    wait_until(lambda: agent.chain.rpc.receipt("0x" + keccak(raw).hex()) is not None, "the send is mined")


def test_a_reply_lost_mid_acquisition_yields_exactly_one_lease(proxy, on_anvil):
    """The connection drops after the node took (and mined) the acquisition: the SDK finds its own hash
    and never signs a second transaction; one lease, one nonce."""
    agent = agent_via(proxy, on_anvil)
    agent.acquire("jobs/ipc-warm-up", ttl=60)
    nonce = agent.chain.rpc.nonce(agent.sender, "latest")
    before = on_anvil.latest_token()
    proxy.plan("eth_sendRawTransaction", "drop_reply")
    lease = agent.acquire(RESOURCE, ttl=60)
    assert lease.reason is AcquireReason.UNHELD
    assert on_anvil.latest_token() == before + 1 == lease.token, "exactly one acquisition"
    assert agent.chain.rpc.nonce(agent.sender, "latest") == nonce + 1, "exactly one transaction mined"
    sends = proxy.sent("eth_sendRawTransaction")
    assert [fault for _, fault in sends][-1] == "drop_reply" and len({str(params) for params, _ in sends}) == 2


def test_control_re_signing_after_the_drop_acquires_twice(proxy, on_anvil):
    """The control: after the same drop, a client that trusts "it failed" and signs the next nonce lands
    two acquisitions for one intent."""
    agent = agent_via(proxy, on_anvil)
    before = on_anvil.latest_token()
    first, second = signed_acquire(agent, RESOURCE), signed_acquire(agent, RESOURCE, nonce_offset=1)
    proxy.plan("eth_sendRawTransaction", "drop_reply")
    with pytest.raises(NodeUnreachable):
        agent.chain.rpc.send_raw(first)
    agent.chain.rpc.send_raw(second)  # "it failed": a new transaction
    wait_until(lambda: agent.chain.rpc.receipt("0x" + keccak(second).hex()) is not None, "the second one is mined")
    assert on_anvil.latest_token() == before + 2, "two acquisitions for one intent"


def test_a_socket_nobody_listens_on_means_nothing_was_sent():
    path = ipc_path()
    rpc = Rpc(connect_node(path, timeout=60))
    with pytest.raises(NodeUnreachable) as raised:
        rpc.send_raw(b"\x02\x01")
    assert raised.value.maybe_delivered is False
    with pytest.raises(NotDelivered):
        LeanIpc(path, timeout=60).request("eth_blockNumber", [])


def test_asyncio_a_send_whose_connection_breaks_is_maybe_delivered_and_sent_once(proxy, on_anvil):
    agent = agent_via(proxy, on_anvil)
    raw = signed_acquire(agent, RESOURCE)
    proxy.plan("eth_sendRawTransaction", "drop_reply")

    async def main():
        rpc = AsyncRpc(AsyncLeanIpc(proxy.path, timeout=60))
        try:
            assert await rpc.block_number() >= 0
            with pytest.raises(NodeUnreachable) as raised:
                await rpc.send_raw_sync(raw)
            return raised.value
        finally:
            await rpc.close()

    error = asyncio.run(main())
    assert error.maybe_delivered is True
    assert len(proxy.sent("eth_sendRawTransaction")) == 1


def test_asyncio_a_socket_nobody_listens_on_means_nothing_was_sent():
    async def main():
        rpc = AsyncRpc(AsyncLeanIpc(ipc_path(), timeout=60))
        with pytest.raises(NodeUnreachable) as raised:
            await rpc.send_raw(b"\x02\x01")
        return raised.value

    assert asyncio.run(main()).maybe_delivered is False
