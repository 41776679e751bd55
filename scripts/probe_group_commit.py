#!/usr/bin/env python3
"""Where a batched acquisition's time goes: each operation's phases, timed inside the batcher.

    python scripts/probe_group_commit.py                    # 64 threads, 30 cycles, plain anvil
    python scripts/probe_group_commit.py --agents 8 --cycles 60 --tasks

Agents as in ``scripts/bench_group_commit.py`` (each on a resource of its own: acquire, release, again;
one warm-up cycle first). The batcher's own methods are wrapped to stamp each operation as it is queued
(``_enqueue``), taken into a batch (``_take``), read from the receipt (``_outcomes``) and settled, and its
caller when the call returns. Printed: each phase's p50/p99/max; how many transactions each operation
waited for (``Batcher.waited``); the worker's waits for the callers of a settled transaction (and how many
ran out); Python's collector pauses; and for every acquisition slower than 2 blocks' worth (the run's time
over its transactions), its phases. A diagnostic, not a benchmark: the wrappers cost time of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(os.environ.get("CHAINFENCE_SRC") or ROOT / "src")))

from chainfence import Chain, Registry, batching
from chainfence._core.effects import Signal
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

clock = time.perf_counter
STAMPS: dict[int, dict[str, float]] = {}  # id(op) -> phase -> time (ops are kept alive in KEPT)
KEPT: list[Any] = []
BATCHES: list[dict[str, Any]] = []
COHORT_WAITS: list[tuple[float, bool]] = []  # (seconds, ran out)
PAUSES: list[tuple[int, float]] = []


def instrument() -> None:
    enqueue, take, outcomes, settle = (
        batching.Batcher._enqueue,
        batching.Batcher._take,
        batching.Batcher._outcomes,
        batching.Batcher._settle,
    )

    def stamped_enqueue(self: Any, op: Any) -> bool:
        KEPT.append(op)
        STAMPS[id(op)] = {"queued": clock()}
        return enqueue(self, op)  # type: ignore[no-any-return]

    def stamped_take(self: Any) -> list[Any]:
        batch = take(self)
        now = clock()
        for op in batch:
            STAMPS.setdefault(id(op), {})["taken"] = now
        if batch:
            BATCHES.append({"taken": now, "ops": batch})
        return batch  # type: ignore[no-any-return]

    def stamped_outcomes(self: Any, batch: list[Any], receipt: Any) -> Any:
        now = clock()
        for op in batch:
            STAMPS.setdefault(id(op), {})["receipt"] = now
        return outcomes(self, batch, receipt)

    def stamped_settle(self: Any, ops: list[Any], results: list[Any]) -> Any:
        now = clock()
        for op in ops:
            STAMPS.setdefault(id(op), {})["settled"] = now
        return settle(self, ops, results)

    wait, wait_async = Signal.wait, Signal.wait_async

    def timed_wait(signal: Signal, timeout: float | None = None) -> Any:
        if timeout is None:
            return wait(signal)
        start = clock()
        try:
            value = wait(signal, timeout)
        except TimeoutError:
            COHORT_WAITS.append((clock() - start, True))
            raise
        COHORT_WAITS.append((clock() - start, False))
        return value

    async def timed_wait_async(signal: Signal, timeout: float | None = None) -> Any:
        if timeout is None:
            return await wait_async(signal)
        start = clock()
        try:
            value = await wait_async(signal, timeout)
        except TimeoutError:
            COHORT_WAITS.append((clock() - start, True))
            raise
        COHORT_WAITS.append((clock() - start, False))
        return value

    batching.Batcher._enqueue = stamped_enqueue  # type: ignore[method-assign]
    batching.Batcher._take = stamped_take  # type: ignore[method-assign]
    batching.Batcher._outcomes = stamped_outcomes  # type: ignore[method-assign]
    batching.Batcher._settle = stamped_settle  # type: ignore[method-assign]
    Signal.wait = timed_wait  # type: ignore[method-assign]
    Signal.wait_async = timed_wait_async  # type: ignore[method-assign]
    started: dict[str, float] = {}

    def collector(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started["at"] = clock()
        elif "at" in started:
            PAUSES.append((info["generation"], clock() - started.pop("at")))

    gc.callbacks.append(collector)


def threads_fleet(batcher: Any, agents: int, cycles: int) -> tuple[list[tuple[Any, float, float]], float, float]:
    calls: list[tuple[Any, float, float]] = []  # (lease, called, returned)
    ready, go = threading.Barrier(agents + 1), threading.Event()

    def agent(i: int) -> None:
        batcher.acquire(f"probe/{i}", ttl=60).release()
        ready.wait()
        go.wait()
        for _ in range(cycles):
            called = clock()
            lease = batcher.acquire(f"probe/{i}", ttl=60)
            calls.append((lease, called, clock()))
            lease.release()

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(agents)]
    for thread in threads:
        thread.start()
    ready.wait()
    start = clock()
    go.set()
    for thread in threads:
        thread.join()
    return calls, start, clock()


def tasks_fleet(url: str, key: str, address: str, agents: int, cycles: int) -> tuple[Any, float, float, Any]:
    from chainfence.aio import AsyncChain, AsyncRegistry

    async def main() -> tuple[Any, float, float, Any]:
        async with await AsyncChain.connect(url, private_key=key) as chain:
            batcher = (await AsyncRegistry.at(chain, address)).batched()
            calls: list[tuple[Any, float, float]] = []
            warm, go = asyncio.Event(), asyncio.Event()
            count = [0]

            async def agent(i: int) -> None:
                await (await batcher.acquire(f"probe/{i}", ttl=60)).release()
                count[0] += 1
                if count[0] == agents:
                    warm.set()
                await go.wait()
                for _ in range(cycles):
                    called = clock()
                    lease = await batcher.acquire(f"probe/{i}", ttl=60)
                    calls.append((lease, called, clock()))
                    await lease.release()

            tasks = [asyncio.ensure_future(agent(i)) for i in range(agents)]
            await warm.wait()
            before = (batcher.batches, dict(batcher.waited))
            start = clock()
            go.set()
            await asyncio.gather(*tasks)
            return calls, start, clock(), (batcher.batcher, before)

    return asyncio.run(main())


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    if not ordered:
        return "-"
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1e3:7.2f}  p99 {p99 * 1e3:7.2f}  max {ordered[-1] * 1e3:7.2f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--tasks", action="store_true", help="asyncio tasks instead of threads")
    args = parser.parse_args(argv)
    instrument()
    with AnvilProcess(find_anvil(start=ROOT), accounts=4) as node:
        keys = dev_keys(4)
        address = Registry.deploy(Chain.connect(node.url, private_key=keys[0]), max_ttl=3_600).address
        if args.tasks:
            calls, start, end, (core, (batches, waited)) = tasks_fleet(
                node.url, keys[1], address, args.agents, args.cycles
            )
        else:
            core = Registry.at(Chain.connect(node.url, private_key=keys[1]), address).batched()
            batches, waited = core.batches, dict(core.waited)
            STAMPS.clear()
            calls, start, end = threads_fleet(core, args.agents, args.cycles)
    transactions = core.batches - batches
    block = (end - start) / transactions
    grew = {n: core.waited.get(n, 0) - waited.get(n, 0) for n in core.waited}
    by_token = {}
    for op in KEPT:
        stamps = STAMPS.get(id(op), {})
        if op.outcome is not None and hasattr(op.outcome[0], "token"):
            by_token[op.outcome[0].token] = stamps
    phases: dict[str, list[float]] = {
        "call->queued": [],
        "queued->taken": [],
        "taken->receipt": [],
        "receipt->settled": [],
        "settled->returned": [],
    }
    slow = []
    for lease, called, returned in calls:
        stamps = by_token.get(lease.token)
        if not stamps or "settled" not in stamps:
            continue
        parts = {
            "call->queued": stamps["queued"] - called,
            "queued->taken": stamps["taken"] - stamps["queued"],
            "taken->receipt": stamps["receipt"] - stamps["taken"],
            "receipt->settled": stamps["settled"] - stamps["receipt"],
            "settled->returned": returned - stamps["settled"],
        }
        for name, value in parts.items():
            phases[name].append(value)
        if returned - called > 2 * block:
            slow.append((returned - called, parts))
    latencies = [returned - called for _lease, called, returned in calls]
    face = "tasks" if args.tasks else "threads"
    print(
        f"{args.agents} {face}, {args.cycles} cycles: {len(calls) / (end - start):.0f} acquisitions/s, "
        f"{transactions} transactions, a block's worth {block * 1e3:.2f} ms, "
        f"{core.operations and (2 * len(calls)) / transactions:.1f} operations a transaction; load average "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    print(
        f"  acquisition        {spread(latencies)}   (in blocks: p50 {statistics.median(latencies) / block:.2f}, "
        f"max {max(latencies) / block:.2f})"
    )
    for name, values in phases.items():
        print(f"  {name:<18} {spread(values)}")
    print(f"  waited (transactions: operations) {dict(sorted((n, c) for n, c in grew.items() if c))}")
    outs = sum(1 for _s, out in COHORT_WAITS if out)
    print(
        f"  the worker's waits for the callers just settled: {len(COHORT_WAITS)}, {outs} ran out; "
        f"{spread([s for s, _o in COHORT_WAITS])}"
    )
    counts = Counter(generation for generation, _s in PAUSES)
    longest = {g: max(s for gg, s in PAUSES if gg == g) * 1e3 for g in counts}
    print(
        f"  collector pauses by generation: {dict(counts)}; longest (ms): "
        + ", ".join(f"gen{g} {ms:.1f}" for g, ms in sorted(longest.items()))
    )
    print(f"  {len(slow)} of {len(calls)} acquisitions slower than 2 blocks' worth")
    for total, parts in sorted(slow, key=lambda item: -item[0])[:10]:
        print(f"    {total * 1e3:7.2f} ms: " + ", ".join(f"{name} {value * 1e3:.2f}" for name, value in parts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
