"""The tree is the layer map: a module's layer is its folder's; none imports a layer above its own, none in a circle.

The layers, lowest first (the README's "Layout" draws the same):

0. ``_core/``, the foundation: operations as steps, the sync and asyncio faces, records, loggers, the
   contract's bounds, chain times, old import paths; and ``errors``, the error tree every layer raises
   (a file at the top, where users import it);
1. ``_node/``: the only code that talks to a node, and the codecs it speaks with (ABI, RLP, addresses);
2. the lease SDK: the package's top level (its public modules: ``chain``, ``registry``, ``lease``,
   ``keepalive``, ``proofs`` ...) and ``_sdk/`` (their private ones);
3. what builds on a ``Registry`` and is never imported by it: ``recipes/``, ``guard/``, ``audit/``,
   ``integrations/``, ``testing/``; and the faces that re-export them: ``chainfence`` itself and ``aio``;
4. ``cli/`` (and ``__main__``).

A folder has a layer only once :data:`FOLDERS` gives it one. Every import counts: at the top, inside a
function (lazy) and under ``TYPE_CHECKING`` alike, but for the lazy delegations :data:`DELEGATIONS`
names. The analysis reads the source (``ast``), so a module nobody imports at run time is held too.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterable

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "src" / "chainfence"

#: The layer of each folder of the package ("": its top level).
FOLDERS = {
    "_core": 0,
    "_node": 1,
    "": 2,
    "_sdk": 2,
    "recipes": 3,
    "guard": 3,
    "audit": 3,
    "integrations": 3,
    "testing": 3,
    "cli": 4,
}
#: The files at the top that are not the SDK's: their layer, and why.
TOP_FILES = {
    "errors": (0, "the error tree: every layer raises it, and users import it from chainfence.errors"),
    "__init__": (3, "chainfence itself, the public face: it re-exports every family (lazily)"),
    "aio": (3, "the asyncio facade: it re-exports the guard's and the election's asyncio faces"),
    "__main__": (4, "python -m chainfence: the CLI"),
}
#: Imports up a layer that run only when called (lazy, or for type checkers), each named with why.
DELEGATIONS = {
    (
        "chainfence._sdk.retired",
        "chainfence.audit._history",
    ): "the retired Registry.history (until 0.3) is audit.history",
    (
        "chainfence._sdk.retired",
        "chainfence.audit.watchdog",
    ): "the retired Registry.stuck (until 0.3) is watchdog.stuck",
    ("chainfence._sdk.retired", "chainfence.recipes.lease_set"): (
        "the retired Registry.acquire_many (until 0.3) is LeaseSet.acquire, a recipe"
    ),
}
LAYER_NAMES = {0: "foundation", 1: "node", 2: "SDK", 3: "families", 4: "CLI"}


def layer_of(module: str) -> int:
    """The layer of ``module`` (a dotted name under ``chainfence``): its folder's (KeyError: a folder
    :data:`FOLDERS` does not place)."""
    parts = module.split(".")[1:]
    if len(parts) <= 1:
        name = parts[0] if parts else "__init__"
        if name in TOP_FILES:
            return TOP_FILES[name][0]
        if name not in FOLDERS:
            return FOLDERS[""]
    return FOLDERS[parts[0]]


def module_names(root: pathlib.Path = PACKAGE) -> dict[str, pathlib.Path]:
    names = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(module: str, source: str, is_package: bool, known: Iterable[str]) -> list[tuple[str, str]]:
    """``(imported module, how)`` for every import of ``chainfence`` modules in ``source``; ``how`` is
    ``top``, ``lazy`` (inside a function or class) or ``type-only`` (under ``TYPE_CHECKING``)."""
    known = set(known)
    tree = ast.parse(source)
    type_only = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
        for node in ast.walk(branch)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
            # ``from . import x, y`` of submodules imports them (and the package, which is lazy): count them.
            targets = submodules if len(submodules) == len(node.names) else [target, *submodules]
        else:
            continue
        how = "type-only" if id(node) in type_only else ("top" if node.col_offset == 0 else "lazy")
        for target in targets:
            if target != "chainfence" and not target.startswith("chainfence."):
                continue
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != module:
                found.append((target, how))
    return found


def import_graph(root: pathlib.Path = PACKAGE) -> dict[str, list[tuple[str, str]]]:
    names = module_names(root)
    return {
        module: imports_of(module, path.read_text(encoding="utf-8"), path.name == "__init__.py", names)
        for module, path in names.items()
    }


def upward_imports(graph: dict[str, list[tuple[str, str]]]) -> list[str]:
    return sorted(
        f"{module} (layer {layer_of(module)}, {LAYER_NAMES[layer_of(module)]}) imports {target} "
        f"(layer {layer_of(target)}, {LAYER_NAMES[layer_of(target)]}) [{how}]"
        for module, edges in graph.items()
        for target, how in edges
        if layer_of(target) > layer_of(module) and not (how != "top" and (module, target) in DELEGATIONS)
    )


def cycles(graph: dict[str, list[tuple[str, str]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), over every kind of import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target, _how in graph.get(node, []):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, list[tuple[str, str]]]:
    return import_graph()


def test_no_module_imports_a_layer_above_its_own(graph):
    assert upward_imports(graph) == []


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_every_module_has_a_layer_the_layout_names(graph):
    for module in graph:
        assert layer_of(module) in LAYER_NAMES


def test_every_folder_of_the_package_has_its_layer():
    folders = {path.parent.relative_to(PACKAGE).parts[0] for path in PACKAGE.glob("*/*.py")}
    assert folders == set(FOLDERS) - {""}


def test_each_delegation_is_still_made_and_only_when_called(graph):
    for (module, target), why in DELEGATIONS.items():
        kinds = {how for imported, how in graph[module] if imported == target}
        assert why and kinds, f"stale delegation: {module} -> {target}"
        assert "top" not in kinds, f"{module} imports {target} at import time"


def test_only_the_retired_names_reach_up_and_the_registry_never_does(graph):
    """0.2: ``Registry`` lost its mixins and its history, watchdog and set delegators; what builds on a
    registry (sets, elections, the audit) is above it and never imported by it, not even when called.
    The one module that still reaches up serves the names 0.2 retired, until 0.3."""
    assert {module for module, _target in DELEGATIONS} == {"chainfence._sdk.retired"}
    assert [target for target, _how in graph["chainfence.registry"] if layer_of(target) > 2] == []


# -- the analysis itself can fail ---------------------------------------------------------------------------


def test_control_an_upward_import_of_each_kind_is_found():
    known = {"chainfence", "chainfence.errors", "chainfence.registry", "chainfence._node", "chainfence._node.rpc"}
    source = """
