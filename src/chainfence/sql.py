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

import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from . import _validate
from .errors import InvalidInput, StaleToken

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
    if conn.in_transaction:
        raise InvalidInput("fenced_transaction needs a connection outside any transaction (it opens its own)")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (resource_id BLOB PRIMARY KEY, name TEXT NOT NULL, "
        "token INTEGER NOT NULL)"
    )
    if conn.in_transaction:  # the CREATE opened an implicit transaction (isolation_level != None)
        conn.commit()
    cursor = conn.cursor()
    cursor.execute("BEGIN IMMEDIATE")  # the database's write lock, up front
    try:
        cursor.execute(f"INSERT INTO {table} VALUES (?, ?, 0) ON CONFLICT (resource_id) DO NOTHING", (resource_id, resource))
        (mark,) = cursor.execute(f"SELECT token FROM {table} WHERE resource_id = ?", (resource_id,)).fetchone()
        if _decide(mark, resource, resource_id, token, verify):
            cursor.execute(f"UPDATE {table} SET token = ? WHERE resource_id = ? AND token <= ?", (token, resource_id, token))
            if cursor.rowcount != 1:  # pragma: no cover - the lock makes this impossible; the WHERE makes it safe
                raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)
        yield cursor
    except BaseException:
        conn.rollback()
        raise
    else:
        conn.commit()
    finally:
        cursor.close()


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
    with conn.transaction(), conn.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} VALUES (%s, %s, 0) ON CONFLICT (resource_id) DO NOTHING", (resource_id, resource)
        )
        cursor.execute(f"SELECT token FROM {table} WHERE resource_id = %s FOR UPDATE", (resource_id,))
        (mark,) = cursor.fetchone()
        if _decide(mark, resource, resource_id, token, verify):
            cursor.execute(
                f"UPDATE {table} SET token = %s WHERE resource_id = %s AND token <= %s", (token, resource_id, token)
            )
            if cursor.rowcount != 1:  # pragma: no cover - the row lock makes this impossible
                raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)
        yield cursor
