"""What became of a transaction whose outcome the SDK could not establish.

:class:`~chainfence.errors.OutcomeUnknown` (and ``TransactionTimeout``,
``NotConfirmed``) carry the candidate hashes — the transaction and the
cancellation sent for it — the nonce and the sender. Before acting again,
ask the chain what happened::

    try:
        lease = agent.acquire("jobs/nightly", ttl=60)
    except OutcomeUnknown as unknown:
        verdict = reconcile(agent, unknown.tx_hashes, nonce=unknown.nonce, sender=unknown.sender)
        if verdict.lease is not None: ...         # the acquisition happened: release or use it
        elif verdict.settled: ...                 # nothing happened: safe to try again
        else: ...                                 # still undecided (pending): ask again later

A batch transaction (group commit, ``registry.batched()``) holds the
operations of several callers: each caller's ``OutcomeUnknown`` names its own
position in it (``unknown.item``); pass it (or ``resource=``) and the verdict's
``item`` is that operation's own outcome (:class:`~chainfence.batching.BatchItem`:
its lease, or the typed refusal of that operation alone), ``lease`` its lease::

    verdict = reconcile(agent, unknown.tx_hashes, nonce=unknown.nonce, sender=unknown.sender, item=unknown.item)

``chainfence tx HASH... [--nonce N --account A] [--item N | --resource NAME]`` prints the same verdict.

A transaction is *settled* once one candidate is mined and the chain's
confirmations deep (its effect is final), or once its nonce is used by
something else at that depth (none of the candidates can ever be mined).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._node import artifacts as _artifacts
from ._sdk import validate as _validate
from .errors import InvalidInput

if TYPE_CHECKING:
    from .batching import BatchItem
    from .lease import Lease
    from .registry import Registry

__all__ = ["Reconciliation", "TxState", "reconcile"]


@dataclass(frozen=True)
class TxState:
    """One candidate transaction, as the node knows it now."""

    tx_hash: str
    #: "mined", "failed" (mined with status 0), "pending" (in the node's pool), or "unknown".
    state: str
    #: "acquire", "renew", "release", "complete", "cancel" (a no-op replacement), "other" or None if unknown.
    action: str | None = None
    sender: str | None = None
    nonce: int | None = None
    block_number: int | None = None
    confirmations: int | None = None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Reconciliation:
    """The verdict on a set of candidate transactions sharing one nonce."""

    transactions: tuple[TxState, ...]
    #: The candidate that was mined (at any depth), if any.
    mined: TxState | None
    #: The lease an acquisition created, when the mined candidate is one.
    lease: Lease | None
    #: "used" (mined by something), "pending" (only in the pool), "free", or None if unknown.
    nonce_state: str | None
    #: Whether the outcome is final (see the module docstring).
    settled: bool
    summary: str
    confirmations_required: int = 0
    notes: tuple[str, ...] = field(default=())
    #: When the mined candidate is a batch and the caller said which operation (``item``, ``resource``, or
    #: the batch holds one): that operation's own outcome.
    item: BatchItem | None = None

    def to_dict(self) -> dict[str, object]:
        lease = self.lease
        item = self.item
        return {
            "settled": self.settled,
            "summary": self.summary,
            "mined": self.mined.tx_hash if self.mined else None,
            "lease": None
            if lease is None
            else {
                "resource": lease.resource,
                "token": lease.token,
                "holder": lease.holder,
                "expires_at": lease.expires_at,
            },
            "item": None
            if item is None
            else {
                "item": item.item,
                "kind": item.kind,
                "resource": item.resource,
                "token": item.token,
                "expires_at": item.expires_at,
                "refused": None if item.error is None else f"{type(item.error).__name__}: {item.error}",
            },
            "nonce_state": self.nonce_state,
            "confirmations_required": self.confirmations_required,
            "transactions": [tx.to_dict() for tx in self.transactions],
        }


_ACTIONS = {selector: name for name, (selector, _types) in _artifacts.functions("FencingRegistry").items()}


def _action(registry: Registry, tx: Any) -> str:
    """What a transaction does: a registry call's name, "cancel" for a no-op to oneself, else "other"."""
    to = tx.get("to")
    data = bytes(tx.get("input") or b"")
    if to == tx.get("from") and not data and not tx.get("value"):
        return "cancel"
    if to != registry.address:
        return "other"
    return _ACTIONS.get(data[:4], "other")


