"""The waiting part (``acquire(wait=)``, and through it ``lock --wait``, ``campaign(wait=)``, the tooz driver's
blocking locks): every way an acquisition is refused for now, by name, on both backends.

- held: the waiter waits (no gas) and takes the resource once it is free; the waiters of one chain send
  one at a time, so a loser's preflight sees the winner's lease and sends nothing;
- lock_delayed: the waiter waits out the namespace's lock-delay by chain time (it used to give up with
  LockDelayed the moment a lease expired);
- not_admitted: the waiter stops at once with NotAdmitted, also when it is struck off while waiting.

Every wait runs on a WaitClock (tests/support/virtual_time.py): the waiter's time moves only by what it
sleeps, and the test acts at a given sleep.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from chainfence import AcquireReason, Registry
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.endings import Refusal
from chainfence.errors import LeaseHeld, LockDelayed, NotAdmitted
from tests.endings.matrix import covers
from tests.support.virtual_time import WaitClock

NAMESPACE = "jobs"
NAME = "jobs/waiting"
DELAY = 60


def spent(registry) -> int:
    """The sender's nonce: unchanged means it sent nothing (and paid nothing)."""
    return registry.chain.rpc.nonce(registry.sender, "latest")


def failed_sends(registry, since: int) -> int:
    """Transactions of ``registry``'s sender mined with status 0 (reverted: gas paid for nothing) since block ``since``."""
    chain, count = registry.chain, 0
    for number in range(since + 1, chain.block_number() + 1):
        for tx in chain.w3.eth.get_block(number, full_transactions=True)["transactions"]:
            if tx["from"] == registry.sender and chain.w3.eth.get_transaction_receipt(tx["hash"])["status"] == 0:
                count += 1
    return count


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: the deployer (account 0) assigned itself namespace ``jobs`` (policies, admission)."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={NAMESPACE: chain.accounts[0]})


@pytest.fixture
def delayed(registry):
    """Namespace ``jobs`` (administered by account 0) with a lock-delay of 60 s after every expiry."""
    registry.namespace(NAMESPACE).set_policy(lock_delay=DELAY)
    return registry


def expire(chain, lease) -> int:
    """Move chain time to ``lease``'s expiry (a block stamped then); returns the end of its lock-delay."""
    chain.advance_time(lease.expires_at - chain.now())
    return lease.expires_at + DELAY


# ---------------------------------------------------------------------------
# held
# ---------------------------------------------------------------------------


@covers("waiting", Refusal.HELD)
def test_a_waiter_of_a_held_resource_sends_nothing_until_it_is_released(alice, bob):
    held = alice.acquire(NAME, ttl=600)
    before = spent(bob)
    seen = {}

    def release(n):
        if n == 3:
            seen["spent"] = spent(bob)
            held.release()

    clock = WaitClock(on_sleep=release).install(bob)
    lease = bob.acquire(NAME, ttl=60, wait=60)
    assert seen["spent"] == before, "nothing sent while it was held"
    assert lease.reason is AcquireReason.RELEASED and lease.previous_token == held.token
    assert spent(bob) == before + 1 and len(clock.sleeps) == 3


class _TurnWatch:
    """Records, per thread name, when a thread had to wait for a lock of the chain's lock table (the turn)."""

    def __init__(self, chain):
        self.blocked: dict[str, threading.Event] = {}
        self._table = chain._sender._lock

    def lock(self, key):
        inner = self._table(key)
        watch = self

        class Proxy:
            def __enter__(self):
                if not inner.acquire(blocking=False):
                    event = watch.blocked.get(threading.current_thread().name)
                    if event is not None:
                        event.set()
                    inner.acquire()
                return self

            def __exit__(self, *exc):
                inner.release()

        return Proxy()


