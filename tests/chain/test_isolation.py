"""The suite's own isolation: what one test leaves running does not reach the next.

The chain is shared by every test of a backend (snapshot, test, revert), and so is what lives on it:
``registry.batched()`` keeps one batcher per sender on the chain. A worker still finishing its last
batch when the test returns would take the next test's first call, so that call starts no worker (a
CI run failed that way: a test that interrupts the worker's start saw no start). The test's isolation
waits for every batcher to go idle and forgets them. Sequenced by a gate the worker waits at, not by a
clock; the control, without the retirement, shows the next test's call joining the old worker.
"""

from __future__ import annotations

import threading

import pytest

import tests.conftest as conftest
from chainfence.batching import Batcher
from tests.support.sequencer import wait_until

# On hardhat's node and ganache too (tests/conftest.py, docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


def lingering(monkeypatch, alice) -> tuple[Batcher, threading.Event, list[threading.Thread]]:
    """A batcher whose worker, its caller settled, holds at its next look at the queue until ``gate``."""
    gate = threading.Event()
    take = Batcher._take
    holding = threading.Event()

    def held_take(self, *room):
        if not self._queue and not gate.is_set():
            holding.set()
            gate.wait(120)
        return take(self, *room)

    monkeypatch.setattr(Batcher, "_take", held_take)
    batcher = alice.batched()
    batcher.acquire("iso/first", ttl=60)
    assert holding.wait(60), "the worker never came back for more"
    workers = [t for t in threading.enumerate() if t.name.startswith("chainfence-batcher-")]
    return batcher, gate, workers


def test_a_batcher_a_test_left_working_is_retired_with_the_test(chain, registry, alice, monkeypatch):
    retiring = threading.Event()
    waited = conftest.wait_until

    def watched_wait(condition, what, **kw):
        retiring.set()
        return waited(condition, what, **kw)

    monkeypatch.setattr(conftest, "wait_until", watched_wait)
    with conftest.isolated(chain):
        batcher, gate, workers = lingering(monkeypatch, alice)
        threading.Thread(target=lambda: retiring.wait(120) and gate.set(), daemon=True).start()
        assert batcher._working, "the worker is still at work as the test ends"
    assert all(not worker.is_alive() for worker in workers)
    assert alice.batched() is not batcher, "the next test gets a batcher of its own"


def test_control_without_the_retirement_the_next_tests_call_joins_the_old_worker(chain, registry, alice, monkeypatch):
    monkeypatch.setattr(conftest, "_retire_batchers", lambda chain: None)
    with conftest.isolated(chain):
        batcher, gate, _workers = lingering(monkeypatch, alice)
    call = None
    try:
        assert alice.batched() is batcher and batcher._working
        started: list[str] = []
        start = threading.Thread.start

        def watched_start(thread):
            started.append(thread.name)
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", watched_start)
        call = threading.Thread(target=lambda: batcher.acquire("iso/next", ttl=60), name="next-test")
        call.start()
        wait_until(lambda: batcher.queued == 1, "the next test's call is queued")
        assert started == ["next-test"], "the call started no worker: the old one will take it"
    finally:
        gate.set()
        if call is not None:
            call.join(60)
    assert call is not None and not call.is_alive()


def test_a_transaction_that_can_never_be_mined_is_dropped_and_the_test_that_left_it_fails(on_anvil):
    """A sender that kept its nonce across a revert sends a nonce the chain never reaches: anvil queues it
    for good. The isolation drops it and fails the test naming it, and the pool is empty for the next
    test. Control, before the drop: every executable transaction is mined and the pool still holds it,
    so a teardown waiting for an empty pool would wait for ever (a CI run's cascade: every later test of
    that node errored in its teardown)."""
    import pytest
    from eth_account import Account

    from tests.support.anvil import dev_keys

    chain = on_anvil.chain
    key = Account.from_key(dev_keys(10)[8])
    gap = chain.rpc.nonce(key.address, "latest") + 1  # one past the next: queued behind a nonce never sent
    fees = {"maxFeePerGas": 10 * 10**9, "maxPriorityFeePerGas": 10**9}
    tx = {"to": key.address, "value": 0, "gas": 21_000, "nonce": gap, "chainId": chain.chain_id, **fees}
    with pytest.raises(AssertionError, match=f"could never be mined.*from {key.address.lower()} nonce {gap}"):
        with conftest.isolated(chain):
            chain.rpc.send_raw(key.sign_transaction(tx).raw_transaction)
            wait_until(
                lambda: int(chain.rpc.transport.request("txpool_status", [])["pending"], 16) == 0,
                "nothing executable is left",
            )
            assert not conftest._pool_is_empty(chain), "control: the pool holds it with nothing left to mine"
    assert conftest._pool_is_empty(chain), "dropped: the next test starts with an empty pool"
