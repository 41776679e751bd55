"""What a lying provider can build: forged leases, proofs and headers that are consistent with each other.

The strongest lie a provider can tell the proven mode is a whole forged
world: a lease slot with the value it wants, the storage trie re-hashed up
to a new storage root, the account re-hashed up to a new state root, and a
header carrying that state root whose fields hash to a new block hash. All
of it verifies — against the forged header. Only the header's hash, checked
against what independent providers (or a trusted endpoint) say, tells it
apart: the tests show exactly that.
"""

from __future__ import annotations

import copy

from chainfence._node.headers import header_hash
from chainfence._node.proofs import decode_lease, lease_slot
from chainfence._node.rlp import decode, encode, keccak256

#: FencingRegistry.leaseOf(bytes32)'s selector.
LEASE_OF = keccak256(b"leaseOf(bytes32)")[:4]


def packed(holder: str, token: int, expires_at: int) -> int:
    return int(holder, 16) | (expires_at << 160) | (token << 208)


def lease_of_result(holder: str, token: int, expires_at: int, status: int = 1) -> str:
    """The ABI-encoded answer of leaseOf: (holder, token, expiresAt, status)."""
    words = [int(holder, 16), token, expires_at, status]
    return "0x" + "".join(word.to_bytes(32, "big").hex() for word in words)


def _rehash_path(nodes: list[bytes], leaf_value: bytes, renamed: dict | None = None) -> tuple[list[bytes], bytes]:
    """``nodes`` (root first, ending in a leaf) with the leaf's value replaced and every parent's
    reference updated: (the new nodes, the new root). ``renamed`` collects old node -> new node, for
    the proofs of other keys that share nodes with this path (one eth_getProof of several slots)."""
    new = list(nodes)
    leaf = decode(new[-1])
    assert isinstance(leaf, list) and len(leaf) == 2, "the path ends in a leaf"
    old_hash = keccak256(new[-1])
    new[-1] = encode([leaf[0], leaf_value])
    for i in range(len(new) - 2, -1, -1):
        node = decode(new[i])
        replaced = [keccak256(new[i + 1]) if child == old_hash else child for child in node]
        assert replaced != node, "the parent references its child by hash"
        old_hash = keccak256(new[i])
        new[i] = encode(replaced)
    if renamed is not None:
        renamed.update((old, changed) for old, changed in zip(nodes, new) if old != changed)
    return new, keccak256(new[0])


def _nodes(hexes: list[str]) -> list[bytes]:
    return [bytes.fromhex(h[2:]) for h in hexes]


def _hexes(nodes: list[bytes]) -> list[str]:
    return ["0x" + n.hex() for n in nodes]


def forge_proof(answer: dict, value: int, *, up_to: str = "state", slot: bytes | None = None) -> tuple[dict, bytes]:
    """An eth_getProof answer whose slot reads ``value``: ``up_to="value"`` changes only the stated
    value; ``"leaf"`` rewrites the storage leaf too (the hashes above it no longer match);
    ``"storage"`` re-hashes the storage path to a new storage root (the account no longer matches);
    ``"state"`` re-hashes the account path too, to a new state root. Returns (answer, state root)."""
    forged = copy.deepcopy(answer)
    entries = forged["storageProof"]
    entry = entries[0]
    if slot is not None:  # several slots asked for at once: forge the one, keep the others consistent
        entry = next(e for e in entries if int(e["key"], 16) == int.from_bytes(slot, "big"))
    others = [e for e in entries if e is not entry]
    entry["value"] = hex(value)
    storage_nodes = _nodes(entry["proof"])
    if up_to == "value":
        return forged, b""
    if up_to == "leaf":
        leaf = decode(storage_nodes[-1])
        storage_nodes[-1] = encode([leaf[0], encode(value)])
        entry["proof"] = _hexes(storage_nodes)
        return forged, b""
    renamed: dict[bytes, bytes] = {}
    storage_nodes, storage_root = _rehash_path(storage_nodes, encode(value), renamed)
    entry["proof"] = _hexes(storage_nodes)
    for other in others:  # nodes shared with the forged path are the forged path's now
        other["proof"] = _hexes([renamed.get(node, node) for node in _nodes(other["proof"])])
    forged["storageHash"] = "0x" + storage_root.hex()
    if up_to == "storage":
        return forged, b""
    account_nodes = _nodes(forged["accountProof"])
    account = decode(decode(account_nodes[-1])[1])
    account[2] = storage_root
    account_nodes, state_root = _rehash_path(account_nodes, encode(account))
    forged["accountProof"] = _hexes(account_nodes)
    return forged, state_root


