"""The README's examples run as written (pottery does the same)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_opens_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    first_block = re.search(r"```sh\n(.*?)```", text, flags=re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"]
    assert text.index("```sh") < text.index("##"), "the commands come before any section"
    ci = (README.parent / ".ci" / "run").read_text()
    assert "exec ./scripts/test.sh" in ci


def test_the_main_example_runs(tmp_path, monkeypatch, capsys):
    """The SDK walkthrough runs top to bottom and prints the rejection."""
    monkeypatch.chdir(tmp_path)
    example = python_blocks()[0]
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "held by" in out and "rejected: token 1" in out and "acquired" in out
    assert (tmp_path / "guard.sqlite").exists()
    # Times people read (issue 27: it printed epoch seconds): the refusal's expiry and each event's block time.
    assert re.search(r"is held by 0x[0-9a-fA-F]{40} with token 1 until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", out, re.M)
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00"
    history = [line.split()[2:] for line in out.splitlines() if re.match(rf"{stamp} (acquired|released) ", line)]
    assert [row[0] for row in history][:2] == ["acquired", "acquired"], out
    assert [row[-1] for row in history if row[0] == "acquired"][:2] == ["unheld", "expired"]  # names, not numbers


@pytest.mark.parametrize(
    "marker", ['path="guard.sqlite"', 'path="billing-guard.sqlite"', 'path="service.sqlite"', 'path="admitted.sqlite"']
)
def test_the_examples_that_create_a_guard_file_run_twice(marker, tmp_path, monkeypatch, capsys):
    """Each run starts a new embedded chain; the example starts its guard store anew rather than
    meet the last run's (a guard refuses another registry's store: GuardStoreMismatch)."""
    monkeypatch.chdir(tmp_path)
    example = next(block for block in python_blocks() if marker in block)
    for _ in range(2):
        exec(compile(example, "README.md", "exec"), {})
    capsys.readouterr()


def test_the_signed_request_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    example = next(block for block in python_blocks() if "lease.sign(body" in block)
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "409 ReplayedRequest"


def test_the_keep_alive_example_runs(capsys):
    example = next(block for block in python_blocks() if "lease.keep(on_lost=" in block)
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "write part 1 with token 1" in out and "write part 2 with token 1" in out and "lost" not in out


def test_the_election_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    example = next(block for block in python_blocks() if "bob.campaign(wait=60)" in block)
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        "leader: None",
        "alice leads with token 1",
        "bob leads with token 2",
        "a late write with token 1 is refused",
        "terms: [1, None, 2, None]",
    ]


def test_the_asyncio_example_runs(capsys):
    example = next(block for block in python_blocks() if "from chainfence.aio import" in block)
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "async write with token 1" in out and "released: True" in out


def test_the_admission_example_runs(tmp_path, monkeypatch, capsys):
    """A stranger's genuine token is refused by a guard admitting only Alice, and no mark moves."""
    monkeypatch.chdir(tmp_path)
    example = next(block for block in python_blocks() if "Admission.local([alice.sender])" in block)
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "local 0"


def test_the_other_examples_are_valid_python():
    """They need a node, an app or a database around them: compiled, not run (the suites run them)."""
    for block in python_blocks()[1:]:
        compile(block, "README.md", "exec")


