"""Prometheus metrics for agents, guards and nodes: ``pip install '.[metrics]'`` in a chainfence checkout.

::

    import chainfence.metrics

    chainfence.metrics.serve(9464)        # GET http://127.0.0.1:9464/metrics, from a daemon thread
    chainfence.metrics.enable()           # or: count into prometheus_client's REGISTRY, served by your app

Nothing is counted until :func:`enable` (or :func:`serve`, or :func:`exposition`) runs: before that, and
without the extra, the SDK's hooks return at once and ``prometheus_client`` is never imported. The
commands serve them too: ``chainfence lock`` and ``chainfence node`` with ``--metrics-port N`` (or
``CHAINFENCE_METRICS_PORT``), ``chainfence mcp --http`` at ``/metrics`` of its own server,
:class:`~chainfence.integrations.asgi.FencingMiddleware` with ``metrics_path="/metrics"``.

The metrics (keep-alive renewals and their margin, leases ended by reason, waiting, guard verdicts and
follower lag, group commit, JSON-RPC requests and errors, audit sync, the node's latest token), their
labels, and a PromQL query for each: ``docs/metrics.md``. No label takes unbounded values: resource
names, holders and tokens are never labels.
"""

from __future__ import annotations

from ._core.metrics import METRICS, MetricsServer, enable, exposition, serve

__all__ = ["METRICS", "MetricsServer", "enable", "exposition", "serve"]
