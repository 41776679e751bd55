"""JSON-RPC over HTTP(S) on persistent connections, without web3 in the way: the SDK's own transport.

Over a URL (:meth:`Chain.connect <chainfence.Chain.connect>`) every request goes
through :class:`LeanHttp`: plain JSON-RPC on persistent sockets, one per thread
in flight, no web3 formatters or middleware on the way (they cost more than
anvil takes to mine; ``docs/benchmarks/history.md``, "Against etcd: acquire and
release latency"), and no web3 import. Its failures
carry what happened to the request: refused or not connected
(:class:`~chainfence._node.transports.NotDelivered`: nothing left) or broken after
the bytes went out (``ConnectionError``/``TimeoutError``/``OSError``: maybe
delivered, and the sender reconciles by hash). An idle connection the node has
closed is noticed before it is reused (a readable socket), so it costs a
reconnect, never a doubt. It never resends. Every reply is read within bounds
(:mod:`chainfence._node.replies`): ``max_reply`` bytes, all of it by the request's
timeout, nested and numbered as JSON-RPC is.
"""

from __future__ import annotations

import io
import json
import select
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from .._core.limits import MAX_REPLY_BYTES
from .replies import Receiving, parse, reply_limit
from .transports import (
    AsyncTransport,
    BatchCall,
    ErrorReply,
    Meanwhile,
    NotDelivered,
    ReplyRefused,
    Transport,
    redact_url,
    reply_result,
)
from .web3_providers import AsyncProviderTransport, connect_async_http, http_web3

__all__ = ["LeanHttp"]


