"""A waiter does not poll in a tight loop: what it asks the node, counted at a proxy, per pause and per block.

The waiter runs on a WaitClock; between two of its pauses the test either
does nothing (an idle poll), mines a block with nothing for the resource,
or changes the resource. The proxy's log, cut at each pause, shows what
each poll cost: one request for a poll that found no new block, two for a
new block without an event of the resource, and one read more when the
block carries one. So the requests are bounded per poll and per block, and
the pause asked between polls is the chain's poll interval, never less.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from chainfence import Chain, Registry
from chainfence._waiting import Pace, pace
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.virtual_time import WaitClock

NAME = "jobs/wait-rpc"

#: What the waiter does at each pause n (1-based), done by the test straight at the node.
IDLE, BLOCK, OTHER, RENEW, RELEASE = "idle", "block", "other", "renew", "release"
SCRIPT = [IDLE] * 10 + [BLOCK] * 10 + [OTHER] * 5 + [RENEW] + [IDLE] * 5 + [RELEASE]


def test_requests_while_waiting_are_bounded_per_poll_and_per_block(on_anvil, anvil_node):
    admin = on_anvil.chain
    alice = on_anvil.connect(admin.accounts[1])
    carol = on_anvil.connect(admin.accounts[3])
    held = alice.acquire(NAME, ttl=3_000)
    with RpcProxy(anvil_node.url) as proxy:
        chain = Chain.connect(proxy.url, private_keys=[dev_keys(10)[2]], poll_latency=0.005, receipt_timeout=30)
        bob = Registry(chain, on_anvil.address, sender=chain.accounts[0])
        _ = bob.max_ttl
        cuts: list[int] = []

        def on_sleep(n):
            cuts.append(len(proxy.log))
            step = SCRIPT[n - 1]
            if step == BLOCK:
                admin.mine(1)
            elif step == OTHER:
                carol.acquire(f"jobs/other-{n}", ttl=60)
            elif step == RENEW:
                held.renew(3_000)
            elif step == RELEASE:
                held.release()

        clock = WaitClock(on_sleep=on_sleep).install(bob)
        started = len(proxy.log)
        lease = bob.acquire(NAME, ttl=60, wait=600)
        assert lease.token == held.token + 1 + 5  # carol's five tokens came in between
        assert len(clock.sleeps) == len(SCRIPT)
        assert all(seconds == pace(chain).poll == 0.05 for seconds in clock.sleeps), "a poll interval each"
        log = [method for method, _params, _fault in proxy.log]

    between = [log[a:b] for a, b in zip(cuts, cuts[1:])]  # what poll n (after pause n) asked, n = 1..
    for n, (step, asked) in enumerate(zip(SCRIPT, between), start=1):
        if step == IDLE:
            assert asked == ["eth_getBlockByNumber"], (n, asked)
        elif step in (BLOCK, OTHER):
            assert asked == ["eth_getBlockByNumber", "eth_getLogs"], (n, asked)
        elif step == RENEW:  # the resource's event: read the lease again (eth_call + pending block, batched)
            assert asked == ["eth_getBlockByNumber", "eth_getLogs", "eth_call+eth_getBlockByNumber"], (n, asked)
    before_waiting = log[started : cuts[0]]
    assert len(before_waiting) <= 6, before_waiting  # the refused preflight, the head, one read
    blocks = SCRIPT.count(BLOCK) + SCRIPT.count(OTHER) + SCRIPT.count(RENEW)
    assert cuts[-1] - cuts[0] <= len(SCRIPT) + 2 * blocks


@pytest.mark.parametrize(("block_time", "poll"), [(12.0, 6.0), (2.0, 1.0), (0.25, 0.25), (0.0, 0.25), (60.0, 6.0)])
def test_on_a_chain_that_is_not_a_dev_chain_the_poll_interval_is_half_a_block_within_bounds(block_time, poll):
    blocks = {100: {"number": 100, "timestamp": 10_000}, 68: {"number": 68, "timestamp": int(10_000 - 32 * block_time)}}

    def block(which):
        return blocks[100 if which == "latest" else which]

    fake = _Fake(block)
    assert pace(fake) == Pace(poll=poll, jitter=poll / 2)
    assert fake.asked == 2 and pace(fake) == Pace(poll=poll, jitter=poll / 2) and fake.asked == 2, "once per chain"


class _Fake:
    """A chain that is not a dev chain, with two blocks to estimate its block time from."""

    is_dev = False

    def __init__(self, block):
        self.asked = 0

        def counted(which):
            self.asked += 1
            return block(which)

        self.rpc = SimpleNamespace(embedded=False, block=counted)


def test_a_node_that_stops_while_a_waiter_waits_is_node_unreachable(on_anvil, anvil_node):
    """The waiter does not wait out its wait against a dead node, nor leak a transport exception."""
    from chainfence.errors import NodeUnreachable

    alice = on_anvil.connect(on_anvil.chain.accounts[1])
    alice.acquire(NAME, ttl=3_000)
    with RpcProxy(anvil_node.url) as proxy:
        chain = Chain.connect(proxy.url, private_keys=[dev_keys(10)[2]], request_timeout=5)
        bob = Registry(chain, on_anvil.address, sender=chain.accounts[0])

        def on_sleep(n):
            if n == 3:
                proxy.down = True

        clock = WaitClock(on_sleep=on_sleep).install(bob)
        with pytest.raises(NodeUnreachable):
            bob.acquire(NAME, ttl=60, wait=600)
        assert len(clock.sleeps) == 3
