"""Whether ``eth_getLogs`` answered every log the registry emitted in a block: checked against the block itself.

A log backend can lag (hosted providers' log indexes trail their heads by a
few blocks) or withhold; an answer that leaves a block's logs out looks like
a block without events. Each block header carries ``logsBloom``, a 2048-bit
Bloom filter of every log's address and topics in the block, and
``receiptsRoot``, the root of the trie of the block's receipts (each with its
logs). The audit index uses both before it moves its cursor past a block:

:func:`doubt`
    The cheap check, on every block of a page: the answer's logs must all be
    in the bloom, address and every topic (a log the bloom rules out is not
    this block's: a forged holder, token or resource shows so), and where
    the bloom says the registry's address and one of its event topics may be
    present, the answer must hold a registry log with that topic in that
    block. A block that fails is *in doubt*.

:func:`settle`
    A block in doubt is settled by its receipts (``eth_getBlockReceipts``, or
    one ``eth_getTransactionReceipt`` per transaction where the node has no
    such method), checked against the header's ``receiptsRoot``: their logs
    are the block's logs, as the block commits to them. The block is
    complete when the answer holds exactly the registry's logs the receipts
    hold (the bloom's positive was a false one, or another contract's event
    of the same signature); otherwise, or when receipts cannot be had or do
    not hash to the root, it stays in doubt and the index does not pass it.

Blooms have false positives, never false negatives: a registry log missing
from the answer always sets its bits, so it always puts the block in doubt
unless another log of the same topic is answered in that block. A withheld
log beside an answered one of the same kind is caught by ``audit verify
--proofs`` (every indexed block's receipts against its verified header), not
by this check.

Pure computation over the node's JSON (either shape: 0x-hex strings or the
embedded chain's ints and bytes); the requests go through the chain's
:class:`~chainfence._node.rpc.Rpc`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import Any

from .._node import events as _events
from .._node import rlp as _rlp
from ..errors import ChainError, RpcError

__all__ = [
    "block_hash",
    "block_time",
    "bloom_has",
    "bloom_of",
    "content",
    "doubt",
    "receipts",
    "receipts_root",
    "registry_logs",
    "settle",
    "trie_root",
]

_BLOOM_BYTES = 256


def _bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return bytes.fromhex(value[2:] if value.startswith(("0x", "0X")) else value)
    if isinstance(value, int) and not isinstance(value, bool):  # the embedded chain's logsBloom
        return value.to_bytes(_BLOOM_BYTES, "big")
    return bytes(value)


def _int(value: Any) -> int:
    if isinstance(value, str):
        return int(value, 16) if value.startswith(("0x", "0X")) else int(value)
    return int(value)


def block_hash(header: Any) -> bytes:
    """A block's hash, from the node's raw JSON or web3's shape."""
    return _bytes(header["hash"])


def block_time(header: Any) -> int:
    """A block's timestamp, from the node's raw JSON or web3's shape."""
    return _int(header["timestamp"])


