"""One layer talks to the chain: nothing outside the chainfence/_node/ package reaches web3, a provider or an HTTP client.

:mod:`chainfence._node` is the layer; its :mod:`~chainfence._node.rpc` is where every request goes through a
transport, where every failure of one becomes a chainfence error (once, through
:func:`chainfence._node.failures.translating`) and where the retry rule lives
(reads once more, sends never). A module that called ``w3.eth`` or a provider
itself would bypass both: a raw ``requests`` exception could reach a user, a
send could be resent. This test reads every module with :mod:`ast` and fails
on any way around the layer:

- importing an HTTP/JSON-RPC client (requests, urllib3, aiohttp, httpx,
  websockets, http.client, urllib.request) or web3;
- touching web3's API: ``.eth``, ``.net``, ``.geth``, ``.manager``,
  ``.provider``, ``make_request``, web3-only method names
  (``send_raw_transaction``, ``get_logs``, ``get_block``, ...), any
  attribute of a ``w3`` object, a provider class or ``Web3`` itself;
- calling the embedded chain's eth-tester (``<...>eth_tester.<method>``) or
  importing eth_tester: its dev controls raise their own exceptions too.

The asyncio layer (``AsyncRpc``) lives in the same module and runs the same
methods (:mod:`chainfence._node.methods`); the tests at the end check that every
request the core yields (``RPC.<method>``, :mod:`chainfence._core.effects`) is
answered by both layers, and that both have every method, dev controls included.

Nothing is allowed silently: :data:`ALLOWED` lists each exception with its
reason, and an entry that no longer matches anything fails the test too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import chainfence

SRC = Path(chainfence.__file__).resolve().parent
LAYER = "_node"

#: Client libraries (top-level package) no module but the layer may import.
BANNED_PACKAGES = {"requests", "urllib3", "aiohttp", "httpx", "websockets", "web3", "eth_tester"}
#: Standard-library HTTP clients.
BANNED_MODULES = {"http.client", "urllib.request"}

#: Attribute names that only web3's API has (the layer's own methods have other names:
#: send_raw, logs, block, code, receipt, transaction, nonce).
WEB3_ATTRIBUTES = {
    "eth",
    "_eth",
    "net",
    "geth",
    "manager",
    "provider",
    "middleware_onion",
    "make_request",
    "make_batch_request",
    "request_blocking",
    "is_connected",
    "send_raw_transaction",
    "send_transaction",
    "get_logs",
    "get_filter_logs",
    "get_block",
    "get_code",
    "get_transaction",
    "get_transaction_receipt",
    "get_transaction_count",
    "get_balance",
    "get_storage_at",
    "wait_for_transaction_receipt",
    "fee_history",
    "create_access_list",
    "get_proof",
}

#: Names that build a way to a node.
WEB3_NAMES = {
    "Web3",
    "AsyncWeb3",
    "HTTPProvider",
    "AsyncHTTPProvider",
    "WebSocketProvider",
    "LegacyWebSocketProvider",
    "IPCProvider",
    "AsyncIPCProvider",
    "EthereumTesterProvider",
    "AsyncEthereumTesterProvider",
}


@dataclass(frozen=True)
class Allowed:
    module: str  # file name under src/chainfence
    what: str  # the violation's description, exactly
    why: str


#: Each way around the layer that must stay, and why. None: the embedded chain's backend is built
#: in the layer too (chainfence._node.embedded).
ALLOWED: list[Allowed] = [
    Allowed(
        "relaying.py",
        "import urllib.request",
        "the relayer is not a node: one request (POST /v1/intents) hands it a signed intent, and nothing it "
        "answers is read as the chain's word (what happened is asked of the node, through the layer); its "
        "failures are typed there (RelayerRefused, NodeUnreachable)",
    )
]


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def violations(source: str) -> list[tuple[int, str]]:
    """(line, description) of every way around the layer in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            modules = []
        for module in modules:
            if module.split(".")[0] in BANNED_PACKAGES or module in BANNED_MODULES:
                found.append((node.lineno, f"import {module}"))
        if isinstance(node, ast.Attribute):
            receiver = _dotted(node.value) or ""
            last = receiver.rsplit(".", 1)[-1]
            if node.attr in WEB3_ATTRIBUTES:
                found.append((node.lineno, f".{node.attr}"))
            elif last in ("w3", "web3"):
                found.append((node.lineno, f"{last}.{node.attr}"))
            elif last.endswith("eth_tester"):
                found.append((node.lineno, f"eth_tester.{node.attr}"))
            if node.attr in WEB3_NAMES:
                found.append((node.lineno, node.attr))
        if isinstance(node, ast.Name) and node.id in WEB3_NAMES:
            found.append((node.lineno, node.id))
        if isinstance(node, ast.alias) and node.name in WEB3_NAMES:
            found.append((getattr(node, "lineno", 0), node.name))
    return sorted(set(found))


def modules() -> list[Path]:
    """Every module outside the layer's folder."""
    return sorted(path for path in SRC.rglob("*.py") if path.relative_to(SRC).parts[0] != LAYER)


