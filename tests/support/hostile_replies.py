"""Replies no honest node sends, for a provider to answer with: nested too deep, too large, trickled, or none.

A :class:`~tests.support.lying_proxy.LyingProxy` handler returns one in place of a result::

    deep = Deep(100_000)
    liar.on("eth_getBlockByNumber", lambda params, forward: deep)       # [[[[...]]]] 100,000 deep
    liar.on("eth_getBlockByNumber", lambda params, forward: Huge(200 << 20))   # a 200 MB reply
    liar.on("eth_getBlockByNumber", lambda params, forward: Trickle())  # a byte now and then, forever
    liar.on("eth_getBlockByNumber", lambda params, forward: silent)     # nothing, until the client hangs up

:class:`ReplyServer` serves the same replies on a Unix socket (newline-framed JSON-RPC, as a node's IPC
endpoint) or over HTTP without a node behind it, for transport tests.

Each reply object counts what happened to it, for tests to sequence on events rather than on a clock:
``started`` (replies begun), ``gone`` (replies whose client hung up before the end), ``sent`` (bytes
written); ``wait(predicate)`` waits until a predicate of the object holds. A :class:`Silent` reply
holds until the client hangs up or the test calls ``release()``; a :class:`Trickle` without a body
writes a space every ``every`` seconds (whitespace a JSON reader must keep reading) until the client
hangs up. That pace is the attacker's behaviour, not a synchronisation: nothing waits on it.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.scratch import socket_path

#: A safety net: no reply holds or trickles longer than this, whatever the client does.
SAFETY_NET = 120.0


class Raw:
    """A reply written piece by piece (``pieces``), ``every`` seconds apart."""

    every = 0.0
    #: The reply's length in bytes when known in advance (an HTTP Content-Length), else None (chunked).
    length: int | None = None

    def __init__(self) -> None:
        self.started = 0
        self.gone = 0
        self.sent = 0
        self._released = threading.Event()
        self._cond = threading.Condition()

    def pieces(self, request_id: Any) -> Iterator[bytes]:
        raise NotImplementedError

    def size(self, request_id: Any) -> int | None:
        return self.length

    # -- what the tests see ------------------------------------------------------------

    def release(self) -> None:
        """Let every held reply end (its connection is closed without an answer)."""
        self._released.set()
        with self._cond:
            self._cond.notify_all()

    def wait(self, predicate: Callable[[Raw], bool], timeout: float = 60.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self), timeout=timeout):
                raise AssertionError(f"{type(self).__name__}: still not so after {timeout} s")

    def _count(self, **changes: int) -> None:
        with self._cond:
            for name, delta in changes.items():
                setattr(self, name, getattr(self, name) + delta)
            self._cond.notify_all()

    # -- writing -----------------------------------------------------------------------

    def write(self, sock: socket.socket, request_id: Any, frame: Callable[[bytes], bytes] = bytes) -> bool:
        """Write the reply's pieces to ``sock`` (each through ``frame``); False if the client hung up first."""
        self._count(started=1)
        deadline = time.monotonic() + SAFETY_NET
        first = True
        for piece in self.pieces(request_id):
            if not first and self.every and _client_gone(sock, min(self.every, deadline - time.monotonic())):
                self._count(gone=1)
                return False
            first = False
            if self._released.is_set() or time.monotonic() > deadline:
                return False
            try:
                sock.sendall(frame(piece))
            except OSError:
                self._count(gone=1)
                return False
            self._count(sent=len(piece))
        return True


def _client_gone(sock: socket.socket, wait: float) -> bool:
    """Whether the client closed its end within ``wait`` seconds (its socket reads EOF)."""
    try:
        readable, _, _ = select.select([sock], [], [], max(wait, 0.0))
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _head(request_id: Any) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":'


class Deep(Raw):
    """A result of ``depth`` nested arrays: ``[[[...]]]``."""

    def __init__(self, depth: int):
        super().__init__()
        self.depth = depth

    def body(self, request_id: Any) -> bytes:
        return _head(request_id) + b"[" * self.depth + b"]" * self.depth + b"}"

    def pieces(self, request_id: Any) -> Iterator[bytes]:
        yield self.body(request_id)

    def size(self, request_id: Any) -> int | None:
        return len(self.body(request_id))


class Body(Raw):
    """These bytes as the reply (``{id}`` in them replaced by the request's id)."""

    def __init__(self, data: bytes):
        super().__init__()
        self.data = data

    def body(self, request_id: Any) -> bytes:
        return self.data.replace(b"{id}", json.dumps(request_id).encode())

    def pieces(self, request_id: Any) -> Iterator[bytes]:
        yield self.body(request_id)

    def size(self, request_id: Any) -> int | None:
        return len(self.body(request_id))


