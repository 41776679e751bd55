"""Block timestamps as steps: each block asked once, many at once where the node takes batches.

The history, the watchdog and an election's observer show or judge chain
time for the blocks their events came in; :class:`BlockTimes` remembers
each block's timestamp (bounded), and its steps run over either driver.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._core.effects import RPC, Steps
from ..errors import ChainError

__all__ = ["BlockTimes"]


class BlockTimes:
    """Block number -> timestamp, fetched once per block (at most ``limit`` remembered)."""

    def __init__(self, *, limit: int = 65_536):
        self._times: dict[int, int] = {}
        self._limit = limit

    def prefetch_steps(self, numbers: Iterable[int]) -> Steps[None]:
        """Fetch the timestamps of ``numbers`` not known yet, in one batch."""
        wanted = sorted({n for n in numbers if n not in self._times})
        if not wanted:
            return
        if len(self._times) + len(wanted) > self._limit:
            self._times.clear()
        blocks = yield RPC.blocks(wanted)
        for number, block in zip(wanted, blocks, strict=True):
            if block is None:
                raise ChainError(f"the node has no block {number} (reorganised away while reading?)")
            self._times[number] = int(block["timestamp"])

    def at_steps(self, number: int) -> Steps[int]:
        """The timestamp of block ``number``."""
        known = self._times.get(number)
        if known is None:
            block = yield RPC.block(number)
            if block is None:
                raise ChainError(f"the node has no block {number} (reorganised away while reading?)")
            known = int(block["timestamp"])
            if len(self._times) >= self._limit:
                self._times.clear()
            self._times[number] = known
        return known
