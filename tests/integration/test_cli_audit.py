"""`chainfence audit` as a script and a person use it: sync, each query (table and --json), --live,
verify (exit 12 on a tampered index), another registry's index (exit 11), bad input (exit 2)."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from chainfence.cli import _common

DAILY = "cli/daily"


def audit(anvil_node, registry, index, *args, json_out=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "chainfence",
            "audit",
            *args,
            "--index",
            str(index),
            "--rpc-url",
            anvil_node.url,
            "--registry",
            registry.address,
            *(["--json"] if json_out else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, (json.loads(done.stdout) if json_out and done.stdout.strip() else None)


@pytest.fixture
def played(on_anvil):
    chain = on_anvil.chain
    alice, bob = on_anvil.connect(chain.accounts[1]), on_anvil.connect(chain.accounts[2])
    first = alice.acquire(DAILY, ttl=60)
    first.renew(progress=b"step-1")
    chain.advance_time(61)
    second = bob.acquire(DAILY, ttl=600)
    bob.complete(DAILY, second.token, b"rows: 42")
    return on_anvil, alice, bob, first, second


def test_sync_then_every_query_answers_from_the_index(anvil_node, played, tmp_path):
    registry, alice, bob, first, second = played
    chain = registry.chain
    index = tmp_path / "audit.sqlite"
    done, synced = audit(anvil_node, registry, index, "sync")
    assert done.returncode == 0, done.stderr
    assert synced["status"]["behind"] == 0 and "sync [" not in done.stderr, "no progress bar off a terminal"
    done, history = audit(anvil_node, registry, index, "history", DAILY, "--no-sync")
    assert [(r["token"], r["holder"], r["reason"], r["status"]) for r in history["result"]] == [
        (first.token, alice.sender, "unheld", "expired"),
        (second.token, bob.sender, "expired", "live"),
    ]
    assert history["result"][0]["renewals"] == 1 and history["result"][0]["markers"] == 1
    _, token = audit(anvil_node, registry, index, "token", str(second.token))
    assert token["result"]["completions"] == 1
    _, at = audit(anvil_node, registry, index, "at", DAILY, "--time", str(first.expires_at - 1))
    assert [r["token"] for r in at["result"]] == [first.token]
    _, at_block = audit(anvil_node, registry, index, "at", DAILY, "--block", str(second.block_number))
    assert [r["token"] for r in at_block["result"]] == [second.token]
    _, takeovers = audit(anvil_node, registry, index, "takeovers", "--since", str(first.expires_at))
    assert [(t["previous_holder"], t["holder"], t["reason"]) for t in takeovers["result"]] == [
        (alice.sender, bob.sender, "expired")
    ]
    _, completions = audit(anvil_node, registry, index, "completions", DAILY)
    assert [c["token"] for c in completions["result"]] == [second.token]
    done, _ = audit(anvil_node, registry, index, "current", "--prefix", "cli/", json_out=False)
    assert DAILY in done.stdout and bob.sender in done.stdout and "blocks behind" not in done.stderr
    assert "at the head" in done.stderr
    done, _ = audit(anvil_node, registry, index, "history", DAILY, json_out=False)
    assert "released" not in done.stdout and "expired" in done.stdout and "1, last" in done.stdout
    live_done, live = audit(anvil_node, registry, tmp_path / "unused.sqlite", "history", DAILY, "--live")
    assert live["result"] == history["result"] and not (tmp_path / "unused.sqlite").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    held = alice.acquire("cli/long", ttl=600)
    chain.advance_time(5)
    stuck = [
        subprocess.run(
            [
                sys.executable,
                "-m",
                "chainfence",
                "stuck",
                *extra,
                "--longer-than",
                "1",
                "--json",
                "--rpc-url",
                anvil_node.url,
                "--registry",
                registry.address,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        for extra in (["--index", str(index)], [])
    ]
    assert all(done.returncode == 0 for done in stuck), stuck[0].stderr
    with_index, from_chain = (json.loads(done.stdout) for done in stuck)
    # bob's lease is live too: its completion (a plain lease's: a result recorded) did not end it
    assert [entry["token"] for entry in with_index["long_held"]] == [second.token, held.token]
    assert with_index == from_chain, "stuck --index answers as the chain does"


def test_verify_exits_12_on_a_tampered_index_and_11_on_another_registrys(anvil_node, played, tmp_path):
    registry, alice, bob, first, second = played
    index = tmp_path / "audit.sqlite"
    assert audit(anvil_node, registry, index, "sync")[0].returncode == 0
    ok, verified = audit(anvil_node, registry, index, "verify")
    assert ok.returncode == 0 and verified["checked"] >= 4
    with sqlite3.connect(index) as conn:
        conn.execute("UPDATE events SET holder = ? WHERE token = ?", (alice.sender, second.token))
    bad, report = audit(anvil_node, registry, index, "verify")
    assert bad.returncode == 12 and report["error"] == "AuditIndexDiffers"
    assert f"block {second.block_number}" in bad.stderr
    from chainfence import Registry

    other = Registry.deploy(registry.chain, max_ttl=60)
    mismatch, details = audit(anvil_node, other, index, "history", DAILY)
    assert mismatch.returncode == 11 and details["error"] == "AuditIndexMismatch"
    usage, _ = audit(anvil_node, registry, index, "history", "", json_out=False)
    assert usage.returncode == 2 and "InvalidResourceName" in usage.stderr


def test_the_progress_bar_draws_on_a_terminal_only(monkeypatch):
    for tty in (False, True):
        err = io.StringIO()
        err.isatty = lambda tty=tty: tty  # type: ignore[method-assign]
        monkeypatch.setattr(sys, "stderr", err)
        bar = _common.Progress(True)
        bar(50, 1, 100)
        bar(100, 1, 100)
        bar.close()
        assert ("sync [" in err.getvalue()) is tty
        if tty:
            assert "100.0%" in err.getvalue() and err.getvalue().endswith("\n")


def test_audit_timeline_draws_the_indexed_leases_with_rejections(anvil_node, played, tmp_path):
    """`chainfence audit timeline` syncs, turns the index's leases into the picture's input and writes the page:
    a bar per token in its resource's lane, the takeover after the expiry, the completion, the renewal and the
    overlaid rejection, and a hostile name drawn as text."""
    from tests.faults.test_hostile_names import publish
    from tests.support.svg_dom import ALLOWED, Page

    registry, alice, bob, first, second = played
    hostile = "evil\u202e<script>alert(1)</script>"
    publish(registry, bob.sender, hostile.encode())
    rejected = tmp_path / "rejections.json"
    rejected.write_text(
        json.dumps(
            [
                {
                    "resource": DAILY,
                    "time": first.expires_at + 1,
                    "token": first.token,
                    "holder": alice.sender,
                    "reason": "StaleToken",
                }
            ]
        )
    )
    out = tmp_path / "timeline.html"
    index = tmp_path / "audit.sqlite"
    done, answer = audit(
        anvil_node, registry, index, "timeline", DAILY, hostile, "--out", str(out), "--rejections", str(rejected)
    )
    assert done.returncode == 0, done.stderr
    assert answer["leases"] == 3
    page = Page(out.read_text())
    assert {node.tag for node in page.nodes} <= ALLOWED, "no markup from a name reaches the page"
    bars = page.kind("bar")
    assert sorted(int(bar.attrs["data-token"]) for bar in bars)[:2] == [first.token, second.token]
    labels = " ".join(node.text for node in page.kind("lane-label"))
    assert "\\u202e" in labels and "\u202e" not in labels, "the bidi override is drawn escaped"
    assert page.kind("takeover") and page.kind("completion") and page.kind("renewal") and page.kind("rejection")
    from chainfence.audit.index import AuditIndex

    with AuditIndex(index) as opened:
        (drawn,) = [lease for lease in opened.timeline_leases([DAILY]) if lease.token == second.token]
        assert drawn.end_reason == "live" and drawn.reason == "expired"
    bad, _ = audit(
        anvil_node, registry, index, "timeline", DAILY, "--out", str(out), "--rejections", str(tmp_path), json_out=False
    )
    assert bad.returncode == 2 and "cannot read rejections" in bad.stderr


def test_audit_timeline_windows_and_shows_instant_releases_and_resources_without_leases(anvil_node, played, tmp_path):
    """Issue 27: `audit timeline` had no time window, drew a lease released in the block it was acquired in
    under its successor's bar, and dropped a named resource with no leases without a word."""
    from tests.support.svg_dom import Page

    registry, alice, bob, first, second = played
    instant = alice.acquire("cli/instant", ttl=60)
    instant.release()  # the session's anvil keeps a logical clock: released at the time it was acquired
    after = bob.acquire("cli/instant", ttl=60)
    out = tmp_path / "timeline.html"
    index = tmp_path / "audit.sqlite"
    since, until = first.expires_at - 60, second.expires_at - 300
    done, answer = audit(
        anvil_node,
        registry,
        index,
        "timeline",
        DAILY,
        "cli/instant",
        "cli/never",
        "--out",
        str(out),
        "--since",
        str(since),
        "--until",
        _iso(until),
    )
    assert done.returncode == 0, done.stderr
    assert answer["empty"] == ["cli/never"]
    page = Page(out.read_text())
    (svg,) = [node for node in page.nodes if node.tag == "svg"]
    assert (int(svg.attrs["data-t0"]), int(svg.attrs["data-t1"])) == (since, until), "the window asked, ISO too"
    assert [node.attrs["data-resource"] for node in page.kind("lane-label")] == [DAILY, "cli/instant", "cli/never"]
    assert [node.attrs["data-resource"] for node in page.kind("lane-empty")] == ["cli/never"]
    instants = [bar for bar in page.kind("bar") if bar.attrs.get("data-instant") == "true"]
    assert [int(bar.attrs["data-token"]) for bar in instants] == [instant.token], "drawn, outlined"
    bars = [bar for bar in page.kind("bar") if bar.attrs["data-resource"] == "cli/instant"]
    assert [int(bar.attrs["data-token"]) for bar in bars] == [after.token, instant.token], "over the next lease"
    from chainfence.audit.index import AuditIndex

    with AuditIndex(index) as opened:  # the premise: acquired and released at one chain time
        drawn = {lease.token: lease for lease in opened.timeline_leases(["cli/instant"])}
    assert drawn[instant.token].start == drawn[instant.token].end and drawn[instant.token].end_reason == "released"
    human, _ = audit(anvil_node, registry, index, "timeline", DAILY, "cli/never", "--out", str(out), json_out=False)
    assert human.returncode == 0 and "; none on 'cli/never'" in human.stdout, human.stdout


