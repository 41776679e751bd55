"""Waiting for a held resource: ``acquire(name, ttl, wait=seconds)``.

The waiter spends no gas while it waits. It sends an acquisition only when
it has read the resource free (released, expired — judged at
:meth:`Chain.now <chainfence.Chain.now>`, as the views judge — or never
held), and the send's own preflight (``eth_estimateGas`` at the pending
block) refuses, sending nothing, when someone else got there first.

What wakes it, without a tight loop:

- **a new block that carries one of the registry's events for the
  resource** (``LeaseReleased``, ``LeaseAcquired``, ``LeaseRenewed``,
  ``LeaseRevoked``): the
  head is polled once per :attr:`Pace.poll` seconds (``eth_getBlockByNumber``
  "latest": one request whether or not a block came), and only a new head
  costs an ``eth_getLogs`` over the new blocks, filtered by the resource's
  id. JSON-RPC over HTTP has no subscriptions (``eth_subscribe`` needs a
  websocket), so polling at a bounded interval is what every HTTP node
  allows;
- **the lease's expiry**: a new block stamped at (or a second before) the
  expiry, or, on a chain that mines no block, the local monotonic clock
  reaching the expiry as counted from the chain time the lease was judged
  at. Chain time decides: if the lease still reads live then (a dev
  chain's clock that does not run), the next look is one expiry-length (at
  least one poll) later;
- **a reorganisation** (the head went back): read again;
- **an answer that does not check out**: the new blocks' ``logsBloom`` (and
  receipts, :mod:`chainfence._node.completeness`) say the log backend left
  out logs of the resource (a log index that lags the head, or withholds):
  read again, rather than sleep through a release it did not answer.

Each of these costs one read of the lease (``eth_call`` plus the pending
block, batched), then either an acquisition or more waiting. Per poll: one
request; per new block: at most one ``eth_getLogs`` and one read more (when
more than one block came, their headers in one batch; a block in doubt, its
receipts).

Pace: on a chain that is not a dev chain the poll interval is half the
block time (estimated once per chain from the last 32 blocks, between 0.25
and 6 seconds), so a release is seen within half a block and the
acquisition, sent after a random pause of up to a quarter block, lands in
the next block or the one after. Dev chains mine a block per transaction:
anvil is polled every 50 ms, the embedded chain every 20 ms.

Refusals, by name (:class:`chainfence.endings.Refusal`): a resource
*held* is waited for as above; a namespace's *lock-delay* after an expiry
is waited out by chain time (the ``until`` the refusal carries, woken by a
block stamped then or by the local clock counted from the chain time the
refusal was judged at); *not admitted* stops the waiter at once.

Fairness: none beyond the random pause. The registry keeps no queue: an
acquisition succeeds whenever the resource is free, whoever sends it, so
the first acquisition mined after a release wins (on a chain with a
mempool, the one its block builder orders first). The pause spreads the
waiters' sends over a fraction of a block so that they do not all arrive
together. The waiters of one chain (one :class:`~chainfence.Chain`: its
lock table) then send one at a time (the *turn*): a loser's preflight
runs once the winner's acquisition has its receipt, sees the winner's
lease, and sends nothing. The waiters of this user's other processes on
the same machine take the same turn through a lock file per chain,
registry and resource (:func:`host_turn_steps`; not on the embedded
chain, which lives in one process). Waiters on other machines are not in
the turn: two of them whose preflights both run before either acquisition
reaches the node both send, and the second reverts on-chain (it pays for
a revert) and goes back to waiting; fetching the fee quote and the nonce
before the preflight keeps that moment to signing and one request
(``scripts/bench_wait_race.py``; ``docs/benchmarks/history.md``, "Waiters racing for one release").

Everything that waits takes a :class:`Timer` (clock, sleep, randomness):
tests give it one that moves only when the test says.

The waiting is written once, as steps (:mod:`chainfence._core.effects`): the
sync :class:`~chainfence.Registry` runs them over the blocking RPC layer,
:mod:`chainfence.aio` over the asyncio one; with the system timer
(:data:`SYSTEM`) each pauses with its driver's own sleep (:func:`sleep`).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeVar, cast

from .. import endings
from .._core import log as _log
from .._core import metrics as _metrics
from .._core.effects import RPC, Locked, Sleep, Steps, run
from .._node import completeness as _completeness
from .._node import events as _events
from ..endings import Refusal
from ..errors import LeaseError, LeaseHeld, LockDelayed, LogsIncomplete, NotAdmitted

if TYPE_CHECKING:
    from ..chain import Chain
    from ..lease import LeaseInfo

logger = _log.get(__name__)

T = TypeVar("T")

#: New blocks above which the waiter reads the lease instead of asking for the blocks' logs.
MAX_LOG_GAP = 1_024

#: Blocks the block time of a chain that is not a dev chain is estimated over.
_BLOCK_TIME_SAMPLE = 32

_KINDS = (_events.Kind.ACQUIRED, _events.Kind.RELEASED, _events.Kind.RENEWED, _events.Kind.REVOKED)


class Timer:
    """The waiter's clock (monotonic seconds), its sleep and its randomness.

    Tests subclass it: a clock that moves only when the waiter sleeps, a
    sleep that lets the test act at that moment, a pause before sending the
    test can use to stage a race.
    """

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Wait between two polls."""
        time.sleep(seconds)

    def jitter(self, limit: float) -> float:
        """A random pause, 0 to ``limit`` seconds."""
        import random  # here: only a waiter pauses at random; the CLI's other commands never load it

        return random.uniform(0.0, limit)

    def pause_before_send(self, seconds: float) -> None:
        """Wait the random pause between seeing the resource free and sending."""
        time.sleep(seconds)


