"""A JSON-RPC proxy on 127.0.0.1 that misbehaves on cue, for fault tests.

    with RpcProxy(anvil.url) as proxy:
        chain = Chain.connect(proxy.url, ...)
        proxy.plan("eth_sendRawTransaction", "drop_reply")   # forward it, then hang up
        proxy.plan("eth_sendRawTransaction", "drop_request") # hang up without forwarding
        proxy.plan("eth_sendRawTransaction", "late_reply")   # forward it, answer only after the client gave up
        proxy.plan("eth_sendRawTransaction", "reply_then_down")  # answer it, then the node "dies"
        proxy.plan("eth_sendRawTransaction", "drop_reply_then_down")  # forward it, then "die" before answering
        proxy.plan("eth_blockNumber", "close_after_reply")  # answer, then close the kept-alive connection
        proxy.plan("eth_getTransactionReceipt", "hold_reply")  # forward it, hold the answer until let_go()

``RpcProxy(url, keep_alive=True)`` speaks HTTP/1.1 and keeps connections
open between requests (the default answers HTTP/1.0: one request a
connection). There ``close_after_reply`` is a server's idle timeout: the
reply says nothing of closing, then the proxy closes the connection;
``wait_closed(n)`` waits until it has closed ``n`` connections, and
``connections`` counts those accepted. ``drop_request`` on a kept-alive
connection is the race of that timeout with the client's next request.

Each planned fault applies to the next request of that method, once, in the
order planned. ``late_reply`` is sequenced by the client, not by a clock:
the proxy forwards the request at once (the node acts on it), then holds
the reply until the client closes the connection (its read timed out) and
only then writes it — a reply that is late by construction, whatever the
machine's speed. ``hold_reply`` also forwards at once and holds the reply,
until the test calls ``let_go()`` or the client hangs up: ``wait_holding(n)``
returns once ``n`` such replies are held, the moment a test knows the client
is waiting on an answer the node already gave (to interrupt it there).

Standing behaviours, set as attributes:

- ``down = True``: every request is dropped (a stopped node, seen from the client);
- ``max_log_range = N``: ``eth_getLogs`` over more than N blocks is refused
  with a JSON-RPC error, as hosted providers do;
- ``client_version = "Geth/..."``: what ``web3_clientVersion`` answers, alone or in a batch (a
  node that is not a dev chain, as far as the SDK can tell);
- ``no_pending = True``: ``eth_getBlockByNumber("pending")`` is refused;
- ``no_debug = True``: every ``debug_*`` method is refused as unknown (a node without the debug
  namespace: most hosted providers);
- ``stall()`` / ``resume()``: a stalled node. From ``stall()`` on, every
  request is read and held, neither forwarded nor answered, until
  ``resume()``; then the held requests go to the node and are answered (to
  clients still waiting; a client that gave up meanwhile gets nothing, but
  the node did act on its request). ``held`` counts the requests held so
  far; leaving the ``with`` block resumes, so no handler thread is left hanging.

Every request is recorded on arrival (method, params, fault) in ``log``, and
again in ``completed`` once the node's reply came back, so tests can wait
for "the node has it" rather than for "the proxy saw it".

Names: a JSON-RPC batch is one request, recorded under its methods joined by
``+`` (the SDK's preflight on anvil is ``eth_call+anvil_getAutomine+eth_getBalance``). A
query (``sent``, ``wait_completed``, ``completed_count``) for one of its
methods matches it; a fault is planned for a batch under its joined name, or
under ``"batch"`` for whichever batch comes next (a fault planned for
``eth_call`` applies to a lone ``eth_call`` only).
``eth_sendRawTransactionSync`` (EIP-7966: the send, answered once the
transaction is mined, which the SDK uses on a node that mines on arrival) is
matched by plans and queries for ``eth_sendRawTransaction`` too: it is the
send, whatever else its reply carries; planned under its own name it matches
only itself.

``late_reply`` needs a client that gives up; one whose every request has a
short timeout would also give up on ordinary requests a loaded machine
answers slowly. ``time_out_only(w3, method, seconds)`` shortens the read
timeout of the next request of one method (the one planned to be late) on
a web3 HTTP provider, sync or asyncio, and on the SDK's own transport of a
``Web3`` from ``connect_http`` (``chainfence._node.rpc.LeanHttp``, which carries
the hot requests), and leaves every other request at its (safety-net)
timeout.
"""

from __future__ import annotations

import json
import select
import threading
import urllib.request
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = (
    "drop_reply",
    "drop_request",
    "late_reply",
    "reply_then_down",
    "drop_reply_then_down",
    "close_after_reply",
    "hold_reply",
)


#: A plan or query for the key also matches these methods (the same request under another name).
ALIASES = {"eth_sendRawTransaction": ("eth_sendRawTransactionSync",)}


def matches(logged: str, wanted: str) -> bool:
    """Whether a request recorded as ``logged`` (a method, or a batch's methods joined by ``+``) answers
    a query for ``wanted`` (see the module docstring)."""
    names = logged.split("+")
    return wanted in names or any(alias in names for alias in ALIASES.get(wanted, ()))


