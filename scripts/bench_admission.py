#!/usr/bin/env python3
"""What an admission policy costs a guard's check at the mark, beside the same guard without one, in one run.

    python scripts/bench_admission.py            # embedded chain; ~10 s
    python scripts/bench_admission.py --json

Three ``mark`` guards of the same registry and holder, each checking the
current token at its mark: without admission, with ``Admission.local`` (a
set lookup) and with ``Admission.on_chain()`` (the namespace's answer cached
after the first check: no chain call at the mark). Each is measured on an
exclusive store (marks in memory) and on a shared one (a SQLite read per
check). Samples alternate between the three guards, round after round, so
that a machine's load falls on all of them alike; the figures are medians
of the per-round rates.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Admission, Chain, Guard, Registry

RESOURCE = "prod/db"
BATCH = 2_000


def checks_per_second(guard: Guard, token: int) -> float:
    check = guard.check
    start = time.perf_counter()
    for _ in range(BATCH):
        check(RESOURCE, token)
    return BATCH / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="alternating samples per guard")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    chain = Chain.embedded(accounts=3)
    registry = Registry.deploy(chain, namespaces={"prod": chain.accounts[1]})
    admin, holder = registry.connect(chain.accounts[1]), registry.connect(chain.accounts[2])
    admin.namespace("prod").set_policy(admission_required=True)
    admin.namespace("prod").admit([holder.sender])
    token = holder.acquire(RESOURCE, ttl=3_600).token
    policies = {"none": None, "local": Admission.local([holder.sender]), "on-chain": Admission.on_chain()}
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        for store in ("exclusive", "shared"):
            guards = {
                name: Guard(
                    registry,
                    path=f"{directory}/{store}-{name}.sqlite",
                    admission=policy,
                    exclusive=store == "exclusive",
                )
                for name, policy in policies.items()
            }
            try:
                for guard in guards.values():
                    guard.check(RESOURCE, token)  # the mark (and the on-chain answer, cached)
                samples: dict[str, list[float]] = {name: [] for name in guards}
                for _ in range(args.rounds):
                    for name, guard in guards.items():
                        samples[name].append(checks_per_second(guard, token))
            finally:
                for guard in guards.values():
                    guard.close()
            results[store] = {name: statistics.median(rates) for name, rates in samples.items()}

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"checks at the mark per second (median of {args.rounds} alternating rounds of {BATCH:,})")
    for store, rates in results.items():
        base = rates["none"]
        print(
            f"  {store:<9}  none {base:>10,.0f}   local {rates['local']:>10,.0f} ({rates['local'] / base - 1:+.1%})"
            f"   on-chain {rates['on-chain']:>10,.0f} ({rates['on-chain'] / base - 1:+.1%})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
