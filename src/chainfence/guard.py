"""The downstream side: accept or reject work by fencing token, with durable high-water marks.

A service puts one line before every write it protects::

    guard = Guard(registry, path="guard.sqlite")

    def write_report(token, body):
        guard.check("reports/daily", token)     # raises TokenNotCurrent if stale
        storage.put("reports/daily", body)

``check`` keeps, per resource, the highest token it has accepted (the mark)
in a SQLite file, and decides:

- ``token == mark``: accepted, no chain call (same epoch, more writes);
- ``token < mark``: :class:`~chainfence.errors.StaleToken`, carrying both;
- ``token > mark``: asked of the chain first. Only the resource's current,
  live token is recorded as the new mark; a forged token, one issued for
  another resource, or one already superseded, expired or released is
  rejected and the mark does not move.

Guarantees (DESIGN.md, safety properties 3 and 4):

- a guard never accepts a token lower than one it accepted for that
  resource: marks only go up, are written with ``synchronous=FULL`` in WAL
  mode, and survive restarts and crashes of the guard;
- a guard never accepts a token the registry did not issue for that resource;
- check-and-record is atomic across threads and across processes sharing
  the file (``BEGIN IMMEDIATE`` around re-read, compare and write).

What it does not do: a check and the write that follows it are two steps.
A holder superseded between them can still complete that one write; make
the write itself conditional on the token (same transaction) where that
matters. A token equal to the mark is accepted without asking the chain, so
a holder whose lease expired with nobody taking over keeps writing until a
successor's token reaches the guard.

Chain reads use the ``latest`` block: a token the latest block shows as
current was issued by the chain and was live then; a successor's token can
only come from a later block, and raises the mark when it arrives.

Reorgs: fencing tokens are a chain's counter, so a reorg can give the same
number to another holder. With ``confirmations=k`` (default: the chain's
setting; 0 on dev chains) a token becomes a mark only once the block that
issued it has ``k`` blocks on top (:class:`~chainfence.errors.TokenNotConfirmed`
until then). Reorgs deeper than ``k`` are outside what any ``k`` can promise.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import _validate
from .errors import (
    ContractNotFound,
    GuardError,
    GuardStoreMismatch,
    InvalidInput,
    LeaseExpired,
    LeaseReleased,
    StaleToken,
    TokenNotConfirmed,
    UnknownToken,
)
from .lease import LeaseStatus

if TYPE_CHECKING:
    from .registry import Registry

logger = logging.getLogger(__name__)

__all__ = ["Guard"]

_SCHEMA_VERSION = "1"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS marks (
        resource_id BLOB PRIMARY KEY,   -- keccak256(utf8 name), as on-chain
        name        TEXT NOT NULL,
        token       INTEGER NOT NULL,   -- the highest token accepted (chain tokens fit 48 bits)
        accepted_at REAL NOT NULL       -- wall-clock seconds, for operators only
    ) WITHOUT ROWID""",
)

#: SQLite INTEGER is signed 64-bit; chain-verified tokens fit in 48 bits.
_MAX_STORED_TOKEN = 2**63 - 1


