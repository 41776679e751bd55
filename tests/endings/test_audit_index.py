"""The audit index records how every lease ended, in the model's words (``LeaseRecord.ended``), on both
backends: expired, released, completed (a claimed item's), superseded, revoked, granted (a revoke and the
grant's acquisition in one transaction); a lease the chain rolled back is rewound out of the index.

Each scenario plays on the chain, syncs a fresh index, and reads the lease back; ``verify()`` then checks
the index against the chain (the same events make the same leases).
"""

from __future__ import annotations

import pytest

from chainfence import AcquireReason, Registry
from chainfence.audit.index import ENDINGS, AuditIndex
from chainfence.endings import End
from tests.endings.matrix import covers

NAME = "ops/db"


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: namespace ``ops`` assigned to carol (account 3) at deployment."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={"ops": chain.accounts[3]})


@pytest.fixture
def index(tmp_path):
    made = AuditIndex(tmp_path / "audit.sqlite")
    yield made
    made.close()


def synced(index, registry):
    index.sync(registry)
    index.verify(registry)
    return index


def test_the_index_records_the_models_words_for_every_end_but_a_rollback():
    assert set(ENDINGS) == {end.value for end in End} - {"rolled_back"}


@covers("audit.index", End.EXPIRED)
def test_an_expired_lease_reads_expired_at_its_expiry(chain, registry, alice, bob, index):
    first = alice.acquire(NAME, ttl=30)
    chain.advance_time(31)
    synced(index, registry)
    lone = index.lease(first.token)
    assert (lone.ended, lone.status) == (None, "expired"), "nobody ended it: judged at the index's chain time"
    second = bob.acquire(NAME, ttl=30)
    synced(index, registry)
    ended = index.lease(first.token)
    assert (ended.ended, ended.ended_at, ended.successor) == ("expired", first.expires_at, second.token)


@covers("audit.index", End.RELEASED)
def test_a_released_lease_reads_released(registry, alice, index):
    lease = alice.acquire(NAME, ttl=60)
    lease.release()
    assert synced(index, registry).lease(lease.token).ended == "released"


@covers("audit.index", End.COMPLETED)
def test_a_completed_claim_reads_completed_and_a_plain_completion_ends_nothing(registry, alice, index):
    claim = alice.workset("jobs").claim(["a", "b"], ttl=60)
    claim.complete(b"done")
    plain = alice.acquire(NAME, ttl=600)
    plain.complete(b"a result, not an end")
    synced(index, registry)
    done = index.lease(claim.token)
    assert (done.ended, done.completions) == ("completed", 1)
    still = index.lease(plain.token)
    assert (still.ended, still.status, still.completions) == (None, "live", 1)


@covers("audit.index", End.SUPERSEDED)
def test_a_lease_its_holder_acquired_again_reads_superseded(registry, alice, index):
    first = alice.acquire(NAME, ttl=600)
    again = alice.acquire(NAME, ttl=600)
    ended = synced(index, registry).lease(first.token)
    assert (ended.ended, ended.successor) == ("superseded", again.token)
    assert index.lease(again.token).reason is AcquireReason.REACQUIRED


@covers("audit.index", End.REVOKED)
def test_a_revoked_lease_reads_revoked_with_its_admin_and_a_later_grant_does_not_change_that(
    registry, alice, bob, carol, index
):
    stuck = alice.acquire(NAME, ttl=600)
    carol.namespace("ops").revoke(NAME)
    later = carol.namespace("ops").grant(
        NAME, bob.sender, 60
    )  # the lease was already ended: this grant revoked nothing
    ended = synced(index, registry).lease(stuck.token)
    assert (ended.ended, ended.ended_by, ended.successor) == ("revoked", carol.sender, later.token)


@covers("audit.index", End.GRANTED)
def test_a_lease_granted_away_while_live_reads_granted_with_its_admin(registry, alice, bob, carol, index):
    """One transaction revokes alice's live lease and issues bob's: the model's one end, granted (the index
    recorded it as "revoked", the first half)."""
    held = alice.acquire(NAME, ttl=600)
    granted = carol.namespace("ops").grant(NAME, bob.sender, 60)
    synced(index, registry)
    ended, issued = index.lease(held.token), index.lease(granted.token)
    assert (ended.ended, ended.ended_by, ended.successor) == ("granted", carol.sender, granted.token)
    assert (issued.reason, issued.granted_by, issued.status) == (AcquireReason.GRANTED, carol.sender, "live")
    assert index.holder_at(NAME, block=granted.block_number) == issued
    drawn = {lease.token: lease for lease in index.timeline_leases([NAME])}
    assert (drawn[held.token].end_reason, drawn[held.token].revoked_by) == ("granted", carol.sender)


@covers("audit.index", End.GRANTED)
def test_an_index_of_the_previous_schema_reads_its_grants_as_granted_when_opened(
    registry, alice, bob, carol, index, tmp_path
):
    held = alice.acquire(NAME, ttl=600)
    carol.namespace("ops").grant(NAME, bob.sender, 60)
    synced(index, registry)
    with index._write() as conn:  # what schema 1 wrote
        conn.execute("UPDATE leases SET ended = 'revoked' WHERE token = ?", (held.token,))
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    index.close()
    reopened = AuditIndex(tmp_path / "audit.sqlite")
    try:
        assert reopened.lease(held.token).ended == "granted"
        reopened.verify(registry)
    finally:
        reopened.close()


@covers("audit.index", End.ROLLED_BACK)
def test_a_lease_the_chain_rolled_back_is_rewound_out_of_the_index(chain, registry, alice, bob, index):
    kept = alice.acquire(NAME, ttl=600)
    snapshot = chain.snapshot()
    kept.release()
    lost = bob.acquire(NAME, ttl=600)
    synced(index, registry)
    assert index.lease(lost.token).holder == bob.sender and index.lease(kept.token).ended == "released"
    chain.revert(snapshot)  # the release and bob's acquisition are gone
    chain.mine(3)  # the chain goes on past the height the index reached, on another branch
    result = index.sync(registry)
    assert result.rewound_to is not None and result.rewound_to < lost.block_number
    assert index.lease(lost.token) is None, "bob's lease never existed on this chain"
    back = index.lease(kept.token)
    assert (back.ended, back.status) == (None, "live"), "alice's release was rolled back: live again"
    index.verify(registry)
