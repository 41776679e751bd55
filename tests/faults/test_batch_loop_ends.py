"""An event loop that ends or stops never strands a batch, its callers, or the calls after it.

One batcher serves every agent of a process that sends as one account: asyncio tasks of any loop and
plain threads. Its worker therefore belongs to no caller's loop (a thread of its own): when
``asyncio.run`` ends while a batch is in flight, its teardown cancels the loop's tasks, not the batch's
send; a thread that shares the batch gets its lease, and each cancelled task gets the treatment of an
interrupted acquisition (its lease released, the note naming the transaction), as a lone acquisition
cancelled in the same teardown does. A loop that stops without closing (``asyncio.Runner().run``,
``loop.run_until_complete``) leaves no worker behind that later calls would queue for.

Sequenced by events: the batch is held after the node took it (before its receipt is read) by a Signal
in the sender's own steps, the loop's teardown begins once the main coroutine returns, and the hold is
let go once both tasks are in their cleanup. The controls start the worker as a task of the first
caller's loop (the batcher before this fix): every caller of the batch, the thread included, gets
``CancelledError`` and the leases stay live; and a later blocking call queues behind a worker that will
never run.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from chainfence import audit
from chainfence._core.effects import Signal, Spawn, Until
from chainfence._node.sending import Sender
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.batching import Batcher
from tests.support.sequencer import async_wait_until, wait_until

NAMES = ("end/thread", "end/task-1", "end/task-2")


def notes(error: BaseException) -> str:
    return "\n".join(getattr(error, "__notes__", []))


def as_a_task_of_the_callers_loop(monkeypatch) -> None:
    """The naive batcher: its worker started by the first caller's driver (on asyncio, a task of that
    caller's loop, owned by it)."""

    def task_start(self):
        self._worker = yield Spawn(self._work_steps(), "chainfence-batcher-naive")

    monkeypatch.setattr(Batcher, "_start_steps", task_start)


class Holds:
    """``sender``'s first two transactions each wait, once the node took them (before their receipts are read),
    for ``release[i]`` (a Signal: either driver waits for it as steps); ``reached[i]`` is set as it waits."""

    def __init__(self, monkeypatch, sender: str):
        self.reached = [threading.Event(), threading.Event()]
        self.release = [Signal(), Signal()]
        settle = Sender._settle
        seen: list[str] = []

        def held(sender_, who, tx, tx_hash, nonce, confirmations, *, mined=None):
            if who == sender and tx_hash not in seen and len(seen) < 2:
                seen.append(tx_hash)
                self.reached[len(seen) - 1].set()
                yield Until(self.release[len(seen) - 1])
            return (yield from settle(sender_, who, tx, tx_hash, nonce, confirmations, mined=mined))

        monkeypatch.setattr(Sender, "_settle", held)


def asyncio_run_ends_with_a_batch_in_flight(chain, registry, alice, monkeypatch) -> dict[str, Any]:
    """A pilot's batch, then a thread's and two tasks' acquisitions in one batch; ``asyncio.run``'s main
    coroutine returns while that batch is in flight (sent, its receipt not read), the tasks never awaited.
    Returns what each caller got."""
    batcher = alice.batched()
    holds = Holds(monkeypatch, alice.sender)
    cleanups: list[str] = []
    interrupted_steps = Batcher._interrupted_steps

    def watched_cleanup(self, op, interrupt):
        cleanups.append(op.resource)
        if len(cleanups) == 2:  # both tasks are in their cleanup: the loop's teardown is under way
            holds.release[1].set()
        return (yield from interrupted_steps(self, op, interrupt))

    monkeypatch.setattr(Batcher, "_interrupted_steps", watched_cleanup)
    got: dict[str, Any] = {}

    def thread_call() -> None:
        try:
            got["end/thread"] = batcher.acquire("end/thread", ttl=600)
        except BaseException as error:  # what the thread got is the result (a bare CancelledError too)
            got["end/thread"] = error

    thread = threading.Thread(target=thread_call)

    async def main() -> None:
        achain = AsyncChain.over(chain)
        abatcher = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[1]).batched()
        assert abatcher.batcher is batcher

        async def agent(name: str) -> None:
            try:
                got[name] = await abatcher.acquire(name, ttl=600)
            except BaseException as error:
                got[name] = error
                raise

        pilot = asyncio.ensure_future(abatcher.acquire("end/pilot", ttl=600))
        await async_wait_until(holds.reached[0].is_set, "the pilot's batch is at the node")
        thread.start()
        tasks = [asyncio.ensure_future(agent(name)) for name in NAMES[1:]]
        await async_wait_until(lambda: batcher.queued == 3, "the three queued behind the pilot")
        holds.release[0].set()
        got["pilot"] = (await pilot).token
        await async_wait_until(holds.reached[1].is_set, "the three callers' batch is at the node, not settled")
        got["tasks"] = tasks  # never awaited: asyncio.run's teardown cancels them

        async def close_after_the_tasks() -> None:
            """Closes the chain's session once the tasks' cleanups (which use it) are done: the teardown
            cancels this task too, and it waits on."""
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                await asyncio.wait(tasks)
            finally:
                await achain.aclose()

        got["closer"] = asyncio.ensure_future(close_after_the_tasks())

    asyncio.run(main())
    thread.join(120)
    assert not thread.is_alive(), "the thread got no outcome"
    alice.release("end/pilot", got.pop("pilot"))
    return got


