"""Every JSON-RPC request chainfence makes goes through here; every failure comes out as a chainfence error.

One :class:`Rpc` per :class:`~chainfence.Chain`. The rest of the SDK never
touches ``web3.eth`` or a provider: it calls the methods below, which map
what can go wrong in one place (as httpx maps transport errors)::

    refused, reset, timed out           -> NodeUnreachable (a ConnectionError),
                                           with ``maybe_delivered`` for sends
    a revert (either provider's shape)  -> the contract error's class (chainfence._node.reverts)
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
(:mod:`chainfence._node.sending`) owns every resend and reconciles by hash.

Transport: over a URL (:func:`connect_http`) the hot requests (``eth_call``,
``eth_estimateGas``, ``eth_sendRawTransaction``, receipts, nonces, blocks)
go through :class:`LeanHttp`: plain JSON-RPC on persistent ``http.client``
connections, one per thread in flight, no web3 formatters or middleware on
the way (they cost more than anvil takes to mine; ``docs/benchmarks.md``).
Its failures carry what happened to the request: refused or not connected
(``failed to establish a new connection``: nothing left, ``maybe_delivered``
False) or broken after the bytes went out (``maybe_delivered`` True, and the
sender reconciles by hash). An idle connection the node has closed is
noticed before it is reused (a readable socket), so it costs a reconnect,
never a doubt. A ``Web3`` the caller built keeps web3's provider for
everything.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import select
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..errors import (
    ChainError,
    ChainfenceError,
    InsufficientFunds,
    InvalidInput,
    NodeUnreachable,
    NotSupported,
    RpcError,
)
from . import reverts as _reverts

logger = logging.getLogger("chainfence.rpc")

__all__ = [
    "AsyncRpc",
    "LeanHttp",
    "LogRangeRefused",
    "NotDelivered",
    "Rpc",
    "connect_async_http",
    "connect_http",
    "embedded_async_web3",
    "embedded_web3",
    "is_transport_error",
]

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
    w3 = Web3(provider)
    w3._chainfence_lean = LeanHttp(url, timeout=timeout)  # picked up by Rpc (see the module docstring)
    return w3


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


class NotDelivered(ConnectionError):
    """The request never left: no connection to the node could be made (nothing was sent)."""


class LeanHttp:
    """JSON-RPC over HTTP(S) on persistent ``http.client`` connections, without web3 in the way.

    Thread-safe: a thread takes an idle connection (or opens one), sends one
    request, reads the reply, and puts the connection back. Never resends.
    Raises :class:`NotDelivered` when no connection could be made (nothing was
    sent), ``ConnectionError``/``TimeoutError``/``OSError`` when the exchange
    broke after the request may have left, and web3's ``Web3RPCError`` (with
    the node's reply as ``rpc_response``) for a JSON-RPC error reply, which
    :func:`translate` maps as it maps web3's own.
    """

    def __init__(self, url: str, *, timeout: float):
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {redact_url(url)}")
        self.url = url
        self.timeout = timeout
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
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            headers.append("Authorization: Basic " + base64.b64encode(credentials).decode())
        self._head = ("\r\n".join(headers) + "\r\nContent-Length: ").encode("latin-1")
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1 << 62))
        # Idle connections are closed when this transport is dropped (no socket left to the collector).
        weakref.finalize(self, _close_all, self._idle)

    def _connect(self) -> Any:
        import socket

        port = self._port or (443 if self._https else 80)
        sock = socket.create_connection((self._host, port), timeout=self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._https:
                import ssl

                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self._host)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock)

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

    def exchange(self, body: Any, *, timeout: float | None = None) -> Any:
        """POST ``body`` (a request object or a batch) and return the decoded reply; ``timeout``
        replaces the transport's for this one exchange (tests make one request give up early)."""
        payload = json.dumps(body, separators=(",", ":")).encode()
        # Head and body in one write (http.client writes them apart: two segments per request).
        message = self._head + str(len(payload)).encode() + b"\r\n\r\n" + payload
        conn = self._take()
        try:
            if timeout is not None:
                conn.sock.settimeout(timeout)
            conn.sock.sendall(message)
            status, reason, will_close, data = conn.read_response()
            if timeout is not None:
                conn.sock.settimeout(self.timeout)
        except BaseException:
            conn.close()
            raise
        if will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if status != 200 and not (isinstance(reply, dict) and reply.get("error") is not None):
            # A proxy's or a provider's refusal (429, 502 ...), as web3's provider treats it: no answer.
            raise ConnectionError(f"the node answered HTTP {status} {reason}")
        if reply is None:
            raise ConnectionError(f"the node answered HTTP {status} with a body that is not JSON")
        return reply

    def request(self, method: str, params: Sequence[Any], *, timeout: float | None = None) -> Any:
        """One JSON-RPC request; its result, or ``Web3RPCError`` for an error reply."""
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": list(params)}
        reply = self.exchange(body, timeout=timeout)
        return reply_result(method, reply)

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[dict[str, Any]]:
        """Several JSON-RPC requests in one round trip; their replies in order (read each with
        :func:`reply_result`). A node that refuses batches raises ``Web3RPCError``."""
        first = next(self._ids)
        for _ in calls[1:]:
            next(self._ids)
        body = [
            {"jsonrpc": "2.0", "id": first + i, "method": method, "params": list(params)}
            for i, (method, params) in enumerate(calls)
        ]
        reply = self.exchange(body)
        if not isinstance(reply, list):
            raise _rpc_error(calls[0][0], reply if isinstance(reply, dict) else {"error": {"message": str(reply)}})
        by_id = {item.get("id"): item for item in reply if isinstance(item, dict)}
        return [by_id.get(first + i, {}) for i in range(len(calls))]

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


