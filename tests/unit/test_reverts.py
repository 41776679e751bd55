"""Revert decoding: the same custom error, whichever provider shape carries it."""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_tester.exceptions import TransactionFailed
from eth_utils import keccak
from web3.exceptions import ContractCustomError, ContractLogicError, ContractPanicError, Web3RPCError

from chainfence._node import artifacts as _artifacts
from chainfence._node.reverts import decode, revert_data, translate
from chainfence.errors import (
    CONTRACT_ERRORS,
    InvalidTtl,
    LeaseHeld,
    NotHolder,
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


# The shapes providers actually raise (web3's ContractCustomError with hex data, eth-tester's TransactionFailed).
SHAPES = {
    "eth-tester via web3 (message with a bytes literal)": lambda d: TransactionFailed(f"execution reverted: {d!r}"),
    "eth-tester backend (raw bytes)": lambda d: TransactionFailed(d),
    "eth-tester wrapped exception": lambda d: TransactionFailed(TransactionFailed(d)),
    "node via web3 (ContractCustomError hex)": lambda d: ContractCustomError("0x" + d.hex(), data="0x" + d.hex()),
    "node nested data dict": lambda d: ContractLogicError("execution reverted", data={"data": "0x" + d.hex()}),
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
