#!/usr/bin/env python3
"""How often a waiter that loses a handover still sends an acquisition that is mined and reverts (it pays gas).

    python scripts/bench_wait_race.py                      # 8 waiters, 10 rounds, each way of running them
    python scripts/bench_wait_race.py --waiters 8 --rounds 20 --ways shared,processes --json

On a fresh anvil (automine by default: a block per transaction, a
transaction mined the moment it arrives; ``--block-time 1``: a block a
second, the transactions of a second in one block) a holder takes
``jobs/race``; ``--waiters`` accounts then call ``acquire(name, ttl,
wait=60)`` and, once every one of them is waiting (it has read the lease
held and sleeps between polls), the holder releases. Whoever wins holds the
lease for a moment, releases it and leaves; the others keep waiting. A round
is ``--waiters`` handovers (8 competitors for the first, 1 for the last).

What is counted: every acquisition a waiter *sent* that was mined with
status 0 (a revert with ``FencingRegistryLeaseHeld``: it cost the loser
gas), attributed to the handover it lost. A loser whose preflight
(``eth_estimateGas`` at the pending block) saw the winner's lease sends
nothing and is not counted: that is the behaviour wanted.

Ways of running the waiters (``--ways``):

- ``shared``: threads of one process sharing one ``Chain`` (the usual way to
  run several agents of one process: ``registry.connect(account)``);
- ``separate``: threads of one process, each with a ``Chain`` of its own
  (nothing shared in the SDK: as far as the SDK knows, separate processes);
- ``processes``: one OS process per waiter.

Figures: handovers with at least one reverted acquisition, out of all, and
the reverted acquisitions in total.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, Registry, Timeouts
from chainfence._sdk import waiting as _waiting
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

ROOT = Path(__file__).resolve().parent.parent
NAME = "jobs/race"
POLL = 0.005
HOLD = 0.02  # seconds a winner holds the lease before releasing it


class _Announcing(_waiting.Timer):
    """The SDK's own timer (real clock, sleep, jitter) that says when its waiter first sleeps."""

    def __init__(self, waiting: Any) -> None:
        self.waiting = waiting

    def sleep(self, seconds: float) -> None:
        self.waiting.set()
        super().sleep(seconds)


def _wait_once(registry: Registry, waiting: Any) -> tuple[int, int]:
    """One waiter: wait for the lease, hold it a moment, release it; (token, block)."""
    registry._wait_timer = _Announcing(waiting)
    lease = registry.acquire(NAME, ttl=600, wait=60)
    time.sleep(HOLD)
    lease.release()
    return lease.token, lease.block_number


def _process_waiter(url: str, key: str, address: str, waiting: Any, results: Any) -> None:
    registry = Registry.at(Chain.connect(url, private_key=key, timeouts=Timeouts(poll=POLL)), address)
    results.put(_wait_once(registry, waiting))


def _round(url: str, way: str, keys: list[str], holder: Registry, address: str, shared: Chain) -> None:
    held = holder.acquire(NAME, ttl=600)
    if way == "processes":
        context = multiprocessing.get_context("spawn")
        events = [context.Event() for _ in keys]
        results = context.Queue()
        workers: list[Any] = [
            context.Process(target=_process_waiter, args=(url, key, address, event, results))
            for key, event in zip(keys, events, strict=True)
        ]
    else:
        events = [threading.Event() for _ in keys]
        workers = []
        for key, event in zip(keys, events, strict=True):
            if way == "shared":
                registry = Registry.at(shared, address).connect(shared.add_account(key))
            else:
                registry = Registry.at(Chain.connect(url, private_key=key, timeouts=Timeouts(poll=POLL)), address)
            workers.append(threading.Thread(target=_wait_once, args=(registry, event)))
    for worker in workers:
        worker.start()
    for event in events:
        if not event.wait(120):
            raise RuntimeError("a waiter never started waiting")
    held.release()
    for worker in workers:
        worker.join(120)


