"""SQLite statements that end a fenced transaction from inside it, and what may follow them.

The fence holds only while its own transaction is the open one. These
statements end it early: ``INSERT OR ROLLBACK`` hitting a conflict,
``RAISE(ROLLBACK)`` in a trigger (both caught by the application),
``executescript`` (it COMMITs first), the application's own ``COMMIT``,
``END``, ``ROLLBACK``, ``commit()``, ``rollback()``, or setting
``isolation_level = None`` (which commits). Whatever the application runs
next would run outside the fence (in autocommit, or in a new implicit
transaction the fence would then commit), and could land after a newer
holder's write. Each case must end in :class:`~chainfence.errors.FenceBroken`
with nothing of the fenced transaction committed, whichever way the next
statement travels: the yielded cursor, ``conn.execute``, or a statement
sqlite3 had already prepared and cached before the fence.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import suppress
from pathlib import Path

import pytest

from chainfence.errors import FenceBroken
from chainfence.integrations.sql import fenced_transaction

RESOURCE = "ledger/main"
AFTER = "INSERT INTO log (body) VALUES (?)"

#: isolation_level values of the legacy transaction control (the only kind on Python 3.11).
ISOLATION_LEVELS = {"deferred-implicit": "", "DEFERRED": "DEFERRED", "autocommit-None": None}


def setup_database(path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        """
        CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL UNIQUE);
        CREATE TABLE guarded (v TEXT NOT NULL);
        CREATE TRIGGER guarded_veto BEFORE INSERT ON guarded WHEN NEW.v = 'veto'
            BEGIN SELECT RAISE(ROLLBACK, 'vetoed'); END;
        """
    )
    conn.close()


def state(path) -> tuple[list[str], list[tuple[str, int]]]:
    """What another connection sees: the log's bodies, and the marks (name, token)."""
    conn = sqlite3.connect(path)
    try:
        bodies = [body for (body,) in conn.execute("SELECT body FROM log ORDER BY id")]
        try:
            marks = conn.execute("SELECT name, token FROM chainfence_marks").fetchall()
        except sqlite3.OperationalError:  # no table yet
            marks = []
    finally:
        conn.close()
    return bodies, marks


# --- the escapes: each is what an application might do, and catches what it raises ------------


def insert_or_rollback(conn, cur):
    cur.execute("INSERT OR ROLLBACK INTO log (body) VALUES ('before')")  # conflicts with 'before'


def trigger_raise_rollback(conn, cur):
    cur.execute("INSERT INTO guarded VALUES ('veto')")


def cursor_executescript(conn, cur):
    cur.executescript("INSERT INTO log (body) VALUES ('script')")


def connection_executescript(conn, cur):
    conn.executescript("INSERT INTO log (body) VALUES ('script')")


def commit_statement(conn, cur):
    cur.execute("COMMIT")


def end_statement(conn, cur):
    conn.execute("END")


def rollback_statement(conn, cur):
    conn.execute("ROLLBACK")


def commit_then_begin(conn, cur):
    conn.execute("COMMIT")
    conn.execute("BEGIN")


def connection_commit(conn, cur):
    conn.commit()


def connection_rollback(conn, cur):
    conn.rollback()


def isolation_level_none(conn, cur):
    conn.isolation_level = None  # Python 3.11 commits an open transaction first


ESCAPES = [
    insert_or_rollback,
    trigger_raise_rollback,
    cursor_executescript,
    connection_executescript,
    commit_statement,
    end_statement,
    rollback_statement,
    commit_then_begin,
    connection_commit,
    connection_rollback,
    isolation_level_none,
]


def warm_statement_cache(conn) -> None:
    """Prepare (and so cache) every statement text the test runs later, before the fence exists."""
    for end in ("COMMIT", "END", "ROLLBACK"):
        conn.execute("BEGIN")
        conn.execute(AFTER, ("warm-" + end,))
        conn.execute(end)


def fence_and_escape(conn, registry, token, escape, cur_or_conn="cursor") -> BaseException | None:
    """Write 'before', escape (catching what the escape raises), write 'after'; return how the fence ended."""
    try:
        with fenced_transaction(conn, registry, RESOURCE, token) as cur:
            cur.execute("INSERT INTO log (body) VALUES ('before')")
            with suppress(sqlite3.Error):  # the application catches what its statement raised
                escape(conn, cur)
            with suppress(sqlite3.Error):
                (cur if cur_or_conn == "cursor" else conn).execute(AFTER, ("after",))
    except Exception as error:
        return error
    return None


@pytest.fixture
def lease(embedded):
    return embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=600)


