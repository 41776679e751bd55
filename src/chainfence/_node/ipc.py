"""JSON-RPC over a node's IPC endpoint (a Unix socket), without web3 in the way.

A node on the same machine (``anvil --ipc PATH``, geth, reth) answers on a
Unix socket what it answers over HTTP, without the HTTP: on the development
machine a request that took 0.21 to 0.33 ms over a kept-alive HTTP connection
took 0.09 to 0.22 ms over anvil's socket, in the same run
(``docs/benchmarks/history.md``, "What each lever bought").
:meth:`Chain.connect <chainfence.Chain.connect>` takes the socket's path
(``/tmp/anvil.ipc``, anything ending in ``.ipc``) where it takes a URL.

Framing: a request is one JSON object (or a batch: one array) followed by a
newline; the node answers each with one JSON value on a line of its own. One
request is on a connection at a time (a node may answer several requests of
one connection in any order), so a thread takes an idle connection or opens
one, as :class:`~chainfence._node.lean_http.LeanHttp` does.

What a failure means is what it means over HTTP
(:mod:`chainfence._node.transports`): no connection could be made (no socket
at the path, nobody listening: nothing left) is
:class:`~chainfence._node.transports.NotDelivered`; a connection that breaks
or times out once the request may have been written is a ``ConnectionError``,
``TimeoutError`` or ``OSError`` (maybe delivered: the sender reconciles by
hash). An idle connection the node closed is noticed before it is reused (a
readable socket). It never resends, and a connection that failed is never
used again (a late reply would otherwise answer the next request). Every reply is
read within bounds (:mod:`chainfence._node.replies`): ``max_reply`` bytes, all of
it by the request's timeout, nested and numbered as JSON-RPC is.
"""

from __future__ import annotations

import io
import json
import os
import select
import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    reply_result,
)

if TYPE_CHECKING:  # asyncio is imported by the asyncio transport's methods, not with this module; socket by
    # the method that opens a connection (a command over HTTP, the CLI's usual, needs none: importing
    # socket builds its enums and loads selectors: docs/explanation/design.md)
    import asyncio
    import socket

__all__ = ["AsyncLeanIpc", "LeanIpc", "is_ipc_path"]


def is_ipc_path(value: str) -> bool:
    """Whether ``value`` names an IPC socket rather than a URL: a path ending in ``.ipc`` (``/tmp/anvil.ipc``,
    ``./node/anvil.ipc``), as ``cast --rpc-url`` reads one."""
    return "://" not in value and value.endswith(".ipc")


