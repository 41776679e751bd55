"""Read-only commands against a real node leave the signing key alone (issue 10)."""

from __future__ import annotations

import json

import pytest

from chainfence.cli import EXIT_OK, EXIT_USAGE, main

pytestmark = pytest.mark.anvil


def test_status_and_verify_work_with_a_malformed_key_in_the_environment(on_anvil, anvil_node, monkeypatch, capsys):
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire("newcomer/report", ttl=60)
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", "0xnot-a-key")
    where = ["--rpc-url", anvil_node.url, "--registry", on_anvil.address, "--json"]
    assert main(["status", "newcomer/report", *where]) == EXIT_OK
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["status"], row["token"]) == ("live", lease.token)
    assert main(["verify", "newcomer/report", "--token", str(lease.token), *where]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["current"] is True
    assert main(["status", *where]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["registry"] == on_anvil.address
    # Control: the key is read, and refused, by a command that signs.
    assert main(["release", "newcomer/report", "--token", str(lease.token), *where]) == EXIT_USAGE
    assert json.loads(capsys.readouterr().out)["error"] == "InvalidInput"
