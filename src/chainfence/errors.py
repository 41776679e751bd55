"""Every error chainfence raises, in one tree (drawn, with each class's summary, in the reference's Errors page).

Errors are data: each class declares its fields as annotations, and :class:`ChainfenceError` makes from them
the keyword constructor, the ``repr`` (``StaleToken(resource='r', token=3, current_token=5)``), the pickling
and :meth:`~ChainfenceError.details`. A class's ``template`` renders its message from its fields (a message
given as the one positional argument replaces it). Each class carries ``exit_code``, what ``chainfence``
exits with, and ``http_status``, what a service answers with (the ASGI middleware does); a class not named
here takes its parent's::

    exit_code    1 ChainfenceError; 2 InvalidInput, ExtraNotInstalled; 3 LeaseHeld; 4 TokenNotCurrent,
                 NotHolder, NotLive; 5 NodeUnreachable, WrongChain, ChainRolledBack, HistoryUnsettled,
                 ContractNotFound, AnvilNotFound; 6 TransactionInDoubt; 7 LeaseLost; 9 NamespaceError, NotAdmitted;
                 10 LockDelayed; 11 AuditIndexMismatch; 12 AuditIndexDiffers; 13 UnverifiedAnswer, ProofsNotServed;
                 126 CommandNotRun; 127 CommandNotFound
    http_status  500 ChainfenceError; 400 InvalidInput, MalformedRequest; 401 InvalidSignature, RequestExpired;
                 403 NotHolder, NotAdmitted, NamespaceError, Unauthorized, RequestRejected; 409 LeaseError,
                 LeaseLost, ReplayedRequest; 503 ChainError, GuardError

Each contract error maps to one class (:data:`CONTRACT_ERRORS`), whatever provider reported the revert (its
exception is the ``__cause__``). A Python-only class that is no base says in a "Caught apart" line why a
caller tells it from its parent. A service rejecting work needs one clause, ``except TokenNotCurrent`` (and
``except RequestRejected`` for holder-signed requests, ``except NotAdmitted`` with an admission policy).
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
    "GuardError",
    "GuardStoreMismatch",
    "HeaderBehind",
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
    """Register ``cls`` as the contract's ``solidity_name`` error (and the example contracts' ``also``): its
    ``from_revert`` takes the ABI arguments in snake_case, the bytes32 ``resource`` as ``resource_id``."""

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
        """The error's fields as JSON-ready values, with its name (``"error"``) and ``"message"``: what
        ``chainfence --json`` prints and an MCP tool error carries (bytes as 0x-hex, enums by name, no receipts)."""
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


# -- Bad input: nothing was sent or written ---------------------------------------------------------------


class InvalidInput(ChainfenceError, ValueError):
    """An argument is malformed or out of range. Nothing was sent or written.

    ``argument`` names it when one is to blame (``"token"``, ``"wait"``, ``"url"``, ``"after"`` ...); ``value``
    is what was given (its repr cut short when not a plain value; never a URL: it may hold an API key).
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
    """Deployment: a registry's maximum ttl (``max_ttl``, as given) must be 1 to 2**32 - 1 seconds."""

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
    """A namespace (a name's part before its first ``/``) is 1 to 127 printable bytes without ``/``; one
    shaped like an address must be one, lowercase, and the deployer cannot assign it."""

    template = "a namespace must be 1 to {max_length} bytes with no '/', got {length} bytes"
    length: int | None = None
    max_length: int | None = None


@_contract_error("FencingRegistryInvalidPolicy")
class InvalidPolicy(InvalidInput):
    """A namespace policy's ``max_ttl`` and ``lock_delay`` are 0 to the registry's maximum ttl, and a change
    names at least one field."""

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
    """A set of leases (``LeaseSet.acquire``) lists a resource twice."""

    template = "resource {where} is listed twice"
    resource_id: bytes | None = None
    resource: str | None = None

    @property
    def where(self) -> str:
        return repr(self.resource) if self.resource is not None else "0x" + (self.resource_id or b"").hex()


