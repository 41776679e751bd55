"""The registry's events: queried (paged, within provider limits) and decoded, in one place.

The audit (:mod:`chainfence.audit`), the guard's follower and the SDK's
views all read the registry's logs through this module; nothing else
decodes them.

Decoding never trusts content anyone can put on-chain: a resource name (and
a work item's workset and item, ``ItemNamed``) is kept as the bytes that were
logged (the contract takes any bytes from a direct caller), and turned into
text only by :mod:`chainfence._sdk.names`. Among a receipt's logs (:func:`decode`,
:func:`first`), those that are not the registry's events, or that do not
decode, are skipped and logged. An ``eth_getLogs`` answer (:func:`fetch`) is
held to the query: a log in it that is not the registry's, not of the blocks
or topics asked for, that does not decode (any field unreadable, its
``logIndex`` or ``transactionHash`` too) or that repeats another's place
refuses the page (:class:`~chainfence.errors.LogsIncomplete`): a log skipped
there would be one no reader counts, and one of another block one no reader
checks against its block.

Paging: ``eth_getLogs`` is asked for at most ``max_range`` blocks at a time
(hosted providers cap ranges, often at 1,000-10,000 blocks, and result
sizes). A refusal halves the range and retries, down to a single block; the
working range is remembered per chain, and grows back after a run of
successes.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol

from .._core import log as _log
from .._core.effects import RPC, Emit, Steps, collect_steps, run, stream
from ..errors import ChainError, InvalidInput, LogsIncomplete, RpcError
from .abi import decode as abi_decode
from .addresses import to_checksum_address
from .rlp import keccak256


class Chain(Protocol):
    """What reading events needs of a chain: its RPC layer (:class:`~chainfence._node.rpc.Rpc`; a chain
    may also say how many blocks one eth_getLogs may span, ``max_log_range``)."""

    rpc: Any


logger = _log.get(__name__)

__all__ = [
    "DEFAULT_MAX_LOG_RANGE",
    "LEASE_KINDS",
    "NAMESPACE_KINDS",
    "NAMING_KINDS",
    "Kind",
    "RegistryLog",
    "decode",
    "fetch",
    "first",
    "topic",
    "topics_of",
]

#: Blocks per eth_getLogs request unless the chain says otherwise.
DEFAULT_MAX_LOG_RANGE = 5_000

#: Successful pages after which a shrunken range is doubled again.
_GROW_AFTER = 8


class Kind(enum.Enum):
    """The registry's events, by what they record."""

    NAMED = "ResourceNamed"
    #: A claimed work item's name: its ``workset`` and ``item`` apart (never a ``ResourceNamed``).
    ITEM_NAMED = "ItemNamed"
    ACQUIRED = "LeaseAcquired"
    RENEWED = "LeaseRenewed"
    RELEASED = "LeaseReleased"
    COMPLETED = "LeaseCompleted"
    #: The namespace's admin ended a live lease (``admin`` says who).
    REVOKED = "LeaseRevoked"
    #: The namespace's admin issued the lease (right after its ``LeaseAcquired``, reason granted).
    GRANTED = "LeaseGranted"
    NAMESPACE_NAMED = "NamespaceNamed"
    ADMIN_TRANSFER_STARTED = "NamespaceAdminTransferStarted"
    ADMIN_TRANSFERRED = "NamespaceAdminTransferred"
    POLICY_SET = "NamespacePolicySet"
    ADMISSION_SET = "NamespaceAdmissionSet"
    #: An operation of a ``batchCalls`` was refused (``index``; ``refusal``: the lone call's revert data).
    REFUSED = "BatchOpRefused"
    #: A signed intent of a ``performIntents`` was refused (``resource_id``: the intent's EIP-712 digest; ``holder``,
    #: ``index``; ``refusal``: a registry error's revert data).
    INTENT_REFUSED = "IntentRefused"


class _Spec(NamedTuple):
    signature: str
    indexed: tuple[str, ...]  # RegistryLog fields of topics 2.. ("token": uint256, others: address)
    data_types: tuple[str, ...]  # non-indexed ABI types (``string`` read as ``bytes``: any bytes decode)
    data_fields: tuple[str, ...]


