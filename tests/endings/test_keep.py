"""``lease.keep()`` (threads) x every way a lease ends, on both backends.

Each scenario: alice keeps ``prod/job`` alive (clock injected), the lease
ends one way, the next renewal (or the safe deadline) finds it: ``on_lost``
runs once, ``check()`` raises, leaving ``keep()`` raises, all with
``LeaseLost.why`` naming that way. Controls show what a naive keep-alive
does instead (tests/endings/holding.py tells the story once).
"""

from __future__ import annotations

import pytest

from chainfence import EventKind, audit, endings
from chainfence.endings import End, LocalEnd
from chainfence.errors import ChainfenceError, LeaseRevoked, NodeUnreachable, StaleToken
from tests.endings.holding import DUE, TTL, World, assert_lost, keep_until_lost, settle
from tests.endings.matrix import covers
from tests.support.sequencer import wait_until
from tests.support.virtual_time import SteppedClock

JOB = "prod/job"


@pytest.fixture
def w(chain) -> World:
    return World.on(chain)


def lose(w: World, way, monkeypatch, *, successor: bool = False):
    snapshot = w.chain.snapshot() if way is End.ROLLED_BACK else None
    lease = w.alice.acquire(JOB, ttl=TTL)
    lost, checked, at_exit = keep_until_lost(lease, way, w, lease, monkeypatch, snapshot=snapshot, successor=successor)
    assert_lost(lost, checked, at_exit, way.value, resource=JOB, token=lease.token)
    return lease, at_exit


@covers("keep", End.EXPIRED)
@pytest.mark.parametrize("successor", [False, True], ids=["renewal-finds-it-expired", "then-bob-acquired"])
def test_keep_expired(w, monkeypatch, successor):
    """Expired (the holder was paused past its ttl): LeaseExpired, or bob's acquisition that says expired."""
    lease, error = lose(w, End.EXPIRED, monkeypatch, successor=successor)
    assert type(error.__cause__).__name__ == ("StaleToken" if successor else "LeaseExpired")


@covers("keep", End.RELEASED)
def test_keep_released_elsewhere(w, monkeypatch):
    lease, error = lose(w, End.RELEASED, monkeypatch)
    assert type(error.__cause__).__name__ == "LeaseReleased"


@covers("keep", End.RELEASED)
def test_keep_released_by_the_holder_inside_the_block_ends_quietly(w):
    """The holder's own release inside ``keep()`` is not a loss: no renewal after it, no on_lost, no
    LeaseLost at exit; check() says it was released."""
    lease = w.alice.acquire(JOB, ttl=TTL)
    clock = SteppedClock()
    lost = []
    with lease.keep(clock=clock, since=0.0, on_lost=lost.append):
        settle(lease, clock)
        lease.release()
        clock.now = DUE
        lease.keeper.wake()
        with pytest.raises(Exception) as checked:
            lease.check()
        assert checked.value.why == "released"
    assert lost == [] and lease.keeper is None
    assert audit.history(w.registry, JOB)[-1].kind is EventKind.RELEASED
    assert all(e.kind is not EventKind.RENEWED for e in audit.history(w.registry, JOB)), "no renewal after the release"


@covers("keep", End.COMPLETED)
def test_keep_of_a_claimed_item_completed_elsewhere(w, monkeypatch):
    """The keep-alive keeps any lease, a claimed item too: completed by another process of the claimant,
    the next renewal finds it done (why="completed", not "released")."""
    item = w.alice.workset("prod/batch").claim(["a"], ttl=TTL)
    lost, checked, at_exit = keep_until_lost(item, End.COMPLETED, w, item, monkeypatch)
    assert_lost(lost, checked, at_exit, "completed", resource="prod/batch»a", token=item.token)


@covers("keep", End.SUPERSEDED)
def test_keep_superseded_by_the_holder_s_own_reacquisition(w, monkeypatch):
    """A second process of the same key acquires again: the successor's acquisition says reacquired."""
    lease, error = lose(w, End.SUPERSEDED, monkeypatch)
    assert isinstance(error.__cause__, StaleToken)


@covers("keep", End.REVOKED)
@pytest.mark.parametrize("successor", [False, True], ids=["renewal-finds-it-revoked", "then-bob-acquired"])
def test_keep_revoked_by_the_admin(w, monkeypatch, successor):
    """The defect: a revoke was taken for a transient error and retried. Now the first renewal after it
    loses the lease (LeaseRevoked, or bob's acquisition that says revoked), once, for good."""
    lease, error = lose(w, End.REVOKED, monkeypatch, successor=successor)
    assert isinstance(error.__cause__, StaleToken if successor else LeaseRevoked)


def test_control_a_naive_keep_alive_retries_a_revoked_lease(w):
    """The control: renew in a loop, treat every chain error as transient (what keep() did with LeaseRevoked):
    after the revoke it retries every time and never tells the work to stop."""
    lease = w.alice.acquire(JOB, ttl=TTL)
    w.carol.namespace("prod").revoke(JOB)
    retries, told_to_stop = 0, False
    for _ in range(3):
        try:
            lease.renew()
        except ChainfenceError:
            retries += 1  # "the node will answer next time"
            continue
    assert retries == 3 and not told_to_stop
    assert endings.loss_reason(LeaseRevoked(token=lease.token)) == "revoked", "the model names it a loss"


@covers("keep", End.GRANTED)
def test_keep_granted_away_by_the_admin(w, monkeypatch):
    lease, error = lose(w, End.GRANTED, monkeypatch)
    assert isinstance(error.__cause__, StaleToken)


