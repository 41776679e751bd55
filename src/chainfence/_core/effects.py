"""One core, two drivers: how the SDK's logic runs over blocking I/O and over asyncio alike.

Every operation that talks to the chain (sending a transaction, reading a
lease, judging a token) is written once, as a generator that *yields
effects* and receives their results; it never performs I/O itself::

    receipt = yield RPC.receipt(tx_hash)        # a request to the RPC layer
    yield Sleep(0.1)                            # a pause between polls
    nonce = yield Locked(sender, sign_steps)    # run sub-steps under the sender's lock
    note = yield Shielded(cleanup_steps)        # run sub-steps to the end, whatever interrupts the caller
    done = yield Blocking(index.sync)           # a blocking call that is not the chain's (a SQLite file)
    yield Emit(page)                            # hand a value out while the steps go on (a page of logs)
    result = yield Until(signal)                # wait for another thread or task to set a Signal
    worker = yield Spawn(work_steps)            # run other steps beside these (a thread; an asyncio task)

A driver runs it: :func:`run` over the blocking :class:`~chainfence._node.rpc.Rpc`
(``time.sleep``, ``threading.Lock``), :func:`arun` over
:class:`~chainfence._node.rpc.AsyncRpc` (``asyncio.sleep``, ``asyncio.Lock``).
Steps that emit are streamed: :func:`stream` is a generator of what they emit
(a blocking driver), :func:`astream` an async generator; inside other steps,
:func:`collect_steps` gathers what they emit. Naming: a function or method
whose name ends in ``_steps`` returns such a generator, and nothing else
does; the public methods of the SDK are derived from them
(:mod:`chainfence._core.faces`).
Both RPC layers have the same method names and share one error translation,
so the core sees the same results and the same typed errors either way: a
failure of an effect is thrown into the generator at its ``yield``, where
the core's ``try``/``except`` handles it exactly as if the call had raised.

Why generators rather than a sync and an async copy of each module: the
safety logic (never signing twice for one intent, reconciling late replies
by hash, cancelling, following reorgs while confirming) exists once and is
tested through both drivers (``tests/unit/test_sending.py`` runs its cases
on each).

Clocks are not effects: the core reads the injected clock (a callable)
directly; only waiting is, since blocking and asyncio wait differently.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, NamedTuple, TypeVar

__all__ = [
    "RPC",
    "Blocking",
    "Call",
    "Emit",
    "Locked",
    "Shielded",
    "Signal",
    "Sleep",
    "Spawn",
    "Steps",
    "Until",
    "arun",
    "astream",
    "collect_steps",
    "primed_steps",
    "run",
    "stream",
]

T = TypeVar("T")

#: A core operation: yields effects, receives their results, returns a T.
Steps = Generator[Any, Any, T]


class Call(NamedTuple):
    """A request to the RPC layer: ``rpc.<method>(*args, **kwargs)``."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class Sleep(NamedTuple):
    """Pause for ``seconds``: with the driver's sleep, or with ``using`` (a waiter's timer; on asyncio
    a coroutine function, or a test's virtual sleep that returns at once)."""

    seconds: float
    using: Callable[[float], Any] | None = None


class Locked(NamedTuple):
    """Run ``steps`` while holding the lock named ``key`` (one per sending account)."""

    key: str
    steps: Steps[Any]


class Shielded(NamedTuple):
    """Run ``steps`` to their end even when the caller is interrupted meanwhile (the cleanup after an
    interrupt: settling a transaction that reached the node, releasing what it acquired).

    asyncio runs them in a task of their own, awaited through ``asyncio.shield``: a further
    cancellation of the caller's task does not reach them; it is absorbed until they end (the caller
    re-raises its own cancellation afterwards). The blocking driver runs them in line: a second
    ``KeyboardInterrupt`` lands in them, and the caller says what was left undone.
    """

    steps: Steps[Any]


class Blocking(NamedTuple):
    """Call ``function()``, which blocks on something that is not the chain (an audit index's SQLite file,
    a deployment file): in line on the blocking driver, in a worker thread on asyncio."""

    function: Callable[[], Any]


class Emit(NamedTuple):
    """Hand ``value`` out and go on: :func:`stream` yields it to its caller (a page of logs, an election's
    change), :func:`collect_steps` gathers it. The steps receive None."""

    value: Any


