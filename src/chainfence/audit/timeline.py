"""A picture of who held which resource when: leases drawn as a self-contained HTML page.

A pure module: no web3, no chain access, no network at view time (no
external fonts, scripts or stylesheets; the SVG is inline). The audit
turns its records into the input types below and calls :func:`render`;
``chainfence audit timeline NAME... --out FILE.html`` does exactly that. ::

    from chainfence.audit.timeline import TimelineLease, render

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
:func:`chainfence._sdk.names.display` does (resource names exactly so, hence
unambiguously), so no name can pass for another or turn the page around.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC

from .._sdk import names as _names
from ..errors import InvalidInput

__all__ = ["END_REASONS", "ISSUE_REASONS", "Rejection", "TimelineLease", "render"]

#: How a lease ended (``TimelineLease.end_reason``); ``"live"`` when it has not (``end`` is None).
END_REASONS = ("released", "expired", "superseded", "revoked", "granted", "completed", "live")

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
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidInput(f"{name} must be an int number of unix seconds >= 0, got {value!r}")


def _check_text(name: str, value: object, *, optional: bool = False, allow_bytes: bool = False) -> None:
    if value is None and optional:
        return
    kinds = (str, bytes) if allow_bytes else (str,)
    if not isinstance(value, kinds) or not value:
        wanted = "a non-empty str or bytes" if allow_bytes else "a non-empty str"
        raise InvalidInput(f"{name} must be {wanted}{' or None' if optional else ''}, got {value!r}")


def _check_resource(value: object) -> None:
    """A resource: a name (str or bytes), or a claimed work item as a ``(workset, item)`` pair of them."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise InvalidInput(f"a claimed item's resource is a (workset, item) pair, got {value!r}")
        _check_text("resource's workset", value[0], allow_bytes=True)
        _check_text("resource's item", value[1], allow_bytes=True)
        return
    _check_text("resource", value, allow_bytes=True)


def _check_token(value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(f"token must be an int >= 1, got {value!r}")


@dataclass(frozen=True)
class TimelineLease:
    """One token's lease on one resource, as the picture needs it.

    - ``resource``: the resource's name as it is on-chain: the raw bytes
      of ``ResourceNamed`` (or a str, taken as its UTF-8; a str decoded with
      ``surrogateescape`` gets its bytes back). Drawn as
      :func:`chainfence._sdk.names.display` shows it: controls, bidi overrides
      and bytes that are not UTF-8 escaped, backslashes doubled, so two names
      never look alike; then HTML-escaped. Pass the raw name, not an already
      escaped display string (its backslashes would be doubled again).
      Leases with the same name share a lane. A claimed work item is a
      ``(workset, item)`` pair (each as a name above; a str ``"workset»item"``
      is one too), drawn ``workset»item``: a plain name never shows a bare ``»``.
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
    - ``completions``: ``(time, digest)`` pairs, one per completion the
      holder recorded (a plain lease may record several; a claimed item's
      one ends it), digest a hex str, bytes (shown as 0x-hex) or None; times
      within ``[start, end]``. Each is drawn at its own time.
    - ``completion_digest``: the latest digest, for callers that know no
      time: drawn at ``end`` (at ``now`` while live) when ``completions`` is
      empty, and so is a lease that ended ``"completed"`` without them.
    - ``admin``: about how this lease was issued: the admin who revoked the
      previous lease (``reason == "revoked"``) or granted this one
      (``reason == "granted"``); None when unknown or not applicable.
    - ``revoked_by``: the admin who revoked this lease (``end_reason ==
      "revoked"``, or ``"granted"``: revoked to grant the resource to
      another lease in the same transaction), or None.
    """

    resource: str | bytes | tuple[str | bytes, str | bytes]
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
    completions: tuple[tuple[int, str | bytes | None], ...] = field(default=())

    def __post_init__(self) -> None:
        _check_resource(self.resource)
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
            if (progress is not None and not isinstance(progress, (bytes, str, int))) or isinstance(progress, bool):
                raise InvalidInput(f"token {self.token}: progress must be bytes, str, int or None, got {progress!r}")
            renewals.append((time, progress))
        object.__setattr__(self, "renewals", tuple(renewals))
        if self.completion_digest is not None and not isinstance(self.completion_digest, (str, bytes)):
            raise InvalidInput(f"completion_digest must be a str, bytes or None, got {self.completion_digest!r}")
        if isinstance(self.completions, (str, bytes)) or not isinstance(self.completions, Iterable):
            raise InvalidInput(f"completions must be a sequence of (time, digest) pairs, got {self.completions!r}")
        completions = []
        for pair in self.completions:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise InvalidInput(f"token {self.token}: a completion is a (time, digest) pair, got {pair!r}")
            time, digest = pair
            _check_time("completion time", time)
            if time < self.start or (self.end is not None and time > self.end):
                raise InvalidInput(f"token {self.token}: completion at {time} is outside its lease")
            if digest is not None and not isinstance(digest, (str, bytes)):
                raise InvalidInput(f"token {self.token}: a completion's digest must be a str, bytes or None")
            completions.append((time, digest))
        object.__setattr__(self, "completions", tuple(completions))
        _check_text("admin", self.admin, optional=True)
        _check_text("revoked_by", self.revoked_by, optional=True)


@dataclass(frozen=True)
class Rejection:
    """A write a guard refused: drawn as a marker on ``resource``'s lane at ``time``.

    ``token`` is the token the write carried (an int >= 0: 0 for none);
    ``holder`` who sent it, if known; ``reason`` why it was refused (e.g.
    ``"StaleToken"``, ``"superseded by 8"``): untrusted text, escaped.
    """

    resource: str | bytes | tuple[str | bytes, str | bytes]
    time: int
    token: int
    holder: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        _check_resource(self.resource)
        _check_time("time", self.time)
        if not _is_int(self.token) or self.token < 0:
            raise InvalidInput(f"rejection token must be an int >= 0, got {self.token!r}")
        _check_text("holder", self.holder, optional=True)
        if not isinstance(self.reason, str):
            raise InvalidInput(f"rejection reason must be a str, got {self.reason!r}")


# ---------------------------------------------------------------------------
# Layout: where everything goes (pure arithmetic, tested without a browser)
# ---------------------------------------------------------------------------

#: Width of the gutter on the left that holds the lane labels, in CSS px.
LABEL_WIDTH = 230
RIGHT_MARGIN = 40
#: The lanes start below the title and the axis labels.
LANES_TOP = 72
#: A lane, top to bottom: a 16 px strip for takeovers (at the start of the lease that took over), the 22 px
#: bar (renewal ticks on it), then a row each for completions, revokes (at the end of the revoked lease, its
#: "revoked by" label to the left, over that lease) and a guard's rejections. One row per kind of mark:
#: two events at the same moment never draw one mark over the other.
MARKER_STRIP = 16
BAR_HEIGHT = 22
MARK_ROW = 14
COMPLETION_TOP = MARKER_STRIP + BAR_HEIGHT + 2
REVOKE_TOP = COMPLETION_TOP + MARK_ROW
REJECTION_TOP = REVOKE_TOP + MARK_ROW
LANE_HEIGHT = REJECTION_TOP + MARK_ROW + 4
#: Half the width of each kind of mark (px): marks of one kind closer than their width merge into one
#: (``data-count``, and every event in its tooltip), as renewal ticks do.
MARK_HALF = {"takeover": 5.0, "completion": 5.0, "revoke": 4.0, "rejection": 4.0}
#: Default plot width: grows with the busiest lane (px per lease), within these bounds.
MIN_PLOT_WIDTH = 960
MAX_PLOT_WIDTH = 16_000
PX_PER_LEASE = 8
#: Bars narrower than this are drawn this wide, so that every lease stays visible.
MIN_BAR_WIDTH = 1.0
#: A lease acquired and released in one block (no length) is drawn this wide, outlined, centred on its
#: moment and over the bars beside it: never hidden under the lease that came a block later.
INSTANT_WIDTH = 5.0
#: Bars at least 4 px wide end this much early, so that back-to-back leases of one holder stay apart.
BAR_GAP = 1.0
#: Renewal ticks closer than this to the previous tick drawn on the bar merge into it (its data-count says how many).
TICK_MERGE_PX = 3.0
#: Bars narrower than this get no renewal ticks (the ticks would hide the bar's colour).
MIN_TICKED_BAR = 12.0
#: Advance of one character of the page's monospace font, per px of font size (DejaVu Sans Mono: 0.602).
CHAR_ADVANCE = 0.61
TOKEN_FONT = 11
LABEL_FONT = 12
LEGEND_ROW = 18
LEGEND_COLUMN = 380

#: Holder colours (Tableau 10 and two more); beyond twelve holders, hues spaced by the golden angle.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#2f4b7c",
    "#bcbd22",
)

