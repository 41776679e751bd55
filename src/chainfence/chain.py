"""A connection to an EVM chain that can send transactions for the accounts it holds keys for.

Two ways in::

    chain = Chain.embedded()                        # in-process eth-tester/py-evm, 10 funded accounts
    chain = Chain.connect(url, private_key=key)     # any EVM JSON-RPC node

Both send every transaction the same way: signed locally with eth-account,
EIP-1559 fees where the chain has a base fee (legacy otherwise), gas
estimated first at the ``pending`` block (so a revert surfaces as a typed
error before anything is sent), one locked nonce counter per address, and
the receipt's status checked: a transaction mined with status 0 is never
silent.

Chain time is block time. ``chain.now()`` is the latest block's timestamp;
on dev chains ``advance_time`` mines a block at ``now() + seconds``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import TimeExhausted
from web3.providers.eth_tester import EthereumTesterProvider

from . import _reverts, _validate
from .errors import (
    ChainError,
    ChainfenceError,
    InvalidInput,
    NodeUnreachable,
    NotSupported,
    TransactionFailed,
    UnknownAccount,
)

logger = logging.getLogger(__name__)

__all__ = ["Chain"]

#: Gas headroom over the estimate: covers state that moves between estimate
#: and inclusion (e.g. a resource's first acquisition racing another).
_GAS_MARGIN_NUM, _GAS_MARGIN_DEN = 5, 4

#: Gas limit of every transaction on the embedded chain, where gas is free and
#: estimates are unreliable (see Chain._preflight). Above any registry operation.
_EMBEDDED_GAS_LIMIT = 3_000_000

_NONCE_ERRORS = ("nonce too low", "nonce too high", "already known", "replacement transaction underpriced")


class _LockedEthereumTesterProvider(EthereumTesterProvider):
    """eth-tester is not thread-safe; serialise every request to it."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._request_lock = threading.RLock()

    def make_request(self, method, params):  # type: ignore[override]
        with self._request_lock:
            return super().make_request(method, params)


