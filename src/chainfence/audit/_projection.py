"""The audit index's projection: registry events into rows, one lease per fencing token.

Plain SQL over one SQLite connection (inside the caller's transaction), on
the tables :data:`SCHEMA` creates; nothing here reads the chain or knows the
index file's other tables, so it runs as well on an in-memory database of
hand-made events.

``events``
    every lease event as logged (one row per log: block, transaction, log index,
    fields, the block's timestamp), keyed by (block, transaction hash, log
    index) and read in :data:`ORDER`; :func:`apply` inserts it once.
``resources``
    names, as the bytes logged, and only a name that hashes to its resource id
    (a ``ResourceNamed``'s; a claimed item's ``ItemNamed``, kept as
    ``workset/item`` with ``claimed`` set): anyone can log a name of any
    bytes by calling the contract, never for another resource's id; and each
    resource's lease count and latest token.
``leases``
    one row per fencing token, kept up to date by the events that change it:
    who, since when, why, its renewals and progress markers, its completions,
    and how it ended (:data:`ENDINGS`). :func:`replay` rebuilds one from the
    events left after a rewind.

The helpers at the end turn the queries' arguments into SQL: a name prefix
into an indexed range of byte strings (:func:`name_range`, decided by
:func:`shown_with`), block and time bounds into a WHERE clause
(:func:`range_where`).
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

from .. import endings
from .._core import log as _log
from .._node import events as _events
from .._sdk import names as _names
from ..endings import End
from ..errors import InvalidInput
from ..lease import AcquireReason

logger = _log.get("chainfence.audit.index")  # the index's one logger

__all__ = [
    "ENDED_AT_AN_EVENT",
    "ENDINGS",
    "EVENT_COLUMNS",
    "LEASE_COLUMNS",
    "MIGRATE_1_TO_2",
    "MIGRATE_EVENTS_2_TO_3",
    "MIGRATE_LEASES_2_TO_3",
    "MIGRATE_RESOURCES_2_TO_3",
    "ORDER",
    "SCHEMA",
    "apply",
    "count_leases",
    "event_row",
    "fits",
    "label_of",
    "log_from_row",
    "name_bounds",
    "name_range",
    "range_where",
    "reason",
    "replay",
    "shown_with",
]

#: The tables the projection writes (the index adds its own: meta, blocks).
SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    block INTEGER NOT NULL, tx_index INTEGER, log_index INTEGER NOT NULL, kind TEXT NOT NULL,
    resource_id BLOB NOT NULL, token INTEGER, holder TEXT, admin TEXT, expires_at INTEGER, previous_token INTEGER,
    reason INTEGER, digest BLOB, progress BLOB, tx_hash TEXT NOT NULL, timestamp INTEGER NOT NULL,
    PRIMARY KEY (block, tx_hash, log_index)
);
CREATE INDEX IF NOT EXISTS events_order ON events (block, tx_index, log_index);
CREATE INDEX IF NOT EXISTS events_token ON events (token, block, tx_index, log_index);
CREATE INDEX IF NOT EXISTS events_resource ON events (resource_id, block, tx_index, log_index);
CREATE INDEX IF NOT EXISTS events_holder ON events (holder, block, tx_index, log_index);
CREATE INDEX IF NOT EXISTS events_completed ON events (block, tx_index, log_index) WHERE kind = 'LeaseCompleted';
DROP INDEX IF EXISTS events_completed_time;
CREATE INDEX IF NOT EXISTS events_completed_time_key ON events (timestamp, block, tx_index, log_index)
    WHERE kind = 'LeaseCompleted';
CREATE INDEX IF NOT EXISTS events_completed_resource ON events (resource_id, block, tx_index, log_index)
    WHERE kind = 'LeaseCompleted';
CREATE TABLE IF NOT EXISTS resources (
    resource_id BLOB PRIMARY KEY, name BLOB, claimed INTEGER NOT NULL DEFAULT 0, first_block INTEGER NOT NULL,
    leases INTEGER NOT NULL DEFAULT 0, latest_token INTEGER
);
DROP INDEX IF EXISTS resources_name;
CREATE INDEX IF NOT EXISTS resources_by_name ON resources (name, resource_id);
CREATE TABLE IF NOT EXISTS leases (
    token INTEGER PRIMARY KEY, resource_id BLOB NOT NULL, holder TEXT NOT NULL,
    acquired_block INTEGER NOT NULL, acquired_log INTEGER NOT NULL, acquired_at INTEGER NOT NULL,
    tx_hash TEXT NOT NULL, reason INTEGER NOT NULL, previous_token INTEGER NOT NULL,
    first_expires_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, granted_by TEXT,
    renewals INTEGER NOT NULL DEFAULT 0, last_renewed_block INTEGER, last_renewed_at INTEGER,
    markers INTEGER NOT NULL DEFAULT 0, last_marker BLOB,
    completions INTEGER NOT NULL DEFAULT 0, last_digest BLOB, completed_block INTEGER, completed_at INTEGER,
    ended TEXT, ended_block INTEGER, ended_at INTEGER, ended_by TEXT, successor INTEGER, acquired_tx INTEGER
);
CREATE INDEX IF NOT EXISTS leases_resource ON leases (resource_id, acquired_block, acquired_tx, acquired_log);
DROP INDEX IF EXISTS leases_resource_time;
CREATE INDEX IF NOT EXISTS leases_resource_time_key ON leases (resource_id, acquired_at, acquired_block, acquired_tx,
    acquired_log);
CREATE INDEX IF NOT EXISTS leases_holder ON leases (holder, acquired_block, acquired_tx, acquired_log);
CREATE INDEX IF NOT EXISTS leases_block ON leases (acquired_block, acquired_tx, acquired_log);
DROP INDEX IF EXISTS leases_time;
CREATE INDEX IF NOT EXISTS leases_time_key ON leases (acquired_at, acquired_block, acquired_tx, acquired_log);
DROP INDEX IF EXISTS leases_open;
CREATE INDEX IF NOT EXISTS leases_live ON leases (resource_id, token, expires_at) WHERE ended IS NULL;
"""

