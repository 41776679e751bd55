"""Claimed work items x every way a lease ends, on both backends: a claim is a lease in every sense.

alice claims item ``a`` of workset ``prod/batch`` (namespace ``prod``, admin
carol) and keeps it alive; the claim ends one way; her keep-alive's loss
names it (tests/endings/holding.py), and what the claim means afterwards
holds: a claimant that lost its claim completes nothing, a completed item is
never handed out again, any other end frees the item for the next claimant.
"""

from __future__ import annotations

import pytest

from chainfence import Lease
from chainfence.endings import End, LocalEnd
from chainfence.errors import InvalidInput, LeaseLost, TokenNotCurrent
from tests.endings.holding import DUE, TTL, World, assert_lost, keep_until_lost, run_async, settle
from tests.endings.matrix import covers
from tests.support.virtual_time import SteppedClock

WORKSET, ITEM = "prod/batch", "a"
NAME = f"{WORKSET}»{ITEM}"  # how a claimed item is named (_names.item_name)


@pytest.fixture
def w(chain) -> World:
    return World.on(chain)


def lose(w: World, way, monkeypatch, *, successor: bool = False) -> Lease:
    snapshot = w.chain.snapshot() if way is End.ROLLED_BACK else None
    item = w.alice.workset(WORKSET).claim([ITEM], ttl=TTL)
    assert (item.workset, item.item, item.resource) == (WORKSET, ITEM, NAME)
    lost, checked, at_exit = keep_until_lost(item, way, w, item, monkeypatch, snapshot=snapshot, successor=successor)
    assert_lost(lost, checked, at_exit, way.value, resource=NAME, token=item.token)
    return item


def refused_to_complete(item: Lease) -> None:
    with pytest.raises(TokenNotCurrent):
        item.complete(b"late result")


@covers("claims", End.EXPIRED)
def test_claim_expired(w, monkeypatch):
    item = lose(w, End.EXPIRED, monkeypatch)
    refused_to_complete(item)
    assert w.bob.workset(WORKSET).claim([ITEM], TTL).token > item.token, "the item is free again"


@covers("claims", End.RELEASED)
def test_claim_released_elsewhere(w, monkeypatch):
    item = lose(w, End.RELEASED, monkeypatch)
    refused_to_complete(item)
    assert w.bob.workset(WORKSET).claim([ITEM], TTL) is not None, "released, not done: free again"


@covers("claims", End.COMPLETED)
def test_claim_completed_elsewhere(w, monkeypatch):
    """Another process of the claimant completed it: the keep-alive says completed, and no claim ever
    hands the item out again."""
    item = lose(w, End.COMPLETED, monkeypatch)
    refused_to_complete(item)
    assert w.bob.workset(WORKSET).claim([ITEM], TTL) is None


@covers("claims", End.COMPLETED)
def test_claim_completed_by_its_claimant_inside_keep(w):
    item = w.alice.workset(WORKSET).claim([ITEM], ttl=TTL)
    clock = SteppedClock()
    lost = []
    with item, item.keep(clock=clock, since=0.0, on_lost=lost.append):
        settle(item, clock)
        item.complete(b"result")
        clock.now = DUE
        item.keeper.wake()
        with pytest.raises(LeaseLost) as checked:
            item.check()
    assert lost == [] and checked.value.why == "completed" and item.completed
    assert w.bob.workset(WORKSET).claim([ITEM], TTL) is None


@covers("claims", End.SUPERSEDED)
def test_claim_superseded_by_the_claimant_s_restarted_self(w, monkeypatch):
    """A restarted agent (same key, no memory) claims again and gets its item back under a new token:
    the earlier incarnation's keep-alive loses it and its completion is refused."""
    item = lose(w, End.SUPERSEDED, monkeypatch)
    refused_to_complete(item)


@covers("claims", End.REVOKED)
def test_claim_revoked_by_the_admin(w, monkeypatch):
    item = lose(w, End.REVOKED, monkeypatch)
    refused_to_complete(item)


@covers("claims", End.GRANTED)
def test_claim_granted_to_another(w, monkeypatch):
    item = lose(w, End.GRANTED, monkeypatch)
    refused_to_complete(item)


@covers("claims", End.ROLLED_BACK)
def test_claim_rolled_back(w, monkeypatch):
    lose(w, End.ROLLED_BACK, monkeypatch)


@covers("claims", LocalEnd.DEADLINE)
def test_claim_deadline(w, monkeypatch):
    lose(w, LocalEnd.DEADLINE, monkeypatch)
    assert w.registry.workset(WORKSET).last_lease(ITEM).live, "given up while the claim is still live on-chain"


@covers("claims", LocalEnd.ERROR)
def test_claim_error(w, monkeypatch):
    lose(w, LocalEnd.ERROR, monkeypatch)


def test_a_claim_can_be_checked_kept_renewed_and_released_like_any_lease(w):
    """The defect: ``claim(...).keep()`` raised (the claim had no send time) and ``check()`` right after
    claiming raised LeaseLost. Now the claim is a lease: check, keep, renew, release."""
    item = w.alice.workset(WORKSET).claim([ITEM], ttl=TTL)
    item.check()
    assert 0 < item.safe_remaining() <= TTL - 3
    with item.keep():
        item.check()
        item.renew()
    item.release()
    with pytest.raises(LeaseLost) as checked:
        item.check()
    assert checked.value.why == "released"
    assert w.bob.workset(WORKSET).claim([ITEM], TTL) is not None


def test_control_a_claim_without_its_send_time_cannot_be_kept_or_checked(w):
    """The control: the claim as it was built before (no record of when its transaction was sent): the
    keep-alive has nothing to count its deadline from, and check() cannot vouch for it."""
    item = w.alice.workset(WORKSET).claim([ITEM], ttl=TTL)
    item._sent_at = None  # what claim() used to leave
    with pytest.raises(LeaseLost):
        item.check()
    with pytest.raises(InvalidInput):
        item.keep()


def test_an_async_claim_is_a_lease_in_every_sense(w):
    """``AsyncRegistry.claim``: check, keep (asyncio), renew, complete."""
    from chainfence.aio import AsyncRegistry

    async def body(achain):
        alice = (await AsyncRegistry.at(achain, w.registry.address)).connect(w.alice.sender)
        item = await alice.workset(WORKSET).claim([ITEM], TTL)
        item.check()
        async with item.keep():
            await item.renew()
            item.check()
            await item.complete(b"result")
        assert item.completed
        return item

    item = run_async(w.chain, body)
    assert (item.workset, item.item) == (WORKSET, ITEM)
    assert w.registry.workset(WORKSET).last_lease(ITEM).status.name == "DONE"
