"""Results keep web3's shapes without web3: chainfence._node.shapes against web3's AttributeDict and hexbytes.

Receipts, blocks, transactions and logs come back as ``AttributeDict``\\ s with
``HexBytes`` hashes, as web3 returns them (``chainfence._node.formats``); since
issue #19 both classes are the SDK's own (importing web3.datastructures loads
all of web3). Code written against web3's shapes keeps working: attribute and
item access, equality both ways, hashing, immutability, ``to_0x_hex`` and the
conversions hexbytes makes.
"""

from __future__ import annotations

import pickle

import hexbytes
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from web3.datastructures import AttributeDict as Web3AttributeDict

from chainfence._node.shapes import AttributeDict, HexBytes

values = st.one_of(
    st.binary(max_size=40),
    st.binary(max_size=40).map(lambda b: "0x" + b.hex()),
    st.binary(max_size=40).map(lambda b: b.hex()),
    st.text(alphabet="0123456789abcdefABCDEFxX", max_size=20),
    st.text(max_size=10),
    st.integers(min_value=-3, max_value=2**70),
    st.booleans(),
    st.binary(max_size=10).map(bytearray),
    st.binary(max_size=10).map(memoryview),
    st.none(),
    st.floats(allow_nan=False),
)


def _made(cls, value):
    try:
        return ("value", bytes(cls(value)))
    except (ValueError, TypeError):
        return ("refused", None)


@settings(max_examples=500, deadline=None)
@given(values)
def test_hexbytes_converts_what_hexbytes_converts(value):
    assert _made(HexBytes, value) == _made(hexbytes.HexBytes, value)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.integers(-45, 45), st.integers(-45, 45))
def test_hexbytes_behaves_as_hexbytes(data, start, stop):
    ours, theirs = HexBytes(data), hexbytes.HexBytes(data)
    assert ours == theirs == data
    assert repr(ours) == repr(theirs)
    assert ours.to_0x_hex() == theirs.to_0x_hex()
    assert ours.hex() == theirs.hex()
    assert ours[start:stop] == theirs[start:stop] and type(ours[start:stop]) is HexBytes
    if data:
        assert ours[start % len(data)] == theirs[start % len(data)]
    assert pickle.loads(pickle.dumps(ours)) == ours and type(pickle.loads(pickle.dumps(ours))) is HexBytes
    assert hash(ours) == hash(data)


RECEIPT = {
    "status": 1,
    "blockNumber": 7,
    "transactionHash": HexBytes("0x" + "11" * 32),
    "logs": [{"topics": [HexBytes("0x" + "22" * 32)], "data": HexBytes("0x01"), "logIndex": 0}],
    "contractAddress": None,
}


def test_an_attribute_dict_is_read_as_web3s():
    ours, theirs = AttributeDict.recursive(RECEIPT), Web3AttributeDict.recursive(RECEIPT)
    assert ours == theirs and theirs == ours  # both ways
    assert ours == RECEIPT and ours != {**RECEIPT, "status": 0} and ours != [1]
    assert ours.status == ours["status"] == 1
    assert ours.logs[0].topics == theirs.logs[0].topics
    assert isinstance(ours.logs[0], AttributeDict)
    assert dict(ours) == dict(theirs) and list(ours) == list(theirs) and len(ours) == len(theirs)
    assert ours.get("missing") is None and "status" in ours
    assert repr(AttributeDict({"a": 1})) == "AttributeDict({'a': 1})" == repr(Web3AttributeDict({"a": 1}))
    assert hash(ours) == hash(AttributeDict.recursive(RECEIPT))
    assert {ours: 1}[AttributeDict.recursive(RECEIPT)] == 1


def test_an_attribute_dict_is_immutable_as_web3s():
    ours = AttributeDict({"a": 1})
    for attempt in (lambda: setattr(ours, "a", 2), lambda: delattr(ours, "a"), lambda: setattr(ours, "b", 2)):
        with pytest.raises(TypeError):
            attempt()
    with pytest.raises(TypeError):
        ours["a"] = 2  # type: ignore[index]
    assert ours == {"a": 1}


def test_an_unhashable_value_is_found_when_hashed_as_web3_finds_it():
    with pytest.raises(TypeError):
        hash(AttributeDict({"a": bytearray(b"x")}))
    with pytest.raises(TypeError):
        hash(Web3AttributeDict({"a": bytearray(b"x")}))