@functools.lru_cache(maxsize=1024)
def _bits(value: bytes) -> tuple[tuple[int, int], ...]:
    """The (byte, mask) pairs ``value`` sets in a 2048-bit log bloom (the yellow paper's M3:2048)."""
    digest = _rlp.keccak256(value)
    out = []
    for i in (0, 2, 4):
        bit = ((digest[i] << 8) | digest[i + 1]) & 2047
        out.append((_BLOOM_BYTES - 1 - bit // 8, 1 << (bit % 8)))
    return tuple(out)


def bloom_has(bloom: bytes, value: bytes) -> bool:
    """Whether the bloom may hold ``value`` (an address or a topic): False is certain, True may be a false positive."""
    return all(bloom[index] & mask for index, mask in _bits(value))


def bloom_of(logs: Iterable[tuple[bytes, Sequence[bytes], bytes]]) -> bytes:
    """The bloom of ``(address, topics, data)`` logs."""
    bloom = bytearray(_BLOOM_BYTES)
    for address, topics, _data in logs:
        for value in (address, *topics):
            for index, mask in _bits(value):
                bloom[index] |= mask
    return bytes(bloom)


@functools.lru_cache(maxsize=1)
def _registry_topics() -> tuple[bytes, ...]:
    return tuple(bytes.fromhex(_events.topic(kind)[2:]) for kind in _events.Kind)


def doubt(header: Any, address: str, answered: Sequence[_events.RegistryLog]) -> str | None:
    """Why the answer ``answered`` (the registry's logs of this block) may not be all of them, or None.

    ``header`` is the block as the node gave it (``logsBloom``); ``address`` the registry's."""
    bloom = _bytes(header["logsBloom"])
    if len(bloom) != _BLOOM_BYTES:
        return f"the header's logsBloom is {len(bloom)} bytes, not {_BLOOM_BYTES}"
    registry = bytes.fromhex(address[2:])
    answered_topics = {bytes.fromhex(_events.topic(entry.kind)[2:]) for entry in answered}
    if answered and not bloom_has(bloom, registry):
        return "logs were answered that the block's bloom rules out (not the registry's in this block)"
    for entry in answered:
        if not all(bloom_has(bloom, word) for word in _events.topics_of(entry)):
            return (
                f"a {entry.kind.value} was answered (log {entry.log_index}) that the block's bloom rules out: "
                "one of its topics is not in this block"
            )
    if not bloom_has(bloom, registry):
        return None
    for topic0 in _registry_topics():
        if topic0 not in answered_topics and bloom_has(bloom, topic0):
            kind = next(kind for kind in _events.Kind if _events.topic(kind) == "0x" + topic0.hex())
            return f"the block's bloom may hold a {kind.value} of the registry that the answer does not"
    return None


# ---------------------------------------------------------------------------
# Receipts against receiptsRoot
# ---------------------------------------------------------------------------


def _log_parts(log: Any) -> tuple[bytes, tuple[bytes, ...], bytes]:
    return (
        _bytes(log["address"]),
        tuple(_bytes(topic) for topic in log["topics"]),
        _bytes(log.get("data") or b""),
    )


def encode_receipt(receipt: Any) -> bytes:
    """A receipt as the receipts trie holds it (EIP-2718: the type byte, then the RLP of status, cumulative
    gas, bloom and logs; a legacy receipt without the byte). The bloom is computed from the logs, not taken
    from the node."""
    logs = [_log_parts(log) for log in receipt["logs"]]
    if receipt.get("status") is not None:
        outcome: Any = _int(receipt["status"])
    else:  # before Byzantium: the intermediate state root
        outcome = _bytes(receipt.get("root") or receipt.get("state_root") or b"")
    body = _rlp.encode(
        [
            outcome,
            _int(receipt["cumulativeGasUsed"]),
            bloom_of(logs),
            [[address, list(topics), data] for address, topics, data in logs],
        ]
    )
    kind = _int(receipt.get("type") or 0)
    return body if kind == 0 else bytes([kind]) + body


def _nibbles(key: bytes) -> list[int]:
    out: list[int] = []
    for byte in key:
        out.extend((byte >> 4, byte & 0x0F))
    return out


def _compact(nibbles: Sequence[int], leaf: bool) -> bytes:
    flag = 2 if leaf else 0
    if len(nibbles) % 2:
        packed = [flag + 1, *nibbles]
    else:
        packed = [flag, 0, *nibbles]
    return bytes(packed[i] * 16 + packed[i + 1] for i in range(0, len(packed), 2))


def _node(items: list[tuple[list[int], bytes]], depth: int) -> Any:
    """The trie node (as an RLP structure) holding ``items`` (nibble paths, values), their first ``depth``
    nibbles consumed."""
    if len(items) == 1:
        path, value = items[0]
        return [_compact(path[depth:], True), value]
    shared = 0
    shortest = min(len(path) for path, _ in items) - depth
    while shared < shortest and len({path[depth + shared] for path, _ in items}) == 1:
        shared += 1
    if shared:
        return [_compact(items[0][0][depth : depth + shared], False), _reference(_node(items, depth + shared))]
    branch: list[Any] = [b""] * 17
    groups: dict[int, list[tuple[list[int], bytes]]] = {}
    for path, value in items:
        if len(path) == depth:
            branch[16] = value
        else:
            groups.setdefault(path[depth], []).append((path, value))
    for nibble, group in groups.items():
        branch[nibble] = _reference(_node(group, depth + 1))
    return branch


def _reference(node: Any) -> Any:
    """How a parent refers to ``node``: inline when its RLP is under 32 bytes, else by its hash."""
    encoded = _rlp.encode(node)
    return node if len(encoded) < 32 else _rlp.keccak256(encoded)


def trie_root(values: Sequence[bytes]) -> bytes:
    """The root of the ordered trie of ``values`` (key: the RLP of each one's index), as receiptsRoot and
    transactionsRoot are."""
    if not values:
        return _rlp.EMPTY_TRIE_ROOT
    items = sorted((_nibbles(_rlp.encode(i)), value) for i, value in enumerate(values))
    return _rlp.keccak256(_rlp.encode(_node(items, 0)))


def receipts_root(receipts_: Sequence[Any]) -> bytes:
    """The receiptsRoot that ``receipts_`` (in transaction order) hash to."""
    return trie_root([encode_receipt(receipt) for receipt in receipts_])


def receipts(chain: Any, header: Any) -> list[Any]:
    """The block's receipts, in transaction order, checked against its ``receiptsRoot``.

    ``eth_getBlockReceipts`` by the block's hash; where the node has no such method, one
    ``eth_getTransactionReceipt`` per transaction of the header. Raises
    :class:`~chainfence.errors.ChainError` when they cannot be had or do not hash to the root."""
    block_hash = "0x" + _bytes(header["hash"]).hex()
    try:
        found = chain.rpc.request("eth_getBlockReceipts", [block_hash])
    except RpcError:
        found = None
    if not isinstance(found, list):
        found = []
        for tx in header.get("transactions") or ():
            tx_hash = tx if isinstance(tx, (str, bytes)) else tx["hash"]
            receipt = chain.rpc.request("eth_getTransactionReceipt", ["0x" + _bytes(tx_hash).hex()])
            if receipt is None:
                raise ChainError(f"the node has no receipt for transaction 0x{_bytes(tx_hash).hex()}")
            found.append(receipt)
    found = sorted(found, key=lambda receipt: _int(receipt.get("transactionIndex", 0)))
    try:
        root = receipts_root(found)
    except (KeyError, TypeError, ValueError) as exc:
        raise ChainError(f"block {_int(header['number'])}: a receipt does not encode: {exc}") from None
    if root != _bytes(header["receiptsRoot"]):
        raise ChainError(
            f"block {_int(header['number'])}: the node's receipts do not hash to the header's receiptsRoot"
        )
    return found


def registry_logs(receipts_: Sequence[Any], header: Any, address: str) -> list[_events.RegistryLog]:
    """The registry's events in the receipts of the block ``header``, decoded as ``eth_getLogs`` answers are,
    in block order (each with its transaction's index)."""
    registry = bytes.fromhex(address[2:])
    out: list[_events.RegistryLog] = []
    for position, receipt in enumerate(receipts_):
        for log in receipt["logs"]:
            if _bytes(log["address"]) != registry:
                continue
            entry = _events.decode(
                {
                    "topics": log["topics"],
                    "data": log.get("data") or "0x",
                    "blockNumber": header["number"],
                    "blockHash": header["hash"],
                    "transactionHash": receipt["transactionHash"],
                    "transactionIndex": position,
                    "logIndex": log.get("logIndex", 0),
                }
            )
            if entry is not None:
                out.append(entry)
    return out


def content(entry: _events.RegistryLog) -> tuple[Any, ...]:
    """What a log says, apart from where it is (block, transaction, position): what receipts and an answer
    must agree on."""
    fields = dataclasses.asdict(entry)
    for where in ("block_number", "block_hash", "tx_hash", "log_index", "tx_index"):
        fields.pop(where)
    fields["kind"] = entry.kind.value
    if fields.get("progress") is not None and not any(fields["progress"]):
        fields["progress"] = None  # a renewal without a marker: zeros as logged, None as indexed
    return tuple(sorted((key, repr(value)) for key, value in fields.items()))


def settle(chain: Any, header: Any, address: str, answered: Sequence[_events.RegistryLog]) -> str | None:
    """Settle a block in :func:`doubt` by its receipts: None when the answer holds exactly the registry's logs
    they hold, else why not."""
    try:
        found = receipts(chain, header)
    except (ChainError, RpcError) as exc:
        return f"its receipts could not settle it ({exc})"
    expected = sorted(content(entry) for entry in registry_logs(found, header, address))
    given = sorted(content(entry) for entry in answered)
    if expected == given:
        return None
    if len(expected) > len(given):
        return f"its receipts hold {len(expected)} registry events, the answer {len(given)}"
    return "the answer's events are not the ones its receipts hold"
