"""A receipt's fields as a provider sends them (issue 25): each one refused where the reply is read.

The SDK formats a receipt's fields as they are first read (``_node.formats.LazyReceipt``, issue #19).
A provider that sent a field that does not read (a ``gasUsed`` that is not hex, a ``status`` 4,000
digits wide, a ``blockHash`` of 31 bytes, a log's ``logIndex`` of letters, ``logs`` that are no list, a
``from`` that is no address) was not refused where its reply was read: the receipt came back, and a
bare ``ValueError`` came later, wherever that field was first read (a user's ``receipt.gasUsed`` after
``Chain.transact`` returned; the sender's own failure path, as an untyped ``ChainError``). Now every
field is checked where the reply is read (``formats.check_receipt``): ``MalformedReply``, a
``NodeUnreachable`` (no usable answer), naming the method and the field. A sender waiting for its
receipt goes on asking, as it does of a node that does not answer, and reports ``OutcomeUnknown``
with the hash; the transaction, mined, is found by it.

Each lie is told by a lying provider: a loopback proxy in front of anvil, and in process on the
embedded chain.
"""

from __future__ import annotations

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence._node import formats
from chainfence.errors import ChainfenceError, MalformedReply, NodeUnreachable, OutcomeUnknown
from chainfence.testing.anvil import dev_keys

#: (the field, as the error names it; the lie told in it)
LIES = {
    "gasUsed": "0xzz",
    "status": "0x" + "f" * 4_000,
    "blockHash": "0x" + "ab" * 31,
    "from": "0x1234",
    "logs": {"not": "a list"},
    "logs[0].logIndex": "zz",
    "logs[1].topics": ["0x" + "cd" * 33],
}


def telling(liar, field: str) -> None:
    """Every receipt answered (eth_getTransactionReceipt, eth_sendRawTransactionSync) carries ``LIES[field]``
    in ``field``; the rest is the node's."""

    def lie(receipt):
        if not isinstance(receipt, dict):
            return receipt
        if field.startswith("logs["):
            index, name = int(field[5]), field.split(".", 1)[1]
            receipt["logs"][index][name] = LIES[field]
        else:
            receipt[field] = LIES[field]
        return receipt

    liar.on("eth_getTransactionReceipt", lambda params, forward: lie(forward(params)))
    liar.on("eth_sendRawTransactionSync", lambda params, forward: lie(forward(params)))


@pytest.mark.parametrize("field", sorted(LIES))
def test_a_malformed_receipt_field_is_refused_where_the_reply_is_read(lied, field):
    registry, liar, lied_to = lied
    lease = registry.connect(registry.chain.accounts[1]).acquire("receipts/first", ttl=60)  # two logs: named, acquired
    telling(liar, field)
    with pytest.raises(MalformedReply) as refused:
        lied_to.chain.rpc.receipt(lease.tx_hash)
    error = refused.value
    assert (error.method, error.field) == ("eth_getTransactionReceipt", field), repr(error)
    assert isinstance(error, NodeUnreachable) and error.reason and field in str(error)
    assert len(repr(error)) < 400, "the lie's value is cut short"
    with pytest.raises(MalformedReply):  # a public read of it too: typed, at the read
        lied_to.lease_from_tx(lease.tx_hash)
    liar.honest()
    assert lied_to.lease_from_tx(lease.tx_hash).token == lease.token


def test_control_read_as_before_the_receipt_comes_back_and_fails_where_a_field_is_first_read(lied, monkeypatch):
    """The naive read: the receipt wrapped unchecked. It comes back; the lie surfaces later, untyped."""
    registry, liar, lied_to = lied
    monkeypatch.setattr(formats, "check_receipt", lambda raw, method="": None)
    lease = registry.connect(registry.chain.accounts[1]).acquire("receipts/first", ttl=60)
    telling(liar, "gasUsed")
    receipt = lied_to.chain.rpc.receipt(lease.tx_hash)
    assert receipt.status == 1, "read, and used"
    with pytest.raises(ValueError) as late:
        _ = receipt.gasUsed
    assert not isinstance(late.value, ChainfenceError), "a bare ValueError, far from the read"


@pytest.fixture
def sending(on_anvil, liar):
    """A chain that sends through the liar (a key of its own, no other sender of it meanwhile), waiting at
    most a second for a node that gives no usable answer."""
    chain = Chain.connect(
        liar.url, private_key=dev_keys(10)[6], timeouts=Timeouts(receipt=30, unreachable=1.0, poll=0.01)
    )
    yield Registry.at(chain, on_anvil.address)
    chain.rpc.close()


def test_a_sender_told_a_malformed_receipt_reports_the_outcome_unknown_with_its_hash(on_anvil, liar, sending):
    telling(liar, "gasUsed")
    with pytest.raises(OutcomeUnknown) as doubt:
        sending.acquire("receipts/sent", ttl=60)
    cause = doubt.value.__cause__
    assert isinstance(cause, MalformedReply) and cause.field == "gasUsed", repr(cause)
    found = on_anvil.lease_from_tx(doubt.value.tx_hash)  # reconciled by its hash, through an honest provider
    assert found is not None and found.resource == "receipts/sent" and found.holder == sending.sender


def test_control_a_sender_reading_receipts_as_before_hands_out_one_that_fails_later(
    on_anvil, liar, sending, monkeypatch
):
    monkeypatch.setattr(formats, "check_receipt", lambda raw, method="": None)
    telling(liar, "gasUsed")
    receipt = sending.chain.transact(sending.sender, sending.sender, b"")
    assert receipt.status == 1
    with pytest.raises(ValueError) as late:
        _ = receipt.gasUsed
    assert not isinstance(late.value, ChainfenceError)
