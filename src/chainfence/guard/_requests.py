"""Holder-signed requests at a guard (:meth:`Guard.check_request <chainfence.Guard.check_request>`).

What a request must show besides a token the guard accepts, checked cheap
and local first: that it is meant for this resource, action and audience,
carries the signed payload, is within its deadline (:meth:`RequestVerifier.read`);
that its signer holds the token, by the key's signature or, for a contract
holder, by ERC-1271 with a gas cap (:meth:`RequestVerifier.require_holder`);
and that it was never accepted before (:func:`remember_once`, the replay
table, run inside the transaction that records the mark). The guard runs
them in that order around its own judgement of the token; see
:mod:`chainfence.fenced_requests` for the request itself.
"""

from __future__ import annotations

import sqlite3
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, NamedTuple

from .._node.rlp import keccak256
from ..errors import (
    ChainfenceError,
    InvalidInput,
    InvalidSignature,
    MalformedRequest,
    NodeUnreachable,
    ReplayedRequest,
    RequestExpired,
    RequestMisdirected,
)
from ._store import GuardStore
from ._verdict import Verdict

if TYPE_CHECKING:
    from ..fenced_requests import EIP712Domain, FencedRequest
    from ..proofs import ProvenReader
    from ..registry import Registry

__all__ = ["RequestVerifier", "SignedRequest", "remember_once"]

#: ERC-1271 isValidSignature(bytes32,bytes) selector, also its "valid" answer.
_ERC1271_MAGIC = bytes.fromhex("1626ba7e")

#: Requests whose deadline passed this long ago are pruned from the replay store.
_PRUNE_AFTER = 60


class SignedRequest(NamedTuple):
    """A request that passed its own checks: its EIP-712 digest, and whether the holder's key signed it."""

    request: FencedRequest
    digest: bytes
    by_holder_key: bool


