#!/usr/bin/env python3
"""The commands a shell agent runs per task, as whole processes: chainfence on anvil beside etcdctl on etcd.

    python scripts/bench_cli_vs_etcdctl.py                 # 20 alternating rounds
    python scripts/bench_cli_vs_etcdctl.py --rounds 50 --json

Needs ``etcd`` and ``etcdctl`` on PATH (Debian/Ubuntu: ``apt-get install etcd-server etcd-client``) and
this checkout's anvil (``scripts/test.sh`` installs it into node_modules). etcd and anvil run on free
loopback ports with their data in temporary directories; the chainfence commands are this checkout's
``chainfence`` entry point (the venv's, beside this interpreter), configured the way a shell agent is:
``CHAINFENCE_RPC_URL``, ``CHAINFENCE_REGISTRY``, ``CHAINFENCE_PRIVATE_KEY`` in the environment.

Each round runs every pair once, in a rotating order, each side as a fresh process (fork, exec,
imports, connect, the request(s), exit), timed from spawn to exit:

=========================  ===============================================================
chainfence                 etcdctl
=========================  ===============================================================
``lock NAME -- true``      ``lock NAME true``
``status NAME``            ``get NAME``
``verify NAME --token T``  ``get NAME``
``acquire NAME --ttl 60``  ``lease grant 60`` + ``put NAME v --lease ID`` (two processes)
``renew NAME --token T``   ``lease keep-alive --once ID``
``release NAME --token T`` ``lease revoke ID``
``claim WS ITEM``          ``txn`` (put if absent)
``complete ITEM``          ``put NAME done``
=========================  ===============================================================

Prints each pair's median, p90 and the ratio of medians, and for chainfence the CPU time and peak
memory of the process (``resource.getrusage`` of the children). The goal of issue #19 is each ratio
at most 6.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from chainfence import Chain, Registry
from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil


def _load_bench_vs_etcd():
    spec = importlib.util.spec_from_file_location("bench_vs_etcd", ROOT / "scripts" / "bench_vs_etcd.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _chainfence_binary() -> str:
    candidate = Path(sys.executable).with_name("chainfence")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("chainfence")
    if found is None:
        raise SystemExit("no chainfence entry point beside this interpreter or on PATH: run scripts/test.sh first")
    return found


def _missing() -> list[str]:
    return [tool for tool in ("etcd", "etcdctl") if shutil.which(tool) is None]


class Timed:
    """Run a command as a fresh process; return its wall time (and the children's CPU and peak RSS)."""

    def __init__(self, env: dict[str, str]):
        self.env = env

    def __call__(self, argv: list[str], *, check: bool = True) -> tuple[float, str]:
        start = time.perf_counter()
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if check and done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
        return elapsed, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    missing = _missing()
    if missing:
        raise SystemExit(
            f"{' and '.join(missing)} not found: `apt-get install etcd-server etcd-client` (Debian/Ubuntu), "
            "or put etcd 3.4+ binaries on PATH (https://github.com/etcd-io/etcd/releases)"
        )
    bench = _load_bench_vs_etcd()
    chainfence = _chainfence_binary()
    etcd = bench.Etcd()
    keys = dev_keys(2)
    results: dict[str, dict[str, list[float]]] = {}
    cpu: dict[str, list[float]] = {}
    rss: dict[str, int] = {}
    try:
        with AnvilProcess(binary=find_anvil()) as node:
            chain = Chain.connect(node.url, private_keys=keys)
            registry = Registry.deploy(chain, max_ttl=3_600)
            cf_env = {
                **os.environ,
                "CHAINFENCE_RPC_URL": node.url,
                "CHAINFENCE_REGISTRY": registry.address,
                "CHAINFENCE_PRIVATE_KEY": keys[1],
            }
            etcd_env = {**os.environ, "ETCDCTL_API": "3", "ETCDCTL_ENDPOINTS": f"http://127.0.0.1:{etcd.port}"}
            cf, ec = Timed(cf_env), Timed(etcd_env)
            etcdctl = shutil.which("etcdctl")

            def record(pair: str, who: str, seconds: float) -> None:
                results.setdefault(pair, {"chainfence": [], "etcdctl": []})[who].append(seconds)

            def cf_run(pair: str, argv: list[str]) -> str:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                seconds, out = cf([chainfence, *argv])
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.setdefault(pair, []).append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
                rss[pair] = max(rss.get(pair, 0), after.ru_maxrss)
                record(pair, "chainfence", seconds)
                return out

            def pairs(round_no: int) -> list:
                name = f"jobs/r{round_no}"

                def lock() -> None:
                    cf_run("lock NAME -- true", ["lock", f"{name}-lock", "--ttl", "60", "--", "true"])
                    seconds, _ = ec([etcdctl, "lock", f"{name}-lock", "true"])
                    record("lock NAME -- true", "etcdctl", seconds)

                def acquire_cycle() -> None:
                    out = cf_run("acquire", ["acquire", name, "--ttl", "60", "--json"])
                    token = str(json.loads(out)["token"])
                    cf_run("status", ["status", name])
                    cf_run("verify", ["verify", name, "--token", token])
                    cf_run("renew", ["renew", name, "--token", token, "--ttl", "60"])
                    cf_run("release", ["release", name, "--token", token])
                    grant_s, out = ec([etcdctl, "lease", "grant", "60"])
                    lease_id = out.split()[1]
                    put_s, _ = ec([etcdctl, "put", name, "v", f"--lease={lease_id}"])
                    record("acquire", "etcdctl", grant_s + put_s)
                    seconds, _ = ec([etcdctl, "get", name])
                    record("status", "etcdctl", seconds)
                    seconds, _ = ec([etcdctl, "get", name])
                    record("verify", "etcdctl", seconds)
                    seconds, _ = ec([etcdctl, "lease", "keep-alive", "--once", lease_id])
                    record("renew", "etcdctl", seconds)
                    seconds, _ = ec([etcdctl, "lease", "revoke", lease_id])
                    record("release", "etcdctl", seconds)

                def claim_cycle() -> None:
                    out = cf_run("claim", ["claim", f"ws{round_no}", "a", "b", "--ttl", "60", "--json"])
                    claimed = json.loads(out)
                    cf_run(
                        "complete",
                        ["complete", claimed["item"], "--workset", f"ws{round_no}", "--token", str(claimed["token"])],
                    )
                    txn = f'create("ws{round_no}/a") = "0"\n\nput ws{round_no}/a claimed\n\n\n'
                    start = time.perf_counter()
                    subprocess.run(
                        [etcdctl, "txn"], input=txn, env=etcd_env, capture_output=True, text=True, check=True
                    )
                    record("claim", "etcdctl", time.perf_counter() - start)
                    seconds, _ = ec([etcdctl, "put", f"ws{round_no}/a", "done"])
                    record("complete", "etcdctl", seconds)

                steps = [lock, acquire_cycle, claim_cycle]
                shift = round_no % len(steps)
                return steps[shift:] + steps[:shift]

            for warm in range(2):  # page caches, the venv's bytecode, etcd's first requests
                for step in pairs(10_000 + warm):
                    step()
            results.clear()
            cpu.clear()
            for round_no in range(args.rounds):
                for step in pairs(round_no):
                    step()
    finally:
        etcd.close()

    summary = {}
    for pair, sides in results.items():
        cf_med = statistics.median(sides["chainfence"])
        ec_med = statistics.median(sides["etcdctl"])
        summary[pair] = {
            "chainfence_p50_ms": cf_med * 1e3,
            "chainfence_p90_ms": statistics.quantiles(sides["chainfence"], n=10)[-1] * 1e3,
            "etcdctl_p50_ms": ec_med * 1e3,
            "etcdctl_p90_ms": statistics.quantiles(sides["etcdctl"], n=10)[-1] * 1e3,
            "ratio": cf_med / ec_med,
            "chainfence_cpu_ms": statistics.median(cpu[pair]) * 1e3,
            "chainfence_peak_rss_mib": rss[pair] / 1024,
        }
    if args.json:
        print(json.dumps({"rounds": args.rounds, "pairs": summary}, indent=2))
        return
    print(f"{args.rounds} alternating rounds; whole processes, spawn to exit")
    print(f"{'command':<20} {'chainfence p50':>15} {'etcdctl p50':>12} {'ratio':>7} {'cf CPU':>8} {'cf peak RSS':>12}")
    for pair, row in summary.items():
        print(
            f"{pair:<20} {row['chainfence_p50_ms']:>12.1f} ms {row['etcdctl_p50_ms']:>9.1f} ms "
            f"{row['ratio']:>6.1f}x {row['chainfence_cpu_ms']:>5.0f} ms {row['chainfence_peak_rss_mib']:>8.0f} MiB"
        )


if __name__ == "__main__":
    main()
