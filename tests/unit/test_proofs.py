"""The proven mode's core, without a node: header hashes per fork, proofs of the lease slot, the verdict.

Vectors: published mainnet headers (tests/unit/mainnet_headers.py says where
they come from) and real anvil ``eth_getProof`` answers recorded once by
hand (tests/unit/data/anvil_proofs.json: a registry where alice holds
``reports/daily`` with token 1). The live attacks, with proxies in front of
anvil, are tests/integration/test_proven_attacks.py.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import pytest
import rlp as reference_rlp
from trie import HexaryTrie

from chainfence import lease as _lease
from chainfence._node import headers as _headers
from chainfence._node import proofs as _proofs
from chainfence._node.headers import QuorumHeaders, TrustedHeaders, header_hash, header_rlp
from chainfence._node.proofs import ProofMismatch, decode_lease, lease_slot, verify_account, verify_storage
from chainfence._node.rlp import decode, keccak256
from chainfence.errors import (
    BlockNotVouched,
    ContractNotFound,
    HeadersDisagree,
    HeaderStale,
    InvalidInput,
    ProofInvalid,
    ProofsNotServed,
    ProviderUnavailable,
    RpcError,
    TokenNotCurrent,
)
from chainfence.lease import LeaseInfo, LeaseStatus
from chainfence.proofs import ProvenReader, lease_info
from tests.unit.mainnet_headers import JSON_VECTORS, RLP_VECTORS


def judge(resource, resource_id, token, info):
    """The proven mode's verdict: chainfence.lease.judge, the one strict views call too."""
    _lease.judge(info, token, resource=resource, resource_id=resource_id)


ANVIL = json.loads((Path(__file__).parent / "data" / "anvil_proofs.json").read_text())
RESOURCE_ID = keccak256(b"reports/daily")


def _nodes(hexes):
    return [bytes.fromhex(h[2:]) for h in hexes]


# -- headers ------------------------------------------------------------------------------

_NAMES = [name for name, _ in _headers._BASE_FIELDS + _headers._FORK_FIELDS]
_KINDS = dict(_headers._BASE_FIELDS + _headers._FORK_FIELDS)


def _json_from_rlp(raw: bytes) -> dict:
    """The JSON-RPC block object a node would serve for this header RLP."""
    items = decode(raw)
    block = {}
    for name, item in zip(_NAMES, items):
        block[name] = hex(int.from_bytes(item, "big")) if _KINDS[name] == "q" else "0x" + item.hex()
    return block


@pytest.mark.parametrize("number", sorted(RLP_VECTORS))
def test_mainnet_header_rlp_hashes_to_its_hash_and_reencodes_from_json(number):
    """Frontier (genesis), London (PoW and the last PoW block), Shanghai, Cancun: the published RLP
    hashes to the published hash, and the JSON a node would serve re-encodes to the same RLP."""
    block_hash, raw_hex = RLP_VECTORS[number]
    raw = bytes.fromhex(raw_hex)
    assert "0x" + keccak256(raw).hex() == block_hash
    block = _json_from_rlp(raw)
    assert int(block["number"], 16) == number
    assert header_rlp(block) == raw
    assert "0x" + header_hash(block).hex() == block_hash


@pytest.mark.parametrize("number", sorted(JSON_VECTORS))
def test_mainnet_json_blocks_hash_to_their_hash(number):
    """Shanghai, Cancun and Prague (requestsHash) blocks as a node serves them (extra keys such as
    size are ignored; only header fields are hashed)."""
    block = JSON_VECTORS[number]
    assert int(block["number"], 16) == number
    assert "0x" + header_hash(block).hex() == block["hash"]


def test_anvils_block_hashes_to_its_hash():
    """anvil 1.7.1's blocks carry every field through prague (requestsHash)."""
    block = ANVIL["block"]
    assert "requestsHash" in block
    assert "0x" + header_hash(block).hex() == block["hash"]


@pytest.mark.parametrize("field", ["stateRoot", "timestamp", "number", "requestsHash", "extraData", "baseFeePerGas"])
def test_a_changed_field_changes_the_hash(field):
    block = dict(JSON_VECTORS[23094898])
    value = block[field]
    block[field] = (
        hex(int(value, 16) + 1)
        if _KINDS[field] == "q"
        else "0x" + ("ff" if value == "0x" else value[2:-2] + "00" if value[-2:] != "00" else value[2:-2] + "01")
    )
    assert "0x" + header_hash(block).hex() != JSON_VECTORS[23094898]["hash"]


