"""An IPC socket (a Unix socket speaking newline-delimited JSON-RPC, as anvil's ``--ipc``) in front of a
node's HTTP endpoint, that misbehaves on cue: the IPC twin of tests/support/rpc_proxy.py.

    with IpcProxy(anvil.url) as proxy:
        chain = Chain.connect(proxy.path, ...)
        proxy.plan("eth_sendRawTransaction", "drop_reply")     # forward it, then hang up without the reply
        proxy.plan("eth_sendRawTransaction", "drop_request")   # hang up without forwarding
        proxy.plan("eth_blockNumber", "close_after_reply")     # answer, then close the connection

Connections stay open between requests, as a node's do; ``close_after_reply``
is a node closing an idle connection (``wait_closed(n)`` waits until the
proxy has closed ``n``). Each planned fault applies to the next request of
that method, once, in the order planned; names match as the HTTP proxy's do
(tests/support/rpc_proxy.py: a batch under its methods joined by ``+``,
``eth_sendRawTransactionSync`` under ``eth_sendRawTransaction`` too).
Every request is recorded in ``log`` (method, params, fault) on arrival and
in ``completed`` once the node answered it.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from collections import defaultdict, deque
from pathlib import Path

from tests.support.rpc_proxy import matches, planned_for
from tests.support.scratch import socket_path

FAULTS = ("drop_reply", "drop_request", "close_after_reply")


class IpcProxy:
    def __init__(self, upstream: str):
        self.upstream = upstream
        self.path = socket_path("proxy", "proxy.ipc")
        self.connections = 0
        self.closed = 0
        self.log: list[tuple[str, list, str | None]] = []
        self.completed: list[tuple[str, list]] = []
        self._faults: dict[str, deque[str]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(16)
        self._stopping = False
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self._stopping:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            while True:
                line = reader.readline()
                if not line:
                    return
                if not line.strip():
                    continue
                request = json.loads(line)
                if isinstance(request, dict):
                    method, params = request.get("method", ""), request.get("params", [])
                else:
                    method = "+".join(call.get("method", "") for call in request)
                    params = [call.get("params", []) for call in request]
                with self._lock:
                    fault = self._take_fault(method, not isinstance(request, dict))
                    self.log.append((method, params, fault))
                    self._changed.notify_all()
                if fault == "drop_request":
                    return
                upstream = urllib.request.Request(
                    self.upstream, data=line.strip(), headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(upstream, timeout=30) as response:
                    reply = response.read()
                with self._lock:
                    self.completed.append((method, params))
                    self._changed.notify_all()
                if fault == "drop_reply":
                    return
                conn.sendall(reply.strip() + b"\n")
                if fault == "close_after_reply":
                    return
        except OSError:
            return
        finally:
            reader.close()
            conn.close()
            with self._lock:
                self.closed += 1
                self._changed.notify_all()

    def _take_fault(self, logged: str, batch: bool) -> str | None:
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

    def sent(self, method: str) -> list[tuple[list, str | None]]:
        with self._lock:
            return [(params, fault) for m, params, fault in self.log if matches(m, method)]

    def wait_closed(self, count: int, timeout: float = 60.0) -> None:
        """Block until the proxy has closed ``count`` client connections."""
        with self._lock:
            if not self._changed.wait_for(lambda: self.closed >= count, timeout=timeout):
                raise AssertionError(f"the proxy never closed {count} connections")

    def __enter__(self) -> IpcProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping = True
        self._server.close()
        Path(self.path).unlink(missing_ok=True)
