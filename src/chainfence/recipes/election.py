"""Leader election on a registry resource: campaign, observe, resign, and the leader's fencing token.

An :class:`Election` is a named resource of a :class:`~chainfence.Registry`:
the leader is the holder of its live lease, and each term is a new fencing
token. Names follow etcd's ``concurrency.Election`` and tooz::

    election = Election(registry, "billing/leader", ttl=30)
    with election.campaign(on_lost=stop_leading) as leadership:   # waits until elected
        while leading:
            leadership.check()                  # LeaseLost once leadership can no longer be trusted
            guard.check("billing/db", ...)      # or carry leadership.token to every write
    # leaving the block: the keep-alive stops for good, then the term is released (resigned)

    election.leader()          # Leader(holder, token, since, expires_at, ...) or None, at chain time
    for leader in election.observe(timeout=60): ...   # each change: a new term, or None

**A leader that cannot renew steps down before its successor can be
elected.** :meth:`Election.campaign` keeps the term alive with
:meth:`Lease.keep <chainfence.Lease.keep>`, whose local safe deadline is
counted from the *send* of the last confirmed renewal (see
:mod:`chainfence.keepalive`). A successor is elected only by an acquisition
mined after the term has ended on-chain, which is no earlier than that
deadline plus the margins::

    t=0    A sends its campaign's acquisition (ttl 30): A leads, token 7; safe deadline 27
    t=15   A's renewal goes out; A's node stalls (no reply, no error)
    t=27   no renewal confirmed: on_lost runs, leadership.check() raises LeaseLost: A stops leading
    t=30   A's term ends on-chain (its expiry; no event is emitted)
    t=30+  B, campaigning (waiting without gas), is elected: token 8
    t=31   A's late write with token 7 is refused by the guard (StaleToken): 7 < 8

With a naive leader (acquire, then renew in a loop with no deadline), A's
renewer is still waiting for its node at t=31 and A still believes it leads
while B does: two leaders. The token is the last line of defence either
way: a guard refuses the deposed leader's writes.

Observing: :meth:`Election.observe` follows the resource's registry events
(``LeaseAcquired``: a new term; ``LeaseReleased``: a resignation;
``LeaseRevoked``: the namespace's admin ended the term, or, followed in the
same transaction by the grant's ``LeaseAcquired``, gave the seat to
another; ``LeaseCompleted``: a result recorded, which ends nothing) block by
block, names every end as :mod:`chainfence.endings` does (``ends=True``
yields a :class:`TermEnded` before each change), and judges expiry by chain
time (an expiry emits no event): a term
is over once a block is stamped at or after its expiry, or
:meth:`Chain.now <chainfence.Chain.now>` has passed it (asked when a block
is stamped a second before the expiry, and when the local clock reaches
the expiry as counted from the chain time it was last judged at). It yields the
leader at the start, then each change: a :class:`Leader` for each new term
(a new token, even for the same holder), ``None`` when the seat becomes
empty. A term that expired and was taken over yields ``None`` and then the
successor. A revoke empties the seat at its block; a grant and a
reacquisition pass it straight to the next term. Renewals are not changes.
A reorganisation is followed by reading the resource again (a term the
chain no longer has ended ``rolled_back``).

asyncio: :class:`AsyncElection` (:mod:`chainfence.aio`) over an
``AsyncRegistry``: ``await election.campaign()`` returns an
:class:`AsyncLeadership` kept alive in a task, ``election.observe()`` is an
async generator of the same changes (the same steps:
:mod:`chainfence.recipes._election_observer`), ``election.watch(callback)`` runs it
in a task.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from .. import endings
from .. import keepalive as _keepalive
from .._core import log as _log
from .._core.effects import Steps
from .._core.faces import (
    AsyncDriver,
    AsyncFace,
    SyncFace,
    astreaming,
    awaiting,
    local,
    mirrored,
    operation,
    streaming,
    twin_of,
)
from .._sdk import validate as _validate
from ..endings import End, LocalEnd, Refusal
from ..errors import InvalidInput, InvalidTtl, LeaseLost, TokenNotCurrent
from ..keepalive import (
    DEFAULT_BLOCK_TIME_MARGIN,
    DEFAULT_LATENCY_MARGIN,
    AsyncKeeper,
    AsyncKeeping,
    KeepAliveCore,
    Keeping,
)
from ..lease import Lease
from ..registry import AsyncRegistry, Registry
from ._election_observer import Leader, Seat, TermEnded, observe_steps

logger = _log.get(__name__)

__all__ = [
    "AsyncElection",
    "AsyncLeadership",
    "AsyncWatch",
    "Election",
    "Leader",
    "Leadership",
    "TermEnded",
    "Watch",
]


class Election(SyncFace):
    """Leader election over the registry resource ``name``, as ``registry``'s sender.

    ``ttl`` (seconds of chain time) is each term's lease; the keep-alive
    renews it every ``interval`` (default half the ttl) and gives the term up
    at its local safe deadline, ``ttl - latency_margin - block_time_margin``
    after the last confirmed send (see :meth:`Lease.keep <chainfence.Lease.keep>`;
    ``clock`` is the clock it counts on, default
    :data:`~chainfence.keepalive.lease_clock`, which counts a suspend; tests
    inject one). Nothing here
    touches the chain: arguments are checked (``InvalidResourceName``,
    ``InvalidTtl``, ``InvalidInput``) and nothing is sent when they are bad.
    """

    def __init__(
        self,
        registry: Registry,
        name: str,
        *,
        ttl: int,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        clock: Callable[[], float] | None = None,
        confirmations: int | None = None,
    ):
        if not isinstance(registry, Registry):
            raise InvalidInput(f"registry must be a chainfence Registry, got {type(registry).__name__}")
        _validate.publishable(name)
        if isinstance(ttl, bool) or not isinstance(ttl, int):
            raise InvalidTtl(f"ttl must be an int number of seconds, got {type(ttl).__name__} {ttl!r}", ttl=ttl)
        if ttl < 1:
            raise InvalidTtl(f"ttl must be at least 1 second, got {ttl!r}", ttl=ttl)
        if clock is not None and not callable(clock):
            raise InvalidInput(f"clock must be callable, got {clock!r}")
        if confirmations is not None and (
            isinstance(confirmations, bool) or not isinstance(confirmations, int) or confirmations < 0
        ):
            raise InvalidInput(f"confirmations must be None or an int >= 0, got {confirmations!r}")
        # The keep-alive's own checks (margins leave time in the ttl, interval within the window), now.
        KeepAliveCore(ttl, 0.0, interval=interval, latency_margin=latency_margin, block_time_margin=block_time_margin)
        self.registry = registry
        self.name = name
        self.ttl = ttl
        self.confirmations = confirmations
        self._keep_options: dict[str, Any] = {
            "interval": interval,
            "latency_margin": latency_margin,
            "block_time_margin": block_time_margin,
            "clock": clock,
        }
        self._resource_id = _validate.resource_id(name)
        self._seat = Seat(registry, name, self._resource_id)
        self._leadership: Leadership | None = None

    def _drive(self, steps: Steps[Any]) -> Any:
        return self.registry._drive(steps)

    # -- campaigning -----------------------------------------------------------

    def campaign(self, *, wait: float | None = None, on_lost: Callable[[LeaseLost], Any] | None = None) -> Leadership:
        """Wait until elected; return the :class:`Leadership`, its term already kept alive.

        Waits (no gas, following the resource's events and its expiry: see
        :meth:`Registry.acquire <chainfence.Registry.acquire>`) up to
        ``wait`` seconds, forever (a year) when ``wait`` is None; ``wait=0``
        tries once. A namespace's lock-delay after an expired term is waited
        out too, by chain time. Raises :class:`~chainfence.errors.LeaseHeld`
        (the leader, as read last), or :class:`~chainfence.errors.LockDelayed`
        within a lock-delay, when the wait ends first, and
        :class:`~chainfence.errors.NotAdmitted` at once in a namespace that
        does not admit this account (waiting cannot help). The term is kept
        alive from the moment it is won; when it is lost ``on_lost(error)``
        runs once in the renewer thread and the leadership's :meth:`check`
        raises :class:`~chainfence.errors.LeaseLost`. Use it as a context
        manager: leaving it resigns. Campaigning while this account already
        leads starts a new term (a new token) that fences off the old one.
        """
        seconds, previous = self._campaign_args(wait, on_lost)
        if previous is not None:
            previous._stop_keeping()  # lost: never renewed again; the new term fences it off
        lease = self._drive(self._term_steps(seconds))
        return self._elected(lease, lambda: Leadership(self, lease, on_lost=on_lost))

    def _campaign_args(self, wait: float | None, on_lost: Any) -> tuple[float, Leadership | None]:
        """campaign()'s arguments checked (both faces): the seconds to wait, and a lost leadership of this
        object to stop keeping first. Nothing is sent."""
        if on_lost is not None and not callable(on_lost):
            raise InvalidInput(f"on_lost must be callable, got {on_lost!r}")
        seconds = _validate.MAX_WAIT if wait is None else _validate.wait(wait)
        previous = self.leadership
        if previous is not None and previous.lost is None:
            raise InvalidInput(
                f"this Election already leads {self.name!r} (token {previous.token}): resign() first, "
                "or campaign from another Election object to fence it off"
            )
        return seconds, previous

    def _term_steps(self, seconds: float) -> Steps[Lease]:
        """Wait for the seat (no gas, as ``acquire(wait=)`` waits) and take it: the term's lease."""
        return self.registry._acquire_steps(self.name, self.ttl, confirmations=self.confirmations, wait=seconds or None)

    def _elected(self, lease: Lease, leading: Callable[[], Leadership]) -> Leadership:
        """The term just won, kept alive by ``leading()``; a term already past its safe deadline is released."""
        try:
            leadership = leading()
        except LeaseLost:  # the term was past its safe deadline before its keep-alive could start
            try:
                lease.release()
            except Exception as release_error:
                logger.warning("release of a term lost at election failed token=%d: %s", lease.token, release_error)
            raise
        self._won(leadership)
        return leadership

    def _won(self, leadership: Leadership) -> None:
        self._leadership = leadership
        lease = leadership.lease
        logger.info(
            "elected election=%s token=%d holder=%s expires_at=%d tx=%s",
            self.name,
            lease.token,
            lease.holder,
            lease.expires_at,
            lease.tx_hash,
        )

    @property
    def leadership(self) -> Leadership | None:
        """The leadership this object won and has not resigned, else None (local: no chain call)."""
        leadership = self._leadership
        return leadership if leadership is not None and not leadership.resigned else None

    def resign(self) -> bool:
        """Resign the leadership this object won: :meth:`Leadership.resign`.

        Returns False, reading and sending nothing, when it holds none (it
        never won, or resigned already): a candidate that is not the leader
        has nothing to give up, and never ends another's term.
        """
        leadership = self.leadership
        if leadership is None:
            return False
        return leadership.resign()

    # -- reading -----------------------------------------------------------------

    def _leader_steps(self) -> Steps[Leader | None]:
        """The current leader, judged at :meth:`Chain.now <chainfence.Chain.now>` as views judge, or None.

        One read of the resource (and, the first time a term is seen, its
        election's block: ``eth_getLogs`` filtered by token, searching back
        from the head a page of blocks at a time, and that block's time).
        """
        info = yield from self.registry._last_lease_steps(self.name)
        if info is None or not info.live:
            return None
        return (yield from self._seat.leader_of_steps(info))

    leader = operation(_leader_steps)

    def _observe_steps(self, *, timeout: float | None = None, stop: Any = None, ends: bool = False) -> Steps[None]:
        """Yield the leader now, then each change: a :class:`Leader` per new term, None when the seat empties.

        Ends after ``timeout`` seconds (None: never), with one last look at
        the chain once they have passed (``timeout=0``: the leader now and
        what changed by the next look), or once ``stop`` (a
        :class:`threading.Event`) is set. Chain errors are raised from the
        iterator. See the module docstring for what counts as a change.
        Changes are reported at the head, as soon as a block shows them (not
        ``confirmations`` deep): a reorganisation may take one back, and is
        then reported as the change back.

        Every way a term ends is reported in chain order, by the model's
        name (:class:`chainfence.endings.End`): an expiry, a resignation
        (release) and a revoke empty the seat (None); a reacquisition by its
        holder and a grant (the namespace's admin revokes the term and issues
        the seat to another in one transaction) pass it straight to the next
        term. With ``ends=True`` a :class:`TermEnded` (the term, its end, the
        block that showed it) comes just before each such change.
        """
        seconds = None if timeout is None else _validate.wait(timeout)
        if stop is not None and not callable(getattr(stop, "is_set", None)):
            raise InvalidInput(f"stop must be a threading.Event (something with is_set()), got {stop!r}")
        if not isinstance(ends, bool):
            raise InvalidInput(f"ends must be a bool, got {ends!r}")
        yield from observe_steps(self._seat, self.registry._wait_timer, seconds, stop, ends)

    observe = streaming(_observe_steps)

    def watch(self, callback: Callable[[Leader | TermEnded | None], Any], *, ends: bool = False) -> Watch:
        """Call ``callback(leader)`` for the leader now and each change, in a background thread.

        The callback form of :meth:`observe` (tooz's ``watch_elected_as_leader``
        runs callbacks too), with its ``ends``. Returns a :class:`Watch`:
        ``stop()`` it, or use it as a context manager. A chain error (or an
        exception of the callback) ends the watch; ``stop()`` raises it.
        """
        _watch_args(callback, ends)
        watch = Watch(self, callback, ends=ends)
        watch._thread.start()
        return watch

    def __repr__(self) -> str:
        return f"<Election {self.name!r} ttl={self.ttl} as {self.registry.sender}>"


