"""The completeness check reads a block in every shape the SDK's readers hold it, on both backends.

The audit index and a guard's follower give it headers as the node sent them (0x-hex from anvil, ints
from the embedded chain); an election's observer and a waiter give it the head they polled, in web3's
shape (``HexBytes``: the embedded chain's int bloom loses its leading zero bytes there). An honest
answer must be complete in each, without reading the block's receipts (a poll's cost), and an empty
answer in doubt.
"""

from __future__ import annotations

import pytest

from chainfence._node import completeness
from chainfence._node import events as _events
from chainfence.guard import Follow

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")


def test_an_honest_answer_is_complete_in_every_shape_without_reading_receipts(chain, registry, alice, monkeypatch):
    lease = alice.acquire("shapes/complete", ttl=600)
    number = lease.block_number
    answered = _events.fetch_all(chain, registry.address, from_block=number, to_block=number)
    assert answered, "the acquisition's logs"
    shapes = {"web3's": chain.rpc.block(number), "the node's": chain.rpc.blocks([number], raw=True)[0]}

    def no_receipts(header):
        raise AssertionError("the receipts of a block whose answer is complete were read")
        yield  # a generator, as receipts_steps is

    monkeypatch.setattr(completeness, "receipts_steps", no_receipts)
    for shape, header in shapes.items():
        assert completeness.doubt(header, registry.address, answered) is None, shape
        checked = completeness.check(chain, registry.address, number, number, answered, headers={number: header})
        assert checked.held is None and checked.end == number, shape
        assert completeness.doubt(header, registry.address, []) is not None, shape


def test_a_follower_over_honest_blocks_reads_no_receipts(chain, registry, alice, tmp_path, monkeypatch):
    """A follow guard's poll over an acquisition, a renewal (an event it does not read) and a release: every
    block checks out by its bloom alone."""
    from chainfence import Guard

    def no_receipts(header):
        raise AssertionError("the receipts of a block whose answer is complete were read")
        yield

    with Guard(registry, tmp_path / "follow.sqlite", mode=Follow(interval=3_600)) as guard:
        guard.sync()
        monkeypatch.setattr(completeness, "receipts_steps", no_receipts)
        lease = alice.acquire("shapes/followed", ttl=600)
        guard.sync()
        lease.renew()
        guard.sync()
        lease.release()
        assert guard.sync() == chain.block_number()
        assert guard.mark("shapes/followed") == lease.token and guard.follow_status().healthy


def test_a_receipts_mode_follower_over_honest_blocks_settles_each_block_with_its_events(
    chain, registry, alice, tmp_path, monkeypatch
):
    """The receipts mode on both backends (anvil: eth_getBlockReceipts; the embedded chain has none: each
    transaction's receipt): the blocks of the acquisition and the release the follower reads are settled
    by their receipts against receiptsRoot, every block checks out, and the marks are the bloom mode's."""
    from chainfence import Guard

    settled: list[int] = []
    read = completeness.receipts_steps

    def counted(header, **given):
        settled.append(int(str(header["number"]), 0) if isinstance(header["number"], str) else int(header["number"]))
        return (yield from read(header, **given))

    with (
        Guard(registry, tmp_path / "receipts.sqlite", mode=Follow(interval=3_600, completeness="receipts")) as guard,
        Guard(registry, tmp_path / "bloom.sqlite", mode=Follow(interval=3_600)) as bloom,
    ):
        guard.sync()
        bloom.sync()
        monkeypatch.setattr(completeness, "receipts_steps", counted)
        lease = alice.acquire("shapes/receipts", ttl=600)
        guard.sync()
        assert settled == [lease.block_number], "the acquisition's block, settled by its receipts"
        lease.renew()
        lease.release()
        released = chain.block_number()
        assert guard.sync() == released and guard.follow_status().healthy
        assert released in settled, "the release's block too"
        del settled[:]
        bloom.sync()
        assert settled == [], "the bloom mode reads no receipts over honest blocks"
        assert guard.marks() == bloom.marks() and guard.mark("shapes/receipts") == lease.token
