"""Every failure of a request to a node, as a chainfence error: the one place they are mapped.

:func:`translating` wraps each request the node layer makes (one per call, in
:mod:`chainfence._node.rpc`'s drivers); :func:`translate` is its table, as
httpx maps transport errors in one place::

    refused, reset, timed out           -> NodeUnreachable (a ConnectionError),
                                           with ``maybe_delivered`` for sends and ``reason``
    a reply out of bounds (ReplyRefused) -> NodeUnreachable, ``reason`` saying which bound;
                                           LogRangeRefused for an eth_getLogs reply too long
    a revert (any provider's shape)     -> the contract error's class (chainfence._node.reverts)
    a JSON-RPC error reply              -> RpcError(method, code, message);
                                           LogRangeRefused for a capped eth_getLogs;
                                           InsufficientFunds when the account cannot pay
    an embedded dev control refusing    -> InvalidInput (a bad argument), else ChainError
    anything else a library raises      -> ChainError

Nothing here imports an HTTP library or web3: an exception of a library that
was never imported cannot reach it.
"""

from __future__ import annotations

import sys
from typing import Any

from ..errors import (
    ChainError,
    ChainfenceError,
    InsufficientFunds,
    InvalidInput,
    LogRangeRefused,
    NodeUnreachable,
    RpcError,
)
from . import reverts as _reverts
from .transports import ErrorReply, NotDelivered, ReplyRefused, redact_url

__all__ = [
    "TESTER_CONTROLS",
    "is_transport_error",
    "is_unknown_method",
    "never_delivered",
    "translate",
    "translating",
    "transport_reason",
    "unreachable_message",
]

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

#: The embedded chain's dev controls (eth-tester's methods, run in process), and what each does.
TESTER_CONTROLS = {
    "mine_blocks": "mine blocks",
    "take_snapshot": "take a snapshot",
    "revert_to_snapshot": "revert to that snapshot",
    "time_travel": "move to that timestamp",
}

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


class translating:
    """Whatever the block raises leaves it as a chainfence error (:func:`translate`), the original chained
    as ``__cause__``. ``sender``: the account a transaction is from, named when it cannot pay.

    (A class rather than a ``contextlib.contextmanager``: every request enters one, and a generator-based
    one cost a few microseconds each, a fifth of the RPC layer's own work per request, issue #19.)"""

    __slots__ = ("method", "sender")

    def __init__(self, method: str | None, *, sender: str | None = None):
        self.method = method
        self.sender = sender

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: Any) -> None:
        if exc is None or isinstance(exc, ChainfenceError) or not isinstance(exc, Exception):
            return  # nothing raised, a chainfence error already, or an interrupt: as it is
        raise translate(exc, self.method, sender=self.sender) from exc


def translate(exc: BaseException, method: str | None = None, *, sender: str | None = None) -> ChainfenceError:
    """The chainfence error for anything raised while talking to the chain."""
    if isinstance(exc, ChainfenceError):
        return exc
    if method in TESTER_CONTROLS:  # in-process: no transport, no JSON-RPC reply
        what = TESTER_CONTROLS[method]
        if _is_instance(exc, "eth_tester.exceptions", "ValidationError"):
            return InvalidInput(f"the embedded chain cannot {what}: {exc}")
        return ChainError(f"the embedded chain could not {what}: {type(exc).__name__}: {exc}")
    error = _reverts.translate(exc)
    if error is not None:
        return error
    if isinstance(exc, ReplyRefused) and exc.too_long and method == "eth_getLogs":
        # As a provider's own size limit: the pager asks a narrower range.
        return LogRangeRefused(f"eth_getLogs failed: {exc}", method=method, rpc_message=str(exc))
    if is_transport_error(exc):
        reason = str(exc) if isinstance(exc, ReplyRefused) else transport_reason(exc)
        return NodeUnreachable(
            f"the node did not answer{f' {method}' if method else ''}: {reason}",
            reason=reason,
            maybe_delivered=not never_delivered(exc),
        )
    code, message = _rpc_error_fields(exc)
    lowered = message.lower()
    if any(phrase in lowered for phrase in _CANNOT_PAY):
        who = f"{sender} " if sender else ""
        return InsufficientFunds(f"{who}cannot pay for gas: {message}", account=sender)
    if method in _SENDS and _is_instance(exc, "eth_utils.exceptions", "ValidationError"):
        # The embedded chain refusing a transaction (py-evm's words: "Invalid transaction nonce: Expected 5,
        # but got 4"): the node's answer to the send, as a JSON-RPC node's error reply is.
        return RpcError(f"{method} failed: {message}", method=method, code=None, rpc_message=message)
    if isinstance(exc, ErrorReply) or code is not None or getattr(exc, "rpc_response", None) is not None:
        cls = LogRangeRefused if method == "eth_getLogs" and _is_range_refusal(code, lowered) else RpcError
        return cls(f"{method or 'request'} failed: {message}", method=method, code=code, rpc_message=message)
    return ChainError(f"{type(exc).__name__}: {exc}")


