"""The SDK side of the FencingRegistry contract: acquire, renew, release, views.

::

    registry = Registry.deploy(chain)            # or Registry.at(chain, address)
    a = registry.connect(alice)                  # same registry, transactions sent as alice
    lease = a.acquire("reports/daily", ttl=30)   # Lease: resource, token, holder, expires_at
    with a.lease("reports/daily", ttl=30) as lease:
        ...                                      # released on exit

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
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_utils import keccak, to_checksum_address

from . import _names, _validate, _waiting, endings
from . import keepalive as _keepalive
from ._effects import RPC, Shielded, Steps
from ._node import artifacts as _artifacts
from ._node import events as _events
from ._node import sending as _sending
from .chain import Chain
from .endings import End, LocalEnd
from .errors import (
    ChainError,
    ChainfenceError,
    ChainRolledBack,
    ContractNotFound,
    InvalidInput,
    InvalidMaxTtl,
    NotConfirmed,
    TokenNotConfirmed,
    TokenNotCurrent,
    UnknownAccount,
    WrongChain,
)
from .lease import AcquireReason, Lease, LeaseInfo, LeaseSet, LeaseStatus, judge

if TYPE_CHECKING:
    from .deployment import Deployment
    from .fenced_requests import EIP712Domain
    from .namespaces import NamespacePolicy

logger = logging.getLogger(__name__)

__all__ = ["Registry"]

#: Most items one claim may list (the contract's bound).
MAX_CLAIM_ITEMS = 512

#: Most resources one acquire_many may list (the contract's bound).
MAX_MANY = 64

#: setNamespacePolicy's ``fields``: which fields of the policy a call sets (IFencingRegistry.sol).
POLICY_MAX_TTL, POLICY_LOCK_DELAY, POLICY_ADMISSION = 1, 2, 4

#: Default maximum lease length of a new registry: one day.
DEFAULT_MAX_TTL = 86_400


class Registry:
    """A deployed FencingRegistry, and the account transactions are sent as.

    Create with :meth:`deploy` or :meth:`at`; :meth:`connect` gives a view of
    the same registry that sends as another account.
    """

    def __init__(self, chain: Chain, address: str, *, sender: str | None = None):
        self.chain = chain
        self.address = _validate.address(address, "registry address")
        self.sender = sender
        #: Block of the deploying transaction, when this object deployed it.
        self.deployed_block: int | None = None
        #: The clock, sleep and randomness ``acquire(wait=...)`` waits with (tests put their own here).
        self._wait_timer: _waiting.Timer = _waiting.SYSTEM

    # ------------------------------------------------------------------
    # Construction
    # ------------------------------------------------------------------

    @classmethod
    def deploy(
        cls,
        chain: Chain,
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
        (:meth:`namespace_of`) ever has an admin. Address-shaped prefixes
        cannot be assigned (:class:`~chainfence.errors.InvalidNamespace`).
        """
        return chain._run(cls._deploy_steps(chain, max_ttl=max_ttl, sender=sender, namespaces=namespaces))

    @classmethod
    def _deploy_steps(
        cls, chain: Chain, *, max_ttl: int, sender: Any, namespaces: Mapping[str, str] | None = None
    ) -> Steps[Registry]:
        if isinstance(max_ttl, bool) or not isinstance(max_ttl, int) or not 1 <= max_ttl <= 2**32 - 1:
            raise InvalidMaxTtl(max_ttl=max_ttl)
        deployer = chain.signer(sender if sender is not None else _first_account(chain))
        prefixes, admins = _namespace_assignments(chain, namespaces)
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

    @classmethod
    def at(cls, chain: Chain, address: str, *, sender: Any = None) -> Registry:
        """The FencingRegistry already deployed at ``address``.

        Raises :class:`~chainfence.errors.ContractNotFound` if there is no
        code there, or code that is not this SDK's FencingRegistry.
        """
        return chain._run(cls._at_steps(chain, address, sender=sender))

    @classmethod
    def _at_steps(cls, chain: Chain, address: str, *, sender: Any) -> Steps[Registry]:
        address = _validate.address(address, "registry address")
        code = yield RPC.code(address)
        if not code:
            raise ContractNotFound(f"no contract code at {address} on chain {chain.chain_id}")
        if not _is_registry_code(code):
            raise ContractNotFound(
                f"the contract at {address} is not a FencingRegistry (its runtime code differs from this SDK's)"
            )
        if sender is None and chain.accounts:
            sender = chain.accounts[0]
        return cls(chain, address, sender=chain.signer(sender) if sender is not None else None)

    @classmethod
    def from_deployment(
        cls, chain: Chain, deployment: Deployment | str | os.PathLike[str] | None = None, *, sender: Any = None
    ) -> Registry:
        """The registry a deployment file names (default: ``$CHAINFENCE_DEPLOYMENT`` or
        ``.chainfence/deployment.json``), after checking it belongs to ``chain``.

        Raises :class:`~chainfence.errors.WrongChain` if the file was written
        for another chain, or for an earlier incarnation of this dev chain
        (the registry's deployment block is not the one recorded), and
        :class:`~chainfence.errors.ContractNotFound` if the registry is gone.
        """
        from .deployment import Deployment, load

        record = deployment if isinstance(deployment, Deployment) else load(deployment)
        if record.chain_id != chain.chain_id:
            raise WrongChain(f"the deployment is on chain {record.chain_id}; this node serves chain {chain.chain_id}")
        registry = cls.at(chain, record.registry, sender=sender)
        identity = registry.identity()
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

    def connect(self, account: Any) -> Registry:
        """The same registry, sending transactions as ``account`` (an address the chain holds a key for)."""
        other = type(self)(self.chain, self.address, sender=self.chain.signer(account))
        # Share what never changes for a deployed registry: saves a call per view.
        for cached in ("max_ttl", "_identity", "_eip712_domain"):
            if cached in self.__dict__:
                other.__dict__[cached] = self.__dict__[cached]
        return other

    # ------------------------------------------------------------------
    # Lease operations (transactions)
    # ------------------------------------------------------------------

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
        :class:`~chainfence.errors.InvalidWait` (nothing sent).

        Fairness: none beyond a random pause (up to a quarter block) before
        sending, which keeps waiters from sending at the same instant. The
        registry keeps no queue: the first acquisition mined after a release
        wins, so a waiter may lose to one that started waiting later. The
        waiters of one :class:`~chainfence.Chain` send for a resource one at
        a time, so they never send an acquisition another's made fail; two
        waiters of different processes can still both pass their preflights
        (the second reverts, paying for it, and waits again: measured in
        ``docs/benchmarks.md``). For first-come-first-served, queue outside
        the registry (a ticket per waiter from a table or a queue service;
        each acquires when its ticket is next) and fence with the token as
        usual.

        If the transaction was mined but did not reach its confirmations in
        time, :class:`~chainfence.errors.NotConfirmed` carries the ``lease``
        it created, so that it is never forgotten; so does a chain error
        (:class:`~chainfence.errors.NodeUnreachable`, ...) in the read that
        checks, once it is deep enough, that the lease is still current.
        """
        seconds, ttl, sender = self._acquire_args(resource, ttl, wait, exclusive)
        if not seconds:
            return self.chain._run(self._acquire(resource, ttl, sender, confirmations, exclusive=exclusive))
        return self.chain._run(
            self._acquire_waiting(resource, ttl, sender, confirmations, seconds, exclusive=exclusive)
        )

    def _acquire_waiting(
        self,
        resource: str,
        ttl: int,
        sender: str,
        confirmations: int | None,
        seconds: float,
        timer: _waiting.Timer | None = None,
        *,
        exclusive: bool = False,
    ) -> Steps[Lease]:
        """acquire(wait=seconds) as steps: sent at once, then waited for while refused for now (``_waiting``)."""
        resource_id = _validate.resource_id(resource)
        timer = self._wait_timer if timer is None else timer
        pace = yield from _waiting.pace_steps(self.chain)
        return (
            yield from _waiting.acquire_waiting(
                send=lambda: self._acquire(resource, ttl, sender, confirmations, exclusive=exclusive),
                ready=lambda: self.chain._sender.ready_steps(sender),
                read=lambda: self._lease_info(resource, resource_id),
                # An exclusive acquisition treats the sender's own live lease as held, like the registry.
                free=lambda info: not info.live or (info.holder == sender and not exclusive),
                follower=lambda: _waiting.follow(self.chain, self.address, resource_id, timer, pace),
                now=self.chain._now_steps,
                timer=timer,
                pace=pace,
                wait=seconds,
                turn=_waiting.turn_key(self.address, resource_id),
            )
        )

    def _acquire_args(
        self, resource: str, ttl: int, wait: float | None, exclusive: bool = False
    ) -> tuple[float, int, str]:
        """acquire()'s arguments checked: (seconds to wait, ttl, sender). Nothing is sent."""
        _validate.publishable(resource)
        if not isinstance(exclusive, bool):
            raise InvalidInput(f"exclusive must be a bool, got {type(exclusive).__name__} {exclusive!r}")
        seconds = _validate.wait(wait)
        ttl = _validate.ttl(ttl, self.max_ttl)
        return seconds, ttl, self._require_sender()

    def _acquire(
        self, resource: str, ttl: int, sender: str, confirmations: int | None, *, exclusive: bool = False
    ) -> Steps[Lease]:
        """One acquisition (validated arguments): preflight, send, confirm, check. ``exclusive``: the
        registry's ``acquireExclusive``, which the sender's own live lease refuses too.

        An interrupt (``KeyboardInterrupt``, ``asyncio.CancelledError``) that lands once the
        transaction may have reached the node is re-raised only after the transaction is settled
        and the lease it acquired released (see :meth:`_after_interrupt`).
        """
        acquired: list[Lease] = []
        try:
            return (yield from self._acquire_once(resource, ttl, sender, confirmations, acquired, exclusive=exclusive))
        except BaseException as interrupt:
            if not _sending.interrupted(interrupt):
                raise
            yield from self._after_interrupt(
                interrupt,
                f"the acquisition of {resource!r}",
                acquired,
                lambda receipt: [self._lease_from_receipt(receipt, resource=resource, ttl=ttl)],
            )
            raise

    def _acquire_once(
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
                yield from self._check_current(resource, lease.token)
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

    def claim(self, workset: str, items: Sequence[str], ttl: int, *, confirmations: int | None = None) -> Lease | None:
        """Claim the first of ``items`` that is free and not done, in one transaction; None if none is.

        The shell-agent recipe without a janitor: an item is free when never
        claimed, released, or expired (a crashed claimant's item is simply
        free again), or when the sender itself holds it: an agent restarted
        with no memory calls ``claim`` again and gets its own item back under a
        new token, fencing off its earlier incarnation. Never trust remembered
        state: claim live. Finish with ``lease.complete(result)``, which marks
        the item done for good (no claim hands it out again) and is refused to
        a claimant that was superseded. Keep one key per agent: two agents
        sharing a key re-claim each other's items.

        Returns the :class:`Lease` (``lease.item``, ``lease.workset``,
        ``lease.token``; ``lease.resource`` is the item's name
        ``"workset»item"``, which every method that takes a name accepts:
        :meth:`renew`, :meth:`release`, :meth:`complete`, :meth:`check_current`,
        :meth:`last_lease`, :meth:`history`), or None when every item is done or held live by
        others (nothing is sent then: the preflight sees it). ``items``: 1 to
        512 distinct names, each 1 to 128 bytes of printable UTF-8, as is
        ``workset``; otherwise :class:`~chainfence.errors.InvalidClaimItems`
        or :class:`~chainfence.errors.InvalidResourceName` and nothing is sent.
        Gas grows with the items scanned before a free one: drop done items
        from the list when you can (``item_lease`` tells).
        """
        items, ttl, sender = self._claim_args(workset, items, ttl)
        return self.chain._run(self._claim_steps(workset, items, ttl, sender, confirmations))

    def _claim_args(self, workset: str, items: Sequence[str], ttl: int) -> tuple[list[str], int, str]:
        """claim()'s arguments checked (for the asyncio registry): (items, ttl, sender). Nothing is sent."""
        from .errors import InvalidClaimItems

        _validate.publishable(workset)
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise InvalidClaimItems(f"items must be a list of names, got {type(items).__name__}")
        items = list(items)
        if not 1 <= len(items) <= MAX_CLAIM_ITEMS:
            raise InvalidClaimItems(count=len(items), max_count=MAX_CLAIM_ITEMS)
        for item in items:
            _validate.publishable(item)
        if len(set(items)) != len(items):
            raise InvalidClaimItems(f"items must be distinct; {len(items) - len(set(items))} repeat")
        return items, _validate.ttl(ttl, self.max_ttl), self._require_sender()

    def _claim_steps(
        self, workset: str, items: list[str], ttl: int, sender: str, confirmations: int | None
    ) -> Steps[Lease | None]:
        """One claim (validated arguments); an interrupt after the send releases what it claimed (see _acquire)."""
        from .errors import NothingToClaim

        data = self._encode("claimNext", [workset, items, ttl])
        claimed: list[Lease] = []
        sent = _keepalive.lease_clock()  # where a keep-alive's safe deadline counts from: before the send
        try:
            try:
                receipt = yield from self.chain._transact_steps(
                    sender, self.address, data, resource=workset, confirmations=confirmations
                )
            except NothingToClaim:
                logger.info("nothing to claim workset=%s items=%d", workset, len(items))
                return None
            lease = self._claimed_lease(receipt, workset, items, ttl)
            lease._sent_at = sent
            claimed.append(lease)
        except BaseException as interrupt:
            if not _sending.interrupted(interrupt):
                raise
            yield from self._after_interrupt(
                interrupt,
                f"the claim of an item of {workset!r}",
                claimed,
                lambda receipt: [self._claimed_lease(receipt, workset, items, ttl)],
            )
            raise
        logger.info(
            "claimed workset=%s item=%s token=%d holder=%s expires_at=%d reason=%s tx=%s",
            workset,
            lease.item,
            lease.token,
            lease.holder,
            lease.expires_at,
            lease.reason.name.lower(),
            lease.tx_hash,
        )
        return lease

    def _claimed_lease(self, receipt: Any, workset: str, items: list[str], ttl: int) -> Lease:
        event = self._event(receipt, _events.Kind.ACQUIRED)
        by_id = {_names.item_id(workset, item): item for item in items}
        item = by_id[event.resource_id]
        return Lease(
            self.connect(event.holder) if event.holder in self.chain.accounts else self,
            resource=_names.item_name(workset, item),
            resource_id=event.resource_id,
            token=event.token,
            holder=event.holder,
            expires_at=event.expires_at,
            ttl=ttl,
            previous_token=event.previous_token,
            reason=AcquireReason(event.reason),
            tx_hash=receipt["transactionHash"].to_0x_hex(),
            block_number=receipt["blockNumber"],
            workset=workset,
            item=item,
        )

    def item_lease(self, workset: str, item: str, *, block: str | int | None = None) -> LeaseInfo | None:
        """The latest claim of work item ``item`` of ``workset`` whatever its state (``status``
        :attr:`~chainfence.LeaseStatus.DONE` once completed), or None if it was never claimed.
        The same as ``last_lease("workset»item")``."""
        return self.last_lease(_names.item_name(workset, item), block=block)

    def renew_item(
        self, workset: str, item: str, token: int, ttl: int, *, progress: Any = None, confirmations: int | None = None
    ) -> int:
        """:meth:`renew` of the claim ``token`` on work item ``item`` of ``workset`` (the same as
        ``renew("workset»item", ...)``); returns the new expiry."""
        return self.renew(_names.item_name(workset, item), token, ttl, progress=progress, confirmations=confirmations)

    def release_item(self, workset: str, item: str, token: int, *, confirmations: int | None = None) -> None:
        """:meth:`release` of the claim ``token`` on work item ``item`` of ``workset``: the item is free
        again (not done)."""
        self.release(_names.item_name(workset, item), token, confirmations=confirmations)

    def complete_item(
        self, workset: str, item: str, token: int, result: bytes, *, confirmations: int | None = None
    ) -> bytes:
        """:meth:`Lease.complete` for a claim known only by its workset, item and token (a shell
        script's ``chainfence complete``): marks the item done, only while ``token`` is its current claim."""
        return self.complete(_names.item_name(workset, item), token, result, confirmations=confirmations)

    def lease_from_tx(self, tx_hash: str) -> Lease | None:
        """The lease a mined acquisition created, or None (not mined, failed, or not an acquisition).

        For reconciling after :class:`~chainfence.errors.OutcomeUnknown`:
        look up every candidate hash before acquiring again.
        """
        return self.chain._run(self._lease_from_tx(tx_hash))

    def _lease_from_tx(self, tx_hash: str) -> Steps[Lease | None]:
        receipt = yield RPC.receipt(tx_hash)
        if receipt is None:
            return None
        tx = yield RPC.transaction(tx_hash)
        if tx is None or receipt["status"] != 1 or tx.get("to") != self.address:
            return None
        data = bytes(tx["input"])
        functions = _artifacts.functions("FencingRegistry")
        if data[:4] not in (functions["acquire"][0], functions["acquireExclusive"][0]):  # the same arguments
            return None
        try:
            name, ttl = abi_decode(["bytes", "uint256"], data[4:])  # the name as bytes: it may not be UTF-8
        except Exception:
            return None
        return self._lease_from_receipt(
            receipt, resource=_names.decode(bytes(name)) or _names.display(bytes(name)), ttl=ttl
        )

    def _lease_from_receipt(self, receipt: Any, *, resource: str, ttl: int) -> Lease | None:
        try:
            event = self._event(receipt, _events.Kind.ACQUIRED)
        except ChainError:
            return None
        holder = event.holder
        owner = self.connect(holder) if holder in self.chain.accounts else self
        return Lease(
            owner,
            resource=resource,
            resource_id=event.resource_id,
            token=event.token,
            holder=holder,
            expires_at=event.expires_at,
            ttl=ttl,
            previous_token=event.previous_token,
            reason=AcquireReason(event.reason),
            tx_hash=receipt["transactionHash"].to_0x_hex(),
            block_number=receipt["blockNumber"],
        )

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
        :class:`~chainfence.errors.InvalidProgress` and nothing is sent.
        Without it a renewal logs a zero marker: "nothing to report".
        """
        return self._renew(resource, _validate.resource_id(resource), token, ttl, progress, confirmations)

    def _renew(
        self, resource: str, resource_id: bytes, token: int, ttl: int, progress: Any, confirmations: int | None
    ) -> int:
        """:meth:`renew` by resource id (a claimed item's id is not the hash of its name)."""
        return self.chain._run(self._renew_steps(resource, resource_id, token, ttl, progress, confirmations))

    def _renew_steps(
        self, resource: str, resource_id: bytes, token: int, ttl: int, progress: Any, confirmations: int | None
    ) -> Steps[int]:
        token = _validate.token(token)
        ttl = _validate.ttl(ttl, self.max_ttl)
        if progress is None:
            function, args = "renew", [resource_id, token, ttl]
        else:
            function, args = "renewWithProgress", [resource_id, token, ttl, _validate.progress(progress)]
        receipt, event = yield from self._lease_tx(function, resource, args, _events.Kind.RENEWED, confirmations)
        expires_at = event.expires_at
        logger.info(
            "renewed resource=%s token=%d expires_at=%d progress=%s tx=%s",
            resource,
            token,
            expires_at,
            "0x" + event.progress.hex() if event.progress and any(event.progress) else "-",
            receipt["transactionHash"].to_0x_hex(),
        )
        return expires_at

    def release(self, resource: str, token: int, *, confirmations: int | None = None) -> None:
        """End the sender's live lease on ``resource`` with ``token``. An old token never frees a newer lease."""
        self._release(resource, _validate.resource_id(resource), token, confirmations)

    def _release(self, resource: str, resource_id: bytes, token: int, confirmations: int | None) -> None:
        """:meth:`release` by resource id."""
        self.chain._run(self._release_steps(resource, resource_id, token, confirmations))

    def _release_steps(self, resource: str, resource_id: bytes, token: int, confirmations: int | None) -> Steps[None]:
        token = _validate.token(token)
        receipt, _ = yield from self._lease_tx(
            "release", resource, [resource_id, token], _events.Kind.RELEASED, confirmations
        )
        logger.info("released resource=%s token=%d tx=%s", resource, token, receipt["transactionHash"].to_0x_hex())

    def complete(self, resource: str, token: int, result: bytes, *, confirmations: int | None = None) -> bytes:
        """Record the result of the work done under ``token``, only while ``token`` is current.

        ``result`` is the result itself (its keccak256 is recorded) or a
        32-byte digest you computed. Returns the digest recorded in the
        ``LeaseCompleted`` event. A holder that lost its lease gets the
        registry's refusal (:class:`~chainfence.errors.StaleToken`,
        :class:`~chainfence.errors.LeaseExpired`, ...) and nothing is recorded.
        """
        return self._complete(resource, _validate.resource_id(resource), token, result, confirmations)

    def _complete(
        self, resource: str, resource_id: bytes, token: int, result: bytes, confirmations: int | None
    ) -> bytes:
        """:meth:`complete` by resource id."""
        return self.chain._run(self._complete_steps(resource, resource_id, token, result, confirmations))

    def _complete_steps(
        self, resource: str, resource_id: bytes, token: int, result: bytes, confirmations: int | None
    ) -> Steps[bytes]:
        token = _validate.token(token)
        if not isinstance(result, (bytes, bytearray)):
            raise InvalidInput(f"result must be bytes (or a 32-byte digest), got {type(result).__name__}")
        digest = bytes(result) if len(result) == 32 else keccak(bytes(result))
        receipt, _ = yield from self._lease_tx(
            "complete", resource, [resource_id, token, digest], _events.Kind.COMPLETED, confirmations
        )
        logger.info(
            "completed resource=%s token=%d result=0x%s tx=%s",
            resource,
            token,
            digest.hex(),
            receipt["transactionHash"].to_0x_hex(),
        )
        return digest

    @contextmanager
    def lease(
        self,
        resource: str,
        ttl: int,
        *,
        confirmations: int | None = None,
        wait: float | None = None,
        exclusive: bool = False,
    ) -> Iterator[Lease]:
        """``with registry.lease(name, ttl) as lease:`` acquire, run the body, release.

        Raises :class:`~chainfence.errors.LeaseHeld` (and the body does not
        run) if someone else holds it — after waiting up to ``wait`` seconds
        for it to become free, as :meth:`acquire` does; with ``exclusive=True``
        also while the sender itself holds it. On exit the lease is released; if it
        expired or was superseded while the body ran, that error is raised
        after a body that succeeded, and added as a note to the body's own
        exception otherwise.
        """
        with self.acquire(resource, ttl, confirmations=confirmations, wait=wait, exclusive=exclusive) as lease:
            yield lease

    # ------------------------------------------------------------------
    # Views
    # ------------------------------------------------------------------
    #
    # ``block=None`` (the default): the latest state, judged at chain.now().
    # ``block=<number or tag>``: the state and the time of that block.

    @functools.cached_property
    def max_ttl(self) -> int:
        """The longest ttl this registry accepts, fixed at deployment."""
        return self.chain._run(self._call_uint("maxTtl", []))

    def latest_token(self, *, block: str | int | None = None) -> int:
        """The highest token issued so far (0 before the first acquisition).

        Raises :class:`~chainfence.errors.ChainRolledBack` if it is below a
        token this SDK has already seen from the registry.
        """
        return self.chain._run(self._latest_token(block=block))

    def _latest_token(self, *, block: str | int | None = None) -> Steps[int]:
        seen = self._seen()
        before = seen.before()
        latest = yield from self._call_uint("latestToken", [], block=_at(block))
        if block is None:
            seen.latest(before, latest, record=self.chain.confirmations == 0)
        return latest

    def lease_of(self, resource: str, *, block: str | int | None = None) -> LeaseInfo | None:
        """The live lease of ``resource``, or None if nobody holds it (free, expired or released)."""
        return self.chain._run(self._lease_of(resource, block=block))

    def _lease_of(self, resource: str, *, block: str | int | None = None) -> Steps[LeaseInfo | None]:
        info = yield from self._last_lease(resource, block=block)
        return info if info is not None and info.live else None

    def last_lease(self, resource: str, *, block: str | int | None = None) -> LeaseInfo | None:
        """The latest lease of ``resource`` whatever its state, or None if it was never held.

        A lease whose expiry has passed by :meth:`Chain.now <chainfence.Chain.now>`
        reads EXPIRED even if no block was mined since (``expired_unmined``).
        """
        return self.chain._run(self._last_lease(resource, block=block))

    def _last_lease(self, resource: str, *, block: str | int | None = None) -> Steps[LeaseInfo | None]:
        info = yield from self._lease_info(resource, _validate.resource_id(resource), block=block)
        return None if info.status is LeaseStatus.UNHELD else info

    def last_lease_by_id(self, resource_id: bytes, *, block: str | int | None = None) -> LeaseInfo | None:
        """:meth:`last_lease` for a resource known only by its id (``keccak256(name)``), as guards
        and audits know resources whose names the chain never told them."""
        if not isinstance(resource_id, (bytes, bytearray)) or len(resource_id) != 32:
            raise InvalidInput(f"a resource id is 32 bytes, got {resource_id!r}")
        info = self.chain._run(self._lease_info(None, bytes(resource_id), block=block))
        return None if info.status is LeaseStatus.UNHELD else info

    def is_current(self, resource: str, token: int, *, block: str | int | None = None) -> bool:
        """Whether ``token`` is the current token of ``resource`` and its lease is live."""
        return self.chain._run(self._is_current(resource, token, block=block))

    def _is_current(
        self, resource: str, token: int, *, block: str | int | None = None, resource_id: bytes | None = None
    ) -> Steps[bool]:
        """:meth:`is_current`; ``resource_id`` for a claimed work item (its id is not its name's hash)."""
        try:
            yield from self._check_current(resource, token, block=block, resource_id=resource_id)
        except TokenNotCurrent:
            return False
        return True

    def check_current(
        self, resource: str, token: int, *, block: str | int | None = None, confirmations: int = 0
    ) -> LeaseInfo:
        """The live lease of ``token``; raises a :class:`~chainfence.errors.TokenNotCurrent` subclass if it is not.

        The verdict a verifier needs: ``token`` is the resource's latest token,
        neither released nor expired — expired counted at :meth:`Chain.now
        <chainfence.Chain.now>`, so a lease that ran out since the latest
        block is :class:`~chainfence.errors.LeaseExpired` with
        ``no_block_since`` set. With ``confirmations=k`` the block that
        issued the token must also have ``k`` blocks on top
        (:class:`~chainfence.errors.TokenNotConfirmed` until then): a reorg
        shallower than ``k`` cannot take it back.
        """
        return self.chain._run(self._check_current(resource, token, block=block, confirmations=confirmations))

    def _check_current(
        self,
        resource: str,
        token: int,
        *,
        block: str | int | None = None,
        confirmations: int = 0,
        resource_id: bytes | None = None,
    ) -> Steps[LeaseInfo]:
        resource_id = _validate.resource_id(resource) if resource_id is None else resource_id
        token = _validate.token(token)
        k = _validate_confirmations(confirmations)
        info = yield from self._lease_info(resource, resource_id, block=block)
        self._raise_unless_current(resource, resource_id, token, info)
        if k:
            confirmed_block = None if block is None else (block - k if isinstance(block, int) else None)
            yield from self._require_confirmed(resource, resource_id, token, confirmed_block, k, holder=info.holder)
        return info

    def _raise_unless_current(self, resource: str, resource_id: bytes, token: int, info: LeaseInfo) -> None:
        judge(info, token, resource=resource, resource_id=resource_id)

    def _require_confirmed(
        self, resource: str, resource_id: bytes, token: int, confirmed_block: int | None, k: int, *, holder: str
    ) -> Steps[None]:
        """Raise unless the block that issued ``token`` (to ``holder``) has ``k`` blocks on top: the
        lease at the confirmed head carries that token and holder (tokens are a chain's counter: a
        reorg can hand the same number to another holder)."""
        if confirmed_block is None:
            confirmed_block = yield from self.chain._confirmed_block_steps(k)
        confirmed = None
        if confirmed_block >= 0:
            try:
                confirmed = yield from self._lease_info(resource, resource_id, block=confirmed_block)
            except ContractNotFound:
                confirmed = None  # the confirmed head predates the registry: nothing is confirmed yet
        if confirmed is None or confirmed.token != token or confirmed.holder != holder:
            logger.info("unconfirmed token resource=%s token=%d confirmations=%d", resource, token, k)
            raise TokenNotConfirmed(token=token, confirmations=k, resource=resource, resource_id=resource_id)

    def eip712_domain(self) -> EIP712Domain:
        """The registry's EIP-712 domain, from its ERC-5267 ``eip712Domain()``: what fenced
        requests are signed in (name, version, chain id, this registry)."""
        from .fenced_requests import EIP712Domain

        cached = self.__dict__.get("_eip712_domain")
        if cached is None:
            fields, name, version, chain_id, verifying, _salt, _ext = self.chain._run(
                self._view(
                    "eip712Domain",
                    [],
                    ["bytes1", "string", "string", "uint256", "address", "bytes32", "uint256[]"],
                    block="latest",
                )
            )
            if fields != b"\x0f":
                raise ContractNotFound(f"unexpected EIP-712 domain fields 0x{fields.hex()} at {self.address}")
            cached = EIP712Domain(name, version, chain_id, to_checksum_address(verifying))
            self.__dict__["_eip712_domain"] = cached
        return cached

    def deployment_block(self) -> int:
        """The block this registry was deployed in (from the registry itself)."""
        return int(self.identity()["deployment_block"])

    def identity(self) -> dict[str, str]:
        """What makes this registry's token space unique: chain id, address, and the block it was
        deployed in with that block's hash.

        Two in-process chains share a chain id and, deployed the same way, a
        registry address; a dev node that was wiped and redeployed does too.
        The deployment block's hash tells them apart. (The genesis hash does
        not serve: anvil rebuilds block 0 with a new hash when it reloads its
        state, so a restarted node would look like another chain.)
        """
        return self.chain._run(self._identity_steps())

    def _identity_steps(self) -> Steps[dict[str, str]]:
        cached = self.__dict__.get("_identity")
        if cached is None:
            number = yield from self._call_uint("deploymentBlock", [], block="latest")
            block = yield RPC.block(number)
            if block is None:
                raise ChainError(f"the node has no block {number}, where the registry says it was deployed")
            cached = {
                "chain_id": str(self.chain.chain_id),
                "registry": self.address,
                "deployment_block": str(number),
                "deployment_hash": "0x" + bytes(block["hash"]).hex(),
            }
            self.__dict__["_identity"] = cached
        return dict(cached)

    def stuck(
        self, *, renewals: int = 3, longer_than: int | None = None, from_block: int | None = None, index: Any = None
    ) -> Any:
        """Leases alive but stuck, crashed, or held too long: see :func:`chainfence.audit.watchdog.stuck`
        (``index``: an :class:`~chainfence.audit.index.AuditIndex` to read the events from)."""
        from .audit.watchdog import stuck

        return stuck(self, renewals=renewals, longer_than=longer_than, from_block=from_block, index=index)

    def history(self, resource: str | None = None, **filters: Any) -> list[Any]:
        """Lease events of this registry, oldest first; see :func:`chainfence.audit.history`
        (``index=``: answered from an :class:`~chainfence.audit.index.AuditIndex`)."""
        from .audit import history

        return history(self, resource, **filters)

    # ------------------------------------------------------------------
    # Several resources at once
    # ------------------------------------------------------------------

    def acquire_many(self, resources: Sequence[str], ttl: int, *, confirmations: int | None = None) -> LeaseSet:
        """Acquire every one of ``resources`` for ``ttl`` seconds in ONE transaction, all or nothing.

        Returns a :class:`~chainfence.LeaseSet`: one :class:`Lease` per
        resource, tokens consecutive in the order given. If any resource is
        refused (held by someone else, not admitted, in its lock-delay), none
        is acquired and the refusal is raised (e.g. :class:`~chainfence.errors.LeaseHeld`
        naming that resource). 1 to 64 distinct names, else
        :class:`~chainfence.errors.InvalidClaimItems` /
        :class:`~chainfence.errors.DuplicateResource` and nothing is sent.
        An interrupt after the send releases what the transaction acquired
        before it is re-raised (see :meth:`acquire`).
        """
        names, ttl, sender = self._acquire_many_args(resources, ttl)
        return self.chain._run(self._acquire_many_steps(names, ttl, sender, confirmations))

    def _acquire_many_args(self, resources: Sequence[str], ttl: int) -> tuple[list[str], int, str]:
        """acquire_many()'s arguments checked: (names, ttl, sender). Nothing is sent."""
        from .errors import DuplicateResource, InvalidClaimItems

        if isinstance(resources, (str, bytes)) or not isinstance(resources, Sequence):
            raise InvalidClaimItems(f"resources must be a list of names, got {type(resources).__name__}")
        names = list(resources)
        if not 1 <= len(names) <= MAX_MANY:
            raise InvalidClaimItems(
                f"acquire_many takes 1 to {MAX_MANY} names, got {len(names)}", count=len(names), max_count=MAX_MANY
            )
        for name in names:
            _validate.publishable(name)
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise DuplicateResource(resource=name, resource_id=_validate.resource_id(name))
            seen.add(name)
        return names, _validate.ttl(ttl, self.max_ttl), self._require_sender()

    def _acquire_many_steps(
        self, names: list[str], ttl: int, sender: str, confirmations: int | None
    ) -> Steps[LeaseSet]:
        from .errors import DuplicateResource, LeaseError

        data = self._encode("acquireMany", [names, ttl])
        by_id = {_validate.resource_id(name): name for name in names}
        acquired: list[Lease] = []
        sent = _keepalive.lease_clock()  # where the set's keep-alive counts from: before the send
        try:
            try:
                receipt = yield from self.chain._transact_steps(sender, self.address, data, confirmations=confirmations)
            except (LeaseError, DuplicateResource) as refused:  # name the resource the registry refused
                refused_id = getattr(refused, "resource_id", None)
                if refused_id in by_id:
                    refused.resource = by_id[refused_id]
                raise
            leases = self._many_leases(receipt, by_id, ttl)
            for lease in leases:
                lease._sent_at = sent
            acquired.extend(leases)
        except BaseException as interrupt:
            if not _sending.interrupted(interrupt):
                raise
            yield from self._after_interrupt(
                interrupt,
                f"the acquisition of the set {names}",
                acquired,
                lambda receipt: self._many_leases(receipt, by_id, ttl),
                many=True,
            )
            raise
        if len(leases) != len(names):  # pragma: no cover - the contract logs one acquisition per name
            raise ChainError(f"acquireMany logged {len(leases)} acquisitions for {len(names)} names")
        logger.info(
            "acquired set resources=%s tokens=%s holder=%s expires_at=%d tx=%s",
            names,
            [lease.token for lease in leases],
            leases[0].holder,
            leases[0].expires_at,
            leases[0].tx_hash,
        )
        return LeaseSet(leases)

    def _many_leases(self, receipt: Any, by_id: dict[bytes, str], ttl: int) -> list[Lease]:
        leases = []
        for log in receipt["logs"]:
            if log["address"] != self.address:
                continue
            event = _events.decode(log)
            if event is None or event.kind is not _events.Kind.ACQUIRED or event.resource_id not in by_id:
                continue
            leases.append(
                Lease(
                    self.connect(event.holder) if event.holder in self.chain.accounts else self,
                    resource=by_id[event.resource_id],
                    resource_id=event.resource_id,
                    token=event.token,
                    holder=event.holder,
                    expires_at=event.expires_at,
                    ttl=ttl,
                    previous_token=event.previous_token,
                    reason=AcquireReason(event.reason),
                    tx_hash=receipt["transactionHash"].to_0x_hex(),
                    block_number=receipt["blockNumber"],
                )
            )
        return leases

    def _renew_many(self, leases: Sequence[Lease], ttl: int) -> int:
        return self.chain._run(self._renew_many_steps(leases, ttl))

    def _renew_many_steps(self, leases: Sequence[Lease], ttl: int) -> Steps[int]:
        ttl = _validate.ttl(ttl, self.max_ttl)
        ids, tokens = [lease.resource_id for lease in leases], [_validate.token(lease.token) for lease in leases]
        receipt = yield from self._set_tx_steps(leases, "renewMany", [ids, tokens, ttl])
        expires_at = self._event(receipt, _events.Kind.RENEWED).expires_at
        logger.info(
            "renewed set resources=%s tokens=%s expires_at=%d", [x.resource for x in leases], tokens, expires_at
        )
        return expires_at

    def _release_many(self, leases: Sequence[Lease]) -> None:
        self.chain._run(self._release_many_steps(leases))

    def _release_many_steps(self, leases: Sequence[Lease]) -> Steps[None]:
        ids, tokens = [lease.resource_id for lease in leases], [_validate.token(lease.token) for lease in leases]
        yield from self._set_tx_steps(leases, "releaseMany", [ids, tokens])
        logger.info("released set resources=%s tokens=%s", [x.resource for x in leases], tokens)

    def _set_tx_steps(self, leases: Sequence[Lease], function: str, args: list[Any]) -> Steps[Any]:
        """Send a set operation; a refusal names the resource of the set it is about."""
        from .errors import LeaseError

        try:
            return (
                yield from self.chain._transact_steps(
                    self._require_sender(), self.address, self._encode(function, args)
                )
            )
        except LeaseError as refused:
            by_id = {lease.resource_id: lease.resource for lease in leases}
            if refused.resource_id in by_id:
                refused.resource = by_id[refused.resource_id]
            raise

    def _release_what_remains_steps(self, leases: Sequence[Lease]) -> Steps[tuple[dict[Lease, End], list[str]]]:
        """Release every lease of ``leases`` still live; returns (the ended ones and how, the names released).

        ``releaseMany`` is all or nothing: when the registry refuses it for a member that ended, every
        member's state is read (:meth:`_end_of_steps`) and the live ones are released together.
        """
        from .errors import NotHolder, TokenNotCurrent

        remaining = list(leases)
        ended: dict[Lease, End] = {}
        released: list[str] = []
        while remaining:
            try:
                yield from self._release_many_steps(remaining)
            except (TokenNotCurrent, NotHolder) as refused:
                refusal: BaseException = refused
            else:
                released.extend(lease.resource for lease in remaining)
                break
            live = []
            for lease in remaining:
                end = yield from self._end_of_steps(lease)
                if end is None:
                    live.append(lease)
                else:
                    ended[lease] = end
            if len(live) == len(remaining):
                raise refusal  # every member reads live, yet the registry refuses: nothing learned, say so
            remaining = live
        return ended, released

    def ending(self, resource: str, token: int) -> End | None:
        """How the lease of ``token`` on ``resource`` ended, in the words of :mod:`chainfence.endings`
        (expired, released, completed, superseded, revoked, granted, rolled_back); None while it is
        live, and for a token never issued for ``resource``. Reads the resource's lease, and its
        successor's acquisition when a higher token was issued (the reason it was issued for)."""
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        return self.chain._run(self._ending_steps(resource, resource_id, token))

    def _ending_steps(self, resource: str | None, resource_id: bytes, token: int) -> Steps[End | None]:
        try:
            info = yield from self._lease_info(resource, resource_id)
        except ChainRolledBack:
            return End.ROLLED_BACK
        if info.status is LeaseStatus.UNHELD or info.token < token:
            return None  # never issued for it, as far as this chain knows
        if info.token == token:
            return endings.of_status(info.status)
        identity = yield from self._identity_steps()
        return (yield from self._successor_end_steps(resource_id, token, int(identity["deployment_block"])))

    def _end_of_steps(self, lease: Lease) -> Steps[End | None]:
        """How ``lease`` ended, read from the chain now (:mod:`chainfence.endings`); None while it is live and its holder's."""
        try:
            info = yield from self._lease_info(lease.resource, lease.resource_id)
        except ChainRolledBack:
            return End.ROLLED_BACK
        if info.token == lease.token:
            return End.ROLLED_BACK if info.holder != lease.holder else endings.of_status(info.status)
        if info.token < lease.token or info.status is LeaseStatus.UNHELD:
            return End.ROLLED_BACK  # the registry never issued it, as far as this chain remembers
        return (yield from self._successor_end_steps(lease.resource_id, lease.token, lease.block_number))

    def _successor_end_steps(self, resource_id: bytes, token: int, from_block: int) -> Steps[End]:
        """How the lease of ``token`` ended, told by its successor's acquisition (:func:`endings.of_successor`):
        the ``LeaseAcquired`` of the resource whose previous token is ``token``, from ``from_block`` (the
        lease's own block) on. A grant's reason is ``granted`` whatever came before it, so a grant is
        ``granted`` only when it revoked the lease in its own transaction; a grant after a revoke, a
        release or an expiry names that end. :attr:`End.SUPERSEDED` when the successor cannot be read
        or is not there (yet)."""
        try:
            head = yield RPC.block_number()
            logs = yield from _events.fetch_all_steps(
                self.chain,
                self.address,
                kinds=[_events.Kind.ACQUIRED, _events.Kind.REVOKED, _events.Kind.RELEASED],
                resource_id=resource_id,
                from_block=max(0, from_block),
                to_block=head,
            )
        except ChainfenceError as unread:
            logger.info("could not read the successor of token %d: %s: %s", token, type(unread).__name__, unread)
            return End.SUPERSEDED
        ended_by = {log.kind: log for log in logs if log.kind is not _events.Kind.ACQUIRED and log.token == token}
        for log in logs:
            if log.kind is not _events.Kind.ACQUIRED or log.previous_token != token or log.reason is None:
                continue
            try:
                reason = AcquireReason(log.reason)
            except ValueError:  # a reason this SDK does not know
                return End.SUPERSEDED
            if reason is AcquireReason.GRANTED:
                revoked = ended_by.get(_events.Kind.REVOKED)
                if revoked is not None:
                    return End.GRANTED if revoked.tx_hash == log.tx_hash else End.REVOKED
                return End.RELEASED if _events.Kind.RELEASED in ended_by else End.EXPIRED
            return endings.of_successor(reason)
        return End.SUPERSEDED

    # ------------------------------------------------------------------
    # Interrupted acquisitions
    # ------------------------------------------------------------------

    def _after_interrupt(
        self,
        interrupt: BaseException,
        what: str,
        acquired: list[Lease],
        leases_of: Callable[[Any], list[Lease]],
        *,
        many: bool = False,
    ) -> Steps[None]:
        """An interrupt landed in ``what`` (an acquisition, a claim, an acquire_many): if its transaction
        may have reached the node, settle it and release what it acquired, shielded from the caller's
        further cancellations, then note on ``interrupt`` the hash and what became of it.

        ``acquired``: the leases already known (the receipt was read); else the transaction the
        interrupt carries (``_sending.in_flight``) is settled first (a cancellation with its nonce is
        sent if it is not mined: whichever the chain mines decides) and ``leases_of(receipt)`` are its
        leases. A lease that cannot be released is handed to the caller as the interrupt's ``lease``.
        A second interrupt (a second Ctrl-C) stops the cleanup: the note then says what may be left
        live and how to find it. The caller re-raises ``interrupt``; structured concurrency is kept
        (a cancellation stays a cancellation).
        """
        flight = _sending.in_flight(interrupt)
        if not acquired and flight is None:
            return  # nothing reached the node
        state = _Abandoned(what, flight, list(acquired) or None, many=many)
        logger.warning(
            "%s was interrupted (%s) after transaction %s reached the node: settling it and releasing what it "
            "acquired before the interrupt goes on (interrupt again to leave it)",
            what,
            type(interrupt).__name__,
            state.tx_hash,
        )
        try:
            note = yield Shielded(self._abandon_steps(interrupt, state, leases_of))
        except BaseException as again:
            note = state.left_undone(again)
            if state.leases:
                interrupt.lease = state.handed()  # type: ignore[attr-defined]
            logger.error("%s", note)
        else:
            logger.warning("%s", note)
        interrupt.add_note(f"chainfence: {note}")

    def _abandon_steps(
        self, interrupt: BaseException, state: _Abandoned, leases_of: Callable[[Any], list[Lease]]
    ) -> Steps[str]:
        from .errors import TokenNotCurrent

        if state.leases is None:
            flight = state.flight
            assert flight is not None
            try:
                receipt = yield from self.chain._sender.abandon_steps(flight)
            except ChainfenceError as unknown:
                return (
                    f"{state.what}: transaction {flight.tx_hash} (nonce {flight.nonce} of {flight.sender}) may hold "
                    f"a lease: its outcome could not be established ({type(unknown).__name__}: {unknown}); look it up "
                    "before acquiring again (chainfence reconcile) and release what it holds"
                )
            if receipt is None:
                return f"{state.what}: transaction {flight.tx_hash} was cancelled (nonce {flight.nonce}): nothing was acquired"
            if receipt["status"] != 1:
                return f"{state.what}: transaction {flight.tx_hash} was mined reverted: nothing was acquired"
            state.leases = [lease for lease in leases_of(receipt) if lease is not None]
            if not state.leases:  # pragma: no cover - a successful acquisition always logs one
                return f"{state.what}: transaction {flight.tx_hash} was mined but acquired nothing"
        leases = state.leases
        tokens = [lease.token for lease in leases]
        try:
            if len(leases) == 1:
                lease = leases[0]
                yield from self._release_steps(lease.resource, lease.resource_id, lease.token, None)
                ended: dict[Lease, End] = {}
            else:
                ended, _released = yield from self._release_what_remains_steps(leases)
        except TokenNotCurrent as gone:
            return f"{state.what}: transaction {state.tx_hash} acquired token {tokens[0]}, which had ended ({gone})"
        except ChainfenceError as failed:
            interrupt.lease = state.handed()  # type: ignore[attr-defined]
            return (
                f"{state.what}: transaction {state.tx_hash} acquired token(s) {tokens}, which could not be released "
                f"({type(failed).__name__}: {failed}): it is this exception's `lease`; release it"
            )
        for lease in leases:
            lease.released = lease not in ended
        gone = (
            f" ({', '.join(f'{lease.resource!r} had ended: {end}' for lease, end in ended.items())})" if ended else ""
        )
        return f"{state.what}: transaction {state.tx_hash} acquired token(s) {tokens}; released again{gone}"

    # ------------------------------------------------------------------
    # Namespaces: admins, policies, revoke and grant
    # ------------------------------------------------------------------

    def namespace_of(self, address: str | None = None) -> str:
        """The address namespace of ``address`` (default: the sender): ``"0x"`` and its 40 lowercase hex
        digits. It is that address's from the start, with no claim and no storage: names in it
        (``f"{registry.namespace_of()}/jobs"``) are governed by that address (policy, revoke, grant),
        and by nobody else until it hands the role over (:meth:`transfer_namespace_admin`).
        Another namespace has an admin only if the deployer assigned it (:meth:`deploy`)."""
        if address is None:
            address = self._require_sender()
        return _names.address_namespace(_validate.address(address, "address"))

    def transfer_namespace_admin(self, prefix: str, new_admin: str, *, confirmations: int | None = None) -> None:
        """Offer namespace ``prefix`` to ``new_admin`` (admin only); it takes over when it
        calls :meth:`accept_namespace_admin`. The zero address withdraws the offer."""
        prefix = _validate.namespace_prefix(prefix)
        new_admin = _validate.address(new_admin, "new admin")
        self._namespace_tx(prefix, "transferNamespaceAdmin", [_names.namespace_id(prefix), new_admin], confirmations)
        logger.info("offered namespace=%s to=%s", prefix, new_admin)

    def accept_namespace_admin(self, prefix: str, *, confirmations: int | None = None) -> None:
        """Take over namespace ``prefix`` as its pending admin."""
        prefix = _validate.namespace_prefix(prefix)
        self._namespace_tx(prefix, "acceptNamespaceAdmin", [_names.namespace_id(prefix)], confirmations)
        logger.info("accepted namespace=%s admin=%s", prefix, self.sender)

    def set_policy(
        self,
        prefix: str,
        *,
        max_ttl: int | None = None,
        lock_delay: int | None = None,
        admission_required: bool | None = None,
        confirmations: int | None = None,
    ) -> NamespacePolicy:
        """Set the fields of namespace ``prefix``'s policy that are given (admin only); the others
        keep their values: ``max_ttl`` (0: the registry's), ``lock_delay`` seconds after an expiry,
        ``admission_required`` (only admitted holders may acquire). Returns the namespace's admin and
        policy as they stood after the transaction (read at its block: the fields not given, too).

        The registry merges the fields itself (``setNamespacePolicy``'s mask), in the same
        transaction: no read-then-write here, so two changes of different fields never undo each
        other. The policy applies to later acquisitions, grants and renewals; it never evicts a
        live holder (:meth:`revoke` does). Naming no field is :class:`~chainfence.errors.InvalidPolicy`
        (nothing sent).
        """
        event = self._set_policy(prefix, max_ttl, lock_delay, admission_required, confirmations)
        return self.namespace_policy(prefix, block=event.block_number)

    def _set_policy(
        self,
        prefix: str,
        max_ttl: int | None,
        lock_delay: int | None,
        admission_required: bool | None,
        confirmations: int | None,
    ) -> _events.RegistryLog:
        """:meth:`set_policy`; returns its ``NamespacePolicySet`` event: the whole policy as it then stands."""
        from .errors import InvalidPolicy

        prefix = _validate.namespace_prefix(prefix)
        given = {"max_ttl": max_ttl, "lock_delay": lock_delay, "admission_required": admission_required}
        if all(value is None for value in given.values()):
            raise InvalidPolicy("set_policy: name at least one of max_ttl, lock_delay, admission_required")
        for value in (max_ttl, lock_delay):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= self.max_ttl
            ):
                raise InvalidPolicy(max_ttl=max_ttl, lock_delay=lock_delay, registry_max_ttl=self.max_ttl)
        if admission_required is not None and not isinstance(admission_required, bool):
            raise InvalidInput(f"admission_required must be a bool, got {admission_required!r}")
        fields = (
            (POLICY_MAX_TTL if max_ttl is not None else 0)
            | (POLICY_LOCK_DELAY if lock_delay is not None else 0)
            | (POLICY_ADMISSION if admission_required is not None else 0)
        )
        receipt = self._namespace_tx(
            prefix,
            "setNamespacePolicy",
            [_names.namespace_id(prefix), max_ttl or 0, lock_delay or 0, bool(admission_required), fields],
            confirmations,
        )
        event = self._event(receipt, _events.Kind.POLICY_SET)
        logger.info(
            "policy namespace=%s set=%s max_ttl=%d lock_delay=%d admission_required=%s",
            prefix,
            ",".join(k for k, v in given.items() if v is not None),
            event.max_ttl,
            event.lock_delay,
            event.admission_required,
        )
        return event

    def admit(
        self, prefix: str, holders: Sequence[str], *, admitted: bool = True, confirmations: int | None = None
    ) -> None:
        """Add ``holders`` (accounts or contracts) to the allowlist of namespace ``prefix``, or
        remove them with ``admitted=False`` (admin only). A holder removed keeps a live lease
        until it ends or is revoked."""
        prefix = _validate.namespace_prefix(prefix)
        if isinstance(holders, (str, bytes)) or not isinstance(holders, Sequence):
            holders = [holders]  # type: ignore[list-item]
        addresses = [_validate.address(holder, "holder") for holder in holders]
        if not 1 <= len(addresses) <= MAX_CLAIM_ITEMS:
            raise InvalidInput(f"admit takes 1 to {MAX_CLAIM_ITEMS} holders, got {len(addresses)}")
        if not isinstance(admitted, bool):
            raise InvalidInput(f"admitted must be a bool, got {admitted!r}")
        self._namespace_tx(prefix, "setAdmission", [_names.namespace_id(prefix), addresses, admitted], confirmations)
        logger.info("admission namespace=%s holders=%s admitted=%s", prefix, addresses, admitted)

    def namespace_policy(self, prefix: str, *, block: str | int | None = None) -> NamespacePolicy:
        """The admin and policy of namespace ``prefix`` (``admin`` None: nobody administers it)."""
        from .namespaces import NamespacePolicy, _or_none

        prefix = _validate.namespace_prefix(prefix)
        admin, pending, max_ttl, lock_delay, required = self.chain._run(
            self._view(
                "namespacePolicy",
                [_names.namespace_id(prefix)],
                ["address", "address", "uint256", "uint256", "bool"],
                block=_at(block),
            )
        )
        admin = _or_none(_checksum(admin))
        if admin is None and _names.is_address_namespace(prefix):
            admin = _checksum(prefix)  # an address namespace never handed over: its address, by construction
        return NamespacePolicy(
            name=prefix,
            namespace=_names.namespace_id(prefix),
            admin=admin,
            pending_admin=_or_none(_checksum(pending)),
            max_ttl=max_ttl,
            lock_delay=lock_delay,
            admission_required=required,
        )

    def is_admitted(self, resource: str, holder: str, *, block: str | int | None = None) -> bool:
        """Whether ``holder`` may hold ``resource`` as far as its namespace's allowlist goes: True
        for a name in no namespace or in a namespace that does not require admission."""
        prefix = _names.namespace_prefix(resource)
        holder = _validate.address(holder, "holder")
        if prefix is None:
            return True
        (admitted,) = self.chain._run(
            self._view("isAdmitted", [_names.namespace_id(prefix), holder], ["bool"], block=_at(block))
        )
        return bool(admitted)

    def revoke(self, resource: str, *, confirmations: int | None = None) -> int:
        """End the live lease on ``resource`` as the admin of its namespace; return the revoked token.

        Fenced like a release: the holder's token stops being current
        everywhere (its renew, release and fenced writes fail with
        :class:`~chainfence.errors.LeaseRevoked`), no lock-delay follows, and
        the next acquisition gets a higher token with reason ``revoked``.
        Raises :class:`~chainfence.errors.NotNamespaceAdmin` outside the
        sender's namespaces and :class:`~chainfence.errors.NotLive` when
        there is no live lease. A claimed item's name (``"workset»item"``) revokes its claim
        (:meth:`revoke_item`).
        """
        item = _names.split_item(resource)
        if item is not None:
            return self.revoke_item(*item, confirmations=confirmations)
        _validate.publishable(resource)
        prefix = _names.namespace_prefix(resource)
        receipt = self._namespace_tx(prefix, "revoke", [resource], confirmations, resource=resource)
        event = self._event(receipt, _events.Kind.REVOKED)
        logger.info(
            "revoked resource=%s token=%d holder=%s admin=%s tx=%s",
            resource,
            event.token,
            event.holder,
            event.admin,
            event.tx_hash,
        )
        return event.token

    def grant(self, resource: str, holder: str, ttl: int, *, confirmations: int | None = None) -> Lease:
        """Issue a lease on ``resource`` to ``holder`` for ``ttl`` seconds, as the admin of its namespace.

        The new token is higher than every other; a live lease is revoked
        first, through the same fenced path (``LeaseRevoked``), and the
        acquisition says ``granted``. The holder must be admitted when the
        namespace requires it; ``ttl`` is held to the namespace's maximum. A claimed item's name
        (``"workset»item"``) grants it as a claim (:meth:`grant_item`).
        """
        item = _names.split_item(resource)
        if item is not None:
            return self.grant_item(*item, holder, ttl, confirmations=confirmations)
        _validate.publishable(resource)
        holder = _validate.address(holder, "holder")
        ttl = _validate.ttl(ttl, self.max_ttl)
        prefix = _names.namespace_prefix(resource)
        receipt = self._namespace_tx(prefix, "grant", [resource, holder, ttl], confirmations, resource=resource)
        lease = self._lease_from_receipt(receipt, resource=resource, ttl=ttl)
        if lease is None:  # pragma: no cover - a grant always logs LeaseAcquired
            raise ChainError(f"transaction {receipt['transactionHash'].to_0x_hex()} emitted no LeaseAcquired event")
        logger.info(
            "granted resource=%s token=%d holder=%s admin=%s expires_at=%d tx=%s",
            resource,
            lease.token,
            lease.holder,
            self.sender,
            lease.expires_at,
            lease.tx_hash,
        )
        return lease

    def revoke_item(self, workset: str, item: str, *, confirmations: int | None = None) -> int:
        """:meth:`revoke` for work item ``item`` of ``workset`` (a claim), as the admin of the
        workset name's namespace (items follow it); return the revoked token.

        The claimant's token stops being current (its renew, release and
        complete fail with :class:`~chainfence.errors.LeaseRevoked`); the item
        is not done: the next :meth:`claim` may hand it out again (reason
        ``revoked``). Raises :class:`~chainfence.errors.NotNamespaceAdmin`
        outside the sender's namespaces and :class:`~chainfence.errors.NotLive`
        when the item has no live claim (never claimed, released, expired or
        done). The same as ``revoke("workset»item")``; ``revoke("workset/item")``
        is not this: a name with a ``/`` is a plain resource, never a work item.
        """
        name = _names.item_name(workset, item)
        receipt = self._namespace_tx(
            _names.namespace_prefix(workset), "revokeItem", [workset, item], confirmations, resource=name
        )
        event = self._event(receipt, _events.Kind.REVOKED)
        logger.info(
            "revoked workset=%s item=%s token=%d holder=%s admin=%s tx=%s",
            workset,
            item,
            event.token,
            event.holder,
            event.admin,
            event.tx_hash,
        )
        return event.token

    def grant_item(self, workset: str, item: str, holder: str, ttl: int, *, confirmations: int | None = None) -> Lease:
        """:meth:`grant` for work item ``item`` of ``workset``, as the admin of the workset name's
        namespace: ``holder`` gets it as a claim, with a new, higher token (a live claim is revoked
        first, recorded), and may renew, release and :meth:`~chainfence.Lease.complete` it like
        any claimant (completing marks the item done).

        Raises what :meth:`grant` raises, and :class:`~chainfence.errors.LeaseCompleted` for an
        item already done (no grant reopens it). Returns the :class:`Lease` (``lease.workset``,
        ``lease.item``).
        """
        name = _names.item_name(workset, item)
        holder = _validate.address(holder, "holder")
        ttl = _validate.ttl(ttl, self.max_ttl)
        receipt = self._namespace_tx(
            _names.namespace_prefix(workset), "grantItem", [workset, item, holder, ttl], confirmations, resource=name
        )
        lease = self._lease_from_receipt(receipt, resource=name, ttl=ttl)
        if lease is None:  # pragma: no cover - a grant always logs LeaseAcquired
            raise ChainError(f"transaction {receipt['transactionHash'].to_0x_hex()} emitted no LeaseAcquired event")
        lease.workset, lease.item = workset, item
        logger.info(
            "granted workset=%s item=%s token=%d holder=%s admin=%s expires_at=%d tx=%s",
            workset,
            item,
            lease.token,
            lease.holder,
            self.sender,
            lease.expires_at,
            lease.tx_hash,
        )
        return lease

    def _namespace_tx(
        self,
        prefix: str | None,
        function: str,
        args: list[Any],
        confirmations: int | None,
        *,
        resource: str | None = None,
    ) -> Any:
        """Send a namespace operation; a namespace refusal names the prefix."""
        from .errors import NamespaceError, NotAdmitted

        try:
            return self.chain.transact(
                self._require_sender(),
                self.address,
                self._encode(function, args),
                resource=resource,
                confirmations=confirmations,
            )
        except NamespaceError as refused:
            if prefix is not None:
                refused.with_namespace(prefix)
                admin = getattr(refused, "admin", None)
                if _names.is_address_namespace(prefix) and (admin is None or int(admin, 16) == 0):
                    refused.admin = _checksum(prefix)  # the chain writes no admin for its own address
            raise
        except NotAdmitted as refused:
            refused.namespace_name = prefix
            raise

    # ------------------------------------------------------------------
    # Internal
    # ------------------------------------------------------------------

    def _lease_info(
        self, resource: str | None, resource_id: bytes, *, block: str | int | None = None
    ) -> Steps[LeaseInfo]:
        """The resource's latest lease at ``block``; ``None`` means the latest state judged at chain.now()."""
        seen = self._seen()
        before = seen.before(resource_id)
        types = ["address", "uint256", "uint256", "uint8"]
        judged_at = None
        if block is None:  # the latest state, and the time to judge it by, in one round trip
            raw, judged_at = yield from self.chain._call_now_steps(self.address, self._encode("leaseOf", [resource_id]))
            holder, token, expires_at, status = self._decode("leaseOf", raw, types, "latest")
        else:
            holder, token, expires_at, status = yield from self._view("leaseOf", [resource_id], types, block=block)
        status = LeaseStatus(status)
        holder = _checksum(holder)
        expired_unmined = False
        if block is None:
            # On a chain with confirmations, the latest state may still be reorganised away: it is
            # compared with what was seen, never remembered as seen.
            seen.lease(before, resource_id, token, holder, resource, record=self.chain.confirmations == 0)
            if status is LeaseStatus.LIVE and expires_at <= judged_at:
                status, expired_unmined = LeaseStatus.EXPIRED, True
            elif status is not LeaseStatus.LIVE:
                judged_at = None
        return LeaseInfo(
            resource=resource,
            resource_id=resource_id,
            holder=holder,
            token=token,
            expires_at=expires_at,
            status=status,
            judged_at=judged_at,
            expired_unmined=expired_unmined,
        )

    def _lease_tx(
        self, function: str, resource: str, args: list[Any], event: _events.Kind, confirmations: int | None
    ) -> Steps[tuple[Any, _events.RegistryLog]]:
        """Send a lease operation as the sender; returns the receipt and its ``event``."""
        receipt = yield from self.chain._transact_steps(
            self._require_sender(),
            self.address,
            self._encode(function, args),
            resource=resource,
            confirmations=confirmations,
        )
        return receipt, self._event(receipt, event)

    def _require_sender(self) -> str:
        if self.sender is None:
            raise UnknownAccount("this registry has no sender: use registry.connect(account)")
        return self.sender

    def _encode(self, function: str, args: list[Any]) -> bytes:
        selector, types = _artifacts.functions("FencingRegistry")[function]
        return selector + abi_encode(types, args)

    def _call_uint(self, function: str, args: list[Any], *, block: str | int = "latest") -> Steps[int]:
        return (yield from self._view(function, args, ["uint256"], block=block))[0]

    def _view(
        self, function: str, args: list[Any], types: list[str], *, block: str | int, resource: str | None = None
    ) -> Steps[tuple[Any, ...]]:
        """Call a view at ``block`` and decode its result. No code there (an address that is not
        a registry, or a block before its deployment) is ContractNotFound, not a decoding error."""
        raw = yield RPC.call({"to": self.address, "data": self._encode(function, args)}, block, resource=resource)
        return self._decode(function, raw, types, block)

    def _decode(self, function: str, raw: bytes, types: list[str], block: str | int) -> tuple[Any, ...]:
        if not raw:
            raise ContractNotFound(f"no FencingRegistry code at {self.address} at block {block!r}")
        try:
            return tuple(abi_decode(types, raw))
        except Exception as exc:
            raise ContractNotFound(
                f"the contract at {self.address} answered {function}() with data that is not a FencingRegistry's"
            ) from exc

    def _event(self, receipt: Any, kind: _events.Kind) -> _events.RegistryLog:
        """The ``kind`` event this registry emitted in ``receipt``."""
        for log in receipt["logs"]:
            if log["address"] != self.address:
                continue
            decoded = _events.decode(log)
            if decoded is not None and decoded.kind is kind:
                return decoded
        raise ChainError(f"transaction {receipt['transactionHash'].to_0x_hex()} emitted no {kind.value} event")

    def _seen(self) -> _Seen:
        return _Seen.of(self.chain, self.address)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Registry) and (self.chain, self.address) == (other.chain, other.address)

    def __hash__(self) -> int:
        return hash((id(self.chain), self.address))

    def __repr__(self) -> str:
        return f"<Registry {self.address} chain_id={self.chain.chain_id} sender={self.sender}>"


