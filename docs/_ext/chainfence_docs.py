"""The site's own Sphinx extension: the reference pages that are generated from the code.

- ``.. chainfence-api:: MODULE`` documents a public module: its docstring, then each name of its
  ``__all__`` that it *owns* (autodoc), and a link for each name it re-exports from another public
  module. A name is owned by the module that defines it when that module is public, else by the
  shortest-named public module exporting it, so every object is described once.
- ``.. chainfence-error-tree::`` draws :mod:`chainfence.errors` as a nested list: each class linked to
  its entry, with its ``exit_code`` and ``http_status`` as the class says them.
- ``.. chainfence-exit-codes::`` is the table of ``chainfence``'s exit codes: each ``EXIT_*`` constant of
  :mod:`chainfence.cli`, its meaning from the ``--help`` epilog, the error classes that exit with it.
- ``.. chainfence-contract:: NAME`` renders a contract's NatSpec (solc's userdoc and devdoc, kept in
  ``src/chainfence/artifacts/NAME.json`` by ``scripts/build_contracts.py``) with its ABI.

And one resolver: a reference in a docstring (``:class:`Lease```, ``:func:`._common.connect```,
``:class:`~chainfence.Admission```) is looked up by the names users import (``chainfence.Lease``), the
module that defines it, the module whose docstring holds it, and the public modules that re-export it. A
reference to a ``chainfence`` name that still resolves to nothing is a warning (an error under ``-W``);
references outside chainfence (the standard library, web3) are left as code.
"""

from __future__ import annotations

import builtins
import enum
import importlib
import inspect
import json
import pkgutil
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

LOG = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------
# The public API: which module documents which name
# ---------------------------------------------------------------------------


def is_public(module: str) -> bool:
    return not any(part.startswith("_") for part in module.split("."))


@cache
def api_modules() -> tuple[str, ...]:
    """The public modules the reference documents: each with a non-empty ``__all__``, outside the CLI's
    command modules (the CLI is documented from its parser; ``chainfence.cli`` itself is here)."""
    import chainfence

    found = ["chainfence"]
    for info in pkgutil.walk_packages(chainfence.__path__, "chainfence."):
        name = info.name
        if not is_public(name) or (name.startswith("chainfence.cli.")):
            continue
        if getattr(importlib.import_module(name), "__all__", None):
            found.append(name)
    return tuple(sorted(found))


def _home(value: Any) -> str | None:
    """The module that defines ``value`` (a class or function), or None for data."""
    if inspect.isclass(value) or inspect.isroutine(value):
        return getattr(value, "__module__", None)
    return None


@cache
def owners() -> dict[tuple[str, str], str]:
    """(exporting module, name) -> the public module that documents that object."""
    exporters: dict[int, list[tuple[str, str]]] = {}
    values: dict[int, Any] = {}
    for module in api_modules():
        mod = importlib.import_module(module)
        for name in mod.__all__:
            value = getattr(mod, name)
            key = id(value) if _home(value) else hash((module, name))  # data: each export its own
            exporters.setdefault(key, []).append((module, name))
            values[key] = value
    owner: dict[tuple[str, str], str] = {}
    for key, places in exporters.items():
        home = _home(values[key])
        # The package's own page only links: its names are re-exports, each described in its module.
        modules = [module for module, _ in places if module != "chainfence"] or ["chainfence"]
        if home in modules:
            chosen = home
        else:
            chosen = min(modules, key=lambda m: (m.count("."), len(m), m))
        for place in places:
            owner[place] = chosen
    return owner


@cache
def aliases() -> dict[str, str]:
    """Every dotted name a docstring may use for a documented object -> the name it is documented under."""
    import chainfence

    found: dict[str, str] = {}
    for (module, name), owner in owners().items():
        target = f"{owner}.{name}"
        found[f"{module}.{name}"] = target
        home = _home(getattr(importlib.import_module(module), name))
        if home:
            found.setdefault(f"{home}.{name}", target)
    for name, relative in chainfence._LAZY.items():
        home = importlib.import_module(relative, "chainfence")
        defined = f"{home.__name__}.{name}"
        found[f"chainfence.{name}"] = found.get(defined, defined)
    return found


