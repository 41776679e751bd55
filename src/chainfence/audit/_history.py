"""Who held which token, when, and why it changed hands: read from the registry's events.

The registry's events are the record: :class:`LeaseEvent` is one of them,
decoded, with the resource's name (from ``ResourceNamed``) and the block's
timestamp (chain time). ::

    for event in audit.history(registry, "reports/daily"):
        reason = event.reason.name.lower() if event.reason is not None else "-"  # acquisitions only
        print(event.block_timestamp, event.kind.value, event.token, event.holder, reason)

Events are read from the registry's deployment block on, in pages of
blocks that fit a provider's ``eth_getLogs`` limits (:mod:`chainfence._node.events`).
Names are untrusted: anyone can publish one by calling the contract, so
``resource`` is the name only when it is one the SDK would publish, and
``resource_display`` is always safe to print (escaped; never spoofable by
control or bidi-override characters).

Written once, as steps (:func:`history_steps`): :func:`history` runs them over either face of a
registry (blocking for a :class:`~chainfence.Registry`, awaited for an
:class:`~chainfence.aio.AsyncRegistry`); :mod:`chainfence.audit` exports :func:`history`,
:class:`LeaseEvent` and :class:`EventKind`. The registry never imports it.
"""

from __future__ import annotations

import enum
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, overload

from .._core.effects import RPC, Blocking, Steps
from .._core.faces import AsyncFace
from .._node import events as _events
from .._sdk import names as _names
from .._sdk import validate as _validate
from .._sdk.block_times import BlockTimes
from .._sdk.contract import RegistryContract
from .._sdk.lease_state import AcquireReason
from ..errors import InvalidInput

__all__ = ["EventKind", "LeaseEvent", "history", "history_steps"]


class EventKind(enum.Enum):
    ACQUIRED = "acquired"
    RENEWED = "renewed"
    RELEASED = "released"
    COMPLETED = "completed"
    #: The namespace's admin ended the lease (``admin``); the holder's token stopped being current.
    REVOKED = "revoked"
    #: The namespace's admin issued the lease (``admin``); follows its ``acquired`` event.
    GRANTED = "granted"


_KINDS = {
    _events.Kind.ACQUIRED: EventKind.ACQUIRED,
    _events.Kind.RENEWED: EventKind.RENEWED,
    _events.Kind.RELEASED: EventKind.RELEASED,
    _events.Kind.COMPLETED: EventKind.COMPLETED,
    _events.Kind.REVOKED: EventKind.REVOKED,
    _events.Kind.GRANTED: EventKind.GRANTED,
}


@dataclass(frozen=True)
class LeaseEvent:
    """One lease state change, as the registry logged it.

    ``expires_at`` is None for releases and completions; ``previous_token``
    and ``reason`` are set for acquisitions only; ``result_digest`` for
    completions only. ``resource`` is the name when the registry published
    one the SDK accepts (else None); ``resource_display`` is always set:
    that name, the published bytes escaped, or the 0x id when no name is
    known.
    """

    kind: EventKind
    resource: str | None
    resource_id: bytes
    token: int
    holder: str
    expires_at: int | None
    previous_token: int | None
    reason: AcquireReason | None
    block_number: int
    block_timestamp: int
    tx_hash: str
    log_index: int
    result_digest: bytes | None = None
    resource_display: str = ""
    #: Renewals: the holder's progress marker (None when it reported none).
    progress: bytes | None = None
    #: Revocations and grants: the namespace admin who did it (``holder`` is the lease's holder).
    admin: str | None = None


