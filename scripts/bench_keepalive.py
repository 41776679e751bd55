#!/usr/bin/env python3
"""What keeping a lease alive costs: JSON-RPC requests and gas per lease-hour, on anvil.

    python scripts/bench_keepalive.py                 # ttl 30 s, one simulated hour, default interval (ttl/2)
    python scripts/bench_keepalive.py --ttl 30 --hours 2 --interval 20 --json

On a fresh anvil started here, an account acquires a lease and keeps it
with ``lease.keep()`` for ``--hours`` of chain time. Time is simulated, not
waited for: the keep-alive's monotonic clock is injected, and the script
moves it and the chain's clock together in steps of one second, waiting at
each step until the renewer has acted on it (the SDK's sender, which
reuses a fee quote for one second, counts on that clock too). The figures are counted, not
timed: every JSON-RPC request the keep-alive's threads send (counted at the
HTTP provider, so batches count as one request and are reported apart), and
the gas of every renewal (from its receipt). They depend on the interval and
the SDK's send path, not on the machine's speed.

The script also checks what it measures: the lease is current at the end
and never lapsed (each renewal landed before the previous expiry).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, EventKind, Registry, audit
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

ROOT = Path(__file__).resolve().parent.parent
NAME = "jobs/bench-keepalive"


class Clock:
    """The keep-alive's monotonic clock, moved by this script."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def count_requests(main: threading.Thread) -> collections.Counter:
    """Count the JSON-RPC requests sent by threads other than ``main`` (the keep-alive's), by method.

    Counted where web3's HTTP provider posts a request (``_make_request``,
    after its response cache: a cached ``eth_chainId`` is not a request),
    patched on the class before any chain is connected.
    """
    from web3 import HTTPProvider

    counts: collections.Counter = collections.Counter()
    make_request, make_batch = HTTPProvider._make_request, HTTPProvider.make_batch_request

    def counted_request(self, method, request_data):
        if threading.current_thread() is not main:
            counts[str(method)] += 1
        return make_request(self, method, request_data)

    def counted_batch(self, requests):
        if threading.current_thread() is not main:
            counts["batch(" + ",".join(str(method) for method, _ in requests) + ")"] += 1
        return make_batch(self, requests)

    HTTPProvider._make_request = counted_request
    HTTPProvider.make_batch_request = counted_batch
    return counts


def run(url: str, ttl: int, hours: float, interval: float | None) -> dict[str, object]:
    counts = count_requests(threading.current_thread())
    keys = dev_keys(2)
    registry = Registry.deploy(Chain.connect(url, private_key=keys[0]), max_ttl=3_600)
    chain = Chain.connect(url, private_key=keys[1])
    agent = Registry.at(chain, registry.address)
    clock = Clock()
    # The sender reuses a fee quote for a second of its clock: on the script's clock, as in a real
    # hour, renewals 15 s apart each get a fresh quote (on the real clock they would share one).
    chain._sender._clock = clock
    seconds = int(hours * 3600)
    lease = agent.acquire(NAME, ttl=ttl)
    start_block = chain.block_number()
    with lease.keep(clock=clock, since=0.0, interval=interval):
        keeper = lease.keeper
        for second in range(1, seconds + 1):
            chain.advance_time(1)
            clock.now = float(second)
            keeper.wake()
            deadline = time.monotonic() + 60
            # Until the renewer decided at this second with no renewal in flight.
            while not (keeper.evaluated_at == clock.now and keeper.core.in_flight is None):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the renewer did not act at t={second}")
                time.sleep(0.001)
            lease.check()
    if not lease.is_current():
        raise SystemExit("the lease lapsed: the benchmark measured a broken keep-alive")
    renewals = [e for e in audit.history(agent, NAME) if e.kind is EventKind.RENEWED]
    gas = [int(chain.rpc.receipt(e.tx_hash)["gasUsed"]) for e in renewals]
    requests = sum(counts.values())
    per_hour = 1 / hours
    lease.release()
    return {
        "ttl": ttl,
        "interval": keeper.core.interval,
        "hours": hours,
        "blocks": chain.block_number() - start_block,
        "renewals_per_hour": len(renewals) * per_hour,
        "requests_per_hour": requests * per_hour,
        "requests_per_renewal": requests / max(1, len(renewals)),
        "requests_by_method": dict(sorted(counts.items())),
        "gas_per_renewal": sorted(set(gas)),
        "gas_per_hour": sum(gas) * per_hour,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ttl", type=int, default=30)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--interval", type=float, default=None, help="renewal interval (default: ttl/2)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with AnvilProcess(find_anvil(start=ROOT)) as node:
        result = run(node.url, args.ttl, args.hours, args.interval)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"keep-alive on anvil: ttl {result['ttl']} s, renewal every {result['interval']:g} s, "
        f"{result['hours']:g} h of chain time ({result['blocks']} blocks)"
    )
    print(f"  renewals per lease-hour   {result['renewals_per_hour']:.0f}")
    print(
        f"  requests per lease-hour   {result['requests_per_hour']:.0f}  "
        f"({result['requests_per_renewal']:.2f} per renewal)"
    )
    for method, count in result["requests_by_method"].items():
        print(f"    {method:<40} {count}")
    print(f"  gas per renewal           {', '.join(f'{g:,}' for g in result['gas_per_renewal'])}")
    print(f"  gas per lease-hour        {result['gas_per_hour']:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
