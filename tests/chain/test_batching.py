"""Group commit in the SDK (chainfence.batching), on both backends, with threads and with asyncio tasks.

Which calls share a transaction is fixed by a gate at the node's door (tests/support/gates.py): the
first transaction of the sender waits there while the test starts the calls it wants gathered, and
waits until the batcher has queued them all; then the gate opens. No clock decides anything.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from chainfence import Guard, Lease, audit, batching
from chainfence._sdk.lease_state import AcquireReason
from chainfence.aio import AsyncChain, AsyncLease, AsyncRegistry
from chainfence.batching import AsyncBatcher, Batcher
from chainfence.errors import (
    InvalidInput,
    InvalidResourceName,
    InvalidTtl,
    LeaseExpired,
    LeaseHeld,
    LockDelayed,
    NotAdmitted,
    StaleToken,
    TransactionFailed,
)
from tests.support.gates import SendGate
from tests.support.sequencer import async_wait_until, wait_until
from tests.support.virtual_time import SteppedClock

# On hardhat's node and ganache too (tests/conftest.py); a test marked for hardhat alone needs what
# ganache lacks (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


@pytest.fixture
def fleet(chain, registry, alice, bob):
    """alice's batcher; bob holds "f/held"; carol's address namespace has a lock-delay of 1,000 s after
    bob's lease there expired; dave's admits nobody but bob."""
    carol, dave = (registry.connect(chain.accounts[i]) for i in (3, 4))
    c_ns, d_ns = carol.namespace().prefix, dave.namespace().prefix
    carol.namespace(c_ns).set_policy(lock_delay=1_000)
    dave.namespace(d_ns).set_policy(admission_required=True)
    bob.acquire("f/held", ttl=3_000)
    bob.acquire(f"{c_ns}/delayed", ttl=10)
    chain.advance_time(20)
    return alice.batched(), {"delayed": f"{c_ns}/delayed", "closed": f"{d_ns}/closed"}


def gathered(batcher: Batcher, calls: dict[str, Any], gate: SendGate, *, before_open: Any = None) -> dict[str, Any]:
    """Run ``calls`` (label -> callable) in threads while the first transaction waits at the gate; they all
    queue, then share the next transaction (``before_open()`` runs once they queued, before the gate
    opens). Returns each call's result or exception."""
    results: dict[str, Any] = {}

    def call(label: str, fn: Any) -> None:
        try:
            results[label] = fn()
        except Exception as error:
            results[label] = error

    threads = [threading.Thread(target=call, args=item) for item in calls.items()]
    threads[0].start()  # the pilot: its transaction goes first and waits at the gate
    gate.wait_sent()
    for thread in threads[1:]:
        thread.start()
    wait_until(lambda: batcher.queued == len(threads) - 1, "every other call queued behind the pilot")
    if before_open is not None:
        before_open()
    gate.open.set()
    for thread in threads:
        thread.join(120)
    return results


@pytest.mark.nodes("hardhat")
def test_one_busy_resource_refuses_only_its_own_item(chain, registry, alice, bob, fleet, monkeypatch):
    """Five calls in one transaction: two free names, one bob holds, one in its lock-delay, one in a
    namespace that does not admit alice. The free ones are acquired (their own tokens, consecutive, in one
    transaction); each of the others gets the lone call's typed error, naming its resource."""
    batcher, names = fleet
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    before, batches = registry.latest_token(), batcher.batches
    results = gathered(
        batcher,
        {
            "pilot": lambda: batcher.acquire("f/pilot", ttl=60),
            "free-1": lambda: batcher.acquire("f/free-1", ttl=60),
            "held": lambda: batcher.acquire("f/held", ttl=60),
            "delayed": lambda: batcher.acquire(names["delayed"], ttl=60),
            "closed": lambda: batcher.acquire(names["closed"], ttl=60),
            "free-2": lambda: batcher.acquire("f/free-2", ttl=60),
        },
        gate,
    )
    assert batcher.batches - batches == 2 and batcher.largest >= 5, "the pilot's transaction, then the five's"
    free = [results["free-1"], results["free-2"]]
    assert all(isinstance(lease, Lease) for lease in [results["pilot"], *free]), results
    assert free[0].tx_hash == free[1].tx_hash != results["pilot"].tx_hash
    assert sorted(lease.token for lease in [results["pilot"], *free]) == [before + 1, before + 2, before + 3]
    assert all(lease.holder == alice.sender and lease.reason is AcquireReason.UNHELD for lease in free)
    held, delayed, closed = results["held"], results["delayed"], results["closed"]
    assert isinstance(held, LeaseHeld) and held.holder == bob.sender and held.resource == "f/held"
    assert isinstance(delayed, LockDelayed) and delayed.resource == names["delayed"]
    assert isinstance(closed, NotAdmitted) and closed.resource == names["closed"]
    assert registry.lease_of("f/held").holder == bob.sender
    assert registry.lease_of(names["closed"]) is None and registry.lease_of(names["delayed"]) is None


