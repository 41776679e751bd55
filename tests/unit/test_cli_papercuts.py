"""What held a shell-script author back (issue 27, the shell papercuts), without a chain: `chainfence help`,
an unknown short option named as such, `audit at --time` of today. The node-backed ones (lock's exit
codes, its `--json` end, a second Ctrl-C) are in tests/integration/test_cli_papercuts.py."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import time

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
    assert code == (EXIT_USAGE if argv[0] != "lock" else cli.lock_exit_code(EXIT_USAGE))
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


# ---------------------------------------------------------------------------
# audit at --time 14:02: a time of today
# ---------------------------------------------------------------------------


@pytest.fixture
def kathmandu(monkeypatch):
    """This process in a local time zone 5 h 45 min east of UTC (so local and UTC read apart)."""
    monkeypatch.setenv("TZ", "Asia/Kathmandu")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _today_at(hour: int, minute: int, second: int = 0, zone: datetime.tzinfo | None = None) -> set[int]:
    """The chain time of that time of day on today's local date (both dates, should the day turn meanwhile)."""
    days = {datetime.date.today(), datetime.date.today() - datetime.timedelta(days=1)}
    moments = [datetime.datetime.combine(day, datetime.time(hour, minute, second, tzinfo=zone)) for day in days]
    return {int((m if zone is not None else m.astimezone()).timestamp()) for m in moments}


@pytest.mark.parametrize("command", [["at", "jobs/a"], ["takeovers"], ["completions"]], ids=lambda c: c[0])
def test_a_time_of_day_alone_is_today_in_local_time_unless_it_says(kathmandu, command):
    """On main: "not unix seconds or an ISO 8601 time: '14:02'" (exit 2)."""
    audit = cli._parser("audit").subcommand("audit")
    option = "--time" if command[0] == "at" else "--since"
    dest = option[2:]
    for text, expected in (
        ("14:02", _today_at(14, 2)),
        ("14:02:30", _today_at(14, 2, 30)),
        ("14:02Z", _today_at(14, 2, zone=datetime.UTC)),
        ("14:02+01:00", _today_at(14, 2, zone=datetime.timezone(datetime.timedelta(hours=1)))),
    ):
        parsed = audit.parse_args([*command, option, text])
        assert getattr(parsed, dest) in expected, text
    local = getattr(audit.parse_args([*command, option, "14:02"]), dest)
    utc = getattr(audit.parse_args([*command, option, "14:02Z"]), dest)
    assert utc - local == 5 * 3600 + 45 * 60, "14:02 is read in the local zone, not as UTC"
    # a full ISO time without a zone is still UTC, as before
    assert getattr(audit.parse_args([*command, option, "2026-11-22T12:03:07"]), dest) == 1_795_348_987


def test_a_time_of_day_out_of_range_is_a_usage_error_saying_what_is_taken(capsys):
    code, out, err = _said(["audit", "at", "jobs/a", "--time", "25:00"], capsys)
    assert code == EXIT_USAGE and "or a time of day (14:02): '25:00'" in err


def test_the_help_says_which_zone_a_time_of_day_is_in():
    text = " ".join(cli._parser("audit").subcommand("audit").subcommand("at").format_help().split())
    assert "a time of day alone (14:02, 14:02:30): today's, in this machine's local time unless it says" in text


# ---------------------------------------------------------------------------
# audit timeline --rejections: a guard's log, or a list; ISO times too
# ---------------------------------------------------------------------------


def test_rejections_are_read_as_a_guard_writes_them_and_take_iso_times(tmp_path):
    """Issue 27: the overlay took a hand-made JSON list whose times were unix seconds only, while --time
    took ISO. A guard's JSON Lines (Guard(rejection_log=)) and ISO times are read too."""
    from chainfence.audit.timeline import Rejection
    from chainfence.cli.audit import _rejections
    from chainfence.errors import InvalidInput

    lines = tmp_path / "rejections.jsonl"
    lines.write_text(
        '{"resource": "r", "time": 1795348987, "token": 3, "holder": null, "reason": "StaleToken"}\n\n'
        '{"resource": "r", "time": "2026-11-22T12:03:08", "token": 4}\n'
    )
    assert _rejections(str(lines)) == [
        Rejection("r", 1_795_348_987, 3, None, "StaleToken"),
        Rejection("r", 1_795_348_988, 4),
    ]
    listed = tmp_path / "rejections.json"
    listed.write_text(json.dumps([{"resource": "r", "time": "2026-11-22T12:03:07Z", "token": 3}]))
    assert _rejections(str(listed)) == [Rejection("r", 1_795_348_987, 3)]
    for text, said in (
        ('{"resource": "r", "token": 3}\n', "rejection 1 lacks time"),
        ('{"resource": "r", "time": "soon", "token": 3}\n', "rejection 1: not unix seconds"),
        ('{"resource": "r", "time": 1, "token": 3, "extra": 1}\n', "unknown field(s) ['extra'] in rejection 1"),
        ("[1, 2]", "expected JSON objects"),
        ("{not json", "cannot read rejections"),
    ):
        lines.write_text(text)
        with pytest.raises(InvalidInput, match=re.escape(said)):
            _rejections(str(lines))
