"""A blocking call into a batcher from an event loop's thread is served, never left waiting on that loop.

Asyncio agents and a sync tool share one batcher (``AsyncRegistry.batched()`` and ``Registry.batched()``
over one chain are the same batcher). An agent framework that calls a sync tool from a coroutine calls it
on the loop's thread, while an asyncio caller's batch is in flight. The batcher's worker is a thread of its
own, never a task of a caller's loop: the blocking call queues behind the batch in flight and is served by
the worker (the loop waits meanwhile, as it does for any blocking call); nothing it needs runs on the loop
it blocks.

Sequenced by a gate on the worker's send. The control starts the worker as a task of the first caller's loop
(the batcher before this fix, which refused such a call with ``NotSupported`` to avoid what the control
shows): the call queues and blocks the loop thread while the worker task, alive and the only one that takes
from the queue, cannot run; a watchdog thread sees that and frees the caller (nothing of the control's call
is ever sent).
"""

from __future__ import annotations

import asyncio
import threading

from chainfence.aio import AsyncChain, AsyncRegistry
from tests.faults.test_batch_loop_ends import as_a_task_of_the_callers_loop
from tests.support.gates import AsyncSendGate, SendGate
from tests.support.sequencer import wait_until


def with_a_batch_in_flight(chain, registry, alice, monkeypatch, blocking_call, *, gate_type=SendGate):
    """An asyncio caller's batch held at its send; ``blocking_call(batcher)`` made on the loop's thread."""
    results: dict[str, object] = {}

    async def body():
        async with AsyncChain.over(chain) as achain:
            areg = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[1])
            abatcher = areg.batched()
            shared = alice.batched()
            results["shared"] = shared is abatcher.batcher
            gate = gate_type(monkeypatch, chain.rpc if gate_type is SendGate else achain.rpc, alice.sender)
            first = asyncio.ensure_future(abatcher.acquire("loop/agent", ttl=600))
            if gate_type is SendGate:
                await gate.async_wait_sent()

                def open_once_queued() -> None:  # the loop's thread is blocked in the call meanwhile
                    wait_until(
                        lambda: shared.queued == 1 or gate.open.is_set(),  # (a call from a thread: the body opens)
                        "the blocking call is queued behind the batch",
                    )
                    gate.open.set()

                threading.Thread(target=open_once_queued, daemon=True).start()
            else:
                await asyncio.wait_for(gate.sent.wait(), 120)
            try:
                results["call"] = blocking_call(shared)
            except Exception as exc:  # what the call raised is the result
                results["call"] = exc
            results["queued"] = shared.queued
            gate.open.set()
            lease = await asyncio.wait_for(first, 120)
            results["agent tx"] = lease.tx_hash
            await lease.release()

    asyncio.run(body())
    return results


def test_a_blocking_call_on_a_loop_thread_is_served(chain, registry, alice, monkeypatch):
    """The call queues behind the agent's batch in flight (the gate opens once it is queued) and gets its own
    lease, in the next transaction; the agent gets its own."""
    results = with_a_batch_in_flight(chain, registry, alice, monkeypatch, lambda b: b.acquire("loop/tool", ttl=600))
    assert results["shared"], "the sync and asyncio faces share one batcher"
    lease = results["call"]
    assert lease.holder == alice.sender and registry.lease_of("loop/tool").token == lease.token, lease
    assert lease.tx_hash != results["agent tx"] and results["queued"] == 0
    assert registry.lease_of("loop/agent") is None, "the agent's own lease came and went"
    lease.release()


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


def test_control_a_worker_task_of_the_loop_cannot_serve_a_call_that_blocks_it(chain, registry, alice, monkeypatch):
    as_a_task_of_the_callers_loop(monkeypatch)
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

    results = with_a_batch_in_flight(chain, registry, alice, monkeypatch, blocked, gate_type=AsyncSendGate)
    assert seen == {"worker is a task of the blocked loop": True, "loop thread blocked in the call": True}
    assert isinstance(results["call"], RuntimeError) and "watchdog" in str(results["call"])
    assert registry.lease_of("loop/tool") is None