def test_the_layer_exists_and_the_search_sees_the_package():
    assert (SRC / LAYER / "rpc.py").is_file()
    names = {str(path.relative_to(SRC)) for path in modules()}
    assert {"chain.py", "registry.py", "guard/__init__.py", "cli/__init__.py", "audit/index.py"} <= names


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(SRC)))
def test_no_module_but_the_layer_talks_to_the_chain(path):
    allowed = {a.what for a in ALLOWED if a.module == str(path.relative_to(SRC))}
    found = [(line, what) for line, what in violations(path.read_text(encoding="utf-8")) if what not in allowed]
    assert not found, "\n".join(f"{path.name}:{line}: {what} (go through chainfence._node.rpc)" for line, what in found)


def test_every_allowance_still_matches_something_and_says_why():
    for allowance in ALLOWED:
        assert allowance.why
        source = (SRC / allowance.module).read_text(encoding="utf-8")
        assert allowance.what in {what for _, what in violations(source)}, f"stale allowance: {allowance}"


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        ("import requests", "import requests"),
        ("from urllib3.exceptions import ProtocolError", "import urllib3.exceptions"),
        ("import urllib.request", "import urllib.request"),
        ("from web3 import Web3", "import web3"),
        ("chain.w3.eth.get_block('latest')", ".eth"),
        ("self.w3.client_version", "w3.client_version"),
        ("w3.provider.make_request('eth_blockNumber', [])", ".provider"),
        ("rpc._eth.get_logs({})", "._eth"),
        ("eth.send_raw_transaction(raw)", ".send_raw_transaction"),
        ("HTTPProvider(url)", "HTTPProvider"),
        ("self._eth_tester.mine_blocks(1)", "eth_tester.mine_blocks"),
    ],
)
def test_the_search_finds_each_way_around_the_layer(snippet, what):
    """This test can fail: each pattern it looks for is found in a snippet."""
    assert what in {found for _, found in violations(snippet)}


def test_the_layers_own_methods_are_not_mistaken_for_web3():
    source = "rpc.send_raw(raw)\nrpc.logs({})\nrpc.block('latest')\nself.rpc.estimate_gas(tx, 'pending')\nself.w3 = w3"
    assert violations(source) == []


# ---------------------------------------------------------------------------
# The asyncio layer: the same layer, awaited (chainfence.aio runs the core over it)
# ---------------------------------------------------------------------------


def core_requests() -> set[str]:
    """Every request the core yields to a driver: ``RPC.<method>(...)`` anywhere in the package."""
    names = set()
    for path in sorted(SRC.rglob("*.py")):  # the layer's own steps (sending) too
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "RPC"
            ):
                names.add(node.func.attr)
    return names


def test_every_request_of_the_core_is_answered_by_both_layers():
    """The core (chainfence._core.effects steps) asks the layer by method name; each name must be a method of
    the blocking Rpc and a coroutine of AsyncRpc, or one of the two drivers could not run it."""
    import inspect

    from chainfence._node.rpc import AsyncRpc, Rpc

    names = core_requests()
    assert {"send_raw", "receipt", "transaction", "call_and_pending_timestamp"} <= names, "the search sees the core"
    for name in sorted(names):
        assert callable(getattr(Rpc, name, None)), f"Rpc has no {name}"
        assert inspect.iscoroutinefunction(getattr(AsyncRpc, name, None)), f"AsyncRpc has no coroutine {name}"


def test_the_async_layer_has_every_method_of_the_sync_one_dev_controls_included():
    from chainfence._node.rpc import AsyncRpc, Rpc

    def public(cls):
        return {name for name in vars(cls) if not name.startswith("_")}

    assert public(Rpc) == public(AsyncRpc) - {"twin_of"}
    assert {"request", "tester", "close"} <= public(AsyncRpc)


def test_both_layers_run_every_method_written_once():
    """Each method of either layer is one of chainfence._node.methods' steps, and each of those is a
    method of both: neither layer holds a copy of its own."""
    import inspect

    from chainfence._node import methods
    from chainfence._node.rpc import AsyncRpc, Rpc

    written = {
        name.removesuffix("_steps")
        for name, function in inspect.getmembers(methods, inspect.isfunction)
        if name.endswith("_steps") and not name.startswith("_") and function.__module__ == methods.__name__
    }
    for cls in (Rpc, AsyncRpc):
        run = {name for name in vars(cls) if not name.startswith("_") and name not in ("close", "twin_of")}
        assert run == written, cls.__name__
        for name in run:
            assert getattr(cls, name).__doc__ == getattr(methods, f"{name}_steps").__doc__


def test_both_layers_turn_a_refused_connection_into_the_same_typed_error():
    """One translation (``translate``) for both: a node that refuses connections is NodeUnreachable,
    marked never delivered, through requests and through aiohttp alike."""
    import asyncio
    import socket

    from chainfence._node.rpc import AsyncRpc, Rpc, connect_http
    from chainfence._node.web3_providers import connect_async_http
    from chainfence.errors import NodeUnreachable

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # bound, not listening: connections are refused
        with pytest.raises(NodeUnreachable) as sync_error:
            Rpc(connect_http(url, timeout=5), embedded=False).send_raw(b"\x01")

        async def send() -> None:
            rpc = AsyncRpc(connect_async_http(url, timeout=5), embedded=False)
            try:
                await rpc.send_raw(b"\x01")
            finally:
                await rpc.close()

        with pytest.raises(NodeUnreachable) as async_error:
            asyncio.run(send())
    assert sync_error.value.maybe_delivered is False and async_error.value.maybe_delivered is False