@overload
def history(
    registry: AsyncFace[Any],
    resource: str | None = None,
    *,
    holder: str | None = None,
    token: int | None = None,
    from_block: int | None = None,
    to_block: int | str = "latest",
    index: Any = None,
) -> Coroutine[Any, Any, list[LeaseEvent]]: ...
@overload
def history(
    registry: RegistryContract,
    resource: str | None = None,
    *,
    holder: str | None = None,
    token: int | None = None,
    from_block: int | None = None,
    to_block: int | str = "latest",
    index: Any = None,
) -> list[LeaseEvent]: ...
def history(
    registry: RegistryContract | AsyncFace[Any],
    resource: str | None = None,
    *,
    holder: str | None = None,
    token: int | None = None,
    from_block: int | None = None,
    to_block: int | str = "latest",
    index: Any = None,
) -> list[LeaseEvent] | Coroutine[Any, Any, list[LeaseEvent]]:
    """Lease events of ``registry``, oldest first, filtered on the indexed fields given: a list from a
    :class:`~chainfence.Registry`, an awaitable of one from an :class:`~chainfence.aio.AsyncRegistry`.

    ``resource`` is a name (a claimed work item's: ``"workset»item"``); ``holder`` an address; ``token``
    a fencing token.
    ``from_block`` defaults to the registry's deployment block. Names of
    resources are resolved from the registry's ``ResourceNamed`` and ``ItemNamed`` events.

    ``index`` (an :class:`~chainfence.audit.index.AuditIndex`): synced first
    (only the blocks it lacks are read, checked in the index's own completeness mode), then answered
    from the file instead of every event since the deployment.
    """
    core = registry._core if isinstance(registry, AsyncFace) else registry
    steps = history_steps(
        core, resource, holder=holder, token=token, from_block=from_block, to_block=to_block, index=index
    )
    return registry._drive(steps)


def history_steps(
    registry: RegistryContract,
    resource: str | None = None,
    *,
    holder: str | None = None,
    token: int | None = None,
    from_block: int | None = None,
    to_block: int | str = "latest",
    index: Any = None,
) -> Steps[list[LeaseEvent]]:
    """:func:`history` as steps (either driver; an index is synced and read in a worker thread on asyncio)."""
    resource_id = _validate.resource_id(resource) if resource is not None else None
    holder = _validate.address(holder, "holder") if holder is not None else None
    token = _validate.token(token) if token is not None else None
    if index is not None:
        require_index(index)
        if to_block != "latest" and (isinstance(to_block, bool) or not isinstance(to_block, int)):
            raise InvalidInput(f"to_block must be an int or 'latest', got {to_block!r}")
        if from_block is not None and (
            isinstance(from_block, bool) or not isinstance(from_block, int) or from_block < 0
        ):
            raise InvalidInput(f"from_block must be an int >= 0, got {from_block!r}")
        found: list[LeaseEvent] = yield Blocking(
            lambda: _history_from_index(registry, index, resource_id, holder, token, from_block, to_block)
        )
        return found
    chain = registry.chain
    first = (yield from registry._deployment_block_steps()) if from_block is None else from_block
    if to_block == "latest":
        last = yield RPC.block_number()
    elif isinstance(to_block, int) and not isinstance(to_block, bool):
        last = to_block
    else:
        raise InvalidInput(f"to_block must be an int or 'latest', got {to_block!r}")
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise InvalidInput(f"from_block must be an int >= 0, got {from_block!r}")

    logs = yield from _events.fetch_all_steps(
        chain,
        registry.address,
        kinds=list(_KINDS),
        resource_id=resource_id,
        token=token,
        holder=holder,
        from_block=first,
        to_block=last,
    )
    labels = yield from labels_steps(
        registry, {entry.resource_id for entry in logs}, last, known=(resource_id, resource)
    )
    times = BlockTimes()
    yield from times.prefetch_steps(entry.block_number for entry in logs)  # one batch, not one request per block
    result = []
    for entry in logs:
        name, display = labels.get(entry.resource_id, (None, "0x" + entry.resource_id.hex()))
        assert entry.token is not None and entry.holder is not None
        result.append(_event(entry, name, display, (yield from times.at_steps(entry.block_number))))
    return result


def require_index(index: Any) -> None:
    """``index`` must be an :class:`~chainfence.audit.index.AuditIndex` (what it is asked: sync, events read
    a page at a time through every, label)."""
    if not all(callable(getattr(index, name, None)) for name in ("sync", "events", "every", "label")):
        raise InvalidInput(f"index must be an AuditIndex, got {type(index).__name__}")


