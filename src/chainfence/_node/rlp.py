"""RLP (Ethereum's Recursive Length Prefix encoding) and keccak256, strictly, with nothing but pycryptodome.

The proven mode (:mod:`chainfence.proofs`) decodes what an untrusted provider
sends (trie nodes, headers), so the decoder accepts only canonical RLP: every
length in its shortest form, a single byte below 0x80 never wrapped in a
prefix, nothing left over. A non-canonical encoding of a node would hash
differently from the node the trie holds, so refusing it loses nothing and
leaves one encoding per value.

No web3, eth-utils, eth-abi or rlp here: the CLI's hot path imports this
module and must stay free of them. Items are ``bytes`` or lists of items;
:func:`encode` also takes non-negative ints (big-endian, no leading zeros;
0 is the empty string), as headers and accounts carry them.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["EMPTY_TRIE_ROOT", "RLPError", "decode", "decode_int", "encode", "encode_list", "keccak256"]

Item = bytes | list["Item"]


class RLPError(ValueError):
    """The bytes are not canonical RLP (or an item is not what the caller expected)."""


#: keccak256 of b"" and of 300 bytes (more than one 136-byte block): what a backend must answer.
_KNOWN = (
    (b"", "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"),
    (b"abc" * 100, "0b4690e744c6ff5f43ac16817124efeaa0b3b3ff9bc26d092984bbb14badeaf5"),
)


def _pycryptodome_library() -> Callable[[bytes], bytes] | None:
    """keccak256 through pycryptodome's own compiled keccak, called with ctypes.

    ``Crypto.Hash.keccak`` reaches the same library through cffi, whose import
    parses C declarations with pycparser: tens of milliseconds, more than a
    whole ``chainfence status`` may take (docs/explanation/design.md). Loading the library with
    ctypes costs a millisecond. The library's functions are pycryptodome's, not
    a public API: this backend is used only if it answers the known digests
    (:data:`_KNOWN`), else :func:`keccak256` falls back to ``Crypto.Hash.keccak``.
    """
    import ctypes
    import importlib.machinery
    import importlib.util
    import os

    spec = importlib.util.find_spec("Crypto")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(next(iter(spec.submodule_search_locations)), "Hash")
    path = next(
        (
            candidate
            for suffix in importlib.machinery.EXTENSION_SUFFIXES
            if os.path.isfile(candidate := os.path.join(folder, "_keccak" + suffix))
        ),
        None,
    )
    if path is None:
        return None
    lib = ctypes.CDLL(path)
    void_p, size_t, uint8 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint8
    init, absorb, digest, destroy = lib.keccak_init, lib.keccak_absorb, lib.keccak_digest, lib.keccak_destroy
    init.argtypes, init.restype = [ctypes.POINTER(void_p), size_t, uint8], ctypes.c_int
    absorb.argtypes, absorb.restype = [void_p, ctypes.c_char_p, size_t], ctypes.c_int
    digest.argtypes, digest.restype = [void_p, ctypes.c_char_p, size_t, uint8], ctypes.c_int
    destroy.argtypes, destroy.restype = [void_p], ctypes.c_int
    byref, buffer = ctypes.byref, ctypes.create_string_buffer

    def hash256(data: bytes) -> bytes:
        state = void_p()
        # capacity 64 bytes (keccak256), 24 rounds; Keccak's own padding (0x01), not SHA-3's (0x06).
        if init(byref(state), 64, 24):
            raise RuntimeError("keccak_init failed")
        try:
            out = buffer(32)
            if absorb(state, bytes(data), len(data)) or digest(state, out, 32, 0x01):
                raise RuntimeError("keccak failed")
            return out.raw
        finally:
            destroy(state)

    return hash256


def _pycryptodome_module(data: bytes) -> bytes:
    from Crypto.Hash import keccak

    return keccak.new(digest_bits=256, data=data).digest()


def _backend() -> Callable[[bytes], bytes]:
    try:
        fast = _pycryptodome_library()
        if fast is not None and all(fast(data).hex() == digest for data, digest in _KNOWN):
            return fast
    except Exception:  # another pycryptodome's library: the module's way is always there
        pass
    return _pycryptodome_module


_keccak256 = _backend()


def keccak256(data: bytes) -> bytes:
    """keccak256 (Ethereum's SHA-3 variant, before NIST's padding change) of ``data``."""
    return _keccak256(data)


def _length_prefix(length: int, short: int) -> bytes:
    if length < 56:
        return bytes([short + length])
    encoded = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([short + 55 + len(encoded)]) + encoded


def encode(item: object) -> bytes:
    """The RLP of ``item``: bytes, a non-negative int, or a list/tuple of items."""
    if isinstance(item, int):
        if isinstance(item, bool):
            raise TypeError("RLP has no booleans")
        if item < 0x80:
            if item < 0:
                raise ValueError("RLP encodes non-negative integers only")
            return bytes((item,)) if item else b"\x80"
        data = item.to_bytes((item.bit_length() + 7) // 8, "big")
    elif isinstance(item, (bytes, bytearray, memoryview)):
        data = bytes(item)
        if len(data) == 1 and data[0] < 0x80:
            return data
    elif isinstance(item, (list, tuple)):
        return encode_list(b"".join([encode(child) for child in item]))
    else:
        raise TypeError(f"cannot RLP-encode {type(item).__name__}")
    size = len(data)
    return (bytes((0x80 + size,)) if size < 56 else _length_prefix(size, 0x80)) + data


def encode_list(payload: bytes) -> bytes:
    """The RLP of a list whose items' encodings, joined, are ``payload``."""
    size = len(payload)
    return (bytes((0xC0 + size,)) if size < 56 else _length_prefix(size, 0xC0)) + payload


