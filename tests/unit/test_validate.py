"""Argument validation (no chain): the checks every entry point shares."""

from __future__ import annotations

import pytest
from eth_utils import keccak

from chainfence._sdk import validate as _validate
from chainfence.errors import InvalidInput, InvalidResourceName, InvalidTtl


def test_resource_id_is_keccak_of_utf8():
    assert _validate.resource_id("reports/daily") == keccak(b"reports/daily")
    assert _validate.resource_id("é") == keccak("é".encode())


@pytest.mark.parametrize("name", ["a", "x" * 128, "é" * 64, "with space", "emoji-🙂"])
def test_names_up_to_128_utf8_bytes_are_valid(name):
    assert _validate.resource_bytes(name) == name.encode()


@pytest.mark.parametrize("name", ["", "x" * 129, "é" * 65, "\udc80", None, b"x", 1])
def test_other_names_are_invalid(name):
    with pytest.raises(InvalidResourceName):
        _validate.resource_bytes(name)


def test_invalid_name_messages_say_what_is_wrong():
    with pytest.raises(InvalidResourceName, match="empty"):
        _validate.resource_bytes("")
    with pytest.raises(InvalidResourceName, match="1 to 128 bytes.*129"):
        _validate.resource_bytes("x" * 129)
    with pytest.raises(InvalidResourceName, match="must be a str"):
        _validate.resource_bytes(b"x")


@pytest.mark.parametrize("ttl", [1, 60, 3600])
def test_ttls_within_bounds_are_valid(ttl):
    assert _validate.ttl(ttl, 3600) == ttl


@pytest.mark.parametrize("ttl", [0, -1, 3601, 1.0, "1", True, False, None])
def test_other_ttls_are_invalid(ttl):
    with pytest.raises(InvalidTtl):
        _validate.ttl(ttl, 3600)


@pytest.mark.parametrize("token", [1, 2**48, 2**256 - 1])
def test_tokens_from_one_to_uint256_max_are_valid(token):
    assert _validate.token(token) == token


@pytest.mark.parametrize("token", [0, -1, 2**256, 1.0, "1", True, None])
def test_other_tokens_are_invalid(token):
    with pytest.raises(InvalidInput):
        _validate.token(token)


def test_addresses_are_checksummed_and_checked():
    lower = "0x2b5ad5c4795c026514f8317c7a215e218dccd6cf"
    checksummed = "0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF"
    assert _validate.address(lower) == checksummed
    assert _validate.address(lower.upper().replace("0X", "0x")) == checksummed
    assert _validate.address(bytes.fromhex(lower[2:])) == checksummed
    with pytest.raises(InvalidInput, match="checksum"):
        _validate.address("0x2b" + checksummed[4:])
    for bad in ("2b5ad5c4795c026514f8317c7a215e218dccd6cf", "0x2b5a", "", None, 5):
        with pytest.raises(InvalidInput):
            _validate.address(bad)
