"""A guard's settings as values (as httpx's ``Timeout`` and ``Limits``): its mode and its request policy.

::

    Guard(registry, path)                                             # mark mode
    Guard(registry, path, mode="strict")
    Guard(registry, path, mode=Follow(interval=0.5, max_lag=5))
    Guard(registry, path, mode=Proven(QuorumHeaders([url_a, url_b, url_c], k=2)))
    Guard(registry, path, mode=Follow(headers=TrustedHeaders(url)))   # follow, its chain reads proven
    Guard(registry, path, requests=RequestPolicy(audience="reports-service"))

A mode is ``"mark"`` (or :class:`Mark`), ``"strict"``, ``"follow"`` (or :class:`Follow`) or
:class:`Proven`; what each does is told in :mod:`chainfence.guard`. Each value is frozen, compared by
value, and refuses a bad field with :class:`~chainfence.errors.InvalidInput` naming it
(``argument="mode.interval"``, ``"requests.audience"``, ...), before any store is opened.

The keywords of the 0.1 series (``follow_interval``, ``max_lag``, ``completeness``, ``headers``,
``proof_provider``, ``audience``, ``max_request_age``, ``erc1271_gas``) keep working until 0.3: each
warns (``DeprecationWarning``) naming its replacement (:func:`settings`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

from .._core import moved as _moved
from .._core.records import record
from .._node import completeness as _completeness
from ..errors import InvalidInput

if TYPE_CHECKING:
    from .._node.headers import HeaderSource

__all__ = ["DEFAULT_REQUESTS", "MODES", "Follow", "Mark", "Proven", "RequestPolicy"]

#: The guard modes, by name (see :mod:`chainfence.guard`).
MODES = ("mark", "strict", "follow", "proven")


def _seconds(owner: str, name: str, value: object, *, optional: bool = False, endless: bool = False) -> None:
    """A positive number of seconds (None if ``optional``; ``math.inf`` if ``endless``)."""
    if value is None and optional:
        return
    if not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value and (value < math.inf or endless):
        return  # (NaN is not above 0)
    raise InvalidInput(
        f"{owner}.{name} must be a positive{'' if endless else ', finite'} number of seconds, got {value!r}",
        argument=f"mode.{name}",
        value=value,
    )


def _header_source(owner: str, headers: object, proofs: object, *, required: bool = False) -> None:
    """``headers``: a header source (None unless ``required``); ``proofs`` only beside one."""
    if headers is None:
        if required:
            raise InvalidInput(
                f"{owner} needs a header source: {owner}(QuorumHeaders([...], k=...)) or {owner}(TrustedHeaders(url))",
                argument="mode.headers",
            )
        if proofs is not None:
            raise InvalidInput(f"{owner}(proofs=...) needs headers= (a header source)", argument="mode.proofs")
        return
    from .._node.headers import HeaderSource  # here: a guard without headers never loads the proof code

    if not isinstance(headers, HeaderSource):
        raise InvalidInput(
            f"{owner}.headers must be a QuorumHeaders or a TrustedHeaders, got {type(headers).__name__}",
            argument="mode.headers",
        )


@record
class Mark:
    """``mark`` mode (the default; ``"mark"`` is ``Mark()``): local marks, the chain asked only about news.

    ``headers``: a header source (:class:`~chainfence.proofs.QuorumHeaders`, k of n providers, or
    :class:`~chainfence.proofs.TrustedHeaders`, one endpoint trusted for headers) makes those chain reads
    proven; ``proofs``: where ``eth_getProof`` answers come from then (a URL, or a
    :class:`~chainfence.Chain`; default: the registry's chain; it need not be trusted).
    """

    headers: HeaderSource | None = None
    proofs: Any = None

    def __init__(self, headers: HeaderSource | None = None, proofs: Any = None) -> None:
        _header_source("Mark", headers, proofs)
        self.__dict__.update(headers=headers, proofs=proofs)


@record
class Follow:
    """``follow`` mode (``"follow"`` is ``Follow()``): ``mark``, plus a follower thread that raises the
    marks from the registry's events.

    ``interval``: seconds between the follower's polls. ``max_lag``: seconds without a successful follow
    after which checks at the mark are verified on-chain (None: ``max(5, 3 * interval)``; ``math.inf``:
    never).
    ``completeness``: how the follower checks that ``eth_getLogs`` left no log of a block out (see
    :mod:`chainfence.guard`): ``"bloom"`` or ``"receipts"`` (None: ``"receipts"`` with ``headers``,
    ``"bloom"`` without). ``headers`` and ``proofs``: as :class:`Mark`'s; the follower then follows the
    header source's head and proves each page before writing it.
    """

    interval: float = 1.0
    max_lag: float | None = None
    completeness: str | None = None
    headers: HeaderSource | None = None
    proofs: Any = None

    def __init__(
        self,
        interval: float = 1.0,
        max_lag: float | None = None,
        completeness: str | None = None,
        headers: HeaderSource | None = None,
        proofs: Any = None,
    ) -> None:
        _seconds("Follow", "interval", interval)
        _seconds("Follow", "max_lag", max_lag, optional=True, endless=True)
        if completeness is not None and completeness not in _completeness.MODES:
            raise InvalidInput(
                f"Follow.completeness must be one of {', '.join(map(repr, _completeness.MODES))}, got {completeness!r}",
                argument="mode.completeness",
                value=completeness,
            )
        _header_source("Follow", headers, proofs)
        self.__dict__.update(
            interval=interval, max_lag=max_lag, completeness=completeness, headers=headers, proofs=proofs
        )


@record
class Proven:
    """``proven`` mode: ``strict``, believing no provider. Every check proves the resource's lease slot
    with ``eth_getProof`` against the header ``headers`` vouches for
    (:class:`~chainfence.proofs.QuorumHeaders` or :class:`~chainfence.proofs.TrustedHeaders`; required).
    ``proofs``: where ``eth_getProof`` answers come from (a URL, or a :class:`~chainfence.Chain`;
    default: the registry's chain; it need not be honest).
    """

    headers: HeaderSource
    proofs: Any = None

    def __init__(self, headers: HeaderSource, proofs: Any = None) -> None:
        _header_source("Proven", headers, proofs, required=True)
        self.__dict__.update(headers=headers, proofs=proofs)


@record
class RequestPolicy:
    """What a guard accepts of holder-signed requests (:meth:`Guard.check_request
    <chainfence.Guard.check_request>`).

    ``audience``: the name of the service the guard protects; a request must have been signed for it
    (None: each call names it). ``max_age``: the furthest in the future a request's deadline may be, in
    seconds (it bounds the replay store). ``erc1271_gas``: the gas a contract holder's
    ``isValidSignature`` may burn.
    """

    audience: str | None = None
    max_age: int = 3_600
    erc1271_gas: int = 200_000

    def __init__(self, audience: str | None = None, max_age: int = 3_600, erc1271_gas: int = 200_000) -> None:
        if audience is not None and (not isinstance(audience, str) or not audience):
            raise InvalidInput(
                f"RequestPolicy.audience must be a non-empty str, got {audience!r}",
                argument="requests.audience",
                value=audience,
            )
        for name, value in (("max_age", max_age), ("erc1271_gas", erc1271_gas)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(
                    f"RequestPolicy.{name} must be an int >= 1, got {value!r}", argument=f"requests.{name}", value=value
                )
        self.__dict__.update(audience=audience, max_age=max_age, erc1271_gas=erc1271_gas)


#: A guard's request policy unless told otherwise.
DEFAULT_REQUESTS = RequestPolicy()


class Settings(NamedTuple):
    """A guard's settings, checked: what :class:`~chainfence.Guard` is built from (either form)."""

    mode: str
    interval: float
    max_lag: float | None
    completeness: str | None
    headers: HeaderSource | None
    proofs: Any
    requests: RequestPolicy


#: The keywords before 0.2 (deprecated, until 0.3) and what replaces each.
_OLD_MODE_KEYWORDS = {
    "follow_interval": "mode=Follow(interval=...)",
    "max_lag": "mode=Follow(max_lag=...)",
    "completeness": "mode=Follow(completeness=...)",
    "headers": "mode=Proven(headers) (or Mark(headers=...), Follow(headers=...))",
    "proof_provider": "mode=Proven(headers, proofs=...) (or Mark/Follow(proofs=...))",
}
_OLD_REQUEST_KEYWORDS = {
    "audience": ("audience", "requests=RequestPolicy(audience=...)"),
    "max_request_age": ("max_age", "requests=RequestPolicy(max_age=...)"),
    "erc1271_gas": ("erc1271_gas", "requests=RequestPolicy(erc1271_gas=...)"),
}


def settings(mode: object, requests: object, old: dict[str, Any], *, call: str, stacklevel: int) -> Settings:
    """The settings ``call`` (``"Guard"``, ``"AsyncGuard.open"``) was given: ``mode`` and ``requests``,
    or the keywords before 0.2 in ``old`` (each warned of, ``stacklevel`` counted from the caller of this
    function), never both for one group."""
    unknown = sorted(old.keys() - _OLD_MODE_KEYWORDS.keys() - _OLD_REQUEST_KEYWORDS.keys())
    if unknown:
        raise TypeError(f"{call}() got an unexpected keyword argument {unknown[0]!r}")
    for name in old:
        new = _OLD_MODE_KEYWORDS.get(name) or _OLD_REQUEST_KEYWORDS[name][1]
        _moved.keyword(call, name, new, stacklevel=stacklevel + 1)
    return Settings(*_mode(mode, old), requests=_requests(requests, old))


def _requests(requests: object, old: dict[str, Any]) -> RequestPolicy:
    if not isinstance(requests, RequestPolicy):
        raise InvalidInput(f"requests must be a RequestPolicy, got {requests!r}", argument="requests")
    given = {field: old[name] for name, (field, _) in _OLD_REQUEST_KEYWORDS.items() if name in old}
    if not given:
        return requests
    if requests is not DEFAULT_REQUESTS:
        raise InvalidInput(
            f"give the request policy in requests=RequestPolicy(...), not also as "
            f"{', '.join(sorted(name for name in _OLD_REQUEST_KEYWORDS if name in old))}=",
            argument="requests",
        )
    return RequestPolicy(**given)


def _mode(mode: object, old: dict[str, Any]) -> tuple[str, float, float | None, str | None, Any, Any]:
    """(the mode's name, interval, max_lag, completeness, headers, proofs)."""
    given = {name: old[name] for name in _OLD_MODE_KEYWORDS if name in old}
    if isinstance(mode, (Mark, Follow, Proven)):
        if given:
            raise InvalidInput(
                f"give the mode's settings in mode={type(mode).__name__}(...), not also as {', '.join(sorted(given))}=",
                argument="mode",
            )
        if isinstance(mode, Follow):
            return "follow", mode.interval, mode.max_lag, mode.completeness, mode.headers, mode.proofs
        return ("mark" if isinstance(mode, Mark) else "proven"), 1.0, None, None, mode.headers, mode.proofs
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidInput(
            f"mode must be 'mark', 'strict', 'follow', Mark(...), Follow(...) or Proven(headers), got {mode!r}",
            argument="mode",
            value=mode,
        )
    headers, proofs = given.get("headers"), given.get("proof_provider")
    if mode == "proven" and headers is None:
        raise InvalidInput(
            "proven mode needs a header source: mode=Proven(QuorumHeaders([...], k=...)) or "
            "mode=Proven(TrustedHeaders(url))",
            argument="mode",
        )
    if mode == "strict" and headers is not None:
        raise InvalidInput(
            "strict mode believes its provider; to judge every check by proofs, use the proven mode: mode=Proven(headers)",
            argument="mode",
        )
    if proofs is not None and headers is None:
        raise InvalidInput("proof_provider needs headers= (the proven mode's header source)", argument="proof_provider")
    if headers is not None:
        _header_source("Guard", headers, proofs)
    # The 0.1 keywords, checked as Follow checks them (a follower's settings apply to any mode's sync()).
    follow = Follow(given.get("follow_interval", 1.0), given.get("max_lag"), given.get("completeness"))
    return mode, follow.interval, follow.max_lag, follow.completeness, headers, proofs