def test_a_field_added_or_skipped_is_refused_or_changes_the_hash():
    block = dict(JSON_VECTORS[18722845])  # shanghai: no blob fields
    block["parentBeaconBlockRoot"] = "0x" + "00" * 32  # a cancun field without the blob fields before it
    with pytest.raises(ValueError, match="out of order"):
        header_rlp(block)
    block = dict(JSON_VECTORS[23094898])
    del block["requestsHash"]  # a prague header passed off as a cancun one
    assert "0x" + header_hash(block).hex() != JSON_VECTORS[23094898]["hash"]
    for broken in ({"stateRoot": "0x12"}, {"miner": "0x" + "11" * 19}, {"number": "12"}, {"logsBloom": "0x00"}):
        with pytest.raises(ValueError):
            header_rlp({**JSON_VECTORS[23094898], **broken})


# -- proofs ---------------------------------------------------------------------------------


def _held():
    return ANVIL["held"], bytes.fromhex(ANVIL["block"]["stateRoot"][2:])


def test_anvils_proof_verifies_and_decodes_to_what_eth_getstorageat_says():
    answer, state_root = _held()
    account = verify_account(state_root, bytes.fromhex(ANVIL["registry"][2:]), _nodes(answer["accountProof"]))
    assert account is not None
    assert "0x" + account.storage_root.hex() == answer["storageHash"]
    assert "0x" + account.code_hash.hex() == answer["codeHash"]
    slot = lease_slot(RESOURCE_ID)
    assert answer["storageProof"][0]["key"] == "0x" + slot.hex()
    value = verify_storage(account.storage_root, slot, _nodes(answer["storageProof"][0]["proof"]))
    assert value == int(answer["storageProof"][0]["value"], 16) == int(ANVIL["storage_at"], 16)
    lease = decode_lease(value)
    assert (lease.holder, lease.token, lease.expires_at) == (ANVIL["holder"], ANVIL["token"], ANVIL["expires_at"])
    assert not (lease.claimed or lease.done or lease.revoked)


def test_the_trie_package_reads_the_same_values_from_the_same_proofs():
    """A second implementation (py-evm's trie) agrees on the account and the slot."""
    answer, state_root = _held()
    address_key = keccak256(bytes.fromhex(ANVIL["registry"][2:]))
    theirs = HexaryTrie.get_from_proof(
        state_root, address_key, [reference_rlp.decode(n) for n in _nodes(answer["accountProof"])]
    )
    assert _proofs.verify_proof(state_root, address_key, _nodes(answer["accountProof"])) == theirs
    storage_root = bytes.fromhex(answer["storageHash"][2:])
    slot_key = keccak256(lease_slot(RESOURCE_ID))
    proof = _nodes(answer["storageProof"][0]["proof"])
    assert _proofs.verify_proof(storage_root, slot_key, proof) == HexaryTrie.get_from_proof(
        storage_root, slot_key, [reference_rlp.decode(n) for n in proof]
    )


def test_absence_is_proven_too():
    """A slot never written reads 0 (the branch has no child there); an address with no account, None."""
    state_root = bytes.fromhex(ANVIL["block"]["stateRoot"][2:])
    free = ANVIL["free"]
    account = verify_account(state_root, bytes.fromhex(ANVIL["registry"][2:]), _nodes(free["accountProof"]))
    slot = lease_slot(keccak256(b"never/held"))
    assert verify_storage(account.storage_root, slot, _nodes(free["storageProof"][0]["proof"])) == 0
    nobody = ANVIL["no_account"]
    assert verify_account(state_root, bytes.fromhex("42" * 20), _nodes(nobody["accountProof"])) is None


def _every_byte_flipped(nodes):
    for i, node in enumerate(nodes):
        for position in range(len(node)):
            for mask in (0x01, 0x80):
                tampered = list(nodes)
                tampered[i] = node[:position] + bytes([node[position] ^ mask]) + node[position + 1 :]
                yield i, position, tampered


def test_every_byte_flipped_in_an_account_proof_node_fails():
    answer, state_root = _held()
    address = bytes.fromhex(ANVIL["registry"][2:])
    nodes = _nodes(answer["accountProof"])
    count = 0
    for _i, _position, tampered in _every_byte_flipped(nodes):
        with pytest.raises(ProofMismatch):
            verify_account(state_root, address, tampered)
        count += 1
    assert count == 2 * sum(len(n) for n in nodes) > 1000


