#!/usr/bin/env python3
"""Install chainfence beside the lowest and the highest web3 it supports, and beside a user's own web3.

    python3 scripts/check_web3_range.py              # all three venvs (a few minutes)
    python3 scripts/check_web3_range.py lowest       # one of: lowest, highest, preinstalled

Runs from a clean clone with nothing but the package registries: each check
builds a fresh virtual environment under $TMPDIR (pip, by package name) and
installs this checkout into it; anvil comes from node_modules, and when it is
not there the script installs the pinned npm packages first (``npm ci``
from the committed lock, as ``scripts/test.sh`` does). Exit 0 when every check passed, 1 when one failed,
2 when a tool is missing: CI can call it as it is.

- ``lowest``: every runtime dependency at the lower bound pyproject.toml
  declares (web3 7.7.0, the declared floor; eth-account 0.13.6, ...),
  installed first; then chainfence, which must accept them as they are.
  eth-tester 0.14 needs newer eth-* packages, so this venv has no embedded
  chain: its tests run on anvil.
- ``highest``: this checkout's ``.[tester]`` with nothing pinned: pip picks the newest
  releases inside the ranges (web3 8.x).
- ``preinstalled``: a venv that already has web3 7.16.0 (a user's), then
  ``pip install .`` of this checkout: web3 must stay 7.16.0.

In each: the smoke test (import, sign, then deploy, acquire, renew, release,
history, an asyncio acquire on anvil, and an acquire on the embedded chain
where the [tester] extra is installed) and a subset of the suite. anvil comes
from node_modules (``scripts/test.sh`` or ``npm ci`` puts it
there). Prints one line per check and exits 1 if any failed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The suite's subset run in each venv (the chain tests run on anvil, and on eth-tester where it is installed).
#: test_web3_public: no private web3 name in the package (what broke every acquisition beside web3 7.7/7.8).
TESTS = [
    "tests/unit/test_web3_public.py",
    "tests/unit/test_validate.py",
    "tests/unit/test_errors.py",
    "tests/unit/test_packaging.py",
    "tests/chain/test_acquire.py",
    "tests/chain/test_renew_release.py",
    "tests/chain/test_aio.py",
    "tests/chain/test_events.py",
    "tests/faults/test_rpc_faults.py",
]
TEST_TOOLS = ["pytest==9.2.0", "pytest-timeout==2.4.0", "hypothesis==6.170.15"]

#: What a user of web3 7 might already have.
PREINSTALLED_WEB3 = "7.16.0"

SMOKE = r"""
import asyncio, importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
import web3, eth_account, chainfence
from eth_account import Account
from eth_account.messages import encode_defunct
from chainfence import Chain, Registry, audit
from chainfence.aio import AsyncChain, AsyncRegistry
from tests.support.anvil import Anvil, dev_keys

key = dev_keys(1)[0]
signed = Account.sign_message(encode_defunct(text="chainfence"), private_key=key)
assert Account.recover_message(encode_defunct(text="chainfence"), signature=signed.signature) == Account.from_key(key).address
seen = {"web3": web3.__version__, "eth_account": eth_account.__version__ if hasattr(eth_account, "__version__") else "?"}
with Anvil() as node:
    chain = Chain.connect(node.url, private_keys=dev_keys(3))
    registry = Registry.deploy(chain)
    lease = registry.connect(chain.accounts[1]).acquire("smoke/http", ttl=30)
    lease.renew(ttl=60)
    lease.release()
    kinds = [event.kind.value for event in audit.history(registry, "smoke/http")]
    async def run():
        achain = await AsyncChain.connect(node.url, private_keys=dev_keys(3))
        aregistry = await AsyncRegistry.at(achain, registry.address)
        alease = await aregistry.connect(achain.accounts[2]).acquire("smoke/aio", ttl=30)
        await alease.release()
        return alease.token
    seen["http"] = {"token": lease.token, "history": kinds, "aio_token": asyncio.run(run())}
if importlib.util.find_spec("eth_tester"):
    chain = Chain.embedded()
    seen["embedded_token"] = Registry.deploy(chain).connect(chain.accounts[1]).acquire("smoke/embedded", ttl=30).token
print(json.dumps(seen))
"""


def lower_bounds() -> list[str]:
    """``name==lowest`` for every runtime dependency in pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = []
    for requirement in project["dependencies"]:
        name, low = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([^,;\s]+)", requirement).groups()
        pins.append(f"{name}=={low}")
    return pins


