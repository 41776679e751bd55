"""A guard's durable state: one SQLite file of high-water marks, seen requests and follower progress,
and beside it the lock file through which a guard owns the store (``exclusive``) or shares it.

Schema 3::

    meta            key -> value: the registry it is bound to (chain id, address, deployment block
                    and hash), schema_version, high_token (the highest token ever recorded),
                    follow_block / follow_hash (the follower's progress and that block's hash),
                    replay_horizon (requests with a deadline at or below it may have been pruned),
                    rolled_back (why the store stopped trusting the chain, once it did)
    marks           resource_id -> token (the mark), holder of that token, name (for people), when
    seen_requests   EIP-712 digest of each accepted fenced request -> its deadline
    ended_leases    resource_id -> a token whose lease the follower saw end by an event (revoked,
                    released, completed: chainfence.endings' words), and how;
                    a token at its mark with a row here is refused (added in place to schema 3
                    stores: older SDKs ignore the table, and never recorded a row)

Durability: WAL, ``synchronous=FULL``: a mark is on disk before the check
that raised it returns, power loss included. Every read-compare-write runs
inside ``BEGIN IMMEDIATE`` (the database's write lock, taken up front), so
it cannot interleave with another writer, in this process or another.

One store belongs to one registry deployment: opening it for another raises
:class:`~chainfence.errors.GuardStoreMismatch`. Stores written by chainfence
0.1 (schemas 1 and 2) belong to registries of the previous contract
version, which this SDK no longer reads: they are refused, with that said.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from ..errors import GuardError, GuardStoreMismatch

__all__ = ["IDENTITY_KEYS", "SCHEMA_VERSION", "GuardStore"]

SCHEMA_VERSION = "3"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS marks (
        resource_id BLOB PRIMARY KEY,   -- keccak256(name bytes), as on-chain
        token       INTEGER NOT NULL,   -- the highest token accepted (chain tokens fit 48 bits)
        holder      TEXT,               -- the holder of that token, when known
        name        TEXT,               -- the name for people (escaped if untrusted); NULL until known
        accepted_at REAL NOT NULL       -- wall-clock seconds, for operators only
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS seen_requests (
        id       BLOB PRIMARY KEY,      -- the EIP-712 digest of an accepted fenced request
        deadline INTEGER NOT NULL       -- kept until the replay horizon passes it
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS seen_requests_deadline ON seen_requests (deadline)",
    """CREATE TABLE IF NOT EXISTS ended_leases (
        resource_id BLOB PRIMARY KEY,   -- keccak256(name bytes)
        token       INTEGER NOT NULL,   -- the token whose lease ended (only the latest is kept)
        why         TEXT NOT NULL       -- how (chainfence.endings): "revoked", "released", "completed"
    ) WITHOUT ROWID""",
)

#: Keys of `meta` that bind a store to one registry deployment.
IDENTITY_KEYS = ("chain_id", "registry", "deployment_block", "deployment_hash")

#: SQLite INTEGER is signed 64-bit; chain-verified tokens fit in 48 bits.
MAX_STORED_TOKEN = 2**63 - 1

#: One statement reads a mark, its holder, the rollback latch and why the mark's lease ended early, if it
#: did (no row: no mark yet).
READ_MARK = (
    "SELECT token, holder, (SELECT value FROM meta WHERE key = 'rolled_back'), "
    "(SELECT why FROM ended_leases e WHERE e.resource_id = marks.resource_id AND e.token = marks.token) "
    "FROM marks WHERE resource_id = ?"
)
_READ_LATCH = "SELECT value FROM meta WHERE key = 'rolled_back'"


class GuardStore:
    """The SQLite file of one guard: per-thread connections, schema, identity, transactions."""

    def __init__(self, path: Path, *, timeout: float):
        self.path = path
        self._timeout = timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._lock_file: TextIO | None = None

    # -- connections ---------------------------------------------------------

    def conn(self) -> sqlite3.Connection:
        if self._closed:
            raise GuardError(f"guard {str(self.path)!r} is closed")
        if os.getpid() != self._pid:
            self.after_fork()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def after_fork(self) -> None:
        """In a forked child: never touch the parent's SQLite handles (nor close them)."""
        self._local = threading.local()
        self._connections = []
        self._connections_lock = threading.Lock()
        self._pid = os.getpid()

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

    def close(self) -> None:
        """Close the connections (of every thread; never a forked parent's) and release the lock file."""
        with self._connections_lock:
            self._closed = True
            if os.getpid() == self._pid:
                for conn in self._connections:
                    conn.close()
            self._connections.clear()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the flock (once no forked copy holds it either)
            self._lock_file = None

    def lock(self, *, exclusive: bool) -> None:
        """Hold the store's lock file (flock) until :meth:`close`: exclusively for a guard that owns the
        store, shared otherwise. Raises GuardError if it is taken the other way."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: exclusivity is the caller's promise
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(f"{self.path}.lock", "a+")  # held open for the store's life
        try:
            fcntl.flock(self._lock_file.fileno(), (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            self._lock_file = None
            raise GuardError(
                f"{str(self.path)!r} is in use by "
                + ("another guard" if exclusive else "a guard that owns it (exclusive=True)")
            ) from None

    def write(self) -> _WriteTransaction:
        return _WriteTransaction(self.conn())

    # -- schema and identity -----------------------------------------------------

    def bind(self, identity: dict[str, str]) -> None:
        """Create the schema and tie the store to ``identity``, or refuse a foreign or old store."""
        try:
            with self.write() as conn:
                tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "meta" in tables:
                    stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                    version = stored.get("schema_version")
                    if version in ("1", "2"):
                        raise GuardStoreMismatch(
                            f"{str(self.path)!r} was written by chainfence 0.1 (store schema {version}) for a "
                            "registry of the previous contract version, which this release does not read; "
                            "start a new store for the new registry"
                        )
                    if stored and version != SCHEMA_VERSION:
                        raise GuardError(f"{str(self.path)!r} has store schema {version}, not {SCHEMA_VERSION}")
                for statement in _SCHEMA:  # one at a time: executescript() would COMMIT first
                    conn.execute(statement)
                stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                if not stored:
                    conn.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [*identity.items(), ("schema_version", SCHEMA_VERSION), ("high_token", "0")],
                    )
                    return
        except sqlite3.DatabaseError as exc:
            raise GuardError(f"{str(self.path)!r} is not a usable guard store: {exc}") from exc
        differs = sorted(k for k in IDENTITY_KEYS if stored.get(k) != identity[k])
        if differs:
            raise GuardStoreMismatch(
                f"{str(self.path)!r} holds marks of another registry ({', '.join(differs)} differ: "
                f"store has {', '.join(f'{k}={stored.get(k)}' for k in differs)}; "
                f"this registry has {', '.join(f'{k}={identity[k]}' for k in differs)})"
            )

    # -- marks ------------------------------------------------------------------

    @staticmethod
    def read_mark(conn: sqlite3.Connection, resource_id: bytes) -> tuple[int, str | None, str | None, str | None]:
        """(mark, holder of the mark's token, why the store stopped trusting the chain or None,
        why the mark's lease ended early or None)."""
        row = conn.execute(READ_MARK, (resource_id,)).fetchone()
        if row is not None:
            mark, holder, rolled_back, ended = row
            return mark, holder, rolled_back, ended
        latch = conn.execute(_READ_LATCH).fetchone()
        return 0, None, (latch[0] if latch is not None else None), None

    @staticmethod
    def end_lease(conn: sqlite3.Connection, resource_id: bytes, token: int, why: str) -> None:
        """Record that ``token``'s lease ended early (only a newer token replaces the record); inside a
        write transaction. The mark is raised to ``token`` by the caller first."""
        conn.execute(
            "INSERT INTO ended_leases (resource_id, token, why) VALUES (?, ?, ?) "
            "ON CONFLICT (resource_id) DO UPDATE SET token = excluded.token, why = excluded.why "
            "WHERE excluded.token >= ended_leases.token",
            (resource_id, token, why),
        )

    def ended_at_mark(self) -> list[bytes]:
        """Resources whose mark's lease ended early."""
        return [
            row[0]
            for row in self.conn().execute(
                "SELECT m.resource_id FROM marks m JOIN ended_leases e ON e.resource_id = m.resource_id "
                "AND e.token = m.token"
            )
        ]

    @staticmethod
    def raise_mark(
        conn: sqlite3.Connection, resource_id: bytes, token: int, holder: str | None, name: str | None
    ) -> None:
        """Raise the resource's mark to ``token`` (never lowers it); call inside a write transaction."""
        conn.execute(
            "INSERT INTO marks (resource_id, token, holder, name, accepted_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (resource_id) DO UPDATE SET token = excluded.token, holder = excluded.holder, "
            "accepted_at = excluded.accepted_at, name = COALESCE(excluded.name, marks.name) "
            "WHERE excluded.token > marks.token",
            (resource_id, token, holder, name, time.time()),
        )
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'high_token' AND CAST(value AS INTEGER) < ?", (str(token), token)
        )

    @staticmethod
    def name_resource(conn: sqlite3.Connection, resource_id: bytes, name: str) -> None:
        """Remember the name of a resource that has a mark and no name yet."""
        conn.execute("UPDATE marks SET name = ? WHERE resource_id = ? AND name IS NULL", (name, resource_id))

    def marks(self) -> list[tuple[bytes, str | None, int, str | None]]:
        """Every (resource_id, name, token, holder)."""
        return self.conn().execute("SELECT resource_id, name, token, holder FROM marks").fetchall()

    def newest_marks(self, count: int) -> list[tuple[bytes, str | None, int, str | None]]:
        """The ``count`` highest marks: (resource_id, name, token, holder)."""
        return (
            self.conn()
            .execute("SELECT resource_id, name, token, holder FROM marks ORDER BY token DESC LIMIT ?", (count,))
            .fetchall()
        )

    # -- meta -------------------------------------------------------------------

    @staticmethod
    def meta(conn: sqlite3.Connection, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    @staticmethod
    def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
        """Set ``key``; call inside a write transaction."""
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def high_token(self) -> int:
        return int(self.meta(self.conn(), "high_token") or 0)

    @staticmethod
    def proven_block(conn: sqlite3.Connection) -> int:
        """The highest trusted header's block at which a mark was raised from a proof (0: none): the
        proven mode's evidence of a rollback counts only at a header no older than it."""
        return int(GuardStore.meta(conn, "proven_block") or 0)

    @staticmethod
    def raise_proven_block(conn: sqlite3.Connection, block: int) -> None:
        """Record that a mark was raised from a proof at ``block``; call inside a write transaction."""
        if GuardStore.proven_block(conn) < block:
            GuardStore.set_meta(conn, "proven_block", str(block))

    def latch_rollback(self, reason: str) -> None:
        """Record, durably, that the chain lost history this store relied on (first reason wins)."""
        with self.write() as conn:
            if self.meta(conn, "rolled_back") is None:
                self.set_meta(conn, "rolled_back", reason)

    # -- fenced requests -------------------------------------------------------

    @staticmethod
    def remember_request(conn: sqlite3.Connection, digest: bytes, deadline: int) -> bool:
        """Record an accepted request; False if it was recorded before. Inside a write transaction."""
        try:
            conn.execute("INSERT INTO seen_requests (id, deadline) VALUES (?, ?)", (digest, deadline))
        except sqlite3.IntegrityError:
            return False
        return True

    @staticmethod
    def prune_requests(conn: sqlite3.Connection, horizon: int) -> None:
        """Forget requests whose deadline is at or below ``horizon``, and say so in the meta (the horizon
        only rises), so that none of them can be accepted again whatever the clock does later."""
        current = int(GuardStore.meta(conn, "replay_horizon") or 0)
        if horizon > current:
            GuardStore.set_meta(conn, "replay_horizon", str(horizon))
            conn.execute("DELETE FROM seen_requests WHERE deadline <= ?", (horizon,))

    @staticmethod
    def replay_horizon(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM meta WHERE key = 'replay_horizon'").fetchone()
        return int(row[0]) if row is not None else 0


class _WriteTransaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error): takes the write lock up front,
    so a read-compare-write inside it cannot interleave with another writer."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self._conn.execute("BEGIN IMMEDIATE")
        return self._conn

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self._conn.execute("COMMIT")
        else:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
