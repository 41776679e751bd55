"""``AuditIndex.verify``: the index checked against the chain, row by row (and, with a header source,
against headers no single provider controls).

Events against the chain's logs read again from the deployment; block hashes and times, and every
event's time, against the headers; leases and names against what the chain's logs make at the headers'
times (a scratch index rebuilt in memory); with ``proofs``, every block holding indexed events vouched
for and its receipts checked against the vouched ``receiptsRoot``, every resource's latest lease
against its storage slot proven at the synced block, and the index's highest token against the
registry's latest (its counter, proven at that block): an index lacking a whole resource differs there.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .._node import completeness as _completeness
from .._node import events as _events
from ..errors import AuditIndexDiffers, InvalidInput
from . import _projection

#: The fields of an event row as verify compares them (``_projection.event_row``'s order).
_EVENT_FIELDS = (
    "block",
    "log_index",
    "kind",
    "resource_id",
    "token",
    "holder",
    "admin",
    "expires_at",
    "previous_token",
    "reason",
    "digest",
    "progress",
    "tx_hash",
    "tx_index",
)


class _Index(Protocol):
    """What verify reads of an :class:`~chainfence.audit.index.AuditIndex`."""

    _conn: sqlite3.Connection

    def __init__(self, path: str) -> None: ...
    def _bind(self, registry: Any) -> int: ...
    def _int_meta(self, key: str) -> int | None: ...
    def _label(self, resource_id: bytes) -> tuple[str | None, str]: ...
    def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...
    def close(self) -> None: ...


def verify(index: _Index, registry: Any, *, max_blocks: int | None, limit: int, proofs: Any) -> int:
    """:meth:`AuditIndex.verify <chainfence.audit.index.AuditIndex.verify>`."""
    deployment = index._bind(registry)
    synced = index._int_meta("synced_block")
    if synced is None:
        return 0
    chain = registry.chain
    differences: list[str] = []
    stored = {
        (row[0], row[12], row[1]): row
        for row in index._conn.execute(
            "SELECT block, log_index, kind, resource_id, token, holder, admin, expires_at, previous_token, "
            "reason, digest, progress, tx_hash, tx_index, timestamp FROM events"
        )
    }
    seen = 0
    chain_logs: list[_events.RegistryLog] = []
    for _first, _last, logs in _events.fetch(
        chain,
        registry.address,
        kinds=[*_events.LEASE_KINDS, *_events.NAMING_KINDS],
        from_block=deployment,
        to_block=synced,
        max_range=max_blocks,
    ):
        chain_logs.extend(logs)
        for entry in logs:
            if entry.kind in _events.NAMING_KINDS:
                continue
            seen += 1
            mine = stored.pop((entry.block_number, entry.tx_hash, entry.log_index), None)
            if mine is None:
                differences.append(
                    f"missing from the index: {entry.kind.value} block {entry.block_number} "
                    f"log {entry.log_index} token {entry.token}"
                )
                continue
            theirs = _projection.event_row(entry)
            fields = list(zip(_EVENT_FIELDS, mine[:14], theirs, strict=True))
            if mine[13] is None:  # schema 2 did not record the transaction index
                fields = [field for field in fields if field[0] != "tx_index"]
            wrong = [name for name, a, b in fields if (bytes(a) if isinstance(a, bytes) else a) != b]
            if wrong:
                differences.append(
                    f"events: {entry.kind.value} block {entry.block_number} log {entry.log_index}: "
                    f"{', '.join(wrong)} differ from the chain's"
                )
    for (block, _tx, log_index), row in sorted(stored.items()):
        differences.append(f"not on the chain: {row[2]} block {block} log {log_index} token {row[4]}")
    # Blocks: their hashes and times against the headers; every event's time against its block's.
    hashes = index._conn.execute("SELECT number, hash, timestamp FROM blocks ORDER BY number").fetchall()
    headers = chain.rpc.blocks([number for number, _, _ in hashes])
    times: dict[int, int] = {}
    for (number, stored_hash, stored_time), block in zip(hashes, headers, strict=True):
        if block is None or bytes(block["hash"]) != bytes(stored_hash):
            differences.append(f"block {number}: the index holds another block than the chain's")
            continue
        times[number] = int(block["timestamp"])
        if stored_time != times[number]:
            differences.append(f"blocks: block {number} timestamp {stored_time}, its header says {times[number]}")
    if synced not in times and not any(number == synced for number, _, _ in hashes):
        differences.append(f"block {synced}, the last one indexed, has no stored header")
    for block, log_index, kind, token, at in index._conn.execute(
        "SELECT block, log_index, kind, token, timestamp FROM events ORDER BY block, tx_index, log_index"
    ):
        if block in times and at != times[block]:
            differences.append(
                f"events: {kind} block {block} log {log_index} token {token}: timestamp {at}, "
                f"its block's header says {times[block]}"
            )
        elif block not in times and not any(number == block for number, _, _ in hashes):
            differences.append(f"events: {kind} block {block} log {log_index}: its block's header is not stored")
    missing_times = {entry.block_number for entry in chain_logs} - set(times)
    if missing_times:  # blocks of the chain's events the index holds no header of: read them to rebuild
        for number, block in zip(sorted(missing_times), chain.rpc.blocks(sorted(missing_times)), strict=True):
            if block is not None:
                times[number] = int(block["timestamp"])
    # Leases and names: what the chain's logs make, at the headers' times.
    differences.extend(_leases(index, chain_logs, times))
    if proofs is not None:
        differences.extend(_proofs(index, registry, proofs, synced))
    if differences:
        shown = differences[:limit]
        more = f" (and {len(differences) - limit} more)" if len(differences) > limit else ""
        raise AuditIndexDiffers(
            f"the index differs from the chain in {len(differences)} places{more}: " + "; ".join(shown),
            differences=shown,
        )
    return seen


def _leases(index: _Index, logs: list[_events.RegistryLog], times: dict[int, int]) -> list[str]:
    """Rebuild the leases and names from the chain's logs at the headers' times, and compare, naming the
    columns that differ."""
    scratch = type(index)(":memory:")
    try:
        with scratch._write() as conn:
            for entry in logs:
                _projection.apply(conn, entry, times.get(entry.block_number, 0))
        differences = []
        for table, key in (("leases", "token"), ("resources", "resource_id")):
            columns = [row[1] for row in scratch._conn.execute(f"PRAGMA table_info({table})")]
            select = f"SELECT {', '.join(columns)} FROM {table} ORDER BY {key}"
            mine = {row[0]: row for row in index._conn.execute(select)}
            theirs = {row[0]: row for row in scratch._conn.execute(select)}
            for item in sorted(set(mine) | set(theirs), key=repr):
                shown = item if isinstance(item, int) else "0x" + bytes(item).hex()
                a, b = mine.get(item), theirs.get(item)
                if a == b:
                    continue
                if a is None or b is None:
                    where = "the chain's events make it, the index lacks it" if a is None else "not on the chain"
                    differences.append(f"{table}: {key} {shown}: {where}")
                    continue
                wrong = [
                    f"{column} {x!r} (the chain's events make {y!r})"
                    for column, x, y in zip(columns, a, b, strict=True)
                    if x != y and not (column == "acquired_tx" and x is None)  # schema 2: not recorded
                ]
                if wrong:
                    differences.append(f"{table}: {key} {shown}: " + "; ".join(wrong))
        return differences
    finally:
        scratch.close()


def _proofs(index: _Index, registry: Any, reader: Any, synced: int) -> list[str]:
    """The index against a header source (see :meth:`verify`): vouched blocks, their receipts, the
    registry's latest token and the latest lease of every resource, proven at the synced block."""
    from ..errors import ChainfenceError
    from ..proofs import ProvenReader, lease_info

    if not isinstance(reader, ProvenReader):
        raise InvalidInput(f"proofs must be a chainfence.proofs.ProvenReader, got {type(reader).__name__}")
    if reader.address.lower() != registry.address.lower():
        raise InvalidInput(f"the reader proves registry {reader.address}, the index is of {registry.address}")
    differences: list[str] = []
    chain = registry.chain
    stored = dict(index._conn.execute("SELECT number, hash FROM blocks"))
    event_blocks = [block for (block,) in index._conn.execute("SELECT DISTINCT block FROM events ORDER BY block")]
    for number in [*event_blocks, synced] if synced not in event_blocks else event_blocks:
        vouched = reader.headers.at(number)  # typed errors (disagreement, providers down) propagate
        mine = stored.get(number)
        if mine is None or bytes(mine) != vouched.hash:
            differences.append(
                f"block {number}: the header source vouches for {vouched.hash_hex}, the index holds "
                + ("no hash" if mine is None else "0x" + bytes(mine).hex())
            )
            continue
        if number == synced and number not in event_blocks:
            continue
        block = chain.rpc.block(number)
        transactions = [] if block is None else list(block["transactions"])
        header = {
            "number": number,
            "hash": vouched.hash,
            "receiptsRoot": vouched.receipts_root,
            "transactionsRoot": vouched.transactions_root,
            "transactions": transactions,
        }
        try:
            found = _completeness.receipts(chain, header)  # their transaction hashes proven too
            held = [
                entry
                for entry in _completeness.registry_logs(found, header, registry.address)
                if entry.kind in _events.LEASE_KINDS
            ]
        except (ChainfenceError, KeyError, TypeError, ValueError) as exc:
            differences.append(f"block {number}: receipts not checked against the vouched receiptsRoot: {exc}")
            continue
        in_index = [
            _projection.log_from_row(row)[0]
            for row in index._conn.execute(f"SELECT {_projection.EVENT_COLUMNS} FROM events WHERE block = ?", (number,))
        ]
        # What each event says and the transaction it is in (hash and index; schema 2 did not record the index)
        placed = [_completeness.placed(entry) for entry in held], [_completeness.placed(entry) for entry in in_index]
        if any(entry.tx_index is None for entry in in_index):
            placed = [one[:2] for one in placed[0]], [one[:2] for one in placed[1]]
        if sorted(placed[0]) == sorted(placed[1]):
            continue
        if sorted(map(_completeness.content, held)) == sorted(map(_completeness.content, in_index)):
            differences.append(
                f"block {number}: its receipts (verified against the vouched receiptsRoot, their transactions "
                "against its transactionsRoot) put its lease events in other transactions than the index does"
            )
        else:
            differences.append(
                f"block {number}: its receipts (verified against the vouched receiptsRoot) hold "
                f"{len(held)} lease events, the index {len(in_index)}, or other ones"
            )
    head = reader.headers.at(synced)
    # The registry's highest token (its counter, one proof away) against the index's: a resource the index
    # lacks whole (acquired in a block it holds no event of) has no row below to compare with.
    latest = reader.latest_token(header=head)
    (highest,) = index._conn.execute("SELECT coalesce(max(token), 0) FROM leases").fetchone()
    if latest != highest:
        differences.append(
            f"tokens: the index's highest token is {highest}; proven at block {head.number}, the registry's "
            f"latest is {latest}"
        )
    rows = index._conn.execute(
        "SELECT l.resource_id, l.token, l.holder, l.expires_at, l.ended FROM resources r JOIN leases l "
        "ON l.token = (SELECT x.token FROM leases x WHERE x.resource_id = r.resource_id "
        "ORDER BY x.acquired_block DESC, x.acquired_tx DESC, x.acquired_log DESC LIMIT 1)"
    ).fetchall()
    for resource_id, token, holder, expires_at, ended in rows:
        resource_id = bytes(resource_id)
        packed, _ = reader.packed_slot(resource_id, header=head)
        proven = lease_info(None, resource_id, packed, block_time=head.timestamp, judged_at=head.timestamp)
        _name, display = index._label(resource_id)
        said = _proven_state(ended)
        if proven.token != token or proven.holder.lower() != holder.lower():
            differences.append(
                f"{display}: the index's latest lease is token {token} of {holder}; proven at block "
                f"{head.number}: token {proven.token} of {proven.holder}"
            )
        elif said is not None and proven.status.name not in said:
            differences.append(
                f"{display}: token {token} is {ended or 'not ended'} in the index; proven at block "
                f"{head.number}: {proven.status.name.lower()}"
            )
        elif ended is None and proven.expires_at != expires_at:
            differences.append(
                f"{display}: token {token} expires at {expires_at} in the index; proven at block "
                f"{head.number}: {proven.expires_at}"
            )
    return differences


def _proven_state(ended: str | None) -> tuple[str, ...] | None:
    """The LeaseStatus names a resource's latest lease may prove to have, given how the index says it ended."""
    return {
        None: ("LIVE", "EXPIRED"),
        "released": ("RELEASED",),
        "revoked": ("REVOKED",),
        "completed": ("DONE",),
    }.get(ended)
