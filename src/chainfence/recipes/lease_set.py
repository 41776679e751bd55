"""Sets of leases: several resources taken in one transaction, all or nothing, and kept as one.

::

    with LeaseSet.acquire(registry, ["db/a", "db/b"], ttl=30) as leases, leases.keep():
        ...                                     # one renewMany per interval, one shared deadline

:class:`LeaseSet` (and its asyncio twin ``AsyncLeaseSet``: ``await AsyncLeaseSet.acquire(registry, ...)``)
takes the set, holds the members, each a :class:`~chainfence.Lease`, and renews and releases them
together: a recipe built on a registry's contract calls (``acquireMany``, ``renewMany``,
``releaseMany``), written as steps that both faces run. The registry never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

from .. import keepalive as _keepalive
from .._core import log as _log
from .._core import metrics as _metrics
from .._core.effects import Steps
from .._core.faces import AsyncDriver, AsyncFace, SyncFace, aconstructor, awaiting, drives, local, mirrored, twin_of
from .._node import events as _events
from .._node import sending as _sending
from .._sdk import names as _names
from .._sdk import validate as _validate
from .._sdk.contract import MAX_MANY, RegistryContract
from .._sdk.interrupted import settle_steps
from ..endings import End, LocalEnd, declare
from ..errors import (
    ChainError,
    ChainfenceError,
    DuplicateResource,
    InvalidClaimItems,
    LeaseError,
    LeaseLost,
    LeaseSetLost,
    NotAdmitted,
    NotHolder,
    TokenNotCurrent,
)
from ..keepalive import (
    DEFAULT_BLOCK_TIME_MARGIN,
    DEFAULT_LATENCY_MARGIN,
    AsyncKeeper,
    AsyncKeeping,
    KeepAliveCore,
    Keeper,
    Keeping,
    keep_core,
)
from ..lease import Lease

logger = _log.get(__name__)

R = TypeVar("R")

__all__ = ["AsyncLeaseSet", "LeaseSet"]


def _acquire_steps(
    cls: type[LeaseSet],
    registry: RegistryContract,
    resources: Sequence[str],
    ttl: int,
    *,
    confirmations: int | None = None,
) -> Steps[LeaseSet]:
    """:meth:`LeaseSet.acquire`'s steps: ``acquireMany`` as the registry's sender."""
    names, ttl, sender = _acquire_args(registry, resources, ttl)
    ttl = _validate.ttl(ttl, (yield from registry._max_ttl_steps()))
    data = registry._encode("acquireMany", [names, ttl])
    by_id = {_validate.resource_id(name): name for name in names}
    acquired: list[Lease] = []
    sent = _keepalive.lease_clock()  # where the set's keep-alive counts from: before the send
    try:
        try:
            receipt = yield from registry.chain._transact_steps(
                sender, registry.address, data, confirmations=confirmations
            )
        except (LeaseError, DuplicateResource) as refused:  # name the resource the registry refused
            refused_id = getattr(refused, "resource_id", None)
            if refused_id in by_id:
                refused.resource = by_id[refused_id]
            if isinstance(refused, NotAdmitted) and refused.resource is None:
                # The registry names the namespace by its hash: name it by its prefix, and its first
                # resource of the set (one refusal names one namespace, whichever of the set's it met first).
                for name in names:
                    prefix = _names.namespace_prefix(name)
                    if prefix is not None and _names.namespace_id(prefix) == refused.namespace:
                        refused.with_resource(name)
                        refused.namespace_name = prefix
                        break
            raise
        leases = _many_leases(registry, receipt, by_id, ttl)
        for lease in leases:
            lease._sent_at = sent
        acquired.extend(leases)
    except BaseException as interrupt:
        if not _sending.interrupted(interrupt):
            raise
        yield from settle_steps(
            registry,
            interrupt,
            f"the acquisition of the set {names}",
            acquired,
            lambda receipt: _many_leases(registry, receipt, by_id, ttl),
            handed=cls,
            release_many=lambda leases: release_what_remains_steps(registry, leases),
        )
        raise
    if len(leases) != len(names):  # pragma: no cover - the contract logs one acquisition per name
        raise ChainError(f"acquireMany logged {len(leases)} acquisitions for {len(names)} names")
    logger.info(
        "acquired set resources=%s tokens=%s holder=%s expires_at=%d tx=%s",
        names,
        [lease.token for lease in leases],
        leases[0].holder,
        leases[0].expires_at,
        leases[0].tx_hash,
    )
    return cls(leases)


class LeaseSet(SyncFace):
    """Leases on several resources taken in one transaction, all or nothing (:meth:`acquire`): one
    token per resource, consecutive, in the order the names were given. Each member is a
    :class:`~chainfence.Lease`.

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

    @classmethod
    @drives(_acquire_steps)
    def acquire(
        cls, registry: RegistryContract, resources: Sequence[str], ttl: int, *, confirmations: int | None = None
    ) -> LeaseSet:
        """Acquire every one of ``resources`` on ``registry`` (as its sender) for ``ttl`` seconds in ONE
        transaction, all or nothing.

        Returns the set: one :class:`~chainfence.Lease` per resource, tokens consecutive in the order
        given. If any resource is refused (held by someone else, not admitted, in its lock-delay), none
        is acquired and the refusal is raised (e.g. :class:`~chainfence.errors.LeaseHeld` naming that
        resource). 1 to 64 distinct names, else :class:`~chainfence.errors.InvalidClaimItems` /
        :class:`~chainfence.errors.DuplicateResource` and nothing is sent. An interrupt after the send
        releases what the transaction acquired before it is re-raised (as ``registry.acquire``'s).
        """
        return registry._drive(_acquire_steps(cls, registry, resources, ttl, confirmations=confirmations))

    @property
    def registry(self) -> RegistryContract:
        """The registry the set was acquired from (its first member's)."""
        return self.leases[0].registry  # type: ignore[no-any-return]

    def _drive(self, steps: Steps[R]) -> R:
        return self.registry._drive(steps)

    @property
    def tokens(self) -> list[int]:
        return [lease.token for lease in self.leases]

    @property
    def resources(self) -> list[str]:
        return [lease.resource for lease in self.leases]

    @property
    def expires_at(self) -> int:
        return min(lease.expires_at for lease in self.leases)

    def __iter__(self) -> Iterator[Lease]:
        return iter(self.leases)

    def __len__(self) -> int:
        return len(self.leases)

    def __getitem__(self, index: int) -> Lease:
        return self.leases[index]

    def _renew_steps(self, ttl: int | None = None) -> Steps[LeaseSet]:
        ttl = self.leases[0].ttl if ttl is None else ttl
        keeper = self._keeper
        handle, sent = (None, _keepalive.lease_clock()) if keeper is None else keeper.holder_renewing(ttl)
        try:
            expires_at = yield from renew_many_steps(self.registry, self.leases, ttl)
        except BaseException as error:
            if handle is not None and keeper is not None:
                keeper.holder_renewal_failed(handle, error)
            raise
        for lease in self.leases:
            lease.expires_at, lease.ttl, lease._sent_at = expires_at, ttl, sent
        if handle is not None and keeper is not None:
            keeper.holder_renewed(handle)
        return self

    @drives(_renew_steps)
    def renew(self, ttl: int | None = None) -> LeaseSet:
        """Extend every lease of the set to ``now + ttl`` (default: the ttl they were acquired with), in
        one ``renewMany``, all or nothing. Inside :meth:`keep`, the keep-alive follows the new ttl."""
        return self._drive(self._renew_steps(ttl))

    def _release_steps(self) -> Steps[None]:
        keeper = self._keeper
        if keeper is not None:
            keeper.holder_closing()
        try:
            ended, released = yield from release_what_remains_steps(self.registry, self.leases)
        except BaseException as error:
            if keeper is not None:
                keeper.holder_closed(End.RELEASED.value, error)
            raise
        for lease in self.leases:
            if lease.resource in released:
                lease.released = True
        _metrics.lease_ended("released", len(released))
        for lease, end in ended.items():
            _metrics.lease_ended(end.value)
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

    @drives(_release_steps)
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
        self._drive(self._release_steps())

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
        """``with lease_set.keep():`` :meth:`Lease.keep` for the whole set, on one shared deadline.

        Renews every member in one ``renewMany`` per interval; the safe
        deadline counts from the last confirmed one's send. The registry
        refuses the whole renewal when one member has ended: the loss
        (``on_lost``, :meth:`check`, leaving the block) is a
        :class:`~chainfence.errors.LeaseSetLost` naming that member
        (``resource``, ``token``) and the way it ended (``why``, read as for a
        single lease). Leaving the block does not release the set: ``with
        LeaseSet.acquire(registry, ...) as leases, leases.keep():`` does both, and
        the release then releases the members still live.
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
        """The set's keep-alive core (both runners'), counted from the earliest member's send."""
        sent = [lease._sent_at for lease in self.leases]
        return keep_core(
            f"the set {self.resources}",
            self.leases[0].ttl,
            None if None in sent else min(s for s in sent if s is not None),
            on_lost=on_lost,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            since=since,
        )

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
    def _kept_count(self) -> int:
        """Leases a loss of the set ends (the metrics count each)."""
        return len(self.leases)

    @property
    def _kept_name(self) -> str:
        return "+".join(self.resources)

    @property
    def _kept_token(self) -> str:
        return ",".join(str(token) for token in self.tokens)

    def _kept_renew_steps(self, ttl: Any) -> Steps[int]:
        return renew_many_steps(self.registry, self.leases, ttl)

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


