#!/usr/bin/env python3
"""Group commit for fleets: N agents in one process, SDK batched beside etcd's lock with as many threads, in one run.

    python scripts/bench_group_commit.py                    # 8 and 64 agents, 3 alternating rounds, both nodes
    python scripts/bench_group_commit.py --agents 8 --cycles 40 --rounds 5 --node anvil --json

Needs ``etcd`` on PATH (``scripts/bench.sh`` installs it: Debian's etcd-server; or an etcd 3.4+ binary from
https://github.com/etcd-io/etcd/releases) and this checkout's anvil (``scripts/test.sh`` installs it into
node_modules; ``npm ci`` does too). Both run on free loopback ports, their data in temporary directories.

Nodes (``--node``, repeatable; default both, one after the other, each with etcd beside it):

- **chainfence**: the node ``chainfence node`` starts (``python -m chainfence node --json`` in a temporary
  directory: anvil with its settings, its registry), reached over HTTP;
- **anvil**: plain ``anvil`` with its defaults (automine), the registry deployed on it, over HTTP.

Each agent works on a resource of its own and loops ``cycles`` times: acquire it (ttl 60 s), release it.
Before the clock starts, every agent of every kind does one cycle (the fleet is running: connections open,
the SDK's nonce, fee and max-ttl caches filled; etcd's connections open): the figures are a running
fleet's, not its start's. Throughput is acquisitions (lock + unlock cycles) per second of the whole fleet:

- **sdk-threads**: N threads sharing one account's ``registry.batched()`` (``Chain.connect`` with its
  defaults: typed errors, the never-twice sender, confirmations 0 on a dev chain);
- **sdk-tasks**: N asyncio tasks sharing ``AsyncRegistry.batched()``;
- **etcd**: N threads, each its own keep-alive HTTP connection to etcd 3.4's JSON gateway, the usual
  lock: ``lease/grant`` + ``kv/txn`` (put if absent, on the lease), then ``kv/deleterange`` +
  ``lease/revoke``;
- **sdk-lone** (``--with-lone``, a reference): N threads sharing one account, each call its own
  transaction. Off by default: it mines a block per call (2 x N x cycles), and anvil slows as its chain
  grows (docs/benchmarks.md, "An acquisition on a local node, beside etcd"), so it would slow every run after it.

The kinds alternate within a round, in rotating order, so that none always runs first on a loaded
machine. Latency per agent: p50 and p99 of its acquisitions, in ms; in blocks: how many transactions
each batched operation waited for, its own included (``Batcher.waited``: 1 = the next one, 2 = one was
in flight), and the worst agent's p99 over the mean time between two of the batcher's transactions (a
block's worth on an automining node: one transaction, one block; the run's time over the batcher's
transactions). With 30 cycles an agent's p99 is its slowest acquisition, and the worst agent's is the
slowest of the run. "gc ms": the longest pause of Python's cyclic garbage collector (generation 1 or 2)
during the timed run: every thread and task of the process stops for it, so one that falls in a run shows
in that run's p99. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = Path(os.environ.get("CHAINFENCE_SRC") or ROOT / "src")
sys.path.insert(0, str(SRC))

TTL = 60

_spec = importlib.util.spec_from_file_location("bench_vs_etcd", ROOT / "scripts" / "bench_vs_etcd.py")
_etcd = importlib.util.module_from_spec(_spec)  # etcd's process and lock: one copy, bench_vs_etcd.py's
_spec.loader.exec_module(_etcd)


#: (start, seconds) of each collection of generation 1 or 2 (perf_counter): every thread stops for it.
_COLLECTIONS: list[tuple[float, float]] = []
_collecting: dict[str, float] = {}


def _gc_watch(phase: str, info: dict) -> None:
    if info.get("generation", 0) < 1:
        return
    if phase == "start":
        _collecting["at"] = time.perf_counter()
    elif "at" in _collecting:
        start = _collecting.pop("at")
        _COLLECTIONS.append((start, time.perf_counter() - start))


gc.callbacks.append(_gc_watch)


#: ``--gc-freeze``: freeze the heap (``gc.freeze()``) after each warm-up, as a latency-sensitive service does
#: once it started; the collector then walks only what was made since.
FREEZE = False


def timed_run_begins() -> None:
    """Called once every agent is warmed up, just before the clock starts."""
    if FREEZE:
        gc.collect()
        gc.freeze()


def longest_collection(start: float, end: float) -> float:
    """The longest generation-1/2 collection (ms) that began in [start, end]."""
    return max((seconds * 1e3 for at, seconds in _COLLECTIONS if start <= at <= end), default=0.0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def fleet_figures(kind: str, agents: int, cycles: int, start: float, end: float, per_agent: list[list[float]]) -> dict:
    elapsed = end - start
    p50s = [statistics.median(times) * 1e3 for times in per_agent]
    p99s = [percentile(times, 99) * 1e3 for times in per_agent]
    return {
        "kind": kind,
        "agents": agents,
        "acquisitions": agents * cycles,
        "gc_ms": longest_collection(start, end),
        "seconds": elapsed,
        "per_second": agents * cycles / elapsed,
        "agent_p50_ms_median": statistics.median(p50s),
        "agent_p50_ms_worst": max(p50s),
        "agent_p99_ms_worst": max(p99s),
        "all_p99_ms": percentile([t for times in per_agent for t in times], 99) * 1e3,
    }


def with_batcher(figures: dict, batcher: Any, before: dict, batches_before: int, ops_before: int) -> dict:
    batches = batcher.batches - batches_before
    waited = {n: batcher.waited.get(n, 0) - before.get(n, 0) for n in batcher.waited}
    waited = {n: count for n, count in waited.items() if count}
    block_ms = figures["seconds"] * 1e3 / batches if batches else float("nan")
    figures.update(
        {
            "transactions": batches,
            "operations_per_transaction": (batcher.operations - ops_before) / batches if batches else 0,
            "block_ms": block_ms,
            "waited_transactions": waited,
            "worst_waited": max(waited) if waited else 0,
            "agent_p50_blocks_worst": figures["agent_p50_ms_worst"] / block_ms,
            "agent_p99_blocks_worst": figures["agent_p99_ms_worst"] / block_ms,
        }
    )
    return figures


def sdk_threads(url: str, key: str, address: str, agents: int, cycles: int, tag: str, *, lone: bool = False) -> dict:
    from chainfence import Chain, Registry

    chain = Chain.connect(url, private_key=key)
    registry = Registry.at(chain, address)
    batcher = registry.batched()
    per_agent: list[list[float]] = [[] for _ in range(agents)]
    ready = threading.Barrier(agents + 1)
    go = threading.Event()

    def agent(i: int) -> None:
        name = f"gc/{tag}/{i}"
        if lone:  # the warm-up cycle: the fleet is running before the clock starts
            registry.release(name, registry.acquire(name, ttl=TTL).token)
        else:
            batcher.acquire(name, ttl=TTL).release()
        ready.wait()
        go.wait()
        for _ in range(cycles):
            start = time.perf_counter()
            if lone:
                lease = registry.acquire(name, ttl=TTL)
                per_agent[i].append(time.perf_counter() - start)
                registry.release(name, lease.token)
            else:
                lease = batcher.acquire(name, ttl=TTL)
                per_agent[i].append(time.perf_counter() - start)
                lease.release()

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(agents)]
    for thread in threads:
        thread.start()
    ready.wait()
    timed_run_begins()
    waited, batches, operations = batcher.waited, batcher.batches, batcher.operations
    start = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join()
    figures = fleet_figures(
        "sdk-lone" if lone else "sdk-threads", agents, cycles, start, time.perf_counter(), per_agent
    )
    if not lone:
        with_batcher(figures, batcher, waited, batches, operations)
    chain.rpc.close()
    return figures


def sdk_tasks(url: str, key: str, address: str, agents: int, cycles: int, tag: str) -> dict:
    from chainfence.aio import AsyncChain, AsyncRegistry

    async def main() -> dict:
        async with await AsyncChain.connect(url, private_key=key) as chain:
            batcher = (await AsyncRegistry.at(chain, address)).batched()
            core = batcher.batcher
            per_agent: list[list[float]] = [[] for _ in range(agents)]
            go = asyncio.Event()

            async def agent(i: int) -> None:
                name = f"gc/{tag}/{i}"
                await (await batcher.acquire(name, ttl=TTL)).release()  # the warm-up cycle
                warm.append(i)
                if len(warm) == agents:
                    all_warm.set()
                await go.wait()
                for _ in range(cycles):
                    start = time.perf_counter()
                    lease = await batcher.acquire(name, ttl=TTL)
                    per_agent[i].append(time.perf_counter() - start)
                    await lease.release()

            warm: list[int] = []
            all_warm = asyncio.Event()
            tasks = [asyncio.ensure_future(agent(i)) for i in range(agents)]
            await all_warm.wait()
            timed_run_begins()
            waited, batches, operations = core.waited, core.batches, core.operations
            start = time.perf_counter()
            go.set()
            await asyncio.gather(*tasks)
            figures = fleet_figures("sdk-tasks", agents, cycles, start, time.perf_counter(), per_agent)
            return with_batcher(figures, core, waited, batches, operations)

    return asyncio.run(main())


def etcd_threads(port: int, agents: int, cycles: int, tag: str) -> dict:
    locks = [_etcd.EtcdLock(port) for _ in range(agents)]
    per_agent: list[list[float]] = [[] for _ in range(agents)]
    ready = threading.Barrier(agents + 1)

    go = threading.Event()

    def agent(i: int) -> None:
        name = f"gc/{tag}/{i}"
        locks[i].release(name, locks[i].acquire(name))  # the warm-up cycle
        ready.wait()
        go.wait()
        for _ in range(cycles):
            start = time.perf_counter()
            lease = locks[i].acquire(name)
            per_agent[i].append(time.perf_counter() - start)
            locks[i].release(name, lease)

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(agents)]
    for thread in threads:
        thread.start()
    ready.wait()
    timed_run_begins()
    start = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join()
    return fleet_figures("etcd", agents, cycles, start, time.perf_counter(), per_agent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, action="append", help="fleet size (repeatable; default 8 and 64)")
    parser.add_argument("--cycles", type=int, default=30, help="acquire + release cycles per agent a run (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each kind once a round, rotating (default 3)")
    parser.add_argument(
        "--node",
        action="append",
        choices=["chainfence", "anvil"],
        help="the node (repeatable; default both): `chainfence node`'s, or plain anvil automine",
    )
    parser.add_argument("--with-lone", action="store_true", help="also run the unbatched SDK (a block per call)")
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() after each warm-up (every kind alike): the collector's pauses without the startup heap",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    fleets = args.agents or [8, 64]
    nodes = args.node or ["chainfence", "anvil"]
    global FREEZE
    FREEZE = args.gc_freeze

    if shutil.which("etcd") is None:
        print(
            "etcd is not installed: `scripts/bench.sh` installs it (Debian's etcd-server), or put an etcd 3.4+ binary on "
            "PATH (https://github.com/etcd-io/etcd/releases)",
            file=sys.stderr,
        )
        return 2
    from chainfence import Chain, Registry
    from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

    etcd = _etcd.Etcd()
    results: dict[str, Any] = {"etcd_version": etcd.version, "load_before": os.getloadavg(), "nodes": {}}
    try:
        for node_kind in nodes:
            if node_kind == "anvil":
                process: Any = AnvilProcess(find_anvil(start=ROOT), accounts=4).start()
                url, keys = process.url, dev_keys(4)
                deployer = Chain.connect(url, private_key=keys[0])
                address = Registry.deploy(deployer, max_ttl=3_600).address
            else:
                process = _etcd.Node()
                url, keys, address = process.url, process.keys, process.info["registry"]
                deployer = Chain.connect(url, private_key=keys[0])
            try:
                ran: dict[str, Any] = {"client": deployer.rpc.client_version(), "fleets": {}}
                for agents in fleets:
                    kinds = ["sdk-threads", "sdk-tasks", "etcd"] + (["sdk-lone"] if args.with_lone else [])
                    runs: dict[str, list[dict]] = {kind: [] for kind in kinds}
                    for round_ in range(args.rounds):
                        order = kinds[round_ % len(kinds) :] + kinds[: round_ % len(kinds)]
                        for kind in order:
                            tag = f"{node_kind}/{agents}/{kind}/{round_}"
                            if kind == "etcd":
                                figures = etcd_threads(etcd.port, agents, args.cycles, tag)
                            elif kind == "sdk-tasks":
                                figures = sdk_tasks(url, keys[2], address, agents, args.cycles, tag)
                            else:
                                figures = sdk_threads(
                                    url,
                                    keys[1] if kind == "sdk-threads" else keys[3],
                                    address,
                                    agents,
                                    args.cycles,
                                    tag,
                                    lone=kind == "sdk-lone",
                                )
                            runs[kind].append(figures)
                    ran["fleets"][str(agents)] = runs
                ran["blocks"] = deployer.rpc.block_number()
                results["nodes"][node_kind] = ran
            finally:
                deployer.rpc.close()
                if node_kind == "chainfence":
                    process.close()
                else:
                    process.stop()
    finally:
        etcd.close()
    results["load_after"] = os.getloadavg()

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    load = lambda loads: ", ".join(f"{value:.2f}" for value in loads)  # noqa: E731 - a one-line format
    print(
        f"etcd {results['etcd_version']}; {args.rounds} alternating rounds, {args.cycles} acquire+release cycles "
        f"per agent a run, each agent warmed up by one cycle first; garbage collector "
        f"{'frozen after each warm-up (--gc-freeze)' if FREEZE else 'as Python sets it'}; load average "
        f"{load(results['load_before'])} before, {load(results['load_after'])} after"
    )
    for node_kind, ran in results["nodes"].items():
        name = "the node `chainfence node` starts" if node_kind == "chainfence" else "plain anvil (automine)"
        print(f"\n== {name}: {ran['client']}, over HTTP; chain at block {ran['blocks']} after")
        for agents, runs in ran["fleets"].items():
            print(f"\n{agents} agents, each on a resource of its own (medians over rounds):")
            etcd_rate = statistics.median(r["per_second"] for r in runs["etcd"])
            print(
                f"  {'':<12} {'acq/s':>8} {'vs etcd':>8} {'agent p50':>10} {'worst p99':>10} {'blk ms':>7} "
                f"{'p50 blks':>8} {'p99 blks':>8} {'max p99':>7} {'waited':>6} {'ops/tx':>6} {'gc ms':>6}"
            )
            for kind, rows in runs.items():
                rate = statistics.median(r["per_second"] for r in rows)
                p50 = statistics.median(r["agent_p50_ms_median"] for r in rows)
                p99 = statistics.median(r["agent_p99_ms_worst"] for r in rows)
                line = f"  {kind:<12} {rate:>8.0f} {rate / etcd_rate:>7.2f}x {p50:>8.2f}ms {p99:>8.2f}ms"
                if "block_ms" in rows[0]:
                    block = statistics.median(r["block_ms"] for r in rows)
                    p50_blocks = statistics.median(r["agent_p50_blocks_worst"] for r in rows)
                    blocks = statistics.median(r["agent_p99_blocks_worst"] for r in rows)
                    most = max(r["agent_p99_blocks_worst"] for r in rows)
                    worst = max(r["worst_waited"] for r in rows)
                    per_tx = statistics.median(r["operations_per_transaction"] for r in rows)
                    line += f" {block:>6.2f} {p50_blocks:>8.2f} {blocks:>8.2f} {most:>7.2f} {worst:>6} {per_tx:>6.1f}"
                else:
                    line += " " * 59
                gcs = max(r["gc_ms"] for r in rows)
                line += f" {gcs:>6.1f}"
                print(line + "   runs: " + ", ".join(f"{r['per_second']:.0f}" for r in rows))
            print(
                "  goal: sdk batched >= 2x etcd; no agent's latency worse than 2 blocks' worth (p99 blks <= 2)\n"
                "  blk ms: the run's time over the batcher's transactions (a block's worth: one transaction, one "
                "block); p50/p99 blks: the worst agent's p50/p99 in those (median over rounds; max p99: the worst "
                "round's); waited: the most transactions any operation waited for (Batcher.waited); gc ms: the "
                "longest collection of generation 1/2 in any round's timed run"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
