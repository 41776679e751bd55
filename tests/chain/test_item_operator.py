"""Claimed work items are leases in every sense for their namespace's admin (issue 17): it revokes and
grants an item as it does a plain resource, and a completed item's token is refused as *completed*,
on both backends.

The defects these fix: ``revoke("prod/jobs/i1")`` answered ``NotLive`` for a live claim (a name with a
``/`` is a plain resource, never a work item), and ``grant("prod/jobs/i1", ...)`` created an unrelated
plain resource while the claim stayed. Each is asserted below as the control beside the fixed path.
"""

from __future__ import annotations

import pytest

from chainfence import AcquireReason, EventKind, LeaseStatus, Registry, audit
from chainfence._node import events as _events
from chainfence._sdk.names import item_id
from chainfence.errors import (
    LeaseCompleted,
    LeaseReleased,
    LeaseRevoked,
    NotAdmitted,
    NotLive,
    NotNamespaceAdmin,
    StaleToken,
)

WORKSET = "prod/jobs"
ITEMS = ["i1", "i2"]


@pytest.fixture
def ops(chain, registry):
    """A registry whose deployer assigned namespace 'prod' to account 3 (the operator)."""
    governed = Registry.deploy(chain, max_ttl=3_600, namespaces={"prod": chain.accounts[3]})
    return governed.connect(chain.accounts[3])


def as_(ops: Registry, account: int) -> Registry:
    return ops.connect(ops.chain.accounts[account])


def test_the_admin_revokes_a_claim_by_workset_and_item(chain, ops):
    bob = as_(ops, 2)
    claim = bob.workset(WORKSET).claim(ITEMS, ttl=600)
    # Control: the item's display name is a plain resource nobody holds; the claim is untouched.
    with pytest.raises(NotLive):
        ops.namespace("prod").revoke(f"{WORKSET}/{claim.item}")
    assert claim.is_current()

    revoked = ops.workset(WORKSET).revoke(claim.item)
    assert revoked == claim.token and not claim.is_current()
    info = ops.workset(WORKSET).last_lease(claim.item)
    assert (info.status, info.token, info.holder) == (LeaseStatus.REVOKED, claim.token, bob.sender)
    for attempt in (claim.renew, claim.release, lambda: claim.complete(b"late")):
        with pytest.raises(LeaseRevoked) as lost:
            attempt()
        assert lost.value.resource_id == item_id(WORKSET, claim.item)
    with pytest.raises(NotLive):
        ops.workset(WORKSET).revoke(claim.item)
    again = as_(ops, 1).workset(WORKSET).claim(ITEMS, ttl=60)  # not done: it may be claimed again
    assert (again.item, again.reason, again.previous_token) == (claim.item, AcquireReason.REVOKED, claim.token)
    revoke = next(e for e in audit.history(ops) if e.kind is EventKind.REVOKED)
    assert (revoke.resource_id, revoke.token, revoke.holder, revoke.admin) == (
        item_id(WORKSET, claim.item),
        claim.token,
        bob.sender,
        ops.sender,
    )


def test_the_admin_grants_an_item_and_the_grantee_completes_it(chain, ops):
    bob, carol = as_(ops, 2), as_(ops, 1)
    claim = bob.workset(WORKSET).claim(ITEMS, ttl=600)
    # Control: a grant by the display name makes an unrelated plain resource; the claim stays bob's.
    plain = ops.namespace("prod").grant(f"{WORKSET}/{claim.item}", carol.sender, 60)
    assert plain.workset is None and plain.resource_id != item_id(WORKSET, claim.item) and claim.is_current()

    granted = ops.workset(WORKSET).grant(claim.item, carol.sender, 60)
    assert (granted.workset, granted.item, granted.holder) == (WORKSET, claim.item, carol.sender)
    assert granted.reason is AcquireReason.GRANTED and granted.previous_token == claim.token
    assert granted.resource_id == item_id(WORKSET, claim.item) and granted.token > plain.token
    with pytest.raises(StaleToken):
        claim.renew()
    kinds = [(e.kind, e.token) for e in audit.history(ops) if e.resource_id == granted.resource_id]
    assert kinds[-3:] == [
        (EventKind.REVOKED, claim.token),
        (EventKind.ACQUIRED, granted.token),
        (EventKind.GRANTED, granted.token),
    ]
    granted.renew(120)
    granted.complete(b"done by the grantee")  # it carries the claimed flag: its completion marks it done
    assert ops.workset(WORKSET).last_lease(claim.item).status is LeaseStatus.DONE
    assert bob.workset(WORKSET).claim([claim.item], ttl=60) is None, "a done item is never handed out again"


