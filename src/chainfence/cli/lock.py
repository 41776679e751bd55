"""``chainfence lock NAME -- CMD``: a command under a kept-alive lease, stopped whole when the lease is lost.

A mutex for commands, as ``flock``, ``consul lock`` and ``etcdctl lock`` are,
with the lease's own failure modes closed::

    acquire NAME         exclusive: a live lease of the same key is refused too (exit 3,
                         or waited for with --wait), unless --take-over fences it
    fork the sentinel    before any thread: a small process of its own session that holds
                         the read end of a pipe from `lock`
    keep the lease       renewals in the background; every new safe deadline goes down the pipe
    run CMD              in a session (and process group) of its own; it tells the sentinel
                         its session id before it execs, so no moment exists where CMD runs
                         and the sentinel does not know it
    supervise            signals to `lock` (INT, TERM, HUP, QUIT, USR1, USR2, WINCH) go to
                         CMD's process group once each; a loss, or the sentinel firing, stops
                         CMD's whole session (SIGTERM + SIGCONT, SIGKILL after --grace)
    CMD exits            what is left of its session is stopped the same way; once no
                         process of it is left the lease is released: exit CMD's code

The sentinel stops CMD's session when the pipe closes (``lock`` died: any
signal, SIGKILL included) or when the last safe deadline it was given passes
with no newer one (``lock`` frozen by SIGSTOP or starved; it leaves ``lock``
half a second to start the stop itself, which ``lock`` then tells it):
SIGTERM, and SIGKILL ``--grace`` seconds later and never later than the
deadline plus ``--grace``, which the safe deadline leaves room for
(``--latency-margin`` defaults to ``--grace`` + 1). When ``lock`` is
stopping the session itself, the sentinel only sees its SIGKILL through if
``lock`` cannot. Both processes count on
:data:`chainfence.keepalive.lease_clock` (CLOCK_BOOTTIME), a clock every
process of the machine reads alike.

Signal handlers only record (``signal.set_wakeup_fd`` wakes the main loop,
a handler appends the signal number to a list): no handler takes a lock, so
none can deadlock against the main thread, whatever it holds when the
signal comes.

The part ``"lock"`` of :mod:`chainfence.endings` is declared here: what
``lock`` does about every way its lease ends or its acquisition is refused.

:func:`register` adds the command to ``chainfence``'s parser (its handler checks the arguments, forks
the sentinel, connects, and calls :func:`run`); the rest of this module is the mechanism.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import endings
from ..endings import End, LocalEnd, Refusal
from ..errors import ChainfenceError, InvalidInput, LeaseHeld, LeaseLost
from ..keepalive import DEFAULT_BLOCK_TIME_MARGIN, DEFAULT_LATENCY_MARGIN, KeepAliveCore, lease_clock, wait_cap
from ._common import (
    EPILOG,
    EXIT_LOST,
    NAME_RULES,
    UsageError,
    add_command,
    connect,
    deployment,
    emit,
    positive_int,
    publishable,
    rpc_url,
    seconds,
    wait_seconds,
)

__all__ = ["FORWARDED", "Sentinel", "register", "run"]

_STOPS = "stops the command's whole session (SIGTERM, SIGKILL after --grace) and exits 7 naming the end"

PART = endings.declare(
    "lock",
    __name__,
    {
        End.EXPIRED: f"found at the next renewal (LeaseExpired, or a successor's acquisition saying so): {_STOPS}",
        End.RELEASED: f"found at the next renewal (released by another process of the key, the command itself "
        f"included): {_STOPS}",
        End.COMPLETED: "ends nothing: lock holds a plain lease, and completing one (the command recording its result) "
        "only records the result; the renewals go on and the command runs to its end",
        End.SUPERSEDED: f"found at the next renewal (a higher token reacquired by the key: lock --take-over, or "
        f"another process of it): {_STOPS}",
        End.REVOKED: f"found at the next renewal (LeaseRevoked, or the successor's acquisition): {_STOPS}",
        End.GRANTED: f"found at the next renewal (a higher token whose acquisition says granted): {_STOPS}",
        End.ROLLED_BACK: f"found at the next renewal (the registry no longer knows the token): {_STOPS}",
        LocalEnd.DEADLINE: f"no renewal confirmed before the safe deadline: {_STOPS} ('deadline'); the sentinel does the "
        "same if lock itself is frozen or dead",
        LocalEnd.ERROR: f"the renewer failed (not a chain error), or the sentinel died: {_STOPS} ('error')",
        Refusal.HELD: "exits 3 naming the holder (its own key's live lease too, unless --take-over); with --wait it "
        "waits for the release or the expiry",
        Refusal.LOCK_DELAYED: "exits 10 (lock-delay); with --wait it waits the delay out",
        Refusal.NOT_ADMITTED: "exits 9 at once, --wait or not: only the namespace's admin can admit the key",
    },
    holds=True,
    waits=True,
    keeps_alive=True,
)

#: Signals ``lock`` passes on to the command's process group, once each.
FORWARDED: tuple[signal.Signals, ...] = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)
_LOCAL_ENDS = frozenset(end.value for end in LocalEnd)
#: Every signal a handler may catch (what exec resets to its default action).
_CATCHABLE = tuple(sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}))
#: The forwarded signals that, before the command has started, mean "do not start it".
_TERMINATING = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})

#: The clock `lock` keeps its lease's safe deadline with (tests substitute theirs).
_CLOCK: Callable[[], float] = lease_clock
#: The clock the sentinel compares those deadlines with: the same, in production (tests substitute theirs).
_SENTINEL_CLOCK: Callable[[], float] = lease_clock
#: Seconds between two looks at a session that holds processes `lock` did not fork (nothing signals their exit).
_POLL = 0.02

#: Seconds past a safe deadline the sentinel waits for `lock` to start stopping the command itself (then
#: `lock` tells it so, and it only sees the SIGKILL through); never more than --grace, so that its SIGKILL
#: still comes by the deadline + --grace.
_SENTINEL_LAG = 0.5

#: The sentinel's exit codes.
SENTINEL_DONE = 0  # told the work was over
SENTINEL_DEADLINE = 3  # the last safe deadline passed with no newer one: it stopped the command
SENTINEL_ORPHANED = 4  # the pipe closed without a word: `lock` died; it stopped the command


# ----------------------------------------------------------------------
# The command: `chainfence lock NAME [options] -- CMD [ARGS...]`
# ----------------------------------------------------------------------


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``lock``. CMD and its arguments follow NAME (or ``--``): :func:`chainfence.cli.split_lock`
    splits them off before parsing (argparse would read CMD's options as chainfence's) into ``args.cmd``."""
    lock = add_command(
        subparsers,
        "lock",
        parents=[common],
        example="chainfence lock reports/daily --ttl 30 ./make-report.sh --day today",
        help="run a command while holding a lease, kept alive; stop it if the lease is lost",
        usage="chainfence lock NAME [--ttl S] [--wait S] [--take-over] [--grace S] [options] [--] CMD [ARGS...]",
        description="A mutex for commands, as etcdctl lock and consul lock. CMD follows NAME and chainfence's "
        "options: the first argument after NAME that does not start with '-' begins CMD, and everything from "
        "there on is CMD's (`chainfence lock jobs/a --ttl 60 grep -v x` runs `grep -v x`); after '--', "
        "everything is CMD's, even an argument starting with '-'. Acquire NAME (exclusively: while any lease "
        "on it is live, this key's own included, exit 3, or wait with --wait), run CMD in a session of its own with CHAINFENCE_RESOURCE, "
        "CHAINFENCE_TOKEN, CHAINFENCE_HOLDER, CHAINFENCE_REGISTRY, CHAINFENCE_CHAIN_ID and CHAINFENCE_RPC_URL in "
        "its environment (the key stays in CHAINFENCE_PRIVATE_KEY, inherited), renew the lease in the background, "
        "and when CMD exits stop what is left of its session, release the lease and exit with CMD's code. If the "
        "lease is lost (expired, released, superseded, revoked, granted away, rolled back, or no renewal confirmed "
        "before the safe deadline), every process of CMD's session gets SIGTERM, then SIGKILL after --grace, and "
        "chainfence exits 7 naming the end. If chainfence itself dies (any signal, SIGKILL included) or freezes, "
        "a sentinel process stops CMD's session before the lease can end on-chain. SIGINT, SIGTERM, SIGHUP, "
        "SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to chainfence go to CMD's process group, once each.",
        epilog=EPILOG,
    )
    lock.add_argument("resource", help=f"the resource's name ({NAME_RULES})")
    lock.add_argument("--ttl", type=positive_int, default=30, help="lease length in seconds (default 30)")
    lock.add_argument(
        "--wait",
        type=wait_seconds,
        default=0.0,
        help="seconds to wait for a held resource to become free (default 0: fail at once with exit 3)",
    )
    lock.add_argument(
        "--take-over",
        action="store_true",
        help="acquire even while this key holds NAME live (another `chainfence lock` of it): a new token fences "
        "the first off, whose command is stopped at its next renewal (default: exit 3, or wait with --wait)",
    )
    lock.add_argument(
        "--grace",
        type=seconds,
        default=5.0,
        help="seconds between SIGTERM and SIGKILL when the lease is lost (default 5)",
    )
    lock.add_argument(
        "--latency-margin",
        type=seconds,
        default=None,
        help="seconds taken off the safe deadline for CMD to stop (default: --grace + 1, so that even a CMD that "
        "ignores SIGTERM is killed before the lease can end on-chain)",
    )
    lock.add_argument(
        "--block-time-margin",
        type=seconds,
        default=None,
        help="seconds a block's timestamp may lag its transaction's send, plus clock drift (default 2)",
    )
    lock.set_defaults(run=_lock)


