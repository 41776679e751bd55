"""The audit index's projection on plain rows: hand-made events into an in-memory database, no chain.

Each way a lease ends is read off the events as the model names it; a rewind's replay rebuilds a lease
from the events left; the query helpers turn a name prefix into an indexed byte range and bounds into SQL.
"""

from __future__ import annotations

import sqlite3

import pytest
from eth_utils import keccak

from chainfence._node.events import Kind, RegistryLog
from chainfence._sdk import names as _names
from chainfence.audit import _projection
from chainfence.errors import InvalidInput
from chainfence.lease import AcquireReason

NAME = b"ops/db"
RESOURCE = keccak(NAME)
ALICE, BOB, ADMIN = "0x" + "11" * 20, "0x" + "22" * 20, "0x" + "aa" * 20


@pytest.fixture
def conn():
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(_projection.SCHEMA)
    yield conn
    conn.close()


class Events:
    """Events of one resource, one block each unless told, applied as they are made."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn, self.block = conn, 0

    def __call__(self, kind: Kind, token: int, *, time: int, same_tx: bool = False, **fields) -> RegistryLog:
        if not same_tx:
            self.block += 1
        log_index = self.conn.execute("SELECT count(*) FROM events WHERE block = ?", (self.block,)).fetchone()[0]
        entry = RegistryLog(
            kind=kind,
            resource_id=fields.pop("resource_id", RESOURCE),
            block_number=self.block,
            block_hash=b"\1" * 32,
            tx_hash=f"0x{self.block:064x}",
            log_index=log_index,
            token=token,
            **fields,
        )
        _projection.apply(self.conn, entry, time)
        return entry

    def acquire(self, token: int, holder: str, *, time: int, expires_at: int, previous: int = 0, reason=0, **kw):
        return self(
            Kind.ACQUIRED,
            token,
            time=time,
            holder=holder,
            expires_at=expires_at,
            previous_token=previous,
            reason=int(reason),
            **kw,
        )


def lease(conn, token: int) -> dict:
    row = conn.execute(f"SELECT {_projection.LEASE_COLUMNS} FROM leases WHERE token = ?", (token,)).fetchone()
    return None if row is None else dict(zip(_projection.LEASE_COLUMNS.split(", "), row))


def test_a_release_and_a_successor_after_expiry(conn):
    events = Events(conn)
    events.acquire(1, ALICE, time=100, expires_at=130)
    events(Kind.RENEWED, 1, time=110, holder=ALICE, expires_at=160, progress=b"\2" * 32)
    events(Kind.RELEASED, 1, time=120, holder=ALICE)
    events.acquire(2, BOB, time=200, expires_at=230, previous=1, reason=AcquireReason.RELEASED)
    events.acquire(3, ALICE, time=300, expires_at=330, previous=2, reason=AcquireReason.EXPIRED)
    first, second = lease(conn, 1), lease(conn, 2)
    assert (first["ended"], first["ended_at"], first["renewals"], first["markers"]) == ("released", 120, 1, 1)
    assert first["successor"] == 2 and first["expires_at"] == 160
    assert (second["ended"], second["ended_at"], second["successor"]) == ("expired", 230, 3)
    assert lease(conn, 3)["ended"] is None


def test_a_reacquisition_supersedes_and_a_grant_in_the_revokes_transaction_is_granted(conn):
    events = Events(conn)
    events.acquire(1, ALICE, time=100, expires_at=1_000)
    events.acquire(2, ALICE, time=110, expires_at=1_000, previous=1, reason=AcquireReason.REACQUIRED)
    events(Kind.REVOKED, 2, time=120, holder=ALICE, admin=ADMIN)
    events.acquire(3, BOB, time=120, expires_at=1_000, previous=2, reason=AcquireReason.GRANTED, same_tx=True)
    events(Kind.GRANTED, 3, time=120, holder=BOB, admin=ADMIN, same_tx=True)
    assert lease(conn, 1)["ended"] == "superseded"
    revoked = lease(conn, 2)
    assert (revoked["ended"], revoked["ended_by"], revoked["successor"]) == ("granted", ADMIN, 3)
    assert lease(conn, 3)["granted_by"] == ADMIN


def test_a_revoke_followed_later_by_a_grant_stays_revoked(conn):
    events = Events(conn)
    events.acquire(1, ALICE, time=100, expires_at=1_000)
    events(Kind.REVOKED, 1, time=120, holder=ALICE, admin=ADMIN)
    events.acquire(2, BOB, time=130, expires_at=1_000, previous=1, reason=AcquireReason.GRANTED)
    assert lease(conn, 1)["ended"] == "revoked"


def test_a_completion_ends_a_claimed_item_only(conn):
    """A plain lease's completion is counted and ends nothing; a claimed item's (named by an ``ItemNamed``
    under the item's id) ends its lease ``completed``."""
    events = Events(conn)
    events.acquire(1, ALICE, time=100, expires_at=1_000)
    events(Kind.COMPLETED, 1, time=110, holder=ALICE, result_digest=b"\3" * 32)
    plain = lease(conn, 1)
    assert (plain["ended"], plain["completions"], plain["last_digest"]) == (None, 1, b"\3" * 32)

    item = _names.item_id("batch", "a")
    events(Kind.ITEM_NAMED, 0, time=120, resource_id=item, workset=b"batch", item=b"a")
    events.acquire(2, BOB, time=120, expires_at=1_000, resource_id=item, same_tx=True)
    events(Kind.COMPLETED, 2, time=130, holder=BOB, resource_id=item, result_digest=b"\4" * 32)
    claimed = lease(conn, 2)
    assert (claimed["ended"], claimed["ended_at"], claimed["completions"]) == ("completed", 130, 1)
    assert conn.execute("SELECT name, claimed FROM resources WHERE resource_id = ?", (item,)).fetchone() == (
        b"batch/a",
        1,
    )


def test_an_event_applied_twice_counts_once(conn):
    events = Events(conn)
    events.acquire(1, ALICE, time=100, expires_at=130)
    renewal = events(Kind.RENEWED, 1, time=110, holder=ALICE, expires_at=160)
    _projection.apply(conn, renewal, 110)
    assert lease(conn, 1)["renewals"] == 1


def test_a_name_that_is_not_the_resources_is_not_believed(conn):
    events = Events(conn)
    events(Kind.NAMED, 0, time=100, name=b"someone/else")
    events(Kind.NAMED, 0, time=100, name=NAME)
    assert conn.execute("SELECT name FROM resources").fetchall() == [(NAME,)]


def test_numbers_that_do_not_fit_are_skipped(conn):
    events = Events(conn)
    events.acquire(2**63, ALICE, time=100, expires_at=130)
    assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,)


