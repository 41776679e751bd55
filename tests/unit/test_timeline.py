"""The timeline renderer without a browser: input validation, escaping, layout arithmetic.

The browser test (``tests/integration/test_timeline_browser.py``) checks what
Chromium actually draws from the same page.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from chainfence._sdk.names import display, display_text
from chainfence.audit import timeline
from chainfence.audit.timeline import Rejection, TimelineLease, layout, render
from chainfence.errors import InvalidInput
from tests.support import timeline_scenario as scenario
from tests.support.svg_dom import ALLOWED, Page, tooltip
from tests.support.timeline_scenario import ALICE, BOB, CAROL, NOW, T

# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


def lease(**changes) -> TimelineLease:
    fields = dict(resource="r", token=1, holder=ALICE, start=10, end=20, end_reason="released", reason="unheld")
    fields.update(changes)
    return TimelineLease(**fields)


@pytest.mark.parametrize(
    "changes",
    [
        {"token": 0},
        {"token": True},
        {"token": "1"},
        {"resource": ""},
        {"resource": 5},
        {"holder": ""},
        {"holder": None},
        {"holder_label": 7},
        {"start": -1},
        {"start": 1.5},
        {"end": 5},  # before start
        {"end": None},  # but end_reason says released
        {"end_reason": "live"},  # but end is set
        {"end_reason": "exploded"},
        {"reason": "because"},
        {"renewals": [(15,)]},
        {"renewals": [(5, None)]},  # before start
        {"renewals": [(25, None)]},  # after end
        {"renewals": [(15, 1.5)]},
        {"renewals": "oops"},
        {"completion_digest": 12},
        {"completions": [(5, None)]},  # before start
        {"completions": [(25, None)]},  # after end
        {"completions": [(15, 3)]},
        {"completions": [(15,)]},
        {"completions": "oops"},
        {"admin": ""},
        {"revoked_by": 3},
    ],
)
def test_a_bad_lease_field_raises_invalid_input(changes):
    """Every field is checked when the record is built, with a typed error (also a ValueError)."""
    with pytest.raises(InvalidInput):
        lease(**changes)


@pytest.mark.parametrize(
    "changes", [{"time": -1}, {"token": -1}, {"token": False}, {"holder": ""}, {"reason": None}, {"resource": b""}]
)
def test_a_bad_rejection_field_raises_invalid_input(changes):
    fields = dict(resource="r", time=10, token=1, holder=ALICE, reason="StaleToken")
    fields.update(changes)
    with pytest.raises(InvalidInput):
        Rejection(**fields)


@pytest.mark.parametrize(
    "kwargs",
    [{"now": -5}, {"now": 1.0}, {"width": 50}, {"width": 10**6}, {"width": "900"}, {"title": None}],
)
def test_render_checks_its_arguments(kwargs):
    with pytest.raises(InvalidInput):
        render([lease()], **kwargs)


def test_render_refuses_other_objects_and_duplicate_tokens():
    with pytest.raises(InvalidInput):
        render([{"token": 1}])
    with pytest.raises(InvalidInput):
        render([lease()], rejections=["rejected"])
    with pytest.raises(InvalidInput, match="given twice"):
        render([lease(), lease(start=30, end=40)])


def test_renewals_are_stored_as_a_tuple_so_the_record_stays_frozen():
    record = lease(renewals=[[12, None], (15, b"\x01")])
    assert record.renewals == ((12, None), (15, b"\x01"))
    with pytest.raises(AttributeError):
        record.token = 2


# ---------------------------------------------------------------------------
# Escaping: names and labels are untrusted bytes from the chain
# ---------------------------------------------------------------------------

HOSTILE_TEXT = [
    "<script>alert(1)</script>",
    '"><svg onload=alert(1)>',
    "</title></text></svg><iframe src=//evil>",
    "a&amp;b",
    "rtl\u202eyliad",
    "zero\u200bwidth",
    "line\nbreak\r\x00nul\x1b[31m",
    "<!-- comment -->",
    "<![CDATA[x]]>",
]


def test_hostile_text_everywhere_renders_as_inert_text():
    """Names, holders, labels, reasons, digests, admins and the title carrying markup, bidi overrides and
    controls become text: no element, attribute or raw control character of theirs reaches the page."""
    leases, rejections = [], []
    for i, bad in enumerate(HOSTILE_TEXT):
        leases.append(
            TimelineLease(
                bad,
                1,
                f"0x{i:040x}{bad}",
                bad,
                T,
                T + 10,
                "revoked",
                "granted",
                renewals=[(T + 5, bad)],
                completion_digest=bad,
                admin=bad,
                revoked_by=bad,
            )
        )
        rejections.append(Rejection(bad, T + 3, 1, bad, bad))
    page = render(leases, rejections=rejections, title=HOSTILE_TEXT[0], now=NOW)
    dom = Page(page)
    assert {node.tag for node in dom.nodes} <= ALLOWED
    for node in dom.nodes:
        assert all(not name.startswith("on") and name not in ("src", "href", "xlink:href") for name in node.attrs)
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\u202a-\u202e\u2066-\u2069]", page)
    shown = {node.attrs["data-resource"] for node in dom.kind("lane")}
    assert shown == {display(bad.encode()) for bad in HOSTILE_TEXT}
    assert "rtl\\u202eyliad" in shown and "line\\x0abreak\\x0d\\x00nul\\x1b[31m" in shown
    labels = [tooltip(node) for node in dom.kind("lane-label")]
    assert labels == [display(bad.encode()) for bad in HOSTILE_TEXT]
    holders = {node.attrs["data-holder"] for node in dom.kind("legend-entry")}
    assert holders == {display_text(f"0x{i:040x}{bad}") for i, bad in enumerate(HOSTILE_TEXT)}
    assert dom.kind("title")[0].text == "<script>alert(1)</script>"


def test_control_without_html_escaping_hostile_names_become_elements(monkeypatch):
    """The check above can fail: with the HTML escaping removed, the same names put elements in the page."""
    monkeypatch.setattr(timeline, "_esc", lambda text: text)
    leases = [TimelineLease(bad, 1, ALICE, None, T, T + 10, "released", "unheld") for bad in HOSTILE_TEXT]
    tags = {node.tag for node in Page(render(leases, now=NOW)).nodes}
    assert {"script", "iframe"} <= tags - ALLOWED


def test_raw_name_bytes_are_shown_as_display_shows_them():
    """Bytes that are not UTF-8 and a bidi override are escaped unambiguously; the lane keeps them apart
    from a name that spells the escape literally."""
    page = render(scenario.leases(), now=NOW)
    dom = Page(page)
    assert [node.attrs["data-resource"] for node in dom.kind("lane")] == ["reports/daily", scenario.HOSTILE_SHOWN]
    assert not dom.kind("lane")[1].children[1].text.startswith("<")  # a label, not markup
    two = render([lease(resource=b"\xff"), lease(resource="\\xff", holder=BOB)])
    assert [node.attrs["data-resource"] for node in Page(two).kind("lane")] == ["\\xff", "\\\\xff"]
    same = render([lease(resource=b"reports/daily"), lease(resource="reports/daily", token=2, start=30, end=40)])
    assert [node.attrs["data-resource"] for node in Page(same).kind("lane")] == ["reports/daily"]


def test_the_page_loads_nothing_and_runs_nothing():
    page = render(scenario.leases(), rejections=scenario.rejections(), now=NOW)
    assert "<script" not in page.lower().replace("&lt;script", "")
    for needle in ("src=", "href=", "url(", "@import", "<link", "<img", "<iframe"):
        assert needle not in page.replace("&lt;img src=x", "")
    assert "default-src 'none'" in page


def test_the_module_is_pure():
    """No web3, no chain, no network: it imports the standard library and two small chainfence modules."""
    tree = ast.parse(Path(timeline.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(("." * node.level) + (node.module or ""))
    assert imported <= {
        "__future__",
        "collections.abc",
        "dataclasses",
        "..errors",
        ".._sdk",
        "colorsys",
        "functools",
        "hashlib",
        "html",
        "datetime",
    }, imported


# ---------------------------------------------------------------------------
# Layout arithmetic
# ---------------------------------------------------------------------------


def test_bars_sit_where_their_times_are():
    geo = layout(scenario.leases(), scenario.rejections(), now=NOW, width=900)
    assert geo.x(geo.t0) == geo.plot_left and geo.x(geo.t1) == pytest.approx(geo.plot_left + 900)
    assert geo.t0 < T and geo.t1 > NOW  # a margin either side
    for bar in geo.bars:
        lease_ = bar.lease
        assert bar.x == pytest.approx(geo.x(lease_.start))
        until = lease_.end if lease_.end is not None else NOW
        assert bar.until == until
        assert bar.width == pytest.approx(geo.x(until) - geo.x(lease_.start) - timeline.BAR_GAP)
        assert bar.y == bar.lane.y + timeline.MARKER_STRIP
    assert [lane.name for lane in geo.lanes] == ["reports/daily", scenario.HOSTILE_SHOWN]
    assert geo.lanes[1].y - geo.lanes[0].y == timeline.LANE_HEIGHT


def test_a_live_lease_runs_to_now_and_now_defaults_to_the_latest_time():
    live = [lease(end=None, end_reason="live"), lease(token=2, start=30, end=70)]
    assert layout(live, now=100).bars[0].until == 100
    assert layout(live).now == 70 and layout(live).bars[0].until == 70
    assert layout([lease(start=200, end=None, end_reason="live")], now=100).bars[0].until == 200  # never backwards


def test_a_lease_released_in_its_own_block_is_drawn_over_the_lease_after_it():
    """Issue 27: a lease acquired and released in one block was a 1 px bar drawn first, under the bar of the
    lease acquired right after it: invisible. It is drawn last, INSTANT_WIDTH px wide centred on its moment,
    outlined, its token in the tooltip."""
    leases = [lease(start=100, end=100), lease(token=2, start=100, end=100_000)]
    geo = layout(leases, width=1000)
    wide, instant = geo.bars  # the instant one last: drawn over the other
    assert instant.lease.token == 1 and instant.width == timeline.INSTANT_WIDTH and instant.label is None
    assert instant.x == geo.x(100) - timeline.INSTANT_WIDTH / 2
    assert wide.label == "2"
    dom = Page(render(leases, width=1000))
    bars = dom.kind("bar")
    assert [node.attrs["data-token"] for node in bars] == ["2", "1"]
    assert bars[1].attrs["data-instant"] == "true" and bars[1].attrs["stroke"] == "#111111"
    assert "acquired and released in the same block (0 s)" in tooltip(bars[1])
    assert "data-instant" not in bars[0].attrs
    assert [node.attrs["data-token"] for node in dom.kind("token-label")] == ["2"]


def test_labels_appear_exactly_when_they_fit():
    """A token label is drawn only on a bar at least as wide as its estimated text plus padding."""
    token = 123456
    need = timeline.text_width(str(token), timeline.TOKEN_FONT) + 6
    for seconds in range(1, 200):
        geo = layout(
            [lease(token=token, start=0, end=seconds), lease(token=1, resource="other", start=0, end=200)], width=1000
        )
        bar = geo.bars[0]
        assert (bar.label is not None) == (bar.width >= need), seconds


def test_ticks_are_round_readable_and_far_enough_apart():
    for span in (5, 59, 600, 3_599, 7_200, 86_400, 3 * 86_400, 400 * 86_400, 30 * 365 * 86_400):
        geo = layout([lease(start=T, end=T + span)], width=1000)
        xs = [tick.x for tick in geo.ticks]
        assert len(xs) >= 2, span
        assert min(b - a for a, b in zip(xs, xs[1:])) >= 110 - 1e-6, span
        step = geo.ticks[1].time - geo.ticks[0].time
        assert all(tick.time % step == 0 for tick in geo.ticks)
        assert all(geo.t0 <= tick.time <= geo.t1 for tick in geo.ticks)
        read, date = set(), None
        for tick in geo.ticks:  # a tick reads as its label under the latest date shown at or before it
            date = tick.date or date
            read.add((date, tick.label))
        assert len(read) == len(geo.ticks), f"two ticks read the same ({span} s)"
    geo = layout([lease(start=T, end=T + 600)], width=1000)  # 2026-11-18 11:06:40 .. 11:16:40
    assert [tick.label for tick in geo.ticks][:2] == ["11:08", "11:10"]
    assert geo.ticks[0].date == "2026-11-18" and all(tick.date is None for tick in geo.ticks[1:])
    geo = layout([lease(start=T, end=T + 40)], width=1000)
    assert re.fullmatch(r"\d\d:\d\d:\d\d", geo.ticks[0].label)
    night = layout([lease(start=T + 12 * 3600, end=T + 14 * 3600)], width=1000)  # 23:06 to 01:06 UTC
    assert [tick.date for tick in night.ticks if tick.date] == ["2026-11-18", "2026-11-19"]


def test_the_plot_grows_with_the_busiest_lane_and_stops_growing():
    few = layout([lease(token=i, start=i * 10, end=i * 10 + 5) for i in range(1, 11)])
    assert few.plot_width == timeline.MIN_PLOT_WIDTH
    many = layout([lease(token=i, start=i * 10, end=i * 10 + 5) for i in range(1, 501)])
    assert many.plot_width == 500 * timeline.PX_PER_LEASE
    lots = layout([lease(token=i, start=i * 10, end=i * 10 + 5) for i in range(1, 5001)])
    assert lots.plot_width == timeline.MAX_PLOT_WIDTH


def test_thousands_of_leases_each_get_a_bar_and_renewal_ticks_merge():
    """5,000 leases in one lane: 5,000 bars (none lost), labels only where they fit, and every renewal
    counted by a tick (merged ticks carry their count)."""
    records = [
        lease(
            token=i,
            start=i * 10,
            end=i * 10 + 9,
            holder=f"0x{i % 7:040x}",
            renewals=[(i * 10 + k, None) for k in range(1, 9)],
        )
        for i in range(1, 5001)
    ]
    dom = Page(render(records))
    bars = dom.kind("bar")
    assert len(bars) == 5000 and {node.attrs["data-token"] for node in bars} == {str(i) for i in range(1, 5001)}
    assert all(float(node.attrs["width"]) >= timeline.MIN_BAR_WIDTH for node in bars)
    assert float(dom.kind("timeline")[0].attrs["data-plot-width"]) == timeline.MAX_PLOT_WIDTH
    # 16,000 px for about 50,000 s: a bar is about 2.9 px, too thin for ticks; it counts its renewals.
    assert dom.kind("renewal") == []
    assert {node.attrs["data-renewals"] for node in bars} == {"8"}
    assert all("renewals: 8" in tooltip(node) for node in bars)
    # No token fits on a 2.9 px bar: no label is drawn, each bar's tooltip names its token.
    assert dom.kind("token-label") == []
    assert all(f"token {node.attrs['data-token']} " in tooltip(node) for node in bars)
    assert len(dom.kind("legend-entry")) == 7


def test_renewal_ticks_closer_than_3_px_merge_and_keep_their_count():
    """On a bar wide enough for ticks, every renewal is counted by exactly one drawn tick."""
    renewals = [(100 + t, None) for t in (1, 2, 3, 50, 51, 200, 400, 401, 402, 403)]
    geo = layout([lease(start=100, end=600, renewals=renewals)], width=1000)  # about 1.9 px per second
    ticks_ = Page(render([lease(start=100, end=600, renewals=renewals)], width=1000)).kind("renewal")
    xs = [float(node.attrs["x1"]) for node in ticks_]
    # 1.92 px per second: +2 merges into +1, +3 is 3.8 px from +1 and starts a tick, and so on.
    assert [int(node.attrs["data-count"]) for node in ticks_] == [2, 1, 2, 1, 2, 2]
    assert sum(int(node.attrs["data-count"]) for node in ticks_) == len(renewals)
    assert all(b - a >= timeline.TICK_MERGE_PX for a, b in zip(xs, xs[1:]))
    assert xs[0] == pytest.approx(geo.x(101), abs=0.01)  # the page rounds to 1/100 px


def test_in_a_busy_lane_the_long_leases_keep_their_labels():
    records = [lease(token=i, start=i * 10, end=i * 10 + (2_000 if i % 500 == 0 else 9)) for i in range(1, 3001)]
    geo = layout(records)
    labelled = {bar.lease.token for bar in geo.bars if bar.label is not None}
    assert labelled == {500, 1000, 1500, 2000, 2500, 3000}


def test_holder_colours_are_distinct_stable_and_order_free():
    holders = [f"0x{i:040x}" for i in range(30)]
    colours = timeline.holder_colours(holders)
    assert len(set(colours.values())) == 30
    assert colours == timeline.holder_colours(list(reversed(holders)))
    assert set(timeline.PALETTE) < set(colours.values())  # the palette first, then generated hues
    one = timeline.holder_colours([ALICE, ALICE.lower()])
    assert one[ALICE] == one[ALICE.lower()]  # an address in two spellings is one holder


def test_a_holder_alone_has_the_colour_its_address_hashes_to():
    alone = {h: timeline.holder_colours([h])[h] for h in (ALICE, BOB, CAROL)}
    pair = timeline.holder_colours([ALICE, BOB, CAROL])
    assert len(set(alone.values())) == 3  # these three addresses hash to three slots...
    assert pair == alone  # ...so each keeps its own colour in company
    crowd = timeline.holder_colours([ALICE, BOB, CAROL] + [f"0x{i:040x}" for i in range(11)])
    assert len(set(crowd.values())) == 14  # past the palette, still one colour each


def test_ink_and_shortening():
    assert timeline.ink_on("#ffffff") == "#111111" and timeline.ink_on("#2f4b7c") == "#ffffff"
    assert timeline.shorten("reports/daily/2026-11-22", 12) == "repor…-11-22"
    assert len(timeline.shorten("x" * 300, 27)) == 27 and timeline.shorten("short", 27) == "short"


def test_every_mark_of_the_scenario_is_drawn_with_its_data():
    dom = Page(render(scenario.leases(), rejections=scenario.rejections(), now=NOW))
    takeovers = {(n.attrs["data-resource"], n.attrs["data-token"]): n for n in dom.kind("takeover")}
    assert {key: n.attrs["data-reason"] for key, n in takeovers.items()} == {
        ("reports/daily", "2"): "expired",
        ("reports/daily", "3"): "revoked",
        ("reports/daily", "4"): "granted",
        (scenario.HOSTILE_SHOWN, "3"): "reacquired",
    }
    assert "token 1 (" in tooltip(takeovers["reports/daily", "2"]) and "superseded" in tooltip(
        takeovers["reports/daily", "2"]
    )
    assert takeovers["reports/daily", "4"].attrs["data-admin"] == scenario.ADMIN
    [revoke] = dom.kind("revoke")
    assert revoke.attrs["data-token"] == "2" and revoke.attrs["data-admin"] == scenario.ADMIN
    [completion] = dom.kind("completion")
    assert completion.attrs["data-token"] == "3" and scenario.DIGEST in tooltip(completion)
    assert [n.attrs["data-count"] for n in dom.kind("renewal")] == ["1", "1", "1"]
    assert "progress 0x05" in tooltip(dom.kind("renewal")[1])
    assert [n.attrs["data-token"] for n in dom.kind("rejection")] == ["1", "2"]
    assert "<img src=x onerror=alert(1)>" in tooltip(dom.kind("rejection")[1])  # as text
    legend = {n.attrs["data-holder"]: n for n in dom.kind("legend-entry")}
    assert set(legend) == {ALICE, BOB, CAROL}
    assert "\\u202e" in tooltip(legend[CAROL].children[1])
    assert len(dom.kind("now")) == 1 and dom.kind("now")[0].attrs["data-time"] == str(NOW)


def test_an_empty_picture_says_so():
    dom = Page(render([], now=T))
    assert dom.kind("empty") and not dom.kind("bar")
    only_rejections = Page(render([], rejections=[Rejection("r", T, 3)]))
    assert [n.attrs["data-resource"] for n in only_rejections.kind("lane")] == ["r"]


# ---------------------------------------------------------------------------
# Every event at its own time; no mark hides another (issue #20)
# ---------------------------------------------------------------------------

ADMIN = scenario.ADMIN


def granted_over_live() -> list[TimelineLease]:
    """alice's live lease, revoked by the admin to grant the resource to bob, in one transaction (one moment)."""
    return [
        lease(token=1, start=T, end=T + 600, end_reason="granted", revoked_by=ADMIN, renewals=[(T + 100, None)]),
        lease(token=2, holder=BOB, start=T + 600, end=None, end_reason="live", reason="granted", admin=ADMIN),
    ]


