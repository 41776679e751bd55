"""Lease operations through a relayer: an agent with a key and no gas, another account paying.

    chain = Chain.connect(url, agent_key, relayer="http://127.0.0.1:8646")
    lease = Registry.at(chain, address).connect(chain.accounts[0]).acquire("reports/daily", ttl=30)

With a relayer set (``Chain.connect(..., relayer=URL)``, :meth:`Chain.use_relayer
<chainfence.Chain.use_relayer>`, the CLI's ``--relayer`` or ``CHAINFENCE_RELAYER``), every acquisition,
exclusive acquisition, renewal, release, completion and claim the chain would send as a transaction is
signed by its sender's key as an intent (:mod:`chainfence.intents`) and handed to the relayer
(``chainfence relay``, or anything that speaks its one request), which sends it in a ``performIntents``
transaction it pays for. The lease, its events and every check are the agent's, as if it had sent the
call. Everything else (deploying, namespaces' administration, sets, group commit) is sent as a transaction, with
the sender's own gas.

Nothing the relayer says is believed. Before signing, the lone call is asked of the node as the agent
(``eth_call``; a node that runs no call from an account without funds, eth-tester, is not asked): its
refusal is the same typed error, nothing signed. Then the SDK learns what happened from
its own node alone: the registry's event of that operation for that holder (an acquisition's on that
resource from the latest token it was signed against), or the registry's ``IntentRefused`` for its digest,
in a block read from the node; nothing in a reply of the relayer's is read but whether it took the intent.
A relayer that drops, delays, duplicates or reorders costs time, no more: the intent is handed to it again
every few seconds until it lands, is refused, or its deadline (chain time) is past, after which the
registry refuses it forever, and the SDK says so: :class:`~chainfence.errors.TransactionTimeout`, nothing
happened. A relayer that lies about an outcome is not read. The deadline of a renewal is the lease's
current expiry (past it, the renewal would be refused anyway), so a keep-alive whose renewals a relayer
holds back fails closed in time, as it does when a node does.
"""

from __future__ import annotations

import functools
import json
import time
import urllib.error
import urllib.request
from typing import Any

from ._core import log as _log
from ._core.effects import RPC, Blocking, Sleep, Steps
from ._node import artifacts as _artifacts
from ._node import events as _events
from ._node.abi import decode as abi_decode
from ._node.formats import LazyReceipt
from ._node.reverts import decode as decode_revert
from ._node.transports import redact_url
from ._sdk import validate as _validate
from .errors import (
    ChainError,
    ChainfenceError,
    InsufficientFunds,
    InvalidInput,
    NodeUnreachable,
    NotSupported,
    RelayerRefused,
    RpcError,
    TransactionTimeout,
)
from .fenced_requests import EIP712Domain
from .intents import Intent, IntentKind, random_nonce

logger = _log.get(__name__)

__all__ = ["DEFAULT_VALID_FOR", "RELAYED_FUNCTIONS", "Relayer"]

#: The registry functions an agent sends through a relayer, each as the intent kind it becomes.
RELAYED_FUNCTIONS = frozenset(
    {"acquire", "acquireExclusive", "renew", "renewWithProgress", "release", "complete", "claimNext"}
)

#: How long an intent may wait to land, in seconds of chain time (a renewal: at most until its lease's expiry).
DEFAULT_VALID_FOR = 60

#: How often an intent not landed yet is handed to the relayer again, in seconds.
RESUBMIT_EVERY = 2.0

#: The most a relayer's reply may hold, in bytes (its word is read for whether it took the intent, no more).
MAX_REPLY = 64 * 1024

_ZERO32 = bytes(32)