@_contract_error("FencingRegistryUnsortedResources")
class UnsortedResources(InvalidInput):
    """``renewMany``/``releaseMany``: ``resource_id`` is listed right after ``previous``, a higher id (the
    registry takes a set in strictly increasing order of ids; the SDK sorts every set it sends)."""

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
    """The row an audit listing's cursor points after is gone (a reorganisation rewound the index past it):
    nothing was read; list again from the start.

    Caught apart: a pager starts over on it; other bad input is the caller's bug.
    """


# -- The registry refused a lease operation --------------------------------------------------------------


class LeaseError(ChainfenceError):
    """The registry (or a guard) refused an operation on a resource's lease.

    ``resource`` is the name when known, ``resource_id`` its ``keccak256`` when known; the message follows a
    name attached later (``with_resource``).
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
    """Someone else (``holder``, ``token``) holds a live lease on the resource: retry at or after chain time
    ``expires_at``."""

    exit_code = 3
    template = "{where} is held by {holder} with token {token} until {expires_at:time}"
    holder: str
    token: int
    expires_at: int


@_contract_error("FencingRegistryNothingToClaim")
class NothingToClaim(LeaseError):
    """Every one of the workset's ``count`` items is done or held live by someone else (``resource_id``: the
    workset's id)."""

    template = "nothing to claim in workset {where}: {items} done or held by others"
    count: int

    @property
    def items(self) -> str:
        """The items in the message: "its only item is", "all 3 items are"."""
        return "its only item is" if self.count == 1 else f"all {self.count} items are"

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
    """``holder`` is not admitted: by the allowlist of ``namespace`` (``namespace_name``: its prefix), refused
    by the registry (acquire, grant), or by a guard's admission, which judged ``token``: ``admission`` says
    which list refused it (``"local"``, ``"on-chain"``); the guard's mark did not move.
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
    """The lease of ``holder`` expired and its namespace's lock-delay runs until chain time ``until``: only
    ``holder`` may acquire the resource before then."""

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

    ``current_token``: the registry's latest token for the resource (a guard's: the highest it accepted);
    ``token`` itself when it is the latest but no longer live.
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
    """``token`` is below ``current_token``: superseded, its holder lost the lease (a registry's or a guard's
    verdict; another resource's lower token reads as stale too)."""

    template = "token {token} for {where} is stale: token {current_token} superseded it"


@_contract_error("FencingRegistryUnknownToken")
class UnknownToken(TokenNotCurrent):
    """``token`` is 0 or above the resource's latest token: never issued for it (forged, or another resource's)."""

    template = "token {token} was never issued for {where} (its latest token is {current_token})"


@_contract_error("FencingRegistryLeaseExpired")
class LeaseExpired(TokenNotCurrent):
    """``token`` is the resource's latest, but its lease expired at ``expired_at``: acquire again.

    ``no_block_since``: no block was mined since it ran out (chain time ``judged_at`` is past it; the latest
    block still shows it live).
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
    """``token`` is the claimed work item's latest, but its claimant completed the item: done for good."""

    template = "the claim of token {token} on {where} was completed: the item is done"


@_contract_error("FencingRegistryLeaseRevoked")
class LeaseRevoked(TokenNotCurrent):
    """``token`` is the resource's latest, but the admin of its namespace revoked it: stop the work."""

    template = "the lease of token {token} on {where} was revoked by its namespace's admin"


class TokenNotConfirmed(TokenNotCurrent):
    """``token`` is current at the chain head but not yet ``confirmations`` blocks deep: a reorg may still
    take it.

    Caught apart: retry later: the same lease may yet count.
    """

    template = "token {token} for {where} is not yet {confirmations} blocks deep; retry once it is confirmed"
    confirmations: int


@_contract_error("FencingRegistryUint48Overflow")
class RegistryOverflow(ChainfenceError, OverflowError):
    """A token (48 bits) or an expiry (40 bits: until the year 36,812) no longer fits the registry's storage."""

    template = "value {value} does not fit the registry's storage (tokens 48 bits, expiries 40)"
    value: int | None = None


# -- A namespace refused the caller ----------------------------------------------------------------------


class NamespaceError(ChainfenceError, PermissionError):
    """A namespace refused the caller: ``namespace`` is its id (``keccak256(prefix)``), ``namespace_name`` the
    prefix when known."""

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
    """``account`` is not the admin of the namespace (``admin``; the zero address when nobody administers it,
    as for names without ``/``)."""

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


# -- The chain or node failed us -------------------------------------------------------------------------


class ChainError(ChainfenceError):
    """Talking to the chain failed, or it answered something we cannot use.

    ``lease``: an acquisition landed but a step after it failed: the lease, never to be forgotten.
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
    """A provider of the proven mode (``source``; ``sources``: every one down when ``needed`` answers were
    needed and ``answered`` came) did not answer. Nothing was judged; a guard moves no mark.

    Caught apart: a header quorum counts it as that provider down; the middleware names the providers.
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
    """The node answered ``method`` with a reply whose ``field`` does not read as what it must (``value``, cut
    short; ``reason``): refused where it is read. A sender waiting for a receipt asks on, as of a silent node.

    Caught apart: a provider that lies or is broken is one to replace; a silent one, one to wait for.
    """

    template = "the node answered {method} with a malformed {field}: {reason} ({value!r})"
    method: str | None = None
    field: str | None = None
    value: Any = None

    def __post_init__(self) -> None:
        self.value = _bounded(self.value)


class RpcError(ChainError):
    """The node answered a JSON-RPC request (``method``) with an error that is not a revert: ``code`` (None
    when the provider gave none) and ``rpc_message``."""

    template = "{method} failed: {rpc_message}"
    method: str | None = None
    code: int | None = None
    rpc_message: str = ""


class LogRangeRefused(RpcError):
    """The provider refused an ``eth_getLogs`` request for its block range or result size.

    Caught apart: a narrower range may pass (chainfence's own log pagers halve theirs on any RpcError).
    """


class WrongChain(ChainError):
    """The node serves another chain (chain id or registry deployment) than the one expected.

    Caught apart: ``chainfence deploy`` and ``node`` deploy afresh on it; retrying never helps.
    """

    exit_code = 5


class ChainRolledBack(ChainError):
    """The chain went back below history already seen: ``seen_token`` was seen (by a guard, a fenced SQL
    table, the SDK's views), the chain now says ``chain_token`` (either None when the evidence is a block).

    Caught apart: never retried away; a guard latches on it until looked at.
    """

    exit_code = 5
    template = "the chain's history went back: token {seen_token} was seen, the chain now says {chain_token}"
    seen_token: int | None = None
    chain_token: int | None = None
    resource: str | None = None


class HistoryUnsettled(ChainError):
    """The audit index's sync found a block it held replaced ``rewinds`` times and then again (the last:
    ``block``; the last rewind went to ``fork_block``) by ``source``: it undid them, the index stays at ``synced``.

    Caught apart: sync again through a provider whose history settles.
    """

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
    """A follower stopped at block ``block``: the log provider (``source``) answered without logs the block
    has, or with logs it cannot have (``reason``). It waits at block ``followed``, ``behind`` blocks short of
    ``head``.

    Caught apart: the follower takes the block up again at its next sync; nothing to repair.
    """

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
    """There is no FencingRegistry at the address (no code, or other code).

    Caught apart: read at a block before the deployment, it means no lease yet.
    """

    exit_code = 5


class InsufficientFunds(ChainError):
    """The sender (``account``) cannot pay for the transaction's gas.

    Caught apart: fund the account (a batch reads its balance and resends only what it pays for).
    """

    template = "{account} cannot pay for gas"
    account: str | None = None


class TransactionInDoubt(ChainError):
    """A transaction was sent and is not known to be final: reconcile before acting again.

    ``tx_hashes``: every hash sent for it (``tx_hash``: the first), with ``nonce`` and ``sender``; ``item``: the
    operation's position in a batch (``registry.batch_item(tx_hash, item=...)``), None alone.
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
    """Not mined in time, then cancelled (or, through a relayer, past its deadline): it can never execute.

    Caught apart: nothing happened; it is safe to try again.
    """


class OutcomeUnknown(TransactionInDoubt):
    """Sent, but whether it was mined could not be established.

    Caught apart: look its ``tx_hashes`` up (``registry.lease_from_tx``) before acting again.
    """


class NotConfirmed(TransactionInDoubt, TimeoutError):
    """Mined (``receipt``), but not ``confirmations`` blocks deep in time; ``lease``: an acquisition's lease.

    Caught apart: keep waiting, or release the lease; do not forget it.
    """

    receipt: Any = None
    confirmations: int = 0


class RelayerRefused(ChainError):
    """The relayer would not take a signed intent: it answered ``relayer_status`` (HTTP) with ``reason``. The
    intent stays valid until its deadline.

    Caught apart: try another relayer, or send it yourself.
    """

    template = "the relayer refused the intent: HTTP {relayer_status}: {reason}"
    relayer_status: int | None = None
    reason: str | None = None


class TransactionFailed(ChainError):
    """A transaction (``tx_hash``, its ``receipt``) was mined with status 0 and no reason could be decoded.

    Caught apart: nothing happened and there is no refusal to act on: trying again may pass.
    """

    template = "transaction {tx_hash} failed"
    tx_hash: str | None = None
    receipt: Any = None


class UnknownRevert(ChainError):
    """A call reverted with ``data`` that is not one of the registry's errors.

    Caught apart: the contract refused, the node did not fail (the sender and deploy's fork probe read it so).
    """

    template = "reverted with unknown data"
    data: bytes = b""


class UnknownAccount(ChainError, LookupError):
    """The chain holds no key for that address, so it cannot send as it.

    Caught apart: give the registry an account (a key); retrying never helps.
    """


class NotSupported(ChainError):
    """The chain does not support the operation (e.g. time travel outside dev chains).

    ``fork``: ``Registry.deploy`` found the node's EVM older than the fork the registry is built for
    (``instruction``: the one it lacks); nothing was sent.
    """

    fork: str | None = None
    instruction: str | None = None

    def _message(self) -> str:
        if self.fork is None:
            return super()._message()
        return (
            f"this node's EVM has no {self.instruction}: the registry is compiled for {self.fork} and needs a node "
            f"at {self.fork} or later (ganache 7 stops at shanghai); nothing was deployed"
        )


class ProofsNotServed(NotSupported):
    """``source`` does not serve ``eth_getProof`` (the embedded chain does not): the proven mode cannot run on it.

    Caught apart: use a node that does (anvil, geth, reth ...); exit 13, as the proven mode's refusals.
    """

    exit_code = 13
    source: str | None = None
    detail: str = ""

    def _message(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.source} does not serve eth_getProof, which the proven mode needs{detail}"


class AnvilNotFound(ChainError):
    """No anvil binary was found for a local node; the message says how to get one.

    Caught apart: install it, or name it in ``CHAINFENCE_ANVIL`` (exit 5).
    """

    exit_code = 5


# -- The proven mode: answers checked, not believed ------------------------------------------------------


class UnverifiedAnswer(ChainError):
    """The proven mode refused what its providers answered: nothing was judged, no mark moved."""

    exit_code = 13


class ProofInvalid(UnverifiedAnswer):
    """What ``source`` served for ``block`` does not verify (``reason``): ``served`` is ``"proof"``, checked
    against the trusted header (``block_hash``), or ``"header"``, whose fields do not hash to its hash.

    Caught apart: the provider it names lies or is broken: replace it.
    """

    served: str = "proof"
    source: str | None = None
    block: int | None = None
    block_hash: str | None = None
    reason: str = ""

    def _message(self) -> str:
        at = f" ({self.block_hash})" if self.block_hash is not None else ""
        return f"the {self.served} {self.source} served for block {self.block}{at} does not verify: {self.reason}"


class HeadersDisagree(UnverifiedAnswer):
    """No ``needed`` of the header providers agree on the hash of block ``block``; ``answers`` maps each
    provider to what it said.

    Caught apart: some providers lie or follow another fork, which ones the proven mode cannot tell.
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
    """A log or receipt claims block ``block`` with hash ``block_hash``; the header source vouches for
    ``vouched_hash`` there (None: the block is beyond its trusted head ``head``).

    Caught apart: the log provider serves another history than the header source; a follower applies none.
    """

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
    """The header the providers vouch for (``block`` at chain time ``timestamp``) is ``age`` seconds old at
    ``now``, more than ``max_age``; ``heads`` maps each provider to the head it reported.

    Caught apart: heads withheld, or a stopped chain: an alarm, not a retry.
    """

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
    """The header source's block ``block`` reads ``chain_token`` for ``resource``, below the ``mark`` accepted
    at the later block ``floor`` (None: a fenced SQL table, which cannot tell): its head moved back.

    Caught apart: no evidence of a rollback: retry; nothing was judged or recorded.
    """

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


# -- The guard's store, the audit index ------------------------------------------------------------------


class GuardError(ChainfenceError):
    """A guard's store cannot be used (closed, unreadable, locked by another guard, another schema).

    ``forked_from``: an ``exclusive`` guard used in a process forked from the one that opened it (this pid):
    open a new guard in the child.
    """

    http_status = 503
    forked_from: int | None = None


class GuardStoreMismatch(GuardError):
    """The store file belongs to another registry (chain id or address differ).

    Caught apart: a store of another registry may be set aside for a new one; a broken store may not.
    """


class AuditIndexError(ChainfenceError):
    """The audit index cannot answer."""


class AuditIndexMismatch(AuditIndexError):
    """The index file belongs to another registry (chain id or address differ), or is not an index.

    Caught apart: use another file (or delete it and sync anew); exit 11.
    """

    exit_code = 11


class AuditIndexDiffers(AuditIndexError):
    """``verify``: the index and the chain disagree; ``differences`` lists what differs.

    Caught apart: the index is wrong, not unusable; exit 12.
    """

    exit_code = 12
    differences: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.differences = tuple(self.differences)

    def _message(self) -> str:
        return "the index and the chain differ: " + "; ".join(self.differences)


# -- A kept-alive lease lost; the rest -------------------------------------------------------------------


class LeaseLost(ChainfenceError):
    """The lease ``token`` on ``resource`` can no longer be trusted to be held: stop the work.

    Raised by ``Lease.check`` and the exit of ``Lease.keep``; ``why`` (one of ``REASONS``, the words of
    ``chainfence.endings``) says how it was lost, ``detail`` more; the error that revealed it is the
    ``__cause__``.
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
    """A lease set can no longer be trusted to be held whole: ``resource``, ``token`` and ``why`` name the
    member that ended (for ``deadline`` or ``error``, the first).

    Caught apart: ``ended`` maps each member known to have ended to how; ``released`` names the members
    released after all.
    """

    ended: dict[str, str] | None = None
    released: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.ended = dict(self.ended) if self.ended is not None else {self.resource: self.why}
        self.released = tuple(self.released)


class ExtraNotInstalled(ChainfenceError, ImportError):
    """An optional part (``feature``) needs the ``extra`` (``missing``: the module that did not import).

    Caught apart: an ImportError; the message names the ``pip install`` that fixes it.
    """

    exit_code = 2
    extra: str
    feature: str
    missing: str | None = None

    def _message(self) -> str:
        missing = f" (no module {self.missing!r})" if self.missing else ""
        return f"{self.feature} needs the [{self.extra}] extra: pip install '.[{self.extra}]' in a chainfence checkout{missing}"


class FenceBroken(ChainfenceError, RuntimeError):
    """A statement (``reason``) ended the fenced SQL transaction of ``token`` on ``resource`` before the fence
    did: what follows is refused and nothing more is committed.

    Caught apart: a RuntimeError, the application's bug, not a verdict on the token.
    """

    template = "the fenced transaction of token {token} on {resource!r} ended early: {reason}"
    resource: str | None = None
    token: int | None = None
    reason: str | None = None


class CommandNotRun(ChainfenceError):
    """``chainfence lock``: ``command`` was found but could not be started (``reason``). Nothing ran; the lease
    was released."""

    exit_code = 126
    template = "cannot run {command!r}: {reason}"
    command: str | None = None
    reason: str | None = None


class CommandNotFound(CommandNotRun):
    """``chainfence lock``: no such ``command``: nothing ran; the lease was released.

    Caught apart: exit 127, as a shell says it.
    """

    exit_code = 127


# -- Holder-signed requests ------------------------------------------------------------------------------


class RequestRejected(ChainfenceError):
    """A holder-signed request failed verification."""

    http_status = 403


class MalformedRequest(RequestRejected, ValueError):
    """A fenced request is missing a field, a field does not parse, or (``field="payload"``) the payload's
    digest is not the one the holder signed.

    Caught apart: the client's bug (HTTP 400), not a refused holder.
    """

    http_status = 400
    field: str | None = None


@_contract_error("FencingRegistryInvalidSignature")
class InvalidSignature(RequestRejected):
    """The signature is not the named holder's (bad, foreign, or for another registry or chain).

    For a signed intent the registry says so: ``holder`` is its holder, ``digest`` its EIP-712 digest.
    """

    http_status = 401
    holder: str | None = None
    digest: bytes | None = None


@_contract_error("FencingRegistryIntentExpired")
class RequestExpired(RequestRejected):
    """The request's deadline has passed.

    For a signed intent the registry says so: its ``deadline`` (chain time; ``digest``) is past.
    """

    http_status = 401
    digest: bytes | None = None
    deadline: int | None = None


class RequestMisdirected(RequestRejected):
    """The request is genuine but used for something else than it was signed for: ``field`` (``"resource"``,
    ``"action"``, ``"audience"``, or ``"holder"``: the token's holder is not the signer) was ``signed``,
    where ``expected`` is used.

    Caught apart: nothing is recorded and the request is not burnt: it still works where it belongs.
    """

    template = "the request was signed for {field} {signed!r}, not {expected!r}"
    field: str
    signed: str | None = None
    expected: str | None = None


@_contract_error("FencingRegistryNonceUsed")
class ReplayedRequest(RequestRejected):
    """This exact request was accepted before; a request is accepted once.

    For a signed intent the registry says so: ``holder`` already spent ``nonce``.
    """

    http_status = 409
    holder: str | None = None
    nonce: int | None = None


@_contract_error("FencingRegistryIntentStale")
class IntentStale(ReplayedRequest):
    """A signed intent's replay guard no longer holds: it was signed against ``guard`` (a latest token, a
    lease's expiry), the registry now reads ``current``. Nothing was done: sign anew."""

    template = "intent of {holder} refused: it was signed against {guard}, the registry now reads {current}"
    holder: str | None = None
    guard: int | None = None
    current: int | None = None


# -- Names folded in 0.2, served until 0.3 ---------------------------------------------------------------

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
    "SignerNotHolder": ("RequestMisdirected", "RequestMisdirected(field='holder')"),
    "GuardForked": ("GuardError", "GuardError(forked_from=pid)"),
    "ForkNotSupported": ("NotSupported", "NotSupported(fork=..., instruction=...)"),
    "HeaderInvalid": ("ProofInvalid", "ProofInvalid(served='header')"),
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
