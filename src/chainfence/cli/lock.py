"""``chainfence lock NAME -- CMD``: a command under a kept-alive lease, stopped whole when the lease is lost.

A mutex for commands, as ``flock``, ``consul lock`` and ``etcdctl lock`` are,
with the lease's own failure modes closed::

    acquire NAME         exclusive: a live lease of the same key is refused too (exit 103,
                         or waited for with --wait), unless --take-over fences it
    fork the sentinel    before any thread: a small process of its own session that holds
                         the read end of a pipe from `lock`
    keep the lease       renewals in the background; every new safe deadline goes down the pipe
    run CMD              in a session (and process group) of its own; it tells the sentinel
                         its session id before it execs, so no moment exists where CMD runs
                         and the sentinel does not know it
    supervise            signals to `lock` (INT, TERM, HUP, QUIT, USR1, USR2, WINCH) go to
                         CMD's process group once each, but for a second SIGINT (Ctrl-C again),
                         which stops CMD's whole session (a third: SIGKILL at once); a loss, or
                         the sentinel firing, stops it too (SIGTERM + SIGCONT, SIGKILL after --grace)
    CMD exits            what is left of its session is stopped the same way; once no
                         process of it is left the lease is released: exit CMD's code

``lock``'s own ends exit apart from every code CMD exits with below 100: 100 + their code
elsewhere (:func:`chainfence.cli._common.lock_exit_code`: 103 held, 107 lost, 102 usage), as
``timeout(1)`` keeps 124-127 for its own.

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
the sentinel, connects, and calls :func:`run`); the rest of this module holds the lease and supervises
the command. The process machinery it supervises with (a session's processes, the sentinel, the
signals) is :mod:`chainfence.cli._supervisor`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from .. import endings
from ..endings import End, LocalEnd, Refusal
from ..errors import (
    ChainfenceError,
    CommandNotFound,
    CommandNotRun,
    InvalidInput,
    LeaseHeld,
    LeaseLost,
)
from ..keepalive import DEFAULT_BLOCK_TIME_MARGIN, DEFAULT_LATENCY_MARGIN, KeepAliveCore, lease_clock, unanswered
from ._common import (
    EPILOG,
    EXIT_LOST,
    NAME_RULES,
    UsageError,
    add_command,
    connect,
    deployment,
    emit,
    lock_exit_code,
    metrics_option,
    positive_int,
    publishable,
    report,
    rpc_url,
    seconds,
    serve_metrics,
    wait_seconds,
)
from ._supervisor import (
    POLL,
    SENTINEL_DEADLINE,
    SENTINEL_DONE,
    TERMINATING,
    Interrupted,
    Sentinel,
    SessionStop,
    Signals,
    session_members,
)

__all__ = ["register", "run"]

_STOPS = "stops the command's whole session (SIGTERM, SIGKILL after --grace) and exits 107 naming the end"

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
        Refusal.HELD: "exits 103 naming the holder (its own key's live lease too, unless --take-over); with --wait it "
        "waits for the release or the expiry",
        Refusal.LOCK_DELAYED: "exits 110 (lock-delay); with --wait it waits the delay out",
        Refusal.NOT_ADMITTED: "exits 109 at once, --wait or not: only the namespace's admin can admit the key",
    },
    holds=True,
    waits=True,
    keeps_alive=True,
)

_LOCAL_ENDS = frozenset(end.value for end in LocalEnd)
#: What `lock` exits with when its lease was lost while the command ran (its own end: apart from CMD's codes).
EXIT_LOCK_LOST = lock_exit_code(EXIT_LOST)
#: The clock `lock` keeps its lease's safe deadline with (tests substitute theirs).
_CLOCK: Callable[[], float] = lease_clock
#: The clock the sentinel compares those deadlines with: the same, in production (tests substitute theirs).
_SENTINEL_CLOCK: Callable[[], float] = lease_clock


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
        "on it is live, this key's own included, exit 103, or wait with --wait), run CMD in a session of its own with CHAINFENCE_RESOURCE, "
        "CHAINFENCE_TOKEN, CHAINFENCE_HOLDER, CHAINFENCE_REGISTRY, CHAINFENCE_CHAIN_ID and CHAINFENCE_RPC_URL in "
        "its environment (the key stays in CHAINFENCE_PRIVATE_KEY, inherited), renew the lease in the background, "
        "and when CMD exits stop what is left of its session, release the lease and exit with CMD's code. If the "
        "lease is lost (expired, released, superseded, revoked, granted away, rolled back, or no renewal confirmed "
        "before the safe deadline), every process of CMD's session gets SIGTERM, then SIGKILL after --grace, and "
        "chainfence exits 107 naming the end. lock's own ends exit 100 + their code (below), apart from every code "
        "CMD exits with under 100. If chainfence itself dies (any signal, SIGKILL included) or freezes, "
        "a sentinel process stops CMD's session before the lease can end on-chain. SIGINT, SIGTERM, SIGHUP, "
        "SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to chainfence go to CMD's process group, once each; a second "
        "SIGINT (Ctrl-C again) stops CMD's session instead (SIGTERM, SIGKILL after --grace), a third kills it.",
        epilog=EPILOG,
    )
    lock.add_argument("resource", help=f"the resource's name ({NAME_RULES})")
    lock.add_argument("--ttl", type=positive_int, default=30, help="lease length in seconds (default 30)")
    lock.add_argument(
        "--wait",
        type=wait_seconds,
        default=0.0,
        help="seconds to wait for a held resource to become free (default 0: fail at once with exit 103)",
    )
    lock.add_argument(
        "--take-over",
        action="store_true",
        help="acquire even while this key holds NAME live (another `chainfence lock` of it): a new token fences "
        "the first off, whose command is stopped at its next renewal (default: exit 103, or wait with --wait)",
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
    metrics_option(lock)
    lock.set_defaults(run=_lock)


def _lock(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    command = args.cmd
    if not command:
        raise UsageError("no command to run: chainfence lock NAME [--ttl S] [--] CMD [ARGS...]")
    # A ttl the margins leave no time in is refused before anything is sent.
    check(args.ttl, args.grace, args.latency_margin, args.block_time_margin)
    # Forked first, before web3 is imported and before any thread: a small copy, quick to fork.
    sentinel = Sentinel.start(args.grace, clock=_SENTINEL_CLOCK)
    metrics: Any = None
    try:
        publishable(args.resource)  # a name acquire would refuse: exit 2 before connecting
        metrics = serve_metrics(args)  # a thread: after the sentinel's fork
        _chain, registry = connect(args, needs_key=True)
        url = rpc_url(args, deployment(args))

        lost: list[LeaseLost] = []  # stderr said it when the command was stopped
        ended: list[dict[str, Any]] = []
        code = run(
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
            on_lost=lost.append,
            on_end=ended.append,
            sentinel=sentinel,
        )
        emit(args, end_document(code, lost[0] if lost else None, ended[0] if ended else None), None)
        return code
    except CommandNotRun as error:  # as a shell says it: 127 not found, 126 not executable; nothing ran
        report(args, {**error.details(), "exit_code": error.exit_code}, [f"chainfence lock: {error}"])
        return error.exit_code
    finally:
        sentinel.close()
        if metrics is not None:
            metrics.close()


# ----------------------------------------------------------------------
# The command under the lease
# ----------------------------------------------------------------------


def exit_status(returncode: int) -> int:
    """A child's exit code as a shell reports it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def command_end(lease: Any, pid: int, returncode: int) -> dict[str, Any]:
    """How the command ended (``returncode`` as :mod:`subprocess` gives it: -N for signal N), as ``lock
    --json`` says it: its lease, its pid (its session's id), its exit code as a shell reports it, and the
    signal that ended it (None when it exited)."""
    return {
        "resource": lease.resource,
        "token": lease.token,
        "holder": lease.holder,
        "pid": pid,
        "exit_code": exit_status(returncode),
        "signal": signal.Signals(-returncode).name if returncode < 0 else None,
    }


