"""What held a shell-script author back (issue 27, the shell papercuts), without a chain: `chainfence help`,
an unknown short option named as such, `audit at --time` of today. The node-backed ones (lock's exit
codes, its `--json` end, a second Ctrl-C) are in tests/integration/test_cli_papercuts.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from chainfence.cli import EXIT_USAGE, main


def _said(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    """What ``chainfence ARGV`` exits with (a --help exits through SystemExit) and prints."""
    try:
        code: object = main(argv)
    except SystemExit as exited:
        code = exited.code
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------
# chainfence help [COMMAND...]
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "words",
    [[], ["lock"], ["status"], ["audit"], ["audit", "at"], ["namespace", "policy", "set"]],
    ids=lambda words: " ".join(words) or "(none)",
)
def test_help_command_prints_what_command_help_prints(words, capsys):
    code, out, err = _said(["help", *words], capsys)
    assert (code, err) == (0, "")
    assert (code, out, err) == _said([*words, "--help"], capsys)
    assert out.startswith(f"usage: chainfence {' '.join(words)}".rstrip() + " ")


def test_help_with_verbose_before_it_and_help_help():
    for argv in (["-v", "help", "acquire"], ["help", "help"]):
        done = subprocess.run([sys.executable, "-m", "chainfence", *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert done.stdout.startswith("usage: chainfence acquire " if "acquire" in argv else "usage: chainfence [")


def test_help_of_an_unknown_command_is_a_usage_error_naming_it(capsys):
    code, out, err = _said(["help", "bogus"], capsys)
    assert code == EXIT_USAGE and "invalid choice: 'bogus'" in err


def test_the_top_level_help_says_help_command():
    out = subprocess.run([sys.executable, "-m", "chainfence", "--help"], capture_output=True, text=True, timeout=120)
    assert "`chainfence help COMMAND`" in out.stdout
