"""Progress markers on renewals, and the watchdog that reads them: stuck, crashed and long holders.

Each promise is attacked: a holder that renews but never advances must be
listed (and one that advances must not), a holder that dies must be listed
once its lease ran out (and one that released or completed must not), bad
markers change nothing on-chain.
"""

from __future__ import annotations

import pytest
from eth_utils import keccak

from chainfence import EventKind, audit
from chainfence.audit import watchdog
from chainfence.errors import InvalidInput, StaleToken

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")


def renewals(registry, resource):
    return [e for e in audit.history(registry, resource) if e.kind is EventKind.RENEWED]


def test_a_renewal_records_its_marker_on_chain(chain, alice):
    """bytes are padded on the right, ints are big-endian counters, strs are hashed; a plain renewal records none."""
    lease = alice.acquire("jobs/etl", ttl=60)
    lease.renew(progress=b"step-1")
    lease.renew(progress=41)
    lease.renew(progress="parsed 10,000 rows")
    lease.renew()
    recorded = [e.progress for e in renewals(alice, "jobs/etl")]
    assert recorded == [
        b"step-1".ljust(32, b"\0"),
        (41).to_bytes(32, "big"),
        keccak(text="parsed 10,000 rows"),
        None,
    ]


@pytest.mark.parametrize(
    "marker",
    [b"", bytes(32), b"x" * 33, 0, -1, 2**256, True, 1.5, ["a"], None.__class__, "\udc80"],
    ids=["empty", "zeros", "33-bytes", "zero", "negative", "too-big", "bool", "float", "list", "type", "surrogate"],
)
def test_a_bad_marker_is_refused_before_anything_is_sent(chain, alice, marker):
    lease = alice.acquire("jobs/etl", ttl=60)
    block, expires_at = chain.block_number(), lease.expires_at
    with pytest.raises(InvalidInput) as refused:
        lease.renew(progress=marker)
    assert isinstance(refused.value, (InvalidInput, ValueError))
    assert chain.block_number() == block and lease.expires_at == expires_at
    assert refused.value.details()["error"] == "InvalidInput" and refused.value.argument == "progress"


def test_a_superseded_holder_cannot_report_progress(chain, alice, bob):
    lease = alice.acquire("jobs/etl", ttl=5)
    chain.advance_time(6)
    bob.acquire("jobs/etl", ttl=60)
    with pytest.raises(StaleToken):
        lease.renew(progress=b"still here")
    assert renewals(alice, "jobs/etl") == []


def test_a_holder_that_renews_with_an_unchanged_marker_is_listed_as_stuck(chain, alice, bob):
    """Alive but stuck: N renewals with the same marker. An advancing holder beside it is not listed,
    and neither is a holder that never reports markers (a heartbeat alone proves nothing either way)."""
    stuck = alice.acquire("jobs/stuck", ttl=60)
    moving = bob.acquire("jobs/moving", ttl=60)
    silent = bob.acquire("jobs/silent", ttl=60)
    for step in range(4):
        stuck.renew(progress=b"row 17")
        moving.renew(progress=step + 1)
        silent.renew()
    report = watchdog.stuck(alice, renewals=3)
    assert [(e.resource, e.token, e.unchanged_renewals, e.progress) for e in report.stuck] == [
        ("jobs/stuck", stuck.token, 3, b"row 17".ljust(32, b"\0"))
    ]
    assert report.crashed == [] and report.long_held == []
    assert watchdog.stuck(alice, renewals=4).stuck == [], "3 unchanged renewals are not 4"
    stuck.renew(progress=b"row 18")  # it moved: no longer stuck
    assert watchdog.stuck(alice, renewals=1).stuck == []


def test_plain_renewals_after_a_marker_count_as_renewals_without_progress(chain, alice):
    lease = alice.acquire("jobs/etl", ttl=60)
    lease.renew(progress=1)
    lease.renew()
    lease.renew()
    assert [e.unchanged_renewals for e in watchdog.stuck(alice, renewals=2).stuck] == [2]


def test_a_holder_that_died_is_listed_as_crashed_once_its_lease_ran_out(chain, alice, bob):
    """Crashed: the latest lease expired without release or completion. A released lease, a completed
    one, and a crashed lease someone has since taken over are not listed."""
    dead = alice.acquire("jobs/dead", ttl=10)
    released = bob.acquire("jobs/released", ttl=10)
    released.release()
    completed = bob.acquire("jobs/completed", ttl=10)
    completed.complete(b"ok")
    taken_over = alice.acquire("jobs/taken-over", ttl=10)
    assert watchdog.stuck(alice).crashed == [], "nothing has expired yet"
    chain.advance_time(11)
    bob.acquire("jobs/taken-over", ttl=60)
    report = watchdog.stuck(alice)
    assert [(e.resource, e.token, e.holder) for e in report.crashed] == [("jobs/dead", dead.token, dead.holder)]
    assert taken_over.token not in {e.token for e in report.crashed}


def test_long_holders_are_listed_only_when_asked_and_past_the_limit(chain, alice, bob):
    old = alice.acquire("jobs/old", ttl=3_000)
    chain.advance_time(1_000)
    bob.acquire("jobs/new", ttl=3_000)
    old.renew(ttl=3_000)
    assert watchdog.stuck(alice).long_held == []
    report = watchdog.stuck(alice, longer_than=900)
    assert [(e.resource, e.token) for e in report.long_held] == [("jobs/old", old.token)]
    assert report.long_held[0].held_for >= 1_000
    assert report.to_dict()["long_held"][0]["resource"] == "jobs/old"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"renewals": 0},
        {"renewals": True},
        {"renewals": "3"},
        {"longer_than": 0},
        {"longer_than": 1.5},
        {"from_block": -1},
        {"from_block": "latest"},
    ],
)
def test_bad_watchdog_arguments_are_typed_errors(registry, kwargs):
    with pytest.raises(InvalidInput):
        watchdog.stuck(registry, **kwargs)
