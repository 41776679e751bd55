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

A :class:`Lease`'s operations are written once, as steps; ``AsyncLease`` (its
asyncio twin, :mod:`chainfence.aio`) runs the same steps over asyncio. Sets
of leases taken in one transaction are :mod:`chainfence.recipes.lease_set`'s; the
lease's state (:class:`LeaseStatus`, :class:`LeaseInfo`, :func:`judge`) is
re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from . import keepalive as _keepalive
from ._core import log as _log
from ._core import metrics as _metrics
from ._core.effects import Steps
from ._core.faces import AsyncDriver, AsyncFace, SyncFace, awaiting, drives, local, mirrored, twin_of
from ._node.events import RegistryLog
from ._sdk.lease_state import AcquireReason, LeaseInfo, LeaseStatus, judge
from .endings import End
from .errors import ChainfenceError, InvalidInput, LeaseLost
from .keepalive import (
    DEFAULT_BLOCK_TIME_MARGIN,
    DEFAULT_LATENCY_MARGIN,
    AsyncKeeper,
    AsyncKeeping,
    KeepAliveCore,
    Keeper,
    Keeping,
    keep_core,
)

if TYPE_CHECKING:  # signing a request imports them: a lease's own operations never load them (issue #19)
    from .fenced_requests import EIP712Domain, FencedRequest

logger = _log.get(__name__)

R = TypeVar("R")

__all__ = ["AcquireReason", "AsyncLease", "Lease", "LeaseInfo", "LeaseStatus", "judge"]


class LeaseRegistry(Protocol):
    """What a lease asks of the registry it was acquired from (:class:`~chainfence.Registry`): the steps
    of the contract calls on one token, and the chain they run on."""

    @property
    def chain(self) -> Any: ...

    def connect(self, account: Any) -> Any: ...

    def _drive(self, steps: Steps[R]) -> R: ...

    def _renew_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, ttl: int, progress: Any, confirmations: int | None
    ) -> Steps[int]: ...

    def _release_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, confirmations: int | None
    ) -> Steps[None]: ...

    def _complete_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, result: bytes, confirmations: int | None
    ) -> Steps[bytes]: ...

    def _token_is_current_steps(
        self, resource: str, token: int, *, block: str | int | None = None, resource_id: bytes | None = None
    ) -> Steps[bool]: ...

    def _successor_end_steps(self, resource_id: bytes, token: int, from_block: int) -> Steps[End]: ...

    def _eip712_domain_steps(self) -> Steps[EIP712Domain]: ...


