"""A stalled node under an asyncio keep-alive: the protected task is cancelled before the lease can end on-chain.

tests/faults/test_keepalive_stall.py for ``AsyncLease.keep()``: the agent
reaches anvil through the proxy, the test moves chain time and the
keep-alive's injected clock together one second at a time (anvil on a
logical clock), and at second 15 the proxy holds the renewal (no reply, no
error). The body never calls ``check()``: the cancellation alone must stop
it.

- fenced: at the safe deadline (second 27 of a 30 s lease) on_lost runs and
  the body's task is cancelled while the chain still shows the lease live;
  leaving the block raises LeaseLost (not CancelledError).
- control: a naive asyncio keep-alive (a task renewing every ttl/2, no
  local deadline) lets the body go on past the on-chain expiry while another
  agent holds the resource.
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import ChainfenceError, LeaseExpired, LeaseLost
from tests.support.anvil import Anvil, dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import async_wait_until
from tests.support.virtual_time import SteppedClock

TTL = 30


@pytest.fixture(scope="module")
def node():
    with Anvil(logical_clock=True) as anvil:
        yield anvil


@pytest.fixture
def world(node):
    """The test's direct (sync) view of the chain, and a proxy the asyncio agent (account 1) goes through."""
    direct = Chain.connect(node.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.005))
    registry = Registry.deploy(direct, max_ttl=3_600)
    with RpcProxy(node.url) as proxy:
        yield direct, registry, proxy


def step_chain(direct: Chain, start: int, second: int) -> int:
    direct.set_next_block_time(start + second)
    direct.mine()
    return direct.now()


async def agent(proxy: RpcProxy, registry: Registry) -> tuple[AsyncChain, AsyncRegistry]:
    chain = await AsyncChain.connect(proxy.url, private_key=dev_keys(3)[1], timeouts=Timeouts(request=60, poll=0.005))
    return chain, await AsyncRegistry.at(chain, registry.address)


def test_keep_cancels_the_task_before_the_lease_ends_on_chain(world):
    direct, registry, proxy = world
    lost: list[tuple[LeaseLost, int]] = []
    work: list[int] = []  # chain time of each unit of work done
    progress: list[int] = []  # the chain second the body had reached

    async def main():
        chain, me = await agent(proxy, registry)
        try:
            lease = await me.acquire("stall/fenced", ttl=TTL)
            start = lease.expires_at - TTL
            clock = SteppedClock()
            proxy.stall()
            with pytest.raises(LeaseLost) as at_exit:
                async with lease.keep(clock=clock, since=0.0, on_lost=lambda e: lost.append((e, direct.now()))):
                    for second in range(1, TTL + 5):
                        now = step_chain(direct, start, second)
                        progress.append(now)
                        clock.now = float(second)
                        keeper = lease.keeper
                        await async_wait_until(lambda: keeper.evaluated_at == clock.now, f"keeper acted at t={second}")
                        if second == TTL // 2:
                            await asyncio.to_thread(proxy.wait_held, 1)  # the renewal is out, unanswered
                        work.append(now)  # no check(): only the cancellation stops this loop
            return lease, at_exit.value
        finally:
            proxy.resume()
            await chain.aclose()

    lease, error = asyncio.run(asyncio.wait_for(main(), 120))
    start = lease.expires_at - TTL
    assert error.why == "deadline" and isinstance(error.__context__, asyncio.CancelledError)
    assert lost and lost[0][0].why == "deadline", "on_lost ran"
    assert progress[-1] == start + TTL - 3, "cancelled at the safe deadline: ttl - latency (1 s) - block time (2 s)"
    assert max(work) == start + TTL - 4, "the unit of work at the deadline never ran"
    on_chain = registry.last_lease("stall/fenced")
    assert on_chain.expires_at == lease.expires_at, "the renewal never got through before the cancellation"
    assert lost[0][1] < on_chain.expires_at and max(work) < on_chain.expires_at


def test_control_a_naive_async_keep_alive_lets_the_work_continue_after_the_lease_ended(world):
    """A task renewing every ttl/2 with no local deadline: its renewal hangs on the stalled node and
    nothing stops the body, which goes on while the lease has expired and B holds the resource."""
    direct, registry, proxy = world
    work: list[int] = []

    async def main():
        chain, me = await agent(proxy, registry)
        try:
            lease = await me.acquire("stall/naive", ttl=TTL)
            start = lease.expires_at - TTL
            clock = SteppedClock()
            renewing = asyncio.Event()

            async def naive_renewer():
                next_renewal = TTL / 2
                while True:
                    if clock() >= next_renewal:
                        renewing.set()
                        try:
                            await lease.renew()
                        except ChainfenceError:
                            pass  # logged and retried: the work is not told
                        next_renewal = clock() + TTL / 2
                    await asyncio.sleep(0.01)

            proxy.stall()
            renewer = asyncio.create_task(naive_renewer())
            successor = None
            for second in range(1, TTL + 5):
                now = step_chain(direct, start, second)
                clock.now = float(second)
                if second == TTL // 2:
                    await asyncio.to_thread(proxy.wait_held, 1)
                if second == TTL + 1:
                    with pytest.raises(LeaseExpired):
                        registry.check_current("stall/naive", lease.token)
                    successor = registry.connect(direct.accounts[2]).acquire("stall/naive", ttl=TTL)
                work.append(now)
                await asyncio.sleep(0)
            renewer.cancel()
            return lease, successor
        finally:
            proxy.resume()
            await chain.aclose()

    lease, successor = asyncio.run(asyncio.wait_for(main(), 120))
    assert successor is not None and successor.token > lease.token
    assert any(t >= lease.expires_at for t in work), "the control must show work after the on-chain expiry"
    assert any(t >= successor.expires_at - TTL for t in work), "...while B held the resource"
