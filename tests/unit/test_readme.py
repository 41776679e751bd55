"""The README is a front page (issue 27): the two commands, installing from a checkout, one example that runs
as written, the primitive table, links into the site that lead somewhere. What it held before moved into the
site (docs/), each block now a file of examples/ (tests/integration/test_examples.py) or checked where it is
(tests/unit/test_docs_blocks.py)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = README.read_text(encoding="utf-8")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)


def test_the_readme_opens_with_the_two_commands():
    first_block = re.search(r"```sh setup\n(.*?)```", TEXT, flags=re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"]
    assert TEXT.index("```sh") < TEXT.index("##"), "the commands come before any section"
    ci = (README.parent / ".ci" / "run").read_text()
    assert "exec ./scripts/test.sh" in ci


def first_screen_missing(text: str) -> list[str]:
    """What scripts/test.sh installs that the README's first screen (the two commands and the lines after
    them, before the first rule) does not name: each npm package of package.json, each Debian package a
    ``setup_`` step of the script installs, the Python the package requires."""
    import json
    import tomllib

    root = README.parent
    screen = text.split("\n---\n", 1)[0]
    test_line = next(line for line in screen.splitlines() if line.startswith("./scripts/test.sh"))
    npm = [name.rsplit("/", 1)[-1] for name in json.loads((root / "package.json").read_text())["dependencies"]]
    missing = [name for name in npm if not re.search(rf"\b{re.escape(name)}\b", test_line)]
    script = (root / "scripts" / "test.sh").read_text()
    debian = [step for step in ("chromium", "faketime") if f"setup_{step}" in script]
    missing += [name for name in debian if name not in screen]
    requires = tomllib.loads((root / "pyproject.toml").read_text())["project"]["requires-python"]
    if f"Python ≥ {requires.removeprefix('>=')}" not in screen:
        missing.append(f"Python {requires}")
    return missing


def test_the_first_screen_says_what_the_test_script_installs():
    assert first_screen_missing(TEXT) == []


def test_control_the_first_screen_of_before_misses_what_the_script_installs_now():
    before = TEXT.replace("(pinned solc, anvil, forge, hardhat, ganache)", "(pinned solc and anvil)").replace(
        "and Debian's chromium and faketime", "and nothing else"
    )
    assert sorted(first_screen_missing(before)) == ["chromium", "faketime", "forge", "ganache", "hardhat"]


def named_dependencies(page: str) -> dict[str, str]:
    said = " ".join(page.split("Runtime dependencies are ranges, not pins:", 1)[1].split("`.", 1)[0].split()) + "`"
    return dict(re.findall(r"([\w-]+) `([^`]+)`", said))


def test_the_install_page_lists_the_runtime_dependencies_pyproject_declares():
    """docs/reference/install.md, linked from the README's install section: the ranges it names are
    pyproject.toml's dependencies (it named eth-abi and eth-utils, which issue 26 took out)."""
    import tomllib

    page = (README.parent / "docs" / "reference" / "install.md").read_text(encoding="utf-8")
    declared = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    assert named_dependencies(page) == dict(re.match(r"([\w-]+)(.*)", spec).groups() for spec in declared)
    # Control: the page as it was names two packages that are no longer dependencies, and not pycryptodome.
    before = page.replace(
        "eth-keys `>=0.5.1,<0.9`", "eth-abi `>=5.0.1,<7`, eth-utils `>=5,<7`, eth-keys `>=0.5.1,<0.9`"
    )
    assert {"eth-abi", "eth-utils"} <= set(named_dependencies(before))


def test_the_readme_is_a_front_page():
    assert len(TEXT.splitlines()) <= 200
    assert len(python_blocks()) == 1, "one example; the others live in examples/ and the site"
    for heading in ("## Installing from a checkout", "## One example", "## Which primitive", "## Documentation"):
        assert heading in TEXT


def test_it_installs_from_a_checkout():
    install = TEXT.split("## Installing from a checkout", 1)[1].split("##", 1)[0]
    commands = [
        line.split("#")[0].strip()
        for line in re.search(r"```sh install\n(.*?)```", install, flags=re.S).group(1).splitlines()
    ]
    assert commands == ["pip install .", "pip install '.[tester]'"]
    assert "pip install chainfence" not in TEXT


def test_every_link_leads_to_a_file():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    assert len(links) > 10
    missing = [link for link in links if not link.startswith("http") and not (README.parent / link).exists()]
    assert missing == []


def test_the_example_runs(tmp_path, monkeypatch, capsys):
    """The walkthrough runs top to bottom and prints the rejection, and the history's reasons by name."""
    monkeypatch.chdir(tmp_path)
    exec(compile(python_blocks()[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "held by" in out and "rejected: token 1" in out and "acquired" in out
    assert (tmp_path / "guard.sqlite").exists()
    # Times people read (issue 27: it printed epoch seconds): the refusal's expiry and each event's block time.
    assert re.search(r"is held by 0x[0-9a-fA-F]{40} with token 1 until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", out, re.M)
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00"
    history = [line.split()[2:] for line in out.splitlines() if re.match(rf"{stamp} (acquired|released) ", line)]
    assert [row[0] for row in history][:2] == ["acquired", "acquired"], out
    assert [row[-1] for row in history if row[0] == "acquired"][:2] == ["unheld", "expired"]  # names, not numbers


def test_the_example_runs_twice(tmp_path, monkeypatch, capsys):
    """Each run starts a new embedded chain; the example starts its guard store anew rather than meet the last
    run's (a guard refuses another registry's store: GuardStoreMismatch)."""
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        exec(compile(python_blocks()[0], "README.md", "exec"), {})
    capsys.readouterr()


def test_the_example_is_the_examples_file():
    """The README's example is examples/paused_agent_guard.py's code (its docstring aside): one text."""
    example = (README.parent / "examples" / "paused_agent_guard.py").read_text(encoding="utf-8")
    code = example.split('"""', 2)[2].lstrip("\n")
    assert python_blocks()[0] == code


def test_the_primitive_table_leads_from_each_failure_to_its_guide():
    table = TEXT.split("## Which primitive for which problem", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| the failure")]
    assert len(rows) >= 5
    assert "twice in sequence" in rows[0] and "claim with completion" in rows[0] and "scheduled-job.md" in rows[0]


def test_the_help_epilog_lists_every_exit_code_in_order():
    from chainfence.cli import _common

    listed = [int(m) for m in re.findall(r"^  (\d+)  ", _common.EPILOG, flags=re.M)]
    assert listed == sorted(
        value for name, value in vars(_common).items() if name.startswith("EXIT_") and isinstance(value, int)
    )
    own = f"{_common.LOCK_OWN + 1}-{_common.LOCK_OWN + _common.EXIT_UNVERIFIED}"
    assert f"\n  {own}  `chainfence lock`'s own ends: {_common.LOCK_OWN} + their code above" in _common.EPILOG
