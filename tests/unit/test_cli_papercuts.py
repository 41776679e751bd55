"""What held a shell-script author back (issue 27, the shell papercuts), without a chain: `chainfence help`,
an unknown short option named as such, `audit at --time` of today. The node-backed ones (lock's exit
codes, its `--json` end, a second Ctrl-C) are in tests/integration/test_cli_papercuts.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chainfence import cli
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


# ---------------------------------------------------------------------------
# An option the command does not have is named, before what is missing
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["acquire", "jobs/a", "-t", "30"],
        ["renew", "jobs/a", "--token", "1", "-t", "30"],
        ["claim", "backfill", "a", "b", "-t", "30"],
        ["grant", "prod/db", "0x" + "11" * 20, "-t", "30"],
        ["acquire-many", "a", "b", "-t", "30"],
        ["lock", "jobs/a", "-t", "30", "true"],
        ["demo", "-t", "30"],
    ],
    ids=lambda argv: argv[0],
)
def test_a_short_t_is_named_as_no_option_and_ttl_suggested(argv, capsys):
    """On main: "the following arguments are required: --ttl", which says nothing of the -t typed."""
    code, out, err = _said(argv, capsys)
    assert code == EXIT_USAGE
    last = err.rstrip().splitlines()[-1]
    assert f"chainfence {argv[0]}: error: unrecognized arguments: -t (-t is no option of chainfence {argv[0]}" in last
    assert "did you mean --ttl" in last and "required" not in err


def test_the_unknown_option_under_json_is_one_document_naming_it(capsys):
    code, out, err = _said(["acquire", "jobs/a", "-t", "30", "--json"], capsys)
    assert code == EXIT_USAGE
    document = json.loads(out)
    assert document["exit_code"] == EXIT_USAGE and "-t is no option of chainfence acquire" in document["message"]


def test_a_misspelt_long_option_is_suggested_and_an_unlike_one_is_not(capsys):
    _, _, err = _said(["status", "x", "--regsitry", "0x01"], capsys)
    assert err.rstrip().endswith("--regsitry is no option of chainfence status: did you mean --registry?)")
    _, _, err = _said(["status", "x", "--bogus"], capsys)
    assert err.rstrip().endswith("unrecognized arguments: --bogus")
    # what argparse reads as known is not reported: abbreviations, attached values, counted flags
    parser = cli._parser("status").subcommand("status")
    assert parser.unknown_options(["--reg", "0x01", "--ttl=3", "-vv", "-wjson", "-5", "-", "--", "-x"]) == ["--ttl=3"]