class ApiModule(SphinxDirective):
    """``.. chainfence-api:: chainfence.guard``: the module's docstring and the names it owns."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module = self.arguments[0]
        if module not in api_modules():
            raise self.error(f"{module} is not a public module with an __all__ (chainfence_docs.api_modules)")
        mod = importlib.import_module(module)
        lines = [f".. automodule:: {module}", "   :no-members:", ""]
        elsewhere = []
        for name in mod.__all__:
            owner = owners()[(module, name)]
            value = getattr(mod, name)
            if owner != module:
                elsewhere.append(f":{_role(value)}:`~{owner}.{name}`")
                continue
            if _directive(value) == "autodata":
                lines += _data(module, name, value)
                continue
            lines += [f".. {_directive(value)}:: {module}.{name}"]
            if inspect.isclass(value):
                lines += ["   :members:", "   :show-inheritance:"]
                if issubclass(value, enum.Enum):
                    lines += ["   :undoc-members:"]
                if not issubclass(value, BaseException):
                    lines += ["   :special-members: __call__"]
            lines += [""]
        if elsewhere:
            lines = [*lines[:3], "Also exported here: " + ", ".join(elsewhere) + ".", "", *lines[3:]]
        content = StringList(lines, source=f"<chainfence-api {module}>")
        holder = nodes.container()
        self.state.nested_parse(content, self.content_offset, holder)
        return holder.children


def _data(module: str, name: str, value: Any) -> list[str]:
    """A constant: its value and its ``#:`` comment (autodoc would show its type's docstring instead)."""
    from sphinx.pycode import ModuleAnalyzer

    comment: list[str] = []
    for place in (module, *(m for m in api_modules() if m != module)):
        try:
            docs = ModuleAnalyzer.for_module(place).find_attr_docs()
        except Exception:
            continue
        if ("", name) in docs and getattr(importlib.import_module(place), name, None) is value:
            comment = list(docs[("", name)])
            break
    shown = repr(value)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    lines = [f".. py:data:: {name}", f"   :module: {module}", f"   :value: {shown}", ""]
    lines += [f"   {line}" for line in comment]
    return [*lines, ""]


def _directive(value: Any) -> str:
    if inspect.isclass(value):
        return "autoexception" if issubclass(value, BaseException) else "autoclass"
    if inspect.isroutine(value):
        return "autofunction"
    return "autodata"


def _role(value: Any) -> str:
    if inspect.isclass(value):
        return "exc" if issubclass(value, BaseException) else "class"
    if inspect.isroutine(value):
        return "func"
    return "data"


# ---------------------------------------------------------------------------
# References in docstrings
# ---------------------------------------------------------------------------


def _candidates(target: str, module: str | None, klass: str | None) -> list[str]:
    """Full names ``target`` may mean, written in ``module`` (and class ``klass``) of chainfence."""
    bare = target.lstrip("~").lstrip(".")
    out = [bare]
    if module:
        parts = module.split(".")
        # the module, then its parents (``._common.X`` written in chainfence.cli)
        out.extend(".".join(parts[:depth]) + "." + bare for depth in range(len(parts), 0, -1))
        if klass:
            out.insert(0, f"{module}.{klass}.{bare}")
    out.append("chainfence." + bare)
    return out


def _documented(env: Any) -> dict[str, Any]:
    return env.get_domain("py").objects


def _resolve_name(env: Any, name: str) -> str | None:
    """``name`` as documented: itself, through an alias of its longest aliased prefix, or (``Class.attr``)
    as the attribute of the class or base class that documents it (``Registry.max_ttl`` is
    ``RegistryContract.max_ttl``)."""
    objects = _documented(env)
    if name in objects:
        return name
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in aliases():
            full = ".".join([aliases()[prefix], *parts[cut:]])
            if full in objects:
                return full
    found = _lookup(name)
    if found is not None and len(parts) > 1:
        owner = _lookup(".".join(parts[:-1]))
        if inspect.isclass(owner):
            for base in owner.__mro__:
                for documented in aliases().values():
                    if documented in objects and _lookup(documented) is base:
                        if f"{documented}.{parts[-1]}" in objects:
                            return f"{documented}.{parts[-1]}"
                        break
    return None


