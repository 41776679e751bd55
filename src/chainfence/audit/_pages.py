"""The audit index's list queries, a page at a time: keyset cursors over an index walked in order.

Every list query of :class:`chainfence.audit.index.AuditIndex` answers one
:class:`Page` of at most ``limit`` rows (:data:`DEFAULT_LIMIT` unless told,
at most :data:`MAX_LIMIT`) and a cursor to continue after it, the way etcd
(``--limit``, the range's next key), Kubernetes (``limit`` and
``continue``) and SQL keyset pagination do: no call's cost grows with the
index.

How a page is read (:func:`read`)
    A query is a :class:`Walk`: one SQLite index, named (``INDEXED BY``),
    walked in its order from the cursor on. Its ``WHERE`` holds only what
    that index's range answers (equalities on its first columns, a range on
    the first ordered column, the cursor's position); every other condition
    of the query (a kind, a time range beside a block range, "the previous
    holder differs", "still live") is a ``hit`` column, judged on each row
    the walk reaches. The walk stops after ``limit`` hits, or after
    :func:`examined` rows (ten a row asked for, at least 1,000) whatever
    they hit: a page may then hold fewer rows than ``limit`` (even none)
    and still carry a cursor, as a filtered Kubernetes list does. So a call
    reads at most a bounded number of index entries, however large the
    index or however rare the rows it keeps.

The cursor (``Page.next``, ``after=``)
    An opaque string: base64url of the JSON ``[1, query, fingerprint, key,
    block hash]``: the key of the last row examined (the walk's order
    columns), a fingerprint of the query's arguments (a cursor continues
    only the listing it came from: another query's, or the same query's
    with other arguments, is :class:`~chainfence.errors.InvalidInput` (``argument='after'``)),
    and, for a key that holds a block number, the first 8 bytes of that
    block's hash as the index held it.

    A page starts strictly after the cursor's key. Keys are unique and
    never change for a row (a block, transaction and log index; a resource
    id and a token; a name and a resource id), and a sync only adds rows at
    higher blocks, so a listing read page by page while a sync appends
    visits every row that was there when it started exactly once (and the
    rows appended after its position as well): no row is skipped or
    repeated, where OFFSET pagination repeats or skips whenever rows come
    or go before its position.

    A reorganisation: when the index is rewound past the cursor's block
    (its hash differs from the one the cursor carries, or the block is gone),
    rows already read may have been rolled back, so continuing raises
    :class:`~chainfence.errors.StaleCursor` and reads nothing: list again.
    A rewind to a block at or above the cursor's changes no row already
    read, and the listing goes on with the new branch's rows. Lists keyed
    by resource or name (``current``, ``resources``) carry no block: each
    page answers as of the index when it is read, and no key repeats.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ..errors import InvalidInput, StaleCursor

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Page",
    "Walk",
    "check_limit",
    "examined",
    "fingerprint",
    "read",
]

_R = TypeVar("_R")

#: Rows a page holds unless ``limit=`` says (the pages of a full read too): building a row into a record
#: costs 10-16 us of CPU here, so a page of 100 costs 1-2 ms and stays under 5 ms on a loaded machine
#: (``docs/benchmarks/history.md``, "Lists a page at a time"); larger pages save little (a call's own cost is
#: about 0.1 ms).
DEFAULT_LIMIT = 100

#: The most rows one page may hold: a bound on what one call costs (about 0.1-0.2 s of records).
MAX_LIMIT = 10_000

#: The longest cursor accepted (a name key is at most 257 bytes: 514 hex digits, and the rest).
_MAX_CURSOR = 2_048

_VERSION = 1

Kind = Literal["int", "bytes"]


class Page(list[_R]):
    """One page of an audit list query: its rows (the page *is* the list of them) and the cursors.

    ``next``: pass it as ``after=`` to read the next page; None when the walk reached the end of the
    listing (as of this read). ``tail``: the position after every row this call examined, or the ``after``
    it was given when it examined none; pass it as ``after=`` later to read only rows added since (None:
    nothing examined, no ``after``).
    """

    next: str | None
    tail: str | None

    def __init__(self, rows: Iterable[_R] = (), *, next: str | None = None, tail: str | None = None):
        super().__init__(rows)
        self.next = next
        self.tail = tail

    @property
    def more(self) -> bool:
        """Whether a next page may hold rows (``next`` is set)."""
        return self.next is not None

    def __repr__(self) -> str:
        return f"Page({list.__repr__(self)}, next={self.next!r})"


@dataclass(frozen=True)
class Walk:
    """One list query as a walk of one SQLite index (see the module docstring).

    ``source`` is the walked table (with its alias), ``index`` the index walked (its columns: ``where``'s
    equalities, then ``keys``), ``joins`` what each row joins by key to be judged (``hit``), ``shown_joins``
    what the rows kept join to be shown (``columns``). ``keys`` are the order columns (SQL)
    and ``kinds`` their types; the first may be bounded by ``low`` (inclusive) and ``high`` (inclusive
    unless ``high_open``). ``hit`` is the SQL of the rows kept (with ``hit_params``); ``block_key`` the
    position in ``keys`` of a block number (its hash guards the cursor against a rewind), or None.
    """

    query: str
    arguments: tuple[Any, ...]
    columns: str
    source: str
    index: str
    keys: tuple[str, ...]
    kinds: tuple[Kind, ...]
    where: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    joins: str = ""
    shown_joins: str = ""
    low: Any = None
    high: Any = None
    high_open: bool = False
    hit: str = "1"
    hit_params: tuple[Any, ...] = ()
    block_key: int | None = None
    fingerprint: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fingerprint", fingerprint(self.query, self.arguments))


def fingerprint(query: str, arguments: Sequence[Any]) -> str:
    """8 bytes (hex) that tell one listing's arguments from another's."""
    text = repr((query, tuple(arguments))).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def check_limit(limit: object) -> int:
    """``limit`` as an int from 1 to :data:`MAX_LIMIT`, else :class:`~chainfence.errors.InvalidInput`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(
            f"limit must be an int from 1 to {MAX_LIMIT}, got {limit!r:.80}", argument="limit", value=limit
        )
    return limit


