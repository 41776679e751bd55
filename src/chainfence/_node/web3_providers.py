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

web3 is imported when a provider is built or wrapped, never when this module is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .transports import AsyncTransport, BatchCall, ErrorReply, Transport, reply_result

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

    provider = Web3.HTTPProvider(
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

    return Web3(Web3.IPCProvider(path, timeout=max(1, round(timeout))))  # whole seconds


def connect_async_http(url: str, *, timeout: float) -> Any:
    """An ``AsyncWeb3`` over HTTP(S), configured as :func:`http_web3`'s: no resends of its own,
    only the chain id cached."""
    from aiohttp import ClientTimeout
    from web3 import AsyncWeb3

    provider = AsyncWeb3.AsyncHTTPProvider(
        url,
        request_kwargs={"timeout": ClientTimeout(total=timeout)},
        exception_retry_configuration=None,
        cache_allowed_requests=True,
        cacheable_requests={"eth_chainId"},
        request_cache_validation_threshold=None,
    )
    return AsyncWeb3(provider)
