"""The JSON-RPC methods chainfence uses, each written once: parameters -> a transport -> a parsed result.

Each method is a generator of steps (as :mod:`chainfence._core.effects`'s core is)
that yields what it needs from the transport and gets the answer back:

    number = quantity((yield Request("eth_blockNumber", [])))

A driver runs it: :class:`~chainfence._node.rpc.Rpc` over a blocking
transport, :class:`~chainfence._node.rpc.AsyncRpc` over an asyncio one. The
drivers apply the rules every request follows (a read is tried once more
after a transport failure, a send never; every failure becomes a chainfence
error in one place, :func:`~chainfence._node.failures.translating`), and throw
that error into the method at its ``yield``, where it handles what it
expects (a node without a pending block, a refused batch) as a direct call
would. So both layers have every method, with the same parameters, the same
results and the same errors, and neither holds a copy of the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .._core import log as _log
from .._core.effects import Steps
from .._core.records import record
from ..errors import ChainError, ChainfenceError, NodeUnreachable, NotSupported, RpcError
from .failures import TESTER_CONTROLS
from .formats import (
    block_id,
    call_object,
    data,
    format_block,
    format_log,
    format_transaction,
    hash_id,
    lazy_receipt,
    log_filter,
    quantity,
)

logger = _log.get("chainfence.rpc")


class Request(NamedTuple):
    """One JSON-RPC request; its result comes back (a failure is thrown in, translated).

    ``retry``: asked once more when the transport failed (a read); never for a send, a dev
    request or a preflight. ``sender``: the account a transaction is from, named if it cannot pay.
    """

    method: str
    params: list[Any]
    retry: bool = True
    sender: str | None = None


class Batch(NamedTuple):
    """Several reads in one round trip (retried once as a read is, unless ``retry`` is False: a
    preflight). What comes back is one item per call: its result, or the chainfence error its reply
    carried (a refused batch is thrown in)."""

    calls: list[tuple[str, list[Any]]]
    retry: bool = True


class InProcess(NamedTuple):
    """One of the embedded chain's own operations (dev controls, the pending header's timestamp)."""

    name: str
    args: tuple[Any, ...] = ()


@record(frozen=False)
class Node:
    """What a layer knows about its node between calls (each :class:`~chainfence._node.rpc.Rpc` has one)."""

    #: The node answers in process (the embedded chain).
    embedded: bool
    #: Batches may be tried; False once the node refused one (it is asked one request at a time from then on).
    batches: bool
    #: The chain id, once asked (it cannot change under a connection).
    chain_id: int | None = None

    def __init__(self, embedded: bool, batches: bool, chain_id: int | None = None) -> None:
        self.embedded = embedded
        self.batches = batches
        self.chain_id = chain_id


# -- requests the caller composes ----------------------------------------------------------------


def request_steps(node: Node, method: str, params: Sequence[Any]) -> Steps[Any]:
    """A raw JSON-RPC request (dev-chain methods: evm_mine, evm_snapshot, ...); its result as the node
    sent it. Never retried: a dev request changes the chain."""
    return (yield Request(method, list(params), retry=False))


def tester_steps(node: Node, control: str, *args: Any) -> Steps[Any]:
    """One of the embedded chain's dev controls (eth-tester's ``mine_blocks``, ``take_snapshot``,
    ``revert_to_snapshot``, ``time_travel``), its failures translated like a request's."""
    if not node.embedded or control not in TESTER_CONTROLS:
        raise NotSupported(f"{control} is a dev control of the embedded chain only")
    return (yield InProcess(control, args))


# -- the node -----------------------------------------------------------------------------------


def chain_id_steps(node: Node) -> Steps[int]:
    """``eth_chainId``, asked once per layer."""
    if node.chain_id is None:
        node.chain_id = quantity((yield Request("eth_chainId", [])))
    return node.chain_id


