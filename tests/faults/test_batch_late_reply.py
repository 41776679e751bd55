"""A late reply to a batch's send never lands a batch twice (anvil, through the loopback proxy).

The batch transaction goes through the chain's never-twice sender: the proxy forwards
``eth_sendRawTransaction`` at once and answers only after the client gave up waiting
(tests/faults/test_late_replies.py does the same to a lone acquisition). The sender asks the node for
the transaction's hash instead of signing again: every caller of the batch gets its one lease, the
sender's nonce moved once per batch, and only identical bytes were ever sent. Automine and interval
mining, as for the lone call.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chainfence import Chain, Lease, Registry, Timeouts
from tests.support.anvil import Anvil, dev_keys
from tests.support.rpc_proxy import RpcProxy, time_out_only


@pytest.fixture(scope="module")
def interval_node():
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


def test_a_late_reply_to_a_batch_lands_every_operation_exactly_once(node_and_registry):
    node, registry = node_and_registry
    with RpcProxy(node.url) as proxy:
        agent_chain = Chain.connect(proxy.url, private_key=dev_keys(10)[7], timeouts=Timeouts(request=60, poll=0.05))
        time_out_only(agent_chain.w3, "eth_sendRawTransaction", 1.0)  # the late one: the client gives up
        batcher = Registry.at(agent_chain, registry.address).batched()
        nonce_before = registry.chain.rpc.nonce(batcher.sender, "latest")
        before = registry.latest_token()
        proxy.plan("eth_sendRawTransaction", "late_reply")
        results: dict[int, Any] = {}

        def agent(i: int) -> None:
            try:
                results[i] = batcher.acquire(f"late/{i}", ttl=3_600)
            except Exception as error:
                results[i] = error

        threads = [threading.Thread(target=agent, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
        sends = proxy.sent("eth_sendRawTransaction")
    assert sends[0][1] == "late_reply", "the reply to the first batch's send really was late"
    leases = [results[i] for i in range(4)]
    assert all(isinstance(lease, Lease) for lease in leases), leases
    assert sorted(lease.token for lease in leases) == list(range(before + 1, before + 5)), "each exactly once"
    assert registry.latest_token() == before + 4
    batches = len({lease.tx_hash for lease in leases})
    assert registry.chain.rpc.nonce(batcher.sender, "latest") == nonce_before + batches, "one transaction a batch"
    assert len({tuple(params) for params, _ in sends}) == batches, "only identical bytes were sent again"
    assert all(registry.lease_of(f"late/{i}").holder == batcher.sender for i in range(4))
