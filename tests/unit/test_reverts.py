"""Revert decoding: the same custom error, whichever provider shape carries it."""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_tester.exceptions import TransactionFailed
from eth_utils import keccak
from web3.exceptions import ContractCustomError, ContractLogicError, ContractPanicError, Web3RPCError

from chainfence._node import artifacts as _artifacts
from chainfence._node.failures import translate as translate_failure
from chainfence._node.reverts import decode, revert_data, translate
from chainfence._node.transports import ErrorReply
from chainfence.errors import (
    CONTRACT_ERRORS,
    InvalidTtl,
    LeaseHeld,
    NotHolder,
    RpcError,
    StaleToken,
    UnknownRevert,
)

RESOURCE = keccak(b"reports/daily")
HOLDER = "0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF"


def selector(signature: str) -> bytes:
    return keccak(text=signature)[:4]


def lease_held_data() -> bytes:
    return selector("FencingRegistryLeaseHeld(bytes32,address,uint256,uint256)") + encode(
        ["bytes32", "address", "uint256", "uint256"], [RESOURCE, HOLDER, 7, 1_800_000_000]
    )


def ganache_estimate_reply(data: bytes) -> dict:
    """ganache 7.9.2's reply to an eth_estimateGas that reverts, as it sent it (its stack shortened)."""
    return {
        "id": 1,
        "jsonrpc": "2.0",
        "error": {
            "message": "VM Exception while processing transaction: revert",
            "stack": "RuntimeError: VM Exception while processing transaction: revert\n    at exactimate (...)",
            "code": -32000,
            "name": "RuntimeError",
            "data": {
                "hash": None,
                "programCounter": 12221,
                "result": "0x" + data.hex(),
                "reason": None,
                "message": "revert",
            },
        },
    }


