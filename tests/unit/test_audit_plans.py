"""Every audit query reads what its answer needs, not the index (issue #20): structure, never time.

A synthetic history is written through the projection a sync uses, one event a block (the sparse shape, where
the old ``events()`` read every block's hash for each call). For each query:

- every statement it runs has a plan without a full scan (``EXPLAIN QUERY PLAN``: SEARCH by an index, never
  SCAN a table; a list's page may walk an index from its start, in order, under a LIMIT) and no sort of
  what it reads (``USE TEMP B-TREE FOR ORDER BY``: a sort reads the whole range before its first row);
- the work it does (SQLite virtual-machine steps, counted by a progress handler) stays the same on an index
  eight times larger whose answer is the same size: nothing grows with the number of events or blocks;
- a list's page (the first, and one from a cursor) does the same work on the index eight times larger,
  where the listing itself (every takeover, every event, every live lease) is eight times longer; a page
  whose rows are rare (takeovers, live leases among thousands of expired claims) stops after its bound of
  rows examined;
- the timeline of a 1,000-lease resource runs a fixed number of statements, not one per lease.

Controls: the ``events()`` of before (every block's hash read for each call), the timeline's reads of
before (one ``events()`` per lease), the lists of before (every row their arguments match, sorted) and a
walk that filters in SQL (no bound on the rows it passes over) fail the same checks.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from eth_utils import keccak

from chainfence._node import events as _events
from chainfence.audit import _projection
from chainfence.audit.index import AuditIndex

HOT = "hot/one"
START = 1_800_000_000


def build(path: Path, blocks: int, *, seed: int = 5) -> AuditIndex:
    """``blocks`` blocks of one event each: 40 resources under ``svc/`` taking turns, 20 holders, renewals,
    releases and completions; ``hot/one`` acquired every 5th block; ``fixed/one`` exactly 12 times, in the
    first blocks (its answers are the same size however large the index). Two seconds a block."""
    rng = random.Random(seed)
    index = AuditIndex(path)
    index._set_meta("registry", "0x" + "00" * 20)
    index._set_meta("chain_id", 1)
    index._set_meta("deployment_block", 1)
    holders = [f"0x{i + 1:040x}" for i in range(20)]
    names = [f"svc/job-{i:02d}" for i in range(40)]
    state: dict[str, list] = {}  # name -> [token, holder, expires, open]
    token = 0
    with index._write() as conn:
        for block in range(1, blocks + 1):
            now = START + 2 * block
            if block <= 24:
                name = "fixed/one"
            elif block % 5 == 0:
                name = HOT
            else:
                name = rng.choice(names)
            held = state.get(name)
            live = held is not None and held[3] and held[2] > now
            rid = keccak(name.encode())

            def log(kind, **fields):
                entry = _events.RegistryLog(kind, rid, block, b"\1" * 32, f"0x{block:064x}", 0, tx_index=0, **fields)
                _projection.apply(conn, entry, now)

            if name == "fixed/one" and block % 2 == 0 and live:
                log(_events.Kind.RELEASED, token=held[0], holder=held[1])
                held[3] = False
            elif not live or name == HOT or rng.random() < 0.2:
                if held is None:
                    named = _events.RegistryLog(
                        _events.Kind.NAMED, rid, block, b"\1" * 32, f"0x{block:064x}", 1, name=name.encode()
                    )
                    _projection.apply(conn, named, now)
                token += 1
                holder = rng.choice(holders)
                previous = held[0] if held else 0
                reason = 0 if held is None else (3 if live and holder == held[1] else (2 if not held[3] else 1))
                log(
                    _events.Kind.ACQUIRED,
                    token=token,
                    holder=holder,
                    expires_at=now + 60,
                    previous_token=previous,
                    reason=reason,
                )
                state[name] = [token, holder, now + 60, True]
            elif rng.random() < 0.7:
                held[2] = now + 60
                log(_events.Kind.RENEWED, token=held[0], holder=held[1], expires_at=held[2], progress=b"\7" * 32)
            elif rng.random() < 0.5:
                log(_events.Kind.COMPLETED, token=held[0], holder=held[1], result_digest=b"\5" * 32)
            else:
                log(_events.Kind.RELEASED, token=held[0], holder=held[1])
                held[3] = False
            conn.execute(
                "INSERT INTO blocks (number, hash, timestamp) VALUES (?, ?, ?)", (block, keccak(b"%d" % block), now)
            )
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('synced_block', ?)", (str(blocks),))
    return index


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> AuditIndex:
    index = build(tmp_path_factory.mktemp("plans") / "small.sqlite", 1_000)
    yield index
    index.close()


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> AuditIndex:
    index = build(tmp_path_factory.mktemp("plans") / "large.sqlite", 8_000)
    yield index
    index.close()


def queries(index: AuditIndex) -> dict[str, object]:
    """Each query kind with arguments whose answers are the same size on either index."""
    holder = index._conn.execute("SELECT holder FROM leases WHERE resource_id = ?", (keccak(b"fixed/one"),)).fetchone()[
        0
    ]
    first_token = index._conn.execute("SELECT min(token) FROM leases").fetchone()[0]
    return {
        "history": lambda: index.history("fixed/one"),
        "history_by_id": lambda: index.history_by_id(keccak(b"fixed/one")),
        "lease": lambda: index.lease(first_token),
        "holder_at(time)": lambda: index.holder_at("fixed/one", time=START + 20),
        "holder_at(block)": lambda: index.holder_at("fixed/one", block=10),
        "current()": lambda: index.current(),
        "current(prefix)": lambda: index.current(prefix="fixed/"),
        "takeovers(blocks)": lambda: index.takeovers(from_block=1, to_block=24),
        "takeovers(time)": lambda: index.takeovers(since=START, until=START + 48),
        "takeovers(resource)": lambda: index.takeovers(resource="fixed/one"),
        "completions(blocks)": lambda: index.completions(from_block=1, to_block=100),
        "completions(time)": lambda: index.completions(since=START, until=START + 200),
        "completions(resource)": lambda: index.completions(resource="fixed/one"),
        "resources(prefix)": lambda: index.resources("fixed/"),
        "events(resource)": lambda: index.events(resource_id=keccak(b"fixed/one")),
        "events(token)": lambda: index.events(token=first_token),
        "events(blocks)": lambda: index.events(from_block=1, to_block=24),
        "events(holder, blocks)": lambda: index.events(holder=holder, from_block=1, to_block=24),
        "status": lambda: index.status(),
        "leases_of(fixed holder)": None,  # below: a holder's leases grow with the index by nature
    }


def statements(index: AuditIndex, run) -> list[str]:
    ran: list[str] = []
    index._conn.set_trace_callback(ran.append)
    try:
        run()
    finally:
        index._conn.set_trace_callback(None)
    return [sql for sql in ran if not sql.startswith(("BEGIN", "COMMIT", "PRAGMA"))]


def full_scans(index: AuditIndex, sql: str) -> list[str]:
    """The plan's scans: of a table, or of an index in a statement with no LIMIT to stop the walk."""
    plan = index._conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
    limited = " LIMIT " in sql
    return [
        row[3]
        for row in plan
        if row[3].startswith("SCAN")
        and row[3] != "SCAN CONSTANT ROW"
        and not (limited and (" USING INDEX " in row[3] or " USING COVERING INDEX " in row[3]))
    ]


