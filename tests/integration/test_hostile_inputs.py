"""Malformed URLs and inputs through all three faces: a typed error and exit 2 at the CLI, a tool error
through MCP, a ``ToozError`` through tooz; never a traceback, never a dead server, nothing sent.

Issue #17: ``--rpc-url http://127.0.0.1:abc`` (or a comma list, or ``http://[::1``) printed a traceback
from the CLI and killed ``chainfence mcp``: the only check was ``url.startswith("http://")``, and the
URL then reached ``urllib`` and web3, whose ``ValueError`` nobody typed. Now one check,
``chainfence._sdk.validate.rpc_url`` (:class:`~chainfence.errors.InvalidInput`), runs in ``Chain.connect``,
``AsyncChain.connect``, the CLI and the tooz driver. The controls run the old check and the transport
on the same URLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json

import anyio
import pytest
import tooz.coordination
from mcp import Client

from chainfence import Chain, audit, cli
from chainfence._node import lean_http as _lean_http
from chainfence._node import transports as _transports
from chainfence._node.rlp import keccak256 as keccak
from chainfence.aio import AsyncChain
from chainfence.errors import InvalidInput
from chainfence.integrations.mcp import build_server
from chainfence.integrations.tooz import ToozInvalidInput
from chainfence.namespaces import address_namespace
from tests.support.anvil import dev_keys

#: URLs that are not one well-formed http(s) endpoint.
HOSTILE_URLS = [
    "http://127.0.0.1:abc",  # a port that is not a number
    "http://127.0.0.1:8545,http://127.0.0.1:8546",  # a comma list
    "http://a,b:8545",
    "http://[::1",  # an unclosed IPv6 bracket
    "http://[::1]:99999",  # a port out of range
    "http://[not-an-ip]:8545",
    "http://127.0.0.1:0",
    "http://127.0.0.1:",
    "http://",
    "http:// 127.0.0.1:8545",
    "http://127.0.0.1:8545\n",
    "http://127.0.0.1:8545/\x1b[2J",
    "http://h\u00e9st:8545",
    "ftp://127.0.0.1:8545",
    "127.0.0.1:8545",
    "http://" + "a" * 2100,
]

#: The http URLs tooz itself can split and hands to our driver (get_coordinator splits the URL, and
#: picks the driver by its scheme, before any driver runs; urllib drops a newline, and refuses brackets
#: that hold no IP address, there).
TOOZ_SPLITS = [
    url
    for url in HOSTILE_URLS
    if url.startswith("http://") and url not in ("http://[::1", "http://[not-an-ip]:8545", "http://127.0.0.1:8545\n")
]


def _naive_check(url: str) -> None:
    """The check Chain.connect ran before: a scheme prefix, nothing more."""
    if not url.startswith(("http://", "https://")):
        raise InvalidInput("url must be an http:// or https:// JSON-RPC endpoint")


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_the_sdk_refuses_a_hostile_url_before_a_socket_is_opened(url):
    with pytest.raises(InvalidInput):
        Chain.connect(url)
    with pytest.raises(InvalidInput):
        asyncio.run(AsyncChain.connect(url))
    with pytest.raises(InvalidInput) as refused:
        Chain.connect("http://h:x/v3/KEY")
    assert refused.value.argument == "url"
    assert (
        "KEY" not in str(refused.value)
        and "KEY" not in repr(refused.value)
        and "KEY" not in str(refused.value.details())
    )


def test_control_the_old_check_let_them_through_to_an_untyped_value_error():
    """The naive version: the scheme check passes, and the transport raises a bare ValueError."""
    untyped = []
    for url in HOSTILE_URLS:
        try:
            _naive_check(url)
            _lean_http.LeanHttp(url, timeout=1.0)
            _transports.redact_url(url)
        except InvalidInput:
            continue
        except ValueError as raw:
            untyped.append((url, type(raw).__name__))
    assert {url for url, _ in untyped} >= {"http://127.0.0.1:abc", "http://[::1", "http://[::1]:99999"}
    assert all(name == "ValueError" for _, name in untyped)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_the_cli_exits_2_naming_invalid_url_for_every_command_and_source(url, monkeypatch, tmp_path):
    registry = "0x" + "11" * 20
    for argv in (["status"], ["verify", "x", "--token", "1"], ["audit", "history", "x", "--live"], ["mcp"]):
        code, out, err = _cli(*argv, "--rpc-url", url, "--registry", registry, "--json")
        assert code == cli.EXIT_USAGE, (argv, err)
        assert json.loads(out)["error"] == "InvalidInput" and "Traceback" not in err
    monkeypatch.setenv("CHAINFENCE_RPC_URL", url)
    if ",http://" in url:  # in the variable, a comma list of URLs is a list of endpoints (issue 19): refused by
        # a command that talks to one node; a comma inside one URL (http://a,b:8545) is still a malformed URL
        code, _, err = _cli("acquire", "x", "--ttl", "1", "--registry", registry)
        assert code == cli.EXIT_USAGE and "$CHAINFENCE_RPC_URL names 2 endpoints" in err
        return
    code, _, err = _cli("status", "--registry", registry)
    assert code == cli.EXIT_USAGE and "$CHAINFENCE_RPC_URL" in err


@pytest.mark.parametrize("url", TOOZ_SPLITS)
def test_tooz_gets_a_tooz_error_for_every_hostile_url(url):
    with pytest.raises(tooz.coordination.ToozError) as caught:
        tooz.coordination.get_coordinator("chainfence+" + url + "?registry=0x" + "00" * 20, b"m")
    assert isinstance(caught.value, ToozInvalidInput) and isinstance(caught.value.__cause__, InvalidInput)


def test_control_a_url_tooz_cannot_split_fails_in_tooz_for_every_driver():
    """tooz.coordination.get_coordinator splits the URL before it chooses a driver: an unclosed '[' is tooz's
    own ValueError, for its redis driver as for ours; no driver can turn it into a ToozError."""
    for scheme in ("chainfence+http", "redis"):
        for netloc in ("[::1", "[not-an-ip]:8545"):
            with pytest.raises(ValueError) as caught:
                tooz.coordination.get_coordinator(f"{scheme}://{netloc}", b"m")
            assert not isinstance(caught.value, tooz.coordination.ToozError)


def test_tooz_bad_options_lock_names_and_timeouts_are_tooz_errors():
    for query in ("timeout=x", "timeout=0", "poll_latency=nan", "accounts=both", "chain_id=-1", "key=0x11"):
        with pytest.raises(ToozInvalidInput):
            tooz.coordination.get_coordinator(f"chainfence+http://127.0.0.1:1?{query}", b"m")
    coordinator = tooz.coordination.get_coordinator("chainfence+embedded://hostile-inputs", b"m")
    coordinator.start()
    try:
        for name in (b"\xff", b"", "a\u00bbb", "x" * 200, "a\u202e", 7):
            with pytest.raises(tooz.coordination.ToozError):
                coordinator.get_lock(name)
        lock = coordinator.get_lock(b"hostile")
        for blocking in ("soon", float("nan")):
            with pytest.raises(tooz.coordination.ToozError):
                lock.acquire(blocking=blocking)
        assert lock.acquire(blocking=False) and lock.release()
    finally:
        coordinator.stop()


# ---------------------------------------------------------------------------
# Inputs that are not URLs: the CLI against the session's anvil, MCP on both backends
# ---------------------------------------------------------------------------

SURROGATE = b"a\xff".decode("utf-8", "surrogateescape")  # a non-UTF-8 argument, as Python receives it


def test_the_cli_exits_2_on_hostile_inputs_and_sends_nothing(anvil_node, on_anvil, monkeypatch):
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(10)[1])
    node = ["--rpc-url", anvil_node.url, "--registry", on_anvil.address]
    latest = on_anvil.latest_token()
    cases = [
        ["acquire", SURROGATE, "--ttl", "5"],
        ["acquire", "a\u00bbb", "--ttl", "5"],
        ["acquire", "ok", "--ttl", "5", "--timeout", "nan"],
        ["acquire", "ok", "--ttl", "5", "--timeout", "inf"],
        ["status", "a\u00bbb\u00bbc"],
        ["status", "\u00bbx"],
        ["verify", SURROGATE, "--token", "1"],
        ["verify", "x", "--token", str(2**256)],
        ["renew", "x", "--workset", SURROGATE, "--token", "1", "--ttl", "5"],
        ["complete", "x", "--token", "1", "--result", SURROGATE],
        ["claim", "ws", SURROGATE, "--ttl", "5"],
        ["audit", "at", "x", "--block", str(2**64), "--live"],
        ["audit", "takeovers", "--since", "9" * 30, "--live"],
        ["audit", "token", str(2**70), "--live"],
        ["audit", "history", "ws\u00bb", "--live"],
        ["stuck", "--from-block", str(2**64)],
        ["mcp", "--port", "70000"],
        ["revoke", SURROGATE],
    ]
    for argv in cases:
        try:
            code, out, err = _cli(*argv, *node, "--json")
        except SystemExit as usage:  # argparse's own refusal (exit 2 with its usage line)
            code, _out, err = usage.code, "", ""
        assert code == cli.EXIT_USAGE, (argv, err)
        assert "Traceback" not in err
    assert on_anvil.latest_token() == latest, "nothing was acquired"


def _call_all(server, calls):
    async def main():
        answers = []
        async with Client(server) as client:
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments, read_timeout_seconds=120)
                answers.append((bool(result.is_error), result.structured_content))
            status = await client.call_tool("status", {}, read_timeout_seconds=120)
            answers.append((bool(status.is_error), status.structured_content))
        return answers

    return anyio.run(main)


def test_mcp_answers_every_hostile_input_with_a_typed_tool_error_and_keeps_serving(registry, alice):
    server = build_server(alice)
    latest = registry.latest_token()
    lone = "a\ud800"
    calls = [
        ("acquire", {"resource": lone, "ttl": 5}, "InvalidResourceName"),
        ("acquire", {"resource": "a\u00bbb", "ttl": 5}, "InvalidResourceName"),
        ("acquire", {"resource": "ok", "ttl": 5, "wait": float("nan")}, "InvalidInput"),
        ("acquire", {"resource": "ok", "ttl": 2**300}, "InvalidTtl"),
        ("renew", {"resource": "ok", "token": 1, "ttl": 5, "progress": lone}, "InvalidInput"),
        ("renew", {"resource": "x", "workset": lone, "token": 1, "ttl": 5}, "InvalidResourceName"),
        ("renew", {"resource": "a\u00bbb\u00bbc", "token": 1, "ttl": 5}, "InvalidResourceName"),
        ("release", {"resource": "\u00bb", "token": 1}, "InvalidResourceName"),
        ("complete", {"resource": "ok", "token": 1, "result": lone}, "InvalidInput"),
        ("claim", {"workset": "w", "items": [lone], "ttl": 5}, "InvalidClaimItems"),
        ("claim", {"workset": "w\u00bb", "items": ["a"], "ttl": 5}, "InvalidResourceName"),
        ("verify", {"resource": "x" * 300, "token": 1}, "InvalidResourceName"),
        ("verify", {"resource": "x\u00bb" + "y" * 129, "token": 1}, "InvalidResourceName"),
        ("status", {"resources": [lone]}, "InvalidResourceName"),
        ("status", {"resources": ["ok", "a\u00bb"]}, "InvalidResourceName"),
        ("history", {"resource": lone}, "InvalidResourceName"),
        ("leader", {"election": "a\u00bbb"}, "InvalidResourceName"),
    ]
    answers = _call_all(server, [(tool, arguments) for tool, arguments, _ in calls])
    for (tool, arguments, expected), (is_error, answer) in zip(calls, answers, strict=False):
        assert is_error and answer["error"] == expected, (tool, arguments, answer)
    assert answers[-1][0] is False, "the server still answers"
    assert registry.latest_token() == latest, "nothing was sent"


#: Names anyone can put on-chain with a transaction of their own (valid UTF-8, so JSON can carry them).
HOSTILE_HELD = ["nul\x00here", "\x1b[2J\x1b[31mOWNED", "reports/\u202eyliad"]


def _tool_schemas(server) -> dict:
    async def main():
        async with Client(server) as client:
            return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    return anyio.run(main)


def _resource_description(schema: dict, field: str) -> str:
    prop = schema["properties"][field]
    if prop.get("type") == "array":
        prop = prop["items"]
    return prop.get("description", "")


def test_mcp_reads_hostile_names_the_registry_holds_as_its_schema_says(registry, alice, bob):
    """Issue 25, finding 19: the read tools took names with NUL, ESC or bidi characters against a schema
    that said "printable UTF-8". Their schema now says what they do: any name the registry holds is read
    exactly as given, and the answer shows it escaped; acquire's says printable, and refuses the rest."""
    from chainfence._sdk.names import display
    from tests.faults.test_hostile_names import publish

    tokens = {}
    for name in HOSTILE_HELD:
        publish(registry, bob.sender, name.encode())
        tokens[name] = registry.latest_token()
    server = build_server(alice)
    schemas = _tool_schemas(server)
    for tool, field in (("status", "resources"), ("verify", "resource"), ("history", "resource")):
        said = _resource_description(schemas[tool], field)
        assert "printable UTF-8" not in said and "bidi" in said and "read exactly as given" in said, (tool, said)
    assert "printable UTF-8" in _resource_description(schemas["acquire"], "resource")

    latest = registry.latest_token()
    calls = [("status", {"resources": HOSTILE_HELD})]
    calls += [("verify", {"resource": name, "token": tokens[name]}) for name in HOSTILE_HELD]
    calls += [("history", {"resource": name}) for name in HOSTILE_HELD]
    calls += [("acquire", {"resource": name, "ttl": 5}) for name in HOSTILE_HELD]
    answers = _call_all(server, calls)
    status, verifies = answers[0], answers[1:4]
    histories, acquires = answers[4:7], answers[7:10]
    assert status[0] is False
    for name, state in zip(HOSTILE_HELD, status[1]["resources"], strict=True):
        assert state["resource"] == name and state["resource_display"] == display(name.encode())
        assert state["status"] == "live" and state["holder"] == bob.sender and state["token"] == tokens[name]
        assert state["resource_display"].isprintable()
    for name, (is_error, answer) in zip(HOSTILE_HELD, verifies, strict=True):
        assert not is_error and answer["current"] and answer["holder"] == bob.sender, answer
        assert answer["resource_display"] == display(name.encode())
    for name, (is_error, answer) in zip(HOSTILE_HELD, histories, strict=True):
        assert not is_error and answer["total"] == 1 and answer["events"][0]["token"] == tokens[name], answer
        assert answer["resource_display"] == display(name.encode())
    for is_error, answer in acquires:
        assert is_error and answer["error"] == "InvalidResourceName", answer
    assert registry.latest_token() == latest, "nothing was sent"