def _reverted_acquisitions(
    chain: Chain, address: str, first: int, last: int, acquire_selector: bytes, release_selector: bytes
) -> list[int]:
    """Per handover (a release of the registry's lease, in block order): the acquisitions mined after it
    (before the next release) that reverted."""
    per_handover: list[int] = []
    for number in range(first, last + 1):
        block = chain.w3.eth.get_block(number, full_transactions=True)
        for tx in block["transactions"]:
            if tx["to"] is None or tx["to"].lower() != address.lower():
                continue
            selector = bytes(tx["input"][:4])
            status = chain.w3.eth.get_transaction_receipt(tx["hash"])["status"]
            if selector == release_selector and status == 1:
                per_handover.append(0)
            elif selector == acquire_selector and status == 0 and per_handover:
                per_handover[-1] += 1
    return per_handover


def run(url: str, way: str, waiters: int, rounds: int) -> dict[str, Any]:
    from chainfence._node import artifacts as _artifacts

    keys = dev_keys(waiters + 1)
    holder_chain = Chain.connect(url, private_key=keys[0], timeouts=Timeouts(poll=POLL))
    registry = Registry.deploy(holder_chain, max_ttl=3_600)
    shared = Chain.connect(url, private_key=keys[0], timeouts=Timeouts(poll=POLL))
    first = holder_chain.block_number() + 1
    for i in range(rounds):
        _round(url, way, keys[1:], registry, registry.address, shared)
        print(f"  {way} round {i + 1}/{rounds}", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    functions = _artifacts.functions("FencingRegistry")
    per_handover = _reverted_acquisitions(
        holder_chain,
        registry.address,
        first,
        holder_chain.block_number(),
        functions["acquire"][0],
        functions["release"][0],
    )
    # The last release of each round hands over to nobody: only the releases that were followed by a waiter count.
    handovers = [count for index, count in enumerate(per_handover) if index % (waiters + 1) != waiters]
    return {
        "way": way,
        "waiters": waiters,
        "rounds": rounds,
        "handovers": len(handovers),
        "handovers_with_a_revert": sum(1 for count in handovers if count),
        "reverted_acquisitions": sum(handovers),
        "per_round": [sum(1 for count in handovers[r * waiters : (r + 1) * waiters] if count) for r in range(rounds)],
        "poll_s": _waiting.pace(holder_chain).poll,
        "jitter_max_s": _waiting.pace(holder_chain).jitter,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiters", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--ways", default="shared,separate,processes")
    parser.add_argument("--block-time", type=float, default=0, help="anvil --block-time (default 0: automine)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.waiters <= 9:
        parser.error("--waiters: 1 to 9 (anvil's dev accounts, one is the first holder)")
    results = []
    anvil = find_anvil(start=ROOT)
    for way in args.ways.split(","):
        extra = ("--block-time", f"{args.block_time:g}") if args.block_time else ()
        with AnvilProcess(anvil, extra_args=extra) as node:
            results.append(run(node.url, way, args.waiters, args.rounds))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    mining = f"--block-time {args.block_time:g}" if args.block_time else "automine"
    print(
        f"anvil, {mining}: {args.waiters} waiters, {args.rounds} rounds of {args.waiters} handovers each way "
        f"(waiters poll every {results[0]['poll_s'] * 1000:.0f} ms, random pause up to "
        f"{results[0]['jitter_max_s'] * 1000:.0f} ms)"
    )
    print(f"  {'waiters':<36} {'handovers with a revert':>24} {'reverted acquisitions':>22}   per round")
    labels = {
        "shared": "threads sharing one Chain",
        "separate": "threads, a Chain each",
        "processes": "one process each",
    }
    for r in results:
        share = f"{r['handovers_with_a_revert']}/{r['handovers']}"
        print(f"  {labels[r['way']]:<36} {share:>24} {r['reverted_acquisitions']:>22}   {r['per_round']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
