"""The code-quality gate runs with the tests: ruff's lint and format check over src, tests and scripts.

Configured in pyproject.toml ([tool.ruff]); a change that a reviewer's ``ruff check`` or ``ruff format
--check`` would flag fails the suite here, as httpx's scripts/check fails its CI.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ["src", "tests", "scripts"]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", *args, *TREES], cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing_to_lint():
    done = _ruff("check", "--output-format", "concise")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_formatted_as_ruff_formats_it():
    done = _ruff("format", "--check")
    assert done.returncode == 0, done.stdout + done.stderr


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


def test_mypy_finds_no_type_error():
    """mypy over the package (``[tool.mypy]``): strict on the public modules, ``check_untyped_defs`` on the rest.
    The cache lives outside the tree (a fresh clone checks from scratch, as CI does)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