class LeanIpc(Transport):
    """JSON-RPC over a Unix socket: one request per connection at a time, connections kept open.

    Thread-safe, never resends (see the module docstring for what it raises).
    """

    def __init__(self, path: str, *, timeout: float, max_reply: int = MAX_REPLY_BYTES):
        import socket

        if not hasattr(socket, "AF_UNIX"):
            raise ValueError("IPC needs Unix sockets, which this platform lacks: connect over http:// instead")
        self.path = os.fspath(path)
        self.timeout = timeout
        self.max_reply = max_reply
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1 << 62))
        weakref.finalize(self, _close_all, self._idle)

    @property
    def url(self) -> str:
        """The socket's path (what errors and reports name the node by)."""
        return self.path

    def _connect(self) -> _Connection:
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.path)
        except OSError as exc:
            sock.close()
            raise NotDelivered(f"failed to connect to the IPC socket {self.path}: {exc}") from exc
        return _Connection(sock)

    def _take(self) -> _Connection:
        """An open connection: an idle one the node has not closed, or a new one (NotDelivered if none)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect()
            try:
                # An idle connection is readable only if the node closed it (or sent something unasked):
                # either way it cannot carry a request.
                if not select.select([conn.sock], [], [], 0)[0]:
                    return conn
            except (OSError, ValueError):
                pass
            conn.close()

    overlaps = True

    def exchange(self, body: Any, *, timeout: float | None = None, meanwhile: Meanwhile | None = None) -> Any:
        """Write ``body`` (a request object or a batch) and return the node's decoded reply, all of it within
        the transport's timeout (or ``timeout``, for this one exchange); ``meanwhile`` runs once it is
        written."""
        payload = json.dumps(body, separators=(",", ":")).encode() + b"\n"
        wanted = body.get("id") if isinstance(body, dict) else None
        limit = reply_limit(self.max_reply, len(body) if isinstance(body, list) else 1)
        conn = self._take()
        try:
            conn.receiving.expect(timeout=self.timeout if timeout is None else timeout, limit=limit)
            conn.sock.sendall(payload)
            if meanwhile is not None:
                meanwhile()
            reply = conn.read_reply(wanted, limit)
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._idle.append(conn)
        return reply

    def request(
        self, method: str, params: Sequence[Any], *, timeout: float | None = None, meanwhile: Meanwhile | None = None
    ) -> Any:
        """One JSON-RPC request; its result, or :class:`~chainfence._node.transports.ErrorReply`."""
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": list(params)}
        return reply_result(method, self.exchange(body, timeout=timeout, meanwhile=meanwhile))

    def batch(self, calls: Sequence[BatchCall], *, meanwhile: Meanwhile | None = None) -> list[Any]:
        """Several requests in one round trip; their replies in order (read each with
        :func:`~chainfence._node.transports.reply_result`)."""
        body = _batch_body(calls, [next(self._ids) for _ in calls])
        return _batch_replies(calls, body, self.exchange(body, meanwhile=meanwhile))

    def asyncio_twin(self, *, timeout: float) -> AsyncTransport:
        """:class:`AsyncLeanIpc` to the same socket."""
        return AsyncLeanIpc(self.path, timeout=timeout, max_reply=self.max_reply)

    def close(self) -> None:
        """Close the idle connections (a later request opens a new one)."""
        with self._lock:
            idle = list(self._idle)
            self._idle.clear()
        _close_all(idle)


class _Connection:
    """One connection to the socket and a buffered reader of its replies."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.receiving = Receiving(sock)
        self.reader = io.BufferedReader(self.receiving)

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()

    def read_reply(self, wanted: Any, limit: int) -> Any:
        """The next reply the node writes to request ``wanted`` (a notification, or a reply to another
        id, is skipped), of at most ``limit`` bytes (what is skipped counts too)."""
        while True:
            reply = self._value(limit)
            if _answers(reply, wanted):
                return reply

    def _value(self, limit: int) -> Any:
        """One complete JSON value (nodes write one value a line; a value written over several lines is
        read until it parses)."""
        data = b""
        while True:
            line: bytes = self.reader.readline(limit - len(data) + 1)
            if not line.endswith(b"\n"):
                if len(data) + len(line) > limit:
                    raise ReplyRefused(f"the node's reply is longer than {limit} bytes", too_long=True)
                raise ConnectionError(
                    "the node closed the connection in the middle of its reply"
                    if data or line
                    else "the node closed the connection without a reply"
                )
            data += line
            if not data.strip():
                data = b""
                continue
            if data.lstrip()[:1] not in (b"{", b"["):
                raise ConnectionError("the node's reply is not JSON-RPC")
            try:
                return parse(data)
            except ReplyRefused:
                raise
            except ValueError:
                continue  # not the whole value yet


def _answers(reply: Any, wanted: Any) -> bool:
    """Whether ``reply`` answers the request whose id is ``wanted`` (None: a batch, answered by a list or
    by one error object). A subscription's notification (a ``method``, no ``id``) answers nothing; an
    error with a null id answers the request that could not be read."""
    if not isinstance(reply, dict) or wanted is None:
        return True
    if "method" in reply and "id" not in reply:
        return False
    return reply.get("id") in (wanted, None)


def _batch_body(calls: Sequence[BatchCall], ids: list[int]) -> list[dict[str, Any]]:
    return [
        {"jsonrpc": "2.0", "id": ident, "method": method, "params": list(params)}
        for ident, (method, params) in zip(ids, calls, strict=True)
    ]


def _batch_replies(calls: Sequence[BatchCall], body: list[dict[str, Any]], reply: Any) -> list[Any]:
    if not isinstance(reply, list):
        raise ErrorReply(calls[0][0], reply if isinstance(reply, dict) else {"error": {"message": str(reply)}})
    by_id = {item.get("id"): item for item in reply if isinstance(item, dict)}
    return [by_id.get(request["id"], {}) for request in body]


