"""What a provider controls outside the tries (issue #25): a log's place and block, and its receipt's hash.

A block's ``receiptsRoot`` commits to each receipt's logs (their address, topics and data) and to the
receipts' order; it does not commit to a log's ``logIndex``, its receipt's ``transactionHash``, nor to
the ``blockNumber`` and ``blockHash`` an ``eth_getLogs`` answer gives each log. Lies told there, each
through a lying provider (a loopback proxy in front of anvil, and in process on the embedded chain):

- **A takeover withheld, its receipt blurred.** alice holds ``jobs/report`` (token A), a ``follow`` guard
  has followed her; bob takes the resource over (token B). The provider answers ``eth_getLogs`` without
  bob's acquisition and serves the block's receipts with that log's ``logIndex`` (or its receipt's
  ``transactionHash``) unreadable: the root still matches. Read naively, a registry log that does not
  decode is skipped, so the receipts "hold" no takeover either and the block settles: the mark stays A
  and alice's stale token is accepted for good (the control). Now each log's place is derived from the
  receipts' order, its block from the header, and a registry event that does not read refuses the
  block: ``LogsIncomplete`` at the block, checks on-chain meanwhile, and the gap closes once the
  provider answers. The same for a follower with a 3-provider header quorum (receipts mode, its
  default), for the audit index's sync in both modes, and for ``audit verify --proofs``' receipts check
  where the hidden event sits beside an indexed one.
- **A log of a block outside the page asked.** An invented ``LeaseAcquired`` (token 999, mallory's)
  answered for the block before the page, with that block's real hash: no block of the page checks it,
  so read naively it is applied (the mark becomes 999, the real holder refused, 999 accepted) and
  indexed. Now the page is refused whole (``LogsIncomplete``): nothing of it is applied or indexed.
- **The previous answer's last log repeated.** The audit sync took the repeat for a reorganisation:
  a rewind that undoes nothing (the block hashes match), the same page asked again, 1,000 times, then a
  bare ``ChainError``. Now the sync raises ``LogsIncomplete`` at once, rewinds nothing, and a later sync
  through an honest provider converges.
- **Two logs at one place.** Two events of one transaction answered with one ``logIndex``: the index,
  keyed by (block, transaction, log index), would keep one. Refused too.
- **The readers that poll one resource** (a waiter, an election's observer) told a log that does not read:
  they treat the refused answer as a block held back (the waiter reads the lease again, the observer
  waits and asks again), never raise it at their caller.
- **A resource the index lacks whole.** ``verify(proofs=...)`` compares the registry's latest token (its
  counter, proven at the synced block) with the index's highest: an index that lacks a resource
  acquired in a block it holds no event of differs (exit 12 in the CLI). Control: without that
  comparison, every check passes.
"""

from __future__ import annotations

import pytest

from chainfence import Chain, Registry
from chainfence._node import completeness
from chainfence._node import events as _events
from chainfence._sdk.names import resource_id
from chainfence.audit.index import AuditIndex
from chainfence.errors import AuditIndexDiffers, LogsIncomplete, StaleToken, UnknownToken
from chainfence.proofs import ProvenReader, QuorumHeaders
from tests.faults.test_audit_integrity import cli
from tests.faults.test_follower_logs import Handover, Takeover, forging_the_bloom, observed_through, waiter_through
from tests.faults.test_receipts_mode import in_one_transaction
from tests.support.follower_proxies import follow_block, follow_guard, in_one_block, through
from tests.support.lying_proxy import LyingProxy

RESOURCE = "jobs/report"
ACQUIRED = _events.topic(_events.Kind.ACQUIRED)
FIELDS = ("logIndex", "transactionHash")
#: Why the block is refused: a log's place is derived from the receipts' order (its unreadable logIndex is
#: never read, so the receipts hold the takeover the answer lacks); a receipt's hash must read.
REFUSED = {"logIndex": "its receipts hold 1 registry events, the answer 0", "transactionHash": "does not read"}


def _number(value) -> int:
    """A block number as a node sends it (hex) or as the embedded chain does (an int)."""
    return value if isinstance(value, int) else int(value, 16)


def quorum(chain: Chain, *urls: str) -> QuorumHeaders:
    return QuorumHeaders(list(urls), clock=chain.now, max_age=60)


# ---------------------------------------------------------------------------
# The lies
# ---------------------------------------------------------------------------


