"""One holder's leases kept with ``schedule="margin"`` renew together: one ``renewMany`` a round (issue 28).

Each lease keeps its own keep-alive (deadline, ``on_lost``, end); when one is due, the others of the
same holder on the same registry and clock that are past half their interval renew with it, in one
transaction, and are due together from then on. A ``renewMany`` the registry refuses (a member
ended) is never taken as the others' end: each member then renews alone and learns its own. The
keep-alives' clock is a SteppedClock the test moves with the chain's; every step waits on the renewers'
own counters, never on a wall-clock window.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack

import pytest

from chainfence import EventKind, LeaseSet, audit, keepalive
from chainfence.errors import DuplicateResource, LeaseLost
from tests.endings.holding import World
from tests.support.sequencer import wait_until
from tests.support.virtual_time import SteppedClock

pytestmark = pytest.mark.nodes("hardhat")


def settle(leases, clock) -> None:
    wait_until(
        lambda: all(lease.keeper.evaluated_at == clock.now and lease.keeper.core.in_flight is None for lease in leases),
        f"every renewer acted at t={clock.now}",
    )


def step_to(chain, start, clock, leases, now) -> None:
    """Move the chain (never back: each transaction of the embedded chain is a second on) and the clock."""
    behind = start + int(now) + (now % 1 > 0) - chain.now()
    if behind > 0:
        chain.advance_time(behind)
    clock.now = now
    for lease in leases:
        lease.keeper.wake()
    settle(leases, clock)


def begin(leases) -> tuple[int, SteppedClock]:
    """(chain time the clock counts from: the first acquisition's block, the clock at the chain's time now):
    each lease is kept from its own block's time (each transaction of the embedded chain is a second on)."""
    start = min(lease.expires_at - lease.ttl for lease in leases)
    clock = SteppedClock()
    clock.now = float(leases[0].registry.chain.now() - start)
    return start, clock


def since(lease, start) -> float:
    return float(lease.expires_at - lease.ttl - start)


def one_round(registry, leases, start, clock, *, renewals: int | None = None) -> dict[str, list[str]]:
    """Keep ``leases`` (margin schedule) through one round: the keepers started, the clock stepped to the
    first one due, each lease checked (and, given ``renewals``, each keeper's count of them); then the
    keepers let go, so that a next round keeps the leases anew. The renewal transactions of this round."""
    seen = renewal_txs(registry, leases)
    with ExitStack() as stack:
        for lease in leases:
            stack.enter_context(lease.keep(clock=clock, since=since(lease, start), schedule="margin"))
        settle(leases, clock)
        step_to(registry.chain, start, clock, leases, min(lease.keeper.core.due for lease in leases))
        for lease in leases:
            lease.check()
            assert renewals is None or lease.keeper.core.renewals == renewals, (lease.resource, renewals)
    for lease in leases:
        lease._attach(None)
    return {tx: names for tx, names in renewal_txs(registry, leases).items() if tx not in seen}


def renewal_txs(registry, leases) -> dict[str, list[str]]:
    """Each renewal transaction of ``leases``, with the resources it renewed."""
    txs: dict[tuple[int, str], list[str]] = {}
    for lease in leases:
        for event in audit.history(registry, lease.resource):
            if event.kind is EventKind.RENEWED:
                txs.setdefault((event.block_number, event.tx_hash), []).append(lease.resource)
    return {tx_hash: names for (_block, tx_hash), names in sorted(txs.items())}


def test_one_agents_leases_renew_in_one_transaction_a_round(alice):
    chain = alice.chain
    leases = [alice.acquire(f"together/{i}", ttl=30) for i in range(4)]
    start, clock = begin(leases)
    with ExitStack() as stack:
        for lease in leases:
            stack.enter_context(lease.keep(clock=clock, since=since(lease, start), schedule="margin"))
        settle(leases, clock)
        for round_ in (1, 2, 3):
            step_to(chain, start, clock, leases, min(lease.keeper.core.due for lease in leases))
            assert [lease.keeper.core.renewals for lease in leases] == [round_] * 4
            for lease in leases:
                lease.check()
    txs = renewal_txs(alice, leases)
    assert len(txs) == 3 and all(sorted(names) == [lease.resource for lease in leases] for names in txs.values())
    assert all(lease.is_current() for lease in leases)