def end_document(code: int, loss: LeaseLost | None, end: dict[str, Any] | None) -> dict[str, Any]:
    """What ``lock --json`` prints last, on stdout, once it ends with ``code``: how the command ended
    (``command``: :func:`command_end`, None when it never started), beside the loss that stopped it, or
    the lease it ran under; or, stopped by a signal before the command started, that signal."""
    command = None if end is None else {key: end[key] for key in ("pid", "exit_code", "signal")}
    if loss is not None:
        return {**loss.details(), "command": command, "exit_code": code}
    if end is not None:
        return {
            "resource": end["resource"],
            "token": end["token"],
            "holder": end["holder"],
            "command": command,
            "exit_code": code,
        }
    name = signal.Signals(code - 128).name if 128 < code < 128 + signal.NSIG else None
    return {
        "error": "Interrupted",
        "message": f"chainfence lock got {name} before its command started: nothing ran",
        "signal": name,
        "command": None,
        "exit_code": code,
    }


def child_env(lease: Any, registry: Any, url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CHAINFENCE_METRICS_PORT", None)  # this process serves on that port: a chainfence in CMD must not try
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


def _say_err(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # a closed terminal (after SIGHUP) must not stop the supervision


class Margins(TypedDict):
    """The keep-alive margins `lock` keeps its lease with (:class:`~chainfence.keepalive.KeepAliveCore`'s)."""

    latency_margin: float
    block_time_margin: float


def margins(grace: float, latency_margin: float | None, block_time_margin: float | None) -> Margins:
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
    on_end: Callable[[dict[str, Any]], Any] | None = None,
    sentinel: Sentinel | None = None,
) -> int:
    """Acquire ``resource``, run ``command`` under it, and return the exit status ``lock`` exits with.

    Raises what the acquisition raises (``LeaseHeld``, ``NotAdmitted``, ...: nothing ran), and
    :class:`CommandNotRun` (:class:`CommandNotFound`: no such command). A loss is returned as 107 (:data:`EXIT_LOCK_LOST`) after the whole session was stopped;
    ``on_lost`` (for the CLI's message) is called with it first, and ``on_end`` with how the command ended
    (:func:`command_end`) once it ran and ended, whatever the lease did. ``sentinel``: one started already
    (the CLI forks it first thing, while its process is small); else one is forked after the
    acquisition, before any thread of `lock` starts. Either way it is closed on return.
    """
    if not command:
        raise InvalidInput("no command to run")
    keep_margins = margins(grace, latency_margin, block_time_margin)
    KeepAliveCore(ttl, 0.0, **keep_margins)
    signals = Signals()
    said: list[LeaseLost] = []  # the losses stderr was told of already (as the command was stopped)
    try:
        signals.interrupting()
        try:
            # Exclusive: the key's own live lease (a second `lock` of it) refuses too, unless taking over.
            lease = registry.acquire(resource, ttl=ttl, confirmations=confirmations, wait=wait, exclusive=not take_over)
        except Interrupted as stopped:
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
            code = _hold(lease, registry, list(command), signals, grace, keep_margins, url, sentinel, said, on_end)
        except LeaseLost as error:
            if not any(error is loss for loss in said):  # found only as the keep-alive stopped
                _say_err(f"chainfence lock: {_explain(error, url)}")
            if error.why in _LOCAL_ENDS:  # given up locally: it may still be live on-chain, and nothing runs now
                _release_quietly(lease)
            if on_lost is not None:
                on_lost(error)
            return EXIT_LOCK_LOST
        except Interrupted as stopped:  # between the acquisition and the command's start
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
    signals: Signals,
    grace: float,
    keep_margins: Margins,
    url: str | None,
    sentinel: Sentinel | None,
    said: list[LeaseLost],
    on_end: Callable[[dict[str, Any]], Any] | None = None,
) -> int:
    """Run the command under ``lease``; its exit status, or LeaseLost once its session is stopped (a loss
    said on stderr is added to ``said``)."""
    clock, sentinel_clock = _CLOCK, _SENTINEL_CLOCK
    if sentinel is None:
        try:
            sentinel = Sentinel.start(grace, clock=sentinel_clock)  # before any thread of ours
        except Interrupted as stopped:
            return 128 + stopped.signum
    else:
        sentinel_clock = sentinel.clock
    try:
        try:
            signals.recording()
        except Interrupted as stopped:
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
            code = _supervise(lease, registry, command, signals, sentinel, lost, grace, url, said, on_end, keeper.core)
        return code
    finally:
        sentinel.close()