def _watch_args(callback: Any, ends: Any) -> None:
    if not callable(callback):
        raise InvalidInput(f"callback must be callable, got {callback!r}")
    if not isinstance(ends, bool):
        raise InvalidInput(f"ends must be a bool, got {ends!r}")


class Leadership(SyncFace):
    """A term won by :meth:`Election.campaign`: kept alive in the background until resigned or lost.

    ``token`` fences the leader's writes (carry it to a
    :class:`~chainfence.Guard`); :meth:`check` raises
    :class:`~chainfence.errors.LeaseLost` once the term can no longer be
    trusted (local: no chain call); :meth:`safe_remaining` is the time left
    before the keep-alive's safe deadline. As a context manager, leaving it
    resigns; if the term was lost and the body ended cleanly, leaving it
    raises ``LeaseLost`` (the body's writes may have been fenced off).
    """

    def __init__(
        self,
        election: Election,
        lease: Lease,
        *,
        on_lost: Callable[[LeaseLost], Any] | None,
        keeping: Keeping | None = None,
    ):
        self.election = election
        self.lease = lease
        self.name = election.name
        self.token = lease.token
        self.holder = lease.holder
        #: Chain time of the block that elected this term.
        self.since = lease.expires_at - lease.ttl
        self.block_number = lease.block_number
        self.resigned = False
        self._lost: LeaseLost | None = None
        if keeping is None:  # the thread keep-alive (an asyncio leadership hands over its task's, entered)
            keeping = lease.keep(on_lost=on_lost, **election._keep_options)
            keeping.__enter__()
        self._keeping = keeping
        self._kept = True

    def _drive(self, steps: Steps[Any]) -> Any:
        return self.lease._drive(steps)

    @property
    def expires_at(self) -> int:
        """The term's expiry (chain time) as of the last confirmed renewal."""
        return self.lease.expires_at

    def check(self) -> None:
        """Raise :class:`~chainfence.errors.LeaseLost` unless this term can still be trusted (no chain call)."""
        self.lease.check()

    def safe_remaining(self) -> float:
        """Seconds left before the safe deadline (0 once lost or resigned)."""
        return 0.0 if self.resigned else self.lease.safe_remaining()

    @property
    def lost(self) -> LeaseLost | None:
        """Why the term was lost, once it was (local: no chain call)."""
        return self._lost or self.lease._lost

    def _is_current_steps(self) -> Steps[bool]:
        """Whether the chain still considers this term current (a chain read)."""
        return (yield from self.lease._is_current_steps())

    is_current = operation(_is_current_steps)

    def resign(self) -> bool:
        """Step down: stop the keep-alive for good, then release the term so a successor can be elected.

        Returns True when it ended the term on-chain; False when there was
        nothing left to end: resigned before (nothing is sent), or the term
        had already ended (expired, superseded or released: the release was
        refused, nothing changed). A chain error (the node does not answer)
        is raised, and ``resign()`` may be called again.
        """
        if self.resigned:
            return False
        self._stop_keeping()
        return bool(self._drive(self._release_term_steps()))

    def _release_term_steps(self) -> Steps[bool]:
        """Release the term (its keep-alive stopped): True when it ended it, False when it had ended."""
        try:
            yield from self.lease._release_steps()
        except TokenNotCurrent as ended:
            logger.info("resign election=%s token=%d: the term had already ended (%s)", self.name, self.token, ended)
            self.resigned = True
            return False
        self.resigned = True
        logger.info("resigned election=%s token=%d", self.name, self.token)
        return True

    def _stop_keeping(self) -> None:
        if not self._kept:
            return
        self._kept = False
        try:
            self._keeping.__exit__(None, None, None)
        except LeaseLost as lost:
            self._lost = lost

    def __enter__(self) -> Leadership:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._stop_keeping()
        lost = self._lost
        try:
            if not self.resigned:
                self.resign()
        except Exception as resign_error:
            self._resign_failed(resign_error, exc, lost)
        _leave(lost, exc)

    def _resign_failed(self, resign_error: Exception, exc: BaseException | None, lost: LeaseLost | None) -> None:
        """Leaving the block: resigning failed (both faces)."""
        if exc is None and lost is None:
            raise resign_error
        logger.warning("resign after leaving failed election=%s token=%d: %s", self.name, self.token, resign_error)
        (exc or lost).add_note(  # type: ignore[union-attr]
            f"chainfence: resigning {self.name!r} token {self.token} also failed: {resign_error}"
        )

    def __repr__(self) -> str:
        state = " resigned" if self.resigned else (f" lost({self._lost.why})" if self._lost is not None else "")
        return f"<Leadership {self.name!r} token={self.token} holder={self.holder}{state}>"