#: Schema 2 keyed an event by (block, log index): a node that numbers ``logIndex`` per transaction (against
#: the spec) gives two logs of one block the same key, and the second was dropped as a duplicate. Schema 3
#: keys it by (block, transaction hash, log index), unique under either numbering, and orders by (block,
#: transaction index, log index). Rows of schema 2 keep their order (their log indexes were the block's) and
#: get no transaction index (NULL: not recorded; ``verify`` does not hold it against them).
MIGRATE_EVENTS_2_TO_3 = """
CREATE TABLE events_3 (
    block INTEGER NOT NULL, tx_index INTEGER, log_index INTEGER NOT NULL, kind TEXT NOT NULL,
    resource_id BLOB NOT NULL, token INTEGER, holder TEXT, admin TEXT, expires_at INTEGER, previous_token INTEGER,
    reason INTEGER, digest BLOB, progress BLOB, tx_hash TEXT NOT NULL, timestamp INTEGER NOT NULL,
    PRIMARY KEY (block, tx_hash, log_index)
);
INSERT INTO events_3 (block, tx_index, log_index, kind, resource_id, token, holder, admin, expires_at, previous_token,
    reason, digest, progress, tx_hash, timestamp)
SELECT block, NULL, log_index, kind, resource_id, token, holder, admin, expires_at, previous_token, reason, digest,
    progress, tx_hash, timestamp FROM events;
DROP TABLE events;
ALTER TABLE events_3 RENAME TO events;
"""

#: Schema 3's leases: their acquisition's transaction index (NULL for rows of schema 2), and the indexes
#: that order by it.
MIGRATE_LEASES_2_TO_3 = """
ALTER TABLE leases ADD COLUMN acquired_tx INTEGER;
DROP INDEX IF EXISTS leases_resource;
DROP INDEX IF EXISTS leases_holder;
DROP INDEX IF EXISTS leases_block;
DROP INDEX IF EXISTS leases_open;
"""

#: Schema 3's resources count their leases and name their latest token (a resource's list reads no lease).
MIGRATE_RESOURCES_2_TO_3 = """
ALTER TABLE resources ADD COLUMN leases INTEGER NOT NULL DEFAULT 0;
ALTER TABLE resources ADD COLUMN latest_token INTEGER;
UPDATE resources SET
    leases = (SELECT count(*) FROM leases l WHERE l.resource_id = resources.resource_id),
    latest_token = (SELECT max(token) FROM leases l WHERE l.resource_id = resources.resource_id);
"""

