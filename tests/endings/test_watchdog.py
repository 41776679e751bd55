"""The watchdog (``watchdog.stuck(registry)``): every way a lease ends, by name, on both backends.

Each scenario makes a holder look stuck first (a marker, then three renewals without changing it: the
watchdog lists it), then ends its lease one way, and checks what the watchdog lists afterwards: an ended
lease is never stuck; an expiry without a release or completion is crashed; a plain lease's completion
ends nothing (the holder that keeps renewing without progress is still stuck). The reports are asked both
from the chain's events and from an audit index.
"""

from __future__ import annotations

import pytest

from chainfence import Registry
from chainfence.audit import watchdog
from chainfence.audit.index import AuditIndex
from chainfence.endings import End
from tests.endings.matrix import covers

NAME = "ops/etl"


@pytest.fixture(params=["events", "index"])
def report(request, tmp_path):
    """watchdog.stuck(registry, ...) read from the chain's events, or through an audit index."""
    if request.param == "events":
        yield lambda registry, **options: watchdog.stuck(registry, **options)
        return
    index = AuditIndex(tmp_path / "audit.sqlite")
    yield lambda registry, **options: watchdog.stuck(registry, index=index, **options)
    index.close()


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: namespace ``ops`` assigned to account 0 at deployment (revokes, grants)."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={"ops": chain.accounts[0]})


def stuck_lease(holder, name=NAME):
    lease = holder.acquire(name, ttl=600)
    for _ in range(4):  # the first marker, then three renewals without progress
        lease.renew(progress=b"row 17")
    return lease


def listed(found) -> dict[str, list[int]]:
    return {kind: [entry.token for entry in getattr(found, kind)] for kind in ("stuck", "crashed", "long_held")}


@covers("watchdog", End.EXPIRED)
def test_a_stuck_lease_that_expired_is_crashed_not_stuck(chain, alice, report):
    lease = stuck_lease(alice)
    assert listed(report(alice))["stuck"] == [lease.token]
    chain.advance_time(lease.expires_at - chain.now())
    assert listed(report(alice, longer_than=1)) == {"stuck": [], "crashed": [lease.token], "long_held": []}


@covers("watchdog", End.RELEASED)
def test_a_released_lease_is_never_listed(chain, alice, report):
    lease = stuck_lease(alice)
    lease.release()
    assert listed(report(alice, longer_than=1)) == {"stuck": [], "crashed": [], "long_held": []}
    chain.advance_time(700)
    assert listed(report(alice, longer_than=1)) == {"stuck": [], "crashed": [], "long_held": []}


@covers("watchdog", End.COMPLETED)
def test_a_completed_claim_is_never_listed(chain, alice, report):
    claim = alice.workset("ops").claim(["etl"], ttl=600)
    for _ in range(4):  # the first marker, then three renewals without progress
        claim.renew(progress=b"row 17")
    assert listed(report(alice))["stuck"] == [claim.token]
    claim.complete(b"done")
    assert listed(report(alice, longer_than=1)) == {"stuck": [], "crashed": [], "long_held": []}
    chain.advance_time(700)
    assert listed(report(alice)) == {"stuck": [], "crashed": [], "long_held": []}


@covers("watchdog", End.COMPLETED)
def test_a_plain_completion_ends_nothing_a_holder_renewing_without_progress_after_it_is_still_stuck(
    chain, alice, report
):
    """``complete(result)`` on a plain lease records a result; the lease goes on. The watchdog took any
    completion for the end of the lease, and lost sight of a holder stuck after it."""
    lease = alice.acquire(NAME, ttl=600)
    lease.complete(b"first batch")
    for _ in range(4):  # the first marker, then three renewals without progress
        lease.renew(progress=b"row 17")
    assert listed(report(alice))["stuck"] == [lease.token]
    chain.advance_time(lease.expires_at - chain.now())
    assert listed(report(alice))["crashed"] == [], "it recorded a result before it ran out: not crashed"


@covers("watchdog", End.SUPERSEDED)
def test_a_stuck_lease_its_holder_acquired_again_is_not_listed_the_new_token_is_judged_afresh(alice, report):
    old = stuck_lease(alice)
    alice.acquire(NAME, ttl=600)
    found = listed(report(alice, longer_than=1))
    assert found["stuck"] == [] and old.token not in found["long_held"] and found["crashed"] == []


@covers("watchdog", End.REVOKED)
def test_a_revoked_stuck_lease_is_never_listed(chain, registry, alice, report):
    lease = stuck_lease(alice)
    registry.namespace("ops").revoke(NAME)
    assert listed(report(alice, longer_than=1)) == {"stuck": [], "crashed": [], "long_held": []}
    chain.advance_time(700)
    assert listed(report(alice)) == {"stuck": [], "crashed": [], "long_held": []}
    assert lease.token  # revoked, not crashed: the admin stopped it


@covers("watchdog", End.GRANTED)
def test_a_stuck_lease_granted_away_is_not_listed_and_the_grantee_is_judged_afresh(chain, registry, alice, bob, report):
    stuck = stuck_lease(alice)
    granted = registry.namespace("ops").grant(NAME, bob.sender, 600)
    found = listed(report(alice, longer_than=1))
    assert found["stuck"] == [] and stuck.token not in found["long_held"]
    chain.advance_time(granted.expires_at - chain.now())
    assert listed(report(alice))["crashed"] == [granted.token], "the grantee's lease ran out: crashed"


@covers("watchdog", End.ROLLED_BACK)
def test_a_stuck_lease_the_chain_rolled_back_is_not_listed(chain, alice, bob, report):
    snapshot = chain.snapshot()
    lease = stuck_lease(alice)
    assert listed(report(alice))["stuck"] == [lease.token]
    chain.revert(snapshot)
    other = bob.acquire(NAME, ttl=600)  # the resource on this branch: bob's, unstuck
    found = listed(report(alice, longer_than=1))
    assert found["stuck"] == [] and lease.token not in found["crashed"]
    assert other.token
