"""A stalled node under a kept-alive lease: the work stops before the lease can end on-chain.

The agent reaches anvil through the suite's proxy; the test drives the
chain directly. anvil runs on a logical clock, and the test moves chain
time and the keep-alive's injected clock together, one second at a time,
so "local time" and "chain time" advance at the same rate, as they do in
production (to within the block-time margin), without depending on how
fast the machine is. At second 15 the renewal goes out and the proxy holds
it (a stalled node: no reply, no error).

- fenced: lease.keep() gives the lease up at its safe deadline (second 27 of
  a 30 s lease): on_lost has run and check() raises while the chain still
  shows the lease live.
- control: a naive keep-alive (renew every ttl/2, no local deadline) lets
  the work go on past the on-chain expiry, while another agent already holds
  the resource.
"""

from __future__ import annotations

import threading

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence.errors import ChainfenceError, LeaseExpired, LeaseLost
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
    """The test's direct view of the chain, and an agent (account 1) that reaches it through a proxy."""
    direct = Chain.connect(node.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.005))
    registry = Registry.deploy(direct, max_ttl=3_600)
    with RpcProxy(node.url) as proxy:
        agent_chain = Chain.connect(proxy.url, private_keys=[dev_keys(3)[1]], timeouts=Timeouts(poll=0.005))
        agent = Registry.at(agent_chain, registry.address, sender=agent_chain.accounts[0])
        yield direct, registry, agent, proxy


def step_chain(direct: Chain, start: int, second: int) -> int:
    direct.set_next_block_time(start + second)
    direct.mine()
    return direct.now()


def test_keep_stops_the_work_before_the_lease_ends_on_chain(world):
    direct, registry, agent, proxy = world
    lease = agent.acquire("stall/fenced", ttl=TTL)
    start = lease.expires_at - TTL  # the acquisition block's time: the earliest the lease can have begun
    clock = SteppedClock()
    lost: list[tuple[LeaseLost, int]] = []
    work: list[int] = []  # chain time of each unit of work done
    proxy.stall()
    with pytest.raises(LeaseLost) as at_exit:
        with lease.keep(clock=clock, since=0.0, on_lost=lambda e: lost.append((e, direct.now()))):
            for second in range(1, TTL + 5):
                now = step_chain(direct, start, second)
                clock.now = float(second)
                keeper = lease.keeper
                wait_until(lambda: keeper.evaluated_at == clock.now, f"the renewer acted at t={second}")
                if second == TTL // 2:
                    proxy.wait_held(1)  # the renewal went out and the node does not answer
                try:
                    lease.check()
                except LeaseLost:
                    stopped_at = now
                    break
                work.append(now)
    assert at_exit.value.why == "deadline"
    assert lost and lost[0][0].why == "deadline", "on_lost ran"
    assert "the node did not answer the renewal sent" in str(at_exit.value), str(at_exit.value)
    assert stopped_at == start + TTL - 3, "stopped at the safe deadline: ttl - latency (1 s) - block time (2 s)"
    on_chain = registry.last_lease("stall/fenced")
    assert on_chain.live and on_chain.expires_at == lease.expires_at, "the renewal never got through"
    assert lost[0][1] < on_chain.expires_at and stopped_at < on_chain.expires_at
    assert max(work) < on_chain.expires_at, "no work at or after the on-chain expiry"
    registry.check_current("stall/fenced", lease.token)  # the pending block still finds it live


def test_control_a_naive_keep_alive_lets_the_work_continue_after_the_lease_ended(world):
    """Renewing in a loop with no local deadline: the renewal hangs on the stalled node and nothing
    tells the work to stop; it goes on while the lease has expired and B holds the resource."""
    direct, registry, agent, proxy = world
    lease = agent.acquire("stall/naive", ttl=TTL)
    start = lease.expires_at - TTL
    clock = SteppedClock()
    done = threading.Event()
    failed: list[BaseException] = []

    def naive_renewer():
        next_renewal = TTL / 2
        while not done.is_set():
            if clock() >= next_renewal:
                try:
                    lease.renew()
                except ChainfenceError as error:  # logged and retried: the work is not told
                    failed.append(error)
                next_renewal = clock() + TTL / 2
            done.wait(0.01)

    renewer = threading.Thread(target=naive_renewer, daemon=True)
    proxy.stall()
    renewer.start()
    work: list[int] = []
    successor = None
    try:
        for second in range(1, TTL + 5):
            now = step_chain(direct, start, second)
            clock.now = float(second)
            if second == TTL // 2:
                proxy.wait_held(1)
            if second == TTL + 1:
                with pytest.raises(LeaseExpired):
                    registry.check_current("stall/naive", lease.token)
                successor = registry.connect(direct.accounts[2]).acquire("stall/naive", ttl=TTL)
            work.append(now)  # the naive agent has no reason to stop
    finally:
        done.set()
        proxy.resume()
        renewer.join(60)
    assert successor is not None and successor.token > lease.token
    assert any(t >= lease.expires_at for t in work), "the control must show work after the on-chain expiry"
    assert any(t >= successor.expires_at - TTL for t in work), "...while B held the resource"
