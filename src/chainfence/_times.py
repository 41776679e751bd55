"""Chain times as people read them: the one formatter of the CLI's tables and the errors' messages.

A chain time is a block timestamp in Unix seconds (``Lease.expires_at``, ``LeaseHeld.expires_at``,
``LockDelayed.until``); documents for programs (``--json``, ``details()``) keep the number, text for
people shows :func:`chain_time`. Imports nothing at module level (the errors import it).
"""

from __future__ import annotations

__all__ = ["chain_time"]


def chain_time(seconds: object) -> str:
    """``seconds`` (a chain time) as ``2026-11-22 12:03:07 UTC``; a number no calendar holds (a dev chain
    moved to the year 300000) as ``chain time N``."""
    import datetime

    try:
        moment = datetime.datetime.fromtimestamp(int(seconds), datetime.UTC)  # type: ignore[call-overload]
    except (OverflowError, ValueError, OSError, TypeError):
        return f"chain time {seconds}"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
