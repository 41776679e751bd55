"""The committed package-lock.json installs with `npm ci`, as scripts/_env.sh runs it.

`npm ci` refuses a lock that is out of step with package.json; for
`@foundry-rs/anvil` that means a lock listing the optional package of every
platform, not only the one it was generated on. ``--dry-run --offline`` checks
exactly that, locally, without downloading anything.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from chainfence.testing.anvil import ANVIL_VERSION

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_lock_pins_the_anvil_the_package_expects():
    packages = committed_lock()["packages"]
    anvil = packages["node_modules/@foundry-rs/anvil"]
    assert anvil["version"] == ANVIL_VERSION
    for name, version in anvil["optionalDependencies"].items():
        assert packages[f"node_modules/{name}"]["version"] == version == ANVIL_VERSION, name
