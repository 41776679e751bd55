"""The CLI and the MCP tools show a claimed item as ``workset»item`` and reach it by that name (issue #17).

Before: the audit printed a stranger's item ``db`` of the open workset ``prod`` as ``prod/db``, and
``chainfence audit history|completions|at|timeline`` by that name answered about the administered
resource ``prod/db`` (or "nothing found"); through MCP, ``verify``/``status`` of an item answered "never
issued" while ``renew`` accepted the token. The controls name the item as the audit used to print it.
"""

from __future__ import annotations

import contextlib
import io
import json

from chainfence import Registry, cli
from chainfence.integrations.mcp import build_server
from tests.integration.test_mcp import _call, drive
from tests.support.anvil import dev_keys

CLI_KEY = 7  # the CLI signs as dev account 7 (the session's chain signs the setup)


def _cli(anvil_node, registry, *argv: str, key: int | None = CLI_KEY, monkeypatch=None) -> tuple[int, object, str]:
    if key is not None:
        monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(10)[key])
    else:
        monkeypatch.delenv("CHAINFENCE_PRIVATE_KEY", raising=False)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([*argv, "--rpc-url", anvil_node.url, "--registry", registry.address, "--json"])
    text = out.getvalue().strip()
    return code, (json.loads(text) if text else None), err.getvalue()


def test_the_cli_shows_and_reaches_an_item_by_workset_item(anvil_node, on_anvil, monkeypatch, tmp_path):
    chain = on_anvil.chain
    # Namespace "clip" assigned to dev account 1 at deployment (nobody can claim a namespace later).
    on_anvil = Registry.deploy(chain, max_ttl=3_600, namespaces={"clip": chain.accounts[1]})
    admin = on_anvil.connect(chain.accounts[1])
    held = admin.acquire("clip/db", ttl=600)

    def run(*argv, key=CLI_KEY):
        return _cli(anvil_node, on_anvil, *argv, key=key, monkeypatch=monkeypatch)

    code, claimed, err = run("claim", "clip", "db", "--ttl", "600")
    assert code == 0, err
    token = claimed["token"]
    assert (claimed["resource"], claimed["item"]) == ("clip»db", "db")

    # Control: the name the audit used to print is the administered resource, not the item.
    code, verdict, _ = run("verify", "clip/db", "--token", str(token), key=None)
    assert code == cli.EXIT_NOT_CURRENT and verdict["error"] == "UnknownToken"
    code, answer, _ = run("audit", "history", "clip/db", "--live", key=None)
    assert [lease["token"] for lease in answer["result"]] == [held.token]

    # The item's name, and --workset, everywhere a name is taken.
    for argv in (
        ["verify", "clip»db", "--token", str(token)],
        ["verify", "db", "--workset", "clip", "--token", str(token)],
    ):
        code, verdict, err = run(*argv, key=None)
        assert code == 0 and verdict["current"] is True and verdict["resource"] == "clip»db", err
    code, rows, _ = run("status", "clip»db", "clip/db", key=None)
    assert [(r["resource"], r["token"]) for r in rows] == [("clip»db", token), ("clip/db", held.token)]
    code, rows, _ = run("status", "db", "--workset", "clip", key=None)
    assert rows[0]["token"] == token
    code, renewed, err = run("renew", "clip»db", "--token", str(token), "--ttl", "600", "--progress", "7")
    assert code == 0 and renewed["resource"] == "clip»db", err
    code, done, err = run("complete", "clip»db", "--token", str(token), "--result", "rows: 3")
    assert code == 0, err

    code, answer, _ = run("audit", "history", "clip»db", "--live", key=None)
    assert [(lease["token"], lease["resource_display"]) for lease in answer["result"]] == [(token, "clip»db")]
    code, answer, _ = run("audit", "completions", "clip»db", "--live", key=None)
    assert [c["token"] for c in answer["result"]] == [token]
    code, answer, _ = run("audit", "at", "clip»db", "--block", str(chain.block_number() - 1), "--live", key=None)
    assert code == 0 and [lease["token"] for lease in answer["result"]] == [token]
    code, answer, _ = run("audit", "resources", "clip", "--live", key=None)
    assert {(r["resource_display"], r["claimed_item"]) for r in answer["result"]} == {
        ("clip/db", False),
        ("clip»db", True),
    }
    page = tmp_path / "t.html"
    code, drawn, err = run("audit", "timeline", "clip»db", "clip/db", "--out", str(page), "--live", key=None)
    assert code == 0 and drawn["leases"] == 2, err
    assert "clip»db" in page.read_text(encoding="utf-8")

    # The namespace's admin (dev account 1) revokes and grants a claim by the item's name.
    code, again, err = run("claim", "clip/jobs", "db2", "--ttl", "600")  # workset clip/jobs: namespace clip
    assert code == 0, err
    code, revoked, err = run("revoke", "clip/jobs»db2", key=1)
    assert code == 0 and (revoked["revoked_token"], revoked["item"]) == (again["token"], "db2"), err
    code, granted, err = run("grant", "db2", chain.accounts[CLI_KEY], "--workset", "clip/jobs", "--ttl", "60", key=1)
    assert code == 0 and granted["resource"] == "clip/jobs»db2", err
    code, verdict, _ = run("verify", "clip/jobs»db2", "--token", str(granted["token"]), key=None)
    assert code == 0 and verdict["holder"] == chain.accounts[CLI_KEY]

    # stuck: a crashed claimant of an item is listed by the item's name.
    code, other, err = run("claim", "clip", "cache", "--ttl", "5")
    assert code == 0, err
    chain.advance_time(6)
    code, report, _ = run("stuck", key=None)
    assert [(e["resource"], e["resource_display"]) for e in report["crashed"]] == [("clip»cache", "clip»cache")]


def test_mcp_verifies_shows_and_lists_an_item_by_its_name(alice, bob):
    async def script(a, b):
        _, claimed = await _call(a, "claim", {"workset": "mcpn", "items": ["t1"], "ttl": 300})
        lease = claimed["lease"]
        name, token = lease["resource"], lease["token"]
        assert name == "mcpn»t1"
        # Control: the old "workset/item" string names another resource, never issued this token.
        _, verdict = await _call(b, "verify", {"resource": "mcpn/t1", "token": token})
        assert (verdict["current"], verdict["reason"]) == (False, "UnknownToken")
        # By its name, or item + workset, from another agent's session: verify, status, history.
        for arguments in ({"resource": name, "token": token}, {"resource": "t1", "workset": "mcpn", "token": token}):
            _, verdict = await _call(b, "verify", arguments)
            assert verdict["current"] is True and verdict["holder"] == alice.sender and verdict["resource"] == name
        _, status = await _call(b, "status", {"resources": [name]})
        assert (status["resources"][0]["token"], status["resources"][0]["status"]) == (token, "live")
        _, status = await _call(b, "status", {"resources": ["t1"], "workset": "mcpn"})
        assert status["resources"][0]["resource"] == name and status["resources"][0]["token"] == token
        error, renewed = await _call(a, "renew", {"resource": name, "token": token, "ttl": 300})
        assert not error, renewed
        error, released = await _call(a, "release", {"resource": name, "token": token})
        assert not error and released["resource"] == name
        _, history = await _call(b, "history", {"resource": name})
        assert [e["kind"] for e in history["events"]] == ["acquired", "renewed", "released"]
        _, history = await _call(b, "history", {"resource": "t1", "workset": "mcpn"})
        assert history["resource"] == name and history["total"] == 3

    drive(script, build_server(alice), build_server(bob))
