"""Claims: work items handed out one at a time, each under a lease, done for good once completed.

::

    nightly = registry.workset("nightly")
    item = nightly.claim(["a", "b", "c"], ttl=60)   # the first free item, or None
    if item is not None:
        with item, item.keep():
            ...                                     # the work of item.item
            item.complete(result)                   # done for good: no claim hands it out again

:class:`Workset` is one workset of a registry (``registry.workset(name)``;
``AsyncWorkset`` its asyncio twin, from ``AsyncRegistry.workset``): it claims
items, reads an item's latest claim, renews, releases and completes a claim
known by its item and token, and, as the admin of the workset name's
namespace, revokes and grants items. A claim is a :class:`~chainfence.Lease`
whose ``resource`` is the item's name ``"workset»item"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from . import keepalive as _keepalive
from ._core import log as _log
from ._core.effects import Steps
from ._core.faces import AsyncDriver, AsyncFace, SyncFace, awaiting, drives, mirrored, twin_of
from ._node import events as _events
from ._node import sending as _sending
from ._sdk import names as _names
from ._sdk import validate as _validate
from ._sdk.contract import MAX_CLAIM_ITEMS, RegistryContract
from ._sdk.interrupted import settle_steps
from ._sdk.lease_state import LeaseInfo
from .endings import End, LocalEnd, declare
from .errors import InvalidClaimItems, NothingToClaim
from .lease import AsyncLease, Lease
from .namespaces import grant_item_steps, revoke_item_steps

logger = _log.get("chainfence.registry")

R = TypeVar("R")

__all__ = ["AsyncWorkset", "Workset"]


class Workset(SyncFace):
    """A workset of a registry, as ``registry.workset(name)`` gives it: work items handed out one at a
    time, each under a lease (a claim), done for good once completed.

    Sends as the registry's sender (``registry.connect(agent).workset(name)``). Building one asks
    nothing of the chain. ``name`` is a name as any resource's (its namespace, the text before its
    first ``/``, governs its items); the admin's :meth:`revoke` and :meth:`grant` also take a name
    the SDK would not publish, as ``bytes``.
    """

    def __init__(self, registry: RegistryContract, name: str | bytes):
        #: The :class:`~chainfence.Registry` (and sender) the items are claimed through.
        self.registry = registry
        _names.held_name(name)  # a str or bytes of 1 to 128 bytes: anything else is refused here
        #: The workset's name.
        self.name = name

    def _drive(self, steps: Steps[R]) -> R:
        return self.registry._drive(steps)

    def _claim_steps(self, items: Sequence[str], ttl: int, *, confirmations: int | None = None) -> Steps[Lease | None]:
        registry, workset = self.registry, self.name
        items, ttl, sender = self._claim_args(items, ttl)
        assert isinstance(workset, str)
        ttl = _validate.ttl(ttl, (yield from registry._max_ttl_steps()))
        data = registry._encode("claimNext", [workset, items, ttl])
        claimed: list[Lease] = []
        sent = _keepalive.lease_clock()  # where a keep-alive's safe deadline counts from: before the send
        try:
            try:
                receipt = yield from registry.chain._transact_steps(
                    sender, registry.address, data, resource=workset, confirmations=confirmations
                )
            except NothingToClaim:
                logger.info("nothing to claim workset=%s items=%d", workset, len(items))
                return None
            lease = self._claimed_lease(receipt, items, ttl)
            lease._sent_at = sent
            claimed.append(lease)
        except BaseException as interrupt:
            if not _sending.interrupted(interrupt):
                raise
            yield from settle_steps(
                registry,
                interrupt,
                f"the claim of an item of {workset!r}",
                claimed,
                lambda receipt: [self._claimed_lease(receipt, items, ttl)],
            )
            raise
        logger.info(
            "claimed workset=%s item=%s token=%d holder=%s expires_at=%d reason=%s tx=%s",
            workset,
            lease.item,
            lease.token,
            lease.holder,
            lease.expires_at,
            lease.reason.name.lower(),
            lease.tx_hash,
        )
        return lease

    @drives(_claim_steps)
    def claim(self, items: Sequence[str], ttl: int, *, confirmations: int | None = None) -> Lease | None:
        """Claim the first of ``items`` that is free and not done, in one transaction; None if none is.

        The shell-agent recipe without a janitor: an item is free when never
        claimed, released, or expired (a crashed claimant's item is simply
        free again), or when the sender itself holds it: an agent restarted
        with no memory calls ``claim`` again and gets its own item back under a
        new token, fencing off its earlier incarnation. Never trust remembered
        state: claim live. Finish with ``lease.complete(result)``, which marks
        the item done for good (no claim hands it out again) and is refused to
        a claimant that was superseded. Keep one key per agent: two agents
        sharing a key re-claim each other's items.

        Returns the :class:`~chainfence.Lease` (``lease.item``, ``lease.workset``,
        ``lease.token``; ``lease.resource`` is the item's name
        ``"workset»item"``, which every method that takes a name accepts:
        ``registry.renew``, ``release``, ``complete``, ``check_current``,
        ``last_lease``, ``chainfence.audit.history``), or None when every item is done or held live by
        others (nothing is sent then: the preflight sees it). ``items``: 1 to
        512 distinct names, each 1 to 128 bytes of printable UTF-8, as is
        the workset's name; otherwise :class:`~chainfence.errors.InvalidClaimItems`
        or :class:`~chainfence.errors.InvalidResourceName` and nothing is sent.
        Gas grows with the items scanned before a free one: drop done items
        from the list when you can (:meth:`last_lease` tells).
        """
        return self._drive(self._claim_steps(items, ttl, confirmations=confirmations))

    def _claim_args(self, items: Sequence[str], ttl: int) -> tuple[list[str], int, str]:
        """claim()'s arguments checked, ttl aside: (items, ttl, sender). Nothing is sent."""
        _validate.publishable(self.name)
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise InvalidClaimItems(f"items must be a list of names, got {type(items).__name__}")
        items = list(items)
        if not 1 <= len(items) <= MAX_CLAIM_ITEMS:
            raise InvalidClaimItems(count=len(items), max_count=MAX_CLAIM_ITEMS)
        for item in items:
            _validate.publishable(item)
        if len(set(items)) != len(items):
            raise InvalidClaimItems(f"items must be distinct; {len(items) - len(set(items))} repeat")
        return items, ttl, self.registry._require_sender()

    def _claimed_lease(self, receipt: Any, items: list[str], ttl: int) -> Lease:
        workset = self.name
        event = self.registry._event(receipt, _events.Kind.ACQUIRED)
        item = {_names.item_id(workset, item): item for item in items}[event.resource_id]
        return Lease._from_event(
            self.registry,
            event,
            receipt,
            resource=_names.item_name(workset, item),
            ttl=ttl,
            workset=str(workset),
            item=item,
        )

    def _last_lease_steps(self, item: str, *, block: str | int | None = None) -> Steps[LeaseInfo | None]:
        return (yield from self.registry._last_lease_steps(_names.item_name(self.name, item), block=block))

    @drives(_last_lease_steps)
    def last_lease(self, item: str, *, block: str | int | None = None) -> LeaseInfo | None:
        """The latest claim of work item ``item`` whatever its state (``status``
        :attr:`~chainfence.LeaseStatus.DONE` once completed), or None if it was never claimed.
        The same as ``registry.last_lease("workset»item")``."""
        return self._drive(self._last_lease_steps(item, block=block))

    def _renew_steps(
        self, item: str, token: int, ttl: int, *, progress: Any = None, confirmations: int | None = None
    ) -> Steps[int]:
        name = _names.item_name(self.name, item)
        return (
            yield from self.registry._renew_by_id_steps(
                name, _validate.resource_id(name), token, ttl, progress, confirmations
            )
        )

    @drives(_renew_steps)
    def renew(self, item: str, token: int, ttl: int, *, progress: Any = None, confirmations: int | None = None) -> int:
        """Extend the claim ``token`` on work item ``item`` to now + ``ttl`` (``registry.renew`` of the
        item's name ``"workset»item"``); returns the new expiry."""
        return self._drive(self._renew_steps(item, token, ttl, progress=progress, confirmations=confirmations))

    def _release_steps(self, item: str, token: int, *, confirmations: int | None = None) -> Steps[None]:
        name = _names.item_name(self.name, item)
        yield from self.registry._release_by_id_steps(name, _validate.resource_id(name), token, confirmations)

    @drives(_release_steps)
    def release(self, item: str, token: int, *, confirmations: int | None = None) -> None:
        """End the claim ``token`` on work item ``item``: the item is free again (not done)."""
        self._drive(self._release_steps(item, token, confirmations=confirmations))

    def _complete_steps(
        self, item: str, token: int, result: bytes, *, confirmations: int | None = None
    ) -> Steps[bytes]:
        name = _names.item_name(self.name, item)
        return (
            yield from self.registry._complete_by_id_steps(
                name, _validate.resource_id(name), token, result, confirmations
            )
        )

    @drives(_complete_steps)
    def complete(self, item: str, token: int, result: bytes, *, confirmations: int | None = None) -> bytes:
        """Mark work item ``item`` done with ``result`` (recorded as its keccak256, or a 32-byte digest as
        given), only while ``token`` is its current claim: :meth:`Lease.complete
        <chainfence.Lease.complete>` for a claim known only by its item and token (a shell script's
        ``chainfence complete``). Returns the digest recorded."""
        return self._drive(self._complete_steps(item, token, result, confirmations=confirmations))

    # -- the admin's revoke and grant (the steps are the namespace's: chainfence.namespaces) -------------

    def _revoke_steps(self, item: str | bytes, *, confirmations: int | None = None) -> Steps[int]:
        return (yield from revoke_item_steps(self.registry, self.name, item, confirmations))

    @drives(_revoke_steps)
    def revoke(self, item: str | bytes, *, confirmations: int | None = None) -> int:
        """End the live claim on work item ``item`` as the admin of the workset name's namespace (items
        follow it); return the revoked token.

        The claimant's token stops being current (its renew, release and
        complete fail with :class:`~chainfence.errors.LeaseRevoked`); the item
        is not done: the next :meth:`claim` may hand it out again (reason
        ``revoked``). Raises :class:`~chainfence.errors.NotNamespaceAdmin`
        outside the sender's namespaces (a workset in no namespace has no admin) and
        :class:`~chainfence.errors.NotLive` when the item has no live claim (never claimed,
        released, expired or done). A name with a ``/`` is a plain resource, never a work item:
        ``namespace.revoke("workset/item")`` is not this. The workset's name and ``item`` are any names
        the registry holds (``str`` as it is, or ``bytes``), as :meth:`Namespace.revoke
        <chainfence.namespaces.Namespace.revoke>` takes them.
        """
        return self._drive(self._revoke_steps(item, confirmations=confirmations))

    def _grant_steps(
        self, item: str | bytes, holder: str, ttl: int, *, confirmations: int | None = None
    ) -> Steps[Lease]:
        return (yield from grant_item_steps(self.registry, self.name, item, holder, ttl, confirmations))

    @drives(_grant_steps)
    def grant(self, item: str | bytes, holder: str, ttl: int, *, confirmations: int | None = None) -> Lease:
        """Give work item ``item`` to ``holder`` as a claim for ``ttl`` seconds, as the admin of the
        workset name's namespace: a new, higher token (a live claim is revoked first, recorded); the
        holder may renew, release and :meth:`~chainfence.Lease.complete` it like any claimant
        (completing marks the item done).

        Raises what :meth:`Namespace.grant <chainfence.namespaces.Namespace.grant>` raises, and
        :class:`~chainfence.errors.LeaseCompleted` for an item already done (no grant reopens it).
        Returns the :class:`~chainfence.Lease` (``lease.workset``, ``lease.item``). Names the SDK would
        not publish, as :meth:`revoke` takes them.
        """
        return self._drive(self._grant_steps(item, holder, ttl, confirmations=confirmations))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workset) and (self.registry, self.name) == (other.registry, other.name)

    def __hash__(self) -> int:
        return hash((self.registry, self.name))

    def __repr__(self) -> str:
        return f"<Workset {self.name!r} of {self.registry.address} sender={self.registry.sender}>"


