"""Namespaces: who administers which resources, and the policy they set.

::

    team = registry.namespace()                        # the sender's address namespace (or namespace("prod"))
    team.set_policy(max_ttl=600, admission_required=True)
    team.admit([agent])
    team.revoke(f"{team.prefix}/db")                   # as its admin: ends the live lease, fenced

A resource name's namespace is its text before the first ``/``
(``prod/db`` is in ``prod``); a name without ``/`` is in no namespace and
always open. On-chain a namespace is ``keccak256(prefix)``. A namespace
nobody administers behaves as if namespaces did not exist. A namespace has
an admin by construction only: an *address namespace* (``"0x"`` and the 40
lowercase hex digits of an address: :func:`address_namespace`,
``registry.namespace()`` for the sender's) is its address's from the start, and
any other only if the deployer assigned it
(``Registry.deploy(..., namespaces={"prod": admin})``). Nobody can claim an
unassigned namespace, so nobody gains power over leases others already
hold. The admin sets its :class:`NamespacePolicy` and may revoke and grant
leases and work items in it, and in no other namespace.

:class:`Namespace` is one namespace of a registry (``registry.namespace(prefix)``;
``AsyncNamespace`` its asyncio twin, from ``AsyncRegistry.namespace``): who
administers it and its policy, admission, the admin's handover, and the admin's
revoke and grant of the leases in it. Work items are revoked and granted
through their workset (:class:`~chainfence.claims.Workset`), with the steps
written here (:func:`revoke_item_steps`, :func:`grant_item_steps`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from ._core import log as _log
from ._core.effects import Steps
from ._core.faces import AsyncDriver, AsyncFace, SyncFace, awaiting, drives, mirrored, twin_of
from ._core.records import record
from ._node import events as _events
from ._node.rlp import keccak256 as keccak
from ._sdk import names as _names
from ._sdk import validate as _validate
from ._sdk.contract import MAX_CLAIM_ITEMS, RegistryContract, at_block, checksum
from .errors import (
    ChainError,
    InvalidInput,
    InvalidNamespace,
    InvalidPolicy,
    InvalidResourceName,
    NamespaceError,
    NotAdmitted,
)
from .lease import AsyncLease, Lease

logger = _log.get("chainfence.registry")

R = TypeVar("R")

__all__ = ["AsyncNamespace", "Namespace", "NamespacePolicy", "address_namespace"]

#: setNamespacePolicy's ``fields``: which fields of the policy a call sets (IFencingRegistry.sol).
POLICY_MAX_TTL, POLICY_LOCK_DELAY, POLICY_ADMISSION = 1, 2, 4

_ZERO = "0x" + "00" * 20

#: Most holders one ``setAdmission`` transaction carries (:meth:`Namespace.admit` sends more in
#: several). A newly admitted holder costs about 24,600 gas (a storage write and an event), so a full
#: chunk stays near 3.2 M gas: under the ceiling the SDK gives every transaction on a dev chain
#: (``_node.sending.DEV_GAS_LIMIT``) and within any chain's block gas limit. Measured and asserted:
#: ``tests/chain/test_namespaces.py::test_admit_of_the_most_holders_admits_them_all``.
ADMISSION_CHUNK = 128


@record
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

    def __init__(
        self,
        name: str,
        namespace: bytes,
        admin: str | None,
        pending_admin: str | None,
        max_ttl: int,
        lock_delay: int,
        admission_required: bool,
    ) -> None:
        self.__dict__.update(
            name=name,
            namespace=namespace,
            admin=admin,
            pending_admin=pending_admin,
            max_ttl=max_ttl,
            lock_delay=lock_delay,
            admission_required=admission_required,
        )

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


def address_namespace(address: str) -> str:
    """The address namespace of ``address``: ``"0x"`` and its 40 lowercase hex digits. It is that
    address's from the start, with no claim and no storage: names in it (``f"{prefix}/jobs"``) are
    governed by that address (policy, revoke, grant), and by nobody else until it hands the role over
    (:meth:`Namespace.transfer_admin`). Another namespace has an admin only if the deployer assigned it
    (:meth:`Registry.deploy <chainfence.Registry.deploy>`). ``registry.namespace()`` is the sender's."""
    return _names.address_namespace(_validate.address(address, "address"))