def overlapping(marks) -> list[tuple]:
    pairs = []
    for i, a in enumerate(marks):
        for b in marks[i + 1 :]:
            (l1, t1, r1, b1), (l2, t2, r2, b2) = a.box, b.box
            if a.lane == b.lane and l1 < r2 and l2 < r1 and t1 < b2 and t2 < b1:
                pairs.append((a.kind, a.times, b.kind, b.times))
    return pairs


def test_a_completion_is_drawn_when_it_happened_not_at_the_release():
    done = lease(start=T, end=T + 800, completions=[(T + 300, "0x" + "ab" * 32)], completion_digest="0x" + "ab" * 32)
    geo = layout([done], width=900)
    [mark] = [m for m in geo.marks if m.kind == "completion"]
    assert mark.x == pytest.approx(geo.x(T + 300)) and mark.times == (T + 300,)
    [node] = Page(render([done], width=900)).kind("completion")
    assert node.attrs["data-time"] == str(T + 300)
    assert timeline.format_time(T + 300) in tooltip(node)


def test_control_a_completion_without_its_time_is_drawn_at_the_end():
    """What the timeline had before it knew completion times: the mark at the lease's end (its release)."""
    done = lease(start=T, end=T + 800, completion_digest="0x" + "ab" * 32)
    geo = layout([done], width=900)
    [mark] = [m for m in geo.marks if m.kind == "completion"]
    assert mark.times == (T + 800,)