def _lock(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    command = args.cmd
    if not command:
        raise UsageError("no command to run: chainfence lock NAME [--ttl S] [--] CMD [ARGS...]")
    # A ttl the margins leave no time in is refused before anything is sent.
    check(args.ttl, args.grace, args.latency_margin, args.block_time_margin)
    # Forked first, before web3 is imported and before any thread: a small copy, quick to fork.
    sentinel = Sentinel.start(args.grace)
    try:
        publishable(args.resource)  # a name acquire would refuse: exit 2 before connecting
        _chain, registry = connect(args, needs_key=True)
        url = rpc_url(args, deployment(args))

        def on_lost(error: LeaseLost) -> None:  # stderr said it when the command was stopped
            emit(args, {**error.details(), "exit_code": EXIT_LOST}, None)

        return run(
            registry,
            args.resource,
            command,
            ttl=args.ttl,
            wait=args.wait,
            grace=args.grace,
            latency_margin=args.latency_margin,
            block_time_margin=args.block_time_margin,
            confirmations=args.confirmations,
            take_over=args.take_over,
            url=url,
            on_lost=on_lost,
            sentinel=sentinel,
        )
    except CommandNotRun as error:
        raise UsageError(str(error)) from None
    finally:
        sentinel.close()


# ----------------------------------------------------------------------
# A session's processes (Linux: /proc; elsewhere its process group only)
# ----------------------------------------------------------------------


def _stat(pid: int) -> tuple[bytes, int, int] | None:
    """(state, process group, session) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0], int(fields[2]), int(fields[3])


def session_members(sid: int) -> list[tuple[int, int]] | None:
    """The live (not zombie) processes of session ``sid`` as (pid, process group); None without /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    found = []
    for name in names:
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[2] == sid and stat[0] != b"Z":
                found.append((int(name), stat[1]))
    return found


def _signal_member(pid: int, sid: int, sig: int) -> None:
    """Signal ``pid`` if it is still in session ``sid`` (a pidfd pins it: a reused pid is never signalled)."""
    fd = None
    try:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError) as error:
            if isinstance(error, ProcessLookupError):
                return
        stat = _stat(pid)
        if stat is None or stat[2] != sid:
            return
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:  # pragma: no cover - a kernel without pidfds
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # gone, or a setuid program of the session we may not signal
    finally:
        if fd is not None:
            os.close(fd)