class AsyncLeaseSet(AsyncFace[LeaseSet], core=LeaseSet):
    """A :class:`LeaseSet` acquired through an :class:`~chainfence.aio.AsyncRegistry`
    (``await AsyncLeaseSet.acquire(registry, names, ttl)``): its members
    (``leases``, each an ``AsyncLease``), renewed, released and kept alive together, awaited.

    ``async with lease_set:`` releases what it still can on exit (see :meth:`LeaseSet.release`);
    ``async with lease_set.keep():`` keeps the set alive on one shared deadline and, on a loss, cancels
    the task that entered the block, as ``AsyncLease.keep`` does.
    """

    def __init__(self, registry: Any, lease_set: LeaseSet):
        #: The :class:`~chainfence.aio.AsyncRegistry` the set is held through.
        self.registry = registry
        #: The set's state (members, keep-alive, loss), shared with the keep-alive core.
        self.lease_set = lease_set

    @property
    def _core(self) -> LeaseSet:
        return self.lease_set

    @property
    def _driver(self) -> AsyncDriver:
        return self.registry.chain  # type: ignore[no-any-return]

    @classmethod
    def _from_core(cls, core: LeaseSet, driver: AsyncDriver) -> AsyncLeaseSet:
        return cls(twin_of(core.registry, driver), core)

    leases = mirrored("leases", "The members, each an AsyncLease.")
    tokens = mirrored("tokens")
    resources = mirrored("resources")
    expires_at = mirrored("expires_at")
    released = mirrored("released")
    keeper = mirrored("keeper")

    acquire = aconstructor(LeaseSet.acquire)
    renew = awaiting(LeaseSet.renew, "self")
    release = awaiting(LeaseSet.release)
    check = local(LeaseSet.check)
    safe_remaining = local(LeaseSet.safe_remaining)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.leases)

    def __len__(self) -> int:
        return len(self.lease_set)

    def __getitem__(self, index: int) -> Any:
        return self._twin(self.lease_set[index])

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
        """``async with lease_set.keep():`` :meth:`LeaseSet.keep` in a task."""
        leases = self.lease_set
        clock = _keepalive.lease_clock if clock is None else clock
        core = leases._keep_core(
            on_lost=on_lost,
            interval=interval,
            latency_margin=latency_margin,
            block_time_margin=block_time_margin,
            clock=clock,
            since=since,
        )
        keeper = AsyncKeeper(leases, core, drive=self._drive, clock=clock, on_lost=on_lost)
        return AsyncKeeping(leases, keeper, face=self)

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


