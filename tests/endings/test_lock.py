"""``chainfence lock NAME -- CMD`` x every way a lease ends and every way an acquisition is refused, on both backends.

Each scenario runs `lock` (``chainfence.cli.lock.run``, what the CLI calls
once connected) in this process, on the test's chain, with the issue's
forking command: ``sh -c 'writer; cleanup'`` (tests/support/lock_writer.py).
`lock`'s keep-alive counts on a SteppedClock the test moves; its sentinel,
a real process, on the lease clock. A driver thread waits for the writer's
first line, ends the lease one way (tests/endings/holding.py, as for
``keep``), and moves the clock to the next renewal (or past the safe
deadline): `lock` must then stop the whole session (the shell *and* the
writer it forked) and return 7, its loss naming the way.

The controls beside them show what the naive versions did: a keep-alive
that took a revoke for a transient error (the command ran on until the
deadline, then "deadline" was blamed), and a loss that signals only the
shell (its writer writes on).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chainfence import EventKind, audit, cli
from chainfence._sdk.validate import resource_id
from chainfence.cli import _supervisor
from chainfence.cli import lock as _cli_lock
from chainfence.endings import End, LocalEnd, Refusal
from chainfence.errors import LeaseHeld, LeaseLost, LockDelayed, NodeUnreachable, NotAdmitted
from chainfence.lease import Lease, LeaseStatus
from tests.endings.holding import NAMESPACE, TTL, World, end
from tests.endings.matrix import covers
from tests.support.lock_writer import alive, forking_command, log, writer
from tests.support.sequencer import wait_until
from tests.support.virtual_time import SteppedClock, WaitClock

JOB = f"{NAMESPACE}/job"
GRACE = 5
#: `lock`'s keep-alive for TTL and GRACE: the first renewal is due at ttl/2; the safe deadline passes at
#: ttl - (grace + 1) - 2 after the acquisition's send (the test's clock reads 0 then).
DUE, DEADLINE = TTL / 2, TTL - (GRACE + 1) - 2


@pytest.fixture
def w(chain) -> World:
    return World.on(chain)


class Run:
    """`lock` in this thread (the main thread: it takes signals), a driver thread beside it."""

    def __init__(
        self,
        registry: Any,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        *,
        wait: float = 0,
        take_over: bool = False,
        command: list[str] | None = None,
    ):
        self.registry = registry
        self.dir = tmp_path
        self.clock = SteppedClock()
        monkeypatch.setattr(_cli_lock, "_CLOCK", self.clock)
        self.lost: list[LeaseLost] = []
        self.wait = wait
        self.take_over = take_over
        self.command = forking_command(tmp_path) if command is None else command
        self.errors: list[BaseException] = []
        self.sentinels: list[_supervisor.Sentinel] = []
        start = _supervisor.Sentinel.start

        def started(*args: Any, **kwargs: Any) -> _supervisor.Sentinel:
            sentinel = start(*args, **kwargs)
            self.sentinels.append(sentinel)
            return sentinel

        monkeypatch.setattr(_supervisor.Sentinel, "start", started)
        self.leases: list[Lease] = []
        acquire = registry.acquire

        def acquired(*args: Any, **kwargs: Any) -> Lease:
            lease = acquire(*args, **kwargs)
            self.leases.append(lease)
            return lease

        monkeypatch.setattr(registry, "acquire", acquired)

    def __call__(self, drive: Callable[[Run], None]) -> int:
        def driver() -> None:
            try:
                drive(self)
            except BaseException as error:
                self.errors.append(error)
                self.signal(signal.SIGTERM)  # never leave `lock` (and the test) hanging

        thread = threading.Thread(target=driver)
        thread.start()
        try:
            return _cli_lock.run(
                self.registry,
                JOB,
                self.command,
                ttl=TTL,
                wait=self.wait,
                grace=GRACE,
                take_over=self.take_over,
                on_lost=self.lost.append,
            )
        finally:
            thread.join(120)
            assert not thread.is_alive()
            if self.errors:
                raise self.errors[0]

    def writer(self) -> tuple[int, str]:
        wait_until(lambda: writer(self.dir), "the command's writer wrote its first line")
        found = writer(self.dir)
        assert found is not None
        return found

    def lease(self, token: str) -> Any:
        """What holding.end() needs of the lease `lock` holds."""
        return SimpleNamespace(resource=JOB, resource_id=resource_id(JOB), token=int(token), item=None)

    def failures(self) -> int:
        """Renewals of `lock`'s keep-alive that failed so far."""
        keeper = self.leases[0].keeper if self.leases else None
        return keeper.core.failures if keeper is not None else 0

    def at(self, seconds: float) -> None:
        """Move `lock`'s keep-alive clock (it re-reads it every 20 ms)."""
        self.clock.now = seconds

    def signal(self, sig: int) -> None:
        os.kill(os.getpid(), sig)  # to `lock`: this process


