"""Keeping a lease alive, and failing closed when it cannot be kept.

A background renewer is not enough: the work it protects must stop *before*
the lease can have ended on-chain, even when renewals stop getting through
(a stalled node, a lost connection) or the renewer itself runs late (CPU
starvation). Without that, a keep-alive only hides the failure::

    t=0    agent A acquires (ttl 30), starts its work and a renewer
    t=15   the renewer sends a renewal; the node stalls, no reply
    t=30   A's lease expires on-chain; agent B acquires and starts writing
    t=31   A, unaware (its renewer is still waiting for a reply), writes too

With :meth:`Lease.keep <chainfence.Lease.keep>` A keeps a *local safe
deadline* on its lease clock (:data:`lease_clock`: CLOCK_BOOTTIME, which
keeps counting while the machine is suspended, so a laptop that slept
through the expiry does not trust the lease on resume) and gives the lease
up when it passes::

    t=0    A sends its acquisition; safe deadline 0 + 30 - 1 - 2 = 27
    t=15   the renewer sends a renewal; the node stalls
    t=27   no renewal confirmed: on_lost runs, lease.check() raises LeaseLost
    t=30   the lease expires on-chain: A's work had stopped 3 s before

The deadline is ``sent + ttl - latency_margin - block_time_margin`` where
``sent`` is the time the last *confirmed* renewal (or the acquisition) was
sent. The chain stamps that renewal's block no earlier than it received it,
so its expiry is at least ``ttl`` after the send, less what the margins
cover:

- ``block_time_margin`` (default 2 s): a block's timestamp may read earlier
  than the moment its transaction was sent (timestamps are whole seconds; a
  proposer stamps the block when it starts building it), and the local
  lease clock may run slower than chain time over one ttl;
- ``latency_margin`` (default 1 s): the time the protected work needs, after
  a ``check()`` that passed, to stop or to land its last write.

Confirmations take no margin: a renewal counts only once the registry call
returns, which (with ``confirmations=k``) is once it is ``k`` blocks deep.
They make renewals slower, which the renewal schedule must leave room for:

- ``schedule="half"`` (the default): every ``interval`` (default half the
  ttl, as tooz renews its heartbeat), whatever the chain;
- ``schedule="margin"``: as late as the chain needs, ``2 * confirm +
  retry_delay`` before the safe deadline, where ``confirm`` is the time a
  renewal takes to be confirmed: ``(confirmations + 1) * block_time`` where
  the chain's block time is known (the embedded chain: 0), else, and at
  least, the slowest of the last renewals measured (sent to confirmed, or to
  a transient failure), floored at half a second. A slow node moves the next
  renewals earlier; while nothing is measured yet, and whenever the lead
  would be longer, the half schedule's. At ttl 30 on a chain that mines at
  once: a renewal every 25 s instead of 15 (40 % less gas a kept hour), with
  the same safe deadline and the same margins.

A renewal's refusal says how the lease ended, in the words of
:mod:`chainfence.endings` (expired, released, completed, revoked, rolled
back at once; a higher token is read further: the successor's acquisition
says granted, revoked, expired, released, or superseded by the holder's own
reacquisition). A renewal the holder sends itself inside the block
(``lease.renew(ttl=...)``) moves the keep-alive to its ttl.

This module holds the decision logic as a sans-IO core, :class:`KeepAliveCore`:
it is fed clock readings and renewal outcomes and answers when to renew,
what the safe deadline is, and whether the lease is lost. Two runners drive
it, for a lease or an ``acquire_many`` set: :class:`Keeper` in a thread
(``with lease.keep():``, the context :class:`Keeping`) and
:class:`AsyncKeeper` in an asyncio task (``async with lease.keep():``,
:class:`AsyncKeeping`), which cancels the protected task on a loss. Both
renew by running the kept object's renewal steps, each over its own driver.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, cast

from ._core import log as _log
from ._core import metrics as _metrics
from ._core.effects import Steps
from .endings import End, LocalEnd, declare, loss_reason  # what a renewal's error means: the one model
from .errors import ChainfenceError, DuplicateResource, InvalidInput, LeaseError, LeaseLost, NodeUnreachable

if TYPE_CHECKING:  # the asyncio keeper imports asyncio when it is built: the CLI never loads it
    import asyncio

logger = _log.get(__name__)

__all__ = [
    "DEFAULT_BLOCK_TIME_MARGIN",
    "DEFAULT_LATENCY_MARGIN",
    "SCHEDULES",
    "AsyncKeeper",
    "AsyncKeeping",
    "KeepAliveCore",
    "Keeper",
    "Keeping",
    "Step",
    "confirm_time_of",
    "keep_core",
    "lease_clock",
    "loss_reason",
]

#: Seconds a block's timestamp may lag the send of its transaction, plus local clock drift over one ttl.
DEFAULT_BLOCK_TIME_MARGIN = 2.0
#: Seconds the protected work needs to stop (or land its last write) after a check that passed.
DEFAULT_LATENCY_MARGIN = 1.0

#: ``keep(schedule=...)``: renew every half ttl (the default, as tooz renews its heartbeat), or as late
#: as the time a renewal needs to be confirmed allows (``"margin"``, see :class:`KeepAliveCore`).
SCHEDULES = ("half", "margin")
#: The least time (seconds) the margin schedule allows one renewal's round trip, however fast the node.
ROUND_TRIP_FLOOR = 0.5
#: Renewals whose confirmation times the margin schedule remembers (it budgets for the slowest of them).
CONFIRMATIONS_REMEMBERED = 8


def _seconds(value: object, what: str, *, positive: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or value
        in (
            float("inf"),
            float("-inf"),
        )
    ):
        raise InvalidInput(f"{what} must be a finite number of seconds, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise InvalidInput(f"{what} must be {'> 0' if positive else '>= 0'} seconds, got {value!r}")
    return float(value)


def _boot_clock() -> Callable[[], float]:
    """The clock a safe deadline is counted on: one that keeps counting while the machine is suspended.

    ``time.monotonic()`` is CLOCK_MONOTONIC on Linux, which stops during a suspend: after a laptop
    sleeps through a lease's expiry it would still trust the lease. CLOCK_BOOTTIME counts the
    suspend too (Linux). Where the standard library offers no such clock this falls back to
    ``time.monotonic()``, and the promise across a suspend does not hold there (docs/guarantees.md).
    """
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        try:
            time.clock_gettime(boottime)
        except OSError:  # pragma: no cover - a kernel without it
            pass
        else:
            return lambda: time.clock_gettime(boottime)
    return time.monotonic  # pragma: no cover - not Linux


#: Seconds on a clock that counts time spent suspended (Linux CLOCK_BOOTTIME), for every safe deadline:
#: keep-alives, ``chainfence lock`` and the processes it leaves behind compare readings of it.
lease_clock: Callable[[], float] = _boot_clock()


#: Seconds a keep-alive on the lease clock waits at most before it reads the clock again. A wait
#: (``threading.Condition.wait``, asyncio's timers) counts on CLOCK_MONOTONIC, which stops while the
#: machine is suspended: after a resume the renewer must see the deadline that passed meanwhile
#: within this long, not after the rest of a wait that began before the suspend.
SUSPEND_RECHECK = 1.0


class Step(NamedTuple):
    """What the runner should do now: ``"renew"``, ``"wait"`` (until ``until``), ``"lost"`` (``why``) or ``"stop"``."""

    action: str
    until: float | None = None
    why: str | None = None


class _Flight:
    """A renewal sent and not yet answered: the keep-alive's own, or one the holder sent (``lease.renew()``):
    kept by handle, never compared."""

    __slots__ = ("due", "overlapped", "own", "sent", "ttl")

    def __init__(self, sent: float, ttl: float, own: bool, due: float | None = None):
        self.sent = sent
        self.ttl = ttl
        self.own = own
        self.due = due
        #: Another renewal was in flight at some moment of this one's: which of them the chain mined last
        #: (whose expiry stands) is unknown, so this one may only bring the deadline closer.
        self.overlapped = False


class KeepAliveCore:
    """The keep-alive's decisions, without I/O or threads; every method takes ``now`` (a clock reading).

    ``anchor`` is the time the acquisition (or the last confirmed renewal)
    was sent. The runner asks :meth:`step` what to do, reports
    :meth:`renewal_started`, then :meth:`renewal_confirmed` or
    :meth:`renewal_failed`, and :meth:`stop` once the protected work ends.
    Those return warnings to log (late renewals). A renewal the holder sends
    itself while the lease is kept (``lease.renew(ttl=...)``) is reported
    with :meth:`external_started` and :meth:`external_confirmed` /
    :meth:`external_failed`: its ttl becomes the keep-alive's (window,
    interval, the ttl of the next renewals). Not thread-safe: the runner
    serialises calls.

    Renewals that overlap (the holder's sent while the keep-alive's is in
    flight) each may be the one the chain mined last; the deadline then
    moves only to the earlier of what they allow, until a renewal with no
    other in flight confirms.

    When a renewal is due (``schedule``): ``"half"`` (the default) every
    ``interval`` (default half the ttl, or half the safe window when that is
    shorter). ``"margin"``: as late before the safe deadline as the chain
    needs, ``lead = 2 * confirm + retry_delay`` seconds before it, where
    ``confirm`` is the time a renewal takes to be confirmed: ``confirm_time``
    (what the chain says: ``(confirmations + 1) * block_time``, None if not
    known) or the slowest of the last :data:`CONFIRMATIONS_REMEMBERED`
    renewals this core saw (sent to confirmed or failed, on its clock),
    whichever is longer, and at least :data:`ROUND_TRIP_FLOOR`. Twice that
    leaves room for a renewal as slow as the slowest seen and a retry after
    it fails; a slow node moves the next renewals earlier. The lead is never
    more than the half schedule's (so never more renewals than it), and while
    nothing is known yet (no ``confirm_time``, no renewal seen) it is the half
    schedule's. The deadline is the same under both: a renewal confirmed after
    it counts for nothing, and the work stops there.
    """

    def __init__(
        self,
        ttl: float,
        anchor: float,
        *,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        retry_delay: float | None = None,
        schedule: str = "half",
        confirm_time: float | None = None,
    ):
        self.latency_margin = _seconds(latency_margin, "latency_margin")
        self.block_time_margin = _seconds(block_time_margin, "block_time_margin")
        if schedule not in SCHEDULES:
            raise InvalidInput(f"schedule must be one of {', '.join(map(repr, SCHEDULES))}, got {schedule!r}")
        if schedule == "margin" and interval is not None:
            raise InvalidInput("schedule='margin' times renewals itself: give it no interval")
        #: "half" or "margin" (see the class docstring).
        self.schedule = schedule
        #: Seconds a renewal takes to be confirmed, as the chain says (None: not known).
        self.confirm_time = None if confirm_time is None else _seconds(confirm_time, "confirm_time")
        #: Seconds the last renewal took that was confirmed only once the lease was lost (None: none was).
        self.confirmed_late: float | None = None
        #: How long the last renewals took, sent to confirmed (or failed), on this core's clock.
        self.confirmations: deque[float] = deque(maxlen=CONFIRMATIONS_REMEMBERED)
        if (
            isinstance(anchor, bool)
            or not isinstance(anchor, (int, float))
            or anchor != anchor
            or abs(anchor) == float("inf")
        ):
            raise InvalidInput(f"anchor must be a finite clock reading, got {anchor!r}")
        self._interval_given = interval
        self._retry_given = retry_delay
        self.ttl, self.window, self.interval, self.retry_delay = self._tuning(ttl)
        #: The send time the deadline counts from (the last confirmed renewal's, or the acquisition's).
        self.anchor = float(anchor)
        #: The local safe deadline: the last confirmed send + ttl - margins.
        self.deadline = self.anchor + self.window
        #: When the next renewal is due.
        self.due = self.anchor + self.interval
        self._flights: dict[int, _Flight] = {}
        self._own: int | None = None
        self._next_flight = 0
        self.lost: str | None = None
        self.stopped = False
        self.renewals = 0
        self.external_renewals = 0
        self.failures = 0

    def _tuning(self, ttl: Any) -> tuple[Any, float, float, float]:
        """(ttl, window, interval, retry delay) for ``ttl`` with this core's margins and options."""
        seconds = _seconds(ttl, "ttl", positive=True)
        if not isinstance(ttl, int):
            ttl = seconds  # an int stays one: it is what a renewal asks the registry for
        window = seconds - self.latency_margin - self.block_time_margin
        if window <= 0:
            raise InvalidInput(
                f"a ttl of {ttl:g} s leaves no safe time after the margins (latency {self.latency_margin:g} s + block "
                f"time {self.block_time_margin:g} s): use a longer ttl or smaller margins"
            )
        interval = self._interval_given
        if interval is None:
            interval = ttl / 2 if ttl / 2 < window else window / 2
            if self.schedule == "margin":
                interval = window - self._lead(window - interval)
        interval = _seconds(interval, "interval", positive=True)
        if interval >= window:
            raise InvalidInput(
                f"interval {interval:g} s must be shorter than the safe window ({window:g} s = ttl {ttl:g} - margins): "
                "the first renewal would come after the deadline"
            )
        retry_delay = self._retry_given
        if retry_delay is None:
            retry_delay = min(1.0, interval / 4)
        return ttl, window, interval, _seconds(retry_delay, "retry_delay", positive=True)

    def _lead(self, most: float) -> float:
        """Seconds before the safe deadline the margin schedule renews: twice the time a renewal needs to be
        confirmed, plus a retry delay; ``most`` (the half schedule's lead) while that is not known, and
        never more."""
        seen = max(self.confirmations, default=None)
        if seen is None and self.confirm_time is None:
            return most
        confirm = max(seen or 0.0, self.confirm_time or 0.0, ROUND_TRIP_FLOOR)
        retry = self._retry_given if self._retry_given is not None else 1.0
        return min(most, 2 * confirm + retry)

    def _observed(self, took: float) -> None:
        """A renewal of this core took ``took`` seconds to be confirmed (or to fail): the margin schedule
        budgets the next ones for it."""
        if self.schedule != "margin":
            return
        self.confirmations.append(max(0.0, took))
        self.ttl, self.window, self.interval, self.retry_delay = self._tuning(self.ttl)

    def check_ttl(self, ttl: object) -> None:
        """Raise :class:`~chainfence.errors.InvalidInput` if a renewal with ``ttl`` could not be kept (its
        window after the margins, the interval inside it): checked before such a renewal is sent."""
        self._tuning(ttl)

    @property
    def in_flight(self) -> float | None:
        """Send time of the keep-alive's own renewal in flight, if any."""
        flight = self._flights.get(self._own) if self._own is not None else None
        return flight.sent if flight is not None else None

    def safe_remaining(self, now: float) -> float:
        """Seconds left before the safe deadline (0 once lost)."""
        if self.check(now) is not None:
            return 0.0
        return max(0.0, self.deadline - now)

    def check(self, now: float) -> str | None:
        """The reason the lease is lost, or None while it may still be trusted."""
        if self.lost is None and now >= self.deadline:
            self.lost = "deadline"
        return self.lost

    def step(self, now: float) -> Step:
        if self.stopped:
            return Step("stop")
        why = self.check(now)
        if why is not None:
            return Step("lost", why=why)
        if self._own is None and now >= self.due:
            return Step("renew")
        until = self.deadline if self._own is not None else min(self.due, self.deadline)
        return Step("wait", until=until)

    # -- the keep-alive's own renewals -------------------------------------------------

    def renewal_started(self, now: float) -> list[str]:
        if self.stopped or self.lost is not None or self._own is not None:
            raise RuntimeError("no renewal may start now")  # the runner asked step() first
        self._own = self._open(_Flight(now, self.ttl, own=True, due=self.due))
        late = now - self.due
        if late > self._tolerance():
            return [
                (
                    f"renewal sent {late:.3f} s after it was due ({self.deadline - now:.3f} s before the safe "
                    "deadline): the renewer woke late (CPU starvation?)"
                )
            ]
        return []

    def renewal_confirmed(self, now: float) -> list[str]:
        """The keep-alive's renewal started last is confirmed (its registry call returned)."""
        own, self._own = self._own, None
        return self._confirm(own, now)

    def renewal_failed(self, now: float, why: str | None) -> None:
        """The keep-alive's renewal started last failed: ``why`` a loss reason, or None for a transient failure."""
        own, self._own = self._own, None
        flight = self._flights.pop(own, None) if own is not None else None
        if self.stopped or self.check(now) is not None:
            return
        if flight is not None and why is None:
            self._observed(now - flight.sent)
        self.failures += 1
        if why is not None:
            self.lost = why
        else:
            self.due = now + self.retry_delay  # retried until the deadline passes
        _metrics.renewal("failed" if why is None else "refused")

    @property
    def renewal_ttl(self) -> float:
        """The ttl of the keep-alive's renewal in flight (the core's ttl when it started)."""
        flight = self._flights.get(self._own) if self._own is not None else None
        return flight.ttl if flight is not None else self.ttl

    # -- renewals the holder sends itself while the lease is kept -------------------------

    def external_started(self, sent: float, ttl: float) -> int:
        """The holder sends a renewal for ``ttl`` (checked with :meth:`check_ttl`); returns its handle."""
        return self._open(_Flight(sent, ttl, own=False))

    def external_confirmed(self, handle: int, now: float) -> list[str]:
        """The holder's renewal ``handle`` is confirmed: its ttl is the keep-alive's from now on."""
        return self._confirm(handle, now)

    def external_failed(self, handle: int, now: float, why: str | None) -> None:
        """The holder's renewal ``handle`` failed: a loss reason loses the lease; a transient error changes nothing."""
        self._flights.pop(handle, None)
        if why is not None and not self.stopped and self.check(now) is None:
            self.lost = why

    # ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """The protected work ended: never renew again."""
        self.stopped = True

    def _open(self, flight: _Flight) -> int:
        if self._flights:
            flight.overlapped = True
            for other in self._flights.values():
                other.overlapped = True
        handle = self._next_flight
        self._next_flight += 1
        self._flights[handle] = flight
        return handle

    def _confirm(self, handle: int | None, now: float) -> list[str]:
        flight = self._flights.pop(handle, None) if handle is not None else None
        if flight is None or self.stopped or self.check(now) is not None:
            if flight is not None and flight.own and not self.stopped:
                self.confirmed_late = now - flight.sent
            return []  # too late to count: the work was stopped already
        old_deadline = self.deadline
        if not flight.own and flight.ttl != self.ttl:
            self.ttl, self.window, self.interval, self.retry_delay = self._tuning(flight.ttl)
        if flight.own:
            self._observed(now - flight.sent)
        reached = flight.sent + flight.ttl - self.latency_margin - self.block_time_margin
        self.deadline = min(self.deadline, reached) if flight.overlapped else reached
        self.anchor = self.deadline - self.window
        self.due = self.anchor + self.interval
        if not flight.own:
            self.external_renewals += 1
            return []
        self.renewals += 1
        _metrics.renewal("confirmed", old_deadline - now)
        due = flight.due
        if due is not None and now - due > (old_deadline - due) / 2:
            return [
                (
                    f"renewal confirmed {now - due:.3f} s after it was due, {old_deadline - now:.3f} s before the "
                    f"safe deadline (it took {now - flight.sent:.3f} s): more than half the safety window"
                )
            ]
        return []

    def _tolerance(self) -> float:
        if self.schedule == "margin":
            return min(self.interval, self.window - self.interval) / 10
        return self.interval / 10


