"""No asyncio cancellation or KeyboardInterrupt leaves a lease nobody knows about.

The failure: an acquisition is interrupted after its transaction reached the
node (a timeout around ``await registry.acquire(...)``, Ctrl-C while the SDK
waits for the receipt). A bare ``CancelledError`` / ``KeyboardInterrupt``
propagates, the transaction is mined anyway, and a one-hour lease is live that
no object in the program knows about: the resource is held for an hour.

Now the interrupt is re-raised (a cancellation stays a cancellation) only
after the transaction is settled and what it acquired released, shielded
from further cancellations of the task; a note on the exception names the
transaction hash and what became of it. A second ``KeyboardInterrupt``
during that cleanup stops it, and the note says what may be left live and
how to find it. Every acquisition path: ``acquire``, ``claim``,
``acquire_many``, sync and asyncio.

How the interrupt is made to land after the node has the transaction:

- on anvil, through the loopback proxy (tests/support/rpc_proxy.py), which
  forwards the request the client waits on for the receipt and holds the
  node's answer (``hold_reply``): on anvil's automine that is the send itself
  (``eth_sendRawTransactionSync``, answered once the transaction is mined),
  and the cleanup's own requests are receipt requests. The test interrupts
  the client while it waits on that answer (SIGINT to the main thread;
  ``task.cancel()``), sequenced by the proxy, not by a clock;
- on both backends, by the RPC layer itself: its receipt request raises
  ``KeyboardInterrupt`` / cancels the task the first time it is asked.

The controls run the acquisition without the guard (the steps the SDK ran
before): the bare interrupt, the lease live and unknown.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

import pytest
from eth_utils import keccak

from chainfence import Chain, Lease, LeaseSet, Registry, Timeouts
from chainfence.aio import AsyncChain, AsyncLeaseSet, AsyncRegistry
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy

TTL = 3_600
PATHS = ["acquire", "claim", "acquire_many"]
#: The request an acquisition waits on for its receipt on the session's anvil (automine): the send itself.
MINED = "eth_sendRawTransactionSync"
#: What the cleanup asks after an interrupt: the receipt of what was sent.
RECEIPT = "eth_getTransactionReceipt"


def names_of(path: str) -> list[str]:
    return {"acquire": ["jobs/cut"], "claim": ["batch/x"], "acquire_many": ["jobs/m1", "jobs/m2"]}[path]


def acquiring(registry: Registry, path: str, *, guarded: bool = True):
    """The sync call of ``path``; unguarded: the steps as they ran before (no cleanup on an interrupt)."""
    if path == "acquire":
        if not guarded:
            return lambda: registry.chain._run(registry._acquire_once_steps("jobs/cut", TTL, registry.sender, None, []))
        return lambda: registry.acquire("jobs/cut", ttl=TTL)
    if path == "claim":
        return lambda: registry.workset("batch").claim(["x"], TTL)
    return lambda: LeaseSet.acquire(registry, ["jobs/m1", "jobs/m2"], TTL)


async def aacquire(registry: AsyncRegistry, path: str, *, guarded: bool = True) -> Any:
    if path == "acquire":
        if not guarded:
            core = registry.registry
            return await registry.chain._run(core._acquire_once_steps("jobs/cut", TTL, core.sender, None, []))
        return await registry.acquire("jobs/cut", ttl=TTL)
    if path == "claim":
        return await registry.workset("batch").claim(["x"], TTL)
    return await AsyncLeaseSet.acquire(registry, ["jobs/m1", "jobs/m2"], TTL)


def live(registry: Registry, path: str) -> list[str]:
    """The resources of ``path`` someone holds live now."""
    if path == "claim":
        info = registry.workset("batch").last_lease("x")
        return ["batch/x"] if info is not None and info.live else []
    return [name for name in names_of(path) if registry.lease_of(name) is not None]


def notes(error: BaseException) -> str:
    return "\n".join(getattr(error, "__notes__", []))


def assert_released_and_said(registry: Registry, path: str, interrupt: BaseException) -> None:
    said = notes(interrupt)
    assert "chainfence:" in said and "released again" in said, said
    tx_hash = said.split("transaction ")[1].split()[0]
    assert tx_hash.startswith("0x") and len(tx_hash) == 66, said
    receipt = registry.chain.rpc.receipt(tx_hash)
    assert receipt is not None and receipt["status"] == 1, "the interrupted acquisition was mined"
    assert live(registry, path) == [], "...and released: nothing is left held"


# ---------------------------------------------------------------------------
# Both backends: the interrupt comes from the RPC layer, at the first receipt request
# ---------------------------------------------------------------------------


def interrupt_first_receipt(chain: Chain, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first request for the transaction's receipt (it was sent) raises KeyboardInterrupt; returns its
    hash. On anvil's automine that request is the send itself (``eth_sendRawTransactionSync``): the node
    answers it, with the receipt, and the interrupt lands before the answer reaches the caller."""
    asked: list[str] = []
    receipt, send_sync = chain.rpc.receipt, chain.rpc.send_raw_sync

    def interrupted(tx_hash: str) -> Any:
        if not asked:
            asked.append(tx_hash)
            raise KeyboardInterrupt
        return receipt(tx_hash)

    def interrupted_send(raw: bytes, **kwargs: Any) -> Any:
        answer = send_sync(raw, **kwargs)
        if not asked:
            asked.append("0x" + keccak(raw).hex())
            raise KeyboardInterrupt
        return answer

    monkeypatch.setattr(chain.rpc, "receipt", interrupted)
    monkeypatch.setattr(chain.rpc, "send_raw_sync", interrupted_send)
    return asked


