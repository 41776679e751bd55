"""What a resource's lease is, as the registry records it: its status, why it changed hands, and the verdict.

The foundation every part judges leases by: :class:`LeaseStatus` and :class:`AcquireReason` (the
contract's enums), :class:`LeaseInfo` (a resource's latest lease, read at one block) and :func:`judge`
(whether a token is current, and if not how). The model of how leases end (:mod:`chainfence.endings`)
reads them, so they sit below it; :mod:`chainfence.lease` re-exports them.
"""

from __future__ import annotations

import enum

from .._core.records import record
from ..errors import LeaseCompleted, LeaseExpired, LeaseReleased, LeaseRevoked, StaleToken, UnknownToken

__all__ = ["AcquireReason", "LeaseInfo", "LeaseStatus", "judge"]


class LeaseStatus(enum.IntEnum):
    """State of a resource's latest lease (``IFencingRegistry.LeaseStatus``)."""

    UNHELD = 0
    LIVE = 1
    EXPIRED = 2
    RELEASED = 3
    #: A claimed work item its claimant completed: never claimed again.
    DONE = 4
    #: The namespace's admin revoked it (:meth:`Namespace.revoke <chainfence.namespaces.Namespace.revoke>`).
    REVOKED = 5


class AcquireReason(enum.IntEnum):
    """Why a resource changed hands (``IFencingRegistry.AcquireReason``)."""

    #: The resource had never been held.
    UNHELD = 0
    #: The previous holder released it.
    RELEASED = 1
    #: The previous lease had expired.
    EXPIRED = 2
    #: The holder of a live lease acquired again, fencing off its past self.
    REACQUIRED = 3
    #: The namespace's admin had revoked the previous lease.
    REVOKED = 4
    #: The namespace's admin granted this lease (a live previous lease was revoked first).
    GRANTED = 5


@record
class LeaseInfo:
    """What the registry records for a resource's latest lease, read at one block.

    ``expires_at`` is chain time; it reads 0 for a released lease.
    ``judged_at`` is the chain time (:meth:`Chain.now <chainfence.Chain.now>`)
    a live-looking lease was judged at, None for a view at a given block;
    ``expired_unmined`` says the lease has expired by that time although the
    latest block still shows it live (no block was mined since it ran out).
    """

    resource: str | None
    resource_id: bytes
    holder: str
    token: int
    expires_at: int
    status: LeaseStatus
    judged_at: int | None = None
    expired_unmined: bool = False

    def __init__(
        self,
        resource: str | None,
        resource_id: bytes,
        holder: str,
        token: int,
        expires_at: int,
        status: LeaseStatus,
        judged_at: int | None = None,
        expired_unmined: bool = False,
    ) -> None:
        self.__dict__.update(
            resource=resource,
            resource_id=resource_id,
            holder=holder,
            token=token,
            expires_at=expires_at,
            status=status,
            judged_at=judged_at,
            expired_unmined=expired_unmined,
        )

    @property
    def live(self) -> bool:
        return self.status is LeaseStatus.LIVE


def judge(info: LeaseInfo, token: int, *, resource: str | None, resource_id: bytes) -> None:
    """Return if ``token`` is the live token of the lease ``info`` describes; else raise the
    :class:`~chainfence.errors.TokenNotCurrent` subclass that says how it is not (never issued,
    superseded, completed, released, revoked, expired). The one verdict: strict views
    (``Registry.check_current``) and the proven mode (:mod:`chainfence.proofs`) both call it."""
    if token == info.token and info.status is LeaseStatus.LIVE:
        return
    if token > info.token or info.status is LeaseStatus.UNHELD:
        raise UnknownToken(token=token, current_token=info.token, resource=resource, resource_id=resource_id)
    if token < info.token:
        raise StaleToken(token=token, current_token=info.token, resource=resource, resource_id=resource_id)
    if info.status is LeaseStatus.DONE:  # a completed claim ended its lease, for good
        raise LeaseCompleted(token=token, resource=resource, resource_id=resource_id)
    if info.status is LeaseStatus.RELEASED:
        raise LeaseReleased(token=token, resource=resource, resource_id=resource_id)
    if info.status is LeaseStatus.REVOKED:  # the namespace's admin ended it
        raise LeaseRevoked(token=token, resource=resource, resource_id=resource_id)
    raise LeaseExpired(
        token=token,
        expired_at=info.expires_at,
        resource=resource,
        resource_id=resource_id,
        judged_at=info.judged_at,
        no_block_since=info.expired_unmined,
    )