def test_a_renewer_that_reaches_the_group_after_its_lease_rode_along_renews_nothing(alice, monkeypatch):
    """Two of one holder's leases due at once: both renewers decide to renew, and the one that reaches the
    group first renews both. The other reaches it only once that renewal is confirmed (a thread preempted
    between its decision and the group, as on a loaded machine): its lease is not due any more, and it
    renews nothing. (It used to renew its lease a second time, alone: three renewals in two rounds.)"""
    leases = [alice.acquire(f"together/late/{i}", ttl=30) for i in range(2)]
    start, clock = begin(leases)
    real = keepalive._Group.renew
    arrived: list[object] = []
    both_decided = threading.Event()

    def renew(group, leader, now):
        arrived.append(leader)
        if len(arrived) == 2:
            both_decided.set()
        assert both_decided.wait(60), "the other renewer never decided to renew"
        if leader is arrived[1]:  # the late one: in only once the first one's round is confirmed
            wait_until(
                lambda: all(
                    lease.keeper.core.renewals == 2 and lease.keeper.core.in_flight is None for lease in leases
                ),
                "the first renewer's round, both leases in it, confirmed",
            )
        return real(group, leader, now)

    with ExitStack() as stack:
        for lease in leases:
            stack.enter_context(lease.keep(clock=clock, since=since(lease, start), schedule="margin"))
        settle(leases, clock)
        step_to(alice.chain, start, clock, leases, min(lease.keeper.core.due for lease in leases))
        assert [lease.keeper.core.renewals for lease in leases] == [1, 1]
        assert len({lease.keeper.core.due for lease in leases}) == 1, "the two are due together"
        monkeypatch.setattr(keepalive._Group, "renew", renew)
        step_to(alice.chain, start, clock, leases, leases[0].keeper.core.due)
        assert len(arrived) == 2, "both renewers decided to renew"
        assert [lease.keeper.core.renewals for lease in leases] == [2, 2]
    assert len(renewal_txs(alice, leases)) == 2


def test_leases_acquired_at_different_times_fall_into_step(alice):
    """Acquired at 0, about 6 and about 22 s: at the first's renewal the second rides along (past half its
    interval), the third does not; at the third's renewal the other two ride along; from then on the
    three renew in one transaction."""
    chain = alice.chain
    leases = [alice.acquire("staggered/0", ttl=30)]
    chain.advance_time(5)
    leases.append(alice.acquire("staggered/1", ttl=30))
    chain.advance_time(15)
    leases.append(alice.acquire("staggered/2", ttl=30))
    start, clock = begin(leases)
    with ExitStack() as stack:
        for lease in leases:
            stack.enter_context(lease.keep(clock=clock, since=since(lease, start), schedule="margin"))
        settle(leases, clock)
        for _ in range(4):
            step_to(chain, start, clock, leases, min(lease.keeper.core.due for lease in leases))
        assert len({lease.keeper.core.due for lease in leases}) == 1, "the three are due together"
    txs = list(renewal_txs(alice, leases).values())
    assert [len(names) for names in txs][-2:] == [3, 3]
    if chain.rpc.embedded:  # the confirmation time known from the start: the rounds as told above
        assert [len(names) for names in txs] == [2, 3, 3, 3]


def test_a_revoke_refuses_the_round_and_stays_one_resources(chain):
    """carol revokes one of alice's three leases: the round's renewMany is refused, each member renews
    alone; the revoked one is lost (why='revoked'), the other two are renewed and still kept."""
    w = World.on(chain)
    leases = [w.alice.acquire(f"prod/together/{i}", ttl=30) for i in range(3)]
    start, clock = begin(leases)
    lost: list[LeaseLost] = []
    with ExitStack() as stack:
        for lease in leases:
            stack.enter_context(
                lease.keep(clock=clock, since=since(lease, start), schedule="margin", on_lost=lost.append)
            )
        settle(leases, clock)
        step_to(chain, start, clock, leases, leases[0].keeper.core.due)
        assert [lease.keeper.core.renewals for lease in leases] == [1, 1, 1]
        w.carol.namespace("prod").revoke(leases[1].resource)
        step_to(chain, start, clock, leases, leases[0].keeper.core.due)
        wait_until(lambda: lost, "the revoked lease's loss")
        assert [error.why for error in lost] == ["revoked"] and lost[0].resource == leases[1].resource
        with pytest.raises(LeaseLost):
            leases[1].check()
        for kept in (leases[0], leases[2]):
            kept.check()
            assert kept.keeper.core.renewals == 2 and kept.is_current()
        stack.pop_all()  # leave the kept two's blocks below, the lost one's raises
    for kept in (leases[0], leases[2]):
        kept.keeper.stop()
        kept._attach(None)
    leases[1].keeper.stop()
    leases[1]._attach(None)
    txs = renewal_txs(w.alice, [leases[0], leases[2]])
    assert len(txs) == 3, "round 1 together; round 2 each alone"


