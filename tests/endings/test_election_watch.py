"""Election.watch(): the callback form of observe() reports every way a term ends, in chain order, by name,
on both backends.

The watch's thread polls on the real clock; the test acts once the callback has reported alice's term
(``wait_until``: an event in a thread the test does not drive; its timeout is a safety net), then waits
for as many callbacks as the scenario's changes, and stops the watch: no callback runs after ``stop()``.
"""

from __future__ import annotations

import pytest

from chainfence import Election
from chainfence.endings import End
from tests.endings.election_scenarios import NAME, SCENARIOS, described, namespaced, stage
from tests.endings.matrix import covers
from tests.support.sequencer import wait_until


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: namespace ``billing`` assigned to account 0 at deployment (revokes, grants, policies)."""
    return namespaced(chain)


def watch_the_end(chain, registry, alice, bob, end: End, *, ends: bool) -> tuple[list, list]:
    scene = stage(chain, registry, alice, bob)
    seen: list = []
    watcher = Election(registry.connect(registry.chain.accounts[4]), NAME, ttl=30)
    try:
        with watcher.watch(lambda change: seen.append(described(change)), ends=ends) as watch:
            wait_until(lambda: seen == [(alice.sender, scene.leadership.token)], "alice's term reported")
            expected = SCENARIOS[end](scene)
            if not ends:
                expected = [c for c in expected if not (isinstance(c, tuple) and c[0] == "ended")]
            wait_until(lambda: len(seen) >= 1 + len(expected), f"the {end.value} end reported")
        assert not watch.running
        return seen[1:], expected
    finally:
        scene.leadership._stop_keeping()


@covers("election.watch", *End)
@pytest.mark.parametrize("end", list(End), ids=[end.value for end in End])
def test_watch_calls_back_with_how_the_term_ended(chain, registry, alice, bob, end):
    seen, expected = watch_the_end(chain, registry, alice, bob, end, ends=True)
    assert seen == expected


@covers("election.watch", End.REVOKED, End.GRANTED, End.EXPIRED)
@pytest.mark.parametrize("end", [End.REVOKED, End.GRANTED, End.EXPIRED], ids=["revoked", "granted", "expired"])
def test_watch_without_ends_calls_back_with_the_seat_changes_only(chain, registry, alice, bob, end):
    seen, expected = watch_the_end(chain, registry, alice, bob, end, ends=False)
    assert seen == expected


def test_watch_rejects_a_non_bool_ends(registry):
    from chainfence.errors import InvalidInput

    with pytest.raises(InvalidInput):
        Election(registry, NAME, ttl=30).watch(lambda change: None, ends="yes")
    with pytest.raises(InvalidInput):
        Election(registry, NAME, ttl=30).observe(ends=1)