def sorts(index: AuditIndex, sql: str) -> list[str]:
    """The plan's sorts of what it read (a sort of a whole range before the first row)."""
    plan = index._conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
    return [row[3] for row in plan if row[3] == "USE TEMP B-TREE FOR ORDER BY"]


def steps(index: AuditIndex, run) -> int:
    count = [0]

    def tick():
        count[0] += 1
        return 0

    index._conn.set_progress_handler(tick, 20)
    try:
        run()
    finally:
        index._conn.set_progress_handler(None, 0)
    return count[0]


def test_no_query_scans_a_table(large):
    for name, run in {**queries(large), **pages(large)}.items():
        if run is None:
            continue
        for sql in statements(large, run):
            assert full_scans(large, sql) == [], (name, sql)
            assert sorts(large, sql) == [], (name, sql)
    holder = large._conn.execute("SELECT holder FROM leases LIMIT 1").fetchone()[0]
    for sql in statements(large, lambda: large.leases_of(holder)) + statements(
        large, lambda: large.timeline_leases([HOT])
    ):
        assert full_scans(large, sql) == [], sql


def test_no_query_does_more_work_on_a_larger_index(small, large):
    """The index eight times larger (8,000 blocks of one event against 1,000) does the same work for the same
    answer: the answers are compared, the VM steps bounded."""
    small_runs, large_runs = queries(small), queries(large)
    for name, run in small_runs.items():
        if run is None:
            continue
        answer_small, answer_large = run(), large_runs[name]()
        if name != "status":
            assert answer_small == answer_large or name in ("current()",), name
        few, many = steps(small, run), steps(large, large_runs[name])
        assert many <= 2 * few + 20, (name, few, many)


