"""Argument checks shared by the SDK, the guard and the CLI.

Every public entry point validates before it touches the chain or a store,
so bad input costs nothing and changes nothing.
"""

from __future__ import annotations

import functools

from eth_utils import is_checksum_address, is_hex_address, keccak, to_checksum_address

from ._names import MAX_NAME_LENGTH, publishable, resource_bytes, resource_id
from .errors import InvalidAddress, InvalidInput, InvalidProgress, InvalidToken, InvalidTtl, InvalidWait

__all__ = [
    "MAX_NAME_LENGTH", "MAX_TOKEN", "MAX_WAIT", "address", "assignable_prefix", "namespace_prefix", "progress", "publishable", "resource_bytes", "resource_id",
    "token", "ttl", "wait",
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


def namespace_prefix(value: object) -> str:
    """``value`` as a namespace prefix to administer or read: a publishable name of 1 to 127 bytes with
    no ``/`` that, if it looks like an address, is spelled as an address namespace (lowercase)."""
    from ._names import address_namespace, is_address_namespace, looks_like_address
    from .errors import InvalidNamespace

    if not isinstance(value, str):
        raise InvalidNamespace(f"a namespace must be a str, got {type(value).__name__}")
    if "/" in value:
        raise InvalidNamespace(f"a namespace is a name's part before its first '/': {value!r} contains '/'")
    try:
        publishable(value)
    except InvalidInput as bad:
        raise InvalidNamespace(f"invalid namespace {value!r}: {bad}") from None
    if len(value.encode("utf-8")) > MAX_NAME_LENGTH - 1:
        raise InvalidNamespace(f"a namespace is at most {MAX_NAME_LENGTH - 1} bytes of UTF-8")
    if looks_like_address(value) and not is_address_namespace(value):
        raise InvalidNamespace(
            f"{value!r} looks like an address but is not an address namespace: that is "
            f"{address_namespace(value)!r} (lowercase); as written nobody administers it"
        )
    return value


def assignable_prefix(value: object) -> str:
    """``value`` as a namespace the deployer may assign: :func:`namespace_prefix`, and not shaped like an
    address (42 bytes starting ``0x``, which the registry refuses: those are their address's)."""
    from .errors import InvalidNamespace

    prefix = namespace_prefix(value)
    if len(prefix.encode("utf-8")) == 42 and prefix.startswith("0x"):
        raise InvalidNamespace(
            f"{prefix!r} is shaped like an address namespace (42 bytes starting '0x'): an address namespace "
            "belongs to its address from the start and cannot be assigned; assign another prefix, or let the "
            "address hand it over (transfer_namespace_admin)"
        )
    return prefix


def token(value: object) -> int:
    """``value`` as a fencing token, after checking it is an int from 1 to 2**256 - 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidToken(f"a fencing token must be an int, got {type(value).__name__} {value!r}", token=value)
    if value < 1 or value > MAX_TOKEN:
        raise InvalidToken(token=value)
    return value


def progress(value: object) -> bytes:
    """``value`` as a 32-byte progress marker (see :meth:`Registry.renew <chainfence.Registry.renew>`).

    ``bytes`` of 1 to 32 bytes are recorded as given, right-padded with zeros
    (as Solidity's ``bytes32("...")``); an ``int`` from 1 to 2**256 - 1 as a
    big-endian counter; a ``str`` (any length) as the keccak256 of its UTF-8.
    A marker of all zeros reads on-chain as "nothing reported" and is refused.
    """
    if isinstance(value, bool):
        raise InvalidProgress(value)
    if isinstance(value, int):
        if not 1 <= value < 2**256:
            raise InvalidProgress(value)
        return value.to_bytes(32, "big")
    if isinstance(value, str):
        try:
            return keccak(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidProgress(value, why="a str marker must be encodable as UTF-8") from None
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if not 1 <= len(data) <= 32 or not any(data):
            raise InvalidProgress(value)
        return data.ljust(32, b"\0")
    raise InvalidProgress(value)


def address(value: object, what: str = "address") -> str:
    """``value`` as a checksummed address; mixed-case input must carry a valid checksum."""
    if isinstance(value, (bytes, bytearray)) and len(value) == 20:
        return to_checksum_address(bytes(value))
    if not isinstance(value, str) or not value.startswith("0x") or not is_hex_address(value):
        raise InvalidAddress(f"{what} must be a 0x-prefixed 20-byte hex address, got {value!r}")
    checked = _checksummed(value)
    if checked is None:
        raise InvalidAddress(f"{what} {value} has an invalid EIP-55 checksum (mistyped?)")
    return checked


@functools.lru_cache(maxsize=4096)
def _checksummed(value: str) -> str | None:
    """The checksummed form of a hex address, None if it is mixed-case with a wrong checksum
    (cached: every transaction checks its sender, and each check hashes the address)."""
    if value != value.lower() and value[2:] != value[2:].upper() and not is_checksum_address(value):
        return None
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
