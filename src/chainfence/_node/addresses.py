"""Ethereum addresses checked and checksummed (EIP-55) as eth-utils does, with :func:`~chainfence._node.rlp.keccak256`.

``eth_utils`` loads pydantic and eth-typing when it is imported: more time
than a whole ``chainfence status`` may take (docs/explanation/design.md). The SDK checks and
checksums addresses everywhere (the registry's, holders', admins'), so these
three functions are eth-utils' own, answer for answer
(``tests/unit/test_lean_accounts.py`` holds them to eth-utils with Hypothesis).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .rlp import keccak256

__all__ = ["is_checksum_address", "is_hex_address", "to_checksum_address"]

_HEX_ADDRESS = re.compile("(0x)?[0-9a-f]{40}", re.IGNORECASE | re.ASCII)


def is_hex_address(value: Any) -> bool:
    """Whether ``value`` is a ``str`` of 40 hex digits, ``0x``-prefixed or not, in any case."""
    return isinstance(value, str) and _HEX_ADDRESS.fullmatch(value) is not None


@functools.lru_cache(maxsize=4096)
def _checksummed(lower: str) -> str:
    digest = keccak256(lower.encode("ascii")).hex()
    return "0x" + "".join(char.upper() if int(nibble, 16) > 7 else char for char, nibble in zip(lower, digest))


def to_checksum_address(value: Any) -> str:
    """``value`` (40 hex digits in any case, or 20 bytes) as its EIP-55 checksum address; ``ValueError``
    or ``TypeError`` for anything else, as eth-utils raises."""
    if isinstance(value, str):
        if not _HEX_ADDRESS.fullmatch(value):
            raise ValueError(f"Unknown format {value!r}, attempted to normalize to an address")
        return _checksummed(value[-40:].lower())
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) != 20:
            raise ValueError(f"Unknown format {value!r}, attempted to normalize to an address")
        return _checksummed(raw.hex())
    if isinstance(value, int):
        raise ValueError(f"Unknown format {value!r}, attempted to normalize to an address")
    raise TypeError(f"Unsupported type: {type(value)!r}. Must be one of: bool, str, bytes, bytearray or int.")


def is_checksum_address(value: Any) -> bool:
    """Whether ``value`` is a ``str`` address written exactly as its EIP-55 checksum (``0x`` and all)."""
    if not is_hex_address(value):
        return False
    return bool(value == _checksummed(value[-40:].lower()))
