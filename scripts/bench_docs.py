#!/usr/bin/env python3
"""What building the documentation site costs: the suite's own build, timed.

    .venv/bin/python scripts/bench_docs.py                # 3 builds
    .venv/bin/python scripts/bench_docs.py --builds 5 --json

Each build is the one the suite runs (``tests/integration/test_docs_site.py``): ``python -m sphinx -W
--keep-going -E -q -b html docs OUT``, from scratch (``-E``) into a temporary directory. Prints each build's
CPU time (user + system of the sphinx process) and wall time, then the medians. Issue 27 asked for a
build within about 60 s of CPU; the suite builds the site and prints its figures, but asserts no time
(on a loaded machine the same build took 15 to 71 s of CPU): this script is where the figure is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def build(source: Path, out: Path) -> dict:
    """``sphinx -W --keep-going -b html`` of ``source`` into ``out``: its exit code, output and CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=900,  # a safety net for a build that hangs, not a budget
        cwd=source,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "returncode": done.returncode,
        "stderr": done.stderr,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "wall": time.monotonic() - started,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--builds", type=int, default=3, help="how many builds (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    if args.builds < 1:
        parser.error("--builds must be at least 1")
    records = []
    for i in range(args.builds):
        with tempfile.TemporaryDirectory() as out:
            record = build(DOCS, Path(out))
        if record["returncode"] != 0:
            print(record["stderr"][-4000:], file=sys.stderr)
            print(f"build {i + 1} failed (exit {record['returncode']})", file=sys.stderr)
            return 1
        records.append({"cpu": round(record["cpu"], 2), "wall": round(record["wall"], 2)})
        if not args.json:
            print(f"build {i + 1}: {record['cpu']:.1f} s CPU, {record['wall']:.1f} s wall", flush=True)
    cpu = statistics.median(r["cpu"] for r in records)
    wall = statistics.median(r["wall"] for r in records)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"builds": records, "cpu_median": cpu, "wall_median": wall, "load": load}))
    else:
        print(f"median of {len(records)}: {cpu:.1f} s CPU, {wall:.1f} s wall (load average {load:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
