"""A log withheld beside an answered log of the same kind, in the same block (issue #20): the completeness
check's receipts mode, attacked through a loopback proxy in front of anvil.

The story: alice holds ``jobs/report`` (token A) and a ``follow`` guard has followed her acquisition (its
mark is A). Her lease runs out; in ONE block, bob takes the resource over (token B) and carol acquires
``jobs/beside`` (two ``LeaseAcquired`` logs of the registry: in two transactions of the block, or in one
group-committed transaction, ``batchCalls`` as ``registry.batched()`` sends it). The provider
answers ``eth_getLogs`` without bob's acquisition and with carol's. The block's ``logsBloom`` holds the
registry's address and the ``LeaseAcquired`` topic for carol's log already: the bloom cannot count, the
block is not in doubt, and a bloom-only reader passes it for good.

- The receipts mode (``Guard(completeness="receipts")``, the default of a guard with ``headers=``) reads the
  receipts of every block whose bloom may hold a registry event the follower reads, checks them against
  the header's ``receiptsRoot`` and passes the block only when the answer holds exactly the registry events
  they hold: ``LogsIncomplete`` at the block, the follower is not up to date, checks at the mark go on-chain
  (alice refused, bob accepted), and once the provider answers the block the gap closes by itself. Control:
  the bloom-only follower through the same proxy passes the block, stays healthy and accepts alice's stale
  token, after the provider turned honest too.
- The audit index: ``sync(completeness="receipts")`` stops before the block (it never holds the hole) and
  converges to a fresh index once the provider is honest; ``verify`` agrees. Control: the bloom-only sync
  indexes the hole for good (``verify`` catches it).
- Receipts that do not hash to the header's ``receiptsRoot`` (the provider withholds bob's log from them
  too) are refused: ``LogsIncomplete`` naming the root. Control: without the root check, the forged
  receipts settle the block and alice's stale token is accepted.
- A provider without ``eth_getBlockReceipts``: the per-transaction receipts settle the block the same way.
- ``AsyncGuard`` runs the same follower; ``chainfence audit sync --completeness receipts`` the same sync.
"""

from __future__ import annotations

import asyncio

import pytest
from eth_account import Account

from chainfence import Chain, Guard, Registry, audit
from chainfence._node import completeness
from chainfence._node import events as _events
from chainfence._sdk.names import resource_id
from chainfence.aio import AsyncGuard
from chainfence.audit import watchdog
from chainfence.audit.index import AuditIndex
from chainfence.errors import AuditIndexDiffers, InvalidInput, LogsIncomplete, StaleToken
from chainfence.guard import Follow
from chainfence.proofs import QuorumHeaders
from tests.support.anvil import dev_keys
from tests.support.follower_proxies import follow_block, follow_guard, in_one_block, through
from tests.support.lying_proxy import LyingProxy, Refuse

RESOURCE = "jobs/report"
BESIDE = "jobs/beside"
ACQUIRED = _events.topic(_events.Kind.ACQUIRED)


def in_one_transaction(registry: Registry, names: list[str], account: int = 7) -> int:
    """One acquisition of each name in ONE transaction (group commit: ``batchCalls``, as
    ``registry.batched()`` sends them), from a key the SDK does not send from here; returns its block."""
    from chainfence.batching import encode_batch

    chain = registry.chain
    signer = Account.from_key(dev_keys(10)[account])
    tx = {
        "to": registry.address,
        "data": encode_batch([(0, name, b"\0" * 32, 0, 600) for name in names]),
        "gas": 1_000_000,
        "maxFeePerGas": 10**11,
        "maxPriorityFeePerGas": 10**9,
        "nonce": chain.rpc.nonce(signer.address, "pending"),
        "chainId": chain.chain_id,
        "value": 0,
    }
    raw = signer.sign_transaction(tx).raw_transaction
    # Sent and waited for in one request (anvil mines it on arrival): never left in the pool.
    receipt = chain.rpc.request("eth_sendRawTransactionSync", ["0x" + raw.hex()])
    assert int(receipt["status"], 16) == 1 and len(receipt["logs"]) == 3, "two acquisitions, one name"
    return int(receipt["blockNumber"], 16)