_SPECS = {
    Kind.NAMED: _Spec("ResourceNamed(bytes32,string)", (), ("bytes",), ("name",)),
    Kind.ITEM_NAMED: _Spec("ItemNamed(bytes32,string,string)", (), ("bytes", "bytes"), ("workset", "item")),
    Kind.ACQUIRED: _Spec(
        "LeaseAcquired(bytes32,uint256,address,uint256,uint256,uint8)",
        ("token", "holder"),
        ("uint256", "uint256", "uint8"),
        ("expires_at", "previous_token", "reason"),
    ),
    Kind.RENEWED: _Spec(
        "LeaseRenewed(bytes32,uint256,address,uint256,bytes32)",
        ("token", "holder"),
        ("uint256", "bytes32"),
        ("expires_at", "progress"),
    ),
    Kind.RELEASED: _Spec("LeaseReleased(bytes32,uint256,address)", ("token", "holder"), (), ()),
    Kind.COMPLETED: _Spec(
        "LeaseCompleted(bytes32,uint256,address,bytes32)", ("token", "holder"), ("bytes32",), ("result_digest",)
    ),
    Kind.REVOKED: _Spec("LeaseRevoked(bytes32,uint256,address,address)", ("token", "holder"), ("address",), ("admin",)),
    Kind.GRANTED: _Spec("LeaseGranted(bytes32,uint256,address,address)", ("token", "holder"), ("address",), ("admin",)),
    Kind.NAMESPACE_NAMED: _Spec("NamespaceNamed(bytes32,string)", (), ("bytes",), ("name",)),
    Kind.ADMIN_TRANSFER_STARTED: _Spec(
        "NamespaceAdminTransferStarted(bytes32,address,address)", ("admin", "new_admin"), (), ()
    ),
    Kind.ADMIN_TRANSFERRED: _Spec("NamespaceAdminTransferred(bytes32,address,address)", ("admin", "new_admin"), (), ()),
    Kind.POLICY_SET: _Spec(
        "NamespacePolicySet(bytes32,address,uint256,uint256,bool)",
        ("admin",),
        ("uint256", "uint256", "bool"),
        ("max_ttl", "lock_delay", "admission_required"),
    ),
    Kind.ADMISSION_SET: _Spec(
        "NamespaceAdmissionSet(bytes32,address,bool,address)", ("holder",), ("bool", "address"), ("admitted", "admin")
    ),
    Kind.REFUSED: _Spec(
        "BatchOpRefused(bytes32,address,uint256,bytes)", ("holder",), ("uint256", "bytes"), ("index", "refusal")
    ),
    Kind.INTENT_REFUSED: _Spec(
        "IntentRefused(bytes32,address,uint256,bytes)", ("holder",), ("uint256", "bytes"), ("index", "refusal")
    ),
}
_TOPICS = {kind: keccak256(spec.signature.encode()) for kind, spec in _SPECS.items()}
_KINDS = {t: kind for kind, t in _TOPICS.items()}

#: Events about a namespace, not a resource (``resource_id`` is the namespace id).
NAMESPACE_KINDS = frozenset(
    {Kind.NAMESPACE_NAMED, Kind.ADMIN_TRANSFER_STARTED, Kind.ADMIN_TRANSFERRED, Kind.POLICY_SET, Kind.ADMISSION_SET}
)

#: The events that name a resource: a plain name (``name``), or a claimed work item (``workset``, ``item``).
NAMING_KINDS = (Kind.NAMED, Kind.ITEM_NAMED)

#: The lease events: what a resource's history is made of (names and namespaces aside).
LEASE_KINDS = (Kind.ACQUIRED, Kind.RENEWED, Kind.RELEASED, Kind.COMPLETED, Kind.REVOKED, Kind.GRANTED)


def topic(kind: Kind) -> str:
    """The 0x-hex topic0 of ``kind``."""
    return "0x" + _TOPICS[kind].hex()


