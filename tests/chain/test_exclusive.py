"""Exclusive acquisition (issue 17): the registry's ``acquireExclusive`` refuses a live resource even to
its own holder, so two processes sharing one key run one at a time; on both backends.

The defect it fixes: two ``chainfence lock reports/daily -- CMD`` with the same key ran their commands
at the same time, because the second one's ``acquire`` re-acquired the first one's live lease (the
documented re-acquire semantics: a new token, fencing off the first). Each test here that attacks the
exclusive path sits beside a control that runs the same steps with a plain ``acquire`` and shows the
naive version letting the second process in.
"""

from __future__ import annotations

import asyncio

import pytest

from chainfence import AcquireReason, Chain, LeaseStatus, audit
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.errors import InvalidInput, LeaseHeld, NotAdmitted
from tests.support.virtual_time import WaitClock

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

NAME = "reports/daily"


def spent(registry) -> int:
    """The sender's nonce: unchanged means nothing was sent."""
    return registry.chain.rpc.nonce(registry.sender, "latest")


def test_the_same_key_is_refused_while_its_own_lease_is_live_and_nothing_is_sent(chain, alice):
    first = alice.acquire(NAME, ttl=600, exclusive=True)
    block, nonce = chain.block_number(), spent(alice)
    with pytest.raises(LeaseHeld) as held:
        alice.acquire(NAME, ttl=600, exclusive=True)
    assert (held.value.holder, held.value.token, held.value.expires_at) == (alice.sender, first.token, first.expires_at)
    assert held.value.resource == NAME
    assert (chain.block_number(), spent(alice)) == (block, nonce), "refused by the preflight: nothing sent"
    assert first.is_current(), "the first process keeps its lease"


def test_control_a_plain_acquire_by_the_same_key_takes_the_live_lease_over(chain, alice):
    """The naive version: the second process re-acquires, fencing off the first, and both run."""
    first = alice.acquire(NAME, ttl=600)
    second = alice.acquire(NAME, ttl=600)
    assert second.reason is AcquireReason.REACQUIRED and second.token > first.token
    assert not first.is_current()


def test_the_contract_itself_refuses_the_holder_even_without_the_preflight(chain, alice):
    """Sent past the SDK's preflight (explicit gas: mined anyway): the registry reverts with LeaseHeld,
    and the holder's lease is untouched."""
    first = alice.acquire(NAME, ttl=600)
    block = chain.block_number()
    with pytest.raises(LeaseHeld) as held:
        chain.transact(alice.sender, alice.address, alice._encode("acquireExclusive", [NAME, 60]), gas=200_000)
    assert chain.block_number() == block + 1, "mined, and reverted"
    assert held.value.holder == alice.sender and held.value.token == first.token
    info = alice.last_lease(NAME)
    assert (info.token, info.holder, info.status) == (first.token, alice.sender, LeaseStatus.LIVE)
    # Control: the same transaction with the plain function takes the live lease over.
    chain.transact(alice.sender, alice.address, alice._encode("acquire", [NAME, 60]), gas=200_000)
    assert alice.last_lease(NAME).token > first.token


def test_exclusive_is_acquire_in_every_other_case(chain, alice, bob):
    """Unheld, released, expired (also by its own expired holder), and held by someone else: the same
    outcome as acquire; never REACQUIRED."""
    lease = alice.acquire(NAME, ttl=30, exclusive=True)
    assert lease.reason is AcquireReason.UNHELD
    with pytest.raises(LeaseHeld) as held:
        bob.acquire(NAME, ttl=30, exclusive=True)
    assert held.value.holder == alice.sender
    lease.release()
    lease = alice.acquire(NAME, ttl=30, exclusive=True)
    assert lease.reason is AcquireReason.RELEASED
    chain.advance_time(31)
    again = alice.acquire(NAME, ttl=30, exclusive=True)
    assert again.reason is AcquireReason.EXPIRED and again.token > lease.token
    events = [e.reason for e in audit.history(alice, NAME) if e.reason is not None]
    assert AcquireReason.REACQUIRED not in events


def test_exclusive_keeps_the_namespace_policy(chain, registry):
    """The same policy checks as acquire (here: an allowlist that refuses a stranger)."""
    from chainfence import Registry

    ops = registry.connect(chain.accounts[3])
    governed = Registry.deploy(chain, max_ttl=600, namespaces={"prod": ops.sender}).connect(ops.sender)
    governed.namespace("prod").set_policy(admission_required=True)
    stranger = governed.connect(chain.accounts[1])
    with pytest.raises(NotAdmitted):
        stranger.acquire("prod/db", ttl=60, exclusive=True)


