"""The cost tables of "Going to a real chain" (docs/howto/_costs.md) are scripts/costs.py's output on a fresh
measurement by scripts/gas_report.py: no figure typed by hand, none left behind when the gas changes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scripts import script

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "howto" / "_costs.md"


def costs_module():
    return script("costs")


@pytest.fixture(scope="module")
def measured() -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gas_report.py"), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_cost_page_is_the_scripts_output_on_a_fresh_measurement(measured):
    assert costs_module().table(measured) == PAGE.read_text(encoding="utf-8"), (
        "regenerate: python scripts/costs.py --out docs/howto/_costs.md"
    )


def test_the_lease_hour_follows_the_renewals_and_group_commit_shares_a_transaction(measured):
    costs = costs_module()
    assert costs.renewals_per_hour(30) == 240 and costs.renewals_per_hour(300) == 24
    alone, in_64 = measured["renew"], costs.batched_renewal(measured, 64)
    assert measured["batchCalls: each extra renewal"] < in_64 < alone
    assert f"| 30 s | alone | 240 | {240 * alone:,} |" in PAGE.read_text(encoding="utf-8")


def test_control_a_figure_typed_by_hand_is_found(measured):
    costs = costs_module()
    edited = dict(measured, renew=measured["renew"] + 1)
    assert costs.table(edited) != PAGE.read_text(encoding="utf-8")


def test_the_benchmark_plots_gas_data_is_the_measurement(measured):
    """docs/benchmarks/data/gas_report.json (the gas-per-item plot's data) is gas_report's output today."""
    kept = json.loads((ROOT / "docs" / "benchmarks" / "data" / "gas_report.json").read_text(encoding="utf-8"))
    assert kept == measured, "refresh: python scripts/gas_report.py --json > docs/benchmarks/data/gas_report.json"
