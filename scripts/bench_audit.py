#!/usr/bin/env python3
"""The audit index: events synced per second from anvil, and query latency over 100,000 events.

    python scripts/bench_audit.py                      # 10,000 acquisitions (20,000 events in 500 blocks), 3 rounds
    python scripts/bench_audit.py --txs 20000 --rounds 5 --json

Sync (one fresh anvil from the project's node_modules): ``--txs``
acquisitions of distinct names (each logs ``ResourceNamed`` and
``LeaseAcquired``: two events) are signed locally and sent in JSON-RPC
batches with anvil's automine off, ``--per-block`` to a block; then
``AuditIndex.sync`` copies them into a fresh index file, in alternating
rounds: block headers batched (the default: one batch of up to 200 headers
per page) and one ``eth_getBlockByNumber`` per block (the layer's fallback
for nodes that refuse batches). Events per second = events indexed / wall
time of the sync, page commits and header fetches included.

Queries: an index of ``--events`` (100,000) events is built in a file from a
synthetic history (``--resources`` resources, ``--holders`` holders;
acquisitions, renewals with progress markers, releases, completions,
expiries and takeovers, ten events a block: see ``synthetic``), written through the same code
a sync uses (``_apply``). Each query kind then runs ``--queries`` times with
random arguments, kinds interleaved; p50 and p99 latency per kind.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from eth_account import Account
from eth_utils import keccak

from chainfence import Chain, Registry
from chainfence._node import events as _events
from chainfence.audit._projection import apply as _apply
from chainfence.audit.index import AuditIndex
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil


def rpc(url: str, payload: object) -> object:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def generate(url: str, registry: Registry, txs: int, per_block: int) -> int:
    """Acquisitions of distinct names, ``per_block`` to a block, sent in batches: returns the events logged."""
    keys = dev_keys(10)[1:]
    accounts = [Account.from_key(key) for key in keys]
    nonces = {
        a.address: int(
            rpc(
                url, {"jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionCount", "params": [a.address, "pending"]}
            )["result"],
            16,
        )
        for a in accounts
    }
    rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "evm_setAutomine", "params": [False]})
    sent = 0
    while sent < txs:
        batch = []
        for i in range(min(per_block, txs - sent)):
            account = accounts[(sent + i) % len(accounts)]
            data = registry._encode("acquire", [f"bench/r-{sent + i:07d}", 3_600])
            tx = {
                "to": registry.address,
                "data": data,
                "gas": 300_000,
                "maxFeePerGas": 10**11,
                "maxPriorityFeePerGas": 10**9,
                "nonce": nonces[account.address],
                "chainId": 31337,
                "value": 0,
            }
            nonces[account.address] += 1
            raw = account.sign_transaction(tx).raw_transaction
            batch.append({"jsonrpc": "2.0", "id": i, "method": "eth_sendRawTransaction", "params": ["0x" + raw.hex()]})
        replies = rpc(url, batch)
        errors = [r["error"] for r in replies if "error" in r]  # type: ignore[union-attr]
        if errors:
            raise SystemExit(f"anvil refused a transaction: {errors[0]}")
        rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "evm_mine", "params": []})
        sent += len(batch)
    rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "evm_setAutomine", "params": [True]})
    return 2 * txs


def sync_round(registry: Registry, batched: bool, directory: Path) -> dict[str, float]:
    chain = registry.chain
    chain.rpc._batches = batched
    path = directory / f"sync-{time.monotonic_ns()}.sqlite"
    index = AuditIndex(path)
    started = time.perf_counter()
    result = index.sync(registry)
    elapsed = time.perf_counter() - started
    index.close()
    chain.rpc._batches = True
    return {"events": result.events, "seconds": elapsed, "events_per_s": result.events / elapsed, "pages": result.pages}


def synthetic(path: Path, events: int, resources: int, holders: int, seed: int = 7) -> dict[str, list]:
    """A synthetic history of ``events`` events in ``path``; returns what the queries pick from.

    Each step picks a resource. A free one (never held, released, or expired) is acquired by a random
    holder (``ResourceNamed`` first if it was never held); a live one is renewed with a progress marker
    (60%), completed (10%), released (20%), or re-acquired by its own holder (10%). Ten events a block,
    two seconds a block, leases of 30 minutes to 2 hours, renewals for an hour.
    """
    rng = random.Random(seed)
    names = [f"svc-{i % 40:02d}/job-{i:05d}" for i in range(resources)]
    ids = [keccak(name.encode()) for name in names]
    people = [Account.from_key(keccak(f"holder {i}".encode())).address for i in range(holders)]
    last: dict[int, list] = {}  # resource -> [token, holder, expires_at, released]
    token, now, block, written, log_index = 0, 1_800_000_000, 1, 0, 0
    index = AuditIndex(path)
    index._set_meta("registry", "0x" + "00" * 20)
    index._set_meta("chain_id", 1)
    index._set_meta("deployment_block", 1)
    tokens, times = [], []

    def emit(conn, kind, r, **fields):
        nonlocal written, log_index
        entry = _events.RegistryLog(kind, ids[r], block, b"\0" * 32, "0x" + "22" * 32, log_index, **fields)
        _apply(conn, entry, now)
        written += 1
        log_index += 1

    with index._write() as conn:
        while written < events:
            r = rng.randrange(resources)
            held = last.get(r)
            live = held is not None and not held[3] and held[2] > now
            choice = rng.random()
            if not live or choice >= 0.9:
                if held is None:
                    emit(conn, _events.Kind.NAMED, r, name=names[r].encode())
                    reason, previous, holder = 0, 0, rng.choice(people)
                elif live:
                    reason, previous, holder = 3, held[0], held[1]
                else:
                    reason, previous, holder = (1 if held[3] else 2), held[0], rng.choice(people)
                token += 1
                expires = now + rng.choice([1_800, 3_600, 7_200])
                emit(
                    conn,
                    _events.Kind.ACQUIRED,
                    r,
                    token=token,
                    holder=holder,
                    expires_at=expires,
                    previous_token=previous,
                    reason=reason,
                )
                last[r] = [token, holder, expires, False]
                tokens.append(token)
            elif choice < 0.6:
                held[2] = now + 3_600
                emit(
                    conn,
                    _events.Kind.RENEWED,
                    r,
                    token=held[0],
                    holder=held[1],
                    expires_at=held[2],
                    progress=rng.randrange(1, 1_000).to_bytes(32, "big"),
                )
            elif choice < 0.7:
                emit(
                    conn,
                    _events.Kind.COMPLETED,
                    r,
                    token=held[0],
                    holder=held[1],
                    result_digest=keccak(str(written).encode()),
                )
            else:
                held[3] = True
                emit(conn, _events.Kind.RELEASED, r, token=held[0], holder=held[1])
            if log_index >= 10:
                conn.execute(
                    "INSERT OR REPLACE INTO blocks (number, hash, timestamp) VALUES (?, ?, ?)",
                    (block, keccak(str(block).encode()), now),
                )
                times.append(now)
                block, now, log_index = block + 1, now + 2, 0
        conn.execute(
            "INSERT OR REPLACE INTO blocks (number, hash, timestamp) VALUES (?, ?, ?)",
            (block, keccak(str(block).encode()), now),
        )
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('synced_block', ?)", (str(block),))
    index.close()
    return {"names": names, "holders": people, "tokens": tokens, "times": times, "blocks": list(range(1, block + 1))}


def queries(path: Path, picks: dict[str, list], count: int, seed: int = 11) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    index = AuditIndex(path)
    prefixes = sorted({name.split("/")[0] + "/" for name in picks["names"]})
    kinds = {
        "history": lambda: index.history(rng.choice(picks["names"])),
        "token": lambda: index.lease(rng.choice(picks["tokens"])),
        "holder": lambda: index.leases_of(rng.choice(picks["holders"])),
        "at(time)": lambda: index.holder_at(rng.choice(picks["names"]), time=rng.choice(picks["times"])),
        "at(block)": lambda: index.holder_at(rng.choice(picks["names"]), block=rng.choice(picks["blocks"])),
        "current(prefix)": lambda: index.current(prefix=rng.choice(prefixes)),
        "takeovers(100 blocks)": lambda: index.takeovers(
            from_block=(b := rng.choice(picks["blocks"])), to_block=b + 99
        ),
        "completions(100 blocks)": lambda: index.completions(
            from_block=(b := rng.choice(picks["blocks"])), to_block=b + 99
        ),
        "resources(prefix)": lambda: index.resources(rng.choice(prefixes)),
    }
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    sizes: dict[str, list[int]] = {kind: [] for kind in kinds}
    for _ in range(count):
        for kind, run in kinds.items():  # interleaved: no kind gets a warmer cache by going first
            started = time.perf_counter()
            answer = run()
            samples[kind].append((time.perf_counter() - started) * 1000)
            sizes[kind].append(len(answer) if isinstance(answer, list) else int(answer is not None))
    index.close()
    return {
        kind: {
            "p50_ms": statistics.median(values),
            "p99_ms": sorted(values)[int(0.99 * (len(values) - 1))],
            "rows_median": statistics.median(sizes[kind]),
        }
        for kind, values in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--txs", type=int, default=10_000, help="acquisitions on anvil (two events each)")
    parser.add_argument("--per-block", type=int, default=20, help="acquisitions a block (default 20: 500 blocks)")
    parser.add_argument("--rounds", type=int, default=3, help="sync rounds of each kind, alternating")
    parser.add_argument("--events", type=int, default=100_000, help="events in the query index")
    parser.add_argument("--resources", type=int, default=5_000)
    parser.add_argument("--holders", type=int, default=500)
    parser.add_argument("--queries", type=int, default=300, help="queries of each kind")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        with AnvilProcess(find_anvil(start=ROOT), extra_args=("--gas-limit", "100000000")) as node:
            chain = Chain.connect(node.url, private_keys=dev_keys(1), poll_latency=0.005)
            registry = Registry.deploy(chain, max_ttl=86_400)
            started = time.perf_counter()
            logged = generate(node.url, registry, args.txs, args.per_block)
            report["generated"] = {
                "events": logged,
                "blocks": chain.block_number(),
                "seconds": time.perf_counter() - started,
            }
            rounds: dict[str, list[dict[str, float]]] = {"batched headers": [], "one request per block": []}
            for _ in range(args.rounds):
                rounds["batched headers"].append(sync_round(registry, True, directory))
                rounds["one request per block"].append(sync_round(registry, False, directory))
            report["sync"] = {
                kind: {
                    "events_per_s": [round(r["events_per_s"]) for r in results],
                    "median_events_per_s": round(statistics.median(r["events_per_s"] for r in results)),
                    "events": results[0]["events"],
                    "pages": results[0]["pages"],
                }
                for kind, results in rounds.items()
            }
        path = directory / "queries.sqlite"
        started = time.perf_counter()
        picks = synthetic(path, args.events, args.resources, args.holders)
        report["query_index"] = {
            "events": args.events,
            "resources": args.resources,
            "holders": args.holders,
            "build_seconds": time.perf_counter() - started,
            "file_mb": path.stat().st_size / 1e6,
        }
        report["queries"] = queries(path, picks, args.queries)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    generated = report["generated"]
    print(
        f"anvil: {generated['events']} events in {generated['blocks']} blocks (generated in {generated['seconds']:.1f} s)"
    )
    for kind, figures in report["sync"].items():  # type: ignore[union-attr]
        print(
            f"sync, {kind:22s}: median {figures['median_events_per_s']:>7,} events/s  "
            f"(rounds {', '.join(f'{v:,}' for v in figures['events_per_s'])}; {figures['pages']} pages)"
        )
    q = report["query_index"]
    print(
        f"query index: {q['events']:,} events, {q['resources']:,} resources, {q['holders']} holders, "
        f"{q['file_mb']:.1f} MB (built in {q['build_seconds']:.1f} s)"
    )
    for kind, figures in report["queries"].items():  # type: ignore[union-attr]
        print(
            f"  {kind:24s} p50 {figures['p50_ms']:6.2f} ms  p99 {figures['p99_ms']:6.2f} ms  "
            f"(median rows {figures['rows_median']:g})"
        )


if __name__ == "__main__":
    main()