def test_every_byte_flipped_in_a_storage_proof_node_fails():
    answer, _ = _held()
    storage_root = bytes.fromhex(answer["storageHash"][2:])
    slot = lease_slot(RESOURCE_ID)
    nodes = _nodes(answer["storageProof"][0]["proof"])
    for _i, _position, tampered in _every_byte_flipped(nodes):
        with pytest.raises(ProofMismatch):
            verify_storage(storage_root, slot, tampered)


def test_nodes_dropped_added_or_reordered_fail():
    answer, state_root = _held()
    address = bytes.fromhex(ANVIL["registry"][2:])
    nodes = _nodes(answer["accountProof"])
    for tampered in (nodes[:-1], nodes[1:], nodes + [nodes[-1]], nodes[::-1], [], [nodes[0]] + nodes):
        with pytest.raises(ProofMismatch):
            verify_account(state_root, address, tampered)
    # Another key's proof against the same root: absent for ours, never its value.
    other = bytes.fromhex("42" * 20)
    with pytest.raises(ProofMismatch):
        verify_account(state_root, other, nodes)  # the registry's leaf proves nothing about 0x4242...
    # The right nodes against another root.
    with pytest.raises(ProofMismatch):
        verify_account(keccak256(b"another state"), address, nodes)


def test_the_lease_slot_is_keccak_of_id_and_slot_zero():
    assert lease_slot(RESOURCE_ID) == keccak256(RESOURCE_ID + bytes(32))
    assert "0x" + lease_slot(RESOURCE_ID).hex() == ANVIL["held"]["storageProof"][0]["key"]


def test_the_packed_slot_decodes_every_field():
    holder = 0x70997970C51812DC3A010C7D01B50E0D17DC79C8
    packed = holder | (1_795_530_000 << 160) | (1 << 200) | (1 << 201) | (1 << 202) | (1 << 203) | (2**48 - 1 << 208)
    lease = decode_lease(packed)
    assert lease.holder == "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"  # EIP-55, as web3 writes it
    assert (lease.expires_at, lease.claimed, lease.done, lease.revoked, lease.recorded, lease.token) == (
        1_795_530_000,
        True,
        True,
        True,
        True,
        2**48 - 1,
    )


# -- the verdict: exactly strict mode's -------------------------------------------------------

_CASES = [
    (status, token, info_token, expires, unmined)
    for status in LeaseStatus
    for token in (1, 5, 9)
    for info_token, expires, unmined in ((5, 100, False), (5, 100, True), (0, 0, False))
]


@pytest.mark.parametrize(("status", "token", "info_token", "expires", "unmined"), _CASES)
def test_the_verdict_is_registry_raise_unless_current(status, token, info_token, expires, unmined):
    """Every status x token below/at/above x held/never-held: the same class (and fields) as
    ``Registry._raise_unless_current``, the verdict strict mode's check_current gives."""
    from chainfence.registry import Registry

    info = LeaseInfo(
        resource="r",
        resource_id=RESOURCE_ID,
        holder="0x" + "11" * 20,
        token=info_token,
        expires_at=expires,
        status=status,
        judged_at=150 if status is LeaseStatus.EXPIRED else None,
        expired_unmined=unmined,
    )

    def outcome(fn):
        try:
            fn()
        except TokenNotCurrent as exc:
            return type(exc), exc.details()
        return None

    ours = outcome(lambda: judge("r", RESOURCE_ID, token, info))
    strict = outcome(lambda: Registry._raise_unless_current(None, "r", RESOURCE_ID, token, info))
    assert ours == strict


def test_lease_info_reads_status_as_leaseof_and_judges_at_the_later_time():
    holder = 0x1111111111111111111111111111111111111111
    live = holder | (200 << 160) | (7 << 208)
    assert lease_info("r", RESOURCE_ID, live, block_time=100, judged_at=150).status is LeaseStatus.LIVE
    expired_in_block = lease_info("r", RESOURCE_ID, live, block_time=200, judged_at=200)
    assert expired_in_block.status is LeaseStatus.EXPIRED and not expired_in_block.expired_unmined
    unmined = lease_info("r", RESOURCE_ID, live, block_time=100, judged_at=200)
    assert unmined.status is LeaseStatus.EXPIRED and unmined.expired_unmined and unmined.judged_at == 200
    assert lease_info("r", RESOURCE_ID, holder | (7 << 208), block_time=1, judged_at=1).status is LeaseStatus.RELEASED
    assert (
        lease_info("r", RESOURCE_ID, holder | (1 << 202) | (7 << 208), block_time=1, judged_at=1).status
        is LeaseStatus.REVOKED
    )
    assert (
        lease_info("r", RESOURCE_ID, holder | (3 << 200) | (7 << 208), block_time=1, judged_at=1).status
        is LeaseStatus.DONE
    )
    assert lease_info("r", RESOURCE_ID, 0, block_time=1, judged_at=1).status is LeaseStatus.UNHELD


