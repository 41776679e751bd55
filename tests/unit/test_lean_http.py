"""The lean transport's pieces, without a node: web3's result shapes, and HTTP replies however framed.

``chainfence._node.formats.format_receipt`` replaces web3's receipt formatter on the
hot path; the SDK (and users, through ``Lease`` and errors) read receipts as
web3 returns them, so the two must agree field for field: the same values, and
the same shapes by name (``AttributeDict``, ``HexBytes``: since issue #19 the
SDK's own, ``chainfence._node.shapes``, so that no web3 is imported). ``_Connection``
parses replies itself: Content-Length and chunked bodies, and a reply that
breaks off is a ``ConnectionError`` (the request went out: maybe delivered).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping

import pytest
from web3._utils.method_formatters import block_result_formatter, receipt_formatter, transaction_result_formatter
from web3.datastructures import AttributeDict

from chainfence._node.formats import format_block, format_receipt, format_transaction
from chainfence._node.lean_http import _Connection

RECEIPT = {
    "type": "0x2",
    "status": "0x1",
    "cumulativeGasUsed": "0x8b9e",
    "logs": [
        {
            "address": "0x5fbdb2315678afecb367f032d93f642f64180aa3",
            "topics": [
                "0x" + "ab" * 32,
                "0x" + "cd" * 32,
                "0x" + "00" * 31 + "05",
                "0x000000000000000000000000f39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            ],
            "data": "0x" + "00" * 96,
            "blockHash": "0x" + "11" * 32,
            "blockNumber": "0x10",
            "blockTimestamp": "0x6560",
            "transactionHash": "0x" + "22" * 32,
            "transactionIndex": "0x0",
            "logIndex": "0x0",
            "removed": False,
        }
    ],
    "logsBloom": "0x" + "00" * 256,
    "transactionHash": "0x" + "22" * 32,
    "transactionIndex": "0x0",
    "blockHash": "0x" + "11" * 32,
    "blockNumber": "0x10",
    "gasUsed": "0x8b9e",
    "effectiveGasPrice": "0x3b9aca07",
    "from": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "to": "0x5fbdb2315678afecb367f032d93f642f64180aa3",
    "contractAddress": None,
}


def test_a_receipt_reads_as_web3_formats_it():
    """Every field (ints, HexBytes, checksum addresses, nested logs) equals web3's own formatting."""
    ours, web3s = format_receipt(dict(RECEIPT)), AttributeDict.recursive(receipt_formatter(dict(RECEIPT)))
    assert ours == web3s
    assert _types(ours) == _types(web3s)
    assert ours["transactionHash"].to_0x_hex() == "0x" + "22" * 32


def test_a_deployment_receipt_reads_as_web3_formats_it():
    """A creation: ``to`` is null and ``contractAddress`` set."""
    raw = dict(RECEIPT, to=None, contractAddress="0x5fbdb2315678afecb367f032d93f642f64180aa3", logs=[])
    assert format_receipt(dict(raw)) == AttributeDict.recursive(receipt_formatter(dict(raw)))


TRANSACTION = {
    "type": "0x2",
    "chainId": "0x7a69",
    "nonce": "0x3",
    "gas": "0x1c9c380",
    "maxFeePerGas": "0x77359400",
    "maxPriorityFeePerGas": "0x1",
    "to": "0x5fbdb2315678afecb367f032d93f642f64180aa3",
    "value": "0x0",
    "accessList": [{"address": "0x5fbdb2315678afecb367f032d93f642f64180aa3", "storageKeys": ["0x" + "0a" * 32]}],
    "input": "0xabcdef",
    "r": "0x" + "12" * 32,
    "s": "0x" + "34" * 31,
    "yParity": "0x1",
    "v": "0x1",
    "hash": "0x" + "22" * 32,
    "blockHash": "0x" + "11" * 32,
    "blockNumber": "0x10",
    "transactionIndex": "0x0",
    "from": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "gasPrice": "0x3b9aca07",
    "blobVersionedHashes": ["0x01" + "ab" * 31],
    "maxFeePerBlobGas": "0x10",
    "authorizationList": [
        {
            "chainId": "0x7a69",
            "address": "0x5fbdb2315678afecb367f032d93f642f64180aa3",
            "nonce": "0x0",
            "yParity": "0x0",
            "r": "0x" + "56" * 32,
            "s": "0x" + "78" * 32,
        }
    ],
}

