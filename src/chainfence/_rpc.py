"""Every JSON-RPC request chainfence makes goes through here; every failure comes out as a chainfence error.

One :class:`Rpc` per :class:`~chainfence.Chain`. The rest of the SDK never
touches ``web3.eth`` or a provider: it calls the methods below, which map
what can go wrong in one place (as httpx maps transport errors)::

    refused, reset, timed out           -> NodeUnreachable (a ConnectionError),
                                           with ``maybe_delivered`` for sends
    a revert (either provider's shape)  -> the contract error's class (chainfence._reverts)
    a JSON-RPC error reply              -> RpcError(method, code, message);
                                           LogRangeRefused for a capped eth_getLogs
    an embedded dev control refusing    -> InvalidInput (a bad argument), else ChainError
    anything else a library raises      -> ChainError

The embedded chain's dev controls (mine, snapshot, revert, time travel) are
eth-tester's Python methods, not JSON-RPC; they go through here too
(:meth:`Rpc.tester`), so their own exceptions are translated the same way.

Retries: web3's ``HTTPProvider`` resends a request by itself when a reply
is late, ``eth_sendRawTransaction`` included; for a fencing SDK that is a
second acquisition nobody asked for. Its retries are switched off: a read
is retried here once when the connection failed (a node restarting, a
pooled connection the node had closed), a send never is — the sender
(:mod:`chainfence._sending`) owns every resend and reconciles by hash.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from . import _reverts
from .errors import (
    ChainError,
    ChainfenceError,
    InsufficientFunds,
    InvalidInput,
    NodeUnreachable,
    NotSupported,
    RpcError,
)

logger = logging.getLogger("chainfence.rpc")

__all__ = [
    "AsyncRpc", "LogRangeRefused", "Rpc", "connect_async_http", "connect_http", "embedded_async_web3", "embedded_web3",
    "is_transport_error",
]  # fmt: skip

T = TypeVar("T")

#: Reads are tried this many times in all when the connection fails.
_READ_ATTEMPTS = 2

#: Phrases with which nodes and hosted providers refuse an eth_getLogs range or result size
#: (geth, Erigon, Alchemy, Infura, QuickNode, Ankr, BlastAPI, publicnode, anvil ...).
_LOG_RANGE_PHRASES = (
    "block range",
    "range too large",
    "range is too large",
    "exceed maximum block range",
    "exceeds max block range",
    "query returned more than",
    "log response size exceeded",
    "response size exceeded",
    "too many logs",
    "limit exceeded",
    "query timeout exceeded",
    "ranges over",
    "up to a",
    "max range",
    "maximum range",
    "too many blocks",
    "result set too large",
)


#: eth-tester's dev controls of the embedded chain (Rpc.tester), and what each does.
_TESTER_CONTROLS = {
    "mine_blocks": "mine blocks",
    "take_snapshot": "take a snapshot",
    "revert_to_snapshot": "revert to that snapshot",
    "time_travel": "move to that timestamp",
}


class LogRangeRefused(RpcError):
    """The provider refused an ``eth_getLogs`` request for its block range or result size."""


def is_transport_error(exc: BaseException) -> bool:
    """A failure to talk to the node (as opposed to an answer from it), over requests or aiohttp."""
    import aiohttp
    import requests

    return isinstance(
        exc, (requests.exceptions.RequestException, aiohttp.ClientError, ConnectionError, TimeoutError, OSError)
    )


#: What a transport failure's text says, as a few words a user can act on (the first match wins).
_TRANSPORT_REASONS = (
    ("connection refused", "connection refused: nothing listens there"),
    ("name or service not known", "host name not found"),
    ("nodename nor servname", "host name not found"),
    ("temporary failure in name resolution", "host name not found"),
    ("getaddrinfo failed", "host name not found"),
    ("timed out", "timed out"),
    ("timeout", "timed out"),
    ("connection reset", "connection reset"),
    ("remote end closed", "connection closed by the node"),
    ("server disconnected", "connection closed by the node"),
    ("ssl", "TLS handshake failed"),
    ("network is unreachable", "network unreachable"),
    ("no route to host", "no route to host"),
)


def transport_reason(exc: BaseException) -> str:
    """A transport failure in a few words ("connection refused: nothing listens there"), not urllib3's
    paragraph; the original exception stays chained as ``__cause__``."""
    texts = []
    seen: BaseException | None = exc
    while seen is not None and len(texts) < 8:  # requests wraps urllib3 wraps the socket error
        texts.append(f"{type(seen).__name__} {seen}".lower())
        seen = seen.__cause__ or seen.__context__
    text = " ".join(texts)
    for phrase, reason in _TRANSPORT_REASONS:
        if phrase in text:
            return reason
    return type(exc).__name__


def unreachable_message(url: str, exc: ChainfenceError) -> str:
    """One sentence for a node that could not be reached at connect: where, and why in a few words."""
    reason = getattr(exc, "reason", None)
    if isinstance(exc, NodeUnreachable) and reason:
        return f"no JSON-RPC node answers at {redact_url(url)} ({reason})"
    return f"no JSON-RPC node answers at {redact_url(url)}: {exc}"


def never_delivered(exc: BaseException) -> bool:
    """A transport failure that happened before the request left (refused, or no connection in time)."""
    import aiohttp
    import requests

    if isinstance(exc, (requests.exceptions.ConnectTimeout, aiohttp.ClientConnectorError)):
        return True
    text = str(exc).lower()
    return "connection refused" in text or "failed to establish a new connection" in text


def connect_http(url: str, *, timeout: float) -> Any:
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


def connect_async_http(url: str, *, timeout: float) -> Any:
    """An ``AsyncWeb3`` over HTTP(S), configured as :func:`connect_http`'s: no resends of its own,
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


