"""Namespaces, policies, fenced revoke and grant, lock-delay and lease sets, attacked by strangers and
hostile admins on every backend (eth-tester and anvil)."""

from __future__ import annotations

import pytest

from chainfence import AcquireReason, EventKind, LeaseStatus, Registry
from chainfence._names import namespace_id
from chainfence.errors import (
    DuplicateResource,
    InvalidNamespace,
    InvalidPolicy,
    InvalidTtl,
    LeaseHeld,
    LeaseRevoked,
    LockDelayed,
    NamespaceTaken,
    NotAdmitted,
    NotLive,
    NotNamespaceAdmin,
    NotPendingAdmin,
    StaleToken,
)


def test_a_namespace_nobody_administers_stays_open_exactly_as_before(chain, alice, bob):
    """No admin: anyone acquires, any ttl up to the registry's, no lock-delay, nobody may revoke or grant."""
    lease = alice.acquire("open/db", ttl=3_600)
    chain.advance_time(3_601)
    assert bob.acquire("open/db", ttl=10).reason is AcquireReason.EXPIRED, "no lock-delay"
    assert alice.namespace_policy("open").admin is None
    for attempt in (lambda: alice.revoke("open/db"), lambda: alice.grant("open/db", alice.sender, 10)):
        with pytest.raises(NotNamespaceAdmin):
            attempt()
    assert lease.token < bob.last_lease("open/db").token


def test_a_name_without_a_slash_can_never_be_administered(chain, alice, bob):
    with pytest.raises(InvalidNamespace):
        alice.claim_namespace("a/b")
    bob.acquire("plain", ttl=60)
    with pytest.raises(NotNamespaceAdmin):
        alice.revoke("plain")
    assert alice.is_admitted("plain", alice.sender)


@pytest.mark.parametrize("length", [1, 2, 31, 32, 33, 63, 64, 95, 127])
def test_the_contract_finds_the_first_slash_wherever_it_falls(chain, alice, bob, length):
    """The contract's namespace of a name is its bytes before the first `/`, wherever that falls in the
    name's 32-byte words (the scan counts bytes with a multiplication, no loop over them): an admitted
    prefix of every length refuses a stranger, and near misses around it (a slash one byte late or one
    byte early, a byte that differs from `/` only in its top bit, no slash) stay open."""
    prefix = "p" * (length - 1) + "q"
    alice.claim_namespace(prefix)
    alice.set_policy(prefix, admission_required=True)
    administered = (f"{prefix}/", f"{prefix}/x/y", f"{prefix}//", (f"{prefix}/" + "z" * 127)[:128])
    for name in (n for n in administered if len(n.encode()) <= 128):
        with pytest.raises(NotAdmitted):
            bob.acquire(name, ttl=60)
    near_misses = (f"{prefix}x/y", f"{prefix}\u00af/", f"{prefix[:-1]}/q", prefix, f"{prefix}z")
    for name in (n for n in near_misses if len(n.encode()) <= 128):
        assert bob.acquire(name, ttl=60).token > 0, name


def test_a_stranger_cannot_squat_a_namespace_the_deployer_assigned(chain, alice, carol):
    """The deployer's assignment is in the constructor: nothing can be mined before it."""
    registry = Registry.deploy(chain, max_ttl=600, namespaces={"prod": alice.sender})
    stranger = registry.connect(carol.sender)
    with pytest.raises(NamespaceTaken) as taken:
        stranger.claim_namespace("prod")
    assert taken.value.admin == alice.sender and taken.value.namespace_name == "prod"
    assert registry.namespace_policy("prod").admin == alice.sender


def test_first_come_claims_and_the_second_claimer_is_refused(chain, alice, bob):
    alice.claim_namespace("team")
    with pytest.raises(NamespaceTaken):
        bob.claim_namespace("team")
    with pytest.raises(NamespaceTaken):
        alice.claim_namespace("team")