def _supervise(
    lease: Any,
    registry: Any,
    command: list[str],
    signals: Signals,
    sentinel: Sentinel,
    lost: list[LeaseLost],
    grace: float,
    url: str | None,
    said: list[LeaseLost],
    on_end: Callable[[dict[str, Any]], Any] | None = None,
    core: Any = None,
) -> int:
    before = [sig for sig in signals.take() if sig != signal.SIGCHLD]
    stopping = [sig for sig in before if sig in TERMINATING]
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
        refused = CommandNotFound if isinstance(exc, FileNotFoundError) else CommandNotRun
        raise refused(command=command[0], reason=exc.strerror or str(exc)) from None
    except subprocess.SubprocessError:  # its preexec_fn could not tell the sentinel: it must not run unwatched
        raise ChainfenceError(f"did not run {command[0]!r}: its sentinel could not be told of it") from None
    sid = child.pid
    for sig in before:
        _forward(sid, sig)
    stop: SessionStop | None = None
    exited = False  # the leader exited (not yet reaped: its pid, the session's id, stays ours)
    loss: LeaseLost | None = None
    interrupts = 0  # SIGINTs (Ctrl-C) taken since the command started
    done = False
    try:
        while True:
            for sig in signals.take():
                if sig == signal.SIGINT:
                    interrupts += 1
                if sig == signal.SIGINT and interrupts > 1:  # Ctrl-C again: the command did not stop on the first
                    if stop is None:
                        _say_err(
                            f"chainfence lock: SIGINT again: stopping the command's session {sid} (SIGTERM, SIGKILL "
                            f"after {grace:g} s; Ctrl-C once more: SIGKILL now)"
                        )
                        sentinel.stopping(sentinel.clock() + grace)
                        stop = SessionStop(sid, time.monotonic() + grace, group_safe=lambda: True, clock=time.monotonic)
                    elif not stop.killed:
                        _say_err(f"chainfence lock: SIGINT again: SIGKILL to the command's session {sid}")
                        stop.kill_at = time.monotonic()
                        stop.poll()  # SIGKILL to every process of the session, now
                elif sig != signal.SIGCHLD and not exited:
                    _forward(sid, sig)
            if loss is None:
                loss = lost[0] if lost else _sentinel_loss(lease, sentinel)
                if loss is not None and stop is None:
                    _say_err(
                        f"chainfence lock: {_explain(loss, url, core)}; stopping the command's session {sid} "
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
            signals.wait(POLL if stop is not None or exited else None)
        done = True
    finally:
        if not done:  # chainfence itself failed (a bug): never leave the command running
            final = SessionStop(sid, time.monotonic(), group_safe=lambda: True, clock=time.monotonic)
            while not final.poll():
                time.sleep(POLL)
        returncode = child.wait()  # only now: until it is reaped, the session's id cannot be reused
    if on_end is not None:
        on_end(command_end(lease, sid, returncode))
    sentinel.close()  # nothing of the session is left to watch; its exit says whether it fired meanwhile
    if loss is None:
        loss = lost[0] if lost else _sentinel_loss(lease, sentinel)
        if loss is not None:
            _say_err(f"chainfence lock: {_explain(loss, url, core)}; the command had ended")
            said.append(loss)
    if loss is not None:
        raise loss
    return exit_status(returncode)


def _forward(sid: int, sig: int) -> None:
    try:
        os.killpg(sid, sig)
    except (ProcessLookupError, PermissionError):
        pass


#: A deadline the sentinel saw pass: `lock` itself did not renew (frozen, starved), whatever the node did.
_FROZEN = "chainfence lock did not renew before its safe deadline; its sentinel stopped the command"


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
            detail=_FROZEN,
        )
    return LeaseLost(
        resource=lease.resource,
        token=lease.token,
        why=LocalEnd.ERROR.value,
        detail=f"its sentinel died (exit status {status}): nothing would stop the command if chainfence lock died",
    )


