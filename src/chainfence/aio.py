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
(:mod:`chainfence._core.effects`): the sender's journey (never signing twice for
one intent, reconciling late replies by hash, cancelling, confirming across
reorgs), the chain's clock, the registry's transactions and views. A
:class:`~chainfence.Chain` runs those steps over the blocking
:class:`~chainfence._node.rpc.Rpc`; an :class:`AsyncChain` runs the very same
steps over :class:`~chainfence._node.rpc.AsyncRpc`, which awaits ``AsyncWeb3`` and
translates every failure with the same table into the same typed errors.
No call here blocks the event loop on the chain.

Each asyncio class is the twin of a sync one, its methods derived from the
same steps (:mod:`chainfence._core.faces`): :class:`AsyncRegistry` offers every
operation of :class:`~chainfence.Registry` (leases, views, ``ending``,
``from_deployment``; namespaces and worksets as handles), :class:`AsyncLease` and
:class:`AsyncLeaseSet` those of a lease and a set (``AsyncLeaseSet.acquire``, ``sign`` too), :class:`AsyncElection` and
:class:`AsyncLeadership` an election's (``observe`` is an async generator,
``watch`` a task). ``tests/unit/test_faces.py`` compares the two surfaces
name by name. They live beside their sync twins (:mod:`chainfence.registry`,
:mod:`chainfence.lease`, :mod:`chainfence.recipes.lease_set`,
:mod:`chainfence.recipes.election`); this module gathers them.

An :class:`AsyncChain` wraps a :class:`~chainfence.Chain` (its ``chain``):
the keys, the chain id, the confirmations, the nonce counters and the tokens
seen (rollback detection) are that object's. ``AsyncChain.over(chain)`` gives
an asyncio view of a chain you already have. Its dev controls (``advance_time``, ``mine``,
``revert``, ``set_next_block_time``, ``snapshot``) are the sync chain's steps, awaited.

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

``acquire(wait=...)`` runs the sync waiter's steps (:mod:`chainfence._sdk.waiting`)
with asyncio's sleep: the same reads, events, jitter and fairness.
"""

from __future__ import annotations

from ._core import log as _log
from .chain import AsyncChain
from .guard import AsyncGuard  # the guard's asyncio face lives with the guard: re-exported here
from .lease import AsyncLease
from .recipes.election import AsyncElection, AsyncLeadership, AsyncWatch
from .recipes.lease_set import AsyncLeaseSet
from .registry import AsyncRegistry

logger = _log.get(__name__)

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