SYSTEM = Timer()


class AsyncTimer(Timer):
    """:class:`Timer` for the asyncio driver: its waits are coroutines."""

    async def sleep(self, seconds: float) -> None:  # type: ignore[override]
        import asyncio  # here, not on import: the CLI never loads asyncio

        await asyncio.sleep(seconds)

    async def pause_before_send(self, seconds: float) -> None:  # type: ignore[override]
        import asyncio

        await asyncio.sleep(seconds)


ASYNC_SYSTEM = AsyncTimer()


def sleep(timer: Timer, seconds: float, *, before_send: bool = False) -> Sleep:
    """The effect of pausing ``seconds`` on ``timer``: the system timers pause with the driver's own sleep
    (``time.sleep`` or ``asyncio.sleep``: the same steps run on either), another timer (a test's) with its
    own (``pause_before_send`` for the random pause before a send)."""
    if timer is SYSTEM or timer is ASYNC_SYSTEM:
        return Sleep(seconds)
    return Sleep(seconds, using=timer.pause_before_send if before_send else timer.sleep)


class Pace(NamedTuple):
    """How often a waiter polls the head, and the longest random pause before it sends."""

    poll: float
    jitter: float


def pace(chain: Chain) -> Pace:
    """The chain's waiting pace (see the module docstring), worked out once per chain."""
    return run(pace_steps(chain), chain.rpc, sleep=time.sleep, lock=lambda key: contextlib.nullcontext())


def pace_steps(chain: Chain) -> Steps[Pace]:
    """:func:`pace` as steps (either driver)."""
    cached = chain.__dict__.get("_wait_pace")
    if cached is not None:
        return cast(Pace, cached)
    if chain.rpc.embedded:
        result = Pace(poll=0.02, jitter=0.01)
    elif chain.is_dev:
        result = Pace(poll=0.05, jitter=0.025)
    else:
        block_time = yield from _block_time_steps(chain)
        poll = min(6.0, max(0.25, block_time / 2))
        result = Pace(poll=poll, jitter=poll / 2)
    chain.__dict__["_wait_pace"] = result
    return result


def _block_time_steps(chain: Chain) -> Steps[float]:
    """Seconds per block over the last blocks (2 requests; 2.0 on a young chain)."""
    latest = yield RPC.block("latest")
    number = int(latest["number"]) if latest is not None else 0
    if number < _BLOCK_TIME_SAMPLE:
        return 2.0
    earlier = yield RPC.block(number - _BLOCK_TIME_SAMPLE)
    if earlier is None:
        return 2.0
    return max(0.0, (int(latest["timestamp"]) - int(earlier["timestamp"])) / _BLOCK_TIME_SAMPLE)