#: Every escape under every isolation level, but setting isolation_level = None on a connection
#: where it already is None: that commits nothing, so there is nothing to escape.
ESCAPE_CASES = [
    pytest.param(escape, isolation, id=f"{escape.__name__}-{name}")
    for escape in ESCAPES
    for name, isolation in ISOLATION_LEVELS.items()
    if not (escape is isolation_level_none and isolation is None)
]


@pytest.mark.parametrize("path", ["cursor", "connection", "cached"])
@pytest.mark.parametrize(("escape", "isolation"), ESCAPE_CASES)
def test_a_statement_that_ends_the_fenced_transaction_breaks_the_fence_and_nothing_commits(
    embedded, lease, tmp_path, escape, isolation, path
):
    """Write, escape (the application catches what that raises), write again: FenceBroken, and the
    database is as it was before the block, mark included."""
    db = tmp_path / "app.sqlite"
    setup_database(db)
    conn = sqlite3.connect(db, isolation_level=isolation)
    if path == "cached":
        warm_statement_cache(conn)
    before = state(db)

    outcome = fence_and_escape(conn, embedded, lease.token, escape, cur_or_conn=path)
    in_transaction = conn.in_transaction
    conn.close()
    assert state(db) == before, "a statement of the broken fence took effect"
    assert isinstance(outcome, FenceBroken), f"the fence exited with {outcome!r}"
    assert not in_transaction


@pytest.mark.parametrize("isolation", ISOLATION_LEVELS.values(), ids=ISOLATION_LEVELS.keys())
def test_a_stale_holder_cannot_write_after_its_successor_by_escaping_its_fence(embedded, tmp_path, isolation):
    """Timeline. A: fenced transaction with token a, writes 'A1', then an INSERT OR ROLLBACK conflicts (A
    catches it): A's transaction is gone, and so is its hold on the write lock. A stalls. B (token b > a)
    writes 'B' through the fence and commits. A resumes and writes 'A2'. Without the fence noticing,
    'A2' lands after 'B': a superseded holder's write after its successor's. With it, A gets FenceBroken
    and the log holds B's write alone."""
    chain = embedded.chain
    db = tmp_path / "app.sqlite"
    setup_database(db)
    a = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=10)
    escaped, b_committed = threading.Event(), threading.Event()
    outcome: dict[str, BaseException | None] = {}

    def holder_a():
        conn = sqlite3.connect(db, isolation_level=isolation, timeout=30)
        try:
            with fenced_transaction(conn, embedded, RESOURCE, a.token) as cur:
                cur.execute("INSERT INTO log (body) VALUES ('A1')")
                with suppress(sqlite3.IntegrityError):
                    cur.execute("INSERT OR ROLLBACK INTO log (body) VALUES ('A1')")
                escaped.set()
                b_committed.wait(30)
                with suppress(sqlite3.Error):
                    cur.execute("INSERT INTO log (body) VALUES ('A2')")
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
    conn = sqlite3.connect(db, timeout=30)
    with fenced_transaction(conn, embedded, RESOURCE, b.token) as cur:
        cur.execute("INSERT INTO log (body) VALUES ('B')")
    conn.close()
    b_committed.set()
    thread.join(30)

    assert state(db) == (["B"], [(RESOURCE, b.token)]), "the superseded holder wrote after its successor"
    assert isinstance(outcome["a"], FenceBroken)


#: Every kind of statement that changes a database file, each of which must be stopped when it
#: starts after the fenced transaction was rolled back (isolation_level None: plain autocommit).
WRITES = [
    "INSERT INTO log (body) VALUES ('after')",
    "INSERT INTO log (body) SELECT body || '!' FROM log",
    "REPLACE INTO log (id, body) VALUES (1, 'replaced')",
    "UPDATE log SET body = body || '?'",
    "DELETE FROM log WHERE id = 1",
    "DELETE FROM log",
    "INSERT INTO guarded VALUES ('fine')",
    "CREATE TABLE extra (a)",
    "CREATE INDEX log_body ON log (body)",
    "CREATE VIEW v AS SELECT 1",
    "CREATE TRIGGER t AFTER INSERT ON guarded BEGIN SELECT 1; END",
    "ALTER TABLE log ADD COLUMN extra TEXT",
    "ALTER TABLE guarded RENAME TO renamed",
    "DROP TRIGGER guarded_veto",
    "DROP TABLE guarded",
    "PRAGMA user_version = 7",
    "VACUUM",
]


def everything(path) -> tuple:
    """Rows, schema and header of the database, as another connection sees them."""
    conn = sqlite3.connect(path)
    try:
        return (
            conn.execute("SELECT id, body FROM log ORDER BY id").fetchall(),
            conn.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE tbl_name != 'chainfence_marks' ORDER BY name"
            ).fetchall(),
            conn.execute("PRAGMA user_version").fetchone(),
        )
    finally:
        conn.close()


