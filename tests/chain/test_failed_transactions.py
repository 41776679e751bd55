"""A transaction mined with status 0 is never silent."""

from __future__ import annotations

import pytest

from chainfence.errors import LeaseHeld, TransactionFailed


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
