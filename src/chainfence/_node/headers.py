"""Trusted block headers for the proven mode: from no single provider.

A header is trusted when its fields hash to the block hash a quorum of
independent providers agree on (:class:`QuorumHeaders`), or to the hash one
endpoint the user trusts for headers gives (:class:`TrustedHeaders`: a light
client such as Helios, the user's own node, a checkpoint service). Either
way the header's fields are hashed here: a provider cannot hand over a state
root that is not the one the agreed hash commits to.

The header's RLP, field by field, as mainnet and anvil have them (each
fork appends fields; a block carries those of the forks it is under)::

    parentHash sha3Uncles miner stateRoot transactionsRoot receiptsRoot logsBloom
    difficulty number gasLimit gasUsed timestamp extraData mixHash nonce   (frontier)
    baseFeePerGas            (london, EIP-1559)
    withdrawalsRoot          (shanghai, EIP-4895)
    blobGasUsed excessBlobGas parentBeaconBlockRoot   (cancun, EIP-4844, EIP-4788)
    requestsHash             (prague, EIP-7685)

A block with a field from a later fork (or one a provider added to forge a
header) does not hash to its hash and is refused as
:class:`~chainfence.errors.ProofInvalid` (``served="header"``): never trusted on its word.

Choosing the block (:meth:`QuorumHeaders.current`): every provider is
asked for its head (``latest``, or ``finalized``); the chosen block is the
k-th highest head (the newest block at least k providers have), less
``confirmations``. Every provider is then asked for that block's header
(the head answers already are the header when ``confirmations`` is 0 and
the heads agree, so a cold check asks each provider once); a hash that k
of them vouch for, each with a header that hashes to it, is the trusted
header. Outcomes, each typed, none a fallback to believing one provider:

- fewer than k providers answer          -> ProviderUnavailable (names the ones down)
- no hash has k votes (or two have)       -> HeadersDisagree (each provider's answer)
- the header is older than ``max_age`` by the verifier's clock
  (withheld heads, a stopped chain)       -> HeaderStale (with every head reported)
- k agree, some did not                  -> trusted; the dissent is kept on the
                                            header (``VerifiedHeader.dissent``) and logged

No check waits for a provider once the others have settled its question: the heads as soon as k
of them are one block, the k-th highest answered (a head still out could only name a newer block);
a header as soon as k vouch for one hash and no other hash can reach k with the answers still out.
A provider that is silent, slow or trickling is then outvoted in the time the quorum takes (its
request runs on, to its timeout, on a thread of its own; the dissent says it was not waited for);
one whose reply is out of bounds (:mod:`chainfence._node.replies`: too long, too deep, a number too
wide) answered nothing. A provider is asked once per question: a cold check asks each for its head
and, unless its head was the block, for the block.

One verified header is cached per block number and served to every check
at that block; :meth:`QuorumHeaders.at` verifies the header of any block by
number the same way (a follower's logs: see ``docs/guarantees.md``).
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any

from .._core import log as _log
from ..errors import (
    BlockNotVouched,
    ChainfenceError,
    HeadersDisagree,
    HeaderStale,
    InvalidInput,
    ProofInvalid,
    ProviderUnavailable,
    RpcError,
)
from .jsonrpc import Endpoint, endpoint
from .rlp import RLPError, encode, keccak256

logger = _log.get(__name__)

__all__ = [
    "HeaderSource",
    "QuorumHeaders",
    "TrustedHeaders",
    "VerifiedHeader",
    "header_hash",
    "header_rlp",
    "linked",
]

# (JSON-RPC name, kind) in RLP order. Kinds: h32 a 32-byte hash, a20 an address, b256 the bloom,
# q a quantity (int), b bytes, n8 the 8-byte nonce.
_BASE_FIELDS = (
    ("parentHash", "h32"),
    ("sha3Uncles", "h32"),
    ("miner", "a20"),
    ("stateRoot", "h32"),
    ("transactionsRoot", "h32"),
    ("receiptsRoot", "h32"),
    ("logsBloom", "b256"),
    ("difficulty", "q"),
    ("number", "q"),
    ("gasLimit", "q"),
    ("gasUsed", "q"),
    ("timestamp", "q"),
    ("extraData", "b"),
    ("mixHash", "h32"),
    ("nonce", "n8"),
)
#: Fields later forks append, in order: a header carries a prefix of them.
_FORK_FIELDS = (
    ("baseFeePerGas", "q"),  # london
    ("withdrawalsRoot", "h32"),  # shanghai
    ("blobGasUsed", "q"),
    ("excessBlobGas", "q"),
    ("parentBeaconBlockRoot", "h32"),  # cancun
    ("requestsHash", "h32"),  # prague
)
_SIZES = {"h32": 32, "a20": 20, "b256": 256, "n8": 8}

#: What a header's dissent says of a provider whose answer came after k others had settled the block.
NOT_WAITED_FOR = "not waited for: k providers agreed first"


def _bytes(value: Any, name: str) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ValueError(f"{name} is not 0x-hex")
    try:
        return bytes.fromhex(value[2:])
    except ValueError:
        raise ValueError(f"{name} is not 0x-hex") from None


#: Bits a header's quantity may have: 64 for its number and its time (as clients hold them), 256 for the
#: others. A wider one is refused as the header's, before anything formats it (Python reads hex of any
#: width, then cannot write an int of more than 4,300 digits as text: a ValueError in a log line).
_BITS = {"number": 64, "timestamp": 64}


def _quantity(value: Any, name: str) -> int:
    bits = _BITS.get(name, 256)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        if value >> bits:
            raise ValueError(f"{name} is wider than {bits} bits")
        return value
    if not isinstance(value, str) or not value.startswith("0x") or len(value) < 3:
        raise ValueError(f"{name} is not a 0x quantity")
    if len(value) > 2 + bits // 4:
        raise ValueError(f"{name} is wider than {bits} bits ({len(value) - 2} hex digits)")
    try:
        return int(value, 16)
    except ValueError:
        raise ValueError(f"{name} is not a 0x quantity") from None


def _field(block: dict[str, Any], name: str, kind: str) -> bytes | int:
    value = block[name]
    if kind == "q":
        return _quantity(value, name)
    data = _bytes(value, name)
    size = _SIZES.get(kind)
    if size is not None and len(data) != size:
        raise ValueError(f"{name} is {len(data)} bytes, not {size}")
    return data


def header_fields(block: dict[str, Any]) -> list[bytes | int]:
    """The header's RLP items from a JSON-RPC block object (``eth_getBlockByNumber``)."""
    if not isinstance(block, dict):
        raise ValueError("a block is a JSON object")
    items: list[bytes | int] = []
    for name, kind in _BASE_FIELDS:
        if name not in block or block[name] is None:
            raise ValueError(f"the block has no {name}")
        items.append(_field(block, name, kind))
    present = [name for name, _ in _FORK_FIELDS if block.get(name) is not None]
    count = len(present)
    expected = [name for name, _ in _FORK_FIELDS[:count]]
    if present != expected:
        raise ValueError(f"fork fields out of order: {present} (a header carries a prefix of {expected})")
    for name, kind in _FORK_FIELDS[:count]:
        items.append(_field(block, name, kind))
    return items