#: The root of an empty Merkle-Patricia trie: keccak256(RLP(b"")).
EMPTY_TRIE_ROOT = keccak256(encode(b""))


def _decode_at(data: bytes, start: int, end: int) -> tuple[Item, int]:
    """The item at ``data[start:]`` (within ``end``) and the offset after it."""
    if start >= end:
        raise RLPError("truncated: an item was expected")
    prefix = data[start]
    if prefix < 0x80:
        return data[start : start + 1], start + 1
    if prefix < 0xB8:
        length = prefix - 0x80
        stop = start + 1 + length
        if stop > end:
            raise RLPError("truncated string")
        if length == 1 and data[start + 1] < 0x80:
            raise RLPError("non-canonical: a single byte below 0x80 is its own encoding")
        return data[start + 1 : stop], stop
    if prefix < 0xC0:
        length, body = _long_length(data, start, end, prefix - 0xB7)
        stop = body + length
        if stop > end:
            raise RLPError("truncated string")
        return data[body:stop], stop
    if prefix < 0xF8:
        body, stop = start + 1, start + 1 + (prefix - 0xC0)
    else:
        length, body = _long_length(data, start, end, prefix - 0xF7)
        stop = body + length
    if stop > end:
        raise RLPError("truncated list")
    items: list[Item] = []
    offset = body
    while offset < stop:
        child, offset = _decode_at(data, offset, stop)
        items.append(child)
    return items, stop


def _long_length(data: bytes, start: int, end: int, size: int) -> tuple[int, int]:
    body = start + 1 + size
    if body > end:
        raise RLPError("truncated length")
    raw = data[start + 1 : body]
    if raw[0] == 0:
        raise RLPError("non-canonical: a length with leading zeros")
    length = int.from_bytes(raw, "big")
    if length < 56:
        raise RLPError("non-canonical: a long form for a length below 56")
    return length, body


def decode(data: bytes) -> Item:
    """The item ``data`` encodes; :class:`RLPError` unless ``data`` is exactly one canonical item."""
    if not isinstance(data, (bytes, bytearray)):
        raise RLPError(f"RLP input must be bytes, got {type(data).__name__}")
    data = bytes(data)
    item, stop = _decode_at(data, 0, len(data))
    if stop != len(data):
        raise RLPError(f"{len(data) - stop} bytes after the item")
    return item


def decode_int(item: Item) -> int:
    """An RLP string read as a non-negative integer (big-endian, no leading zeros)."""
    if not isinstance(item, bytes):
        raise RLPError("an integer was expected, got a list")
    if item[:1] == b"\x00":
        raise RLPError("non-canonical: an integer with leading zeros")
    return int.from_bytes(item, "big")
