"""The design page's "The layers" (docs/explanation/design.md; the README's "Layout" before issue 27) names
every module in its folder and layer, and nothing that is not there.

Each line of the layout's block that starts with a digit opens a group: ``<layer> <folder>/`` (a
family's folder) or ``<layer> <label>`` (modules at the package's top level); the lines indented
under it continue it. Words in parentheses describe; every other word is a module of the group.
"""

from __future__ import annotations

import pathlib
import re

from tests.unit.test_layers import PACKAGE, layer_of

DESIGN = pathlib.Path(__file__).resolve().parents[2] / "docs" / "explanation" / "design.md"


def layout_groups(page: str) -> dict[tuple[int, str], list[str]]:
    section = page.split("\n## The layers\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1].split("\n", 1)[1]  # after the info string (```text)
    texts: dict[tuple[int, str], str] = {}
    key: tuple[int, str] | None = None
    for line in block.splitlines():
        if not line.strip():
            continue
        head = re.match(r"(\d) (\S+)\s*(.*)", line)
        if head:
            key = (int(head.group(1)), head.group(2))
            rest = head.group(3)
        else:
            assert key is not None, f"a layout line outside any group: {line!r}"
            rest = line
        texts[key] = texts.get(key, "") + " " + rest
    # A description in parentheses may run over several lines of its group.
    return {key: re.sub(r"\([^)]*\)", " ", text).split() for key, text in texts.items()}


def tree_modules() -> dict[str, list[str]]:
    """Module stems by folder ('' for the package's top level), without __init__ and __main__."""
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.stem in ("__init__", "__main__") or "__pycache__" in path.parts:
            continue
        folder = "/".join(path.relative_to(PACKAGE).parts[:-1])
        found.setdefault(folder, []).append(path.stem)
    return found


def check(groups: dict[tuple[int, str], list[str]], modules: dict[str, list[str]]) -> list[str]:
    problems = []
    listed_top: dict[str, int] = {}
    for (layer, label), names in groups.items():
        if label.endswith("/"):
            folder = label[:-1]
            if folder not in modules:
                problems.append(f"{label}: no such folder")
                continue
            if sorted(names) != sorted(modules[folder]):
                missing = sorted(set(modules[folder]) - set(names))
                extra = sorted(set(names) - set(modules[folder]))
                problems.append(f"{label}: missing {missing}, not in the tree {extra}")
            if layer != layer_of(f"chainfence.{folder.replace('/', '.')}"):
                problems.append(f"{label}: said to be layer {layer}")
        else:
            for name in names:
                listed_top[name] = layer
    top = modules.get("", [])
    for name in sorted(set(top) - set(listed_top)):
        problems.append(f"{name}: a module the layout does not name")
    for name, layer in sorted(listed_top.items()):
        if name not in top:
            problems.append(f"{name}: named by the layout, not in the tree")
        elif layer != layer_of(f"chainfence.{name}"):
            problems.append(f"{name}: said to be layer {layer}, is {layer_of(f'chainfence.{name}')}")
    return problems


def test_the_layout_is_the_tree():
    assert check(layout_groups(DESIGN.read_text(encoding="utf-8")), tree_modules()) == []


def test_control_a_module_added_to_the_tree_or_misplaced_in_the_layout_is_found():
    groups = layout_groups(DESIGN.read_text(encoding="utf-8"))
    modules = tree_modules()
    added = {folder: list(names) for folder, names in modules.items()}
    added["guard"].append("_new_concept")
    assert any("_new_concept" in problem for problem in check(groups, added))
    moved = {key: list(names) for key, names in groups.items()}
    moved[(3, "faces")].append("registry")
    moved[(2, "SDK")].remove("registry")
    assert any("registry" in problem for problem in check(moved, modules))
    renamed = {key: [("_rpc" if name == "rpc" else name) for name in names] for key, names in groups.items()}
    assert check(renamed, modules) != []
