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
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _validate, _waiting, endings
from ._node import events as _events
from .endings import End, LocalEnd, Refusal
from .errors import InvalidInput, InvalidTtl, LeaseLost, TokenNotCurrent
from .keepalive import DEFAULT_BLOCK_TIME_MARGIN, DEFAULT_LATENCY_MARGIN, KeepAliveCore
from .lease import AcquireReason, LeaseInfo

if TYPE_CHECKING:
    from .lease import Lease
    from .registry import Registry

logger = logging.getLogger(__name__)

__all__ = ["Election", "Leader", "Leadership", "TermEnded", "Watch"]

#: The events an observer follows: every lease event of the resource that can end a term or start one.
_KINDS = (
    _events.Kind.ACQUIRED,
    _events.Kind.RELEASED,
    _events.Kind.RENEWED,
    _events.Kind.REVOKED,
    _events.Kind.COMPLETED,
)

#: The words :func:`chainfence.endings.of_event` reads events by.
_EVENT_WORDS = {
    _events.Kind.ACQUIRED: "acquired",
    _events.Kind.RELEASED: "released",
    _events.Kind.REVOKED: "revoked",
    _events.Kind.COMPLETED: "completed",
}

#: Whether the seat is empty after a term ends this way (observe() then yields None) or passes straight
#: to the next term (a reacquisition, a grant: one transaction ended the term and began the next).
_EMPTIES_THE_SEAT = {
    End.EXPIRED: True,
    End.RELEASED: True,
    End.REVOKED: True,
    End.COMPLETED: True,  # never a term's end: an election's resource is never a claimed work item
    End.SUPERSEDED: False,
    End.GRANTED: False,
    End.ROLLED_BACK: False,  # the state read again follows at once
}


@dataclass(frozen=True)
class Leader:
    """A term of an election: who leads (``holder``) with which fencing ``token``.

    ``since`` is the chain time of the block that elected it (``block_number``);
    ``expires_at`` the chain time its term ends unless renewed, as last read.
    Two terms are the same term when their tokens (and holders: a
    reorganisation may give a token number to another holder) are equal.
    """

    name: str
    holder: str
    token: int
    since: int
    expires_at: int
    block_number: int


@dataclass(frozen=True)
class TermEnded:
    """How a term ended, as :meth:`Election.observe` reports it with ``ends=True``: in chain order, just
    before the change it makes (None, or the next :class:`Leader`).

    ``end`` is the model's word (:class:`chainfence.endings.End`): ``expired``, ``released``,
    ``revoked``, ``granted`` (the namespace's admin gave the seat to another in the same transaction),
    ``superseded`` (its holder campaigned again: a new token), or ``rolled_back`` (a reorganisation
    took the term away). ``block_number`` is the block that showed it, None for an expiry judged by
    chain time with no block stamped past it yet.
    """

    leader: Leader
    end: End
    block_number: int | None


