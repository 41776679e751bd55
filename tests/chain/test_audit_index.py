"""The audit index tells a scripted lease history exactly, on both backends, and agrees with the chain.

The scenario: alice acquires ``reports/daily`` and renews it twice with progress markers, then releases
it; bob takes it and lets it expire; alice takes it over (expired) and completes; bob then takes
``reports/weekly``, and carol re-acquires nothing. Every query kind is checked against what the script did.
"""

from __future__ import annotations

import pytest

from chainfence import AcquireReason, audit
from chainfence.audit import watchdog
from chainfence.audit.index import AuditIndex
from chainfence.errors import AuditIndexMismatch, InvalidInput, InvalidResourceName

# On hardhat's node and ganache too (tests/conftest.py); a test marked for hardhat alone needs what
# ganache lacks (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")

DAILY = "reports/daily"
WEEKLY = "reports/weekly"


def play(chain, alice, bob):
    """The script; returns the leases, in order."""
    first = alice.acquire(DAILY, ttl=60)
    alice.renew(DAILY, first.token, ttl=60, progress=1)
    alice.renew(DAILY, first.token, ttl=60, progress=2)
    alice.release(DAILY, first.token)
    second = bob.acquire(DAILY, ttl=30)
    chain.advance_time(31)
    third = alice.acquire(DAILY, ttl=600)
    alice.complete(DAILY, third.token, b"rows: 42")
    weekly = bob.acquire(WEEKLY, ttl=600)
    again = bob.acquire(WEEKLY, ttl=600)  # bob fences off its own earlier self
    return first, second, third, weekly, again


def test_a_scripted_history_reads_back_exactly(chain, registry, alice, bob, tmp_path):
    first, second, third, weekly, again = play(chain, alice, bob)
    index = AuditIndex(tmp_path / "audit.sqlite")
    result = index.sync(registry, max_blocks=2)
    assert result.pages > 1 and result.rewound_to is None

    daily = index.history(DAILY)
    assert [lease.token for lease in daily] == [first.token, second.token, third.token]
    a, b, c = daily
    assert (a.holder, a.reason, a.renewals, a.markers, a.ended) == (
        alice.sender,
        AcquireReason.UNHELD,
        2,
        2,
        "released",
    )
    assert a.last_marker == (2).to_bytes(32, "big")
    assert (b.holder, b.reason, b.ended, b.ended_at) == (
        bob.sender,
        AcquireReason.RELEASED,
        "expired",
        second.expires_at,
    )
    assert (c.holder, c.reason, c.status, c.completions) == (alice.sender, AcquireReason.EXPIRED, "live", 1)
    assert c.resource == c.resource_display == DAILY
    w1, w2 = index.history(WEEKLY)
    assert (w1.ended, w1.successor, w2.reason) == ("superseded", again.token, AcquireReason.REACQUIRED)

    assert index.lease(second.token) == b
    assert index.lease(10**9) is None
    assert [lease.token for lease in index.leases_of(alice.sender)] == [first.token, third.token]
    assert index.holder_at(DAILY, time=second.expires_at - 1) == b
    assert index.holder_at(DAILY, time=second.expires_at) is None, "expired at its expiry"
    assert index.holder_at(DAILY, block=first.block_number) == a
    assert index.holder_at(DAILY, block=second.block_number - 1) is None, "released before bob came"
    assert {lease.token for lease in index.current()} == {third.token, again.token}
    assert {lease.token for lease in index.current(prefix="reports/w")} == {again.token}
    takeovers = index.takeovers()
    assert [(t.token, t.previous_holder, t.holder, t.reason) for t in takeovers] == [
        (second.token, alice.sender, bob.sender, AcquireReason.RELEASED),
        (third.token, bob.sender, alice.sender, AcquireReason.EXPIRED),
    ], "a holder re-acquiring its own resource is not a takeover"
    assert index.takeovers(from_block=third.block_number) == takeovers[1:]
    assert index.takeovers(until=second.expires_at) == takeovers[:1]
    (completion,) = index.completions()
    assert (completion.token, completion.holder) == (third.token, alice.sender) and len(completion.digest) == 32
    assert [r.resource for r in index.resources("reports/")] == [DAILY, WEEKLY]
    assert [r.resource for r in index.resources("reports/w")] == [WEEKLY]
    assert index.resources("nothing") == []
    assert index.verify(registry) == len(audit.history(registry))


def test_the_index_the_live_read_and_the_sdk_views_agree(chain, registry, alice, bob, tmp_path):
    play(chain, alice, bob)
    index = AuditIndex(tmp_path / "audit.sqlite")
    live = AuditIndex(":memory:")
    live.sync(registry)
    assert audit.history(registry, index=index) == audit.history(registry), "history(index=) answers as the chain does"
    assert index.history(DAILY) == live.history(DAILY)
    assert watchdog.stuck(registry, index=index, longer_than=1) == watchdog.stuck(registry, longer_than=1)


