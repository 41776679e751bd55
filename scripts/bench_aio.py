#!/usr/bin/env python3
"""The asyncio SDK beside the sync one on anvil: the same core, so the same requests and about the same time.

    python scripts/bench_aio.py                 # 40 samples of each, alternating
    python scripts/bench_aio.py --samples 100 --json

On a fresh anvil started here, one sample is acquire + lease_of + release of
one resource by one account: ``sync`` through :class:`chainfence.Registry`
(``HTTPProvider``), ``asyncio`` through :class:`chainfence.aio.AsyncRegistry`
(``AsyncHTTPProvider``) over the same chain. Samples alternate, so both see
the same machine load. Figures: p50 and p90 in milliseconds per sample, and
the JSON-RPC requests per sample (counted by the RPC layer's methods), which
must be equal: both run the same steps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, Registry, Timeouts
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

ROOT = Path(__file__).resolve().parent.parent
NAME = "jobs/bench-aio"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def counting(rpc, counter: Counter) -> None:
    """Count each request of the core on ``rpc`` (an Rpc or an AsyncRpc) by wrapping its methods."""
    for name in (
        "chain_id",
        "block_number",
        "block",
        "pending_timestamp",
        "call_and_pending_timestamp",
        "call",
        "estimate_gas",
        "code",
        "nonce",
        "logs",
        "send_raw",
        "transaction",
        "receipt",
        "gas_price",
        "max_priority_fee",
    ):
        method = getattr(rpc, name)

        def wrapped(*args, _method=method, _name=name, **kwargs):
            counter[_name] += 1
            return _method(*args, **kwargs)

        setattr(rpc, name, wrapped)


async def main_async(url: str, samples: int) -> dict[str, object]:
    chain = Chain.connect(url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.005))
    registry = Registry.deploy(chain, max_ttl=3_600)
    sync_agent = registry.connect(chain.accounts[1])
    sync_agent.acquire(NAME + "/warm", ttl=60).release()
    achain = AsyncChain.over(chain)
    async_agent = (await AsyncRegistry.at(achain, registry.address)).connect(chain.accounts[1])
    await (await async_agent.acquire(NAME + "/warm", ttl=60)).release()
    sync_requests, async_requests = Counter(), Counter()
    counting(chain.rpc, sync_requests)
    counting(achain.rpc, async_requests)
    times: dict[str, list[float]] = {"sync": [], "asyncio": []}
    requests: dict[str, list[int]] = {"sync": [], "asyncio": []}
    try:
        for _ in range(samples):
            before = sum(sync_requests.values())
            start = time.perf_counter()
            lease = sync_agent.acquire(NAME, ttl=60)
            sync_agent.lease_of(NAME)
            lease.release()
            times["sync"].append(time.perf_counter() - start)
            requests["sync"].append(sum(sync_requests.values()) - before)

            before = sum(async_requests.values())
            start = time.perf_counter()
            alease = await async_agent.acquire(NAME, ttl=60)
            await async_agent.lease_of(NAME)
            await alease.release()
            times["asyncio"].append(time.perf_counter() - start)
            requests["asyncio"].append(sum(async_requests.values()) - before)
    finally:
        await achain.aclose()
    return {
        kind: {
            "p50_ms": percentile(times[kind], 50) * 1000,
            "p90_ms": percentile(times[kind], 90) * 1000,
            "requests": sorted(set(requests[kind])),
        }
        for kind in times
    } | {"samples": samples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with AnvilProcess(find_anvil(start=ROOT)) as node:
        result = asyncio.run(main_async(node.url, args.samples))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"acquire + lease_of + release on anvil (automine), {result['samples']} samples each, alternating")
    print(f"  {'':<10} {'p50':>9} {'p90':>9}   requests per sample")
    for kind in ("sync", "asyncio"):
        r = result[kind]
        print(f"  {kind:<10} {r['p50_ms']:>7.1f}ms {r['p90_ms']:>7.1f}ms   {r['requests']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