#: How the two acquisitions share a block: two transactions, or one group-committed transaction.
TOGETHER = {"two transactions": in_one_block, "one batched transaction": in_one_transaction}


@pytest.fixture(params=list(TOGETHER))
def together(request):
    return TOGETHER[request.param]


class SameKind:
    """alice's token A followed by the guard, then bob's takeover B and carol's acquisition of another
    resource in one block ``block`` (``together``: in two transactions, or in one batched transaction)."""

    def __init__(self, registry: Registry, together=in_one_block):
        self.registry = registry
        self.chain = registry.chain
        self.alice = registry.connect(self.chain.accounts[1])
        self.together = together

    def before(self, *guards: Guard) -> None:
        """The guards follow from here; alice acquires and they follow it (their mark is A)."""
        for guard in guards:
            guard.sync()
        self.stale = self.alice.acquire(RESOURCE, ttl=60).token
        for guard in guards:
            guard.sync()
            assert guard.mark(RESOURCE) == self.stale and guard.follow_status().healthy

    def take_over(self) -> None:
        self.chain.advance_time(61)
        self.block = self.together(self.registry, [RESOURCE, BESIDE])
        lease = self.registry.lease_of(RESOURCE)
        self.current, self.bob = lease.token, lease.holder
        self.beside = self.registry.lease_of(BESIDE).token
        assert self.current > self.stale and self.bob != self.alice.sender


def withholding_the_takeover(liar: LyingProxy, block: int) -> None:
    """eth_getLogs answered without block ``block``'s acquisition of RESOURCE (carol's, beside it, stays)."""
    topic = "0x" + resource_id(RESOURCE).hex()

    def logs(params, forward):
        answer = forward(params)
        kept = [
            log
            for log in answer
            if not (int(log["blockNumber"], 16) == block and log["topics"][0] == ACQUIRED and log["topics"][1] == topic)
        ]
        return kept

    liar.on("eth_getLogs", logs)


def forging_the_receipts(liar: LyingProxy, block: int) -> None:
    """eth_getBlockReceipts of block ``block`` answered without bob's acquisition log (matching the logs)."""
    topic = "0x" + resource_id(RESOURCE).hex()

    def receipts(params, forward):
        found = forward(params)
        if isinstance(found, list) and found and int(found[0]["blockNumber"], 16) == block:
            for receipt in found:
                receipt["logs"] = [log for log in receipt["logs"] if topic not in log["topics"]]
        return found

    liar.on("eth_getBlockReceipts", receipts)


def no_block_receipts(liar: LyingProxy) -> None:
    """A provider without eth_getBlockReceipts (as some nodes and hosted plans are)."""

    def refuse(params, forward):
        raise Refuse(-32601, "the method eth_getBlockReceipts does not exist/is not available")

    liar.on("eth_getBlockReceipts", refuse)


# ---------------------------------------------------------------------------
# A guard's follower
# ---------------------------------------------------------------------------


def test_the_receipts_mode_holds_the_follower_at_the_block_and_the_gap_closes_by_itself(
    on_anvil, liar, tmp_path, together
):
    story = SameKind(on_anvil, together)
    lied_to = through(on_anvil, liar.url)
    with follow_guard(lied_to, tmp_path / "receipts.sqlite", completeness="receipts") as guard:
        assert guard.completeness == "receipts"
        story.before(guard)
        story.take_over()
        withholding_the_takeover(liar, story.block)
        head = story.chain.block_number()
        for more in (0, 2):  # however long it withholds, and however far the head moves on
            story.chain.mine(more)
            with pytest.raises(LogsIncomplete) as held:
                guard.sync()
            assert (held.value.block, held.value.followed) == (story.block, story.block - 1)
            assert held.value.source == liar.url
            assert "its receipts hold 3 registry events, the answer 2" in held.value.reason, held.value.reason
            assert not guard.follow_status().healthy
            assert follow_block(guard.path) == story.block - 1, "carol's acquisition beside it is not applied either"
            assert guard.mark(BESIDE) == 0
            # Meanwhile the follower is behind: checks at the mark go on-chain.
            with pytest.raises(StaleToken):
                guard.check(RESOURCE, story.stale)
        assert head <= story.chain.block_number()
        assert guard.check(RESOURCE, story.current) == story.current
        liar.honest()
        assert guard.sync() == story.chain.block_number()
        assert guard.follow_status().healthy, "the gap closed by itself"
        assert (guard.mark(RESOURCE), guard.mark(BESIDE)) == (story.current, story.beside)
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)