def hiding(liar, block: int, name: str, field: str) -> None:
    """eth_getLogs answered without block ``block``'s logs of ``name`` (its acquisition, and its name if
    it is new), and the block's receipts served with the acquisition's ``logIndex`` (``field``), or its
    receipt's ``transactionHash``, unreadable: neither is in the receipts trie, so the receipts still
    hash to the header's receiptsRoot."""
    topic = "0x" + resource_id(name).hex()

    def hidden(log) -> bool:
        return _number(log["blockNumber"]) == block and log["topics"][1:2] == [topic]

    def blurred(receipt):
        if isinstance(receipt, dict) and _number(receipt["blockNumber"]) == block:
            for log in receipt["logs"]:
                if hidden(log) and log["topics"][0] == ACQUIRED:
                    if field == "logIndex":
                        log["logIndex"] = "0xzz"
                    else:
                        receipt["transactionHash"] = "0xzz"
        return receipt

    def receipts(params, forward):
        found = forward(params)
        return [blurred(receipt) for receipt in found] if isinstance(found, list) else found

    liar.on("eth_getLogs", lambda params, forward: [log for log in forward(params) if not hidden(log)])
    liar.on("eth_getBlockReceipts", receipts)
    liar.on("eth_getTransactionReceipt", lambda params, forward: blurred(forward(params)))


def naive_registry_logs(receipts, header, address, *, kinds=None, **query):
    """The receipts' registry events as they were read before: each log's own logIndex and its receipt's
    transactionHash, and a log that does not decode skipped (the control's reading)."""
    found = []
    for position, receipt in enumerate(receipts):
        for log in receipt["logs"]:
            if str(log["address"]).lower() != address.lower():
                continue
            entry = _events.decode(
                {
                    **log,
                    "blockNumber": header["number"],
                    "blockHash": header["hash"],
                    "transactionHash": receipt.get("transactionHash"),
                    "transactionIndex": position,
                    "logIndex": log.get("logIndex", 0),
                }
            )
            if entry is not None and (kinds is None or entry.kind in kinds):
                found.append(entry)
    return found


def inventing_a_takeover(liar, template: dict, token: int, holder: str) -> None:
    """Every eth_getLogs answer gains an acquisition of ``template``'s resource, token ``token`` by
    ``holder``, for the block before the range asked (with that block's real hash): outside the page."""

    def logs(params, forward):
        answer = forward(params)
        before = _number(params[0]["fromBlock"]) - 1
        block = liar.node("eth_getBlockByNumber", [hex(before), False])
        invented = dict(
            template,
            blockNumber=hex(before) if isinstance(template["blockNumber"], str) else before,
            blockHash=block["hash"] if isinstance(block["hash"], str) else "0x" + bytes(block["hash"]).hex(),
            transactionHash="0x" + "99" * 32,  # a transaction of its own: no place of a real log
            topics=[
                template["topics"][0],
                template["topics"][1],
                "0x" + token.to_bytes(32, "big").hex(),
                "0x" + bytes.fromhex(holder[2:]).rjust(32, b"\0").hex(),
            ],
        )
        return [*answer, invented]

    liar.on("eth_getLogs", logs)


def repeating(liar) -> list[tuple[int, int]]:
    """Each eth_getLogs answer starts with the previous answer's last log (one outside the range asked).
    Returns the ranges asked, as they come."""
    last: list = []
    asked: list[tuple[int, int]] = []

    def logs(params, forward):
        asked.append((_number(params[0]["fromBlock"]), _number(params[0]["toBlock"])))
        answer = forward(params)
        repeated = [last[-1]] if last and last[-1] not in answer else []
        if answer:
            last[:] = [answer[-1]]
        return repeated + answer

    liar.on("eth_getLogs", logs)
    return asked


def acquisition_log(registry: Registry, block: int) -> dict:
    """The registry's LeaseAcquired log of block ``block``, as the node sends it."""
    logs = registry.chain.rpc.logs({"address": registry.address, "fromBlock": block, "toBlock": block}, raw=True)
    return next(log for log in logs if log["topics"][0] == ACQUIRED)


