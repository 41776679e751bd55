"""The package's layers hold: no module imports one above its own layer, and no import cycle.

The layers, lowest first (the README's "Layout" says the same):

0. foundation: ``errors``, ``endings`` (the model of how a lease ends) and ``_lease_state`` (the lease
   fields and verdicts it speaks of), ``_limits`` (the contract's bounds), ``_times`` (chain times for
   people), ``_effects`` (operations as steps), ``_records`` (dataclass-like records without dataclasses),
   ``_log`` (loggers that import logging when a record can go somewhere), ``_moved`` (old import paths);
1. ``_node/``: the only code that talks to a node, and the codecs it speaks with (ABI, RLP, addresses);
2. the SDK: every other module of the package's top level (``_names`` and ``_validate``, what callers
   give it, checked with the node layer's codecs; ``chain``, ``registry`` and the concept modules split
   from it, ``lease``, ``keepalive``, ``election``, ``proofs`` ...);
3. services and adapters: ``guard/``, ``audit/``, ``testing/``, ``sql``, ``asgi``, ``fenced_store``,
   ``mcp_server``, ``tooz_driver``, ``aio`` (the asyncio facade) and ``chainfence`` itself (the public
   face, which re-exports lazily);
4. ``cli/``.

Every import counts: at the top, inside a function (lazy) and under ``TYPE_CHECKING`` alike. The
analysis reads the source (``ast``), so a module nobody imports at run time is held too.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterable

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "src" / "chainfence"

FOUNDATION = {"errors", "endings", "_lease_state", "_effects", "_records", "_log", "_moved", "_limits", "_times"}
SERVICE_MODULES = {"sql", "asgi", "fenced_store", "mcp_server", "tooz_driver", "aio"}
SERVICE_PACKAGES = {"guard", "audit", "testing"}
LAYER_NAMES = {0: "foundation", 1: "node", 2: "SDK", 3: "services", 4: "CLI"}


def layer_of(module: str) -> int:
    """The layer of ``module`` (a dotted name under ``chainfence``)."""
    parts = module.split(".")[1:]
    if not parts:
        return 3  # chainfence/__init__: the public face
    head = parts[0]
    if head in FOUNDATION:
        return 0
    if head == "_node":
        return 1
    if head in ("cli", "__main__"):
        return 4
    if head in SERVICE_MODULES or head in SERVICE_PACKAGES:
        return 3
    return 2


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
        if layer_of(target) > layer_of(module)
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


def test_control_the_real_tree_with_one_old_upward_edge_put_back_fails(graph):
    # The edge issue #18 removed: the registry read its history from the audit package.
    altered = {module: list(edges) for module, edges in graph.items()}
    altered["chainfence.registry"].append(("chainfence.audit", "lazy"))
    assert upward_imports(altered) != []
