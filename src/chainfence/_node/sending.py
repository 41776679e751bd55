"""Sending transactions the way production code must: never twice, never silently.

One :class:`Sender` per :class:`~chainfence.Chain`. For every transaction:

1. **Preflight** on the block being built (``eth_estimateGas`` at ``pending``;
   on eth-tester and anvil an ``eth_call`` at ``pending``, where gas is free
   and the limit a fixed ceiling): a revert surfaces as its typed error and
   nothing is sent. On anvil the same round trip asks whether the node mines
   each transaction on arrival (``anvil_getAutomine``).
2. **Sign locally** with the next nonce of the sender, under that sender's
   lock, so threads sharing a key never collide. Fees are EIP-1559 where the
   latest block has a base fee, legacy otherwise. Where the transport
   overlaps (IPC, HTTP) and the preflight is an ``eth_call``, the transaction
   is signed while the preflight is on its way (its gas ceiling, the fee quote
   and the counted nonce are known then); under the lock those bytes are sent
   only if they sign exactly the transaction and nonce it would sign now
   (signing is deterministic: the same bytes), else it signs again. A
   preflight that refuses leaves them unsent: no nonce taken, none skipped.
3. **Submit, reconciling doubt.** If the node's reply is lost or late
   (timeout, reset connection) the transaction may or may not have reached
   it. The SDK never signs a second transaction for the same intent while the
   first one might still land: it asks the node for the first one's hash, and
   resends the identical signed bytes (same hash, so at most one can ever be
   mined). Nothing else resends: web3's provider retries are off
   (:mod:`chainfence._node.rpc`). Whatever error the node answers — "nonce too
   low", "already known", a wording of its own — the SDK first asks whether
   our own hash is there; only a nonce taken by *another* transaction makes it
   re-sign, with the next nonce.
4. **Wait for the receipt**: where the node said it mines on arrival, the
   send itself returns it (``eth_sendRawTransactionSync``, EIP-7966: one
   round trip instead of a send and polls; the rules of step 3 apply to it
   unchanged). Otherwise, and whenever that send returns no receipt, it is
   asked at once after the send, then after 1 ms,
   doubling up to the poll latency, with a bounded timeout. On
   timeout it **cancels**: a zero-value transfer to itself with the same nonce
   and higher fees. Whichever of the two is mined decides: the original
   (late, but it happened: returned, with a warning) or the cancellation
   (:class:`~chainfence.errors.TransactionTimeout`: it can never happen).
   If neither is mined in time, or the node stops answering for
   ``unreachable_timeout`` seconds: :class:`~chainfence.errors.OutcomeUnknown`
   with every candidate hash and the nonce.
5. **Wait for confirmations**: ``k`` blocks on top of the including block,
   watching every candidate, so a reorganised inclusion is noticed and a
   reorg that swaps the cancellation for the original is followed. With
   ``k > 0`` "nothing happened" (``TransactionTimeout``) is decided only once
   the cancellation itself is ``k`` blocks deep.
6. **Check the status**: a transaction mined with status 0 raises the revert
   the contract raised in it (from the node's trace of it, else replayed on
   its block: :meth:`Sender.failure`) or
   :class:`~chainfence.errors.TransactionFailed`.

The journey is written once, as steps (:mod:`chainfence._core.effects`): each
request is yielded to a driver, which runs it over the blocking RPC layer
(:meth:`Sender.run`, what :class:`~chainfence.Chain` does) or over the
asyncio one (:mod:`chainfence.aio`). Every rule above holds for both
because there is one copy of it.

Timeline of the failure this prevents ("ghost lease")::

    agent:  sign acquire(nonce 7) -> send ... the reply is lost
    naive:  "failed", sign acquire(nonce 8) -> send             -> TWO acquisitions land:
            the first one holds the resource, unknown to its owner, until its ttl ends
    here:   eth_getTransactionByHash(h7) -> pending             -> wait for h7's receipt
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .._core import log as _log
from .._core.effects import RPC, Locked, Sleep, Steps, run
from ..errors import (
    ChainError,
    ChainfenceError,
    InsufficientFunds,
    NodeUnreachable,
    NotConfirmed,
    NotSupported,
    OutcomeUnknown,
    RpcError,
    TransactionFailed,
    TransactionTimeout,
    UnknownRevert,
)
from .methods import AUTOMINE_PROBES
from .reverts import decode as decode_revert
from .rpc import Rpc
from .signing import sign

if TYPE_CHECKING:  # types only: signing needs the key, not eth-account
    from eth_account.signers.local import LocalAccount

    from .accounts import LocalKey

logger = _log.get("chainfence.chain")

T = TypeVar("T")

#: Gas headroom over the estimate: covers state that moves between estimate
#: and inclusion (e.g. a resource's first acquisition racing another).
_GAS_MARGIN_NUM, _GAS_MARGIN_DEN = 5, 4

#: Gas limit of every transaction on the embedded chain, where gas is free and
#: estimates are unreliable (see Sender.preflight). Above any registry operation.
EMBEDDED_GAS_LIMIT = 5_000_000

#: Gas limit of every transaction on a dev node whose preflight is an ``eth_call`` (anvil: see
#: Sender.preflight), capped by the latest block's gas limit. Above any registry operation.
DEV_GAS_LIMIT = EMBEDDED_GAS_LIMIT

#: Fee bump of a replacement (nodes require >= 10 %).
_BUMP_NUM, _BUMP_DEN = 5, 4

#: Seconds a fee quote is reused (saves two RPCs per transaction under load).
_FEE_QUOTE_SECONDS = 1.0

#: Seconds before the second look for a receipt (the first is at once), doubling up to the poll
#: latency: a dev node that mines on arrival (anvil) has it a millisecond after the send returns.
_FIRST_POLL_GAP = 0.001

#: Times the identical signed bytes are resent when the node's reply was lost.
_RESENDS = 3

#: Times a transaction is signed with a fresh nonce when another transaction (another process sending as the
#: same account) took the one it had, with a random pause before each that doubles up to ``_NONCE_PAUSE_CAP``
#: seconds: two processes that keep sending as one account take each other's nonces in turns, and three
#: attempts back to back lost to a busy one about half the time (issue 25).
_NONCE_ATTEMPTS = 12
_NONCE_PAUSE, _NONCE_PAUSE_CAP = 0.002, 0.25

#: Seconds between looks, while a receipt is awaited, at whether the transaction's nonce was used by another
#: transaction (another process's: the node then dropped ours, which can never be mined).
_DROP_LOOK = 1.0

#: Node answers that mean "I already have these very bytes".
_ALREADY_KNOWN = ("already known", "known transaction", "already imported", "already in pool", "already exists")

#: Node answers that mean "this nonce is used, or held by a pending transaction".
_NONCE_USED = (
    "nonce too low",
    "nonce has already been used",
    "nonce too high",
    "underpriced",
    "nonce is too low",
    "invalid transaction nonce",  # the embedded chain (py-evm)
)


def _is_revert(error: ChainfenceError) -> bool:
    """Whether ``error`` is what a revert translates to (a contract error's class, or UnknownRevert)."""
    return type(error).solidity_error is not None or isinstance(error, UnknownRevert)


#: JSON-RPC error codes of a node that does not know a method (nothing was done): the sender then stops
#: asking for ``eth_sendRawTransactionSync`` and sends the same bytes with ``eth_sendRawTransaction``.
_NO_SUCH_METHOD = (-32601,)


#: The attribute an interrupt (``KeyboardInterrupt``, ``asyncio.CancelledError``, ...) carries once it
#: landed while a transaction was being sent or waited for: the :class:`InFlight` to settle.
IN_FLIGHT = "chainfence_in_flight"


class InFlight(NamedTuple):
    """A transaction whose caller was interrupted after it may have reached the node. (A named tuple,
    not a dataclass: start time, docs/explanation/design.md.)"""

    sender: str
    tx: dict[str, Any]
    tx_hash: str
    nonce: int
    #: False when the interrupt landed in the send itself: the node may or may not have it.
    delivered: bool


def interrupted(error: BaseException) -> bool:
    """Whether ``error`` interrupts the caller (``KeyboardInterrupt``, ``asyncio.CancelledError``,
    ``SystemExit``) rather than reporting a failure; a generator being closed is neither."""
    return not isinstance(error, (Exception, GeneratorExit))


def in_flight(error: BaseException) -> InFlight | None:
    """The transaction an interrupt left in flight, if it landed after signing (see :data:`IN_FLIGHT`)."""
    flight = getattr(error, IN_FLIGHT, None)
    return flight if isinstance(flight, InFlight) else None


def _mark(error: BaseException, flight: InFlight) -> None:
    if interrupted(error) and in_flight(error) is None:
        try:
            setattr(error, IN_FLIGHT, flight)
        except AttributeError:  # pragma: no cover - an interrupt class without a __dict__
            logger.warning(
                "interrupted while tx=%s was in flight (nonce %d of %s)", flight.tx_hash, flight.nonce, flight.sender
            )


class _NonceTaken(Exception):
    """The node says our nonce is used by a transaction that is not ours."""


class _Dropped(Exception):
    """The node took our transaction, then its nonce was used by another (``error`` says so): it can never be
    mined, and the sender signs the intent again with a fresh nonce."""

    def __init__(self, error: TransactionTimeout):
        super().__init__(str(error))
        self.error = error


class _Presigned:
    """A transaction to sign while its preflight is on its way (:meth:`Sender._presigned`): the transport
    calls it once the preflight is written. ``signed`` stays None if it was not run (a transport that
    does not overlap) or signing refused (the real signing, in order, raises what it raises)."""

    __slots__ = ("signed", "signer", "tx")

    def __init__(self, signer: Any, tx: dict[str, Any]):
        self.signer = signer
        self.tx = tx
        self.signed: Any = None

    def __call__(self) -> None:
        try:
            self.signed = sign(self.signer, self.tx)
        except Exception:  # a guess only: signing for real raises it, in its place
            self.signed = None

    def matches(self, signer: Any, tx: dict[str, Any]) -> bool:
        """Whether this signs ``tx`` with ``signer``: what :func:`sign` would make of them is ``signed``."""
        return signer is self.signer and tx == self.tx


class Sender:
    """Signs, sends, reconciles and confirms transactions for the keys of one chain."""

    def __init__(
        self,
        rpc: Rpc,
        signers: dict[str, LocalKey | LocalAccount],
        chain_id: int,
        *,
        receipt_timeout: float,
        poll_latency: float,
        confirmation_timeout: float,
        unreachable_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        dev: str | None = None,
    ):
        self.rpc = rpc
        self.signers = signers
        self.chain_id = chain_id
        self.embedded = rpc.embedded
        self.receipt_timeout = receipt_timeout
        self.poll_latency = poll_latency
        self.confirmation_timeout = confirmation_timeout
        #: Seconds without any answer from the node after which waiting stops (OutcomeUnknown).
        self.unreachable_timeout = min(receipt_timeout, 10.0) if unreachable_timeout is None else unreachable_timeout
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[str, threading.Lock] = {}
        self._next_nonce: dict[str, int] = {}
        self._locks_lock = threading.Lock()
        self._fee_quote: tuple[float, dict[str, int]] | None = None
        #: The latest block's gas limit, read with each fee quote (it caps :data:`DEV_GAS_LIMIT`).
        self._block_gas_limit: int | None = None
        #: How this dev node says whether it mines on arrival (None: not a dev node the sender knows).
        self._automine_probe = None if self.embedded else AUTOMINE_PROBES.get(dev or "")
        #: The node answered ``eth_sendRawTransactionSync`` as a method it does not know.
        self._sync_refused = False

    # ------------------------------------------------------------------
    # The whole journey
    # ------------------------------------------------------------------

    def transact(self, sender: str, call: dict[str, Any], *, gas: int | None, confirmations: int) -> Any:
        """:meth:`transact_steps` over the blocking RPC layer."""
        return self.run(self.transact_steps(sender, call, gas=gas, confirmations=confirmations))

    def run(self, steps: Steps[T]) -> T:
        """Run steps of this sender over the blocking :class:`~chainfence._node.rpc.Rpc` (the sync driver)."""
        return run(steps, self.rpc, sleep=lambda seconds: self._sleep(seconds), lock=self._lock)

    def transact_steps(self, sender: str, call: dict[str, Any], *, gas: int | None, confirmations: int) -> Steps[Any]:
        """The whole journey of one transaction (see the module docstring); returns its receipt. Errors
        name the account and the transaction, never a resource: the caller that knows it adds it."""
        sync = False
        presigned = None
        if gas is None:
            presigned = self._presigned(sender, call)
            gas, sync = yield from self._preflight(call, presigned)
        fees = yield from self.fees_steps()
        if gas == DEV_GAS_LIMIT and self._automine_probe is not None and self._block_gas_limit:
            gas = min(gas, self._block_gas_limit)  # the ceiling, within the block's gas limit
        tx = dict(call, gas=gas, chainId=self.chain_id, **fees)
        for _dropped in range(_NONCE_ATTEMPTS):
            tx_hash, nonce, mined = yield Locked(
                sender, self._sign_and_send(sender, tx, sync=sync, presigned=presigned)
            )
            logger.debug("sent tx=%s from=%s nonce=%d gas=%d", tx_hash, sender, nonce, gas)
            try:
                receipt = yield from self._settle(sender, tx, tx_hash, nonce, confirmations, mined=mined)
            except _Dropped as dropped:
                # The node took it, then dropped it: another transaction (another process sending as this
                # account) took its nonce, and it can never be mined. As when that happens at the send, it
                # is signed again with a fresh nonce: still one intent, never two.
                last = dropped.error
                logger.warning("%s: signing it again with a fresh nonce", last)
                continue
            except BaseException as error:
                _mark(error, InFlight(sender, tx, tx_hash, nonce, delivered=True))
                raise
            break
        else:
            raise last
        if receipt["status"] != 1:
            raise (yield from self.failure(call, receipt))
        return receipt

    def preflight(self, call: dict[str, Any]) -> Steps[int]:
        """Run ``call`` on the block being built; raise its decoded revert, else return a gas limit.

        On JSON-RPC nodes this is ``eth_estimateGas`` at ``pending``: the
        block the transaction will join. eth-tester cannot estimate at
        ``pending`` and its ``latest`` estimate runs on a fresh header stamped
        with the wall clock (not the chain's clock), so there the preflight is
        an ``eth_call`` at ``pending`` and the gas limit a fixed ceiling. So it
        is on anvil, where gas is free too and a call costs less than an
        estimate (``docs/benchmarks/history.md``, "What each lever bought"): the
        ceiling is :data:`DEV_GAS_LIMIT`,
        and the same round trip asks whether the node mines on arrival and what
        the sender holds; a sender that cannot pay for the ceiling gets the
        estimate, as on any node (:meth:`_preflight`).
        """
        gas, _sync = yield from self._preflight(call)
        return gas

    def _preflight(self, call: dict[str, Any], presigned: _Presigned | None = None) -> Steps[tuple[int, bool]]:
        """:meth:`preflight`'s gas limit, and whether the send may wait for the receipt itself
        (``eth_sendRawTransactionSync``): only where the node said, in the preflight's own round trip,
        that it mines each transaction the moment it arrives (anvil's automine). A node that mines on a
        timer or on demand would hold the send, and the sender's nonce lock, until its next block.
        ``presigned`` signs while the preflight is on its way (:meth:`_presigned`)."""
        if self.embedded:
            yield RPC.call(call, "pending")
            return EMBEDDED_GAS_LIMIT, False
        if self._automine_probe is not None:
            probe = None if self._sync_refused else self._automine_probe
            if presigned is None:
                found = yield RPC.dev_preflight(call, probe)
            else:
                found = yield RPC.dev_preflight(call, probe, meanwhile=presigned)
            sync = found.automine and not self._sync_refused
            fees = yield from self.fees_steps()  # the quote the transaction will carry (cached)
            ceiling = min(DEV_GAS_LIMIT, self._block_gas_limit or DEV_GAS_LIMIT)
            price = fees.get("maxFeePerGas", fees.get("gasPrice", 0))
            if found.balance is not None and found.balance >= ceiling * price + int(call.get("value") or 0):
                return DEV_GAS_LIMIT, sync
            # A sender that cannot pay for the ceiling (an account funded for a few transactions):
            # the gas the call needs, as on any node (one round trip more).
            estimate: int = yield RPC.estimate_gas(call, "pending")
            return estimate * _GAS_MARGIN_NUM // _GAS_MARGIN_DEN, sync
        estimate = yield RPC.estimate_gas(call, "pending")
        return estimate * _GAS_MARGIN_NUM // _GAS_MARGIN_DEN, False

    # ------------------------------------------------------------------
    # Fees
    # ------------------------------------------------------------------

    def fees(self) -> dict[str, int]:
        """:meth:`fees_steps` over the blocking RPC layer."""
        return self.run(self.fees_steps())

    def fees_steps(self) -> Steps[dict[str, int]]:
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
        fees = yield from self._fresh_fees()
        with self._locks_lock:
            self._fee_quote = (self._clock(), fees)
        return dict(fees)

    def _fresh_fees(self) -> Steps[dict[str, int]]:
        latest = yield RPC.block("latest")
        if latest is not None and latest.get("gasLimit"):
            self._block_gas_limit = int(latest["gasLimit"])
        base_fee = latest.get("baseFeePerGas") if latest is not None else None
        if base_fee is None:
            return {"gasPrice": (yield RPC.gas_price())}
        tip = yield RPC.max_priority_fee()
        if tip is None:
            tip = 10**9  # nodes without eth_maxPriorityFeePerGas
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

    def ready_steps(self, sender: str) -> Steps[None]:
        """Fetch ahead what ``sender``'s next transaction needs besides its preflight (a fee quote, the nonce),
        so that the preflight is the last request before the transaction itself: a waiter that saw a
        resource free then shortens the moment in which another process's acquisition can pass its own
        preflight and still lose (``chainfence._sdk.waiting``). Both are the caches :meth:`transact_steps` uses."""
        yield from self.fees_steps()
        yield Locked(sender, self._nonce(sender))

    def _nonce(self, sender: str) -> Steps[int]:
        # Called with the sender's lock held.
        cached = self._next_nonce.get(sender)
        if cached is None:
            cached = yield RPC.nonce(sender, "pending")
            self._next_nonce[sender] = cached
        return cached

    def _sign_and_submit(self, sender: str, tx: dict[str, Any]) -> Steps[tuple[str, int]]:
        """Sign with the next nonce and get the node to accept it; returns (hash, nonce).

        Called with the sender's lock held, so nonces are handed out in order.
        """
        tx_hash, nonce, _mined = yield from self._sign_and_send(sender, tx, sync=False)
        return tx_hash, nonce

    def _presigned(self, sender: str, call: dict[str, Any]) -> _Presigned | None:
        """The transaction ``call`` will most likely be, to sign while its preflight is on its way (the
        transport runs it once the preflight is written: :data:`~chainfence._node.transports.Meanwhile`),
        or None where that cannot be known before the preflight's answer or the transport cannot overlap.

        Known beforehand on a dev node whose preflight is an ``eth_call`` (:meth:`preflight`): the gas
        (the ceiling, within the block's gas limit), the fees (the quote in use, if still fresh) and the
        nonce (the one counted for the sender, read without its lock). Nothing is decided by it:
        :meth:`_sign_and_send` uses the signature only if, under the sender's lock, the transaction it
        would sign (nonce included) is the one signed, field for field; signing is deterministic
        (RFC 6979), so the bytes sent are the bytes it would have signed. A signature not used (the
        preflight refused, or the nonce, the fees or the gas changed meanwhile) was never sent and is
        dropped: it takes no nonce and skips none.
        """
        if self._automine_probe is None or not getattr(getattr(self.rpc, "transport", None), "overlaps", False):
            return None
        nonce = self._next_nonce.get(sender)
        quote, limit = self._fee_quote, self._block_gas_limit
        if nonce is None or quote is None or not limit or self._clock() - quote[0] >= _FEE_QUOTE_SECONDS:
            return None
        signer = self.signers.get(sender)
        if signer is None:
            return None
        tx = dict(call, gas=min(DEV_GAS_LIMIT, limit), chainId=self.chain_id, **quote[1])
        tx["nonce"] = nonce
        return _Presigned(signer, tx)

    def _sign_and_send(
        self, sender: str, tx: dict[str, Any], *, sync: bool, presigned: _Presigned | None = None
    ) -> Steps[tuple[str, int, Any]]:
        """:meth:`_sign_and_submit`, returning (hash, nonce, receipt): the receipt when ``sync`` and the
        send returned it (``eth_sendRawTransactionSync``), else None. ``presigned``: a signature made
        while the preflight was on its way, used only if it signs exactly this transaction with the
        nonce it gets now (:meth:`_presigned`).

        Called with the sender's lock held, so nonces are handed out in order.
        """
        for attempt in range(_NONCE_ATTEMPTS):
            if attempt:
                import random  # only when another process took a nonce (start time: docs/explanation/design.md)

                yield Sleep(random.uniform(0, min(_NONCE_PAUSE * 2**attempt, _NONCE_PAUSE_CAP)))
            nonce = yield from self._nonce(sender)
            unsigned = dict(tx, nonce=nonce)
            signer = self.signers[sender]
            if presigned is not None and presigned.signed is not None and presigned.matches(signer, unsigned):
                signed = presigned.signed
            else:
                signed = sign(signer, unsigned)
            presigned = None  # a further attempt has another nonce
            tx_hash = signed.hash
            try:
                mined = yield from self._submit(signed.raw_transaction, tx_hash, sender=sender, nonce=nonce, sync=sync)
            except _NonceTaken:
                logger.debug("nonce %d of %s is taken; resynchronising", nonce, sender)
                self._next_nonce.pop(sender, None)
                continue
            except BaseException as error:
                self._next_nonce.pop(sender, None)  # in doubt: ask the node next time
                _mark(error, InFlight(sender, tx, tx_hash, nonce, delivered=False))
                raise
            self._next_nonce[sender] = nonce + 1
            return tx_hash, nonce, mined
        raise ChainError(
            f"could not find a free nonce for {sender} in {_NONCE_ATTEMPTS} attempts: another process keeps taking them"
        )

    def _submit(self, raw: bytes, tx_hash: str, *, sender: str, nonce: int, sync: bool = False) -> Steps[Any]:
        """Get ``raw`` (whose hash is ``tx_hash``) accepted by the node, or raise; returns its receipt when
        ``sync`` and the node's answer carried it (else None: the caller waits for it).

        ``sync``: send with ``eth_sendRawTransactionSync``, which answers once the transaction is mined.
        Every rule below holds for it unchanged: an answer that never came is "maybe delivered" and
        looked up by hash, a refusal is read only after asking whether our bytes are there (a node that
        gave up waiting for a block answers with an error although it holds them). A node that does not
        know the method did nothing: the same bytes then go out with ``eth_sendRawTransaction``, and
        the sender stops asking for it.

        Raises _NonceTaken when the nonce is used by another transaction (safe
        to re-sign: ours can never be mined), OutcomeUnknown when the node may
        hold our transaction but cannot say so.
        """
        delivered_maybe = False
        last_error: BaseException | None = None
        silent_since: float | None = None
        for attempt in range(1 + _RESENDS):
            if attempt:
                if silent_since is not None and self._clock() - silent_since >= self.unreachable_timeout:
                    break  # a node that hangs: resending tells nothing more (OutcomeUnknown below)
                yield Sleep(min(0.05 * 2**attempt, 1.0))
            try:
                if sync and not self._sync_refused:
                    try:
                        return (yield RPC.send_raw_sync(raw, sender=sender))
                    except RpcError as refused:
                        if refused.code not in _NO_SUCH_METHOD:
                            raise
                        self._sync_refused = True
                        logger.info("the node does not know eth_sendRawTransactionSync; sending without it")
                yield RPC.send_raw(raw, sender=sender)
                return None
            except NodeUnreachable as exc:
                if silent_since is None:
                    silent_since = self._clock()
                last_error = exc
                delivered_maybe = delivered_maybe or getattr(exc, "maybe_delivered", True)
                logger.warning(
                    "send of tx=%s nonce=%d failed in transit (%s); checking whether the node has it",
                    tx_hash,
                    nonce,
                    exc,
                )
                try:
                    if (yield from self._known(tx_hash)):
                        return None
                except NodeUnreachable as lookup_error:
                    last_error = lookup_error
                continue
            except InsufficientFunds:
                # The node says the sender cannot pay: nothing of ours is there, unless an earlier copy of
                # these bytes reached it (a lost reply), which a caller that re-signs for less would land
                # twice. Ask, as after any refusal.
                if delivered_maybe and (yield from self._known(tx_hash)):
                    return None
                raise
            except RpcError as refused:
                # The node answered. Before reading anything into its words, ask
                # whether our own bytes are there: a copy of them sent earlier
                # (by us after a late reply, or by anything between us and the
                # node) makes the node say "already known", "nonce too low" or a
                # phrase of its own, and re-signing then would be a second intent.
                text = refused.rpc_message.lower()
                if any(phrase in text for phrase in _ALREADY_KNOWN):
                    return None
                try:
                    ours = yield from self._known(tx_hash)
                except NodeUnreachable as lookup_error:
                    if delivered_maybe:  # an earlier copy may be in, and we cannot ask: say so
                        last_error = lookup_error
                        break
                    raise refused from lookup_error  # the only copy was refused: nothing was accepted
                if ours:
                    return None
                if any(phrase in text for phrase in _NONCE_USED):
                    raise _NonceTaken from refused
                raise
            except ChainfenceError as reverted:
                if not _is_revert(reverted):
                    raise
                # A revert in reply to a send: hardhat's node mines a transaction that reverts and answers its
                # send with the revert (its throwOnTransactionFailures). Ours is then in a block, mined with
                # status 0: the receipt says so, and the caller's error what the contract said, as elsewhere.
                try:
                    if (yield from self._known(tx_hash)):
                        return None
                except NodeUnreachable:
                    pass
                raise
        if not delivered_maybe:
            raise NodeUnreachable(f"the node did not answer; nothing was sent: {last_error}") from last_error
        raise OutcomeUnknown(
            f"transaction {tx_hash} (nonce {nonce} of {sender}) may have reached the node, which stopped "
            "answering; look it up before sending again",
            tx_hashes=(tx_hash,),
            nonce=nonce,
            sender=sender,
        ) from last_error

    def _known(self, tx_hash: str) -> Steps[bool]:
        return (yield RPC.transaction(tx_hash)) is not None

    # ------------------------------------------------------------------
    # Receipts, cancellation, confirmations
    # ------------------------------------------------------------------

    def _settle(
        self, sender: str, tx: dict[str, Any], tx_hash: str, nonce: int, confirmations: int, *, mined: Any = None
    ) -> Steps[Any]:
        """The receipt of whichever of the transaction and its cancellation the chain settled on.

        Returns the original's receipt (``confirmations`` deep); raises
        TransactionTimeout once a cancellation is that deep, OutcomeUnknown
        when neither can be established, NotConfirmed when the original is
        mined but not deep enough in time. ``mined``: the receipt the send
        returned, if it did (nothing to wait for then but the depth).
        """
        candidates: tuple[str, ...] = (tx_hash,)
        receipt = mined
        if receipt is None:
            receipt = yield from self._await_receipt(
                candidates, self.receipt_timeout, sender=sender, nonce=nonce, confirmations=confirmations
            )
        if receipt is None:
            logger.warning(
                "tx=%s nonce=%d not mined after %.1f s; sending a cancellation with the same nonce",
                tx_hash,
                nonce,
                self.receipt_timeout,
            )
            cancel_hash = yield from self._send_cancel(sender, tx, nonce)
            if cancel_hash is not None:
                candidates = (tx_hash, cancel_hash)
            else:  # the nonce is used already: by ours (its receipt), or by another's (it can never be mined)
                taken, receipt = yield from self._taken_steps(
                    candidates, sender=sender, nonce=nonce, confirmations=confirmations
                )
                if taken:
                    raise _Dropped(self._dropped(candidates, sender=sender, nonce=nonce, confirmations=confirmations))
            if receipt is None:
                try:
                    receipt = yield from self._await_receipt(
                        candidates, self.receipt_timeout, sender=sender, nonce=nonce, confirmations=confirmations
                    )
                except _Dropped as dropped:  # after its own timeout: said, not sent again
                    raise dropped.error from None
            if receipt is None:
                self._forget_nonce(sender)
                raise OutcomeUnknown(
                    f"neither transaction {tx_hash} nor its cancellation was mined within "
                    f"{2 * self.receipt_timeout:.0f} s; one of them may still be",
                    tx_hashes=candidates,
                    nonce=nonce,
                    sender=sender,
                )
        if confirmations > 0:
            receipt = yield from self._await_depth(candidates, receipt, confirmations, sender=sender, nonce=nonce)
        mined = receipt["transactionHash"].to_0x_hex()
        if mined != tx_hash:
            raise TransactionTimeout(
                f"transaction {tx_hash} was not mined within {self.receipt_timeout:.0f} s and was cancelled "
                f"by {mined} (same nonce {nonce}"
                + (f", {confirmations} blocks deep" if confirmations else "")
                + "): it can never execute; nothing happened",
                tx_hashes=candidates,
                nonce=nonce,
                sender=sender,
            )
        if len(candidates) > 1:
            logger.warning("tx=%s was mined after all (block %d)", tx_hash, receipt["blockNumber"])
        return receipt

    def abandon_steps(self, flight: InFlight) -> Steps[Any]:
        """Settle a transaction whose caller was interrupted: its receipt if it was (or now is) mined,
        None once a cancellation with its nonce was mined instead (it can never execute).

        Not the wait of :meth:`_settle`: the caller gave up, so a transaction not mined yet is cancelled
        at once (a zero-value transfer to itself with the same nonce and higher fees) and whichever of
        the two the chain mines decides, within the receipt timeout. Raises
        :class:`~chainfence.errors.OutcomeUnknown` when neither can be established.
        """
        sender, tx_hash, nonce = flight.sender, flight.tx_hash, flight.nonce
        try:
            receipt = yield RPC.receipt(tx_hash)
        except NodeUnreachable:
            receipt = None
        if receipt is not None:
            return receipt
        cancel_hash = yield from self._send_cancel(sender, flight.tx, nonce)
        candidates = (tx_hash, cancel_hash) if cancel_hash is not None else (tx_hash,)
        receipt = yield from self._await_receipt(candidates, self.receipt_timeout, sender=sender, nonce=nonce)
        if receipt is None:
            self._forget_nonce(sender)
            raise OutcomeUnknown(
                f"neither transaction {tx_hash} nor its cancellation was mined within {self.receipt_timeout:.0f} s; "
                "one of them may still be",
                tx_hashes=candidates,
                nonce=nonce,
                sender=sender,
            )
        mined = receipt["transactionHash"].to_0x_hex()
        if mined != tx_hash:
            logger.info("tx=%s cancelled by %s (nonce %d)", tx_hash, mined, nonce)
            return None
        return receipt

    def _forget_nonce(self, sender: str) -> None:
        with self._lock(sender):
            self._next_nonce.pop(sender, None)

    def _await_receipt(
        self, hashes: tuple[str, ...], timeout: float, *, sender: str, nonce: int, confirmations: int | None = None
    ) -> Steps[Any]:
        """The first receipt found for any of ``hashes`` within ``timeout`` seconds, else None.

        Raises OutcomeUnknown once the node has not answered for
        ``unreachable_timeout`` seconds: waiting longer tells nothing more.
        With ``confirmations`` (the depth asked), looks every :data:`_DROP_LOOK` seconds whether the
        nonce was used by another transaction that deep (:meth:`_taken_steps`): then none of ``hashes``
        can ever be mined, and :class:`~chainfence.errors.TransactionTimeout` says so at once (the node
        took ours and dropped it: another process sending as the account took its nonce), where waiting
        out this timeout and the cancellation's would end in OutcomeUnknown.
        """
        deadline = self._clock() + timeout
        look = self._clock() + _DROP_LOOK
        silent_since: float | None = None
        gap = min(_FIRST_POLL_GAP, self.poll_latency)
        while True:
            for tx_hash in hashes:
                try:
                    receipt = yield RPC.receipt(tx_hash)
                except NodeUnreachable as exc:
                    silent_since = self._silence(silent_since, exc, hashes, sender=sender, nonce=nonce)
                    break
                silent_since = None
                if receipt is not None:
                    return receipt
            if confirmations is not None and silent_since is None and self._clock() >= look:
                look = self._clock() + _DROP_LOOK
                taken, receipt = yield from self._taken_steps(
                    hashes, sender=sender, nonce=nonce, confirmations=confirmations
                )
                if receipt is not None:
                    return receipt
                if taken:
                    raise _Dropped(self._dropped(hashes, sender=sender, nonce=nonce, confirmations=confirmations))
            if self._clock() >= deadline:
                return None
            yield Sleep(gap)
            gap = min(2 * gap, self.poll_latency)

    def _taken_steps(
        self, hashes: tuple[str, ...], *, sender: str, nonce: int, confirmations: int
    ) -> Steps[tuple[bool, Any]]:
        """Whether ``sender``'s ``nonce`` was used by a transaction that is none of ``hashes``, ``confirmations``
        blocks deep: then none of them can ever be mined. (taken, None), or (False, the receipt of one of
        ``hashes`` mined meanwhile). The account's nonce is read first, then each candidate: one mined
        before that read is found by the second; a node that cannot say is not taken."""
        try:
            if confirmations:
                head = yield RPC.block_number()
                used = yield RPC.nonce(sender, max(head - confirmations, 0))
            else:
                used = yield RPC.nonce(sender, "latest")
            if used <= nonce:
                return False, None
            for tx_hash in hashes:
                receipt = yield RPC.receipt(tx_hash)
                if receipt is not None:
                    return False, receipt
                known = yield RPC.transaction(tx_hash)
                if known is not None and known.get("blockNumber") is not None:
                    return False, None  # the node says mined, without a receipt yet: it is not ours to judge
        except NodeUnreachable:
            return False, None
        return True, None

    def _dropped(self, hashes: tuple[str, ...], *, sender: str, nonce: int, confirmations: int) -> TransactionTimeout:
        """The error for transactions none of which can be mined: their nonce was used by another."""
        self._forget_nonce(sender)
        deep = f", {confirmations} blocks deep" if confirmations else ""
        logger.warning(
            "tx=%s nonce=%d of %s: the nonce was used by another transaction%s", hashes[0], nonce, sender, deep
        )
        return TransactionTimeout(
            f"transaction {hashes[0]} was not mined: nonce {nonce} of {sender} was used by another transaction"
            f"{deep} (another process sending as {sender}; the node dropped ours): it can never execute; "
            "nothing happened",
            tx_hashes=hashes,
            nonce=nonce,
            sender=sender,
        )

    def _silence(
        self, since: float | None, exc: NodeUnreachable, hashes: tuple[str, ...], *, sender: str, nonce: int
    ) -> float:
        """Track how long the node has been silent; raise OutcomeUnknown past ``unreachable_timeout``."""
        now = self._clock()
        if since is None:
            logger.warning("the node stopped answering while waiting for tx=%s: %s", hashes[0], exc)
            return now
        if now - since >= self.unreachable_timeout:
            self._forget_nonce(sender)
            raise OutcomeUnknown(
                f"the node stopped answering for {now - since:.0f} s while transaction "
                + " / ".join(hashes)
                + f" (nonce {nonce} of {sender}) was in flight: it may or may not be mined; "
                "look the hashes up before acting again",
                tx_hashes=hashes,
                nonce=nonce,
                sender=sender,
            ) from exc
        return since

    def _send_cancel(self, sender: str, original: dict[str, Any], nonce: int) -> Steps[str | None]:
        """Send a replacement that does nothing; returns its hash (None if the nonce is already mined)."""
        fees: dict[str, int] = {
            k: original[k] for k in ("maxFeePerGas", "maxPriorityFeePerGas", "gasPrice") if k in original
        }
        try:
            current = yield from self._fresh_fees()
        except ChainfenceError:
            current = fees
        for _attempt in range(3):
            fees = {k: max(v, current.get(k, 0)) for k, v in self.bump(fees).items()}
            cancel = {
                "from": sender,
                "to": sender,
                "value": 0,
                "data": b"",
                "gas": 21_000,
                "nonce": nonce,
                "chainId": self.chain_id,
                **fees,
            }
            signed = sign(self.signers[sender], cancel)
            cancel_hash = signed.hash
            try:
                yield RPC.send_raw(signed.raw_transaction, sender=sender)
                return cancel_hash
            except NodeUnreachable:
                return cancel_hash  # it may have gone out: keep it a candidate
            except RpcError as refused:
                text = refused.rpc_message.lower()
                if any(phrase in text for phrase in _ALREADY_KNOWN):
                    return cancel_hash
                if any(
                    phrase in text
                    for phrase in ("nonce too low", "nonce has already been used", "invalid transaction nonce")
                ):
                    return None
                if "underpriced" in text:
                    continue
                logger.warning("cancellation of nonce %d refused: %s", nonce, refused)
                return None
            except ChainfenceError as refused:
                logger.warning("cancellation of nonce %d refused: %s", nonce, refused)
                return None
        return None

    def _await_depth(
        self, candidates: tuple[str, ...], receipt: Any, confirmations: int, *, sender: str, nonce: int
    ) -> Steps[Any]:
        """Wait until one of ``candidates`` is mined with ``confirmations`` blocks on top, following reorgs.

        ``receipt`` is the inclusion seen so far. Every candidate is watched:
        a reorg may drop the one seen and include another (the original
        instead of its cancellation, or the reverse).
        """
        original = candidates[0]
        deadline = self._clock() + self.confirmation_timeout
        silent_since: float | None = None
        last = receipt
        vanished = False
        top = -1  # the highest head seen
        while True:
            try:
                head = yield RPC.block_number()
                top = max(top, head)
                found = None
                for tx_hash in candidates:
                    found = yield RPC.receipt(tx_hash)
                    if found is not None:
                        break
                silent_since = None
            except NodeUnreachable as exc:
                silent_since = self._silence_during_depth(
                    silent_since, exc, candidates, last, confirmations, sender=sender, nonce=nonce
                )
                found, head = None, -1
            else:
                if found is None:
                    vanished = True  # reorganised out; it (or the other candidate) may be included again
                else:
                    if found["blockHash"] != last["blockHash"]:
                        logger.warning(
                            "tx=%s moved from block %d to %d (reorg)",
                            found["transactionHash"].to_0x_hex(),
                            last["blockNumber"],
                            found["blockNumber"],
                        )
                    last, vanished = found, False
                    if head - found["blockNumber"] >= confirmations:
                        return found
            if self._clock() >= deadline:
                error = self._not_deep(original, candidates, last, confirmations, vanished, sender=sender, nonce=nonce)
                if top == last["blockNumber"]:
                    error.add_note(
                        f"no block came on top of block {top} in {self.confirmation_timeout:g} s: a node that mines "
                        "only when it is sent a transaction (anvil or hardhat without a block time) makes none of "
                        "itself; ask for 0 confirmations there"
                    )
                raise error
            yield Sleep(self.poll_latency)

    def _silence_during_depth(
        self,
        since: float | None,
        exc: NodeUnreachable,
        candidates: tuple[str, ...],
        last: Any,
        confirmations: int,
        *,
        sender: str,
        nonce: int,
    ) -> float:
        now = self._clock()
        if since is None:
            logger.warning("the node stopped answering while confirming tx=%s: %s", candidates[0], exc)
            return now
        if now - since >= self.unreachable_timeout:
            error = self._not_deep(candidates[0], candidates, last, confirmations, False, sender=sender, nonce=nonce)
            error.add_note(f"the node stopped answering for {now - since:.0f} s")
            raise error from exc
        return since

    def _not_deep(
        self,
        original: str,
        candidates: tuple[str, ...],
        last: Any,
        confirmations: int,
        vanished: bool,
        *,
        sender: str,
        nonce: int,
    ) -> ChainfenceError:
        mined = last["transactionHash"].to_0x_hex()
        where = " (it was reorganised out of the chain)" if vanished else ""
        if mined == original:
            # Mined but shallow, or seen mined and then gone (it may come back): the caller
            # gets the receipt it was seen with, so an acquisition is never forgotten.
            return NotConfirmed(
                f"transaction {original} is not {confirmations} blocks deep after "
                f"{self.confirmation_timeout:.0f} s{where}",
                receipt=last,
                confirmations=confirmations,
                tx_hashes=candidates,
                nonce=nonce,
                sender=sender,
            )
        self._forget_nonce(sender)
        return OutcomeUnknown(
            f"the cancellation {mined} of transaction {original} (nonce {nonce}) was mined but is not "
            f"{confirmations} blocks deep after {self.confirmation_timeout:.0f} s{where}: a reorg could still "
            "put the original in its place",
            tx_hashes=candidates,
            nonce=nonce,
            sender=sender,
        )

    # ------------------------------------------------------------------
    # Errors
    # ------------------------------------------------------------------

    def failure(self, call: dict[str, Any], receipt: Any) -> Steps[ChainfenceError]:
        """The error for a transaction mined with status 0: the one the contract raised in it.

        Where the node traces transactions (``debug_traceTransaction``: anvil, geth, reth), the revert
        data of the transaction as it ran, at its own place in its block. Elsewhere the call is
        replayed: on the including block first (its own time, and the state with every transaction of
        the block: a competitor mined before it in the same block is what made a preflight-approved
        call revert), then on the parent block's (the state before the block, at the parent's time:
        a transaction later in the same block may have undone the cause). The parent's time alone
        would misname a refusal that depends on the time: a lease that expired between the two blocks
        reads as still held there, so an acquisition refused in its lock-delay would say ``LeaseHeld``.
        """
        tx_hash = receipt["transactionHash"].to_0x_hex()
        where = f"transaction {tx_hash} was mined with status 0 in block {receipt['blockNumber']}"
        try:
            data = yield RPC.traced_revert(receipt["transactionHash"])
        except (NodeUnreachable, RpcError, NotSupported):
            data = None  # no debug namespace (eth-tester, most providers), or no state to trace: replay
        if data is not None:
            error = decode_revert(data)
            error.add_note(f"{where} (reason from the node's trace of it)")
            return error
        for block in (receipt["blockNumber"], receipt["blockNumber"] - 1):
            try:
                yield RPC.call(call, block)
            except (NodeUnreachable, RpcError):
                continue  # the node cannot replay at that block (pruned state): try the next
            except ChainfenceError as error:
                if type(error) is ChainError:
                    continue  # not a revert: nothing learned
                error.add_note(where)
                return error
        return TransactionFailed(
            f"transaction {tx_hash} was mined with status 0 (gas used {receipt['gasUsed']}); "
            "no revert reason could be recovered",
            tx_hash=tx_hash,
            receipt=receipt,
        )