# ---------------------------------------------------------------------------
# 1. A takeover withheld, its receipt blurred: a guard's follower
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["receipts", "bloom"])
@pytest.mark.parametrize("field", FIELDS)
def test_a_follower_refuses_the_block_whose_receipts_hide_the_takeover(lied, tmp_path, field, mode):
    registry, liar, lied_to = lied
    story = Takeover(registry)
    with follow_guard(lied_to, tmp_path / "follow.sqlite", completeness=mode) as guard:
        story.before(guard)
        story.take_over()
        hiding(liar, story.block, RESOURCE, field)
        for more in (0, 2):  # however long it lies, and however far the head moves on
            story.chain.mine(more)
            with pytest.raises(LogsIncomplete) as held:
                guard.sync()
            assert (held.value.block, held.value.followed) == (story.block, story.block - 1)
            assert REFUSED[field] in held.value.reason, held.value.reason
            assert not guard.follow_status().healthy and follow_block(guard.path) == story.block - 1
            with pytest.raises(StaleToken):  # checks at the mark go on-chain meanwhile
                guard.check(RESOURCE, story.stale)
        assert guard.check(RESOURCE, story.current) == story.current
        liar.honest()
        guard.sync()
        assert guard.follow_status().healthy and guard.mark(RESOURCE) == story.current, "the gap closed by itself"


def test_control_read_naively_the_blurred_receipts_settle_the_block_for_good(lied, tmp_path, monkeypatch):
    registry, liar, lied_to = lied
    monkeypatch.setattr(completeness, "registry_logs", naive_registry_logs)
    story = Takeover(registry)
    with follow_guard(lied_to, tmp_path / "follow.sqlite", completeness="receipts") as guard:
        story.before(guard)
        story.take_over()
        hiding(liar, story.block, RESOURCE, "logIndex")
        assert guard.sync() == story.chain.block_number(), "the cursor passed bob's block"
        assert guard.follow_status().healthy
        assert guard.check(RESOURCE, story.stale) == story.stale, "alice's stale token is accepted"
        liar.honest()
        story.chain.mine(1)
        guard.sync()
        assert guard.check(RESOURCE, story.stale) == story.stale, "for good: the takeover is never read again"


@pytest.mark.parametrize("field", FIELDS)
def test_a_follower_with_a_header_quorum_refuses_it_too(on_anvil, liar, honest_pair, tmp_path, field):
    """The "trust no provider" follower (three header providers, the log provider one of them; receipts
    mode, its default): the vouched receiptsRoot is matched, and the block is refused all the same."""
    h2, h3 = honest_pair
    story = Takeover(on_anvil)
    headers = quorum(story.chain, liar.url, h2.url, h3.url)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "proven.sqlite", headers=headers) as guard:
        assert guard.completeness == "receipts"
        story.before(guard)
        story.take_over()
        hiding(liar, story.block, RESOURCE, field)
        with pytest.raises(LogsIncomplete) as held:
            guard.sync()
        assert held.value.block == story.block and REFUSED[field] in held.value.reason, held.value.reason
        assert follow_block(guard.path) == story.block - 1 and not guard.follow_status().healthy
        with pytest.raises(StaleToken):  # proven on-chain meanwhile
            guard.check(RESOURCE, story.stale)
        liar.honest()
        guard.sync()
        assert guard.mark(RESOURCE) == story.current and guard.follow_status().healthy
    headers.close()


def test_control_a_follower_with_a_header_quorum_reading_naively_is_fooled(
    on_anvil, liar, honest_pair, tmp_path, monkeypatch
):
    h2, h3 = honest_pair
    monkeypatch.setattr(completeness, "registry_logs", naive_registry_logs)
    story = Takeover(on_anvil)
    headers = quorum(story.chain, liar.url, h2.url, h3.url)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "proven.sqlite", headers=headers) as guard:
        story.before(guard)
        story.take_over()
        hiding(liar, story.block, RESOURCE, "transactionHash")
        guard.sync()
        assert guard.follow_status().healthy and guard.mark(RESOURCE) == story.stale
        assert guard.check(RESOURCE, story.stale) == story.stale, "alice's stale token is accepted"
    headers.close()