@pytest.mark.parametrize("path", PATHS)
def test_a_keyboard_interrupt_after_the_send_releases_what_was_acquired(alice, monkeypatch, path):
    asked = interrupt_first_receipt(alice.chain, monkeypatch)
    with pytest.raises(KeyboardInterrupt) as interrupt:
        acquiring(alice, path)()
    assert asked, "the interrupt landed after the send"
    assert asked[0] in notes(interrupt.value)
    monkeypatch.undo()
    assert_released_and_said(alice, path, interrupt.value)


def test_control_an_unguarded_acquisition_interrupted_after_the_send_leaves_a_lease_nobody_knows(alice, monkeypatch):
    asked = interrupt_first_receipt(alice.chain, monkeypatch)
    with pytest.raises(KeyboardInterrupt) as interrupt:
        acquiring(alice, "acquire", guarded=False)()
    monkeypatch.undo()
    assert notes(interrupt.value) == "", "a bare interrupt: no hash, no word of the lease"
    assert live(alice, "acquire") == ["jobs/cut"], "the lease is live for an hour, unknown to the program"
    assert alice.lease_from_tx(asked[0]).holder == alice.sender


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("again", [False, True], ids=["cancelled", "cancelled-again-during-cleanup"])
def test_a_cancellation_after_the_send_releases_what_was_acquired(chain, alice, path, again):
    """asyncio: the task is cancelled while it waits for the receipt (the RPC layer cancels it there: at the
    receipt request, or on anvil's automine once the send that carries the receipt was answered);
    ``again``: cancelled a second time while the cleanup asks for the receipt, which must not stop it."""
    asked: list[str] = []
    tasks: list[asyncio.Task[Any]] = []

    async def main():
        async with AsyncChain.over(chain) as achain:
            registry = (await AsyncRegistry.at(achain, alice.address)).connect(alice.sender)
            receipt = achain.rpc.receipt

            async def cancelled(tx_hash: str) -> Any:
                asked.append(tx_hash)
                if len(asked) == 1:
                    asyncio.current_task().cancel()
                    await asyncio.sleep(0)  # the cancellation lands here
                elif len(asked) == 2 and again:
                    tasks[0].cancel()  # the caller, cancelled again while its cleanup runs
                    await asyncio.sleep(0)
                return await receipt(tx_hash)

            send_sync = achain.rpc.send_raw_sync

            async def cancelled_send(raw: bytes, **kwargs: Any) -> Any:
                answer = await send_sync(raw, **kwargs)  # on anvil's automine: the send answers with the receipt
                asked.append("0x" + keccak(raw).hex())
                if len(asked) == 1:
                    asyncio.current_task().cancel()
                    await asyncio.sleep(0)
                return answer

            achain.rpc.receipt = cancelled
            achain.rpc.send_raw_sync = cancelled_send
            task = asyncio.create_task(aacquire(registry, path))
            tasks.append(task)
            with pytest.raises(asyncio.CancelledError) as interrupt:
                await task
            assert task.cancelled(), "the cancellation went on as a cancellation"
            return interrupt.value

    interrupt = asyncio.run(main())
    assert asked and asked[0] in notes(interrupt)
    assert_released_and_said(alice, path, interrupt)


# ---------------------------------------------------------------------------
# anvil: the proxy holds the node's answer to the receipt request; the test interrupts the wait
# ---------------------------------------------------------------------------


@pytest.fixture
def through_proxy(anvil_node, on_anvil):
    """(the test's registry on the session anvil, an agent registry as account 5 through a proxy, the proxy)."""
    with RpcProxy(anvil_node.url) as proxy:
        agent_chain = Chain.connect(proxy.url, private_key=dev_keys(10)[5], timeouts=Timeouts(request=60, poll=0.01))
        agent = Registry.at(agent_chain, on_anvil.address)
        yield on_anvil, agent, proxy


def sigint_main_thread_when(proxy: RpcProxy, *holding: int) -> threading.Thread:
    """Send SIGINT to the main thread (Ctrl-C) each time the proxy holds the next of ``holding`` replies."""
    main = threading.main_thread().ident

    def interrupt() -> None:
        for count in holding:
            proxy.wait_holding(count)
            signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("path", PATHS)
