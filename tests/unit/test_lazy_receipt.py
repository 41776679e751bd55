"""A receipt formatted as it is read (``chainfence._node.formats.LazyReceipt``) is web3's receipt to whoever reads it.

The sender reads of a receipt its status, hash, block and its registry's own event; formatting every
field and log into web3's shape first cost more than the rest of a release's Python (issue #19). So the
receipts the SDK waits for are formatted field by field when read, and whoever reads more of one (a
user of ``Chain.transact``, an error's ``receipt``) must not be able to tell: each field, iteration,
equality, hashing, printing and pickling give what :func:`format_receipt` gives (and web3's own
formatter, ``tests/unit/test_lean_http.py``).
"""

from __future__ import annotations

import pickle

import pytest
from web3._utils.method_formatters import receipt_formatter
from web3.datastructures import AttributeDict as Web3AttributeDict

from chainfence._node import events, formats
from chainfence._node.formats import LazyReceipt, format_receipt, lazy_receipt, raw_logs
from chainfence._node.shapes import AttributeDict
from tests.unit.test_lean_http import RECEIPT, _types

DEPLOYMENT = dict(RECEIPT, to=None, contractAddress="0x5fbdb2315678afecb367f032d93f642f64180aa3", logs=[])


@pytest.mark.parametrize("raw", [RECEIPT, DEPLOYMENT], ids=["call", "deployment"])
def test_a_lazy_receipt_reads_as_the_formatted_one_in_every_way(raw):
    lazy, formatted = lazy_receipt(dict(raw)), format_receipt(dict(raw))
    web3s = Web3AttributeDict.recursive(receipt_formatter(dict(raw)))
    assert isinstance(lazy, AttributeDict)
    assert lazy == formatted and formatted == lazy and lazy == web3s and web3s == lazy
    assert list(lazy) == list(formatted) and len(lazy) == len(formatted)
    assert dict(lazy) == dict(formatted) and list(lazy.items()) == list(formatted.items())
    assert {key: _types(value) for key, value in lazy.items()} == {
        key: _types(value) for key, value in formatted.items()
    }
    assert hash(lazy_receipt(dict(raw))) == hash(formatted)
    assert repr(lazy_receipt(dict(raw))) == repr(formatted)
    assert pickle.loads(pickle.dumps(lazy_receipt(dict(raw)))) == formatted
    assert lazy.get("nothing") is None and "status" in lazy and "nothing" not in lazy


def test_fields_are_formatted_when_read_and_only_those():
    lazy = lazy_receipt(dict(RECEIPT))
    assert lazy.status == 1 and lazy["blockNumber"] == 16
    assert lazy.transactionHash.to_0x_hex() == "0x" + "22" * 32
    assert set(lazy.__dict__) == {"status", "blockNumber", "transactionHash"}
    assert lazy.logs == format_receipt(dict(RECEIPT)).logs
    with pytest.raises(AttributeError):
        _ = lazy.nothing
    with pytest.raises(KeyError):
        _ = lazy["nothing"]
    with pytest.raises(TypeError):
        lazy.status = 0  # read-only, as AttributeDict is


def test_not_mined_stays_none():
    assert lazy_receipt(None) is None and format_receipt(None) is None


def test_raw_logs_are_the_nodes_until_the_logs_are_read_formatted():
    lazy = lazy_receipt(dict(RECEIPT))
    assert raw_logs(lazy) is RECEIPT["logs"]
    formatted_logs = lazy["logs"]
    assert raw_logs(lazy) is formatted_logs
    assert raw_logs(format_receipt(dict(RECEIPT))) == formatted_logs


def _acquired_log(address: str) -> dict:
    token, holder = 7, "f39fd6e51aad88f6f4ce6ab8827279cfffb92266"
    data = (1_700_000_060).to_bytes(32, "big") + (6).to_bytes(32, "big") + (0).to_bytes(32, "big")
    return {
        "address": address,
        "topics": [
            events.topic(events.Kind.ACQUIRED),
            "0x" + "ab" * 32,
            "0x" + token.to_bytes(32, "big").hex(),
            "0x" + "00" * 12 + holder,
        ],
        "data": "0x" + data.hex(),
        "blockHash": "0x" + "11" * 32,
        "blockNumber": "0x10",
        "transactionHash": "0x" + "22" * 32,
        "transactionIndex": "0x0",
        "logIndex": "0x1",
        "removed": False,
    }


def test_first_decodes_only_the_kind_asked_for_from_the_address_asked_for(monkeypatch):
    registry = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
    named = dict(_acquired_log(registry), topics=[events.topic(events.Kind.NAMED), "0x" + "ab" * 32], data="0x")
    stranger = _acquired_log("0x" + "99" * 20)
    logs = [named, stranger, _acquired_log(registry)]
    decoded: list = []
    decode = events._decode_as
    monkeypatch.setattr(events, "_decode_as", lambda log, *rest: (decoded.append(log), decode(log, *rest))[1])
    found = events.first(logs, "0x5FbDB2315678afecb367f032d93F642f64180aa3", events.Kind.ACQUIRED)
    assert found is not None and found.token == 7 and found.log_index == 1
    assert decoded == [logs[2]]  # neither the name's log nor the stranger's was decoded
    # The same from web3's shapes (HexBytes topics, checksum addresses).
    shaped = [formats.format_log(log) for log in logs]
    assert events.first(shaped, registry, events.Kind.ACQUIRED) == found
    assert events.first(logs, registry, events.Kind.RELEASED) is None


def test_control_a_formatted_receipt_formats_every_log():
    """What the sender did before: every log of the receipt built in web3's shape, read or not."""
    built: list = []
    entry = formats._log_entry
    try:
        formats._log_entry = lambda log: (built.append(log), entry(log))[1]
        format_receipt(dict(RECEIPT))
        assert len(built) == len(RECEIPT["logs"])
        built.clear()
        assert isinstance(lazy_receipt(dict(RECEIPT)), LazyReceipt) and built == []
    finally:
        formats._log_entry = entry