class Election:
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
        from .registry import Registry

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
        self._leadership: Leadership | None = None
        # (token, holder) -> (block, chain time) of its acquisition; a reorganisation may reuse a token number
        self._elected: dict[tuple[int, str], tuple[int, int]] = {}

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
        if on_lost is not None and not callable(on_lost):
            raise InvalidInput(f"on_lost must be callable, got {on_lost!r}")
        seconds = _validate.MAX_WAIT if wait is None else _validate.wait(wait)
        previous = self.leadership
        if previous is not None:
            if previous.lost is None:
                raise InvalidInput(
                    f"this Election already leads {self.name!r} (token {previous.token}): resign() first, "
                    "or campaign from another Election object to fence it off"
                )
            previous._stop_keeping()  # lost: never renewed again; the new term fences it off
        lease = self.registry.acquire(self.name, self.ttl, confirmations=self.confirmations, wait=seconds or None)
        try:
            leadership = Leadership(self, lease, on_lost=on_lost)
        except LeaseLost:  # the term was past its safe deadline before its keep-alive could start
            try:
                lease.release()
            except Exception as release_error:
                logger.warning("release of a term lost at election failed token=%d: %s", lease.token, release_error)
            raise
        self._leadership = leadership
        logger.info(
            "elected election=%s token=%d holder=%s expires_at=%d tx=%s",
            self.name,
            lease.token,
            lease.holder,
            lease.expires_at,
            lease.tx_hash,
        )
        return leadership

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

    def leader(self) -> Leader | None:
        """The current leader, judged at :meth:`Chain.now <chainfence.Chain.now>` as views judge, or None.

        One read of the resource (and, the first time a term is seen, its
        election's block: ``eth_getLogs`` filtered by token, searching back
        from the head a page of blocks at a time, and that block's time).
        """
        info = self.registry.last_lease(self.name)
        if info is None or not info.live:
            return None
        return self._leader_of(info)

    def observe(
        self, *, timeout: float | None = None, stop: threading.Event | None = None, ends: bool = False
    ) -> Iterator[Leader | TermEnded | None]:
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
        return self._observe(seconds, stop, ends)

    def watch(self, callback: Callable[[Leader | TermEnded | None], Any], *, ends: bool = False) -> Watch:
        """Call ``callback(leader)`` for the leader now and each change, in a background thread.

        The callback form of :meth:`observe` (tooz's ``watch_elected_as_leader``
        runs callbacks too), with its ``ends``. Returns a :class:`Watch`:
        ``stop()`` it, or use it as a context manager. A chain error (or an
        exception of the callback) ends the watch; ``stop()`` raises it.
        """
        if not callable(callback):
            raise InvalidInput(f"callback must be callable, got {callback!r}")
        if not isinstance(ends, bool):
            raise InvalidInput(f"ends must be a bool, got {ends!r}")
        watch = Watch(self, callback, ends=ends)
        watch._thread.start()
        return watch

    # -- internal --------------------------------------------------------------------

    def _leader_of(self, info: LeaseInfo) -> Leader:
        block, since = self._election_of(info.token, info.holder)
        return Leader(self.name, info.holder, info.token, since, info.expires_at, block)

    def _election_of(self, token: int, holder: str) -> tuple[int, int]:
        """(block, chain time) of the acquisition of ``token``: searched backwards from the head, one page
        of blocks at a time (a live term was usually won recently), down to the registry's deployment."""
        known = self._elected.get((token, holder))
        if known is None:
            chain = self.registry.chain
            first, end = self.registry.deployment_block(), chain.block_number()
            block = None
            while block is None and end >= first:
                start = max(first, end - _events.DEFAULT_MAX_LOG_RANGE + 1)
                logs = _events.fetch_all(
                    chain,
                    self.registry.address,
                    kinds=[_events.Kind.ACQUIRED],
                    resource_id=self._resource_id,
                    token=token,
                    from_block=start,
                    to_block=end,
                )
                mine = [log for log in logs if log.holder == holder]
                if mine:
                    block = mine[-1].block_number
                end = start - 1
            if block is None:  # pragma: no cover - a live token always has its LeaseAcquired
                return 0, 0
            known = (block, _events.BlockTimes(chain)(block))
            self._elected[token, holder] = known
        return known

    def _observe(
        self, seconds: float | None, stop: threading.Event | None, ends: bool
    ) -> Iterator[Leader | TermEnded | None]:
        registry = self.registry
        timer = registry._wait_timer
        pace = _waiting.pace(registry.chain)
        deadline = math.inf if seconds is None else timer.now() + seconds
        observer = _Observer(self, timer, pace)
        yield observer.current
        while True:
            if stop is not None and stop.is_set():
                return
            remaining = deadline - timer.now()
            pause = min(pace.poll, remaining, max(0.0, observer.wake_at - timer.now()))
            if pause > 0:
                if stop is not None and timer is _waiting.SYSTEM:
                    if stop.wait(pause):
                        return
                else:
                    timer.sleep(pause)
            for change in observer.poll():
                if ends or not isinstance(change, TermEnded):
                    yield change
            if remaining <= 0:
                return  # the timeout has passed: what changed until this last poll was reported

    def __repr__(self) -> str:
        return f"<Election {self.name!r} ttl={self.ttl} as {self.registry.sender}>"


