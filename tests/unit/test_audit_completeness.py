"""The audit's completeness checks on plain data (no chain): blooms, the receipts trie, when a block is in doubt.

The trie root is held to py-trie's (the reference implementation py-evm builds its roots with); the bloom
to the yellow paper's definition through a log of known bits; ``doubt`` to each way an answer can miss or
misstate a block's registry logs.
"""

from __future__ import annotations

import sqlite3

import pytest
from eth_utils import keccak

from chainfence._node import completeness as _completeness
from chainfence._node import events as _events
from chainfence._node.rlp import encode as rlp_encode
from chainfence.audit import _projection

REGISTRY = "0x" + "5f" * 20
OTHER = "0x" + "aa" * 20
RESOURCE = keccak(b"jobs/a")


@pytest.mark.parametrize("count", [0, 1, 2, 16, 17, 130, 300])
def test_the_ordered_trie_root_is_py_tries(count):
    from trie import HexaryTrie

    values = [keccak(str(i).encode()) * (1 + i % 5) for i in range(count)]
    reference = HexaryTrie({})
    for i, value in enumerate(values):
        reference[rlp_encode(i)] = value
    assert _completeness.trie_root(values) == reference.root_hash


def acquired(token: int, holder: str = "0x" + "11" * 20, log_index: int = 0) -> _events.RegistryLog:
    return _events.RegistryLog(
        _events.Kind.ACQUIRED,
        RESOURCE,
        7,
        b"\1" * 32,
        "0x" + "22" * 32,
        log_index,
        token=token,
        holder=holder,
        expires_at=100,
        previous_token=0,
        reason=0,
        tx_index=0,
    )


def header_with(*logs: _events.RegistryLog, extra: tuple[tuple[bytes, list[bytes]], ...] = ()) -> dict:
    parts = [(bytes.fromhex(REGISTRY[2:]), _events.topics_of(entry), b"") for entry in logs]
    parts += [(address, topics, b"") for address, topics in extra]
    return {"logsBloom": "0x" + _completeness.bloom_of(parts).hex()}


def test_a_bloom_holds_every_address_and_topic_of_its_logs():
    entry = acquired(5)
    bloom = bytes.fromhex(header_with(entry)["logsBloom"][2:])
    assert all(_completeness.bloom_has(bloom, word) for word in _events.topics_of(entry))
    assert _completeness.bloom_has(bloom, bytes.fromhex(REGISTRY[2:]))
    assert not _completeness.bloom_has(bytes(256), keccak(b"anything"))


def test_a_complete_answer_is_not_in_doubt():
    entry = acquired(5)
    assert _completeness.doubt(header_with(entry), REGISTRY, [entry]) is None
    assert _completeness.doubt(header_with(), REGISTRY, []) is None, "a block without the registry's logs"


def test_an_answer_without_the_blocks_registry_logs_is_in_doubt():
    assert "LeaseAcquired" in _completeness.doubt(header_with(acquired(5)), REGISTRY, [])


def test_a_log_the_bloom_rules_out_is_in_doubt():
    entry, forged = acquired(5), acquired(5, holder="0x" + "99" * 20)
    assert "rules out" in _completeness.doubt(header_with(entry), REGISTRY, [forged])


def test_another_contracts_event_of_the_same_signature_only_costs_a_receipts_check():
    """The registry's address is in the bloom (one of its events) and so is another event's topic0, logged by
    another contract: the block is in doubt (settled by its receipts, which hold no such registry log)."""
    entry = acquired(5)
    released_topic = bytes.fromhex(_events.topic(_events.Kind.RELEASED)[2:])
    header = header_with(entry, extra=((bytes.fromhex(OTHER[2:]), [released_topic]),))
    assert "LeaseReleased" in _completeness.doubt(header, REGISTRY, [entry])


