"""The proven mode, attacked: lying and lagging providers in front of anvil, each beside the control it fools.

Every test stages the same story on the session's anvil: alice acquires
``reports/daily`` (token A, 30 s), her lease runs out, bob takes it over
(token B). Alice's token A is stale: a service must refuse her write. Then
one or more providers lie (a loopback :class:`LyingProxy` per provider,
rewriting answers per method; tests/support/forgery.py builds the lies) so
that A reads as alice's live token.

The control is what the same provider fools: a plain
``registry.check_current`` through it (strict mode), a verifier reading the
slot with ``eth_getStorageAt``, or the proven mode trusting that very
provider for its headers. The proven mode, with headers from a quorum in
which the honest providers are k, refuses the lie with a typed error that
names the provider, or reads through it to the true verdict.

The stated assumption is k of n honest header providers (or one trusted
header endpoint): the majority-of-liars test shows what happens without it,
on purpose. ``docs/guarantees.md`` lists each attack beside its test.

Clock: the verifier's clock is the session anvil's chain time read directly
(``chain.now`` through the honest connection): the suite's anvil runs a
logical clock (tests/support/anvil.py), so the wall clock would say nothing.
The story, the providers and the lies are shared with the tests that attack
the guard, the fenced SQL transaction, the middleware and the CLI
(tests/support/proven.py).
"""

from __future__ import annotations

import pytest

from chainfence._node.headers import NOT_WAITED_FOR
from chainfence._node.jsonrpc import HttpEndpoint
from chainfence.errors import (
    BlockNotVouched,
    HeadersDisagree,
    HeaderStale,
    LeaseExpired,
    ProofInvalid,
    ProviderUnavailable,
    StaleToken,
)
from chainfence.lease import LeaseStatus
from chainfence.proofs import TrustedHeaders
from tests.support.forgery import ForgedWorld, read_slot_naively
from tests.support.proven import (
    RESOURCE,
    RESOURCE_ID,
    forge_alice_live,
    fork_where_alice_renewed,
    proven,
    quorum,
    serve_the_past,
    strict_through,
)


def test_honest_providers_prove_the_same_verdicts_as_strict_mode(story, providers):
    p1, p2, p3 = providers
    reader = proven(story, quorum(p1.url, p2.url, p3.url, story=story), p1.url)
    info = reader.check(RESOURCE, story.current)
    assert (info.holder, info.token, info.status) == (story.bob, story.current, LeaseStatus.LIVE)
    strict = story.registry.check_current(RESOURCE, story.current)
    assert (info.holder, info.token, info.expires_at, info.status) == (
        strict.holder,
        strict.token,
        strict.expires_at,
        strict.status,
    )
    with pytest.raises(StaleToken):
        reader.check(RESOURCE, story.stale)
    # The proof decodes to the same holder and token as eth_getStorageAt.
    plain = read_slot_naively(story.registry.chain.rpc.request, story.registry.address, RESOURCE_ID)
    assert (plain.holder, plain.token) == (info.holder, info.token)


def test_a_forged_eth_call_fools_strict_mode_not_the_proven_mode(story, providers):
    liar, h2, h3 = providers
    forge_alice_live(story, liar)
    liar.handlers.pop("eth_getProof")  # this liar forges views only: its proofs are honest
    # Control: strict mode through the liar accepts alice's stale token.
    fooled = strict_through(liar.url, story).check_current(RESOURCE, story.stale)
    assert (fooled.holder, fooled.token, fooled.status) == (story.alice, story.stale, LeaseStatus.LIVE)
    # The proven mode asks the same provider for a proof, not a view.
    reader = proven(story, quorum(liar.url, h2.url, h3.url, story=story), liar.url)
    with pytest.raises(StaleToken) as refused:
        reader.check(RESOURCE, story.stale)
    assert refused.value.current_token == story.current
    # One probe ("do you serve eth_getProof?") and one proof; the eth_calls were the control's: its check,
    # and the registry's maxTtl, read with its code when the control's Registry.at checked it.
    assert liar.count("eth_getProof") == 2 and liar.count("eth_call") == 2


def test_a_forged_eth_getstorageat_fools_a_slot_reader_not_the_proven_mode(story, providers):
    liar, h2, h3 = providers
    forge_alice_live(story, liar)
    liar.handlers.pop("eth_getProof")
    # Control: a verifier reading the slot believes the forged value.
    fooled = read_slot_naively(HttpEndpoint(liar.url).request, story.registry.address, RESOURCE_ID)
    assert (fooled.holder, fooled.token) == (story.alice, story.stale)
    with pytest.raises(StaleToken):
        proven(story, quorum(liar.url, h2.url, h3.url, story=story), liar.url).check(RESOURCE, story.stale)