def test_control_the_bloom_mode_passes_the_block_and_accepts_the_stale_holder_for_good(
    on_anvil, liar, tmp_path, together
):
    story = SameKind(on_anvil, together)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "bloom.sqlite") as guard:
        assert guard.completeness == "bloom", "the default without a header source"
        story.before(guard)
        story.take_over()
        withholding_the_takeover(liar, story.block)
        assert guard.sync() == story.chain.block_number(), "the cursor moved past bob's block"
        assert guard.follow_status().healthy and guard.mark(BESIDE) == story.beside
        assert liar.count("eth_getBlockReceipts") == 0, "the bloom did not put the block in doubt"
        assert guard.check(RESOURCE, story.stale) == story.stale, "alice's stale write is accepted"
        liar.honest()
        story.chain.mine(1)
        guard.sync()
        assert guard.mark(RESOURCE) == story.stale
        assert guard.check(RESOURCE, story.stale) == story.stale, "for good: the takeover is never read again"


def quorum(chain: Chain, *urls: str) -> QuorumHeaders:
    return QuorumHeaders(list(urls), clock=chain.now, max_age=60)


def test_a_follower_with_headers_reads_receipts_by_default_and_bloom_when_told(on_anvil, liar, honest_pair, tmp_path):
    """The "trust no provider" follower: a header source makes the receipts mode its default, so the log
    provider (one of the three header providers here) cannot withhold bob's takeover beside carol's
    acquisition. Control: the same follower told ``completeness="bloom"`` passes the block, stays healthy
    and accepts alice's stale token (vouching for every log's block and proving every page see nothing
    of a log that was never answered)."""
    h2, h3 = honest_pair
    story = SameKind(on_anvil)
    headers = quorum(story.chain, liar.url, h2.url, h3.url)
    with (
        follow_guard(through(on_anvil, liar.url), tmp_path / "proven.sqlite", headers=headers) as guard,
        follow_guard(
            through(on_anvil, liar.url), tmp_path / "bloom.sqlite", headers=headers, completeness="bloom"
        ) as fooled,
    ):
        assert (guard.completeness, fooled.completeness) == ("receipts", "bloom")
        story.before(guard, fooled)
        story.take_over()
        withholding_the_takeover(liar, story.block)
        fooled.sync()
        assert fooled.follow_status().healthy and follow_block(fooled.path) >= story.block
        assert fooled.check(RESOURCE, story.stale) == story.stale, "the control is fooled"
        with pytest.raises(LogsIncomplete) as held:
            guard.sync()
        assert held.value.block == story.block and "the answer 2" in held.value.reason
        assert follow_block(guard.path) == story.block - 1 and not guard.follow_status().healthy
        with pytest.raises(StaleToken):  # checks at the mark are proven meanwhile
            guard.check(RESOURCE, story.stale)
        liar.honest()
        guard.sync()
        assert guard.mark(RESOURCE) == story.current and guard.follow_status().healthy
    headers.close()


