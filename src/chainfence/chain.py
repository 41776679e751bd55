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
from web3.providers.eth_tester import EthereumTesterProvider

from . import _validate
from ._sending import Sender
from .errors import (
    ChainError,
    InvalidInput,
    NodeUnreachable,
    NotSupported,
    UnknownAccount,
    WrongChain,
)

logger = logging.getLogger(__name__)

__all__ = ["Chain"]

#: Confirmations of a chain that is not a dev chain, unless told otherwise:
#: enough to ride out the common one- and two-block reorgs. See the README.
DEFAULT_CONFIRMATIONS = 3


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
        confirmations: int = 0,
        receipt_timeout: float = 120.0,
        confirmation_timeout: float = 600.0,
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
        self.confirmations = _confirmations(confirmations)
        try:
            self.chain_id: int = w3.eth.chain_id
        except Exception as exc:
            raise NodeUnreachable(f"cannot read the chain id: {exc}") from exc
        self._sender = Sender(
            w3,
            self._signers,
            self.chain_id,
            embedded=eth_tester is not None,
            receipt_timeout=receipt_timeout,
            poll_latency=poll_latency,
            confirmation_timeout=confirmation_timeout,
        )

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
        return cls(
            w3, signers, dev="eth-tester", receipt_timeout=5.0, confirmation_timeout=5.0, poll_latency=0.01,
            eth_tester=tester,
        )  # fmt: skip

    @classmethod
    def connect(
        cls,
        url: str,
        private_key: str | bytes | None = None,
        *,
        private_keys: Sequence[str | bytes] = (),
        chain_id: int | None = None,
        confirmations: int | None = None,
        request_timeout: float = 10.0,
        receipt_timeout: float = 120.0,
        confirmation_timeout: float = 600.0,
        poll_latency: float = 0.1,
    ) -> Chain:
        """Connect to an EVM JSON-RPC node over HTTP(S).

        Transactions are signed locally with ``private_key`` (and any
        ``private_keys``); the node's own unlocked accounts are never used.
        Keys come from the environment or a keystore, never a command line.

        ``chain_id``: refuse a node that serves another chain
        (:class:`~chainfence.errors.WrongChain`). ``confirmations``: blocks on
        top of a transaction's block before it counts (default 0 on dev
        chains, :data:`DEFAULT_CONFIRMATIONS` elsewhere). ``receipt_timeout``:
        seconds to wait for inclusion before cancelling (see
        :mod:`chainfence._sending`).
        """
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInput(f"url must be an http:// or https:// JSON-RPC endpoint, got {url!r}")
        if chain_id is not None and (isinstance(chain_id, bool) or not isinstance(chain_id, int) or chain_id < 1):
            raise InvalidInput(f"chain_id must be a positive int, got {chain_id!r}")
        for name, value in (("request_timeout", request_timeout), ("receipt_timeout", receipt_timeout),
                            ("confirmation_timeout", confirmation_timeout), ("poll_latency", poll_latency)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise InvalidInput(f"{name} must be a positive number of seconds, got {value!r}")
        keys = ([private_key] if private_key is not None else []) + list(private_keys)
        signers = [_load_key(k) for k in keys]
        # cache_allowed_requests: web3 asks eth_chainId before every estimate
        # and call; the answer cannot change under a connection we checked.
        provider = Web3.HTTPProvider(url, request_kwargs={"timeout": request_timeout}, cache_allowed_requests=True)
        w3 = Web3(provider)
        try:
            client = w3.client_version
            actual_chain_id = w3.eth.chain_id
        except Exception as exc:
            raise NodeUnreachable(f"no JSON-RPC node answers at {url}: {exc}") from exc
        if chain_id is not None and actual_chain_id != chain_id:
            raise WrongChain(f"the node at {url} serves chain {actual_chain_id}, not chain {chain_id}")
        dev = next((name for name in ("anvil", "hardhat", "ganache") if name in client.lower()), None)
        if confirmations is None:
            confirmations = 0 if dev else DEFAULT_CONFIRMATIONS
        return cls(
            w3,
            signers,
            dev=dev,
            confirmations=confirmations,
            receipt_timeout=receipt_timeout,
            confirmation_timeout=confirmation_timeout,
            poll_latency=poll_latency,
        )

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
        self._sender.forget_nonces()

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

    def key_of(self, account: object) -> LocalAccount:
        """The key this chain holds for ``account`` (to sign fenced requests as it)."""
        return self._signers[self.signer(account)]

    def transact(
        self,
        sender: str,
        to: str | None,
        data: bytes,
        *,
        resource: str | None = None,
        gas: int | None = None,
        confirmations: int | None = None,
    ) -> Any:
        """Send ``data`` to ``to`` from ``sender``; return the receipt once it counts.

        See :mod:`chainfence._sending` for the journey: preflight (a revert
        raises its typed error and nothing is sent), local signing under a
        per-sender nonce lock, submission that reconciles lost replies by
        hash, a bounded wait that cancels on timeout, ``confirmations``
        blocks on top (default: the chain's), and the status check.
        ``gas`` skips the preflight (tests use it to mine a failing
        transaction).
        """
        sender = self.signer(sender)
        k = self.confirmations if confirmations is None else _confirmations(confirmations)
        call: dict[str, Any] = {"from": sender, "data": data, "value": 0}
        if to is not None:  # None: contract creation
            call["to"] = to
        return self._sender.transact(sender, call, gas=gas, resource=resource, confirmations=k)

    def call(self, to: str, data: bytes, *, block: str | int = "latest", resource: str | None = None) -> bytes:
        """``eth_call`` of ``data`` at ``block``; reverts raise the decoded chainfence error."""
        try:
            return bytes(self.w3.eth.call({"to": to, "data": data}, block_identifier=block))
        except Exception as exc:
            raise self._sender.translate(exc, resource) from exc

    def block_number(self) -> int:
        """The latest block's number."""
        try:
            return self.w3.eth.block_number
        except Exception as exc:
            raise self._sender.translate(exc, None) from exc

    def confirmed_block(self, confirmations: int | None = None) -> int:
        """The newest block with ``confirmations`` blocks on top of it (default: the chain's setting)."""
        k = self.confirmations if confirmations is None else _confirmations(confirmations)
        return max(0, self.block_number() - k)

    def __repr__(self) -> str:
        kind = self._dev or "node"
        return f"<Chain {kind} chain_id={self.chain_id} accounts={len(self.accounts)}>"


def _confirmations(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000:
        raise InvalidInput(f"confirmations must be an int from 0 to 1000, got {value!r}")
    return value


def _load_key(key: object) -> LocalAccount:
    if isinstance(key, LocalAccount):
        return key
    try:
        return Account.from_key(key)
    except Exception:
        # Never echo the key itself.
        raise InvalidInput("private_key is not a valid secp256k1 private key (32 bytes, hex)") from None
