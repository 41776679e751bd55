"""The audit index: the registry's events copied into a local SQLite file, and the questions it answers.

::

    index = AuditIndex("audit.sqlite")
    index.sync(registry)                              # incremental; resumable; reorg-aware
    for lease in index.history("reports/daily"):      # every token of a resource, oldest first
        print(lease.token, lease.holder, lease.reason, lease.renewals, lease.ended, lease.ended_at)
    index.holder_at("reports/daily", time=1_763_800_987)   # who held it at 12:03:07?

The store
    ``events`` is every registry event as logged (one row per log, keyed by
    block, transaction hash and log index: unique whether the node numbers
    ``logIndex`` per block or per transaction; ordered by block, transaction
    index and log index); ``leases`` is one row per fencing token, kept up
    to date in the same transaction as the events it comes from;
    ``resources`` holds names (as the bytes logged, and only a name that
    hashes to its resource id: anyone can log a ``ResourceNamed`` for any
    bytes by calling the contract, never for another resource's id), each
    resource's lease count and latest token; ``blocks`` the hash and
    timestamp of every block an event came from, and of every page's last
    block; ``meta`` the registry, the chain, the events count and the
    cursor: the last block indexed. How events become rows (and how a
    lease's end is named) is the projection's
    (:mod:`chainfence.audit._projection`); this module holds the file, the
    sync and the verification against the chain, and the queries. Every
    query reads by an index: nothing it does grows with the file for the
    same answer (``tests/unit/test_audit_plans.py``).

Sync (:meth:`AuditIndex.sync`)
    Reads ``eth_getLogs`` page by page through :func:`chainfence._node.events.fetch`
    (bounded ranges, halved when a provider refuses), fetches the header of
    every block of the page in batches (:meth:`Rpc.blocks <chainfence._node.rpc.Rpc.blocks>`),
    checks each block's answer for completeness against its header
    (:mod:`chainfence._node.completeness`: ``logsBloom``, then the receipts
    against ``receiptsRoot``) and stops before the first block whose logs
    the answer may lack (a lagging or withholding log backend delays the
    index, never holes it), and writes each page — its events, its leases'
    changes, its blocks and the cursor — in one SQLite transaction. With
    ``completeness="receipts"`` every block whose bloom may hold a registry
    event is settled by its receipts, so an event withheld beside an
    answered one of the same kind (which sets no new bloom bit) or with
    its data rewritten holds the sync too. A crash
    (a kill, a failed request) loses at most the page being written: the
    next sync resumes after the cursor, with no duplicate and no gap.

    Confirmations: the target is the head less the chain's confirmations
    (0 on dev chains, 3 elsewhere) unless told; blocks a sync with fewer
    confirmations took are withdrawn (rewound) first, so every answer is as
    of a confirmed block.

    Reorgs: before each page the cursor block's hash is compared with the
    chain's. On a mismatch (and only then) the index rewinds to the newest
    block it holds whose hash the chain still has (the fork point), deletes
    everything after it, replays the leases it touched, and indexes again
    from there. A provider whose history never settles (another hash for a
    block each time it is asked: a liar, or a load balancer over nodes on
    different forks) is refused after :data:`MAX_REWINDS` rewinds in one
    sync (:class:`~chainfence.errors.HistoryUnsettled`); from its first
    rewind on, a sync writes in one transaction, committed when it returns,
    so that error (or any other after a rewind) leaves the index as it was
    before the rewind.

    An answer the sync cannot index is refused, typed, with nothing of its
    page indexed (:class:`~chainfence.errors.LogsIncomplete`: the cursor
    stays before the page, and the next sync asks again): a log of a block
    outside the range asked, or that does not read
    (:func:`chainfence._node.events.fetch`), or whose block hash is not its
    header's (a block replaced while reading, or an invented log: the
    blocks the index holds are the chain's, so there is nothing to rewind).

Verify (:meth:`AuditIndex.verify`)
    Every event against the chain's logs, every block's hash and timestamp
    and every event's time against the headers, every lease and name
    against what the chain's events make at the headers' times; with
    ``proofs=`` (a :class:`chainfence.proofs.ProvenReader`), against headers
    no single provider controls: vouched blocks, their receipts against the
    vouched ``receiptsRoot``, every resource's latest lease against its
    proven storage slot, and the index's highest token against the
    registry's latest (its proven counter).

Queries read the file only; each result says how far it reaches
(:meth:`AuditIndex.status`). ``expired`` for a lease nobody ended is judged
at the chain time of the index's last block (``as_of``).

Lists (``history``, ``history_by_id``, ``leases_of``, ``current``,
``takeovers``, ``completions``, ``resources``, ``events``) answer a
:class:`Page` of at most ``limit`` rows (:data:`DEFAULT_LIMIT`, 100) and a
cursor for the next (``page.next``, passed back as ``after=``), each page a
bounded walk of one SQLite index (:mod:`chainfence.audit._pages`: the
cursor, what it guarantees while a sync appends and across a reorg).
:meth:`AuditIndex.every` reads every row, a page at a time::

    page = index.takeovers(since=t)                    # the first 100
    page = index.takeovers(since=t, after=page.next)   # the next 100 (page.next is None at the end)
    for takeover in index.every(index.takeovers, since=t): ...
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from eth_utils.crypto import keccak

from .. import endings
from .._core import log as _log
from .._core import metrics as _metrics
from .._node import completeness as _completeness
from .._node import events as _events
from .._sdk import names as _names
from .._sdk import validate as _validate
from ..chain import Chain
from ..endings import End
from ..errors import AuditIndexMismatch, ChainfenceError, HistoryUnsettled, InvalidInput, LogsIncomplete
from . import _pages, _projection
from ._pages import DEFAULT_LIMIT, MAX_LIMIT, Page
from ._projection import ENDINGS
from .records import Completion, IndexStatus, LeaseRecord, ResourceRecord, SyncResult, Takeover
from .timeline import TimelineLease

logger = _log.get(__name__)

_R = TypeVar("_R")

__all__ = [
    "DEFAULT_LIMIT",
    "ENDINGS",
    "MAX_LIMIT",
    "AuditIndex",
    "Completion",
    "IndexStatus",
    "LeaseRecord",
    "Page",
    "ResourceRecord",
    "SyncResult",
    "Takeover",
]

_SCHEMA_VERSION = "3"

#: The rewinds one sync makes before it calls the provider's history unsettled (HistoryUnsettled): a chain
#: reorganises a few blocks at a time and settles within a sync; a provider that answers each block with
#: another hash each time never does (it was 1,000 rewinds and a bare ChainError, issue 25).
MAX_REWINDS = 16

#: SQLite's page cache per connection (KiB) and memory map (bytes): an index of 100,000 events is ~50 MB.
_CACHE_KIB = 65_536
_MMAP_BYTES = 1 << 30

#: The index's own tables; the projection's (events, resources, leases) are in _projection.SCHEMA.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blocks (number INTEGER PRIMARY KEY, hash BLOB NOT NULL, timestamp INTEGER NOT NULL);
"""

#: The events a file holds, counted as they come and go (``status().events`` reads it: no count over the table).
_COUNTED = """
CREATE TRIGGER IF NOT EXISTS events_counted_in AFTER INSERT ON events
BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'events'; END;
CREATE TRIGGER IF NOT EXISTS events_counted_out AFTER DELETE ON events
BEGIN UPDATE meta SET value = CAST(value AS INTEGER) - 1 WHERE key = 'events'; END;
"""