#: Schema 1 recorded a grant over a live lease as that lease's revoke (its first half): read it as granted.
MIGRATE_1_TO_2 = """
UPDATE leases SET ended = 'granted'
WHERE ended = 'revoked' AND EXISTS (
    SELECT 1 FROM events r JOIN events a
        ON a.block = r.block AND a.tx_hash = r.tx_hash AND a.kind = 'LeaseAcquired' AND a.previous_token = r.token
        AND a.reason = 5
    WHERE r.kind = 'LeaseRevoked' AND r.token = leases.token
)
"""

#: How a lease ended (``LeaseRecord.ended``), in the words of :class:`chainfence.endings.End`:
#: ``released``, ``revoked`` and ``completed`` (a claimed item's) are events; ``granted`` is a revoke
#: and the grant's acquisition in one transaction; ``expired`` and ``superseded`` are read off the
#: next acquisition of its resource (a lease nobody ended reads ``status == "expired"`` once the
#: index's chain time passes its expiry). ``rolled_back`` is never recorded: a sync that finds a
#: reorganisation rewinds the index, and a lease whose acquisition the chain lost is no longer in it.
ENDINGS = tuple(end.value for end in endings.End if end is not End.ROLLED_BACK)

#: Ends recorded at the block of an event (the lease's own, or its successor's); ``expired`` is judged by time.
ENDED_AT_AN_EVENT = tuple(end.value for end in (End.RELEASED, End.REVOKED, End.GRANTED, End.COMPLETED, End.SUPERSEDED))

_LEASE_KINDS = {kind.value: kind for kind in _events.LEASE_KINDS}

_LEASE_FIELDS = (
    "token",
    "resource_id",
    "holder",
    "acquired_block",
    "acquired_log",
    "acquired_at",
    "tx_hash",
    "reason",
    "previous_token",
    "expires_at",
    "granted_by",
    "renewals",
    "last_renewed_block",
    "last_renewed_at",
    "markers",
    "last_marker",
    "completions",
    "last_digest",
    "completed_at",
    "ended",
    "ended_block",
    "ended_at",
    "ended_by",
    "successor",
)
#: The columns of a lease row a query reads, in the order :func:`chainfence.audit.index` builds records from.
LEASE_COLUMNS = ", ".join(_LEASE_FIELDS)

#: The columns of an event row, in the order :func:`log_from_row` reads.
EVENT_COLUMNS = (
    "block, log_index, kind, resource_id, token, holder, admin, expires_at, previous_token, reason, digest, "
    "progress, tx_hash, tx_index, timestamp"
)

#: The events in chain order (an ORDER BY): right whether the node numbered ``logIndex`` per block or per
#: transaction.
ORDER = "block, tx_index, log_index"

_REASONS = {int(reason): reason for reason in AcquireReason}


# ---------------------------------------------------------------------------
# Events into rows
# ---------------------------------------------------------------------------


def apply(conn: sqlite3.Connection, entry: _events.RegistryLog, timestamp: int) -> bool:
    """One event into the store: its row, and the lease (and resource) it changes. True when it was a lease
    event not stored yet (a name, a namespace event or an event stored before: False)."""
    kind = entry.kind
    if kind in _events.NAMING_KINDS:
        if _names.logged_id(entry.name, entry.workset, entry.item) != entry.resource_id:
            return False  # a name that is not this resource's: not believed
        if kind is _events.Kind.NAMED:
            name, claimed = bytes(entry.name or b""), 0
        else:  # a claimed item (ItemNamed), kept as workset/item: _names.label finds the one split that hashes
            name, claimed = bytes(entry.workset or b"") + b"/" + bytes(entry.item or b""), 1
        conn.execute(
            "INSERT INTO resources (resource_id, name, claimed, first_block) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (resource_id) DO UPDATE SET name = coalesce(resources.name, excluded.name), "
            "claimed = max(resources.claimed, excluded.claimed)",
            (entry.resource_id, name, claimed, entry.block_number),
        )
        return False
    if kind not in _events.LEASE_KINDS:
        return False  # namespace events: decoded, not (yet) part of a lease's history
    if not all(fits(v) for v in (entry.token, entry.expires_at, entry.previous_token)):
        logger.warning(
            "audit index: skipped a %s whose numbers do not fit 63 bits (block %d)", kind.value, entry.block_number
        )
        return False
    inserted = conn.execute(
        "INSERT OR IGNORE INTO events (block, log_index, kind, resource_id, token, holder, admin, expires_at, "
        "previous_token, reason, digest, progress, tx_hash, tx_index, timestamp) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*event_row(entry), timestamp),
    ).rowcount
    if inserted:  # an event already indexed never counts twice (a renewal, a completion)
        _apply_lease(conn, entry, timestamp)
        if kind is _events.Kind.ACQUIRED:
            conn.execute(
                "UPDATE resources SET leases = leases + 1, latest_token = max(coalesce(latest_token, 0), ?) "
                "WHERE resource_id = ?",
                (entry.token, entry.resource_id),
            )
    return bool(inserted)


