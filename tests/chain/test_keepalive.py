"""lease.keep() on a real registry (eth-tester and anvil), its clock injected: renewals, losses, and the exit.

The keep-alive's clock is a SteppedClock the test moves by hand, and the
renewer is observed through its counters (``keeper.core.renewals``,
``keeper.evaluated_at``), never through a wall-clock wait: each step is
"move the clock, wait until the renewer has acted on it".
"""

from __future__ import annotations

import logging

import pytest

from chainfence import EventKind, audit
from chainfence.errors import InvalidInput, LeaseLost, NodeUnreachable
from tests.support.sequencer import wait_until
from tests.support.virtual_time import SteppedClock

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

RESOURCE = "keep/job"


def settle(lease, clock) -> None:
    """Wait until the renewer has decided at the clock's current reading with no renewal in flight."""
    keeper = lease.keeper
    wait_until(
        lambda: keeper.evaluated_at == clock.now and keeper.core.in_flight is None,
        f"the renewer acted at t={clock.now}",
    )


def renewals(registry, resource=RESOURCE):
    return [e for e in audit.history(registry, resource) if e.kind is EventKind.RENEWED]


def test_keep_renews_at_half_the_ttl_and_counts_the_deadline_from_the_send(alice):
    chain = alice.chain
    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0) as kept:
        assert kept is lease
        settle(lease, clock)
        assert lease.safe_remaining() == 27.0 and renewals(alice) == []
        chain.advance_time(15)
        clock.now = 15.0
        wait_until(lambda: lease.keeper.core.renewals == 1, "the first renewal")
        settle(lease, clock)
        assert lease.safe_remaining() == 27.0  # 15 + 30 - 3 - 15
        lease.check()
        chain.advance_time(15)
        clock.now = 30.0
        wait_until(lambda: lease.keeper.core.renewals == 2, "the second renewal")
        settle(lease, clock)
    events = renewals(alice)
    assert [e.token for e in events] == [lease.token, lease.token]
    assert lease.expires_at == events[-1].expires_at > lease.expires_at - 1
    assert lease.is_current()
    lease.check()  # outside keep(): the last confirmed send, default margins, the real clock


def test_after_exit_the_renewer_never_renews_again(alice):
    """Redisson #7272: a watchdog that renews after unlock. Once keep() has exited, however far the
    clock moves, no renewal is sent and the renewer thread is gone."""
    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0):
        settle(lease, clock)
        keeper = lease.keeper
    assert lease.keeper is None and not keeper._thread.is_alive()
    for now in (15.0, 30.0, 1_000.0):
        clock.now = now
        keeper.wake()
    assert keeper.core.renewals == 0 and renewals(alice) == []
    lease.release()
    assert renewals(alice) == []


def test_exit_waits_for_a_renewal_in_flight_and_sends_none_after(alice, monkeypatch):
    """The body ends while a renewal is being sent: exit returns only once it is done, so a release
    sent after keep() comes after it, and nothing is renewed later."""
    import threading

    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    entered, go_on = threading.Event(), threading.Event()
    renew = lease.registry._renew_by_id_steps

    def slow_renew(*args, **kwargs):
        entered.set()
        assert go_on.wait(60)
        return renew(*args, **kwargs)

    monkeypatch.setattr(lease.registry, "_renew_by_id_steps", slow_renew)
    exited = threading.Event()

    def leave():
        with lease.keep(clock=clock, since=0.0):
            clock.now = 15.0
            lease.keeper.wake()
            assert entered.wait(60)
        exited.set()

    body = threading.Thread(target=leave)
    body.start()
    assert entered.wait(60)
    assert not exited.is_set()
    go_on.set()
    body.join(60)
    assert exited.is_set()
    monkeypatch.setattr(lease.registry, "_renew_by_id_steps", renew)
    lease.release()
    assert len(renewals(alice)) == 1


