"""Every error chainfence raises, in one tree.

::

    ChainfenceError
    ├── InvalidInput (ValueError)          bad argument (``argument``, ``value``); nothing sent or written
    │   ├── InvalidResourceName            empty, too long, not a str
    │   ├── InvalidTtl                     0, negative, not an int, above the registry's max
    │   │   └── InvalidMaxTtl              deployment: max ttl out of range
    │   ├── InvalidHolder                  grant: the zero address
    │   ├── InvalidClaimItems              claim: no items, too many, or duplicates
    │   ├── InvalidNamespace               a namespace prefix: empty, too long, contains '/', a mis-cased address
    │   ├── InvalidPolicy                  a namespace policy: maxTtl or lockDelay above the registry's max, no field
    │   ├── InvalidAssignments             deployment: namespaces and admins of different lengths
    │   ├── DuplicateResource              a LeaseSet lists a resource twice
    │   ├── UnsortedResources              renewMany/releaseMany: ids not in increasing order
    │   └── StaleCursor                    an audit listing's cursor whose row is gone (a reorg): list again
    ├── LeaseError                         the registry refused a lease operation
    │   ├── LeaseHeld                      someone else holds a live lease
    │   ├── NotHolder                      the caller is not the holder of that token
    │   ├── NothingToClaim                 claim: every item is done or held live by others
    │   ├── NotAdmitted (PermissionError)  the namespace's allowlist, or a guard's admission, refuses the holder
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
    │   │   └── LogRangeRefused            the provider caps eth_getLogs: a narrower range may pass
    │   ├── WrongChain                     the node serves another chain than expected
    │   ├── ChainRolledBack                the chain's history went back below tokens already seen
    │   ├── HistoryUnsettled               the audit sync: a provider that keeps changing its history
    │   ├── LogsIncomplete                 a follower waits: the logs answered lack (or invent) a block's logs
    │   ├── ContractNotFound               no FencingRegistry code at that address
    │   ├── InsufficientFunds              the sender cannot pay for gas
    │   ├── TransactionInDoubt             a transaction sent, not known to be final: its hashes and nonce
    │   │   ├── TransactionTimeout (TimeoutError)  not mined in time; cancelled, so it never will be
    │   │   ├── OutcomeUnknown             sent, but whether it landed could not be established
    │   │   └── NotConfirmed (TimeoutError)  mined, but not k blocks deep in time
    │   ├── RelayerRefused                 a relayer would not take a signed intent (its status and reason)
    │   ├── TransactionFailed              mined with status 0, no decodable reason
    │   ├── UnknownRevert                  reverted with data no error of ours explains
    │   ├── UnknownAccount (LookupError)   no key to sign for that address
    │   ├── NotSupported                   e.g. advance_time on a chain that is not a dev chain
    │   │   ├── ProofsNotServed            proven mode: the provider does not serve eth_getProof
    │   │   └── ForkNotSupported           deployment: the node's EVM predates the fork the registry is built for
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
    │   └── LeaseSetLost                   a member of a LeaseSet ended (which, and how)
    ├── ExtraNotInstalled (ImportError)    an optional part needs an extra: pip install 'chainfence[EXTRA]'
    ├── FenceBroken (RuntimeError)         a statement ended a fenced SQL transaction early
    ├── CommandNotRun                      `chainfence lock`: the command could not be started; nothing ran
    │   └── CommandNotFound                `chainfence lock`: no such command
    └── RequestRejected                    a holder-signed request (or signed intent) failed verification
        ├── MalformedRequest (ValueError)  missing or unparsable fields, a payload not the signed one
        ├── InvalidSignature               not signed by the holder it names
        ├── RequestExpired                 past its deadline
        ├── SignerNotHolder                signed by someone who does not hold the token
        ├── RequestMisdirected             signed for another resource, action or audience (``field``)
        └── ReplayedRequest                seen before
            └── IntentStale                a signed intent's guard is gone: it landed, or the state moved on

Errors are data: each class declares its fields as annotations, and :class:`ChainfenceError`
makes from them the keyword constructor, the ``repr``
(``StaleToken(resource='r', token=3, current_token=5)``), the pickling and :meth:`~ChainfenceError.details`.
A class's ``template`` renders its message from its fields (a message given as the one positional
argument replaces it). Each class carries ``exit_code``, what ``chainfence`` exits with (the README's
table), and ``http_status``, what a service answers with (:class:`~chainfence.integrations.asgi.FencingMiddleware`);
a class not named here takes its parent's::

    exit_code    1 ChainfenceError; 2 InvalidInput, ExtraNotInstalled; 3 LeaseHeld; 4 TokenNotCurrent,
                 NotHolder, NotLive; 5 NodeUnreachable, WrongChain, ChainRolledBack, HistoryUnsettled,
                 ContractNotFound, AnvilNotFound; 6 TransactionInDoubt; 7 LeaseLost; 9 NamespaceError, NotAdmitted;
                 10 LockDelayed; 11 AuditIndexMismatch; 12 AuditIndexDiffers; 13 UnverifiedAnswer, ProofsNotServed;
                 126 CommandNotRun; 127 CommandNotFound
    http_status  500 ChainfenceError; 400 InvalidInput, MalformedRequest; 401 InvalidSignature, RequestExpired;
                 403 NotHolder, NotAdmitted, NamespaceError, Unauthorized, RequestRejected; 409 LeaseError,
                 LeaseLost, ReplayedRequest; 503 ChainError, GuardError

Errors raised by the contract (its custom errors) map one-to-one onto classes
here through :func:`_contract_error`; :mod:`chainfence._node.reverts` decodes a
revert, whatever provider raised it, into one of them. Users never see raw
web3 or eth-tester exceptions: those are chained as ``__cause__``.

A service rejecting work needs one clause: ``except TokenNotCurrent`` (and
``except RequestRejected`` for holder-signed requests), plus ``except
NotAdmitted`` when its guard has an admission policy (:class:`~chainfence.Admission`).
"""

from __future__ import annotations

import string
import warnings
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from ._core.times import chain_time

