#!/usr/bin/env python3
"""Run the registry's invariant tests (tests/contract/, forge) with the project's pinned tools.

    python scripts/forge_invariants.py             # as the suite runs it: foundry.toml's runs, depth, seed
    python scripts/forge_invariants.py --deep      # 1,024 runs x depth 256, a new seed (printed)
    python scripts/forge_invariants.py --runs 512 --depth 128 --seed 0x2a

forge is the npm package ``@foundry-rs/forge`` (package-lock.json; scripts/test.sh installs it with
``npm ci``), run as its native binary, never its node wrapper: one process that a timeout stops. The
compiler is the pinned npm solc through scripts/solc_shim.js (``--use``): nothing is downloaded, no
forge-std (tests/contract/support/Test.sol). The build goes to a directory of its own (``--out``,
``--cache-path``; default ``.forge/`` in the checkout) and is timed apart from the run.

tests/contract/test_forge_invariants.py runs the suite's run and scripts/forge_mutants.py the
mutation run, both through the functions here.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIM = ROOT / "scripts" / "solc_shim.js"

#: The forge version package.json pins.
FORGE_VERSION = "1.7.1"

#: The invariant test, and the driver test that shows the handler reaches every entry point.
INVARIANT_TEST = "invariant_registry"
DRIVER_TEST = "test_everyPathIsReached"

#: ``--deep``: sixteen times the suite's runs (foundry.toml: 64) and twice its depth (128): 32 times the calls.
DEEP_RUNS = 1024
DEEP_DEPTH = 256

#: The Solidity of the foundry project, beside foundry.toml: what a copy of it (a mutant's) needs.
PROJECT_SOURCES = ("contracts", "tests/contract")


class ForgeNotFound(Exception):
    """No forge binary: the npm toolchain is not installed."""


@dataclass(frozen=True)
class Outcome:
    """One forge command: its exit status, its output (stdout then stderr) and how long it took."""

    returncode: int
    output: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def failures(self) -> list[str]:
        """The reasons of the tests that failed, as forge prints them (``[FAIL: reason] name``)."""
        return re.findall(r"^\[FAIL(?::\s*(.*?))?\]\s+\S+", self.output, flags=re.MULTILINE)

    def passed(self, test: str) -> str | None:
        """forge's line for ``test`` if it passed (``[PASS] invariant_registry() (runs: .., calls: ..)``)."""
        found = re.search(rf"^\[PASS\] {re.escape(test)}\(\).*$", self.output, flags=re.MULTILINE)
        return found.group(0) if found else None


def _platform_package() -> str:
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}.get(platform.system(), "unknown")
    machine = {"x86_64": "amd64", "AMD64": "amd64", "arm64": "arm64", "aarch64": "arm64"}.get(
        platform.machine(), "unknown"
    )
    return f"forge-{system}-{machine}"


def find_forge() -> Path:
    """The native forge: ``$CHAINFENCE_FORGE``, else the npm platform package's binary in node_modules."""
    explicit = os.environ.get("CHAINFENCE_FORGE")
    binary = (
        Path(explicit) if explicit else ROOT / "node_modules" / "@foundry-rs" / _platform_package() / "bin" / "forge"
    )
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    raise ForgeNotFound(
        f"forge not found at {binary}: run scripts/test.sh, or `npm ci` in {ROOT} (package-lock.json pins "
        f"@foundry-rs/forge {FORGE_VERSION}), or point CHAINFENCE_FORGE at a forge {FORGE_VERSION} binary"
    )


def _run(args: list[str], *, project: Path, env: dict[str, str] | None, timeout: float) -> Outcome:
    started = time.monotonic()
    done = subprocess.run(
        args,
        cwd=project,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Outcome(done.returncode, done.stdout + done.stderr, time.monotonic() - started)


def _common(project: Path, build_dir: Path) -> list[str]:
    return [
        "--root",
        str(project),
        "--use",
        str(SHIM),
        "--out",
        str(build_dir / "out"),
        "--cache-path",
        str(build_dir / "cache"),
        "--color",
        "never",
    ]


def build(project: Path = ROOT, build_dir: Path | None = None, *, timeout: float = 600) -> Outcome:
    """``forge build`` of ``project`` (the checkout, or a copy of it) into ``build_dir``."""
    forge = find_forge()
    return _run(
        [str(forge), "build", *_common(project, build_dir or project / ".forge")],
        project=project,
        env=None,
        timeout=timeout,
    )


def test(
    project: Path = ROOT,
    build_dir: Path | None = None,
    *,
    runs: int | None = None,
    depth: int | None = None,
    seed: str | None = None,
    match_test: str | None = None,
    timeout: float = 1800,
) -> Outcome:
    """``forge test`` of ``project`` (built into ``build_dir`` first if it is not); None: foundry.toml's."""
    forge = find_forge()
    args = [str(forge), "test", *_common(project, build_dir or project / ".forge")]
    if match_test:
        args += ["--match-test", match_test]
    env = {}
    if runs is not None:
        env["FOUNDRY_INVARIANT_RUNS"] = str(runs)
    if depth is not None:
        env["FOUNDRY_INVARIANT_DEPTH"] = str(depth)
    if seed is not None:
        args += ["--fuzz-seed", seed]
    return _run(args, project=project, env=env, timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deep", action="store_true", help=f"{DEEP_RUNS} runs x depth {DEEP_DEPTH}, a new seed")
    parser.add_argument("--runs", type=int, help="invariant runs (default: foundry.toml's)")
    parser.add_argument("--depth", type=int, help="calls per run (default: foundry.toml's)")
    parser.add_argument("--seed", help="fuzz seed, e.g. 0x2a (default: foundry.toml's; --deep: a new one)")
    args = parser.parse_args(argv)
    runs, depth, seed = args.runs, args.depth, args.seed
    if args.deep:
        runs, depth = runs or DEEP_RUNS, depth or DEEP_DEPTH
        seed = seed or "0x" + secrets.token_hex(8)
    if seed is not None:
        print(f"seed: {seed}", flush=True)
    try:
        built = build()
    except ForgeNotFound as exc:
        print(f"forge_invariants: {exc}", file=sys.stderr)
        return 2
    print(f"build: {built.seconds:.1f} s")
    if not built.ok:
        print(built.output, file=sys.stderr)
        return built.returncode
    ran = test(runs=runs, depth=depth, seed=seed)
    print(ran.output)
    shown = ", ".join(
        f"{name} {value}" for name, value in (("runs", runs), ("depth", depth), ("seed", seed)) if value is not None
    )
    print(f"run: {ran.seconds:.1f} s ({shown or 'the runs, depth and seed of foundry.toml'})")
    if not ran.ok and seed is not None:
        print(f"repeat it with: python scripts/forge_invariants.py --runs {runs} --depth {depth} --seed {seed}")
    return ran.returncode


if __name__ == "__main__":
    sys.exit(main())
