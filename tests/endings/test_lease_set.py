"""Lease sets (``LeaseSet.acquire``) x every way a lease ends, on both backends: a set is kept alive on one shared
deadline, its loss names the member and the way, and it releases what it still can.

alice holds ``prod/a`` and ``prod/b`` in one set and keeps the set alive
(one ``renewMany`` per interval). One member ends (``prod/b``, or the first
member when the whole set ends together: an expiry, a rollback, a local
end); the next renewal is refused for that member, and the loss
(:class:`~chainfence.errors.LeaseSetLost`) names it and the way. Leaving
``with LeaseSet.acquire(registry, ...) as leases, leases.keep():`` then releases
the members still live.
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence import LeaseSet
from chainfence._sdk.names import resource_id
from chainfence.aio import AsyncLeaseSet
from chainfence.endings import End, LocalEnd
from chainfence.errors import LeaseHeld, LeaseLost, LeaseRevoked, LeaseSetLost
from chainfence.recipes.lease_set import release_many_steps
from tests.endings.holding import DUE, TTL, World, assert_lost, keep_until_lost, run_async, settle
from tests.endings.matrix import covers
from tests.support.sequencer import async_wait_until, wait_until
from tests.support.virtual_time import SteppedClock

A, B = "prod/a", "prod/b"
#: The member a refusal of the whole set names: the registry checks a set in increasing order of ids (the SDK sends
#: it so), and prod/b's id is the lower.
FIRST = min((0, 1), key=lambda i: resource_id((A, B)[i]))


@pytest.fixture
def w(chain) -> World:
    return World.on(chain)


def lose(w: World, way, monkeypatch, *, member: int = 1, successor: bool = False):
    snapshot = w.chain.snapshot() if way is End.ROLLED_BACK else None
    leases = LeaseSet.acquire(w.alice, [A, B], ttl=TTL)
    subject = leases[member]
    lost, checked, at_exit = keep_until_lost(
        leases, way, w, subject, monkeypatch, snapshot=snapshot, successor=successor
    )
    assert_lost(lost, checked, at_exit, way.value, resource=subject.resource, token=subject.token)
    assert all(isinstance(error, LeaseSetLost) for error in (*lost, checked, at_exit))
    return leases, at_exit


def live(w: World, name: str) -> bool:
    return w.registry.lease_of(name) is not None


@covers("lease_set", End.EXPIRED)
@pytest.mark.parametrize("successor", [False, True], ids=["renewal-finds-it-expired", "then-bob-acquired-b"])
def test_set_expired(w, monkeypatch, successor):
    """The whole set expires together (one expiry): the refusal names the member the registry checks first."""
    leases, error = lose(w, End.EXPIRED, monkeypatch, member=FIRST, successor=successor)
    assert error.ended == {(A, B)[FIRST]: "expired"}


@covers("lease_set", End.RELEASED)
def test_set_member_released_elsewhere(w, monkeypatch):
    leases, error = lose(w, End.RELEASED, monkeypatch)
    assert error.ended == {B: "released"} and live(w, A)
    with pytest.raises(LeaseSetLost) as released:
        leases.release()  # releases what it still can: A
    assert released.value.released == (A,) and not live(w, A) and leases[0].released


@covers("lease_set", End.COMPLETED)
def test_completing_a_set_member_ends_nothing(w):
    """A set's members are not work items: a completion records a result and the set stays kept."""
    leases = LeaseSet.acquire(w.alice, [A, B], ttl=TTL)
    clock = SteppedClock()
    lost = []
    with leases, leases.keep(clock=clock, since=0.0, on_lost=lost.append):
        settle(leases, clock)
        leases[1].complete(b"a result for b")
        clock.now = DUE
        wait_until(lambda: leases.keeper.core.renewals == 1, "the set's renewal went through")
        settle(leases, clock)
        leases.check()
    assert lost == [] and leases.released and not live(w, A) and not live(w, B)


@covers("lease_set", End.SUPERSEDED)
def test_set_member_superseded(w, monkeypatch):
    leases, error = lose(w, End.SUPERSEDED, monkeypatch)
    assert error.ended == {B: "superseded"}


@covers("lease_set", End.REVOKED)
def test_set_member_revoked(w, monkeypatch):
    leases, error = lose(w, End.REVOKED, monkeypatch)
    assert isinstance(error.__cause__, LeaseRevoked) and error.ended == {B: "revoked"}


@covers("lease_set", End.GRANTED)
def test_set_member_granted_to_another(w, monkeypatch):
    leases, error = lose(w, End.GRANTED, monkeypatch)
    assert error.ended == {B: "granted"}


@covers("lease_set", End.ROLLED_BACK)
def test_set_rolled_back(w, monkeypatch):
    lose(w, End.ROLLED_BACK, monkeypatch, member=FIRST)


@covers("lease_set", LocalEnd.DEADLINE)
def test_set_deadline(w, monkeypatch):
    """No renewMany confirmed by the shared deadline: the whole set is given up, every member named."""
    leases, error = lose(w, LocalEnd.DEADLINE, monkeypatch, member=0)
    assert error.ended == {A: "deadline", B: "deadline"} and live(w, A) and live(w, B)


@covers("lease_set", LocalEnd.ERROR)
def test_set_error(w, monkeypatch):
    leases, error = lose(w, LocalEnd.ERROR, monkeypatch, member=0)
    assert isinstance(error.__cause__, RuntimeError)


