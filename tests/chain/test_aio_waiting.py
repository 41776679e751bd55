"""acquire(wait=...) through chainfence.aio, on both backends: the sync waiter's steps, awaited.

The waiting logic (what wakes a waiter, the jitter, the preflight that
sends nothing while another holds the resource) is chainfence._sdk.waiting's,
run by the asyncio driver; these tests check it holds there: a waiter gets
the resource after its release and spends gas only on the acquisition, a
wait that ends raises LeaseHeld having spent nothing, and a waiter with the
real asyncio timer shares its loop with the task that releases.
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence import Chain
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import LeaseHeld
from tests.support.virtual_time import WaitClock

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

NAME = "aio/wait"


def run(chain: Chain, body):
    async def main():
        async with AsyncChain.over(chain) as achain:
            return await asyncio.wait_for(body(achain), 120)

    return asyncio.run(main())


def spent(chain: Chain, address: str) -> int:
    return chain.rpc.nonce(address, "latest")


def test_a_waiter_takes_the_resource_after_its_release_and_sends_only_then(chain, registry, alice):
    held = alice.acquire(NAME, ttl=3_000)

    async def body(achain):
        bob = (await AsyncRegistry.at(achain, registry.address)).connect(chain.accounts[2])
        before = spent(chain, bob.sender)
        clock = WaitClock(on_sleep=lambda n: held.release() if n == 2 else None).install(bob.registry)
        lease = await bob.acquire(NAME, ttl=60, wait=60)
        assert lease.token == held.token + 1 and lease.holder == bob.sender
        assert len(clock.sleeps) >= 2 and clock.now_ < 60
        assert spent(chain, bob.sender) == before + 1, "one transaction: the acquisition"

    run(chain, body)


def test_when_the_wait_ends_it_raises_lease_held_and_spent_nothing(chain, registry, alice):
    held = alice.acquire(NAME, ttl=3_000)

    async def body(achain):
        bob = (await AsyncRegistry.at(achain, registry.address)).connect(chain.accounts[2])
        before = spent(chain, bob.sender)
        clock = WaitClock().install(bob.registry)
        with pytest.raises(LeaseHeld) as raised:
            await bob.acquire(NAME, ttl=60, wait=5)
        assert (raised.value.holder, raised.value.token) == (alice.sender, held.token)
        assert clock.now_ >= 5
        assert spent(chain, bob.sender) == before, "no transaction and no gas while waiting"

    run(chain, body)


def test_a_waiter_on_the_asyncio_timer_shares_the_loop_with_the_releasing_task(chain, registry):
    """No thread: the waiting task sleeps with asyncio.sleep while another task of the same loop
    releases the lease; the waiter then acquires it (``async with await registry.acquire(..., wait=)``)."""

    async def body(achain):
        base = await AsyncRegistry.at(achain, registry.address)
        alice, bob = base.connect(chain.accounts[1]), base.connect(chain.accounts[2])
        held = await alice.acquire(NAME, ttl=3_000)
        got = []

        async def waiter():
            async with await bob.acquire(NAME, ttl=60, wait=60) as lease:
                got.append(lease.token)

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        await held.release()
        await task
        assert got == [held.token + 1]
        assert await bob.lease_of(NAME) is None  # released on leaving the block

    run(chain, body)
