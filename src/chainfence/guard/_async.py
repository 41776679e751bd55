"""The guard for asyncio: :class:`AsyncGuard`, every operation of a :class:`~chainfence.Guard`, awaited.

Re-exported as ``chainfence.aio.AsyncGuard`` (and ``chainfence.guard.AsyncGuard``).
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from .._core import metrics as _metrics
from ..errors import InvalidInput
from . import _config
from ._config import DEFAULT_REQUESTS, Follow, Mark, Proven, RequestPolicy
from ._follower import FollowStatus
from ._guard import Guard

if TYPE_CHECKING:
    from .._node.headers import HeaderSource
    from ..registry import Registry
    from .admission import Admission

__all__ = ["AsyncGuard"]

P = ParamSpec("P")
R = TypeVar("R")


class _AsyncRegistry(Protocol):
    """What :meth:`AsyncGuard.open` needs of an :class:`~chainfence.aio.AsyncRegistry`: the sync registry
    whose steps it runs (and whose chain is the one its :class:`~chainfence.aio.AsyncChain` wraps)."""

    @property
    def registry(self) -> Registry: ...


def _in_thread(
    method: Callable[Concatenate[Guard, P], R],
) -> Callable[Concatenate[AsyncGuard, P], Coroutine[Any, Any, R]]:
    """``Guard.<method>`` as a coroutine method of AsyncGuard: the same call, the same arguments, the same
    result and errors, run in a worker thread."""

    @functools.wraps(method)
    async def awaited(self: AsyncGuard, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self.guard, *args, **kwargs)

    awaited.__qualname__ = f"AsyncGuard.{method.__name__}"
    awaited.__doc__ = (
        f":meth:`Guard.{method.__name__} <chainfence.Guard.{method.__name__}>`, awaited (in a worker thread).\n\n"
        + (method.__doc__ or "")
    )
    return awaited


class AsyncGuard:
    """A :class:`~chainfence.Guard` for asyncio code: every operation of the guard, awaited.

    ::

        async with await AsyncGuard.open(registry, "guard.sqlite", mode=Follow(interval=0.5)) as guard:
            await guard.check("reports/daily", token)      # StaleToken for a superseded holder

    ``AsyncGuard(guard)`` wraps a :class:`~chainfence.Guard` you have (it stays yours to close);
    :meth:`open` builds one from an :class:`~chainfence.aio.AsyncRegistry` (or a
    :class:`~chainfence.Registry`), with the Guard's arguments, and :meth:`close` (or ``async with``)
    closes it. Settings and the follower's progress are the guard's (``mode``, ``path``, ...,
    ``followed_block``); :meth:`staleness` and :meth:`follow_status` are clock readings, not awaited.

    The judgement is the :class:`~chainfence.Guard`'s own code, run in a worker thread
    (``asyncio.to_thread``), and never a copy of it. A check interleaves the store and the chain under
    invariants that span both: the mark is re-read, compared and raised in one SQLite write transaction
    (which may wait for another process's lock), only after the chain vouched for the token; an exclusive
    guard's memory mirrors its store; the follower holds its lock through a sync. Run whole in one
    thread, a check is exactly the sync one whatever becomes of the awaiting task: a cancelled check
    either records the verdict it verified or nothing, never a mark without its verification, nor a
    rejected write that moved one. The chain reads are therefore the sync chain's, in that thread: for
    an :class:`~chainfence.aio.AsyncRegistry`, the :class:`~chainfence.Chain` its
    :class:`~chainfence.aio.AsyncChain` wraps. A worker thread waits on a stalled node as long as the
    chain's request timeout, never the event loop. The one thing answered on the loop: an ``exclusive``
    guard's check at the mark it holds in memory (dict lookups, no I/O), as :meth:`Guard.check
    <chainfence.Guard.check>` answers it. A ``follow`` guard's follower is the guard's thread. A
    ``proven`` guard's header source asks its providers from that worker thread too (its own pool runs
    the providers in parallel), so a slow or silent header provider never blocks the loop.
    """

    def __init__(self, guard: Guard):
        if not isinstance(guard, Guard):
            raise InvalidInput(f"guard must be a chainfence Guard, got {type(guard).__name__}")
        #: The :class:`~chainfence.Guard` whose code runs.
        self.guard = guard
        self._registry: Any = guard.registry

    @classmethod
    async def open(
        cls,
        registry: _AsyncRegistry | Registry,
        path: str | os.PathLike[str],
        *,
        mode: str | Mark | Follow | Proven = "mark",
        confirmations: int | None = None,
        exclusive: bool = False,
        timeout: float = 30.0,
        admission: Admission | None = None,
        requests: RequestPolicy = DEFAULT_REQUESTS,
        rejection_log: str | os.PathLike[str] | None = None,
        **deprecated: Any,
    ) -> AsyncGuard:
        """``Guard(registry, path, ...)`` for asyncio: the same arguments, checks and errors, opened (and
        first synced, in ``follow`` mode) in a worker thread. ``registry`` is an
        :class:`~chainfence.aio.AsyncRegistry` (or a :class:`~chainfence.Registry`).

        Cancelled while opening, it leaves nothing open: a guard built after the cancellation is closed
        (its lock file released, its follower stopped) in the worker thread."""
        # Here, not at the top: importing the guard need not load the SDK's transaction side (web3).
        from ..registry import Registry

        given = _config.settings(mode, requests, deprecated, call="AsyncGuard.open", stacklevel=2)
        sync = registry if isinstance(registry, Registry) else getattr(registry, "registry", None)
        if not isinstance(sync, Registry):
            raise InvalidInput(f"registry must be an AsyncRegistry or a Registry, got {type(registry).__name__}")
        opening = _Opening()

        def build() -> Guard | None:
            guard = Guard._from_settings(
                sync,
                path,
                given,
                confirmations=confirmations,
                exclusive=exclusive,
                timeout=timeout,
                admission=admission,
                rejection_log=rejection_log,
            )
            return opening.deliver(guard)

        try:
            guard = await asyncio.to_thread(build)
        except asyncio.CancelledError:
            opening.abandon()
            raise
        assert guard is not None  # delivered: only an abandoned opening closes what it built
        opened = cls(guard)
        opened._registry = registry
        return opened

    # -- checks -----------------------------------------------------------------------------------

    async def check(self, resource: str, token: int) -> int:
        """:meth:`Guard.check <chainfence.Guard.check>`, awaited: in a worker thread, but for an exclusive
        guard's token at the mark it remembers (answered on the loop, from memory, as the guard does).

        Raises what ``Guard.check`` raises; a rejection never moves the mark."""
        guard = self.guard
        if guard.exclusive and guard._remembers(resource, token):
            _metrics.guard_accepted("at_mark")
            return token
        return await asyncio.to_thread(guard.check, resource, token)

    check_request = _in_thread(Guard.check_request)
    mark = _in_thread(Guard.mark)
    marks = _in_thread(Guard.marks)
    domain = _in_thread(Guard.domain)

    # -- follow mode --------------------------------------------------------------------------------

    sync = _in_thread(Guard.sync)

    def staleness(self) -> float:
        """:meth:`Guard.staleness <chainfence.Guard.staleness>`: a clock reading (not awaited)."""
        return self.guard.staleness()

    def follow_status(self) -> FollowStatus:
        """:meth:`Guard.follow_status <chainfence.Guard.follow_status>`: the follower's last result (not awaited)."""
        return self.guard.follow_status()

    @property
    def followed_block(self) -> int | None:
        """:attr:`Guard.followed_block <chainfence.Guard.followed_block>`."""
        return self.guard.followed_block

    # -- lifetime -----------------------------------------------------------------------------------

    close = _in_thread(Guard.close)

    async def __aenter__(self) -> AsyncGuard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncGuard over {self.guard!r}>"

    # -- settings (the guard's) ---------------------------------------------------------------------

    @property
    def registry(self) -> Any:
        """The registry given to :meth:`open` (an AsyncRegistry, or a Registry); the guard's, when wrapping one."""
        return self._registry

    @property
    def mode(self) -> str:
        return self.guard.mode

    @property
    def path(self) -> Path:
        return self.guard.path

    @property
    def confirmations(self) -> int:
        return self.guard.confirmations

    @property
    def exclusive(self) -> bool:
        return self.guard.exclusive

    @property
    def follow_interval(self) -> float:
        return self.guard.follow_interval

    @property
    def max_lag(self) -> float:
        return self.guard.max_lag

    @property
    def audience(self) -> str | None:
        return self.guard.audience

    @property
    def max_request_age(self) -> int:
        return self.guard.max_request_age

    @property
    def erc1271_gas(self) -> int:
        return self.guard.erc1271_gas

    @property
    def admission(self) -> Admission | None:
        return self.guard.admission

    @property
    def headers(self) -> HeaderSource | None:
        return self.guard.headers

    @property
    def proof_provider(self) -> Any:
        return self.guard.proof_provider

    @property
    def completeness(self) -> str:
        return self.guard.completeness

    @property
    def rejection_log(self) -> Path | None:
        return self.guard.rejection_log


class _Opening:
    """An :meth:`AsyncGuard.open` in progress: the guard goes to the awaiting task, or, once that task
    was cancelled, is closed by the worker thread that built it (or by the cancelled task, had the thread
    already handed it over)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned = False
        self._built: Guard | None = None

    def deliver(self, guard: Guard) -> Guard | None:
        with self._lock:
            if not self._abandoned:
                self._built = guard
                return guard
        guard.close()
        return None

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            built, self._built = self._built, None
        if built is not None:  # built and handed over as the task was cancelled: nobody will receive it
            threading.Thread(target=built.close, name="chainfence-guard-close", daemon=True).start()
