"""Turn a revert, whatever provider raised it, into a chainfence error.

Two shapes reach us for the same custom error:

- eth-tester (through web3's EthereumTesterProvider) raises
  ``eth_tester.exceptions.TransactionFailed("execution reverted: b'\\xbe\\x88...'")``:
  the raw revert bytes, as a Python bytes literal inside a message string
  (or, called directly, the bytes themselves);
- JSON-RPC nodes (anvil, geth, ...) make web3 raise
  ``web3.exceptions.ContractCustomError`` whose ``data`` is the revert data
  as 0x-hex (``ContractLogicError``/``ContractPanicError`` for string and
  panic reverts, ``Web3RPCError`` with ``error.data`` in older paths);
- the node layer's own :class:`~chainfence._node.transports.ErrorReply` carries
  the node's error object: the revert data are ``error.data`` (anvil, hardhat,
  geth), ``error.data.data`` (some providers nest them), or
  ``error.data.result`` (ganache's ``eth_estimateGas``: ``{"message": "revert",
  "programCounter": ..., "result": "0x..."}``).

:func:`revert_data` extracts the bytes from any of them; :func:`decode`
maps the 4-byte selector to its class through one table built from the
registry's ABI and :data:`chainfence.errors.CONTRACT_ERRORS`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ..errors import CONTRACT_ERRORS, ChainfenceError, UnknownRevert
from . import artifacts as _artifacts
from .abi import decode as abi_decode
from .addresses import to_checksum_address
from .rlp import keccak256

_ERROR_STRING_SELECTOR = bytes.fromhex("08c379a0")  # Error(string)
_PANIC_SELECTOR = bytes.fromhex("4e487b71")  # Panic(uint256)
_EXECUTION_REVERTED = "execution reverted"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _signature(entry: dict[str, Any]) -> str:
    return f"{entry['name']}({','.join(_canonical_type(i) for i in entry['inputs'])})"


def _canonical_type(param: dict[str, Any]) -> str:
    kind = str(param["type"])
    if kind.startswith("tuple"):  # pragma: no cover - the registry's errors use no tuples
        inner = ",".join(_canonical_type(c) for c in param["components"])
        return f"({inner}){kind[5:]}"
    return kind


@functools.cache
def error_table() -> dict[bytes, tuple[type[ChainfenceError], dict[str, Any]]]:
    """4-byte selector -> (class, ABI entry) for every custom error of the shipped contracts.

    Raises ``RuntimeError`` if the ABI has an error without a Python class: a
    test keeps that from shipping.
    """
    table = {}
    for contract in _artifacts.SHIPPED:
        for entry in _artifacts.abi(contract):
            if entry["type"] != "error":
                continue
            cls = CONTRACT_ERRORS.get(entry["name"])
            if cls is None:
                raise RuntimeError(f"contract error {entry['name']} has no Python class in chainfence.errors")
            table[keccak256(_signature(entry).encode())[:4]] = (cls, entry)
    return table


def decode(data: bytes) -> ChainfenceError:
    """The chainfence error for revert ``data`` (:class:`UnknownRevert` if none fits)."""
    selector, payload = data[:4], data[4:]
    known = error_table().get(selector)
    if known is not None:
        cls, entry = known
        try:
            values = abi_decode([_canonical_type(i) for i in entry["inputs"]], payload)
        except Exception:  # malformed payload for a known selector
            return UnknownRevert(f"malformed {entry['name']} revert: 0x{data.hex()}", data=data)
        fields = {}
        for param, value in zip(entry["inputs"], values):
            key = "resource_id" if param["name"] == "resource" else _snake(param["name"])
            if param["type"] == "address":
                value = to_checksum_address(value)
            fields[key] = value
        return cls.from_revert(**fields)
    if selector == _ERROR_STRING_SELECTOR:
        try:
            (reason,) = abi_decode(["string"], payload)
        except Exception:
            reason = "0x" + payload.hex()
        return UnknownRevert(f"reverted: {reason}", data=data)
    if selector == _PANIC_SELECTOR:
        try:
            (code,) = abi_decode(["uint256"], payload)
        except Exception:
            code = -1
        return UnknownRevert(f"reverted with panic code {code:#x}", data=data)
    if not data:
        return UnknownRevert("reverted without data", data=data)
    return UnknownRevert(f"reverted with unknown data 0x{data.hex()}", data=data)


def _bytes_from_message(message: str) -> bytes | None:
    """Revert bytes from eth-tester's ``"execution reverted: b'...'"`` message."""
    text = message
    if text.startswith(_EXECUTION_REVERTED):
        text = text[len(_EXECUTION_REVERTED) :].lstrip(": ")
    if text[:2] in ("b'", 'b"'):
        import ast  # here: only eth-tester's messages need it (a per-task CLI command imports none, issue #19)

        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None
        return value if isinstance(value, bytes) else None
    if text.startswith("0x") and re.fullmatch(r"0x(?:[0-9a-fA-F]{2})*", text):
        return bytes.fromhex(text[2:])
    return None


