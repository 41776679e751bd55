"""Holder-signed requests: proof that the request comes from the holder of the token it carries.

A fencing token is public on-chain, so presenting one proves nothing about
the sender. A :class:`FencedRequest` is signed by the token's holder as
EIP-712 typed data in the registry's own domain (ERC-5267 ``eip712Domain()``:
name, version "2", chain id, registry address), so it cannot be replayed on
another chain or against another registry; it names what it is for — an
``action`` (an HTTP request's method, path and query, or an application's
action name) and an ``audience`` (the service) — so it cannot be replayed as
another method, path or query, nor at another service fenced by the same
resource::

    FencedRequest(bytes32 resource, uint256 token, address holder, string action,
                  string audience, bytes32 payloadDigest, uint256 nonce, uint256 deadline)

(Version 2 of the type, in the registry's domain version "2"; version 1 had
no action and no audience and is refused.)

The agent signs with ``lease.sign(payload, action=..., audience=...)``; the
service verifies with ``guard.check_request(request, payload, action=...)``,
which accepts a request once: for this resource, action and audience, this
payload, before its deadline, with a token that passes the guard, held by
the signer (contract holders through ERC-1271), and never seen before
(durably: a replay after a restart, or after the clock steps back, is still
refused). :func:`http_action` builds the action of an HTTP request.

Deadlines are wall-clock seconds (the verifying service's clock): they bound
how long a request may wait and how long its nonce must be remembered.
Fencing itself never depends on a clock.

On the wire, as HTTP headers (:meth:`FencedRequest.to_headers`)::

    Chainfence-Resource: reports%2Fdaily          (percent-encoded UTF-8)
    Chainfence-Token: 7
    Chainfence-Holder: 0x7099...
    Chainfence-Action: POST%20%2Freports%2Fdaily  (percent-encoded UTF-8)
    Chainfence-Audience: reports-service         (percent-encoded UTF-8)
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

from ._node.rlp import keccak256
from ._sdk import validate as _validate
from .errors import InvalidInput, InvalidSignature, MalformedRequest


def keccak(primitive: bytes = b"", *, text: str | None = None) -> bytes:
    """keccak256 of ``primitive``, or of ``text`` as UTF-8 (eth-utils' ``keccak``, without importing it:
    signing and checking requests load eth-account and eth-keys when they do it, not on import)."""
    return keccak256(text.encode("utf-8") if text is not None else bytes(primitive))


__all__ = ["HEADERS", "REQUEST_TYPE", "EIP712Domain", "FencedRequest", "http_action"]

_DOMAIN_TYPEHASH = keccak(text="EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")

#: The EIP-712 type a holder signs (version 2: bound to an action and an audience).
REQUEST_TYPE = (
    "FencedRequest(bytes32 resource,uint256 token,address holder,string action,string audience,"
    "bytes32 payloadDigest,uint256 nonce,uint256 deadline)"
)
_REQUEST_TYPEHASH = keccak(text=REQUEST_TYPE)

#: The registry domain version whose requests have this type.
DOMAIN_VERSION = "2"

#: Longest action or audience, in bytes of UTF-8 (they travel as headers).
_MAX_LABEL = 2_048

#: Header names, by FencedRequest field.
HEADERS = {
    "resource": "Chainfence-Resource",
    "token": "Chainfence-Token",
    "holder": "Chainfence-Holder",
    "action": "Chainfence-Action",
    "audience": "Chainfence-Audience",
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


def http_action(method: str, path: str, query: str | bytes = "") -> str:
    """The action of an HTTP request: ``"METHOD /path"``, plus ``"?query"`` when there is one.

    ``path`` and ``query`` as they travel (percent-encoded), so client and
    server compute the same string.
    """
    if isinstance(query, bytes):
        query = query.decode("latin-1")
    if not isinstance(method, str) or not method or not isinstance(path, str) or not path.startswith("/"):
        raise InvalidInput(f"an HTTP action needs a method and an absolute path, got {method!r} {path!r}")
    return f"{method.upper()} {path}" + (f"?{query}" if query else "")


def _label(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{what} must be a non-empty str, got {value!r}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8") from None
    if size > _MAX_LABEL:
        raise InvalidInput(f"{what} is {size} bytes; at most {_MAX_LABEL}")
    return value


@dataclass(frozen=True)
class FencedRequest:
    """A request signed by the holder of ``token`` on ``resource``, for one payload."""

    resource: str
    token: int
    holder: str
    action: str
    audience: str
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
        action: str,
        audience: str,
        payload: bytes,
        key: Any,
        deadline: int | None = None,
        valid_for: int = 60,
        nonce: int | None = None,
    ) -> FencedRequest:
        """Sign a request with ``key`` (a private key or eth-account LocalAccount).

        ``holder`` is the lease holder: the key's own address, or a contract
        account (ERC-1271) that accepts the key's signatures. ``action`` is
        what the request does (for HTTP: :func:`http_action`), ``audience``
        the service it is for.
        """
        _validate.resource_id(resource)  # a name, or a claimed item's workset»item (up to 257 bytes)
        _validate.token(token)
        action = _label(action, "action")
        audience = _label(audience, "audience")
        if domain.version != DOMAIN_VERSION:
            raise InvalidInput(
                f"the registry's EIP-712 domain is version {domain.version}; this SDK signs version {DOMAIN_VERSION}"
            )
        if not isinstance(payload, (bytes, bytearray)):
            raise InvalidInput(f"payload must be bytes, got {type(payload).__name__}")
        if deadline is None:
            deadline = int(time.time()) + valid_for
        request = cls(
            resource=resource,
            token=token,
            holder=_validate.address(holder, "holder"),
            action=action,
            audience=audience,
            payload_digest=keccak(bytes(payload)),
            nonce=int.from_bytes(os.urandom(16), "big") if nonce is None else nonce,
            deadline=deadline,
            signature=b"",
        )
        if hasattr(key, "unsafe_sign_hash"):
            account = key
        else:
            from eth_account import Account

            account = Account.from_key(key)
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
            + keccak(self.action.encode("utf-8"))
            + keccak(self.audience.encode("utf-8"))
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
        from eth_keys.datatypes import Signature

        try:
            public_key = Signature(vrs=(v, r, s)).recover_public_key_from_msg_hash(digest or self.digest(domain))
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
            HEADERS["action"]: quote(self.action, safe=""),
            HEADERS["audience"]: quote(self.audience, safe=""),
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
                if field in ("action", "audience") and lower.get(HEADERS["signature"].lower()):
                    raise MalformedRequest(
                        f"missing header {header}: a version 1 fenced request (no action, no audience); "
                        "sign it with this SDK's lease.sign(payload, action=..., audience=...)"
                    )
                raise MalformedRequest(f"missing header {header}")
            values[field] = value.strip()
        try:
            resource = unquote(values["resource"], errors="strict")
            _validate.resource_id(resource)
            token = _validate.token(int(values["token"], 10))
            holder = _validate.address(values["holder"], "holder")
            action = _label(unquote(values["action"], errors="strict"), "action")
            audience = _label(unquote(values["audience"], errors="strict"), "audience")
            digest = _hex_bytes(values["payload_digest"], 32, HEADERS["payload_digest"])
            nonce = int(values["nonce"], 16)
            deadline = int(values["deadline"], 10)
            signature = _hex_bytes(values["signature"], None, HEADERS["signature"])
        except (ValueError, UnicodeDecodeError) as exc:  # InvalidInput is a ValueError
            raise MalformedRequest(f"malformed fenced request: {exc}") from None
        if not 0 <= nonce < 2**256 or not 0 <= deadline < 2**256:
            raise MalformedRequest("nonce and deadline must fit uint256")
        return cls(
            resource=resource,
            token=token,
            holder=holder,
            action=action,
            audience=audience,
            payload_digest=digest,
            nonce=nonce,
            deadline=deadline,
            signature=signature,
        )


def _hex_bytes(text: str, length: int | None, header: str) -> bytes:
    """``text`` as bytes: exactly ``length`` of them, or (None) 1 to 2,048 (contract signatures vary)."""
    if not text.startswith("0x"):
        raise ValueError(f"{header} must be 0x-prefixed hex")
    data = bytes.fromhex(text[2:])
    if length is not None and len(data) != length:
        raise ValueError(f"{header} must be {length} bytes, got {len(data)}")
    if length is None and not 1 <= len(data) <= 2_048:
        raise ValueError(f"{header} must be 1 to 2048 bytes, got {len(data)}")
    return data
