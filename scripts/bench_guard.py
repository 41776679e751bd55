#!/usr/bin/env python3
"""Guard checks per second, beside the bare operation each one is built on, in one run.

    python scripts/bench_guard.py                 # anvil from node_modules; ~30 s
    python scripts/bench_guard.py --json

1. ``mark`` checks of the current token, a guard that owns its store
   (``exclusive=True``: a dict lookup), beside a bare dict-and-lock check;
2. ``mark`` checks when several processes share one store file (a SQLite
   point read each), beside a bare SQLite point SELECT by the same number of
   processes on the same file;
3. ``strict`` checks beside the raw JSON-RPC requests each one needs, through
   the same web3 provider: ``eth_call`` of the same view (``leaseOf``) and
   the pending block (the clock a lease is judged by); and beside the raw
   ``eth_call`` alone (what a strict check cost before it judged time);
4. holder-signed request verifications (``check_request``: digest, ecrecover,
   the mark, a durable replay record), beside ecrecover alone and beside the
   bare operations it is built on: ecrecover plus one durable SQLite insert
   (WAL, ``synchronous=FULL``: the fsync that makes a replay record survive a
   power cut), alternating with the guard in one run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from chainfence.guard import RequestPolicy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence._sdk.validate import resource_id
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

ROOT = Path(__file__).resolve().parent.parent
RESOURCE = "reports/daily"


def rate(fn, seconds: float) -> float:
    """Calls of ``fn`` per second over about ``seconds`` (fn runs a batch of 1,000)."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        done += 1_000
    return done / (time.perf_counter() - start)


def exclusive_vs_dict(registry: Registry, token: int, directory: str, seconds: float) -> dict[str, float]:
    with Guard(registry, path=os.path.join(directory, "owned.sqlite"), exclusive=True) as guard:
        guard.check(RESOURCE, token)
        check = guard.check

        def guarded():
            for _ in range(1_000):
                check(RESOURCE, token)

        lock, marks = threading.Lock(), {RESOURCE: token}

        def bare():
            for _ in range(1_000):
                with lock:
                    if marks.get(RESOURCE) != token:
                        raise AssertionError

        return {"guard_per_second": rate(guarded, seconds), "dict_and_lock_per_second": rate(bare, seconds)}


def _shared_worker(url: str, address: str, path: str, token: int, seconds: float, bare: bool, queue) -> None:
    if bare:
        conn = sqlite3.connect(path, isolation_level=None)
        rid = resource_id(RESOURCE)

        def batch():
            for _ in range(1_000):
                conn.execute("SELECT token FROM marks WHERE resource_id = ?", (rid,)).fetchone()

    else:
        guard = Guard(Registry.at(Chain.connect(url), address), path=path)
        check = guard.check

        def batch():
            for _ in range(1_000):
                check(RESOURCE, token)

    queue.put(rate(batch, seconds))