class LeanHttp(Transport):
    """JSON-RPC over HTTP(S) on persistent connections, without web3 in the way.

    Thread-safe: a thread takes an idle connection (or opens one), sends one
    request, reads the reply, and puts the connection back. Never resends.
    Raises :class:`~chainfence._node.transports.NotDelivered` when no connection
    could be made (nothing was sent), ``ConnectionError``/``TimeoutError``/``OSError``
    when the exchange broke after the request may have left (``TimeoutError`` too when the reply's last
    byte did not come within ``timeout``), :class:`~chainfence._node.transports.ReplyRefused` for a reply
    out of bounds (longer than ``max_reply`` bytes, a batch's that much per request; nested too deep; an
    integer too wide), and :class:`~chainfence._node.transports.ErrorReply` for a JSON-RPC error reply.
    """

    def __init__(self, url: str, *, timeout: float, max_reply: int = MAX_REPLY_BYTES):
        from .urls import split

        parts = split(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {redact_url(url)}")
        self.url = url
        self.timeout = timeout
        self.max_reply = max_reply
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        headers = [
            f"POST {self._path} HTTP/1.1",
            f"Host: {host}{f':{parts.port}' if parts.port else ''}",
            "Content-Type: application/json",
            "Accept: application/json",
            "Connection: keep-alive",
        ]
        if parts.username is not None:
            import base64  # here: a URL with credentials is the rare one
            from urllib.parse import unquote

            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            headers.append("Authorization: Basic " + base64.b64encode(credentials).decode())
        self._head = ("\r\n".join(headers) + "\r\nContent-Length: ").encode("latin-1")
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1 << 62))
        self._w3: Any = None
        # Idle connections are closed when this transport is dropped (no socket left to the collector).
        weakref.finalize(self, _close_all, self._idle)

    @property
    def w3(self) -> Any:
        """A ``Web3`` to the same URL (:func:`~chainfence._node.web3_providers.http_web3`: its provider never
        resends), carrying this transport as ``_chainfence_lean``; built the first time it is asked for,
        since importing web3 costs more than a CLI command may take (docs/explanation/design.md)."""
        if self._w3 is None:
            w3 = http_web3(self.url, timeout=self.timeout)
            w3._chainfence_lean = self
            self._w3 = w3
        return self._w3

    @w3.setter
    def w3(self, value: Any) -> None:
        self._w3 = value

    def _connect(self) -> Any:
        port = self._port or (443 if self._https else 80)
        if self._https:
            import socket
            import ssl

            sock = socket.create_connection((self._host, port), timeout=self.timeout)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self._host)
            except BaseException:
                sock.close()
                raise
            return _Connection(sock)
        return _Connection(_plain_connection(self._host, port, self.timeout))

    def _take(self) -> Any:
        """An open connection: an idle one the node has not closed, or a new one (NotDelivered if none)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            try:
                # An idle keep-alive connection is readable only if the node closed it (or sent
                # something unasked): either way it cannot carry a request.
                if not select.select([conn], [], [], 0)[0]:
                    return conn
            except (OSError, ValueError):
                pass
            conn.close()
        try:
            return self._connect()
        except OSError as exc:
            raise NotDelivered(f"failed to establish a new connection to {redact_url(self.url)}: {exc}") from exc

    overlaps = True

    def exchange(self, body: Any, *, timeout: float | None = None, meanwhile: Meanwhile | None = None) -> Any:
        """POST ``body`` (a request object or a batch) and return the decoded reply, all of it within the
        transport's timeout (or ``timeout``, for this one exchange: tests make one request give up early);
        ``meanwhile`` runs once it is written."""
        payload = json.dumps(body, separators=(",", ":")).encode()
        # Head and body in one write (http.client writes them apart: two segments per request).
        message = self._head + str(len(payload)).encode() + b"\r\n\r\n" + payload
        limit = reply_limit(self.max_reply, len(body) if isinstance(body, list) else 1)
        conn = self._take()
        try:
            conn.receiving.expect(timeout=self.timeout if timeout is None else timeout, limit=limit)
            conn.sock.sendall(message)
            if meanwhile is not None:
                meanwhile()
            status, reason, will_close, data = conn.read_response(limit)
        except BaseException:
            conn.close()
            raise
        if will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        try:
            reply = parse(data)
        except ReplyRefused:
            raise
        except ValueError:
            reply = None
        if status != 200 and not (isinstance(reply, dict) and reply.get("error") is not None):
            # A proxy's or a provider's refusal (429, 502 ...), as web3's provider treats it: no answer.
            raise ConnectionError(f"the node answered HTTP {status} {reason}")
        if reply is None:
            raise ConnectionError(f"the node answered HTTP {status} with a body that is not JSON")
        return reply

    def request(
        self, method: str, params: Sequence[Any], *, timeout: float | None = None, meanwhile: Meanwhile | None = None
    ) -> Any:
        """One JSON-RPC request; its result, or :class:`ErrorReply` for an error reply. ``timeout``
        replaces the transport's for this one request (tests make one request give up early)."""
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": list(params)}
        reply = self.exchange(body, timeout=timeout, meanwhile=meanwhile)
        return reply_result(method, reply)

    def batch(self, calls: Sequence[BatchCall], *, meanwhile: Meanwhile | None = None) -> list[Any]:
        """Several JSON-RPC requests in one round trip; their replies in order (read each with
        :func:`~chainfence._node.transports.reply_result`). A node that refuses batches raises
        :class:`ErrorReply`."""
        first = next(self._ids)
        for _ in calls[1:]:
            next(self._ids)
        body = [
            {"jsonrpc": "2.0", "id": first + i, "method": method, "params": list(params)}
            for i, (method, params) in enumerate(calls)
        ]
        reply = self.exchange(body, meanwhile=meanwhile)
        if not isinstance(reply, list):
            raise ErrorReply(calls[0][0], reply if isinstance(reply, dict) else {"error": {"message": str(reply)}})
        by_id = {item.get("id"): item for item in reply if isinstance(item, dict)}
        return [by_id.get(first + i, {}) for i in range(len(calls))]

    def asyncio_twin(self, *, timeout: float) -> AsyncTransport:
        """web3's ``AsyncHTTPProvider`` to the same URL (:func:`~chainfence._node.web3_providers.connect_async_http`)."""
        return AsyncProviderTransport.of(connect_async_http(self.url, timeout=timeout))

    def close(self) -> None:
        """Close the idle connections (a later request opens a new one)."""
        with self._lock:
            idle = list(self._idle)
            self._idle.clear()
        _close_all(idle)


def _close_all(connections: list[Any]) -> None:
    while connections:
        try:
            connections.pop().close()
        except (OSError, IndexError):
            pass


