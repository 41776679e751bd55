"""The SDK's own ABI codec (chainfence._node.abi) encodes and decodes exactly as eth-abi does.

The CLI's per-task commands must not load eth-abi (issue #19: it brings
eth-utils and pydantic, more time than a whole command may take), so the SDK
encodes its calls and decodes views, events and reverts itself. One byte of
difference would be a different call; a value eth-abi refuses and the SDK
accepted would be a view's garbage taken for an answer. So every property here
holds ours to eth-abi: the same bytes for every value, the same values for
every encoding, and the same verdict (a value, or a refusal) on corrupted,
truncated and random bytes.
"""

from __future__ import annotations

import eth_abi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainfence._node import abi
from chainfence._node import artifacts as _artifacts

# -- ABI types and values of them -------------------------------------------------------------------


ADDRESSES = st.one_of(
    st.binary(min_size=20, max_size=20),
    st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex()),
    st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex().upper()),
    st.binary(min_size=20, max_size=20).map(lambda b: b.hex()),  # eth-abi takes it without 0x too
)

bits = st.sampled_from([8, 16, 32, 64, 128, 160, 248, 256])

#: (ABI type, a strategy of its values) pairs.
atoms = st.one_of(
    bits.map(lambda b: (f"uint{b}", st.integers(0, 2**b - 1))),
    bits.map(lambda b: (f"int{b}", st.integers(-(2 ** (b - 1)), 2 ** (b - 1) - 1))),
    st.integers(1, 32).map(lambda n: (f"bytes{n}", st.binary(max_size=n))),
    st.just(("address", ADDRESSES)),
    st.just(("bool", st.booleans())),
    st.just(("bytes", st.binary(max_size=100))),
    st.just(("string", st.text(max_size=40))),
)


def _composite(inner):
    """(type, value strategy) pairs built from smaller ones: T[], T[k], (T1,...)."""

    def dynamic_array(pair):
        kind, values = pair
        return (f"{kind}[]", st.lists(values, max_size=4))

    def sized_array(pair, size):
        kind, values = pair
        return (f"{kind}[{size}]", st.lists(values, min_size=size, max_size=size))

    def tuple_of(pairs):
        kinds = ",".join(kind for kind, _ in pairs)
        return (f"({kinds})", st.tuples(*(values for _, values in pairs)))

    return st.one_of(
        inner.map(dynamic_array),
        st.tuples(inner, st.integers(1, 3)).map(lambda p: sized_array(*p)),
        st.lists(inner, min_size=1, max_size=3).map(tuple_of),
    )


type_and_strategy = st.recursive(atoms, _composite, max_leaves=6)


@st.composite
def typed_values(draw, max_params: int = 4):
    """(types, values): a function's parameters and arguments."""
    pairs = draw(st.lists(type_and_strategy, min_size=1, max_size=max_params))
    types = [kind for kind, _ in pairs]
    values = [draw(strategy) for _, strategy in pairs]
    return types, values


def _same_verdict(types, data: bytes):
    """eth-abi's answer for ``data``, or the fact that it refused; ours must be the same."""
    try:
        theirs = ("value", eth_abi.decode(types, data))
    except Exception:
        theirs = ("refused", None)
    try:
        ours = ("value", abi.decode(types, data))
    except abi.ABIError:
        ours = ("refused", None)
    assert ours == theirs, f"{types} on 0x{data.hex()}"


# -- encoding -----------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_values())
def test_every_value_is_encoded_to_the_bytes_eth_abi_makes(case):
    types, values = case
    assert abi.encode(types, values) == eth_abi.encode(types, values)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_values())
def test_every_encoding_is_decoded_to_the_values_eth_abi_reads(case):
    types, values = case
    data = eth_abi.encode(types, values)
    ours = abi.decode(types, data)
    assert ours == eth_abi.decode(types, data)
    assert [type(v) for v in ours] == [type(v) for v in eth_abi.decode(types, data)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_values(), st.data())
def test_corrupted_encodings_get_eth_abis_verdict(case, data):
    """A byte changed, the data cut or extended: eth-abi's value where it reads one, a refusal where it refuses."""
    types, values = case
    encoded = bytearray(eth_abi.encode(types, values))
    how = data.draw(st.sampled_from(["flip", "word", "truncate", "extend"]))
    if how == "flip" and encoded:
        encoded[data.draw(st.integers(0, len(encoded) - 1))] ^= data.draw(st.integers(1, 255))
    elif how == "word" and len(encoded) >= 32:  # a whole word replaced: pointers, lengths, counts
        at = data.draw(st.integers(0, len(encoded) // 32 - 1)) * 32
        word = data.draw(st.sampled_from([0, 1, 2, 31, 32, 33, 64, 96, 2**64, 2**255, 2**256 - 1, len(encoded)]))
        encoded[at : at + 32] = word.to_bytes(32, "big")
    elif how == "truncate":
        del encoded[data.draw(st.integers(0, len(encoded))) :]
    else:
        encoded += data.draw(st.binary(min_size=1, max_size=64))
    _same_verdict(types, bytes(encoded))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["uint256", "bool", "address", "bytes", "string", "uint8[]", "bytes32"]), min_size=1, max_size=3
    ),
    st.binary(max_size=200),
)
def test_random_bytes_get_eth_abis_verdict(types, data):
    _same_verdict(types, data)


