"""Work done while a request is on its way (``meanwhile=``, :mod:`chainfence._node.transports`), without a chain.

The sender signs a transaction while its preflight is on its way (issue #19): the transports that overlap
(over IPC, over HTTP, asyncio's IPC) write the request, run the work, then read the reply. Each case here
holds a scripted node's answer until the work has run and checks the order: the node had the request
before the work ran, and the reply was read after it. The RPC layer gives the work to the first request of
a method only, and never to a transport that does not overlap (the work is then not run at all: the sender
signs in order, as before).
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chainfence._node.ipc import AsyncLeanIpc, LeanIpc
from chainfence._node.lean_http import LeanHttp
from chainfence._node.rpc import AsyncRpc, Rpc
from chainfence._node.transports import Transport
from tests.unit.test_lean_ipc import ScriptedNode, result

WAIT = 30  # seconds an event is waited for before the test fails (never a window that decides the outcome)


class Held:
    """A node's answer that waits for the work to run: records ``received`` (the node has the request),
    ``worked`` (the work ran, seeing the request already received), ``answered``."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.received = threading.Event()
        self.released = threading.Event()

    def answer(self, request):
        self.order.append(f"received {request['method'] if isinstance(request, dict) else 'batch'}")
        self.received.set()
        assert self.released.wait(WAIT), "the work never ran"
        self.order.append("answered")

    def work(self) -> None:
        assert self.received.wait(WAIT), "the work ran before the node had the request"
        self.order.append("worked")
        self.released.set()


def test_over_ipc_the_work_runs_once_the_request_is_written_and_before_the_reply_is_read():
    held = Held()

    def answer(request):
        held.answer(request)
        if isinstance(request, list):
            return json.dumps(
                [{"jsonrpc": "2.0", "id": r["id"], "result": "0x1"} for r in request]
            ).encode() + b"\n", False
        return result(request, "0x2a"), False

    node = ScriptedNode(answer)
    try:
        transport = LeanIpc(node.path, timeout=WAIT)
        assert transport.overlaps
        assert transport.request("eth_blockNumber", [], meanwhile=held.work) == "0x2a"
        assert held.order == ["received eth_blockNumber", "worked", "answered"]
        held.__init__()
        replies = transport.batch([("eth_call", []), ("eth_chainId", [])], meanwhile=held.work)
        assert [reply["result"] for reply in replies] == ["0x1", "0x1"]
        assert held.order == ["received batch", "worked", "answered"]
    finally:
        node.close()


def test_asyncio_over_ipc_runs_the_work_between_the_write_and_the_read_too():
    held = Held()
    node = ScriptedNode(lambda request: (held.answer(request), (result(request, "0x2a"), False))[1])

    async def main():
        transport = AsyncLeanIpc(node.path, timeout=WAIT)
        assert transport.overlaps
        try:
            # The work blocks the loop until the node has the request: the write went out before it ran.
            return await transport.request("eth_blockNumber", [], meanwhile=held.work)
        finally:
            await transport.close()

    try:
        assert asyncio.run(main()) == "0x2a"
        assert held.order == ["received eth_blockNumber", "worked", "answered"]
    finally:
        node.close()


def test_over_http_the_work_runs_once_the_request_is_written_and_before_the_reply_is_read():
    held = Held()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            held.answer(request)
            body = result(request, "0x2a")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        transport = LeanHttp(f"http://127.0.0.1:{server.server_address[1]}", timeout=WAIT)
        assert transport.overlaps
        assert transport.request("eth_blockNumber", [], meanwhile=held.work) == "0x2a"
        assert held.order == ["received eth_blockNumber", "worked", "answered"]
        transport.close()
    finally:
        server.shutdown()
        server.server_close()


class Recording(Transport):
    """A transport that overlaps and records what it was given: the requests, and which carried work."""

    overlaps = True

    def __init__(self, overlaps: bool = True):
        self.overlaps = overlaps
        self.seen: list[tuple[str, bool]] = []

    def request(self, method, params, *, meanwhile=None):
        self.seen.append((method, meanwhile is not None))
        if meanwhile is not None:
            meanwhile()
        return "0x1"

    def batch(self, calls, *, meanwhile=None):
        self.seen.append(("+".join(method for method, _ in calls), meanwhile is not None))
        if meanwhile is not None:
            meanwhile()
        return [{"jsonrpc": "2.0", "id": 1, "result": "0x1"} for _ in calls]


def test_the_rpc_layer_gives_the_work_to_the_first_request_of_a_method_only():
    """``max_priority_fee`` may ask twice (the fee history where the tip is refused): the work runs once."""
    transport = Recording()
    ran = []
    Rpc(transport).block_number(meanwhile=lambda: ran.append(1))
    assert transport.seen == [("eth_blockNumber", True)] and ran == [1]
    transport.seen.clear()
    Rpc(transport).dev_preflight(
        {"to": "0x" + "11" * 20, "data": b""}, "anvil_getAutomine", meanwhile=lambda: ran.append(2)
    )
    assert transport.seen == [("eth_call+anvil_getAutomine", True)] and ran == [1, 2]


def test_control_a_transport_that_does_not_overlap_never_runs_the_work():
    """Where the transport cannot write first and read later, the work is not done at all (the sender then
    signs in order, after the preflight's answer): nothing is done speculatively for nothing."""
    transport = Recording(overlaps=False)
    ran = []
    Rpc(transport).block_number(meanwhile=lambda: ran.append(1))
    assert transport.seen == [("eth_blockNumber", False)] and ran == []


def test_asyncio_rpc_gives_the_work_to_an_overlapping_transport_only():
    class AsyncRecording:
        embedded = False
        batches = True
        w3 = None

        def __init__(self, overlaps):
            self.overlaps = overlaps
            self.seen: list[bool] = []

        async def request(self, method, params, **kwargs):
            self.seen.append("meanwhile" in kwargs)
            if "meanwhile" in kwargs:
                kwargs["meanwhile"]()
            return "0x1"

    from chainfence._node.transports import AsyncTransport

    ran = []
    for overlaps in (True, False):
        transport = AsyncRecording(overlaps)
        AsyncTransport.register(AsyncRecording)
        asyncio.run(AsyncRpc(transport).block_number(meanwhile=lambda o=overlaps: ran.append(o)))
        assert transport.seen == [overlaps]
    assert ran == [True]


@pytest.mark.parametrize("kind", ["ipc", "http"])
def test_a_failed_exchange_still_raises_after_the_work(kind, tmp_path):
    """Nobody listening: nothing was written, the work is not run and the failure is the transport's."""
    transport = (
        LeanIpc(str(tmp_path / "none.ipc"), timeout=1) if kind == "ipc" else LeanHttp("http://127.0.0.1:9", timeout=1)
    )
    ran = []
    with pytest.raises(ConnectionError):
        transport.request("eth_blockNumber", [], meanwhile=lambda: ran.append(1))
    assert ran == []