def renewed(token: int, resource: bytes = RESOURCE) -> _events.RegistryLog:
    return _events.RegistryLog(
        _events.Kind.RENEWED,
        resource,
        7,
        b"\1" * 32,
        "0x" + "33" * 32,
        1,
        token=token,
        holder="0x" + "11" * 20,
        expires_at=200,
        tx_index=0,
    )


def test_a_query_is_in_doubt_only_for_the_events_it_asks_for():
    """A follower that reads acquisitions and ends, not renewals: a block with only a renewal is complete for
    it, and in doubt for a reader of every event (the audit)."""
    header = header_with(renewed(5))
    asked = [_events.Kind.ACQUIRED, _events.Kind.RELEASED, _events.Kind.REVOKED]
    assert _completeness.doubt(header, REGISTRY, [], kinds=asked) is None
    assert "LeaseRenewed" in _completeness.doubt(header, REGISTRY, [])
    assert "LeaseRenewed" in _completeness.doubt(header, REGISTRY, [], kinds=[_events.Kind.RENEWED])


def test_a_query_for_one_resource_is_in_doubt_only_where_the_bloom_may_hold_that_resource():
    """An election's observer reads one resource: another resource's acquisition in the block is no doubt."""
    header = header_with(acquired(5))
    other = keccak(b"jobs/other")
    assert _completeness.doubt(header, REGISTRY, [], resource_id=other) is None
    assert "LeaseAcquired" in _completeness.doubt(header, REGISTRY, [], resource_id=RESOURCE)
    assert "LeaseAcquired" in _completeness.doubt(header, REGISTRY, [], resource_id=RESOURCE, token=5)
    assert _completeness.doubt(header, REGISTRY, [], resource_id=RESOURCE, token=6) is None


def receipt_with(*entries: _events.RegistryLog) -> dict:
    return {
        "transactionHash": "0x" + "22" * 32,
        "logs": [
            {"address": REGISTRY, "topics": ["0x" + t.hex() for t in _events.topics_of(e)], "data": "0x" + "00" * 96}
            for e in entries
        ],
    }


def test_receipts_are_read_for_the_query_only():
    """What settles a block is the receipts' registry logs the query asks for: kinds and indexed values."""
    other = keccak(b"jobs/other")
    receipts = [receipt_with(acquired(5)), receipt_with(renewed(5), renewed(3, other))]
    header = {"number": 7, "hash": "0x" + "01" * 32}

    def kinds_of(**query):
        return [
            (e.kind, e.resource_id, e.token) for e in _completeness.registry_logs(receipts, header, REGISTRY, **query)
        ]

    assert [k for k, _, _ in kinds_of()] == [_events.Kind.ACQUIRED, _events.Kind.RENEWED, _events.Kind.RENEWED]
    assert kinds_of(kinds=[_events.Kind.ACQUIRED]) == [(_events.Kind.ACQUIRED, RESOURCE, 5)]
    assert kinds_of(resource_id=other) == [(_events.Kind.RENEWED, other, 3)]
    assert kinds_of(kinds=[_events.Kind.RENEWED], token=5) == [(_events.Kind.RENEWED, RESOURCE, 5)]


