"""The embedded chain keeps its own clock: one second per block, plus advance_time. Never the wall clock.

py-evm stamps new blocks max(parent + 1, wall clock) and runs eth-tester's
gas estimates on a header stamped with the wall clock; without care, a chain
that lags the wall clock (any test suite after a few minutes, any revert)
would see leases expire early in preflights and time jump after reverts.
"""

from __future__ import annotations

import eth._utils.headers as py_evm_headers
import pytest

from chainfence.errors import LeaseHeld


@pytest.fixture
def wall_clock_an_hour_ahead(monkeypatch):
    real = py_evm_headers.eth_now
    monkeypatch.setattr(py_evm_headers, "eth_now", lambda: real() + 3_600)


def test_blocks_advance_one_second_each_whatever_the_wall_clock(embedded, wall_clock_an_hour_ahead):
    chain = embedded.chain
    start = chain.now()
    embedded.connect(chain.accounts[1]).acquire("r", ttl=30)
    chain.mine(2)
    assert chain.now() == start + 3


def test_preflight_sees_chain_time_not_wall_time(embedded, wall_clock_an_hour_ahead):
    """A 30 s lease is still live to the preflight of the next transaction, an hour of wall time later."""
    chain = embedded.chain
    lease = embedded.connect(chain.accounts[1]).acquire("r", ttl=30)
    lease.renew()
    with pytest.raises(LeaseHeld):
        embedded.connect(chain.accounts[2]).acquire("r", ttl=30)


def test_revert_keeps_the_chain_clock(embedded, wall_clock_an_hour_ahead):
    chain = embedded.chain
    snapshot = chain.snapshot()
    before = chain.now()
    chain.advance_time(100)
    chain.revert(snapshot)
    assert chain.now() == before
    chain.mine()
    assert chain.now() == before + 1


def test_advance_time_is_exact(embedded):
    chain = embedded.chain
    for seconds in (1, 2, 59, 3_600):
        before = chain.now()
        assert chain.advance_time(seconds) == before + seconds
    assert chain.advance_time(0) == chain.now()
