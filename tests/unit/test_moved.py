"""Old import paths (``chainfence._core.moved.MOVED``) import the very module at the new path and warn,
naming it; the project itself uses none of them, and the tooz driver keeps its registered names."""

from __future__ import annotations

import importlib
import re
import sys
import tomllib
from pathlib import Path

import pytest

from chainfence._core.moved import MOVED

ROOT = Path(__file__).resolve().parents[2]
#: Where an old path is written on purpose: the table itself, the changelog's list and this test.
LISTS_OLD_PATHS = {"src/chainfence/_core/moved.py", "CHANGELOG.md", "tests/unit/test_moved.py"}


@pytest.fixture
def forget(monkeypatch):
    """Forget an old path once the test is over (its ``sys.modules`` entry and its parent's attribute),
    so that every test imports it afresh and leaves the package as it found it."""
    olds: list[str] = []
    yield olds.append
    for old in olds:
        sys.modules.pop(old, None)
        parent, _, name = old.rpartition(".")
        if name in vars(sys.modules[parent]):
            delattr(sys.modules[parent], name)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_same_module_and_warns_naming_the_new_one(old, forget):
    new = importlib.import_module(MOVED[old])
    forget(old)
    assert old not in sys.modules
    with pytest.warns(DeprecationWarning) as caught:
        module = importlib.import_module(old)
    assert module is new
    assert [str(warning.message) for warning in caught] == [
        f"{old} moved to {MOVED[old]} in chainfence 0.2: import {MOVED[old]} (the old path goes in 0.3)"
    ]
    assert caught[0].filename == __file__, "the warning points at the line that imported the old path"
    assert new.__spec__.name == MOVED[old], "the module keeps its own spec"


def test_an_import_statement_of_an_old_path_is_warned_at_its_own_line(forget):
    forget("chainfence.tooz_driver")
    forget("chainfence.sql")
    with pytest.warns(DeprecationWarning) as caught:
        import chainfence.tooz_driver  # noqa: F401
        from chainfence import sql
    assert sql is importlib.import_module("chainfence.integrations.sql")
    assert [(warning.filename, warning.lineno) for warning in caught] == [
        (__file__, caught[0].lineno),
        (__file__, caught[0].lineno + 1),
    ]


def test_control_a_path_that_never_existed_is_no_alias():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("chainfence.no_such_module")


def test_the_project_uses_no_old_path():
    """Every old path, dotted or as a file, is gone from the package, the tests, the scripts and the docs:
    they import the new ones (the suite turns a DeprecationWarning into an error anyway, where it runs)."""
    spellings = [*MOVED, *(old.replace(".", "/") + ".py" for old in MOVED)]
    pattern = re.compile("|".join(rf"(?<![\w.]){re.escape(old)}(?!\w)" for old in spellings))
    files = [
        name
        for tree in ("src", "tests", "scripts", "docs")
        for path in sorted((ROOT / tree).rglob("*"))
        if path.suffix in (".py", ".md", ".sh") and "__pycache__" not in path.parts
        for name in [path.relative_to(ROOT).as_posix()]
        if name not in LISTS_OLD_PATHS
    ] + ["README.md", "pyproject.toml"]
    assert "src/chainfence/registry.py" in files and "README.md" in files
    found = [
        f"{name}:{number}: {match.group(0)}"
        for name in files
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1)
        for match in pattern.finditer(line)
    ]
    assert found == []


def test_control_the_search_finds_an_old_path_written_either_way():
    spellings = [*MOVED, *(old.replace(".", "/") + ".py" for old in MOVED)]
    pattern = re.compile("|".join(rf"(?<![\w.]){re.escape(old)}(?!\w)" for old in spellings))
    assert pattern.search("from chainfence.sql import fenced")
    assert pattern.search("see src/chainfence/_stuck.py")
    assert not pattern.search("from chainfence.integrations.sql import fenced")
    assert not pattern.search("chainfence.sqlite")


def test_the_tooz_driver_keeps_its_registered_names_at_its_new_path():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    points = pyproject["project"]["entry-points"]["tooz.backends"]
    assert sorted(points) == ["chainfence+embedded", "chainfence+http", "chainfence+https"]
    for target in points.values():
        module, _, name = target.partition(":")
        assert module == "chainfence.integrations.tooz"
        assert getattr(importlib.import_module(module), name).__name__ == "ChainfenceDriver"
