"""Election.campaign(wait=): every way the election is refused for now, by name, on both backends.

held: the candidate waits (no gas) and is elected once the leader resigns; lock_delayed: it waits out the
namespace's lock-delay after the leader's term expired (it used to give up with LockDelayed at once);
not_admitted: it stops at once with NotAdmitted. Waits run on a WaitClock.
"""

from __future__ import annotations

import pytest

from chainfence import AcquireReason
from chainfence.endings import Refusal
from chainfence.errors import LockDelayed, NotAdmitted
from tests.endings.election_scenarios import NAME, NAMESPACE, election, namespaced
from tests.endings.matrix import covers
from tests.support.virtual_time import WaitClock

DELAY = 60


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: namespace ``billing`` assigned to account 0 at deployment (revokes, grants, policies)."""
    return namespaced(chain)


def spent(registry) -> int:
    return registry.chain.rpc.nonce(registry.sender, "latest")


@covers("election.campaign", Refusal.HELD)
def test_a_candidate_waits_while_the_seat_is_held_and_is_elected_at_the_resignation(alice, bob):
    leader = election(alice).campaign()
    before = spent(bob)

    def resign(n):
        if n == 2:
            assert spent(bob) == before
            leader.resign()

    WaitClock(on_sleep=resign).install(bob)
    with election(bob).campaign(wait=60) as successor:
        assert successor.lease.reason is AcquireReason.RELEASED and successor.token == leader.token + 1


@covers("election.campaign", Refusal.LOCK_DELAYED)
def test_a_candidate_waits_out_the_lock_delay_after_the_leaders_term_expired(chain, registry, alice, bob):
    registry.namespace(NAMESPACE).set_policy(lock_delay=DELAY)
    deposed = election(alice).campaign()  # its clock stands still: alice's process is paused
    try:
        chain.advance_time(deposed.expires_at - chain.now())  # the term expires; the lock-delay starts
        until = deposed.expires_at + DELAY
        with pytest.raises(LockDelayed):  # control: campaigning without waiting is refused now
            election(bob).campaign(wait=0)
        before = spent(bob)

        def on_sleep(n):
            if n == 2:
                assert spent(bob) == before, "nothing sent during the lock-delay"
                chain.advance_time(until - chain.now())

        WaitClock(on_sleep=on_sleep).install(bob)
        with election(bob).campaign(wait=300) as successor:
            assert successor.lease.reason is AcquireReason.EXPIRED
            assert successor.lease.previous_token == deposed.token
            assert successor.since >= until
    finally:
        deposed._stop_keeping()


@covers("election.campaign", Refusal.NOT_ADMITTED)
def test_a_candidate_the_namespace_does_not_admit_is_refused_at_once(registry, alice, carol):
    registry.namespace(NAMESPACE).set_policy(admission_required=True)
    registry.namespace(NAMESPACE).admit([alice.sender])
    leader = election(alice).campaign()
    before = spent(carol)
    clock = WaitClock().install(carol)
    candidate = election(carol)
    with pytest.raises(NotAdmitted):
        candidate.campaign(wait=300)
    assert clock.sleeps == [] and spent(carol) == before and candidate.leadership is None
    leader.resign()
    assert registry.last_lease(NAME).holder == alice.sender