def test_the_claims_and_progress_examples_run_after_the_main_one(tmp_path, monkeypatch, capsys):
    """They continue the walkthrough (its chain, registry, alice and bob)."""
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks()
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    for marker in (
        'alice.claim("backfill"',
        'lease.renew(progress=b"step-1")',
        'AuditIndex("audit.sqlite")',
        "prod = ops.namespace_of()",
    ):
        example = next(block for block in blocks if marker in block)
        exec(compile(example, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "2026-11-01" in out
    assert (
        "refused:" in out and "no longer counts" in out and "lock-delay until" in out and out.rstrip().endswith("True")
    )
    assert "1 0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF UNHELD 0 expired" in out, "the audit example ran"


def test_the_tooz_example_runs(capsys):
    """The tooz walkthrough: worker-1 holds with a token, releases on exit, worker-2 then gets the lock."""
    example = next(block for block in python_blocks() if "tooz.coordination.get_coordinator" in block)
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("worker-1 holds it with fencing token ") and out[1] == "worker-2 got it: True"


# ---------------------------------------------------------------------------
# What a newcomer tripped on (issue 19): the exit-code table, the tooz extras, the MCP command, cast
# ---------------------------------------------------------------------------


def test_the_exit_code_table_is_one_table_with_every_code_in_order():
    """Its rows follow each other (a blank line inside split it in two before), one per documented code."""
    from chainfence.cli import _common

    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index("| exit | meaning |")
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append(line.split("|")[1].strip())
    everywhere = [int(line.split("|")[1]) for line in lines if re.match(r"^\| \d+ \|", line)]
    codes = sorted(
        value for name, value in vars(_common).items() if name.startswith("EXIT_") and isinstance(value, int)
    )
    numbered = [int(cell) for cell in table if cell.isdigit()]
    assert numbered == everywhere == codes
    below = [code for code in codes if code < _common.LOCK_OWN]
    assert below == list(range(len(below)))
    assert 13 in codes  # EXIT_UNVERIFIED: a proven answer that does not verify
    # `lock`'s own ends: one row after the codes they add to, then a missing command's, as a shell's (issue 27)
    own = f"{_common.LOCK_OWN + 1}–{_common.LOCK_OWN + _common.EXIT_UNVERIFIED}"
    assert table[len(below) :] == [own, "126", "127"]
    assert codes[len(below) :] == [_common.EXIT_CANNOT_RUN, _common.EXIT_NOT_FOUND] == [126, 127]


def test_the_help_epilog_lists_every_exit_code_in_order():
    from chainfence.cli import _common

    listed = [int(m) for m in re.findall(r"^  (\d+)  ", _common.EPILOG, flags=re.M)]
    assert listed == sorted(
        value for name, value in vars(_common).items() if name.startswith("EXIT_") and isinstance(value, int)
    )
    own = f"{_common.LOCK_OWN + 1}-{_common.LOCK_OWN + _common.EXIT_UNVERIFIED}"
    assert f"\n  {own}  `chainfence lock`'s own ends: {_common.LOCK_OWN} + their code above" in _common.EPILOG


def test_the_tooz_example_says_it_needs_the_tester_extra_too():
    text = README.read_text(encoding="utf-8")
    section = text.split("### tooz (OpenStack's coordination API)", 1)[1].split("```python", 1)[0]
    assert "pip install 'chainfence[tooz,tester]'" in section
    example = next(block for block in python_blocks() if "tooz.coordination.get_coordinator" in block)
    assert "chainfence+embedded://" in example


def test_without_the_tester_extra_the_tooz_example_says_which_extra(tmp_path):
    """What the README says happens without [tester]: start() raises tooz's ToozError, ExtraNotInstalled
    naming the extra its __cause__."""
    import subprocess
    import sys

    example = next(block for block in python_blocks() if "tooz.coordination.get_coordinator" in block)
    code = (
        "import sys\nsys.modules['eth_tester'] = None\nimport tooz\n"
        f"try:\n    exec(compile({example!r}, 'README.md', 'exec'), {{}})\n"
        "except tooz.ToozError as error:\n"
        "    print(type(error.__cause__).__name__, error.__cause__.extra)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip() == "ExtraNotInstalled tester", done.stderr


def test_the_mcp_configuration_gives_the_full_path_and_says_why():
    import json

    text = README.read_text(encoding="utf-8")
    section = text.split("### Agents: the MCP server", 1)[1]
    config = json.loads(re.search(r"```json\n(.*?)```", section, flags=re.S).group(1))
    command = config["mcpServers"]["chainfence"]["command"]
    assert command.startswith("/") and command.endswith("/.venv/bin/chainfence")
    said = " ".join(section.split("```sh\ncast", 1)[0].split())
    assert "`command` is the full path of the venv's `chainfence`" in said
    assert "command -v chainfence" in said and "desktop host" in said


def test_the_cast_example_calls_functions_the_shipped_abi_has():
    """cast itself is not installed by the suite: each `cast call ADDRESS "f(in)(out)"` of the README is
    checked against abi/FencingRegistry.json (the name, the argument types, the answer types, a view)."""
    import json

    from eth_utils import keccak

    from chainfence._sdk import names as _names

    text = README.read_text(encoding="utf-8")
    abi = json.loads((README.parent / "abi" / "FencingRegistry.json").read_text(encoding="utf-8"))
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


def test_the_group_commit_example_runs(capsys):
    """Nine agents behind one account: eight acquire, keep and release through the batcher, each with its own
    token; the ninth, on a resource someone else holds, is refused alone."""
    example = next(block for block in python_blocks() if ".batched()" in block)
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    tokens = [int(line.split()[2]) for line in out if " token " in line]
    assert (
        len(tokens) == 8
        and len(set(tokens)) == 8
        and all(" reason unheld" in line for line in out[:-1] if "token" in line)
    )
    assert sum(line.startswith("jobs/busy held by 0x") for line in out) == 1
    words = out[-1].split()  # "17 operations in 3 transactions"
    assert int(words[0]) == 17 and 1 <= int(words[3]) <= 17, out[-1]  # 9 acquisitions, 8 releases
