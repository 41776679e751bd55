"""``chainfence relay``: a relayer that sends agents' signed intents, group-committed, from its funded key.

    from chainfence.integrations.relay import Limits, Relay

    relay = Relay(registry.connect(funded), journal="relay.jsonl", limits=Limits(rate=60, spend_cap=2_000_000))
    server = relay.serve("127.0.0.1", 8646)      # HTTP/JSON; relay.close() stops it

Agents (any process, any machine that reaches the port) hand it intents they signed with keys that hold no
gas (:mod:`chainfence.intents`, sent by :mod:`chainfence.relaying`); it checks each (shape, bounds,
deadline, signature, the agent's rate and spend; for a contract holder, that the registry would take it
now: an ``eth_call``), writes it to its journal, and sends what it took in ``performIntents`` transactions
of up to 64 intents, one at a time, from its key, through the SDK's never-twice sender. An intent the
registry refuses when it runs (the resource held, the agent not admitted, ...) is refused on the chain,
logged with its reason for the agent to read, and its cost counted against the agent's cap.

The relayer needs no trust: the registry runs each intent as its signer's lone call, refuses it after its
deadline, on another registry or chain, for another signer, or a second time; agents read the outcome from
their own node. What a relayer can do is withhold, delay (never past an intent's deadline), pay, or not.

Its own funds are what it protects: every request is bounded (its body, its intents, their names and
items), each agent key has a rate (intents a minute) and a spend cap (gas an hour, counted at each intent's
bound when taken and at its share of the gas used once sent), all keys together a spend cap (keys are free
to make: only this cap, or the allowlist, bounds a flood from many), and an allowlist of keys may close it to
others. A relayer
that crashes and restarts reads its journal back and sends again what it took and had not seen land, each
checked against the registry first: nothing lands twice (the registry's guard would refuse it anyway).

Requests (JSON): ``POST /v1/intents`` ``{"intents": [Intent.to_json(), ...]}``, answered ``200``
``{"results": [{"digest": "0x...", "status": "accepted" | "duplicate"}]}``, or, when none was taken, the
first refusal's status (400 malformed, 413 too large, 422 refused, 429 over a rate or a cap, 503 full)
and ``{"error": "...", "results": [...]}``; ``GET /v1/intents/0x<digest>`` what the relayer knows of one
(its word: the agents never need it); ``GET /v1/health`` its registry, chain and address.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .._core import log as _log
from .._node import events as _events
from .._node.abi import decode as abi_decode
from .._sdk import validate as _validate
from ..errors import ChainfenceError, InvalidInput, InvalidSignature
from ..intents import Intent, IntentKind

logger = _log.get(__name__)

__all__ = ["Limits", "Relay"]

#: Gas an intent of each kind may take in a batch, at its dearest (a first acquisition of a 128-byte name under
#: every namespace check, recording its namespace; a claim over its items), with the intent's own checks.
_GAS = {
    IntentKind.ACQUIRE: 120_000,
    IntentKind.ACQUIRE_EXCLUSIVE: 120_000,
    IntentKind.RENEW: 45_000,
    IntentKind.RELEASE: 40_000,
    IntentKind.COMPLETE: 65_000,
    IntentKind.CLAIM: 100_000,
}
#: A claim's gas for each item it lists (a hash and a cold read each, and its calldata).
_GAS_PER_ITEM = 4_500
#: A contract holder's ERC-1271 stipend and its call.
_GAS_CONTRACT_HOLDER = 55_000
#: A batch's own gas, besides its intents'.
_GAS_BATCH = 60_000


def intent_gas(intent: Intent, *, contract_holder: bool = False) -> int:
    """The most gas ``intent`` may take in a batch: what the relayer sends for it and counts against caps."""
    gas = _GAS[intent.kind] + _GAS_PER_ITEM * len(intent.items)
    return gas + (_GAS_CONTRACT_HOLDER if contract_holder else 0)


class Limits:
    """What a :class:`Relay` takes. ``max_body``: bytes of a request's body; ``max_intents``: intents a request;
    ``rate``: intents a key may hand in a minute (a token bucket of that size, refilled continuously);
    ``spend_cap``: gas a key's intents may cost in an hour; ``total_spend_cap``: gas all keys' may (None: no
    cap); ``max_queue``: intents waiting; ``allow``: the only holders taken (None: any)."""

    def __init__(
        self,
        *,
        max_body: int = 256 * 1024,
        max_intents: int = 64,
        rate: int = 120,
        spend_cap: int = 5_000_000,
        total_spend_cap: int | None = None,
        max_queue: int = 4_096,
        allow: frozenset[str] | None = None,
    ) -> None:
        for name, value, low, high in (
            ("max_body", max_body, 1_024, 16 * 1024 * 1024),
            ("max_intents", max_intents, 1, 64),
            ("rate", rate, 1, 1_000_000),
            ("spend_cap", spend_cap, 21_000, 10**12),
            ("max_queue", max_queue, 1, 1_000_000),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidInput(f"{name} must be an int from {low} to {high}, got {value!r}", argument=name)
        if total_spend_cap is not None and (not isinstance(total_spend_cap, int) or total_spend_cap < 21_000):
            raise InvalidInput("total_spend_cap must be None or an int of at least 21000", argument="total_spend_cap")
        self.max_body, self.max_intents, self.rate, self.spend_cap = max_body, max_intents, rate, spend_cap
        self.total_spend_cap, self.max_queue = total_spend_cap, max_queue
        self.allow = None if allow is None else frozenset(_validate.address(holder, "allow") for holder in allow)


class _Refused(Exception):
    """An intent (or a request) the relayer does not take: an HTTP status and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