def test_replay_rebuilds_a_lease_from_the_events_left(conn):
    """What a rewind does: the events after the fork point are deleted, the leases they touched replayed."""
    events = Events(conn)
    events.acquire(1, ALICE, time=100, expires_at=1_000)
    events(Kind.RENEWED, 1, time=110, holder=ALICE, expires_at=1_100)
    events.acquire(2, BOB, time=1_200, expires_at=2_000, previous=1, reason=AcquireReason.EXPIRED)
    assert lease(conn, 1)["ended"] == "expired"
    before = lease(conn, 1)
    conn.execute("DELETE FROM events WHERE block > 2")
    conn.execute("DELETE FROM leases WHERE acquired_block > 2")
    _projection.replay(conn, 1)
    after = lease(conn, 1)
    assert after["ended"] is None and after["successor"] is None, "live again: its end is gone"
    assert {k: v for k, v in after.items() if k not in ("ended", "ended_block", "ended_at", "successor")} == {
        k: v for k, v in before.items() if k not in ("ended", "ended_block", "ended_at", "successor")
    }
    conn.execute("DELETE FROM events")
    _projection.replay(conn, 1)
    assert lease(conn, 1) is None, "its acquisition is gone: so is the lease"


def test_an_event_row_reads_back_as_the_log_it_was(conn):
    events = Events(conn)
    logged = events.acquire(1, ALICE, time=100, expires_at=130)
    row = conn.execute(f"SELECT {_projection.EVENT_COLUMNS} FROM events").fetchone()
    entry, at = _projection.log_from_row(row, logged.block_hash)
    assert (entry, at) == (logged, 100)
    assert _projection.event_row(entry) == row[:-1]


