"""A watchdog over a registry's leases: holders that are stuck, crashed, or hold too long.

A heartbeat is not proof of progress. A holder that renews with a progress
marker (``lease.renew(progress=...)``) records how far its work has come in
each ``LeaseRenewed`` event; the watchdog reads those events and lists::

    stuck      live, renewed at least N times in a row without its marker changing
               (alive but stuck: the renewer runs, the work does not)
    crashed    the latest lease of a resource expired without a release or a
               completion (its holder died, or stopped renewing)
    long_held  live, held (under one token) longer than X seconds of chain time

::

    report = registry.stuck(renewals=3, longer_than=3_600)
    for lease in report.stuck:
        print(lease.resource_display, lease.holder, lease.unchanged_renewals)

Only holders that report markers can be judged stuck: a plain renewal says
nothing about progress, so after a holder's first marker it counts as one
more renewal without progress, and before it the holder is not judged.

Every way a lease ends is handled by name (:mod:`chainfence.endings`): a
released or revoked lease is neither stuck nor crashed; a grant or a
reacquisition (superseded) starts the next token's record, and the old one is
never listed; an expiry without a release or a completion is ``crashed``; a
plain lease's completion records a result and ends nothing (a holder that
keeps renewing without progress afterwards is still ``stuck``), a claimed
item's completion ends it. Events are read through :mod:`chainfence._node.events` (paged from the registry's
deployment block, within provider range limits); every finding is then
checked against the registry's current state (one ``leaseOf`` call each), so
a lease that changed hands after the last event read, a claimed item that
was completed, or a lease the chain rolled back is never listed. Names are
untrusted bytes from the chain: ``resource`` is set only for a name the SDK
would publish (a claimed item's: ``workset»item``), ``resource_display`` is
always safe to print, an item as ``workset»item``.

The watchdog is written in :mod:`chainfence._stuck` (the SDK's layer:
``Registry.stuck`` runs it too); this module re-exports it unchanged.
"""

from __future__ import annotations

from .._stuck import DEFAULT_RENEWALS, StuckLease, StuckReport, stuck

__all__ = ["DEFAULT_RENEWALS", "StuckLease", "StuckReport", "stuck"]
