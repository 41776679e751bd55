"""The audit index against providers that lag, renumber or lie (issue #20): loopback proxies in front of anvil.

- A log backend that lags the head (hosted providers' log indexes do): the sync stops before the first
  block whose logs the header's ``logsBloom`` says are missing (settled by the block's receipts against its
  ``receiptsRoot``), and the gap closes on a later sync. Control: a sync that trusts the answer moves its
  cursor past the blocks, and the tokens are missing for good.
- A node that numbers ``logIndex`` per transaction: no event is dropped as a duplicate. Control: the
  answer's (block, logIndex) pairs repeat (the key schema 2 used).
- A forged holder: a log the bloom rules out is not indexed. Control: trusting the answer indexes it.
- A forged expiry (log data, which no bloom covers): a plain ``verify`` through the same provider passes
  (the control it fools); ``verify(proofs=...)`` against headers k of 3 providers vouch for names it: the
  block's receipts and the resource's proven lease slot say otherwise.
- Confirmations: every read is as of the newest block with the chain's confirmations on top (the SDK's
  ``history(index=)``, the CLI's queries and plain ``audit sync`` on a chain that is not a dev chain).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from chainfence import Chain, Registry, audit
from chainfence._node import completeness as _completeness
from chainfence.audit.index import AuditIndex
from chainfence.errors import AuditIndexDiffers
from chainfence.proofs import ProvenReader, QuorumHeaders
from tests.support.follower_proxies import in_one_block
from tests.support.lying_proxy import LyingProxy


def through(registry: Registry, url: str, **options) -> Registry:
    """The same registry, read through another endpoint."""
    return Registry.at(Chain.connect(url, **options), registry.address)


def rows(index: AuditIndex) -> list[tuple]:
    return index._conn.execute(
        "SELECT block, tx_index, log_index, kind, token, holder, expires_at FROM events ORDER BY block, tx_index, log_index"
    ).fetchall()


def fresh(registry: Registry, tmp_path, name: str = "fresh.sqlite") -> AuditIndex:
    index = AuditIndex(tmp_path / name)
    index.sync(registry)
    return index


def _number(value) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.startswith("0x"):
        return int(value, 16)
    return None


def lagging(liar: LyingProxy, behind: int) -> None:
    """eth_getLogs answered from a log index ``behind`` blocks behind the head: silently, as hosted ones do."""

    def logs(params, forward):
        query = dict(params[0])
        newest = int(liar.node("eth_blockNumber", []), 16) - behind
        first, last = _number(query.get("fromBlock")), _number(query.get("toBlock"))
        if first is not None and first > newest:
            return []
        query["toBlock"] = hex(newest if last is None else min(last, newest))
        return forward([query])

    liar.on("eth_getLogs", logs)


def test_a_log_backend_that_lags_delays_the_index_and_the_gap_closes_by_itself(on_anvil, liar, tmp_path):
    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    early = [alice.acquire(f"lag/early-{i}", ttl=600) for i in range(2)]
    late = [alice.acquire(f"lag/late-{i}", ttl=600) for i in range(3)]  # the last three blocks
    lagging(liar, behind=3)
    index = AuditIndex(tmp_path / "audit.sqlite")
    result = index.sync(through(on_anvil, liar.url))
    assert result.held_at == late[0].block_number
    assert "its receipts hold 2 registry events, the answer 0" in result.held_because
    assert index.status().synced_block == late[0].block_number - 1, "the index stops before the first gap"
    assert [index.lease(lease.token) is not None for lease in early + late] == [True, True, False, False, False]
    chain.mine(3)  # the log backend reaches them (it stays three blocks behind the head)
    result = index.sync(through(on_anvil, liar.url))
    assert result.held_at is None
    assert [index.lease(lease.token).holder for lease in late] == [alice.sender] * 3, "the gap closed by itself"
    assert rows(index) == rows(fresh(on_anvil, tmp_path))
    index.verify(on_anvil)


def test_control_a_sync_that_trusts_the_answer_keeps_the_hole_forever(on_anvil, liar, tmp_path, monkeypatch):
    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    late = [alice.acquire(f"lag/late-{i}", ttl=600) for i in range(3)]
    lagging(liar, behind=3)
    monkeypatch.setattr(_completeness, "doubt", lambda *args, **query: None)  # the sync before issue 20
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(through(on_anvil, liar.url))
    assert index.status().synced_block == chain.block_number(), "the cursor moved past blocks it has no logs of"
    chain.mine(3)
    index.sync(through(on_anvil, liar.url))
    liar.honest()
    index.sync(on_anvil)
    assert [index.lease(lease.token) for lease in late] == [None, None, None], "tokens missing for good"
    with pytest.raises(AuditIndexDiffers):
        index.verify(on_anvil)


def renumbering(liar: LyingProxy) -> None:
    """eth_getLogs with logIndex counted per transaction (against the spec; some nodes do)."""

    def logs(params, forward):
        answer = forward(params)
        seen: dict[str, int] = {}
        for log in answer:
            position = seen.get(log["transactionHash"], 0)
            seen[log["transactionHash"]] = position + 1
            log["logIndex"] = hex(position)
        return answer

    liar.on("eth_getLogs", logs)


def test_a_node_that_numbers_log_indexes_per_transaction_loses_no_event(on_anvil, liar, tmp_path):
    block = in_one_block(on_anvil, ["pertx/a", "pertx/b"])
    renumbering(liar)
    reader = through(on_anvil, liar.url)
    answered = _logs(reader, block)
    assert len({(e.block_number, e.log_index) for e in answered}) < len(answered), (
        "control: the answer repeats (block, logIndex), the key schema 2 dropped duplicates by"
    )
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(reader)
    kept = [row for row in rows(index) if row[0] == block]
    assert [(row[3], row[1]) for row in kept] == [
        ("LeaseAcquired", 0),
        ("LeaseAcquired", 1),
    ], "both transactions' acquisitions, in transaction order"
    assert {lease.resource for lease in index.resources("pertx/")} == {"pertx/a", "pertx/b"}
    assert len(index.history("pertx/a")) == len(index.history("pertx/b")) == 1
    index.verify(reader)


def _logs(registry: Registry, block: int):
    from chainfence._node import events as _events

    return _events.fetch_all(registry.chain, registry.address, from_block=block, to_block=block)


def forging(liar: LyingProxy, token: int, *, holder: str | None = None, extra_expiry: int = 0) -> None:
    """eth_getLogs rewrites token ``token``'s LeaseAcquired: another holder (a topic), or a later expiry (data)."""
    token_topic = "0x" + token.to_bytes(32, "big").hex()

    def logs(params, forward):
        answer = forward(params)
        for log in answer:
            if len(log["topics"]) == 4 and log["topics"][2] == token_topic and log["data"][2:66]:
                if holder is not None:
                    log["topics"][3] = "0x" + bytes.fromhex(holder[2:]).rjust(32, b"\0").hex()
                if extra_expiry and len(log["data"]) == 2 + 3 * 64:
                    expires = int(log["data"][2:66], 16) + extra_expiry
                    log["data"] = "0x" + expires.to_bytes(32, "big").hex() + log["data"][66:]
        return answer

    liar.on("eth_getLogs", logs)


