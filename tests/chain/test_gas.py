"""Gas ceilings, asserted on exact receipt gas, on every backend.

The figures come from scripts/gas_report.py's measurement (so the report
cannot drift from what is tested) and are cross-checked against one receipt
read here directly.
"""

from __future__ import annotations

import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak

from chainfence import Chain, Registry
from chainfence._sdk.names import namespace_id
from chainfence.errors import NotNamespaceAdmin, TransactionFailed, UnknownRevert
from tests.conftest import isolated
from tests.support.scripts import script

gas_report = script("gas_report")


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
    not met with an allowlist, whose entry is the second cold read; see docs/benchmarks/history.md, "Gas per
    operation")."""
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
    """Revoke, grant (of leases and of work items), policy changes, hand-overs (of an assigned namespace
    and of an address namespace, whose admin is recognised by hashing its address) and each extra
    resource of acquireMany have exact figures, held to ceilings: an extra resource of a set costs less
    than a transaction of its own."""
    ceilings = {
        "revoke": 34_000,
        "grant (after a revoke)": 45_000,
        "grant (taking over a live lease)": 47_000,
        "revokeItem": 35_000,
        "grantItem (after a revoke)": 44_500,
        "grantItem (taking over a live claim)": 46_500,
        "setNamespacePolicy (every field)": 31_500,
        "setNamespacePolicy (one field)": 28_500,
        "setAdmission (one holder)": 51_000,
        "transferNamespaceAdmin": 50_000,
        "acceptNamespaceAdmin": 30_000,
        "address namespace: setNamespacePolicy (first: writes its slot)": 49_000,
        "address namespace: setNamespacePolicy (again)": 32_000,
        "address namespace: revoke (by its address)": 35_000,
        "address namespace: transferNamespaceAdmin (writes the address down)": 53_500,
        "address namespace: acceptNamespaceAdmin": 30_000,
        "acquireMany: each extra resource (held before)": 10_500,
    }
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


@pytest.mark.parametrize("operation", sorted(gas_report.BEFORE_ITEM_NAMES))
def test_naming_an_item_apart_costs_only_its_log_bytes(figures, operation):
    """Issue 25: an item is named in ItemNamed (workset and item, two strings) instead of a ResourceNamed of
    workset/item. Only an item's first lease logs it: it may grow by the second string's offset, length and a
    word of padding (768 gas of log data); every other item operation costs no more than before, but a claim's
    share of issue 26's one reason ladder (REASON_LADDER_ALLOWANCE) and, for the lease operations, issue 28's
    reading of their holder (HOLDER_ALLOWANCE, CLAIM_HOLDER_ALLOWANCE: the caller, or an intent's signer)."""
    before = gas_report.BEFORE_ITEM_NAMES[operation]
    if operation.startswith("claimNext"):
        before += gas_report.REASON_LADDER_ALLOWANCE + gas_report.CLAIM_HOLDER_ALLOWANCE
    elif not operation.startswith(("revokeItem", "grantItem")):
        before += gas_report.HOLDER_ALLOWANCE  # issue 28: the lease operations read their holder (ERC-2771)
    if operation in gas_report.NAMES_ITEM:
        assert 0 < figures[operation] - before <= gas_report.ITEM_NAME_ALLOWANCE, f"{operation}: {figures[operation]:,}"
    else:
        assert figures[operation] <= before, f"{operation}: {figures[operation]:,} (before: {before:,})"


def test_an_exclusive_acquisition_costs_its_second_read_only(figures):
    """acquireExclusive checks the caller's own live lease before the shared path: one more (warm) read
    of the lease's slot and the name's hash, about 700 gas over acquire; acquire itself pays nothing for
    it (test_a_namespace_nobody_administers_costs_less_than_one_cold_read holds acquire as before)."""
    for case in ("after expiry", "after release"):
        extra = figures[f"acquireExclusive (held before, {case})"] - figures[f"acquire (held before, {case})"]
        assert 0 < extra <= 800, f"{case}: +{extra:,} gas"


