"""The registry's events: queried (paged, within provider limits) and decoded, in one place.

The audit (:mod:`chainfence.audit`), the guard's follower and the SDK's
views all read the registry's logs through this module; nothing else
decodes them.

Decoding never trusts content anyone can put on-chain: a resource name is
kept as the bytes that were logged (``ResourceNamed`` takes any bytes from a
direct caller of the contract), and turned into text only by
:mod:`chainfence._names`. Logs that are not the registry's events, or that
do not decode, are skipped and counted, never raised at a reader.

Paging: ``eth_getLogs`` is asked for at most ``max_range`` blocks at a time
(hosted providers cap ranges, often at 1,000-10,000 blocks, and result
sizes). A refusal halves the range and retries, down to a single block; the
working range is remembered per chain, and grows back after a run of
successes.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address

from ._effects import RPC, Steps
from .errors import ChainError, InvalidInput, RpcError

if TYPE_CHECKING:
    from .chain import Chain

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_LOG_RANGE", "Kind", "RegistryLog", "decode", "fetch", "topic"]

#: Blocks per eth_getLogs request unless the chain says otherwise.
DEFAULT_MAX_LOG_RANGE = 5_000

#: Successful pages after which a shrunken range is doubled again.
_GROW_AFTER = 8


class Kind(enum.Enum):
    """The registry's events, by what they record."""

    NAMED = "ResourceNamed"
    ACQUIRED = "LeaseAcquired"
    RENEWED = "LeaseRenewed"
    RELEASED = "LeaseReleased"
    COMPLETED = "LeaseCompleted"
    #: The namespace's admin ended a live lease (``admin`` says who).
    REVOKED = "LeaseRevoked"
    #: The namespace's admin issued the lease (right after its ``LeaseAcquired``, reason granted).
    GRANTED = "LeaseGranted"
    # Namespace events: ``resource_id`` and ``namespace`` both hold the namespace id (topic 1).
    NAMESPACE_NAMED = "NamespaceNamed"
    ADMIN_TRANSFER_STARTED = "NamespaceAdminTransferStarted"
    ADMIN_TRANSFERRED = "NamespaceAdminTransferred"
    POLICY_SET = "NamespacePolicySet"
    ADMISSION_SET = "NamespaceAdmissionSet"


#: Events about a namespace, not a resource.
NAMESPACE_KINDS = frozenset(
    {Kind.NAMESPACE_NAMED, Kind.ADMIN_TRANSFER_STARTED, Kind.ADMIN_TRANSFERRED, Kind.POLICY_SET, Kind.ADMISSION_SET}
)


_SIGNATURES = {
    Kind.NAMED: "ResourceNamed(bytes32,string)",
    Kind.ACQUIRED: "LeaseAcquired(bytes32,uint256,address,uint256,uint256,uint8)",
    Kind.RENEWED: "LeaseRenewed(bytes32,uint256,address,uint256,bytes32)",
    Kind.RELEASED: "LeaseReleased(bytes32,uint256,address)",
    Kind.COMPLETED: "LeaseCompleted(bytes32,uint256,address,bytes32)",
    Kind.REVOKED: "LeaseRevoked(bytes32,uint256,address,address)",
    Kind.GRANTED: "LeaseGranted(bytes32,uint256,address,address)",
    Kind.NAMESPACE_NAMED: "NamespaceNamed(bytes32,string)",
    Kind.ADMIN_TRANSFER_STARTED: "NamespaceAdminTransferStarted(bytes32,address,address)",
    Kind.ADMIN_TRANSFERRED: "NamespaceAdminTransferred(bytes32,address,address)",
    Kind.POLICY_SET: "NamespacePolicySet(bytes32,address,uint256,uint256,bool)",
    Kind.ADMISSION_SET: "NamespaceAdmissionSet(bytes32,address,bool,address)",
}
_TOPICS = {kind: keccak(text=signature) for kind, signature in _SIGNATURES.items()}
_KINDS = {t: kind for kind, t in _TOPICS.items()}

#: Non-indexed fields of each event: ABI types. ResourceNamed's ``string`` is
#: read as ``bytes`` (same encoding) so that a name that is not UTF-8 decodes.
_DATA_TYPES = {
    Kind.NAMED: ("bytes",),
    Kind.ACQUIRED: ("uint256", "uint256", "uint8"),
    Kind.RENEWED: ("uint256", "bytes32"),
    Kind.RELEASED: (),
    Kind.COMPLETED: ("bytes32",),
    Kind.REVOKED: ("address",),
    Kind.GRANTED: ("address",),
    Kind.NAMESPACE_NAMED: ("bytes",),
    Kind.ADMIN_TRANSFER_STARTED: (),
    Kind.ADMIN_TRANSFERRED: (),
    Kind.POLICY_SET: ("uint256", "uint256", "bool"),
    Kind.ADMISSION_SET: ("bool", "address"),
}

