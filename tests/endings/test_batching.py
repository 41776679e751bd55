"""Group commit (``registry.batched()``) x every way a lease ends and every way an acquisition is refused, on
both backends.

The batcher renews and releases leases for their holders and acquires for them: each way meets it as the
refusal of one operation, and it hands that caller the lone call's typed error, which
:func:`chainfence.endings.from_error` (or :func:`~chainfence.endings.refusal`) names, while an operation of
another caller sent beside it goes through. alice's leases live in namespace ``prod`` (admin carol).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chainfence import endings
from chainfence.endings import End, Refusal
from chainfence.errors import LeaseHeld, LockDelayed, NotAdmitted, StaleToken
from tests.endings.holding import TTL, World, end
from tests.endings.matrix import covers


@pytest.fixture
def w(chain) -> World:
    return World.on(chain)


def side_by_side(calls: dict[str, Any]) -> dict[str, Any]:
    """Run ``calls`` in threads at once (they share transactions as they happen to: each outcome is its own)."""
    results: dict[str, Any] = {}

    def call(label: str, fn: Any) -> None:
        try:
            results[label] = fn()
        except Exception as error:
            results[label] = error

    threads = [threading.Thread(target=call, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def renew_after(w: World, way: End, *, claimed: bool = False) -> tuple[Any, Any, Any]:
    """alice's lease (through her batcher) ends ``way``; then her batcher renews it beside a live mate."""
    batcher = w.alice.batched()
    snapshot = w.chain.snapshot() if way is End.ROLLED_BACK else None
    if claimed:
        lease = w.alice.workset("prod/jobs").claim(["i1"], TTL)
    else:
        lease = batcher.acquire("prod/subject", ttl=TTL)
    end(way, w, lease, snapshot=snapshot)
    mate = batcher.acquire("prod/mate", ttl=TTL * 10)
    results = side_by_side(
        {
            "subject": lambda: batcher.renew(lease.resource, lease.token, TTL),
            "mate": lambda: mate.renew(),
        }
    )
    assert results["mate"] is mate, f"the mate's renewal went through: {results['mate']!r}"
    return lease, results["subject"], batcher


@covers("batching", End.EXPIRED)
def test_a_batched_renewal_of_an_expired_lease_is_refused_for_its_caller(w):
    lease, error, _ = renew_after(w, End.EXPIRED)
    assert endings.from_error(error) is End.EXPIRED and error.resource == "prod/subject"


@covers("batching", End.RELEASED)
def test_a_batched_renewal_of_a_released_lease_is_refused_for_its_caller(w):
    lease, error, _ = renew_after(w, End.RELEASED)
    assert endings.from_error(error) is End.RELEASED


@covers("batching", End.COMPLETED)
def test_a_batched_renewal_of_a_completed_item_is_refused_for_its_caller(w):
    lease, error, _ = renew_after(w, End.COMPLETED, claimed=True)
    assert endings.from_error(error) is End.COMPLETED


@covers("batching", End.SUPERSEDED)
def test_a_batched_renewal_of_a_superseded_token_is_refused_for_its_caller(w):
    lease, error, _ = renew_after(w, End.SUPERSEDED)
    assert isinstance(error, StaleToken) and endings.from_error(error) is End.SUPERSEDED


@covers("batching", End.REVOKED)
def test_a_batched_renewal_of_a_revoked_lease_is_refused_for_its_caller(w):
    lease, error, _ = renew_after(w, End.REVOKED)
    assert endings.from_error(error) is End.REVOKED


@covers("batching", End.GRANTED)
def test_a_batched_renewal_after_a_grant_is_refused_and_the_registry_names_the_grant(w):
    lease, error, _ = renew_after(w, End.GRANTED)
    assert isinstance(error, StaleToken) and endings.from_error(error) is End.SUPERSEDED
    assert w.registry.ending(lease.resource, lease.token) is End.GRANTED


@covers("batching", End.ROLLED_BACK)
def test_a_batched_renewal_of_a_token_the_chain_forgot_is_refused_for_its_caller(w):
    lease, error, _ = renew_after(w, End.ROLLED_BACK)
    assert endings.from_error(error) is End.ROLLED_BACK


def test_a_batched_release_meets_the_ends_as_the_renewal_does(w):
    """The release path is the renewal's (the same holder checks): one end is enough to show it."""
    batcher = w.alice.batched()
    lease = batcher.acquire("prod/released", ttl=TTL)
    w.carol.namespace("prod").revoke("prod/released")
    with pytest.raises(Exception) as refused:
        lease.release()
    assert endings.from_error(refused.value) is End.REVOKED and not lease.released


@covers("batching", Refusal.HELD)
def test_a_batched_acquisition_of_a_held_resource_is_refused_for_its_caller(w):
    w.bob.acquire("prod/held", ttl=TTL)
    batcher = w.alice.batched()
    results = side_by_side(
        {"held": lambda: batcher.acquire("prod/held", ttl=TTL), "free": lambda: batcher.acquire("prod/free", ttl=TTL)}
    )
    assert isinstance(results["held"], LeaseHeld) and endings.refusal(results["held"]) is Refusal.HELD
    assert results["free"].holder == w.alice.sender


@covers("batching", Refusal.LOCK_DELAYED)
def test_a_batched_acquisition_in_a_lock_delay_is_refused_for_its_caller_without_waiting(w):
    w.carol.namespace("prod").set_policy(lock_delay=600)
    w.bob.acquire("prod/delayed", ttl=TTL)
    w.chain.advance_time(TTL + 1)
    batcher = w.alice.batched()
    results = side_by_side(
        {
            "delayed": lambda: batcher.acquire("prod/delayed", ttl=TTL),
            "free": lambda: batcher.acquire("prod/other", ttl=TTL),
        }
    )
    assert isinstance(results["delayed"], LockDelayed)
    assert endings.refusal(results["delayed"]) is Refusal.LOCK_DELAYED and results["delayed"].resource == "prod/delayed"
    assert results["free"].holder == w.alice.sender


@covers("batching", Refusal.NOT_ADMITTED)
def test_a_batched_acquisition_in_a_namespace_that_does_not_admit_the_sender_is_refused_for_its_caller(w):
    w.carol.namespace("prod").set_policy(admission_required=True)
    w.carol.namespace("prod").admit([w.bob.sender])
    batcher = w.alice.batched()
    with pytest.raises(NotAdmitted) as refused:
        batcher.acquire("prod/closed", ttl=TTL)
    assert endings.refusal(refused.value) is Refusal.NOT_ADMITTED
    assert w.bob.batched().acquire("prod/closed", ttl=TTL).holder == w.bob.sender