def test_each_acquisition_keeps_its_own_token_holder_event_and_reason(chain, registry, alice, bob):
    """Reasons as the lone calls give them (never held, released, expired, re-acquired), and the audit's
    history holds each lease's own LeaseAcquired, as for a lone acquisition."""
    batcher = alice.batched()
    bob.acquire("k/released", ttl=60).release()
    bob.acquire("k/expired", ttl=5)
    mine = alice.acquire("k/mine", ttl=600)
    chain.advance_time(10)
    leases = {name: batcher.acquire(f"k/{name}", ttl=60) for name in ("new", "released", "expired", "mine")}
    reasons = {name: lease.reason for name, lease in leases.items()}
    assert reasons == {
        "new": AcquireReason.UNHELD,
        "released": AcquireReason.RELEASED,
        "expired": AcquireReason.EXPIRED,
        "mine": AcquireReason.REACQUIRED,
    }
    assert leases["mine"].previous_token == mine.token
    for name, lease in leases.items():
        (acquired,) = [
            e for e in audit.history(registry, f"k/{name}") if e.token == lease.token and e.kind.value == "acquired"
        ]
        assert (acquired.holder, acquired.tx_hash) == (alice.sender, lease.tx_hash)
        assert registry.check_current(f"k/{name}", lease.token).holder == alice.sender
    with pytest.raises(StaleToken):
        mine.renew()


def test_a_failed_transaction_fails_every_caller_with_its_own_typed_error_and_lands_nothing(
    chain, registry, alice, monkeypatch
):
    """A batch mined with status 0 (here out of gas: the bound is made too small) lands nothing: every caller
    in it gets TransactionFailed, its own instance, naming the batch; the batcher goes on afterwards."""
    from chainfence import batching

    batcher = alice.batched()
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    monkeypatch.setattr(batching, "gas_bound", lambda kinds: 50_000)  # below one first acquisition's gas
    before = registry.latest_token()
    results = gathered(batcher, {f"x{i}": (lambda i=i: batcher.acquire(f"x/{i}", ttl=60)) for i in range(5)}, gate)
    errors = list(results.values())
    assert all(isinstance(error, TransactionFailed) for error in errors), errors
    assert len({id(error) for error in errors}) == 5, "each caller its own error"
    assert any("one of 4 operations of one batch transaction" in "".join(getattr(e, "__notes__", ())) for e in errors)
    assert registry.latest_token() == before and all(registry.lease_of(f"x/{i}") is None for i in range(5))
    monkeypatch.undo()
    assert batcher.acquire("x/0", ttl=60).token == before + 1, "the batcher still works"


def test_leases_from_a_batch_keep_check_guard_and_audit_like_any_other(chain, registry, alice, tmp_path):
    """keep() renews through the batcher (a LeaseRenewed per renewal, as alone), check() holds, a guard
    accepts the token, leaving ``with`` releases through the batcher; the history is the lone calls'."""
    batcher = alice.batched()
    guard = Guard(registry, tmp_path / "marks.db")
    clock = SteppedClock()
    operations = batcher.operations
    with batcher.lease("k/kept", ttl=30) as lease, lease.keep(clock=clock, since=0.0) as keeping:
        guard.check("k/kept", lease.token)
        clock.now = 16.0
        wait_until(lambda: keeping.keeper.core.renewals == 1, "the keep-alive renewed once")
        lease.check()
    assert lease.released and registry.lease_of("k/kept") is None
    assert batcher.operations - operations == 3, "acquired, renewed and released through the batcher"
    kinds = [e.kind.value for e in audit.history(registry, "k/kept")]
    assert kinds == ["acquired", "renewed", "released"]
    guard.close()


