"""A transaction mined with status 0 is never silent."""

from __future__ import annotations

import pytest

from chainfence.errors import ChainfenceError, LeaseHeld, LockDelayed, TransactionFailed

# On hardhat's node and ganache too (tests/conftest.py); a test marked for hardhat alone needs what
# ganache lacks (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


def test_a_reverting_transaction_mined_anyway_raises_its_decoded_error(chain, registry, alice, bob):
    """With the estimate skipped (explicit gas), the revert is mined; the SDK still raises LeaseHeld."""
    alice.acquire("r", ttl=60)
    before = chain.w3.eth.block_number
    with pytest.raises(LeaseHeld) as held:
        chain.transact(bob.sender, registry.address, registry._encode("acquire", ["r", 60]), gas=200_000)
    assert chain.w3.eth.block_number == before + 1, "the failing transaction was mined"
    assert any("status 0" in note for note in held.value.__notes__)
    receipt = chain.w3.eth.get_transaction_receipt(chain.w3.eth.get_block("latest")["transactions"][0])
    assert receipt["status"] == 0


def test_out_of_gas_is_reported_as_a_failed_transaction(chain, registry, alice):
    """Too little gas: status 0 with nothing to decode -> TransactionFailed with the receipt."""
    with pytest.raises(TransactionFailed) as failed:
        chain.transact(alice.sender, registry.address, registry._encode("acquire", ["r", 60]), gas=30_000)
    assert failed.value.receipt["status"] == 0
    assert failed.value.tx_hash.startswith("0x")


def test_the_nonce_stays_in_step_after_a_failed_transaction(chain, registry, alice):
    """After a mined failure the next transaction from the same sender goes through."""
    with pytest.raises(TransactionFailed):
        chain.transact(alice.sender, registry.address, registry._encode("acquire", ["r", 60]), gas=30_000)
    assert alice.acquire("r", ttl=60).token == 1


def _mined_in_its_lock_delay(chain, registry, alice, bob, sender_chain=None):
    """Alice's lease expires between two blocks; Bob's acquisition, sent without a preflight (explicit
    gas), is mined in the later one, inside the lock-delay. Returns (the error, the lease, the call)."""
    namespace = alice.namespace().prefix
    alice.namespace(namespace).set_policy(lock_delay=1_000)
    lease = alice.acquire(f"{namespace}/job", ttl=10)
    chain.set_next_block_time(lease.expires_at)  # the embedded chain mines an empty block before it
    data = registry._encode("acquire", [lease.resource, 60])
    with pytest.raises(ChainfenceError) as refused:
        (sender_chain or chain).transact(bob.sender, registry.address, data, gas=300_000)
    head = chain.block_number()
    parent, own = chain.rpc.block(head - 1), chain.rpc.block(head)
    assert parent["timestamp"] < lease.expires_at <= own["timestamp"], "the lease expired between the two blocks"
    receipt = chain.rpc.receipt(own["transactions"][0])
    assert receipt["status"] == 0 and receipt["from"] == bob.sender, "the acquisition was mined, and reverted"
    return refused.value, lease, data


@pytest.mark.nodes("hardhat")
def test_an_acquisition_mined_in_a_lock_delay_raises_lock_delayed(chain, registry, alice, bob):
    """Issue 25, finding 18: the reason of a mined revert is the one the contract raised in the
    transaction's own block (from the node's trace of it on anvil; the replay on its block on the
    embedded chain), so an acquisition refused in its lock-delay says LockDelayed, not LeaseHeld."""
    error, lease, data = _mined_in_its_lock_delay(chain, registry, alice, bob)
    assert type(error) is LockDelayed, f"{type(error).__name__}: {error}"
    assert error.holder == alice.sender and error.until == lease.expires_at + 1_000
    assert any("status 0" in note for note in error.__notes__)


@pytest.mark.nodes("hardhat")
def test_control_a_replay_at_the_parent_block_names_the_lease_still_held(chain, registry, alice, bob):
    """Control (the unfixed recovery): replayed at the parent block, at that block's time, the same
    call says LeaseHeld: the lease was still live there."""
    _error, lease, data = _mined_in_its_lock_delay(chain, registry, alice, bob)
    with pytest.raises(LeaseHeld) as held:
        chain.call(registry.address, data, block=chain.block_number() - 1)
    assert held.value.holder == alice.sender and held.value.token == lease.token


def test_without_a_trace_the_revert_is_replayed_on_its_own_block_first(on_anvil, anvil_chain, anvil_node):
    """A node without the debug namespace (most providers): the call is replayed on the including
    block, at its time, before the parent's, so the lock-delay is still named (not LeaseHeld)."""
    from chainfence import Chain
    from tests.support.anvil import dev_keys
    from tests.support.rpc_proxy import RpcProxy

    alice = on_anvil.connect(anvil_chain.accounts[1])
    with RpcProxy(anvil_node.url) as proxy:
        proxy.no_debug = True
        untraced = Chain.connect(proxy.url, private_key=dev_keys(10)[2])
        bob = on_anvil.connect(anvil_chain.accounts[2])
        assert untraced.accounts == [bob.sender]
        error, _lease, _data = _mined_in_its_lock_delay(anvil_chain, on_anvil, alice, bob, sender_chain=untraced)
        asked = [method for method, _params, _fault in proxy.log]
    assert "debug_traceTransaction" in asked, "the trace was asked, and refused"
    assert type(error) is LockDelayed, f"{type(error).__name__}: {error}"