class SessionStop:
    """Stops every process of session ``sid``: SIGTERM and SIGCONT now, SIGKILL at ``kill_at``, until none is left.

    ``group_safe()`` says whether the process group ``sid`` can be signalled as a whole (its leader's
    pid is not free for reuse): then one ``killpg`` reaches even a process forked a moment ago.
    """

    def __init__(
        self, sid: int, kill_at: float, *, group_safe: Callable[[], bool], clock: Callable[[], float], term: bool = True
    ):
        self.sid = sid
        self.kill_at = kill_at
        self.group_safe = group_safe
        self.clock = clock
        self.killed = False
        if term:
            self.signal(signal.SIGTERM)
            self.signal(signal.SIGCONT)  # a stopped process acts on its SIGTERM only once continued

    def signal(self, sig: int) -> bool:
        """Send ``sig`` to every process of the session; return whether any is left."""
        grouped = False
        if self.group_safe():
            try:
                os.killpg(self.sid, sig)
                grouped = True
            except (ProcessLookupError, PermissionError):
                pass
        members = session_members(self.sid)
        if members is None:  # pragma: no cover - no /proc: the process group is all we know of
            return grouped
        for pid, group in members:
            if not (grouped and group == self.sid):
                _signal_member(pid, self.sid, sig)
        return bool(members)

    def poll(self) -> bool:
        """Return True once no process of the session is left; SIGKILL whatever is at ``kill_at``."""
        if self.clock() >= self.kill_at:
            self.killed = True
        if self.killed:
            return not self.signal(signal.SIGKILL)
        members = session_members(self.sid)
        if members is None:  # pragma: no cover
            return not self._group_alive()
        return not members

    def _group_alive(self) -> bool:  # pragma: no cover - no /proc
        try:
            os.killpg(self.sid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


# ----------------------------------------------------------------------
# The sentinel
# ----------------------------------------------------------------------


class Sentinel:
    """The process that stops the command's session when `lock` cannot (see the module docstring).

    Forked, not started: no new interpreter, a copy of `lock` that runs one small loop and never
    returns into the caller. ``announce`` is the command's ``preexec_fn``: the command writes its
    session id down the pipe before it execs. Messages are lines shorter than PIPE_BUF, so writes
    from `lock`'s threads and from the command never interleave.
    """

    def __init__(self, pid: int, fd: int, *, clock: Callable[[], float]):
        self.pid = pid
        self.fd = fd
        self.clock = clock
        self.status: int | None = None

    @classmethod
    def start(cls, grace: float, *, clock: Callable[[], float] | None = None) -> Sentinel:
        clock = _SENTINEL_CLOCK if clock is None else clock
        read_fd, write_fd = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the sentinel: never returns
            code = 70
            try:
                os.close(write_fd)
                code = _sentinel_main(read_fd, grace, clock, parent)
            except BaseException as error:
                _say(f"chainfence lock: its sentinel failed: {type(error).__name__}: {error}")
            finally:
                os._exit(code)
        os.close(read_fd)
        os.set_blocking(write_fd, False)  # a frozen sentinel never blocks `lock`; a lost line only makes it stricter
        return cls(pid, write_fd, clock=clock)

    def _send(self, line: bytes) -> None:
        try:
            os.write(self.fd, line)
        except (BlockingIOError, BrokenPipeError, OSError):
            pass  # gone (its death is seen by `lock`), or full: it then acts on an older, earlier deadline

    def deadline(self, deadline: float) -> None:
        """The latest safe deadline, on the sentinel's clock."""
        self._send(b"d %r\n" % deadline)

    def stopping(self, kill_at: float) -> None:
        """`lock` is stopping the command's session (SIGTERM sent): SIGKILL is due at ``kill_at`` (sentinel's clock)."""
        self._send(b"k %r\n" % kill_at)

    def announce(self) -> None:
        """The command's ``preexec_fn``: after setsid, before exec.

        First every signal `lock` catches gets its default action back, as exec would give it: from
        the moment the sentinel knows the session it may signal it, and until the exec the command is
        a copy of `lock` whose handlers only record (the sentinel's SIGTERM, caught there, was lost and
        the command ran on). Ignored signals stay ignored, as across exec."""
        for sig in _CATCHABLE:
            if signal.getsignal(sig) not in (signal.SIG_DFL, signal.SIG_IGN):
                signal.signal(sig, signal.SIG_DFL)
        os.write(self.fd, b"s %d\n" % os.getpid())

    def exited(self) -> int | None:
        """The sentinel's exit code (or -signal) once it exited, else None; reaps it."""
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def close(self) -> None:
        """The command's session is empty: tell the sentinel to stop watching, and reap it."""
        if self.fd >= 0:
            self._send(b"x\n")
            os.close(self.fd)
            self.fd = -1
        if self.status is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self.status = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                pass


def _say(message: str) -> None:
    """One line on stderr, written directly (the sentinel may not touch Python's buffered streams)."""
    try:
        os.write(2, (message + "\n").encode(errors="replace"))
    except OSError:
        pass


def _sentinel_main(fd: int, grace: float, clock: Callable[[], float], lock_pid: int) -> int:
    for sig in (
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGTSTP,
        signal.SIGTTIN,
        signal.SIGTTOU,
        signal.SIGUSR1,
        signal.SIGUSR2,
    ):
        signal.signal(sig, signal.SIG_IGN)  # only the pipe tells it what to do (and SIGKILL ends it)
    signal.set_wakeup_fd(-1)
    os.setsid()  # no terminal's signals, and a kill of `lock`'s process group does not reach it
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # `$(chainfence lock ...)` reads EOF when `lock` exits, not when this does
    os.close(null)
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65_536)
    cap = wait_cap(clock)  # a wait does not count a suspend, and an injected clock moves without waking us
    lag = min(_SENTINEL_LAG, grace)  # at the deadline `lock` stops the command itself: let it, and say nothing
    sid: int | None = None
    leader: int | None = None  # a pidfd of the command's first process, while it lives
    deadline: float | None = None
    kill_at: float | None = None  # `lock` is stopping the session: SIGKILL due then
    pending = b""
    while True:
        due = kill_at if kill_at is not None else (None if deadline is None else deadline + lag)
        timeout = cap if due is None else min(cap, max(0.0, due - clock()))
        ready, _, _ = select.select([fd], [], [], timeout)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                why, code = f"chainfence lock (pid {lock_pid}) is gone", SENTINEL_ORPHANED
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                kind, _, value = line.partition(b" ")
                if kind == b"x":
                    return SENTINEL_DONE
                if kind == b"d":
                    deadline = float(value)
                elif kind == b"k":
                    kill_at = float(value)
                elif kind == b"s" and sid is None:
                    sid = int(value)
                    try:
                        leader = os.pidfd_open(sid)
                    except (AttributeError, OSError):
                        leader = None
            continue
        if due is not None and clock() >= due:
            if kill_at is not None:
                why = f"chainfence lock (pid {lock_pid}) did not finish stopping its command in --grace (frozen?)"
            else:
                why = f"chainfence lock (pid {lock_pid}) did not renew before its safe deadline (frozen?)"
            code = SENTINEL_DEADLINE
            break
    if sid is None:
        return code  # the command never started: nothing to stop
    if kill_at is None:  # SIGTERM now, SIGKILL --grace later and never later than the deadline + --grace
        now = clock()
        kill_at = min(now, deadline if deadline is not None else now) + grace
        term = True
    else:  # `lock` sent SIGTERM already: SIGKILL when it would have
        term = False

    def group_safe() -> bool:
        # The leader alive: its pid, the group's id, cannot have been reused.
        return leader is not None and not select.select([leader], [], [], 0)[0]

    _say(
        f"{why}: its sentinel stops the command (session {sid}): "
        + (f"SIGTERM, SIGKILL after {grace:g} s" if term else "SIGKILL")
    )
    stop = SessionStop(sid, kill_at, group_safe=group_safe, clock=clock, term=term)
    while not stop.poll():
        time.sleep(_POLL)
    return code