class Signal:
    """A one-shot outcome that one thread or task sets (:meth:`set`) and steps wait for (:class:`Until`):
    a blocking driver waits on a ``threading.Event``, an asyncio driver awaits a future of its own loop
    (resolved through ``call_soon_threadsafe``, so the setter may run in any thread or loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._outcome: tuple[Any, BaseException | None] | None = None
        self._waiters: list[tuple[Any, Any]] = []  # (loop, future) of asyncio waiters

    def set(self, value: Any = None, error: BaseException | None = None) -> bool:
        """Set the outcome (``error``: raised at each wait); False if it was set already (nothing changes)."""
        with self._lock:
            if self._outcome is not None:
                return False
            self._outcome = (value, error)
            waiters, self._waiters = self._waiters, []
        self._event.set()
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                pass
        return True

    @property
    def is_set(self) -> bool:
        return self._outcome is not None

    def result(self) -> Any:
        """The outcome, once set: its value, or its error raised."""
        assert self._outcome is not None, "the signal is not set"
        value, error = self._outcome
        if error is not None:
            raise error
        return value

    def wait(self, timeout: float | None = None) -> Any:
        """Block until set (an interrupt, ``KeyboardInterrupt``, lands here); then :meth:`result`.
        :class:`TimeoutError` if ``timeout`` seconds pass first."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"the signal was not set within {timeout} s")
        return self.result()

    async def wait_async(self, timeout: float | None = None) -> Any:
        """Await until set (a cancellation lands here and leaves nothing behind); then :meth:`result`.
        :class:`TimeoutError` if ``timeout`` seconds pass first."""
        import asyncio

        with self._lock:
            future = None
            if self._outcome is None:
                loop = asyncio.get_running_loop()
                future = loop.create_future()
                self._waiters.append((loop, future))
        if future is not None:
            try:
                if timeout is None:
                    await future
                else:  # the future is this waiter's own: wait_for may cancel it
                    await asyncio.wait_for(future, timeout)
            finally:
                with self._lock:
                    self._waiters = [(lp, f) for lp, f in self._waiters if f is not future]
        return self.result()


def _wake(future: Any) -> None:
    if not future.done():
        future.set_result(None)


class Until(NamedTuple):
    """Wait until ``signal`` is set by another thread or task; receive its value (its error is raised).
    With ``timeout`` (seconds): :class:`TimeoutError` is raised if it is not set by then (the signal is
    left as it is)."""

    signal: Signal
    timeout: float | None = None


class Spawn(NamedTuple):
    """Run ``steps`` beside the current ones, over the same RPC layer: in a daemon thread on the blocking
    driver, in a task of the running loop on asyncio. Receives the thread or the task; what the steps
    return is dropped (they report through what they share, a :class:`Signal`)."""

    steps: Steps[Any]
    name: str = "chainfence-steps"


class _RpcRequests:
    """``RPC.block_number()`` is ``Call("block_number", (), {})``: the core's requests read like calls."""

    def __getattr__(self, method: str) -> Callable[..., Call]:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *args, **kwargs: Call(method, args, kwargs)


RPC = _RpcRequests()


def run(
    steps: Steps[T],
    rpc: Any,
    *,
    sleep: Callable[[float], None],
    lock: Callable[[str], AbstractContextManager[Any]],
) -> T:
    """Run ``steps`` to its return value over the blocking ``rpc``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            if type(effect) is Call:
                value = getattr(rpc, effect.method)(*effect.args, **effect.kwargs)
            elif type(effect) is Sleep:
                (effect.using or sleep)(effect.seconds)
            elif type(effect) is Locked:
                with lock(effect.key):
                    value = run(effect.steps, rpc, sleep=sleep, lock=lock)
            elif type(effect) is Shielded:
                value = run(effect.steps, rpc, sleep=sleep, lock=lock)
            elif type(effect) is Blocking:
                value = effect.function()
            elif type(effect) is Until:
                value = effect.signal.wait(effect.timeout)
            elif type(effect) is Spawn:
                value = threading.Thread(
                    target=run,
                    args=(effect.steps, rpc),
                    kwargs={"sleep": sleep, "lock": lock},
                    name=effect.name,
                    daemon=True,
                )
                value.start()
            else:
                raise TypeError(f"not an effect: {effect!r}")
        except BaseException as exc:  # handed to the core at its yield, as a direct call would raise it
            error = exc


async def arun(
    steps: Steps[T],
    rpc: Any,
    *,
    sleep: Callable[[float], Awaitable[Any]],
    lock: Callable[[str], AbstractAsyncContextManager[Any]],
) -> T:
    """Run ``steps`` to its return value over the asyncio ``rpc``; never blocks the event loop."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            if type(effect) is Call:
                value = await getattr(rpc, effect.method)(*effect.args, **effect.kwargs)
            elif type(effect) is Sleep:
                paused = (effect.using or sleep)(effect.seconds)
                if inspect.isawaitable(paused):
                    await paused
            elif type(effect) is Locked:
                async with lock(effect.key):
                    value = await arun(effect.steps, rpc, sleep=sleep, lock=lock)
            elif type(effect) is Shielded:
                value = await _shielded(arun(effect.steps, rpc, sleep=sleep, lock=lock))
            elif type(effect) is Blocking:
                import asyncio

                value = await asyncio.to_thread(effect.function)
            elif type(effect) is Until:
                value = await effect.signal.wait_async(effect.timeout)
            elif type(effect) is Spawn:
                import asyncio

                value = asyncio.ensure_future(arun(effect.steps, rpc, sleep=sleep, lock=lock))
            else:
                raise TypeError(f"not an effect: {effect!r}")
        except BaseException as exc:  # CancelledError too: the core's cleanup runs, then it propagates
            error = exc