#: Marker colours by what happened.
TAKEOVER_COLOURS = {"expired": "#555555", "reacquired": "#222222", "revoked": "#c62828", "granted": "#6a1b9a"}
REVOKE_COLOUR = "#c62828"
REJECTION_COLOUR = "#d50000"
COMPLETION_COLOUR = "#111111"

#: Tick steps, in seconds, from one second to a century.
_DAY = 86_400
_TICK_STEPS = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1_800,
    3_600,
    7_200,
    10_800,
    21_600,
    43_200,
    _DAY,
    2 * _DAY,
    7 * _DAY,
    14 * _DAY,
    30 * _DAY,
    91 * _DAY,
    365 * _DAY,
    730 * _DAY,
    1_825 * _DAY,
    3_650 * _DAY,
    7_300 * _DAY,
    18_250 * _DAY,
    36_500 * _DAY,
)
#: Fewest CSS px between two ticks (a date label is about 70 px wide).
_TICK_SPACING = 110


def text_width(text: str, font_size: float) -> float:
    """Estimated width of ``text`` in the page's monospace font at ``font_size`` px."""
    return len(text) * font_size * CHAR_ADVANCE


def shorten(text: str, max_chars: int) -> str:
    """``text`` cut in the middle to at most ``max_chars`` characters (``…`` marks the cut).

    The middle, because resource names that differ tend to differ at the end
    (``reports/daily/2026-11-21`` vs ``…-22``); the full text is in the tooltip.
    """
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return "…"[:max_chars]
    head = (max_chars - 1) // 2
    tail = max_chars - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def holder_colours(holders: Iterable[str]) -> dict[str, str]:
    """A colour per holder (keys as given, compared case-insensitively), distinct within the set.

    Stable: each holder prefers the palette slot its address hashes to (so
    it keeps its colour from one picture to the next unless two holders
    collide), and holders are placed in sorted order, so the result depends
    only on the set. Past twelve holders, further colours are hues spaced by
    the golden angle.
    """
    import colorsys
    import hashlib

    keys: dict[str, list[str]] = {}
    for holder in holders:
        keys.setdefault(holder.lower(), []).append(holder)
    taken: dict[int, str] = {}
    colour_of: dict[str, str] = {}
    overflow = 0
    for key in sorted(keys):
        if len(taken) < len(PALETTE):
            slot = int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:4], "big") % len(
                PALETTE
            )
            while slot in taken:
                slot = (slot + 1) % len(PALETTE)
            taken[slot] = key
            colour = PALETTE[slot]
        else:
            hue = (overflow * 137.508) % 360 / 360
            overflow += 1
            r, g, b = colorsys.hls_to_rgb(hue, 0.45, 0.6)
            colour = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
        for holder in keys[key]:
            colour_of[holder] = colour
    return colour_of


def ink_on(colour: str) -> str:
    """Black or white, whichever reads better on ``colour`` (#rrggbb)."""
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "#111111" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "#ffffff"


