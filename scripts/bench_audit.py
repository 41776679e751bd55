#!/usr/bin/env python3
"""The audit index: events synced per second from anvil, and every query's latency over 100,000 events.

    python scripts/bench_audit.py                      # both shapes, 300 queries of each kind
    python scripts/bench_audit.py --queries 100 --json
    python scripts/bench_audit.py --skip-sync --skip-before   # queries only
    python scripts/bench_audit.py --skip-queries --modes      # sync only, the bloom and the receipts mode

Sync (one fresh anvil from the project's node_modules), two shapes:

- dense: ``--txs`` acquisitions of distinct names (each logs ``ResourceNamed`` and ``LeaseAcquired``: two
  events), signed locally and sent in JSON-RPC batches with anvil's automine off, ``--per-block`` to a block;
- sparse: ``--sparse-txs`` renewals of one lease, one a block (automine on): one event a block.

``AuditIndex.sync`` then copies each into a fresh index file, rounds alternating. The sync reads every
block's header (its ``logsBloom``: no block is passed whose logs the answer may lack), so the sparse shape
costs a header per event. Events per second = events indexed / wall time of the sync; round trips counted at
the chain's transport (a batch is one). ``--modes`` adds rounds in the completeness check's receipts mode
(``sync(completeness="receipts")``: the receipts of every block whose bloom may hold a registry event, a
page's in one batch, against ``receiptsRoot``), alternating with the bloom mode's.

Queries: two indexes of ``--events`` (100,000) events, built synthetically in files through the projection a
sync uses (``_projection.apply``), since anvil cannot mine 100,000 blocks in reasonable time (``anvil_mine``
slows down as the chain grows: 1,000 empty blocks took 3 s, the next 1,000 6 s, here): ``dense``, ten events a
block (10,000 blocks), and ``sparse``, one event a block (100,000 blocks). Both hold ``--resources`` resources
and ``--holders`` holders (acquisitions, renewals with progress markers, releases, completions, expiries and
takeovers) and one hot resource, ``hot/one``, acquired about every 100th event (1,000 leases). Each query kind then
runs ``--queries`` times with random arguments, kinds interleaved; p50 and p99 of wall time per kind, and
the p50 of the CPU time the querying thread spent (``time.thread_time``: what the query cost, apart from
waiting for a core on a shared machine; for ``sdk history(index=)`` the loopback node's thread is not in it). ``sdk history(index=)``
is ``audit.history(registry, name, index=index)``: its sync against a node on loopback (a proxy in front of the bench's
anvil, which holds the registry, that answers for the synthetic chain's head and headers: the sync finds the
index current, two requests), then the read. ``timeline(hot/one)`` is ``timeline_leases`` and ``render`` of the
hot resource's 1,000 leases (``--timelines`` samples).

Lists answer a page (``limit``, default 100) and a cursor (``after=``): each list query runs with its default
limit, on a listing its arguments bound (a resource, a holder, 100 blocks, a prefix) and on the long ones
(every live lease, an hour of takeovers, every takeover, completion, resource and event of the index, the hot
resource's 1,000 leases); ``... [page N]`` is a page from a cursor taken at random along the listing (how
deep a page is costs nothing). ``full reads`` then read whole listings through ``AuditIndex.pages``, a page of
100 a call: the p50 and p99 of one call, the pages, and the whole read's wall time.

``--skip-before`` leaves out the rows marked ``(before)``: the code before issue 20, run in the same process on
the same files, alternating with the new one: ``events()`` read every block's hash for each call, the
timeline called it once per lease, and ``current()`` and ``takeovers`` answered every row they matched.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from eth_account import Account
from eth_utils import keccak

from chainfence import Chain, Registry, Timeouts, audit
from chainfence._node import events as _events
from chainfence.audit import _projection
from chainfence.audit._projection import apply as _apply
from chainfence.audit.index import AuditIndex
from chainfence.audit.timeline import render
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

HOT = "hot/one"
HOT_LEASES = 1_000


def rpc(url: str, payload: object) -> object:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def _send_batch(url: str, batch: list[dict]) -> None:
    replies = rpc(url, batch)
    errors = [r["error"] for r in replies if "error" in r]  # type: ignore[union-attr]
    if errors:
        raise SystemExit(f"anvil refused a transaction: {errors[0]}")


def _signed(account, nonce: int, to: str, data: bytes) -> str:
    tx = {
        "to": to,
        "data": data,
        "gas": 300_000,
        "maxFeePerGas": 10**11,
        "maxPriorityFeePerGas": 10**9,
        "nonce": nonce,
        "chainId": 31337,
        "value": 0,
    }
    return "0x" + account.sign_transaction(tx).raw_transaction.hex()


def _nonce(url: str, address: str) -> int:
    reply = rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionCount", "params": [address, "pending"]})
    return int(reply["result"], 16)  # type: ignore[index]


def generate(url: str, registry: Registry, txs: int, per_block: int) -> int:
    """Acquisitions of distinct names, ``per_block`` to a block, sent in batches: returns the events logged."""
    accounts = [Account.from_key(key) for key in dev_keys(10)[1:]]
    nonces = {a.address: _nonce(url, a.address) for a in accounts}
    rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "evm_setAutomine", "params": [False]})
    sent = 0
    while sent < txs:
        batch = []
        for i in range(min(per_block, txs - sent)):
            account = accounts[(sent + i) % len(accounts)]
            data = registry._encode("acquire", [f"bench/r-{sent + i:07d}", 3_600])
            raw = _signed(account, nonces[account.address], registry.address, data)
            nonces[account.address] += 1
            batch.append({"jsonrpc": "2.0", "id": i, "method": "eth_sendRawTransaction", "params": [raw]})
        _send_batch(url, batch)
        rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "evm_mine", "params": []})
        sent += len(batch)
    rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "evm_setAutomine", "params": [True]})
    return 2 * txs


def generate_sparse(url: str, registry: Registry, txs: int) -> int:
    """One lease renewed ``txs`` times, one renewal a block: one event a block. Returns the events.

    Each renewal is sent, then a block mined, one request after the other: anvil answers the elements of a
    JSON-RPC batch concurrently, so a batch of (send, mine) pairs put many renewals in a few blocks and left
    most blocks empty (the sparse shape was not sparse; checked below)."""
    holder = Account.from_key(dev_keys(10)[9])
    lease = registry.connect(holder.address).acquire("bench/sparse", ttl=86_400)
    nonce = _nonce(url, holder.address)
    first = registry.chain.block_number() + 1
    rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "evm_setAutomine", "params": [False]})
    for _ in range(txs):  # each renewal, then a block: one event a block
        data = registry._encode("renew", [keccak(b"bench/sparse"), lease.token, 86_400])
        _send_batch(
            url,
            [
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "eth_sendRawTransaction",
                    "params": [_signed(holder, nonce, registry.address, data)],
                }
            ],
        )
        rpc(url, {"jsonrpc": "2.0", "id": 2, "method": "evm_mine", "params": []})
        nonce += 1
    rpc(url, {"jsonrpc": "2.0", "id": 1, "method": "evm_setAutomine", "params": [True]})
    logs = _events.fetch_all(registry.chain, registry.address, from_block=first, to_block=registry.chain.block_number())
    blocks = {entry.block_number for entry in logs}
    if len(logs) != txs or len(blocks) != txs:
        raise SystemExit(f"the sparse shape is {len(logs)} events in {len(blocks)} blocks, not one a block")
    return txs


def sync_round(
    registry: Registry,
    batched: bool,
    directory: Path,
    first_block: int = 0,
    last_block: int | None = None,
    completeness: str = "bloom",
) -> dict[str, float]:
    chain = registry.chain
    chain.rpc._node.batches = batched  # the node layer's own switch: False asks one request at a time
    transport = chain.rpc.transport
    request, batch = transport.request, transport.batch
    trips = [0]

    def counted_request(*args, **kwargs):
        trips[0] += 1
        return request(*args, **kwargs)

    def counted_batch(*args, **kwargs):
        trips[0] += 1
        return batch(*args, **kwargs)

    transport.request, transport.batch = counted_request, counted_batch
    path = directory / f"sync-{time.monotonic_ns()}.sqlite"
    index = AuditIndex(path)
    if first_block:  # only this shape's blocks: start the cursor just before them
        index._bind(registry)
        index._set_meta("synced_block", first_block - 1)
    started = time.perf_counter()
    try:
        result = index.sync(registry, to_block=last_block, completeness=completeness)
    finally:
        elapsed = time.perf_counter() - started
        transport.request, transport.batch = request, batch
        chain.rpc._node.batches = True
    index.close()
    assert result.held_at is None, result
    return {
        "events": result.events,
        "blocks": result.to_block - result.from_block + 1,
        "seconds": elapsed,
        "events_per_s": result.events / elapsed,
        "pages": result.pages,
        "round_trips": trips[0],
    }


# ---------------------------------------------------------------------------
# The synthetic query indexes
# ---------------------------------------------------------------------------


def synthetic(path: Path, events: int, resources: int, holders: int, per_block: int, seed: int = 7) -> dict[str, list]:
    """A synthetic history of ``events`` events, ``per_block`` a block, in ``path``; returns what the queries pick from.

    Each step picks a resource. A free one (never held, released, or expired) is acquired by a random
    holder (``ResourceNamed`` first if it was never held); a live one is renewed with a progress marker
    (60%), completed (10%), released (20%), or re-acquired by its own holder (10%). Every 100th event or so is
    an acquisition of the hot resource (a takeover when it is live): 1,000 leases, spread over the history. Two seconds a block, leases of 30 minutes
    to 2 hours, renewals for an hour.
    """
    rng = random.Random(seed)
    names = [f"svc-{i % 40:02d}/job-{i:05d}" for i in range(resources)] + [HOT]
    ids = [keccak(name.encode()) for name in names]
    hot = len(names) - 1
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
        entry = _events.RegistryLog(
            kind, ids[r], block, b"\0" * 32, "0x" + block.to_bytes(32, "big").hex(), log_index, tx_index=0, **fields
        )
        _apply(conn, entry, now)
        written += 1
        log_index += 1

    def acquire(conn, r, held, live):
        nonlocal token
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

    with index._write() as conn:
        hot_done = 0
        while written < events:
            due = hot_done < HOT_LEASES and written >= hot_done * (events // HOT_LEASES)
            r = hot if due else rng.randrange(resources)
            hot_done += int(due)
            held = last.get(r)
            live = held is not None and not held[3] and held[2] > now
            choice = rng.random()
            if r == hot or not live or choice >= 0.9:
                acquire(conn, r, held, live)
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
            if log_index >= per_block:
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
    return {
        "names": names[:-1],
        "holders": people,
        "tokens": tokens,
        "times": times,
        "blocks": list(range(1, block + 1)),
        "head": [block],
    }


class HeadProxy:
    """A loopback node for the SDK's ``history(index=)``: a proxy in front of anvil (which holds the registry)
    that answers ``eth_blockNumber`` with the synthetic chain's head and ``eth_getBlockByNumber`` of a
    synthetic block with its stored hash and timestamp; everything else goes to anvil."""

    def __init__(self, upstream: str, index_path: Path):
        import sqlite3

        conn = sqlite3.connect(index_path)
        self.head = int(conn.execute("SELECT value FROM meta WHERE key = 'synced_block'").fetchone()[0])
        self.blocks = {n: (bytes(h), t) for n, h, t in conn.execute("SELECT number, hash, timestamp FROM blocks")}
        conn.close()
        proxy = self

        class Http(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                # Headers and body go out as two writes: without this, Nagle's algorithm holds the body
                # until the client's delayed ACK (40 ms a request on Linux), which would be the proxy's cost.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                replies = (
                    [proxy.answer(upstream, r) for r in body]
                    if isinstance(body, list)
                    else proxy.answer(upstream, body)
                )
                data = json.dumps(replies).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Http)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, upstream: str, request: dict) -> dict:
        method, params = request.get("method"), request.get("params", [])
        result: object
        if method == "eth_blockNumber":
            result = hex(self.head)
        elif method == "eth_getBlockByNumber" and isinstance(params[0], str) and params[0].startswith("0x"):
            number = int(params[0], 16)
            found = self.blocks.get(number)
            if found is None:
                return {"jsonrpc": "2.0", "id": request.get("id"), **rpc(upstream, request)}  # type: ignore[dict-item]
            result = {
                "number": hex(number),
                "hash": "0x" + found[0].hex(),
                "parentHash": "0x" + "00" * 32,
                "timestamp": hex(found[1]),
                "transactions": [],
            }
        else:
            return rpc(upstream, request)  # type: ignore[return-value]
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def bind(path: Path, registry: Registry) -> None:
    """Bind a synthetic index to a real registry (for the SDK's history(index=) through HeadProxy)."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'registry'", (registry.address,))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'chain_id'", (str(registry.chain.chain_id),))
    conn.commit()
    conn.close()


# ---------------------------------------------------------------------------
# The code before issue 20, for the (before) rows
# ---------------------------------------------------------------------------


def events_before(index: AuditIndex, **where) -> list:
    """events() as it was: the rows, then every block's hash read into a dict (whatever the answer)."""
    clauses, params = ["1 = 1"], []
    for column, value in where.items():
        clauses.append(f"{column} = ?")
        params.append(value)
    rows = index._conn.execute(
        f"SELECT {_projection.EVENT_COLUMNS} FROM events WHERE {' AND '.join(clauses)} ORDER BY block, log_index",
        params,
    ).fetchall()
    hashes = dict(index._conn.execute("SELECT number, hash FROM blocks"))
    return [_projection.log_from_row(row, bytes(hashes.get(row[0], b""))) for row in rows]


def timeline_before(index: AuditIndex, name: str) -> int:
    """timeline_leases' reads as they were: the history, then one events() call per lease (its renewals)."""
    leases = list(index.every(index.history, resource=name))
    for lease in leases:
        events_before(index, token=lease.token, kind="LeaseRenewed")
    return len(leases)


def current_before(index: AuditIndex) -> list:
    """current() as it was before pages: every live lease, by resource (one list)."""
    return index._leases("ended IS NULL AND expires_at > ?", [index._as_of()], order="resource_id")


def takeovers_before(index: AuditIndex, since: int, until: int) -> list:
    """takeovers(since=, until=) as it was before pages: every takeover of the range, sorted by block."""
    from chainfence.audit.index import Takeover, _built

    rows = index._conn.execute(
        "SELECT l.resource_id, l.token, l.holder, l.previous_token, p.holder, p.ended, l.reason, "
        "l.acquired_block, l.acquired_at, l.tx_hash, r.name FROM leases l JOIN leases p ON p.token = l.previous_token "
        "LEFT JOIN resources r ON r.resource_id = l.resource_id WHERE l.acquired_at >= ? AND l.acquired_at <= ? "
        "AND l.previous_token > 0 AND p.holder != l.holder ORDER BY l.acquired_block, l.acquired_tx, l.acquired_log",
        (since, until),
    ).fetchall()
    result = []
    for resource_id, token, holder, previous, previous_holder, ended, reason, block, at, tx_hash, named in rows:
        name, display = _projection.label_of(bytes(resource_id), None if named is None else bytes(named))
        result.append(
            _built(
                Takeover,
                name,
                display,
                bytes(resource_id),
                token,
                holder,
                previous,
                previous_holder,
                ended,
                _projection.reason(reason),
                block,
                at,
                tx_hash,
            )
        )
    return result


#: The long listings: read whole through pages (full reads), and a page from a cursor along each.
def long_listings(index: AuditIndex, picks: dict[str, list], rng: random.Random) -> dict[str, tuple]:
    return {
        "current()": (index.current, dict),
        "takeovers(1 hour)": (
            index.takeovers,
            lambda: {"since": (t := rng.choice(picks["times"])), "until": t + 3_600},
        ),
        "takeovers()": (index.takeovers, dict),
        "completions()": (index.completions, dict),
        "resources()": (index.resources, dict),
        "events()": (index.events, dict),
        "history(hot/one)": (index.history, lambda: {"resource": HOT}),
    }


def cursors(index: AuditIndex, query, arguments: dict) -> list[str]:
    """The next cursor of every page of a listing (where a page along it starts)."""
    return [page.next for page in index.pages(query, **arguments) if page.next is not None]


# ---------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------


def queries(
    path: Path,
    picks: dict[str, list],
    count: int,
    timelines: int,
    sdk: Registry | None,
    before: bool,
    fulls: int = 10,
    seed: int = 11,
) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    index = AuditIndex(path)
    prefixes = sorted({name.split("/")[0] + "/" for name in picks["names"]})
    blocks, times = picks["blocks"], picks["times"]
    kinds = {
        "history": lambda: index.history(rng.choice(picks["names"])),
        "token": lambda: index.lease(rng.choice(picks["tokens"])),
        "holder": lambda: index.leases_of(rng.choice(picks["holders"])),
        "at(time)": lambda: index.holder_at(rng.choice(picks["names"]), time=rng.choice(times)),
        "at(block)": lambda: index.holder_at(rng.choice(picks["names"]), block=rng.choice(blocks)),
        "current()": lambda: index.current(),
        "current(prefix)": lambda: index.current(prefix=rng.choice(prefixes)),
        "takeovers(100 blocks)": lambda: index.takeovers(from_block=(b := rng.choice(blocks)), to_block=b + 99),
        "takeovers(1 hour)": lambda: index.takeovers(since=(t := rng.choice(times)), until=t + 3_600),
        "takeovers(resource)": lambda: index.takeovers(resource=rng.choice(picks["names"])),
        "takeovers()": lambda: index.takeovers(),
        "completions(100 blocks)": lambda: index.completions(from_block=(b := rng.choice(blocks)), to_block=b + 99),
        "completions(resource)": lambda: index.completions(resource=rng.choice(picks["names"])),
        "completions()": lambda: index.completions(),
        "resources(prefix)": lambda: index.resources(rng.choice(prefixes)),
        "resources()": lambda: index.resources(),
        "events(resource)": lambda: index.events(resource_id=keccak(rng.choice(picks["names"]).encode())),
        "events(token)": lambda: index.events(token=rng.choice(picks["tokens"])),
        "events()": lambda: index.events(),
        "history(hot/one)": lambda: index.history(HOT),
    }
    listings = long_listings(index, picks, rng)
    for name, (query, arguments) in listings.items():
        if name == "takeovers(1 hour)":
            continue  # an hour's listing is a page or two: its pages along it are its first
        given = arguments()
        along = cursors(index, query, given)
        kinds[f"{name} [page N]"] = lambda query=query, along=along, given=given: query(
            after=rng.choice(along), **given
        )
    if sdk is not None:
        kinds["sdk history(index=)"] = lambda: audit.history(sdk, rng.choice(picks["names"]), index=index)
    if before:
        kinds["events(resource) (before)"] = lambda: events_before(
            index, resource_id=keccak(rng.choice(picks["names"]).encode())
        )
        kinds["current() (before)"] = lambda: current_before(index)
        kinds["takeovers(1 hour) (before)"] = lambda: takeovers_before(index, (t := rng.choice(times)), t + 3_600)
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    sizes: dict[str, list[int]] = {kind: [] for kind in kinds}

    def timed(kind: str, run) -> object:
        started, on_cpu = time.perf_counter(), time.thread_time()
        answer = run()
        samples.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        cpu.setdefault(kind, []).append((time.thread_time() - on_cpu) * 1000)
        return answer

    for _ in range(count):
        for kind, run in kinds.items():  # interleaved: no kind gets a warmer cache by going first
            answer = timed(kind, run)
            sizes[kind].append(len(answer) if isinstance(answer, list) else int(answer is not None))
    for sample in range(timelines):
        page = timed("timeline(hot/one)", lambda: render(index.timeline_leases([HOT]), now=picks["times"][-1]))
        sizes["timeline(hot/one)"] = [str(page).count('data-kind="bar"')]
        if before and sample == 0:  # one sample: about 40 s on the sparse index
            sizes["timeline(hot/one) (before)"] = [
                int(timed("timeline(hot/one) (before)", lambda: timeline_before(index, HOT)))
            ]  # type: ignore[call-overload]
    # Full reads: whole listings through pages; each page call timed, and the whole read.
    calls: dict[str, list[float]] = {}
    calls_cpu: dict[str, list[float]] = {}
    reads: dict[str, list[float]] = {}
    shape: dict[str, tuple[int, int]] = {}
    for name, (query, arguments) in listings.items():
        rounds = fulls if name in ("current()", "takeovers(1 hour)", "history(hot/one)") else 1
        for _ in range(rounds):
            pages = index.pages(query, **arguments())  # reads the first page
            started, rows, count = time.perf_counter(), 0, 0
            iterator = iter(pages)
            while True:
                at, on_cpu = time.perf_counter(), time.thread_time()
                page = next(iterator, None)
                if page is None:
                    break
                calls.setdefault(name, []).append((time.perf_counter() - at) * 1000)
                calls_cpu.setdefault(name, []).append((time.thread_time() - on_cpu) * 1000)
                rows, count = rows + len(page), count + 1
            reads.setdefault(name, []).append((time.perf_counter() - started) * 1000)
            shape[name] = (rows, count)
    index.close()
    figures = {
        kind: {
            "p50_ms": statistics.median(values),
            "p99_ms": sorted(values)[int(0.99 * (len(values) - 1))],
            "cpu_p50_ms": statistics.median(cpu[kind]),
            "rows_median": statistics.median(sizes[kind]),
            "samples": len(values),
        }
        for kind, values in samples.items()
    }
    figures["full reads"] = {  # type: ignore[assignment]
        name: {
            "call_p50_ms": statistics.median(values),
            "call_p99_ms": sorted(values)[int(0.99 * (len(values) - 1))],
            "call_cpu_p50_ms": statistics.median(calls_cpu[name]),
            "rows": shape[name][0],
            "pages": shape[name][1],
            "read_ms": statistics.median(reads[name]),
            "reads": len(reads[name]),
        }
        for name, values in calls.items()
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--txs", type=int, default=10_000, help="dense sync: acquisitions on anvil (two events each)")
    parser.add_argument("--per-block", type=int, default=20, help="dense sync: acquisitions a block (500 blocks)")
    parser.add_argument("--sparse-txs", type=int, default=2_000, help="sparse sync: renewals, one a block")
    parser.add_argument("--rounds", type=int, default=3, help="sync rounds of each kind, alternating")
    parser.add_argument("--events", type=int, default=100_000, help="events in each query index")
    parser.add_argument("--resources", type=int, default=5_000)
    parser.add_argument("--holders", type=int, default=500)
    parser.add_argument("--queries", type=int, default=300, help="queries of each kind")
    parser.add_argument("--timelines", type=int, default=5, help="timelines of the 1,000-lease resource")
    parser.add_argument(
        "--full-reads", type=int, default=10, help="full reads of the short long listings (the index-wide: one)"
    )
    parser.add_argument("--skip-sync", action="store_true", help="no sync rounds (queries only)")
    parser.add_argument("--skip-queries", action="store_true", help="no query indexes (sync rounds only)")
    parser.add_argument(
        "--modes", action="store_true", help="sync rounds in the receipts mode too (completeness='receipts')"
    )
    parser.add_argument("--skip-before", action="store_true", help="no (before) rows")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        with AnvilProcess(find_anvil(start=ROOT), extra_args=("--gas-limit", "100000000")) as node:
            chain = Chain.connect(node.url, private_keys=dev_keys(10), timeouts=Timeouts(poll=0.005))
            registry = Registry.deploy(chain, max_ttl=86_400)
            if not args.skip_sync:
                started = time.perf_counter()
                logged = generate(node.url, registry, args.txs, args.per_block)
                dense_top = chain.block_number()
                sparse_logged = generate_sparse(node.url, registry, args.sparse_txs)
                report["generated"] = {
                    "dense_events": logged,
                    "dense_blocks": dense_top,
                    "sparse_events": sparse_logged,
                    "sparse_blocks": chain.block_number() - dense_top,
                    "seconds": time.perf_counter() - started,
                }
                rounds: dict[str, list[dict[str, float]]] = {
                    "dense, batched headers": [],
                    "dense, one request per block": [],
                    "sparse, batched headers": [],
                }
                if args.modes:  # the receipts mode beside the bloom mode, alternating round by round
                    rounds["dense, batched, receipts mode"] = []
                    rounds["sparse, batched, receipts mode"] = []
                for _ in range(args.rounds):
                    rounds["dense, batched headers"].append(sync_round(registry, True, directory, 0, dense_top))
                    if args.modes:
                        rounds["dense, batched, receipts mode"].append(
                            sync_round(registry, True, directory, 0, dense_top, completeness="receipts")
                        )
                    rounds["dense, one request per block"].append(sync_round(registry, False, directory, 0, dense_top))
                    rounds["sparse, batched headers"].append(sync_round(registry, True, directory, dense_top + 1))
                    if args.modes:
                        rounds["sparse, batched, receipts mode"].append(
                            sync_round(registry, True, directory, dense_top + 1, completeness="receipts")
                        )
                report["sync"] = {
                    kind: {
                        "events_per_s": [round(r["events_per_s"]) for r in results],
                        "median_events_per_s": round(statistics.median(r["events_per_s"] for r in results)),
                        "events": results[0]["events"],
                        "blocks": results[0]["blocks"],
                        "pages": results[0]["pages"],
                        "round_trips": statistics.median(r["round_trips"] for r in results),
                    }
                    for kind, results in rounds.items()
                }
                report["load_average"] = [round(x, 2) for x in os.getloadavg()]
            report["queries"] = {}
            for shape, per_block in () if args.skip_queries else (("dense", 10), ("sparse", 1)):
                path = directory / f"queries-{shape}.sqlite"
                started = time.perf_counter()
                picks = synthetic(path, args.events, args.resources, args.holders, per_block)
                built = time.perf_counter() - started
                bind(path, registry)
                proxy = HeadProxy(node.url, path)
                try:
                    sdk = Registry.at(Chain.connect(proxy.url, timeouts=Timeouts(poll=0.005)), registry.address)
                    figures = queries(
                        path, picks, args.queries, args.timelines, sdk, not args.skip_before, args.full_reads
                    )
                finally:
                    proxy.close()
                report["queries"][shape] = {  # type: ignore[index]
                    "events": args.events,
                    "blocks": picks["head"][0],
                    "resources": args.resources + 1,
                    "holders": args.holders,
                    "build_seconds": built,
                    "file_mb": path.stat().st_size / 1e6,
                    "figures": figures,
                }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    if "generated" in report:
        g = report["generated"]
        print(
            f"anvil: dense {g['dense_events']} events in {g['dense_blocks']} blocks, sparse {g['sparse_events']} events "  # type: ignore[index]
            f"in {g['sparse_blocks']} blocks (generated in {g['seconds']:.1f} s)"  # type: ignore[index]
        )
        for kind, figures in report["sync"].items():  # type: ignore[union-attr]
            print(
                f"sync, {kind:30s}: median {figures['median_events_per_s']:>7,} events/s  "
                f"(rounds {', '.join(f'{v:,}' for v in figures['events_per_s'])}; {figures['blocks']} blocks, "
                f"{figures['pages']} pages, {figures['round_trips']} round trips)"
            )
        print(f"load average after the sync rounds: {report['load_average']}")
    for shape, q in report["queries"].items():  # type: ignore[union-attr]
        print(
            f"query index, {shape}: {q['events']:,} events in {q['blocks']:,} blocks, {q['resources']:,} resources, "
            f"{q['holders']} holders, {q['file_mb']:.1f} MB (built in {q['build_seconds']:.1f} s)"
        )
        for kind, figures in q["figures"].items():
            if kind == "full reads":
                continue
            print(
                f"  {kind:32s} p50 {figures['p50_ms']:9.2f} ms  p99 {figures['p99_ms']:9.2f} ms  "
                f"cpu p50 {figures['cpu_p50_ms']:8.2f} ms  (median rows {figures['rows_median']:g}, "
                f"{figures['samples']} samples)"
            )
        print(f"  full reads, {shape} (a page of 100 a call, through AuditIndex.pages):")
        for kind, figures in q["figures"]["full reads"].items():
            print(
                f"  {kind:32s} call p50 {figures['call_p50_ms']:6.2f} ms  p99 {figures['call_p99_ms']:7.2f} ms  "
                f"cpu p50 {figures['call_cpu_p50_ms']:5.2f} ms  "
                f"{figures['rows']:>7,} rows in {figures['pages']:>5,} pages: {figures['read_ms']:9.1f} ms a read "
                f"(median of {figures['reads']})"
            )


if __name__ == "__main__":
    main()
