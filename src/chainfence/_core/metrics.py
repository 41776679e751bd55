"""Prometheus metrics: the hooks the SDK calls, no-ops until :func:`enable` (the ``[metrics]`` extra).

Every hook begins by reading :data:`live`; until :func:`enable` runs it is None and the hook returns at
once: nothing of ``prometheus_client`` is imported, nothing is counted or timed. The hot paths (a
guard's check at its mark) test ``live`` inline before they call.

Labels take values from closed sets only, so the number of series is bounded whatever the SDK is
given: resource names, holders and tokens are never labels; a JSON-RPC method outside
:data:`RPC_METHODS` is counted as ``"other"``, an error as its class name when the class is one of
:mod:`chainfence.errors`' (``"other"`` otherwise), a reason outside its set as ``"other"``.
The metrics, their labels and a query for each: ``docs/metrics.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .. import errors as _errors

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "LEASE_END_REASONS",
    "METRICS",
    "RPC_METHODS",
    "MetricsServer",
    "enable",
    "exposition",
    "live",
    "serve",
]

#: The JSON-RPC methods chainfence sends (and the dev nodes' controls): each its own ``method`` label;
#: any other (``Rpc.request`` of a method of the caller's choosing) is ``"other"``.
RPC_METHODS = frozenset(
    {
        "eth_blockNumber",
        "eth_call",
        "eth_chainId",
        "eth_estimateGas",
        "eth_feeHistory",
        "eth_gasPrice",
        "eth_getBalance",
        "eth_getBlockByHash",
        "eth_getBlockByNumber",
        "eth_getBlockReceipts",
        "eth_getCode",
        "eth_getLogs",
        "eth_getProof",
        "eth_getTransactionByHash",
        "eth_getTransactionCount",
        "eth_getTransactionReceipt",
        "eth_maxPriorityFeePerGas",
        "eth_sendRawTransaction",
        "eth_sendRawTransactionSync",
        "debug_traceTransaction",
        "net_version",
        "web3_clientVersion",
        "anvil_getAutomine",
        "anvil_mine",
        "anvil_setAutomine",
        "evm_increaseTime",
        "evm_mine",
        "evm_revert",
        "evm_setNextBlockTimestamp",
        "evm_snapshot",
        "hardhat_mine",
    }
)

#: How a lease this process held ended, as it learned it (:mod:`chainfence.endings`: ``End`` and
#: ``LocalEnd``, by value).
LEASE_END_REASONS = frozenset(
    {"expired", "released", "completed", "superseded", "revoked", "granted", "rolled_back", "deadline", "error"}
)

_ERROR_NAMES = frozenset(name for name in _errors.__all__ if isinstance(getattr(_errors, name, None), type))

#: Every metric: (name as exposed, type, labels, help). ``tests/unit/test_metrics.py`` holds docs/metrics.md
#: to this list.
METRICS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    (
        "chainfence_keepalive_renewals_total",
        "counter",
        ("outcome",),
        "Keep-alive renewals by outcome: confirmed, failed (retried), refused (the lease had ended).",
    ),
    (
        "chainfence_keepalive_renewal_margin_seconds",
        "histogram",
        (),
        "Seconds left before the keep-alive's local safe deadline when a renewal was confirmed.",
    ),
    (
        "chainfence_leases_ended_total",
        "counter",
        ("reason",),
        "Leases this process held that ended: released or completed by it, or lost under keep() (why).",
    ),
    (
        "chainfence_acquire_wait_seconds",
        "histogram",
        ("outcome",),
        "Time an acquisition with wait= spent, by outcome: acquired, timed_out, not_admitted, error.",
    ),
    (
        "chainfence_guard_checks_total",
        "counter",
        ("verdict", "reason"),
        "Guard checks by verdict (accepted, rejected, failed) and reason (how accepted, or the error's class).",
    ),
    (
        "chainfence_guard_follower_lag_blocks",
        "gauge",
        (),
        "Blocks between the confirmed head and the block a follow guard's follower reached, at its last sync.",
    ),
    (
        "chainfence_guard_follower_syncs_total",
        "counter",
        ("outcome",),
        "Follower syncs by outcome: ok, logs_incomplete, rolled_back, error.",
    ),
    (
        "chainfence_guard_follower_last_sync_timestamp_seconds",
        "gauge",
        (),
        "Unix time of the last sync that brought a follower up to the confirmed head.",
    ),
    (
        "chainfence_batch_size_operations",
        "histogram",
        (),
        "Operations per group-commit transaction sent.",
    ),
    (
        "chainfence_batches_total",
        "counter",
        ("outcome",),
        "Group-commit transactions by outcome: mined, failed (as a whole), requeued (could not be paid for).",
    ),
    (
        "chainfence_batch_operations_total",
        "counter",
        ("kind", "outcome"),
        "Group-commit operations by kind (acquire, renew, release) and outcome: ok, refused, failed.",
    ),
    (
        "chainfence_rpc_requests_total",
        "counter",
        ("method",),
        "JSON-RPC calls to the node by method (each call of a batch counts).",
    ),
    (
        "chainfence_rpc_errors_total",
        "counter",
        ("method", "kind"),
        "JSON-RPC calls that failed, by method and kind (the chainfence error's class name).",
    ),
    (
        "chainfence_rpc_request_duration_seconds",
        "histogram",
        ("method",),
        "Round trips to the node by method (a batch of calls: method 'batch').",
    ),
    (
        "chainfence_audit_synced_block",
        "gauge",
        (),
        "The last block the audit index holds.",
    ),
    (
        "chainfence_audit_behind_blocks",
        "gauge",
        (),
        "Blocks between the audit sync's target (the confirmed head) and the last block indexed.",
    ),
    (
        "chainfence_audit_events_indexed_total",
        "counter",
        (),
        "Registry events written to the audit index.",
    ),
    (
        "chainfence_audit_syncs_total",
        "counter",
        ("outcome",),
        "Audit index syncs by outcome: ok, held (a block's logs incomplete: stopped before it), error.",
    ),
    (
        "chainfence_node_latest_token",
        "gauge",
        (),
        "The registry's latest token as `chainfence node` last read it.",
    ),
)

_BUCKETS = {
    "chainfence_keepalive_renewal_margin_seconds": (0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600),
    "chainfence_acquire_wait_seconds": (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
    "chainfence_batch_size_operations": (1, 2, 4, 8, 16, 32, 64),
    "chainfence_rpc_request_duration_seconds": (
        0.001,
        0.0025,
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
        2.5,
        5,
        10,
        30,
    ),
}


class _ThreadCounts:
    """A count for a hot path: each thread adds to a cell of its own (no lock, no lost increment), and
    :meth:`flush` hands what was added since the last flush to a ``prometheus_client`` counter when the
    registry is collected. ``prometheus_client``'s ``inc`` takes a lock: it tripled the time of a guard's
    check at its mark (``docs/metrics.md``, "Cost")."""

    def __init__(self) -> None:
        #: The counter the counts go to (set once it is made).
        self.counter: Any = None
        self._local = threading.local()
        self._cells: list[list[int]] = []
        self._lock = threading.Lock()
        self._flushed = 0

    def inc(self) -> None:
        try:
            self._local.cell[0] += 1
        except AttributeError:
            cell = [1]
            with self._lock:
                self._cells.append(cell)
            self._local.cell = cell

    def flush(self) -> None:
        with self._lock:
            total = sum(cell[0] for cell in self._cells)
            if total > self._flushed:
                self.counter.inc(total - self._flushed)
                self._flushed = total

    # A collector (prometheus_client's protocol) that yields nothing: it flushes before the counter is read.
    def describe(self) -> list[Any]:
        return []

    def collect(self) -> list[Any]:
        self.flush()
        return []


class _Live:
    """The metric objects, registered in one ``prometheus_client`` registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.registry = registry
        # A guard's check at its mark (the hot path): counted per thread, handed to its counter when the registry
        # is collected. The registry collects in the order collectors were registered: this one first.
        self.at_mark = _ThreadCounts()
        registry.register(self.at_mark)
        made: dict[str, Any] = {}
        for name, kind, labels, help_text in METRICS:
            if kind == "counter":
                made[name] = Counter(name.removesuffix("_total"), help_text, labels, registry=registry)
            elif kind == "gauge":
                made[name] = Gauge(name, help_text, labels, registry=registry)
            else:
                made[name] = Histogram(name, help_text, labels, registry=registry, buckets=_BUCKETS[name])
        self.renewals = made["chainfence_keepalive_renewals_total"]
        self.margin = made["chainfence_keepalive_renewal_margin_seconds"]
        self.ended = made["chainfence_leases_ended_total"]
        self.waited = made["chainfence_acquire_wait_seconds"]
        self.checks = made["chainfence_guard_checks_total"]
        self.lag = made["chainfence_guard_follower_lag_blocks"]
        self.syncs = made["chainfence_guard_follower_syncs_total"]
        self.synced_at = made["chainfence_guard_follower_last_sync_timestamp_seconds"]
        self.batch_size = made["chainfence_batch_size_operations"]
        self.batches = made["chainfence_batches_total"]
        self.batch_ops = made["chainfence_batch_operations_total"]
        self.requests = made["chainfence_rpc_requests_total"]
        self.rpc_errors = made["chainfence_rpc_errors_total"]
        self.rpc_seconds = made["chainfence_rpc_request_duration_seconds"]
        self.audit_block = made["chainfence_audit_synced_block"]
        self.audit_behind = made["chainfence_audit_behind_blocks"]
        self.audit_events = made["chainfence_audit_events_indexed_total"]
        self.audit_syncs = made["chainfence_audit_syncs_total"]
        self.node_token = made["chainfence_node_latest_token"]
        self.at_mark.counter = self.checks.labels("accepted", "at_mark")


