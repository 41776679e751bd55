"""The reference pages that follow the code without a build: one page per public module, and the
environment variables' table equal to the variables the package reads."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "reference" / "api"
ENVIRONMENT = ROOT / "docs" / "reference" / "environment.md"


def api_modules() -> tuple[str, ...]:
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import chainfence_docs
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    return chainfence_docs.api_modules()


def test_every_public_module_has_its_api_page():
    pages = {path.stem: path.read_text(encoding="utf-8") for path in API.glob("*.rst")}
    modules = api_modules()
    assert sorted(pages) == sorted(modules), "docs/reference/api/: one MODULE.rst per public module"
    for module, text in pages.items():
        assert f".. chainfence-api:: {module}\n" in text


def read_in_source() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "src" / "chainfence").rglob("*.py"):
        found |= set(re.findall(r"CHAINFENCE_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    return found


def listed(text: str) -> set[str]:
    rows = [line for line in text.splitlines() if line.startswith("| `CHAINFENCE_")]
    return {name for row in rows for name in re.findall(r"`(CHAINFENCE_[A-Z0-9_]+)`", row.split("|")[1])}


def test_the_environment_table_lists_every_variable_the_package_reads():
    assert listed(ENVIRONMENT.read_text(encoding="utf-8")) == read_in_source()


def test_control_a_variable_added_or_dropped_is_found():
    text = ENVIRONMENT.read_text(encoding="utf-8")
    assert listed(text) != read_in_source() | {"CHAINFENCE_NEW"}
    dropped = "\n".join(line for line in text.splitlines() if "`CHAINFENCE_ANVIL`" not in line)
    assert listed(dropped) != read_in_source()