@pytest.mark.parametrize("statement", WRITES)
def test_no_kind_of_write_runs_after_the_fenced_transaction_was_rolled_back(embedded, lease, tmp_path, statement):
    """The trace callback's interrupt stops each of them before it changes anything."""
    db = tmp_path / "app.sqlite"
    setup_database(db)
    seed = sqlite3.connect(db)
    seed.execute("INSERT INTO log (body) VALUES ('committed before')")
    seed.commit()
    seed.close()
    before = everything(db)
    conn = sqlite3.connect(db, isolation_level=None)
    outcome = None
    try:
        with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
            with suppress(sqlite3.IntegrityError):
                cur.execute("INSERT OR ROLLBACK INTO log (body) VALUES ('committed before')")
            with pytest.raises(sqlite3.OperationalError, match="interrupted"):
                conn.execute(statement)
    except FenceBroken as error:
        outcome = error
    conn.close()
    assert everything(db) == before
    assert outcome is not None


@pytest.mark.parametrize("cached", [False, True], ids=["prepared-inside", "cached-before"])
@pytest.mark.parametrize("isolation", ISOLATION_LEVELS.values(), ids=ISOLATION_LEVELS.keys())
def test_a_savepoint_cannot_reopen_a_transaction_after_an_escape(embedded, lease, tmp_path, isolation, cached):
    """Outside a transaction SAVEPOINT opens one, and RELEASE of it commits: after an INSERT OR
    ROLLBACK, 'SAVEPOINT; INSERT; RELEASE' would commit the INSERT outside the fence."""
    db = tmp_path / "app.sqlite"
    setup_database(db)
    conn = sqlite3.connect(db, isolation_level=isolation)
    if cached:
        conn.execute("SAVEPOINT app")
        conn.execute(AFTER, ("warm",))
        conn.execute("RELEASE app")
    before = state(db)

    outcome = None
    try:
        with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
            cur.execute("INSERT INTO log (body) VALUES ('before')")
            with suppress(sqlite3.IntegrityError):
                cur.execute("INSERT OR ROLLBACK INTO log (body) VALUES ('before')")
            for statement, parameters in (("SAVEPOINT app", ()), (AFTER, ("after",)), ("RELEASE app", ())):
                with suppress(sqlite3.Error):
                    conn.execute(statement, parameters)
    except Exception as error:
        outcome = error
    conn.close()
    assert state(db) == before, "a statement of the broken fence took effect"
    assert isinstance(outcome, FenceBroken)


def test_savepoints_inside_the_fence_still_work(embedded, lease, tmp_path):
    """SAVEPOINT / ROLLBACK TO / RELEASE nest inside the fence's transaction and do not end it."""
    db = tmp_path / "app.sqlite"
    setup_database(db)
    conn = sqlite3.connect(db)
    with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
        cur.execute("INSERT INTO log (body) VALUES ('kept')")
        cur.execute("SAVEPOINT attempt")
        cur.execute("INSERT INTO log (body) VALUES ('undone')")
        cur.execute("ROLLBACK TO attempt")
        cur.execute("RELEASE attempt")
        cur.execute("INSERT INTO log (body) VALUES ('kept too')")
    conn.close()
    assert state(db) == (["kept", "kept too"], [(RESOURCE, lease.token)])


def test_a_caught_error_that_leaves_the_transaction_open_does_not_break_the_fence(embedded, lease, tmp_path):
    """A plain constraint error (ABORT: the statement is undone, the transaction stays) is the
    application's business: the fence commits the rest."""
    db = tmp_path / "app.sqlite"
    setup_database(db)
    conn = sqlite3.connect(db)
    with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
        cur.execute("INSERT INTO log (body) VALUES ('once')")
        with pytest.raises(sqlite3.IntegrityError):
            cur.execute("INSERT INTO log (body) VALUES ('once')")
        cur.execute("INSERT INTO log (body) VALUES ('twice')")
    conn.close()
    assert state(db) == (["once", "twice"], [(RESOURCE, lease.token)])


