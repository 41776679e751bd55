"""Provider limits: eth_getLogs ranges are capped, and a follower in trouble is never silent.

Hosted JSON-RPC providers refuse ``eth_getLogs`` over more than a few
thousand blocks (and over too many results). The proxy refuses more than a
handful of blocks per request, so every query here has to page.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chainfence import Chain, Guard, Registry, Timeouts, audit
from chainfence._node.headers import NOT_WAITED_FOR
from chainfence._node.jsonrpc import HttpEndpoint
from chainfence.errors import (
    ChainError,
    LogRangeRefused,
    NodeUnreachable,
    ProofInvalid,
    ProviderUnavailable,
    StaleToken,
)
from chainfence.guard import Follow, Proven
from chainfence.integrations.sql import fenced_transaction
from chainfence.proofs import ProvenReader, QuorumHeaders
from tests.support.anvil import dev_keys
from tests.support.hostile_replies import Body, Deep, Huge, ReplyServer, Silent, Trickle
from tests.support.proven import RESOURCE, proven, quorum
from tests.support.rpc_proxy import RpcProxy

CAP = 8


@pytest.fixture
def capped(anvil_node, on_anvil):
    """(proxy, the registry seen through a provider that caps eth_getLogs at CAP blocks)."""
    with RpcProxy(anvil_node.url) as proxy:
        proxy.max_log_range = CAP
        chain = Chain.connect(proxy.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.01))
        yield proxy, Registry.at(chain, on_anvil.address)


def spread_acquisitions(on_anvil, names, gap=3 * CAP):
    """Acquire each name, with `gap` empty blocks between them: the events span many pages."""
    agent = on_anvil.connect(on_anvil.chain.accounts[1])
    leases = []
    for name in names:
        on_anvil.chain.mine(gap)
        leases.append(agent.acquire(name, ttl=600))
    return leases


def test_history_pages_through_a_capped_provider(capped, on_anvil):
    proxy, registry = capped
    leases = spread_acquisitions(on_anvil, ["a/1", "b/2", "c/3"])
    events = audit.history(registry)
    assert [(e.resource, e.token) for e in events][-3:] == [(lease.resource, lease.token) for lease in leases]
    assert [e.token for e in events] == [e.token for e in audit.history(on_anvil)], "the same as an uncapped node"
    assert len(proxy.sent("eth_getLogs")) > 3 * 3, "it paged"


def test_control_one_unbounded_query_is_refused(capped, on_anvil):
    """What history() and the follower's name lookup asked before: blocks 0 to latest in one request."""
    _proxy, registry = capped
    on_anvil.chain.mine(2 * CAP)
    with pytest.raises(LogRangeRefused):
        registry.chain.rpc.logs({"address": registry.address, "fromBlock": 0, "toBlock": "latest"})


def test_the_follower_keeps_following_through_a_capped_provider(capped, on_anvil, tmp_path):
    _proxy, registry = capped
    with Guard(registry, path=tmp_path / "follow.sqlite", mode=Follow(interval=60)) as guard:
        leases = spread_acquisitions(on_anvil, ["x/1", "y/2", "z/3"])
        head = guard.sync()
        assert head >= leases[-1].block_number
        for lease in leases:
            assert guard.mark(lease.resource) == lease.token, "raised from the events, page by page"
        status = guard.follow_status()
        assert status.healthy and status.last_error is None and status.followed_block == head


def test_a_follower_that_cannot_read_logs_says_so_and_checks_go_on_chain(capped, on_anvil, tmp_path):
    """The provider refuses every eth_getLogs: the follower reports it (follow_status, staleness) and,
    meanwhile, a token at its mark is verified on-chain: the superseded holder is refused."""
    proxy, registry = capped
    chain = on_anvil.chain
    old = on_anvil.connect(chain.accounts[1]).acquire("jobs/1", ttl=10)
    with Guard(registry, path=tmp_path / "follow.sqlite", mode=Follow(interval=60)) as guard:
        guard.check("jobs/1", old.token)
        proxy.max_log_range = 0  # every range refused, even a single block
        chain.advance_time(11)
        on_anvil.connect(chain.accounts[2]).acquire("jobs/1", ttl=60)  # the holder is superseded
        with pytest.raises(LogRangeRefused):
            guard.sync()
        status = guard.follow_status()
        assert not status.healthy and "LogRangeRefused" in status.last_error
        with pytest.raises(StaleToken):
            guard.check("jobs/1", old.token)  # at its mark, yet refused: the chain was asked