def wait_cap(clock: Callable[[], float]) -> float:
    """The longest a runner waits before reading ``clock`` again: a second on a system clock (a wait
    does not count a suspend; see :data:`SUSPEND_RECHECK`), 20 ms on an injected one (a test may
    move it without the wait noticing)."""
    return SUSPEND_RECHECK if clock is lease_clock or clock is time.monotonic else 0.02


class _Group:
    """The keep-alives (``schedule="margin"``) of one holder's leases on one registry, on one clock, that
    renew together: when one is due, every member past half its interval renews with it, in one
    ``renewMany`` transactions from the holder (64 leases each), and from then on they are due together.
    etcd keeps many keys alive with one lease's heartbeat; here each lease keeps its own deadline, its own
    renewal events and its own end: a ``renewMany`` the registry refuses (a member ended: revoked,
    expired, superseded ...) is never retried as a whole, each member then renews alone and learns its
    own end (a revoke stays one resource's).
    """

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _groups: ClassVar[dict[tuple[int, int, str], _Group]] = {}

    def __init__(self, key: tuple[int, int, str]):
        self.key = key
        self.mutex = threading.Lock()
        self.members: list[Keeper] = []

    @classmethod
    def join(cls, keeper: Keeper) -> _Group | None:
        """The group ``keeper`` renews with (None: what it keeps cannot be renewed with others)."""
        registry = getattr(keeper.lease, "registry", None)
        holder = getattr(keeper.lease, "holder", None)
        if registry is None or holder is None or not hasattr(registry, "_transact_steps"):
            return None
        key = (id(registry.chain), id(keeper.clock), f"{registry.address}/{holder}")
        with cls._lock:
            group = cls._groups.get(key)
            if group is None:
                group = cls._groups[key] = _Group(key)
            with group.mutex:
                group.members.append(keeper)
        return group

    def leave(self, keeper: Keeper) -> None:
        with _Group._lock, self.mutex:
            if keeper in self.members:
                self.members.remove(keeper)
            if not self.members:
                _Group._groups.pop(self.key, None)

    def renew(self, leader: Keeper, now: float) -> None:
        """``leader`` is due at ``now``: start its renewal and those of the members that may ride along."""
        riders: list[Keeper] = []
        with self.mutex:  # one leader at a time: members due together go in one transaction
            with leader._cond:
                # Decided on before the mutex: another leader may have renewed this lease meanwhile (it rode
                # along, a thread preempted in between): then it is not due any more, and nothing is.
                if leader.core.step(now).action != "renew":
                    return
            for member in self.members:
                with member._cond:
                    core = member.core
                    if core.stopped or core._own is not None or core.ttl != leader.core.ttl:
                        continue
                    # Due now, or past half its interval: renewing it now costs little and aligns it.
                    if member is not leader and now < core.due - core.interval / 2:
                        continue
                    if core.step(now).action not in ("renew", "wait"):
                        continue  # lost, or stopped
                    for warning in core.renewal_started(now):
                        member._warn(warning)
                    riders.append(member)
        if not riders:
            return
        if len(riders) == 1:
            with riders[0]._cond:
                riders[0]._worker = worker = threading.Thread(
                    target=riders[0]._renew, args=(riders[0].core.renewal_ttl,), daemon=True
                )
            worker.start()
            return
        ttl = leader.core.renewal_ttl
        worker = threading.Thread(
            target=self._renew_together, args=(riders, ttl), name="chainfence-renew-together", daemon=True
        )
        for rider in riders:
            with rider._cond:
                rider._worker = worker
        worker.start()

    @staticmethod
    def _renew_together(riders: list[Keeper], ttl: Any) -> None:
        """One ``renewMany`` for ``riders`` (in chunks of 64); a refused one: each rider renews alone."""
        for start in range(0, len(riders), MAX_TOGETHER):
            chunk = riders[start : start + MAX_TOGETHER]
            registry = chunk[0].lease.registry
            sent = lease_clock()
            try:
                expiries = registry._drive(_renew_many_steps(registry, [rider.lease for rider in chunk], ttl))
            except (LeaseError, DuplicateResource):
                # A member ended (or the registry refused for its sake), or two members keep one resource:
                # never guess whose; each renews alone, through its own path (group commit's batcher where
                # it has one), and learns its end.
                _Group._renew_alone(chunk, ttl)
                continue
            except BaseException as error:
                for rider in chunk:
                    rider._renewal_error(error)
                if not isinstance(error, Exception):
                    raise
                continue
            # Each learns its own expiry, from its own renewal event (a rider the receipt does not name renews
            # alone: the registry renews all or none, so that is a receipt no registry of this code gives).
            for rider in chunk:
                if rider.lease.resource_id in expiries:
                    rider._renewal_confirmed(expiries[rider.lease.resource_id], sent, ttl)
            _Group._renew_alone([rider for rider in chunk if rider.lease.resource_id not in expiries], ttl)

    @staticmethod
    def _renew_alone(riders: list[Keeper], ttl: Any) -> None:
        alone = [threading.Thread(target=rider._renew, args=(ttl,), daemon=True) for rider in riders]
        for thread in alone:
            thread.start()
        for thread in alone:
            thread.join()


