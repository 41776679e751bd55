"""The proven mode: judge a fencing token by its lease slot, proven against a header you trust.

Strict mode believes its JSON-RPC provider: a compromised or buggy one can
say a stale holder is current, hide a takeover or serve an old block, and
the check accepts the stale write. The proven mode believes no provider::

    from chainfence.proofs import ProvenReader, QuorumHeaders

    headers = QuorumHeaders([url_a, url_b, url_c], k=2, confirmations=2)
    reader = ProvenReader(registry_address, headers=headers, provider=url_a)
    reader.check("reports/daily", token)     # raises StaleToken, ... like strict mode

For each check: the header source gives a header it verified (k of n
providers agree on its hash and its fields hash to it; or one endpoint the
user trusts for headers: :class:`TrustedHeaders`); ``provider`` serves
``eth_getProof`` for the registry's lease slot at that block; the account
proof is checked against the header's state root, the storage proof against
the account's storage root, and the proven slot is decoded and judged
exactly as strict mode judges ``leaseOf``. An answer that does not verify
is :class:`~chainfence.errors.ProofInvalid` naming the provider and the
block; nothing is judged and no mark moves. See ``docs/guarantees.md`` for
the threat model (k of n honest header providers, or one trusted header
endpoint; the proof provider need not be honest) and what a light client
adds that a quorum does not.

Time: a lease is judged at ``max(header.timestamp, clock())``, the
verifier's clock (default :func:`time.time`; the header source's), so a
lease that ran out after the proven block, even with no block since, is
:class:`~chainfence.errors.LeaseExpired` (``no_block_since``) as in strict
mode, and a header held back by the providers can only make leases look
older, never younger.

Where services use it: ``Guard(..., mode=Proven(headers))`` (and
``Mark(headers=...)``, ``Follow(headers=...)``: :mod:`chainfence.guard`), ``AsyncGuard``,
``fenced_transaction(..., headers=...)``, ``FencingMiddleware`` over a proven
guard and ``chainfence verify --proven``. What they ask of a reader:
:meth:`ProvenReader.check` and :meth:`~ProvenReader.lease_at`;
:meth:`~ProvenReader.leases` (several leases and the registry's latest token
in one proof: a new epoch, a follower's page, a guard opening);
:meth:`~ProvenReader.require_confirmed` (strict mode's confirmations,
proven); :meth:`~ProvenReader.is_contract` (a signed request's holder).

This module imports neither web3 nor eth-utils, eth-abi, eth-account or rlp
(the HTTP transport loads the SDK's lean ``_rpc`` layer when the first URL
endpoint is built).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._core import log as _log
from ._core.limits import MAX_NAME_LENGTH
from ._node import proofs as _proofs
from ._node.headers import HeaderSource, QuorumHeaders, TrustedHeaders, VerifiedHeader
from ._node.jsonrpc import Endpoint, endpoint
from ._node.rlp import keccak256
from ._sdk.lease_state import LeaseInfo, LeaseStatus, judge
from .errors import ContractNotFound, InvalidInput, ProofInvalid, ProofsNotServed, RpcError

logger = _log.get(__name__)

__all__ = ["HeaderSource", "ProvenLeases", "ProvenReader", "QuorumHeaders", "TrustedHeaders", "VerifiedHeader"]

_ITEM_SEPARATOR = "\u00bb"  # chainfence._sdk.names.ITEM_SEPARATOR: "workset»item" names a claimed work item

#: The registry's ``_counter`` slot (its second state variable): bits 0..47 the highest token issued.
_COUNTER_SLOT = (1).to_bytes(32, "big")
_TOKEN_MASK = (1 << 48) - 1


@dataclass(frozen=True)
class ProvenLeases:
    """What one proof showed at ``header``: the leases asked for (in the order asked), and the
    registry's latest token (the highest it issued, whatever the resource)."""

    header: VerifiedHeader
    leases: tuple[LeaseInfo, ...]
    latest_token: int


