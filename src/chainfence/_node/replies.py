"""A node's reply, read within bounds: its size, its time to the last byte, its nesting, its numbers' width.

Every transport the SDK reads replies with (:class:`~chainfence._node.lean_http.LeanHttp`,
:class:`~chainfence._node.ipc.LeanIpc` and its asyncio twin, and the web3 providers
:mod:`~chainfence._node.web3_providers` builds) reads them through here; what a provider sends is
refused, typed (:class:`~chainfence._node.transports.ReplyRefused`, a ``ConnectionError``: the
request went out, no usable answer came back), before it can cost more than its bounds:

- **size**: at most ``max_reply`` bytes (default :data:`~chainfence._core.limits.MAX_REPLY_BYTES`; a batch:
  that much per request in it). A longer reply is refused as soon as it is known to be longer (its
  Content-Length, or the byte past the bound): the rest is never read, the connection is closed.
- **time**: the whole reply by one deadline (:class:`Receiving`), not a timeout per read: a provider
  that sends a byte now and then is cut off at the request's timeout, however long it would go on.
- **nesting**: at most :data:`~chainfence._core.limits.MAX_REPLY_DEPTH` arrays and objects deep, checked
  (:func:`check_depth`) without recursion before ``json`` parses the reply. CPython's parser recurses
  once per level up to the recursion limit, and py_ecc (which web3 and eth_account import) raises
  that limit to 100,000: a reply nested 100,000 deep then overflowed the C stack (SIGSEGV) in any
  process that had imported them, ``chainfence verify --proven`` included (issue 25).
- **number width**: a JSON integer of more than :data:`~chainfence._core.limits.MAX_REPLY_INT_DIGITS` digits
  is refused (wider than any field a node answers; Python turns one of more than 4,300 digits back
  into text only with a ``ValueError``). Hex quantities are bounded where each is read
  (:func:`chainfence._node.formats.quantity`).
"""

from __future__ import annotations

import io
import json
import re
import time
from typing import Any

from .._core.limits import MAX_REPLY_BYTES, MAX_REPLY_DEPTH, MAX_REPLY_INT_DIGITS
from .transports import ReplyRefused

__all__ = ["HEAD_ALLOWANCE", "MAX_REPLY_BYTES", "Receiving", "check_depth", "parse", "reply_limit"]

#: Bytes a reply may carry beyond its body (an HTTP status line and headers, chunk sizes, trailers).
HEAD_ALLOWANCE = 64 * 1024

#: An escape in a JSON string (``\\"``, ``\\\\``, ``\\n`` ...), taken out before strings are found.
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
#: Every byte but the four brackets and the quote (bytes.translate deletes them).
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')


def reply_limit(max_reply: int, requests: int = 1) -> int:
    """The longest reply to ``requests`` requests sent at once (a batch), at ``max_reply`` bytes each."""
    return max_reply * max(1, requests)


def check_depth(data: bytes, limit: int = MAX_REPLY_DEPTH) -> None:
    """Refuse ``data`` (JSON, or the start of it) nesting more than ``limit`` arrays and objects deep, or
    whose brackets cannot pair up, without recursing however deep it nests.

    Its strings dropped (escapes first; then, the quotes and brackets kept, what lies between a pair of
    quotes), the brackets left are peeled: each pass removes every innermost ``[]`` and ``{}``, one
    level of nesting. A reply with no more than ``limit`` brackets in all is let through at once (a
    header, a proof); one nesting deeper would need more passes than ``limit``. What is left once no
    pass removes anything is the brackets a prefix of JSON has not closed yet (a reply read a line at
    a time) or, if any closes, brackets that can never pair: refused. A page of 5,000 logs is checked
    in a fifth of the time ``json`` takes to parse it."""
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)  # no escaped quote left: every quote opens or closes a string
    kept = data.translate(None, _NOT_STRUCTURE)
    if len(kept) - kept.count(b'"') <= limit:
        return
    nesting = kept.replace(b'""', b"")  # JSON-RPC's strings (hex) hold no bracket: each is "" here
    if b'"' in nesting:  # some string holds brackets: what lies between its quotes is no nesting
        nesting = b"".join(kept.split(b'"')[::2])
    passes = 0
    while nesting and passes <= limit:
        peeled = nesting.replace(b"[]", b"").replace(b"{}", b"")
        if len(peeled) == len(nesting):
            break
        nesting, passes = peeled, passes + 1
    if passes + len(nesting) > limit:
        raise ReplyRefused(f"the reply is nested deeper than {limit} levels")
    if nesting.strip(b"[{"):
        raise ReplyRefused("the reply's brackets do not pair up")


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_REPLY_INT_DIGITS:
        raise ReplyRefused(f"the reply holds an integer of {len(text)} digits (at most {MAX_REPLY_INT_DIGITS})")
    return int(text)


_DECODER = json.JSONDecoder(parse_int=_integer)


def parse(data: bytes | str, *, depth: int = MAX_REPLY_DEPTH) -> Any:
    """``data`` decoded as JSON once :func:`check_depth` let it through; its integers bounded.
    :class:`~chainfence._node.transports.ReplyRefused` for one out of bounds, ``ValueError`` for one that
    is not JSON (or not UTF-8), as ``json.loads``."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    check_depth(raw, depth)
    text = data if isinstance(data, str) else data.decode("utf-8")
    return _DECODER.decode(text)


class Receiving(io.RawIOBase):
    """The receiving side of a socket (``_socket``, ``socket`` or ``ssl``) as a raw stream, what a
    ``BufferedReader`` reads a reply through, bounded per reply:

    - ``deadline`` (``time.monotonic()`` seconds, or None): every read waits only until then, so the
      reply's last byte comes by it or the read raises ``TimeoutError``; the stream is unusable after a
      timeout, as ``socket.SocketIO`` is;
    - ``budget`` (bytes, or None): what may still be read for this reply; past it the read raises
      :class:`~chainfence._node.transports.ReplyRefused`.

    :meth:`expect` sets both before a request's reply is read."""

    def __init__(self, sock: Any):
        self._sock = sock
        self._timed_out = False
        self.deadline: float | None = None
        self.budget: int | None = None
        self._timeout: float | None = sock.gettimeout()

    def expect(self, *, timeout: float, limit: int) -> None:
        """The next reply: all of it within ``timeout`` seconds from now, at most ``limit`` bytes of body
        (the socket's own timeout, per read, is ``timeout`` again: a deadline may have lowered it)."""
        if self._timeout != timeout:
            self._sock.settimeout(timeout)
            self._timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.budget = limit + HEAD_ALLOWANCE

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._timed_out:
            raise OSError("cannot read from timed out object")
        if self.budget is not None and self.budget <= 0:
            raise ReplyRefused("the reply is longer than its bound", too_long=True)
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self._timed_out = True
                raise TimeoutError("timed out before the reply's last byte")
            # The socket's timeout is lowered to what is left (a system call): only once that is shorter
            # by 1%, so a reply read at once costs none, and the last read ends at most 1% late.
            if self._timeout is None or left < 0.99 * self._timeout:
                self._sock.settimeout(left)
                self._timeout = left
        try:
            count = int(self._sock.recv_into(buffer))
        except TimeoutError:
            self._timed_out = True
            raise
        if self.budget is not None:
            self.budget -= count
        return count

    def fileno(self) -> int:
        return int(self._sock.fileno())
