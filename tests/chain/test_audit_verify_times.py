"""``verify`` checks times against the headers (issue #20), on both backends.

A tampered time bends what the index answers: an acquisition moved 30 minutes earlier makes ``holder_at``
name a holder 30 minutes before she held the lease; the last block's timestamp moved a day ahead makes every
live lease read expired (``as_of`` is that timestamp). Each tamper must fail ``verify``, naming the row and
the column; each test first shows the tamper fooling a reader (the control). A file of schema 2 (events keyed
by block and log index) is migrated when opened and verifies.
"""

from __future__ import annotations

import sqlite3

import pytest

from chainfence.audit.index import AuditIndex
from chainfence.errors import AuditIndexDiffers

NAME = "verify/times"


@pytest.fixture
def index(tmp_path):
    opened = AuditIndex(tmp_path / "audit.sqlite")
    yield opened
    opened.close()


def differences(index, registry) -> list[str]:
    with pytest.raises(AuditIndexDiffers) as caught:
        index.verify(registry)
    return caught.value.differences


def test_an_acquisition_moved_earlier_fails_verify_naming_the_lease(chain, registry, alice, bob, index):
    chain.advance_time(3_600)
    lease = alice.acquire(NAME, ttl=600)
    index.sync(registry)
    acquired_at = index.lease(lease.token).acquired_at
    assert index.holder_at(NAME, time=acquired_at - 1_000) is None
    with index._write() as conn:  # 30 minutes earlier, in the lease and in its event (the same story twice)
        conn.execute("UPDATE leases SET acquired_at = acquired_at - 1800 WHERE token = ?", (lease.token,))
        conn.execute("UPDATE events SET timestamp = timestamp - 1800 WHERE token = ?", (lease.token,))
    fooled = index.holder_at(NAME, time=acquired_at - 1_000)
    assert fooled is not None and fooled.holder == alice.sender, "control: the tamper names her 30 min early"
    found = differences(index, registry)
    assert any(d.startswith(f"leases: token {lease.token}: acquired_at {acquired_at - 1800}") for d in found), found
    assert any(
        f"LeaseAcquired block {lease.block_number}" in d and f"timestamp {acquired_at - 1800}" in d for d in found
    ), found


def test_the_last_blocks_timestamp_a_day_ahead_fails_verify_naming_the_block(chain, registry, alice, index):
    lease = alice.acquire(NAME, ttl=600)
    index.sync(registry)
    synced = index.status().synced_block
    assert [live.token for live in index.current()] == [lease.token]
    with index._write() as conn:
        conn.execute("UPDATE blocks SET timestamp = timestamp + 86400 WHERE number = ?", (synced,))
    assert index.current() == [], "control: a day ahead, the live lease reads expired"
    found = differences(index, registry)
    assert any(d.startswith(f"blocks: block {synced} timestamp") and "its header says" in d for d in found), found


def test_an_untampered_index_verifies(chain, registry, alice, bob, index):
    lease = alice.acquire(NAME, ttl=60)
    lease.renew(60, progress=b"x")
    chain.advance_time(61)
    bob.acquire(NAME, ttl=600).release()
    index.sync(registry)
    assert index.verify(registry) == 4


