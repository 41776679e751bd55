"""AsyncChain's dev controls, on both backends: ``Chain``'s own steps, awaited over the asyncio layer.

``advance_time``, ``set_next_block_time``, ``mine``, ``snapshot`` and ``revert`` are written once, as
steps (``Chain._advance_time_steps``, ...), and derived for both faces (:mod:`chainfence._core.faces`):
the sync chain runs them over its blocking RPC layer, the asyncio chain over its asyncio twin. Each
test drives them on an ``AsyncChain.over(chain)`` of the suite's chain and reads the result through the
sync chain. The control: with the blocking layer cut off, the asyncio controls still work and the sync
ones fail (they are not the blocking calls in disguise).
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence import Chain
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import ChainError, InvalidInput, LeaseHeld
from chainfence.lease import AcquireReason


def run(chain: Chain, body):
    async def main():
        async with AsyncChain.over(chain) as achain:
            return await asyncio.wait_for(body(achain), 120)

    return asyncio.run(main())


def test_advance_time_and_mine_move_the_chain_as_the_sync_controls_do(chain):
    async def body(achain):
        start = await achain.now()
        assert await achain.advance_time(100) == start + 100 == chain.now()
        assert await achain.advance_time(0) == start + 100
        head = chain.block_number()
        await achain.mine(3)
        assert chain.block_number() == head + 3
        await achain.mine(0)
        assert chain.block_number() == head + 3

    run(chain, body)


def test_set_next_block_time_stamps_the_next_block(chain):
    async def body(achain):
        at = await achain.latest_time() + 50
        await achain.set_next_block_time(at)
        await achain.mine()
        assert await achain.latest_time() == at == chain.latest_time()

    run(chain, body)


def test_a_lease_runs_out_when_the_asyncio_chain_moves_time(chain, registry):
    """Time moved with ``await achain.advance_time`` is the chain's: bob takes alice's lease once it ran out."""

    async def body(achain):
        alice = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[1])
        bob = alice.connect(achain.accounts[2])
        lease = await alice.acquire("aio/dev", ttl=30)
        with pytest.raises(LeaseHeld):
            await bob.acquire("aio/dev", ttl=30)
        await achain.set_next_block_time(lease.expires_at)
        taken = await bob.acquire("aio/dev", ttl=30)
        assert taken.reason is AcquireReason.EXPIRED and taken.previous_token == lease.token

    run(chain, body)


def test_snapshot_and_revert_restore_the_chain_and_forget_what_it_rewinds(chain, registry):
    async def body(achain):
        alice = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[1])
        head = chain.block_number()
        saved = await achain.snapshot()
        lease = await alice.acquire("aio/snap", ttl=30)
        await achain.mine(2)
        assert registry.lease_of("aio/snap").token == lease.token
        await achain.revert(saved)
        assert chain.block_number() == head
        assert registry.lease_of("aio/snap") is None
        again = await alice.acquire("aio/snap", ttl=30)  # the nonce the revert rewound is asked again
        assert again.token == lease.token

    run(chain, body)


def test_bad_arguments_are_invalid_input_and_the_chain_does_not_move(chain):
    async def body(achain):
        head, now = chain.block_number(), chain.now()
        for call in (
            lambda: achain.mine(-1),
            lambda: achain.mine(1.5),
            lambda: achain.advance_time(-1),
            lambda: achain.advance_time("10"),
            lambda: achain.set_next_block_time(True),
            lambda: achain.set_next_block_time(chain.latest_time()),
        ):
            with pytest.raises(InvalidInput):
                await call()
        with pytest.raises(ChainError):
            await achain.revert(12_345)
        assert (chain.block_number(), chain.now()) == (head, now)

    run(chain, body)


def test_the_asyncio_controls_run_over_the_asyncio_layer(chain, monkeypatch):
    """With the sync chain's blocking RPC layer cut off, every asyncio control still works; control: the
    sync controls then fail."""

    def cut(*args, **kwargs):
        raise AssertionError("the blocking RPC layer was used")

    async def body(achain):
        head = await achain.block_number()
        monkeypatch.setattr(chain.rpc, "_perform", cut)
        with pytest.raises(AssertionError, match="blocking"):
            chain.mine()  # the control
        saved = await achain.snapshot()
        await achain.mine(2)
        await achain.advance_time(10)
        await achain.set_next_block_time(await achain.latest_time() + 5)
        await achain.revert(saved)
        monkeypatch.undo()
        assert chain.block_number() == head

    run(chain, body)


def test_a_chain_that_is_not_a_dev_chain_refuses_them_with_not_supported(on_anvil):
    """The same refusal as the sync chain's, before anything is sent (on anvil: the embedded chain is always
    a dev chain)."""
    from chainfence.errors import NotSupported

    chain = on_anvil.chain
    plain = Chain(chain.rpc, [], dev=None, chain_id=chain.chain_id)

    async def body(achain):
        head = await achain.block_number()
        for call in (achain.mine, achain.snapshot, lambda: achain.advance_time(5), lambda: achain.revert("0x1")):
            with pytest.raises(NotSupported):
                await call()
        with pytest.raises(NotSupported):
            await achain.set_next_block_time(await achain.latest_time() + 5)
        assert await achain.block_number() == head

    run(plain, body)
