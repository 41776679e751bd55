"""Namespaces: who administers which resources, and the policy they set.

A resource name's namespace is its text before the first ``/``
(``prod/db`` is in ``prod``); a name without ``/`` is in no namespace and
always open. On-chain a namespace is ``keccak256(prefix)``. A namespace
nobody administers behaves as if namespaces did not exist. A namespace has
an admin by construction only: an *address namespace* (``"0x"`` and the 40
lowercase hex digits of an address: :meth:`Registry.namespace_of
<chainfence.Registry.namespace_of>`) is its address's from the start, and
any other only if the deployer assigned it
(``Registry.deploy(..., namespaces={"prod": admin})``). Nobody can claim an
unassigned namespace, so nobody gains power over leases others already
hold. The admin sets its :class:`NamespacePolicy` and may revoke and grant
leases and work items in it, and in no other namespace.

:class:`NamespaceOperations` is the registry's part that reads and governs
namespaces (part of :class:`~chainfence.Registry`, and of its asyncio twin):
who administers one and its policy, admission, the admin's handover, and the
admin's revoke and grant of leases and work items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._core import log as _log
from ._core.effects import Steps
from ._core.faces import operation
from ._node import events as _events
from ._node.rlp import keccak256 as keccak
from ._sdk import names as _names
from ._sdk import validate as _validate
from ._sdk.contract import MAX_CLAIM_ITEMS, RegistryContract, at_block, checksum
from .errors import ChainError, InvalidInput, InvalidPolicy, InvalidResourceName, NamespaceError, NotAdmitted
from .lease import Lease

logger = _log.get("chainfence.registry")

__all__ = ["NamespaceOperations", "NamespacePolicy"]

#: setNamespacePolicy's ``fields``: which fields of the policy a call sets (IFencingRegistry.sol).
POLICY_MAX_TTL, POLICY_LOCK_DELAY, POLICY_ADMISSION = 1, 2, 4

_ZERO = "0x" + "00" * 20

#: Most holders one ``setAdmission`` transaction carries (:meth:`NamespaceOperations.admit` sends more in
#: several). A newly admitted holder costs about 24,600 gas (a storage write and an event), so a full
#: chunk stays near 3.2 M gas: under the ceiling the SDK gives every transaction on a dev chain
#: (``_node.sending.DEV_GAS_LIMIT``) and within any chain's block gas limit. Measured and asserted:
#: ``tests/chain/test_namespaces.py::test_admit_of_the_most_holders_admits_them_all``.
ADMISSION_CHUNK = 128


@dataclass(frozen=True)
class NamespacePolicy:
    """A namespace's admin and policy, as the registry reads it.

    ``admin`` is None when nobody administers the namespace (then the rest is
    the open default); ``pending_admin`` the account offered the role, if any.
    ``max_ttl`` 0 means the registry's maximum; ``lock_delay`` is seconds after
    an expiry during which only the expired holder may acquire;
    ``admission_required`` means only allowlisted holders may acquire or be granted.
    """

    name: str
    namespace: bytes
    admin: str | None
    pending_admin: str | None
    max_ttl: int
    lock_delay: int
    admission_required: bool

    @property
    def administered(self) -> bool:
        return self.admin is not None

    def to_dict(self) -> dict[str, object]:
        return {
            "namespace": self.name,
            "id": "0x" + self.namespace.hex(),
            "admin": self.admin,
            "pending_admin": self.pending_admin,
            "max_ttl": self.max_ttl,
            "lock_delay": self.lock_delay,
            "admission_required": self.admission_required,
        }


def _or_none(address: str) -> str | None:
    return None if int(address, 16) == 0 else address


class NamespaceOperations(RegistryContract):
    """The registry's operations on namespaces and by their admins (part of :class:`~chainfence.Registry`)."""

    def namespace_of(self, address: str | None = None) -> str:
        """The address namespace of ``address`` (default: the sender): ``"0x"`` and its 40 lowercase hex
        digits. It is that address's from the start, with no claim and no storage: names in it
        (``f"{registry.namespace_of()}/jobs"``) are governed by that address (policy, revoke, grant),
        and by nobody else until it hands the role over (:meth:`transfer_namespace_admin`).
        Another namespace has an admin only if the deployer assigned it (:meth:`deploy`)."""
        if address is None:
            address = self._require_sender()
        return _names.address_namespace(_validate.address(address, "address"))

    def _namespace_policy_steps(self, prefix: str, *, block: str | int | None = None) -> Steps[NamespacePolicy]:
        """The admin and policy of namespace ``prefix`` (``admin`` None: nobody administers it)."""
        prefix = _validate.namespace_prefix(prefix)
        admin, pending, max_ttl, lock_delay, required = yield from self._view_steps(
            "namespacePolicy",
            [_names.namespace_id(prefix)],
            ["address", "address", "uint256", "uint256", "bool"],
            block=at_block(block),
        )
        admin = _or_none(checksum(admin))
        if admin is None and _names.is_address_namespace(prefix):
            admin = checksum(prefix)  # an address namespace never handed over: its address, by construction
        return NamespacePolicy(
            name=prefix,
            namespace=_names.namespace_id(prefix),
            admin=admin,
            pending_admin=_or_none(checksum(pending)),
            max_ttl=max_ttl,
            lock_delay=lock_delay,
            admission_required=required,
        )

    namespace_policy = operation(_namespace_policy_steps)

    def _is_admitted_steps(self, resource: str, holder: str, *, block: str | int | None = None) -> Steps[bool]:
        """Whether ``holder`` may hold ``resource`` as far as its namespace's allowlist goes: True
        for a name in no namespace or in a namespace that does not require admission."""
        prefix = _names.namespace_prefix(resource)
        holder = _validate.address(holder, "holder")
        if prefix is None:
            return True
        (admitted,) = yield from self._view_steps(
            "isAdmitted", [_names.namespace_id(prefix), holder], ["bool"], block=at_block(block)
        )
        return bool(admitted)

    is_admitted = operation(_is_admitted_steps)

    # -- the admin's role ----------------------------------------------------------------------------

    def _transfer_namespace_admin_steps(
        self, prefix: str, new_admin: str, *, confirmations: int | None = None
    ) -> Steps[None]:
        """Offer namespace ``prefix`` to ``new_admin`` (admin only); it takes over when it
        calls :meth:`accept_namespace_admin`. The zero address withdraws the offer."""
        prefix = _validate.namespace_prefix(prefix)
        new_admin = _validate.address(new_admin, "new admin")
        yield from self._namespace_tx_steps(
            prefix, "transferNamespaceAdmin", [_names.namespace_id(prefix), new_admin], confirmations
        )
        logger.info("offered namespace=%s to=%s", prefix, new_admin)

    transfer_namespace_admin = operation(_transfer_namespace_admin_steps)

    def _accept_namespace_admin_steps(self, prefix: str, *, confirmations: int | None = None) -> Steps[None]:
        """Take over namespace ``prefix`` as its pending admin."""
        prefix = _validate.namespace_prefix(prefix)
        yield from self._namespace_tx_steps(
            prefix, "acceptNamespaceAdmin", [_names.namespace_id(prefix)], confirmations
        )
        logger.info("accepted namespace=%s admin=%s", prefix, self.sender)

    accept_namespace_admin = operation(_accept_namespace_admin_steps)

    def _set_policy_steps(
        self,
        prefix: str,
        *,
        max_ttl: int | None = None,
        lock_delay: int | None = None,
        admission_required: bool | None = None,
        confirmations: int | None = None,
    ) -> Steps[NamespacePolicy]:
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
        event = yield from self._policy_set_steps(prefix, max_ttl, lock_delay, admission_required, confirmations)
        return (yield from self._namespace_policy_steps(prefix, block=event.block_number))

    set_policy = operation(_set_policy_steps)

    def _policy_set_steps(
        self,
        prefix: str,
        max_ttl: int | None,
        lock_delay: int | None,
        admission_required: bool | None,
        confirmations: int | None,
    ) -> Steps[_events.RegistryLog]:
        """:meth:`set_policy`; returns its ``NamespacePolicySet`` event: the whole policy as it then stands."""
        prefix = _validate.namespace_prefix(prefix)
        given = {"max_ttl": max_ttl, "lock_delay": lock_delay, "admission_required": admission_required}
        if all(value is None for value in given.values()):
            raise InvalidPolicy("set_policy: name at least one of max_ttl, lock_delay, admission_required")
        if max_ttl is not None or lock_delay is not None:
            registry_max_ttl = yield from self._max_ttl_steps()
            for value in (max_ttl, lock_delay):
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= registry_max_ttl
                ):
                    raise InvalidPolicy(max_ttl=max_ttl, lock_delay=lock_delay, registry_max_ttl=registry_max_ttl)
        if admission_required is not None and not isinstance(admission_required, bool):
            raise InvalidInput(f"admission_required must be a bool, got {admission_required!r}")
        fields = (
            (POLICY_MAX_TTL if max_ttl is not None else 0)
            | (POLICY_LOCK_DELAY if lock_delay is not None else 0)
            | (POLICY_ADMISSION if admission_required is not None else 0)
        )
        receipt = yield from self._namespace_tx_steps(
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

    def _admit_steps(
        self, prefix: str, holders: Sequence[str], *, admitted: bool = True, confirmations: int | None = None
    ) -> Steps[None]:
        """Add ``holders`` (accounts or contracts) to the allowlist of namespace ``prefix``, or
        remove them with ``admitted=False`` (admin only). A holder removed keeps a live lease
        until it ends or is revoked.

        Each holder costs a storage write and an event (about 25,000 gas), so up to
        :data:`ADMISSION_CHUNK` holders go in one transaction and more in several, in order, each
        preflighted and within any chain's gas limits. If one fails, the holders of the
        transactions before it are admitted (removed) and the rest are not: the error's notes say
        how many and in which transactions; calling again with the same holders is harmless.
        """
        prefix = _validate.namespace_prefix(prefix)
        if isinstance(holders, (str, bytes)) or not isinstance(holders, Sequence):
            holders = [holders]
        addresses = [_validate.address(holder, "holder") for holder in holders]
        if not 1 <= len(addresses) <= MAX_CLAIM_ITEMS:
            raise InvalidInput(f"admit takes 1 to {MAX_CLAIM_ITEMS} holders, got {len(addresses)}")
        if not isinstance(admitted, bool):
            raise InvalidInput(f"admitted must be a bool, got {admitted!r}")
        namespace = _names.namespace_id(prefix)
        done: list[str] = []  # the transactions sent so far, each for a chunk of holders
        for start in range(0, len(addresses), ADMISSION_CHUNK):
            chunk = addresses[start : start + ADMISSION_CHUNK]
            try:
                receipt = yield from self._namespace_tx_steps(
                    prefix, "setAdmission", [namespace, chunk, admitted], confirmations
                )
            except BaseException as failed:
                if done:
                    failed.add_note(
                        f"the first {start} of the {len(addresses)} holders were "
                        f"{'admitted' if admitted else 'removed'} in {', '.join(done)}; the rest were not "
                        "(calling admit again with the same holders is harmless)"
                    )
                raise
            done.append(receipt["transactionHash"].to_0x_hex())
        logger.info("admission namespace=%s holders=%s admitted=%s tx=%s", prefix, addresses, admitted, ",".join(done))

    admit = operation(_admit_steps)

    # -- the admin's revoke and grant ------------------------------------------------------------------

    def _revoke_steps(self, resource: str | bytes, *, confirmations: int | None = None) -> Steps[int]:
        """End the live lease on ``resource`` as the admin of its namespace; return the revoked token.

        Fenced like a release: the holder's token stops being current
        everywhere (its renew, release and fenced writes fail with
        :class:`~chainfence.errors.LeaseRevoked`), no lock-delay follows, and
        the next acquisition gets a higher token with reason ``revoked``.
        Raises :class:`~chainfence.errors.NotNamespaceAdmin` outside the
        sender's namespaces and :class:`~chainfence.errors.NotLive` when
        there is no live lease. A claimed item's name (``"workset»item"``) revokes its claim
        (:meth:`revoke_item`).

        Any name the registry holds is reached, not only those the SDK would publish: anyone can put
        a name with control or bidi characters, or bytes that are not UTF-8, on-chain with a
        transaction of their own. Give it as a ``str`` as it is, or as ``bytes`` exactly (always a
        plain name); :func:`chainfence._sdk.names.undisplay` turns the escaped form an audit table or
        ``history`` showed back into those bytes.
        """
        if isinstance(resource, str):
            item = _names.split_item(resource)
            if item is not None:
                return (yield from self._revoke_item_steps(*item, confirmations=confirmations))
        raw = _names.held_name(resource)
        label = _names.held_label(raw)
        receipt = yield from self._namespace_tx_steps(
            _names.held_prefix(raw), "revoke", [raw], confirmations, resource=label
        )
        event = self._event(receipt, _events.Kind.REVOKED)
        logger.info(
            "revoked resource=%s token=%d holder=%s admin=%s tx=%s",
            _names.display(raw),
            event.token,
            event.holder,
            event.admin,
            event.tx_hash,
        )
        assert event.token is not None
        return event.token

    revoke = operation(_revoke_steps)

    def _grant_steps(
        self, resource: str | bytes, holder: str, ttl: int, *, confirmations: int | None = None
    ) -> Steps[Lease]:
        """Issue a lease on ``resource`` to ``holder`` for ``ttl`` seconds, as the admin of its namespace.

        The new token is higher than every other; a live lease is revoked
        first, through the same fenced path (``LeaseRevoked``), and the
        acquisition says ``granted``. The holder must be admitted when the
        namespace requires it; ``ttl`` is held to the namespace's maximum. A claimed item's name
        (``"workset»item"``) grants it as a claim (:meth:`grant_item`).

        ``resource`` is any name the registry holds, as :meth:`revoke` takes it; a name the SDK would
        not publish (control or bidi characters, not UTF-8) only if the registry has held it already
        (a grant of a new resource publishes its name): else
        :class:`~chainfence.errors.InvalidResourceName`, with nothing sent.
        """
        if isinstance(resource, str):
            item = _names.split_item(resource)
            if item is not None:
                return (yield from self._grant_item_steps(*item, holder, ttl, confirmations=confirmations))
        raw = _names.held_name(resource)
        label = _names.held_label(raw)
        holder = _validate.address(holder, "holder")
        ttl = _validate.ttl(ttl, (yield from self._max_ttl_steps()))
        if _names.decode(raw) is None:
            yield from self._require_held_steps(label, keccak(raw), _names.display(raw))
        receipt = yield from self._namespace_tx_steps(
            _names.held_prefix(raw), "grant", [raw, holder, ttl], confirmations, resource=label
        )
        lease = self._granted_lease(receipt, label, ttl)
        logger.info(
            "granted resource=%s token=%d holder=%s admin=%s expires_at=%d tx=%s",
            _names.display(raw),
            lease.token,
            lease.holder,
            self.sender,
            lease.expires_at,
            lease.tx_hash,
        )
        return lease

    grant = operation(_grant_steps)

    def _require_held_steps(self, label: str, resource_id: bytes, shown: str) -> Steps[None]:
        """Refuse to publish ``shown``, a name the SDK would not publish, unless the registry has held it."""
        info = yield from self._lease_info_steps(label, resource_id)
        if info.token == 0:
            raise InvalidResourceName(
                f"grant of {shown!r}: the registry never held this name, and a grant of a new resource publishes "
                "it; only printable names are published (no control, format or bidi characters, UTF-8)"
            )

    def _revoke_item_steps(
        self, workset: str | bytes, item: str | bytes, *, confirmations: int | None = None
    ) -> Steps[int]:
        """:meth:`revoke` for work item ``item`` of ``workset`` (a claim), as the admin of the
        workset name's namespace (items follow it); return the revoked token.

        The claimant's token stops being current (its renew, release and
        complete fail with :class:`~chainfence.errors.LeaseRevoked`); the item
        is not done: the next :meth:`claim` may hand it out again (reason
        ``revoked``). Raises :class:`~chainfence.errors.NotNamespaceAdmin`
        outside the sender's namespaces and :class:`~chainfence.errors.NotLive`
        when the item has no live claim (never claimed, released, expired or
        done). The same as ``revoke("workset»item")``; ``revoke("workset/item")``
        is not this: a name with a ``/`` is a plain resource, never a work item. ``workset`` and
        ``item`` are any names the registry holds, as :meth:`revoke` takes them.
        """
        parts, name = self._held_item(workset, item)
        receipt = yield from self._namespace_tx_steps(
            _names.held_prefix(parts[0]), "revokeItem", list(parts), confirmations, resource=name
        )
        event = self._event(receipt, _events.Kind.REVOKED)
        logger.info(
            "revoked workset=%s item=%s token=%d holder=%s admin=%s tx=%s",
            _names.display(parts[0]),
            _names.display(parts[1]),
            event.token,
            event.holder,
            event.admin,
            event.tx_hash,
        )
        assert event.token is not None
        return event.token

    revoke_item = operation(_revoke_item_steps)

    def _grant_item_steps(
        self, workset: str | bytes, item: str | bytes, holder: str, ttl: int, *, confirmations: int | None = None
    ) -> Steps[Lease]:
        """:meth:`grant` for work item ``item`` of ``workset``, as the admin of the workset name's
        namespace: ``holder`` gets it as a claim, with a new, higher token (a live claim is revoked
        first, recorded), and may renew, release and :meth:`~chainfence.Lease.complete` it like
        any claimant (completing marks the item done).

        Raises what :meth:`grant` raises, and :class:`~chainfence.errors.LeaseCompleted` for an
        item already done (no grant reopens it). Returns the :class:`Lease` (``lease.workset``,
        ``lease.item``). Names the SDK would not publish, as :meth:`grant` takes them.
        """
        parts, name = self._held_item(workset, item)
        holder = _validate.address(holder, "holder")
        ttl = _validate.ttl(ttl, (yield from self._max_ttl_steps()))
        if _names.decode(parts[0]) is None or _names.decode(parts[1]) is None:
            yield from self._require_held_steps(name, _names.item_id(*parts), _names.display_name(name))
        receipt = yield from self._namespace_tx_steps(
            _names.held_prefix(parts[0]), "grantItem", [*parts, holder, ttl], confirmations, resource=name
        )
        lease = self._granted_lease(receipt, name, ttl)
        lease.workset, lease.item = _names.held_label(parts[0]), _names.held_label(parts[1])
        logger.info(
            "granted workset=%s item=%s token=%d holder=%s admin=%s expires_at=%d tx=%s",
            _names.display(parts[0]),
            _names.display(parts[1]),
            lease.token,
            lease.holder,
            self.sender,
            lease.expires_at,
            lease.tx_hash,
        )
        return lease

    grant_item = operation(_grant_item_steps)

    @staticmethod
    def _held_item(workset: str | bytes, item: str | bytes) -> tuple[tuple[bytes, bytes], str]:
        """The bytes of an item's workset and item as the registry holds them, and how the SDK names the
        item (``workset»item``: each part as text, escaped where it is not UTF-8)."""
        parts = _names.held_name(workset), _names.held_name(item)
        return parts, _names.held_label(parts[0]) + _names.ITEM_SEPARATOR + _names.held_label(parts[1])

    def _granted_lease(self, receipt: Any, resource: str, ttl: int) -> Lease:
        lease = self._lease_from_receipt(receipt, resource=resource, ttl=ttl)
        if lease is None:  # pragma: no cover - a grant always logs LeaseAcquired
            raise ChainError(f"transaction {receipt['transactionHash'].to_0x_hex()} emitted no LeaseAcquired event")
        return lease

    def _namespace_tx_steps(
        self,
        prefix: str | None,
        function: str,
        args: list[Any],
        confirmations: int | None,
        *,
        resource: str | None = None,
    ) -> Steps[Any]:
        """Send a namespace operation; a namespace refusal names the prefix."""
        try:
            return (yield from self._transact_steps(function, args, resource=resource, confirmations=confirmations))
        except NamespaceError as refused:
            if prefix is not None:
                refused.with_namespace(prefix)
                admin = getattr(refused, "admin", None)
                if _names.is_address_namespace(prefix) and (admin is None or int(admin, 16) == 0):
                    refused.admin = checksum(prefix)  # type: ignore[attr-defined]  # the chain writes no admin for its own address
            raise
        except NotAdmitted as refused:
            refused.namespace_name = prefix
            raise