class Follower:
    """Follows the head and one resource's registry events; says when the lease is worth reading again."""

    def __init__(self, chain: Chain, address: str, resource_id: bytes, timer: Timer, pace: Pace, head: int):
        self._chain = chain
        self._address = address
        self._resource_id = resource_id
        self._timer = timer
        self._pace = pace
        self.head = head
        self._expires_at: int | None = None
        self._expiry_wake = math.inf  # local clock
        #: Polls of the head, and heads that were new (for logs and tests).
        self.polls = 0
        self.blocks = 0

    def expect(self, expires_at: int | None, judged_at: int | None) -> None:
        """The lease now in the way expires at ``expires_at`` (chain time), judged live at ``judged_at``."""
        self._expires_at = expires_at
        if expires_at is None or judged_at is None:
            self._expiry_wake = math.inf
        else:
            self._expiry_wake = self._timer.now() + max(float(expires_at - judged_at), self._pace.poll)

    def wait_steps(self, remaining: float) -> Steps[bool]:
        """Sleep at most one poll (never past ``remaining`` seconds), look at the head; True when the
        lease should be read again (an event for the resource, its expiry, a reorganisation)."""
        now = self._timer.now()
        pause = min(self._pace.poll, remaining, max(0.0, self._expiry_wake - now))
        if pause > 0:
            yield sleep(self._timer, pause)
        if self._timer.now() >= self._expiry_wake:
            self._expiry_wake = math.inf
            logger.debug("waiting: the lease's expiry (chain time %s) is due by the local clock", self._expires_at)
            return True
        self.polls += 1
        block = yield RPC.block("latest")
        if block is None:  # pragma: no cover - every node has a latest block
            return False
        number, timestamp = int(block["number"]), int(block["timestamp"])
        if number == self.head:
            return False
        previous, self.head = self.head, number
        self.blocks += 1
        if number < previous:
            logger.debug("waiting: the head went back from %d to %d", previous, number)
            return True
        if number - previous > MAX_LOG_GAP:
            return True
        if self._expires_at is not None and timestamp >= self._expires_at - 1:
            return True  # at or just before the expiry: the next block's time may pass it
        try:
            events = yield from _events.fetch_all_steps(
                self._chain,
                self._address,
                kinds=_KINDS,
                resource_id=self._resource_id,
                from_block=previous + 1,
                to_block=number,
            )
        except LogsIncomplete as refused:  # an answer holding a log it cannot have: the lease says what it hid
            logger.info("waiting: %s: reading the lease again", refused)
            return True
        # The blocks' own logsBloom (and receipts) say whether the answer is all of their logs for the resource.
        checked = yield from _completeness.check_steps(
            self._address,
            previous + 1,
            number,
            events,
            kinds=_KINDS,
            resource_id=self._resource_id,
            headers={number: block},
        )
        if checked.held is not None:
            logger.info(
                "waiting: the logs answered for block %d do not check out (%s): reading the lease again",
                checked.held,
                checked.why,
            )
            return True  # a lagging or withholding log backend: the lease's state, read, says what it hid
        if events:
            logger.debug("waiting: %s in blocks %d..%d", ", ".join(e.kind.value for e in events), previous + 1, number)
        return bool(events)


def follow_steps(chain: Chain, address: str, resource_id: bytes, timer: Timer, pace: Pace) -> Steps[Follower]:
    """A :class:`Follower` from the current head."""
    head = yield RPC.block("latest")
    return Follower(chain, address, resource_id, timer, pace, int(head["number"]) if head is not None else 0)


def held(info: LeaseInfo) -> LeaseHeld:
    """The error a waiter whose wait ended raises for the lease ``info`` describes."""
    return LeaseHeld(
        holder=info.holder,
        token=info.token,
        expires_at=info.expires_at,
        resource=info.resource,
        resource_id=info.resource_id,
    )


