#!/usr/bin/env python3
"""chainfence's SDK on anvil beside etcd's lease + txn lock and the anvil floor, in one run.

    python scripts/bench_vs_etcd.py                  # 200 alternating samples, 400 acquisitions per throughput run
    python scripts/bench_vs_etcd.py --samples 500 --json

Needs ``etcd`` on PATH (Debian/Ubuntu: ``apt-get install etcd-server``) and
this checkout's anvil (``scripts/test.sh`` installs it into node_modules).
Both run on free loopback ports with their data in temporary directories.

Latency, alternating one sample of each in rotating order:

- **SDK**: ``registry.acquire(name, ttl=60)`` then ``registry.release(...)``
  on a ``Chain.connect(url, private_key=...)`` with its defaults (preflight,
  typed errors, the never-twice sending rules, confirmations 0 on a dev
  chain: the receipt is the confirmation);
- **etcd** (3.4's HTTP/JSON gateway, ``/v3/...``, one keep-alive
  ``http.client`` connection): acquire = ``lease/grant`` + ``kv/txn``
  (put-if-create-revision-is-0 with the lease), release = ``kv/deleterange`` +
  ``lease/revoke``: two requests each, as a lock in a Python client does;
- **anvil floor**: the same acquire and release transactions signed before
  the clock starts, sent on one keep-alive connection with
  ``eth_sendRawTransaction``, then ``eth_getTransactionReceipt`` (no
  preflight, no web3, nothing else).

Throughput: acquisitions of distinct names per second, 8 agents with 8 keys
(threads in this process; and processes, one per agent), and 8 threads
sharing one key (the SDK pipelines its nonces); etcd with 8 threads beside
them.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# CHAINFENCE_SRC: measure another copy of the SDK (e.g. `git archive <commit> src | tar -x -C /tmp/before`,
# then CHAINFENCE_SRC=/tmp/before/src) against the same etcd and floor: the before/after in docs/benchmarks.md.
SRC = Path(os.environ.get("CHAINFENCE_SRC") or ROOT / "src")
sys.path.insert(0, str(SRC))

TTL = 60


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(values) * 1e3, "p99_ms": percentile(values, 99) * 1e3, "n": len(values)}


# ----------------------------------------------------------------------------------------------
# Keep-alive JSON over HTTP (both etcd's gateway and the anvil floor)
# ----------------------------------------------------------------------------------------------


class KeepAlive:
    """One persistent HTTP/1.1 connection posting JSON."""

    def __init__(self, host: str, port: int):
        self.conn = http.client.HTTPConnection(host, port, timeout=30)

    def post(self, path: str, body: object) -> object:
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {data[:200]!r}")
        return json.loads(data)


# ----------------------------------------------------------------------------------------------
# etcd
# ----------------------------------------------------------------------------------------------


class Etcd:
    """A throwaway single-member etcd on loopback ports."""

    def __init__(self) -> None:
        from chainfence.testing.anvil import free_port

        self.binary = shutil.which("etcd")
        if self.binary is None:
            raise SystemExit(
                "etcd is not installed: `apt-get install etcd-server` (Debian/Ubuntu), or put an etcd 3.4+ "
                "binary on PATH (https://github.com/etcd-io/etcd/releases)"
            )
        self.dir = tempfile.mkdtemp(prefix="chainfence-bench-etcd-")
        self.port, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
        self.process = subprocess.Popen(
            [
                self.binary,
                "--name",
                "bench",
                "--data-dir",
                self.dir,
                "--listen-client-urls",
                client_url,
                "--advertise-client-urls",
                client_url,
                "--listen-peer-urls",
                peer_url,
                "--initial-advertise-peer-urls",
                peer_url,
                "--initial-cluster",
                f"bench={peer_url}",
                "--log-level",
                "error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                KeepAlive("127.0.0.1", self.port).post("/v3/kv/range", {"key": b64("health")})
                break
            except (OSError, RuntimeError, http.client.HTTPException):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.close()
                    raise SystemExit("etcd did not start within 60 s") from None
                time.sleep(0.05)
        self.version = self._version()

    def _version(self) -> str:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", "/version")
        return str(json.loads(conn.getresponse().read()).get("etcdserver", "?"))

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class EtcdLock:
    """The usual etcd lock: a lease, then put-if-absent attached to it; release deletes and revokes."""

    def __init__(self, port: int):
        self.http = KeepAlive("127.0.0.1", port)

    def acquire(self, name: str) -> str:
        lease = self.http.post("/v3/lease/grant", {"TTL": TTL})["ID"]
        key = b64(name)
        reply = self.http.post(
            "/v3/kv/txn",
            {
                "compare": [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
                "success": [{"request_put": {"key": key, "value": b64("holder"), "lease": lease}}],
            },
        )
        if not reply.get("succeeded"):
            raise RuntimeError(f"etcd lock {name} is held")
        return lease

    def release(self, name: str, lease: str) -> None:
        self.http.post("/v3/kv/deleterange", {"key": b64(name)})
        self.http.post("/v3/lease/revoke", {"ID": lease})


# ----------------------------------------------------------------------------------------------
# The anvil floor: pre-signed transactions, one keep-alive connection, send then receipt
# ----------------------------------------------------------------------------------------------


class Floor:
    def __init__(self, port: int, key: str, registry: str, chain_id: int):
        from eth_account import Account

        self.http = KeepAlive("127.0.0.1", port)
        self.account = Account.from_key(key)
        self.registry = registry
        self.chain_id = chain_id
        self.nonce = int(self.rpc("eth_getTransactionCount", [self.account.address, "pending"]), 16)

    def rpc(self, method: str, params: list) -> object:
        reply = self.http.post("/", {"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def sign(self, data: bytes) -> bytes:
        tx = {
            "to": self.registry,
            "data": data,
            "value": 0,
            "gas": 200_000,
            "nonce": self.nonce,
            "chainId": self.chain_id,
            "maxFeePerGas": 100 * 10**9,
            "maxPriorityFeePerGas": 10**9,
        }
        self.nonce += 1
        return self.account.sign_transaction(tx).raw_transaction

    def send(self, raw: bytes, *, patient: bool = False) -> dict:
        """Send, then ask for the receipt until it is there: in a tight loop (the latency floor), or
        ``patient``ly, as the SDK asks (at once, then after 1 ms, doubling), so that 8 senders do not
        flood the node with receipt requests (the throughput floor)."""
        tx_hash = self.rpc("eth_sendRawTransaction", ["0x" + raw.hex()])
        gap = 0.001
        while True:
            receipt = self.rpc("eth_getTransactionReceipt", [tx_hash])
            if receipt is not None:
                if receipt["status"] != "0x1":
                    raise RuntimeError(f"floor transaction {tx_hash} failed")
                return receipt
            if patient:
                time.sleep(gap)
                gap = min(2 * gap, 0.1)


def encode(function: str, args: list) -> bytes:
    from eth_abi import encode as abi_encode

    from chainfence._node import artifacts as _artifacts

    selector, types = _artifacts.functions("FencingRegistry")[function]
    return selector + abi_encode(types, args)


# ----------------------------------------------------------------------------------------------
# Latency, alternating
# ----------------------------------------------------------------------------------------------


def latency(url: str, anvil_port: int, etcd_port: int, registry_address: str, samples: int) -> dict:
    from chainfence import Chain, Registry, _names
    from chainfence.testing.anvil import dev_keys

    keys = dev_keys(4)
    chain = Chain.connect(url, private_key=keys[1])
    sdk = Registry.at(chain, registry_address)
    etcd = EtcdLock(etcd_port)
    floor = Floor(anvil_port, keys[2], registry_address, chain.chain_id)
    times: dict[str, list[float]] = {
        f"{who}_{op}": [] for who in ("sdk", "etcd", "floor") for op in ("acquire", "release")
    }

    def sdk_sample(name: str, record: bool) -> None:
        start = time.perf_counter()
        lease = sdk.acquire(name, ttl=TTL)
        middle = time.perf_counter()
        sdk.release(name, lease.token)
        end = time.perf_counter()
        if record:
            times["sdk_acquire"].append(middle - start)
            times["sdk_release"].append(end - middle)

    def etcd_sample(name: str, record: bool) -> None:
        start = time.perf_counter()
        lease = etcd.acquire(name)
        middle = time.perf_counter()
        etcd.release(name, lease)
        end = time.perf_counter()
        if record:
            times["etcd_acquire"].append(middle - start)
            times["etcd_release"].append(end - middle)

    def floor_sample(name: str, record: bool) -> None:
        raw = floor.sign(encode("acquire", [name, TTL]))
        start = time.perf_counter()
        receipt = floor.send(raw)
        end = time.perf_counter()
        acquired = next(log for log in receipt["logs"] if len(log["topics"]) >= 3)
        token = int(acquired["topics"][2], 16)
        raw = floor.sign(encode("release", [_names.resource_id(name), token]))
        start2 = time.perf_counter()
        floor.send(raw)
        end2 = time.perf_counter()
        if record:
            times["floor_acquire"].append(end - start)
            times["floor_release"].append(end2 - start2)

    kinds = [("sdk", sdk_sample), ("etcd", etcd_sample), ("floor", floor_sample)]
    for i in range(10):  # warm up connections and caches
        for who, sample in kinds:
            sample(f"warm/{who}/{i}", False)
    for i in range(samples):
        rotated = kinds[i % 3 :] + kinds[: i % 3]  # rotate the order: nobody always goes first
        for who, sample in rotated:
            sample(f"lat/{who}/{i}", True)
    return {key: summary(values) for key, values in times.items()}


# ----------------------------------------------------------------------------------------------
# Throughput
# ----------------------------------------------------------------------------------------------


def _share(total: int, agents: int) -> list[int]:
    return [total // agents + (1 if i < total % agents else 0) for i in range(agents)]


def sdk_threads(url: str, registry_address: str, total: int, agents: int, *, one_key: bool, tag: str) -> float:
    from chainfence import Chain, Registry
    from chainfence.testing.anvil import dev_keys

    keys = dev_keys(agents + 4)[4:]
    chain = Chain.connect(url, private_keys=keys[:1] if one_key else keys)
    registries = [
        Registry.at(chain, registry_address).connect(chain.accounts[0 if one_key else i]) for i in range(agents)
    ]
    counts = _share(total, agents)

    def work(i: int) -> None:
        for n in range(counts[i]):
            registries[i].acquire(f"tp/{tag}/{i}/{n}", ttl=TTL)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=agents) as pool:
        list(pool.map(work, range(agents)))
    return total / (time.perf_counter() - start)


def _process_agent(url: str, registry_address: str, key: str, count: int, tag: str, ready, go, done) -> None:
    from chainfence import Chain, Registry

    registry = Registry.at(Chain.connect(url, private_key=key), registry_address)
    registry.acquire(f"tp/{tag}/warm", ttl=TTL)
    ready.release()
    go.wait()
    for n in range(count):
        registry.acquire(f"tp/{tag}/{n}", ttl=TTL)
    done.release()


def sdk_processes(url: str, registry_address: str, total: int, agents: int, tag: str) -> float:
    from chainfence.testing.anvil import dev_keys

    keys = dev_keys(agents + 4)[4:]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SRC), str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")])
    context = multiprocessing.get_context("spawn")
    ready, done, go = context.Semaphore(0), context.Semaphore(0), context.Event()
    procs = [
        context.Process(
            target=_process_agent, args=(url, registry_address, keys[i], count, f"{tag}/{i}", ready, go, done)
        )
        for i, count in enumerate(_share(total, agents))
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.acquire(timeout=120)
    start = time.perf_counter()
    go.set()
    for _ in procs:
        done.acquire(timeout=300)
    elapsed = time.perf_counter() - start
    for proc in procs:
        proc.join(60)
    return total / elapsed


def floor_threads(port: int, registry_address: str, chain_id: int, total: int, agents: int, tag: str) -> float:
    """The floor's throughput: pre-signed acquisitions, one key and one keep-alive connection per thread."""
    from chainfence.testing.anvil import dev_keys

    floors = [Floor(port, key, registry_address, chain_id) for key in dev_keys(agents + 4)[4:]]
    signed = [
        [floor.sign(encode("acquire", [f"tp/{tag}/{i}/{n}", TTL])) for n in range(count)]
        for i, (floor, count) in enumerate(zip(floors, _share(total, agents)))
    ]

    def work(i: int) -> None:
        for raw in signed[i]:
            floors[i].send(raw, patient=True)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=agents) as pool:
        list(pool.map(work, range(agents)))
    return total / (time.perf_counter() - start)


