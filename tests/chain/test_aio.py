"""The asyncio SDK (chainfence.aio) on both backends: the same operations, errors and chain state as the sync one.

Each test drives its coroutine with ``asyncio.run`` (no pytest plugin) over
``AsyncChain.over(chain)``: an asyncio view of the suite's chain, so the
sync fixtures (snapshot isolation, dev controls) and the sync SDK read the
very state the asyncio SDK wrote. On eth-tester the requests go through
web3's ``AsyncEthereumTesterProvider``, on anvil through ``AsyncHTTPProvider``.
"""

from __future__ import annotations

import asyncio

import pytest
from eth_utils import keccak

from chainfence import Chain, Registry, audit
from chainfence.aio import AsyncChain, AsyncLease, AsyncRegistry
from chainfence.errors import (
    InvalidInput,
    InvalidResourceName,
    InvalidTtl,
    LeaseHeld,
    LeaseLost,
    LeaseReleased,
    StaleToken,
)
from chainfence.lease import LeaseStatus
from tests.support.sequencer import async_wait_until
from tests.support.virtual_time import WatchedClock

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

NAME = "aio/jobs"


def run(chain: Chain, body):
    """Run ``body(achain)`` in a fresh event loop over an asyncio view of ``chain`` (120 s safety net)."""

    async def main():
        async with AsyncChain.over(chain) as achain:
            return await asyncio.wait_for(body(achain), 120)

    return asyncio.run(main())


async def as_account(achain: AsyncChain, registry: Registry, index: int) -> AsyncRegistry:
    return (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[index])


def test_acquire_renew_complete_release_and_views(chain, registry):
    """Every operation, awaited, changes the chain as the sync SDK's does; the sync SDK reads the result."""

    async def body(achain):
        alice = await as_account(achain, registry, 1)
        before = await alice.latest_token()
        lease = await alice.acquire(NAME, ttl=30)
        assert isinstance(lease, AsyncLease)
        assert lease.token == before + 1 and lease.holder == alice.sender == chain.accounts[1]
        info = await alice.lease_of(NAME)
        assert info.live and info.token == lease.token and info.holder == alice.sender
        assert await alice.check_current(NAME, lease.token)
        assert (await alice.check_current(NAME, lease.token)).token == lease.token
        assert await lease.is_current()
        chain.advance_time(5)  # a dev control of the sync chain: the asyncio view sees it
        now = await achain.now()
        await lease.renew()
        assert lease.expires_at >= now + 30 - 1
        assert await lease.complete(b"report") == keccak(b"report")
        await lease.release()
        assert lease.released and await alice.lease_of(NAME) is None
        return lease.token

    token = run(chain, body)
    last = registry.last_lease(NAME)
    assert last.status is LeaseStatus.RELEASED and last.token == token


def test_typed_errors_and_bad_input_change_nothing(chain, registry):
    """LeaseHeld for another's live lease; bad input raises before anything is sent; a superseded
    holder's completion is refused; a released token cannot be renewed."""

    async def body(achain):
        alice, bob = await as_account(achain, registry, 1), await as_account(achain, registry, 2)
        lease = await alice.acquire(NAME, ttl=30)
        with pytest.raises(LeaseHeld) as held:
            await bob.acquire(NAME, ttl=30)
        assert held.value.holder == alice.sender and held.value.token == lease.token
        latest = await bob.latest_token()
        nonce = chain.rpc.nonce(bob.sender, "latest")
        for bad in (lambda: bob.acquire(NAME, ttl=0), lambda: bob.acquire(NAME, ttl=10**9)):
            with pytest.raises(InvalidTtl):
                await bad()
        with pytest.raises(InvalidResourceName):
            await bob.acquire("", ttl=30)
        for bad_wait in (-1, float("nan"), "5", True):
            with pytest.raises(InvalidInput):
                await bob.acquire("aio/other", ttl=30, wait=bad_wait)
        assert await bob.latest_token() == latest and chain.rpc.nonce(bob.sender, "latest") == nonce
        chain.advance_time(31)
        successor = await bob.acquire(NAME, ttl=30)
        with pytest.raises(StaleToken):
            await lease.complete(b"late work")
        await successor.release()
        with pytest.raises(LeaseReleased):
            await successor.renew()

    run(chain, body)


def test_async_with_releases_on_exit_and_never_runs_the_body_without_a_lease(chain, registry):
    async def body(achain):
        alice, bob = await as_account(achain, registry, 1), await as_account(achain, registry, 2)
        async with await alice.acquire(NAME, ttl=30) as lease:
            assert (await bob.lease_of(NAME)).token == lease.token
            ran = []
            with pytest.raises(LeaseHeld):
                async with await bob.acquire(NAME, ttl=30):
                    ran.append(True)
            assert ran == []
        assert lease.released and await bob.lease_of(NAME) is None

    run(chain, body)