def client_version_steps(node: Node) -> Steps[str]:
    return str((yield Request("web3_clientVersion", [])))


def identify_steps(node: Node) -> Steps[tuple[str, int]]:
    """``web3_clientVersion`` and ``eth_chainId`` (remembered, as :func:`chain_id_steps` does): in one round
    trip where the transport takes JSON-RPC batches, one after the other elsewhere. A reply that carries
    an error raises it, the client version's first."""
    if node.batches and node.chain_id is None:
        replies = yield from _batch(node, [("web3_clientVersion", []), ("eth_chainId", [])])
        if replies is not None:
            for reply in replies:
                if isinstance(reply, ChainfenceError):
                    raise reply
            client, chain_id = replies
            node.chain_id = quantity(chain_id)
            return str(client), node.chain_id
    return (yield from client_version_steps(node)), (yield from chain_id_steps(node))


# -- blocks ------------------------------------------------------------------------------------


def block_number_steps(node: Node) -> Steps[int]:
    return quantity((yield Request("eth_blockNumber", [])))


def block_steps(node: Node, block: str | int | bytes, *, raw: bool = False) -> Steps[Any | None]:
    """The block (header fields, transaction hashes), or None if the node has none by that id. ``raw``: as
    the node sent it (hex strings; the embedded chain's ints), without web3's formatting."""
    shape = (lambda found: found) if raw else format_block
    if isinstance(block, (bytes, bytearray)) or (isinstance(block, str) and len(block) == 66):
        return shape((yield Request("eth_getBlockByHash", [hash_id(block), False])))
    return shape((yield Request("eth_getBlockByNumber", [block_id(block), False])))


def blocks_steps(node: Node, numbers: Sequence[int], *, chunk: int = 200, raw: bool = False) -> Steps[list[Any | None]]:
    """The blocks ``numbers`` (headers and transaction hashes; None where the node has none), in order.

    One JSON-RPC batch per ``chunk`` blocks where the node takes batches
    (anvil, geth and hosted providers do; the embedded chain answers in
    process, one at a time). A node that refuses a batch is asked one
    block at a time from then on. ``raw``: each as the node sent it, unformatted (the audit index reads a
    header per block: formatting 14 fields into web3's shape cost more than the request).
    """
    numbers = list(numbers)
    found: list[Any | None] = []
    for start in range(0, len(numbers), chunk):
        part = numbers[start : start + chunk]
        if node.batches and len(part) > 1:
            replies = yield from _batch(node, [("eth_getBlockByNumber", [block_id(n), False]) for n in part])
            if replies is not None and not any(isinstance(reply, ChainfenceError) for reply in replies):
                found.extend(reply if raw else format_block(reply) for reply in replies)
                continue
        for number in part:  # one at a time, which raises the right error if one fails
            block = yield from block_steps(node, number, raw=raw)
            found.append(block)
    return found


def pending_timestamp_steps(node: Node) -> Steps[int | None]:
    """The timestamp of the block being built, where the node offers one (anvil, eth-tester, geth)."""
    if node.embedded:
        return int((yield InProcess("pending_timestamp")))
    try:
        pending = yield from block_steps(node, "pending")
    except NodeUnreachable:
        raise
    except (RpcError, ChainError):
        return None  # "pending" unsupported by this node or provider
    return _timestamp(pending)


def call_and_pending_timestamp_steps(node: Node, tx: dict[str, Any]) -> Steps[tuple[bytes, int | None]]:
    """``eth_call`` at ``latest`` and the pending block's timestamp, in one round trip where the
    transport takes JSON-RPC batches; one after the other elsewhere. The timestamp is None where the
    node offers no pending block."""
    if node.batches:
        replies = yield from _batch(
            node, [("eth_call", [call_object(tx), "latest"]), ("eth_getBlockByNumber", ["pending", False])]
        )
        if replies is not None:
            result, pending = replies
            if isinstance(result, ChainfenceError):
                raise result  # the call's own answer (a revert raises its contract error)
            if isinstance(pending, NodeUnreachable):
                raise pending
            return data(result), (None if isinstance(pending, ChainfenceError) else _timestamp(format_block(pending)))
    return (yield from call_steps(node, tx, "latest")), (yield from pending_timestamp_steps(node))