# The shapes providers actually raise (web3's ContractCustomError with hex data, eth-tester's TransactionFailed).
SHAPES = {
    "eth-tester via web3 (message with a bytes literal)": lambda d: TransactionFailed(f"execution reverted: {d!r}"),
    "eth-tester backend (raw bytes)": lambda d: TransactionFailed(d),
    "eth-tester wrapped exception": lambda d: TransactionFailed(TransactionFailed(d)),
    "node via web3 (ContractCustomError hex)": lambda d: ContractCustomError("0x" + d.hex(), data="0x" + d.hex()),
    "node nested data dict": lambda d: ContractLogicError("execution reverted", data={"data": "0x" + d.hex()}),
    "node layer's ErrorReply: error.data (anvil, hardhat)": lambda d: ErrorReply(
        "eth_estimateGas", {"error": {"code": 3, "message": "execution reverted", "data": "0x" + d.hex()}}
    ),
    "node layer's ErrorReply: error.data.data": lambda d: ErrorReply(
        "eth_estimateGas", {"error": {"code": -32000, "message": "revert", "data": {"data": "0x" + d.hex()}}}
    ),
    "node layer's ErrorReply: ganache's eth_estimateGas (error.data.result)": lambda d: ErrorReply(
        "eth_estimateGas", ganache_estimate_reply(d)
    ),
    "raw JSON-RPC error": lambda d: Web3RPCError(
        "execution reverted",
        rpc_response={
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": 3, "message": "execution reverted", "data": "0x" + d.hex()},
        },
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_provider_shape_decodes_to_the_same_error(shape):
    data = lease_held_data()
    error = translate(SHAPES[shape](data), resource="reports/daily")
    assert isinstance(error, LeaseHeld)
    assert (error.holder, error.token, error.expires_at, error.resource_id, error.resource) == (
        HOLDER,
        7,
        1_800_000_000,
        RESOURCE,
        "reports/daily",
    )


def test_eth_tester_message_with_quotes_and_backslashes_decodes():
    """Bytes whose repr needs escaping (quotes, backslashes) still round-trip."""
    data = selector("FencingRegistryStaleToken(bytes32,uint256,uint256)") + encode(
        ["bytes32", "uint256", "uint256"], [b"'\"\\" + b"\x00" * 29, 3, 5]
    )
    error = translate(TransactionFailed(f"execution reverted: {data!r}"))
    assert isinstance(error, StaleToken)
    assert (error.token, error.current_token) == (3, 5)


@pytest.mark.parametrize("name", sorted(CONTRACT_ERRORS))
def test_every_abi_error_decodes_to_its_class(name):
    """Round-trip every custom error of the ABI through encode -> decode."""
    entry = next(e for c in _artifacts.SHIPPED for e in _artifacts.abi(c) if e["type"] == "error" and e["name"] == name)
    types = [i["type"] for i in entry["inputs"]]
    samples = {"bytes32": RESOURCE, "address": HOLDER, "uint256": 42}
    data = selector(f"{name}({','.join(types)})") + encode(types, [samples[t] for t in types])
    error = decode(data)
    assert type(error) is CONTRACT_ERRORS[name]
    assert str(error)


def test_addresses_are_checksummed():
    data = selector("FencingRegistryNotHolder(bytes32,uint256,address,address)") + encode(
        ["bytes32", "uint256", "address", "address"], [RESOURCE, 1, HOLDER.lower(), HOLDER.lower()]
    )
    error = decode(data)
    assert isinstance(error, NotHolder)
    assert error.account == HOLDER and error.holder == HOLDER


def test_decoded_input_errors_are_value_errors():
    data = selector("FencingRegistryInvalidTtl(uint256,uint256)") + encode(["uint256", "uint256"], [0, 60])
    error = decode(data)
    assert isinstance(error, InvalidTtl) and isinstance(error, ValueError)
    assert (error.ttl, error.max_ttl) == (0, 60)


def test_string_reverts_and_panics_are_unknown_reverts_with_their_reason():
    reason = bytes.fromhex("08c379a0") + encode(["string"], ["not ours"])
    panic = bytes.fromhex("4e487b71") + encode(["uint256"], [0x11])
    assert "not ours" in str(translate(ContractLogicError("execution reverted: not ours", data="0x" + reason.hex())))
    assert "0x11" in str(translate(ContractPanicError("panic", data="0x" + panic.hex())))
    assert isinstance(translate(TransactionFailed("execution reverted: not ours")), UnknownRevert)


def test_unknown_selectors_and_malformed_payloads_are_reported_not_guessed():
    unknown = decode(bytes.fromhex("deadbeef") + b"\x00" * 32)
    assert isinstance(unknown, UnknownRevert) and unknown.data.startswith(b"\xde\xad")
    truncated = lease_held_data()[:40]
    malformed = decode(truncated)
    assert isinstance(malformed, UnknownRevert) and "malformed" in str(malformed)
    assert isinstance(decode(b""), UnknownRevert)


def test_exceptions_that_are_not_reverts_are_left_alone():
    assert translate(ConnectionError("refused")) is None
    assert translate(ValueError("something else")) is None
    assert revert_data(RuntimeError("x")) is None


def test_ganache_estimate_revert_is_the_contract_error_through_the_node_layer():
    """Issue 29: ganache puts an eth_estimateGas revert's data in ``error.data.result``; every refusal of a
    transaction's preflight (LeaseHeld, LeaseRevoked, ...) was an untyped RpcError there, and the CLI
    exited 1 instead of 3."""
    error = translate_failure(
        ErrorReply("eth_estimateGas", ganache_estimate_reply(lease_held_data())), "eth_estimateGas"
    )
    assert type(error) is LeaseHeld and (error.holder, error.token) == (HOLDER, 7)


def control_read_only_error_data_data(exc: ErrorReply) -> bytes | None:
    """The reader before issue 29: ``error.data``, or ``error.data.data`` when ``error.data`` is an object."""
    data = exc.rpc_response["error"].get("data")
    if isinstance(data, dict):
        data = data.get("data")
    return bytes.fromhex(data[2:]) if isinstance(data, str) and data.startswith("0x") else None


def test_control_reading_only_error_data_data_loses_ganaches_revert():
    """The control: the reader that read only ``error.data.data`` finds no revert in ganache's reply (so the
    node layer made it an RpcError), where it finds one in the nested shape it knew."""
    ganache = ErrorReply("eth_estimateGas", ganache_estimate_reply(lease_held_data()))
    nested = SHAPES["node layer's ErrorReply: error.data.data"](lease_held_data())
    assert control_read_only_error_data_data(ganache) is None
    assert control_read_only_error_data_data(nested) == lease_held_data()
    stripped = ganache_estimate_reply(lease_held_data())
    del stripped["error"]["data"]["result"]  # what the node layer saw of it before: no revert data at all
    assert type(translate_failure(ErrorReply("eth_estimateGas", stripped), "eth_estimateGas")) is RpcError


def test_a_ganache_error_without_revert_data_is_not_a_revert():
    """A ganache error whose object has no ``result`` (a method it does not know) stays an RpcError."""
    reply = {"error": {"message": "The method evm_setNextBlockTimestamp does not exist/is not available"}}
    assert revert_data(ErrorReply("evm_setNextBlockTimestamp", reply)) is None
    assert (
        type(translate_failure(ErrorReply("evm_setNextBlockTimestamp", reply), "evm_setNextBlockTimestamp")) is RpcError
    )
