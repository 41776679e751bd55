#!/usr/bin/env python3
"""What one poll of a guard's follower costs with the completeness check, beside the follower before it, in one run.

    python scripts/bench_follower.py                  # anvil from node_modules (npm @foundry-rs/anvil)
    python scripts/bench_follower.py --samples 100 --json
    python scripts/bench_follower.py --modes          # the check's two modes side by side: bloom, receipts

Two ``follow`` guards follow one anvil, each over its own connection and store: *before* is the
follower as it was before issue 20's completeness check (it trusted the ``eth_getLogs`` answer
and read only the page's last block, for the hash it records), *after* is today's (a header per
block of the page, in one batch, checked against the answer: ``logsBloom``, and the block's
receipts where the bloom says the answer may lack a log). Each sample makes the chain move one
way, then runs one ``sync()`` of each guard, alternating which goes first, and records the time
and the JSON-RPC round trips (a batch is one) of each. Shapes:

- ``idle``: no new block;
- ``acquired``: one new block with one acquisition (an event the follower reads);
- ``renewed``: one new block with one renewal only (an event it does not read: its topic in the
  bloom puts no block in doubt, since the follower does not ask for renewals);
- ``ten_blocks``: ten new blocks, an acquisition in each (a follower that polls less often than
  blocks come);
- ``held`` (after only): one new block whose logs the answer lacks (the log backend lags): the
  block's receipts are read and the sync stops before it.

With ``--proven``, the same with ``headers=`` (a quorum of three endpoints, all this anvil):
before, the page's logs vouched for and proven; after, also the page's headers linked by their
parent hashes to the vouched one.

With ``--modes``, the two followers are both today's, one per mode of the completeness check
(``Guard(completeness=...)``): *bloom* reads a block's receipts only where its bloom puts it in
doubt, *receipts* reads the receipts of every block whose bloom may hold an event the follower
reads (those of a page in one batch). ``held`` is then measured for both.

Medians and ratios; the machine is shared, so read them as one run's, with its load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

from chainfence.guard import Follow

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence._node import completeness
from chainfence.errors import LogsIncomplete
from chainfence.proofs import QuorumHeaders
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

ROOT = Path(__file__).resolve().parent.parent


def legacy_check(self, first, last, logs, kinds):
    """The follower before the check: the answer taken whole; one block read, the last, for its hash."""
    if self._proven is not None:
        found = {"hash": self._proven.headers.at(last).hash}
    else:
        block = self._registry.chain.rpc.block(last)
        found = {"hash": bytes(block["hash"])}
    return completeness.Checked(first, last, last, list(logs), None, None, {last: found})


class Counted:
    """Round trips of one chain's transport (a request or a batch: one each), and of its header source's
    providers (each provider's request: one each)."""

    def __init__(self, chain: Chain):
        transport = chain.rpc.transport
        self.headers: QuorumHeaders | None = None
        self._trips = 0
        request, batch = transport.request, transport.batch

        def counted_request(*args, **kwargs):
            self._trips += 1
            return request(*args, **kwargs)

        def counted_batch(*args, **kwargs):
            self._trips += 1
            return batch(*args, **kwargs)

        transport.request, transport.batch = counted_request, counted_batch

    @property
    def trips(self) -> int:
        return self._trips + (self.headers.requests() if self.headers is not None else 0)

    def add(self, n: int) -> None:
        self._trips += n


def follow_guard(
    url: str, address: str, path: str, *, legacy: bool, proven: bool, clock, completeness: str | None = None
) -> tuple[Guard, Counted]:
    chain = Chain.connect(url, timeouts=Timeouts(poll=0.005))
    counted = Counted(chain)
    headers = QuorumHeaders([url, url, url], clock=clock, max_age=3_600) if proven else None
    counted.headers = headers
    if legacy:
        completeness = "bloom"  # the legacy check replaces the check whatever its mode
    guard = Guard(
        Registry.at(chain, address), path, mode=Follow(interval=3_600, completeness=completeness, headers=headers)
    )
    if legacy:
        guard._follower._check = types.MethodType(legacy_check, guard._follower)
    guard.sync()
    return guard, counted


def timed_sync(guard: Guard, counted: Counted) -> tuple[float, int, bool]:
    trips = counted.trips
    start = time.perf_counter()
    held = False
    try:
        guard.sync()
    except LogsIncomplete:
        held = True
    return (time.perf_counter() - start) * 1_000, counted.trips - trips, held


#: The two followers compared: (label, the follower before the check, the completeness mode).
BEFORE_AFTER = (("before", True, None), ("after", False, None))
MODES = (("bloom", False, "bloom"), ("receipts", False, "receipts"))


def run(node_url: str, samples: int, proven: bool, pair=BEFORE_AFTER) -> dict:
    chain = Chain.connect(node_url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.005))
    registry = Registry.deploy(chain, max_ttl=3_600)
    alice = registry.connect(chain.accounts[1])
    renewing = alice.acquire("bench/renewed", ttl=3_600)
    counter = [0]

    def acquire_one():
        counter[0] += 1
        alice.acquire(f"bench/{counter[0]}", ttl=3_600)

    shapes = {
        "idle": lambda: None,
        "acquired": acquire_one,
        "renewed": lambda: renewing.renew(),
        "ten_blocks": lambda: [acquire_one() for _ in range(10)],
    }
    (first, _, _), (second, _, _) = pair
    results: dict = {"pair": [first, second]}
    with tempfile.TemporaryDirectory() as directory:
        followers = {
            label: follow_guard(
                node_url,
                registry.address,
                os.path.join(directory, f"{label}.sqlite"),
                legacy=legacy,
                proven=proven,
                clock=chain.now,
                completeness=mode,
            )
            for label, legacy, mode in pair
        }
        for shape, move in shapes.items():
            times: dict[str, list[float]] = {first: [], second: []}
            trips: dict[str, list[int]] = {first: [], second: []}
            for i in range(samples):
                move()
                order = [(label, *followers[label]) for label in (first, second)]
                if i % 2:
                    order.reverse()
                for name, guard, counted in order:
                    ms, n, held = timed_sync(guard, counted)
                    assert not held, f"{name} held on an honest node"
                    times[name].append(ms)
                    trips[name].append(n)
            a, b = statistics.median(times[first]), statistics.median(times[second])
            results[shape] = {
                f"{first}_ms_p50": round(a, 3),
                f"{second}_ms_p50": round(b, 3),
                "ratio": round(b / a, 3),
                f"{first}_round_trips": statistics.median(trips[first]),
                f"{second}_round_trips": statistics.median(trips[second]),
            }
        # A log backend that lags: the checking follower(s) read the block's receipts and hold (before: passes).
        held_by = [label for label, legacy, _mode in pair if not legacy]
        held_times: dict[str, list[float]] = {label: [] for label in held_by}
        held_trips: dict[str, list[int]] = {label: [] for label in held_by}
        real = {label: followers[label][0].registry.chain.rpc.transport.request for label in held_by}

        def lagging(label):
            counted, request = followers[label][1], real[label]

            def answer(method, params, *args, **kwargs):
                if method == "eth_getLogs":
                    counted.add(1)  # answered by the lagging backend: a round trip all the same
                    return []
                return request(method, params, *args, **kwargs)

            return answer

        for label in held_by:
            followers[label][0].registry.chain.rpc.transport.request = lagging(label)
        for i in range(samples):
            acquire_one()
            for label in held_by if i % 2 == 0 else reversed(held_by):
                ms, n, held = timed_sync(*followers[label])
                assert held
                held_times[label].append(ms)
                held_trips[label].append(n)
        for label in held_by:
            followers[label][0].registry.chain.rpc.transport.request = real[label]
        results["held"] = {}
        for label in held_by:
            results["held"][f"{label}_ms_p50"] = round(statistics.median(held_times[label]), 3)
            results["held"][f"{label}_round_trips"] = statistics.median(held_trips[label])
        for guard, _counted in followers.values():
            guard.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200, help="polls per shape and follower")
    parser.add_argument("--proven", action="store_true", help="followers with a header source (3 endpoints)")
    parser.add_argument(
        "--modes",
        action="store_true",
        help="compare the completeness check's modes (bloom, receipts), not before/after",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    pair = MODES if args.modes else BEFORE_AFTER
    with AnvilProcess(find_anvil(start=ROOT)) as node:
        results = {"proven" if args.proven else "plain": run(node.url, args.samples, args.proven, pair)}
    results["load_average"] = [round(x, 2) for x in os.getloadavg()]
    results["load_average_at_start"] = [round(x, 2) for x in load]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for kind, shapes in results.items():
        if kind.startswith("load_average"):
            continue
        a, b = shapes.pop("pair")
        print(
            f"{kind} follower, per poll (median of {args.samples}; load average at start "
            f"{results['load_average_at_start']}, at the end {results['load_average']}):"
        )
        print(f"  {'shape':<11} {a + ' ms':>12} {b + ' ms':>12} {'ratio':>6} {'trips ' + a:>15} {b:>9}")
        for shape, r in shapes.items():
            cell = {key: f"{value}" for key, value in r.items()}
            print(
                f"  {shape:<11} {cell.get(f'{a}_ms_p50', '-'):>12} {cell.get(f'{b}_ms_p50', '-'):>12} "
                f"{cell.get('ratio', '-'):>6} {cell.get(f'{a}_round_trips', '-'):>15} "
                f"{cell.get(f'{b}_round_trips', '-'):>9}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