def test_a_plain_lease_draws_each_of_its_completions():
    done = lease(start=T, end=T + 800, completions=[(T + 100, b"\1"), (T + 500, b"\2")])
    marks = [m for m in layout([done], width=900).marks if m.kind == "completion"]
    assert [m.times for m in marks] == [(T + 100,), (T + 500,)]


def test_a_grants_takeover_never_hides_the_revoke_it_made():
    geo = layout(granted_over_live(), width=900)
    kinds = {m.kind: m for m in geo.marks}
    assert kinds["revoke"].x == kinds["takeover"].x == pytest.approx(geo.x(T + 600)), "one moment, one x"
    assert overlapping(geo.marks) == []
    assert kinds["revoke"].top >= geo.bars[0].y + geo.bars[0].height, "below the bars, in its own row"


def test_revoked_by_is_written_over_the_revoked_lease_not_the_next_one():
    geo = layout(granted_over_live(), width=900)
    revoked_bar = geo.bars[0]
    [revoke] = [m for m in geo.marks if m.kind == "revoke"]
    assert revoke.label == "revoked by " + ADMIN[:6] + "…" + ADMIN[-4:]
    left = revoke.label_x - timeline.text_width(revoke.label, 10)
    assert revoked_bar.x <= left and revoke.label_x <= revoked_bar.x + revoked_bar.width
    dom = Page(render(granted_over_live(), width=900))
    assert [n.attrs["data-token"] for n in dom.kind("revoke-label")] == ["1"]
    assert all("revoked" not in n.text for n in dom.kind("takeover-label"))
    after_revoke = [
        lease(token=1, start=T, end=T + 600, end_reason="revoked", revoked_by=ADMIN),
        lease(token=2, holder=BOB, start=T + 650, end=None, end_reason="live", reason="revoked", admin=ADMIN),
    ]
    page = Page(render(after_revoke, now=T + 1_200, width=900))
    labels = {n.attrs["data-token"]: n.text for n in page.kind("takeover-label")}
    assert labels == {"2": "after revoke"}, "the next holder's bar says what happened to it, not who revoked"


