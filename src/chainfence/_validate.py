"""Argument checks shared by the SDK, the guard and the CLI.

Every public entry point validates before it touches the chain or a store,
so bad input costs nothing and changes nothing.
"""

from __future__ import annotations

from eth_utils import is_checksum_address, is_hex_address, to_checksum_address

from ._names import MAX_NAME_LENGTH, publishable, resource_bytes, resource_id
from .errors import InvalidAddress, InvalidToken, InvalidTtl, InvalidWait

__all__ = [
    "MAX_NAME_LENGTH", "MAX_TOKEN", "MAX_WAIT", "address", "publishable", "resource_bytes", "resource_id", "token",
    "ttl", "wait",
]  # fmt: skip

#: Tokens are uint256 in the ABI.
MAX_TOKEN = 2**256 - 1

#: The longest ``wait=`` accepted: a year of seconds.
MAX_WAIT = 31_536_000


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


def wait(value: object) -> float:
    """``value`` as seconds to wait for a held resource (0.0: do not wait), after checking it is None
    or a finite int or float from 0 to :data:`MAX_WAIT` (not a bool, not NaN)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidWait(
            f"wait must be None or a number of seconds, got {type(value).__name__} {value!r}", wait=value
        )
    if not 0 <= value <= MAX_WAIT:  # NaN compares false; inf and huge ints are above
        raise InvalidWait(wait=value)
    return float(value)
