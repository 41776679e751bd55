"""The audit's lists read a page at a time while a sync appends, and across a reorganisation (both backends).

A sync runs in its own thread, one block a page (``max_blocks=1``), and stops after each committed page
until the reader has read one page of every listing (sequenced by events: the sync's ``progress``
callback, never a sleep). The reader has its own connection to the file, as another process would.

- The keyset cursors (``after=`` the last page's ``next``, or its ``tail`` once it caught up) visit every
  takeover and every event exactly once, the ones the sync appends included, in chain order; every
  resource and every live lease present from start to end exactly once, none twice.
- Control: OFFSET pagination over the same interleaving shows a resource twice (two names appended before
  its position shift the rest right: m/4 and m/6 twice) and a live lease twice (m/3 released, then taken
  again, before its position: m/6 twice); had the page fallen between the two, it would have skipped one.
- A reorganisation that rewinds the index past a cursor's block makes the cursor stale
  (:class:`~chainfence.errors.StaleCursor`, nothing read); a cursor before the fork point goes on, with the
  new branch's rows.
"""

from __future__ import annotations

import threading

import pytest

from chainfence.audit.index import MAX_LIMIT, AuditIndex
from chainfence.errors import StaleCursor

# On hardhat's node and ganache too (tests/conftest.py, docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")

PAGE = 2


def keys(rows, kind):
    if kind == "takeovers":
        return [t.token for t in rows]
    if kind == "events":
        return [(entry.block_number, entry.tx_hash, entry.log_index) for entry, _at in rows]
    if kind == "resources":
        return [r.resource for r in rows]
    return [lease.resource for lease in rows]


class Reader:
    """One listing read a page at a time, by keyset cursor and (the control) by OFFSET."""

    def __init__(self, index: AuditIndex, kind: str, **arguments):
        self.query = getattr(index, kind)
        self.kind, self.arguments = kind, arguments
        self.cursor: str | None = None
        self.offset = 0
        self.by_cursor: list = []
        self.by_offset: list = []

    def step(self) -> None:
        page = self.query(limit=PAGE, after=self.cursor, **self.arguments)
        self.by_cursor += keys(page, self.kind)
        # Caught up: go on later after the last row examined (rows a sync appends come after it).
        self.cursor = page.next if page.next is not None else page.tail
        everything = self.query(limit=MAX_LIMIT, **self.arguments)
        assert everything.next is None
        shown = keys(everything, self.kind)[self.offset : self.offset + PAGE]
        self.by_offset += shown
        self.offset += len(shown)

    def drain(self) -> None:
        for _ in range(100):
            before = (len(self.by_cursor), len(self.by_offset))
            self.step()
            if (len(self.by_cursor), len(self.by_offset)) == before:
                return
        raise AssertionError("never drained")


