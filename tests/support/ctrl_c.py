"""Ctrl-C in the main thread, landing exactly where the test says: inside a wait for an outcome.

A real SIGINT sent to a thread blocked in a wait raises ``KeyboardInterrupt`` out of that wait; but one
that arrives an instant before the thread blocks is handled only when the wait ends (CPython runs signal
handlers between bytecodes, and a lock acquisition restarts unless the signal comes during it): a test
that sends SIGINT and waits for the cleanup would then hang for a timeout. ``CtrlC`` raises the
``KeyboardInterrupt`` itself, out of the main thread's n-th wait for an SDK outcome
(:meth:`chainfence._core.effects.Signal.wait`), once the test calls :meth:`press`: the place and the moment a
Ctrl-C lands, without the race.

    ctrl_c = CtrlC(monkeypatch)              # the main thread's 1st wait (timeout None) is interrupted
    ctrl_c = CtrlC(monkeypatch, after_outcome=True)   # ... once its outcome came (the caller not yet back)
    ctrl_c.press()                           # from another thread: the KeyboardInterrupt goes off now
    ctrl_c.waiting.wait()                    # set while the main thread waits, interruptible
"""

from __future__ import annotations

import threading
from typing import Any

from chainfence._core.effects import Signal


class CtrlC:
    def __init__(self, monkeypatch: Any, *, waits: tuple[int, ...] = (1,), after_outcome: bool = False):
        """Interrupt the main thread's waits numbered ``waits`` (1: its first wait for an outcome; waits with
        a timeout, the batcher worker's, are not counted); with ``after_outcome``, once the outcome came."""
        self._main = threading.main_thread().ident
        self._waits = waits
        self._after = after_outcome
        self._count = 0
        self._pressed = threading.Event()
        #: Set while the main thread is in an interruptible wait (cleared when it leaves it).
        self.waiting = threading.Event()
        #: How many KeyboardInterrupts went off.
        self.fired = 0
        wait = Signal.wait
        ctrl_c = self

        def interruptible(signal_: Signal, timeout: float | None = None) -> Any:
            if threading.current_thread().ident != ctrl_c._main or timeout is not None:
                return wait(signal_) if timeout is None else wait(signal_, timeout)
            ctrl_c._count += 1
            if ctrl_c._count not in ctrl_c._waits:
                return wait(signal_)
            if ctrl_c._after:
                wait(signal_)  # the outcome came; the caller is not back yet
            ctrl_c.waiting.set()
            if not ctrl_c._pressed.wait(120):
                raise AssertionError("Ctrl-C was never pressed")
            ctrl_c._pressed.clear()
            ctrl_c.waiting.clear()
            ctrl_c.fired += 1
            raise KeyboardInterrupt

        monkeypatch.setattr(Signal, "wait", interruptible)

    def press(self) -> None:
        """Let the KeyboardInterrupt go off in the main thread's interruptible wait (now, or as it gets there)."""
        self._pressed.set()