def header_rlp(block: dict[str, Any]) -> bytes:
    """The RLP of the header a JSON-RPC block object describes."""
    return encode(header_fields(block))


def header_hash(block: dict[str, Any]) -> bytes:
    """The block hash the header's fields commit to: keccak256 of its RLP."""
    return keccak256(header_rlp(block))


@dataclass(frozen=True)
class VerifiedHeader:
    """A header whose fields hash to the block hash its source vouches for."""

    number: int
    hash: bytes
    parent_hash: bytes
    state_root: bytes
    receipts_root: bytes
    timestamp: int
    #: The providers that vouched for this hash.
    vouched_by: tuple[str, ...] = ()
    #: Providers that said something else, and what (a hash, or why their answer did not count).
    dissent: dict[str, str] = field(default_factory=dict)
    #: The root of the trie of the block's transactions (what proves a receipt's ``transactionHash``).
    transactions_root: bytes | None = None

    @property
    def hash_hex(self) -> str:
        return "0x" + self.hash.hex()


def _verify(block: Any, provider: str, number: int | None) -> tuple[bytes, dict[str, Any]]:
    """(hash, block) after checking the block's fields hash to its ``hash``; ProofInvalid (``served="header"``) otherwise."""
    if block is None:
        raise ProofInvalid(served="header", source=provider, block=number, reason="the provider has no such block")
    try:
        computed = header_hash(block)
        claimed = _bytes(block.get("hash"), "hash")
        got_number = _quantity(block.get("number"), "number")
    except (ValueError, RLPError, AttributeError) as exc:
        raise ProofInvalid(served="header", source=provider, block=number, reason=str(exc)) from None
    if number is not None and got_number != number:
        raise ProofInvalid(served="header", source=provider, block=number, reason=f"it answered block {got_number}")
    if computed != claimed:
        raise ProofInvalid(
            served="header",
            source=provider,
            block=got_number,
            reason=f"its fields hash to 0x{computed.hex()}, not to the hash it claims 0x{claimed.hex()}",
        )
    return computed, block


