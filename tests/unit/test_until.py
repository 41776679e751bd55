"""``Until(signal, timeout=...)``: both drivers end the wait when the signal is set, or raise TimeoutError once
the timeout passed (the batcher's wait for the callers of a settled transaction is bounded so: a caller that
never comes back cannot stall the others). No clock decides an outcome here: a signal set before the wait
returns at once, one never set times out (the timeout is the only thing that can end that wait)."""

from __future__ import annotations

import asyncio
import threading
from contextlib import asynccontextmanager, contextmanager

import pytest

from chainfence._core.effects import Signal, Until, arun, run


@contextmanager
def no_lock(_key: str):
    yield


@asynccontextmanager
async def no_async_lock(_key: str):
    yield


def waiting(signal: Signal, timeout: float | None):
    return (yield Until(signal, timeout))


def run_sync(signal: Signal, timeout: float | None):
    return run(waiting(signal, timeout), None, sleep=lambda _s: None, lock=no_lock)


def run_async(signal: Signal, timeout: float | None):
    return asyncio.run(arun(waiting(signal, timeout), None, sleep=asyncio.sleep, lock=no_async_lock))


@pytest.mark.parametrize("driver", [run_sync, run_async], ids=["blocking", "asyncio"])
def test_a_set_signal_ends_the_wait_with_its_value(driver):
    signal = Signal()
    signal.set("done")
    assert driver(signal, 0.001) == "done"
    assert driver(signal, None) == "done"


@pytest.mark.parametrize("driver", [run_sync, run_async], ids=["blocking", "asyncio"])
def test_a_signal_never_set_times_out_and_is_left_as_it_is(driver):
    signal = Signal()
    with pytest.raises(TimeoutError):
        driver(signal, 0.001)
    assert not signal.is_set and signal._waiters == []
    signal.set("later")
    assert driver(signal, None) == "later"


@pytest.mark.parametrize("driver", [run_sync, run_async], ids=["blocking", "asyncio"])
def test_a_signal_set_by_another_thread_ends_a_bounded_wait(driver):
    signal = Signal()
    setter = threading.Timer(0, lambda: signal.set(7))  # set from another thread, at once
    setter.start()
    assert driver(signal, 60) == 7
    setter.join()


def test_the_error_a_signal_carries_is_raised_by_a_bounded_wait_too():
    signal = Signal()
    signal.set(None, KeyError("x"))
    with pytest.raises(KeyError):
        run_sync(signal, 1)
    with pytest.raises(KeyError):
        run_async(signal, 1)