class _Abandoned:
    """What an interrupted acquisition left, as its cleanup learns it (see Registry._after_interrupt)."""

    def __init__(self, what: str, flight: _sending.InFlight | None, leases: list[Lease] | None, *, many: bool):
        self.what = what
        self.flight = flight
        self.leases = leases
        self.many = many

    @property
    def tx_hash(self) -> str:
        return self.leases[0].tx_hash if self.leases else self.flight.tx_hash  # type: ignore[union-attr]

    def handed(self) -> Lease | LeaseSet:
        """What the caller is handed: the lease, or the set."""
        assert self.leases
        return LeaseSet(self.leases) if self.many else self.leases[0]

    def left_undone(self, again: BaseException) -> str:
        how = (
            "interrupted again"
            if _sending.interrupted(again)
            else f"its cleanup failed ({type(again).__name__}: {again})"
        )
        if self.leases:
            tokens = [lease.token for lease in self.leases]
            return (
                f"{self.what} was {how} while its lease(s) {tokens} (transaction {self.tx_hash}) were being released: "
                "they may be live until they expire; this exception's `lease` is what was acquired: release it"
            )
        flight = self.flight
        assert flight is not None
        return (
            f"{self.what} was {how} before transaction {flight.tx_hash} (nonce {flight.nonce} of {flight.sender}) "
            "was settled: it may hold a lease until it expires; look it up before acquiring again "
            f"(registry.lease_from_tx({flight.tx_hash!r}), chainfence reconcile) and release what it holds"
        )


