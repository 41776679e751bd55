#!/usr/bin/env python3
"""How long `chainfence --version` and `--help` take to answer, samples alternating in one run.

    .venv/bin/python scripts/bench_cli_start.py [--samples 30]

Each round runs, in turn: the bare interpreter (`python -c pass`, the floor),
`python -m chainfence --version`, `python -m chainfence --help`,
`python -m chainfence status --help`, and the same `--version` after importing
every public name first (what the package's eager ``__init__`` did before
issue 10: it imported web3). Prints p50, p90 and max wall time per command.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

EAGER = (
    "import chainfence, sys\n"
    "[getattr(chainfence, name) for name in chainfence.__all__]\n"
    "from chainfence.cli import main\n"
    "sys.exit(main(['--version']))\n"
)

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "chainfence --version": [sys.executable, "-m", "chainfence", "--version"],
    "chainfence --help": [sys.executable, "-m", "chainfence", "--help"],
    "chainfence status --help": [sys.executable, "-m", "chainfence", "status", "--help"],
    "--version, eager imports (before)": [sys.executable, "-c", EAGER],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():  # warm the page cache once
        subprocess.run(command, capture_output=True, check=True)
    for _ in range(args.samples):
        for name, command in COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(command, capture_output=True, check=True)
            times[name].append(time.perf_counter() - started)
    print(f"{'command':36} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8}   ({args.samples} samples each, alternating)")
    for name, samples in times.items():
        ordered = sorted(samples)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(f"{name:36} {statistics.median(samples) * 1000:8.1f} {p90 * 1000:8.1f} {ordered[-1] * 1000:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