#: Most leases one renewal of a group renews: the registry's most, 64. Its ``renewMany`` takes the set in
#: increasing order of ids (one comparison an item), so a renewal costs the same in any set and the
#: transaction's 21,000 is shared the more the larger the set: measured with scripts/gas_report.py, a
#: renewal costs 9,892 gas in a renewMany of 16 and 8,826 in one of 64 (each one more: 8,470). (When the
#: registry checked every pair for repeats, 11,835 and 15,787: groups were then cut at 16.)
MAX_TOGETHER = 64


def _renew_many_steps(registry: Any, leases: list[Any], ttl: Any) -> Steps[dict[bytes, int]]:
    """``renewMany`` of ``leases`` (one holder's, sent by ``registry`` as that holder, in the order of
    their ids the registry takes) to now + ``ttl``: all or nothing; each resource's new expiry, by id,
    read from its own renewal event. A refusal is the registry's typed error (a ``LeaseError``)."""
    from ._node import events as _events
    from ._sdk import validate as _validate

    ttl = _validate.ttl(ttl, (yield from registry._max_ttl_steps()))
    ids, tokens = _validate.set_order(leases)
    receipt = yield from registry._transact_steps("renewMany", [ids, tokens, ttl])
    expiries: dict[bytes, int] = {}
    for log in receipt["logs"]:
        event = _events.decode(log) if log["address"] == registry.address else None
        if event is not None and event.kind is _events.Kind.RENEWED and event.expires_at is not None:
            expiries[event.resource_id] = event.expires_at
    logger.info(
        "renewed together resources=%s tokens=%s expires_at=%s",
        [x.resource for x in leases],
        [x.token for x in leases],
        sorted(set(expiries.values())),
    )
    return expiries