class RegistryLog(NamedTuple):
    """One decoded registry event. Fields an event does not carry are None.

    ``resource_id`` is the first indexed word: the resource, or for the
    namespace events the namespace (``keccak256`` of its prefix).

    A named tuple, as the node layer's other records (start time: docs/explanation/design.md): as a
    frozen dataclass of 25 fields it cost every command that imports it 11 M instructions.
    """

    kind: Kind
    resource_id: bytes
    block_number: int
    block_hash: bytes
    tx_hash: str
    log_index: int
    token: int | None = None
    holder: str | None = None
    expires_at: int | None = None
    previous_token: int | None = None
    reason: int | None = None
    result_digest: bytes | None = None
    progress: bytes | None = None  # LeaseRenewed: the holder's 32-byte marker (zeros: none reported)
    name: bytes | None = None  # ResourceNamed, NamespaceNamed: the bytes logged, untrusted
    workset: bytes | None = None  # ItemNamed: the item's workset and item, as logged, untrusted
    item: bytes | None = None
    admin: str | None = None  # revokes, grants, namespace events: the admin who acted (or the previous admin)
    new_admin: str | None = None  # namespace admin transfers: the pending or new admin
    max_ttl: int | None = None  # NamespacePolicySet
    lock_delay: int | None = None
    admission_required: bool | None = None
    admitted: bool | None = None  # NamespaceAdmissionSet
    #: BatchOpRefused, IntentRefused: the operation's place in its batch (``holder``: the caller). Named as the
    #: event's argument, it hides ``tuple.index``, which nothing calls on a log.
    index: int | None = None  # type: ignore[assignment]
    refusal: bytes | None = None  # BatchOpRefused: the revert data of the lone call (a registry error), untrusted
    #: The transaction's position in its block (``transactionIndex``; None if the node left it out). With
    #: ``tx_hash`` and ``log_index`` it names the log whichever way the node numbers ``logIndex``: per block
    #: (the spec) or per transaction (some nodes do).
    tx_index: int | None = None

    @property
    def order(self) -> tuple[int, int, int]:
        """Where the log is in the chain: (block, transaction, log), right under either numbering."""
        return (self.block_number, -1 if self.tx_index is None else self.tx_index, self.log_index)


def topics_of(entry: RegistryLog) -> list[bytes]:
    """The topics ``entry`` was logged with (topic0, the resource or namespace id, the indexed fields), as a
    block's ``logsBloom`` holds them."""
    words = [_TOPICS[entry.kind], entry.resource_id]
    for field_name in _SPECS[entry.kind].indexed:
        value = getattr(entry, field_name)
        if field_name == "token":
            words.append(int(value).to_bytes(32, "big"))
        else:
            words.append(bytes.fromhex(str(value)[2:]).rjust(32, b"\0"))
    return words


def _bytes(value: Any) -> bytes:
    """Bytes from web3's shape (HexBytes, bytes) or the node's raw JSON (a 0x-hex str)."""
    if isinstance(value, str):
        return bytes.fromhex(value[2:] if value.startswith(("0x", "0X")) else value)
    return bytes(value)


def _int(value: Any) -> int:
    if isinstance(value, str):
        return int(value, 16)
    return int(value)


def _word(topic_value: Any) -> bytes:
    data = _bytes(topic_value)
    if len(data) != 32:
        raise ValueError(f"a topic is 32 bytes, got {len(data)}")
    return data


@functools.lru_cache(maxsize=4096)
def _checksum(raw: bytes) -> str:
    return to_checksum_address(raw)


def _address(word: bytes) -> str:
    if any(word[:12]):
        raise ValueError("an address word has nonzero high bytes")
    return _checksum(word[12:])


#: ABI types of fixed size decoded by slicing (what the ABI decoder checks, checked here too).
_STATIC = {"uint256", "uint8", "bytes32", "bool", "address"}