def count_leases(conn: sqlite3.Connection, resource_ids: set[bytes]) -> None:
    """Count the leases of ``resource_ids`` again and name their latest token (after a rewind deleted some)."""
    conn.executemany(
        "UPDATE resources SET leases = (SELECT count(*) FROM leases l WHERE l.resource_id = resources.resource_id), "
        "latest_token = (SELECT max(token) FROM leases l WHERE l.resource_id = resources.resource_id) "
        "WHERE resource_id = ?",
        [(resource_id,) for resource_id in resource_ids],
    )


def replay(conn: sqlite3.Connection, token: int) -> None:
    """Rebuild lease ``token`` from the events left after a rewind (nothing if its acquisition is gone)."""
    rows = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM events WHERE token = ? OR (kind = 'LeaseAcquired' AND previous_token = ?) "
        f"ORDER BY {ORDER}",
        (token, token),
    ).fetchall()
    conn.execute("DELETE FROM leases WHERE token = ?", (token,))
    if not rows or rows[0][4] != token:
        return
    for row in rows:
        entry, at = log_from_row(row)
        if entry.token != token:  # the successor's acquisition: only its effect on this lease
            _end_by_successor(conn, entry, at)
        else:
            _apply_lease(conn, entry, at)


def event_row(entry: _events.RegistryLog) -> tuple[Any, ...]:
    """An event as stored (without its timestamp): block, log index, kind, fields..., tx hash, tx index."""
    progress = entry.progress if entry.progress and any(entry.progress) else None
    return (
        entry.block_number,
        entry.log_index,
        entry.kind.value,
        entry.resource_id,
        entry.token,
        entry.holder,
        entry.admin,
        entry.expires_at,
        entry.previous_token,
        entry.reason,
        entry.result_digest,
        progress,
        entry.tx_hash,
        entry.tx_index,
    )


def log_from_row(row: tuple[Any, ...], block_hash: bytes = b"") -> tuple[_events.RegistryLog, int]:
    """An event row (:data:`EVENT_COLUMNS`) as the log it was, and its block's timestamp."""
    (
        block,
        log_index,
        kind,
        rid,
        token,
        holder,
        admin,
        expires,
        previous,
        reason_,
        digest,
        progress,
        tx,
        tx_index,
        at,
    ) = row
    entry = _events.RegistryLog(
        kind=_LEASE_KINDS[kind],
        resource_id=bytes(rid),
        block_number=block,
        block_hash=block_hash,
        tx_hash=tx,
        log_index=log_index,
        tx_index=tx_index,
        token=token,
        holder=holder,
        expires_at=expires,
        previous_token=previous,
        reason=reason_,
        result_digest=None if digest is None else bytes(digest),
        progress=None if progress is None else bytes(progress),
        admin=admin,
    )
    return entry, at


def fits(value: int | None) -> bool:
    """Whether ``value`` fits the store's integers (63 bits; None fits)."""
    return value is None or 0 <= value < 2**63