#: The requests that send a transaction.
_SENDS = ("eth_sendRawTransaction", "eth_sendRawTransactionSync")

#: How nodes say the sender's balance cannot pay for the transaction's gas (geth, anvil, ...; py-evm).
_CANNOT_PAY = ("insufficient funds", "cannot afford txn gas")


#: How nodes say they do not know a method (nothing was done): JSON-RPC's "method not found" (anvil, geth),
#: EIP-1474's "method not supported" (hardhat: "Method evm_foo is not supported"), and ganache's words, which it
#: sends under -32700 ("The method evm_setNextBlockTimestamp does not exist/is not available").
_UNKNOWN_METHOD_CODES = (-32601, -32004)
_UNKNOWN_METHOD_PHRASES = ("method not found", "is not supported", "does not exist/is not available")


def is_unknown_method(error: RpcError) -> bool:
    """Whether the node's error reply says it does not know the method asked."""
    message = error.rpc_message.lower()
    return error.code in _UNKNOWN_METHOD_CODES or any(phrase in message for phrase in _UNKNOWN_METHOD_PHRASES)


def is_transport_error(exc: BaseException) -> bool:
    """A failure to talk to the node (as opposed to an answer from it), whichever HTTP client raised it
    (requests' errors are ``OSError``s; aiohttp's are checked only if aiohttp was imported)."""
    if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
        return True
    return _is_instance(exc, "aiohttp", "ClientError")


def never_delivered(exc: BaseException) -> bool:
    """A transport failure that happened before the request left (refused, or no connection in time)."""
    if isinstance(exc, NotDelivered):
        return True
    if _is_instance(exc, "requests.exceptions", "ConnectTimeout") or _is_instance(
        exc, "aiohttp", "ClientConnectorError"
    ):
        return True
    text = str(exc).lower()
    return "connection refused" in text or "failed to establish a new connection" in text


def transport_reason(exc: BaseException) -> str:
    """A transport failure in a few words ("connection refused: nothing listens there"), not urllib3's
    paragraph; the original exception stays chained as ``__cause__``."""
    texts: list[str] = []
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


def _is_instance(exc: BaseException, module: str, name: str) -> bool:
    """``isinstance(exc, module.name)`` if that module was imported (else nothing can have raised it)."""
    loaded = sys.modules.get(module)
    cls = getattr(loaded, name, None) if loaded is not None else None
    return isinstance(cls, type) and isinstance(exc, cls)


def _rpc_error_fields(exc: BaseException) -> tuple[int | None, str]:
    """(code, message) of a JSON-RPC error carried by an exception, else (None, str(exc))."""
    if isinstance(exc, ErrorReply):
        return exc.code, exc.message
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


def _is_range_refusal(code: int | None, message: str) -> bool:
    return code in (-32005, -32602, -32614) or any(phrase in message for phrase in _LOG_RANGE_PHRASES)
