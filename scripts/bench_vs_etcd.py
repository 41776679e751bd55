#!/usr/bin/env python3
"""chainfence's SDK on the node `chainfence node` starts, beside etcd's lease + txn lock and the anvil floor, in one run.

    python scripts/bench_vs_etcd.py                  # 200 alternating samples (1,600+ blocks), then throughput
    python scripts/bench_vs_etcd.py --samples 300 --rounds 0 --json

Needs ``etcd`` on PATH (``scripts/bench.sh bench_vs_etcd.py ...`` installs it: Debian's etcd-server) and
this checkout's anvil (``scripts/test.sh`` installs it into node_modules, or
``npm install --no-save``). The node is ``python -m chainfence node --json``
in a temporary directory, on a free loopback port (anvil with the settings
``chainfence node`` gives it, its IPC socket, its state saved every second),
etcd a single member on free loopback ports; both are stopped at the end.

Latency, alternating one sample of each kind, in rotating order (nobody always
goes first), each sample a new resource name (so the registry's state grows:
anvil 1.7.1's time per block grows with it; ``--names N`` cycles N names per
kind instead, as a service with a fixed set of resources does); every sample
mines 8 blocks, so 200 samples are 1,600 blocks and show how anvil slows as
its chain grows (the p50 of each quarter of the run is printed):

- **SDK over IPC** and **SDK over HTTP**: ``registry.acquire(name, ttl=60)``
  then ``registry.release(name, token)`` on ``Chain.connect(ipc_path)`` and
  ``Chain.connect(rpc_url)`` with their defaults (preflight, typed errors, the
  never-twice sending rules, confirmations 0 on a dev chain: the receipt is the
  confirmation);
- **etcd** (3.4's HTTP/JSON gateway, ``/v3/...``, one keep-alive
  ``http.client`` connection): acquire = ``lease/grant`` + ``kv/txn``
  (put-if-create-revision-is-0 with the lease), release = ``kv/deleterange`` +
  ``lease/revoke``: two requests each, as a lock in a Python client does;
- **anvil floor** over IPC and over HTTP: the same acquire and release
  transactions signed before the clock starts, ``eth_sendRawTransaction``, then
  ``eth_getTransactionReceipt`` asked again at once until it is there, on one
  kept connection (no preflight, no web3, nothing else).

The ratios: each SDK transport against etcd (goal <= 0.8) and against the
floor on the same transport (goal <= 1.3).

``--baseline SRC``: another copy of the SDK (``git archive main src | tar -x -C
/tmp/main``, then ``--baseline /tmp/main/src``) measured in the same run, one
sample of it in turn with the others (**baseline over IPC** and **over HTTP**:
a worker process importing that copy, driven sample by sample, timing its own
calls): before and after side by side, never from runs minutes apart.
``--more-floors`` adds two floors over IPC: **send-sync** (the pre-signed
transaction sent with ``eth_sendRawTransactionSync``, which answers once it is
mined) and **checked** (a pre-encoded ``eth_call`` preflight at ``pending``,
then the send-sync: the least a client that never sends a transaction its
preflight refused must do).

Throughput (``--rounds``, default 1; 0 skips it): acquisitions of distinct
names per second over HTTP, 8 agents with 8 keys (threads in this process;
and processes, one per agent), and 8 threads sharing one key (the SDK
pipelines its nonces); etcd with 8 threads beside them.
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
# then CHAINFENCE_SRC=/tmp/before/src) against the same etcd and floor: the before/after in
# docs/benchmarks/history.md, "Acquisitions under etcd's latency".
SRC = Path(os.environ.get("CHAINFENCE_SRC") or ROOT / "src")
sys.path.insert(0, str(SRC))

TTL = 60


def scratch_dir(prefix: str) -> Path:
    """A fresh temporary directory that is removed when the benchmark exits (state files, sockets)."""
    import atexit

    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


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
                "etcd is not installed: `scripts/bench.sh` installs it (Debian's etcd-server), or put an etcd 3.4+ "
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


class IpcFloor(Floor):
    """:class:`Floor` over the node's IPC socket: one JSON request a line, one reply a line."""

    def __init__(self, path: str, key: str, registry: str, chain_id: int):
        import socket

        from eth_account import Account

        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.reader = self.sock.makefile("rb")
        self.account = Account.from_key(key)
        self.registry = registry
        self.chain_id = chain_id
        self.nonce = int(self.rpc("eth_getTransactionCount", [self.account.address, "pending"]), 16)

    def rpc(self, method: str, params: list) -> object:
        self.sock.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n")
        reply = json.loads(self.reader.readline())
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def send_sync(self, raw: bytes, *, preflight: dict | None = None) -> dict:
        """The pre-signed ``raw`` with ``eth_sendRawTransactionSync`` (one round trip, answered once mined);
        ``preflight``: an ``eth_call`` of it at ``pending`` first (a revert raises: nothing sent)."""
        if preflight is not None:
            self.rpc("eth_call", [preflight, "pending"])
        receipt = self.rpc("eth_sendRawTransactionSync", ["0x" + raw.hex()])
        if receipt["status"] != "0x1":
            raise RuntimeError(f"floor transaction {receipt['transactionHash']} failed")
        return receipt