@covers("waiting", Refusal.HELD)
def test_two_waiters_of_one_chain_take_turns_so_the_loser_never_sends_a_failing_acquisition(
    chain, alice, bob, carol, monkeypatch
):
    """bob and carol (threads sharing one Chain) both wait; alice releases; both see it free. bob's preflight
    passes and his transaction is held back until carol has either run her preflight too (the naive waiter:
    both pass, both send, carol's acquisition is mined and reverts) or is waiting for bob's turn to end (then
    her preflight sees bob's lease and she sends nothing)."""
    held = alice.acquire(NAME, ttl=600)
    start = chain.block_number()
    before = spent(carol)
    both_waiting = threading.Barrier(3, timeout=60)
    bob_checked, carol_checked = threading.Event(), threading.Event()
    turns = _TurnWatch(chain)
    turns.blocked["carol"] = carol_checked  # carol waiting for bob's turn counts as "carol got that far"
    monkeypatch.setattr(chain._sender, "_lock", turns.lock)
    rpc = chain.rpc
    # The preflight: an eth_call at pending on the embedded chain; on anvil the same call batched with
    # anvil_getAutomine (always at pending). The send: eth_sendRawTransactionSync on anvil's automine.
    preflight_name = "call" if rpc.embedded else "dev_preflight"
    send_name = "send_raw" if rpc.embedded else "send_raw_sync"
    real_preflight, real_send = getattr(rpc, preflight_name), getattr(rpc, send_name)
    acquire_selector = bob._encode("acquire", [NAME, 600])[:4]

    def preflight(tx, block, **kwargs):
        result = real_preflight(tx, block, **kwargs)
        at_pending = block == "pending" or preflight_name == "dev_preflight"
        if at_pending and bytes(tx.get("data", b""))[:4] == acquire_selector:
            {"bob": bob_checked, "carol": carol_checked}.get(threading.current_thread().name, threading.Event()).set()
        return result

    def send_raw(raw, **kwargs):
        if threading.current_thread().name == "bob":
            assert carol_checked.wait(60), "carol neither ran her preflight nor waited for the turn"
        return real_send(raw, **kwargs)

    monkeypatch.setattr(rpc, preflight_name, preflight)
    monkeypatch.setattr(rpc, send_name, send_raw)
    results: dict[str, object] = {}

    def waiter(name, registry):
        first = {"done": False}

        def on_sleep(n):
            if not first["done"]:
                first["done"] = True
                both_waiting.wait()  # waiting, the lease read held
                both_waiting.wait()  # alice has released

        def on_pause():
            if name == "carol":
                assert bob_checked.wait(60), "bob never ran his preflight"

        WaitClock(on_sleep=on_sleep, on_pause=on_pause).install(registry)
        try:
            results[name] = registry.acquire(NAME, ttl=600, wait=5)
        except LeaseHeld as error:
            results[name] = error

    threads = [threading.Thread(target=waiter, args=(n, r), name=n) for n, r in (("bob", bob), ("carol", carol))]
    for thread in threads:
        thread.start()
    both_waiting.wait()
    held.release()
    both_waiting.wait()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive()
    assert results["bob"].holder == bob.sender, results
    assert isinstance(results["carol"], LeaseHeld) and results["carol"].holder == bob.sender
    assert failed_sends(carol, start) == 0, "carol sent an acquisition that bob's lease made fail"
    assert spent(carol) == before, "carol sent nothing at all"


def test_control_two_chains_race_and_the_loser_pays_for_a_reverted_acquisition(chain, alice, bob, carol):
    """The naive way, for contrast: two acquisitions that both passed their preflight before either was mined
    (what two waiters without a turn do): the second is mined, reverts with LeaseHeld and costs carol gas."""
    held = alice.acquire(NAME, ttl=600)
    held.release()
    start = chain.block_number()
    bob.acquire(NAME, ttl=600)  # carol's preflight, read just before, had seen the resource free
    with pytest.raises(LeaseHeld):
        carol.chain.transact(carol.sender, carol.address, carol._encode("acquire", [NAME, 600]), gas=300_000)
    assert failed_sends(carol, start) == 1


# ---------------------------------------------------------------------------
# lock_delayed
# ---------------------------------------------------------------------------


@covers("waiting", Refusal.LOCK_DELAYED)
def test_a_waiter_waits_out_the_lock_delay_by_chain_time(chain, delayed, alice, bob):
    """alice's lease expired; the namespace's lock-delay keeps the resource hers for 60 s more. bob's
    acquire(wait=300) waits (no gas) until the delay's end by chain time, then takes it. It used to raise
    LockDelayed at once."""
    held = alice.acquire(NAME, ttl=30)
    until = expire(chain, held)
    with pytest.raises(LockDelayed) as refused:  # control: at this moment the registry refuses
        bob.acquire(NAME, ttl=60)
    assert refused.value.until == until and refused.value.holder == alice.sender
    before = spent(bob)
    moved = {}

    def on_sleep(n):
        if n == 1:
            chain.advance_time(until - 10 - chain.now())  # a block 10 s short of the end: still refused
        elif clock.now_ >= 120 and "end" not in moved:
            moved["spent"] = spent(bob)
            moved["end"] = chain.advance_time(until - chain.now())  # a block at the end of the delay

    clock = WaitClock(on_sleep=on_sleep)
    clock.install(bob)
    lease = bob.acquire(NAME, ttl=60, wait=300)
    assert moved["spent"] == before, "nothing was sent during the lock-delay"
    assert lease.reason is AcquireReason.EXPIRED and lease.previous_token == held.token
    assert lease.expires_at - lease.ttl >= until, "acquired at or after the delay's end (chain time)"
    assert spent(bob) == before + 1


