"""The audit index under faults: reorgs, crashes mid-sync, capped providers, hostile names (anvil).

Reorgs are staged with anvil's snapshot/revert (as tests/faults/test_reorg.py does): ``evm_revert`` drops
the blocks after the snapshot, and the blocks mined next form the new branch at the same heights, with
other hashes. Each promise has its control: what a sync without the rewind (or without the per-page
transaction) would have kept.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence.audit.index import AuditIndex
from tests.faults.test_hostile_names import HOSTILE, publish
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import wait_until

CAP = 4


def rows(index: AuditIndex) -> list[tuple]:
    return index._conn.execute(
        "SELECT block, log_index, kind, token, holder FROM events ORDER BY block, log_index"
    ).fetchall()


def fresh(registry, tmp_path, name="fresh.sqlite") -> AuditIndex:
    index = AuditIndex(tmp_path / name)
    index.sync(registry)
    return index


def spread(registry, names, gap=CAP + 1):
    agent = registry.connect(registry.chain.accounts[1])
    leases = []
    for name in names:
        registry.chain.mine(gap)
        leases.append(agent.acquire(name, ttl=600))
    return leases


def test_a_reorg_between_syncs_rewinds_to_the_fork_point(on_anvil, tmp_path):
    chain = on_anvil.chain
    alice, bob = on_anvil.connect(chain.accounts[1]), on_anvil.connect(chain.accounts[2])
    base = alice.acquire("jobs/a", ttl=600)
    fork = chain.snapshot()
    lost = alice.acquire("jobs/b", ttl=600)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(on_anvil)
    assert index.lease(lost.token) is not None
    chain.revert(fork)  # the branch with alice's jobs/b is gone
    won = bob.acquire("jobs/b", ttl=600)
    chain.mine(2)
    assert won.token == lost.token and won.holder != lost.holder, "the same token, another holder"
    result = index.sync(on_anvil)
    assert result.rewound_to is not None and base.block_number <= result.rewound_to < won.block_number
    assert index.lease(won.token).holder == bob.sender
    assert rows(index) == rows(fresh(on_anvil, tmp_path)), "as if synced from scratch"
    index.verify(on_anvil)


def test_control_without_the_rewind_the_index_keeps_the_lost_branch(on_anvil, tmp_path):
    chain = on_anvil.chain
    alice, bob = on_anvil.connect(chain.accounts[1]), on_anvil.connect(chain.accounts[2])
    alice.acquire("jobs/a", ttl=600)
    fork = chain.snapshot()
    lost = alice.acquire("jobs/b", ttl=600)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(on_anvil)
    chain.revert(fork)
    bob.acquire("jobs/b", ttl=600)
    chain.mine(2)
    index._check_block = lambda *args: None  # the naive indexer: resume after the cursor, no questions
    index._conn.execute("DELETE FROM blocks")  # and no hashes to compare logs against
    index.sync(on_anvil)
    assert index.lease(lost.token).holder == alice.sender, "the naive index names the holder of a branch that is gone"
    from chainfence.errors import AuditIndexDiffers

    with pytest.raises(AuditIndexDiffers):
        index.verify(on_anvil)


def test_a_reorg_during_a_sync_rewinds_and_reindexes(on_anvil, tmp_path):
    chain = on_anvil.chain
    bob = on_anvil.connect(chain.accounts[2])
    fork_head, fork = chain.block_number(), chain.snapshot()
    spread(on_anvil, ["r/1", "r/2", "r/3"])
    index = AuditIndex(tmp_path / "audit.sqlite")
    staged = []

    def reorg_after_the_first_page(done, first, last):
        if staged or done < fork_head + 1:  # the session chain may be long: wait for a page on the doomed branch
            return
        staged.append(done)
        chain.revert(fork)  # the pages read so far are replaced by another branch, at least as long
        chain.mine(1)
        bob.acquire("r/other", ttl=600)
        chain.mine(3 * (CAP + 1) + 3)

    result = index.sync(on_anvil, max_blocks=CAP, progress=reorg_after_the_first_page)
    assert staged and result.rewound_to is not None
    assert [(row[2], row[4]) for row in rows(index) if row[2] == "LeaseAcquired"] == [("LeaseAcquired", bob.sender)]
    assert rows(index) == rows(fresh(on_anvil, tmp_path))
    index.verify(on_anvil)


def test_a_failure_between_writing_and_committing_a_page_loses_only_that_page(on_anvil, tmp_path):
    leases = spread(on_anvil, [f"c/{i}" for i in range(6)])
    index = AuditIndex(tmp_path / "audit.sqlite")
    pages = []

    def crash_on_the_fourth(last):
        pages.append(last)
        if len(pages) == 4:
            raise KeyboardInterrupt("the process dies here")

    with pytest.raises(KeyboardInterrupt):
        index.sync(on_anvil, max_blocks=CAP, _before_commit=crash_on_the_fourth)
    assert index.status().synced_block == pages[2], "three pages committed, the fourth rolled back"
    index.close()
    resumed = AuditIndex(tmp_path / "audit.sqlite")
    resumed.sync(on_anvil, max_blocks=CAP)
    assert rows(resumed) == rows(fresh(on_anvil, tmp_path)), "no duplicate, no gap"
    assert [lease.token for lease in resumed.leases_of(on_anvil.chain.accounts[1])][-6:] == [
        lease.token for lease in leases
    ]


def test_a_sync_killed_mid_run_resumes_with_no_duplicate_and_no_gap(anvil_node, on_anvil, tmp_path):
    spread(on_anvil, [f"k/{i}" for i in range(8)])
    path = tmp_path / "audit.sqlite"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    with RpcProxy(anvil_node.url) as proxy:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "chainfence",
                "audit",
                "sync",
                "--index",
                str(path),
                "--max-blocks",
                str(CAP),
                "--rpc-url",
                proxy.url,
                "--registry",
                on_anvil.address,
                "--json",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            wait_until(lambda: proxy.completed_count("eth_getLogs") >= 4, "the child read four pages")
            proxy.stall()
            proxy.wait_held(1)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
            child.communicate()
    assert child.returncode == -signal.SIGKILL
    spans = [int(p[0]["toBlock"], 16) - int(p[0]["fromBlock"], 16) + 1 for p, _ in proxy.sent("eth_getLogs")]
    assert spans and max(spans) <= CAP, "--max-blocks bounds every request"
    with sqlite3.connect(path) as conn:
        synced = int(conn.execute("SELECT value FROM meta WHERE key = 'synced_block'").fetchone()[0])
    assert synced < on_anvil.chain.block_number(), "killed before the end"
    resumed = AuditIndex(path)
    resumed.sync(on_anvil, max_blocks=CAP)
    assert rows(resumed) == rows(fresh(on_anvil, tmp_path))
    resumed.verify(on_anvil)


def test_a_provider_that_caps_ranges_is_paged_through(anvil_node, on_anvil, tmp_path):
    leases = spread(on_anvil, ["p/1", "p/2", "p/3"], gap=3 * CAP)
    with RpcProxy(anvil_node.url) as proxy:
        proxy.max_log_range = CAP
        chain = Chain.connect(proxy.url, private_keys=dev_keys(2), timeouts=Timeouts(poll=0.01))
        registry = Registry.at(chain, on_anvil.address)
        index = AuditIndex(tmp_path / "audit.sqlite")
        index.sync(registry)  # asks 5,000 blocks, is refused, halves down to CAP
        asked = [params[0] for params, _ in proxy.sent("eth_getLogs")]
        spans = [int(p["toBlock"], 16) - int(p["fromBlock"], 16) + 1 for p in asked]
        assert spans[0] > CAP and len([s for s in spans if s <= CAP]) > 3, "refused, then paged within the cap"
        assert [r.resource for r in index.resources("p/")] == ["p/1", "p/2", "p/3"]
        assert [index.history(f"p/{i}")[0].token for i in (1, 2, 3)] == [lease.token for lease in leases]
        index.verify(registry)
    assert rows(index) == rows(fresh(on_anvil, tmp_path))


def test_hostile_names_are_stored_as_bytes_and_printed_escaped(anvil_node, on_anvil, tmp_path):
    bob = on_anvil.connect(on_anvil.chain.accounts[2])
    for name in HOSTILE:
        publish(on_anvil, bob.sender, name)
    on_anvil.connect(on_anvil.chain.accounts[1]).acquire("reports/daily", ttl=60)
    path = tmp_path / "audit.sqlite"
    index = AuditIndex(path)
    index.sync(on_anvil)
    shown = [r.resource_display for r in index.resources()]
    assert len(set(shown)) == len(HOSTILE) + 1
    assert all(ch.isprintable() for text in shown for ch in text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    for args in (["resources"], ["current"], ["holder", bob.sender]):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "chainfence",
                "audit",
                *args,
                "--index",
                str(path),
                "--rpc-url",
                anvil_node.url,
                "--registry",
                on_anvil.address,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "\x1b" not in done.stdout and "\u202e" not in done.stdout and "\x00" not in done.stdout
        assert all(ch.isprintable() or ch == "\n" for ch in done.stdout)
    as_json = subprocess.run(
        [
            sys.executable,
            "-m",
            "chainfence",
            "audit",
            "resources",
            "--json",
            "--index",
            str(path),
            "--rpc-url",
            anvil_node.url,
            "--registry",
            on_anvil.address,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    names = {entry["resource_display"] for entry in json.loads(as_json.stdout)["result"]}
    assert names == set(shown)


def test_two_syncs_of_one_file_never_count_an_event_twice(on_anvil, tmp_path):
    """B syncs the whole file between two of A's pages: A's next page finds the cursor moved and resumes
    after it, instead of applying renewals B already counted."""
    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    lease = alice.acquire("twice/a", ttl=600)
    for marker in range(1, 4):
        chain.mine(CAP)
        lease.renew(progress=marker)
    path = tmp_path / "audit.sqlite"
    a, b = AuditIndex(path), AuditIndex(path)
    interleaved = []

    def b_runs_after_a_first_page(done, first, last):
        if not interleaved:
            interleaved.append(b.sync(on_anvil, max_blocks=CAP))

    a.sync(on_anvil, max_blocks=CAP, progress=b_runs_after_a_first_page)
    assert interleaved and interleaved[0].pages > 1
    assert a.lease(lease.token).renewals == 3 and a.lease(lease.token).markers == 3
    assert rows(a) == rows(fresh(on_anvil, tmp_path))


def test_a_chain_that_got_shorter_is_rewound_too(on_anvil, tmp_path):
    """The node went back below the cursor (a rollback, a reorg to a shorter branch): nothing indexed past
    the fork survives."""
    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    kept = alice.acquire("short/a", ttl=600)
    fork = chain.snapshot()
    gone = alice.acquire("short/b", ttl=600)
    chain.mine(5)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(on_anvil)
    chain.revert(fork)
    assert chain.block_number() < index.status().synced_block
    result = index.sync(on_anvil)
    assert result.rewound_to == kept.block_number
    assert index.lease(gone.token) is None and index.lease(kept.token) is not None
    index.verify(on_anvil)


def test_verify_rebuilds_the_leases_from_the_chain_and_finds_a_tampered_one(on_anvil, tmp_path):
    from chainfence.errors import AuditIndexDiffers

    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire("tamper/a", ttl=600)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(on_anvil)
    index.verify(on_anvil)
    index._conn.execute("UPDATE leases SET ended = 'released' WHERE token = ?", (lease.token,))
    with pytest.raises(AuditIndexDiffers) as differs:
        index.verify(on_anvil)
    assert f"token {lease.token}" in str(differs.value)


def test_a_capped_provider_and_a_reorg_together(anvil_node, on_anvil, tmp_path):
    """Through a proxy that refuses more than CAP blocks, a reorg of a few blocks between syncs: the index ends
    as a fresh uncapped sync of the surviving branch, and verify agrees."""
    chain = on_anvil.chain
    alice, bob = on_anvil.connect(chain.accounts[1]), on_anvil.connect(chain.accounts[2])
    spread(on_anvil, ["both/1", "both/2"], gap=2 * CAP)
    fork = chain.snapshot()
    lost = alice.acquire("both/3", ttl=600)
    lost.renew(progress=7)
    chain.mine(CAP)
    with RpcProxy(anvil_node.url) as proxy:
        proxy.max_log_range = CAP
        capped = Registry.at(
            Chain.connect(proxy.url, private_keys=dev_keys(1), timeouts=Timeouts(poll=0.01)), on_anvil.address
        )
        index = AuditIndex(tmp_path / "audit.sqlite")
        index.sync(capped)
        assert index.lease(lost.token).renewals == 1
        chain.revert(fork)
        won = bob.acquire("both/3", ttl=600)
        chain.mine(CAP + 2)
        result = index.sync(capped)
        assert result.rewound_to is not None
        assert (index.lease(won.token).holder, index.lease(won.token).renewals) == (bob.sender, 0)
        index.verify(capped)
    assert rows(index) == rows(fresh(on_anvil, tmp_path))
