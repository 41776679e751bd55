"""Leader election on a real registry (eth-tester and anvil): campaign, resign, expiry, observe, fencing.

Every wait is sequenced: a candidate's campaign waits on a WaitClock
(tests/support/virtual_time.py) and the test acts at its first pause ("the
candidate read the seat taken and is waiting: the leader resigns"); an
observer runs on a WaitClock too, so ``observe(timeout=5)`` is 5 virtual
seconds of polls, however long each poll takes. Keep-alives run on a
SteppedClock that stands still: they never renew unless the test moves it.
"""

from __future__ import annotations

import threading

import pytest

from chainfence import AcquireReason, Election, Guard, Leader, Leadership
from chainfence.errors import (
    InvalidInput,
    InvalidResourceName,
    InvalidTtl,
    LeaseHeld,
    LeaseLost,
    StaleToken,
    UnknownAccount,
)
from tests.support.sequencer import wait_until
from tests.support.virtual_time import SteppedClock, WaitClock

NAME = "billing/leader"


def election(registry, **options) -> Election:
    options.setdefault("clock", SteppedClock())
    return Election(registry, NAME, ttl=options.pop("ttl", 30), **options)


def term(leader: Leader | None) -> tuple[str, int] | None:
    return None if leader is None else (leader.holder, leader.token)


def spent(registry) -> int:
    return registry.chain.rpc.nonce(registry.sender, "latest")


def test_campaign_when_free_elects_at_once_and_resigns_on_exit(alice, bob):
    candidate = election(alice)
    with candidate.campaign() as leadership:
        assert isinstance(leadership, Leadership) and candidate.leadership is leadership
        assert leadership.holder == alice.sender and leadership.lease.reason is AcquireReason.UNHELD
        leadership.check()
        assert 26 < leadership.safe_remaining() <= 27
        seen = election(bob).leader()
        assert term(seen) == (alice.sender, leadership.token)
        assert (seen.since, seen.expires_at, seen.block_number) == (
            leadership.since,
            leadership.expires_at,
            leadership.block_number,
        )
        assert seen.expires_at == seen.since + 30
        assert leadership.is_current()
    assert leadership.resigned and candidate.leadership is None
    assert election(bob).leader() is None and bob.lease_of(NAME) is None
    with pytest.raises(LeaseLost) as after:
        leadership.check()
    assert after.value.why == "released"


def test_a_second_candidate_waits_and_is_elected_once_the_leader_resigns(alice, bob):
    leadership = election(alice).campaign()
    before = spent(bob)

    def resign(n):
        if n == 1:  # bob read the seat taken and waits
            assert spent(bob) == before, "no transaction while waiting"
            assert leadership.resign() is True

    WaitClock(on_sleep=resign).install(bob)
    with election(bob).campaign(wait=60) as successor:
        assert successor.holder == bob.sender and successor.token == leadership.token + 1
        assert successor.lease.reason is AcquireReason.RELEASED
        assert term(election(alice).leader()) == (bob.sender, successor.token)
    assert spent(bob) == before + 2, "the acquisition and the release"


def test_a_second_candidate_is_elected_once_the_leaders_term_expires(alice, bob):
    """The leader's process is paused (its clock stands still): its term runs out on-chain and bob,
    waiting, is elected; the deposed leader's resign() finds nothing to end."""
    leadership = election(alice).campaign()
    chain = alice.chain

    def expire(n):
        if n == 1:
            chain.advance_time(leadership.expires_at - chain.now())  # a block at the expiry, no event

    WaitClock(on_sleep=expire).install(bob)
    successor = election(bob).campaign(wait=3_600)
    try:
        assert successor.token == leadership.token + 1 and successor.lease.reason is AcquireReason.EXPIRED
        assert leadership.is_current() is False
        assert leadership.resign() is False, "the term had ended: nothing to give up"
        assert successor.is_current()
    finally:
        successor.resign()


def test_campaign_gives_up_with_lease_held_when_the_wait_ends(alice, bob):
    leadership = election(alice).campaign()
    before = spent(bob)
    WaitClock().install(bob)
    with pytest.raises(LeaseHeld) as held:
        election(bob).campaign(wait=5)
    assert (held.value.holder, held.value.token) == (alice.sender, leadership.token)
    with pytest.raises(LeaseHeld):
        election(bob).campaign(wait=0)
    assert spent(bob) == before
    leadership.resign()


def test_resign_of_a_non_leader_or_twice_sends_nothing_and_returns_false(alice, bob):
    follower = election(bob)
    before = spent(bob)
    assert follower.resign() is False, "never won: nothing to give up"
    leadership = election(alice).campaign()
    assert follower.resign() is False, "another's term is never ended by a non-leader"
    assert spent(bob) == before and term(follower.leader()) == (alice.sender, leadership.token)
    winner = leadership.election
    assert winner.resign() is True
    after = spent(alice)
    assert winner.resign() is False and leadership.resign() is False
    assert spent(alice) == after, "a second resign sends nothing"


