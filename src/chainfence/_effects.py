"""One core, two drivers: how the SDK's logic runs over blocking I/O and over asyncio alike.

Every operation that talks to the chain (sending a transaction, reading a
lease, judging a token) is written once, as a generator that *yields
effects* and receives their results; it never performs I/O itself::

    receipt = yield RPC.receipt(tx_hash)        # a request to the RPC layer
    yield Sleep(0.1)                            # a pause between polls
    nonce = yield Locked(sender, sign_steps)    # run sub-steps under the sender's lock
    note = yield Shielded(cleanup_steps)        # run sub-steps to the end, whatever interrupts the caller

A driver runs it: :func:`run` over the blocking :class:`~chainfence._node.rpc.Rpc`
(``time.sleep``, ``threading.Lock``), :func:`arun` over
:class:`~chainfence._node.rpc.AsyncRpc` (``asyncio.sleep``, ``asyncio.Lock``).
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
from collections.abc import Awaitable, Callable, Generator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, NamedTuple, TypeVar

__all__ = ["RPC", "Call", "Locked", "Shielded", "Sleep", "Steps", "arun", "run"]

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
