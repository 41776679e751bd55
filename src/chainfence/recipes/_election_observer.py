"""An election's seat, followed: the observer behind ``Election.observe`` and ``watch``, as steps.

The seat is a resource of a registry; its leader is the holder of its live
lease, each term a new token. :class:`Observer` follows the resource's
events block by block and chain time, and names every end of a term as
:mod:`chainfence.endings` does (see :mod:`chainfence.recipes.election`, whose
docstring says what counts as a change); :func:`observe_steps` emits each
change, for a generator (``Election.observe``) and an async generator
(``AsyncElection.observe``) alike. :class:`Leader` and :class:`TermEnded`
are what it reports (re-exported by :mod:`chainfence.recipes.election`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from .. import endings
from .._core import log as _log
from .._core.effects import RPC, Emit, Sleep, Steps
from .._node import completeness as _completeness
from .._node import events as _events
from .._sdk import waiting as _waiting
from .._sdk.block_times import BlockTimes
from .._sdk.contract import RegistryContract
from .._sdk.lease_state import AcquireReason, LeaseInfo
from ..endings import End
from ..errors import LogsIncomplete

logger = _log.get("chainfence.recipes.election")

__all__ = ["Leader", "Observer", "Seat", "TermEnded", "observe_steps"]

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


Change = Leader | None | TermEnded


class Seat:
    """One election's resource on a registry, and the terms found on it: (token, holder) -> (block, chain
    time) of the acquisition that began each (a reorganisation may give a token number to another holder)."""

    def __init__(self, registry: RegistryContract, name: str, resource_id: bytes):
        self.registry = registry
        self.name = name
        self.resource_id = resource_id
        self.elected: dict[tuple[int, str], tuple[int, int]] = {}

    def leader_of_steps(self, info: LeaseInfo) -> Steps[Leader]:
        """The term ``info`` (a live lease of the seat) is, with the block and chain time that elected it."""
        block, since = yield from self.elected_at_steps(info.token, info.holder)
        return Leader(self.name, info.holder, info.token, since, info.expires_at, block)

    def elected_at_steps(self, token: int, holder: str) -> Steps[tuple[int, int]]:
        """(block, chain time) of the acquisition of ``token``: searched backwards from the head, one page
        of blocks at a time (a live term was usually won recently), down to the registry's deployment."""
        known = self.elected.get((token, holder))
        if known is None:
            registry = self.registry
            first = yield from registry._deployment_block_steps()
            end = yield RPC.block_number()
            block = None
            while block is None and end >= first:
                start = max(first, end - _events.DEFAULT_MAX_LOG_RANGE + 1)
                logs = yield from _events.fetch_all_steps(
                    registry.chain,
                    registry.address,
                    kinds=[_events.Kind.ACQUIRED],
                    resource_id=self.resource_id,
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
            known = (block, (yield from BlockTimes().at_steps(block)))
            self.elected[token, holder] = known
        return known


def observe_steps(seat: Seat, timer: _waiting.Timer, seconds: float | None, stop: Any, ends: bool) -> Steps[None]:
    """Emit the leader now, then each change, until ``seconds`` of ``timer`` have passed (one last look
    once they have) or ``stop`` is set (a :class:`threading.Event`, or an :class:`asyncio.Event` for
    the asyncio face); with ``ends``, each :class:`TermEnded` too."""
    registry = seat.registry
    pace = yield from _waiting.pace_steps(registry.chain)
    observer = Observer(seat, timer, pace)
    head = yield RPC.block("latest")
    deadline = math.inf if seconds is None else timer.now() + seconds
    yield from observer.start_steps(head)
    yield Emit(observer.current)
    while True:
        if stop is not None and stop.is_set():
            return
        remaining = deadline - timer.now()
        pause = min(pace.poll, remaining, max(0.0, observer.wake_at - timer.now()))
        if pause > 0:
            if stop is not None and timer is _waiting.SYSTEM:
                yield Sleep(pause, using=_stop_waiter(stop))
                if stop.is_set():
                    return
            else:
                yield _waiting.sleep(timer, pause)
        for change in (yield from observer.poll_steps()):
            if ends or not isinstance(change, TermEnded):
                yield Emit(change)
        if remaining <= 0:
            return  # the timeout has passed: what changed until this last poll was reported


def _stop_waiter(stop: Any) -> Callable[[float], Any]:
    """A pause that ends early when ``stop`` is set: ``threading.Event.wait``, or its asyncio equivalent."""
    if isinstance(stop, asyncio.Event):

        async def wait(seconds: float) -> None:
            try:
                await asyncio.wait_for(stop.wait(), seconds)
            except TimeoutError:
                pass

        return wait
    return stop.wait  # type: ignore[no-any-return]


class Observer:
    """Follows one election's events and chain time; :meth:`poll` returns the changes since the last poll.

    Each term's end is named as :mod:`chainfence.endings` names it (:meth:`_end`); what it does to the
    seat is :data:`_EMPTIES_THE_SEAT`.
    """

    def __init__(self, seat: Seat, timer: _waiting.Timer, pace: _waiting.Pace):
        self._seat = seat
        self._registry = seat.registry
        self._chain = seat.registry.chain
        self._timer = timer
        self._pace = pace
        self._times = BlockTimes()
        self.head, self.head_hash = 0, b""
        self.current: Leader | None = None
        self.last_token = 0
        self.wake_at = math.inf

    def start_steps(self, head: Any = None) -> Steps[None]:
        """Read the resource at ``head`` (the latest block, read now if not given): the state the first poll
        compares with."""
        if head is None:
            head = yield RPC.block("latest")
        self.head, self.head_hash = int(head["number"]), bytes(head["hash"])
        yield from self._read_steps(self.head)

    def _read_steps(self, block: int) -> Steps[list[Change]]:
        """Read the resource at ``block`` and judge it at chain time: the state to compare events with.

        A term reported before that is no longer the resource's lease (after a reorganisation, or a gap
        too long to read the events of) ended in a way :meth:`_lost_end` names.
        """
        info = yield from self._registry._last_lease_steps(self._seat.name, block=block)
        current = self.current
        changes: list[Change] = []
        if current is not None:
            if info is not None and (info.token, info.holder) == (current.token, current.holder):
                end = endings.of_status(info.status)
                if end is not None:  # the same term, ended meanwhile (a release, a revoke, an expiry)
                    changes += self._end(current, end, block)
            else:
                changes += self._end(current, (yield from self._lost_end_steps(current, block)), block)
        self.last_token = info.token if info is not None else 0
        leader = (yield from self._seat.leader_of_steps(info)) if info is not None and info.live else None
        emptied = bool(changes) and changes[-1] is None
        changes += self._set(leader)
        if changes and leader is None and not emptied and isinstance(changes[-1], TermEnded):
            changes.append(None)  # a term taken away (rolled back, ...) and nobody leads now: the seat is empty
        return changes + (yield from self._judge_expiry_steps(force=True))

    def _lost_end_steps(self, term: Leader, head: int) -> Steps[End]:
        """How ``term``, no longer the resource's lease at ``head``, ended: ``rolled_back`` if its acquisition
        is gone from the chain, else as the first event after it that ends it says (an expiry emits none)."""
        chain, registry, resource_id = self._chain, self._registry, self._seat.resource_id
        start = min(term.block_number, head)
        acquired = [
            log
            for log in (
                yield from _events.fetch_all_steps(
                    chain,
                    registry.address,
                    kinds=[_events.Kind.ACQUIRED],
                    resource_id=resource_id,
                    token=term.token,
                    from_block=start,
                    to_block=head,
                )
            )
            if log.holder == term.holder
        ]
        if not acquired:
            return End.ROLLED_BACK
        later = yield from _events.fetch_all_steps(
            chain,
            registry.address,
            kinds=list(_KINDS),
            resource_id=resource_id,
            from_block=acquired[-1].block_number,
            to_block=head,
        )
        for index, event in enumerate(later):
            if event.kind is _events.Kind.ACQUIRED and event.previous_token == term.token:
                return cast(End, endings.of_event("acquired", reason=AcquireReason(cast(int, event.reason))))
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

    def _judge_expiry_steps(self, *, force: bool = False) -> Steps[list[Change]]:
        """At the local clock's estimate of the expiry (or when forced), ask the chain's time."""
        current = self.current
        if current is None or (not force and self._timer.now() < self.wake_at):
            return []
        now = yield from self._chain._now_steps()
        if now >= current.expires_at:
            return self._end(current, End.EXPIRED, None)  # judged by chain time: no event says so
        self.wake_at = self._timer.now() + max(float(current.expires_at - now), self._pace.poll)
        return []

    def poll_steps(self) -> Steps[list[Change]]:
        """The changes since the last poll (one look at the head; the new blocks' events, if any)."""
        block = yield RPC.block("latest")
        if block is None:  # pragma: no cover - every node has a latest block
            return []
        number, timestamp, block_hash = int(block["number"]), int(block["timestamp"]), bytes(block["hash"])
        changes: list[Change] = []
        if number == self.head and block_hash == self.head_hash:
            return (yield from self._judge_expiry_steps())
        if (
            number <= self.head
            or number - self.head > _waiting.MAX_LOG_GAP
            or not (yield from self._extends_steps(block))
        ):
            logger.debug(
                "election=%s: the head moved from %d to %d off its chain; reading again",
                self._seat.name,
                self.head,
                number,
            )
            self.head, self.head_hash = number, block_hash
            return (yield from self._read_steps(number))  # a reorganisation (or far behind): the state, not the history
        if number > self.head:
            first = self.head + 1
            try:
                answered = yield from _events.fetch_all_steps(
                    self._chain,
                    self._registry.address,
                    kinds=_KINDS,
                    resource_id=self._seat.resource_id,
                    from_block=first,
                    to_block=number,
                )
            except LogsIncomplete as refused:
                # An answer holding a log it cannot have (another block's, one that does not read): nothing
                # of it read, as before a held block (below); the next poll asks again.
                logger.warning("election=%s: waits at block %d: %s", self._seat.name, self.head, refused)
                self.wake_at = max(self.wake_at, self._timer.now() + self._pace.poll)
                return changes
            # The blocks' own logsBloom (and receipts) say whether the answer is all of their logs: the head
            # moves no further than the last block that checks out (a lagging log backend delays the
            # observer, never makes it skip a term).
            checked = yield from _completeness.check_steps(
                self._registry.address,
                first,
                number,
                answered,
                kinds=_KINDS,
                resource_id=self._seat.resource_id,
                headers={number: block},
            )
            if checked.end >= first:
                self.head, self.head_hash = checked.end, _completeness.block_hash(checked.headers[checked.end])
            events = checked.logs
            for index, event in enumerate(events):
                following = events[index + 1] if index + 1 < len(events) else None
                changes += yield from self._apply_steps(event, following)
            if checked.held is not None:
                logger.warning(
                    "election=%s: waits at block %d, %d blocks behind the head %d: the logs answered for block %d "
                    "do not check out (%s)",
                    self._seat.name,
                    self.head,
                    number - self.head,
                    number,
                    checked.held,
                    checked.why,
                )
                # No expiry judged past what was read (a held block may renew the term); one poll before
                # the expiry is looked at again, so a due expiry does not make the polls back to back.
                self.wake_at = max(self.wake_at, self._timer.now() + self._pace.poll)
                return changes
            if self.current is not None and timestamp >= self.current.expires_at:
                changes += self._end(self.current, End.EXPIRED, number)  # a block stamped at or after the expiry
            elif self.current is not None and timestamp >= self.current.expires_at - 1:
                # a second before: the pending block may be past
                return changes + (yield from self._judge_expiry_steps(force=True))
        return changes + (yield from self._judge_expiry_steps())

    def _extends_steps(self, block: Any) -> Steps[bool]:
        """Whether ``block`` (above the head) descends from the head this observer saw last."""
        number = int(block["number"])
        if number == self.head + 1:
            return bytes(block["parentHash"]) == self.head_hash
        seen = yield RPC.block(self.head)
        return seen is not None and bytes(seen["hash"]) == self.head_hash

    def _apply_steps(self, event: _events.RegistryLog, following: _events.RegistryLog | None) -> Steps[list[Change]]:
        """One event of the resource (``following``: the next one, to tell a grant from a revoke)."""
        current = self.current
        kind = event.kind
        # A lease's events carry these (RegistryLog leaves them None only for namespace events).
        token, holder, expires_at = cast(int, event.token), cast(str, event.holder), cast(int, event.expires_at)
        if kind is _events.Kind.ACQUIRED:
            if token <= self.last_token:
                return []  # already in the state read
            self.last_token = token
            changes: list[Change] = []
            if current is not None:
                reason = AcquireReason(cast(int, event.reason))
                at = yield from self._times.at_steps(event.block_number)
                if at >= current.expires_at:
                    changes += self._end(current, End.EXPIRED, event.block_number)  # the term ran out first
                else:  # a term taken live: by its holder again (superseded) or by a grant (granted)
                    changes += self._end(
                        current, cast(End, endings.of_event("acquired", reason=reason)), event.block_number
                    )
            since = yield from self._times.at_steps(event.block_number)
            self._seat.elected[token, holder] = (event.block_number, since)
            leader = Leader(self._seat.name, holder, token, since, expires_at, event.block_number)
            changes += self._set(leader)
            self.wake_at = self._timer.now() + max(float(expires_at - since), self._pace.poll)
            return changes
        if current is None or (token, holder) != (current.token, current.holder):
            return []  # another token's event (older, or a term already reported as ended)
        if kind is _events.Kind.RENEWED:  # not a change: the same term, longer
            self.current = dataclasses.replace(current, expires_at=expires_at)
            renewed_at = yield from self._times.at_steps(event.block_number)
            self.wake_at = self._timer.now() + max(float(expires_at - renewed_at), self._pace.poll)
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
