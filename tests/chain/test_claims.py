"""Work-item claims: the next free item in one transaction, live re-claims, no janitor, done for good."""

from __future__ import annotations

import pytest

from chainfence import AcquireReason, LeaseStatus
from chainfence._sdk.names import item_id
from chainfence.errors import (
    InvalidClaimItems,
    InvalidResourceName,
    InvalidTtl,
    LeaseReleased,
    StaleToken,
)

# On hardhat's node too; not on ganache, whose EVM lacks the MCOPY these paths use (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

ITEMS = ["a", "b", "c"]


def test_claims_hand_out_items_in_order_and_none_when_all_are_taken(chain, alice, bob, carol):
    first, second = alice.workset("batch").claim(ITEMS, ttl=60), bob.workset("batch").claim(ITEMS, ttl=60)
    third = carol.workset("batch").claim(ITEMS, ttl=60)
    assert [first.item, second.item, third.item] == ITEMS
    assert first.resource_id == item_id("batch", "a") and first.resource == "batch»a"
    block = chain.block_number()
    dave = alice.connect(chain.accounts[4])
    assert dave.workset("batch").claim(ITEMS, ttl=60) is None
    assert chain.block_number() == block, "nothing to claim is seen in the preflight: nothing sent"
    assert carol.workset("batch").claim(ITEMS, ttl=60).item == "c", "carol's own item, re-claimed"


def test_a_completed_item_is_never_claimed_again_and_a_second_completion_is_refused(chain, alice, bob):
    lease = alice.workset("batch").claim(["a"], ttl=60)
    lease.complete(b"result")
    assert alice.workset("batch").last_lease("a").status is LeaseStatus.DONE
    assert bob.workset("batch").claim(["a"], ttl=60) is None and alice.workset("batch").claim(["a"], ttl=60) is None
    with pytest.raises(LeaseReleased):
        lease.complete(b"again")
    chain.advance_time(1_000)
    assert bob.workset("batch").claim(["a"], ttl=60) is None, "done does not expire"


def test_an_expired_claim_is_free_again_with_no_janitor_and_its_old_claimant_is_refused(chain, alice, bob):
    crashed = alice.workset("batch").claim(["a"], ttl=10)
    chain.advance_time(11)
    successor = bob.workset("batch").claim(["a"], ttl=60)
    assert successor.item == "a" and successor.reason is AcquireReason.EXPIRED and successor.token > crashed.token
    with pytest.raises(StaleToken):
        crashed.complete(b"late")
    successor.complete(b"ok")


def test_a_restarted_claimant_reclaims_its_own_item_live_under_a_new_token(chain, alice, bob):
    before = alice.workset("batch").claim(ITEMS, ttl=60)
    bob.workset("batch").claim(ITEMS, ttl=60)
    again = alice.workset("batch").claim(ITEMS, ttl=60)  # no memory: claim live
    assert again.item == before.item and again.reason is AcquireReason.REACQUIRED and again.token > before.token
    with pytest.raises(StaleToken):
        before.complete(b"from the earlier incarnation")


def test_item_ids_cannot_be_reached_by_acquire(chain, alice, bob):
    lease = alice.workset("batch").claim(["a"], ttl=60)
    bob.acquire("batch/a", ttl=60)  # a different resource: the display name is not the item's id
    assert alice.workset("batch").last_lease("a").token == lease.token


def test_a_released_claim_is_free_again(chain, alice, bob):
    alice.workset("batch").claim(["a"], ttl=60).release()
    assert bob.workset("batch").claim(["a"], ttl=60).reason is AcquireReason.RELEASED


def test_claim_leases_renew_with_progress_and_complete_by_item(chain, alice):
    lease = alice.workset("batch").claim(["a"], ttl=60)
    lease.renew(progress=1)
    alice.workset("batch").complete("a", lease.token, b"ok")
    assert alice.workset("batch").last_lease("a").status is LeaseStatus.DONE


@pytest.mark.parametrize(
    "workset, items, ttl, error",
    [
        ("batch", [], 60, InvalidClaimItems),
        ("batch", ["a"] * 2, 60, InvalidClaimItems),
        ("batch", [f"i{n}" for n in range(513)], 60, InvalidClaimItems),
        ("batch", "abc", 60, InvalidClaimItems),
        ("batch", ["a", ""], 60, InvalidResourceName),
        ("batch", ["a", "x" * 129], 60, InvalidResourceName),
        ("", ["a"], 60, InvalidResourceName),
        ("batch", ["a\u202e"], 60, InvalidResourceName),
        ("batch", ["a"], 0, InvalidTtl),
    ],
)
def test_bad_claims_are_typed_errors_and_send_nothing(chain, alice, workset, items, ttl, error):
    block = chain.block_number()
    with pytest.raises(error):
        alice.workset(workset).claim(items, ttl)
    assert chain.block_number() == block


def test_an_item_held_by_another_is_skipped_not_taken(chain, alice, bob):
    held = alice.workset("batch").claim(["a", "b"], ttl=60)
    assert bob.workset("batch").claim(["a", "b"], ttl=60).item == "b"
    assert alice.workset("batch").last_lease("a").holder == held.holder


def test_a_claimed_item_is_kept_alive_by_keep_and_renewed_by_its_id(chain, alice):
    """keep() renews the item (its id is not the hash of its name): the claim outlives its ttl, and
    completing it afterwards is accepted."""
    from tests.support.sequencer import wait_until
    from tests.support.virtual_time import SteppedClock

    lease = alice.workset("batch").claim(["a"], ttl=30)
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0):
        chain.advance_time(15)
        clock.now = 15.0
        wait_until(lambda: lease.keeper.core.renewals == 1, "the item's renewal")
        lease.check()
    chain.advance_time(20)  # past the claim's first ttl: alive only through the renewal
    assert alice.workset("batch").last_lease("a").token == lease.token
    lease.complete(b"kept")
    assert alice.workset("batch").last_lease("a").status is LeaseStatus.DONE
