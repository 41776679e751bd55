"""The IPC transport's reading of replies (``chainfence._node.ipc``), against a Unix socket that answers
as scripted: each shape a node may write, and each way a reply can break off."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest

from chainfence._node.ipc import AsyncLeanIpc, LeanIpc, is_ipc_path
from chainfence._node.transports import ErrorReply, NotDelivered
from tests.support.scratch import socket_path


class ScriptedNode:
    """A Unix socket that reads one request line per connection turn and writes what ``answer`` returns
    for it (bytes, written as they are), then keeps the connection (or closes it if told)."""

    def __init__(self, answer):
        self.answer = answer
        self.path = socket_path("scripted", "node.ipc")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(4)
        self.requests: list[object] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn, conn.makefile("rb") as reader:
            for line in reader:
                request = json.loads(line)
                self.requests.append(request)
                reply, close = self.answer(request)
                conn.sendall(reply)
                if close:
                    return

    def close(self):
        self.server.close()


@pytest.fixture
def node_answering():
    nodes = []

    def start(answer):
        node = ScriptedNode(answer)
        nodes.append(node)
        return node

    yield start
    for node in nodes:
        node.close()


def result(request, value):
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": value}).encode() + b"\n"


def test_a_reply_on_one_line_and_a_kept_connection(node_answering):
    node = node_answering(lambda r: (result(r, "0x2a"), False))
    transport = LeanIpc(node.path, timeout=10)
    assert transport.request("eth_blockNumber", []) == "0x2a"
    assert transport.request("eth_chainId", []) == "0x2a"
    assert [r["method"] for r in node.requests] == ["eth_blockNumber", "eth_chainId"]


def test_a_notification_before_the_reply_is_skipped(node_answering):
    notification = b'{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x1","result":{}}}\n'
    node = node_answering(lambda r: (notification + result(r, "0x7"), False))
    assert LeanIpc(node.path, timeout=10).request("eth_blockNumber", []) == "0x7"


def test_a_reply_written_over_several_lines_is_read_whole(node_answering):
    node = node_answering(
        lambda r: (json.dumps({"jsonrpc": "2.0", "id": r["id"], "result": "0x9"}, indent=2).encode() + b"\n", False)
    )
    assert LeanIpc(node.path, timeout=10).request("eth_blockNumber", []) == "0x9"


def test_an_error_reply_is_the_nodes_answer(node_answering):
    def answer(r):
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
        return json.dumps(body).encode() + b"\n", False

    node = node_answering(answer)
    with pytest.raises(ErrorReply) as refused:
        LeanIpc(node.path, timeout=10).request("eth_blockNumber", [])
    assert refused.value.code == -32700


def test_a_batch_comes_back_in_the_order_asked(node_answering):
    def answer(batch):
        replies = [{"jsonrpc": "2.0", "id": call["id"], "result": call["method"]} for call in reversed(batch)]
        return json.dumps(replies).encode() + b"\n", False

    node = node_answering(answer)
    replies = LeanIpc(node.path, timeout=10).batch([("eth_call", []), ("anvil_getAutomine", [])])
    assert [reply["result"] for reply in replies] == ["eth_call", "anvil_getAutomine"]


@pytest.mark.parametrize(
    "written",
    [b"", b'{"jsonrpc":"2.0","id":1,"res', b"HTTP/1.1 400 Bad Request\r\n\r\n"],
    ids=["no-reply", "torn-reply", "not-json-rpc"],
)
def test_a_reply_that_breaks_off_is_a_connection_error_never_resent(node_answering, written):
    """The request went out: whatever comes back broken is "maybe delivered" (a ConnectionError), and the
    transport never asks again by itself."""
    node = node_answering(lambda r: (written, True))
    with pytest.raises(ConnectionError) as broken:
        LeanIpc(node.path, timeout=10).request("eth_sendRawTransaction", ["0x02"])
    assert not isinstance(broken.value, NotDelivered)
    assert len(node.requests) == 1


def test_no_socket_at_the_path_is_not_delivered():
    with pytest.raises(NotDelivered):
        LeanIpc(socket_path("none", "none.ipc"), timeout=10).request("eth_blockNumber", [])


def test_asyncio_reads_the_same_shapes(node_answering):
    notification = b'{"jsonrpc":"2.0","method":"eth_subscription","params":{}}\n'
    node = node_answering(lambda r: (notification + result(r, "0x5"), False))

    async def main():
        transport = AsyncLeanIpc(node.path, timeout=10)
        try:
            return [await transport.request("eth_blockNumber", []) for _ in range(2)]
        finally:
            await transport.close()

    assert asyncio.run(main()) == ["0x5", "0x5"]


def test_asyncio_a_torn_reply_is_a_connection_error(node_answering):
    node = node_answering(lambda r: (b'{"jsonrpc":"2.0","id":1,"res', True))

    async def main():
        await AsyncLeanIpc(node.path, timeout=10).request("eth_sendRawTransaction", ["0x02"])

    with pytest.raises(ConnectionError) as broken:
        asyncio.run(main())
    assert not isinstance(broken.value, NotDelivered)


@pytest.mark.parametrize(
    ("value", "ipc"),
    [("/tmp/anvil.ipc", True), ("node/anvil.ipc", True), ("http://127.0.0.1:8545", False), ("http://h/x.ipc", False)],
)
def test_what_names_an_ipc_socket(value, ipc):
    assert is_ipc_path(value) is ipc
