"""How a lease ends, and how an acquisition is refused for now: one model, every part.

A lease stops being its holder's in exactly one of these ways (:class:`End`)::

    expired      its time ran out on-chain (nobody renewed it in time)
    released     its holder released it ("you closed it")
    completed    its holder completed the claimed work item (done for good)
    superseded   a higher token was issued for the resource: the holder's own
                 reacquisition (a restarted agent, a second process of the same key,
                 lock --take-over), or a successor whose reason could not be read
    revoked      the namespace's admin revoked it
    granted      the namespace's admin granted the resource to another lease (revoking this one)
    rolled_back  the chain lost the history that issued it (a dev node restarted, a deep reorg)

and a holder that keeps a lease alive may also give it up first, locally
(:class:`LocalEnd`): ``deadline`` (no renewal confirmed before the safe
deadline: the lease may still be live on-chain, but can no longer be
trusted) or ``error`` (the renewer failed in a way that is not a chain
error: a bug, never pretended to be a kept lease).

An acquisition may be refused *for now* (:class:`Refusal`)::

    held          someone holds a live lease (or, for an exclusive acquisition, the caller does)
    lock_delayed  the last lease expired and its namespace's lock-delay still runs
    not_admitted  the namespace admits only its allowlist and the caller is not on it

The first two pass with chain time (a waiter waits them out); the third only
when the namespace's admin admits the caller (a waiter stops at once).

Every part that holds, waits for or watches leases declares here, by name,
what it does about each of them (:func:`declare`), and
``tests/endings/`` runs one scenario per part and way (``test_matrix_complete.py`` checks every cell), on both
backends where a chain is involved: a part that does not say what it does
about a way, or a way a part has no test for, fails the suite.

The functions below turn what the chain says (a revert, a lease's status, an
event) into the model's words; every part asks them instead of deciding on
its own. A revert alone cannot tell every end apart (a renewal after a grant
and after a reacquisition both meet a higher token), so :func:`of_successor`
names the end from the reason the next token was issued for.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NamedTuple

from ._sdk.lease_state import AcquireReason, LeaseStatus
from .errors import (
    ChainfenceError,
    ChainRolledBack,
    ContractNotFound,
    InvalidInput,
    LeaseCompleted,
    LeaseExpired,
    LeaseHeld,
    LeaseReleased,
    LeaseRevoked,
    LockDelayed,
    NotAdmitted,
    NotHolder,
    StaleToken,
    TokenNotConfirmed,
    UnknownToken,
    WrongChain,
)

__all__ = [
    "End",
    "LocalEnd",
    "Part",
    "Refusal",
    "declare",
    "from_error",
    "loss_reason",
    "of_event",
    "of_status",
    "of_successor",
    "parts",
    "refusal",
]


class End(str, enum.Enum):
    """A way a lease stops being its holder's on-chain (see the module docstring)."""

    EXPIRED = "expired"
    RELEASED = "released"
    COMPLETED = "completed"
    SUPERSEDED = "superseded"
    REVOKED = "revoked"
    GRANTED = "granted"
    ROLLED_BACK = "rolled_back"

    def __str__(self) -> str:
        return self.value

    @property
    def describe(self) -> str:
        """One clause for messages: ``"lost the lease of token 7 on 'x' (revoked: ...)"``."""
        return _DESCRIPTIONS[self]


class LocalEnd(str, enum.Enum):
    """A way a kept-alive lease is given up by its holder before the chain could have ended it."""

    DEADLINE = "deadline"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value

    @property
    def describe(self) -> str:
        return _DESCRIPTIONS[self]


class Refusal(str, enum.Enum):
    """A way an acquisition is refused for now (see the module docstring)."""

    HELD = "held"
    LOCK_DELAYED = "lock_delayed"
    NOT_ADMITTED = "not_admitted"

    def __str__(self) -> str:
        return self.value

    @property
    def passes(self) -> bool:
        """Whether chain time alone ends it (a waiter waits it out) rather than an admin."""
        return self is not Refusal.NOT_ADMITTED