class Relayer:
    """A relayer's URL, and how the SDK talks to it: one JSON request, ``POST {url}/v1/intents``.

    ``valid_for``: seconds of chain time an intent may wait to land (default :data:`DEFAULT_VALID_FOR`);
    ``timeout``: seconds each request may take.
    """

    def __init__(self, url: str, *, valid_for: int = DEFAULT_VALID_FOR, timeout: float = 10.0) -> None:
        self.url = _validate.rpc_url(url, "relayer").rstrip("/")
        if isinstance(valid_for, bool) or not isinstance(valid_for, int) or not 1 <= valid_for <= 86_400:
            raise InvalidInput(f"valid_for must be 1 to 86400 seconds, got {valid_for!r}", argument="valid_for")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600:
            raise InvalidInput(f"timeout must be a number of seconds up to 600, got {timeout!r}", argument="timeout")
        self.valid_for = valid_for
        self.timeout = float(timeout)
        self._domains: dict[str, EIP712Domain] = {}

    def __repr__(self) -> str:
        return f"Relayer({redact_url(self.url)!r})"

    def relays(self, data: bytes) -> bool:
        """Whether a transaction with calldata ``data`` is a lease operation this relayer sends (else it is sent
        as a transaction, with the sender's gas)."""
        return bytes(data[:4]) in _relayed_selectors()

    def submit(self, intents: list[Intent]) -> dict[str, Any]:
        """Hand ``intents`` to the relayer; its reply (JSON, bounded). Raises
        :class:`~chainfence.errors.RelayerRefused` when it says no (4xx, 5xx), and
        :class:`~chainfence.errors.NodeUnreachable` when it does not answer (``maybe_delivered`` False when the
        request cannot have reached it)."""
        body = json.dumps({"intents": [intent.to_json() for intent in intents]}).encode()
        request = urllib.request.Request(
            self.url + "/v1/intents", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        shown = redact_url(self.url)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                raw = reply.read(MAX_REPLY + 1)
        except urllib.error.HTTPError as refused:
            detail = refused.read(4_096).decode("utf-8", "replace")
            raise RelayerRefused(
                f"the relayer at {shown} refused the intent: HTTP {refused.code}: {_reason(detail)}",
                relayer_status=refused.code,
                reason=_reason(detail),
            ) from None
        except (urllib.error.URLError, OSError) as failed:
            cause = getattr(failed, "reason", failed)
            never_left = isinstance(cause, ConnectionRefusedError)
            raise NodeUnreachable(
                f"the relayer at {shown} did not answer: {cause}", reason=str(cause), maybe_delivered=not never_left
            ) from None
        if len(raw) > MAX_REPLY:
            return {}
        try:
            answer = json.loads(raw)
        except ValueError:
            return {}
        return answer if isinstance(answer, dict) else {}

    # -- the journey of one lease operation ------------------------------------------------------------

    def transact_steps(
        self, chain: Any, sender: str, to: str, data: bytes, *, resource: str | None, confirmations: int
    ) -> Steps[Any]:
        """Send ``data`` (a lease operation of the registry at ``to``) as ``sender``'s intent; the receipt of the
        transaction it landed in, holding that intent's logs only, once ``confirmations`` deep. Raises what the
        lone call raises (refused before signing, or by the registry when it ran), or
        :class:`~chainfence.errors.TransactionTimeout` when its deadline passed unlanded."""
        function, args = _decoded(data)
        if function not in RELAYED_FUNCTIONS:
            raise NotSupported(
                f"{function} needs a funded key: through a relayer only acquire, renew, release, complete and "
                "claim are sent (as signed intents)"
            )
        yield from _preflight_steps(sender, to, data)
        domain = yield from self._domain_steps(chain, to)
        poll = float(getattr(chain._sender, "poll_latency", 0.1))
        now: int = yield from chain._now_steps()
        if function in ("renew", "renewWithProgress"):
            now = yield from _moving_steps(chain, to, args, now, poll)
        intent = yield from _intent_steps(function, args, sender, to, now, self.valid_for)
        signed = intent.sign(chain.key_of(sender), domain)
        digest = signed.digest(domain)
        start: int = yield RPC.block_number()
        logger.info(
            "intent signed kind=%s holder=%s digest=0x%s deadline=%d relayer=%s",
            signed.kind.name.lower(),
            sender,
            digest.hex(),
            signed.deadline,
            redact_url(self.url),
        )
        submitted_at = yield from self._submit_steps(signed, first=True)
        scanned = start - 1
        while True:
            head: int = yield RPC.block_number()
            if head > scanned:
                found = yield from _outcome_steps(to, signed, digest, scanned + 1, head)
                if found is not None:
                    return (yield from self._settle_steps(chain, found, signed, confirmations))
                block = yield RPC.block(head)
                scanned = head
                if block is not None and int(block["timestamp"]) > signed.deadline:
                    raise TransactionTimeout(
                        f"intent 0x{digest.hex()} ({signed.kind.name.lower()} for {sender}) did not land by its "
                        f"deadline {signed.deadline} (block {head} is later): the registry refuses it from now "
                        "on; nothing happened",
                        sender=sender,
                    )
            if time.monotonic() - submitted_at >= RESUBMIT_EVERY:
                submitted_at = yield from self._submit_steps(signed, first=False)
            yield Sleep(poll)

    def _submit_steps(self, intent: Intent, *, first: bool) -> Steps[float]:
        """Hand ``intent`` to the relayer (again); when it was. The first time, a relayer that cannot have
        received it (refused connection) or refuses it raises; later, failures are logged and waited out."""
        try:
            yield Blocking(lambda: self.submit([intent]))
        except (NodeUnreachable, RelayerRefused) as failed:
            if first and (isinstance(failed, RelayerRefused) or not failed.maybe_delivered):
                raise
            logger.info("relayer: %s; the intent is watched for until its deadline", failed)
        return time.monotonic()

    def _domain_steps(self, chain: Any, registry: str) -> Steps[EIP712Domain]:
        cached = self._domains.get(registry)
        if cached is None:
            data = _artifacts.functions("FencingRegistry")["eip712Domain"][0]
            raw = yield RPC.call({"to": registry, "data": data}, "latest")
            fields, name, version, chain_id, verifying, _salt, _ext = abi_decode(
                ["bytes1", "string", "string", "uint256", "address", "bytes32", "uint256[]"], raw
            )
            if fields != b"\x0f":
                raise ChainError(f"unexpected EIP-712 domain fields 0x{fields.hex()} at {registry}")
            cached = EIP712Domain(name, version, chain_id, _validate.address(verifying))
            if cached.chain_id != chain.chain_id:
                raise ChainError(f"the registry at {registry} signs for chain {cached.chain_id}, not {chain.chain_id}")
            self._domains[registry] = cached
        return cached

    def _settle_steps(self, chain: Any, found: Any, intent: Intent, confirmations: int) -> Steps[Any]:
        """The landed intent's receipt (its logs only) once ``confirmations`` deep; a refusal raised."""
        log, refusal = found
        if refusal is not None:
            raise refusal
        while True:
            receipt = yield RPC.receipt(log.tx_hash)
            if receipt is None:  # reorganised away since the log was read: watch again from its block
                raise ChainError(f"the transaction {log.tx_hash} of intent landed and then left the chain")
            head: int = yield RPC.block_number()
            if head - int(receipt["blockNumber"]) >= confirmations:
                return _own_logs(receipt, log)
            yield Sleep(float(getattr(chain._sender, "poll_latency", 0.1)))


def _reason(detail: str) -> str:
    """The relayer's reason, from its JSON error body (bounded, printable), else its first words."""
    try:
        parsed = json.loads(detail)
        text = str(parsed.get("error", "")) if isinstance(parsed, dict) else ""
    except ValueError:
        text = detail
    text = "".join(char if char.isprintable() else "?" for char in text)
    return text[:300] or "no reason given"


@functools.cache
def _relayed_selectors() -> frozenset[bytes]:
    table = _artifacts.functions("FencingRegistry")
    return frozenset(table[function][0] for function in RELAYED_FUNCTIONS)


def _decoded(data: bytes) -> tuple[str, tuple[Any, ...]]:
    """The registry function ``data`` calls, and its arguments."""
    selector = bytes(data[:4])
    for function, (known, types) in _artifacts.functions("FencingRegistry").items():
        if known == selector:
            return function, tuple(abi_decode(list(types), bytes(data[4:])))
    raise NotSupported(f"0x{selector.hex()} is no registry function: nothing to send through a relayer")


def _preflight_steps(sender: str, to: str, data: bytes) -> Steps[None]:
    """The lone call, asked of the node as the agent: its refusal is the typed error, and nothing is signed. A
    node that runs no call from an account with no funds (eth-tester) is not asked: the registry's refusal,
    logged on the chain, comes back instead."""
    try:
        yield RPC.call({"from": sender, "to": to, "data": data}, "latest")
    except (InsufficientFunds, RpcError) as unasked:
        logger.debug("no preflight through the relayer: the node will not run a call from %s: %s", sender, unasked)
    except ChainError as unasked:
        if "base fee" not in str(unasked) and "afford" not in str(unasked):
            raise
        logger.debug("no preflight through the relayer: the node will not run a call from %s: %s", sender, unasked)


def _moving_steps(chain: Any, registry: str, args: tuple[Any, ...], now: int, poll: float) -> Steps[int]:
    """Chain time once a renewal of ``args`` (resource, token, ttl) would move its lease's expiry later (a renewal
    intent that would not is refused, so that it can land only once), or once the lease has expired (its lone
    call then says how). A lease renewed within the same second as before waits for the next block's time."""
    resource_id, ttl = args[0], args[2]
    while True:
        expiry = yield from _lease_word_steps(registry, resource_id, 2)
        if expiry == 0 or now >= expiry or now + ttl > expiry:
            return now
        yield Sleep(poll)
        now = yield from chain._now_steps()


def _lease_word_steps(registry: str, resource_id: bytes, index: int) -> Steps[int]:
    """Word ``index`` of the registry's ``leaseOf(resource_id)`` (1: the latest token; 2: the expiry)."""
    selector = _artifacts.functions("FencingRegistry")["leaseOf"][0]
    raw = yield RPC.call({"to": registry, "data": selector + resource_id}, "latest")
    return int.from_bytes(raw[32 * index : 32 * index + 32], "big")


def _intent_steps(
    function: str, args: tuple[Any, ...], sender: str, registry: str, now: int, valid_for: int
) -> Steps[Intent]:
    """The intent that stands for ``function(args)`` sent by ``sender``, its guard read from the registry now."""
    deadline = now + valid_for
    if function in ("acquire", "acquireExclusive"):
        name, ttl = args
        name = name if isinstance(name, str) else bytes(name).decode("utf-8")
        latest = yield from _lease_word_steps(registry, _validate.resource_id(name), 1)
        return Intent.acquire(
            sender, name, ttl, latest_token=latest, deadline=deadline, exclusive=function == "acquireExclusive"
        )
    if function in ("renew", "renewWithProgress"):
        resource_id, token, ttl = args[0], args[1], args[2]
        progress = args[3] if function == "renewWithProgress" else _ZERO32
        expiry = yield from _lease_word_steps(registry, resource_id, 2)
        # Past the lease's expiry the renewal is refused anyway: no later deadline is of use.
        return Intent.renew(
            sender,
            resource_id,
            token,
            ttl,
            latest_expiry=expiry,
            deadline=max(now, min(deadline, expiry)),
            progress=progress,
        )
    if function == "release":
        return Intent.release(sender, args[0], args[1], deadline=deadline)
    if function == "complete":
        return Intent.complete(sender, args[0], args[1], args[2], deadline=deadline, nonce=random_nonce())
    workset, items, ttl = args
    return Intent.claim(sender, workset, list(items), ttl, deadline=deadline, nonce=random_nonce())


#: The event of each kind's landing.
_LANDED = {
    IntentKind.ACQUIRE: _events.Kind.ACQUIRED,
    IntentKind.ACQUIRE_EXCLUSIVE: _events.Kind.ACQUIRED,
    IntentKind.RENEW: _events.Kind.RENEWED,
    IntentKind.RELEASE: _events.Kind.RELEASED,
    IntentKind.COMPLETE: _events.Kind.COMPLETED,
    IntentKind.CLAIM: _events.Kind.ACQUIRED,
}


def _outcome_steps(registry: str, intent: Intent, digest: bytes, first: int, last: int) -> Steps[Any]:
    """What the chain says of ``intent`` in blocks ``first`` to ``last``: (its landing's log, None), (the
    refusal's log, the error), or None. A landing wins over a refusal (a duplicate refused beside it)."""
    landed_kind = _LANDED[intent.kind]
    topics: list[Any] = [[_events.topic(landed_kind), _events.topic(_events.Kind.INTENT_REFUSED)]]
    if intent.kind != IntentKind.CLAIM:
        topics.append(["0x" + intent.resource_id.hex(), "0x" + digest.hex()])
    logs = yield RPC.logs(
        {"address": registry, "fromBlock": hex(first), "toBlock": hex(last), "topics": topics}, raw=True
    )
    refused = None
    for raw_log in logs:
        log = _events.decode(raw_log)
        if log is None:
            continue
        if log.kind is _events.Kind.INTENT_REFUSED:
            if log.resource_id == digest and refused is None:
                refused = log
        elif _landed(intent, log):
            if intent.kind == IntentKind.RENEW:
                # Another renewal of the same lease lands alike: this one's expiry is its block's time + its ttl.
                block = yield RPC.block(log.block_number)
                if block is None or log.expires_at != int(block["timestamp"]) + intent.ttl:
                    continue
            return log, None
    if refused is not None:
        error: ChainfenceError = decode_revert(refused.refusal or b"")
        error.add_note(f"intent 0x{digest.hex()} refused by the registry in transaction {refused.tx_hash}")
        return refused, error
    return None


def _landed(intent: Intent, log: _events.RegistryLog) -> bool:
    """Whether ``log`` is ``intent``'s landing: its operation, for its holder, on its state."""
    if log.kind is not _LANDED[intent.kind] or log.holder != intent.holder:
        return False
    kind = intent.kind
    if kind == IntentKind.CLAIM:
        from ._sdk.names import item_id

        return log.reason != 5 and log.resource_id in {item_id(intent.name, item) for item in intent.items}
    if log.resource_id != intent.resource_id:
        return False
    if kind <= IntentKind.ACQUIRE_EXCLUSIVE:
        return log.previous_token == intent.guard and log.reason != 5  # 5: granted by an admin, not this intent
    if kind == IntentKind.RENEW:
        return log.token == intent.token and log.progress == intent.data
    if kind == IntentKind.COMPLETE:
        return log.token == intent.token and log.result_digest == intent.data
    return log.token == intent.token


def _own_logs(receipt: Any, landed: _events.RegistryLog) -> Any:
    """``receipt`` with the logs of one intent only: its landing and the name it published just before
    (a relayed transaction carries other agents' operations too)."""
    raw = receipt._raw if isinstance(receipt, LazyReceipt) else None
    if raw is None:  # a formatted receipt (a provider's): rebuilt from its fields
        return receipt
    kept = []
    for entry in raw["logs"]:
        index = int(entry["logIndex"], 16) if isinstance(entry["logIndex"], str) else int(entry["logIndex"])
        if index == landed.log_index:
            kept.append(entry)
        elif index == landed.log_index - 1:
            named = _events.decode(entry)
            if named is not None and named.kind in _events.NAMING_KINDS and named.resource_id == landed.resource_id:
                kept.append(entry)
    return LazyReceipt({**raw, "logs": kept})