def test_a_renewal_with_a_progress_marker_and_a_completion_are_sent_alone(chain, registry, alice):
    batcher = alice.batched()
    lease = batcher.acquire("k/marked", ttl=60)
    operations = batcher.operations
    lease.renew(progress=7)
    lease.complete(b"result")
    assert batcher.operations == operations
    (renewed,) = [e for e in audit.history(registry, "k/marked") if e.kind.value == "renewed"]
    assert renewed.progress == (7).to_bytes(32, "big")
    lease.release()
    assert batcher.operations == operations + 1


def test_bad_input_raises_at_once_and_queues_nothing(chain, registry, alice):
    batcher = alice.batched()
    batches = batcher.batches
    for bad in (lambda: batcher.acquire("", ttl=60), lambda: batcher.acquire("x" * 129, ttl=60)):
        with pytest.raises(InvalidResourceName):
            bad()
    with pytest.raises(InvalidTtl):
        batcher.acquire("k/ttl", ttl=0)
    with pytest.raises(InvalidTtl):
        batcher.acquire("k/ttl", ttl=registry.max_ttl + 1)
    with pytest.raises(InvalidInput):
        batcher.acquire("k/x", ttl=60, exclusive="yes")
    with pytest.raises(InvalidInput):
        batcher.renew("k/x", -1, 60)
    assert batcher.queued == 0 and batcher.batches == batches


def test_one_batcher_per_sender_and_settings(chain, registry, alice, bob):
    assert alice.batched() is alice.batched() is registry.connect(alice.sender).batched()
    assert bob.batched() is not alice.batched() and bob.batched().sender == bob.sender
    assert alice.batched(max_items=8) is not alice.batched()
    for bad in ({"max_items": 0}, {"max_items": 65}, {"window": -1}, {"max_items": True}):
        with pytest.raises(InvalidInput):
            alice.batched(**bad)