def test_a_forged_holder_is_not_indexed(on_anvil, liar, tmp_path):
    chain = on_anvil.chain
    alice, mallory = on_anvil.connect(chain.accounts[1]), chain.accounts[5]
    lease = alice.acquire("forged/holder", ttl=600)
    forging(liar, lease.token, holder=mallory)
    index = AuditIndex(tmp_path / "audit.sqlite")
    result = index.sync(through(on_anvil, liar.url))
    assert result.held_at == lease.block_number and "bloom rules out" in result.held_because
    assert index.lease(lease.token) is None, "nothing of that block is indexed"


def test_control_trusting_the_answer_indexes_the_forged_holder(on_anvil, liar, tmp_path, monkeypatch):
    chain = on_anvil.chain
    alice, mallory = on_anvil.connect(chain.accounts[1]), chain.accounts[5]
    lease = alice.acquire("forged/holder", ttl=600)
    forging(liar, lease.token, holder=mallory)
    monkeypatch.setattr(_completeness, "doubt", lambda *args, **query: None)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(through(on_anvil, liar.url))
    assert index.lease(lease.token).holder == mallory


@pytest.fixture
def quorum(anvil_node):
    """Three header providers, all honest (loopback proxies in front of the node), k = 2."""
    with LyingProxy(anvil_node.url) as b, LyingProxy(anvil_node.url) as c:
        headers = QuorumHeaders([anvil_node.url, b.url, c.url], k=2)
        yield headers
        headers.close()


