"""The metrics move as lease events happen, on both backends: each step is an event (a renewal the
keep-alive confirmed, a check, a sync), then a scrape in the text format, read with prometheus_client's
own parser; no step waits on the wall clock.

The metrics are enabled for this process once (``chainfence.metrics.enable``); each test reads how much
a value moved across its own events.
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence import AuditIndex, Guard
from chainfence._core import metrics as _metrics
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import LeaseHeld, LeaseLost, StaleToken
from chainfence.guard import Follow
from tests.support.scrape import scrape_in_process, value
from tests.support.sequencer import wait_until
from tests.support.virtual_time import SteppedClock


@pytest.fixture(autouse=True, scope="module")
def counting():
    """Metrics on before any test's first event (a scrape enables them too, but only when it runs)."""
    import chainfence.metrics

    chainfence.metrics.enable()


def moved(before, after, name, **labels) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def settle(lease, clock) -> None:
    keeper = lease.keeper
    wait_until(lambda: keeper.evaluated_at == clock.now and keeper.core.in_flight is None, f"renewer at {clock.now}")


def test_keep_alive_renewals_their_margin_and_the_release(alice):
    lease = alice.acquire("metrics/keep", ttl=30)
    clock = SteppedClock()
    before = scrape_in_process()
    with lease.keep(clock=clock, since=0.0):
        settle(lease, clock)
        alice.chain.advance_time(15)
        clock.now = 16.0  # a second after the renewal was due: 27 - 16 = 11 s before the safe deadline
        wait_until(lambda: lease.keeper.core.renewals == 1, "the first renewal")
        settle(lease, clock)
        first = scrape_in_process()
        assert moved(before, first, "chainfence_keepalive_renewals_total", outcome="confirmed") == 1
        assert moved(before, first, "chainfence_keepalive_renewal_margin_seconds_count") == 1
        assert moved(before, first, "chainfence_keepalive_renewal_margin_seconds_sum") == pytest.approx(11.0)
        # 11 s falls in the 15 s bucket and not in the 10 s one.
        assert moved(before, first, "chainfence_keepalive_renewal_margin_seconds_bucket", le="15.0") == 1
        assert moved(before, first, "chainfence_keepalive_renewal_margin_seconds_bucket", le="10.0") == 0
        assert moved(before, first, "chainfence_leases_ended_total", reason="released") == 0
        lease.release()
    after = scrape_in_process()
    assert moved(first, after, "chainfence_leases_ended_total", reason="released") == 1
    assert moved(first, after, "chainfence_keepalive_renewals_total", outcome="confirmed") == 0


def test_a_lease_lost_under_keep_is_counted_once_by_its_reason(alice, bob):
    lease = alice.acquire("metrics/lost", ttl=30)
    clock = SteppedClock()
    before = scrape_in_process()
    with pytest.raises(LeaseLost) as lost:
        with lease.keep(clock=clock, since=0.0):
            settle(lease, clock)
            alice.chain.advance_time(31)
            bob.acquire("metrics/lost", ttl=30)
            clock.now = 15.0
            wait_until(lambda: lease.keeper.core.lost, "the loss")
    after = scrape_in_process()
    assert lost.value.why == "expired"
    assert moved(before, after, "chainfence_leases_ended_total", reason="expired") == 1
    assert moved(before, after, "chainfence_keepalive_renewals_total", outcome="refused") == 1
    assert moved(before, after, "chainfence_keepalive_renewals_total", outcome="confirmed") == 0


def test_waiting_is_timed_by_outcome(alice, bob):
    before = scrape_in_process()
    acquired = alice.acquire("metrics/wait", ttl=30, wait=5)  # free: acquired at once, through the waiter
    middle = scrape_in_process()
    assert moved(before, middle, "chainfence_acquire_wait_seconds_count", outcome="acquired") == 1
    with pytest.raises(LeaseHeld):
        bob.acquire("metrics/wait", ttl=30, wait=0.05)
    after = scrape_in_process()
    assert moved(middle, after, "chainfence_acquire_wait_seconds_count", outcome="timed_out") == 1
    assert moved(middle, after, "chainfence_acquire_wait_seconds_sum", outcome="timed_out") >= 0.05
    acquired.release()


def test_rpc_requests_and_errors_by_method_and_kind(alice, bob):
    before = scrape_in_process()
    alice.chain.block_number()
    lease = alice.acquire("metrics/rpc", ttl=30)
    with pytest.raises(LeaseHeld):
        bob.acquire("metrics/rpc", ttl=30)  # refused at its preflight: the node's answer is the contract's error
    after = scrape_in_process()
    assert moved(before, after, "chainfence_rpc_requests_total", method="eth_blockNumber") >= 1
    assert moved(before, after, "chainfence_rpc_request_duration_seconds_count", method="eth_blockNumber") >= 1
    # The preflight's method is the node's (eth_estimateGas; eth_call on a dev chain that mines per transaction).
    refused = {
        dict(key[1])["method"]: count - before.get(key, 0.0)
        for key, count in after.items()
        if key[0] == "chainfence_rpc_errors_total" and dict(key[1])["kind"] == "LeaseHeld"
    }
    assert sum(refused.values()) == 1 and set(refused) <= {"eth_call", "eth_estimateGas"}, refused
    assert moved(before, after, "chainfence_rpc_errors_total", method="eth_blockNumber", kind="NodeUnreachable") == 0
    lease.release()