def _resource(resource: str | bytes) -> tuple[str | None, bytes]:
    """(name or None, id) of a resource given by name or by its 32-byte id. A claimed work item's name
    (``"workset»item"``) has the item's id, as :func:`chainfence._sdk.names.resource_id` computes it."""
    if isinstance(resource, (bytes, bytearray)):
        if len(resource) != 32:
            raise InvalidInput(f"a resource id is 32 bytes, got {len(resource)}")
        return None, bytes(resource)
    from .errors import InvalidResourceName

    if not isinstance(resource, str):
        raise InvalidResourceName(f"resource name must be a str, got {type(resource).__name__}")
    if _ITEM_SEPARATOR in resource:
        workset, _, item = resource.partition(_ITEM_SEPARATOR)
        if not workset or not item or _ITEM_SEPARATOR in item:
            raise InvalidResourceName(
                f"{resource[:80]!r}: '{_ITEM_SEPARATOR}' names a claimed work item, as workset{_ITEM_SEPARATOR}item"
            )
        return resource, _item_id(_name_bytes(workset), _name_bytes(item))
    return resource, keccak256(_name_bytes(resource))


def _name_bytes(name: str) -> bytes:
    from .errors import InvalidResourceName

    try:
        data = name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidResourceName(f"resource name is not valid UTF-8: {exc.reason}") from None
    if not data:
        raise InvalidResourceName("resource name must not be empty", length=0, max_length=MAX_NAME_LENGTH)
    if len(data) > MAX_NAME_LENGTH:
        raise InvalidResourceName(length=len(data), max_length=MAX_NAME_LENGTH)
    return data


def _item_id(workset: bytes, item: bytes) -> bytes:
    """``keccak256(abi.encode(workset, item))``: a claimed work item's id (without eth-abi)."""

    def tail(data: bytes) -> bytes:
        return len(data).to_bytes(32, "big") + data + b"\x00" * (-len(data) % 32)

    first, second = tail(workset), tail(item)
    head = (64).to_bytes(32, "big") + (64 + len(first)).to_bytes(32, "big")
    return keccak256(head + first + second)


def _token(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 1 << 256:
        raise InvalidInput(
            f"a fencing token is an int from 1 to 2**256 - 1, got {value!r:.80}", argument="token", value=value
        )
    return value


def _address(value: object) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) != 42:
        raise InvalidInput(f"not a 20-byte hex address: {value!r:.80}", argument="address", value=value)
    try:
        raw = bytes.fromhex(value[2:])
    except ValueError:
        raise InvalidInput(f"not a 20-byte hex address: {value!r}", argument="address", value=value) from None
    if value[2:] != value[2:].lower() and value[2:] != value[2:].upper() and _proofs.checksum_address(raw) != value:
        raise InvalidInput(f"bad checksum: {value!r}", argument="address", value=value)
    return raw


def _hex_bytes(value: Any, what: str) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise _proofs.ProofMismatch(f"{what} is not 0x-hex")
    try:
        return bytes.fromhex(value[2:] if len(value) % 2 == 0 else "0" + value[2:])
    except ValueError:
        raise _proofs.ProofMismatch(f"{what} is not 0x-hex") from None


def _hex_int(value: Any, what: str) -> int:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise _proofs.ProofMismatch(f"{what} is not a 0x quantity")
    if len(value) > 2 + 64:  # wider than any account field or storage word (and than int() should read)
        raise _proofs.ProofMismatch(f"{what} is wider than 256 bits")
    try:
        return int(value, 16)
    except ValueError:
        raise _proofs.ProofMismatch(f"{what} is not a 0x quantity") from None


