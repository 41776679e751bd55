"""JSON-RPC values to and from the shapes the SDK works with, written once for every transport.

Results come back as web3 returns them (``AttributeDict`` blocks, receipts,
transactions and logs; ints; ``HexBytes`` hashes; checksum addresses), built
here without web3's formatters, which cost more than anvil takes to mine and
whose module is private, and without importing web3 or hexbytes: the two
shapes are :mod:`chainfence._node.shapes`' (docs/explanation/design.md) (``tests/unit/test_lean_http.py`` holds these to
web3's own formatters; ``tests/unit/test_transports.py`` holds the embedded
chain's answers to them). They read a node's JSON (hex strings) and the
in-process chain's answers (eth-tester's ints and hex strings) alike.

Parameters go out in JSON-RPC form: :func:`call_object`, :func:`block_id`,
:func:`hash_id`, :func:`log_filter`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import MalformedReply
from .addresses import to_checksum_address
from .shapes import AttributeDict, HexBytes

__all__ = [
    "LazyReceipt",
    "block_id",
    "call_object",
    "check_receipt",
    "data",
    "format_block",
    "format_log",
    "format_receipt",
    "format_transaction",
    "hash_id",
    "lazy_receipt",
    "log_filter",
    "quantity",
    "raw_logs",
]


#: The longest quantity a node answers: a uint256, "0x" and 64 hex digits (a wider one is refused before
#: ``int`` reads it: Python reads hex of any width, then cannot write one of 4,300 digits back as text).
_MAX_QUANTITY = 2 + 64


def quantity(value: Any) -> int:
    """A JSON-RPC quantity (``"0x1a"``; the in-process chain answers with ints) as an int; ``ValueError``
    for one that is not, or is wider than 256 bits."""
    if isinstance(value, str):
        if len(value) > _MAX_QUANTITY:
            raise ValueError(f"a quantity wider than 256 bits: {value[:20]}... ({len(value)} characters)")
        return int(value, 16)
    if isinstance(value, int) and not isinstance(value, bool):
        if not -(1 << 256) < value < 1 << 256:
            raise ValueError("a quantity wider than 256 bits")
        return value
    raise ValueError(f"not a quantity: {value!r:.80}")


def data(value: Any) -> bytes:
    """JSON-RPC data (``"0x..."``) as bytes."""
    if isinstance(value, str):
        return bytes.fromhex(value[2:] if value.startswith("0x") else value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise ValueError(f"not data: {value!r}")


def _quantity(value: Any) -> Any:
    return quantity(value) if isinstance(value, str) and value.startswith("0x") else value


def _address(value: Any) -> Any:
    return to_checksum_address(value) if isinstance(value, str) and len(value) == 42 else value


def _hexbytes(value: Any) -> Any:
    """0x-hex as ``HexBytes`` (the in-process chain gives a bloom, ``r`` and ``s`` as ints: as web3 reads them)."""
    if isinstance(value, (str, bytes, bytearray)) or (isinstance(value, int) and not isinstance(value, bool)):
        return HexBytes(value)
    return value


_RECEIPT_QUANTITIES = frozenset(
    {
        "blockNumber",
        "cumulativeGasUsed",
        "effectiveGasPrice",
        "gasUsed",
        "status",
        "transactionIndex",
        "type",
        "blobGasUsed",
        "blobGasPrice",
    }
)
_RECEIPT_BYTES = frozenset({"blockHash", "logsBloom", "transactionHash", "root"})
_RECEIPT_ADDRESSES = frozenset({"contractAddress", "from", "to"})
_LOG_QUANTITIES = frozenset({"blockNumber", "logIndex", "transactionIndex"})
_LOG_BYTES = frozenset({"blockHash", "data", "transactionHash"})


def _log_entry(log: dict[str, Any]) -> Any:
    out: dict[str, Any] = {}
    for key, value in log.items():
        if key in _LOG_QUANTITIES:
            value = _quantity(value)
        elif key in _LOG_BYTES:
            value = _hexbytes(value)
        elif key == "topics":
            value = [_hexbytes(topic) for topic in value]
        elif key == "address":
            value = _address(value)
        out[key] = value
    return AttributeDict(out)


def _receipt_field(key: str, value: Any) -> Any:
    if key in _RECEIPT_QUANTITIES:
        return _quantity(value)
    if key in _RECEIPT_BYTES:
        return _hexbytes(value)
    if key in _RECEIPT_ADDRESSES:
        return _address(value)
    if key == "logs":
        return [_log_entry(log) for log in value]
    return value


def format_receipt(raw: dict[str, Any] | None) -> Any | None:
    """A receipt as web3's ``eth.get_transaction_receipt`` returns it (``AttributeDict``, ints,
    ``HexBytes``, checksum addresses), from the node's JSON; ``tests/unit/test_lean_http.py`` holds it
    to web3's own formatter."""
    if raw is None:
        return None
    return AttributeDict({key: _receipt_field(key, value) for key, value in raw.items()})