def _acquire_args(registry: RegistryContract, resources: Sequence[str], ttl: int) -> tuple[list[str], int, str]:
    """:meth:`LeaseSet.acquire`'s arguments checked, ttl aside: (names, ttl, sender). Nothing is sent."""
    if isinstance(resources, (str, bytes)) or not isinstance(resources, Sequence):
        raise InvalidClaimItems(f"resources must be a list of names, got {type(resources).__name__}")
    names = list(resources)
    if not 1 <= len(names) <= MAX_MANY:
        raise InvalidClaimItems(
            f"a lease set takes 1 to {MAX_MANY} names, got {len(names)}", count=len(names), max_count=MAX_MANY
        )
    for name in names:
        _validate.publishable(name)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DuplicateResource(resource=name, resource_id=_validate.resource_id(name))
        seen.add(name)
    return names, ttl, registry._require_sender()


def _many_leases(registry: RegistryContract, receipt: Any, by_id: dict[bytes, str], ttl: int) -> list[Lease]:
    leases = []
    for log in receipt["logs"]:
        if log["address"] != registry.address:
            continue
        event = _events.decode(log)
        if event is None or event.kind is not _events.Kind.ACQUIRED or event.resource_id not in by_id:
            continue
        leases.append(Lease._from_event(registry, event, receipt, resource=by_id[event.resource_id], ttl=ttl))
    return leases