class Node:
    """``python -m chainfence node --json`` in a temporary directory: the node users start."""

    def __init__(self) -> None:
        from chainfence.testing.anvil import free_port

        self.dir = tempfile.mkdtemp(prefix="chainfence-bench-node-")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "chainfence", "node", "--dir", self.dir, "--port", str(free_port()), "--json"],
            cwd=self.dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"chainfence node did not start: {self.process.stderr.read()[-2000:]}")
        self.info = json.loads(line)
        self.url = self.info["rpc_url"]
        self.port = int(self.url.rsplit(":", 1)[1])
        self.ipc_path = self.info.get("ipc_path")  # None before the node had an IPC socket
        self.keys = [account["private_key"] for account in self.info["accounts"]]

    def close(self) -> None:
        import signal

        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


#: The kinds of latency sample, in the order of the first sample.
KINDS = (
    "sdk_ipc",
    "sdk_http",
    "etcd",
    "floor_ipc",
    "floor_http",
    "base_ipc",
    "base_http",
    "floor_ipc_sync",
    "floor_ipc_checked",
)


class Baseline:
    """Another copy of the SDK (``--baseline SRC``) in a worker process of its own, driven one sample at a
    time: the worker times its own acquire and release, as :func:`latency` times this copy's."""

    def __init__(self, src: str, node: Node, registry: str):
        env = dict(os.environ, CHAINFENCE_SRC=str(Path(src).resolve()))
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        config = {"url": node.url, "ipc_path": node.ipc_path, "registry": registry, "keys": node.keys[5:7]}
        self.process.stdin.write(json.dumps(config) + "\n")
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit("the baseline worker did not start")

    def sample(self, kind: str, name: str) -> tuple[float, float]:
        self.process.stdin.write(f"{kind} {name}\n")
        acquire, release = self.process.stdout.readline().split()
        return float(acquire), float(release)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(30)


def worker() -> int:
    """``--worker``: the baseline's side of :class:`Baseline` (this process imports ``CHAINFENCE_SRC``'s SDK)."""
    from chainfence import Chain, Registry

    config = json.loads(sys.stdin.readline())
    registries = {
        "base_http": Registry.at(Chain.connect(config["url"], private_key=config["keys"][1]), config["registry"])
    }
    if config["ipc_path"]:
        registries["base_ipc"] = Registry.at(
            Chain.connect(config["ipc_path"], private_key=config["keys"][0]), config["registry"]
        )
    print("ready", flush=True)
    for line in sys.stdin:
        kind, name = line.split(maxsplit=1)
        registry = registries[kind]
        start = time.perf_counter()
        lease = registry.acquire(name.strip(), ttl=TTL)
        middle = time.perf_counter()
        registry.release(name.strip(), lease.token)
        print(f"{middle - start} {time.perf_counter() - middle}", flush=True)
    return 0


