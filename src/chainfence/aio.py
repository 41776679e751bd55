"""chainfence for asyncio: the same registry, leases and keep-alive, over web3's ``AsyncWeb3``.

::

    from chainfence.aio import AsyncChain, AsyncRegistry

    async with await AsyncChain.connect(url, private_key=key) as chain:
        registry = await AsyncRegistry.at(chain, address)
        async with await registry.acquire("reports/daily", ttl=30) as lease:
            async with lease.keep():             # renews; on a loss this task is cancelled
                lease.check()                    # LeaseLost once the lease can no longer be trusted
                await write(token=lease.token)

Nothing here is a copy of the sync SDK. Every operation that talks to the
chain is written once, as steps that yield requests
(:mod:`chainfence._effects`): the sender's journey (never signing twice for
one intent, reconciling late replies by hash, cancelling, confirming across
reorgs), the chain's clock, the registry's transactions and views. A
:class:`~chainfence.Chain` runs those steps over the blocking
:class:`~chainfence._node.rpc.Rpc`; an :class:`AsyncChain` runs the very same
steps over :class:`~chainfence._node.rpc.AsyncRpc`, which awaits ``AsyncWeb3`` and
translates every failure with the same table into the same typed errors.
No call here blocks the event loop on the chain.

An :class:`AsyncChain` wraps a :class:`~chainfence.Chain` (its ``chain``):
the keys, the chain id, the confirmations, the nonce counters and the tokens
seen (rollback detection) are that object's. ``AsyncChain.over(chain)`` gives
an asyncio view of a chain you already have; dev controls (mine, snapshot,
advance_time) are the sync chain's only, and block: for tests.

The keep-alive (:meth:`AsyncLease.keep`) runs the same
:class:`~chainfence.keepalive.KeepAliveCore` as the thread runner, in a task:
when no renewal was confirmed by the local safe deadline, or a renewal finds
the lease superseded, expired or released, ``on_lost`` runs, the task that
entered ``async with lease.keep():`` is cancelled (as ``asyncio.timeout``
cancels it) and leaving the block raises
:class:`~chainfence.errors.LeaseLost` instead of ``CancelledError``;
``lease.check()`` raises it too. A renewal hangs only its own task: the
deadline fires on time on a stalled node.

Guards: :class:`AsyncGuard` (defined in :mod:`chainfence.guard`) offers every
operation of a :class:`~chainfence.Guard`, awaited; the guard's own code runs
in a worker thread (its judgement is over a SQLite store as much as the
chain; see the class).

``acquire(wait=...)`` runs the sync waiter's steps (:mod:`chainfence._waiting`)
with an asyncio timer: the same reads, events, jitter and fairness.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from . import _validate, _waiting
from . import keepalive as _keepalive
from .chain import AsyncChain
from .endings import End, LocalEnd, declare, loss_reason
from .errors import ChainfenceError, InvalidInput, LeaseLost
from .guard import AsyncGuard  # the guard's asyncio face lives with the guard: re-exported here
from .keepalive import DEFAULT_BLOCK_TIME_MARGIN, DEFAULT_LATENCY_MARGIN, KeepAliveCore, Keeper
from .lease import AcquireReason, Lease, LeaseInfo, LeaseSet, _keep_core, _Keeping, _raise_lost
from .registry import DEFAULT_MAX_TTL, Registry

logger = logging.getLogger(__name__)

__all__ = ["AsyncChain", "AsyncGuard", "AsyncLease", "AsyncLeaseSet", "AsyncRegistry"]


class AsyncRegistry:
    """:class:`~chainfence.Registry` for asyncio: the same operations and errors, awaited.

    Create with :meth:`deploy` or :meth:`at`; :meth:`connect` sends as another account.
    """

    def __init__(self, chain: AsyncChain, registry: Registry):
        self.chain = chain
        #: The sync registry whose steps this one runs (and whose caches it shares).
        self.registry = registry

    @classmethod
    async def deploy(cls, chain: AsyncChain, *, max_ttl: int = DEFAULT_MAX_TTL, sender: Any = None) -> AsyncRegistry:
        _require_chain(chain)
        registry = await chain._run(Registry._deploy_steps(chain.chain, max_ttl=max_ttl, sender=sender))
        return cls(chain, registry)

    @classmethod
    async def at(cls, chain: AsyncChain, address: str, *, sender: Any = None) -> AsyncRegistry:
        _require_chain(chain)
        registry = await chain._run(Registry._at_steps(chain.chain, address, sender=sender))
        registry.__dict__["max_ttl"] = await chain._run(registry._call_uint("maxTtl", []))  # never a sync read
        return cls(chain, registry)

    def connect(self, account: Any) -> AsyncRegistry:
        return type(self)(self.chain, self.registry.connect(account))

    @property
    def address(self) -> str:
        return self.registry.address

    @property
    def sender(self) -> str | None:
        return self.registry.sender

    @property
    def max_ttl(self) -> int:
        return self.registry.max_ttl  # read at at()/deploy(): never a blocking call

    # -- transactions -----------------------------------------------------------

    async def acquire(
        self,
        resource: str,
        ttl: int,
        *,
        confirmations: int | None = None,
        wait: float | None = None,
        exclusive: bool = False,
    ) -> AsyncLease:
        """:meth:`Registry.acquire <chainfence.Registry.acquire>`, awaited; ``wait=seconds`` waits for a
        held resource exactly as the sync one does (the same steps), sleeping with ``asyncio.sleep``;
        ``exclusive=True`` refuses (and waits out) the sender's own live lease too."""
        seconds, ttl, sender = self.registry._acquire_args(resource, ttl, wait, exclusive)
        core = self.registry
        with self._handing_over():
            if not seconds:
                lease = await self.chain._run(core._acquire(resource, ttl, sender, confirmations, exclusive=exclusive))
            else:
                timer = core._wait_timer if core._wait_timer is not _waiting.SYSTEM else _waiting.ASYNC_SYSTEM
                lease = await self.chain._run(
                    core._acquire_waiting(
                        resource, ttl, sender, confirmations, seconds, timer=timer, exclusive=exclusive
                    )
                )
        return AsyncLease(self, lease)

    async def claim(
        self, workset: str, items: Sequence[str], ttl: int, *, confirmations: int | None = None
    ) -> AsyncLease | None:
        """:meth:`Registry.claim <chainfence.Registry.claim>`, awaited: the first free item of ``items`` as an
        :class:`AsyncLease` (keep, check, renew, release, complete it as any lease), or None."""
        items, ttl, sender = self.registry._claim_args(workset, items, ttl)
        with self._handing_over():
            lease = await self.chain._run(self.registry._claim_steps(workset, items, ttl, sender, confirmations))
        return AsyncLease(self, lease) if lease is not None else None

    async def acquire_many(
        self, resources: Sequence[str], ttl: int, *, confirmations: int | None = None
    ) -> AsyncLeaseSet:
        """:meth:`Registry.acquire_many <chainfence.Registry.acquire_many>`, awaited: an :class:`AsyncLeaseSet`."""
        names, ttl, sender = self.registry._acquire_many_args(resources, ttl)
        with self._handing_over():
            leases = await self.chain._run(self.registry._acquire_many_steps(names, ttl, sender, confirmations))
        return AsyncLeaseSet(self, leases)

    @contextmanager
    def _handing_over(self) -> Iterator[None]:
        """A cancelled acquisition whose lease could not be released hands it over (the exception's
        ``lease``) as this registry's asyncio lease or set, not the sync one the core built."""
        try:
            yield
        except BaseException as interrupt:
            handed = getattr(interrupt, "lease", None)
            if isinstance(handed, LeaseSet):
                interrupt.lease = AsyncLeaseSet(self, handed)  # type: ignore[attr-defined]
            elif isinstance(handed, Lease):
                interrupt.lease = AsyncLease(self, handed)  # type: ignore[attr-defined]
            raise

    async def renew(
        self, resource: str, token: int, ttl: int, *, progress: Any = None, confirmations: int | None = None
    ) -> int:
        """:meth:`Registry.renew <chainfence.Registry.renew>` (with its ``progress`` marker), awaited."""
        return await self._renew(resource, _validate.resource_id(resource), token, ttl, progress, confirmations)

    async def release(self, resource: str, token: int, *, confirmations: int | None = None) -> None:
        await self._release(resource, _validate.resource_id(resource), token, confirmations)

    async def complete(self, resource: str, token: int, result: bytes, *, confirmations: int | None = None) -> bytes:
        return await self._complete(resource, _validate.resource_id(resource), token, result, confirmations)

    # By resource id: a claimed work item's id is not the hash of its name.

    async def _renew(
        self, resource: str, resource_id: bytes, token: int, ttl: int, progress: Any, confirmations: int | None
    ) -> int:
        steps = self.registry._renew_steps(resource, resource_id, token, ttl, progress, confirmations)
        return int(await self.chain._run(steps))

    async def _release(self, resource: str, resource_id: bytes, token: int, confirmations: int | None) -> None:
        await self.chain._run(self.registry._release_steps(resource, resource_id, token, confirmations))

    async def _complete(
        self, resource: str, resource_id: bytes, token: int, result: bytes, confirmations: int | None
    ) -> bytes:
        steps = self.registry._complete_steps(resource, resource_id, token, result, confirmations)
        return bytes(await self.chain._run(steps))

    async def lease_from_tx(self, tx_hash: str) -> AsyncLease | None:
        lease = await self.chain._run(self.registry._lease_from_tx(tx_hash))
        return AsyncLease(self, lease) if lease is not None else None

    @asynccontextmanager
    async def lease(
        self,
        resource: str,
        ttl: int,
        *,
        confirmations: int | None = None,
        wait: float | None = None,
        exclusive: bool = False,
    ) -> AsyncIterator[AsyncLease]:
        """``async with registry.lease(name, ttl) as lease:`` acquire (waiting up to ``wait``; with
        ``exclusive=True`` refusing the sender's own live lease too), run the body, release."""
        async with await self.acquire(
            resource, ttl, confirmations=confirmations, wait=wait, exclusive=exclusive
        ) as lease:
            yield lease

    # -- views --------------------------------------------------------------------

    async def latest_token(self, *, block: str | int | None = None) -> int:
        return int(await self.chain._run(self.registry._latest_token(block=block)))

    async def lease_of(self, resource: str, *, block: str | int | None = None) -> LeaseInfo | None:
        return await self.chain._run(self.registry._lease_of(resource, block=block))

    async def last_lease(self, resource: str, *, block: str | int | None = None) -> LeaseInfo | None:
        return await self.chain._run(self.registry._last_lease(resource, block=block))

    async def is_current(self, resource: str, token: int, *, block: str | int | None = None) -> bool:
        return bool(await self.chain._run(self.registry._is_current(resource, token, block=block)))

    async def check_current(
        self, resource: str, token: int, *, block: str | int | None = None, confirmations: int = 0
    ) -> LeaseInfo:
        return await self.chain._run(
            self.registry._check_current(resource, token, block=block, confirmations=confirmations)
        )

    async def identity(self) -> dict[str, str]:
        return dict(await self.chain._run(self.registry._identity_steps()))

    def __repr__(self) -> str:
        return f"<AsyncRegistry {self.address} chain_id={self.chain.chain_id} sender={self.sender}>"