def _leave(lost: LeaseLost | None, exc: BaseException | None) -> None:
    """Leaving a leadership's block: raise its loss, unless the body's own exception already says it."""
    if lost is None or isinstance(exc, LeaseLost):
        return
    if exc is None or isinstance(exc, Exception):
        raise lost
    exc.add_note(f"chainfence: {lost}")


class Watch:
    """A background :meth:`Election.observe` calling a callback; see :meth:`Election.watch`."""

    def __init__(self, election: Election, callback: Callable[[Leader | TermEnded | None], Any], *, ends: bool = False):
        self._election = election
        self._callback = callback
        self._ends = ends
        self._stop = threading.Event()
        #: The chain error (or the callback's exception) that ended the watch, if any.
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"chainfence-watch-{election.name}", daemon=True)

    def _run(self) -> None:
        try:
            for leader in self._election.observe(stop=self._stop, ends=self._ends):
                if self._stop.is_set():
                    return
                self._callback(leader)
        except Exception as error:
            logger.warning("watch of election=%s ended: %s: %s", self._election.name, type(error).__name__, error)
            self.error = error

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float | None = None) -> None:
        """Stop watching (no callback runs after this returns); raise the error that ended it, if any."""
        self._stop.set()
        if self._thread.ident is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.stop()
        else:
            self._stop.set()


