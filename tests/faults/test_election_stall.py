"""A leader whose node stalls steps down before its successor can be elected.

The leader (account 1) reaches anvil through the suite's proxy; a second
candidate (account 2) campaigns on the node directly, in a thread, waiting
without gas. anvil runs on a logical clock, and the test moves chain time and
the leader's injected keep-alive clock together, one second at a time, as
tests/faults/test_keepalive_stall.py does. At second 15 the leader's renewal
goes out and the proxy holds it (a stalled node: no reply, no error).

- fenced: the leader's ``on_lost`` ran and ``check()`` raises at the safe
  deadline, a chain time strictly before its term's expiry; the successor is
  elected only at or after that expiry, so strictly after the leader gave
  up; the deposed leader's token is refused by a guard.
- control: a naive leader (acquire, then renew every ttl/2 in a loop, no
  local deadline) still believes it leads when the successor is elected.
- observe: a term that expires with no block and no event is reported over
  (None) by chain time alone.
"""

from __future__ import annotations

import threading

import pytest

from chainfence import Chain, Election, Guard, Registry, Timeouts
from chainfence.errors import ChainfenceError, LeaseLost, StaleToken
from tests.support.anvil import Anvil, dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import wait_until
from tests.support.virtual_time import SteppedClock

TTL = 30


@pytest.fixture(scope="module")
def node():
    with Anvil(logical_clock=True) as anvil:
        yield anvil


@pytest.fixture
def world(node):
    """The test's direct view of the chain, the leader's registry (through a proxy), the successor's."""
    direct = Chain.connect(node.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.005))
    registry = Registry.deploy(direct, max_ttl=3_600)
    with RpcProxy(node.url) as proxy:
        leader_chain = Chain.connect(proxy.url, private_keys=[dev_keys(3)[1]], timeouts=Timeouts(poll=0.005))
        leader = Registry.at(leader_chain, registry.address, sender=leader_chain.accounts[0])
        successor = registry.connect(direct.accounts[2])
        yield direct, registry, leader, successor, proxy


def step_chain(direct: Chain, start: int, second: int) -> int:
    direct.set_next_block_time(start + second)
    direct.mine()
    return direct.now()


class Campaign(threading.Thread):
    """The second candidate: ``Election.campaign(wait=...)`` in a thread of its own."""

    def __init__(self, registry: Registry, name: str):
        super().__init__(daemon=True)
        self.election = Election(registry, name, ttl=TTL)
        self.leadership = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.leadership = self.election.campaign(wait=600)
        except BaseException as error:
            self.error = error


def test_a_stalled_leader_steps_down_before_its_successor_is_elected(world, tmp_path):
    direct, registry, leader_registry, successor_registry, proxy = world
    name = "stall/leader"
    clock = SteppedClock()
    lost: list[tuple[LeaseLost, int]] = []
    leadership = Election(leader_registry, name, ttl=TTL, clock=clock).campaign(
        on_lost=lambda error: lost.append((error, direct.now()))
    )
    start, expires_at = leadership.since, leadership.expires_at
    guard = Guard(registry, tmp_path / "guard.sqlite")
    candidate = Campaign(successor_registry, name)
    work: list[int] = []
    stopped_at = None
    try:
        guard.check(name, leadership.token)  # the leader's writes were accepted
        candidate.start()
        proxy.stall()
        for second in range(1, TTL + 1):
            now = step_chain(direct, start, second)
            clock.now = float(second)
            keeper = leadership.lease.keeper
            if stopped_at is None:  # once the term is lost the renewer thread has ended
                wait_until(
                    lambda: keeper.evaluated_at == clock.now or keeper.core.lost, f"the renewer acted at t={second}"
                )
            if second == TTL // 2:
                proxy.wait_held(1)  # the renewal went out and the node does not answer
            if stopped_at is None:
                try:
                    leadership.check()
                    work.append(now)
                except LeaseLost:
                    stopped_at = now
            assert candidate.leadership is None or stopped_at is not None, "two leaders"
        wait_until(lambda: not candidate.is_alive(), "the successor's election")
    except BaseException:
        guard.close()
        raise
    finally:
        proxy.resume()
    assert candidate.error is None, candidate.error
    successor = candidate.leadership
    try:
        assert lost and lost[0][0].why == "deadline", "on_lost ran"
        assert stopped_at is not None and stopped_at <= start + TTL - 3, "given up at the safe deadline"
        assert lost[0][1] < expires_at and stopped_at < expires_at, "before the term could end on-chain"
        assert max(work) < expires_at
        assert successor.token == leadership.token + 1
        assert successor.since >= expires_at > stopped_at, (
            "the successor was elected only after the leader stepped down"
        )
        with pytest.raises(LeaseLost):
            leadership.check()
        assert guard.check(name, successor.token) == successor.token
        with pytest.raises(StaleToken):
            guard.check(name, leadership.token)  # the deposed leader's late write
        assert leadership.resign() is False, "its term had ended: nothing to give up"
    finally:
        successor.resign()
        guard.close()


def test_control_a_naive_leader_still_believes_it_leads_when_the_successor_is_elected(world):
    """acquire + a renew loop with no local deadline: the renewal hangs on the stalled node, and nothing
    tells the leader it no longer leads while another candidate is elected."""
    direct, registry, leader_registry, successor_registry, proxy = world
    name = "stall/naive-leader"
    lease = leader_registry.acquire(name, ttl=TTL)
    start = lease.expires_at - TTL
    clock = SteppedClock()
    done = threading.Event()
    believes_it_leads = threading.Event()
    believes_it_leads.set()

    def naive_renewer():
        next_renewal = TTL / 2
        while not done.is_set():
            if clock() >= next_renewal:
                try:
                    lease.renew()
                except ChainfenceError:
                    believes_it_leads.clear()  # told only by a refused renewal
                next_renewal = clock() + TTL / 2
            done.wait(0.01)

    renewer = threading.Thread(target=naive_renewer, daemon=True)
    candidate = Campaign(successor_registry, name)
    candidate.start()
    proxy.stall()
    renewer.start()
    try:
        for second in range(1, TTL + 1):
            step_chain(direct, start, second)
            clock.now = float(second)
            if second == TTL // 2:
                proxy.wait_held(1)
        wait_until(lambda: not candidate.is_alive(), "the successor's election")
        assert candidate.error is None, candidate.error
        successor = candidate.leadership
        assert successor.token == lease.token + 1
        assert believes_it_leads.is_set(), "the control must still believe it leads"
    finally:
        done.set()
        proxy.resume()
        renewer.join(60)
    successor.resign()


def test_observe_sees_an_expiry_with_no_block_and_no_event_by_chain_time(world):
    """anvil with automine mines nothing while nobody sends: chain time passes the term's expiry with no
    block and no event. The observer, woken by its clock at the expiry, asks Chain.now() and says None."""
    from tests.support.virtual_time import WaitClock

    direct, registry, leader_registry, successor_registry, proxy = world
    name = "quiet/leader"
    held = successor_registry.acquire(name, ttl=5)
    reader = registry.connect(direct.accounts[0])
    clock = WaitClock().install(reader)
    changes = Election(reader, name, ttl=30).observe(timeout=60)
    assert next(changes).token == held.token
    head = direct.block_number()
    direct.set_next_block_time(held.expires_at + 1)  # the pending block is past the expiry; none is mined
    assert direct.now() >= held.expires_at
    assert next(changes) is None
    assert direct.block_number() == head, "no block was mined: the expiry was judged by chain time"
    assert clock.now_ < 60