def test_the_timeline_of_a_busy_resource_runs_a_fixed_number_of_statements(large):
    leases = list(large.every(large.history, resource=HOT))
    assert len(leases) >= 1_000
    ran = statements(large, lambda: large.timeline_leases([HOT]))
    assert len(ran) <= 6, len(ran)
    drawn = large.timeline_leases([HOT])
    renewed = sum(len(lease.renewals) for lease in drawn)
    assert (
        renewed
        == large._conn.execute(
            "SELECT count(*) FROM events WHERE resource_id = ? AND kind = 'LeaseRenewed'", (keccak(HOT.encode()),)
        ).fetchone()[0]
    )


def pages(index: AuditIndex) -> dict[str, object]:
    """Pages of listings that grow with the index (every takeover, event, completion, live lease, a busy
    resource's leases): the first page and the one after it, 8 rows each (full on either index)."""
    holder = index._conn.execute(
        # the busiest holder whose address reads the same checksummed (the synthetic ones are lower case)
        "SELECT holder FROM leases WHERE holder NOT GLOB '*[a-f]*' GROUP BY holder ORDER BY count(*) DESC, holder "
        "LIMIT 1"
    ).fetchone()[0]
    listings = {
        "current()": (index.current, {}),
        "current(prefix)": (index.current, {"prefix": "svc/"}),
        "takeovers()": (index.takeovers, {}),
        "takeovers(since)": (index.takeovers, {"since": START}),
        "takeovers(resource)": (index.takeovers, {"resource": HOT}),
        "completions()": (index.completions, {}),
        "completions(since)": (index.completions, {"since": START}),
        "resources()": (index.resources, {}),
        "events()": (index.events, {}),
        "events(kinds)": (index.events, {"kinds": [_events.Kind.ACQUIRED]}),
        "events(holder)": (index.events, {"holder": holder}),
        "history(busy)": (index.history, {"resource": HOT}),
        "leases_of(busy holder)": (index.leases_of, {"holder": holder}),
    }
    result: dict[str, object] = {}
    for name, (query, arguments) in listings.items():
        result[f"{name} first page"] = lambda query=query, arguments=arguments: query(limit=8, **arguments)
        cursor = query(limit=8, **arguments).next
        result[f"{name} next page"] = lambda query=query, arguments=arguments, cursor=cursor: query(
            limit=8, after=cursor, **arguments
        )
    return result


def test_a_page_does_the_same_work_however_long_the_listing(small, large):
    """Each listing is about eight times longer on the larger index; its pages are not: the same rows a
    page (8), the same work within 2x."""
    small_runs, large_runs = pages(small), pages(large)
    for name, run in small_runs.items():
        few_rows, many_rows = run(), large_runs[name]()
        assert len(few_rows) == len(many_rows) == 8 and many_rows.next, name
        few, many = steps(small, run), steps(large, large_runs[name])
        assert many <= 2 * few + 20, (name, few, many)


def takeovers_before(index: AuditIndex, since: int, until: int) -> list:
    """takeovers(since=, until=) as it was: every row its arguments match, sorted by block."""
    return index._conn.execute(
        "SELECT l.resource_id, l.token, l.holder, l.previous_token, p.holder, p.ended, l.reason, l.acquired_block, "
        "l.acquired_at, l.tx_hash, r.name FROM leases l JOIN leases p ON p.token = l.previous_token "
        "LEFT JOIN resources r ON r.resource_id = l.resource_id WHERE l.acquired_at >= ? AND l.acquired_at <= ? "
        "AND l.previous_token > 0 AND p.holder != l.holder ORDER BY l.acquired_block, l.acquired_tx, l.acquired_log",
        (since, until),
    ).fetchall()


def test_control_the_lists_of_before_sort_and_grow_with_the_listing(small, large):
    """takeovers over a time range as it was: an hour's are read off the time index and sorted by block;
    every one costs eight times more on the larger index (its answer is eight times longer)."""
    ran = statements(large, lambda: takeovers_before(large, START + 4_000, START + 7_600))
    assert any(sorts(large, sql) for sql in ran), "an hour's takeovers were sorted by block"
    few = steps(small, lambda: takeovers_before(small, START, START + 10**6))
    many = steps(large, lambda: takeovers_before(large, START, START + 10**6))
    assert many > 4 * few, (few, many)


