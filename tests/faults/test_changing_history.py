"""A provider that keeps changing its history under the audit index's sync (issue 25).

The sync rewinds where a block it holds is no longer the provider's (a reorganisation), to the newest
block it holds that still is, and indexes again from there. A chain reorganises a few blocks at a time
and settles; a provider that answers another hash for a block each time it is asked (a liar, or a load
balancer over nodes on different forks) never does: the sync rewound and re-read the same blocks 1,000
times, then raised a bare ``ChainError``, the index left wherever the last rewind put it. Now the sync
rewinds at most ``audit.index.MAX_REWINDS`` times a call and then raises ``HistoryUnsettled`` (a
``ChainError``; the CLI exits 5), with how many rewinds, the block found replaced last, the fork point
and where the index stands; and from its first rewind on, a sync writes in one transaction, committed
when it ends: the error leaves the index exactly as it was before the first rewind. Control: the
rewinds committed as they come leave the index rewound below where it stood.

Told by a lying provider: a loopback proxy in front of anvil, and in process on the embedded chain.
"""

from __future__ import annotations

import hashlib

import pytest

from chainfence.audit import index as index_module
from chainfence.audit.index import AuditIndex
from chainfence.errors import ChainError, HistoryUnsettled
from tests.faults.test_audit_integrity import cli
from tests.support.follower_proxies import through


def _number(value) -> int:
    return value if isinstance(value, int) else int(value, 16)


def changing(liar, first: int) -> None:
    """Every block from ``first`` on is answered with a hash it never had before: each answer another
    history (its other fields the node's)."""
    told = [0]

    def forged(block):
        if not isinstance(block, dict) or _number(block["number"]) < first:
            return block
        told[0] += 1
        real = block["hash"] if isinstance(block["hash"], str) else "0x" + bytes(block["hash"]).hex()
        fake = hashlib.sha256(f"{real}/{told[0]}".encode()).hexdigest()
        return dict(block, hash="0x" + fake if isinstance(block["hash"], str) else bytes.fromhex(fake))

    liar.on("eth_getBlockByNumber", lambda params, forward: forged(forward(params)))


def rows(index: AuditIndex) -> dict[str, list[tuple]]:
    conn = index._conn
    return {
        "meta": conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall(),
        "blocks": conn.execute("SELECT number, hash, timestamp FROM blocks ORDER BY number").fetchall(),
        "events": conn.execute("SELECT * FROM events ORDER BY block, log_index").fetchall(),
        "leases": conn.execute("SELECT * FROM leases ORDER BY token").fetchall(),
        "resources": conn.execute("SELECT * FROM resources ORDER BY resource_id").fetchall(),
    }


def synced_past_its_events(registry, lied_to, path) -> AuditIndex:
    """An index synced through the (still honest) provider to an empty block after two acquisitions."""
    agent = registry.connect(registry.chain.accounts[1])
    agent.acquire("history/a", ttl=600)
    agent.acquire("history/b", ttl=600)
    registry.chain.mine(2)
    index = AuditIndex(path)
    index.sync(lied_to)
    registry.chain.mine(6)
    return index


def test_a_provider_that_keeps_changing_its_history_is_refused_typed_and_the_index_kept(lied, tmp_path):
    registry, liar, lied_to = lied
    index = synced_past_its_events(registry, lied_to, tmp_path / "audit.sqlite")
    synced = index.status().synced_block
    before = rows(index)
    changing(liar, synced)  # the block the index stands at, and every one after it
    asked = liar.count("eth_getBlockByNumber")
    with pytest.raises(HistoryUnsettled) as unsettled:
        index.sync(lied_to, max_blocks=2)
    error = unsettled.value
    assert isinstance(error, ChainError) and error.exit_code == 5
    assert error.rewinds == index_module.MAX_REWINDS and error.block >= synced and error.fork_block < synced, repr(
        error
    )
    assert error.synced == synced and "keeps changing its history" in str(error), str(error)
    assert liar.count("eth_getBlockByNumber") - asked < 40 * index_module.MAX_REWINDS, "bounded"
    assert rows(index) == before, "the index is as it was"
    liar.honest()
    result = index.sync(lied_to)
    assert result.rewound_to is None and result.to_block == registry.chain.block_number()
    index.verify(registry)


def test_control_rewinds_committed_as_they_come_leave_the_index_rewound(lied, tmp_path, monkeypatch):
    """The sync before: each rewind committed at once (no transaction over them), so the loop's last rewind
    is what the error leaves: the index no longer reaches the block it stood at."""
    registry, liar, lied_to = lied
    monkeypatch.setattr(AuditIndex, "_tentative", lambda self: _Committed())
    index = synced_past_its_events(registry, lied_to, tmp_path / "audit.sqlite")
    synced = index.status().synced_block
    before = rows(index)
    changing(liar, synced)
    with pytest.raises(HistoryUnsettled):
        index.sync(lied_to, max_blocks=2)
    assert rows(index) != before
    assert index.status().synced_block != synced or rows(index)["blocks"] != before["blocks"]


class _Committed:
    """What a sync did before: nothing held back (each page and each rewind its own transaction)."""

    open = False

    def begin(self) -> None:
        pass

    def end(self, keep: bool) -> None:
        pass


def test_the_cli_exits_5_and_says_what_happened(on_anvil, liar, tmp_path):
    path = tmp_path / "audit.sqlite"
    index = synced_past_its_events(on_anvil, through(on_anvil, liar.url), path)
    synced = index.status().synced_block
    index.close()
    changing(liar, synced)
    done, document = cli(liar.url, on_anvil, path, "sync", "--max-blocks", "2")
    assert done.returncode == 5, done.stderr
    assert document["error"] == "HistoryUnsettled" and document["synced"] == synced, document
    assert document["rewinds"] == index_module.MAX_REWINDS and "keeps changing its history" in done.stderr
    assert AuditIndex(path).status().synced_block == synced
