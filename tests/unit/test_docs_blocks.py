"""Every code block of the documentation runs as written, or names the complete file it is a fragment of; and
the pages' words about a block stay true (the tooz extras, the MCP configuration, the `cast` calls).

- A ```python block runs as written (the README's example: tests/unit/test_readme.py; the one that needs a
  node: tests/integration/test_readme_shell.py), or is a fragment whose first line names its file in
  examples/ (``# from examples/NAME.py``), which tests/integration/test_examples.py runs.
- A ``literalinclude`` names a file that exists; every file of examples/ is shown on some page.
- A shell block (```sh, ```console, ```bash) carries a mark, the second word of its info string (MyST and
  GitHub read the first), that says how it is held (``MARKS``): ```sh run blocks run as written in
  tests/integration/test_readme_shell.py; the others say why they cannot, and a test checks each.
- A ```text block is an illustration, or ``text output of examples/NAME.py`` (``output of chainfence demo``):
  what that prints, checked against it. No block is unlabelled. docs/benchmarks/history.md is a dated record,
  out of the site, and exempt (``test_the_notebook_is_a_record_out_of_the_site``).
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
    said = " ".join(page.split("```sh cast\ncast", 1)[0].split())
    assert "`command` is the full path of the venv's `chainfence`" in said
    assert "command -v chainfence" in said and "desktop host" in said


def test_the_cast_blocks_call_functions_the_shipped_abi_has():
    """cast itself is not installed by the suite: each `cast call ADDRESS "f(in)(out)"` of a ```sh cast block is
    checked against abi/FencingRegistry.json (the name, the argument types, the answer types, a view), and
    every other line of such a block is one of the two below."""
    from eth_utils import keccak

    from chainfence._sdk import names as _names

    abi = json.loads(docs.page("abi/FencingRegistry.json"))
    functions = {
        (f["name"], tuple(i["type"] for i in f["inputs"]), tuple(o["type"] for o in f["outputs"])): f
        for f in abi
        if f.get("type") == "function"
    }
    blocks = docs.shell_blocks("cast")
    assert [path.name for path, _ in blocks] == ["mcp.md"]
    for _, block in blocks:
        lines = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
        calls = re.findall(r'cast call "\$CHAINFENCE_REGISTRY" "(\w+)\(([^)]*)\)\(([^)]*)\)"', block)
        assert len(calls) == sum(line.startswith("cast call ") for line in lines) >= 2
        for name, inputs, outputs in calls:
            key = (name, tuple(filter(None, inputs.split(","))), tuple(filter(None, outputs.split(","))))
            assert key in functions, key
            assert functions[key]["stateMutability"] in ("view", "pure")
        others = [line for line in lines if not line.startswith("cast call ")]
        assert others == [
            "cast interface abi/FencingRegistry.json",
            'id=$(cast keccak "$(cast from-utf8 reports/daily)")',
        ]
    assert (docs.ROOT / "abi" / "FencingRegistry.json").is_file()
    # The id the example hashes is the SDK's: keccak256 of the name's UTF-8 bytes.
    assert _names.resource_id("reports/daily") == keccak(b"reports/daily")


# ---------------------------------------------------------------------------
# Every block says what it is (issue 27, item 5: none silently skipped)
# ---------------------------------------------------------------------------

#: A shell block's mark: why it runs or cannot run here, and the test that holds it.
MARKS = {
    "run": "runs as written against a `chainfence node` of its own, in its directory, with the environment the "
    "page says to set: tests/integration/test_readme_shell.py::test_every_runnable_block_has_its_test",
    "server": "runs until Ctrl-C, in a terminal of its own: "
    "tests/integration/test_readme_shell.py::test_the_server_blocks_start_the_node_they_describe (on a free port)",
    "real-chain": "needs a provider and a funded key: tests/integration/test_readme_shell.py::"
    "test_the_real_chain_blocks_run_against_an_anvil_of_their_own (same flags, the placeholders filled in)",
    "setup": "the checkout's own setup (and the suite itself): tests/unit/test_docs_blocks.py::"
    "test_the_setup_blocks_name_the_scripts_ci_runs",
    "install": "installs into the reader's environment: tests/unit/test_docs_blocks.py::"
    "test_every_install_block_installs_from_a_checkout",
    "cast": "needs Foundry's cast, which the suite does not install: tests/unit/test_docs_blocks.py::"
    "test_the_cast_blocks_call_functions_the_shipped_abi_has",
    "record": "a measurement as it was run, its figures beside it (minutes of CPU, etcd, valgrind): "
    "tests/unit/test_docs_blocks.py::test_every_recorded_command_names_scripts_and_options_that_exist",
}
#: Other languages a block may be written in, each held elsewhere (python above; json: the MCP configuration;
#: promql: tests/unit/test_metrics.py reads docs/metrics.md's series).
LANGUAGES = ("python", "json", "promql", "text")
NOTEBOOK = docs.DOCS / "benchmarks" / "history.md"


def unmarked(text: str) -> list[str]:
    """The blocks of a page that do not say what they are, as ``info: first line``."""
    found = []
    for info, body in docs.fences(text):
        words = info.split()
        language = words[0] if words else ""
        first = f"{info or '(no info string)'}: {body.splitlines()[0] if body.strip() else ''}"
        if not language:
            found.append(first)
        elif language.startswith("{"):
            continue  # a MyST directive: literalinclude, include, toctree, argparse, the site's own
        elif language in docs.SHELL:
            if len(words) < 2 or words[1] not in MARKS:
                found.append(first)
        elif language == "text":
            if words[1:] and output_source(info) is None:
                found.append(first)
        elif language not in LANGUAGES:
            found.append(first)
    return found


def output_source(info: str) -> str | None:
    """What a ```text output of X block is the output of: ``examples/NAME.py`` or ``chainfence demo``."""
    found = re.fullmatch(r"text output of (examples/\w+\.py|chainfence demo)", info.strip())
    return found.group(1) if found else None


def test_every_block_says_what_it_is():
    pages = [path for path in docs.pages() if path != NOTEBOOK]
    found = {str(path.relative_to(docs.ROOT)): unmarked(path.read_text(encoding="utf-8")) for path in pages}
    assert {page: blocks for page, blocks in found.items() if blocks} == {}
    marks = {
        info.split()[1]
        for path in pages
        for info, _ in docs.fences(path.read_text(encoding="utf-8"))
        if info.split()[:1] and info.split()[0] in docs.SHELL
    }
    assert marks == set(MARKS), "a mark no block uses, or a block whose mark has no test"


def test_each_mark_names_a_test_that_exists():
    import importlib

    for mark, said in MARKS.items():
        module, name = re.search(r"tests/(\S+)\.py::(\w+)", said).groups()
        assert hasattr(importlib.import_module(f"tests.{module.replace('/', '.')}"), name), mark


def test_control_a_new_unmarked_block_is_found():
    page = (
        "```sh\nchainfence acquire x --ttl 5\n```\n"
        "```console\n$ chainfence status x\n```\n"
        "```bash maybe\nchainfence status x\n```\n"
        "```\n$ python scripts/bench_wait.py\n```\n"
        "````\n```sh run\nnot a block: inside a longer fence\n```\n````\n"
        "```text output of a script somewhere\nhello\n```\n"
        "```yaml\nkey: value\n```\n"
        "```sh run\nchainfence status x\n```\n"
        "```text\nt=0  an illustration\n```\n"
        "```{literalinclude} ../../examples/wait.py\n```\n"
    )
    assert unmarked(page) == [
        "sh: chainfence acquire x --ttl 5",
        "console: $ chainfence status x",
        "bash maybe: chainfence status x",
        "(no info string): $ python scripts/bench_wait.py",
        "(no info string): ```sh run",
        "text output of a script somewhere: hello",
        "yaml: key: value",
    ]


def test_the_notebook_is_a_record_out_of_the_site():
    """docs/benchmarks/history.md keeps each measurement as it was run on its date (its commands against the
    code of that day): it is left out of the site, and says so where it opens."""
    conf = docs.page("docs/conf.py")
    assert '"benchmarks/history.md"' in conf.split("exclude_patterns", 1)[1].split("\n", 1)[0]
    opening = " ".join(NOTEBOOK.read_text(encoding="utf-8").split("\n## ", 1)[0].split())
    assert "a dated record" in opening and "not kept runnable" in opening


def test_the_setup_blocks_name_the_scripts_ci_runs():
    blocks = docs.shell_blocks("setup")
    assert [path.name for path, _ in blocks] == ["README.md"]
    for _, block in blocks:
        commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
        assert commands == ["./scripts/demo.sh", "./scripts/test.sh"]
        for command in commands:
            script = docs.ROOT / command
            assert script.is_file() and script.stat().st_mode & 0o111, command
    assert "exec ./scripts/test.sh" in docs.page(".ci/run")
    assert 'exec "$VENV/bin/chainfence" demo' in docs.page("scripts/demo.sh")


def test_every_install_block_installs_from_a_checkout():
    import tomllib

    extras = set(tomllib.loads(docs.page("pyproject.toml"))["project"]["optional-dependencies"])
    blocks = docs.shell_blocks("install")
    assert len(blocks) >= 4
    for path, block in blocks:
        for line in filter(str.strip, block.splitlines()):
            command = line.split("#")[0].strip()
            found = re.fullmatch(r"pip install (-e )?(\.|'\.\[([a-z,]+)\]')", command)
            assert found, f"{path.name}: {command}"
            assert set(filter(None, (found.group(3) or "").split(","))) <= extras, f"{path.name}: {command}"


def recorded_commands() -> list[tuple[str, str]]:
    """(page, command) of each ``$ `` line of the ```console record blocks, continuation lines joined."""
    found = []
    for path, block in docs.shell_blocks("record"):
        text = re.sub(r"\\\n\s*", " ", block)
        found += [(path.name, line[2:]) for line in text.splitlines() if line.startswith("$ ")]
    return found


def recorded_problems(commands: list[tuple[str, str]]) -> list[str]:
    """What no longer holds of recorded commands: a script gone, an option its --help does not list, a
    `chainfence` command that is not one."""
    import argparse
    import subprocess
    import sys

    from chainfence.cli import _parser

    (choices,) = [a.choices for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    helps: dict[str, str] = {}
    problems = []
    for page, command in commands:
        words = command.split("#")[0].split()
        for at, word in enumerate(words):
            if re.fullmatch(r"scripts/\w+\.py", word):
                if not (docs.ROOT / word).is_file():
                    problems.append(f"{page}: no {word}")
                    continue
                if word not in helps:
                    helps[word] = subprocess.run(
                        [sys.executable, str(docs.ROOT / word), "--help"],
                        capture_output=True,
                        text=True,
                        timeout=120,
                        check=True,
                    ).stdout
                given = [w.split("=")[0] for w in words[at + 1 :] if w.startswith("--")]
                problems += [f"{page}: {word} has no {option}" for option in given if option not in helps[word]]
            command_word = word == "chainfence" or word.endswith("/chainfence")
            if command_word and not words[at - 1].startswith("--") and words[at + 1] not in choices:
                problems.append(f"{page}: chainfence has no command {words[at + 1]}")
    return problems


def test_every_recorded_command_names_scripts_and_options_that_exist():
    """A recorded command is not rerun (its figures are the record), but it stays one a reader can run: each
    script it names exists and lists each option given in its --help, each `chainfence` command is one."""
    commands = recorded_commands()
    assert len(commands) >= 9
    assert recorded_problems(commands) == []


def test_control_a_recorded_command_gone_stale_is_found():
    stale = [
        ("x.md", "python scripts/bench_sql.py --rounds 5"),
        ("x.md", "python scripts/bench_nothing.py"),
        ("x.md", "valgrind .venv/bin/chainfence stat jobs/a"),
    ]
    assert recorded_problems(stale) == [
        "x.md: scripts/bench_sql.py has no --rounds",
        "x.md: no scripts/bench_nothing.py",
        "x.md: chainfence has no command stat",
    ]