class Keeper:
    """Runs a :class:`KeepAliveCore` for a lease (or a lease set) in a background thread (see :meth:`Lease.keep`).

    The renewer thread never blocks on the chain: each renewal runs in a
    worker thread of its own, so the deadline fires on time while a renewal
    hangs on a stalled node. ``on_lost(error)`` runs once, in the renewer
    thread, when the lease is lost; it should return promptly.

    What is kept (``lease``: a :class:`~chainfence.Lease` or a
    :class:`~chainfence.LeaseSet`) answers the keep-alive's few questions
    through its ``_kept_*`` methods: how to renew (steps this thread runs over the
    kept object's blocking driver, ``_drive``), how it ended (reading the
    successor's acquisition for a higher token), what a loss is called.
    :class:`AsyncKeeper` runs the same bookkeeping in an asyncio task.
    """

    def __init__(
        self,
        lease: Any,
        core: KeepAliveCore,
        *,
        ttl: int | None = None,
        clock: Callable[[], float],
        on_lost: Callable[[LeaseLost], Any] | None = None,
    ):
        del ttl  # the core's: a renewal with a new ttl moves it
        self.lease = lease
        self.core = core
        self.clock = clock
        self.on_lost = on_lost
        #: Called with the new safe deadline (on ``clock``) each time a confirmed renewal (the keep-alive's or
        #: the holder's) moves it, in the thread that confirmed it; it should return promptly
        #: (``chainfence lock`` tells its sentinel).
        self.on_deadline: Callable[[float], Any] | None = None
        self.error: LeaseLost | None = None
        self._cause: BaseException | None = None
        #: The member of a lease set whose end lost the set (None: the lease itself, or the whole set).
        self._member: Any = None
        #: "released" / "completed": the holder ended the lease itself inside the block (not a loss).
        self.closed: str | None = None
        self._cond = threading.Condition()
        self._worker: threading.Thread | None = None
        self._wait_cap = wait_cap(clock)
        self._thread = threading.Thread(target=self._run, name=f"chainfence-keep-{lease._kept_name}", daemon=True)
        #: The clock reading of the renewer thread's latest decision (tests wait on it).
        self.evaluated_at: float | None = None
        self._end_counted = False
        #: The keep-alives of the same holder's leases this one renews with (schedule="margin"), else None.
        self._group: _Group | None = None

    @property
    def ttl(self) -> float:
        """The ttl the next renewal asks for (the last renewal's: a renewal with a new ttl moves it)."""
        return float(self.core.ttl)

    def start(self) -> None:
        logger.info(
            "keep-alive started resource=%s token=%s deadline_in=%.3f interval=%.3f",
            self.lease._kept_name,
            self.lease._kept_token,
            self.core.deadline - self.clock(),
            self.core.interval,
        )
        if self.core.schedule == "margin" and type(self) is Keeper:
            self._group = _Group.join(self)
        self._thread.start()

    def wake(self) -> None:
        """Re-evaluate now (a test that moved an injected clock may call it)."""
        with self._cond:
            self._cond.notify_all()

    def check(self) -> None:
        with self._cond:
            closed = self.closed
            why = self.core.check(self.clock()) if closed is None else None
            if why is not None and self.error is None:
                self._cond.notify_all()  # the renewer thread reports it and runs on_lost
        if closed is not None:
            raise self.lease._kept_loss(closed, f"{closed} by this process", None, None)
        if why is not None:
            raise self._lost_error(why)

    def safe_remaining(self) -> float:
        with self._cond:
            if self.closed is not None:
                return 0.0
            return self.core.safe_remaining(self.clock())

    def stop(self) -> LeaseLost | None:
        """Stop renewing for good; return the loss, if the lease was lost.

        A renewal in flight is waited for, up to the safe deadline (its node
        may be stalled; past the deadline its outcome no longer matters), so a
        release sent afterwards comes after it; no renewal starts after this.
        """
        why = self._stop_core()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        worker = self._worker
        if why is None and worker is not None and worker is not threading.current_thread():
            while worker.is_alive():
                with self._cond:
                    if self.core.deadline <= self.clock():
                        break
                worker.join(0.02)
        logger.info(
            "keep-alive stopped resource=%s token=%s lost=%s", self.lease._kept_name, self.lease._kept_token, why
        )
        return self._lost_error(why) if why is not None else None

    def _stop_core(self) -> str | None:
        if self._group is not None:
            self._group.leave(self)
        with self._cond:
            why = self.core.check(self.clock()) if self.closed is None else None
            self.core.stop()
            self._cond.notify_all()
            if why is not None:
                self.lease._kept_lost(self._lost_error(why), self._member)
                self._count_end(why)
        return why

    def _count_end(self, why: str) -> None:
        """The metrics' count of a loss (once per keep-alive, whichever of the runner and the stop saw it)."""
        with self._cond:  # the renewer's report and the stop may see the loss at once
            if self._end_counted:
                return
            self._end_counted = True
        _metrics.lease_ended(why, getattr(self.lease, "_kept_count", 1))

    # -- what the holder does inside the block --------------------------------------------

    def holder_renewing(self, ttl: float) -> tuple[int, float]:
        """The holder is about to send a renewal for ``ttl``: returns (handle, send time on the lease clock).

        Raises :class:`~chainfence.errors.InvalidInput` (nothing sent) if that ttl could not be kept.
        """
        with self._cond:
            self.core.check_ttl(ttl)
            return self.core.external_started(self.clock(), ttl), lease_clock()

    def holder_renewed(self, handle: int) -> None:
        with self._cond:
            before = self.core.deadline
            for warning in self.core.external_confirmed(handle, self.clock()):
                self._warn(warning)
            deadline = self.core.deadline
            self._cond.notify_all()
        if deadline != before and self.on_deadline is not None:
            self.on_deadline(deadline)

    def holder_renewal_failed(self, handle: int, error: BaseException) -> None:
        """The holder's renewal failed: an end of the lease loses it (the renewer reports it); anything else
        changes nothing here (the holder has the error)."""
        why = loss_reason(error) if isinstance(error, Exception) else None
        if why == "error":
            why = None  # the holder's own call failed: its error is raised to it, the lease may be fine
        with self._cond:
            if why is not None and self.core.lost is None:
                self._cause = error
                self._member = self.lease._kept_member_of(error)
            self.core.external_failed(handle, self.clock(), why)
            self._cond.notify_all()

    def holder_closing(self) -> None:
        """The holder releases (or completes) the lease: no renewal starts from now on."""
        with self._cond:
            self.core.stop()
            self._cond.notify_all()

    def holder_closed(self, end: str, error: BaseException | None = None) -> None:
        """The holder's release or completion succeeded (``error`` None: the keep-alive ends quietly), or
        failed with ``error`` (an end of the lease is recorded as its loss)."""
        with self._cond:
            if error is None:
                self.closed = end
                return
            why = loss_reason(error) if isinstance(error, Exception) else None
            if why is not None and why != "error" and self.core.lost is None:
                self._cause = error
                self._member = self.lease._kept_member_of(error)
                self.core.lost = why

    # -- the renewer thread ---------------------------------------------------

    def _run(self) -> None:
        while True:
            together = False
            with self._cond:
                now = self.clock()
                step = self.core.step(now)
                if step.action == "wait":
                    self.evaluated_at = now
                    timeout = min(cast(float, step.until) - now, self._wait_cap)
                    self._cond.wait(timeout)
                    continue
                if step.action == "renew" and self._group is not None:
                    together = True  # the group takes every member's lock itself: never with ours held
                elif step.action == "renew":
                    self.evaluated_at = now
                    self._start_renewal(now)
                    continue
                else:
                    self.evaluated_at = now
            if together:
                assert self._group is not None
                self._group.renew(self, now)
                with self._cond:
                    self.evaluated_at = now
                continue
            if step.action == "lost":
                self._report_lost(cast(str, step.why))
            return  # lost or stopped: this thread never renews again

    def _start_renewal(self, now: float) -> None:
        """Start this keep-alive's own renewal at ``now`` in a worker thread (the lock held)."""
        for warning in self.core.renewal_started(now):
            self._warn(warning)
        self._worker = threading.Thread(
            target=self._renew,
            args=(self.core.renewal_ttl,),
            name=f"chainfence-renew-{self.lease._kept_name}",
            daemon=True,
        )
        self._worker.start()

    def _renew(self, ttl: float) -> None:
        sent = lease_clock()
        try:
            expires_at = self.lease._drive(self.lease._kept_renew_steps(ttl))
        except BaseException as error:
            self._renewal_error(error)
            if not isinstance(error, Exception):
                raise
            return
        self._renewal_confirmed(expires_at, sent, ttl)

    def _renewal_error(self, error: BaseException) -> None:
        """This keep-alive's renewal failed with ``error``: a loss named by how the lease ended, or transient."""
        why, member = loss_reason(error), None
        if why is not None and isinstance(error, Exception):
            member = self.lease._kept_member_of(error)
            if why == "superseded":
                why = self._successor_end(member)  # a higher token: its acquisition says how this one ended
        self._renewal_failed(error, why, member)

    def _successor_end(self, member: Any) -> str:
        """How the lease (or the set's ``member``) ended when a renewal met a higher token: read from the
        successor's acquisition (granted, revoked, expired, released, or superseded by the holder's own
        reacquisition); ``superseded`` when it cannot be read."""
        subject = member if member is not None else self.lease
        successor_steps = getattr(subject, "_kept_successor_steps", None)
        if successor_steps is None:
            return "superseded"
        try:
            return str(subject._drive(successor_steps()).value)
        except ChainfenceError as unread:  # pragma: no cover - the steps fall back themselves
            logger.info("could not read how token %s ended: %s", subject.token, unread)
            return "superseded"

    # What a renewal's outcome does, whichever runner (this thread, or chainfence.aio's task) got it.

    def _renewal_failed(self, error: BaseException, why: str | None = None, member: Any = None) -> None:
        with self._cond:
            if self.core.lost is None:
                self._cause = error
                self._member = member
            self.core.renewal_failed(self.clock(), why)
            self._cond.notify_all()
        if why is None:
            logger.info(
                "renewal failed, retrying until the deadline resource=%s token=%s: %s: %s",
                self.lease._kept_name,
                self.lease._kept_token,
                type(error).__name__,
                error,
            )

    def _renewal_confirmed(self, expires_at: int, sent: float, ttl: float) -> None:
        with self._cond:
            warnings = self.core.renewal_confirmed(self.clock())
            counted = not self.core.stopped and self.core.lost is None
            if counted:
                self.lease._kept_renewed(expires_at, sent, ttl)
            deadline = self.core.deadline
            self._cond.notify_all()
        if counted and self.on_deadline is not None:
            self.on_deadline(deadline)
        for warning in warnings:
            self._warn(warning)

    def _warn(self, message: str) -> None:
        logger.warning("late renewal resource=%s token=%s: %s", self.lease._kept_name, self.lease._kept_token, message)

    def _lost_error(self, why: str) -> LeaseLost:
        if self.error is None or self.error.why != why:
            cause = self._cause
            if why == "deadline":
                detail = f"no renewal confirmed before the local safe deadline: {unanswered(cause, self.core)}"
            else:
                detail = f"{type(cause).__name__}: {cause}" if cause is not None else ""
            self.error = self.lease._kept_loss(why, detail, cause, self._member)
        error: LeaseLost = self.lease._kept_loss(why, self.error.detail, self.error.__cause__, self._member)
        return error

    def _report_lost(self, why: str) -> None:
        error = self._lost_error(why)
        self.lease._kept_lost(error, self._member)
        self._count_end(why)
        logger.warning("lost resource=%s token=%s why=%s: stopping the work", error.resource, error.token, why)
        if self.on_lost is not None:
            try:
                self.on_lost(error)
            except Exception:
                logger.exception("on_lost callback failed resource=%s token=%s", error.resource, error.token)


