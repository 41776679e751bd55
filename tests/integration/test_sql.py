"""Fenced SQL transactions on SQLite and on a real PostgreSQL server started by the suite.

PostgreSQL comes from the pinned ``pgserver`` package (real PostgreSQL 16
binaries), started in a temp directory, listening on a unix socket only.
"""

from __future__ import annotations

import sqlite3
import threading

import pytest

from chainfence.errors import FenceBroken, InvalidInput, LeaseExpired, StaleToken, UnknownToken
from chainfence.integrations.sql import fenced_transaction

RESOURCE = "reports/daily"


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """The server, in a directory of its own under the system temp dir, not under pytest's.

    Run as root, pgserver starts PostgreSQL as an unprivileged user and opens every parent of
    the data directory to it (o+rx); pytest makes its own base directory private again (0700)
    whenever a session starts, so another pytest session on the machine could lock the server
    out of a data directory there.
    """
    import os
    import shutil
    import tempfile

    os.environ.setdefault("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("xdg")))
    import pgserver

    directory = tempfile.mkdtemp(prefix="chainfence-pgdata-")
    server = pgserver.get_server(directory, cleanup_mode="stop")
    yield server
    server.cleanup()
    shutil.rmtree(directory, ignore_errors=True)


class Database:
    """One SQL database (SQLite file or PostgreSQL) with a `reports` table, and its placeholder."""

    def __init__(self, kind: str, connect):
        self.kind = kind
        self.connect = connect
        self.ph = "?" if kind == "sqlite" else "%s"

    def setup(self):
        conn = self.connect()
        statements = [
            "DROP TABLE IF EXISTS reports",
            "DROP TABLE IF EXISTS chainfence_marks",
            "CREATE TABLE reports (day TEXT PRIMARY KEY, body TEXT NOT NULL)",
            "INSERT INTO reports VALUES ('2026-11-21', 'empty')",
        ]
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


@pytest.mark.parametrize(
    "options",
    [
        {"table": "marks; DROP TABLE x"},
        {"table": 7},
        {"strict": "yes"},
        {"strict": 1},
        {"confirmations": -1},
        {"confirmations": 1_001},
        {"confirmations": True},
        {"confirmations": "2"},
        {"verify": 42},
    ],
    ids=repr,
)
def test_bad_arguments_are_refused_before_the_database_is_touched(embedded, tmp_path, options):
    """InvalidInput, and the database file stays empty: not even the marks table is created."""
    lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
    conn = sqlite3.connect(tmp_path / "x.sqlite")
    with pytest.raises(InvalidInput):
        with fenced_transaction(conn, embedded, RESOURCE, lease.token, **options):
            pass
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [], "a refused call created something"
    assert not conn.in_transaction
    conn.close()


def test_an_unsupported_connection_is_refused(embedded):
    with pytest.raises(InvalidInput):
        with fenced_transaction(object(), embedded, RESOURCE, 1):
            pass


def test_a_read_only_postgres_connection_is_refused(postgres, embedded):
    """The application asked for read-only transactions; the fence writes, so it says no."""
    import psycopg

    lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
    with psycopg.connect(postgres.get_uri()) as conn:
        conn.read_only = True
        with pytest.raises(InvalidInput):
            with fenced_transaction(conn, embedded, RESOURCE, lease.token):
                pass
        assert conn.read_only is True


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "control-mark-only"])
def test_strict_refuses_a_holder_whose_lease_ended_even_at_its_own_mark(db, embedded, strict):
    """A writes at its mark; its lease expires; nobody else has written yet. The mark alone accepts A
    again (the same epoch needs no chain call: the window). strict asks the chain: LeaseExpired."""
    chain = embedded.chain
    a = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=10)
    write(db, embedded, a.token, "A1")
    chain.advance_time(11)
    conn = db.connect()
    try:
        if strict:
            with pytest.raises(LeaseExpired):
                with fenced_transaction(conn, embedded, RESOURCE, a.token, strict=True) as cur:
                    cur.execute(f"UPDATE reports SET body = {db.ph} WHERE day = '2026-11-21'", ("A2",))
            assert db.body() == "A1"
        else:
            with fenced_transaction(conn, embedded, RESOURCE, a.token) as cur:
                cur.execute(f"UPDATE reports SET body = {db.ph} WHERE day = '2026-11-21'", ("A2",))
            assert db.body() == "A2", "the control must show the window strict closes"
    finally:
        conn.close()