class Chain:
    """An EVM chain plus the keys to send transactions on it.

    Use :meth:`embedded` or :meth:`connect` rather than the constructor.

    Attributes:
        w3: the underlying :class:`web3.Web3`, for anything the SDK does not wrap.
        accounts: the addresses this chain can sign for, in the order given.
        chain_id: the chain's EIP-155 id.
    """

    def __init__(
        self,
        w3: Web3,
        keys: Iterable[LocalAccount],
        *,
        dev: str | None,
        receipt_timeout: float = 120.0,
        poll_latency: float = 0.1,
        eth_tester: Any = None,
    ):
        self.w3 = w3
        self._signers: dict[str, LocalAccount] = {}
        self.accounts: list[str] = []
        for key in keys:
            self._add(key)
        self._dev = dev
        self._eth_tester = eth_tester
        self._receipt_timeout = receipt_timeout
        self._poll_latency = poll_latency
        self._nonce_locks: dict[str, threading.Lock] = {}
        self._next_nonce: dict[str, int] = {}
        self._locks_lock = threading.Lock()
        try:
            self.chain_id: int = w3.eth.chain_id
        except Exception as exc:
            raise NodeUnreachable(f"cannot read the chain id: {exc}") from exc

    # ------------------------------------------------------------------
    # Construction
    # ------------------------------------------------------------------

    @classmethod
    def embedded(cls, *, accounts: int = 10) -> Chain:
        """A fresh in-process chain (eth-tester on py-evm) with ``accounts`` funded dev accounts.

        Each transaction is mined in its own block exactly one second after
        the previous one, whatever the wall clock says; :meth:`advance_time`
        jumps ahead. Nothing leaves the process.
        """
        from eth_tester import EthereumTester, PyEVMBackend
        from eth_tester.backends.pyevm.main import get_default_account_keys

        class LogicalClockBackend(PyEVMBackend):
            """py-evm stamps each new block max(parent + 1, wall clock), taken when the
            previous block is mined or a snapshot restored: chain time would jump to
            the wall clock after a revert or a slow test. Restamp the block being
            built to parent + 1 so time moves only by blocks and by advance_time."""

            def mine_blocks(self, num_blocks=1, coinbase=None):  # type: ignore[override]
                mined: list[bytes] = []
                for _ in range(num_blocks):
                    mined.extend(super().mine_blocks(1) if coinbase is None else super().mine_blocks(1, coinbase))
                    self._restamp()
                return tuple(mined)

            def revert_to_snapshot(self, snapshot):  # type: ignore[override]
                super().revert_to_snapshot(snapshot)
                self._restamp()

            def _restamp(self) -> None:
                parent = self.chain.get_canonical_head()
                self.chain.header = self.chain.header.copy(timestamp=parent.timestamp + 1)

        if isinstance(accounts, bool) or not isinstance(accounts, int) or not 1 <= accounts <= 100:
            raise InvalidInput(f"accounts must be an int from 1 to 100, got {accounts!r}")
        keys = list(get_default_account_keys(accounts))
        state = PyEVMBackend.generate_genesis_state(num_accounts=accounts)
        # A random extra_data makes every embedded chain's genesis hash unique
        # (otherwise two chains started in the same second are identical), so
        # state tied to a chain, like a guard's store, can tell them apart.
        params = PyEVMBackend.generate_genesis_params(overrides={"extra_data": os.urandom(32)})
        tester = EthereumTester(LogicalClockBackend(genesis_parameters=params, genesis_state=state))
        w3 = Web3(_LockedEthereumTesterProvider(tester))
        signers = [Account.from_key(k.to_bytes()) for k in keys]
        return cls(w3, signers, dev="eth-tester", receipt_timeout=5.0, poll_latency=0.01, eth_tester=tester)

    @classmethod
    def connect(
        cls,
        url: str,
        private_key: str | bytes | None = None,
        *,
        private_keys: Sequence[str | bytes] = (),
        request_timeout: float = 10.0,
        receipt_timeout: float = 120.0,
        poll_latency: float = 0.1,
    ) -> Chain:
        """Connect to an EVM JSON-RPC node over HTTP(S).

        Transactions are signed locally with ``private_key`` (and any
        ``private_keys``); the node's own unlocked accounts are never used.
        Keys come from the environment or a keystore, never a command line.
        """
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInput(f"url must be an http:// or https:// JSON-RPC endpoint, got {url!r}")
        keys = ([private_key] if private_key is not None else []) + list(private_keys)
        signers = [_load_key(k) for k in keys]
        provider = Web3.HTTPProvider(url, request_kwargs={"timeout": request_timeout})
        w3 = Web3(provider)
        try:
            client = w3.client_version
        except Exception as exc:
            raise NodeUnreachable(f"no JSON-RPC node answers at {url}: {exc}") from exc
        dev = next((name for name in ("anvil", "hardhat", "ganache") if name in client.lower()), None)
        return cls(w3, signers, dev=dev, receipt_timeout=receipt_timeout, poll_latency=poll_latency)

    def _add(self, key: LocalAccount) -> str:
        address = key.address
        if address not in self._signers:
            self._signers[address] = key
            self.accounts.append(address)
        return address

    def add_account(self, private_key: str | bytes | LocalAccount) -> str:
        """Hold a further key; returns its address."""
        key = private_key if isinstance(private_key, LocalAccount) else _load_key(private_key)
        return self._add(key)

    # ------------------------------------------------------------------
    # Time and dev-chain controls
    # ------------------------------------------------------------------

    @property
    def is_dev(self) -> bool:
        """Whether this chain supports time travel and snapshots (eth-tester, anvil, hardhat)."""
        return self._dev is not None

    def now(self) -> int:
        """Chain time: the latest block's timestamp, in seconds."""
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def advance_time(self, seconds: int) -> int:
        """Move chain time ``seconds`` forward and mine a block there; returns the new :meth:`now`.

        Dev chains only (embedded, anvil). Views at ``latest`` see the new
        time at once; the next transaction is mined after it.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
            raise InvalidInput(f"seconds must be an int >= 0, got {seconds!r}")
        target = self.now() + seconds
        if self._eth_tester is not None:
            if seconds > 0:
                # eth-tester's time_travel(T) mines a block at T - 1 (the next is T).
                self._time_travel(target + 1)
            return self.now()
        self._require_dev("advance_time")
        if seconds > 0:
            self._rpc("evm_setNextBlockTimestamp", [target])
            self._rpc("evm_mine", [])
        return self.now()

    def set_next_block_time(self, timestamp: int) -> None:
        """Make the next mined block carry ``timestamp`` (dev chains only).

        For tests at exact boundaries ("acquire at the very second the lease
        expires"). On the embedded chain this mines one empty block at
        ``timestamp - 1`` unless that block would not be new.
        """
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise InvalidInput(f"timestamp must be an int, got {timestamp!r}")
        latest = self.now()
        if timestamp <= latest:
            raise InvalidInput(f"timestamp {timestamp} is not after the latest block's ({latest})")
        if self._eth_tester is not None:
            if timestamp > latest + 1:  # latest + 1 is what eth-tester mines next anyway
                self._time_travel(timestamp)
            return
        self._require_dev("set_next_block_time")
        self._rpc("evm_setNextBlockTimestamp", [timestamp])

    def _time_travel(self, timestamp: int) -> None:
        from eth_tester.exceptions import ValidationError

        try:
            self._eth_tester.time_travel(timestamp)
        except ValidationError as exc:
            raise InvalidInput(f"the embedded chain cannot move to timestamp {timestamp}: {exc}") from None

    def mine(self, blocks: int = 1) -> None:
        """Mine ``blocks`` empty blocks (dev chains only)."""
        if self._eth_tester is not None:
            self._eth_tester.mine_blocks(blocks)
            return
        self._require_dev("mine")
        for _ in range(blocks):
            self._rpc("evm_mine", [])

    def snapshot(self) -> Any:
        """Save the chain state (dev chains only); restore it with :meth:`revert`."""
        if self._eth_tester is not None:
            return self._eth_tester.take_snapshot()
        self._require_dev("snapshot")
        return self._rpc("evm_snapshot", [])

    def revert(self, snapshot: Any) -> None:
        """Restore a :meth:`snapshot`. Forgets cached nonces, which the revert rewinds."""
        if self._eth_tester is not None:
            self._eth_tester.revert_to_snapshot(snapshot)
        else:
            self._require_dev("revert")
            if not self._rpc("evm_revert", [snapshot]):
                raise ChainError(f"the node refused to revert to snapshot {snapshot!r}")
        with self._locks_lock:
            self._next_nonce.clear()

    def _require_dev(self, what: str) -> None:
        if self._dev is None:
            raise NotSupported(f"{what} needs a dev chain (embedded, anvil, hardhat); this node is not one")

    def _rpc(self, method: str, params: list[Any]) -> Any:
        response = self.w3.provider.make_request(method, params)
        if "error" in response:
            raise ChainError(f"{method} failed: {response['error']}")
        return response.get("result")

    # ------------------------------------------------------------------
    # Sending transactions
    # ------------------------------------------------------------------

    def signer(self, account: object) -> str:
        """The checksummed address of ``account``; raises if this chain holds no key for it."""
        if isinstance(account, LocalAccount):
            return self._add(account)
        address = _validate.address(account, "account")
        if address not in self._signers:
            raise UnknownAccount(f"this chain holds no private key for {address}")
        return address

    def transact(
        self,
        sender: str,
        to: str | None,
        data: bytes,
        *,
        resource: str | None = None,
        gas: int | None = None,
    ) -> Any:
        """Send ``data`` to ``to`` from ``sender``; return the receipt of a successful transaction.

        Raises the decoded chainfence error if the call reverts, at
        estimation (nothing sent) or after mining (status 0, reason recovered
        by replaying the call at the parent block). ``gas`` skips the
        estimate (tests use it to mine a failing transaction).
        """
        sender = self.signer(sender)
        call: dict[str, Any] = {"from": sender, "data": data, "value": 0}
        if to is not None:  # None: contract creation
            call["to"] = to
        if gas is None:
            gas = self._preflight(call, resource)
        tx = dict(call, gas=gas, chainId=self.chain_id, **self._fees())

        lock = self._nonce_lock(sender)
        with lock:
            for attempt in (1, 2):
                nonce = self._nonce(sender)
                signed = self._signers[sender].sign_transaction(dict(tx, nonce=nonce))
                try:
                    tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
                except Exception as exc:
                    if attempt == 1 and any(s in str(exc).lower() for s in _NONCE_ERRORS):
                        logger.debug("nonce %d for %s rejected (%s); resynchronising", nonce, sender, exc)
                        self._next_nonce.pop(sender, None)
                        continue
                    self._next_nonce.pop(sender, None)
                    raise self._translate(exc, resource) from exc
                self._next_nonce[sender] = nonce + 1
                break
        logger.debug("sent tx=%s from=%s nonce=%d gas=%d", tx_hash.to_0x_hex(), sender, nonce, gas)

        try:
            receipt = self.w3.eth.wait_for_transaction_receipt(
                tx_hash, timeout=self._receipt_timeout, poll_latency=self._poll_latency
            )
        except TimeExhausted as exc:
            raise ChainError(
                f"transaction {tx_hash.to_0x_hex()} not mined within {self._receipt_timeout} s"
            ) from exc
        if receipt["status"] != 1:
            raise self._failure(call, receipt, resource)
        return receipt

    def _preflight(self, call: dict[str, Any], resource: str | None) -> int:
        """Run ``call`` on the block being built; raise its decoded revert, else return a gas limit.

        On JSON-RPC nodes this is ``eth_estimateGas`` at ``pending``: the
        block the transaction will join. eth-tester cannot estimate at
        ``pending`` and its ``latest`` estimate runs on a fresh header stamped
        with the wall clock (not the chain's clock), so there the preflight is
        an ``eth_call`` at ``pending`` and the gas limit a fixed ceiling.
        """
        try:
            if self._eth_tester is not None:
                self.w3.eth.call(call, block_identifier="pending")
                return _EMBEDDED_GAS_LIMIT
            estimate = self.w3.eth.estimate_gas(call, block_identifier="pending")
        except Exception as exc:
            raise self._translate(exc, resource) from exc
        return estimate * _GAS_MARGIN_NUM // _GAS_MARGIN_DEN

    def call(self, to: str, data: bytes, *, block: str | int = "latest", resource: str | None = None) -> bytes:
        """``eth_call`` of ``data`` at ``block``; reverts raise the decoded chainfence error."""
        try:
            return bytes(self.w3.eth.call({"to": to, "data": data}, block_identifier=block))
        except Exception as exc:
            raise self._translate(exc, resource) from exc

    def _fees(self) -> dict[str, int]:
        latest = self.w3.eth.get_block("latest")
        base_fee = latest.get("baseFeePerGas")
        if base_fee is None:
            return {"gasPrice": self.w3.eth.gas_price}
        try:
            tip = self.w3.eth.max_priority_fee
        except Exception:
            tip = 10**9
        return {"maxFeePerGas": 2 * base_fee + tip, "maxPriorityFeePerGas": tip}

    def _nonce_lock(self, sender: str) -> threading.Lock:
        with self._locks_lock:
            return self._nonce_locks.setdefault(sender, threading.Lock())

    def _nonce(self, sender: str) -> int:
        # Called with the sender's lock held.
        cached = self._next_nonce.get(sender)
        if cached is None:
            cached = self.w3.eth.get_transaction_count(sender, "pending")
            self._next_nonce[sender] = cached
        return cached

    def _failure(self, call: dict[str, Any], receipt: Any, resource: str | None) -> ChainfenceError:
        """The error for a transaction mined with status 0."""
        tx_hash = receipt["transactionHash"].to_0x_hex()
        try:
            self.w3.eth.call(call, block_identifier=receipt["blockNumber"] - 1)
        except Exception as exc:
            error = _reverts.translate(exc, resource=resource)
            if error is not None:
                error.__notes__ = [f"transaction {tx_hash} was mined with status 0"]
                return error
        gas_note = " (it used all its gas)" if receipt["gasUsed"] >= call.get("gas", 2**64) else ""
        return TransactionFailed(
            f"transaction {tx_hash} was mined with status 0{gas_note}; no revert reason could be recovered",
            tx_hash=tx_hash,
            receipt=receipt,
        )

    @staticmethod
    def _translate(exc: BaseException, resource: str | None) -> ChainfenceError:
        error = _reverts.translate(exc, resource=resource)
        if error is not None:
            return error
        text = str(exc)
        if "insufficient funds" in text.lower():
            return ChainError(f"insufficient funds: {text}")
        if isinstance(exc, (ConnectionError, OSError)) or "Connection" in type(exc).__name__:
            return NodeUnreachable(f"the node did not answer: {text}")
        return ChainError(f"{type(exc).__name__}: {text}")

    def __repr__(self) -> str:
        kind = self._dev or "node"
        return f"<Chain {kind} chain_id={self.chain_id} accounts={len(self.accounts)}>"


def _load_key(key: object) -> LocalAccount:
    if isinstance(key, LocalAccount):
        return key
    try:
        return Account.from_key(key)
    except Exception:
        # Never echo the key itself.
        raise InvalidInput("private_key is not a valid secp256k1 private key (32 bytes, hex)") from None
