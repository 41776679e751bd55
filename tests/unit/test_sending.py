"""The sender's pure parts, without a node: fee selection and replacement bumps."""

from __future__ import annotations

from types import SimpleNamespace

from chainfence._sending import Sender


class FakeEth:
    def __init__(self, base_fee):
        self.base_fee = base_fee
        self.gas_price = 7 * 10**9
        self.max_priority_fee = 2 * 10**9
        self.block_calls = 0

    def get_block(self, tag):
        self.block_calls += 1
        return {} if self.base_fee is None else {"baseFeePerGas": self.base_fee}


def sender(base_fee, clock):
    return Sender(
        SimpleNamespace(eth=FakeEth(base_fee)), {}, 1, embedded=False, receipt_timeout=1, poll_latency=0.01,
        confirmation_timeout=1, clock=clock, sleep=lambda s: None,
    )  # fmt: skip


def test_eip1559_fees_where_the_chain_has_a_base_fee():
    fees = sender(10 * 10**9, lambda: 0.0).fees()
    assert fees == {"maxFeePerGas": 22 * 10**9, "maxPriorityFeePerGas": 2 * 10**9}


def test_legacy_gas_price_where_it_has_none():
    assert sender(None, lambda: 0.0).fees() == {"gasPrice": 7 * 10**9}


def test_a_fee_quote_is_reused_for_a_second_only():
    now = [0.0]
    s = sender(10**9, lambda: now[0])
    s.fees()
    now[0] = 0.5
    s.fees()
    assert s.w3.eth.block_calls == 1
    now[0] = 1.5
    s.fees()
    assert s.w3.eth.block_calls == 2


def test_a_replacement_raises_every_fee_by_the_ten_percent_nodes_require():
    """Nodes accept a replacement only with every fee >= 110 % of the original's (+1 wei for tiny ones)."""
    for fees in ({"maxFeePerGas": 100, "maxPriorityFeePerGas": 10}, {"gasPrice": 10**12}):
        bumped = Sender.bump(fees)
        assert all(bumped[k] * 10 >= fees[k] * 11 for k in fees)
    assert Sender.bump({"maxPriorityFeePerGas": 1}) == {"maxPriorityFeePerGas": 2}
