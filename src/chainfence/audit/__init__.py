"""Who held which token, when, and why it changed hands: read from the registry's events.

The registry's events are the record: :class:`LeaseEvent` is one of them,
decoded, with the resource's name (from ``ResourceNamed``) and the block's
timestamp (chain time). ::

    for event in audit.history(registry, "reports/daily"):   # await it for an AsyncRegistry
        reason = event.reason.name.lower() if event.reason is not None else "-"  # acquisitions only
        print(event.block_timestamp, event.kind.value, event.token, event.holder, reason)

Events are read from the registry's deployment block on, in pages of
blocks that fit a provider's ``eth_getLogs`` limits (:mod:`chainfence._node.events`).
Names are untrusted: anyone can publish one by calling the contract, so
``resource`` is the name only when it is one the SDK would publish, and
``resource_display`` is always safe to print (escaped; never spoofable by
control or bidi-override characters).

The history is written in :mod:`chainfence.audit._history` (the one route to it: the
registry has none); beside it are the audit index (:mod:`chainfence.audit.index`), the
timeline (:mod:`chainfence.audit.timeline`) and the watchdog
(:mod:`chainfence.audit.watchdog`).
"""

from __future__ import annotations

from ._history import EventKind, LeaseEvent, history

__all__ = ["EventKind", "LeaseEvent", "history"]
