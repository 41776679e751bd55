"""acquire(wait=...): a waiter takes a freed resource at once, spends nothing while it waits, and gives up
with the holder's details; on both backends.

Every wait here runs on a WaitClock (tests/support/virtual_time.py): the
waiter's time moves only by what it sleeps, and the test acts at a given
pause ("at the waiter's first pause, alice releases"), so the order of
events is fixed whatever the machine's speed.
"""

from __future__ import annotations

import math
import threading

import pytest

from chainfence import AcquireReason
from chainfence._sdk.validate import MAX_WAIT
from chainfence._sdk.waiting import pace
from chainfence.errors import InvalidInput, LeaseHeld
from tests.support.virtual_time import WaitClock

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

NAME = "jobs/wait"


def spent(registry) -> tuple[int, int]:
    """The sender's nonce and balance: unchanged means it sent nothing and paid nothing."""
    chain = registry.chain
    return chain.rpc.nonce(registry.sender, "latest"), chain.w3.eth.get_balance(registry.sender)


def test_a_waiter_takes_the_lease_in_the_block_after_its_release(alice, bob):
    held = alice.acquire(NAME, ttl=600)
    released = {}

    def release(n):
        if n == 1:  # the waiter read it held and is waiting
            held.release()
            released["block"] = bob.chain.block_number()

    clock = WaitClock(on_sleep=release).install(bob)
    lease = bob.acquire(NAME, ttl=60, wait=60)
    assert lease.token == held.token + 1 and lease.holder == bob.sender
    assert lease.reason is AcquireReason.RELEASED and lease.previous_token == held.token
    assert lease.block_number == released["block"] + 1, "the waiter's acquisition is the next block"
    assert len(clock.sleeps) == 1 and len(clock.pauses) == 1, "one poll saw the release; one random pause"
    assert clock.now_ < 1, "virtual seconds waited after the release: under one poll and a pause"


def test_a_waiter_takes_the_lease_once_it_expires(alice, bob):
    held = alice.acquire(NAME, ttl=30)

    def expire(n):
        if n == 1:
            bob.chain.advance_time(held.expires_at - bob.chain.now())  # a block at the expiry

    WaitClock(on_sleep=expire).install(bob)
    lease = bob.acquire(NAME, ttl=60, wait=3_600)
    assert lease.token == held.token + 1
    assert lease.reason is AcquireReason.EXPIRED and lease.previous_token == held.token


def test_a_waiter_ignores_blocks_that_do_not_free_the_resource(alice, bob, carol):
    """Blocks with other resources' events, and the holder's renewal, are not a reason to send."""
    held = alice.acquire(NAME, ttl=600)
    before = spent(bob)

    def busy(n):
        if n == 1:
            carol.acquire("jobs/other", ttl=60)
        elif n == 2:
            held.renew(900)
        elif n == 3:
            bob.chain.mine(2)
        elif n == 4:
            held.release()

    clock = WaitClock(on_sleep=busy).install(bob)
    lease = bob.acquire(NAME, ttl=60, wait=60)
    assert lease.token == held.token + 2  # carol's token came in between
    assert len(clock.sleeps) == 4
    assert spent(bob)[0] == before[0] + 1, "one transaction: the acquisition"


def test_when_the_wait_ends_it_raises_lease_held_and_spent_nothing(alice, bob):
    held = alice.acquire(NAME, ttl=3_000)
    before = spent(bob)
    clock = WaitClock().install(bob)
    with pytest.raises(LeaseHeld) as raised:
        bob.acquire(NAME, ttl=60, wait=5)
    error = raised.value
    assert (error.holder, error.token, error.expires_at) == (alice.sender, held.token, held.expires_at)
    assert error.resource == NAME
    assert spent(bob) == before, "no transaction and no gas while waiting"
    assert 5 <= clock.now_ < 5 + pace(bob.chain).poll, "it waited the whole wait, and no longer"
    assert bob.lease_of(NAME).token == held.token


def test_lease_with_wait_runs_the_body_after_the_release_only(alice, bob):
    held = alice.acquire(NAME, ttl=600)
    WaitClock(on_sleep=lambda n: held.release() if n == 1 else None).install(bob)
    with bob.acquire(NAME, ttl=60, wait=60) as lease:
        assert held.released and bob.check_current(NAME, lease.token)
    assert bob.lease_of(NAME) is None  # released on exit


def test_a_free_resource_is_acquired_without_waiting(bob):
    clock = WaitClock().install(bob)
    lease = bob.acquire(NAME, ttl=60, wait=60)
    assert lease.reason is AcquireReason.UNHELD
    assert clock.sleeps == [] and clock.pauses == []


def test_the_holder_waiting_for_its_own_lease_reacquires_at_once(alice):
    held = alice.acquire(NAME, ttl=600)
    clock = WaitClock().install(alice)
    again = alice.acquire(NAME, ttl=600, wait=60)
    assert again.reason is AcquireReason.REACQUIRED and again.token == held.token + 1
    assert clock.sleeps == []


