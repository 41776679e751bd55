"""Provider limits: eth_getLogs ranges are capped, and a follower in trouble is never silent.

Hosted JSON-RPC providers refuse ``eth_getLogs`` over more than a few
thousand blocks (and over too many results). The proxy refuses more than a
handful of blocks per request, so every query here has to page.
"""

from __future__ import annotations

import pytest

from chainfence import Chain, Guard, Registry
from chainfence.errors import LogRangeRefused, StaleToken
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy

CAP = 8


@pytest.fixture
def capped(anvil_node, on_anvil):
    """(proxy, the registry seen through a provider that caps eth_getLogs at CAP blocks)."""
    with RpcProxy(anvil_node.url) as proxy:
        proxy.max_log_range = CAP
        chain = Chain.connect(proxy.url, private_keys=dev_keys(3), poll_latency=0.01)
        yield proxy, Registry.at(chain, on_anvil.address)


def spread_acquisitions(on_anvil, names, gap=3 * CAP):
    """Acquire each name, with `gap` empty blocks between them: the events span many pages."""
    agent = on_anvil.connect(on_anvil.chain.accounts[1])
    leases = []
    for name in names:
        on_anvil.chain.mine(gap)
        leases.append(agent.acquire(name, ttl=600))
    return leases


def test_history_pages_through_a_capped_provider(capped, on_anvil):
    proxy, registry = capped
    leases = spread_acquisitions(on_anvil, ["a/1", "b/2", "c/3"])
    events = registry.history()
    assert [(e.resource, e.token) for e in events][-3:] == [(lease.resource, lease.token) for lease in leases]
    assert [e.token for e in events] == [e.token for e in on_anvil.history()], "the same as an uncapped node"
    assert len(proxy.sent("eth_getLogs")) > 3 * 3, "it paged"


def test_control_one_unbounded_query_is_refused(capped, on_anvil):
    """What history() and the follower's name lookup asked before: blocks 0 to latest in one request."""
    _proxy, registry = capped
    on_anvil.chain.mine(2 * CAP)
    with pytest.raises(LogRangeRefused):
        registry.chain.rpc.logs({"address": registry.address, "fromBlock": 0, "toBlock": "latest"})


def test_the_follower_keeps_following_through_a_capped_provider(capped, on_anvil, tmp_path):
    _proxy, registry = capped
    with Guard(registry, path=tmp_path / "follow.sqlite", mode="follow", follow_interval=60) as guard:
        leases = spread_acquisitions(on_anvil, ["x/1", "y/2", "z/3"])
        head = guard.sync()
        assert head >= leases[-1].block_number
        for lease in leases:
            assert guard.mark(lease.resource) == lease.token, "raised from the events, page by page"
        status = guard.follow_status()
        assert status.healthy and status.last_error is None and status.followed_block == head


def test_a_follower_that_cannot_read_logs_says_so_and_checks_go_on_chain(capped, on_anvil, tmp_path):
    """The provider refuses every eth_getLogs: the follower reports it (follow_status, staleness) and,
    meanwhile, a token at its mark is verified on-chain: the superseded holder is refused."""
    proxy, registry = capped
    chain = on_anvil.chain
    old = on_anvil.connect(chain.accounts[1]).acquire("jobs/1", ttl=10)
    with Guard(registry, path=tmp_path / "follow.sqlite", mode="follow", follow_interval=60) as guard:
        guard.check("jobs/1", old.token)
        proxy.max_log_range = 0  # every range refused, even a single block
        chain.advance_time(11)
        on_anvil.connect(chain.accounts[2]).acquire("jobs/1", ttl=60)  # the holder is superseded
        with pytest.raises(LogRangeRefused):
            guard.sync()
        status = guard.follow_status()
        assert not status.healthy and "LogRangeRefused" in status.last_error
        with pytest.raises(StaleToken):
            guard.check("jobs/1", old.token)  # at its mark, yet refused: the chain was asked


def test_control_mark_mode_accepts_the_superseded_holder_at_its_mark(capped, on_anvil, tmp_path):
    """What a follower that silently degraded to mark mode did: accept the stale holder at its mark."""
    _proxy, registry = capped
    chain = on_anvil.chain
    old = on_anvil.connect(chain.accounts[1]).acquire("jobs/1", ttl=10)
    with Guard(registry, path=tmp_path / "mark.sqlite") as guard:
        guard.check("jobs/1", old.token)
        chain.advance_time(11)
        on_anvil.connect(chain.accounts[2]).acquire("jobs/1", ttl=60)
        assert guard.check("jobs/1", old.token) == old.token