# -- header sources and the reader over fake providers ----------------------------------------


def _chain_of_blocks(count: int, *, start_time: int = 1_000, salt: bytes = b"") -> list[dict]:
    """``count`` consecutive valid block objects (fields hash to their hash), from the anvil template."""
    blocks = []
    parent = "0x" + keccak256(b"genesis" + salt).hex()
    for number in range(count):
        block = {k: v for k, v in ANVIL["block"].items() if k in _NAMES}
        block.update(number=hex(number), timestamp=hex(start_time + number), parentHash=parent)
        block["stateRoot"] = "0x" + keccak256(b"state" + salt + bytes([number])).hex()
        block["hash"] = "0x" + header_hash(block).hex()
        parent = block["hash"]
        blocks.append(block)
    return blocks


class FakeProvider:
    """A provider serving ``blocks`` with its head at ``head``; ``down`` drops everything. ``after``: an
    event it waits for before each answer (a slower provider; one never set: a silent one);
    ``answered`` is set once it has answered (or failed) a request."""

    def __init__(self, name: str, blocks: list[dict], *, head: int | None = None):
        self.name = name
        self.blocks = blocks
        self.head = len(blocks) - 1 if head is None else head
        self.requests = 0
        self.down = False
        self.proofs: dict | None = None
        self.calls: list[tuple[str, list]] = []
        self.after: threading.Event | None = None
        self.answered = threading.Event()

    def request(self, method, params):
        self.requests += 1
        self.calls.append((method, params))
        if self.after is not None:
            self.after.wait(60)
        try:
            return self._answer(method, params)
        finally:
            self.answered.set()

    def _answer(self, method, params):
        if self.down:
            raise ProviderUnavailable(source=self.name, detail="down")
        if method == "eth_getBlockByNumber":
            tag = params[0]
            number = self.head if tag in ("latest", "finalized") else int(tag, 16)
            return copy.deepcopy(self.blocks[number]) if number <= self.head else None
        if method == "eth_getProof":
            if self.proofs is None:
                raise RpcError(
                    "not served", method=method, code=-32601, rpc_message="the method eth_getProof does not exist"
                )
            return copy.deepcopy(self.proofs)
        raise AssertionError(method)


def _quorum(providers, **options):
    options.setdefault("clock", lambda: 1_000 + 10)
    return QuorumHeaders(providers, **options)


def test_k_of_n_agree_and_dissent_is_kept():
    honest = _chain_of_blocks(10)
    forged = _chain_of_blocks(10, salt=b"fork")
    a, b, c = FakeProvider("a", honest), FakeProvider("b", honest), FakeProvider("c", forged)
    a.after = b.after = c.answered  # the dissent comes first (its answer is then kept, unless k agreed
    # in the instant between its answer and its future's completion: then it was not waited for)
    header = _quorum([a, b, c], k=2).current()
    assert (header.number, header.hash_hex) == (9, honest[9]["hash"])
    assert header.vouched_by == ("a", "b") and header.dissent["c"] in (forged[9]["hash"], _headers.NOT_WAITED_FOR)
    # A cold check with confirmations 0 asks each provider once: the heads are the header.
    assert (a.requests, b.requests, c.requests) == (1, 1, 1)


def test_no_quorum_is_disagreement_never_a_pick():
    a, b, c = (FakeProvider(n, _chain_of_blocks(10, salt=n.encode())) for n in "abc")
    with pytest.raises(HeadersDisagree) as caught:
        _quorum([a, b, c], k=2).current()
    assert set(caught.value.answers) == {"a", "b", "c"} and caught.value.block == 9
    # k = n: one dissenter is enough to refuse.
    honest = _chain_of_blocks(10)
    with pytest.raises(HeadersDisagree):
        _quorum(
            [FakeProvider("a", honest), FakeProvider("b", honest), FakeProvider("c", _chain_of_blocks(10, salt=b"x"))],
            k=3,
        ).current()


