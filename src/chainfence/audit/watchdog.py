"""A watchdog over a registry's leases: holders that are stuck, crashed, or hold too long.

A heartbeat is not proof of progress. A holder that renews with a progress
marker (``lease.renew(progress=...)``) records how far its work has come in
each ``LeaseRenewed`` event; the watchdog reads those events and lists::

    stuck      live, renewed at least N times in a row without its marker changing
               (alive but stuck: the renewer runs, the work does not)
    crashed    the latest lease of a resource expired without a release or a
               completion (its holder died, or stopped renewing)
    long_held  live, held (under one token) longer than X seconds of chain time

::

    report = watchdog.stuck(registry, renewals=3, longer_than=3_600)
    for lease in report.stuck:
        print(lease.resource_display, lease.holder, lease.unchanged_renewals)

Only holders that report markers can be judged stuck: a plain renewal says
nothing about progress, so after a holder's first marker it counts as one
more renewal without progress, and before it the holder is not judged.

Every way a lease ends is handled by name (:mod:`chainfence.endings`): a
released or revoked lease is neither stuck nor crashed; a grant or a
reacquisition (superseded) starts the next token's record, and the old one is
never listed; an expiry without a release or a completion is ``crashed``; a
plain lease's completion records a result and ends nothing (a holder that
keeps renewing without progress afterwards is still ``stuck``), a claimed
item's completion ends it. Events are read through :mod:`chainfence._node.events` (paged from the registry's
deployment block, within provider range limits); every finding is then
checked against the registry's current state (one ``leaseOf`` call each), so
a lease that changed hands after the last event read, a claimed item that
was completed, or a lease the chain rolled back is never listed. Names are
untrusted bytes from the chain: ``resource`` is set only for a name the SDK
would publish (a claimed item's: ``workset»item``), ``resource_display`` is
always safe to print, an item as ``workset»item``.

Written once, as steps (:func:`stuck_steps`): :func:`stuck` runs them over either face of a
registry (blocking for a :class:`~chainfence.Registry`, awaited for an
:class:`~chainfence.aio.AsyncRegistry`). The registry never imports it.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, cast, overload

from .. import endings
from .._core.effects import RPC, Blocking, Steps
from .._core.faces import AsyncFace
from .._node import events as _events
from .._sdk.block_times import BlockTimes
from .._sdk.contract import RegistryContract
from .._sdk.lease_state import LeaseStatus
from ..endings import End
from ..errors import InvalidInput
from ._history import labels_steps, require_index

__all__ = ["DEFAULT_RENEWALS", "StuckLease", "StuckReport", "stuck", "stuck_steps"]

#: Default N: renewals in a row with an unchanged marker before a holder counts as stuck.
DEFAULT_RENEWALS = 3


@dataclass(frozen=True)
class StuckLease:
    """One lease the watchdog flags (``kind``: ``"stuck"``, ``"crashed"`` or ``"long_held"``)."""

    kind: str
    resource: str | None
    resource_display: str
    resource_id: bytes
    token: int
    holder: str
    acquired_at: int
    acquired_block: int
    expires_at: int
    held_for: int
    renewals: int
    unchanged_renewals: int
    progress: bytes | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "resource": self.resource,
            "resource_display": self.resource_display,
            "resource_id": "0x" + self.resource_id.hex(),
            "token": self.token,
            "holder": self.holder,
            "acquired_at": self.acquired_at,
            "acquired_block": self.acquired_block,
            "expires_at": self.expires_at,
            "held_for": self.held_for,
            "renewals": self.renewals,
            "unchanged_renewals": self.unchanged_renewals,
            "progress": "0x" + self.progress.hex() if self.progress is not None else None,
        }


@dataclass(frozen=True)
class StuckReport:
    """What :func:`stuck` found, judged at chain time ``judged_at`` over blocks ``from_block..to_block``."""

    judged_at: int
    from_block: int
    to_block: int
    renewals: int
    longer_than: int | None
    stuck: list[StuckLease] = field(default_factory=list)
    crashed: list[StuckLease] = field(default_factory=list)
    long_held: list[StuckLease] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.stuck or self.crashed or self.long_held)

    def to_dict(self) -> dict[str, Any]:
        return {
            "judged_at": self.judged_at,
            "from_block": self.from_block,
            "to_block": self.to_block,
            "renewals": self.renewals,
            "longer_than": self.longer_than,
            "stuck": [entry.to_dict() for entry in self.stuck],
            "crashed": [entry.to_dict() for entry in self.crashed],
            "long_held": [entry.to_dict() for entry in self.long_held],
        }


@dataclass
class _Track:
    """The latest lease of one resource, as the events tell it."""

    token: int
    holder: str
    block: int
    expires_at: int
    renewals: int = 0
    unchanged: int = 0
    marker: bytes | None = None
    ended: End | None = None  # released or revoked (by an event of its own token)
    completed: bool = False  # a result recorded: not crashed; a claimed item's completion is its end (state DONE)


def _positive(value: object, what: str, *, optional: bool = False) -> int | None:
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{what} must be an int >= 1, got {value!r}")
    return value


@overload
def stuck(
    registry: AsyncFace[Any],
    *,
    renewals: int = DEFAULT_RENEWALS,
    longer_than: int | None = None,
    from_block: int | None = None,
    index: Any = None,
) -> Coroutine[Any, Any, StuckReport]: ...
@overload
def stuck(
    registry: RegistryContract,
    *,
    renewals: int = DEFAULT_RENEWALS,
    longer_than: int | None = None,
    from_block: int | None = None,
    index: Any = None,
) -> StuckReport: ...
def stuck(
    registry: RegistryContract | AsyncFace[Any],
    *,
    renewals: int = DEFAULT_RENEWALS,
    longer_than: int | None = None,
    from_block: int | None = None,
    index: Any = None,
) -> StuckReport | Coroutine[Any, Any, StuckReport]:
    """Leases alive but stuck (``renewals`` renewals in a row with an unchanged progress
    marker), crashed (expired without release), and, with ``longer_than`` (seconds), held
    longer than that under one token, of ``registry``: the report from a
    :class:`~chainfence.Registry`, an awaitable of it from an :class:`~chainfence.aio.AsyncRegistry`.
    See the module docstring.

    ``index`` (an :class:`~chainfence.audit.index.AuditIndex`): synced first, then
    the events are read from it instead of from the chain since the deployment."""
    core = registry._core if isinstance(registry, AsyncFace) else registry
    steps = stuck_steps(core, renewals=renewals, longer_than=longer_than, from_block=from_block, index=index)
    return registry._drive(steps)


def stuck_steps(
    registry: RegistryContract,
    *,
    renewals: int = DEFAULT_RENEWALS,
    longer_than: int | None = None,
    from_block: int | None = None,
    index: Any = None,
) -> Steps[StuckReport]:
    """:func:`stuck` as steps (either driver; an index is synced and read in a worker thread on asyncio)."""
    renewals = cast(int, _positive(renewals, "renewals"))
    longer_than = _positive(longer_than, "longer_than", optional=True)
    if from_block is not None and (isinstance(from_block, bool) or not isinstance(from_block, int) or from_block < 0):
        raise InvalidInput(f"from_block must be an int >= 0, got {from_block!r}")
    chain = registry.chain
    first = (yield from registry._deployment_block_steps()) if from_block is None else from_block
    last = yield RPC.block_number()

    tracks: dict[bytes, _Track] = {}
    kinds = [
        _events.Kind.ACQUIRED,
        _events.Kind.RENEWED,
        _events.Kind.RELEASED,
        _events.Kind.COMPLETED,
        _events.Kind.REVOKED,
    ]
    if index is not None:
        require_index(index)
        entries, last = yield Blocking(lambda: _indexed(registry, index, first, last, kinds))
    else:
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise InvalidInput(f"from_block must be an int >= 0, got {first!r}")
        entries = yield from _events.fetch_all_steps(
            chain, registry.address, kinds=kinds, from_block=first, to_block=last
        )
    for entry in entries:
        if entry.kind is _events.Kind.ACQUIRED:
            tracks[entry.resource_id] = _Track(entry.token, entry.holder, entry.block_number, entry.expires_at)
            continue
        track = tracks.get(entry.resource_id)
        if track is None or entry.token != track.token:
            continue  # before the range read, or an older token's (refused ops emit nothing)
        if entry.kind is _events.Kind.RENEWED:
            track.renewals += 1
            track.expires_at = entry.expires_at
            marker = entry.progress if entry.progress and any(entry.progress) else None
            if marker is not None and marker != track.marker:
                track.marker, track.unchanged = marker, 0
            elif track.marker is not None:
                track.unchanged += 1
        elif entry.kind is _events.Kind.COMPLETED:
            # A plain lease's completion records a result and ends nothing: a holder that goes on renewing
            # without progress is still stuck. A claimed item's completion ends it (its state reads DONE,
            # never LIVE nor EXPIRED: the state check below drops it). Either way it did not crash.
            track.completed = True
        elif entry.kind is _events.Kind.RELEASED or entry.kind is _events.Kind.REVOKED:
            # The holder finished, or the namespace's admin stopped it (a grant's revoke too: the grant's
            # acquisition, next, starts the grantee's track): neither stuck nor crashed.
            track.ended = endings.of_event("released" if entry.kind is _events.Kind.RELEASED else "revoked")

    now = yield from chain._now_steps()
    candidates: list[tuple[str, bytes, _Track]] = []
    for resource_id, track in tracks.items():
        if track.ended is not None:
            continue
        if track.expires_at <= now:
            if not track.completed:  # expired without a release or a completion: its holder died or stalled
                candidates.append(("crashed", resource_id, track))
            continue
        if track.marker is not None and track.unchanged >= renewals:
            candidates.append(("stuck", resource_id, track))
        if longer_than is not None:
            candidates.append(("long_held", resource_id, track))

    times = BlockTimes()
    yield from times.prefetch_steps(track.block for _, _, track in candidates)
    if index is not None:
        labels = yield Blocking(lambda: {rid: index.label(rid) for _, rid, _ in candidates})
    elif candidates:
        labels = yield from labels_steps(registry, {rid for _, rid, _ in candidates}, last, known=(None, None))
    else:
        labels = {}
    report = StuckReport(judged_at=now, from_block=first, to_block=last, renewals=renewals, longer_than=longer_than)
    current: dict[bytes, Any] = {}
    for kind, resource_id, track in candidates:
        acquired_at = yield from times.at_steps(track.block)
        held_for = max(0, min(now, track.expires_at) - acquired_at)
        if kind == "long_held" and held_for < cast(int, longer_than):
            continue
        if resource_id not in current:
            info = yield from registry._lease_info_steps(None, resource_id)
            current[resource_id] = None if info.status is LeaseStatus.UNHELD else info
        info = current[resource_id]
        wanted = LeaseStatus.EXPIRED if kind == "crashed" else LeaseStatus.LIVE
        if info is None or info.token != track.token or info.status is not wanted:
            continue  # changed since the events were read (or a claimed item that is done)
        name, display = labels.get(resource_id, (None, "0x" + resource_id.hex()))
        getattr(report, kind).append(
            StuckLease(
                kind=kind,
                resource=name,
                resource_display=display,
                resource_id=resource_id,
                token=track.token,
                holder=track.holder,
                acquired_at=acquired_at,
                acquired_block=track.block,
                expires_at=info.expires_at,
                held_for=held_for,
                renewals=track.renewals,
                unchanged_renewals=track.unchanged,
                progress=track.marker,
            )
        )
    return report


def _indexed(registry: RegistryContract, index: Any, first: int, last: int, kinds: list[Any]) -> tuple[list[Any], int]:
    """The events an index holds from ``first`` to ``last``, once synced up to ``last`` (in the index's
    completeness mode), and the block they reach (the report says it read to there, not to ``last``):
    short of ``last`` by the chain's confirmations, or before a block whose logs the provider's answer
    may lack, where the sync held."""
    synced = index.sync(registry, to_block=last)
    last = min(last, synced.to_block)
    entries = [entry for entry, _at in index.every(index.events, from_block=first, to_block=last, kinds=kinds)]
    return entries, last


endings.declare(
    "watchdog",
    __name__,
    {
        End.EXPIRED: "listed as crashed (expired without a release or a completion), while the chain still "
        "reads it expired; never stuck nor long_held",
        End.RELEASED: "never listed: the holder finished",
        End.COMPLETED: "a claimed item's completion ends it: never listed; a plain lease's completion ends "
        "nothing: still judged stuck / long_held while live, never crashed",
        End.SUPERSEDED: "the reacquisition starts the new token's record; the old token is never listed",
        End.REVOKED: "never listed: the admin stopped it",
        End.GRANTED: "the grant's revoke ends the old token's record (never listed); the grantee's starts",
        End.ROLLED_BACK: "never listed: every finding is checked against the chain's current state, where a "
        "rolled-back token is not the resource's",
    },
    watches=True,
)
