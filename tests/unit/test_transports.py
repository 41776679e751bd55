"""The node layer over its transports: each method written once, run by both layers, failures mapped once.

:mod:`chainfence._node.methods` holds every JSON-RPC method as steps over a
transport; :class:`~chainfence._node.rpc.Rpc` and :class:`~chainfence._node.rpc.AsyncRpc`
run them. These tests drive both layers over scripted transports (no node):
the retry rule (a read once more after a transport failure, a send never), a
refused batch (asked one at a time from then on), a reply the layer cannot
read (a chainfence error, never a bare ``ValueError``), an error reply (the
one map); and, over the embedded chain, that the in-process chain's answers
read exactly as web3 formats them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from chainfence import Chain, Registry
from chainfence._node.formats import format_block, format_receipt, format_transaction, quantity
from chainfence._node.rpc import AsyncRpc, Rpc
from chainfence._node.transports import AsyncTransport, ErrorReply, NotDelivered, Transport
from chainfence.errors import ChainError, InsufficientFunds, LeaseHeld, NodeUnreachable, RpcError


class Scripted(Transport):
    """A transport that answers from a script: ``answers[method]`` is a list of results or exceptions,
    taken in turn (the last one repeats); every request and batch is logged."""

    def __init__(self, answers: dict[str, list[Any]], *, batch: list[Any] | None = None):
        self.answers = {method: list(script) for method, script in answers.items()}
        self.batch_answers = list(batch or [])
        self.log: list[str] = []

    def _take(self, script: list[Any]) -> Any:
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def request(self, method: str, params: Sequence[Any]) -> Any:
        self.log.append(method)
        return self._take(self.answers[method])

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        self.log.append("batch:" + ",".join(method for method, _ in calls))
        return self._take(self.batch_answers)


class AsyncScripted(AsyncTransport):
    """:class:`Scripted`, awaited."""

    def __init__(self, scripted: Scripted):
        self.scripted = scripted

    async def request(self, method: str, params: Sequence[Any]) -> Any:
        return self.scripted.request(method, params)

    async def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        return self.scripted.batch(calls)


@pytest.fixture(params=["Rpc", "AsyncRpc"])
def layer(request):
    """``layer(transport)``: a callable that runs one method of that layer to its result."""

    def over(transport: Scripted):
        if request.param == "Rpc":
            rpc = Rpc(transport)
            return lambda method, *args, **kwargs: getattr(rpc, method)(*args, **kwargs)
        rpc = AsyncRpc(AsyncScripted(transport))
        return lambda method, *args, **kwargs: asyncio.run(getattr(rpc, method)(*args, **kwargs))

    return over


def test_a_read_is_asked_once_more_after_a_transport_failure(layer):
    transport = Scripted({"eth_blockNumber": [ConnectionResetError("reset"), "0x2a"]})
    assert layer(transport)("block_number") == 42
    assert transport.log == ["eth_blockNumber", "eth_blockNumber"]


def test_a_read_that_fails_twice_is_node_unreachable_maybe_delivered(layer):
    transport = Scripted({"eth_blockNumber": [ConnectionResetError("connection reset by peer")]})
    with pytest.raises(NodeUnreachable) as raised:
        layer(transport)("block_number")
    assert transport.log == ["eth_blockNumber"] * 2
    assert raised.value.reason == "connection reset" and raised.value.maybe_delivered is True


def test_a_send_is_never_asked_twice(layer):
    transport = Scripted({"eth_sendRawTransaction": [NotDelivered("failed to establish a new connection")]})
    with pytest.raises(NodeUnreachable) as raised:
        layer(transport)("send_raw", b"\x01")
    assert transport.log == ["eth_sendRawTransaction"], "the sender owns every resend"
    assert raised.value.maybe_delivered is False


def test_an_error_reply_goes_through_the_one_map(layer):
    """The node's error object: RpcError with its code; "insufficient funds" names the sending account."""
    refused = ErrorReply("eth_sendRawTransaction", {"error": {"code": -32000, "message": "insufficient funds for gas"}})
    transport = Scripted(
        {
            "eth_sendRawTransaction": [refused],
            "eth_gasPrice": [ErrorReply("eth_gasPrice", {"error": {"code": -32601, "message": "no such method"}})],
        }
    )
    with pytest.raises(InsufficientFunds) as poor:
        layer(transport)("send_raw", b"\x01", sender="0xabc")
    assert poor.value.account == "0xabc" and "0xabc" in str(poor.value)
    with pytest.raises(RpcError) as refused_error:
        layer(transport)("gas_price")
    assert refused_error.value.code == -32601 and refused_error.value.method == "eth_gasPrice"


def test_a_reply_the_layer_cannot_read_is_a_chain_error_not_a_value_error(layer):
    transport = Scripted({"eth_blockNumber": ["0xzz"]})
    with pytest.raises(ChainError) as raised:
        layer(transport)("block_number")
    assert isinstance(raised.value.__cause__, ValueError)


