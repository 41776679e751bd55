"""Group commit hammered: conflicting, failing and interrupted calls in the same batches, on both backends.

One scenario, run with threads (the victim is the main thread, its Ctrl-C's KeyboardInterrupt raised out of
its wait: tests/support/ctrl_c.py) and with asyncio tasks (the victim task is cancelled), at every step of
its batch's life:

- ``queued``: behind a batch in flight, before the worker gathered it;
- ``taken``: gathered into a batch (the worker encodes it), not sent;
- ``sending``: its batch at the node's door (the send is under way);
- ``mined``: its batch mined (the worker reads the receipt);
- ``settled``: its outcome set, the victim not yet back from its wait;
- ``lost``: its batch mined, then every reply about it lost (``OutcomeUnknown``), the victim interrupted
  as the worker learns it.

Beside the victim, in the same batch: two agents of the sender on one resource (the second re-acquires it),
a plain and an exclusive acquisition of one resource, an exclusive acquisition of a resource the sender took
in the batch before (refused across batches), an acquisition of a resource another account contests from
its own batcher at the same time, a renewal of an expired token, a release of another account's token, a
plain acquisition; and bad input, refused at once. Each step is reached by an event the SDK itself produces
(the worker encoding the batch, its send, its receipt request, the victim's wakeup), never by a clock.

What is checked, whatever the step:

- every call got exactly one outcome, and it is typed: a lease, or the lone call's error for that call
  alone, or (the victim) its interrupt with a note saying what became of its operation;
- nothing landed twice: each operation is in exactly one batch transaction; the sender's nonce moved once
  for each distinct transaction it signed; tokens are issued once;
- no live lease nobody knows: every lease the sender holds at the end was handed to a caller (returned,
  or reconciled by hash after ``OutcomeUnknown`` with the caller's own ``item``); the victim's was
  released again, or handed to it as its interrupt's ``lease``.

Controls: ``test_control_without_the_cleanup_a_cancelled_caller_leaves_a_lease_nobody_knows`` (the
interrupted caller let go without the batcher's cleanup) and
``test_control_an_interrupt_as_the_worker_starts_without_the_respawn_leaves_the_others_hanging``.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from chainfence import Lease, audit
from chainfence._core.effects import Signal
from chainfence._node.rlp import keccak256
from chainfence._node.sending import Sender
from chainfence._sdk.lease_state import AcquireReason
from chainfence._sdk.names import resource_id
from chainfence.aio import AsyncChain, AsyncLease, AsyncRegistry
from chainfence.batching import Batcher
from chainfence.errors import (
    ChainfenceError,
    InvalidResourceName,
    LeaseExpired,
    LeaseHeld,
    NotHolder,
    OutcomeUnknown,
)
from chainfence.outcomes import reconcile
from tests.support.ctrl_c import CtrlC
from tests.support.sequencer import async_wait_until, wait_until

STEPS = ("queued", "taken", "sending", "mined", "settled", "lost")

#: Each call's resource, as its caller knows it (to reconcile its own operation by hash).
RESOURCES = {
    "plain": "x/plain",
    "twin-1": "x/twin",
    "twin-2": "x/twin",
    "ex-plain": "x/ex",
    "ex-exclusive": "x/ex",
    "across": "x/across",
    "contest": "x/contest",
    "expired": "x/expiring",
    "not-holder": "x/bob-own",
}


def notes(error: BaseException) -> str:
    return "\n".join(getattr(error, "__notes__", []))


class World:
    """alice's batcher and what the calls need: bob holds ``x/bob-held`` and ``x/bob-own`` (whose token alice
    will try to release); alice's ``x/expiring`` expired."""

    def __init__(self, chain: Any, registry: Any, alice: Any, bob: Any):
        self.chain, self.registry, self.alice, self.bob = chain, registry, alice, bob
        bob.acquire("x/bob-held", ttl=600)
        self.bobs = bob.acquire("x/bob-own", ttl=600)
        self.expiring = alice.acquire("x/expiring", ttl=10)
        chain.advance_time(20)
        self.batcher = alice.batched()
        self.token_before = registry.latest_token()
        self.nonce_before = chain.rpc.nonce(alice.sender, "latest")
        self.sends: list[bytes] = []  # every raw transaction alice's account sent (resends included)
        self.encoded: list[list[tuple[int, bytes, bytes, int, int]]] = []  # every batch the worker built

    def batch_calls(self, face: Any) -> dict[str, Callable[[], Any]]:
        """The calls that share the victim's batch (``face``: alice's batcher, sync or asyncio)."""
        return {
            "plain": lambda: face.acquire("x/plain", ttl=600),
            "twin-1": lambda: face.acquire("x/twin", ttl=600),
            "twin-2": lambda: face.acquire("x/twin", ttl=600),
            "ex-plain": lambda: face.acquire("x/ex", ttl=600),
            "ex-exclusive": lambda: face.acquire("x/ex", ttl=600, exclusive=True),
            "across": lambda: face.acquire("x/across", ttl=600, exclusive=True),
            "contest": lambda: face.acquire("x/contest", ttl=600),
            "expired": lambda: face.renew("x/expiring", self.expiring.token, 600),
            "not-holder": lambda: face.release("x/bob-own", self.bobs.token),
        }


