"""The FencingRegistry contract as steps: calls encoded, views read and decoded, transactions sent, events found.

:class:`RegistryContract` is what every concept of :class:`~chainfence.Registry`
builds on (its lease operations and views in :mod:`chainfence.registry`, its handles
in :mod:`chainfence.namespaces` and :mod:`chainfence.claims`, and the recipe of
sets in :mod:`chainfence.recipes.lease_set`): the registry's address and the account
it sends as, the contract's calls as steps, a resource's lease read with the
rollback check (:mod:`chainfence._sdk.rollback`), and the operations on one
token (renew, release, complete, check) that leases, claims and sets share.
Nothing here is public API: the concepts derive their methods from these
steps (:mod:`chainfence._core.faces`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .. import endings
from .._core import log as _log
from .._core import metrics as _metrics
from .._core.effects import RPC, Steps
from .._core.faces import SyncFace
from .._node import artifacts as _artifacts
from .._node import events as _events
from .._node.abi import decode as abi_decode
from .._node.abi import encode as abi_encode
from .._node.addresses import to_checksum_address
from .._node.formats import raw_logs
from .._node.rlp import keccak256 as keccak
from ..endings import End
from ..errors import (
    ChainError,
    ChainfenceError,
    ChainRolledBack,
    ContractNotFound,
    InvalidInput,
    TokenNotConfirmed,
    TokenNotCurrent,
    UnknownAccount,
)
from ..lease import Lease
from . import validate as _validate
from . import waiting as _waiting
from .lease_state import AcquireReason, LeaseInfo, LeaseStatus, judge
from .rollback import Seen

if TYPE_CHECKING:  # what fenced requests are signed in: imported by the steps that sign one
    from ..fenced_requests import EIP712Domain

logger = _log.get("chainfence.registry")

R = TypeVar("R")

__all__ = ["DEFAULT_MAX_TTL", "MAX_CLAIM_ITEMS", "MAX_MANY", "RegistryContract"]

#: Most items one claim may list (the contract's bound).
MAX_CLAIM_ITEMS = 512

#: Most resources one lease set (``LeaseSet.acquire``) may list (the contract's bound).
MAX_MANY = 64

#: Default maximum lease length of a new registry: one day.
DEFAULT_MAX_TTL = 86_400


class RegistryContract(SyncFace):
    """A deployed FencingRegistry, and the account transactions are sent as: the contract's calls as steps."""

    def __init__(self, chain: Any, address: str, *, sender: str | None = None):
        #: The :class:`~chainfence.Chain` the registry lives on.
        self.chain = chain
        self.address = _validate.address(address, "registry address")
        #: The account transactions are sent as (None: none; :meth:`connect` gives one).
        self.sender = sender
        #: Block of the deploying transaction, when this object deployed it.
        self.deployed_block: int | None = None
        #: The clock, sleep and randomness ``acquire(wait=...)`` waits with (tests put their own here).
        self._wait_timer: _waiting.Timer = _waiting.SYSTEM

    def _drive(self, steps: Steps[R]) -> R:
        return self.chain._run(steps)  # type: ignore[no-any-return]

    def connect(self, account: Any) -> Any:
        """The same registry, sending transactions as ``account`` (an address the chain holds a key for)."""
        other = type(self)(self.chain, self.address, sender=self.chain.signer(account))
        # Share what never changes for a deployed registry: saves a call per view.
        for cached in ("max_ttl", "_identity", "_eip712_domain"):
            if cached in self.__dict__:
                other.__dict__[cached] = self.__dict__[cached]
        return other

    # -- what never changes for a deployed registry (read once, shared by connect()) -------------------

    @functools.cached_property
    def max_ttl(self) -> int:
        """The longest ttl this registry accepts, fixed at deployment."""
        return int(self._drive(self._max_ttl_steps()))

    def _max_ttl_steps(self) -> Steps[int]:
        """:attr:`max_ttl`, read once: steps read it through the driver they run on, never blocking."""
        cached = self.__dict__.get("max_ttl")
        if cached is None:
            cached = yield from self._call_uint_steps("maxTtl", [])
            self.__dict__["max_ttl"] = cached
        return int(cached)

    def _identity_steps(self) -> Steps[dict[str, str]]:
        """What makes this registry's token space unique: chain id, address, and the block it was
        deployed in with that block's hash.

        Two in-process chains share a chain id and, deployed the same way, a
        registry address; a dev node that was wiped and redeployed does too.
        The deployment block's hash tells them apart. (The genesis hash does
        not serve: anvil rebuilds block 0 with a new hash when it reloads its
        state, so a restarted node would look like another chain.)
        """
        cached = self.__dict__.get("_identity")
        if cached is None:
            number = yield from self._call_uint_steps("deploymentBlock", [], block="latest")
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

    def _deployment_block_steps(self) -> Steps[int]:
        """The block this registry was deployed in (from the registry itself)."""
        identity = yield from self._identity_steps()
        return int(identity["deployment_block"])

    def _eip712_domain_steps(self) -> Steps[EIP712Domain]:
        """The registry's EIP-712 domain, from its ERC-5267 ``eip712Domain()``: what fenced
        requests are signed in (name, version, chain id, this registry)."""
        cached = self.__dict__.get("_eip712_domain")
        if cached is None:
            fields, name, version, chain_id, verifying, _salt, _ext = yield from self._view_steps(
                "eip712Domain",
                [],
                ["bytes1", "string", "string", "uint256", "address", "bytes32", "uint256[]"],
                block="latest",
            )
            if fields != b"\x0f":
                raise ContractNotFound(f"unexpected EIP-712 domain fields 0x{fields.hex()} at {self.address}")
            from ..fenced_requests import EIP712Domain

            cached = EIP712Domain(name, version, chain_id, to_checksum_address(verifying))
            self.__dict__["_eip712_domain"] = cached
        return cached

    # -- a resource's lease, read ------------------------------------------------------------------

    def _lease_info_steps(
        self, resource: str | None, resource_id: bytes, *, block: str | int | None = None
    ) -> Steps[LeaseInfo]:
        """The resource's latest lease at ``block``; ``None`` means the latest state judged at chain.now().

        At the latest state, an answer below what was seen is read once more before it is believed
        (:mod:`chainfence._sdk.rollback`: anvil answers one from the block before while it mines); it raises
        :class:`~chainfence.errors.ChainRolledBack` if the read after it says so too."""
        try:
            return (yield from self._read_lease_info_steps(resource, resource_id, block=block))
        except ChainRolledBack as lost:
            logger.warning("%s; reading it again before believing it", lost)
        return (yield from self._read_lease_info_steps(resource, resource_id, block=block))

    def _read_lease_info_steps(
        self, resource: str | None, resource_id: bytes, *, block: str | int | None = None
    ) -> Steps[LeaseInfo]:
        """One read of :meth:`_lease_info_steps`."""
        seen = self._seen()
        before = seen.before(resource_id)
        types = ["address", "uint256", "uint256", "uint8"]
        judged_at = None
        if block is None:  # the latest state, and the time to judge it by, in one round trip
            raw, judged_at = yield from self.chain._call_now_steps(self.address, self._encode("leaseOf", [resource_id]))
            holder, token, expires_at, status = self._decode("leaseOf", raw, types, "latest")
        else:
            holder, token, expires_at, status = yield from self._view_steps(
                "leaseOf", [resource_id], types, block=block
            )
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

    def _last_lease_steps(
        self, resource: str | None = None, *, resource_id: bytes | None = None, block: str | int | None = None
    ) -> Steps[LeaseInfo | None]:
        """The latest lease of ``resource`` whatever its state, or None if it was never held.

        A lease whose expiry has passed by :meth:`Chain.now <chainfence.Chain.now>`
        reads EXPIRED even if no block was mined since (``expired_unmined``). A resource known only
        by its id (``keccak256(name)``, as guards and audits know resources whose names the chain never
        told them): ``resource_id=`` instead of the name (one of the two, else
        :class:`~chainfence.errors.InvalidInput`).
        """
        if resource is not None and resource_id is not None:
            raise InvalidInput("last_lease takes a resource's name or its resource_id, not both")
        if resource_id is not None:
            if not isinstance(resource_id, (bytes, bytearray)) or len(resource_id) != 32:
                raise InvalidInput(f"a resource id is 32 bytes, got {resource_id!r}")
            info = yield from self._lease_info_steps(None, bytes(resource_id), block=block)
        else:  # a name (None is InvalidResourceName, as any name that is not one)
            info = yield from self._lease_info_steps(resource, _validate.resource_id(resource), block=block)
        return None if info.status is LeaseStatus.UNHELD else info

    def _check_token_steps(
        self,
        resource: str,
        token: int,
        *,
        block: str | int | None = None,
        confirmations: int = 0,
        resource_id: bytes | None = None,
    ) -> Steps[LeaseInfo]:
        """The live lease of ``token`` (``resource_id``: a claimed work item's, not its name's hash), or the
        :class:`~chainfence.errors.TokenNotCurrent` subclass that says how it is not."""
        resource_id = _validate.resource_id(resource) if resource_id is None else resource_id
        token = _validate.token(token)
        k = _validate_confirmations(confirmations)
        info = yield from self._lease_info_steps(resource, resource_id, block=block)
        self._raise_unless_current(resource, resource_id, token, info)
        if k:
            confirmed_block = None if block is None else (block - k if isinstance(block, int) else None)
            yield from self._require_confirmed_steps(
                resource, resource_id, token, confirmed_block, k, holder=info.holder
            )
        return info

    def _token_is_current_steps(
        self, resource: str, token: int, *, block: str | int | None = None, resource_id: bytes | None = None
    ) -> Steps[bool]:
        try:
            yield from self._check_token_steps(resource, token, block=block, resource_id=resource_id)
        except TokenNotCurrent:
            return False
        return True

    def _raise_unless_current(self, resource: str, resource_id: bytes, token: int, info: LeaseInfo) -> None:
        judge(info, token, resource=resource, resource_id=resource_id)

    def _require_confirmed_steps(
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
                confirmed = yield from self._lease_info_steps(resource, resource_id, block=confirmed_block)
            except ContractNotFound:
                confirmed = None  # the confirmed head predates the registry: nothing is confirmed yet
        if confirmed is None or confirmed.token != token or confirmed.holder != holder:
            logger.info("unconfirmed token resource=%s token=%d confirmations=%d", resource, token, k)
            raise TokenNotConfirmed(token=token, confirmations=k, resource=resource, resource_id=resource_id)

    # -- one token's operations (a lease's, a claim's: by id, as a claimed item's id is not its name's hash) --

    def _renew_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, ttl: int, progress: Any, confirmations: int | None
    ) -> Steps[int]:
        token = _validate.token(token)
        ttl = _validate.ttl(ttl, (yield from self._max_ttl_steps()))
        if progress is None:
            function, args = "renew", [resource_id, token, ttl]
        else:
            function, args = "renewWithProgress", [resource_id, token, ttl, _validate.progress(progress)]
        receipt, event = yield from self._lease_tx_steps(function, resource, args, _events.Kind.RENEWED, confirmations)
        expires_at = event.expires_at
        assert expires_at is not None
        logger.info(
            "renewed resource=%s token=%d expires_at=%d progress=%s tx=%s",
            resource,
            token,
            expires_at,
            "0x" + event.progress.hex() if event.progress and any(event.progress) else "-",
            receipt["transactionHash"].to_0x_hex(),
        )
        return expires_at

    def _release_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, confirmations: int | None
    ) -> Steps[None]:
        token = _validate.token(token)
        _receipt, event = yield from self._lease_tx_steps(
            "release", resource, [resource_id, token], _events.Kind.RELEASED, confirmations
        )
        logger.info("released resource=%s token=%d tx=%s", resource, token, event.tx_hash)
        _metrics.lease_ended("released")  # every lone release: a Lease's, Registry.release's, a claim's

    def _complete_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, result: bytes, confirmations: int | None
    ) -> Steps[bytes]:
        token = _validate.token(token)
        if not isinstance(result, (bytes, bytearray)):
            raise InvalidInput(f"result must be bytes (or a 32-byte digest), got {type(result).__name__}")
        digest = bytes(result) if len(result) == 32 else keccak(bytes(result))
        receipt, _ = yield from self._lease_tx_steps(
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

    # -- how a lease ended ---------------------------------------------------------------------------

    def _end_of_steps(self, lease: Lease) -> Steps[End | None]:
        """How ``lease`` ended, read from the chain now (:mod:`chainfence.endings`); None while it is live and its holder's."""
        try:
            info = yield from self._lease_info_steps(lease.resource, lease.resource_id)
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

    # -- leases built from what a transaction logged ------------------------------------------------

    def _lease_from_receipt(self, receipt: Any, *, resource: str, ttl: int) -> Lease | None:
        """The lease the ``LeaseAcquired`` of ``receipt`` records, or None if it logged none."""
        try:
            event = self._event(receipt, _events.Kind.ACQUIRED)
        except ChainError:
            return None
        return Lease._from_event(self, event, receipt, resource=resource, ttl=ttl)

    # -- the contract's calls ---------------------------------------------------------------------

    def _lease_tx_steps(
        self, function: str, resource: str, args: list[Any], event: _events.Kind, confirmations: int | None
    ) -> Steps[tuple[Any, _events.RegistryLog]]:
        """Send a lease operation as the sender; returns the receipt and its ``event``."""
        receipt = yield from self._transact_steps(function, args, resource=resource, confirmations=confirmations)
        return receipt, self._event(receipt, event)

    def _transact_steps(
        self, function: str, args: list[Any], *, resource: str | None = None, confirmations: int | None = None
    ) -> Steps[Any]:
        """Send ``function(args)`` to the registry as the sender; returns the receipt once it counts."""
        return (
            yield from self.chain._transact_steps(
                self._require_sender(),
                self.address,
                self._encode(function, args),
                resource=resource,
                confirmations=confirmations,
            )
        )

    def _require_sender(self) -> str:
        if self.sender is None:
            raise UnknownAccount("this registry has no sender: use registry.connect(account)")
        return self.sender

    def _encode(self, function: str, args: list[Any]) -> bytes:
        if function in _REMEMBERED_CALLS:
            try:
                return _calldata(function, tuple(args), tuple(map(type, args)))
            except TypeError:  # an argument that cannot be a key: encoded (and refused) as any other
                pass
        return _encoded(function, args)

    def _call_uint_steps(self, function: str, args: list[Any], *, block: str | int = "latest") -> Steps[int]:
        return (yield from self._view_steps(function, args, ["uint256"], block=block))[0]  # type: ignore[no-any-return]

    def _view_steps(
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
        """The ``kind`` event this registry emitted in ``receipt`` (read from the logs as the node sent them:
        :func:`~chainfence._node.formats.raw_logs`)."""
        decoded = _events.first(raw_logs(receipt), self.address, kind)
        if decoded is not None:
            return decoded
        raise ChainError(f"transaction {receipt['transactionHash'].to_0x_hex()} emitted no {kind.value} event")

    def _seen(self) -> Seen:
        return Seen.of(self.chain, self.address)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RegistryContract) and (self.chain, self.address) == (other.chain, other.address)

    def __hash__(self) -> int:
        return hash((id(self.chain), self.address))


def _encoded(function: str, args: Sequence[Any]) -> bytes:
    """The calldata of ``function(args)``. A ``string`` argument given as ``bytes`` is sent as those bytes
    (``string`` and ``bytes`` encode alike): a name exactly as the registry holds it, which need not be
    UTF-8 (the admin's paths: :func:`chainfence._sdk.names.held_name`)."""
    selector, types = _artifacts.functions("FencingRegistry")[function]
    sent = [
        "bytes" if kind == "string" and isinstance(arg, (bytes, bytearray)) else kind
        for kind, arg in zip(types, args, strict=False)
    ]
    return selector + abi_encode(sent, args)


#: The calls whose calldata is remembered for their arguments: an acquisition's (a name and a ttl), which
#: a service sends with the same arguments over and over (docs/benchmarks/history.md, "The SDK's own work per
#: call"). Keyed by the arguments and their types, so that ``True`` never answers for ``1``.
_REMEMBERED_CALLS = frozenset({"acquire", "acquireExclusive"})


@functools.lru_cache(maxsize=4096)
def _calldata(function: str, args: tuple[Any, ...], _types: tuple[type, ...]) -> bytes:
    return _encoded(function, args)


def at_block(block: str | int | None) -> str | int:
    """A view's block: ``"latest"`` for None."""
    return "latest" if block is None else block


def _validate_confirmations(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000:
        raise InvalidInput(f"confirmations must be an int from 0 to 1000, got {value!r}")
    return value


@functools.lru_cache(maxsize=4096)
def _checksum(address: str) -> str:
    return to_checksum_address(address)


checksum = _checksum
