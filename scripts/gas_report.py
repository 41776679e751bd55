#!/usr/bin/env python3
"""Print the exact gas of every FencingRegistry operation, from transaction receipts.

    python scripts/gas_report.py                # on the embedded chain (eth-tester/py-evm)
    python scripts/gas_report.py --json         # machine-readable

Gas is deterministic: the same operation on the same state costs the same on
every EVM of the same fork, so tests assert ceilings on these figures
(tests/chain/test_gas.py runs this same measurement on eth-tester and anvil).
Names matter a little: every byte of a resource name costs 16 gas of
calldata per acquisition, plus 8 gas of log data on its first acquisition.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from chainfence import Chain, FencedStore, Registry  # noqa: E402

#: Ceilings the project holds itself to (tests/chain/test_gas.py asserts them); figures must stay under.
CEILINGS = {
    "acquire (held before, after expiry)": 37_500,
    "acquire (held before, after release)": 37_500,
    "acquire (re-acquire by holder)": 37_500,
    "acquire (first of a new resource)": 56_000,
    "renew": 31_000,
    # A renewal may grow by at most its marker's bytes: 32 of calldata (16 gas each) and 32 of log data (8 each).
    "renew (with a progress marker)": 31_000 + 32 * 16 + 32 * 8,
    "release": 29_500,
}

#: The floor measured before the registry was written: a minimal contract that bumps a counter,
#: writes one packed slot and emits one event (what an acquisition cannot do without).
FLOORS = {
    "acquire (held before, after expiry)": 34_051,
    "acquire (held before, after release)": 34_051,
    "acquire (re-acquire by holder)": 34_051,
    "acquire (first of a new resource)": 51_151,
    "acquire (very first of the registry)": 68_251,
}

NAME = "reports/daily"

#: Receipt gas of a renewal before progress markers existed (LeaseRenewed without its `progress` word).
RENEW_BEFORE_MARKERS = 29_959
#: What a marker may add to it: its 32 bytes of calldata (16 gas a nonzero byte) and of log data (8 gas a byte).
MARKER_ALLOWANCE = 32 * 16 + 32 * 8
#: Receipt gas before progress markers and claims: acquire and release must not grow.
BEFORE_MARKERS_AND_CLAIMS = {
    "acquire (held before, after expiry)": 35_659,
    "acquire (held before, after release)": 35_637,
    "acquire (re-acquire by holder)": 35_687,
    "acquire (first of a new resource)": 54_729,
    "release": 29_309,
}
#: The marker measured: no zero byte, so its calldata costs the most it can.
MARKER = bytes(range(1, 33))


def _gas(chain: Chain) -> int:
    """Gas used by the transaction of the latest block (one transaction per block here)."""
    block = chain.w3.eth.get_block("latest")
    (tx_hash,) = block["transactions"]
    return chain.w3.eth.get_transaction_receipt(tx_hash)["gasUsed"]


def measure(chain: Chain, name: str = NAME, *, with_store: bool = True) -> dict[str, int]:
    """Run each operation once on a fresh registry and return its receipt gas, by operation."""
    registry = Registry.deploy(chain, max_ttl=3_600)
    figures = {"deploy": _gas(chain)}
    alice = registry.connect(chain.accounts[1])
    bob = registry.connect(chain.accounts[2])

    alice.acquire("warm-up/counter", ttl=60)
    figures["acquire (very first of the registry)"] = _gas(chain)
    lease = alice.acquire(name, ttl=60)
    figures["acquire (first of a new resource)"] = _gas(chain)
    # Renew later in time, so the expiry really changes (anvil can mine two
    # blocks in the same second; rewriting an unchanged slot costs 2,800 less).
    chain.advance_time(10)
    lease.renew(ttl=60)
    figures["renew"] = _gas(chain)
    chain.advance_time(10)
    lease.renew(ttl=60, progress=MARKER)
    figures["renew (with a progress marker)"] = _gas(chain)
    lease = alice.acquire(name, ttl=30)
    figures["acquire (re-acquire by holder)"] = _gas(chain)
    lease.release()
    figures["release"] = _gas(chain)
    lease = bob.acquire(name, ttl=30)
    figures["acquire (held before, after release)"] = _gas(chain)
    chain.advance_time(31)
    lease = alice.acquire(name, ttl=30)
    figures["acquire (held before, after expiry)"] = _gas(chain)
    lease.complete(b"result")
    figures["complete (fenced completion)"] = _gas(chain)
    if with_store:
        store = FencedStore.deploy(registry)
        figures["FencedStore deploy"] = _gas(chain)
        store.write(lease, b"v1")
        figures["FencedStore.write (first of a key)"] = _gas(chain)
        store.write(lease, b"v2")
        figures["FencedStore.write (same key)"] = _gas(chain)
    items = ["item-0", "item-1", "item-2"]
    claim = alice.claim("gas/workset", items, ttl=60)
    figures["claimNext (1st of 3 items, never claimed)"] = _gas(chain)
    claim.complete(b"result")
    figures["complete (a claimed item: marks it done)"] = _gas(chain)
    bob.claim("gas/workset", items, ttl=60)
    figures["claimNext (2nd of 3, after a done item)"] = _gas(chain)
    chain.advance_time(61)
    alice.claim("gas/workset", items, ttl=60)
    figures["claimNext (2nd of 3, expired: after a done item)"] = _gas(chain)
    return figures


def _num(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--name", default=NAME, help=f"resource name to measure with (default {NAME!r})")
    args = parser.parse_args(argv)

    figures = measure(Chain.embedded(), args.name)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"FencingRegistry gas, receipt gasUsed, resource name {args.name!r} ({len(args.name.encode())} bytes)\n")
    print(f"{'operation':<40} {'gas':>8} {'floor':>8} {'ceiling':>8}   (floor: counter + slot + event; ceiling: tests/chain/test_gas.py)")
    over = False
    for operation, gas in figures.items():
        floor = FLOORS.get(operation)
        ceiling = CEILINGS.get(operation)
        over |= ceiling is not None and gas > ceiling
        print(f"{operation:<40} {gas:>8,} {_num(floor):>8} {_num(ceiling):>8}".rstrip())
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