def test_a_leader_campaigning_again_must_resign_first(alice):
    candidate = election(alice)
    leadership = candidate.campaign()
    with pytest.raises(InvalidInput):
        candidate.campaign()
    leadership.resign()
    again = candidate.campaign()
    assert again.token == leadership.token + 1
    again.resign()


def test_the_leaders_token_fences_its_writes_and_a_deposed_leader_is_refused(alice, bob, registry, tmp_path):
    guard = Guard(registry, tmp_path / "guard.sqlite")
    try:
        deposed = election(alice).campaign()
        assert guard.check(NAME, deposed.token) == deposed.token  # the first leader writes
        chain = alice.chain

        def expire(n):
            if n == 1:
                chain.advance_time(deposed.expires_at - chain.now())

        WaitClock(on_sleep=expire).install(bob)
        with election(bob).campaign(wait=3_600) as leader:
            assert guard.check(NAME, leader.token) == leader.token  # the successor writes
            with pytest.raises(StaleToken) as refused:
                guard.check(NAME, deposed.token)  # the deposed leader, unaware, writes late
            assert refused.value.current_token == leader.token
        assert deposed.resign() is False
    finally:
        guard.close()


def observer(registry) -> tuple[Election, WaitClock]:
    """An election read through its own registry object, whose waits run on a WaitClock."""
    reader = registry.connect(registry.chain.accounts[3])
    clock = WaitClock().install(reader)
    return Election(reader, NAME, ttl=30), clock


def test_observe_yields_exactly_the_sequence_of_terms_including_none_after_an_expiry(alice, bob, carol, registry):
    """None (free), alice, None (resigned), bob, None (expired: a block past the expiry, no event),
    carol (elected after an expiry), then alice again with a new token after carol resigned. Each
    term once; renewals are not changes."""
    watcher, _ = observer(registry)
    changes = watcher.observe(timeout=5)
    assert next(changes) is None
    chain = registry.chain
    a = election(alice).campaign()
    a.lease.renew()  # a renewal: the same term
    a.resign()
    b = election(bob).campaign()
    chain.advance_time(b.expires_at - chain.now() + 1)  # b's term runs out; no event says so
    c = election(carol).campaign()
    assert c.lease.reason is AcquireReason.EXPIRED
    c.resign()
    a2 = election(alice).campaign()
    seen = [term(leader) for leader in changes]
    assert seen == [
        (alice.sender, a.token),
        None,
        (bob.sender, b.token),
        None,
        (carol.sender, c.token),
        None,
        (alice.sender, a2.token),
    ]
    a2.resign()
    b.resign()


def test_observe_sees_an_expiry_taken_over_in_one_block_as_none_then_the_successor(alice, bob, registry):
    """The successor's acquisition is the first block past the expiry: no block says "expired" on its own."""
    watcher, _ = observer(registry)
    changes = watcher.observe(timeout=5)
    a = election(alice).campaign()
    assert term(next(changes)) == (alice.sender, a.token)
    chain = registry.chain
    chain.set_next_block_time(a.expires_at + 1)
    b = election(bob).campaign()
    assert b.lease.reason is AcquireReason.EXPIRED
    assert [term(leader) for leader in changes] == [None, (bob.sender, b.token)]
    b.resign()
    assert a.resign() is False


def test_observe_step_by_step_and_the_leader_it_reports(alice, bob, registry):
    watcher, _ = observer(registry)
    changes = watcher.observe(timeout=60)
    assert next(changes) is None
    a = election(alice).campaign()
    first = next(changes)
    assert first == watcher.leader(), "observe and leader() describe a term the same way"
    assert (first.name, first.holder, first.token, first.since) == (NAME, alice.sender, a.token, a.since)
    a.resign()
    assert next(changes) is None
    changes.close()


def test_observe_ends_when_stop_is_set(alice, registry):
    watcher, clock = observer(registry)
    stop = threading.Event()
    clock.on_sleep = lambda n: stop.set() if n == 3 else None
    assert list(watcher.observe(stop=stop)) == [None]
    assert len(clock.sleeps) == 3