def etcd_threads(port: int, total: int, agents: int, tag: str) -> float:
    locks = [EtcdLock(port) for _ in range(agents)]
    counts = _share(total, agents)

    def work(i: int) -> None:
        for n in range(counts[i]):
            locks[i].acquire(f"tp/{tag}/{i}/{n}")

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=agents) as pool:
        list(pool.map(work, range(agents)))
    return total / (time.perf_counter() - start)


# ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200, help="latency samples of each kind (default 200)")
    parser.add_argument("--total", type=int, default=400, help="acquisitions per throughput run (default 400)")
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds, alternating the order (default 2)")
    parser.add_argument("--skip-processes", action="store_true", help="no throughput run with one process per agent")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    if shutil.which("etcd") is None:
        print(
            "etcd is not installed: `apt-get install etcd-server` (Debian/Ubuntu), or put an etcd 3.4+ binary on "
            "PATH (https://github.com/etcd-io/etcd/releases)",
            file=sys.stderr,
        )
        return 2
    from chainfence import Chain, Registry
    from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

    etcd = Etcd()
    try:
        with AnvilProcess(find_anvil(start=ROOT), accounts=args.agents + 4) as node:
            client = Chain.connect(node.url, private_key=dev_keys(1)[0])
            registry = Registry.deploy(client, max_ttl=3_600)
            anvil_version = client.rpc.client_version()
            results: dict = {
                "etcd_version": etcd.version,
                "anvil": anvil_version,
                "latency": latency(node.url, node.port, etcd.port, registry.address, args.samples),
            }
            runs: dict[str, list[float]] = {
                "sdk_8_threads_8_keys": [],
                "sdk_8_threads_1_key": [],
                "floor_8_threads_8_keys": [],
                "etcd_8_threads": [],
            }
            if not args.skip_processes:
                runs["sdk_8_processes_8_keys"] = []
            for round_ in range(args.rounds):
                order = list(runs)
                for kind in order if round_ % 2 == 0 else order[::-1]:
                    tag = f"{kind}/{round_}"
                    if kind == "sdk_8_threads_8_keys":
                        rate = sdk_threads(node.url, registry.address, args.total, args.agents, one_key=False, tag=tag)
                    elif kind == "sdk_8_threads_1_key":
                        rate = sdk_threads(node.url, registry.address, args.total, args.agents, one_key=True, tag=tag)
                    elif kind == "floor_8_threads_8_keys":
                        rate = floor_threads(node.port, registry.address, client.chain_id, args.total, args.agents, tag)
                    elif kind == "sdk_8_processes_8_keys":
                        rate = sdk_processes(node.url, registry.address, args.total, args.agents, tag)
                    else:
                        rate = etcd_threads(etcd.port, args.total, args.agents, tag)
                    runs[kind].append(rate)
            results["throughput_per_second"] = {
                kind: {"best": max(rates), "runs": rates} for kind, rates in runs.items()
            }
    finally:
        etcd.close()

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    lat = results["latency"]
    print(f"etcd {results['etcd_version']} vs {results['anvil']}; {args.samples} alternating samples of each")
    print(f"  {'':<22} {'p50':>8} {'p99':>8}")
    for op in ("acquire", "release"):
        for who, label in (("sdk", "chainfence SDK"), ("etcd", "etcd lease+txn"), ("floor", "anvil floor")):
            row = lat[f"{who}_{op}"]
            print(f"  {op + ' ' + label:<22} {row['p50_ms']:>6.2f}ms {row['p99_ms']:>6.2f}ms")
        sdk, etcd_p50, floor = (lat[f"{who}_{op}"]["p50_ms"] for who in ("sdk", "etcd", "floor"))
        print(f"  {op}: SDK/etcd {sdk / etcd_p50:.2f}x (goal <= 0.8), SDK/floor {sdk / floor:.2f}x (goal <= 2)")
    print(f"throughput, {args.total} acquisitions of distinct names per run, {args.agents} agents (best of runs):")
    for kind, row in results["throughput_per_second"].items():
        runs_text = ", ".join(f"{rate:.0f}" for rate in row["runs"])
        print(f"  {kind:<24} {row['best']:>6.0f}/s  (runs: {runs_text})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