def test_a_marks_table_without_the_holder_column_is_migrated(db, embedded):
    """A marks table of chainfence 0.1 (no holder column) keeps working: the column is added, a new
    epoch records its holder, and strict records the holder of a mark that had none."""
    alice = embedded.connect(embedded.chain.accounts[1])
    first = alice.acquire(RESOURCE, ttl=600)
    old = "BLOB" if db.kind == "sqlite" else "BYTEA"
    conn = db.connect()
    conn.execute(
        f"CREATE TABLE chainfence_marks (resource_id {old} PRIMARY KEY, name TEXT NOT NULL, token BIGINT NOT NULL)"
    )
    conn.execute(
        f"INSERT INTO chainfence_marks VALUES ({db.ph}, {db.ph}, {db.ph})", (first.resource_id, RESOURCE, first.token)
    )
    conn.commit()
    conn.close()

    write(db, embedded, first.token, "A1")  # same epoch, mark only: works, nothing to learn
    assert (db.body(), holders(db)) == ("A1", [(first.token, None)])
    conn = db.connect()
    with fenced_transaction(conn, embedded, RESOURCE, first.token, strict=True) as cur:
        cur.execute(f"UPDATE reports SET body = {db.ph} WHERE day = '2026-11-21'", ("A2",))
    conn.close()
    assert (db.body(), holders(db)) == ("A2", [(first.token, alice.sender)])
    second = alice.acquire(RESOURCE, ttl=600)  # re-acquired: a new epoch
    write(db, embedded, second.token, "A3")
    assert (db.body(), holders(db)) == ("A3", [(second.token, alice.sender)])


def holders(db) -> list[tuple[int, str | None]]:
    conn = db.connect()
    try:
        return conn.execute("SELECT token, holder FROM chainfence_marks").fetchall()
    finally:
        conn.close()


# --- PostgreSQL: statements that end the fenced transaction from inside it -------------------
#
# PostgreSQL has no hook to refuse a statement, so an application COMMIT inside the fence does
# commit what the fenced transaction wrote so far (under the row lock: still in order). What must
# not happen is anything after it taking effect: those statements no longer hold the row lock.


def pg_log(postgres):
    import psycopg

    conn = psycopg.connect(postgres.get_uri(), autocommit=True)
    conn.execute("DROP TABLE IF EXISTS log")
    conn.execute("DROP TABLE IF EXISTS chainfence_marks")
    conn.execute("CREATE TABLE log (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL UNIQUE)")
    conn.close()

    def bodies() -> list[str]:
        with psycopg.connect(postgres.get_uri()) as reader:
            return [body for (body,) in reader.execute("SELECT body FROM log ORDER BY id")]

    return bodies


def pg_commit_then_write(cur):
    cur.execute("COMMIT")
    cur.execute("INSERT INTO log (body) VALUES ('after')")


def pg_commit_write_commit(cur):
    cur.execute("COMMIT")
    cur.execute("INSERT INTO log (body) VALUES ('after')")
    cur.execute("COMMIT")


def pg_commit_begin_write_commit(cur):
    cur.execute("COMMIT")
    cur.execute("BEGIN")
    cur.execute("INSERT INTO log (body) VALUES ('after')")
    cur.execute("COMMIT")


def pg_rollback_then_write(cur):
    cur.execute("ROLLBACK")
    cur.execute("INSERT INTO log (body) VALUES ('after')")


def pg_rollback_write_commit(cur):
    cur.execute("ROLLBACK")
    cur.execute("INSERT INTO log (body) VALUES ('after')")
    cur.execute("COMMIT")


def pg_caught_error(cur):
    cur.execute("SELECT 1 / 0")  # aborts the transaction: its writes can never commit