def test_verify_with_proofs_catches_what_a_lying_log_provider_fools_plain_verify_with(on_anvil, liar, quorum, tmp_path):
    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    lease = alice.acquire("forged/expiry", ttl=600)
    forging(liar, lease.token, extra_expiry=86_400)  # data: no bloom covers it
    lied_to = through(on_anvil, liar.url)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(lied_to)
    assert index.lease(lease.token).expires_at == lease.expires_at + 86_400
    index.verify(lied_to)  # control: the same provider tells verify the same story
    reader = ProvenReader(on_anvil.address, headers=quorum, provider=liar.url)
    with pytest.raises(AuditIndexDiffers) as caught:
        index.verify(lied_to, proofs=reader)
    differences = caught.value.differences
    assert any(f"block {lease.block_number}: its receipts" in d for d in differences), differences
    assert any(
        d.startswith("forged/expiry: token")
        and f"expires at {lease.expires_at + 86_400}" in d
        and str(lease.expires_at) in d
        for d in differences
    ), differences


def test_verify_with_proofs_passes_an_honest_index(on_anvil, quorum, tmp_path):
    chain = on_anvil.chain
    alice, bob = on_anvil.connect(chain.accounts[1]), on_anvil.connect(chain.accounts[2])
    first = alice.acquire("proven/a", ttl=60)
    first.release()
    bob.acquire("proven/a", ttl=600).renew(600)
    alice.acquire("proven/b", ttl=600)
    index = fresh(on_anvil, tmp_path)
    reader = ProvenReader(on_anvil.address, headers=quorum, provider=on_anvil.chain)
    assert index.verify(on_anvil, proofs=reader) == 5  # 3 acquisitions, a release, a renewal


def test_verify_with_proofs_names_a_tampered_holder(on_anvil, quorum, tmp_path):
    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    lease = alice.acquire("proven/tampered", ttl=600)
    index = fresh(on_anvil, tmp_path)
    with index._write() as conn:
        conn.execute("UPDATE leases SET holder = ? WHERE token = ?", (chain.accounts[5], lease.token))
    reader = ProvenReader(on_anvil.address, headers=quorum, provider=on_anvil.chain)
    with pytest.raises(AuditIndexDiffers) as caught:
        index.verify(on_anvil, proofs=reader)
    assert any(
        d.startswith("proven/tampered: the index's latest lease is token") and alice.sender in d
        for d in caught.value.differences
    ), caught.value.differences


# ---------------------------------------------------------------------------
# Confirmations
# ---------------------------------------------------------------------------


def test_history_from_an_index_answers_as_of_the_chains_confirmations(on_anvil, anvil_node, tmp_path):
    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    deep = alice.acquire("conf/deep", ttl=600)
    chain.mine(3)
    shallow = alice.acquire("conf/shallow", ttl=600)  # one block deep
    index = AuditIndex(tmp_path / "audit.sqlite")
    dev_view = {event.token for event in audit.history(on_anvil, index=index)}  # a dev chain: 0 confirmations
    assert {deep.token, shallow.token} <= dev_view, "control: read at the head"
    confirmed = through(on_anvil, anvil_node.url, confirmations=3)
    seen = {event.token for event in audit.history(confirmed, index=index)}
    assert deep.token in seen and shallow.token not in seen, "as of head - 3"
    assert index.status().synced_block == chain.block_number() - 3
    assert index.lease(shallow.token) is None, "the index answers nothing past the confirmed block"
    chain.mine(3)
    assert shallow.token in {event.token for event in audit.history(confirmed, index=index)}


