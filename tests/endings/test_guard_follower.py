"""The guard's follower (``Guard(mode="follow")``): every way a lease ends, by name, for the marks, on both
backends.

alice holds ``ops/db`` and writes through a follow guard (her token becomes the mark); then her lease ends
one way; the follower's poll runs (``guard.sync()``: deterministic); alice, who has not noticed, writes
again with the same token. The follower records an end it sees as an event (released, revoked, a claimed
item's completion) and every guard on its store refuses the token at its mark with the end's own error; an
acquisition (a reacquisition, a grant, a successor after an expiry) raises the mark; an expiry alone emits
nothing (the documented window); a rollback of a block it applied latches the store. A ``mark`` guard on the
same store reads what the follower recorded.
"""

from __future__ import annotations

import pytest

from chainfence import Guard, Registry
from chainfence.endings import End
from chainfence.errors import ChainRolledBack, LeaseCompleted, LeaseReleased, LeaseRevoked, StaleToken
from chainfence.guard import Follow
from tests.endings.matrix import covers

NAME = "ops/db"


@pytest.fixture
def guards(registry, tmp_path):
    """A follow guard (its follower polled by hand) and a mark guard sharing its store."""
    follow = Guard(registry, path=tmp_path / "g.sqlite", mode=Follow(interval=3_600))
    mark = Guard(registry, path=tmp_path / "g.sqlite")
    yield follow, mark
    mark.close()
    follow.close()


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: namespace ``ops`` assigned to account 0 at deployment (revokes, grants)."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={"ops": chain.accounts[0]})


def refused(guard, token, error=None):
    """The verdict of ``guard`` on ``token``: "accepted" or the error's class name."""
    try:
        guard.check(NAME, token)
    except Exception as exc:
        return type(exc).__name__
    return "accepted"


def written(guards, lease) -> None:
    follow, mark = guards
    assert follow.check(NAME, lease.token) == lease.token
    assert mark.check(NAME, lease.token) == lease.token


@covers("guard.follower", End.EXPIRED)
def test_an_expired_holder_is_accepted_at_its_mark_until_a_successor_is_followed(chain, alice, bob, guards):
    follow, mark = guards
    lease = alice.acquire(NAME, ttl=30)
    written(guards, lease)
    chain.advance_time(31)
    follow.sync()
    assert refused(follow, lease.token) == "accepted", "an expiry emits no event: the documented window"
    successor = bob.acquire(NAME, ttl=30)
    follow.sync()
    assert follow.mark(NAME) == successor.token
    assert (refused(follow, lease.token), refused(mark, lease.token)) == ("StaleToken", "StaleToken")


@covers("guard.follower", End.RELEASED)
def test_a_released_token_is_refused_at_its_mark_once_the_release_is_followed(alice, guards):
    """The follower followed acquisitions and revokes only: a holder that released (and then, unaware, wrote)
    was accepted at its own mark by a follow guard."""
    follow, mark = guards
    lease = alice.acquire(NAME, ttl=600)
    written(guards, lease)
    lease.release()
    follow.sync()
    assert (refused(follow, lease.token), refused(mark, lease.token)) == ("LeaseReleased", "LeaseReleased")
    with pytest.raises(LeaseReleased) as raised:
        follow.check(NAME, lease.token)
    assert raised.value.token == lease.token and follow.mark(NAME) == lease.token, "a refusal moves nothing"


def test_control_a_guard_without_a_follower_accepts_the_released_holder_at_its_mark(registry, alice, tmp_path):
    """mark mode on a store no follower writes: its documented window. The follower closes it."""
    with Guard(registry, path=tmp_path / "m.sqlite") as mark:
        lease = alice.acquire(NAME, ttl=600)
        mark.check(NAME, lease.token)
        lease.release()
        assert refused(mark, lease.token) == "accepted"


@covers("guard.follower", End.COMPLETED)
def test_a_completed_claim_is_recorded_ended_and_a_plain_completion_ends_nothing(alice, guards, registry):
    """A claimed item is not reachable by its display name (its id is not that name's hash), so a guard never
    checks one by name: the follower records the completion's end against the item's id, in the store."""
    follow, mark = guards
    claim = alice.workset("ops").claim(["db"], ttl=600)
    assert claim.resource_id != follow._resource_id(NAME), "an item is not reachable by a name"
    plain = alice.acquire("ops/plain", ttl=600)
    assert follow.check("ops/plain", plain.token) == plain.token
    plain.complete(b"a result, not an end")
    claim.complete(b"done")
    follow.sync()
    assert follow.check("ops/plain", plain.token) == plain.token, "a plain lease's completion ends nothing"
    ended = (
        follow._store.conn()
        .execute("SELECT token, why FROM ended_leases WHERE resource_id = ?", (claim.resource_id,))
        .fetchone()
    )
    assert ended == (claim.token, "completed")


@covers("guard.follower", End.SUPERSEDED)
def test_a_reacquisition_raises_the_mark_and_the_old_token_is_stale(alice, guards):
    follow, mark = guards
    first = alice.acquire(NAME, ttl=600)
    written(guards, first)
    again = alice.acquire(NAME, ttl=600)
    follow.sync()
    assert follow.mark(NAME) == again.token
    assert (refused(follow, first.token), refused(mark, first.token)) == ("StaleToken", "StaleToken")
    assert refused(follow, again.token) == "accepted"


@covers("guard.follower", End.REVOKED)
def test_a_revoked_token_is_refused_at_its_mark(registry, alice, guards):
    follow, mark = guards
    lease = alice.acquire(NAME, ttl=600)
    written(guards, lease)
    registry.namespace("ops").revoke(NAME)
    follow.sync()
    assert (refused(follow, lease.token), refused(mark, lease.token)) == ("LeaseRevoked", "LeaseRevoked")


@covers("guard.follower", End.GRANTED)
def test_a_token_granted_away_is_stale_and_the_grantees_is_accepted(registry, alice, bob, guards):
    follow, mark = guards
    lease = alice.acquire(NAME, ttl=600)
    written(guards, lease)
    granted = registry.namespace("ops").grant(NAME, bob.sender, 60)
    follow.sync()
    assert follow.mark(NAME) == granted.token
    assert (refused(follow, lease.token), refused(mark, lease.token)) == ("StaleToken", "StaleToken")
    assert refused(follow, granted.token) == "accepted"


@covers("guard.follower", End.ROLLED_BACK)
def test_a_block_the_follower_applied_that_the_chain_replaced_latches_the_store(chain, alice, bob, guards):
    follow, mark = guards
    follow.sync()
    snapshot = chain.snapshot()
    lease = alice.acquire(NAME, ttl=600)
    follow.sync()
    assert follow.mark(NAME) == lease.token
    chain.revert(snapshot)
    other = bob.acquire(NAME, ttl=600)  # the same token number, another holder: history rewritten
    chain.mine(2)
    with pytest.raises(ChainRolledBack):
        follow.sync()
    for guard in guards:
        with pytest.raises(ChainRolledBack):
            guard.check(NAME, other.token)


def test_the_errors_a_follower_records_are_the_models_ends():
    from chainfence.guard._guard import _ENDED_ERRORS

    assert _ENDED_ERRORS == {"released": LeaseReleased, "completed": LeaseCompleted, "revoked": LeaseRevoked}
    assert StaleToken  # the ends an acquisition makes (superseded, granted, after an expiry)
