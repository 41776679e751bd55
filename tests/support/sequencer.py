"""Deterministic ordering of steps across threads, after trio.testing.Sequencer.

    seq = Sequencer()

    def agent_a():
        with seq(0): ...      # runs first
        with seq(3): ...      # runs after steps 0, 1, 2 completed

Each step number is used once; ``with seq(n)`` blocks until every step below
``n`` has finished. A step that waits longer than ``timeout`` fails the test
instead of hanging it.

For an event that happens in code the test does not control (a background
thread, another process, a file written by a node), ``wait_until`` polls a
condition until it holds; its timeout is only a safety net.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
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


def wait_until(condition: Callable[[], object], what: str, *, timeout: float = 60.0, poll: float = 0.01) -> None:
    """Return once ``condition()`` is true; fail the test if it never becomes true (``timeout``: a safety net)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(poll)


async def async_wait_until(
    condition: Callable[[], object], what: str, *, timeout: float = 60.0, poll: float = 0.005
) -> None:
    """``wait_until`` for a coroutine: yields to the event loop between looks (the code it waits for
    runs in other tasks of the same loop); ``timeout`` is a safety net."""
    import asyncio

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(poll)
