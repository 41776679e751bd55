"""Familiar to people who use etcdctl and consul (issue 19, item 4), against a real node: `lock NAME CMD...`
without `--`, failover over an endpoint list for the commands that send nothing, `chainfence node` on the
port CHAINFENCE_RPC_URL names, and refusals that say dates and namespaces as people read them. The
parsing halves, without a chain: tests/unit/test_cli_familiar.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chainfence import cli
from chainfence._core.times import chain_time
from chainfence._sdk.names import namespace_id
from chainfence.cli import EXIT_HELD, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, main
from chainfence.lease import LeaseStatus
from chainfence.testing.anvil import dev_keys, free_port

pytestmark = pytest.mark.anvil

ROOT = Path(__file__).resolve().parents[2]
NOBODY = "http://127.0.0.1:1"  # nothing listens on port 1 of loopback


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    return {**env, "PYTHONPATH": str(ROOT / "src"), **extra}


def _where(anvil_node, registry) -> list[str]:
    return ["--rpc-url", anvil_node.url, "--registry", registry.address]


# ---------------------------------------------------------------------------
# lock NAME CMD... without --
# ---------------------------------------------------------------------------

CHILD = "import json, os, sys; print(json.dumps([os.environ['CHAINFENCE_TOKEN'], sys.argv[1:]])); sys.exit(int(sys.argv[1]))"


def test_lock_runs_a_command_given_without_dashes_whose_arguments_start_with_dashes(on_anvil, anvil_node, tmp_path):
    """`lock NAME --ttl 30 python -c CODE 5 -- --json`: --ttl is lock's, the rest is CMD's (the `--` and the
    `--json` after it too: chainfence prints no JSON of its own), CMD's exit code comes back, the lease is
    released."""
    done = subprocess.run(
        [sys.executable, "-m", "chainfence", "lock", "fam/nodash", *_where(anvil_node, on_anvil), "--ttl", "30"]
        + [sys.executable, "-c", CHILD, "5", "--", "--json"],
        env=_env(CHAINFENCE_PRIVATE_KEY=dev_keys(2)[1]),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 5, done.stderr
    token, argv = json.loads(done.stdout)
    assert argv == ["5", "--", "--json"], "everything after the command's first word is the command's"
    last = on_anvil.last_lease("fam/nodash")
    assert last.token == int(token) and last.status is LeaseStatus.RELEASED


# ---------------------------------------------------------------------------
# Several endpoints: failover for the commands that send nothing, refused elsewhere
# ---------------------------------------------------------------------------


def test_a_command_that_sends_nothing_fails_over_to_the_next_endpoint(
    on_anvil, anvil_node, monkeypatch, capsys, tmp_path
):
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire("fam/failover", ttl=600)
    listed = f"{NOBODY},{anvil_node.url}"
    registry = ["--registry", on_anvil.address, "--json"]
    # Control: the first endpoint alone answers nothing.
    assert main(["status", "fam/failover", "--rpc-url", NOBODY, *registry]) == cli.EXIT_CONNECTION
    capsys.readouterr()
    assert main(["status", "fam/failover", "--endpoints", listed, *registry]) == EXIT_OK
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["status"], row["token"]) == ("live", lease.token)
    monkeypatch.setenv("CHAINFENCE_RPC_URL", listed)
    assert main(["verify", "fam/failover", "--token", str(lease.token), *registry]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["current"] is True
    index = str(tmp_path / "audit.sqlite")
    assert main(["audit", "history", "fam/failover", "--index", index, *registry]) == EXIT_OK
    history = json.loads(capsys.readouterr().out)["result"]
    assert [entry["token"] for entry in history] == [lease.token]


def test_a_command_that_sends_a_transaction_refuses_a_list_and_sends_nothing(on_anvil, anvil_node, monkeypatch, capsys):
    before = on_anvil.latest_token()
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(3)[2])
    listed = f"{anvil_node.url},{anvil_node.url}"
    for argv in (["acquire", "fam/listed", "--ttl", "60"], ["acquire-many", "fam/l1", "fam/l2", "--ttl", "60"]):
        assert main([*argv, "--endpoints", listed, "--registry", on_anvil.address, "--json"]) == EXIT_USAGE
        assert json.loads(capsys.readouterr().out)["error"] == "InvalidInput"
    assert on_anvil.latest_token() == before
    # Control: the same command with one of them acquires.
    assert main(["acquire", "fam/listed", "--ttl", "60", *_where(anvil_node, on_anvil), "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["token"] == before + 1


# ---------------------------------------------------------------------------
# `chainfence node` where CHAINFENCE_RPC_URL points; every command follows the same variable
# ---------------------------------------------------------------------------


def test_node_listens_on_the_port_the_variable_names_and_the_commands_follow_it(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    (tmp_path / "node").mkdir()
    (tmp_path / "elsewhere").mkdir()
    node = subprocess.Popen(
        [sys.executable, "-m", "chainfence", "node", "-o", "json"],  # no --port
        cwd=tmp_path / "node",
        env=_env(CHAINFENCE_RPC_URL=url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(node.stdout.readline()))
        reader.start()
        reader.join(60)
        assert line and line[0], node.stderr.read() if node.poll() is not None else "no announcement"
        info = json.loads(line[0])
        assert info["rpc_url"] == url
        # Elsewhere (no deployment file): the same variable, and the registry it printed.
        env = _env(CHAINFENCE_RPC_URL=url, CHAINFENCE_REGISTRY=info["registry"])
        status = subprocess.run(
            [sys.executable, "-m", "chainfence", "status", "-w", "json"],
            cwd=tmp_path / "elsewhere",
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert status.returncode == EXIT_OK, status.stderr
        assert json.loads(status.stdout)["registry"] == info["registry"]
    finally:
        os.killpg(node.pid, signal.SIGINT)
        node.wait(timeout=30)
        node.stdout.close()
        node.stderr.close()


# ---------------------------------------------------------------------------
# Refusals as people read them
# ---------------------------------------------------------------------------


def test_a_held_lease_says_until_when_as_status_does(on_anvil, anvil_node, monkeypatch, capsys):
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire("fam/held", ttl=600)
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(3)[2])
    assert main(["acquire", "fam/held", "--ttl", "60", *_where(anvil_node, on_anvil)]) == EXIT_HELD
    err = capsys.readouterr().err
    date = chain_time(lease.expires_at)
    assert f"with token {lease.token} until {date}" in err and str(lease.expires_at) not in err
    assert main(["status", "fam/held", *_where(anvil_node, on_anvil)]) == EXIT_OK
    assert date in capsys.readouterr().out, "the same date as status's expires column"


def test_acquire_many_names_the_refusing_namespace_by_its_prefix(on_anvil, anvil_node, monkeypatch, capsys):
    ops = on_anvil.connect(on_anvil.chain.accounts[3])
    prefix = ops.namespace().prefix
    ops.namespace(prefix).set_policy(admission_required=True)
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(3)[2])
    argv = ["acquire-many", "fam/free", f"{prefix}/db", "--ttl", "60", *_where(anvil_node, on_anvil)]
    assert main(argv) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert f"is not admitted in namespace {prefix!r} ('{prefix}/db')" in err
    assert namespace_id(prefix).hex() not in err
