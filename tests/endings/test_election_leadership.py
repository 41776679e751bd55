"""Leadership: every way a term ends is a loss at the next renewal (by the model's name), on both backends;
the keep-alive's own ways (deadline, error) too.

alice's keep-alive runs on a SteppedClock that stands still: it renews only when the test moves the clock
to the renewal interval (15 s of a 30 s term) and wakes it. The chain acts first (a revoke, a grant, ...),
then the renewal meets it: the loss is reported then (``why``), ``on_lost`` runs once, ``check()`` raises.
"""

from __future__ import annotations

import pytest

from chainfence import AcquireReason
from chainfence import keepalive as keepalive_module
from chainfence.endings import End, LocalEnd
from chainfence.errors import LeaseLost, LeaseRevoked
from tests.endings.election_scenarios import NAME, election, namespaced
from tests.endings.matrix import covers
from tests.support.sequencer import wait_until
from tests.support.virtual_time import SteppedClock

INTERVAL = 15.0


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: namespace ``billing`` assigned to account 0 at deployment (revokes, grants, policies)."""
    return namespaced(chain)


class Term:
    """alice's term, its stepped clock and what on_lost received."""

    def __init__(self, alice):
        self.clock = SteppedClock()
        self.lost: list[LeaseLost] = []
        self.leadership = election(alice, clock=self.clock).campaign(on_lost=self.lost.append)

    def renew(self) -> None:
        """Move the keep-alive's clock to its next renewal and wake it."""
        self.clock.now += INTERVAL
        self.leadership.lease.keeper.wake()

    def loss(self) -> LeaseLost:
        wait_until(lambda: self.lost, "on_lost")
        with pytest.raises(LeaseLost) as raised:
            self.leadership.check()
        assert len(self.lost) == 1 and raised.value.why == self.lost[0].why
        return raised.value

    def close(self) -> None:
        self.leadership._stop_keeping()


@pytest.fixture
def term(alice):
    held = Term(alice)
    yield held
    held.close()


@pytest.fixture
def namespace(registry):
    """Namespace ``billing`` as its admin sees it: the deployer's view (account 0)."""
    return registry.namespace("billing")


@covers("election.leadership", End.EXPIRED)
def test_a_term_that_expired_while_its_process_was_paused_is_lost_at_the_next_renewal(chain, term):
    chain.advance_time(term.leadership.expires_at - chain.now())  # the term ran out: the clock stood still
    term.renew()
    assert term.loss().why == "expired"


@covers("election.leadership", End.RELEASED)
def test_a_term_released_by_another_process_of_the_same_account_is_lost_at_the_next_renewal(alice, term):
    alice.release(NAME, term.leadership.token)
    term.renew()
    assert term.loss().why == "released"


@covers("election.leadership", End.COMPLETED)
def test_a_result_completed_under_the_terms_token_ends_nothing_the_term_is_kept(alice, term):
    leadership = term.leadership
    leadership.lease.complete(b"quarterly report")
    before = leadership.lease._sent_at  # when the last confirmed renewal was sent (the expiry may not move:
    term.renew()  # anvil's clock here moves only when a test moves it)
    wait_until(lambda: leadership.lease._sent_at != before or term.lost, "the renewal confirmed")
    assert term.lost == [] and leadership.is_current()
    leadership.check()


@covers("election.leadership", End.SUPERSEDED)
def test_a_term_fenced_off_by_a_new_campaign_of_the_same_account_is_lost_at_the_next_renewal(alice, term):
    again = election(alice).campaign()
    try:
        assert again.token > term.leadership.token
        term.renew()
        assert term.loss().why == "superseded"
    finally:
        again._stop_keeping()


@covers("election.leadership", End.REVOKED)
def test_a_revoked_leader_loses_its_term_at_the_next_renewal_not_at_its_deadline(namespace, term):
    """alice believes she leads only until her next renewal (15 s), which the revoke refuses: she stops
    then, not at her safe deadline (27 s)."""
    namespace.revoke(NAME)
    term.renew()
    lost = term.loss()
    assert lost.why == "revoked" and isinstance(lost.__cause__, LeaseRevoked)
    assert term.clock.now == INTERVAL, "lost at the first renewal after the revoke"


@covers("election.leadership", End.REVOKED)
def test_a_revoked_leader_whose_successor_was_elected_first_is_told_it_was_revoked(namespace, bob, term):
    """The revoke frees the seat at once: bob is elected in the next block, before alice's renewal, which then
    meets bob's higher token. The loss is still named for what ended alice's term: the revoke."""
    namespace.revoke(NAME)
    successor = election(bob).campaign(wait=0)
    try:
        assert successor.lease.reason is AcquireReason.REVOKED
        term.renew()
        assert term.loss().why == "revoked"
    finally:
        successor._stop_keeping()


def test_control_a_keep_alive_that_retries_a_revoke_keeps_a_deposed_leader_leading(namespace, bob, term, monkeypatch):
    """The naive renewer (a revoke taken for a transient error, retried until the deadline): after the renewal
    the revoke refused, alice still passes check(), and goes on doing so once bob is elected: two leaders."""
    naive = keepalive_module.loss_reason
    monkeypatch.setattr(
        keepalive_module, "loss_reason", lambda error: None if isinstance(error, LeaseRevoked) else naive(error)
    )
    namespace.revoke(NAME)
    keeper = term.leadership.lease.keeper
    term.renew()
    wait_until(lambda: keeper._cause is not None, "the refused renewal")
    assert isinstance(keeper._cause, LeaseRevoked) and term.lost == []
    successor = election(bob).campaign(wait=0)
    try:
        term.leadership.check()  # two leaders: alice still believes she leads
        assert successor.is_current()
    finally:
        successor._stop_keeping()


@covers("election.leadership", End.GRANTED)
def test_a_leader_whose_seat_was_granted_to_another_loses_it_at_the_next_renewal(namespace, bob, term):
    granted = namespace.grant(NAME, bob.sender, 30)
    assert granted.reason is AcquireReason.GRANTED
    term.renew()
    assert term.loss().why == "granted"


@covers("election.leadership", End.ROLLED_BACK)
def test_a_term_the_chain_lost_is_lost_at_the_next_renewal(chain, alice):
    snapshot = chain.snapshot()
    term = Term(alice)
    try:
        chain.revert(snapshot)  # the block that elected alice is gone
        term.renew()
        assert term.loss().why == "rolled_back"
    finally:
        term.close()


@covers("election.leadership", LocalEnd.DEADLINE)
def test_a_leader_whose_renewals_are_never_confirmed_steps_down_at_its_safe_deadline(term):
    term.clock.now = 28.0  # past the safe deadline (27 s): no renewal was confirmed
    term.leadership.lease.keeper.wake()
    assert term.loss().why == "deadline"
    assert term.leadership.is_current(), "given up before the term can have ended on-chain"


@covers("election.leadership", LocalEnd.ERROR)
def test_a_renewer_that_fails_with_a_bug_gives_the_term_up_at_once(term, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the renewal path")

    monkeypatch.setattr(term.leadership.lease.registry, "_renew_by_id_steps", broken)
    term.renew()
    lost = term.loss()
    assert lost.why == "error" and isinstance(lost.__cause__, RuntimeError)
