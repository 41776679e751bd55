"""Guard logic without a chain: marks, the fast path, verification, durability, store binding."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from chainfence import Guard, LeaseStatus
from chainfence.errors import (
    ChainRolledBack,
    GuardError,
    GuardStoreMismatch,
    InvalidInput,
    InvalidResourceName,
    LeaseExpired,
    LeaseReleased,
    StaleToken,
    TokenNotCurrent,
    UnknownToken,
)
from tests.support.fakes import FakeRegistry


@pytest.fixture
def registry():
    return FakeRegistry()


@pytest.fixture
def guard(registry, tmp_path):
    with Guard(registry, path=tmp_path / "guard.sqlite") as guard:
        yield guard


def test_first_token_is_verified_and_becomes_the_mark(guard, registry):
    registry.issue("r", 3)
    assert guard.check("r", 3) == 3
    assert guard.mark("r") == 3
    assert registry.reads == 1


def test_a_token_equal_to_the_mark_is_accepted_without_asking_the_chain(guard, registry):
    """Same epoch, more writes: the fast path reads only the store."""
    registry.issue("r", 3)
    guard.check("r", 3)
    for _ in range(5):
        assert guard.check("r", 3) == 3
    assert registry.reads == 1


def test_a_token_below_the_mark_is_stale_with_both_numbers(guard, registry):
    registry.issue("r", 7)
    guard.check("r", 7)
    with pytest.raises(StaleToken) as stale:
        guard.check("r", 5)
    assert (stale.value.token, stale.value.current_token, stale.value.resource) == (5, 7, "r")
    assert "5" in str(stale.value) and "7" in str(stale.value)
    assert guard.mark("r") == 7


def test_a_token_of_a_resource_never_held_is_unknown(guard, registry):
    """A token issued for another resource, presented for one the chain never leased: unknown."""
    registry.issue("r", 4)
    with pytest.raises(UnknownToken):
        guard.check("never-held", 4)
    assert guard.mark("never-held") == 0


def test_a_higher_current_token_raises_the_mark(guard, registry):
    registry.issue("r", 2)
    guard.check("r", 2)
    registry.issue("r", 9)
    assert guard.check("r", 9) == 9
    assert guard.mark("r") == 9
    with pytest.raises(StaleToken):
        guard.check("r", 2)


@pytest.mark.parametrize(
    ("chain_token", "status", "presented", "error"),
    [
        (4, LeaseStatus.LIVE, 1_000_000, UnknownToken),  # forged: above anything issued
        (9, LeaseStatus.LIVE, 6, StaleToken),  # above the mark but superseded on-chain
        (6, LeaseStatus.EXPIRED, 6, LeaseExpired),
        (6, LeaseStatus.RELEASED, 6, LeaseReleased),
    ],
)
def test_a_token_above_the_mark_the_chain_does_not_vouch_for_is_rejected_and_moves_nothing(
    guard, registry, chain_token, status, presented, error
):
    """Forged, foreign, superseded, expired or released: rejected, and the mark stays put."""
    registry.issue("r", 2)
    guard.check("r", 2)
    registry.issue("r", chain_token, status)
    with pytest.raises(error) as rejected:
        guard.check("r", presented)
    assert isinstance(rejected.value, TokenNotCurrent)
    assert guard.mark("r") == 2
    # ...and the honest holder of the mark is still accepted.
    assert guard.check("r", 2) == 2


def test_a_forged_token_does_not_poison_a_fresh_resource(guard, registry):
    """With no mark yet, a forged high token is rejected and leaves no mark behind."""
    registry.issue("r", 1)
    with pytest.raises(UnknownToken):
        guard.check("r", 2**200)
    assert guard.mark("r") == 0
    assert guard.check("r", 1) == 1


def test_marks_are_per_resource(guard, registry):
    registry.issue("a", 5)
    registry.issue("b", 2)
    guard.check("a", 5)
    assert guard.check("b", 2) == 2
    assert guard.marks() == {"a": 5, "b": 2}


def test_marks_survive_a_restart(registry, tmp_path):
    path = tmp_path / "guard.sqlite"
    registry.issue("r", 8)
    with Guard(registry, path=path) as first:
        first.check("r", 8)
    with Guard(registry, path=path) as second:
        assert second.mark("r") == 8
        with pytest.raises(StaleToken):
            second.check("r", 7)


def test_a_store_of_another_registry_is_refused(registry, tmp_path):
    """Marks only mean something for the registry that issued the tokens."""
    path = tmp_path / "guard.sqlite"
    registry.issue("r", 8)
    with Guard(registry, path=path) as guard:
        guard.check("r", 8)
    for other in (
        FakeRegistry(address="0x" + "cd" * 20),
        FakeRegistry(chain_id=1),
        FakeRegistry(deployment_hash="0x" + "11" * 32),  # the same address on a wiped and redeployed chain
    ):
        with pytest.raises(GuardStoreMismatch):
            Guard(other, path=path)


def test_a_file_that_is_not_a_store_is_refused(registry, tmp_path):
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(GuardError):
        Guard(registry, path=path)


@pytest.mark.parametrize("path", ["", ":memory:", "file:x?mode=memory", None, 3])
def test_a_guard_needs_a_real_file(registry, path):
    with pytest.raises(InvalidInput):
        Guard(registry, path=path)


def test_bad_input_is_refused_and_changes_nothing(guard, registry):
    registry.issue("r", 3)
    guard.check("r", 3)
    for token in (0, -3, 2**256, 3.0, "3", True, None):
        with pytest.raises(InvalidInput):
            guard.check("r", token)
    for name in ("", "x" * 129, None, b"r"):
        with pytest.raises(InvalidResourceName):
            guard.check(name, 3)
    assert guard.marks() == {"r": 3}
    assert registry.reads == 1


def test_a_closed_guard_refuses_to_check(guard, registry):
    registry.issue("r", 1)
    guard.close()
    with pytest.raises(GuardError, match="closed"):
        guard.check("r", 1)


def test_chain_errors_fail_closed(guard, registry):
    """If the chain cannot be asked, the token is not accepted and the mark does not move."""
    registry.issue("r", 1)
    guard.check("r", 1)

    def broken(resource):
        raise ConnectionError("node down")

    registry.last_lease = broken
    with pytest.raises(ConnectionError):
        guard.check("r", 2)
    assert guard.mark("r") == 1


def test_concurrent_threads_never_lower_the_mark(registry, tmp_path):
    """Threads check the chain's current token (and a stale one) while it keeps rising:
    each thread's accepted tokens never go down, stale ones are refused, the mark ends on top.

    Sequenced by events, not by sleeps: the "chain" issues its next token once a thread has
    accepted the current one, so every token is checked however the threads are scheduled,
    and the threads still checking it race with the ones that already see the next."""
    guard = Guard(registry, path=tmp_path / "guard.sqlite")
    top = 300
    registry.issue("r", 1)
    stop = threading.Event()
    accepted: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []
    progress = threading.Condition()
    highest = [0]  # the highest token any thread has had accepted

    def worker(i):
        try:
            while not stop.is_set():
                current = registry.leases["r"][0]
                for token in (current, max(1, current - 3)):
                    try:
                        accepted[i].append(guard.check("r", token))
                    except TokenNotCurrent:
                        continue
                    with progress:
                        highest[0] = max(highest[0], token)
                        progress.notify_all()
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)
            with progress:
                progress.notify_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        for token in range(2, top + 1):
            with progress:
                assert progress.wait_for(lambda: highest[0] >= token - 1 or errors, timeout=60), (
                    f"no thread accepted token {token - 1}"
                )
            registry.issue("r", token)  # a new acquisition on the "chain"
        with progress:
            assert progress.wait_for(lambda: highest[0] >= top or errors, timeout=60), f"no thread accepted {top}"
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert {t for seq in accepted for t in seq} == set(range(1, top + 1)), "every issued token was accepted"
    for seq in accepted:
        assert seq == sorted(seq), "a thread saw the mark go down"
    assert guard.check("r", top) == top
    assert guard.mark("r") == top
    with pytest.raises(StaleToken):
        guard.check("r", top - 1)
    guard.close()


def test_the_store_uses_wal_and_full_sync(guard, registry, tmp_path):
    """Durability settings: WAL journal, synchronous=FULL (a mark is on disk before check returns)."""
    registry.issue("r", 1)
    guard.check("r", 1)
    conn = guard._conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    raw = sqlite3.connect(guard.path)
    assert raw.execute("SELECT name, token FROM marks").fetchall() == [("r", 1)]
    raw.close()


# ---------------------------------------------------------------------------
# Modes, exclusivity, schema migration
# ---------------------------------------------------------------------------


def test_an_unknown_mode_is_refused(registry, tmp_path):
    with pytest.raises(InvalidInput, match="mode"):
        Guard(registry, path=tmp_path / "g.sqlite", mode="optimistic")


def test_strict_mode_asks_the_chain_on_every_check(registry, tmp_path):
    registry.issue("r", 3)
    with Guard(registry, path=tmp_path / "g.sqlite", mode="strict") as guard:
        for _ in range(3):
            guard.check("r", 3)
        assert registry.reads == 3


def test_strict_mode_rejects_an_expired_holder_at_the_mark(registry, tmp_path):
    """Mark mode's window (an expired holder at its own mark is accepted) is closed by strict mode."""
    registry.issue("r", 3)
    with (
        Guard(registry, path=tmp_path / "mark.sqlite") as mark,
        Guard(registry, path=tmp_path / "strict.sqlite", mode="strict") as strict,
    ):
        mark.check("r", 3)
        strict.check("r", 3)
        registry.issue("r", 3, LeaseStatus.EXPIRED)
        assert mark.check("r", 3) == 3, "the documented window of mark mode"
        with pytest.raises(LeaseExpired):
            strict.check("r", 3)