def _nested(data: Any) -> Any:
    """The revert data inside an error's ``data`` object, where a node nests them: ``{"message": ...,
    "data": "0x..."}``, or ganache's ``{"message": "revert", "programCounter": ..., "result": "0x..."}``."""
    if not isinstance(data, dict):
        return data
    if data.get("data") is not None:
        return data["data"]
    return data.get("result")


def _hex(data: str) -> bytes | None:
    try:
        return bytes.fromhex(data[2:])
    except ValueError:
        return None


def revert_data(exc: BaseException) -> bytes | None:
    """The raw revert data carried by a provider exception, or None if it is not a revert."""
    # web3: ContractCustomError / ContractLogicError / ContractPanicError carry ``data``.
    data = _nested(getattr(exc, "data", None))
    if isinstance(data, str) and data.startswith("0x"):
        return _hex(data)
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    # web3 Web3RPCError and the node layer's ErrorReply: the node's error object.
    response = getattr(exc, "rpc_response", None)
    if isinstance(response, dict):
        error = response.get("error")
        nested = _nested(error.get("data")) if isinstance(error, dict) else None
        if isinstance(nested, str) and nested.startswith("0x"):
            return _hex(nested)
    # eth-tester: TransactionFailed(bytes | "execution reverted: b'...'" | Exception).
    if type(exc).__name__ == "TransactionFailed" and exc.args:
        first = exc.args[0]
        if isinstance(first, BaseException):
            return revert_data(first)
        if isinstance(first, (bytes, bytearray)):
            return bytes(first)
        if isinstance(first, str):
            return _bytes_from_message(first)
    return None


def is_revert(exc: BaseException) -> bool:
    """Whether ``exc`` is a provider's way of saying "the EVM reverted"."""
    if revert_data(exc) is not None:
        return True
    name = type(exc).__name__
    if name in ("ContractLogicError", "ContractCustomError", "ContractPanicError", "TransactionFailed"):
        return True
    return _EXECUTION_REVERTED in str(exc)


def translate(exc: BaseException, *, resource: str | None = None) -> ChainfenceError | None:
    """The chainfence error for a provider exception that is a revert, else None.

    ``resource`` (the name the caller used) is attached to lease errors, whose
    revert data only carries the hash (the node layer passes none: the SDK
    names the resource on the way up, :class:`~chainfence.Chain`).
    """
    if isinstance(exc, ChainfenceError):
        return exc
    data = revert_data(exc)
    if data is None:
        if not is_revert(exc):
            return None
        message = str(exc)
        if message.startswith(_EXECUTION_REVERTED + ": "):
            message = message[len(_EXECUTION_REVERTED) + 2 :]
        return UnknownRevert(f"reverted: {message}")
    error = decode(data)
    if resource is not None and hasattr(error, "with_resource"):
        error.with_resource(resource)
    return error