def test_a_lease_superseded_by_another_account_is_noticed(alice, bob):
    """A's process is paused (its clock stands still) while its lease expires and B acquires: A's next
    renewal finds a higher token, and A's work is stopped: callback, check(), exit. The loss says how the
    lease ended, read from B's acquisition (reason expired), not just "superseded"."""
    chain = alice.chain
    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    lost: list[LeaseLost] = []
    with pytest.raises(LeaseLost) as at_exit:
        with lease.keep(clock=clock, since=0.0, on_lost=lost.append):
            settle(lease, clock)
            chain.advance_time(31)
            successor = bob.acquire(RESOURCE, ttl=30)
            clock.now = 15.0
            wait_until(lambda: lost, "on_lost")
            with pytest.raises(LeaseLost) as checked:
                lease.check()
            assert lease.safe_remaining() == 0.0
    for error in (lost[0], checked.value, at_exit.value):
        assert (error.resource, error.token, error.why) == (RESOURCE, lease.token, "expired")
        assert error.__cause__ is not None and type(error.__cause__).__name__ == "StaleToken"
    assert successor.is_current()
    with pytest.raises(LeaseLost):
        lease.check()  # stays lost after the block


@pytest.mark.parametrize("how", ["expired", "released"])
def test_a_lease_expired_or_released_elsewhere_is_lost_at_the_next_renewal(alice, how):
    chain = alice.chain
    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    with pytest.raises(LeaseLost) as at_exit:
        with lease.keep(clock=clock, since=0.0):
            settle(lease, clock)
            if how == "expired":
                chain.advance_time(31)
            else:
                alice.release(RESOURCE, lease.token)  # another process of the same holder
            clock.now = 15.0
            wait_until(lambda: lease.keeper.core.lost, "the loss")
    assert at_exit.value.why == how


def test_renewals_that_never_get_through_stop_the_work_before_the_lease_ends_on_chain(alice, monkeypatch):
    """Every renewal fails (the node does not answer): retried until the safe deadline, then lost,
    while the chain, moved in step with the clock, still holds the lease live."""
    chain = alice.chain
    lease = alice.acquire(RESOURCE, ttl=30)
    start = chain.now()
    attempts = []

    def unreachable(*args, **kwargs):
        attempts.append(args)
        raise NodeUnreachable("no node answers")

    monkeypatch.setattr(lease.registry, "_renew_by_id_steps", unreachable)
    clock = SteppedClock()
    lost: list[LeaseLost] = []
    with pytest.raises(LeaseLost) as at_exit:
        with lease.keep(clock=clock, since=0.0, on_lost=lost.append):
            for second in range(1, 40):
                chain.set_next_block_time(start + second)
                chain.mine()
                clock.now = float(second)
                settle(lease, clock)
                try:
                    lease.check()
                except LeaseLost:
                    break
            stopped_at = chain.now()
    assert lost and lost[0].why == "deadline" and at_exit.value.why == "deadline"
    assert isinstance(at_exit.value.__cause__, NodeUnreachable)
    assert len(attempts) > 1, "transient failures are retried"
    assert stopped_at < lease.expires_at, "the work stopped before the lease could end on-chain"
    assert lease.is_current(), "the lease is still live on-chain when the work stops"


def test_a_renewer_that_wakes_late_logs_a_warning(alice, caplog):
    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    with caplog.at_level(logging.WARNING, logger="chainfence.keepalive"):
        with lease.keep(clock=clock, since=0.0):
            settle(lease, clock)
            clock.now = 21.0  # due at 15: the renewer was starved for 6 s
            wait_until(lambda: lease.keeper.core.renewals == 1, "the late renewal")
            settle(lease, clock)
    late = [r for r in caplog.records if r.levelno == logging.WARNING and "late renewal" in r.getMessage()]
    assert len(late) == 1 and f"token={lease.token}" in late[0].getMessage()


def test_check_sees_the_deadline_even_if_the_renewer_never_woke(alice):
    """The body's check() reads the clock itself: a starved renewer thread cannot keep the work going."""
    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    with pytest.raises(LeaseLost):
        with lease.keep(clock=clock, since=0.0):
            with lease.keeper._cond:  # the renewer cannot decide anything meanwhile
                clock.now = 27.0
                with pytest.raises(LeaseLost) as checked:
                    lease.check()
    assert checked.value.why == "deadline"