def claims(path: Path, blocks: int) -> AuditIndex:
    """``blocks`` blocks of one first acquisition each (a claim of item ``claim/N`` by one holder, never
    taken again, expired by the end but the last few): no takeover, few live leases, thousands open."""
    index = AuditIndex(path)
    index._set_meta("registry", "0x" + "00" * 20)
    index._set_meta("chain_id", 1)
    index._set_meta("deployment_block", 1)
    with index._write() as conn:
        for block in range(1, blocks + 1):
            now = START + 2 * block
            rid = keccak(b"claim/%d" % block)
            for kind, log, fields in (
                (_events.Kind.NAMED, 0, {"name": b"claim/%d" % block}),
                (
                    _events.Kind.ACQUIRED,
                    1,
                    {
                        "token": block,
                        "holder": "0x" + "11" * 20,
                        "expires_at": now + 20,
                        "previous_token": 0,
                        "reason": 0,
                    },
                ),
            ):
                entry = _events.RegistryLog(kind, rid, block, b"\1" * 32, f"0x{block:064x}", log, tx_index=0, **fields)
                _projection.apply(conn, entry, now)
            conn.execute(
                "INSERT INTO blocks (number, hash, timestamp) VALUES (?, ?, ?)", (block, keccak(b"%d" % block), now)
            )
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('synced_block', ?)", (str(blocks),))
    return index


def test_a_page_of_rare_rows_stops_after_its_bound_of_rows_examined(tmp_path):
    """No takeover among 2,000 or 16,000 claims, and five live leases among thousands open: each page walks
    its bound (1,000 rows for 100) and says where it stopped; the work does not grow with the index. Control:
    the same walks with the condition in SQL pass over every row."""
    small, large = claims(tmp_path / "small.sqlite", 2_000), claims(tmp_path / "large.sqlite", 16_000)
    try:
        for index in (small, large):
            page = index.takeovers()
            assert page == [] and page.next is not None
            live = list(index.every(index.current))
            assert len(live) == 10, len(live)
        for name, run in (
            ("takeovers()", lambda index: index.takeovers()),
            ("current()", lambda index: index.current()),
            ("events(kinds)", lambda index: index.events(kinds=[_events.Kind.COMPLETED])),
        ):
            few, many = steps(small, lambda: run(small)), steps(large, lambda: run(large))
            assert many <= 2 * few + 20, (name, few, many)
        filtered = (
            "SELECT l.token FROM leases l INDEXED BY leases_block LEFT JOIN leases p ON p.token = l.previous_token "
            "WHERE l.previous_token > 0 AND p.holder != l.holder ORDER BY l.acquired_block LIMIT 101"
        )
        few = steps(small, lambda: small._conn.execute(filtered).fetchall())
        many = steps(large, lambda: large._conn.execute(filtered).fetchall())
        assert many > 4 * few, ("control: a walk filtered in SQL passes over every row", few, many)
    finally:
        small.close()
        large.close()


def events_before(index: AuditIndex, **where) -> list:
    """events() before issue 20: its rows, then every block's hash read into a dict."""
    clauses = " AND ".join(f"{column} = ?" for column in where) or "1 = 1"
    rows = index._conn.execute(
        f"SELECT {_projection.EVENT_COLUMNS} FROM events WHERE {clauses} ORDER BY block, log_index",
        tuple(where.values()),
    ).fetchall()
    hashes = dict(index._conn.execute("SELECT number, hash FROM blocks"))
    return [_projection.log_from_row(row, bytes(hashes.get(row[0], b""))) for row in rows]


def test_control_the_events_of_before_scan_the_blocks_and_grow_with_the_index(small, large):
    rid = keccak(b"fixed/one")
    scans = [full_scans(large, sql) for sql in statements(large, lambda: events_before(large, resource_id=rid))]
    assert ["SCAN blocks"] in scans
    few = steps(small, lambda: events_before(small, resource_id=rid))
    many = steps(large, lambda: events_before(large, resource_id=rid))
    assert many > 4 * few, (few, many)


def test_control_the_timeline_of_before_ran_a_statement_per_lease(large):
    leases = large.history(HOT)[:100]
    ran = statements(large, lambda: [events_before(large, token=lease.token, kind="LeaseRenewed") for lease in leases])
    assert len(ran) >= 2 * len(leases)
