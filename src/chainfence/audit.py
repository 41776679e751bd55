"""Who held which token, when, and why it changed hands: read from the registry's events.

The registry's events are the record: :class:`LeaseEvent` is one of them,
decoded, with the resource's name (from ``ResourceNamed``) and the block's
timestamp (chain time). ::

    for event in registry.history("reports/daily"):
        print(event.block_timestamp, event.kind, event.token, event.holder, event.reason)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from web3 import Web3

from . import _validate
from .lease import AcquireReason

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["EventKind", "LeaseEvent", "history"]


class EventKind(enum.Enum):
    ACQUIRED = "acquired"
    RENEWED = "renewed"
    RELEASED = "released"
    COMPLETED = "completed"


_EVENT_NAMES = {
    "LeaseAcquired": EventKind.ACQUIRED,
    "LeaseRenewed": EventKind.RENEWED,
    "LeaseReleased": EventKind.RELEASED,
    "LeaseCompleted": EventKind.COMPLETED,
}


@dataclass(frozen=True)
class LeaseEvent:
    """One lease state change, as the registry logged it.

    ``expires_at`` is None for releases and completions; ``previous_token``
    and ``reason`` are set for acquisitions only; ``result_digest`` for
    completions only.
    """

    kind: EventKind
    resource: str | None
    resource_id: bytes
    token: int
    holder: str
    expires_at: int | None
    previous_token: int | None
    reason: AcquireReason | None
    block_number: int
    block_timestamp: int
    tx_hash: str
    log_index: int
    result_digest: bytes | None = None


def history(
    registry: Registry,
    resource: str | None = None,
    *,
    holder: str | None = None,
    token: int | None = None,
    from_block: int = 0,
    to_block: int | str = "latest",
) -> list[LeaseEvent]:
    """Lease events of ``registry``, oldest first, filtered on the indexed fields given.

    ``resource`` is a name; ``holder`` an address; ``token`` a fencing token.
    Names of resources are resolved from the registry's ``ResourceNamed`` events.
    """
    contract = registry._contract
    events = {name: getattr(contract.events, name)() for name in _EVENT_NAMES}
    topics: list[Any] = [[e.topic for e in events.values()]]
    resource_id = _validate.resource_id(resource) if resource is not None else None
    topics.append("0x" + resource_id.hex() if resource_id is not None else None)
    topics.append("0x" + _validate.token(token).to_bytes(32, "big").hex() if token is not None else None)
    topics.append(
        "0x" + bytes.fromhex(_validate.address(holder, "holder")[2:]).rjust(32, b"\0").hex()
        if holder is not None
        else None
    )
    while topics and topics[-1] is None:
        topics.pop()

    w3 = registry.chain.w3
    logs = w3.eth.get_logs(
        {"address": registry.address, "fromBlock": from_block, "toBlock": to_block, "topics": topics}
    )
    by_topic = {bytes.fromhex(e.topic[2:]): (name, e) for name, e in events.items()}
    names = _resource_names(registry, from_block=0, to_block=to_block)
    timestamps: dict[int, int] = {}
    result = []
    for log in sorted(logs, key=lambda entry: (entry["blockNumber"], entry["logIndex"])):
        name, event = by_topic[bytes(log["topics"][0])]
        args = event.process_log(log)["args"]
        number = log["blockNumber"]
        if number not in timestamps:
            timestamps[number] = w3.eth.get_block(number)["timestamp"]
        rid = bytes(args["resource"])
        kind = _EVENT_NAMES[name]
        result.append(
            LeaseEvent(
                kind=kind,
                resource=names.get(rid),
                resource_id=rid,
                token=args["token"],
                holder=Web3.to_checksum_address(args["holder"]),
                expires_at=args.get("expiresAt"),
                previous_token=args.get("previousToken"),
                reason=AcquireReason(args["reason"]) if kind is EventKind.ACQUIRED else None,
                block_number=number,
                block_timestamp=timestamps[number],
                tx_hash=log["transactionHash"].to_0x_hex(),
                log_index=log["logIndex"],
                result_digest=bytes(args["resultDigest"]) if kind is EventKind.COMPLETED else None,
            )
        )
    return result


def _resource_names(registry: Registry, *, from_block: int, to_block: int | str) -> dict[bytes, str]:
    event = registry._contract.events.ResourceNamed()
    logs = registry.chain.w3.eth.get_logs(
        {"address": registry.address, "fromBlock": from_block, "toBlock": to_block, "topics": [event.topic]}
    )
    names = {}
    for log in logs:
        args = event.process_log(log)["args"]
        names[bytes(args["resource"])] = args["name"]
    return names