def test_control_without_the_margin_schedule_each_lease_renews_in_a_transaction_of_its_own(alice):
    chain = alice.chain
    leases = [alice.acquire(f"apart/{i}", ttl=30) for i in range(4)]
    start, clock = begin(leases)
    with ExitStack() as stack:
        for lease in leases:
            stack.enter_context(lease.keep(clock=clock, since=since(lease, start)))
        settle(leases, clock)
        step_to(chain, start, clock, leases, max(lease.keeper.core.due for lease in leases))
    assert len(renewal_txs(alice, leases)) == 4


def test_a_fleet_through_group_commit_renews_in_one_transaction(alice):
    """Leases acquired through the batcher (one sender for every agent) renew together too: one renewMany
    from that sender rather than the batch's per-item calls."""
    chain = alice.chain
    batcher = alice.batched()
    leases = [batcher.acquire(f"fleet/{i}", ttl=30) for i in range(8)]
    start, clock = begin(leases)
    with ExitStack() as stack:
        for lease in leases:
            stack.enter_context(lease.keep(clock=clock, since=since(lease, start), schedule="margin"))
        settle(leases, clock)
        for _ in range(2):
            step_to(chain, start, clock, leases, min(lease.keeper.core.due for lease in leases))
    txs = renewal_txs(alice, leases)
    assert len(txs) == 2 and all(len(names) == 8 for names in txs.values())
    for lease in leases:
        lease.release()  # through the batcher, as any batched lease


def test_a_group_of_more_than_sixteen_renews_in_one_transaction(alice, monkeypatch):
    """A group renews up to the registry's 64 leases in one renewMany, sent in the order of their ids (the
    registry refuses another); the control cuts groups at 16, as before the registry took sets in order:
    two transactions a round."""
    from chainfence import keepalive

    leases = list(LeaseSet.acquire(alice, [f"wide/{i}" for i in range(20)], ttl=30))  # one block: due together
    start, clock = begin(leases)
    for cap, expected in ((16, [16, 4]), (keepalive.MAX_TOGETHER, [20])):
        monkeypatch.setattr(keepalive, "MAX_TOGETHER", cap)
        txs = one_round(alice, leases, start, clock)
        assert sorted(len(names) for names in txs.values()) == sorted(expected), (cap, txs)
    assert keepalive.MAX_TOGETHER == 64
    assert all(lease.is_current() for lease in leases)


def test_two_keepers_of_one_lease_renew_alone_rather_than_lose_it(alice):
    """A lease kept twice (its Lease, and the same lease read back from its transaction, as a restarted agent
    reads it): the group's set would list it twice, which the registry refuses. Each keeper then renews alone,
    as after any refused round, and neither loses the lease (before, the refusal was taken as each keeper's
    failure to renew, and the lease was renewed by neither)."""
    from chainfence import keepalive

    chain = alice.chain
    lease = alice.acquire("twice/0", ttl=30)
    again = alice.lease_from_tx(lease.tx_hash)
    assert again is not None and (again.resource, again.token) == (lease.resource, lease.token)
    kept = [lease, again]
    with pytest.raises(DuplicateResource):  # control: the round's set, sent as one renewMany, is refused
        alice._drive(keepalive._renew_many_steps(alice, kept, 30))
    start, clock = begin(kept)
    lost: list[LeaseLost] = []
    with ExitStack() as stack:
        for each in kept:
            stack.enter_context(
                each.keep(clock=clock, since=since(lease, start), schedule="margin", on_lost=lost.append)
            )
        settle(kept, clock)
        for _ in range(2):
            step_to(chain, start, clock, kept, min(each.keeper.core.due for each in kept))
        wait_until(lambda: all(each.keeper.core.renewals >= 2 for each in kept), "each keeper renewed twice")
        for each in kept:
            each.check()
    assert lost == [] and lease.is_current()


def test_each_member_takes_its_own_expiry_from_the_receipt(alice, monkeypatch):
    """A round's riders are confirmed by their own LeaseRenewed, found by resource id in the round's receipt, not
    by the set's position: a rider the receipt does not name (here, one struck from what the round read) is not
    taken as renewed, and renews alone; the control is the same round read whole, where every rider rides."""
    from chainfence import keepalive

    leases = list(LeaseSet.acquire(alice, [f"own/{i}" for i in range(3)], ttl=30))
    struck = leases[1].resource_id
    read = keepalive._renew_many_steps

    def striking(registry, riders, ttl):
        expiries = yield from read(registry, riders, ttl)
        return {rid: at for rid, at in expiries.items() if rid != struck}

    start, clock = begin(leases)
    for strike, expected in ((False, [3]), (True, [1, 3])):
        if strike:
            monkeypatch.setattr(keepalive, "_renew_many_steps", striking)
        txs = one_round(alice, leases, start, clock, renewals=1)
        assert sorted(len(names) for names in txs.values()) == expected, (strike, txs)
