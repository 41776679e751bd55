"""The keep-alive's decisions (chainfence.keepalive.KeepAliveCore), fed made-up monotonic times: no chain, no threads."""

from __future__ import annotations

import pytest

from chainfence.errors import (
    ChainRolledBack,
    InvalidInput,
    LeaseExpired,
    LeaseReleased,
    NodeUnreachable,
    NotHolder,
    OutcomeUnknown,
    StaleToken,
    TokenNotConfirmed,
    TransactionTimeout,
    UnknownToken,
)
from chainfence.keepalive import KeepAliveCore, loss_reason


def core(**options) -> KeepAliveCore:
    """ttl 30 sent at t=100, default margins (1 + 2): deadline 127, renewals every 15 s."""
    return KeepAliveCore(30, 100.0, **options)


def renew(c: KeepAliveCore, sent: float, confirmed: float) -> list[str]:
    assert c.step(sent).action == "renew"
    warnings = c.renewal_started(sent)
    return warnings + c.renewal_confirmed(confirmed)


def test_the_deadline_is_the_send_plus_ttl_minus_the_margins():
    c = core()
    assert c.deadline == 127.0 and c.interval == 15.0
    assert c.safe_remaining(110.0) == 17.0
    c2 = KeepAliveCore(30, 100.0, latency_margin=0.5, block_time_margin=4)
    assert c2.deadline == 125.5


def test_before_the_interval_it_waits_until_the_renewal_is_due():
    c = core()
    step = c.step(101.0)
    assert step.action == "wait" and step.until == 115.0


def test_on_time_renewals_move_the_deadline_to_the_send_time_plus_ttl():
    """The deadline counts from the renewal's SEND time, not its confirmation."""
    c = core()
    assert renew(c, sent=115.0, confirmed=116.5) == []
    assert c.deadline == 115.0 + 27 and c.due == 130.0 and c.renewals == 1
    assert renew(c, sent=130.0, confirmed=130.2) == []
    assert c.deadline == 157.0
    assert c.check(156.9) is None


def test_while_a_renewal_is_in_flight_it_waits_for_the_deadline_only():
    c = core()
    c.step(115.0)
    c.renewal_started(115.0)
    step = c.step(120.0)
    assert step.action == "wait" and step.until == 127.0


def test_a_renewal_unconfirmed_at_the_deadline_loses_the_lease():
    c = core()
    c.step(115.0)
    c.renewal_started(115.0)
    assert c.step(126.999).action == "wait"
    step = c.step(127.0)
    assert step.action == "lost" and step.why == "deadline"
    assert c.safe_remaining(127.0) == 0.0


def test_a_confirmation_after_the_deadline_does_not_revive_the_lease():
    c = core()
    c.step(115.0)
    c.renewal_started(115.0)
    assert c.check(128.0) == "deadline"
    assert c.renewal_confirmed(129.0) == []
    assert c.check(129.0) == "deadline" and c.deadline == 127.0


def test_checking_past_the_deadline_loses_it_even_if_the_renewer_never_woke():
    """A starved renewer thread: the body's own check() sees the deadline pass."""
    c = core()
    assert c.check(127.5) == "deadline"


def test_a_renewer_that_wakes_late_warns():
    c = core()
    warnings = renew(c, sent=120.0, confirmed=120.5)
    assert len(warnings) == 1 and "late" in warnings[0] and "5.000 s after it was due" in warnings[0]
    assert c.deadline == 147.0  # still counted from its send


def test_a_renewal_that_takes_more_than_half_the_safety_window_warns():
    c = core()
    warnings = renew(c, sent=115.0, confirmed=121.5)  # window 115..127: half is 6 s
    assert len(warnings) == 1 and "more than half the safety window" in warnings[0]
    assert renew(c, sent=130.0, confirmed=135.0) == []


def test_a_slightly_late_renewal_is_not_a_warning():
    c = core()
    assert renew(c, sent=116.0, confirmed=117.0) == []  # within a tenth of the interval


