"""web3's providers as transports, and the providers the SDK builds for itself.

:class:`ProviderTransport` (and :class:`AsyncProviderTransport` for asyncio)
carries JSON-RPC over any web3 provider (HTTP, IPC, the provider of a ``Web3``
the caller built): the provider's own ``make_request``, which sends the
request and decodes the reply, and nothing of web3's formatters or middleware.

The providers built here never resend a request by themselves: web3's
``HTTPProvider`` resends when a reply is late, ``eth_sendRawTransaction``
included; for a fencing SDK that is a second acquisition nobody asked for. A
read is retried once by :mod:`chainfence._node.rpc`, a send never: the sender
(:mod:`chainfence._node.sending`) owns every resend and reconciles by hash.

The providers built here read replies within the bounds of :mod:`chainfence._node.replies`:
every one is parsed without recursing into its depth, its integers bounded (web3's own parser
recurses as deep as a reply nests: in a process where py_ecc raised the recursion limit to
100,000, a reply nested that deep crashed it). The asyncio HTTP provider, which carries the SDK's
asyncio requests, also reads at most ``max_reply`` bytes (a batch: that much per request) and all of
them within the request's timeout (aiohttp's total timeout covers the body). The blocking HTTP and IPC
providers carry no request of the SDK's (:class:`~chainfence._node.lean_http.LeanHttp` and
:class:`~chainfence._node.ipc.LeanIpc` do), only what a caller asks of ``chain.w3``.

web3 is imported when a provider is built or wrapped, never when this module is.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from .._core.limits import MAX_REPLY_BYTES
from .replies import parse, reply_limit
from .transports import AsyncTransport, BatchCall, ErrorReply, ReplyRefused, Transport, reply_result

__all__ = ["AsyncProviderTransport", "ProviderTransport", "connect_async_http", "http_web3", "ipc_web3"]


class ProviderTransport(Transport):
    """JSON-RPC over a web3 provider (HTTP, IPC, any ``BaseProvider``)."""

    def __init__(self, provider: Any, *, w3: Any = None):
        self.provider = provider
        self.w3 = w3
        self.batches = callable(getattr(provider, "make_batch_request", None))

    @classmethod
    def of(cls, w3: Any) -> ProviderTransport:
        """The transport over ``w3``'s provider."""
        return cls(w3.provider, w3=w3)

    def request(self, method: str, params: Sequence[Any]) -> Any:
        return reply_result(method, self.provider.make_request(method, list(params)))

    def batch(self, calls: Sequence[BatchCall]) -> list[Any]:
        return _batch_replies(
            calls, self.provider.make_batch_request([(method, list(params)) for method, params in calls])
        )

    def asyncio_twin(self, *, timeout: float) -> AsyncTransport:
        """web3's ``AsyncHTTPProvider`` to the same URL (an HTTP provider's only)."""
        url = getattr(self.provider, "endpoint_uri", None)
        if not url:
            return super().asyncio_twin(timeout=timeout)
        return AsyncProviderTransport.of(connect_async_http(str(url), timeout=timeout))


class AsyncProviderTransport(AsyncTransport):
    """JSON-RPC over a web3 asyncio provider (``AsyncHTTPProvider``, ``AsyncIPCProvider`` ...)."""

    def __init__(self, provider: Any, *, w3: Any = None):
        self.provider = provider
        self.w3 = w3
        self.batches = callable(getattr(provider, "make_batch_request", None))

    @classmethod
    def of(cls, w3: Any) -> AsyncProviderTransport:
        """The transport over ``w3``'s provider."""
        return cls(w3.provider, w3=w3)

    async def request(self, method: str, params: Sequence[Any]) -> Any:
        return reply_result(method, await self.provider.make_request(method, list(params)))

    async def batch(self, calls: Sequence[BatchCall]) -> list[Any]:
        replies = await self.provider.make_batch_request([(method, list(params)) for method, params in calls])
        return _batch_replies(calls, replies)

    async def close(self) -> None:
        """Close the provider's HTTP session (a later request opens a new one)."""
        disconnect = getattr(self.provider, "disconnect", None)
        if disconnect is None:
            return
        try:
            await disconnect()
        except Exception:  # closing a session that is gone already
            pass


