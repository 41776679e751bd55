"""`chainfence mcp`: the MCP tools driven by the SDK's own client, in memory and over stdio. No LLM.

In memory, each agent is a server of its own (one account each) that the SDK's ``Client`` connects to
in-process; on both backends. Over stdio, ``python -m chainfence mcp`` runs as an MCP client launches it
(the key in its environment, the node and registry from the deployment file in its working directory),
against the session's anvil.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from chainfence import Registry, Timeouts, cli
from chainfence.deployment import Deployment, save
from chainfence.integrations.mcp import MAX_WAIT, build_server
from chainfence.testing.anvil import free_port, port_is_free
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import wait_until

TOOLS = {"acquire", "renew", "release", "complete", "claim", "verify", "status", "history", "leader"}

#: A safety net for one tool call (the suite runs on a loaded 2-core machine), never what a test measures.
CALL_TIMEOUT = 120


async def _call(client: Client, tool: str, arguments: dict):
    """One tool call; returns (is_error, the structured answer), after checking the text says the same."""
    result = await client.call_tool(tool, arguments, read_timeout_seconds=CALL_TIMEOUT)
    assert result.structured_content is not None, result
    assert json.loads(result.content[0].text) == result.structured_content, "the model reads the same JSON as text"
    assert "Error executing tool" not in result.content[0].text
    return bool(result.is_error), result.structured_content


def drive(script, *servers):
    """Run ``script(*clients)`` with an in-memory SDK client connected to each server."""

    async def main():
        clients = [Client(server) for server in servers]
        for client in clients:
            await client.__aenter__()
        try:
            await script(*clients)
        finally:
            for client in reversed(clients):
                await client.__aexit__(None, None, None)

    anyio.run(main)


# ---------------------------------------------------------------------------
# In memory, on both backends
# ---------------------------------------------------------------------------


def test_every_tool_is_listed_with_a_schema_bounds_and_a_description_for_a_model(alice):
    async def script(client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert len(tool.description) > 80, tool.name
            assert tool.input_schema["type"] == "object" and tool.output_schema, tool.name
            for name, prop in tool.input_schema["properties"].items():
                assert prop.get("description"), (tool.name, name)
        acquire = tools["acquire"]
        assert "pass this token with every write" in acquire.description
        props = acquire.input_schema["properties"]
        assert props["ttl"]["minimum"] == 1 and props["resource"]["maxLength"] == 128
        assert props["wait"]["maximum"] == MAX_WAIT and props["wait"]["minimum"] == 0
        assert set(acquire.input_schema["required"]) == {"resource", "ttl"}
        assert {"token", "holder", "expires_at", "expires_in"} <= set(acquire.output_schema["properties"])
        assert tools["verify"].annotations.read_only_hint and not tools["acquire"].annotations.read_only_hint

    drive(script, build_server(alice))


def test_a_second_agent_gets_lease_held_as_a_tool_error_with_holder_token_and_expiry(alice, bob):
    async def script(a, b):
        error, lease = await _call(a, "acquire", {"resource": "mcp/report", "ttl": 600})
        assert not error and lease["holder"] == alice.sender and lease["token"] >= 1
        error, held = await _call(b, "acquire", {"resource": "mcp/report", "ttl": 600})
        assert error
        assert held["error"] == "LeaseHeld"
        assert (held["holder"], held["token"], held["expires_at"]) == (
            alice.sender,
            lease["token"],
            lease["expires_at"],
        )
        assert held["resource"] == "mcp/report" and "held by" in held["message"]

    drive(script, build_server(alice), build_server(bob))


def test_a_lease_is_renewed_verified_released_and_shows_in_history_by_its_token(alice, bob):
    async def script(a, b):
        _, lease = await _call(a, "acquire", {"resource": "mcp/job", "ttl": 60})
        token = lease["token"]
        error, renewed = await _call(
            a, "renew", {"resource": "mcp/job", "token": token, "ttl": 120, "progress": "row 17"}
        )
        assert not error and renewed["token"] == token and renewed["expires_at"] > lease["expires_at"]
        _, verdict = await _call(b, "verify", {"resource": "mcp/job", "token": token})
        assert verdict["current"] is True and verdict["holder"] == alice.sender
        error, refused = await _call(b, "release", {"resource": "mcp/job", "token": token})
        assert error and refused["error"] == "NotHolder", "another agent cannot release it"
        assert "ended" not in refused, "alice's lease is live: nothing ended (not 'superseded')"
        _, status = await _call(a, "status", {"resources": ["mcp/job"]})
        assert status["account"] == alice.sender and status["resources"][0]["held_by_you"] is True
        error, released = await _call(a, "release", {"resource": "mcp/job", "token": token})
        assert not error and released["released"] is True
        _, verdict = await _call(b, "verify", {"resource": "mcp/job", "token": token})
        assert verdict == {**verdict, "current": False, "reason": "LeaseReleased"}
        error, late = await _call(a, "renew", {"resource": "mcp/job", "token": token, "ttl": 60})
        assert error and late["error"] == "LeaseReleased"
        _, history = await _call(b, "history", {"resource": "mcp/job"})
        assert [(e["kind"], e["token"]) for e in history["events"]] == [
            ("acquired", token),
            ("renewed", token),
            ("released", token),
        ]
        assert history["events"][0]["reason"] == "unheld" and history["events"][1]["progress"].startswith("0x")
        _, last = await _call(b, "history", {"resource": "mcp/job", "limit": 1})
        assert last["total"] == 3 and [e["kind"] for e in last["events"]] == ["released"]

    drive(script, build_server(alice), build_server(bob))


def test_history_pages_back_with_before_and_refuses_a_bad_or_stale_position(chain, alice, bob):
    """history answers the latest `limit` events and `earlier`, the position to pass as `before` for the
    ones before them; events logged meanwhile do not move a position. A malformed one is InvalidInput, one
    the chain no longer has (rolled back) StaleCursor; nothing is sent either way."""
    lease = alice.acquire("mcp/paged", ttl=600)
    for marker in (1, 2, 3):
        lease.renew(progress=marker)

    async def script(b):
        _, latest = await _call(b, "history", {"resource": "mcp/paged", "limit": 2})
        assert [e["kind"] for e in latest["events"]] == ["renewed", "renewed"] and latest["earlier"]
        alice.renew("mcp/paged", lease.token, ttl=600, progress=4)  # logged meanwhile: the position holds
        _, older = await _call(b, "history", {"resource": "mcp/paged", "limit": 2, "before": latest["earlier"]})
        assert [(e["kind"], e["progress"] is not None) for e in older["events"]] == [
            ("acquired", False),
            ("renewed", True),
        ]
        assert older["earlier"] is None and older["total"] == 5
        seen = [e["block_number"] for e in older["events"] + latest["events"]]
        assert seen == sorted(set(seen)), "each event once, in order"
        for bad in ("7", "1:0x12:0", "x" * 300, 12):
            error, refused = await _call(b, "history", {"resource": "mcp/paged", "before": bad})
            assert error and refused["error"] == "InvalidInput", (bad, refused)
        gone = f"{chain.block_number() + 1000}:0x{'ab' * 32}:0"
        error, refused = await _call(b, "history", {"resource": "mcp/paged", "before": gone})
        assert error and refused["error"] == "StaleCursor", refused

    before = chain.block_number()
    drive(script, build_server(bob))
    assert chain.block_number() == before + 1, "only alice's renewal was sent"


def test_agents_claim_items_renew_and_complete_them_until_nothing_is_left(alice, bob):
    items = ["t1", "t2"]

    async def script(a, b, a_later):
        _, first = await _call(a, "claim", {"workset": "mcp/tables", "items": items, "ttl": 300})
        _, second = await _call(b, "claim", {"workset": "mcp/tables", "items": items, "ttl": 300})
        assert (first["item"], second["item"]) == ("t1", "t2")
        lease = first["lease"]
        assert lease["resource"] == "mcp/tables»t1" and lease["workset"] == "mcp/tables"
        # The resource string the answer carried is the item's name, in any session.
        error, renewed = await _call(a, "renew", {"resource": lease["resource"], "token": lease["token"], "ttl": 300})
        assert not error, renewed
        # Another session of the same agent names the item and its workset.
        error, renewed = await _call(
            a_later,
            "renew",
            {"resource": "t1", "workset": "mcp/tables", "token": lease["token"], "ttl": 300, "progress": 2},
        )
        assert not error, renewed
        error, done = await _call(
            a, "complete", {"resource": lease["resource"], "token": lease["token"], "result": "42"}
        )
        assert not error and done["result_digest"].startswith("0x") and len(done["result_digest"]) == 66
        error, done = await _call(
            b, "complete", {"resource": "t2", "workset": "mcp/tables", "token": second["lease"]["token"]}
        )
        assert not error, done
        _, nothing = await _call(a, "claim", {"workset": "mcp/tables", "items": items, "ttl": 300})
        assert nothing == {"claimed": False, "workset": "mcp/tables", "item": None, "lease": None}

    drive(script, build_server(alice), build_server(bob), build_server(alice))


def test_the_server_keeps_no_lease_alive_an_agent_that_stops_renewing_loses_it(alice, bob):
    async def script(a, b):
        _, lease = await _call(a, "acquire", {"resource": "mcp/quiet", "ttl": 60})
        alice.chain.advance_time(61)  # the agent made no call for longer than its ttl
        _, verdict = await _call(a, "verify", {"resource": "mcp/quiet", "token": lease["token"]})
        assert verdict["current"] is False and verdict["reason"] == "LeaseExpired"
        error, taken = await _call(b, "acquire", {"resource": "mcp/quiet", "ttl": 60})
        assert not error and taken["reason"] == "expired" and taken["previous_token"] == lease["token"]
        _, history = await _call(b, "history", {"resource": "mcp/quiet"})
        assert [e["kind"] for e in history["events"]] == ["acquired", "acquired"], "no renewal was sent for it"

    drive(script, build_server(alice), build_server(bob))


def test_leader_names_the_holder_of_the_election_and_its_term_token(alice, bob):
    async def script(a, b):
        _, empty = await _call(b, "leader", {"election": "mcp/leader"})
        assert empty["leader"] is None
        _, term = await _call(a, "acquire", {"resource": "mcp/leader", "ttl": 60})
        _, seen = await _call(b, "leader", {"election": "mcp/leader"})
        assert seen["leader"]["holder"] == alice.sender and seen["leader"]["token"] == term["token"]
        assert seen["held_by_you"] is False

    drive(script, build_server(alice), build_server(bob))


def test_bad_input_is_a_typed_tool_error_and_sends_nothing(alice):
    chain = alice.chain
    cases = [
        ("acquire", {"resource": "", "ttl": 60}, "InvalidResourceName"),
        ("acquire", {"resource": "x" * 129, "ttl": 60}, "InvalidResourceName"),
        ("acquire", {"resource": "mcp/\u202eevil", "ttl": 60}, "InvalidResourceName"),  # a bidi override
        ("acquire", {"resource": "mcp/bad", "ttl": 0}, "InvalidTtl"),
        ("acquire", {"resource": "mcp/bad", "ttl": "60"}, "InvalidTtl"),
        ("acquire", {"resource": "mcp/bad", "ttl": 3_601}, "InvalidTtl"),  # above this registry's max_ttl
        ("acquire", {"resource": "mcp/bad", "ttl": 60, "wait": MAX_WAIT + 1}, "InvalidInput:wait"),
        ("acquire", {"resource": "mcp/bad", "ttl": 60, "wait": True}, "InvalidInput:wait"),
        ("acquire", {"resource": "mcp/bad"}, "InvalidTtl"),
        ("renew", {"resource": "mcp/bad", "token": 0, "ttl": 60}, "InvalidInput:token"),
        ("renew", {"resource": "mcp/bad", "token": 1.5, "ttl": 60}, "InvalidInput:token"),
        ("renew", {"resource": "mcp/bad", "token": 1, "ttl": 60, "progress": True}, "InvalidInput:progress"),
        ("renew", {"resource": "mcp/bad", "token": 1, "ttl": 60, "progress": "0x"}, "InvalidInput:progress"),
        ("renew", {"resource": "mcp/bad", "token": 1, "ttl": 60, "progress": "0xzz"}, "InvalidInput:progress"),
        ("claim", {"workset": "mcp/bad", "items": [], "ttl": 60}, "InvalidClaimItems"),
        ("claim", {"workset": "mcp/bad", "items": ["a", "a"], "ttl": 60}, "InvalidClaimItems"),
        ("status", {"resources": ["ok", ""]}, "InvalidResourceName"),
        ("history", {"resource": "mcp/bad", "limit": 0}, "InvalidInput:limit"),
    ]

    async def script(a):
        for tool, arguments, expected in cases:
            error, answer = await _call(a, tool, arguments)
            name, _, argument = expected.partition(":")  # InvalidInput names the argument to blame
            assert error and answer["error"] == name, (tool, arguments, answer)
            assert answer.get("argument") == (argument or answer.get("argument")), (tool, arguments, answer)
            assert answer["message"]

    before = (chain.block_number(), alice.latest_token())
    drive(script, build_server(alice))
    assert (chain.block_number(), alice.latest_token()) == before, "nothing was sent"


def test_a_server_without_a_key_reads_and_refuses_writes_naming_the_missing_key(alice):
    read_only = Registry(alice.chain, alice.address, sender=None)
    alice.acquire("mcp/seen", ttl=60)

    async def script(r):
        _, status = await _call(r, "status", {"resources": ["mcp/seen"]})
        assert status["account"] is None and status["resources"][0]["holder"] == alice.sender
        error, refused = await _call(r, "acquire", {"resource": "mcp/seen", "ttl": 60})
        assert error and refused["error"] == "UnknownAccount" and "CHAINFENCE_PRIVATE_KEY" in refused["message"]

    block = alice.chain.block_number()
    drive(script, build_server(read_only))
    assert alice.chain.block_number() == block


def test_a_stopped_node_is_node_unreachable_as_a_tool_error(anvil_node, anvil_session):
    from chainfence import Chain

    _, registry = anvil_session
    with RpcProxy(anvil_node.url) as proxy:
        chain = Chain.connect(proxy.url, private_key=dev_keys(10)[6], timeouts=Timeouts(receipt=30))
        agent = Registry.at(chain, registry.address)
        server = build_server(agent)
        proxy.down = True

        async def script(client):
            for tool, arguments in [
                ("status", {"resources": ["mcp/down"]}),
                ("acquire", {"resource": "mcp/down", "ttl": 60}),
            ]:
                error, answer = await _call(client, tool, arguments)
                assert error and answer["error"] == "NodeUnreachable", answer

        drive(script, server)
        assert proxy.sent("eth_sendRawTransaction") == [], "the acquisition's preflight could not run: nothing sent"


# ---------------------------------------------------------------------------
# Over stdio: `python -m chainfence mcp`, as an MCP client launches it
# ---------------------------------------------------------------------------


def _stdio(workdir: Path, key: int) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "chainfence", "mcp"],
        cwd=workdir,
        env={"CHAINFENCE_PRIVATE_KEY": dev_keys(10)[key]},
    )


def test_over_stdio_two_agents_acquire_collide_renew_release_and_claim(on_anvil, anvil_node, tmp_path):
    save(Deployment.of(on_anvil, rpc_url=anvil_node.url), tmp_path / ".chainfence" / "deployment.json")
    agent_a, agent_b = on_anvil.chain.accounts[7], on_anvil.chain.accounts[8]

    async def main():
        async with Client(_stdio(tmp_path, 7)) as a, Client(_stdio(tmp_path, 8)) as b:
            tools = (await a.list_tools()).tools
            assert {tool.name for tool in tools} == TOOLS and all(tool.input_schema["properties"] for tool in tools)
            error, lease = await _call(a, "acquire", {"resource": "stdio/report", "ttl": 600})
            assert not error and lease["holder"] == agent_a, lease
            error, held = await _call(b, "acquire", {"resource": "stdio/report", "ttl": 600})
            assert error and held["error"] == "LeaseHeld"
            assert (held["holder"], held["token"], held["expires_at"]) == (agent_a, lease["token"], lease["expires_at"])
            token = lease["token"]
            error, renewed = await _call(
                a, "renew", {"resource": "stdio/report", "token": token, "ttl": 600, "progress": 1}
            )
            assert not error and renewed["token"] == token
            _, verdict = await _call(b, "verify", {"resource": "stdio/report", "token": token})
            assert verdict["current"] is True
            error, _ = await _call(a, "release", {"resource": "stdio/report", "token": token})
            assert not error
            _, history = await _call(b, "history", {"resource": "stdio/report"})
            assert [e["kind"] for e in history["events"]] == ["acquired", "renewed", "released"]
            _, claimed = await _call(b, "claim", {"workset": "stdio/batch", "items": ["x", "y"], "ttl": 600})
            assert claimed["item"] == "x" and claimed["lease"]["holder"] == agent_b
            error, bad = await _call(b, "acquire", {"resource": "stdio/report", "ttl": 0})
            assert error and bad["error"] == "InvalidTtl"

    anyio.run(main)
    # What the agents did is on the chain the test reads too.
    assert on_anvil.last_lease("stdio/report").status.name == "RELEASED"
    assert on_anvil.workset("stdio/batch").last_lease("x").holder == agent_b


def test_the_readme_mcp_servers_entry_starts_a_working_server(on_anvil, anvil_node, tmp_path):
    """The MCP guide's `mcpServers` entry (docs/howto/mcp.md), with this test's node, registry and key filled in,
    as a client runs it."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "mcp.md").read_text(encoding="utf-8")
    entry = next(
        json.loads(block) for block in re.findall(r"```json\n(.*?)```", readme, flags=re.S) if "mcpServers" in block
    )["mcpServers"]["chainfence"]
    # The README names the venv's console script by its full path (desktop hosts do not search a venv's PATH).
    assert entry["command"].endswith("/.venv/bin/chainfence") and entry["args"] == ["mcp"]
    assert set(entry["env"]) == {"CHAINFENCE_RPC_URL", "CHAINFENCE_REGISTRY", "CHAINFENCE_PRIVATE_KEY"}
    env = {
        "CHAINFENCE_RPC_URL": anvil_node.url,
        "CHAINFENCE_REGISTRY": on_anvil.address,
        "CHAINFENCE_PRIVATE_KEY": dev_keys(10)[7],
    }
    command = str(Path(sys.executable).parent / Path(entry["command"]).name)  # this venv's console script

    async def main():
        params = StdioServerParameters(command=command, args=entry["args"], env=env, cwd=tmp_path)
        async with Client(params, mode="legacy") as client:  # the initialize handshake today's clients use
            _, status = await _call(client, "status", {})
            assert (status["registry"], status["account"]) == (on_anvil.address, on_anvil.chain.accounts[7])
            on_anvil.connect(on_anvil.chain.accounts[1]).acquire("readme/held", ttl=60)
            error, held = await _call(client, "acquire", {"resource": "readme/held", "ttl": 60})
            assert error and held["error"] == "LeaseHeld" and held["holder"] == on_anvil.chain.accounts[1]

    anyio.run(main)


