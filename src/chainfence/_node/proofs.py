"""Merkle-Patricia proofs (EIP-1186 ``eth_getProof``) of the registry's lease slot, verified here.

What a provider's proof is checked against is a state root the caller
trusts (a header verified by :mod:`chainfence._node.headers`); nothing the
provider says is believed without its proof:

1. the account proof, from the state root along ``keccak(address)``, ends in
   the registry's account ``[nonce, balance, storageRoot, codeHash]``;
2. the storage proof, from that account's storage root along
   ``keccak(slot)``, ends in the slot's value (or proves the slot empty);
3. the slot is the resource's lease, ``keccak(resource_id . uint256(0))``
   (``_leases`` is the registry's first state variable), and its packed
   bits decode as ``contracts/FencingRegistry.sol`` lays them out::

       bits   0..159  holder     bits 160..199  expiresAt (0 once released)
       bit  200 claimed   201 done   202 revoked   203 recorded
       bits 208..255  token

4. the lease is judged at a chain time exactly as strict mode judges it
   (:func:`judge` is ``Registry._raise_unless_current``; a unit test keeps
   them the same).

Every check that fails raises :class:`ProofMismatch` with the reason; the
reader (:mod:`chainfence.proofs`) turns it into
:class:`~chainfence.errors.ProofInvalid` naming the provider and block. No
web3, eth-utils, eth-abi or rlp: only :mod:`chainfence._node.rlp`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .rlp import EMPTY_TRIE_ROOT, RLPError, decode, decode_int, encode, keccak256

__all__ = [
    "EMPTY_CODE_HASH",
    "Account",
    "ProofMismatch",
    "checksum_address",
    "decode_lease",
    "lease_slot",
    "verify_account",
    "verify_proof",
    "verify_storage",
]

#: keccak256 of empty code: an account with this code hash is not a contract.
EMPTY_CODE_HASH = keccak256(b"")

#: The storage slot of the registry's ``_leases`` mapping (its first state variable).
LEASES_SLOT = 0

_HOLDER_MASK = (1 << 160) - 1
_EXPIRES_AT_SHIFT = 160
_UINT40_MASK = (1 << 40) - 1
_CLAIMED = 1 << 200
_DONE = 1 << 201
_REVOKED = 1 << 202
_RECORDED = 1 << 203
_TOKEN_SHIFT = 208


class ProofMismatch(ValueError):
    """A proof that does not prove what it claims (the reason is the message)."""


# -- the trie -----------------------------------------------------------------


def _nibbles(key: bytes) -> list[int]:
    out = []
    for byte in key:
        out.append(byte >> 4)
        out.append(byte & 0x0F)
    return out


def _compact(path: bytes) -> tuple[list[int], bool]:
    """A leaf's or extension's hex-prefix path: (nibbles, is_leaf)."""
    if not path:
        raise ProofMismatch("a node with an empty path")
    flag = path[0] >> 4
    if flag > 3:
        raise ProofMismatch(f"a path with an unknown hex-prefix flag {flag}")
    nibbles = _nibbles(path)
    if flag & 1:
        nibbles = nibbles[1:]  # odd length: the first nibble is the flag's byte's low half
    else:
        if path[0] & 0x0F:
            raise ProofMismatch("an even hex-prefix path with a nonzero padding nibble")
        nibbles = nibbles[2:]
    return nibbles, bool(flag & 2)


def verify_proof(root: bytes, key: bytes, proof: list[bytes]) -> bytes | None:
    """The value stored under ``key`` (already hashed: ``keccak(address)`` or ``keccak(slot)``) in the
    trie whose root hash is ``root``, as ``proof`` (RLP nodes, root first) proves it; None if the
    proof proves the key absent. Raises :class:`ProofMismatch` for anything else: a node that does
    not hash to its parent's reference, a path that leads nowhere the proof shows, nodes left over.
    """
    if len(root) != 32:
        raise ProofMismatch("a root is 32 bytes")
    if not proof:
        if root == EMPTY_TRIE_ROOT:
            return None
        raise ProofMismatch("an empty proof for a trie that is not empty")
    path = _nibbles(key)
    expected: bytes | list[Any] = root  # a hash to check the next proof node against, or an inline node
    index = 0
    depth = 0
    while True:
        if isinstance(expected, bytes):
            if index >= len(proof):
                raise ProofMismatch(f"the proof ends at node {index}; the path goes on")
            raw = proof[index]
            index += 1
            if keccak256(raw) != expected:
                raise ProofMismatch(f"node {index - 1} does not hash to the reference its parent holds")
            if index == 1 and root == EMPTY_TRIE_ROOT:
                if raw != encode(b""):
                    raise ProofMismatch("the empty trie's root node is not empty")
                return _finish(None, index, proof)
            try:
                node = decode(raw)
            except RLPError as exc:
                raise ProofMismatch(f"node {index - 1} is not canonical RLP: {exc}") from None
        else:
            node = expected  # an embedded node: its parent holds it whole (its RLP is under 32 bytes)
        if not isinstance(node, list):
            raise ProofMismatch("a trie node is a list")
        if len(node) == 17:
            if depth == len(path):
                value = node[16]
                if not isinstance(value, bytes):
                    raise ProofMismatch("a branch's value is a string")
                return _finish(value or None, index, proof)
            child = node[path[depth]]
            depth += 1
            if child == b"":
                return _finish(None, index, proof)
            expected = _reference(child)
        elif len(node) == 2:
            if not isinstance(node[0], bytes):
                raise ProofMismatch("a leaf's or extension's path is a string")
            nibbles, leaf = _compact(node[0])
            rest = path[depth:]
            if leaf:
                if rest == nibbles:
                    if not isinstance(node[1], bytes) or not node[1]:
                        raise ProofMismatch("a leaf's value is a non-empty string")
                    return _finish(node[1], index, proof)
                return _finish(None, index, proof)  # another key's leaf: ours is absent
            if not nibbles:
                raise ProofMismatch("an extension with an empty path")
            if rest[: len(nibbles)] != nibbles:
                return _finish(None, index, proof)  # the extension leads elsewhere: ours is absent
            depth += len(nibbles)
            expected = _reference(node[1])
            if depth > len(path):
                raise ProofMismatch("a path longer than the key")
        else:
            raise ProofMismatch(f"a trie node has 2 or 17 items, not {len(node)}")


def _reference(child: Any) -> bytes | list[Any]:
    if isinstance(child, list):
        if len(encode(child)) >= 32:
            raise ProofMismatch("an embedded node of 32 bytes or more (it must be referenced by hash)")
        return child
    if len(child) != 32:
        raise ProofMismatch(f"a child reference of {len(child)} bytes (a hash is 32)")
    return bytes(child)


def _finish(value: bytes | None, used: int, proof: list[bytes]) -> bytes | None:
    if used != len(proof):
        raise ProofMismatch(f"{len(proof) - used} proof nodes after the end of the path")
    return value


# -- accounts and slots ---------------------------------------------------------


@dataclass(frozen=True)
class Account:
    nonce: int
    balance: int
    storage_root: bytes
    code_hash: bytes


def verify_account(state_root: bytes, address: bytes, proof: list[bytes]) -> Account | None:
    """The account at ``address`` (20 bytes) in the state ``state_root`` commits to; None if absent."""
    if len(address) != 20:
        raise ProofMismatch("an address is 20 bytes")
    value = verify_proof(state_root, keccak256(address), proof)
    if value is None:
        return None
    try:
        fields = decode(value)
        if not isinstance(fields, list) or len(fields) != 4:
            raise ProofMismatch("an account is [nonce, balance, storageRoot, codeHash]")
        nonce, balance = decode_int(fields[0]), decode_int(fields[1])
    except RLPError as exc:
        raise ProofMismatch(f"the account does not decode: {exc}") from None
    storage_root, code_hash = fields[2], fields[3]
    if not isinstance(storage_root, bytes) or len(storage_root) != 32:
        raise ProofMismatch("an account's storage root is 32 bytes")
    if not isinstance(code_hash, bytes) or len(code_hash) != 32:
        raise ProofMismatch("an account's code hash is 32 bytes")
    return Account(nonce, balance, storage_root, code_hash)


def verify_storage(storage_root: bytes, slot: bytes, proof: list[bytes]) -> int:
    """The value of storage ``slot`` (32 bytes) under ``storage_root`` (0 if the proof shows it empty)."""
    if len(slot) != 32:
        raise ProofMismatch("a storage slot is 32 bytes")
    value = verify_proof(storage_root, keccak256(slot), proof)
    if value is None:
        return 0
    try:
        item = decode(value)
        number = decode_int(item)
    except RLPError as exc:
        raise ProofMismatch(f"the slot's value does not decode: {exc}") from None
    if number == 0 or number >= 1 << 256:
        raise ProofMismatch("a stored slot holds a nonzero uint256 (zero slots are not stored)")
    return number


def lease_slot(resource_id: bytes) -> bytes:
    """The storage slot of ``_leases[resource_id]``: ``keccak256(resource_id . uint256(0))``."""
    if len(resource_id) != 32:
        raise ValueError("a resource id is 32 bytes")
    return keccak256(bytes(resource_id) + LEASES_SLOT.to_bytes(32, "big"))


# -- the lease -------------------------------------------------------------------


def checksum_address(raw: bytes) -> str:
    """EIP-55 checksummed hex of a 20-byte address."""
    hexed = raw.hex()
    digest = keccak256(hexed.encode("ascii")).hex()
    return "0x" + "".join(c.upper() if int(d, 16) >= 8 else c for c, d in zip(hexed, digest))


@dataclass(frozen=True)
class PackedLease:
    holder: str
    expires_at: int
    claimed: bool
    done: bool
    revoked: bool
    recorded: bool
    token: int


def decode_lease(packed: int) -> PackedLease:
    """The fields of a packed lease slot (see the module docstring)."""
    return PackedLease(
        holder=checksum_address((packed & _HOLDER_MASK).to_bytes(20, "big")),
        expires_at=(packed >> _EXPIRES_AT_SHIFT) & _UINT40_MASK,
        claimed=bool(packed & _CLAIMED),
        done=bool(packed & _DONE),
        revoked=bool(packed & _REVOKED),
        recorded=bool(packed & _RECORDED),
        token=packed >> _TOKEN_SHIFT,
    )
