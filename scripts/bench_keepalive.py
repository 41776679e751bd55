#!/usr/bin/env python3
"""What keeping leases alive costs: gas and renewals per kept lease-hour, measured on a chain.

    python scripts/bench_keepalive.py                      # embedded chain, every scenario, ttl 30 and 300
    python scripts/bench_keepalive.py --backend anvil --json
    python scripts/bench_keepalive.py --scenario fleet --ttl 30 --hours 0.5 --schedule margin

Each scenario runs under each renewal schedule asked for (``--schedule``, default both):
``half`` renews every half ttl (``lease.keep()``'s default), ``margin`` as late as the
chain's confirmation time allows (``lease.keep(schedule="margin")``).

Three scenarios, each on a registry of its own:

- ``lone``: one agent keeps one lease (``lease.keep()``), each renewal a transaction of its own;
- ``fleet``: 64 agents of one process, each keeping one lease, through group commit
  (``registry.batched()``: the leases renew and release through the batcher);
- ``agent16``: one agent keeps 16 leases, each with its own ``lease.keep()``.

The real keep-alive runs: each lease's :class:`~chainfence.keepalive.Keeper` thread
decides when to renew, and renews through the SDK's send path. Time is simulated,
not waited for: the keep-alives' clock is injected, and the script moves it from
one renewal due to the next, moving the chain's clock with it through the dev
controls (``advance_time``: the chain is never behind the clock), and at each step
waits until every renewer has acted on the new reading with no renewal in flight.
The embedded chain stamps each transaction a second after the last, so there the
chain runs ahead of the clock by a second a transaction: expiries later than the
keep-alives count on, which only makes a lapse less likely; the lapse check below
holds either way. The figures are counted, not timed: every transaction the agents' account
sent during the kept hours and its ``gasUsed`` (from its receipt), and every
``LeaseRenewed`` event the registry logged. Gas per kept lease-hour is that gas
over the leases and the hours; nothing is computed from a formula.

The script also checks what it measures: no lease lapsed (``check()`` at every step,
each still current at the end), and every transaction of the agents was a renewal.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, Registry
from chainfence._node import events as _events

ROOT = Path(__file__).resolve().parent.parent

#: scenario -> (leases, through group commit)
SCENARIOS = {"lone": (1, False), "fleet": (64, True), "agent16": (16, False)}
#: Issue 28's target: gas per kept lease-hour at ttl 30 s, for the fleet and the 16-lease agent.
TARGET = 1_500_000
TARGETED = ("fleet", "agent16")


class Clock:
    """The keep-alives' clock (and the sender's fee-quote clock), moved by this script."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@contextmanager
def backend(name: str) -> Iterator[tuple[Chain, Callable[[int], Chain]]]:
    """(the deployer's chain, a chain sending as account ``i``) on a fresh embedded chain or anvil."""
    if name == "embedded":
        chain = Chain.embedded(accounts=4)
        yield chain, lambda i: chain
        return
    from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

    keys = dev_keys(4)
    with AnvilProcess(find_anvil(start=ROOT)) as node:
        yield Chain.connect(node.url, private_key=keys[0]), lambda i: Chain.connect(node.url, private_key=keys[i])


def acquire(scenario: str, agent: Registry, ttl: int) -> list[Any]:
    count, batched = SCENARIOS[scenario]
    names = [f"bench/{scenario}/{i}" for i in range(count)]
    if not batched:
        return [agent.acquire(name, ttl=ttl) for name in names]
    batcher = agent.batched()
    leases: list[Any] = [None] * count

    def one(i: int) -> None:
        leases[i] = batcher.acquire(names[i], ttl=ttl)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return leases


def settle(keepers: list[Any], now: float, what: str) -> None:
    """Wait until every renewer has decided at ``now`` with no renewal in flight."""
    deadline = time.monotonic() + 120
    while not all(k.evaluated_at == now and k.core.in_flight is None for k in keepers):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: the renewers did not act at t={now}")
        time.sleep(0.0005)