def unanswered(
    cause: BaseException | None, core: Any = None, node: str = "the node", keeper: str = "the keep-alive"
) -> str:
    """Why no renewal was confirmed by the deadline, naming ``node``: unreachable (the last renewal's
    ``cause``), no answer to the renewal still in flight, another failure, or no renewal sent at all
    (``keeper`` itself frozen or starved). Without the keep-alive's ``core``, what the node confirmed."""
    if isinstance(cause, NodeUnreachable):
        return f"{node} is unreachable: {cause}"
    if core is not None and core.confirmed_late is not None:
        return f"{node} confirmed the renewal only after the deadline, {core.confirmed_late:.0f} s after it was sent"
    if core is not None and core.in_flight is not None:
        return f"{node} did not answer the renewal sent {core.deadline - core.in_flight:.0f} s before the deadline"
    if cause is not None:
        return f"the last renewal {node} was sent failed: {type(cause).__name__}: {cause}"
    if core is not None:
        return f"no renewal was sent: {keeper} itself was frozen or starved past its deadline"
    return f"{node} confirmed no renewal before it"


# ----------------------------------------------------------------------
# The runner for asyncio, and the context managers ``keep()`` returns
# ----------------------------------------------------------------------


class AsyncKeeper(Keeper):
    """The keep-alive runner for asyncio: the thread :class:`Keeper`'s bookkeeping, a task instead of threads.

    Each renewal runs the kept object's renewal steps over ``drive`` (the asyncio face's driver) in a
    task of its own, so the deadline fires on time while a renewal hangs on a stalled node. With
    ``protect`` the task that entered ``async with ...keep():`` is cancelled on a loss (as
    ``asyncio.timeout`` cancels it); without (a :class:`~chainfence.aio.AsyncLeadership`'s term) the loss
    is reported only (``on_lost``, ``check()``).
    """

    def __init__(
        self,
        lease: Any,
        core: KeepAliveCore,
        *,
        drive: Callable[[Steps[Any]], Awaitable[Any]],
        clock: Callable[[], float],
        on_lost: Callable[[LeaseLost], Any] | None,
        protect: bool = True,
    ):
        import asyncio

        super().__init__(lease, core, clock=clock, on_lost=on_lost)
        self._drive = drive
        self._protect = protect
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._renewal: asyncio.Task[None] | None = None
        self._protected: asyncio.Task[Any] | None = None
        self._in_body = False
        self.cancelled_protected = False

    async def _renew_call(self, ttl: Any) -> Any:
        """One renewal: the kept object's renewal steps over the asyncio driver (tests replace it)."""
        return await self._drive(self.lease._kept_renew_steps(ttl))

    def start(self) -> None:
        import asyncio

        self._protected = asyncio.current_task() if self._protect else None
        self._in_body = True
        logger.info(
            "keep-alive started resource=%s token=%s deadline_in=%.3f interval=%.3f (asyncio)",
            self.lease._kept_name,
            self.lease._kept_token,
            self.core.deadline - self.clock(),
            self.core.interval,
        )
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name=f"chainfence-keep-{self.lease._kept_name}"
        )

    def wake(self) -> None:
        self._changed.set()

    async def _loop(self) -> None:
        import asyncio

        while True:
            now = self.clock()
            step = self.core.step(now)
            self.evaluated_at = now
            if step.action == "wait":
                assert step.until is not None
                # The loop's timers count on CLOCK_MONOTONIC (no suspend): re-read the clock at least this often.
                timeout = min(step.until - now, self._wait_cap)
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), max(0.0, timeout))
                except TimeoutError:
                    pass
                continue
            if step.action == "renew":
                for warning in self.core.renewal_started(now):
                    self._warn(warning)
                self._renewal = asyncio.get_running_loop().create_task(self._renew_async(self.core.renewal_ttl))
                continue
            if step.action == "lost":
                assert step.why is not None
                self._report_lost(step.why)
            return

    async def _renew_async(self, ttl: Any) -> None:
        sent = lease_clock()
        try:
            expires_at = await self._renew_call(ttl)
        except BaseException as error:
            why, member = loss_reason(error), None
            if why is not None and isinstance(error, Exception):
                member = self.lease._kept_member_of(error)
                if why == End.SUPERSEDED.value:
                    why = await self._successor_end_async(member)
            self._renewal_failed(error, why, member)
            self._changed.set()
            if not isinstance(error, Exception):
                raise
            return
        self._renewal_confirmed(expires_at, sent, ttl)
        self._changed.set()

    async def _successor_end_async(self, member: Any) -> str:
        """:meth:`Keeper._successor_end`, awaited: the same steps over the asyncio driver."""
        subject = member if member is not None else self.lease
        successor_steps = getattr(subject, "_kept_successor_steps", None)
        if successor_steps is None:
            return End.SUPERSEDED.value
        try:
            return str((await self._drive(successor_steps())).value)
        except ChainfenceError:  # pragma: no cover - the steps fall back themselves
            return End.SUPERSEDED.value

    def _report_lost(self, why: str) -> None:
        super()._report_lost(why)
        protected = self._protected
        if self._in_body and protected is not None and not protected.done():
            logger.warning(
                "lost resource=%s token=%s: cancelling task %s",
                self.lease._kept_name,
                self.lease._kept_token,
                protected.get_name(),
            )
            self.cancelled_protected = True
            protected.cancel(f"chainfence: lease {self.lease._kept_name!r} token {self.lease._kept_token} lost ({why})")

    def holder_renewal_failed(self, handle: int, error: BaseException) -> None:
        super().holder_renewal_failed(handle, error)
        self._changed.set()

    def holder_renewed(self, handle: int) -> None:
        super().holder_renewed(handle)
        self._changed.set()

    def holder_closing(self) -> None:
        super().holder_closing()
        self._changed.set()

    async def astop(self) -> LeaseLost | None:
        """:meth:`Keeper.stop`, awaited: a renewal in flight is waited for up to the safe deadline."""
        import asyncio

        self._in_body = False
        why = self._stop_core()
        self._changed.set()
        if self._task is not None:
            await self._task
        renewal = self._renewal
        if renewal is not None and not renewal.done() and why is None:
            while not renewal.done() and self.core.deadline > self.clock():
                await asyncio.wait({renewal}, timeout=min(self._wait_cap, max(0.0, self.core.deadline - self.clock())))
        if renewal is not None and not renewal.done():
            renewal.cancel()  # past the deadline its outcome no longer matters; its nonce is forgotten
            await asyncio.gather(renewal, return_exceptions=True)
        logger.info(
            "keep-alive stopped resource=%s token=%s lost=%s", self.lease._kept_name, self.lease._kept_token, why
        )
        return self._lost_error(why) if why is not None else None