def test_two_quorums_when_k_is_a_minority_are_disagreement():
    honest, other = _chain_of_blocks(10), _chain_of_blocks(10, salt=b"x")
    providers = [
        FakeProvider("a", honest),
        FakeProvider("b", honest),
        FakeProvider("c", other),
        FakeProvider("d", other),
    ]
    with pytest.raises(HeadersDisagree):
        _quorum(providers, k=2).current()


def test_an_invalid_header_does_not_vote():
    honest = _chain_of_blocks(10)
    liar = FakeProvider("c", copy.deepcopy(honest))
    liar.blocks[9]["stateRoot"] = "0x" + "ee" * 32  # a forged state root under the honest hash
    a, b = FakeProvider("a", honest), FakeProvider("b", honest)
    a.after = b.after = liar.answered
    header = _quorum([a, b, liar], k=2).current()
    assert header.vouched_by == ("a", "b")
    assert "invalid header" in header.dissent["c"] or header.dissent["c"] == _headers.NOT_WAITED_FOR
    with pytest.raises(ProofInvalid) as forged:
        _headers._verify(liar.blocks[9], "c", 9)
    assert forged.value.served == "header"
    with pytest.raises(ProofInvalid, match="the header"):  # alone, a trusted endpoint's forged header is refused too
        TrustedHeaders(liar, clock=lambda: 1_010).current()


def test_providers_down_below_k_are_unavailable_and_named():
    honest = _chain_of_blocks(10)
    a, b, c = FakeProvider("a", honest), FakeProvider("b", honest), FakeProvider("c", honest)
    b.down = c.down = True
    with pytest.raises(ProviderUnavailable) as caught:
        _quorum([a, b, c], k=2).current()
    assert set(caught.value.sources) == {"b", "c"} and caught.value.needed == 2
    c.down = False
    b.answered = threading.Event()
    a.after = c.after = b.answered
    assert _quorum([a, b, c], k=2).current().dissent["b"] in ("down (down)", _headers.NOT_WAITED_FOR)


def test_a_silent_provider_is_not_waited_for_once_k_agree():
    honest = _chain_of_blocks(10)
    a, b, silent = FakeProvider("a", honest), FakeProvider("b", honest), FakeProvider("c", honest)
    silent.after = threading.Event()  # never set while the checks run: it never answers
    source = _quorum([a, b, silent], k=2)
    try:
        for check in range(1, 4):  # cold, then warm
            header = source.current()
            assert header.vouched_by == ("a", "b") and header.dissent == {"c": _headers.NOT_WAITED_FOR}
            assert silent.requests <= check, "asked once a check at most: a cold check asks for the head only"
        assert (a.requests, b.requests) == (3, 3)
    finally:
        silent.after.set()
        source.close()


def test_control_gathering_every_head_as_the_source_did_waits_for_the_silent_one():
    honest = _chain_of_blocks(10)
    providers = [FakeProvider("a", honest), FakeProvider("b", honest), FakeProvider("c", honest)]
    providers[2].after = threading.Event()
    with ThreadPoolExecutor(3) as pool:
        heads = pool.map(lambda p: p.request("eth_getBlockByNumber", ["latest", False]), providers)
        gathered = pool.submit(list, heads)
        assert wait([gathered], timeout=1).not_done, "two heads agree, yet the gather still waits"
        providers[2].after.set()
        assert len(gathered.result(timeout=30)) == 3


def test_with_k_a_minority_the_heads_still_out_are_waited_for_when_they_could_choose_a_newer_block():
    """k = 2 of 4: two lagging heads agreeing first settle nothing, the other two could be k above them."""
    honest = _chain_of_blocks(30)
    a, b = FakeProvider("a", honest, head=10), FakeProvider("b", honest, head=10)
    c, d = FakeProvider("c", honest, head=29), FakeProvider("d", honest, head=29)
    c.after = d.after = b.answered
    header = _quorum([a, b, c, d], k=2, max_age=10_000, clock=lambda: 1_029).current()
    assert header.number == 29 and set(header.vouched_by) == {"c", "d"}


def test_a_lagging_head_answering_first_does_not_choose_the_block():
    """The liar serves the past and answers first; one honest head is no quorum with it: the other
    honest head is waited for, and the block is the one the two honest heads agree on."""
    honest = _chain_of_blocks(10)
    liar, a, b = FakeProvider("l", honest, head=5), FakeProvider("a", honest), FakeProvider("b", honest)
    a.after = liar.answered
    b.after = a.answered
    header = _quorum([liar, a, b], k=2, max_age=10_000).current()
    assert header.number == 9 and header.vouched_by == ("a", "b")