def reconcile(
    registry: Registry,
    tx_hashes: Sequence[str],
    *,
    nonce: int | None = None,
    sender: str | None = None,
    confirmations: int | None = None,
    item: int | None = None,
    resource: str | None = None,
) -> Reconciliation:
    """Look every candidate up and say what became of them (see the module docstring). ``item`` (a
    batch operation's position, as ``OutcomeUnknown.item`` gives it) or ``resource`` says whose
    operation of a batch transaction the verdict is about (:class:`~chainfence.errors.InvalidInput`
    when they name none, or several: never another caller's)."""
    if isinstance(tx_hashes, str):
        tx_hashes = (tx_hashes,)
    hashes = []
    for tx_hash in tx_hashes:
        if not isinstance(tx_hash, str) or len(tx_hash) != 66 or not tx_hash.startswith("0x"):
            raise InvalidInput(f"a transaction hash is 0x and 64 hex digits, got {tx_hash!r}")
        try:
            bytes.fromhex(tx_hash[2:])
        except ValueError:
            raise InvalidInput(f"a transaction hash is 0x and 64 hex digits, got {tx_hash!r}") from None
        hashes.append(tx_hash.lower())
    if nonce is not None and (isinstance(nonce, bool) or not isinstance(nonce, int) or nonce < 0):
        raise InvalidInput(f"nonce must be an int >= 0, got {nonce!r}")
    if not hashes and (nonce is None or sender is None):
        raise InvalidInput("give transaction hashes, or a nonce and the account that used it")
    sender = _validate.address(sender, "sender") if sender is not None else None
    if item is not None and (isinstance(item, bool) or not isinstance(item, int) or item < 0):
        raise InvalidInput(f"item must be an int >= 0 (an operation's position in a batch), got {item!r}")
    if resource is not None:
        _validate.resource_id(resource)
    chain = registry.chain
    k = chain.confirmations if confirmations is None else confirmations
    rpc = chain.rpc
    head = rpc.block_number()

    states: list[TxState] = []
    for tx_hash in hashes:
        tx = rpc.transaction(tx_hash)
        if tx is None:
            states.append(TxState(tx_hash, "unknown"))
            continue
        receipt = rpc.receipt(tx_hash)
        action = _action(registry, tx)
        sender = sender or tx["from"]
        nonce = tx["nonce"] if nonce is None else nonce
        if receipt is None:
            states.append(TxState(tx_hash, "pending", action, tx["from"], tx["nonce"]))
        else:
            states.append(
                TxState(
                    tx_hash,
                    "mined" if receipt["status"] == 1 else "failed",
                    action,
                    tx["from"],
                    tx["nonce"],
                    receipt["blockNumber"],
                    head - receipt["blockNumber"],
                )
            )

    nonce_state = None
    if sender is not None and nonce is not None:
        used = rpc.nonce(sender, "latest")
        deep = rpc.nonce(sender, max(0, head - k)) if k else used
        pending = rpc.nonce(sender, "pending")
        nonce_state = "used" if used > nonce else "pending" if pending > nonce else "free"
        nonce_final = deep > nonce
    else:
        nonce_final = False

    mined = next((tx for tx in states if tx.state in ("mined", "failed")), None)
    lease = None
    chosen: BatchItem | None = None
    batch_note = ""
    if mined is not None and mined.state == "mined" and mined.action in ("acquire", "acquireExclusive"):
        lease = registry.lease_from_tx(mined.tx_hash, item=item, resource=resource)
    elif mined is not None and mined.state == "mined" and mined.action == "batchCalls":
        chosen, batch_note = _batch_item(registry, mined.tx_hash, item, resource)
        lease = chosen.lease if chosen is not None else None
    deep_enough = mined is not None and (mined.confirmations or 0) >= k
    if mined is not None:
        acquired = (
            f"the acquisition was mined: token {lease.token} on {lease.resource!r}"
            if lease
            else "the acquisition was mined"
        )
        what = {
            "acquire": acquired,
            "acquireExclusive": acquired,
            "cancel": "the cancellation was mined: the original can never execute; nothing happened",
            "batchCalls": f"the batch was mined: {batch_note}",
        }.get(mined.action or "", f"{mined.action} was mined")
        if mined.state == "failed":
            what = f"{mined.action} was mined but reverted (status 0): it changed nothing"
        settled = deep_enough
        summary = what + ("" if deep_enough else f" ({mined.confirmations} of {k} confirmations so far)")
    elif nonce_state == "used":
        settled = nonce_final
        summary = (
            f"nonce {nonce} of {sender} was used by another transaction: none of these can ever be mined; "
            "nothing happened" + ("" if nonce_final else f" (once {k} blocks deep)")
        )
    elif any(tx.state == "pending" for tx in states) or nonce_state == "pending":
        settled = False
        summary = "still pending in the node's pool: not decided yet; ask again later"
    elif nonce_state == "free":
        settled = False
        summary = (
            f"the node knows none of these and nonce {nonce} is still free: nothing happened so far, but a "
            "copy still travelling could be mined; send the next transaction of this account (it takes the "
            "nonce) or ask again later"
        )
    else:
        settled = False
        summary = "the node knows none of these transactions; give --nonce and --account to decide"
    return Reconciliation(
        transactions=tuple(states),
        mined=mined,
        lease=lease,
        nonce_state=nonce_state,
        settled=settled,
        summary=summary,
        confirmations_required=k,
        item=chosen,
    )


def _batch_item(registry: Registry, tx_hash: str, item: int | None, resource: str | None) -> tuple[Any, str]:
    """The operation of a mined batch the caller asked about, and what to say of it."""
    from .batching import select_item

    items = registry.batch_items(tx_hash, resource=resource)
    if not items:
        return None, "its operations could not be read"
    if item is None and resource is None and len(items) > 1:
        return None, (
            f"{len(items)} operations, each with its own outcome: give item= (the item of your OutcomeUnknown) "
            "or resource= to learn yours"
        )
    chosen = select_item(items, tx_hash, item=item, resource=resource)
    what = f"item {chosen.item}, {chosen.kind} of {chosen.resource!r}"
    if chosen.error is not None:
        return chosen, f"{what}, was refused ({type(chosen.error).__name__}: {chosen.error}): it did nothing"
    if chosen.lease is not None:
        return chosen, f"{what}: token {chosen.lease.token}, held by {chosen.lease.holder}"
    if chosen.expires_at is not None:
        return chosen, f"{what}: renewed until {chosen.expires_at}"
    return chosen, f"{what}: done"