def test_control_the_escaped_form_of_a_hostile_name_is_another_resource(registry, alice, bob):
    """Control: what a reader sees of a hostile name (its escaped display) is not its name: read as a
    name, it is an unheld resource. Reading the raw name is the only way to reach the lease."""
    from chainfence._sdk.names import display
    from tests.faults.test_hostile_names import publish

    name = "reports/\u202eyliad"
    publish(registry, bob.sender, name.encode())
    answers = _call_all(build_server(alice), [("status", {"resources": [display(name.encode()), name]})])
    escaped, raw = answers[0][1]["resources"]
    assert escaped["status"] == "unheld" and escaped["token"] == 0
    assert raw["status"] == "live" and raw["holder"] == bob.sender


def test_the_cli_revokes_and_grants_a_hostile_name_by_what_it_showed(anvil_node, on_anvil, monkeypatch):
    """Issue 25, finding 16, at the CLI: ``revoke --escaped`` and ``grant --escaped`` take a name as
    chainfence displayed it (bidi controls, bytes that are not UTF-8) and reach that very resource; a
    text that is not a display is exit 2 with nothing sent. Control: the same text without ``--escaped``
    is another name, never held (exit 4, ``NotLive``)."""
    from tests.faults.test_hostile_names import publish

    chain = on_anvil.chain
    admin, stranger = chain.accounts[1], chain.accounts[2]
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(10)[1])
    node = ["--rpc-url", anvil_node.url, "--registry", on_anvil.address, "--json"]
    namespace = address_namespace(admin)
    names = [(namespace + "/").encode() + b"\xff\xfe", (namespace + "/reports/\u202eyliad").encode()]
    for raw in names:
        publish(on_anvil, stranger, raw)
    shown = {event.resource_id: event.resource_display for event in audit.history(on_anvil)}
    for raw in names:
        text = shown[keccak(raw)]
        code, out, err = _cli("revoke", text, *node)
        assert code == cli.EXIT_NOT_CURRENT and json.loads(out)["error"] == "NotLive", "control: another name"
        code, out, err = _cli("revoke", text, "--escaped", *node)
        assert code == cli.EXIT_OK, err
        assert json.loads(out)["resource"] == text and json.loads(out)["revoked_token"] > 0
        code, out, err = _cli("grant", text, admin, "--ttl", "60", "--escaped", *node)
        assert code == cli.EXIT_OK, err
        assert json.loads(out)["reason"] == "granted" and json.loads(out)["holder"] == admin
    latest, head = on_anvil.latest_token(), chain.block_number()
    for bad in [namespace + "/\\q", namespace + "/\u202e", namespace + "/\\x41", "a\u00bbb\u00bbc"]:
        code, out, err = _cli("revoke", bad, "--escaped", *node)
        assert code == cli.EXIT_USAGE and json.loads(out)["error"] == "InvalidResourceName", (bad, err)
    code, out, err = _cli("grant", namespace + "/never\\u202e", admin, "--ttl", "60", "--escaped", *node)
    assert code == cli.EXIT_USAGE and "never held" in json.loads(out)["message"], err
    assert (on_anvil.latest_token(), chain.block_number()) == (latest, head), "nothing was sent"