#: The metrics, once :func:`enable` ran (None: every hook returns at once).
live: _Live | None = None
_enabling = threading.Lock()


def enable(registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """Count from now on, into ``registry`` (default: ``prometheus_client``'s own ``REGISTRY``); returns it.

    Idempotent; a second call naming another registry is :class:`~chainfence.errors.InvalidInput` (the
    metrics live in one). Without the ``[metrics]`` extra: :class:`~chainfence.errors.ExtraNotInstalled`.
    """
    global live
    with _enabling:
        if live is not None:
            if registry is not None and registry is not live.registry:
                raise _errors.InvalidInput(
                    "chainfence's metrics are registered in another registry already: they live in one",
                    argument="registry",
                )
            return live.registry
        try:
            import prometheus_client
        except ImportError as missing:
            raise _errors.ExtraNotInstalled(
                extra="metrics", feature="Prometheus metrics", missing="prometheus_client"
            ) from missing
        chosen = registry if registry is not None else prometheus_client.REGISTRY
        live = _Live(chosen)
        return chosen


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus' text format, and its content type (enabling them first)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    registry = enable()
    return generate_latest(registry), CONTENT_TYPE_LATEST


class MetricsServer:
    """The HTTP server :func:`serve` started (a daemon thread): ``port``, ``url``, :meth:`close`."""

    def __init__(self, server: Any, thread: threading.Thread, host: str):
        self._server = server
        self._thread = thread
        self.host = host
        self.port: int = int(server.server_port)
        self.url = f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop answering and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def serve(port: int, *, host: str = "127.0.0.1") -> MetricsServer:
    """Answer ``GET /metrics`` on ``host:port`` from a daemon thread (``port`` 0: a free one, see
    :attr:`MetricsServer.port`), enabling the metrics first."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65_535:
        raise _errors.InvalidInput(f"port must be an int in 0..65535, got {port!r}", argument="port", value=port)
    registry = enable()
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(server, thread, host)


# -- the hooks ---------------------------------------------------------------------------------------------


def _one_of(value: str, allowed: frozenset[str]) -> str:
    return value if value in allowed else "other"


def error_kind(error: BaseException) -> str:
    """An error's label value: its class name when :mod:`chainfence.errors` defines it, else ``"other"``."""
    name = type(error).__name__
    return name if name in _ERROR_NAMES and type(error) is getattr(_errors, name) else "other"


def renewal(outcome: str, margin: float | None = None) -> None:
    """A keep-alive renewal settled: ``confirmed`` (``margin``: seconds left before the safe deadline),
    ``failed`` (retried) or ``refused`` (the lease ended)."""
    metrics = live
    if metrics is None:
        return
    metrics.renewals.labels(_one_of(outcome, _RENEWAL_OUTCOMES)).inc()
    if margin is not None:
        metrics.margin.observe(max(0.0, margin))


_RENEWAL_OUTCOMES = frozenset({"confirmed", "failed", "refused"})


def lease_ended(reason: str, count: int = 1) -> None:
    """``count`` leases of this process ended, by ``reason`` (:data:`LEASE_END_REASONS`)."""
    metrics = live
    if metrics is None:
        return
    metrics.ended.labels(_one_of(str(reason), LEASE_END_REASONS)).inc(count)


_WAIT_OUTCOMES = frozenset({"acquired", "timed_out", "not_admitted", "error"})


def waited(seconds: float, outcome: str) -> None:
    """An acquisition with ``wait=`` ended after ``seconds``: ``acquired``, ``timed_out``, ``not_admitted``
    or ``error``."""
    metrics = live
    if metrics is None:
        return
    metrics.waited.labels(_one_of(outcome, _WAIT_OUTCOMES)).observe(max(0.0, seconds))


_ACCEPTED = frozenset({"at_mark", "verified", "new_mark"})


def guard_accepted(reason: str) -> None:
    """A guard accepted a token: ``at_mark`` (no chain asked), ``verified`` (the chain asked, the same
    mark), ``new_mark`` (a new epoch recorded)."""
    metrics = live
    if metrics is None:
        return
    if reason == "at_mark":
        metrics.at_mark.inc()
    else:
        metrics.checks.labels("accepted", _one_of(reason, _ACCEPTED)).inc()


def guard_refused(error: BaseException) -> None:
    """A guard refused a token with ``error``: ``failed`` when it could not judge (the chain or its store
    failed: fail closed), ``rejected`` otherwise."""
    metrics = live
    if metrics is None:
        return
    failed = isinstance(error, (_errors.ChainError, _errors.GuardError)) or not isinstance(
        error, _errors.ChainfenceError
    )
    metrics.checks.labels("failed" if failed else "rejected", error_kind(error)).inc()


_SYNC_OUTCOMES = frozenset({"ok", "logs_incomplete", "rolled_back", "error"})


def follower_synced(outcome: str, lag: int | None) -> None:
    """A follower's sync ended (``outcome``); ``lag``: blocks between the confirmed head and where it stands."""
    metrics = live
    if metrics is None:
        return
    metrics.syncs.labels(_one_of(outcome, _SYNC_OUTCOMES)).inc()
    if lag is not None:
        metrics.lag.set(max(0, lag))
    if outcome == "ok":
        metrics.synced_at.set(time.time())


_BATCH_OUTCOMES = frozenset({"mined", "failed", "requeued"})
_OP_KINDS = frozenset({"acquire", "renew", "release"})


def batch_sent(kinds: Sequence[str], outcome: str, errors: Iterable[BaseException | None] = ()) -> None:
    """A group-commit transaction of operations of ``kinds`` ended (``outcome``); ``errors``: each
    operation's (None: it went through), when it was mined."""
    metrics = live
    if metrics is None:
        return
    metrics.batches.labels(_one_of(outcome, _BATCH_OUTCOMES)).inc()
    if outcome == "requeued":
        return
    metrics.batch_size.observe(len(kinds))
    if outcome == "failed":
        for kind in kinds:
            metrics.batch_ops.labels(_one_of(kind, _OP_KINDS), "failed").inc()
        return
    for kind, error in zip(kinds, errors, strict=True):
        said = (
            "ok"
            if error is None
            else "refused"
            if isinstance(error, (_errors.LeaseError, _errors.NamespaceError))
            else "failed"
        )
        metrics.batch_ops.labels(_one_of(kind, _OP_KINDS), said).inc()


def rpc_started() -> float | None:
    """The start of a round trip to the node (None: metrics off, nothing to time)."""
    return None if live is None else time.perf_counter()


def rpc_done(
    methods: Sequence[str], started: float, error: BaseException | None, replies: Sequence[Any] | None = None
) -> None:
    """A round trip that began at ``started`` (:func:`rpc_started`) for ``methods`` (one: a request; more: a
    batch) ended: ``error`` failed it whole; ``replies`` (a batch's) may carry one error each."""
    metrics = live
    if metrics is None:
        return
    elapsed = time.perf_counter() - started
    named = [_one_of(method, RPC_METHODS) for method in methods]
    metrics.rpc_seconds.labels(named[0] if len(named) == 1 else "batch").observe(elapsed)
    for index, method in enumerate(named):
        metrics.requests.labels(method).inc()
        failed = error
        if failed is None and replies is not None and index < len(replies):
            reply = replies[index]
            failed = reply if isinstance(reply, BaseException) else None
        if failed is not None:
            metrics.rpc_errors.labels(method, error_kind(failed)).inc()


def audit_page(synced: int | None, target: int, events: int) -> None:
    """An audit sync committed a page: the index reaches ``synced``, aims at ``target``, ``events`` written."""
    metrics = live
    if metrics is None:
        return
    if synced is not None:
        metrics.audit_block.set(synced)
        metrics.audit_behind.set(max(0, target - synced))
    if events:
        metrics.audit_events.inc(events)


_AUDIT_OUTCOMES = frozenset({"ok", "held", "error"})


def audit_synced(outcome: str, synced: int | None, target: int) -> None:
    """An audit sync ended (``outcome``) with the index at ``synced``, its target ``target``."""
    metrics = live
    if metrics is None:
        return
    metrics.audit_syncs.labels(_one_of(outcome, _AUDIT_OUTCOMES)).inc()
    if synced is not None:
        metrics.audit_block.set(synced)
        metrics.audit_behind.set(max(0, target - synced))


def node_token(latest: int) -> None:
    """``chainfence node`` read the registry's latest token."""
    metrics = live
    if metrics is None:
        return
    metrics.node_token.set(latest)