def test_events_of_two_transactions_with_the_same_log_index_are_both_kept():
    """A node that numbers logIndex per transaction: (block, log index) repeats; the store keeps both."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(_projection.SCHEMA)
    first = acquired(1)
    second = _events.RegistryLog(
        _events.Kind.ACQUIRED,
        keccak(b"jobs/b"),
        7,
        b"\1" * 32,
        "0x" + "33" * 32,
        0,
        token=2,
        holder="0x" + "11" * 20,
        expires_at=100,
        previous_token=0,
        reason=0,
        tx_index=1,
    )
    for entry in (second, first):  # applied out of order: read back in chain order
        _projection.apply(conn, entry, 50)
    rows = conn.execute(f"SELECT token, tx_index FROM events ORDER BY {_projection.ORDER}").fetchall()
    assert rows == [(1, 0), (2, 1)]
    assert conn.execute("SELECT count(*) FROM leases").fetchone() == (2,)


def test_a_block_the_bloom_cannot_count_is_not_in_doubt_but_may_hold_what_the_receipts_mode_reads():
    """Two acquisitions in one block, one answered: the bloom holds nothing the answered one did not set
    (its resource, token and holder topics aside, which the check does not ask for): not in doubt, so the
    bloom mode passes it; ``may_hold`` says the block may hold an asked event, so the receipts mode reads
    its receipts. Blocks without the asked kinds, or without the registry, the receipts mode leaves alone."""
    answered, withheld = acquired(5), acquired(6, holder="0x" + "77" * 20, log_index=1)
    header = header_with(answered, withheld)
    assert _completeness.doubt(header, REGISTRY, [answered]) is None, "the bloom cannot count"
    assert _completeness.may_hold(header, REGISTRY)
    assert _completeness.may_hold(header, REGISTRY, kinds=[_events.Kind.ACQUIRED])
    assert not _completeness.may_hold(header_with(renewed(5)), REGISTRY, kinds=[_events.Kind.ACQUIRED])
    assert not _completeness.may_hold(header_with(), REGISTRY)
    assert not _completeness.may_hold(header, REGISTRY, resource_id=keccak(b"jobs/other"))


def test_content_is_what_every_field_says_apart_from_where():
    """``content`` reads a log's fields one by one: the same tuple as all of them (``_asdict``) less the
    five that say where it is."""

    def by_asdict(entry):
        fields = entry._asdict()
        for where in ("block_number", "block_hash", "tx_hash", "log_index", "tx_index"):
            fields.pop(where)
        fields["kind"] = entry.kind.value
        if fields.get("progress") is not None and not any(fields["progress"]):
            fields["progress"] = None
        return tuple(sorted((key, repr(value)) for key, value in fields.items()))

    marked = renewed(5)._replace(progress=b"\1" * 32)
    unmarked = renewed(5)._replace(progress=bytes(32))
    for entry in (acquired(5), renewed(3), marked, unmarked, acquired(5)._replace(name=b"jobs/a")):
        assert _completeness.content(entry) == by_asdict(entry)
    assert _completeness.content(unmarked) == _completeness.content(renewed(5))
    assert _completeness.content(acquired(5)) == _completeness.content(acquired(5)._replace(log_index=9))
    assert _completeness.content(acquired(5)) != _completeness.content(acquired(6))


def transaction(nonce: int) -> dict:
    """A dynamic-fee transaction to the registry, as a node sends it (its signature made up: never checked)."""
    return {
        "type": "0x2",
        "chainId": "0x7a69",
        "nonce": hex(nonce),
        "maxPriorityFeePerGas": "0x1",
        "maxFeePerGas": "0x2",
        "gas": "0x5208",
        "to": REGISTRY,
        "value": "0x0",
        "input": "0x",
        "accessList": [],
        "yParity": "0x0",
        "r": "0x" + "12" * 32,
        "s": "0x" + "34" * 32,
    }


class ReceiptsNode:
    """An RPC layer over ``blocks`` blocks of one acquisition each: their receipts, hashing to their headers'
    receiptsRoot; records what is asked (``batches``: the blocks of each eth_getBlockReceipts batch; ``alone``:
    each one asked alone). ``batching``: False answers no batch (as Rpc.block_receipts on a node without)."""

    def __init__(self, blocks: int, batching: bool = True):
        self.batching = batching
        self.batches: list[list[int]] = []
        self.alone: list[int] = []
        self.whole_batches: list[list[int]] = []
        self.whole_alone: list[int] = []
        self.receipts: dict[str, list[dict]] = {}
        self.blocks: dict[str, dict] = {}
        self.headers: dict[int, dict] = {}
        for number in range(1, blocks + 1):
            block_hash = "0x" + number.to_bytes(32, "big").hex()
            tx = transaction(number)
            receipt = receipt_with(acquired(number))
            receipt.update(
                status=1,
                cumulativeGasUsed=21_000,
                type=2,
                transactionIndex=0,
                transactionHash="0x" + keccak(_completeness.encode_transaction(tx)).hex(),
            )
            self.receipts[block_hash] = [receipt]
            self.blocks[block_hash] = {"hash": block_hash, "transactions": [tx]}
            entry = acquired(number)
            self.headers[number] = {
                "number": number,
                "hash": block_hash,
                "logsBloom": header_with(entry)["logsBloom"],
                "receiptsRoot": "0x" + _completeness.receipts_root([receipt]).hex(),
                "transactionsRoot": "0x" + _completeness.trie_root([_completeness.encode_transaction(tx)]).hex(),
            }

    def answer(self, *, withheld: int | None = None) -> list[_events.RegistryLog]:
        return [
            entry
            for number, header in self.headers.items()
            if number != withheld
            for entry in _completeness.registry_logs(self.receipts[header["hash"]], header, REGISTRY)
        ]

    def block_receipts(self, hashes):
        if not self.batching:
            return [None] * len(hashes)
        self.batches.append([int(h, 16) for h in hashes])
        return [self.receipts[h] for h in hashes]

    def whole_blocks(self, hashes):
        if not self.batching:
            return [None] * len(hashes)
        self.whole_batches.append([int(h, 16) for h in hashes])
        return [self.blocks[h] for h in hashes]

    def request(self, method, params):
        if method == "eth_getBlockByHash":
            assert params[1] is True, "its transactions whole"
            self.whole_alone.append(int(params[0], 16))
            return self.blocks[params[0]]
        assert method == "eth_getBlockReceipts"
        self.alone.append(int(params[0], 16))
        return self.receipts[params[0]]

    def check(self, logs, mode):
        from contextlib import nullcontext

        from chainfence._core.effects import run

        steps = _completeness.check_steps(REGISTRY, 1, len(self.headers), logs, headers=dict(self.headers), mode=mode)
        return run(steps, rpc=self, sleep=lambda s: None, lock=lambda key: nullcontext())


def test_the_receipts_mode_asks_a_pages_receipts_a_batch_of_100_at_a_time():
    node = ReceiptsNode(250)
    checked = node.check(node.answer(), "receipts")
    assert checked.held is None and checked.end == 250 and checked.settled == tuple(range(1, 251))
    assert [(batch[0], batch[-1]) for batch in node.batches] == [(1, 100), (101, 200), (201, 250)]
    assert node.whole_batches == node.batches, "their transactions, whole, in the same batches"
    assert node.alone == node.whole_alone == []
    bloom = ReceiptsNode(250)
    assert bloom.check(bloom.answer(), "bloom").end == 250 and bloom.batches == bloom.alone == [], "nothing read"


def test_a_block_that_does_not_settle_stops_the_batches_there():
    """Block 5's acquisition withheld: one batch (blocks 1..100) is asked, blocks 1..4 settle, 5 holds;
    nothing past that batch is asked. The bloom mode passes block 5 unseen (the control)."""
    node = ReceiptsNode(250)
    checked = node.check(node.answer(withheld=5), "receipts")
    assert (checked.end, checked.held, checked.settled) == (4, 5, (1, 2, 3, 4))
    assert "its receipts hold 1 registry events, the answer 0" in checked.why
    assert [(batch[0], batch[-1]) for batch in node.batches] == [(1, 100)]
    # In this page the bloom puts block 5 in doubt (nothing answered for it): the bloom mode holds it too.
    bloom = ReceiptsNode(250)
    assert bloom.check(bloom.answer(withheld=5), "bloom").held == 5 and bloom.alone == [5]


def test_without_batches_each_blocks_receipts_are_asked_alone():
    node = ReceiptsNode(3, batching=False)
    checked = node.check(node.answer(), "receipts")
    assert checked.end == 3 and node.alone == node.whole_alone == [1, 2, 3] and node.batches == []