@cache
def _has_attribute(cls: Any, name: str) -> bool:
    """Whether instances of ``cls`` have ``name``: a class attribute, an annotated field, or set in a method."""
    if not inspect.isclass(cls):
        return False
    if hasattr(cls, name) or any(name in getattr(base, "__annotations__", {}) for base in cls.__mro__):
        return True
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return False
    return re.search(rf"\bself\.{re.escape(name)}\s*(:[^=]*)?=", source) is not None


def _subclasses(cls: type) -> list[type]:
    """``cls``'s subclasses, nearest first (a mixin's methods are the class's that mixes it in)."""
    found: list[type] = []
    queue = list(cls.__subclasses__())
    while queue:
        sub = queue.pop(0)
        if sub not in found:
            found.append(sub)
            queue.extend(sub.__subclasses__())
    return found


@cache
def _lookup(name: str) -> Any:
    """The object ``name`` (a dotted path) names, or None: its longest importable module, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        except Exception:
            return None
        try:
            for attribute in parts[cut:]:
                value = getattr(value, attribute)
        except AttributeError:
            return None
        return value
    return None


@cache
def _by_last_name(objects_key: int, names: tuple[str, ...]) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for name in names:
        index.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return index


def missing_reference(app: Sphinx, env: Any, node: addnodes.pending_xref, contnode: nodes.Element) -> Any:
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    module = node.get("py:module")
    klass = node.get("py:class")
    for candidate in _candidates(target, module, klass):
        found = _resolve_name(env, candidate)
        if found:
            return _refnode(app, env, node, found, contnode)
    bare = target.lstrip("~").lstrip(".")
    if module and klass:
        owner = _lookup(f"{module}.{klass}")
        for sub in _subclasses(owner) if inspect.isclass(owner) else []:
            found = _resolve_name(env, f"{sub.__module__}.{sub.__qualname__}.{bare}")
            if found:
                return _refnode(app, env, node, found, contnode)
    if target.startswith(".") or "." not in bare:
        # ``.Name`` (Sphinx's "search") or a bare name: the one documented object of that last name.
        objects = _documented(env)
        matches = _by_last_name(len(objects), tuple(sorted(objects)))
        found_all = [name for name in matches.get(bare.rsplit(".", 1)[-1], []) if name.endswith("." + bare)]
        if len(found_all) == 1:
            return _refnode(app, env, node, found_all[0], contnode)
    # An attribute a class sets on its instances (``Chain.confirmations``, a record's field) has no entry of
    # its own: the reference goes to its class.
    parent = bare.rsplit(".", 1)[0] if "." in bare else klass
    if parent:
        for candidate in _candidates(parent, module, None):
            found = _resolve_name(env, candidate)
            if found and _documented(env)[found].objtype in ("class", "exception"):
                if _has_attribute(_lookup(found), bare.rsplit(".", 1)[-1]):
                    return _refnode(app, env, node, found, contnode)
    if node.get("reftype") != "obj" and _should_resolve(node, target, module, klass):
        LOG.warning("unresolved reference to a chainfence name: %s", target, location=node, type="chainfence")
    return None


def _should_resolve(node: addnodes.pending_xref, target: str, module: str | None, klass: str | None) -> bool:
    """Whether a reference that found no entry is a fault: it names nothing at all (a typo, a name that
    moved), or an object of the API (exported by a public module's ``__all__``, or an attribute of such a
    class) that the reference does not reach. Names of the standard library and other packages, and
    chainfence's internals (private modules, names no ``__all__`` exports), are shown as code. Type
    annotations of signatures (no source line) are Sphinx's own and are not judged."""
    if node.source is None and node.line is None:
        return False
    if not (module or "").startswith("chainfence") and not target.lstrip("~.").startswith("chainfence"):
        return False
    if hasattr(builtins, target.lstrip("~.")):
        return False
    for candidate in _candidates(target, module, klass):
        value = _lookup(candidate)
        if value is None:
            continue
        if not candidate.startswith("chainfence."):
            return False
        home = _home(value)
        if home is not None and not home.startswith("chainfence"):
            return False
        if inspect.ismodule(value):
            return candidate in api_modules()
        parts = candidate.split(".")
        return any(".".join(parts[:cut]) in aliases() for cut in range(len(parts), 1, -1))
    bare = target.lstrip("~.")
    if "." not in bare and any(
        hasattr(mod, bare) for name, mod in list(sys.modules.items()) if name.startswith("chainfence") and mod
    ):
        return False  # a module's internal name, written bare in a docstring another class shares
    return True


