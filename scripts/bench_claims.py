#!/usr/bin/env python3
"""Work-item claims per second with 8 agents on anvil, beside plain acquisitions of distinct names.

    python scripts/bench_claims.py                  # defaults: 8 agents, 120 items a round, 4 rounds
    python scripts/bench_claims.py --items 200 --json

In one run, on one fresh anvil (from the project's node_modules), in
alternating rounds (anvil slows down as its chain grows, so running one
kind first would favour it):

- claims: 8 agent threads, one key each, loop ``registry.workset(workset).claim(
  items, ttl)`` -> ``lease.complete(result)`` until ``claim`` returns None:
  claims per second, completed items per second, and the agents' claims
  that found nothing (their preflight saw every item taken). Agents list the
  items in the same order: concurrent claims of the same first free item
  do not collide, the later transaction takes the next free item;
- baseline: the same agents ``acquire`` distinct names and ``complete`` them
  (no scanning, nothing to contend for).

Each claim scans the items in order, so the later claims of a round also
pay for the done items they skip (a cold storage read and a hash each):
the gas figures per claim are printed too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, Registry, Timeouts
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

POLL = 0.005
ROOT = Path(__file__).resolve().parent.parent


def claims_round(url: str, address: str, agents: int, count: int, tag: str) -> dict[str, float]:
    keys = dev_keys(agents + 1)[1:]
    chain = Chain.connect(url, private_keys=keys, timeouts=Timeouts(poll=POLL))
    registries = [Registry.at(chain, address).connect(chain.accounts[i]) for i in range(agents)]
    items = [f"item-{i:04d}" for i in range(count)]
    workset = f"bench/{tag}"
    gas: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> tuple[int, int]:
        claimed = nothing = 0
        while True:
            lease = registries[i].workset(workset).claim(items, ttl=600)
            if lease is None:
                nothing += 1
                return claimed, nothing
            used = chain.rpc.receipt(lease.tx_hash)["gasUsed"]
            with lock:
                gas.append(used)
            lease.complete(b"done")
            claimed += 1

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=agents) as pool:
        results = list(pool.map(work, range(agents)))
    elapsed = time.perf_counter() - start
    claimed = sum(r[0] for r in results)
    assert claimed == count, f"{claimed} claims for {count} items"
    return {
        "items": count,
        "seconds": elapsed,
        "claims_per_second": claimed / elapsed,
        "gas_first_claim": min(gas),
        "gas_median_claim": int(statistics.median(gas)),
        "gas_last_claim": max(gas),
    }


def baseline_round(url: str, address: str, agents: int, count: int, tag: str) -> dict[str, float]:
    keys = dev_keys(agents + 1)[1:]
    chain = Chain.connect(url, private_keys=keys, timeouts=Timeouts(poll=POLL))
    registries = [Registry.at(chain, address).connect(chain.accounts[i]) for i in range(agents)]
    counter = iter(range(count))
    lock = threading.Lock()

    def work(i: int) -> int:
        done = 0
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return done
            registries[i].acquire(f"bench/{tag}/{n}", ttl=600).complete(b"done")
            done += 1

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=agents) as pool:
        done = sum(pool.map(work, range(agents)))
    elapsed = time.perf_counter() - start
    assert done == count
    return {"items": count, "seconds": elapsed, "acquisitions_per_second": count / elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--items", type=int, default=120, help="items per round (at most 512)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each kind, alternating (default 4)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    results: dict[str, list[dict[str, float]]] = {"claims": [], "baseline": []}
    with AnvilProcess(find_anvil(start=ROOT), accounts=max(10, args.agents + 2)) as node:
        deployer = Chain.connect(node.url, private_key=dev_keys(1)[0], timeouts=Timeouts(poll=POLL))
        registry = Registry.deploy(deployer, max_ttl=3_600)
        for round_ in range(args.rounds):
            kinds = [("claims", claims_round), ("baseline", baseline_round)]
            for kind, run in kinds[:: 1 if round_ % 2 == 0 else -1]:
                results[kind].append(run(node.url, registry.address, args.agents, args.items, f"{kind}/{round_}"))

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    claims = [r["claims_per_second"] for r in results["claims"]]
    base = [r["acquisitions_per_second"] for r in results["baseline"]]
    print(
        f"{args.agents} agents (threads, one key each) on anvil, {args.items} items a round, {args.rounds} rounds each, alternating"
    )
    print(
        f"  claim -> complete      {statistics.median(claims):6.1f} claims/s      (rounds: {', '.join(f'{c:.1f}' for c in claims)})"
    )
    print(
        f"  acquire -> complete    {statistics.median(base):6.1f} acquisitions/s (rounds: {', '.join(f'{b:.1f}' for b in base)})"
    )
    first = results["claims"][0]
    print(
        f"  claim gas: {first['gas_first_claim']:,} (first item) .. median {first['gas_median_claim']:,} .. "
        f"{first['gas_last_claim']:,} (last item, after {args.items - 1} done ones)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