def _apply_lease(conn: sqlite3.Connection, entry: _events.RegistryLog, timestamp: int) -> None:
    kind, token, block = entry.kind, entry.token, entry.block_number
    if kind is _events.Kind.ACQUIRED:
        conn.execute(
            "INSERT OR IGNORE INTO resources (resource_id, name, claimed, first_block) VALUES (?, NULL, 0, ?)",
            (entry.resource_id, block),
        )
        conn.execute(
            "INSERT OR REPLACE INTO leases (token, resource_id, holder, acquired_block, acquired_tx, acquired_log, "
            "acquired_at, tx_hash, reason, previous_token, first_expires_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                token,
                entry.resource_id,
                entry.holder,
                block,
                entry.tx_index,
                entry.log_index,
                timestamp,
                entry.tx_hash,
                entry.reason,
                entry.previous_token,
                entry.expires_at,
                entry.expires_at,
            ),
        )
        if entry.previous_token:
            _end_by_successor(conn, entry, timestamp)
        return
    if kind is _events.Kind.RENEWED:
        marker = entry.progress if entry.progress and any(entry.progress) else None
        conn.execute(
            "UPDATE leases SET renewals = renewals + 1, expires_at = :expires, last_renewed_block = :block, "
            "last_renewed_at = :at, markers = markers + (CASE WHEN :marker IS NOT NULL AND "
            "(last_marker IS NULL OR last_marker != :marker) THEN 1 ELSE 0 END), "
            "last_marker = coalesce(:marker, last_marker) WHERE token = :token",
            {"expires": entry.expires_at, "block": block, "at": timestamp, "marker": marker, "token": token},
        )
        return
    if kind is _events.Kind.GRANTED:
        conn.execute("UPDATE leases SET granted_by = ? WHERE token = ?", (entry.admin, token))
        return
    if kind is _events.Kind.COMPLETED:
        conn.execute(
            "UPDATE leases SET completions = completions + 1, last_digest = ?, completed_block = ?, completed_at = ? "
            "WHERE token = ?",
            (entry.result_digest, block, timestamp, token),
        )
        claimed = conn.execute("SELECT claimed FROM resources WHERE resource_id = ?", (entry.resource_id,)).fetchone()
        if claimed is not None and claimed[0]:  # a claimed work item: done for good, its lease ended
            conn.execute(
                "UPDATE leases SET ended = 'completed', ended_block = ?, ended_at = ? WHERE token = ? AND ended IS NULL",
                (block, timestamp, token),
            )
        return
    if kind is _events.Kind.RELEASED or kind is _events.Kind.REVOKED:
        # A revoke may be the first half of a grant: the grant's acquisition, next in the same transaction,
        # turns it into "granted" (_end_by_successor).
        ending = endings.of_event("released" if kind is _events.Kind.RELEASED else "revoked")
        assert ending is not None
        conn.execute(
            "UPDATE leases SET ended = ?, ended_block = ?, ended_at = ?, ended_by = ? WHERE token = ?",
            (ending.value, block, timestamp, entry.admin, token),
        )
        return
    raise AssertionError(f"a lease event the index does not apply: {kind}")  # pragma: no cover - LEASE_KINDS


def _end_by_successor(conn: sqlite3.Connection, successor: _events.RegistryLog, timestamp: int) -> None:
    """What the acquisition ``successor`` says of the lease it followed (``previous_token``), by name:

    - the previous lease had ended (released, revoked, completed): it stays so, except a revoke in this very
      transaction before a grant, which was the grant's (``granted``: the model's one end for both events);
    - it had not, and its expiry had passed: ``expired`` (at its expiry), whatever the reason says (a grant
      over an expired lease revokes nothing);
    - it was live: the reason names the end (:func:`chainfence.endings.of_successor`): ``superseded`` for a
      reacquisition by its holder.
    """
    previous = conn.execute(
        "SELECT expires_at, ended, ended_block FROM leases WHERE token = ?", (successor.previous_token,)
    ).fetchone()
    if previous is None:
        return
    expires_at, ended, _ended_block = previous
    conn.execute("UPDATE leases SET successor = ? WHERE token = ?", (successor.token, successor.previous_token))
    why = _REASONS.get(successor.reason) if successor.reason is not None else None
    if ended is not None:
        if (
            ended == End.REVOKED.value
            and why is AcquireReason.GRANTED
            and conn.execute(
                "SELECT 1 FROM events WHERE kind = 'LeaseRevoked' AND token = ? AND block = ? AND tx_hash = ?",
                (successor.previous_token, successor.block_number, successor.tx_hash),
            ).fetchone()
        ):
            conn.execute("UPDATE leases SET ended = ? WHERE token = ?", (End.GRANTED.value, successor.previous_token))
        return
    if expires_at <= timestamp:
        end = (End.EXPIRED.value, successor.block_number, expires_at)
    else:
        named = endings.of_successor(why) if why is not None else End.SUPERSEDED
        if named not in (End.SUPERSEDED, End.GRANTED):  # a live lease is taken over only by these two
            named = End.SUPERSEDED
        end = (named.value, successor.block_number, timestamp)
    conn.execute(
        "UPDATE leases SET ended = ?, ended_block = ?, ended_at = ? WHERE token = ?", (*end, successor.previous_token)
    )


