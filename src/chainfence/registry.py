"""The SDK side of the FencingRegistry contract: acquire, renew, release, views.

::

    registry = Registry.deploy(chain)            # or Registry.at(chain, address)
    a = registry.connect(alice)                  # same registry, transactions sent as alice
    lease = a.acquire("reports/daily", ttl=30)   # Lease: resource, token, holder, expires_at
    with a.acquire("reports/daily", ttl=30) as lease:
        ...                                      # a lease is its own context manager: released on exit

Every method validates its arguments before it touches the chain, raises a
:mod:`chainfence.errors` class for every revert and every node failure
(never a web3, eth-tester or requests exception) and logs one INFO line per
lease state change.

Views judge a lease at :meth:`Chain.now <chainfence.Chain.now>`, not at the
latest block's timestamp: on a chain where no block was mined since a lease
ran out, the lease is already reported expired (``LeaseExpired`` says "no
block since"). Pass ``block=`` to see a resource as it stood at a block.

Rollbacks: the SDK remembers the highest token it has seen from each
registry (and per resource, with its holder). A chain whose state later
reads below that — a dev node that lost its last second to a SIGKILL, a
reorg deeper than the confirmations — raises
:class:`~chainfence.errors.ChainRolledBack` instead of being believed.
``Chain.revert`` (a dev chain's deliberate rollback) forgets what was seen.

A registry's lease operations and views are here; a namespace (its policy,
allowlist, admin, and the admin's revoke and grant) is a handle,
``registry.namespace(prefix)`` (:mod:`chainfence.namespaces`), and so is a
workset, ``registry.workset(name)`` (:mod:`chainfence.claims`); the contract's
calls they share are in :mod:`chainfence._sdk.contract`. Sets, elections,
history and the watchdog build on a registry and are never imported by it
(:mod:`chainfence.recipes`, :mod:`chainfence.audit`). Every operation is
written once, as steps; :class:`AsyncRegistry` (:mod:`chainfence.aio`) runs
the very same steps over asyncio.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, cast

from . import endings
from . import keepalive as _keepalive
from ._core import log as _log
from ._core import moved as _moved
from ._core.effects import RPC, Blocking, Steps
from ._core.faces import (
    AsyncDriver,
    AsyncFace,
    aconstructor,
    awaiting,
    drives,
    local,
    mirrored,
)
from ._node import artifacts as _artifacts
from ._node import sending as _sending
from ._node.abi import decode as abi_decode
from ._node.abi import encode as abi_encode
from ._sdk import names as _names
from ._sdk import validate as _validate
from ._sdk import waiting as _waiting
from ._sdk.contract import DEFAULT_MAX_TTL, MAX_CLAIM_ITEMS, MAX_MANY, RegistryContract, at_block
from ._sdk.interrupted import settle_steps
from ._sdk.lease_state import LeaseInfo, LeaseStatus
from .endings import End
from .errors import (
    ChainError,
    ChainRolledBack,
    ContractNotFound,
    InvalidInput,
    InvalidMaxTtl,
    NotConfirmed,
    NotSupported,
    RpcError,
    TokenNotCurrent,
    UnknownAccount,
    UnknownRevert,
    WrongChain,
)
from .lease import AsyncLease, Lease

if TYPE_CHECKING:
    # Imported where they are used: a command that reads or takes a lease loads none of them (group
    # commit, the handles, the names 0.2 retired, a deployment file, the EIP-712 domain): the CLI's
    # start time, docs/explanation/design.md; held by tests/unit/test_packaging.py.
    from .batching import AsyncBatchItem, Batcher, BatchItem
    from .claims import Workset
    from .deployment import Deployment
    from .fenced_requests import EIP712Domain
    from .namespaces import Namespace

logger = _log.get(__name__)

__all__ = ["DEFAULT_MAX_TTL", "MAX_CLAIM_ITEMS", "MAX_MANY", "AsyncRegistry", "Registry"]


# ----------------------------------------------------------------------
# Construction (steps of the classmethods both faces derive)
# ----------------------------------------------------------------------


def _deploy_steps(
    cls: type[Registry],
    chain: Any,
    *,
    max_ttl: int = DEFAULT_MAX_TTL,
    sender: Any = None,
    namespaces: Mapping[str, str] | None = None,
) -> Steps[Registry]:
    """The steps of :meth:`deploy`."""
    if isinstance(max_ttl, bool) or not isinstance(max_ttl, int) or not 1 <= max_ttl <= 2**32 - 1:
        raise InvalidMaxTtl(max_ttl=max_ttl)
    deployer = chain.signer(sender if sender is not None else _first_account(chain))
    prefixes, admins = _namespace_assignments(chain, namespaces)
    yield from _fork_steps()
    data = bytes.fromhex(_artifacts.load()["bytecode"][2:]) + abi_encode(
        ["uint256", "string[]", "address[]"], [max_ttl, prefixes, admins]
    )
    receipt = yield from chain._transact_steps(deployer, None, data)
    registry = cls(chain, receipt["contractAddress"], sender=deployer)
    registry.__dict__["max_ttl"] = max_ttl
    registry.deployed_block = receipt["blockNumber"]
    logger.info(
        "deployed registry=%s max_ttl=%d tx=%s", registry.address, max_ttl, receipt["transactionHash"].to_0x_hex()
    )
    return registry


#: Init code that runs MCOPY once and stops (PUSH1 0, PUSH1 0, PUSH1 0, MCOPY, STOP). The registry is compiled
#: for Cancun and its code uses MCOPY (EIP-5656: naming a claimed item, refusing a batch's item): on a node whose
#: EVM predates it (ganache 7: Shanghai) those paths die on "invalid opcode" after the registry is deployed.
_MCOPY_PROBE = bytes.fromhex("6000600060005e00")


def _fork_steps() -> Steps[None]:
    """Refuse a node whose EVM lacks MCOPY (:class:`~chainfence.errors.NotSupported` naming the fork), before anything is
    sent: an ``eth_call`` of :data:`_MCOPY_PROBE` as a contract creation (a Cancun EVM returns nothing)."""
    try:
        yield RPC.call({"data": _MCOPY_PROBE}, "latest")
    except (RpcError, UnknownRevert) as refused:
        fork = _artifacts.load()["compiler"]["settings"]["evmVersion"]
        raise NotSupported(fork=fork, instruction="MCOPY") from refused


def _at_steps(cls: type[Registry], chain: Any, address: str, *, sender: Any = None) -> Steps[Registry]:
    """The steps of :meth:`at`."""
    address = _validate.address(address, "registry address")
    # The code, and the registry's maxTtl (an immutable: what every later ttl is checked against) in the
    # same round trip where the node takes batches: a command that acquires asks once less.
    max_ttl_call = {"to": address, "data": _artifacts.functions("FencingRegistry")["maxTtl"][0]}
    code, max_ttl = yield RPC.code_and_call(address, max_ttl_call)
    if not code:
        raise ContractNotFound(f"no contract code at {address} on chain {chain.chain_id}")
    if not _is_registry_code(code):
        raise ContractNotFound(
            f"the contract at {address} is not a FencingRegistry (its runtime code differs from this SDK's)"
        )
    if sender is None and chain.accounts:
        sender = chain.accounts[0]
    registry = cls(chain, address, sender=chain.signer(sender) if sender is not None else None)
    if max_ttl is not None and len(max_ttl) == 32:
        registry.__dict__["max_ttl"] = int.from_bytes(max_ttl, "big")
    return registry


def _from_deployment_steps(
    cls: type[Registry],
    chain: Any,
    deployment: Deployment | str | os.PathLike[str] | None = None,
    *,
    sender: Any = None,
) -> Steps[Registry]:
    """The steps of :meth:`from_deployment`."""
    from .deployment import Deployment, load

    record = deployment if isinstance(deployment, Deployment) else (yield Blocking(lambda: load(deployment)))
    if record.chain_id != chain.chain_id:
        raise WrongChain(f"the deployment is on chain {record.chain_id}; this node serves chain {chain.chain_id}")
    registry = yield from _at_steps(cls, chain, record.registry, sender=sender)
    identity = yield from registry._identity_steps()
    if int(identity["deployment_block"]) != record.block or (
        record.block_hash is not None and identity["deployment_hash"] != record.block_hash
    ):
        raise WrongChain(
            f"the deployment file names a registry deployed in block {record.block} "
            f"({record.block_hash or 'hash not recorded'}); the registry at {record.registry} on this node "
            f"was deployed in block {identity['deployment_block']} ({identity['deployment_hash']}): "
            "a dev node that was wiped or reset?"
        )
    return registry


class Registry(RegistryContract):
    """A deployed FencingRegistry, and the account transactions are sent as.

    Create with :meth:`deploy` or :meth:`at`; :meth:`connect` gives a view of
    the same registry that sends as another account.
    """

    @classmethod
    @drives(_deploy_steps)
    def deploy(
        cls,
        chain: Any,
        *,
        max_ttl: int = DEFAULT_MAX_TTL,
        sender: Any = None,
        namespaces: Mapping[str, str] | None = None,
    ) -> Registry:
        """Deploy a new FencingRegistry whose leases last at most ``max_ttl`` seconds.

        ``sender`` (default: the chain's first account) pays for deployment
        and is the default sender of the returned registry. It gains no
        privilege: the registry has no owner. ``namespaces`` assigns
        namespaces to their admins at deployment (``{"prod": admin_address}``):
        the only way a namespace other than an address namespace
        (:func:`~chainfence.namespaces.address_namespace`) ever has an admin. Address-shaped prefixes
        cannot be assigned (:class:`~chainfence.errors.InvalidNamespace`).
        """
        return cast(
            "Registry", chain._run(_deploy_steps(cls, chain, max_ttl=max_ttl, sender=sender, namespaces=namespaces))
        )

    @classmethod
    @drives(_at_steps)
    def at(cls, chain: Any, address: str, *, sender: Any = None) -> Registry:
        """The FencingRegistry already deployed at ``address``.

        Raises :class:`~chainfence.errors.ContractNotFound` if there is no
        code there, or code that is not this SDK's FencingRegistry.
        """
        return cast("Registry", chain._run(_at_steps(cls, chain, address, sender=sender)))

    @classmethod
    @drives(_from_deployment_steps)
    def from_deployment(
        cls,
        chain: Any,
        deployment: Deployment | str | os.PathLike[str] | None = None,
        *,
        sender: Any = None,
    ) -> Registry:
        """The registry a deployment file names (default: ``$CHAINFENCE_DEPLOYMENT`` or
        ``.chainfence/deployment.json``), after checking it belongs to ``chain``.

        Raises :class:`~chainfence.errors.WrongChain` if the file was written
        for another chain, or for an earlier incarnation of this dev chain
        (the registry's deployment block is not the one recorded), and
        :class:`~chainfence.errors.ContractNotFound` if the registry is gone.
        """
        return cast("Registry", chain._run(_from_deployment_steps(cls, chain, deployment, sender=sender)))

    def connect(self, account: Any) -> Self:
        """The same registry, sending transactions as ``account`` (an address the chain holds a key for)."""
        return super().connect(account)  # type: ignore[no-any-return]

    def batched(self, *, max_items: int = MAX_MANY, window: float = 0.0) -> Batcher:
        """Group commit for the sender's calls: the :class:`~chainfence.batching.Batcher` that gathers
        the acquisitions, renewals and releases its agents (threads) make at the same time into one
        transaction, each with its own outcome (not all or nothing). One per sender and settings,
        shared: every call of ``registry.batched()`` on this chain returns the same batcher.

        Opt-in: the registry's own methods still send each call alone. ``max_items`` (1 to 64)
        bounds a transaction; ``window`` (seconds, default 0) pauses before each send to gather
        more: by default a batch goes out as soon as the previous one settled. Needs no chain.
        """
        from .batching import batcher_of

        return batcher_of(self, max_items=max_items, window=window)

    def namespace(self, prefix: str | None = None) -> Namespace:
        """The namespace ``prefix`` (the text before a name's first ``/``) of this registry, read and
        governed as this registry's sender: its policy, allowlist, admin handover, and the admin's
        revoke and grant (:class:`~chainfence.namespaces.Namespace`). ``prefix`` None: the sender's
        address namespace (``"0x"`` and its 40 lowercase hex digits), its own from the start. Asks
        nothing of the chain."""
        from .namespaces import Namespace, address_namespace

        return Namespace(self, address_namespace(self._require_sender()) if prefix is None else prefix)

    def workset(self, name: str | bytes) -> Workset:
        """The workset ``name`` of this registry, as this registry's sender: claim its items, read,
        renew, release and complete a claim by item, and (its namespace's admin) revoke and grant
        items (:class:`~chainfence.claims.Workset`). Asks nothing of the chain."""
        from .claims import Workset

        return Workset(self, name)

    if not TYPE_CHECKING:  # the names 0.2 retired, served until 0.3 with a warning (never seen by a type checker)

        def __getattr__(self, name: str) -> Any:
            from ._sdk import retired

            return _moved.retired(self, name, retired.REGISTRY)

    # ------------------------------------------------------------------
    # Lease operations (transactions)
    # ------------------------------------------------------------------

    def _acquire_steps(
        self,
        resource: str,
        ttl: int,
        *,
        confirmations: int | None = None,
        wait: float | None = None,
        exclusive: bool = False,
    ) -> Steps[Lease]:
        """The steps of :meth:`acquire`."""
        _validate.publishable(resource)
        if not isinstance(exclusive, bool):
            raise InvalidInput(f"exclusive must be a bool, got {type(exclusive).__name__} {exclusive!r}")
        seconds = _validate.wait(wait)
        ttl = _validate.ttl(ttl, (yield from self._max_ttl_steps()))
        sender = self._require_sender()
        if not seconds:
            return (yield from self._acquire_one_steps(resource, ttl, sender, confirmations, exclusive=exclusive))
        return (
            yield from self._acquire_waiting_steps(resource, ttl, sender, confirmations, seconds, exclusive=exclusive)
        )

    @drives(_acquire_steps)
    def acquire(
        self,
        resource: str,
        ttl: int,
        *,
        confirmations: int | None = None,
        wait: float | None = None,
        exclusive: bool = False,
    ) -> Lease:
        """Acquire ``resource`` for ``ttl`` seconds of chain time; return the :class:`Lease`.

        The lease carries a new fencing token, higher than every token the
        registry issued before. If the sender already holds the resource it
        gets a new token too (its earlier incarnation is fenced off), unless
        ``exclusive=True``: then the sender's own live lease refuses it like
        anyone else's (:class:`~chainfence.errors.LeaseHeld` naming the sender
        as holder; the registry's ``acquireExclusive``). Two processes
        sharing one key use it to run one at a time: the second is refused
        instead of fencing off the first. With ``wait=`` an exclusive
        acquisition waits for the sender's own lease to end too.

        With ``confirmations`` (default: the chain's setting) it returns only
        once the acquiring transaction is that many blocks deep and the lease
        is still the sender's.

        Raises :class:`~chainfence.errors.LeaseHeld` while someone else holds
        a live lease, :class:`~chainfence.errors.InvalidResourceName` or
        :class:`~chainfence.errors.InvalidTtl` on bad input (nothing sent).

        With ``wait=seconds`` a held resource is waited for, up to that many
        seconds of this machine's monotonic clock: the acquisition is sent
        once the resource reads free (released, expired by chain time, or
        never held), and ``LeaseHeld`` (the holder's lease, as read last) is
        raised when the wait ends first. A namespace's lock-delay after an
        expiry is waited out too, by chain time (``LockDelayed`` when the
        wait ends within it); a namespace that does not admit the sender
        raises :class:`~chainfence.errors.NotAdmitted` at once. No gas is
        spent waiting: nothing is sent while the resource reads held, and
        the send's preflight refuses without sending when another waiter got
        there first (then it waits again). The waiter polls the head once
        per poll interval (half the block time; 50 ms on anvil), reads the
        registry's events for the resource in each new block, and wakes at
        the lease's expiry; it takes a released resource within about one
        block. ``wait=None`` or ``0`` (the default) does not wait; anything
        but a number from 0 to a year is
        :class:`~chainfence.errors.InvalidInput` (nothing sent).

        Fairness: none beyond a random pause (up to a quarter block) before
        sending, which keeps waiters from sending at the same instant. The
        registry keeps no queue: the first acquisition mined after a release
        wins, so a waiter may lose to one that started waiting later. The
        waiters of one :class:`~chainfence.Chain` send for a resource one at
        a time, so they never send an acquisition another's made fail; two
        waiters of different processes can still both pass their preflights
        (the second reverts, paying for it, and waits again: measured in
        ``docs/benchmarks/history.md``, "The turn across processes"). For
        first-come-first-served, queue outside
        the registry (a ticket per waiter from a table or a queue service;
        each acquires when its ticket is next) and fence with the token as
        usual.

        If the transaction was mined but did not reach its confirmations in
        time, :class:`~chainfence.errors.NotConfirmed` carries the ``lease``
        it created, so that it is never forgotten; so does a chain error
        (:class:`~chainfence.errors.NodeUnreachable`, ...) in the read that
        checks, once it is deep enough, that the lease is still current.
        """
        return self._drive(
            self._acquire_steps(resource, ttl, confirmations=confirmations, wait=wait, exclusive=exclusive)
        )

    def _acquire_waiting_steps(
        self,
        resource: str,
        ttl: int,
        sender: str,
        confirmations: int | None,
        seconds: float,
        *,
        exclusive: bool = False,
    ) -> Steps[Lease]:
        """acquire(wait=seconds) as steps: sent at once, then waited for while refused for now (``_waiting``)."""
        resource_id = _validate.resource_id(resource)
        timer = self._wait_timer
        pace = yield from _waiting.pace_steps(self.chain)
        return (
            yield from _waiting.acquire_waiting_steps(
                send=lambda: self._acquire_one_steps(resource, ttl, sender, confirmations, exclusive=exclusive),
                ready=lambda: self.chain._sender.ready_steps(sender),
                read=lambda: self._lease_info_steps(resource, resource_id),
                # An exclusive acquisition treats the sender's own live lease as held, like the registry.
                free=lambda info: not info.live or (info.holder == sender and not exclusive),
                follower=lambda: _waiting.follow_steps(self.chain, self.address, resource_id, timer, pace),
                now=self.chain._now_steps,
                timer=timer,
                pace=pace,
                wait=seconds,
                turn=_waiting.turn_key(self.address, resource_id),
                # The embedded chain lives in this process: its waiters share one Chain, in the turn above.
                host_turn=None
                if self.chain.rpc.embedded
                else f"{self.chain.chain_id}:{_waiting.turn_key(self.address, resource_id)}",
            )
        )

    def _acquire_one_steps(
        self, resource: str, ttl: int, sender: str, confirmations: int | None, *, exclusive: bool = False
    ) -> Steps[Lease]:
        """One acquisition (validated arguments): preflight, send, confirm, check. ``exclusive``: the
        registry's ``acquireExclusive``, which the sender's own live lease refuses too.

        An interrupt (``KeyboardInterrupt``, ``asyncio.CancelledError``) that lands once the
        transaction may have reached the node is re-raised only after the transaction is settled
        and the lease it acquired released (:mod:`chainfence._sdk.interrupted`).
        """
        acquired: list[Lease] = []
        try:
            return (
                yield from self._acquire_once_steps(resource, ttl, sender, confirmations, acquired, exclusive=exclusive)
            )
        except BaseException as interrupt:
            if not _sending.interrupted(interrupt):
                raise
            yield from settle_steps(
                self,
                interrupt,
                f"the acquisition of {resource!r}",
                acquired,
                lambda receipt: [cast(Lease, self._lease_from_receipt(receipt, resource=resource, ttl=ttl))],
            )
            raise

    def _acquire_once_steps(
        self,
        resource: str,
        ttl: int,
        sender: str,
        confirmations: int | None,
        acquired: list[Lease],
        *,
        exclusive: bool = False,
    ) -> Steps[Lease]:
        data = self._encode("acquireExclusive" if exclusive else "acquire", [resource, ttl])
        seen = self._seen()
        before = seen.before(_validate.resource_id(resource))
        sent = _keepalive.lease_clock()  # where a keep-alive's safe deadline counts from: before the send
        try:
            receipt = yield from self.chain._transact_steps(
                sender, self.address, data, resource=resource, confirmations=confirmations
            )
        except NotConfirmed as unconfirmed:
            unconfirmed.lease = self._lease_from_receipt(unconfirmed.receipt, resource=resource, ttl=ttl)
            if unconfirmed.lease is not None:
                unconfirmed.lease._sent_at = sent
            logger.warning(
                "acquired but unconfirmed resource=%s token=%s tx=%s",
                resource,
                unconfirmed.lease.token if unconfirmed.lease else None,
                unconfirmed.tx_hash,
            )
            raise
        lease = self._lease_from_receipt(receipt, resource=resource, ttl=ttl)
        if lease is None:  # pragma: no cover - a successful acquire always logs LeaseAcquired
            raise ChainError(f"transaction {receipt['transactionHash'].to_0x_hex()} emitted no LeaseAcquired event")
        lease._sent_at = sent
        acquired.append(lease)
        k = self.chain.confirmations if confirmations is None else confirmations
        try:
            seen.lease(
                before,
                lease.resource_id,
                lease.token,
                lease.holder,
                resource,
                issued=True,
                record=k >= self.chain.confirmations,  # only what is as deep as this chain requires
            )
        except ChainRolledBack as rolled_back:
            rolled_back.lease = lease  # it exists on this chain: never forget it
            raise
        if k:
            # The lease may have ended while we waited for depth (a short ttl).
            try:
                yield from self._check_token_steps(resource, lease.token)
            except TokenNotCurrent as lost:
                lost.add_note(f"acquired in block {lease.block_number}, lost before {k} confirmations")
                raise
            except ChainError as unchecked:  # it landed, k deep; only the check failed: never forget it
                unchecked.lease = lease
                unchecked.add_note(
                    f"token {lease.token} was acquired (tx {lease.tx_hash}, block {lease.block_number}) but could "
                    "not be checked afterwards; the error's `lease` is it: release it or use it"
                )
                raise
        logger.info(
            "acquired resource=%s token=%d holder=%s expires_at=%d reason=%s tx=%s",
            resource,
            lease.token,
            lease.holder,
            lease.expires_at,
            lease.reason.name.lower(),
            lease.tx_hash,
        )
        return lease

    def _renew_steps(
        self, resource: str, token: int, ttl: int, *, progress: Any = None, confirmations: int | None = None
    ) -> Steps[int]:
        """The steps of :meth:`renew`."""
        resource_id = _validate.resource_id(resource)
        return (yield from self._renew_by_id_steps(resource, resource_id, token, ttl, progress, confirmations))

    @drives(_renew_steps)
    def renew(
        self, resource: str, token: int, ttl: int, *, progress: Any = None, confirmations: int | None = None
    ) -> int:
        """Extend the sender's live lease on ``resource`` (with ``token``) to now + ``ttl``; return the new expiry.

        ``progress`` (optional) is a marker of how far the work has come,
        recorded on-chain in the ``LeaseRenewed`` event for a watchdog
        (:func:`chainfence.audit.watchdog.stuck`, ``chainfence stuck``) to tell a
        holder that renews but no longer advances: ``bytes`` of 1 to 32 bytes
        (right-padded with zeros), an ``int`` counter (big-endian), or a
        ``str`` (its keccak256). Anything else, or a marker of all zeros, is
        :class:`~chainfence.errors.InvalidInput` and nothing is sent.
        Without it a renewal logs a zero marker: "nothing to report".
        """
        return self._drive(self._renew_steps(resource, token, ttl, progress=progress, confirmations=confirmations))

    def _release_steps(self, resource: str, token: int, *, confirmations: int | None = None) -> Steps[None]:
        """The steps of :meth:`release`."""
        yield from self._release_by_id_steps(resource, _validate.resource_id(resource), token, confirmations)

    @drives(_release_steps)
    def release(self, resource: str, token: int, *, confirmations: int | None = None) -> None:
        """End the sender's live lease on ``resource`` with ``token``. An old token never frees a newer lease."""
        self._drive(self._release_steps(resource, token, confirmations=confirmations))

    def _complete_steps(
        self, resource: str, token: int, result: bytes, *, confirmations: int | None = None
    ) -> Steps[bytes]:
        """The steps of :meth:`complete`."""
        resource_id = _validate.resource_id(resource)
        return (yield from self._complete_by_id_steps(resource, resource_id, token, result, confirmations))

    @drives(_complete_steps)
    def complete(self, resource: str, token: int, result: bytes, *, confirmations: int | None = None) -> bytes:
        """Record the result of the work done under ``token``, only while ``token`` is current.

        ``result`` is the result itself (its keccak256 is recorded) or a
        32-byte digest you computed. Returns the digest recorded in the
        ``LeaseCompleted`` event. A holder that lost its lease gets the
        registry's refusal (:class:`~chainfence.errors.StaleToken`,
        :class:`~chainfence.errors.LeaseExpired`, ...) and nothing is recorded.
        """
        return self._drive(self._complete_steps(resource, token, result, confirmations=confirmations))

    def _lease_from_tx_steps(
        self, tx_hash: str, *, item: int | None = None, resource: str | None = None
    ) -> Steps[Lease | None]:
        """The steps of :meth:`lease_from_tx`."""
        from . import batching as _batching

        tx_hash = _batching._tx_hash(tx_hash)
        if resource is not None:
            _validate.resource_id(resource)
        receipt = yield RPC.receipt(tx_hash)
        if receipt is None:
            return None
        tx = yield RPC.transaction(tx_hash)
        if tx is None or receipt["status"] != 1 or tx.get("to") != self.address:
            return None
        if _batching.is_batch(tx):
            items = _batching.items_of(self, tx_hash, receipt, tx, resource=resource)
            assert items is not None
            return _batching.select_item(items, tx_hash, item=item, resource=resource, acquisitions=True).lease
        data = bytes(tx["input"])
        functions = _artifacts.functions("FencingRegistry")
        if data[:4] not in (functions["acquire"][0], functions["acquireExclusive"][0]):  # the same arguments
            return None
        if item not in (None, 0):
            raise InvalidInput(f"transaction {tx_hash} is one acquisition (item 0), not a batch: got item={item!r}")
        try:
            name, ttl = abi_decode(["bytes", "uint256"], data[4:])  # the name as bytes: it may not be UTF-8
        except Exception:
            return None
        lease = self._lease_from_receipt(
            receipt, resource=_names.decode(bytes(name)) or _names.display(bytes(name)), ttl=ttl
        )
        if lease is not None and resource is not None and lease.resource_id != _validate.resource_id(resource):
            raise InvalidInput(f"transaction {tx_hash} acquired {lease.resource!r}, not {resource!r}")
        return lease

    @drives(_lease_from_tx_steps)
    def lease_from_tx(self, tx_hash: str, *, item: int | None = None, resource: str | None = None) -> Lease | None:
        """The lease a mined acquisition created, or None (not mined, failed, or not an acquisition).

        For reconciling after :class:`~chainfence.errors.OutcomeUnknown`:
        look up every candidate hash before acquiring again.

        A batch transaction (group commit, :meth:`batched`) holds several operations: ``item``
        (its position: the ``item`` of the caller's ``OutcomeUnknown``) or ``resource`` (the only
        acquisition of that name in it) says whose lease; None if that acquisition was refused
        (:meth:`batch_item` gives its typed refusal). A batch with several acquisitions and neither
        raises :class:`~chainfence.errors.InvalidInput`, as does a ``resource`` the transaction did not
        acquire: never another operation's lease.
        """
        return self._drive(self._lease_from_tx_steps(tx_hash, item=item, resource=resource))

    def _batch_items_steps(self, tx_hash: str, *, resource: str | None = None) -> Steps[list[BatchItem] | None]:
        """The steps of :meth:`batch_items`."""
        from . import batching as _batching

        return (yield from _batching.batch_items_steps(self, tx_hash, resource=resource))  # type: ignore[no-any-return]

    @drives(_batch_items_steps)
    def batch_items(self, tx_hash: str, *, resource: str | None = None) -> list[BatchItem] | None:
        """Every operation of the batch transaction ``tx_hash`` (group commit: :meth:`batched`), each with
        its own outcome (:class:`~chainfence.batching.BatchItem`: an acquisition's lease, a renewal's
        expiry, the typed refusal of one the registry refused), in order; None when it is not mined,
        mined reverted (none of its operations did anything) or not a batch of this registry.
        ``resource``: the name renewals and releases of it are shown by (the transaction holds their id)."""
        return self._drive(self._batch_items_steps(tx_hash, resource=resource))

    def _batch_item_steps(
        self, tx_hash: str, *, item: int | None = None, resource: str | None = None
    ) -> Steps[BatchItem | None]:
        """The steps of :meth:`batch_item`."""
        items = yield from self._batch_items_steps(tx_hash, resource=resource)
        if items is None:
            return None
        from . import batching as _batching

        return _batching.select_item(items, tx_hash, item=item, resource=resource)

    @drives(_batch_item_steps)
    def batch_item(self, tx_hash: str, *, item: int | None = None, resource: str | None = None) -> BatchItem | None:
        """One operation of the batch transaction ``tx_hash`` with its own outcome: the one at position
        ``item`` (the ``item`` of the caller's :class:`~chainfence.errors.OutcomeUnknown`), or the only
        one on ``resource``; :meth:`~chainfence.batching.BatchItem.result` gives its lease (or expiry)
        or raises its typed refusal. None when the transaction is not mined, mined reverted or not a
        batch of this registry; :class:`~chainfence.errors.InvalidInput` when the choice is not one
        operation (never another's)."""
        return self._drive(self._batch_item_steps(tx_hash, item=item, resource=resource))

    # ------------------------------------------------------------------
    # Views
    # ------------------------------------------------------------------
    #
    # ``block=None`` (the default): the latest state, judged at chain.now().
    # ``block=<number or tag>``: the state and the time of that block.

    def _latest_token_steps(self, *, block: str | int | None = None) -> Steps[int]:
        """The steps of :meth:`latest_token`."""
        try:
            return (yield from self._read_latest_token_steps(block=block))
        except ChainRolledBack as lost:
            logger.warning("%s; reading it again before believing it", lost)
        return (yield from self._read_latest_token_steps(block=block))

    def _read_latest_token_steps(self, *, block: str | int | None = None) -> Steps[int]:
        """One read of :meth:`latest_token`."""
        seen = self._seen()
        before = seen.before()
        latest = yield from self._call_uint_steps("latestToken", [], block=at_block(block))
        if block is None:
            seen.latest(before, latest, record=self.chain.confirmations == 0)
        return latest

    @drives(_latest_token_steps)
    def latest_token(self, *, block: str | int | None = None) -> int:
        """The highest token issued so far (0 before the first acquisition).

        Raises :class:`~chainfence.errors.ChainRolledBack` if it is below a
        token this SDK has already seen from the registry, and still is when
        read once more (:mod:`chainfence._sdk.rollback`: anvil answers a read at
        ``latest`` from the block before while it mines).
        """
        return self._drive(self._latest_token_steps(block=block))

    def _lease_of_steps(self, resource: str, *, block: str | int | None = None) -> Steps[LeaseInfo | None]:
        """The steps of :meth:`lease_of`."""
        info = yield from self._last_lease_steps(resource, block=block)
        return info if info is not None and info.live else None

    @drives(_lease_of_steps)
    def lease_of(self, resource: str, *, block: str | int | None = None) -> LeaseInfo | None:
        """The live lease of ``resource``, or None if nobody holds it (free, expired or released)."""
        return self._drive(self._lease_of_steps(resource, block=block))

    @drives(RegistryContract._last_lease_steps)
    def last_lease(
        self, resource: str | None = None, *, resource_id: bytes | None = None, block: str | int | None = None
    ) -> LeaseInfo | None:
        """The latest lease of ``resource`` whatever its state, or None if it was never held.

        A lease whose expiry has passed by :meth:`Chain.now <chainfence.Chain.now>`
        reads EXPIRED even if no block was mined since (``expired_unmined``). A resource known only
        by its id (``keccak256(name)``, as guards and audits know resources whose names the chain never
        told them): ``resource_id=`` instead of the name (one of the two, else
        :class:`~chainfence.errors.InvalidInput`).
        """
        return self._drive(self._last_lease_steps(resource, resource_id=resource_id, block=block))

    def _check_current_steps(
        self, resource: str, token: int, *, block: str | int | None = None, confirmations: int = 0
    ) -> Steps[LeaseInfo]:
        """The steps of :meth:`check_current`."""
        return (yield from self._check_token_steps(resource, token, block=block, confirmations=confirmations))

    @drives(_check_current_steps)
    def check_current(
        self, resource: str, token: int, *, block: str | int | None = None, confirmations: int = 0
    ) -> LeaseInfo:
        """The live lease of ``token``; raises a :class:`~chainfence.errors.TokenNotCurrent` subclass if it is not.

        The SDK's one way to judge a token (the guard's is ``Guard.check``): the answer is the reason
        (``StaleToken``, ``LeaseExpired``, ``LeaseReleased``, ``LeaseRevoked``, ...), never a bare
        False that a caller must go back and ask about; ``try: check_current(...) except
        TokenNotCurrent:`` is the yes-or-no. (0.2 folded ``is_current``, the bool, into it.)

        The verdict a verifier needs: ``token`` is the resource's latest token,
        neither released nor expired — expired counted at :meth:`Chain.now
        <chainfence.Chain.now>`, so a lease that ran out since the latest
        block is :class:`~chainfence.errors.LeaseExpired` with
        ``no_block_since`` set. With ``confirmations=k`` the block that
        issued the token must also have ``k`` blocks on top
        (:class:`~chainfence.errors.TokenNotConfirmed` until then): a reorg
        shallower than ``k`` cannot take it back.
        """
        return self._drive(self._check_current_steps(resource, token, block=block, confirmations=confirmations))

    @drives(RegistryContract._eip712_domain_steps)
    def eip712_domain(self) -> EIP712Domain:
        """The registry's EIP-712 domain, from its ERC-5267 ``eip712Domain()``: what fenced
        requests are signed in (name, version, chain id, this registry)."""
        return self._drive(self._eip712_domain_steps())

    @drives(RegistryContract._deployment_block_steps)
    def deployment_block(self) -> int:
        """The block this registry was deployed in (from the registry itself)."""
        return self._drive(self._deployment_block_steps())

    @drives(RegistryContract._identity_steps)
    def identity(self) -> dict[str, str]:
        """What makes this registry's token space unique: chain id, address, and the block it was
        deployed in with that block's hash.

        Two in-process chains share a chain id and, deployed the same way, a
        registry address; a dev node that was wiped and redeployed does too.
        The deployment block's hash tells them apart. (The genesis hash does
        not serve: anvil rebuilds block 0 with a new hash when it reloads its
        state, so a restarted node would look like another chain.)
        """
        return self._drive(self._identity_steps())

    def _ending_steps(self, resource: str, token: int) -> Steps[End | None]:
        """The steps of :meth:`ending`."""
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        try:
            info = yield from self._lease_info_steps(resource, resource_id)
        except ChainRolledBack:
            return End.ROLLED_BACK
        if info.status is LeaseStatus.UNHELD or info.token < token:
            return None  # never issued for it, as far as this chain knows
        if info.token == token:
            return endings.of_status(info.status)
        first = yield from self._deployment_block_steps()
        return (yield from self._successor_end_steps(resource_id, token, first))

    @drives(_ending_steps)
    def ending(self, resource: str, token: int) -> End | None:
        """How the lease of ``token`` on ``resource`` ended, in the words of :mod:`chainfence.endings`
        (expired, released, completed, superseded, revoked, granted, rolled_back); None while it is
        live, and for a token never issued for ``resource``. Reads the resource's lease, and its
        successor's acquisition when a higher token was issued (the reason it was issued for)."""
        return self._drive(self._ending_steps(resource, token))

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other)

    def __hash__(self) -> int:
        return super().__hash__()

    def __repr__(self) -> str:
        return f"<Registry {self.address} chain_id={self.chain.chain_id} sender={self.sender}>"


class AsyncRegistry(AsyncFace[Registry], core=Registry):
    """:class:`Registry` for asyncio: the same operations and errors, awaited (the same steps, run over
    an :class:`~chainfence.aio.AsyncChain`).

    Create with :meth:`deploy`, :meth:`at` or :meth:`from_deployment`; :meth:`connect` sends as another
    account. Leases come back as :class:`~chainfence.aio.AsyncLease`.
    """

    def __init__(self, chain: Any, registry: Registry):
        #: The :class:`~chainfence.aio.AsyncChain` this registry's steps run over.
        self.chain = chain
        #: The sync registry whose steps this one runs (and whose caches it shares).
        self.registry = registry

    @property
    def _core(self) -> Registry:
        return self.registry

    @property
    def _driver(self) -> AsyncDriver:
        return self.chain  # type: ignore[no-any-return]

    @classmethod
    def _from_core(cls, core: Registry, driver: AsyncDriver) -> AsyncRegistry:
        return cls(driver, core)

    @classmethod
    def _ready_steps(cls, core: Registry) -> Steps[None]:
        """``max_ttl`` is read here, never on access (an asyncio view never blocks)."""
        yield from core._max_ttl_steps()

    deploy = aconstructor(Registry.deploy)
    at = aconstructor(Registry.at)
    from_deployment = aconstructor(Registry.from_deployment)
    connect = local(Registry.connect)
    batched = local(Registry.batched)

    address = mirrored("address")
    sender = mirrored("sender")
    deployed_block = mirrored("deployed_block")
    max_ttl = mirrored("max_ttl", "The longest ttl this registry accepts: read by at() and deploy(), never on access.")

    # -- lease operations
    acquire = awaiting(Registry.acquire, AsyncLease)
    renew = awaiting(Registry.renew)
    release = awaiting(Registry.release)
    complete = awaiting(Registry.complete)
    lease_from_tx = awaiting(Registry.lease_from_tx, AsyncLease, optional=True)
    batch_items = awaiting(Registry.batch_items)
    if TYPE_CHECKING:
        batch_item = awaiting(Registry.batch_item, AsyncBatchItem, optional=True)
    else:  # named, not imported: group commit loads when a batch is read
        batch_item = awaiting(Registry.batch_item, "AsyncBatchItem", optional=True)

    # -- views
    latest_token = awaiting(Registry.latest_token)
    lease_of = awaiting(Registry.lease_of)
    last_lease = awaiting(Registry.last_lease)
    check_current = awaiting(Registry.check_current)
    eip712_domain = awaiting(Registry.eip712_domain)
    deployment_block = awaiting(Registry.deployment_block)
    identity = awaiting(Registry.identity)
    ending = awaiting(Registry.ending)

    # -- handles: a namespace, a workset
    namespace = local(Registry.namespace)
    workset = local(Registry.workset)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            from ._sdk import retired

            return _moved.retired(self, name, retired.ASYNC_REGISTRY)

    def __repr__(self) -> str:
        return f"<AsyncRegistry {self.address} chain_id={self.chain.chain_id} sender={self.sender}>"


def _namespace_assignments(chain: Any, namespaces: Mapping[str, str] | None) -> tuple[list[str], list[str]]:
    """Deployment's (prefixes, admins), checked: nothing is sent on bad input."""
    if namespaces is None:
        return [], []
    if not isinstance(namespaces, Mapping):
        raise InvalidInput(f"namespaces must be a mapping of prefix to admin address, got {type(namespaces).__name__}")
    prefixes, admins = [], []
    for prefix, admin in namespaces.items():
        prefixes.append(_validate.assignable_prefix(prefix))
        admins.append(_validate.address(admin, f"admin of namespace {prefix!r}"))
    return prefixes, admins


def _first_account(chain: Any) -> str:
    if not chain.accounts:
        raise UnknownAccount("the chain holds no keys: pass private_key= to Chain.connect")
    return str(chain.accounts[0])


def _is_registry_code(code: bytes) -> bool:
    """Whether ``code`` is the FencingRegistry runtime code, immutables aside."""
    artifact = _artifacts.load()
    expected = bytearray.fromhex(artifact["deployedBytecode"][2:])
    if len(code) != len(expected):
        return False
    found = bytearray(code)
    for references in artifact["immutableReferences"].values():
        for ref in references:
            start, end = ref["start"], ref["start"] + ref["length"]
            found[start:end] = expected[start:end] = bytes(ref["length"])
    return found == expected
