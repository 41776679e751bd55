"""Chain times as people read them: the one formatter of the CLI's tables and the errors' messages.

A chain time is a block timestamp in Unix seconds (``Lease.expires_at``, ``LeaseHeld.expires_at``,
``LockDelayed.until``); documents for programs (``--json``, ``details()``) keep the number, text for
people shows :func:`chain_time`. Imports nothing at module level (the errors import it).
"""

from __future__ import annotations

__all__ = ["chain_time"]

#: The years a date is written for (``datetime``'s); outside them a chain time is shown as a number.
_YEARS = range(1, 10_000)


def chain_time(seconds: object) -> str:
    """``seconds`` (a chain time) as ``2026-11-22 12:03:07 UTC``; a number no calendar holds (a dev chain
    moved to the year 300000) as ``chain time N``.

    The calendar is :mod:`time`'s (UTC, proleptic Gregorian), written as ``datetime`` writes it for the
    years it holds, 1 to 9999; not ``datetime`` itself, whose module a per-task command would otherwise
    load for this one line (docs/explanation/design.md, "One node stack, and where start-time work may live")."""
    import time

    try:
        moment = time.gmtime(int(seconds))  # type: ignore[call-overload]
    except (OverflowError, ValueError, OSError, TypeError):
        return f"chain time {seconds}"
    if moment.tm_year not in _YEARS:
        return f"chain time {seconds}"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", moment)
