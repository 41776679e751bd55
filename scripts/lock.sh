#!/usr/bin/env bash
# Re-resolve requirements/constraints.txt from pyproject.toml in a throwaway venv.
# Run after changing dependencies in pyproject.toml; commit the result.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"${PYTHON:-python3}" -m venv "$TMP/venv"
"$TMP/venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[dev]"
{
    echo "# Every Python package chainfence and its test suite install, pinned exactly."
    echo "# Used as a constraints file by scripts/demo.sh and scripts/test.sh."
    echo "# Regenerate after changing pyproject.toml: scripts/lock.sh"
    "$TMP/venv/bin/python" -m pip freeze --exclude-editable | grep -v '^chainfence'
} > "$ROOT/requirements/constraints.txt"
echo "wrote requirements/constraints.txt"
