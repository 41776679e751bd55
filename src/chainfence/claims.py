"""Claims: work items handed out one at a time, each under a lease, done for good once completed.

::

    item = registry.claim("nightly", ["a", "b", "c"], ttl=60)   # the first free item, or None
    if item is not None:
        with item, item.keep():
            ...                                   # the work of item.item
            item.complete(result)                 # done for good: no claim hands it out again

:class:`ClaimOperations` is the registry's part that claims, reads and ends
claims by workset and item (part of :class:`~chainfence.Registry`, and of
its asyncio twin); a claim is a :class:`~chainfence.Lease` whose
``resource`` is the item's name ``"workset»item"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import keepalive as _keepalive
from ._core import log as _log
from ._core.effects import Steps
from ._core.faces import operation
from ._node import events as _events
from ._node import sending as _sending
from ._sdk import names as _names
from ._sdk import validate as _validate
from ._sdk.contract import MAX_CLAIM_ITEMS, RegistryContract
from ._sdk.interrupted import settle_steps
from ._sdk.lease_state import LeaseInfo
from .endings import End, LocalEnd, declare
from .errors import InvalidClaimItems, NothingToClaim
from .lease import Lease

logger = _log.get("chainfence.registry")

__all__ = ["ClaimOperations"]


class ClaimOperations(RegistryContract):
    """The registry's operations on work items (part of :class:`~chainfence.Registry`)."""

    def _claim_steps(
        self, workset: str, items: Sequence[str], ttl: int, *, confirmations: int | None = None
    ) -> Steps[Lease | None]:
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

        Returns the :class:`Lease` (``lease.item``, ``lease.workset``,
        ``lease.token``; ``lease.resource`` is the item's name
        ``"workset»item"``, which every method that takes a name accepts:
        :meth:`renew`, :meth:`release`, :meth:`complete`, :meth:`check_current`,
        :meth:`last_lease`, :meth:`history`), or None when every item is done or held live by
        others (nothing is sent then: the preflight sees it). ``items``: 1 to
        512 distinct names, each 1 to 128 bytes of printable UTF-8, as is
        ``workset``; otherwise :class:`~chainfence.errors.InvalidClaimItems`
        or :class:`~chainfence.errors.InvalidResourceName` and nothing is sent.
        Gas grows with the items scanned before a free one: drop done items
        from the list when you can (``item_lease`` tells).
        """
        items, ttl, sender = self._claim_args(workset, items, ttl)
        ttl = _validate.ttl(ttl, (yield from self._max_ttl_steps()))
        data = self._encode("claimNext", [workset, items, ttl])
        claimed: list[Lease] = []
        sent = _keepalive.lease_clock()  # where a keep-alive's safe deadline counts from: before the send
        try:
            try:
                receipt = yield from self.chain._transact_steps(
                    sender, self.address, data, resource=workset, confirmations=confirmations
                )
            except NothingToClaim:
                logger.info("nothing to claim workset=%s items=%d", workset, len(items))
                return None
            lease = self._claimed_lease(receipt, workset, items, ttl)
            lease._sent_at = sent
            claimed.append(lease)
        except BaseException as interrupt:
            if not _sending.interrupted(interrupt):
                raise
            yield from settle_steps(
                self,
                interrupt,
                f"the claim of an item of {workset!r}",
                claimed,
                lambda receipt: [self._claimed_lease(receipt, workset, items, ttl)],
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

    claim = operation(_claim_steps)

    def _claim_args(self, workset: str, items: Sequence[str], ttl: int) -> tuple[list[str], int, str]:
        """claim()'s arguments checked, ttl aside: (items, ttl, sender). Nothing is sent."""
        _validate.publishable(workset)
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise InvalidClaimItems(f"items must be a list of names, got {type(items).__name__}")
        items = list(items)
        if not 1 <= len(items) <= MAX_CLAIM_ITEMS:
            raise InvalidClaimItems(count=len(items), max_count=MAX_CLAIM_ITEMS)
        for item in items:
            _validate.publishable(item)
        if len(set(items)) != len(items):
            raise InvalidClaimItems(f"items must be distinct; {len(items) - len(set(items))} repeat")
        return items, ttl, self._require_sender()

    def _claimed_lease(self, receipt: Any, workset: str, items: list[str], ttl: int) -> Lease:
        event = self._event(receipt, _events.Kind.ACQUIRED)
        item = {_names.item_id(workset, item): item for item in items}[event.resource_id]
        return Lease._from_event(
            self, event, receipt, resource=_names.item_name(workset, item), ttl=ttl, workset=workset, item=item
        )

    def _item_lease_steps(self, workset: str, item: str, *, block: str | int | None = None) -> Steps[LeaseInfo | None]:
        """The latest claim of work item ``item`` of ``workset`` whatever its state (``status``
        :attr:`~chainfence.LeaseStatus.DONE` once completed), or None if it was never claimed.
        The same as ``last_lease("workset»item")``."""
        return (yield from self._last_lease_steps(_names.item_name(workset, item), block=block))

    item_lease = operation(_item_lease_steps)

    def _renew_item_steps(
        self, workset: str, item: str, token: int, ttl: int, *, progress: Any = None, confirmations: int | None = None
    ) -> Steps[int]:
        """:meth:`renew` of the claim ``token`` on work item ``item`` of ``workset`` (the same as
        ``renew("workset»item", ...)``); returns the new expiry."""
        name = _names.item_name(workset, item)
        return (
            yield from self._renew_by_id_steps(name, _validate.resource_id(name), token, ttl, progress, confirmations)
        )

    renew_item = operation(_renew_item_steps)

    def _release_item_steps(
        self, workset: str, item: str, token: int, *, confirmations: int | None = None
    ) -> Steps[None]:
        """:meth:`release` of the claim ``token`` on work item ``item`` of ``workset``: the item is free
        again (not done)."""
        name = _names.item_name(workset, item)
        yield from self._release_by_id_steps(name, _validate.resource_id(name), token, confirmations)

    release_item = operation(_release_item_steps)

    def _complete_item_steps(
        self, workset: str, item: str, token: int, result: bytes, *, confirmations: int | None = None
    ) -> Steps[bytes]:
        """:meth:`Lease.complete` for a claim known only by its workset, item and token (a shell
        script's ``chainfence complete``): marks the item done, only while ``token`` is its current claim."""
        name = _names.item_name(workset, item)
        return (yield from self._complete_by_id_steps(name, _validate.resource_id(name), token, result, confirmations))

    complete_item = operation(_complete_item_steps)


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