#: Types whose heads hold a static tuple or array before a pointer: eth-abi counts a static tuple as one
#: word when it checks where a pointer may land (and a static array as its length), whatever it holds.
HEADS = [
    (["(uint256,uint256)", "bytes"], [(1, 2), b"abc"]),
    (["uint256[2]", "string"], [[1, 2], "abc"]),
    (["(uint256,(bool,address))", "bytes", "uint8[]"], [(1, (True, "0x" + "11" * 20)), b"", [3]]),
    (["uint256[2][2]", "bytes"], [[[1, 2], [3, 4]], b"x" * 40]),
    (["(uint256,bytes)", "bytes32"], [(5, b"y"), b"z"]),
    (["string[]"], [["a", "bc"]]),
    (["bytes[2]", "bool"], [[b"a", b""], False]),
]


@pytest.mark.parametrize(("types", "values"), HEADS)
def test_every_pointer_value_gets_eth_abis_verdict(types, values):
    """Each word of the encoding replaced by each small offset (into the head, the pointer itself, the
    tail, past the end) and by the values a bool or a padding may not hold."""
    encoded = eth_abi.encode(types, values)
    assert abi.decode(types, encoded) == eth_abi.decode(types, encoded)
    for at in range(0, len(encoded), 32):
        for word in [*range(0, len(encoded) + 64, 32), 1, 2, 255, 256, 2**160]:
            corrupted = encoded[:at] + word.to_bytes(32, "big") + encoded[at + 32 :]
            _same_verdict(types, corrupted)


WRONG_VALUES = [
    ("uint256", -1),
    ("uint256", 2**256),
    ("uint8", 256),
    ("uint256", True),
    ("uint256", "1"),
    ("uint256", 1.0),
    ("int8", 128),
    ("int8", -129),
    ("address", "0x" + "ab" * 19),
    ("address", "0x" + "zz" * 20),
    ("address", b"\x01" * 19),
    ("address", 1),
    ("bool", 1),
    ("bytes32", b"\x01" * 33),
    ("bytes32", "0x00"),
    ("bytes", "text"),
    ("string", b"bytes"),
    ("string", "\udc80"),
    ("uint256[]", "not a list"),
    ("uint256[]", b"\x01\x02"),
    ("uint256[2]", [1]),
    ("(uint256,bool)", [1]),
]


@pytest.mark.parametrize(("kind", "value"), WRONG_VALUES)
def test_values_eth_abi_refuses_are_refused(kind, value):
    with pytest.raises(Exception):  # the control: eth-abi refuses it (any way it likes)
        eth_abi.encode([kind], [value])
    with pytest.raises(abi.ABIError):
        abi.encode([kind], [value])


def _canonical(param: dict) -> str:
    """A parameter's type as a signature spells it: a struct (``tuple``, ``tuple[]``) by its components."""
    kind = param["type"]
    if kind.startswith("tuple"):
        return "(" + ",".join(_canonical(component) for component in param["components"]) + ")" + kind[5:]
    return kind


def test_the_registrys_own_parameter_types_are_all_covered():
    """Every parameter and result type of the shipped contracts is one the codec encodes and decodes."""
    kinds = set()
    for contract in _artifacts.SHIPPED:
        for entry in _artifacts.abi(contract):
            for param in entry.get("inputs", []) + entry.get("outputs", []):
                kinds.add(_canonical(param))
    assert kinds >= {"uint256", "address", "bool", "bytes32", "bytes", "string", "address[]", "uint256[]"}
    for kind in kinds:
        abi._parse(kind)  # raises for a type the codec does not know


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_registry_function_call_is_encoded_as_eth_abi_encodes_it(data):
    name, (_selector, types) = data.draw(st.sampled_from(sorted(_artifacts.functions("FencingRegistry").items())))
    strategies = {
        "uint256": st.integers(0, 2**256 - 1),
        "uint8": st.integers(0, 255),
        "address": ADDRESSES,
        "bool": st.booleans(),
        "bytes32": st.binary(min_size=32, max_size=32),
        "bytes4": st.binary(min_size=4, max_size=4),
        "bytes": st.binary(max_size=200),
        "string": st.text(max_size=50),
    }

    def values_of(kind):
        if kind.endswith("[]"):
            return st.lists(values_of(kind[:-2]), max_size=5)
        if kind.startswith("("):  # a struct of plain types (batchCalls' BatchOp)
            return st.tuples(*(values_of(component) for component in kind[1:-1].split(",")))
        return strategies[kind]

    values = [data.draw(values_of(kind)) for kind in types]
    assert abi.encode(types, values) == eth_abi.encode(types, values), name


def test_unknown_types_are_refused():
    for kind in ("fixed128x18", "ufixed", "function", "uint7", "bytes33", "int0", "tuple"):
        with pytest.raises(ValueError):
            abi.encode([kind], [0])
