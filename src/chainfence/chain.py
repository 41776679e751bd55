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

Chain time is block time. ``chain.now()`` is what a verifier may call the
time now: the timestamp the next block will carry (the node's pending
block, where it offers one; else the latest block's), and, on a chain that
is not a dev chain, never earlier than this machine's clock. A lease is
judged against it, so a lease is never reported live once its expiry has
passed by the chain's time or by the verifier's own, even when no block was
mined since (anvil between transactions, any chain with sparse blocks).
``chain.latest_time()`` is the latest block's timestamp. On dev chains
``advance_time`` mines a block at ``now() + seconds``.

Dev chains keep a clock of their own that tests move on purpose (time
travel, snapshots that take it back), so there the node's pending block is
the clock and the machine's plays no part: anvil's pending block runs with
real time from wherever the chain's clock stands; the embedded chain's
clock is logical (blocks one second apart, ``advance_time`` to jump).

Every JSON-RPC request goes through ``chain.rpc`` (:mod:`chainfence._node.rpc`),
which turns every failure into a chainfence error.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount

from . import _validate
from ._effects import RPC, Steps
from ._node.rpc import Rpc, connect_http, embedded_web3, redact_url, unreachable_message
from ._node.sending import Sender
from .errors import (
    ChainError,
    ChainfenceError,
    ExtraNotInstalled,
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


class Chain:
    """An EVM chain plus the keys to send transactions on it.

    Use :meth:`embedded` or :meth:`connect` rather than the constructor.

    Attributes:
        w3: the underlying :class:`web3.Web3`, for anything the SDK does not wrap.
        rpc: the SDK's own JSON-RPC layer over ``w3`` (typed errors, no hidden resends).
        accounts: the addresses this chain can sign for, in the order given.
        chain_id: the chain's EIP-155 id.
        clock: the verifier's own clock (seconds since the epoch), taken into
            :meth:`now` on chains that are not dev chains. Default :func:`time.time`.
    """

    def __init__(
        self,
        w3: Any,
        keys: Iterable[LocalAccount],
        *,
        dev: str | None,
        confirmations: int = 0,
        receipt_timeout: float = 120.0,
        confirmation_timeout: float = 600.0,
        poll_latency: float = 0.1,
        unreachable_timeout: float | None = None,
        eth_tester: Any = None,
        clock: Callable[[], float] = time.time,
        rpc: Any = None,
        chain_id: int | None = None,
    ):
        # ``rpc`` and ``chain_id``: an asyncio chain (chainfence.aio) builds its core here over an
        # AsyncRpc, having asked the chain id itself; the core's steps then run over that layer.
        self.w3 = w3
        self.rpc = rpc if rpc is not None else Rpc(w3, embedded=eth_tester is not None, tester=eth_tester)
        self._signers: dict[str, LocalAccount] = {}
        self.accounts: list[str] = []
        for key in keys:
            self._add(key)
        self._dev = dev
        self._eth_tester = eth_tester
        self.clock = clock
        self._pending_supported = True
        self._pending_misses = 0
        self.confirmations = _confirmations(confirmations)
        self.chain_id: int = self.rpc.chain_id() if chain_id is None else chain_id
        self._sender = Sender(
            self.rpc,
            self._signers,
            self.chain_id,
            receipt_timeout=receipt_timeout,
            poll_latency=poll_latency,
            confirmation_timeout=confirmation_timeout,
            unreachable_timeout=unreachable_timeout,
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
        try:
            from eth_tester import EthereumTester, PyEVMBackend
            from eth_tester.backends.pyevm.main import get_default_account_keys
        except ImportError as missing:  # eth-tester and py-evm are the [tester] extra
            raise ExtraNotInstalled("tester", feature="the embedded chain", missing=missing.name) from missing

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
        w3 = embedded_web3(tester)
        signers = [Account.from_key(k.to_bytes()) for k in keys]
        return cls(
            w3,
            signers,
            dev="eth-tester",
            receipt_timeout=5.0,
            confirmation_timeout=5.0,
            poll_latency=0.01,
            eth_tester=tester,
        )

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
        unreachable_timeout: float | None = None,
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
        :mod:`chainfence._node.sending`). ``unreachable_timeout``: seconds of
        silence from the node after which a transaction in flight is reported
        as :class:`~chainfence.errors.OutcomeUnknown` (default
        ``min(receipt_timeout, 10)``). ``request_timeout``: seconds per
        JSON-RPC request; a late reply is never resent blindly.
        """
        _check_connect_args(
            url,
            chain_id,
            request_timeout=request_timeout,
            receipt_timeout=receipt_timeout,
            confirmation_timeout=confirmation_timeout,
            poll_latency=poll_latency,
            unreachable_timeout=unreachable_timeout,
        )
        keys = ([private_key] if private_key is not None else []) + list(private_keys)
        signers = [_load_key(k) for k in keys]
        w3 = connect_http(url, timeout=request_timeout)
        probe = Rpc(w3, embedded=False)
        try:
            client = probe.client_version()
            actual_chain_id = probe.chain_id()
        except ChainfenceError as exc:
            raise NodeUnreachable(unreachable_message(url, exc)) from exc
        if chain_id is not None and actual_chain_id != chain_id:
            raise WrongChain(f"the node at {redact_url(url)} serves chain {actual_chain_id}, not chain {chain_id}")
        dev = _dev_name(client)
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
            unreachable_timeout=unreachable_timeout,
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

    def _run(self, steps: Steps[Any]) -> Any:
        """Run core steps over this chain's blocking RPC layer (the sync driver)."""
        return self._sender.run(steps)

    def now(self) -> int:
        """Chain time now, as a verifier must count it (see the module docstring).

        The next block's timestamp where the node offers a pending block,
        else the latest block's; on a chain that is not a dev chain, never
        earlier than :attr:`clock`. Leases are judged against it: live while
        ``now() < expires_at``.
        """
        return self._run(self._now_steps())

    def _now_steps(self) -> Steps[int]:
        return (yield from self._now((yield RPC.pending_timestamp()) if self._pending_supported else None))

    def _now(self, pending: int | None) -> Steps[int]:
        """now() from the pending block's timestamp the caller already read (None: not offered)."""
        if pending is None:
            self._pending_misses += 1
            if self._pending_misses >= 3:
                self._pending_supported = False  # this node has no pending block: stop asking
            pending = yield from self._latest_time_steps()
        else:
            self._pending_misses = 0
        if self._dev is not None:
            return pending  # a clock tests move on purpose: the machine's plays no part
        return max(pending, int(self.clock()))

    def call_now(self, to: str, data: bytes, *, resource: str | None = None) -> tuple[bytes, int]:
        """``eth_call`` at the latest block, and :meth:`now`: in one round trip where the node allows."""
        return self._run(self._call_now_steps(to, data, resource=resource))

    def _call_now_steps(self, to: str, data: bytes, *, resource: str | None = None) -> Steps[tuple[bytes, int]]:
        if not self._pending_supported:
            raw = yield RPC.call({"to": to, "data": data}, "latest", resource=resource)
            return raw, (yield from self._now(None))
        raw, pending = yield RPC.call_and_pending_timestamp({"to": to, "data": data}, resource=resource)
        return raw, (yield from self._now(pending))

    def latest_time(self) -> int:
        """The latest block's timestamp: the time a view at ``latest`` runs at."""
        return self._run(self._latest_time_steps())

    def _latest_time_steps(self) -> Steps[int]:
        block = yield RPC.block("latest")
        if block is None:  # pragma: no cover - every node has a latest block
            raise ChainError("the node returned no latest block")
        return int(block["timestamp"])

    def advance_time(self, seconds: int) -> int:
        """Move chain time ``seconds`` forward and mine a block there; returns the new :meth:`now`.

        Dev chains only (embedded, anvil). Views see the new time at once;
        the next transaction is mined after it.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
            raise InvalidInput(f"seconds must be an int >= 0, got {seconds!r}")
        if self._eth_tester is not None:
            if seconds > 0:
                # now() is the next block's time; eth-tester's time_travel(T) mines a
                # block at T - 1 and makes the next one T: now() becomes now() + seconds.
                self._time_travel(self.now() + seconds)
            return self.now()
        self._require_dev("advance_time")
        if seconds > 0:
            self._dev_rpc("evm_setNextBlockTimestamp", [self.now() + seconds])
            self._dev_rpc("evm_mine", [])
        return self.now()

    def set_next_block_time(self, timestamp: int) -> None:
        """Make the next mined block carry ``timestamp`` (dev chains only).

        For tests at exact boundaries ("acquire at the very second the lease
        expires"). On the embedded chain this mines one empty block at
        ``timestamp - 1`` unless that block would not be new.
        """
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise InvalidInput(f"timestamp must be an int, got {timestamp!r}")
        latest = self.latest_time()
        if timestamp <= latest:
            raise InvalidInput(f"timestamp {timestamp} is not after the latest block's ({latest})")
        if self._eth_tester is not None:
            if timestamp > latest + 1:  # latest + 1 is what eth-tester mines next anyway
                self._time_travel(timestamp)
            return
        self._require_dev("set_next_block_time")
        self._dev_rpc("evm_setNextBlockTimestamp", [timestamp])

    def _time_travel(self, timestamp: int) -> None:
        self.rpc.tester("time_travel", timestamp)

    def mine(self, blocks: int = 1) -> None:
        """Mine ``blocks`` empty blocks (dev chains only)."""
        if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 0:
            raise InvalidInput(f"blocks must be an int >= 0, got {blocks!r}")
        if self._eth_tester is not None:
            self.rpc.tester("mine_blocks", blocks)
            return
        self._require_dev("mine")
        for _ in range(blocks):
            self._dev_rpc("evm_mine", [])

    def snapshot(self) -> Any:
        """Save the chain state (dev chains only); restore it with :meth:`revert`."""
        if self._eth_tester is not None:
            return self.rpc.tester("take_snapshot")
        self._require_dev("snapshot")
        return self._dev_rpc("evm_snapshot", [])

    def revert(self, snapshot: Any) -> None:
        """Restore a :meth:`snapshot`. Forgets cached nonces, which the revert rewinds, and the tokens
        seen from registries on this chain (a deliberate rollback is not a lost history)."""
        if self._eth_tester is not None:
            self.rpc.tester("revert_to_snapshot", snapshot)
        else:
            self._require_dev("revert")
            if not self._dev_rpc("evm_revert", [snapshot]):
                raise ChainError(f"the node refused to revert to snapshot {snapshot!r}")
        self._sender.forget_nonces()
        self.__dict__.pop("_seen_tokens", None)

    def _require_dev(self, what: str) -> None:
        if self._dev is None:
            raise NotSupported(f"{what} needs a dev chain (embedded, anvil, hardhat); this node is not one")

    def _dev_rpc(self, method: str, params: list[Any]) -> Any:
        """A dev-chain JSON-RPC method (evm_mine, evm_snapshot, ...), through the translating layer."""
        return self.rpc.request(method, params)

    # Tests and tools of the 0.1 series called this name.
    _rpc = _dev_rpc

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

        See :mod:`chainfence._node.sending` for the journey: preflight (a revert
        raises its typed error and nothing is sent), local signing under a
        per-sender nonce lock, submission that reconciles lost replies by
        hash, a bounded wait that cancels on timeout, ``confirmations``
        blocks on top (default: the chain's), and the status check.
        ``gas`` skips the preflight (tests use it to mine a failing
        transaction).
        """
        return self._run(
            self._transact_steps(sender, to, data, resource=resource, gas=gas, confirmations=confirmations)
        )

    def _transact_steps(
        self,
        sender: str,
        to: str | None,
        data: bytes,
        *,
        resource: str | None = None,
        gas: int | None = None,
        confirmations: int | None = None,
    ) -> Steps[Any]:
        sender = self.signer(sender)
        k = self.confirmations if confirmations is None else _confirmations(confirmations)
        call: dict[str, Any] = {"from": sender, "data": data, "value": 0}
        if to is not None:  # None: contract creation
            call["to"] = to
        return (yield from self._sender.transact_steps(sender, call, gas=gas, resource=resource, confirmations=k))

    def call(
        self, to: str, data: bytes, *, block: str | int = "latest", resource: str | None = None, gas: int | None = None
    ) -> bytes:
        """``eth_call`` of ``data`` at ``block``; reverts raise the decoded chainfence error.

        ``gas`` caps the gas the call may burn (for calls into code nobody
        vetted, such as an ERC-1271 holder's).
        """
        tx: dict[str, Any] = {"to": to, "data": data}
        if gas is not None:
            tx["gas"] = gas
        return self.rpc.call(tx, block, resource=resource)

    def block_number(self) -> int:
        """The latest block's number."""
        return self.rpc.block_number()

    def confirmed_block(self, confirmations: int | None = None) -> int:
        """The newest block with ``confirmations`` blocks on top of it (default: the chain's setting)."""
        return self._run(self._confirmed_block_steps(confirmations))

    def _confirmed_block_steps(self, confirmations: int | None = None) -> Steps[int]:
        k = self.confirmations if confirmations is None else _confirmations(confirmations)
        return max(0, (yield RPC.block_number()) - k)

    def __repr__(self) -> str:
        kind = self._dev or "node"
        return f"<Chain {kind} chain_id={self.chain_id} accounts={len(self.accounts)}>"


def _check_connect_args(url: object, chain_id: object, **timeouts: object) -> None:
    """:meth:`Chain.connect`'s arguments (and :meth:`AsyncChain.connect`'s), checked before anything is asked."""
    from . import _validate

    _validate.rpc_url(url)
    if chain_id is not None and (isinstance(chain_id, bool) or not isinstance(chain_id, int) or chain_id < 1):
        raise InvalidInput(f"chain_id must be a positive int, got {chain_id!r}")
    for name, value in timeouts.items():
        if value is None and name == "unreachable_timeout":
            continue  # its default derives from receipt_timeout
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise InvalidInput(f"{name} must be a positive, finite number of seconds, got {value!r}")


def _dev_name(client_version: str) -> str | None:
    """The dev chain a node's ``web3_clientVersion`` names (anvil, hardhat, ganache), else None."""
    return next((name for name in ("anvil", "hardhat", "ganache") if name in client_version.lower()), None)


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
