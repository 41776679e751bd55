"""What a newcomer tripped on (issue 10): -v after the subcommand, JSON usage errors, a missing
deployment file, help with examples, the signing key left alone by read-only commands, and an
unreachable node said in one sentence. No chain: the node-backed ones are in
tests/integration/test_cli_newcomer.py."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from chainfence import cli
from chainfence.cli import EXIT_CONNECTION, EXIT_USAGE, main

NOBODY = "http://127.0.0.1:1"  # nothing listens on port 1 of loopback
REGISTRY = "0x" + "00" * 19 + "01"


def test_verbose_is_accepted_after_the_subcommand():
    done = subprocess.run(
        [sys.executable, "-m", "chainfence", "demo", "-v", "--ttl", "3", "--pause", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert len([line for line in done.stderr.splitlines() if "acquired resource=reports/daily" in line]) == 4
    assert " DEBUG " not in done.stderr  # one -v: lease changes, not RPC


def test_verbose_before_and_after_the_subcommand_add_up():
    parser = cli._parser()
    for argv, level in (
        (["status"], 0),
        (["-v", "status"], 1),
        (["status", "-v"], 1),
        (["-v", "status", "-v"], 2),
        (["status", "-vv"], 2),
        (["node", "-v"], 1),
        (["-v", "demo"], 1),
    ):
        args = parser.parse_args(argv)
        assert args.verbose + args.verbose_after == level, argv


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["status", "--json", "--bogus"], "unrecognized arguments: --bogus"),
        (["acquire", "--json"], "the following arguments are required: resource, --ttl"),
        (["acquire", "r", "--ttl", "zero", "--json"], "argument --ttl: not an integer: 'zero'"),
        (["--json", "no-such-command"], "invalid choice: 'no-such-command'"),
    ],
)
def test_argparse_usage_errors_print_json_under_json(argv, fragment, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == EXIT_USAGE
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["error"] == "UsageError" and document["exit_code"] == EXIT_USAGE
    assert fragment in document["message"]
    assert "usage:" in err and fragment in err  # the human text still goes to stderr


def test_without_json_a_usage_error_prints_nothing_on_stdout(capsys):
    with pytest.raises(SystemExit):
        main(["status", "--bogus"])
    assert capsys.readouterr().out == ""


def test_json_after_the_lock_separator_belongs_to_the_command(capsys):
    with pytest.raises(SystemExit):
        main(["lock", "--bogus", "--", "cmd", "--json"])
    assert capsys.readouterr().out == ""


def test_an_explicit_deployment_file_that_does_not_exist_is_named(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "nope.json"
    monkeypatch.delenv("CHAINFENCE_RPC_URL", raising=False)
    assert main(["status", "--deployment", str(missing)]) == EXIT_USAGE
    assert (
        capsys.readouterr().err.strip()
        == f"chainfence status: deployment file {str(missing)!r} (--deployment) does not exist"
    )
    # Even with a node and a registry given: the file named explicitly is a mistake to report.
    assert main(["status", "--json", "--deployment", str(missing), "--rpc-url", NOBODY, "--registry", REGISTRY]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["error"] == "UsageError" and str(missing) in document["message"]
    monkeypatch.setenv("CHAINFENCE_DEPLOYMENT", str(missing))
    assert main(["verify", "r", "--token", "1"]) == EXIT_USAGE
    assert "($CHAINFENCE_DEPLOYMENT) does not exist" in capsys.readouterr().err


def test_the_default_deployment_file_may_be_absent(tmp_path, capsys, monkeypatch):
    """Only a file named explicitly must exist: without one, the usual 'no node' advice."""
    monkeypatch.chdir(tmp_path)
    for name in ("CHAINFENCE_DEPLOYMENT", "CHAINFENCE_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["status"]) == EXIT_USAGE
    assert "no node: pass --rpc-url" in capsys.readouterr().err


def _subcommands(parser: argparse.ArgumentParser | None = None, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every subcommand, nested ones too ("audit history"), by the words that name it."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in (parser or cli._parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found[prefix + name] = command
                found.update(_subcommands(command, f"{prefix}{name} "))
    return found


def test_every_subcommand_help_ends_with_an_example_and_describes_every_argument():
    for name, command in _subcommands().items():
        text = command.format_help()
        assert "\nexample:\n  " in text, f"chainfence {name} --help has no example"
        example = text.split("\nexample:\n  ", 1)[1].splitlines()[0]
        assert f"chainfence {name}" in example, (name, example)
        for action in command._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help and action.help is not argparse.SUPPRESS, (
                    f"chainfence {name}: {action.dest} has no help"
                )


def test_every_subcommand_help_exits_zero():
    for name in _subcommands():
        done = subprocess.run(
            [sys.executable, "-m", "chainfence", *name.split(), "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and "example:" in done.stdout, name


def test_read_only_commands_do_not_parse_the_signing_key(capsys, monkeypatch):
    """A malformed key does not turn `status` into a key error: it goes on to the node (none here: exit 5)."""
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", "not-a-key")
    for argv in (["status"], ["verify", "r", "--token", "1"], ["stuck"], ["tx", "0x" + "ab" * 32]):
        assert main([*argv, "--rpc-url", NOBODY, "--registry", REGISTRY]) == EXIT_CONNECTION, argv
        assert "private_key" not in capsys.readouterr().err
    # Control: a command that signs does read it, and refuses it before sending anything.
    assert main(["acquire", "r", "--ttl", "5", "--rpc-url", NOBODY, "--registry", REGISTRY]) == EXIT_USAGE
    assert "private_key is not a valid secp256k1 private key" in capsys.readouterr().err


def test_an_unreachable_node_is_one_sentence(capsys):
    assert main(["status", "--rpc-url", NOBODY, "--registry", REGISTRY]) == EXIT_CONNECTION
    err = capsys.readouterr().err
    assert err == (
        "chainfence status: NodeUnreachable: no JSON-RPC node answers at http://127.0.0.1:1 "
        "(connection refused: nothing listens there)\n"
    )


def test_an_unreachable_node_under_json(capsys):
    assert main(["status", "--json", "--rpc-url", NOBODY, "--registry", REGISTRY]) == EXIT_CONNECTION
    document = json.loads(capsys.readouterr().out)
    assert document["error"] == "NodeUnreachable" and document["exit_code"] == EXIT_CONNECTION
    assert "HTTPConnectionPool" not in document["message"] and "Max retries" not in document["message"]


def test_transport_reasons_name_the_cause_not_the_library():
    import requests

    from chainfence._node.failures import transport_reason

    def chained(outer: BaseException, inner: BaseException) -> BaseException:
        outer.__cause__ = inner
        return outer

    refused = chained(
        requests.exceptions.ConnectionError("HTTPConnectionPool(host='x', port=1): Max retries"),
        ConnectionRefusedError(111, "Connection refused"),
    )
    assert transport_reason(refused) == "connection refused: nothing listens there"
    assert transport_reason(requests.exceptions.ReadTimeout("Read timed out. (read timeout=5)")) == "timed out"
    unknown = requests.exceptions.ConnectionError(
        "Failed to resolve 'x.invalid' ([Errno -2] Name or service not known)"
    )
    assert transport_reason(unknown) == "host name not found"
    assert transport_reason(OSError("something new")) == "OSError"
