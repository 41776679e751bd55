"""A clock for the SDK's sender that moves only when the sender sleeps, for fault tests on a real node.

The sender (chainfence._node.sending) waits for receipts and confirmations with an
injected clock and sleep. With the wall clock, a test that must act while the
SDK waits ("mine once the cancellation is out", "reorganise while it
confirms") races the SDK's deadline: a slow machine lets the deadline pass
first. Installed on a Chain, this clock counts polls instead of seconds (a
0.5 s receipt timeout with 0.01 s polls is 50 polls, however long each takes)
and calls ``on_sleep`` at each pause between polls: the one moment the test
knows the SDK is waiting, and where it moves the chain.

    clock = SteppedClock(on_sleep=lambda: ...)   # e.g. mine once the node has the cancellation
    clock.install(agent.chain)

``WaitClock`` does the same for a registry's ``acquire(wait=...)``: the
waiter's clock moves only by what it sleeps, ``on_sleep(n)`` runs at its
n-th pause between polls (n from 1: the waiter has read the resource held
and is waiting), ``on_pause()`` in the random pause between seeing the
resource free and sending (where a test stages a competitor), and the
random pause is always half its limit. A wait of 60 s is then 60 s of
polls, however long each poll takes.

    clock = WaitClock(on_sleep=lambda n: lease.release() if n == 1 else None).install(bob)
    bob.acquire("r", ttl=30, wait=60)            # returns right after the release
"""

from __future__ import annotations

from collections.abc import Callable

from chainfence._sdk.waiting import Timer


class SteppedClock:
    def __init__(self, on_sleep: Callable[[], None] | None = None):
        self.now = 0.0
        self.sleeps = 0
        self.on_sleep = on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if self.on_sleep is not None:
            self.on_sleep()
        self.now += seconds

    def install(self, chain) -> SteppedClock:
        """Make ``chain``'s sender count time with this clock."""
        chain._sender._clock = self
        chain._sender._sleep = self.sleep
        return self


class WatchedClock:
    """A clock the test sets by hand, that remembers the value its latest read returned.

    For code that re-reads its clock in a thread of its own (a keep-alive's
    renewer): after ``clock.now = t``, ``wait_read(t)`` returns once that code
    has seen ``t``, so the test moves on only after it could act on it.
    """

    def __init__(self, now: float = 0.0):
        import threading

        self.now = now
        self.last_read: float | None = None
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self.last_read = self.now
            return self.now

    def wait_read(self, value: float, *, unless: Callable[[], object] = lambda: False) -> None:
        from tests.support.sequencer import wait_until

        wait_until(lambda: self.last_read == value or unless(), f"the clock was read at {value}")


class WaitClock(Timer):
    def __init__(self, on_sleep: Callable[[int], None] | None = None, on_pause: Callable[[], None] | None = None):
        self.now_ = 0.0
        self.sleeps: list[float] = []
        self.pauses: list[float] = []
        self.on_sleep = on_sleep
        self.on_pause = on_pause

    def now(self) -> float:
        return self.now_

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))
        self.now_ += seconds

    def jitter(self, limit: float) -> float:
        return limit / 2

    def pause_before_send(self, seconds: float) -> None:
        self.pauses.append(seconds)
        if self.on_pause is not None:
            self.on_pause()
        self.now_ += seconds

    def install(self, registry) -> WaitClock:
        """Make ``registry``'s ``acquire(wait=...)`` wait with this clock."""
        registry._wait_timer = self
        return self
