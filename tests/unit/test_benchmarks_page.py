"""docs/benchmarks.md is a page of current figures, each with its command; its plots are drawn by
scripts/plot_benchmarks.py from the JSON the benchmark scripts print, kept in docs/benchmarks/data/."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
DATA = ROOT / "docs" / "benchmarks" / "data"


def test_every_command_names_a_script_that_exists():
    text = PAGE.read_text(encoding="utf-8")
    scripts = set(re.findall(r"python (scripts/\w+\.py)", text))
    assert len(scripts) >= 12
    assert [name for name in scripts if not (ROOT / name).is_file()] == []


def test_every_plot_the_page_shows_is_drawn_by_the_script_from_the_data(tmp_path):
    shown = re.findall(r"!\[[^\]]*\]\((benchmarks/[\w-]+\.png)\)", PAGE.read_text(encoding="utf-8"))
    assert len(shown) == 3
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plot_benchmarks.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for name in shown:
        drawn = tmp_path / Path(name).name
        assert drawn.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (ROOT / "docs" / name).is_file(), f"{name} is not committed (run scripts/plot_benchmarks.py)"


def test_the_tables_figures_are_the_datas():
    """The latency and throughput tables were written from the JSON: each figure is there as printed."""
    text = PAGE.read_text(encoding="utf-8")
    summary = json.loads((DATA / "bench_vs_etcd.json").read_text(encoding="utf-8"))["latency"]["summary"]
    for key in ("sdk_ipc_acquire", "sdk_http_acquire", "etcd_acquire", "floor_ipc_acquire", "etcd_release"):
        assert f"{summary[key]['p50_ms']:.2f}" in text, key
    fleets = json.loads((DATA / "bench_group_commit.json").read_text(encoding="utf-8"))["nodes"]["chainfence"]["fleets"]
    for agents in ("1", "8", "64"):
        rates = [
            round(statistics.median(r["per_second"] for r in fleets[agents][kind]))
            for kind in ("sdk-threads", "sdk-tasks", "etcd")
        ]
        assert f"| {agents} | {rates[0]:,} | {rates[1]:,} | {rates[2]:,} |" in text


def test_the_dated_history_is_kept_out_of_the_page():
    text = PAGE.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    assert "docs/benchmarks/history.md" in text and (ROOT / "docs" / "benchmarks" / "history.md").is_file()