def planned_for(logged: str, batch: bool, key: str) -> bool:
    """Whether a fault planned under ``key`` applies to a request recorded as ``logged``."""
    return logged == key or (batch and key == "batch") or logged in ALIASES.get(key, ())


def time_out_only(w3, method: str, seconds: float, *, times: int = 1) -> None:
    """Give the next ``times`` requests of ``method`` on ``w3``'s HTTPProvider (or AsyncHTTPProvider,
    or the SDK's LeanHttp) a timeout of ``seconds`` (the ones the proxy is planned to answer late);
    every other request keeps its timeout."""
    import contextvars
    import inspect

    provider = w3.provider
    current: contextvars.ContextVar[str | None] = contextvars.ContextVar("time_out_only", default=None)
    left = [times]
    make_request = provider._make_request
    request_kwargs = provider.get_request_kwargs
    on_asyncio = inspect.iscoroutinefunction(make_request)

    def _make_request(m, request_data):
        token = current.set(m)
        try:
            return make_request(m, request_data)
        finally:
            current.reset(token)

    async def _make_request_async(m, request_data):
        token = current.set(m)  # a context variable: each task sees its own request's method
        try:
            return await make_request(m, request_data)
        finally:
            current.reset(token)

    def get_request_kwargs():  # called once per attempt, resends included
        short = matches(current.get() or "", method) and left[0] > 0
        if short:
            left[0] -= 1
        kwargs = dict(request_kwargs())
        if short:
            if on_asyncio:
                from aiohttp import ClientTimeout

                kwargs["timeout"] = ClientTimeout(total=seconds)
            else:
                kwargs["timeout"] = seconds
        return kwargs

    provider._make_request = _make_request_async if on_asyncio else _make_request
    provider.get_request_kwargs = get_request_kwargs

    lean = getattr(w3, "_chainfence_lean", None)
    if lean is not None:  # the SDK's own transport carries this method: shorten it there
        lean_request = lean.request

        def request(m, params, *, timeout=None):
            if matches(m, method) and left[0] > 0:
                left[0] -= 1
                timeout = seconds
            return lean_request(m, params, timeout=timeout)

        lean.request = request