def test_control_the_refusal_alone_cannot_tell_a_grant_from_a_reacquisition(w):
    """The control: a keep-alive that names the end from the renewal's refusal alone says "superseded"
    after a grant, exactly as after the holder's own reacquisition: only the successor's acquisition tells."""
    lease = w.alice.acquire(JOB, ttl=TTL)
    w.carol.namespace("prod").grant(JOB, w.bob.sender, TTL)
    with pytest.raises(StaleToken) as refused:
        lease.renew()
    assert endings.loss_reason(refused.value) == "superseded"


@covers("keep", End.ROLLED_BACK)
def test_keep_rolled_back(w, monkeypatch):
    """The chain loses the history that issued the token (a dev node restarted from an older state):
    the registry does not know the token; why="rolled_back", not "superseded"."""
    lease, error = lose(w, End.ROLLED_BACK, monkeypatch)
    assert type(error.__cause__).__name__ == "UnknownToken"


@covers("keep", LocalEnd.DEADLINE)
def test_keep_deadline(w, monkeypatch):
    """No renewal gets through (the node does not answer): retried until the safe deadline, then lost while
    the chain still holds the lease live."""
    lease, error = lose(w, LocalEnd.DEADLINE, monkeypatch)
    assert isinstance(error.__cause__, NodeUnreachable)
    assert lease.is_current()


@covers("keep", LocalEnd.ERROR)
def test_keep_error(w, monkeypatch):
    """The renewer fails with an error that is not the chain's (a bug): lost at once, never pretended kept."""
    lease, error = lose(w, LocalEnd.ERROR, monkeypatch)
    assert isinstance(error.__cause__, RuntimeError)


def test_renew_with_a_new_ttl_inside_keep_moves_the_keep_alive(w):
    """The defect: ``lease.renew(ttl=shorter)`` inside keep() left the keep-alive on the old ttl's deadline
    and interval. Now the renewal's ttl is the keep-alive's: deadline, interval, and its next renewals."""
    lease = w.alice.acquire(JOB, ttl=TTL)
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0):
        settle(lease, clock)
        clock.now = 2.0
        lease.renew(ttl=10)  # sent at 2 on this clock: deadline 2 + 10 - 3 = 9, next renewal at 2 + 5
        core = lease.keeper.core
        assert (core.ttl, core.deadline, core.interval, core.due) == (10, 9.0, 5.0, 7.0)
        clock.now = 7.0
        wait_until(lambda: core.renewals == 1, "the keep-alive's own renewal, at the new interval")
        settle(lease, clock)
        assert core.deadline == 14.0
    renewals = [e for e in audit.history(w.registry, JOB) if e.kind is EventKind.RENEWED]
    asked = [e.expires_at - int(w.chain.rpc.block(e.block_number)["timestamp"]) for e in renewals]
    assert asked == [10, 10], "the holder's renewal, then the keep-alive's own at the new ttl"
    assert renewals[-1].expires_at == lease.expires_at


def test_control_a_renewal_the_keep_alive_is_not_told_of_leaves_it_on_the_old_deadline(w):
    """The control: a shorter renewal the keep-alive does not follow (sent past it, as keep() used to
    treat ``lease.renew(ttl=...)``): the chain's expiry comes before the keep-alive's safe deadline."""
    lease = w.alice.acquire(JOB, ttl=TTL)
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0):
        settle(lease, clock)
        start = w.chain.now()
        expires_at = w.alice.renew(JOB, lease.token, 5)  # past the keep-alive
        assert lease.keeper.core.deadline == 27.0, "still the 30 s ttl's deadline"
        assert expires_at - start < 27, "yet the chain's lease ends first"
        lease.keeper.core.stop()


def test_renew_with_a_ttl_the_keep_alive_cannot_keep_is_refused_before_sending(w):
    from chainfence.errors import InvalidInput

    lease = w.alice.acquire(JOB, ttl=TTL)
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0):
        before = len(audit.history(w.registry, JOB))
        with pytest.raises(InvalidInput):
            lease.renew(ttl=3)  # the margins (1 + 2 s) leave no time
        assert len(audit.history(w.registry, JOB)) == before, "nothing sent"
        lease.check()


def test_completing_a_claim_inside_keep_ends_it_quietly(w):
    item = w.alice.workset("prod/batch").claim(["a"], ttl=TTL)
    clock = SteppedClock()
    lost = []
    with item, item.keep(clock=clock, since=0.0, on_lost=lost.append):
        settle(item, clock)
        item.complete(b"result")
        clock.now = DUE
        item.keeper.wake()
        with pytest.raises(Exception) as checked:
            item.check()
        assert checked.value.why == "completed"
    assert lost == [] and item.completed and not item.released
    assert w.registry.workset("prod/batch").last_lease("a").status.name == "DONE"


def test_when_the_successor_cannot_be_read_the_loss_says_superseded(w, monkeypatch):
    """A grant, but the read of the successor's acquisition fails (a provider refusing eth_getLogs):
    the keep-alive still loses the lease at once, and says the one thing the refusal proves."""
    from chainfence._node import events as _events
    from chainfence.errors import RpcError

    def refused(*args, **kwargs):
        raise RpcError("eth_getLogs is not served here", method="eth_getLogs")
        yield  # pragma: no cover

    lease = w.alice.acquire(JOB, ttl=TTL)
    monkeypatch.setattr(_events, "fetch_all_steps", refused)
    lost, checked, at_exit = keep_until_lost(lease, End.GRANTED, w, lease, monkeypatch)
    assert_lost(lost, checked, at_exit, "superseded", resource=JOB, token=lease.token)
