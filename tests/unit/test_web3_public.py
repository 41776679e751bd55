"""The package uses web3's public API only: no ``web3._utils`` (or any other private web3 name).

Why (issue #17): ``_rpc.py`` formatted blocks and transactions with
``web3._utils.method_formatters``, whose names change between web3 releases; beside web3 7.7 or 7.8
(inside the declared range ``>=7.7,<9``) every acquisition failed with an AttributeError from it.
``scripts/check_web3_range.py`` installs the declared floor and the newest web3 and runs the
smoke test and part of the suite in each; this test keeps the cause from coming back between
those runs: it reads every module of the package, so a private name anywhere fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "chainfence"

#: Distributions whose private names the package must not touch (web3 and the libraries it is built on).
GUARDED = ("web3", "eth_tester", "eth_account", "eth_abi", "eth_utils", "eth_keys", "eth_typing", "hexbytes")

_PRIVATE_PATH = re.compile(r"\b(" + "|".join(GUARDED) + r")(\.\w+)*\.(_[A-Za-z]\w*)")


def _is_guarded(module: str) -> bool:
    return module.split(".")[0] in GUARDED


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def private_uses(source: str) -> list[str]:
    """Every private name of a guarded library that ``source`` imports or reaches, as ``line: what``."""
    tree = ast.parse(source)
    bound: set[str] = set()  # local names bound to a guarded module or to a name imported from one
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_guarded(alias.name):
                    bound.add((alias.asname or alias.name).split(".")[0])
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _is_guarded(node.module):
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                bound.add(alias.asname or alias.name)
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _PRIVATE_PATH.search(node.value):
            found.append(f"{node.lineno}: the string {node.value!r}")  # importlib.import_module("web3._utils...")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_package_imports_and_reaches_no_private_web3_name():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 30 and any(m.relative_to(PACKAGE).as_posix() == "_node/rpc.py" for m in modules)
    offenders = {
        str(module.relative_to(PACKAGE)): uses
        for module in modules
        if (uses := private_uses(module.read_text(encoding="utf-8")))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    "source",
    [
        # The line _rpc.py had (the control: what broke every acquisition beside web3 7.7 and 7.8).
        "def f(raw):\n    from web3._utils import method_formatters\n    return method_formatters.block_result_formatter(raw)\n",
        "import web3._utils.method_formatters\n",
        "from web3 import _utils\n",
        "import web3\nweb3._utils.method_formatters.receipt_formatter({})\n",
        "from web3 import Web3 as W\nW._private_helper()\n",
        "import importlib\nimportlib.import_module('web3._utils.method_formatters')\n",
        "from eth_tester.backends import _private\n",
    ],
)
def test_the_check_finds_every_way_of_reaching_a_private_name(source):
    assert private_uses(source), source


def test_the_check_leaves_public_names_and_our_own_private_attributes_alone():
    source = (
        "from web3 import Web3\nfrom web3.exceptions import Web3RPCError\nfrom web3.providers.async_base import AsyncBaseProvider\n"
        "class P(AsyncBaseProvider):\n    def __init__(self):\n        AsyncBaseProvider.__init__(self)\n        self._lock = 1\n"
        "w3 = Web3()\nw3._chainfence_lean = None\n"
    )
    assert private_uses(source) == []


def test_the_range_script_installs_the_declared_floor_and_says_so():
    """scripts/check_web3_range.py's ``lowest`` is read from pyproject.toml, and its docstring names it:
    raising the floor in one place and not the other fails here (its docstring said 7.3 under a 7.7 floor)."""
    import tomllib

    root = PACKAGE.parents[1]
    from tests.support.scripts import script as load_script

    script = load_script("check_web3_range")
    declared = next(
        requirement
        for requirement in tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
        if requirement.startswith("web3")
    )
    floor = re.match(r"web3\s*>=\s*([\d.]+)", declared).group(1)
    assert f"web3=={floor}" in script.lower_bounds()
    assert f"web3 {floor}" in (script.__doc__ or ""), "the script's docstring names another floor"
