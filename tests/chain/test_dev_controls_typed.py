"""Dev-chain controls refuse what they cannot do with chainfence errors, on every backend.

``mine``, ``snapshot`` and ``revert`` on the embedded chain call eth-tester
in-process; on anvil they are JSON-RPC requests. Either way a bad argument or
an unknown snapshot is a chainfence error (never eth-tester's
``ValidationError``/``SnapshotNotFound`` or a bare ``TypeError``), and the
chain does not move.
"""

from __future__ import annotations

import pytest

from chainfence.errors import ChainError, InvalidInput

# On hardhat's node and ganache too (tests/conftest.py, docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


def _raised(call) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


@pytest.mark.parametrize("blocks", [-1, 1.5, "2", True, None])
def test_mining_a_bad_number_of_blocks_is_invalid_input(chain, blocks):
    before = chain.block_number()
    error = _raised(lambda: chain.mine(blocks))
    assert type(error) is InvalidInput, f"{type(error).__module__}.{type(error).__name__}: {error}"
    assert chain.block_number() == before


def test_mining_zero_blocks_mines_nothing(chain):
    before = chain.block_number()
    chain.mine(0)
    assert chain.block_number() == before


@pytest.mark.parametrize("snapshot", [12_345, "0x3039"])
def test_reverting_to_an_unknown_snapshot_is_a_chain_error(chain, snapshot):
    chain.mine()
    before = chain.block_number()
    error = _raised(lambda: chain.revert(snapshot))
    assert isinstance(error, ChainError), f"{type(error).__module__}.{type(error).__name__}: {error}"
    assert type(error).__module__ == "chainfence.errors"
    assert chain.block_number() == before