def lost_the_command(run: Run, code: int, way: Any, *, writer_pid: int, token: str) -> None:
    """`lock` returned 7, its loss named ``way`` once, and no process of the command is left."""
    assert code == cli.lock_exit_code(cli.EXIT_LOST)
    assert [(e.why, e.resource, e.token) for e in run.lost] == [(way.value, JOB, int(token))]
    assert not alive(writer_pid), "the writer the shell forked was stopped too"
    assert run.sentinels and run.sentinels[0].status == _supervisor.SENTINEL_DONE, "the sentinel was told, and left"


def lose(w: World, way: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, successor: bool = False) -> Run:
    """`lock` runs the forking command; the lease ends ``way``; the next renewal finds it."""
    snapshot = w.chain.snapshot() if way is End.ROLLED_BACK else None
    run = Run(w.alice, tmp_path, monkeypatch)
    seen: dict[str, Any] = {}

    def drive(run: Run) -> None:
        seen["pid"], seen["token"] = run.writer()
        end(way, w, run.lease(seen["token"]), snapshot=snapshot)
        if successor:
            w.bob.acquire(JOB, TTL)
        run.at(DUE)

    code = run(drive)
    lost_the_command(run, code, way, writer_pid=seen["pid"], token=seen["token"])
    return run


# ---------------------------------------------------------------------------
# Every end of the lease: found at the next renewal, the whole session stopped, exit 107 naming it
# ---------------------------------------------------------------------------


@covers("lock", End.EXPIRED)
def test_lock_expired(w, tmp_path, monkeypatch):
    """Chain time passed the expiry (the node's clock ran ahead of `lock`'s): LeaseExpired at the renewal."""
    run = lose(w, End.EXPIRED, tmp_path, monkeypatch)
    assert type(run.lost[0].__cause__).__name__ == "LeaseExpired"


@covers("lock", End.RELEASED)
def test_lock_released_by_another_process_of_the_key(w, tmp_path, monkeypatch):
    run = lose(w, End.RELEASED, tmp_path, monkeypatch)
    assert type(run.lost[0].__cause__).__name__ == "LeaseReleased"


@covers("lock", End.COMPLETED)
def test_lock_a_completion_of_its_plain_lease_ends_nothing(w, tmp_path, monkeypatch):
    """`lock` holds a plain lease: completing it (the command recording its result) ends nothing, so the
    renewal after it succeeds and the command runs on; only a claimed item is done for good."""
    run = Run(w.alice, tmp_path, monkeypatch)
    seen: dict[str, Any] = {}

    def drive(run: Run) -> None:
        seen["pid"], token = run.writer()
        w.alice.complete(JOB, int(token), b"the report")
        run.at(DUE)
        wait_until(
            lambda: any(e.kind is EventKind.RENEWED for e in audit.history(w.registry, JOB)), "the renewal went through"
        )
        assert alive(seen["pid"])
        run.signal(signal.SIGTERM)  # done: forwarded to the command

    assert run(drive) == 128 + signal.SIGTERM
    assert run.lost == [] and not alive(seen["pid"])
    kinds = [e.kind for e in audit.history(w.registry, JOB)]
    assert kinds.index(EventKind.COMPLETED) < kinds.index(EventKind.RENEWED) and kinds[-1] is EventKind.RELEASED


@covers("lock", End.SUPERSEDED)
def test_lock_superseded_by_the_key_s_own_reacquisition(w, tmp_path, monkeypatch):
    """Another process of the key acquires again (`lock --take-over`, or the SDK): the first is fenced off."""
    lose(w, End.SUPERSEDED, tmp_path, monkeypatch)


@covers("lock", End.REVOKED)
@pytest.mark.parametrize("successor", [False, True], ids=["renewal-finds-it-revoked", "then-bob-acquired"])
def test_lock_revoked_by_the_admin(w, tmp_path, monkeypatch, successor):
    """The defect: the command ran on for the rest of the safe window and `lock` blamed the deadline.
    Now the first renewal after the revoke stops it and says "revoked"."""
    run = lose(w, End.REVOKED, tmp_path, monkeypatch, successor=successor)
    assert "revoked" in str(run.lost[0])