def test_pages_visit_every_row_once_while_a_sync_appends_and_offsets_do_not(chain, registry, alice, bob, tmp_path):
    start = chain.block_number() + 1
    names = [f"m/{i}" for i in range(1, 7)]
    first = {name: alice.acquire(name, ttl=600) for name in names}
    for name in names[:2]:
        alice.release(name, first[name].token)
        bob.acquire(name, ttl=600)  # two takeovers before the reader starts
    writer = AuditIndex(tmp_path / "audit.sqlite")
    writer.sync(registry)
    synced = chain.block_number()
    # What the sync will append, a block each: a release ahead of current()'s position, names that sort
    # before resources()' position, and more takeovers.
    alice.release("m/3", first["m/3"].token)
    alice.acquire("a/1", ttl=600)
    bob.acquire("m/3", ttl=600)
    alice.acquire("a/2", ttl=600)
    alice.release("m/4", first["m/4"].token)
    bob.acquire("m/4", ttl=600)
    assert chain.block_number() - synced >= 6

    index = AuditIndex(tmp_path / "audit.sqlite")  # the reader's own connection
    readers = [
        Reader(index, "takeovers", from_block=start),
        Reader(index, "events", from_block=start),
        Reader(index, "resources", prefix=""),
        Reader(index, "current", prefix="m/"),
    ]
    before = {reader.kind: keys(reader.query(limit=MAX_LIMIT, **reader.arguments), reader.kind) for reader in readers}
    for reader in readers:
        reader.step()  # the first page, before the sync appends anything

    committed, read, done = threading.Event(), threading.Event(), threading.Event()
    pages = []
    failure: list[BaseException] = []

    def each_page(done_block, first_block, last_block):
        pages.append(done_block)
        committed.set()
        assert read.wait(60), "the reader never read its page"
        read.clear()

    def sync():
        try:
            writer.sync(registry, max_blocks=1, progress=each_page)
        except BaseException as exc:  # pragma: no cover - reported below
            failure.append(exc)
        finally:
            done.set()
            committed.set()

    thread = threading.Thread(target=sync)
    thread.start()
    while True:
        assert committed.wait(60), "the sync never committed a page"
        committed.clear()
        if done.is_set():
            break
        for reader in readers:
            reader.step()  # one page of every listing between two of the sync's pages
        read.set()
    thread.join(60)
    assert not failure, failure
    assert len(pages) >= 6, pages
    for reader in readers:
        reader.drain()
    after = {reader.kind: keys(reader.query(limit=MAX_LIMIT, **reader.arguments), reader.kind) for reader in readers}
    by = {reader.kind: reader for reader in readers}

    # What a paginated read must give: for the lists in chain order, every row exactly once, the appended
    # ones included, in order; for the lists keyed by name, no key twice and every key there from start to
    # end (m/3 and m/4 changed hands meanwhile: released, then bob's) exactly once.
    changed = {"m/3", "m/4"}

    def whole(kind, seen):
        if kind in ("takeovers", "events"):
            return seen == after[kind]
        always = set(before[kind]) & set(after[kind]) - changed
        return len(seen) == len(set(seen)) and always <= set(seen)

    for kind in ("takeovers", "events"):
        assert len(after[kind]) > len(before[kind]), kind
    for kind, reader in by.items():
        assert whole(kind, reader.by_cursor), (kind, reader.by_cursor)
    assert {"a/1", "a/2"} <= set(after["resources"]) and "a/1" not in by["resources"].by_cursor

    # Control: OFFSET over the same interleaving fails the same check on both lists keyed by name: a/1 and
    # a/2 sort in before its position (m/4 and m/6 shown twice), m/3 leaves and comes back before it (m/6).
    for kind in ("resources", "current"):
        assert not whole(kind, by[kind].by_offset), (kind, by[kind].by_offset)
    assert len(by["resources"].by_offset) > len(set(by["resources"].by_offset)), "a resource shown twice"


def test_a_reorg_past_the_cursor_makes_it_stale_and_one_before_the_fork_goes_on(chain, registry, alice, bob, tmp_path):
    start = chain.block_number() + 1
    for name in ("r/1", "r/2", "r/3"):
        alice.acquire(name, ttl=600)
    fork = chain.snapshot()
    doomed = [alice.acquire(name, ttl=600) for name in ("r/4", "r/5")]
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(registry)
    early = index.events(from_block=start, limit=2)  # ends before the fork
    late = index.events(from_block=start, limit=len(index.events(from_block=start, limit=MAX_LIMIT)) - 1)
    assert early.next is not None and late.next is not None
    last_early = early[-1][0].block_number
    assert last_early < doomed[0].block_number <= late[-1][0].block_number
    chain.revert(fork)  # another branch: bob's, at the same heights
    won = [bob.acquire(name, ttl=600) for name in ("r/4", "r/6")]
    chain.mine(2)
    result = index.sync(registry)
    assert result.rewound_to is not None and result.rewound_to < doomed[0].block_number

    untouched = index._conn.total_changes
    with pytest.raises(StaleCursor):
        index.events(from_block=start, after=late.next)
    assert index._conn.total_changes == untouched, "nothing written"

    rest = list(index.every(index.events, from_block=start, after=early.next))
    everything = index.events(from_block=start, limit=MAX_LIMIT)
    assert keys(list(early) + rest, "events") == keys(everything, "events"), "before the fork: it goes on"
    assert {entry.holder for entry, _at in rest if entry.token in {w.token for w in won}} == {bob.sender}
