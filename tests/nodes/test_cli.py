"""The CLI's per-task commands on hardhat's node and ganache, in process, as on anvil
(tests/integration/test_cli_node.py): a lease's lifecycle with each exit code (a refusal is exit 3 on
ganache too, whose revert data the node layer reads from ``error.data.result``), a claim, and
``verify --proven`` through a 2-of-3 quorum of header providers (each node's headers hash to their
hashes, and its proofs verify)."""

from __future__ import annotations

import json

import pytest

from chainfence import cli
from tests.nodes.conftest import NODES, on_nodes
from tests.support.anvil import dev_keys
from tests.support.lying_proxy import LyingProxy

pytestmark = on_nodes(*NODES)

RESOURCE = "reports/daily"


@pytest.fixture
def node_url(request, node_registry) -> str:
    return request.getfixturevalue(f"{request.node.callspec.params['node_registry']}_node").url


@pytest.fixture
def chainfence(monkeypatch, tmp_path, capsys, node_registry, node_url):
    """``chainfence ARGS --rpc-url NODE --registry R --json`` in process, as dev account ``key``:
    (exit code, the --json document)."""
    for name in ("CHAINFENCE_RPC_URL", "CHAINFENCE_REGISTRY", "CHAINFENCE_DEPLOYMENT", "CHAINFENCE_PRIVATE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*args: str, key: int | None = None, rpc_url: str = node_url):
        if key is None:
            monkeypatch.delenv("CHAINFENCE_PRIVATE_KEY", raising=False)
        else:
            monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(10)[key])
        capsys.readouterr()
        code = cli.main([*args, "--rpc-url", rpc_url, "--registry", node_registry.address, "--json"])
        out = capsys.readouterr().out.strip()
        return code, (json.loads(out) if out else None)

    yield run
    node_registry.chain._sender.forget_nonces()  # the commands sent from keys the session's chain also holds


def test_a_lease_lifecycle_with_its_exit_codes(chainfence):
    code, lease = chainfence("acquire", RESOURCE, "--ttl", "600", key=1)
    assert code == cli.EXIT_OK and lease["resource"] == RESOURCE and lease["reason"] == "unheld"
    token = str(lease["token"])
    code, held = chainfence("acquire", RESOURCE, "--ttl", "60", key=2)
    assert (code, held["error"]) == (cli.EXIT_HELD, "LeaseHeld")
    code, status = chainfence("status", RESOURCE)
    assert code == cli.EXIT_OK and [(s["status"], s["token"]) for s in status] == [("live", lease["token"])]
    assert chainfence("verify", RESOURCE, "--token", token)[0] == cli.EXIT_OK
    code, renewed = chainfence("renew", RESOURCE, "--token", token, "--ttl", "3000", key=1)
    assert code == cli.EXIT_OK and renewed["expires_at"] > lease["expires_at"]
    code, stranger = chainfence("renew", RESOURCE, "--token", token, "--ttl", "60", key=2)
    assert (code, stranger["error"]) == (cli.EXIT_NOT_CURRENT, "NotHolder")
    assert chainfence("release", RESOURCE, "--token", token, key=1)[0] == cli.EXIT_OK
    code, verdict = chainfence("verify", RESOURCE, "--token", token)
    assert (code, verdict["reason"]) == (cli.EXIT_NOT_CURRENT, "LeaseReleased")
    code, again = chainfence("release", RESOURCE, "--token", token, key=1)
    assert (code, again["error"]) == (cli.EXIT_NOT_CURRENT, "LeaseReleased")


@pytest.mark.nodes("hardhat")  # a claim names its item with MCOPY, which ganache's EVM lacks (docs/nodes.md)
def test_a_claim_and_its_completion(chainfence):
    code, claimed = chainfence("claim", "jobs", "j1", "j2", "--ttl", "600", key=1)
    assert code == cli.EXIT_OK and claimed["item"] == "j1"
    code, second = chainfence("claim", "jobs", "j1", "j2", "--ttl", "600", key=2)
    assert code == cli.EXIT_OK and second["item"] == "j2"
    assert chainfence("claim", "jobs", "j1", "j2", "--ttl", "600", key=3)[0] == cli.EXIT_NOTHING_TO_CLAIM


def test_verify_proven_through_a_quorum_of_header_providers(chainfence, node_url, node_registry):
    code, first = chainfence("acquire", RESOURCE, "--ttl", "30", key=1)
    assert code == cli.EXIT_OK
    node_registry.chain.advance_time(31)  # the first lease runs out (the node's clock is logical)
    code, successor = chainfence("acquire", RESOURCE, "--ttl", "600", key=2)
    assert code == cli.EXIT_OK and successor["token"] > first["token"]
    with LyingProxy(node_url) as p1, LyingProxy(node_url) as p2, LyingProxy(node_url) as p3:
        proven = ["--proven", "--headers", f"{p1.url},{p2.url}", "--headers", p3.url, "--quorum", "2"]
        proven += ["--clock-rpc", node_url]  # the verifier's clock: the node's (a logical clock here)
        code, current = chainfence("verify", RESOURCE, "--token", str(successor["token"]), *proven)
        assert code == cli.EXIT_OK and current["current"] and current["proven"]["vouched_by"], current
        code, stale = chainfence("verify", RESOURCE, "--token", str(first["token"]), *proven)
        assert (code, stale["reason"]) == (cli.EXIT_NOT_CURRENT, "StaleToken"), stale
