"""Holder-signed requests: proof that the request comes from the holder of the token it carries.

A fencing token is public on-chain, so presenting one proves nothing about
the sender. A :class:`FencedRequest` is signed by the token's holder as
EIP-712 typed data in the registry's own domain (ERC-5267 ``eip712Domain()``:
name, version, chain id, registry address), so it cannot be replayed on
another chain or against another registry::

    FencedRequest(bytes32 resource, uint256 token, address holder,
                  bytes32 payloadDigest, uint256 nonce, uint256 deadline)

The agent signs with ``lease.sign(payload)``; the service verifies with
``guard.check_request(request, payload)``, which accepts a request once:
signed by the holder (contract holders through ERC-1271), for this payload,
before its deadline, with a token that passes the guard, and never seen
before (durably: a replay after a restart is still refused).

Deadlines are wall-clock seconds (the verifying service's clock): they bound
how long a request may wait and how long its nonce must be remembered.
Fencing itself never depends on a clock.

On the wire, as HTTP headers (:meth:`FencedRequest.to_headers`)::

    Chainfence-Resource: reports%2Fdaily          (percent-encoded UTF-8)
    Chainfence-Token: 7
    Chainfence-Holder: 0x7099...
    Chainfence-Payload-Digest: 0x5f1c...          (keccak256 of the body)
    Chainfence-Nonce: 0x9b2e...
    Chainfence-Deadline: 1795270000
    Chainfence-Signature: 0x4a1f...               (65 bytes r ‖ s ‖ v)
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from eth_account import Account
from eth_keys import keys
from eth_utils import keccak

from . import _validate
from .errors import InvalidAddress, InvalidInput, InvalidSignature, MalformedRequest

__all__ = ["EIP712Domain", "FencedRequest", "HEADERS"]

_DOMAIN_TYPEHASH = keccak(text="EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
_REQUEST_TYPE = (
    "FencedRequest(bytes32 resource,uint256 token,address holder,bytes32 payloadDigest,uint256 nonce,uint256 deadline)"
)
_REQUEST_TYPEHASH = keccak(text=_REQUEST_TYPE)

#: Header names, by FencedRequest field.
HEADERS = {
    "resource": "Chainfence-Resource",
    "token": "Chainfence-Token",
    "holder": "Chainfence-Holder",
    "payload_digest": "Chainfence-Payload-Digest",
    "nonce": "Chainfence-Nonce",
    "deadline": "Chainfence-Deadline",
    "signature": "Chainfence-Signature",
}

#: secp256k1 n / 2: signatures with a larger s are malleable copies (EIP-2).
_HALF_ORDER = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0


@dataclass(frozen=True)
class EIP712Domain:
    """A registry's EIP-712 domain, as its ``eip712Domain()`` (ERC-5267) reports it."""

    name: str
    version: str
    chain_id: int
    verifying_contract: str

    def separator(self) -> bytes:
        return keccak(
            _DOMAIN_TYPEHASH
            + keccak(text=self.name)
            + keccak(text=self.version)
            + self.chain_id.to_bytes(32, "big")
            + bytes.fromhex(self.verifying_contract[2:]).rjust(32, b"\0")
        )


def _word(value: int) -> bytes:
    return value.to_bytes(32, "big")


