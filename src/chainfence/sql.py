"""Fenced writes in one SQL transaction: the token check and the write commit together, or not at all.

A guard's ``check()`` followed by a write is two steps; a holder superseded
in between still lands that one write. When the protected data lives in a
SQL database, put the fence there too::

    with fenced_transaction(conn, registry, "reports/daily", lease.token) as cur:
        cur.execute("UPDATE reports SET body = ? WHERE day = ?", (body, day))

Inside one transaction: the resource's mark row (table ``chainfence_marks``)
is locked, the token compared with it (a token above the mark is first
verified on-chain, as a guard does), the mark raised with a conditional
``UPDATE ... WHERE token <= :token``, then your statements run; all of it
commits on a clean exit and rolls back on any exception. Writers of one
resource serialise on the mark row, so a stale holder's write can never
commit after a newer holder's.

Works with ``sqlite3`` connections (``BEGIN IMMEDIATE``) and psycopg 3
connections to PostgreSQL (``SELECT ... FOR UPDATE``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from . import _validate
from .errors import FenceBroken, InvalidInput, StaleToken

logger = logging.getLogger(__name__)

__all__ = ["fenced_transaction"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _dialect(conn: Any) -> str:
    if isinstance(conn, sqlite3.Connection):
        return "sqlite"
    if type(conn).__module__.startswith("psycopg"):
        return "postgres"
    raise InvalidInput(f"unsupported connection {type(conn).__name__}: use sqlite3 or psycopg 3")


@contextmanager
def fenced_transaction(
    conn: Any,
    registry: Any,
    resource: str,
    token: int,
    *,
    table: str = "chainfence_marks",
    verify: Callable[[str, int], Any] | None = None,
) -> Iterator[Any]:
    """A cursor inside a transaction that commits only if ``token`` is not stale for ``resource``.

    Raises :class:`~chainfence.errors.StaleToken` if the database has seen a
    higher token for the resource, and the registry's verdict
    (:class:`~chainfence.errors.TokenNotCurrent` subclasses) for a token above
    it that is not current on-chain; in both cases nothing is written.
    ``verify`` replaces the on-chain check (default
    ``registry.check_current``); pass a guard's ``check`` to use its mode.
    """
    resource_id = _validate.resource_id(resource)
    token = _validate.token(token)
    if not _IDENTIFIER.fullmatch(table):
        raise InvalidInput(f"table must be a plain SQL identifier, got {table!r}")
    dialect = _dialect(conn)
    verify = verify or registry.check_current
    if dialect == "sqlite":
        yield from _sqlite(conn, table, resource, resource_id, token, verify)
    else:
        yield from _postgres(conn, table, resource, resource_id, token, verify)


def _decide(mark: int, resource: str, resource_id: bytes, token: int, verify: Callable[[str, int], Any]) -> bool:
    """Whether the mark must be raised; raises if ``token`` may not write."""
    if token < mark:
        raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)
    if token > mark:
        verify(resource, token)  # the chain must vouch for a new epoch
        return True
    return False


def _sqlite(conn: sqlite3.Connection, table: str, resource: str, resource_id: bytes, token: int, verify) -> Iterator[Any]:
    # Python 3.12+ autocommit=False (PEP 249 mode): sqlite3 keeps a transaction open at all
    # times, so the fence takes that one over instead of opening its own.
    keeps_transaction = getattr(conn, "autocommit", None) is False
    if conn.in_transaction and not keeps_transaction:
        raise InvalidInput("fenced_transaction needs a connection outside any transaction (it opens its own)")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (resource_id BLOB PRIMARY KEY, name TEXT NOT NULL, "
        "token INTEGER NOT NULL)"
    )
    if conn.in_transaction and not keeps_transaction:  # the CREATE opened an implicit transaction
        conn.commit()
    cursor = conn.cursor()
    try:
        if not keeps_transaction:
            cursor.execute("BEGIN IMMEDIATE")  # the database's write lock, up front
        # autocommit=False: the INSERT takes the write lock (SQLite's RESERVED lock) before the read.
        cursor.execute(f"INSERT INTO {table} VALUES (?, ?, 0) ON CONFLICT (resource_id) DO NOTHING", (resource_id, resource))
        (mark,) = cursor.execute(f"SELECT token FROM {table} WHERE resource_id = ?", (resource_id,)).fetchone()
        if _decide(mark, resource, resource_id, token, verify):
            cursor.execute(f"UPDATE {table} SET token = ? WHERE resource_id = ? AND token <= ?", (token, resource_id, token))
            if cursor.rowcount != 1:  # pragma: no cover - the lock makes this impossible; the WHERE makes it safe
                raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)
    except BaseException:
        _sqlite_end(conn, "ROLLBACK", keeps_transaction)
        cursor.close()
        raise
    watch = _SqliteWatch(conn)
    try:
        yield cursor
    except BaseException as exc:
        broken = watch.stop()
        _sqlite_end(conn, "ROLLBACK", keeps_transaction)
        if broken is not None and isinstance(exc, Exception):
            raise _fence_broken(resource, token, broken) from exc
        raise
    else:
        broken = watch.stop()
        if broken is not None:
            _sqlite_end(conn, "ROLLBACK", keeps_transaction)
            raise _fence_broken(resource, token, broken)
        try:
            _sqlite_end(conn, "COMMIT", keeps_transaction)
        except BaseException:
            _sqlite_end(conn, "ROLLBACK", keeps_transaction)
            raise
    finally:
        with contextlib.suppress(sqlite3.ProgrammingError):  # closed inside the body
            cursor.close()


def _sqlite_end(conn: sqlite3.Connection, statement: str, keeps_transaction: bool) -> None:
    """COMMIT or ROLLBACK the fence's transaction, whichever transaction control the connection uses.

    Explicit statements, because ``commit()`` does nothing with Python 3.12's ``autocommit=True``;
    ``commit()``/``rollback()`` with ``autocommit=False``, which open the next transaction as that
    mode promises. A connection closed inside the fence was rolled back by SQLite: nothing to do.
    """
    try:
        if keeps_transaction:
            conn.commit() if statement == "COMMIT" else conn.rollback()
        elif conn.in_transaction:
            conn.execute(statement)
    except sqlite3.ProgrammingError:
        if statement == "COMMIT":
            raise


class _SqliteWatch:
    """Keeps every statement of the body inside the fence's SQLite transaction, or stops it.

    Two hooks of the connection, installed while the body runs (they replace any the
    application had set, and are removed, not restored, on exit):

    - an authorizer, which SQLite consults when it prepares a statement, refuses transaction
      control (``BEGIN``, ``COMMIT``, ``END``, ``ROLLBACK``; also the ``COMMIT`` that
      ``executescript()``, ``commit()`` and ``isolation_level = None`` issue, and the implicit
      ``BEGIN`` of the legacy ``isolation_level``). Installing it expires every prepared
      statement, so statements sqlite3 cached before the fence are prepared again and seen too.
      ``SAVEPOINT``/``RELEASE``/``ROLLBACK TO`` are allowed: the fence's transaction is a
      ``BEGIN``, so a savepoint only nests inside it and releasing one commits nothing;
    - a trace callback, which SQLite calls as each statement starts executing (cached ones
      included): if the connection is no longer in a transaction, a statement has rolled the
      fence's back (``INSERT OR ROLLBACK``, ``RAISE(ROLLBACK)``, an I/O error) and the new one
      would run in autocommit: it is interrupted before it can write.

    Either way the fence is broken, and ``stop()`` says why.
    """

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn
        self._reasons: list[str] = []
        conn.set_authorizer(self._authorize)
        conn.set_trace_callback(self._trace)

    def _authorize(self, action: int, operation: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_TRANSACTION:
            self._reasons.append(f"the application's {operation} was refused inside the fence")
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _trace(self, _statement: str) -> None:
        if not self._conn.in_transaction:
            self._reasons.append("a statement rolled the fenced transaction back; the statements after it were interrupted")
            self._conn.interrupt()

    def stop(self) -> str | None:
        """Remove both hooks; why the fence broke, or None if its transaction is intact."""
        try:
            self._conn.set_authorizer(None)
            self._conn.set_trace_callback(None)
            ended = not self._conn.in_transaction
        except sqlite3.ProgrammingError:
            return "the connection was closed inside the fence"
        if self._reasons:
            return self._reasons[0]
        if ended:
            return "a statement rolled the fenced transaction back"
        return None


def _fence_broken(resource: str, token: int, reason: str) -> FenceBroken:
    logger.warning("fenced transaction broken resource=%s token=%d: %s", resource, token, reason)
    return FenceBroken(
        f"the fenced transaction of {resource!r} (token {token}) was ended early: {reason}; "
        "nothing after that was committed"
    )


def _postgres(conn: Any, table: str, resource: str, resource_id: bytes, token: int, verify) -> Iterator[Any]:
    import psycopg

    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise InvalidInput("fenced_transaction needs a connection outside any transaction (it opens its own)")
    try:  # the marks table, in its own transaction: a refused write must not roll it back
        with conn.transaction():
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (resource_id BYTEA PRIMARY KEY, name TEXT NOT NULL, "
                "token BIGINT NOT NULL)"
            )
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
        pass  # created concurrently by another connection
    # PostgreSQL cannot be told to refuse a COMMIT or ROLLBACK. So, while the fence lasts, nothing
    # may autocommit and every transaction psycopg opens is READ ONLY, but the fence's own, which
    # asks for READ WRITE: should a statement end it, the statements after it can neither write
    # nor commit. The connection gets its settings back on exit.
    saved = conn.autocommit, conn.read_only
    conn.autocommit, conn.read_only = False, True
    try:
        yield from _postgres_fenced(conn, table, resource, resource_id, token, verify)
    finally:
        if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.autocommit, conn.read_only = saved


def _postgres_fenced(conn: Any, table: str, resource: str, resource_id: bytes, token: int, verify) -> Iterator[Any]:
    with conn.transaction(), conn.cursor() as cursor:  # BEGIN READ ONLY, see above
        cursor.execute("SET TRANSACTION READ WRITE")
        cursor.execute(
            f"INSERT INTO {table} VALUES (%s, %s, 0) ON CONFLICT (resource_id) DO NOTHING", (resource_id, resource)
        )
        # The id of the transaction that holds the row lock (PostgreSQL 13+): still the open one at the end?
        cursor.execute(
            f"SELECT token, pg_current_xact_id()::text FROM {table} WHERE resource_id = %s FOR UPDATE", (resource_id,)
        )
        mark, xid = cursor.fetchone()
        if _decide(mark, resource, resource_id, token, verify):
            cursor.execute(
                f"UPDATE {table} SET token = %s WHERE resource_id = %s AND token <= %s", (token, resource_id, token)
            )
            if cursor.rowcount != 1:  # pragma: no cover - the row lock makes this impossible
                raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)
        try:
            yield cursor
        except Exception as exc:
            broken = _postgres_broken(conn, cursor, xid, exc)
            if broken is not None:
                raise _fence_broken(resource, token, broken) from exc
            raise
        broken = _postgres_broken(conn, cursor, xid, None)
        if broken is not None:
            raise _fence_broken(resource, token, broken)  # inside conn.transaction(): rolled back


def _postgres_broken(conn: Any, cursor: Any, xid: str, error: Exception | None) -> str | None:
    """Why the fence's transaction is no longer the open one (or can no longer commit), if so."""
    import psycopg

    status = conn.info.transaction_status
    if isinstance(error, psycopg.errors.ReadOnlySqlTransaction):
        return "a statement ran in a read-only transaction: the fenced one had been ended by a COMMIT or ROLLBACK"
    if status == psycopg.pq.TransactionStatus.IDLE:
        return "a COMMIT or ROLLBACK ended the fenced transaction"
    if status == psycopg.pq.TransactionStatus.INERROR:
        if error is None:  # the block swallowed the error; PostgreSQL will not commit anything of it
            return "a statement failed and its error was caught inside the block: PostgreSQL aborted the transaction"
        return None  # the block's own error, on its way out: an ordinary rollback
    if status == psycopg.pq.TransactionStatus.INTRANS:
        (now,) = cursor.execute("SELECT pg_current_xact_id()::text").fetchone()
        if now != xid:
            return "a COMMIT or ROLLBACK ended the fenced transaction and another one began"
    return None
