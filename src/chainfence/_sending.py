"""Sending transactions the way production code must: never twice, never silently.

One :class:`Sender` per :class:`~chainfence.Chain`. For every transaction:

1. **Preflight** on the block being built (``eth_estimateGas`` at ``pending``;
   on eth-tester an ``eth_call`` at ``pending``): a revert surfaces as its
   typed error and nothing is sent.
2. **Sign locally** with the next nonce of the sender, under that sender's
   lock, so threads sharing a key never collide. Fees are EIP-1559 where the
   latest block has a base fee, legacy otherwise.
3. **Submit, reconciling doubt.** If the node's reply is lost (timeout,
   reset connection) the transaction may or may not have reached it. The SDK
   never signs a second transaction for the same intent while the first one
   might still land: it asks the node for the first one's hash, and resends
   the identical signed bytes (same hash, so at most one can ever be mined).
   A nonce the node says is taken is checked against our own hash before the
   nonce counter is resynchronised.
4. **Wait for the receipt** with a short poll and a bounded timeout. On
   timeout it **cancels**: a zero-value transfer to itself with the same nonce
   and higher fees. Whichever of the two is mined decides: the original
   (late, but it happened: returned, with a warning) or the cancellation
   (:class:`~chainfence.errors.TransactionTimeout`: it can never happen).
   If neither is mined in time: :class:`~chainfence.errors.OutcomeUnknown`
   with every candidate hash.
5. **Wait for confirmations**: ``k`` blocks on top of the including block,
   re-reading the receipt so a reorganised inclusion is noticed.
6. **Check the status**: a transaction mined with status 0 raises its decoded
   revert (replayed at the parent block) or
   :class:`~chainfence.errors.TransactionFailed`.

Timeline of the failure this prevents ("ghost lease")::

    agent:  sign acquire(nonce 7) -> send ... the reply is lost
    naive:  "failed", sign acquire(nonce 8) -> send             -> TWO acquisitions land:
            the first one holds the resource, unknown to its owner, until its ttl ends
    here:   eth_getTransactionByHash(h7) -> pending             -> wait for h7's receipt
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import TransactionNotFound

from . import _reverts
from .errors import (
    ChainError,
    ChainfenceError,
    InsufficientFunds,
    NodeUnreachable,
    NotConfirmed,
    OutcomeUnknown,
    TransactionFailed,
    TransactionTimeout,
)

logger = logging.getLogger("chainfence.chain")

#: Gas headroom over the estimate: covers state that moves between estimate
#: and inclusion (e.g. a resource's first acquisition racing another).
_GAS_MARGIN_NUM, _GAS_MARGIN_DEN = 5, 4

#: Gas limit of every transaction on the embedded chain, where gas is free and
#: estimates are unreliable (see Sender.preflight). Above any registry operation.
EMBEDDED_GAS_LIMIT = 3_000_000

#: Fee bump of a replacement (nodes require >= 10 %).
_BUMP_NUM, _BUMP_DEN = 5, 4

#: Seconds a fee quote is reused (saves two RPCs per transaction under load).
_FEE_QUOTE_SECONDS = 1.0

#: Times the identical signed bytes are resent when the node's reply was lost.
_RESENDS = 3


class _NonceTaken(Exception):
    """The node says our nonce is used by a transaction that is not ours."""


def _text(exc: BaseException) -> str:
    return str(exc).lower()


def _is_transport_error(exc: BaseException) -> bool:
    """A failure to talk to the node (as opposed to an answer from it)."""
    import requests

    return isinstance(exc, (requests.exceptions.RequestException, ConnectionError, TimeoutError, OSError))


def _never_delivered(exc: BaseException) -> bool:
    """A transport failure that happened before the request left (connection refused)."""
    text = _text(exc)
    return "connection refused" in text or "failed to establish a new connection" in text


class Sender:
    """Signs, sends, reconciles and confirms transactions for the keys of one chain."""

    def __init__(
        self,
        w3: Web3,
        signers: dict[str, LocalAccount],
        chain_id: int,
        *,
        embedded: bool,
        receipt_timeout: float,
        poll_latency: float,
        confirmation_timeout: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.w3 = w3
        self.signers = signers
        self.chain_id = chain_id
        self.embedded = embedded
        self.receipt_timeout = receipt_timeout
        self.poll_latency = poll_latency
        self.confirmation_timeout = confirmation_timeout
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[str, threading.Lock] = {}
        self._next_nonce: dict[str, int] = {}
        self._locks_lock = threading.Lock()
        self._fee_quote: tuple[float, dict[str, int]] | None = None

    # ------------------------------------------------------------------
    # The whole journey
    # ------------------------------------------------------------------

    def transact(
        self,
        sender: str,
        call: dict[str, Any],
        *,
        gas: int | None,
        resource: str | None,
        confirmations: int,
    ) -> Any:
        if gas is None:
            gas = self.preflight(call, resource)
        fees = self.fees()
        tx = dict(call, gas=gas, chainId=self.chain_id, **fees)
        with self._lock(sender):
            tx_hash, nonce = self._sign_and_submit(sender, tx)
        logger.debug("sent tx=%s from=%s nonce=%d gas=%d", tx_hash, sender, nonce, gas)

        receipt = self._wait_or_cancel(sender, tx, tx_hash, nonce)
        if confirmations > 0:
            receipt = self._confirm(receipt, confirmations, sender=sender, nonce=nonce)
        if receipt["status"] != 1:
            raise self.failure(call, receipt, resource)
        return receipt

    def preflight(self, call: dict[str, Any], resource: str | None) -> int:
        """Run ``call`` on the block being built; raise its decoded revert, else return a gas limit.

        On JSON-RPC nodes this is ``eth_estimateGas`` at ``pending``: the
        block the transaction will join. eth-tester cannot estimate at
        ``pending`` and its ``latest`` estimate runs on a fresh header stamped
        with the wall clock (not the chain's clock), so there the preflight is
        an ``eth_call`` at ``pending`` and the gas limit a fixed ceiling.
        """
        try:
            if self.embedded:
                self.w3.eth.call(call, block_identifier="pending")
                return EMBEDDED_GAS_LIMIT
            estimate = self.w3.eth.estimate_gas(call, block_identifier="pending")
        except Exception as exc:
            raise self.translate(exc, resource, sender=call.get("from")) from exc
        return estimate * _GAS_MARGIN_NUM // _GAS_MARGIN_DEN

    # ------------------------------------------------------------------
    # Fees
    # ------------------------------------------------------------------

    def fees(self) -> dict[str, int]:
        """EIP-1559 fees (2 x base fee + tip) where the chain has a base fee, else a legacy gas price.

        A quote is reused for up to :data:`_FEE_QUOTE_SECONDS`: 2 x base fee
        absorbs several consecutive full blocks of base-fee rises (+12.5 %
        each), and a transaction that is underpriced anyway is cancelled by
        the receipt timeout, never lost.
        """
        with self._locks_lock:
            quote = self._fee_quote
        if quote is not None and self._clock() - quote[0] < _FEE_QUOTE_SECONDS:
            return dict(quote[1])
        fees = self._fresh_fees()
        with self._locks_lock:
            self._fee_quote = (self._clock(), fees)
        return dict(fees)

    def _fresh_fees(self) -> dict[str, int]:
        try:
            latest = self.w3.eth.get_block("latest")
            base_fee = latest.get("baseFeePerGas")
            if base_fee is None:
                return {"gasPrice": self.w3.eth.gas_price}
            try:
                tip = self.w3.eth.max_priority_fee
            except Exception as exc:
                if _is_transport_error(exc):
                    raise
                tip = 10**9  # nodes without eth_maxPriorityFeePerGas
        except Exception as exc:
            raise self.translate(exc, None) from exc
        return {"maxFeePerGas": 2 * base_fee + tip, "maxPriorityFeePerGas": tip}

    @staticmethod
    def bump(fees: dict[str, int]) -> dict[str, int]:
        """Fees raised enough for a node to accept a replacement (+25 %, at least +1 wei)."""
        return {key: max(value * _BUMP_NUM // _BUMP_DEN, value + 1) for key, value in fees.items()}

    # ------------------------------------------------------------------
    # Nonces and submission
    # ------------------------------------------------------------------

    def _lock(self, sender: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(sender, threading.Lock())

    def forget_nonces(self) -> None:
        """Drop every cached nonce (after a chain revert, or when in doubt)."""
        with self._locks_lock:
            self._next_nonce.clear()

    def _nonce(self, sender: str) -> int:
        # Called with the sender's lock held.
        cached = self._next_nonce.get(sender)
        if cached is None:
            try:
                cached = self.w3.eth.get_transaction_count(sender, "pending")
            except Exception as exc:
                raise self.translate(exc, None) from exc
            self._next_nonce[sender] = cached
        return cached

    def _sign_and_submit(self, sender: str, tx: dict[str, Any]) -> tuple[str, int]:
        """Sign with the next nonce and get the node to accept it; returns (hash, nonce).

        Called with the sender's lock held, so nonces are handed out in order.
        """
        for _attempt in range(3):
            nonce = self._nonce(sender)
            signed = self.signers[sender].sign_transaction(dict(tx, nonce=nonce))
            tx_hash = signed.hash.to_0x_hex()
            try:
                self._submit(signed.raw_transaction, tx_hash, sender=sender, nonce=nonce)
            except _NonceTaken:
                logger.debug("nonce %d of %s is taken; resynchronising", nonce, sender)
                self._next_nonce.pop(sender, None)
                continue
            except BaseException:
                self._next_nonce.pop(sender, None)  # in doubt: ask the node next time
                raise
            self._next_nonce[sender] = nonce + 1
            return tx_hash, nonce
        raise ChainError(f"could not find a free nonce for {sender}: another process keeps taking them")

    def _submit(self, raw: bytes, tx_hash: str, *, sender: str, nonce: int) -> None:
        """Get ``raw`` (whose hash is ``tx_hash``) accepted by the node, or raise.

        Raises _NonceTaken when the nonce is used by another transaction (safe
        to re-sign: ours can never be mined), OutcomeUnknown when the node may
        hold our transaction but cannot say so.
        """
        delivered_maybe = False
        last_error: BaseException | None = None
        for attempt in range(1 + _RESENDS):
            if attempt:
                self._sleep(min(0.05 * 2**attempt, 1.0))
            try:
                self.w3.eth.send_raw_transaction(raw)
                return
            except Exception as exc:
                last_error = exc
                text = _text(exc)
                if "already known" in text or "known transaction" in text:
                    return  # an earlier attempt of these very bytes got through
                if "nonce too low" in text or "nonce has already been used" in text:
                    if delivered_maybe and self._known(tx_hash):
                        return  # our own earlier attempt used it
                    raise _NonceTaken from exc
                if "nonce too high" in text:
                    raise _NonceTaken from exc
                if "replacement transaction underpriced" in text:
                    # A pending transaction of ours (from another process) holds this nonce.
                    raise _NonceTaken from exc
                if not _is_transport_error(exc):
                    raise self.translate(exc, None, sender=sender) from exc
                delivered_maybe = delivered_maybe or not _never_delivered(exc)
                logger.warning(
                    "send of tx=%s nonce=%d failed in transit (%s); checking whether the node has it",
                    tx_hash, nonce, exc,
                )  # fmt: skip
                try:
                    if self._known(tx_hash):
                        return
                except Exception as lookup_error:
                    if not _is_transport_error(lookup_error):
                        raise self.translate(lookup_error, None) from lookup_error
                    last_error = lookup_error
        if not delivered_maybe:
            raise NodeUnreachable(f"the node did not answer; nothing was sent: {last_error}") from last_error
        raise OutcomeUnknown(
            f"transaction {tx_hash} (nonce {nonce}) may have reached the node, which stopped answering; "
            "look it up before sending again",
            tx_hashes=(tx_hash,),
            nonce=nonce,
            sender=sender,
        ) from last_error

    def _known(self, tx_hash: str) -> bool:
        try:
            self.w3.eth.get_transaction(tx_hash)
        except TransactionNotFound:
            return False
        return True

    # ------------------------------------------------------------------
    # Receipts, cancellation, confirmations
    # ------------------------------------------------------------------

    def _receipt(self, hashes: tuple[str, ...], timeout: float) -> Any:
        """The first receipt found for any of ``hashes`` within ``timeout`` seconds, else None."""
        deadline = self._clock() + timeout
        while True:
            for tx_hash in hashes:
                try:
                    return self.w3.eth.get_transaction_receipt(tx_hash)
                except TransactionNotFound:
                    continue
                except Exception as exc:
                    if not _is_transport_error(exc):
                        raise self.translate(exc, None) from exc
                    logger.debug("receipt poll for %s failed: %s", tx_hash, exc)
            if self._clock() >= deadline:
                return None
            self._sleep(self.poll_latency)

    def _wait_or_cancel(self, sender: str, tx: dict[str, Any], tx_hash: str, nonce: int) -> Any:
        receipt = self._receipt((tx_hash,), self.receipt_timeout)
        if receipt is not None:
            return receipt
        logger.warning(
            "tx=%s nonce=%d not mined after %.1f s; sending a cancellation with the same nonce",
            tx_hash, nonce, self.receipt_timeout,
        )  # fmt: skip
        candidates = (tx_hash,)
        cancel_hash = self._send_cancel(sender, tx, nonce)
        if cancel_hash is not None:
            candidates = (tx_hash, cancel_hash)
        receipt = self._receipt(candidates, self.receipt_timeout)
        if receipt is None:
            with self._lock(sender):
                self._next_nonce.pop(sender, None)
            raise OutcomeUnknown(
                f"neither transaction {tx_hash} nor its cancellation was mined within "
                f"{2 * self.receipt_timeout:.0f} s; one of them may still be",
                tx_hashes=candidates,
                nonce=nonce,
                sender=sender,
            )
        mined = receipt["transactionHash"].to_0x_hex()
        if mined == tx_hash:
            logger.warning("tx=%s was mined after all (block %d)", tx_hash, receipt["blockNumber"])
            return receipt
        raise TransactionTimeout(
            f"transaction {tx_hash} was not mined within {self.receipt_timeout:.0f} s and was cancelled "
            f"by {mined} (same nonce {nonce}): it can never execute; nothing happened",
            tx_hashes=candidates,
            nonce=nonce,
            sender=sender,
        )

    def _send_cancel(self, sender: str, original: dict[str, Any], nonce: int) -> str | None:
        """Send a replacement that does nothing; returns its hash (None if the nonce is already mined)."""
        fees = {k: original[k] for k in ("maxFeePerGas", "maxPriorityFeePerGas", "gasPrice") if k in original}
        try:
            current = self._fresh_fees()
        except ChainfenceError:
            current = fees
        for _attempt in range(3):
            fees = {k: max(v, current.get(k, 0)) for k, v in self.bump(fees).items()}
            cancel = {
                "from": sender, "to": sender, "value": 0, "data": b"", "gas": 21_000,
                "nonce": nonce, "chainId": self.chain_id, **fees,
            }  # fmt: skip
            signed = self.signers[sender].sign_transaction(cancel)
            try:
                self.w3.eth.send_raw_transaction(signed.raw_transaction)
                return signed.hash.to_0x_hex()
            except Exception as exc:
                text = _text(exc)
                if "nonce too low" in text or "already known" in text:
                    return None if "nonce too low" in text else signed.hash.to_0x_hex()
                if "underpriced" in text:
                    continue
                if _is_transport_error(exc):
                    return signed.hash.to_0x_hex()  # it may have gone out: keep it a candidate
                logger.warning("cancellation of nonce %d refused: %s", nonce, exc)
                return None
        return None

    def _confirm(self, receipt: Any, confirmations: int, *, sender: str, nonce: int) -> Any:
        """Wait until ``receipt``'s block has ``confirmations`` blocks on top, following reorgs."""
        tx_hash = receipt["transactionHash"].to_0x_hex()
        deadline = self._clock() + self.confirmation_timeout
        while True:
            try:
                head = self.w3.eth.block_number
                current = self.w3.eth.get_transaction_receipt(tx_hash)
            except TransactionNotFound:
                current = None  # reorganised out; it may be included again
            except Exception as exc:
                if not _is_transport_error(exc):
                    raise self.translate(exc, None) from exc
                current = receipt  # the node hiccuped; keep the last known inclusion
                head = -1
            if current is not None:
                if current["blockHash"] != receipt["blockHash"]:
                    logger.warning(
                        "tx=%s moved from block %d to %d (reorg)", tx_hash, receipt["blockNumber"], current["blockNumber"]
                    )
                receipt = current
                if head - receipt["blockNumber"] >= confirmations:
                    return receipt
            if self._clock() >= deadline:
                raise NotConfirmed(
                    f"transaction {tx_hash} is not {confirmations} blocks deep after "
                    f"{self.confirmation_timeout:.0f} s"
                    + ("" if current is not None else " (it was reorganised out of the chain)"),
                    receipt=receipt,
                    confirmations=confirmations,
                    tx_hashes=(tx_hash,),
                    nonce=nonce,
                    sender=sender,
                )
            self._sleep(self.poll_latency)

    # ------------------------------------------------------------------
    # Errors
    # ------------------------------------------------------------------

    def failure(self, call: dict[str, Any], receipt: Any, resource: str | None) -> ChainfenceError:
        """The error for a transaction mined with status 0."""
        tx_hash = receipt["transactionHash"].to_0x_hex()
        # Replay the call to recover the reason: on the parent block's state
        # first, then on the including block's (a competitor mined earlier in
        # the same block is what made a preflight-approved call revert).
        for block in (receipt["blockNumber"] - 1, receipt["blockNumber"]):
            try:
                self.w3.eth.call(call, block_identifier=block)
            except Exception as exc:
                error = _reverts.translate(exc, resource=resource)
                if error is not None:
                    error.__notes__ = [f"transaction {tx_hash} was mined with status 0 in block {receipt['blockNumber']}"]
                    return error
        return TransactionFailed(
            f"transaction {tx_hash} was mined with status 0 (gas used {receipt['gasUsed']}); "
            "no revert reason could be recovered",
            tx_hash=tx_hash,
            receipt=receipt,
        )

    @staticmethod
    def translate(exc: BaseException, resource: str | None, *, sender: str | None = None) -> ChainfenceError:
        """The chainfence error for any exception raised while talking to the chain."""
        error = _reverts.translate(exc, resource=resource)
        if error is not None:
            return error
        text = str(exc)
        if "insufficient funds" in text.lower():
            who = f"{sender} " if sender else ""
            return InsufficientFunds(f"{who}cannot pay for gas: {text}", account=sender)
        if _is_transport_error(exc):
            return NodeUnreachable(f"the node did not answer: {text}")
        return ChainError(f"{type(exc).__name__}: {text}")
