"""Deterministic ordering of steps across threads, after trio.testing.Sequencer.

    seq = Sequencer()

    def agent_a():
        with seq(0): ...      # runs first
        with seq(3): ...      # runs after steps 0, 1, 2 completed

Each step number is used once; ``with seq(n)`` blocks until every step below
``n`` has finished. A step that waits longer than ``timeout`` fails the test
instead of hanging it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Sequencer:
    def __init__(self, timeout: float = 30.0):
        self._next = 0
        self._used: set[int] = set()
        self._cond = threading.Condition()
        self._timeout = timeout

    @contextmanager
    def __call__(self, step: int) -> Iterator[None]:
        with self._cond:
            if step in self._used:
                raise RuntimeError(f"step {step} used twice")
            self._used.add(step)
            if not self._cond.wait_for(lambda: self._next == step, timeout=self._timeout):
                raise TimeoutError(f"step {step} never became due (at step {self._next})")
        try:
            yield
        finally:
            with self._cond:
                self._next += 1
                self._cond.notify_all()
