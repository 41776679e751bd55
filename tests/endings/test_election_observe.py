"""Election.observe(): every way a term ends is reported, in chain order, by the model's name, on both backends.

An expiry, a resignation (release) and a revoke empty the seat (None); a reacquisition by the holder
(superseded) and a grant pass it straight to the next term; a completion of the term's lease ends
nothing; a rolled-back term is reported ended and the state read again. With ``ends=True`` each end comes
as a TermEnded just before the change it makes; without, only the changes (as before).

The observer runs on a WaitClock (its time moves only by what it sleeps; ``timeout=5`` is five virtual
seconds of polls), so the test acts first and the observer then reads what the chain shows.
"""

from __future__ import annotations

import pytest

from chainfence import Election
from chainfence.endings import End
from chainfence.recipes import _election_observer as election_module  # the observer behind Election.observe
from tests.endings.election_scenarios import NAME, NAMESPACE, SCENARIOS, described, namespaced, stage
from tests.endings.matrix import covers
from tests.support.virtual_time import WaitClock


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: namespace ``billing`` assigned to account 0 at deployment (revokes, grants, policies)."""
    return namespaced(chain)


def observer(registry) -> Election:
    """An election read through its own registry object (account 4), whose waits run on a WaitClock."""
    reader = registry.connect(registry.chain.accounts[4])
    WaitClock().install(reader)
    return Election(reader, NAME, ttl=30)


def observe_the_end(chain, registry, alice, bob, end: End, *, ends: bool = True) -> tuple[list, list]:
    scene = stage(chain, registry, alice, bob)
    try:
        changes = observer(registry).observe(timeout=5, ends=ends)
        assert described(next(changes)) == (alice.sender, scene.leadership.token)
        expected = SCENARIOS[end](scene)
        return [described(change) for change in changes], expected
    finally:
        scene.leadership._stop_keeping()


@covers("election.observe", *End)
@pytest.mark.parametrize("end", list(End), ids=[end.value for end in End])
def test_observe_reports_how_the_term_ended(chain, registry, alice, bob, end):
    seen, expected = observe_the_end(chain, registry, alice, bob, end)
    assert seen == expected


@covers("election.observe", End.REVOKED, End.GRANTED)
@pytest.mark.parametrize("end", [End.REVOKED, End.GRANTED], ids=["revoked", "granted"])
def test_without_ends_observe_still_reports_the_seat_changes_of_a_revoke_and_a_grant(chain, registry, alice, bob, end):
    """The plain stream (ends=False): a revoke empties the seat at its block (it used to report nothing: the
    revoked leader stayed "the leader" until its expiry); a grant passes the seat to the grantee, no None."""
    seen, expected = observe_the_end(chain, registry, alice, bob, end, ends=False)
    assert seen == [change for change in expected if not (isinstance(change, tuple) and change[0] == "ended")]


def test_control_an_observer_that_does_not_follow_revokes_reports_the_revoked_leader_as_leading(
    chain, registry, alice, bob, monkeypatch
):
    """The naive observer (acquisitions, releases and renewals only, as observe() was) misses the revoke:
    nothing changes, alice still "leads" although her term was ended."""
    monkeypatch.setattr(
        election_module,
        "_KINDS",
        (
            election_module._events.Kind.ACQUIRED,
            election_module._events.Kind.RELEASED,
            election_module._events.Kind.RENEWED,
        ),
    )
    seen, _expected = observe_the_end(chain, registry, alice, bob, End.REVOKED)
    assert seen == []


def test_control_reading_a_grant_as_a_revoke_then_an_acquisition_reports_an_empty_seat_that_never_was(
    chain, registry, alice, bob, monkeypatch
):
    """Without telling the grant's two events apart from a revoke followed by an acquisition, an observer
    reports a revoke and an empty seat: the model says the seat went straight from alice to bob."""
    monkeypatch.setattr(election_module.Observer, "_granted_over", staticmethod(lambda event, following: False))
    seen, expected = observe_the_end(chain, registry, alice, bob, End.GRANTED)
    assert seen == [("ended", End.REVOKED, expected[0][2]), None, expected[1]]


@covers("election.observe", End.REVOKED)
def test_a_revoke_then_a_later_acquisition_is_a_revoke_then_the_successor(chain, registry, alice, bob):
    scene = stage(chain, registry, alice, bob)
    try:
        changes = observer(registry).observe(timeout=5, ends=True)
        next(changes)
        registry.namespace(NAMESPACE).revoke(NAME)
        successor = bob.acquire(NAME, ttl=30)
        assert [described(change) for change in changes] == [
            ("ended", End.REVOKED, scene.leadership.token),
            None,
            (bob.sender, successor.token),
        ]
    finally:
        scene.leadership._stop_keeping()