PG_ESCAPES = [
    pg_commit_then_write,
    pg_commit_write_commit,
    pg_commit_begin_write_commit,
    pg_rollback_then_write,
    pg_rollback_write_commit,
    pg_caught_error,
]


@pytest.mark.parametrize("autocommit", [False, True], ids=["transactional", "autocommit"])
@pytest.mark.parametrize("escape", PG_ESCAPES, ids=[e.__name__[3:] for e in PG_ESCAPES])
def test_postgres_nothing_after_an_escape_takes_effect_and_the_fence_says_it_broke(
    postgres, embedded, escape, autocommit
):
    import psycopg

    bodies = pg_log(postgres)
    lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=600)
    outcome = None
    with psycopg.connect(postgres.get_uri(), autocommit=autocommit) as conn:
        try:
            with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
                cur.execute("INSERT INTO log (body) VALUES ('before')")
                try:
                    escape(cur)
                except psycopg.Error:  # the application catches what its statement raised
                    pass
        except Exception as error:
            outcome = error
        status, settings = conn.info.transaction_status, (conn.autocommit, conn.read_only)
        conn.rollback()
    assert "after" not in bodies(), "a statement after the escape took effect outside the fence"
    assert isinstance(outcome, FenceBroken), f"the fence exited with {outcome!r}"
    assert status == psycopg.pq.TransactionStatus.IDLE
    assert settings == (autocommit, None), "the connection's settings were not given back"


def test_postgres_a_stale_holder_cannot_write_after_its_successor_by_committing_early(postgres, embedded):
    """Timeline. A: fenced transaction with token a, writes 'A1', COMMITs by itself (so the row lock is
    gone) and stalls. B (token b > a) writes 'B' through the fence. A resumes, writes 'A2', leaves the
    block. Unnoticed, psycopg would commit 'A2' after 'B'. With the fence: FenceBroken, no 'A2'."""
    import psycopg

    bodies = pg_log(postgres)
    chain = embedded.chain
    a = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=10)
    escaped, b_committed = threading.Event(), threading.Event()
    outcome: dict[str, BaseException | None] = {}

    def holder_a():
        conn = psycopg.connect(postgres.get_uri())
        try:
            with fenced_transaction(conn, embedded, RESOURCE, a.token) as cur:
                cur.execute("INSERT INTO log (body) VALUES ('A1')")
                cur.execute("COMMIT")
                escaped.set()
                b_committed.wait(30)
                try:
                    cur.execute("INSERT INTO log (body) VALUES ('A2')")
                except psycopg.Error:
                    pass
            outcome["a"] = None
        except BaseException as error:
            outcome["a"] = error
        finally:
            conn.close()

    thread = threading.Thread(target=holder_a)
    thread.start()
    assert escaped.wait(30)
    chain.advance_time(11)
    b = embedded.connect(chain.accounts[2]).acquire(RESOURCE, ttl=60)
    try:
        with psycopg.connect(postgres.get_uri()) as conn, fenced_transaction(conn, embedded, RESOURCE, b.token) as cur:
            cur.execute("INSERT INTO log (body) VALUES ('B')")
    finally:
        b_committed.set()
    thread.join(30)
    assert bodies() == ["A1", "B"], "the superseded holder wrote after its successor"
    assert isinstance(outcome["a"], FenceBroken)


def test_the_sql_guides_block_runs_on_sqlite3_and_psycopg(db, embedded):
    """The SQL guide's block as written (docs/howto/sql.md; the README's before issue 27), on either driver: its
    placeholders follow the connection's."""
    from tests.support import docs

    block = docs.block("python", "fenced_transaction(conn", docs.page("docs/howto/sql.md"))
    lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
    conn = db.connect()
    try:
        exec(
            compile(block, "README.md", "exec"),
            {"conn": conn, "registry": embedded, "lease": lease, "body": "from the README", "day": "2026-11-21"},
        )
    finally:
        conn.close()
    assert (db.body(), db.mark()) == ("from the README", lease.token)