def test_the_chosen_block_is_the_kth_highest_head_less_confirmations():
    honest = _chain_of_blocks(30)
    a, b, c = FakeProvider("a", honest, head=29), FakeProvider("b", honest, head=20), FakeProvider("c", honest, head=25)
    assert _quorum([a, b, c], k=2, confirmations=3, clock=lambda: 1_030).current().number == 22
    assert _quorum([a, b, c], k=3, confirmations=0, clock=lambda: 1_030).current().number == 20
    assert _quorum([a, b, c], k=1, confirmations=0, clock=lambda: 1_030).current().number == 29


def test_a_withheld_head_is_stale_by_the_clock():
    """Two of three providers serve block 10 as their latest while the chain is at 29: the k-th head
    is 10, whose time is 19 s behind the verifier's clock; max_age 15 refuses it."""
    honest = _chain_of_blocks(30)
    a, b, c = FakeProvider("a", honest, head=29), FakeProvider("b", honest, head=10), FakeProvider("c", honest, head=10)
    with pytest.raises(HeaderStale) as caught:
        _quorum([a, b, c], k=2, max_age=15, clock=lambda: 1_029).current()
    assert caught.value.block == 10 and caught.value.age == 19
    # The honest head, if it came before the two lagging ones settled the block (it could not change it).
    assert "block 29" in caught.value.heads["a"] or caught.value.heads["a"] == _headers.NOT_WAITED_FOR
    assert _quorum([a, b, c], k=2, max_age=20, clock=lambda: 1_029).current().number == 10


def _chain_of_headers(count: int) -> list[dict]:
    """``count`` headers that link by parent hash, each hashing to its ``hash`` (a mainnet header's fields)."""
    blocks, parent = [], JSON_VECTORS[23094898]["parentHash"]
    for i in range(count):
        block = dict(JSON_VECTORS[23094898], number=hex(23094898 + i), parentHash=parent)
        block["hash"] = parent = "0x" + header_hash(block).hex()
        blocks.append(block)
    return blocks


def _anchor(block: dict) -> _headers.VerifiedHeader:
    return _headers.VerifiedHeader(
        number=int(block["number"], 16),
        hash=bytes.fromhex(block["hash"][2:]),
        parent_hash=bytes.fromhex(block["parentHash"][2:]),
        state_root=bytes.fromhex(block["stateRoot"][2:]),
        receipts_root=bytes.fromhex(block["receiptsRoot"][2:]),
        timestamp=int(block["timestamp"], 16),
    )


def test_headers_linked_to_a_vouched_one_are_trusted_and_a_forged_bloom_is_refused():
    """A follower with a header source checks a page's blooms in headers linked by parent hashes to the one
    header the source vouches for: each must hash to its hash (ProofInvalid, served "header", naming the provider), and
    each hash must be the next one's parentHash (BlockNotVouched)."""
    blocks = _chain_of_headers(4)
    anchor = _anchor(blocks[-1])
    assert _headers.linked(blocks, anchor, provider="p") == blocks
    empty_bloom = dict(blocks[1], logsBloom="0x" + "00" * 256)
    with pytest.raises(ProofInvalid) as invalid:  # the fields no longer hash to the hash it claims
        _headers.linked([blocks[0], empty_bloom, *blocks[2:]], anchor, provider="p")
    assert (invalid.value.served, invalid.value.source, invalid.value.block) == ("header", "p", 23094899)
    empty_bloom["hash"] = "0x" + header_hash(empty_bloom).hex()  # a self-consistent forgery: off the chain
    with pytest.raises(BlockNotVouched) as off:
        _headers.linked([blocks[0], empty_bloom, *blocks[2:]], anchor, provider="p")
    assert off.value.block == 23094899 and off.value.vouched_hash == blocks[1]["hash"]
    with pytest.raises(ProofInvalid, match="it answered block"):  # headers of other numbers than asked
        _headers.linked(blocks[:3], anchor, provider="p")