def test_receipts_that_do_not_hash_to_the_root_are_refused(on_anvil, liar, tmp_path):
    story = SameKind(on_anvil)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "receipts.sqlite", completeness="receipts") as guard:
        story.before(guard)
        story.take_over()
        withholding_the_takeover(liar, story.block)
        forging_the_receipts(liar, story.block)
        with pytest.raises(LogsIncomplete) as held:
            guard.sync()
        assert held.value.block == story.block
        assert "do not hash to the header's receiptsRoot" in held.value.reason, held.value.reason
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)
        liar.honest()
        guard.sync()
        assert guard.mark(RESOURCE) == story.current and guard.follow_status().healthy


def test_control_without_the_root_check_the_forged_receipts_settle_the_block(on_anvil, liar, tmp_path, monkeypatch):
    story = SameKind(on_anvil)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "receipts.sqlite", completeness="receipts") as guard:
        story.before(guard)
        story.take_over()
        root = bytes.fromhex(story.chain.rpc.blocks([story.block], raw=True)[0]["receiptsRoot"][2:])
        monkeypatch.setattr(completeness, "receipts_root", lambda receipts: root)  # believed, not hashed
        withholding_the_takeover(liar, story.block)
        forging_the_receipts(liar, story.block)
        guard.sync()
        assert guard.follow_status().healthy
        assert guard.check(RESOURCE, story.stale) == story.stale, "alice's stale write is accepted"


def test_a_provider_without_block_receipts_is_settled_by_each_transactions_receipt(on_anvil, liar, tmp_path):
    story = SameKind(on_anvil)
    no_block_receipts(liar)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "receipts.sqlite", completeness="receipts") as guard:
        story.before(guard)
        story.take_over()
        withholding_the_takeover(liar, story.block)
        asked = liar.count("eth_getTransactionReceipt")
        with pytest.raises(LogsIncomplete) as held:
            guard.sync()
        assert held.value.block == story.block and "the answer 2" in held.value.reason
        assert liar.count("eth_getTransactionReceipt") - asked == 2, "one per transaction of the block"
        liar.handlers.pop("eth_getLogs")  # the logs answered; still no eth_getBlockReceipts
        guard.sync()
        assert guard.mark(RESOURCE) == story.current and guard.follow_status().healthy


def test_a_provider_that_serves_no_receipts_at_all_keeps_the_receipts_follower_behind_and_checks_on_chain(
    on_anvil, liar, tmp_path
):
    """A provider with neither eth_getBlockReceipts nor any transaction's receipt cannot settle a block
    with followed events: the receipts-mode follower stands before the first such block with a
    LogsIncomplete that says so, is not healthy, and every check goes on-chain (alice's stale token
    refused, bob's accepted). Control: the bloom-mode follower over the same honest blocks needs no
    receipts and follows them (this is what the receipts mode costs where receipts are not served)."""
    story = SameKind(on_anvil)
    no_block_receipts(liar)
    liar.on("eth_getTransactionReceipt", lambda params, forward: None)
    lied_to = through(on_anvil, liar.url)
    with (
        follow_guard(lied_to, tmp_path / "receipts.sqlite", completeness="receipts") as guard,
        follow_guard(lied_to, tmp_path / "bloom.sqlite", completeness="bloom") as control,
    ):
        guard.sync()
        control.sync()
        story.stale = story.alice.acquire(RESOURCE, ttl=60).token
        with pytest.raises(LogsIncomplete, match="the node has no receipt for transaction") as held:
            guard.sync()
        assert held.value.block == story.chain.block_number() and held.value.source == liar.url
        assert not guard.follow_status().healthy
        story.take_over()
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)
        guard.check(RESOURCE, story.current)
        control.sync()
        assert control.follow_status().healthy and control.mark(RESOURCE) == story.current