class Huge(Raw):
    """A well-formed reply of ``size`` bytes (a result string of zeros), written 1 MiB at a time. With
    ``announce=False`` over HTTP, sent chunked (no Content-Length to refuse it by)."""

    _PIECE = b"0" * (1 << 20)

    def __init__(self, size: int, *, announce: bool = True):
        super().__init__()
        self.total = size
        self.announce = announce

    def size(self, request_id: Any) -> int | None:
        return self.total if self.announce else None

    def pieces(self, request_id: Any) -> Iterator[bytes]:
        head = _head(request_id) + b'"0x'
        tail = b'"}'
        left = self.total - len(head) - len(tail)
        yield head
        while left > 0:
            piece = self._PIECE if left >= len(self._PIECE) else self._PIECE[:left]
            left -= len(piece)
            yield piece
        yield tail


class Trickle(Raw):
    """A byte every ``every`` seconds: of ``body`` (a whole reply, ``{id}`` replaced), or, without one, a
    space forever (until the client hangs up)."""

    def __init__(self, *, every: float = 0.05, body: bytes | None = None):
        super().__init__()
        self.every = every
        self.data = body

    def size(self, request_id: Any) -> int | None:
        return None if self.data is None else len(self._body(request_id))

    def _body(self, request_id: Any) -> bytes:
        assert self.data is not None
        return self.data.replace(b"{id}", json.dumps(request_id).encode())

    def pieces(self, request_id: Any) -> Iterator[bytes]:
        if self.data is None:
            while True:
                yield b" "
        else:
            body = self._body(request_id)
            for i in range(len(body)):
                yield body[i : i + 1]


class Silent(Raw):
    """No reply at all: the request is held until the client hangs up or the test calls ``release()``."""

    def write(self, sock: socket.socket, request_id: Any, frame: Callable[[bytes], bytes] = bytes) -> bool:
        self._count(started=1)
        deadline = time.monotonic() + SAFETY_NET
        while not self._released.is_set() and time.monotonic() < deadline:
            if _client_gone(sock, 0.05):
                self._count(gone=1)
                return False
        return False

    def pieces(self, request_id: Any) -> Iterator[bytes]:
        return iter(())

    @property
    def holding(self) -> int:
        return self.started - self.gone


def write_http(raw: Raw, sock: socket.socket, request_id: Any) -> bool:
    """``raw`` as an HTTP/1.1 200 reply on ``sock``: with a Content-Length when its size is known,
    else chunked. False if the client hung up before the end (the connection is then unusable)."""
    size = raw.size(request_id)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    if size is not None:
        head += b"Content-Length: " + str(size).encode() + b"\r\n\r\n"
        frame: Callable[[bytes], bytes] = bytes
    else:
        head += b"Transfer-Encoding: chunked\r\n\r\n"

        def frame(piece: bytes) -> bytes:
            return f"{len(piece):x}\r\n".encode() + piece + b"\r\n"

    if isinstance(raw, Silent):
        return raw.write(sock, request_id)
    try:
        sock.sendall(head)
    except OSError:
        return False
    done = raw.write(sock, request_id, frame)
    if done and size is None:
        try:
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            return False
    return done


class ReplyServer:
    """A server without a node behind it that answers every request with ``reply(request)`` (a :class:`Raw`
    or a JSON-RPC result): over a Unix socket (``kind="ipc"``, newline-framed, as a node's IPC endpoint)
    or over HTTP (``kind="http"``). ``address`` is the socket's path or the URL."""

    def __init__(self, reply: Callable[[dict[str, Any]], Any], *, kind: str = "ipc"):
        self.reply = reply
        self.kind = kind
        if kind == "ipc":
            self.address = socket_path("replies", "replies.ipc")
            self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._server.bind(self.address)
        else:
            self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._server.bind(("127.0.0.1", 0))
            self.address = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._server.listen(16)
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            while True:
                request = self._read(reader)
                if request is None:
                    return
                answer = self.reply(request)
                if not isinstance(answer, Raw):
                    answer = Body(b'{"jsonrpc":"2.0","id":{id},"result":' + json.dumps(answer).encode() + b"}")
                if self.kind == "ipc":
                    if not answer.write(conn, request.get("id")) or isinstance(answer, Silent):
                        return
                    conn.sendall(b"\n")
                elif not write_http(answer, conn, request.get("id")) or isinstance(answer, Silent):
                    return
        except OSError:
            return
        finally:
            reader.close()
            conn.close()

    def _read(self, reader: Any) -> dict[str, Any] | None:
        if self.kind == "ipc":
            line = reader.readline()
            return json.loads(line) if line.strip() else None
        length = None
        line = reader.readline()
        if not line:
            return None
        while True:
            line = reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return json.loads(reader.read(length or 0))

    def __enter__(self) -> ReplyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.close()
