"""The code checks' rules that are cheap to read here; the checks themselves run in scripts/check.

scripts/check runs ruff's formatter (check only), ruff's linter and mypy, and the test command
(scripts/test.sh) runs it before the suite: one place runs them. What stays here is structural: no
formatter escapes, mypy strict on every public module by rule, and scripts/check's exit status.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from mypy.main import define_options, process_options

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "chainfence"
TREES = ["src", "tests", "scripts"]


def test_no_formatter_escapes_are_left():
    """Formatter escapes (``fmt`` skip / off comments) would exempt code from the formatter: none are needed."""
    escapes = ("fmt" + ": skip", "fmt" + ": off")  # spelled apart, so this file holds none
    marked = [
        f"{path.relative_to(ROOT)}:{number}"
        for tree in TREES
        for path in (ROOT / tree).rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(escape in line for escape in escapes)
    ]
    assert not marked, marked


# --- mypy strict on every public module, by rule -------------------------------------------------------


def public_modules() -> list[str]:
    """Every module of the package whose dotted name has no ``_``-prefixed part (``chainfence.guard`` yes,
    ``chainfence.guard._guard`` and ``chainfence._node.rpc`` no)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["chainfence", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return names


def not_strict(config: Path, modules: list[str]) -> dict[str, list[str]]:
    """The modules that ``config`` leaves short of mypy's strict mode, with the strict flags each misses.

    The options are mypy's own reading of the file (``process_options``, as the ``mypy`` command reads it),
    each module's the result of every section that matches it, patterns included; the strict flags are the
    ones ``mypy --strict`` sets."""
    _, _, strict_flags = define_options()
    _, options = process_options(["--config-file", str(config), str(PACKAGE)])
    missing = {}
    for module in modules:
        effective = options.clone_for_module(module)
        lacking = [flag for flag, value in strict_flags if getattr(effective, flag) != value]
        if lacking:
            missing[module] = lacking
    return missing


def test_every_public_module_is_strict(monkeypatch):
    monkeypatch.setenv("MYPY_CONFIG_FILE_DIR", str(ROOT))  # mypy sets it while reading; restored after
    modules = public_modules()
    assert {"chainfence", "chainfence.registry", "chainfence.batching", "chainfence.guard"} <= set(modules)
    assert not_strict(ROOT / "pyproject.toml", modules) == {}


def test_control_a_public_module_relaxed_by_a_section_is_found(monkeypatch, tmp_path):
    """The rule's control: the same configuration with a public module relaxed by name, another by a pattern,
    is caught, naming each module and the flag. A private module relaxed is seen relaxed too, and the rule
    leaves it be: it is not among the public modules."""
    monkeypatch.setenv("MYPY_CONFIG_FILE_DIR", str(ROOT))
    config = tmp_path / "pyproject.toml"
    config.write_text(
        (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        + '\n[[tool.mypy.overrides]]\nmodule = ["chainfence.batching", "chainfence._node.*"]\n'
        + "disallow_untyped_defs = false\n"
        + '\n[[tool.mypy.overrides]]\nmodule = ["chainfence.*.watchdog"]\nwarn_return_any = false\n',
        encoding="utf-8",
    )
    found = not_strict(config, [*public_modules(), "chainfence._node.rpc"])
    assert found == {
        "chainfence.batching": ["disallow_untyped_defs"],
        "chainfence.audit.watchdog": ["warn_return_any"],
        "chainfence._node.rpc": ["disallow_untyped_defs"],
    }
    assert "chainfence._node.rpc" not in public_modules()


# --- scripts/check: its exit status ---------------------------------------------------------------------


def _scratch_checkout(tmp_path: Path, module_text: str) -> Path:
    """A checkout for scripts/check: the script, a small pyproject.toml (mypy strict) and one module."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for name in ("check", "_env.sh"):
        shutil.copy2(ROOT / "scripts" / name, root / "scripts" / name)
    (root / "tests").mkdir()
    (root / "src" / "chainfence").mkdir(parents=True)
    (root / "src" / "chainfence" / "__init__.py").write_text(module_text, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[tool.ruff]\nline-length = 120\n\n[tool.mypy]\npython_version = "3.11"\nfiles = ["src/chainfence"]\nstrict = true\n',
        encoding="utf-8",
    )
    return root


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHAINFENCE_CHECK_PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(root / "scripts" / "check")], cwd=root, env=env, capture_output=True, text=True, timeout=240
    )


def test_scripts_check_fails_naming_each_check_that_failed(tmp_path):
    """Unformatted, an unused import (ruff's linter) and an untyped function (mypy strict): all three run,
    the last line names each, and the exit status is 1."""
    done = _check(_scratch_checkout(tmp_path, "import os\n\n\ndef double(x):\n    return x*2\n"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == "scripts/check: failed: ruff format --check, ruff check, mypy"
    assert "F401" in done.stdout and "no-untyped-def" in done.stdout


def test_control_scripts_check_passes_clean_code(tmp_path):
    done = _check(_scratch_checkout(tmp_path, "def double(x: int) -> int:\n    return x * 2\n"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "scripts/check: passed (ruff format --check, ruff check, mypy)"


def test_the_test_command_runs_the_checks_before_the_suite():
    """scripts/test.sh runs scripts/check (set -e: a failed check stops it) before it starts pytest."""
    lines = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8").splitlines()
    check = next(i for i, line in enumerate(lines) if line.strip() == '"$ROOT/scripts/check"')
    pytest_run = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert check < pytest_run
    assert "set -euo pipefail" in (ROOT / "scripts" / "_env.sh").read_text(encoding="utf-8")