def shared_store(url: str, registry: Registry, token: int, directory: str, processes: int, seconds: float):
    path = os.path.join(directory, "shared.sqlite")
    with Guard(registry, path=path) as guard:
        guard.check(RESOURCE, token)
    context = multiprocessing.get_context("spawn")
    results = {}
    for bare in (False, True):
        queue = context.Queue()
        workers = [
            context.Process(target=_shared_worker, args=(url, registry.address, path, token, seconds, bare, queue))
            for _ in range(processes)
        ]
        for worker in workers:
            worker.start()
        rates = [queue.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join()
        key = "bare_select" if bare else "guard"
        results[f"{key}_total_per_second"] = sum(rates)
        results[f"{key}_per_process"] = [round(r) for r in rates]
    results["processes"] = processes
    return results


def strict_vs_eth_call(registry: Registry, token: int, directory: str, samples: int) -> dict[str, float]:
    chain = registry.chain
    data = registry._encode("leaseOf", [resource_id(RESOURCE)])
    call = {"to": registry.address, "data": data}
    with Guard(registry, path=os.path.join(directory, "strict.sqlite"), mode="strict") as guard:
        guard.check(RESOURCE, token)
        strict, raw, raw_call = [], [], []
        for _ in range(samples):  # alternating samples: the three see the same machine
            start = time.perf_counter()
            guard.check(RESOURCE, token)
            strict.append(time.perf_counter() - start)
            start = time.perf_counter()
            chain.w3.eth.call(call)
            chain.w3.eth.get_block("pending")
            raw.append(time.perf_counter() - start)
            start = time.perf_counter()
            chain.w3.eth.call(call)
            raw_call.append(time.perf_counter() - start)
    strict_median, raw_median, call_median = (statistics.median(x) for x in (strict, raw, raw_call))
    return {
        "strict_per_second": 1 / strict_median,
        "raw_call_and_clock_per_second": 1 / raw_median,
        "raw_eth_call_per_second": 1 / call_median,
        "strict_median_ms": strict_median * 1e3,
        "raw_call_and_clock_median_ms": raw_median * 1e3,
        "raw_eth_call_median_ms": call_median * 1e3,
        "overhead_pct": (strict_median / raw_median - 1) * 100,
    }


def signed_requests(registry: Registry, lease, directory: str, count: int) -> dict[str, float]:
    body = b'{"rows": 42}'
    action, audience = "POST /reports/daily", "reports-service"
    requests = [lease.sign(body, action=action, audience=audience, valid_for=600) for _ in range(count)]
    domain = registry.eip712_domain()
    bare = sqlite3.connect(os.path.join(directory, "bare.sqlite"), isolation_level=None)
    bare.execute("PRAGMA journal_mode = WAL")
    bare.execute("PRAGMA synchronous = FULL")
    bare.execute("CREATE TABLE seen (id BLOB PRIMARY KEY, deadline INTEGER NOT NULL) WITHOUT ROWID")
    guarded, baseline = [], []
    with Guard(
        registry, path=os.path.join(directory, "requests.sqlite"), requests=RequestPolicy(audience=audience)
    ) as guard:
        guard.check(RESOURCE, lease.token)
        for request in requests:  # alternating samples: both see the same machine and disk
            start = time.perf_counter()
            guard.check_request(request, body, action=action)
            guarded.append(time.perf_counter() - start)
            start = time.perf_counter()
            request.recover(domain)
            bare.execute("BEGIN IMMEDIATE")
            bare.execute("INSERT INTO seen VALUES (?, ?)", (request.signature[:32], request.deadline))
            bare.execute("COMMIT")
            baseline.append(time.perf_counter() - start)
    bare.close()
    start = time.perf_counter()
    for request in requests:
        request.recover(domain)
    recovered = count / (time.perf_counter() - start)
    guard_median, bare_median = statistics.median(guarded), statistics.median(baseline)
    return {
        "verifications_per_second": 1 / guard_median,
        "ecrecover_and_durable_insert_per_second": 1 / bare_median,
        "ecrecover_per_second": recovered,
        "overhead_pct": (guard_median / bare_median - 1) * 100,
        "requests": count,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput measurement")
    parser.add_argument("--processes", type=int, default=4, help="processes sharing one store")
    parser.add_argument("--samples", type=int, default=500, help="strict checks and eth_calls")
    parser.add_argument("--requests", type=int, default=500, help="signed requests to verify")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    with AnvilProcess(find_anvil(start=ROOT)) as node, tempfile.TemporaryDirectory() as directory:
        chain = Chain.connect(node.url, private_keys=dev_keys(2), timeouts=Timeouts(poll=0.005))
        registry = Registry.deploy(chain, max_ttl=3_600)
        lease = registry.connect(chain.accounts[1]).acquire(RESOURCE, ttl=3_600)
        results = {
            "mark_exclusive": exclusive_vs_dict(registry, lease.token, directory, args.seconds),
            "mark_shared_store": shared_store(node.url, registry, lease.token, directory, args.processes, args.seconds),
            "strict": strict_vs_eth_call(registry, lease.token, directory, args.samples),
            "signed_requests": signed_requests(registry, lease, directory, args.requests),
        }

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    ex, sh, st, rq = (results[k] for k in ("mark_exclusive", "mark_shared_store", "strict", "signed_requests"))
    print("guard checks of the current token, per second")
    print(
        f"  mark, exclusive store        {ex['guard_per_second']:>12,.0f}   bare dict+lock     {ex['dict_and_lock_per_second']:>12,.0f}"
    )
    print(
        f"  mark, {sh['processes']} processes, one file  {sh['guard_total_per_second']:>12,.0f}   "
        f"bare SQLite SELECT {sh['bare_select_total_per_second']:>12,.0f}   (per process: {sh['guard_per_process']} vs {sh['bare_select_per_process']})"
    )
    print(
        f"  strict                       {st['strict_per_second']:>12,.0f}   raw call + clock   {st['raw_call_and_clock_per_second']:>12,.0f}"
        f"   overhead {st['overhead_pct']:+.1f} % (medians {st['strict_median_ms']:.2f} vs {st['raw_call_and_clock_median_ms']:.2f} ms;"
        f" raw eth_call alone {st['raw_eth_call_median_ms']:.2f} ms)"
    )
    print(
        f"  signed-request verifications {rq['verifications_per_second']:>12,.0f}   ecrecover + durable insert {rq['ecrecover_and_durable_insert_per_second']:>8,.0f}"
        f"   overhead {rq['overhead_pct']:+.1f} % (ecrecover alone {rq['ecrecover_per_second']:,.0f}/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