def test_after_a_broken_fence_the_connection_works_and_fences_again(embedded, lease, tmp_path):
    """The hooks go with the fence: plain statements and the next fence work as before."""
    db = tmp_path / "app.sqlite"
    setup_database(db)
    conn = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(FenceBroken) as broken:
        with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
            cur.execute("INSERT INTO log (body) VALUES ('before')")
            cur.execute("INSERT OR ROLLBACK INTO log (body) VALUES ('before')")  # not caught this time
    assert isinstance(broken.value.__cause__, sqlite3.IntegrityError)
    conn.execute("INSERT INTO log (body) VALUES ('plain')")  # no hook of the fence is left behind
    with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
        cur.execute("INSERT INTO log (body) VALUES ('fenced')")
    conn.close()
    assert state(db) == (["plain", "fenced"], [(RESOURCE, lease.token)])


#: With Python 3.12's ``autocommit`` attribute, executescript() commits nothing first, and with
#: autocommit=True commit() and rollback() do nothing: those are no escapes there.
STATEMENT_ESCAPES = [
    insert_or_rollback,
    trigger_raise_rollback,
    commit_statement,
    end_statement,
    rollback_statement,
    commit_then_begin,
]
AUTOCOMMIT_ESCAPES = [(True, escape) for escape in STATEMENT_ESCAPES] + [
    (False, escape) for escape in [*STATEMENT_ESCAPES, connection_commit, connection_rollback]
]


if sys.version_info >= (3, 12):

    @pytest.mark.parametrize(
        ("autocommit", "escape"), AUTOCOMMIT_ESCAPES, ids=[f"{a}-{e.__name__}" for a, e in AUTOCOMMIT_ESCAPES]
    )
    def test_escapes_with_the_autocommit_attribute(embedded, lease, tmp_path, escape, autocommit):
        """The same guarantee under Python 3.12's transaction control."""
        db = tmp_path / "app.sqlite"
        setup_database(db)
        conn = sqlite3.connect(db, autocommit=autocommit)
        before = state(db)
        outcome = fence_and_escape(conn, embedded, lease.token, escape, cur_or_conn="connection")
        in_transaction = conn.in_transaction
        conn.close()
        assert state(db) == before
        assert isinstance(outcome, FenceBroken)
        assert in_transaction is (not autocommit)  # autocommit=False: sqlite3 keeps one open, even now

    @pytest.mark.parametrize("autocommit", [True, False])
    def test_a_clean_fence_commits_with_the_autocommit_attribute(embedded, lease, tmp_path, autocommit):
        """autocommit=True: its own BEGIN IMMEDIATE and COMMIT; autocommit=False: the open transaction."""
        db = tmp_path / "app.sqlite"
        setup_database(db)
        conn = sqlite3.connect(db, autocommit=autocommit)
        with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
            cur.execute("INSERT INTO log (body) VALUES ('fenced')")
        assert conn.in_transaction is (not autocommit)  # autocommit=False: sqlite3 keeps one open
        conn.close()
        assert state(db) == (["fenced"], [(RESOURCE, lease.token)])

else:

    def test_the_autocommit_tests_pass_on_a_python_312():
        """sqlite3's ``autocommit`` exists from Python 3.12: on 3.11 the tests of it run in the
        Python >= 3.12 venv that scripts/test.sh sets up beside the suite's (.venv-py312), on this
        file, and every one of them must pass there (a change that breaks the fence under
        ``autocommit`` fails the suite on 3.11 too)."""
        venv = os.environ.get("CHAINFENCE_PYTHON312_VENV")
        if not venv:
            pytest.skip(
                "no Python >= 3.12 on this machine (scripts/test.sh looks for CHAINFENCE_PYTHON312, python3.13, "
                "python3.12 and pyenv's versions): sqlite3's autocommit cannot be tested under 3.11"
            )
        result = subprocess.run(
            [
                str(Path(venv) / "bin" / "python"),
                "-m",
                "pytest",
                __file__,
                "-q",
                "-p",
                "no:cacheprovider",
                "-k",
                "autocommit_attribute",
            ],
            cwd=Path(__file__).resolve().parents[2],
            env=dict(os.environ, CHAINFENCE_BACKENDS="embedded"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-2000:]
        expected = len(AUTOCOMMIT_ESCAPES) + 2
        assert result.returncode == 0 and f"{expected} passed" in summary and "skipped" not in summary, (
            f"{summary}\n{result.stdout[-4000:]}"
        )


def test_closing_the_connection_inside_the_fence_breaks_it(embedded, lease, tmp_path):
    """Closing rolls the transaction back: the block ends normally, yet nothing was committed, so the
    fence says so instead of returning as if it had."""
    db = tmp_path / "app.sqlite"
    setup_database(db)
    conn = sqlite3.connect(db)
    with pytest.raises(FenceBroken):
        with fenced_transaction(conn, embedded, RESOURCE, lease.token) as cur:
            cur.execute("INSERT INTO log (body) VALUES ('before')")
            conn.close()
    assert state(db) == ([], [])