def linked(blocks: Sequence[Any], anchor: VerifiedHeader, *, provider: str) -> list[Any]:
    """``blocks``, the headers of consecutive blocks ending at ``anchor``'s as ``provider`` answered them,
    once each is checked: its fields hash to its hash, the last one is the anchor, and each one's hash
    is the next one's ``parentHash``. Each is then as trusted as the anchor (the anchor's hash commits
    to its parent's, and so on down), its ``logsBloom`` and ``receiptsRoot`` included, for one header
    vouched for. :class:`~chainfence.errors.ProofInvalid` for a header whose fields do not hash to
    its hash, :class:`~chainfence.errors.BlockNotVouched` for one off the anchor's chain."""
    expected, anchor_hex = anchor.hash, anchor.hash_hex
    for offset, block in enumerate(reversed(blocks)):
        number = anchor.number - offset
        computed, _ = _verify(block, provider, number)
        if computed != expected:
            raise BlockNotVouched(
                block=number,
                block_hash="0x" + computed.hex(),
                vouched_hash="0x" + expected.hex(),
                head=anchor.number,
                message=(
                    f"block {number} from {provider} is 0x{computed.hex()}, but block {anchor.number}, which the "
                    f"header source vouches for ({anchor_hex}), descends from 0x{expected.hex()}"
                ),
            )
        expected = _bytes(block["parentHash"], "parentHash")
    return list(blocks)