def _batch(node: Node, calls: list[tuple[str, list[Any]]], *, retry: bool = True) -> Steps[list[Any] | None]:
    """The batch's replies, or None when the node refused it (and it is not asked for batches again)."""
    try:
        return list((yield Batch(calls, retry)))
    except NodeUnreachable:
        raise
    except ChainfenceError as refused:
        # A node or provider that refuses batches: ask one at a time (which raises the right error,
        # if there is one) and do not batch again.
        logger.debug("batched %s refused (%s); not batching again", calls[0][0], refused)
        node.batches = False
        return None


def _timestamp(block: Any) -> int | None:
    if block is None or block.get("timestamp") is None:
        return None
    return int(block["timestamp"])


# -- state -------------------------------------------------------------------------------------


def call_steps(
    node: Node, tx: dict[str, Any], block: str | int = "latest", *, resource: str | None = None
) -> Steps[bytes]:
    """``eth_call``; a revert raises the contract error's class. (``resource``: accepted and ignored;
    the SDK names the resource on the way up.)"""
    return data((yield Request("eth_call", [call_object(tx), block_id(block)])))


def estimate_gas_steps(node: Node, tx: dict[str, Any], block: str | int) -> Steps[int]:
    """``eth_estimateGas`` (a preflight: a revert raises the contract error's class). Not retried."""
    params = [call_object(tx), block_id(block)]
    return quantity((yield Request("eth_estimateGas", params, retry=False, sender=tx.get("from"))))


#: How a dev chain says whether it mines each transaction the moment it arrives, by the chain's name
#: (``Chain.connect`` reads it from ``web3_clientVersion``). Only there does the sender wait for the
#: receipt in the send itself (:func:`send_raw_sync_steps`).
AUTOMINE_PROBES = {"anvil": "anvil_getAutomine"}


class DevPreflight(NamedTuple):
    """What a dev chain's preflight learned besides "no revert" (:func:`dev_preflight_steps`)."""

    #: The node said it mines each transaction the moment it arrives.
    automine: bool
    #: The sender's balance at ``pending`` (None where it was not asked: no batch).
    balance: int | None


def dev_preflight_steps(node: Node, tx: dict[str, Any], probe: str | None) -> Steps[DevPreflight]:
    """A dev chain's preflight: ``eth_call`` of ``tx`` at ``pending`` (a revert raises the contract
    error's class; nothing is sent) and, in the same round trip, whether the node mines each
    transaction on arrival (``probe``, one of :data:`AUTOMINE_PROBES`; True only if the node said so)
    and the sender's balance (``tx["from"]``'s, at ``pending``: whether it can pay for a gas ceiling).

    One JSON-RPC batch where the transport takes batches; elsewhere the call alone (automine False,
    balance None). Never retried, as a preflight is not: the caller's next step is a send.
    """
    params: list[Any] = [call_object(tx), "pending"]
    sender = tx.get("from")
    if probe is not None and node.batches:
        calls: list[tuple[str, list[Any]]] = [("eth_call", params), (probe, [])]
        if sender is not None:
            calls.append(("eth_getBalance", [sender, "pending"]))
        replies = yield from _batch(node, calls, retry=False)
        if replies is not None:
            result, automine, *balance = replies
            if isinstance(result, ChainfenceError):
                raise result  # the call's own answer (a revert raises its contract error)
            for reply in (automine, *balance):
                if isinstance(reply, NodeUnreachable):
                    raise reply
            funds = balance[0] if balance and not isinstance(balance[0], ChainfenceError) else None
            return DevPreflight(automine is True, None if funds is None else quantity(funds))
    yield Request("eth_call", params, retry=False, sender=sender)
    return DevPreflight(False, None)


