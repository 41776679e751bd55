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

This module imports neither web3 nor eth-utils, eth-abi, eth-account or rlp
(the HTTP transport loads the SDK's lean ``_rpc`` layer when the first URL
endpoint is built).
"""

from __future__ import annotations

import logging
from typing import Any

from ._lease_state import LeaseInfo, LeaseStatus, judge
from ._limits import MAX_NAME_LENGTH
from ._node import proofs as _proofs
from ._node.headers import HeaderSource, QuorumHeaders, TrustedHeaders, VerifiedHeader
from ._node.jsonrpc import Endpoint, endpoint
from ._node.rlp import keccak256
from .errors import ContractNotFound, InvalidAddress, InvalidInput, ProofInvalid, ProofsNotServed, RpcError

logger = logging.getLogger(__name__)

__all__ = ["HeaderSource", "ProvenReader", "QuorumHeaders", "TrustedHeaders", "VerifiedHeader"]


def _resource(resource: str | bytes) -> tuple[str | None, bytes]:
    """(name or None, id) of a resource given by name or by its 32-byte id."""
    if isinstance(resource, (bytes, bytearray)):
        if len(resource) != 32:
            raise InvalidInput(f"a resource id is 32 bytes, got {len(resource)}")
        return None, bytes(resource)
    from .errors import InvalidResourceName

    if not isinstance(resource, str):
        raise InvalidResourceName(f"resource name must be a str, got {type(resource).__name__}")
    try:
        data = resource.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidResourceName(f"resource name is not valid UTF-8: {exc.reason}") from None
    if not data:
        raise InvalidResourceName("resource name must not be empty", length=0, max_length=MAX_NAME_LENGTH)
    if len(data) > MAX_NAME_LENGTH:
        raise InvalidResourceName(length=len(data), max_length=MAX_NAME_LENGTH)
    return resource, keccak256(data)


def _token(value: object) -> int:
    from .errors import InvalidToken

    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 1 << 256:
        raise InvalidToken(token=value)
    return value


def _address(value: object) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) != 42:
        raise InvalidAddress(f"not a 20-byte hex address: {value!r}")
    try:
        raw = bytes.fromhex(value[2:])
    except ValueError:
        raise InvalidAddress(f"not a 20-byte hex address: {value!r}") from None
    if value[2:] != value[2:].lower() and value[2:] != value[2:].upper() and _proofs.checksum_address(raw) != value:
        raise InvalidAddress(f"bad checksum: {value!r}")
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

    def _require_proofs(self) -> None:
        """Once per reader, before any header is asked for: does the provider serve eth_getProof at
        all? (eth-tester does not: ProofsNotServed, not a header error further on.)"""
        if self._proofs_served:
            return
        try:
            self.endpoint.request("eth_getProof", [self.address, [], "latest"])
        except RpcError as exc:
            if _not_served(exc):
                raise ProofsNotServed(provider=self.endpoint.name, detail=exc.rpc_message) from exc
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

    def is_current(self, resource: str | bytes, token: int, *, header: VerifiedHeader | None = None) -> bool:
        from .errors import TokenNotCurrent

        try:
            self.check(resource, token, header=header)
        except TokenNotCurrent:
            return False
        return True

    # -- the proof ------------------------------------------------------------

    def _proven_slot(self, resource_id: bytes, header: VerifiedHeader) -> int:
        slot = _proofs.lease_slot(resource_id)
        try:
            answer = self.endpoint.request("eth_getProof", [self.address, ["0x" + slot.hex()], hex(header.number)])
        except RpcError as exc:
            if _not_served(exc):
                raise ProofsNotServed(provider=self.endpoint.name, detail=exc.rpc_message) from exc
            raise
        try:
            return self._verify(answer, slot, header)
        except _proofs.ProofMismatch as bad:
            logger.warning("proof from %s for block %d does not verify: %s", self.endpoint.name, header.number, bad)
            raise ProofInvalid(
                provider=self.endpoint.name, block=header.number, block_hash=header.hash_hex, reason=str(bad)
            ) from None

    def _verify(self, answer: Any, slot: bytes, header: VerifiedHeader) -> int:
        if not isinstance(answer, dict):
            raise _proofs.ProofMismatch("the answer is not an eth_getProof object")
        account_proof = [_hex_bytes(node, "an account proof node") for node in _list(answer.get("accountProof"))]
        account = _proofs.verify_account(header.state_root, self._address, account_proof)
        if account is None or account.code_hash == _proofs.EMPTY_CODE_HASH:
            # Proven: no contract at this address at this block. Strict mode says the same.
            raise ContractNotFound(f"no contract at {self.address} in block {header.number} (proven)")
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
        entries = _list(answer.get("storageProof"))
        if len(entries) != 1 or not isinstance(entries[0], dict):
            raise _proofs.ProofMismatch("storageProof must hold exactly the one slot asked for")
        entry = entries[0]
        key = _hex_bytes(entry.get("key"), "the storage key")
        if key.rjust(32, b"\x00") != slot or len(key) > 32:
            raise _proofs.ProofMismatch("the storage proof is for another slot")
        storage_proof = [_hex_bytes(node, "a storage proof node") for node in _list(entry.get("proof"))]
        value = _proofs.verify_storage(account.storage_root, slot, storage_proof)
        if _hex_int(entry.get("value"), "the storage value") != value:
            raise _proofs.ProofMismatch("the value it states is not the value its proof proves")
        return value


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