async def _shielded(work: Awaitable[T]) -> T:
    """Await ``work`` in a task of its own that cancellations of the calling task do not reach.

    Each cancellation of the caller meanwhile is absorbed (it stays counted on the task: the caller's
    own ``CancelledError``, re-raised after this, carries it on to ``asyncio.timeout`` or a task group).
    Only the end of ``work`` ends the wait; if ``work``'s own task is cancelled (the loop shutting
    down), that cancellation is raised.
    """
    import asyncio

    task = asyncio.ensure_future(work)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                if task.cancelled():
                    raise
                return task.result()  # it ended as the caller was cancelled again: its result stands


# ----------------------------------------------------------------------
# Steps that hand values out as they go (Emit): streamed by a driver, or gathered by other steps
# ----------------------------------------------------------------------


def _until_emit_steps(steps: Steps[T], pending: Any = None) -> Steps[tuple[bool, Any]]:
    """Forward ``steps``' effects to the driver until they emit (``(True, value)``) or return
    (``(False, result)``); ``pending``: an effect they yielded already and that still has to run.

    The one delegation loop besides the drivers': ``yield from`` cannot stop at an :class:`Emit`.
    """
    value: Any = None
    error: BaseException | None = None
    effect = pending
    while True:
        if effect is None:
            try:
                effect = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                return False, done.value
        if type(effect) is Emit:
            return True, effect.value
        value, error = None, None
        try:
            value = yield effect
        except BaseException as exc:  # handed to the steps at their yield, as the driver hands it here
            error = exc
        effect = None


def collect_steps(steps: Steps[Any]) -> Steps[list[Any]]:
    """Run ``steps`` inside other steps; return what they emitted, in order (their own result is dropped)."""
    emitted: list[Any] = []
    while True:
        more, value = yield from _until_emit_steps(steps)
        if not more:
            return emitted
        emitted.append(value)


def primed_steps(steps: Steps[T]) -> Steps[T]:
    """``steps`` run up to their first effect now (no I/O: effects are only yielded), so that the checks
    before it raise at the call; the returned steps go on from there. What :func:`stream` and
    :func:`astream` are handed, so that a bad argument raises where the generator is made, not where
    it is first iterated."""
    try:
        first = steps.send(None)
    except StopIteration as done:
        return _returning_steps(done.value)
    return _going_on_steps(steps, first)


def _returning_steps(value: T) -> Steps[T]:
    return value
    yield  # pragma: no cover - makes this a generator


def _going_on_steps(steps: Steps[T], first: Any) -> Steps[T]:
    while True:
        more, value = yield from _until_emit_steps(steps, first)
        if not more:
            return value  # type: ignore[no-any-return]
        yield Emit(value)
        first = None


def stream(steps: Steps[Any], drive: Callable[[Steps[Any]], Any]) -> Iterator[Any]:
    """What ``steps`` emit, one at a time; ``drive`` (a blocking driver: :func:`run` over an RPC layer,
    ``Chain._run``) runs them between two of them. Leaving the loop early closes the steps (their
    ``finally`` clauses run)."""
    try:
        while True:
            more, value = drive(_until_emit_steps(steps))
            if not more:
                return
            yield value
    finally:
        steps.close()


async def astream(steps: Steps[Any], drive: Callable[[Steps[Any]], Awaitable[Any]]) -> AsyncIterator[Any]:
    """:func:`stream` for asyncio: an async generator of what ``steps`` emit, ``drive`` an asyncio driver
    (:func:`arun` over an RPC layer, ``AsyncChain._run``)."""
    try:
        while True:
            more, value = await drive(_until_emit_steps(steps))
            if not more:
                return
            yield value
    finally:
        steps.close()