def code_steps(node: Node, address: str, block: str | int = "latest") -> Steps[bytes]:
    return data((yield Request("eth_getCode", [address, block_id(block)])))


def code_and_call_steps(node: Node, address: str, tx: dict[str, Any]) -> Steps[tuple[bytes, bytes | None]]:
    """``eth_getCode`` of ``address`` at ``latest`` and, in the same round trip where the transport takes
    JSON-RPC batches, ``eth_call`` of ``tx`` there: (the code, the call's result). The result is None where
    the call was not asked (no batches: the code alone is asked) or its reply carried an error; the
    code's own error is raised."""
    if node.batches:
        replies = yield from _batch(
            node, [("eth_getCode", [address, "latest"]), ("eth_call", [call_object(tx), "latest"])]
        )
        if replies is not None:
            code, result = replies
            if isinstance(code, ChainfenceError):
                raise code
            return data(code), (None if isinstance(result, ChainfenceError) else data(result))
    return (yield from code_steps(node, address)), None


def nonce_steps(node: Node, address: str, block: str | int = "pending") -> Steps[int]:
    return quantity((yield Request("eth_getTransactionCount", [address, block_id(block)])))


def balance_steps(node: Node, address: str, block: str | int = "pending") -> Steps[int]:
    """``address``'s balance in wei at ``block`` (what it can pay for gas with)."""
    return quantity((yield Request("eth_getBalance", [address, block_id(block)])))


def logs_steps(node: Node, filter_params: dict[str, Any], *, raw: bool = False) -> Steps[list[Any]]:
    """``eth_getLogs``; a provider's range or size limit raises
    :class:`~chainfence.errors.LogRangeRefused`.

    ``raw``: the logs as the node sent them (hex strings; the embedded chain's ints), without
    formatting, which costs more than the request itself on a page of thousands of logs (the
    audit index's sync reads them so; :func:`chainfence._node.events.decode` reads every shape).
    """
    logs = yield Request("eth_getLogs", [log_filter(filter_params)])
    if not isinstance(logs, list):
        raise ChainError("eth_getLogs: the node sent no list of logs")
    return list(logs) if raw else [format_log(log) for log in logs]


# -- transactions ------------------------------------------------------------------------------


def send_raw_steps(node: Node, raw: bytes, *, sender: str | None = None) -> Steps[None]:
    """``eth_sendRawTransaction``, exactly once: never retried here (the sender owns every resend)."""
    yield Request("eth_sendRawTransaction", ["0x" + bytes(raw).hex()], retry=False, sender=sender)


def send_raw_sync_steps(node: Node, raw: bytes, *, sender: str | None = None) -> Steps[Any]:
    """``eth_sendRawTransactionSync`` (EIP-7966): the send and, once the transaction is mined, its
    receipt, in one request. Exactly once: never retried here (the sender owns every resend). The
    node's refusals are :func:`send_raw_steps`'s; a node that gave up waiting answers with an error
    (EIP-7966's code 4; anvil's after 30 s) although it holds the transaction. The receipt is formatted
    as it is read (:class:`~chainfence._node.formats.LazyReceipt`)."""
    return lazy_receipt(
        (yield Request("eth_sendRawTransactionSync", ["0x" + bytes(raw).hex()], retry=False, sender=sender)),
        "eth_sendRawTransactionSync",
    )


def transaction_steps(node: Node, tx_hash: Any) -> Steps[Any | None]:
    """The transaction (pending or mined), or None if the node does not know it."""
    return format_transaction((yield Request("eth_getTransactionByHash", [hash_id(tx_hash)])))


