"""The operator commands end to end, as an operator runs them: a stranger squats, an admin revokes and
grants, a lock-delay holds, a set is acquired at once; exit codes 9 and 10; --json."""

from __future__ import annotations

import json

import pytest

from chainfence import cli
from chainfence.localnode import dev_keys, free_port
from tests.integration.test_cli_node import Node, run


@pytest.fixture(scope="module")
def ops_node(tmp_path_factory):
    node = Node(tmp_path_factory.mktemp("ops-node"), free_port())
    node.start()
    yield node
    node.stop()


def address(key: int) -> str:
    from eth_account import Account

    return Account.from_key(dev_keys(10)[key]).address


def test_claim_policy_admit_revoke_grant_and_a_squatter_refused(ops_node):
    w = ops_node.workdir
    claimed = run(w, "namespace", "claim", "team", "--json", key=1)
    assert claimed.returncode == 0, claimed.stderr
    assert json.loads(claimed.stdout)["admin"] == address(1)
    squat = run(w, "namespace", "claim", "team", "--json", key=3)
    assert squat.returncode == cli.EXIT_REFUSED and json.loads(squat.stdout)["error"] == "NamespaceTaken"
    assert run(w, "namespace", "policy", "set", "team", "--max-ttl", "600", "--lock-delay", "30", "--admission",
               key=1).returncode == 0  # fmt: skip
    shown = json.loads(run(w, "namespace", "policy", "show", "team", "--json", key=None).stdout)
    assert (shown["max_ttl"], shown["lock_delay"], shown["admission_required"]) == (600, 30, True)
    refused = run(w, "acquire", "team/db", "--ttl", "60", "--json", key=2)
    assert refused.returncode == cli.EXIT_REFUSED and json.loads(refused.stdout)["error"] == "NotAdmitted"
    assert run(w, "namespace", "admit", "team", address(2), key=1).returncode == 0
    held = json.loads(run(w, "acquire", "team/db", "--ttl", "60", "--json", key=2).stdout)
    outsider = run(w, "revoke", "team/db", key=3)
    assert outsider.returncode == cli.EXIT_REFUSED and "not the admin" in outsider.stderr
    revoked = json.loads(run(w, "revoke", "team/db", "--json", key=1).stdout)
    assert revoked == {"resource": "team/db", "revoked_token": held["token"], "admin": address(1)}
    late = run(w, "renew", "team/db", "--token", str(held["token"]), "--ttl", "60", key=2)
    assert late.returncode == cli.EXIT_NOT_CURRENT and "revoked" in late.stderr
    granted = json.loads(run(w, "grant", "team/db", address(2), "--ttl", "60", "--json", key=1).stdout)
    assert granted["reason"] == "granted" and granted["token"] > held["token"] and granted["admin"] == address(1)


def test_hand_over_in_two_steps(ops_node):
    w = ops_node.workdir
    assert run(w, "namespace", "claim", "handover", key=1).returncode == 0
    assert run(w, "namespace", "transfer", "handover", address(2), key=1).returncode == 0
    wrong = run(w, "namespace", "accept", "handover", key=3)
    assert wrong.returncode == cli.EXIT_REFUSED and "pending admin" in wrong.stderr
    assert run(w, "namespace", "accept", "handover", key=2).returncode == 0
    shown = json.loads(run(w, "namespace", "policy", "show", "handover", "--json", key=None).stdout)
    assert shown["admin"] == address(2) and shown["pending_admin"] is None


def test_acquire_many_and_the_lock_delay_exit_code(ops_node):
    w = ops_node.workdir
    leases = json.loads(run(w, "acquire-many", "set/a", "set/b", "--ttl", "3600", "--json", key=1).stdout)["leases"]
    assert [lease["token"] for lease in leases][1] == leases[0]["token"] + 1
    held = run(w, "acquire-many", "set/c", "set/a", "--ttl", "60", key=2)
    assert held.returncode == cli.EXIT_HELD and "'set/a'" in held.stderr
    assert cli.exit_code(__import__("chainfence.errors").errors.LockDelayed(holder=address(1), until=5)) == 10