class _Seen:
    """The highest token this SDK has seen from one registry, and each resource's latest (bounded).

    Tokens only go up on a chain that keeps its history. Each read takes a
    snapshot of what was seen *before* it was sent: anything seen then was
    already on-chain, so a result below it means the chain lost history
    (:class:`ChainRolledBack`). Comparing with what other threads saw while
    the read was in flight would raise false alarms; this never does. Only
    what is as deep as the chain's confirmations is remembered: a reorg
    shallower than that is expected, not a lost history.
    """

    _LIMIT = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.highest = 0
        self._resources: OrderedDict[bytes, tuple[int, str]] = OrderedDict()

    @classmethod
    def of(cls, chain: Chain, address: str) -> _Seen:
        table = chain.__dict__.setdefault("_seen_tokens", {})
        seen = table.get(address)
        if seen is None:
            seen = table.setdefault(address, cls())
        return seen

    def before(self, resource_id: bytes | None = None) -> tuple[int, tuple[int, str] | None]:
        """What was seen before a read or a transaction is sent."""
        with self._lock:
            return self.highest, (self._resources.get(resource_id) if resource_id is not None else None)

    def latest(self, before: tuple[int, tuple[int, str] | None], latest: int, *, record: bool = True) -> None:
        """The registry's latest token, read after ``before`` (remembered if ``record``)."""
        if latest < before[0]:
            raise ChainRolledBack(
                f"the registry's latest token is {latest}, below token {before[0]} already seen from it: "
                "the chain lost history (a dev node restarted from an older state, or a reorg deeper than "
                "the confirmations); the same numbers may go to other holders",
                seen_token=before[0],
                chain_token=latest,
            )
        if record:
            self._note(None, latest, None)

    def lease(
        self,
        before: tuple[int, tuple[int, str] | None],
        resource_id: bytes,
        token: int,
        holder: str,
        name: str | None,
        *,
        issued: bool = False,
        record: bool = True,
    ) -> None:
        """A resource's latest lease, read (or, ``issued``, created by a transaction sent) after ``before``."""
        where = repr(name) if name is not None else "0x" + resource_id.hex()
        highest, previous = before
        if issued and token <= highest:
            raise ChainRolledBack(
                f"the registry issued token {token} for {where}, but token {highest} was already seen from it "
                "before the acquisition was sent: the chain lost history and is handing out numbers again",
                seen_token=highest,
                chain_token=token,
                resource=name,
            )
        if previous is not None and (token < previous[0] or (token == previous[0] and holder != previous[1])):
            raise ChainRolledBack(
                f"{where} reads token {token} held by {holder}, but token {previous[0]} held by {previous[1]} "
                "was already seen for it: the chain lost history",
                seen_token=previous[0],
                chain_token=token,
                resource=name,
            )
        if token and record:
            self._note(resource_id, token, holder)

    def _note(self, resource_id: bytes | None, token: int, holder: str | None) -> None:
        with self._lock:
            self.highest = max(self.highest, token)
            if resource_id is None or holder is None:
                return
            previous = self._resources.get(resource_id)
            if previous is None or previous[0] < token:
                self._resources[resource_id] = (token, holder)
                self._resources.move_to_end(resource_id)
                if len(self._resources) > self._LIMIT:
                    self._resources.popitem(last=False)


