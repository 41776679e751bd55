"""Claimed work items are named ``workset»item``: never displayed like a plain name, and reached by that name.

The attack (issue #17): the admin of namespace ``prod`` holds ``prod/db``; a stranger claims item ``db``
of the open workset ``prod`` (a workset without ``/`` is in no namespace). On-chain the item is
``keccak256(abi.encode("prod", "db"))`` and its ``ResourceNamed`` carries ``"prod/db"``, the very
bytes of the administered resource's name. Displayed as those bytes, the stranger's item passes for
the administered resource in the history, the audit, ``stuck`` and the timeline. Each test runs the
naive display or lookup beside the SDK's, on both backends.
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence import Guard, Registry, _names
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.audit import EventKind, timeline
from chainfence.audit.index import AuditIndex
from chainfence.errors import InvalidResourceName, LeaseReleased, UnknownToken

ADMINISTERED = "prod/db"
ITEM = "prod»db"  # item "db" of the open workset "prod"


@pytest.fixture
def registry(chain, backend_registry):
    """A registry whose namespaces are assigned at deployment (nobody can claim one later): prod to
    alice (account 1), ops to carol (account 3)."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={"prod": chain.accounts[1], "ops": chain.accounts[3]})


@pytest.fixture
def collision(registry, alice, bob):
    """alice administers namespace prod and holds prod/db; bob, a stranger, claims item db of workset prod."""
    held = alice.acquire(ADMINISTERED, ttl=600)
    claimed = bob.claim("prod", ["db"], ttl=30)
    assert (claimed.workset, claimed.item) == ("prod", "db")
    return held, claimed


def _naive(raw: bytes) -> str:
    """What the audit showed before: the bytes a ResourceNamed carried, escaped, and nothing else."""
    return _names.display(raw)


def test_control_the_named_bytes_of_the_item_and_of_the_administered_resource_are_the_same(registry, collision):
    """The control: displayed as the bytes ResourceNamed carried, the two are indistinguishable."""
    from chainfence._node import events as _events

    held, claimed = collision
    named = {
        entry.resource_id: entry.name
        for entry in _events.fetch_all(
            registry.chain,
            registry.address,
            kinds=[_events.Kind.NAMED],
            from_block=registry.deployment_block(),
            to_block=registry.chain.block_number(),
        )
    }
    assert named[held.resource_id] == named[claimed.resource_id] == b"prod/db"
    assert _naive(named[held.resource_id]) == _naive(named[claimed.resource_id]), "the naive display collides"
    # The SDK's label tells them apart by the id: keccak256(name) for a name, abi.encode for an item.
    assert _names.label(held.resource_id, named[held.resource_id]) == (ADMINISTERED, "prod/db")
    assert _names.label(claimed.resource_id, named[claimed.resource_id]) == (ITEM, "prod»db")


def test_a_strangers_item_is_never_displayed_like_the_administered_resource(chain, registry, bob, collision):
    held, claimed = collision
    shown = {event.resource_id: event.resource_display for event in registry.history()}
    assert claimed.resource == ITEM
    assert shown[held.resource_id] == "prod/db" and shown[claimed.resource_id] == "prod»db"
    names = {event.resource_id: event.resource for event in registry.history()}
    assert names[claimed.resource_id] == ITEM, "the name an audit returns is the one that reaches the item"

    index = AuditIndex(":memory:")
    index.sync(registry)
    by_id = {record.resource_id: record for record in index.resources()}
    assert by_id[held.resource_id].resource_display == "prod/db" and not by_id[held.resource_id].claimed_item
    assert by_id[claimed.resource_id].resource_display == "prod»db" and by_id[claimed.resource_id].claimed_item
    assert {r.resource_display for r in index.current()} == {"prod/db", "prod»db"}
    assert [r.resource_display for r in index.resources("prod/")] == ["prod/db"], "prod/ lists names, not items"
    assert [r.resource_display for r in index.resources("prod»")] == ["prod»db"]
    assert [r.resource_display for r in index.current(prefix="prod»d")] == ["prod»db"]
    bob.complete(ITEM, claimed.token, b"done")
    index.sync(registry)
    assert [c.resource_display for c in index.completions()] == ["prod»db"]

    # stuck(): a crashed claimant of an item is listed as the item (bob claims another item and vanishes).
    crashed = bob.claim("prod", ["cache"], ttl=10)
    chain.advance_time(11)
    report = registry.stuck()
    assert [(e.resource, e.resource_display) for e in report.crashed] == [("prod»cache", "prod»cache")]
    assert crashed.token == report.crashed[0].token
    index.sync(registry)
    assert [(e.resource_display) for e in registry.stuck(index=index).crashed] == ["prod»cache"]

    # The timeline draws two lanes, the item's with its » (a plain name's never has one bare).
    lanes = timeline.layout(index.timeline_leases([ADMINISTERED, ITEM])).lanes
    assert sorted(lane.name for lane in lanes) == ["prod/db", "prod»db"]