#: Topics each event has (topic 0 included).
_TOPIC_COUNTS = {
    Kind.NAMED: 2, Kind.NAMESPACE_NAMED: 2, Kind.POLICY_SET: 3, Kind.ADMISSION_SET: 3,
    Kind.ADMIN_TRANSFER_STARTED: 4, Kind.ADMIN_TRANSFERRED: 4,
}  # fmt: skip


def topic(kind: Kind) -> str:
    """The 0x-hex topic0 of ``kind``."""
    return "0x" + _TOPICS[kind].hex()


@dataclass(frozen=True)
class RegistryLog:
    """One decoded registry event. Fields an event does not carry are None."""

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
    #: LeaseRevoked, LeaseGranted, NamespacePolicySet, NamespaceAdmissionSet: the namespace admin who acted;
    #: NamespaceAdminTransferStarted: the admin offering; NamespaceAdminTransferred: the new admin.
    admin: str | None = None
    namespace: bytes | None = None  # namespace events: the namespace id
    #: NamespaceAdminTransferStarted: the offered admin (zero: offer withdrawn); NamespaceAdminTransferred: the previous.
    other_admin: str | None = None
    max_ttl: int | None = None  # NamespacePolicySet
    lock_delay: int | None = None  # NamespacePolicySet
    admission_required: bool | None = None  # NamespacePolicySet
    admitted: bool | None = None  # NamespaceAdmissionSet (``holder`` is the account)


def _address(word: bytes) -> str:
    if any(word[:12]):
        raise ValueError("address topic is not an address")
    return to_checksum_address(word[12:])


def _word(topic_value: Any) -> bytes:
    data = bytes(topic_value)
    if len(data) != 32:
        raise ValueError(f"a topic is 32 bytes, got {len(data)}")
    return data


def decode(log: Any) -> RegistryLog | None:
    """``log`` (as web3 returns it) decoded, or None if it is not one of the registry's events."""
    topics = log["topics"]
    if not topics:
        return None
    kind = _KINDS.get(bytes(topics[0]))
    if kind is None:
        return None
    expected_topics = _TOPIC_COUNTS.get(kind, 4)
    try:
        if len(topics) != expected_topics:
            raise ValueError(f"{kind.value} has {len(topics)} topics, expected {expected_topics}")
        resource_id = _word(topics[1])
        data = abi_decode(_DATA_TYPES[kind], bytes(log["data"])) if _DATA_TYPES[kind] else ()
        fields: dict[str, Any] = {}
        if kind in NAMESPACE_KINDS:
            fields["namespace"] = resource_id
            if kind is Kind.NAMESPACE_NAMED:
                fields["name"] = bytes(data[0])
            elif kind is Kind.ADMIN_TRANSFER_STARTED:
                fields.update(admin=_address(_word(topics[2])), other_admin=_address(_word(topics[3])))
            elif kind is Kind.ADMIN_TRANSFERRED:
                fields.update(other_admin=_address(_word(topics[2])), admin=_address(_word(topics[3])))
            elif kind is Kind.POLICY_SET:
                fields.update(
                    admin=_address(_word(topics[2])), max_ttl=data[0], lock_delay=data[1], admission_required=data[2]
                )
            elif kind is Kind.ADMISSION_SET:
                fields.update(holder=_address(_word(topics[2])), admitted=data[0], admin=to_checksum_address(data[1]))
        elif kind is not Kind.NAMED:
            fields["token"] = int.from_bytes(_word(topics[2]), "big")
            holder = _word(topics[3])
            if any(holder[:12]):
                raise ValueError("holder topic is not an address")
            fields["holder"] = to_checksum_address(holder[12:])
        if kind is Kind.NAMED:
            fields["name"] = bytes(data[0])
        elif kind is Kind.ACQUIRED:
            fields.update(expires_at=data[0], previous_token=data[1], reason=data[2])
        elif kind is Kind.RENEWED:
            fields.update(expires_at=data[0], progress=bytes(data[1]))
        elif kind is Kind.COMPLETED:
            fields["result_digest"] = bytes(data[0])
        elif kind in (Kind.REVOKED, Kind.GRANTED):
            fields["admin"] = to_checksum_address(data[0])
        return RegistryLog(
            kind=kind,
            resource_id=resource_id,
            block_number=int(log["blockNumber"]),
            block_hash=bytes(log["blockHash"]),
            tx_hash="0x" + bytes(log["transactionHash"]).hex(),
            log_index=int(log["logIndex"]),
            **fields,
        )
    except Exception as exc:  # noqa: BLE001 - content from the chain: skip it, never raise at the reader
        logger.warning(
            "skipped an undecodable %s log in block %s: %s", kind.value, log.get("blockNumber"), exc
        )
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
) -> Iterator[tuple[int, int, list[RegistryLog]]]:
    """The registry's logs from ``from_block`` to ``to_block`` (inclusive), page by page.

    Yields ``(first, last, logs)`` for each page of blocks, in block order;
    ``logs`` are decoded and sorted by (block, log index). Filters: the
    event ``kinds`` (default all) and the indexed fields. Raises
    :class:`~chainfence.errors.ChainError` subclasses when the node fails or
    refuses even a single block.
    """
    if isinstance(from_block, bool) or not isinstance(from_block, int) or from_block < 0:
        raise InvalidInput(f"from_block must be an int >= 0, got {from_block!r}")
    if isinstance(to_block, bool) or not isinstance(to_block, int):
        raise InvalidInput(f"to_block must be an int, got {to_block!r}")
    topics = _topics(kinds, resource_id, token, holder)
    # The paging loop is written once, as steps (chainfence._effects) that also hand out pages:
    # run here over the blocking layer, one page at a time; fetch_all_steps runs it for asyncio too.
    steps = _pages(chain, address, topics, from_block, to_block)
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            item = steps.send(value) if error is None else steps.throw(error)
        except StopIteration:
            return
        value, error = None, None
        if isinstance(item, _Page):
            yield item.first, item.last, item.logs
            continue
        try:
            value = getattr(chain.rpc, item.method)(*item.args, **item.kwargs)
        except Exception as exc:  # handed to the loop at its yield
            error = exc