@pytest.mark.parametrize(
    "error",
    [
        NodeUnreachable("down"),
        OutcomeUnknown("?"),
        TransactionTimeout("slow"),
        TokenNotConfirmed(token=1, confirmations=2),
    ],
)
def test_transient_failures_are_retried_until_the_deadline(error):
    c = core()
    why = loss_reason(error)
    assert why is None
    c.step(115.0)
    c.renewal_started(115.0)
    c.renewal_failed(116.0, why)
    assert c.check(116.0) is None and c.failures == 1
    step = c.step(116.5)
    assert step.action == "wait" and step.until == 116.0 + c.retry_delay
    assert c.step(116.0 + c.retry_delay).action == "renew"
    c.renewal_started(117.0)
    c.renewal_failed(126.0, None)
    assert c.step(126.5).action == "wait"
    assert c.step(127.0).why == "deadline"


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (StaleToken(token=1, current_token=2), "superseded"),
        (UnknownToken(token=3, current_token=2), "rolled_back"),  # the holder's token, unknown: history lost
        (UnknownToken(token=0, current_token=2), "superseded"),
        (NotHolder(token=1, account="0x1", holder="0x2"), "superseded"),
        (LeaseExpired(token=1, expired_at=5), "expired"),
        (LeaseReleased(token=1), "released"),
        (ChainRolledBack("lost history", seen_token=3, chain_token=1), "rolled_back"),
        (RuntimeError("a bug"), "error"),
    ],
)
def test_errors_that_mean_the_lease_is_gone_lose_it_at_once(error, why):
    c = core()
    assert loss_reason(error) == why
    c.step(115.0)
    c.renewal_started(115.0)
    c.renewal_failed(115.5, loss_reason(error))
    step = c.step(115.5)
    assert step.action == "lost" and step.why == why
    assert c.safe_remaining(115.5) == 0.0


def test_after_stop_it_never_renews_again():
    c = core()
    c.stop()
    for now in (115.0, 200.0, 10_000.0):
        assert c.step(now).action == "stop"
    with pytest.raises(RuntimeError):
        c.renewal_started(115.0)


def test_a_renewal_in_flight_at_stop_is_not_counted():
    c = core()
    c.step(115.0)
    c.renewal_started(115.0)
    c.stop()
    c.renewal_confirmed(116.0)
    assert c.renewals == 0 and c.step(116.0).action == "stop"


def test_a_short_ttl_gets_an_interval_inside_its_window():
    c = KeepAliveCore(5, 0.0)  # window 2 s: half the ttl would come after the deadline
    assert c.deadline == 2.0 and c.interval == 1.0


@pytest.mark.parametrize(
    "options",
    [
        {"ttl": 3},  # margins eat the whole ttl
        {"ttl": 0},
        {"ttl": -5},
        {"ttl": "30"},
        {"ttl": True},
        {"ttl": 30, "interval": 27},  # at the deadline
        {"ttl": 30, "interval": 0},
        {"ttl": 30, "latency_margin": -1},
        {"ttl": 30, "block_time_margin": float("nan")},
        {"ttl": 30, "retry_delay": 0},
    ],
)
def test_bad_parameters_are_invalid_input(options):
    ttl = options.pop("ttl")
    with pytest.raises(InvalidInput):
        KeepAliveCore(ttl, 0.0, **options)


def test_bad_anchor_is_invalid_input():
    with pytest.raises(InvalidInput):
        KeepAliveCore(30, float("inf"))


# -- a renewal the holder sends itself (lease.renew(ttl=...) inside keep()) ------------------------


def test_a_holder_renewal_with_a_new_ttl_moves_the_deadline_interval_and_next_renewal():
    """The defect: renew(ttl=shorter) inside keep() left the keep-alive on the old ttl. Its confirmation
    now retunes the core: the deadline counts from its send with its ttl, the interval is its ttl's."""
    c = core()
    handle = c.external_started(102.0, 10)
    c.external_confirmed(handle, 102.5)
    assert (c.ttl, c.window, c.interval, c.deadline, c.due) == (10, 7.0, 5.0, 109.0, 107.0)
    assert renew(c, sent=107.0, confirmed=107.2) == [] and c.deadline == 114.0  # the next renewals ask for 10 s
    assert c.check(113.9) is None and c.check(114.0) == "deadline"


def test_a_holder_renewal_that_finds_the_lease_ended_loses_it():
    c = core()
    c.external_failed(c.external_started(102.0, 30), 102.5, "revoked")
    assert c.step(102.5) == c.step(102.5) and c.step(102.5).why == "revoked"


def test_a_transient_failure_of_a_holder_renewal_changes_nothing():
    c = core()
    c.external_failed(c.external_started(102.0, 10), 102.5, None)
    assert (c.ttl, c.deadline, c.lost) == (30, 127.0, None)


def test_overlapping_renewals_only_bring_the_deadline_closer():
    """The keep-alive's renewal (ttl 5 after a retune) and the holder's (ttl 30) are in flight at once:
    which the chain mined last is unknown, so neither may push the deadline past what the other allows."""
    c = core()
    c.external_confirmed(c.external_started(101.0, 10), 101.5)  # retuned to ttl 10: deadline 108, due 106
    held = c.external_started(106.0, 30)  # the holder renews for 30 s ...
    assert c.step(106.0).action == "renew"
    c.renewal_started(106.0)  # ... while the keep-alive renews for 10 s: both in flight
    c.renewal_confirmed(106.5)  # the keep-alive's: 106 + 7 = 113, but only min(108, 113)
    assert c.deadline == 108.0
    c.external_confirmed(held, 107.0)  # the holder's: 106 + 27 = 133, but only min(108, 133)
    assert c.deadline == 108.0 and c.ttl == 30
    assert c.step(107.5).action == "renew", "the deadline is near: renew now"
    renew(c, sent=107.5, confirmed=107.6)
    assert c.deadline == 134.5  # alone again: its own send and ttl