class AsyncLease:
    """A lease acquired through an :class:`AsyncRegistry`: the :class:`~chainfence.Lease`'s fields
    (``resource``, ``token``, ``holder``, ``expires_at``, ...) and its operations, awaited.

    ``async with lease:`` releases on exit, as ``with lease:`` does.
    """

    def __init__(self, registry: AsyncRegistry, lease: Lease):
        self.registry = registry
        #: The lease's state (token, expiry, last confirmed send, loss): shared with the keep-alive core.
        self.lease = lease

    resource = property(lambda self: self.lease.resource)
    resource_id = property(lambda self: self.lease.resource_id)
    token = property(lambda self: self.lease.token)
    holder = property(lambda self: self.lease.holder)
    expires_at = property(lambda self: self.lease.expires_at)
    ttl = property(lambda self: self.lease.ttl)
    previous_token = property(lambda self: self.lease.previous_token)
    tx_hash = property(lambda self: self.lease.tx_hash)
    block_number = property(lambda self: self.lease.block_number)
    released = property(lambda self: self.lease.released)

    @property
    def reason(self) -> AcquireReason:
        return self.lease.reason

    @property
    def completed(self) -> bool:
        return self.lease.completed

    @property
    def workset(self) -> str | None:
        return self.lease.workset

    @property
    def item(self) -> str | None:
        return self.lease.item

    async def renew(self, ttl: int | None = None, *, progress: Any = None) -> AsyncLease:
        """:meth:`Lease.renew <chainfence.Lease.renew>`, awaited (inside ``keep()``, the keep-alive follows its ttl)."""
        lease = self.lease
        ttl = lease.ttl if ttl is None else ttl
        handle, sent = lease._renewing(ttl)
        try:
            expires_at = await self.registry._renew(lease.resource, lease.resource_id, lease.token, ttl, progress, None)
        except BaseException as error:
            lease._renew_failed(handle, error)
            raise
        lease._renewed(ttl, sent, expires_at, handle)
        return self

    async def release(self) -> None:
        """:meth:`Lease.release <chainfence.Lease.release>`, awaited (inside ``keep()`` it ends the keep-alive quietly)."""
        lease = self.lease
        keeper = lease._closing()
        try:
            await self.registry._release(self.resource, lease.resource_id, self.token, None)
        except BaseException as error:
            lease._closed(keeper, End.RELEASED, error)
            raise
        lease.released = True
        lease._closed(keeper, End.RELEASED)

    async def complete(self, result: bytes) -> bytes:
        """:meth:`Lease.complete <chainfence.Lease.complete>`, awaited (for a claimed item: marks it done and
        ends its lease)."""
        lease = self.lease
        keeper = lease._closing() if lease.item is not None else None
        try:
            digest = await self.registry._complete(self.resource, lease.resource_id, self.token, result, None)
        except BaseException as error:
            lease._closed(keeper, End.COMPLETED, error)
            raise
        lease._completed()
        lease._closed(keeper, End.COMPLETED)
        return digest

    async def is_current(self) -> bool:
        steps = self.registry.registry._is_current(self.resource, self.token, resource_id=self.lease.resource_id)
        return bool(await self.registry.chain._run(steps))

    def check(self) -> None:
        """:meth:`Lease.check <chainfence.Lease.check>`: local, no chain call; raises LeaseLost."""
        self.lease.check()

    def safe_remaining(self) -> float:
        return self.lease.safe_remaining()

    @property
    def keeper(self) -> Keeper | None:
        return self.lease.keeper

    def keep(
        self,
        *,
        on_lost: Callable[[LeaseLost], Any] | None = None,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        clock: Callable[[], float] | None = None,
        since: float | None = None,
    ) -> _AsyncKeeping:
        """``async with lease.keep():`` :meth:`Lease.keep <chainfence.Lease.keep>` in a task.

        On a loss, ``on_lost(error)`` runs (in the keep-alive's task), the
        task that entered the block is cancelled, and leaving the block
        raises :class:`~chainfence.errors.LeaseLost` whose ``why`` names the
        end, as the sync keep-alive's does. ``clock`` defaults to
        :data:`chainfence.keepalive.lease_clock` (it counts a suspend).
        """
        clock = _keepalive.lease_clock if clock is None else clock
        core = self.lease._keep_core(
            on_lost=on_lost,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            since=since,
        )
        registry = self.registry
        lease = self.lease

        async def renew(ttl: Any) -> int:
            return await registry._renew(lease.resource, lease.resource_id, lease.token, ttl, None, None)

        keeper = _AsyncKeeper(self.lease, registry, core, renew=renew, clock=clock, on_lost=on_lost)
        return _AsyncKeeping(self, keeper)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.lease.released or self.lease.completed:
            return
        try:
            await self.release()
        except ChainfenceError as release_error:
            self.lease._release_failed(release_error, exc)

    def __repr__(self) -> str:
        return "<Async" + repr(self.lease)[1:]


