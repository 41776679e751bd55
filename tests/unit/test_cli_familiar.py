"""Familiar to people who use etcdctl and consul (issue 19, item 4), without a chain: `lock NAME CMD...`
without `--`, `-w json`/`-o json`, one variable (or a list) for the node, the subcommand's own usage on
a usage error, and what a newcomer tripped on (the name bound in --help, node's description, dates in
errors, whitespace in names). The node-backed halves are in tests/integration/test_cli_familiar.py."""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from chainfence import cli
from chainfence._core import limits as _limits
from chainfence._core.times import chain_time
from chainfence.cli import EXIT_CONNECTION, EXIT_USAGE, _common, main, split_lock, start
from chainfence.errors import InvalidResourceName, LeaseExpired, LeaseHeld, LockDelayed
from chainfence.testing.anvil import dev_keys

ROOT = Path(__file__).resolve().parents[2]
NOBODY = "http://127.0.0.1:1"  # nothing listens on port 1 of loopback
NOBODY_EITHER = "http://127.0.0.1:2"
REGISTRY = "0x" + "00" * 19 + "01"
ADDRESS = "0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF"


def _commands(parser: argparse.ArgumentParser | None = None, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in (parser or cli._parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found[prefix + name] = command
                found.update(_commands(command, f"{prefix}{name} "))
    return found


def _leaves() -> dict[str, argparse.ArgumentParser]:
    commands = _commands()
    return {name: p for name, p in commands.items() if not any(o.startswith(name + " ") for o in commands)}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


# ---------------------------------------------------------------------------
# An unknown option prints the subcommand's usage, not the top level's
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(_leaves()))
def test_an_unknown_option_prints_the_usage_of_the_subcommand_given_it(name, capsys):
    with pytest.raises(SystemExit) as exited:
        main([*name.split(), "--bogus"])
    assert exited.value.code == (EXIT_USAGE if name != "lock" else cli.lock_exit_code(EXIT_USAGE))  # lock's own
    err = capsys.readouterr().err
    assert err.startswith(f"usage: chainfence {name} "), err
    assert f"\nchainfence {name}: error: " in err, err


@pytest.mark.parametrize(
    "argv, command",
    [
        (["status", "fam/x", "--bogus"], "status"),
        (["verify", "fam/x", "extra", "--token", "1"], "verify"),
        (["audit", "history", "fam/x", "--bogus"], "audit history"),
        (["namespace", "policy", "show", "prod", "--bogus"], "namespace policy show"),
        (["-v", "lock", "fam/x", "--bogus", "true"], "lock"),
    ],
)
def test_what_a_subcommand_does_not_know_is_its_error(argv, command, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert err.startswith(f"usage: chainfence {command} ")
    assert err.rstrip().endswith("unrecognized arguments: " + ("extra" if "extra" in argv else "--bogus"))


def test_control_stock_argparse_reports_a_subcommands_unknown_option_with_the_top_level_usage():
    """What chainfence did before: argparse's subcommand hands what it does not know back to the top level."""
    parser = argparse.ArgumentParser(prog="chainfence")
    parser.add_subparsers(dest="command").add_parser("status")
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit):
        parser.parse_args(["status", "--bogus"])
    assert err.getvalue().startswith("usage: chainfence [-h] {status}")


def test_a_top_level_unknown_option_is_still_the_top_levels(capsys):
    with pytest.raises(SystemExit):
        main(["--bogus", "status"])
    assert capsys.readouterr().err.startswith("usage: chainfence [-h] [--version]")


# ---------------------------------------------------------------------------
# -w json / -o json beside --json
# ---------------------------------------------------------------------------


def test_every_command_with_json_takes_write_out_and_output_too():
    with_json = {name: parser for name, parser in _leaves().items() if "--json" in _options(parser)}
    assert {"node", "status", "acquire", "lock", "audit history", "namespace policy set"} <= set(with_json)
    for name, parser in with_json.items():
        assert {"-w", "--write-out", "-o", "--output"} <= _options(parser), name
    for name, parser in _leaves().items():
        if name not in with_json:
            assert not {"-w", "-o", "--write-out", "--output"} & _options(parser), name


@pytest.mark.parametrize(
    "spelling",
    [["--json"], ["-w", "json"], ["-wjson"], ["--write-out", "json"], ["--write-out=json"], ["-o", "json"], ["-ojson"]],
    ids=" ".join,
)
def test_each_spelling_of_json_prints_one_json_document(spelling, capsys):
    assert main(["status", "fam/x", *spelling, "--rpc-url", NOBODY, "--registry", REGISTRY]) == EXIT_CONNECTION
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == "NodeUnreachable" and "NodeUnreachable" in err


def test_text_is_the_default_and_o_text_says_so(capsys):
    for spelling in ([], ["-o", "text"], ["--write-out=text"]):
        assert main(["status", *spelling, "--rpc-url", NOBODY, "--registry", REGISTRY]) == EXIT_CONNECTION
        assert capsys.readouterr().out == "", spelling


@pytest.mark.parametrize("spelling", [["-w", "json"], ["-ojson"], ["--output=json"]], ids=" ".join)
def test_a_usage_error_is_a_json_document_under_each_spelling(spelling, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["acquire", *spelling])
    assert exited.value.code == EXIT_USAGE
    document = json.loads(capsys.readouterr().out)
    assert document["error"] == "UsageError" and "required" in document["message"]


def test_json_and_o_text_disagree_and_an_unknown_format_is_refused(capsys):
    assert main(["status", "--json", "-o", "text", "--rpc-url", NOBODY]) == EXIT_USAGE
    assert "--json and --output text disagree" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["status", "-o", "yaml"])
    assert exited.value.code == EXIT_USAGE
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