def turn_key(address: str, resource_id: bytes) -> str:
    """The lock under which the waiters of one chain (one :class:`~chainfence.Chain`) send for one resource."""
    return f"waiting-turn:{address.lower()}:{resource_id.hex()}"


#: Where the waiters of this machine take their turns: a lock file per chain, registry and resource
#: (:func:`host_turn_steps`), in a directory of this user's own. None: not worked out yet; False: none.
_TURNS_DIRECTORY: str | bool | None = None


def _turns_directory() -> str | None:
    """This user's directory of turn files (made once, private), or None where there can be none: no
    ``fcntl`` (Windows), no ``getuid``, or a directory that is not this user's own.

    ``CHAINFENCE_WAIT_TURNS`` names another directory: the processes that share one take turns with each
    other only (dev nodes on one machine share chain ids and registry addresses: the test suite gives
    each of its workers one, so that its nodes' waiters never wait for another's)."""
    global _TURNS_DIRECTORY
    if _TURNS_DIRECTORY is None:
        _TURNS_DIRECTORY = False
        try:
            import fcntl  # noqa: F401 - only where there is one: the machine-wide turn needs flock
            import stat
            import tempfile

            path = os.environ.get("CHAINFENCE_WAIT_TURNS") or os.path.join(
                tempfile.gettempdir(), f"chainfence-turns-{os.getuid()}"
            )
            os.makedirs(path, mode=0o700, exist_ok=True)
            found = os.lstat(path)
            if stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o022:
                _TURNS_DIRECTORY = path
            else:
                logger.warning("waiting: %s is not a private directory of this user's: no turns across processes", path)
        except (ImportError, AttributeError, OSError) as why:
            logger.debug("waiting: no turns across processes here (%s)", why)
    return _TURNS_DIRECTORY if isinstance(_TURNS_DIRECTORY, str) else None


def turn_path(key: str) -> str | None:
    """The lock file of the turn named ``key`` (None where there are no turns across processes)."""
    directory = _turns_directory()
    if directory is None:
        return None
    import hashlib

    return os.path.join(directory, hashlib.sha256(key.encode("utf-8")).hexdigest()[:40] + ".lock")


def host_turn_steps(
    key: str, steps: Callable[[], Steps[T]], poll: float, *, after_wait: Callable[[], Steps[None]] | None = None
) -> Steps[T]:
    """Run ``steps()`` (a waiter's send: preflight, transaction, receipt) in the resource's turn among the
    processes of this machine: an exclusive ``flock`` on a file named by ``key`` (the chain, the
    registry and the resource), asked without blocking every ``poll`` seconds (the driver's own sleep,
    so that either driver can wait for it and an interrupt ends the wait). So a waiter's preflight runs
    only once the previous waiter's transaction, in any process of this user's on this machine, has
    its receipt (issue 25, finding 21). A waiter that had to wait for the turn first runs
    ``after_wait()``, which reads the lease as mined and raises the refusal when another waiter's
    acquisition took it meanwhile: its preflight, at the pending block, would count a release still
    pending (the winner, done already) as done, and a block may put the acquisition before it. The
    holder removes the file as it leaves; a process that dies holding it leaves it to the next (the
    kernel drops its lock); one stopped or stuck while it holds it is waited for :data:`TURN_PATIENCE`
    polls, then this waiter reads the lease as mined and sends without the turn (a revert at worst, as
    without turns). Where there is no such file (:func:`_turns_directory`), ``steps()`` run in
    the process's turn only."""
    path = turn_path(key)
    if path is None:
        return (yield from steps())
    taken = yield from _take_turn_steps(path, poll, TURN_PATIENCE * 4)
    if taken is None:
        return (yield from steps())
    fd, waited = taken
    if fd is None:  # held past the turn's patience: send without it, reading the lease as mined first
        if after_wait is not None:
            yield from after_wait()
        return (yield from steps())
    try:
        if waited and after_wait is not None:
            yield from after_wait()
        return (yield from steps())
    finally:
        _give_turn(path, fd)


