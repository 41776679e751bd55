"""Hold a sender's transaction at the node's door: group commit sequenced by events, never by a clock.

``SendGate(rpc, sender)`` makes the first ``eth_sendRawTransaction`` of ``sender`` wait until the test
opens the gate (``sent`` is set once it waits there). While it waits, that batch is in flight and
every call made meanwhile queues for the next one: the test waits until the batcher has queued what
it started (``wait_until(lambda: batcher.queued == n)``), then opens the gate. Which calls share a
transaction is then fixed, whatever the machine's speed.

The batcher's worker is a thread of its own, sending through the chain's blocking RPC layer whoever
called (a thread or an asyncio task): its sends are gated on ``chain.rpc`` either way, and a coroutine
waits for the gate with ``await gate.async_wait_sent()``. ``AsyncSendGate`` gates an asyncio RPC layer
(``AsyncChain.rpc``): a lone call's send.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class SendGate:
    def __init__(self, monkeypatch: Any, rpc: Any, sender: str, *, sends: int = 1):
        self.sent = threading.Event()
        self.open = threading.Event()
        self.held = 0
        original = rpc.send_raw

        def send_raw(raw: bytes, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("sender") == sender and self.held < sends:
                self.held += 1
                self.sent.set()
                if not self.open.wait(120):
                    raise AssertionError("the gate was never opened")
            return original(raw, *args, **kwargs)

        monkeypatch.setattr(rpc, "send_raw", send_raw)

    def wait_sent(self) -> None:
        if not self.sent.wait(120):
            raise AssertionError("nothing was sent")

    async def async_wait_sent(self) -> None:
        """:meth:`wait_sent` from a coroutine (the loop goes on meanwhile)."""
        from tests.support.sequencer import async_wait_until

        await async_wait_until(self.sent.is_set, "the sender's transaction at the node's door", timeout=120)


class AsyncSendGate:
    def __init__(self, monkeypatch: Any, rpc: Any, sender: str):
        self.sent = asyncio.Event()
        self.open = asyncio.Event()
        self.held = False
        original = rpc.send_raw

        async def send_raw(raw: bytes, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("sender") == sender and not self.held:
                self.held = True
                self.sent.set()
                await asyncio.wait_for(self.open.wait(), 120)
            return await original(raw, *args, **kwargs)

        monkeypatch.setattr(rpc, "send_raw", send_raw)
