#!/usr/bin/env python3
"""Where an SDK acquisition's time goes, on anvil as `chainfence node` runs it: requests per call, the time
in Python beside the time on the node, and a cProfile of the loop.

    python scripts/profile_acquire.py                  # 200 acquire+release pairs over IPC and over HTTP
    python scripts/profile_acquire.py --pairs 500 --top 40 --transports --levers --python

For each transport (the node's IPC socket, HTTP): the JSON-RPC requests one
acquire and one release send, counted at the transport (a batch counts once,
under its methods joined by ``+``); then, without a profiler, the p50 of a
call and of its time outside the transport (Python: building, signing and
decoding, the step driver), one transport after the other, alternating;
then a cProfile of the IPC loop. ``--levers``: the SDK with each lever
taken away in turn (the sync send, the receipt poll's first pause, the
eth_call preflight, IPC), alternating. ``--python``: the SDK's own time per
pair with no I/O (one pair's exchanges with the node replayed, by method),
and its costliest stages (``--profile-python``: a cProfile of it too).
``--record FILE`` writes one pair's exchanges; ``--replay FILE --pairs N``
replays them with no node at all, which callgrind counts deterministically
(instructions per pair: the count with ``--pairs N`` less the one with
``--pairs 0``, over N)::

    python scripts/profile_acquire.py --record /tmp/pair.json
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python scripts/profile_acquire.py --replay /tmp/pair.json --pairs 200 2>&1 | grep Collected

``--phases``: one call's time by the clock, split at its two exchanges (the
Python before the preflight is written, the preflight's exchange, the Python
between its answer and the send, the send's exchange, the Python after).

``--transports`` also times the floor (a
pre-signed acquire: the send, then the receipt asked again at once until it
is there; or ``eth_sendRawTransactionSync``, EIP-7966, the send that returns
the receipt) over HTTP keep-alive, IPC (a Unix socket) and WebSocket (if the
``websockets`` package is importable), one sample of each in turn.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Resource names each loop cycles through: the registry's state stays small, so anvil's time per block
#: (which grows with it: docs/benchmarks/history.md, "The node `chainfence node` starts") does not drift under
#: what is measured here.
NAMES = 32
sys.path.insert(0, str(Path(os.environ.get("CHAINFENCE_SRC") or ROOT / "src")))  # as in bench_vs_etcd.py
sys.path.insert(0, str(ROOT / "scripts"))

from bench_vs_etcd import scratch_dir


def counting(transport, seen: collections.Counter, phase: list[str]) -> None:
    """Count every request ``transport`` carries under ``phase[0]`` (a batch once, as its methods joined by +)."""
    request, batch = transport.request, transport.batch

    def counted_request(method, params, **kwargs):
        seen[f"{phase[0]} {method}"] += 1
        return request(method, params, **kwargs)

    def counted_batch(calls, **kwargs):
        seen[f"{phase[0]} " + "+".join(method for method, _ in calls)] += 1
        return batch(calls, **kwargs)

    transport.request, transport.batch = counted_request, counted_batch


def outside(transport, spent: list[float]) -> None:
    """Add the time of every exchange ``transport`` makes to ``spent[0]`` (the rest of a call is Python)."""
    exchange = transport.exchange

    def timed(body, **kwargs):
        start = time.perf_counter()
        try:
            return exchange(body, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    transport.exchange = timed


def transports(pairs: int) -> dict[str, float]:
    """The floor (a pre-signed acquisition: the send, then its receipt) over each transport, one sample of
    each in turn: median ms."""
    from bench_vs_etcd import TTL, Floor, IpcFloor, encode

    from chainfence import Chain, Registry
    from chainfence.cli.node import node_process
    from chainfence.testing.anvil import dev_keys, find_anvil, free_port

    ipc_path = str(scratch_dir("chainfence-ipc-") / "anvil.ipc")
    node = node_process(find_anvil(start=ROOT), port=free_port(), state=None, ipc=ipc_path, die_with_parent=True)
    with node:
        deployer = Chain.connect(node.url, private_key=dev_keys(1)[0])
        registry = Registry.deploy(deployer, max_ttl=3_600)
        floor = Floor(node.port, dev_keys(2)[1], registry.address, deployer.chain_id)
        ipc = IpcFloor(ipc_path, dev_keys(3)[2], registry.address, deployer.chain_id)

        def http_sync(raw: bytes) -> None:
            assert floor.rpc("eth_sendRawTransactionSync", ["0x" + raw.hex()])["status"] == "0x1"

        def ipc_sync(raw: bytes) -> None:
            assert ipc.rpc("eth_sendRawTransactionSync", ["0x" + raw.hex()])["status"] == "0x1"

        kinds = {
            "http_keepalive": (floor, floor.send),
            "http_send_sync": (floor, http_sync),
            "ipc": (ipc, ipc.send),
            "ipc_send_sync": (ipc, ipc_sync),
        }
        stack = contextlib.ExitStack()
        try:
            from websockets.sync.client import connect as ws_connect
        except ImportError:
            pass
        else:
            ws = stack.enter_context(ws_connect(f"ws://127.0.0.1:{node.port}"))

            def ws_rpc(method: str, params: list) -> object:
                ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
                return json.loads(ws.recv())["result"]

            def ws_send(raw: bytes) -> None:
                tx_hash = ws_rpc("eth_sendRawTransaction", ["0x" + raw.hex()])
                while ws_rpc("eth_getTransactionReceipt", [tx_hash]) is None:
                    pass

            kinds["websocket"] = (floor, ws_send)
        times: dict[str, list[float]] = {name: [] for name in kinds}
        from chainfence._node.ipc import LeanIpc
        from chainfence._node.lean_http import LeanHttp

        plain = {"request, LeanHttp": LeanHttp(node.url, timeout=10), "request, LeanIpc": LeanIpc(ipc_path, timeout=10)}
        times.update({name: [] for name in plain})
        try:
            for i in range(pairs):
                for name, (signer, send) in kinds.items():
                    raw = signer.sign(encode("acquire", [f"floor/{name}/{i}", TTL]))
                    start = time.perf_counter()
                    send(raw)
                    times[name].append(time.perf_counter() - start)
                for name, transport in plain.items():  # the SDK's transports, one trivial request
                    start = time.perf_counter()
                    transport.request("eth_blockNumber", [])
                    times[name].append(time.perf_counter() - start)
        finally:
            stack.close()
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def levers(node, ipc_path: str, address: str, pairs: int) -> dict[str, dict[str, float]]:
    """What each lever buys: the SDK's acquire and release over IPC with the levers taken away one at a time
    (private switches of the sender, for this measurement only), one sample of each in turn: p50 ms.

    - ``all levers``: the SDK as it ships (eth_call preflight batched with anvil_getAutomine and the balance, the send
      that returns the receipt, the transaction signed while the preflight is on its way);
    - ``signed after the preflight``: the same, signing only once the preflight has answered;
    - ``no sync send``: the same preflight, then eth_sendRawTransaction and the receipt asked for
      (at once, then after 1 ms, doubling: the receipt wait);
    - ``no sync, 0.2 ms poll``: the same, the first pause 0.2 ms instead of 1 ms;
    - ``estimateGas preflight``: as it was before (eth_estimateGas at pending, send, receipt polls);
    - ``... over HTTP``: as it was before, over HTTP.
    """
    from chainfence import Chain, Registry
    from chainfence._node import sending
    from chainfence.testing.anvil import dev_keys

    def agent(url: str, key: int, *, sync: bool = True, probe: bool = True, gap: float | None = None, presign=True):
        registry = Registry.at(Chain.connect(url, private_key=dev_keys(10)[key]), address)
        sender = registry.chain._sender
        sender._sync_refused = not sync
        if not probe:
            sender._automine_probe = None
        if not presign and hasattr(sender, "_presigned"):
            sender._presigned = lambda sender, call: None
        return registry, gap

    variants = {
        "all levers (IPC)": agent(ipc_path, 4),
        "signed after the preflight (IPC)": agent(ipc_path, 9, presign=False),
        "no sync send (IPC)": agent(ipc_path, 5, sync=False),
        "no sync, 0.2 ms poll (IPC)": agent(ipc_path, 6, sync=False, gap=0.0002),
        "estimateGas preflight (IPC)": agent(ipc_path, 7, sync=False, probe=False),
        "estimateGas preflight (HTTP)": agent(node.url, 8, sync=False, probe=False),
    }
    times: dict[str, dict[str, list[float]]] = {name: {"acquire": [], "release": []} for name in variants}
    default_gap = sending._FIRST_POLL_GAP
    try:
        for i in range(pairs + 10):
            for name, (registry, gap) in variants.items():
                sending._FIRST_POLL_GAP = default_gap if gap is None else gap
                start = time.perf_counter()
                lease = registry.acquire(f"lever/{name}/{i % NAMES}", ttl=60)
                middle = time.perf_counter()
                registry.release(lease.resource, lease.token)
                end = time.perf_counter()
                if i >= 10:
                    times[name]["acquire"].append(middle - start)
                    times[name]["release"].append(end - middle)
    finally:
        sending._FIRST_POLL_GAP = default_gap
    return {name: {op: statistics.median(values) * 1e3 for op, values in ops.items()} for name, ops in times.items()}


def phases(registry, pairs: int) -> dict[str, dict[str, float]]:
    """Where one call's time goes over a real transport, by the clock: the Python before the preflight is
    written, the preflight's exchange (the node's work, and the signing done meanwhile), the Python between
    its answer and the send, the send's exchange (the node mines), and the Python after. p50 ms of each, for
    acquire and release, over ``pairs`` pairs (names cycled)."""
    transport = registry.chain.rpc.transport
    exchange = transport.exchange
    marks: list[tuple[str, float]] = []

    def marked(body, **kwargs):
        marks.append(("start", time.perf_counter()))
        try:
            return exchange(body, **kwargs)
        finally:
            marks.append(("end", time.perf_counter()))

    transport.exchange = marked
    parts: dict[str, dict[str, list[float]]] = {op: collections.defaultdict(list) for op in ("acquire", "release")}
    try:
        for i in range(pairs):
            for op in ("acquire", "release"):
                marks.clear()
                start = time.perf_counter()
                if op == "acquire":
                    lease = registry.acquire(f"phases/{i % NAMES}", ttl=60)
                else:
                    registry.release(lease.resource, lease.token)
                end = time.perf_counter()
                if [kind for kind, _ in marks] != ["start", "end", "start", "end"]:
                    continue  # a fee quote was asked too: not the common journey
                (_, a), (_, b), (_, c), (_, d) = marks
                for name, seconds in (
                    ("before the preflight", a - start),
                    ("preflight exchange", b - a),
                    ("between", c - b),
                    ("send exchange", d - c),
                    ("after the receipt", end - d),
                    ("the call", end - start),
                ):
                    parts[op][name].append(seconds)
    finally:
        transport.exchange = exchange
    return {op: {name: statistics.median(values) * 1e3 for name, values in part.items()} for op, part in parts.items()}


def record_pair(registry) -> dict:
    """One acquire+release pair's exchanges with the node, by request (a batch under its methods joined by
    ``+``), with what it takes to replay them without a node (:class:`ReplayTransport`): JSON-able."""
    transport = registry.chain.rpc.transport
    exchange = transport.exchange
    answers: dict[str, list] = collections.defaultdict(list)

    def recording(body, **kwargs):
        reply = exchange(body, **kwargs)
        answers[_replay_key(body)].append(reply)
        return reply

    transport.exchange = recording
    try:
        lease = registry.acquire("python/only", ttl=60)
        registry.release(lease.resource, lease.token)
    finally:
        transport.exchange = exchange
    sender = registry.chain._sender
    return {
        "answers": dict(answers),
        "chain_id": registry.chain.chain_id,
        "registry": registry.address,
        "max_ttl": registry.max_ttl,
        "key": "0x" + bytes(registry.chain._signers[registry.sender].key).hex(),
        "nonce": sender._next_nonce[registry.sender],
        "fees": sender._fee_quote[1],
        "block_gas_limit": sender._block_gas_limit,
    }


def _replay_key(body) -> str:
    return "+".join(item["method"] for item in body) if isinstance(body, list) else body["method"]


#: Seconds spent in the work the SDK hands a transport to do while a request is on its way (``meanwhile``),
#: in the replayed pairs: not on the critical path of a call over a transport that overlaps.
OVERLAPPED = [0.0]
#: Times a replaying transport runs that work (``CHAINFENCE_REPLAY_MEANWHILE=2``: callgrind's count of
#: the overlapped work is then the difference with a run at 1).
MEANWHILE_RUNS = int(os.environ.get("CHAINFENCE_REPLAY_MEANWHILE", "1"))


def replay_registry(recorded: dict):
    """A registry on a chain whose transport answers every request with what :func:`record_pair` recorded
    (by method: the sends alternate acquire's and release's receipts, each given the new transaction's
    hash), so that the SDK's own work runs with no I/O at all. Returns (registry, reset): ``reset()``
    before each pair puts the nonce and what the chain remembers of tokens back."""
    from chainfence import Chain, Registry
    from chainfence._node import rlp
    from chainfence._node.accounts import LocalKey
    from chainfence._node.ipc import LeanIpc
    from chainfence._node.rpc import Rpc

    answers = recorded["answers"]
    sends = collections.Counter()
    overlapped = OVERLAPPED
    hashes: dict[str, str] = {}  # the replayed pairs send the same bytes each time: hashed once (not the SDK's work)

    class ReplayTransport(LeanIpc):
        def __init__(self) -> None:
            super().__init__("/nonexistent/replay.ipc", timeout=1)

        def exchange(self, body, *, timeout=None, **kwargs):
            replies = answers[_replay_key(body)]
            meanwhile = kwargs.get("meanwhile")
            if meanwhile is not None:  # what the SDK does while a request is on its way (off its critical path)
                start = time.perf_counter()
                for _ in range(MEANWHILE_RUNS):
                    meanwhile()
                overlapped[0] += time.perf_counter() - start
            if isinstance(body, list):
                return [dict(answer, id=request["id"]) for answer, request in zip(replies[0], body, strict=True)]
            reply = dict(replies[sends[body["method"]] % len(replies)], id=body["id"])
            if body["method"] in ("eth_sendRawTransactionSync", "eth_sendRawTransaction"):
                sends[body["method"]] += 1
                raw = body["params"][0]
                tx_hash = hashes.get(raw) or hashes.setdefault(raw, "0x" + rlp.keccak256(bytes.fromhex(raw[2:])).hex())
                if isinstance(reply.get("result"), dict):
                    reply["result"] = dict(reply["result"], transactionHash=tx_hash)
            return reply

    key = LocalKey.from_key(recorded["key"])
    chain = Chain(Rpc(ReplayTransport()), [key], dev="anvil", chain_id=recorded["chain_id"])
    registry = Registry(chain, recorded["registry"], sender=key.address)
    registry.__dict__["max_ttl"] = recorded["max_ttl"]
    sender = chain._sender
    sender._block_gas_limit = recorded["block_gas_limit"]

    def reset() -> None:
        chain.__dict__.pop("_seen_tokens", None)  # the replayed token is the same each time
        sender._next_nonce[key.address] = recorded["nonce"]
        sender._fee_quote = (float("inf"), dict(recorded["fees"]))  # never stale: the pair asked none

    return registry, reset


def replay_pairs(registry, reset, pairs: int, *, critical: bool = False) -> float:
    """Seconds per acquire+release pair over the replaying transport; ``critical``: less the work done
    while a request was on its way (:data:`OVERLAPPED`)."""
    OVERLAPPED[0] = 0.0
    start = time.perf_counter()
    for _ in range(pairs):
        reset()
        lease = registry.acquire("python/only", ttl=60)
        registry.release(lease.resource, lease.token)
    elapsed = time.perf_counter() - start - (OVERLAPPED[0] if critical else 0.0)
    return elapsed / max(pairs, 1)


def python_only(registry, pairs: int, top: int = 0) -> dict[str, float]:
    """The SDK's own time per acquire+release pair with no I/O at all: one real pair's exchanges with the
    node are recorded, then replayed (:func:`replay_registry`); the stages that cost most are timed apart
    in a last run. ms per pair. ``top``: print a cProfile of a further run, its ``top`` costliest functions."""
    import functools

    from chainfence._node import events, methods, sending
    from chainfence._sdk import contract as _contract
    from chainfence._sdk import validate as _validate

    replayed, reset = replay_registry(record_pair(registry))
    replay_pairs(replayed, reset, 100)  # warm up
    runs, critical = [], []
    for _ in range(5):
        runs.append(replay_pairs(replayed, reset, pairs))
        critical.append(runs[-1] - OVERLAPPED[0] / pairs)
    if top:
        profile = cProfile.Profile()
        profile.enable()
        replay_pairs(replayed, reset, pairs)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(top)

    spent: collections.Counter = collections.Counter()
    patched: list[tuple[object, str, object]] = []

    def timed(module, name: str) -> None:
        function = getattr(module, name)
        patched.append((module, name, function))

        @functools.wraps(function)
        def measured(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start

        setattr(module, name, measured)

    for module, name in (
        (sending, "sign"),
        (methods, "format_receipt"),
        (events, "decode"),
        (_contract, "abi_encode"),
        (_validate, "resource_id"),
    ):
        if hasattr(module, name):
            timed(module, name)
    try:
        replay_pairs(replayed, reset, pairs)
    finally:
        for module, name, function in patched:
            setattr(module, name, function)
    return {
        "total (best of 5 runs)": min(runs) * 1e3,
        "total (median of 5 runs)": statistics.median(runs) * 1e3,
        "critical path (median: the total less what ran while a request was on its way)": statistics.median(critical)
        * 1e3,
        **{f"{name} (in a timed run)": seconds / pairs * 1e3 for name, seconds in spent.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--transports", action="store_true")
    parser.add_argument("--levers", action="store_true", help="the SDK with each lever taken away, alternating")
    parser.add_argument("--python", action="store_true", help="the SDK's own time, the node's answers replayed")
    parser.add_argument(
        "--profile-python", action="store_true", help="with --python: a cProfile of the replayed pairs too"
    )
    parser.add_argument(
        "--phases", action="store_true", help="one call's time by phase: Python before, between and after its exchanges"
    )
    parser.add_argument("--record", metavar="FILE", help="record one pair's exchanges with the node to FILE; stop")
    parser.add_argument(
        "--replay",
        metavar="FILE",
        help="no node: replay FILE's exchanges for --pairs pairs (under callgrind, --pairs 0 and N: instructions "
        "per pair, deterministic)",
    )
    args = parser.parse_args(argv)

    if args.replay:
        replayed, reset = replay_registry(json.loads(Path(args.replay).read_text()))
        replay_pairs(replayed, reset, 1)  # what the first pair loads lazily: in every count alike
        total = replay_pairs(replayed, reset, args.pairs)
        print(
            f"{total * 1e3:.3f} ms a pair, {args.pairs} pairs replayed "
            f"({OVERLAPPED[0] / max(args.pairs, 1) * 1e3:.3f} ms of it while a request was on its way)"
        )
        return 0

    from chainfence import Chain, Registry
    from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil, free_port

    try:
        from chainfence.cli.node import node_process
    except ImportError:  # an SDK from before the IPC transport (CHAINFENCE_SRC): anvil as the suite runs it, HTTP
        ipc_path = None
        node = AnvilProcess(find_anvil(start=ROOT), port=free_port())
        if args.levers or args.python or args.transports:
            parser.error("--levers, --python and --transports need this checkout's SDK")
    else:
        ipc_path = str(scratch_dir("chainfence-ipc-") / "anvil.ipc")
        node = node_process(find_anvil(start=ROOT), port=free_port(), state=None, ipc=ipc_path, die_with_parent=True)
    with node:
        deployer = Chain.connect(node.url, private_key=dev_keys(1)[0])
        address = Registry.deploy(deployer, max_ttl=3_600).address
        agents = {"http": Registry.at(Chain.connect(node.url, private_key=dev_keys(3)[2]), address)}
        if ipc_path is not None:
            agents = {"ipc": Registry.at(Chain.connect(ipc_path, private_key=dev_keys(3)[1]), address), **agents}
        for registry in agents.values():
            for i in range(20):  # warm up: connections, nonce, fee quote
                registry.release(f"warm/{i}", registry.acquire(f"warm/{i}", ttl=60).token)
        if args.record:
            Path(args.record).write_text(json.dumps(record_pair(agents["ipc" if "ipc" in agents else "http"])))
            return 0

        if args.phases:
            for transport, registry in agents.items():
                print(
                    f"one call over {transport.upper()}, by phase: p50 ms of {args.pairs} (load {os.getloadavg()[0]:.1f})"
                )
                for op, part in phases(registry, args.pairs).items():
                    print(f"  {op:<8} " + "  ".join(f"{name} {ms:.3f}" for name, ms in part.items()))
            print()

        if args.levers:
            print(f"what each lever buys: SDK p50 ms over {args.pairs} samples of each, in turn:")
            for name, ops in levers(node, ipc_path, address, args.pairs).items():
                print(f"  {name:<32} acquire {ops['acquire']:6.3f}   release {ops['release']:6.3f}")
            print()

        seen: collections.Counter = collections.Counter()
        spent = [0.0]
        for transport, registry in agents.items():
            phase = [""]
            counting(registry.chain.rpc.transport, seen, phase)
            outside(registry.chain.rpc.transport, spent)
            for i in range(50):
                phase[0] = f"{transport} acquire"
                lease = registry.acquire(f"count/{transport}/{i % NAMES}", ttl=60)
                phase[0] = f"{transport} release"
                registry.release(lease.resource, lease.token)
        print("JSON-RPC requests per call, counted at the transport (average of 50; the fee quote is refreshed")
        print("at most once a second, the nonce asked once per key):")
        for key, n in sorted(seen.items()):
            print(f"  {key:<60} {n / 50:5.2f}")

        calls: dict[str, list[float]] = collections.defaultdict(list)
        for i in range(args.pairs):
            for transport, registry in agents.items():
                spent[0] = 0.0
                start = time.perf_counter()
                lease = registry.acquire(f"time/{transport}/{i % NAMES}", ttl=60)
                calls[f"{transport} acquire"].append(time.perf_counter() - start)
                calls[f"{transport} acquire, outside the transport"].append(
                    calls[f"{transport} acquire"][-1] - spent[0]
                )
                spent[0] = 0.0
                start = time.perf_counter()
                registry.release(lease.resource, lease.token)
                calls[f"{transport} release"].append(time.perf_counter() - start)
                calls[f"{transport} release, outside the transport"].append(
                    calls[f"{transport} release"][-1] - spent[0]
                )
        print(f"\np50 of {args.pairs} calls of each, alternating (load average {os.getloadavg()[0]:.1f}):")
        for key, values in calls.items():
            print(f"  {key:<45} {statistics.median(values) * 1e3:6.3f} ms")

        registry = agents["ipc" if "ipc" in agents else "http"]
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.enable()
        for i in range(args.pairs):
            registry.release(f"prof/{i % NAMES}", registry.acquire(f"prof/{i % NAMES}", ttl=60).token)
        profile.disable()
        elapsed = time.perf_counter() - start
        print(
            f"\n{args.pairs} acquire+release pairs under cProfile ({next(iter(agents)).upper()}): {elapsed / args.pairs * 1e3:.2f} ms a pair"
        )
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)

        if args.python:
            stages = python_only(agents["ipc"], max(args.pairs, 1000), top=args.top if args.profile_python else 0)
            print("\nthe SDK's own time per acquire+release pair, the node's answers replayed (no I/O):")
            for name, ms in stages.items():
                print(f"  {name:<16} {ms:6.3f} ms")

    if args.transports:
        print(
            f"floor (pre-signed acquire: send + receipt) and one eth_blockNumber through the SDK's transports, "
            f"{args.pairs} samples of each in turn, median ms:"
        )
        for name, ms in transports(args.pairs).items():
            print(f"  {name:<18} {ms:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
