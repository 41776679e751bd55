"""chainfence for asyncio: the same registry, leases, claims, election and history, over web3's ``AsyncWeb3``.

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

Each asyncio class is the twin of a sync one, its methods derived from the
same steps (:mod:`chainfence._faces`): :class:`AsyncRegistry` offers every
operation of :class:`~chainfence.Registry` (leases, views, ``acquire_many``,
claims, namespaces and their admins, ``history``, ``stuck``, ``ending``,
``from_deployment``), :class:`AsyncLease` and :class:`AsyncLeaseSet` those
of a lease and a set (``sign`` too), :class:`AsyncElection` and
:class:`AsyncLeadership` an election's (``observe`` is an async generator,
``watch`` a task). ``tests/unit/test_faces.py`` compares the two surfaces
name by name. They live beside their sync twins (:mod:`chainfence.registry`,
:mod:`chainfence.lease`, :mod:`chainfence.lease_set`,
:mod:`chainfence.election`); this module gathers them.

An :class:`AsyncChain` wraps a :class:`~chainfence.Chain` (its ``chain``):
the keys, the chain id, the confirmations, the nonce counters and the tokens
seen (rollback detection) are that object's. ``AsyncChain.over(chain)`` gives
an asyncio view of a chain you already have; dev controls (mine, snapshot,
advance_time) are the sync chain's only, and block: for tests.

The keep-alive (:meth:`AsyncLease.keep`) runs the same
:class:`~chainfence.keepalive.KeepAliveCore` as the thread runner, in a task
(:class:`~chainfence.keepalive.AsyncKeeper`):
when no renewal was confirmed by the local safe deadline, or a renewal finds
the lease superseded, expired or released, ``on_lost`` runs, the task that
entered ``async with lease.keep():`` is cancelled (as ``asyncio.timeout``
cancels it) and leaving the block raises
:class:`~chainfence.errors.LeaseLost` instead of ``CancelledError``;
``lease.check()`` raises it too. A renewal hangs only its own task: the
deadline fires on time on a stalled node.

Guards: :class:`AsyncGuard` runs a :class:`~chainfence.Guard`'s checks in
a worker thread (the judgement is over a SQLite store as much as the chain;
see the class).

``acquire(wait=...)`` runs the sync waiter's steps (:mod:`chainfence._waiting`)
with asyncio's sleep: the same reads, events, jitter and fairness.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._effects import Steps, arun
from ._node.rpc import AsyncRpc, connect_async_http, connect_http, redact_url, unreachable_message
from .chain import DEFAULT_CONFIRMATIONS, Chain, _check_connect_args, _dev_name, _load_key
from .election import AsyncElection, AsyncLeadership, AsyncWatch
from .errors import ChainfenceError, InvalidInput, NodeUnreachable, WrongChain
from .lease import AsyncLease
from .lease_set import AsyncLeaseSet
from .registry import AsyncRegistry

if TYPE_CHECKING:
    from .fenced_requests import FencedRequest
    from .guard import Guard

logger = logging.getLogger(__name__)

__all__ = [
    "AsyncChain",
    "AsyncElection",
    "AsyncGuard",
    "AsyncLeadership",
    "AsyncLease",
    "AsyncLeaseSet",
    "AsyncRegistry",
    "AsyncWatch",
]


class AsyncChain:
    """An EVM chain for asyncio code: :class:`~chainfence.Chain`'s state, driven over ``AsyncWeb3``.

    Build with :meth:`connect`, :meth:`embedded` or :meth:`over`; close with
    ``await chain.aclose()`` or ``async with``.

    Attributes:
        chain: the :class:`~chainfence.Chain` holding the keys, nonces and settings.
        rpc: the asyncio RPC layer (typed errors, no hidden resends).
    """

    def __init__(self, chain: Chain, rpc: AsyncRpc):
        self.chain = chain
        self.rpc = rpc
        #: The sleep the sender polls with (tests inject their own).
        self._sleep: Callable[[float], Any] = asyncio.sleep
        # One table of per-account asyncio locks per event loop, kept with the chain's sender: every
        # AsyncChain view of one Chain takes the same lock for an account.
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
            chain._sender.__dict__.setdefault("_async_locks", weakref.WeakKeyDictionary())
        )

    # -- construction ---------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        url: str,
        private_key: str | bytes | None = None,
        *,
        private_keys: Sequence[str | bytes] = (),
        chain_id: int | None = None,
        confirmations: int | None = None,
        request_timeout: float = 10.0,
        receipt_timeout: float = 120.0,
        confirmation_timeout: float = 600.0,
        poll_latency: float = 0.1,
        unreachable_timeout: float | None = None,
    ) -> AsyncChain:
        """:meth:`Chain.connect <chainfence.Chain.connect>` for asyncio: the same arguments, checks and errors."""
        _check_connect_args(
            url,
            chain_id,
            request_timeout=request_timeout,
            receipt_timeout=receipt_timeout,
            confirmation_timeout=confirmation_timeout,
            poll_latency=poll_latency,
            unreachable_timeout=unreachable_timeout,
        )
        if confirmations is not None and (
            isinstance(confirmations, bool) or not isinstance(confirmations, int) or not 0 <= confirmations <= 1_000
        ):
            raise InvalidInput(f"confirmations must be an int from 0 to 1000, got {confirmations!r}")
        keys = ([private_key] if private_key is not None else []) + list(private_keys)
        signers = [_load_key(k) for k in keys]
        rpc = AsyncRpc(connect_async_http(url, timeout=request_timeout), embedded=False)
        try:
            client = await rpc.client_version()
            actual_chain_id = await rpc.chain_id()
        except ChainfenceError as exc:
            await rpc.close()
            raise NodeUnreachable(unreachable_message(url, exc)) from exc
        if chain_id is not None and actual_chain_id != chain_id:
            await rpc.close()
            raise WrongChain(f"the node at {redact_url(url)} serves chain {actual_chain_id}, not chain {chain_id}")
        dev = _dev_name(client)
        if confirmations is None:
            confirmations = 0 if dev else DEFAULT_CONFIRMATIONS
        core = Chain(
            connect_http(url, timeout=request_timeout),  # for the dev controls only; asks nothing now
            signers,
            dev=dev,
            confirmations=confirmations,
            receipt_timeout=receipt_timeout,
            confirmation_timeout=confirmation_timeout,
            poll_latency=poll_latency,
            unreachable_timeout=unreachable_timeout,
            chain_id=actual_chain_id,
        )
        return cls(core, rpc)

    @classmethod
    def embedded(cls, *, accounts: int = 10) -> AsyncChain:
        """A fresh in-process chain (:meth:`Chain.embedded <chainfence.Chain.embedded>`), driven through
        web3's ``AsyncEthereumTesterProvider``."""
        return cls.over(Chain.embedded(accounts=accounts))

    @classmethod
    def over(cls, chain: Chain, *, request_timeout: float = 10.0) -> AsyncChain:
        """An asyncio view of ``chain``: its keys, nonce counters, settings and seen tokens, over
        ``AsyncWeb3`` (the same node's URL, or the same in-process eth-tester)."""
        if not isinstance(chain, Chain):
            raise InvalidInput(f"chain must be a chainfence Chain, got {type(chain).__name__}")
        if isinstance(request_timeout, bool) or not isinstance(request_timeout, (int, float)) or request_timeout <= 0:
            raise InvalidInput(f"request_timeout must be a positive number of seconds, got {request_timeout!r}")
        return cls(chain, AsyncRpc.twin_of(chain.rpc, timeout=request_timeout))

    async def aclose(self) -> None:
        """Close the HTTP session (the sync chain it wraps stays usable)."""
        await self.rpc.close()

    async def __aenter__(self) -> AsyncChain:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the driver -----------------------------------------------------------

    async def _run(self, steps: Steps[Any]) -> Any:
        """Run core steps over the asyncio RPC layer."""
        return await arun(steps, self.rpc, sleep=self._sleep, lock=self._lock)

    def _lock(self, key: str) -> asyncio.Lock:
        loop = asyncio.get_running_loop()  # an asyncio.Lock belongs to one loop: one table per loop
        return self._locks.setdefault(loop, {}).setdefault(key, asyncio.Lock())

    # -- what Chain offers, awaited ---------------------------------------------

    @property
    def accounts(self) -> list[str]:
        return self.chain.accounts

    @property
    def chain_id(self) -> int:
        return self.chain.chain_id

    @property
    def confirmations(self) -> int:
        return self.chain.confirmations

    async def now(self) -> int:
        """:meth:`Chain.now <chainfence.Chain.now>`: chain time as a verifier counts it."""
        return int(await self._run(self.chain._now_steps()))

    async def latest_time(self) -> int:
        return int(await self._run(self.chain._latest_time_steps()))

    async def block_number(self) -> int:
        return int(await self.rpc.block_number())

    async def confirmed_block(self, confirmations: int | None = None) -> int:
        return int(await self._run(self.chain._confirmed_block_steps(confirmations)))

    async def transact(
        self,
        sender: str,
        to: str | None,
        data: bytes,
        *,
        resource: str | None = None,
        gas: int | None = None,
        confirmations: int | None = None,
    ) -> Any:
        """:meth:`Chain.transact <chainfence.Chain.transact>`, awaited: the same journey, one copy of it."""
        return await self._run(
            self.chain._transact_steps(sender, to, data, resource=resource, gas=gas, confirmations=confirmations)
        )

    def __repr__(self) -> str:
        return f"<AsyncChain over {self.chain!r}>"


