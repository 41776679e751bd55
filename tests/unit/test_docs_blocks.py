"""Every code block of the documentation runs as written, or names the complete file it is a fragment of; and
the pages' words about a block stay true (the tooz extras, the MCP configuration, the `cast` calls).

- A ```python block runs as written (the README's example: tests/unit/test_readme.py; the one that needs a
  node: tests/integration/test_readme_shell.py), or is a fragment whose first line names its file in
  examples/ (``# from examples/NAME.py``), which tests/integration/test_examples.py runs.
- A ``literalinclude`` names a file that exists; every file of examples/ is shown on some page.
- ```sh run blocks run in tests/integration/test_readme_shell.py.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support import docs

#: Blocks that run as written in another test, by a marker they contain.
RUN_ELSEWHERE = {
    "rejected: {stale}": "tests/unit/test_readme.py (the README's example)",
    "chain = Chain.connect(": "tests/integration/test_readme_shell.py (against a chainfence node)",
}


def fragment_of(block: str) -> str | None:
    first = block.splitlines()[0] if block.strip() else ""
    found = re.match(r"# from (examples/\w+\.py)\b", first)
    return found.group(1) if found else None


def standalone() -> list[tuple[str, str]]:
    """(page, block) of every python block that is neither a fragment nor run in another test: it runs here."""
    found = []
    for path in docs.pages():
        for block in docs.blocks("python", path.read_text(encoding="utf-8")):
            named = fragment_of(block)
            if named is not None:
                assert (docs.ROOT / named).is_file(), f"{path.name}: names {named}, which does not exist"
            elif not any(marker in block for marker in RUN_ELSEWHERE):
                found.append((str(path.relative_to(docs.ROOT)), block))
    return found


@pytest.mark.parametrize(("page", "block"), standalone(), ids=lambda value: value if value.endswith(".md") else "")
def test_every_other_python_block_runs_as_written(page, block, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(block, page, "exec"), {"__name__": "__main__"})


def test_the_blocks_run_elsewhere_are_there():
    for marker in RUN_ELSEWHERE:
        docs.block("python", marker)


def test_control_a_block_that_names_nothing_is_found():
    assert fragment_of("lease = bob.acquire('reports/daily', ttl=30, wait=60)\n") is None
    assert fragment_of("# from examples/wait.py: bob waits\nlease = ...\n") == "examples/wait.py"


def included() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in docs.pages():
        for target in re.findall(r"```\{literalinclude\} ([^\s]+)", path.read_text(encoding="utf-8")):
            resolved = (path.parent / target).resolve()
            found.setdefault(str(resolved.relative_to(docs.ROOT)), []).append(path.name)
    return found


def test_every_literalinclude_names_a_file_and_every_example_is_shown():
    shown = included()
    assert all((docs.ROOT / name).is_file() for name in shown)
    examples = {f"examples/{path.name}" for path in (docs.ROOT / "examples").glob("*.py")}
    assert examples - set(shown) == set(), "an example no page shows"


# ---------------------------------------------------------------------------
# What the pages say about their blocks (from the README, before issue 27)
# ---------------------------------------------------------------------------


def test_the_tooz_guide_says_the_example_needs_the_tester_extra_too():
    page = docs.page("docs/howto/tooz.md")
    assert "pip install '.[tooz,tester]'" in page.split("```{literalinclude}", 1)[0]
    assert "chainfence+embedded://" in docs.page("examples/tooz_lock.py")


def test_without_the_tester_extra_the_tooz_example_says_which_extra():
    """What the guide says happens without [tester]: start() raises tooz's ToozError, ExtraNotInstalled naming
    the extra its __cause__."""
    import subprocess
    import sys

    example = docs.page("examples/tooz_lock.py")
    code = (
        "import sys\nsys.modules['eth_tester'] = None\nimport tooz\n"
        f"try:\n    exec(compile({example!r}, 'tooz_lock.py', 'exec'), {{}})\n"
        "except tooz.ToozError as error:\n"
        "    print(type(error.__cause__).__name__, error.__cause__.extra)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip() == "ExtraNotInstalled tester", done.stderr


def test_the_mcp_configuration_gives_the_full_path_and_says_why():
    page = docs.page("docs/howto/mcp.md")
    config = json.loads(docs.block("json", "mcpServers", page))
    command = config["mcpServers"]["chainfence"]["command"]
    assert command.startswith("/") and command.endswith("/.venv/bin/chainfence")
    said = " ".join(page.split("```sh\ncast", 1)[0].split())
    assert "`command` is the full path of the venv's `chainfence`" in said
    assert "command -v chainfence" in said and "desktop host" in said


def test_the_cast_example_calls_functions_the_shipped_abi_has():
    """cast itself is not installed by the suite: each `cast call ADDRESS "f(in)(out)"` of the MCP guide is
    checked against abi/FencingRegistry.json (the name, the argument types, the answer types, a view)."""
    from eth_utils import keccak

    from chainfence._sdk import names as _names

    text = docs.page("docs/howto/mcp.md")
    abi = json.loads(docs.page("abi/FencingRegistry.json"))
    functions = {
        (f["name"], tuple(i["type"] for i in f["inputs"]), tuple(o["type"] for o in f["outputs"])): f
        for f in abi
        if f.get("type") == "function"
    }
    calls = re.findall(r'cast call "\$CHAINFENCE_REGISTRY" "(\w+)\(([^)]*)\)\(([^)]*)\)"', text)
    assert len(calls) >= 2
    for name, inputs, outputs in calls:
        key = (name, tuple(filter(None, inputs.split(","))), tuple(filter(None, outputs.split(","))))
        assert key in functions, key
        assert functions[key]["stateMutability"] in ("view", "pure")
    assert "cast interface abi/FencingRegistry.json" in text
    # The id the example hashes is the SDK's: keccak256 of the name's UTF-8 bytes.
    assert 'id=$(cast keccak "$(cast from-utf8 reports/daily)")' in text
    assert _names.resource_id("reports/daily") == keccak(b"reports/daily")