def keep_core(
    what: str,
    ttl: Any,
    sent_at: float | None,
    *,
    on_lost: Any,
    interval: float | None,
    latency_margin: float,
    block_time_margin: float,
    clock: Any,
    since: float | None,
    schedule: str = "half",
    confirm_time: float | None = None,
) -> KeepAliveCore:
    """A keep-alive's core for a lease or a set sent at ``sent_at`` (lease clock), its arguments checked;
    ``confirm_time`` is what the chain says a renewal takes to be confirmed (:func:`confirm_time_of`)."""
    if on_lost is not None and not callable(on_lost):
        raise InvalidInput(f"on_lost must be callable, got {on_lost!r}")
    if not callable(clock):
        raise InvalidInput(f"clock must be callable, got {clock!r}")
    if since is None:
        if sent_at is None:
            raise InvalidInput(
                f"this process did not send the acquisition of {what}: its send time, where the safe deadline "
                "counts from, is unknown; renew() it first or pass since="
            )
        since = sent_at if clock is lease_clock else clock() - (lease_clock() - sent_at)
    return KeepAliveCore(
        ttl,
        since,
        interval=interval,
        latency_margin=latency_margin,
        block_time_margin=block_time_margin,
        schedule=schedule,
        confirm_time=confirm_time,
    )