# ---------------------------------------------------------------------------
# 2. The same hole: the audit index's sync, and verify --proofs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["receipts", "bloom"])
@pytest.mark.parametrize("field", FIELDS)
def test_the_audit_sync_stops_before_the_block_whose_receipts_hide_the_takeover(lied, tmp_path, field, mode):
    registry, liar, lied_to = lied
    story = Takeover(registry)
    story.stale = story.alice.acquire(RESOURCE, ttl=60).token
    story.take_over()
    hiding(liar, story.block, RESOURCE, field)
    index = AuditIndex(tmp_path / "audit.sqlite")
    result = index.sync(lied_to, completeness=mode)
    assert result.held_at == story.block and REFUSED[field] in result.held_because, result
    assert index.status().synced_block == story.block - 1 and index.lease(story.current) is None
    liar.honest()
    assert index.sync(lied_to, completeness=mode).held_at is None
    assert index.lease(story.current).holder == story.bob.sender, "the gap closed by itself"
    index.verify(registry)


def test_control_read_naively_the_audit_sync_indexes_the_hole_for_good(lied, tmp_path, monkeypatch):
    registry, liar, lied_to = lied
    monkeypatch.setattr(completeness, "registry_logs", naive_registry_logs)
    story = Takeover(registry)
    story.stale = story.alice.acquire(RESOURCE, ttl=60).token
    story.take_over()
    hiding(liar, story.block, RESOURCE, "logIndex")
    index = AuditIndex(tmp_path / "audit.sqlite")
    assert index.sync(lied_to, completeness="receipts").held_at is None
    liar.honest()
    index.sync(lied_to)
    assert index.lease(story.current) is None, "the takeover is never indexed"
    with pytest.raises(AuditIndexDiffers):
        index.verify(registry)


@pytest.fixture
def hidden_beside(on_anvil, liar, tmp_path):
    """An index synced through the liar (the bloom mode) without bob's acquisition of a new resource,
    made in the block of carol's, which is indexed: the bloom cannot count, the block is not in doubt,
    no receipts are read. Then the liar hides bob's acquisition in the block's receipts too (its
    logIndex unreadable). Yields (the block, the index, a proof reader whose proofs the liar serves, over
    three header providers)."""
    block = in_one_block(on_anvil, ["hidden/bob", "beside/carol"])
    assert on_anvil.lease_of("hidden/bob").token < on_anvil.lease_of("beside/carol").token, (
        "carol's token is the registry's latest: the index's highest token matches it"
    )
    hiding(liar, block, "hidden/bob", "logIndex")
    index = AuditIndex(tmp_path / "audit.sqlite")
    assert index.sync(through(on_anvil, liar.url)).held_at is None
    assert list(index.resources("hidden/")) == [] and len(index.resources("beside/")) == 1
    with LyingProxy(liar.upstream) as b, LyingProxy(liar.upstream) as c:
        headers = QuorumHeaders([liar.upstream, b.url, c.url], k=2)
        yield block, index, ProvenReader(on_anvil.address, headers=headers, provider=liar.url)
        headers.close()


def test_verify_with_proofs_finds_an_event_hidden_beside_an_indexed_one(on_anvil, liar, hidden_beside):
    block, index, reader = hidden_beside
    with pytest.raises(AuditIndexDiffers) as caught:
        index.verify(through(on_anvil, liar.url), proofs=reader)
    assert caught.value.differences == (
        f"block {block}: its receipts (verified against the vouched receiptsRoot) hold 2 lease events, "
        "the index 1, or other ones",
    )


def test_control_verify_reading_the_receipts_naively_passes_the_index(on_anvil, liar, hidden_beside, monkeypatch):
    block, index, reader = hidden_beside
    monkeypatch.setattr(completeness, "registry_logs", naive_registry_logs)
    assert index.verify(through(on_anvil, liar.url), proofs=reader) >= 1, "every check passes"


# ---------------------------------------------------------------------------
# 7. A log of a block outside the page asked
# ---------------------------------------------------------------------------


def test_an_invented_takeover_outside_the_page_is_refused_by_the_follower(lied, tmp_path):
    registry, liar, lied_to = lied
    chain = registry.chain
    with follow_guard(lied_to, tmp_path / "follow.sqlite") as guard:
        guard.sync()
        lease = registry.connect(chain.accounts[1]).acquire(RESOURCE, ttl=600)
        guard.sync()
        inventing_a_takeover(liar, acquisition_log(registry, lease.block_number), 999, chain.accounts[5])
        chain.mine(1)
        followed = follow_block(guard.path)
        with pytest.raises(LogsIncomplete) as refused:
            guard.sync()
        assert (refused.value.block, refused.value.followed) == (followed + 1, followed)
        assert "was answered for blocks" in refused.value.reason, refused.value.reason
        assert guard.mark(RESOURCE) == lease.token and follow_block(guard.path) == followed, "nothing applied"
        assert not guard.follow_status().healthy
        assert guard.check(RESOURCE, lease.token) == lease.token, "the real holder, checked on-chain"
        with pytest.raises(UnknownToken):
            guard.check(RESOURCE, 999)
        liar.honest()
        guard.sync()
        assert guard.follow_status().healthy and guard.mark(RESOURCE) == lease.token


