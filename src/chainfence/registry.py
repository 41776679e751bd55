"""The SDK side of the FencingRegistry contract: acquire, renew, release, views.

::

    registry = Registry.deploy(chain)            # or Registry.at(chain, address)
    a = registry.connect(alice)                  # same registry, transactions sent as alice
    lease = a.acquire("reports/daily", ttl=30)   # Lease: resource, token, holder, expires_at
    with a.lease("reports/daily", ttl=30) as lease:
        ...                                      # released on exit

Every method validates its arguments before it touches the chain, raises a
:mod:`chainfence.errors` class for every revert (never a web3 or eth-tester
exception) and logs one INFO line per lease state change.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from web3 import Web3

from . import _artifacts, _validate
from .chain import Chain
from .errors import (
    ChainError,
    ContractNotFound,
    InvalidInput,
    InvalidMaxTtl,
    NotConfirmed,
    TokenNotCurrent,
    UnknownAccount,
    WrongChain,
)
from .lease import AcquireReason, Lease, LeaseInfo, LeaseStatus

if TYPE_CHECKING:
    from .deployment import Deployment
    from .fenced_requests import EIP712Domain

logger = logging.getLogger(__name__)

__all__ = ["Registry"]

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
        self._contract = chain.w3.eth.contract(address=self.address, abi=_artifacts.abi())

    # ------------------------------------------------------------------
    # Construction
    # ------------------------------------------------------------------

    @classmethod
    def deploy(cls, chain: Chain, *, max_ttl: int = DEFAULT_MAX_TTL, sender: Any = None) -> Registry:
        """Deploy a new FencingRegistry whose leases last at most ``max_ttl`` seconds.

        ``sender`` (default: the chain's first account) pays for deployment
        and is the default sender of the returned registry. It gains no
        privilege: the registry has no owner.
        """
        if isinstance(max_ttl, bool) or not isinstance(max_ttl, int) or not 1 <= max_ttl <= 2**32 - 1:
            raise InvalidMaxTtl(max_ttl=max_ttl)
        deployer = chain.signer(sender if sender is not None else _first_account(chain))
        artifact = _artifacts.load()
        factory = chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
        data = bytes.fromhex(factory.constructor(max_ttl).data_in_transaction[2:])
        receipt = chain.transact(deployer, None, data)
        registry = cls(chain, receipt["contractAddress"], sender=deployer)
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
        address = _validate.address(address, "registry address")
        code = bytes(chain.w3.eth.get_code(address))
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
        for another chain, or for an earlier incarnation of this dev chain.
        """
        from .deployment import Deployment, load

        record = deployment if isinstance(deployment, Deployment) else load(deployment)
        if record.chain_id != chain.chain_id:
            raise WrongChain(f"the deployment is on chain {record.chain_id}; this node serves chain {chain.chain_id}")
        genesis = chain.w3.eth.get_block(0)["hash"].to_0x_hex()
        if genesis != record.genesis_hash:
            raise WrongChain(
                f"the deployment was made on a chain with genesis {record.genesis_hash}, this node's is {genesis} "
                "(a dev node that was reset?)"
            )
        return cls.at(chain, record.registry, sender=sender)

    def connect(self, account: Any) -> Registry:
        """The same registry, sending transactions as ``account`` (an address the chain holds a key for)."""
        other = type(self)(self.chain, self.address, sender=self.chain.signer(account))
        # Share what never changes for a deployed registry: saves a call per view.
        for cached in ("max_ttl", "_genesis_hash", "_eip712_domain"):
            if cached in self.__dict__:
                other.__dict__[cached] = self.__dict__[cached]
        return other

    # ------------------------------------------------------------------
    # Lease operations (transactions)
    # ------------------------------------------------------------------

    def acquire(self, resource: str, ttl: int, *, confirmations: int | None = None) -> Lease:
        """Acquire ``resource`` for ``ttl`` seconds of chain time; return the :class:`Lease`.

        The lease carries a new fencing token, higher than every token the
        registry issued before. If the sender already holds the resource it
        gets a new token too (its earlier incarnation is fenced off).

        With ``confirmations`` (default: the chain's setting) it returns only
        once the acquiring transaction is that many blocks deep and the lease
        is still the sender's.

        Raises :class:`~chainfence.errors.LeaseHeld` while someone else holds
        a live lease, :class:`~chainfence.errors.InvalidResourceName` or
        :class:`~chainfence.errors.InvalidTtl` on bad input (nothing sent).
        If the transaction was mined but did not reach its confirmations in
        time, :class:`~chainfence.errors.NotConfirmed` carries the ``lease``
        it created, so that it is never forgotten.
        """
        _validate.resource_bytes(resource)
        ttl = _validate.ttl(ttl, self.max_ttl)
        sender = self._require_sender()
        data = self._encode("acquire", [resource, ttl])
        try:
            receipt = self.chain.transact(sender, self.address, data, resource=resource, confirmations=confirmations)
        except NotConfirmed as unconfirmed:
            unconfirmed.lease = self._lease_from_receipt(unconfirmed.receipt, resource=resource, ttl=ttl)
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
        k = self.chain.confirmations if confirmations is None else confirmations
        if k:
            # The lease may have ended while we waited for depth (a short ttl).
            try:
                self.check_current(resource, lease.token)
            except TokenNotCurrent as lost:
                lost.add_note(f"acquired in block {lease.block_number}, lost before {k} confirmations")
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

    def lease_from_tx(self, tx_hash: str) -> Lease | None:
        """The lease a mined acquisition created, or None (not mined, failed, or not an acquisition).

        For reconciling after :class:`~chainfence.errors.OutcomeUnknown`:
        look up every candidate hash before acquiring again.
        """
        from web3.exceptions import TransactionNotFound

        try:
            receipt = self.chain.w3.eth.get_transaction_receipt(tx_hash)
            tx = self.chain.w3.eth.get_transaction(tx_hash)
        except TransactionNotFound:
            return None
        except Exception as exc:
            raise self.chain._sender.translate(exc, None) from exc
        if receipt["status"] != 1 or tx.get("to") != self.address:
            return None
        try:
            function, args = self._contract.decode_function_input(tx["input"])
        except ValueError:
            return None
        if function.fn_name != "acquire":
            return None
        return self._lease_from_receipt(receipt, resource=args["name"], ttl=args["ttl"])

    def _lease_from_receipt(self, receipt: Any, *, resource: str, ttl: int) -> Lease | None:
        try:
            event = self._event(receipt, "LeaseAcquired")
        except ChainError:
            return None
        holder = event["holder"]
        owner = self.connect(holder) if holder in self.chain.accounts else self
        return Lease(
            owner,
            resource=resource,
            resource_id=bytes(event["resource"]),
            token=event["token"],
            holder=holder,
            expires_at=event["expiresAt"],
            ttl=ttl,
            previous_token=event["previousToken"],
            reason=AcquireReason(event["reason"]),
            tx_hash=receipt["transactionHash"].to_0x_hex(),
            block_number=receipt["blockNumber"],
        )

    def renew(self, resource: str, token: int, ttl: int, *, confirmations: int | None = None) -> int:
        """Extend the sender's live lease on ``resource`` (with ``token``) to now + ``ttl``; return the new expiry."""
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        ttl = _validate.ttl(ttl, self.max_ttl)
        receipt, event = self._lease_tx("renew", resource, [resource_id, token, ttl], "LeaseRenewed", confirmations)
        expires_at = event["expiresAt"]
        logger.info(
            "renewed resource=%s token=%d expires_at=%d tx=%s",
            resource,
            token,
            expires_at,
            receipt["transactionHash"].to_0x_hex(),
        )
        return expires_at

    def release(self, resource: str, token: int, *, confirmations: int | None = None) -> None:
        """End the sender's live lease on ``resource`` with ``token``. An old token never frees a newer lease."""
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        receipt, _ = self._lease_tx("release", resource, [resource_id, token], "LeaseReleased", confirmations)
        logger.info(
            "released resource=%s token=%d tx=%s", resource, token, receipt["transactionHash"].to_0x_hex()
        )

    def complete(
        self, resource: str, token: int, result: bytes, *, confirmations: int | None = None
    ) -> bytes:
        """Record the result of the work done under ``token``, only while ``token`` is current.

        ``result`` is the result itself (its keccak256 is recorded) or a
        32-byte digest you computed. Returns the digest recorded in the
        ``LeaseCompleted`` event. A holder that lost its lease gets the
        registry's refusal (:class:`~chainfence.errors.StaleToken`,
        :class:`~chainfence.errors.LeaseExpired`, ...) and nothing is recorded.
        """
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        if not isinstance(result, (bytes, bytearray)):
            raise InvalidInput(f"result must be bytes (or a 32-byte digest), got {type(result).__name__}")
        digest = bytes(result) if len(result) == 32 else Web3.keccak(bytes(result))
        receipt, _ = self._lease_tx("complete", resource, [resource_id, token, digest], "LeaseCompleted", confirmations)
        logger.info(
            "completed resource=%s token=%d result=0x%s tx=%s",
            resource,
            token,
            digest.hex(),
            receipt["transactionHash"].to_0x_hex(),
        )
        return digest

    @contextmanager
    def lease(self, resource: str, ttl: int, *, confirmations: int | None = None) -> Iterator[Lease]:
        """``with registry.lease(name, ttl) as lease:`` acquire, run the body, release.

        Raises :class:`~chainfence.errors.LeaseHeld` (and the body does not
        run) if someone else holds it. On exit the lease is released; if it
        expired or was superseded while the body ran, that error is raised
        after a body that succeeded, and added as a note to the body's own
        exception otherwise.
        """
        with self.acquire(resource, ttl, confirmations=confirmations) as lease:
            yield lease

    # ------------------------------------------------------------------
    # Views
    # ------------------------------------------------------------------

    @functools.cached_property
    def max_ttl(self) -> int:
        """The longest ttl this registry accepts, fixed at deployment."""
        return self._call_uint("maxTtl", [])

    def latest_token(self, *, block: str | int = "latest") -> int:
        """The highest token issued so far (0 before the first acquisition)."""
        return self._call_uint("latestToken", [], block=block)

    def lease_of(self, resource: str, *, block: str | int = "latest") -> LeaseInfo | None:
        """The live lease of ``resource``, or None if nobody holds it (free, expired or released)."""
        info = self.last_lease(resource, block=block)
        return info if info is not None and info.live else None

    def last_lease(self, resource: str, *, block: str | int = "latest") -> LeaseInfo | None:
        """The latest lease of ``resource`` whatever its state, or None if it was never held."""
        info = self._lease_info(resource, _validate.resource_id(resource), block=block)
        return None if info.status is LeaseStatus.UNHELD else info

    def is_current(self, resource: str, token: int, *, block: str | int = "latest") -> bool:
        """Whether ``token`` is the current token of ``resource`` and its lease is live."""
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        (current,) = self._view("isCurrent", [resource_id, token], ["bool"], block=block)
        return bool(current)

    def check_current(self, resource: str, token: int, *, block: str | int = "latest") -> LeaseInfo:
        """The live lease of ``token``; raises a :class:`~chainfence.errors.TokenNotCurrent` subclass if it is not."""
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        holder, expires_at = self._view(
            "checkCurrent", [resource_id, token], ["address", "uint256"], block=block, resource=resource
        )
        return LeaseInfo(
            resource=resource,
            resource_id=resource_id,
            holder=_checksum(holder),
            token=token,
            expires_at=expires_at,
            status=LeaseStatus.LIVE,
        )

    def eip712_domain(self) -> EIP712Domain:
        """The registry's EIP-712 domain, from its ERC-5267 ``eip712Domain()``: what fenced
        requests are signed in (name, version, chain id, this registry)."""
        from .fenced_requests import EIP712Domain

        cached = self.__dict__.get("_eip712_domain")
        if cached is None:
            fields, name, version, chain_id, verifying, _salt, _ext = self._view(
                "eip712Domain", [], ["bytes1", "string", "string", "uint256", "address", "bytes32", "uint256[]"],
                block="latest",
            )  # fmt: skip
            if fields != b"\x0f":
                raise ContractNotFound(f"unexpected EIP-712 domain fields 0x{fields.hex()} at {self.address}")
            cached = EIP712Domain(name, version, chain_id, Web3.to_checksum_address(verifying))
            self.__dict__["_eip712_domain"] = cached
        return cached

    def identity(self) -> dict[str, str]:
        """What makes this registry's token space unique: chain id, genesis block hash, address.

        Two in-process chains share a chain id and, deployed the same way, a
        registry address; only the genesis hash tells them apart.
        """
        genesis = self.__dict__.get("_genesis_hash")
        if genesis is None:
            genesis = self.chain.w3.eth.get_block(0)["hash"].to_0x_hex()
            self.__dict__["_genesis_hash"] = genesis
        return {"chain_id": str(self.chain.chain_id), "genesis_hash": genesis, "registry": self.address}

    def history(self, resource: str | None = None, **filters: Any) -> list[Any]:
        """Lease events of this registry, oldest first; see :func:`chainfence.audit.history`."""
        from .audit import history

        return history(self, resource, **filters)

    # ------------------------------------------------------------------
    # Internal
    # ------------------------------------------------------------------

    def _lease_info(self, resource: str | None, resource_id: bytes, *, block: str | int = "latest") -> LeaseInfo:
        holder, token, expires_at, status = self._view(
            "leaseOf", [resource_id], ["address", "uint256", "uint256", "uint8"], block=block
        )
        return LeaseInfo(
            resource=resource,
            resource_id=resource_id,
            holder=_checksum(holder),
            token=token,
            expires_at=expires_at,
            status=LeaseStatus(status),
        )

    def _lease_tx(
        self, function: str, resource: str, args: list[Any], event: str, confirmations: int | None
    ) -> tuple[Any, dict[str, Any]]:
        """Send a lease operation as the sender; returns the receipt and its ``event``'s arguments."""
        receipt = self.chain.transact(
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

    def _call_uint(self, function: str, args: list[Any], *, block: str | int = "latest") -> int:
        return self._view(function, args, ["uint256"], block=block)[0]

    def _view(
        self, function: str, args: list[Any], types: list[str], *, block: str | int, resource: str | None = None
    ) -> tuple[Any, ...]:
        """Call a view at ``block`` and decode its result. No code there (an address that is not
        a registry, or a block before its deployment) is ContractNotFound, not a decoding error."""
        raw = self.chain.call(self.address, self._encode(function, args), block=block, resource=resource)
        if not raw:
            raise ContractNotFound(f"no FencingRegistry code at {self.address} at block {block!r}")
        try:
            return tuple(abi_decode(types, raw))
        except Exception as exc:
            raise ContractNotFound(
                f"the contract at {self.address} answered {function}() with data that is not a FencingRegistry's"
            ) from exc

    def _event(self, receipt: Any, name: str) -> dict[str, Any]:
        """The arguments of the ``name`` event this registry emitted in ``receipt``."""
        event = getattr(self._contract.events, name)()
        topic = bytes.fromhex(event.topic[2:])
        for log in receipt["logs"]:
            if log["address"] != self.address or bytes(log["topics"][0]) != topic:
                continue
            return dict(event.process_log(log)["args"])
        raise ChainError(f"transaction {receipt['transactionHash'].to_0x_hex()} emitted no {name} event")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Registry) and (self.chain, self.address) == (other.chain, other.address)

    def __hash__(self) -> int:
        return hash((id(self.chain), self.address))

    def __repr__(self) -> str:
        return f"<Registry {self.address} chain_id={self.chain.chain_id} sender={self.sender}>"


@functools.lru_cache(maxsize=4096)
def _checksum(address: str) -> str:
    return Web3.to_checksum_address(address)


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