def _explain(loss: LeaseLost, url: str | None = None, core: Any = None) -> str:
    """The loss in one clause: which end, in the model's words, then what revealed it; for a deadline, what
    the node (at ``url``, its path and query left out) did with the renewals, as the keep-alive's ``core``
    saw them (a renewal in flight or none)."""
    try:
        end: End | LocalEnd = End(loss.why)
    except ValueError:
        end = LocalEnd(loss.why)
    text = f"lost the lease of token {loss.token} on {loss.resource!r} ({loss.why}: {end.describe})"
    if end is LocalEnd.DEADLINE:  # the node's part, unless lock itself was frozen past it
        return f"{text}; {_FROZEN if loss.detail == _FROZEN else _unanswered(loss.__cause__, url, core)}"
    return f"{text}; {loss.detail}" if loss.detail and isinstance(end, End) else text


def _unanswered(cause: BaseException | None, url: str | None, core: Any = None) -> str:
    """:func:`~chainfence.keepalive.unanswered`, the node named by its URL (its path and query left out), and
    a keep-alive that sent nothing being `lock` itself."""
    from .._node.transports import redact_url  # here: only a loss needs it

    return unanswered(cause, core, f"the node at {redact_url(url)}" if url else "the node", "chainfence lock")


def _release_quietly(lease: Any) -> None:
    """Free a lease that may be gone already (lost, or the node failing): a refusal is not news."""
    if lease.released:
        return
    try:
        lease.release()
    except ChainfenceError as error:
        _say_err(f"chainfence lock: releasing token {lease.token} failed: {type(error).__name__}: {error}")
