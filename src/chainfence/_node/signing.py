"""Signing the sender's transactions: the same bytes eth-account makes, ten times faster.

``LocalAccount.sign_transaction`` validates and converts every field through
several layers before it signs (about 1 ms a transaction with coincurve on
an idle core, more than anvil takes to mine one: docs/explanation/design.md). The SDK only ever signs two
shapes, both built by :mod:`chainfence._node.sending` from checked values: an
EIP-1559 transaction (``maxFeePerGas``) or a legacy EIP-155 one
(``gasPrice``), to a contract or to itself (a cancellation), or a creation.
:func:`sign` encodes those with :func:`chainfence._node.rlp.encode` and signs the hash with the
account's key through libsecp256k1 (coincurve, the backend eth-keys uses too;
deterministic RFC 6979 nonces, low ``s``): the raw bytes and hash are identical to eth-account's
(``tests/unit/test_signing.py`` compares them). Any other shape goes to
eth-account.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from .rlp import encode, encode_list, keccak256

__all__ = ["Signed", "sign"]

_EIP1559_FIELDS = frozenset(
    {"from", "to", "data", "value", "gas", "nonce", "chainId", "maxFeePerGas", "maxPriorityFeePerGas"}
)
_LEGACY_FIELDS = frozenset({"from", "to", "data", "value", "gas", "nonce", "chainId", "gasPrice"})


class Signed(NamedTuple):
    raw_transaction: bytes
    hash: str  # 0x-hex


@functools.lru_cache(maxsize=64)
def _signer(key: bytes) -> Callable[[bytes], tuple[int, int, int]]:
    """A function signing a 32-byte digest with ``key``: (recovery id, r, s)."""
    import coincurve  # by the first signature: a command that only reads never loads it (docs/explanation/design.md)

    private = coincurve.PrivateKey(key)

    def sign_hash(digest: bytes) -> tuple[int, int, int]:
        # 65 bytes: r, s (libsecp256k1 makes s low), recovery id. RFC 6979 nonces: deterministic.
        signature = private.sign_recoverable(digest, hasher=None)
        return signature[64], int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:64], "big")

    return sign_hash


def _to(value: Any) -> bytes:
    if value is None or value == b"":
        return b""  # contract creation
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return bytes.fromhex(str(value)[2:])


def _data(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    text = str(value or "0x")
    return bytes.fromhex(text[2:] if text.startswith("0x") else text)


def _plain_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def sign(account: Any, tx: dict[str, Any]) -> Signed:
    """``tx`` signed by ``account`` (a ``LocalAccount``): raw bytes and 0x-hash, as eth-account signs them."""
    keys_ = set(tx)
    numbers = [tx.get(k) for k in ("value", "gas", "nonce", "chainId")]
    sender = tx.get("from")
    lean = (
        hasattr(account, "key")
        and (sender is None or str(sender).lower() == str(account.address).lower())
        and all(_plain_int(n) for n in numbers)
    )
    if lean and keys_ <= _EIP1559_FIELDS and "maxFeePerGas" in tx and "maxPriorityFeePerGas" in tx:
        fields = [
            tx["chainId"],
            tx["nonce"],
            tx["maxPriorityFeePerGas"],
            tx["maxFeePerGas"],
            tx["gas"],
            _to(tx.get("to")),
            tx["value"],
            _data(tx.get("data")),
        ]
        if all(_plain_int(f) for f in (fields[2], fields[3])):
            # The fields are encoded once: the signed list is the unsigned one (its access list empty)
            # followed by v, r and s.
            payload = b"".join([encode(field) for field in fields]) + encode([])
            v, r, s = _signer(bytes(account.key))(keccak256(b"\x02" + encode_list(payload)))
            raw = b"\x02" + encode_list(payload + encode(v) + encode(r) + encode(s))
            return Signed(raw, "0x" + keccak256(raw).hex())
    if lean and keys_ <= _LEGACY_FIELDS and "gasPrice" in tx and _plain_int(tx["gasPrice"]):
        chain_id = tx["chainId"]
        fields = [tx["nonce"], tx["gasPrice"], tx["gas"], _to(tx.get("to")), tx["value"], _data(tx.get("data"))]
        v, r, s = _signer(bytes(account.key))(keccak256(encode([*fields, chain_id, 0, 0])))
        raw = encode([*fields, v + 35 + 2 * chain_id, r, s])
        return Signed(raw, "0x" + keccak256(raw).hex())
    signed = account.sign_transaction(tx)
    return Signed(bytes(signed.raw_transaction), signed.hash.to_0x_hex())