def test_json_spelled_after_locks_command_belongs_to_the_command(capsys):
    """`-o json` after CMD is CMD's: chainfence's usage error is text."""
    with pytest.raises(SystemExit):
        main(["lock", "--bogus", "fam/x", "cmd", "-o", "json"])
    assert capsys.readouterr().out == ""


# ---------------------------------------------------------------------------
# lock NAME CMD... without --
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lock_parser():
    return cli._parser().subcommand("lock")


@pytest.mark.parametrize(
    "argv, ours, command",
    [
        # etcdctl's form: lock NAME cmd args
        (["lock", "n", "echo", "hi"], ["lock", "n"], ["echo", "hi"]),
        # the command's own arguments start with '-': they are the command's
        (["lock", "n", "grep", "-v", "x"], ["lock", "n"], ["grep", "-v", "x"]),
        (["lock", "n", "sh", "-c", "exit 3"], ["lock", "n"], ["sh", "-c", "exit 3"]),
        # options after NAME (with their values) are chainfence's, up to the command
        (["lock", "n", "--ttl", "30", "cmd", "--ttl", "5"], ["lock", "n", "--ttl", "30"], ["cmd", "--ttl", "5"]),
        (["lock", "--ttl", "30", "n", "cmd"], ["lock", "--ttl", "30", "n"], ["cmd"]),
        (["lock", "n", "--ttl=30", "--take-over", "cmd"], ["lock", "n", "--ttl=30", "--take-over"], ["cmd"]),
        (["lock", "n", "--tt", "30", "cmd"], ["lock", "n", "--tt", "30"], ["cmd"]),  # an abbreviation, as argparse
        (["lock", "n", "-w", "json", "cmd"], ["lock", "n", "-w", "json"], ["cmd"]),
        (["lock", "n", "-wjson", "-vv", "cmd", "-v"], ["lock", "n", "-wjson", "-vv"], ["cmd", "-v"]),
        (["-v", "lock", "n", "cmd"], ["-v", "lock", "n"], ["cmd"]),
        # `--` still works, and is the way to a command starting with '-'
        (["lock", "n", "--ttl", "30", "--", "cmd", "-x"], ["lock", "n", "--ttl", "30"], ["cmd", "-x"]),
        (["lock", "n", "--", "-weird"], ["lock", "n"], ["-weird"]),
        # a `--` after the command began is the command's
        (["lock", "n", "cmd", "--", "--json"], ["lock", "n"], ["cmd", "--", "--json"]),
        # no command: nothing to split off (lock then says so, exit 2)
        (["lock", "n", "--ttl", "30"], ["lock", "n", "--ttl", "30"], []),
        # an option that wants a value it lacks: argparse says so
        (["lock", "n", "--ttl"], ["lock", "n", "--ttl"], []),
    ],
)
def test_split_lock_follows_the_documented_rule(lock_parser, argv, ours, command):
    assert split_lock(argv, lock_parser) == (ours, command)


def test_control_argparse_remainder_takes_locks_own_options_as_the_command():
    """The naive way (a REMAINDER positional) gives `--ttl 30` to the command, and chainfence its default."""
    parser = argparse.ArgumentParser(prog="lock")
    parser.add_argument("resource")
    parser.add_argument("--ttl", type=int, default=30)
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    naive = parser.parse_args(["n", "--ttl", "60", "cmd"])
    assert naive.cmd == ["--ttl", "60", "cmd"] and naive.ttl == 30