def test_an_invented_takeover_outside_the_page_is_not_indexed(lied, tmp_path):
    registry, liar, lied_to = lied
    lease = registry.connect(registry.chain.accounts[1]).acquire(RESOURCE, ttl=600)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(lied_to)
    inventing_a_takeover(liar, acquisition_log(registry, lease.block_number), 999, registry.chain.accounts[5])
    registry.chain.mine(1)
    synced = index.status().synced_block
    with pytest.raises(LogsIncomplete, match="was answered for blocks"):
        index.sync(lied_to)
    assert index.lease(999) is None and index.status().synced_block == synced
    liar.honest()
    index.sync(lied_to)
    index.verify(registry)


def test_control_a_reader_that_takes_the_answer_whole_applies_and_indexes_the_invention(lied, tmp_path, monkeypatch):
    registry, liar, lied_to = lied

    def whole(raw, chain, address, topics, first, last, head):
        decoded = [entry for entry in (_events.decode(log) for log in raw) if entry is not None]
        return sorted(decoded, key=lambda entry: entry.order)

    monkeypatch.setattr(_events, "_answered", whole)
    chain = registry.chain
    mallory = chain.accounts[5]
    with follow_guard(lied_to, tmp_path / "follow.sqlite") as guard:
        guard.sync()
        lease = registry.connect(chain.accounts[1]).acquire(RESOURCE, ttl=600)
        guard.sync()
        index = AuditIndex(tmp_path / "audit.sqlite")
        index.sync(lied_to)
        inventing_a_takeover(liar, acquisition_log(registry, lease.block_number), 999, mallory)
        chain.mine(1)
        guard.sync()
        assert guard.mark(RESOURCE) == 999 and guard.follow_status().healthy
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, lease.token)  # the real holder refused
        assert guard.check(RESOURCE, 999) == 999, "the invented token accepted"
        index.sync(lied_to)
        assert index.lease(999).holder == mallory


# ---------------------------------------------------------------------------
# 15. The previous answer's last log repeated
# ---------------------------------------------------------------------------


def spread(registry: Registry, names: list[str], gap: int) -> None:
    agent = registry.connect(registry.chain.accounts[1])
    for name in names:
        registry.chain.mine(gap)
        agent.acquire(name, ttl=600)


def events(index: AuditIndex) -> list[tuple]:
    return index._conn.execute("SELECT block, log_index, kind, token FROM events ORDER BY block, log_index").fetchall()


def test_a_repeated_log_is_refused_at_once_and_the_sync_rewinds_nothing(lied, tmp_path):
    registry, liar, lied_to = lied
    spread(registry, ["repeat/a", "repeat/b"], gap=4)
    registry.chain.mine(4)  # pages with no event follow
    asked = repeating(liar)
    index = AuditIndex(tmp_path / "audit.sqlite")
    with pytest.raises(LogsIncomplete, match="was answered for blocks") as refused:
        index.sync(lied_to, max_blocks=3)
    synced = index.status().synced_block
    assert (refused.value.block, refused.value.followed) == (synced + 1, synced)
    assert len(asked) == len(set(asked)), f"no page asked twice: {asked}"
    fresh = AuditIndex(tmp_path / "fresh.sqlite")
    fresh.sync(registry, to_block=synced)
    assert events(index) == events(fresh), "what was indexed stays: nothing rewound"
    liar.honest()
    result = index.sync(lied_to, max_blocks=3)
    assert result.rewound_to is None and result.to_block == registry.chain.block_number()
    index.verify(registry)