class RequestVerifier:
    """The request checks of one guard: its registry's EIP-712 domain (read once) and which holders are
    contracts (LRU-bounded by ``max_contract_holders``)."""

    def __init__(self, registry: Registry, *, max_contract_holders: int, proven: ProvenReader | None = None):
        self._registry = registry
        self._proven = proven  # the proven mode: whether a holder has code is proven, not asked
        self._domain: EIP712Domain | None = None
        self._max_contract_holders = max_contract_holders
        self.contract_holders: OrderedDict[str, bool] = OrderedDict()

    def read(
        self,
        request: FencedRequest,
        payload: bytes,
        *,
        action: str,
        audience: str | None,
        resource: str | None,
        max_age: int,
    ) -> SignedRequest:
        """The checks that need neither the store nor the token: addressed here, the signed payload,
        within its deadline (at most ``max_age`` seconds away); then who signed it, locally."""
        from ..fenced_requests import FencedRequest

        if not isinstance(request, FencedRequest):
            raise MalformedRequest(f"expected a FencedRequest, got {type(request).__name__}")
        if not isinstance(action, str) or not action:
            raise InvalidInput("check_request needs the action the request is used for (e.g. 'POST /reports')")
        if not isinstance(audience, str) or not audience:
            raise InvalidInput(
                "check_request needs the audience: Guard(..., requests=RequestPolicy(audience=...)) or audience="
            )
        if resource is not None and request.resource != resource:
            raise RequestMisdirected(
                f"this endpoint is fenced by {resource!r}; the request was signed for {request.resource!r}",
                field="resource",
                signed=request.resource,
                expected=resource,
            )
        if request.action != action:
            raise RequestMisdirected(field="action", signed=request.action, expected=action)
        if request.audience != audience:
            raise RequestMisdirected(field="audience", signed=request.audience, expected=audience)
        if not isinstance(payload, (bytes, bytearray)) or keccak256(bytes(payload)) != request.payload_digest:
            raise MalformedRequest("the payload is not the one the holder signed", field="payload")
        now = time.time()
        if request.deadline < now:
            raise RequestExpired(f"the request's deadline {request.deadline} has passed (now {int(now)})")
        if request.deadline > now + max_age:
            raise MalformedRequest(f"the request's deadline is more than {max_age} s away; sign with a nearer one")
        domain = self.domain()
        digest = request.digest(domain)
        try:
            by_holder_key = request.recover(domain, digest=digest) == request.holder
        except InvalidSignature:
            by_holder_key = False  # not an account's signature; a contract holder may still accept it
        return SignedRequest(request, digest, by_holder_key)

    def require_holder(self, signed: SignedRequest, verdict: Verdict, *, gas: int) -> None:
        """The request's signer holds the judged token, and signed it (ERC-1271 for a contract holder,
        its code run with at most ``gas``). Sets the verdict's holder."""
        request = signed.request
        holder = verdict.holder
        if holder is None:  # a mark recorded without its holder: ask the chain
            info = self._registry.last_lease(request.resource)
            holder = info.holder if info is not None and info.token == request.token else None
        if holder != request.holder:
            raise RequestMisdirected(
                f"{request.holder} signed for token {request.token} of {request.resource!r}, held by {holder}",
                field="holder",
                signed=request.holder,
                expected=holder,
            )
        if not signed.by_holder_key:
            self._verify_contract_signature(request, signed.digest, gas)
        verdict.holder = holder

    def domain(self) -> EIP712Domain:
        """The registry's EIP-712 domain (ERC-5267), read once."""
        if self._domain is None:
            self._domain = self._registry.eip712_domain()
        return self._domain

    def is_contract(self, address: str) -> bool:
        """Whether ``address`` has code (remembered: a holder's code does not come and go)."""
        known = self.contract_holders.get(address)
        if known is None:
            if self._proven is not None:
                known = self._proven.is_contract(address)
            else:
                known = bool(self._registry.chain.rpc.code(address))
            self.contract_holders[address] = known
            if len(self.contract_holders) > self._max_contract_holders:
                self.contract_holders.popitem(last=False)
        return known

    def _verify_contract_signature(self, request: FencedRequest, digest: bytes, gas: int) -> None:
        """ERC-1271, for a holder that is a contract; its code runs with at most ``gas``."""
        if not self.is_contract(request.holder):
            raise InvalidSignature(
                f"not signed by the key of the holder it names ({request.holder}): "
                "a foreign key, or a request signed for another registry or chain"
            )
        data = _ERC1271_MAGIC + _encode_bytes32_bytes(digest, request.signature)
        try:
            answer = self._registry.chain.call(request.holder, data, gas=gas)
        except NodeUnreachable:
            raise
        except ChainfenceError as exc:
            raise InvalidSignature(f"the holder contract {request.holder} refused the signature: {exc}") from None
        if answer[:4] != _ERC1271_MAGIC:
            raise InvalidSignature(f"the holder contract {request.holder} does not accept this signature")


def remember_once(conn: sqlite3.Connection, digest: bytes, deadline: int) -> None:
    """The replay table: record an accepted request, or raise if it was accepted before or may have been
    forgotten (its deadline at or below the pruning horizon, whatever the clock says now). Inside the
    write transaction that records the mark, so that both are recorded or neither."""
    now = int(time.time())
    horizon = GuardStore.replay_horizon(conn)
    if deadline <= horizon:
        # Its record may have been pruned: whatever the clock says now, it is over.
        raise RequestExpired(
            f"the request's deadline {deadline} is at or before {horizon}, the point up to which "
            "this store forgets accepted requests (the clock stepped back?)"
        )
    if not GuardStore.remember_request(conn, digest, deadline):
        raise ReplayedRequest(f"request 0x{digest.hex()[:16]}... was already accepted")
    if now % 64 == 0:  # now and then, forget requests whose deadline is long gone
        GuardStore.prune_requests(conn, now - _PRUNE_AFTER)


def _encode_bytes32_bytes(word: bytes, data: bytes) -> bytes:
    """ABI encoding of (bytes32, bytes): the arguments of isValidSignature."""
    padded = data + b"\0" * (-len(data) % 32)
    return word + (64).to_bytes(32, "big") + len(data).to_bytes(32, "big") + padded
