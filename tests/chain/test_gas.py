"""Gas ceilings, asserted on exact receipt gas, on every backend.

The figures come from scripts/gas_report.py's measurement (so the report
cannot drift from what is tested) and are cross-checked against one receipt
read here directly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import isolated

_spec = importlib.util.spec_from_file_location(
    "gas_report", Path(__file__).resolve().parents[2] / "scripts" / "gas_report.py"
)
gas_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gas_report)


@pytest.fixture(scope="module")
def figures(backend_chain):
    """One measurement per backend for the whole module (it deploys its own registry), in a snapshot:
    the figures are exact, so measuring them again for each assertion would only cost time."""
    with isolated(backend_chain):
        return gas_report.measure(backend_chain)


@pytest.mark.parametrize("operation", sorted(gas_report.BEFORE_NAMESPACES))
def test_a_namespace_nobody_administers_costs_less_than_one_cold_read(figures, operation):
    """On a namespace nobody administers ('reports/...'), namespaces add less than one cold storage read
    (2,100 gas) to each lease operation: the filter in the counter's slot answers without a read."""
    added = figures[operation] - gas_report.BEFORE_NAMESPACES[operation]
    assert added <= gas_report.UNADMINISTERED_ALLOWANCE, f"{operation}: +{added:,} gas"


@pytest.mark.parametrize("operation", sorted(gas_report.UNDER_POLICY))
def test_a_policy_costs_at_most_its_reads(figures, operation):
    """Under a policy with every check on, each lease operation costs at most its two cold reads, finding
    the namespace and the checks more than before namespaces (POLICY_CEILING: the issue's 4,300 target is
    not met with an allowlist, whose entry is the second cold read; see docs/benchmarks.md)."""
    added = figures[operation] - gas_report.BEFORE_NAMESPACES[gas_report.UNDER_POLICY[operation]]
    assert added <= gas_report.POLICY_CEILING, f"{operation}: +{added:,} gas"


@pytest.mark.parametrize("operation", sorted(op for op in gas_report.WITHOUT_ALLOWLIST if "renew" not in op))
def test_a_policy_without_an_allowlist_costs_an_acquisition_at_most_4300(figures, operation):
    """maxTtl and lock-delay without an allowlist: an acquisition reads one slot more (the namespace's),
    within the issue's 4,300 (a renewal of a capped resource reads two: asserted with the policy above)."""
    added = figures[operation] - gas_report.BEFORE_NAMESPACES[gas_report.WITHOUT_ALLOWLIST[operation]]
    assert added <= gas_report.POLICY_ALLOWANCE, f"{operation}: +{added:,} gas"
    assert figures["no allowlist: renew"] - gas_report.BEFORE_NAMESPACES["renew"] <= gas_report.POLICY_CEILING


def test_recording_a_namespace_costs_one_slot_once(figures):
    """The first acquisition of a resource under a maxTtl records its namespace: one new slot, once."""
    recorded = figures["policy: acquire (first of a new resource, records the namespace)"]
    assert recorded - figures["policy: acquire (first of a new resource)"] <= gas_report.RECORD_ONCE + 200


def test_admin_operations_and_sets_are_measured(figures):
    """Revoke, grant, policy changes and each extra resource of acquireMany have exact figures, held to
    ceilings: an extra resource of a set costs less than a transaction of its own."""
    ceilings = {
        "revoke": 34_000, "grant (after a revoke)": 45_000, "grant (taking over a live lease)": 47_000,
        "claimNamespace": 55_000, "setNamespacePolicy": 31_000, "setAdmission (one holder)": 51_000,
        "transferNamespaceAdmin": 50_000, "acceptNamespaceAdmin": 30_000,
        "acquireMany: each extra resource (held before)": 10_500,
    }  # fmt: skip
    for operation, ceiling in ceilings.items():
        assert figures[operation] <= ceiling, f"{operation}: {figures[operation]:,}"
    assert figures["acquireMany: each extra resource (held before)"] < figures["acquire (held before, after release)"]