def test_reasons_a_newer_contract_adds_are_kept_as_numbers():
    assert _projection.reason(5) is AcquireReason.GRANTED
    assert _projection.reason(9) == 9


@pytest.mark.parametrize(
    ("prefix", "clause", "params"),
    [
        ("ops/", "name >= ? AND name < ?", [b"ops/", b"ops0"]),
        ("batch»it", "name >= ? AND name < ?", [b"batch/it", b"batch/iu"]),  # items as the contract names them
        ("", "name IS NOT NULL AND name >= ?", [b""]),
    ],
)
def test_a_prefix_is_an_indexed_range_of_names(prefix, clause, params):
    where, found, wanted = _projection.name_range(prefix)
    assert (where, found, wanted) == (clause, params, prefix.encode())


def test_a_prefix_of_0xff_bytes_has_no_upper_bound():
    assert _projection._successor(b"\xff\xff") is None
    assert _projection._successor(b"a\xff") == b"b"


def test_only_a_name_that_hashes_to_its_id_is_kept(conn):
    """A ResourceNamed keeps its name only when it hashes to its id; an ItemNamed its workset and item only
    when their abi.encode does (kept as workset/item, claimed). The contract never names an item in a
    ResourceNamed, so one that reads ``workset/item`` under an item's id (what the registry logged before
    issue 25) is not believed: it names no item."""
    events = Events(conn)
    item = _names.item_id("batch", "a")
    events(Kind.NAMED, 0, time=100, resource_id=item, name=b"batch/a")
    events(Kind.ITEM_NAMED, 0, time=100, resource_id=RESOURCE, workset=b"ops", item=b"db")
    assert conn.execute("SELECT count(*) FROM resources").fetchone() == (0,)
    events(Kind.ITEM_NAMED, 0, time=100, resource_id=item, workset=b"batch", item=b"a")
    events(Kind.NAMED, 0, time=100, name=NAME)
    assert sorted(conn.execute("SELECT resource_id, name, claimed FROM resources")) == sorted(
        [(item, b"batch/a", 1), (RESOURCE, NAME, 0)]
    )
    assert _projection.label_of(item, b"batch/a") == ("batch»a", "batch»a")


def test_what_a_prefix_shows():
    """A plain name by its bytes; a claimed item only as ``workset»item`` (not as ``workset/item``)."""
    item = _names.item_id("batch", "a")
    assert _projection.shown_with(RESOURCE, NAME, 0, b"ops/")
    assert not _projection.shown_with(RESOURCE, NAME, 0, "ops»".encode())
    assert _projection.shown_with(item, b"batch/a", 1, "batch»".encode())
    assert not _projection.shown_with(item, b"batch/a", 1, b"batch/")
    with pytest.raises(InvalidInput):
        _projection.name_range(b"ops/")
    with pytest.raises(InvalidInput):
        _projection.name_range("x" * 10_000)


def test_bounds_become_where_terms_and_bad_ones_are_refused():
    where, params = _projection.range_where("block", 3, None, "timestamp", None, 9)
    assert (where, params) == (["1 = 1", "block >= ?", "timestamp <= ?"], [3, 9])
    for bad in (True, -1, 2**63, "3"):
        with pytest.raises(InvalidInput, match="from_block"):
            _projection.range_where("block", bad, None, None, None, None)
