"""The suite's anvil: the package's own local-node helpers, pointed at this checkout's node_modules.

The binary comes from the project's npm install of ``@foundry-rs/anvil``
(package.json, pinned); the platform package ships the native executable,
which runs directly (no node wrapper in between, so signals reach anvil).

Clock: anvil stamps blocks with the wall clock (plus whatever offset time
travel added), and its pending block, which ``chain.now()`` reads, moves
with it between transactions. A test that does chain-time arithmetic over
several requests ("advance to expires_at - 1, then check it is live") then
depends on no wall-clock second ending in between: on a loaded machine one
often does. ``Anvil(logical_clock=True)`` gives the node the clock the
embedded chain has: it moves only when a test moves it (``advance_time``,
``set_next_block_time``), and every block is stamped with the time it
stands at. The session's node (tests/conftest.py) runs that way.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil, free_port

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "Anvil", "anvil_binary", "dev_keys", "free_port", "ipc_path"]

#: Seconds anvil may take to accept connections: a safety net against a node that never starts.
START_TIMEOUT = 60.0


def ipc_path() -> str:
    """A fresh path for an IPC socket, short enough for one (Unix sockets: at most 107 bytes)."""
    from tests.support.scratch import socket_path

    return socket_path("anvil", "anvil.ipc")


def anvil_binary() -> str:
    return find_anvil(start=ROOT)


class _SuiteAnvil(AnvilProcess):
    def __init__(self, *, logical_clock: bool = False, **options):
        super().__init__(anvil_binary(), **options)
        self.logical_clock = logical_clock

    def start(self, timeout: float = START_TIMEOUT) -> AnvilProcess:
        super().start(timeout=timeout)
        if self.logical_clock:
            # Interval 0: each block carries the timestamp the chain stands at, so time
            # moves only through evm_setNextBlockTimestamp (advance_time, set_next_block_time).
            self._request("anvil_setBlockTimestampInterval", [0])
        return self

    def _request(self, method: str, params: list) -> object:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            reply = json.loads(response.read())
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return reply.get("result")


def Anvil(**options) -> AnvilProcess:
    return _SuiteAnvil(**options)