@covers("waiting", Refusal.LOCK_DELAYED)
def test_a_wait_that_ends_within_the_lock_delay_raises_lock_delayed_having_sent_nothing(chain, delayed, alice, bob):
    held = alice.acquire(NAME, ttl=30)
    until = expire(chain, held)
    before = spent(bob)
    clock = WaitClock().install(bob)
    with pytest.raises(LockDelayed) as raised:
        bob.acquire(NAME, ttl=60, wait=20)
    assert raised.value.until == until
    assert any("waited 20 s" in note for note in raised.value.__notes__)
    assert 20 <= clock.now_ and spent(bob) == before


@covers("waiting", Refusal.LOCK_DELAYED)
def test_the_expired_holder_itself_is_not_held_back_by_its_own_lock_delay(chain, delayed, alice):
    held = alice.acquire(NAME, ttl=30)
    expire(chain, held)
    clock = WaitClock().install(alice)
    again = alice.acquire(NAME, ttl=30, wait=300)
    assert again.reason is AcquireReason.EXPIRED and clock.sleeps == []


@covers("waiting", Refusal.LOCK_DELAYED)
def test_an_asyncio_waiter_waits_out_the_lock_delay_too(chain, delayed, registry, alice):
    held = alice.acquire(NAME, ttl=30)
    until = expire(chain, held)

    async def body(achain):
        bob = (await AsyncRegistry.at(achain, registry.address)).connect(chain.accounts[2])
        before = spent(bob.registry)

        def on_sleep(n):
            if n == 3:
                chain.advance_time(until - chain.now())

        WaitClock(on_sleep=on_sleep).install(bob.registry)
        lease = await bob.acquire(NAME, ttl=60, wait=300)
        assert lease.previous_token == held.token and lease.reason is AcquireReason.EXPIRED
        assert spent(bob.registry) == before + 1

    async def main():
        async with AsyncChain.over(chain) as achain:
            await asyncio.wait_for(body(achain), 120)

    asyncio.run(main())


# ---------------------------------------------------------------------------
# not_admitted
# ---------------------------------------------------------------------------


@pytest.fixture
def admitting(registry, alice, bob):
    """Namespace ``jobs`` admits only its allowlist: alice and bob."""
    registry.namespace(NAMESPACE).set_policy(admission_required=True)
    registry.namespace(NAMESPACE).admit([alice.sender, bob.sender])
    return registry


@covers("waiting", Refusal.NOT_ADMITTED)
def test_a_waiter_that_is_not_admitted_stops_at_once(admitting, alice, carol):
    alice.acquire(NAME, ttl=600)
    before = spent(carol)
    clock = WaitClock().install(carol)
    with pytest.raises(NotAdmitted) as refused:
        carol.acquire(NAME, ttl=60, wait=300)
    assert refused.value.holder == carol.sender
    assert clock.sleeps == [] and clock.now_ == 0, "no waiting: only the admin can admit"
    assert spent(carol) == before


@covers("waiting", Refusal.NOT_ADMITTED)
def test_a_waiter_struck_off_the_allowlist_while_waiting_stops_at_the_release(admitting, alice, bob):
    held = alice.acquire(NAME, ttl=600)
    before = spent(bob)

    def on_sleep(n):
        if n == 1:
            admitting.namespace(NAMESPACE).admit([bob.sender], admitted=False)
            held.release()

    clock = WaitClock(on_sleep=on_sleep).install(bob)
    with pytest.raises(NotAdmitted):
        bob.acquire(NAME, ttl=60, wait=300)
    assert len(clock.sleeps) == 1 and clock.now_ < 1, "stopped at the first send it tried, not at the wait's end"
    assert spent(bob) == before, "refused by the preflight: nothing sent"