# ---------------------------------------------------------------------------
# The index
# ---------------------------------------------------------------------------


class Indexed(Protocol):
    """What the index reads of a registry (a :class:`~chainfence.Registry`): its address, its chain,
    and the block it was deployed in."""

    @property
    def address(self) -> str: ...

    @property
    def chain(self) -> Chain: ...

    def deployment_block(self) -> int: ...


class _Reorg(Exception):
    """Block ``block``, which the index holds, is no longer the chain's."""

    def __init__(self, message: str, block: int):
        super().__init__(message)
        self.block = block


class _Tentative:
    """A sync's writes from its first rewind on, in one transaction (:meth:`begin`) under the index's lock:
    each page and rewind a savepoint in it (:class:`AuditIndex._Tx`), the whole kept or undone at the
    sync's end (:meth:`end`). Readers in other threads wait for it (they share the connection: they must
    not see what may be undone); other processes read the index as it was before the rewind."""

    def __init__(self, index: AuditIndex):
        self.index = index
        self.open = False

    def begin(self) -> None:
        if self.open:
            return
        self.index._lock.acquire()
        try:
            self.index._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.index._lock.release()
            raise
        self.open = self.index._tentative_open = True

    def end(self, keep: bool) -> None:
        if not self.open:
            return
        self.open = self.index._tentative_open = False
        try:
            self.index._conn.execute("COMMIT" if keep else "ROLLBACK")
        finally:
            self.index._lock.release()


class _Unread:
    """A value not read yet (the index's chain time, when a caller has not read it)."""


_UNREAD = _Unread()