def _decode_data(types: tuple[str, ...], data: bytes) -> tuple[Any, ...]:
    if types == ("bytes",) and len(data) >= 64:  # a name: offset 32, length, the bytes zero-padded to a word
        length = int.from_bytes(data[32:64], "big")
        padded = 64 + -(-length // 32) * 32
        if int.from_bytes(data[:32], "big") == 32 and len(data) == padded and not any(data[64 + length :]):
            return (data[64 : 64 + length],)
    if len(data) != 32 * len(types) or not _STATIC.issuperset(types):
        return tuple(abi_decode(types, data))  # names (dynamic bytes), or a length the ABI must judge
    values: list[Any] = []
    for position, kind in enumerate(types):
        word = data[32 * position : 32 * position + 32]
        if kind == "bytes32":
            values.append(word)
        elif kind == "address":
            values.append(_address(word))
        else:
            number = int.from_bytes(word, "big")
            if (kind == "uint8" and number > 0xFF) or (kind == "bool" and number > 1):
                raise ValueError(f"a {kind} word holds {number:#x}")
            values.append(bool(number) if kind == "bool" else number)
    return tuple(values)


def decode(log: Any, *, strict: bool = False) -> RegistryLog | None:
    """``log`` (as web3 returns it, or the node's raw JSON) decoded, or None if it is not one of the registry's
    events or does not decode; ``strict``: ValueError saying why instead of None."""
    topics = log["topics"]
    try:
        kind = _KINDS.get(_bytes(topics[0])) if topics else None
    except ValueError:
        kind = None
    if kind is None:
        if strict:
            raise ValueError("its topic0 is none of the registry's events")
        return None
    return _decode_as(log, kind, topics, strict=strict)


def _decode_as(log: Any, kind: Kind, topics: Sequence[Any], *, strict: bool = False) -> RegistryLog | None:
    """``log`` decoded as ``kind`` (its topic0 is ``kind``'s), or None if it does not decode (``strict``:
    ValueError)."""
    spec = _SPECS[kind]
    expected_topics = 2 + len(spec.indexed)
    try:
        if len(topics) != expected_topics:
            raise ValueError(f"{kind.value} has {len(topics)} topics, expected {expected_topics}")
        resource_id = _word(topics[1])
        fields: dict[str, Any] = {}
        for field_name, value in zip(spec.indexed, topics[2:], strict=True):
            word = _word(value)
            fields[field_name] = int.from_bytes(word, "big") if field_name == "token" else _address(word)
        data = _decode_data(spec.data_types, _bytes(log["data"])) if spec.data_types else ()
        for field_name, value in zip(spec.data_fields, data, strict=True):
            if isinstance(value, bytes):
                value = bytes(value)
            elif isinstance(value, str):  # an ABI address
                value = _checksum(bytes.fromhex(value[2:]))
            fields[field_name] = value
        return RegistryLog(
            kind=kind,
            resource_id=resource_id,
            block_number=_place(log, "blockNumber"),
            block_hash=_hash(log, "blockHash"),
            tx_hash="0x" + _hash(log, "transactionHash").hex(),
            log_index=_place(log, "logIndex"),
            tx_index=None if log.get("transactionIndex") is None else _place(log, "transactionIndex"),
            **fields,
        )
    except Exception as exc:
        if strict:
            raise ValueError(f"a {kind.value} that does not decode: {exc}") from None
        logger.warning("skipped an undecodable %s log in block %s: %s", kind.value, log.get("blockNumber"), exc)
        return None


def _place(log: Any, key: str) -> int:
    """A log's block number, log index or transaction index: a number from 0."""
    number = _int(log[key])
    if number < 0:
        raise ValueError(f"its {key} is {number}")
    return number


def _hash(log: Any, key: str) -> bytes:
    """A log's block hash or transaction hash: 32 bytes."""
    value = _bytes(log[key])
    if len(value) != 32:
        raise ValueError(f"its {key} is {len(value)} bytes, not 32")
    return value


#: Each kind's topic0 as a node writes it in JSON (0x and lower-case hex): what :func:`first` compares.
_HEX_TOPICS = {kind: "0x" + t.hex() for kind, t in _TOPICS.items()}


def first(logs: Sequence[Any], address: str, kind: Kind) -> RegistryLog | None:
    """The first ``kind`` event that the contract at ``address`` emitted among ``logs`` (a receipt's, as web3
    shapes them or as the node sent them: :func:`chainfence._node.formats.raw_logs`), decoded; None if
    there is none. Only a log with that kind's topic0 and that address is decoded: a receipt's other logs
    (the name an acquisition publishes, another contract's) cost a comparison each."""
    wanted_hex, wanted = _HEX_TOPICS[kind], _TOPICS[kind]
    emitter = address.lower()
    for log in logs:
        topics = log["topics"]
        if not topics:
            continue
        topic0 = topics[0]
        if not (topic0.lower() == wanted_hex if isinstance(topic0, str) else bytes(topic0) == wanted):
            continue
        if str(log["address"]).lower() != emitter:
            continue
        decoded = _decode_as(log, kind, topics)
        if decoded is not None:
            return decoded
    return None


class _Span:
    """The working eth_getLogs range of one chain: shrinks on refusal, grows back slowly."""

    def __init__(self, maximum: int):
        self.maximum = maximum
        self.current = maximum
        self._successes = 0
        self._lock = threading.Lock()

    def refused(self, tried: int) -> int:
        with self._lock:
            self.current = max(1, min(self.current, tried // 2))
            self._successes = 0
            return self.current

    def succeeded(self) -> None:
        with self._lock:
            self._successes += 1
            if self._successes >= _GROW_AFTER and self.current < self.maximum:
                self.current = min(self.maximum, self.current * 2)
                self._successes = 0


def _span_of(chain: Chain) -> _Span:
    span = chain.__dict__.get("_log_span")
    if span is None:
        span = _Span(getattr(chain, "max_log_range", DEFAULT_MAX_LOG_RANGE))
        chain.__dict__["_log_span"] = span
    return span


def fetch(
    chain: Chain,
    address: str,
    *,
    kinds: Sequence[Kind] | None = None,
    resource_id: bytes | None = None,
    token: int | None = None,
    holder: str | None = None,
    from_block: int,
    to_block: int,
    max_range: int | None = None,
) -> Iterator[tuple[int, int, list[RegistryLog]]]:
    """The registry's logs from ``from_block`` to ``to_block`` (inclusive), page by page.

    Yields ``(first, last, logs)`` for each page of blocks, in block order;
    ``logs`` are decoded and sorted by :attr:`RegistryLog.order` (block, transaction, log index). Filters: the
    event ``kinds`` (default all) and the indexed fields. ``max_range``
    bounds the blocks of one request below the chain's own bound. Raises
    :class:`~chainfence.errors.ChainError` subclasses when the node fails or
    refuses even a single block, and :class:`~chainfence.errors.LogsIncomplete`
    (nothing of the page yielded) when it answers a log the query cannot have
    (see the module docstring).
    """
    if isinstance(from_block, bool) or not isinstance(from_block, int) or from_block < 0:
        raise InvalidInput(f"from_block must be an int >= 0, got {from_block!r}")
    if isinstance(to_block, bool) or not isinstance(to_block, int):
        raise InvalidInput(f"to_block must be an int, got {to_block!r}")
    if max_range is not None and (isinstance(max_range, bool) or not isinstance(max_range, int) or max_range < 1):
        raise InvalidInput(f"max_range must be an int >= 1, got {max_range!r}")
    topics = _topics(kinds, resource_id, token, holder)
    # The paging loop is written once, as steps (chainfence._core.effects) that emit each page: streamed here
    # over the blocking layer, one page at a time; fetch_all_steps gathers them for a driver of either kind.
    drive = functools.partial(run, rpc=chain.rpc, sleep=time.sleep, lock=lambda key: contextlib.nullcontext())
    for page in stream(_pages_steps(chain, address, topics, from_block, to_block, max_range), drive):
        yield page.first, page.last, page.logs


class _Page(NamedTuple):
    first: int
    last: int
    logs: list[RegistryLog]


def _pages_steps(
    chain: Chain, address: str, topics: list[Any], from_block: int, to_block: int, max_range: int | None = None
) -> Steps[None]:
    """The paging loop: yields RPC requests (their results sent back in) and emits a :class:`_Page` per page."""
    span = _span_of(chain)
    start = from_block
    while start <= to_block:
        width = span.current if max_range is None else min(span.current, max_range)
        end = min(to_block, start + width - 1)
        try:
            raw = yield RPC.logs({"address": address, "fromBlock": start, "toBlock": end, "topics": topics}, raw=True)
        except RpcError as refused:
            if end == start:
                raise
            narrowed = span.refused(end - start + 1)
            logger.info("eth_getLogs %d..%d refused (%s); asking %d blocks at a time", start, end, refused, narrowed)
            continue
        span.succeeded()
        yield Emit(_Page(start, end, _answered(raw, chain, address, topics, start, end, to_block)))
        start = end + 1


def _answered(
    raw: Sequence[Any], chain: Chain, address: str, topics: list[Any], first: int, last: int, head: int
) -> list[RegistryLog]:
    """An ``eth_getLogs`` answer for the query ``topics`` (:func:`_topics`) over blocks ``first``..``last``,
    decoded and in chain order.

    Every log in it must be one the query can have: the registry's, with the topics asked for, of a block
    in the range, decoding
    whole (every field readable, its logIndex and transactionHash too), and no two at one place (block,
    transaction, log index). Anything else refuses the whole page, :class:`~chainfence.errors.LogsIncomplete`
    at block ``first`` (``head``: the block the reader reads to): a log skipped because a field of it
    does not read is a log no reader counts, and one of another block is one no reader checks against
    that block (the completeness check settles the blocks asked for)."""
    registry = address.lower()
    seen: set[tuple[int, str, int]] = set()
    out: list[RegistryLog] = []
    for log in raw:
        try:
            if str(log["address"]).lower() != registry:
                raise ValueError(f"it is a log of {log['address']}, not the registry's")
            entry = decode(log, strict=True)
            assert entry is not None  # strict: decoded, or ValueError
            if not _matches(log["topics"], topics):
                raise ValueError(f"it is a {entry.kind.value} with other topics than the ones asked for")
        except (KeyError, TypeError, ValueError) as exc:
            why = f"a log it answered does not read as one the query asked for: {exc}"
        else:
            place = (entry.block_number, entry.tx_hash, entry.log_index)
            if not first <= entry.block_number <= last:
                why = f"a {entry.kind.value} of block {entry.block_number} was answered for blocks {first}..{last}"
            elif place in seen:
                why = f"two logs were answered at one place: block {place[0]}, transaction {place[1]}, log {place[2]}"
            else:
                seen.add(place)
                out.append(entry)
                continue
        from .jsonrpc import name_of_chain  # here: only a refused answer names its provider

        raise LogsIncomplete(block=first, followed=first - 1, head=head, source=name_of_chain(chain), reason=why)
    out.sort(key=lambda entry: entry.order)
    return out


def _matches(logged: Sequence[Any], topics: list[Any]) -> bool:
    """Whether a log's topics are ones the ``eth_getLogs`` filter ``topics`` asks for."""
    for position, wanted in enumerate(topics):
        if wanted is None:
            continue
        if position >= len(logged):
            return False
        have = _bytes(logged[position])
        if not any(have == bytes.fromhex(option[2:]) for option in (wanted if isinstance(wanted, list) else [wanted])):
            return False
    return True


def _topics(
    kinds: Sequence[Kind] | None, resource_id: bytes | None, token: int | None, holder: str | None
) -> list[Any]:
    topics: list[Any] = [[topic(kind) for kind in (kinds or list(Kind))]]
    topics.append("0x" + resource_id.hex() if resource_id is not None else None)
    topics.append("0x" + token.to_bytes(32, "big").hex() if token is not None else None)
    topics.append("0x" + bytes.fromhex(holder[2:]).rjust(32, b"\0").hex() if holder is not None else None)
    while topics and topics[-1] is None:
        topics.pop()
    return topics


def fetch_all_steps(
    chain: Chain,
    address: str,
    *,
    kinds: Sequence[Kind] | None = None,
    resource_id: bytes | None = None,
    token: int | None = None,
    holder: str | None = None,
    from_block: int,
    to_block: int,
) -> Steps[list[RegistryLog]]:
    """:func:`fetch_all` as steps, for a driver of either kind (a waiter's follower uses it)."""
    steps = _pages_steps(chain, address, _topics(kinds, resource_id, token, holder), from_block, to_block)
    pages = yield from collect_steps(steps)
    return [entry for page in pages for entry in page.logs]


def fetch_all(chain: Chain, address: str, **query: Any) -> list[RegistryLog]:
    """Every page of :func:`fetch`, concatenated."""
    return [entry for _first, _last, page in fetch(chain, address, **query) for entry in page]


class BlockTimes:
    """Block timestamps, fetched once per block (the audit shows chain time for every event).

    :meth:`prefetch` asks for many blocks at once (one batch where the node
    takes batches: :meth:`Rpc.blocks <chainfence._node.rpc.Rpc.blocks>`).
    """

    def __init__(self, chain: Chain, *, limit: int = 65_536):
        self._chain = chain
        self._times: dict[int, int] = {}
        self._limit = limit

    def prefetch(self, numbers: Any) -> None:
        """Fetch the timestamps of ``numbers`` not known yet, batched."""
        wanted = sorted({n for n in numbers if n not in self._times})
        if not wanted:
            return
        if len(self._times) + len(wanted) > self._limit:
            self._times.clear()
        for number, block in zip(wanted, self._chain.rpc.blocks(wanted), strict=True):
            if block is None:
                raise ChainError(f"the node has no block {number} (reorganised away while reading?)")
            self._times[number] = int(block["timestamp"])

    def __call__(self, number: int) -> int:
        known = self._times.get(number)
        if known is None:
            block = self._chain.rpc.block(number)
            if block is None:
                raise ChainError(f"the node has no block {number} (reorganised away while reading?)")
            known = int(block["timestamp"])
            if len(self._times) >= self._limit:
                self._times.clear()
            self._times[number] = known
        return known