def test_the_async_guard_reads_receipts_the_same_way(on_anvil, liar, tmp_path):
    story = SameKind(on_anvil)

    async def scenario():
        async with await AsyncGuard.open(
            through(on_anvil, liar.url),
            tmp_path / "follow.sqlite",
            mode=Follow(interval=3_600, completeness="receipts"),
        ) as guard:
            assert guard.completeness == "receipts"
            await guard.sync()
            story.stale = story.alice.acquire(RESOURCE, ttl=60).token
            await guard.sync()
            story.take_over()
            withholding_the_takeover(liar, story.block)
            with pytest.raises(LogsIncomplete) as held:
                await guard.sync()
            assert held.value.block == story.block
            with pytest.raises(StaleToken):
                await guard.check(RESOURCE, story.stale)
            liar.honest()
            await guard.sync()
            assert guard.follow_status().healthy and await guard.mark(RESOURCE) == story.current

    asyncio.run(scenario())


# ---------------------------------------------------------------------------
# The audit index
# ---------------------------------------------------------------------------


def rows(index: AuditIndex) -> list[tuple]:
    return index._conn.execute(
        "SELECT block, tx_index, log_index, kind, token, holder, expires_at FROM events ORDER BY block, tx_index, log_index"
    ).fetchall()


def test_the_receipts_mode_sync_never_holds_the_hole_and_converges(on_anvil, liar, tmp_path, together):
    story = SameKind(on_anvil, together)
    story.stale = story.alice.acquire(RESOURCE, ttl=60).token
    story.take_over()
    withholding_the_takeover(liar, story.block)
    index = AuditIndex(tmp_path / "audit.sqlite")
    result = index.sync(through(on_anvil, liar.url), completeness="receipts")
    assert result.held_at == story.block, result
    assert "its receipts hold 3 registry events, the answer 2" in result.held_because
    assert index.status().synced_block == story.block - 1, "the index stops before the block"
    assert index.lease(story.current) is None and index.lease(story.beside) is None, "nothing of that block"
    assert index.lease(story.stale) is not None
    liar.honest()
    result = index.sync(through(on_anvil, liar.url), completeness="receipts")
    assert result.held_at is None
    assert index.lease(story.current).holder == story.bob, "the gap closed by itself"
    fresh = AuditIndex(tmp_path / "fresh.sqlite")
    fresh.sync(on_anvil)
    assert rows(index) == rows(fresh)
    index.verify(on_anvil)


def test_control_the_bloom_mode_sync_indexes_the_hole_for_good(on_anvil, liar, tmp_path, together):
    story = SameKind(on_anvil, together)
    story.stale = story.alice.acquire(RESOURCE, ttl=60).token
    story.take_over()
    withholding_the_takeover(liar, story.block)
    index = AuditIndex(tmp_path / "audit.sqlite")
    result = index.sync(through(on_anvil, liar.url))
    assert result.held_at is None and index.status().synced_block == story.chain.block_number()
    assert index.lease(story.beside) is not None and index.lease(story.current) is None, "the hole"
    liar.honest()
    index.sync(through(on_anvil, liar.url))
    assert index.lease(story.current) is None, "for good"
    assert index.history(RESOURCE)[-1].token == story.stale, "the index names alice the latest holder"
    with pytest.raises(AuditIndexDiffers):
        index.verify(on_anvil)


def test_history_and_stuck_sync_the_index_in_its_own_mode(on_anvil, liar, tmp_path):
    """``audit.history(registry, index=)`` and ``watchdog.stuck(registry, index=)`` sync the index themselves: in the mode
    the index was made with (``AuditIndex(completeness="receipts")``), never a weaker one. Through a
    provider that withholds bob's takeover: history up to "latest" answers as of the block before (as of
    a confirmed block), history asked up to the held block is LogsIncomplete (never an answer that lacks
    it), and stuck's report says it read to the block before. Control: a bloom index holds the hole and
    history names alice, whose lease bob took over, the resource's latest holder."""
    story = SameKind(on_anvil)
    story.stale = story.alice.acquire(RESOURCE, ttl=60).token
    story.take_over()
    withholding_the_takeover(liar, story.block)
    lied_to = through(on_anvil, liar.url)
    index = AuditIndex(tmp_path / "receipts.sqlite", completeness="receipts")
    assert index.completeness == "receipts"
    latest = audit.history(lied_to, RESOURCE, index=index)
    assert [event.token for event in latest] == [story.stale], "as of the block before the held one"
    assert index.status().synced_block == story.block - 1
    with pytest.raises(LogsIncomplete) as held:
        audit.history(lied_to, RESOURCE, index=index, to_block=story.block)
    assert held.value.block == story.block and held.value.followed == story.block - 1
    assert "the answer 2" in held.value.reason and liar.url in str(held.value)
    assert watchdog.stuck(lied_to, index=index).to_block == story.block - 1, "the report says how far it read"
    liar.honest()
    assert [event.token for event in audit.history(lied_to, RESOURCE, index=index)][-1] == story.current

    control = AuditIndex(tmp_path / "bloom.sqlite")
    assert control.completeness == "bloom"
    withholding_the_takeover(liar, story.block)  # the same lie again
    fooled = audit.history(lied_to, RESOURCE, index=control, to_block=story.block)
    assert [event.token for event in fooled] == [story.stale], "the hole, answered as the whole history"
    assert watchdog.stuck(lied_to, index=control).to_block == story.chain.block_number()


