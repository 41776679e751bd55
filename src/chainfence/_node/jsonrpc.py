"""The proven mode's endpoints: one provider each, named, counted, every failure typed.

An endpoint sends one JSON-RPC request and returns its result. It never
resends and never falls back to another provider: which answers to believe
is the header source's and the reader's business (:mod:`chainfence._node.headers`,
:mod:`chainfence.proofs`), and a silent retry elsewhere would hide a
provider that is down. Failures come out as chainfence errors that name the
provider:

    refused, reset, timed out, not JSON-RPC  -> ProviderUnavailable
    a JSON-RPC error reply                   -> RpcError (code, message)

Over a URL the request goes through the SDK's own lean transport
(:class:`chainfence._node.rpc.LeanHttp`: persistent ``http.client`` connections,
no web3 on the way), imported when the first endpoint is built, not when
this module is. Over a :class:`~chainfence.Chain` (the embedded eth-tester
chain, or any chain the caller already has) it goes through the chain's own
layer (``chain.rpc.request``), and eth-tester's snake_case blocks are put in
the JSON-RPC shape a node answers with.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ..errors import ChainfenceError, NodeUnreachable, ProviderUnavailable, RpcError

__all__ = ["ChainEndpoint", "Endpoint", "HttpEndpoint", "endpoint", "name_of"]


class Endpoint(Protocol):
    #: How errors and reports name this provider (a URL without credentials, path or query).
    name: str
    #: Requests sent so far (benchmarks count round trips with it).
    requests: int

    def request(self, method: str, params: list[Any]) -> Any: ...


def name_of(url: str) -> str:
    """``url`` as a provider's name: scheme, host and port only (hosted providers put API keys in
    the path or query; user:password would show too)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<url>"
    return f"{parts.scheme}://{host}{port}" + ("/..." if parts.path not in ("", "/") or parts.query else "")


class _Counted:
    def __init__(self) -> None:
        self.requests = 0
        self._count_lock = threading.Lock()

    def _count(self) -> None:
        with self._count_lock:
            self.requests += 1


class HttpEndpoint(_Counted):
    """A provider at an http(s) URL."""

    def __init__(self, url: str, *, timeout: float = 10.0, name: str | None = None):
        super().__init__()
        from .rpc import LeanHttp

        if not isinstance(url, str):
            from ..errors import InvalidInput

            raise InvalidInput(f"a provider is an http(s) URL, got {type(url).__name__}")
        try:
            self._http = LeanHttp(url, timeout=timeout)
        except ValueError as exc:
            from ..errors import InvalidInput

            raise InvalidInput(str(exc)) from None
        self.name = name or name_of(url)
        self._ids = iter(range(1, 1 << 62))
        self._ids_lock = threading.Lock()

    def request(self, method: str, params: list[Any]) -> Any:
        with self._ids_lock:
            request_id = next(self._ids)
        self._count()
        try:
            reply = self._http.exchange({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        except (OSError, ValueError) as exc:  # ConnectionError, TimeoutError, NotDelivered (a ConnectionError)
            raise ProviderUnavailable(provider=self.name, detail=f"{method}: {exc}") from exc
        except Exception as exc:  # anything else the transport raises is no answer either
            raise ProviderUnavailable(provider=self.name, detail=f"{method}: {type(exc).__name__}: {exc}") from exc
        return _result(self.name, method, reply)

    def close(self) -> None:
        self._http.close()


def _result(name: str, method: str, reply: Any) -> Any:
    if not isinstance(reply, dict):
        raise ProviderUnavailable(provider=name, detail=f"{method}: the reply is not a JSON-RPC response")
    error = reply.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        message = str(error.get("message", error)) if isinstance(error, dict) else str(error)
        raise RpcError(
            f"{name} refused {method}: {message}",
            method=method,
            code=code if isinstance(code, int) else None,
            rpc_message=message,
        )
    if "result" not in reply:
        raise ProviderUnavailable(provider=name, detail=f"{method}: the reply has neither a result nor an error")
    return reply["result"]


class ChainEndpoint(_Counted):
    """A provider reached through a :class:`~chainfence.Chain` (its ``rpc`` layer)."""

    def __init__(self, chain: Any, *, name: str | None = None):
        super().__init__()
        self._rpc = chain.rpc
        self._embedded = bool(getattr(chain.rpc, "embedded", False))
        self.name = name or ("embedded" if self._embedded else "chain")

    def request(self, method: str, params: list[Any]) -> Any:
        self._count()
        try:
            result = self._rpc.request(method, list(params))
        except RpcError:
            raise
        except NodeUnreachable as exc:
            raise ProviderUnavailable(provider=self.name, detail=f"{method}: {exc}") from exc
        except ChainfenceError as exc:
            raise RpcError(f"{self.name} refused {method}: {exc}", method=method, rpc_message=str(exc)) from exc
        if self._embedded and method.startswith("eth_getBlockBy") and isinstance(result, dict):
            result = _json_block(result)
        return result


#: eth-tester's snake_case block keys that are not plain snake_case of the JSON-RPC names.
_RENAMED = {"coinbase": "miner", "sha3_uncles": "sha3Uncles"}


def _json_block(block: dict[str, Any]) -> dict[str, Any]:
    """An eth-tester block (snake_case keys, ints) in the JSON-RPC shape (camelCase, hex quantities)."""
    out: dict[str, Any] = {}
    for key, value in block.items():
        if key in _RENAMED:
            name = _RENAMED[key]
        else:
            head, *rest = key.split("_")
            name = head + "".join(part.capitalize() for part in rest)
        if name == "logsBloom" and isinstance(value, int):
            value = "0x" + value.to_bytes(256, "big").hex()
        elif isinstance(value, bool):
            pass
        elif isinstance(value, int):
            value = hex(value)
        elif isinstance(value, (bytes, bytearray)):
            value = "0x" + bytes(value).hex()
        out[name] = value
    return out


def endpoint(provider: Any, *, timeout: float = 10.0) -> Endpoint:
    """An endpoint for ``provider``: a URL, a :class:`~chainfence.Chain`, or an endpoint already."""
    if isinstance(provider, str):
        return HttpEndpoint(provider, timeout=timeout)
    if hasattr(provider, "rpc") and hasattr(provider.rpc, "request"):
        return ChainEndpoint(provider)
    if callable(getattr(provider, "request", None)) and isinstance(getattr(provider, "name", None), str):
        return provider  # type: ignore[no-any-return]
    from ..errors import InvalidInput

    raise InvalidInput(f"a provider is an http(s) URL or a Chain, got {type(provider).__name__}")
