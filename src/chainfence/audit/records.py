"""What the audit's queries answer: a lease, a takeover, a completion, a resource, the index's reach, a
sync's work. Frozen records; ``to_dict()`` is each one's JSON shape (bytes as 0x-hex, enums by name).
Re-exported by :mod:`chainfence.audit.index`, where they were first defined."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..lease import AcquireReason

__all__ = ["Completion", "IndexStatus", "LeaseRecord", "ResourceRecord", "SyncResult", "Takeover"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, AcquireReason):
        return value.name.lower()
    return value


class _Record:
    """A record a query returns; ``to_dict()`` is its JSON shape (bytes as 0x-hex, enums by name)."""

    def to_dict(self) -> dict[str, Any]:
        return {key: _jsonable(value) for key, value in asdict(self).items()}  # type: ignore[call-overload]


@dataclass(frozen=True)
class LeaseRecord(_Record):
    """One lease (one fencing token): who, since when, why, renewals, and how it ended.

    ``resource`` is the name when it is one the SDK would publish (else None);
    ``resource_display`` is always safe to print. ``reason`` says why the
    resource was free to take; ``granted_by`` is the admin who granted it (a
    grant). ``renewals`` counts renewals, ``markers`` the renewals whose
    progress marker changed, ``last_marker`` the latest one. ``ended`` is one
    of :data:`~chainfence.audit.index.ENDINGS`, or None while the lease is live (``status`` then says
    ``live``); ``ended_by`` is the admin of a revoke; ``successor`` the token
    that took the resource next.
    """

    token: int
    resource: str | None
    resource_display: str
    resource_id: bytes
    holder: str
    reason: AcquireReason | int  # its number when this SDK does not know it (a newer contract)
    previous_token: int
    acquired_block: int
    acquired_at: int
    tx_hash: str
    expires_at: int
    granted_by: str | None
    renewals: int
    last_renewed_block: int | None
    last_renewed_at: int | None
    markers: int
    last_marker: bytes | None
    completions: int
    last_digest: bytes | None
    completed_at: int | None
    ended: str | None
    ended_block: int | None
    ended_at: int | None
    ended_by: str | None
    successor: int | None
    status: str


@dataclass(frozen=True)
class Takeover(_Record):
    """A resource changing hands: ``holder`` (token ``token``) took it from ``previous_holder``."""

    resource: str | None
    resource_display: str
    resource_id: bytes
    token: int
    holder: str
    previous_token: int
    previous_holder: str
    previous_ended: str | None
    reason: AcquireReason | int  # its number when this SDK does not know it (a newer contract)
    block: int
    at: int
    tx_hash: str


@dataclass(frozen=True)
class Completion(_Record):
    """``holder`` recorded ``digest`` as the result of its work under ``token``."""

    resource: str | None
    resource_display: str
    resource_id: bytes
    token: int
    holder: str
    digest: bytes
    block: int
    at: int
    tx_hash: str


@dataclass(frozen=True)
class ResourceRecord(_Record):
    """A resource the index knows: its name (if any), leases, and the latest token."""

    resource: str | None
    resource_display: str
    resource_id: bytes
    claimed_item: bool
    leases: int
    latest_token: int | None


@dataclass(frozen=True)
class IndexStatus:
    """How far the index reaches: ``synced_block`` (None: never synced) at chain time ``as_of``."""

    chain_id: int | None
    registry: str | None
    deployment_block: int | None
    synced_block: int | None
    as_of: int | None
    events: int
    head_block: int | None = None  # when asked with a chain at hand
    behind: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SyncResult:
    """What one :meth:`AuditIndex.sync <chainfence.audit.index.AuditIndex.sync>` did: indexed ``from_block`` to ``to_block`` (``events`` events in
    ``pages`` pages).

    ``held_at``: the first block the sync did not pass because the node's ``eth_getLogs`` answer may lack
    some of its logs (``held_because`` says how the header shows it); None when it reached its target.
    ``rewound_to``: the fork point of the last reorg met. ``withdrawn_to``: where the index was rewound
    to because it held blocks with fewer confirmations than asked.
    """

    from_block: int
    to_block: int
    events: int
    pages: int
    rewound_to: int | None  # the fork point of the last reorg met, None if none
    held_at: int | None = None
    held_because: str | None = None
    withdrawn_to: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