def test_asyncio_run_ending_mid_batch_strands_no_lease_and_no_other_caller(chain, registry, alice, monkeypatch):
    got = asyncio_run_ending_mid_batch(chain, registry, alice, monkeypatch)
    thread = got["end/thread"]
    assert thread.holder == alice.sender, f"the thread, never interrupted, gets its lease: {thread!r}"
    assert registry.lease_of("end/thread").token == thread.token
    for name in NAMES[1:]:
        interrupt = got[name]
        assert isinstance(interrupt, asyncio.CancelledError), (name, interrupt)
        said = notes(interrupt)
        assert f"the acquisition of {name!r}" in said and "released again" in said and thread.tx_hash in said, said
        assert registry.lease_of(name) is None, f"{name}: its lease was released"
        assert [e.kind.value for e in audit.history(registry, name)] == ["acquired", "released"]
    thread.release()


def asyncio_run_ending_mid_batch(chain, registry, alice, monkeypatch) -> dict[str, Any]:
    got = asyncio_run_ends_with_a_batch_in_flight(chain, registry, alice, monkeypatch)
    assert all(task.done() for task in got.pop("tasks")) and got.pop("closer").done()
    return got


def test_control_a_worker_owned_by_the_callers_loop_is_cancelled_with_it(chain, registry, alice, monkeypatch):
    """The worker a task of the pilot's loop: the teardown cancels its send; every caller of the batch, the
    thread that was never interrupted included, gets CancelledError, no hash, and every lease stays live."""
    as_a_task_of_the_callers_loop(monkeypatch)
    got = asyncio_run_ending_mid_batch(chain, registry, alice, monkeypatch)
    for name in NAMES:
        assert isinstance(got[name], asyncio.CancelledError), (name, got[name])
        assert "released again" not in notes(got[name])
        assert registry.lease_of(name).holder == alice.sender, f"{name}: live for 600 s, nobody holds it"


# ---------------------------------------------------------------------------
# A loop that stops without closing
# ---------------------------------------------------------------------------


def used_by_a_runner_then_called_from_a_thread(chain, registry, alice) -> tuple[Any, ...]:
    """An asyncio caller acquires through the shared batcher under ``asyncio.Runner().run``, which returns once
    the batcher's worker is idle, waiting for more (the loop stops, open); then a thread makes a blocking
    call. The worker's idle moment is its pause before it looks at the queue again (the window, 0 s: a bare
    yield); on asyncio that pause is the chain's sleep, which the test holds so that the loop stops there."""
    batcher = alice.batched()
    idle = threading.Event()

    async def main() -> int:
        pauses = 0

        async def held_sleep(seconds: float) -> None:
            nonlocal pauses
            if seconds == 0:  # the worker's pause (the sender's polls sleep more than 0)
                pauses += 1
                if pauses == 2:  # after the batch: idle, the loop's last moment
                    idle.set()
                    await asyncio.Event().wait()
            await asyncio.sleep(seconds)

        async with AsyncChain.over(chain) as achain:
            achain._sleep = held_sleep
            abatcher = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[1]).batched()
            lease = await abatcher.acquire("stop/agent", ttl=600)
            await async_wait_until(lambda: idle.is_set() or not batcher._working, "the worker is idle")
            return lease.token

    runner = asyncio.Runner()
    token = runner.run(main())  # returns with the loop stopped, not closed
    alice.release("stop/agent", token)
    got: list[Any] = []

    def later() -> None:
        try:
            got.append(batcher.acquire("stop/later", ttl=600))
        except Exception as error:  # a typed refusal is an outcome too
            got.append(error)

    thread = threading.Thread(target=later, daemon=True)
    thread.start()
    wait_until(lambda: got or batcher.queued == 1, "the later call is queued or served")
    return batcher, thread, got, runner


def test_a_loop_stopped_without_closing_leaves_no_worker_to_swallow_later_calls(chain, registry, alice):
    batcher, thread, got, runner = used_by_a_runner_then_called_from_a_thread(chain, registry, alice)
    thread.join(120)  # a safety net: the call is served as soon as it is sent
    runner.close()
    assert got, "the later call was never served"
    assert got[0].holder == alice.sender and registry.lease_of("stop/later").token == got[0].token
    got[0].release()


def test_control_a_worker_task_of_a_stopped_loop_swallows_later_calls(chain, registry, alice, monkeypatch):
    """The worker a task of the runner's loop: it waits on that loop, which no longer runs; the later call
    queues behind it and nothing will ever send it."""
    as_a_task_of_the_callers_loop(monkeypatch)
    batcher, thread, got, runner = used_by_a_runner_then_called_from_a_thread(chain, registry, alice)
    worker = batcher._worker
    assert not got and batcher.queued == 1 and batcher._working
    assert isinstance(worker, asyncio.Task) and not worker.done() and not worker.get_loop().is_running()
    with batcher._mutex:  # free the thread (nothing of its call was ever sent)
        op = batcher._queue.popleft()
    op.signal.set(None, RuntimeError("freed by the test"))
    thread.join(120)
    runner.close()
    assert registry.lease_of("stop/later") is None