def test_a_log_of_another_block_hash_is_refused_and_nothing_rewound(lied, tmp_path):
    """A provider that answers a block's logs with another block hash than the block's header: refused,
    typed, nothing of the page indexed and nothing rewound (before: 1,000 rewinds to where it stood)."""
    registry, liar, lied_to = lied
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(lied_to)
    synced = index.status().synced_block
    lease = registry.connect(registry.chain.accounts[1]).acquire(RESOURCE, ttl=600)

    def logs(params, forward):
        return [dict(log, blockHash="0x" + "ab" * 32) for log in forward(params)]

    liar.on("eth_getLogs", logs)
    asked = liar.count("eth_getLogs")
    with pytest.raises(LogsIncomplete, match="which is not the block's header") as refused:
        index.sync(lied_to)
    assert (refused.value.block, refused.value.followed) == (synced + 1, synced)
    assert liar.count("eth_getLogs") == asked + 1, "asked once: no rewind, no page asked again"
    assert index.status().synced_block == synced and index.lease(lease.token) is None
    liar.honest()
    assert index.sync(lied_to).rewound_to is None and index.lease(lease.token) is not None


def test_control_the_repeated_log_is_outside_the_page_and_no_block_changed(lied, tmp_path, monkeypatch):
    """The lie itself: an answer taken whole holds a log of a block before the page asked, a block whose
    hash is the chain's (the sync before this took it for a reorganisation, and rewound to where it
    stood, again and again)."""
    registry, liar, lied_to = lied
    spread(registry, ["repeat/a", "repeat/b"], gap=4)
    registry.chain.mine(4)
    repeating(liar)

    def whole(raw, chain, address, topics, first, last, head):
        return sorted((entry for entry in map(_events.decode, raw) if entry is not None), key=lambda e: e.order)

    monkeypatch.setattr(_events, "_answered", whole)
    start, head = registry.deployment_block(), registry.chain.block_number()
    pages = list(_events.fetch(lied_to.chain, registry.address, from_block=start, to_block=head, max_range=3))
    strays = [(first, entry) for first, _last, logs in pages for entry in logs if entry.block_number < first]
    assert strays, "a log of an earlier block, answered for a page"
    for _first, entry in strays:
        assert registry.chain.rpc.block(entry.block_number)["hash"] == entry.block_hash, "no reorganisation"


# ---------------------------------------------------------------------------
# Two logs at one place
# ---------------------------------------------------------------------------


def one_place(liar, registry: Registry) -> tuple[int, int]:
    """bob's acquisition and carol's in one batched transaction (one name logged: bob's resource is known),
    answered with one logIndex. Returns their tokens."""
    registry.connect(registry.chain.accounts[1]).acquire("one/bob", ttl=1).release()
    block = in_one_transaction(registry, ["one/bob", "one/carol"])

    def logs(params, forward):
        answer = forward(params)
        mine = [log for log in answer if int(log["blockNumber"], 16) == block and log["topics"][0] == ACQUIRED]
        for log in mine:
            log["logIndex"] = mine[0]["logIndex"]
        return answer

    liar.on("eth_getLogs", logs)
    return registry.lease_of("one/bob").token, registry.lease_of("one/carol").token


def test_two_logs_answered_at_one_place_are_refused(on_anvil, liar, tmp_path):
    bob, carol = one_place(liar, on_anvil)
    index = AuditIndex(tmp_path / "audit.sqlite")
    with pytest.raises(LogsIncomplete, match="at one place"):
        index.sync(through(on_anvil, liar.url), completeness="receipts")
    assert index.lease(bob) is None and index.lease(carol) is None
    liar.honest()
    index.sync(through(on_anvil, liar.url), completeness="receipts")
    assert index.lease(bob) is not None and index.lease(carol) is not None


def test_control_taken_whole_one_of_two_logs_at_one_place_vanishes_from_the_index(
    on_anvil, liar, tmp_path, monkeypatch
):
    def whole(raw, chain, address, topics, first, last, head):
        return sorted((entry for entry in map(_events.decode, raw) if entry is not None), key=lambda e: e.order)

    monkeypatch.setattr(_events, "_answered", whole)
    bob, carol = one_place(liar, on_anvil)
    index = AuditIndex(tmp_path / "audit.sqlite")
    assert index.sync(through(on_anvil, liar.url), completeness="receipts").held_at is None, "the contents match"
    assert index.lease(bob) is not None and index.lease(carol) is None, "carol's lease vanished"


# ---------------------------------------------------------------------------
# The readers that poll one resource: a waiter, an election's observer
# ---------------------------------------------------------------------------


def blurring(liar, blocks) -> None:
    """eth_getLogs answers the logs of ``blocks`` with their logIndex unreadable: logs that do not read."""

    def logs(params, forward):
        answer = forward(params)
        for log in answer:
            if _number(log["blockNumber"]) in blocks:
                log["logIndex"] = "0xzz"
        return answer

    liar.on("eth_getLogs", logs)