__all__ = [
    "AnvilNotFound",
    "AuditIndexDiffers",
    "AuditIndexError",
    "AuditIndexMismatch",
    "BlockNotVouched",
    "ChainError",
    "ChainRolledBack",
    "ChainfenceError",
    "CommandNotFound",
    "CommandNotRun",
    "ContractNotFound",
    "DuplicateResource",
    "ExtraNotInstalled",
    "FenceBroken",
    "ForkNotSupported",
    "GuardError",
    "GuardForked",
    "GuardStoreMismatch",
    "HeaderBehind",
    "HeaderInvalid",
    "HeaderStale",
    "HeadersDisagree",
    "HistoryUnsettled",
    "InsufficientFunds",
    "IntentStale",
    "InvalidAssignments",
    "InvalidClaimItems",
    "InvalidHolder",
    "InvalidInput",
    "InvalidMaxTtl",
    "InvalidNamespace",
    "InvalidPolicy",
    "InvalidResourceName",
    "InvalidSignature",
    "InvalidTtl",
    "LeaseCompleted",
    "LeaseError",
    "LeaseExpired",
    "LeaseHeld",
    "LeaseLost",
    "LeaseReleased",
    "LeaseRevoked",
    "LeaseSetLost",
    "LockDelayed",
    "LogRangeRefused",
    "LogsIncomplete",
    "MalformedReply",
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
    "ProofInvalid",
    "ProofsNotServed",
    "ProviderUnavailable",
    "RegistryOverflow",
    "RelayerRefused",
    "ReplayedRequest",
    "RequestExpired",
    "RequestMisdirected",
    "RequestRejected",
    "RpcError",
    "SignerNotHolder",
    "StaleCursor",
    "StaleToken",
    "TokenNotConfirmed",
    "TokenNotCurrent",
    "TransactionFailed",
    "TransactionInDoubt",
    "TransactionTimeout",
    "Unauthorized",
    "UnknownAccount",
    "UnknownRevert",
    "UnknownToken",
    "UnsortedResources",
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


_REQUIRED: Any = object()  # a field without a default: the constructor needs it

#: Fields that are not details (nor shown by repr): raw provider objects.
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


class _Template(string.Formatter):
    """Renders a class's ``template`` from the error's attributes; ``{expires_at:time}`` shows chain time
    as a date."""

    def get_value(self, key: int | str, args: Any, kwargs: Any) -> Any:
        return getattr(kwargs["error"], str(key))

    def format_field(self, value: Any, format_spec: str) -> str:
        return chain_time(value) if format_spec == "time" else super().format_field(value, format_spec)


_TEMPLATE = _Template()


def _rebuild(cls: type[ChainfenceError], args: tuple[Any, ...], state: dict[str, Any]) -> ChainfenceError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class _Signature:
    """``inspect.signature(cls)`` of an error: its generated constructor's, made when asked (``inspect``
    is not imported before: a per-task command never asks)."""

    def __get__(self, instance: Any, owner: type[ChainfenceError]) -> Any:
        import inspect

        keyword = inspect.Parameter.KEYWORD_ONLY
        return inspect.Signature(
            [inspect.Parameter("message", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
            + [
                inspect.Parameter(name, keyword, **({} if default is _REQUIRED else {"default": default}))
                for name, default in owner._fields.items()
            ]
        )


class ChainfenceError(Exception):
    """Base of every error chainfence raises.

    ``Error(message=None, **fields)``: the fields are the class's annotations (a field without a
    default is required); without ``message``, the class's ``template`` renders one from them.
    """

    #: Name of the contract custom error this class decodes, if any.
    solidity_error: ClassVar[str | None] = None
    #: What ``chainfence`` exits with on this error (the README's table of exit codes).
    exit_code: ClassVar[int] = 1
    #: The HTTP status a service answers with (:class:`~chainfence.integrations.asgi.FencingMiddleware` does).
    http_status: ClassVar[int] = 500
    #: The message, ``str.format`` style over the error's attributes (``{at:time}``: a chain time);
    #: none: the first paragraph of the class's docstring.
    template: ClassVar[str] = ""
    #: field -> its default (``_REQUIRED`` for none), from the annotations of the class and its bases.
    _fields: ClassVar[dict[str, Any]] = {}
    __signature__: ClassVar[Any] = _Signature()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = dict(cls._fields)
        for name, kind in cls.__annotations__.items():  # the class's own, in order
            if not str(kind).startswith("ClassVar"):
                fields[name] = cls.__dict__.get(name, fields.get(name, _REQUIRED))
        cls._fields = fields

    def __init__(self, message: str | None = None, **fields: Any) -> None:
        known = type(self)._fields
        if "provider" in fields or "providers" in fields:
            _renamed(type(self), fields)
        unknown = fields.keys() - known.keys()
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
        for name, default in known.items():
            value = fields.get(name, default)
            if value is _REQUIRED:
                raise TypeError(f"{type(self).__name__}() missing keyword argument: {name!r}")
            self.__dict__[name] = value
        super().__init__(*((message,) if message else ()))
        self.__post_init__()

    def __post_init__(self) -> None:
        """Derive or normalise fields after the constructor set them (a class overrides it)."""

    @classmethod
    def from_revert(cls, **fields: Any) -> ChainfenceError:
        """Build the error from the decoded arguments of its Solidity error."""
        return cls(**fields)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self._message()

    def _message(self) -> str:
        if not self.template:  # the docstring's first paragraph
            return " ".join((type(self).__doc__ or "").split("\n\n")[0].split()).replace("``", "")
        return _TEMPLATE.vformat(self.template, (), {"error": self})

    def __repr__(self) -> str:
        shown = [repr(self.args[0])] if self.args else []
        for name, default in type(self)._fields.items():
            value = self.__dict__.get(name)
            if name in _NOT_DETAILS or (default is not _REQUIRED and (value is default or _same(value, default))):
                continue
            shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def details(self) -> dict[str, Any]:
        """The error's fields as JSON-ready values, with its name and message.

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

    @property
    def status(self) -> int:
        """Deprecated (until 0.3): ``http_status``."""
        warnings.warn(f"{type(self).__name__}.status is deprecated: use http_status", DeprecationWarning, stacklevel=2)
        return self.http_status

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickles ``args`` only; errors cross process boundaries with every field.
        return (_rebuild, (type(self), self.args, self.__dict__.copy()))


def _renamed(cls: type[ChainfenceError], fields: dict[str, Any]) -> None:
    """0.1's keywords ``provider``/``providers`` of the proven mode's errors: their fields ``source``/``sources``."""
    for old, new in (("provider", "source"), ("providers", "sources")):
        if old in fields and new in cls._fields:
            warnings.warn(f"{cls.__name__}({old}=...) is deprecated: use {new}=", DeprecationWarning, stacklevel=3)
            fields[new] = fields.pop(old)


def _same(value: Any, default: Any) -> bool:
    try:
        return type(value) is type(default) and bool(value == default)
    except Exception:
        return False


def _bounded(value: Any) -> Any:
    """``value`` for a field of an error about it: as it is if plain, else its repr, cut at 80 characters."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    shown = value if isinstance(value, str) else repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


class InvalidInput(ChainfenceError, ValueError):
    """An argument is malformed or out of range. Nothing was sent or written.

    ``argument`` names it when one is to blame (``"token"``, ``"wait"``, ``"url"``, ``"progress"``,
    ``"limit"``, ``"after"`` ...); ``value`` is what was given (its repr, cut short, when not a plain
    value; never a URL, where hosted providers put API keys).
    """

    exit_code = 2
    http_status = 400
    template = "invalid {argument}: {value!r}"
    argument: str | None = None
    value: Any = None

    def __post_init__(self) -> None:
        self.value = _bounded(self.value)


@_contract_error("FencingRegistryInvalidName")
class InvalidResourceName(InvalidInput):
    """A resource name must be a str of 1 to 128 bytes of UTF-8."""

    template = "resource name must be 1 to {max_length} bytes of UTF-8, got {length} bytes"
    length: int | None = None
    max_length: int | None = None


@_contract_error("FencingRegistryInvalidTtl")
class InvalidTtl(InvalidInput):
    """A ttl must be an int number of seconds from 1 to the registry's maximum ``max_ttl``."""

    template = "ttl must be 1 to {max_ttl} seconds, got {ttl!r}"
    ttl: Any = None
    max_ttl: int | None = None


@_contract_error("FencingRegistryInvalidMaxTtl")
class InvalidMaxTtl(InvalidTtl):
    """A registry's maximum ttl (``max_ttl``, as given) must be 1 to 2**32 - 1 seconds."""

    template = "max_ttl must be 1 to 4294967295 seconds, got {max_ttl!r}"


@_contract_error("FencingRegistryInvalidHolder")
class InvalidHolder(InvalidInput):
    """grant: a lease's holder cannot be the zero address."""

    template = "a lease cannot be granted to {holder}"
    holder: str | None = None


@_contract_error("FencingRegistryInvalidItems")
class InvalidClaimItems(InvalidInput):
    """A claim lists 1 to ``max_count`` distinct items; ``count`` were given."""

    template = "a claim lists 1 to {max_count} items, got {count}"
    count: int | None = None
    max_count: int | None = None


@_contract_error("FencingRegistryInvalidNamespace")
class InvalidNamespace(InvalidInput):
    """A namespace is a name's part before its first ``/``: 1 to 127 bytes, printable, no ``/``; one that
    looks like an address must be an address namespace (lowercase), and the deployer cannot assign one
    shaped like an address (42 bytes starting ``0x``: those are their address's)."""

    template = "a namespace must be 1 to {max_length} bytes with no '/', got {length} bytes"
    length: int | None = None
    max_length: int | None = None


@_contract_error("FencingRegistryInvalidPolicy")
class InvalidPolicy(InvalidInput):
    """A namespace policy's ``max_ttl`` and ``lock_delay`` must be 0 to the registry's maximum ttl, and a
    change must name at least one field."""

    template = (
        "a namespace policy needs max_ttl and lock_delay from 0 to {registry_max_ttl} seconds, "
        "got max_ttl={max_ttl!r} lock_delay={lock_delay!r}"
    )
    max_ttl: Any = None
    lock_delay: Any = None
    registry_max_ttl: int | None = None


@_contract_error("FencingRegistryInvalidAssignments")
class InvalidAssignments(InvalidInput):
    """Deployment: one admin per assigned namespace."""

    template = "{prefixes} namespaces but {admins} admins"
    prefixes: int | None = None
    admins: int | None = None


@_contract_error("FencingRegistryDuplicateResource")
class DuplicateResource(InvalidInput):
    """A set of leases (:meth:`LeaseSet.acquire <chainfence.LeaseSet.acquire>`) lists a resource twice."""

    template = "resource {where} is listed twice"
    resource_id: bytes | None = None
    resource: str | None = None

    @property
    def where(self) -> str:
        return repr(self.resource) if self.resource is not None else "0x" + (self.resource_id or b"").hex()


@_contract_error("FencingRegistryUnsortedResources")
class UnsortedResources(InvalidInput):
    """``renewMany`` and ``releaseMany`` take their resources in strictly increasing order of ids: the
    registry checks the order as it goes (one comparison an item, where checking every pair for repeats
    cost it 205 gas a pair), and ``resource_id`` came right after ``previous``, a higher id. The SDK sorts
    every set it sends: only a set sent another way meets this."""

    template = "resource 0x{resource_hex} is listed after 0x{previous_hex}, a higher id: sort the set by id"
    resource_id: bytes | None = None
    previous: bytes | None = None

    @property
    def resource_hex(self) -> str:
        return (self.resource_id or b"").hex()

    @property
    def previous_hex(self) -> str:
        return (self.previous or b"").hex()


class StaleCursor(InvalidInput):
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
    the fields, so attaching the name later (the chain only knows the hash)
    updates it.
    """

    http_status = 409
    template = "lease operation refused on {where}"
    resource: str | None = None
    resource_id: bytes | None = None

    @property
    def where(self) -> str:
        """The resource as a message names it: its name, else its id."""
        if self.resource is not None:
            return repr(self.resource)
        if self.resource_id is not None:
            return "resource 0x" + self.resource_id.hex()
        return "resource"

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

    exit_code = 3
    template = "{where} is held by {holder} with token {token} until {expires_at:time}"
    holder: str
    token: int
    expires_at: int


@_contract_error("FencingRegistryNothingToClaim")
class NothingToClaim(LeaseError):
    """Every one of the ``count`` items of the workset is done or held live by someone else.

    ``resource_id`` is the workset's id (``keccak256(workset)``); ``resource`` its name when known.
    """

    template = "nothing to claim in workset {where}: all {count} items are done or held by others"
    count: int

    @classmethod
    def from_revert(cls, *, workset: bytes, count: int) -> NothingToClaim:  # type: ignore[override]
        return cls(count=count, resource_id=workset)


@_contract_error("FencingRegistryNotHolder", "FencedStoreNotHolder")
class NotHolder(LeaseError):
    """The caller (``account``) is not the holder of ``token``; ``holder`` is."""

    exit_code = 4
    http_status = 403
    template = "{account} does not hold token {token} on {where}: {holder} does"
    token: int
    account: str
    holder: str


@_contract_error("FencingRegistryNotAdmitted")
class NotAdmitted(LeaseError, PermissionError):
    """``holder`` is not admitted: by the allowlist of ``namespace`` (the id; ``namespace_name`` the
    prefix when known), which requires admitted holders, refused by the registry (acquire, grant); or
    by a guard's admission (:class:`~chainfence.Admission`), which accepts only some holders of the
    ``token`` it judged: ``admission`` says which list refused it, ``"local"`` (the service's own list)
    or ``"on-chain"`` (the namespace's allowlist). A guard recorded nothing: its mark did not move.
    """

    exit_code = 9
    http_status = 403
    holder: str
    namespace: bytes | None = None
    namespace_name: str | None = None
    token: int | None = None
    admission: str | None = None

    def with_resource(self, name: str) -> LeaseError:
        """Attach the resource name; its namespace's prefix comes with it."""
        self.resource = name
        if self.namespace_name is None and "/" in name:
            self.namespace_name = name.split("/", 1)[0]
        return self

    def _message(self) -> str:
        if self.admission == "local":
            refused = "this service's list of admitted holders"
        elif self.admission is not None:
            refused = f"the on-chain allowlist of namespace {self.namespace_name!r}"
        else:
            where = (
                repr(self.namespace_name) if self.namespace_name is not None else f"0x{(self.namespace or b'').hex()}"
            )
            target = f" ({self.where})" if self.resource is not None or self.resource_id is not None else ""
            return f"{self.holder} is not admitted in namespace {where}{target}"
        return f"{self.holder}, holder of token {self.token} on {self.where}, is not in {refused}"


@_contract_error("FencingRegistryLockDelay")
class LockDelayed(LeaseError):
    """The lease of ``holder`` expired and its namespace's lock-delay runs until chain time ``until``:
    nobody but ``holder`` may acquire the resource before then. Retry at or after ``until``."""

    exit_code = 10
    template = "{where} is in its lock-delay until {until:time} (the lease of {holder} expired; only it may acquire before then)"
    holder: str
    until: int


@_contract_error("FencingRegistryNotLive")
class NotLive(LeaseError):
    """revoke: the resource's latest lease (``token``, 0 if never held) is not live: nothing to revoke."""

    exit_code = 4
    template = "{where} has no live lease to revoke (latest token {token})"
    token: int


class TokenNotCurrent(LeaseError):
    """``token`` is not the resource's current, live token: reject the work.

    ``current_token`` is the token the registry holds for the resource (or,
    from a guard, the highest token it has accepted); ``token`` itself when
    it is the latest but no longer live.
    """

    exit_code = 4
    template = "token {token} is not current for {where}"
    token: int
    current_token: int = None  # type: ignore[assignment]  # given, or ``token``

    def __post_init__(self) -> None:
        if self.current_token is None:
            self.current_token = self.token


@_contract_error("FencingRegistryStaleToken", "FencedStoreStaleToken")
class StaleToken(TokenNotCurrent):
    """``token`` is below ``current_token``: superseded, its holder lost the lease.

    Raised by the registry (renew/release/check with an old token) and by a
    guard (a token lower than one it has already accepted for the resource).
    The registry stores only the latest token of each resource, so a lower
    token that was issued for another resource reads as stale too.
    """

    template = "token {token} for {where} is stale: token {current_token} superseded it"


@_contract_error("FencingRegistryUnknownToken")
class UnknownToken(TokenNotCurrent):
    """``token`` is 0 or above the resource's latest token: never issued for it (forged, or another resource's)."""

    template = "token {token} was never issued for {where} (its latest token is {current_token})"


@_contract_error("FencingRegistryLeaseExpired")
class LeaseExpired(TokenNotCurrent):
    """``token`` is the resource's latest, but its lease expired at ``expired_at``.

    The holder lost the lease to time: acquire again for a new token.
    ``no_block_since`` is True when no block was mined since the lease ran
    out: the latest block still shows it live, but chain time
    (``judged_at``: the pending block's time, or the verifier's clock) is
    past its expiry, and the next transaction would find it expired.
    """

    expired_at: int
    judged_at: int | None = None
    no_block_since: bool = False

    def _message(self) -> str:
        message = f"the lease of token {self.token} on {self.where} expired at {chain_time(self.expired_at)}"
        if self.no_block_since:
            message += (
                f"; no block since (chain time now {chain_time(self.judged_at)}, the latest block still shows it live)"
            )
        return message


@_contract_error("FencingRegistryLeaseReleased")
class LeaseReleased(TokenNotCurrent):
    """``token`` is the resource's latest, but its holder released it."""

    template = "the lease of token {token} on {where} was released"


@_contract_error("FencingRegistryLeaseCompleted")
class LeaseCompleted(LeaseReleased):
    """``token`` is the claimed work item's latest, but its claimant completed the item: done for good.

    A :class:`LeaseReleased` ("you closed it"), told apart so that every part can say which end it was.
    """

    template = "the claim of token {token} on {where} was completed: the item is done"


@_contract_error("FencingRegistryLeaseRevoked")
class LeaseRevoked(TokenNotCurrent):
    """``token`` is the resource's latest, but the admin of its namespace revoked it: stop the work."""

    template = "the lease of token {token} on {where} was revoked by its namespace's admin"


class TokenNotConfirmed(TokenNotCurrent):
    """``token`` is current at the chain head but its acquisition is not yet
    ``confirmations`` blocks deep: it may still vanish in a reorg. Retry later."""

    template = "token {token} for {where} is not yet {confirmations} blocks deep; retry once it is confirmed"
    confirmations: int


@_contract_error("FencingRegistryUint48Overflow")
class RegistryOverflow(ChainfenceError, OverflowError):
    """A token (48 bits) or an expiry (40 bits: until the year 36,812) no longer fits the registry's storage."""

    template = "value {value} does not fit the registry's storage (tokens 48 bits, expiries 40)"
    value: int | None = None


# ---------------------------------------------------------------------------
# A namespace refused the caller
# ---------------------------------------------------------------------------


class NamespaceError(ChainfenceError, PermissionError):
    """A namespace refused the caller. ``namespace`` is its id (``keccak256(prefix)``), ``namespace_name``
    the prefix when the SDK knows it."""

    exit_code = 9
    http_status = 403
    template = "{where} refused the caller"
    namespace: bytes | None = None
    namespace_name: str | None = None

    @property
    def where(self) -> str:
        if self.namespace_name is not None:
            return f"namespace {self.namespace_name!r}"
        return "namespace 0x" + (self.namespace or b"").hex()

    def with_namespace(self, name: str) -> NamespaceError:
        """Attach the namespace prefix the caller used; returns ``self``."""
        self.namespace_name = name
        return self


@_contract_error("FencingRegistryNamespaceTaken")
class NamespaceTaken(NamespaceError):
    """Deployment: the namespace is assigned twice (first to ``admin``)."""

    template = "{where} already has an admin: {admin}"
    admin: str | None = None


@_contract_error("FencingRegistryNotNamespaceAdmin")
class NotNamespaceAdmin(NamespaceError):
    """``account`` is not the admin of the namespace (``admin``; the zero address when nobody
    administers it, which includes names without ``/``)."""

    account: str | None = None
    admin: str | None = None

    def _message(self) -> str:
        if self.admin is None or int(self.admin, 16) == 0:
            return f"{self.account} is not the admin of {self.where}: nobody administers it"
        return f"{self.account} is not the admin of {self.where}: {self.admin} is"


@_contract_error("FencingRegistryNotPendingAdmin")
class NotPendingAdmin(NamespaceError):
    """``account`` may not accept the namespace: ``pending_admin`` (zero: no offer) may."""

    template = "{account} is not the pending admin of {where} (pending: {pending_admin})"
    account: str | None = None
    pending_admin: str | None = None


@_contract_error("AgentWalletUnauthorized")
class Unauthorized(ChainfenceError, PermissionError):
    """A contract refused the caller (e.g. only the owner may make an AgentWallet act)."""

    http_status = 403
    template = "{account} is not allowed to do that"
    account: str | None = None


# ---------------------------------------------------------------------------
# The chain or node failed us
# ---------------------------------------------------------------------------


class ChainError(ChainfenceError):
    """Talking to the chain failed, or it answered something we cannot use.

    ``lease`` is set when an acquisition landed but a step after it failed: the lease, never to be
    forgotten.
    """

    http_status = 503
    lease: Any = None


class NodeUnreachable(ChainError, ConnectionError):
    """No JSON-RPC node answers at the URL (or it stopped answering). ``reason`` says why in a few
    words; ``maybe_delivered`` is False when the request cannot have left."""

    exit_code = 5
    reason: str | None = None
    maybe_delivered: bool = True


class ProviderUnavailable(NodeUnreachable):
    """A provider of the proven mode (a header source's, or the one that serves proofs) did not answer.

    ``source`` names it (its URL without credentials, path or query);
    ``sources`` lists every one that failed when a quorum could not be
    reached (``needed`` answers were needed, ``answered`` came). Nothing was
    judged: a guard moves no mark on it.
    """

    source: str | None = None
    sources: tuple[str, ...] = ()
    needed: int | None = None
    answered: int | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        self.sources = tuple(self.sources) or ((self.source,) if self.source is not None else ())

    def _message(self) -> str:
        if self.needed is not None:
            message = f"{self.answered} of the header providers answered, {self.needed} are needed; down: "
            message += ", ".join(self.sources)
        else:
            message = f"provider {self.source} did not answer"
        return message + (f" ({self.detail})" if self.detail else "")


class MalformedReply(NodeUnreachable):
    """The node answered ``method`` with a reply whose ``field`` does not read as what it must be
    (``value``: what it sent, cut short; ``reason``: what is wrong with it), e.g. a receipt's
    ``gasUsed`` that is not a quantity or a log's ``transactionHash`` that is not 32 bytes: a provider
    that lies or is broken. Refused where the reply is read, before any of it is used. As a reply out of
    bounds, it is no usable answer: a sender waiting for a receipt goes on asking, as it does of a node
    that does not answer, and reports :class:`OutcomeUnknown` (with the hashes) if it never reads."""

    template = "the node answered {method} with a malformed {field}: {reason} ({value!r})"
    method: str | None = None
    field: str | None = None
    value: Any = None

    def __post_init__(self) -> None:
        self.value = _bounded(self.value)


class RpcError(ChainError):
    """The node answered a JSON-RPC request with an error that is not a revert.

    ``code`` and ``rpc_message`` are the JSON-RPC error's (``code`` is None
    when the provider did not give one); ``method`` is the request's.
    """

    template = "{method} failed: {rpc_message}"
    method: str | None = None
    code: int | None = None
    rpc_message: str = ""


class LogRangeRefused(RpcError):
    """The provider refused an ``eth_getLogs`` request for its block range or result size; a narrower
    range may pass (the followers split theirs)."""


class WrongChain(ChainError):
    """The node serves another chain (chain id or registry deployment) than the one expected."""

    exit_code = 5


class ChainRolledBack(ChainError):
    """The chain no longer holds history that was already seen: a token was accepted (or seen by
    this SDK) that the chain's state no longer reaches, so the same number may go to another holder.

    Raised by guards, fenced SQL transactions and the SDK's views when the registry's latest token
    (or a resource's) is below one already seen, when a token number turns up with another holder,
    or when a block a follower already applied was replaced. It is never retried away: the state
    that trusted the lost history must be looked at. ``seen_token`` is the highest token seen,
    ``chain_token`` what the chain says now (either may be None when the evidence is a block).
    """

    exit_code = 5
    template = "the chain's history went back: token {seen_token} was seen, the chain now says {chain_token}"
    seen_token: int | None = None
    chain_token: int | None = None
    resource: str | None = None


class HistoryUnsettled(ChainError):
    """The audit index's sync found a block it held replaced ``rewinds`` times and then once more (the
    last: block ``block``; the last rewind went to block ``fork_block``): a chain reorganises a few blocks at a
    time and settles, a provider (``source``) that answers another hash for a block each time it is
    asked never does (a liar, or a load balancer over nodes on different forks). The sync stopped there;
    its rewinds and what it indexed after them were undone: the index is as it was before the first
    (at block ``synced``). ``detail``: how the last replacement showed. Sync again through a provider
    whose history settles."""

    exit_code = 5
    rewinds: int | None = None
    block: int | None = None
    fork_block: int | None = None
    synced: int | None = None
    source: str | None = None
    detail: str = ""

    def _message(self) -> str:
        return (
            f"the provider{f' {self.source}' if self.source else ''} keeps changing its history: block {self.block}, which the audit "
            f"index held, was replaced again after {self.rewinds} rewinds (the last to block {self.fork_block}); "
            f"nothing of them was kept, the index stands at block {self.synced} as before"
        )


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

    block: int | None = None
    followed: int | None = None
    head: int | None = None
    behind: int | None = None
    source: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.behind is None and self.head is not None and self.followed is not None:
            self.behind = self.head - self.followed

    def _message(self) -> str:
        return (
            f"the logs {self.source or 'the provider'} answered do not check out against block {self.block} "
            f"({self.reason}): the follower waits at block {self.followed}, {self.behind} blocks behind block {self.head}"
        )


class ContractNotFound(ChainError):
    """There is no FencingRegistry at the address (no code, or other code)."""

    exit_code = 5


class InsufficientFunds(ChainError):
    """The sender (``account``) cannot pay for the transaction's gas."""

    template = "{account} cannot pay for gas"
    account: str | None = None


class TransactionInDoubt(ChainError):
    """A transaction was sent and is not known to be final: reconcile before acting again.

    ``tx_hashes`` lists every hash sent for it (the first is the one asked for: ``tx_hash``), with
    ``nonce`` and ``sender``. For a batch (group commit, ``registry.batched()``), ``item`` is the
    caller's operation's position in it, to learn that operation's own outcome by hash
    (``registry.batch_item(tx_hash, item=...)``, ``chainfence tx HASH --item N``); None for a
    transaction of one operation. ``except TransactionInDoubt`` covers its three outcomes.
    """

    exit_code = 6
    template = "transaction {tx_hash} is in doubt"
    tx_hashes: tuple[str, ...] = ()
    nonce: int | None = None
    sender: str | None = None
    item: int | None = None

    def __post_init__(self) -> None:
        self.tx_hashes = tuple(self.tx_hashes)

    @property
    def tx_hash(self) -> str | None:
        """The hash of the transaction the caller asked for (the first one sent)."""
        return self.tx_hashes[0] if self.tx_hashes else None


class TransactionTimeout(TransactionInDoubt, TimeoutError):
    """Not mined in time, then cancelled: a replacement with the same nonce was mined (the SDK's
    cancellation, or another process's transaction as the same account, the node having dropped ours),
    so the original can never execute. Nothing happened; it is safe to try again.

    Through a relayer (:mod:`chainfence.relaying`): the signed intent did not land by its deadline, and a
    block past it is on the chain, so the registry refuses it from now on. Nothing happened either."""


class OutcomeUnknown(TransactionInDoubt):
    """Sent, but the SDK could not establish whether it was mined (the node stopped answering, or
    neither it nor its cancellation was mined in time). ``tx_hashes`` lists every candidate: look
    them up (``registry.lease_from_tx``) before acting again."""


class NotConfirmed(TransactionInDoubt, TimeoutError):
    """Mined (``receipt``), but not ``confirmations`` blocks deep in time: it may still be
    reorganised away. For an acquisition, ``lease`` is the lease it created: release it or
    keep waiting, but do not forget it."""

    receipt: Any = None
    confirmations: int = 0


class RelayerRefused(ChainError):
    """The relayer (:mod:`chainfence.relaying`) would not take a signed intent: it answered ``relayer_status`` (HTTP)
    with ``reason`` (its words: a rate limit, its spend cap for the key, an intent it judged refused). Nothing
    was sent, as far as its word goes; the intent stays valid until its deadline, so a relayer that lied may
    still land it (a lease then held until its ttl runs out, unknown to the agent: liveness, not safety)."""

    template = "the relayer refused the intent: HTTP {relayer_status}: {reason}"
    relayer_status: int | None = None
    reason: str | None = None


class TransactionFailed(ChainError):
    """A transaction (``tx_hash``, its ``receipt``) was mined with status 0 and no reason could be decoded."""

    template = "transaction {tx_hash} failed"
    tx_hash: str | None = None
    receipt: Any = None


class UnknownRevert(ChainError):
    """A call reverted with ``data`` that is not one of the registry's errors."""

    template = "reverted with unknown data"
    data: bytes = b""


class UnknownAccount(ChainError, LookupError):
    """The chain holds no key for that address, so it cannot send as it."""


class NotSupported(ChainError):
    """The chain does not support the operation (e.g. time travel outside dev chains)."""


class ForkNotSupported(NotSupported):
    """The node's EVM lacks an instruction the registry's code uses: it runs a fork older than ``fork``,
    the one the registry is compiled for (``instruction``: the one it lacks; ganache 7 is Shanghai).
    Raised by :meth:`Registry.deploy <chainfence.Registry.deploy>` before anything is sent."""

    template = (
        "this node's EVM has no {instruction}: the registry is compiled for {fork} and needs a node at {fork} "
        "or later (ganache 7 stops at shanghai); nothing was deployed"
    )
    fork: str = "cancun"
    instruction: str = "MCOPY"


class ProofsNotServed(NotSupported):
    """``source`` does not serve ``eth_getProof`` (the embedded eth-tester chain does not): the proven
    mode cannot run against it. Use a node that does (anvil, geth, reth, erigon, nethermind, besu)."""

    exit_code = 13
    source: str | None = None
    detail: str = ""

    def _message(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.source} does not serve eth_getProof, which the proven mode needs{detail}"


class AnvilNotFound(ChainError):
    """No anvil binary was found for a local node; the message says how to get one."""

    exit_code = 5


# ---------------------------------------------------------------------------
# The proven mode (chainfence.proofs): answers checked, not believed
# ---------------------------------------------------------------------------


class UnverifiedAnswer(ChainError):
    """The proven mode refused what its providers answered: nothing was judged, no mark moved.

    Never a reason to fall back to believing one provider; see ``docs/guarantees.md``.
    """

    exit_code = 13


class ProofInvalid(UnverifiedAnswer):
    """``source``'s proof for ``block`` (number; ``block_hash`` the trusted header's) does not verify
    against the trusted header: a forged or corrupted answer, or a provider on another chain.
    ``reason`` says which check failed."""

    template = "the proof {source} served for block {block} ({block_hash}) does not verify: {reason}"
    source: str | None = None
    block: int | None = None
    block_hash: str | None = None
    reason: str = ""


class HeaderInvalid(UnverifiedAnswer):
    """``source`` answered a header for block ``block`` whose fields do not hash to the hash it claims
    (or not the block asked for). ``reason`` says which."""

    template = "the header {source} served for block {block} is not valid: {reason}"
    source: str | None = None
    block: int | None = None
    reason: str = ""


class HeadersDisagree(UnverifiedAnswer):
    """No ``needed`` of the header providers agree on the hash of block ``block``.

    ``answers`` maps each provider to what it said: a block hash, or why its
    answer did not count (down, an invalid header). Some providers are lying
    or on another fork; which, the proven mode cannot tell.
    """

    block: int | None = None
    needed: int | None = None
    answers: dict[str, str] | None = None

    def __post_init__(self) -> None:
        self.answers = dict(self.answers or {})

    def _message(self) -> str:
        said = "; ".join(f"{provider}: {answer}" for provider, answer in (self.answers or {}).items())
        return f"no {self.needed} header providers agree on block {self.block}: {said}"


class BlockNotVouched(UnverifiedAnswer):
    """Something (a log, a receipt) claims block ``block`` with hash ``block_hash``, but the header
    source vouches for ``vouched_hash`` there (None: for no block at that height yet, it is beyond the
    trusted head ``head``). A follower must not apply it."""

    block: int | None = None
    block_hash: str | None = None
    vouched_hash: str | None = None
    head: int | None = None

    def _message(self) -> str:
        if self.vouched_hash is None:
            return (
                f"block {self.block} ({self.block_hash}) is beyond the newest block the header source vouches "
                f"for ({self.head})"
            )
        return f"block {self.block} is {self.vouched_hash} by the header source, not {self.block_hash}"


class HeaderStale(UnverifiedAnswer):
    """The header the providers vouch for (``block``, chain time ``timestamp``) is ``age`` seconds old by
    the verifier's clock (``now``), more than ``max_age``: a withheld head (providers serving an old
    block as their latest), or a chain that stopped. ``heads`` maps each provider to the head it
    reported (number and timestamp), or why it reported none."""

    block: int | None = None
    timestamp: int | None = None
    now: int | None = None
    age: int | None = None
    max_age: float | None = None
    heads: dict[str, str] | None = None

    def __post_init__(self) -> None:
        self.heads = dict(self.heads or {})

    def _message(self) -> str:
        said = "; ".join(f"{provider}: {head}" for provider, head in (self.heads or {}).items())
        return (
            f"the newest header the providers vouch for (block {self.block}, chain time {self.timestamp}) is "
            f"{self.age} s old at {self.now}, more than max_age {self.max_age} s" + (f"; heads: {said}" if said else "")
        )


class HeaderBehind(UnverifiedAnswer):
    """The proven state at block ``block`` reads token ``chain_token`` for ``resource``, below the mark
    ``mark`` accepted earlier, but the header source's block is older than block ``floor``, at which
    that mark (or another of the store's) was proven: a header source whose head moved back (a
    provider that fell behind or went down changed which head is the k-th highest) is not evidence
    that the chain lost history. Nothing was judged and nothing recorded; retry. (``floor`` is None
    when the store cannot tell at which block its mark was proven: a fenced SQL table. Then a real
    rollback reads the same, and stays refused.)"""

    block: int | None = None
    floor: int | None = None
    chain_token: int | None = None
    mark: int | None = None
    resource: str | None = None

    def _message(self) -> str:
        where = f" of {self.resource!r}" if self.resource is not None else ""
        read = f"block {self.block}, the header source's, reads token {self.chain_token}{where}, below the mark {self.mark}"
        if self.floor is not None:
            return (
                f"{read}; it is older than block {self.floor}, at which this store proved its marks: the source's "
                "head moved back (a provider behind or down); nothing judged, retry"
            )
        return (
            f"{read} this table accepted: the source's head is behind the block that mark was proven at (a "
            "provider behind or down), or the chain rolled back; nothing judged or written"
        )


# ---------------------------------------------------------------------------
# The guard's store, the audit index
# ---------------------------------------------------------------------------


class GuardError(ChainfenceError):
    """A guard's store cannot be used."""

    http_status = 503


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


class AuditIndexError(ChainfenceError):
    """The audit index (:mod:`chainfence.audit.index`) cannot answer."""


class AuditIndexMismatch(AuditIndexError):
    """The index file belongs to another registry (chain id or address differ), or is not an index.

    Its leases describe another token space: answering from it would name the
    wrong holders. Use another file (or delete this one and sync anew).
    """

    exit_code = 11


class AuditIndexDiffers(AuditIndexError):
    """``verify``: the index and the chain disagree; ``differences`` lists what differs."""

    exit_code = 12
    differences: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.differences = tuple(self.differences)

    def _message(self) -> str:
        return "the index and the chain differ: " + "; ".join(self.differences)


# ---------------------------------------------------------------------------
# A kept-alive lease lost; the rest
# ---------------------------------------------------------------------------


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

    exit_code = 7
    http_status = 409
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
    resource: str
    token: int
    why: str
    detail: str = ""

    def _message(self) -> str:
        message = f"lost the lease of token {self.token} on {self.resource!r} ({self.why})"
        return message + (f": {self.detail}" if self.detail else "")


class LeaseSetLost(LeaseLost):
    """A lease set (:meth:`LeaseSet.acquire <chainfence.LeaseSet.acquire>`) can no longer be
    trusted to be held whole: ``resource``, ``token`` and ``why`` name the member that ended (for a
    local end, ``deadline`` or ``error``, the first member: the whole set is given up).

    ``ended`` maps each member known to have ended to how (a ``LeaseLost.why``); ``released`` names
    the members :meth:`LeaseSet.release <chainfence.LeaseSet.release>` released after all (it
    releases what it still can).
    """

    ended: dict[str, str] | None = None
    released: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.ended = dict(self.ended) if self.ended is not None else {self.resource: self.why}
        self.released = tuple(self.released)


class ExtraNotInstalled(ChainfenceError, ImportError):
    """An optional part of chainfence (``feature``) needs packages that are not installed.

    The message names the command that installs them
    (``pip install 'chainfence[tester]'`` for the embedded chain); ``extra``
    is the extra's name and ``missing`` the module that failed to import.
    """

    exit_code = 2
    extra: str
    feature: str
    missing: str | None = None

    def _message(self) -> str:
        missing = f" (no module {self.missing!r})" if self.missing else ""
        return f"{self.feature} needs the [{self.extra}] extra: pip install 'chainfence[{self.extra}]'{missing}"


class FenceBroken(ChainfenceError, RuntimeError):
    """A statement ended a fenced SQL transaction before the fence did.

    ``INSERT OR ROLLBACK`` on a conflict, ``RAISE(ROLLBACK)`` in a trigger,
    ``executescript`` (which commits first), a ``COMMIT``/``ROLLBACK``/``BEGIN``
    of the application's: after any of these the statements that follow
    would no longer run inside the transaction that holds the fence, so they
    are refused and nothing more is committed. ``resource`` and ``token`` say
    which fence; ``reason`` what ended it.
    """

    template = "the fenced transaction of token {token} on {resource!r} ended early: {reason}"
    resource: str | None = None
    token: int | None = None
    reason: str | None = None


class CommandNotRun(ChainfenceError):
    """``chainfence lock``: ``command`` (the program, as given) was found but could not be started (not
    executable, a directory ...); ``reason`` is the system's word for why. Nothing ran; the lease was
    released. ``lock`` exits 126, as a shell does."""

    exit_code = 126
    template = "cannot run {command!r}: {reason}"
    command: str | None = None
    reason: str | None = None


class CommandNotFound(CommandNotRun):
    """``chainfence lock``: no such ``command``: nothing ran; the lease was released. ``lock`` exits 127, as a
    shell does."""

    exit_code = 127


# ---------------------------------------------------------------------------
# Holder-signed requests
# ---------------------------------------------------------------------------


class RequestRejected(ChainfenceError):
    """A holder-signed request (:class:`~chainfence.FencedRequest`) failed verification; ``http_status``
    is the HTTP status a service answers with."""

    http_status = 403


class MalformedRequest(RequestRejected, ValueError):
    """A fenced request is missing a field, a field does not parse, or (``field="payload"``) the
    payload's digest is not the one the holder signed."""

    http_status = 400
    field: str | None = None


@_contract_error("FencingRegistryInvalidSignature")
class InvalidSignature(RequestRejected):
    """The signature is not the named holder's (bad, foreign, or for another registry or chain).

    For a signed intent (:class:`~chainfence.intents.Intent`) the registry says so: ``holder`` is the intent's
    holder and ``digest`` the EIP-712 digest it checked the signature against."""

    http_status = 401
    holder: str | None = None
    digest: bytes | None = None


@_contract_error("FencingRegistryIntentExpired")
class RequestExpired(RequestRejected):
    """The request's deadline has passed.

    For a signed intent the registry says so: ``deadline`` (chain time) of the intent whose EIP-712 digest is
    ``digest`` is before the block it would have landed in."""

    http_status = 401
    digest: bytes | None = None
    deadline: int | None = None


class SignerNotHolder(RequestRejected):
    """The request is validly signed, by someone who does not hold its token."""


class RequestMisdirected(RequestRejected):
    """The request is genuine but was signed for something else than what it is used for: ``field``
    (``"resource"``, ``"action"``: HTTP method, path and query or an application's action, or
    ``"audience"``: the service) was ``signed``, where ``expected`` is used."""

    template = "the request was signed for {field} {signed!r}, not {expected!r}"
    field: str
    signed: str | None = None
    expected: str | None = None


@_contract_error("FencingRegistryNonceUsed")
class ReplayedRequest(RequestRejected):
    """This exact request was accepted before; a request is accepted once.

    For a signed intent (a completion or a claim) the registry says so: ``holder`` already spent ``nonce``."""

    http_status = 409
    holder: str | None = None
    nonce: int | None = None


@_contract_error("FencingRegistryIntentStale")
class IntentStale(ReplayedRequest):
    """A signed intent's replay guard no longer holds: the state it was signed against (``guard``: an
    acquisition's latest token, a renewal's lease expiry) now reads ``current``. It landed already (a replay),
    or another operation moved that state on; a renewal is also refused so (``current == guard``) when it would
    not move its lease's expiry later. Nothing was done: sign a new intent against the state as it is now."""

    template = "intent of {holder} refused: it was signed against {guard}, the registry now reads {current}"
    holder: str | None = None
    guard: int | None = None
    current: int | None = None


# ---------------------------------------------------------------------------
# Names folded in 0.2, kept working until 0.3
# ---------------------------------------------------------------------------

#: old name -> (the class that carries it now, how to raise it)
_FOLDED: dict[str, tuple[str, str]] = {
    "InvalidToken": ("InvalidInput", "InvalidInput(argument='token')"),
    "InvalidWait": ("InvalidInput", "InvalidInput(argument='wait')"),
    "InvalidProgress": ("InvalidInput", "InvalidInput(argument='progress')"),
    "InvalidAddress": ("InvalidInput", "InvalidInput(argument='address')"),
    "InvalidUrl": ("InvalidInput", "InvalidInput(argument='url')"),
    "InvalidLimit": ("InvalidInput", "InvalidInput(argument='limit')"),
    "InvalidCursor": ("InvalidInput", "InvalidInput(argument='after')"),
    "HolderNotAdmitted": ("NotAdmitted", "NotAdmitted(admission='local' or 'on-chain')"),
    "PayloadMismatch": ("MalformedRequest", "MalformedRequest(field='payload')"),
    "ResourceMismatch": ("RequestMisdirected", "RequestMisdirected(field='resource')"),
    "ActionMismatch": ("RequestMisdirected", "RequestMisdirected(field='action')"),
    "AudienceMismatch": ("RequestMisdirected", "RequestMisdirected(field='audience')"),
    "_TransactionOutcome": ("TransactionInDoubt", "TransactionInDoubt"),
}


def __getattr__(name: str) -> Any:
    """A folded name still resolves (to the class that carries it now, so ``except OldName`` catches
    what it caught), with a DeprecationWarning naming its replacement."""
    if name not in _FOLDED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new, how = _FOLDED[name]
    warnings.warn(
        f"chainfence.errors.{name} is deprecated and goes in 0.3: use {how}", DeprecationWarning, stacklevel=2
    )
    return globals()[new]
