"""The CLI's shape (issue #18): one registration convention, one example table, one output function, no
import circle, and neither the CLI nor the MCP server reaching a private attribute of an SDK object."""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import pytest

from chainfence import cli
from chainfence.cli import _common

SRC = Path(cli.__file__).resolve().parents[1]  # src/chainfence
CLI = SRC / "cli"
#: The modules of cli/ that implement what a command runs, registering nothing: `chainfence node`'s
#: serving half and the demo's scenario (start.py registers both), and lock's process supervisor.
IMPLEMENTATIONS = {"node", "demo", "_supervisor"}
#: Modules that are no command group: the root, `python -m`, and what the groups share.
NOT_GROUPS = {"__init__", "__main__", "_common", *IMPLEMENTATIONS}


def _modules() -> list[Path]:
    return sorted(CLI.glob("*.py"))


# ---------------------------------------------------------------------------
# No private attribute of an SDK object
# ---------------------------------------------------------------------------


def _stdlib_names(tree: ast.Module) -> set[str]:
    """Names the module binds to the standard library (``os``, ``argparse``, ``from select import select``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in sys.stdlib_module_names:
                    names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in sys.stdlib_module_names:
                names.update(alias.asname or alias.name for alias in node.names)
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def private_reaches(source: str, package: str = "chainfence.cli.x") -> list[str]:
    """Where ``source`` reaches a private attribute of an object that is not its own (``self``, ``cls``)
    nor the standard library's: ``registry._set_policy(...)``, ``getattr(error, "_said")``, and a private
    function or class imported from another module (a private *module*, such as ``chainfence._sdk.names``,
    is the layers' business)."""
    tree = ast.parse(source)
    allowed = {"self", "cls"} | _stdlib_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = _root(node.value)
            if not (isinstance(root, ast.Name) and root.id in allowed):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2:
                name, subject = node.args[1], node.args[0]
                if (
                    isinstance(name, ast.Constant)
                    and isinstance(name.value, str)
                    and _private(name.value)
                    and not (isinstance(subject, ast.Name) and subject.id in allowed)
                ):
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: -node.level]
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                path = SRC.parent.joinpath(*module.split("."), alias.name)
                if _private(alias.name) and not (path.with_suffix(".py").exists() or path.is_dir()):
                    found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
    return sorted(found, key=lambda where: int(where.split(":")[0].split()[1]))


def test_the_check_finds_what_the_cli_did_and_lets_its_own_attributes_be():
    """Control: what `namespace policy set` and `lock` did before (registry._set_policy, keeping._keeper,
    an attribute of their own on the SDK's error) is found; self's, the standard library's and dunders are not."""
    naive = (
        "import os\n"
        "from ..registry import _checksum\n"
        "from .._sdk import names as _names\n"
        "def f(self, registry, keeping, loss, error):\n"
        "    registry._set_policy('p', 1, 2, None, None)\n"
        "    keeper = keeping._keeper.core\n"
        "    loss._said = True\n"
        "    if getattr(error, '_said', False): pass\n"
        "    self._x = os._exit\n"
        "    return error.__dict__, getattr(self, '_y'), _names.item_name('a', 'b')\n"
    )
    assert [line.split(": ", 1)[1] for line in private_reaches(naive)] == [
        "from ..registry import _checksum",
        "registry._set_policy",
        "keeping._keeper",
        "loss._said",
        "getattr(error, '_said', False)",
    ]


@pytest.mark.parametrize("path", [*_modules(), SRC / "integrations" / "mcp.py"], ids=lambda p: str(p.relative_to(SRC)))
def test_no_private_attribute_of_an_sdk_object_is_reached(path):
    # cli/__init__.py is "chainfence.cli.__init__": its relative imports start from the package itself.
    package = "chainfence." + ".".join(path.relative_to(SRC).with_suffix("").parts)
    assert private_reaches(path.read_text(encoding="utf-8"), package) == [], (
        f"{path.name} reaches into the SDK: use (or add) a public method"
    )


# ---------------------------------------------------------------------------
# One registration convention, one example table
# ---------------------------------------------------------------------------


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found[prefix + name] = command
                found.update(_commands(command, f"{prefix}{name} "))
    return found


def _leaves() -> dict[str, argparse.ArgumentParser]:
    commands = _commands(cli._parser())
    return {name: p for name, p in commands.items() if not any(o.startswith(name + " ") for o in commands)}


def test_every_command_module_registers_through_one_function_and_the_root_lists_them_all():
    groups = {path.stem for path in _modules()} - NOT_GROUPS
    assert set(cli.GROUPS) == groups
    for group in map(cli.group, cli.GROUPS):
        tree = ast.parse(Path(group.__file__).read_text(encoding="utf-8"))
        (register,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "register"]
        assert [a.arg for a in register.args.args] == ["subparsers", "common"], group.__name__
        tables = [
            target.id
            for n in tree.body
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(target, ast.Name) and target.id.lstrip("_") in ("COMMANDS", "EXAMPLES")
        ]
        assert tables == [], f"{group.__name__}: a table of its own ({tables}) beside the convention"