@pytest.mark.parametrize("up_to", ["value", "leaf", "storage", "state"])
def test_a_forged_proof_is_refused_naming_the_provider(story, providers, up_to):
    """The stated value alone; the storage leaf; the storage path re-hashed to a new storage root;
    everything re-hashed to a new state root: each is ProofInvalid against the honest header."""
    liar, h2, h3 = providers
    forge_alice_live(story, liar, proofs=up_to)
    fooled = strict_through(liar.url, story).check_current(RESOURCE, story.stale)  # control
    assert fooled.token == story.stale and fooled.live
    headers = quorum(liar.url, h2.url, h3.url, story=story)
    with pytest.raises(ProofInvalid) as refused:
        proven(story, headers, liar.url).check(RESOURCE, story.stale)
    header = headers.current()
    assert refused.value.source == liar.url and refused.value.block == header.number
    assert refused.value.block_hash == header.hash_hex
    # Bob's genuine token is refused too through that provider: nothing it says is judged.
    with pytest.raises(ProofInvalid):
        proven(story, headers, liar.url).check(RESOURCE, story.current)


def test_a_forged_header_with_a_matching_proof_fools_one_trusted_provider_not_a_quorum(story, providers):
    liar, h2, h3 = providers
    forge_alice_live(story, liar, headers=True)
    # Controls: strict mode through the liar, and the proven mode that trusts the liar for headers.
    assert strict_through(liar.url, story).check_current(RESOURCE, story.stale).live
    trusting = proven(story, TrustedHeaders(liar.url, clock=story.registry.chain.now, max_age=60), liar.url)
    info = trusting.check(RESOURCE, story.stale)  # every hash checks out: the forgery is consistent
    assert (info.holder, info.token) == (story.alice, story.stale)
    # A quorum where the honest are k: the liar's header is outvoted, its proof refused.
    headers = quorum(liar.url, h2.url, h3.url, story=story, k=2)
    with pytest.raises(ProofInvalid) as refused:
        proven(story, headers, liar.url).check(RESOURCE, story.stale)
    assert refused.value.source == liar.url
    header = headers.current()
    assert header.vouched_by == (h2.url, h3.url) and liar.url in header.dissent
    with pytest.raises(StaleToken):  # an honest proof provider reads the truth through the same quorum
        proven(story, headers, h2.url).check(RESOURCE, story.stale)
    # k = n: one forged header is enough to refuse; never a pick.
    with pytest.raises(HeadersDisagree) as split:
        proven(story, quorum(liar.url, h2.url, h3.url, story=story, k=3), h2.url).check(RESOURCE, story.stale)
    assert set(split.value.answers) == {liar.url, h2.url, h3.url}


def test_a_withheld_head_fools_strict_mode_and_is_stale_for_the_proven_mode(story, providers):
    liar, h2, h3 = providers
    serve_the_past(liar, story.stale_block)
    # Control: through the lagging provider, alice's token is live (its "now" is the old block's time).
    assert strict_through(liar.url, story).check_current(RESOURCE, story.stale).live
    # One provider trusted for headers, lagging: stale by the verifier's clock, never judged.
    with pytest.raises(HeaderStale) as stale:
        proven(story, TrustedHeaders(liar.url, clock=story.registry.chain.now, max_age=10), liar.url).check(
            RESOURCE, story.stale
        )
    assert stale.value.block == story.stale_block and stale.value.age >= 31
    # A quorum where the honest are k reads past the lagging minority.
    with pytest.raises(StaleToken):
        proven(story, quorum(liar.url, h2.url, h3.url, story=story, max_age=10), h2.url).check(RESOURCE, story.stale)
    # A lagging majority: the k-th head is old, and the clock says so.
    serve_the_past(h2, story.stale_block)
    with pytest.raises(HeaderStale) as stale:
        proven(story, quorum(liar.url, h2.url, h3.url, story=story, max_age=10), h3.url).check(RESOURCE, story.stale)
    assert f"block {story.stale_block}" in stale.value.heads[liar.url]


def test_a_lagging_proof_provider_is_refused_against_the_fresh_header(story, providers):
    """The header is fresh (the quorum's), the proof provider answers from its old block."""
    lagging, h2, h3 = providers
    serve_the_past(lagging, story.stale_block)
    lagging.on("eth_getProof", lambda params, forward: forward([params[0], params[1], hex(story.stale_block)]))
    with pytest.raises(ProofInvalid):
        proven(story, quorum(h2.url, h3.url, story=story, k=2), lagging.url).check(RESOURCE, story.stale)