def test_a_waiter_told_a_log_that_does_not_read_reads_the_lease_again(on_anvil, liar):
    """alice releases at the waiter's first pause; the answer for that block holds her release unreadable:
    refused, and the waiter reads the lease instead: free, it acquires within a few polls."""
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=600)

    def release(pause):
        if pause == 1:
            blurring(liar, {lease.registry.chain.block_number() + 1})
            lease.release()

    bob, clock = waiter_through(liar, on_anvil, release)
    got = bob.acquire(RESOURCE, ttl=60, wait=3)
    assert got.token == lease.token + 1 and clock.now() < 1.0
    assert liar.count("eth_getLogs") >= 1


class BlurredHandover(Handover):
    """alice leads; at the observer's first pause she resigns and bob is elected (two blocks), and their logs
    are answered unreadable; at its 8th pause the provider turns honest."""

    def __call__(self, pause: int) -> None:
        if pause == 1:
            first = self.chain.block_number() + 1
            blurring(self.liar, {first, first + 1})
            self.a.resign()
            self.b = self.bob.campaign()
        if pause == 8:
            self.liar.honest()


def test_an_observer_told_logs_that_do_not_read_waits_and_reports_the_handover(on_anvil, liar, caplog):
    import logging

    story = BlurredHandover(on_anvil, liar)
    with caplog.at_level(logging.WARNING, logger="chainfence.recipes.election"):
        seen = observed_through(liar, on_anvil, story)
    assert seen == [(story.alice.registry.sender, story.a.token), None, (story.bob.registry.sender, story.b.token)]
    assert f"election={story.alice.name}: waits at block" in caplog.text and "does not decode" in caplog.text
    story.b.resign()


# ---------------------------------------------------------------------------
# 3. A resource the index lacks whole
# ---------------------------------------------------------------------------


@pytest.fixture
def lacking(on_anvil, liar, tmp_path):
    """An index synced through a liar that withholds the block of carol's acquisition of a new resource and
    serves its header with an empty bloom: it holds no event of that block. Yields (carol's lease, the
    index, a proof reader over three honest header providers, their URLs)."""
    carol = on_anvil.connect(on_anvil.chain.accounts[3])
    carol.acquire("known/a", ttl=600)
    lease = carol.acquire("lacking/b", ttl=600)
    on_anvil.chain.mine(1)
    liar.on(
        "eth_getLogs",
        lambda params, forward: [log for log in forward(params) if int(log["blockNumber"], 16) != lease.block_number],
    )
    forging_the_bloom(liar, lease.block_number)
    index = AuditIndex(tmp_path / "audit.sqlite")
    assert index.sync(through(on_anvil, liar.url)).held_at is None
    assert list(index.resources("lacking/")) == [] and index.lease(lease.token) is None
    with LyingProxy(liar.upstream) as b, LyingProxy(liar.upstream) as c:
        urls = [liar.upstream, b.url, c.url]
        headers = QuorumHeaders(urls, k=2)
        yield lease, index, ProvenReader(on_anvil.address, headers=headers, provider=liar.url), urls
        headers.close()


def test_verify_with_proofs_compares_the_registrys_latest_token_with_the_index(on_anvil, liar, lacking):
    lease, index, reader, urls = lacking
    lied_to = through(on_anvil, liar.url)
    index.verify(lied_to)  # the plain verify, told the same story, passes
    with pytest.raises(AuditIndexDiffers) as caught:
        index.verify(lied_to, proofs=reader)
    assert caught.value.differences == (
        f"tokens: the index's highest token is {lease.token - 1}; proven at block {index.status().synced_block}, "
        f"the registry's latest is {lease.token}",
    )
    done, _ = cli(liar.url, on_anvil, index.path, "verify", "--proofs", "--headers", *urls, "--quorum", "2")
    assert done.returncode == 12 and "the registry's latest is" in done.stderr, done.stderr


def test_control_without_the_latest_token_verify_with_proofs_passes_the_index(on_anvil, liar, lacking, monkeypatch):
    lease, index, reader, _urls = lacking
    monkeypatch.setattr(type(reader), "latest_token", lambda self, header=None: lease.token - 1)  # as if not compared
    assert index.verify(through(on_anvil, liar.url), proofs=reader) >= 1, "every other check passes"