def _registered(group: str) -> set[str]:
    """The top-level commands module ``group`` registers."""
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    cli.group(group).register(commands, _common.common_options())
    return set(commands.choices)


def test_the_root_knows_which_module_registers_each_command():
    """A command line naming a command builds only its parser, importing only its module (issue #19): the
    root's table says, for every command, the module that registers it, and for no command that is not
    registered."""
    registered = {command: group for group in cli.GROUPS for command in _registered(group)}
    assert cli.REGISTERED_BY == registered
    everything = _commands(cli._parser())
    for command in cli.REGISTERED_BY:
        alone = _commands(cli._parser(command))
        assert set(alone) == {name for name in everything if name.split()[0] == command}, command


def test_the_commands_parsers_are_the_same_built_alone():
    """Each command's parser, built with its module's commands only, reads and helps as the one built
    with every command: the same options, defaults, usage and --help."""
    everything = _commands(cli._parser())
    for command in cli.REGISTERED_BY:
        for name, alone in _commands(cli._parser(command)).items():
            assert alone.format_help() == everything[name].format_help(), name
            assert alone.format_usage() == everything[name].format_usage(), name
            assert alone._defaults == everything[name]._defaults, name
            assert _arguments(alone) == _arguments(everything[name]), name


def _arguments(parser: argparse.ArgumentParser) -> list[dict[str, object]]:
    """What each of ``parser``'s arguments is (its group aside; a type made by a function, by its name),
    subcommands aside."""
    return [
        {
            key: getattr(value, "__qualname__", value) if key == "type" else value
            for key, value in vars(action).items()
            if key != "container"
        }
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
    ]


def test_every_command_runs_its_bound_handler_and_has_its_one_example():
    leaves = _leaves()
    for name, parser in leaves.items():
        run = parser.get_default("run")
        assert callable(run), f"chainfence {name} binds no handler (set_defaults(run=...))"
    commands = _commands(cli._parser())
    assert set(_common.EXAMPLES) == set(commands), "one example per command, in the one table"
    for name, command in commands.items():
        assert command.epilog.startswith(f"example:\n  {_common.EXAMPLES[name]}\n"), name


# ---------------------------------------------------------------------------
# No import circle; one output function
# ---------------------------------------------------------------------------


def _cli_imports(path: Path) -> set[str]:
    """The cli modules ``path`` imports (lazily too): ``"__init__"`` for the package itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name if (CLI / f"{a.name}.py").exists() else "__init__" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 2 and node.module is None:
            found.update("__init__" for a in node.names if a.name == "cli")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "chainfence.cli" or node.module.startswith("chainfence.cli."):
                found.add(node.module.split(".")[2] if node.module.count(".") >= 2 else "__init__")
    return found


def test_no_cli_module_imports_the_root_and_the_imports_make_no_circle():
    graph = {path.stem: _cli_imports(path) for path in _modules()}
    for name, imported in graph.items():
        if name not in ("__init__", "__main__"):
            assert "__init__" not in imported, f"cli/{name}.py imports the package root back"
    seen: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if seen.get(name) == 1:
            raise AssertionError(" -> ".join([*trail, name]))
        if seen.get(name) == 2:
            return
        seen[name] = 1
        for imported in graph.get(name, ()):
            if imported != "__init__" or name == "__main__":
                visit(imported, [*trail, name])
        seen[name] = 2

    for name in graph:
        visit(name, [])


def test_the_commands_print_through_the_one_output_function():
    """No command module prints JSON itself: `emit` (an answer) and `report` (a failure) in _common do.
    (node.py streams `chainfence node`'s own announcement while the node runs.)"""
    for path in _modules():
        if path.stem in ("_common", "node"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        dumps = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dumps"
        ]
        assert dumps == [], f"cli/{path.name} prints JSON itself at lines {dumps}: use _common.emit"


def test_exit_codes_come_by_name_from_the_one_table():
    """Every error class carries its exit code (``exit_code``: the one table) and _common names each code an
    error can have (the rest: success, and claim's "nothing left", which is no error); no handler returns a
    number of its own."""
    from chainfence import errors

    codes = {value for name, value in vars(_common).items() if name.startswith("EXIT_") and isinstance(value, int)}
    carried = {getattr(errors, name).exit_code for name in errors.__all__}
    assert codes - carried == {_common.EXIT_OK, _common.EXIT_NOTHING_TO_CLAIM} and carried <= codes
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        literal = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and type(node.value.value) is int
        ]
        assert literal == [], f"cli/{path.name} returns exit codes as numbers at lines {literal}"


def test_the_default_deployment_file_is_the_deployment_modules():
    """The CLI looks for the deployment file without importing the deployment module (issue #19): at the
    same default path."""
    from chainfence import deployment

    assert _common.DEFAULT_DEPLOYMENT == str(deployment.DEFAULT_PATH)