def test_the_split_arguments_reach_the_handler(monkeypatch):
    seen = {}

    def handler(args, parser):
        seen.update(resource=args.resource, ttl=args.ttl, cmd=args.cmd, json=args.json)
        return 0

    monkeypatch.setattr(cli.lock, "_lock", handler)  # main() builds the parser, binding the handler, each run
    assert main(["lock", "jobs/a", "--ttl", "60", "-o", "json", "grep", "-v", "x", "--json"]) == 0
    assert seen == {"resource": "jobs/a", "ttl": 60, "cmd": ["grep", "-v", "x", "--json"], "json": True}


def test_lock_without_a_command_is_a_usage_error(capsys):
    assert main(["lock", "fam/x", "--ttl", "30", "--rpc-url", NOBODY]) == cli.lock_exit_code(EXIT_USAGE)
    assert "no command to run: chainfence lock NAME [--ttl S] [--] CMD" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# One variable for the node; a list where a command can use several
# ---------------------------------------------------------------------------

#: The smallest valid arguments of every command that talks to a node (`demo` runs on the embedded chain;
#: `node` starts one: tests below). A new command must be added here.
ARGUMENTS = {
    "deploy": [],
    "mcp": [],
    "acquire": ["fam/x", "--ttl", "30"],
    "renew": ["fam/x", "--token", "1", "--ttl", "30"],
    "release": ["fam/x", "--token", "1"],
    "claim": ["fam/ws", "a", "--ttl", "30"],
    "complete": ["fam/x", "--token", "1"],
    "status": ["fam/x"],
    "verify": ["fam/x", "--token", "1"],
    "stuck": [],
    "tx": ["0x" + "ab" * 32],
    "lock": ["fam/x", "true"],
    "audit sync": [],
    "audit verify": [],
    "audit history": ["fam/x"],
    "audit token": ["1"],
    "audit holder": [ADDRESS],
    "audit at": ["fam/x", "--block", "1"],
    "audit current": [],
    "audit takeovers": [],
    "audit completions": [],
    "audit resources": [],
    "audit timeline": ["fam/x", "--out", "timeline.html"],
    "namespace mine": [],
    "namespace transfer": ["prod", ADDRESS],
    "namespace accept": ["prod"],
    "namespace policy show": ["prod"],
    "namespace policy set": ["prod", "--lock-delay", "1"],
    "namespace admit": ["prod", ADDRESS],
    "revoke": ["prod/db"],
    "grant": ["prod/db", ADDRESS, "--ttl", "30"],
    "acquire-many": ["fam/a", "fam/b", "--ttl", "30"],
    "relay": ["--port", "0"],
}
#: The commands that send no transaction: several endpoints are theirs to fail over between.
READ_ONLY = {
    "status",
    "verify",
    "stuck",
    "tx",
    "namespace mine",
    "namespace policy show",
    *(name for name in ARGUMENTS if name.startswith("audit ")),
}


def test_the_table_names_every_command_that_talks_to_a_node():
    talking = {name for name, parser in _leaves().items() if "--rpc-url" in _options(parser)}
    assert talking == set(ARGUMENTS)
    assert set(_leaves()) - talking == {"demo", "node"}
    for name in talking:
        assert "--endpoints" in _options(_leaves()[name]), name