def _same_version(a: str | None, b: str) -> bool:
    """7.3 and 7.3.0 are one version."""

    def key(text: str) -> list[str]:
        parts = text.split(".")
        while len(parts) > 1 and parts[-1] == "0":
            parts.pop()
        return parts

    return a is not None and key(a) == key(b)


def run(command: list[str], log: Path, **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    with log.open("a") as out:
        noise = re.compile(r"^WARNING: Location .* is ignored.*\n", flags=re.M)  # a local mirror's find-links
        out.write(f"$ {' '.join(command)}\n{done.stdout}{noise.sub('', done.stderr)}\n")
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {' '.join(command)} (see {log})")
    return done


def pip(venv: Path, log: Path, *args: str) -> None:
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args], log)


def versions(venv: Path, log: Path) -> dict[str, str]:
    out = run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"], log
    ).stdout
    return {n.lower().replace("_", "-"): v for n, _, v in (line.partition("==") for line in out.splitlines())}


def check(flavour: str, workdir: Path) -> str:
    venv = workdir / f"venv-{flavour}"
    log = workdir / f"{flavour}.log"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    target = str(ROOT)
    if flavour == "lowest":
        pip(venv, log, *lower_bounds())
        pip(venv, log, target)
    elif flavour == "highest":
        pip(venv, log, f"{target}[tester]")
    elif flavour == "preinstalled":
        pip(venv, log, f"web3=={PREINSTALLED_WEB3}")
        pip(venv, log, target)
    else:
        raise SystemExit(f"unknown check {flavour!r}: lowest, highest or preinstalled")
    installed = versions(venv, log)
    if flavour == "lowest":
        for pin in lower_bounds():
            name, _, low = pin.partition("==")
            if not _same_version(installed.get(name.lower()), low):
                raise RuntimeError(f"{name} is {installed.get(name.lower())}, not the lower bound {low}")
    if flavour == "preinstalled" and installed["web3"] != PREINSTALLED_WEB3:
        raise RuntimeError(
            f"installing chainfence replaced the user's web3 {PREINSTALLED_WEB3} with {installed['web3']}"
        )
    python = str(venv / "bin" / "python")
    smoke = run([python, "-c", SMOKE, str(ROOT)], log, cwd=workdir).stdout.strip().splitlines()[-1]
    pip(venv, log, *TEST_TOOLS)
    env = dict(os.environ)
    if "eth-tester" not in installed:
        env["CHAINFENCE_BACKENDS"] = "anvil"
    # Older web3 7 releases import websockets' deprecated client, and the suite turns warnings into
    # errors: that one warning is web3's business, not a failure of chainfence.
    quiet = ["-W", "ignore:websockets:DeprecationWarning"]
    tests = run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *quiet, *TESTS], log, cwd=ROOT, env=env)
    summary = tests.stdout.strip().splitlines()[-1]
    pinned = " ".join(
        f"{n} {installed.get(n, '-')}" for n in ("web3", "eth-account", "eth-abi", "eth-utils", "eth-tester")
    )
    return f"{pinned} | smoke {smoke} | {summary}"


def ensure_anvil() -> bool:
    """anvil in node_modules, from the npm registry (the pinned package-lock.json) when it is missing."""
    if (ROOT / "node_modules" / ".bin" / "anvil").exists():
        return True
    import shutil

    npm = shutil.which("npm")
    if npm is None:
        print(
            "check_web3_range: no anvil in node_modules and no npm to install it (apt-get install npm)", file=sys.stderr
        )
        return False
    print("check_web3_range: installing the pinned npm packages (anvil)", file=sys.stderr, flush=True)
    # `npm ci`, as scripts/_env.sh: exactly the committed lock.
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=ROOT, check=False)
    return done.returncode == 0 and (ROOT / "node_modules" / ".bin" / "anvil").exists()


def main(argv: list[str]) -> int:
    if not ensure_anvil():
        return 2
    failed = 0
    with tempfile.TemporaryDirectory(prefix="chainfence-web3-range-") as tmp:
        for flavour in argv or ["lowest", "highest", "preinstalled"]:
            started = time.monotonic()
            try:
                line = "ok     " + check(flavour, Path(tmp))
            except RuntimeError as problem:
                failed += 1
                log = Path(tmp) / f"{flavour}.log"
                line = f"FAILED {problem}\n" + (log.read_text()[-3000:] if log.exists() else "")
            print(f"{flavour:12} {line} ({time.monotonic() - started:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