class RpcProxy:
    def __init__(self, upstream: str, *, keep_alive: bool = False):
        self.upstream = upstream
        self.connections = 0
        self.closed = 0
        self._faults: dict[str, deque[str]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.log: list[tuple[str, list, str | None]] = []
        self.completed: list[tuple[str, list]] = []
        self.down = False
        self.max_log_range: int | None = None
        self.client_version: str | None = None
        self.no_pending = False
        self.no_debug = False
        self.stalled = False
        self.held = 0
        self.holding = 0
        self._let_go = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, *args):  # quiet
                pass

            def setup(self):
                super().setup()
                with proxy._lock:
                    proxy.connections += 1

            def finish(self):
                try:
                    super().finish()
                finally:
                    try:
                        self.connection.close()
                    finally:
                        with proxy._lock:
                            proxy.closed += 1
                            proxy._changed.notify_all()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = json.loads(body)
                if isinstance(request, dict):
                    method, params = request.get("method", ""), request.get("params", [])
                else:  # a batch: one exchange, under its methods' names
                    calls = [call for call in request if isinstance(call, dict)]
                    method = "+".join(call.get("method", "") for call in calls) or "batch"
                    params = [call.get("params", []) for call in calls]
                with proxy._lock:
                    fault = "drop_request" if proxy.down else proxy._take_fault(method, not isinstance(request, dict))
                    proxy.log.append((method, params, fault))
                    if proxy.stalled and fault != "drop_request":
                        proxy.held += 1
                        proxy._changed.notify_all()
                        proxy._changed.wait_for(lambda: not proxy.stalled)
                    proxy._changed.notify_all()
                if fault == "drop_request":
                    self.close_connection = True
                    return
                reply = proxy._answer_locally(request, method, params)
                if reply is None:
                    upstream = urllib.request.Request(
                        proxy.upstream, data=body, headers={"Content-Type": "application/json"}
                    )
                    with urllib.request.urlopen(upstream, timeout=30) as response:
                        reply = response.read()
                    if isinstance(request, list) and proxy.client_version is not None:
                        reply = proxy._client_version_in_batch(request, reply)
                with proxy._lock:
                    proxy.completed.append((method, params))
                    if fault in ("reply_then_down", "drop_reply_then_down"):
                        proxy.down = True  # from the next request on, nothing gets through
                    proxy._changed.notify_all()
                if fault in ("drop_reply", "drop_reply_then_down"):
                    self.close_connection = True
                    return
                if fault == "late_reply":
                    # Wait for the client to give up (its socket reads EOF), then answer anyway.
                    select.select([self.connection], [], [], 60)
                    self.close_connection = True
                if fault == "hold_reply":
                    with proxy._lock:
                        proxy.holding += 1
                        proxy._changed.notify_all()
                    # Until the test lets go, or the client hangs up (its socket reads EOF); 60 s safety net.
                    for _ in range(3_000):
                        if proxy._let_go.is_set() or select.select([self.connection], [], [], 0.02)[0]:
                            break
                    self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                    self.wfile.flush()
                except OSError:
                    pass  # the client hung up first: that was the point
                if fault == "close_after_reply":
                    self.close_connection = True  # after a reply that promised to keep the connection

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _answer_locally(self, request, method: str, params: list) -> bytes | None:
        """The standing behaviours' answers (None: ask the node)."""
        if not isinstance(request, dict):
            return None

        def result(value):
            return json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": value}).encode()

        def error(code, message):
            return json.dumps(
                {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": code, "message": message}}
            ).encode()

        if method == "web3_clientVersion" and self.client_version is not None:
            return result(self.client_version)
        if method == "eth_getBlockByNumber" and self.no_pending and params and params[0] == "pending":
            return error(-32601, "pending block is not available")
        if self.no_debug and method.startswith("debug_"):
            return error(-32601, f"the method {method} does not exist/is not available")
        if method == "eth_getLogs" and self.max_log_range is not None and params:
            span = self._span(params[0])
            if span > self.max_log_range:
                return error(-32005, f"query exceeds max block range {self.max_log_range}, asked for {span}")
        return None

    def _client_version_in_batch(self, request: list, reply: bytes) -> bytes:
        """The node's reply to a batch, with ``client_version`` as the answer to its ``web3_clientVersion``
        (the SDK asks it with ``eth_chainId`` in one batch)."""
        asked = {
            call.get("id") for call in request if isinstance(call, dict) and call.get("method") == "web3_clientVersion"
        }
        if not asked:
            return reply
        answers = json.loads(reply)
        if not isinstance(answers, list):
            return reply
        for answer in answers:
            if isinstance(answer, dict) and answer.get("id") in asked:
                answer.pop("error", None)
                answer["result"] = self.client_version
        return json.dumps(answers).encode()

    def _span(self, filter_params: dict) -> int:
        def number(tag):
            if isinstance(tag, str) and tag.startswith("0x"):
                return int(tag, 16)
            head = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber", "params": []}).encode()
            request = urllib.request.Request(self.upstream, data=head, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                latest = int(json.loads(response.read())["result"], 16)
            return 0 if tag == "earliest" else latest

        return number(filter_params.get("toBlock", "latest")) - number(filter_params.get("fromBlock", "latest")) + 1

    def _take_fault(self, logged: str, batch: bool) -> str | None:
        """The next fault planned for a request recorded as ``logged`` (called with the lock held): planned
        under its own name first, then under a name that covers it (:func:`planned_for`)."""
        if self._faults.get(logged):
            return self._faults[logged].popleft()
        for key, planned in self._faults.items():
            if planned and planned_for(logged, batch, key):
                return planned.popleft()
        return None

    def plan(self, method: str, *faults: str) -> None:
        for fault in faults:
            if fault not in FAULTS:
                raise ValueError(fault)
        with self._lock:
            self._faults[method].extend(faults)

    def stall(self) -> None:
        """Hold every request from now on until :meth:`resume` (a node that stopped answering)."""
        with self._lock:
            self.stalled = True

    def resume(self) -> None:
        with self._lock:
            self.stalled = False
            self._changed.notify_all()

    def wait_holding(self, count: int, timeout: float = 60.0) -> None:
        """Block until ``count`` replies planned ``hold_reply`` are held (the node answered each)."""
        with self._lock:
            if not self._changed.wait_for(lambda: self.holding >= count, timeout=timeout):
                raise AssertionError(f"the proxy never held {count} replies")

    def let_go(self) -> None:
        """Write every held reply (``hold_reply``), and each one held from now on at once."""
        self._let_go.set()

    def wait_held(self, count: int, timeout: float = 60.0) -> None:
        """Block until ``count`` requests are being (or were) held by a stall."""
        with self._lock:
            if not self._changed.wait_for(lambda: self.held >= count, timeout=timeout):
                raise AssertionError(f"the proxy never held {count} requests")

    def sent(self, method: str) -> list[tuple[list, str | None]]:
        with self._lock:
            return [(params, fault) for m, params, fault in self.log if matches(m, method)]

    def wait_completed(self, method: str, count: int, timeout: float = 60.0) -> None:
        """Block until the node has answered ``count`` requests of ``method`` (fails the test otherwise)."""
        with self._lock:
            done = self._changed.wait_for(
                lambda: sum(1 for m, _ in self.completed if matches(m, method)) >= count, timeout=timeout
            )
        if not done:
            raise AssertionError(f"the node never answered {count} {method} requests")

    def wait_closed(self, count: int, timeout: float = 60.0) -> None:
        """Block until the proxy has closed ``count`` client connections."""
        with self._lock:
            if not self._changed.wait_for(lambda: self.closed >= count, timeout=timeout):
                raise AssertionError(f"the proxy never closed {count} connections")

    def completed_count(self, method: str) -> int:
        with self._lock:
            return sum(1 for m, _ in self.completed if matches(m, method))

    def __enter__(self) -> RpcProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.resume()
        self.let_go()
        self._server.shutdown()
        self._server.server_close()