class _Moved(Exception):
    """Another writer (a second sync of the same file) moved the cursor while this page was read."""


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _one_snapshot(read: Callable[Concatenate[AuditIndex, _P], _T]) -> Callable[Concatenate[AuditIndex, _P], _T]:
    """``read`` answers from one snapshot of the index (:meth:`AuditIndex._snapshot`): a sync running in
    another thread on the same index is seen whole or not at all."""

    def in_one_snapshot(self: AuditIndex, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        with self._snapshot():
            return read(self, *args, **kwargs)

    functools.update_wrapper(in_one_snapshot, read)  # its name, docstring and signature are the read's
    return in_one_snapshot


class AuditIndex:
    """A local SQLite index of one registry's events (see the module docstring).

    ``path`` is a file (created if missing) or ``":memory:"``. The first sync
    binds the file to its registry (chain id and address); syncing another
    registry into it raises :class:`~chainfence.errors.AuditIndexMismatch`.
    One writer at a time (SQLite's lock); readers may run alongside. One object may be shared by
    threads (a sync in one, queries in others): each query answers from one snapshot of committed rows,
    never from a page a sync is still writing.

    ``completeness`` is the mode of every sync of this object that names none
    (``"bloom"`` or ``"receipts"``, see :meth:`sync`): the syncs other parts
    make on their own before they read, ``audit.history(registry, index=...)`` and
    ``watchdog.stuck(registry, index=...)``, check each block as strictly as the index's
    owner chose.
    """

    def __init__(self, path: str | Path, *, completeness: str = "bloom"):
        if not isinstance(path, (str, Path)) or (isinstance(path, str) and not path):
            raise InvalidInput(f"path must be a file path or ':memory:', got {path!r}")
        #: The completeness mode of a sync that names none.
        self.completeness = _completeness.mode_of(completeness, default="bloom")
        self.path = str(path)
        self._lock = threading.RLock()
        self._tentative_open = False  # a sync's writes since its first rewind are one transaction (_Tentative)
        if self.path != ":memory:" and not Path(self.path).resolve().parent.is_dir():
            raise InvalidInput(f"cannot create an audit index at {self.path}: its directory does not exist")
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
            self._conn.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            # Reads at random over a large file (a holder's leases, a time range's takeovers): SQLite's own page
            # cache (coherent across connections: another writer's commit invalidates it) and a memory map.
            self._conn.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
            if self.path != ":memory:":
                self._conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
            self._conn.executescript(_SCHEMA)
            version = self._meta("schema")
            if version in ("1", "2"):
                self._migrate(version)
            elif version is not None and version != _SCHEMA_VERSION:
                raise AuditIndexMismatch(
                    f"{self.path} is an audit index of schema {version}, this is {_SCHEMA_VERSION}"
                )
            self._conn.executescript(_projection.SCHEMA)
            if self._meta("events") is None:  # a new file, or one from before the count was kept: count once
                self._set_meta("events", self._conn.execute("SELECT count(*) FROM events").fetchone()[0])
            self._conn.executescript(_COUNTED)
        except sqlite3.DatabaseError as exc:
            raise AuditIndexMismatch(f"{self.path} is not an audit index: {exc}") from None
        if version is None:
            self._set_meta("schema", _SCHEMA_VERSION)

    def _migrate(self, version: str) -> None:
        """Bring a file of schema 1 or 2 to this one, in one transaction (see the projection's MIGRATE_*)."""
        with self._write() as conn:
            if version == "1":
                conn.execute(_projection.MIGRATE_1_TO_2)
                logger.info("audit index %s: schema 1 -> 2 (grants over live leases read as granted)", self.path)
            for table, column, script in (
                ("events", "tx_index", _projection.MIGRATE_EVENTS_2_TO_3),
                ("leases", "acquired_tx", _projection.MIGRATE_LEASES_2_TO_3),
                ("resources", "latest_token", _projection.MIGRATE_RESOURCES_2_TO_3),
            ):
                if column in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
                    continue  # already there (a file a newer version wrote and marked older)
                for statement in script.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (_SCHEMA_VERSION,))
        logger.info("audit index %s: schema 2 -> 3 (events keyed by block, transaction and log index)", self.path)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> AuditIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta -------------------------------------------------------------------

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction under the index's lock. The index has one connection, shared by the threads
        that use it, and a sync writes through it in a transaction (:meth:`_write`, under the same lock): a
        read on that connection from another thread would otherwise see the sync's rows before they are
        committed, and keep them if it rolls back (a reorg, an incomplete answer). Nested reads join the
        transaction they are in."""
        with self._lock:
            began = not self._conn.in_transaction
            if began:
                self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                if began:
                    self._conn.execute("COMMIT")

    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def _set_meta(self, key: str, value: object) -> None:
        self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, str(value)))

    def _int_meta(self, key: str) -> int | None:
        value = self._meta(key)
        return None if value is None else int(value)

    def status(self, chain: Chain | None = None) -> IndexStatus:
        """How far the index reaches; with ``chain``, also its head and how many blocks behind it is."""
        with self._snapshot():
            synced = self._int_meta("synced_block")
            as_of = None
            if synced is not None:
                row = self._conn.execute("SELECT timestamp FROM blocks WHERE number = ?", (synced,)).fetchone()
                as_of = row[0] if row else None
            events = self._int_meta("events") or 0
            chain_id, registry = self._int_meta("chain_id"), self._meta("registry")
            deployment = self._int_meta("deployment_block")
        head = behind = None
        if chain is not None:
            head = chain.block_number()
            behind = head - synced if synced is not None else None
        return IndexStatus(
            chain_id=chain_id,
            registry=registry,
            deployment_block=deployment,
            synced_block=synced,
            as_of=as_of,
            events=events,
            head_block=head,
            behind=behind,
        )

    def _bind(self, registry: Indexed) -> int:
        """Bind the file to ``registry`` (first sync) or check it is bound to it; returns the deployment block."""
        chain_id = registry.chain.chain_id
        known_registry, known_chain = self._meta("registry"), self._int_meta("chain_id")
        if known_registry is None:
            deployment = registry.deployment_block()
            with self._write():
                self._set_meta("registry", registry.address)
                self._set_meta("chain_id", chain_id)
                self._set_meta("deployment_block", deployment)
            return deployment
        if known_registry != registry.address or known_chain != chain_id:
            raise AuditIndexMismatch(
                f"{self.path} indexes registry {known_registry} on chain {known_chain}, "
                f"not {registry.address} on chain {chain_id}"
            )
        return int(self._meta("deployment_block") or 0)

    class _Tx:
        def __init__(self, index: AuditIndex):
            self.index = index

        def __enter__(self) -> sqlite3.Connection:
            self.index._lock.acquire()
            self.nested = self.index._tentative_open  # inside a sync's tentative transaction: a savepoint
            self.index._conn.execute("SAVEPOINT page" if self.nested else "BEGIN IMMEDIATE")
            return self.index._conn

        def __exit__(self, exc_type: Any, *rest: object) -> None:
            try:
                if not self.nested:
                    self.index._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
                else:
                    if exc_type is not None:
                        self.index._conn.execute("ROLLBACK TO page")
                    self.index._conn.execute("RELEASE page")
            finally:
                self.index._lock.release()

    def _write(self) -> AuditIndex._Tx:
        return AuditIndex._Tx(self)

    def _tentative(self) -> _Tentative:
        return _Tentative(self)

    # -- sync -------------------------------------------------------------------

    def sync(
        self,
        registry: Indexed,
        *,
        to_block: int | None = None,
        max_blocks: int | None = None,
        confirmations: int | None = None,
        progress: Callable[[int, int, int], None] | None = None,
        completeness: str | None = None,
        _before_commit: Callable[[int], None] | None = None,
    ) -> SyncResult:
        """Bring the index up to ``to_block`` (default: the head minus ``confirmations``).

        ``confirmations`` defaults to the chain's (:attr:`Chain.confirmations
        <chainfence.Chain.confirmations>`: 0 on dev chains, 3 elsewhere); an
        index that holds blocks with fewer confirmations than that (synced
        with fewer before) is rewound to the newest confirmed block first, so
        every answer after this sync is as of a confirmed block.

        Each block's logs are checked for completeness against its header
        (:mod:`chainfence._node.completeness`) before the cursor passes it: at
        a block whose logs the node did not all answer (a lagging or
        withholding log backend) the sync stops, the index reaches the block
        before it, and :attr:`SyncResult.held_at` says which and why; a later
        sync takes it up from there. ``completeness`` is the check's mode
        (``None``: the index's own, :attr:`completeness`):
        ``"bloom"`` (the default) reads a block's receipts only where its
        ``logsBloom`` says the answer may lack a log, so a log withheld beside
        an answered one of the same kind in the same block passes unseen
        (``verify(proofs=...)`` finds it afterwards); ``"receipts"`` reads
        the receipts of every block whose bloom may hold a registry event
        (checked against ``receiptsRoot``) and indexes a block only when the
        answer holds exactly the registry events they hold (one more request
        per page with registry activity).

        ``max_blocks`` bounds the blocks of one ``eth_getLogs`` request (the
        chain's own bound otherwise; halved when a provider refuses).
        ``progress(done_block, first_block, last_block)`` is called after each
        page. Raises ChainError subclasses when the node fails, and
        :class:`~chainfence.errors.LogsIncomplete` when it answers a log the
        page cannot hold (of another block than those asked or than its
        header, or one that does not read): what was committed stays, nothing
        of that page is, and the next sync resumes there. It rewinds only
        where a block it holds is no longer the chain's, at most
        :data:`MAX_REWINDS` times: once more raises
        :class:`~chainfence.errors.HistoryUnsettled` (a provider that keeps
        changing its history). From its first rewind on, what the sync writes
        is committed when it returns: an error (or a crash) after a rewind
        leaves the index as it was before it.
        """
        if not isinstance(getattr(registry, "chain", None), Chain) or not isinstance(
            getattr(registry, "address", None), str
        ):
            raise InvalidInput(f"registry must be a Registry, got {type(registry).__name__}")
        if max_blocks is not None and (
            isinstance(max_blocks, bool) or not isinstance(max_blocks, int) or max_blocks < 1
        ):
            raise InvalidInput(f"max_blocks must be an int >= 1, got {max_blocks!r}")
        if confirmations is not None and (
            isinstance(confirmations, bool) or not isinstance(confirmations, int) or confirmations < 0
        ):
            raise InvalidInput(f"confirmations must be an int >= 0, got {confirmations!r}")
        if to_block is not None and (isinstance(to_block, bool) or not isinstance(to_block, int) or to_block < 0):
            raise InvalidInput(f"to_block must be an int >= 0, got {to_block!r}")
        mode = _completeness.mode_of(completeness, default=self.completeness)
        chain = registry.chain
        deployment = self._bind(registry)
        depth = chain.confirmations if confirmations is None else confirmations
        confirmed = chain.block_number() - depth
        last = confirmed if to_block is None else min(to_block, confirmed)
        synced = self._int_meta("synced_block")
        withdrawn: int | None = None
        start = deployment if synced is None else synced + 1
        first = start
        events = pages = rewinds = 0
        rewound: int | None = None
        before_rewinds: int | None = None  # where the index stood at the first rewind (what an error leaves)
        tentative = self._tentative()
        kept = False
        try:
            while True:  # each round ends at the target, at a held block, or at a reorg, rewound (MAX_REWINDS)
                try:
                    if synced is not None:
                        self._check_block(chain, synced)  # a chain that got shorter or another branch: a reorg
                    if synced is not None and synced > confirmed:
                        # Blocks with fewer confirmations than asked (synced with fewer before): not answered from.
                        withdrawn = self._truncate(max(confirmed, deployment - 1), deployment)
                        logger.info(
                            "audit index: withdrew blocks after %d (fewer than %d confirmations)", withdrawn, depth
                        )
                        synced = withdrawn if withdrawn >= deployment else None
                        start = first = deployment if synced is None else synced + 1
                    for page_first, page_last, logs in _events.fetch(
                        chain, registry.address, from_block=start, to_block=last, max_range=max_blocks
                    ):
                        reached, written, held = self._index_page(
                            chain, registry.address, page_first, page_last, logs, _before_commit, mode
                        )
                        events += written
                        pages += 1
                        if reached is not None:
                            synced, start = reached, reached + 1
                        _metrics.audit_page(synced, last, written)
                        if progress is not None:
                            progress(page_last if held is None else held[0] - 1, first, last)
                        if held is not None:
                            logger.warning("audit index: not past block %d yet: %s", held[0], held[1])
                            _metrics.audit_synced("held", synced, last)
                            kept = True
                            return SyncResult(
                                from_block=first,
                                to_block=start - 1,
                                events=events,
                                pages=pages,
                                rewound_to=rewound,
                                held_at=held[0],
                                held_because=held[1],
                                withdrawn_to=withdrawn,
                            )
                    _metrics.audit_synced("ok", synced, last)
                    kept = True
                    return SyncResult(
                        from_block=first,
                        to_block=last,
                        events=events,
                        pages=pages,
                        rewound_to=rewound,
                        withdrawn_to=withdrawn,
                    )
                except _Reorg as reorg:
                    if rewinds == MAX_REWINDS:
                        raise self._unsettled(chain, reorg, rewinds, rewound, before_rewinds) from None
                    logger.warning("audit index: %s; looking for the fork point", reorg)
                    if not tentative.open:
                        before_rewinds = self._int_meta("synced_block")
                        tentative.begin()  # kept only if the sync ends (its history settled): see _Tentative
                    rewound = self._rewind(chain, deployment)
                    rewinds += 1
                    synced = rewound if rewound >= deployment else None
                    start = rewound + 1 if synced is not None else deployment
                except _Moved as moved:
                    logger.info("audit index: %s; resuming after it", moved)
                    synced = self._int_meta("synced_block")
                    start = deployment if synced is None else synced + 1
        except ChainfenceError:
            _metrics.audit_synced("error", synced, last)
            raise
        finally:
            tentative.end(kept)

    def _unsettled(
        self, chain: Chain, reorg: _Reorg, rewinds: int, fork: int | None, synced: int | None
    ) -> HistoryUnsettled:
        """The error for a sync whose provider replaced a block the index held once more after ``rewinds``
        rewinds (the last to ``fork``); ``synced``: where the index stood before the first, as it is left."""
        from .._node.jsonrpc import name_of_chain

        return HistoryUnsettled(
            rewinds=rewinds,
            block=reorg.block,
            fork_block=fork,
            synced=synced,
            source=name_of_chain(chain),
            detail=str(reorg),
        )

    def _check_block(self, chain: Chain, number: int) -> None:
        row = self._conn.execute("SELECT hash FROM blocks WHERE number = ?", (number,)).fetchone()
        if row is None:
            return
        block = chain.rpc.block(number)
        if block is None or bytes(block["hash"]) != bytes(row[0]):
            raise _Reorg(f"block {number}, the last one indexed, is no longer the chain's", number)

    def _index_page(
        self,
        chain: Chain,
        address: str,
        first: int,
        last: int,
        logs: list[_events.RegistryLog],
        before_commit: Callable[[int], None] | None,
        mode: str = "bloom",
    ) -> tuple[int | None, int, tuple[int, str] | None]:
        """One page: its events, leases, blocks and the cursor, in one transaction, up to the first block whose
        logs the answer may lack (see :mod:`chainfence._node.completeness`; ``mode``: the check's). Returns (the
        block reached, or None if none; the events written; (the block held back, why) or None)."""
        synced = self._int_meta("synced_block")
        numbers = list(range(first, last + 1))
        if synced is not None and synced < first:
            numbers.insert(0, synced)
        headers: dict[int, Any] = {}  # as the node sent them: a header per block, unformatted
        for number, found in zip(numbers, chain.rpc.blocks(numbers, raw=True), strict=True):
            if found is None:
                raise _Reorg(f"the node has no block {number} any more", number)
            headers[number] = found
        hashes = {number: _completeness.block_hash(header) for number, header in headers.items()}
        if synced is not None and synced in headers:
            stored = self._conn.execute("SELECT hash FROM blocks WHERE number = ?", (synced,)).fetchone()
            if stored is not None and hashes[synced] != bytes(stored[0]):
                raise _Reorg(f"block {synced}, the last one indexed, was replaced", synced)
        for entry in logs:
            if entry.block_hash != hashes.get(entry.block_number):
                # Not a reorganisation the index can rewind (the blocks it holds are the chain's, checked
                # above): a log of another branch than the page's headers (one replaced while reading) or
                # one a provider invented. Nothing of the page is indexed; the next sync reads it again.
                from .._node.jsonrpc import name_of_chain

                raise LogsIncomplete(
                    block=first,
                    followed=first - 1,
                    head=last,
                    source=name_of_chain(chain),
                    reason=f"a {entry.kind.value} was answered for block {entry.block_number} with hash "
                    f"0x{entry.block_hash.hex()}, which is not the block's header",
                )
        checked = _completeness.check(chain, address, first, last, logs, headers=headers, mode=mode)
        held = None if checked.held is None else (checked.held, f"block {checked.held}: {checked.why}")
        end = checked.end
        if end < first:
            return None, 0, held
        kept = checked.logs
        stored_blocks = sorted({entry.block_number for entry in kept} | {end})
        with self._write() as conn:
            if self._int_meta("synced_block") != synced:
                raise _Moved(f"another sync moved the cursor past block {synced}")
            conn.executemany(
                "INSERT OR REPLACE INTO blocks (number, hash, timestamp) VALUES (?, ?, ?)",
                [(n, hashes[n], _completeness.block_time(headers[n])) for n in stored_blocks],
            )
            for entry in kept:
                _projection.apply(conn, entry, _completeness.block_time(headers[entry.block_number]))
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('synced_block', ?)", (str(end),))
            if before_commit is not None:
                before_commit(end)  # tests: a crash between writing a page and committing it
        return end, len(kept), held

    def _rewind(self, chain: Chain, deployment: int) -> int:
        """Find the newest indexed block the chain still has, delete everything after it; return it."""
        fork = deployment - 1
        rows = self._conn.execute("SELECT number, hash FROM blocks ORDER BY number DESC").fetchall()
        for start in range(0, len(rows), 64):
            part = rows[start : start + 64]
            found = chain.rpc.blocks([number for number, _ in part])
            match = next(
                (
                    number
                    for (number, stored), block in zip(part, found, strict=True)
                    if block is not None and bytes(block["hash"]) == bytes(stored)
                ),
                None,
            )
            if match is not None:
                fork = match
                break
        self._truncate(fork, deployment)
        logger.warning("audit index rewound to block %d (the fork point)", fork)
        return fork

    def _truncate(self, keep: int, deployment: int) -> int:
        """Delete everything after block ``keep`` (the leases it touched replayed from what is left); the cursor
        goes to ``keep`` (none below the deployment). Returns ``keep``."""
        with self._write() as conn:
            touched = {
                token
                for (token,) in conn.execute(
                    "SELECT token FROM events WHERE block > ? AND token IS NOT NULL "
                    "UNION SELECT previous_token FROM events WHERE block > ? AND kind = 'LeaseAcquired'",
                    (keep, keep),
                )
            }
            recounted = {
                bytes(resource_id)
                for (resource_id,) in conn.execute(
                    "SELECT DISTINCT resource_id FROM events WHERE block > ? AND kind = 'LeaseAcquired'", (keep,)
                )
            }
            conn.execute("DELETE FROM events WHERE block > ?", (keep,))
            conn.execute("DELETE FROM blocks WHERE number > ?", (keep,))
            conn.execute("DELETE FROM leases WHERE acquired_block > ?", (keep,))
            conn.execute("DELETE FROM resources WHERE first_block > ?", (keep,))
            for token in touched:
                _projection.replay(conn, token)
            _projection.count_leases(conn, recounted)
            if keep >= deployment:
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('synced_block', ?)", (str(keep),))
            else:
                conn.execute("DELETE FROM meta WHERE key = 'synced_block'")
        return keep

    # -- verify -----------------------------------------------------------------

    def verify(self, registry: Indexed, *, max_blocks: int | None = None, limit: int = 20, proofs: Any = None) -> int:
        """Check the index against the chain: every event, every block's hash and time, every lease, up to the
        synced block.

        Events are compared with the chain's logs (read again, from the
        deployment); block hashes and timestamps, and every event's time, with
        the headers; leases and names with the ones the chain's logs make at the
        headers' times. ``proofs`` (a :class:`chainfence.proofs.ProvenReader`)
        also checks the index against headers no single provider controls
        (its header source): each block holding indexed events is vouched for,
        its receipts are checked against the vouched ``receiptsRoot`` and hold
        exactly the events indexed there, every resource's latest lease is
        the one its storage slot holds, and the index's highest token is the
        registry's latest (its counter: so an index lacking a whole resource
        differs), each proven against the vouched header of the synced block.

        Returns the number of events checked; raises
        :class:`~chainfence.errors.AuditIndexDiffers` listing (up to ``limit``)
        what differs, each naming the row.

        The index is read from one snapshot of committed rows: a sync in another thread goes on meanwhile
        (a file's snapshot is read through a connection of its own, so neither waits for the other; an
        index in memory waits for the verify).
        """
        from . import _verify

        self._bind(registry)  # binds a new file (or refuses another registry's) as a sync would, before the snapshot
        if self.path == ":memory:":
            with self._snapshot():
                return _verify.verify(self, registry, max_blocks=max_blocks, limit=limit, proofs=proofs)
        view = AuditIndex(self.path, completeness=self.completeness)
        try:
            with view._snapshot():
                return _verify.verify(view, registry, max_blocks=max_blocks, limit=limit, proofs=proofs)
        finally:
            view.close()

    # -- queries ------------------------------------------------------------------

    def _as_of(self) -> int | None:
        row = self._conn.execute(
            "SELECT b.timestamp FROM meta m JOIN blocks b ON b.number = CAST(m.value AS INTEGER) WHERE m.key = 'synced_block'"
        ).fetchone()
        return row[0] if row else None

    def _label(self, resource_id: bytes) -> tuple[str | None, str]:
        row = self._conn.execute("SELECT name FROM resources WHERE resource_id = ?", (resource_id,)).fetchone()
        return _projection.label_of(resource_id, None if row is None or row[0] is None else bytes(row[0]))

    def _leases(
        self,
        where: str,
        params: Iterable[Any],
        order: str = "acquired_block, acquired_tx, acquired_log",
        indexed_by: str | None = None,
    ) -> list[LeaseRecord]:
        as_of = self._as_of()
        labels: dict[bytes, tuple[str | None, str]] = {}
        result = []
        sql = (
            f"SELECT {_projection.LEASE_COLUMNS}, (SELECT name FROM resources r WHERE r.resource_id = leases.resource_id) "
            f"FROM leases{f' INDEXED BY {indexed_by}' if indexed_by else ''} WHERE {where} ORDER BY {order}"
        )
        for row in self._conn.execute(sql, tuple(params)):
            resource_id = bytes(row[1])
            label = labels.get(resource_id)
            if label is None:
                label = labels[resource_id] = _projection.label_of(
                    resource_id, None if row[-1] is None else bytes(row[-1])
                )
            result.append(_record(row, label, as_of))
        return result

    def _lease_page(
        self, walk: _pages.Walk, limit: int, after: str | None, as_of: int | _Unread | None = _UNREAD
    ) -> Page[LeaseRecord]:
        """A page of a walk whose rows are ``_projection.LEASE_COLUMNS`` and the resource's name."""
        if isinstance(as_of, _Unread):
            as_of = self._as_of()
        labels: dict[bytes, tuple[str | None, str]] = {}

        def build(row: tuple[Any, ...]) -> LeaseRecord:
            resource_id = bytes(row[1])
            label = labels.get(resource_id)
            if label is None:
                label = labels[resource_id] = _projection.label_of(
                    resource_id, None if row[24] is None else bytes(row[24])
                )
            return _record(row, label, as_of)

        return _pages.read(self._conn, walk, limit=limit, after=after, build=build, lock=self._lock)

    def _leases_by(
        self, query: str, column: str, value: Any, index: str, limit: int, after: str | None
    ) -> Page[LeaseRecord]:
        """A page of the leases whose ``column`` is ``value``, oldest first, walking ``index``."""
        walk = _pages.Walk(
            query=query,
            arguments=(value,),
            columns=_NAMED_LEASE,
            source="leases",
            index=index,
            where=((f"{column} = ?", (value,)),),
            keys=_BY_BLOCK,
            kinds=("int", "int", "int"),
            block_key=0,
        )
        return self._lease_page(walk, limit, after)

    def history(self, resource: str, *, limit: int = DEFAULT_LIMIT, after: str | None = None) -> Page[LeaseRecord]:
        """The leases of ``resource``, oldest first: a page of at most ``limit`` (see :class:`Page`;
        :meth:`every` reads them all)."""
        resource_id = _validate.resource_id(resource)
        return self._leases_by("history", "resource_id", resource_id, "leases_resource", limit, after)

    def history_by_id(
        self, resource_id: bytes, *, limit: int = DEFAULT_LIMIT, after: str | None = None
    ) -> Page[LeaseRecord]:
        """:meth:`history` by the resource's 32-byte id (for names that are not the SDK's); its cursors and
        :meth:`history`'s are one listing's."""
        if not isinstance(resource_id, bytes) or len(resource_id) != 32:
            raise InvalidInput(f"resource_id must be 32 bytes, got {resource_id!r}")
        return self._leases_by("history", "resource_id", resource_id, "leases_resource", limit, after)

    @_one_snapshot
    def lease(self, token: int) -> LeaseRecord | None:
        """The lease fencing token ``token`` belonged to (None: not in the index)."""
        token = _validate.token(token)
        if not _projection.fits(token):
            return None  # the index holds no token that does not fit 63 bits (see _projection.apply)
        found = self._leases("token = ?", (token,))
        return found[0] if found else None

    def leases_of(self, holder: str, *, limit: int = DEFAULT_LIMIT, after: str | None = None) -> Page[LeaseRecord]:
        """The leases ``holder`` held, oldest first: a page of at most ``limit`` (see :class:`Page`)."""
        holder = _validate.address(holder, "holder")
        return self._leases_by("leases_of", "holder", holder, "leases_holder", limit, after)

    @_one_snapshot
    def holder_at(
        self, resource: str, *, time: int | None = None, block: int | None = None, block_time: int | None = None
    ) -> LeaseRecord | None:
        """The lease that held ``resource`` at chain time ``time`` or at block ``block`` (exactly one of them).

        None when nobody held it then (never held yet, released, or expired).
        A lease holds from its acquisition until it ended or expired
        (its expiry as of the renewals made by then). At a block, expiry is
        judged at ``block_time``, that block's timestamp (the CLI reads it
        from the node); without it, at the newest indexed block at or before
        it, a lower bound: a lease may then read live for a few blocks past
        its expiry, never the other way round.
        """
        resource_id = _validate.resource_id(resource)
        if (time is None) == (block is None):
            raise InvalidInput("give exactly one of time= and block=")
        value = time if time is not None else block
        if isinstance(value, bool) or not isinstance(value, int) or not _projection.fits(value):
            raise InvalidInput(
                f"{'time' if time is not None else 'block'} must be an int from 0 to 2**63 - 1, got {value!r}"
            )
        column = "acquired_at" if time is not None else "acquired_block"
        found = self._leases(
            f"resource_id = ? AND {column} <= ?",
            (resource_id, value),
            order=f"{column} DESC, acquired_block DESC, acquired_tx DESC, acquired_log DESC LIMIT 1",
        )
        if not found:
            return None
        lease = found[0]
        if block_time is not None and (
            isinstance(block_time, bool) or not isinstance(block_time, int) or not _projection.fits(block_time)
        ):
            raise InvalidInput(f"block_time must be an int from 0 to 2**63 - 1, got {block_time!r}")
        at_time = time if time is not None else (block_time if block_time is not None else self._time_of_block(value))
        # Ended by an event (released, revoked, completed) or by the next acquisition by then?
        if (
            lease.ended_block is not None
            and lease.ended_at is not None
            and lease.ended in _projection.ENDED_AT_AN_EVENT
        ):
            ended_before = lease.ended_at <= value if time is not None else lease.ended_block <= value
            if ended_before:
                return None
        # Expired by then? Its expiry as of the renewals made by then.
        column_event = "timestamp" if time is not None else "block"
        row = self._conn.execute(
            f"SELECT expires_at FROM events WHERE token = ? AND kind IN ('LeaseAcquired', 'LeaseRenewed') "
            f"AND {column_event} <= ? ORDER BY block DESC, tx_index DESC, log_index DESC LIMIT 1",
            (lease.token, value),
        ).fetchone()
        expires_at = row[0] if row else lease.expires_at
        if at_time is not None and expires_at <= at_time:
            return None
        return lease

    def _time_of_block(self, number: int) -> int | None:
        row = self._conn.execute(
            "SELECT timestamp FROM blocks WHERE number <= ? ORDER BY number DESC LIMIT 1", (number,)
        ).fetchone()
        return row[0] if row else None

    def current(
        self, *, prefix: str | None = None, limit: int = DEFAULT_LIMIT, after: str | None = None
    ) -> Page[LeaseRecord]:
        """Leases live at the index's last block (``status().as_of``), with names: a page of at most
        ``limit`` (see :class:`Page`), by resource id; with ``prefix``, of the resources so named, by name.

        Each page answers as of the index when it is read: a resource whose lease starts or ends between
        two pages is in the page that reaches it if it is live then; no resource is listed twice.
        """
        as_of = self._as_of()
        if prefix is None:
            # The open leases, by resource: the partial index leases_live; "not expired by then" is judged
            # on each (an open lease nobody took after its expiry stays in that index).
            walk = _pages.Walk(
                query="current",
                arguments=(None,),
                columns=_NAMED_LEASE,
                source="leases",
                index="leases_live",
                where=(("ended IS NULL", ()),),
                keys=("resource_id", "token"),
                kinds=("bytes", "int"),
                hit="expires_at > ?",
                hit_params=(-1 if as_of is None else as_of,),
            )
            return self._lease_page(walk, limit, after, as_of)
        low, high, wanted = _projection.name_bounds(prefix)
        # The resources so named, by name; a resource's current lease can only be its latest.
        walk = _pages.Walk(
            query="current",
            arguments=(wanted,),
            columns=", ".join(f"l.{column}" for column in _LEASE_FIELDS) + ", r.name, r.claimed",
            source="resources r",
            index="resources_by_name",
            joins="LEFT JOIN leases l ON l.token = r.latest_token",
            keys=("r.name", "r.resource_id"),
            kinds=("bytes", "bytes"),
            low=low,
            high=high,
            high_open=True,
            hit="l.token IS NOT NULL AND l.ended IS NULL AND l.expires_at > ?",
            hit_params=(-1 if as_of is None else as_of,),
        )

        def build(row: tuple[Any, ...]) -> LeaseRecord | None:
            resource_id, name = bytes(row[1]), bytes(row[24])
            if not _projection.shown_with(resource_id, name, row[25], wanted):
                return None
            return _record(row, _projection.label_of(resource_id, name), as_of)

        return _pages.read(self._conn, walk, limit=limit, after=after, build=build, lock=self._lock)

    def takeovers(
        self,
        *,
        from_block: int | None = None,
        to_block: int | None = None,
        since: int | None = None,
        until: int | None = None,
        resource: str | None = None,
        limit: int = DEFAULT_LIMIT,
        after: str | None = None,
    ) -> Page[Takeover]:
        """Acquisitions that moved a resource to another holder, in a block range or a chain-time range,
        oldest first: a page of at most ``limit`` (see :class:`Page`)."""
        resource_id = None if resource is None else _validate.resource_id(resource)
        walk = _ranged_walk(
            "takeovers",
            (from_block, to_block, since, until, resource_id),
            source="leases l",
            block="l.acquired_block",
            time="l.acquired_at",
            keys=("l.acquired_tx", "l.acquired_log"),
            indexes=("leases_block", "leases_time_key", "leases_resource", "leases_resource_time_key"),
            equal=None if resource_id is None else ("l.resource_id", resource_id),
            ranges=(from_block, to_block, since, until),
            columns="l.resource_id, l.token, l.holder, l.previous_token, p.holder, p.ended, l.reason, "
            "l.acquired_block, l.acquired_at, l.tx_hash, r.name",
            joins="LEFT JOIN leases p ON p.token = l.previous_token",
            shown_joins="LEFT JOIN resources r ON r.resource_id = l.resource_id",
            hit="l.previous_token > 0 AND p.holder != l.holder",
        )

        def build(row: tuple[Any, ...]) -> Takeover:
            resource_id, token, holder, previous, previous_holder, ended, reason, block, at, tx_hash, named = row
            name, display = _projection.label_of(bytes(resource_id), None if named is None else bytes(named))
            return _built(
                Takeover,
                name,
                display,
                bytes(resource_id),
                token,
                holder,
                previous,
                previous_holder,
                ended,
                _projection.reason(reason),
                block,
                at,
                tx_hash,
            )

        return _pages.read(self._conn, walk, limit=limit, after=after, build=build, lock=self._lock)

    def completions(
        self,
        *,
        resource: str | None = None,
        from_block: int | None = None,
        to_block: int | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = DEFAULT_LIMIT,
        after: str | None = None,
    ) -> Page[Completion]:
        """Completions (their result digests), oldest first, optionally of one resource and in a range: a
        page of at most ``limit`` (see :class:`Page`)."""
        resource_id = None if resource is None else _validate.resource_id(resource)
        walk = _ranged_walk(
            "completions",
            (from_block, to_block, since, until, resource_id),
            source="events e",
            block="e.block",
            time="e.timestamp",
            keys=("e.tx_index", "e.log_index"),
            indexes=(
                "events_completed",
                "events_completed_time_key",
                "events_completed_resource",
                "events_completed_resource",
            ),
            equal=None if resource_id is None else ("e.resource_id", resource_id),
            ranges=(from_block, to_block, since, until),
            columns="e.resource_id, e.token, e.holder, e.digest, e.block, e.timestamp, e.tx_hash, "
            "(SELECT name FROM resources r WHERE r.resource_id = e.resource_id)",
            where=(("e.kind = 'LeaseCompleted'", ()),),
        )

        def build(row: tuple[Any, ...]) -> Completion:
            resource_id, token, holder, digest, block, at, tx_hash, named = row
            name, display = _projection.label_of(bytes(resource_id), None if named is None else bytes(named))
            return _built(
                Completion, name, display, bytes(resource_id), token, holder, bytes(digest), block, at, tx_hash
            )

        return _pages.read(self._conn, walk, limit=limit, after=after, build=build, lock=self._lock)

    def resources(
        self, prefix: str = "", *, limit: int = DEFAULT_LIMIT, after: str | None = None
    ) -> Page[ResourceRecord]:
        """Resources whose name starts with ``prefix`` (every named resource for ""), by name: a page of at
        most ``limit`` (see :class:`Page`).

        A claimed work item's name is ``workset»item``: ``"backfill»"`` lists the items of workset
        ``backfill``, ``"prod/"`` the plain names under ``prod/`` (not the items of workset ``prod``)."""
        low, high, wanted = _projection.name_bounds(prefix)
        walk = _pages.Walk(
            query="resources",
            arguments=(wanted,),
            columns="resource_id, name, claimed, leases, latest_token",
            source="resources",
            index="resources_by_name",
            keys=("name", "resource_id"),
            kinds=("bytes", "bytes"),
            low=low,
            high=high,
            high_open=True,
        )

        def build(row: tuple[Any, ...]) -> ResourceRecord | None:
            resource_id, name, claimed, count, latest = row
            if not _projection.shown_with(bytes(resource_id), bytes(name), claimed, wanted):
                return None
            label = _projection.label_of(bytes(resource_id), bytes(name))
            return _built(ResourceRecord, label[0], label[1], bytes(resource_id), bool(claimed), count, latest)

        return _pages.read(self._conn, walk, limit=limit, after=after, build=build, lock=self._lock)

    def events(
        self,
        *,
        resource_id: bytes | None = None,
        holder: str | None = None,
        token: int | None = None,
        from_block: int | None = None,
        to_block: int | None = None,
        kinds: Iterable[_events.Kind] | None = None,
        limit: int = DEFAULT_LIMIT,
        after: str | None = None,
    ) -> Page[tuple[_events.RegistryLog, int]]:
        """The indexed lease events as ``(RegistryLog, block timestamp)``, oldest first (for the SDK's
        views): a page of at most ``limit`` (see :class:`Page`)."""
        _projection.range_where("e.block", from_block, to_block, None, None, None)  # the bounds' checks
        wanted = None if kinds is None else tuple(sorted(kind.value for kind in kinds))
        # The walk: the first of token, resource, holder given (its index), else every event in order; the
        # others and the kinds are judged on each row the walk reaches.
        equal = [
            (column, value, index)
            for column, value, index in (
                ("e.token", token, "events_token"),
                ("e.resource_id", resource_id, "events_resource"),
                ("e.holder", holder, "events_holder"),
            )
            if value is not None
        ]
        hits, hit_params = ["1"], []
        for column, value, _index in equal[1:]:
            hits.append(f"{column} = ?")
            hit_params.append(value)
        if wanted is not None:
            hits.append(f"e.kind IN ({', '.join('?' * len(wanted))})")
            hit_params.extend(wanted)
        columns = ", ".join(f"e.{column}" for column in _projection.EVENT_COLUMNS.split(", "))
        walk = _pages.Walk(
            query="events",
            arguments=(resource_id, holder, token, from_block, to_block, wanted),
            columns=f"{columns}, b.hash",
            source="events e",
            index=equal[0][2] if equal else "events_order",
            where=((f"{equal[0][0]} = ?", (equal[0][1],)),) if equal else (),
            # Each event's block hash by the blocks table's key (one probe a row), never the whole table.
            shown_joins="LEFT JOIN blocks b ON b.number = e.block",
            keys=("e.block", "e.tx_index", "e.log_index"),
            kinds=("int", "int", "int"),
            low=from_block,
            high=to_block,
            hit=" AND ".join(hits),
            hit_params=tuple(hit_params),
            block_key=0,
        )
        return _pages.read(
            self._conn,
            walk,
            limit=limit,
            after=after,
            build=lambda row: _projection.log_from_row(row[:-1], b"" if row[-1] is None else bytes(row[-1])),
            lock=self._lock,
        )

    def pages(
        self, query: Callable[..., Page[_R]], /, *, limit: int = DEFAULT_LIMIT, **arguments: Any
    ) -> Iterator[Page[_R]]:
        """Every page of a list query of this index (``index.pages(index.takeovers, since=t)``), ``limit``
        rows each, from ``after=`` if given: for a caller that needs every row. The first page is read
        now (a bad argument raises here), the others as the iterator is advanced, each after the last
        one's ``next``: a sync that appends meanwhile adds its rows at the end, none is seen twice
        (:class:`Page`)."""
        name = getattr(getattr(query, "__func__", None), "__name__", None)
        if getattr(query, "__self__", None) is not self or name not in _LIST_QUERIES:
            raise InvalidInput(
                f"query must be one of this index's list queries ({', '.join(sorted(_LIST_QUERIES))}), got {query!r}"
            )
        first = query(limit=limit, **arguments)
        arguments.pop("after", None)

        def following(page: Page[_R]) -> Iterator[Page[_R]]:
            yield page
            while page.next is not None:
                page = query(limit=limit, after=page.next, **arguments)
                yield page

        return following(first)

    def every(self, query: Callable[..., Page[_R]], /, *, limit: int = DEFAULT_LIMIT, **arguments: Any) -> Iterator[_R]:
        """Every row of a list query, read a page at a time (:meth:`pages`): ``for t in
        index.every(index.takeovers, since=t): ...``."""
        return itertools.chain.from_iterable(self.pages(query, limit=limit, **arguments))

    @_one_snapshot
    def label(self, resource_id: bytes) -> tuple[str | None, str]:
        """(name or None, safe display) of a resource id, from the names indexed."""
        return self._label(resource_id)

    @_one_snapshot
    def timeline_leases(self, resources: Iterable[str]) -> list[TimelineLease]:
        """The leases of ``resources`` as :class:`chainfence.audit.timeline.TimelineLease` (the picture's input).

        A lease nobody ended is drawn to its expiry when that is before the
        index's chain time (``status().as_of``), else as live.
        """
        names = list(resources) if not isinstance(resources, str) else [resources]
        if not names:
            raise InvalidInput("name at least one resource")
        as_of = self._as_of()
        drawn = []
        for name in names:
            resource_id = _validate.resource_id(name)
            leases = self._leases("resource_id = ?", (resource_id,))
            by_token = {lease.token: lease for lease in leases}
            label: str | bytes | tuple[bytes, bytes] = name
            row = self._conn.execute("SELECT name FROM resources WHERE resource_id = ?", (resource_id,))
            found = row.fetchone()
            if found is not None and found[0] is not None:
                raw = bytes(found[0])
                # A claimed item's lane is (workset, item): drawn as workset»item, never as the plain workset/item.
                label = raw if keccak(raw) == resource_id else (_names.item_parts(raw, resource_id) or name)
            # Every renewal and completion of the resource in one indexed read, each at its own time.
            renewed: dict[int, list[tuple[int, bytes | None]]] = {}
            completed: dict[int, list[tuple[int, bytes | None]]] = {}
            for kind, token, at, progress, digest in self._conn.execute(
                "SELECT kind, token, timestamp, progress, digest FROM events WHERE resource_id = ? "
                f"AND kind IN ('LeaseRenewed', 'LeaseCompleted') ORDER BY {_projection.ORDER}",
                (resource_id,),
            ):
                if kind == "LeaseRenewed":
                    renewed.setdefault(token, []).append((at, None if progress is None else bytes(progress)))
                else:
                    completed.setdefault(token, []).append((at, None if digest is None else bytes(digest)))
            for lease in leases:
                renewals = tuple(renewed.get(lease.token, ()))
                if lease.ended is not None:
                    end, end_reason = max(lease.acquired_at, lease.ended_at or lease.acquired_at), lease.ended
                elif as_of is not None and lease.expires_at <= as_of:
                    end, end_reason = max(lease.acquired_at, lease.expires_at), "expired"
                else:
                    end, end_reason = None, "live"
                reason = _ISSUE_REASONS.get(int(lease.reason), "unheld")
                admin = lease.granted_by
                if reason == "revoked" and lease.previous_token in by_token:
                    admin = by_token[lease.previous_token].ended_by
                drawn.append(
                    TimelineLease(
                        label,
                        lease.token,
                        lease.holder,
                        start=lease.acquired_at,
                        end=end,
                        end_reason=end_reason,
                        reason=reason,
                        renewals=renewals,
                        completion_digest=lease.last_digest,
                        completions=tuple(completed.get(lease.token, ())),
                        admin=admin,
                        revoked_by=lease.ended_by if lease.ended in ("revoked", "granted") else None,
                    )
                )
        return drawn


#: The list queries (:meth:`AuditIndex.pages` reads any of them to the end).
_LIST_QUERIES = frozenset(
    {"current", "takeovers", "completions", "resources", "events", "history", "history_by_id", "leases_of"}
)

_LEASE_FIELDS = tuple(_projection.LEASE_COLUMNS.split(", "))

#: A lease row and its resource's name (by the resources table's key), as :func:`_record` reads it.
_NAMED_LEASE = f"{_projection.LEASE_COLUMNS}, (SELECT name FROM resources r WHERE r.resource_id = leases.resource_id)"

#: Leases in chain order: their acquisition's block, transaction and log (the walk's keys).
_BY_BLOCK = ("acquired_block", "acquired_tx", "acquired_log")


def _ranged_walk(
    query: str,
    arguments: tuple[Any, ...],
    *,
    source: str,
    block: str,
    time: str,
    keys: tuple[str, str],
    indexes: tuple[str, str, str, str],
    equal: tuple[str, Any] | None,
    ranges: tuple[int | None, int | None, int | None, int | None],
    columns: str,
    joins: str = "",
    shown_joins: str = "",
    hit: str = "1",
    where: tuple[tuple[str, tuple[Any, ...]], ...] = (),
) -> _pages.Walk:
    """The walk of a list in a block range or a time range (``ranges``: from_block, to_block, since,
    until), of one resource or all (``equal``): in block order by ``block`` and ``keys`` (the index
    ``indexes[0]``, or ``[2]`` for one resource); for a time range alone, in time order by ``time``,
    ``block`` and ``keys`` (``indexes[1]``, ``[3]``), which is the chain's order too. The range the
    walk does not follow is judged on each row (with ``hit``)."""
    from_block, to_block, since, until = ranges
    by_time = (since is not None or until is not None) and from_block is None and to_block is None
    residual, params = _projection.range_where(block, None, None, time, since, until)  # checks the bounds too
    if not by_time:
        _projection.range_where(block, from_block, to_block, None, None, None)
    terms = [hit, *residual[1:]] if not by_time else [hit]
    one = equal is not None
    return _pages.Walk(
        query=query,
        arguments=arguments,
        columns=columns,
        source=source,
        index=indexes[(1 if by_time else 0) + (2 if one else 0)],
        where=(*where, *(((f"{equal[0]} = ?", (equal[1],)),) if equal is not None else ())),
        joins=joins,
        shown_joins=shown_joins,
        keys=(time, block, *keys) if by_time else (block, *keys),
        kinds=("int", "int", "int", "int") if by_time else ("int", "int", "int"),
        low=since if by_time else from_block,
        high=until if by_time else to_block,
        hit=" AND ".join(terms),
        hit_params=() if by_time else tuple(params),
        block_key=1 if by_time else 0,
    )


#: AcquireReason values as the timeline names them (4 and 5: the admin's revoke and grant, issue #11).
_ISSUE_REASONS = {0: "unheld", 1: "released", 2: "expired", 3: "reacquired", 4: "revoked", 5: "granted"}


# ---------------------------------------------------------------------------
# Rows into records
# ---------------------------------------------------------------------------


def _record(row: tuple[Any, ...], label: tuple[str | None, str], as_of: int | None) -> LeaseRecord:
    """A LeaseRecord from a row of ``_projection.LEASE_COLUMNS`` (and the name, last)."""
    (
        token,
        resource_id,
        holder,
        acquired_block,
        _acquired_log,
        acquired_at,
        tx_hash,
        reason,
        previous_token,
        expires_at,
        granted_by,
        renewals,
        last_renewed_block,
        last_renewed_at,
        markers,
        last_marker,
        completions,
        last_digest,
        completed_at,
        ended,
        ended_block,
        ended_at,
        ended_by,
        successor,
    ) = row[:24]
    if ended is not None:
        status = ended
    elif as_of is not None and expires_at <= as_of:
        status = "expired"
    else:
        status = "live"
    return _built(
        LeaseRecord,
        token,
        label[0],
        label[1],
        bytes(resource_id),
        holder,
        _projection.reason(reason),
        previous_token,
        acquired_block,
        acquired_at,
        tx_hash,
        expires_at,
        granted_by,
        renewals,
        last_renewed_block,
        last_renewed_at,
        markers,
        None if last_marker is None else bytes(last_marker),
        completions,
        None if last_digest is None else bytes(last_digest),
        completed_at,
        ended,
        ended_block,
        ended_at,
        ended_by,
        successor,
        status,
    )


_FIELDS: dict[type, tuple[str, ...]] = {}


def _built(cls: type[_R], *values: Any) -> _R:
    """A record of ``cls`` (a frozen dataclass of plain fields) from its values in field order, as its
    ``__init__`` would make it, without the frozen ``__init__``'s per-field ``object.__setattr__``: the
    list queries build thousands (a LeaseRecord: 26 fields, about 2 us instead of 5)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    record = object.__new__(cls)
    record.__dict__.update(zip(names, values, strict=True))
    return record


endings.declare(
    "audit.index",
    __name__,
    {
        End.EXPIRED: "ended 'expired' at its expiry, read off the next acquisition; until one comes, ended is "
        "None and status 'expired' once the index's chain time passes the expiry",
        End.RELEASED: "ended 'released' at the LeaseReleased's block",
        End.COMPLETED: "ended 'completed' at the LeaseCompleted of a claimed item; a plain lease's completion "
        "is counted (completions, last_digest) and ends nothing",
        End.SUPERSEDED: "ended 'superseded' at the reacquisition that fenced it off (successor set)",
        End.REVOKED: "ended 'revoked' at the LeaseRevoked, ended_by the admin",
        End.GRANTED: "ended 'granted' (ended_by the admin) when the revoke and the grant's acquisition are one "
        "transaction; a revoke followed later by a grant stays 'revoked'",
        End.ROLLED_BACK: "sync rewinds to the fork point: a lease whose acquisition the chain lost is deleted, "
        "one whose end it lost is replayed (live again), and the index goes on from there",
    },
    watches=True,
)