def examined(limit: int) -> int:
    """The most rows one page's walk reaches: ten a row asked for, at least 1,000."""
    return max(1_000, 10 * limit)


def _encode(walk: Walk, key: tuple[Any, ...], block_hash: bytes | None) -> str:
    values = [value.hex() if kind == "bytes" else value for value, kind in zip(key, walk.kinds, strict=True)]
    document = [_VERSION, walk.query, walk.fingerprint, values, None if block_hash is None else block_hash[:8].hex()]
    text = json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(text).rstrip(b"=").decode()


def _decode(walk: Walk, cursor: object) -> tuple[tuple[Any, ...], bytes | None]:
    """The key and block hash a cursor carries, checked against ``walk``; InvalidInput otherwise."""
    if not isinstance(cursor, str):
        raise InvalidInput(
            f"after must be a cursor (a str a page gave as next or tail), got {type(cursor).__name__}", argument="after"
        )
    if not cursor or len(cursor) > _MAX_CURSOR or not cursor.isascii():
        raise InvalidInput(f"after is not a cursor of this index: {cursor[:40]!r}", argument="after")
    try:
        document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise InvalidInput(f"after is not a cursor of this index: {cursor[:40]!r}", argument="after") from None
    if not isinstance(document, list) or len(document) != 5 or document[0] != _VERSION:
        raise InvalidInput(f"after is not a cursor of this index: {cursor[:40]!r}", argument="after")
    _version, query, made_for, values, block_hash = document
    if query != walk.query:
        raise InvalidInput(f"after is a cursor of {query!r}, not of {walk.query!r}", argument="after")
    if made_for != walk.fingerprint:
        raise InvalidInput(
            f"after is a cursor of {walk.query!r} with other arguments: pass the ones it came from", argument="after"
        )
    if not isinstance(values, list) or len(values) != len(walk.kinds):
        raise InvalidInput(f"after is not a cursor of this index: {cursor[:40]!r}", argument="after")
    key: list[Any] = []
    try:
        for value, kind in zip(values, walk.kinds, strict=True):
            if kind == "bytes":
                if not isinstance(value, str):
                    raise ValueError(value)
                key.append(bytes.fromhex(value))
            else:
                if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < 2**63:
                    raise ValueError(value)
                key.append(value)
        stored = None if block_hash is None else bytes.fromhex(block_hash)
    except (ValueError, TypeError):
        raise InvalidInput(f"after is not a cursor of this index: {cursor[:40]!r}", argument="after") from None
    if stored is not None and (len(stored) != 8 or walk.block_key is None):
        raise InvalidInput(f"after is not a cursor of this index: {cursor[:40]!r}", argument="after")
    return tuple(key), stored


def _block_hash(conn: sqlite3.Connection, number: int) -> bytes | None:
    row = conn.execute("SELECT hash FROM blocks WHERE number = ?", (number,)).fetchone()
    return None if row is None else bytes(row[0])