# ----------------------------------------------------------------------
# asyncio: the same election, campaigned and observed from a task
# ----------------------------------------------------------------------


class AsyncElection(AsyncFace[Election], core=Election):
    """:class:`Election` for asyncio, over an :class:`~chainfence.aio.AsyncRegistry`: the same checks,
    steps and errors, awaited.

    ``await election.campaign()`` returns an :class:`AsyncLeadership` whose term is kept alive in a task
    (a loss runs ``on_lost`` and makes ``check()`` raise; it cancels nothing); ``election.observe()`` is an
    async generator (its ``stop`` an :class:`asyncio.Event`); ``election.watch(callback)`` runs it in a task
    (``callback`` may be a coroutine function).
    """

    def __init__(
        self,
        registry: AsyncRegistry,
        name: str,
        *,
        ttl: int,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        clock: Callable[[], float] | None = None,
        confirmations: int | None = None,
    ):
        if not isinstance(registry, AsyncRegistry):
            raise InvalidInput(f"registry must be a chainfence AsyncRegistry, got {type(registry).__name__}")
        #: The :class:`~chainfence.aio.AsyncRegistry` the election campaigns through.
        self.registry = registry
        #: The election's state (its seat, the leadership won), shared with the sync core.
        self.election = Election(
            registry.registry,
            name,
            ttl=ttl,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            confirmations=confirmations,
        )
        self._face: AsyncLeadership | None = None

    @property
    def _core(self) -> Election:
        return self.election

    @property
    def _driver(self) -> AsyncDriver:
        return self.registry._driver

    @classmethod
    def _from_core(cls, core: Election, driver: AsyncDriver) -> AsyncElection:
        face = cls.__new__(cls)
        face.registry, face.election, face._face = twin_of(core.registry, driver), core, None
        if core.leadership is not None:
            face._face = AsyncLeadership(face, core.leadership)
        return face

    name = mirrored("name")
    ttl = mirrored("ttl")
    confirmations = mirrored("confirmations")

    leader = awaiting(Election.leader)
    observe = astreaming(Election.observe)

    async def campaign(
        self, *, wait: float | None = None, on_lost: Callable[[LeaseLost], Any] | None = None
    ) -> AsyncLeadership:
        """:meth:`Election.campaign`, awaited: waits (no gas) until elected; the term is kept alive in a task.

        ``on_lost(error)`` runs once (in the keep-alive's task) when the term is lost; the leadership's
        :meth:`~AsyncLeadership.check` raises :class:`~chainfence.errors.LeaseLost` from then on. Use it
        as ``async with``: leaving it resigns.
        """
        election = self.election
        seconds, previous = election._campaign_args(wait, on_lost)
        if previous is not None:
            face = self._face
            if face is not None and face.leadership is previous:
                await face._stop_keeping()
            else:
                previous._stop_keeping()
        lease = await self._drive(election._term_steps(seconds))
        keeping = self._keeping(lease, on_lost)
        try:
            await keeping.__aenter__()
        except LeaseLost:  # the term was past its safe deadline before its keep-alive could start
            try:
                await twin_of(lease, self._driver).release()
            except Exception as release_error:
                logger.warning("release of a term lost at election failed token=%d: %s", lease.token, release_error)
            raise
        leadership = Leadership(election, lease, on_lost=on_lost, keeping=keeping)
        election._won(leadership)
        self._face = AsyncLeadership(self, leadership)
        return self._face

    def _keeping(self, lease: Lease, on_lost: Callable[[LeaseLost], Any] | None) -> AsyncKeeping:
        """The term's keep-alive in a task, reporting a loss without cancelling anything."""
        options = dict(self.election._keep_options)
        clock = options.pop("clock") or _keepalive.lease_clock
        core = lease._keep_core(on_lost=on_lost, clock=clock, since=None, **options)
        keeper = AsyncKeeper(lease, core, drive=self._drive, clock=clock, on_lost=on_lost, protect=False)
        return AsyncKeeping(lease, keeper)

    @property
    def leadership(self) -> AsyncLeadership | None:
        """The leadership this object won and has not resigned, else None (local: no chain call)."""
        face = self._face
        won = self.election.leadership
        return face if face is not None and won is face.leadership else None

    async def resign(self) -> bool:
        """:meth:`Election.resign`, awaited: resign the leadership this object won (False when it holds none)."""
        face = self.leadership
        if face is None:
            return False
        return await face.resign()

    def watch(self, callback: Callable[[Leader | TermEnded | None], Any], *, ends: bool = False) -> AsyncWatch:
        """:meth:`Election.watch` in a task: ``callback(leader)`` (a function or a coroutine function) for the
        leader now and each change. Returns an :class:`AsyncWatch`: ``await stop()`` it, or ``async with``."""
        _watch_args(callback, ends)
        return AsyncWatch(self, callback, ends=ends)

    def __repr__(self) -> str:
        return "<Async" + repr(self.election)[1:]