def test_control_the_parse_alone_raises_a_bare_value_error():
    """The control: without the layer's mapping around the whole call, the same reply is a ValueError."""
    with pytest.raises(ValueError) as raised:
        quantity("0xzz")
    assert not isinstance(raised.value, ChainError)


def test_a_refused_batch_is_asked_one_at_a_time_and_never_batched_again(layer):
    block = {"number": "0x1", "timestamp": "0x10", "hash": "0x" + "11" * 32}
    transport = Scripted(
        {"eth_getBlockByNumber": [block]},
        batch=[
            ErrorReply("eth_getBlockByNumber", {"error": {"code": -32600, "message": "batch requests are disabled"}})
        ],
    )
    run = layer(transport)
    assert [b["number"] for b in run("blocks", [1, 2])] == [1, 1]
    assert transport.log == [
        "batch:eth_getBlockByNumber,eth_getBlockByNumber",
        "eth_getBlockByNumber",
        "eth_getBlockByNumber",
    ]


def test_a_layer_remembers_a_refused_batch():
    transport = Scripted(
        {"eth_getBlockByNumber": [{"number": "0x1"}]},
        batch=[ErrorReply("eth_getBlockByNumber", {"error": {"message": "no batches"}})],
    )
    rpc = Rpc(transport)
    rpc.blocks([1, 2])
    transport.log.clear()
    rpc.blocks([1, 2])
    assert transport.log == ["eth_getBlockByNumber", "eth_getBlockByNumber"]


def test_one_reply_of_a_batch_carries_its_own_error(layer):
    """A call and the pending block in one round trip: the call's revert is the contract error; a node
    without a pending block leaves the timestamp unknown, not the call failed."""
    held = "0x" + bytes.fromhex("be88f4c8").hex() + "00" * 32 * 4
    transport = Scripted(
        {},
        batch=[
            [
                {"error": {"code": 3, "message": "execution reverted", "data": held}},
                {"result": {"timestamp": "0x10"}},
            ],
            [{"result": "0x01"}, {"error": {"code": -32602, "message": "unknown block tag pending"}}],
        ],
    )
    run = layer(transport)
    with pytest.raises(LeaseHeld):
        run("call_and_pending_timestamp", {"to": "0x" + "00" * 20, "data": b""})
    assert run("call_and_pending_timestamp", {"to": "0x" + "00" * 20, "data": b""}) == (b"\x01", None)


def test_the_embedded_chains_answers_read_as_web3_formats_them(embedded: Registry):
    """What the in-process chain answers (eth-tester's ints and hex strings) comes out of the layer in
    exactly the shapes web3's own formatters give: blocks, receipts, transactions, logs."""
    chain = embedded.chain
    lease = embedded.connect(chain.accounts[1]).acquire("shapes/one", ttl=60)
    w3 = chain.w3
    assert chain.rpc.block("latest") == w3.eth.get_block("latest")
    assert chain.rpc.block(lease.block_number) == w3.eth.get_block(lease.block_number)
    assert chain.rpc.receipt(lease.tx_hash) == w3.eth.get_transaction_receipt(lease.tx_hash)
    assert chain.rpc.transaction(lease.tx_hash) == w3.eth.get_transaction(lease.tx_hash)
    query = {"address": embedded.address, "fromBlock": lease.block_number, "toBlock": lease.block_number}
    assert chain.rpc.logs(query) == w3.eth.get_logs(query)


def test_control_the_embedded_chains_raw_answers_are_not_web3s_shapes(embedded: Registry):
    """The control: the same answers unformatted differ from web3's (a bloom as an int, hashes as text)."""
    chain = embedded.chain
    lease = embedded.connect(chain.accounts[1]).acquire("shapes/two", ttl=60)
    transport = chain.rpc.transport
    raw_block = transport.request("eth_getBlockByNumber", ["latest", False])
    raw_receipt = transport.request("eth_getTransactionReceipt", [lease.tx_hash])
    raw_transaction = transport.request("eth_getTransactionByHash", [lease.tx_hash])
    assert raw_block != chain.w3.eth.get_block("latest") and isinstance(raw_block["logsBloom"], int)
    assert raw_receipt != chain.w3.eth.get_transaction_receipt(lease.tx_hash)
    assert raw_transaction != chain.w3.eth.get_transaction(lease.tx_hash)
    assert format_block(raw_block) == chain.w3.eth.get_block("latest")
    assert format_receipt(raw_receipt) == chain.w3.eth.get_transaction_receipt(lease.tx_hash)
    assert format_transaction(raw_transaction) == chain.w3.eth.get_transaction(lease.tx_hash)


def test_an_embedded_chain_needs_no_node_layer_import_outside_the_layer():
    """Chain.embedded builds its backend in the node layer: a plain Chain works without chain.py ever
    naming eth-tester (tests/unit/test_one_rpc_layer.py holds the source to it)."""
    chain = Chain.embedded(accounts=1)
    assert chain.rpc.embedded and chain._eth_tester is chain.rpc.transport.tester
