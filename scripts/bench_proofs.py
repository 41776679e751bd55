#!/usr/bin/env python3
"""A proven check's cost beside a strict check's: p50 latency and JSON-RPC requests, on anvil.

    python scripts/bench_proofs.py                  # 200 samples of each configuration
    python scripts/bench_proofs.py --samples 50 --json

On a fresh anvil started here (one registry, one live lease), each sample is
one check of the live token, configurations interleaved so they see the same
machine load:

- ``strict``: ``Registry.check_current`` (one round trip: ``eth_call`` batched
  with the pending block);
- ``proven`` with ``TrustedHeaders`` (1 provider) and ``QuorumHeaders`` (3
  providers, k=2), each three ways:

  - ``cold``: the header source's cache emptied before every check (the
    heads, the header, its hash verified, then the proof; connections stay
    open, as in a running service);
  - ``cached``: one header source; its header for the block is cached (the
    heads are still asked every check, the header is not verified again);
  - ``handed``: the header handed to ``check(..., header=h)`` (one verified
    header serving every check at that block: the proof alone);

  each with ``confirmations`` 0 (the heads are the header) and 2 (one more
  request per provider, cold only);
- the same through a guard: ``Guard(mode="strict")`` beside
  ``Guard(mode="proven", headers=...)`` with 1 and 3 providers, cold and
  cached (a check at the mark: the guard proves it every time, as strict
  mode asks every time; its store read and bookkeeping included).

The three "providers" are three connections to the same anvil (the point is
the requests and their verification, not network distance; over the
internet each round trip costs the provider's latency, and the heads are
asked in parallel). Requests are counted by the proven mode's endpoints;
strict mode's by a wrapper on its RPC layer (a batch counts as one round
trip, its two calls as two requests).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from chainfence.guard import Proven

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_vs_etcd

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence.proofs import ProvenReader, QuorumHeaders, TrustedHeaders
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

ROOT = Path(__file__).resolve().parent.parent
NAME = "reports/daily"


def p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def run(url: str, samples: int) -> dict[str, dict[str, float]]:
    chain = Chain.connect(url, private_keys=dev_keys(2), timeouts=Timeouts(poll=0.005))
    registry = Registry.deploy(chain, max_ttl=3_600)
    lease = registry.connect(chain.accounts[1]).acquire(NAME, ttl=3_600)
    token = lease.token
    chain.mine(5)  # confirmations=2 then proves a block after the acquisition (anvil's genesis proofs do not verify)

    trips = {"n": 0, "requests": 0}
    real = chain.rpc.call_and_pending_timestamp

    def counted(*args, **kwargs):
        trips["n"] += 1
        trips["requests"] += 2
        return real(*args, **kwargs)

    chain.rpc.call_and_pending_timestamp = counted

    def source(n: int, confirmations: int):
        urls = [url] * n
        if n == 1:
            return TrustedHeaders(url, confirmations=confirmations, clock=chain.now, max_age=3_600)
        return QuorumHeaders(urls, k=2, confirmations=confirmations, clock=chain.now, max_age=3_600)

    configs: dict[str, dict] = {}
    readers = {}
    for n in (1, 3):
        for confirmations in (0, 2):
            for how in ("cold", "cached", "handed"):
                reader = ProvenReader(registry.address, headers=source(n, confirmations), provider=url)
                reader.check(NAME, token)  # its one-time "do you serve eth_getProof?", and a warm connection
                readers[(n, confirmations, how)] = reader

    # No block is mined while the benchmark runs (reads only): one verified header serves it all.
    handed = {key: reader.headers.current() for key, reader in readers.items() if key[2] == "handed"}

    def strict():
        before = trips["n"], trips["requests"]
        registry.check_current(NAME, token)
        return trips["n"] - before[0], trips["requests"] - before[1]

    def proven(n: int, confirmations: int, how: str):
        reader = readers[(n, confirmations, how)]
        if how == "cold":
            reader.headers._cache.clear()  # nothing verified yet: heads, header, hash, proof
        header = handed[(n, confirmations, how)] if how == "handed" else None
        before = reader.headers.requests() + reader.endpoint.requests
        reader.check(NAME, token, header=header)
        used = reader.headers.requests() + reader.endpoint.requests - before
        return used, used

    tmp = bench_vs_etcd.scratch_dir("bench-proofs-")
    strict_guard = Guard(registry, tmp / "strict.sqlite", mode="strict")
    strict_guard.check(NAME, token)
    proven_guards = {}
    for n in (1, 3):
        for how in ("cold", "cached"):
            guard = Guard(registry, tmp / f"proven-{n}-{how}.sqlite", mode=Proven(headers=source(n, 0), proofs=url))
            guard.check(NAME, token)  # the mark, the reader's probe, warm connections
            proven_guards[(n, how)] = guard

    def guard_strict():
        before = trips["n"], trips["requests"]
        strict_guard.check(NAME, token)
        return trips["n"] - before[0], trips["requests"] - before[1]

    def guard_proven(n: int, how: str):
        guard = proven_guards[(n, how)]
        reader = guard._reader
        if how == "cold":
            reader.headers._cache.clear()
        before = reader.headers.requests() + reader.endpoint.requests
        guard.check(NAME, token)
        used = reader.headers.requests() + reader.endpoint.requests - before
        return used, used

    plans = {"strict": strict}
    for n in (1, 3):
        for confirmations in (0, 2):
            for how in ("cold", "cached", "handed"):
                if confirmations == 2 and how != "cold":
                    continue
                label = f"proven {n} provider{'s' if n > 1 else ''} conf={confirmations} {how}"
                plans[label] = lambda n=n, c=confirmations, h=how: proven(n, c, h)
    plans["guard strict"] = guard_strict
    for n in (1, 3):
        for how in ("cold", "cached"):
            plans[f"guard proven {n} provider{'s' if n > 1 else ''} {how}"] = lambda n=n, h=how: guard_proven(n, h)
    times: dict[str, list[float]] = {label: [] for label in plans}
    requests: dict[str, int] = {}
    for _ in range(samples):
        for label, plan in plans.items():
            start = time.perf_counter()
            trips_used, used = plan()
            times[label].append((time.perf_counter() - start) * 1000)
            requests[label] = used
            configs.setdefault(label, {})["round_trips"] = trips_used
    for label in plans:
        configs[label]["p50_ms"] = round(p50(times[label]), 2)
        configs[label]["requests"] = requests[label]
    for guard in [strict_guard, *proven_guards.values()]:
        guard.close()
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with AnvilProcess(find_anvil(start=ROOT)) as node:
        configs = run(node.url, args.samples)
    if args.json:
        print(json.dumps(configs, indent=1))
        return
    print(f"checks of a live token on anvil, {args.samples} samples each (p50 ms, JSON-RPC requests)")
    for label, figures in configs.items():
        base = "guard strict" if label.startswith("guard") else "strict"
        ratio = "" if label == base else f"  x{figures['p50_ms'] / configs[base]['p50_ms']:.1f} {base}"
        print(f"  {label:38} {figures['p50_ms']:7.2f} ms  {figures['requests']} requests{ratio}")


if __name__ == "__main__":
    main()
