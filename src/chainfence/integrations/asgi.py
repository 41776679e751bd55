"""ASGI middleware: fenced routes accept only holder-signed requests with a current token.

Works with any ASGI framework (Starlette, therefore FastAPI)::

    app = FastAPI()
    app.add_middleware(
        FencingMiddleware,
        guard=Guard(registry, path="guard.sqlite"),
        audience="reports-service",
        resource=lambda scope: "reports/daily" if scope["path"] == "/reports/daily" else None,
    )

For each HTTP request whose route maps to a resource (``resource`` is that
name, or a function of the ASGI scope returning it, or None for routes that
are not fenced), the middleware reads the fenced request from the headers
(:meth:`chainfence.FencedRequest.to_headers`), reads the body, and asks the
guard (:meth:`chainfence.Guard.check_request`) in a worker thread (the guard
does blocking I/O), with the request's own action (method, raw path and
query: :func:`chainfence.fenced_requests.http_action`) and this service's
``audience``: a request signed for another method, path, query or service is
refused. The app runs only if all is well, with ``scope["chainfence"]`` set
to the verified request. Otherwise it answers with a JSON
``{"error": ..., "message": ...}`` and the error's ``http_status``:

====  ==========================================================================
400   malformed or missing headers, a body that is not the signed one
401   a bad or foreign signature, a request past its deadline
403   signed by someone who does not hold the token; for another resource,
      action or audience; by a holder the guard's admission does not accept
      (:class:`~chainfence.Admission`: a local list or the namespace's
      on-chain allowlist)
409   a stale, unknown, expired, released, revoked or unconfirmed token; a
      replayed request
413   a body larger than ``max_body``
503   the chain could not be asked, or no longer holds history the guard
      relied on (fail closed); with a proven guard, also every answer that
      could not be verified (below)
====  ==========================================================================

With ``metrics_path="/metrics"`` the middleware answers ``GET /metrics`` itself with chainfence's
Prometheus metrics (the guard's verdicts, its follower, the node requests: ``docs/metrics.md``; the
``[metrics]`` extra); by default no path is taken from the app.

A guard in ``proven`` mode (``Guard(..., mode=Proven(headers))``)
believes no provider; when it cannot prove a verdict, the request is refused
with 503 and a JSON body that says why, never let through on one
provider's word: ``ProofInvalid`` (a proof that does not verify against the
trusted header, or with ``served="header"`` a header that does not hash to its
hash: ``provider`` names who served it, ``block`` the block), ``HeadersDisagree`` (no k header
providers agree), ``HeaderStale`` (the newest header they vouch for is
older than the source's ``max_age``: withheld heads), ``HeaderBehind`` (the
header source's head moved back below what the guard accepted),
``BlockNotVouched``, ``ProviderUnavailable`` (too few providers answered:
``providers`` names those down) and ``ProofsNotServed`` (the proof provider
serves no ``eth_getProof``). Providers are named as the proven mode names
them: scheme, host and port, never a URL's path or query (where hosted
providers put their keys).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import quote

from .._core import log as _log
from ..errors import (
    ChainError,
    ChainfenceError,
    InvalidInput,
    NotAdmitted,
    ProofsNotServed,
    ProviderUnavailable,
    RequestRejected,
    TokenNotCurrent,
    UnverifiedAnswer,
)
from ..fenced_requests import FencedRequest, http_action
from ..guard import Guard

logger = _log.get(__name__)

__all__ = ["FencingMiddleware"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class FencingMiddleware:
    """ASGI middleware in front of ``app``: a request to a fenced route reaches it only holder-signed, for this
    service, with a token ``guard`` accepts (the module docstring tells the checks and the answers).

    Args:
        app: the ASGI application it wraps.
        guard: the :class:`~chainfence.Guard` that judges each request
            (:meth:`~chainfence.Guard.check_request`, run in a worker thread).
        resource: the resource every request is fenced by, or a function of the ASGI scope returning
            it (None: that route is not fenced, and passes through).
        audience: this service's name, which requests must be signed for (default: the guard's
            ``audience``; one of them is required).
        max_body: the largest body read, in bytes (413 above it).
        metrics_path: a path answering ``GET`` with chainfence's Prometheus metrics (the
            ``[metrics]`` extra), or None (default: none taken from the app).
    """

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        guard: Guard,
        resource: str | Callable[[Scope], str | None],
        audience: str | None = None,
        max_body: int = 1 << 20,
        metrics_path: str | None = None,
    ):
        audience = audience if audience is not None else guard.audience
        if not isinstance(audience, str) or not audience:
            raise InvalidInput(
                "FencingMiddleware needs the audience (this service's name) requests are signed for: "
                f"give audience= or a guard with one, got {audience!r}",
                argument="audience",
                value=audience,
            )
        if metrics_path is not None:
            if not isinstance(metrics_path, str) or not metrics_path.startswith("/"):
                raise InvalidInput(
                    f"metrics_path must be a path starting with '/', got {metrics_path!r}",
                    argument="metrics_path",
                    value=metrics_path,
                )
            from .._core.metrics import enable

            enable()  # ExtraNotInstalled without the [metrics] extra, here rather than at the first scrape
        self.app = app
        self.guard = guard
        self.resource = resource
        self.audience = audience
        self.max_body = max_body
        #: The path answering ``GET`` with chainfence's Prometheus metrics (docs/metrics.md); None: not served.
        self.metrics_path = metrics_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.metrics_path is not None and scope.get("path") == self.metrics_path and scope.get("method") == "GET":
            await _metrics_response(send)
            return
        expected = self.resource(scope) if callable(self.resource) else self.resource
        if expected is None:
            await self.app(scope, receive, send)
            return

        body, complete = await self._read_body(receive)
        if not complete:
            await _respond(send, 413, "PayloadTooLarge", f"the body exceeds {self.max_body} bytes")
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope.get("headers", [])}
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else quote(scope.get("path", "/"), safe="/:@!$&'()*+,;=-._~")
        try:
            action = http_action(scope.get("method", "GET"), path, scope.get("query_string", b""))
            request = FencedRequest.from_headers(headers)
            await asyncio.to_thread(
                self.guard.check_request, request, body, action=action, audience=self.audience, resource=expected
            )
        except ChainfenceError as refused:
            await _respond(send, refused.http_status, *_refusal(refused))
            return

        scope = dict(scope)
        scope["chainfence"] = request
        replayed = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: disconnect notifications

        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"".join(chunks), True
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", False
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), True


def _refusal(error: ChainfenceError) -> tuple[str, str, dict[str, Any]]:
    """What the JSON body says of a refusal (its status is the error's ``http_status``): the error's name,
    a message, and for the proven mode the provider and block it names. A message that could quote a
    transport or a path (a node's URL carries a hosted provider's API key) stays in the log."""
    name = type(error).__name__
    if isinstance(error, (RequestRejected, NotAdmitted, TokenNotCurrent)):
        return name, str(error), {}
    if isinstance(error, (UnverifiedAnswer, ProviderUnavailable, ProofsNotServed)):
        # The proven mode could not prove a verdict: fail closed, and say why (its messages name
        # providers by scheme, host and port only).
        logger.warning("fenced request refused, nothing could be proven: %s", error)
        return name, _unproven(error), _unproven_fields(error)
    if isinstance(error, ChainError):
        logger.warning("fenced request refused, the chain could not be asked: %s", error)
        return name, "the fencing registry could not be asked", {}
    if isinstance(error, InvalidInput):
        return "MalformedRequest", str(error), {}
    logger.error("fenced request refused, the guard failed: %s", error)  # the guard's store: fail closed
    return name, "the fencing guard cannot judge requests now", {}


def _unproven(error: ChainfenceError) -> str:
    """Why a proven guard could not judge, for the client (no transport detail: that stays in the log)."""
    if isinstance(error, ProviderUnavailable):
        if error.needed is not None:
            return (
                f"the proven mode could not judge: {error.answered} of the header providers answered, "
                f"{error.needed} are needed (down: {', '.join(error.sources)})"
            )
        return f"the proven mode could not judge: provider {error.source} did not answer"
    if isinstance(error, ProofsNotServed):
        return f"the proven mode could not judge: {error.source} does not serve eth_getProof"
    return f"the proven mode refused to judge: {error}"


def _unproven_fields(error: ChainfenceError) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    source = getattr(error, "source", None)
    if source is not None:
        fields["provider"] = source
    sources = getattr(error, "sources", ())
    if sources:
        fields["providers"] = list(sources)
    block = getattr(error, "block", None)
    if isinstance(block, int):
        fields["block"] = block
    return fields


async def _metrics_response(send: Send) -> None:
    from .._core.metrics import exposition

    body, content_type = exposition()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _respond(send: Send, status: int, error: str, message: str, fields: dict[str, Any] | None = None) -> None:
    body = json.dumps({"error": error, "message": message, **(fields or {})}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