@pytest.mark.parametrize("operation", sorted(gas_report.CEILINGS))
def test_gas_stays_under_its_ceiling(figures, operation):
    """Each lease operation costs no more than the ceiling of the foundation issue."""
    assert figures[operation] <= gas_report.CEILINGS[operation], f"{operation}: {figures[operation]:,} gas"


def test_gas_is_the_same_on_every_backend(figures, backend_chain):
    """eth-tester and anvil (both Prague rules) charge the same gas for the same operation.

    Every backend's figures are compared with the embedded chain's, measured
    here afresh so the test does not depend on test order.
    """
    from chainfence import Chain

    assert figures == gas_report.measure(Chain.embedded())


def test_acquire_gas_grows_with_the_name_length_only_through_calldata(chain, registry, alice):
    """Longer names cost calldata (<= 16 gas a byte), never storage."""
    alice.acquire("warm-up", ttl=5)  # the registry's very first acquisition also pays for the counter
    short = alice.acquire("n" * 8, ttl=5)
    long = alice.acquire("n" * 128, ttl=5)
    receipts = [chain.w3.eth.get_transaction_receipt(lease.tx_hash)["gasUsed"] for lease in (short, long)]
    extra_bytes = 120
    # The first acquisition of each pays for ResourceNamed: 8 gas a byte of log data on top.
    assert 0 < receipts[1] - receipts[0] <= extra_bytes * (16 + 8) + 200


def test_report_figures_match_receipts(chain, registry, alice):
    """The report's "held before" figure is what a receipt says for the same operation."""
    alice.acquire("warm", ttl=5)
    alice.acquire(gas_report.NAME, ttl=60)
    lease = alice.acquire(gas_report.NAME, ttl=30)
    receipt = chain.w3.eth.get_transaction_receipt(lease.tx_hash)
    assert receipt["gasUsed"] == gas_report.measure(chain)["acquire (re-acquire by holder)"]


@pytest.mark.parametrize("length", [1, 64, 128])
def test_ceilings_hold_across_name_lengths(chain, length):
    """Renew/release never depend on the name; re-acquisition stays under its ceiling for every
    allowed name (<= 128 bytes); a first acquisition, which also logs the name, up to 64 bytes."""
    figures = gas_report.measure(chain, "r" * length, with_store=False)
    for operation, ceiling in gas_report.CEILINGS.items():
        if operation == "acquire (first of a new resource)" and length > 64:
            continue
        assert figures[operation] <= ceiling, f"{operation} with a {length}-byte name: {figures[operation]:,}"


def test_a_progress_marker_costs_at_most_its_own_bytes(figures):
    """A renewal with a marker (32 nonzero bytes: the dearest calldata) costs no more than its calldata
    over a plain renewal, and both stay within the pre-marker renewal plus the marker's calldata and
    log bytes, up to the few gas of decoding one more argument."""
    with_marker, plain = figures["renew (with a progress marker)"], figures["renew"]
    assert with_marker - plain <= 32 * 16, f"{with_marker - plain:,} gas for 32 bytes of calldata"
    # Namespaces (issue 11) came later, with an allowance of their own (see the namespace tests).
    namespaces = figures["renew"] - gas_report.BEFORE_NAMESPACES["renew"]
    assert 0 <= namespaces <= gas_report.UNADMINISTERED_ALLOWANCE
    assert plain - namespaces - gas_report.RENEW_BEFORE_MARKERS <= 32 * 8 + 64, "a plain renewal logs a zero marker"
    assert with_marker - namespaces - gas_report.RENEW_BEFORE_MARKERS <= gas_report.MARKER_ALLOWANCE + 32


@pytest.mark.parametrize("operation", sorted(gas_report.BEFORE_MARKERS_AND_CLAIMS))
def test_acquire_and_release_cost_no_more_than_before_markers_and_claims(figures, operation):
    """Markers and claims (which took 8 bits of the expiry for their flags) were added without
    making the lease operations that do not use them dearer; namespaces (issue 11) may add up to
    their allowance on top."""
    allowed = gas_report.BEFORE_MARKERS_AND_CLAIMS[operation] + gas_report.UNADMINISTERED_ALLOWANCE
    assert figures[operation] <= allowed, f"{figures[operation]:,}"