_DESCRIPTIONS: dict[enum.Enum, str] = {
    End.EXPIRED: "its time ran out on-chain",
    End.RELEASED: "it was released",
    End.COMPLETED: "its work item was completed",
    End.SUPERSEDED: "a higher token was issued for the resource",
    End.REVOKED: "the namespace's admin revoked it",
    End.GRANTED: "the namespace's admin granted the resource to another lease",
    End.ROLLED_BACK: "the chain lost the history that issued it",
    LocalEnd.DEADLINE: "no renewal was confirmed before the local safe deadline",
    LocalEnd.ERROR: "the renewer failed in a way that is not a chain error",
}

#: Every ``LeaseLost.why``: the chain's ends, then the holder's own.
WHYS: tuple[str, ...] = tuple(end.value for end in End) + tuple(end.value for end in LocalEnd)


# ----------------------------------------------------------------------
# What the chain says, in the model's words
# ----------------------------------------------------------------------


def from_error(error: BaseException) -> End | None:
    """The end a refused lease operation (renew, release, complete, check) reveals, or None when the
    error says nothing about the lease (transient, or a bug: see :func:`loss_reason`).

    A higher token (``StaleToken``, ``NotHolder``) is :attr:`End.SUPERSEDED` here; :func:`of_successor`
    refines it once the successor's reason is read. ``UnknownToken`` above the resource's latest token
    is :attr:`End.ROLLED_BACK`: the holder was issued that token, so a chain that does not know it lost
    the history that issued it (a dev node restarted, a deep reorg).
    ``LeaseCompleted`` (a done work item) is checked before ``LeaseReleased``, its base.
    """
    if isinstance(error, TokenNotConfirmed):
        return None
    if isinstance(error, LeaseRevoked):
        return End.REVOKED
    if isinstance(error, LeaseCompleted):
        return End.COMPLETED
    if isinstance(error, LeaseReleased):
        return End.RELEASED
    if isinstance(error, LeaseExpired):
        return End.EXPIRED
    if isinstance(error, UnknownToken) and error.token > error.current_token:
        return End.ROLLED_BACK  # the holder's token, above the resource's latest: the chain forgot issuing it
    if isinstance(error, (StaleToken, UnknownToken, NotHolder)):
        return End.SUPERSEDED
    if isinstance(error, ChainRolledBack):
        return End.ROLLED_BACK
    return None


def loss_reason(error: BaseException) -> str | None:
    """What a renewal's error means to a keep-alive: an :class:`End` or :class:`LocalEnd` value
    (the lease is lost, at once), or None when it is transient (the node did not answer, the
    transaction was not mined in time, ...) and the renewal may be retried until the deadline."""
    end = from_error(error)
    if end is not None:
        return end.value
    if isinstance(error, TokenNotConfirmed):
        return None  # live at the head, not yet deep enough: try again
    if isinstance(error, (WrongChain, ContractNotFound, InvalidInput)):
        return LocalEnd.ERROR.value  # retrying cannot help
    if isinstance(error, ChainfenceError):
        return None  # NodeUnreachable, RpcError, TransactionTimeout, OutcomeUnknown, NotConfirmed, ...
    return LocalEnd.ERROR.value  # not a chain error: a bug; do not pretend the lease is kept


def of_status(status: LeaseStatus) -> End | None:
    """The end a resource's latest lease *status* shows for its own token (None while live or never held).

    ``EXPIRED`` includes a lease whose expiry passed with no block since (``expired_unmined``).
    """
    return {
        LeaseStatus.EXPIRED: End.EXPIRED,
        LeaseStatus.RELEASED: End.RELEASED,
        LeaseStatus.DONE: End.COMPLETED,
        LeaseStatus.REVOKED: End.REVOKED,
    }.get(status)


def of_successor(reason: AcquireReason) -> End:
    """How a lease ended, told by the reason its successor (the acquisition whose ``previous_token``
    is its token) was issued for. ``granted`` means a grant revoked the lease in its own transaction;
    a grant that came after the lease had ended (revoked, released, expired) says ``granted`` too,
    so a reader that can see the lease's own end names that instead (``Registry.ending``)."""
    return {
        AcquireReason.RELEASED: End.RELEASED,
        AcquireReason.EXPIRED: End.EXPIRED,
        AcquireReason.REACQUIRED: End.SUPERSEDED,
        AcquireReason.REVOKED: End.REVOKED,
        AcquireReason.GRANTED: End.GRANTED,
        AcquireReason.UNHELD: End.SUPERSEDED,  # cannot follow a lease; never trusted as anything else
    }[reason]


