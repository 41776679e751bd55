"""One AuditIndex shared by threads: a read never sees a sync's rows before they are committed.

The index has one SQLite connection, shared by the threads that use the object (a service syncing in one
thread and answering queries in others, the asyncio face's worker threads). A sync writes a page in one
transaction on that connection; a read from another thread on the same connection would be inside that
transaction and see its rows uncommitted, and keep what it read when the page rolls back (a reorg found
mid-page, an incomplete answer, a crash of the sync). Every read answers from one snapshot taken under the
index's lock.

``verify`` reads a file's committed rows through a connection of its own (a snapshot neither waits for);
its control reads through the shared connection and reports the uncommitted row as "not on the chain".

Sequenced by events: the sync stops inside its write transaction, after applying the new lease, until the
reader either waits for the index's lock or has answered; then the page fails and rolls back. Control: the
reads without the snapshot return the lease that was never committed.
"""

from __future__ import annotations

import contextlib
import threading

import chainfence.audit.index as index_module
from chainfence.audit.index import AuditIndex
from tests.support.sequencer import wait_until


class WatchedLock:
    """The index's RLock, telling when another thread waits for it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.owner: int | None = None
        self.contended = threading.Event()

    def acquire(self, *args, **kwargs) -> bool:
        if self.owner is not None and self.owner != threading.get_ident():
            self.contended.set()
        got = self.lock.acquire(*args, **kwargs)
        if got:
            self.owner = threading.get_ident()
        return got

    def release(self) -> None:
        self.lock.release()
        with contextlib.suppress(RuntimeError):
            if not self.lock._is_owned():  # type: ignore[attr-defined]
                self.owner = None

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()


class PageFailed(Exception):
    pass


def during_a_rolled_back_page(registry, alice, tmp_path, monkeypatch, act):
    """``act(index, lease)`` in another thread while a sync's page holds ``lease`` (new) uncommitted; then the
    page rolls back. Returns what ``act`` returned (or the exception it raised) and the index."""
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(registry)
    lease = alice.acquire("snap/x", ttl=600)
    index._lock = WatchedLock()  # type: ignore[assignment]
    applied, answered = threading.Event(), threading.Event()
    apply = index_module._projection.apply

    def apply_then_fail(conn, entry, at):
        apply(conn, entry, at)
        if conn.execute("SELECT 1 FROM leases WHERE token = ?", (lease.token,)).fetchone() is None:
            return  # not the lease's acquisition yet
        applied.set()
        wait_until(
            lambda: index._lock.contended.is_set() or answered.is_set(),
            "the reader waits for the index or has answered",
        )
        raise PageFailed("the page rolls back")

    monkeypatch.setattr(index_module._projection, "apply", apply_then_fail)
    outcome: list[object] = []

    def reader() -> None:
        assert applied.wait(60), "the sync never applied the lease"
        try:
            outcome.append(act(index, lease))
        except Exception as exc:
            outcome.append(exc)
        answered.set()

    thread = threading.Thread(target=reader)
    thread.start()
    failed: list[BaseException] = []
    try:
        index.sync(registry)
    except PageFailed as exc:
        failed.append(exc)
    thread.join(60)
    assert failed and not thread.is_alive(), "the page failed and rolled back"
    committed = AuditIndex(tmp_path / "audit.sqlite")
    assert committed.lease(lease.token) is None, "the rolled-back lease is not in the file"
    return outcome[0], index


def read_during_a_rolled_back_page(registry, alice, tmp_path, monkeypatch):
    seen, index = during_a_rolled_back_page(
        registry, alice, tmp_path, monkeypatch, lambda index, lease: [index.lease(lease.token), index.status().events]
    )
    return seen, AuditIndex(tmp_path / "audit.sqlite").status().events


def test_a_read_beside_a_sync_answers_from_committed_rows_only(registry, alice, tmp_path, monkeypatch):
    seen, events = read_during_a_rolled_back_page(registry, alice, tmp_path, monkeypatch)
    assert seen == [None, events]


def test_control_reads_without_the_snapshot_see_a_lease_that_was_never_committed(
    registry, alice, tmp_path, monkeypatch
):
    @contextlib.contextmanager
    def no_snapshot(self):
        yield self._conn

    monkeypatch.setattr(AuditIndex, "_snapshot", no_snapshot)
    seen, events = read_during_a_rolled_back_page(registry, alice, tmp_path, monkeypatch)
    assert seen[0] is not None and seen[0].resource == "snap/x", "a lease the index never committed"
    assert seen[1] == events + 1, "an event count the index never committed"


def verify_during_a_page(registry, alice, tmp_path, monkeypatch):
    """``index.verify`` beside the page: its count, or the error it raised."""
    return during_a_rolled_back_page(
        registry, alice, tmp_path, monkeypatch, lambda index, _lease: index.verify(registry)
    )


def test_a_verify_beside_a_sync_checks_committed_rows_only(registry, alice, tmp_path, monkeypatch):
    answer, index = verify_during_a_page(registry, alice, tmp_path, monkeypatch)
    assert isinstance(answer, int), f"verify passed over the committed rows, got {answer!r}"
    assert not index._lock.contended.is_set(), "a file's verify did not wait for the sync"
    monkeypatch.undo()
    index.sync(registry)
    assert index.verify(registry) == answer + 1, "the lease, once committed, is verified too"


def test_control_a_verify_through_the_syncs_connection_reports_a_row_that_was_never_committed(
    registry, alice, tmp_path, monkeypatch
):
    from chainfence.audit import _verify
    from chainfence.errors import AuditIndexDiffers

    def through_the_shared_connection(self, registry, *, max_blocks=None, limit=20, proofs=None):
        return _verify.verify(self, registry, max_blocks=max_blocks, limit=limit, proofs=proofs)

    monkeypatch.setattr(AuditIndex, "verify", through_the_shared_connection)
    answer, _index = verify_during_a_page(registry, alice, tmp_path, monkeypatch)
    assert isinstance(answer, AuditIndexDiffers), answer
    assert "not on the chain: LeaseAcquired" in str(answer), "a false alarm over a row never committed"
