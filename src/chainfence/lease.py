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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import keepalive as _keepalive
from .endings import End, LocalEnd, declare
from .errors import ChainfenceError, InvalidInput, LeaseLost, LeaseSetLost
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


def judge(info: LeaseInfo, token: int, *, resource: str | None, resource_id: bytes) -> None:
    """Return if ``token`` is the live token of the lease ``info`` describes; else raise the
    :class:`~chainfence.errors.TokenNotCurrent` subclass that says how it is not (never issued,
    superseded, completed, released, revoked, expired). The one verdict: strict views
    (``Registry.check_current``) and the proven mode (:mod:`chainfence.proofs`) both call it."""
    from .errors import LeaseCompleted, LeaseExpired, LeaseReleased, LeaseRevoked, StaleToken, UnknownToken

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
        #: name (``resource`` is the item's name ``"workset»item"``, which every call taking a name
        #: accepts; ``resource_id`` is the item's id).
        self.workset = workset
        self.item = item
        self.released = False
        #: A claimed work item this process completed (the lease ended with it).
        self.completed = False
        # keepalive.lease_clock() (CLOCK_BOOTTIME: it counts a suspend) when the acquisition (or the
        # last confirmed renewal) was sent, if this process sent it: where the local safe deadline counts from.
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
        handle, sent = self._renewing(ttl)
        try:
            expires_at = self.registry._renew(self.resource, self.resource_id, self.token, ttl, progress, None)
        except BaseException as error:
            self._renew_failed(handle, error)
            raise
        self._renewed(ttl, sent, expires_at, handle)
        return self

    def _renewing(self, ttl: Any) -> tuple[int | None, float]:
        """A renewal for ``ttl`` is about to be sent (shared with the asyncio lease): its handle in the
        running keep-alive (None outside ``keep()``) and its send time on the lease clock.

        Inside ``keep()`` a ttl the keep-alive could not keep is InvalidInput (nothing sent); a member of
        a kept :class:`LeaseSet` is renewed with the set, never alone (its expiry would part from the set's).
        """
        keeper = self._keeper
        if keeper is None:
            return None, _keepalive.lease_clock()
        if keeper.lease is not self:
            raise InvalidInput(
                f"{self.resource!r} is kept alive as a member of its lease set: renew the set (set.renew()), "
                "not one member: their shared deadline counts on one expiry"
            )
        return keeper.holder_renewing(ttl)

    def _renew_failed(self, handle: int | None, error: BaseException) -> None:
        if handle is not None and self._keeper is not None:
            self._keeper.holder_renewal_failed(handle, error)

    def _renewed(self, ttl: int, sent: float, expires_at: int, handle: int | None = None) -> None:
        """A renewal sent at ``sent`` (lease clock) was confirmed (shared with the asyncio lease); inside
        ``keep()`` the keep-alive follows it (its ttl, window and interval are the renewal's)."""
        self.expires_at = expires_at
        self.ttl = ttl
        self._sent_at = sent
        if handle is not None and self._keeper is not None:
            self._keeper.holder_renewed(handle)

    def release(self) -> None:
        """End this lease now. Never frees a newer lease: that would need its token.

        Inside ``keep()`` the keep-alive stops renewing first, and ends quietly (the lease was
        released, not lost): ``check()`` then raises ``LeaseLost`` with ``why="released"``.
        """
        keeper = self._closing()
        try:
            self.registry._release(self.resource, self.resource_id, self.token, None)
        except BaseException as error:
            self._closed(keeper, End.RELEASED, error)
            raise
        self.released = True
        self._closed(keeper, End.RELEASED)

    def _closing(self) -> Keeper | None:
        """Before a release or a completion of this lease: its own keep-alive renews no more."""
        keeper = self._keeper
        if keeper is None or keeper.lease is not self:
            return None
        keeper.holder_closing()
        return keeper

    def _closed(self, keeper: Keeper | None, end: End, error: BaseException | None = None) -> None:
        if keeper is not None:
            keeper.holder_closed(end.value, error)

    def complete(self, result: bytes) -> bytes:
        """Record ``result`` (or its 32-byte digest) for this token, only while it is current.

        "Complete this job only if the epoch still matches": a holder that
        lost its lease is refused. Returns the recorded digest.

        For a claimed work item (:meth:`Registry.claim
        <chainfence.Registry.claim>`) it also ends the lease and marks the
        item done for good: no claim hands it out again, and a claimant that
        was superseded is refused (:class:`~chainfence.errors.StaleToken`,
        :class:`~chainfence.errors.LeaseExpired`, ...) and completes nothing.
        Then ``completed`` is True, ``check()`` raises ``LeaseLost`` with
        ``why="completed"``, leaving ``with lease:`` releases nothing, and a
        ``keep()`` around it ends quietly (no renewal is sent after it).
        """
        keeper = self._closing() if self.item is not None else None
        try:
            digest = self.registry._complete(self.resource, self.resource_id, self.token, result, None)
        except BaseException as error:
            self._closed(keeper, End.COMPLETED, error)
            raise
        self._completed()
        self._closed(keeper, End.COMPLETED)
        return digest

    def _completed(self) -> None:
        """A completion was confirmed (shared with the asyncio lease): a claimed item's lease ended with it."""
        if self.item is not None:
            self.completed = True

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
        clock: Callable[[], float] | None = None,
        since: float | None = None,
    ) -> _Keeping:
        """``with lease.keep():`` renew in the background, and fail closed when renewals stop.

        Renews every ``interval`` seconds (default: half the ttl) and keeps a
        local safe deadline: the time the last confirmed renewal (or the
        acquisition) was sent, plus the ttl, minus ``latency_margin`` and
        ``block_time_margin`` (see :mod:`chainfence.keepalive`). Call
        :meth:`check` before each step of the work. When no renewal was
        confirmed by the deadline, or a renewal finds the lease ended
        (expired, released, completed, superseded, revoked, granted, rolled
        back: :mod:`chainfence.endings`), ``on_lost(error)`` runs once (in the
        renewer thread), :meth:`check` raises :class:`~chainfence.errors.LeaseLost`
        whose ``why`` names the end, and so does leaving the ``with`` block.
        A renewal refused for a higher token reads the successor's acquisition
        to tell a grant, a revoke, an expiry or a release from the holder's
        own reacquisition (``superseded``). After the block no renewal is ever
        sent. Renewals that run late log a WARNING. It does not release the
        lease: ``with registry.acquire(...) as lease, lease.keep():`` does both.
        Inside the block, ``lease.renew(ttl=...)`` moves the keep-alive to
        that ttl (deadline, interval, later renewals), and ``lease.release()``
        or, for a claimed item, ``lease.complete(...)`` ends it quietly.

        ``clock`` is the clock the deadline counts on, in seconds (default
        :data:`chainfence.keepalive.lease_clock`: CLOCK_BOOTTIME on Linux,
        which keeps counting while the machine is suspended; tests inject
        theirs); ``since`` its reading when the acquisition or last renewal
        was sent (default: the time this lease recorded, carried over to
        ``clock``).
        """
        clock = _keepalive.lease_clock if clock is None else clock
        core = self._keep_core(
            on_lost=on_lost,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            since=since,
        )
        return _Keeping(self, Keeper(self, core, clock=clock, on_lost=on_lost))

    def _keep_core(
        self,
        *,
        on_lost: Any,
        interval: float | None,
        latency_margin: float,
        block_time_margin: float,
        clock: Any,
        since: float | None,
    ) -> KeepAliveCore:
        """The keep-alive's core for :meth:`keep` (and the asyncio runner's), its arguments checked."""
        return _keep_core(
            f"token {self.token} on {self.resource!r}",
            self.ttl,
            self._sent_at,
            on_lost=on_lost,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            since=since,
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
        if self._lost is not None or self.released or self.completed or self._sent_at is None:
            return 0.0
        window = self.ttl - DEFAULT_LATENCY_MARGIN - DEFAULT_BLOCK_TIME_MARGIN
        return max(0.0, self._sent_at + window - _keepalive.lease_clock())

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
        if self.released or self.completed:
            why = End.RELEASED if self.released else End.COMPLETED
            raise LeaseLost(resource=self.resource, token=self.token, why=why.value, detail=f"{why} by this process")
        if self.safe_remaining() <= 0:
            detail = (
                "the acquisition's send time is unknown" if self._sent_at is None else "past the local safe deadline"
            )
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
        if self.released or self.completed:
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

    # What a keep-alive (keepalive.Keeper) asks of what it keeps: a lease here, a LeaseSet below.

    @property
    def _kept_name(self) -> str:
        return self.resource

    @property
    def _kept_token(self) -> str:
        return str(self.token)

    def _kept_renew(self, ttl: Any) -> int:
        # By id, not by name: a claimed work item's id is not the hash of its name.
        return self.registry._renew(self.resource, self.resource_id, self.token, ttl, None, None)

    def _kept_member_of(self, error: BaseException) -> None:
        return None

    def _kept_successor_steps(self) -> Any:
        """Steps reading how this lease ended from its successor's acquisition (an :class:`End`)."""
        return self.registry._successor_end_steps(self.resource_id, self.token, self.block_number)

    def _kept_renewed(self, expires_at: int, sent: float, ttl: Any) -> None:
        self.expires_at, self._sent_at, self.ttl = expires_at, sent, ttl

    def _kept_lost(self, error: LeaseLost, member: Any) -> None:
        self._lost = error

    def _kept_loss(self, why: str, detail: str, cause: BaseException | None, member: Any) -> LeaseLost:
        error = LeaseLost(resource=self.resource, token=self.token, why=why, detail=detail)
        error.__cause__ = cause
        return error

    def _attach(self, keeper: Keeper | None) -> None:
        self._keeper = keeper

    def __repr__(self) -> str:
        state = (
            " released"
            if self.released
            else " completed"
            if self.completed
            else (f" lost({self._lost.why})" if self._lost is not None else "")
        )
        return f"<Lease {self.resource!r} token={self.token} holder={self.holder} expires_at={self.expires_at}{state}>"


def _keep_core(
    what: str,
    ttl: Any,
    sent_at: float | None,
    *,
    on_lost: Any,
    interval: float | None,
    latency_margin: float,
    block_time_margin: float,
    clock: Any,
    since: float | None,
) -> KeepAliveCore:
    """A keep-alive's core for a lease or a set sent at ``sent_at`` (lease clock), its arguments checked."""
    if on_lost is not None and not callable(on_lost):
        raise InvalidInput(f"on_lost must be callable, got {on_lost!r}")
    if not callable(clock):
        raise InvalidInput(f"clock must be callable, got {clock!r}")
    if since is None:
        if sent_at is None:
            raise InvalidInput(
                f"this process did not send the acquisition of {what}: its send time, where the safe deadline "
                "counts from, is unknown; renew() it first or pass since="
            )
        lease_clock = _keepalive.lease_clock
        since = sent_at if clock is lease_clock else clock() - (lease_clock() - sent_at)
    return KeepAliveCore(
        ttl, since, interval=interval, latency_margin=latency_margin, block_time_margin=block_time_margin
    )


class _Keeping:
    """The context manager :meth:`Lease.keep` returns: starts the renewer on entry, stops it on exit."""

    def __init__(self, lease: Lease, keeper: Keeper):
        self._lease = lease
        self._keeper = keeper
        self._entered = False

    @property
    def keeper(self) -> Keeper:
        """The keep-alive this block runs, before it starts too (``chainfence lock`` hands its sentinel
        the safe deadline and sets :attr:`Keeper.on_deadline` before entering)."""
        return self._keeper

    def __enter__(self) -> Lease:
        self._enter()
        self._keeper.start()
        return self._lease

    def _enter(self) -> None:
        """Checks on entry (shared with the asyncio runner): not kept twice, not lost already."""
        lease = self._lease
        if self._entered or lease._keeper is not None:
            raise InvalidInput(f"{lease._kept_name!r} (token {lease._kept_token}) is already being kept alive")
        self._entered = True
        if lease._lost is not None or lease.released or getattr(lease, "completed", False):
            lease.check()  # raises
        keeper = self._keeper
        why = keeper.core.check(keeper.clock())
        if why is not None:
            raise keeper._lost_error(why)
        lease._attach(keeper)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        lease = self._lease
        try:
            lost = self._keeper.stop()
        finally:
            lease._attach(None)
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
    consecutive, in the order the names were given. Each member is a :class:`Lease`.

    :meth:`renew` acts on the whole set in one transaction, all or nothing:
    if any member is no longer current (expired, superseded, revoked), nothing
    is renewed and the registry's refusal (naming that member) is raised.
    :meth:`release` releases what it still can: the whole set in one
    transaction, or, when a member has ended, every member still live, and
    then raises :class:`~chainfence.errors.LeaseSetLost` saying which members
    ended and how. :meth:`keep` keeps the set alive on one shared deadline
    (one ``renewMany`` per interval); its loss names the member and the way.
    Used as a context manager it releases the set on exit.
    """

    def __init__(self, leases: list[Lease]):
        self.leases = list(leases)
        self.released = False
        self._lost: LeaseLost | None = None
        self._keeper: Keeper | None = None

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
        """Extend every lease of the set to ``now + ttl`` (default: the ttl they were acquired with).

        Inside :meth:`keep`, the keep-alive follows the new ttl.
        """
        ttl = self.leases[0].ttl if ttl is None else ttl
        handle, sent = self._renewing(ttl)
        try:
            expires_at = self.registry._renew_many(self.leases, ttl)
        except BaseException as error:
            if handle is not None and self._keeper is not None:
                self._keeper.holder_renewal_failed(handle, error)
            raise
        self._renewed(ttl, sent, expires_at, handle)
        return self

    def _renewing(self, ttl: Any) -> tuple[int | None, float]:
        if self._keeper is None:
            return None, _keepalive.lease_clock()
        return self._keeper.holder_renewing(ttl)

    def _renewed(self, ttl: Any, sent: float, expires_at: int, handle: int | None) -> None:
        for lease in self.leases:
            lease.expires_at, lease.ttl, lease._sent_at = expires_at, ttl, sent
        if handle is not None and self._keeper is not None:
            self._keeper.holder_renewed(handle)

    def release(self) -> None:
        """End every lease of the set that is still this holder's (only with their own tokens: never a newer lease).

        One ``releaseMany`` when the whole set is live. When a member has
        ended (expired, released elsewhere, revoked, granted away,
        superseded, rolled back), the registry refuses the whole transaction:
        then every member's state is read, the members still live are
        released in one transaction, and :class:`~chainfence.errors.LeaseSetLost`
        is raised: ``ended`` maps each ended member to how it ended,
        ``released`` names those released now. Members released are marked
        ``released``; ended ones raise ``LeaseLost`` (their end) on ``check()``.
        """
        self.registry.chain._run(self._release_steps(self.registry))

    def _release_steps(self, registry: Registry) -> Any:
        """:meth:`release` as steps (``registry``'s: the asyncio set runs them over its driver)."""
        keeper = self._keeper
        if keeper is not None:
            keeper.holder_closing()
        try:
            ended, released = yield from registry._release_what_remains_steps(self.leases)
        except BaseException as error:
            if keeper is not None:
                keeper.holder_closed(End.RELEASED.value, error)
            raise
        for lease in self.leases:
            if lease.resource in released:
                lease.released = True
        for lease, end in ended.items():
            lease._lost = LeaseLost(
                resource=lease.resource,
                token=lease.token,
                why=end.value,
                detail=f"found {end} when the set was released",
            )
        self.released = True
        if not ended:
            if keeper is not None:
                keeper.holder_closed(End.RELEASED.value)
            return
        first, end = next(iter(ended.items()))
        lost = LeaseSetLost(
            resource=first.resource,
            token=first.token,
            why=end.value,
            detail="the set's members "
            + ", ".join(f"{lease.resource!r} ({why})" for lease, why in ended.items())
            + " had ended; "
            + (f"released the others: {sorted(released)}" if released else "none was left to release"),
            ended={lease.resource: why.value for lease, why in ended.items()},
            released=tuple(released),
        )
        self._lost = lost
        if keeper is not None:
            keeper.holder_closed(End.RELEASED.value)
            keeper._member = first
        raise lost

    def keep(
        self,
        *,
        on_lost: Callable[[LeaseLost], Any] | None = None,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        clock: Callable[[], float] | None = None,
        since: float | None = None,
    ) -> _Keeping:
        """``with lease_set.keep():`` :meth:`Lease.keep` for the whole set, on one shared deadline.

        Renews every member in one ``renewMany`` per interval; the safe
        deadline counts from the last confirmed one's send. The registry
        refuses the whole renewal when one member has ended: the loss
        (``on_lost``, :meth:`check`, leaving the block) is a
        :class:`~chainfence.errors.LeaseSetLost` naming that member
        (``resource``, ``token``) and the way it ended (``why``, read as for a
        single lease). Leaving the block does not release the set: ``with
        registry.acquire_many(...) as leases, leases.keep():`` does both, and
        the release then releases the members still live.
        """
        clock = _keepalive.lease_clock if clock is None else clock
        sent = [lease._sent_at for lease in self.leases]
        core = _keep_core(
            f"the set {self.resources}",
            self.leases[0].ttl,
            None if None in sent else min(sent),  # type: ignore[type-var]
            on_lost=on_lost,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            since=since,
        )
        return _Keeping(self, Keeper(self, core, clock=clock, on_lost=on_lost))

    @property
    def keeper(self) -> Keeper | None:
        """The running keep-alive (inside ``with lease_set.keep():``), else None."""
        return self._keeper

    def check(self) -> None:
        """Raise :class:`~chainfence.errors.LeaseLost` unless every member can still be trusted to be held
        (local only, as :meth:`Lease.check`)."""
        if self._keeper is not None:
            self._keeper.check()
            return
        if self._lost is not None:
            raise self._kept_loss(self._lost.why, self._lost.detail, self._lost.__cause__, None, like=self._lost)
        for lease in self.leases:
            try:
                lease.check()
            except LeaseLost as lost:
                raise self._kept_loss(lost.why, lost.detail, lost.__cause__, lease) from lost.__cause__

    def safe_remaining(self) -> float:
        """Seconds left before the set's local safe deadline (the earliest of its members')."""
        if self._keeper is not None:
            return self._keeper.safe_remaining()
        if self._lost is not None:
            return 0.0
        return min(lease.safe_remaining() for lease in self.leases)

    # What the keep-alive asks of a set (see Lease).

    @property
    def _kept_name(self) -> str:
        return "+".join(self.resources)

    @property
    def _kept_token(self) -> str:
        return ",".join(str(token) for token in self.tokens)

    def _kept_renew(self, ttl: Any) -> int:
        return self.registry._renew_many(self.leases, ttl)

    def _kept_member_of(self, error: BaseException) -> Lease | None:
        resource_id = getattr(error, "resource_id", None)
        return next((lease for lease in self.leases if lease.resource_id == resource_id), None)

    def _kept_renewed(self, expires_at: int, sent: float, ttl: Any) -> None:
        for lease in self.leases:
            lease._kept_renewed(expires_at, sent, ttl)

    def _kept_lost(self, error: LeaseLost, member: Any) -> None:
        self._lost = error
        for lease in self.leases:
            lease._lost = error if lease is member or member is None else lease._lost

    def _kept_loss(
        self, why: str, detail: str, cause: BaseException | None, member: Any, *, like: LeaseLost | None = None
    ) -> LeaseSetLost:
        if like is not None and isinstance(like, LeaseSetLost):
            error = LeaseSetLost(
                resource=like.resource,
                token=like.token,
                why=why,
                detail=detail,
                ended=like.ended,
                released=like.released,
            )
        elif member is not None:
            error = LeaseSetLost(
                resource=member.resource, token=member.token, why=why, detail=detail, ended={member.resource: why}
            )
        else:
            first = self.leases[0]
            error = LeaseSetLost(
                resource=first.resource,
                token=first.token,
                why=why,
                detail=f"the set {self.resources}: {detail}" if detail else f"the set {self.resources}",
                ended={lease.resource: why for lease in self.leases},
            )
        error.__cause__ = cause
        return error

    def _attach(self, keeper: Keeper | None) -> None:
        self._keeper = keeper
        for lease in self.leases:
            lease._keeper = keeper

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
            exc.add_note(f"chainfence: releasing the lease set {self.resources} also failed: {release_error}")

    def __repr__(self) -> str:
        return f"<LeaseSet {self.resources!r} tokens={self.tokens}>"


# The keep-alive and what it does about every way a lease ends (chainfence.endings).

declare(
    "keep",
    __name__,
    {
        End.EXPIRED: "the renewal that finds it (LeaseExpired, or a successor acquired after the expiry) loses it: "
        "on_lost once, check() and leaving keep() raise LeaseLost(why='expired')",
        End.RELEASED: "released elsewhere: lost (why='released'); released by this process inside the block: "
        "the keep-alive ends quietly and check() raises LeaseLost(why='released')",
        End.COMPLETED: "a claimed item completed elsewhere: lost (why='completed'); completed by this process: "
        "the keep-alive ends quietly and check() raises LeaseLost(why='completed')",
        End.SUPERSEDED: "a higher token whose acquisition says reacquired (or cannot be read): lost (why='superseded')",
        End.REVOKED: "LeaseRevoked, or a successor acquired after the revoke: lost at once (why='revoked'), "
        "never retried",
        End.GRANTED: "a successor whose acquisition says granted: lost (why='granted')",
        End.ROLLED_BACK: "the registry no longer knows the token (or the SDK saw the chain lose history): "
        "lost (why='rolled_back')",
        LocalEnd.DEADLINE: "no renewal confirmed by the safe deadline on the lease clock (it counts a suspend): "
        "lost (why='deadline') while the lease may still be live on-chain",
        LocalEnd.ERROR: "the renewer failed with an error that is not the chain's: lost (why='error'), its cause kept",
    },
    holds=True,
    keeps_alive=True,
)

declare(
    "lease_set",
    __name__,
    {
        End.EXPIRED: "a member expired: the set's keep-alive loses the set naming it (why='expired'); release() "
        "releases the others and raises LeaseSetLost saying so",
        End.RELEASED: "a member released elsewhere: lost naming it (why='released'); release() releases the others",
        End.COMPLETED: "a set's members are not work items: completing one records a result and ends nothing "
        "(the keep-alive goes on)",
        End.SUPERSEDED: "a member reacquired: lost naming it (why='superseded'); release() releases the others",
        End.REVOKED: "a member revoked: lost naming it (why='revoked'), never retried; release() releases the others",
        End.GRANTED: "a member granted to another: lost naming it (why='granted'); release() releases the others",
        End.ROLLED_BACK: "a member the registry no longer knows: lost naming it (why='rolled_back')",
        LocalEnd.DEADLINE: "no renewMany confirmed by the shared safe deadline: the whole set is lost (why='deadline')",
        LocalEnd.ERROR: "the renewer failed with an error that is not the chain's: the whole set is lost (why='error')",
    },
    holds=True,
    keeps_alive=True,
)