class AsyncLeadership(AsyncFace[Leadership], core=Leadership):
    """A term won by :meth:`AsyncElection.campaign`: the :class:`Leadership`'s fields and checks, its term
    kept alive in a task; ``await resign()``, or ``async with`` (leaving it resigns)."""

    def __init__(self, election: AsyncElection, leadership: Leadership):
        #: The :class:`AsyncElection` it was won through.
        self.election = election
        #: The term's state, shared with its keep-alive.
        self.leadership = leadership

    @property
    def _core(self) -> Leadership:
        return self.leadership

    @property
    def _driver(self) -> AsyncDriver:
        return self.election._driver

    @classmethod
    def _from_core(cls, core: Leadership, driver: AsyncDriver) -> AsyncLeadership:
        return cls(twin_of(core.election, driver), core)

    lease = mirrored("lease", "The term's lease, an AsyncLease.")
    name = mirrored("name")
    token = mirrored("token")
    holder = mirrored("holder")
    since = mirrored("since")
    block_number = mirrored("block_number")
    resigned = mirrored("resigned")
    expires_at = mirrored("expires_at")
    lost = mirrored("lost")

    check = local(Leadership.check)
    safe_remaining = local(Leadership.safe_remaining)
    is_current = awaiting(Leadership.is_current)

    async def resign(self) -> bool:
        """:meth:`Leadership.resign`, awaited: stop the keep-alive for good, then release the term."""
        leadership = self.leadership
        if leadership.resigned:
            return False
        await self._stop_keeping()
        return bool(await self._drive(leadership._release_term_steps()))

    async def _stop_keeping(self) -> None:
        leadership = self.leadership
        if not leadership._kept:
            return
        keeping = leadership._keeping
        if not isinstance(keeping, AsyncKeeping):
            leadership._stop_keeping()  # a term won through the sync face: its renewer is a thread
            return
        leadership._kept = False
        try:
            await keeping.__aexit__(None, None, None)
        except LeaseLost as lost:
            leadership._lost = lost

    async def __aenter__(self) -> AsyncLeadership:
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        leadership = self.leadership
        await self._stop_keeping()
        lost = leadership._lost
        try:
            if not leadership.resigned:
                await self.resign()
        except Exception as resign_error:
            leadership._resign_failed(resign_error, exc, lost)
        _leave(lost, exc)

    def __repr__(self) -> str:
        return "<Async" + repr(self.leadership)[1:]


