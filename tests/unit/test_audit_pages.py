"""The audit's list queries a page at a time (issue #20): bounded pages, keyset cursors, typed refusals.

On the synthetic history of ``tests/unit/test_audit_plans.py`` (one event a block), every list query read
in pages of 7 gives exactly the rows its arguments match, in order, each once, against a reference written
in plain SQL from the tables (not through the pages); a bad ``limit`` or cursor is a typed error that reads
and writes nothing; a rewind past a cursor's block makes it stale, a rewind above it does not; rows of
schema 2 (no transaction index) page through too. The chain's side (a sync appending while pages are read,
OFFSET's control, a reorg) is ``tests/chain/test_audit_pages.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from eth_utils import keccak

from chainfence._node import events as _events
from chainfence.audit import _pages, _projection
from chainfence.audit.index import DEFAULT_LIMIT, MAX_LIMIT, AuditIndex, Page
from chainfence.cli import audit as cli_audit
from chainfence.errors import InvalidInput, StaleCursor
from tests.unit.test_audit_plans import HOT, START, build

FIXED = "fixed/one"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pages") / "index.sqlite"
    build(path, 1_200).close()
    return path


@pytest.fixture
def index(built, tmp_path) -> AuditIndex:
    copy = tmp_path / "index.sqlite"
    shutil.copy(built, copy)
    opened = AuditIndex(copy)
    yield opened
    opened.close()


def sql(index: AuditIndex, text: str, *params) -> list:
    return index._conn.execute(text, params).fetchall()


def as_of(index: AuditIndex) -> int:
    return index.status().as_of


def listings(index: AuditIndex) -> dict[str, tuple]:
    """Each list query: (the bound query, its arguments, a key of a row, the reference rows' keys in order)."""
    holder = sql(index, "SELECT holder FROM leases WHERE resource_id = ?", keccak(HOT.encode()))[0][0]
    token = sql(index, "SELECT token FROM leases WHERE resource_id = ? LIMIT 1", keccak(HOT.encode()))[0][0]
    hot, now = keccak(HOT.encode()), as_of(index)
    lease_order = "ORDER BY acquired_block, acquired_tx, acquired_log"
    event_order = "ORDER BY block, tx_index, log_index"
    takeovers = (
        "SELECT l.token FROM leases l JOIN leases p ON p.token = l.previous_token "
        "WHERE l.previous_token > 0 AND p.holder != l.holder {} ORDER BY l.acquired_block, l.acquired_tx, l.acquired_log"
    )
    completed = "SELECT block, token FROM events WHERE kind = 'LeaseCompleted' {} " + event_order
    named = sql(index, "SELECT resource_id, name FROM resources WHERE name IS NOT NULL ORDER BY name, resource_id")
    live = {
        rid: tok
        for tok, rid in sql(index, "SELECT token, resource_id FROM leases WHERE ended IS NULL AND expires_at > ?", now)
    }
    event_key = lambda row: (row[0].block_number, row[0].tx_hash, row[0].log_index)  # noqa: E731 - a table of lambdas
    lease_key = lambda lease: lease.token  # noqa: E731
    return {
        "history": (
            index.history,
            {"resource": HOT},
            lease_key,
            [r[0] for r in sql(index, f"SELECT token FROM leases WHERE resource_id = ? {lease_order}", hot)],
        ),
        "history_by_id": (
            index.history_by_id,
            {"resource_id": hot},
            lease_key,
            [r[0] for r in sql(index, f"SELECT token FROM leases WHERE resource_id = ? {lease_order}", hot)],
        ),
        "leases_of": (
            index.leases_of,
            {"holder": holder},
            lease_key,
            [r[0] for r in sql(index, f"SELECT token FROM leases WHERE holder = ? {lease_order}", holder)],
        ),
        "current()": (index.current, {}, lease_key, [live[rid] for rid in sorted(live)]),
        "current(prefix)": (
            index.current,
            {"prefix": "svc/"},
            lease_key,
            [live[bytes(rid)] for rid, name in named if bytes(name).startswith(b"svc/") and bytes(rid) in live],
        ),
        "takeovers()": (index.takeovers, {}, lease_key, [r[0] for r in sql(index, takeovers.format(""))]),
        "takeovers(blocks)": (
            index.takeovers,
            {"from_block": 300, "to_block": 700},
            lease_key,
            [r[0] for r in sql(index, takeovers.format("AND l.acquired_block BETWEEN 300 AND 700"))],
        ),
        "takeovers(time)": (
            index.takeovers,
            {"since": START + 600, "until": START + 1_400},
            lease_key,
            [
                r[0]
                for r in sql(index, takeovers.format(f"AND l.acquired_at BETWEEN {START + 600} AND {START + 1_400}"))
            ],
        ),
        "takeovers(time, blocks)": (
            index.takeovers,
            {"since": START + 600, "from_block": 200, "to_block": 900},
            lease_key,
            [
                r[0]
                for r in sql(
                    index,
                    takeovers.format(f"AND l.acquired_at >= {START + 600} AND l.acquired_block BETWEEN 200 AND 900"),
                )
            ],
        ),
        "takeovers(resource)": (
            index.takeovers,
            {"resource": HOT},
            lease_key,
            [r[0] for r in sql(index, takeovers.format("AND l.resource_id = ?"), hot)],
        ),
        "takeovers(resource, time)": (
            index.takeovers,
            {"resource": HOT, "until": START + 1_000},
            lease_key,
            [
                r[0]
                for r in sql(
                    index, takeovers.format(f"AND l.resource_id = ? AND l.acquired_at <= {START + 1_000}"), hot
                )
            ],
        ),
        "completions()": (
            index.completions,
            {},
            lambda c: (c.block, c.token),
            [tuple(r) for r in sql(index, completed.format(""))],
        ),
        "completions(time)": (
            index.completions,
            {"since": START + 900},
            lambda c: (c.block, c.token),
            [tuple(r) for r in sql(index, completed.format(f"AND timestamp >= {START + 900}"))],
        ),
        "completions(resource)": (
            index.completions,
            {"resource": "svc/job-03"},
            lambda c: (c.block, c.token),
            [tuple(r) for r in sql(index, completed.format("AND resource_id = ?"), keccak(b"svc/job-03"))],
        ),
        "completions(resource, blocks)": (
            index.completions,
            {"resource": "svc/job-03", "to_block": 800},
            lambda c: (c.block, c.token),
            [
                tuple(r)
                for r in sql(index, completed.format("AND resource_id = ? AND block <= 800"), keccak(b"svc/job-03"))
            ],
        ),
        "resources()": (index.resources, {}, lambda r: r.resource_id, [bytes(rid) for rid, _ in named]),
        "resources(prefix)": (
            index.resources,
            {"prefix": "svc/job-1"},
            lambda r: r.resource_id,
            [bytes(rid) for rid, name in named if bytes(name).startswith(b"svc/job-1")],
        ),
        "events()": (
            index.events,
            {},
            event_key,
            [tuple(r) for r in sql(index, f"SELECT block, tx_hash, log_index FROM events {event_order}")],
        ),
        "events(blocks, kinds)": (
            index.events,
            {"from_block": 100, "to_block": 600, "kinds": [_events.Kind.RENEWED, _events.Kind.RELEASED]},
            event_key,
            [
                tuple(r)
                for r in sql(
                    index,
                    f"SELECT block, tx_hash, log_index FROM events WHERE block BETWEEN 100 AND 600 AND kind IN ('LeaseRenewed', 'LeaseReleased') {event_order}",
                )
            ],
        ),
        "events(resource, holder)": (
            index.events,
            {"resource_id": hot, "holder": holder},
            event_key,
            [
                tuple(r)
                for r in sql(
                    index,
                    f"SELECT block, tx_hash, log_index FROM events WHERE resource_id = ? AND holder = ? {event_order}",
                    hot,
                    holder,
                )
            ],
        ),
        "events(token)": (
            index.events,
            {"token": token},
            event_key,
            [
                tuple(r)
                for r in sql(
                    index, f"SELECT block, tx_hash, log_index FROM events WHERE token = ? {event_order}", token
                )
            ],
        ),
        "events(holder, kinds)": (
            index.events,
            {"holder": holder, "kinds": [_events.Kind.COMPLETED]},
            event_key,
            [
                tuple(r)
                for r in sql(
                    index,
                    f"SELECT block, tx_hash, log_index FROM events WHERE holder = ? AND kind = 'LeaseCompleted' {event_order}",
                    holder,
                )
            ],
        ),
    }


def test_every_list_query_read_in_pages_gives_each_matching_row_once_in_order(index):
    for name, (query, arguments, key, reference) in listings(index).items():
        assert reference, name  # every listing has rows to page through
        pages = list(index.pages(query, limit=7, **arguments))
        assert all(len(page) <= 7 for page in pages) and pages[-1].next is None, name
        assert [page.next is not None for page in pages] == [True] * (len(pages) - 1) + [False], name
        assert [key(row) for page in pages for row in page] == reference, name
        assert [key(row) for row in index.every(query, **arguments)] == reference, name
        one = query(limit=MAX_LIMIT, **arguments)
        assert [key(row) for row in one] == reference and one.next is None, name


def test_a_page_holds_the_default_limit_and_a_cursor_when_more_follow(index):
    takeovers = listings(index)["takeovers()"][3]
    assert len(takeovers) > DEFAULT_LIMIT
    page = index.takeovers()
    assert isinstance(page, Page) and isinstance(page, list)
    assert [t.token for t in page] == takeovers[:DEFAULT_LIMIT] and page.more
    following = index.takeovers(after=page.next)
    assert [t.token for t in following] == takeovers[DEFAULT_LIMIT : 2 * DEFAULT_LIMIT]
    assert (DEFAULT_LIMIT, MAX_LIMIT) == (cli_audit.DEFAULT_LIMIT, cli_audit.MAX_LIMIT), "the CLI's help says"


def test_a_walk_stops_after_its_bound_of_rows_examined_and_says_where(index, monkeypatch):
    """A listing whose rows are rare (a holder's completions) gives pages with fewer rows than asked, even
    none, each after at most examined(limit) rows, with a cursor to go on: the same rows in the end."""
    query, arguments, key, reference = listings(index)["events(holder, kinds)"]
    monkeypatch.setattr(_pages, "examined", lambda limit: 5)  # a walk of five rows a page
    pages = list(index.pages(query, limit=3, **arguments))
    assert any(len(page) == 0 and page.next is not None for page in pages), "an empty page that goes on"
    assert [key(row) for page in pages for row in page] == reference


@pytest.mark.parametrize("limit", [0, -1, MAX_LIMIT + 1, True, 1.5, "10", None, 2**70])
def test_a_bad_limit_is_invalid_limit_and_reads_nothing(index, limit):
    for name, (query, arguments, _key, _reference) in listings(index).items():
        changes = index._conn.total_changes
        with pytest.raises(InvalidInput):
            query(limit=limit, **arguments)
        with pytest.raises(InvalidInput):
            index.pages(query, limit=limit, **arguments)
        assert index._conn.total_changes == changes, name


def test_a_bad_cursor_is_invalid_cursor_and_reads_nothing(index):
    queries = listings(index)
    takeovers = index.takeovers(limit=3)
    completions = index.completions(limit=3)
    wrong = {
        "not a str": 7,
        "empty": "",
        "not base64": "not a cursor!",
        "not JSON": "bm90IGpzb24",
        "too long": "A" * 5_000,
        "not ascii": "ünïcode",
        "another query's": completions.next,
        "other arguments'": index.takeovers(from_block=300, limit=3).next,
        "another version": _forge(takeovers.next, version=2),
        "a key of another shape": _forge(takeovers.next, key=["x", 1, 2]),
        "a key out of range": _forge(takeovers.next, key=[2**64, 0, 0]),
        "a short hash": _forge(takeovers.next, block_hash="abcd"),
    }
    query, arguments = queries["takeovers()"][:2]
    for why, cursor in wrong.items():
        changes = index._conn.total_changes
        with pytest.raises(InvalidInput):
            query(after=cursor, **arguments)
        assert index._conn.total_changes == changes, why
    with pytest.raises(InvalidInput):  # a cursor of current() with a prefix is not one of current()'s
        index.current(after=index.current(prefix="svc/", limit=2).next)
    with pytest.raises(InvalidInput):
        index.pages(lambda **_: Page())
    with pytest.raises(InvalidInput):
        index.every(index.holder_at, resource=HOT)
    with pytest.raises(InvalidInput):
        index.pages(AuditIndex(":memory:").takeovers)  # another index's query


def _forge(cursor: str, *, version=None, key=None, block_hash=None) -> str:
    import base64
    import json

    document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    if version is not None:
        document[0] = version
    if key is not None:
        document[3] = key
    if block_hash is not None:
        document[4] = block_hash
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


def replace_blocks(index: AuditIndex, first: int, mark: bytes) -> None:
    """The blocks from ``first`` on as another branch would give them: other hashes, the same events."""
    with index._write() as conn:
        rows = conn.execute("SELECT number, hash FROM blocks WHERE number >= ?", (first,)).fetchall()
        conn.executemany("UPDATE blocks SET hash = ? WHERE number = ?", [(mark + h[1:], n) for n, h in rows])


def test_a_rewind_past_the_cursors_block_makes_it_stale(index):
    page = index.events(limit=50)
    block = page[-1][0].block_number
    later = index.events(limit=50, after=page.next)  # the cursor goes on while its block stands
    assert later and later[0][0].block_number > block
    replace_blocks(index, block, b"\xee")  # a reorg from the cursor's block on, re-indexed
    changes = index._conn.total_changes
    with pytest.raises(StaleCursor):
        index.events(limit=50, after=page.next)
    assert index._conn.total_changes == changes
    index._truncate(block - 1, 1)  # rewound and not indexed again yet: the cursor's block is gone
    with pytest.raises(StaleCursor):
        index.events(limit=50, after=page.next)


def test_a_rewind_above_the_cursors_block_leaves_it_good(index):
    reference = listings(index)["takeovers()"][3]
    page = index.takeovers(limit=40)
    block = max(t.block for t in page)
    replace_blocks(index, block + 1, b"\xee")  # a reorg above the cursor: nothing read is touched
    rest = list(index.every(index.takeovers, after=page.next))
    assert [t.token for t in page] + [t.token for t in rest] == reference


def test_rows_of_schema_2_without_a_transaction_index_page_through(index):
    """Schema 2 did not record a transaction index: its rows have NULL there (a block's rows all NULL)."""
    with index._write() as conn:
        conn.execute("UPDATE events SET tx_index = NULL WHERE block <= 600")
        conn.execute("UPDATE leases SET acquired_tx = NULL WHERE acquired_block <= 600")
    for name in ("events()", "takeovers()", "history", "completions()", "takeovers(time)"):
        query, arguments, key, reference = listings(index)[name]
        assert [key(row) for row in index.every(query, limit=3, **arguments)] == reference, name


def test_a_page_of_current_is_judged_at_the_index_time_of_its_read(index):
    """current() pages by resource: a lease that expires between two pages (the index moved on) is not in
    the later page; none is shown twice."""
    first = index.current(limit=5)
    ids = [lease.resource_id for lease in first]
    assert ids == sorted(ids) and len(first) == 5
    with index._write() as conn:  # the index's chain time moves a day on: every lease has expired by then
        conn.execute("UPDATE blocks SET timestamp = timestamp + 86400 WHERE number = (SELECT max(number) FROM blocks)")
    assert list(index.every(index.current, after=first.next)) == []


def test_the_cli_fills_its_page_from_as_many_pages_as_it_takes(tmp_path):
    """``chainfence audit takeovers --limit 2``: the index's first pages hold no takeover (2,500 claims, each a
    first acquisition); the command reads on until it has two, and prints the cursor after the second."""
    import argparse

    from tests.unit.test_audit_plans import claims

    index = claims(tmp_path / "claims.sqlite", 2_500)
    with index._write() as conn:  # then three takeovers of claim/1, by others, a block each
        for i, block in enumerate(range(2_501, 2_504)):
            now = START + 2 * block
            entry = _events.RegistryLog(
                _events.Kind.ACQUIRED,
                keccak(b"claim/1"),
                block,
                b"\1" * 32,
                f"0x{block:064x}",
                0,
                tx_index=0,
                token=block,
                holder=f"0x{i + 0x21:040x}",
                expires_at=now + 60,
                previous_token=1 if i == 0 else block - 1,
                reason=2,
            )
            _projection.apply(conn, entry, now)
            conn.execute("INSERT INTO blocks VALUES (?, ?, ?)", (block, keccak(b"%d" % block), now))
        conn.execute("UPDATE meta SET value = '2503' WHERE key = 'synced_block'")
    assert index.takeovers(limit=2) == [] and index.takeovers(limit=2).next, "the index's first page: none"
    args = argparse.Namespace(
        audit_command="takeovers",
        from_block=None,
        to_block=None,
        since=None,
        until=None,
        resource=None,
        limit=2,
        after=None,
        all=False,
    )
    rows, following = cli_audit._answer(index, args, None)
    assert [t.token for t in rows] == [2_501, 2_502] and following is not None
    args.after = following
    rows, following = cli_audit._answer(index, args, None)
    assert [t.token for t in rows] == [2_503] and following is None
    index.close()