Change = Leader | None | TermEnded


class _Observer:
    """Follows one election's events and chain time; :meth:`poll` returns the changes since the last poll.

    Each term's end is named as :mod:`chainfence.endings` names it (:meth:`_end`); what it does to the
    seat is :data:`_EMPTIES_THE_SEAT`.
    """

    def __init__(self, election: Election, timer: _waiting.Timer, pace: _waiting.Pace):
        self._election = election
        self._chain = election.registry.chain
        self._timer = timer
        self._pace = pace
        self._times = _events.BlockTimes(self._chain)
        head = self._chain.rpc.block("latest")
        self.head, self.head_hash = int(head["number"]), bytes(head["hash"])
        self.current: Leader | None = None
        self.last_token = 0
        self.wake_at = math.inf
        self._read(self.head)

    def _read(self, block: int) -> list[Change]:
        """Read the resource at ``block`` and judge it at chain time: the state to compare events with.

        A term reported before that is no longer the resource's lease (after a reorganisation, or a gap
        too long to read the events of) ended in a way :meth:`_lost_end` names.
        """
        info = self._election.registry.last_lease(self._election.name, block=block)
        current = self.current
        changes: list[Change] = []
        if current is not None:
            if info is not None and (info.token, info.holder) == (current.token, current.holder):
                end = endings.of_status(info.status)
                if end is not None:  # the same term, ended meanwhile (a release, a revoke, an expiry)
                    changes += self._end(current, end, block)
            else:
                changes += self._end(current, self._lost_end(current, block), block)
        self.last_token = info.token if info is not None else 0
        leader = self._election._leader_of(info) if info is not None and info.live else None
        emptied = bool(changes) and changes[-1] is None
        changes += self._set(leader)
        if changes and leader is None and not emptied and isinstance(changes[-1], TermEnded):
            changes.append(None)  # a term taken away (rolled back, ...) and nobody leads now: the seat is empty
        return changes + self._judge_expiry(force=True)

    def _lost_end(self, term: Leader, head: int) -> End:
        """How ``term``, no longer the resource's lease at ``head``, ended: ``rolled_back`` if its acquisition
        is gone from the chain, else as the first event after it that ends it says (an expiry emits none)."""
        chain, registry, resource_id = self._chain, self._election.registry, self._election._resource_id
        start = min(term.block_number, head)
        acquired = [
            log
            for log in _events.fetch_all(
                chain,
                registry.address,
                kinds=[_events.Kind.ACQUIRED],
                resource_id=resource_id,
                token=term.token,
                from_block=start,
                to_block=head,
            )
            if log.holder == term.holder
        ]
        if not acquired:
            return End.ROLLED_BACK
        later = _events.fetch_all(
            chain,
            registry.address,
            kinds=list(_KINDS),
            resource_id=resource_id,
            from_block=acquired[-1].block_number,
            to_block=head,
        )
        for index, event in enumerate(later):
            if event.kind is _events.Kind.ACQUIRED and event.previous_token == term.token:
                return endings.of_event("acquired", reason=AcquireReason(event.reason))
            if event.token == term.token and event.kind in (_events.Kind.RELEASED, _events.Kind.REVOKED):
                if self._granted_over(event, later[index + 1] if index + 1 < len(later) else None):
                    return End.GRANTED
                return endings.of_event(_EVENT_WORDS[event.kind])  # type: ignore[return-value]
        return End.EXPIRED  # no event ended it, and it is no longer the resource's live lease

    @staticmethod
    def _granted_over(event: _events.RegistryLog, following: _events.RegistryLog | None) -> bool:
        """Whether ``event`` (a LeaseRevoked) is the first half of a grant over the live lease: the grant's
        acquisition (reason granted, superseding that token) follows in the same transaction."""
        return (
            event.kind is _events.Kind.REVOKED
            and following is not None
            and following.kind is _events.Kind.ACQUIRED
            and (following.block_number, following.tx_hash) == (event.block_number, event.tx_hash)
            and following.previous_token == event.token
            and following.reason == AcquireReason.GRANTED
        )

    def _end(self, term: Leader, end: End, block: int | None) -> list[Change]:
        """``term`` ended as ``end`` (shown by ``block``): the TermEnded, and None if that empties the seat."""
        logger.info(
            "election=%s token=%d holder=%s ended: %s (block %s)", term.name, term.token, term.holder, end.value, block
        )
        changes: list[Change] = [TermEnded(term, end, block)]
        self.current, self.wake_at = None, math.inf
        if _EMPTIES_THE_SEAT[end]:
            changes.append(None)
        return changes

    def _set(self, leader: Leader | None) -> list[Change]:
        current = self.current
        same = (leader is None and current is None) or (
            leader is not None
            and current is not None
            and (leader.token, leader.holder) == (current.token, current.holder)
        )  # after a reorganisation another holder may have the same token number: another term
        self.current = leader
        if leader is None:
            self.wake_at = math.inf
        return [] if same else [leader]

    def _judge_expiry(self, *, force: bool = False) -> list[Change]:
        """At the local clock's estimate of the expiry (or when forced), ask the chain's time."""
        current = self.current
        if current is None or (not force and self._timer.now() < self.wake_at):
            return []
        now = self._chain.now()
        if now >= current.expires_at:
            return self._end(current, End.EXPIRED, None)  # judged by chain time: no event says so
        self.wake_at = self._timer.now() + max(float(current.expires_at - now), self._pace.poll)
        return []

    def poll(self) -> list[Change]:
        block = self._chain.rpc.block("latest")
        if block is None:  # pragma: no cover - every node has a latest block
            return []
        number, timestamp, block_hash = int(block["number"]), int(block["timestamp"]), bytes(block["hash"])
        changes: list[Change] = []
        if number == self.head and block_hash == self.head_hash:
            return self._judge_expiry()
        if number <= self.head or number - self.head > _waiting.MAX_LOG_GAP or not self._extends(block):
            logger.debug(
                "election=%s: the head moved from %d to %d off its chain; reading again",
                self._election.name,
                self.head,
                number,
            )
            self.head, self.head_hash = number, block_hash
            return self._read(number)  # a reorganisation (or far behind): the state, not the history
        if number > self.head:
            first, self.head, self.head_hash = self.head + 1, number, block_hash
            events = _events.fetch_all(
                self._chain,
                self._election.registry.address,
                kinds=_KINDS,
                resource_id=self._election._resource_id,
                from_block=first,
                to_block=number,
            )
            for index, event in enumerate(events):
                changes += self._apply(event, events[index + 1] if index + 1 < len(events) else None)
            if self.current is not None and timestamp >= self.current.expires_at:
                changes += self._end(self.current, End.EXPIRED, number)  # a block stamped at or after the expiry
            elif self.current is not None and timestamp >= self.current.expires_at - 1:
                return changes + self._judge_expiry(force=True)  # a second before: the pending block may be past
        return changes + self._judge_expiry()

    def _extends(self, block: Any) -> bool:
        """Whether ``block`` (above the head) descends from the head this observer saw last."""
        number = int(block["number"])
        if number == self.head + 1:
            return bytes(block["parentHash"]) == self.head_hash
        seen = self._chain.rpc.block(self.head)
        return seen is not None and bytes(seen["hash"]) == self.head_hash

    def _apply(self, event: _events.RegistryLog, following: _events.RegistryLog | None) -> list[Change]:
        """One event of the resource (``following``: the next one, to tell a grant from a revoke)."""
        current = self.current
        kind = event.kind
        if kind is _events.Kind.ACQUIRED:
            if event.token <= self.last_token:
                return []  # already in the state read
            self.last_token = event.token
            changes: list[Change] = []
            if current is not None:
                reason = AcquireReason(event.reason)
                at = self._times(event.block_number)
                if at >= current.expires_at:
                    changes += self._end(current, End.EXPIRED, event.block_number)  # the term ran out first
                else:  # a term taken live: by its holder again (superseded) or by a grant (granted)
                    changes += self._end(current, endings.of_event("acquired", reason=reason), event.block_number)  # type: ignore[arg-type]
            since = self._times(event.block_number)
            self._election._elected[event.token, event.holder] = (event.block_number, since)
            leader = Leader(self._election.name, event.holder, event.token, since, event.expires_at, event.block_number)
            changes += self._set(leader)
            self.wake_at = self._timer.now() + max(float(event.expires_at - since), self._pace.poll)
            return changes
        if current is None or (event.token, event.holder) != (current.token, current.holder):
            return []  # another token's event (older, or a term already reported as ended)
        if kind is _events.Kind.RENEWED:  # not a change: the same term, longer
            self.current = dataclasses.replace(current, expires_at=event.expires_at)
            self.wake_at = self._timer.now() + max(
                float(event.expires_at - self._times(event.block_number)), self._pace.poll
            )
            return []
        if kind is _events.Kind.COMPLETED:
            # A result recorded under the term's token: a plain lease's completion ends nothing (an election's
            # resource is never a claimed work item, the one whose completion is its end).
            assert endings.of_event("completed", claimed=False) is None
            return []
        if self._granted_over(event, following):
            return self._end(current, End.GRANTED, event.block_number)  # its acquisition (next) elects the grantee
        end = endings.of_event(_EVENT_WORDS[kind])  # released, revoked
        assert end is not None
        return self._end(current, end, event.block_number)