def test_one_verified_header_per_number_serves_every_check():
    honest = _chain_of_blocks(10)
    a, b = FakeProvider("a", honest, head=9), FakeProvider("b", honest, head=9)
    source = _quorum([a, b], k=2, confirmations=2)
    first = source.current()
    asked = a.requests + b.requests
    assert source.current() is first  # heads asked again (2 requests), the header not
    assert a.requests + b.requests == asked + 2
    assert source.at(7) is first


def test_a_claimed_block_hash_that_is_no_hash_is_not_vouched_for_typed():
    """What a provider's log or receipt claims a block's hash is may be anything: a hash that is not 32
    bytes of hex is BlockNotVouched (typed, naming the block), never the untyped ValueError of bytes.fromhex;
    control: the block's real hash, in either spelling, is vouched for."""
    honest = _chain_of_blocks(10)
    source = _quorum([FakeProvider("a", honest, head=9), FakeProvider("b", honest, head=9)], k=2, confirmations=2)
    real = source.at(5)
    for claimed in ("0xzz" + "00" * 31, "0x1234", "0x" + "00" * 33, "", 5, b"\x00" * 31, None):
        with pytest.raises(BlockNotVouched, match="not 32 bytes of hex") as refused:
            source.vouch(5, claimed)  # type: ignore[arg-type]
        assert refused.value.block == 5
    assert source.vouch(5, real.hash_hex) is real and source.vouch(5, real.hash) is real


def test_constructor_refuses_nonsense():
    blocks = _chain_of_blocks(2)
    for bad in ({"k": 0}, {"k": 4}, {"k": True}, {"confirmations": -1}, {"confirmations": "safe"}, {"max_age": 0}):
        with pytest.raises(InvalidInput):
            QuorumHeaders([FakeProvider(n, blocks) for n in "abc"], **bad)
    with pytest.raises(InvalidInput):
        QuorumHeaders("http://127.0.0.1:1")
    for twice in (
        ["http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:1/"],
        [FakeProvider("a", blocks)] * 2,
    ):
        with pytest.raises(InvalidInput, match="one provider is one vote"):
            QuorumHeaders(twice)
    with pytest.raises(InvalidInput):
        TrustedHeaders(FakeProvider("a", blocks), k=1)


def _reader_over_recorded_anvil(**answer_changes):
    block = dict(ANVIL["block"].items())
    provider = FakeProvider("p", [None] * int(block["number"], 16) + [block])
    provider.proofs = copy.deepcopy(ANVIL["held"])
    for key, value in answer_changes.items():
        provider.proofs[key] = value
    now = int(block["timestamp"], 16)
    headers = TrustedHeaders(FakeProvider("h", provider.blocks), clock=lambda: now)
    return ProvenReader(ANVIL["registry"], headers=headers, provider=provider), provider


def test_the_reader_proves_and_judges_the_recorded_lease():
    reader, _ = _reader_over_recorded_anvil()
    info = reader.check("reports/daily", ANVIL["token"])
    assert (info.holder, info.token, info.status) == (ANVIL["holder"], ANVIL["token"], LeaseStatus.LIVE)
    assert reader.lease_at(RESOURCE_ID) == LeaseInfo(**{**info.__dict__, "resource": None})


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            lambda a: a["storageProof"][0].update(value=hex(int(a["storageProof"][0]["value"], 16) + (1 << 208))),
            "value",
        ),
        (lambda a: a.update(storageHash="0x" + "00" * 32), "storageHash"),
        (lambda a: a.update(codeHash="0x" + keccak256(b"other code").hex()), "codeHash"),
        (lambda a: a.update(balance="0x1"), "balance"),
        (lambda a: a["storageProof"][0].update(key="0x" + lease_slot(keccak256(b"x")).hex()), "another slot"),
        (lambda a: a["storageProof"].append(a["storageProof"][0]), "exactly"),
        (lambda a: a.update(accountProof=a["accountProof"][:-1]), "path goes on"),
        (lambda a: a["storageProof"][0].update(proof=a["storageProof"][0]["proof"][:-1] + ["0x80"]), "hash"),
        (lambda a: a.update(accountProof="0x00"), "list of nodes"),
    ],
)
def test_a_claim_beside_the_proof_that_the_proof_does_not_prove_is_refused(change, why):
    reader, provider = _reader_over_recorded_anvil()
    change(provider.proofs)
    with pytest.raises(ProofInvalid) as caught:
        reader.check("reports/daily", ANVIL["token"])
    assert caught.value.source == "p" and caught.value.block == int(ANVIL["block"]["number"], 16)
    assert why in caught.value.reason


