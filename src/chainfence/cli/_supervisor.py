"""The process supervisor of ``chainfence lock``: the command's session, the sentinel, the signals.

What :mod:`chainfence.cli.lock` runs its command under (its module docstring tells the whole story):

- a session's processes: every live process of the command's session, found through ``/proc`` (its
  process group alone elsewhere), and :class:`SessionStop`, which stops them all (SIGTERM and
  SIGCONT, SIGKILL at a deadline) without ever signalling a reused pid;
- :class:`Sentinel`: a small forked process of its own session that stops the command's session
  when ``lock`` dies or freezes past its last safe deadline;
- :class:`Signals`: how ``lock`` takes signals (they interrupt the acquisition; then handlers only
  record them, and the main loop forwards them).
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from ..keepalive import lease_clock, wait_cap

__all__ = [
    "FORWARDED",
    "POLL",
    "SENTINEL_DEADLINE",
    "SENTINEL_DONE",
    "SENTINEL_ORPHANED",
    "TERMINATING",
    "Interrupted",
    "Sentinel",
    "SessionStop",
    "Signals",
    "session_members",
]

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
#: Every signal a handler may catch (what exec resets to its default action).
CATCHABLE = tuple(sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}))
#: The forwarded signals that, before the command has started, mean "do not start it".
TERMINATING = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})

#: Seconds between two looks at a session that holds processes `lock` did not fork (nothing signals their exit).
POLL = 0.02

#: Seconds past a safe deadline the sentinel waits for `lock` to start stopping the command itself (then
#: `lock` tells it so, and it only sees the SIGKILL through); never more than --grace, so that its SIGKILL
#: still comes by the deadline + --grace.
_SENTINEL_LAG = 0.5

#: The sentinel's exit codes.
SENTINEL_DONE = 0  # told the work was over
SENTINEL_DEADLINE = 3  # the last safe deadline passed with no newer one: it stopped the command
SENTINEL_ORPHANED = 4  # the pipe closed without a word: `lock` died; it stopped the command


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
        clock = lease_clock if clock is None else clock
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
        for sig in CATCHABLE:
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
        time.sleep(POLL)
    return code


# ----------------------------------------------------------------------
# Signals
# ----------------------------------------------------------------------


class Interrupted(KeyboardInterrupt):
    """A terminating signal came while `lock` acquired: nothing runs yet; exit 128 + N."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class Signals:
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
        for sig in TERMINATING:
            self._install(sig, self._interrupt)

    def recording(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        # The wake-up pipe first, then the handlers: a signal between the two runs the old handler
        # (raises Interrupted) or the new one (recorded); none is lost.
        self._wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for sig in (*FORWARDED, signal.SIGCHLD):
            self._install(sig, self._record)

    def _install(self, sig: int, handler: Any) -> None:
        previous = signal.signal(sig, handler)
        self._previous.setdefault(sig, previous)

    def _interrupt(self, signum: int, frame: Any) -> None:
        raise Interrupted(signum)

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