def renew_many_steps(registry: RegistryContract, leases: Sequence[Lease], ttl: int) -> Steps[int]:
    """``renewMany`` of ``leases`` to now + ``ttl``, all or nothing; the new expiry."""
    ttl = _validate.ttl(ttl, (yield from registry._max_ttl_steps()))
    ids, tokens = _validate.set_order(leases)
    receipt = yield from _set_tx_steps(registry, leases, "renewMany", [ids, tokens, ttl])
    expires_at = registry._event(receipt, _events.Kind.RENEWED).expires_at
    logger.info(
        "renewed set resources=%s tokens=%s expires_at=%d",
        [x.resource for x in leases],
        [x.token for x in leases],
        expires_at,
    )
    return cast(int, expires_at)


def release_many_steps(registry: RegistryContract, leases: Sequence[Lease]) -> Steps[None]:
    """``releaseMany`` of ``leases``, all or nothing."""
    ids, tokens = _validate.set_order(leases)
    yield from _set_tx_steps(registry, leases, "releaseMany", [ids, tokens])
    logger.info("released set resources=%s tokens=%s", [x.resource for x in leases], [x.token for x in leases])


def _set_tx_steps(registry: RegistryContract, leases: Sequence[Lease], function: str, args: list[Any]) -> Steps[Any]:
    """Send a set operation; a refusal names the resource of the set it is about."""
    try:
        return (yield from registry._transact_steps(function, args))
    except LeaseError as refused:
        by_id = {lease.resource_id: lease.resource for lease in leases}
        if refused.resource_id in by_id:
            refused.resource = by_id[refused.resource_id]
        raise


def release_what_remains_steps(
    registry: RegistryContract, leases: Sequence[Lease]
) -> Steps[tuple[dict[Lease, End], list[str]]]:
    """Release every lease of ``leases`` still live; returns (the ended ones and how, the names released).

    ``releaseMany`` is all or nothing: when the registry refuses it for a member that ended, every
    member's state is read (``_end_of_steps``) and the live ones are released together.
    """
    remaining = list(leases)
    ended: dict[Lease, End] = {}
    released: list[str] = []
    while remaining:
        try:
            yield from release_many_steps(registry, remaining)
        except (TokenNotCurrent, NotHolder) as refused:
            refusal: BaseException = refused
        else:
            released.extend(lease.resource for lease in remaining)
            break
        live = []
        for lease in remaining:
            end = yield from registry._end_of_steps(lease)
            if end is None:
                live.append(lease)
            else:
                ended[lease] = end
        if len(live) == len(remaining):
            raise refusal  # every member reads live, yet the registry refuses: nothing learned, say so
        remaining = live
    return ended, released


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