def test_a_waiter_that_loses_the_race_sends_nothing_and_waits_again(alice, bob, carol):
    """Between seeing the resource free and sending, carol takes it: bob's preflight is refused (no
    gas), and bob waits for carol's release."""
    held = alice.acquire(NAME, ttl=600)
    competitor = {}

    def on_sleep(n):
        if n == 1:
            held.release()
        elif "lease" in competitor and n == 2:
            spent_before_release["bob"] = spent(bob)
            competitor["lease"].release()

    def on_pause():
        if "lease" not in competitor:
            competitor["lease"] = carol.acquire(NAME, ttl=600)

    spent_before_release = {}
    before = spent(bob)
    clock = WaitClock(on_sleep=on_sleep, on_pause=on_pause).install(bob)
    lease = bob.acquire(NAME, ttl=60, wait=60)
    assert spent_before_release["bob"] == before, "the lost race cost bob nothing"
    assert lease.token == competitor["lease"].token + 1
    assert lease.previous_token == competitor["lease"].token
    assert len(clock.pauses) == 2  # one before the lost race, one before the win


def test_the_loser_of_a_race_gets_lease_held_at_its_deadline(alice, bob, carol):
    held = alice.acquire(NAME, ttl=600)
    WaitClock(
        on_sleep=lambda n: held.release() if n == 1 else None,
        on_pause=lambda: carol.acquire(NAME, ttl=600) if carol.lease_of(NAME) is None else None,
    ).install(bob)
    with pytest.raises(LeaseHeld) as raised:
        bob.acquire(NAME, ttl=60, wait=2)
    assert raised.value.holder == carol.sender
    assert raised.value.token == held.token + 1


def test_two_waiters_racing_for_one_release_exactly_one_wins(alice, bob, carol):
    """bob and carol both wait (in threads); alice releases once both are waiting; both see it free
    and send. Exactly one gets the lease; the other gets LeaseHeld naming the winner at its deadline."""
    held = alice.acquire(NAME, ttl=600)
    both_waiting = threading.Barrier(3, timeout=120)
    results: dict[str, object] = {}

    def waiter(name, registry):
        first = {"done": False}

        def on_sleep(n):
            if not first["done"]:
                first["done"] = True
                both_waiting.wait()  # waiting, and known held
                both_waiting.wait()  # alice has released

        WaitClock(on_sleep=on_sleep).install(registry)
        try:
            results[name] = registry.acquire(NAME, ttl=600, wait=5)
        except LeaseHeld as error:
            results[name] = error

    threads = [threading.Thread(target=waiter, args=(n, r)) for n, r in (("bob", bob), ("carol", carol))]
    for thread in threads:
        thread.start()
    both_waiting.wait()
    held.release()
    both_waiting.wait()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()
    won = {name: r for name, r in results.items() if not isinstance(r, LeaseHeld)}
    lost = {name: r for name, r in results.items() if isinstance(r, LeaseHeld)}
    assert len(won) == 1 and len(lost) == 1, results
    (winner,) = won.values()
    (loser,) = lost.values()
    assert winner.token == held.token + 1
    assert (loser.holder, loser.token) == (winner.holder, winner.token)
    assert alice.lease_of(NAME).token == winner.token


@pytest.mark.parametrize(
    "wait",
    [-1, -0.001, math.nan, math.inf, -math.inf, MAX_WAIT + 1, 10**400, "5", b"5", True, [5]],
    ids=repr,
)
def test_bad_wait_values_are_invalid_wait_and_send_nothing(alice, bob, wait):
    alice.acquire(NAME, ttl=600)
    latest, before = bob.latest_token(), spent(bob)
    for acquire in (
        lambda: bob.acquire(NAME, ttl=60, wait=wait),
        lambda: bob.acquire("jobs/free", ttl=60, wait=wait),  # free: it would have succeeded
    ):
        with pytest.raises(InvalidInput) as raised:
            acquire()
        assert isinstance(raised.value, ValueError)
    ran = []
    with pytest.raises(InvalidInput):
        with bob.acquire("jobs/free", ttl=60, wait=wait):
            ran.append(True)
    assert ran == []
    assert (bob.latest_token(), spent(bob)) == (latest, before)


@pytest.mark.parametrize("wait", [None, 0, 0.0])
def test_no_wait_keeps_todays_behaviour(alice, bob, wait):
    alice.acquire(NAME, ttl=600)
    clock = WaitClock().install(bob)
    with pytest.raises(LeaseHeld):
        bob.acquire(NAME, ttl=60, wait=wait)
    assert clock.sleeps == []


def test_control_an_acquisition_sent_without_reading_first_pays_for_its_revert(alice, bob):
    """What the waiter avoids: a retry loop that sends while the lease is held (here without the
    preflight) is mined, reverts with LeaseHeld, and costs a nonce and gas each time."""
    alice.acquire(NAME, ttl=600)
    nonce, balance = spent(bob)
    with pytest.raises(LeaseHeld):
        bob.chain.transact(bob.sender, bob.address, bob._encode("acquire", [NAME, 60]), gas=200_000)
    after_nonce, after_balance = spent(bob)
    assert after_nonce == nonce + 1 and after_balance < balance


def test_a_waiter_follows_a_head_that_went_back(chain, alice, bob):
    """A reorganisation (here a dev chain's revert) takes the head below what the waiter saw; the
    release then lands at a lower height than blocks it already saw, and is still noticed at once."""
    held = alice.acquire(NAME, ttl=600)
    snapshot = chain.snapshot()

    def on_sleep(n):
        if n == 1:
            chain.mine(3)
        elif n == 2:
            chain.revert(snapshot)
            held.release()  # one block above the snapshot: below the head the waiter saw

    clock = WaitClock(on_sleep=on_sleep).install(bob)
    lease = bob.acquire(NAME, ttl=60, wait=60)
    assert lease.reason is AcquireReason.RELEASED and lease.previous_token == held.token
    assert len(clock.sleeps) == 2
