"""Fenced SQL transactions on SQLite and on a real PostgreSQL server started by the suite.

PostgreSQL comes from the pinned ``pgserver`` package (real PostgreSQL 16
binaries), started in a temp directory, listening on a unix socket only.
"""

from __future__ import annotations

import sqlite3
import threading

import pytest

from chainfence.errors import InvalidInput, LeaseExpired, StaleToken, UnknownToken
from chainfence.sql import fenced_transaction

RESOURCE = "reports/daily"


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    import os

    os.environ.setdefault("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("xdg")))
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pgdata"), cleanup_mode="stop")
    yield server
    server.cleanup()


class Database:
    """One SQL database (SQLite file or PostgreSQL) with a `reports` table, and its placeholder."""

    def __init__(self, kind: str, connect):
        self.kind = kind
        self.connect = connect
        self.ph = "?" if kind == "sqlite" else "%s"

    def setup(self):
        conn = self.connect()
        statements = ["DROP TABLE IF EXISTS reports", "DROP TABLE IF EXISTS chainfence_marks",
                      "CREATE TABLE reports (day TEXT PRIMARY KEY, body TEXT NOT NULL)",
                      "INSERT INTO reports VALUES ('2026-11-21', 'empty')"]  # fmt: skip
        for statement in statements:
            conn.execute(statement)
        conn.commit()
        conn.close()

    def body(self) -> str:
        conn = self.connect()
        (body,) = conn.execute("SELECT body FROM reports WHERE day = '2026-11-21'").fetchone()
        conn.close()
        return body

    def mark(self) -> int:
        conn = self.connect()
        try:
            row = conn.execute("SELECT token FROM chainfence_marks").fetchone()
        finally:
            conn.close()
        return 0 if row is None else row[0]


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    if request.param == "sqlite":
        path = tmp_path / "app.sqlite"
        database = Database("sqlite", lambda: sqlite3.connect(path, timeout=30))
    else:
        import psycopg

        server = request.getfixturevalue("postgres")
        database = Database("postgres", lambda: psycopg.connect(server.get_uri()))
    database.setup()
    return database


def write(db, registry, token, body, conn=None):
    conn = conn or db.connect()
    try:
        with fenced_transaction(conn, registry, RESOURCE, token) as cur:
            cur.execute(f"UPDATE reports SET body = {db.ph} WHERE day = '2026-11-21'", (body,))
    finally:
        conn.close()


def test_the_holder_writes_and_the_mark_moves_with_it(db, embedded):
    lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
    write(db, embedded, lease.token, "A")
    assert (db.body(), db.mark()) == ("A", lease.token)
    write(db, embedded, lease.token, "A2")  # same epoch, more writes
    assert db.body() == "A2"


def test_a_stale_holder_write_rolls_back(db, embedded):
    chain = embedded.chain
    old = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=10)
    write(db, embedded, old.token, "A")
    chain.advance_time(11)
    new = embedded.connect(chain.accounts[2]).acquire(RESOURCE, ttl=60)
    write(db, embedded, new.token, "B")
    with pytest.raises(StaleToken):
        write(db, embedded, old.token, "A, stale")
    assert (db.body(), db.mark()) == ("B", new.token)


def test_a_forged_or_expired_token_writes_nothing(db, embedded):
    chain = embedded.chain
    lease = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=10)
    with pytest.raises(UnknownToken):
        write(db, embedded, lease.token + 50, "forged")
    chain.advance_time(10)
    with pytest.raises(LeaseExpired):
        write(db, embedded, lease.token, "expired before its first write")
    assert (db.body(), db.mark()) == ("empty", 0)


def test_an_error_in_the_body_rolls_back_the_write_and_the_mark(db, embedded):
    lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
    conn = db.connect()
    with pytest.raises(RuntimeError):
        with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
            cur.execute(f"UPDATE reports SET body = {db.ph} WHERE day = '2026-11-21'", ("half",))
            raise RuntimeError("crash mid-write")
    conn.close()
    assert (db.body(), db.mark()) == ("empty", 0)


def test_a_paused_holder_inside_its_transaction_cannot_commit_after_its_successor(db, embedded):
    """A opens its fenced transaction and stalls inside it; B's transaction waits for A's lock, so
    the two never interleave: A commits first and B's newer write wins; A's next write is stale."""
    chain = embedded.chain
    a = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=10)
    write(db, embedded, a.token, "A1")
    inside, release_a = threading.Event(), threading.Event()
    order: list[str] = []

    def slow_a():
        conn = db.connect()
        with fenced_transaction(conn, embedded, RESOURCE, a.token) as cur:
            inside.set()
            release_a.wait(10)
            cur.execute(f"UPDATE reports SET body = {db.ph} WHERE day = '2026-11-21'", ("A2",))
            order.append("A committed")
        conn.close()

    thread = threading.Thread(target=slow_a)
    thread.start()
    inside.wait(10)
    chain.advance_time(11)
    b = embedded.connect(chain.accounts[2]).acquire(RESOURCE, ttl=60)
    b_thread = threading.Thread(target=lambda: (write(db, embedded, b.token, "B"), order.append("B committed")))
    b_thread.start()
    threading.Event().wait(0.3)
    assert order == [], "B must wait for A's transaction"
    release_a.set()
    thread.join(10)
    b_thread.join(10)
    assert order == ["A committed", "B committed"]
    assert db.body() == "B"
    with pytest.raises(StaleToken):
        write(db, embedded, a.token, "A3")
    assert db.body() == "B"


def test_control_check_then_write_in_two_steps_loses_the_successor_write(db, embedded, tmp_path):
    """The control: a guard check, then the write in a separate transaction. A checks, stalls, B
    checks and writes, A writes: B's write is lost."""
    from chainfence import Guard

    chain = embedded.chain
    guard = Guard(embedded, path=tmp_path / "guard.sqlite")
    a = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=10)
    guard.check(RESOURCE, a.token)  # A: check... stall
    chain.advance_time(11)
    b = embedded.connect(chain.accounts[2]).acquire(RESOURCE, ttl=60)
    guard.check(RESOURCE, b.token)
    plain(db, "B")
    plain(db, "A, stale")  # ...A's write, after its check passed
    guard.close()
    assert db.body() == "A, stale"


def plain(db, body):
    conn = db.connect()
    conn.execute(f"UPDATE reports SET body = {db.ph} WHERE day = '2026-11-21'", (body,))
    conn.commit()
    conn.close()


def test_bad_arguments_are_refused(embedded, tmp_path):
    conn = sqlite3.connect(tmp_path / "x.sqlite")
    with pytest.raises(InvalidInput):
        with fenced_transaction(conn, embedded, RESOURCE, 1, table="marks; DROP TABLE x"):
            pass
    with pytest.raises(InvalidInput):
        with fenced_transaction(object(), embedded, RESOURCE, 1):
            pass
    conn.close()