#: How many turns of its poll a waiter waits for another process's waiter to leave the turn before it
#: sends without it (:func:`host_turn_steps`): 40 polls are 20 block times on a chain with blocks, 2 s on a
#: dev node, far more than one preflight, send and receipt take. The turn only saves a loser its revert;
#: a process stopped (SIGSTOP, a debugger) or stuck while it holds the turn must not hold every waiter of
#: the machine past its own ``wait``.
TURN_PATIENCE = 40


def _take_turn_steps(path: str, poll: float, patience: int | None) -> Steps[tuple[int | None, bool] | None]:
    """An open descriptor of ``path`` holding its ``flock`` once this process has it, and whether another
    held it first; ``(None, True)`` when another still held it after ``patience`` sleeps of ``poll`` (None:
    wait for as long as it is held). None: the file cannot be used."""
    import fcntl

    waited = False
    slept = 0
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as why:
            logger.debug("waiting: no turn file %s (%s)", path, why)
            return None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:  # another process's waiter is sending: its receipt first
                    if not waited:
                        waited = True
                        logger.debug("waiting: another process's waiter is sending; its turn first (%s)", path)
                    if patience is not None and slept >= patience:
                        logger.info(
                            "waiting: the turn %s is still held after %d polls: sending without it", path, slept
                        )
                        os.close(fd)
                        return None, True
                    slept += 1
                    yield Sleep(poll)
            try:  # the holder before removed the file as it left: its lock is on a file nobody else opens
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            held = os.fstat(fd)
            if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
                return fd, waited
            waited = True  # another held it, and left
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _give_turn(path: str, fd: int) -> None:
    """Leave the turn: remove the file (while holding it, so that whoever locks the old one knows to
    open it again), then close it, which drops the lock."""
    try:
        os.unlink(path)
    except OSError:
        pass
    os.close(fd)


def acquire_waiting_steps(
    *,
    send: Callable[[], Steps[T]],
    ready: Callable[[], Steps[None]],
    read: Callable[[], Steps[LeaseInfo]],
    free: Callable[[LeaseInfo], bool],
    follower: Callable[[], Steps[Follower]],
    now: Callable[[], Steps[int]],
    timer: Timer,
    pace: Pace,
    wait: float,
    turn: str,
    host_turn: str | None = None,
) -> Steps[T]:
    """Send the acquisition now; while it is refused for now, wait and send again once it may pass.

    Every refusal is handled by its name (:class:`chainfence.endings.Refusal`):

    - ``held``: wait for the lease to end (an event of the resource, or its
      expiry by chain time), then send again;
    - ``lock_delayed``: wait until the refusal's ``until`` by chain time (a
      block stamped then, or the local clock counted from the chain time the
      refusal was judged at; an event of the resource wakes it earlier),
      then send again;
    - ``not_admitted``: raised at once: only the namespace's admin can end it.

    Each send runs in the resource's *turn* (``Locked(turn)``): the waiters
    of one chain send for one resource one at a time, and each send's
    preflight (``eth_estimateGas`` at the pending block, a read at the head
    just before the transaction) runs only after the previous waiter's
    transaction has its receipt, so a waiter of this chain never sends an
    acquisition that a waiter of this chain already made fail; with
    ``host_turn`` (a key naming the chain, the registry and the resource),
    the same holds for the waiters of this user's other processes and chains
    on this machine (:func:`host_turn_steps`). Before a
    send that follows a wait, ``ready()`` fetches the fee quote and the
    nonce, so that nothing but signing separates the preflight from the
    transaction (waiters on other machines can still pass their
    preflights in that moment: see ``docs/benchmarks/history.md``, "The turn
    across processes"). Raises the
    latest refusal (``LeaseHeld`` or ``LockDelayed``) once ``wait`` seconds
    of ``timer`` have passed.
    """
    if _metrics.live is None:
        return (yield from _waiting_steps(send, ready, read, free, follower, now, timer, pace, wait, turn, host_turn))
    started = timer.now()
    try:
        acquired = yield from _waiting_steps(send, ready, read, free, follower, now, timer, pace, wait, turn, host_turn)
    except BaseException as error:
        outcome = (
            "timed_out"
            if isinstance(error, (LeaseHeld, LockDelayed))
            else "not_admitted"
            if isinstance(error, NotAdmitted)
            else "error"
        )
        _metrics.waited(timer.now() - started, outcome)
        raise
    _metrics.waited(timer.now() - started, "acquired")
    return acquired