def _handle_prefix(prefix: object) -> str:
    """A namespace handle's prefix: a str with no ``/`` of at most 127 bytes. What an operation
    checks further (printable, an address spelled lowercase) it checks when called, as it always did:
    a guard reads the allowlist of any namespace a resource name has."""
    if not isinstance(prefix, str):
        raise InvalidNamespace(f"a namespace must be a str, got {type(prefix).__name__}")
    try:
        size = len(prefix.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidNamespace(f"a namespace must be UTF-8 text, got {prefix[:80]!r}") from None
    if "/" in prefix:
        raise InvalidNamespace(f"a namespace is a name's part before its first '/': {prefix[:80]!r} contains '/'")
    if size > _names.MAX_NAME_LENGTH - 1:
        raise InvalidNamespace(length=size, max_length=_names.MAX_NAME_LENGTH - 1)
    return prefix


class Namespace(SyncFace):
    """One namespace of a registry, as ``registry.namespace(prefix)`` gives it: its admin and policy,
    its allowlist, the admin's handover, and the admin's revoke and grant of the leases in it.

    Sends as the registry's sender (``registry.connect(admin).namespace(prefix)`` to act as the
    admin). Building one asks nothing of the chain. ``prefix`` is the text before a name's first
    ``/``; ``registry.namespace()`` is the sender's address namespace.
    """

    def __init__(self, registry: RegistryContract, prefix: str):
        #: The :class:`~chainfence.Registry` (and sender) this namespace is read and governed through.
        self.registry = registry
        #: The namespace's prefix: the names ``f"{prefix}/..."`` are in it.
        self.prefix = _handle_prefix(prefix)

    def _drive(self, steps: Steps[R]) -> R:
        return self.registry._drive(steps)

    @property
    def id(self) -> bytes:
        """The namespace's id on-chain: ``keccak256(prefix)``."""
        return _names.namespace_id(self.prefix)

    # -- reads ---------------------------------------------------------------------------------------

    def _policy_steps(self, *, block: str | int | None = None) -> Steps[NamespacePolicy]:
        prefix = _validate.namespace_prefix(self.prefix)
        admin, pending, max_ttl, lock_delay, required = yield from self.registry._view_steps(
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

    @drives(_policy_steps)
    def policy(self, *, block: str | int | None = None) -> NamespacePolicy:
        """The namespace's admin and policy (``admin`` None: nobody administers it), at ``block``
        (default: the latest)."""
        return self._drive(self._policy_steps(block=block))

    def _is_admitted_steps(self, holder: str, *, block: str | int | None = None) -> Steps[bool]:
        holder = _validate.address(holder, "holder")
        (admitted,) = yield from self.registry._view_steps(
            "isAdmitted", [_names.namespace_id(self.prefix), holder], ["bool"], block=at_block(block)
        )
        return bool(admitted)

    @drives(_is_admitted_steps)
    def is_admitted(self, holder: str, *, block: str | int | None = None) -> bool:
        """Whether ``holder`` may hold names in this namespace as far as its allowlist goes: True when
        the namespace does not require admission. (A name in no namespace is always open.)"""
        return self._drive(self._is_admitted_steps(holder, block=block))

    # -- the admin's role ----------------------------------------------------------------------------

    def _transfer_admin_steps(self, new_admin: str, *, confirmations: int | None = None) -> Steps[None]:
        prefix = _validate.namespace_prefix(self.prefix)
        new_admin = _validate.address(new_admin, "new admin")
        yield from namespace_tx_steps(
            self.registry,
            prefix,
            "transferNamespaceAdmin",
            [_names.namespace_id(prefix), new_admin],
            confirmations,
        )
        logger.info("offered namespace=%s to=%s", prefix, new_admin)

    @drives(_transfer_admin_steps)
    def transfer_admin(self, new_admin: str, *, confirmations: int | None = None) -> None:
        """Offer the namespace to ``new_admin`` (admin only); it takes over when it calls
        :meth:`accept_admin`. The zero address withdraws the offer."""
        self._drive(self._transfer_admin_steps(new_admin, confirmations=confirmations))

    def _accept_admin_steps(self, *, confirmations: int | None = None) -> Steps[None]:
        prefix = _validate.namespace_prefix(self.prefix)
        yield from namespace_tx_steps(
            self.registry, prefix, "acceptNamespaceAdmin", [_names.namespace_id(prefix)], confirmations
        )
        logger.info("accepted namespace=%s admin=%s", prefix, self.registry.sender)

    @drives(_accept_admin_steps)
    def accept_admin(self, *, confirmations: int | None = None) -> None:
        """Take the namespace over as its pending admin (the sender must be the account offered it)."""
        self._drive(self._accept_admin_steps(confirmations=confirmations))

    def _set_policy_steps(
        self,
        *,
        max_ttl: int | None = None,
        lock_delay: int | None = None,
        admission_required: bool | None = None,
        confirmations: int | None = None,
    ) -> Steps[NamespacePolicy]:
        event = yield from self._policy_set_steps(max_ttl, lock_delay, admission_required, confirmations)
        return (yield from self._policy_steps(block=event.block_number))

    @drives(_set_policy_steps)
    def set_policy(
        self,
        *,
        max_ttl: int | None = None,
        lock_delay: int | None = None,
        admission_required: bool | None = None,
        confirmations: int | None = None,
    ) -> NamespacePolicy:
        """Set the fields of the namespace's policy that are given (admin only); the others keep their
        values: ``max_ttl`` (0: the registry's), ``lock_delay`` seconds after an expiry,
        ``admission_required`` (only admitted holders may acquire). Returns the namespace's admin and
        policy as they stood after the transaction (read at its block: the fields not given, too).

        The registry merges the fields itself (``setNamespacePolicy``'s mask), in the same
        transaction: no read-then-write here, so two changes of different fields never undo each
        other. The policy applies to later acquisitions, grants and renewals; it never evicts a
        live holder (:meth:`revoke` does). Naming no field is :class:`~chainfence.errors.InvalidPolicy`
        (nothing sent).
        """
        return self._drive(
            self._set_policy_steps(
                max_ttl=max_ttl,
                lock_delay=lock_delay,
                admission_required=admission_required,
                confirmations=confirmations,
            )
        )

    def _policy_set_steps(
        self,
        max_ttl: int | None,
        lock_delay: int | None,
        admission_required: bool | None,
        confirmations: int | None,
    ) -> Steps[_events.RegistryLog]:
        """:meth:`set_policy`'s transaction; returns its ``NamespacePolicySet`` event: the whole policy as it then stands."""
        prefix = _validate.namespace_prefix(self.prefix)
        given = {"max_ttl": max_ttl, "lock_delay": lock_delay, "admission_required": admission_required}
        if all(value is None for value in given.values()):
            raise InvalidPolicy("set_policy: name at least one of max_ttl, lock_delay, admission_required")
        if max_ttl is not None or lock_delay is not None:
            registry_max_ttl = yield from self.registry._max_ttl_steps()
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
        receipt = yield from namespace_tx_steps(
            self.registry,
            prefix,
            "setNamespacePolicy",
            [_names.namespace_id(prefix), max_ttl or 0, lock_delay or 0, bool(admission_required), fields],
            confirmations,
        )
        event = self.registry._event(receipt, _events.Kind.POLICY_SET)
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
        self, holders: Sequence[str], *, admitted: bool = True, confirmations: int | None = None
    ) -> Steps[None]:
        prefix = _validate.namespace_prefix(self.prefix)
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
                receipt = yield from namespace_tx_steps(
                    self.registry, prefix, "setAdmission", [namespace, chunk, admitted], confirmations
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

    @drives(_admit_steps)
    def admit(self, holders: Sequence[str], *, admitted: bool = True, confirmations: int | None = None) -> None:
        """Add ``holders`` (accounts or contracts; one address alone too) to the namespace's allowlist,
        or remove them with ``admitted=False`` (admin only). A holder removed keeps a live lease until
        it ends or is revoked.

        Each holder costs a storage write and an event (about 25,000 gas), so up to
        :data:`ADMISSION_CHUNK` holders go in one transaction and more in several, in order, each
        preflighted and within any chain's gas limits. If one fails, the holders of the
        transactions before it are admitted (removed) and the rest are not: the error's notes say
        how many and in which transactions; calling again with the same holders is harmless.
        """
        self._drive(self._admit_steps(holders, admitted=admitted, confirmations=confirmations))

    # -- the admin's revoke and grant ------------------------------------------------------------------

    def _revoke_steps(self, resource: str | bytes, *, confirmations: int | None = None) -> Steps[int]:
        self._require_inside(resource)
        return (yield from revoke_steps(self.registry, resource, confirmations))

    @drives(_revoke_steps)
    def revoke(self, resource: str | bytes, *, confirmations: int | None = None) -> int:
        """End the live lease on ``resource`` (a name in this namespace) as the namespace's admin;
        return the revoked token.

        Fenced like a release: the holder's token stops being current
        everywhere (its renew, release and fenced writes fail with
        :class:`~chainfence.errors.LeaseRevoked`), no lock-delay follows, and
        the next acquisition gets a higher token with reason ``revoked``.
        Raises :class:`~chainfence.errors.NotNamespaceAdmin` when the sender is not the admin,
        :class:`~chainfence.errors.NotLive` when there is no live lease, and
        :class:`~chainfence.errors.InvalidResourceName` for a name outside this namespace (nothing
        sent). A claimed item's name (``"workset»item"``, its workset in this namespace) revokes its
        claim (:meth:`Workset.revoke <chainfence.claims.Workset.revoke>`).

        Any name the registry holds is reached, not only those the SDK would publish: anyone can put
        a name with control or bidi characters, or bytes that are not UTF-8, on-chain with a
        transaction of their own. Give it as a ``str`` as it is, or as ``bytes`` exactly (always a
        plain name); :func:`chainfence._sdk.names.undisplay` turns the escaped form an audit table or
        ``history`` showed back into those bytes.
        """
        return self._drive(self._revoke_steps(resource, confirmations=confirmations))

    def _grant_steps(
        self, resource: str | bytes, holder: str, ttl: int, *, confirmations: int | None = None
    ) -> Steps[Lease]:
        self._require_inside(resource)
        return (yield from grant_steps(self.registry, resource, holder, ttl, confirmations))

    @drives(_grant_steps)
    def grant(self, resource: str | bytes, holder: str, ttl: int, *, confirmations: int | None = None) -> Lease:
        """Issue a lease on ``resource`` (a name in this namespace) to ``holder`` for ``ttl`` seconds, as
        the namespace's admin.

        The new token is higher than every other; a live lease is revoked
        first, through the same fenced path (``LeaseRevoked``), and the
        acquisition says ``granted``. The holder must be admitted when the
        namespace requires it; ``ttl`` is held to the namespace's maximum. A claimed item's name
        (``"workset»item"``) grants it as a claim (:meth:`Workset.grant <chainfence.claims.Workset.grant>`).

        ``resource`` is any name the registry holds, as :meth:`revoke` takes it; a name the SDK would
        not publish (control or bidi characters, not UTF-8) only if the registry has held it already
        (a grant of a new resource publishes its name): else
        :class:`~chainfence.errors.InvalidResourceName`, with nothing sent.
        """
        return self._drive(self._grant_steps(resource, holder, ttl, confirmations=confirmations))

    def _require_inside(self, resource: object) -> None:
        """Refuse (nothing sent) a name outside this namespace: the admin of one never acts on another's."""
        if isinstance(resource, str) and _names.split_item(resource) is not None:
            workset = _names.split_item(resource)[0]  # type: ignore[index]
            raw = _names.held_name(workset)
        else:
            raw = _names.held_name(resource)
        if b"/" not in raw or raw.split(b"/", 1)[0] != self.prefix.encode("utf-8"):
            raise InvalidResourceName(
                f"{_names.display(raw)!r} is not in namespace {self.prefix!r} (its names start {self.prefix + '/'!r})"
            )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Namespace) and (self.registry, self.prefix) == (other.registry, other.prefix)

    def __hash__(self) -> int:
        return hash((self.registry, self.prefix))

    def __repr__(self) -> str:
        return f"<Namespace {self.prefix!r} of {self.registry.address} sender={self.registry.sender}>"


class AsyncNamespace(AsyncFace[Namespace], core=Namespace):
    """A :class:`Namespace` through an :class:`~chainfence.aio.AsyncRegistry` (``AsyncRegistry.namespace``):
    the same reads and the admin's operations, awaited (the same steps, run over asyncio)."""

    def __init__(self, registry: Any, namespace: Namespace):
        #: The :class:`~chainfence.aio.AsyncRegistry` it is read and governed through.
        self.registry = registry
        #: The sync :class:`Namespace` whose steps this one runs.
        self.namespace = namespace

    @property
    def _core(self) -> Namespace:
        return self.namespace

    @property
    def _driver(self) -> AsyncDriver:
        return self.registry.chain  # type: ignore[no-any-return]

    @classmethod
    def _from_core(cls, core: Namespace, driver: AsyncDriver) -> AsyncNamespace:
        return cls(twin_of(core.registry, driver), core)

    prefix = mirrored("prefix")
    id = mirrored("id")

    policy = awaiting(Namespace.policy)
    is_admitted = awaiting(Namespace.is_admitted)
    transfer_admin = awaiting(Namespace.transfer_admin)
    accept_admin = awaiting(Namespace.accept_admin)
    set_policy = awaiting(Namespace.set_policy)
    admit = awaiting(Namespace.admit)
    revoke = awaiting(Namespace.revoke)
    grant = awaiting(Namespace.grant, AsyncLease)

    def __repr__(self) -> str:
        return "<Async" + repr(self.namespace)[1:]


# -- the admin's steps, by name (a namespace's, a workset's, and the old Registry methods' until 0.3) --------


def revoke_steps(registry: RegistryContract, resource: str | bytes, confirmations: int | None) -> Steps[int]:
    """End the live lease on ``resource`` as the admin of its namespace; the revoked token. A claimed
    item's name (``"workset»item"``) revokes its claim."""
    if isinstance(resource, str):
        item = _names.split_item(resource)
        if item is not None:
            return (yield from revoke_item_steps(registry, *item, confirmations))
    raw = _names.held_name(resource)
    label = _names.held_label(raw)
    receipt = yield from namespace_tx_steps(
        registry, _names.held_prefix(raw), "revoke", [raw], confirmations, resource=label
    )
    event = registry._event(receipt, _events.Kind.REVOKED)
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


def grant_steps(
    registry: RegistryContract, resource: str | bytes, holder: str, ttl: int, confirmations: int | None
) -> Steps[Lease]:
    """Issue a lease on ``resource`` to ``holder`` as the admin of its namespace. A claimed item's name
    (``"workset»item"``) grants it as a claim."""
    if isinstance(resource, str):
        item = _names.split_item(resource)
        if item is not None:
            return (yield from grant_item_steps(registry, *item, holder, ttl, confirmations))
    raw = _names.held_name(resource)
    label = _names.held_label(raw)
    holder = _validate.address(holder, "holder")
    ttl = _validate.ttl(ttl, (yield from registry._max_ttl_steps()))
    if _names.decode(raw) is None:
        yield from _require_held_steps(registry, label, keccak(raw), _names.display(raw))
    receipt = yield from namespace_tx_steps(
        registry, _names.held_prefix(raw), "grant", [raw, holder, ttl], confirmations, resource=label
    )
    lease = _granted_lease(registry, receipt, label, ttl)
    logger.info(
        "granted resource=%s token=%d holder=%s admin=%s expires_at=%d tx=%s",
        _names.display(raw),
        lease.token,
        lease.holder,
        registry.sender,
        lease.expires_at,
        lease.tx_hash,
    )
    return lease


def revoke_item_steps(
    registry: RegistryContract, workset: str | bytes, item: str | bytes, confirmations: int | None
) -> Steps[int]:
    """End the live claim on work item ``item`` of ``workset`` as the admin of the workset name's
    namespace (items follow it); the revoked token. ``workset`` and ``item`` are any names the registry
    holds (``str`` as it is, or ``bytes``)."""
    parts, name = _held_item(workset, item)
    receipt = yield from namespace_tx_steps(
        registry, _names.held_prefix(parts[0]), "revokeItem", list(parts), confirmations, resource=name
    )
    event = registry._event(receipt, _events.Kind.REVOKED)
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


def grant_item_steps(
    registry: RegistryContract,
    workset: str | bytes,
    item: str | bytes,
    holder: str,
    ttl: int,
    confirmations: int | None,
) -> Steps[Lease]:
    """Give work item ``item`` of ``workset`` to ``holder`` as a claim, with a new, higher token, as the
    admin of the workset name's namespace (a live claim is revoked first, recorded)."""
    parts, name = _held_item(workset, item)
    holder = _validate.address(holder, "holder")
    ttl = _validate.ttl(ttl, (yield from registry._max_ttl_steps()))
    if _names.decode(parts[0]) is None or _names.decode(parts[1]) is None:
        yield from _require_held_steps(registry, name, _names.item_id(*parts), _names.display_name(name))
    receipt = yield from namespace_tx_steps(
        registry, _names.held_prefix(parts[0]), "grantItem", [*parts, holder, ttl], confirmations, resource=name
    )
    lease = _granted_lease(registry, receipt, name, ttl)
    lease.workset, lease.item = _names.held_label(parts[0]), _names.held_label(parts[1])
    logger.info(
        "granted workset=%s item=%s token=%d holder=%s admin=%s expires_at=%d tx=%s",
        _names.display(parts[0]),
        _names.display(parts[1]),
        lease.token,
        lease.holder,
        registry.sender,
        lease.expires_at,
        lease.tx_hash,
    )
    return lease


def _require_held_steps(registry: RegistryContract, label: str, resource_id: bytes, shown: str) -> Steps[None]:
    """Refuse to publish ``shown``, a name the SDK would not publish, unless the registry has held it."""
    info = yield from registry._lease_info_steps(label, resource_id)
    if info.token == 0:
        raise InvalidResourceName(
            f"grant of {shown!r}: the registry never held this name, and a grant of a new resource publishes "
            "it; only printable names are published (no control, format or bidi characters, UTF-8)"
        )


def _held_item(workset: str | bytes, item: str | bytes) -> tuple[tuple[bytes, bytes], str]:
    """The bytes of an item's workset and item as the registry holds them, and how the SDK names the
    item (``workset»item``: each part as text, escaped where it is not UTF-8)."""
    parts = _names.held_name(workset), _names.held_name(item)
    return parts, _names.held_label(parts[0]) + _names.ITEM_SEPARATOR + _names.held_label(parts[1])


def _granted_lease(registry: RegistryContract, receipt: Any, resource: str, ttl: int) -> Lease:
    lease = registry._lease_from_receipt(receipt, resource=resource, ttl=ttl)
    if lease is None:  # pragma: no cover - a grant always logs LeaseAcquired
        raise ChainError(f"transaction {receipt['transactionHash'].to_0x_hex()} emitted no LeaseAcquired event")
    return lease


def namespace_tx_steps(
    registry: RegistryContract,
    prefix: str | None,
    function: str,
    args: list[Any],
    confirmations: int | None,
    *,
    resource: str | None = None,
) -> Steps[Any]:
    """Send a namespace operation as the registry's sender; a namespace refusal names the prefix."""
    try:
        return (yield from registry._transact_steps(function, args, resource=resource, confirmations=confirmations))
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