from typing import TYPE_CHECKING
from ..registry import Registry
if TYPE_CHECKING:
    from chainfence.registry import Registry as R
def later():
    from .. import registry
"""
    graph = {"chainfence._node.rpc": imports_of("chainfence._node.rpc", source, False, known)}
    found = upward_imports(graph)
    assert len(found) == 3, found
    assert {line.rsplit("[", 1)[1] for line in found} == {"top]", "type-only]", "lazy]"}


def test_control_a_cycle_through_a_lazy_import_is_found():
    graph = {
        "chainfence.lease": [("chainfence.registry", "top")],
        "chainfence.registry": [("chainfence.claims", "top")],
        "chainfence.claims": [("chainfence.lease", "lazy")],
        "chainfence.errors": [],
    }
    assert cycles(graph) == [["chainfence.claims", "chainfence.lease", "chainfence.registry"]]


def test_control_the_real_tree_with_one_upward_edge_added_fails(graph):
    for module, target, how in [
        ("chainfence.registry", "chainfence.audit", "lazy"),  # a delegation no one named
        ("chainfence._sdk.retired", "chainfence.audit._history", "top"),  # a named one, made at import time
        ("chainfence._sdk.contract", "chainfence.recipes.election", "type-only"),
        ("chainfence._core.faces", "chainfence._node.rpc", "lazy"),
        ("chainfence.errors", "chainfence._sdk.names", "top"),
    ]:
        altered = {module: list(edges) for module, edges in graph.items()}
        altered[module].append((target, how))
        assert upward_imports(altered) != [], (module, target, how)


def test_control_the_layer_is_the_folders():
    assert [layer_of(f"chainfence.{name}") for name in ("_core.effects", "errors", "_node.rpc", "registry")] == [
        0,
        0,
        1,
        2,
    ]
    assert [layer_of(f"chainfence.{name}") for name in ("_sdk.contract", "recipes.election", "aio", "cli.lock")] == [
        2,
        3,
        3,
        4,
    ]
    assert layer_of("chainfence") == 3 and layer_of("chainfence.a_new_module") == 2
    with pytest.raises(KeyError):
        layer_of("chainfence.a_new_folder.module")