def run(scenario: str, ttl: int, hours: float, chains: tuple[Chain, Callable[[int], Chain]], schedule: str) -> dict:
    deployer, as_account = chains
    registry = Registry.deploy(deployer, max_ttl=3_600)
    chain = as_account(1)
    account = chain.accounts[1] if chain is deployer else chain.accounts[0]
    agent = Registry.at(chain, registry.address).connect(account)
    leases = acquire(scenario, agent, ttl)
    # Chain time the keep-alives' clock counts from: the earliest acquisition's block (each lease's ttl
    # counts from its own block's time, so its `since` is that time on the clock).
    base = min(lease.expires_at - lease.ttl for lease in leases)
    clock = Clock(float(chain.now() - base))
    chain._sender._clock = clock  # a fee quote is reused for a second of this clock, as on a real hour
    start, end = clock.now, clock.now + hours * 3600
    first_block = chain.block_number() + 1
    with ExitStack() as stack:
        for lease in leases:
            stack.enter_context(
                lease.keep(clock=clock, since=float(lease.expires_at - lease.ttl - base), schedule=schedule)
            )
        keepers = [lease.keeper for lease in leases]
        steps = 0
        while True:
            settle(keepers, clock.now, scenario)
            for lease in leases:
                lease.check()  # raises LeaseLost: the benchmark would measure a broken keep-alive
            due = min(k.core.due for k in keepers)
            if due >= end:
                break
            # The chain first, then the clock: a renewer re-reads the clock on its own (at least once a second,
            # keepalive.SUSPEND_RECHECK), and one that saw the new time before the chain got there would renew
            # at the chain's old time, for a lease that then ends before its next renewal is due.
            now = max(due, clock.now)
            behind = base + now - chain.now()
            if behind > 0:
                chain.advance_time(int(behind) + (behind % 1 > 0))
            clock.now = now
            for k in keepers:
                k.wake()
            steps += 1
            if steps > 1_000_000:
                raise SystemExit(f"{scenario}: the keep-alive never stops renewing")
        clock.now = end
        last_block = chain.block_number()
        intervals = sorted({round(k.core.interval, 3) for k in keepers})
    if not all(lease.is_current() for lease in leases):
        raise SystemExit(f"{scenario}: a lease lapsed: the benchmark measured a broken keep-alive")
    gas = transactions = renewals = 0
    for number in range(first_block, last_block + 1):
        block = chain.rpc.block(number)
        for tx_hash in block["transactions"]:
            receipt = chain.rpc.receipt(tx_hash)
            if receipt["from"].lower() != account.lower():
                continue
            transactions += 1
            gas += int(receipt["gasUsed"])
            kinds = [
                entry.kind
                for entry in (_events.decode(log) for log in receipt["logs"] if log["address"] == registry.address)
                if entry is not None
            ]
            if not kinds or any(kind is not _events.Kind.RENEWED for kind in kinds):
                raise SystemExit(f"{scenario}: transaction {tx_hash} of the agents was not renewals only: {kinds}")
            renewals += len(kinds)
    lease_hours = len(leases) * (end - start) / 3600
    return {
        "scenario": scenario,
        "schedule": schedule,
        "ttl": ttl,
        "leases": len(leases),
        "hours": hours,
        "interval": intervals,
        "transactions": transactions,
        "renewals": renewals,
        "gas": gas,
        "renewals_per_lease_hour": renewals / lease_hours,
        "transactions_per_hour": transactions / hours,
        "gas_per_renewal": gas / max(1, renewals),
        "gas_per_lease_hour": gas / lease_hours,
        "target": TARGET if ttl == 30 and scenario in TARGETED else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("embedded", "anvil"), default="embedded")
    parser.add_argument("--scenario", choices=tuple(SCENARIOS), action="append")
    parser.add_argument("--ttl", type=int, action="append")
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--schedule", choices=("half", "margin"), action="append")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    with backend(args.backend) as chains:
        for scenario in args.scenario or list(SCENARIOS):
            for ttl in args.ttl or [30, 300]:
                for schedule in args.schedule or ["half", "margin"]:
                    started = time.monotonic()
                    results.append(run(scenario, ttl, args.hours, chains, schedule))
                    print(f"  {scenario} ttl {ttl} {schedule}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.json:
        print(json.dumps({"backend": args.backend, "results": results}, indent=2))
        return 0
    print(f"keep-alive cost on {args.backend}: {args.hours:g} h of chain time per scenario (measured gas)")
    print(
        f"{'scenario':<9} {'schedule':<8} {'ttl':>4} {'leases':>6} {'renews every':>12} {'renewals/lease-h':>16} "
        f"{'tx/h':>6} {'gas/renewal':>11} {'gas/lease-h':>12}  target"
    )
    for r in results:
        target = r["target"]
        verdict = "" if target is None else ("met" if r["gas_per_lease_hour"] <= target else "NOT met") + " (1.5 M)"
        every = "/".join(f"{i:g}" for i in r["interval"]) + " s"
        print(
            f"{r['scenario']:<9} {r['schedule']:<8} {r['ttl']:>4} {r['leases']:>6} {every:>12} {r['renewals_per_lease_hour']:>16.1f} "
            f"{r['transactions_per_hour']:>6.0f} {r['gas_per_renewal']:>11,.0f} {r['gas_per_lease_hour']:>12,.0f}  {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