def of_event(kind: str, *, reason: AcquireReason | None = None, claimed: bool = False) -> End | None:
    """The end of the *current* lease that a registry event of ``kind`` (``_events.Kind`` value) shows.

    ``released``, ``revoked`` and ``completed`` (of a claimed item; a completion of a plain lease
    ends nothing) end it; ``acquired`` ends it as :func:`of_successor` says (``reason`` required);
    renewals and namespace events end nothing. A grant over a live lease emits ``revoked`` then
    ``acquired`` (reason ``granted``) in one transaction: a reader that sees both reports
    :attr:`End.GRANTED`.
    """
    if kind == "released":
        return End.RELEASED
    if kind == "revoked":
        return End.REVOKED
    if kind == "completed":
        return End.COMPLETED if claimed else None
    if kind == "acquired":
        if reason is None:
            raise ValueError("an acquisition's end needs its reason")
        return of_successor(reason)
    return None


def refusal(error: BaseException) -> Refusal | None:
    """The refusal an acquisition's error is, or None if it is not one of the model's."""
    if isinstance(error, LockDelayed):
        return Refusal.LOCK_DELAYED
    if isinstance(error, NotAdmitted):
        return Refusal.NOT_ADMITTED
    if isinstance(error, LeaseHeld):
        return Refusal.HELD
    return None


# ----------------------------------------------------------------------
# The parts, and what each does about every way
# ----------------------------------------------------------------------


class Part(NamedTuple):
    """A part of chainfence that holds, waits for or watches leases, and what it does about each way
    (a named tuple: only :func:`declare` builds one).

    ``holds``: it runs work under a lease, so it must say what it does on every :class:`End` and
    :class:`LocalEnd` (where it keeps the lease alive). ``waits``: it acquires, so it must say what
    it does on every :class:`Refusal`. ``watches``: it reports other holders' leases, so it must say
    how it reports every :class:`End`.
    """

    name: str
    module: str
    reactions: Mapping[enum.Enum, str]
    holds: bool = False
    waits: bool = False
    watches: bool = False
    keeps_alive: bool = False

    def required(self) -> tuple[enum.Enum, ...]:
        ways: list[enum.Enum] = []
        if self.holds or self.watches:
            ways.extend(End)
        if self.keeps_alive:
            ways.extend(LocalEnd)
        if self.waits:
            ways.extend(Refusal)
        return tuple(ways)


_PARTS: dict[str, Part] = {}


def declare(
    name: str,
    module: str,
    reactions: Mapping[enum.Enum, str],
    *,
    holds: bool = False,
    waits: bool = False,
    watches: bool = False,
    keeps_alive: bool = False,
) -> Part:
    """Record what part ``name`` (defined in ``module``) does about each way a lease ends or is refused.

    Raises ``ValueError`` (at import: a part cannot ship half-declared) if a way it must handle has
    no reaction, or a reaction names a way it does not handle.
    """
    part = Part(name, module, dict(reactions), holds=holds, waits=waits, watches=watches, keeps_alive=keeps_alive)
    required = set(part.required())
    missing = [way.value for way in part.required() if way not in part.reactions]
    extra = [way.value for way in part.reactions if way not in required]
    if missing or extra:
        raise ValueError(f"part {name!r} must say what it does about {missing or '-'}; it names {extra or '-'} too")
    _PARTS[name] = part
    return part


def parts() -> dict[str, Part]:
    """Every declared part, after importing the modules that declare them."""
    import importlib

    for module in _DECLARING_MODULES:
        importlib.import_module(module)
    return dict(_PARTS)


#: Where parts are declared: :func:`parts` imports them so that none is missed.
_DECLARING_MODULES: tuple[str, ...] = (
    "chainfence._sdk.waiting",
    "chainfence.recipes.election",
    "chainfence.integrations.tooz",  # imports tooz (the [tooz] extra; in the dev extra the tests install)
    "chainfence.audit.index",
    "chainfence.audit.watchdog",  # watchdog
    "chainfence.guard",  # guard.follower
    "chainfence.keepalive",  # keep, aio.keep
    "chainfence.recipes.lease_set",  # lease_set
    "chainfence.batching",  # batching
    "chainfence.claims",  # claims
    "chainfence.integrations.mcp",  # mcp
    "chainfence.cli.lock",  # lock
)