def watch_sends(monkeypatch, rpc: Any, sender: str, sends: list[bytes]) -> None:
    """Record every raw transaction ``sender`` sends through ``rpc`` (plain or waiting for its receipt)."""
    for method in ("send_raw", "send_raw_sync"):
        original = getattr(rpc, method)

        def send(raw: bytes, *args: Any, original: Any = original, **kwargs: Any) -> Any:
            if kwargs.get("sender") == sender:
                sends.append(bytes(raw))
            return original(raw, *args, **kwargs)

        async def send_async(raw: bytes, *args: Any, original: Any = original, **kwargs: Any) -> Any:
            if kwargs.get("sender") == sender:
                sends.append(bytes(raw))
            return await original(raw, *args, **kwargs)

        monkeypatch.setattr(rpc, method, send_async if asyncio.iscoroutinefunction(original) else send)


def watch_batches(monkeypatch, sender: str, encoded: list[list[Any]], on_take: Callable[[int], None]) -> None:
    """Record every batch ``sender``'s worker gathered; ``on_take(n)`` runs as it starts sending the n-th
    (1 first): gathered, not sent yet."""
    send_steps = Batcher._send_steps

    def watched(self, batch):
        if self.sender == sender:
            encoded.append([op.encoded() for op in batch])
            on_take(len(encoded))
        return (yield from send_steps(self, batch))

    monkeypatch.setattr(Batcher, "_send_steps", watched)


def hashes_of(sends: list[bytes]) -> list[str]:
    """The transaction hashes of raw transactions, in the order first sent."""
    hashes: list[str] = []
    for raw in sends:
        tx_hash = "0x" + keccak256(raw).hex()
        if tx_hash not in hashes:
            hashes.append(tx_hash)
    return hashes


def lose_the_replies_of_the_nth_transaction(monkeypatch, account: str, n: int, act: Callable[[], None]) -> None:
    """``account``'s ``n``-th transaction whose receipt the sender waits for is mined, and then every reply
    about it is lost: ``act()`` runs, then the wait gives up (OutcomeUnknown, as when the node stops
    answering)."""
    seen: list[str] = []
    wait = Sender._await_receipt

    def lost(self, hashes, timeout, *, sender, nonce, **watching):
        if sender == account and hashes[0] not in seen:
            seen.append(hashes[0])
        if sender != account or seen.index(hashes[0]) + 1 != n:
            return (yield from wait(self, hashes, timeout, sender=sender, nonce=nonce, **watching))
        # Mined first (on a loaded machine anvil may still hold it in its pool when the send returns), then
        # the replies about it are lost: the wait's own answer is dropped.
        yield from wait(self, hashes, timeout, sender=sender, nonce=nonce, **watching)
        act()
        raise OutcomeUnknown(
            f"the node stopped answering while transaction {hashes[0]} was in flight",
            tx_hashes=hashes,
            nonce=nonce,
            sender=sender,
        )

    monkeypatch.setattr(Sender, "_await_receipt", lost)


