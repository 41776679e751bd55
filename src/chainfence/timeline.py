"""A picture of who held which resource when: leases drawn as a self-contained HTML page.

A pure module: no web3, no chain access, no network at view time (no
external fonts, scripts or stylesheets; the SVG is inline). The audit
turns its records into the input types below and calls :func:`render`;
``chainfence audit timeline NAME... --out FILE.html`` does exactly that. ::

    from chainfence.timeline import TimelineLease, render

    page = render(
        [
            TimelineLease("reports/daily", 1, alice, start=1_000, end=1_030, end_reason="expired",
                          reason="unheld"),
            TimelineLease("reports/daily", 2, bob, start=1_040, end=None, end_reason="live",
                          reason="expired", renewals=[(1_050, None)]),
        ],
        now=1_060,
    )

Input types (frozen dataclasses, validated when built: a bad field raises
:class:`~chainfence.errors.InvalidInput`):

- :class:`TimelineLease` — one token's lease: who, from when to when, why it
  was issued, how it ended, its renewals, its completion.
- :class:`Rejection` — one write a guard refused (the optional overlay).

Times are unix seconds of chain time (block timestamps), drawn in UTC.

Everything that came from the chain is untrusted text (resource names,
holder labels, reasons a guard wrote, digests): it is escaped for HTML and
SVG, and code points that are not plainly printable (controls, bidi
overrides, zero-width characters) are shown escaped (``\\u202e``) as
:func:`chainfence._names.display` does, so no name can pass for another or
turn the page around.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .errors import InvalidInput

__all__ = ["END_REASONS", "ISSUE_REASONS", "Rejection", "TimelineLease", "render"]

#: How a lease ended (``TimelineLease.end_reason``); ``"live"`` when it has not (``end`` is None).
END_REASONS = ("released", "expired", "superseded", "revoked", "completed", "live")

#: Why a token was issued (``TimelineLease.reason``): the registry's ``AcquireReason``, lower case.
#: ``"unheld"``: first lease of the resource; ``"released"``/``"expired"``: the previous lease was
#: released / had expired; ``"reacquired"``: its live holder acquired again, fencing off its past
#: self; ``"revoked"``: the first acquisition after an admin revoked the previous lease;
#: ``"granted"``: an admin granted it (``admin`` says who).
ISSUE_REASONS = ("unheld", "released", "expired", "reacquired", "revoked", "granted")

#: Reasons whose acquisition took the resource from a lease that had not been given up: drawn as a takeover.
TAKEOVER_REASONS = frozenset({"expired", "reacquired", "revoked", "granted"})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_time(name: str, value: object) -> None:
    if not _is_int(value) or value < 0:
        raise InvalidInput(f"{name} must be an int number of unix seconds >= 0, got {value!r}")


def _check_text(name: str, value: object, *, optional: bool = False, allow_bytes: bool = False) -> None:
    if value is None and optional:
        return
    kinds = (str, bytes) if allow_bytes else (str,)
    if not isinstance(value, kinds) or not value:
        wanted = "a non-empty str or bytes" if allow_bytes else "a non-empty str"
        raise InvalidInput(f"{name} must be {wanted}{' or None' if optional else ''}, got {value!r}")


def _check_token(value: object) -> None:
    if not _is_int(value) or value < 1:
        raise InvalidInput(f"token must be an int >= 1, got {value!r}")


@dataclass(frozen=True)
class TimelineLease:
    """One token's lease on one resource, as the picture needs it.

    - ``resource``: the resource's name. Pass the raw bytes read from the
      chain when you have them (drawn as :func:`chainfence._names.display`
      shows them: unambiguous), or text; either way every code point that
      is not plainly printable is drawn escaped and the whole is HTML-escaped.
      Leases with equal ``resource`` share a lane.
    - ``token``: the fencing token (int >= 1).
    - ``holder``: the holder's address (any non-empty str; it picks the colour).
    - ``holder_label``: a name for the holder shown in the legend, or None.
    - ``start``: when the token was issued (unix s, chain time).
    - ``end``: when the lease stopped being live (released, expired,
      superseded, revoked or completed), or None while it is live: the bar
      then runs to ``now``. ``end >= start``.
    - ``end_reason``: one of :data:`END_REASONS`; ``"live"`` exactly when
      ``end`` is None.
    - ``reason``: why the token was issued, one of :data:`ISSUE_REASONS`.
    - ``renewals``: ``(time, progress)`` pairs, progress a marker (bytes, str
      or int) or None; times within ``[start, end]``. Stored as a tuple.
    - ``completion_digest``: the digest the holder published on completion
      (hex str, or bytes shown as 0x-hex), or None. A completion is drawn
      at ``end`` (at ``now`` while live).
    - ``admin``: about how this lease was issued: the admin who revoked the
      previous lease (``reason == "revoked"``) or granted this one
      (``reason == "granted"``); None when unknown or not applicable.
    - ``revoked_by``: the admin who revoked this lease (``end_reason ==
      "revoked"``), or None.
    """

    resource: str | bytes
    token: int
    holder: str
    holder_label: str | None = None
    start: int = 0
    end: int | None = None
    end_reason: str = "live"
    reason: str = "unheld"
    renewals: tuple[tuple[int, bytes | str | int | None], ...] = field(default=())
    completion_digest: str | bytes | None = None
    admin: str | None = None
    revoked_by: str | None = None

    def __post_init__(self) -> None:
        _check_text("resource", self.resource, allow_bytes=True)
        _check_token(self.token)
        _check_text("holder", self.holder)
        _check_text("holder_label", self.holder_label, optional=True)
        _check_time("start", self.start)
        if self.end is not None:
            _check_time("end", self.end)
            if self.end < self.start:
                raise InvalidInput(f"token {self.token}: end {self.end} is before start {self.start}")
        if self.end_reason not in END_REASONS:
            raise InvalidInput(f"end_reason must be one of {', '.join(END_REASONS)}; got {self.end_reason!r}")
        if (self.end is None) != (self.end_reason == "live"):
            raise InvalidInput(f"token {self.token}: end_reason is 'live' exactly when end is None")
        if self.reason not in ISSUE_REASONS:
            raise InvalidInput(f"reason must be one of {', '.join(ISSUE_REASONS)}; got {self.reason!r}")
        if isinstance(self.renewals, (str, bytes)) or not isinstance(self.renewals, Iterable):
            raise InvalidInput(f"renewals must be a sequence of (time, progress) pairs, got {self.renewals!r}")
        renewals = []
        for pair in self.renewals:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise InvalidInput(f"token {self.token}: a renewal is a (time, progress) pair, got {pair!r}")
            time, progress = pair
            _check_time("renewal time", time)
            if time < self.start or (self.end is not None and time > self.end):
                raise InvalidInput(f"token {self.token}: renewal at {time} is outside its lease")
            if progress is not None and not isinstance(progress, (bytes, str, int)) or isinstance(progress, bool):
                raise InvalidInput(f"token {self.token}: progress must be bytes, str, int or None, got {progress!r}")
            renewals.append((time, progress))
        object.__setattr__(self, "renewals", tuple(renewals))
        if self.completion_digest is not None and not isinstance(self.completion_digest, (str, bytes)):
            raise InvalidInput(f"completion_digest must be a str, bytes or None, got {self.completion_digest!r}")
        _check_text("admin", self.admin, optional=True)
        _check_text("revoked_by", self.revoked_by, optional=True)


@dataclass(frozen=True)
class Rejection:
    """A write a guard refused: drawn as a marker on ``resource``'s lane at ``time``.

    ``token`` is the token the write carried (an int >= 0: 0 for none);
    ``holder`` who sent it, if known; ``reason`` why it was refused (e.g.
    ``"StaleToken"``, ``"superseded by 8"``): untrusted text, escaped.
    """

    resource: str | bytes
    time: int
    token: int
    holder: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        _check_text("resource", self.resource, allow_bytes=True)
        _check_time("time", self.time)
        if not _is_int(self.token) or self.token < 0:
            raise InvalidInput(f"rejection token must be an int >= 0, got {self.token!r}")
        _check_text("holder", self.holder, optional=True)
        if not isinstance(self.reason, str):
            raise InvalidInput(f"rejection reason must be a str, got {self.reason!r}")


def render(
    leases: Iterable[TimelineLease],
    *,
    rejections: Iterable[Rejection] = (),
    title: str = "chainfence lease timeline",
    now: int | None = None,
    width: int | None = None,
) -> str:
    """The leases (and rejections) as one self-contained HTML page (a str).

    ``now`` (unix s) is where live leases end; by default the latest time
    in the input. ``width`` is the plot's width in CSS pixels; by default it
    grows with the busiest lane (see the module docstring).
    """
    raise NotImplementedError("the renderer lands in the next commit")
