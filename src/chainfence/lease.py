"""Leases: the time-bounded right to act on a resource, stamped with a fencing token.

A lease is not a guarantee that you still hold the resource while you act:
chain time moves on while your process is paused. Carry ``lease.token`` to
every write and let the resource (a :class:`~chainfence.Guard`) judge it::

    agent A: lease = acquire("reports/daily", ttl=30)   -> token 7, until t=130
    agent A: ...GC pause, laptop sleep, slow model call...
    chain:   t=130, A's lease expires
    agent B: acquire("reports/daily", ttl=30)           -> token 8
    agent B: write(token=8)                              -> accepted, mark 8
    agent A: wakes up, write(token=7)                    -> StaleToken: 7 < 8

Two ways for a lease to end, told apart as trio tells "you closed it" from
"it broke under you": :class:`~chainfence.errors.LeaseReleased` (you
released it) and :class:`~chainfence.errors.LeaseExpired` /
:class:`~chainfence.errors.StaleToken` (you lost it).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ChainfenceError

if TYPE_CHECKING:
    from .fenced_requests import FencedRequest
    from .registry import Registry

logger = logging.getLogger(__name__)

__all__ = ["AcquireReason", "Lease", "LeaseInfo", "LeaseStatus"]


class LeaseStatus(enum.IntEnum):
    """State of a resource's latest lease (``IFencingRegistry.LeaseStatus``)."""

    UNHELD = 0
    LIVE = 1
    EXPIRED = 2
    RELEASED = 3
    #: A claimed work item its claimant completed: never claimed again.
    DONE = 4


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


@dataclass(frozen=True)
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

    @property
    def live(self) -> bool:
        return self.status is LeaseStatus.LIVE


class Lease:
    """A lease you acquired: ``resource``, ``token``, ``holder``, ``expires_at``.

    Returned by :meth:`Registry.acquire <chainfence.Registry.acquire>`.
    ``renew()`` and ``release()`` act on exactly this token: they never touch
    a newer lease of the same resource. Used as a context manager it releases
    on exit (see :meth:`Registry.lease <chainfence.Registry.lease>`).
    """

    def __init__(
        self,
        registry: Registry,
        *,
        resource: str,
        resource_id: bytes,
        token: int,
        holder: str,
        expires_at: int,
        ttl: int,
        previous_token: int,
        reason: AcquireReason,
        tx_hash: str,
        block_number: int,
        workset: str | None = None,
        item: str | None = None,
    ):
        self.registry = registry
        self.resource = resource
        self.resource_id = resource_id
        self.token = token
        self.holder = holder
        self.expires_at = expires_at
        self.ttl = ttl
        self.previous_token = previous_token
        self.reason = reason
        self.tx_hash = tx_hash
        self.block_number = block_number
        #: For a claimed work item (:meth:`Registry.claim <chainfence.Registry.claim>`): its set and
        #: name (``resource`` reads ``"workset/item"``, for display; ``resource_id`` is the item's id).
        self.workset = workset
        self.item = item
        self.released = False

    def renew(self, ttl: int | None = None, *, progress: Any = None) -> Lease:
        """Extend this lease to ``now + ttl`` (default: the ttl it was acquired with).

        ``progress`` reports how far the work has come (bytes of 1 to 32, an
        int counter, or a str, hashed; see :meth:`Registry.renew
        <chainfence.Registry.renew>`): a watchdog reading the markers tells a
        holder that renews but is stuck from one that advances.

        Raises :class:`~chainfence.errors.LeaseExpired` once it has expired
        (acquire again: you get a new token), :class:`~chainfence.errors.StaleToken`
        if someone acquired it since, :class:`~chainfence.errors.LeaseReleased`
        after :meth:`release`.
        """
        ttl = self.ttl if ttl is None else ttl
        self.expires_at = self.registry._renew(self.resource, self.resource_id, self.token, ttl, progress, None)
        self.ttl = ttl
        return self

    def release(self) -> None:
        """End this lease now. Never frees a newer lease: that would need its token."""
        self.registry._release(self.resource, self.resource_id, self.token, None)
        self.released = True

    def complete(self, result: bytes) -> bytes:
        """Record ``result`` (or its 32-byte digest) for this token, only while it is current.

        "Complete this job only if the epoch still matches": a holder that
        lost its lease is refused. Returns the recorded digest.

        For a claimed work item (:meth:`Registry.claim
        <chainfence.Registry.claim>`) it also ends the lease and marks the
        item done for good: no claim hands it out again, and a claimant that
        was superseded is refused (:class:`~chainfence.errors.StaleToken`,
        :class:`~chainfence.errors.LeaseExpired`, ...) and completes nothing.
        """
        return self.registry._complete(self.resource, self.resource_id, self.token, result, None)

    def sign(
        self, payload: bytes, *, action: str, audience: str, key: Any = None, valid_for: int = 60
    ) -> FencedRequest:
        """A :class:`~chainfence.FencedRequest` for ``payload``, signed as this lease's holder.

        ``action`` is what the request does (an HTTP request's
        :func:`~chainfence.fenced_requests.http_action`, or an application's
        action name) and ``audience`` the service it is for: the request is
        worthless for any other. ``key`` defaults to the holder's key on the
        chain; for a contract holder (ERC-1271), pass the key the contract
        accepts. The request is valid for ``valid_for`` seconds of the
        verifier's clock.
        """
        from .fenced_requests import FencedRequest

        if key is None:
            key = self.registry.chain.key_of(self.holder)
        return FencedRequest.sign(
            self.registry.eip712_domain(),
            resource=self.resource,
            token=self.token,
            holder=self.holder,
            action=action,
            audience=audience,
            payload=payload,
            key=key,
            valid_for=valid_for,
        )

    def is_current(self) -> bool:
        """Whether the chain still considers this token current (live, not superseded)."""
        return self.registry.is_current(self.resource, self.token)

    # Context manager: release on exit, like redis-py's Lock.

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.released:
            return
        try:
            self.release()
        except ChainfenceError as release_error:
            if exc is None:
                # The body finished but the lease did not survive it: its
                # writes may have been fenced off. Say so.
                raise
            # Do not mask the body's own exception; record why release failed.
            logger.warning(
                "release after error failed resource=%s token=%d: %s", self.resource, self.token, release_error
            )
            exc.add_note(f"chainfence: releasing {self.resource!r} token {self.token} also failed: {release_error}")

    def __repr__(self) -> str:
        state = " released" if self.released else ""
        return (
            f"<Lease {self.resource!r} token={self.token} holder={self.holder} "
            f"expires_at={self.expires_at}{state}>"
        )
