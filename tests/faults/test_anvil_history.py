"""The suite's own isolation on anvil: each test begins above blocks whose state anvil still holds.

anvil keeps the state of about the last 4,000 blocks mined, counted across ``evm_revert``s. A session
that reverts after each test returns its head, again and again, to one of its first blocks; after a few
thousand blocks mined by earlier tests, the blocks below that head have no state left, and a read a few
blocks deep (a guard with ``confirmations=2``, a sender waiting for depth) fails with anvil's
``BlockOutOfRangeError``, depending on which tests ran before in that worker. ``isolated`` (tests/conftest.py)
mines ``FRESH_BLOCKS`` of the test's own first. CI saw the failure (tests/faults/test_reorg.py).
"""

from __future__ import annotations

import pytest

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence.errors import RpcError, TokenNotConfirmed
from tests.conftest import FRESH_BLOCKS, isolated
from tests.support.anvil import Anvil, dev_keys

#: More blocks than anvil keeps the state of, mined (and reverted) by "earlier tests".
MINED_BEFORE = 4_200


@pytest.fixture(scope="module")
def worn():
    """An anvil of its own on which earlier tests mined and reverted ``MINED_BEFORE`` blocks."""
    with Anvil(logical_clock=True) as node:
        chain = Chain.connect(node.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.01))
        registry = Registry.deploy(chain, max_ttl=3_600)
        for _ in range(MINED_BEFORE // 700):
            snapshot = chain.snapshot()
            for _ in range(700):
                chain.rpc.transport.request("evm_mine", [])
            chain.revert(snapshot)
        yield chain, registry


def confirming_check(chain: Chain, registry: Registry, tmp_path) -> None:
    lease = registry.connect(chain.accounts[1]).acquire("history/r", ttl=60)
    with Guard(registry, path=tmp_path / "guard.sqlite", confirmations=2) as guard:
        with pytest.raises(TokenNotConfirmed):
            guard.check("history/r", lease.token)
        chain.mine(2)
        assert guard.check("history/r", lease.token) == lease.token


def test_a_test_isolated_on_a_worn_anvil_reads_blocks_of_its_own(worn, tmp_path):
    chain, registry = worn
    with isolated(chain):
        assert FRESH_BLOCKS > 2
        confirming_check(chain, registry, tmp_path)


def test_control_without_fresh_blocks_a_read_two_blocks_deep_finds_no_state(worn, tmp_path):
    chain, registry = worn
    snapshot = chain.snapshot()
    try:
        with pytest.raises(RpcError, match="BlockOutOfRange"):
            confirming_check(chain, registry, tmp_path)
    finally:
        chain.revert(snapshot)