class _Page(NamedTuple):
    first: int
    last: int
    logs: list[RegistryLog]


def _pages(chain: Chain, address: str, topics: list[Any], from_block: int, to_block: int) -> Iterator[Any]:
    """The paging loop: yields RPC requests (their results sent back in) and :class:`_Page` markers."""
    span = _span_of(chain)
    start = from_block
    while start <= to_block:
        width = span.current
        end = min(to_block, start + width - 1)
        try:
            raw = yield RPC.logs({"address": address, "fromBlock": start, "toBlock": end, "topics": topics})
        except RpcError as refused:
            if end == start:
                raise
            narrowed = span.refused(end - start + 1)
            logger.info("eth_getLogs %d..%d refused (%s); asking %d blocks at a time", start, end, refused, narrowed)
            continue
        span.succeeded()
        decoded = [entry for entry in (decode(log) for log in raw) if entry is not None]
        decoded.sort(key=lambda entry: (entry.block_number, entry.log_index))
        yield _Page(start, end, decoded)
        start = end + 1


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
    chain: Chain, address: str, *, kinds: Sequence[Kind] | None = None, resource_id: bytes | None = None,
    from_block: int, to_block: int,
) -> Steps[list[RegistryLog]]:  # fmt: skip
    """:func:`fetch_all` as steps, for a driver of either kind (a waiter's follower uses it)."""
    steps = _pages(chain, address, _topics(kinds, resource_id, None, None), from_block, to_block)
    found: list[RegistryLog] = []
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            item = steps.send(value) if error is None else steps.throw(error)
        except StopIteration:
            return found
        value, error = None, None
        if isinstance(item, _Page):
            found.extend(item.logs)
            continue
        try:
            value = yield item  # the request goes on to this steps' own driver
        except BaseException as exc:
            error = exc


def fetch_all(chain: Chain, address: str, **query: Any) -> list[RegistryLog]:
    """Every page of :func:`fetch`, concatenated."""
    return [entry for _first, _last, page in fetch(chain, address, **query) for entry in page]


class BlockTimes:
    """Block timestamps, fetched once per block (the audit shows chain time for every event)."""

    def __init__(self, chain: Chain, *, limit: int = 65_536):
        self._chain = chain
        self._times: dict[int, int] = {}
        self._limit = limit

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
