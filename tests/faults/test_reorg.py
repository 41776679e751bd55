"""Confirmations and reorgs, on anvil.

A reorg is simulated with anvil's snapshot/revert: ``evm_revert`` drops every
block after the snapshot (and their transactions), and the blocks mined next
form the new branch, exactly what a node's view of a short reorg looks like
to a client. Fencing tokens are a counter in chain state, so after the reorg
the same number can go to another holder: only confirmed tokens may count.
"""

from __future__ import annotations

import threading

import pytest

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence.errors import NotConfirmed, TokenNotConfirmed
from tests.support.anvil import dev_keys
from tests.support.virtual_time import SteppedClock

RESOURCE = "deploy/prod"


@pytest.fixture
def miner(anvil_chain):
    """Mine a block every 50 ms, as a live chain would, while the test runs."""
    stop = threading.Event()

    def mine():
        while not stop.wait(0.05):
            anvil_chain._rpc("evm_mine", [])

    thread = threading.Thread(target=mine, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


def agent(anvil_node, on_anvil, index, confirmations=None, confirmation_timeout=600.0):
    timeouts = Timeouts(confirmation=confirmation_timeout, poll=0.01)
    chain = Chain.connect(
        anvil_node.url, private_key=dev_keys(10)[index], confirmations=confirmations, timeouts=timeouts
    )
    return Registry.at(chain, on_anvil.address)


def test_acquire_returns_only_once_confirmed(anvil_node, on_anvil, miner):
    alice = agent(anvil_node, on_anvil, 1, confirmations=3)
    lease = alice.acquire(RESOURCE, ttl=60)
    assert alice.chain.block_number() - lease.block_number >= 3
    assert on_anvil.check_current(RESOURCE, lease.token)


def test_an_acquisition_that_cannot_get_deep_enough_is_reported_with_its_lease(anvil_node, on_anvil):
    """No blocks come: NotConfirmed after the timeout, carrying the lease that does exist on-chain,
    so the caller can release it instead of leaving a ghost holding the resource."""
    alice = agent(anvil_node, on_anvil, 1, confirmations=2, confirmation_timeout=0.3)
    with pytest.raises(NotConfirmed) as unconfirmed:
        alice.acquire(RESOURCE, ttl=60)
    lease = unconfirmed.value.lease
    assert lease is not None and on_anvil.check_current(RESOURCE, lease.token)
    lease.registry.release(RESOURCE, lease.token, confirmations=0)
    assert on_anvil.lease_of(RESOURCE) is None


def test_an_acquisition_reorganised_away_while_confirming_is_not_confirmed(anvil_node, on_anvil, anvil_chain):
    """The SDK has seen the acquisition's receipt and waits for depth; a reorg drops its block during
    that wait: NotConfirmed, saying it was reorganised out.

    Sequenced by the SDK's own waiting, not by a race with its deadline: its clock moves only when it
    pauses between polls (tests/support/virtual_time.py), and the reorg happens at its first pause
    while confirming."""
    alice = agent(anvil_node, on_anvil, 1, confirmations=2, confirmation_timeout=1.0)
    snapshot = anvil_chain.snapshot()
    # Reorg only once the SDK has seen the receipt and waits for depth: reverting
    # earlier is another scenario (a transaction that vanished before it was seen).
    confirming, reorganised = [], []
    sender = alice.chain._sender
    real_confirm = sender._await_depth

    def confirm(*args, **kwargs):
        confirming.append(True)
        return real_confirm(*args, **kwargs)

    def reorg_while_confirming():
        if confirming and not reorganised:
            anvil_chain.revert(snapshot)  # the reorg: its block is gone
            reorganised.append(True)

    sender._await_depth = confirm
    SteppedClock(on_sleep=reorg_while_confirming).install(alice.chain)
    before = on_anvil.latest_token()
    with pytest.raises(NotConfirmed, match="reorganised out"):
        alice.acquire(RESOURCE, ttl=60)
    assert reorganised, "the acquisition was never waited on for depth"
    assert on_anvil.latest_token() == before


@pytest.mark.parametrize("confirmations", [2, 0], ids=["confirmed-guard", "control-unconfirmed-guard"])
def test_a_token_orphaned_by_a_reorg_is_never_accepted_by_a_confirming_guard(
    anvil_node, on_anvil, anvil_chain, tmp_path, confirmations
):
    """Alice acquires token t; a reorg drops her block; Bob acquires and gets the same number t.
    A guard with confirmations=2 never accepted Alice's t. The control (0) accepted it, and now
    accepts both Alice's orphaned t and Bob's t: two holders, one token."""
    alice = agent(anvil_node, on_anvil, 1)
    bob = agent(anvil_node, on_anvil, 2)
    with Guard(on_anvil, path=tmp_path / "guard.sqlite", confirmations=confirmations) as guard:
        fork_point = anvil_chain.snapshot()

        orphan = alice.acquire(RESOURCE, ttl=60)
        alice_accepted = True
        try:
            guard.check(RESOURCE, orphan.token)
        except TokenNotConfirmed:
            alice_accepted = False

        anvil_chain.revert(fork_point)  # reorg
        canonical = bob.acquire(RESOURCE, ttl=60)
        assert canonical.token == orphan.token, "the counter rolled back: the same number, another holder"
        anvil_chain.mine(2)
        assert guard.check(RESOURCE, canonical.token) == canonical.token

        if confirmations:
            assert not alice_accepted
        else:
            assert alice_accepted, "the control must show the unconfirmed guard taking the orphaned token"


def test_a_confirming_guard_accepts_once_deep_enough(anvil_node, on_anvil, anvil_chain, tmp_path):
    alice = agent(anvil_node, on_anvil, 1)
    lease = alice.acquire(RESOURCE, ttl=60)
    with Guard(on_anvil, path=tmp_path / "guard.sqlite", confirmations=2) as guard:
        with pytest.raises(TokenNotConfirmed):
            guard.check(RESOURCE, lease.token)
        anvil_chain.mine(1)
        with pytest.raises(TokenNotConfirmed):
            guard.check(RESOURCE, lease.token)
        anvil_chain.mine(1)
        assert guard.check(RESOURCE, lease.token) == lease.token
        assert guard.mark(RESOURCE) == lease.token