def test_a_fork_served_by_one_provider_is_outvoted(story, providers, anvil_node):
    """A second node forked from the chain before bob's takeover: on its branch alice renewed. It is a
    real chain, every header hashes right; only the quorum's hash tells it apart."""
    _, h2, h3 = providers
    with fork_where_alice_renewed(story, anvil_node) as (fork, on_fork):
        # Control: strict mode through the fork's provider accepts alice's token.
        assert strict_through(fork.url, story).check_current(RESOURCE, story.stale).live
        headers = quorum(fork.url, h2.url, h3.url, story=story, k=2)
        header = headers.current()
        assert header.vouched_by == (h2.url, h3.url) and fork.url in header.dissent
        with pytest.raises(ProofInvalid):
            proven(story, headers, fork.url).check(RESOURCE, story.stale)
        with pytest.raises(StaleToken):
            proven(story, headers, h2.url).check(RESOURCE, story.stale)
        # A follower reading the fork's logs (alice's renewal) refuses them: not a vouched block.
        renewal = on_fork.chain.rpc.request(
            "eth_getLogs",
            [{"address": story.registry.address, "fromBlock": hex(story.stale_block + 1), "toBlock": "latest"}],
        )[0]
        with pytest.raises(BlockNotVouched) as refused:
            headers.vouch(int(renewal["blockNumber"], 16), renewal["blockHash"], head=header)
        assert (
            refused.value.vouched_hash
            == story.registry.chain.rpc.request("eth_getBlockByNumber", [renewal["blockNumber"], False])["hash"]
        )


def test_a_majority_of_colluding_liars_breaks_the_assumption_and_k_equal_n_refuses(story, providers):
    """k of n honest is the stated assumption: two colluding liars of three, with k = 2, are a
    quorum, and their consistent forgery is accepted (this test shows it on purpose). With k = 3 one
    honest provider is enough to refuse; with liars that do not collude, no quorum forms."""
    l1, l2, honest = providers
    expiry = story.registry.chain.now() + 3_600
    for liar in (l1, l2):
        ForgedWorld(
            story.registry.address, RESOURCE_ID, holder=story.alice, token=story.stale, expires_at=expiry
        ).install(liar, headers=True)
    fooled = proven(story, quorum(l1.url, l2.url, honest.url, story=story, k=2), l1.url).check(RESOURCE, story.stale)
    assert (fooled.holder, fooled.token) == (story.alice, story.stale)  # outside the assumption
    with pytest.raises(HeadersDisagree):
        proven(story, quorum(l1.url, l2.url, honest.url, story=story, k=3), honest.url).check(RESOURCE, story.stale)
    # Liars that do not agree with each other: no quorum at all.
    l2.honest()
    ForgedWorld(
        story.registry.address, RESOURCE_ID, holder=story.alice, token=story.stale, expires_at=expiry + 1
    ).install(l2, headers=True)
    with pytest.raises(HeadersDisagree):
        proven(story, quorum(l1.url, l2.url, honest.url, story=story, k=2), honest.url).check(RESOURCE, story.stale)


def test_providers_that_are_down_are_named_and_never_replaced_by_one(story, providers):
    p1, p2, p3 = providers
    p1.down = True
    headers = quorum(p1.url, p2.url, p3.url, story=story, k=2)
    with pytest.raises(StaleToken):  # k still answer: judged, and the one down is on record
        proven(story, headers, p2.url).check(RESOURCE, story.stale)
    said = headers.current().dissent
    assert list(said) == [p1.url] and (said[p1.url].startswith("down") or said[p1.url] == NOT_WAITED_FOR)
    p2.down = True
    with pytest.raises(ProviderUnavailable) as down:
        proven(story, quorum(p1.url, p2.url, p3.url, story=story, k=2), p3.url).check(RESOURCE, story.stale)
    assert set(down.value.sources) == {p1.url, p2.url} and down.value.needed == 2 and down.value.answered == 1
    with pytest.raises(ProviderUnavailable) as down:  # the proof provider down
        proven(story, quorum(p3.url, story=story, k=1), p1.url).check(RESOURCE, story.stale)
    assert down.value.source == p1.url


def test_a_lease_that_ran_out_after_the_proven_block_is_expired_as_in_strict_mode(story, providers):
    """Judged at the verifier's clock, not the header's time: no block since the expiry changes nothing."""
    p1, p2, p3 = providers
    chain = story.registry.chain
    reader = proven(story, quorum(p1.url, p2.url, p3.url, story=story, confirmations=0), p1.url)
    header = reader.header()
    clock = [header.timestamp + 601]
    reader.clock = lambda: clock[0]
    with pytest.raises(LeaseExpired) as expired:
        reader.check(RESOURCE, story.current, header=header)
    assert expired.value.no_block_since and expired.value.judged_at == header.timestamp + 601
    assert chain.block_number() == header.number  # no block was mined: the header still shows it live