def test_an_address_namespace_costs_its_names_one_cold_read(chain):
    """Names in an address namespace ("0x" + 40 lowercase hex digits) read its slot on every acquisition,
    policy or not: one cold read (2,100, and 98 to hash its key and test it) over an open name of the
    same length, whose prefix is 42 bytes too but not address-shaped (the filter answers for it); renew
    and release are not touched."""
    registry = Registry.deploy(chain, max_ttl=3_600)
    registry.connect(chain.accounts[1]).acquire("warm-up/counter", ttl=60)
    owner = registry.connect(chain.accounts[3]).namespace().prefix
    _lease, owned = gas_report.open_cycle(chain, registry, f"{owner}/daily")
    _lease, open_ = gas_report.open_cycle(chain, registry, "0y" + owner[2:] + "/daily")
    for operation in owned:
        extra = owned[operation] - open_[operation]
        if operation.startswith("acquire"):
            assert 2_100 <= extra <= 2_100 + 100, f"{operation}: +{extra:,} gas"  # the read and its key: 2,198
        else:
            assert extra == 0, f"{operation}: +{extra:,} gas"


def _filter_bits(chain: Chain, registry: Registry) -> int:
    """Bits 48..255 of the counter's slot (slot 1: see the storage layout in the artifact)."""
    slot = int.from_bytes(chain.w3.eth.get_storage_at(registry.address, 1), "big")
    return slot >> 48


def _prefix_on_bit(bit: int, *, avoid: str = "") -> str:
    """A namespace prefix whose filter bit is ``bit`` (keccak256(prefix) % 208)."""
    for n in range(100_000):
        prefix = f"ns{n}"
        if prefix != avoid and int.from_bytes(keccak(prefix.encode()), "big") % 208 == bit:
            return prefix
    raise AssertionError(f"no prefix found for bit {bit}")  # pragma: no cover


def test_strangers_doing_all_they_can_set_no_filter_bit_and_cost_open_names_nothing(chain):
    """Issue 17's ceiling, after any number of strangers' acts: nine strangers govern their own address
    namespaces with every policy on, admit, acquire, claim, revoke and grant there, hand their
    namespaces to one another, and try, for every one of the 208 filter bits, to administer a
    namespace that hashes to it and to claim it with the old first-come claimNamespace (each attempt
    mined and reverted; on the registry before issue 17 the claims set every bit). The counter slot's filter bits stay
    as the deployer left them (none here), and an open namespace's acquisitions cost exactly what they
    cost on an untouched registry, within +2,100 of the figures before namespaces. Control:
    test_control_a_deployers_assignment_on_the_same_bit_costs_open_names_a_cold_read."""
    clean_registry = Registry.deploy(chain, max_ttl=3_600)
    clean_registry.connect(chain.accounts[1]).acquire("warm-up/counter", ttl=60)
    _lease, clean = gas_report.open_cycle(chain, clean_registry)

    registry = Registry.deploy(chain, max_ttl=3_600)
    registry.connect(chain.accounts[1]).acquire("warm-up/counter", ttl=60)
    assert _filter_bits(chain, registry) == 0
    strangers = [registry.connect(account) for account in chain.accounts[1:]]
    for i, stranger in enumerate(strangers):
        mine = stranger.namespace().prefix
        stranger.namespace(mine).set_policy(max_ttl=600, lock_delay=30, admission_required=True)
        stranger.namespace(mine).admit([s.sender for s in strangers])
        lease = stranger.acquire(f"{mine}/db", ttl=60)
        stranger.namespace(mine).grant(f"{mine}/db", strangers[(i + 1) % len(strangers)].sender, 60)
        stranger.workset(f"{mine}/jobs").claim(["j1"], ttl=60)
        stranger.workset(f"{mine}/jobs").revoke("j1")
        assert lease.token > 0
    for i, stranger in enumerate(strangers):  # each hands its namespace to the next, who then governs two
        stranger.namespace(stranger.namespace().prefix).transfer_admin(strangers[(i + 1) % len(strangers)].sender)
    for i, stranger in enumerate(strangers):
        previous = strangers[i - 1].namespace().prefix
        stranger.namespace(previous).accept_admin()
        stranger.namespace(previous).set_policy(lock_delay=60)
    attacker = strangers[-1]
    old_claim = keccak(b"claimNamespace(string)")[:4]  # the first-come claim this registry no longer has
    for bit in range(208):
        prefix = _prefix_on_bit(bit)
        data = attacker._encode("setNamespacePolicy", [namespace_id(prefix), 1, 600, True, 7])
        with pytest.raises(NotNamespaceAdmin):
            chain.transact(attacker.sender, attacker.address, data, gas=200_000)
        with pytest.raises((TransactionFailed, UnknownRevert)):
            chain.transact(attacker.sender, attacker.address, old_claim + abi_encode(["string"], [prefix]), gas=200_000)
    assert _filter_bits(chain, registry) == 0, "no act after deployment sets a filter bit"

    _lease, after = gas_report.open_cycle(chain, registry)
    assert after == clean, "an open name costs exactly what it costs on an untouched registry"
    for operation, before in gas_report.BEFORE_NAMESPACES.items():
        assert after[operation] - before <= gas_report.UNADMINISTERED_ALLOWANCE, operation


