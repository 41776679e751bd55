"""``AsyncLease.keep()`` (asyncio) x every way a lease ends, on both backends.

The asyncio keep-alive runs the same core as the thread one, in a task: on a
loss ``on_lost`` runs once, the task that entered the block is cancelled (its
work never reaches the line after the loss), leaving the block raises
``LeaseLost`` (not ``CancelledError``) whose ``why`` names the way, and
``check()`` raises it too. The story is told once in tests/endings/holding.py.
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence.aio import AsyncRegistry
from chainfence.endings import End, LocalEnd
from chainfence.errors import ChainfenceError, LeaseRevoked, StaleToken
from tests.endings.holding import TTL, World, akeep_until_lost, assert_lost, run_async
from tests.endings.matrix import covers
from tests.support.sequencer import async_wait_until
from tests.support.virtual_time import SteppedClock

JOB = "prod/job"


@pytest.fixture
def w(chain) -> World:
    return World.on(chain)


async def holder(achain, w: World) -> AsyncRegistry:
    return (await AsyncRegistry.at(achain, w.registry.address)).connect(w.alice.sender)


def lose(w: World, way, *, successor: bool = False, claimed: bool = False):
    snapshot = w.chain.snapshot() if way is End.ROLLED_BACK else None

    async def body(achain):
        alice = await holder(achain, w)
        lease = await (alice.workset("prod/batch").claim(["a"], TTL) if claimed else alice.acquire(JOB, ttl=TTL))
        lost, checked, at_exit, reached = await akeep_until_lost(
            lease, way, w, lease.lease, snapshot=snapshot, successor=successor
        )
        return lease, lost, checked, at_exit, reached

    lease, lost, checked, at_exit, reached = run_async(w.chain, body)
    assert_lost(lost, checked, at_exit, way.value, resource=lease.resource, token=lease.token)
    assert reached == ["waiting"], "the task was cancelled at the loss: its work went no further"
    assert isinstance(at_exit.__context__, asyncio.CancelledError), "the cancellation became the LeaseLost"
    return lease, at_exit


@covers("aio.keep", End.EXPIRED)
@pytest.mark.parametrize("successor", [False, True], ids=["renewal-finds-it-expired", "then-bob-acquired"])
def test_aio_keep_expired(w, successor):
    _, error = lose(w, End.EXPIRED, successor=successor)
    assert type(error.__cause__).__name__ == ("StaleToken" if successor else "LeaseExpired")


@covers("aio.keep", End.RELEASED)
def test_aio_keep_released_elsewhere(w):
    _, error = lose(w, End.RELEASED)
    assert type(error.__cause__).__name__ == "LeaseReleased"


@covers("aio.keep", End.RELEASED)
def test_aio_keep_released_by_the_task_itself_ends_quietly(w):
    async def body(achain):
        alice = await holder(achain, w)
        lease = await alice.acquire(JOB, ttl=TTL)
        clock = SteppedClock()
        lost = []
        async with lease.keep(clock=clock, since=0.0, on_lost=lost.append):
            await lease.release()
            clock.now = 15.0
            lease.keeper.wake()
            await asyncio.sleep(0)
            with pytest.raises(ChainfenceError) as checked:
                lease.check()
        return lost, checked.value

    lost, checked = run_async(w.chain, body)
    assert lost == [] and checked.why == "released"


@covers("aio.keep", End.COMPLETED)
def test_aio_keep_of_a_claimed_item_completed_elsewhere(w):
    lose(w, End.COMPLETED, claimed=True)


@covers("aio.keep", End.SUPERSEDED)
def test_aio_keep_superseded_by_the_holder_s_own_reacquisition(w):
    _, error = lose(w, End.SUPERSEDED)
    assert isinstance(error.__cause__, StaleToken)


@covers("aio.keep", End.REVOKED)
@pytest.mark.parametrize("successor", [False, True], ids=["renewal-finds-it-revoked", "then-bob-acquired"])
def test_aio_keep_revoked_by_the_admin(w, successor):
    """The asyncio side of the defect: a revoke is a loss at once, never a transient error retried."""
    _, error = lose(w, End.REVOKED, successor=successor)
    assert isinstance(error.__cause__, StaleToken if successor else LeaseRevoked)


def test_control_a_naive_async_keep_alive_retries_a_revoked_lease(w):
    """The control: a task renewing in a loop that takes every chain error for a transient one."""

    async def body(achain):
        alice = await holder(achain, w)
        lease = await alice.acquire(JOB, ttl=TTL)
        await asyncio.to_thread(w.carol.namespace("prod").revoke, JOB)
        retries = 0
        for _ in range(3):
            try:
                await lease.renew()
            except ChainfenceError:
                retries += 1
        return retries

    assert run_async(w.chain, body) == 3


@covers("aio.keep", End.GRANTED)
def test_aio_keep_granted_away_by_the_admin(w):
    _, error = lose(w, End.GRANTED)
    assert isinstance(error.__cause__, StaleToken)


@covers("aio.keep", End.ROLLED_BACK)
def test_aio_keep_rolled_back(w):
    _, error = lose(w, End.ROLLED_BACK)
    assert type(error.__cause__).__name__ == "UnknownToken"


@covers("aio.keep", LocalEnd.DEADLINE)
def test_aio_keep_deadline(w):
    lease, error = lose(w, LocalEnd.DEADLINE)
    assert type(error.__cause__).__name__ == "NodeUnreachable"
    assert w.registry.check_current(JOB, lease.token), "given up while the chain still holds it live"


@covers("aio.keep", LocalEnd.ERROR)
def test_aio_keep_error(w):
    _, error = lose(w, LocalEnd.ERROR)
    assert isinstance(error.__cause__, RuntimeError)


def test_aio_renew_with_a_new_ttl_inside_keep_moves_the_keep_alive(w):
    """``await lease.renew(ttl=10)`` inside ``async with lease.keep():`` moves the core to that ttl."""

    async def body(achain):
        alice = await holder(achain, w)
        lease = await alice.acquire(JOB, ttl=TTL)
        clock = SteppedClock()
        async with lease.keep(clock=clock, since=0.0):
            clock.now = 2.0
            await lease.renew(ttl=10)
            core = lease.keeper.core
            state = (core.ttl, core.deadline, core.interval, core.due)
            clock.now = 7.0
            await async_wait_until(lambda: core.renewals == 1, "the keep-alive's renewal at the new interval")
            return state, core.deadline

    state, deadline = run_async(w.chain, body)
    assert state == (10, 9.0, 5.0, 7.0) and deadline == 14.0
