"""Fenced writes in one SQL transaction: the token check and the write commit together, or not at all.

A guard's ``check()`` followed by a write is two steps; a holder superseded
in between still lands that one write. When the protected data lives in a
SQL database, put the fence there too::

    with fenced_transaction(conn, registry, "reports/daily", lease.token) as cur:
        cur.execute("UPDATE reports SET body = ? WHERE day = ?", (body, day))

Inside one transaction: the resource's mark row (table ``chainfence_marks``)
is locked, the token compared with it, the mark raised with a conditional
``UPDATE ... WHERE token <= :token``, then your statements run; all of it
commits on a clean exit and rolls back on any exception. Works with
``sqlite3`` connections (``BEGIN IMMEDIATE``: the database's write lock) and
psycopg 3 connections to PostgreSQL 13+ (``SELECT ... FOR UPDATE``: the row
lock).

What holds
----------

For every resource, writes that commit through ``fenced_transaction``
commit in token order: once a write with token ``t`` has committed, no
write with a token below ``t`` ever commits through the fence (it gets
:class:`~chainfence.errors.StaleToken`). Writers of one resource serialise
on its mark row, and the comparison, the raised mark and your statements
are one transaction. A token may raise the mark only if the chain vouches
for it: it is the resource's current, live token at the latest block (or
``verify`` says so) and, with ``confirmations=k`` (default: the chain's
setting), the block that issued it has ``k`` blocks on top
(:class:`~chainfence.errors.TokenNotConfirmed` until then). A refused token
writes nothing and leaves the mark as it was.

Each time the fence asks the chain it also checks that the chain has not
gone back below what the marks table has seen: the resource's on-chain
token below its mark, the registry's latest token below the table's
highest mark, or (``strict``) the mark's token number now held by another
account than the holder stored with the mark all raise
:class:`~chainfence.errors.ChainRolledBack`, and nothing is written.

Cost: a transaction at the mark asks the chain nothing. A new epoch (and,
with ``strict``, every transaction) reads the resource's lease record (one
``eth_call``), the registry's latest token when the table's highest mark is
above the resource's token (one more), and with confirmations the block
number and the lease record at the confirmed block (two more).

Assumptions, and where it stops
-------------------------------

- ``token == mark`` (the same epoch writing again) is accepted without a
  chain call, unless ``strict=True`` (or ``verify`` is a guard's check: the
  guard's mode then decides, a ``follow`` guard refusing a revoked lease
  without a chain call). Timeline: A's lease ends; B acquires
  but has not written yet; A writes again at its own mark, and commits
  (before any of B's writes, so the order still holds). ``strict`` asks
  the chain every time and refuses A at once
  (:class:`~chainfence.errors.LeaseExpired`); it is also what notices, at
  once, a token number that a rolled-back chain gave to another holder.
- A chain that rolled back is noticed only when the fence asks it (a new
  epoch, or every time with ``strict``), and only once it is below what
  this table has seen. A reorg deeper than ``confirmations`` is outside
  what confirmations can promise.
- The database keeps what it committed: a database restored from a backup
  has forgotten marks, and tokens below them may write again.
- One marks table per registry (``table=`` names another): marks of two
  registries in one table would fence one token space with another's, and
  read as a rollback.
- The fenced transaction is the only thing the connection does while the
  block runs (no other thread on it).

Believing no provider: ``headers=``
-----------------------------------

Everything above believes the JSON-RPC provider the registry talks to. With
``headers=QuorumHeaders([...], k=...)`` (or ``TrustedHeaders(url)``) every
chain read of the fence is a proof instead (:mod:`chainfence.proofs`): the
resource's lease slot proven with ``eth_getProof`` (from ``proof_provider``,
default the registry's own node, which need not be honest) against a header
the header source vouches for, judged as strict mode judges it, and with
``confirmations=k`` the same token and holder proven ``k`` blocks below that
header. Combine with ``strict=True`` to prove every transaction, not only a
new epoch. An answer that does not verify raises before anything is written
(:class:`~chainfence.errors.ProofInvalid` naming the provider,
:class:`~chainfence.errors.HeadersDisagree`,
:class:`~chainfence.errors.HeaderStale`,
:class:`~chainfence.errors.ProviderUnavailable`,
:class:`~chainfence.errors.ProofsNotServed`); never a fall back to
believing one provider. The rollback checks change: the proven token below
the mark is :class:`~chainfence.errors.HeaderBehind` (the marks table does
not record at which block a mark was proven, so a header source whose head
moved back cannot be told from a rollback: refused either way, nothing
written); the same token number proven with another holder than the mark's
is :class:`~chainfence.errors.ChainRolledBack`; the registry-wide latest
token is not read.

Statements that end the transaction early
-----------------------------------------

The fence holds only while its transaction is the open one. If a statement
ends it, the fence raises :class:`~chainfence.errors.FenceBroken` on exit
and nothing after that statement takes effect:

- SQLite (any legacy ``isolation_level``; Python 3.12's ``autocommit``
  too): the application's ``BEGIN``/``COMMIT``/``END``/``ROLLBACK``,
  ``commit()``, ``rollback()``, ``executescript()`` (which commits first)
  and ``isolation_level = None`` (which commits) are refused while the
  block runs, so nothing at all is committed. A statement that makes SQLite
  roll the transaction back (``INSERT OR ROLLBACK`` on a conflict,
  ``RAISE(ROLLBACK)`` in a trigger, some I/O errors) cannot be refused:
  every statement that starts after it is interrupted before it writes,
  however it reaches SQLite (the yielded cursor, ``conn.execute``, a
  statement sqlite3 had cached). Both are connection hooks, installed for
  the block only (an authorizer and a trace callback): they replace any the
  application had set, and are removed, not restored, on exit. Savepoints
  nest inside the fence and are allowed. With ``autocommit=False`` the
  fence takes over the transaction sqlite3 keeps open: changes still
  pending on the connection commit or roll back with the fenced ones, and
  the write lock is taken by the fence's first write rather than up front,
  so under contention it can fail with ``database is locked`` (retry)
  where ``BEGIN IMMEDIATE`` would have waited.
  Not covered: incremental blob I/O (``Connection.blobopen``) runs no
  statement, so neither hook sees it: a blob written after such a rollback
  is not stopped (the fence still raises). A cursor still being read when a
  statement was interrupted keeps SQLite's interrupt in force for the
  connection until that cursor is exhausted or closed.
- PostgreSQL: a statement cannot be refused. An application ``COMMIT``
  inside the block commits what the block wrote so far (still under the
  row lock, so still in order). For the block's duration the fence turns
  the connection's autocommit off and ``read_only`` on (its own transaction
  asks for ``READ WRITE``), and gives both back on exit: statements after a
  ``COMMIT`` or ``ROLLBACK`` run in a read-only transaction psycopg opens,
  so they can neither write nor commit. That is also why autocommit
  connections are accepted. At the end the fence checks that the open
  transaction is still the one that locked the mark row
  (``pg_current_xact_id()``). An error the block catches has aborted the
  transaction: a broken fence too. An application that, after ending the
  transaction itself, issues ``SET TRANSACTION READ WRITE`` or changes those
  settings is not stopped.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from .._core import log as _log
from .._sdk import validate as _validate
from .._sdk.lease_state import judge
from .._sdk.rollback import Doubt
from ..errors import (
    ChainRolledBack,
    FenceBroken,
    HeaderBehind,
    InvalidInput,
    StaleToken,
    TokenNotCurrent,
)
from ..lease import LeaseInfo

if TYPE_CHECKING:
    from .._node.headers import HeaderSource
    from ..proofs import ProvenReader

logger = _log.get(__name__)

__all__ = ["fenced_transaction"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

#: The most blocks the SDK waits for (the chain's own bound).
_MAX_CONFIRMATIONS = 1_000


@contextmanager
def fenced_transaction(
    conn: Any,
    registry: Any,
    resource: str,
    token: int,
    *,
    table: str = "chainfence_marks",
    verify: Callable[[str, int], Any] | None = None,
    confirmations: int | None = None,
    strict: bool = False,
    headers: HeaderSource | None = None,
    proof_provider: Any = None,
) -> Iterator[Any]:
    """A cursor inside a transaction that commits only if ``token`` may write to ``resource``.

    Args:
        conn: a ``sqlite3`` connection, or a psycopg 3 connection to PostgreSQL
            13+, outside any transaction (with Python 3.12's ``autocommit=False``,
            the transaction sqlite3 keeps open is taken over: changes still
            pending on it commit or roll back with the fenced ones).
        registry: the registry whose tokens fence the resource.
        table: the marks table (created if missing; one per registry).
        verify: replaces the check that ``token`` is the resource's current,
            live token (default: from the registry's lease record, read with the
            rollback checks); pass a guard's ``check`` to use its mode. The
            rollback checks and confirmations apply either way. When given, it
            is also asked at the mark (the same epoch writing again), so a
            ``strict`` guard asks the chain there and a ``follow`` guard refuses
            a lease its follower saw revoked.
        confirmations: blocks on top of the issuing block before a token may
            raise the mark (default: the chain's setting).
        strict: ask the chain on every transaction, not only for a new epoch.
        headers: believe no provider (module docstring, "Believing no provider"): every chain read
            of the fence proven against a header this source vouches for
            (:class:`~chainfence.proofs.QuorumHeaders`, :class:`~chainfence.proofs.TrustedHeaders`).
        proof_provider: where proofs come from with ``headers`` (a URL or a Chain; default: the
            registry's chain).

    Raises (and writes nothing): :class:`~chainfence.errors.StaleToken` below
    the mark; the chain's verdict for a token it asks about
    (:class:`~chainfence.errors.TokenNotCurrent` subclasses, among them
    :class:`~chainfence.errors.TokenNotConfirmed`);
    :class:`~chainfence.errors.ChainRolledBack` if the chain went back below
    what the table has seen; :class:`~chainfence.errors.FenceBroken` on exit
    if a statement ended the transaction early (module docstring);
    :class:`~chainfence.errors.InvalidInput` for bad arguments, before
    touching the database; with ``headers``, the proven mode's refusals
    (:class:`~chainfence.errors.UnverifiedAnswer` subclasses,
    :class:`~chainfence.errors.ProviderUnavailable`,
    :class:`~chainfence.errors.ProofsNotServed`).
    """
    resource_id = _validate.resource_id(resource)
    token = _validate.token(token)
    if not isinstance(table, str) or not _IDENTIFIER.fullmatch(table):
        raise InvalidInput(f"table must be a plain SQL identifier, got {table!r}")
    if verify is not None and not callable(verify):
        raise InvalidInput(f"verify must be callable (resource, token) or None, got {verify!r}")
    if not isinstance(strict, bool):
        raise InvalidInput(f"strict must be True or False, got {strict!r}")
    if confirmations is None:
        confirmations = registry.chain.confirmations
    if (
        isinstance(confirmations, bool)
        or not isinstance(confirmations, int)
        or not 0 <= confirmations <= _MAX_CONFIRMATIONS
    ):
        raise InvalidInput(f"confirmations must be an int from 0 to {_MAX_CONFIRMATIONS}, got {confirmations!r}")
    if proof_provider is not None and headers is None:
        raise InvalidInput("proof_provider needs headers= (the proven mode's header source)")
    reader = None if headers is None else _reader(registry, headers, proof_provider)
    dialect = _dialect(conn)
    fence = _Fence(registry, resource, resource_id, token, verify, confirmations, strict, reader)
    if dialect == "sqlite":
        yield from _sqlite(conn, table, fence)
    else:
        yield from _postgres(conn, table, fence)


#: One proof reader per (header source, registry, proof provider): a reader asks its provider once
#: whether it serves eth_getProof at all; a transaction should not ask again.
_READERS: weakref.WeakKeyDictionary[Any, dict[tuple[str, Any], ProvenReader]] = weakref.WeakKeyDictionary()
_READERS_LOCK = threading.Lock()


def _reader(registry: Any, headers: HeaderSource, proof_provider: Any) -> ProvenReader:
    from ..proofs import ProvenReader

    provider = registry.chain if proof_provider is None else proof_provider
    key = (registry.address, provider if isinstance(provider, str) else id(provider))
    with _READERS_LOCK:
        readers = _READERS.setdefault(headers, {})
        reader = readers.get(key)
        if reader is None:
            reader = readers[key] = ProvenReader(registry.address, headers=headers, provider=provider)
        return reader


def _dialect(conn: Any) -> str:
    if isinstance(conn, sqlite3.Connection):
        return "sqlite"
    if type(conn).__module__.startswith("psycopg"):
        import psycopg

        if isinstance(conn, psycopg.Connection):
            return "postgres"
    raise InvalidInput(f"unsupported connection {type(conn).__name__}: use sqlite3 or psycopg 3 (not async)")


# ---------------------------------------------------------------------------
# The decision, shared by both dialects
# ---------------------------------------------------------------------------


class _Admission(NamedTuple):
    #: The marks row must be written (the token, and the holder below).
    write: bool
    #: The holder of the token on-chain, when the chain was asked.
    holder: str | None


class _Fence(NamedTuple):
    registry: Any
    resource: str
    resource_id: bytes
    token: int
    verify: Callable[[str, int], Any] | None
    confirmations: int
    strict: bool
    reader: ProvenReader | None = None

    def admit(self, mark: int, holder: str | None, highest: Callable[[], int]) -> _Admission:
        """Whether and how the marks row changes; raises if the token may not write.

        ``mark`` and ``holder`` are the resource's row, read under its lock;
        ``highest()`` reads the highest mark of the table (asked only when
        the chain is).
        """
        token = self.token
        if token < mark:
            raise StaleToken(token=token, current_token=mark, resource=self.resource, resource_id=self.resource_id)
        if token == mark and not self.strict:
            if self.verify is not None:
                # The same epoch again: the verifier's own mode judges it (a guard's check at its mark is a
                # store read; a follow guard's store knows a revoked lease, a strict guard asks the chain).
                self.verify(self.resource, token)
            return _Admission(False, holder)  # the same epoch writing again: no chain call of the fence's own
        info = self._ask_chain(mark, holder, highest) if self.reader is None else self._ask_proven(mark, holder)
        chain_holder = info.holder if info is not None and info.token == token else None
        if token > mark:
            logger.info("fence admitted new token resource=%s token=%d previous_mark=%d", self.resource, token, mark)
            return _Admission(True, chain_holder)
        # strict, same epoch: record the holder if the row predates the holder column.
        return _Admission(holder is None and chain_holder is not None, chain_holder or holder)

    def _ask_chain(self, mark: int, holder: str | None, highest: Callable[[], int]) -> LeaseInfo | None:
        """The registry's verdict on the token (as guards get it), after the rollback checks. Evidence of
        a rollback is believed only once the chain, asked again, says so too (:mod:`chainfence._sdk.rollback`:
        anvil answers a read at ``latest`` from the block before while it mines)."""
        try:
            return self._ask_chain_once(mark, holder, highest, doubt=True)
        except Doubt as doubt:
            logger.warning("fence resource=%s token=%d: %s; asking the chain again", self.resource, self.token, doubt)
        return self._ask_chain_once(mark, holder, highest, doubt=False)

    def _ask_chain_once(
        self, mark: int, holder: str | None, highest: Callable[[], int], *, doubt: bool
    ) -> LeaseInfo | None:
        """One look of :meth:`_ask_chain`; with ``doubt``, evidence of a rollback raises :class:`Doubt`."""
        registry, resource, token = self.registry, self.resource, self.token
        refused: TokenNotCurrent | None = None
        info: LeaseInfo | None = None
        try:
            if self.verify is None:
                info = registry.check_current(resource, token, confirmations=self.confirmations)
            else:
                info = registry.last_lease(resource)
        except TokenNotCurrent as not_current:
            refused = not_current
        except ChainRolledBack as lost:  # the SDK's own memory of this registry disagrees with the chain
            raise self._rolled_back(str(lost), lost.seen_token or mark, lost.chain_token or 0, doubt=doubt) from lost
        chain_token = refused.current_token if refused is not None else (0 if info is None else info.token)
        # Tokens only go up in a chain's history: anything below what this table saw means the
        # chain lost history, and the numbers in between may be issued again to other holders.
        if chain_token < mark:
            raise self._rolled_back(
                f"{resource!r} has token {chain_token} on-chain, below the mark {mark} this table accepted",
                mark,
                chain_token,
                doubt=doubt,
            )
        seen = highest()
        if seen > chain_token:  # else the registry's latest token (>= chain_token) cannot be below it
            latest = registry.latest_token(block="latest")
            if latest < seen:
                raise self._rolled_back(
                    f"the registry's latest token is {latest}, below token {seen} this table accepted",
                    seen,
                    latest,
                    doubt=doubt,
                )
        if token == mark and holder is not None and info is not None and info.token == token and info.holder != holder:
            raise self._rolled_back(
                f"token {token} of {resource!r} is held by {info.holder} on-chain, but was {holder}'s when it "
                "became the mark: the number was issued again",
                mark,
                chain_token,
                doubt=doubt,
            )
        if refused is not None:
            raise refused
        if self.verify is not None:
            self.verify(resource, token)
            if self.confirmations:
                registry.check_current(resource, token, confirmations=self.confirmations)
        return info

    def _ask_proven(self, mark: int, holder: str | None) -> LeaseInfo:
        """:meth:`_ask_chain` believing no provider (module docstring): the lease proven at the header
        source's current header, judged as strict mode judges it."""
        reader, resource, token = self.reader, self.resource, self.token
        assert reader is not None
        header = reader.headers.current()
        info = reader.lease_at(self.resource_id, header=header)
        if info.token < mark:
            logger.warning(
                "fence refused resource=%s token=%d: block %d reads token %d, below the mark %d",
                resource,
                token,
                header.number,
                info.token,
                mark,
            )
            raise HeaderBehind(block=header.number, chain_token=info.token, mark=mark, resource=resource)
        if token == mark and holder is not None and info.token == token and info.holder != holder:
            raise self._rolled_back(
                f"token {token} of {resource!r} is held by {info.holder} at block {header.number} (proven), but was "
                f"{holder}'s when it became the mark: the number was issued again",
                mark,
                info.token,
            )
        judge(info, token, resource=resource, resource_id=self.resource_id)
        if self.verify is not None:
            self.verify(resource, token)
        if self.confirmations:
            reader.require_confirmed(resource, token, info.holder, header=header, confirmations=self.confirmations)
        return info

    def _rolled_back(self, what: str, seen: int, chain: int, *, doubt: bool = False) -> ChainRolledBack | Doubt:
        if doubt:
            return Doubt(what)
        logger.warning("fence found the chain rolled back resource=%s token=%d: %s", self.resource, self.token, what)
        return ChainRolledBack(
            f"{what}: the chain rolled back; nothing was written",
            seen_token=seen,
            chain_token=chain,
            resource=self.resource,
        )


def _fence_broken(fence: _Fence, reason: str) -> FenceBroken:
    logger.warning("fenced transaction broken resource=%s token=%d: %s", fence.resource, fence.token, reason)
    return FenceBroken(
        f"the fenced transaction of {fence.resource!r} (token {fence.token}) was ended early: {reason}; "
        "nothing after that was committed",
        resource=fence.resource,
        token=fence.token,
        reason=reason,
    )


# ---------------------------------------------------------------------------
# SQLite
# ---------------------------------------------------------------------------


def _sqlite(conn: sqlite3.Connection, table: str, fence: _Fence) -> Iterator[sqlite3.Cursor]:
    # Python 3.12+ autocommit=False (PEP 249 mode): sqlite3 keeps a transaction open at all
    # times, so the fence takes that one over instead of opening its own.
    keeps_transaction = getattr(conn, "autocommit", None) is False
    if conn.in_transaction and not keeps_transaction:
        raise InvalidInput("fenced_transaction needs a connection outside any transaction (it opens its own)")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (resource_id BLOB PRIMARY KEY, name TEXT NOT NULL, "
        "token INTEGER NOT NULL, holder TEXT)"
    )
    if conn.in_transaction and not keeps_transaction:  # the CREATE opened an implicit transaction
        conn.commit()
    cursor = conn.cursor()
    try:
        if not conn.in_transaction:
            cursor.execute("BEGIN IMMEDIATE")  # the database's write lock, up front
        # With autocommit=False (no BEGIN IMMEDIATE) this INSERT is what takes the write lock.
        cursor.execute(
            f"INSERT INTO {table} (resource_id, name, token) VALUES (?, ?, 0) ON CONFLICT (resource_id) DO NOTHING",
            (fence.resource_id, fence.resource),
        )
        if not cursor.execute("SELECT 1 FROM pragma_table_info(?) WHERE name = 'holder'", (table,)).fetchone():
            cursor.execute(f"ALTER TABLE {table} ADD COLUMN holder TEXT")  # a table of chainfence 0.1
        mark, holder = cursor.execute(
            f"SELECT token, holder FROM {table} WHERE resource_id = ?", (fence.resource_id,)
        ).fetchone()
        admission = fence.admit(
            mark, holder, lambda: cursor.execute(f"SELECT coalesce(max(token), 0) FROM {table}").fetchone()[0]
        )
        if admission.write:
            cursor.execute(
                f"UPDATE {table} SET token = ?, holder = ? WHERE resource_id = ? AND token <= ?",
                (fence.token, admission.holder, fence.resource_id, fence.token),
            )
            if cursor.rowcount != 1:  # pragma: no cover - the lock makes this impossible; the WHERE makes it safe
                raise StaleToken(token=fence.token, current_token=mark, resource=fence.resource)
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
            raise _fence_broken(fence, broken) from exc
        raise
    else:
        broken = watch.stop()
        if broken is not None:
            _sqlite_end(conn, "ROLLBACK", keeps_transaction)
            raise _fence_broken(fence, broken)
        try:
            _sqlite_end(conn, "COMMIT", keeps_transaction)
        except BaseException:
            _sqlite_end(conn, "ROLLBACK", keeps_transaction)
            raise
    finally:
        with contextlib.suppress(sqlite3.ProgrammingError):  # closed inside the block
            cursor.close()


def _sqlite_end(conn: sqlite3.Connection, statement: str, keeps_transaction: bool) -> None:
    """COMMIT or ROLLBACK the fence's transaction, whichever transaction control the connection uses.

    Explicit statements, because ``commit()`` does nothing with Python 3.12's ``autocommit=True``;
    ``commit()``/``rollback()`` with ``autocommit=False``, which open the next transaction as that
    mode promises (and a ``BEGIN`` if a statement had already ended the fence's). A connection
    closed inside the fence was rolled back by SQLite: nothing to do.
    """
    try:
        if not conn.in_transaction:
            if keeps_transaction:  # what autocommit=False promises: a transaction is always open
                conn.execute("BEGIN")
        elif keeps_transaction:
            conn.commit() if statement == "COMMIT" else conn.rollback()
        else:
            conn.execute(statement)
    except sqlite3.ProgrammingError:
        if statement == "COMMIT":
            raise


class _SqliteWatch:
    """Keeps every statement of the block inside the fence's SQLite transaction, or stops it.

    Two hooks of the connection, installed while the block runs:

    - an authorizer, which SQLite consults when it prepares a statement, refuses transaction
      control (``BEGIN``, ``COMMIT``, ``END``, ``ROLLBACK``; also the ``COMMIT`` that
      ``executescript()``, ``commit()`` and ``isolation_level = None`` issue, and the implicit
      ``BEGIN`` of the legacy ``isolation_level``). Installing it expires every prepared
      statement, so statements sqlite3 cached before the fence are prepared again and seen too.
      ``SAVEPOINT``/``RELEASE``/``ROLLBACK TO`` pass while the fence's transaction is open: it
      is a ``BEGIN``, so a savepoint only nests inside it and releasing one commits nothing;
    - a trace callback, which SQLite calls as each statement starts executing (cached ones
      included): if the connection is no longer in a transaction, a statement rolled the fence's
      back and the new one would run in autocommit: it is interrupted before it can write
      (SQLite checks for an interrupt as a statement's program leaves its preamble, before any
      row or schema entry is touched; tests/faults/test_sql_escape.py tries every kind of
      write), and so is every statement after it.

    Either way the fence is broken, and ``stop()`` says why.
    """

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn
        self._reason: str | None = None  # the first thing that broke the fence
        self._ended = False
        conn.set_authorizer(self._authorize)
        conn.set_trace_callback(self._trace)

    def _authorize(self, action: int, operation: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_TRANSACTION:
            self._reason = self._reason or f"the application's {operation} was refused inside the fence"
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_SAVEPOINT and not self._conn.in_transaction:
            # Outside a transaction SAVEPOINT opens one (and RELEASE commits it): not a nested one.
            self._reason = self._reason or f"a savepoint {operation} was refused: the transaction had ended"
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _trace(self, _statement: str) -> None:
        # Sticky: once the fence's transaction is gone, nothing that follows may run, even in a
        # transaction some statement managed to open again.
        if self._ended or not self._conn.in_transaction:
            if not self._ended:
                self._ended = True
                self._reason = self._reason or "a statement rolled the transaction back; later ones were interrupted"
            self._conn.interrupt()

    def stop(self) -> str | None:
        """Remove both hooks; why the fence broke, or None if its transaction is intact."""
        try:
            self._conn.set_authorizer(None)
            self._conn.set_trace_callback(None)
            ended = not self._conn.in_transaction
        except sqlite3.ProgrammingError:
            return "the connection was closed inside the fence"
        if self._reason is not None:
            return self._reason
        if ended:
            return "a statement rolled the transaction back"
        return None


# ---------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------


def _postgres(conn: Any, table: str, fence: _Fence) -> Iterator[Any]:
    import psycopg

    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise InvalidInput("fenced_transaction needs a connection outside any transaction (it opens its own)")
    if conn.read_only:
        raise InvalidInput("fenced_transaction writes: the connection is set read_only")
    _postgres_schema(conn, table)
    # PostgreSQL cannot be told to refuse a COMMIT or ROLLBACK. So, while the fence lasts, nothing
    # may autocommit and every transaction psycopg opens is READ ONLY, but the fence's own, which
    # asks for READ WRITE: should a statement end it, the statements after it can neither write
    # nor commit. The connection gets its settings back on exit.
    saved = conn.autocommit, conn.read_only
    conn.autocommit, conn.read_only = False, True
    try:
        yield from _postgres_fenced(conn, table, fence)
    finally:
        if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.autocommit, conn.read_only = saved


def _postgres_schema(conn: Any, table: str) -> None:
    """Create the marks table, or add the holder column to one of chainfence 0.1, in its own
    transaction (a refused write must not roll it back). The catalog is read first: ALTER TABLE
    would take an exclusive lock on the table every time, even with IF NOT EXISTS."""
    import psycopg

    try:
        with conn.transaction():
            exists, has_holder = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL, EXISTS (SELECT 1 FROM pg_attribute "
                "WHERE attrelid = to_regclass(%s) AND attname = 'holder' AND NOT attisdropped)",
                (table, table),
            ).fetchone()
            if not exists:
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (resource_id BYTEA PRIMARY KEY, name TEXT NOT NULL, "
                    "token BIGINT NOT NULL, holder TEXT)"
                )
            elif not has_holder:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS holder TEXT")
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable, psycopg.errors.DuplicateColumn):
        pass  # created or migrated concurrently by another connection


def _postgres_fenced(conn: Any, table: str, fence: _Fence) -> Iterator[Any]:
    with conn.transaction(), conn.cursor() as cursor:  # BEGIN READ ONLY, see above
        cursor.execute("SET TRANSACTION READ WRITE")
        cursor.execute(
            f"INSERT INTO {table} (resource_id, name, token) VALUES (%s, %s, 0) ON CONFLICT (resource_id) DO NOTHING",
            (fence.resource_id, fence.resource),
        )
        # The id of the transaction that holds the row lock: still the open one at the end?
        cursor.execute(
            f"SELECT token, holder, pg_current_xact_id()::text FROM {table} WHERE resource_id = %s FOR UPDATE",
            (fence.resource_id,),
        )
        mark, holder, xid = cursor.fetchone()

        def highest() -> int:
            return int(cursor.execute(f"SELECT coalesce(max(token), 0) FROM {table}").fetchone()[0])

        admission = fence.admit(mark, holder, highest)
        if admission.write:
            cursor.execute(
                f"UPDATE {table} SET token = %s, holder = %s WHERE resource_id = %s AND token <= %s",
                (fence.token, admission.holder, fence.resource_id, fence.token),
            )
            if cursor.rowcount != 1:  # pragma: no cover - the row lock makes this impossible
                raise StaleToken(token=fence.token, current_token=mark, resource=fence.resource)
        try:
            yield cursor
        except Exception as exc:
            broken = _postgres_broken(conn, cursor, xid, exc)
            if broken is not None:
                raise _fence_broken(fence, broken) from exc
            raise
        broken = _postgres_broken(conn, cursor, xid, None)
        if broken is not None:
            raise _fence_broken(fence, broken)  # inside conn.transaction(): rolled back


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