class AsyncLeaseSet:
    """A :class:`~chainfence.LeaseSet` acquired through :meth:`AsyncRegistry.acquire_many`: its members
    (``leases``, each an :class:`AsyncLease`), renewed, released and kept alive together, awaited.

    ``async with lease_set:`` releases what it still can on exit (see :meth:`LeaseSet.release
    <chainfence.LeaseSet.release>`); ``async with lease_set.keep():`` keeps the set alive on one shared
    deadline and, on a loss, cancels the task that entered the block, as :meth:`AsyncLease.keep` does.
    """

    def __init__(self, registry: AsyncRegistry, lease_set: LeaseSet):
        self.registry = registry
        #: The set's state (members, keep-alive, loss), shared with the keep-alive core.
        self.lease_set = lease_set

    @property
    def leases(self) -> list[AsyncLease]:
        return [AsyncLease(self.registry, lease) for lease in self.lease_set.leases]

    tokens = property(lambda self: self.lease_set.tokens)
    resources = property(lambda self: self.lease_set.resources)
    expires_at = property(lambda self: self.lease_set.expires_at)
    released = property(lambda self: self.lease_set.released)

    def __iter__(self):
        return iter(self.leases)

    def __len__(self) -> int:
        return len(self.lease_set)

    def __getitem__(self, index: int) -> AsyncLease:
        return AsyncLease(self.registry, self.lease_set[index])

    async def renew(self, ttl: int | None = None) -> AsyncLeaseSet:
        """:meth:`LeaseSet.renew <chainfence.LeaseSet.renew>`, awaited."""
        leases = self.lease_set
        ttl = leases.leases[0].ttl if ttl is None else ttl
        handle, sent = leases._renewing(ttl)
        try:
            expires_at = await self.registry.chain._run(self.registry.registry._renew_many_steps(leases.leases, ttl))
        except BaseException as error:
            if handle is not None and leases._keeper is not None:
                leases._keeper.holder_renewal_failed(handle, error)
            raise
        leases._renewed(ttl, sent, int(expires_at), handle)
        return self

    async def release(self) -> None:
        """:meth:`LeaseSet.release <chainfence.LeaseSet.release>`, awaited: releases what it still can and
        raises :class:`~chainfence.errors.LeaseSetLost` naming the members that had ended."""
        await self.registry.chain._run(self.lease_set._release_steps(self.registry.registry))

    def check(self) -> None:
        """:meth:`LeaseSet.check <chainfence.LeaseSet.check>`: local, no chain call."""
        self.lease_set.check()

    def safe_remaining(self) -> float:
        return self.lease_set.safe_remaining()

    @property
    def keeper(self) -> Keeper | None:
        return self.lease_set.keeper

    def keep(
        self,
        *,
        on_lost: Callable[[LeaseLost], Any] | None = None,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        clock: Callable[[], float] | None = None,
        since: float | None = None,
    ) -> _AsyncKeeping:
        """``async with lease_set.keep():`` :meth:`LeaseSet.keep <chainfence.LeaseSet.keep>` in a task."""
        clock = _keepalive.lease_clock if clock is None else clock
        leases = self.lease_set
        sent = [lease._sent_at for lease in leases.leases]
        core = _keep_core(
            f"the set {leases.resources}",
            leases.leases[0].ttl,
            None if None in sent else min(sent),  # type: ignore[type-var]
            on_lost=on_lost,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            since=since,
        )
        registry = self.registry

        async def renew(ttl: Any) -> int:
            return int(await registry.chain._run(registry.registry._renew_many_steps(leases.leases, ttl)))

        return _AsyncKeeping(self, _AsyncKeeper(leases, registry, core, renew=renew, clock=clock, on_lost=on_lost))

    async def __aenter__(self) -> AsyncLeaseSet:
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.lease_set.released:
            return
        try:
            await self.release()
        except ChainfenceError as release_error:
            if exc is None:
                raise
            logger.warning("releasing the lease set %s failed: %s", self.resources, release_error)
            exc.add_note(f"chainfence: releasing the lease set {self.resources} also failed: {release_error}")

    def __repr__(self) -> str:
        return f"<AsyncLeaseSet {self.resources!r} tokens={self.tokens}>"