def test_over_streamable_http_on_loopback(on_anvil, anvil_node, tmp_path):
    """`chainfence mcp --http` serves the same tools at http://127.0.0.1:PORT/mcp, and nowhere else."""
    save(Deployment.of(on_anvil, rpc_url=anvil_node.url), tmp_path / ".chainfence" / "deployment.json")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["CHAINFENCE_PRIVATE_KEY"] = dev_keys(10)[9]
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "chainfence", "mcp", "--http", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        wait_until(lambda: not port_is_free(port) or server.poll() is not None, "the server listens", timeout=120)
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        listening = subprocess.run(["ss", "-Htln", f"sport = :{port}"], capture_output=True, text=True).stdout
        assert listening.split() and all(line.split()[3].startswith("127.0.0.1:") for line in listening.splitlines()), (
            listening
        )

        async def main():
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
                _, lease = await _call(client, "acquire", {"resource": "http/report", "ttl": 600})
                assert lease["holder"] == on_anvil.chain.accounts[9]

        anyio.run(main)
        # A web page that rebinds its own name to 127.0.0.1 sends its own Host: refused before any tool runs.
        rebound = httpx.post(
            f"http://127.0.0.1:{port}/mcp",
            headers={"Host": "attacker.example", "Content-Type": "application/json"},
            content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            timeout=60,
        )
        assert rebound.status_code in (400, 403, 421), rebound.text
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def test_control_a_bare_mcpserver_tool_hides_a_chainfence_error_behind_error_executing_tool(alice, bob):
    """Why the tools report errors themselves: the SDK's own handling gives the model no details."""
    from mcp.server.mcpserver import MCPServer

    bare = MCPServer("bare")
    alice.acquire("mcp/bare", ttl=60)

    @bare.tool()
    def acquire(resource: str, ttl: int) -> int:
        return bob.acquire(resource, ttl).token

    async def script(client):
        result = await client.call_tool("acquire", {"resource": "mcp/bare", "ttl": 60})
        assert result.is_error and result.content[0].text == "Error executing tool acquire"
        assert alice.sender not in result.content[0].text, "the holder never reaches the model"

    drive(script, bare)


# ---------------------------------------------------------------------------
# The CLI
# ---------------------------------------------------------------------------


def _imports_after(argv: list[str]) -> set[str]:
    probe = (
        "import sys\nfrom chainfence import cli\ntry:\n    cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('MODULES', *sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'chainfence.mcp'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split()[1:])


def test_help_does_not_import_the_mcp_sdk():
    assert _imports_after(["--help"]) == set()
    assert _imports_after(["mcp", "--help"]) == set()


def test_without_the_mcp_extra_the_command_says_how_to_install_it(monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, name, None)  # import -> ModuleNotFoundError, as when not installed
    monkeypatch.delitem(sys.modules, "chainfence.integrations.mcp", raising=False)
    code = cli.main(["mcp", "--rpc-url", "http://127.0.0.1:1"])
    assert code == cli.EXIT_USAGE
    assert "pip install '.[mcp]' in a chainfence checkout" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["mcp", "--port", "0"], ["mcp", "--http", "--port", "x"]])
def test_bad_mcp_options_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == cli.EXIT_USAGE