def test_control_a_deployers_assignment_on_the_same_bit_costs_open_names_a_cold_read(chain):
    """What the filter protects, shown failing: a registry whose deployer assigned a namespace that
    shares 'reports''s filter bit (what a first-come claim let any stranger do, forever). Every
    acquisition of 'reports/daily' then reads a slot: a cold read more than on a clean registry, and
    above the +2,100 ceiling over the figures before namespaces. Only the deployer can do this now, at
    deployment."""
    bit = int.from_bytes(keccak(b"reports"), "big") % 208
    clean_registry = Registry.deploy(chain, max_ttl=3_600)
    clean_registry.connect(chain.accounts[1]).acquire("warm-up/counter", ttl=60)
    _lease, clean = gas_report.open_cycle(chain, clean_registry)
    colliding = Registry.deploy(chain, max_ttl=3_600, namespaces={_prefix_on_bit(bit): chain.accounts[5]})
    assert _filter_bits(chain, colliding) == 1 << bit
    colliding.connect(chain.accounts[1]).acquire("warm-up/counter", ttl=60)
    _lease, shared = gas_report.open_cycle(chain, colliding)
    over = {}
    for operation in gas_report.BEFORE_NAMESPACES:
        if operation.startswith("acquire"):
            assert shared[operation] - clean[operation] >= 2_100, operation
            over[operation] = shared[operation] - gas_report.BEFORE_NAMESPACES[operation]
    assert max(over.values()) > gas_report.UNADMINISTERED_ALLOWANCE, over


# ---------------------------------------------------------------------------
# Group commit (issue 19): batchCalls
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("operation", sorted(gas_report.BATCH_CEILINGS))
def test_an_item_of_a_batch_stays_under_its_ceiling(figures, operation):
    """Each item of a batchCalls (acquisition, renewal, release, refusal) has an exact figure, held to a ceiling."""
    assert figures[operation] <= gas_report.BATCH_CEILINGS[operation], f"{operation}: {figures[operation]:,} gas"


def test_an_acquisition_in_a_batch_costs_well_below_a_lone_one(figures):
    """A lone acquisition pays a transaction's 21,000 intrinsic gas by itself; in a batch of 8 or 64 it is shared:
    each acquisition costs less than half a lone one, and each extra one less than the intrinsic cost alone.
    Renewals and releases too."""
    lone = figures["acquire (held before, after release)"]
    for size in (8, 64):
        per_item = figures[f"batchCalls: per acquisition, batch of {size} (held before, after release)"]
        assert per_item < lone / 2, f"batch of {size}: {per_item:,} gas an acquisition, lone {lone:,}"
    assert figures["batchCalls: each extra acquisition (held before, after release)"] < 21_000
    assert figures["batchCalls: each extra renewal"] < figures["renew"] - 19_000
    assert figures["batchCalls: each extra release"] < figures["release"] - 19_000


def test_the_sdks_gas_limit_covers_the_dearest_item_of_each_kind(figures):
    """The SDK sends a batch without a preflight, with the gas limit of chainfence.batching.gas_bound: every item
    at its dearest. The dearest acquisition (a resource's first, a 128-byte name, every policy check, its
    namespace recorded) and renewal (reading its namespace's maxTtl) stay under it, alone and as extras."""
    from chainfence.batching import GAS_PER_NAME_BYTE, GAS_PER_OPERATION, gas_bound

    dearest = figures[
        "batchCalls: dearest acquisition alone (first, 128 bytes, every policy check, records the namespace)"
    ]
    assert dearest <= gas_bound([("acquire", 128)])
    extra = figures["batchCalls: dearest acquisition, each extra"]
    assert extra <= GAS_PER_OPERATION["acquire"] + 128 * GAS_PER_NAME_BYTE
    assert figures["batchCalls: dearest renewal alone (reads its namespace's maxTtl)"] <= gas_bound([("renew", 0)])
    assert figures["batchCalls: dearest renewal, each extra"] <= GAS_PER_OPERATION["renew"]
    assert figures["batchCalls: 1 release"] <= gas_bound([("release", 0)])
    assert figures["batchCalls: each extra release"] <= GAS_PER_OPERATION["release"]
    assert gas_bound([("acquire", 128)] * 64) < 30_000_000, "a full batch at its dearest fits a block"


@pytest.fixture(scope="module")
def least_limits(backend_chain):
    with isolated(backend_chain):
        return gas_report.measure_least_limits(backend_chain)