# ---------------------------------------------------------------------------
# Rows back out: reasons and names
# ---------------------------------------------------------------------------


def reason(value: int) -> AcquireReason | int:
    """An acquisition's reason as the SDK names it, or its number for a reason this SDK does not know
    yet (a newer contract)."""
    return _REASONS.get(value, value)


@functools.lru_cache(maxsize=65_536)
def label_of(resource_id: bytes, name: bytes | None) -> tuple[str | None, str]:
    """(name or None, safe display), a claimed item as ``workset»item`` (:func:`chainfence._sdk.names.label`):
    names never change once indexed, so their checks are cached."""
    return _names.label(resource_id, None if name is None else bytes(name))


@functools.lru_cache(maxsize=65_536)
def shown_with(resource_id: bytes, name: bytes, claimed: int, prefix: bytes) -> bool:
    """Whether the resource ``name`` (as indexed) is named with ``prefix``: a plain name as its bytes,
    a claimed item as ``workset»item`` (a prefix with ``»`` names items only)."""
    separator = _names.ITEM_SEPARATOR.encode()
    if claimed:
        parts = _names.item_parts(name, resource_id)
        if parts is not None:
            return (parts[0] + separator + parts[1]).startswith(prefix)
    return separator not in prefix and name.startswith(prefix)


# ---------------------------------------------------------------------------
# Query arguments into SQL
# ---------------------------------------------------------------------------


def name_range(prefix: object) -> tuple[str, list[Any], bytes]:
    """A WHERE clause on ``name`` (indexed: a range of byte strings) for the names that may start with
    ``prefix``, its parameters, and the prefix's bytes for :func:`shown_with`, which decides. Items are
    indexed as the contract names them (``workset/item``): a prefix ``workset»it`` is looked for as
    ``workset/it``."""
    stored, upper, wanted = name_bounds(prefix)
    if upper is None:
        return "name IS NOT NULL AND name >= ?", [stored], wanted
    return "name >= ? AND name < ?", [stored, upper], wanted


def name_bounds(prefix: object) -> tuple[bytes, bytes | None, bytes]:
    """:func:`name_range` as bounds: the stored names that may start with ``prefix`` are ``>= low`` and
    ``< high`` (None: no upper bound); and the prefix's bytes for :func:`shown_with`."""
    wanted = _prefix_bytes(prefix)
    stored = wanted.replace(_names.ITEM_SEPARATOR.encode(), b"/", 1)
    return stored, _successor(stored), wanted


def range_where(
    block_column: str,
    from_block: int | None,
    to_block: int | None,
    time_column: str | None,
    since: int | None,
    until: int | None,
) -> tuple[list[str], list[Any]]:
    """WHERE terms (joined with AND by the caller) and their parameters for a block range and a time
    range, each bound optional; InvalidInput for a bound that is not an int of 63 bits."""
    where, params = ["1 = 1"], []
    for column, value, op, what in (
        (block_column, from_block, ">=", "from_block"),
        (block_column, to_block, "<=", "to_block"),
        (time_column, since, ">=", "since"),
        (time_column, until, "<=", "until"),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not fits(value):
            raise InvalidInput(f"{what} must be an int from 0 to 2**63 - 1, got {value!r}")
        where.append(f"{column} {op} ?")
        params.append(value)
    return where, params


def _prefix_bytes(prefix: object) -> bytes:
    if not isinstance(prefix, str):
        raise InvalidInput(f"prefix must be a str, got {type(prefix).__name__}")
    data = prefix.encode("utf-8", "surrogatepass")
    longest = (
        2 * _names.MAX_NAME_LENGTH + len(_names.ITEM_SEPARATOR.encode())
        if _names.ITEM_SEPARATOR in prefix
        else _names.MAX_NAME_LENGTH
    )
    if len(data) > longest:
        raise InvalidInput(f"prefix is longer than a name can be ({len(data)} > {longest} bytes)")
    return data


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string that starts with ``prefix`` (None: no bound)."""
    data = bytearray(prefix)
    while data and data[-1] == 0xFF:
        data.pop()
    if not data:
        return None
    data[-1] += 1
    return bytes(data)
