"""Keys, addresses and keccak without eth-account or eth-utils give eth-account's and eth-utils' answers.

The CLI's per-task commands load neither (issue #19): a URL and a key go through
chainfence._node.accounts (the key and its address), chainfence._node.addresses
(checks and EIP-55 checksums) and chainfence._node.rlp.keccak256 (pycryptodome's
keccak through ctypes). A key read differently would sign as another account;
a checksum computed differently would refuse a good address or pass a mistyped
one. Each is held to the library it replaces, with Hypothesis.
"""

from __future__ import annotations

import eth_utils
import pytest
from Crypto.Hash import keccak as pycryptodome_keccak
from eth_account import Account
from eth_keys.datatypes import PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from chainfence import Chain
from chainfence._node import rlp
from chainfence._node.accounts import SECP256K1_N, LocalKey, is_local_account
from chainfence._node.addresses import is_checksum_address, is_hex_address, to_checksum_address
from chainfence._node.signing import sign
from chainfence.errors import InvalidInput

# -- keccak256 ----------------------------------------------------------------------------------------


def test_keccak_runs_on_pycryptodomes_library_through_ctypes():
    """The fast backend is in use (the fallback through cffi would cost a CLI command its budget)."""
    assert rlp._keccak256 is not rlp._pycryptodome_module


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=700))
def test_keccak256_is_pycryptodomes_keccak(data):
    assert rlp.keccak256(data) == pycryptodome_keccak.new(digest_bits=256, data=data).digest()
    assert rlp.keccak256(bytearray(data)) == eth_utils.keccak(data)


def test_a_library_that_answers_wrongly_is_not_used(monkeypatch):
    """The control: a backend that does not give the known digests is refused for the module's own."""
    monkeypatch.setattr(rlp, "_pycryptodome_library", lambda: lambda data: b"\0" * 32)
    assert rlp._backend() is rlp._pycryptodome_module
    monkeypatch.setattr(rlp, "_pycryptodome_library", lambda: None)
    assert rlp._backend() is rlp._pycryptodome_module


# -- addresses ----------------------------------------------------------------------------------------

raw_addresses = st.binary(min_size=20, max_size=20)
hex_texts = st.one_of(
    raw_addresses.map(lambda b: "0x" + b.hex()),
    raw_addresses.map(lambda b: "0x" + b.hex().upper()),
    raw_addresses.map(lambda b: "0X" + b.hex()),
    raw_addresses.map(lambda b: b.hex()),
    raw_addresses.map(lambda b: eth_utils.to_checksum_address(b)),
    raw_addresses.map(lambda b: eth_utils.to_checksum_address(b)[:-1] + "0"),  # a mistyped checksum, often
    raw_addresses.map(lambda b: "".join(c.upper() if i % 3 else c for i, c in enumerate("0x" + b.hex()))),
)
anything = st.one_of(
    hex_texts,
    raw_addresses,
    st.binary(max_size=25),
    st.text(max_size=44),
    st.text(alphabet="0123456789abcdefABCDEFxX", max_size=44),
    st.integers(),
    st.booleans(),
    st.none(),
)


def _outcome(function, value):
    try:
        return ("value", function(value))
    except (ValueError, TypeError):
        return ("refused", None)


@settings(max_examples=500, deadline=None)
@given(anything)
def test_addresses_are_checked_and_checksummed_as_eth_utils_does(value):
    assert is_hex_address(value) == eth_utils.is_hex_address(value)
    assert is_checksum_address(value) == eth_utils.is_checksum_address(value)
    assert _outcome(to_checksum_address, value) == _outcome(eth_utils.to_checksum_address, value)


# -- keys -----------------------------------------------------------------------------------------------

secrets = st.integers(1, SECP256K1_N - 1).map(lambda n: n.to_bytes(32, "big"))
key_forms = st.one_of(
    secrets,
    secrets.map(lambda b: "0x" + b.hex()),
    secrets.map(lambda b: b.hex()),
    secrets.map(lambda b: "0X" + b.hex().upper()),
    secrets.map(bytearray),
    secrets.map(lambda b: int.from_bytes(b, "big")),
    st.binary(max_size=40),
    st.text(max_size=70),
    st.text(alphabet="0123456789abcdef", min_size=60, max_size=66),
    st.integers(min_value=-5, max_value=2**260),
    st.sampled_from([0, SECP256K1_N, SECP256K1_N - 1, b"\0" * 32, "0x" + "00" * 32, "0x" + "ff" * 32, True, None, 1.5]),
)


@settings(max_examples=400, deadline=None)
@given(key_forms)
def test_a_key_is_read_as_eth_account_reads_it(value):
    """The same keys accepted, the same refused, and each accepted one signs for the same address."""
    try:
        theirs = Account.from_key(value)
    except Exception:
        theirs = None
    try:
        ours = LocalKey.from_key(value)
    except (ValueError, TypeError):
        ours = None
    assert (ours is None) == (theirs is None), value
    if ours is not None:
        assert ours.address == theirs.address
        assert bytes(ours.key) == bytes(theirs.key)
        assert ours.key.to_0x_hex() == theirs.key.to_0x_hex()


def test_an_eth_keys_private_key_is_taken_as_eth_account_takes_it():
    key = PrivateKey(b"\x11" * 32)
    assert LocalKey.from_key(key).address == Account.from_key(key).address


@settings(max_examples=30, deadline=None)
@given(secrets, st.binary(max_size=100), st.integers(0, 2**32))
def test_a_local_key_signs_the_bytes_eth_account_signs(secret, data, nonce):
    ours, theirs = LocalKey(secret), Account.from_key(secret)
    tx = {
        "from": ours.address,
        "to": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        "data": data,
        "value": 0,
        "gas": 100_000,
        "nonce": nonce,
        "chainId": 31337,
        "maxFeePerGas": 2 * 10**9,
        "maxPriorityFeePerGas": 10**9,
    }
    assert sign(ours, tx).raw_transaction == bytes(theirs.sign_transaction(tx).raw_transaction)


def test_what_else_a_local_account_offers_is_eth_accounts_own():
    key = LocalKey(b"\x22" * 32)
    account = Account.from_key(b"\x22" * 32)
    digest = b"\x33" * 32
    assert key.unsafe_sign_hash(digest).signature == account.unsafe_sign_hash(digest).signature
    assert key.local_account().address == key.address
    assert "22" * 32 not in repr(key)  # never the key itself
    with pytest.raises(AttributeError):
        key.__missing_dunder__  # noqa: B018 - dunders are never fetched from eth-account


def test_a_chain_holds_local_keys_and_gives_eth_accounts_local_account_for_fenced_requests():
    chain = Chain.embedded(accounts=2)
    assert all(isinstance(key, LocalKey) for key in chain._signers.values())
    held = chain.key_of(chain.accounts[0])
    assert type(held).__name__ == "LocalAccount" and held.address == chain.accounts[0]
    theirs = Account.from_key(b"\x44" * 32)
    assert chain.add_account(theirs) == theirs.address and chain._signers[theirs.address] is theirs
    assert is_local_account(theirs) and is_local_account(LocalKey(b"\x44" * 32)) and not is_local_account("0x44")


@pytest.mark.parametrize("bad", ["0x" + "00" * 32, "not a key", b"\x01" * 31, SECP256K1_N, -1, None])
def test_a_bad_key_is_invalid_input_that_never_echoes_it(bad):
    with pytest.raises(InvalidInput) as caught:
        Chain.embedded(accounts=1).add_account(bad)
    assert "not a key" not in str(caught.value)