def _close_all(connections: list[_Connection]) -> None:
    while connections:
        try:
            connections.pop().close()
        except (OSError, IndexError):
            pass


class AsyncLeanIpc(AsyncTransport):
    """:class:`LeanIpc` for asyncio: the same framing and the same failures, one request per connection
    at a time; connections belong to the event loop that opened them."""

    def __init__(self, path: str, *, timeout: float, max_reply: int = MAX_REPLY_BYTES):
        self.path = os.fspath(path)
        self.timeout = timeout
        self.max_reply = max_reply
        self._idle: list[tuple[asyncio.AbstractEventLoop, asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._ids = iter(range(1, 1 << 62))

    async def _take(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        import asyncio

        loop = asyncio.get_running_loop()
        while self._idle:
            owner, reader, writer = self._idle.pop()
            if owner is not loop:
                continue  # another event loop's: not usable here (left to that loop, or the collector)
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()  # the node closed it
        try:
            return await asyncio.wait_for(
                asyncio.open_unix_connection(self.path, limit=self.max_reply), timeout=self.timeout
            )
        except (TimeoutError, OSError) as exc:
            raise NotDelivered(f"failed to connect to the IPC socket {self.path}: {exc}") from exc

    overlaps = True

    async def exchange(self, body: Any, *, meanwhile: Meanwhile | None = None) -> Any:
        import asyncio

        payload = json.dumps(body, separators=(",", ":")).encode() + b"\n"
        wanted = body.get("id") if isinstance(body, dict) else None
        limit = reply_limit(self.max_reply, len(body) if isinstance(body, list) else 1)
        reader, writer = await self._take()
        try:
            writer.write(payload)  # on its way now: an idle socket's transport writes at once
            if meanwhile is not None:
                meanwhile()
            # One deadline for the whole reply (wait_for), however the node paces its bytes.
            reply = await asyncio.wait_for(self._drain_and_read(reader, writer, wanted, limit), timeout=self.timeout)
        except BaseException:
            writer.close()
            raise
        self._idle.append((asyncio.get_running_loop(), reader, writer))
        return reply

    @classmethod
    async def _drain_and_read(
        cls, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wanted: Any, limit: int
    ) -> Any:
        await writer.drain()
        return await cls._read(reader, wanted, limit)

    @staticmethod
    async def _read(reader: asyncio.StreamReader, wanted: Any, limit: int) -> Any:
        """The reply to ``wanted``: at most ``limit`` bytes, what is skipped counted too, read a line at a
        time, each line at most the stream's own limit (the transport's ``max_reply``: a batch's reply,
        one line, too)."""
        import asyncio

        data = b""
        read = 0
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                raise ConnectionError(
                    "the node closed the connection in the middle of its reply"
                    if data or exc.partial
                    else "the node closed the connection without a reply"
                ) from exc
            except asyncio.LimitOverrunError as exc:  # a line longer than the stream takes (max_reply)
                raise ReplyRefused(f"the node's reply is longer than {exc.consumed} bytes", too_long=True) from exc
            read += len(line)
            if read > limit:
                raise ReplyRefused(f"the node's reply is longer than {limit} bytes", too_long=True)
            data += line
            if not data.strip():
                data = b""
                continue
            if data.lstrip()[:1] not in (b"{", b"["):
                raise ConnectionError("the node's reply is not JSON-RPC")
            try:
                reply = parse(data)
            except ReplyRefused:
                raise
            except ValueError:
                continue
            if _answers(reply, wanted):
                return reply
            data = b""

    async def request(self, method: str, params: Sequence[Any], *, meanwhile: Meanwhile | None = None) -> Any:
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": list(params)}
        return reply_result(method, await self.exchange(body, meanwhile=meanwhile))

    async def batch(self, calls: Sequence[BatchCall], *, meanwhile: Meanwhile | None = None) -> list[Any]:
        body = _batch_body(calls, [next(self._ids) for _ in calls])
        return _batch_replies(calls, body, await self.exchange(body, meanwhile=meanwhile))

    async def close(self) -> None:
        """Close the idle connections of this event loop (a later request opens new ones)."""
        idle, self._idle = self._idle, []
        for _owner, _reader, writer in idle:
            writer.close()
