#!/usr/bin/env python3
"""What the SQLite fence's statement watch costs: fenced transactions with and without it.

    python scripts/bench_sql.py            # in-process chain, no node needed; ~20 s
    python scripts/bench_sql.py --json

A fenced transaction of 1 and of 100 small INSERTs (the same epoch, so no
chain call: what remains is SQLite and the fence), three ways:

- ``fenced``: ``fenced_transaction`` as shipped (authorizer + trace callback
  installed for the block);
- ``fenced, no watch``: the same with the two hooks left out (what the fence
  cost before it noticed statements that end its transaction);
- ``bare``: ``BEGIN IMMEDIATE``, the INSERTs, ``COMMIT``: no fence at all.

The database is a WAL file with ``synchronous = NORMAL`` (no fsync per
commit), so the figures are CPU, not disk. Each figure is the best of 25
short rounds in which the three take turns (the machine's other work only
ever adds time, and hits all three alike).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, Registry
from chainfence.integrations import sql

RESOURCE = "bench/rows"


class _NoWatch:
    """Stands in for the statement watch: installs nothing, never reports a break."""

    def __init__(self, conn: sqlite3.Connection):
        pass

    def stop(self) -> None:
        return None


def best_of(variants: dict[str, object], calls: int, rounds: int = 25) -> dict[str, float]:
    """Microseconds per call of each variant: the best of ``rounds`` rounds of ``calls`` calls, the
    variants taking turns within each round so that the machine's other work hits them alike."""
    best = {name: float("inf") for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            start = time.perf_counter()
            for _ in range(calls):
                run()
            best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e6)
    return best


class _Variant:
    """``fenced_transaction`` with the statement watch on or off."""

    def __init__(self, run, watch):
        self._run, self._watch = run, watch

    def __call__(self) -> None:
        installed = sql._SqliteWatch
        sql._SqliteWatch = self._watch
        try:
            self._run()
        finally:
            sql._SqliteWatch = installed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    chain = Chain.embedded()
    registry = Registry.deploy(chain, max_ttl=3_600)
    token = registry.connect(chain.accounts[1]).acquire(RESOURCE, ttl=3_600).token
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        conn = sqlite3.connect(Path(directory) / "bench.sqlite", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT)")
        with sql.fenced_transaction(conn, registry, RESOURCE, token):
            pass  # the new epoch: the only chain call; the rows below are the same epoch

        for inserts in (1, 100):

            def fenced(inserts=inserts):
                with sql.fenced_transaction(conn, registry, RESOURCE, token) as cur:
                    for _ in range(inserts):
                        cur.execute("INSERT INTO rows (body) VALUES (?)", ("x",))

            def bare(inserts=inserts):
                conn.execute("BEGIN IMMEDIATE")
                for _ in range(inserts):
                    conn.execute("INSERT INTO rows (body) VALUES (?)", ("x",))
                conn.execute("COMMIT")

            best = best_of(
                {"fenced": _Variant(fenced, sql._SqliteWatch), "no_watch": _Variant(fenced, _NoWatch), "bare": bare},
                calls=max(1, 200 // inserts),
            )
            results[f"{inserts} insert" + ("s" if inserts > 1 else "")] = {
                "fenced_us": round(best["fenced"], 1),
                "fenced_no_watch_us": round(best["no_watch"], 1),
                "bare_us": round(best["bare"], 1),
                "watch_overhead_us": round(best["fenced"] - best["no_watch"], 1),
            }
        conn.close()

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'per transaction (µs, best of 25)':<36}{'fenced':>10}{'no watch':>10}{'bare':>10}{'watch costs':>13}")
    for name, row in results.items():
        print(
            f"{name:<36}{row['fenced_us']:>10}{row['fenced_no_watch_us']:>10}{row['bare_us']:>10}"
            f"{row['watch_overhead_us']:>13}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