# ----------------------------------------------------------------------
# Signals
# ----------------------------------------------------------------------


class _Interrupted(KeyboardInterrupt):
    """A terminating signal came while `lock` acquired: nothing runs yet; exit 128 + N."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """How `lock` takes signals: first they interrupt the acquisition; then they are only recorded.

    Recording: each forwarded signal (and SIGCHLD) appends its number to :attr:`received` and the
    interpreter writes a byte to the wake-up pipe (``signal.set_wakeup_fd``), which the main loop
    selects on; the renewer thread writes a byte there too on a loss. A handler takes no lock, and
    does nothing else.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}
        self._wakeup: int | None = None
        self._read = self._write = -1

    def interrupting(self) -> None:
        for sig in _TERMINATING:
            self._install(sig, self._interrupt)

    def recording(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        # The wake-up pipe first, then the handlers: a signal between the two runs the old handler
        # (raises _Interrupted) or the new one (recorded); none is lost.
        self._wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for sig in (*FORWARDED, signal.SIGCHLD):
            self._install(sig, self._record)

    def _install(self, sig: int, handler: Any) -> None:
        previous = signal.signal(sig, handler)
        self._previous.setdefault(sig, previous)

    def _interrupt(self, signum: int, frame: Any) -> None:
        raise _Interrupted(signum)

    def _record(self, signum: int, frame: Any) -> None:
        self.received.append(signum)

    def take(self) -> list[int]:
        taken = []
        while self.received:
            taken.append(self.received.pop(0))
        return taken

    def wake(self) -> None:
        """From any thread: make the main loop look again."""
        try:
            os.write(self._write, b"\0")
        except (BlockingIOError, OSError):
            pass  # full: the main loop has bytes to read, so it wakes anyway

    def wait(self, timeout: float | None) -> None:
        select.select([self._read], [], [], timeout)
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._wakeup is not None:
            signal.set_wakeup_fd(self._wakeup)
            self._wakeup = None
        for fd in (self._read, self._write):
            if fd >= 0:
                os.close(fd)
        self._read = self._write = -1


# ----------------------------------------------------------------------
# The command under the lease
# ----------------------------------------------------------------------


def exit_status(returncode: int) -> int:
    """A child's exit code as a shell reports it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def child_env(lease: Any, registry: Any, url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        CHAINFENCE_RESOURCE=lease.resource,
        CHAINFENCE_TOKEN=str(lease.token),
        CHAINFENCE_HOLDER=lease.holder,
        CHAINFENCE_REGISTRY=registry.address,
        CHAINFENCE_CHAIN_ID=str(registry.chain.chain_id),
    )
    if url is not None:
        env["CHAINFENCE_RPC_URL"] = url
    return env


class CommandNotRun(ChainfenceError):
    """The command could not be started (no such program, not executable): nothing ran; the lease was released."""


def _say_err(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # a closed terminal (after SIGHUP) must not stop the supervision


def margins(grace: float, latency_margin: float | None, block_time_margin: float | None) -> dict[str, float]:
    """The keep-alive margins of `lock`: SIGKILL comes --grace after SIGTERM, and a second for the kill."""
    return {
        "latency_margin": grace + DEFAULT_LATENCY_MARGIN if latency_margin is None else latency_margin,
        "block_time_margin": DEFAULT_BLOCK_TIME_MARGIN if block_time_margin is None else block_time_margin,
    }


def check(ttl: int, grace: float, latency_margin: float | None = None, block_time_margin: float | None = None) -> None:
    """Refuse, before anything is sent, a ttl the margins leave no safe time in (InvalidInput)."""
    KeepAliveCore(ttl, 0.0, **margins(grace, latency_margin, block_time_margin))


def run(
    registry: Any,
    resource: str,
    command: Sequence[str],
    *,
    ttl: int = 30,
    wait: float | None = None,
    grace: float = 5.0,
    latency_margin: float | None = None,
    block_time_margin: float | None = None,
    confirmations: int | None = None,
    take_over: bool = False,
    url: str | None = None,
    on_lost: Callable[[LeaseLost], Any] | None = None,
    sentinel: Sentinel | None = None,
) -> int:
    """Acquire ``resource``, run ``command`` under it, and return the exit status ``lock`` exits with.

    Raises what the acquisition raises (``LeaseHeld``, ``NotAdmitted``, ...: nothing ran), and
    :class:`CommandNotRun`. A loss is returned as 7 after the whole session was stopped;
    ``on_lost`` (for the CLI's message) is called with it first. ``sentinel``: one started already
    (the CLI forks it first thing, while its process is small); else one is forked after the
    acquisition, before any thread of `lock` starts. Either way it is closed on return.
    """
    if not command:
        raise InvalidInput("no command to run")
    keep_margins = margins(grace, latency_margin, block_time_margin)
    KeepAliveCore(ttl, 0.0, **keep_margins)
    signals = _Signals()
    said: list[LeaseLost] = []  # the losses stderr was told of already (as the command was stopped)
    try:
        signals.interrupting()
        try:
            # Exclusive: the key's own live lease (a second `lock` of it) refuses too, unless taking over.
            lease = registry.acquire(resource, ttl=ttl, confirmations=confirmations, wait=wait, exclusive=not take_over)
        except _Interrupted as stopped:
            return 128 + stopped.signum
        except LeaseHeld as held:
            if held.holder == registry.sender:
                held.add_note(
                    "held by this key: another `chainfence lock` of it, or another process with the same key; "
                    "--wait S waits for it to end, --take-over fences it off (its command is stopped at its next "
                    "renewal)"
                )
            raise
        try:
            code = _hold(lease, registry, list(command), signals, grace, keep_margins, url, sentinel, said)
        except LeaseLost as error:
            if not any(error is loss for loss in said):  # found only as the keep-alive stopped
                _say_err(f"chainfence lock: {_explain(error)}")
            if error.why in _LOCAL_ENDS:  # given up locally: it may still be live on-chain, and nothing runs now
                _release_quietly(lease)
            if on_lost is not None:
                on_lost(error)
            return EXIT_LOST
        except _Interrupted as stopped:  # between the acquisition and the command's start
            _release_quietly(lease)
            return 128 + stopped.signum
        except BaseException:
            _release_quietly(lease)
            raise
        lease.release()
        return code
    finally:
        signals.restore()
        if sentinel is not None:
            sentinel.close()


def _hold(
    lease: Any,
    registry: Any,
    command: list[str],
    signals: _Signals,
    grace: float,
    keep_margins: dict[str, float],
    url: str | None,
    sentinel: Sentinel | None,
    said: list[LeaseLost],
) -> int:
    """Run the command under ``lease``; its exit status, or LeaseLost once its session is stopped (a loss
    said on stderr is added to ``said``)."""
    clock, sentinel_clock = _CLOCK, _SENTINEL_CLOCK
    if sentinel is None:
        try:
            sentinel = Sentinel.start(grace, clock=sentinel_clock)  # before any thread of ours
        except _Interrupted as stopped:
            return 128 + stopped.signum
    else:
        sentinel_clock = sentinel.clock
    try:
        try:
            signals.recording()
        except _Interrupted as stopped:
            return 128 + stopped.signum
        lost: list[LeaseLost] = []

        def on_lost(error: LeaseLost) -> None:  # the renewer thread: record, wake the main loop; no lock
            lost.append(error)
            signals.wake()

        def to_sentinel(deadline: float) -> float:
            return deadline if clock is sentinel_clock else sentinel_clock() + (deadline - clock())

        keeping = lease.keep(on_lost=on_lost, clock=clock, **keep_margins)
        keeper = keeping.keeper
        sentinel.deadline(to_sentinel(keeper.core.deadline))
        keeper.on_deadline = lambda deadline: sentinel.deadline(to_sentinel(deadline))
        with keeping:
            code = _supervise(lease, registry, command, signals, sentinel, lost, grace, url, said)
        return code
    finally:
        sentinel.close()


def _supervise(
    lease: Any,
    registry: Any,
    command: list[str],
    signals: _Signals,
    sentinel: Sentinel,
    lost: list[LeaseLost],
    grace: float,
    url: str | None,
    said: list[LeaseLost],
) -> int:
    before = [sig for sig in signals.take() if sig != signal.SIGCHLD]
    stopping = [sig for sig in before if sig in _TERMINATING]
    if stopping:  # told to stop before the command started: it never starts
        return 128 + stopping[0]
    if lost:
        raise lost[0]
    if sentinel.exited() is not None:
        raise LeaseLost(
            resource=lease.resource,
            token=lease.token,
            why=LocalEnd.ERROR.value,
            detail="its sentinel died before the command started",
        )
    import subprocess  # here: every other command imports this module to register its parser

    try:
        child = subprocess.Popen(
            command, env=child_env(lease, registry, url), start_new_session=True, preexec_fn=sentinel.announce
        )
    except OSError as exc:
        raise CommandNotRun(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
    except subprocess.SubprocessError:  # its preexec_fn could not tell the sentinel: it must not run unwatched
        raise CommandNotRun(f"did not run {command[0]!r}: its sentinel could not be told of it") from None
    sid = child.pid
    for sig in before:
        _forward(sid, sig)
    stop: SessionStop | None = None
    exited = False  # the leader exited (not yet reaped: its pid, the session's id, stays ours)
    loss: LeaseLost | None = None
    done = False
    try:
        while True:
            for sig in signals.take():
                if sig != signal.SIGCHLD and not exited:
                    _forward(sid, sig)
            if loss is None:
                loss = lost[0] if lost else _sentinel_loss(lease, sentinel)
                if loss is not None and stop is None:
                    _say_err(
                        f"chainfence lock: {_explain(loss)}; stopping the command's session {sid} "
                        f"(SIGTERM, SIGKILL after {grace:g} s)"
                    )
                    said.append(loss)
                    sentinel.stopping(sentinel.clock() + grace)
                    stop = SessionStop(sid, time.monotonic() + grace, group_safe=lambda: True, clock=time.monotonic)
            if not exited:
                exited = os.waitid(os.P_PID, sid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            if exited:
                if stop is None:
                    members = session_members(sid)
                    if members:
                        _say_err(
                            f"chainfence lock: the command exited; stopping what is left of its session {sid} "
                            f"({len(members)} process{'es' if len(members) > 1 else ''}: SIGTERM, SIGKILL after "
                            f"{grace:g} s) before releasing the lease"
                        )
                        sentinel.stopping(sentinel.clock() + grace)
                        stop = SessionStop(sid, time.monotonic() + grace, group_safe=lambda: True, clock=time.monotonic)
                    else:
                        break
                if stop.poll():
                    break
            signals.wait(_POLL if stop is not None or exited else None)
        done = True
    finally:
        if not done:  # chainfence itself failed (a bug): never leave the command running
            final = SessionStop(sid, time.monotonic(), group_safe=lambda: True, clock=time.monotonic)
            while not final.poll():
                time.sleep(_POLL)
        returncode = child.wait()  # only now: until it is reaped, the session's id cannot be reused
    sentinel.close()  # nothing of the session is left to watch; its exit says whether it fired meanwhile
    if loss is None:
        loss = lost[0] if lost else _sentinel_loss(lease, sentinel)
        if loss is not None:
            _say_err(f"chainfence lock: {_explain(loss)}; the command had ended")
            said.append(loss)
    if loss is not None:
        raise loss
    return exit_status(returncode)


def _forward(sid: int, sig: int) -> None:
    try:
        os.killpg(sid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _sentinel_loss(lease: Any, sentinel: Sentinel) -> LeaseLost | None:
    """A loss the sentinel's exit reveals: it fired at the deadline `lock` missed, or it died."""
    status = sentinel.exited()
    if status is None or status == SENTINEL_DONE:
        return None
    if status == SENTINEL_DEADLINE:
        return LeaseLost(
            resource=lease.resource,
            token=lease.token,
            why=LocalEnd.DEADLINE.value,
            detail="chainfence lock did not renew before its safe deadline; its sentinel stopped the command",
        )
    return LeaseLost(
        resource=lease.resource,
        token=lease.token,
        why=LocalEnd.ERROR.value,
        detail=f"its sentinel died (exit status {status}): nothing would stop the command if chainfence lock died",
    )


def _explain(loss: LeaseLost) -> str:
    """The loss in one clause: which end, in the model's words, then what revealed it."""
    try:
        end: End | LocalEnd = End(loss.why)
    except ValueError:
        end = LocalEnd(loss.why)
    text = f"lost the lease of token {loss.token} on {loss.resource!r} ({loss.why}: {end.describe})"
    return f"{text}; {loss.detail}" if loss.detail and isinstance(end, End) else text


def _release_quietly(lease: Any) -> None:
    """Free a lease that may be gone already (lost, or the node failing): a refusal is not news."""
    if lease.released:
        return
    try:
        lease.release()
    except ChainfenceError as error:
        _say_err(f"chainfence lock: releasing token {lease.token} failed: {type(error).__name__}: {error}")