def redact_url(url: str) -> str:
    """``url`` without credentials, path or query (hosted providers put API keys there)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<url>"
    return f"{parts.scheme}://{host}{port}" + ("/..." if parts.path not in ("", "/") or parts.query else "")


def embedded_web3(tester: Any) -> Any:
    """A ``Web3`` over an in-process eth-tester, one request at a time (it is not thread-safe)."""
    from web3 import Web3
    from web3.providers.eth_tester import EthereumTesterProvider

    class LockedEthereumTesterProvider(EthereumTesterProvider):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._request_lock = threading.RLock()

        def make_request(self, method, params):  # type: ignore[override]
            with self._request_lock:
                return super().make_request(method, params)

    return Web3(LockedEthereumTesterProvider(tester))


def embedded_async_web3(w3: Any) -> Any:
    """An ``AsyncWeb3`` over the eth-tester of the embedded chain ``w3`` (from :func:`embedded_web3`),
    taking the same request lock: the sync and the async view of one chain never interleave inside it."""
    from web3 import AsyncWeb3
    from web3.providers.eth_tester import AsyncEthereumTesterProvider

    lock = w3.provider._request_lock
    tester = w3.provider.ethereum_tester

    class LockedAsyncEthereumTesterProvider(AsyncEthereumTesterProvider):
        async def make_request(self, method, params):  # type: ignore[override]
            with lock:  # eth-tester answers in-process, without suspending: the lock is never held across a wait
                return await super().make_request(method, params)

        def __init__(self) -> None:  # the embedded chain's tester, not a new one of its own
            from web3.providers.async_base import AsyncBaseProvider
            from web3.providers.eth_tester.defaults import API_ENDPOINTS

            AsyncBaseProvider.__init__(self)
            self.ethereum_tester = tester
            self.api_endpoints = API_ENDPOINTS
            self._request_lock = lock

    return AsyncWeb3(LockedAsyncEthereumTesterProvider())


def _rpc_error_fields(exc: BaseException) -> tuple[int | None, str]:
    """(code, message) of a JSON-RPC error carried by a web3 exception, else (None, str(exc))."""
    response = getattr(exc, "rpc_response", None)
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        error = response["error"]
        code = error.get("code")
        return (code if isinstance(code, int) else None), str(error.get("message", ""))
    if exc.args and isinstance(exc.args[0], dict):  # older web3 shapes: ValueError({"code":..,"message":..})
        error = exc.args[0]
        code = error.get("code")
        return (code if isinstance(code, int) else None), str(error.get("message", ""))
    return None, str(exc)


def translate(
    exc: BaseException, method: str | None = None, *, resource: str | None = None, sender: str | None = None
) -> ChainfenceError:
    """The chainfence error for anything raised while talking to the chain."""
    if isinstance(exc, ChainfenceError):
        return exc
    if method in _TESTER_CONTROLS:  # in-process: no transport, no JSON-RPC reply
        from eth_tester.exceptions import ValidationError

        what = _TESTER_CONTROLS[method]
        if isinstance(exc, ValidationError):
            return InvalidInput(f"the embedded chain cannot {what}: {exc}")
        return ChainError(f"the embedded chain could not {what}: {type(exc).__name__}: {exc}")
    error = _reverts.translate(exc, resource=resource)
    if error is not None:
        return error
    if is_transport_error(exc):
        reason = transport_reason(exc)
        unreachable = NodeUnreachable(f"the node did not answer{f' {method}' if method else ''}: {reason}")
        unreachable.reason = reason
        unreachable.maybe_delivered = not never_delivered(exc)
        return unreachable
    code, message = _rpc_error_fields(exc)
    lowered = message.lower()
    if "insufficient funds" in lowered:
        who = f"{sender} " if sender else ""
        return InsufficientFunds(f"{who}cannot pay for gas: {message}", account=sender)
    from web3.exceptions import Web3RPCError

    if isinstance(exc, Web3RPCError) or code is not None:
        cls = LogRangeRefused if method == "eth_getLogs" and _is_range_refusal(code, lowered) else RpcError
        return cls(f"{method or 'request'} failed: {message}", method=method, code=code, rpc_message=message)
    return ChainError(f"{type(exc).__name__}: {exc}")


def _is_range_refusal(code: int | None, message: str) -> bool:
    return code in (-32005, -32602, -32614) or any(phrase in message for phrase in _LOG_RANGE_PHRASES)


class Rpc:
    """The JSON-RPC methods chainfence uses, each one translating its failures.

    Results are web3's (``AttributeDict`` blocks and receipts, ``HexBytes``
    hashes), so both providers look the same to the rest of the SDK.
    """

    def __init__(self, w3: Any, *, embedded: bool, tester: Any = None):
        self.w3 = w3
        self.embedded = embedded
        self._eth = w3.eth
        self._batches = not embedded  # eth-tester's provider takes no batches
        self._tester = tester  # the embedded chain's EthereumTester, for its dev controls

    # -- plumbing -------------------------------------------------------------

    def _read(self, method: str, fn: Callable[[], T], *, resource: str | None = None) -> T:
        for attempt in range(_READ_ATTEMPTS):
            try:
                return fn()
            except Exception as exc:
                if attempt + 1 < _READ_ATTEMPTS and is_transport_error(exc):
                    logger.debug("%s failed in transit (%s); retrying once", method, exc)
                    continue
                raise translate(exc, method, resource=resource) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def request(self, method: str, params: Sequence[Any]) -> Any:
        """A raw JSON-RPC request (dev-chain methods: evm_mine, evm_snapshot, ...); returns its result."""
        try:
            response = self.w3.provider.make_request(method, list(params))
        except Exception as exc:
            raise translate(exc, method) from exc
        error = response.get("error") if isinstance(response, dict) else None
        if error:
            code = error.get("code") if isinstance(error, dict) else None
            message = str(error.get("message", error)) if isinstance(error, dict) else str(error)
            raise RpcError(f"{method} failed: {message}", method=method, code=code, rpc_message=message)
        return response.get("result") if isinstance(response, dict) else response

    def tester(self, control: str, *args: Any) -> Any:
        """One of the embedded chain's dev controls (eth-tester's ``mine_blocks``, ``take_snapshot``,
        ``revert_to_snapshot``, ``time_travel``), its failures translated like a request's."""
        if self._tester is None or control not in _TESTER_CONTROLS:
            raise NotSupported(f"{control} is a dev control of the embedded chain only")
        try:
            return getattr(self._tester, control)(*args)
        except Exception as exc:
            raise translate(exc, control) from exc

    # -- the node -------------------------------------------------------------

    def chain_id(self) -> int:
        return int(self._read("eth_chainId", lambda: self._eth.chain_id))

    def client_version(self) -> str:
        return str(self._read("web3_clientVersion", lambda: self.w3.client_version))

    # -- blocks ---------------------------------------------------------------

    def block_number(self) -> int:
        return int(self._read("eth_blockNumber", lambda: self._eth.block_number))

    def block(self, block: str | int) -> Any | None:
        """The block (header fields, transaction hashes), or None if the node has none by that id."""
        from web3.exceptions import BlockNotFound

        def get() -> Any:
            try:
                return self._eth.get_block(block)
            except BlockNotFound:
                return None

        return self._read("eth_getBlockByNumber", get)

    def pending_timestamp(self) -> int | None:
        """The timestamp of the block being built, where the node offers one (anvil, eth-tester, geth)."""
        if self._tester is not None:
            # In-process: the header py-evm is building, read directly (a pending-block request
            # builds a whole block to answer; this is an attribute). The lock keeps it consistent.
            with self.w3.provider._request_lock:
                return int(self._tester.backend.chain.header.timestamp)
        try:
            pending = self.block("pending")
        except (RpcError, ChainError) as exc:
            if isinstance(exc, NodeUnreachable):
                raise
            return None  # "pending" unsupported by this node or provider
        if pending is None or pending.get("timestamp") is None:
            return None
        return int(pending["timestamp"])

    def call_and_pending_timestamp(
        self, tx: dict[str, Any], *, resource: str | None = None
    ) -> tuple[bytes, int | None]:
        """``eth_call`` at ``latest`` and the pending block's timestamp, in one round trip where the
        provider takes JSON-RPC batches (HTTP); one after the other elsewhere. The timestamp is None
        where the node offers no pending block."""
        if self._batches:
            try:
                with self.w3.batch_requests() as batch:
                    batch.add(self._eth.call(tx, "latest"))
                    batch.add(self._eth.get_block("pending"))
                    result, pending = batch.execute()
                timestamp = pending.get("timestamp") if isinstance(pending, dict) or hasattr(pending, "get") else None
                return bytes(result), (int(timestamp) if timestamp is not None else None)
            except Exception as exc:
                if is_transport_error(exc):
                    raise translate(exc, "eth_call", resource=resource) from exc
                # A node or provider that refuses batches, or one of the two requests: ask one at a time
                # (which raises the right error, if there is one) and do not batch again.
                logger.debug("batched eth_call + pending block failed (%s); not batching again", exc)
                self._batches = False
        return self.call(tx, "latest", resource=resource), self.pending_timestamp()

    # -- state ----------------------------------------------------------------

    def call(self, tx: dict[str, Any], block: str | int = "latest", *, resource: str | None = None) -> bytes:
        """``eth_call``; a revert raises the contract error's class."""
        return bytes(self._read("eth_call", lambda: self._eth.call(tx, block_identifier=block), resource=resource))

    def estimate_gas(self, tx: dict[str, Any], block: str | int, *, resource: str | None = None) -> int:
        try:
            return int(self._eth.estimate_gas(tx, block_identifier=block))
        except Exception as exc:
            raise translate(exc, "eth_estimateGas", resource=resource, sender=tx.get("from")) from exc

    def code(self, address: str, block: str | int = "latest") -> bytes:
        return bytes(self._read("eth_getCode", lambda: self._eth.get_code(address, block_identifier=block)))

    def nonce(self, address: str, block: str | int = "pending") -> int:
        return int(self._read("eth_getTransactionCount", lambda: self._eth.get_transaction_count(address, block)))

    def logs(self, filter_params: dict[str, Any]) -> list[Any]:
        """``eth_getLogs``; a provider's range or size limit raises :class:`LogRangeRefused`."""
        return list(self._read("eth_getLogs", lambda: self._eth.get_logs(filter_params)))

    # -- transactions ---------------------------------------------------------

    def send_raw(self, raw: bytes, *, sender: str | None = None) -> None:
        """``eth_sendRawTransaction``, exactly once: never retried here (see the module docstring)."""
        try:
            self._eth.send_raw_transaction(raw)
        except Exception as exc:
            raise translate(exc, "eth_sendRawTransaction", sender=sender) from exc

    def transaction(self, tx_hash: str) -> Any | None:
        """The transaction (pending or mined), or None if the node does not know it."""
        from web3.exceptions import TransactionNotFound

        def get() -> Any:
            try:
                return self._eth.get_transaction(tx_hash)
            except TransactionNotFound:
                return None

        return self._read("eth_getTransactionByHash", get)

    def receipt(self, tx_hash: str) -> Any | None:
        """The receipt of a mined transaction, or None (pending, unknown, or reorganised out)."""
        from web3.exceptions import TransactionNotFound

        def get() -> Any:
            try:
                return self._eth.get_transaction_receipt(tx_hash)
            except TransactionNotFound:
                return None

        return self._read("eth_getTransactionReceipt", get)

    # -- fees -----------------------------------------------------------------

    def gas_price(self) -> int:
        return int(self._read("eth_gasPrice", lambda: self._eth.gas_price))

    def max_priority_fee(self) -> int | None:
        """The node's suggested tip, or None where it has no eth_maxPriorityFeePerGas."""
        try:
            return int(self._read("eth_maxPriorityFeePerGas", lambda: self._eth.max_priority_fee))
        except NodeUnreachable:
            raise
        except ChainError:
            return None