def _iso(seconds: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def test_verify_exits_12_naming_a_tampered_time(anvil_node, played, tmp_path):
    """A lease's acquisition moved 30 minutes earlier, or the last block's timestamp a day ahead: exit 12,
    the tampered row named (issue #20; before, both passed with exit 0)."""
    registry, alice, bob, first, second = played
    index = tmp_path / "audit.sqlite"
    assert audit(anvil_node, registry, index, "sync")[0].returncode == 0
    with sqlite3.connect(index) as conn:
        conn.execute("UPDATE leases SET acquired_at = acquired_at - 1800 WHERE token = ?", (second.token,))
    bad, report = audit(anvil_node, registry, index, "verify")
    assert bad.returncode == 12 and report["error"] == "AuditIndexDiffers"
    assert f"leases: token {second.token}: acquired_at" in bad.stderr
    with sqlite3.connect(index) as conn:
        conn.execute("UPDATE leases SET acquired_at = acquired_at + 1800 WHERE token = ?", (second.token,))
        (synced,) = conn.execute("SELECT value FROM meta WHERE key = 'synced_block'").fetchone()
        conn.execute("UPDATE blocks SET timestamp = timestamp + 86400 WHERE number = ?", (int(synced),))
    bad, report = audit(anvil_node, registry, index, "verify")
    assert bad.returncode == 12 and f"blocks: block {synced} timestamp" in bad.stderr


def test_lists_print_a_page_and_the_cursor_of_the_next(anvil_node, on_anvil, tmp_path):
    """--limit N prints N rows and the next page's cursor (next under --json, a hint on stderr); --after
    CURSOR prints the page after it; --all every row; a bad cursor is InvalidInput (exit 2), a bad limit a
    usage error (exit 2)."""
    alice = on_anvil.connect(on_anvil.chain.accounts[1])
    names = [f"cli/page-{i}" for i in range(5)]
    for name in names:
        alice.acquire(name, ttl=600)
    index = tmp_path / "audit.sqlite"
    done, first = audit(anvil_node, on_anvil, index, "resources", "cli/page-", "--limit", "2")
    assert done.returncode == 0, done.stderr
    assert [r["resource"] for r in first["result"]] == names[:2] and first["next"]
    shown = [r["resource"] for r in first["result"]]
    cursor = first["next"]
    while cursor is not None:
        done, page = audit(anvil_node, on_anvil, index, "resources", "cli/page-", "--limit", "2", "--after", cursor)
        assert done.returncode == 0, done.stderr
        shown += [r["resource"] for r in page["result"]]
        cursor = page["next"]
    assert shown == names
    done, everything = audit(anvil_node, on_anvil, index, "current", "--prefix", "cli/page-", "--all", "--limit", "2")
    assert [r["resource"] for r in everything["result"]] == names and everything["next"] is None
    done, _ = audit(anvil_node, on_anvil, index, "holder", alice.sender, "--limit", "1", json_out=False)
    assert done.returncode == 0 and "-- more rows: the next page with --after " in done.stderr, done.stderr
    assert done.stdout.count(alice.sender) == 1
    done, refused = audit(anvil_node, on_anvil, index, "takeovers", "--after", "not-a-cursor")
    assert done.returncode == 2 and refused["error"] == "InvalidInput", done.stdout
    done, refused = audit(anvil_node, on_anvil, index, "resources", "--after", first["next"])  # another prefix
    assert done.returncode == 2 and refused["error"] == "InvalidInput", done.stdout
    done, _ = audit(anvil_node, on_anvil, index, "history", names[0], "--limit", "0")
    assert done.returncode == 2 and "--limit" in done.stderr


def test_sync_with_completeness_receipts_holds_before_a_withheld_event_and_a_bad_mode_exits_2(
    anvil_node, on_anvil, tmp_path
):
    """``audit sync --completeness receipts`` through a provider that withholds bob's takeover beside
    carol's acquisition in the same block: the index stops before the block (held_at), and takes it up
    once the provider is honest. Control: plain ``audit sync`` through it indexes the hole. A bad mode is
    InvalidInput (exit 2) before the index file is made."""
    from tests.faults.test_receipts_mode import RESOURCE, SameKind, withholding_the_takeover
    from tests.support.lying_proxy import LyingProxy

    story = SameKind(on_anvil)
    story.stale = story.alice.acquire(RESOURCE, ttl=60).token
    story.take_over()
    with LyingProxy(anvil_node.url) as liar:
        withholding_the_takeover(liar, story.block)
        index = tmp_path / "audit.sqlite"
        done, report = audit(liar, on_anvil, index, "sync", "--completeness", "receipts")
        assert done.returncode == 0, done.stderr
        assert report["held_at"] == story.block and report["to_block"] == story.block - 1
        assert "the answer 2" in report["held_because"]
        control = tmp_path / "control.sqlite"
        assert audit(liar, on_anvil, control, "sync")[1]["held_at"] is None  # the hole, indexed
        held, _ = audit(liar, on_anvil, index, "token", str(story.current), "--no-sync", json_out=False)
        assert held.returncode == 1, "not indexed yet"
        liar.honest()
        done, report = audit(liar, on_anvil, index, "sync", "--completeness", "receipts")
        assert report["held_at"] is None
        assert audit(liar, on_anvil, index, "token", str(story.current), "--no-sync")[1]["result"]["token"] == (
            story.current
        )
        assert audit(liar, on_anvil, control, "token", str(story.current))[1]["result"] is None, "for good"
    bad, document = audit(anvil_node, on_anvil, tmp_path / "bad.sqlite", "sync", "--completeness", "all")
    assert bad.returncode == 2 and document["error"] == "InvalidInput", bad.stderr
    assert "completeness must be one of 'bloom', 'receipts'" in bad.stderr
    assert not (tmp_path / "bad.sqlite").exists()
    query, _ = audit(anvil_node, on_anvil, tmp_path / "bad.sqlite", "history", RESOURCE, "--completeness", "x")
    assert query.returncode == 2 and not (tmp_path / "bad.sqlite").exists()


def test_stuck_with_an_index_syncs_it_in_the_mode_asked_and_a_bad_mode_exits_2(anvil_node, on_anvil, tmp_path):
    """``chainfence stuck --index F --completeness receipts`` through a provider that withholds bob's
    takeover: the index stops before the block and the report says it read to there. Control: without
    --completeness the index passes the block (its hole). A bad mode exits 2 before the file is made."""
    from tests.faults.test_receipts_mode import RESOURCE, SameKind, withholding_the_takeover
    from tests.support.lying_proxy import LyingProxy

    def stuck(url, index, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
        argv = [sys.executable, "-m", "chainfence", "stuck", "--index", str(index), "--rpc-url", url]
        done = subprocess.run(
            [*argv, "--registry", on_anvil.address, "--json", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done, (json.loads(done.stdout) if done.stdout.strip() else None)

    story = SameKind(on_anvil)
    story.stale = story.alice.acquire(RESOURCE, ttl=60).token
    story.take_over()
    with LyingProxy(anvil_node.url) as liar:
        withholding_the_takeover(liar, story.block)
        done, report = stuck(liar.url, tmp_path / "receipts.sqlite", "--completeness", "receipts")
        assert done.returncode == 0, done.stderr
        assert report["to_block"] == story.block - 1
        done, report = stuck(liar.url, tmp_path / "bloom.sqlite")
        assert done.returncode == 0 and report["to_block"] >= story.block, "control: past the hole"
    bad, document = stuck(anvil_node.url, tmp_path / "bad.sqlite", "--completeness", "all")
    assert bad.returncode == 2 and document["error"] == "InvalidInput", bad.stderr
    assert not (tmp_path / "bad.sqlite").exists()
