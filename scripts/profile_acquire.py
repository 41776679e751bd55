#!/usr/bin/env python3
"""Where an SDK acquisition's time goes, on a fresh anvil: RPCs per call, and a cProfile of the loop.

    python scripts/profile_acquire.py                # 200 acquire+release pairs, top 25 functions by own time
    python scripts/profile_acquire.py --pairs 500 --top 40 --transports

``--transports`` also times the floor (a pre-signed acquire: send, then the
receipt) over anvil's three transports: HTTP keep-alive, IPC (a Unix socket)
and WebSocket (if the ``websockets`` package is importable); and, over HTTP,
``eth_sendRawTransactionSync`` (EIP-7966: the send returns the receipt).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import json
import os
import pstats
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(os.environ.get("CHAINFENCE_SRC") or ROOT / "src")))  # as in bench_vs_etcd.py
sys.path.insert(0, str(ROOT / "scripts"))


def count_rpcs(chain, registry, pairs: int) -> collections.Counter:
    """JSON-RPC methods sent per acquire and per release, over whichever transport the chain uses."""
    seen: collections.Counter = collections.Counter()
    current = ["acquire"]
    provider_class = type(chain.w3.provider)
    make_request = provider_class.make_request

    def counting(self, method, params):
        seen[current[0] + " " + str(method)] += 1
        return make_request(self, method, params)

    provider_class.make_request = counting
    from web3._utils.http_session_manager import HTTPSessionManager  # web3's own HTTP path, under its onion

    post = HTTPSessionManager.make_post_request

    def counting_post(self, endpoint_uri, data, **kwargs):
        body = json.loads(data)
        for request in body if isinstance(body, list) else [body]:
            seen[current[0] + " " + request.get("method", "?")] += 1
        return post(self, endpoint_uri, data, **kwargs)

    HTTPSessionManager.make_post_request = counting_post
    lean = getattr(chain.rpc, "_lean", None)
    if lean is not None:
        lean_request, lean_batch = lean.request, lean.batch

        def counting_lean(method, params):
            seen[current[0] + " " + method] += 1
            return lean_request(method, params)

        def counting_batch(calls):
            seen[current[0] + " batch[" + "+".join(method for method, _ in calls) + "]"] += 1
            return lean_batch(calls)

        lean.request, lean.batch = counting_lean, counting_batch
    try:
        for i in range(pairs):
            current[0] = "acquire"
            lease = registry.acquire(f"count/{i}", ttl=60)
            current[0] = "release"
            registry.release(f"count/{i}", lease.token)
    finally:
        provider_class.make_request = make_request
        HTTPSessionManager.make_post_request = post
        if lean is not None:
            del lean.request, lean.batch
    return seen


def transports(pairs: int) -> dict[str, float]:
    """The floor (send a pre-signed acquire, then ask for its receipt at once) over each transport,
    one sample of each in turn: median ms."""
    from bench_vs_etcd import TTL, Floor, encode

    from chainfence import Chain, Registry
    from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

    ipc_path = Path(tempfile.mkdtemp(prefix="chainfence-ipc-")) / "anvil.ipc"
    with AnvilProcess(find_anvil(start=ROOT), accounts=4, extra_args=("--ipc", str(ipc_path))) as node:
        deployer = Chain.connect(node.url, private_key=dev_keys(1)[0])
        registry = Registry.deploy(deployer, max_ttl=3_600)
        floor = Floor(node.port, dev_keys(2)[1], registry.address, deployer.chain_id)

        def send_sync(raw: bytes) -> None:  # EIP-7966: one request that returns the receipt (anvil has it)
            receipt = floor.rpc("eth_sendRawTransactionSync", ["0x" + raw.hex()])
            assert receipt["status"] == "0x1"

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(ipc_path))
        reader = sock.makefile("rb")

        def ipc(method: str, params: list) -> object:  # anvil answers one JSON object per request
            sock.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode())
            decoder, text = json.JSONDecoder(), ""
            while True:
                text += reader.read1(65536).decode()
                try:
                    return decoder.raw_decode(text)[0]["result"]
                except ValueError:
                    continue

        def ipc_send(raw: bytes) -> None:
            tx_hash = ipc("eth_sendRawTransaction", ["0x" + raw.hex()])
            while ipc("eth_getTransactionReceipt", [tx_hash]) is None:
                pass

        kinds = {"http_keepalive": floor.send, "http_send_sync": send_sync, "ipc": ipc_send}
        stack = contextlib.ExitStack()
        try:
            from websockets.sync.client import connect as ws_connect
        except ImportError:
            ws = None
        else:
            ws = stack.enter_context(ws_connect(f"ws://127.0.0.1:{node.port}"))

            def ws_rpc(method: str, params: list) -> object:
                ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
                return json.loads(ws.recv())["result"]

            def ws_send(raw: bytes) -> None:
                tx_hash = ws_rpc("eth_sendRawTransaction", ["0x" + raw.hex()])
                while ws_rpc("eth_getTransactionReceipt", [tx_hash]) is None:
                    pass

            kinds["websocket"] = ws_send
        times: dict[str, list[float]] = {name: [] for name in kinds}
        try:
            for i in range(pairs):
                for name, send in kinds.items():
                    raw = floor.sign(encode("acquire", [f"floor/{name}/{i}", TTL]))
                    start = time.perf_counter()
                    send(raw)
                    times[name].append(time.perf_counter() - start)
        finally:
            stack.close()
            sock.close()
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--transports", action="store_true")
    args = parser.parse_args(argv)

    from chainfence import Chain, Registry
    from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

    with AnvilProcess(find_anvil(start=ROOT), accounts=4) as node:
        deployer = Chain.connect(node.url, private_key=dev_keys(1)[0])
        address = Registry.deploy(deployer, max_ttl=3_600).address
        chain = Chain.connect(node.url, private_key=dev_keys(2)[1])
        registry = Registry.at(chain, address)
        for i in range(20):  # warm up
            registry.release(f"warm/{i}", registry.acquire(f"warm/{i}", ttl=60).token)

        counts = count_rpcs(chain, registry, 50)
        print("JSON-RPC requests per call (average of 50):")
        for key, n in sorted(counts.items()):
            print(f"  {key:<45} {n / 50:5.2f}")

        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.enable()
        for i in range(args.pairs):
            registry.release(f"prof/{i}", registry.acquire(f"prof/{i}", ttl=60).token)
        profile.disable()
        elapsed = time.perf_counter() - start
        print(f"\n{args.pairs} acquire+release pairs under cProfile: {elapsed / args.pairs * 1e3:.2f} ms per pair")
        stats = pstats.Stats(profile)
        stats.sort_stats("tottime").print_stats(args.top)

    if args.transports:
        print(f"floor (pre-signed acquire: send + receipt), {args.pairs} samples of each in turn, median ms:")
        for name, ms in transports(args.pairs).items():
            print(f"  {name:<16} {ms:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
