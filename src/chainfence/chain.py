"""A connection to an EVM chain that can send transactions for the accounts it holds keys for.

Two ways in::

    chain = Chain.embedded()                        # in-process eth-tester/py-evm, 10 funded accounts
    chain = Chain.connect(url, private_key=key)     # any EVM JSON-RPC node

Both send every transaction the same way: signed locally (the bytes eth-account signs),
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
``advance_time`` moves ``now()`` by ``seconds`` and mines a block there.

Dev chains keep a clock of their own that tests move on purpose (time
travel, snapshots that take it back), so there the node's pending block is
the clock and the machine's plays no part: anvil's pending block runs with
real time from wherever the chain's clock stands; the embedded chain's
clock is logical (blocks one second apart, ``advance_time`` to jump).

Every JSON-RPC request goes through ``chain.rpc`` (:mod:`chainfence._node.rpc`),
which turns every failure into a chainfence error.

:class:`AsyncChain` is the same chain for asyncio (re-exported by
:mod:`chainfence.aio`): it wraps a :class:`Chain` (keys, nonces, settings) and
runs the same steps over the asyncio twin of its transport. Both are built
from one statement of ``connect``'s parameters (:func:`_connection`) and one
conversation with the node (:meth:`_Connection.identify_steps`).
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ._core import log as _log
from ._core import moved as _moved
from ._core.effects import RPC, Steps, arun, run
from ._core.faces import AsyncFace, SyncFace, awaiting, operation
from ._node.accounts import LocalKey, is_local_account
from ._node.failures import is_unknown_method, unreachable_message
from ._node.rpc import AsyncRpc, Rpc, connect_async_node, connect_node
from ._node.sending import Sender
from ._node.transports import redact_url
from ._sdk import validate as _validate
from .errors import (
    ChainError,
    ChainfenceError,
    InvalidInput,
    LeaseError,
    NodeUnreachable,
    NotSupported,
    RpcError,
    UnknownAccount,
    WrongChain,
)

if TYPE_CHECKING:  # types only: keys are loaded without eth-account (chainfence._node.accounts); asyncio is
    # imported by the asyncio face when it runs (the CLI never loads it)
    import asyncio

    from eth_account.signers.local import LocalAccount

    Signer = LocalKey | LocalAccount

logger = _log.get(__name__)

__all__ = ["AsyncChain", "Chain", "Timeouts"]

T = TypeVar("T")

#: Confirmations of a chain that is not a dev chain, unless told otherwise:
#: enough to ride out the common one- and two-block reorgs. See the README.
DEFAULT_CONFIRMATIONS = 3


@dataclass(frozen=True)
class Timeouts:
    """How long a :class:`Chain` waits, in seconds (as httpx's ``Timeout``)::

        chain = Chain.connect(url, key, timeouts=Timeouts(receipt=300, request=30))

    Attributes:
        request: each JSON-RPC request; a late reply is never resent blindly.
        receipt: a transaction's inclusion, after which a no-op with its nonce cancels it
            (:mod:`chainfence._node.sending`).
        confirmation: once included, its ``confirmations`` blocks on top.
        unreachable: silence from the node after which a transaction in flight is reported as
            :class:`~chainfence.errors.OutcomeUnknown` (None: ``min(receipt, 10)``).
        poll: between the polls of a wait (a receipt, the confirmations).

    Each is a positive, finite number (``unreachable`` may be None):
    :class:`~chainfence.errors.InvalidInput` otherwise, naming the field. Frozen; compared by value.
    """

    request: float = 10.0
    receipt: float = 120.0
    confirmation: float = 600.0
    unreachable: float | None = None
    poll: float = 0.1

    def __post_init__(self) -> None:
        for name in ("request", "receipt", "confirmation", "unreachable", "poll"):
            value = getattr(self, name)
            if value is None and name == "unreachable":
                continue  # its default derives from receipt
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise InvalidInput(
                    f"Timeouts.{name} must be a positive, finite number of seconds, got {value!r}",
                    argument=f"timeouts.{name}",
                    value=value,
                )


#: ``connect``'s timeouts unless told otherwise.
DEFAULT_TIMEOUTS = Timeouts()

#: ``connect``'s keywords before 0.2 (deprecated, until 0.3), and the field of :class:`Timeouts` each became.
_TIMEOUT_KEYWORDS = {
    "request_timeout": "request",
    "receipt_timeout": "receipt",
    "confirmation_timeout": "confirmation",
    "unreachable_timeout": "unreachable",
    "poll_latency": "poll",
}


class _Connection(NamedTuple):
    """What :meth:`Chain.connect` and :meth:`AsyncChain.connect` were asked for, checked: both build from it."""

    url: str
    signers: list[Signer]
    chain_id: int | None
    confirmations: int | None
    timeouts: Timeouts
    relayer: str | None = None

    def identify_steps(self) -> Steps[tuple[str | None, int]]:
        """Ask the node who it is: (the dev chain it names, or None; its chain id), in one round trip where
        it takes batches."""
        try:
            client, actual_chain_id = yield RPC.identify()
        except ChainfenceError as exc:
            raise NodeUnreachable(unreachable_message(self.url, exc)) from exc
        if self.chain_id is not None and actual_chain_id != self.chain_id:
            raise WrongChain(
                f"the node at {redact_url(self.url)} serves chain {actual_chain_id}, not chain {self.chain_id}"
            )
        return _dev_name(client), actual_chain_id

    def chain(self, rpc: Rpc, dev: str | None, chain_id: int) -> Chain:
        """The :class:`Chain` over ``rpc`` to the node that said it is ``dev`` on ``chain_id``."""
        confirmations = self.confirmations
        if confirmations is None:
            confirmations = 0 if dev else DEFAULT_CONFIRMATIONS
        timeouts = self.timeouts
        chain = Chain(
            rpc,
            self.signers,
            dev=dev,
            confirmations=confirmations,
            receipt_timeout=timeouts.receipt,
            confirmation_timeout=timeouts.confirmation,
            poll_latency=timeouts.poll,
            unreachable_timeout=timeouts.unreachable,
            chain_id=chain_id,
        )
        if self.relayer is not None:
            chain.use_relayer(self.relayer)
        return chain


def _connection(
    url: str,
    private_key: str | bytes | None = None,
    *,
    private_keys: Sequence[str | bytes] = (),
    chain_id: int | None = None,
    confirmations: int | None = None,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    relayer: str | None = None,
    **deprecated: Any,
) -> _Connection:
    """The parameters of :meth:`Chain.connect` and :meth:`AsyncChain.connect`, stated once and checked
    before anything is asked (keys loaded, never echoed). ``deprecated``: the keywords before 0.2
    (``receipt_timeout=``, ...: :data:`_TIMEOUT_KEYWORDS`), each warned of and taken into the timeouts."""
    timeouts = _timeouts(timeouts, deprecated)
    _check_connect_args(url, chain_id)
    if confirmations is not None:
        _confirmations(confirmations)
    keys = ([private_key] if private_key is not None else []) + list(private_keys)
    if relayer is not None:
        _validate.rpc_url(relayer, "relayer")
    return _Connection(
        url=url,
        signers=[_load_key(k) for k in keys],
        chain_id=chain_id,
        confirmations=confirmations,
        timeouts=timeouts,
        relayer=relayer,
    )


def _timeouts(timeouts: object, deprecated: dict[str, Any]) -> Timeouts:
    """``connect``'s timeouts: ``timeouts``, or the deprecated keywords (each warned of, pointed at the
    caller of ``connect``), never both."""
    unknown = sorted(deprecated.keys() - _TIMEOUT_KEYWORDS.keys())
    if unknown:
        raise TypeError(f"connect() got an unexpected keyword argument {unknown[0]!r}")
    if not isinstance(timeouts, Timeouts):
        raise InvalidInput(f"timeouts must be a Timeouts, got {timeouts!r}", argument="timeouts", value=timeouts)
    if not deprecated:
        return timeouts
    if timeouts is not DEFAULT_TIMEOUTS:
        raise InvalidInput(
            f"give every timeout in timeouts=Timeouts(...), not also as {', '.join(sorted(deprecated))}=",
            argument="timeouts",
        )
    for old in deprecated:
        _moved.keyword("connect", old, f"timeouts=Timeouts({_TIMEOUT_KEYWORDS[old]}=...)", stacklevel=4)
    return Timeouts(**{_TIMEOUT_KEYWORDS[old]: value for old, value in deprecated.items()})


def _named(resource: str | None, steps: Steps[T]) -> Steps[T]:
    """``steps``, with the resource's name on a lease error they raise (the chain knows only its hash)."""
    try:
        return (yield from steps)
    except LeaseError as error:
        if resource is not None and error.resource is None:
            error.with_resource(resource)
        raise