def test_a_stranger_cannot_administer_revoke_or_grant_outside_its_namespace(chain, alice, bob, carol):
    """carol administers 'carol' only: every admin call on alice's namespace is refused and changes nothing."""
    alice.claim_namespace("prod")
    carol.claim_namespace("carol")
    lease = bob.acquire("prod/db", ttl=60)
    block = chain.block_number()
    for attempt in (
        lambda: carol.set_policy("prod", admission_required=True),
        lambda: carol.admit("prod", [carol.sender]),
        lambda: carol.transfer_namespace_admin("prod", carol.sender),
        lambda: carol.revoke("prod/db"),
        lambda: carol.grant("prod/db", carol.sender, 60),
    ):
        with pytest.raises(NotNamespaceAdmin) as refused:
            attempt()
        assert refused.value.admin == alice.sender and refused.value.account == carol.sender
    assert chain.block_number() == block, "refused in the preflight: nothing mined"
    assert bob.last_lease("prod/db").token == lease.token and lease.is_current()
    assert alice.namespace_policy("prod").admission_required is False


def test_the_hand_over_takes_two_steps_and_only_the_offered_account_may_accept(chain, alice, bob, carol):
    alice.claim_namespace("ops")
    alice.transfer_namespace_admin("ops", bob.sender)
    assert alice.namespace_policy("ops").pending_admin == bob.sender
    assert alice.namespace_policy("ops").admin == alice.sender, "still alice's until bob accepts"
    with pytest.raises(NotPendingAdmin):
        carol.accept_namespace_admin("ops")
    bob.accept_namespace_admin("ops")
    policy = bob.namespace_policy("ops")
    assert (policy.admin, policy.pending_admin) == (bob.sender, None)
    with pytest.raises(NotNamespaceAdmin):
        alice.set_policy("ops", lock_delay=5)
    with pytest.raises(NotPendingAdmin):
        alice.accept_namespace_admin("ops")


def test_admission_refuses_strangers_and_a_policy_never_evicts_a_live_holder(chain, alice, bob, carol):
    alice.claim_namespace("prod")
    lease = carol.acquire("prod/db", ttl=60)
    alice.set_policy("prod", admission_required=True)
    assert lease.is_current(), "a policy change does not evict"
    alice.admit("prod", [bob.sender])
    assert bob.is_admitted("prod/x", bob.sender) and not bob.is_admitted("prod/x", carol.sender)
    with pytest.raises(NotAdmitted) as refused:
        carol.acquire("prod/other", ttl=60)
    assert refused.value.holder == carol.sender and refused.value.namespace == namespace_id("prod")
    with pytest.raises(NotAdmitted):
        carol.acquire_many(["free-name", "prod/other"], ttl=60)
    with pytest.raises(NotAdmitted):
        alice.grant("prod/other", carol.sender, 60)
    assert bob.acquire("prod/other", ttl=60).token > lease.token
    alice.admit("prod", [bob.sender], admitted=False)
    with pytest.raises(NotAdmitted):
        bob.acquire("prod/third", ttl=60)


def test_max_ttl_holds_acquisitions_grants_and_renewals(chain, alice, bob):
    alice.claim_namespace("prod")
    with pytest.raises(InvalidPolicy):
        alice.set_policy("prod", max_ttl=alice.max_ttl + 1)
    alice.set_policy("prod", max_ttl=30)
    with pytest.raises(InvalidTtl) as refused:
        bob.acquire("prod/db", ttl=31)
    assert refused.value.max_ttl == 30
    lease = bob.acquire("prod/db", ttl=30)
    with pytest.raises(InvalidTtl):
        lease.renew(31)
    lease.renew(30)
    with pytest.raises(InvalidTtl):
        alice.grant("prod/db", bob.sender, 31)


def test_revoke_fences_the_holder_and_the_next_acquisition_says_revoked(chain, alice, bob, carol):
    alice.claim_namespace("prod")
    stuck = bob.acquire("prod/db", ttl=600)
    revoked = alice.revoke("prod/db")
    assert revoked == stuck.token
    info = carol.last_lease("prod/db")
    assert info.status is LeaseStatus.REVOKED and not stuck.is_current()
    for attempt in (stuck.renew, stuck.release, lambda: stuck.complete(b"late write")):
        with pytest.raises(LeaseRevoked):
            attempt()
    with pytest.raises(NotLive):
        alice.revoke("prod/db")
    nxt = carol.acquire("prod/db", ttl=60)  # no lock-delay after a revoke, even with one set
    assert nxt.reason is AcquireReason.REVOKED and nxt.token > stuck.token and nxt.previous_token == stuck.token
    events = alice.history("prod/db")
    revoke = next(e for e in events if e.kind is EventKind.REVOKED)
    assert (revoke.token, revoke.holder, revoke.admin) == (stuck.token, bob.sender, alice.sender)