def test_control_mark_mode_accepts_the_superseded_holder_at_its_mark(capped, on_anvil, tmp_path):
    """What a follower that silently degraded to mark mode did: accept the stale holder at its mark."""
    _proxy, registry = capped
    chain = on_anvil.chain
    old = on_anvil.connect(chain.accounts[1]).acquire("jobs/1", ttl=10)
    with Guard(registry, path=tmp_path / "mark.sqlite") as guard:
        guard.check("jobs/1", old.token)
        chain.advance_time(11)
        on_anvil.connect(chain.accounts[2]).acquire("jobs/1", ttl=60)
        assert guard.check("jobs/1", old.token) == old.token


# ---------------------------------------------------------------------------
# Every reply a provider sends is bounded: depth, number width, size, time to the last byte
# (issue 25). One of three header providers answers out of bounds; the two honest ones outvote it.
# ---------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
DEEP = 100_000
REFUSED_DEEP = "the node did not answer eth_getBlockByNumber: the reply is nested deeper than 64 levels"


def verifier(story, proof_url, clock_url, header_urls, token, *, k=None, bare=False) -> subprocess.CompletedProcess:
    """A proven check in a process that imported web3 and eth_account (tests/support/proven_verifier.py;
    ``bare``: one that did not)."""
    args = [story.registry.address, proof_url, clock_url, RESOURCE, str(token), *header_urls]
    if k is not None:
        args = ["--k", str(k), *args]
    if bare:
        args = ["--bare", *args]
    return subprocess.run(
        [sys.executable, "-m", "tests.support.proven_verifier", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def report_of(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, f"the verifier died: exit {run.returncode}\n{run.stderr[-2000:]}"
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_provider_nesting_its_head_100000_deep_is_outvoted_beside_web3(story, providers, anvil_node):
    deep, h2, h3 = providers
    deep.on("eth_getBlockByNumber", lambda params, forward: Deep(DEEP))
    report = report_of(verifier(story, h2.url, anvil_node.url, [deep.url, h2.url, h3.url], story.current))
    assert report["recursion_limit"] == 100_000, "py_ecc raised it: the surroundings of the attack"
    assert report["verdict"] == "current" and sorted(report["vouched_by"]) == sorted([h2.url, h3.url])
    assert report["dissent"][deep.url] in (NOT_WAITED_FOR, "down (eth_getBlockByNumber: " + REFUSED_DEEP + ")")
    assert report["asked"][deep.url] == f"ProviderUnavailable: provider {deep.url} did not answer (" + (
        "eth_getBlockByNumber: " + REFUSED_DEEP + ")"
    ), "typed, naming the provider and the bound"


def test_control_json_loads_of_that_reply_crashes_a_process_that_imported_web3(tmp_path):
    reply = tmp_path / "deep.json"
    reply.write_bytes(Deep(DEEP).body(1))
    run = subprocess.run(
        [sys.executable, "-m", "tests.support.proven_verifier", "--naive-parse", str(reply)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == -signal.SIGSEGV, (run.returncode, run.stdout, run.stderr[-500:])


def test_verify_proven_is_not_crashed_by_a_deep_reply(story, providers, anvil_node):
    deep, h2, h3 = providers
    deep.on("eth_getBlockByNumber", lambda params, forward: Deep(DEEP))
    deep.on("eth_getProof", lambda params, forward: Deep(DEEP))
    run = cli_verify(story, anvil_node, deep.url, story.current, [deep.url, h2.url, h3.url])
    assert run.returncode == 5, (run.returncode, run.stderr[-2000:])  # the proof provider: unusable (exit 5)
    assert "nested deeper" in run.stderr and "Traceback" not in run.stderr
    run = cli_verify(story, anvil_node, h2.url, story.current, [deep.url, h2.url, h3.url])
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])  # the header quorum: outvoted


def cli_verify(story, anvil_node, rpc_url, token, header_urls, *flags) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    args = ["verify", RESOURCE, "--token", str(token), "--rpc-url", rpc_url, "--registry", story.registry.address]
    args += ["--proven", "--headers", ",".join(header_urls), "--clock-rpc", anvil_node.url, *flags]
    return subprocess.run(
        [sys.executable, "-c", CLI_BESIDE_WEB3, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


#: The CLI in a process that imported web3 and eth_account first (as a service embedding it has).
CLI_BESIDE_WEB3 = "import sys, web3, eth_account; from chainfence.cli import main; sys.exit(main(sys.argv[1:]))"


def wide_head(params, forward):
    """A head whose number is 4,000 hex digits (16,000 bits): int() reads it, str() of it raises."""
    block = forward()
    if isinstance(block, dict):
        block = {**block, "number": "0x" + "f" * 4_000}
    return block


def test_a_provider_reporting_a_4000_digit_head_is_outvoted(story, providers, anvil_node, tmp_path):
    wide, h2, h3 = providers
    wide.on("eth_getBlockByNumber", wide_head)
    urls = [wide.url, h2.url, h3.url]
    reader = proven(story, quorum(*urls, story=story), h2.url)
    info = reader.check(RESOURCE, story.current)
    assert info.token == story.current
    said = reader.headers.current().dissent[wide.url]
    assert said in (NOT_WAITED_FOR, "ProofInvalid: malformed head (number is wider than 64 bits (4000 hex digits))")
    with pytest.raises(StaleToken):
        reader.check(RESOURCE, story.stale)
    # The proven guard and the fenced SQL transaction judge through the same header source.
    with Guard(story.registry, tmp_path / "proven.sqlite", mode=Proven(headers=quorum(*urls, story=story))) as guard:
        assert guard.check(RESOURCE, story.current) == story.current
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)
    conn = sqlite3.connect(tmp_path / "app.sqlite")
    try:
        conn.execute("CREATE TABLE reports (body TEXT)")
        conn.commit()
        headers = quorum(*urls, story=story)
        with fenced_transaction(conn, story.registry, RESOURCE, story.current, headers=headers, proof_provider=h2.url):
            conn.execute("INSERT INTO reports VALUES ('bob')")
        with pytest.raises(StaleToken):
            with fenced_transaction(
                conn, story.registry, RESOURCE, story.stale, headers=headers, proof_provider=h2.url
            ):
                conn.execute("INSERT INTO reports VALUES ('alice, stale')")
        assert conn.execute("SELECT body FROM reports").fetchall() == [("bob",)]
    finally:
        conn.close()
    assert cli_verify(story, anvil_node, h2.url, story.current, urls).returncode == 0


def test_a_proof_stating_a_4000_digit_balance_is_proof_invalid(story, providers):
    liar, h2, h3 = providers
    liar.on("eth_getProof", lambda params, forward: {**forward(), "balance": "0x" + "f" * 4_000})
    with pytest.raises(ProofInvalid, match="balance is wider than 256 bits") as refused:
        proven(story, quorum(liar.url, h2.url, h3.url, story=story), liar.url).check(RESOURCE, story.current)
    assert refused.value.source == liar.url


def test_control_that_head_number_is_read_but_cannot_be_written():
    number = int("0x" + "f" * 4_000, 16)  # what a head reader without a width bound takes
    with pytest.raises(ValueError, match="integer string conversion"):
        f"block {number}"


def test_a_silent_provider_is_outvoted_without_waiting_for_it(story, providers):
    silent_one, h2, h3 = providers
    silent = Silent()
    silent_one.on("eth_getBlockByNumber", lambda params, forward: silent)
    reader = ProvenReader(
        story.registry.address,
        headers=QuorumHeaders([silent_one.url, h2.url, h3.url], clock=story.registry.chain.now, timeout=120),
        provider=h2.url,
    )
    try:
        for check in range(3):  # cold (no header cached), then warm
            info = reader.check(RESOURCE, story.current)
            assert info.token == story.current
            # Answered while the silent provider still holds the request: the quorum did not wait for it.
            assert silent.holding >= 1 and silent.gone == 0
            # Asked once per check, never a second time for the same check (a cold check asked twice).
            assert silent.started <= check + 1
    finally:
        silent.release()
        reader.headers.close()


def test_verify_proven_asks_a_silent_provider_once_and_answers_without_it(story, providers, anvil_node):
    """The CLI's cold check: the silent provider is asked for its head, once, and not waited for (the
    check asked it a second time for the block, and waited for each: twice its timeout)."""
    silent_one, h2, h3 = providers
    silent = Silent()
    silent_one.on("eth_getBlockByNumber", lambda params, forward: silent)
    try:
        run = cli_verify(story, anvil_node, h2.url, story.current, [silent_one.url, h2.url, h3.url])
        assert run.returncode == 0, run.stderr[-2000:]
        assert silent.started == 1
    finally:
        silent.release()


def test_a_trickling_provider_is_cut_off_at_its_timeout():
    trickle = Trickle(every=0.02)  # a byte every 20 ms, forever: each recv returns well within the timeout
    with ReplyServer(lambda request: trickle, kind="http") as server:
        endpoint = HttpEndpoint(server.address, timeout=0.5)
        with pytest.raises(ProviderUnavailable, match="timed out"):
            endpoint.request("eth_blockNumber", [])
    trickle.wait(lambda t: t.gone == 1)  # the client hung up: it did not read on for as long as it trickled


def test_control_a_per_recv_timeout_reads_a_trickle_for_as_long_as_it_lasts():
    trickle = Trickle(every=0.02, body=b'{"jsonrpc":"2.0","id":{id},"result":"0x1"}' + b" " * 60)
    with ReplyServer(lambda request: trickle, kind="http") as server:
        sock = socket.create_connection(server.address.removeprefix("http://").split(":"), timeout=0.5)
        request = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
        sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(request), request))
        started = time.monotonic()
        received = b""
        while not received.endswith(b" " * 60):
            received += sock.recv(1024)  # each recv within 0.5 s: the timeout never fires
        sock.close()
    assert time.monotonic() - started > 2 * 0.5, "a 0.5 s timeout, yet the reply took longer than twice that"


def test_a_trickling_provider_is_outvoted_while_it_trickles(story, providers):
    trickler, h2, h3 = providers
    trickle = Trickle(every=0.02)
    trickler.on("eth_getBlockByNumber", lambda params, forward: trickle)
    headers = QuorumHeaders([trickler.url, h2.url, h3.url], clock=story.registry.chain.now, timeout=120)
    try:
        info = proven(story, headers, h2.url).check(RESOURCE, story.current)
        assert info.token == story.current
        assert trickle.started >= 1 and trickle.gone == 0, "answered while it still trickles"
    finally:
        trickle.release()
        headers.close()


def test_a_200_mb_reply_is_refused_unread_and_outvoted(story, providers, anvil_node):
    huge, h2, h3 = providers
    reply = Huge(200 << 20)
    huge.on("eth_getBlockByNumber", lambda params, forward: reply)
    report = report_of(verifier(story, h2.url, anvil_node.url, [huge.url, h2.url, h3.url], story.current))
    assert report["verdict"] == "current" and huge.url not in report["vouched_by"]
    assert "longer than 16777216" in report["asked"][huge.url] and "ProviderUnavailable" in report["asked"][huge.url]
    assert reply.sent < 100 << 20, "the rest of the reply was never read"


@pytest.mark.parametrize("announce", [True, False], ids=["content-length", "chunked"])
def test_a_200_mb_reply_costs_the_verifier_no_more_memory_than_its_cap(story, providers, anvil_node, announce):
    """k = n: the check must read each provider's reply, the 200 MB one too, up to the cap (refused at
    once by its Content-Length; sent chunked, read up to the cap). In a lean process (no web3): its
    peak memory is the check's (issue 25 measured 15 MB, then 815 MB with the reply)."""
    huge, h2, h3 = providers
    reply = Huge(200 << 20, announce=announce)
    huge.on("eth_getBlockByNumber", lambda params, forward: reply)
    urls = [huge.url, h2.url, h3.url]
    report = report_of(verifier(story, h2.url, anvil_node.url, urls, story.current, k=3, bare=True))
    assert report["verdict"] == "ProviderUnavailable" and huge.url in report["message"]
    assert "longer than 16777216" in report["asked"][huge.url]
    grown = (report["maxrss_after"] - report["maxrss_before"]) / 1024
    print(f"peak memory: {report['maxrss_before'] / 1024:.0f} MiB before the check, +{grown:.0f} MiB during it")
    assert grown < 64, f"the check's peak memory grew by {grown:.0f} MiB for one 200 MB reply"


def test_a_reply_without_a_length_is_refused_once_it_passes_the_cap():
    reply = Huge(200 << 20, announce=False)  # chunked: no Content-Length to refuse it by
    with ReplyServer(lambda request: reply, kind="http") as server:
        with pytest.raises(ProviderUnavailable, match="longer than"):
            HttpEndpoint(server.address, timeout=60).request("eth_getBlockByNumber", ["latest", False])
    reply.wait(lambda r: r.gone == 1)
    assert reply.sent < 100 << 20


# ---------------------------------------------------------------------------
# Every transport the SDK reads replies with holds the same bounds (a server with no node behind it
# answers every request out of bounds; tests/support/hostile_replies.py)
# ---------------------------------------------------------------------------

TRANSPORTS = ["http", "ipc", "asyncio-ipc", "asyncio-http"]


def ask_through(kind: str, server: ReplyServer, timeout: float = 0.5):
    """eth_blockNumber through the SDK's node layer over ``kind``; what it returned (or raised)."""
    import asyncio

    from chainfence._node.ipc import AsyncLeanIpc, LeanIpc
    from chainfence._node.lean_http import LeanHttp
    from chainfence._node.rpc import AsyncRpc, Rpc
    from chainfence._node.web3_providers import connect_async_http

    if kind in ("http", "ipc"):
        transport = (
            LeanHttp(server.address, timeout=timeout) if kind == "http" else LeanIpc(server.address, timeout=timeout)
        )
        rpc = Rpc(transport)
        try:
            return rpc.block_number()
        finally:
            rpc.close()

    async def run():
        node = (
            AsyncLeanIpc(server.address, timeout=timeout)
            if kind == "asyncio-ipc"
            else connect_async_http(server.address, timeout=timeout)
        )
        rpc = AsyncRpc(node)
        try:
            return await rpc.block_number()
        finally:
            await rpc.close()

    return asyncio.run(run())


def served(kind: str) -> str:
    return "http" if kind.endswith("http") else "ipc"


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_transport_answers_a_plain_reply(kind):
    with ReplyServer(lambda request: "0x2a", kind=served(kind)) as server:
        assert ask_through(kind, server) == 42


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_transport_refuses_a_reply_nested_100000_deep(kind):
    deep = Deep(DEEP)
    with ReplyServer(lambda request: deep, kind=served(kind)) as server:
        with pytest.raises(NodeUnreachable, match="nested deeper than 64 levels"):
            ask_through(kind, server)
    assert deep.started == 1, "refused, not asked again: the same question gets the same reply"


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_transport_refuses_an_integer_of_5000_digits(kind):
    wide = Body(b'{"jsonrpc":"2.0","id":{id},"result":' + b"9" * 5_000 + b"}")
    with ReplyServer(lambda request: wide, kind=served(kind)) as server:
        with pytest.raises(NodeUnreachable, match="5000 digits"):
            ask_through(kind, server)


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_transport_refuses_a_hex_quantity_of_4000_digits(kind):
    with ReplyServer(lambda request: "0x" + "f" * 4_000, kind=served(kind)) as server:
        with pytest.raises(ChainError, match="wider than 256 bits"):
            ask_through(kind, server)


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_transport_refuses_a_200_mb_reply_unread(kind):
    huge = Huge(200 << 20, announce=False)  # over HTTP chunked: no length to refuse it by; over IPC one line
    with ReplyServer(lambda request: huge, kind=served(kind)) as server:
        with pytest.raises(NodeUnreachable, match="longer than"):
            ask_through(kind, server, timeout=60)
    huge.wait(lambda reply: reply.gone == 1)
    assert huge.sent < 100 << 20 and huge.started == 1


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_transport_cuts_off_a_trickle_at_its_timeout(kind):
    trickle = Trickle(every=0.02)  # a space every 20 ms, forever
    with ReplyServer(lambda request: trickle, kind=served(kind)) as server:
        with pytest.raises(NodeUnreachable, match="timed out"):
            ask_through(kind, server)
    trickle.wait(lambda reply: reply.gone == reply.started)  # the client hung up on each
    assert trickle.started <= 2  # a read is asked once more after a transport failure (rpc.py), no more
