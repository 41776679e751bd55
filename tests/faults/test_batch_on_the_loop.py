"""A blocking call into a batcher from the event loop its worker runs on is refused, never left waiting.

Asyncio agents and a sync tool share one batcher (``AsyncRegistry.batched()`` and ``Registry.batched()``
over one chain are the same batcher). An agent framework that calls a sync tool from a coroutine calls it
on the loop's thread: while an asyncio caller's batch is in flight, the worker is a task of that loop, and
the blocking call would wait for an outcome only that task can set, while it blocks the loop the task needs.
The batcher refuses such a call at once (``NotSupported``), nothing queued, nothing sent.

Sequenced by a gate on the worker's send. The control, without the refusal: the call queues and blocks the
loop thread while the worker task, alive and the only one that takes from the queue, cannot run; a watchdog
thread sees that and frees the caller (nothing of the control's call is ever sent).
"""

from __future__ import annotations

import asyncio
import threading

from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.batching import Batcher
from chainfence.errors import NotSupported
from tests.support.gates import AsyncSendGate
from tests.support.sequencer import wait_until


def with_a_batch_in_flight(chain, registry, alice, monkeypatch, blocking_call):
    """An asyncio caller's batch held at its send; ``blocking_call(batcher)`` made on the loop's thread."""
    results: dict[str, object] = {}

    async def body():
        async with AsyncChain.over(chain) as achain:
            areg = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[1])
            abatcher = areg.batched()
            shared = alice.batched()
            results["shared"] = shared is abatcher.batcher
            gate = AsyncSendGate(monkeypatch, achain.rpc, alice.sender)
            first = asyncio.ensure_future(abatcher.acquire("loop/agent", ttl=600))
            await asyncio.wait_for(gate.sent.wait(), 120)
            try:
                results["call"] = blocking_call(shared)
            except Exception as exc:  # what the call raised is the result
                results["call"] = exc
            results["queued"] = shared.queued
            gate.open.set()
            lease = await asyncio.wait_for(first, 120)
            await lease.release()

    asyncio.run(body())
    return results


def test_a_blocking_call_on_the_workers_loop_is_refused(chain, registry, alice, monkeypatch):
    results = with_a_batch_in_flight(chain, registry, alice, monkeypatch, lambda b: b.acquire("loop/tool", ttl=600))
    assert results["shared"], "the sync and asyncio faces share one batcher"
    assert isinstance(results["call"], NotSupported), results["call"]
    assert "event loop" in str(results["call"])
    assert results["queued"] == 0
    assert registry.lease_of("loop/tool") is None
    assert registry.lease_of("loop/agent") is None, "the agent's own lease came and went"


def test_a_blocking_call_from_another_thread_is_served(chain, registry, alice, monkeypatch):
    """The same call from a worker thread of the loop (``asyncio.to_thread``'s way) is served."""

    def from_a_thread(batcher):
        got: list[object] = []
        thread = threading.Thread(target=lambda: got.append(batcher.acquire("loop/thread", ttl=600)))
        thread.start()
        wait_until(lambda: batcher.queued == 1, "the thread's call is queued behind the batch in flight")
        return thread, got

    results = with_a_batch_in_flight(chain, registry, alice, monkeypatch, from_a_thread)
    thread, got = results["call"]
    thread.join(120)
    assert got and got[0].holder == alice.sender
    got[0].release()


def test_control_without_the_refusal_the_call_blocks_the_loop_its_outcome_needs(chain, registry, alice, monkeypatch):
    monkeypatch.setattr(Batcher, "_refuse_on_the_workers_loop", lambda self, steps: None)
    seen: dict[str, object] = {}

    def blocked(batcher):
        loop = asyncio.get_running_loop()

        def watchdog():
            wait_until(lambda: batcher.queued == 1, "the blocking call is queued")
            worker = batcher._worker
            seen["worker is a task of the blocked loop"] = worker.get_loop() is loop and not worker.done()
            seen["loop thread blocked in the call"] = True  # this thread runs while the loop thread waits
            with batcher._mutex:
                op = batcher._queue.popleft()  # never sent: taken back before the loop runs again
            op.signal.set(None, RuntimeError("freed by the watchdog"))

        threading.Thread(target=watchdog, daemon=True).start()
        return batcher.acquire("loop/tool", ttl=600)

    results = with_a_batch_in_flight(chain, registry, alice, monkeypatch, blocked)
    assert seen == {"worker is a task of the blocked loop": True, "loop thread blocked in the call": True}
    assert isinstance(results["call"], RuntimeError) and "watchdog" in str(results["call"])
    assert registry.lease_of("loop/tool") is None