class Lease(SyncFace):
    """A lease you acquired: ``resource``, ``token``, ``holder``, ``expires_at``.

    Returned by :meth:`Registry.acquire <chainfence.Registry.acquire>`.
    ``renew()`` and ``release()`` act on exactly this token: they never touch
    a newer lease of the same resource. Used as a context manager it releases
    on exit: ``with registry.acquire(name, ttl) as lease:``.
    """

    def __init__(
        self,
        registry: Any,
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
        #: The :class:`~chainfence.Registry` it was acquired from (sending as its holder, when the chain holds its key).
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
        #: For a claimed work item (:meth:`Workset.claim <chainfence.claims.Workset.claim>`): its set and
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
        #: What this lease's operations go through when not straight to its registry: the
        #: :class:`~chainfence.batching.Batcher` that acquired it (its renewals and release share
        #: transactions with other agents'; everything else is the registry's).
        self._via: LeaseRegistry | None = None

    @classmethod
    def _from_event(
        cls,
        registry: LeaseRegistry,
        event: RegistryLog,
        receipt: Any,
        *,
        resource: str,
        ttl: int,
        workset: str | None = None,
        item: str | None = None,
    ) -> Lease:
        """The lease a ``LeaseAcquired`` ``event`` of ``receipt`` records (every acquisition, claim, grant
        and set member is built here), held through ``registry`` sending as its holder when the chain
        holds the holder's key."""
        holder = event.holder
        assert holder is not None and event.token is not None and event.expires_at is not None
        if holder == getattr(registry, "sender", None) or holder not in registry.chain.accounts:
            owner = registry  # already sending as the holder (every acquisition of one's own), or cannot
        else:
            owner = registry.connect(holder)
        return cls(
            owner,
            resource=resource,
            resource_id=event.resource_id,
            token=event.token,
            holder=holder,
            expires_at=event.expires_at,
            ttl=ttl,
            previous_token=event.previous_token or 0,
            reason=AcquireReason(cast(int, event.reason)),
            tx_hash=event.tx_hash,  # the receipt's: the event was logged by it
            block_number=event.block_number,
            workset=workset,
            item=item,
        )

    @property
    def _issuer(self) -> LeaseRegistry:
        return self.registry if self._via is None else self._via

    def _drive(self, steps: Steps[R]) -> R:
        return self._issuer._drive(steps)

    # -- operations (steps, and the methods derived from them) --------------------------------

    def _renew_steps(self, ttl: int | None = None, *, progress: Any = None) -> Steps[Lease]:
        """The steps of :meth:`renew`."""
        ttl = self.ttl if ttl is None else ttl
        handle, sent = self._renewing(ttl)
        try:
            expires_at = yield from self._issuer._renew_by_id_steps(
                self.resource, self.resource_id, self.token, ttl, progress, None
            )
        except BaseException as error:
            if handle is not None and self._keeper is not None:
                self._keeper.holder_renewal_failed(handle, error)
            raise
        self.expires_at, self.ttl, self._sent_at = expires_at, ttl, sent
        if handle is not None and self._keeper is not None:
            self._keeper.holder_renewed(handle)  # the keep-alive follows it: its ttl, window and interval
        return self

    @drives(_renew_steps)
    def renew(self, ttl: int | None = None, *, progress: Any = None) -> Lease:
        """Extend this lease to ``now + ttl`` (default: the ttl it was acquired with).

        ``progress`` reports how far the work has come (bytes of 1 to 32, an
        int counter, or a str, hashed; see :meth:`Registry.renew
        <chainfence.Registry.renew>`): a watchdog reading the markers tells a
        holder that renews but is stuck from one that advances. Inside
        ``keep()`` the keep-alive follows the new ttl.

        Raises :class:`~chainfence.errors.LeaseExpired` once it has expired
        (acquire again: you get a new token), :class:`~chainfence.errors.StaleToken`
        if someone acquired it since, :class:`~chainfence.errors.LeaseReleased`
        after :meth:`release`.
        """
        return self._drive(self._renew_steps(ttl, progress=progress))

    def _renewing(self, ttl: Any) -> tuple[int | None, float]:
        """A renewal for ``ttl`` is about to be sent: its handle in the running keep-alive (None outside
        ``keep()``) and its send time on the lease clock.

        Inside ``keep()`` a ttl the keep-alive could not keep is InvalidInput (nothing sent); a member of
        a kept :class:`~chainfence.LeaseSet` is renewed with the set, never alone (its expiry would part
        from the set's).
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

    def _release_steps(self) -> Steps[None]:
        """The steps of :meth:`release`."""
        keeper = self._closing()
        try:
            yield from self._issuer._release_by_id_steps(self.resource, self.resource_id, self.token, None)
        except BaseException as error:
            self._closed(keeper, End.RELEASED, error)
            raise
        self.released = True
        self._closed(keeper, End.RELEASED)

    @drives(_release_steps)
    def release(self) -> None:
        """End this lease now. Never frees a newer lease: that would need its token.

        Inside ``keep()`` the keep-alive stops renewing first, and ends quietly (the lease was
        released, not lost): ``check()`` then raises ``LeaseLost`` with ``why="released"``.
        """
        self._drive(self._release_steps())

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

    def _complete_steps(self, result: bytes) -> Steps[bytes]:
        """The steps of :meth:`complete`."""
        keeper = self._closing() if self.item is not None else None
        try:
            digest = yield from self._issuer._complete_by_id_steps(
                self.resource, self.resource_id, self.token, result, None
            )
        except BaseException as error:
            self._closed(keeper, End.COMPLETED, error)
            raise
        if self.item is not None:
            self.completed = True  # a claimed item's lease ended with it
            _metrics.lease_ended("completed")
        self._closed(keeper, End.COMPLETED)
        return digest

    @drives(_complete_steps)
    def complete(self, result: bytes) -> bytes:
        """Record ``result`` (or its 32-byte digest) for this token, only while it is current.

        "Complete this job only if the epoch still matches": a holder that
        lost its lease is refused. Returns the recorded digest.

        For a claimed work item (:meth:`Workset.claim
        <chainfence.claims.Workset.claim>`) it also ends the lease and marks the
        item done for good: no claim hands it out again, and a claimant that
        was superseded is refused (:class:`~chainfence.errors.StaleToken`,
        :class:`~chainfence.errors.LeaseExpired`, ...) and completes nothing.
        Then ``completed`` is True, ``check()`` raises ``LeaseLost`` with
        ``why="completed"``, leaving ``with lease:`` releases nothing, and a
        ``keep()`` around it ends quietly (no renewal is sent after it).
        """
        return self._drive(self._complete_steps(result))

    def _sign_steps(
        self, payload: bytes, *, action: str, audience: str, key: Any = None, valid_for: int = 60
    ) -> Steps[FencedRequest]:
        """The steps of :meth:`sign`."""
        if key is None:
            key = self._issuer.chain.key_of(self.holder)
        domain = yield from self._issuer._eip712_domain_steps()
        from .fenced_requests import FencedRequest

        return FencedRequest.sign(
            domain,
            resource=self.resource,
            token=self.token,
            holder=self.holder,
            action=action,
            audience=audience,
            payload=payload,
            key=key,
            valid_for=valid_for,
        )

    @drives(_sign_steps)
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
        verifier's clock. Reads the registry's EIP-712 domain once (then
        signs locally).
        """
        return self._drive(self._sign_steps(payload, action=action, audience=audience, key=key, valid_for=valid_for))

    def _is_current_steps(self) -> Steps[bool]:
        """The steps of :meth:`is_current`."""
        # By id: a claimed work item's id is not the hash of its display name.
        return (
            yield from self._issuer._token_is_current_steps(self.resource, self.token, resource_id=self.resource_id)
        )

    @drives(_is_current_steps)
    def is_current(self) -> bool:
        """Whether the chain still considers this token current (live, not superseded)."""
        return self._drive(self._is_current_steps())

    # -- the keep-alive ---------------------------------------------------------------------------

    def keep(
        self,
        *,
        on_lost: Callable[[LeaseLost], Any] | None = None,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        clock: Callable[[], float] | None = None,
        since: float | None = None,
    ) -> Keeping:
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
        return Keeping(self, Keeper(self, core, clock=clock, on_lost=on_lost))

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
        """The keep-alive's core for :meth:`keep` (both runners'), its arguments checked."""
        return keep_core(
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

    # What a keep-alive (keepalive.Keeper, AsyncKeeper) asks of what it keeps: a lease here, a LeaseSet there.

    @property
    def _kept_name(self) -> str:
        return self.resource

    @property
    def _kept_token(self) -> str:
        return str(self.token)

    def _kept_renew_steps(self, ttl: Any) -> Steps[int]:
        # By id, not by name: a claimed work item's id is not the hash of its name.
        return self._issuer._renew_by_id_steps(self.resource, self.resource_id, self.token, ttl, None, None)

    def _kept_member_of(self, error: BaseException) -> None:
        return None

    def _kept_successor_steps(self) -> Steps[End]:
        """How this lease ended, read from its successor's acquisition (an :class:`End`)."""
        return self._issuer._successor_end_steps(self.resource_id, self.token, self.block_number)

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


class AsyncLease(AsyncFace[Lease], core=Lease):
    """A lease acquired through an :class:`~chainfence.aio.AsyncRegistry`: the :class:`Lease`'s fields
    (``resource``, ``token``, ``holder``, ``expires_at``, ...) and its operations, awaited: the same
    steps, run over asyncio.

    ``async with lease:`` releases on exit, as ``with lease:`` does; ``async with lease.keep():`` keeps
    it alive in a task and cancels the task that entered the block on a loss.
    """

    def __init__(self, registry: Any, lease: Lease):
        #: The :class:`~chainfence.aio.AsyncRegistry` it is held through.
        self.registry = registry
        #: The lease's state (token, expiry, last confirmed send, loss): shared with the keep-alive core.
        self.lease = lease

    @property
    def _core(self) -> Lease:
        return self.lease

    @property
    def _driver(self) -> AsyncDriver:
        return self.registry.chain  # type: ignore[no-any-return]

    @classmethod
    def _from_core(cls, core: Lease, driver: AsyncDriver) -> AsyncLease:
        return cls(twin_of(core.registry, driver), core)

    resource = mirrored("resource")
    resource_id = mirrored("resource_id")
    token = mirrored("token")
    holder = mirrored("holder")
    expires_at = mirrored("expires_at")
    ttl = mirrored("ttl")
    previous_token = mirrored("previous_token")
    reason = mirrored("reason")
    tx_hash = mirrored("tx_hash")
    block_number = mirrored("block_number")
    workset = mirrored("workset")
    item = mirrored("item")
    released = mirrored("released")
    completed = mirrored("completed")
    keeper = mirrored("keeper")

    renew = awaiting(Lease.renew, "self")
    release = awaiting(Lease.release)
    complete = awaiting(Lease.complete)
    sign = awaiting(Lease.sign)
    is_current = awaiting(Lease.is_current)
    check = local(Lease.check)
    safe_remaining = local(Lease.safe_remaining)

    def keep(
        self,
        *,
        on_lost: Callable[[LeaseLost], Any] | None = None,
        interval: float | None = None,
        latency_margin: float = DEFAULT_LATENCY_MARGIN,
        block_time_margin: float = DEFAULT_BLOCK_TIME_MARGIN,
        clock: Callable[[], float] | None = None,
        since: float | None = None,
    ) -> AsyncKeeping:
        """``async with lease.keep():`` :meth:`Lease.keep` in a task.

        On a loss, ``on_lost(error)`` runs (in the keep-alive's task), the
        task that entered the block is cancelled, and leaving the block
        raises :class:`~chainfence.errors.LeaseLost` whose ``why`` names the
        end, as the sync keep-alive's does. ``clock`` defaults to
        :data:`chainfence.keepalive.lease_clock` (it counts a suspend).
        """
        lease = self.lease
        clock = _keepalive.lease_clock if clock is None else clock
        core = lease._keep_core(
            on_lost=on_lost,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            since=since,
        )
        keeper = AsyncKeeper(lease, core, drive=self._drive, clock=clock, on_lost=on_lost)
        return AsyncKeeping(lease, keeper, face=self)

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
