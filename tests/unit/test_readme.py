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
    history = [line.split()[1:] for line in out.splitlines() if line.split()[1:2] in (["acquired"], ["released"])]
    assert [row[-1] for row in history if row[0] == "acquired"][:2] == ["unheld", "expired"]  # names, not numbers


@pytest.mark.parametrize("marker", ['path="guard.sqlite"', 'path="billing-guard.sqlite"', 'path="service.sqlite"'])
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
