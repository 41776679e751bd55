"""The proven mode's endpoints: one provider each, named, counted, every failure typed.

An endpoint sends one JSON-RPC request and returns its result. It never
resends and never falls back to another provider: which answers to believe
is the header source's and the reader's business (:mod:`chainfence._node.headers`,
:mod:`chainfence.proofs`), and a silent retry elsewhere would hide a
provider that is down. Each is a node layer (:class:`~chainfence._node.rpc.Rpc`,
whose :meth:`~chainfence._node.rpc.Rpc.request` maps every failure in the one
place failures are mapped) whose errors name the provider:

    refused, reset, timed out, not JSON-RPC  -> ProviderUnavailable
    a JSON-RPC error reply                   -> RpcError (code, message)

Over a URL the layer runs on the SDK's own lean transport
(:class:`~chainfence._node.lean_http.LeanHttp`: persistent connections, no
web3 on the way). Over a :class:`~chainfence.Chain` (the embedded eth-tester
chain, or any chain the caller already has) it is the chain's own layer
(``chain.rpc``), and eth-tester's blocks are put in the JSON-RPC shape a node
answers with.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ..errors import ChainfenceError, InvalidInput, NodeUnreachable, ProviderUnavailable, RpcError
from .lean_http import LeanHttp
from .rpc import Rpc
from .transports import redact_url

__all__ = ["ChainEndpoint", "Endpoint", "HttpEndpoint", "endpoint", "name_of", "name_of_chain"]


class Endpoint(Protocol):
    #: How errors and reports name this provider (a URL without credentials, path or query).
    name: str
    #: Requests sent so far (benchmarks count round trips with it).
    requests: int

    def request(self, method: str, params: list[Any]) -> Any: ...


#: ``url`` as a provider's name: scheme, host and port only.
name_of = redact_url


class _RpcEndpoint:
    """A provider reached through a node layer: its requests counted, its failures named after it."""

    def __init__(self, rpc: Rpc, name: str):
        self._rpc = rpc
        self.name = name
        self.requests = 0
        self._count_lock = threading.Lock()

    def request(self, method: str, params: list[Any]) -> Any:
        with self._count_lock:
            self.requests += 1
        try:
            return self._rpc.request(method, list(params))
        except NodeUnreachable as exc:
            raise ProviderUnavailable(source=self.name, detail=f"{method}: {exc}") from exc
        except RpcError as exc:
            raise RpcError(
                f"{self.name} refused {method}: {exc.rpc_message}",
                method=method,
                code=exc.code,
                rpc_message=exc.rpc_message,
            ) from exc
        except ChainfenceError as exc:
            raise RpcError(f"{self.name} refused {method}: {exc}", method=method, rpc_message=str(exc)) from exc


class HttpEndpoint(_RpcEndpoint):
    """A provider at an http(s) URL."""

    def __init__(self, url: str, *, timeout: float = 10.0, name: str | None = None):
        if not isinstance(url, str):
            raise InvalidInput(f"a provider is an http(s) URL, got {type(url).__name__}")
        try:
            transport = LeanHttp(url, timeout=timeout)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        super().__init__(Rpc(transport), name or name_of(url))

    def close(self) -> None:
        self._rpc.close()


def name_of_chain(chain: Any) -> str:
    """How errors name the node a :class:`~chainfence.Chain` talks to: its URL's scheme, host and port
    (``"embedded"`` for the in-process chain, ``"chain"`` when the transport does not say)."""
    rpc = getattr(chain, "rpc", None)
    if getattr(rpc, "embedded", False):
        return "embedded"
    transport = getattr(rpc, "transport", None)
    for holder in (
        transport,
        getattr(transport, "provider", None),
        getattr(getattr(rpc, "w3", None), "provider", None),
    ):
        url = getattr(holder, "url", None) or getattr(holder, "endpoint_uri", None)
        if isinstance(url, str) and url:
            return name_of(url)
    return "chain"


class ChainEndpoint(_RpcEndpoint):
    """A provider reached through a :class:`~chainfence.Chain` (its ``rpc`` layer), named after its node."""

    def __init__(self, chain: Any, *, name: str | None = None):
        embedded = bool(getattr(chain.rpc, "embedded", False))
        super().__init__(chain.rpc, name or name_of_chain(chain))
        self._embedded = embedded

    def request(self, method: str, params: list[Any]) -> Any:
        result = super().request(method, params)
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
    raise InvalidInput(f"a provider is an http(s) URL or a Chain, got {type(provider).__name__}")