class Leadership:
    """A term won by :meth:`Election.campaign`: kept alive in the background until resigned or lost.

    ``token`` fences the leader's writes (carry it to a
    :class:`~chainfence.Guard`); :meth:`check` raises
    :class:`~chainfence.errors.LeaseLost` once the term can no longer be
    trusted (local: no chain call); :meth:`safe_remaining` is the time left
    before the keep-alive's safe deadline. As a context manager, leaving it
    resigns; if the term was lost and the body ended cleanly, leaving it
    raises ``LeaseLost`` (the body's writes may have been fenced off).
    """

    def __init__(self, election: Election, lease: Lease, *, on_lost: Callable[[LeaseLost], Any] | None):
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
        self._keeping = lease.keep(on_lost=on_lost, **election._keep_options)
        self._keeping.__enter__()
        self._kept = True

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

    def is_current(self) -> bool:
        """Whether the chain still considers this term current (a chain read)."""
        return self.lease.is_current()

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
        try:
            self.lease.release()
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
            if exc is None and lost is None:
                raise
            logger.warning("resign after leaving failed election=%s token=%d: %s", self.name, self.token, resign_error)
            (exc or lost).add_note(
                f"chainfence: resigning {self.name!r} token {self.token} also failed: {resign_error}"
            )
        if lost is None or isinstance(exc, LeaseLost):
            return
        if exc is None or isinstance(exc, Exception):
            raise lost
        exc.add_note(f"chainfence: {lost}")

    def __repr__(self) -> str:
        state = " resigned" if self.resigned else (f" lost({self._lost.why})" if self._lost is not None else "")
        return f"<Leadership {self.name!r} token={self.token} holder={self.holder}{state}>"


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

_OBSERVED = {
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