def _refnode(app: Sphinx, env: Any, node: addnodes.pending_xref, full: str, contnode: nodes.Element) -> Any:
    obj = _documented(env)[full]
    return make_refnode(app.builder, node["refdoc"], obj.docname, obj.node_id, contnode, full)


# ---------------------------------------------------------------------------
# The error tree and the exit codes
# ---------------------------------------------------------------------------


def _xref(target: str, text: str, reftype: str = "exc") -> addnodes.pending_xref:
    ref = addnodes.pending_xref("", refdomain="py", reftype=reftype, reftarget=target, refexplicit=True, refwarn=True)
    ref += nodes.literal(text, text)
    return ref


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    first = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    return re.sub(r":\w+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], first).replace("``", "")


class ErrorTree(SphinxDirective):
    """``.. chainfence-error-tree::``: every class of :mod:`chainfence.errors` under its parent."""

    def run(self) -> list[nodes.Node]:
        from chainfence import errors

        classes = [getattr(errors, name) for name in errors.__all__]
        classes = [cls for cls in classes if inspect.isclass(cls) and issubclass(cls, errors.ChainfenceError)]

        def item(cls: type) -> nodes.list_item:
            entry = nodes.list_item()
            para = nodes.paragraph()
            para += _xref(f"chainfence.errors.{cls.__name__}", cls.__name__)
            builtin = [base.__name__ for base in cls.__bases__ if base.__module__ == "builtins"]
            if builtin:
                para += nodes.Text(f" ({', '.join(builtin)})")
            para += nodes.Text(f" — exit {cls.exit_code}, HTTP {cls.http_status}")
            own = [key for key in ("exit_code", "http_status") if key in vars(cls)]
            if own and cls is not errors.ChainfenceError:
                para += nodes.emphasis("", " (its own " + " and ".join(k.replace("_", " ") for k in own) + ")")
            summary = _summary(cls)
            if summary:
                para += nodes.Text(": " + summary)
            entry += para
            children = [c for c in classes if errors.ChainfenceError in c.__mro__ and _parent(c, errors) is cls]
            children.sort(key=lambda c: inspect.getsourcelines(c)[1])  # the module's order: the tree's
            if children:
                sub = nodes.bullet_list()
                for child in children:
                    sub += item(child)
                entry += sub
            return entry

        tree = nodes.bullet_list()
        tree += item(errors.ChainfenceError)
        return [tree]


def _parent(cls: type, errors: Any) -> type | None:
    for base in cls.__bases__:
        if issubclass(base, errors.ChainfenceError):
            return base
    return None


def exit_meanings() -> dict[str, str]:
    """The epilog's ``exit codes:`` section as {code: meaning} (a line without a code continues the last)."""
    from chainfence.cli._common import EPILOG

    section = EPILOG.split("exit codes:\n", 1)[1].split("\n\n", 1)[0]
    meanings: dict[str, str] = {}
    last = None
    in_note = False
    for line in section.splitlines():
        head = re.match(r"^  (\d+(?:[-–]\d+)?) {2,}(.*)$", line)  # "  13  meaning": two spaces after the code
        note = re.match(r"^  (\S.*)$", line)
        if head:
            last, in_note = head.group(1), False
            meanings[last] = head.group(2).strip()
        elif note and not in_note:  # a paragraph of its own at the codes' indent: `lock`'s "100 + their code"
            last, in_note = "note", True
            meanings[last] = note.group(1).strip()
        elif last is not None and line.strip():
            meanings[last] += " " + line.strip()
    if "note" in meanings:
        added = re.search(r"\b(\d+) \+ their code", meanings["note"])
        if added:
            meanings[f"{added.group(1)} + N"] = meanings.pop("note")
    return meanings


class ExitCodes(SphinxDirective):
    """``.. chainfence-exit-codes::``: code, constant, meaning, the error classes exiting with it."""

    def run(self) -> list[nodes.Node]:
        from chainfence import cli, errors

        constants = sorted(
            (value, name)
            for name in dir(cli)
            if name.startswith("EXIT_") and isinstance(value := getattr(cli, name), int)
        )
        meanings = exit_meanings()
        raisers: dict[int, list[str]] = {}
        for name in errors.__all__:
            cls = getattr(errors, name)
            if inspect.isclass(cls) and "exit_code" in vars(cls):
                raisers.setdefault(cls.exit_code, []).append(name)
        rows: list[tuple[int, list[list[nodes.Node]]]] = []
        for value, name in constants:
            classes: list[nodes.Node] = []
            for error in raisers.get(value, []):
                if classes:
                    classes.append(nodes.Text(", "))
                classes.append(_xref(f"chainfence.errors.{error}", error))
            row = [
                [nodes.Text(str(value))],
                [_xref(f"chainfence.cli.{name}", name, "data")],
                [nodes.Text(meanings.get(str(value), ""))],
                classes or [nodes.Text("—")],
            ]
            rows.append((value, row))
        for code, meaning in meanings.items():  # codes the epilog documents with no constant ("100 + N")
            if not any(str(value) == code for value, _ in constants):
                first = int(re.match(r"\d+", code).group(0)) if re.match(r"\d+", code) else 10**6
                rows.append((first, [[nodes.Text(code)], [nodes.Text("—")], [nodes.Text(meaning)], [nodes.Text("—")]]))
        rows.sort(key=lambda item: item[0])
        header = ["exit", "constant", "meaning", "raised as (and its subclasses)"]
        return [table(header, [row for _, row in rows], [6, 22, 50, 22])]


def table(header: list[str], rows: list[list[list[nodes.Node]]], widths: list[int]) -> nodes.table:
    result = nodes.table()
    group = nodes.tgroup(cols=len(header))
    result += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    head += _row([[nodes.Text(text)] for text in header])
    body = nodes.tbody()
    group += body
    for row in rows:
        body += _row(row)
    return result


def _row(cells: list[list[nodes.Node]]) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        para = nodes.paragraph()
        para.extend(cell)
        entry += para
        row += entry
    return row


# ---------------------------------------------------------------------------
# The contract from its NatSpec
# ---------------------------------------------------------------------------


def natspec_text(text: str, anchors: dict[str, str]) -> list[nodes.Node]:
    """NatSpec prose as inline nodes: ``{name}`` links to that member's entry, `code` is code."""
    out: list[nodes.Node] = []
    for piece in re.split(r"(\{[A-Za-z_]\w*\}|`[^`]+`)", text):
        if not piece:
            continue
        if piece.startswith("{") and piece.endswith("}"):
            name = piece[1:-1]
            literal = nodes.literal(name, name)
            if name in anchors:
                ref = nodes.reference("", "", internal=True, refid=anchors[name])
                ref += literal
                out.append(ref)
            else:
                out.append(literal)
        elif piece.startswith("`"):
            out.append(nodes.literal(piece[1:-1], piece[1:-1]))
        else:
            out.append(nodes.Text(piece))
    return out


def _paragraphs(text: str, anchors: dict[str, str]) -> list[nodes.Node]:
    """NatSpec keeps no line breaks: a ``- `` after a sentence starts a list item again."""
    parts = re.split(r"\s+-\s+(?=[A-Z{`])", " ".join(text.split()))
    first = nodes.paragraph()
    first.extend(natspec_text(parts[0], anchors))
    if len(parts) == 1:
        return [first]
    items = nodes.bullet_list()
    for part in parts[1:]:
        entry = nodes.list_item()
        para = nodes.paragraph()
        para.extend(natspec_text(part, anchors))
        entry += para
        items += entry
    return [first, items] if parts[0].strip() else [items]


def _signature(entry: dict[str, Any]) -> str:
    def typed(params: list[dict[str, Any]]) -> str:
        return ", ".join(f"{p['type']} {p['name']}".strip() for p in params)

    text = f"{entry['name']}({typed(entry.get('inputs', []))})"
    if entry.get("stateMutability") in ("view", "pure"):
        text += f" {entry['stateMutability']}"
    if entry.get("outputs"):
        text += f" returns ({typed(entry['outputs'])})"
    return text


class Contract(SphinxDirective):
    """``.. chainfence-contract:: FencingRegistry``: functions, events and errors with their NatSpec."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        path = ROOT / "src" / "chainfence" / "artifacts" / f"{name}.json"
        self.env.note_dependency(str(path))
        artifact = json.loads(path.read_text(encoding="utf-8"))
        user, dev, abi = artifact["userdoc"], artifact["devdoc"], artifact["abi"]
        kinds = (("function", "methods", "Functions"), ("event", "events", "Events"), ("error", "errors", "Errors"))
        anchors: dict[str, str] = {}
        for kind, _, _ in kinds:
            for entry in abi:
                if entry.get("type") == kind:
                    anchors.setdefault(entry["name"], nodes.make_id(f"{name}-{kind}-{entry['name']}"))
        out: list[nodes.Node] = []
        intro = [text for text in (user.get("notice"), dev.get("details")) if text]
        for text in intro:
            out.extend(_paragraphs(text, anchors))
        for kind, key, title in kinds:
            section = nodes.section(ids=[nodes.make_id(f"{name}-{key}")])
            section += nodes.title(title, title)
            entries = sorted((e for e in abi if e.get("type") == kind), key=lambda e: e["name"])
            for entry in entries:
                types = ",".join(p["type"] for p in entry.get("inputs", []))
                selector = f"{entry['name']}({types})"
                if kind == "function":
                    selector = next((s for s in artifact["methodIdentifiers"] if s == selector), selector)
                notes = [*_docs(user.get(key, {}), selector), *_docs(dev.get(key, {}), selector)]
                anchor = nodes.make_id(f"{name}-{kind}-{entry['name']}")
                ids = [anchor] if anchors.get(entry["name"]) == anchor and anchor not in _taken(section) else []
                item = nodes.section(ids=ids or [nodes.make_id(f"{name}-{kind}-{selector}")])
                item += nodes.title(entry["name"], entry["name"])
                item += nodes.literal_block(_signature(entry), _signature(entry), language="solidity")
                for note in notes:
                    for field in ("notice", "details"):
                        if note.get(field):
                            item.extend(_paragraphs(note[field], anchors))
                    for label, values in (("Parameters", note.get("params")), ("Returns", note.get("returns"))):
                        if values:
                            fields = nodes.bullet_list()
                            for param, text in values.items():
                                entry_node = nodes.list_item()
                                para = nodes.paragraph()
                                para += nodes.literal(param, param)
                                para += nodes.Text(": ")
                                para.extend(natspec_text(" ".join(text.split()), anchors))
                                entry_node += para
                                fields += entry_node
                            item += nodes.paragraph("", label + ":")
                            item += fields
                section += item
            out.append(section)
        return out


def _docs(table_: dict[str, Any], selector: str) -> list[dict[str, Any]]:
    found = table_.get(selector)
    if found is None:
        return []
    return found if isinstance(found, list) else [found]


def _taken(section: nodes.section) -> set[str]:
    return {id_ for child in section.findall(nodes.section) for id_ in child["ids"]}


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


def cli_parser() -> Any:
    """``chainfence``'s whole parser (:func:`chainfence.cli._parser`) for sphinx-argparse, each epilog (the
    exit codes, a command's example: text laid out for a terminal) as a literal block."""
    import argparse
    import textwrap

    from chainfence.cli import _parser

    def literal(parser: argparse.ArgumentParser) -> None:
        if parser.epilog:
            parser.epilog = "::\n\n" + textwrap.indent(parser.epilog.rstrip(), "   ") + "\n"
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):
                    literal(sub)

    parser = _parser()
    literal(parser)
    return parser


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("chainfence-api", ApiModule)
    app.add_directive("chainfence-error-tree", ErrorTree)
    app.add_directive("chainfence-exit-codes", ExitCodes)
    app.add_directive("chainfence-contract", Contract)
    app.connect("missing-reference", missing_reference)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": False}
