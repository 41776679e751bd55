"""Every error chainfence raises, in one tree.

::

    ChainfenceError
    ├── InvalidInput (ValueError)          bad argument; nothing was sent or written
    │   ├── InvalidResourceName            empty, too long, not a str
    │   ├── InvalidTtl                     0, negative, not an int, above the registry's max
    │   │   └── InvalidMaxTtl              deployment: max ttl out of range
    │   ├── InvalidToken                   0, negative, not an int, wider than uint256
    │   ├── InvalidWait                    acquire(wait=...): negative, not finite, not a number, too long
    │   ├── InvalidProgress                a progress marker that is not 1-32 bytes, an int or a str
    │   ├── InvalidClaimItems              claim: no items, too many, or duplicates
    │   ├── InvalidNamespace               a namespace prefix: empty, too long, contains '/', a mis-cased address
    │   ├── InvalidPolicy                  a namespace policy: maxTtl or lockDelay above the registry's max, no field
    │   ├── InvalidAssignments             deployment: namespaces and admins of different lengths
    │   ├── DuplicateResource              acquire_many / a LeaseSet lists a resource twice
    │   ├── InvalidAddress                 not a 20-byte hex address
    │   │   └── InvalidHolder              grant: the zero address
    │   ├── InvalidUrl                     a node's URL that is not a well-formed http(s) URL
    │   ├── InvalidLimit                   an audit list query's limit: not an int from 1 to its maximum
    │   └── InvalidCursor                  an audit list query's cursor: does not decode, or another query's
    │       └── StaleCursor                the cursor's row is gone (a reorg rewound the index past it): list again
    ├── LeaseError                         the registry refused a lease operation
    │   ├── LeaseHeld                      someone else holds a live lease
    │   ├── NotHolder                      the caller is not the holder of that token
    │   ├── NothingToClaim                 claim: every item is done or held live by others
    │   ├── NotAdmitted (PermissionError)  the namespace admits only its allowlist (registry or guard)
    │   │   └── HolderNotAdmitted          a guard's admission (local list or on-chain) refuses the token's holder
    │   ├── LockDelayed                    a lease expired; its namespace's lock-delay runs until `until`
    │   ├── NotLive                        revoke: the resource has no live lease
    │   └── TokenNotCurrent                the token is not the resource's live token
    │       ├── StaleToken                 superseded by a higher token (registry or guard)
    │       ├── UnknownToken               0, or above the resource's latest: never issued for it
    │       ├── LeaseExpired               the latest token, but its lease ran out  (you lost it)
    │       ├── LeaseReleased              the latest token, but it was released    (you closed it)
    │       │   └── LeaseCompleted         a claimed item's claimant completed it (done for good)
    │       ├── LeaseRevoked               the latest token, but its namespace's admin revoked it
    │       └── TokenNotConfirmed          issued, but not yet deep enough in the chain to count
    ├── RegistryOverflow (OverflowError)   48-bit token or 40-bit time space exhausted
    ├── NamespaceError (PermissionError)   a namespace refused the caller
    │   ├── NamespaceTaken                 deployment: a namespace assigned twice
    │   ├── NotNamespaceAdmin              only the namespace's admin may do that
    │   └── NotPendingAdmin                only the pending admin may accept the namespace
    ├── Unauthorized (PermissionError)     a contract refused the caller (example contracts)
    ├── ChainError                         the chain or node failed us
    │   ├── NodeUnreachable (ConnectionError)  no JSON-RPC node answers
    │   │   └── ProviderUnavailable        proven mode: a header or proof provider did not answer (names it)
    │   ├── RpcError                       the node answered a request with a JSON-RPC error
    │   ├── WrongChain                     the node serves another chain than expected
    │   ├── ChainRolledBack                the chain's history went back below tokens already seen
    │   ├── LogsIncomplete                 a follower waits: the logs answered lack (or invent) a block's logs
    │   ├── ContractNotFound               no FencingRegistry code at that address
    │   ├── InsufficientFunds              the sender cannot pay for gas
    │   ├── TransactionTimeout (TimeoutError)  not mined in time; cancelled, so it never will be
    │   ├── OutcomeUnknown                 sent, but whether it landed could not be established
    │   ├── NotConfirmed (TimeoutError)    mined, but not k blocks deep in time
    │   ├── TransactionFailed              mined with status 0, no decodable reason
    │   ├── UnknownRevert                  reverted with data no error of ours explains
    │   ├── UnknownAccount (LookupError)   no key to sign for that address
    │   ├── NotSupported                   e.g. advance_time on a chain that is not a dev chain
    │   │   └── ProofsNotServed            proven mode: the provider does not serve eth_getProof (eth-tester)
    │   ├── AnvilNotFound                  `chainfence node` found no anvil binary
    │   └── UnverifiedAnswer               proven mode: an answer did not verify; nothing judged, no mark moved
    │       ├── ProofInvalid               a proof that does not verify against the trusted header (names the provider)
    │       ├── HeaderInvalid              a header whose fields do not hash to its hash
    │       ├── HeadersDisagree            no k of the n header providers agree on the block's hash
    │       ├── BlockNotVouched            a log's block is not the one the header source vouches for
    │       ├── HeaderStale                the vouched-for header is older than max_age: a withheld head
    │       └── HeaderBehind               the proven state is older than a mark already accepted at a later block
    ├── GuardError                         the guard's store is unusable
    │   ├── GuardStoreMismatch             the store belongs to another registry
    │   └── GuardForked                    an exclusive guard used in a process forked from its owner
    ├── AuditIndexError                    the audit index cannot answer
    │   ├── AuditIndexMismatch             the index file belongs to another registry, or is not an index
    │   └── AuditIndexDiffers              verify: the index and the chain disagree
    ├── LeaseLost                          a kept-alive lease can no longer be trusted: stop the work
    │   └── LeaseSetLost                   a member of an acquire_many set ended (which, and how)
    ├── ExtraNotInstalled (ImportError)    an optional part needs an extra: pip install 'chainfence[EXTRA]'
    ├── FenceBroken (RuntimeError)         a statement ended a fenced SQL transaction early
    └── RequestRejected                    a holder-signed request failed verification
        ├── MalformedRequest (ValueError)  missing or unparsable fields         (HTTP 400)
        │   └── PayloadMismatch            the body is not the one that was signed
        ├── InvalidSignature               not signed by the holder it names    (HTTP 401)
        ├── RequestExpired                 past its deadline                    (HTTP 401)
        ├── SignerNotHolder                signed by someone who does not hold the token (HTTP 403)
        ├── RequestMisdirected             signed for another resource, action or audience (HTTP 403)
        │   ├── ResourceMismatch
        │   ├── ActionMismatch
        │   └── AudienceMismatch
        └── ReplayedRequest                seen before                          (HTTP 409)

Errors raised by the contract (its custom errors) map one-to-one onto classes
here through :func:`_contract_error`; :mod:`chainfence._node.reverts` decodes a
revert, whatever provider raised it, into one of them. Users never see raw
web3 or eth-tester exceptions: those are chained as ``__cause__``.

A service rejecting work needs one clause: ``except TokenNotCurrent`` (and
``except RequestRejected`` for holder-signed requests), plus ``except
NotAdmitted`` when its guard has an admission policy
(:class:`~chainfence.Admission`: :class:`HolderNotAdmitted`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from ._times import chain_time

__all__ = [
    "ActionMismatch",
    "AnvilNotFound",
    "AudienceMismatch",
    "AuditIndexDiffers",
    "AuditIndexError",
    "AuditIndexMismatch",
    "BlockNotVouched",
    "ChainError",
    "ChainRolledBack",
    "ChainfenceError",
    "ContractNotFound",
    "DuplicateResource",
    "ExtraNotInstalled",
    "FenceBroken",
    "GuardError",
    "GuardForked",
    "GuardStoreMismatch",
    "HeaderBehind",
    "HeaderInvalid",
    "HeaderStale",
    "HeadersDisagree",
    "HolderNotAdmitted",
    "InsufficientFunds",
    "InvalidAddress",
    "InvalidAssignments",
    "InvalidClaimItems",
    "InvalidCursor",
    "InvalidHolder",
    "InvalidInput",
    "InvalidLimit",
    "InvalidMaxTtl",
    "InvalidNamespace",
    "InvalidPolicy",
    "InvalidProgress",
    "InvalidResourceName",
    "InvalidSignature",
    "InvalidToken",
    "InvalidTtl",
    "InvalidUrl",
    "InvalidWait",
    "LeaseCompleted",
    "LeaseError",
    "LeaseExpired",
    "LeaseHeld",
    "LeaseLost",
    "LeaseReleased",
    "LeaseRevoked",
    "LeaseSetLost",
    "LockDelayed",
    "LogsIncomplete",
    "MalformedRequest",
    "NamespaceError",
    "NamespaceTaken",
    "NodeUnreachable",
    "NotAdmitted",
    "NotConfirmed",
    "NotHolder",
    "NotLive",
    "NotNamespaceAdmin",
    "NotPendingAdmin",
    "NotSupported",
    "NothingToClaim",
    "OutcomeUnknown",
    "PayloadMismatch",
    "ProofInvalid",
    "ProofsNotServed",
    "ProviderUnavailable",
    "RegistryOverflow",
    "ReplayedRequest",
    "RequestExpired",
    "RequestMisdirected",
    "RequestRejected",
    "ResourceMismatch",
    "RpcError",
    "SignerNotHolder",
    "StaleCursor",
    "StaleToken",
    "TokenNotConfirmed",
    "TokenNotCurrent",
    "TransactionFailed",
    "TransactionTimeout",
    "Unauthorized",
    "UnknownAccount",
    "UnknownRevert",
    "UnknownToken",
    "UnverifiedAnswer",
    "WrongChain",
]

E = TypeVar("E", bound="ChainfenceError")

#: Solidity custom error name -> the class it raises as. Filled by @_contract_error.
CONTRACT_ERRORS: dict[str, type[ChainfenceError]] = {}


def _contract_error(solidity_name: str, *also: str) -> Callable[[type[E]], type[E]]:
    """Register ``cls`` as the Python side of the contract's ``solidity_name`` error
    (and of the example contracts' errors ``also`` that mean the same thing).

    The class's ``from_revert(**fields)`` receives the error's ABI arguments
    as snake_case keywords (``expiresAt`` -> ``expires_at``), with the bytes32
    ``resource`` argument renamed ``resource_id``.
    """

    def register(cls: type[E]) -> type[E]:
        for name in (solidity_name, *also):
            if name in CONTRACT_ERRORS:
                raise RuntimeError(f"{name} is mapped twice")
            CONTRACT_ERRORS[name] = cls
        cls.solidity_error = solidity_name
        return cls

    return register


def _describe(resource: str | None, resource_id: bytes | None) -> str:
    if resource is not None:
        return repr(resource)
    if resource_id is not None:
        return "resource 0x" + resource_id.hex()
    return "resource"


#: Attributes that are not details: raw provider objects.
_NOT_DETAILS = frozenset({"receipt", "__notes__"})


def _jsonable(value: Any) -> Any:
    import enum

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _jsonable(to_dict())
    return str(value)


def _rebuild(cls: type[ChainfenceError], args: tuple[Any, ...], state: dict[str, Any]) -> ChainfenceError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class ChainfenceError(Exception):
    """Base of every error chainfence raises."""

    #: Name of the contract custom error this class decodes, if any.
    solidity_error: ClassVar[str | None] = None

    @classmethod
    def from_revert(cls, **fields: Any) -> ChainfenceError:
        """Build the error from the decoded arguments of its Solidity error."""
        return cls(**fields)

    def details(self) -> dict[str, Any]:
        """The error's public fields as JSON-ready values, with its name and message.

        For programs on the other side of a process boundary: ``chainfence
        --json`` prints it; a tool result can carry it. Bytes become 0x-hex,
        enums their lower-case name, a lease its fields; raw receipts are left
        out (their hashes are in ``tx_hashes``).
        """
        fields: dict[str, Any] = {"error": type(self).__name__, "message": str(self)}
        for key, value in self.__dict__.items():
            if key.startswith("_") or key in _NOT_DETAILS or key in fields:
                continue
            fields[key] = _jsonable(value)
        if getattr(self, "__notes__", None):
            fields["notes"] = list(self.__notes__)
        return fields

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only constructors do not survive the default pickling
        # (Exception pickles ``args`` only); errors cross process boundaries.
        return (_rebuild, (type(self), self.args, self.__dict__.copy()))


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


class InvalidInput(ChainfenceError, ValueError):
    """An argument is malformed or out of range. Nothing was sent or written."""


@_contract_error("FencingRegistryInvalidName")
class InvalidResourceName(InvalidInput):
    """A resource name must be a str of 1 to 128 bytes of UTF-8."""

    def __init__(self, message: str | None = None, *, length: int | None = None, max_length: int | None = None):
        self.length = length
        self.max_length = max_length
        if message is None:
            message = f"resource name must be 1 to {max_length} bytes of UTF-8, got {length} bytes"
        super().__init__(message)


@_contract_error("FencingRegistryInvalidTtl")
class InvalidTtl(InvalidInput):
    """A ttl must be an int number of seconds from 1 to the registry's maximum."""

    def __init__(self, message: str | None = None, *, ttl: Any = None, max_ttl: int | None = None):
        self.ttl = ttl
        self.max_ttl = max_ttl
        if message is None:
            message = f"ttl must be 1 to {max_ttl} seconds, got {ttl!r}"
        super().__init__(message)


@_contract_error("FencingRegistryInvalidMaxTtl")
class InvalidMaxTtl(InvalidTtl):
    """A registry's maximum ttl must be 1 to 2**32 - 1 seconds."""

    def __init__(self, message: str | None = None, *, max_ttl: Any = None):
        if message is None:
            message = f"max_ttl must be 1 to {2**32 - 1} seconds, got {max_ttl!r}"
        super().__init__(message, ttl=max_ttl, max_ttl=2**32 - 1)


class InvalidWait(InvalidInput):
    """``wait`` (seconds to wait for a held resource) must be None or a finite number from 0 to
    :data:`~chainfence._validate.MAX_WAIT`; 0 and None do not wait."""

    def __init__(self, message: str | None = None, *, wait: Any = None):
        self.wait = wait
        if message is None:
            message = f"wait must be None or a number of seconds from 0 to 31536000, got {wait!r}"
        super().__init__(message)


class InvalidToken(InvalidInput):
    """A fencing token must be an int from 1 to 2**256 - 1 (0 means "no token")."""

    def __init__(self, message: str | None = None, *, token: Any = None):
        self.token = token
        if message is None:
            message = f"a fencing token is an int from 1 to 2**256 - 1, got {token!r}"
        super().__init__(message)


class InvalidAddress(InvalidInput):
    """An address must be 20 bytes as 0x-prefixed hex (checksummed if mixed case)."""


class InvalidUrl(InvalidInput):
    """A JSON-RPC node's URL that is not a well-formed ``http://`` or ``https://`` URL (a port that is
    not a number, an unclosed IPv6 bracket, a comma list, whitespace, ...). The message never repeats
    the URL's path or query, where hosted providers put API keys."""


@_contract_error("FencingRegistryInvalidHolder")
class InvalidHolder(InvalidAddress):
    """grant: a lease's holder cannot be the zero address."""

    def __init__(self, message: str | None = None, *, holder: str | None = None):
        self.holder = holder
        super().__init__(message or f"a lease cannot be granted to {holder}")


class InvalidProgress(InvalidInput):
    """A progress marker must be 1 to 32 bytes (not all zero), an int from 1 to 2**256 - 1, or a str."""

    def __init__(self, value: Any = None, *, why: str | None = None):
        self.value = value if isinstance(value, (int, str)) and not isinstance(value, bool) else repr(value)
        super().__init__(
            why
            or "a progress marker is 1 to 32 bytes (not all zero), an int from 1 to 2**256 - 1, "
            f"or a str (hashed), got {type(value).__name__} {value!r:.80}"
        )


@_contract_error("FencingRegistryInvalidItems")
class InvalidClaimItems(InvalidInput):
    """A claim lists 1 to ``max_count`` distinct items; ``count`` were given."""

    def __init__(self, message: str | None = None, *, count: int | None = None, max_count: int | None = None):
        self.count = count
        self.max_count = max_count
        if message is None:
            message = f"a claim lists 1 to {max_count} items, got {count}"
        super().__init__(message)


@_contract_error("FencingRegistryInvalidNamespace")
class InvalidNamespace(InvalidInput):
    """A namespace is a name's part before its first ``/``: 1 to 127 bytes, printable, no ``/``; one that
    looks like an address must be an address namespace (lowercase), and the deployer cannot assign one
    shaped like an address (42 bytes starting ``0x``: those are their address's)."""

    def __init__(self, message: str | None = None, *, length: int | None = None, max_length: int | None = None):
        self.length = length
        self.max_length = max_length
        if message is None:
            message = f"a namespace must be 1 to {max_length} bytes with no '/', got {length} bytes"
        super().__init__(message)


@_contract_error("FencingRegistryInvalidPolicy")
class InvalidPolicy(InvalidInput):
    """A namespace policy's ``max_ttl`` and ``lock_delay`` must be 0 to the registry's maximum ttl, and a
    change must name at least one field."""

    def __init__(
        self,
        message: str | None = None,
        *,
        max_ttl: Any = None,
        lock_delay: Any = None,
        registry_max_ttl: int | None = None,
    ):
        self.max_ttl = max_ttl
        self.lock_delay = lock_delay
        self.registry_max_ttl = registry_max_ttl
        if message is None:
            message = (
                f"a namespace policy needs max_ttl and lock_delay from 0 to {registry_max_ttl} seconds, "
                f"got max_ttl={max_ttl!r} lock_delay={lock_delay!r}"
            )
        super().__init__(message)


@_contract_error("FencingRegistryInvalidAssignments")
class InvalidAssignments(InvalidInput):
    """Deployment: one admin per assigned namespace."""

    def __init__(self, message: str | None = None, *, prefixes: int | None = None, admins: int | None = None):
        self.prefixes = prefixes
        self.admins = admins
        super().__init__(message or f"{prefixes} namespaces but {admins} admins")


@_contract_error("FencingRegistryDuplicateResource")
class DuplicateResource(InvalidInput):
    """A set of leases (``acquire_many``, a :class:`~chainfence.LeaseSet`) lists a resource twice."""

    def __init__(self, message: str | None = None, *, resource_id: bytes | None = None, resource: str | None = None):
        self.resource_id = resource_id
        self.resource = resource
        where = repr(resource) if resource is not None else "0x" + (resource_id or b"").hex()
        super().__init__(message or f"resource {where} is listed twice")


class InvalidLimit(InvalidInput):
    """An audit list query's ``limit`` (rows a page holds) must be an int from 1 to ``max_limit``
    (:data:`chainfence.audit.index.MAX_LIMIT`); read more through the pages' cursors."""

    def __init__(self, message: str | None = None, *, limit: Any = None, max_limit: int | None = None):
        self.limit = limit if isinstance(limit, int) else repr(limit)
        self.max_limit = max_limit
        if message is None:
            message = f"limit must be an int from 1 to {max_limit}, got {limit!r:.80}"
        super().__init__(message)


class InvalidCursor(InvalidInput):
    """An audit list query's ``after`` cursor does not decode, or was made by another query or for other
    arguments (a cursor continues the listing it came from, and only that one)."""


class StaleCursor(InvalidCursor):
    """The row a cursor points after is gone: a reorganisation (or a sync with more confirmations) rewound
    the audit index past its block (or, for the MCP ``history`` tool's ``before``, the chain no longer has
    that event), so rows already read may have been rolled back and the rows after it may differ.
    Nothing was read; list again from the start."""


# ---------------------------------------------------------------------------
# The registry refused a lease operation
# ---------------------------------------------------------------------------


class LeaseError(ChainfenceError):
    """The registry (or a guard) refused an operation on a resource's lease.

    ``resource`` is the name when the SDK knows it; ``resource_id`` is always
    the on-chain ``keccak256(name)`` when known. The message is rendered from
    the attributes, so attaching the name later (the chain only knows the
    hash) updates it.
    """

    def __init__(self, *, resource: str | None = None, resource_id: bytes | None = None):
        self.resource = resource
        self.resource_id = resource_id
        super().__init__()

    def __str__(self) -> str:
        return self._message()

    def _message(self) -> str:
        return f"lease operation refused on {self._where()}"

    def _where(self) -> str:
        return _describe(self.resource, self.resource_id)

    def with_resource(self, name: str) -> LeaseError:
        """Attach the resource name the caller used; returns ``self``."""
        self.resource = name
        return self


@_contract_error("FencingRegistryLeaseHeld")
class LeaseHeld(LeaseError):
    """Someone else holds a live lease on the resource.

    ``holder``, ``token`` and ``expires_at`` describe that lease; retry at or
    after ``expires_at`` (chain time).
    """

    def __init__(
        self,
        *,
        holder: str,
        token: int,
        expires_at: int,
        resource: str | None = None,
        resource_id: bytes | None = None,
    ):
        self.holder = holder
        self.token = token
        self.expires_at = expires_at
        super().__init__(resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        return f"{self._where()} is held by {self.holder} with token {self.token} until {chain_time(self.expires_at)}"


@_contract_error("FencingRegistryNothingToClaim")
class NothingToClaim(LeaseError):
    """Every one of the ``count`` items of the workset is done or held live by someone else.

    ``resource_id`` is the workset's id (``keccak256(workset)``); ``resource`` its name when known.
    """

    def __init__(
        self, *, count: int, resource: str | None = None, resource_id: bytes | None = None, workset: bytes | None = None
    ):
        self.count = count
        super().__init__(resource=resource, resource_id=resource_id if resource_id is not None else workset)

    def _message(self) -> str:
        return f"nothing to claim in workset {self._where()}: all {self.count} items are done or held by others"


@_contract_error("FencingRegistryNotHolder", "FencedStoreNotHolder")
class NotHolder(LeaseError):
    """The caller (``account``) is not the holder of ``token``; ``holder`` is."""

    def __init__(
        self,
        *,
        token: int,
        account: str,
        holder: str,
        resource: str | None = None,
        resource_id: bytes | None = None,
    ):
        self.token = token
        self.account = account
        self.holder = holder
        super().__init__(resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        return f"{self.account} does not hold token {self.token} on {self._where()}: {self.holder} does"


@_contract_error("FencingRegistryNotAdmitted")
class NotAdmitted(LeaseError, PermissionError):
    """``holder`` is not on the allowlist of ``namespace`` (the id; ``namespace_name`` the prefix when
    known), which requires admitted holders: refused by the registry (acquire, grant) or by a service
    that accepts only admitted holders."""

    def __init__(
        self,
        *,
        holder: str,
        namespace: bytes | None = None,
        namespace_name: str | None = None,
        resource: str | None = None,
        resource_id: bytes | None = None,
    ):
        self.holder = holder
        self.namespace = namespace
        self.namespace_name = namespace_name
        super().__init__(resource=resource, resource_id=resource_id)

    def with_resource(self, name: str) -> LeaseError:
        """Attach the resource name; its namespace's prefix comes with it."""
        self.resource = name
        if self.namespace_name is None and "/" in name:
            self.namespace_name = name.split("/", 1)[0]
        return self

    def _message(self) -> str:
        where = repr(self.namespace_name) if self.namespace_name is not None else "0x" + (self.namespace or b"").hex()
        target = f" ({self._where()})" if self.resource is not None or self.resource_id is not None else ""
        return f"{self.holder} is not admitted in namespace {where}{target}"


class HolderNotAdmitted(NotAdmitted):
    """The token is genuine, but its holder is not one this guard accepts (:class:`~chainfence.Admission`).

    ``holder`` holds ``token`` on ``resource``; ``admission`` says which list
    refused it: ``"local"`` (the service's own list) or ``"on-chain"`` (the
    allowlist of the resource's namespace: ``namespace`` its id,
    ``namespace_name`` its prefix). Nothing was recorded: the guard's mark
    did not move. ``status`` is the HTTP status
    :class:`~chainfence.asgi.FencingMiddleware` answers with.
    """

    status: ClassVar[int] = 403

    def __init__(
        self,
        *,
        holder: str,
        token: int,
        admission: str,
        namespace: bytes | None = None,
        namespace_name: str | None = None,
        resource: str | None = None,
        resource_id: bytes | None = None,
    ):
        self.token = token
        self.admission = admission
        super().__init__(
            holder=holder,
            namespace=namespace,
            namespace_name=namespace_name,
            resource=resource,
            resource_id=resource_id,
        )

    def _message(self) -> str:
        if self.admission == "local":
            where = "this service's list of admitted holders"
        else:
            where = f"the on-chain allowlist of namespace {self.namespace_name!r}"
        return f"{self.holder}, holder of token {self.token} on {self._where()}, is not in {where}"


@_contract_error("FencingRegistryLockDelay")
class LockDelayed(LeaseError):
    """The lease of ``holder`` expired and its namespace's lock-delay runs until chain time ``until``:
    nobody but ``holder`` may acquire the resource before then. Retry at or after ``until``."""

    def __init__(self, *, holder: str, until: int, resource: str | None = None, resource_id: bytes | None = None):
        self.holder = holder
        self.until = until
        super().__init__(resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        return (
            f"{self._where()} is in its lock-delay until {chain_time(self.until)} "
            f"(the lease of {self.holder} expired; only it may acquire before then)"
        )


@_contract_error("FencingRegistryNotLive")
class NotLive(LeaseError):
    """revoke: the resource's latest lease (``token``, 0 if never held) is not live: nothing to revoke."""

    def __init__(self, *, token: int, resource: str | None = None, resource_id: bytes | None = None):
        self.token = token
        super().__init__(resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        return f"{self._where()} has no live lease to revoke (latest token {self.token})"


class TokenNotCurrent(LeaseError):
    """``token`` is not the resource's current, live token: reject the work.

    ``current_token`` is the token the registry holds for the resource (or,
    from a guard, the highest token it has accepted).
    """

    def __init__(
        self,
        *,
        token: int,
        current_token: int,
        resource: str | None = None,
        resource_id: bytes | None = None,
    ):
        self.token = token
        self.current_token = current_token
        super().__init__(resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        return f"token {self.token} is not current for {self._where()}"


@_contract_error("FencingRegistryStaleToken", "FencedStoreStaleToken")
class StaleToken(TokenNotCurrent):
    """``token`` is below ``current_token``: superseded, its holder lost the lease.

    Raised by the registry (renew/release/check with an old token) and by a
    guard (a token lower than one it has already accepted for the resource).
    The registry stores only the latest token of each resource, so a lower
    token that was issued for another resource reads as stale too.
    """

    def _message(self) -> str:
        return f"token {self.token} for {self._where()} is stale: token {self.current_token} superseded it"


@_contract_error("FencingRegistryUnknownToken")
class UnknownToken(TokenNotCurrent):
    """``token`` is 0 or above the resource's latest token: never issued for it (forged, or another resource's)."""

    def _message(self) -> str:
        return f"token {self.token} was never issued for {self._where()} (its latest token is {self.current_token})"


@_contract_error("FencingRegistryLeaseExpired")
class LeaseExpired(TokenNotCurrent):
    """``token`` is the resource's latest, but its lease expired at ``expired_at``.

    The holder lost the lease to time: acquire again for a new token.
    ``no_block_since`` is True when no block was mined since the lease ran
    out: the latest block still shows it live, but chain time
    (``judged_at``: the pending block's time, or the verifier's clock) is
    past its expiry, and the next transaction would find it expired.
    """

    def __init__(
        self,
        *,
        token: int,
        expired_at: int,
        resource: str | None = None,
        resource_id: bytes | None = None,
        judged_at: int | None = None,
        no_block_since: bool = False,
    ):
        self.expired_at = expired_at
        self.judged_at = judged_at
        self.no_block_since = no_block_since
        super().__init__(token=token, current_token=token, resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        message = f"the lease of token {self.token} on {self._where()} expired at {chain_time(self.expired_at)}"
        if self.no_block_since:
            message += (
                f"; no block since (chain time now {chain_time(self.judged_at)}, the latest block still shows it live)"
            )
        return message


@_contract_error("FencingRegistryLeaseReleased")
class LeaseReleased(TokenNotCurrent):
    """``token`` is the resource's latest, but its holder released it."""

    def __init__(self, *, token: int, resource: str | None = None, resource_id: bytes | None = None):
        super().__init__(token=token, current_token=token, resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        return f"the lease of token {self.token} on {self._where()} was released"


@_contract_error("FencingRegistryLeaseCompleted")
class LeaseCompleted(LeaseReleased):
    """``token`` is the claimed work item's latest, but its claimant completed the item: done for good.

    A :class:`LeaseReleased` ("you closed it"), told apart so that every part can say which end it was.
    """

    def _message(self) -> str:
        return f"the claim of token {self.token} on {self._where()} was completed: the item is done"


@_contract_error("FencingRegistryLeaseRevoked")
class LeaseRevoked(TokenNotCurrent):
    """``token`` is the resource's latest, but the admin of its namespace revoked it: stop the work."""

    def __init__(self, *, token: int, resource: str | None = None, resource_id: bytes | None = None):
        super().__init__(token=token, current_token=token, resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        return f"the lease of token {self.token} on {self._where()} was revoked by its namespace's admin"


class TokenNotConfirmed(TokenNotCurrent):
    """``token`` is current at the chain head but its acquisition is not yet
    ``confirmations`` blocks deep: it may still vanish in a reorg. Retry later."""

    def __init__(
        self,
        *,
        token: int,
        confirmations: int,
        resource: str | None = None,
        resource_id: bytes | None = None,
    ):
        self.confirmations = confirmations
        super().__init__(token=token, current_token=token, resource=resource, resource_id=resource_id)

    def _message(self) -> str:
        return (
            f"token {self.token} for {self._where()} is not yet {self.confirmations} blocks deep; "
            "retry once it is confirmed"
        )


@_contract_error("FencingRegistryUint48Overflow")
class RegistryOverflow(ChainfenceError, OverflowError):
    """A token (48 bits) or an expiry (40 bits: until the year 36,812) no longer fits the registry's storage."""

    def __init__(self, message: str | None = None, *, value: int | None = None):
        self.value = value
        super().__init__(message or f"value {value} does not fit the registry's storage (tokens 48 bits, expiries 40)")


# ---------------------------------------------------------------------------
# The chain or node failed us
# ---------------------------------------------------------------------------


class ChainError(ChainfenceError):
    """Talking to the chain failed, or it answered something we cannot use."""

    #: Set when an acquisition landed but a step after it failed: the lease, never to be forgotten.
    lease: Any


class NodeUnreachable(ChainError, ConnectionError):
    """No JSON-RPC node answers at the URL (or it stopped answering)."""


class RpcError(ChainError):
    """The node answered a JSON-RPC request with an error that is not a revert.

    ``code`` and ``rpc_message`` are the JSON-RPC error's (``code`` is None
    when the provider did not give one); ``method`` is the request's.
    """

    def __init__(self, message: str, *, method: str | None = None, code: int | None = None, rpc_message: str = ""):
        self.method = method
        self.code = code
        self.rpc_message = rpc_message
        super().__init__(message)


class WrongChain(ChainError):
    """The node serves another chain (chain id or registry deployment) than the one expected."""


class ChainRolledBack(ChainError):
    """The chain no longer holds history that was already seen: a token was accepted (or seen by
    this SDK) that the chain's state no longer reaches, so the same number may go to another holder.

    Raised by guards, fenced SQL transactions and the SDK's views when the registry's latest token
    (or a resource's) is below one already seen, when a token number turns up with another holder,
    or when a block a follower already applied was replaced. It is never retried away: the state
    that trusted the lost history must be looked at. ``seen_token`` is the highest token seen,
    ``chain_token`` what the chain says now (either may be None when the evidence is a block).
    """

    def __init__(
        self,
        message: str,
        *,
        seen_token: int | None = None,
        chain_token: int | None = None,
        resource: str | None = None,
    ):
        self.seen_token = seen_token
        self.chain_token = chain_token
        self.resource = resource
        super().__init__(message)


class LogsIncomplete(ChainError):
    """A follower of the registry's logs did not pass block ``block``: the log provider (``source``)
    answered ``eth_getLogs`` without logs that block has, by its ``logsBloom`` and its receipts against
    its ``receiptsRoot`` (a log index that lags the head, or one that withholds; or receipts in which a
    registry event does not read), or with logs it cannot have (invented ones the bloom rules out, one
    of a block outside the range asked or of another block hash than the block's, one that does not
    read: any of its fields, its ``logIndex`` or ``transactionHash`` too). ``reason`` says which.

    What came before it was applied: the follower stands at block ``followed``, ``behind`` blocks short
    of block ``head``, the block it was following to. It waits there, and the next sync takes the block
    up again: the gap closes by itself once the provider answers it. Meanwhile the follower is not up to
    date, and whatever relies on it does what it does when it is behind (a ``follow`` guard checks at
    the mark on-chain)."""

    def __init__(
        self,
        message: str | None = None,
        *,
        block: int | None = None,
        followed: int | None = None,
        head: int | None = None,
        provider: str | None = None,
        reason: str = "",
    ):
        self.block = block
        self.followed = followed
        self.head = head
        self.behind = None if head is None or followed is None else head - followed
        self.source = provider
        self.reason = reason
        super().__init__(
            message
            or (
                f"the logs {provider or 'the provider'} answered do not check out against block {block} ({reason}): "
                f"the follower waits at block {followed}, {self.behind} blocks behind block {head}"
            )
        )


class ContractNotFound(ChainError):
    """There is no FencingRegistry at the address (no code, or other code)."""


class TransactionFailed(ChainError):
    """A transaction was mined with status 0 and no reason could be decoded."""

    def __init__(self, message: str, *, tx_hash: str | None = None, receipt: Any = None):
        self.tx_hash = tx_hash
        self.receipt = receipt
        super().__init__(message)


class InsufficientFunds(ChainError):
    """The sender's balance cannot pay for the transaction's gas."""

    def __init__(self, message: str, *, account: str | None = None):
        self.account = account
        super().__init__(message)


class _TransactionOutcome(ChainError):
    """Base of the errors that describe a transaction in flight: its hashes and nonce."""

    #: When the transaction was a batch (group commit, ``registry.batched()``): the caller's operation's
    #: position in it, to learn that operation's own outcome by hash (``registry.batch_item(tx_hash,
    #: item=...)``, ``chainfence tx HASH --item N``). None for a transaction of one operation.
    item: int | None = None

    def __init__(
        self, message: str, *, tx_hashes: tuple[str, ...] = (), nonce: int | None = None, sender: str | None = None
    ):
        self.tx_hashes = tuple(tx_hashes)
        self.nonce = nonce
        self.sender = sender
        super().__init__(message)

    @property
    def tx_hash(self) -> str | None:
        """The hash of the transaction the caller asked for (the first one sent)."""
        return self.tx_hashes[0] if self.tx_hashes else None


class TransactionTimeout(_TransactionOutcome, TimeoutError):
    """Not mined in time, then cancelled: a replacement with the same nonce was mined (the SDK's
    cancellation, or another process's transaction as the same account, the node having dropped ours),
    so the original can never execute. Nothing happened; it is safe to try again."""


class OutcomeUnknown(_TransactionOutcome):
    """Sent, but the SDK could not establish whether it was mined (the node stopped answering, or
    neither it nor its cancellation was mined in time). ``tx_hashes`` lists every candidate: look
    them up (``registry.lease_from_tx``) before acting again."""


class NotConfirmed(_TransactionOutcome, TimeoutError):
    """Mined (``receipt``), but not ``confirmations`` blocks deep in time: it may still be
    reorganised away. For an acquisition, ``lease`` is the lease it created: release it or
    keep waiting, but do not forget it."""

    def __init__(self, message: str, *, receipt: Any = None, confirmations: int = 0, **kwargs: Any):
        self.receipt = receipt
        self.confirmations = confirmations
        self.lease: Any = None
        super().__init__(message, **kwargs)


class UnknownRevert(ChainError):
    """A call reverted with data that is not one of the registry's errors."""

    def __init__(self, message: str, *, data: bytes = b""):
        self.data = data
        super().__init__(message)


class NamespaceError(ChainfenceError, PermissionError):
    """A namespace refused the caller. ``namespace`` is its id (``keccak256(prefix)``), ``namespace_name``
    the prefix when the SDK knows it."""

    def __init__(self, message: str | None = None, *, namespace: bytes | None = None, **fields: Any):
        self.namespace = namespace
        self.namespace_name: str | None = None
        self.__dict__.update(fields)
        super().__init__(message)

    def with_namespace(self, name: str) -> NamespaceError:
        """Attach the namespace prefix the caller used; returns ``self``."""
        self.namespace_name = name
        return self

    def _where(self) -> str:
        if self.namespace_name is not None:
            return f"namespace {self.namespace_name!r}"
        return "namespace 0x" + (self.namespace or b"").hex()

    def __str__(self) -> str:
        return self.args[0] if self.args and self.args[0] else self._message()

    def _message(self) -> str:
        return f"{self._where()} refused the caller"


@_contract_error("FencingRegistryNamespaceTaken")
class NamespaceTaken(NamespaceError):
    """Deployment: the namespace is assigned twice (first to ``admin``)."""

    admin: str | None

    def __init__(self, message: str | None = None, *, namespace: bytes | None = None, admin: str | None = None):
        super().__init__(message, namespace=namespace, admin=admin)

    def _message(self) -> str:
        return f"{self._where()} already has an admin: {self.admin}"


@_contract_error("FencingRegistryNotNamespaceAdmin")
class NotNamespaceAdmin(NamespaceError):
    """``account`` is not the admin of the namespace (``admin``; the zero address when nobody
    administers it, which includes names without ``/``)."""

    account: str | None
    admin: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        namespace: bytes | None = None,
        account: str | None = None,
        admin: str | None = None,
    ):
        super().__init__(message, namespace=namespace, account=account, admin=admin)

    def _message(self) -> str:
        if self.admin is None or int(self.admin, 16) == 0:
            return f"{self.account} is not the admin of {self._where()}: nobody administers it"
        return f"{self.account} is not the admin of {self._where()}: {self.admin} is"


@_contract_error("FencingRegistryNotPendingAdmin")
class NotPendingAdmin(NamespaceError):
    """``account`` may not accept the namespace: ``pending_admin`` (zero: no offer) may."""

    account: str | None
    pending_admin: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        namespace: bytes | None = None,
        account: str | None = None,
        pending_admin: str | None = None,
    ):
        super().__init__(message, namespace=namespace, account=account, pending_admin=pending_admin)

    def _message(self) -> str:
        return f"{self.account} is not the pending admin of {self._where()} (pending: {self.pending_admin})"


@_contract_error("AgentWalletUnauthorized")
class Unauthorized(ChainfenceError, PermissionError):
    """A contract refused the caller (e.g. only the owner may make an AgentWallet act)."""

    def __init__(self, message: str | None = None, *, account: str | None = None):
        self.account = account
        super().__init__(message or f"{account} is not allowed to do that")


class UnknownAccount(ChainError, LookupError):
    """The chain holds no key for that address, so it cannot send as it."""


class NotSupported(ChainError):
    """The chain does not support the operation (e.g. time travel outside dev chains)."""


class AnvilNotFound(ChainError):
    """No anvil binary was found for a local node; the message says how to get one."""


# ---------------------------------------------------------------------------
# The proven mode (chainfence.proofs): answers checked, not believed
# ---------------------------------------------------------------------------


class ProviderUnavailable(NodeUnreachable):
    """A provider of the proven mode (a header source's, or the one that serves proofs) did not answer.

    ``source`` names it (its URL without credentials, path or query);
    ``sources`` lists every one that failed when a quorum could not be
    reached (``needed`` answers were needed, ``answered`` came). Nothing was
    judged: a guard moves no mark on it.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        provider: str | None = None,
        providers: tuple[str, ...] = (),
        needed: int | None = None,
        answered: int | None = None,
        detail: str = "",
    ):
        self.source = provider
        self.sources = tuple(providers) or ((provider,) if provider is not None else ())
        self.needed = needed
        self.answered = answered
        self.detail = detail
        if message is None:
            if needed is not None:
                message = (
                    f"{answered} of the header providers answered, {needed} are needed; down: {', '.join(self.sources)}"
                )
            else:
                message = f"provider {provider} did not answer"
            if detail:
                message += f" ({detail})"
        super().__init__(message)


class ProofsNotServed(NotSupported):
    """``source`` does not serve ``eth_getProof`` (the embedded eth-tester chain does not): the proven
    mode cannot run against it. Use a node that does (anvil, geth, reth, erigon, nethermind, besu)."""

    def __init__(self, message: str | None = None, *, provider: str | None = None, detail: str = ""):
        self.source = provider
        self.detail = detail
        super().__init__(
            message
            or (
                f"{provider} does not serve eth_getProof, which the proven mode needs"
                + (f": {detail}" if detail else "")
            )
        )


class UnverifiedAnswer(ChainError):
    """The proven mode refused what its providers answered: nothing was judged, no mark moved.

    Never a reason to fall back to believing one provider; see ``docs/guarantees.md``.
    """


class ProofInvalid(UnverifiedAnswer):
    """``source``'s proof for ``block`` (number; ``block_hash`` the trusted header's) does not verify
    against the trusted header: a forged or corrupted answer, or a provider on another chain.
    ``reason`` says which check failed."""

    def __init__(
        self,
        message: str | None = None,
        *,
        provider: str | None = None,
        block: int | None = None,
        block_hash: str | None = None,
        reason: str = "",
    ):
        self.source = provider
        self.block = block
        self.block_hash = block_hash
        self.reason = reason
        super().__init__(
            message or (f"the proof {provider} served for block {block} ({block_hash}) does not verify: {reason}")
        )


class HeaderInvalid(UnverifiedAnswer):
    """``source`` answered a header for block ``block`` whose fields do not hash to the hash it claims
    (or not the block asked for). ``reason`` says which."""

    def __init__(
        self,
        message: str | None = None,
        *,
        provider: str | None = None,
        block: int | None = None,
        reason: str = "",
    ):
        self.source = provider
        self.block = block
        self.reason = reason
        super().__init__(message or f"the header {provider} served for block {block} is not valid: {reason}")


class HeadersDisagree(UnverifiedAnswer):
    """No ``needed`` of the header providers agree on the hash of block ``block``.

    ``answers`` maps each provider to what it said: a block hash, or why its
    answer did not count (down, an invalid header). Some providers are lying
    or on another fork; which, the proven mode cannot tell.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        block: int | None = None,
        needed: int | None = None,
        answers: dict[str, str] | None = None,
    ):
        self.block = block
        self.needed = needed
        self.answers = dict(answers or {})
        if message is None:
            said = "; ".join(f"{provider}: {answer}" for provider, answer in self.answers.items())
            message = f"no {needed} header providers agree on block {block}: {said}"
        super().__init__(message)


class BlockNotVouched(UnverifiedAnswer):
    """Something (a log, a receipt) claims block ``block`` with hash ``block_hash``, but the header
    source vouches for ``vouched_hash`` there (None: for no block at that height yet, it is beyond the
    trusted head ``head``). A follower must not apply it."""

    def __init__(
        self,
        message: str | None = None,
        *,
        block: int | None = None,
        block_hash: str | None = None,
        vouched_hash: str | None = None,
        head: int | None = None,
    ):
        self.block = block
        self.block_hash = block_hash
        self.vouched_hash = vouched_hash
        self.head = head
        if message is None:
            if vouched_hash is None:
                message = (
                    f"block {block} ({block_hash}) is beyond the newest block the header source vouches for ({head})"
                )
            else:
                message = f"block {block} is {vouched_hash} by the header source, not {block_hash}"
        super().__init__(message)


class HeaderStale(UnverifiedAnswer):
    """The header the providers vouch for (``block``, chain time ``timestamp``) is ``age`` seconds old by
    the verifier's clock (``now``), more than ``max_age``: a withheld head (providers serving an old
    block as their latest), or a chain that stopped. ``heads`` maps each provider to the head it
    reported (number and timestamp), or why it reported none."""

    def __init__(
        self,
        message: str | None = None,
        *,
        block: int | None = None,
        timestamp: int | None = None,
        now: int | None = None,
        age: int | None = None,
        max_age: float | None = None,
        heads: dict[str, str] | None = None,
    ):
        self.block = block
        self.timestamp = timestamp
        self.now = now
        self.age = age
        self.max_age = max_age
        self.heads = dict(heads or {})
        if message is None:
            said = "; ".join(f"{provider}: {head}" for provider, head in self.heads.items())
            message = (
                f"the newest header the providers vouch for (block {block}, chain time {timestamp}) is {age} s "
                f"old at {now}, more than max_age {max_age} s" + (f"; heads: {said}" if said else "")
            )
        super().__init__(message)


class HeaderBehind(UnverifiedAnswer):
    """The proven state at block ``block`` reads token ``chain_token`` for ``resource``, below the mark
    ``mark`` accepted earlier, but the header source's block is older than block ``floor``, at which
    that mark (or another of the store's) was proven: a header source whose head moved back (a
    provider that fell behind or went down changed which head is the k-th highest) is not evidence
    that the chain lost history. Nothing was judged and nothing recorded; retry. (``floor`` is None
    when the store cannot tell at which block its mark was proven: a fenced SQL table. Then a real
    rollback reads the same, and stays refused.)"""

    def __init__(
        self,
        message: str | None = None,
        *,
        block: int | None = None,
        floor: int | None = None,
        chain_token: int | None = None,
        mark: int | None = None,
        resource: str | None = None,
    ):
        self.block = block
        self.floor = floor
        self.chain_token = chain_token
        self.mark = mark
        self.resource = resource
        if message is None:
            where = f" of {resource!r}" if resource is not None else ""
            if floor is not None:
                message = (
                    f"block {block}, the header source's, reads token {chain_token}{where}, below the mark {mark}; "
                    f"it is older than block {floor}, at which this store proved its marks: the source's head moved "
                    "back (a provider behind or down); nothing judged, retry"
                )
            else:
                message = (
                    f"block {block}, the header source's, reads token {chain_token}{where}, below the mark {mark} "
                    "this table accepted: the source's head is behind the block that mark was proven at (a "
                    "provider behind or down), or the chain rolled back; nothing judged or written"
                )
        super().__init__(message)


class ExtraNotInstalled(ChainfenceError, ImportError):
    """An optional part of chainfence needs packages that are not installed.

    The message names the command that installs them
    (``pip install 'chainfence[tester]'`` for the embedded chain); ``extra``
    is the extra's name and ``missing`` the module that failed to import.
    """

    def __init__(self, extra: str, *, feature: str, missing: str | None = None):
        super().__init__(
            f"{feature} needs the [{extra}] extra: pip install 'chainfence[{extra}]'"
            + (f" (no module {missing!r})" if missing else "")
        )
        self.extra = extra
        self.feature = feature
        self.missing = missing


# ---------------------------------------------------------------------------
# Guard store
# ---------------------------------------------------------------------------


class GuardError(ChainfenceError):
    """A guard's store cannot be used."""


class GuardForked(GuardError):
    """An ``exclusive`` guard was used in a process forked from the one that opened it.

    An exclusive guard answers from memory; a forked child holds a frozen copy
    of that memory (and of the store's lock) while the parent moves on, so the
    child could accept a token the parent already superseded. Open a new
    guard in the child (gunicorn: in ``post_fork``, not before ``--preload``).
    """


class GuardStoreMismatch(GuardError):
    """The store file belongs to another registry (chain id or address differ).

    Marks are only meaningful against the registry that issued the tokens;
    opening another registry's store would let its marks fence the wrong
    token space.
    """


# ---------------------------------------------------------------------------
# Audit index
# ---------------------------------------------------------------------------


class AuditIndexError(ChainfenceError):
    """The audit index (:mod:`chainfence.audit.index`) cannot answer."""


class AuditIndexMismatch(AuditIndexError):
    """The index file belongs to another registry (chain id or address differ), or is not an index.

    Its leases describe another token space: answering from it would name the
    wrong holders. Use another file (or delete this one and sync anew).
    """


class AuditIndexDiffers(AuditIndexError):
    """``verify``: the index and the chain disagree; ``differences`` lists what differs."""

    def __init__(self, message: str = "", *, differences: list[str] | None = None):
        super().__init__(message)
        self.differences = list(differences or [])


class LeaseLost(ChainfenceError):
    """The lease ``token`` on ``resource`` can no longer be trusted to be held: stop the work.

    Raised by :meth:`Lease.check <chainfence.Lease.check>` and by the exit
    of :meth:`Lease.keep <chainfence.Lease.keep>`. ``why`` says how it was lost, in the words of
    :mod:`chainfence.endings` (one model for every part):

    - ``"deadline"``: no renewal was confirmed before the local safe deadline
      (the lease may still be live on-chain: it is given up *before* it can
      have ended there);
    - ``"expired"``: the lease's time ran out on-chain;
    - ``"released"``: the lease was released;
    - ``"completed"``: the claimed work item was completed;
    - ``"superseded"``: a higher token was issued for the resource (the
      holder's own reacquisition, or a successor whose reason could not be read);
    - ``"revoked"``: the namespace's admin revoked the lease;
    - ``"granted"``: the namespace's admin granted the resource to another lease;
    - ``"rolled_back"``: the chain lost history below what was seen;
    - ``"error"``: the renewer failed in a way that is not a chain error.

    The error that revealed the loss, if any, is the ``__cause__``.
    """

    #: Every ``why`` (``chainfence.endings.WHYS``; a test keeps the two equal).
    REASONS: ClassVar[tuple[str, ...]] = (
        "expired",
        "released",
        "completed",
        "superseded",
        "revoked",
        "granted",
        "rolled_back",
        "deadline",
        "error",
    )

    def __init__(self, *, resource: str, token: int, why: str, detail: str = ""):
        self.resource = resource
        self.token = token
        self.why = why
        self.detail = detail
        message = f"lost the lease of token {token} on {resource!r} ({why})"
        super().__init__(message + (f": {detail}" if detail else ""))


class LeaseSetLost(LeaseLost):
    """A lease set (:meth:`Registry.acquire_many <chainfence.Registry.acquire_many>`) can no longer be
    trusted to be held whole: ``resource``, ``token`` and ``why`` name the member that ended (for a
    local end, ``deadline`` or ``error``, the first member: the whole set is given up).

    ``ended`` maps each member known to have ended to how (a ``LeaseLost.why``); ``released`` names
    the members :meth:`LeaseSet.release <chainfence.LeaseSet.release>` released after all (it
    releases what it still can).
    """

    def __init__(
        self,
        *,
        resource: str,
        token: int,
        why: str,
        detail: str = "",
        ended: dict[str, str] | None = None,
        released: tuple[str, ...] = (),
    ):
        super().__init__(resource=resource, token=token, why=why, detail=detail)
        self.ended = dict(ended) if ended is not None else {resource: why}
        self.released = tuple(released)


class FenceBroken(ChainfenceError, RuntimeError):
    """A statement ended a fenced SQL transaction before the fence did.

    ``INSERT OR ROLLBACK`` on a conflict, ``RAISE(ROLLBACK)`` in a trigger,
    ``executescript`` (which commits first), a ``COMMIT``/``ROLLBACK``/``BEGIN``
    of the application's: after any of these the statements that follow
    would no longer run inside the transaction that holds the fence, so they
    are refused and nothing more is committed. ``resource`` and ``token`` say
    which fence; ``reason`` what ended it.
    """

    def __init__(
        self, message: str, *, resource: str | None = None, token: int | None = None, reason: str | None = None
    ):
        self.resource = resource
        self.token = token
        self.reason = reason
        super().__init__(message)


# ---------------------------------------------------------------------------
# Holder-signed requests
# ---------------------------------------------------------------------------


class RequestRejected(ChainfenceError):
    """A holder-signed request (:class:`~chainfence.FencedRequest`) failed verification.

    ``status`` is the HTTP status a service should answer with.
    """

    status: ClassVar[int] = 403


class MalformedRequest(RequestRejected, ValueError):
    """A fenced request is missing a field, or a field does not parse."""

    status = 400


class PayloadMismatch(MalformedRequest):
    """The payload's digest is not the one the holder signed."""


class InvalidSignature(RequestRejected):
    """The signature is not the named holder's (bad, foreign, or for another registry or chain)."""

    status = 401


class RequestExpired(RequestRejected):
    """The request's deadline has passed."""

    status = 401


class SignerNotHolder(RequestRejected):
    """The request is validly signed, by someone who does not hold its token."""

    status = 403


class RequestMisdirected(RequestRejected):
    """The request is genuine but was signed for something else than what it is used for."""

    status = 403


class ResourceMismatch(RequestMisdirected):
    """Signed for another resource than the one this route is fenced by."""


class ActionMismatch(RequestMisdirected):
    """Signed for another action (HTTP method, path and query, or application action)."""


class AudienceMismatch(RequestMisdirected):
    """Signed for another service (audience) than the one verifying it."""


class ReplayedRequest(RequestRejected):
    """This exact request was accepted before; a request is accepted once."""

    status = 409