def test_control_a_lock_that_takes_a_revoke_for_a_transient_error_blames_the_deadline(w, tmp_path, monkeypatch):
    """The control: with the keep-alive's old reading (LeaseRevoked retried like a node that did not answer),
    the renewal after the revoke changes nothing; the command writes on until the safe deadline, and the
    loss says "deadline"."""
    from chainfence import keepalive
    from chainfence.errors import LeaseRevoked

    real = keepalive.loss_reason
    monkeypatch.setattr(keepalive, "loss_reason", lambda e: None if isinstance(e, LeaseRevoked) else real(e))
    run = Run(w.alice, tmp_path, monkeypatch)
    seen: dict[str, Any] = {}

    def drive(run: Run) -> None:
        seen["pid"], seen["token"] = run.writer()
        w.carol.namespace(NAMESPACE).revoke(JOB)
        run.at(DUE)
        wait_until(lambda: run.failures() >= 1, "the renewal after the revoke failed")
        assert alive(seen["pid"]), "still writing after the renewal that found the revoke"
        run.at(DEADLINE)

    code = run(drive)
    assert code == cli.lock_exit_code(cli.EXIT_LOST) and [e.why for e in run.lost] == ["deadline"]


@covers("lock", End.GRANTED)
def test_lock_granted_away_by_the_admin(w, tmp_path, monkeypatch):
    lose(w, End.GRANTED, tmp_path, monkeypatch)
    assert w.registry.lease_of(JOB).holder == w.bob.sender


@covers("lock", End.ROLLED_BACK)
def test_lock_rolled_back(w, tmp_path, monkeypatch):
    """The chain lost the history that issued `lock`'s token (a dev node restarted from an older state)."""
    lose(w, End.ROLLED_BACK, tmp_path, monkeypatch)


# ---------------------------------------------------------------------------
# The holder's own ends: no renewal gets through, the renewer breaks, the sentinel dies
# ---------------------------------------------------------------------------


