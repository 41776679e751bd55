"""The sender's own signing (chainfence._node.signing) makes exactly the bytes eth-account makes.

The fast path encodes and signs by itself; a difference in one byte would be
a different transaction hash, and the sender reconciles lost replies by hash.
Every shape the sender signs is compared with ``LocalAccount.sign_transaction``.
"""

from __future__ import annotations

from eth_account import Account
from hypothesis import given, settings
from hypothesis import strategies as st

from chainfence._node.signing import sign

KEY = Account.from_key("0x" + "11" * 32)
REGISTRY = "0x5FbDB2315678afecb367f032d93F642f64180aa3"

uint = st.integers(min_value=0, max_value=2**64)
fee = st.integers(min_value=0, max_value=2**128)


def same_as_eth_account(tx: dict) -> None:
    ours, theirs = sign(KEY, tx), KEY.sign_transaction(tx)
    assert ours.raw_transaction == bytes(theirs.raw_transaction)
    assert ours.hash == theirs.hash.to_0x_hex()


@settings(max_examples=60, deadline=None)
@given(
    nonce=uint,
    gas=st.integers(21_000, 30_000_000),
    tip=fee,
    cap=fee,
    chain_id=st.integers(1, 2**32),
    data=st.binary(max_size=300),
    to_self=st.booleans(),
)
def test_eip1559_transactions_are_signed_byte_for_byte_as_eth_account_signs_them(
    nonce, gas, tip, cap, chain_id, data, to_self
):
    """Calls to a contract and cancellations to oneself, any nonce, fees, chain and calldata."""
    same_as_eth_account(
        {
            "from": KEY.address,
            "to": KEY.address if to_self else REGISTRY,
            "data": data,
            "value": 0,
            "gas": gas,
            "nonce": nonce,
            "chainId": chain_id,
            "maxFeePerGas": max(cap, tip),
            "maxPriorityFeePerGas": tip,
        }
    )


@settings(max_examples=40, deadline=None)
@given(
    nonce=uint,
    gas=st.integers(21_000, 30_000_000),
    price=fee,
    chain_id=st.integers(1, 2**32),
    data=st.binary(max_size=300),
)
def test_legacy_transactions_are_signed_byte_for_byte_as_eth_account_signs_them(nonce, gas, price, chain_id, data):
    """Chains without a base fee get EIP-155 legacy transactions: the same bytes too."""
    same_as_eth_account(
        {
            "from": KEY.address,
            "to": REGISTRY,
            "data": data,
            "value": 0,
            "gas": gas,
            "nonce": nonce,
            "chainId": chain_id,
            "gasPrice": price,
        }
    )


def test_a_contract_creation_is_signed_as_eth_account_signs_it():
    """A deployment (no ``to``) takes the fast path too, with an empty recipient."""
    same_as_eth_account(
        {
            "from": KEY.address,
            "data": b"\x60\x80" * 200,
            "value": 0,
            "gas": 3_000_000,
            "nonce": 0,
            "chainId": 31337,
            "maxFeePerGas": 2 * 10**9,
            "maxPriorityFeePerGas": 10**9,
        }
    )


def test_any_other_shape_is_left_to_eth_account():
    """A field the fast path does not know (an access list, a value as hex) goes to eth-account unchanged."""
    tx = {
        "from": KEY.address,
        "to": REGISTRY,
        "data": b"",
        "value": 1,
        "gas": 50_000,
        "nonce": 3,
        "chainId": 1,
        "maxFeePerGas": 10**9,
        "maxPriorityFeePerGas": 1,
        "accessList": [{"address": REGISTRY, "storageKeys": []}],
    }
    same_as_eth_account(tx)