def receipt_steps(node: Node, tx_hash: Any) -> Steps[Any | None]:
    """The receipt of a mined transaction, or None (pending, unknown, or reorganised out); formatted as it
    is read (:class:`~chainfence._node.formats.LazyReceipt`), every field checked first: one that does not
    read raises :class:`~chainfence.errors.MalformedReply` here, naming it."""
    return lazy_receipt((yield Request("eth_getTransactionReceipt", [hash_id(tx_hash)])))


#: How :func:`traced_revert_steps` asks for a trace: the call tracer, the transaction's top call only
#: (its revert data, a few hundred bytes, whatever the transaction did inside).
_TOP_CALL_TRACE = {"tracer": "callTracer", "tracerConfig": {"onlyTopCall": True}}


def traced_revert_steps(node: Node, tx_hash: Any) -> Steps[bytes | None]:
    """The revert data of mined transaction ``tx_hash`` as it ran: at its own place in its block (the state
    the transactions before it left, the block's own time), from ``debug_traceTransaction``. None when its
    top call did not revert (it ran out of gas: nothing to decode) or the answer is not a call trace. A
    node without the debug namespace answers an error (:class:`~chainfence.errors.RpcError`)."""
    trace = yield Request("debug_traceTransaction", [hash_id(tx_hash), _TOP_CALL_TRACE])
    if not isinstance(trace, dict) or trace.get("error") != "execution reverted":
        return None
    try:
        return data(trace.get("output") or "0x")
    except (ValueError, TypeError):  # not 0x-hex: no revert data to decode
        return None


def block_receipts_steps(node: Node, block_hashes: Sequence[Any], *, chunk: int = 100) -> Steps[list[Any | None]]:
    """``eth_getBlockReceipts`` of each block (by hash), in order, as the node sent them: one JSON-RPC batch
    per ``chunk`` blocks where the node takes batches. None for a block whose receipts the batch did not
    answer (a reply with an error: a node without the method), and for every block where the node takes no
    batches: nothing is asked then (the caller asks each block's receipts as it needs them)."""
    hashes = [hash_id(block_hash) for block_hash in block_hashes]
    if not node.batches or not hashes:
        return [None] * len(hashes)
    found: list[Any | None] = []
    for start in range(0, len(hashes), chunk):
        part = hashes[start : start + chunk]
        replies = yield from _batch(node, [("eth_getBlockReceipts", [block_hash]) for block_hash in part])
        if replies is None:  # refused as a batch: the caller asks one at a time
            found.extend([None] * len(part))
            continue
        found.extend(None if isinstance(reply, ChainfenceError) else reply for reply in replies)
    return found


# -- fees --------------------------------------------------------------------------------------


def gas_price_steps(node: Node) -> Steps[int]:
    return quantity((yield Request("eth_gasPrice", [])))


#: A tip from the fee history (as web3 computes it where eth_maxPriorityFeePerGas is missing): the 5th
#: percentile of the last 10 blocks' non-zero rewards, averaged, kept within 1 and 1.5 gwei.
_TIP_HISTORY = (10, [5.0])
_TIP_MIN, _TIP_MAX = 1_000_000_000, 1_500_000_000


def max_priority_fee_steps(node: Node) -> Steps[int | None]:
    """The node's suggested tip: ``eth_maxPriorityFeePerGas``, else computed from ``eth_feeHistory``
    as web3 does; None where the node has neither."""
    try:
        return quantity((yield Request("eth_maxPriorityFeePerGas", [])))
    except NodeUnreachable:
        raise
    except ChainError:
        pass
    blocks, percentiles = _TIP_HISTORY
    try:
        history = yield Request("eth_feeHistory", [hex(blocks), "pending", percentiles])
        rewards = [quantity(reward[0]) for reward in history["reward"]]
    except NodeUnreachable:
        raise
    except (ChainError, KeyError, IndexError, TypeError, ValueError):
        return None
    paid = [reward for reward in rewards if reward != 0]
    return min(max(round(sum(paid) / (len(paid) or 1)), _TIP_MIN), _TIP_MAX)
