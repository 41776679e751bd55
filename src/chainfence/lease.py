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
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ChainfenceError, InvalidInput, LeaseLost
from .keepalive import DEFAULT_BLOCK_TIME_MARGIN, DEFAULT_LATENCY_MARGIN, KeepAliveCore, Keeper

if TYPE_CHECKING:
    from .fenced_requests import FencedRequest
    from .registry import Registry

logger = logging.getLogger(__name__)

__all__ = ["AcquireReason", "Lease", "LeaseInfo", "LeaseSet", "LeaseStatus"]


class LeaseStatus(enum.IntEnum):
    """State of a resource's latest lease (``IFencingRegistry.LeaseStatus``)."""

    UNHELD = 0
    LIVE = 1
    EXPIRED = 2
    RELEASED = 3
    #: A claimed work item its claimant completed: never claimed again.
    DONE = 4
    #: The namespace's admin revoked it (:meth:`Registry.revoke <chainfence.Registry.revoke>`).
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
        # time.monotonic() when the acquisition (or the last confirmed renewal) was sent, if this
        # process sent it: where the local safe deadline counts from.
        self._sent_at: float | None = None
        self._lost: LeaseLost | None = None
        self._keeper: Keeper | None = None

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
        sent = time.monotonic()
        self._renewed(ttl, sent, self.registry._renew(self.resource, self.resource_id, self.token, ttl, progress, None))
        return self

    def _renewed(self, ttl: int, sent: float, expires_at: int) -> None:
        """A renewal sent at ``sent`` (monotonic) was confirmed (shared with the asyncio lease)."""
        self.expires_at = expires_at
        self.ttl = ttl
        self._sent_at = sent

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

    def keep(
        self,
        *,
        on_lost: Callable[[LeaseLost], Any] | None = None,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        clock: Callable[[], float] = time.monotonic,
        since: float | None = None,
    ) -> _Keeping:
        """``with lease.keep():`` renew in the background, and fail closed when renewals stop.

        Renews every ``interval`` seconds (default: half the ttl) and keeps a
        local safe deadline: the time the last confirmed renewal (or the
        acquisition) was sent, plus the ttl, minus ``latency_margin`` and
        ``block_time_margin`` (see :mod:`chainfence.keepalive`). Call
        :meth:`check` before each step of the work. When no renewal was
        confirmed by the deadline, or a renewal finds the lease superseded,
        expired or released, ``on_lost(error)`` runs (in the renewer thread),
        :meth:`check` raises :class:`~chainfence.errors.LeaseLost`, and so does
        leaving the ``with`` block. After the block no renewal is ever sent.
        Renewals that run late log a WARNING. It does not release the lease:
        ``with registry.acquire(...) as lease, lease.keep():`` does both.

        ``clock`` is a monotonic clock in seconds (tests inject one);
        ``since`` its reading when the acquisition or last renewal was sent
        (default: the time this lease recorded, carried over to ``clock``).
        """
        core = self._keep_core(
            on_lost=on_lost, interval=interval, latency_margin=latency_margin, block_time_margin=block_time_margin,
            clock=clock, since=since,
        )  # fmt: skip
        return _Keeping(self, Keeper(self, core, ttl=self.ttl, clock=clock, on_lost=on_lost))

    def _keep_core(
        self, *, on_lost: Any, interval: float | None, latency_margin: float, block_time_margin: float,
        clock: Any, since: float | None,
    ) -> KeepAliveCore:  # fmt: skip
        """The keep-alive's core for :meth:`keep` (and the asyncio runner's), its arguments checked."""
        if on_lost is not None and not callable(on_lost):
            raise InvalidInput(f"on_lost must be callable, got {on_lost!r}")
        if not callable(clock):
            raise InvalidInput(f"clock must be callable, got {clock!r}")
        if since is None:
            if self._sent_at is None:
                raise InvalidInput(
                    f"this process did not send the acquisition of token {self.token} on {self.resource!r}: its "
                    "send time, where the safe deadline counts from, is unknown; renew() it first or pass since="
                )
            since = self._sent_at if clock is time.monotonic else clock() - (time.monotonic() - self._sent_at)
        return KeepAliveCore(
            self.ttl, since, interval=interval, latency_margin=latency_margin, block_time_margin=block_time_margin
        )

    @property
    def keeper(self) -> Keeper | None:
        """The running keep-alive (inside ``with lease.keep():``), else None."""
        return self._keeper

    def safe_remaining(self) -> float:
        """Seconds left before the local safe deadline (0 once lost, released, or if unknown).

        Inside :meth:`keep`, from the keep-alive's clock and margins; outside,
        from the last confirmed send of this process with the default margins.
        """
        if self._keeper is not None:
            return self._keeper.safe_remaining()
        if self._lost is not None or self.released or self._sent_at is None:
            return 0.0
        window = self.ttl - DEFAULT_LATENCY_MARGIN - DEFAULT_BLOCK_TIME_MARGIN
        return max(0.0, self._sent_at + window - time.monotonic())

    def check(self) -> None:
        """Raise :class:`~chainfence.errors.LeaseLost` unless the lease can still be trusted to be held.

        Local only (no chain call): the safe deadline has not passed and no
        renewal found the lease gone. Call it before each step of the work.
        """
        if self._keeper is not None:
            self._keeper.check()
            return
        if self._lost is not None:
            lost = LeaseLost(resource=self.resource, token=self.token, why=self._lost.why, detail=self._lost.detail)
            raise lost from self._lost.__cause__
        if self.released:
            raise LeaseLost(resource=self.resource, token=self.token, why="released", detail="released by this process")
        if self.safe_remaining() <= 0:
            detail = "the acquisition's send time is unknown" if self._sent_at is None else "past the local safe deadline"
            raise LeaseLost(resource=self.resource, token=self.token, why="deadline", detail=detail)

    def is_current(self) -> bool:
        """Whether the chain still considers this token current (live, not superseded)."""
        # By id: a claimed work item's id is not the hash of its display name.
        registry = self.registry
        return registry.chain._run(registry._is_current(self.resource, self.token, resource_id=self.resource_id))

    # Context manager: release on exit, like redis-py's Lock.

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.released:
            return
        try:
            self.release()
        except ChainfenceError as release_error:
            self._release_failed(release_error, exc)

    def _release_failed(self, release_error: ChainfenceError, exc: BaseException | None) -> None:
        """Leaving the ``with`` block: the release failed (shared with the asyncio lease)."""
        if exc is None:
            # The body finished but the lease did not survive it: its
            # writes may have been fenced off. Say so.
            raise release_error
        # Do not mask the body's own exception; record why release failed.
        logger.warning("release after error failed resource=%s token=%d: %s", self.resource, self.token, release_error)
        exc.add_note(f"chainfence: releasing {self.resource!r} token {self.token} also failed: {release_error}")

    def __repr__(self) -> str:
        state = " released" if self.released else (f" lost({self._lost.why})" if self._lost is not None else "")
        return (
            f"<Lease {self.resource!r} token={self.token} holder={self.holder} "
            f"expires_at={self.expires_at}{state}>"
        )


