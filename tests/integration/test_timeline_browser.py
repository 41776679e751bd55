"""The timeline page in a real browser: headless Chromium (Debian's ``chromium``) parses it and paints it.

Two launches: ``--dump-dom`` shows the DOM the browser built (the lanes,
bars and marks with their ``data-`` attributes, and no element from a
hostile name), ``--screenshot`` shows the pixels (each bar in its holder's
colour where the layout puts it, ink where labels are, the rejection
marks in red). Chromium is required, not optional: without it this test
fails and says how to install it (``scripts/test.sh`` installs it when run
as root).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from chainfence.audit import timeline
from chainfence.audit.timeline import layout, render
from tests.support import png
from tests.support import timeline_scenario as scenario
from tests.support.svg_dom import ALLOWED, Page, tooltip

WIDTH = 900  # plot width: the whole page fits one screenshot

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]


@pytest.fixture(scope="module")
def chromium() -> str:
    path = os.environ.get("CHAINFENCE_CHROMIUM") or shutil.which("chromium")
    if path is None:
        pytest.fail(
            "Chromium is needed to check the timeline page in a browser and was not found. Install Debian's "
            "package as root: `apt-get install -y chromium` (scripts/test.sh does it when run as root), or point "
            "CHAINFENCE_CHROMIUM at a Chromium binary."
        )
    return path


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, timeline.Layout]:
    leases, rejections = scenario.leases(), scenario.rejections()
    out = tmp_path_factory.mktemp("timeline") / "timeline.html"
    out.write_text(render(leases, rejections=rejections, now=scenario.NOW, width=WIDTH), encoding="utf-8")
    return out, layout(leases, rejections, now=scenario.NOW, width=WIDTH)


def run_chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,  # a safety net on a loaded box, not what the test measures
    )
    assert result.returncode == 0, f"chromium exited {result.returncode}: {result.stderr[-2000:]}"
    return result


def test_the_browser_builds_the_drawn_dom(chromium, page, tmp_path):
    """Lanes, bars, labels and marks are in the browser's DOM with their data, and a name carrying
    <script> and a bidi override is a label, not an element."""
    path, geo = page
    dom = Page(run_chromium(chromium, tmp_path / "profile", "--dump-dom", path.as_uri()).stdout)
    source = Page(path.read_text(encoding="utf-8"))

    assert {node.tag for node in dom.nodes} <= ALLOWED  # no <script>, <img>, <iframe> from any name
    kinds = lambda tree: sorted(node.attrs.get("data-kind", "") for node in tree.nodes)  # noqa: E731
    assert kinds(dom) == kinds(source), "the browser parsed the page into another structure"

    lanes = [node.attrs["data-resource"] for node in dom.kind("lane")]
    assert lanes == ["reports/daily", scenario.HOSTILE_SHOWN]
    assert [tooltip(node) for node in dom.kind("lane-label")] == lanes
    assert dom.kind("lane-label")[1].text == geo.lanes[1].label  # shortened in the middle to fit the gutter

    bars = {(node.attrs["data-resource"], int(node.attrs["data-token"])): node for node in dom.kind("bar")}
    expected = {(timeline._name(lease.resource), lease.token): lease for lease in scenario.leases()}
    assert set(bars) == set(expected)
    for key, lease in expected.items():
        node = bars[key]
        assert node.attrs["data-holder"] == lease.holder
        assert node.attrs["fill"] == geo.colours[lease.holder]
        assert node.attrs["data-end-reason"] == lease.end_reason and node.attrs["data-reason"] == lease.reason
    assert (
        len(
            {
                bars["reports/daily", 1].attrs["fill"],
                bars["reports/daily", 2].attrs["fill"],
                bars[scenario.HOSTILE_SHOWN, 1].attrs["fill"],
            }
        )
        == 3
    )  # three holders, three colours

    labels = {(n.attrs["data-resource"], n.attrs["data-token"]): n.text for n in dom.kind("token-label")}
    assert labels == {key: str(key[1]) for key in [(r, str(t)) for r, t in expected]}
    reasons = {(n.attrs["data-resource"], n.attrs["data-token"]): n.attrs["data-reason"] for n in dom.kind("takeover")}
    assert reasons == {
        ("reports/daily", "2"): "expired",
        ("reports/daily", "3"): "revoked",
        ("reports/daily", "4"): "granted",
        (scenario.HOSTILE_SHOWN, "3"): "reacquired",
    }
    [completion] = dom.kind("completion")
    assert scenario.DIGEST in tooltip(completion)
    assert [(n.attrs["data-token"], n.attrs["data-holder"]) for n in dom.kind("rejection")] == [
        ("1", scenario.ALICE),
        ("2", scenario.BOB),
    ]
    assert {n.attrs["data-holder"] for n in dom.kind("legend-entry")} == {scenario.ALICE, scenario.BOB, scenario.CAROL}


def test_the_screenshot_shows_each_bar_in_its_holders_colour(chromium, page, tmp_path):
    """Pixels where the layout puts each bar are its holder's colour; labels put ink on bars and in the
    gutter; the rejections are red; a gap between leases is not a holder's colour."""
    path, geo = page
    shot = tmp_path / "timeline.png"
    size = f"--window-size={math.ceil(geo.width)},{math.ceil(geo.height)}"
    run_chromium(chromium, tmp_path / "profile", size, f"--screenshot={shot}", path.as_uri())
    image = png.decode(shot.read_bytes())
    assert (image.width, image.height) == (math.ceil(geo.width), math.ceil(geo.height))

    holder_colours = set(geo.colours.values())
    for bar in geo.bars:
        # Row y + 2: inside the bar, above its label's glyphs and its renewal ticks (they start at y + 3).
        y = int(bar.y) + 2
        inside = [int(bar.x) + 2, *(int(bar.x + bar.width * f) for f in (0.25, 0.5, 0.75)), int(bar.x + bar.width) - 3]
        for x in inside:
            assert image.hex(x, y) == bar.colour, (bar.lease.token, bar.lease.resource, x, y)
        # Just outside both ends: not this colour, unless a bar of the same colour is drawn there.
        for x in (int(bar.x) - 2, int(bar.x + bar.width) + 2):
            same_there = any(
                other.lane == bar.lane and other.colour == bar.colour and other.x <= x <= other.x + other.width
                for other in geo.bars
            )
            if not same_there:
                assert image.hex(x, y) != bar.colour, (bar.lease.token, bar.lease.resource, x, y)
        if bar.label is not None:  # the token is painted: pixels in its box that are not the bar's colour
            width = timeline.text_width(bar.label, timeline.TOKEN_FONT)
            box = [
                (x, y)
                for x in range(int(bar.x) + 3, int(bar.x + 3 + width))
                for y in range(int(bar.y) + 7, int(bar.y) + 16)
            ]
            assert sum(image.hex(x, y) != bar.colour for x, y in box) >= 5, bar.lease.token

    # The lane labels are painted in the gutter.
    for lane in geo.lanes:
        width = timeline.text_width(lane.label, timeline.LABEL_FONT)
        box = [(x, y) for x in range(8, int(8 + width)) for y in range(int(lane.y) + 18, int(lane.y) + 34)]
        assert sum(max(image.rgb(x, y)) < 120 for x, y in box) >= 30, lane.name

    # Between token 1's expiry (T+300) and token 2 (T+400), lane 0 shows no holder's colour.
    gap = int(geo.x(scenario.T + 350))
    assert image.hex(gap, int(geo.bars[0].y) + 2) not in holder_colours

    # Each rejection is a red cross centred under its lane's bars.
    for rejection in scenario.rejections():
        x = round(geo.x(rejection.time))
        y = round(geo.lanes[0].y + timeline.REJECTION_TOP + 4)
        near = [image.rgb(x + dx, y + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
        assert any(r > 180 and g < 80 and b < 80 for r, g, b in near), (rejection.time, near)


def test_a_grant_and_the_revoke_it_made_are_both_painted(chromium, tmp_path):
    """A grant over a live lease: the revoke of alice's lease and bob's grant happen at one moment. Chromium
    paints the grant's triangle in its colour and the revoke's cross in red, each in its own row at that x,
    and the "revoked by" label over alice's bar, not bob's (issue #20: the cross was under the triangle)."""
    from chainfence.audit.timeline import TimelineLease

    t = scenario.T
    leases = [
        TimelineLease("ops/db", 1, scenario.ALICE, "alice", t, t + 600, "granted", "unheld", revoked_by=scenario.ADMIN),
        TimelineLease("ops/db", 2, scenario.BOB, "bob", t + 600, None, "live", "granted", admin=scenario.ADMIN),
    ]
    out = tmp_path / "grant.html"
    out.write_text(render(leases, now=t + 900, width=WIDTH), encoding="utf-8")
    geo = layout(leases, now=t + 900, width=WIDTH)
    shot = tmp_path / "grant.png"
    size = f"--window-size={math.ceil(geo.width)},{math.ceil(geo.height)}"
    run_chromium(chromium, tmp_path / "profile", size, f"--screenshot={shot}", out.as_uri())
    image = png.decode(shot.read_bytes())
    marks = {mark.kind: mark for mark in geo.marks}
    takeover, revoke = marks["takeover"], marks["revoke"]
    assert round(takeover.x) == round(revoke.x)

    def painted(x: float, y: float, colour: str) -> bool:
        want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        near = [image.rgb(round(x) + dx, round(y) + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
        return any(all(abs(a - b) < 40 for a, b in zip(pixel, want, strict=True)) for pixel in near)

    assert painted(takeover.x, takeover.top + 3, timeline.TAKEOVER_COLOURS["granted"]), "the grant's triangle"
    assert painted(revoke.x, revoke.top + 5, timeline.REVOKE_COLOUR), "the revoke's cross, not hidden"
    alice_bar = geo.bars[0]
    label_left = revoke.label_x - timeline.text_width(revoke.label, 10)
    ink = [
        (x, y)
        for x in range(int(label_left), int(revoke.label_x))
        for y in range(int(revoke.top), int(revoke.top + 10))
        if max(image.rgb(x, y)) > 150 and image.rgb(x, y)[0] > 150 and image.rgb(x, y)[1] < 120
    ]
    assert len(ink) >= 20, "the label is painted in red"
    assert all(alice_bar.x <= x <= alice_bar.x + alice_bar.width for x, _ in ink), "over alice's lease"
