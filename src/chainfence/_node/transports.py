"""The one way the node layer reaches a node: a transport (as httpx's ``BaseTransport``).

A transport carries JSON-RPC and nothing else: ``request(method, params)``
returns the node's result as the node sent it (JSON: hex strings; the
in-process chain answers with eth-tester's shapes), ``batch(calls)`` returns
the replies of several requests sent in one round trip. It never resends,
never formats a result and never maps an error: what a result means is
:mod:`chainfence._node.formats`'s business, which failure is which
:mod:`chainfence._node.failures`'s, and when to ask again
:mod:`chainfence._node.rpc`'s. What a transport raises:

    the node answered with a JSON-RPC error        -> ErrorReply (method, code, message, the reply)
    no connection could be made (nothing was sent) -> NotDelivered (a ConnectionError)
    the exchange broke after the request went out  -> ConnectionError, TimeoutError, OSError,
                                                      or the HTTP library's own transport errors
    a reply out of bounds (too long, too late, too -> ReplyRefused (a ConnectionError), or TimeoutError
    deep, an integer too wide)                        past the deadline (:mod:`chainfence._node.replies`)

The transports (each in its own module):

- :class:`~chainfence._node.lean_http.LeanHttp`: JSON-RPC over HTTP(S) on persistent
  connections, no web3 on the way (what :meth:`Chain.connect <chainfence.Chain.connect>` uses
  for a URL);
- :class:`~chainfence._node.ipc.LeanIpc`: the same over a node's IPC socket (what
  :meth:`Chain.connect <chainfence.Chain.connect>` uses for a path ending in ``.ipc``);
- :class:`~chainfence._node.web3_providers.ProviderTransport` and its asyncio twin: any
  web3 provider (HTTP, IPC, a ``Web3`` the caller built);
- :class:`~chainfence._node.embedded.EmbeddedTransport` and its asyncio twin: the in-process
  eth-tester chain, which also has dev controls and a header being built (:meth:`in_process`).

Each has an asyncio twin (:meth:`Transport.asyncio_twin`) to the same node, for
:class:`~chainfence._node.rpc.AsyncRpc`.

A transport that ``overlaps`` (the lean ones: over IPC, over HTTP, and asyncio's IPC) takes
``meanwhile=`` in :meth:`~Transport.request` and :meth:`~Transport.batch`: a callable it runs once the
request is written and before it reads the reply, so that work that needs the node's answer only
afterwards is done while the node works (the sender signs a transaction while its preflight runs,
:mod:`chainfence._node.sending`). It must not raise (what it does is its own business); the others
never run it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import NotSupported

__all__ = [
    "AsyncTransport",
    "ErrorReply",
    "Meanwhile",
    "NotDelivered",
    "ReplyRefused",
    "Transport",
    "redact_url",
    "reply_result",
]

#: One request of a batch: (method, params).
BatchCall = tuple[str, Sequence[Any]]

#: Work run while a request is on its way (see the module docstring): takes nothing, returns nothing.
Meanwhile = Callable[[], None]


def redact_url(url: str) -> str:
    """``url`` as errors and reports may name a node: scheme, host and port only (hosted providers put
    API keys in the path or query; ``user:password`` would show too). An IPC socket's path is shown
    whole: it names a file on this machine, no secret."""
    from .urls import split

    if "://" not in url and url.endswith(".ipc"):
        return url

    try:
        parts = split(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<url>"
    return f"{parts.scheme}://{host}{port}" + ("/..." if parts.path not in ("", "/") or parts.query else "")


class NotDelivered(ConnectionError):
    """The request never left: no connection to the node could be made (nothing was sent)."""


class ReplyRefused(ConnectionError):
    """The node's reply was refused unread or unparsed: longer than its bound, nested too deep, or holding
    an integer too wide (:mod:`chainfence._node.replies`). The request went out (maybe delivered, as any
    exchange that broke after it left); no usable answer came back, and asking again would get the same.
    ``too_long``: refused for its length (a smaller question may be answered: a narrower log range)."""

    def __init__(self, message: str, *, too_long: bool = False):
        super().__init__(message)
        self.too_long = too_long


class ErrorReply(Exception):
    """The node answered ``method`` with a JSON-RPC error object.

    ``rpc_response`` is the reply (``{"error": {"code", "message", "data"}}``), the shape
    :mod:`chainfence._node.reverts` reads revert data from; ``code`` is None when the
    node gave none.
    """

    def __init__(self, method: str, reply: dict[str, Any]):
        error = reply.get("error")
        if not isinstance(error, dict):
            error = {"message": str(error)}
        code = error.get("code")
        self.method = method
        self.code: int | None = code if isinstance(code, int) and not isinstance(code, bool) else None
        self.message = str(error.get("message", error))
        self.rpc_response: dict[str, Any] = {**reply, "error": error}
        super().__init__(f"{method}: {self.message}")


def reply_result(method: str, reply: Any) -> Any:
    """The result of one JSON-RPC reply; :class:`ErrorReply` for an error reply, ``ConnectionError``
    for something that is not a JSON-RPC reply at all (no answer to act on)."""
    if not isinstance(reply, dict):
        raise ConnectionError(f"the node's reply to {method} is not a JSON-RPC response")
    if reply.get("error") is not None:
        raise ErrorReply(method, reply)
    if "result" not in reply:
        raise ConnectionError(f"the node's reply to {method} has neither a result nor an error")
    return reply["result"]


class Transport(ABC):
    """A blocking way to one node."""

    #: Whether the node answers in process (the embedded chain): no batches, no pending estimates,
    #: dev controls through :meth:`in_process`.
    embedded: bool = False
    #: Whether :meth:`batch` may be tried (a node can still refuse one: the caller then stops batching).
    batches: bool = True
    #: The ``Web3`` this transport was taken from, if any (for tests and tools; the layer never uses it).
    w3: Any = None
    #: Whether :meth:`request` and :meth:`batch` take ``meanwhile=`` (see the module docstring).
    overlaps: bool = False

    @abstractmethod
    def request(self, method: str, params: Sequence[Any]) -> Any:
        """One JSON-RPC request; its result (see the module docstring for what it raises)."""

    def batch(self, calls: Sequence[BatchCall]) -> list[Any]:
        """Several requests in one round trip; their replies in order (read each with :func:`reply_result`).
        A node that refuses the batch as a whole raises :class:`ErrorReply`."""
        raise NotSupported("this transport sends no batches")

    def in_process(self, name: str, *args: Any) -> Any:
        """One of the in-process chain's own operations (dev controls, the header being built)."""
        raise NotSupported(f"{name} is a control of the embedded chain only")

    def asyncio_twin(self, *, timeout: float) -> AsyncTransport:
        """A transport to the same node for asyncio (``timeout``: seconds per request over a network)."""
        raise NotSupported("an asyncio view needs a chain connected over HTTP (Chain.connect) or the embedded one")

    def close(self) -> None:
        """Close what the transport keeps open (a later request opens it again); nothing by default."""
        return None


class AsyncTransport(ABC):
    """:class:`Transport` for asyncio: the same methods, awaited."""

    embedded: bool = False
    batches: bool = True
    w3: Any = None
    overlaps: bool = False

    @abstractmethod
    async def request(self, method: str, params: Sequence[Any]) -> Any:
        """One JSON-RPC request; its result."""

    async def batch(self, calls: Sequence[BatchCall]) -> list[Any]:
        raise NotSupported("this transport sends no batches")

    async def in_process(self, name: str, *args: Any) -> Any:
        raise NotSupported(f"{name} is a control of the embedded chain only")

    async def close(self) -> None:
        """Close what the transport keeps open (an HTTP session); nothing by default."""
        return None