#: What schema 2 created (events keyed by block and log index; no transaction index).
SCHEMA_2 = """
CREATE TABLE events (
    block INTEGER NOT NULL, log_index INTEGER NOT NULL, kind TEXT NOT NULL, resource_id BLOB NOT NULL,
    token INTEGER, holder TEXT, admin TEXT, expires_at INTEGER, previous_token INTEGER, reason INTEGER,
    digest BLOB, progress BLOB, tx_hash TEXT NOT NULL, timestamp INTEGER NOT NULL,
    PRIMARY KEY (block, log_index)
);
CREATE INDEX events_token ON events (token);
CREATE TABLE resources (
    resource_id BLOB PRIMARY KEY, name BLOB, claimed INTEGER NOT NULL DEFAULT 0, first_block INTEGER NOT NULL
);
CREATE TABLE leases (
    token INTEGER PRIMARY KEY, resource_id BLOB NOT NULL, holder TEXT NOT NULL,
    acquired_block INTEGER NOT NULL, acquired_log INTEGER NOT NULL, acquired_at INTEGER NOT NULL,
    tx_hash TEXT NOT NULL, reason INTEGER NOT NULL, previous_token INTEGER NOT NULL,
    first_expires_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, granted_by TEXT,
    renewals INTEGER NOT NULL DEFAULT 0, last_renewed_block INTEGER, last_renewed_at INTEGER,
    markers INTEGER NOT NULL DEFAULT 0, last_marker BLOB,
    completions INTEGER NOT NULL DEFAULT 0, last_digest BLOB, completed_block INTEGER, completed_at INTEGER,
    ended TEXT, ended_block INTEGER, ended_at INTEGER, ended_by TEXT, successor INTEGER
);
CREATE INDEX leases_resource ON leases (resource_id, acquired_block, acquired_log);
"""


def test_a_file_of_schema_2_is_migrated_when_opened_and_verifies(chain, registry, alice, bob, index, tmp_path):
    first = alice.acquire(NAME, ttl=60)
    first.release()
    second = bob.acquire(NAME, ttl=600)
    index.sync(registry)
    old = tmp_path / "schema2.sqlite"
    with sqlite3.connect(old) as conn:  # the same index as schema 2 wrote it
        conn.executescript(SCHEMA_2)
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE blocks (number INTEGER PRIMARY KEY, hash BLOB NOT NULL, timestamp INTEGER NOT NULL)")
        conn.executemany("INSERT INTO meta VALUES (?, ?)", index._conn.execute("SELECT key, value FROM meta"))
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
        conn.executemany("INSERT INTO blocks VALUES (?, ?, ?)", index._conn.execute("SELECT * FROM blocks"))
        conn.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            index._conn.execute(
                "SELECT block, log_index, kind, resource_id, token, holder, admin, expires_at, previous_token, "
                "reason, digest, progress, tx_hash, timestamp FROM events"
            ),
        )
        conn.executemany(
            "INSERT INTO resources VALUES (?, ?, ?, ?)",
            index._conn.execute("SELECT resource_id, name, claimed, first_block FROM resources"),
        )
        conn.executemany(
            "INSERT INTO leases (token, resource_id, holder, acquired_block, acquired_log, acquired_at, tx_hash, "
            "reason, previous_token, first_expires_at, expires_at, granted_by, renewals, last_renewed_block, "
            "last_renewed_at, markers, last_marker, completions, last_digest, completed_block, completed_at, ended, "
            "ended_block, ended_at, ended_by, successor) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?, ?, ?, ?, ?, ?",
            index._conn.execute(
                "SELECT token, resource_id, holder, acquired_block, acquired_log, acquired_at, tx_hash, reason, "
                "previous_token, first_expires_at, expires_at, granted_by, renewals, last_renewed_block, "
                "last_renewed_at, markers, last_marker, completions, last_digest, completed_block, completed_at, "
                "ended, ended_block, ended_at, ended_by, successor FROM leases"
            ),
        )
    conn.close()
    with AuditIndex(old) as migrated:
        assert migrated._meta("schema") == "3"
        assert [(lease.token, lease.ended) for lease in migrated.history(NAME)] == [
            (first.token, "released"),
            (second.token, None),
        ]
        assert {row[0] for row in migrated._conn.execute("SELECT tx_index FROM events")} == {None}
        assert [(r.leases, r.latest_token) for r in migrated.resources(NAME)] == [(2, second.token)]
        assert migrated.status().events == 3
        assert migrated.verify(registry) == 3
        third = alice.acquire("verify/after", ttl=600)
        migrated.sync(registry)
        assert migrated.lease(third.token).holder == alice.sender
        assert migrated.verify(registry) == 4