def test_sync_is_incremental(chain, registry, alice, tmp_path):
    index = AuditIndex(tmp_path / "audit.sqlite")
    done = index.sync(registry)
    lease = alice.acquire(DAILY, ttl=60)
    again = index.sync(registry)
    assert again.from_block == done.to_block + 1 and again.to_block == lease.block_number
    assert again.events == 2, "ResourceNamed and LeaseAcquired: only the new blocks were read"
    assert index.status().synced_block == chain.block_number()
    assert index.sync(registry).events == 0


def test_bad_input_is_refused_and_changes_nothing(registry, alice, tmp_path):
    index = AuditIndex(tmp_path / "audit.sqlite")
    alice.acquire(DAILY, ttl=60)
    index.sync(registry)
    before = index.status()
    for call in (
        lambda: index.history(""),
        lambda: index.lease(0),
        lambda: index.leases_of("0x12"),
        lambda: index.holder_at(DAILY),
        lambda: index.holder_at(DAILY, time=1, block=1),
        lambda: index.holder_at(DAILY, time=-1),
        lambda: index.takeovers(from_block=-1),
        lambda: index.completions(since="now"),
        lambda: index.resources(b"x"),
        lambda: index.sync(registry, max_blocks=0),
        lambda: index.sync("registry"),
        lambda: AuditIndex(""),
        lambda: AuditIndex(tmp_path / "no" / "such.sqlite"),
    ):
        with pytest.raises(InvalidInput):
            call()
    with pytest.raises(InvalidResourceName):
        index.history("x" * 200)
    assert index.status() == before


@pytest.mark.nodes("hardhat")
def test_an_index_of_another_registry_is_refused(chain, registry, tmp_path):
    from chainfence import Registry

    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(registry)
    other = Registry.deploy(chain, max_ttl=60)
    with pytest.raises(AuditIndexMismatch):
        index.sync(other)
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(AuditIndexMismatch):
        AuditIndex(tmp_path / "junk.sqlite")


def test_the_timeline_input_carries_each_lease_as_the_index_tells_it(chain, registry, alice, bob, tmp_path):
    first, second, third, weekly, again = play(chain, alice, bob)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(registry)
    drawn = index.timeline_leases([DAILY, WEEKLY])
    assert [(lease.token, lease.end_reason, lease.reason) for lease in drawn] == [
        (first.token, "released", "unheld"),
        (second.token, "expired", "released"),
        (third.token, "live", "expired"),
        (weekly.token, "superseded", "unheld"),
        (again.token, "live", "reacquired"),
    ]
    assert [progress[-1] for _at, progress in drawn[0].renewals] == [1, 2]
    assert drawn[1].end == second.expires_at and drawn[2].completion_digest is not None
    assert drawn[0].resource == DAILY.encode(), "the name's bytes as logged: the picture escapes them"
    with pytest.raises(InvalidInput):
        index.timeline_leases([])


def test_the_timeline_input_carries_each_completion_at_its_own_time(chain, registry, alice, tmp_path):
    """A plain lease completes, then is released later: the completion is drawn when it happened, not at
    the release (issue #20: it was drawn at the lease's end)."""
    held = alice.acquire(DAILY, ttl=3_600)
    chain.advance_time(500)
    alice.complete(DAILY, held.token, b"rows: 42")
    chain.advance_time(500)
    alice.release(DAILY, held.token)
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(registry)
    [completion] = index.completions(resource=DAILY)
    [drawn] = index.timeline_leases([DAILY])
    assert drawn.end_reason == "released" and drawn.end >= completion.at + 500
    assert drawn.completions == ((completion.at, completion.digest),)


def test_revokes_and_grants_read_back_with_the_admin_who_did_them(chain, registry, alice, bob, carol, tmp_path):
    """An operator's acts are in the index as the chain recorded them: who revoked, who granted, and the
    lease each one ended or issued (issue 11's events, end to end through sync)."""
    name = f"{carol.namespace().prefix}/db"  # carol's address namespace: hers by construction
    stuck = alice.acquire(name, ttl=600)
    carol.namespace().revoke(name)
    taken = bob.acquire(name, ttl=600)
    granted = carol.namespace().grant(name, alice.sender, 60)  # takes over bob's live lease through the fenced path
    index = AuditIndex(tmp_path / "audit.sqlite")
    index.sync(registry)
    leases = {lease.token: lease for lease in index.history(name)}
    assert list(leases) == [stuck.token, taken.token, granted.token]
    assert (leases[stuck.token].ended, leases[stuck.token].ended_by) == ("revoked", carol.sender)
    assert leases[taken.token].reason is AcquireReason.REVOKED
    # the grant revoked bob's live lease and issued alice's in one transaction: one end, "granted"
    assert (leases[taken.token].ended, leases[taken.token].ended_by) == ("granted", carol.sender)
    assert leases[granted.token].reason is AcquireReason.GRANTED and leases[granted.token].granted_by == carol.sender
    assert leases[granted.token].holder == alice.sender and leases[granted.token].status == "live"
    assert [t.token for t in index.takeovers(resource=name)] == [taken.token, granted.token]