class AsyncGuard:
    """A :class:`~chainfence.Guard` for asyncio code: its checks run in a worker thread.

    Not the core-sharing of the rest of this module, on purpose: a check is
    a judgement over the guard's SQLite store (a write transaction that may
    wait for another process's lock) as much as a chain read, and both are
    blocking; ``asyncio.to_thread`` keeps them off the event loop and keeps
    one copy of the judgement (the Guard is thread-safe, as
    :class:`~chainfence.asgi.FencingMiddleware`, which does the same, relies on).
    """

    def __init__(self, guard: Guard):
        from .guard import Guard

        if not isinstance(guard, Guard):
            raise InvalidInput(f"guard must be a chainfence Guard, got {type(guard).__name__}")
        self.guard = guard

    async def check(self, resource: str, token: int) -> int:
        """:meth:`Guard.check <chainfence.Guard.check>`, awaited."""
        return int(await asyncio.to_thread(self.guard.check, resource, token))

    async def check_request(
        self,
        request: FencedRequest,
        payload: bytes,
        *,
        action: str,
        audience: str | None = None,
        resource: str | None = None,
    ) -> FencedRequest:
        """:meth:`Guard.check_request <chainfence.Guard.check_request>`, awaited."""
        return await asyncio.to_thread(
            self.guard.check_request, request, payload, action=action, audience=audience, resource=resource
        )

    async def sync(self) -> int:
        """:meth:`Guard.sync <chainfence.Guard.sync>`, awaited."""
        return int(await asyncio.to_thread(self.guard.sync))