# ---------------------------------------------------------------------------
# What every run must show
# ---------------------------------------------------------------------------


def accounted(world: World, results: dict[str, Any]) -> dict[str, Any]:
    """Each call's outcome, with an OutcomeUnknown reconciled by hash for its own item (as its caller
    would): the lease or the refusal it came to."""
    settled: dict[str, Any] = {}
    for label, result in results.items():
        if isinstance(result, OutcomeUnknown):
            assert result.item is not None and f"item={result.item}" in notes(result), (label, notes(result))
            # The node took the send and automines it, perhaps not yet (a loaded machine): the caller asks
            # again once it is mined, as a "still pending" verdict tells it to.
            rpc = world.registry.chain.rpc
            wait_until(lambda: any(rpc.receipt(h) is not None for h in result.tx_hashes), "the lost send is mined")
            verdict = reconcile(
                world.registry,
                result.tx_hashes,
                nonce=result.nonce,
                sender=result.sender,
                item=result.item,
                resource=RESOURCES[label],
            )
            assert verdict.settled and verdict.item is not None and verdict.item.item == result.item
            settled[label] = verdict.item.lease if verdict.item.error is None else verdict.item.error
            if verdict.item.kind not in ("acquire", "acquire_exclusive") and verdict.item.error is None:
                settled[label] = verdict.item.result()
        else:
            settled[label] = result
    return settled


def check(world: World, results: dict[str, Any], victim: BaseException, step: str) -> None:
    registry, alice, bob = world.registry, world.alice, world.bob
    outcome = accounted(world, results)
    lease_types = (Lease, AsyncLease)

    # Every call: one typed outcome, the lone call's.
    assert isinstance(outcome["bad-input"], InvalidResourceName)
    assert isinstance(outcome["pilot"], lease_types)
    assert isinstance(outcome["plain"], lease_types) and outcome["plain"].reason is AcquireReason.UNHELD
    twins = sorted((outcome["twin-1"], outcome["twin-2"]), key=lambda lease: lease.token)
    assert all(isinstance(lease, lease_types) for lease in twins), twins
    assert twins[1].reason is AcquireReason.REACQUIRED and twins[1].previous_token == twins[0].token
    ex = (outcome["ex-plain"], outcome["ex-exclusive"])
    assert (isinstance(ex[0], lease_types) and isinstance(ex[1], LeaseHeld)) or (
        isinstance(ex[1], lease_types) and isinstance(ex[0], lease_types) and ex[0].reason is AcquireReason.REACQUIRED
    ), ex
    assert isinstance(outcome["across"], LeaseHeld) and outcome["across"].holder == alice.sender
    contest = (outcome["contest"], outcome["bob-contest"])
    assert sorted(type(each).__name__ for each in contest) in (
        ["AsyncLease", "LeaseHeld"],
        ["Lease", "LeaseHeld"],
    ), contest
    assert isinstance(outcome["expired"], LeaseExpired) and outcome["expired"].resource == "x/expiring"
    assert isinstance(outcome["not-holder"], NotHolder) and outcome["not-holder"].holder == bob.sender
    for label, value in outcome.items():
        assert isinstance(value, (*lease_types, ChainfenceError)), (label, value)

    # The victim: its interrupt, with a note saying what became of its operation.
    said = notes(victim)
    assert "chainfence:" in said and "the acquisition of 'x/victim'" in said, said
    if step == "queued":
        assert "nothing was sent for it" in said, said
    else:
        assert "released again" in said or getattr(victim, "lease", None) is not None, said

    # Nothing landed twice: each operation in exactly one batch; one nonce per distinct transaction signed.
    names: Counter[tuple[int, Any]] = Counter()
    for batch in world.encoded:
        for kind, name, resource, _token, _ttl in batch:
            names[(kind, name or resource)] += 1
    expected = Counter(
        {
            (0, "x/across"): 1,  # the pilot's, in the batch before
            (0, "x/plain"): 1,
            (0, "x/twin"): 2,
            (0, "x/ex"): 1,
            (1, "x/ex"): 1,
            (1, "x/across"): 1,
            (0, "x/contest"): 1,
            (2, resource_id("x/expiring")): 1,
            (3, resource_id("x/bob-own")): 1,
        }
    )
    if step != "queued":
        expected[(0, "x/victim")] += 1
    assert names == expected, (names, expected)
    assert len(world.encoded) == 2, "the pilot's batch, then one with every other call"
    distinct = set(world.sends)
    assert world.chain.rpc.nonce(alice.sender, "latest") - world.nonce_before == len(distinct), (
        "each signed once, mined"
    )
    assert len(distinct) == len(world.encoded) + (0 if step == "queued" else 1), "the batches, and the victim's release"

    # Tokens issued once, each to the lease its caller holds; nothing live that nobody knows.
    leases = [value for value in outcome.values() if isinstance(value, lease_types)]
    handed = getattr(victim, "lease", None)
    known = {lease.token for lease in leases} | ({handed.token} if handed is not None else set())
    issued = registry.latest_token() - world.token_before
    assert issued == len(leases) + (0 if step == "queued" else 1), (issued, leases)
    for lease in leases:
        (event,) = [
            e for e in audit.history(registry, lease.resource) if e.kind.value == "acquired" and e.token == lease.token
        ]
        assert event.holder == lease.holder and event.tx_hash == lease.tx_hash
    for name in ("x/plain", "x/twin", "x/ex", "x/across", "x/contest", "x/victim", "x/pilot"):
        live = registry.lease_of(name)
        if live is not None and live.holder == alice.sender:
            assert live.token in known, f"{name}: token {live.token} is live and nobody was told of it"
    if handed is None:
        assert registry.lease_of("x/victim") is None, "the victim's lease was released again"


