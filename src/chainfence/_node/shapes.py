"""The shapes results come back in, as web3 gives them, without importing web3 or hexbytes.

Blocks, receipts, transactions and logs are :class:`AttributeDict`\\ s and hashes
:class:`HexBytes`, as web3's ``eth`` module returns them; these are the same
shapes built here: importing ``web3.datastructures`` imports all of web3, and
``hexbytes`` reads its own version from the installed metadata, together more
time than a whole ``chainfence status`` may take (docs/explanation/design.md).

- :class:`HexBytes` is ``bytes`` that a hex string, an int or a bool converts
  into as hexbytes' does, with ``to_0x_hex()`` and a ``0x`` repr; it equals
  the ``bytes`` (and hexbytes' ``HexBytes``) of the same value;
- :class:`AttributeDict` is a read-only mapping whose keys are attributes too,
  hashable, equal to any mapping with the same items (web3's ``AttributeDict``
  included, both ways).

What they are not: instances of web3's and hexbytes' classes (``isinstance``
tells them apart). ``tests/unit/test_shapes.py`` holds them to the originals.
"""

from __future__ import annotations

import binascii
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, SupportsIndex, overload

__all__ = ["AttributeDict", "HexBytes"]


def _to_bytes(value: Any) -> bytes:
    """hexbytes' conversion: bytes as they are, a hex string (0x or not, odd length padded), a
    non-negative int as its hex, a bool as one byte."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        digits = value[2:] if value.startswith(("0x", "0X")) else value
        if len(value) % 2:
            digits = "0" + digits
        return binascii.unhexlify(digits.encode("ascii"))
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, bool):
        return b"\x01" if value else b"\x00"
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"Cannot convert negative integer {value} to bytes")
        return _to_bytes(hex(value))
    if isinstance(value, memoryview):
        return bytes(value)
    raise TypeError(f"Cannot convert {value!r} of type {type(value)} to bytes")


class HexBytes(bytes):
    """``bytes`` as hexbytes' ``HexBytes``: built from hex strings, ints and bools too, shown as ``0x`` hex."""

    def __new__(cls, value: Any) -> HexBytes:
        return super().__new__(cls, _to_bytes(value))

    @overload
    def __getitem__(self, key: SupportsIndex) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> HexBytes: ...

    def __getitem__(self, key: SupportsIndex | slice) -> int | HexBytes:
        result = super().__getitem__(key)
        return type(self)(result) if isinstance(result, bytes) else result

    def __repr__(self) -> str:
        return f"HexBytes({'0x' + self.hex()!r})"

    def to_0x_hex(self) -> str:
        """The bytes as a ``0x``-prefixed hex string."""
        return "0x" + self.hex()

    def __reduce__(self) -> tuple[Any, ...]:
        return bytes.__new__, (type(self), bytes(self))


def _frozen(value: Any) -> Any:
    """``value`` with its lists and tuples made tuples and its mappings :class:`AttributeDict` (to hash it)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item) if isinstance(item, (list, tuple)) else item for item in value)
    if isinstance(value, Mapping):
        return AttributeDict({key: _frozen(item) for key, item in value.items()})
    if not isinstance(value, Hashable):
        raise TypeError(f"Found unhashable type '{type(value).__name__}': {value}")
    return value


class AttributeDict(Mapping[Any, Any]):
    """A read-only mapping whose keys are attributes too, as web3's ``AttributeDict``."""

    def __init__(self, dictionary: Mapping[Any, Any] | None = None, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "__dict__", dict(dictionary or {}))
        self.__dict__.update(dict(*args, **kwargs))

    def __getitem__(self, key: Any) -> Any:
        return self.__dict__[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.__dict__)

    def __len__(self) -> int:
        return len(self.__dict__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__!r})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("This data is immutable -- create a copy instead of modifying")

    def __delattr__(self, name: str) -> None:
        raise TypeError("This data is immutable -- create a copy instead of modifying")

    def __hash__(self) -> int:
        return hash(tuple(sorted((key, _frozen(value)) for key, value in self.__dict__.items())))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.__dict__ == dict(other)
        return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    @classmethod
    def recursive(cls, value: Any) -> Any:
        """``value`` with every mapping in it (in lists, tuples and sets too) made an :class:`AttributeDict`."""
        if isinstance(value, Mapping):
            return cls({key: cls.recursive(item) for key, item in value.items()})
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            return type(value)([cls.recursive(item) for item in value])  # type: ignore[call-arg]
        if isinstance(value, set):
            return {cls.recursive(item) for item in value}
        return value
