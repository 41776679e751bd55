"""The chainfence command: the demo's story, exit codes, usage errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from chainfence.cli import EXIT_OK, EXIT_USAGE, main


@pytest.fixture(scope="module")
def demo_output() -> subprocess.CompletedProcess[str]:
    """`python -m chainfence demo`, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "chainfence", "demo"], capture_output=True, text=True, timeout=120, check=False
    )


def test_demo_exits_zero(demo_output):
    assert demo_output.returncode == 0, demo_output.stderr


def test_the_tutorial_shows_what_the_demo_prints(demo_output):
    """The tutorial's ```text output of chainfence demo block (abridged) is the demo's output, line by line."""
    from tests.support import docs

    shown = docs.outputs_shown("chainfence demo")
    assert [page.name for page, _ in shown] == ["index.md"]
    assert docs.not_printed(shown[0][1], demo_output.stdout) == []


def test_demo_shows_the_unfenced_run_losing_b_write(demo_output):
    unfenced = demo_output.stdout.split("Run 2")[0]
    assert "no fencing" in unfenced
    assert "overwrites agent-B's report" in unfenced
    assert "agent-B's write was LOST" in unfenced


def test_demo_shows_the_guard_rejecting_the_stale_write(demo_output):
    fenced = demo_output.stdout.split("Run 2")[1].split("Lease history")[0]
    assert "REJECTED" in fenced
    assert "StaleToken" in fenced
    assert "token 1" in fenced and "token 2" in fenced
    assert "agent-B's write survived" in fenced


def test_demo_ends_with_the_lease_history(demo_output):
    history = demo_output.stdout.split("Lease history")[1]
    lines = [line for line in history.splitlines() if line.strip().startswith("t=+")]
    assert [line.split()[1:4] for line in lines] == [
        ["acquired", "1", "agent-A"],
        ["acquired", "2", "agent-B"],
        ["released", "2", "agent-B"],
    ]
    assert "had expired" in lines[1]


def test_demo_logs_nothing_unless_asked(demo_output):
    assert demo_output.stderr == ""


def test_demo_with_custom_timing(capsys):
    assert main(["demo", "--ttl", "5", "--pause", "9"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "ttl 5s" in out and "paused for 9s" in out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["demo", "--ttl", "0"],
        ["demo", "--ttl", "ten"],
        ["demo", "--ttl", "30", "--pause", "30"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_two(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == EXIT_USAGE
    assert "usage" in capsys.readouterr().err


def test_verbose_logs_one_line_per_lease_change():
    done = subprocess.run(
        [sys.executable, "-m", "chainfence", "-v", "demo"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0
    acquired = [line for line in done.stderr.splitlines() if "acquired resource=reports/daily" in line]
    assert len(acquired) == 4  # two agents, two runs
    assert all("token=" in line and "tx=0x" in line for line in acquired)


def test_version():
    done = subprocess.run(
        [sys.executable, "-m", "chainfence", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "chainfence 0.2.0" in done.stdout


def test_every_exit_code_is_in_the_reference_and_the_help():
    """The site's exit-code page is generated from the epilog (docs/_ext/chainfence_docs.py: exit_meanings)."""
    import re
    import sys
    from pathlib import Path

    from chainfence import cli
    from chainfence.cli import _common
    from chainfence.errors import LeaseLost

    codes = {value for name, value in vars(cli).items() if name.startswith("EXIT_")}
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "_ext"))
    try:
        import chainfence_docs
    finally:
        sys.path.pop(0)
    rows = {int(code) for code in chainfence_docs.exit_meanings() if code.isdigit()}
    helped = {int(code) for code in re.findall(r"^  (\d+)  ", _common.EPILOG, flags=re.M)}
    assert codes <= rows and codes <= helped
    assert cli.exit_code(LeaseLost(resource="r", token=1, why="deadline")) == cli.EXIT_LOST == 7