def test_control_taking_each_confirmation_at_its_word_trusts_an_expiry_the_chain_may_not_have():
    """The control: the rule before (the last confirmation sets the deadline). The holder's 30 s renewal
    confirms after the keep-alive's 10 s one that the chain may have mined after it: the naive deadline
    (133) is past the expiry the chain may hold (106 + 10 = 116)."""
    sent_keeper, ttl_keeper, sent_holder, ttl_holder = 106.0, 10, 106.0, 30
    chain_expiry_if_keeper_mined_last = sent_keeper + ttl_keeper
    naive = sent_holder + ttl_holder - 3
    assert naive > chain_expiry_if_keeper_mined_last


def test_check_ttl_refuses_a_ttl_the_keep_alive_could_not_keep():
    c = core(interval=10)
    c.check_ttl(30)
    for ttl in (3, 12):  # no window after the margins; an interval (10) past the window (9)
        with pytest.raises(InvalidInput):
            c.check_ttl(ttl)
    assert c.ttl == 30


# -- schedule="margin": renewals timed by what the chain needs, not at half the ttl ---------------------


def test_the_margin_schedule_renews_twice_the_confirmation_time_plus_a_retry_before_the_deadline():
    """What the chain says a renewal takes (confirmations + 1 blocks: 0 s on a chain that mines at once,
    floored at a round trip) leaves 2 * 0.5 + 1 = 2 s before the safe deadline: a renewal every 25 s at
    ttl 30 instead of 15; with 2 s blocks and no confirmations, 2 * 2 + 1 = 5 s."""
    c = core(schedule="margin", confirm_time=0.0)
    assert (c.deadline, c.interval, c.due) == (127.0, 25.0, 125.0)
    assert c.step(124.9).action == "wait" and c.step(125.0).action == "renew"
    c.renewal_started(125.0)
    c.renewal_confirmed(125.0)
    assert (c.deadline, c.due) == (152.0, 150.0)
    assert core(schedule="margin", confirm_time=2.0).interval == 22.0
    # The lead is never more than the half schedule's: a chain too slow for the ttl renews every 15 s.
    assert core(schedule="margin", confirm_time=12.0).interval == 15.0


def test_the_margin_schedule_starts_on_the_half_schedule_until_it_knows_the_confirmation_time():
    c = core(schedule="margin")
    assert c.interval == 15.0
    renew(c, 115.0, 115.2)  # confirmed in 0.2 s: floored at a round trip
    assert c.interval == 25.0 and c.due == 140.0


def test_a_slow_node_shrinks_the_margins_budget_so_the_next_renewal_goes_earlier():
    """A renewal confirmed 1.5 s after it was sent used 1.5 s of the 2 s budget: the next ones budget
    2 * 1.5 + 1 = 4 s. It is the slowest of the last 8 renewals that counts: the budget comes back once
    the slow one is forgotten."""
    c = core(schedule="margin", confirm_time=0.0)
    renew(c, 125.0, 126.5)
    assert (c.deadline, c.interval, c.due) == (152.0, 23.0, 148.0)
    for _ in range(7):
        renew(c, c.due, c.due)
        assert c.interval == 23.0
    renew(c, c.due, c.due)
    assert c.interval == 25.0


def test_a_renewal_that_fails_slowly_counts_as_slow_too():
    """No answer for 0.8 s, then a transient error: retried after the retry delay, inside the budget,
    and the next renewals budget 2 * 0.8 + 1 = 2.6 s."""
    c = core(schedule="margin", confirm_time=0.0)
    assert c.step(125.0).action == "renew"
    c.renewal_started(125.0)
    c.renewal_failed(125.8, None)
    assert c.due == 126.8 and c.interval == pytest.approx(24.4)
    renew(c, 126.8, 126.8)
    assert c.deadline == pytest.approx(153.8) and c.due == pytest.approx(151.2)


def test_a_renewal_confirmed_after_the_deadline_counts_for_nothing_under_the_margin_schedule():
    c = core(schedule="margin", confirm_time=0.0)
    assert c.step(125.0).action == "renew"
    c.renewal_started(125.0)
    assert c.step(127.0).action == "lost" and c.check(127.0) == "deadline"
    assert c.renewal_confirmed(128.0) == [] and c.deadline == 127.0 and c.lost == "deadline"


@pytest.mark.parametrize(
    "options",
    [{"schedule": "ttl/2"}, {"schedule": "margin", "interval": 20}, {"schedule": "margin", "confirm_time": -1}],
)
def test_bad_schedules_are_invalid_input(options):
    with pytest.raises(InvalidInput):
        core(**options)