def test_a_grant_of_an_item_nobody_claimed_names_it_once(chain, ops):
    granted = ops.workset(WORKSET).grant("fresh", as_(ops, 2).sender, 60)
    assert granted.reason is AcquireReason.GRANTED and granted.previous_token == 0
    receipt = chain.w3.eth.get_transaction_receipt(granted.tx_hash)
    logged = [_events.decode(log) for log in receipt["logs"]]
    named = [e for e in logged if e is not None and e.kind in _events.NAMING_KINDS]
    assert [(e.kind, e.resource_id, e.workset, e.item) for e in named] == [
        (_events.Kind.ITEM_NAMED, granted.resource_id, WORKSET.encode(), b"fresh")
    ]


def test_a_done_item_cannot_be_granted_or_revoked_and_its_token_reads_completed(chain, ops):
    bob = as_(ops, 2)
    claim = bob.workset(WORKSET).claim(ITEMS, ttl=600)
    claim.complete(b"result")
    with pytest.raises(LeaseCompleted) as completed:
        ops.workset(WORKSET).grant(claim.item, bob.sender, 60)
    assert completed.value.token == claim.token
    with pytest.raises(NotLive):
        ops.workset(WORKSET).revoke(claim.item)
    # The completed token: renew, release and complete revert with the registry's LeaseCompleted.
    for attempt in (claim.renew, claim.release, lambda: claim.complete(b"twice")):
        with pytest.raises(LeaseCompleted):
            attempt()
    assert not claim.is_current()
    # Control: a plain released lease is LeaseReleased, not LeaseCompleted.
    lease = bob.acquire("plain-resource", ttl=60)
    lease.release()
    with pytest.raises(LeaseReleased) as released:
        lease.renew()
    assert not isinstance(released.value, LeaseCompleted)


def test_check_current_of_a_done_item_raises_lease_completed_on_chain_and_in_the_sdk(chain, ops):
    """The contract's checkCurrent (what FencedStore and other contracts call) and the SDK's view."""
    bob = as_(ops, 2)
    claim = bob.workset(WORKSET).claim(ITEMS, ttl=600)
    claim.complete(b"result")
    with pytest.raises(LeaseCompleted):
        chain.call(ops.address, ops._encode("checkCurrent", [claim.resource_id, claim.token]))
    info = ops.chain._run(ops._lease_info_steps(claim.resource, claim.resource_id))
    with pytest.raises(LeaseCompleted):
        ops._raise_unless_current(claim.resource, claim.resource_id, claim.token, info)


def test_strangers_cannot_revoke_or_grant_items_and_nothing_is_mined(chain, ops):
    bob, carol = as_(ops, 2), as_(ops, 1)
    claim = bob.workset(WORKSET).claim(ITEMS, ttl=600)
    block = chain.block_number()
    for attempt in (
        lambda: carol.workset(WORKSET).revoke(claim.item),
        lambda: carol.workset(WORKSET).grant(claim.item, carol.sender, 60),
        lambda: bob.workset(WORKSET).revoke(claim.item),  # its own claim: still not the admin
    ):
        with pytest.raises(NotNamespaceAdmin) as refused:
            attempt()
        assert refused.value.admin == ops.sender and refused.value.namespace_name == "prod"
    assert chain.block_number() == block and claim.is_current()
    # An item of a workset in no namespace has no admin at all.
    other = bob.workset("jobs-without-namespace").claim(ITEMS, ttl=600)
    with pytest.raises(NotNamespaceAdmin):
        ops.workset("jobs-without-namespace").revoke(other.item)


def test_a_granted_item_obeys_the_namespace_policy(chain, ops):
    ops.namespace("prod").set_policy(admission_required=True)
    with pytest.raises(NotAdmitted):
        ops.workset(WORKSET).grant("i1", as_(ops, 2).sender, 60)
    ops.namespace("prod").admit([as_(ops, 2).sender])
    assert ops.workset(WORKSET).grant("i1", as_(ops, 2).sender, 60).holder == as_(ops, 2).sender