def latency(
    node: Node, etcd_port: int, samples: int, names: int = 0, *, baseline: str | None = None, more_floors: bool = False
) -> dict:
    from chainfence import Chain, Registry
    from chainfence._sdk import names as _names

    registry_address = node.info["registry"]
    http_chain = Chain.connect(node.url, private_key=node.keys[1])
    sdk = {"sdk_http": Registry.at(http_chain, registry_address)}
    floors = {"floor_http": Floor(node.port, node.keys[2], registry_address, http_chain.chain_id)}
    if node.ipc_path:
        sdk["sdk_ipc"] = Registry.at(Chain.connect(node.ipc_path, private_key=node.keys[3]), registry_address)
        floors["floor_ipc"] = IpcFloor(node.ipc_path, node.keys[4], registry_address, http_chain.chain_id)
        if more_floors:
            floors["floor_ipc_sync"] = IpcFloor(node.ipc_path, node.keys[7], registry_address, http_chain.chain_id)
            floors["floor_ipc_checked"] = IpcFloor(node.ipc_path, node.keys[8], registry_address, http_chain.chain_id)
    base = Baseline(baseline, node, registry_address) if baseline else None
    base_kinds = {"base_http", "base_ipc"} if node.ipc_path else {"base_http"}
    etcd = EtcdLock(etcd_port)
    kinds = [
        kind
        for kind in KINDS
        if kind in sdk or kind in floors or kind == "etcd" or (base is not None and kind in base_kinds)
    ]
    times: dict[str, list[float]] = {f"{kind}_{op}": [] for kind in kinds for op in ("acquire", "release")}

    def floor_send(kind: str, floor: Floor, raw: bytes, function: str, args: list) -> dict:
        if kind == "floor_ipc_sync":
            return floor.send_sync(raw)
        if kind == "floor_ipc_checked":
            call = {"from": floor.account.address, "to": floor.registry, "data": "0x" + encode(function, args).hex()}
            return floor.send_sync(raw, preflight=call)
        return floor.send(raw)

    def sample(kind: str, name: str, record: bool) -> None:
        if kind.startswith("base_"):
            acquire, release = base.sample(kind, name)
        elif kind in sdk:
            registry = sdk[kind]
            start = time.perf_counter()
            lease = registry.acquire(name, ttl=TTL)
            middle = time.perf_counter()
            registry.release(name, lease.token)
            acquire, release = middle - start, time.perf_counter() - middle
        elif kind == "etcd":
            start = time.perf_counter()
            lease_id = etcd.acquire(name)
            middle = time.perf_counter()
            etcd.release(name, lease_id)
            acquire, release = middle - start, time.perf_counter() - middle
        else:  # the floor: signed (and its preflight encoded) before its clock starts
            floor = floors[kind]
            raw = floor.sign(encode("acquire", [name, TTL]))
            start = time.perf_counter()
            receipt = floor_send(kind, floor, raw, "acquire", [name, TTL])
            acquire = time.perf_counter() - start
            acquired = next(log for log in receipt["logs"] if len(log["topics"]) >= 3)
            args = [_names.resource_id(name), int(acquired["topics"][2], 16)]
            raw = floor.sign(encode("release", args))
            start = time.perf_counter()
            floor_send(kind, floor, raw, "release", args)
            release = time.perf_counter() - start
        if record:
            times[f"{kind}_acquire"].append(acquire)
            times[f"{kind}_release"].append(release)

    first_block = http_chain.block_number()
    for i in range(10):  # warm up connections, nonces and fee quotes
        for kind in kinds:
            sample(kind, f"warm/{kind}/{i}", False)
    for i in range(samples):
        rotated = kinds[i % len(kinds) :] + kinds[: i % len(kinds)]
        for kind in rotated:
            sample(kind, f"lat/{kind}/{i % names if names else i}", True)
    blocks = http_chain.block_number() - first_block
    if base is not None:
        base.close()
    quarter = max(1, samples // 4)
    window = max(1, samples // WINDOWS)
    return {
        "blocks": blocks,
        "first_block": first_block,
        "head": http_chain.block_number(),
        "summary": {key: summary(values) for key, values in times.items()},
        "quarters_p50_ms": {
            key: [statistics.median(values[q : q + quarter]) * 1e3 for q in range(0, quarter * 4, quarter)]
            for key, values in times.items()
            if len(values) >= 4
        },
        # The p50 of each tenth of the run, for the plot of latency as the chain grows (scripts/plot_benchmarks.py).
        "windows_p50_ms": {
            key: [statistics.median(values[w : w + window]) * 1e3 for w in range(0, window * WINDOWS, window)]
            for key, values in times.items()
            if len(values) >= WINDOWS
        },
    }


#: Windows of a latency run whose p50 the JSON reports (``windows_p50_ms``).
WINDOWS = 10


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


LABELS = {
    "sdk_ipc": "chainfence SDK, IPC",
    "sdk_http": "chainfence SDK, HTTP",
    "base_ipc": "baseline SDK, IPC",
    "base_http": "baseline SDK, HTTP",
    "etcd": "etcd lease+txn",
    "floor_ipc": "anvil floor, IPC",
    "floor_http": "anvil floor, HTTP",
    "floor_ipc_sync": "floor send-sync, IPC",
    "floor_ipc_checked": "floor checked, IPC",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--samples", type=int, default=200, help="latency samples of each kind (default 200: 1,600+ blocks)"
    )
    parser.add_argument(
        "--names",
        type=int,
        default=0,
        help="cycle through this many resource names per kind (default 0: a new name each sample, so the "
        "registry's state grows as the run goes)",
    )
    parser.add_argument("--total", type=int, default=400, help="acquisitions per throughput run (default 400)")
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument(
        "--rounds", type=int, default=1, help="throughput rounds, alternating the order (default 1; 0: none)"
    )
    parser.add_argument("--skip-processes", action="store_true", help="no throughput run with one process per agent")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--baseline", metavar="SRC", help="another copy of the SDK's src (main's) measured alternating in the same run"
    )
    parser.add_argument(
        "--more-floors", action="store_true", help="two more floors over IPC: send-sync, and eth_call then send-sync"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker()
    if args.samples < 4:
        parser.error("--samples must be at least 4")

    if shutil.which("etcd") is None:
        print(
            "etcd is not installed: `scripts/bench.sh` installs it (Debian's etcd-server), or put an etcd 3.4+ binary on "
            "PATH (https://github.com/etcd-io/etcd/releases)",
            file=sys.stderr,
        )
        return 2
    from chainfence import Chain
    from chainfence.testing.anvil import find_anvil

    find_anvil(start=ROOT)  # says how to get anvil if there is none
    etcd = Etcd()
    node = None
    try:
        node = Node()
        client = Chain.connect(node.url, private_key=node.keys[0])
        results: dict = {
            "etcd_version": etcd.version,
            "anvil": client.rpc.client_version(),
            "node": {key: node.info.get(key) for key in ("rpc_url", "ipc_path", "registry")},
            "load_average_before": os.getloadavg(),
            "latency": latency(
                node, etcd.port, args.samples, args.names, baseline=args.baseline, more_floors=args.more_floors
            ),
            "load_average_after": os.getloadavg(),
        }
        runs: dict[str, list[float]] = {
            "sdk_8_threads_8_keys": [],
            "sdk_8_threads_1_key": [],
            "floor_8_threads_8_keys": [],
            "etcd_8_threads": [],
        }
        if not args.skip_processes:
            runs["sdk_8_processes_8_keys"] = []
        registry_address = node.info["registry"]
        if args.rounds:
            from eth_account import Account

            from chainfence.testing.anvil import dev_keys

            for key in dev_keys(args.agents + 4)[4:]:  # the throughput agents' keys: funded, past anvil's 10
                client.rpc.request("anvil_setBalance", [Account.from_key(key).address, hex(10**22)])
        for round_ in range(args.rounds):
            order = list(runs)
            for kind in order if round_ % 2 == 0 else order[::-1]:
                tag = f"{kind}/{round_}"
                if kind == "sdk_8_threads_8_keys":
                    rate = sdk_threads(node.url, registry_address, args.total, args.agents, one_key=False, tag=tag)
                elif kind == "sdk_8_threads_1_key":
                    rate = sdk_threads(node.url, registry_address, args.total, args.agents, one_key=True, tag=tag)
                elif kind == "floor_8_threads_8_keys":
                    rate = floor_threads(node.port, registry_address, client.chain_id, args.total, args.agents, tag)
                elif kind == "sdk_8_processes_8_keys":
                    rate = sdk_processes(node.url, registry_address, args.total, args.agents, tag)
                else:
                    rate = etcd_threads(etcd.port, args.total, args.agents, tag)
                runs[kind].append(rate)
        if args.rounds:
            results["throughput_per_second"] = {
                kind: {"best": max(rates), "runs": rates} for kind, rates in runs.items()
            }
    finally:
        if node is not None:
            node.close()
        etcd.close()

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    lat = results["latency"]
    rows = lat["summary"]
    names = f"cycling {args.names} names per kind" if args.names else "a new name each"
    print(
        f"etcd {results['etcd_version']} vs {results['anvil']} as `chainfence node` starts it; {args.samples} "
        f"alternating samples of each ({names}), {lat['blocks']} blocks mined (head {lat['head']}); load average "
        + " -> ".join(
            f"{before:.1f}" for before in (results["load_average_before"][0], results["load_average_after"][0])
        )
    )
    print(f"  {'':<30} {'p50':>8} {'p99':>8}   p50 per quarter of the run")
    for op in ("acquire", "release"):
        for kind, label in LABELS.items():
            row = rows.get(f"{kind}_{op}")
            if row is None:
                continue
            quarters = " ".join(f"{ms:5.2f}" for ms in lat["quarters_p50_ms"].get(f"{kind}_{op}", []))
            print(f"  {op + ' ' + label:<30} {row['p50_ms']:>6.2f}ms {row['p99_ms']:>6.2f}ms   {quarters}")
        etcd_p50 = rows[f"etcd_{op}"]["p50_ms"]
        for transport in ("ipc", "http"):
            sdk, floor = rows.get(f"sdk_{transport}_{op}"), rows.get(f"floor_{transport}_{op}")
            if sdk is None or floor is None:
                continue
            print(
                f"  {op} over {transport.upper()}: SDK/etcd {sdk['p50_ms'] / etcd_p50:.2f}x (goal <= 0.8), "
                f"SDK/floor {sdk['p50_ms'] / floor['p50_ms']:.2f}x (goal <= 1.3)"
            )
            base = rows.get(f"base_{transport}_{op}")
            if base is not None:
                print(
                    f"  {op} over {transport.upper()}: baseline/etcd {base['p50_ms'] / etcd_p50:.2f}x, "
                    f"baseline/floor {base['p50_ms'] / floor['p50_ms']:.2f}x, SDK/baseline "
                    f"{sdk['p50_ms'] / base['p50_ms']:.2f}x"
                )
        for kind in ("floor_ipc_sync", "floor_ipc_checked"):
            sdk, floor = rows.get(f"sdk_ipc_{op}"), rows.get(f"{kind}_{op}")
            if sdk is not None and floor is not None:
                print(f"  {op} over IPC: SDK/{LABELS[kind]} {sdk['p50_ms'] / floor['p50_ms']:.2f}x")
    if "throughput_per_second" in results:
        print(f"throughput over HTTP, {args.total} acquisitions of distinct names per run, {args.agents} agents:")
        for kind, row in results["throughput_per_second"].items():
            runs_text = ", ".join(f"{rate:.0f}" for rate in row["runs"])
            print(f"  {kind:<24} {row['best']:>6.0f}/s  (runs: {runs_text})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