def _history_from_index(
    registry: RegistryContract,
    index: Any,
    resource_id: bytes | None,
    holder: str | None,
    token: int | None,
    from_block: int | None,
    to_block: int | str,
) -> list[LeaseEvent]:
    # The chain's confirmations, the index's completeness mode (AuditIndex(completeness=...)).
    synced = index.sync(registry, to_block=None if to_block == "latest" else to_block)
    if synced.held_at is not None and to_block != "latest":
        # Asked up to a block the index could not reach (the log provider's answer does not check out
        # at held_at): an answer from the index would silently lack that block's events on. With
        # "latest" the answer is as of the block the index reached, as it is as of a confirmed one.
        from .._node.jsonrpc import name_of_chain
        from ..errors import LogsIncomplete

        raise LogsIncomplete(
            f"the logs {name_of_chain(registry.chain)} answered do not check out against block {synced.held_at} "
            f"({synced.held_because}): the index reaches block {synced.held_at - 1}, not block {to_block}; "
            "asked again once the provider answers that block, it goes on from there",
            block=synced.held_at,
            followed=synced.held_at - 1,
            head=int(to_block),
            source=name_of_chain(registry.chain),
            reason=synced.held_because or "",
        )
    result = []
    labels: dict[bytes, tuple[str | None, str]] = {}  # this answer's: one lookup per resource, not per event
    # Every event asked for: the index's pages of events, one after another (each a bounded read).
    for entry, timestamp in index.every(
        index.events,
        resource_id=resource_id,
        holder=holder,
        token=token,
        from_block=from_block,
        to_block=None if to_block == "latest" else to_block,
    ):
        label = labels.get(entry.resource_id)
        if label is None:
            label = labels[entry.resource_id] = index.label(entry.resource_id)
        name, display = label
        result.append(_event(entry, name, display, timestamp))
    return result


def _reason(value: int | None) -> AcquireReason | None:
    if value is None:
        return None
    try:
        return AcquireReason(value)
    except ValueError:
        return None


def labels_steps(
    registry: RegistryContract, ids: set[bytes], last: int, *, known: tuple[bytes | None, str | None]
) -> Steps[dict[bytes, tuple[str | None, str]]]:
    """resource id -> (name or None, safe display) for ``ids``, from their naming events (ResourceNamed, ItemNamed)."""
    labels: dict[bytes, tuple[str | None, str]] = {}
    known_id, known_name = known
    if known_id is not None and known_name is not None:
        labels[known_id] = (known_name, _names.display_name(known_name))
    wanted = ids - set(labels)
    if not wanted:
        return labels
    only = next(iter(wanted)) if len(wanted) == 1 else None
    named = yield from _events.fetch_all_steps(
        registry.chain,
        registry.address,
        kinds=list(_events.NAMING_KINDS),
        resource_id=only,
        from_block=(yield from registry._deployment_block_steps()),
        to_block=last,
    )
    for entry in named:
        if entry.resource_id in wanted and entry.resource_id not in labels:
            found = _names.named(entry.resource_id, entry.name, entry.workset, entry.item)  # an item: workset»item
            if found is not None:
                labels[entry.resource_id] = found
    return labels


def _event(entry: Any, name: str | None, display: str, timestamp: int) -> LeaseEvent:
    """The :class:`LeaseEvent` of a registry log ``entry`` (read from the chain, or an index's row of it),
    its resource labelled ``name`` (None: never seen by name) and ``display``, its block at ``timestamp``."""
    kind = _KINDS[entry.kind]
    return LeaseEvent(
        kind=kind,
        resource=name,
        resource_id=entry.resource_id,
        token=entry.token,
        holder=entry.holder,
        expires_at=entry.expires_at,
        previous_token=entry.previous_token,
        reason=_reason(entry.reason) if kind is EventKind.ACQUIRED else None,
        block_number=entry.block_number,
        block_timestamp=timestamp,
        tx_hash=entry.tx_hash,
        log_index=entry.log_index,
        result_digest=entry.result_digest,
        resource_display=display,
        progress=entry.progress if entry.progress and any(entry.progress) else None,
        admin=entry.admin,
    )