def test_a_body_that_fails_after_the_loss_gets_lease_lost_with_its_error_as_context(alice):
    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    with pytest.raises(LeaseLost) as at_exit:
        with lease.keep(clock=clock, since=0.0):
            clock.now = 28.0
            raise OSError("the write failed")
    assert isinstance(at_exit.value.__context__, OSError)


def test_acquire_keep_release_in_one_with(alice):
    with alice.acquire(RESOURCE, ttl=30) as lease, lease.keep():
        lease.check()
        assert 0 < lease.safe_remaining() <= 27.0
    assert lease.released and not lease.is_current()


@pytest.mark.parametrize(
    "options",
    [
        {"interval": 40},
        {"interval": 0},
        {"latency_margin": 30},
        {"block_time_margin": -1},
        {"on_lost": "not callable"},
        {"clock": 5},
    ],
)
def test_bad_keep_arguments_are_invalid_input_and_start_nothing(alice, options):
    lease = alice.acquire(RESOURCE, ttl=30)
    with pytest.raises(InvalidInput):
        lease.keep(**options)
    assert lease.keeper is None and renewals(alice) == []


def test_keeping_a_released_lease_or_keeping_twice_is_refused(alice):
    lease = alice.acquire(RESOURCE, ttl=30)
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0):
        with pytest.raises(InvalidInput):
            with lease.keep(clock=clock, since=0.0):
                pass
    lease.release()
    with pytest.raises(LeaseLost) as released:
        with lease.keep():
            pytest.fail("the body must not run")
    assert released.value.why == "released"


def test_keeping_a_lease_whose_send_time_is_unknown_is_refused(alice):
    lease = alice.acquire(RESOURCE, ttl=30)
    found = alice.lease_from_tx(lease.tx_hash)
    with pytest.raises(InvalidInput):
        found.keep()
    with pytest.raises(LeaseLost):
        found.check()
    assert found.safe_remaining() == 0.0


# -- schedule="margin": renewals as late as the chain needs, the same deadline -------------------------


def _gated_renewals(lease, monkeypatch):
    """Hold every renewal at the node's door until the test lets it through: (entered, go_on) events."""
    import threading

    entered, go_on = threading.Event(), threading.Event()
    renew = lease.registry._renew_by_id_steps

    def gated(*args, **kwargs):
        entered.set()
        assert go_on.wait(60)
        return renew(*args, **kwargs)

    monkeypatch.setattr(lease.registry, "_renew_by_id_steps", gated)
    return entered, go_on


def test_the_margin_schedule_renews_two_seconds_before_the_safe_deadline(alice):
    """On a chain that mines at once (the embedded chain says so; on anvil the first renewal, at half the
    ttl, shows it) a renewal confirmed at once leaves 2 s before the safe deadline: every 25 s at ttl 30."""
    chain = alice.chain
    lease = alice.acquire(RESOURCE, ttl=30)
    start = chain.now()
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0, schedule="margin"):
        settle(lease, clock)
        core = lease.keeper.core
        first = core.due
        assert first == (25.0 if chain.rpc.embedded else 15.0)
        sent = []
        for count in (1, 2, 3):
            due = core.due
            chain.set_next_block_time(start + int(due))
            chain.mine()
            clock.now = due
            lease.keeper.wake()
            wait_until(lambda count=count: core.renewals == count, f"renewal {count}")
            settle(lease, clock)
            sent.append(due)
            assert core.interval == 25.0 and core.due == due + 25.0 and core.deadline == due + 27.0
            lease.check()
    assert sent == [first, first + 25.0, first + 50.0]
    assert len(renewals(alice)) == 3 and lease.is_current()