class _Connection:
    """One keep-alive HTTP/1.1 connection: the socket and a buffered reader of its replies.

    Replies are parsed here (status line, headers, a Content-Length or chunked
    body): ``http.client`` parses headers with the ``email`` package, a quarter
    of a millisecond a reply. A reply that breaks off raises ``ConnectionError``
    (the request went out: the caller may not resend blindly).
    """

    def __init__(self, sock: Any):
        self.sock = sock
        self.reader = sock.makefile("rb")

    def fileno(self) -> int:
        return int(self.sock.fileno())

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()

    def _line(self) -> bytes:
        line = self.reader.readline(65537)
        if not line.endswith(b"\n"):
            raise ConnectionError(
                "the node closed the connection in the middle of its reply"
                if line
                else "the node closed the connection without a reply"
            )
        return line

    def read_response(self) -> tuple[int, str, bool, bytes]:
        """(status, reason, whether the node closes the connection after it, body)."""
        while True:
            version, _, rest = self._line().decode("latin-1").strip().partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/") or not code.isdigit():
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
            while True:
                size = int(self._line().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self._line() not in (b"\r\n", b"\n"):
                        pass  # trailers
                    break
                chunks.append(self._exactly(size))
                self._line()
            return status, reason, will_close, b"".join(chunks)
        length = headers.get("content-length")
        if length is None:
            return status, reason, True, self.reader.read()
        return status, reason, will_close, self._exactly(int(length))

    def _exactly(self, size: int) -> bytes:
        data = self.reader.read(size)
        if len(data) != size:
            raise ConnectionError(f"the node's reply broke off after {len(data)} of {size} bytes")
        return data


def _rpc_error(method: str, reply: dict[str, Any]) -> Exception:
    from web3.exceptions import Web3RPCError

    error = reply.get("error")
    message = str(error.get("message", error)) if isinstance(error, dict) else str(error)
    return Web3RPCError(f"{method}: {message}", rpc_response=reply)  # type: ignore[arg-type]


def reply_result(method: str, reply: Any) -> Any:
    if not isinstance(reply, dict):
        raise ConnectionError(f"the node's reply to {method} is not a JSON-RPC response")
    if reply.get("error") is not None:
        raise _rpc_error(method, reply)
    if "result" not in reply:
        raise ConnectionError(f"the node's reply to {method} has neither a result nor an error")
    return reply["result"]


# -- the shapes web3 returns, built without its formatters ----------------------


def _quantity(value: Any) -> Any:
    return int(value, 16) if isinstance(value, str) and value.startswith("0x") else value


@functools.lru_cache(maxsize=1024)
def _checksum(address: str) -> str:
    from eth_utils import to_checksum_address

    return to_checksum_address(address)


def _address(value: Any) -> Any:
    return _checksum(value.lower()) if isinstance(value, str) and len(value) == 42 else value


def _hexbytes(value: Any) -> Any:
    from hexbytes import HexBytes

    return HexBytes(value) if isinstance(value, str) else value


_RECEIPT_QUANTITIES = frozenset(
    {
        "blockNumber",
        "cumulativeGasUsed",
        "effectiveGasPrice",
        "gasUsed",
        "status",
        "transactionIndex",
        "type",
        "blobGasUsed",
        "blobGasPrice",
    }
)
_RECEIPT_BYTES = frozenset({"blockHash", "logsBloom", "transactionHash", "root"})
_RECEIPT_ADDRESSES = frozenset({"contractAddress", "from", "to"})
_LOG_QUANTITIES = frozenset({"blockNumber", "logIndex", "transactionIndex"})
_LOG_BYTES = frozenset({"blockHash", "data", "transactionHash"})


def _log_entry(log: dict[str, Any]) -> Any:
    from web3.datastructures import AttributeDict

    out: dict[str, Any] = {}
    for key, value in log.items():
        if key in _LOG_QUANTITIES:
            value = _quantity(value)
        elif key in _LOG_BYTES:
            value = _hexbytes(value)
        elif key == "topics":
            value = [_hexbytes(topic) for topic in value]
        elif key == "address":
            value = _address(value)
        out[key] = value
    return AttributeDict(out)


def format_receipt(raw: dict[str, Any] | None) -> Any | None:
    """A receipt as web3's ``eth.get_transaction_receipt`` returns it (``AttributeDict``, ints,
    ``HexBytes``, checksum addresses), from the node's JSON; ``tests/unit/test_lean_http.py`` holds it
    to web3's own formatter."""
    if raw is None:
        return None
    from web3.datastructures import AttributeDict

    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _RECEIPT_QUANTITIES:
            value = _quantity(value)
        elif key in _RECEIPT_BYTES:
            value = _hexbytes(value)
        elif key in _RECEIPT_ADDRESSES:
            value = _address(value)
        elif key == "logs":
            value = [_log_entry(log) for log in value]
        out[key] = value
    return AttributeDict(out)


def _storage_key(value: Any) -> Any:
    """A storage key as web3 returns it in an access list: 0x and 64 lower-case hex digits."""
    if isinstance(value, str) and value.startswith("0x"):
        return "0x" + value[2:].lower().rjust(64, "0")
    return value


def _each(formatter: Any) -> Any:
    return lambda values: values if values is None else [formatter(value) for value in values]


def _fields(table: dict[str, Any]) -> Any:
    """A formatter of a JSON object: each field its table's function (None stays None), the rest as is."""

    def format_object(raw: Any) -> Any:
        from web3.datastructures import AttributeDict

        if not isinstance(raw, dict):
            return raw
        return AttributeDict(
            {key: (table[key](value) if key in table and value is not None else value) for key, value in raw.items()}
        )

    return format_object


_ACCESS_LIST_ENTRY = _fields({"address": _address, "storageKeys": _each(_storage_key)})
_AUTHORIZATION = _fields(
    {
        "chainId": _quantity,
        "address": _address,
        "nonce": _quantity,
        "yParity": _quantity,
        "r": _quantity,
        "s": _quantity,
    }
)
_WITHDRAWAL = _fields({"index": _quantity, "validatorIndex": _quantity, "address": _address, "amount": _quantity})

#: A transaction as web3's ``eth.get_transaction`` returns it (web3's TRANSACTION_RESULT_FORMATTERS, without
#: importing web3's private module): ``tests/unit/test_lean_http.py`` holds it to web3's own formatter.
format_transaction = _fields(
    {
        **dict.fromkeys(
            (
                "blockNumber",
                "transactionIndex",
                "nonce",
                "gas",
                "gasPrice",
                "maxFeePerGas",
                "maxPriorityFeePerGas",
                "value",
                "v",
                "yParity",
                "standardV",
                "type",
                "chainId",
                "maxFeePerBlobGas",
            ),
            _quantity,
        ),
        **dict.fromkeys(("blockHash", "publicKey", "r", "s", "raw", "hash", "input", "data"), _hexbytes),
        "from": _address,
        "to": _address,
        "accessList": _each(_ACCESS_LIST_ENTRY),
        "blobVersionedHashes": _each(_hexbytes),
        "authorizationList": _each(_AUTHORIZATION),
    }
)


def _transactions(values: list[Any]) -> list[Any]:
    return [format_transaction(value) if isinstance(value, dict) else _hexbytes(value) for value in values]


#: A block as web3's ``eth.get_block`` returns it (web3's BLOCK_RESULT_FORMATTERS, without its private module).
format_block = _fields(
    {
        **dict.fromkeys(
            (
                "baseFeePerGas",
                "gasLimit",
                "gasUsed",
                "size",
                "timestamp",
                "number",
                "difficulty",
                "totalDifficulty",
                "blobGasUsed",
                "excessBlobGas",
            ),
            _quantity,
        ),
        **dict.fromkeys(
            (
                "extraData",
                "hash",
                "logsBloom",
                "mixHash",
                "nonce",
                "parentHash",
                "sha3Uncles",
                "receiptsRoot",
                "stateRoot",
                "transactionsRoot",
                "withdrawalsRoot",
                "parentBeaconBlockRoot",
                "requestsHash",
            ),
            _hexbytes,
        ),
        "miner": _address,
        "uncles": _each(_hexbytes),
        "transactions": _transactions,
        "withdrawals": _each(_WITHDRAWAL),
    }
)


def _hex(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, int) and not isinstance(value, bool):
        return hex(value)
    return value


def _call_object(tx: dict[str, Any]) -> dict[str, Any]:
    """An eth_call / eth_estimateGas transaction object in JSON-RPC form."""
    return {key: _hex(value) for key, value in tx.items() if value is not None}


def _hash(tx_hash: Any) -> str:
    if isinstance(tx_hash, (bytes, bytearray)):
        return "0x" + bytes(tx_hash).hex()
    text = str(tx_hash)
    return text if text.startswith("0x") else "0x" + text


def _block_id(block: str | int) -> str:
    return hex(block) if isinstance(block, int) and not isinstance(block, bool) else str(block)


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


def _raw_filter(filter_params: dict[str, Any]) -> dict[str, Any]:
    """An eth_getLogs filter as JSON-RPC wants it (block numbers in hex), for a raw request."""
    params = dict(filter_params)
    for key in ("fromBlock", "toBlock"):
        if isinstance(params.get(key), int):
            params[key] = hex(params[key])
    return params


class _RawReplyError(Exception):
    """A JSON-RPC error in a raw reply, shaped as web3's exceptions are for :func:`translate`."""

    def __init__(self, error: dict[str, Any]):
        super().__init__(error)
        code = error.get("code")
        # A reply without a code is still an answer from the node: an RpcError, never a transport failure.
        self.rpc_response = {"error": {**error, "code": code if isinstance(code, int) else -32000}}


def _raw_result(method: str, response: Any) -> Any:
    if not isinstance(response, dict):
        raise ChainError(f"{method}: the node sent a reply that is not a JSON-RPC object")
    error = response.get("error")
    if error:
        raise _RawReplyError(error if isinstance(error, dict) else {"message": str(error)})
    result = response.get("result")
    if not isinstance(result, list):
        raise ChainError(f"{method}: the node sent no list of logs")
    return result


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
        #: The lean transport of a Web3 built by connect_http (None: everything through web3's provider).
        self._lean: LeanHttp | None = None if embedded else getattr(w3, "_chainfence_lean", None)

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
        if self._lean is not None:
            lean = self._lean
            return int(self._read("eth_blockNumber", lambda: int(lean.request("eth_blockNumber", []), 16)))
        return int(self._read("eth_blockNumber", lambda: self._eth.block_number))

    def block(self, block: str | int) -> Any | None:
        """The block (header fields, transaction hashes), or None if the node has none by that id."""
        if self._lean is not None:
            lean = self._lean
            return self._read(
                "eth_getBlockByNumber",
                lambda: format_block(lean.request("eth_getBlockByNumber", [_block_id(block), False])),
            )
        from web3.exceptions import BlockNotFound

        def get() -> Any:
            try:
                return self._eth.get_block(block)
            except BlockNotFound:
                return None

        return self._read("eth_getBlockByNumber", get)

    def blocks(self, numbers: Sequence[int], *, chunk: int = 200) -> list[Any | None]:
        """The blocks ``numbers`` (headers and transaction hashes; None where the node has none), in order.

        One JSON-RPC batch per ``chunk`` blocks where the node takes batches
        (anvil, geth and hosted providers do; the embedded chain answers in
        process, one at a time). A node that refuses a batch is asked one
        block at a time from then on.
        """
        from web3.exceptions import BlockNotFound

        numbers = list(numbers)
        found: list[Any | None] = []
        for start in range(0, len(numbers), chunk):
            part = numbers[start : start + chunk]
            if self._batches and len(part) > 1:
                try:
                    with self.w3.batch_requests() as batch:
                        for number in part:
                            batch.add(self._eth.get_block(number))
                        replies = batch.execute()
                    found.extend(
                        reply if hasattr(reply, "get") and reply.get("number") is not None else None
                        for reply in replies
                    )
                    continue
                except BlockNotFound:
                    pass  # one of them is missing: ask one at a time, which says which
                except Exception as exc:
                    if is_transport_error(exc):
                        raise translate(exc, "eth_getBlockByNumber") from exc
                    logger.debug("batched eth_getBlockByNumber failed (%s); not batching again", exc)
                    self._batches = False
            found.extend(self.block(number) for number in part)
        return found

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
        if self._batches and self._lean is not None:
            replies: list[dict[str, Any]] | None = None
            for attempt in range(_READ_ATTEMPTS):
                try:
                    replies = self._lean.batch(
                        [("eth_call", [_call_object(tx), "latest"]), ("eth_getBlockByNumber", ["pending", False])]
                    )
                    break
                except Exception as exc:
                    if is_transport_error(exc):
                        if attempt + 1 < _READ_ATTEMPTS:
                            continue
                        raise translate(exc, "eth_call", resource=resource) from exc
                    logger.debug("batched eth_call + pending block refused (%s); not batching again", exc)
                    self._batches = False
            if replies is not None:
                try:  # the call's own answer (a revert raises its contract error)
                    result = reply_result("eth_call", replies[0])
                except Exception as exc:
                    raise translate(exc, "eth_call", resource=resource) from exc
                try:
                    pending = reply_result("eth_getBlockByNumber", replies[1])
                except Exception as exc:  # no pending block here: the call stands, the timestamp is unknown
                    if is_transport_error(exc):
                        raise translate(exc, "eth_getBlockByNumber") from exc
                    pending = None
                timestamp = pending.get("timestamp") if isinstance(pending, dict) else None
                return bytes.fromhex(result[2:]), (int(timestamp, 16) if timestamp is not None else None)
        elif self._batches:
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
        if self._lean is not None:
            lean = self._lean
            params = [_call_object(tx), _block_id(block)]
            return self._read(
                "eth_call", lambda: bytes.fromhex(lean.request("eth_call", params)[2:]), resource=resource
            )
        return bytes(self._read("eth_call", lambda: self._eth.call(tx, block_identifier=block), resource=resource))

    def estimate_gas(self, tx: dict[str, Any], block: str | int, *, resource: str | None = None) -> int:
        try:
            if self._lean is not None:
                return int(self._lean.request("eth_estimateGas", [_call_object(tx), _block_id(block)]), 16)
            return int(self._eth.estimate_gas(tx, block_identifier=block))
        except Exception as exc:
            raise translate(exc, "eth_estimateGas", resource=resource, sender=tx.get("from")) from exc

    def code(self, address: str, block: str | int = "latest") -> bytes:
        if self._lean is not None:
            lean = self._lean
            params = [address, _block_id(block)]
            return self._read("eth_getCode", lambda: bytes.fromhex(lean.request("eth_getCode", params)[2:]))
        return bytes(self._read("eth_getCode", lambda: self._eth.get_code(address, block_identifier=block)))

    def nonce(self, address: str, block: str | int = "pending") -> int:
        if self._lean is not None:
            lean = self._lean
            params = [address, _block_id(block)]
            return self._read(
                "eth_getTransactionCount", lambda: int(lean.request("eth_getTransactionCount", params), 16)
            )
        return int(self._read("eth_getTransactionCount", lambda: self._eth.get_transaction_count(address, block)))

    def logs(self, filter_params: dict[str, Any], *, raw: bool = False) -> list[Any]:
        """``eth_getLogs``; a provider's range or size limit raises :class:`LogRangeRefused`.

        ``raw``: the node's JSON as it came (hex strings), without web3's result formatters, which
        cost more than the request itself on a page of thousands of logs (the audit index's sync
        reads them so; :func:`chainfence._node.events.decode` reads both shapes). The embedded chain
        answers through web3 either way.
        """
        if raw and not self.embedded:
            params = _raw_filter(filter_params)
            return list(
                self._read(
                    "eth_getLogs",
                    lambda: _raw_result("eth_getLogs", self.w3.provider.make_request("eth_getLogs", [params])),
                )
            )
        return list(self._read("eth_getLogs", lambda: self._eth.get_logs(filter_params)))

    # -- transactions ---------------------------------------------------------

    def send_raw(self, raw: bytes, *, sender: str | None = None) -> None:
        """``eth_sendRawTransaction``, exactly once: never retried here (see the module docstring)."""
        try:
            if self._lean is not None:
                self._lean.request("eth_sendRawTransaction", ["0x" + bytes(raw).hex()])
            else:
                self._eth.send_raw_transaction(raw)
        except Exception as exc:
            raise translate(exc, "eth_sendRawTransaction", sender=sender) from exc

    def transaction(self, tx_hash: str) -> Any | None:
        """The transaction (pending or mined), or None if the node does not know it."""
        if self._lean is not None:
            lean = self._lean
            return self._read(
                "eth_getTransactionByHash",
                lambda: format_transaction(lean.request("eth_getTransactionByHash", [_hash(tx_hash)])),
            )
        from web3.exceptions import TransactionNotFound

        def get() -> Any:
            try:
                return self._eth.get_transaction(tx_hash)
            except TransactionNotFound:
                return None

        return self._read("eth_getTransactionByHash", get)

    def receipt(self, tx_hash: str) -> Any | None:
        """The receipt of a mined transaction, or None (pending, unknown, or reorganised out)."""
        if self._lean is not None:
            lean = self._lean
            return self._read(
                "eth_getTransactionReceipt",
                lambda: format_receipt(lean.request("eth_getTransactionReceipt", [_hash(tx_hash)])),
            )
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

    async def blocks(self, numbers: Sequence[int], *, chunk: int = 200) -> list[Any | None]:
        """:meth:`Rpc.blocks`: one batch per ``chunk`` blocks where the node takes batches."""
        from web3.exceptions import BlockNotFound

        numbers = list(numbers)
        found: list[Any | None] = []
        for start in range(0, len(numbers), chunk):
            part = numbers[start : start + chunk]
            if self._batches and len(part) > 1:
                try:
                    async with self.w3.batch_requests() as batch:
                        for number in part:
                            batch.add(self._eth.get_block(number))
                        replies = await batch.async_execute()
                    found.extend(
                        reply if hasattr(reply, "get") and reply.get("number") is not None else None
                        for reply in replies
                    )
                    continue
                except BlockNotFound:
                    pass
                except Exception as exc:
                    if is_transport_error(exc):
                        raise translate(exc, "eth_getBlockByNumber") from exc
                    logger.debug("batched eth_getBlockByNumber failed (%s); not batching again", exc)
                    self._batches = False
            found.extend([await self.block(number) for number in part])
        return found

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
        return int(await self._read("eth_getTransactionCount", lambda: self._eth.get_transaction_count(address, block)))

    async def logs(self, filter_params: dict[str, Any], *, raw: bool = False) -> list[Any]:
        if raw and not self.embedded:
            params = _raw_filter(filter_params)

            async def get() -> Any:
                return _raw_result("eth_getLogs", await self.w3.provider.make_request("eth_getLogs", [params]))

            return list(await self._read("eth_getLogs", get))
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