class AsyncWorkset(AsyncFace[Workset], core=Workset):
    """A :class:`Workset` through an :class:`~chainfence.aio.AsyncRegistry` (``AsyncRegistry.workset``):
    claims come back as :class:`~chainfence.aio.AsyncLease`, every operation awaited (the same steps,
    run over asyncio)."""

    def __init__(self, registry: Any, workset: Workset):
        #: The :class:`~chainfence.aio.AsyncRegistry` the items are claimed through.
        self.registry = registry
        #: The sync :class:`Workset` whose steps this one runs.
        self.workset = workset

    @property
    def _core(self) -> Workset:
        return self.workset

    @property
    def _driver(self) -> AsyncDriver:
        return self.registry.chain  # type: ignore[no-any-return]

    @classmethod
    def _from_core(cls, core: Workset, driver: AsyncDriver) -> AsyncWorkset:
        return cls(twin_of(core.registry, driver), core)

    name = mirrored("name")

    claim = awaiting(Workset.claim, AsyncLease, optional=True)
    last_lease = awaiting(Workset.last_lease)
    renew = awaiting(Workset.renew)
    release = awaiting(Workset.release)
    complete = awaiting(Workset.complete)
    revoke = awaiting(Workset.revoke)
    grant = awaiting(Workset.grant, AsyncLease)

    def __repr__(self) -> str:
        return "<Async" + repr(self.workset)[1:]


