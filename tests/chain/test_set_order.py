"""renewMany and releaseMany take a set in strictly increasing order of resource ids (issue 28).

The registry checks the order as it goes, one comparison an item (checking every pair for repeats cost
205 gas a pair: 413,000 a renewMany of 64); a set out of order, with a repeat, or empty is refused with
its typed error and changes nothing. The SDK sorts every set it sends, so a set given in any order
renews and releases; each control sends the same set as given, unsorted, and the registry refuses it.
"""

from __future__ import annotations

import pytest

from chainfence import LeaseSet, LeaseStatus
from chainfence._sdk.names import resource_id
from chainfence.errors import DuplicateResource, InvalidClaimItems, UnsortedResources

pytestmark = pytest.mark.nodes("hardhat")

NAMES = ("order/a", "order/b", "order/c", "order/d")


def by_id(names) -> list[str]:
    return sorted(names, key=resource_id)


def out_of_order(names) -> list[str]:
    """``names`` reordered so that the second is below the first and the rest follow in order."""
    ordered = by_id(names)
    return [ordered[1], ordered[0], *ordered[2:]]


def send(chain, registry, sender, function, leases, ttl=None):
    ids, tokens = [lease.resource_id for lease in leases], [lease.token for lease in leases]
    args = [ids, tokens] if ttl is None else [ids, tokens, ttl]
    return chain.transact(sender, registry.address, registry._encode(function, args))


def state(registry, names) -> list[tuple]:
    return [(lease.token, lease.expires_at, lease.status) for lease in map(registry.last_lease, names)]


@pytest.fixture
def held(alice, chain):
    leases = {name: alice.acquire(name, ttl=600) for name in NAMES}
    chain.advance_time(5)  # a renewal really moves each expiry
    return leases


@pytest.mark.parametrize(("function", "ttl"), [("renewMany", 900), ("releaseMany", None)])
def test_a_set_in_increasing_order_of_ids_goes_through(chain, registry, alice, held, function, ttl):
    """The control of every refusal below: the same leases, in the order the registry takes, go through."""
    receipt = send(chain, registry, alice.sender, function, [held[name] for name in by_id(NAMES)], ttl)
    block_time = chain.rpc.block(int(receipt["blockNumber"]))["timestamp"]
    for name in NAMES:
        lease = registry.last_lease(name)
        if ttl is None:
            assert lease.status is LeaseStatus.RELEASED
        else:
            assert lease.status is LeaseStatus.LIVE and lease.expires_at == int(block_time) + ttl


@pytest.mark.parametrize(("function", "ttl"), [("renewMany", 900), ("releaseMany", None)])
def test_a_set_out_of_order_is_refused_naming_the_pair(chain, registry, alice, held, function, ttl):
    before, block = state(registry, NAMES), chain.block_number()
    names = out_of_order(NAMES)
    with pytest.raises(UnsortedResources) as refused:
        send(chain, registry, alice.sender, function, [held[name] for name in names], ttl)
    assert (refused.value.resource_id, refused.value.previous) == (resource_id(names[1]), resource_id(names[0]))
    assert state(registry, NAMES) == before and chain.block_number() == block


@pytest.mark.parametrize(("function", "ttl"), [("renewMany", 900), ("releaseMany", None)])
def test_an_item_out_of_order_late_in_the_set_refuses_the_whole_set(chain, registry, alice, held, function, ttl):
    """The first three in order, then one below the third: the items before it were checked and acted on,
    and the refusal undoes them all."""
    before = state(registry, NAMES)
    ordered = by_id(NAMES)
    names = [ordered[0], ordered[1], ordered[3], ordered[2]]
    with pytest.raises(UnsortedResources) as refused:
        send(chain, registry, alice.sender, function, [held[name] for name in names], ttl)
    assert (refused.value.resource_id, refused.value.previous) == (resource_id(ordered[2]), resource_id(ordered[3]))
    assert state(registry, NAMES) == before


@pytest.mark.parametrize(("function", "ttl"), [("renewMany", 900), ("releaseMany", None)])
def test_a_set_with_a_repeat_is_refused(chain, registry, alice, held, function, ttl):
    before = state(registry, NAMES)
    first = by_id(NAMES)[0]
    with pytest.raises(DuplicateResource) as refused:
        send(chain, registry, alice.sender, function, [held[first], held[first]], ttl)
    assert refused.value.resource_id == resource_id(first)
    assert state(registry, NAMES) == before


@pytest.mark.parametrize(("function", "ttl"), [("renewMany", 900), ("releaseMany", None)])
def test_an_empty_set_is_refused(chain, registry, alice, held, function, ttl):
    before = state(registry, NAMES)
    with pytest.raises(InvalidClaimItems) as refused:
        send(chain, registry, alice.sender, function, [], ttl)
    assert (refused.value.count, refused.value.max_count) == (0, 64)
    assert state(registry, NAMES) == before


def test_the_sdk_sends_a_set_in_the_order_of_its_ids_whatever_order_it_was_given(chain, registry, alice):
    """A LeaseSet acquired in an order the registry would refuse renews and releases (the SDK sorts what it
    sends, and each member learns its own expiry); the control sends its members as given: refused."""
    names = out_of_order(NAMES)
    leases = LeaseSet.acquire(alice, names, ttl=600)
    assert [lease.resource for lease in leases] == names
    chain.advance_time(5)
    with pytest.raises(UnsortedResources):  # control: the naive send, the set as given
        send(chain, registry, alice.sender, "renewMany", list(leases), 900)
    leases.renew(900)
    assert {registry.last_lease(name).expires_at for name in names} == {leases[0].expires_at}
    assert all(lease.is_current() and lease.ttl == 900 for lease in leases)
    with pytest.raises(UnsortedResources):  # control
        send(chain, registry, alice.sender, "releaseMany", list(leases))
    leases.release()
    assert all(registry.last_lease(name).status is LeaseStatus.RELEASED for name in names)


def test_the_sdk_refuses_a_set_listing_a_lease_twice_before_sending(chain, registry, alice):
    from chainfence.recipes.lease_set import renew_many_steps

    lease = alice.acquire("order/a", ttl=600)
    block = chain.block_number()
    with pytest.raises(DuplicateResource):
        alice._drive(renew_many_steps(alice, [lease, lease], 600))
    assert chain.block_number() == block
