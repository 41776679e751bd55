"""The paused holder: A pauses past its lease, B takes over, A wakes and writes.

Agents run in their own threads; a Sequencer fixes the interleaving, so the
scenario is the same on every run. Each fenced scenario has an unfenced
control that shows the failure the guard prevents.
"""

from __future__ import annotations

import threading

import pytest

from chainfence import AcquireReason, Guard
from chainfence.errors import StaleToken, TokenNotCurrent
from tests.support.sequencer import Sequencer

RESOURCE = "reports/daily"


class ReportStore:
    """The shared resource: last accepted write wins. With a guard, writes present their token."""

    def __init__(self, guard: Guard | None):
        self.guard = guard
        self.content: str | None = None
        self.log: list[tuple[str, int, str]] = []
        self._lock = threading.Lock()

    def write(self, token: int, text: str) -> None:
        with self._lock:
            if self.guard is not None:
                try:
                    self.guard.check(RESOURCE, token)
                except TokenNotCurrent as rejected:
                    self.log.append(("rejected", token, text))
                    raise rejected
            self.content = text
            self.log.append(("accepted", token, text))


def run_in_threads(*targets):
    errors: list[BaseException] = []

    def wrap(target):
        def run():
            try:
                target()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a scenario thread hung"
    return errors


def paused_holder_scenario(registry, store: ReportStore, *, a_writes_before_pause: bool = True):
    """A: acquire, (write part 1), pause | chain time passes | B: acquire, write | A: wakes, writes."""
    chain = registry.chain
    agent_a = registry.connect(chain.accounts[1])
    agent_b = registry.connect(chain.accounts[2])
    seq = Sequencer()
    outcome: dict[str, object] = {}

    def a():
        with seq(0):
            outcome["a_lease"] = lease = agent_a.acquire(RESOURCE, ttl=30)
            if a_writes_before_pause:
                store.write(lease.token, "A: part 1")
        # ---- A is paused here (GC, SIGSTOP, slow model call) until step 3 ----
        with seq(3):
            try:
                store.write(outcome["a_lease"].token, "A: part 2 (stale)")
                outcome["a_late_write"] = "accepted"
            except TokenNotCurrent as rejected:
                outcome["a_late_write"] = rejected

    def time_passes():
        with seq(1):
            chain.advance_time(45)

    def b():
        with seq(2):
            outcome["b_lease"] = lease = agent_b.acquire(RESOURCE, ttl=30)
            store.write(lease.token, "B: complete report")

    errors = run_in_threads(a, time_passes, b)
    assert not errors, errors
    return outcome


def test_guard_rejects_the_paused_holder_and_keeps_b_write(embedded, tmp_path):
    """Fenced: A's late write raises StaleToken (1 < 2) and the report keeps B's content."""
    with Guard(embedded, path=tmp_path / "guard.sqlite") as guard:
        store = ReportStore(guard)
        outcome = paused_holder_scenario(embedded, store)
        rejected = outcome["a_late_write"]
        assert isinstance(rejected, StaleToken)
        assert (rejected.token, rejected.current_token) == (outcome["a_lease"].token, outcome["b_lease"].token)
        assert outcome["b_lease"].reason is AcquireReason.EXPIRED
        assert store.content == "B: complete report"
        assert guard.mark(RESOURCE) == outcome["b_lease"].token


def test_control_without_the_guard_loses_b_write(embedded):
    """Unfenced control: the same interleaving lets A overwrite B. This is the bug fencing fixes."""
    store = ReportStore(guard=None)
    outcome = paused_holder_scenario(embedded, store)
    assert outcome["a_late_write"] == "accepted"
    assert store.content == "A: part 2 (stale)", "the control must demonstrate the lost write"


def test_a_holder_whose_first_write_comes_after_losing_the_lease_is_rejected_on_chain(embedded, tmp_path):
    """A never wrote before its pause, so its token is above the guard's mark: the chain says it is stale."""
    with Guard(embedded, path=tmp_path / "guard.sqlite") as guard:
        store = ReportStore(guard)
        outcome = paused_holder_scenario(embedded, store, a_writes_before_pause=False)
        assert isinstance(outcome["a_late_write"], StaleToken)
        assert store.content == "B: complete report"


def test_a_stale_write_before_the_successor_writes_cannot_outlive_it(embedded, tmp_path):
    """Mark mode's documented window: A wakes before B writes; its token still equals the mark, so that
    write lands. B's write then raises the mark and wins, and A is fenced from then on."""
    chain = embedded.chain
    agent_a = embedded.connect(chain.accounts[1])
    agent_b = embedded.connect(chain.accounts[2])
    with Guard(embedded, path=tmp_path / "guard.sqlite") as guard:
        store = ReportStore(guard)
        a = agent_a.acquire(RESOURCE, ttl=30)
        store.write(a.token, "A: part 1")
        chain.advance_time(45)
        b = agent_b.acquire(RESOURCE, ttl=30)
        store.write(a.token, "A: part 2 (late, before B's first write)")
        store.write(b.token, "B: complete report")
        with pytest.raises(StaleToken):
            store.write(a.token, "A: part 3")
        assert store.content == "B: complete report"


def test_a_restarted_agent_fences_off_its_own_zombie(embedded, tmp_path):
    """An agent that restarts and re-acquires gets a new token; its pre-restart self is then stale."""
    agent = embedded.connect(embedded.chain.accounts[1])
    with Guard(embedded, path=tmp_path / "guard.sqlite") as guard:
        store = ReportStore(guard)
        old = agent.acquire(RESOURCE, ttl=300)
        store.write(old.token, "incarnation 1")
        new = agent.acquire(RESOURCE, ttl=300)  # same account, after a restart
        assert new.reason is AcquireReason.REACQUIRED
        store.write(new.token, "incarnation 2")
        with pytest.raises(StaleToken):
            store.write(old.token, "zombie of incarnation 1")
        assert store.content == "incarnation 2"