def test_watch_calls_back_for_each_change_until_stopped(alice, bob, registry):
    watcher = Election(registry.connect(registry.chain.accounts[3]), NAME, ttl=30)
    seen: list[tuple[str, int] | None] = []
    with watcher.watch(lambda leader: seen.append(term(leader))) as watch:
        wait_until(lambda: seen == [None], "the initial state")
        a = election(alice).campaign()
        wait_until(lambda: len(seen) == 2, "alice's election")
        a.resign()
        wait_until(lambda: len(seen) == 3, "alice's resignation")
    assert not watch.running
    assert seen == [None, (alice.sender, a.token), None]


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda r: Election(r, "", ttl=30), InvalidResourceName),
        (lambda r: Election(r, 7, ttl=30), InvalidResourceName),
        (lambda r: Election(r, NAME, ttl=0), InvalidTtl),
        (lambda r: Election(r, NAME, ttl=30.0), InvalidTtl),
        (lambda r: Election(r, NAME, ttl=True), InvalidTtl),
        (lambda r: Election(r, NAME, ttl=3), InvalidInput),  # the margins leave no safe time
        (lambda r: Election(r, NAME, ttl=30, interval=40), InvalidInput),
        (lambda r: Election(r, NAME, ttl=30, clock=5), InvalidInput),
        (lambda r: Election(r, NAME, ttl=30, confirmations=-1), InvalidInput),
        (lambda r: Election("not a registry", NAME, ttl=30), InvalidInput),
        (lambda r: Election(r, NAME, ttl=30).campaign(wait=-1), InvalidInput),
        (lambda r: Election(r, NAME, ttl=30).campaign(wait="1"), InvalidInput),
        (lambda r: Election(r, NAME, ttl=30).campaign(on_lost="no"), InvalidInput),
        (lambda r: Election(r, NAME, ttl=99_999).campaign(), InvalidTtl),  # above the registry's max_ttl
        (lambda r: Election(r, NAME, ttl=30).observe(timeout=float("nan")), InvalidInput),
        (lambda r: Election(r, NAME, ttl=30).observe(stop=True), InvalidInput),
        (lambda r: Election(r, NAME, ttl=30).watch("no"), InvalidInput),
    ],
)
def test_bad_input_is_a_typed_error_and_sends_nothing(alice, make, error):
    before = spent(alice)
    with pytest.raises(error):
        make(alice)
    assert spent(alice) == before and alice.lease_of(NAME) is None


def test_a_registry_without_a_sender_cannot_campaign(registry):
    from chainfence import Registry

    anonymous = Registry(registry.chain, registry.address)
    with pytest.raises(UnknownAccount):
        Election(anonymous, NAME, ttl=30).campaign()
    assert Election(anonymous, NAME, ttl=30).leader() is None  # reading needs no sender


def test_a_term_lost_at_the_deadline_raises_on_exit_and_is_still_resigned(alice, bob):
    """The clock passes the safe deadline (renewals never ran): check() and the exit raise LeaseLost,
    on_lost ran, and the exit still releases the term, so a successor need not wait for its expiry."""
    clock = SteppedClock()
    lost: list[LeaseLost] = []
    with pytest.raises(LeaseLost) as at_exit:
        with election(alice, clock=clock).campaign(on_lost=lost.append) as leadership:
            clock.now = 28.0
            leadership.lease.keeper.wake()
            wait_until(lambda: lost, "on_lost")
            with pytest.raises(LeaseLost):
                leadership.check()
            assert leadership.safe_remaining() == 0.0 and leadership.lost.why == "deadline"
    assert at_exit.value.why == "deadline" and lost[0].why == "deadline"
    assert leadership.resigned and election(bob).leader() is None
    successor = election(bob).campaign(wait=0)
    assert successor.lease.reason is AcquireReason.RELEASED
    successor.resign()


def test_a_leader_that_lost_its_term_may_campaign_again(alice, bob):
    clock = SteppedClock()
    candidate = election(alice, clock=clock)
    first = candidate.campaign()
    clock.now = 28.0
    wait_until(lambda: first.lost is not None, "the loss")
    again = candidate.campaign()  # the lost term is never renewed again; the new one fences it off
    assert again.token == first.token + 1 and again.lease.reason is AcquireReason.REACQUIRED
    assert first.resign() is False
    again.resign()


@pytest.mark.parametrize("height", ["below", "above"])
def test_observe_follows_a_reorganisation_that_replaced_a_term(chain, alice, bob, registry, height):
    """A dev chain's revert takes alice's term away and bob's lands instead, at a height below the head
    the observer saw, or above it (a longer replacement chain: only the block hashes tell)."""
    watcher, _ = observer(registry)
    changes = watcher.observe(timeout=5)
    assert next(changes) is None
    snapshot = chain.snapshot()
    a = alice.acquire(NAME, ttl=600)
    assert term(next(changes)) == (alice.sender, a.token)
    seen_head = chain.block_number()
    chain.revert(snapshot)
    if height == "above":
        chain.mine(2)
    b = bob.acquire(NAME, ttl=600)
    assert (b.block_number > seen_head) is (height == "above")
    assert [term(leader) for leader in changes] == [(bob.sender, b.token)]