class AsyncWatch:
    """A background :meth:`AsyncElection.observe` calling a callback, in a task; see :meth:`AsyncElection.watch`."""

    def __init__(
        self,
        election: AsyncElection,
        callback: Callable[[Leader | TermEnded | None], Any],
        *,
        ends: bool = False,
    ):
        self._election = election
        self._callback = callback
        self._ends = ends
        self._stop = asyncio.Event()
        #: The chain error (or the callback's exception) that ended the watch, if any.
        self.error: BaseException | None = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"chainfence-watch-{election.name}")

    async def _run(self) -> None:
        try:
            async for leader in self._election.observe(stop=self._stop, ends=self._ends):
                if self._stop.is_set():
                    return
                called = self._callback(leader)
                if isinstance(called, Awaitable):
                    await called
        except Exception as error:
            logger.warning("watch of election=%s ended: %s: %s", self._election.name, type(error).__name__, error)
            self.error = error

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def stop(self, timeout: float | None = None) -> None:
        """Stop watching (no callback runs after this returns); raise the error that ended it, if any."""
        self._stop.set()
        if asyncio.current_task() is not self._task:
            await asyncio.wait({self._task}, timeout=timeout)
        if self.error is not None:
            raise self.error

    async def __aenter__(self) -> AsyncWatch:
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            await self.stop()
        else:
            self._stop.set()