def test_guard_verdicts_by_reason(alice, bob, tmp_path):
    first = alice.acquire("metrics/guard", ttl=30)
    with Guard(alice, path=tmp_path / "guard.sqlite", exclusive=True) as guard:
        before = scrape_in_process()
        guard.check("metrics/guard", first.token)
        one = scrape_in_process()
        assert moved(before, one, "chainfence_guard_checks_total", verdict="accepted", reason="new_mark") == 1
        guard.check("metrics/guard", first.token)
        two = scrape_in_process()
        assert moved(one, two, "chainfence_guard_checks_total", verdict="accepted", reason="at_mark") == 1
        first.release()
        second = bob.acquire("metrics/guard", ttl=30)
        guard.check("metrics/guard", second.token)
        with pytest.raises(StaleToken):
            guard.check("metrics/guard", first.token)
        three = scrape_in_process()
        assert moved(two, three, "chainfence_guard_checks_total", verdict="accepted", reason="new_mark") == 1
        assert moved(two, three, "chainfence_guard_checks_total", verdict="rejected", reason="StaleToken") == 1
        second.release()


def test_many_resources_make_no_more_series_than_one(alice, tmp_path):
    """Resource names are never labels: acquiring, checking and releasing 24 resources adds the series one
    does, and not one more."""
    with Guard(alice, path=tmp_path / "guard.sqlite", exclusive=True) as guard:
        lease = alice.acquire("metrics/many/0", ttl=30)
        guard.check(lease.resource, lease.token)
        guard.check(lease.resource, lease.token)
        lease.release()
        one = scrape_in_process()
        for number in range(1, 24):
            lease = alice.acquire(f"metrics/many/{number}", ttl=30)
            guard.check(lease.resource, lease.token)
            guard.check(lease.resource, lease.token)
            lease.release()
        many = scrape_in_process()
    grown = {key for key in many if key[0].startswith("chainfence_")} - {
        key for key in one if key[0].startswith("chainfence_")
    }
    # A series may appear for a JSON-RPC method first asked meanwhile (a fee quote refreshed): a method of the
    # closed set, never a resource's name, and nothing else grows.
    assert all(key[0].startswith("chainfence_rpc_") for key in grown), sorted(grown)
    assert all(dict(key[1])["method"] in _metrics.RPC_METHODS | {"batch"} for key in grown), sorted(grown)
    assert not [key for key in many if any("metrics/many" in v for _label, v in key[1])]
    assert moved(one, many, "chainfence_leases_ended_total", reason="released") == 23
    assert moved(one, many, "chainfence_guard_checks_total", verdict="accepted", reason="at_mark") == 23


def test_group_commit_batch_sizes_and_outcomes(alice, bob):
    held = bob.acquire("metrics/batch/held", ttl=30)
    batcher = alice.batched()
    before = scrape_in_process()
    lease = batcher.acquire("metrics/batch/a", ttl=30)
    with pytest.raises(LeaseHeld):
        batcher.acquire("metrics/batch/held", ttl=30)
    lease.release()  # through the batcher too
    after = scrape_in_process()
    assert moved(before, after, "chainfence_batches_total", outcome="mined") == 3
    assert moved(before, after, "chainfence_batch_size_operations_count") == 3
    assert moved(before, after, "chainfence_batch_operations_total", kind="acquire", outcome="ok") == 1
    assert moved(before, after, "chainfence_batch_operations_total", kind="acquire", outcome="refused") == 1
    assert moved(before, after, "chainfence_batch_operations_total", kind="release", outcome="ok") == 1
    held.release()


def test_the_follower_syncs_and_its_lag(alice, tmp_path):
    with Guard(alice, path=tmp_path / "guard.sqlite", mode=Follow(interval=3600)) as guard:
        lease = alice.acquire("metrics/follow", ttl=30)
        before = scrape_in_process()
        reached = guard.sync()
        after = scrape_in_process()
        assert moved(before, after, "chainfence_guard_follower_syncs_total", outcome="ok") == 1
        assert value(after, "chainfence_guard_follower_lag_blocks") == 0
        assert reached >= lease.block_number
        assert value(after, "chainfence_guard_follower_last_sync_timestamp_seconds") > 0
        lease.release()


def test_audit_sync_progress(alice, tmp_path):
    lease = alice.acquire("metrics/audit", ttl=30)
    lease.release()
    index = AuditIndex(tmp_path / "audit.sqlite")
    before = scrape_in_process()
    result = index.sync(alice)
    after = scrape_in_process()
    assert moved(before, after, "chainfence_audit_syncs_total", outcome="ok") == 1
    assert value(after, "chainfence_audit_synced_block") == result.to_block
    assert value(after, "chainfence_audit_behind_blocks") == 0
    assert moved(before, after, "chainfence_audit_events_indexed_total") == result.events > 0
    index.close()


def test_the_asyncio_face_counts_the_same_events(chain, registry, tmp_path):
    """chainfence.aio runs the same steps over AsyncRpc: its requests, waits and releases are counted too."""

    async def body():
        async with AsyncChain.over(chain) as achain:
            alice = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[1])
            lease = await alice.acquire("metrics/aio", ttl=30, wait=5)
            await lease.release()

    before = scrape_in_process()
    asyncio.run(asyncio.wait_for(body(), 120))
    after = scrape_in_process()
    assert moved(before, after, "chainfence_acquire_wait_seconds_count", outcome="acquired") == 1
    assert moved(before, after, "chainfence_leases_ended_total", reason="released") == 1
    sent = sum(
        moved(before, after, "chainfence_rpc_requests_total", method=method)
        for method in ("eth_sendRawTransaction", "eth_sendRawTransactionSync")
    )
    assert sent == 2  # the acquisition and the release, through AsyncRpc
