"""A laptop sleeps through its lease's expiry: on resume the keep-alive must not trust the lease.

A machine has two clocks here (``Machine``): CLOCK_MONOTONIC, which stops
while the machine is suspended (``time.monotonic()`` on Linux), and
CLOCK_BOOTTIME, which counts the suspend. The test injects a suspend: the
boot clock jumps an hour, the monotonic clock does not, and the chain (which
never slept) moves an hour too.

- fenced: the keep-alive's default clock is the lease clock
  (``chainfence.keepalive.lease_clock``, CLOCK_BOOTTIME): on resume
  ``check()`` raises ``LeaseLost(why="deadline")`` at once, the renewer
  reports the loss (on_lost) without sleeping out a wait begun before the
  suspend, and so does the asyncio keep-alive;
- control: a keep-alive on the monotonic clock (what ``keep()`` counted on)
  still trusts the lease after the suspend, though it expired on-chain.

On both backends; the test's lease clock stands in for CLOCK_BOOTTIME (the
real one cannot be suspended from a test), monkeypatched where the SDK reads
it: ``chainfence.keepalive.lease_clock``.
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence import keepalive
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import LeaseLost
from tests.support.sequencer import async_wait_until, wait_until

TTL = 30
SLEEP = 3_600


class Machine:
    """A machine's clocks: ``monotonic`` stops while it is suspended, ``boottime`` counts the suspend."""

    def __init__(self) -> None:
        self.awake = 1_000.0
        self.suspended = 0.0

    def monotonic(self) -> float:
        return self.awake

    def boottime(self) -> float:
        return self.awake + self.suspended

    def run(self, seconds: float) -> None:
        self.awake += seconds

    def suspend(self, seconds: float) -> None:
        self.suspended += seconds


@pytest.fixture
def machine(monkeypatch) -> Machine:
    machine = Machine()
    monkeypatch.setattr(keepalive, "lease_clock", machine.boottime)
    return machine


def sleep_through_the_expiry(machine: Machine, chain) -> None:
    machine.suspend(SLEEP)
    chain.advance_time(SLEEP)  # the chain did not sleep


def test_after_a_suspend_through_the_expiry_the_keep_alive_gives_the_lease_up(alice, machine):
    lease = alice.acquire("laptop/job", ttl=TTL)  # sent at boot time 1000
    lost: list[LeaseLost] = []
    with pytest.raises(LeaseLost) as at_exit:
        with lease.keep(on_lost=lost.append):  # the default clock: the lease clock
            machine.run(5)
            lease.check()
            sleep_through_the_expiry(machine, alice.chain)
            with pytest.raises(LeaseLost) as checked:
                lease.check()
            wait_until(lambda: lost, "the renewer saw the deadline that passed in the suspend")
    assert checked.value.why == at_exit.value.why == lost[0].why == "deadline"
    assert not lease.is_current(), "the lease did expire on-chain while the machine slept"


def test_before_keep_a_lease_acquired_before_a_suspend_is_past_its_deadline(alice, machine):
    """The acquisition's send time is on the lease clock too: entering keep() after the suspend refuses."""
    lease = alice.acquire("laptop/job", ttl=TTL)
    sleep_through_the_expiry(machine, alice.chain)
    assert lease.safe_remaining() == 0.0
    with pytest.raises(LeaseLost) as checked:
        lease.check()
    assert checked.value.why == "deadline"
    with pytest.raises(LeaseLost):
        with lease.keep():
            pass


def test_control_a_keep_alive_on_the_monotonic_clock_trusts_the_lease_after_the_suspend(alice, machine):
    lease = alice.acquire("laptop/job", ttl=TTL)
    with lease.keep(clock=machine.monotonic):
        machine.run(5)
        sleep_through_the_expiry(machine, alice.chain)
        lease.check()  # trusted
        assert lease.safe_remaining() > 0
        assert not lease.is_current(), "...yet it expired on-chain an hour ago"
        lease.keeper.core.stop()


def test_the_asyncio_keep_alive_counts_the_suspend_too(chain, alice, machine):
    async def main():
        async with AsyncChain.over(chain) as achain:
            registry = (await AsyncRegistry.at(achain, alice.address)).connect(alice.sender)
            lease = await registry.acquire("laptop/job", ttl=TTL)
            lost: list[LeaseLost] = []
            reached = []
            with pytest.raises(LeaseLost) as at_exit:
                async with lease.keep(on_lost=lost.append):
                    machine.run(5)
                    lease.check()
                    await asyncio.to_thread(sleep_through_the_expiry, machine, chain)
                    await async_wait_until(lambda: lost, "the keep-alive task saw the deadline")
                    await asyncio.sleep(0)
                    reached.append(True)
            return lost, at_exit.value, reached

    lost, error, reached = asyncio.run(main())
    assert [e.why for e in lost] == ["deadline"] and error.why == "deadline" and reached == []


def test_a_leader_that_slept_through_its_term_stops_leading(alice, machine):
    """Election's keep-alive counts on the lease clock too (it passed time.monotonic before): after a
    suspend through the term's expiry, the leadership is given up at once."""
    from chainfence import Election

    election = Election(alice, "laptop/leader", ttl=TTL)
    lost: list[LeaseLost] = []
    with pytest.raises(LeaseLost) as at_exit:
        with election.campaign(on_lost=lost.append) as leadership:
            machine.run(5)
            leadership.check()
            sleep_through_the_expiry(machine, alice.chain)
            with pytest.raises(LeaseLost) as checked:
                leadership.check()
            wait_until(lambda: lost, "the leader's renewer saw the deadline that passed in the suspend")
    assert checked.value.why == at_exit.value.why == lost[0].why == "deadline"


def test_control_a_leader_on_the_monotonic_clock_believes_it_leads_after_the_suspend(alice, machine):
    from chainfence import Election

    election = Election(alice, "laptop/leader", ttl=TTL, clock=machine.monotonic)
    with election.campaign() as leadership:
        machine.run(5)
        sleep_through_the_expiry(machine, alice.chain)
        leadership.check()  # trusted
        assert not leadership.is_current(), "...yet its term expired on-chain an hour ago"
        leadership.lease.keeper.core.stop()