def test_no_mark_overlaps_another_and_every_event_is_counted():
    """The scenario, a grant over a live lease, and a crowded lane of short leases with completions, revokes
    and rejections at close times: no two drawn marks overlap, and each event is in exactly one mark."""
    crowded = []
    for i in range(1, 301):
        start = T + 10 * i
        crowded.append(
            lease(
                resource="busy",
                token=i,
                holder=[ALICE, BOB, CAROL][i % 3],
                start=start,
                end=start + 10,
                end_reason="revoked" if i % 4 == 0 else "superseded",
                reason="revoked" if i % 4 == 1 and i > 1 else "reacquired",
                revoked_by=ADMIN if i % 4 == 0 else None,
                completions=[(start + 2, None), (start + 3, None)] if i % 5 == 0 else [],
            )
        )
    rejections = [Rejection("busy", T + 10 * i + 5, i) for i in range(1, 301, 2)]
    for leases_, rejected in (
        (scenario.leases(), scenario.rejections()),
        (granted_over_live(), []),
        (crowded, rejections),
    ):
        geo = layout(leases_, rejected, width=1_200)
        assert overlapping(geo.marks) == []
        counted = {kind: sum(len(m.times) for m in geo.marks if m.kind == kind) for kind in MARK_KINDS}
        assert counted["takeover"] == sum(1 for x in leases_ if x.reason in timeline.TAKEOVER_REASONS)
        assert counted["revoke"] == sum(1 for x in leases_ if x.end_reason in ("revoked", "granted"))
        assert counted["rejection"] == len(rejected)
        assert counted["completion"] == sum(
            len(x.completions) or int(x.completion_digest is not None or x.end_reason == "completed") for x in leases_
        )
    merged = [m for m in layout(crowded, rejections, width=1_200).marks if len(m.times) > 1]
    assert merged, "a crowded lane merges close marks of one kind"
    dom = Page(render(crowded, rejections=rejections, width=1_200))
    assert all(int(n.attrs.get("data-count", "1")) >= 1 for n in dom.kind("takeover"))


