"""Signed intents: a lease operation signed by its holder, for anyone to submit and pay for.

An agent with a key and no gas signs an :class:`Intent` (EIP-712 typed data in the registry's own
domain: its name, version, chain id and address, as ``eip712Domain()`` reports them); a relayer
(``chainfence relay``, or anyone) submits one or many in one transaction (the registry's
``performIntents``), and the registry runs each as the lone call its signer would have made, the signer
the holder in the lease and in every event::

    intent = Intent.acquire(agent.address, "reports/daily", ttl=30, latest_token=7, deadline=now + 60)
    signed = intent.sign(agent_key, domain)

What is signed is the kind's own EIP-712 type (``holder`` the signer)::

    Acquire(address holder,string name,uint256 ttl,bool exclusive,uint256 latestToken,uint256 deadline)
    Renew(address holder,bytes32 resource,uint256 token,uint256 ttl,bytes32 progress,uint256 latestExpiry,uint256 deadline)
    Release(address holder,bytes32 resource,uint256 token,uint256 deadline)
    Complete(address holder,bytes32 resource,uint256 token,bytes32 resultDigest,uint256 nonce,uint256 deadline)
    Claim(address holder,string workset,string[] items,uint256 ttl,uint256 nonce,uint256 deadline)

The replay guard is the state the intent changes (``guard``): an acquisition names the resource's
latest token (landing issues a higher one), a renewal the lease's expiry (landing moves it later), a
release its token (which it ends for good); a completion or a claim change no state it could name, so
they spend a nonce (Permit2's unordered bitmap: any unused 256-bit number). So an intent lands at most
once, and a relayer can neither replay nor reorder one into a second landing. ``deadline`` is chain
time (``block.timestamp``): an intent never lands after it.

An intent is data: :meth:`Intent.to_json` / :meth:`Intent.from_json` carry it to a relayer, which can
check nothing that matters to the agent; the agent learns what happened from the chain alone
(:mod:`chainfence.relaying`).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._node.rlp import keccak256 as keccak
from ._sdk import names as _names
from ._sdk import validate as _validate
from .errors import InvalidInput, InvalidSignature
from .fenced_requests import EIP712Domain

__all__ = ["INTENT_TYPES", "MAX_INTENT_ITEMS", "Intent", "IntentKind", "random_nonce"]


class IntentKind(enum.IntEnum):
    """What an intent asks for: the lone call it stands for (the registry's ``IntentKind``)."""

    ACQUIRE = 0
    ACQUIRE_EXCLUSIVE = 1
    RENEW = 2
    RELEASE = 3
    COMPLETE = 4
    CLAIM = 5


#: Each kind's EIP-712 type, as the registry hashes it.
INTENT_TYPES = {
    "Acquire": "Acquire(address holder,string name,uint256 ttl,bool exclusive,uint256 latestToken,uint256 deadline)",
    "Renew": (
        "Renew(address holder,bytes32 resource,uint256 token,uint256 ttl,bytes32 progress,uint256 latestExpiry,"
        "uint256 deadline)"
    ),
    "Release": "Release(address holder,bytes32 resource,uint256 token,uint256 deadline)",
    "Complete": (
        "Complete(address holder,bytes32 resource,uint256 token,bytes32 resultDigest,uint256 nonce,uint256 deadline)"
    ),
    "Claim": "Claim(address holder,string workset,string[] items,uint256 ttl,uint256 nonce,uint256 deadline)",
}
_TYPEHASHES = {name: keccak(text.encode()) for name, text in INTENT_TYPES.items()}
_TYPE_OF = {
    IntentKind.ACQUIRE: "Acquire",
    IntentKind.ACQUIRE_EXCLUSIVE: "Acquire",
    IntentKind.RENEW: "Renew",
    IntentKind.RELEASE: "Release",
    IntentKind.COMPLETE: "Complete",
    IntentKind.CLAIM: "Claim",
}

#: Most items a claim intent may list (the registry's claimNext bound).
MAX_INTENT_ITEMS = 512

#: Longest signature accepted, in bytes (a contract holder's ERC-1271 signature may be longer than 65).
MAX_SIGNATURE = 2_048

_UINT256 = 2**256
_ZERO32 = bytes(32)

#: The ABI type of one intent in ``performIntents`` (the registry's ``Intent`` struct).
ABI_TYPE = "(uint8,address,string,string[],bytes32,uint256,uint256,bytes32,uint256,uint256,bytes)"


def random_nonce() -> int:
    """A fresh nonce for a completion or a claim: 128 random bits (any unused one will do)."""
    return int.from_bytes(os.urandom(16), "big")


def _word(value: int) -> bytes:
    return value.to_bytes(32, "big")


def _uint(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _UINT256:
        raise InvalidInput(f"{what} must be an int from 0 to 2**256 - 1, got {value!r:.80}", argument=what)
    return value


def _bytes32(value: object, what: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise InvalidInput(f"{what} must be 32 bytes, got {value!r:.80}", argument=what)
    return bytes(value)


def _name_bytes(name: object, what: str) -> bytes:
    if not isinstance(name, str):
        raise InvalidInput(f"{what} must be a str, got {type(name).__name__}", argument=what)
    return _names.resource_bytes(name)


@dataclass(frozen=True)
class Intent:
    """One lease operation signed by ``holder`` (see the module). Fields its kind does not use are zero.

    Build one with :meth:`acquire`, :meth:`renew`, :meth:`release`, :meth:`complete` or :meth:`claim`,
    then :meth:`sign` it.
    """

    kind: IntentKind
    holder: str
    name: str = ""
    items: tuple[str, ...] = ()
    resource: bytes = _ZERO32
    token: int = 0
    ttl: int = 0
    data: bytes = _ZERO32
    guard: int = 0
    deadline: int = 0
    signature: bytes = b""

    # -- building ---------------------------------------------------------------------------------

    @classmethod
    def acquire(
        cls, holder: str, name: str, ttl: int, *, latest_token: int, deadline: int, exclusive: bool = False
    ) -> Intent:
        """Acquire ``name`` for ``ttl`` s, while its latest token is still ``latest_token`` (0: never held)."""
        _name_bytes(name, "name")
        kind = IntentKind.ACQUIRE_EXCLUSIVE if exclusive else IntentKind.ACQUIRE
        return cls(
            kind,
            _validate.address(holder, "holder"),
            name=name,
            ttl=_uint(ttl, "ttl"),
            guard=_uint(latest_token, "latest_token"),
            deadline=_uint(deadline, "deadline"),
        )

    @classmethod
    def renew(
        cls,
        holder: str,
        resource: bytes,
        token: int,
        ttl: int,
        *,
        latest_expiry: int,
        deadline: int,
        progress: bytes = _ZERO32,
    ) -> Intent:
        """Renew the lease ``token`` on ``resource`` (its id) for ``ttl`` s from when it lands, while its expiry
        is still ``latest_expiry`` (and only if that moves it later); ``progress``: a 32-byte marker."""
        return cls(
            IntentKind.RENEW,
            _validate.address(holder, "holder"),
            resource=_bytes32(resource, "resource"),
            token=_uint(token, "token"),
            ttl=_uint(ttl, "ttl"),
            data=_bytes32(progress, "progress"),
            guard=_uint(latest_expiry, "latest_expiry"),
            deadline=_uint(deadline, "deadline"),
        )

    @classmethod
    def release(cls, holder: str, resource: bytes, token: int, *, deadline: int) -> Intent:
        """Release the lease ``token`` on ``resource`` (its id)."""
        return cls(
            IntentKind.RELEASE,
            _validate.address(holder, "holder"),
            resource=_bytes32(resource, "resource"),
            token=_uint(token, "token"),
            deadline=_uint(deadline, "deadline"),
        )

    @classmethod
    def complete(
        cls, holder: str, resource: bytes, token: int, result_digest: bytes, *, deadline: int, nonce: int | None = None
    ) -> Intent:
        """Complete the lease ``token`` on ``resource`` with ``result_digest``, spending ``nonce`` (default: random)."""
        return cls(
            IntentKind.COMPLETE,
            _validate.address(holder, "holder"),
            resource=_bytes32(resource, "resource"),
            token=_uint(token, "token"),
            data=_bytes32(result_digest, "result_digest"),
            guard=_uint(random_nonce() if nonce is None else nonce, "nonce"),
            deadline=_uint(deadline, "deadline"),
        )

    @classmethod
    def claim(
        cls, holder: str, workset: str, items: Sequence[str], ttl: int, *, deadline: int, nonce: int | None = None
    ) -> Intent:
        """Claim the first free item of ``items`` of ``workset`` for ``ttl`` s, spending ``nonce`` (default: random)."""
        _name_bytes(workset, "workset")
        if isinstance(items, str) or not 1 <= len(items) <= MAX_INTENT_ITEMS:
            raise InvalidInput(f"a claim lists 1 to {MAX_INTENT_ITEMS} items", argument="items")
        for item in items:
            _name_bytes(item, "item")
        return cls(
            IntentKind.CLAIM,
            _validate.address(holder, "holder"),
            name=workset,
            items=tuple(items),
            ttl=_uint(ttl, "ttl"),
            guard=_uint(random_nonce() if nonce is None else nonce, "nonce"),
            deadline=_uint(deadline, "deadline"),
        )

    # -- what the registry acts on ---------------------------------------------------------------------

    @property
    def resource_id(self) -> bytes:
        """The resource the intent acts on (an acquisition's: its name's hash; a claim's: none, zeros)."""
        if self.kind <= IntentKind.ACQUIRE_EXCLUSIVE:
            return keccak(self.name.encode("utf-8"))
        return self.resource

    @property
    def type_name(self) -> str:
        """The EIP-712 type signed (``Acquire``, ``Renew``, ...)."""
        return _TYPE_OF[self.kind]

    # -- hashing and signing ---------------------------------------------------------------------------

    def struct_hash(self) -> bytes:
        """EIP-712 ``hashStruct`` of the intent's type (what the registry computes)."""
        kind, holder = self.kind, bytes.fromhex(self.holder[2:]).rjust(32, b"\0")
        typehash = _TYPEHASHES[self.type_name]
        if kind <= IntentKind.ACQUIRE_EXCLUSIVE:
            fields = [
                keccak(self.name.encode("utf-8")),
                _word(self.ttl),
                _word(int(kind == IntentKind.ACQUIRE_EXCLUSIVE)),
                _word(self.guard),
            ]
        elif kind == IntentKind.RENEW:
            fields = [self.resource, _word(self.token), _word(self.ttl), self.data, _word(self.guard)]
        elif kind == IntentKind.RELEASE:
            fields = [self.resource, _word(self.token)]
        elif kind == IntentKind.COMPLETE:
            fields = [self.resource, _word(self.token), self.data, _word(self.guard)]
        else:
            items = keccak(b"".join(keccak(item.encode("utf-8")) for item in self.items))
            fields = [keccak(self.name.encode("utf-8")), items, _word(self.ttl), _word(self.guard)]
        return keccak(typehash + holder + b"".join(fields) + _word(self.deadline))

    def digest(self, domain: EIP712Domain) -> bytes:
        """The EIP-712 digest signed: keccak256(0x1901 ‖ domainSeparator ‖ hashStruct)."""
        return keccak(b"\x19\x01" + domain.separator() + self.struct_hash())

    def typed_data(self, domain: EIP712Domain) -> dict[str, Any]:
        """The intent as EIP-712 JSON (``eth_signTypedData_v4``'s argument): what a wallet shows and signs."""
        name = self.type_name
        fields = INTENT_TYPES[name][len(name) + 1 : -1].split(",")
        message: dict[str, Any] = {"holder": self.holder, "deadline": self.deadline}
        kind = self.kind
        if kind <= IntentKind.ACQUIRE_EXCLUSIVE:
            message |= {
                "name": self.name,
                "ttl": self.ttl,
                "exclusive": kind == IntentKind.ACQUIRE_EXCLUSIVE,
                "latestToken": self.guard,
            }
        elif kind == IntentKind.RENEW:
            message |= {
                "resource": self.resource,
                "token": self.token,
                "ttl": self.ttl,
                "progress": self.data,
                "latestExpiry": self.guard,
            }
        elif kind == IntentKind.RELEASE:
            message |= {"resource": self.resource, "token": self.token}
        elif kind == IntentKind.COMPLETE:
            message |= {"resource": self.resource, "token": self.token, "resultDigest": self.data, "nonce": self.guard}
        else:
            message |= {"workset": self.name, "items": list(self.items), "ttl": self.ttl, "nonce": self.guard}
        return {
            "types": {
                "EIP712Domain": [
                    {"name": "name", "type": "string"},
                    {"name": "version", "type": "string"},
                    {"name": "chainId", "type": "uint256"},
                    {"name": "verifyingContract", "type": "address"},
                ],
                name: [{"name": f.split(" ")[1], "type": f.split(" ")[0]} for f in fields],
            },
            "primaryType": name,
            "domain": {
                "name": domain.name,
                "version": domain.version,
                "chainId": domain.chain_id,
                "verifyingContract": domain.verifying_contract,
            },
            "message": message,
        }

    def sign(self, key: Any, domain: EIP712Domain) -> Intent:
        """This intent signed with ``key`` (a private key, or an eth-account ``LocalAccount``): 65 bytes
        (r, s, v), low s. ``holder`` is the key's address, or a contract (ERC-1271) that accepts its
        signatures of this digest."""
        if hasattr(key, "unsafe_sign_hash"):
            account = key
        else:
            from eth_account import Account

            account = Account.from_key(key)
        signed = account.unsafe_sign_hash(self.digest(domain))
        return replace(self, signature=signed.r.to_bytes(32, "big") + signed.s.to_bytes(32, "big") + bytes([signed.v]))

    def recover(self, domain: EIP712Domain) -> str:
        """The address whose key made :attr:`signature` (an account's; a contract holder's answer is its own
        ``isValidSignature``). Raises :class:`~chainfence.errors.InvalidSignature`."""
        from .fenced_requests import FencedRequest

        # The same ECDSA checks as a fenced request's (65 bytes, low s), over this digest.
        probe = FencedRequest("x", 1, self.holder, "a", "a", _ZERO32, 0, 0, self.signature)
        return probe.recover(domain, digest=self.digest(domain))

    # -- the wire ----------------------------------------------------------------------------------

    def abi(self) -> tuple[Any, ...]:
        """The intent as the registry's ``Intent`` struct (:data:`ABI_TYPE`), for ``performIntents``."""
        return (
            int(self.kind),
            self.holder,
            self.name,
            list(self.items),
            self.resource,
            self.token,
            self.ttl,
            self.data,
            self.guard,
            self.deadline,
            self.signature,
        )

    def to_json(self) -> dict[str, Any]:
        """The intent as JSON (what a relayer receives): every field, bytes as 0x-hex, big numbers as decimal strings."""
        return {
            "kind": self.kind.name.lower(),
            "holder": self.holder,
            "name": self.name,
            "items": list(self.items),
            "resource": "0x" + self.resource.hex(),
            "token": str(self.token),
            "ttl": str(self.ttl),
            "data": "0x" + self.data.hex(),
            "guard": str(self.guard),
            "deadline": str(self.deadline),
            "signature": "0x" + self.signature.hex(),
        }

    @classmethod
    def from_json(cls, value: object) -> Intent:
        """Parse :meth:`to_json`'s shape, every field checked and bounded; raises
        :class:`~chainfence.errors.InvalidInput` (a signature of the wrong shape:
        :class:`~chainfence.errors.InvalidSignature`)."""
        if not isinstance(value, Mapping):
            raise InvalidInput("an intent is a JSON object")
        unknown = set(value) - {
            "kind",
            "holder",
            "name",
            "items",
            "resource",
            "token",
            "ttl",
            "data",
            "guard",
            "deadline",
            "signature",
        }
        if unknown:
            raise InvalidInput(f"unknown intent fields: {', '.join(sorted(map(str, unknown)))[:200]}")
        kinds = {kind.name.lower(): kind for kind in IntentKind}
        kind = kinds.get(value.get("kind"))  # type: ignore[arg-type]
        if kind is None:
            raise InvalidInput(f"intent kind must be one of {', '.join(kinds)}", argument="kind")
        name = value.get("name", "")
        items = value.get("items", [])
        if not isinstance(name, str) or not isinstance(items, list) or len(items) > MAX_INTENT_ITEMS:
            raise InvalidInput("an intent's name is a str and its items a list of at most 512 str")
        if name:
            _name_bytes(name, "name")
        for item in items:
            _name_bytes(item, "item")
        signature = _hex(value.get("signature"), "signature", None)
        if not 1 <= len(signature) <= MAX_SIGNATURE:
            raise InvalidSignature(f"a signature is 1 to {MAX_SIGNATURE} bytes, got {len(signature)}")
        return cls(
            kind,
            _validate.address(value.get("holder"), "holder"),
            name=name,
            items=tuple(items),
            resource=_hex(value.get("resource", "0x" + "00" * 32), "resource", 32),
            token=_decimal(value.get("token", "0"), "token"),
            ttl=_decimal(value.get("ttl", "0"), "ttl"),
            data=_hex(value.get("data", "0x" + "00" * 32), "data", 32),
            guard=_decimal(value.get("guard", "0"), "guard"),
            deadline=_decimal(value.get("deadline"), "deadline"),
            signature=signature,
        )


def _hex(value: object, what: str, length: int | None) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) > 2 + 2 * MAX_SIGNATURE:
        raise InvalidInput(f"{what} must be 0x-prefixed hex", argument=what)
    try:
        data = bytes.fromhex(value[2:])
    except ValueError:
        raise InvalidInput(f"{what} must be 0x-prefixed hex", argument=what) from None
    if length is not None and len(data) != length:
        raise InvalidInput(f"{what} must be {length} bytes, got {len(data)}", argument=what)
    return data


def _decimal(value: object, what: str) -> int:
    if isinstance(value, str) and 0 < len(value) <= 78 and value.isdigit() and value.isascii():
        return _uint(int(value), what)
    raise InvalidInput(f"{what} must be a decimal string of a uint256", argument=what)