class ProvenReader:
    """Reads and judges leases from proofs against trusted headers (see the module docstring).

    ``registry_address``: the registry's address. ``headers``: a
    :class:`QuorumHeaders` or :class:`TrustedHeaders`. ``provider``: where
    proofs come from (a URL, or a :class:`~chainfence.Chain`); it need not be
    trusted. ``clock``: the verifier's clock (default: the header source's).
    """

    def __init__(
        self,
        registry_address: str,
        *,
        headers: HeaderSource,
        provider: Any,
        clock: Any = None,
        timeout: float = 10.0,
    ):
        if not isinstance(headers, HeaderSource):
            raise InvalidInput("headers must be a QuorumHeaders or a TrustedHeaders")
        self._address = _address(registry_address)
        self.address = _proofs.checksum_address(self._address)
        self.headers = headers
        self.endpoint: Endpoint = endpoint(provider, timeout=timeout)
        self.clock = clock or headers.clock
        self._proofs_served = False

    def require_proofs(self) -> None:
        """Raise :class:`~chainfence.errors.ProofsNotServed` if the provider does not serve
        ``eth_getProof`` (eth-tester does not). Asked once per reader (the first check asks it before any
        header): a guard asks it when it opens."""
        self._require_proofs()

    def _require_proofs(self) -> None:
        """Once per reader, before any header is asked for: does the provider serve eth_getProof at
        all? (eth-tester does not: ProofsNotServed, not a header error further on.)"""
        if self._proofs_served:
            return
        try:
            self.endpoint.request("eth_getProof", [self.address, [], "latest"])
        except RpcError as exc:
            if _not_served(exc):
                raise ProofsNotServed(source=self.endpoint.name, detail=exc.rpc_message) from exc
            raise
        self._proofs_served = True

    # -- reading --------------------------------------------------------------

    def header(self) -> VerifiedHeader:
        """The header the next check would be judged at (``headers.current()``)."""
        return self.headers.current()

    def packed_slot(self, resource: str | bytes, *, header: VerifiedHeader | None = None) -> tuple[int, VerifiedHeader]:
        """The proven value of ``resource``'s lease slot at ``header`` (default: the current one)."""
        _, resource_id = _resource(resource)
        self._require_proofs()
        if header is None:
            header = self.headers.current()
        return self._proven_slot(resource_id, header), header

    def lease_at(self, resource: str | bytes, *, header: VerifiedHeader | None = None) -> LeaseInfo:
        """The resource's latest lease, whatever its state (UNHELD if never held), proven at ``header``
        (default: the header source's current one) and judged at ``max(header time, clock)``."""
        name, resource_id = _resource(resource)
        self._require_proofs()
        if header is None:
            header = self.headers.current()
        packed = self._proven_slot(resource_id, header)
        judged_at = max(header.timestamp, int(self.clock()))
        return lease_info(name, resource_id, packed, block_time=header.timestamp, judged_at=judged_at)

    def leases(self, resources: Sequence[str | bytes], *, header: VerifiedHeader | None = None) -> ProvenLeases:
        """Every lease of ``resources`` (names or 32-byte ids) and the registry's latest token, proven by
        one ``eth_getProof`` at ``header`` (default: the header source's current one), each judged at
        ``max(header time, clock)`` as :meth:`lease_at` judges it. What a guard proves at a new epoch
        (the lease, and that the registry did not go back below what the guard accepted) and what a
        follower proves of a page of logs."""
        parsed = [_resource(resource) for resource in resources]
        self._require_proofs()
        if header is None:
            header = self.headers.current()
        slots = [_proofs.lease_slot(resource_id) for _, resource_id in parsed]
        values = self._proven_slots([*slots, _COUNTER_SLOT], header)
        judged_at = max(header.timestamp, int(self.clock()))
        leases = tuple(
            lease_info(name, resource_id, packed, block_time=header.timestamp, judged_at=judged_at)
            for (name, resource_id), packed in zip(parsed, values)
        )
        return ProvenLeases(header=header, leases=leases, latest_token=values[-1] & _TOKEN_MASK)

    def latest_token(self, *, header: VerifiedHeader | None = None) -> int:
        """The registry's latest token (the highest it issued), proven at ``header`` (default: the
        header source's current one)."""
        return self.leases([], header=header).latest_token

    def check(self, resource: str | bytes, token: int, *, header: VerifiedHeader | None = None) -> LeaseInfo:
        """The live lease of ``token``; raises the :class:`~chainfence.errors.TokenNotCurrent` subclass
        strict mode's ``check_current`` raises if it is not (StaleToken, UnknownToken, LeaseExpired,
        LeaseReleased, LeaseRevoked). Raises a :class:`~chainfence.errors.UnverifiedAnswer`,
        :class:`~chainfence.errors.ProviderUnavailable` or
        :class:`~chainfence.errors.ProofsNotServed` when nothing could be proven: then nothing was
        judged."""
        name, resource_id = _resource(resource)
        token = _token(token)
        info = self.lease_at(resource_id if name is None else name, header=header)
        judge(info, token, resource=name, resource_id=resource_id)
        return info

    def require_confirmed(
        self, resource: str | bytes, token: int, holder: str, *, header: VerifiedHeader, confirmations: int
    ) -> None:
        """Strict mode's :class:`~chainfence.errors.TokenNotConfirmed`, proven: the lease at the block
        ``confirmations`` below ``header`` (verified by the header source) carries ``token`` and
        ``holder``, so a reorg shallower than that cannot take the token back. (A guard's and a fenced
        transaction's ``confirmations``, counted from the header the check was judged at.)"""
        from .errors import TokenNotConfirmed

        name, resource_id = _resource(resource)
        number = header.number - confirmations
        confirmed = None
        if confirmations and number >= 0:
            try:
                confirmed = self.lease_at(resource_id, header=self.headers.at(number))
            except ContractNotFound:
                confirmed = None  # the confirmed block predates the registry: nothing is confirmed yet
        elif not confirmations:
            return
        if confirmed is None or confirmed.token != token or confirmed.holder != holder:
            logger.info("unconfirmed token resource=%s token=%d confirmations=%d", name, token, confirmations)
            raise TokenNotConfirmed(token=token, confirmations=confirmations, resource=name, resource_id=resource_id)

    def is_current(self, resource: str | bytes, token: int, *, header: VerifiedHeader | None = None) -> bool:
        from .errors import TokenNotCurrent

        try:
            self.check(resource, token, header=header)
        except TokenNotCurrent:
            return False
        return True

    # -- the proof ------------------------------------------------------------

    def _proven_slot(self, resource_id: bytes, header: VerifiedHeader) -> int:
        return self._proven_slots([_proofs.lease_slot(resource_id)], header)[0]

    def _proven_slots(self, slots: list[bytes], header: VerifiedHeader) -> list[int]:
        """The values of ``slots`` of the registry's storage at ``header``, from one ``eth_getProof``."""
        try:
            answer = self.endpoint.request(
                "eth_getProof", [self.address, ["0x" + slot.hex() for slot in slots], hex(header.number)]
            )
        except RpcError as exc:
            if _not_served(exc):
                raise ProofsNotServed(source=self.endpoint.name, detail=exc.rpc_message) from exc
            raise
        try:
            return self._verify(answer, slots, header)
        except _proofs.ProofMismatch as bad:
            logger.warning("proof from %s for block %d does not verify: %s", self.endpoint.name, header.number, bad)
            raise ProofInvalid(
                source=self.endpoint.name, block=header.number, block_hash=header.hash_hex, reason=str(bad)
            ) from None

    def _verify(self, answer: Any, slots: list[bytes], header: VerifiedHeader) -> list[int]:
        account = self._verify_account(answer, self._address, header)
        if account is None or account.code_hash == _proofs.EMPTY_CODE_HASH:
            # Proven: no contract at this address at this block. Strict mode says the same.
            raise ContractNotFound(f"no contract at {self.address} in block {header.number} (proven)")
        entries = _list(answer.get("storageProof"))
        if len(entries) != len(slots) or not all(isinstance(entry, dict) for entry in entries):
            raise _proofs.ProofMismatch(f"storageProof must hold exactly the {len(slots)} slot(s) asked for")
        values = []
        for slot, entry in zip(slots, entries):
            key = _hex_bytes(entry.get("key"), "the storage key")
            if key.rjust(32, b"\x00") != slot or len(key) > 32:
                raise _proofs.ProofMismatch("the storage proof is for another slot")
            storage_proof = [_hex_bytes(node, "a storage proof node") for node in _list(entry.get("proof"))]
            value = _proofs.verify_storage(account.storage_root, slot, storage_proof)
            if _hex_int(entry.get("value"), "the storage value") != value:
                raise _proofs.ProofMismatch("the value it states is not the value its proof proves")
            values.append(value)
        return values

    @staticmethod
    def _verify_account(answer: Any, address: bytes, header: VerifiedHeader) -> _proofs.Account | None:
        """The account ``answer`` proves at ``address`` against the header's state root (None: absent),
        after checking that what the answer states beside the proof is what the proof proves."""
        if not isinstance(answer, dict):
            raise _proofs.ProofMismatch("the answer is not an eth_getProof object")
        account_proof = [_hex_bytes(node, "an account proof node") for node in _list(answer.get("accountProof"))]
        account = _proofs.verify_account(header.state_root, address, account_proof)
        if account is None:
            return None
        # What the provider claims beside its proof must be what the proof proves.
        if _hex_bytes(answer.get("storageHash"), "storageHash") != account.storage_root:
            raise _proofs.ProofMismatch("storageHash is not the proven account's storage root")
        if _hex_bytes(answer.get("codeHash"), "codeHash") != account.code_hash:
            raise _proofs.ProofMismatch("codeHash is not the proven account's code hash")
        if (
            _hex_int(answer.get("nonce"), "nonce") != account.nonce
            or _hex_int(answer.get("balance"), "balance") != account.balance
        ):
            raise _proofs.ProofMismatch("nonce or balance is not the proven account's")
        return account

    def is_contract(self, address: str, *, header: VerifiedHeader | None = None) -> bool:
        """Whether ``address`` holds code at ``header`` (default: the header source's current one), proven
        by its account proof: a guard asks it of a holder whose request was not signed by its own key,
        before it believes any contract signature (ERC-1271) on its behalf."""
        raw = _address(address)
        self._require_proofs()
        if header is None:
            header = self.headers.current()
        name = _proofs.checksum_address(raw)
        try:
            answer = self.endpoint.request("eth_getProof", [name, [], hex(header.number)])
        except RpcError as exc:
            if _not_served(exc):
                raise ProofsNotServed(source=self.endpoint.name, detail=exc.rpc_message) from exc
            raise
        try:
            account = self._verify_account(answer, raw, header)
        except _proofs.ProofMismatch as bad:
            logger.warning("proof from %s for block %d does not verify: %s", self.endpoint.name, header.number, bad)
            raise ProofInvalid(
                source=self.endpoint.name, block=header.number, block_hash=header.hash_hex, reason=str(bad)
            ) from None
        return account is not None and account.code_hash != _proofs.EMPTY_CODE_HASH


