"""Relayers for tests: the real one (:class:`chainfence.integrations.relay.Relay`) on a port of its own, a
hostile one that does what it likes with what it is handed, and agents whose keys hold no gas."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from eth_account import Account
from eth_utils import keccak

from chainfence import Chain, Registry
from chainfence.integrations.relay import Limits, Relay
from chainfence.intents import Intent


def agent_key(label: str) -> Any:
    """An agent's key (no gas on any chain here): the same for the same label on every run."""
    return Account.from_key(keccak(f"chainfence relayed agent {label}".encode()))


def agent_chain(chain: Chain, key: Any, relayer: str | None) -> Chain:
    """A chain over ``chain``'s node (the same transport) that holds only ``key`` and sends its lease operations
    through ``relayer``: an agent process's view."""
    agent = Chain(chain.rpc, [key], dev=chain._dev, confirmations=chain.confirmations, chain_id=chain.chain_id)
    if relayer is not None:
        agent.use_relayer(relayer)
    return agent


@contextmanager
def relay_running(registry: Registry, payer: str, **options: Any) -> Iterator[tuple[Relay, str]]:
    """The real relayer of ``registry``, paid by ``payer``, on a free loopback port: (relay, its URL)."""
    limits = options.pop("limits", None) or Limits()
    relay = Relay(registry.connect(payer), limits=limits, **options)
    server = relay.serve("127.0.0.1", 0)
    try:
        yield relay, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        relay.close()


class HostileRelayer:
    """A relayer that answers every request as it is told and sends what it was handed only when the test says,
    as many times and in whatever order: ``received`` holds each intent handed to it, ``arrived`` is set at each.

    ``answer``: the JSON it replies with (default: "accepted"; a liar says "landed" with any transaction it
    likes). :meth:`send` sends intents it holds from its own funded account (``performIntents``), to land, be
    refused, or land late; it never sends by itself."""

    def __init__(self, registry: Registry, payer: str) -> None:
        self.registry = registry
        self.chain = registry.chain
        self.payer = payer
        self.received: list[Intent] = []
        self.arrived = threading.Event()
        self.answer: Callable[[Intent], tuple[int, dict[str, Any]]] = lambda intent: (200, {"status": "accepted"})
        self._lock = threading.Lock()
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                intents = [Intent.from_json(entry) for entry in json.loads(body)["intents"]]
                with hostile._lock:
                    hostile.received.extend(intents)
                status, document = hostile.answer(intents[0])
                reply = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                hostile.arrived.set()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def distinct(self) -> list[Intent]:
        """The intents handed to it, each once, in the order they first came."""
        with self._lock:
            seen: dict[bytes, Intent] = {}
            for intent in self.received:
                seen.setdefault(intent.signature, intent)
            return list(seen.values())

    def wait_for(self, count: int) -> list[Intent]:
        """Wait until ``count`` distinct intents were handed to it; those."""
        while True:
            got = self.distinct()
            if len(got) >= count:
                return got
            self.arrived.clear()
            if len(self.distinct()) >= count:
                continue
            assert self.arrived.wait(60), f"{len(got)} of {count} intents handed to the hostile relayer"

    def send(self, intents: list[Intent]) -> Any:
        """Send ``intents`` (as handed, duplicates and order as given) in one performIntents; the receipt."""
        data = self.registry._encode("performIntents", [[intent.abi() for intent in intents]])
        return self.chain.transact(self.payer, self.registry.address, data, gas=300_000 + 150_000 * len(intents))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