def test_an_exclusive_guard_answers_at_the_mark_from_memory(registry, tmp_path):
    registry.issue("r", 3)
    with Guard(registry, path=tmp_path / "g.sqlite", exclusive=True) as guard:
        guard.check("r", 3)

        def no_store():
            raise AssertionError("a check at the mark touched the store")

        real_conn, guard._conn = guard._conn, no_store
        assert guard.check("r", 3) == 3
        guard._conn = real_conn
        for wrong in (3.0, True, "3"):
            with pytest.raises(InvalidInput):
                guard.check("r", wrong)


def test_an_exclusive_guard_remembers_its_marks_across_restarts(registry, tmp_path):
    registry.issue("r", 5)
    with Guard(registry, path=tmp_path / "g.sqlite", exclusive=True) as guard:
        guard.check("r", 5)
    with Guard(registry, path=tmp_path / "g.sqlite", exclusive=True) as again:
        reads = registry.reads
        assert again.check("r", 5) == 5 and registry.reads == reads
        with pytest.raises(StaleToken):
            again.check("r", 4)


def test_an_exclusive_guard_owns_its_store(registry, tmp_path):
    path = tmp_path / "g.sqlite"
    with Guard(registry, path=path, exclusive=True):
        with pytest.raises(GuardError, match="in use"):
            Guard(registry, path=path, exclusive=True)
        with pytest.raises(GuardError, match="owns it"):
            Guard(registry, path=path)
    with Guard(registry, path=path), Guard(registry, path=path):  # shared guards coexist
        with pytest.raises(GuardError, match="in use"):
            Guard(registry, path=path, exclusive=True)


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_store_of_the_previous_release_is_refused_with_the_reason(registry, tmp_path, version):
    """Stores written by chainfence 0.1 belong to registries of the previous contract version, which
    this release does not read: refused, and the message says why (never silently reused)."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
    db.execute(
        "CREATE TABLE marks (resource_id BLOB PRIMARY KEY, name TEXT NOT NULL, token INTEGER NOT NULL, "
        "accepted_at REAL NOT NULL) WITHOUT ROWID"
    )
    meta = {
        "schema_version": version,
        "chain_id": "1337",
        "genesis_hash": "0x" + "00" * 32,
        "registry": registry.address,
    }
    db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    db.commit()
    db.close()
    with pytest.raises(GuardStoreMismatch, match="chainfence 0.1"):
        Guard(registry, path=path)


def test_a_chain_that_reads_below_the_mark_latches_the_store(registry, tmp_path):
    """The chain forgot a lease this store accepted (a rollback): ChainRolledBack, durably, for every
    token, in every guard on the store, across restarts; the marks themselves are untouched."""
    path = tmp_path / "g.sqlite"
    registry.issue("r", 5)
    registry.issue("s", 2)
    with Guard(registry, path=path) as guard:
        guard.check("r", 5)
        registry.issue("r", 3)  # the chain went back
        with pytest.raises(ChainRolledBack):
            guard.check("r", 6)
        with pytest.raises(ChainRolledBack):
            guard.check("r", 5)  # even at the mark, from now on
        with pytest.raises(ChainRolledBack):
            guard.check("s", 2)  # and for every resource
        assert guard.mark("r") == 5
    with Guard(registry, path=path) as reopened, pytest.raises(ChainRolledBack):
        reopened.check("s", 2)


def test_control_a_store_without_the_latch_accepts_a_reissued_number(registry, tmp_path):
    """The control for the latch: the same number re-issued after a rollback is accepted at the mark
    by mark mode (no chain read), which is why a chain read that sees the rollback must latch."""
    registry.issue("r", 5, holder="0x" + "aa" * 20)
    with Guard(registry, path=tmp_path / "g.sqlite") as guard:
        guard.check("r", 5)
        registry.issue("r", 5, holder="0x" + "bb" * 20)  # rolled back and re-issued to another holder
        assert guard.check("r", 5) == 5, "mark mode accepts at the mark without asking the chain"
    with Guard(registry, path=tmp_path / "s.sqlite", mode="strict") as strict:
        registry.issue("r", 5, holder="0x" + "aa" * 20)
        strict.check("r", 5)
        registry.issue("r", 5, holder="0x" + "bb" * 20)
        with pytest.raises(ChainRolledBack, match="issued twice"):
            strict.check("r", 5)


def test_every_cache_of_a_guard_is_bounded_and_a_miss_falls_back_to_the_store(registry, tmp_path, monkeypatch):
    """Names, exclusive marks and contract-holder answers are LRU-bounded; a mark evicted from memory
    is still enforced from the store."""
    from types import SimpleNamespace

    import chainfence.guard._guard as guard_module

    monkeypatch.setattr(guard_module, "_MAX_MEMO", 3)
    monkeypatch.setattr(guard_module, "_MAX_CONTRACT_HOLDERS", 3)
    monkeypatch.setattr(guard_module, "_MAX_IDS", 3)
    with Guard(registry, path=tmp_path / "g.sqlite", exclusive=True) as guard:
        for i in range(10):
            registry.issue(f"r{i}", 5)
            guard.check(f"r{i}", 5)
        assert len(guard._memo) <= 3 and len(guard._ids) <= 3
        with pytest.raises(StaleToken):
            guard.check("r0", 4)  # evicted long ago: the store still holds the mark
        assert guard.check("r0", 5) == 5
        registry.chain.rpc = SimpleNamespace(code=lambda address: b"")
        for i in range(10):
            guard._requests.is_contract("0x" + f"{i:040x}")
        assert len(guard._requests.contract_holders) <= 3


# ---------------------------------------------------------------------------
# The rejection log (issue 27): what `audit timeline --rejections` draws
# ---------------------------------------------------------------------------


def _logged(path):
    import json

    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_guard_records_each_refused_write_as_the_timeline_reads_it(registry, tmp_path):
    """On main a guard recorded no refusal: the overlay needed a hand-made file. Each refusal of check is
    one JSON line with the Rejection's fields; an accepted write, bad input and a chain failure are none."""
    from chainfence.audit.timeline import Rejection
    from chainfence.cli.audit import _rejections

    log = tmp_path / "rejections.jsonl"
    clock = iter(range(1_795_000_000, 1_795_000_100))
    with Guard(registry, path=tmp_path / "g.sqlite", rejection_log=log) as guard:
        guard._rejections._clock = lambda: next(clock)
        registry.issue("r", 3)
        guard.check("r", 3)
        registry.issue("r", 5)
        guard.check("r", 5)
        with pytest.raises(StaleToken):
            guard.check("r", 3)
        with pytest.raises(UnknownToken):
            guard.check("r", 9)
        with pytest.raises(InvalidInput):
            guard.check("r", -1)  # bad input: no write was refused
        assert guard.rejection_log == log
    lines = _logged(log)
    assert [(line["resource"], line["token"], line["holder"]) for line in lines] == [("r", 3, None), ("r", 9, None)]
    assert [line["time"] for line in lines] == [1_795_000_000, 1_795_000_001]
    assert lines[0]["reason"].startswith("StaleToken: token 3 for 'r' is stale")
    assert lines[1]["reason"].startswith("UnknownToken: ")
    drawn = _rejections(str(log))
    assert drawn == [Rejection(**line) for line in lines]


