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
deadline* on its monotonic clock and gives the lease up when it passes::

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
  monotonic clock may run slower than chain time over one ttl;
- ``latency_margin`` (default 1 s): the time the protected work needs, after
  a ``check()`` that passed, to stop or to land its last write.

Confirmations take no margin: a renewal counts only once the registry call
returns, which (with ``confirmations=k``) is once it is ``k`` blocks deep.
They make renewals slower, which the renewal ``interval`` (default half the
ttl, as tooz renews its heartbeat) must leave room for.

This module holds the decision logic as a sans-IO core, :class:`KeepAliveCore`:
it is fed monotonic times and renewal outcomes and answers when to renew,
what the safe deadline is, and whether the lease is lost. :class:`Keeper`
runs it in a thread; :mod:`chainfence.aio` runs the same core in an asyncio
task (``AsyncLease.keep()``), which cancels the protected task on a loss.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .endings import loss_reason  # what a renewal's error means: the one model of how leases end
from .errors import InvalidInput, LeaseLost

if TYPE_CHECKING:
    from .lease import Lease

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_BLOCK_TIME_MARGIN", "DEFAULT_LATENCY_MARGIN", "KeepAliveCore", "Keeper", "Step", "lease_clock", "loss_reason",
]  # fmt: skip

#: Seconds a block's timestamp may lag the send of its transaction, plus local clock drift over one ttl.
DEFAULT_BLOCK_TIME_MARGIN = 2.0
#: Seconds the protected work needs to stop (or land its last write) after a check that passed.
DEFAULT_LATENCY_MARGIN = 1.0