def test_grant_takes_over_a_live_lease_through_the_fenced_path(chain, alice, bob, carol):
    alice.claim_namespace("prod")
    old = bob.acquire("prod/db", ttl=600)
    granted = alice.grant("prod/db", carol.sender, 60)
    assert granted.reason is AcquireReason.GRANTED and granted.token > old.token
    assert granted.previous_token == old.token and granted.holder == carol.sender
    with pytest.raises(StaleToken):
        old.renew()
    kinds = [(e.kind, e.token) for e in alice.history("prod/db")]
    assert kinds[-3:] == [
        (EventKind.REVOKED, old.token), (EventKind.ACQUIRED, granted.token), (EventKind.GRANTED, granted.token),
    ]
    granted.renew()  # the grantee holds it like any lease


def test_nobody_but_the_expired_holder_may_acquire_during_the_lock_delay(chain, alice, bob, carol):
    alice.claim_namespace("prod")
    alice.set_policy("prod", lock_delay=100)
    lease = bob.acquire("prod/db", ttl=10)
    chain.advance_time(11)
    with pytest.raises(LockDelayed) as delayed:
        carol.acquire("prod/db", ttl=10)
    assert delayed.value.until == lease.expires_at + 100 and delayed.value.holder == bob.sender
    with pytest.raises(LockDelayed):
        carol.acquire_many(["prod/db"], ttl=10)
    again = bob.acquire("prod/db", ttl=10)  # the expired holder itself (Consul #430)
    assert again.reason is AcquireReason.EXPIRED and again.token > lease.token
    again.release()
    assert carol.acquire("prod/db", ttl=10).reason is AcquireReason.RELEASED, "no delay after a release"


def test_the_lock_delay_ends_at_its_time(chain, alice, bob, carol):
    alice.claim_namespace("prod")
    alice.set_policy("prod", lock_delay=50)
    lease = bob.acquire("prod/db", ttl=10)
    chain.set_next_block_time(lease.expires_at + 50)
    assert carol.acquire("prod/db", ttl=10).reason is AcquireReason.EXPIRED


def test_acquire_many_is_all_or_nothing_with_consecutive_tokens(chain, alice, bob):
    bob.acquire("held/b", ttl=600)
    latest = alice.latest_token()
    with pytest.raises(LeaseHeld) as held:
        alice.acquire_many(["set/a", "held/b", "set/c"], ttl=60)
    assert held.value.resource == "held/b"
    assert alice.latest_token() == latest and alice.lease_of("set/a") is None
    with pytest.raises(DuplicateResource):
        alice.acquire_many(["set/a", "set/a"], ttl=60)
    leases = alice.acquire_many(["set/a", "set/c", "plain"], ttl=60)
    assert leases.tokens == [latest + 1, latest + 2, latest + 3]
    leases.renew(120)
    assert all(lease.is_current() for lease in leases)
    with leases:
        pass
    assert all(alice.last_lease(name).status is LeaseStatus.RELEASED for name in ["set/a", "set/c", "plain"])


def test_a_set_renews_or_releases_nothing_when_one_lease_was_lost(chain, alice, bob):
    bob.claim_namespace("set")
    leases = alice.acquire_many(["set/a", "set/b"], ttl=600)
    bob.revoke("set/b")
    for attempt in (leases.release, leases.renew):
        with pytest.raises(LeaseRevoked) as lost:
            attempt()
        assert lost.value.resource == "set/b"
    assert leases[0].is_current(), "set/a was neither released nor renewed"


def test_a_revoked_holder_is_refused_everywhere_it_writes(chain, registry, alice, bob, tmp_path):
    """The operator's revoke reaches every fence: the registry's check, a guard in each mode that reads
    the chain, and a contract that asks the registry (FencedStore); control: before the revoke they accept."""
    from chainfence import FencedStore, Guard

    alice.claim_namespace("prod")
    stuck = bob.acquire("prod/db", ttl=600)
    store = FencedStore.deploy(registry)
    guard = Guard(registry, path=tmp_path / "guard.sqlite", mode="strict")
    try:
        guard.check("prod/db", stuck.token)  # control: accepted while live
        store.write(stuck, b"v1")
        alice.revoke("prod/db")
        with pytest.raises(LeaseRevoked):
            registry.check_current("prod/db", stuck.token)
        with pytest.raises(LeaseRevoked):
            guard.check("prod/db", stuck.token)
        with pytest.raises(LeaseRevoked):
            store.write(stuck, b"late")
    finally:
        guard.close()