def test_the_rejection_log_is_bounded_and_never_changes_a_check(registry, tmp_path, caplog):
    log = tmp_path / "rejections.jsonl"
    with Guard(registry, path=tmp_path / "g.sqlite", rejection_log=log) as guard:
        guard._rejections._max_bytes = 600  # a few lines
        registry.issue("r", 7)
        guard.check("r", 7)
        for _ in range(20):
            with pytest.raises(StaleToken):
                guard.check("r", 1)
    assert 0 < len(_logged(log)) < 20 and log.stat().st_size <= 600
    assert sum("no more rejections are recorded" in record.getMessage() for record in caplog.records) == 1
    unwritable = tmp_path / "no-such-dir" / "rejections.jsonl"
    with Guard(registry, path=tmp_path / "g2.sqlite", rejection_log=unwritable) as guard:
        guard.check("r", 7)
        with pytest.raises(StaleToken):  # the refusal is raised as ever
            guard.check("r", 1)
    assert not unwritable.exists()


@pytest.mark.parametrize("bad", ["", 5, b"x"])
def test_a_bad_rejection_log_is_refused(registry, tmp_path, bad):
    with pytest.raises(InvalidInput, match="rejection_log must be a file path or None"):
        Guard(registry, path=tmp_path / "g.sqlite", rejection_log=bad)
