#!/usr/bin/env python3
"""The commands a shell agent runs per task, as whole processes: chainfence on anvil beside etcdctl on etcd.

    .venv/bin/python scripts/bench_cli_vs_etcdctl.py                 # 20 rounds
    .venv/bin/python scripts/bench_cli_vs_etcdctl.py --rounds 50 --json

Needs ``etcd`` and ``etcdctl`` on PATH (``scripts/bench.sh`` installs them: Debian's etcd-server, etcd-client) and
this checkout's anvil (``scripts/test.sh`` installs it into node_modules; or set ``CHAINFENCE_ANVIL``).
etcd and anvil run on free loopback ports with their data in temporary directories. The chainfence
commands are the ``chainfence`` entry point beside this interpreter (the venv's), configured the way a
shell agent is: ``CHAINFENCE_RPC_URL``, ``CHAINFENCE_REGISTRY``, ``CHAINFENCE_PRIVATE_KEY`` in the
environment. The package is byte-compiled first, as ``pip install`` does (an editable install under
``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module from source in every process).

Each round runs every pair below, each side as a fresh process (fork, exec, imports, connect, the
request(s), exit), timed from spawn to exit, the two sides one right after the other (which goes
first alternates by round), so a busy machine slows both alike:

=========================  ===============================================================
chainfence                 etcdctl
=========================  ===============================================================
``lock NAME -- true``      ``lock NAME true``
``acquire NAME --ttl 60``  ``lease grant 60`` + ``put NAME v --lease ID`` (two processes)
``status NAME``            ``get NAME``
``verify NAME --token T``  ``get NAME``
``renew NAME --token T``   ``lease keep-alive --once ID``
``release NAME --token T`` ``lease revoke ID``
``claim WS ITEM ITEM``     ``txn`` (put if absent)
``complete ITEM``          ``put NAME done``
=========================  ===============================================================

Prints each pair's median and p90 wall time, the ratio of the medians (issue #19's goal: each at
most 6), and each side's median CPU time (user + system, ``os.wait4``); and, as floors, the bare
interpreter (``python -c pass``) beside ``etcdctl version`` (no request). ``--baseline SRC`` runs
another checkout's chainfence (``PYTHONPATH=SRC``: main's, say) in the same rounds, as a third column,
through a copy of the console script pip writes (its ``cli.run``, or ``cli.main`` where it has none). Tests assert structure
(what the commands import: ``tests/integration/test_cli_imports.py``), never these times.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
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

PAIRS = ("lock NAME -- true", "acquire", "status", "verify", "renew", "release", "claim", "complete")


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


def _console_script(folder: Path, python: str) -> str:
    """The console script pip writes for ``chainfence`` (its template, with this interpreter), for another
    checkout's package: its ``cli.run`` where it has one, else its ``cli.main`` (the entry point before
    issue #19's ``run``), so the baseline starts as its own install would."""
    path = folder / "chainfence"
    path.write_text(
        f"#!{python}\n"
        "# -*- coding: utf-8 -*-\n"
        "import re\n"
        "import sys\n"
        "from chainfence import cli\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        "    sys.exit(getattr(cli, 'run', cli.main)())\n"
    )
    path.chmod(0o755)
    return str(path)


def _missing() -> list[str]:
    return [tool for tool in ("etcd", "etcdctl") if shutil.which(tool) is None]