@pytest.mark.parametrize("what", ["acquisitions", "renewals", "releases"])
def test_the_sdks_gas_limit_covers_the_least_limit_of_the_dearest_batches_and_no_more_than_it_needs(least_limits, what):
    """A batch of the dearest items of a kind, 1 and 64 of them: the node's least gas limit for it
    (``eth_estimateGas``) and the gas it used stay under ``gas_bound``; the bound of 64 is within 25 % of the
    gas they used (a bound twice the need turned away batches a block or a balance could hold)."""
    from chainfence.batching import gas_bound

    kind = {"acquisitions": ("acquire", 128), "renewals": ("renew", 0), "releases": ("release", 0)}[what]
    for count in (1, 64):
        bound = gas_bound([kind] * count)
        least = least_limits[f"batchCalls: least gas limit, {count} dearest {what}"]
        used = least_limits[f"batchCalls: gas used, {count} dearest {what}"]
        assert max(least, used) <= bound, f"{count} {what}: least limit {least:,}, used {used:,}, bound {bound:,}"
    assert gas_bound([kind] * 64) <= 1.25 * least_limits[f"batchCalls: gas used, 64 dearest {what}"]


# ---------------------------------------------------------------------------
# Signed intents (issue 28): performIntents
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("operation", sorted(gas_report.RENEW_MANY_CEILINGS))
def test_a_renewal_in_a_set_stays_under_its_ceiling(figures, operation):
    """renewMany and releaseMany of one holder's leases, in the order of their ids (issue 28, item 3)."""
    assert figures[operation] <= gas_report.RENEW_MANY_CEILINGS[operation], f"{operation}: {figures[operation]:,} gas"


def test_a_renewal_costs_the_same_in_a_set_of_any_size(figures):
    """The set's order is checked with one comparison an item: a renewal added to a set of 16 costs what one added
    to a set of 1 costs, to within the calldata of its id's bytes (when every pair was compared, 205 gas a pair,
    the 64th renewal cost 13,000 gas more than the 2nd)."""
    late = figures["renewMany: each extra renewal, sets of 16 to 64"]
    assert abs(late - figures["renewMany: each extra renewal"]) <= 2 * 12, (
        late,
        figures["renewMany: each extra renewal"],
    )


@pytest.mark.parametrize("per_renewal", ["renewMany: per renewal, set of 16", "renewMany: per renewal, set of 64"])
def test_a_kept_lease_hour_at_ttl_30_fits_the_issues_target(figures, per_renewal):
    """Issue 28: a kept lease-hour at ttl 30 s within 1.5 M gas for a 16-lease agent (one renewMany of 16 a round)
    and a 64-agent fleet behind one account (one renewMany of 64), at the renewals keep(schedule="margin") makes
    (scripts/bench_keepalive.py measures the running keep-alive: 1,432,635 and 1,270,897 gas on embedded)."""
    hour = figures[per_renewal] * gas_report.MARGIN_RENEWALS_PER_LEASE_HOUR
    assert hour <= gas_report.KEPT_LEASE_HOUR_TARGET, f"{per_renewal}: {hour:,} gas a lease-hour"


@pytest.mark.parametrize("operation", sorted(gas_report.INTENT_CEILINGS))
def test_a_relayed_intent_stays_under_its_ceiling(figures, operation):
    """Each relayed item (64 agents' intents in one transaction, all of its costs shared), a refused one, a
    completion and a claim have exact figures, held to ceilings."""
    assert figures[operation] <= gas_report.INTENT_CEILINGS[operation], f"{operation}: {figures[operation]:,} gas"


@pytest.mark.parametrize("relayed", sorted(gas_report.INTENT_PAIRS))
def test_a_relayed_item_costs_at_most_its_ratio_of_the_same_item_batched_by_its_sender(figures, relayed):
    """An item relayed in a batch of 64 costs at most INTENT_RATIO times the same item batched by its own sender
    (batchCalls of 64). The issue asked for 1.3: not reachable with one ECDSA signature an item, whose recovery
    (3,000 gas) and 65 bytes of calldata (1,040) are 32 to 40% of a batched item by themselves (asserted here,
    so that the claim in gas_report.py stays true)."""
    batched = figures[gas_report.INTENT_PAIRS[relayed]]
    assert figures[relayed] <= gas_report.INTENT_RATIO * batched, f"{figures[relayed] / batched:.3f}x"
    assert 3_000 + 65 * 16 > 0.3 * batched, "one ECDSA signature an item fits 1.3x: lower INTENT_RATIO"