def test_leaving_the_block_releases_the_members_still_live(w):
    """The defect: after one member was revoked the set's release (releaseMany: all or nothing) was
    refused and left the others live. Now leaving ``with ... as leases, leases.keep():`` after the
    loss releases what it still can and says which member ended and how."""
    clock = SteppedClock()
    with pytest.raises(LeaseSetLost) as at_exit:
        with LeaseSet.acquire(w.alice, [A, B], ttl=TTL) as leases, leases.keep(clock=clock, since=0.0):
            settle(leases, clock)
            w.carol.namespace("prod").revoke(B)
            clock.now = DUE
            wait_until(lambda: leases.keeper.core.lost, "the loss")
    assert (at_exit.value.resource, at_exit.value.why) == (B, "revoked")
    assert not live(w, A), "the live member was released on the way out"
    assert leases[0].released and not leases[1].released
    notes = getattr(at_exit.value, "__notes__", [])
    assert any("'prod/b' (revoked)" in note and "released the others: ['prod/a']" in note for note in notes), notes
    bob_gets_a = w.bob.acquire(A, ttl=TTL)
    assert bob_gets_a.token > leases[0].token


@pytest.mark.parametrize("way", ["revoked", "expired-then-acquired", "released"])
def test_release_says_which_members_ended_and_how(w, way):
    leases = LeaseSet.acquire(w.alice, [A, B, "prod/c"], ttl=TTL)
    if way == "revoked":
        w.carol.namespace("prod").revoke(B)
        expected = {B: "revoked"}
    elif way == "released":
        w.alice.release(B, leases[1].token)
        expected = {B: "released"}
    else:
        leases.renew(ttl=5)
        w.alice.renew(A, leases[0].token, TTL)  # only A outlives the others' short ttl
        w.alice.renew("prod/c", leases[2].token, TTL)
        w.chain.advance_time(6)
        w.bob.acquire(B, ttl=TTL)
        expected = {B: "expired"}
    with pytest.raises(LeaseSetLost) as raised:
        leases.release()
    assert raised.value.ended == expected and raised.value.released == (A, "prod/c")
    assert not live(w, A) and not live(w, "prod/c")
    assert leases.released and leases[0].released and leases[2].released and not leases[1].released
    with pytest.raises(LeaseLost) as checked:
        leases[1].check()
    assert checked.value.why == expected[B]


def test_control_release_many_all_or_nothing_leaves_the_live_members_behind(w):
    """The control: the set released as before, one releaseMany: refused for the revoked member, and the
    live ones stay held until they expire."""
    leases = LeaseSet.acquire(w.alice, [A, B], ttl=TTL)
    w.carol.namespace("prod").revoke(B)
    with pytest.raises(LeaseRevoked):
        w.alice._drive(release_many_steps(w.alice, leases.leases))
    assert live(w, A)
    with pytest.raises(LeaseHeld):
        w.bob.acquire(A, ttl=TTL)


def test_control_one_keep_alive_per_member_keeps_the_rest_of_a_broken_set(w):
    """The control: each member kept alive on its own. After B is revoked, A's keep-alive goes on
    renewing: nothing tells the work that needs the whole set to stop."""
    leases = LeaseSet.acquire(w.alice, [A, B], ttl=TTL)
    clocks = [SteppedClock(), SteppedClock()]
    lost: list[LeaseLost] = []
    with leases[0].keep(clock=clocks[0], since=0.0) as a:
        with pytest.raises(LeaseLost), leases[1].keep(clock=clocks[1], since=0.0, on_lost=lost.append):
            w.carol.namespace("prod").revoke(B)
            for clock in clocks:
                clock.now = DUE
            wait_until(lambda: lost and a.keeper.core.renewals == 1, "B lost, A renewed")
        a.check()  # A's keeper vouches for A: the set's work would go on
    assert lost[0].why == "revoked" and live(w, A)


def test_the_set_renews_on_one_deadline_and_follows_a_new_ttl(w):
    leases = LeaseSet.acquire(w.alice, [A, B], ttl=TTL)
    clock = SteppedClock()
    with leases, leases.keep(clock=clock, since=0.0):
        settle(leases, clock)
        clock.now = DUE
        wait_until(lambda: leases.keeper.core.renewals == 1, "one renewMany")
        settle(leases, clock)
        assert leases.keeper.core.deadline == DUE + TTL - 3
        assert leases[0].expires_at == leases[1].expires_at == leases.expires_at
        leases.renew(ttl=10)
        assert (leases.keeper.core.ttl, leases.keeper.core.interval) == (10, 5.0)
        with pytest.raises(Exception) as alone:
            leases[0].renew()
        assert type(alone.value).__name__ == "InvalidInput", "a member is renewed with its set"
    assert not live(w, A) and not live(w, B)


def test_an_async_set_is_kept_alive_and_releases_what_it_still_can(w):
    """``AsyncLeaseSet.acquire``: kept alive in a task that is cancelled at the loss
    (naming the member and the way); leaving ``async with`` releases the live members."""
    from chainfence.aio import AsyncRegistry

    async def body(achain):
        alice = (await AsyncRegistry.at(achain, w.registry.address)).connect(w.alice.sender)
        clock = SteppedClock()
        lost = []
        reached = []
        with pytest.raises(LeaseSetLost) as at_exit:
            async with await AsyncLeaseSet.acquire(alice, [A, B], TTL) as leases:
                async with leases.keep(clock=clock, since=0.0, on_lost=lost.append):
                    await async_wait_until(lambda: leases.keeper.evaluated_at == 0.0, "the keep-alive acted")
                    await asyncio.to_thread(w.carol.namespace("prod").revoke, B)
                    clock.now = DUE
                    await asyncio.Event().wait()
                    reached.append(True)
        return leases, lost, at_exit.value, reached

    leases, lost, error, reached = run_async(w.chain, body)
    assert reached == [] and [e.why for e in lost] == ["revoked"] and (error.resource, error.why) == (B, "revoked")
    assert not live(w, A) and leases.lease_set.leases[0].released
