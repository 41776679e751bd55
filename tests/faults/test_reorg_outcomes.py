"""With confirmations, "nothing happened" is only said once the chain settled it.

A stuck acquisition is cancelled by a no-op with the same nonce. With
``confirmations=k`` the SDK reports :class:`TransactionTimeout` ("it can never
execute") only once the cancellation is ``k`` blocks deep: a shallower reorg
can drop the cancellation and let the original in after all. The reorg is
anvil's snapshot/revert (which also empties the pool); the original's bytes,
captured by the proxy, are then mined on the new branch, as a node that still
had it in its pool would.
"""

from __future__ import annotations

import threading

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence.errors import TransactionTimeout
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy

RESOURCE = "deploy/reorged"


@pytest.fixture
def automine_off(anvil_chain, on_anvil):
    anvil_chain._rpc("evm_setAutomine", [False])
    try:
        yield
    finally:
        anvil_chain._rpc("evm_setAutomine", [True])
        anvil_chain._rpc("evm_mine", [])


def run(anvil_node, anvil_chain, on_anvil, confirmations):
    """Stuck acquisition -> cancellation mined -> reorg drops it -> the original is mined instead.

    Returns (what acquire returned or raised, the original's hash, the registry's latest token after)."""
    with RpcProxy(anvil_node.url) as proxy:
        agent = Registry.at(
            Chain.connect(
                proxy.url,
                private_key=dev_keys(10)[7],
                confirmations=confirmations,
                timeouts=Timeouts(receipt=0.3, confirmation=60, poll=0.02),
            ),
            on_anvil.address,
        )
        sender = agent.chain._sender
        deciding = threading.Event()
        real_await_depth, real_settle = sender._await_depth, sender._settle

        def await_depth(*args, **kwargs):
            deciding.set()  # the cancellation is mined; the SDK waits for it to be deep
            return real_await_depth(*args, **kwargs)

        def settle(*args, **kwargs):  # the sender's steps (chainfence._core.effects): run them, then say so
            try:
                return (yield from real_settle(*args, **kwargs))
            finally:
                deciding.set()  # k = 0: decided at once

        sender._await_depth, sender._settle = await_depth, settle
        outcome: dict = {}

        def acquire():
            try:
                outcome["lease"] = agent.acquire(RESOURCE, ttl=60)
            except TransactionTimeout as timeout:
                outcome["timeout"] = timeout

        sends_done = proxy.completed_count("eth_sendRawTransaction")
        thread = threading.Thread(target=acquire)
        thread.start()
        proxy.wait_completed("eth_sendRawTransaction", sends_done + 2)  # the original, then the cancellation
        original_raw = proxy.sent("eth_sendRawTransaction")[-2][0][0]
        fork_point = anvil_chain.snapshot()
        anvil_chain.mine()  # the cancellation is mined (it replaced the original in the pool)
        assert deciding.wait(30), "the SDK never saw the cancellation mined"
        anvil_chain.revert(fork_point)  # the reorg: the cancellation's block is gone
        anvil_chain.rpc.send_raw(bytes.fromhex(original_raw[2:]))  # the new branch carries the original
        anvil_chain.mine(confirmations + 1)
        thread.join(60)
        assert not thread.is_alive()
    return outcome, on_anvil.latest_token()


def test_a_cancellation_shallower_than_k_is_not_reported_as_nothing_happened(
    anvil_node, anvil_chain, on_anvil, automine_off
):
    before = on_anvil.latest_token()
    outcome, latest = run(anvil_node, anvil_chain, on_anvil, confirmations=2)
    assert "timeout" not in outcome, outcome.get("timeout")
    assert outcome["lease"].token == latest == before + 1, "the acquisition happened, and the SDK says so"


def test_control_deciding_on_an_unconfirmed_cancellation_reports_nothing_happened_wrongly(
    anvil_node, anvil_chain, on_anvil, automine_off
):
    before = on_anvil.latest_token()
    outcome, latest = run(anvil_node, anvil_chain, on_anvil, confirmations=0)
    assert "timeout" in outcome, "k = 0 decides on the first inclusion it sees"
    assert latest == before + 1, "yet the acquisition it called impossible landed after the reorg"