def test_the_holders_own_live_lease_is_met_before_the_namespace_policy(chain, registry):
    """The registry's documented order (``_acquireRefusal``): an exclusive acquisition by the live holder
    is refused as held before the namespace's maxTtl is read, so a ttl over the namespace's cap answers
    LeaseHeld, not InvalidTtl; the preflight and the contract agree (the state machine's model follows)."""
    from chainfence import Registry
    from chainfence.errors import InvalidTtl

    ops = registry.connect(chain.accounts[3])
    governed = Registry.deploy(chain, max_ttl=600, namespaces={"prod": ops.sender}).connect(ops.sender)
    governed.namespace("prod").set_policy(max_ttl=90)
    holder = governed.connect(chain.accounts[1])
    lease = holder.acquire("prod/db", ttl=60)
    with pytest.raises(LeaseHeld):
        holder.acquire("prod/db", ttl=119, exclusive=True)
    with pytest.raises(InvalidTtl):  # the control: a plain acquisition meets the cap
        holder.acquire("prod/db", ttl=119)
    assert governed.lease_of("prod/db").token == lease.token


def test_a_lease_block_with_exclusive_does_not_run_while_the_key_holds_it(chain, alice):
    first = alice.acquire(NAME, ttl=600)
    ran = []
    with pytest.raises(LeaseHeld):
        with alice.acquire(NAME, ttl=60, exclusive=True):
            ran.append(True)
    assert ran == [] and first.is_current()
    first.release()
    with alice.acquire(NAME, ttl=60, exclusive=True) as lease:
        assert lease.reason is AcquireReason.RELEASED
    assert alice.lease_of(NAME) is None


def test_waiting_exclusively_waits_for_the_keys_own_lease_to_end(chain, alice):
    """acquire(wait=, exclusive=True) treats the sender's own live lease as held: it sends nothing while
    it lasts and takes the resource once it is released (control: without exclusive it re-acquires at
    once, test_waiting.py::test_the_holder_waiting_for_its_own_lease_reacquires_at_once)."""
    first = alice.acquire(NAME, ttl=600)
    nonce = spent(alice)

    def release(n):
        if n == 1:  # the waiter read it held (by itself) and is waiting
            assert spent(alice) == nonce, "nothing sent while its own lease was live"
            first.release()

    clock = WaitClock(on_sleep=release).install(alice)
    lease = alice.acquire(NAME, ttl=60, wait=60, exclusive=True)
    assert lease.reason is AcquireReason.RELEASED and lease.previous_token == first.token
    assert len(clock.sleeps) == 1


def test_an_exclusive_wait_that_ends_raises_lease_held_naming_the_sender(chain, alice):
    first = alice.acquire(NAME, ttl=600)
    nonce = spent(alice)
    clock = WaitClock().install(alice)
    with pytest.raises(LeaseHeld) as held:
        alice.acquire(NAME, ttl=60, wait=5, exclusive=True)
    assert (held.value.holder, held.value.token) == (alice.sender, first.token)
    assert clock.now_ >= 5 and spent(alice) == nonce and first.is_current()


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_exclusive_must_be_a_bool_and_bad_input_sends_nothing(chain, alice, bad):
    nonce = spent(alice)
    with pytest.raises(InvalidInput):
        alice.acquire(NAME, ttl=60, exclusive=bad)
    assert spent(alice) == nonce and alice.last_lease(NAME) is None


def test_lease_from_tx_recognises_an_exclusive_acquisition(chain, alice):
    lease = alice.acquire(NAME, ttl=60, exclusive=True)
    found = alice.lease_from_tx(lease.tx_hash)
    assert found is not None and (found.resource, found.token, found.ttl) == (NAME, lease.token, 60)


def run(chain: Chain, body):
    async def main():
        async with AsyncChain.over(chain) as achain:
            return await asyncio.wait_for(body(achain), 120)

    return asyncio.run(main())


def test_asyncio_exclusive_refuses_the_same_key_and_waits_for_its_release(chain, registry):
    async def body(achain):
        alice = (await AsyncRegistry.at(achain, registry.address)).connect(chain.accounts[1])
        await alice.acquire(NAME, ttl=600, exclusive=True)
        nonce = chain.rpc.nonce(alice.sender, "latest")
        with pytest.raises(LeaseHeld) as held:
            await alice.acquire(NAME, ttl=600, exclusive=True)
        assert held.value.holder == alice.sender and chain.rpc.nonce(alice.sender, "latest") == nonce
        # Control: the plain acquisition re-acquires the live lease.
        again = await alice.acquire(NAME, ttl=600)
        assert again.reason is AcquireReason.REACQUIRED
        released = []

        async def waiter():
            async with await alice.acquire(NAME, ttl=60, wait=60, exclusive=True) as lease:
                released.append(lease.reason)

        sync_alice = registry.connect(chain.accounts[1])
        WaitClock(on_sleep=lambda n: sync_alice.release(NAME, again.token) if n == 1 else None).install(alice.registry)
        await waiter()
        assert released == [AcquireReason.RELEASED]

    run(chain, body)
