#!/usr/bin/env python3
"""Latency from a release to the waiter's token on anvil, beside a plain acquisition sent right after the release.

    python scripts/bench_wait.py                    # 40 samples of each, automine, then 12 of each at --block-time 1
    python scripts/bench_wait.py --samples 100 --block-samples 0 --json

On a fresh anvil started here (from the project's node_modules), alice holds
a resource and releases it; the time measured is from the moment alice's
``release()`` returned (its receipt in hand) to the moment the other
account's acquisition returned (its receipt in hand). Samples alternate:

- ``wait``: bob is already inside ``acquire(name, ttl, wait=60)`` (it has
  read the lease held and is between two polls) when alice releases, after
  a random delay of up to two poll intervals, so the release falls anywhere
  in bob's polling cycle;
- ``baseline``: bob sends a plain ``acquire(name, ttl)`` as soon as alice's
  release returned (what a waiter that learned of the release instantly
  would do): the floor, one acquisition round trip.

Figures: p50 and p90 of each in milliseconds, and the blocks between the
release and the acquisition (1 = the very next block). The first run uses
anvil's default automine (a block per transaction); the second a node that
mines a block every second (``--block-time 1``), the case "within about one
block" is about.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, Registry, Timeouts
from chainfence._node import events as _events
from chainfence._sdk import waiting as _waiting
from chainfence._sdk.validate import resource_id
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

POLL = 0.005
ROOT = Path(__file__).resolve().parent.parent
NAME = "jobs/bench-wait"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class _Announcing(_waiting.Timer):
    """The SDK's own timer (real clock, real sleep, real jitter) that says when the waiter first sleeps."""

    def __init__(self) -> None:
        self.waiting = threading.Event()

    def sleep(self, seconds: float) -> None:
        self.waiting.set()
        super().sleep(seconds)


def release_block(chain: Chain, registry: Registry, since: int) -> int:
    (event,) = _events.fetch_all(
        chain,
        registry.address,
        kinds=[_events.Kind.RELEASED],
        resource_id=resource_id(NAME),
        from_block=since,
        to_block=chain.block_number(),
    )
    return event.block_number


def run(url: str, samples: int, tag: str) -> dict[str, object]:
    keys = dev_keys(3)
    deployer = Chain.connect(url, private_key=keys[0], timeouts=Timeouts(poll=POLL))
    registry = Registry.deploy(deployer, max_ttl=3_600)
    alice = Registry.at(Chain.connect(url, private_key=keys[1], timeouts=Timeouts(poll=POLL)), registry.address)
    bob_chain = Chain.connect(url, private_key=keys[2], timeouts=Timeouts(poll=POLL))
    bob = Registry.at(bob_chain, registry.address)
    poll = _waiting.pace(bob_chain).poll
    figures: dict[str, dict[str, list[float]]] = {
        "wait": {"ms": [], "blocks": []},
        "baseline": {"ms": [], "blocks": []},
    }
    for i in range(2 * samples):
        kind = ("wait", "baseline")[(i + (i // 2)) % 2]  # wait, baseline, baseline, wait, ...: neither always first
        held = alice.acquire(NAME, ttl=600)
        since = held.block_number
        got: dict[str, object] = {}
        if kind == "wait":
            timer = _Announcing()
            bob._wait_timer = timer

            def waiter() -> None:
                got["lease"] = bob.acquire(NAME, ttl=600, wait=60)
                got["at"] = time.perf_counter()

            thread = threading.Thread(target=waiter)
            thread.start()
            if not timer.waiting.wait(60):
                raise RuntimeError("the waiter never started waiting")
            time.sleep(random.uniform(0, 2 * poll))  # anywhere in the waiter's polling cycle
            held.release()
            released_at = time.perf_counter()
            thread.join(60)
        else:
            held.release()
            released_at = time.perf_counter()
            got["lease"] = bob.acquire(NAME, ttl=600)
            got["at"] = time.perf_counter()
        lease = got["lease"]
        assert lease.previous_token == held.token, (lease, held)
        figures[kind]["ms"].append((got["at"] - released_at) * 1_000)
        figures[kind]["blocks"].append(lease.block_number - release_block(bob_chain, registry, since))
        lease.release()
        print(f"  {tag} {i + 1}/{2 * samples}", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    result: dict[str, object] = {"samples": samples, "poll_s": poll, "jitter_max_s": _waiting.pace(bob_chain).jitter}
    for kind, values in figures.items():
        result[kind] = {
            "p50_ms": round(statistics.median(values["ms"]), 1),
            "p90_ms": round(percentile(values["ms"], 90), 1),
            "p50_blocks": statistics.median(values["blocks"]),
            "p90_blocks": percentile(values["blocks"], 90),
            "max_blocks": max(values["blocks"]),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=40, help="samples of each kind, automine (default 40)")
    parser.add_argument(
        "--block-samples", type=int, default=12, help="samples of each kind at --block-time 1 (default 12)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    results: dict[str, object] = {}
    anvil = find_anvil(start=ROOT)
    if args.samples:
        with AnvilProcess(anvil) as node:
            results["automine"] = run(node.url, args.samples, "automine")
    if args.block_samples:
        with AnvilProcess(anvil, extra_args=("--block-time", "1")) as node:
            results["block_time_1s"] = run(node.url, args.block_samples, "block-time 1s")

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for label, key in (("anvil, automine", "automine"), ("anvil, --block-time 1", "block_time_1s")):
        if key not in results:
            continue
        r = results[key]
        print(
            f"release receipt -> acquisition receipt, {label}: {r['samples']} samples each, alternating "
            f"(waiter polls every {r['poll_s'] * 1000:.0f} ms, random pause up to {r['jitter_max_s'] * 1000:.0f} ms)"
        )
        print(f"  {'':<32} {'p50':>9} {'p90':>9}   {'blocks p50':>10} {'p90':>4} {'max':>4}")
        for kind, text in (
            ("wait", "acquire(wait=60), already waiting"),
            ("baseline", "plain acquire after the release"),
        ):
            f = r[kind]
            print(
                f"  {text:<32} {f['p50_ms']:>7.1f}ms {f['p90_ms']:>7.1f}ms   {f['p50_blocks']:>10g} "
                f"{f['p90_blocks']:>4g} {f['max_blocks']:>4g}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