def confirm_time_of(chain: Any) -> float | None:
    """Seconds a transaction on ``chain`` takes to be confirmed, as far as the chain says without a request:
    ``(confirmations + 1) * block_time`` where the block time is known (the embedded chain mines each
    transaction as it arrives: 0), else None (the margin schedule then learns it from the renewals)."""
    rpc = getattr(chain, "rpc", None)
    if rpc is not None and getattr(rpc, "embedded", False):
        return 0.0
    return None


class Keeping:
    """What ``keep()`` returns: ``with`` starts the renewer thread on entry and stops it on exit, and gives
    back ``face`` (the lease or the set kept); ``async with`` does the same with an :class:`AsyncKeeper`
    (see :class:`AsyncKeeping`)."""

    def __init__(self, lease: Any, keeper: Keeper, face: Any = None):
        self._lease = lease
        self._keeper = keeper
        self._face = lease if face is None else face
        self._entered = False

    @property
    def keeper(self) -> Keeper:
        """The keep-alive this block runs, before it starts too (``chainfence lock`` hands its sentinel
        the safe deadline and sets :attr:`Keeper.on_deadline` before entering)."""
        return self._keeper

    def __enter__(self) -> Any:
        self._enter()
        self._keeper.start()
        return self._face

    def _enter(self) -> None:
        """Checks on entry (shared by both runners): not kept twice, not lost already."""
        lease = self._lease
        if self._entered or lease._keeper is not None:
            raise InvalidInput(f"{lease._kept_name!r} (token {lease._kept_token}) is already being kept alive")
        self._entered = True
        if lease._lost is not None or lease.released or getattr(lease, "completed", False):
            lease.check()  # raises
        keeper = self._keeper
        why = keeper.core.check(keeper.clock())
        if why is not None:
            raise keeper._lost_error(why)
        lease._attach(keeper)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        lease = self._lease
        try:
            lost = self._keeper.stop()
        finally:
            lease._attach(None)
        raise_lost(lost, exc)