def test_a_bad_completeness_mode_for_an_index_is_refused_before_the_file_is_made(tmp_path):
    for bad in ("Receipts", "", 1, True, ["bloom"]):
        with pytest.raises(InvalidInput, match="completeness must be one of"):
            AuditIndex(tmp_path / "audit.sqlite", completeness=bad)
        assert not (tmp_path / "audit.sqlite").exists()


def forging_an_expiry(liar: LyingProxy, token: int, extra: int) -> None:
    """eth_getLogs rewrites token ``token``'s LeaseAcquired expiry (log data: no bloom covers it)."""
    token_topic = "0x" + token.to_bytes(32, "big").hex()

    def logs(params, forward):
        answer = forward(params)
        for log in answer:
            if log["topics"][0] == ACQUIRED and log["topics"][2] == token_topic:
                expires = int(log["data"][2:66], 16) + extra
                log["data"] = "0x" + expires.to_bytes(32, "big").hex() + log["data"][66:]
        return answer

    liar.on("eth_getLogs", logs)


def test_the_receipts_mode_sync_refuses_a_rewritten_expiry_the_bloom_mode_indexes(on_anvil, liar, tmp_path):
    """Log data (an expiry) is covered by no bloom: the receipts mode compares what each log says with
    the receipts; the bloom mode (the control) indexes the forged expiry."""
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire("forged/expiry", ttl=600)
    forging_an_expiry(liar, lease.token, 86_400)
    lied_to = through(on_anvil, liar.url)
    checked = AuditIndex(tmp_path / "receipts.sqlite")
    result = checked.sync(lied_to, completeness="receipts")
    assert result.held_at == lease.block_number and "not the ones its receipts hold" in result.held_because
    assert checked.lease(lease.token) is None
    control = AuditIndex(tmp_path / "bloom.sqlite")
    control.sync(lied_to)
    assert control.lease(lease.token).expires_at == lease.expires_at + 86_400


# ---------------------------------------------------------------------------
# The choice, given badly
# ---------------------------------------------------------------------------


def test_a_bad_completeness_mode_is_a_typed_error_and_changes_nothing(on_anvil, tmp_path):
    for bad in ("Receipts", "", 1, True, ["bloom"]):
        with pytest.raises(InvalidInput, match="completeness must be one of"):
            Guard(on_anvil, tmp_path / "g.sqlite", mode=Follow(completeness=bad))
        assert not (tmp_path / "g.sqlite").exists()
        index = AuditIndex(tmp_path / "audit.sqlite")
        with pytest.raises(InvalidInput, match="completeness must be one of"):
            index.sync(on_anvil, completeness=bad)
        assert index.status().registry is None and index.status().synced_block is None, "not even bound"
        index.close()

    async def opening():
        with pytest.raises(InvalidInput, match="completeness must be one of"):
            await AsyncGuard.open(on_anvil, tmp_path / "a.sqlite", mode=Follow(completeness="all"))

    asyncio.run(opening())