def _plain_connection(host: str, port: int, timeout: float) -> Any:
    """A TCP connection to ``host:port`` (no delay), as ``socket.create_connection`` makes one: each address
    ``getaddrinfo`` gives, in turn, until one connects; else the last error.

    Built on ``_socket``, the module ``socket`` wraps: importing ``socket`` converts its constants into
    enums and loads ``selectors``, 4% of a whole ``chainfence status`` (docs/explanation/design.md). HTTPS still goes
    through ``socket`` (``ssl`` wraps a ``socket.socket``)."""
    import _socket

    error: OSError | None = None
    # An ASCII name as bytes: getaddrinfo encodes a str with the idna codec, whose import (stringprep,
    # unicodedata) cost more than the connection; an ASCII name is the same either way.
    name = host.encode("ascii") if host.isascii() else host
    for family, kind, proto, _name, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            return sock
        except BaseException as exc:
            sock.close()
            if not isinstance(exc, OSError):
                raise
            error = exc
    raise error if error is not None else OSError(f"getaddrinfo gave no address for {host}")


class _Connection:
    """One keep-alive HTTP/1.1 connection: the socket and a buffered reader of its replies.

    Replies are parsed here (status line, headers, a Content-Length or chunked
    body): ``http.client`` parses headers with the ``email`` package, a quarter
    of a millisecond a reply. A reply that breaks off raises ``ConnectionError``
    (the request went out: the caller may not resend blindly).
    """

    def __init__(self, sock: Any):
        self.sock = sock
        self.receiving = Receiving(sock)
        self.reader = io.BufferedReader(self.receiving)

    def fileno(self) -> int:
        return int(self.sock.fileno())

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()

    def _line(self) -> bytes:
        line: bytes = self.reader.readline(65537)
        if not line.endswith(b"\n"):
            raise ConnectionError(
                "the node closed the connection in the middle of its reply"
                if line
                else "the node closed the connection without a reply"
            )
        return line

    def read_response(self, limit: int = MAX_REPLY_BYTES) -> tuple[int, str, bool, bytes]:
        """(status, reason, whether the node closes the connection after it, body): a body of at most
        ``limit`` bytes (:class:`~chainfence._node.transports.ReplyRefused` as soon as it is known to be
        longer: the rest is not read). Headers, interim replies and trailers count against the
        reader's budget (:class:`~chainfence._node.replies.Receiving`)."""
        while True:
            version, _, rest = self._line().decode("latin-1").strip().partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/") or not (len(code) == 3 and code.isascii() and code.isdigit()):
                raise ConnectionError(f"the node's reply is not HTTP: {version[:40]!r}")
            headers: dict[str, str] = {}
            while True:
                line = self._line()
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            status = int(code)
            if 100 <= status < 200:
                continue  # an interim reply (100 Continue): the real one follows
            break
        connection = headers.get("connection", "").lower()
        will_close = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            total = 0
            while True:
                size = _length(self._line().split(b";")[0].strip() or b"0", 16)
                total += size
                if total > limit:
                    raise ReplyRefused(f"the node's reply is longer than {limit} bytes", too_long=True)
                if size == 0:
                    while self._line() not in (b"\r\n", b"\n"):
                        pass  # trailers
                    break
                chunks.append(self._exactly(size))
                self._line()
            return status, reason, will_close, b"".join(chunks)
        length = headers.get("content-length")
        if length is None:
            data: bytes = self.reader.read(limit + 1)
            if len(data) > limit:
                raise ReplyRefused(f"the node's reply is longer than {limit} bytes", too_long=True)
            return status, reason, True, data
        size = _length(length.encode("latin-1"), 10)
        if size > limit:
            raise ReplyRefused(f"the node's reply is {size} bytes, longer than {limit}", too_long=True)
        return status, reason, will_close, self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        data: bytes = self.reader.read(size)
        if len(data) != size:
            raise ConnectionError(f"the node's reply broke off after {len(data)} of {size} bytes")
        return data


def _length(text: bytes, base: int) -> int:
    """A Content-Length or a chunk's size (hex): digits only, a few of them (``int`` would take 4,300)."""
    digits = text.strip()
    if not digits or len(digits) > 16 or not digits.isalnum():
        raise ConnectionError(f"the node's reply states no length: {digits[:40]!r}")
    try:
        return int(digits, base)
    except ValueError:
        raise ConnectionError(f"the node's reply states no length: {digits[:40]!r}") from None