class Guard:
    """Per-resource high-water marks of one registry's fencing tokens, kept in a SQLite file.

    Args:
        registry: the registry whose tokens this guard judges.
        path: the store file; created if missing. Several processes may share it.
        timeout: seconds to wait for another process's write lock.

    Raises :class:`~chainfence.errors.GuardStoreMismatch` if the file holds
    marks of another registry (other chain, address or genesis block).
    """

    def __init__(
        self,
        registry: Registry,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        confirmations: int | None = None,
    ):
        if not isinstance(path, (str, os.PathLike)) or str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise InvalidInput(f"a guard needs a file path (marks must survive restarts), got {path!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise InvalidInput(f"timeout must be a positive number of seconds, got {timeout!r}")
        if confirmations is None:
            confirmations = registry.chain.confirmations
        if isinstance(confirmations, bool) or not isinstance(confirmations, int) or confirmations < 0:
            raise InvalidInput(f"confirmations must be an int >= 0, got {confirmations!r}")
        self.registry = registry
        self.confirmations = confirmations
        self.path = Path(path)
        self._timeout = float(timeout)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._identity = {"schema_version": _SCHEMA_VERSION, **registry.identity()}
        self._bind()

    # ------------------------------------------------------------------
    # Public API
    # ------------------------------------------------------------------

    def check(self, resource: str, token: int) -> int:
        """Accept ``token`` for a write to ``resource`` or raise; returns the token.

        Raises :class:`~chainfence.errors.StaleToken` (with ``current_token``,
        the mark) below the mark; above it, the registry's verdict:
        :class:`~chainfence.errors.UnknownToken`, ``StaleToken``,
        :class:`~chainfence.errors.LeaseExpired` or
        :class:`~chainfence.errors.LeaseReleased`. A rejection never moves
        the mark. Chain errors propagate (fail closed).
        """
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        conn = self._conn()

        mark = self._read_mark(conn, resource_id)
        if token == mark:
            return token
        if token < mark:
            raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)

        # Above the mark: the chain must vouch for it before it can fence others,
        # and, with confirmations, the block that issued it must be deep enough.
        self._verify_on_chain(resource, resource_id, token)
        if self.confirmations:
            self._require_confirmed(resource, resource_id, token)
        if token > _MAX_STORED_TOKEN:  # pragma: no cover - the contract stores tokens in 48 bits
            raise GuardError(f"token {token} does not fit the guard's store")

        with self._write(conn):
            mark = self._read_mark(conn, resource_id)
            if token < mark:
                # Another thread or process recorded a newer token meanwhile.
                raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)
            if token > mark:
                conn.execute(
                    "INSERT INTO marks (resource_id, name, token, accepted_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (resource_id) DO UPDATE SET token = excluded.token, "
                    "name = excluded.name, accepted_at = excluded.accepted_at "
                    "WHERE excluded.token > marks.token",
                    (resource_id, resource, token, time.time()),
                )
        logger.info("guard accepted new token resource=%s token=%d previous_mark=%d", resource, token, mark)
        return token

    def mark(self, resource: str) -> int:
        """The highest token accepted for ``resource`` (0 if none)."""
        return self._read_mark(self._conn(), _validate.resource_id(resource))

    def marks(self) -> dict[str, int]:
        """Every resource's mark, by name."""
        rows = self._conn().execute("SELECT name, token FROM marks ORDER BY name").fetchall()
        return {name: token for name, token in rows}

    def close(self) -> None:
        """Close the store's connections (from every thread). The marks stay on disk."""
        with self._connections_lock:
            self._closed = True
            for conn in self._connections:
                conn.close()
            self._connections.clear()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Guard {str(self.path)!r} registry={self.registry.address}>"

    # ------------------------------------------------------------------
    # Chain verification
    # ------------------------------------------------------------------

    def _verify_on_chain(self, resource: str, resource_id: bytes, token: int) -> None:
        """Raise unless ``token`` is the current, live token of the resource at the latest block."""
        info = self.registry.last_lease(resource)
        if info is None:
            raise UnknownToken(token=token, current_token=0, resource=resource, resource_id=resource_id)
        if token == info.token and info.status is LeaseStatus.LIVE:
            return
        logger.info(
            "guard rejected token resource=%s token=%d chain_token=%d status=%s",
            resource,
            token,
            info.token,
            info.status.name.lower(),
        )
        if token > info.token:
            raise UnknownToken(token=token, current_token=info.token, resource=resource, resource_id=resource_id)
        if token < info.token:
            raise StaleToken(token=token, current_token=info.token, resource=resource, resource_id=resource_id)
        if info.status is LeaseStatus.RELEASED:
            raise LeaseReleased(token=token, resource=resource, resource_id=resource_id)
        raise LeaseExpired(token=token, expired_at=info.expires_at, resource=resource, resource_id=resource_id)

    def _require_confirmed(self, resource: str, resource_id: bytes, token: int) -> None:
        """Raise unless the block that issued ``token`` has ``confirmations`` blocks on top.

        Tokens are per-chain counters: a reorg can hand the same number to
        another holder. Only a token issued at or below the confirmed head may
        become a mark.
        """
        block = self.registry.chain.confirmed_block(self.confirmations)
        try:
            confirmed = self.registry.last_lease(resource, block=block)
        except ContractNotFound:
            confirmed = None  # the confirmed head predates the registry: nothing is confirmed yet
        if confirmed is None or confirmed.token < token:
            logger.info("guard deferred unconfirmed token resource=%s token=%d", resource, token)
            raise TokenNotConfirmed(
                token=token, confirmations=self.confirmations, resource=resource, resource_id=resource_id
            )

    # ------------------------------------------------------------------
    # Store
    # ------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise GuardError(f"guard {str(self.path)!r} is closed")
        if os.getpid() != self._pid:
            # A forked child must not use its parent's SQLite handles.
            self._local = threading.local()
            self._connections = []
            self._pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            # FULL: a mark is on disk before check() returns, power loss included.
            conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise GuardError(f"cannot open guard store {str(self.path)!r}: {exc}") from exc
        return conn

    def _bind(self) -> None:
        """Create the schema and tie the store to this registry, or refuse a foreign store."""
        conn = self._conn()
        try:
            with self._write(conn):
                # One statement at a time: executescript() would COMMIT first.
                for statement in _SCHEMA:
                    conn.execute(statement)
                stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                if not stored:
                    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", self._identity.items())
                    return
        except sqlite3.DatabaseError as exc:
            self.close()
            raise GuardError(f"{str(self.path)!r} is not a usable guard store: {exc}") from exc
        if stored != self._identity:
            self.close()
            differs = sorted(k for k in self._identity if stored.get(k) != self._identity[k])
            raise GuardStoreMismatch(
                f"{str(self.path)!r} holds marks of another registry ({', '.join(differs)} differ: "
                f"store has {', '.join(f'{k}={stored.get(k)}' for k in differs)})"
            )

    @staticmethod
    def _read_mark(conn: sqlite3.Connection, resource_id: bytes) -> int:
        row = conn.execute("SELECT token FROM marks WHERE resource_id = ?", (resource_id,)).fetchone()
        return 0 if row is None else row[0]

    def _write(self, conn: sqlite3.Connection) -> _WriteTransaction:
        return _WriteTransaction(conn)


class _WriteTransaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error): takes the write lock up front,
    so a read-compare-write inside it cannot interleave with another writer."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self._conn.execute("BEGIN IMMEDIATE")
        return self._conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._conn.execute("COMMIT")
        else:
            self._conn.execute("ROLLBACK")
