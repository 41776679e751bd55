"""Short scratch directories for Unix sockets, removed when the test process exits.

A Unix socket's path may be at most 107 bytes, so sockets cannot live under pytest's ``tmp_path``
(deep, per test). Every socket the suite makes lives in one short directory per process instead,
``/tmp/cf-XXXXXXXX/<n>-<prefix>/<name>``, which is deleted when that process exits: a run leaves
no socket directories behind.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = ["socket_path"]

_lock = threading.Lock()
_counter = itertools.count()
_roots: dict[int, Path] = {}  # by process id: a forked child makes (and removes) its own


def _process_root() -> Path:
    pid = os.getpid()
    with _lock:
        if pid not in _roots:
            root = _roots[pid] = Path(tempfile.mkdtemp(prefix="cf-"))
            atexit.register(_remove, root, pid)
        return _roots[pid]


def _remove(root: Path, owner: int) -> None:
    if os.getpid() == owner:  # a forked child inherits the hook; the directory is its parent's
        shutil.rmtree(root, ignore_errors=True)


def socket_path(prefix: str, name: str) -> str:
    """A fresh path ``<root>/<n>-<prefix>/<name>`` for a socket, in a directory that exists and is empty."""
    directory = _process_root() / f"{next(_counter)}-{prefix}"
    directory.mkdir()
    return str(directory / name)