def _seconds(value: object, what: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
        float("inf"),
        float("-inf"),
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


@dataclass(frozen=True)
class Step:
    """What the runner should do now: ``"renew"``, ``"wait"`` (until ``until``), ``"lost"`` (``why``) or ``"stop"``."""

    action: str
    until: float | None = None
    why: str | None = None


class KeepAliveCore:
    """The keep-alive's decisions, without I/O or threads; every method takes ``now`` (a monotonic time).

    ``anchor`` is the time the acquisition (or the last confirmed renewal)
    was sent. The runner asks :meth:`step` what to do, reports
    :meth:`renewal_started`, then :meth:`renewal_confirmed` or
    :meth:`renewal_failed`, and :meth:`stop` once the protected work ends.
    Those return warnings to log (late renewals). Not thread-safe: the runner
    serialises calls.
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
    ):
        self.ttl = _seconds(ttl, "ttl", positive=True)
        self.latency_margin = _seconds(latency_margin, "latency_margin")
        self.block_time_margin = _seconds(block_time_margin, "block_time_margin")
        if isinstance(anchor, bool) or not isinstance(anchor, (int, float)) or anchor != anchor or abs(anchor) == float("inf"):
            raise InvalidInput(f"anchor must be a finite clock reading, got {anchor!r}")
        self.anchor = float(anchor)
        #: Seconds from a send to its safe deadline.
        self.window = self.ttl - self.latency_margin - self.block_time_margin
        if self.window <= 0:
            raise InvalidInput(
                f"a ttl of {ttl} s leaves no safe time after the margins (latency {latency_margin} s + block time "
                f"{block_time_margin} s): use a longer ttl or smaller margins"
            )
        if interval is None:
            interval = self.ttl / 2 if self.ttl / 2 < self.window else self.window / 2
        self.interval = _seconds(interval, "interval", positive=True)
        if self.interval >= self.window:
            raise InvalidInput(
                f"interval {interval} s must be shorter than the safe window ({self.window:g} s = ttl - margins): "
                "the first renewal would come after the deadline"
            )
        if retry_delay is None:
            retry_delay = min(1.0, self.interval / 4)
        self.retry_delay = _seconds(retry_delay, "retry_delay", positive=True)
        #: When the next renewal is due.
        self.due = self.anchor + self.interval
        #: Send time of the renewal in flight, if any.
        self.in_flight: float | None = None
        self._due_of_flight: float | None = None
        self.lost: str | None = None
        self.stopped = False
        self.renewals = 0
        self.failures = 0

    @property
    def deadline(self) -> float:
        """The local safe deadline: the last confirmed send + ttl - margins."""
        return self.anchor + self.window

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
        if self.in_flight is None and now >= self.due:
            return Step("renew")
        until = self.deadline if self.in_flight is not None else min(self.due, self.deadline)
        return Step("wait", until=until)

    def renewal_started(self, now: float) -> list[str]:
        if self.stopped or self.lost is not None or self.in_flight is not None:
            raise RuntimeError("no renewal may start now")  # the runner asked step() first
        self.in_flight = now
        self._due_of_flight = self.due
        late = now - self.due
        if late > self._tolerance():
            return [
                f"renewal sent {late:.3f} s after it was due ({self.deadline - now:.3f} s before the safe "
                "deadline): the renewer woke late (CPU starvation?)"
            ]
        return []

    def renewal_confirmed(self, now: float) -> list[str]:
        """The renewal started last is confirmed (its registry call returned)."""
        sent, due = self.in_flight, self._due_of_flight
        self.in_flight = self._due_of_flight = None
        if sent is None or self.stopped or self.check(now) is not None:
            return []  # too late to count: the work was stopped already
        old_deadline = self.deadline
        self.anchor = sent
        self.due = sent + self.interval
        self.renewals += 1
        warnings = []
        if due is not None and now - due > (old_deadline - due) / 2:
            warnings.append(
                f"renewal confirmed {now - due:.3f} s after it was due, {old_deadline - now:.3f} s before the "
                f"safe deadline (it took {now - sent:.3f} s): more than half the safety window"
            )
        return warnings

    def renewal_failed(self, now: float, why: str | None) -> None:
        """The renewal started last failed: ``why`` a loss reason, or None for a transient failure."""
        self.in_flight = self._due_of_flight = None
        if self.stopped or self.check(now) is not None:
            return
        self.failures += 1
        if why is not None:
            self.lost = why
        else:
            self.due = now + self.retry_delay  # retried until the deadline passes

    def stop(self) -> None:
        """The protected work ended: never renew again."""
        self.stopped = True

    def _tolerance(self) -> float:
        return self.interval / 10


class Keeper:
    """Runs a :class:`KeepAliveCore` for a lease in a background thread (see :meth:`Lease.keep`).

    The renewer thread never blocks on the chain: each renewal runs in a
    worker thread of its own, so the deadline fires on time while a renewal
    hangs on a stalled node. ``on_lost(error)`` runs once, in the renewer
    thread, when the lease is lost; it should return promptly.
    """

    def __init__(
        self,
        lease: Lease,
        core: KeepAliveCore,
        *,
        ttl: int,
        clock: Callable[[], float],
        on_lost: Callable[[LeaseLost], Any] | None = None,
    ):
        self.lease = lease
        self.core = core
        self.ttl = ttl
        self.clock = clock
        self.on_lost = on_lost
        #: Called with the new safe deadline (on ``clock``) each time a confirmed renewal moves it, in the
        #: thread that confirmed it; it should return promptly (``chainfence lock`` tells its sentinel).
        self.on_deadline: Callable[[float], Any] | None = None
        self.error: LeaseLost | None = None
        self._cause: BaseException | None = None
        self._cond = threading.Condition()
        self._worker: threading.Thread | None = None
        # An injected clock may move without the wait below noticing: re-read it often.
        self._wait_cap = None if clock is time.monotonic else 0.02
        self._thread = threading.Thread(target=self._run, name=f"chainfence-keep-{lease.resource}", daemon=True)
        #: The clock reading of the renewer thread's latest decision (tests wait on it).
        self.evaluated_at: float | None = None

    def start(self) -> None:
        logger.info(
            "keep-alive started resource=%s token=%d deadline_in=%.3f interval=%.3f",
            self.lease.resource, self.lease.token, self.core.deadline - self.clock(), self.core.interval,
        )  # fmt: skip
        self._thread.start()

    def wake(self) -> None:
        """Re-evaluate now (a test that moved an injected clock may call it)."""
        with self._cond:
            self._cond.notify_all()

    def check(self) -> None:
        with self._cond:
            why = self.core.check(self.clock())
            if why is not None and self.error is None:
                self._cond.notify_all()  # the renewer thread reports it and runs on_lost
        if why is not None:
            raise self._lost_error(why)

    def safe_remaining(self) -> float:
        with self._cond:
            return self.core.safe_remaining(self.clock())

    def stop(self) -> LeaseLost | None:
        """Stop renewing for good; return the loss, if the lease was lost.

        A renewal in flight is waited for, up to the safe deadline (its node
        may be stalled; past the deadline its outcome no longer matters), so a
        release sent afterwards comes after it; no renewal starts after this.
        """
        with self._cond:
            why = self.core.check(self.clock())
            self.core.stop()
            self._cond.notify_all()
            if why is not None and self.lease._lost is None:
                self.lease._lost = self._lost_error(why)
        if threading.current_thread() is not self._thread:
            self._thread.join()
        worker = self._worker
        if why is None and worker is not None and worker is not threading.current_thread():
            while worker.is_alive():
                with self._cond:
                    if self.core.deadline <= self.clock():
                        break
                worker.join(0.02)
        logger.info("keep-alive stopped resource=%s token=%d lost=%s", self.lease.resource, self.lease.token, why)
        return self._lost_error(why) if why is not None else None

    # -- the renewer thread ---------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                now = self.clock()
                step = self.core.step(now)
                self.evaluated_at = now
                if step.action == "wait":
                    timeout = step.until - now
                    if self._wait_cap is not None:
                        timeout = min(timeout, self._wait_cap)
                    self._cond.wait(timeout)
                    continue
                if step.action == "renew":
                    for warning in self.core.renewal_started(now):
                        self._warn(warning)
                    self._worker = threading.Thread(
                        target=self._renew, args=(now,), name=f"chainfence-renew-{self.lease.resource}", daemon=True
                    )
                    self._worker.start()
                    continue
            if step.action == "lost":
                self._report_lost(step.why)
            return  # lost or stopped: this thread never renews again

    def _renew(self, sent: float) -> None:
        sent_monotonic = time.monotonic()
        try:
            lease = self.lease
            # By id, not by name: a claimed work item's id is not the hash of its name.
            expires_at = lease.registry._renew(lease.resource, lease.resource_id, lease.token, self.ttl, None, None)
        except BaseException as error:  # noqa: BLE001 - every outcome is reported to the core
            self._renewal_failed(error)
            if not isinstance(error, Exception):
                raise
            return
        self._renewal_confirmed(expires_at, sent_monotonic)

    # What a renewal's outcome does, whichever runner (this thread, or chainfence.aio's task) got it.

    def _renewal_failed(self, error: BaseException) -> None:
        why = loss_reason(error)
        with self._cond:
            self._cause = error
            self.core.renewal_failed(self.clock(), why)
            self._cond.notify_all()
        if why is None:
            logger.info(
                "renewal failed, retrying until the deadline resource=%s token=%d: %s: %s",
                self.lease.resource, self.lease.token, type(error).__name__, error,
            )  # fmt: skip

    def _renewal_confirmed(self, expires_at: int, sent_monotonic: float) -> None:
        with self._cond:
            warnings = self.core.renewal_confirmed(self.clock())
            counted = not self.core.stopped and self.core.lost is None
            if counted:
                self.lease.expires_at = expires_at
                self.lease._sent_at = sent_monotonic
            deadline = self.core.deadline
            self._cond.notify_all()
        if counted and self.on_deadline is not None:
            self.on_deadline(deadline)
        for warning in warnings:
            self._warn(warning)

    def _warn(self, message: str) -> None:
        logger.warning("late renewal resource=%s token=%d: %s", self.lease.resource, self.lease.token, message)

    def _lost_error(self, why: str) -> LeaseLost:
        if self.error is None or self.error.why != why:
            cause = self._cause
            detail = {
                "deadline": "no renewal confirmed before the local safe deadline",
            }.get(why, f"{type(cause).__name__}: {cause}" if cause is not None else "")
            self.error = LeaseLost(resource=self.lease.resource, token=self.lease.token, why=why, detail=detail)
            self.error.__cause__ = cause
        error = LeaseLost(resource=self.error.resource, token=self.error.token, why=why, detail=self.error.detail)
        error.__cause__ = self.error.__cause__
        return error

    def _report_lost(self, why: str) -> None:
        error = self._lost_error(why)
        self.lease._lost = error
        logger.warning("lost resource=%s token=%d why=%s: stopping the work", self.lease.resource, self.lease.token, why)
        if self.on_lost is not None:
            try:
                self.on_lost(error)
            except Exception:
                logger.exception("on_lost callback failed resource=%s token=%d", self.lease.resource, self.lease.token)