def test_a_proof_of_no_contract_is_contract_not_found():
    reader, provider = _reader_over_recorded_anvil()
    reader._address = bytes.fromhex("42" * 20)
    reader.address = _proofs.checksum_address(reader._address)
    provider.proofs = copy.deepcopy(ANVIL["no_account"])
    with pytest.raises(ContractNotFound):
        reader.check("reports/daily", 1)


def test_a_provider_without_eth_getproof_is_proofs_not_served():
    reader, provider = _reader_over_recorded_anvil()
    provider.proofs = None
    with pytest.raises(ProofsNotServed) as caught:
        reader.check("reports/daily", 1)
    assert caught.value.source == "p"


def test_bad_arguments_are_typed_and_ask_nothing():
    reader, provider = _reader_over_recorded_anvil()
    for resource, token in (("", 1), ("x" * 129, 1), (b"short", 1), ("r", 0), ("r", -1), ("r", True), (7, 1)):
        with pytest.raises(InvalidInput):
            reader.check(resource, token)
    assert provider.requests == 0
    for address in ("0x12", "0x" + "zz" * 20, ANVIL["registry"].lower().replace("a", "A", 1)):
        with pytest.raises(InvalidInput):
            ProvenReader(address, headers=reader.headers, provider=provider)


def test_the_proof_core_imports_no_eth_package():
    """The CLI's hot path will import these: no web3, eth-utils, eth-abi, eth-account or rlp.
    (A URL endpoint loads chainfence._node.rpc, the SDK's lean transport, when it is built.)"""
    code = (
        "import sys\n"
        "import chainfence.proofs, chainfence._node.headers, chainfence._node.proofs, chainfence._node.rlp, chainfence._node.jsonrpc\n"
        "heavy = {'web3', 'eth_utils', 'eth_abi', 'eth_account', 'rlp', 'eth_keys', 'hexbytes'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_finalized_asks_for_the_finalized_tag_and_takes_the_kth_highest():
    honest = _chain_of_blocks(30)
    a, b, c = FakeProvider("a", honest, head=20), FakeProvider("b", honest, head=18), FakeProvider("c", honest, head=25)
    header = _quorum([a, b, c], k=2, confirmations="finalized", clock=lambda: 1_021).current()
    assert header.number == 20
    assert a.calls[0] == ("eth_getBlockByNumber", ["finalized", False])
    assert QuorumHeaders([a, b, c], confirmations="finalized").max_age == 1800.0  # finalized is minutes behind


def test_a_follower_refuses_blocks_the_source_does_not_vouch_for():
    from chainfence.errors import BlockNotVouched

    honest, fork = _chain_of_blocks(12), _chain_of_blocks(12, salt=b"fork")
    source = _quorum([FakeProvider("a", honest, head=11), FakeProvider("b", honest, head=11)], k=2, confirmations=2)
    head = source.current()
    assert head.number == 9
    assert source.vouch(7, honest[7]["hash"], head=head).number == 7  # a log of the vouched chain
    with pytest.raises(BlockNotVouched) as other:  # a log from another fork at the same height
        source.vouch(7, fork[7]["hash"], head=head)
    assert other.value.vouched_hash == honest[7]["hash"]
    with pytest.raises(BlockNotVouched) as beyond:  # a log from a block not yet deep enough
        source.vouch(10, honest[10]["hash"], head=head)
    assert beyond.value.vouched_hash is None and beyond.value.head == 9


def test_a_reorg_at_the_head_is_verified_again_not_served_from_the_cache():
    before, after = _chain_of_blocks(10), _chain_of_blocks(10, salt=b"reorg")
    a, b = FakeProvider("a", before), FakeProvider("b", before)
    source = _quorum([a, b], k=2)
    assert source.current().hash_hex == before[9]["hash"]
    a.blocks = b.blocks = after  # both providers moved to the other branch at the same height
    assert source.current().hash_hex == after[9]["hash"]


@pytest.mark.parametrize("name", ["batch\u00bbitem-7", "w\u00bbx", "\u00fcber\u00bb" + "i" * 120, "reports/daily"])
def test_a_claimed_items_name_is_read_at_the_items_slot(name):
    """A claimed work item's id is keccak(abi.encode(workset, item)), not the hash of its name: the
    proven mode reads that item's slot (computed without eth-abi), as the SDK's views do."""
    from chainfence._sdk import names as _names
    from chainfence.proofs import _resource

    assert _resource(name) == (name, _names.resource_id(name))
