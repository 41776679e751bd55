"""A JSON-RPC proxy on 127.0.0.1 that loses requests or replies on cue, for fault tests.

    with RpcProxy(anvil.url) as proxy:
        chain = Chain.connect(proxy.url, ...)
        proxy.plan("eth_sendRawTransaction", "drop_reply")   # forward it, then hang up
        proxy.plan("eth_sendRawTransaction", "drop_request") # hang up without forwarding

Each planned fault applies to the next request of that method, once, in the
order planned. Every request is recorded (method, fault) so tests can assert
what the SDK did, such as "it resent identical bytes" or "it never signed a
second acquisition".
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RpcProxy:
    def __init__(self, upstream: str):
        self.upstream = upstream
        self._faults: dict[str, deque[str]] = defaultdict(deque)
        self._lock = threading.Lock()
        self.log: list[tuple[str, list, str | None]] = []
        self.down = False
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = json.loads(body)
                method = request.get("method", "") if isinstance(request, dict) else "batch"
                params = request.get("params", []) if isinstance(request, dict) else []
                with proxy._lock:
                    fault = "drop_request" if proxy.down else (
                        proxy._faults[method].popleft() if proxy._faults[method] else None
                    )
                    proxy.log.append((method, params, fault))
                if fault == "drop_request":
                    self.close_connection = True
                    return
                upstream = urllib.request.Request(
                    proxy.upstream, data=body, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(upstream, timeout=30) as response:
                    reply = response.read()
                if fault == "drop_reply":
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def plan(self, method: str, *faults: str) -> None:
        for fault in faults:
            if fault not in ("drop_reply", "drop_request"):
                raise ValueError(fault)
        with self._lock:
            self._faults[method].extend(faults)

    def sent(self, method: str) -> list[tuple[list, str | None]]:
        with self._lock:
            return [(params, fault) for m, params, fault in self.log if m == method]

    def __enter__(self) -> RpcProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