def _not_served(exc: RpcError) -> bool:
    message = exc.rpc_message.lower()
    return (
        exc.code == -32601 or "not implemented" in message or "not supported" in message or "does not exist" in message
    )


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _proofs.ProofMismatch("a proof is a list of nodes")
    return value


def lease_info(resource: str | None, resource_id: bytes, packed: int, *, block_time: int, judged_at: int) -> LeaseInfo:
    """The :class:`LeaseInfo` strict mode reads (``leaseOf`` at a block of time ``block_time``, judged
    at chain time ``judged_at``): status as the contract's ``leaseOf`` computes it, then a lease the
    block still shows live but whose expiry ``judged_at`` has passed is EXPIRED (``expired_unmined``)."""
    lease = _proofs.decode_lease(packed)
    if lease.token == 0:
        status = LeaseStatus.UNHELD
    elif lease.done:
        status = LeaseStatus.DONE
    elif lease.revoked:
        status = LeaseStatus.REVOKED
    elif lease.expires_at == 0:
        status = LeaseStatus.RELEASED
    elif lease.expires_at <= block_time:
        status = LeaseStatus.EXPIRED
    else:
        status = LeaseStatus.LIVE
    expired_unmined = False
    judged: int | None = judged_at
    if status is LeaseStatus.LIVE and lease.expires_at <= judged_at:
        status, expired_unmined = LeaseStatus.EXPIRED, True
    elif status is not LeaseStatus.LIVE:
        judged = None
    return LeaseInfo(
        resource=resource,
        resource_id=resource_id,
        holder=lease.holder,
        token=lease.token,
        expires_at=lease.expires_at,
        status=status,
        judged_at=judged,
        expired_unmined=expired_unmined,
    )
