"""The rollback detector: the highest token the SDK has seen from each registry, and each resource's latest.

A chain that keeps its history only ever issues higher tokens. A read (or an
acquisition) that comes back below what was already seen means the chain
lost history: a dev node that lost its last second to a SIGKILL, a reorg
deeper than the confirmations. :class:`Seen` raises
:class:`~chainfence.errors.ChainRolledBack` then, instead of letting the SDK
believe it; ``Chain.revert`` (a dev chain's deliberate rollback) forgets
what was seen.

A read at ``latest`` that shows lost history is believed only once a read
sent after its answer shows it too (the SDK's reads, guards and fenced SQL
ask once more): anvil (1.7.1)
answers a read at ``latest`` from the block before the one it is mining
while it publishes that block (it resolves ``latest`` to a number before it
moves its head, and reads that number's stored state after), so a read can
come back one block below the answer to the read before it. The head it
moved meanwhile is what the next read resolves, so that read answers at
least as new as the first (``docs/benchmarks/history.md``, "anvil's latest"). A
lost history stays lost: the second read shows it too, and it is raised.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, cast

from ..errors import ChainRolledBack

__all__ = ["Doubt", "Seen"]


class Doubt(Exception):
    """Evidence of lost history from one read at ``latest``, not yet confirmed by a read sent after it
    (a guard and a fenced SQL transaction raise it inside their first look, and look once more)."""


class Seen:
    """The highest token this SDK has seen from one registry, and each resource's latest (bounded).

    Tokens only go up on a chain that keeps its history. Each read takes a
    snapshot of what was seen *before* it was sent: anything seen then was
    already on-chain, so a result below it means the chain lost history
    (:class:`ChainRolledBack`). Comparing with what other threads saw while
    the read was in flight would raise false alarms; this never does. Only
    what is as deep as the chain's confirmations is remembered: a reorg
    shallower than that is expected, not a lost history.
    """

    _LIMIT = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.highest = 0
        self._resources: OrderedDict[bytes, tuple[int, str]] = OrderedDict()

    @classmethod
    def of(cls, chain: Any, address: str) -> Seen:
        table = chain.__dict__.setdefault("_seen_tokens", {})
        seen = table.get(address)
        if seen is None:
            seen = table.setdefault(address, cls())
        return cast(Seen, seen)

    def before(self, resource_id: bytes | None = None) -> tuple[int, tuple[int, str] | None]:
        """What was seen before a read or a transaction is sent."""
        with self._lock:
            return self.highest, (self._resources.get(resource_id) if resource_id is not None else None)

    def latest(self, before: tuple[int, tuple[int, str] | None], latest: int, *, record: bool = True) -> None:
        """The registry's latest token, read after ``before`` (remembered if ``record``)."""
        if latest < before[0]:
            raise ChainRolledBack(
                f"the registry's latest token is {latest}, below token {before[0]} already seen from it: "
                "the chain lost history (a dev node restarted from an older state, or a reorg deeper than "
                "the confirmations); the same numbers may go to other holders",
                seen_token=before[0],
                chain_token=latest,
            )
        if record:
            self._note(None, latest, None)

    def lease(
        self,
        before: tuple[int, tuple[int, str] | None],
        resource_id: bytes,
        token: int,
        holder: str,
        name: str | None,
        *,
        issued: bool = False,
        record: bool = True,
    ) -> None:
        """A resource's latest lease, read (or, ``issued``, created by a transaction sent) after ``before``."""
        where = repr(name) if name is not None else "0x" + resource_id.hex()
        highest, previous = before
        if issued and token <= highest:
            raise ChainRolledBack(
                f"the registry issued token {token} for {where}, but token {highest} was already seen from it "
                "before the acquisition was sent: the chain lost history and is handing out numbers again",
                seen_token=highest,
                chain_token=token,
                resource=name,
            )
        if previous is not None and (token < previous[0] or (token == previous[0] and holder != previous[1])):
            raise ChainRolledBack(
                f"{where} reads token {token} held by {holder}, but token {previous[0]} held by {previous[1]} "
                "was already seen for it: the chain lost history",
                seen_token=previous[0],
                chain_token=token,
                resource=name,
            )
        if token and record:
            self._note(resource_id, token, holder)

    def _note(self, resource_id: bytes | None, token: int, holder: str | None) -> None:
        with self._lock:
            self.highest = max(self.highest, token)
            if resource_id is None or holder is None:
                return
            previous = self._resources.get(resource_id)
            if previous is None or previous[0] < token:
                self._resources[resource_id] = (token, holder)
                self._resources.move_to_end(resource_id)
                if len(self._resources) > self._LIMIT:
                    self._resources.popitem(last=False)