def _batch_replies(calls: Sequence[BatchCall], replies: Any) -> list[Any]:
    """web3's batch answer (the replies sorted by id, or one error object for a refused batch) in order."""
    if not isinstance(replies, list) or len(replies) != len(calls):
        refusal = replies if isinstance(replies, dict) else {"error": {"message": f"no batch reply: {replies!r:.200}"}}
        raise ErrorReply(calls[0][0], refusal)
    return list(replies)


def http_web3(url: str, *, timeout: float) -> Any:
    """A ``Web3`` over HTTP(S) whose provider never resends a request by itself, and caches only the
    chain id (web3's default cache also keeps blocks by number, which a reorg or a dev node's
    rollback can replace)."""
    from web3 import Web3

    provider = _bounded(Web3.HTTPProvider)(
        url,
        request_kwargs={"timeout": timeout},
        exception_retry_configuration=None,
        # web3 asks eth_chainId before every estimate and call; the answer cannot change under a
        # connection that was checked at connect.
        cache_allowed_requests=True,
        cacheable_requests={"eth_chainId"},
        request_cache_validation_threshold=None,
    )
    return Web3(provider)


def ipc_web3(path: str, *, timeout: float) -> Any:
    """A ``Web3`` over web3's ``IPCProvider`` to the node's socket at ``path`` (for anything the SDK does not
    wrap; the SDK's own requests go through :class:`~chainfence._node.ipc.LeanIpc`)."""
    from web3 import Web3

    return Web3(_bounded(Web3.IPCProvider)(path, timeout=max(1, round(timeout))))  # whole seconds


def connect_async_http(url: str, *, timeout: float, max_reply: int = MAX_REPLY_BYTES) -> Any:
    """An ``AsyncWeb3`` over HTTP(S), configured as :func:`http_web3`'s: no resends of its own,
    only the chain id cached; every reply within bounds (see the module docstring)."""
    from aiohttp import ClientTimeout
    from web3 import AsyncWeb3

    provider = _bounded_async_http()(
        url,
        request_kwargs={"timeout": ClientTimeout(total=timeout)},
        exception_retry_configuration=None,
        cache_allowed_requests=True,
        cacheable_requests={"eth_chainId"},
        request_cache_validation_threshold=None,
    )
    provider.max_reply = max_reply
    return AsyncWeb3(provider)


@functools.cache
def _bounded(provider_class: type) -> type:
    """``provider_class`` parsing its replies as :func:`~chainfence._node.replies.parse` does."""
    return type(provider_class.__name__, (provider_class,), {"decode_rpc_response": staticmethod(parse)})


@functools.cache
def _bounded_async_http() -> type:
    """web3's ``AsyncHTTPProvider``, each reply read within bounds (see the module docstring)."""
    from web3 import AsyncWeb3

    class AsyncHTTPProvider(_bounded(AsyncWeb3.AsyncHTTPProvider)):  # type: ignore[misc]
        max_reply = MAX_REPLY_BYTES

        async def _post(self, data: bytes, limit: int) -> bytes:
            manager = self._request_session_manager
            response = await manager.async_get_response_from_post_request(
                self.endpoint_uri, data=data, **self.get_request_kwargs()
            )
            try:
                response.raise_for_status()
                if response.content_length is not None and response.content_length > limit:
                    raise ReplyRefused(
                        f"the node's reply is {response.content_length} bytes, longer than {limit}", too_long=True
                    )
                body = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > limit:
                        raise ReplyRefused(f"the node's reply is longer than {limit} bytes", too_long=True)
            except BaseException:
                response.close()  # the rest unread: the connection is not reused
                raise
            response.release()
            return bytes(body)

        async def _make_request(self, method: Any, request_data: bytes) -> bytes:
            return await self._post(request_data, self.max_reply)

        async def make_batch_request(self, batch_requests: list[tuple[Any, Any]]) -> Any:
            data = self.encode_batch_rpc_request(batch_requests)
            replies = self.decode_rpc_response(await self._post(data, reply_limit(self.max_reply, len(batch_requests))))
            if not isinstance(replies, list) or not all(
                isinstance(r, dict) and r.get("id") is not None for r in replies
            ):
                return replies  # one error object for the batch (or replies the caller refuses)
            return sorted(replies, key=lambda reply: reply["id"])

    return AsyncHTTPProvider
