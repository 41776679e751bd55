"""chainfence._node.rlp: RLP as the yellow paper defines it, canonical only, checked against the rlp package."""

from __future__ import annotations

import pytest
import rlp as reference  # the ethereum/pyrlp package web3 installs: a second implementation to agree with
from hypothesis import given
from hypothesis import strategies as st

from chainfence._node.rlp import EMPTY_TRIE_ROOT, RLPError, decode, decode_int, encode, keccak256

items = st.recursive(st.binary(max_size=80), lambda children: st.lists(children, max_size=6), max_leaves=30)


def _plain(item):
    return [_plain(child) for child in item] if isinstance(item, list) else bytes(item)


@pytest.mark.parametrize(
    ("item", "encoded"),
    [
        (b"", "80"),
        (b"\x00", "00"),
        (b"\x7f", "7f"),
        (b"\x80", "8180"),
        (b"dog", "83646f67"),
        ([b"cat", b"dog"], "c88363617483646f67"),
        ([], "c0"),
        (0, "80"),
        (15, "0f"),
        (1024, "820400"),
        ([[], [[]], [[], [[]]]], "c7c0c1c0c3c0c1c0"),  # the set-theoretic three, from the yellow paper
        (
            b"Lorem ipsum dolor sit amet, consectetur adipisicing elit",
            "b8384c6f72656d20697073756d20646f6c6f722073697420616d65742c20636f6e7365637465747572206164697069736963696e6720656c6974",
        ),
    ],
)
def test_known_encodings(item, encoded):
    assert encode(item).hex() == encoded
    if not isinstance(item, int):
        assert decode(bytes.fromhex(encoded)) == item


@given(items)
def test_agrees_with_the_rlp_package_both_ways(item):
    ours = encode(item)
    assert ours == reference.encode(item)
    assert decode(ours) == _plain(reference.decode(ours))


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("", "empty input"),
        ("8100", "a single byte below 0x80 wrapped in a prefix"),
        ("817f", "a single byte below 0x80 wrapped in a prefix"),
        ("b80141", "a long form for a short string"),
        ("b90001" + "41", "a length with a leading zero"),
        ("f800", "a long form for an empty list"),
        ("83646f", "a truncated string"),
        ("c88363617483646f", "a truncated list"),
        ("8363617400", "a byte after the item"),
        ("c3836361", "a list whose payload ends inside an item"),
    ],
)
def test_refuses_non_canonical_or_broken_input(raw, why):
    with pytest.raises(RLPError):
        decode(bytes.fromhex(raw))


def test_integers_are_canonical():
    assert decode_int(b"") == 0
    assert decode_int(b"\x01\x00") == 256
    with pytest.raises(RLPError):
        decode_int(b"\x00\x01")
    with pytest.raises(RLPError):
        decode_int([b"\x01"])


def test_keccak256_is_ethereums_not_nist_sha3():
    assert keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    assert EMPTY_TRIE_ROOT.hex() == "56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"


def test_encode_refuses_what_rlp_cannot_carry():
    for bad in (-1, True, 1.5, "text", None):
        with pytest.raises((TypeError, ValueError)):
            encode(bad)