@dataclass(frozen=True)
class FencedRequest:
    """A request signed by the holder of ``token`` on ``resource``, for one payload."""

    resource: str
    token: int
    holder: str
    payload_digest: bytes
    nonce: int
    deadline: int
    signature: bytes

    # -- signing ----------------------------------------------------------

    @classmethod
    def sign(
        cls,
        domain: EIP712Domain,
        *,
        resource: str,
        token: int,
        holder: str,
        payload: bytes,
        key: Any,
        deadline: int | None = None,
        valid_for: int = 60,
        nonce: int | None = None,
    ) -> FencedRequest:
        """Sign a request with ``key`` (a private key or eth-account LocalAccount).

        ``holder`` is the lease holder: the key's own address, or a contract
        account (ERC-1271) that accepts the key's signatures.
        """
        _validate.resource_bytes(resource)
        _validate.token(token)
        if not isinstance(payload, (bytes, bytearray)):
            raise InvalidInput(f"payload must be bytes, got {type(payload).__name__}")
        if deadline is None:
            deadline = int(time.time()) + valid_for
        request = cls(
            resource=resource,
            token=token,
            holder=_validate.address(holder, "holder"),
            payload_digest=keccak(bytes(payload)),
            nonce=int.from_bytes(os.urandom(16), "big") if nonce is None else nonce,
            deadline=deadline,
            signature=b"",
        )
        account = key if hasattr(key, "unsafe_sign_hash") else Account.from_key(key)
        signed = account.unsafe_sign_hash(request.digest(domain))
        signature = signed.r.to_bytes(32, "big") + signed.s.to_bytes(32, "big") + bytes([signed.v])
        return cls(**{**request.__dict__, "signature": signature})

    # -- hashing and verification -------------------------------------------

    def struct_hash(self) -> bytes:
        return keccak(
            _REQUEST_TYPEHASH
            + _validate.resource_id(self.resource)
            + _word(self.token)
            + bytes.fromhex(self.holder[2:]).rjust(32, b"\0")
            + self.payload_digest
            + _word(self.nonce)
            + _word(self.deadline)
        )

    def digest(self, domain: EIP712Domain) -> bytes:
        """The EIP-712 digest that is signed: keccak256(0x1901 ‖ domainSeparator ‖ structHash)."""
        return keccak(b"\x19\x01" + domain.separator() + self.struct_hash())

    def recover(self, domain: EIP712Domain, *, digest: bytes | None = None) -> str:
        """The address whose key made ``signature`` over this request (EOA signatures).

        ``digest``: this request's :meth:`digest` in ``domain``, if the caller
        already computed it.

        Raises :class:`~chainfence.errors.InvalidSignature` for a malformed
        or malleable (high-s) signature.
        """
        sig = self.signature
        if len(sig) != 65:
            raise InvalidSignature(f"a signature is 65 bytes (r, s, v), got {len(sig)}")
        r, s, v = int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:64], "big"), sig[64]
        if v in (27, 28):
            v -= 27
        if v not in (0, 1) or r <= 0 or not 0 < s <= _HALF_ORDER:
            raise InvalidSignature("malformed or malleable signature")
        try:
            public_key = keys.Signature(vrs=(v, r, s)).recover_public_key_from_msg_hash(digest or self.digest(domain))
        except Exception as exc:
            raise InvalidSignature(f"signature does not recover a key: {exc}") from None
        return public_key.to_checksum_address()

    # -- the wire -------------------------------------------------------------

    def to_headers(self) -> dict[str, str]:
        """The request as HTTP headers (see the module docstring)."""
        return {
            HEADERS["resource"]: quote(self.resource, safe=""),
            HEADERS["token"]: str(self.token),
            HEADERS["holder"]: self.holder,
            HEADERS["payload_digest"]: "0x" + self.payload_digest.hex(),
            HEADERS["nonce"]: hex(self.nonce),
            HEADERS["deadline"]: str(self.deadline),
            HEADERS["signature"]: "0x" + self.signature.hex(),
        }

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> FencedRequest:
        """Parse a request from HTTP headers (case-insensitive); raises MalformedRequest."""
        lower = {str(k).lower(): v for k, v in headers.items()}
        values = {}
        for field, header in HEADERS.items():
            value = lower.get(header.lower())
            if value is None or value == "":
                raise MalformedRequest(f"missing header {header}")
            values[field] = value.strip()
        try:
            resource = unquote(values["resource"], errors="strict")
            _validate.resource_bytes(resource)
            token = _validate.token(int(values["token"], 10))
            holder = _validate.address(values["holder"], "holder")
            digest = _hex_bytes(values["payload_digest"], 32, HEADERS["payload_digest"])
            nonce = int(values["nonce"], 16)
            deadline = int(values["deadline"], 10)
            signature = _hex_bytes(values["signature"], 65, HEADERS["signature"])
        except (ValueError, InvalidInput, InvalidAddress) as exc:
            raise MalformedRequest(f"malformed fenced request: {exc}") from None
        if not 0 <= nonce < 2**256 or not 0 <= deadline < 2**256:
            raise MalformedRequest("nonce and deadline must fit uint256")
        return cls(
            resource=resource,
            token=token,
            holder=holder,
            payload_digest=digest,
            nonce=nonce,
            deadline=deadline,
            signature=signature,
        )


def _hex_bytes(text: str, length: int, header: str) -> bytes:
    if not text.startswith("0x"):
        raise ValueError(f"{header} must be 0x-prefixed hex")
    data = bytes.fromhex(text[2:])
    if len(data) != length:
        raise ValueError(f"{header} must be {length} bytes, got {len(data)}")
    return data