def cli(anvil_node_url: str, registry: Registry, index, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "chainfence",
            "audit",
            *args,
            "--index",
            str(index),
            "--rpc-url",
            anvil_node_url,
            "--registry",
            registry.address,
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, (json.loads(done.stdout) if done.stdout.strip() else None)


def test_the_cli_answers_as_of_the_confirmations_asked(anvil_node, on_anvil, tmp_path):
    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    deep = alice.acquire("conf/cli", ttl=60)
    chain.advance_time(61)
    chain.mine(3)
    shallow = alice.acquire("conf/cli", ttl=600)
    index = tmp_path / "audit.sqlite"
    done, plain = cli(anvil_node.url, on_anvil, index, "history", "conf/cli")
    assert done.returncode == 0, done.stderr
    assert [row["token"] for row in plain["result"]] == [deep.token, shallow.token], "control: a dev chain, 0"
    done, confirmed = cli(anvil_node.url, on_anvil, index, "history", "conf/cli", "--confirmations", "3")
    assert done.returncode == 0, done.stderr
    assert [row["token"] for row in confirmed["result"]] == [deep.token], "as of head - 3"
    assert confirmed["status"]["synced_block"] == chain.block_number() - 3
    done, again = cli(anvil_node.url, on_anvil, index, "history", "conf/cli", "--confirmations", "3", "--no-sync")
    assert [row["token"] for row in again["result"]] == [deep.token]


def test_plain_audit_sync_on_a_chain_that_is_not_a_dev_chain_stops_three_blocks_short(
    anvil_node, on_anvil, liar, tmp_path
):
    liar.on("web3_clientVersion", lambda params, forward: "Geth/v1.14.11-stable/linux-amd64/go1.23.2")
    chain = on_anvil.chain
    on_anvil.connect(chain.accounts[1]).acquire("conf/geth", ttl=600)
    chain.mine(5)
    done, synced = cli(liar.url, on_anvil, tmp_path / "audit.sqlite", "sync")
    assert done.returncode == 0, done.stderr
    assert synced["status"]["synced_block"] == chain.block_number() - 3, "head less the chain's default 3"
    done, _ = cli(anvil_node.url, on_anvil, tmp_path / "dev.sqlite", "sync")
    assert AuditIndex(tmp_path / "dev.sqlite").status().synced_block == chain.block_number(), "control: anvil, 0"


def test_asyncio_history_from_an_index_answers_as_of_the_chains_confirmations(on_anvil, anvil_node, tmp_path):
    import asyncio

    from chainfence.aio import AsyncChain, AsyncRegistry

    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    deep = alice.acquire("conf/aio-deep", ttl=600)
    chain.mine(3)
    shallow = alice.acquire("conf/aio-shallow", ttl=600)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(on_anvil)  # at the head: holds the shallow lease

    async def read() -> set[int]:
        async with AsyncChain.over(Chain.connect(anvil_node.url, confirmations=3)) as achain:
            registry = await AsyncRegistry.at(achain, on_anvil.address)
            return {event.token for event in await audit.history(registry, index=index)}

    seen = asyncio.run(asyncio.wait_for(read(), 120))
    assert deep.token in seen and shallow.token not in seen, "as of head - 3, on asyncio too"
    assert index.lease(shallow.token) is None


def test_the_cli_verifies_with_proofs_against_a_header_quorum(anvil_node, on_anvil, liar, tmp_path):
    chain = on_anvil.chain
    lease = on_anvil.connect(chain.accounts[1]).acquire("cli/proven", ttl=600)
    index = tmp_path / "audit.sqlite"
    assert cli(anvil_node.url, on_anvil, index, "sync")[0].returncode == 0
    with LyingProxy(anvil_node.url) as b, LyingProxy(anvil_node.url) as c:
        headers = ["--headers", anvil_node.url, b.url, c.url, "--quorum", "2"]
        done, answer = cli(anvil_node.url, on_anvil, index, "verify", "--proofs", *headers)
        assert done.returncode == 0, done.stderr
        assert answer["proofs"] is True and answer["checked"] >= 1
        import sqlite3

        with sqlite3.connect(index) as conn:
            conn.execute("UPDATE leases SET expires_at = expires_at + 60 WHERE token = ?", (lease.token,))
        done, report = cli(anvil_node.url, on_anvil, index, "verify", "--proofs", *headers)
        assert done.returncode == 12 and "cli/proven: token" in done.stderr, done.stderr
    for args in (["verify", "--proofs"], ["verify", "--headers", anvil_node.url], ["verify", "--quorum", "2"]):
        done, _ = cli(anvil_node.url, on_anvil, index, *args)
        assert done.returncode == 2, (args, done.stderr)
    # One provider three times is one vote, not a quorum of three (verify --proven refused it already).
    done, _ = cli(anvil_node.url, on_anvil, index, "verify", "--proofs", "--headers", *[anvil_node.url] * 3)
    assert done.returncode == 2 and "one provider is one vote" in done.stderr, done.stderr