def _byte_compile(binary: str) -> str:
    """Compile the package the entry point imports, as pip does when it installs one; its folder."""
    found = subprocess.run(
        [str(Path(binary).with_name("python")) if Path(binary).with_name("python").exists() else sys.executable]
        + ["-c", "import chainfence, os; print(os.path.dirname(chainfence.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    compileall.compile_dir(found, quiet=1)
    return found


class Timed:
    """Run a command as a fresh process: its wall time (spawn to exit), its own CPU time (user + system,
    from ``os.wait4``: the process is reaped here, not by ``subprocess``) and its stdout."""

    def __init__(self, env: dict[str, str], errors: Path):
        self.env = env
        self.errors = str(errors)

    def __call__(self, argv: list[str], *, stdin: str | None = None) -> tuple[float, float, str]:
        read_out, write_out = os.pipe()
        read_in, write_in = os.pipe()
        start = time.perf_counter()
        pid = os.posix_spawn(
            argv[0],
            argv,
            self.env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, read_in, 0),
                (os.POSIX_SPAWN_DUP2, write_out, 1),
                (os.POSIX_SPAWN_OPEN, 2, self.errors, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                (os.POSIX_SPAWN_CLOSE, read_out),
                (os.POSIX_SPAWN_CLOSE, write_in),
            ],
        )
        os.close(read_in)
        os.close(write_out)
        if stdin:
            os.write(write_in, stdin.encode())
        os.close(write_in)
        chunks = []
        while chunk := os.read(read_out, 65536):
            chunks.append(chunk)
        os.close(read_out)
        _, status, usage = os.wait4(pid, 0)
        elapsed = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{' '.join(argv)} exited {code}: {Path(self.errors).read_text()[-400:]}")
        return elapsed, usage.ru_utime + usage.ru_stime, b"".join(chunks).decode()


def _summary(samples: dict[str, dict[str, list[tuple[float, float]]]]) -> dict[str, dict[str, float]]:
    summary = {}
    for pair, sides in samples.items():
        row: dict[str, float] = {}
        for side, values in sides.items():
            if not values:
                continue
            walls = [wall for wall, _ in values]
            row[f"{side}_p50_ms"] = statistics.median(walls) * 1e3
            row[f"{side}_p90_ms"] = statistics.quantiles(walls, n=10)[-1] * 1e3 if len(walls) > 1 else walls[0] * 1e3
            row[f"{side}_cpu_ms"] = statistics.median(cpu for _, cpu in values) * 1e3
        row["ratio"] = row["chainfence_p50_ms"] / row["etcdctl_p50_ms"]
        if "baseline_p50_ms" in row:
            row["baseline_ratio"] = row["baseline_p50_ms"] / row["etcdctl_p50_ms"]
        summary[pair] = row
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--no-compile", action="store_true", help="measure the package as it is (no byte-compiling first)"
    )
    parser.add_argument(
        "--baseline",
        metavar="SRC",
        help="another checkout's src folder (main's, say): its chainfence runs the same commands in the same "
        "rounds, by the same interpreter with PYTHONPATH=SRC through pip's console script, as a third column",
    )
    args = parser.parse_args()
    missing = _missing()
    if missing:
        raise SystemExit(
            f"{' and '.join(missing)} not found: `scripts/bench.sh` installs them (Debian's etcd-server, etcd-client), "
            "or put etcd 3.4+ binaries on PATH (https://github.com/etcd-io/etcd/releases)"
        )
    bench = _load_bench_vs_etcd()
    chainfence = _chainfence_binary()
    compiled = None if args.no_compile else _byte_compile(chainfence)
    baseline = str(Path(args.baseline).resolve()) if args.baseline else None
    if baseline is not None and not (Path(baseline) / "chainfence" / "__init__.py").exists():
        raise SystemExit(f"--baseline {args.baseline}: no chainfence package there (give a checkout's src folder)")
    if baseline is not None and not args.no_compile:
        compileall.compile_dir(str(Path(baseline) / "chainfence"), quiet=1)
    etcdctl = shutil.which("etcdctl")
    python = str(Path(chainfence).with_name("python"))
    etcd = bench.Etcd()
    keys = dev_keys(2)
    variants = ["chainfence"] + (["baseline"] if baseline else [])
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {
        pair: {side: [] for side in (*variants, "etcdctl")} for pair in (*PAIRS, "floor: start, no request")
    }
    load_before = os.getloadavg()
    try:
        with AnvilProcess(binary=find_anvil()) as node:
            chain = Chain.connect(node.url, private_keys=keys)
            registry = Registry.deploy(chain, max_ttl=3_600)
            base = {k: v for k, v in os.environ.items() if not k.startswith(("CHAINFENCE_", "ETCDCTL_"))}
            base.pop("PYTHONPATH", None)
            cf_env = {
                **base,
                "CHAINFENCE_RPC_URL": node.url,
                "CHAINFENCE_REGISTRY": registry.address,
                "CHAINFENCE_PRIVATE_KEY": keys[1],
            }
            etcd_env = {**base, "ETCDCTL_API": "3", "ETCDCTL_ENDPOINTS": f"http://127.0.0.1:{etcd.port}"}
            scratch = bench.scratch_dir("chainfence-bench-cli-")
            errors = scratch / "stderr"
            runners = {"chainfence": Timed(cf_env, errors)}
            entry = {"chainfence": chainfence}
            if baseline:
                runners["baseline"] = Timed({**cf_env, "PYTHONPATH": baseline}, errors)
                entry["baseline"] = _console_script(scratch, python)
            ec = Timed(etcd_env, errors)

            def pair(name: str, chainfence_argv, etcd_side, round_no: int, *, sides=None) -> dict[str, str]:
                """Run every side of ``name``, in an order that rotates by round; their outputs.
                ``chainfence_argv(variant)``: the command line of a chainfence side."""
                runs = [(v, lambda v=v: runners[v](chainfence_argv(v))) for v in (sides or variants)]
                runs.append(("etcdctl", etcd_side))
                shift = round_no % len(runs)
                outputs = {}
                for side, run in runs[shift:] + runs[:shift]:
                    wall, cpu, out = run()
                    samples[name][side].append((wall, cpu))
                    outputs[side] = out
                return outputs

            def etcd_acquire(name: str) -> tuple[float, float, str]:
                grant_wall, grant_cpu, out = ec([etcdctl, "lease", "grant", "60"])
                lease_id = out.split()[1]
                put_wall, put_cpu, _ = ec([etcdctl, "put", name, "v", f"--lease={lease_id}"])
                return grant_wall + put_wall, grant_cpu + put_cpu, lease_id

            def one_round(round_no: int) -> None:
                name = {v: f"jobs/r{round_no}-{v}" for v in variants}
                workset = {v: f"ws{round_no}-{v}" for v in variants}
                key = f"jobs/r{round_no}"
                pair(
                    "floor: start, no request",
                    lambda v: [python, "-c", "pass"],
                    lambda: ec([etcdctl, "version"]),
                    round_no,
                    sides=["chainfence"],
                )
                pair(
                    "lock NAME -- true",
                    lambda v: [entry[v], "lock", f"{name[v]}-lock", "--ttl", "60", "--", "true"],
                    lambda: ec([etcdctl, "lock", f"{key}-lock", "true"]),
                    round_no,
                )
                out = pair(
                    "acquire",
                    lambda v: [entry[v], "acquire", name[v], "--ttl", "60", "--json"],
                    lambda: etcd_acquire(key),
                    round_no,
                )
                token = {v: str(json.loads(out[v])["token"]) for v in variants}
                lease_id = out["etcdctl"]
                pair("status", lambda v: [entry[v], "status", name[v]], lambda: ec([etcdctl, "get", key]), round_no)
                pair(
                    "verify",
                    lambda v: [entry[v], "verify", name[v], "--token", token[v]],
                    lambda: ec([etcdctl, "get", key]),
                    round_no,
                )
                pair(
                    "renew",
                    lambda v: [entry[v], "renew", name[v], "--token", token[v], "--ttl", "60"],
                    lambda: ec([etcdctl, "lease", "keep-alive", "--once", lease_id]),
                    round_no,
                )
                pair(
                    "release",
                    lambda v: [entry[v], "release", name[v], "--token", token[v]],
                    lambda: ec([etcdctl, "lease", "revoke", lease_id]),
                    round_no,
                )
                txn = f'create("ws{round_no}/a") = "0"\n\nput ws{round_no}/a claimed\n\n\n'
                out = pair(
                    "claim",
                    lambda v: [entry[v], "claim", workset[v], "a", "b", "--ttl", "60", "--json"],
                    lambda: ec([etcdctl, "txn"], stdin=txn),
                    round_no,
                )
                claimed = {v: json.loads(out[v]) for v in variants}
                pair(
                    "complete",
                    lambda v: [
                        entry[v],
                        "complete",
                        claimed[v]["item"],
                        "--workset",
                        workset[v],
                        "--token",
                        str(claimed[v]["token"]),
                    ],
                    lambda: ec([etcdctl, "put", f"ws{round_no}/a", "done"]),
                    round_no,
                )

            for warm in range(2):  # page caches, etcd's and anvil's first requests
                one_round(10_000 + warm)
            for sides in samples.values():
                for values in sides.values():
                    values.clear()
            for round_no in range(args.rounds):
                one_round(round_no)
    finally:
        etcd.close()

    summary = _summary(samples)
    context = {
        "rounds": args.rounds,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "byte_compiled": compiled,
        "baseline": baseline,
    }
    if args.json:
        print(json.dumps({**context, "pairs": summary}, indent=2))
        return
    print(
        f"{args.rounds} rounds, each pair's sides one after another in rotating order; whole processes, spawn "
        f"to exit (load average {load_before[0]:.1f} before, {context['load_average_after'][0]:.1f} after, "
        f"{context['cpus']} CPUs)"
    )
    head = f"{'command':<26} {'chainfence p50':>14} {'p90':>8} {'etcdctl p50':>12} {'p90':>8} {'ratio':>7}"
    head += f" {'cf CPU':>8} {'etcdctl CPU':>12}"
    if baseline:
        head += f" {'baseline p50':>13} {'ratio':>7} {'CPU':>7}"
    print(head)
    for name, row in summary.items():
        line = (
            f"{name:<26} {row['chainfence_p50_ms']:>11.1f} ms {row['chainfence_p90_ms']:>5.0f} ms"
            f" {row['etcdctl_p50_ms']:>9.1f} ms {row['etcdctl_p90_ms']:>5.0f} ms {row['ratio']:>6.1f}x"
            f" {row['chainfence_cpu_ms']:>5.0f} ms {row['etcdctl_cpu_ms']:>9.0f} ms"
        )
        if baseline and "baseline_p50_ms" in row:
            line += (
                f" {row['baseline_p50_ms']:>10.1f} ms {row['baseline_ratio']:>6.1f}x {row['baseline_cpu_ms']:>4.0f} ms"
            )
        print(line)
    print("floor: `python -c pass` (the venv's interpreter) beside `etcdctl version`")
    if baseline:
        print(f"baseline: {baseline} (PYTHONPATH), the same interpreter, through pip's console script")


if __name__ == "__main__":
    main()