def test_every_lookup_reaches_an_item_by_the_name_it_is_shown_by(chain, registry, alice, bob, collision, tmp_path):
    held, claimed = collision
    token = claimed.token
    # The control: the name the audit used to print reaches the administered resource, not the item.
    assert registry.last_lease("prod/db").token == held.token != token
    with pytest.raises(UnknownToken):
        registry.check_current("prod/db", token)  # above the administered resource's token: never issued for it
    # By its name: views, history, renew, release, claim again and complete, all public.
    assert registry.check_current(ITEM, token).holder == bob.sender
    assert registry.last_lease(ITEM).token == token
    assert registry.item_lease("prod", "db").token == token
    assert [e.kind for e in registry.history(ITEM)] == [EventKind.ACQUIRED]
    assert bob.renew(ITEM, token, 60, progress=1) > 0
    assert bob.renew_item("prod", "db", token, 60) > 0
    with Guard(registry, path=tmp_path / "guard.sqlite") as guard:
        assert guard.check(ITEM, token) == token
    bob.release_item("prod", "db", token)
    with pytest.raises(LeaseReleased):
        registry.check_current(ITEM, token)
    again = bob.claim("prod", ["db"], ttl=60)
    assert again.resource == ITEM and again.token > token
    bob.release(ITEM, again.token)
    third = bob.claim("prod", ["db"], ttl=60)
    bob.complete(ITEM, third.token, b"rows: 3")
    assert registry.last_lease(ITEM).status.name == "DONE"

    index = AuditIndex(":memory:")
    index.sync(registry)
    assert [r.token for r in index.history(ITEM)] == [token, again.token, third.token]
    assert [r.token for r in index.history("prod/db")] == [held.token]
    assert [c.token for c in index.completions(resource=ITEM)] == [third.token]
    assert index.holder_at(ITEM, block=third.block_number).token == third.token
    assert [lease.token for lease in index.timeline_leases([ITEM])] == [token, again.token, third.token]

    # asyncio: the same names.
    async def run():
        achain = AsyncChain.over(chain)
        try:
            aregistry = await AsyncRegistry.at(achain, registry.address)
            return (await aregistry.last_lease(ITEM)).token
        finally:
            await achain.aclose()

    assert asyncio.run(run()) == third.token


def test_no_plain_name_can_pass_for_an_item(registry, alice):
    """'»' is refused in a plain name (so in worksets and items too), and escaped when the chain holds one."""
    for bad in ("prod»db", "»", "a»"):
        with pytest.raises(InvalidResourceName, match="reserved for claimed work items"):
            alice.acquire(bad, ttl=10)
    with pytest.raises(InvalidResourceName):
        alice.claim("prod»x", ["db"], ttl=10)
    with pytest.raises(InvalidResourceName):
        alice.claim("prod", ["d»b"], ttl=10)
    for malformed in ("a»b»c", "»db", "prod»", "x" * 129 + "»y"):
        with pytest.raises(InvalidResourceName):
            registry.last_lease(malformed)
    # A name with » published by a direct call (the contract checks only lengths) displays escaped.
    from eth_abi import encode

    from chainfence._node import artifacts as _artifacts

    selector, _ = _artifacts.functions("FencingRegistry")["acquire"]
    registry.chain.transact(
        alice.sender, registry.address, selector + encode(["bytes", "uint256"], ["prod»db".encode(), 10])
    )
    hostile = [e for e in registry.history() if e.resource_display.startswith("prod")]
    assert [e.resource_display for e in hostile] == ["prod\\u00bbdb"] and hostile[0].resource is None


def test_the_admin_revokes_and_grants_an_item_by_its_name(registry, alice, bob, carol):
    """revoke/grant take the item's name as they take a resource's (revoke_item/grant_item underneath);
    the control: the contract's workset/item string is a plain resource, with no live lease."""
    from chainfence.errors import LeaseRevoked, NotLive

    claim = bob.claim("ops/jobs", ["j1"], ttl=60)
    assert claim.resource == "ops/jobs»j1"
    with pytest.raises(NotLive):
        carol.revoke("ops/jobs/j1")  # the naive name: a plain resource nobody holds
    assert carol.revoke(claim.resource) == claim.token
    with pytest.raises(LeaseRevoked):
        bob.renew(claim.resource, claim.token, 60)
    granted = carol.grant("ops/jobs»j1", alice.sender, 60)
    assert (granted.resource, granted.workset, granted.item) == ("ops/jobs»j1", "ops/jobs", "j1")
    assert registry.check_current("ops/jobs»j1", granted.token).holder == alice.sender
    alice.complete(granted.resource, granted.token, b"done")
    assert registry.item_lease("ops/jobs", "j1").status.name == "DONE"