# ---------------------------------------------------------------------------
# Threads: the victim is the main thread; SIGINT is its Ctrl-C
# ---------------------------------------------------------------------------


def hammer_threads(world: World, monkeypatch, step: str) -> tuple[dict[str, Any], BaseException]:
    chain, batcher = world.chain, world.batcher
    ctrl_c = CtrlC(monkeypatch, after_outcome=step == "settled")
    cleaning = threading.Event()
    interrupted_steps = Batcher._interrupted_steps

    def watched_cleanup(self, op, interrupt):
        cleaning.set()
        return (yield from interrupted_steps(self, op, interrupt))

    monkeypatch.setattr(Batcher, "_interrupted_steps", watched_cleanup)

    def interrupt_main_and_wait_for_its_cleanup() -> None:
        ctrl_c.press()
        if not cleaning.wait(60):
            raise AssertionError("the main thread never began its cleanup")

    gate_sent, gate_open = threading.Event(), threading.Event()
    watch_sends(monkeypatch, chain.rpc, world.alice.sender, world.sends)
    original_send = chain.rpc.send_raw
    alice_sends = [0]

    def send_raw(raw: bytes, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("sender") == world.alice.sender:
            alice_sends[0] += 1
            if alice_sends[0] == 1:  # the pilot's batch waits at the node's door: the others gather behind it
                gate_sent.set()
                if not gate_open.wait(120):
                    raise AssertionError("the gate was never opened")
            elif alice_sends[0] == 2 and step == "sending":
                interrupt_main_and_wait_for_its_cleanup()
        return original_send(raw, *args, **kwargs)

    monkeypatch.setattr(chain.rpc, "send_raw", send_raw)
    watch_batches(
        monkeypatch,
        world.alice.sender,
        world.encoded,
        lambda n: interrupt_main_and_wait_for_its_cleanup() if n == 2 and step == "taken" else None,
    )
    if step == "mined":
        receipt = chain.rpc.receipt
        acted: list[bool] = []

        def watched_receipt(tx_hash: Any) -> Any:
            got = receipt(tx_hash)
            alices = hashes_of(world.sends)
            if got is not None and not acted and len(alices) >= 2 and str(tx_hash).lower() == alices[1]:
                acted.append(True)
                interrupt_main_and_wait_for_its_cleanup()
            return got

        monkeypatch.setattr(chain.rpc, "receipt", watched_receipt)
    if step == "lost":
        lose_the_replies_of_the_nth_transaction(
            monkeypatch, world.alice.sender, 2, interrupt_main_and_wait_for_its_cleanup
        )

    results: dict[str, Any] = {}

    def call(label: str, fn: Callable[[], Any]) -> None:
        try:
            results[label] = fn()
        except Exception as error:
            results[label] = error

    call("bad-input", lambda: batcher.acquire("", ttl=600))
    pilot = threading.Thread(target=call, args=("pilot", lambda: batcher.acquire("x/across", ttl=600)))
    pilot.start()
    if not gate_sent.wait(120):
        raise AssertionError("the pilot's batch was never sent")
    threads = [threading.Thread(target=call, args=item) for item in world.batch_calls(batcher).items()]
    bob_batcher = world.bob.batched()
    threads.append(
        threading.Thread(target=call, args=("bob-contest", lambda: bob_batcher.acquire("x/contest", ttl=600)))
    )
    for thread in threads:
        thread.start()
    total = len(world.batch_calls(batcher)) + 1  # and the victim

    def open_the_gate() -> None:
        wait_until(lambda: batcher.queued == total, "every call queued behind the pilot")
        if step == "queued":
            ctrl_c.press()
            wait_until(lambda: batcher.queued == total - 1, "the victim withdrew")
        gate_open.set()
        if step == "settled":
            if not ctrl_c.waiting.wait(120):
                raise AssertionError("the victim never got its outcome")
            ctrl_c.press()

    opener = threading.Thread(target=open_the_gate)
    opener.start()
    try:
        victim = batcher.acquire("x/victim", ttl=600)
    except KeyboardInterrupt as interrupt:
        caught: BaseException = interrupt
    else:
        raise AssertionError(f"the victim was never interrupted: {victim!r}")
    for thread in (pilot, *threads, opener):
        thread.join(120)
    assert ctrl_c.fired == 1
    return results, caught


@pytest.mark.parametrize("step", STEPS)
def test_threads_hammered_at_every_step_of_a_batch(chain, registry, alice, bob, monkeypatch, step):
    world = World(chain, registry, alice, bob)
    results, victim = hammer_threads(world, monkeypatch, step)
    monkeypatch.undo()
    check(world, results, victim, step)


# ---------------------------------------------------------------------------
# asyncio tasks: the victim task is cancelled
# ---------------------------------------------------------------------------


def hammer_tasks(world: World, monkeypatch, step: str) -> tuple[dict[str, Any], BaseException]:
    chain = world.chain

    async def body(achain: AsyncChain) -> tuple[dict[str, Any], BaseException]:
        areg = (await AsyncRegistry.at(achain, world.registry.address)).connect(achain.accounts[1])
        abob = (await AsyncRegistry.at(achain, world.registry.address)).connect(achain.accounts[2])
        batcher = areg.batched()
        assert batcher.batcher is world.batcher
        tasks: dict[str, asyncio.Task[Any]] = {}
        loop = asyncio.get_running_loop()
        # The batcher's worker is a thread of its own, sending over the chain's blocking layer; the victim's
        # cleanup releases over the asyncio one: alice's sends are watched on both.
        watch_sends(monkeypatch, chain.rpc, world.alice.sender, world.sends)
        watch_sends(monkeypatch, achain.rpc, world.alice.sender, world.sends)
        cleaning = threading.Event()
        interrupted_steps = Batcher._interrupted_steps

        def watched_cleanup(self, op, interrupt):
            cleaning.set()
            return (yield from interrupted_steps(self, op, interrupt))

        monkeypatch.setattr(Batcher, "_interrupted_steps", watched_cleanup)

        def cancel_victim() -> None:
            tasks["victim"].cancel()

        def cancel_victim_and_wait_for_its_cleanup() -> None:  # from the worker's thread
            loop.call_soon_threadsafe(cancel_victim)
            if not cleaning.wait(60):
                raise AssertionError("the victim never began its cleanup")

        gate_sent, gate_open = threading.Event(), threading.Event()
        original_send = chain.rpc.send_raw
        alice_sends = [0]

        def send_raw(raw: bytes, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("sender") == world.alice.sender:
                alice_sends[0] += 1
                if alice_sends[0] == 1:  # the pilot's batch waits at the node's door: the others gather behind it
                    gate_sent.set()
                    if not gate_open.wait(120):
                        raise AssertionError("the gate was never opened")
                elif alice_sends[0] == 2 and step == "sending":
                    cancel_victim_and_wait_for_its_cleanup()
            return original_send(raw, *args, **kwargs)

        monkeypatch.setattr(chain.rpc, "send_raw", send_raw)
        watch_batches(
            monkeypatch,
            world.alice.sender,
            world.encoded,
            lambda n: cancel_victim_and_wait_for_its_cleanup() if n == 2 and step == "taken" else None,
        )
        if step == "mined":
            receipt = chain.rpc.receipt
            acted: list[bool] = []

            def watched_receipt(tx_hash: Any) -> Any:
                got = receipt(tx_hash)
                alices = hashes_of(world.sends)
                if got is not None and not acted and len(alices) >= 2 and str(tx_hash).lower() == alices[1]:
                    acted.append(True)
                    cancel_victim_and_wait_for_its_cleanup()  # before the worker reads the receipt
                return got

            monkeypatch.setattr(chain.rpc, "receipt", watched_receipt)
        if step == "lost":
            lose_the_replies_of_the_nth_transaction(
                monkeypatch, world.alice.sender, 2, cancel_victim_and_wait_for_its_cleanup
            )
        held = asyncio.Event()
        if step == "settled":
            wait_async = Signal.wait_async

            async def held_wait(signal_: Signal, timeout: float | None = None) -> Any:
                value = await wait_async(signal_, timeout)
                if asyncio.current_task() is tasks.get("victim") and not held.is_set() and timeout is None:
                    held.set()
                    await asyncio.Event().wait()  # the cancellation lands here, the outcome already set
                return value

            monkeypatch.setattr(Signal, "wait_async", held_wait)

        results: dict[str, Any] = {}

        async def call(label: str, fn: Callable[[], Any]) -> None:
            try:
                results[label] = await fn()
            except Exception as error:
                results[label] = error

        queued = batcher.queued
        await call("bad-input", lambda: batcher.acquire("", ttl=600))
        assert batcher.queued == queued, "bad input queues nothing"
        pilot = asyncio.ensure_future(call("pilot", lambda: batcher.acquire("x/across", ttl=600)))
        await async_wait_until(gate_sent.is_set, "the pilot's batch at the node's door", timeout=120)
        others = [asyncio.ensure_future(call(*item)) for item in world.batch_calls(batcher).items()]
        bob_batcher = abob.batched()
        others.append(asyncio.ensure_future(call("bob-contest", lambda: bob_batcher.acquire("x/contest", ttl=600))))
        tasks["victim"] = asyncio.ensure_future(batcher.acquire("x/victim", ttl=600))
        total = len(world.batch_calls(batcher)) + 1
        await async_wait_until(lambda: batcher.queued == total, "every call queued behind the pilot")
        if step == "queued":
            cancel_victim()
            await async_wait_until(lambda: batcher.queued == total - 1, "the victim withdrew")
        gate_open.set()
        if step == "settled":
            await asyncio.wait_for(held.wait(), 120)
            cancel_victim()
        try:
            victim = await tasks["victim"]
        except asyncio.CancelledError as cancelled:
            caught: BaseException = cancelled
        else:
            raise AssertionError(f"the victim was never cancelled: {victim!r}")
        await asyncio.gather(pilot, *others)
        return results, caught

    async def main() -> tuple[dict[str, Any], BaseException]:
        async with AsyncChain.over(chain) as achain:
            return await asyncio.wait_for(body(achain), 240)

    return asyncio.run(main())


@pytest.mark.parametrize("step", STEPS)
def test_tasks_hammered_at_every_step_of_a_batch(chain, registry, alice, bob, monkeypatch, step):
    world = World(chain, registry, alice, bob)
    results, victim = hammer_tasks(world, monkeypatch, step)
    monkeypatch.undo()
    check(world, results, victim, step)