def read(
    conn: sqlite3.Connection,
    walk: Walk,
    *,
    limit: object,
    after: object,
    build: Callable[[tuple[Any, ...]], _R | None],
    lock: AbstractContextManager[Any] | None = None,
) -> Page[_R]:
    """One page of ``walk``: at most ``limit`` rows, each ``build(row)`` of a row of ``walk.columns``
    (None: not shown, counted as examined), after the cursor ``after`` (None: from the start).

    Two statements in one read transaction (one snapshot of the file, under ``lock``: the index's own,
    which its writes hold): the walk, which reads each row's key and whether it is kept, and then the
    kept rows' columns by rowid. Raises InvalidInput (``argument`` ``'limit'`` or ``'after'``) or StaleCursor (see the module
    docstring); reads nothing then.
    """
    limit = check_limit(limit)
    position, stored = (None, None) if after is None else _decode(walk, after)
    with lock if lock is not None else nullcontext():
        began = not conn.in_transaction
        if began:
            conn.execute("BEGIN")
        try:
            return _read(conn, walk, limit, after, position, stored, build)
        finally:
            if began:
                conn.execute("COMMIT")


def _read(
    conn: sqlite3.Connection,
    walk: Walk,
    limit: int,
    after: object,
    position: tuple[Any, ...] | None,
    stored: bytes | None,
    build: Callable[[tuple[Any, ...]], _R | None],
) -> Page[_R]:
    if position is not None and stored is not None and walk.block_key is not None:
        now = _block_hash(conn, position[walk.block_key])
        if now is None or now[:8] != stored:
            raise StaleCursor(
                f"the index was rewound past block {position[walk.block_key]}, where this cursor's listing "
                "stood (a reorganisation): rows already read may have been rolled back; list again from the start"
            )
    first = walk.keys[0]
    terms = [sql for sql, _ in walk.where]
    params: list[Any] = [value for _, values in walk.where for value in values]
    low = walk.low
    if position is not None and (low is None or position[0] > low):
        low = position[0]  # one lower bound on the walked column: the index range starts at the cursor
    if low is not None:
        terms.append(f"{first} >= ?")
        params.append(low)
    if walk.high is not None:
        terms.append(f"{first} {'<' if walk.high_open else '<='} ?")
        params.append(walk.high)
    if position is not None:  # strictly after the cursor: the rows of its first column's value it passed
        rest = [f"coalesce({key}, -1)" if kind == "int" else key for key, kind in zip(walk.keys[1:], walk.kinds[1:])]
        terms.append(f"({first} > ? OR ({', '.join(rest)}) > ({', '.join('?' * len(rest))}))")
        params.extend([position[0], *position[1:]])
    selected = [f"coalesce({key}, -1)" if kind == "int" else key for key, kind in zip(walk.keys, walk.kinds)]
    rowid = f"{walk.source.split()[-1]}.rowid"
    # The walk: a key, a rowid and a verdict a row (no column the answer shows: a row passed over costs
    # little), in the index's order from the cursor, at most the bound of rows examined and one more.
    sql = (
        f"SELECT {rowid}, {walk.hit}, {', '.join(selected)} FROM {walk.source} INDEXED BY {walk.index} "
        f"{walk.joins} WHERE {' AND '.join(terms) or '1'} ORDER BY {', '.join(walk.keys)} LIMIT ?"
    )
    budget = examined(limit)
    kept: list[int] = []
    reached: tuple[Any, ...] | None = None  # the last row examined
    more = False
    count = 0
    for row in conn.execute(sql, (*walk.hit_params, *params, budget + 1)):
        if count == budget or len(kept) == limit:
            more = True  # a row past the page: the listing goes on
            break
        count += 1
        reached = row
        if row[1]:
            kept.append(row[0])
    rows: list[_R] = []
    if kept:
        fetched = {
            found[0]: found[1:]
            for found in conn.execute(
                f"SELECT {rowid}, {walk.columns} FROM {walk.source} {walk.joins} {walk.shown_joins} "
                f"WHERE {rowid} IN ({', '.join('?' * len(kept))})",
                kept,
            )
        }
        for key in kept:
            record = build(fetched[key])
            if record is not None:
                rows.append(record)
    last = (
        None
        if reached is None
        else tuple(bytes(value) if kind == "bytes" else value for value, kind in zip(reached[2:], walk.kinds))
    )

    def cursor(key: tuple[Any, ...]) -> str:
        block = None if walk.block_key is None else _block_hash(conn, key[walk.block_key])
        return _encode(walk, key, block)

    tail = cursor(last) if last is not None else (after if isinstance(after, str) else None)
    return Page(rows, next=tail if more else None, tail=tail)