class AsyncKeeping(Keeping):
    """What an asyncio face's ``keep()`` returns: the same checks, an :class:`AsyncKeeper` in a task."""

    _keeper: AsyncKeeper

    def __enter__(self) -> Any:
        raise TypeError("use 'async with lease.keep():' for an asyncio lease")

    async def __aenter__(self) -> Any:
        self._enter()
        self._keeper.start()
        return self._face

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        import asyncio

        keeper = self._keeper
        cancelled_by_us = keeper.cancelled_protected and isinstance(exc, asyncio.CancelledError)
        if keeper.cancelled_protected and keeper._protected is not None:
            keeper._protected.uncancel()  # our cancellation, turned into LeaseLost below (as asyncio.timeout does)
        try:
            lost = await keeper.astop()
        finally:
            self._lease._attach(None)
        raise_lost(lost, None if cancelled_by_us else exc)


def raise_lost(lost: LeaseLost | None, exc: BaseException | None) -> None:
    """Leaving a keep-alive: raise the loss, unless the body's own exception already says it."""
    if lost is None or isinstance(exc, LeaseLost):
        return
    if exc is None or isinstance(exc, Exception):
        raise lost  # the body's own exception (likely a consequence) is its __context__
    exc.add_note(f"chainfence: {lost}")  # KeyboardInterrupt, SystemExit: never masked


# The keep-alives and what they do about every way a lease ends (chainfence.endings).

declare(
    "keep",
    __name__,
    {
        End.EXPIRED: "the renewal that finds it (LeaseExpired, or a successor acquired after the expiry) loses it: "
        "on_lost once, check() and leaving keep() raise LeaseLost(why='expired')",
        End.RELEASED: "released elsewhere: lost (why='released'); released by this process inside the block: "
        "the keep-alive ends quietly and check() raises LeaseLost(why='released')",
        End.COMPLETED: "a claimed item completed elsewhere: lost (why='completed'); completed by this process: "
        "the keep-alive ends quietly and check() raises LeaseLost(why='completed')",
        End.SUPERSEDED: "a higher token whose acquisition says reacquired (or cannot be read): lost (why='superseded')",
        End.REVOKED: "LeaseRevoked, or a successor acquired after the revoke: lost at once (why='revoked'), "
        "never retried",
        End.GRANTED: "a successor whose acquisition says granted: lost (why='granted')",
        End.ROLLED_BACK: "the registry no longer knows the token (or the SDK saw the chain lose history): "
        "lost (why='rolled_back')",
        LocalEnd.DEADLINE: "no renewal confirmed by the safe deadline on the lease clock (it counts a suspend): "
        "lost (why='deadline') while the lease may still be live on-chain",
        LocalEnd.ERROR: "the renewer failed with an error that is not the chain's: lost (why='error'), its cause kept",
    },
    holds=True,
    keeps_alive=True,
)

declare(
    "aio.keep",
    __name__,
    {
        End.EXPIRED: "the renewal that finds it loses it: on_lost once, the task in the block is cancelled, "
        "leaving the block raises LeaseLost(why='expired') instead of CancelledError; check() raises it",
        End.RELEASED: "released elsewhere: lost (why='released'); released by the task itself inside the block: "
        "the keep-alive ends quietly and check() raises LeaseLost(why='released')",
        End.COMPLETED: "a claimed item completed elsewhere: lost (why='completed'); completed by the task itself: "
        "ends quietly",
        End.SUPERSEDED: "a higher token whose acquisition says reacquired (or cannot be read): lost (why='superseded')",
        End.REVOKED: "LeaseRevoked, or a successor acquired after the revoke: lost at once (why='revoked'), never retried",
        End.GRANTED: "a successor whose acquisition says granted: lost (why='granted')",
        End.ROLLED_BACK: "the registry no longer knows the token: lost (why='rolled_back')",
        LocalEnd.DEADLINE: "no renewal confirmed by the safe deadline on the lease clock: lost (why='deadline'), "
        "the task cancelled while the lease may still be live on-chain",
        LocalEnd.ERROR: "the renewal task failed with an error that is not the chain's: lost (why='error')",
    },
    holds=True,
    keeps_alive=True,
)