def test_concurrent_tasks_sending_as_one_account_each_land_once(chain, registry):
    """Five tasks acquire five resources as one account at once: the sender's lock (an asyncio.Lock
    per account) hands out nonces in order; every acquisition lands, each exactly once."""

    async def body(achain):
        alice = await as_account(achain, registry, 1)
        nonce = chain.rpc.nonce(alice.sender, "latest")
        before = await alice.latest_token()
        leases = await asyncio.gather(*(alice.acquire(f"{NAME}/{i}", ttl=30) for i in range(5)))
        assert sorted(lease.token for lease in leases) == list(range(before + 1, before + 6))
        assert chain.rpc.nonce(alice.sender, "latest") == nonce + 5

    run(chain, body)


def test_keep_renews_and_cancels_the_task_when_a_renewal_finds_the_lease_released(chain, registry):
    """keep() renews at half the ttl (injected clock); when a renewal finds the lease gone (released
    behind its back), on_lost runs, the body's task is cancelled, and leaving the block raises LeaseLost."""
    sync_alice = registry.connect(chain.accounts[1])

    async def body(achain):
        alice = await as_account(achain, registry, 1)
        lease = await alice.acquire(NAME, ttl=30)
        clock = WatchedClock(0.0)
        lost: list[LeaseLost] = []
        reached_end = []
        with pytest.raises(LeaseLost) as at_exit:
            async with lease.keep(clock=clock, since=0.0, on_lost=lost.append) as kept:
                assert kept is lease and lease.keeper is not None
                clock.now = 15.0  # a renewal is due
                await async_wait_until(lambda: lease.keeper.core.renewals == 1, "the first renewal confirmed")
                assert lease.safe_remaining() == pytest.approx(27.0)  # counted from the renewal's send at 15
                lease.check()
                sync_alice.release(NAME, lease.token)  # behind the keep-alive's back
                clock.now = 30.0  # the next renewal is due: it finds the lease released
                await asyncio.Event().wait()  # the work: runs until cancelled
                reached_end.append(True)
        assert reached_end == []
        assert at_exit.value.why == "released" and [e.why for e in lost] == ["released"]
        with pytest.raises(LeaseLost):
            lease.check()
        assert lease.safe_remaining() == 0.0

    run(chain, body)


def test_an_async_guard_accepts_the_current_token_and_fences_off_the_old_one(chain, registry, tmp_path):
    """AsyncGuard runs the Guard's own judgement (in a worker thread): the new holder's token moves the
    mark; the superseded holder's write is refused with StaleToken."""
    from chainfence import Guard
    from chainfence.aio import AsyncGuard

    guard = Guard(registry, tmp_path / "guard.sqlite")

    async def body(achain):
        alice, bob = await as_account(achain, registry, 1), await as_account(achain, registry, 2)
        fenced = AsyncGuard(guard)
        old = await alice.acquire(NAME, ttl=30)
        assert await fenced.check(NAME, old.token) == old.token
        chain.advance_time(31)
        new = await bob.acquire(NAME, ttl=30)
        assert await fenced.check(NAME, new.token) == new.token
        with pytest.raises(StaleToken):
            await fenced.check(NAME, old.token)
        assert guard.mark(NAME) == new.token

    try:
        run(chain, body)
    finally:
        guard.close()


def test_an_async_renewal_carries_a_progress_marker_and_an_async_claim_completion_marks_the_item_done(chain, registry):
    """The asyncio lease renews with a progress marker (the same steps as the sync one), and an
    AsyncLease over a claimed work item renews and completes it by the item's id."""
    from chainfence import EventKind

    claimed = registry.connect(chain.accounts[2]).workset("aio-batch").claim(["x"], ttl=30)

    async def body(achain):
        alice = await as_account(achain, registry, 1)
        lease = await alice.acquire(NAME, ttl=30)
        await lease.renew(progress=b"step-1")
        bob = await as_account(achain, registry, 2)
        item = AsyncLease(bob, claimed)
        await item.renew(progress=7)
        await item.complete(b"done")
        return lease.token

    token = run(chain, body)
    markers = [e.progress for e in audit.history(registry, NAME) if e.kind is EventKind.RENEWED and e.token == token]
    assert markers == [b"step-1".ljust(32, b"\0")]
    assert registry.workset("aio-batch").last_lease("x").status is LeaseStatus.DONE