def forge_header(block: dict, state_root: bytes) -> dict:
    """``block`` carrying ``state_root``, with the hash its fields now hash to."""
    forged = dict(block)
    forged["stateRoot"] = "0x" + state_root.hex()
    forged["hash"] = "0x" + header_hash(forged).hex()
    return forged


class ForgedWorld:
    """Everything a liar serves to make ``resource`` read as held by ``holder`` with ``token`` until
    ``expires_at``: eth_call (leaseOf), eth_getStorageAt, eth_getProof and (with ``headers=True``)
    a forged header at every block from the one asked for on, consistent with the forged proof."""

    def __init__(self, registry_address: str, resource_id: bytes, *, holder: str, token: int, expires_at: int):
        self.registry = registry_address
        self.slot = lease_slot(resource_id)
        self.value = packed(holder, token, expires_at)
        self.holder, self.token, self.expires_at = holder, token, expires_at
        self.forged_headers: dict[str, dict] = {}

    def install(self, liar, *, headers: bool = False, proofs: str = "state") -> None:
        lease_result = lease_of_result(self.holder, self.token, self.expires_at)

        def call(params, forward):
            tx = params[0]
            if str(tx.get("to", "")).lower() == self.registry.lower() and str(
                tx.get("data", tx.get("input", ""))
            ).startswith("0x" + LEASE_OF.hex()):
                return lease_result
            return forward()

        def storage_at(params, forward):
            if str(params[0]).lower() == self.registry.lower() and int(params[1], 16) == int.from_bytes(
                self.slot, "big"
            ):
                return "0x" + self.value.to_bytes(32, "big").hex()
            return forward()

        def get_proof(params, forward):
            answer = forward()
            asked = [int(key, 16) for key in params[1]]
            if int.from_bytes(self.slot, "big") not in asked:  # not the lease (a reader's probe, another slot)
                return answer
            forged, state_root = forge_proof(answer, self.value, up_to=proofs, slot=self.slot)
            if headers and proofs == "state":
                block = liar.node("eth_getBlockByNumber", [params[2], False])
                self.forged_headers[block["number"]] = forge_header(block, state_root)
            return forged

        def block(params, forward):
            answer = forward()
            if not headers or answer is None or params[0] == "pending":
                return answer
            number = answer["number"]
            if number not in self.forged_headers:
                # Build the forged world for this block: prove the slot there, then forge the header.
                real = liar.node("eth_getProof", [self.registry, ["0x" + self.slot.hex()], number])
                if int(real["storageProof"][0]["value"], 16) == 0:
                    return answer  # before the lease existed (the deployment's block): nothing to forge there
                _, state_root = forge_proof(real, self.value, up_to="state", slot=self.slot)
                self.forged_headers[number] = forge_header(answer, state_root)
            return {**answer, **self.forged_headers[number]}

        liar.on("eth_call", call)
        liar.on("eth_getStorageAt", storage_at)
        liar.on("eth_getProof", get_proof)
        if headers:
            liar.on("eth_getBlockByNumber", block)


def read_slot_naively(rpc_request, registry: str, resource_id: bytes):
    """The control a storage-reading verifier would be: eth_getStorageAt, decoded, believed."""
    raw = rpc_request("eth_getStorageAt", [registry, "0x" + lease_slot(resource_id).hex(), "latest"])
    return decode_lease(int(raw, 16))