@functools.lru_cache(maxsize=8192)
def format_time(t: int, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """``t`` (unix s) in UTC; a time past the year 9999 as plain seconds."""
    from datetime import datetime

    try:
        return datetime.fromtimestamp(t, tz=UTC).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return f"{t}s"


@dataclass(frozen=True)
class Tick:
    """A time-axis tick: its time, x, label (time of day; month-day and time for steps of 3 hours or more; the
    date for steps of a day or more) and, on the first tick and where the date changes under time labels, the
    date."""

    time: int
    x: float
    label: str
    date: str | None


def ticks(t0: int, t1: int, x_of: Callable[[int], float], plot_width: float) -> list[Tick]:
    """Ticks at round multiples of the smallest step that keeps them ``_TICK_SPACING`` px apart."""
    span = max(1, t1 - t0)
    most = max(1, int(plot_width // _TICK_SPACING))
    step = next((s for s in _TICK_STEPS if span / s <= most), None)
    if step is None:
        step = _TICK_STEPS[-1] * -(-span // (_TICK_STEPS[-1] * most))
    fmt = "%H:%M:%S" if step < 60 else "%H:%M" if step < 3 * 3_600 else "%m-%d %H:%M" if step < _DAY else "%Y-%m-%d"
    out: list[Tick] = []
    previous_date = None
    t = -(-t0 // step) * step
    while t <= t1:
        date = format_time(t, "%Y-%m-%d") if step < _DAY else None
        out.append(Tick(t, x_of(t), format_time(t, fmt), date if date != previous_date else None))
        previous_date = date
        t += step
    return out


@dataclass(frozen=True)
class Lane:
    """A resource's lane: its name as drawn (escaped), the label that fits the gutter, its top y."""

    index: int
    name: str
    label: str
    y: float


@dataclass(frozen=True)
class Bar:
    """A lease's bar: geometry, colour, and the token label if it fits (None: tooltip only)."""

    lease: TimelineLease
    lane: Lane
    x: float
    width: float
    y: float
    height: float
    colour: str
    label: str | None
    #: Where the bar ends in time: ``end``, or ``now`` while live.
    until: int


@dataclass(frozen=True)
class Mark:
    """An event drawn on a lane: a takeover, a completion, a revoke or a rejection, in its kind's row.

    ``x`` is the event's time (the first one's, for a merged mark); ``top`` and ``height`` its row;
    ``half`` half its width. ``leases`` are the leases it stands for (a takeover: the lease that took over;
    a revoke: the revoked lease; a completion: the completed one), ``rejections`` a rejection mark's;
    more than one when events of one kind closer than the mark's width merged. ``times`` each event's
    time. ``label`` is the short text drawn beside it when it fits (``label_x``, anchored at its start
    for a takeover, at its end for a revoke), else None (the tooltip says it). ``digests``: a
    completion's."""

    kind: str
    lane: Lane
    x: float
    top: float
    height: float
    half: float
    times: tuple[int, ...]
    leases: tuple[TimelineLease, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    digests: tuple[str | bytes | None, ...] = ()
    label: str | None = None
    label_x: float | None = None

    @property
    def box(self) -> tuple[float, float, float, float]:
        """(left, top, right, bottom) of the mark itself (its label apart)."""
        return (self.x - self.half, self.top, self.x + self.half, self.top + self.height)


@dataclass(frozen=True)
class Layout:
    """Everything :func:`render` draws, positioned (CSS px; the page's top-left is the SVG's origin)."""

    t0: int
    t1: int
    now: int
    plot_left: float
    plot_width: float
    width: float
    height: float
    lanes: tuple[Lane, ...]
    bars: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    colours: dict[str, str]
    #: Legend order: holders by their first lease's start, with their label (or None).
    holders: tuple[tuple[str, str | None], ...]
    legend_top: float
    legend_columns: int
    #: Every takeover, completion, revoke and rejection, lane by lane, each kind in its own row.
    marks: tuple[Mark, ...] = ()

    def x(self, t: int) -> float:
        """The x of time ``t``."""
        return self.plot_left + (t - self.t0) * self.plot_width / (self.t1 - self.t0)


def _name(resource: str | bytes | tuple[str | bytes, str | bytes]) -> str:
    """A resource's name as drawn: :func:`chainfence._sdk.names.display` of its bytes (a str as its UTF-8),
    which no two names share, so two resources never share a lane or a label. A claimed work item
    (a ``(workset, item)`` pair, or a str ``"workset»item"``) is drawn as its two parts so, joined by ``»``,
    which :func:`~chainfence._sdk.names.display` escapes in every plain name."""
    if isinstance(resource, tuple):
        return _name(resource[0]) + _names.ITEM_SEPARATOR + _name(resource[1])
    if isinstance(resource, str) and resource.count(_names.ITEM_SEPARATOR) == 1:
        workset, _, item = resource.partition(_names.ITEM_SEPARATOR)
        if workset and item:
            return _name(workset) + _names.ITEM_SEPARATOR + _name(item)
    if isinstance(resource, str):
        try:
            return _names.display(resource.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError:
            return _names.display(resource.encode("utf-8", "surrogatepass"))
    return _names.display(resource)


def layout(
    leases: Iterable[TimelineLease],
    rejections: Iterable[Rejection] = (),
    *,
    now: int | None = None,
    width: int | None = None,
    resources: Iterable[str | bytes | tuple[str | bytes, str | bytes]] = (),
    since: int | None = None,
    until: int | None = None,
) -> Layout:
    """Where :func:`render` puts every lane, bar, label and tick (validates the input like render)."""
    leases = list(leases)
    rejections = list(rejections)
    named = [resources] if isinstance(resources, (str, bytes)) else list(resources)
    for resource in named:
        _check_resource(resource)
    for lease in leases:
        if not isinstance(lease, TimelineLease):
            raise InvalidInput(f"leases must be TimelineLease objects, got {type(lease).__name__}")
    for rejection in rejections:
        if not isinstance(rejection, Rejection):
            raise InvalidInput(f"rejections must be Rejection objects, got {type(rejection).__name__}")
    if now is not None:
        _check_time("now", now)
    if width is not None and (not _is_int(width) or not 200 <= width <= 100_000):
        raise InvalidInput(f"width must be an int number of px from 200 to 100000, got {width!r}")
    for name, value in (("since", since), ("until", until)):
        if value is not None:
            _check_time(name, value)
    if since is not None and until is not None and until <= since:
        raise InvalidInput(f"until ({until}) must be after since ({since})")

    lane_names: dict[str, list[TimelineLease]] = {_name(resource): [] for resource in named}  # lanes, even empty
    seen: set[tuple[str, int]] = set()
    for lease in leases:
        name = _name(lease.resource)
        if (name, lease.token) in seen:
            raise InvalidInput(f"token {lease.token} of {name!r} is given twice")
        seen.add((name, lease.token))
        lane_names.setdefault(name, []).append(lease)
    for rejection in rejections:
        lane_names.setdefault(_name(rejection.resource), [])

    times = [lease.start for lease in leases] + [r.time for r in rejections]
    late = times + [lease.end for lease in leases if lease.end is not None]
    late += [t for lease in leases for t, _ in lease.renewals]
    if now is not None:
        late.append(now)
    if not times:
        t_min = t_max = now or 0
    else:
        t_min, t_max = min(times), max(late)
    live_until = now if now is not None else t_max
    if since is not None or until is not None:  # a window: what overlaps it, drawn within it
        low = since if since is not None else 0
        high = until if until is not None else max(t_max, low + 1)
        leases = [
            lease
            for lease in leases
            if lease.start <= high and (lease.end if lease.end is not None else max(live_until, lease.start)) >= low
        ]
        rejections = [rejection for rejection in rejections if low <= rejection.time <= high]
        lane_names = {name: [lease for lease in group if lease in leases] for name, group in lane_names.items()}
        t_min, t_max = (low, high) if since is not None else (min([t_min, high - 1]), high)
    pad = max(1, (t_max - t_min) // 50)
    t0, t1 = max(0, t_min - pad), t_max + pad
    if since is not None:
        t0 = since
    if until is not None:
        t1 = until

    busiest = max((len(group) for group in lane_names.values()), default=0)
    plot_width = float(width if width is not None else min(MAX_PLOT_WIDTH, max(MIN_PLOT_WIDTH, busiest * PX_PER_LEASE)))
    plot_left = float(LABEL_WIDTH)
    scale = plot_width / (t1 - t0)

    def x_of(t: int) -> float:
        return plot_left + (t - t0) * scale

    label_chars = int((LABEL_WIDTH - 16) // (LABEL_FONT * CHAR_ADVANCE))
    lanes: list[Lane] = []
    bars: list[Bar] = []
    for index, (name, group) in enumerate(lane_names.items()):
        lane = Lane(index, name, shorten(name, label_chars), float(LANES_TOP + index * LANE_HEIGHT))
        lanes.append(lane)
        # Leases acquired and released in one block (no length) last: drawn over the lease after them.
        for lease in sorted(group, key=lambda item: (item.end == item.start, item.token)):
            ends = lease.end if lease.end is not None else max(live_until, lease.start)
            x0, x1 = x_of(max(lease.start, t0)), x_of(min(ends, t1))  # within the window
            bar_width = max(MIN_BAR_WIDTH, x1 - x0)
            if lease.end == lease.start:
                x0, bar_width = x0 - INSTANT_WIDTH / 2, float(INSTANT_WIDTH)  # centred on its moment
            elif bar_width >= 2 * BAR_GAP + 2:
                bar_width -= BAR_GAP  # back-to-back bars of one holder stay two bars
            text = str(lease.token)
            fits = text_width(text, TOKEN_FONT) + 6 <= bar_width
            bars.append(
                Bar(
                    lease,
                    lane,
                    x0,
                    bar_width,
                    lane.y + MARKER_STRIP,
                    float(BAR_HEIGHT),
                    "",
                    text if fits else None,
                    ends,
                )
            )

    first_seen: dict[str, tuple[str, str | None]] = {}
    for lease in sorted(leases, key=lambda item: (item.start, item.token)):
        key = lease.holder.lower()
        if key not in first_seen or (first_seen[key][1] is None and lease.holder_label is not None):
            first_seen[key] = (first_seen.get(key, (lease.holder,))[0], lease.holder_label)
    colours = holder_colours(lease.holder for lease in leases)
    bars = [Bar(b.lease, b.lane, b.x, b.width, b.y, b.height, colours[b.lease.holder], b.label, b.until) for b in bars]
    holders = tuple(first_seen.values())
    marks = _marks(lanes, bars, rejections, x_of, plot_left + plot_width, (t0, t1))
    legend_top = LANES_TOP + len(lanes) * LANE_HEIGHT + 28
    columns = max(1, int((plot_left + plot_width + RIGHT_MARGIN) // LEGEND_COLUMN))
    legend_rows = -(-len(holders) // columns) + 4  # holders, then the key to the symbols and the notes
    return Layout(
        t0=t0,
        t1=t1,
        now=live_until,
        plot_left=plot_left,
        plot_width=plot_width,
        width=plot_left + plot_width + RIGHT_MARGIN,
        height=legend_top + legend_rows * LEGEND_ROW + 16,
        lanes=tuple(lanes),
        bars=tuple(bars),
        ticks=tuple(ticks(t0, t1, x_of, plot_width)),
        colours=colours,
        holders=holders,
        legend_top=float(legend_top),
        legend_columns=columns,
        marks=tuple(marks),
    )


#: An event to mark: (time, order among its kind, the lease's bar or None, the digest or the rejection).
_Event = tuple[int, int, "Bar | None", "Rejection | str | bytes | None"]


def _marks(
    lanes: list[Lane],
    bars: list[Bar],
    rejections: list[Rejection],
    x_of: Callable[[int], float],
    right: float,
    window: tuple[int, int] | None = None,
) -> list[Mark]:
    """Each event at its own time in its kind's row (those within ``window`` only); marks of one kind closer
    than their width merged."""
    events: dict[tuple[int, str], list[_Event]] = {}
    lane_of = {lane.name: lane for lane in lanes}
    for bar in bars:
        lease = bar.lease
        key = bar.lane.index
        if lease.reason in TAKEOVER_REASONS:
            events.setdefault((key, "takeover"), []).append((lease.start, lease.token, bar, None))
        if lease.end_reason in ("revoked", "granted"):  # a grant over a live lease revokes it first
            events.setdefault((key, "revoke"), []).append((bar.until, lease.token, bar, None))
        completed = list(lease.completions)
        if not completed and (lease.completion_digest is not None or lease.end_reason == "completed"):
            completed = [(bar.until, lease.completion_digest)]  # no time given: at the end, as before
        for at, digest in completed:
            events.setdefault((key, "completion"), []).append((at, lease.token, bar, digest))
    for number, rejection in enumerate(rejections):
        lane = lane_of[_name(rejection.resource)]
        events.setdefault((lane.index, "rejection"), []).append((rejection.time, number, None, rejection))
    if window is not None:
        events = {
            key: [event for event in found if window[0] <= event[0] <= window[1]] for key, found in events.items()
        }
        events = {key: found for key, found in events.items() if found}
    tops = {"takeover": 2.0, "completion": float(COMPLETION_TOP), "revoke": float(REVOKE_TOP)}
    tops["rejection"] = float(REJECTION_TOP)
    heights = {"takeover": 11.0, "completion": 10.0, "revoke": 10.0, "rejection": 8.0}
    marks: list[Mark] = []
    for (index, kind), found in sorted(events.items(), key=lambda item: item[0]):
        lane, half = lanes[index], MARK_HALF[kind]
        groups: list[list[_Event]] = []
        for event in sorted(found, key=lambda item: (item[0], item[1])):
            if groups and x_of(event[0]) - x_of(groups[-1][0][0]) < 2 * half + 1:
                groups[-1].append(event)
            else:
                groups.append([event])
        row = [
            Mark(
                kind,
                lane,
                x_of(group[0][0]),
                lane.y + tops[kind],
                heights[kind],
                half,
                tuple(event[0] for event in group),
                leases=tuple(event[2].lease for event in group if event[2] is not None),
                rejections=tuple(event[3] for event in group if isinstance(event[3], Rejection)),
                digests=tuple(event[3] for event in group if not isinstance(event[3], Rejection))
                if kind == "completion"
                else (),
            )
            for group in groups
        ]
        marks.extend(_labelled(row, bars, right))
    return marks


def _labelled(row: list[Mark], bars: list[Bar], right: float) -> list[Mark]:
    """A row's marks with the labels that fit: a takeover's to its right, up to the next mark; a revoke's
    ("revoked by ...") to its left, over the revoked lease's own bar and after the previous mark's box."""
    out = []
    for i, mark in enumerate(row):
        label = label_x = None
        if mark.kind == "takeover" and len(mark.leases) == 1:
            text = _takeover_label(mark.leases[0])
            limit = row[i + 1].box[0] if i + 1 < len(row) else right + RIGHT_MARGIN
            start = mark.x + mark.half + 3
            if start + text_width(text, 10) + 2 <= limit:
                label, label_x = text, start
        elif mark.kind == "revoke" and len(mark.leases) == 1:
            lease = mark.leases[0]
            text = "revoked" + (f" by {_short_address(_text(lease.revoked_by))}" if lease.revoked_by else "")
            bar = next(b for b in bars if b.lease is lease)
            end = mark.x - mark.half - 3
            limit = max(bar.x, row[i - 1].box[2] + 2 if i > 0 else bar.x)
            if end - text_width(text, 10) >= limit:
                label, label_x = text, end
        out.append(
            Mark(
                mark.kind,
                mark.lane,
                mark.x,
                mark.top,
                mark.height,
                mark.half,
                mark.times,
                mark.leases,
                mark.rejections,
                mark.digests,
                label,
                label_x,
            )
        )
    return out


# ---------------------------------------------------------------------------
# Drawing
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def _esc(text: str) -> str:
    """``text`` (already made printable by :func:`_name`/:func:`_text`) escaped for HTML text and attributes.

    Cached, like :func:`_text` and :func:`format_time`: holders, names and times repeat across thousands of
    leases."""
    return html.escape(text, quote=True)


def _text(value: object) -> str:
    """Any untrusted value as printable text: bytes as 0x-hex, every non-printable code point escaped."""
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return _display_text(str(value))


@functools.lru_cache(maxsize=8192)
def _display_text(text: str) -> str:
    return _names.display_text(text)


def _short_address(address: str) -> str:
    return address if len(address) <= 14 else f"{address[:6]}…{address[-4:]}"


def _n(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _attrs(**values: object) -> str:
    return "".join(
        f' {key.replace("_", "-")}="{_esc(str(value))}"' for key, value in values.items() if value is not None
    )


def _takeover_label(lease: TimelineLease) -> str:
    """The short label of a takeover marker, about the lease that took over: who revoked the previous lease
    is said on that lease's own revoke mark, never here."""
    if lease.reason == "expired":
        return "after expiry"
    if lease.reason == "reacquired":
        return "reacquired"
    if lease.reason == "revoked":
        return "after revoke"
    admin = _text(lease.admin) if lease.admin else None
    return f"granted by {_short_address(admin)}" if admin else "granted"


def _takeover_text(lease: TimelineLease, previous: TimelineLease | None, name: str) -> str:
    """The tooltip of a takeover marker."""
    admin = _text(lease.admin) if lease.admin else None
    before = f"token {previous.token} ({_text(previous.holder)})" if previous else "the previous lease"
    if lease.reason == "expired":
        long = f"{before} had expired: token {lease.token} superseded it"
    elif lease.reason == "reacquired":
        long = f"its live holder acquired again: {before} is fenced off by token {lease.token}"
    elif lease.reason == "revoked":
        long = f"{before} was revoked{f' by admin {admin}' if admin else ''}; token {lease.token} issued after it"
    else:
        long = f"token {lease.token} granted{f' by admin {admin}' if admin else ''} to {_text(lease.holder)}"
    when = format_time(lease.start)
    return f"{name}: takeover at {when} UTC ({lease.reason}): {long}"


def _draw_mark(mark: Mark, previous_of: dict[int, TimelineLease]) -> str:
    """One mark's SVG (its label too), with a tooltip naming every event it stands for."""
    name, x, top = mark.lane.name, mark.x, mark.top
    count = len(mark.times)
    out: list[str] = []
    if mark.kind == "takeover":
        lease = mark.leases[0]
        colour = TAKEOVER_COLOURS[lease.reason]
        tips = [_takeover_text(each, previous_of.get(each.token), name) for each in mark.leases]
        previous = previous_of.get(lease.token)
        out.append(
            f'<path d="M{_n(x - 5)},{_n(top)} L{_n(x + 5)},{_n(top)} L{_n(x)},{_n(top + 11)} Z" fill="{colour}"'
            + _attrs(
                data_kind="takeover",
                data_token=lease.token,
                data_holder=_text(lease.holder),
                data_resource=name,
                data_reason=lease.reason,
                data_previous_token=previous.token if previous else None,
                data_admin=_text(lease.admin) if lease.admin else None,
                data_time=mark.times[0],
                data_count=count if count > 1 else None,
                data_tokens=" ".join(str(each.token) for each in mark.leases) if count > 1 else None,
            )
            + f"><title>{_esc(chr(10).join(tips))}</title></path>\n"
        )
        if mark.label is not None and mark.label_x is not None:
            out.append(
                f'<text x="{_n(mark.label_x)}" y="{_n(top + 10)}" font-size="10" fill="{colour}"'
                + _attrs(data_kind="takeover-label", data_token=lease.token, data_resource=name)
                + f">{_esc(mark.label)}</text>\n"
            )
    elif mark.kind == "revoke":
        lease = mark.leases[0]
        tips = []
        for each, at in zip(mark.leases, mark.times, strict=True):
            by = f" by admin {_text(each.revoked_by)}" if each.revoked_by else ""
            how = "revoked" if each.end_reason == "revoked" else "revoked to grant the resource to another"
            tips.append(f"{name}: token {each.token} ({_text(each.holder)}) {how}{by} at {format_time(at)} UTC")
        out.append(
            f'<path d="M{_n(x - 4)},{_n(top)} L{_n(x + 4)},{_n(top + 10)} M{_n(x + 4)},{_n(top)}'
            f' L{_n(x - 4)},{_n(top + 10)}" stroke="{REVOKE_COLOUR}" stroke-width="2" fill="none"'
            + _attrs(
                data_kind="revoke",
                data_token=lease.token,
                data_holder=_text(lease.holder),
                data_resource=name,
                data_admin=_text(lease.revoked_by) if lease.revoked_by else None,
                data_time=mark.times[0],
                data_count=count if count > 1 else None,
                data_tokens=" ".join(str(each.token) for each in mark.leases) if count > 1 else None,
            )
            + f"><title>{_esc(chr(10).join(tips))}</title></path>\n"
        )
        if mark.label is not None and mark.label_x is not None:
            out.append(
                f'<text x="{_n(mark.label_x)}" y="{_n(top + 9)}" font-size="10" fill="{REVOKE_COLOUR}"'
                ' text-anchor="end"'
                + _attrs(data_kind="revoke-label", data_token=lease.token, data_resource=name)
                + f">{_esc(mark.label)}</text>\n"
            )
    elif mark.kind == "completion":
        lease = mark.leases[0]
        digest = _text(mark.digests[0]) if mark.digests[0] is not None else None
        tips = [
            f"{name}: token {each.token} completed at {format_time(at)} UTC"
            + (f"\ndigest {_text(d)}" if d is not None else "")
            for each, at, d in zip(mark.leases, mark.times, mark.digests, strict=True)
        ]
        mid = top + mark.height / 2
        out.append(
            f'<path d="M{_n(x)},{_n(mid - 5)} L{_n(x + 5)},{_n(mid)} L{_n(x)},{_n(mid + 5)} L{_n(x - 5)},{_n(mid)} Z"'
            f' fill="{COMPLETION_COLOUR}" stroke="#ffffff" stroke-width="1"'
            + _attrs(
                data_kind="completion",
                data_token=lease.token,
                data_holder=_text(lease.holder),
                data_resource=name,
                data_digest=digest,
                data_time=mark.times[0],
                data_count=count if count > 1 else None,
                data_tokens=" ".join(str(each.token) for each in mark.leases) if count > 1 else None,
            )
            + f"><title>{_esc(chr(10).join(tips))}</title></path>\n"
        )
    else:
        rejection = mark.rejections[0]
        rejected_holder = _text(rejection.holder) if rejection.holder else None
        tips = [
            f"{name}: rejected token {each.token}"
            + (f" from {_text(each.holder)}" if each.holder else "")
            + f" at {format_time(each.time)} UTC"
            + (f": {_text(each.reason)}" if each.reason else "")
            for each in mark.rejections
        ]
        out.append(
            f'<path d="M{_n(x - 4)},{_n(top)} L{_n(x + 4)},{_n(top + 8)} M{_n(x + 4)},{_n(top)} L{_n(x - 4)},{_n(top + 8)}"'
            f' stroke="{REJECTION_COLOUR}" stroke-width="2.5" fill="none"'
            + _attrs(
                data_kind="rejection",
                data_token=rejection.token,
                data_holder=rejected_holder,
                data_resource=name,
                data_time=rejection.time,
                data_count=count if count > 1 else None,
            )
            + f"><title>{_esc(chr(10).join(tips))}</title></path>\n"
        )
    return "".join(out)


def render(
    leases: Iterable[TimelineLease],
    *,
    rejections: Iterable[Rejection] = (),
    title: str = "chainfence lease timeline",
    now: int | None = None,
    width: int | None = None,
    resources: Iterable[str | bytes | tuple[str | bytes, str | bytes]] = (),
    since: int | None = None,
    until: int | None = None,
) -> str:
    """The leases (and a guard's rejections) as one self-contained HTML page (a str).

    ``now`` (unix s) is where live leases end and is marked by a dashed
    line; by default the latest time in the input. ``width`` is the plot's
    width in CSS px; by default it grows with the busiest lane, 8 px per
    lease, from 960 to 16,000 px (the page scrolls sideways).

    ``resources``: lanes drawn first, in this order, whether or not any lease
    or rejection is on them (a lane with none says so). ``since`` and
    ``until`` (unix s) draw that window only: the leases that overlap it,
    cut at its edges, and the marks within it (a five-second handover in a
    day's history is a few pixels otherwise). A lease acquired and released
    in one block is drawn :data:`INSTANT_WIDTH` px wide, outlined, over the
    bars beside it.

    Every lease gets its bar, however short (at least 1 px wide), with a
    tooltip (``<title>``) that says everything about it; its token is
    written on it only when the label fits, otherwise the tooltip alone
    carries it. Renewal ticks closer than 3 px merge (``data-count``); a bar
    under 12 px wide gets none (its ``data-renewals`` and tooltip count them). The
    page has no script and a Content-Security-Policy that forbids loading
    anything, so it stays inert and offline whatever a name holds.
    """
    if not isinstance(title, str):
        raise InvalidInput(f"title must be a str, got {title!r}")
    rejections = list(rejections)
    geo = layout(leases, rejections, now=now, width=width, resources=resources, since=since, until=until)
    windowed = since is not None or until is not None
    out: list[str] = []
    add = out.append
    lanes_bottom = LANES_TOP + len(geo.lanes) * LANE_HEIGHT
    safe_title = _esc(_text(title))

    add(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{safe_title}</title><style>"
        "html,body{margin:0;padding:0;background:#fff}"
        "svg{display:block;font-family:'DejaVu Sans Mono','Liberation Mono',monospace}"
        "</style></head><body>\n"
    )
    add(
        f'<svg width="{_n(geo.width)}" height="{_n(geo.height)}" viewBox="0 0 {_n(geo.width)} {_n(geo.height)}"'
        f' data-kind="timeline" data-t0="{geo.t0}" data-t1="{geo.t1}" data-now="{geo.now}"'
        f' data-plot-left="{_n(geo.plot_left)}" data-plot-width="{_n(geo.plot_width)}">\n'
    )
    add(f'<text x="12" y="22" font-size="16" font-weight="bold" data-kind="title">{safe_title}</text>\n')

    # Lanes: a background band and the name in the gutter.
    for lane in geo.lanes:
        fill = "#ffffff" if lane.index % 2 == 0 else "#f4f4f4"
        empty = not any(bar.lane.index == lane.index for bar in geo.bars)
        add(
            f'<g data-kind="lane"{_attrs(data_resource=lane.name, data_lane=lane.index)}>'
            f'<rect x="0" y="{_n(lane.y)}" width="{_n(geo.width)}" height="{LANE_HEIGHT}" fill="{fill}"'
            ' data-kind="lane-background"/>'
            f'<text x="8" y="{_n(lane.y + MARKER_STRIP + BAR_HEIGHT / 2 + 4)}" font-size="{LABEL_FONT}"'
            f' data-kind="lane-label"{_attrs(data_resource=lane.name)}>{_esc(lane.label)}'
            f"<title>{_esc(lane.name)}</title></text>"
            + (
                f'<text x="{_n(geo.plot_left + 6)}" y="{_n(lane.y + MARKER_STRIP + BAR_HEIGHT / 2 + 4)}"'
                f' font-size="{LABEL_FONT}" fill="#777777" data-kind="lane-empty"{_attrs(data_resource=lane.name)}>'
                f"{'no leases in this window' if windowed else 'no leases'}</text>"
                if empty
                else ""
            )
            + "</g>\n"
        )

    # The time axis: a grid line and a label per tick.
    add(
        f'<g data-kind="axis"><line x1="{_n(geo.plot_left)}" y1="{LANES_TOP - 4}" x2="{_n(geo.plot_left + geo.plot_width)}"'
        f' y2="{LANES_TOP - 4}" stroke="#444444"/>'
    )
    for tick in geo.ticks:
        add(
            f'<line x1="{_n(tick.x)}" y1="{LANES_TOP - 8}" x2="{_n(tick.x)}" y2="{lanes_bottom}" stroke="#dddddd"'
            f' data-kind="gridline" data-time="{tick.time}"/>'
            f'<text x="{_n(tick.x)}" y="{LANES_TOP - 12}" font-size="11" text-anchor="middle" fill="#333333"'
            f' data-kind="tick" data-time="{tick.time}">{_esc(tick.label)}</text>'
        )
        if tick.date:
            add(
                f'<text x="{_n(tick.x)}" y="{LANES_TOP - 26}" font-size="10" text-anchor="middle" fill="#666666"'
                f' data-kind="tick-date" data-time="{tick.time}">{_esc(tick.date)}</text>'
            )
    add("</g>\n")

    # Bars, then what is drawn over them, lane by lane.
    by_lane: dict[int, list[Bar]] = {}
    for bar in geo.bars:
        by_lane.setdefault(bar.lane.index, []).append(bar)
    marks_of_lane: dict[int, list[Bar]] = {}
    for lane in geo.lanes:
        lane_bars = by_lane.get(lane.index, [])
        add(f'<g data-kind="leases"{_attrs(data_resource=lane.name)}>\n')
        for bar in lane_bars:
            lease = bar.lease
            holder = _text(lease.holder)
            who = f"{_text(lease.holder_label)} ({holder})" if lease.holder_label else holder
            ended = (
                f"{format_time(lease.start)} UTC – now ({format_time(bar.until)} UTC), live"
                if lease.end is None
                else f"{format_time(lease.start)} – {format_time(lease.end)} UTC, ended: {lease.end_reason}"
            )
            instant = lease.end == lease.start
            if instant:
                ended = f"{format_time(lease.start)} UTC, acquired and {lease.end_reason} in the same block (0 s)"
            tip = (
                f"{lane.name} · token {lease.token} · {who}\n{ended}\nissued because: {lease.reason}"
                + (f" (admin {_text(lease.admin)})" if lease.admin else "")
                + f"\nrenewals: {len(lease.renewals)}"
            )
            add(
                f'<rect x="{_n(bar.x)}" y="{_n(bar.y)}" width="{_n(bar.width)}" height="{_n(bar.height)}"'
                f' fill="{bar.colour}"'
                + (' stroke="#111111" stroke-width="1" data-instant="true"' if instant else "")
                + _attrs(
                    data_kind="bar",
                    data_token=lease.token,
                    data_holder=holder,
                    data_resource=lane.name,
                    data_reason=lease.reason,
                    data_end_reason=lease.end_reason,
                    data_start=lease.start,
                    data_until=bar.until,
                    data_renewals=len(lease.renewals),
                )
                + f"><title>{_esc(tip)}</title></rect>\n"
            )
        # Renewal ticks, merged when closer than TICK_MERGE_PX; none on bars too narrow to show them apart
        # from the bar (the bar's tooltip and data-renewals count them).
        for bar in lane_bars:
            if bar.width < MIN_TICKED_BAR:
                continue
            groups: list[list[tuple[int, object]]] = []
            last_x = None
            for time, progress in bar.lease.renewals:
                if not geo.t0 <= time <= geo.t1:
                    continue  # outside the window
                x = geo.x(time)
                if last_x is not None and x - last_x < TICK_MERGE_PX:
                    groups[-1].append((time, progress))
                    continue
                groups.append([(time, progress)])
                last_x = x
            for group in groups:
                x = geo.x(group[0][0])
                lines = [
                    f"renewed at {format_time(t)} UTC" + (f", progress {_text(p)}" if p is not None else "")
                    for t, p in group[:10]
                ]
                if len(group) > 10:
                    lines.append(f"… and {len(group) - 10} more")
                add(
                    f'<line x1="{_n(x)}" y1="{_n(bar.y + 3)}" x2="{_n(x)}" y2="{_n(bar.y + bar.height - 3)}"'
                    ' stroke="#1a1a1a" stroke-width="1.5"'
                    + _attrs(
                        data_kind="renewal",
                        data_token=bar.lease.token,
                        data_resource=lane.name,
                        data_count=len(group),
                        data_time=group[0][0],
                    )
                    + f"><title>{_esc(f'token {bar.lease.token}: ' + chr(10).join(lines))}</title></line>\n"
                )
        # Token labels (only on bars wide enough to hold them).
        for bar in lane_bars:
            if bar.label is not None:
                add(
                    f'<text x="{_n(bar.x + 3)}" y="{_n(bar.y + bar.height / 2 + 4)}" font-size="{TOKEN_FONT}"'
                    f' fill="{ink_on(bar.colour)}" pointer-events="none"'
                    + _attrs(data_kind="token-label", data_token=bar.lease.token, data_resource=lane.name)
                    + f">{_esc(bar.label)}</text>\n"
                )
        marks_of_lane[lane.index] = lane_bars
        add("</g>\n")

    # Takeovers, completions, revokes and rejections: each at its own time, each kind in its own row.
    lane_marks: dict[int, list[Mark]] = {}
    for mark in geo.marks:
        lane_marks.setdefault(mark.lane.index, []).append(mark)
    for lane in geo.lanes:
        previous_of = {}
        ordered = sorted(marks_of_lane.get(lane.index, []), key=lambda bar: bar.lease.token)
        for before, after in zip(ordered, ordered[1:]):
            previous_of[after.lease.token] = before.lease
        found = lane_marks.get(lane.index, [])
        if not found:
            continue
        add(f'<g data-kind="marks"{_attrs(data_resource=lane.name)}>\n')
        for mark in found:
            add(_draw_mark(mark, previous_of))
        add("</g>\n")
    if geo.lanes and geo.t0 <= geo.now <= geo.t1:
        x = geo.x(geo.now)
        add(
            f'<line x1="{_n(x)}" y1="{LANES_TOP - 4}" x2="{_n(x)}" y2="{lanes_bottom}" stroke="#888888"'
            f' stroke-dasharray="4 3" data-kind="now" data-time="{geo.now}"><title>now: {format_time(geo.now)} UTC'
            "</title></line>\n"
        )
    elif not geo.lanes:
        add(f'<text x="{LABEL_WIDTH}" y="{LANES_TOP + 20}" font-size="13" data-kind="empty">no leases</text>\n')

    # Legend: a swatch per holder, then the key to the symbols.
    columns = geo.legend_columns
    label_chars = int((LEGEND_COLUMN - 30) // (LABEL_FONT * CHAR_ADVANCE))
    add(
        f'<g data-kind="legend"><text x="12" y="{_n(geo.legend_top - 8)}" font-size="12" font-weight="bold">'
        "Holders</text>\n"
    )
    for i, (holder, label) in enumerate(geo.holders):
        x = 12 + (i % columns) * LEGEND_COLUMN
        y = geo.legend_top + (i // columns) * LEGEND_ROW
        full = f"{_text(label)} ({_text(holder)})" if label else _text(holder)
        shown = f"{shorten(_text(label), 24)} · {_short_address(_text(holder))}" if label else _text(holder)
        add(
            f"<g{_attrs(data_kind='legend-entry', data_holder=_text(holder), data_colour=geo.colours[holder])}>"
            f'<rect x="{x}" y="{_n(y)}" width="14" height="12" fill="{geo.colours[holder]}" data-kind="swatch"/>'
            f'<text x="{x + 20}" y="{_n(y + 10)}" font-size="{LABEL_FONT}">{_esc(shorten(shown, label_chars))}'
            f"<title>{_esc(full)}</title></text></g>\n"
        )
    y = geo.legend_top + -(-len(geo.holders) // columns) * LEGEND_ROW + 8
    add(
        f'<text x="12" y="{_n(y + 10)}" font-size="11" fill="#333333" data-kind="key">'
        f'<tspan fill="{TAKEOVER_COLOURS["expired"]}">▼</tspan> takeover (after expiry / reacquired)  '
        f'<tspan fill="{TAKEOVER_COLOURS["revoked"]}">▼ ✕</tspan> revoke (and the revoked lease)  '
        f'<tspan fill="{TAKEOVER_COLOURS["granted"]}">▼</tspan> grant  '
        "| renewal  ◆ completion  "
        f'<tspan fill="{REJECTION_COLOUR}">✕</tspan> write rejected by a guard  ┆ now</text>\n'
        f'<text x="12" y="{_n(y + 28)}" font-size="11" fill="#333333" data-kind="notes">'
        f"{len(geo.bars)} leases on {len(geo.lanes)} resources, {len(geo.holders)} holders · times in UTC"
        f" (chain time), {format_time(geo.t0)} – {format_time(geo.t1)}"
        + (" (the window asked: leases cut at its edges)" if windowed else "")
        + " · a token too long for its bar is in the bar's tooltip</text>\n"
    )
    add("</g>\n</svg>\n</body></html>\n")
    return "".join(out)