class _Lane:
    """One provider's requests, run on at most two daemon threads of its own, started as needed.

    Daemon threads, unlike a ``ThreadPoolExecutor``'s, which the interpreter joins at exit: a request no
    check waits for any more (a silent provider's, outvoted) must not hold the process's exit until its
    timeout (``chainfence verify --proven`` did). A future not started yet can be cancelled."""

    _THREADS = 2

    def __init__(self, name: str):
        self._name = name
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._work.put((future, fn, args))
        with self._lock:
            if self._idle == 0 and self._threads < self._THREADS:
                self._threads += 1
                threading.Thread(target=self._run, name=self._name, daemon=True).start()
        return future

    def _run(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            item = self._work.get()
            with self._lock:
                self._idle -= 1
                if item is None:
                    self._threads -= 1  # closed (a later request starts a thread again)
                    return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled: its check stopped waiting before it started
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # _answer returns chainfence errors; anything else, as a pool would
                future.set_exception(exc)

    def close(self) -> None:
        """Let the threads end once the requests queued before are done."""
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._work.put(None)


def _answer(e: Endpoint, method: str, params: list[Any]) -> Any:
    """``e``'s result, or the ChainfenceError it raised."""
    try:
        return e.request(method, params)
    except ChainfenceError as exc:
        return exc


class HeaderSource:
    """Where the proven mode's trusted headers come from (see the module docstring)."""

    def __init__(
        self,
        providers: Sequence[Any],
        *,
        k: int | None = None,
        confirmations: int | str = 0,
        max_age: float | None = None,
        clock: Callable[[], float] | None = None,
        timeout: float = 10.0,
        cache_size: int = 64,
    ):
        if isinstance(providers, (str, bytes)) or not providers:
            raise InvalidInput("a header source needs a list of providers")
        given = [p.strip().rstrip("/") if isinstance(p, str) else id(p) for p in providers]
        if len(set(given)) != len(given):
            # Listed twice, a provider would vouch twice: k of n would not be k providers.
            raise InvalidInput("a header source lists a provider twice: one provider is one vote")
        endpoints = [endpoint(p, timeout=timeout) for p in providers]
        names = [e.name for e in endpoints]
        for i, e in enumerate(endpoints):  # two URLs on one host and port would read alike
            if names.count(e.name) > 1:
                e.name = f"{e.name}#{i + 1}"
        n = len(endpoints)
        if k is None:
            k = n // 2 + 1
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
            raise InvalidInput(f"k must be an int from 1 to {n} (the number of providers), got {k!r}")
        if confirmations != "finalized" and (
            isinstance(confirmations, bool) or not isinstance(confirmations, int) or confirmations < 0
        ):
            raise InvalidInput(f"confirmations must be an int >= 0 or 'finalized', got {confirmations!r}")
        if max_age is None:
            # Generous defaults a live chain meets: a latest head is seconds old, finalized ~13 minutes.
            max_age = 1800.0 if confirmations == "finalized" else 60.0 + 12.0 * int(confirmations)
        if isinstance(max_age, bool) or not isinstance(max_age, (int, float)) or not max_age > 0:
            raise InvalidInput(f"max_age must be a number of seconds > 0, got {max_age!r}")
        self.endpoints: list[Endpoint] = endpoints
        self.k = k
        self.confirmations = confirmations
        self.max_age = float(max_age)
        #: The verifier's clock (seconds since the epoch, as the chain's timestamps count):
        #: freshness is judged by it, and the reader judges leases at no earlier a time.
        self.clock: Callable[[], float] = clock or time.time
        self._cache: OrderedDict[int, VerifiedHeader] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        # Each provider's requests run on threads of its own (two at most at a time): a provider that
        # never answers holds its own, never another's. None for one provider: it is asked in the
        # calling thread (there is nobody to outvote it).
        self._lanes = {e.name: _Lane(f"chainfence-headers-{i}") for i, e in enumerate(endpoints)} if n > 1 else None
        for lane in (self._lanes or {}).values():  # a source dropped without close() leaves no idle threads
            weakref.finalize(self, lane.close)

    # -- asking every provider at once -------------------------------------------

    def _ask_all(
        self,
        method: str,
        params: Callable[[Endpoint], list[Any]],
        answers: dict[str, Any],
        enough: Callable[[dict[str, Any], int], bool],
    ) -> dict[str, Any]:
        """Each provider's answer (a result, or the ChainfenceError it raised) by name, ``answers`` (given
        already) included: the others asked at once (``params(endpoint)``) and waited for until
        ``enough(answers, still_out)`` holds, or none is still out. One still out then is left out of the
        answers: its request runs on to its timeout on its provider's own thread (or, not started yet,
        is cancelled). A quorum never waits on a silent provider, nor on a slow one, once the others
        settled the question."""
        answers = dict(answers)
        ask = [e for e in self.endpoints if e.name not in answers]
        if not ask or enough(answers, len(ask)):
            return answers
        if self._lanes is None:
            for e in ask:
                answers[e.name] = _answer(e, method, params(e))
            return answers
        futures = {self._lanes[e.name].submit(_answer, e, method, params(e)): e for e in ask}
        out = set(futures)
        try:
            while out:
                done, out = wait(out, return_when=FIRST_COMPLETED)
                for future in done:
                    answers[futures[future].name] = future.result()
                if enough(answers, len(out)):
                    break
        finally:
            for future in out:
                future.cancel()  # not started yet (its provider is still answering earlier requests)
        return answers

    def _vouched(self, answers: dict[str, Any], number: int) -> dict[bytes, list[str]]:
        """The hashes ``answers`` vouch for as block ``number``'s, each with the providers whose header
        hashes to it."""
        votes: dict[bytes, list[str]] = {}
        for name, answer in answers.items():
            if isinstance(answer, dict):
                try:
                    block_hash, _ = _verify(answer, name, number)
                except ProofInvalid:  # a header that does not hash to its hash: no vote
                    continue
                votes.setdefault(block_hash, []).append(name)
        return votes

    def _settled(self, votes: dict[bytes, list[str]], out: int) -> bool:
        """Whether the providers still out can change nothing: one hash has k votes and no other (nor a
        hash only they would name) can reach k with theirs."""
        counts = sorted((len(names) for names in votes.values()), reverse=True)
        if not counts or counts[0] < self.k:
            return False
        runner_up = counts[1] if len(counts) > 1 else 0
        return runner_up + out < self.k

    def _heads_agree(self, heads: dict[str, Any], out: int) -> bool:
        """Whether the heads answered settle the block to judge by, whatever those still out say: the
        k-th highest head answered is one block that k heads agree on (its number, and a header hashing
        to its hash), no other block there can gather k with the heads still out, and those still out
        cannot make k heads above it (with k a majority they never can). The block is then the one
        waiting for every head would choose. A lower head (a provider serving the past) never chooses
        the block while k heads agree above it: it is waited for only when they do not."""
        numbered: list[tuple[int, str, Any]] = []
        for name, head in heads.items():
            if isinstance(head, dict):
                try:
                    numbered.append((_quantity(head.get("number"), "number"), name, head))
                except ValueError:
                    continue
        if len(numbered) < self.k:
            return False
        numbered.sort(key=lambda item: item[0], reverse=True)
        kth = numbered[self.k - 1][0]
        above = sum(1 for n, _, _ in numbered if n > kth)
        if above + out >= self.k:  # the heads still out could raise the k-th highest (k <= n/2 only)
            return False
        return self._settled(self._vouched({name: head for n, name, head in numbered if n == kth}, kth), out)

    # -- the header at a number ------------------------------------------------------

    def at(self, number: int, *, fresh: bool = False, _answers: dict[str, Any] | None = None) -> VerifiedHeader:
        """The verified header of block ``number``: k providers vouch for its hash (cached; ``fresh``:
        asked again, as a follower does of the block it stopped at, to see a reorg below the head)."""
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise InvalidInput(f"a block number is an int >= 0, got {number!r}")
        with self._lock:
            if fresh:
                self._cache.pop(number, None)
            cached = self._cache.get(number)
            if cached is not None:
                self._cache.move_to_end(number)
                return cached
        answers = self._ask_all(
            "eth_getBlockByNumber",
            lambda e: [hex(number), False],
            _answers or {},
            lambda answers, out: self._settled(self._vouched(answers, number), out),
        )
        votes: dict[bytes, list[str]] = {}
        said: dict[str, str] = {}
        invalid: list[ProofInvalid] = []
        down: list[str] = []
        late: dict[str, str] = {}
        for e in self.endpoints:
            if e.name not in answers:
                late[e.name] = NOT_WAITED_FOR  # still out when the others settled it
                continue
            answer = answers[e.name]
            if isinstance(answer, ProviderUnavailable):
                said[e.name] = f"down ({answer.detail or answer})"
                down.append(e.name)
                continue
            if isinstance(answer, ChainfenceError):
                said[e.name] = f"{type(answer).__name__}: {getattr(answer, 'reason', None) or answer}"
                continue
            try:
                block_hash, _ = _verify(answer, e.name, number)
            except ProofInvalid as bad:
                said[e.name] = f"invalid header ({bad.reason})"
                invalid.append(bad)
                logger.warning(
                    "header provider %s served an invalid header for block %d: %s", e.name, number, bad.reason
                )
                continue
            said[e.name] = "0x" + block_hash.hex()
            votes.setdefault(block_hash, []).append(e.name)
        winners = [(h, names) for h, names in votes.items() if len(names) >= self.k]
        if len(winners) != 1:
            if not winners and len(self.endpoints) - len(down) < self.k:
                raise ProviderUnavailable(
                    sources=tuple(down),
                    needed=self.k,
                    answered=len(self.endpoints) - len(down),
                    detail=f"block {number}",
                )
            if len(self.endpoints) == 1 and invalid:
                raise invalid[0]  # the one trusted endpoint served a header that does not hash to its hash
            raise HeadersDisagree(block=number, needed=self.k, answers=said)
        block_hash, vouched = winners[0]
        block = next(answers[name] for name in vouched)
        dissent = {name: what for name, what in said.items() if name not in vouched}
        if dissent:  # a provider not waited for is no dissent to warn of: the others were quicker
            logger.warning(
                "block %d: %d providers vouch for 0x%s; dissent: %s", number, len(vouched), block_hash.hex(), dissent
            )
        header = VerifiedHeader(
            number=number,
            hash=block_hash,
            parent_hash=_bytes(block["parentHash"], "parentHash"),
            state_root=_bytes(block["stateRoot"], "stateRoot"),
            receipts_root=_bytes(block["receiptsRoot"], "receiptsRoot"),
            timestamp=_quantity(block["timestamp"], "timestamp"),
            vouched_by=tuple(vouched),
            dissent={**dissent, **late},
            transactions_root=_bytes(block["transactionsRoot"], "transactionsRoot"),
        )
        with self._lock:
            self._cache[number] = header
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return header

    # -- the header to judge by now ----------------------------------------------------

    def current(self) -> VerifiedHeader:
        """The trusted header to judge by now: the k-th highest head less ``confirmations`` (or the
        k-th highest ``finalized`` block), verified, and no older than ``max_age``."""
        tag = "finalized" if self.confirmations == "finalized" else "latest"
        heads = self._ask_all("eth_getBlockByNumber", lambda e: [tag, False], {}, self._heads_agree)
        reported: dict[str, str] = {}
        numbered: list[tuple[int, int, str, Any]] = []  # (number, timestamp, provider, block)
        down: list[str] = []
        # Providers whose head came to nothing (no answer in time, a reply out of bounds, a malformed
        # head) are not asked again for the block in this check: a silent one would cost its timeout twice.
        failed: dict[str, Any] = {}
        for e in self.endpoints:
            if e.name not in heads:
                reported[e.name] = NOT_WAITED_FOR
                continue
            head = heads[e.name]
            if isinstance(head, ProviderUnavailable):
                reported[e.name] = "down"
                down.append(e.name)
                failed[e.name] = head
            elif isinstance(head, RpcError):
                reported[e.name] = f"refused: {head.rpc_message or head}"
            elif isinstance(head, ChainfenceError) or not isinstance(head, dict):
                reported[e.name] = f"no head ({head!r:.80})"
            else:
                try:
                    number, stamp = (
                        _quantity(head.get("number"), "number"),
                        _quantity(head.get("timestamp"), "timestamp"),
                    )
                except ValueError as exc:
                    reported[e.name] = f"malformed head ({exc})"
                    failed[e.name] = ProofInvalid(served="header", source=e.name, reason=reported[e.name])
                    continue
                reported[e.name] = f"block {number} at {stamp}"
                numbered.append((number, stamp, e.name, head))
        if len(numbered) < self.k:
            if len(self.endpoints) - len(down) < self.k:
                raise ProviderUnavailable(
                    sources=tuple(down),
                    needed=self.k,
                    answered=len(self.endpoints) - len(down),
                    detail=f"{tag} head",
                )
            raise HeadersDisagree(block=None, needed=self.k, answers=reported)
        numbered.sort(key=lambda item: item[0], reverse=True)
        kth = numbered[self.k - 1][0]
        target = kth if self.confirmations == "finalized" else kth - int(self.confirmations)
        if target < 0:
            target = 0
        # A head that is the target block already is that provider's answer for it: no second request.
        reuse = {name: block for number, _, name, block in numbered if number == target}
        with self._lock:
            cached = self._cache.get(target)
            if cached is not None and any(block.get("hash") != cached.hash_hex for block in reuse.values()):
                # A head at that height now says another hash (a reorg at the head): verify it again
                # rather than serve the block the chain left (whose proofs would no longer verify).
                del self._cache[target]
        header = self.at(target, _answers={**failed, **reuse})
        now = self.clock()
        age = now - header.timestamp
        if age > self.max_age:
            raise HeaderStale(
                block=header.number,
                timestamp=header.timestamp,
                now=int(now),
                age=int(age),
                max_age=self.max_age,
                heads=reported,
            )
        return header

    def vouch(self, number: int, block_hash: str | bytes, *, head: VerifiedHeader | None = None) -> VerifiedHeader:
        """The verified header of block ``number`` if its hash is ``block_hash`` (what a log, a receipt
        or a provider's answer claims); :class:`~chainfence.errors.BlockNotVouched` if the source
        vouches for another block there, or if ``number`` is beyond ``head`` (default: :meth:`current`,
        the newest block it vouches for now)."""
        claimed = _claimed_hash(block_hash)
        if claimed is None:  # what a provider claimed is no block hash at all: nothing can vouch for it
            shown = repr(block_hash)
            raise BlockNotVouched(
                f"block {number}: the hash claimed for it is not 32 bytes of hex ({shown[:80]})",
                block=number,
                block_hash=shown[:80],
            )
        claimed_hex = "0x" + claimed.hex()
        if head is None:
            head = self.current()
        if number > head.number:
            raise BlockNotVouched(block=number, block_hash=claimed_hex, head=head.number)
        header = head if number == head.number else self.at(number)
        if header.hash != claimed:
            raise BlockNotVouched(block=number, block_hash=claimed_hex, vouched_hash=header.hash_hex, head=head.number)
        return header

    def requests(self) -> int:
        """Requests sent to the header providers so far."""
        return sum(e.requests for e in self.endpoints)

    def close(self) -> None:
        for lane in (self._lanes or {}).values():
            lane.close()
        for e in self.endpoints:
            close = getattr(e, "close", None)
            if close is not None:
                close()


def _claimed_hash(value: object) -> bytes | None:
    """``value`` (what a log, a receipt or a provider claims a block's hash is) as its 32 bytes, or None
    when it is not 32 bytes, as ``0x``-hex or bytes."""
    if isinstance(value, str):
        if len(value) != 66 or value[:2] not in ("0x", "0X"):
            return None
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            return None
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == 32:
        return bytes(value)
    return None


class QuorumHeaders(HeaderSource):
    """Headers k of n independent providers vouch for (default k: a majority).

    ``QuorumHeaders([url1, url2, url3], k=2, confirmations=3, max_age=120)``;
    ``confirmations="finalized"`` on chains that have a finalized block.
    ``clock``: the verifier's clock (default :func:`time.time`); dev chains
    whose time is moved by hand pass their own.
    """


class TrustedHeaders(HeaderSource):
    """Headers from one endpoint the user trusts for headers (a light client such as Helios, the
    user's own node, a checkpoint service): its headers are still hashed, its word is the trust."""

    def __init__(self, provider: Any, **options: Any):
        if "k" in options:
            raise InvalidInput("TrustedHeaders has one provider: no k")
        super().__init__([provider], k=1, **options)