class _AsyncKeeper(Keeper):
    """The keep-alive runner for asyncio: the thread :class:`Keeper`'s bookkeeping, a task instead of threads."""

    def __init__(
        self,
        lease: Lease | LeaseSet,
        registry: AsyncRegistry,
        core: KeepAliveCore,
        *,
        renew: Callable[[Any], Any],
        clock: Callable[[], float],
        on_lost: Callable[[LeaseLost], Any] | None,
    ):
        super().__init__(lease, core, clock=clock, on_lost=on_lost)
        self._registry = registry
        self._renew_call = renew
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._renewal: asyncio.Task[None] | None = None
        self._protected: asyncio.Task[Any] | None = None
        self._in_body = False
        self.cancelled_protected = False

    def start(self) -> None:
        self._protected = asyncio.current_task()
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
        while True:
            now = self.clock()
            step = self.core.step(now)
            self.evaluated_at = now
            if step.action == "wait":
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
                self._report_lost(step.why)
            return

    async def _renew_async(self, ttl: Any) -> None:
        sent = _keepalive.lease_clock()
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

    async def _successor_end_async(self, member: Lease | None) -> str:
        """:meth:`Keeper._successor_end`, awaited: the same steps over the asyncio driver."""
        subject = member if member is not None else self.lease
        if not isinstance(subject, Lease):
            return End.SUPERSEDED.value
        steps = self._registry.registry._successor_end_steps(subject.resource_id, subject.token, subject.block_number)
        try:
            return str((await self._registry.chain._run(steps)).value)
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


class _AsyncKeeping(_Keeping):
    """What :meth:`AsyncLease.keep` returns: the sync context's checks, an asyncio runner."""

    def __init__(self, lease: AsyncLease | AsyncLeaseSet, keeper: _AsyncKeeper):
        super().__init__(keeper.lease, keeper)
        self._async_lease = lease

    def __enter__(self) -> Lease:
        raise TypeError("use 'async with lease.keep():' for an AsyncLease")

    async def __aenter__(self) -> Any:
        self._enter()
        self._keeper.start()
        return self._async_lease

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        keeper: _AsyncKeeper = self._keeper  # type: ignore[assignment]
        cancelled_by_us = keeper.cancelled_protected and isinstance(exc, asyncio.CancelledError)
        if keeper.cancelled_protected and keeper._protected is not None:
            keeper._protected.uncancel()  # our cancellation, turned into LeaseLost below (as asyncio.timeout does)
        try:
            lost = await keeper.astop()
        finally:
            self._lease._attach(None)
        _raise_lost(lost, None if cancelled_by_us else exc)


def _require_chain(chain: object) -> None:
    if not isinstance(chain, AsyncChain):
        raise InvalidInput(f"chain must be an AsyncChain, got {type(chain).__name__}")


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