def _at(block: str | int | None) -> str | int:
    return "latest" if block is None else block


def _validate_confirmations(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000:
        raise InvalidInput(f"confirmations must be an int from 0 to 1000, got {value!r}")
    return value


@functools.lru_cache(maxsize=4096)
def _checksum(address: str) -> str:
    return to_checksum_address(address)


def _namespace_assignments(chain: Chain, namespaces: Mapping[str, str] | None) -> tuple[list[str], list[str]]:
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


def _first_account(chain: Chain) -> str:
    if not chain.accounts:
        raise UnknownAccount("the chain holds no keys: pass private_key= to Chain.connect")
    return chain.accounts[0]


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


endings.declare(
    "claims",
    __name__,
    {
        End.EXPIRED: "the claim expired: the item is free again for any claimant; the claimant's keep-alive "
        "loses it (why='expired') and its complete() is refused (LeaseExpired / StaleToken): it completes nothing",
        End.RELEASED: "released (by this claimant: check() says released; elsewhere: its keep-alive loses it): "
        "the item is free again, not done",
        End.COMPLETED: "completed: the item is done for good (no claim hands it out again); completed by this "
        "claimant: its keep-alive ends quietly and check() raises LeaseLost(why='completed')",
        End.SUPERSEDED: "the same claimant claimed it again (a restarted agent): the earlier incarnation's "
        "keep-alive loses it (why='superseded') and its complete() is refused",
        End.REVOKED: "the namespace's admin revoked the claim: lost at once (why='revoked'), never retried; "
        "the item is free again",
        End.GRANTED: "the admin granted the item to another claimant: lost (why='granted')",
        End.ROLLED_BACK: "the chain forgot the claim: lost (why='rolled_back')",
        LocalEnd.DEADLINE: "no renewal confirmed by the safe deadline: lost (why='deadline'), stop before the "
        "claim can have expired on-chain",
        LocalEnd.ERROR: "the renewer failed with an error that is not the chain's: lost (why='error')",
    },
    holds=True,
    keeps_alive=True,
)