MARK_KINDS = ("takeover", "completion", "revoke", "rejection")


# ---------------------------------------------------------------------------
# Issue 27: a time window, lanes for resources without leases
# ---------------------------------------------------------------------------


def _day() -> list[TimelineLease]:
    """A day of leases on one resource, and a five-second handover at noon."""
    day = [lease(token=1, start=T, end=T + 43_190, end_reason="released", holder=ALICE)]
    day.append(lease(token=2, start=T + 43_195, end=T + 86_000, end_reason="released", reason="released", holder=BOB))
    return day


def test_since_and_until_draw_that_window_only():
    """On main a 5 s handover in a day was about 0.06 px of a 960 px plot; with a window around it, it is wide."""
    whole = layout(_day(), width=960)
    assert whole.x(T + 43_195) - whole.x(T + 43_190) < 0.1
    geo = layout(_day(), width=960, since=T + 43_180, until=T + 43_210)
    assert (geo.t0, geo.t1) == (T + 43_180, T + 43_210)
    gap = geo.x(T + 43_195) - geo.x(T + 43_190)
    assert gap == pytest.approx(5 * 960 / 30)
    first, second = geo.bars
    assert first.x == geo.plot_left, "cut at the window's left edge"
    assert second.x + second.width <= geo.plot_left + geo.plot_width, "cut at its right edge"
    assert first.until == T + 43_190 and second.until == T + 86_000, "the lease's own times stay whole"
    # a lease outside the window is not drawn; its lane stays
    early = layout(_day(), width=960, since=T + 50_000, until=T + 60_000)
    assert [bar.lease.token for bar in early.bars] == [2]
    none = Page(render(_day(), width=960, since=T + 90_000, until=T + 91_000))
    assert none.kind("bar") == [] and [n.text for n in none.kind("lane-empty")] == ["no leases in this window"]