@pytest.mark.nodes("hardhat")
def test_each_sender_batches_its_own_calls_and_holds_what_it_acquires(chain, registry, alice, bob):
    """A batch never acts for another account: alice's and bob's calls go in transactions of their own."""
    a, b = alice.batched(), bob.batched()
    leases = {}
    threads = [
        threading.Thread(target=lambda: leases.__setitem__("a", a.acquire("s/a", ttl=60))),
        threading.Thread(target=lambda: leases.__setitem__("b", b.acquire("s/b", ttl=60))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert (leases["a"].holder, leases["b"].holder) == (alice.sender, bob.sender)
    assert leases["a"].tx_hash != leases["b"].tx_hash
    with pytest.raises(LeaseHeld):
        b.acquire("s/a", ttl=60)


@pytest.mark.nodes("hardhat")  # 64 callers: 5 s each on ganache, for the suite's time
def test_64_threads_acquire_renew_and_release_each_exactly_once(chain, registry, alice, monkeypatch):
    """64 agents (threads) on distinct resources: the 64 acquisitions queued behind a pilot's share one
    transaction; then each renews and releases (free-running). Every operation landed exactly once: one
    acquired, one renewed, one released event per resource; tokens unique; nothing left held."""
    batcher = alice.batched()
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    before, operations, waited = registry.latest_token(), batcher.operations, batcher.waited
    barrier = threading.Barrier(64)

    def agent(i: int) -> Lease:
        lease = batcher.acquire(f"t/{i}", ttl=60)
        barrier.wait(120)
        lease.renew()
        lease.release()
        return lease

    calls = {"pilot": lambda: batcher.acquire("t/pilot", ttl=60)}
    calls.update({f"agent-{i}": (lambda i=i: agent(i)) for i in range(64)})
    results = gathered(batcher, calls, gate)
    leases = [results[f"agent-{i}"] for i in range(64)]
    assert all(isinstance(lease, Lease) for lease in leases), [r for r in leases if not isinstance(r, Lease)][:3]
    assert len({lease.tx_hash for lease in leases}) == 1, "the 64 acquisitions shared one transaction"
    assert sorted(lease.token for lease in leases) == list(range(before + 2, before + 66))
    assert batcher.operations - operations == 1 + 64 * 3
    for i in (0, 31, 63):
        kinds = [e.kind.value for e in audit.history(registry, f"t/{i}")]
        assert kinds == ["acquired", "renewed", "released"], (i, kinds)
    assert all(registry.lease_of(f"t/{i}") is None for i in range(64))
    assert registry.latest_token() == before + 65
    grew = {n: batcher.waited.get(n, 0) - waited.get(n, 0) for n in batcher.waited}
    assert grew.get(2, 0) >= 64, "the 64 acquisitions waited for the pilot's transaction, then went in their own"
    assert max(n for n, count in grew.items() if count) <= 2, "no operation waited for more than two transactions"


# ---------------------------------------------------------------------------
# asyncio tasks
# ---------------------------------------------------------------------------


def run(chain, body):
    async def main():
        async with AsyncChain.over(chain) as achain:
            return await asyncio.wait_for(body(achain), 120)

    return asyncio.run(main())


async def batcher_on(achain: AsyncChain, registry, index: int) -> AsyncBatcher:
    areg = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[index])
    batcher = areg.batched()
    assert isinstance(batcher, AsyncBatcher) and batcher.batcher is registry.connect(areg.sender).batched()
    return batcher


@pytest.mark.nodes("hardhat")
def test_tasks_gather_into_one_transaction_with_their_own_outcomes(chain, registry, alice, bob, fleet, monkeypatch):
    """The same five calls as the threads' test, as asyncio tasks: one transaction behind the pilot's, the
    free ones acquired, each refusal typed, for its own task only."""
    _, names = fleet

    async def body(achain):
        batcher = await batcher_on(achain, registry, 1)
        gate = SendGate(monkeypatch, chain.rpc, alice.sender)  # the worker sends over the blocking layer
        pilot = asyncio.ensure_future(batcher.acquire("f/pilot", ttl=60))
        await gate.async_wait_sent()
        calls = ["f/free-1", "f/held", names["delayed"], names["closed"], "f/free-2"]
        tasks = [asyncio.ensure_future(batcher.acquire(name, ttl=60)) for name in calls]
        await async_wait_until(lambda: batcher.queued == 5, "the five queued")
        gate.open.set()
        results = await asyncio.gather(pilot, *tasks, return_exceptions=True)
        return dict(zip(["pilot", *calls], results))

    results = run(chain, body)
    assert all(isinstance(results[n], AsyncLease) for n in ("pilot", "f/free-1", "f/free-2")), results
    assert results["f/free-1"].tx_hash == results["f/free-2"].tx_hash != results["pilot"].tx_hash
    assert isinstance(results["f/held"], LeaseHeld) and results["f/held"].holder == bob.sender
    assert isinstance(results[names["delayed"]], LockDelayed)
    assert isinstance(results[names["closed"]], NotAdmitted)


@pytest.mark.nodes("hardhat")  # 64 callers: 5 s each on ganache, for the suite's time
def test_64_tasks_acquire_renew_and_release_each_exactly_once(chain, registry, alice, monkeypatch):
    async def body(achain):
        batcher = await batcher_on(achain, registry, 1)
        gate = SendGate(monkeypatch, chain.rpc, alice.sender)  # the worker sends over the blocking layer
        before, operations = registry.latest_token(), batcher.operations
        pilot = asyncio.ensure_future(batcher.acquire("u/pilot", ttl=60))
        await gate.async_wait_sent()
        acquired = asyncio.Event()

        async def agent(i: int) -> AsyncLease:
            lease = await batcher.acquire(f"u/{i}", ttl=60)
            await acquired.wait()
            await lease.renew()
            await lease.release()
            return lease

        agents = [asyncio.ensure_future(agent(i)) for i in range(64)]
        await async_wait_until(lambda: batcher.queued == 64, "the 64 queued")
        gate.open.set()
        await pilot
        await async_wait_until(lambda: batcher.operations - operations >= 65, "the 64 acquired")
        acquired.set()
        leases = await asyncio.gather(*agents)
        return before, operations, leases, batcher.operations

    before, operations, leases, after = run(chain, body)
    assert len({lease.tx_hash for lease in leases}) == 1
    assert sorted(lease.token for lease in leases) == list(range(before + 2, before + 66))
    assert after - operations == 1 + 64 * 3
    assert all(lease.released for lease in leases) and all(registry.lease_of(f"u/{i}") is None for i in range(64))
    for i in (0, 63):
        assert [e.kind.value for e in audit.history(registry, f"u/{i}")] == ["acquired", "renewed", "released"]


def test_an_async_batched_lease_keeps_renews_and_releases_through_the_batcher(chain, registry, alice):
    async def body(achain):
        batcher = await batcher_on(achain, registry, 1)
        operations = batcher.operations
        async with batcher.lease("v/kept", ttl=60) as lease:
            assert isinstance(lease, AsyncLease) and lease.holder == alice.sender
            chain.advance_time(5)
            await lease.renew()
        assert lease.released
        return batcher.operations - operations

    assert run(chain, body) == 3
    assert [e.kind.value for e in audit.history(registry, "v/kept")] == ["acquired", "renewed", "released"]


@pytest.mark.nodes("hardhat")
def test_a_renewal_of_an_expired_batched_lease_is_refused_for_its_caller_only(chain, registry, alice):
    batcher = alice.batched()
    short = batcher.acquire("w/short", ttl=10)
    long = batcher.acquire("w/long", ttl=600)
    chain.advance_time(20)
    results: dict[str, Any] = {}

    def renew(name: str, lease: Lease) -> None:
        try:
            results[name] = lease.renew()
        except Exception as error:
            results[name] = error

    threads = [threading.Thread(target=renew, args=item) for item in (("short", short), ("long", long))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert isinstance(results["short"], LeaseExpired) and results["short"].resource == "w/short"
    assert results["long"] is long and long.expires_at > chain.now() + 500


# ---------------------------------------------------------------------------
# Confirmations: a batch counts once it is deep enough, as a lone call does
# ---------------------------------------------------------------------------


def confirming(chain, monkeypatch, *, mine: bool) -> SteppedClock:
    """The chain asks for one confirmation; the sender's clock moves only when it sleeps (SteppedClock), and at
    each of its pauses a block is mined (``mine``) or none is (the confirmation never comes)."""
    clock = SteppedClock(on_sleep=(lambda: chain.mine()) if mine else None)
    monkeypatch.setattr(chain, "confirmations", 1)
    monkeypatch.setattr(chain._sender, "_clock", clock)
    monkeypatch.setattr(chain._sender, "_sleep", clock.sleep)
    monkeypatch.setattr(chain._sender, "confirmation_timeout", 0.5)  # of the stepped clock: some 50-100 polls
    return clock


@pytest.mark.nodes("hardhat")
def test_a_batch_one_block_deep_gives_each_caller_its_checked_lease(chain, registry, alice, bob, monkeypatch):
    bob.acquire("d/held", ttl=600)
    batcher = alice.batched()
    confirming(chain, monkeypatch, mine=True)
    results = {}
    for name in ("d/free", "d/held"):
        try:
            results[name] = batcher.acquire(name, ttl=600)
        except LeaseHeld as held:
            results[name] = held
    assert isinstance(results["d/free"], Lease) and chain.block_number() > results["d/free"].block_number
    assert isinstance(results["d/held"], LeaseHeld)


@pytest.mark.nodes("hardhat")
def test_a_batch_not_deep_enough_in_time_hands_each_acquisition_its_lease_with_not_confirmed(
    chain, registry, alice, bob, monkeypatch
):
    """NotConfirmed (the batch was mined, no block came on top in time) carries each caller's own lease, never
    forgotten, as a lone acquisition's does; a refused operation's caller gets NotConfirmed too (its refusal is
    not final until the batch is deep enough)."""
    from chainfence.errors import NotConfirmed

    bob.acquire("d/held", ttl=600)
    batcher = alice.batched()
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    confirming(chain, monkeypatch, mine=False)
    results = gathered(
        batcher,
        {
            "pilot": lambda: batcher.acquire("d/pilot", ttl=600),
            "free": lambda: batcher.acquire("d/free", ttl=600),
            "held": lambda: batcher.acquire("d/held", ttl=600),
        },
        gate,
    )
    assert all(isinstance(error, NotConfirmed) for error in results.values()), results
    assert (
        results["free"].lease.holder == alice.sender
        and registry.lease_of("d/free").token == results["free"].lease.token
    )
    assert results["held"].lease is None and results["pilot"].lease.resource == "d/pilot"
    assert results["free"].tx_hash == results["held"].tx_hash != results["pilot"].tx_hash


# ---------------------------------------------------------------------------
# Latency: the next batch is taken once the callers just settled are back
# ---------------------------------------------------------------------------


def without_the_cohort_wait(monkeypatch) -> None:
    """The naive worker (the control): it takes the next batch as soon as it settled the last one."""
    commit = Batcher._commit_steps

    def commit_without_cohort(self, batch):
        yield from commit(self, batch)
        return None

    monkeypatch.setattr(Batcher, "_commit_steps", commit_without_cohort)


class SlowToComeBack:
    """Holds the thread (or task) named ``name`` inside its first wait for an outcome after that outcome came,
    as a thread the GIL or the OS has not run yet is held, until ``release`` is set; ``worker_waits`` is set
    when the worker waits for callers to come back (the only wait with a timeout)."""

    def __init__(self, monkeypatch, name: str):
        from chainfence._core.effects import Signal

        self.release = threading.Event()
        self.held = threading.Event()
        self.worker_waits = threading.Event()
        wait, wait_async = Signal.wait, Signal.wait_async
        gate = self

        def held_wait(signal, timeout=None):
            if timeout is not None:
                gate.worker_waits.set()
            value = wait(signal) if timeout is None else wait(signal, timeout)
            if threading.current_thread().name == name and not gate.held.is_set():
                gate.held.set()
                gate.release.wait(120)
            return value

        async def held_wait_async(signal, timeout=None):
            if timeout is not None:
                gate.worker_waits.set()
            value = await (wait_async(signal) if timeout is None else wait_async(signal, timeout))
            task = asyncio.current_task()
            if task is not None and task.get_name() == name and not gate.held.is_set():
                gate.held.set()
                await asyncio.get_running_loop().run_in_executor(None, gate.release.wait, 120)
            return value

        monkeypatch.setattr(Signal, "wait", held_wait)
        monkeypatch.setattr(Signal, "wait_async", held_wait_async)


def counting_sends(monkeypatch, rpc, sender: str) -> list[int]:
    """Counts the sends of ``sender`` that reach the node (blocking or asyncio ``rpc``)."""
    sends: list[int] = []
    original = rpc.send_raw

    def send_raw(raw, *args, **kwargs):
        if kwargs.get("sender") == sender:
            sends.append(1)
        return original(raw, *args, **kwargs)

    async def send_raw_async(raw, *args, **kwargs):
        if kwargs.get("sender") == sender:
            sends.append(1)
        return await original(raw, *args, **kwargs)

    monkeypatch.setattr(rpc, "send_raw", send_raw_async if asyncio.iscoroutinefunction(original) else send_raw)
    return sends


def released_in(registry, name: str) -> str:
    (released,) = [e for e in audit.history(registry, name) if e.kind.value == "released"]
    return released.tx_hash


def slow_caller_round(chain, registry, alice, monkeypatch) -> dict[str, Any]:
    """A and B acquire in one transaction (behind a pilot's), then each releases at once. A's thread is slow to
    come back from its wait: it is held until the worker waits for it (the worker's wait is made long enough
    never to end first) or, naive, until the worker sent B's release. Returns what was sent meanwhile."""
    monkeypatch.setattr(batching, "_MIN_COHORT_WAIT", 120.0, raising=False)
    batcher = alice.batched()
    sends = counting_sends(monkeypatch, chain.rpc, alice.sender)
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    slow = SlowToComeBack(monkeypatch, "agent-a")
    seen: dict[str, Any] = {}

    def agent(name: str) -> None:
        batcher.acquire(name, ttl=60).release()

    def release_a_when_due() -> None:
        slow.held.wait(120)
        wait_until(lambda: slow.worker_waits.is_set() or len(sends) >= 3, "the worker waits for A, or sent B's release")
        wait_until(lambda: batcher.queued == 1 or len(sends) >= 3, "B's release queued, or sent")
        seen["sends while A was away"] = len(sends)
        seen["queued while A was away"] = batcher.queued
        slow.release.set()

    pilot = threading.Thread(target=lambda: batcher.acquire("b/pilot", ttl=60))
    pilot.start()
    gate.wait_sent()
    threads = [threading.Thread(target=agent, args=(f"b/{n}",), name=f"agent-{n}") for n in ("a", "b")]
    for thread in threads:
        thread.start()
    wait_until(lambda: batcher.queued == 2, "A and B queued behind the pilot")
    releaser = threading.Thread(target=release_a_when_due)
    releaser.start()
    gate.open.set()
    for thread in (pilot, *threads, releaser):
        thread.join(120)
    assert [e.kind.value for e in audit.history(registry, "b/a")] == ["acquired", "released"]
    assert [e.kind.value for e in audit.history(registry, "b/b")] == ["acquired", "released"]
    return seen


def test_the_next_batch_waits_for_a_caller_slow_to_come_back(chain, registry, alice, monkeypatch):
    """B comes back at once and queues its release; A's thread is slow to wake (as one the GIL or the OS has
    not run yet): the worker waits for A before it takes the next batch (B's release stays queued, nothing
    is sent), so that A's release can join it rather than wait for it."""
    seen = slow_caller_round(chain, registry, alice, monkeypatch)
    assert seen == {"sends while A was away": 2, "queued while A was away": 1}


def test_control_without_the_wait_a_caller_slow_to_come_back_misses_the_next_batch(chain, registry, alice, monkeypatch):
    without_the_cohort_wait(monkeypatch)
    seen = slow_caller_round(chain, registry, alice, monkeypatch)
    assert seen == {"sends while A was away": 3, "queued while A was away": 0}, "B's release went without A's"


def test_a_caller_that_never_comes_back_holds_the_next_batch_back_only_so_long(chain, registry, alice, monkeypatch):
    """A is held inside its wait until the end: B's release still goes out (the worker waited for A at most
    as long as the last transaction took), and A's comes after it."""
    batcher = alice.batched()
    slow = SlowToComeBack(monkeypatch, "agent-a")
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    pilot = threading.Thread(target=lambda: batcher.acquire("n/pilot", ttl=60))
    pilot.start()
    gate.wait_sent()
    results: dict[str, Any] = {}
    a = threading.Thread(target=lambda: results.__setitem__("a", batcher.acquire("n/a", ttl=60)), name="agent-a")
    a.start()
    wait_until(lambda: batcher.queued == 1, "A queued behind the pilot")
    gate.open.set()
    slow.held.wait(120)
    lease = batcher.acquire("n/b", ttl=60)  # A never came back: this goes out all the same
    lease.release()
    assert registry.lease_of("n/b") is None and slow.worker_waits.is_set()
    slow.release.set()
    a.join(120)
    pilot.join(120)
    assert results["a"].tx_hash != lease.tx_hash


def task_slow_to_come_back(chain, registry, alice, monkeypatch) -> tuple[str, str]:
    """The tasks' face of :func:`slow_caller_round`: A's task is held after its outcome came until the worker
    waits for it, or (naive) sent B's release; returns the transactions of A's and B's releases."""
    monkeypatch.setattr(batching, "_MIN_COHORT_WAIT", 120.0, raising=False)
    slow = SlowToComeBack(monkeypatch, "agent-a")

    async def body(achain):
        batcher = await batcher_on(achain, registry, 1)
        sends = counting_sends(monkeypatch, chain.rpc, alice.sender)
        gate = SendGate(monkeypatch, chain.rpc, alice.sender)  # the worker sends over the blocking layer
        pilot = asyncio.ensure_future(batcher.acquire("t/pilot", ttl=60))
        await gate.async_wait_sent()

        async def agent(name: str) -> None:
            lease = await batcher.acquire(name, ttl=60)
            await lease.release()

        tasks = [asyncio.create_task(agent(f"t/{n}"), name=f"agent-{n}") for n in ("a", "b")]
        await async_wait_until(lambda: batcher.queued == 2, "A and B queued")
        gate.open.set()
        await async_wait_until(
            lambda: slow.held.is_set() and (slow.worker_waits.is_set() or len(sends) >= 3),
            "the worker waits for A, or sent B's release",
        )
        slow.release.set()
        await asyncio.gather(pilot, *tasks)

    run(chain, body)
    return released_in(registry, "t/a"), released_in(registry, "t/b")


def test_a_task_slow_to_come_back_joins_the_next_transaction(chain, registry, alice, monkeypatch):
    """B's task releases at once, A's task is slow to resume: the worker waits, and A's release joins B's
    (in one loop, A's task queues its release before the worker runs again)."""
    a, b = task_slow_to_come_back(chain, registry, alice, monkeypatch)
    assert a == b


def test_control_without_the_wait_a_task_slow_to_come_back_misses_the_next_batch(chain, registry, alice, monkeypatch):
    without_the_cohort_wait(monkeypatch)
    a, b = task_slow_to_come_back(chain, registry, alice, monkeypatch)
    assert a != b
