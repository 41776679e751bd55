"""A JSON-RPC provider on 127.0.0.1 that lies on cue: answers rewritten per method, in front of a real node.

    with LyingProxy(anvil.url) as liar:
        liar.on("eth_call", lambda params, forward: forward(params[:1] + [old_block]))   # serve an old state
        liar.on("eth_getProof", lambda params, forward: forge(forward(params)))          # a forged proof
        liar.down = True                                                                 # a provider that is down

A handler gets the request's ``params`` and ``forward(params, method=None)``,
which asks the node and returns its result (or raises :class:`NodeError`
with the node's error reply), and returns the result to answer with; a
:class:`Refuse` it raises becomes a JSON-RPC error reply. Batches are
answered element by element, each through its method's handler, so a lie
holds inside a batch too (the SDK batches ``eth_call`` with the pending
block). ``down``: every connection is closed without an answer. ``log``
records each method asked, in order; ``count(method)`` counts them.

:class:`LyingTransport` tells the same lies in process, to the embedded chain (which no proxy reaches):
the same ``on``, ``honest`` and ``count``, and ``chain``, a :class:`~chainfence.Chain` that reads through it.
The embedded chain answers numbers as ints where a node sends hex: a handler that reads them takes both.
A handler may also return a reply no honest node sends (tests/support/hostile_replies.py: nested too
deep, too large, trickled, or none at all): it is written as it is, for a request on its own.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chainfence import Chain
from chainfence._node.rpc import Rpc
from chainfence._node.transports import ErrorReply, Transport
from tests.support.hostile_replies import Raw, write_http


class NodeError(Exception):
    def __init__(self, error: dict):
        super().__init__(error)
        self.error = error


class Refuse(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


Handler = Callable[[list, Callable[..., Any]], Any]


class LyingProxy:
    def __init__(self, upstream: str):
        self.upstream = upstream
        self.handlers: dict[str, Handler] = {}
        self.down = False
        self.log: list[str] = []
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1 << 62))
        proxy = self

        class Http(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if proxy.down:
                    self.close_connection = True
                    return
                request = json.loads(body)
                if isinstance(request, list):
                    reply = [proxy._answer(element) for element in request]
                else:
                    reply = proxy._answer(request)
                    if isinstance(reply, Raw):
                        self.close_connection = True
                        self.wfile.flush()
                        write_http(reply, self.connection, request.get("id"))
                        return
                data = json.dumps(reply).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Http)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- lying --------------------------------------------------------------------

    def on(self, method: str, handler: Handler) -> None:
        with self._lock:
            self.handlers[method] = handler

    def honest(self) -> None:
        """Stop every lie (and come back up)."""
        with self._lock:
            self.handlers.clear()
            self.down = False

    def count(self, method: str) -> int:
        with self._lock:
            return sum(1 for m in self.log if m == method)

    # -- plumbing -------------------------------------------------------------------

    def node(self, method: str, params: list) -> Any:
        """Ask the node directly; its result (NodeError for an error reply)."""
        with self._lock:
            request_id = next(self._ids)
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
        request = urllib.request.Request(self.upstream, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = json.loads(response.read())
        if reply.get("error") is not None:
            raise NodeError(reply["error"])
        return reply.get("result")

    def _answer(self, request: dict) -> Any:
        method = request.get("method", "")
        params = request.get("params", [])
        with self._lock:
            self.log.append(method)
            handler = self.handlers.get(method)
        try:
            if handler is None:
                result = self.node(method, params)
            else:
                result = handler(params, lambda p=None, method=method: self.node(method, params if p is None else p))
        except NodeError as exc:
            return {"jsonrpc": "2.0", "id": request.get("id"), "error": exc.error}
        except Refuse as exc:
            return {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": exc.code, "message": exc.message}}
        if isinstance(result, Raw):
            return result
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}

    def __enter__(self) -> LyingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class LyingTransport(Transport):
    """:class:`LyingProxy`'s lies over the embedded chain's own transport (``embedded``: a registry's
    chain on the in-process chain); ``chain`` reads through the lies, the original chain does not."""

    embedded = True
    batches = False  # eth-tester takes no batches

    def __init__(self, embedded: Chain):
        self.inner = embedded.rpc.transport
        self.tester = self.inner.tester
        self.w3 = self.inner.w3
        self.url = "embedded"
        self.handlers: dict[str, Handler] = {}
        self.log: list[str] = []
        self._lock = threading.Lock()
        self.chain = Chain(Rpc(self), [], dev="eth-tester", receipt_timeout=5.0, poll_latency=0.01)

    def on(self, method: str, handler: Handler) -> None:
        with self._lock:
            self.handlers[method] = handler

    def honest(self) -> None:
        with self._lock:
            self.handlers.clear()

    def count(self, method: str) -> int:
        with self._lock:
            return sum(1 for m in self.log if m == method)

    def node(self, method: str, params: list) -> Any:
        return self.inner.request(method, list(params))

    def request(self, method: str, params) -> Any:
        with self._lock:
            self.log.append(method)
            handler = self.handlers.get(method)
        if handler is None:
            return self.node(method, params)
        try:
            return handler(list(params), lambda p=None, method=method: self.node(method, params if p is None else p))
        except Refuse as exc:
            raise ErrorReply(method, {"error": {"code": exc.code, "message": exc.message}}) from None

    def in_process(self, name: str, *args: Any) -> Any:
        return self.inner.in_process(name, *args)