def _one(request: Any) -> Steps[Any]:
    """One request to the RPC layer, as steps."""
    return (yield request)


class Chain(SyncFace):
    """An EVM chain plus the keys to send transactions on it.

    Use :meth:`embedded` or :meth:`connect` rather than the constructor.

    Attributes:
        w3: the underlying :class:`web3.Web3`, for anything the SDK does not wrap.
        rpc: the SDK's own JSON-RPC layer (typed errors, no hidden resends).
        accounts: the addresses this chain can sign for, in the order given.
        chain_id: the chain's EIP-155 id.
        clock: the verifier's own clock (seconds since the epoch), taken into
            :meth:`now` on chains that are not dev chains. Default :func:`time.time`.
    """

    def __init__(
        self,
        rpc: Rpc,
        keys: Iterable[Signer],
        *,
        dev: str | None,
        confirmations: int = 0,
        receipt_timeout: float = 120.0,
        confirmation_timeout: float = 600.0,
        poll_latency: float = 0.1,
        unreachable_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
        chain_id: int | None = None,
    ):
        self.rpc = rpc
        #: The embedded chain's EthereumTester (None on a node).
        self._eth_tester: Any = getattr(rpc.transport, "tester", None) if rpc.embedded else None
        self._signers: dict[str, Signer] = {}
        self.accounts: list[str] = []
        for key in keys:
            self._add(key)
        self._dev = dev
        self.clock = clock
        self._pending_supported = True
        self._pending_misses = 0
        self.confirmations = _confirmations(confirmations)
        self.chain_id: int = self.rpc.chain_id() if chain_id is None else chain_id
        #: The relayer lease operations go through (:meth:`use_relayer`), or None: sent as transactions.
        self.relayer: Any = None
        self._sender = Sender(
            self.rpc,
            self._signers,
            self.chain_id,
            receipt_timeout=receipt_timeout,
            poll_latency=poll_latency,
            confirmation_timeout=confirmation_timeout,
            unreachable_timeout=unreachable_timeout,
            dev=dev,
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
        from ._node.embedded import embedded_chain  # eth-tester's chain: never on a node's path

        chain = embedded_chain(accounts)
        return cls(
            Rpc(chain.transport),
            [_load_key(key) for key in chain.keys],
            dev="eth-tester",
            receipt_timeout=5.0,
            confirmation_timeout=5.0,
            poll_latency=0.01,
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
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        relayer: str | None = None,
        **deprecated: Any,
    ) -> Chain:
        """Connect to an EVM JSON-RPC node over HTTP(S), or over its IPC socket on this machine (``url`` a
        path ending in ``.ipc``, as ``anvil --ipc`` and ``chainfence node`` make one: the fastest way to a
        local node).

        Transactions are signed locally with ``private_key`` (and any
        ``private_keys``); the node's own unlocked accounts are never used.
        Keys come from the environment or a keystore, never a command line.

        ``chain_id``: refuse a node that serves another chain
        (:class:`~chainfence.errors.WrongChain`). ``confirmations``: blocks on
        top of a transaction's block before it counts (default 0 on dev
        chains, :data:`DEFAULT_CONFIRMATIONS` elsewhere). ``timeouts``: how
        long each wait may take (:class:`Timeouts`: a request, a receipt, the
        confirmations, a silent node; the polls between). ``relayer``: a
        relayer's URL (``chainfence relay``): lease operations are then signed
        intents it sends and pays for (:meth:`use_relayer`).

        The keywords before 0.2 (``request_timeout``, ``receipt_timeout``,
        ``confirmation_timeout``, ``unreachable_timeout``, ``poll_latency``)
        still work until 0.3, with a ``DeprecationWarning`` naming the
        :class:`Timeouts` field that replaces each.
        """
        asked = _connection(
            url,
            private_key,
            private_keys=private_keys,
            chain_id=chain_id,
            confirmations=confirmations,
            timeouts=timeouts,
            relayer=relayer,
            **deprecated,
        )
        rpc = Rpc(connect_node(asked.url, timeout=asked.timeouts.request))
        try:
            dev, served = run(asked.identify_steps(), rpc, sleep=time.sleep, lock=lambda key: contextlib.nullcontext())
        except BaseException:
            rpc.close()
            raise
        return asked.chain(rpc, dev, served)

    #: The ``Web3`` of this chain's node, :attr:`rpc`'s (see :meth:`__getattr__`).
    w3: Any

    def __getattr__(self, name: str) -> Any:
        # ``w3`` is read from the RPC layer when first asked for, not at connect: the SDK itself never uses
        # it, and web3 is kept off a command's path (docs/explanation/design.md).
        if name == "w3":
            return self.rpc.w3
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _add(self, key: Signer) -> str:
        address = key.address
        if address not in self._signers:
            self._signers[address] = key
            self.accounts.append(address)
        return address

    def add_account(self, private_key: str | bytes | Signer) -> str:
        """Hold a further key; returns its address."""
        key = _load_key(private_key)
        return self._add(key)

    # ------------------------------------------------------------------
    # Time and dev-chain controls
    # ------------------------------------------------------------------

    @property
    def is_dev(self) -> bool:
        """Whether this chain supports time travel and snapshots (eth-tester, anvil, hardhat)."""
        return self._dev is not None

    def _run(self, steps: Steps[T]) -> T:
        """Run core steps over this chain's blocking RPC layer (the sync driver)."""
        return self._sender.run(steps)

    _drive = _run  # the sync face's driver (chainfence._core.faces): the dev controls are derived from steps

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
        """``eth_call`` at the latest block, and :meth:`now`: in one round trip where the node allows.
        ``resource``: named in a lease error the call reverts with."""
        return self._run(self._call_now_steps(to, data, resource=resource))

    def _call_now_steps(self, to: str, data: bytes, *, resource: str | None = None) -> Steps[tuple[bytes, int]]:
        return (yield from _named(resource, self._unnamed_call_now_steps(to, data)))

    def _unnamed_call_now_steps(self, to: str, data: bytes) -> Steps[tuple[bytes, int]]:
        if not self._pending_supported:
            raw = yield RPC.call({"to": to, "data": data}, "latest")
            return raw, (yield from self._now(None))
        raw, pending = yield RPC.call_and_pending_timestamp({"to": to, "data": data})
        return raw, (yield from self._now(pending))

    def latest_time(self) -> int:
        """The latest block's timestamp: the time a view at ``latest`` runs at."""
        return self._run(self._latest_time_steps())

    def _latest_time_steps(self) -> Steps[int]:
        block = yield RPC.block("latest")
        if block is None:  # pragma: no cover - every node has a latest block
            raise ChainError("the node returned no latest block")
        return int(block["timestamp"])

    def _advance_time_steps(self, seconds: int) -> Steps[int]:
        """Move chain time ``seconds`` forward and mine a block there; returns the new :meth:`now`.

        Dev chains only (embedded, anvil, hardhat, ganache). Views see the new time at once;
        the next transaction is mined after it. :meth:`now` moves by exactly ``seconds`` where
        the node can set the next block's time (``evm_setNextBlockTimestamp``: the embedded
        chain, anvil, hardhat); ganache has no such control and moves its clock by an offset
        (``evm_increaseTime``), so there :meth:`now` moves by at least ``seconds`` (by one
        more on a clock that adds a second a block). A node with neither raises
        :class:`~chainfence.errors.NotSupported`.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
            raise InvalidInput(f"seconds must be an int >= 0, got {seconds!r}")
        if not self.rpc.embedded:
            self._require_dev("advance_time")
        if seconds > 0:
            at = (yield from self._now_steps()) + seconds
            if self.rpc.embedded:
                # now() is the next block's time; eth-tester's time_travel(T) mines a
                # block at T - 1 and makes the next one T: now() becomes now() + seconds.
                yield RPC.tester("time_travel", at)
            else:
                # hardhat never mines two blocks in the same second: after a block at T its next is T + 1 at
                # the earliest, so the block goes at T - 1 to make now() T (as the embedded chain's time travel
                # does). anvil mines blocks in the same second: its next can be T itself.
                mined_at = at - 1 if self._dev in _STRICTLY_LATER_BLOCKS else at
                try:
                    yield from self._dev_steps("evm_setNextBlockTimestamp", [mined_at])
                except NotSupported:
                    yield from self._dev_steps("evm_increaseTime", [seconds])  # ganache: an offset on its clock
                yield from self._dev_steps("evm_mine", [])
        return (yield from self._now_steps())

    advance_time = operation(_advance_time_steps)

    def _set_next_block_time_steps(self, timestamp: int) -> Steps[None]:
        """Make the next mined block carry ``timestamp`` (dev chains only).

        For tests at exact boundaries ("acquire at the very second the lease
        expires"). On the embedded chain this mines one empty block at
        ``timestamp - 1`` unless that block would not be new. A node that
        cannot set the next block's time (ganache: no ``evm_setNextBlockTimestamp``)
        raises :class:`~chainfence.errors.NotSupported`.
        """
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise InvalidInput(f"timestamp must be an int, got {timestamp!r}")
        latest = yield from self._latest_time_steps()
        if timestamp <= latest:
            raise InvalidInput(f"timestamp {timestamp} is not after the latest block's ({latest})")
        if self.rpc.embedded:
            if timestamp > latest + 1:  # latest + 1 is what eth-tester mines next anyway
                yield RPC.tester("time_travel", timestamp)
            return
        self._require_dev("set_next_block_time")
        yield from self._dev_steps("evm_setNextBlockTimestamp", [timestamp])

    set_next_block_time = operation(_set_next_block_time_steps)

    def _mine_steps(self, blocks: int = 1) -> Steps[None]:
        """Mine ``blocks`` empty blocks (dev chains only)."""
        if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 0:
            raise InvalidInput(f"blocks must be an int >= 0, got {blocks!r}")
        if self.rpc.embedded:
            yield RPC.tester("mine_blocks", blocks)
            return
        self._require_dev("mine")
        for _ in range(blocks):
            yield from self._dev_steps("evm_mine", [])

    mine = operation(_mine_steps)

    def _snapshot_steps(self) -> Steps[Any]:
        """Save the chain state (dev chains only); restore it with :meth:`revert`."""
        if self.rpc.embedded:
            return (yield RPC.tester("take_snapshot"))
        self._require_dev("snapshot")
        return (yield from self._dev_steps("evm_snapshot", []))

    snapshot = operation(_snapshot_steps)

    def _revert_steps(self, snapshot: Any) -> Steps[None]:
        """Restore a :meth:`snapshot`. Forgets cached nonces, which the revert rewinds, and the tokens
        seen from registries on this chain (a deliberate rollback is not a lost history)."""
        if self.rpc.embedded:
            yield RPC.tester("revert_to_snapshot", snapshot)
        else:
            self._require_dev("revert")
            if not (yield from self._dev_steps("evm_revert", [snapshot])):
                raise ChainError(f"the node refused to revert to snapshot {snapshot!r}")
        self._sender.forget_nonces()
        self.__dict__.pop("_seen_tokens", None)

    revert = operation(_revert_steps)

    def _require_dev(self, what: str) -> None:
        if self._dev is None:
            raise NotSupported(f"{what} needs a dev chain (embedded, anvil, hardhat); this node is not one")

    def _dev_steps(self, method: str, params: list[Any]) -> Steps[Any]:
        """A dev-chain JSON-RPC method (evm_mine, evm_snapshot, ...), through the translating layer; a node
        that does not know it raises :class:`~chainfence.errors.NotSupported` naming it."""
        try:
            return (yield RPC.request(method, params))
        except RpcError as error:
            if not is_unknown_method(error):
                raise
            raise NotSupported(f"this dev chain ({self._dev}) has no {method}: {error.rpc_message}") from error

    _dev_rpc = operation(_dev_steps)

    # Tests and tools of the 0.1 series called this name.
    _rpc = _dev_rpc

    # ------------------------------------------------------------------
    # Sending transactions
    # ------------------------------------------------------------------

    def signer(self, account: object) -> str:
        """The checksummed address of ``account``; raises if this chain holds no key for it."""
        if type(account) is str and account in self._signers:
            return account  # one of the keys' own checksummed addresses (every transaction asks)
        if is_local_account(account):
            return self._add(account)  # type: ignore[arg-type]
        address = _validate.address(account, "account")
        if address not in self._signers:
            raise UnknownAccount(f"this chain holds no private key for {address}")
        return address

    def key_of(self, account: object) -> LocalAccount:
        """The key this chain holds for ``account`` (to sign fenced requests as it): eth-account's
        ``LocalAccount``."""
        key = self._signers[self.signer(account)]
        return key.local_account() if isinstance(key, LocalKey) else key

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

    def use_relayer(self, url: str | None, *, valid_for: int | None = None) -> None:
        """Send this chain's lease operations through the relayer at ``url`` (None: as transactions again).

        Each acquisition, renewal, release, completion and claim is then signed by its sender's key as an
        intent (:mod:`chainfence.intents`) that the relayer sends and pays for; the lease and its events are
        the sender's. What happened is read from this chain's node, never from the relayer
        (:mod:`chainfence.relaying`). ``valid_for``: seconds of chain time an intent may wait to land.
        Every other transaction (deploying, administering namespaces, sets, group commit) is sent as before,
        with the sender's own gas.
        """
        if url is None:
            self.relayer = None
            return
        from .relaying import DEFAULT_VALID_FOR, Relayer

        self.relayer = Relayer(url, valid_for=DEFAULT_VALID_FOR if valid_for is None else valid_for)

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
        if self.relayer is not None and to is not None and self.relayer.relays(data):
            relayed = self.relayer.transact_steps(self, sender, to, data, resource=resource, confirmations=k)
            return (yield from _named(resource, relayed))
        call: dict[str, Any] = {"from": sender, "data": data, "value": 0}
        if to is not None:  # None: contract creation
            call["to"] = to
        return (yield from _named(resource, self._sender.transact_steps(sender, call, gas=gas, confirmations=k)))

    def call(
        self, to: str, data: bytes, *, block: str | int = "latest", resource: str | None = None, gas: int | None = None
    ) -> bytes:
        """``eth_call`` of ``data`` at ``block``; reverts raise the decoded chainfence error.

        ``gas`` caps the gas the call may burn (for calls into code nobody
        vetted, such as an ERC-1271 holder's).
        """
        return self._run(self._call_steps(to, data, block=block, resource=resource, gas=gas))

    def _call_steps(
        self, to: str, data: bytes, *, block: str | int = "latest", resource: str | None = None, gas: int | None = None
    ) -> Steps[bytes]:
        """:meth:`call` as steps (a registry's view at a block, by name)."""
        tx: dict[str, Any] = {"to": to, "data": data}
        if gas is not None:
            tx["gas"] = gas
        raw: bytes = yield from _named(resource, _one(RPC.call(tx, block)))
        return raw

    def block_number(self) -> int:
        """The latest block's number."""
        return self.rpc.block_number()

    def confirmed_block(self, confirmations: int | None = None) -> int:
        """The newest block with ``confirmations`` blocks on top of it (default: the chain's setting)."""
        return self._run(self._confirmed_block_steps(confirmations))

    def _confirmed_block_steps(self, confirmations: int | None = None) -> Steps[int]:
        k = self.confirmations if confirmations is None else _confirmations(confirmations)
        head: int = yield RPC.block_number()
        return max(0, head - k)

    def __repr__(self) -> str:
        kind = self._dev or "node"
        return f"<Chain {kind} chain_id={self.chain_id} accounts={len(self.accounts)}>"


class AsyncChain(AsyncFace[Chain]):
    """An EVM chain for asyncio code: :class:`Chain`'s state, driven over an asyncio transport.

    Build with :meth:`connect`, :meth:`embedded` or :meth:`over`; close with
    ``await chain.aclose()`` or ``async with``. The operations are :class:`Chain`'s
    own steps (:mod:`chainfence._core.effects`), run over :class:`~chainfence._node.rpc.AsyncRpc`.

    Attributes:
        chain: the :class:`Chain` holding the keys, nonces and settings.
        rpc: the asyncio RPC layer (typed errors, no hidden resends).
    """

    def __init__(self, chain: Chain, rpc: AsyncRpc):
        import asyncio

        self.chain = chain
        self.rpc = rpc
        #: The sleep the sender polls with (tests inject their own).
        self._sleep: Callable[[float], Any] = asyncio.sleep
        # One table of per-account asyncio locks per event loop, kept with the chain's sender: every
        # AsyncChain view of one Chain takes the same lock for an account.
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
            chain._sender.__dict__.setdefault("_async_locks", weakref.WeakKeyDictionary())
        )

    # -- construction ---------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        url: str,
        private_key: str | bytes | None = None,
        *,
        private_keys: Sequence[str | bytes] = (),
        chain_id: int | None = None,
        confirmations: int | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        relayer: str | None = None,
        **deprecated: Any,
    ) -> AsyncChain:
        """:meth:`Chain.connect` for asyncio: the same arguments, checks and errors."""
        import asyncio

        asked = _connection(
            url,
            private_key,
            private_keys=private_keys,
            chain_id=chain_id,
            confirmations=confirmations,
            timeouts=timeouts,
            relayer=relayer,
            **deprecated,
        )
        rpc = AsyncRpc(connect_async_node(asked.url, timeout=asked.timeouts.request))
        try:
            dev, served = await arun(asked.identify_steps(), rpc, sleep=asyncio.sleep, lock=_no_lock)
        except BaseException:
            await rpc.close()
            raise
        # The chain the steps and the dev controls keep their state in; it asks nothing now.
        core = asked.chain(Rpc(connect_node(asked.url, timeout=asked.timeouts.request)), dev, served)
        return cls(core, rpc)

    @classmethod
    def embedded(cls, *, accounts: int = 10) -> AsyncChain:
        """A fresh in-process chain (:meth:`Chain.embedded`), driven through the asyncio layer."""
        return cls.over(Chain.embedded(accounts=accounts))

    @classmethod
    def over(cls, chain: Chain, *, request_timeout: float = 10.0) -> AsyncChain:
        """An asyncio view of ``chain``: its keys, nonce counters, settings and seen tokens, over the
        asyncio twin of its transport (the same node's URL, or the same in-process chain)."""
        if not isinstance(chain, Chain):
            raise InvalidInput(f"chain must be a chainfence Chain, got {type(chain).__name__}")
        if isinstance(request_timeout, bool) or not isinstance(request_timeout, (int, float)) or request_timeout <= 0:
            raise InvalidInput(f"request_timeout must be a positive number of seconds, got {request_timeout!r}")
        return cls(chain, AsyncRpc.twin_of(chain.rpc, timeout=request_timeout))

    async def aclose(self) -> None:
        """Close the HTTP session (the sync chain it wraps stays usable)."""
        await self.rpc.close()

    async def __aenter__(self) -> AsyncChain:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the driver -----------------------------------------------------------

    async def _run(self, steps: Steps[Any]) -> Any:
        """Run core steps over the asyncio RPC layer."""
        return await arun(steps, self.rpc, sleep=self._sleep, lock=self._lock)

    def _lock(self, key: str) -> asyncio.Lock:
        import asyncio

        loop = asyncio.get_running_loop()  # an asyncio.Lock belongs to one loop: one table per loop
        return self._locks.setdefault(loop, {}).setdefault(key, asyncio.Lock())

    # -- what Chain offers, awaited ---------------------------------------------

    @property
    def accounts(self) -> list[str]:
        return self.chain.accounts

    @property
    def chain_id(self) -> int:
        return self.chain.chain_id

    @property
    def confirmations(self) -> int:
        return self.chain.confirmations

    async def now(self) -> int:
        """:meth:`Chain.now`: chain time as a verifier counts it."""
        return int(await self._run(self.chain._now_steps()))

    async def latest_time(self) -> int:
        return int(await self._run(self.chain._latest_time_steps()))

    async def block_number(self) -> int:
        return int(await self.rpc.block_number())

    async def confirmed_block(self, confirmations: int | None = None) -> int:
        return int(await self._run(self.chain._confirmed_block_steps(confirmations)))

    async def transact(
        self,
        sender: str,
        to: str | None,
        data: bytes,
        *,
        resource: str | None = None,
        gas: int | None = None,
        confirmations: int | None = None,
    ) -> Any:
        """:meth:`Chain.transact`, awaited: the same journey, one copy of it."""
        return await self._run(
            self.chain._transact_steps(sender, to, data, resource=resource, gas=gas, confirmations=confirmations)
        )

    async def call(
        self, to: str, data: bytes, *, block: str | int = "latest", resource: str | None = None, gas: int | None = None
    ) -> bytes:
        """:meth:`Chain.call`, awaited: ``eth_call`` of ``data`` at ``block``, reverts decoded."""
        return bytes(await self._run(self.chain._call_steps(to, data, block=block, resource=resource, gas=gas)))

    async def call_now(self, to: str, data: bytes, *, resource: str | None = None) -> tuple[bytes, int]:
        """:meth:`Chain.call_now`, awaited: the call at the latest block and :meth:`now`."""
        raw, now = await self._run(self.chain._call_now_steps(to, data, resource=resource))
        return bytes(raw), int(now)

    # The keys are the wrapped chain's, held in memory: nothing here is awaited.

    def add_account(self, private_key: str | bytes | LocalAccount) -> str:
        """:meth:`Chain.add_account`: hold a further key; returns its address."""
        return self.chain.add_account(private_key)

    def signer(self, account: object) -> str:
        """:meth:`Chain.signer`: the checksummed address of an account this chain holds a key for."""
        return self.chain.signer(account)

    def key_of(self, account: object) -> LocalAccount:
        """:meth:`Chain.key_of`: the key held for ``account`` (to sign fenced requests as it)."""
        return self.chain.key_of(account)

    @property
    def relayer(self) -> Any:
        """:attr:`Chain.relayer`: the relayer lease operations go through, or None."""
        return self.chain.relayer

    def use_relayer(self, url: str | None, *, valid_for: int | None = None) -> None:
        """:meth:`Chain.use_relayer`: send lease operations through the relayer at ``url`` (None: as transactions)."""
        self.chain.use_relayer(url, valid_for=valid_for)

    @property
    def is_dev(self) -> bool:
        """:attr:`Chain.is_dev`: whether the chain offers the dev controls below."""
        return self.chain.is_dev

    # -- dev-chain controls: Chain's steps, awaited ------------------------------

    @property
    def _core(self) -> Chain:
        return self.chain

    @property
    def _driver(self) -> AsyncChain:
        return self

    advance_time = awaiting(Chain.advance_time)
    set_next_block_time = awaiting(Chain.set_next_block_time)
    mine = awaiting(Chain.mine)
    snapshot = awaiting(Chain.snapshot)
    revert = awaiting(Chain.revert)

    def __repr__(self) -> str:
        return f"<AsyncChain over {self.chain!r}>"


@contextlib.asynccontextmanager
async def _no_lock(key: str) -> Any:
    """No lock: asking a node who it is sends nothing that needs one."""
    yield


def _check_connect_args(url: object, chain_id: object) -> None:
    """:meth:`Chain.connect`'s arguments (and :meth:`AsyncChain.connect`'s), checked before anything is asked."""
    _validate.rpc_url(url)
    if chain_id is not None and (isinstance(chain_id, bool) or not isinstance(chain_id, int) or chain_id < 1):
        raise InvalidInput(f"chain_id must be a positive int, got {chain_id!r}")


#: Dev chains that never mine two blocks in the same second (each block's timestamp is after its parent's).
_STRICTLY_LATER_BLOCKS = frozenset({"hardhat"})


def _dev_name(client_version: str) -> str | None:
    """The dev chain a node's ``web3_clientVersion`` names (anvil, hardhat, ganache), else None."""
    return next((name for name in ("anvil", "hardhat", "ganache") if name in client_version.lower()), None)


def _confirmations(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000:
        raise InvalidInput(f"confirmations must be an int from 0 to 1000, got {value!r}")
    return value


def _load_key(key: object) -> Signer:
    """A key to sign with: ``key`` itself if it is one, else the private key it names, read as eth-account
    reads one (:class:`~chainfence._node.accounts.LocalKey`, without importing eth-account)."""
    if is_local_account(key):
        return key  # type: ignore[return-value]
    try:
        return LocalKey.from_key(key)
    except Exception:
        # Never echo the key itself.
        raise InvalidInput("private_key is not a valid secp256k1 private key (32 bytes, hex)") from None