def test_under_the_margin_schedule_a_renewal_confirmed_too_late_still_fails_closed(alice, monkeypatch):
    """The renewal sent 2 s before the safe deadline hangs at the node: the work is stopped at the
    deadline while the chain, in step with the clock, still holds the lease live; the renewal landing
    afterwards changes nothing."""
    chain = alice.chain
    lease = alice.acquire(RESOURCE, ttl=30)
    start = chain.now()
    entered, go_on = _gated_renewals(lease, monkeypatch)
    clock = SteppedClock()
    lost: list[LeaseLost] = []
    with pytest.raises(LeaseLost) as at_exit:
        with lease.keep(clock=clock, since=0.0, schedule="margin", on_lost=lost.append):
            keeper = lease.keeper
            if not chain.rpc.embedded:  # the first renewal (half schedule) measures the node: let it through
                go_on.set()
                chain.set_next_block_time(start + 15)
                chain.mine()
                clock.now = 15.0
                keeper.wake()
                wait_until(lambda: keeper.core.renewals == 1, "the first renewal")
                settle(lease, clock)
                go_on.clear()
                entered.clear()
            due, deadline = keeper.core.due, keeper.core.deadline
            assert deadline - due == 2.0
            chain.set_next_block_time(start + int(due))
            chain.mine()
            clock.now = due
            keeper.wake()
            assert entered.wait(60), "the renewal reached the node"
            chain.set_next_block_time(start + int(deadline))
            chain.mine()
            clock.now = deadline
            keeper.wake()
            wait_until(lambda: lost, "the loss at the safe deadline")
            with pytest.raises(LeaseLost) as checked:
                lease.check()
            assert checked.value.why == "deadline"
            assert lease.is_current(), "the work stopped while the lease is still live on-chain"
            go_on.set()  # the renewal lands now, too late to count
            wait_until(lambda: keeper.core.in_flight is None, "the late renewal's answer")
            with pytest.raises(LeaseLost):
                lease.check()
    assert at_exit.value.why == "deadline" and lost[0].why == "deadline"


def test_control_a_keeper_that_waits_for_its_renewal_works_past_the_safe_deadline(alice, monkeypatch):
    """The control of the test above: a keep-alive that, while its renewal is in flight, waits for the
    answer instead of counting the deadline (the naive "the renewal will come back") still says the lease
    may be trusted at the safe deadline and after it, with nothing confirmed since the acquisition."""
    from chainfence.keepalive import KeepAliveCore

    honest = KeepAliveCore.check

    def waits_for_the_answer(self, now):
        return None if self.in_flight is not None and self.lost is None else honest(self, now)

    monkeypatch.setattr(KeepAliveCore, "check", waits_for_the_answer)
    chain = alice.chain
    lease = alice.acquire(RESOURCE, ttl=30)
    start = chain.now()
    entered, go_on = _gated_renewals(lease, monkeypatch)
    clock = SteppedClock()
    try:
        with lease.keep(clock=clock, since=0.0, schedule="margin"):
            keeper = lease.keeper
            due, deadline = keeper.core.due, keeper.core.deadline
            chain.set_next_block_time(start + int(due))
            chain.mine()
            clock.now = due
            keeper.wake()
            assert entered.wait(60), "the renewal reached the node"
            clock.now = deadline + 1.0
            keeper.wake()
            wait_until(lambda: keeper.evaluated_at == clock.now, "the keeper looked after the deadline")
            lease.check()  # no LeaseLost: the naive keeper trusts the lease past its safe deadline
            go_on.set()
    finally:
        go_on.set()


def test_under_the_margin_schedule_a_slow_node_moves_the_next_renewal_earlier(alice, monkeypatch):
    """A renewal that takes 1.5 s to be confirmed leaves 0.5 s of the 2 s budget: the next renewals go
    2 * 1.5 + 1 = 4 s before the deadline (every 23 s)."""
    chain = alice.chain
    lease = alice.acquire(RESOURCE, ttl=30)
    start = chain.now()
    entered, go_on = _gated_renewals(lease, monkeypatch)
    clock = SteppedClock()
    with lease.keep(clock=clock, since=0.0, schedule="margin"):
        keeper = lease.keeper
        settle(lease, clock)
        due = keeper.core.due
        chain.set_next_block_time(start + int(due))
        chain.mine()
        clock.now = due
        keeper.wake()
        assert entered.wait(60)
        clock.now = due + 1.5  # the node answers 1.5 s later
        go_on.set()
        wait_until(lambda: keeper.core.renewals == 1, "the slow renewal")
        settle(lease, clock)
        assert keeper.core.interval == 23.0 and keeper.core.due == due + 23.0
        lease.check()
    assert len(renewals(alice)) == 1