def _run(name: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m chainfence NAME ARGS...` as a user runs it (`lock` forks: never in the test's process)."""
    clean = {k: v for k, v in __import__("os").environ.items() if not k.startswith("CHAINFENCE_")}
    return subprocess.run(
        [sys.executable, "-m", "chainfence", *name.split(), "--json", *ARGUMENTS[name]],
        env={**clean, "PYTHONPATH": str(ROOT / "src"), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _in_process(name: str, monkeypatch, env: dict[str, str], capsys) -> tuple[int, dict]:
    for variable in ("CHAINFENCE_RPC_URL", "CHAINFENCE_REGISTRY", "CHAINFENCE_DEPLOYMENT", "CHAINFENCE_PRIVATE_KEY"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    code = main([*name.split(), "--json", *ARGUMENTS[name]])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_every_command_reads_the_node_from_chainfence_rpc_url(name, tmp_path, monkeypatch, capsys):
    """Set to a node that does not answer, the variable is the one every command went to (exit 5); a list
    is tried in full by a command that sends nothing, and refused (exit 2) by every other, before a key is
    read or anything is sent."""
    monkeypatch.chdir(tmp_path)  # no .chainfence/deployment.json here
    env = {"CHAINFENCE_REGISTRY": REGISTRY, "CHAINFENCE_PRIVATE_KEY": dev_keys(2)[1]}
    listed = f"{NOBODY},{NOBODY_EITHER}"
    if name == "lock":
        one, many = (_run(name, {**env, "CHAINFENCE_RPC_URL": url}, tmp_path) for url in (NOBODY, listed))
        results = [(one.returncode, json.loads(one.stdout)), (many.returncode, json.loads(many.stdout))]
    else:
        results = [
            _in_process(name, monkeypatch, {**env, "CHAINFENCE_RPC_URL": url}, capsys) for url in (NOBODY, listed)
        ]
    (code, document), (listed_code, listed_document) = results
    own = cli.lock_exit_code if name == "lock" else int  # lock's own ends exit apart from its command's codes
    assert (code, document["error"]) == (own(EXIT_CONNECTION), "NodeUnreachable"), document
    assert "127.0.0.1:1" in document["message"]
    if name in READ_ONLY:
        assert (listed_code, listed_document["error"]) == (EXIT_CONNECTION, "NodeUnreachable")
        assert "none of the 2 endpoints of $CHAINFENCE_RPC_URL answers" in listed_document["message"]
        assert "127.0.0.1:2" in listed_document["message"], "the second endpoint was tried"
    else:
        assert (listed_code, listed_document["error"]) == (own(EXIT_USAGE), "InvalidInput"), listed_document
        assert "$CHAINFENCE_RPC_URL names 2 endpoints, but this command talks to one node" in listed_document["message"]


def test_control_without_the_variable_there_is_no_node(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, document = _in_process("status", monkeypatch, {"CHAINFENCE_REGISTRY": REGISTRY}, capsys)
    assert code == EXIT_USAGE and "no node: pass --rpc-url" in document["message"]


def test_endpoints_flag_and_rpc_url_flag(capsys, monkeypatch):
    monkeypatch.setenv("CHAINFENCE_RPC_URL", "http://127.0.0.1:3")  # flags come first
    assert main(["status", "--endpoints", f"{NOBODY}, {NOBODY_EITHER}", "--registry", REGISTRY, "--json"]) == 5
    message = json.loads(capsys.readouterr().out)["message"]
    assert "none of the 2 endpoints of --endpoints" in message and "127.0.0.1:3" not in message
    assert main(["acquire", "fam/x", "--ttl", "3", "--endpoints", f"{NOBODY},{NOBODY_EITHER}", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "InvalidInput"
    with pytest.raises(SystemExit):  # one or the other
        main(["status", "--rpc-url", NOBODY, "--endpoints", NOBODY])
    assert "not allowed with argument --rpc-url" in capsys.readouterr().err
    # A list given to --rpc-url is no URL (as before): --endpoints is the list's flag
    assert main(["status", "--rpc-url", f"{NOBODY},{NOBODY_EITHER}", "--registry", REGISTRY]) == EXIT_USAGE
    assert "InvalidInput" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, endpoints",
    [
        ("http://a:1", ["http://a:1"]),
        ("http://a:1,http://b:2", ["http://a:1", "http://b:2"]),
        ("http://a:1, HTTPS://b/rpc", ["http://a:1", "HTTPS://b/rpc"]),
        ("http://a:1\n", ["http://a:1\n"]),  # whitespace is kept, for the URL check to refuse
        ("https://rpc.example/v3/key?chains=1,2", ["https://rpc.example/v3/key?chains=1,2"]),  # a URL's own comma
        ("http://a:1,b:2", ["http://a:1,b:2"]),  # not a list: one malformed URL (InvalidInput names its host)
        # IPC socket paths (ending in .ipc) are endpoints too, anywhere in a list
        ("/tmp/a.ipc,/tmp/b.ipc", ["/tmp/a.ipc", "/tmp/b.ipc"]),
        ("http://a:1,/tmp/b.ipc", ["http://a:1", "/tmp/b.ipc"]),
        ("/tmp/a.ipc, http://b:2", ["/tmp/a.ipc", "http://b:2"]),
        ("anvil.ipc,other.ipc", ["anvil.ipc", "other.ipc"]),
        ("anvil.ipc, ./node/b.ipc", ["anvil.ipc", "./node/b.ipc"]),
        ("/tmp/a,b.ipc", ["/tmp/a,b.ipc"]),  # a socket's own comma
        ("http://a:1/x,b.ipc", ["http://a:1/x,b.ipc"]),  # a URL's own comma
    ],
)
def test_split_endpoints(text, endpoints):
    assert _common.split_endpoints(text) == endpoints


def test_the_help_says_a_node_is_a_url_or_an_ipc_socket_path_and_a_list_may_hold_either():
    """--rpc-url, --endpoints and the environment's help name both ways to reach a node."""
    status = " ".join(cli._parser("status").subcommand("status").format_help().split())
    assert "an http(s) JSON-RPC URL, or the path of its IPC socket (ending in .ipc)" in status
    assert "(http(s) URLs or IPC socket paths), comma-separated" in status
    top = " ".join(cli._parser().format_help().split())
    assert "an http(s) URL, or on the node's machine the path of its IPC socket, ending in .ipc" in top
    mcp = " ".join(cli._parser("mcp").subcommand("mcp").format_help().split())
    assert "the path of its IPC socket (ending in .ipc)" in mcp


def test_a_list_with_a_malformed_endpoint_names_which_one_and_not_its_secrets(capsys, monkeypatch):
    monkeypatch.setenv("CHAINFENCE_RPC_URL", f"{NOBODY},http://127.0.0.1:abc/secret-key")
    assert main(["status", "--registry", REGISTRY]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "$CHAINFENCE_RPC_URL (endpoint 2 of 2)" in err and "secret-key" not in err


@pytest.mark.parametrize(
    "variable, port, expected",
    [
        (None, None, 8545),
        (None, 9000, 9000),
        ("http://127.0.0.1:9545", None, 9545),
        ("http://localhost:9545/", None, 9545),
        ("http://127.0.0.1:9545", 9545, 9545),
    ],
)
def test_node_listens_where_chainfence_rpc_url_points(variable, port, expected, monkeypatch, capsys):
    monkeypatch.delenv("CHAINFENCE_RPC_URL", raising=False)
    if variable:
        monkeypatch.setenv("CHAINFENCE_RPC_URL", variable)
    assert start._node_port(argparse.Namespace(port=port)) == expected
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "variable, problem",
    [
        ("http://10.0.0.7:8545/secret", "names a node that is not this machine's plain http"),
        ("https://127.0.0.1:8545", "names a node that is not this machine's plain http"),
        ("http://127.0.0.1", "names no port"),
        ("http://127.0.0.1:8545/rpc?key=secret", "has a path or a query"),
        ("http://127.0.0.1:8545,http://127.0.0.1:8546", "names 2 endpoints; a node is one"),
    ],
)
def test_node_refuses_a_variable_naming_a_node_it_cannot_be(variable, problem, monkeypatch, capsys):
    monkeypatch.setenv("CHAINFENCE_RPC_URL", variable)
    with pytest.raises(_common.UsageError, match=re.escape(problem)) as refused:
        start._node_port(argparse.Namespace(port=None))
    assert "secret" not in str(refused.value) and "Pass --port" in str(refused.value)
    # --port overrides it, with a warning: the commands using the variable will not reach this node
    assert start._node_port(argparse.Namespace(port=9001)) == 9001
    warning = capsys.readouterr().err
    assert problem in warning and "http://127.0.0.1:9001" in warning and "secret" not in warning


def test_node_port_with_another_port_in_the_variable_warns(monkeypatch, capsys):
    monkeypatch.setenv("CHAINFENCE_RPC_URL", "http://127.0.0.1:9545")
    assert start._node_port(argparse.Namespace(port=9001)) == 9001
    assert "names port 9545" in capsys.readouterr().err


def test_node_refusal_is_exit_2_from_the_command_line(monkeypatch, capsys):
    monkeypatch.setenv("CHAINFENCE_RPC_URL", "https://rpc.example")
    assert main(["node", "--json"]) == EXIT_USAGE
    assert json.loads(capsys.readouterr().out)["error"] == "UsageError"


# ---------------------------------------------------------------------------
# What a newcomer tripped on
# ---------------------------------------------------------------------------


def test_acquire_help_states_the_name_bound_from_the_contracts_constant():
    text = _leaves()["acquire"].format_help()
    assert f"1 to {_limits.MAX_NAME_LENGTH} bytes of UTF-8" in " ".join(text.split())
    assert "256" not in text
    contract = (ROOT / "contracts" / "FencingRegistry.sol").read_text(encoding="utf-8")
    (bound,) = re.findall(r"uint256 private constant _MAX_NAME_LENGTH = (\d+);", contract)
    assert int(bound) == _limits.MAX_NAME_LENGTH == 128


def test_the_name_bound_is_written_once_in_the_package():
    """Each module that checks names takes the bound from chainfence._core.limits; none writes 128 itself."""
    for path in sorted((ROOT / "src" / "chainfence").rglob("*.py")):
        if path.name == "limits.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value == 128:
                names = [ast.unparse(target) for target in node.targets]
                assert not any("NAME" in name for name in names), f"{path.name}: {names} = 128"


def test_every_command_help_opens_with_a_description_and_node_says_what_it_does():
    for name, parser in _commands().items():
        assert parser.description, f"chainfence {name} --help has no description"
    node = " ".join(_leaves()["node"].format_help().split())
    assert "Run anvil on 127.0.0.1 with the registry deployed" in node
    assert "$CHAINFENCE_RPC_URL" in node and "CHAINFENCE_PRIVATE_KEY" in node


@pytest.mark.parametrize(
    "error, number",
    [
        (LeaseHeld(holder=ADDRESS, token=3, expires_at=1_795_541_331, resource="fam/x"), 1_795_541_331),
        (LockDelayed(holder=ADDRESS, until=1_795_541_331, resource="fam/x"), 1_795_541_331),
        (LeaseExpired(token=3, expired_at=1_795_541_331, resource="fam/x"), 1_795_541_331),
    ],
    ids=lambda value: type(value).__name__,
)
def test_errors_say_chain_times_as_dates_as_status_does(error, number):
    assert "2026-11-24 17:28:51 UTC" in str(error) and str(number) not in str(error)
    assert _common.when(number) == chain_time(number) == "2026-11-24 17:28:51 UTC"
    assert error.details().get("expires_at", error.details().get("until", error.details().get("expired_at"))) == number


def test_chain_time_past_the_calendar_is_the_number():
    assert chain_time(10**20) == f"chain time {10**20}"
    assert _common.when(10**20, now=10**20 - 5) == f"chain time {10**20} (in 5 s)"


def test_one_formatter_turns_chain_times_into_dates():
    """chainfence._core.times.chain_time is the formatter; the timeline's axis labels (a format per tick step)
    are the one other place that formats a time."""
    allowed = {ROOT / "src/chainfence/_core/times.py", ROOT / "src/chainfence/audit/timeline.py"}
    for path in sorted((ROOT / "src" / "chainfence").rglob("*.py")):
        if path not in allowed:
            text = path.read_text(encoding="utf-8")
            assert "strftime" not in text and "fromtimestamp" not in text, path


@pytest.mark.parametrize(
    "name, said",
    [
        ("jobs/a ", "'jobs/a ' ends with whitespace, U+0020 (a space)"),
        (" jobs/a", "' jobs/a' starts with whitespace, U+0020 (a space)"),
        ("jobs/a\t", "ends with whitespace, U+0009 (a tab)"),
        ("jobs/a\n", "ends with whitespace, U+000A (a newline)"),
        ("jobs/a\u00a0", "ends with whitespace, U+00A0 (NO-BREAK SPACE)"),
    ],
)
def test_a_name_with_whitespace_at_an_end_says_so_before_anything_is_asked(name, said, capsys):
    """acquire checks the name before it connects: no node is needed to hear what is wrong (exit 2)."""
    from chainfence._sdk import names as _names

    with pytest.raises(InvalidResourceName, match=re.escape(said)):
        _names.publishable(name)
    for argv in (["acquire", name, "--ttl", "30"], ["acquire-many", "fam/ok", name, "--ttl", "30"]):
        assert main([*argv, "--rpc-url", NOBODY, "--registry", REGISTRY, "--json"]) == EXIT_USAGE
        document = json.loads(capsys.readouterr().out)
        assert document["error"] == "InvalidResourceName" and said in document["message"]
        assert "may not start or end with whitespace; strip it" in document["message"]


def test_lock_checks_the_name_before_connecting(tmp_path):
    """As acquire does (lock forks its sentinel first: run as a process)."""
    done = subprocess.run(
        [sys.executable, "-m", "chainfence", "lock", "--json", "jobs/a ", "--rpc-url", NOBODY, "true"],
        env={**__import__("os").environ, "CHAINFENCE_PRIVATE_KEY": dev_keys(2)[1], "PYTHONPATH": str(ROOT / "src")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == cli.lock_exit_code(EXIT_USAGE), done.stderr
    assert "'jobs/a ' ends with whitespace" in json.loads(done.stdout)["message"]