declare(
    "claims",
    __name__,
    {
        End.EXPIRED: "the claim expired: the item is free again for any claimant; the claimant's keep-alive "
        "loses it (why='expired') and its complete() is refused (LeaseExpired / StaleToken): it completes nothing",
        End.RELEASED: "released (by this claimant: check() says released; elsewhere: its keep-alive loses it): "
        "the item is free again, not done",
        End.COMPLETED: "completed: the item is done for good (no claim hands it out again); completed by this "
        "claimant: its keep-alive ends quietly and check() raises LeaseLost(why='completed')",
        End.SUPERSEDED: "the same claimant claimed it again (a restarted agent): the earlier incarnation's "
        "keep-alive loses it (why='superseded') and its complete() is refused",
        End.REVOKED: "the namespace's admin revoked the claim: lost at once (why='revoked'), never retried; "
        "the item is free again",
        End.GRANTED: "the admin granted the item to another claimant: lost (why='granted')",
        End.ROLLED_BACK: "the chain forgot the claim: lost (why='rolled_back')",
        LocalEnd.DEADLINE: "no renewal confirmed by the safe deadline: lost (why='deadline'), stop before the "
        "claim can have expired on-chain",
        LocalEnd.ERROR: "the renewer failed with an error that is not the chain's: lost (why='error')",
    },
    holds=True,
    keeps_alive=True,
)