# ----------------------------------------------------------------------
# What each part of an election does about every way a lease ends or is refused (chainfence.endings)
# ----------------------------------------------------------------------

endings.declare(
    "election.campaign",
    __name__,
    {
        Refusal.HELD: "waits (no gas) for the term to end, as acquire(wait=) does; LeaseHeld (the leader) when "
        "the wait ends",
        Refusal.LOCK_DELAYED: "waits out the namespace's lock-delay after an expired term, by chain time; "
        "LockDelayed when the wait ends first",
        Refusal.NOT_ADMITTED: "raises NotAdmitted at once: no Leadership, nothing sent",
    },
    waits=True,
)

endings.declare(
    "election.leadership",
    __name__,
    {
        End.EXPIRED: "the renewal after it is refused: LeaseLost(why='expired'), on_lost runs, check() raises",
        End.RELEASED: "resign() stops the keep-alive first, then releases; released elsewhere (same key): "
        "LeaseLost(why='released') at the next renewal",
        End.COMPLETED: "never a term's end (a term is a plain lease): complete(result) records a result and "
        "the term is kept",
        End.SUPERSEDED: "the same account campaigned again elsewhere: LeaseLost(why='superseded') at the next "
        "renewal; the new term fences the old one off",
        End.REVOKED: "LeaseLost(why='revoked') at the next renewal (not retried until the deadline)",
        End.GRANTED: "LeaseLost(why='granted') at the next renewal",
        End.ROLLED_BACK: "LeaseLost(why='rolled_back') at the next renewal: the chain no longer has the term",
        LocalEnd.DEADLINE: "no renewal confirmed before the safe deadline: LeaseLost(why='deadline') before the "
        "term can end on-chain, so before a successor can be elected",
        LocalEnd.ERROR: "a renewer failure that is not a chain error: LeaseLost(why='error') at once",
    },
    holds=True,
    keeps_alive=True,
)

_OBSERVED: dict[enum.Enum, str] = {
    End.EXPIRED: "None (the seat is empty) at the first block stamped at or after the expiry, or by chain time "
    "when no block comes; TermEnded(expired) first with ends=True",
    End.RELEASED: "None at the release's block (a resignation); TermEnded(released) first",
    End.COMPLETED: "no change: an election's resource is never a claimed work item, and a plain lease's "
    "completion ends nothing",
    End.SUPERSEDED: "the holder's new term at once (no None between); TermEnded(superseded) first",
    End.REVOKED: "None at the revoke's block; TermEnded(revoked) first",
    End.GRANTED: "the grantee's term at once, the revoke and the grant being one transaction (no None "
    "between); TermEnded(granted) first",
    End.ROLLED_BACK: "the state read again after the reorganisation (None or the term now there); "
    "TermEnded(rolled_back) first",
}

endings.declare("election.observe", __name__, _OBSERVED, watches=True)
endings.declare(
    "election.watch",
    __name__,
    {end: f"the callback gets what observe() yields: {text}" for end, text in _OBSERVED.items()},
    watches=True,
)
