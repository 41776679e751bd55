"""Many threads, one Chain: per-account nonces never collide and tokens stay unique."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

# On hardhat's node too; not on ganache, which answers a send only once it is mined: a send ahead of
# its nonce (threads sharing an account) waits there past the request's timeout (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")


def test_threads_sharing_accounts_get_unique_increasing_tokens(chain, registry):
    """8 threads x 5 acquisitions over 3 accounts (so threads share keys): 40 distinct tokens, 1..40."""
    agents = [registry.connect(account) for account in chain.accounts[1:4]]

    def work(worker: int) -> list[int]:
        agent = agents[worker % len(agents)]
        return [agent.acquire(f"w{worker}/r{i}", ttl=60).token for i in range(5)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(8)))
    tokens = sorted(t for per_worker in results for t in per_worker)
    assert tokens == list(range(1, 41))
    for per_worker in results:
        assert per_worker == sorted(per_worker), "one thread's acquisitions are ordered"
    assert registry.latest_token() == 40