class _Pending:
    """An intent taken and not settled: the intent, its digest, the gas counted for it."""

    __slots__ = ("charged", "contract", "digest", "intent")

    def __init__(self, intent: Intent, digest: bytes, charged: int, contract: bool) -> None:
        self.intent, self.digest, self.charged, self.contract = intent, digest, charged, contract


class Relay:
    """The relayer of the registry ``registry`` (its sender pays). See the module."""

    def __init__(
        self,
        registry: Any,
        *,
        journal: str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        gather: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if registry.sender is None:
            raise InvalidInput("the relay's registry needs a sender: registry.connect(funded_account)")
        self.registry = registry
        self.chain = registry.chain
        self.sender: str = registry.sender
        self.limits = limits or Limits()
        self.gather = gather
        self._clock = clock
        self._domain = registry.eip712_domain()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: OrderedDict[bytes, _Pending] = OrderedDict()
        self._buckets: dict[str, tuple[float, float]] = {}  # holder -> (tokens, when)
        self._spent: dict[str, deque[tuple[float, int]]] = {}  # holder -> (when, gas), the last hour
        self._spent_total: deque[tuple[float, int]] = deque()
        self._known: OrderedDict[bytes, dict[str, Any]] = OrderedDict()  # digest -> what the relayer knows
        self._journal = Path(journal) if journal is not None else None
        self._stopping = False
        self._worker: threading.Thread | None = None
        self._server: ThreadingHTTPServer | None = None
        self._handlers = threading.BoundedSemaphore(64)
        self.sent_batches = 0
        if self._journal is not None:
            self._recover()

    # -- taking intents --------------------------------------------------------------------------------

    def take(self, body: bytes) -> tuple[int, dict[str, Any]]:
        """A request's body, judged: (HTTP status, JSON answer). Nothing it refuses is queued or counted."""
        if len(body) > self.limits.max_body:
            return 413, {"error": f"the body is over {self.limits.max_body} bytes"}
        try:
            document = json.loads(body)
        except ValueError:
            return 400, {"error": "the body is not JSON"}
        listed = document.get("intents") if isinstance(document, dict) else None
        if not isinstance(listed, list) or not 1 <= len(listed) <= self.limits.max_intents:
            return 400, {"error": f"the body is {{'intents': [1 to {self.limits.max_intents} intents]}}"}
        results: list[dict[str, Any]] = []
        first: _Refused | None = None
        for entry in listed:
            try:
                results.append(self._take_one(entry))
            except _Refused as refused:
                first = first or refused
                results.append({"status": "refused", "error": refused.reason, "code": refused.status})
        if first is not None and all(result["status"] == "refused" for result in results):
            return first.status, {"error": first.reason, "results": results}
        return 200, {"results": results}

    def _take_one(self, entry: object) -> dict[str, Any]:
        try:
            intent = Intent.from_json(entry)
        except InvalidSignature as bad:
            raise _Refused(400, str(bad)) from None
        except InvalidInput as bad:
            raise _Refused(400, str(bad)) from None
        digest = intent.digest(self._domain)
        allow = self.limits.allow
        if allow is not None and intent.holder not in allow:
            raise _Refused(403, f"{intent.holder} is not among the keys this relayer serves")
        now = self.chain.now()
        if intent.deadline < now:
            raise _Refused(422, f"the intent's deadline {intent.deadline} is past (chain time {now})")
        contract = self._signed_by_contract(intent, digest)
        gas = intent_gas(intent, contract_holder=contract)
        with self._lock:
            if digest in self._queue:
                return {"digest": "0x" + digest.hex(), "status": "duplicate"}
            if len(self._queue) >= self.limits.max_queue:
                raise _Refused(503, "the relayer's queue is full: try again later")
            self._check_rate(intent.holder)
            self._check_spend(intent.holder, gas)
        # A contract holder's answer is its own code's: asked of the registry now (an eth_call), so that a holder
        # whose check burns its stipend or says no is not paid for. An account's signature was checked above;
        # what the registry makes of its intent is the chain's to say (a refusal is logged, its cost counted).
        if contract and not self._would_land(intent):
            raise _Refused(422, "the registry would refuse the intent now (eth_call of performIntents)")
        with self._lock:
            if digest in self._queue:
                return {"digest": "0x" + digest.hex(), "status": "duplicate"}
            self._spend_rate(intent.holder)
            self._charge(intent.holder, gas)
            self._write({"taken": intent.to_json(), "digest": "0x" + digest.hex()})
            self._queue[digest] = _Pending(intent, digest, gas, contract)
            self._remember(digest, {"status": "queued"})
            self._wake.notify()
        logger.info("relay: took intent 0x%s of %s (%s)", digest.hex(), intent.holder, intent.kind.name.lower())
        return {"digest": "0x" + digest.hex(), "status": "accepted"}

    def _signed_by_contract(self, intent: Intent, digest: bytes) -> bool:
        """Whether ``intent``'s holder is a contract (ERC-1271, judged by the registry's eth_call); refused when
        it is an account whose key did not sign it."""
        try:
            if intent.recover(self._domain) == intent.holder:
                return False
        except InvalidSignature:
            pass
        code = self.chain.rpc.code(intent.holder)
        if not code:
            raise _Refused(422, f"the intent is not signed by its holder {intent.holder}")
        return True

    def _would_land(self, intent: Intent) -> bool:
        """Whether the registry takes ``intent`` now: ``performIntents([intent])`` asked with ``eth_call``."""
        data = self.registry._encode("performIntents", [[intent.abi()]])
        try:
            raw = self.chain.rpc.call({"from": self.sender, "to": self.registry.address, "data": data}, "latest")
        except ChainfenceError as failed:
            raise _Refused(503, f"the relayer could not ask its node: {type(failed).__name__}") from None
        (refused,) = abi_decode(["uint256"], bytes(raw))
        return bool(refused == 0)

    # -- limits (called under the lock) ---------------------------------------------------------------

    def _check_rate(self, holder: str) -> None:
        tokens, _ = self._bucket(holder)
        if tokens < 1:
            raise _Refused(429, f"{holder} is over its rate: {self.limits.rate} intents a minute")

    def _bucket(self, holder: str) -> tuple[float, float]:
        now = self._clock()
        capacity = float(self.limits.rate)
        tokens, when = self._buckets.get(holder, (capacity, now))
        return min(capacity, tokens + (now - when) * capacity / 60.0), now

    def _spend_rate(self, holder: str) -> None:
        tokens, now = self._bucket(holder)
        self._buckets[holder] = (tokens - 1, now)

    def _window(self, spent: deque[tuple[float, int]]) -> int:
        horizon = self._clock() - 3_600.0
        while spent and spent[0][0] < horizon:
            spent.popleft()
        return sum(gas for _, gas in spent)

    def _check_spend(self, holder: str, gas: int) -> None:
        if self._window(self._spent.setdefault(holder, deque())) + gas > self.limits.spend_cap:
            raise _Refused(429, f"{holder} is over its spend cap: {self.limits.spend_cap} gas an hour")
        cap = self.limits.total_spend_cap
        if cap is not None and self._window(self._spent_total) + gas > cap:
            raise _Refused(503, f"the relayer is over its spend cap: {cap} gas an hour")

    def _charge(self, holder: str, gas: int) -> None:
        now = self._clock()
        self._spent.setdefault(holder, deque()).append((now, gas))
        self._spent_total.append((now, gas))

    def spent(self, holder: str) -> int:
        """Gas counted against ``holder``'s spend cap in the last hour."""
        with self._lock:
            return self._window(self._spent.setdefault(holder, deque()))

    # -- sending ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker that sends what was taken (idempotent)."""
        with self._lock:
            if self._worker is None:
                self._stopping = False
                self._worker = threading.Thread(target=self._work, name="chainfence-relay", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
            time.sleep(self.gather)  # let more intents join this transaction
            try:
                self.send_once()
            except Exception:
                logger.exception("relay: a batch failed; its intents stay queued until their deadlines")
                time.sleep(0.5)

    def send_once(self) -> int:
        """Send up to 64 of the intents taken, in one transaction; how many were sent (0: none waiting)."""
        now = self.chain.now()
        with self._lock:
            for digest in [d for d, pending in self._queue.items() if pending.intent.deadline < now]:
                self._queue.pop(digest)
                self._settle(digest, {"status": "expired"})
            batch = list(self._queue.values())[:64]
        if not batch:
            return 0
        gas = _GAS_BATCH + sum(intent_gas(p.intent, contract_holder=p.contract) for p in batch)
        data = self.registry._encode("performIntents", [[p.intent.abi() for p in batch]])
        receipt = self.chain.transact(self.sender, self.registry.address, data, gas=gas)
        self.sent_batches += 1
        refused = {}
        for log in receipt["logs"]:
            decoded = _events.decode(log)
            if decoded is not None and decoded.kind is _events.Kind.INTENT_REFUSED and decoded.index is not None:
                refused[decoded.index] = decoded.refusal
        tx_hash = receipt["transactionHash"].to_0x_hex()
        share = int(receipt["gasUsed"]) // len(batch)
        with self._lock:
            for index, pending in enumerate(batch):
                self._queue.pop(pending.digest, None)
                outcome = {"status": "landed", "tx": tx_hash}
                if index in refused:
                    outcome = {"status": "refused", "tx": tx_hash, "reason": "0x" + (refused[index] or b"").hex()}
                self._recharge(pending, share)
                self._settle(pending.digest, outcome)
        logger.info("relay: sent %d intents in %s (%d refused)", len(batch), tx_hash, len(refused))
        return len(batch)

    def _recharge(self, pending: _Pending, gas: int) -> None:
        """Count what ``pending`` cost (its share of the gas used) in place of its bound."""
        holder = pending.intent.holder
        self._spent.setdefault(holder, deque()).append((self._clock(), gas - pending.charged))
        self._spent_total.append((self._clock(), gas - pending.charged))

    def _settle(self, digest: bytes, outcome: dict[str, Any]) -> None:
        self._remember(digest, outcome)
        self._write({"settled": "0x" + digest.hex(), **outcome})

    def _remember(self, digest: bytes, what: dict[str, Any]) -> None:
        self._known[digest] = what
        self._known.move_to_end(digest)
        while len(self._known) > 100_000:
            self._known.popitem(last=False)

    def status(self, digest: bytes) -> dict[str, Any] | None:
        """What the relayer knows of the intent whose digest is ``digest`` (its word), or None."""
        with self._lock:
            return self._known.get(digest)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- the journal ------------------------------------------------------------------------------------

    def _write(self, record: dict[str, Any]) -> None:
        if self._journal is None:
            return
        with open(self._journal, "a", encoding="utf-8") as file:
            file.write(json.dumps(record, separators=(",", ":")) + "\n")
            file.flush()
            os.fsync(file.fileno())

    def _recover(self) -> None:
        """Queue again what the journal says was taken and not settled (each checked against the registry)."""
        assert self._journal is not None
        if not self._journal.exists():
            return
        taken: OrderedDict[str, Intent] = OrderedDict()
        with open(self._journal, encoding="utf-8") as file:
            for line in file:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line torn by a crash: its intent was not answered as taken
                if "taken" in record:
                    try:
                        taken[record["digest"]] = Intent.from_json(record["taken"])
                    except InvalidInput:
                        continue
                elif "settled" in record:
                    taken.pop(record["settled"], None)
        now = self.chain.now()
        for digest_hex, intent in taken.items():
            digest = bytes.fromhex(digest_hex[2:])
            # An intent that landed before the crash would be refused now (its guard): not sent again.
            if intent.deadline < now or not self._would_land(intent):
                self._settle(digest, {"status": "dropped on restart"})
                continue
            contract = bool(self.chain.rpc.code(intent.holder))
            self._queue[digest] = _Pending(intent, digest, intent_gas(intent, contract_holder=contract), contract)
            self._remember(digest, {"status": "queued"})
        if self._queue:
            logger.info("relay: %d intents of the journal queued again", len(self._queue))

    # -- HTTP ---------------------------------------------------------------------------------------------

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
        """Serve HTTP/JSON on ``host``:``port`` (0: any free port: ``server.server_address``) in a thread, and
        start the worker. On a loopback address, requests whose Host is not a loopback name are refused
        (a web page cannot reach it through DNS rebinding)."""
        relay = self
        loopback = host in ("127.0.0.1", "::1", "localhost")

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # a client that stalls mid-request is dropped
            server_version = "chainfence-relay"

            def log_message(self, format: str, *args: Any) -> None:
                logger.debug("relay http: " + format, *args)

            def _answer(self, status: int, document: dict[str, Any]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _allowed(self) -> bool:
                if loopback:
                    name = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
                    if name not in ("127.0.0.1", "localhost", "::1"):
                        self._answer(403, {"error": "this relayer serves loopback clients only"})
                        return False
                if not relay._handlers.acquire(blocking=False):
                    self._answer(503, {"error": "the relayer is busy: try again later"})
                    return False
                return True

            def do_POST(self) -> None:
                if not self._allowed():
                    return
                try:
                    if self.path != "/v1/intents":
                        self._answer(404, {"error": "POST /v1/intents"})
                        return
                    length = self.headers.get("Content-Length")
                    if length is None or not length.isdigit():
                        self._answer(411, {"error": "a Content-Length is needed"})
                        return
                    if int(length) > relay.limits.max_body:
                        self._answer(413, {"error": f"the body is over {relay.limits.max_body} bytes"})
                        self.close_connection = True
                        return
                    status, document = relay.take(self.rfile.read(int(length)))
                    self._answer(status, document)
                finally:
                    relay._handlers.release()

            def do_GET(self) -> None:
                if not self._allowed():
                    return
                try:
                    if self.path == "/v1/health":
                        self._answer(
                            200,
                            {
                                "registry": relay.registry.address,
                                "chain_id": relay.chain.chain_id,
                                "relayer": relay.sender,
                                "pending": relay.pending(),
                            },
                        )
                    elif self.path.startswith("/v1/intents/0x") and len(self.path) == len("/v1/intents/0x") + 64:
                        try:
                            digest = bytes.fromhex(self.path[len("/v1/intents/0x") :])
                        except ValueError:
                            self._answer(400, {"error": "a digest is 32 bytes of hex"})
                            return
                        known = relay.status(digest)
                        self._answer(200 if known else 404, known or {"error": "unknown intent"})
                    else:
                        self._answer(404, {"error": "GET /v1/health or /v1/intents/0x<digest>"})
                finally:
                    relay._handlers.release()

        server = ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, name="chainfence-relay-http", daemon=True).start()
        self.start()
        return server

    def close(self) -> None:
        """Stop serving and sending (what is queued stays in the journal, sent again on restart)."""
        with self._lock:
            self._stopping = True
            self._wake.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        worker = self._worker
        if worker is not None:
            worker.join(timeout=30)
            self._worker = None
