"""A guard's record of the writes it refused: the file ``chainfence audit timeline --rejections`` draws.

``Guard(..., rejection_log=PATH)`` appends one JSON object per line for every refusal of ``check`` and
``check_request`` (a token not current, a holder not admitted, a request that failed its checks)::

    {"resource": "reports/daily", "time": 1795348987, "token": 7, "holder": null,
     "reason": "StaleToken: token 7 for 'reports/daily' is stale: token 8 superseded it"}

the fields of :class:`chainfence.audit.timeline.Rejection`. ``time`` is this machine's clock in unix
seconds, not the chain's (a stale token is refused from the guard's store, with no chain read to learn
its time; on a live chain the two are within a block or so; a dev chain whose time a test moved is
elsewhere). ``holder`` is the request's signer for ``check_request``, None for ``check`` (a bare
token names no sender).

Each line is one ``write`` to a file opened ``O_APPEND``: lines of guards in several processes never
interleave. The file is bounded: at :data:`MAX_BYTES` it takes no more lines (a warning says so,
once), so a flood of stale writes cannot fill the disk. Recording never changes a check's outcome: a
file that cannot be written is logged, and the refusal is raised as ever.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .._core import log as _log

__all__ = ["MAX_BYTES", "RejectionLog"]

logger = _log.get("chainfence.guard")

#: The size at which the log takes no more lines (16 MiB: some 100,000 refusals).
MAX_BYTES = 16 * 1024 * 1024
#: The longest ``reason`` kept (an error's message; its start says what it is).
MAX_REASON = 500


class RejectionLog:
    """Appends a guard's refusals to ``path`` (see the module docstring); :meth:`close` when done."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time, max_bytes: int = MAX_BYTES):
        self.path = path
        self._clock = clock
        self._max_bytes = max_bytes
        self._fd: int | None = None
        self._full = False
        self._lock = threading.Lock()

    def record(self, resource: object, token: object, holder: object, refusal: BaseException) -> None:
        """One line for ``refusal`` of ``token`` for ``resource`` (skipped when they are not a name and a
        token: nothing to draw)."""
        if not isinstance(resource, str) or not resource or type(token) is not int or token < 0:
            return
        reason = f"{type(refusal).__name__}: {refusal}"
        line = {
            "resource": resource,
            "time": int(self._clock()),
            "token": token,
            "holder": holder if isinstance(holder, str) and holder else None,
            "reason": reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1] + "…",
        }
        data = (json.dumps(line, ensure_ascii=True) + "\n").encode("ascii")
        with self._lock:
            if self._full:
                return
            try:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                if os.fstat(self._fd).st_size + len(data) > self._max_bytes:
                    self._full = True
                    logger.warning(
                        "guard rejection log %s reached %d bytes: no more rejections are recorded in it",
                        self.path,
                        self._max_bytes,
                    )
                    return
                os.write(self._fd, data)
            except OSError as error:
                logger.warning("guard could not record a rejection in %s: %s", self.path, error)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
