"""The Solidity ABI, encoded and decoded exactly as eth-abi does (its strict mode), without importing it.

``eth_abi`` brings ``eth_utils``, which loads pydantic and a type registry:
more time than a whole ``chainfence status`` may take (docs/explanation/design.md). The SDK
encodes calls and decodes views, events and reverts of its own contracts, whose
parameters are a handful of types: ``uint<M>``, ``int<M>``, ``address``,
``bool``, ``bytes<M>``, ``bytes``, ``string``, arrays of them (``T[]``,
``T[k]``) and tuples ``(T1,T2,...)``. This module is the ABI for those:

- :func:`encode` gives the bytes ``eth_abi.encode`` gives, and refuses what it
  refuses (a value of the wrong type, out of range, a list of the wrong length);
- :func:`decode` gives the values ``eth_abi.decode`` gives (ints, ``bool``,
  lower-case ``0x`` addresses, ``bytes``, ``str``, tuples for arrays and tuples)
  and refuses what it refuses: short data, nonzero padding, a bool that is not
  0 or 1, offsets that point into the head or past the end, invalid UTF-8.

``tests/unit/test_abi.py`` holds both to eth-abi with Hypothesis, value by value
and on random and corrupted bytes. Any other type is a ``ValueError``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["ABIError", "decode", "encode"]


class ABIError(ValueError):
    """A value that cannot be encoded as its type, or bytes that are not an encoding of the types."""


_WORD = 32
_ZERO = b"\0" * _WORD
_ADDRESS = re.compile("(0x)?[0-9a-f]{40}", re.IGNORECASE | re.ASCII)
_ARRAY = re.compile(r"^(.*)\[(\d*)\]$")
_SIZED = re.compile(r"^(u?int|bytes)(\d+)$")


class _Type:
    """One ABI type: whether it is dynamic, the words it takes in a head (static types), how to code it."""

    dynamic = False
    #: Words in a head: a static type's own, one (a pointer) for a dynamic one.
    words = 1
    #: What eth-abi counts for this type in a tuple's head when it checks pointers (``array_size`` or 1).
    head_count = 1

    def encode(self, value: Any) -> bytes:  # pragma: no cover - every type has its own
        raise NotImplementedError

    def decode(self, data: bytes, position: int) -> Any:  # pragma: no cover
        """The value at ``position``: inline for a static type; where its pointer led for a dynamic one
        (pointers inside it count from there)."""
        raise NotImplementedError


def _word(data: bytes, position: int) -> bytes:
    word = data[position : position + _WORD]
    if len(word) != _WORD:
        raise ABIError(f"tried to read {_WORD} bytes at {position}, only got {len(word)} bytes")
    return word


def _uint(data: bytes, position: int) -> int:
    return int.from_bytes(_word(data, position), "big")


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_list_like(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


class _Uint(_Type):
    def __init__(self, bits: int):
        self.bits = bits
        self.padding = _WORD - bits // 8

    def encode(self, value: Any) -> bytes:
        if not _is_integer(value):
            raise ABIError(f"uint{self.bits} takes an int, got {type(value).__name__}")
        if not 0 <= value < 1 << self.bits:
            raise ABIError(f"{value} does not fit in uint{self.bits}")
        return int(value).to_bytes(_WORD, "big")

    def decode(self, data: bytes, position: int) -> Any:
        word = _word(data, position)
        if any(word[: self.padding]):
            raise ABIError(f"uint{self.bits} with nonzero padding at {position}")
        return int.from_bytes(word, "big")


class _Int(_Type):
    def __init__(self, bits: int):
        self.bits = bits
        self.padding = _WORD - bits // 8

    def encode(self, value: Any) -> bytes:
        if not _is_integer(value):
            raise ABIError(f"int{self.bits} takes an int, got {type(value).__name__}")
        if not -(1 << (self.bits - 1)) <= value < 1 << (self.bits - 1):
            raise ABIError(f"{value} does not fit in int{self.bits}")
        return int(value).to_bytes(_WORD, "big", signed=True)

    def decode(self, data: bytes, position: int) -> Any:
        word = _word(data, position)
        value = int.from_bytes(word[self.padding :], "big", signed=False)
        if value >= 1 << (self.bits - 1):
            value -= 1 << self.bits
        if word[: self.padding] != (b"\xff" if value < 0 else b"\0") * self.padding:
            raise ABIError(f"int{self.bits} with padding that is not its sign at {position}")
        return value


class _Address(_Type):
    def encode(self, value: Any) -> bytes:
        if isinstance(value, str) and _ADDRESS.fullmatch(value):
            return bytes(12) + bytes.fromhex(value[-40:])
        if isinstance(value, (bytes, bytearray)) and len(value) == 20:
            return bytes(12) + bytes(value)
        raise ABIError(f"not an address: {value!r:.80}")

    def decode(self, data: bytes, position: int) -> Any:
        word = _word(data, position)
        if any(word[:12]):
            raise ABIError(f"address with nonzero padding at {position}")
        return "0x" + word[12:].hex()


class _Bool(_Type):
    def encode(self, value: Any) -> bytes:
        if not isinstance(value, bool):
            raise ABIError(f"bool takes a bool, got {type(value).__name__}")
        return _ZERO[:-1] + (b"\x01" if value else b"\0")

    def decode(self, data: bytes, position: int) -> Any:
        word = _word(data, position)
        if any(word[:-1]) or word[-1] > 1:
            raise ABIError(f"bool that is neither 0 nor 1 at {position}")
        return word[-1] == 1


class _FixedBytes(_Type):
    def __init__(self, size: int):
        self.size = size

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray)):
            raise ABIError(f"bytes{self.size} takes bytes, got {type(value).__name__}")
        if len(value) > self.size:
            raise ABIError(f"{len(value)} bytes exceed bytes{self.size}")
        return bytes(value).ljust(_WORD, b"\0")

    def decode(self, data: bytes, position: int) -> Any:
        word = _word(data, position)
        if any(word[self.size :]):
            raise ABIError(f"bytes{self.size} with nonzero padding at {position}")
        return word[: self.size]


def _padded(data: bytes) -> bytes:
    return len(data).to_bytes(_WORD, "big") + data + b"\0" * (-len(data) % _WORD)


def _byte_string(data: bytes, position: int) -> bytes:
    """A ``bytes``/``string`` body at ``position``: its length, then the bytes zero-padded to a word."""
    length = _uint(data, position)
    start = position + _WORD
    padded = length + (-length % _WORD)
    if start + padded > len(data):
        raise ABIError(f"tried to read {padded} bytes at {start}, only got {max(0, len(data) - start)} bytes")
    if any(data[start + length : start + padded]):
        raise ABIError(f"nonzero padding after {length} bytes at {start}")
    return data[start : start + length]


class _Bytes(_Type):
    dynamic = True

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray)):
            raise ABIError(f"bytes takes bytes, got {type(value).__name__}")
        return _padded(bytes(value))

    def decode(self, data: bytes, position: int) -> Any:
        return _byte_string(data, position)


class _String(_Type):
    dynamic = True

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise ABIError(f"string takes a str, got {type(value).__name__}")
        try:
            return _padded(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ABIError(f"string is not encodable as UTF-8: {exc}") from None

    def decode(self, data: bytes, position: int) -> Any:
        try:
            return _byte_string(data, position).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ABIError(f"string that is not UTF-8: {exc}") from None


def _encode_sequence(types: Sequence[_Type], values: Sequence[Any]) -> bytes:
    """Head and tail of ``values`` (a tuple's components or an array's items), as eth-abi lays them out."""
    encoded = [kind.encode(value) for kind, value in zip(types, values, strict=True)]
    head_size = sum(_WORD if kind.dynamic else len(chunk) for kind, chunk in zip(types, encoded, strict=True))
    head: list[bytes] = []
    tail: list[bytes] = []
    offset = head_size
    for kind, chunk in zip(types, encoded, strict=True):
        if kind.dynamic:
            head.append(offset.to_bytes(_WORD, "big"))
            tail.append(chunk)
            offset += len(chunk)
        else:
            head.append(chunk)
    return b"".join(head + tail)


def _check_pointers(data: bytes, start: int, types: Sequence[_Type], head_count: int) -> None:
    """eth-abi's check before decoding a tuple or an array of dynamic items: every pointer lands after
    the head (as eth-abi counts it) and inside the data; static components are decoded on the way."""
    end_of_head = start + _WORD * head_count
    position = start
    for kind in types:
        if kind.dynamic:
            target = start + _uint(data, position)
            if target < end_of_head or target >= len(data):
                raise ABIError(f"a pointer at {position} points outside the data")
            position += _WORD
        else:
            kind.decode(data, position)
            position += _WORD * kind.words


def _decode_sequence(data: bytes, start: int, types: Sequence[_Type]) -> tuple[Any, ...]:
    """The components at ``start`` (a frame: pointers count from here)."""
    values = []
    position = start
    for kind in types:
        if kind.dynamic:
            target = start + _uint(data, position)
            values.append(kind.decode(data, target))
            position += _WORD
        else:
            values.append(kind.decode(data, position))
            position += _WORD * kind.words
    return tuple(values)


class _Tuple(_Type):
    def __init__(self, components: tuple[_Type, ...]):
        self.components = components
        self.dynamic = any(kind.dynamic for kind in components)
        if not self.dynamic:
            self.words = sum(kind.words for kind in components)
        self._head_count = sum(kind.head_count for kind in components)

    def encode(self, value: Any) -> bytes:
        if not _is_list_like(value):
            raise ABIError(f"a tuple takes a list or tuple, got {type(value).__name__}")
        if len(value) != len(self.components):
            raise ABIError(f"a tuple of {len(self.components)} got {len(value)} values")
        return _encode_sequence(self.components, value)

    def decode(self, data: bytes, position: int) -> Any:
        _check_pointers(data, position, self.components, self._head_count)
        return _decode_sequence(data, position, self.components)


class _Array(_Type):
    def __init__(self, item: _Type, size: int | None):
        self.item = item
        self.size = size
        self.dynamic = size is None or item.dynamic
        if not self.dynamic:
            assert size is not None
            self.words = size * item.words
            self.head_count = size  # a dynamic one sits behind a pointer: eth-abi counts it as one

    def encode(self, value: Any) -> bytes:
        if not _is_list_like(value):
            raise ABIError(f"an array takes a list or tuple, got {type(value).__name__}")
        if self.size is not None and len(value) != self.size:
            raise ABIError(f"an array of {self.size} got {len(value)} values")
        body = _encode_sequence([self.item] * len(value), value)
        return body if self.size is not None else len(value).to_bytes(_WORD, "big") + body

    def decode(self, data: bytes, position: int) -> Any:
        if self.size is None:
            count = _uint(data, position)
            position += _WORD
            if position + count * _WORD * self.item.words > len(data):  # eth-abi runs out of data on the way
                raise ABIError(f"an array of {count} items does not fit in the data")
        else:
            count = self.size
        if self.item.dynamic:
            _check_pointers(data, position, [self.item] * count, count)
        return _decode_sequence(data, position, [self.item] * count)


def _split_components(inner: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in inner:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += (char == "(") - (char == ")")
        current.append(char)
    if current or parts:
        parts.append("".join(current))
    return parts


@functools.lru_cache(maxsize=256)
def _parse(type_str: str) -> _Type:
    array = _ARRAY.match(type_str)
    if array is not None:
        item, size = array.groups()
        return _Array(_parse(item), int(size) if size else None)
    if type_str.startswith("(") and type_str.endswith(")"):
        return _Tuple(tuple(_parse(part) for part in _split_components(type_str[1:-1])))
    if type_str == "address":
        return _Address()
    if type_str == "bool":
        return _Bool()
    if type_str == "bytes":
        return _Bytes()
    if type_str == "string":
        return _String()
    sized = _SIZED.match(type_str)
    if sized is not None:
        base, bits = sized.group(1), int(sized.group(2))
        if base == "bytes" and 1 <= bits <= 32:
            return _FixedBytes(bits)
        if base != "bytes" and 8 <= bits <= 256 and bits % 8 == 0:
            return _Uint(bits) if base == "uint" else _Int(bits)
    raise ValueError(f"ABI type {type_str!r} is not one chainfence encodes")


@functools.lru_cache(maxsize=256)
def _tuple_of(types: tuple[str, ...]) -> _Tuple:
    return _Tuple(tuple(_parse(kind) for kind in types))


def encode(types: Sequence[str], values: Sequence[Any]) -> bytes:
    """``values`` encoded as the ABI types ``types``: the bytes ``eth_abi.encode(types, values)`` gives."""
    if not _is_list_like(values):
        raise ABIError(f"values must be a list or tuple, got {type(values).__name__}")
    return _tuple_of(tuple(types)).encode(values)


def decode(types: Sequence[str], data: bytes) -> tuple[Any, ...]:
    """``data`` decoded as the ABI types ``types``: what ``eth_abi.decode(types, data)`` gives (or refuses)."""
    if not isinstance(data, (bytes, bytearray)):
        raise ABIError(f"data must be bytes, got {type(data).__name__}")
    result: tuple[Any, ...] = _tuple_of(tuple(types)).decode(bytes(data), 0)
    return result