def test_ctrl_c_while_the_receipt_is_held_releases_what_was_acquired(through_proxy, path):
    registry, agent, proxy = through_proxy
    proxy.plan(MINED, "hold_reply")
    sender = sigint_main_thread_when(proxy, 1)
    with pytest.raises(KeyboardInterrupt) as interrupt:
        acquiring(agent, path)()
    sender.join(60)
    assert_released_and_said(registry, path, interrupt.value)


def test_a_second_ctrl_c_during_the_cleanup_leaves_it_and_says_what_may_be_live(through_proxy):
    """The user insists: the second Ctrl-C lands while the cleanup asks for the receipt again. The first
    interrupt goes on, and its note names the transaction and how to find the lease, which is live (the
    note is true), and is found where it says."""
    registry, agent, proxy = through_proxy
    proxy.plan(MINED, "hold_reply")
    proxy.plan(RECEIPT, "hold_reply")
    sender = sigint_main_thread_when(proxy, 1, 2)
    with pytest.raises(KeyboardInterrupt) as interrupt:
        agent.acquire("jobs/cut", ttl=TTL)
    sender.join(60)
    said = notes(interrupt.value)
    assert "interrupted again" in said and "lease_from_tx" in said, said
    tx_hash = said.split("lease_from_tx('")[1].split("'")[0]
    lease = registry.lease_from_tx(tx_hash)
    assert lease is not None and registry.lease_of("jobs/cut").token == lease.token, "live, as the note says"


def test_control_ctrl_c_on_an_unguarded_acquisition_leaves_the_lease_live(through_proxy):
    registry, agent, proxy = through_proxy
    proxy.plan(MINED, "hold_reply")
    sender = sigint_main_thread_when(proxy, 1)
    with pytest.raises(KeyboardInterrupt) as interrupt:
        acquiring(agent, "acquire", guarded=False)()
    sender.join(60)
    assert notes(interrupt.value) == ""
    assert live(registry, "acquire") == ["jobs/cut"]


async def agent_async(proxy: RpcProxy, registry: Registry) -> tuple[AsyncChain, AsyncRegistry]:
    chain = await AsyncChain.connect(proxy.url, private_key=dev_keys(10)[5], timeouts=Timeouts(request=60, poll=0.01))
    return chain, await AsyncRegistry.at(chain, registry.address)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cancels", [1, 2], ids=["cancelled", "cancelled-again-during-cleanup"])
def test_a_task_cancelled_while_the_receipt_is_held_releases_what_was_acquired(through_proxy, path, cancels):
    """``asyncio.timeout`` / ``task.cancel()`` while the node's answer is held. A second cancellation
    during the cleanup (held too) does not stop it: the cleanup is shielded; the task still ends cancelled."""
    registry, _agent, proxy = through_proxy
    proxy.plan(MINED, "hold_reply")
    proxy.plan(RECEIPT, *["hold_reply"] * (cancels - 1))

    async def main():
        chain, agent = await agent_async(proxy, registry)
        try:
            task = asyncio.create_task(aacquire(agent, path))
            for count in range(1, cancels + 1):
                await asyncio.to_thread(proxy.wait_holding, count)
                task.cancel()
            proxy.let_go()
            with pytest.raises(asyncio.CancelledError) as interrupt:
                await task
            return task, interrupt.value
        finally:
            await chain.aclose()

    task, interrupt = asyncio.run(main())
    assert task.cancelled()
    assert_released_and_said(registry, path, interrupt)


def test_control_an_unguarded_cancelled_acquisition_leaves_the_lease_live(through_proxy):
    registry, _agent, proxy = through_proxy
    proxy.plan(MINED, "hold_reply")

    async def main():
        chain, agent = await agent_async(proxy, registry)
        try:
            task = asyncio.create_task(aacquire(agent, "acquire", guarded=False))
            await asyncio.to_thread(proxy.wait_holding, 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError) as interrupt:
                await task
            return interrupt.value
        finally:
            await chain.aclose()

    interrupt = asyncio.run(main())
    assert notes(interrupt) == ""
    assert live(registry, "acquire") == ["jobs/cut"], "a one-hour lease no object knows about"


def test_a_lease_that_cannot_be_released_is_handed_to_the_caller(alice, monkeypatch):
    """The release in the cleanup fails (the node refuses it): the lease is the interrupt's ``lease``."""
    from chainfence.errors import NodeUnreachable

    interrupt_first_receipt(alice.chain, monkeypatch)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NodeUnreachable("no node answers")
        yield  # pragma: no cover

    monkeypatch.setattr(alice, "_release_by_id_steps", refuse)
    with pytest.raises(KeyboardInterrupt) as interrupt:
        alice.acquire("jobs/cut", ttl=TTL)
    handed = interrupt.value.lease
    assert isinstance(handed, Lease) and "could not be released" in notes(interrupt.value)
    monkeypatch.undo()
    assert alice.lease_of("jobs/cut").token == handed.token
    handed.release()
    assert live(alice, "acquire") == []