def _waiting_steps(
    send: Callable[[], Steps[T]],
    ready: Callable[[], Steps[None]],
    read: Callable[[], Steps[LeaseInfo]],
    free: Callable[[LeaseInfo], bool],
    follower: Callable[[], Steps[Follower]],
    now: Callable[[], Steps[int]],
    timer: Timer,
    pace: Pace,
    wait: float,
    turn: str,
    host_turn: str | None,
) -> Steps[T]:
    """:func:`acquire_waiting_steps`' loop."""
    deadline = timer.now() + wait
    watch: Follower | None = None
    paused = False  # the first send goes at once; after a wait, a random pause first
    while True:
        if paused:
            pause = timer.jitter(pace.jitter)
            if pause > 0:
                yield sleep(timer, pause, before_send=True)
            yield from ready()  # the fee quote and the nonce now: the preflight is then the last read before the send
        try:
            sending = (
                send()
                if host_turn is None
                else host_turn_steps(host_turn, send, pace.poll / 4, after_wait=lambda: _still_free_steps(read, free))
            )
            return cast(T, (yield Locked(turn, sending)))
        except LeaseError as error:
            refusal: LeaseError = error
            kind = endings.refusal(error)
            if kind is None:
                raise  # not a refusal for now: the caller's error
            if kind is Refusal.NOT_ADMITTED:
                raise  # only the namespace's admin admits: waiting cannot help
            if watch is None:
                watch = yield from follower()
            if kind is Refusal.LOCK_DELAYED:
                assert isinstance(error, LockDelayed)
                judged = yield from now()
                logger.info(
                    "waiting out the lock-delay resource=%s until=%d (chain time now %d) wait=%gs",
                    error.resource,
                    error.until,
                    judged,
                    wait,
                )
                watch.expect(error.until, judged)
            elif kind is Refusal.HELD:
                assert isinstance(error, LeaseHeld)
                if paused:  # a race lost: the winner's block will show its event
                    logger.debug("waiting: another acquisition came first (token %d); waiting again", error.token)
                    watch.expect(error.expires_at, None)
                else:  # the first refusal: read the lease, to know its expiry by chain time
                    info = yield from read()
                    logger.info(
                        "waiting resource=%s holder=%s token=%d expires_at=%d wait=%gs",
                        info.resource,
                        info.holder,
                        info.token,
                        info.expires_at,
                        wait,
                    )
                    if free(info):
                        paused = True  # it ended since the refusal: send again (after the pause)
                        continue
                    refusal = held(info)
                    watch.expect(info.expires_at, info.judged_at)
        paused = True
        while True:
            remaining = deadline - timer.now()
            if remaining <= 0:
                refusal.add_note(f"waited {wait:g} s (the wait= given) for the resource to become free")
                raise refusal
            if not (yield from watch.wait_steps(remaining)):
                continue
            info = yield from read()
            if free(info):
                break  # free by the lease (a lock-delay, if any, is judged by the next send's preflight)
            refusal = held(info)
            watch.expect(info.expires_at, info.judged_at)


def _still_free_steps(read: Callable[[], Steps[LeaseInfo]], free: Callable[[LeaseInfo], bool]) -> Steps[None]:
    """Raise the lease in the way (``LeaseHeld``) unless the resource still reads free, as mined."""
    info = yield from read()
    if not free(info):
        raise held(info)


endings.declare(
    "waiting",
    __name__,
    {
        Refusal.HELD: "waits, sending nothing, for the resource's events and the lease's expiry by chain time; "
        "then sends again, one waiter of a chain at a time (the turn); LeaseHeld when the wait ends",
        Refusal.LOCK_DELAYED: "waits, sending nothing, until the refusal's `until` by chain time (a block "
        "stamped then, or the local clock counted from the chain time it was refused at); LockDelayed when "
        "the wait ends first",
        Refusal.NOT_ADMITTED: "raises NotAdmitted at once: only the namespace's admin can admit the caller",
    },
    waits=True,
)
