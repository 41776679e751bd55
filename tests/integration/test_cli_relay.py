"""`chainfence relay` and an agent's commands through it, as processes on `chainfence node`'s anvil (issue 28):
an agent whose key holds no gas acquires, renews, releases and runs a command under `lock`, each through the
relayer (`--relayer` or `CHAINFENCE_RELAYER`). Control: the same key without the relayer cannot pay."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from eth_account import Account
from eth_utils import keccak

from chainfence.testing.anvil import dev_keys
from tests.integration.test_cli_node import as_json, run, shared_node  # noqa: F401 - shared_node is a fixture

AGENT = Account.from_key(keccak(b"chainfence cli relayed agent"))


def test_an_agent_without_gas_works_through_chainfence_relay(shared_node, tmp_path):  # noqa: F811
    workdir = shared_node.workdir
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["CHAINFENCE_PRIVATE_KEY"] = dev_keys(10)[5]
    journal = tmp_path / "relay.jsonl"
    relay = subprocess.Popen(
        [sys.executable, "-m", "chainfence", "relay", "--port", "0", "--json", "--journal", str(journal)],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = relay.stdout.readline() if relay.stdout else ""
        assert line, relay.stderr.read() if relay.stderr else "the relay printed nothing"
        url = json.loads(line)["url"]
        agent = {"CHAINFENCE_PRIVATE_KEY": "0x" + AGENT.key.hex()}

        poor = run(workdir, "acquire", "cli/relayed", "--ttl", "60", key=None, extra_env=agent)
        assert poor.returncode != 0 and "InsufficientFunds" in poor.stderr, "control: the key cannot pay itself"

        held = run(
            workdir, "acquire", "cli/relayed", "--ttl", "60", "--json", "--relayer", url, key=None, extra_env=agent
        )
        assert held.returncode == 0, held.stderr
        lease = as_json(held)
        assert lease["holder"] == AGENT.address
        token = str(lease["token"])
        via_env = {**agent, "CHAINFENCE_RELAYER": url}
        renewed = run(workdir, "renew", "cli/relayed", "--token", token, "--ttl", "120", key=None, extra_env=via_env)
        assert renewed.returncode == 0, renewed.stderr
        released = run(workdir, "release", "cli/relayed", "--token", token, key=None, extra_env=via_env)
        assert released.returncode == 0, released.stderr
        status = as_json(run(workdir, "status", "cli/relayed", "--json", key=None))
        assert "released" in json.dumps(status).lower(), status

        locked = run(workdir, "lock", "cli/relayed-lock", "--ttl", "20", "--", "true", key=None, extra_env=via_env)
        assert locked.returncode == 0, locked.stderr
        history = run(workdir, "audit", "history", "cli/relayed-lock", "--json", key=None)
        assert AGENT.address.lower() in history.stdout.lower(), history.stdout + history.stderr
        assert journal.read_text().count('"taken"') >= 4, "each intent was journaled before it was answered"
    finally:
        relay.send_signal(signal.SIGINT)
        _out, err = relay.communicate(timeout=60)
    assert relay.returncode == 0, err