class _Keeping:
    """The context manager :meth:`Lease.keep` returns: starts the renewer on entry, stops it on exit."""

    def __init__(self, lease: Lease, keeper: Keeper):
        self._lease = lease
        self._keeper = keeper
        self._entered = False

    def __enter__(self) -> Lease:
        self._enter()
        self._keeper.start()
        return self._lease

    def _enter(self) -> None:
        """Checks on entry (shared with the asyncio runner): not kept twice, not lost already."""
        lease = self._lease
        if self._entered or lease._keeper is not None:
            raise InvalidInput(f"token {lease.token} on {lease.resource!r} is already being kept alive")
        self._entered = True
        if lease._lost is not None or lease.released:
            lease.check()  # raises
        keeper = self._keeper
        why = keeper.core.check(keeper.clock())
        if why is not None:
            raise keeper._lost_error(why)
        lease._keeper = keeper

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        lease = self._lease
        try:
            lost = self._keeper.stop()
        finally:
            lease._keeper = None
        _raise_lost(lost, exc)


def _raise_lost(lost: LeaseLost | None, exc: BaseException | None) -> None:
    """Leaving a keep-alive: raise the loss, unless the body's own exception already says it."""
    if lost is None or isinstance(exc, LeaseLost):
        return
    if exc is None or isinstance(exc, Exception):
        raise lost  # the body's own exception (likely a consequence) is its __context__
    exc.add_note(f"chainfence: {lost}")  # KeyboardInterrupt, SystemExit: never masked


class LeaseSet:
    """Leases on several resources taken in one transaction, all or nothing
    (:meth:`Registry.acquire_many <chainfence.Registry.acquire_many>`): one token per resource,
    consecutive, in the order the names were given.

    :meth:`renew` and :meth:`release` act on the whole set in one transaction, all or
    nothing: if any lease of the set is no longer current (expired, superseded,
    revoked), nothing is renewed or released and the registry's refusal is raised.
    Used as a context manager it releases the set on exit.
    """

    def __init__(self, leases: list[Lease]):
        self.leases = list(leases)
        self.released = False

    @property
    def registry(self) -> Registry:
        return self.leases[0].registry

    @property
    def tokens(self) -> list[int]:
        return [lease.token for lease in self.leases]

    @property
    def resources(self) -> list[str]:
        return [lease.resource for lease in self.leases]

    @property
    def expires_at(self) -> int:
        return min(lease.expires_at for lease in self.leases)

    def __iter__(self):
        return iter(self.leases)

    def __len__(self) -> int:
        return len(self.leases)

    def __getitem__(self, index: int) -> Lease:
        return self.leases[index]

    def renew(self, ttl: int | None = None) -> LeaseSet:
        """Extend every lease of the set to ``now + ttl`` (default: the ttl they were acquired with)."""
        ttl = self.leases[0].ttl if ttl is None else ttl
        sent = time.monotonic()
        expires_at = self.registry._renew_many(self.leases, ttl)
        for lease in self.leases:
            lease._renewed(ttl, sent, expires_at)
        return self

    def release(self) -> None:
        """End every lease of the set now (only with their own tokens: never a newer lease)."""
        self.registry._release_many(self.leases)
        for lease in self.leases:
            lease.released = True
        self.released = True

    def __enter__(self) -> LeaseSet:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.released:
            return
        try:
            self.release()
        except ChainfenceError as release_error:
            if exc is None:
                raise
            logger.warning("releasing the lease set %s failed: %s", self.resources, release_error)

    def __repr__(self) -> str:
        return f"<LeaseSet {self.resources!r} tokens={self.tokens}>"