def break_renewals(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    def broken(self: Lease, ttl: Any) -> int:
        raise error

    monkeypatch.setattr(Lease, "_kept_renew_steps", broken)


@covers("lock", LocalEnd.DEADLINE)
def test_lock_deadline(w, tmp_path, monkeypatch):
    """No renewal gets through (the node does not answer): retried until the safe deadline, then the session
    is stopped while the chain still holds the lease live (released afterwards: nothing runs any more)."""
    break_renewals(monkeypatch, NodeUnreachable("no node answers"))
    run = Run(w.alice, tmp_path, monkeypatch)
    seen: dict[str, Any] = {}

    def drive(run: Run) -> None:
        seen["pid"], seen["token"] = run.writer()
        run.at(DUE)
        wait_until(lambda: run.failures() >= 1, "a renewal failed")
        assert alive(seen["pid"]), "a transient failure is retried: the command runs on"
        run.at(DEADLINE)

    code = run(drive)
    lost_the_command(run, code, LocalEnd.DEADLINE, writer_pid=seen["pid"], token=seen["token"])
    last = w.registry.last_lease(JOB)
    assert (last.token, last.status) == (int(seen["token"]), LeaseStatus.RELEASED), "lost while live: then released"


@covers("lock", LocalEnd.ERROR)
def test_lock_error_in_the_renewer(w, tmp_path, monkeypatch):
    """The renewer fails in a way that is not a chain error (a bug): not pretended to be a kept lease."""
    break_renewals(monkeypatch, RuntimeError("a bug in the renewer"))
    lose_locally = Run(w.alice, tmp_path, monkeypatch)
    seen: dict[str, Any] = {}

    def drive(run: Run) -> None:
        seen["pid"], seen["token"] = run.writer()
        run.at(DUE)

    code = lose_locally(drive)
    lost_the_command(lose_locally, code, LocalEnd.ERROR, writer_pid=seen["pid"], token=seen["token"])


@covers("lock", LocalEnd.ERROR)
def test_lock_error_the_sentinel_died(w, tmp_path, monkeypatch):
    """Killed, the sentinel can no longer stop the command if `lock` dies: `lock` stops it now ("error")."""
    run = Run(w.alice, tmp_path, monkeypatch)
    seen: dict[str, Any] = {}

    def drive(run: Run) -> None:
        seen["pid"], seen["token"] = run.writer()
        os.kill(run.sentinels[0].pid, signal.SIGKILL)

    code = run(drive)
    assert code == cli.lock_exit_code(cli.EXIT_LOST) and [e.why for e in run.lost] == ["error"]
    assert "sentinel died" in str(run.lost[0]) and not alive(seen["pid"])
    assert w.registry.last_lease(JOB).status is LeaseStatus.RELEASED


def test_control_a_loss_that_signals_only_the_shell_leaves_its_writer_writing(w, tmp_path, monkeypatch):
    """The control: what the naive `lock` did on a loss, SIGTERM to its direct child (the shell): the shell
    ends, the writer it forked writes on."""
    process = subprocess.Popen(forking_command(tmp_path))
    try:
        wait_until(lambda: writer(tmp_path), "the writer wrote")
        pid, token = writer(tmp_path)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == -signal.SIGTERM
        before = len(log(tmp_path))
        wait_until(lambda: len(log(tmp_path)) > before, "the writer writes on after its shell is gone")
        assert alive(pid)
    finally:
        os.kill(writer(tmp_path)[0], signal.SIGKILL)


# ---------------------------------------------------------------------------
# --wait: every refusal by name
# ---------------------------------------------------------------------------


@covers("lock", Refusal.HELD)
def test_lock_held_exits_3_and_the_command_never_runs(w, tmp_path, monkeypatch):
    w.bob.acquire(JOB, ttl=600)
    run = Run(w.alice, tmp_path, monkeypatch)
    with pytest.raises(LeaseHeld) as held:
        run(lambda run: None)
    assert held.value.holder == w.bob.sender and cli.exit_code(held.value) == cli.EXIT_HELD
    assert log(tmp_path) == []


@covers("lock", Refusal.HELD)
def test_lock_held_by_its_own_key_exits_3_unless_taking_over(w, tmp_path, monkeypatch):
    """Exclusive: the key's own live lease refuses it too (a second `lock` of one key); --take-over fences it."""
    mine = w.alice.acquire(JOB, ttl=600)
    with pytest.raises(LeaseHeld) as held:
        Run(w.alice, tmp_path, monkeypatch)(lambda run: None)
    assert held.value.holder == w.alice.sender and any("--take-over" in n for n in held.value.__notes__)
    run = Run(w.alice, tmp_path, monkeypatch, take_over=True)
    assert run(lambda run: (run.writer(), run.signal(signal.SIGTERM))) == 128 + signal.SIGTERM
    assert int(writer(tmp_path)[1]) > mine.token


@covers("lock", Refusal.HELD)
def test_lock_wait_runs_the_command_once_the_holder_releases(w, tmp_path, monkeypatch):
    held = w.bob.acquire(JOB, ttl=600)
    WaitClock(on_sleep=lambda n: held.release() if n == 1 else None).install(w.alice)
    run = Run(w.alice, tmp_path, monkeypatch, wait=300)
    assert run(lambda run: (run.writer(), run.signal(signal.SIGTERM))) == 128 + signal.SIGTERM
    assert int(writer(tmp_path)[1]) > held.token and w.registry.last_lease(JOB).status is LeaseStatus.RELEASED


@covers("lock", Refusal.LOCK_DELAYED)
def test_lock_wait_waits_out_a_lock_delay(w, tmp_path, monkeypatch):
    """bob's lease expired in a namespace with a 60 s lock-delay: `lock --wait` waits it out by chain time
    (it used to exit 10 at once), then runs the command."""
    w.carol.namespace(NAMESPACE).set_policy(lock_delay=60)
    held = w.bob.acquire(JOB, ttl=30)
    w.chain.advance_time(held.expires_at - w.chain.now())
    until = held.expires_at + 60
    with pytest.raises(LockDelayed):  # without --wait: exit 10
        Run(w.alice, tmp_path, monkeypatch)(lambda run: None)
    WaitClock(on_sleep=lambda n: w.chain.advance_time(until - w.chain.now()) if n == 2 else None).install(w.alice)
    run = Run(w.alice, tmp_path, monkeypatch, wait=300)
    assert run(lambda run: (run.writer(), run.signal(signal.SIGTERM))) == 128 + signal.SIGTERM
    first = next(e for e in audit.history(w.registry, JOB) if e.kind is EventKind.ACQUIRED and e.token > held.token)
    assert first.block_timestamp >= until


@covers("lock", Refusal.NOT_ADMITTED)
def test_lock_not_admitted_exits_9_at_once_even_with_wait(w, tmp_path, monkeypatch):
    w.carol.namespace(NAMESPACE).set_policy(admission_required=True)
    w.carol.namespace(NAMESPACE).admit([w.bob.sender])
    clock = WaitClock().install(w.alice)
    with pytest.raises(NotAdmitted) as refused:
        Run(w.alice, tmp_path, monkeypatch, wait=300)(lambda run: None)
    assert cli.exit_code(refused.value) == cli.EXIT_REFUSED
    assert clock.sleeps == [] and log(tmp_path) == []
