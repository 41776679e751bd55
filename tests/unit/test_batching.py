"""The batcher's pieces that need no chain: its calldata (encoded by hand) and its gas bound."""

from __future__ import annotations

from eth_abi import encode as abi_encode
from hypothesis import given
from hypothesis import strategies as st

from chainfence._node import artifacts
from chainfence.batching import GAS_BASE, GAS_PER_NAME_BYTE, GAS_PER_OPERATION, encode_batch, gas_bound

OP = st.tuples(
    st.integers(0, 3),
    st.text(max_size=40),
    st.binary(min_size=32, max_size=32),
    st.integers(0, 2**256 - 1),
    st.integers(0, 2**32 - 1),
)


def eth_abi_calldata(ops: list[tuple[int, str, bytes, int, int]]) -> bytes:
    selector, types = artifacts.functions("FencingRegistry")["batchCalls"]
    assert types == ("(uint8,string,bytes32,uint256,uint256)[]",)
    return selector + abi_encode(types, [ops])


@given(st.lists(OP, max_size=8))
def test_the_hand_encoded_calldata_is_eth_abis_byte_for_byte(ops):
    assert encode_batch(ops) == eth_abi_calldata(ops)


def test_names_of_every_length_and_script_encode_as_eth_abi_does():
    ops = [(0, "n" * length, bytes(32), 0, 60) for length in (0, 1, 31, 32, 33, 64, 128)]
    ops += [
        (1, "résumé/日本/🚀", bytes(32), 0, 1),
        (2, "", b"\x11" * 32, 2**48 - 1, 3_600),
        (3, "", b"\xff" * 32, 7, 0),
    ]
    assert encode_batch(ops) == eth_abi_calldata(ops)
    assert encode_batch(ops * 6) == eth_abi_calldata(ops * 6)


def test_the_gas_bound_is_each_operation_at_its_dearest():
    assert gas_bound([]) == GAS_BASE
    kinds = [("acquire", 13), ("renew", 0), ("release", 0)]
    assert gas_bound(kinds) == GAS_BASE + sum(GAS_PER_OPERATION.values()) + 13 * GAS_PER_NAME_BYTE


def test_the_asyncio_batcher_offers_every_operation_and_figure_of_the_batcher():
    """AsyncBatcher mirrors Batcher name by name; only what serves the leases it hands out (their registry's
    chain and connect) and the wrapped registry stay the sync object's."""
    from chainfence.batching import AsyncBatcher, Batcher

    plumbing = {"chain", "connect", "registry"}
    fields = {"sender", "max_items", "window", "batches", "operations", "largest"}
    sync = {name for name in dir(Batcher) if not name.startswith("_")} | fields
    assert sync - plumbing <= {name for name in dir(AsyncBatcher) if not name.startswith("_")}