def test_a_window_drops_the_marks_and_ticks_outside_it():
    leases = [
        lease(token=1, start=T, end=T + 100, end_reason="expired", renewals=[(T + 10, None), (T + 90, None)]),
        lease(token=2, start=T + 150, end=None, end_reason="live", reason="expired"),
    ]
    rejections = [Rejection("r", T + 20, 1, ALICE, "StaleToken"), Rejection("r", T + 160, 1, ALICE, "StaleToken")]
    dom = Page(render(leases, rejections=rejections, now=T + 200, since=T + 50, until=T + 170, width=1000))
    assert [node.attrs["data-time"] for node in dom.kind("renewal")] == [str(T + 90)]
    assert [node.attrs["data-kind"] for node in dom.nodes if node.attrs.get("data-kind") == "now"] == []
    marks = [node for node in dom.nodes if node.attrs.get("data-kind") in ("takeover", "rejection")]
    assert sorted((node.attrs["data-kind"], node.attrs["data-time"]) for node in marks) == [
        ("rejection", str(T + 160)),
        ("takeover", str(T + 150)),
    ]
    assert "(the window asked: leases cut at its edges)" in dom.kind("notes")[0].text


@pytest.mark.parametrize(
    "since, until", [(-1, None), (None, 1.5), (10, 10), (20, 10), (True, None)], ids=lambda value: repr(value)
)
def test_a_bad_window_is_refused(since, until):
    with pytest.raises(InvalidInput):
        layout(_day(), since=since, until=until)


def test_a_resource_named_without_leases_gets_its_lane_saying_so():
    """Issue 27: `audit timeline a b` with no lease on b dropped b's lane silently."""
    geo = layout([lease(resource="jobs/a")], resources=["jobs/a", "jobs/empty", ("backfill", "2026-11-01")])
    assert [lane.name for lane in geo.lanes] == ["jobs/a", "jobs/empty", "backfill»2026-11-01"]
    dom = Page(render([lease(resource="jobs/a")], resources=["jobs/a", "jobs/empty"]))
    empty = dom.kind("lane-empty")
    assert [(node.attrs["data-resource"], node.text) for node in empty] == [("jobs/empty", "no leases")]
    assert dom.kind("empty") == [], "not the page's own 'no leases': it has lanes"
    alone = Page(render([], resources=["jobs/empty"]))
    assert [node.text for node in alone.kind("lane-empty")] == ["no leases"]
    with pytest.raises(InvalidInput):
        layout([], resources=[""])
