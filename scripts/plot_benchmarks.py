#!/usr/bin/env python3
"""The plots of docs/benchmarks.md, drawn from the benchmarks' own JSON output (docs/benchmarks/data/).

    python scripts/plot_benchmarks.py                 # writes docs/benchmarks/*.png
    python scripts/plot_benchmarks.py --out /tmp/p    # elsewhere

Each plot reads one file that a benchmark script wrote with ``--json``; refresh a file by running the
command recorded beside it in docs/benchmarks.md, then this script:

- ``latency-growth.png``: an acquisition's p50 latency through the run, window by window, as the chain grows
  (``scripts/bench_vs_etcd.py --json``: ``windows_p50_ms``), the SDK over IPC beside etcd's lock and the floor;
- ``throughput-agents.png``: acquisitions per second of a fleet against its number of agents, group commit
  (threads and asyncio tasks) beside etcd's lock with as many threads (``scripts/bench_group_commit.py --json``);
- ``gas-batch.png``: gas per acquisition and per renewal in a ``batchCalls`` of n items, from
  ``scripts/gas_report.py --json``'s measured 1-item batch and each extra item, beside a lone call's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "benchmarks" / "data"
OUT = ROOT / "docs" / "benchmarks"


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    return figure, axes


def _save(figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})  # no version stamp: the same data draws the same file
    import matplotlib.pyplot as plt

    plt.close(figure)
    return path


def latency_growth(data: dict[str, Any], out: Path) -> Path:
    latency = data["latency"]
    windows = latency["windows_p50_ms"]
    count = len(next(iter(windows.values())))
    blocks = latency["blocks"]
    x = [round(blocks * (i + 0.5) / count) for i in range(count)]
    figure, axes = _figure(
        "Acquisition latency as the chain grows (p50 of each tenth of the run)", "blocks into the run", "ms"
    )
    for key, label in (
        ("sdk_ipc_acquire", "chainfence SDK, IPC"),
        ("etcd_acquire", "etcd lease + txn lock"),
        ("floor_ipc_acquire", "anvil floor (pre-signed send, IPC)"),
    ):
        axes.plot(x, windows[key], marker="o", label=label)
    axes.set_ylim(bottom=0)
    load = data.get("load_average_before", [None])[0]
    axes.legend(title=f"load average {load:.1f} at the start" if load is not None else None)
    return _save(figure, out / "latency-growth.png")


def throughput_agents(data: dict[str, Any], out: Path) -> Path:
    """``bench_group_commit.py --json``: per node, per fleet size, per kind, the runs' acquisitions per second."""
    import statistics

    node = data["nodes"]["chainfence"] if "chainfence" in data["nodes"] else next(iter(data["nodes"].values()))
    series: dict[str, dict[int, float]] = {}
    for agents, runs in node["fleets"].items():
        for kind, rows in runs.items():
            series.setdefault(kind, {})[int(agents)] = statistics.median(row["per_second"] for row in rows)
    figure, axes = _figure(
        "Throughput against the number of agents in one process", "agents", "acquire + release cycles / s"
    )
    labels = {
        "sdk-threads": "chainfence, group commit, threads",
        "sdk-tasks": "chainfence, group commit, asyncio tasks",
        "sdk-lone": "chainfence, a transaction per call",
        "etcd": "etcd lease + txn lock, threads",
    }
    for kind, points in sorted(series.items()):
        agents = sorted(points)
        axes.plot(agents, [points[a] for a in agents], marker="o", label=labels.get(kind, kind))
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(next(iter(series.values()))), [str(a) for a in sorted(next(iter(series.values())))])
    axes.set_ylim(bottom=0)
    axes.legend(title=f"load average {data['load_before'][0]:.1f} at the start")
    return _save(figure, out / "throughput-agents.png")


def batch_gas(gas: dict[str, int], n: int, kind: str) -> float:
    """Gas per item of a ``batchCalls`` of ``n`` items of ``kind``, from the measured 1-item batch and the
    measured gas of each extra item (gas_report measures 1 and 64 items and takes the difference)."""
    one = gas[f"batchCalls: 1 {kind}"]
    each = gas[f"batchCalls: each extra {kind}"]
    return (one + (n - 1) * each) / n


def gas_batch(gas: dict[str, int], out: Path) -> Path:
    sizes = [1, 2, 4, 8, 16, 32, 64]
    figure, axes = _figure("Gas per item in a group-commit batch", "items in the batch", "gas per item")
    for kind, lone, label in (
        ("acquisition (held before, after release)", "acquire (held before, after release)", "acquisition"),
        ("renewal", "renew", "renewal"),
    ):
        line = axes.plot(sizes, [batch_gas(gas, n, kind) for n in sizes], marker="o", label=f"{label} in a batch")
        axes.axhline(gas[lone], linestyle="--", color=line[0].get_color(), label=f"{label} alone")
    measured = gas["batchCalls: per acquisition, batch of 64 (held before, after release)"]
    axes.plot([64], [measured], marker="x", color="black", linestyle="none", label="measured batch of 64")
    axes.set_xscale("log", base=2)
    axes.set_xticks(sizes, [str(n) for n in sizes])
    axes.set_ylim(bottom=0)
    axes.legend()
    return _save(figure, out / "gas-batch.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help=f"the JSON files (default {DATA})")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the PNG files go (default {OUT})")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    def read(name: str) -> Any:
        return json.loads((args.data / name).read_text(encoding="utf-8"))

    written = [
        latency_growth(read("bench_vs_etcd.json"), args.out),
        throughput_agents(read("bench_group_commit.json"), args.out),
        gas_batch(read("gas_report.json"), args.out),
    ]
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