class AsyncRpc:
    """:class:`Rpc` for ``AsyncWeb3``: the same methods (awaitable), the same translation
    (:func:`translate`), the same retry rule (a read once more after a transport failure, a send
    never). The core (:mod:`chainfence._effects`) calls whichever of the two its driver holds.

    Dev controls (``request``, ``tester``) are the sync layer's only: tests and tools move a dev
    chain through a :class:`~chainfence.Chain`.
    """

    def __init__(self, w3: Any, *, embedded: bool, tester: Any = None):
        self.w3 = w3
        self.embedded = embedded
        self._eth = w3.eth
        self._batches = not embedded
        self._tester = tester

    @classmethod
    def twin_of(cls, rpc: Rpc, *, timeout: float) -> AsyncRpc:
        """The asyncio layer to the node ``rpc`` talks to: the same URL, or the same in-process eth-tester."""
        if rpc._tester is not None:
            return cls(embedded_async_web3(rpc.w3), embedded=True, tester=rpc._tester)
        url = getattr(rpc.w3.provider, "endpoint_uri", None)
        if not url:
            raise NotSupported("an asyncio view needs a chain connected over HTTP (Chain.connect) or the embedded one")
        return cls(connect_async_http(str(url), timeout=timeout), embedded=False)

    async def _read(self, method: str, fn: Callable[[], Any], *, resource: str | None = None) -> Any:
        for attempt in range(_READ_ATTEMPTS):
            try:
                return await fn()
            except Exception as exc:
                if attempt + 1 < _READ_ATTEMPTS and is_transport_error(exc):
                    logger.debug("%s failed in transit (%s); retrying once", method, exc)
                    continue
                raise translate(exc, method, resource=resource) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        """Close the provider's HTTP session (none for the embedded chain)."""
        disconnect = getattr(self.w3.provider, "disconnect", None)
        if disconnect is not None:
            try:
                await disconnect()
            except Exception as exc:  # closing a session that is gone already
                logger.debug("closing the provider failed: %s", exc)

    async def chain_id(self) -> int:
        return int(await self._read("eth_chainId", lambda: self._eth.chain_id))

    async def client_version(self) -> str:
        return str(await self._read("web3_clientVersion", lambda: self.w3.client_version))

    async def block_number(self) -> int:
        return int(await self._read("eth_blockNumber", lambda: self._eth.block_number))

    async def block(self, block: str | int) -> Any | None:
        from web3.exceptions import BlockNotFound

        async def get() -> Any:
            try:
                return await self._eth.get_block(block)
            except BlockNotFound:
                return None

        return await self._read("eth_getBlockByNumber", get)

    async def pending_timestamp(self) -> int | None:
        if self._tester is not None:  # in-process, as Rpc.pending_timestamp reads it
            with self.w3.provider._request_lock:
                return int(self._tester.backend.chain.header.timestamp)
        try:
            pending = await self.block("pending")
        except (RpcError, ChainError) as exc:
            if isinstance(exc, NodeUnreachable):
                raise
            return None
        if pending is None or pending.get("timestamp") is None:
            return None
        return int(pending["timestamp"])

    async def call_and_pending_timestamp(
        self, tx: dict[str, Any], *, resource: str | None = None
    ) -> tuple[bytes, int | None]:
        if self._batches:
            try:
                async with self.w3.batch_requests() as batch:
                    batch.add(self._eth.call(tx, "latest"))
                    batch.add(self._eth.get_block("pending"))
                    result, pending = await batch.async_execute()
                timestamp = pending.get("timestamp") if isinstance(pending, dict) or hasattr(pending, "get") else None
                return bytes(result), (int(timestamp) if timestamp is not None else None)
            except Exception as exc:
                if is_transport_error(exc):
                    raise translate(exc, "eth_call", resource=resource) from exc
                logger.debug("batched eth_call + pending block failed (%s); not batching again", exc)
                self._batches = False
        return await self.call(tx, "latest", resource=resource), await self.pending_timestamp()

    async def call(self, tx: dict[str, Any], block: str | int = "latest", *, resource: str | None = None) -> bytes:
        return bytes(
            await self._read("eth_call", lambda: self._eth.call(tx, block_identifier=block), resource=resource)
        )

    async def estimate_gas(self, tx: dict[str, Any], block: str | int, *, resource: str | None = None) -> int:
        try:
            return int(await self._eth.estimate_gas(tx, block_identifier=block))
        except Exception as exc:
            raise translate(exc, "eth_estimateGas", resource=resource, sender=tx.get("from")) from exc

    async def code(self, address: str, block: str | int = "latest") -> bytes:
        return bytes(await self._read("eth_getCode", lambda: self._eth.get_code(address, block_identifier=block)))

    async def nonce(self, address: str, block: str | int = "pending") -> int:
        return int(
            await self._read("eth_getTransactionCount", lambda: self._eth.get_transaction_count(address, block))
        )

    async def logs(self, filter_params: dict[str, Any]) -> list[Any]:
        return list(await self._read("eth_getLogs", lambda: self._eth.get_logs(filter_params)))

    async def send_raw(self, raw: bytes, *, sender: str | None = None) -> None:
        """``eth_sendRawTransaction``, exactly once (see the module docstring)."""
        try:
            await self._eth.send_raw_transaction(raw)
        except Exception as exc:
            raise translate(exc, "eth_sendRawTransaction", sender=sender) from exc

    async def transaction(self, tx_hash: str) -> Any | None:
        from web3.exceptions import TransactionNotFound

        async def get() -> Any:
            try:
                return await self._eth.get_transaction(tx_hash)
            except TransactionNotFound:
                return None

        return await self._read("eth_getTransactionByHash", get)

    async def receipt(self, tx_hash: str) -> Any | None:
        from web3.exceptions import TransactionNotFound

        async def get() -> Any:
            try:
                return await self._eth.get_transaction_receipt(tx_hash)
            except TransactionNotFound:
                return None

        return await self._read("eth_getTransactionReceipt", get)

    async def gas_price(self) -> int:
        return int(await self._read("eth_gasPrice", lambda: self._eth.gas_price))

    async def max_priority_fee(self) -> int | None:
        try:
            return int(await self._read("eth_maxPriorityFeePerGas", lambda: self._eth.max_priority_fee))
        except NodeUnreachable:
            raise
        except ChainError:
            return None