class LazyReceipt(AttributeDict):
    """:func:`format_receipt`'s receipt, each field formatted the first time it is read.

    What the SDK reads of a receipt it waited for is its status, hash and block, and its registry's
    own event (:func:`raw_logs`, read as the node sent it): formatting every field and every log
    into web3's shape first cost more than the rest of the SDK's work on a release
    (``docs/benchmarks/history.md``, "The SDK's own work per call"). Whoever reads more gets the same values
    :func:`format_receipt` gives, field by field (``receipt.gasUsed``, ``receipt["logs"]``); iterating,
    comparing, hashing, printing or pickling it formats every field first, so it is equal to
    :func:`format_receipt`'s in every way but its type's name (``tests/unit/test_lazy_receipt.py``).
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__()
        object.__setattr__(self, "_raw", raw)

    def __getitem__(self, key: Any) -> Any:
        formatted = self.__dict__
        if key in formatted:
            return formatted[key]
        value = _receipt_field(key, self._raw[key])
        formatted[key] = value
        return value

    def __getattr__(self, name: str) -> Any:
        # Only for a field not formatted yet (a formatted one is found in the instance's __dict__).
        if name.startswith("__") or name == "_raw":
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}") from None

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def __iter__(self) -> Iterator[Any]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def _formatted(self) -> dict[str, Any]:
        """Every field, formatted (in the node's order)."""
        return {key: self[key] for key in self._raw}

    def __repr__(self) -> str:
        return f"AttributeDict({self._formatted()!r})"

    def __hash__(self) -> int:
        return hash(AttributeDict(self._formatted()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._formatted() == dict(other)
        return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __reduce__(self) -> tuple[Any, ...]:
        return AttributeDict, (self._formatted(),)


def lazy_receipt(raw: dict[str, Any] | None, method: str = "eth_getTransactionReceipt") -> LazyReceipt | None:
    """:class:`LazyReceipt` of the node's JSON receipt (None stays None: not mined), once
    :func:`check_receipt` read every field it will format: a malformed one raises here, at the read of
    ``method``'s reply, never later where a field is first read."""
    if raw is None:
        return None
    check_receipt(raw, method)
    return LazyReceipt(raw)


#: 0x and hex digits, any number (a quantity needs one at least; a hash's width is checked apart).
_HEX = re.compile(r"0x[0-9a-fA-F]*").fullmatch
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}").fullmatch
#: What each field :func:`format_receipt` formats must be: a quantity, bytes of a width (0: any), an address.
_QUANTITY, _ADDRESS_KIND, _LOGS, _TOPICS = -1, -2, -3, -4
_RECEIPT_KINDS: dict[str, int] = {
    **dict.fromkeys(_RECEIPT_QUANTITIES, _QUANTITY),
    **dict.fromkeys(_RECEIPT_ADDRESSES, _ADDRESS_KIND),
    "blockHash": 32,
    "transactionHash": 32,
    "logsBloom": 256,
    "root": 0,
    "logs": _LOGS,
}
_LOG_KINDS: dict[str, int] = {
    **dict.fromkeys(_LOG_QUANTITIES, _QUANTITY),
    "blockHash": 32,
    "transactionHash": 32,
    "data": 0,
    "address": _ADDRESS_KIND,
    "topics": _TOPICS,
}


def _fault(kind: int, value: Any) -> str | None:
    """Why ``value`` is not what a field of ``kind`` must be (None: it is, or it is null)."""
    if isinstance(value, str):
        if kind == _ADDRESS_KIND:  # "": the in-process chain's "no address" (a creation's ``to``)
            return None if not value or _ADDRESS(value) else "not a 20-byte 0x-hex address"
        if not _HEX(value):
            return "not 0x-hex"
        if kind == _QUANTITY:
            if len(value) == 2:
                return "not a 0x-hex quantity"
            return "wider than 256 bits" if len(value) > _MAX_QUANTITY else None
        return f"{len(value) // 2 - 1} bytes, not {kind}" if kind and len(value) != 2 + 2 * kind else None
    if value is None:
        return None
    if type(value) is int:  # the in-process chain's numbers (and its bloom)
        if kind == _QUANTITY:
            return None if -(1 << 256) < value < 1 << 256 else "wider than 256 bits"
        if kind > 0:
            return None if 0 <= value < 1 << (8 * kind) else f"wider than {kind} bytes"
    elif isinstance(value, (bytes, bytearray)) and kind >= 0:
        return f"{len(value)} bytes, not {kind}" if kind and len(value) != kind else None
    return f"not {'a quantity' if kind == _QUANTITY else 'an address' if kind == _ADDRESS_KIND else 'bytes'} but {type(value).__name__}"


def check_receipt(raw: Any, method: str = "eth_getTransactionReceipt") -> None:
    """Raise :class:`~chainfence.errors.MalformedReply` naming the first field of the node's receipt ``raw``
    that :func:`format_receipt` could not read or that is out of its shape (a quantity that is not 0x-hex or
    is wider than 256 bits, a hash not 32 bytes, a bloom not 256, an address not 20, logs that are not a
    list of logs of such fields, at most 4 topics of 32 bytes), or ``raw`` itself when it is no object.
    Nothing is built (a third of the cost of formatting it): what a :class:`LazyReceipt` formats later
    then reads."""
    if not isinstance(raw, dict):
        raise MalformedReply(method=method, field="", value=raw, reason=f"not an object but {type(raw).__name__}")
    kinds = _RECEIPT_KINDS
    for key, value in raw.items():
        kind = kinds.get(key)
        if kind is None:
            continue
        if kind != _LOGS:
            why = _fault(kind, value)
            if why is not None:
                raise MalformedReply(method=method, field=key, value=value, reason=why)
        elif type(value) is not list:
            raise MalformedReply(method=method, field=key, value=value, reason="not a list of logs")
        else:
            for index, log in enumerate(value):
                _check_log(log, f"logs[{index}]", method)


#: A log as a node sends it, its fields joined by NULs in :func:`_check_log`'s order (address, block hash,
#: transaction hash, block number, log index, transaction index, data, the topics): the common case checked
#: by one match.
_LOG_SHAPE = re.compile(
    r"0x[0-9a-fA-F]{40}\x00(?:0x[0-9a-fA-F]{64}\x00){2}(?:0x[0-9a-fA-F]{1,64}\x00){3}0x(?:[0-9a-fA-F]{2})*"
    r"(?:\x000x[0-9a-fA-F]{64}){0,4}"
).fullmatch


def _check_log(log: Any, where: str, method: str) -> None:
    try:  # a node's log, every field there and a string: one match (any other: field by field, below)
        if _LOG_SHAPE(
            "\0".join(
                (
                    log["address"],
                    log["blockHash"],
                    log["transactionHash"],
                    log["blockNumber"],
                    log["logIndex"],
                    log["transactionIndex"],
                    log["data"],
                    *log["topics"],
                )
            )
        ):
            return
    except (KeyError, TypeError):
        pass
    if type(log) is not dict:
        raise MalformedReply(method=method, field=where, value=log, reason="not a log object")
    kinds = _LOG_KINDS
    for key, value in log.items():
        kind = kinds.get(key)
        if kind is None:
            continue
        if kind != _TOPICS:
            why = _fault(kind, value)
        elif type(value) is not list or len(value) > 4:
            why = "not a list of at most 4 topics"
        else:
            why = next((f"a topic is {bad}" for topic in value if (bad := _fault(32, topic)) is not None), None)
        if why is not None:
            raise MalformedReply(method=method, field=f"{where}.{key}", value=value, reason=why)


def raw_logs(receipt: Any) -> list[Any]:
    """The logs of ``receipt`` as the node sent them where it is a :class:`LazyReceipt` whose logs were not
    formatted yet (hex strings, lower-case addresses), else as formatted; :func:`chainfence._node.events.decode`
    reads both."""
    if type(receipt) is LazyReceipt and "logs" not in receipt.__dict__:
        return receipt._raw["logs"]  # type: ignore[no-any-return]
    return receipt["logs"]  # type: ignore[no-any-return]


def _storage_key(value: Any) -> Any:
    """A storage key as web3 returns it in an access list: 0x and 64 lower-case hex digits."""
    if isinstance(value, str) and value.startswith("0x"):
        return "0x" + value[2:].lower().rjust(64, "0")
    return value


def _each(formatter: Any) -> Any:
    return lambda values: values if values is None else [formatter(value) for value in values]


def _fields(table: dict[str, Any]) -> Any:
    """A formatter of a JSON object: each field its table's function (None stays None), the rest as is."""

    def format_object(raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        return AttributeDict(
            {key: (table[key](value) if key in table and value is not None else value) for key, value in raw.items()}
        )

    return format_object


_ACCESS_LIST_ENTRY = _fields({"address": _address, "storageKeys": _each(_storage_key)})
_AUTHORIZATION = _fields(
    {
        "chainId": _quantity,
        "address": _address,
        "nonce": _quantity,
        "yParity": _quantity,
        "r": _quantity,
        "s": _quantity,
    }
)
_WITHDRAWAL = _fields({"index": _quantity, "validatorIndex": _quantity, "address": _address, "amount": _quantity})

#: A transaction as web3's ``eth.get_transaction`` returns it (web3's TRANSACTION_RESULT_FORMATTERS, without
#: importing web3's private module): ``tests/unit/test_lean_http.py`` holds it to web3's own formatter.
format_transaction = _fields(
    {
        **dict.fromkeys(
            (
                "blockNumber",
                "transactionIndex",
                "nonce",
                "gas",
                "gasPrice",
                "maxFeePerGas",
                "maxPriorityFeePerGas",
                "value",
                "v",
                "yParity",
                "standardV",
                "type",
                "chainId",
                "maxFeePerBlobGas",
            ),
            _quantity,
        ),
        **dict.fromkeys(("blockHash", "publicKey", "r", "s", "raw", "hash", "input", "data"), _hexbytes),
        "from": _address,
        "to": _address,
        "accessList": _each(_ACCESS_LIST_ENTRY),
        "blobVersionedHashes": _each(_hexbytes),
        "authorizationList": _each(_AUTHORIZATION),
    }
)


def _transactions(values: list[Any]) -> list[Any]:
    return [format_transaction(value) if isinstance(value, dict) else _hexbytes(value) for value in values]


#: A block as web3's ``eth.get_block`` returns it (web3's BLOCK_RESULT_FORMATTERS, without its private module).
format_block = _fields(
    {
        **dict.fromkeys(
            (
                "baseFeePerGas",
                "gasLimit",
                "gasUsed",
                "size",
                "timestamp",
                "number",
                "difficulty",
                "totalDifficulty",
                "blobGasUsed",
                "excessBlobGas",
            ),
            _quantity,
        ),
        **dict.fromkeys(
            (
                "extraData",
                "hash",
                "logsBloom",
                "mixHash",
                "nonce",
                "parentHash",
                "sha3Uncles",
                "receiptsRoot",
                "stateRoot",
                "transactionsRoot",
                "withdrawalsRoot",
                "parentBeaconBlockRoot",
                "requestsHash",
            ),
            _hexbytes,
        ),
        "miner": _address,
        "uncles": _each(_hexbytes),
        "transactions": _transactions,
        "withdrawals": _each(_WITHDRAWAL),
    }
)


def format_log(raw: Any) -> Any:
    """A log as web3's ``eth.get_logs`` returns it, from the node's JSON."""
    return _log_entry(raw) if isinstance(raw, dict) else raw


def _hex(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, int) and not isinstance(value, bool):
        return hex(value)
    return value


def call_object(tx: dict[str, Any]) -> dict[str, Any]:
    """An eth_call / eth_estimateGas transaction object in JSON-RPC form."""
    return {key: _hex(value) for key, value in tx.items() if value is not None}


def hash_id(value: Any) -> str:
    """A transaction or block hash (0x-hex, bytes or ``HexBytes``) as JSON-RPC wants it."""
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    text = str(value)
    return text if text.startswith("0x") else "0x" + text


def block_id(block: str | int) -> str:
    """A block number or tag (``"latest"``, ``"pending"`` ...) as JSON-RPC wants it."""
    return hex(block) if isinstance(block, int) and not isinstance(block, bool) else str(block)


def log_filter(filter_params: dict[str, Any]) -> dict[str, Any]:
    """An eth_getLogs filter as JSON-RPC wants it (block numbers in hex, topics and bytes as 0x-hex)."""
    params = dict(filter_params)
    for key in ("fromBlock", "toBlock"):
        if isinstance(params.get(key), int):
            params[key] = hex(params[key])
    if isinstance(params.get("topics"), (list, tuple)):
        params["topics"] = [
            [_hex(one) for one in topic] if isinstance(topic, (list, tuple)) else _hex(topic)
            for topic in params["topics"]
        ]
    return params
