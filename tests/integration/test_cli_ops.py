"""The operator commands end to end, as an operator runs them: an address governs its own namespace, a
stranger is refused, the admin revokes and grants (leases and work items), a policy change keeps the
fields not given, a lock-delay holds, a set is acquired at once; exit codes 9 and 10; --json."""

from __future__ import annotations

import json

import pytest

from chainfence import cli
from chainfence.testing.anvil import dev_keys, free_port
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


def test_mine_policy_admit_revoke_grant_and_a_stranger_refused(ops_node):
    """Key 1 governs its own address namespace (no claim); key 3 is a stranger there; the policy set
    changes only the fields given."""
    w = ops_node.workdir
    mine = json.loads(run(w, "namespace", "mine", "--json", key=1).stdout)
    team = mine["namespace"]
    assert team == "0x" + address(1)[2:].lower() and mine["admin"] == address(1)
    other = json.loads(run(w, "namespace", "mine", "--address", address(2), "--json", key=None).stdout)
    assert other["namespace"] == "0x" + address(2)[2:].lower(), "another's, without a key"
    assert (
        run(
            w, "namespace", "policy", "set", team, "--max-ttl", "600", "--lock-delay", "30", "--admission", key=1
        ).returncode
        == 0
    )
    only = json.loads(run(w, "namespace", "policy", "set", team, "--lock-delay", "45", "--json", key=1).stdout)
    assert (only["max_ttl"], only["lock_delay"], only["admission_required"]) == (600, 45, True), "the rest kept"
    shown = json.loads(run(w, "namespace", "policy", "show", team, "--json", key=None).stdout)
    assert (shown["max_ttl"], shown["lock_delay"], shown["admission_required"]) == (600, 45, True)
    empty = run(w, "namespace", "policy", "set", team, key=1)
    assert empty.returncode == 2 and "at least one" in empty.stderr
    squat = run(w, "namespace", "policy", "set", team, "--no-admission", "--json", key=3)
    assert squat.returncode == cli.EXIT_REFUSED and json.loads(squat.stdout)["error"] == "NotNamespaceAdmin"
    gone = run(w, "namespace", "claim", "reports", key=3)
    assert gone.returncode == 2, "there is no first-come claim"
    refused = run(w, "acquire", f"{team}/db", "--ttl", "60", "--json", key=2)
    assert refused.returncode == cli.EXIT_REFUSED and json.loads(refused.stdout)["error"] == "NotAdmitted"
    assert run(w, "namespace", "admit", team, address(2), key=1).returncode == 0
    held = json.loads(run(w, "acquire", f"{team}/db", "--ttl", "60", "--json", key=2).stdout)
    outsider = run(w, "revoke", f"{team}/db", key=3)
    assert outsider.returncode == cli.EXIT_REFUSED and "not the admin" in outsider.stderr
    revoked = json.loads(run(w, "revoke", f"{team}/db", "--json", key=1).stdout)
    assert revoked == {"resource": f"{team}/db", "revoked_token": held["token"], "admin": address(1)}
    late = run(w, "renew", f"{team}/db", "--token", str(held["token"]), "--ttl", "60", key=2)
    assert late.returncode == cli.EXIT_NOT_CURRENT and "revoked" in late.stderr
    granted = json.loads(run(w, "grant", f"{team}/db", address(2), "--ttl", "60", "--json", key=1).stdout)
    assert granted["reason"] == "granted" and granted["token"] > held["token"] and granted["admin"] == address(1)


def test_revoke_and_grant_a_claimed_work_item(ops_node):
    w = ops_node.workdir
    team = json.loads(run(w, "namespace", "mine", "--json", key=4).stdout)["namespace"]
    workset = f"{team}/jobs"
    claimed = json.loads(run(w, "claim", workset, "j1", "j2", "--ttl", "600", "--json", key=2).stdout)
    plain = run(w, "revoke", f"{workset}/{claimed['item']}", key=4)
    assert plain.returncode != 0, "the item's display name is a plain resource nobody holds"
    revoked = json.loads(run(w, "revoke", claimed["item"], "--workset", workset, "--json", key=4).stdout)
    assert revoked["revoked_token"] == claimed["token"] and revoked["item"] == claimed["item"]
    granted = json.loads(
        run(w, "grant", claimed["item"], address(3), "--ttl", "60", "--workset", workset, "--json", key=4).stdout
    )
    assert (granted["workset"], granted["item"], granted["holder"]) == (workset, claimed["item"], address(3))
    done = run(w, "complete", claimed["item"], "--workset", workset, "--token", str(granted["token"]), key=3)
    assert done.returncode == 0, done.stderr


def test_hand_over_in_two_steps(ops_node):
    w = ops_node.workdir
    handover = json.loads(run(w, "namespace", "mine", "--json", key=5).stdout)["namespace"]
    assert run(w, "namespace", "transfer", handover, address(2), key=5).returncode == 0
    wrong = run(w, "namespace", "accept", handover, key=3)
    assert wrong.returncode == cli.EXIT_REFUSED and "pending admin" in wrong.stderr
    assert run(w, "namespace", "accept", handover, key=2).returncode == 0
    shown = json.loads(run(w, "namespace", "policy", "show", handover, "--json", key=None).stdout)
    assert shown["admin"] == address(2) and shown["pending_admin"] is None
    old = run(w, "namespace", "policy", "set", handover, "--lock-delay", "5", key=5)
    assert old.returncode == cli.EXIT_REFUSED, "the address handed its namespace over: no power left"


def test_acquire_many_and_the_lock_delay_exit_code(ops_node):
    w = ops_node.workdir
    leases = json.loads(run(w, "acquire-many", "set/a", "set/b", "--ttl", "3600", "--json", key=1).stdout)["leases"]
    assert [lease["token"] for lease in leases][1] == leases[0]["token"] + 1
    held = run(w, "acquire-many", "set/c", "set/a", "--ttl", "60", key=2)
    assert held.returncode == cli.EXIT_HELD and "'set/a'" in held.stderr
    assert cli.exit_code(__import__("chainfence.errors").errors.LockDelayed(holder=address(1), until=5)) == 10