BLOCK = {
    "hash": "0x" + "11" * 32,
    "parentHash": "0x" + "33" * 32,
    "sha3Uncles": "0x" + "44" * 32,
    "miner": "0x0000000000000000000000000000000000000000",
    "stateRoot": "0x" + "55" * 32,
    "transactionsRoot": "0x" + "66" * 32,
    "receiptsRoot": "0x" + "77" * 32,
    "logsBloom": "0x" + "00" * 256,
    "difficulty": "0x0",
    "number": "0x10",
    "gasLimit": "0x1c9c380",
    "gasUsed": "0x8b9e",
    "timestamp": "0x6560",
    "extraData": "0x",
    "mixHash": "0x" + "88" * 32,
    "nonce": "0x0000000000000000",
    "baseFeePerGas": "0x3b9aca00",
    "withdrawalsRoot": "0x" + "99" * 32,
    "blobGasUsed": "0x0",
    "excessBlobGas": "0x0",
    "parentBeaconBlockRoot": "0x" + "aa" * 32,
    "requestsHash": "0x" + "bb" * 32,
    "totalDifficulty": "0x0",
    "size": "0x261",
    "uncles": [],
    "transactions": ["0x" + "22" * 32],
    "withdrawals": [
        {
            "index": "0x1",
            "validatorIndex": "0x2",
            "address": "0x5fbdb2315678afecb367f032d93f642f64180aa3",
            "amount": "0x3",
        }
    ],
}


def _types(value):
    """The shape of ``value``, by class name (the SDK's ``AttributeDict`` and ``HexBytes`` are named as web3's)."""
    if isinstance(value, Mapping):
        return (type(value).__name__, {key: _types(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value).__name__


def test_a_transaction_reads_as_web3_formats_it():
    """web3's private formatter is the oracle here only: the package never imports it (test_packaging)."""
    ours, web3s = (
        format_transaction(dict(TRANSACTION)),
        AttributeDict.recursive(transaction_result_formatter(dict(TRANSACTION))),
    )
    assert ours == web3s and _types(ours) == _types(web3s)
    pending = dict(TRANSACTION, blockHash=None, blockNumber=None, transactionIndex=None, to=None)
    assert format_transaction(dict(pending)) == AttributeDict.recursive(transaction_result_formatter(dict(pending)))


def test_a_block_reads_as_web3_formats_it_with_hashes_or_full_transactions():
    for block in (BLOCK, dict(BLOCK, transactions=[TRANSACTION])):
        ours, web3s = format_block(dict(block)), AttributeDict.recursive(block_result_formatter(dict(block)))
        assert ours == web3s and _types(ours) == _types(web3s)
    assert format_block(None) is None


def reply_of(wire: bytes) -> tuple[int, str, bool, bytes]:
    server, client = socket.socketpair()
    writer = threading.Thread(target=lambda: (server.sendall(wire), server.close()))
    writer.start()
    try:
        return _Connection(client).read_response()
    finally:
        writer.join()
        client.close()


def test_a_content_length_reply_keeps_the_connection():
    assert reply_of(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-type: application/json\r\n\r\n{}") == (
        200,
        "OK",
        False,
        b"{}",
    )


def test_a_chunked_reply_is_joined():
    wire = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\n5;x=y\r\n":1}\n\r\n0\r\n\r\n'
    assert reply_of(wire) == (200, "OK", False, b'{"a":1}\n')


def test_an_interim_reply_is_skipped_and_close_is_honoured():
    wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n[]"
    assert reply_of(wire) == (200, "OK", True, b"[]")


@pytest.mark.parametrize(
    "wire",
    [
        b"",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Le",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}",
        b"SSH-2.0-OpenSSH\r\n",
    ],
    ids=["nothing", "short-body", "torn-headers", "torn-chunk", "not-http"],
)
def test_a_reply_that_breaks_off_is_a_connection_error(wire):
    """However the reply breaks off, it is a ConnectionError: the request went out (maybe delivered)."""
    with pytest.raises(ConnectionError):
        reply_of(wire)
