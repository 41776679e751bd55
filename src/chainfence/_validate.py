"""Argument checks shared by the SDK, the guard and the CLI.

Every public entry point validates before it touches the chain or a store,
so bad input costs nothing and changes nothing.
"""

from __future__ import annotations

from eth_utils import is_checksum_address, is_hex_address, keccak, to_checksum_address

from .errors import InvalidAddress, InvalidResourceName, InvalidToken, InvalidTtl

#: Longest resource name, in bytes of UTF-8; the contract enforces the same bound.
MAX_NAME_LENGTH = 128

#: Tokens are uint256 in the ABI.
MAX_TOKEN = 2**256 - 1


def resource_id(name: object) -> bytes:
    """The on-chain id of resource ``name``: ``keccak256(utf8(name))``, after validating it."""
    return keccak(resource_bytes(name))


def resource_bytes(name: object) -> bytes:
    """``name`` as UTF-8, after checking it is a str of 1 to MAX_NAME_LENGTH bytes."""
    if not isinstance(name, str):
        raise InvalidResourceName(f"resource name must be a str, got {type(name).__name__}")
    try:
        data = name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidResourceName(f"resource name is not valid UTF-8: {exc.reason}") from None
    if not data:
        raise InvalidResourceName("resource name must not be empty", length=0, max_length=MAX_NAME_LENGTH)
    if len(data) > MAX_NAME_LENGTH:
        raise InvalidResourceName(length=len(data), max_length=MAX_NAME_LENGTH)
    return data


def ttl(value: object, max_ttl: int) -> int:
    """``value`` as a ttl in seconds, after checking 1 <= value <= max_ttl (ints only)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTtl(
            f"ttl must be an int number of seconds, got {type(value).__name__} {value!r}",
            ttl=value,
            max_ttl=max_ttl,
        )
    if value < 1 or value > max_ttl:
        raise InvalidTtl(ttl=value, max_ttl=max_ttl)
    return value


def token(value: object) -> int:
    """``value`` as a fencing token, after checking it is an int from 1 to 2**256 - 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidToken(f"a fencing token must be an int, got {type(value).__name__} {value!r}", token=value)
    if value < 1 or value > MAX_TOKEN:
        raise InvalidToken(token=value)
    return value


def address(value: object, what: str = "address") -> str:
    """``value`` as a checksummed address; mixed-case input must carry a valid checksum."""
    if isinstance(value, (bytes, bytearray)) and len(value) == 20:
        return to_checksum_address(bytes(value))
    if not isinstance(value, str) or not value.startswith("0x") or not is_hex_address(value):
        raise InvalidAddress(f"{what} must be a 0x-prefixed 20-byte hex address, got {value!r}")
    if value != value.lower() and value[2:] != value[2:].upper() and not is_checksum_address(value):
        raise InvalidAddress(f"{what} {value} has an invalid EIP-55 checksum (mistyped?)")
    return to_checksum_address(value)
