"""Every JSON-RPC request chainfence makes goes through here; every failure comes out as a chainfence error.

One :class:`Rpc` per :class:`~chainfence.Chain` (and one :class:`AsyncRpc` per
:class:`~chainfence.aio.AsyncChain`). The rest of the SDK never touches web3 or
a transport: it calls the methods below (directly, or by yielding
``RPC.<method>(...)`` from its steps, :mod:`chainfence._core.effects`).

Each method is written once, in :mod:`chainfence._node.methods` (parameters ->
the transport -> a parsed result); :class:`Rpc` runs it over a blocking
transport and :class:`AsyncRpc` over an asyncio one, so the two have the same
methods, results and errors. The drivers here hold the two rules every request
follows:

- **Retries**: a read is retried once when the transport failed (a node
  restarting, a pooled connection the node had closed), not when it refused the
  reply as out of bounds (the same question gets the same reply); a send, a preflight
  and a dev-chain request never are: the sender
  (:mod:`chainfence._node.sending`) owns every resend and reconciles by hash.
  No transport resends by itself (:mod:`chainfence._node.web3_providers`).
- **Errors**: every failure becomes a chainfence error in one place,
  :func:`~chainfence._node.failures.translating`, applied once per request
  (and once around the whole call, for a reply that cannot be read).

Transports (:mod:`chainfence._node.transports`): over a URL, the SDK's own
:class:`~chainfence._node.lean_http.LeanHttp` (no web3 on the way); over a node's
IPC socket, :class:`~chainfence._node.ipc.LeanIpc` (and its asyncio twin); for
asyncio over HTTP, web3's ``AsyncHTTPProvider`` (raw requests, no web3 formatters); the
in-process eth-tester chain (:mod:`chainfence._node.embedded`); or the
provider of any ``Web3`` (:class:`~chainfence._node.web3_providers.ProviderTransport`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from .._core import log as _log
from .._core import metrics as _metrics
from .._core.effects import Steps
from ..errors import ChainfenceError
from . import methods as _methods
from .failures import is_transport_error, translate, translating
from .ipc import AsyncLeanIpc, LeanIpc, is_ipc_path
from .lean_http import LeanHttp
from .methods import Batch, InProcess, Node, Request
from .transports import AsyncTransport, Meanwhile, ReplyRefused, Transport, reply_result
from .web3_providers import AsyncProviderTransport, ProviderTransport, connect_async_http, ipc_web3

logger = _log.get("chainfence.rpc")

__all__ = ["AsyncRpc", "Rpc", "connect_async_node", "connect_http", "connect_node", "transport_of"]

P = ParamSpec("P")
T = TypeVar("T")

#: Reads are tried this many times in all when the transport fails.
_READ_ATTEMPTS = 2

#: No keyword arguments for the transport (a request without ``meanwhile``).
_NONE: dict[str, Any] = {}


def connect_http(url: str, *, timeout: float) -> LeanHttp:
    """The SDK's own transport to ``url``. Its ``w3``, a ``Web3`` for anything the SDK does not wrap (whose
    provider never resends), is built the first time it is asked for: importing web3 costs more than a
    CLI command may take (issue #19)."""
    return LeanHttp(url, timeout=timeout)


def connect_node(url: str, *, timeout: float) -> Any:
    """What :class:`Rpc` takes for ``url``: :func:`connect_http`'s ``Web3`` over HTTP(S); for a node's IPC
    socket (a path ending in ``.ipc``) a ``Web3`` over web3's ``IPCProvider`` (for anything the SDK does
    not wrap) carrying the SDK's own :class:`~chainfence._node.ipc.LeanIpc`, which :class:`Rpc` takes."""
    if is_ipc_path(url):
        w3 = ipc_web3(url, timeout=timeout)
        w3._chainfence_lean = LeanIpc(url, timeout=timeout)
        return w3
    return connect_http(url, timeout=timeout)


def connect_async_node(url: str, *, timeout: float) -> Any:
    """What :class:`AsyncRpc` takes for ``url``: web3's ``AsyncHTTPProvider`` over HTTP(S)
    (:func:`~chainfence._node.web3_providers.connect_async_http`), :class:`~chainfence._node.ipc.AsyncLeanIpc`
    for a node's IPC socket."""
    if is_ipc_path(url):
        return AsyncLeanIpc(url, timeout=timeout)
    return connect_async_http(url, timeout=timeout)


def transport_of(w3: Any) -> Transport:
    """The transport :class:`Rpc` uses for ``w3``: the lean one :func:`connect_http` attached, else ``w3``'s provider."""
    lean = getattr(w3, "_chainfence_lean", None)
    return lean if isinstance(lean, Transport) else ProviderTransport.of(w3)


def _blocking(steps: Callable[Concatenate[Node, P], Steps[T]]) -> Callable[Concatenate[Rpc, P], T]:
    """The method of :class:`Rpc` that runs ``steps`` (one of :mod:`~chainfence._node.methods`). Each takes
    ``meanwhile=``, a callable run while the method's first request is on its way (:data:`Meanwhile`)."""

    def method(self: Rpc, /, *args: P.args, **kwargs: P.kwargs) -> T:
        meanwhile = kwargs.pop("meanwhile", None)
        return self._run(steps(self._node, *args, **kwargs), meanwhile)  # type: ignore[arg-type]

    return _named(method, steps)


def _awaiting(
    steps: Callable[Concatenate[Node, P], Steps[T]],
) -> Callable[Concatenate[AsyncRpc, P], Coroutine[Any, Any, T]]:
    """The coroutine method of :class:`AsyncRpc` that runs ``steps``."""

    async def method(self: AsyncRpc, /, *args: P.args, **kwargs: P.kwargs) -> T:
        meanwhile = kwargs.pop("meanwhile", None)
        return await self._run(steps(self._node, *args, **kwargs), meanwhile)  # type: ignore[arg-type]

    return _named(method, steps)


M = TypeVar("M", bound=Callable[..., Any])


def _named(method: M, steps: Callable[..., Any]) -> M:
    method.__name__ = steps.__name__.removesuffix("_steps")
    method.__qualname__ = method.__name__
    method.__doc__ = steps.__doc__
    return method


class Rpc:
    """The JSON-RPC methods chainfence uses, over a blocking transport, each one translating its failures.

    Results are web3's shapes (``AttributeDict`` blocks and receipts, ``HexBytes``
    hashes; :mod:`chainfence._node.formats`), whatever the transport.
    ``node``: a :class:`~chainfence._node.transports.Transport`, or a ``Web3``
    (:func:`transport_of`). ``embedded`` is accepted for callers of the 0.1
    series: the transport says whether the chain is in process.
    """

    def __init__(self, node: Transport | Any, *, embedded: bool | None = None):
        self.transport: Transport = node if isinstance(node, Transport) else transport_of(node)
        if not isinstance(node, Transport):
            self.w3 = node
        self.embedded = self.transport.embedded
        self._node = Node(embedded=self.embedded, batches=self.transport.batches)

    #: The ``Web3`` this layer was built over, else its transport's (see :meth:`__getattr__`).
    w3: Any

    def __getattr__(self, name: str) -> Any:
        # A transport's ``w3`` is built when first asked for (LeanHttp's: importing web3 costs more than a
        # whole CLI command may take, issue #19), so it is read from the transport then, not here.
        if name == "w3":
            return self.transport.w3
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _run(self, steps: Steps[T], meanwhile: Meanwhile | None = None) -> T:
        """Run a method's steps over the transport: each request retried and translated (:func:`_perform`);
        ``meanwhile`` given to the first request's exchange where the transport overlaps (it runs while the
        request is on its way: :data:`~chainfence._node.transports.Meanwhile`; elsewhere it is not run)."""
        last: str | None = None
        value: Any = None
        error: ChainfenceError | None = None
        while True:
            try:
                effect = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            except ChainfenceError:
                raise
            except Exception as exc:  # a reply the method could not read
                raise translate(exc, last) from exc
            last = _method_of(effect)
            value, error = None, None
            try:
                value = self._perform(effect, meanwhile)
            except ChainfenceError as exc:  # thrown into the method, as a direct call would raise it
                error = exc
            meanwhile = None

    def _perform(self, effect: Request | Batch | InProcess, meanwhile: Meanwhile | None = None) -> Any:
        started = _metrics.rpc_started()
        if started is None:
            return self._exchange(effect, meanwhile)
        try:
            result = self._exchange(effect, meanwhile)
        except ChainfenceError as error:
            _counted(effect, started, error, None)
            raise
        _counted(effect, started, None, result)
        return result

    def _exchange(self, effect: Request | Batch | InProcess, meanwhile: Meanwhile | None = None) -> Any:
        extra = {"meanwhile": meanwhile} if meanwhile is not None and self.transport.overlaps else _NONE
        if type(effect) is Request:
            with translating(effect.method, sender=effect.sender):
                for attempt in range(_READ_ATTEMPTS):
                    try:
                        return self.transport.request(effect.method, effect.params, **extra)
                    except Exception as exc:
                        if not _again(effect, attempt, exc):
                            raise
                    extra = _NONE
        elif type(effect) is Batch:
            with translating(effect.calls[0][0]):
                for attempt in range(_READ_ATTEMPTS):
                    try:
                        return _outcomes(effect, self.transport.batch(effect.calls, **extra))
                    except Exception as exc:
                        if not _again(effect, attempt, exc):
                            raise
                    extra = _NONE
        elif type(effect) is InProcess:
            with translating(effect.name):
                return self.transport.in_process(effect.name, *effect.args)
        raise TypeError(f"not a transport request: {effect!r}")  # pragma: no cover

    def close(self) -> None:
        """Close the transport's idle connections (a later request opens new ones)."""
        self.transport.close()

    request = _blocking(_methods.request_steps)
    tester = _blocking(_methods.tester_steps)
    chain_id = _blocking(_methods.chain_id_steps)
    client_version = _blocking(_methods.client_version_steps)
    identify = _blocking(_methods.identify_steps)
    block_number = _blocking(_methods.block_number_steps)
    block = _blocking(_methods.block_steps)
    blocks = _blocking(_methods.blocks_steps)
    pending_timestamp = _blocking(_methods.pending_timestamp_steps)
    call_and_pending_timestamp = _blocking(_methods.call_and_pending_timestamp_steps)
    call = _blocking(_methods.call_steps)
    estimate_gas = _blocking(_methods.estimate_gas_steps)
    dev_preflight = _blocking(_methods.dev_preflight_steps)
    code = _blocking(_methods.code_steps)
    code_and_call = _blocking(_methods.code_and_call_steps)
    nonce = _blocking(_methods.nonce_steps)
    balance = _blocking(_methods.balance_steps)
    logs = _blocking(_methods.logs_steps)
    send_raw = _blocking(_methods.send_raw_steps)
    send_raw_sync = _blocking(_methods.send_raw_sync_steps)
    transaction = _blocking(_methods.transaction_steps)
    receipt = _blocking(_methods.receipt_steps)
    traced_revert = _blocking(_methods.traced_revert_steps)
    block_receipts = _blocking(_methods.block_receipts_steps)
    gas_price = _blocking(_methods.gas_price_steps)
    max_priority_fee = _blocking(_methods.max_priority_fee_steps)


class AsyncRpc:
    """:class:`Rpc` over an asyncio transport: the same methods (awaitable), written once
    (:mod:`chainfence._node.methods`), the same retry rule and the same translation. The core
    (:mod:`chainfence._core.effects`) calls whichever of the two its driver holds.

    ``node``: an :class:`~chainfence._node.transports.AsyncTransport`, or an ``AsyncWeb3``.
    """

    def __init__(self, node: AsyncTransport | Any, *, embedded: bool | None = None):
        self.transport: AsyncTransport = node if isinstance(node, AsyncTransport) else AsyncProviderTransport.of(node)
        self.w3: Any = self.transport.w3
        self.embedded = self.transport.embedded
        self._node = Node(embedded=self.embedded, batches=self.transport.batches)

    @classmethod
    def twin_of(cls, rpc: Rpc, *, timeout: float) -> AsyncRpc:
        """The asyncio layer to the node ``rpc`` talks to: the same URL, or the same in-process chain."""
        return cls(rpc.transport.asyncio_twin(timeout=timeout))

    async def _run(self, steps: Steps[T], meanwhile: Meanwhile | None = None) -> T:
        """:meth:`Rpc._run`, awaiting the transport."""
        last: str | None = None
        value: Any = None
        error: ChainfenceError | None = None
        while True:
            try:
                effect = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            except ChainfenceError:
                raise
            except Exception as exc:
                raise translate(exc, last) from exc
            last = _method_of(effect)
            value, error = None, None
            try:
                value = await self._perform(effect, meanwhile)
            except ChainfenceError as exc:
                error = exc
            meanwhile = None

    async def _perform(self, effect: Request | Batch | InProcess, meanwhile: Meanwhile | None = None) -> Any:
        started = _metrics.rpc_started()
        if started is None:
            return await self._exchange(effect, meanwhile)
        try:
            result = await self._exchange(effect, meanwhile)
        except ChainfenceError as error:
            _counted(effect, started, error, None)
            raise
        _counted(effect, started, None, result)
        return result

    async def _exchange(self, effect: Request | Batch | InProcess, meanwhile: Meanwhile | None = None) -> Any:
        extra = {"meanwhile": meanwhile} if meanwhile is not None and self.transport.overlaps else _NONE
        if type(effect) is Request:
            with translating(effect.method, sender=effect.sender):
                for attempt in range(_READ_ATTEMPTS):
                    try:
                        return await self.transport.request(effect.method, effect.params, **extra)
                    except Exception as exc:
                        if not _again(effect, attempt, exc):
                            raise
                    extra = _NONE
        elif type(effect) is Batch:
            with translating(effect.calls[0][0]):
                for attempt in range(_READ_ATTEMPTS):
                    try:
                        return _outcomes(effect, await self.transport.batch(effect.calls, **extra))
                    except Exception as exc:
                        if not _again(effect, attempt, exc):
                            raise
                    extra = _NONE
        elif type(effect) is InProcess:
            with translating(effect.name):
                return await self.transport.in_process(effect.name, *effect.args)
        raise TypeError(f"not a transport request: {effect!r}")  # pragma: no cover

    async def close(self) -> None:
        """Close the transport's HTTP session (none for the embedded chain)."""
        await self.transport.close()

    request = _awaiting(_methods.request_steps)
    tester = _awaiting(_methods.tester_steps)
    chain_id = _awaiting(_methods.chain_id_steps)
    client_version = _awaiting(_methods.client_version_steps)
    identify = _awaiting(_methods.identify_steps)
    block_number = _awaiting(_methods.block_number_steps)
    block = _awaiting(_methods.block_steps)
    blocks = _awaiting(_methods.blocks_steps)
    pending_timestamp = _awaiting(_methods.pending_timestamp_steps)
    call_and_pending_timestamp = _awaiting(_methods.call_and_pending_timestamp_steps)
    call = _awaiting(_methods.call_steps)
    estimate_gas = _awaiting(_methods.estimate_gas_steps)
    dev_preflight = _awaiting(_methods.dev_preflight_steps)
    code = _awaiting(_methods.code_steps)
    code_and_call = _awaiting(_methods.code_and_call_steps)
    nonce = _awaiting(_methods.nonce_steps)
    balance = _awaiting(_methods.balance_steps)
    logs = _awaiting(_methods.logs_steps)
    send_raw = _awaiting(_methods.send_raw_steps)
    send_raw_sync = _awaiting(_methods.send_raw_sync_steps)
    transaction = _awaiting(_methods.transaction_steps)
    receipt = _awaiting(_methods.receipt_steps)
    traced_revert = _awaiting(_methods.traced_revert_steps)
    block_receipts = _awaiting(_methods.block_receipts_steps)
    gas_price = _awaiting(_methods.gas_price_steps)
    max_priority_fee = _awaiting(_methods.max_priority_fee_steps)


def _again(effect: Request | Batch, attempt: int, exc: Exception) -> bool:
    """Whether a failed request is asked once more: a read (a batch of reads too) whose transport failed."""
    retry = effect.retry
    if retry and attempt + 1 < _READ_ATTEMPTS and is_transport_error(exc) and not isinstance(exc, ReplyRefused):
        logger.debug("%s failed in transit (%s); retrying once", _method_of(effect), exc)
        return True
    return False


def _counted(effect: Request | Batch | InProcess, started: float, error: ChainfenceError | None, result: Any) -> None:
    """The metrics of one round trip to the node (the embedded chain's own operations are none)."""
    if type(effect) is Request:
        _metrics.rpc_done((effect.method,), started, error)
    elif type(effect) is Batch:
        _metrics.rpc_done([method for method, _params in effect.calls], started, error, result)


def _method_of(effect: Request | Batch | InProcess) -> str:
    if type(effect) is Request:
        return effect.method
    if type(effect) is Batch:
        return effect.calls[0][0]
    return effect.name  # type: ignore[union-attr]


def _outcomes(batch: Batch, replies: Sequence[Any]) -> list[Any]:
    """Each reply of a batch read: its result, or the chainfence error it carries."""
    outcomes: list[Any] = []
    for (method, _params), reply in zip(batch.calls, replies, strict=True):
        if type(reply) is dict and reply.get("error") is None and "result" in reply:
            outcomes.append(reply["result"])  # reply_result's answer, without a translation to set up
            continue
        try:
            with translating(method):
                outcomes.append(reply_result(method, reply))
        except ChainfenceError as error:
            outcomes.append(error)
    return outcomes
