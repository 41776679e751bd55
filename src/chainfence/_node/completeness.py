"""Whether ``eth_getLogs`` answered every log the registry emitted in a block: checked against the block itself.

A log backend can lag (hosted providers' log indexes trail their heads by a
few blocks) or withhold; an answer that leaves a block's logs out looks like
a block without events. Each block header carries ``logsBloom``, a 2048-bit
Bloom filter of every log's address and topics in the block, and
``receiptsRoot``, the root of the trie of the block's receipts (each with its
logs). Every reader of the registry's logs that keeps a cursor (the audit
index, a guard's follower, an election's observer, a waiter) uses both,
through :func:`check_steps`, before its cursor passes a block:

:func:`doubt`
    The cheap check, on every block of a page: the answer's logs must all be
    in the bloom, address and every topic (a log the bloom rules out is not
    this block's: a forged holder, token or resource shows so), and where
    the bloom says the registry's address, one of the event topics asked for
    and every indexed value asked for (a resource, a token, a holder) may be
    present, the answer must hold a registry log with that topic in that
    block. A block that fails is *in doubt*.

:func:`settle_steps`
    A block in doubt is settled by its receipts (``eth_getBlockReceipts``, or
    one ``eth_getTransactionReceipt`` per transaction where the node has no
    such method), checked against the header's ``receiptsRoot``: their logs
    are the block's logs, as the block commits to them. The block is
    complete when the answer holds exactly the registry's logs the receipts
    hold that the query asked for (the bloom's positive was a false one, or
    another contract's event of the same signature); otherwise, or when
    receipts cannot be had or do not hash to the root, it stays in doubt and
    the reader does not pass it. Of the receipts, only what the root commits
    to is believed (:func:`registry_logs`): a log's place is derived from
    their order, never read, and a registry event in them that does not read
    keeps the block in doubt, never passes it without that event. A
    receipt's ``transactionHash``, which the root does not commit to, is
    checked against the block's transactions, which its
    ``transactionsRoot`` does (:func:`receipts_hashes_steps`); and the
    answer must put each event in the transaction (hash and index) its
    receipt is (:func:`placed`): the audit index keys its events by it.

:func:`check_steps` runs both over a page of blocks and says how far the
answer is complete: the reader moves its cursor to :attr:`Checked.end` and
no further. The headers are the node's unless the reader gives its own: a
guard with a header source gives the headers it vouches for, so a provider
that withholds logs cannot hide them by forging its headers' blooms too.

Two modes (:data:`MODES`), one check:

``"bloom"`` (the default of readers without a header source)
    Receipts are read only for a block in doubt. Blooms have false
    positives, never false negatives: a registry log missing from the answer
    always sets its bits, so it always puts the block in doubt *unless
    another log of the same kind (address and topic) is answered in that
    block*: its bits are set already, a bloom cannot count. Such a withheld
    log passes unseen (``audit verify --proofs`` catches it afterwards:
    every indexed block's receipts against its verified header). An honest
    poll reads no receipts.

``"receipts"`` (the default of a guard's follower given a header source)
    Every block whose bloom may hold a registry log of a kind asked for
    (:func:`may_hold`) is settled by its receipts, in doubt or not: the
    block passes only when the answer holds exactly the registry logs of
    the asked kinds its receipts hold, so a log withheld beside an answered
    one of the same kind, and a log whose data (which no bloom covers) was
    rewritten, hold the reader at that block. The cost is reading them,
    once per block with registry activity of the kinds asked for
    (``docs/benchmarks/history.md``, "The completeness check's two modes, per poll").

In either mode, where a page has more than one block to settle, their
receipts are asked in one JSON-RPC batch where the node takes batches
(:meth:`Rpc.block_receipts <chainfence._node.rpc.Rpc.block_receipts>`), then
each block is settled as above, in order.

Pure computation over the node's JSON (either shape: 0x-hex strings or the
embedded chain's ints and bytes); the requests are steps
(:mod:`chainfence._core.effects`), run over a chain's :class:`~chainfence._node.rpc.Rpc`
by :func:`check`, :func:`settle` and :func:`receipts`, or by either driver.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from .._core.effects import RPC, Steps, run
from ..errors import ChainError, InvalidInput, RpcError
from . import events as _events
from . import rlp as _rlp

__all__ = [
    "MODES",
    "Checked",
    "block_hash",
    "block_time",
    "bloom_has",
    "bloom_of",
    "check",
    "check_steps",
    "content",
    "doubt",
    "encode_transaction",
    "may_hold",
    "mode_of",
    "placed",
    "receipts",
    "receipts_hashes_steps",
    "receipts_root",
    "receipts_steps",
    "registry_logs",
    "settle",
    "settle_steps",
    "transaction_hashes",
    "transaction_hashes_steps",
    "trie_root",
]

T = TypeVar("T")

_BLOOM_BYTES = 256

#: The completeness check's modes (see the module docstring): receipts read only for a block in doubt, or for
#: every block whose bloom may hold a registry log of a kind asked for.
MODES = ("bloom", "receipts")


def mode_of(value: Any, *, default: str) -> str:
    """The completeness mode a reader was given (None: ``default``); InvalidInput for anything but one of
    :data:`MODES`."""
    if value is None:
        return default
    if not isinstance(value, str) or value not in MODES:
        raise InvalidInput(f"completeness must be one of {', '.join(map(repr, MODES))}, got {value!r}")
    return value


def _bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return bytes.fromhex(value[2:] if value.startswith(("0x", "0X")) else value)
    if isinstance(value, int) and not isinstance(value, bool):  # the embedded chain's logsBloom
        return value.to_bytes(_BLOOM_BYTES, "big")
    return bytes(value)


def _bloom(value: Any) -> bytes:
    """A header's ``logsBloom``: 0x-hex as a node sends it, the embedded chain's int, or the bytes web3's
    formatting makes of that int (its leading zero bytes dropped: put back)."""
    if isinstance(value, (bytes, bytearray)) and len(value) < _BLOOM_BYTES:
        return bytes(value).rjust(_BLOOM_BYTES, b"\0")
    return _bytes(value)


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


def _asked_topics(kinds: Sequence[_events.Kind] | None) -> list[tuple[_events.Kind, bytes]]:
    """(kind, topic0) of the event kinds a query asks for (all of them by default)."""
    return [(kind, bytes.fromhex(_events.topic(kind)[2:])) for kind in (kinds or list(_events.Kind))]


def _indexed(resource_id: bytes | None, token: int | None, holder: str | None) -> list[tuple[int, bytes]]:
    """(topic position, 32-byte word) of the indexed values a query asks for, as ``eth_getLogs`` filters them."""
    words: list[tuple[int, bytes]] = []
    if resource_id is not None:
        words.append((1, bytes(resource_id)))
    if token is not None:
        words.append((2, token.to_bytes(32, "big")))
    if holder is not None:
        words.append((3, bytes.fromhex(holder[2:]).rjust(32, b"\0")))
    return words


def doubt(
    header: Any,
    address: str,
    answered: Sequence[_events.RegistryLog],
    *,
    kinds: Sequence[_events.Kind] | None = None,
    resource_id: bytes | None = None,
    token: int | None = None,
    holder: str | None = None,
) -> str | None:
    """Why the answer ``answered`` (the registry's logs of this block that a query asked for) may not be all
    of them, or None.

    ``header`` is the block as the node gave it (``logsBloom``); ``address`` the registry's. The query is
    ``kinds`` (default: every event) and the indexed values ``resource_id``, ``token`` and ``holder``, as
    :func:`chainfence._node.events.fetch` takes them."""
    bloom = _bloom(header["logsBloom"])
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
    for kind, topic0 in _possible(bloom, registry, kinds, resource_id, token, holder):
        if topic0 not in answered_topics:
            return f"the block's bloom may hold a {kind.value} of the registry that the answer does not"
    return None


def _possible(
    bloom: bytes,
    registry: bytes,
    kinds: Sequence[_events.Kind] | None,
    resource_id: bytes | None,
    token: int | None,
    holder: str | None,
) -> list[tuple[_events.Kind, bytes]]:
    """(kind, topic0) of the asked event kinds of which the bloom may hold a registry log carrying every
    indexed value asked for."""
    if not bloom_has(bloom, registry):
        return []
    if not all(bloom_has(bloom, word) for _position, word in _indexed(resource_id, token, holder)):
        return []  # no log of this block carries every value the query asks for
    return [(kind, topic0) for kind, topic0 in _asked_topics(kinds) if bloom_has(bloom, topic0)]


def may_hold(
    header: Any,
    address: str,
    *,
    kinds: Sequence[_events.Kind] | None = None,
    resource_id: bytes | None = None,
    token: int | None = None,
    holder: str | None = None,
) -> bool:
    """Whether the block's bloom may hold a registry log the query (as :func:`doubt` takes it) asks for:
    the blocks the ``"receipts"`` mode settles by their receipts, in doubt or not."""
    bloom = _bloom(header["logsBloom"])
    return bool(_possible(bloom, bytes.fromhex(address[2:]), kinds, resource_id, token, holder))


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


def _tx(tx: Any, name: str, *others: str) -> Any:
    """Field ``name`` of a transaction as a node sends it (camelCase), or as the in-process chain does
    (snake_case; ``others``: other names for it); KeyError when it has none."""
    for key in (name, *others):
        if key in tx:
            return tx[key]
        snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
        if snake in tx:
            return tx[snake]
    raise KeyError(name)


def _to(tx: Any) -> bytes:
    """A transaction's recipient (empty: a creation)."""
    value = tx.get("to")
    return b"" if value in (None, "", b"") else _bytes(value)


def _access_list(tx: Any) -> list[Any]:
    return [
        [_bytes(entry["address"]), [_bytes(key) for key in _tx(entry, "storageKeys")]]
        for entry in (_tx(tx, "accessList") or ())
    ]


def _signature(tx: Any) -> list[Any]:
    """A typed transaction's (y parity, r, s): ``yParity`` where the node sends it, else ``v`` (0 or 1)."""
    try:
        parity = _tx(tx, "yParity")
    except KeyError:
        parity = tx["v"]
    return [_int(parity), _int(tx["r"]), _int(tx["s"])]


def encode_transaction(tx: Any) -> bytes:
    """A transaction as the transactions trie holds it, from the node's JSON (or the in-process chain's):
    EIP-2718's type byte and the RLP of its fields (a legacy transaction: the RLP alone), for legacy,
    access-list (1), dynamic-fee (2), blob (3, without its sidecar) and set-code (4) transactions; its hash
    is keccak256 of these bytes. ValueError for another type (or KeyError for a field missing)."""
    kind = _int(tx.get("type") or 0)
    common = [_int(tx["nonce"]), None, _int(tx["gas"]), _to(tx), _int(tx["value"]), _bytes(_tx(tx, "input", "data"))]
    if kind == 0:
        common[1] = _int(_tx(tx, "gasPrice"))
        return _rlp.encode([*common, _int(tx["v"]), _int(tx["r"]), _int(tx["s"])])
    chain_id = _int(_tx(tx, "chainId"))
    if kind == 1:
        common[1] = _int(_tx(tx, "gasPrice"))
        return b"\x01" + _rlp.encode([chain_id, *common, _access_list(tx), *_signature(tx)])
    if kind not in (2, 3, 4):
        raise ValueError(f"a transaction of type {kind}, which this check cannot encode")
    fees = [_int(_tx(tx, "maxPriorityFeePerGas")), _int(_tx(tx, "maxFeePerGas"))]
    fields = [chain_id, common[0], *fees, *common[2:], _access_list(tx)]
    if kind == 3:
        fields += [_int(_tx(tx, "maxFeePerBlobGas")), [_bytes(h) for h in _tx(tx, "blobVersionedHashes")]]
    elif kind == 4:
        fields.append(
            [
                [_int(_tx(a, "chainId")), _bytes(a["address"]), _int(a["nonce"]), *_signature(a)]
                for a in _tx(tx, "authorizationList")
            ]
        )
    return bytes([kind]) + _rlp.encode([*fields, *_signature(tx)])


def receipts_root(receipts_: Sequence[Any]) -> bytes:
    """The receiptsRoot that ``receipts_`` (in transaction order) hash to."""
    return trie_root([encode_receipt(receipt) for receipt in receipts_])


def receipts_steps(header: Any, *, given: list[Any] | None = None, block: Any = None) -> Steps[list[Any]]:
    """The block's receipts, in transaction order, checked against its ``receiptsRoot``, each one's
    ``transactionHash`` against its transaction's (:func:`receipts_hashes_steps`: the trie of receipts does
    not hold it).

    ``eth_getBlockReceipts`` by the block's hash (``given``: what a batch of them already answered for
    this block; ``block``: the block with its transactions whole, likewise); where the node has no such method, one ``eth_getTransactionReceipt`` per transaction of
    the block (as the node lists them for the block's hash, whole: they are checked against the header's
    ``transactionsRoot`` too). Raises :class:`~chainfence.errors.ChainError` when they cannot be had, do not
    hash to the root, or name another transaction than theirs."""
    block_hash = "0x" + _bytes(header["hash"]).hex()
    found: Any = given
    if found is None:
        try:
            found = yield RPC.request("eth_getBlockReceipts", [block_hash])
        except RpcError:
            found = None
    if not isinstance(found, list):
        if block is None:
            block = yield from _whole_block_steps(block_hash)
        found = []
        for tx in block.get("transactions") or ():
            tx_hash = "0x" + _bytes(tx if isinstance(tx, (str, bytes)) else tx["hash"]).hex()
            receipt = yield RPC.request("eth_getTransactionReceipt", [tx_hash])
            if receipt is None:
                raise ChainError(f"the node has no receipt for transaction {tx_hash}")
            found.append(receipt)
    try:
        ordered: list[Any] = sorted(found, key=lambda receipt: _int(receipt.get("transactionIndex", 0)))
        root = receipts_root(ordered)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ChainError(f"block {_int(header['number'])}: a receipt does not encode: {exc}") from None
    if root != _bytes(header["receiptsRoot"]):
        raise ChainError(
            f"block {_int(header['number'])}: the node's receipts do not hash to the header's receiptsRoot"
        )
    yield from receipts_hashes_steps(header, ordered, block=block)
    return ordered


def receipts(chain: Any, header: Any) -> list[Any]:
    """:func:`receipts_steps` over ``chain``'s RPC layer."""
    return _drive(chain, receipts_steps(header))


def _whole_block_steps(block_hash: str) -> Steps[Any]:
    """The block ``block_hash`` with its transactions whole, as the node sends it."""
    block = yield RPC.request("eth_getBlockByHash", [block_hash, True])
    if not isinstance(block, dict):
        raise ChainError(f"the node has no block {block_hash}")
    return block


def transaction_hashes_steps(header: Any, *, block: Any = None) -> Steps[list[bytes]]:
    """The hashes of the transactions of the block ``header``, in order, as its ``transactionsRoot`` commits
    to them: its transactions, whole (``block``: the block as the node sent it with them, else asked by
    hash), each encoded as the trie holds it (:func:`encode_transaction`), must hash to the root; each one's
    hash is keccak256 of its encoding. Raises :class:`~chainfence.errors.ChainError` otherwise (a provider
    that lies about them, or a transaction type this check cannot encode)."""
    number = _int(header["number"])
    if header.get("transactionsRoot") is None:
        raise ChainError(f"block {number}: no transactionsRoot to check its transactions against")
    if block is None:
        block = yield from _whole_block_steps("0x" + _bytes(header["hash"]).hex())
    try:
        encoded = [encode_transaction(tx) for tx in block.get("transactions") or ()]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ChainError(f"block {number}: a transaction does not encode: {exc!r}") from None
    if trie_root(encoded) != _bytes(header["transactionsRoot"]):
        raise ChainError(f"block {number}: the node's transactions do not hash to the header's transactionsRoot")
    return [_rlp.keccak256(one) for one in encoded]


def transaction_hashes(chain: Any, header: Any) -> list[bytes]:
    """:func:`transaction_hashes_steps` over ``chain``'s RPC layer."""
    return _drive(chain, transaction_hashes_steps(header))


def receipts_hashes_steps(header: Any, receipts_: Sequence[Any], *, block: Any = None) -> Steps[None]:
    """Check that each of the block's receipts (in order, checked against its ``receiptsRoot``) names its own
    transaction: its ``transactionHash`` is the hash of the transaction at its place, as the block's
    ``transactionsRoot`` commits to them (:func:`transaction_hashes_steps`). Neither trie holds a receipt's
    hash, and a provider may tell any: the audit index keys its events by it and tells a grant from a
    revoke by it (issue 25). Raises :class:`~chainfence.errors.ChainError` naming the first that does not."""
    proven = yield from transaction_hashes_steps(header, block=block)
    number = _int(header["number"])
    if len(proven) != len(receipts_):
        raise ChainError(f"block {number}: {len(receipts_)} receipts, but {len(proven)} transactions")
    for position, (receipt, hash_) in enumerate(zip(receipts_, proven, strict=True)):
        try:
            said = _transaction_hash(receipt)
        except ValueError as exc:
            raise ChainError(f"block {number}: receipt {position}: {exc}") from None
        if said != hash_:
            raise ChainError(
                f"block {number}: receipt {position} names transaction 0x{said.hex()}, but its transaction "
                f"hashes to 0x{hash_.hex()} (against the header's transactionsRoot)"
            )


def registry_logs(
    receipts_: Sequence[Any],
    header: Any,
    address: str,
    *,
    kinds: Sequence[_events.Kind] | None = None,
    resource_id: bytes | None = None,
    token: int | None = None,
    holder: str | None = None,
) -> list[_events.RegistryLog]:
    """The registry's events in the receipts of the block ``header`` that a query (as :func:`doubt` takes
    it) asks for, decoded as ``eth_getLogs`` answers are, in block order (each with its transaction's index).

    ``receipts_`` are the block's, in order, as :func:`receipts_steps` checked them against the root: what
    the trie commits to (each log's address, topics and data, the receipts' order) is all that is read of
    them. A log's place is derived from that order (its ``logIndex``: its position among the block's logs,
    as the spec numbers them; its transaction's index: its receipt's position), its block from
    ``header``, never read from the log; its transaction's hash, which the receipts trie does not hold, is
    the receipt's, which :func:`receipts_steps` proved against the header's ``transactionsRoot``
    (:func:`receipts_hashes_steps`), and must read as one (32 bytes). A registry event that does not decode, or whose receipt's hash does not read, raises
    :class:`~chainfence.errors.ChainError`: the block is refused, never passed without it."""
    registry = bytes.fromhex(address[2:])
    known = set(_registry_topics())
    topics0 = None if kinds is None else {topic0 for _kind, topic0 in _asked_topics(kinds)}
    indexed = _indexed(resource_id, token, holder)
    number = _int(header["number"])
    out: list[_events.RegistryLog] = []
    place = -1
    for position, receipt in enumerate(receipts_):
        for log in receipt["logs"]:
            place += 1
            if _bytes(log["address"]) != registry:
                continue
            words = [_bytes(topic) for topic in log["topics"]]
            if not words or words[0] not in known or (topics0 is not None and words[0] not in topics0):
                continue  # another event than the registry's ones this SDK reads, or one not asked for
            if any(len(words) <= at or words[at] != word for at, word in indexed):
                continue
            try:
                entry = _events.decode(
                    {
                        "topics": log["topics"],
                        "data": log.get("data") or "0x",
                        "blockNumber": number,
                        "blockHash": header["hash"],
                        "transactionHash": _transaction_hash(receipt),
                        "transactionIndex": position,
                        "logIndex": place,
                    },
                    strict=True,
                )
            except ValueError as exc:
                raise ChainError(
                    f"block {number}: a registry event in its receipts (log {place}) does not read: {exc}"
                ) from None
            assert entry is not None  # strict: decoded, or ValueError
            out.append(entry)
    return out


def _transaction_hash(receipt: Any) -> bytes:
    """A receipt's ``transactionHash``: 32 bytes (ValueError otherwise)."""
    try:
        value = _bytes(receipt["transactionHash"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"its receipt's transactionHash does not read ({exc!r})") from None
    if len(value) != 32:
        raise ValueError(f"its receipt's transactionHash is {len(value)} bytes, not 32")
    return value


@functools.lru_cache(maxsize=1)
def _said() -> tuple[str, ...]:
    """The fields of a registry log that say what it says, apart from where it is (block, transaction,
    position)."""
    where = ("block_number", "block_hash", "tx_hash", "log_index", "tx_index")
    return tuple(name for name in _events.RegistryLog._fields if name not in where)


def content(entry: _events.RegistryLog) -> tuple[Any, ...]:
    """What a log says, apart from where it is (block, transaction, position): what receipts and an answer
    must agree on. (Its fields read directly, never deep-copied: ``dataclasses.asdict``'s copies were half
    of a receipts mode sync's time while the record was a dataclass, ``docs/benchmarks/history.md``, "Sync
    in the receipts mode".)"""
    fields = {name: getattr(entry, name) for name in _said()}
    fields["kind"] = entry.kind.value
    if fields.get("progress") is not None and not any(fields["progress"]):
        fields["progress"] = None  # a renewal without a marker: zeros as logged, None as indexed
    return tuple(sorted((key, repr(value)) for key, value in fields.items()))


def placed(entry: _events.RegistryLog) -> Any:
    """What a log says (:func:`content`) and the transaction it is in (hash and index): what the answer and
    the receipts must agree on (its ``logIndex`` aside: nodes number it per block or per transaction; its
    block is checked apart)."""
    return (content(entry), entry.tx_hash.lower(), entry.tx_index)


def settle_steps(
    header: Any,
    address: str,
    answered: Sequence[_events.RegistryLog],
    *,
    kinds: Sequence[_events.Kind] | None = None,
    resource_id: bytes | None = None,
    token: int | None = None,
    holder: str | None = None,
    given: list[Any] | None = None,
    block: Any = None,
) -> Steps[str | None]:
    """Settle a block in :func:`doubt` (or, in the ``"receipts"`` mode, one that :func:`may_hold` a log asked
    for) by its receipts: None when the answer holds exactly the registry's logs they hold that the query
    asked for, each in the transaction (hash and index) they put it in, else why not. ``given``: the
    block's receipts as a batch already answered them; ``block``: the block with its transactions whole,
    likewise."""
    query: dict[str, Any] = {"kinds": kinds, "resource_id": resource_id, "token": token, "holder": holder}
    try:
        found = yield from receipts_steps(header, given=given, block=block)
        held = registry_logs(found, header, address, **query)
    except (ChainError, RpcError) as exc:
        return f"its receipts could not settle it ({exc})"
    expected = sorted(placed(entry) for entry in held)
    if expected == sorted(placed(entry) for entry in answered):
        return None
    if len(held) > len(answered):
        return f"its receipts hold {len(held)} registry events, the answer {len(answered)}"
    if sorted(content(entry) for entry in held) == sorted(content(entry) for entry in answered):
        return "the answer puts its events in other transactions than its receipts do (a transactionHash or index)"
    return "the answer's events are not the ones its receipts hold"


def settle(chain: Any, header: Any, address: str, answered: Sequence[_events.RegistryLog], **query: Any) -> str | None:
    """:func:`settle_steps` over ``chain``'s RPC layer."""
    return _drive(chain, settle_steps(header, address, answered, **query))


# ---------------------------------------------------------------------------
# A page of an answer, checked block by block
# ---------------------------------------------------------------------------


class Checked(NamedTuple):
    """How far an ``eth_getLogs`` answer for blocks ``first``..``last`` is complete.

    ``end`` is the last block up to which every block's logs are checked complete (``first - 1`` when
    the first one is not): a reader moves its cursor there and no further. ``logs`` are the answer's
    logs of blocks ``first``..``end``; ``held`` is the first block in doubt (``end + 1``; None when the
    whole page is complete) and ``why`` says what is wrong with it. ``headers`` are the headers the
    check used, by number (``block_hash`` and ``block_time`` read them). ``settled`` are the blocks
    found complete by their receipts (in doubt, or, in the ``"receipts"`` mode, a block whose bloom may
    hold a log asked for). (A named tuple, not a dataclass: start time, docs/explanation/design.md.)"""

    first: int
    last: int
    end: int
    logs: list[_events.RegistryLog]
    held: int | None
    why: str | None
    headers: dict[int, Any]
    settled: tuple[int, ...] = ()


#: Blocks whose receipts are asked in one batch, ahead of settling them one by one.
_RECEIPTS_AHEAD = 100

#: Why a block the bloom does not put in doubt is settled by its receipts all the same.
_RECEIPTS_MODE = "its bloom may hold a registry event of a kind asked for (the receipts mode reads them)"


def check_steps(
    address: str,
    first: int,
    last: int,
    logs: Sequence[_events.RegistryLog],
    *,
    kinds: Sequence[_events.Kind] | None = None,
    resource_id: bytes | None = None,
    token: int | None = None,
    holder: str | None = None,
    headers: dict[int, Any] | None = None,
    mode: str = "bloom",
) -> Steps[Checked]:
    """Check the answer ``logs`` for the blocks ``first``..``last`` (one page of
    :func:`chainfence._node.events.fetch` for the query ``kinds``, ``resource_id``, ``token``,
    ``holder``) block by block, up to the first block in doubt: a log of another block hash than the
    header's (another history, or a reorganisation while reading), :func:`doubt` not settled by
    :func:`settle_steps`; in the ``"receipts"`` ``mode``, also a block that :func:`may_hold` a log asked
    for whose receipts do not settle it (see the module docstring).

    ``headers`` maps each block number to its header (``hash``, ``number``, ``logsBloom``,
    ``receiptsRoot``); those missing are asked of the node (one batch where it takes batches). The
    receipts of the blocks to settle, when there are several, are asked in batches too (of up to 100
    blocks, the next one only once the blocks before settled)."""
    mode = mode_of(mode, default="bloom")
    known = dict(headers or {})
    missing = [number for number in range(first, last + 1) if number not in known]
    if missing:
        found = yield RPC.blocks(missing, raw=True)
        for number, header in zip(missing, found, strict=True):
            if header is None:
                return Checked(first, last, number - 1, _upto(logs, number - 1), number, _gone(number), known)
            known[number] = header
    by_block: dict[int, list[_events.RegistryLog]] = {}
    for entry in logs:
        by_block.setdefault(entry.block_number, []).append(entry)
    query: dict[str, Any] = {"kinds": kinds, "resource_id": resource_id, "token": token, "holder": holder}
    to_settle: dict[int, str] = {}
    for number in range(first, last + 1):
        header = known[number]
        answered = by_block.get(number, [])
        why = _other_block(header, answered) or doubt(header, address, answered, **query)
        if why is None and mode == "receipts" and may_hold(header, address, **query):
            why = _RECEIPTS_MODE
        if why is not None:
            to_settle[number] = why
    numbers = list(to_settle)
    given: dict[int, Any] = {}
    wholes: dict[int, Any] = {}
    asked: set[int] = set()
    settled: list[int] = []
    for position, (number, why) in enumerate(to_settle.items()):
        if number not in asked and len(numbers) - position > 1:
            # The receipts of this block and the next ones to settle, in one round trip where the node takes
            # batches: at most a batch's worth ahead, so a block that does not settle wastes little.
            part = numbers[position : position + _RECEIPTS_AHEAD]
            hashes = ["0x" + _bytes(known[n]["hash"]).hex() for n in part]
            answers = yield RPC.block_receipts(hashes)
            blocks = yield RPC.whole_blocks(hashes)  # their transactions, which prove the receipts' hashes
            asked.update(part)
            given.update((n, found) for n, found in zip(part, answers, strict=True) if isinstance(found, list))
            wholes.update((n, found) for n, found in zip(part, blocks, strict=True) if isinstance(found, dict))
        unsettled = yield from settle_steps(
            known[number],
            address,
            by_block.get(number, []),
            given=given.get(number),
            block=wholes.get(number),
            **query,
        )
        if unsettled is not None:
            return Checked(
                first, last, number - 1, _upto(logs, number - 1), number, f"{why}; {unsettled}", known, tuple(settled)
            )
        settled.append(number)
    return Checked(first, last, last, list(logs), None, None, known, tuple(settled))


def check(
    chain: Any, address: str, first: int, last: int, logs: Sequence[_events.RegistryLog], **query: Any
) -> Checked:
    """:func:`check_steps` over ``chain``'s RPC layer."""
    return _drive(chain, check_steps(address, first, last, logs, **query))


def _upto(logs: Sequence[_events.RegistryLog], end: int) -> list[_events.RegistryLog]:
    return [entry for entry in logs if entry.block_number <= end]


def _gone(number: int) -> str:
    return f"the node has no block {number} (reorganised away while reading?)"


def _other_block(header: Any, answered: Sequence[_events.RegistryLog]) -> str | None:
    """Why logs answered for a block are not that block's: they name another block hash."""
    block = _bytes(header["hash"])
    for entry in answered:
        if entry.block_hash != block:
            return (
                f"a {entry.kind.value} was answered for block {entry.block_number} with hash 0x{entry.block_hash.hex()}, "
                f"but the block is 0x{block.hex()}"
            )
    return None


def _drive(chain: Any, steps: Steps[T]) -> T:
    """Run ``steps`` over ``chain``'s blocking RPC layer."""
    return run(steps, rpc=chain.rpc, sleep=time.sleep, lock=lambda key: contextlib.nullcontext())
