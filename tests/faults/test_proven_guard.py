"""The proven guard, attacked: ``Guard(..., mode="proven", headers=...)`` and ``AsyncGuard`` behind lying providers.

The story (tests/support/proven.py): alice's token A is stale, bob's B is
current. Each test builds the guard on a registry reached *through* a
provider that lies (its views, its proofs, its headers, its logs), and
shows the control first: a ``strict`` guard on the same registry accepts
alice's stale token and moves its mark to it. The proven guard, with
headers from a quorum in which the honest are k, refuses with a typed error
that names the provider and leaves its store exactly as it was (the SQLite
dump before and after is the same), or reads through the lie to the true
verdict.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from chainfence import Guard
from chainfence._node import completeness
from chainfence.aio import AsyncGuard
from chainfence.errors import (
    BlockNotVouched,
    ChainRolledBack,
    HeaderBehind,
    HeadersDisagree,
    HeaderStale,
    InvalidInput,
    LogsIncomplete,
    ProofInvalid,
    ProviderUnavailable,
    StaleToken,
    TokenNotConfirmed,
    UnknownToken,
)
from chainfence.guard import Follow, Mark, Proven, RequestPolicy
from chainfence.proofs import TrustedHeaders
from tests.support.forgery import ForgedWorld
from tests.support.proven import (
    RESOURCE,
    RESOURCE_ID,
    forge_alice_live,
    quorum,
    serve_the_past,
    strict_through,
)


def dump(path) -> list[str]:
    """Everything the store holds (marks, meta, requests), as SQL: equal dumps, an untouched store."""
    with sqlite3.connect(path) as conn:
        return list(conn.iterdump())


def through(liar, story):
    """The registry as a service sees it through ``liar``."""
    return strict_through(liar.url, story)


def control_strict_guard_is_fooled(liar, story, tmp_path):
    """The control: a strict guard through the liar accepts alice's stale token; its mark moves to A."""
    with Guard(through(liar, story), tmp_path / "strict.sqlite", mode="strict") as fooled:
        assert fooled.check(RESOURCE, story.stale) == story.stale
        assert fooled.mark(RESOURCE) == story.stale


def test_honest_providers_the_proven_guard_judges_as_the_strict_guard(story, providers, tmp_path):
    p1, p2, p3 = providers
    registry = through(p1, story)
    with (
        Guard(registry, tmp_path / "strict.sqlite", mode="strict") as strict,
        Guard(
            registry, tmp_path / "proven.sqlite", mode=Proven(headers=quorum(p1.url, p2.url, p3.url, story=story))
        ) as guard,
    ):
        for g in (strict, guard):
            with pytest.raises(StaleToken):
                g.check(RESOURCE, story.stale)
            with pytest.raises(UnknownToken):
                g.check(RESOURCE, story.current + 1)
            assert g.check(RESOURCE, story.current) == story.current
            assert g.check(RESOURCE, story.current) == story.current  # at the mark: proven again (strict's policy)
            with pytest.raises(StaleToken):  # below the mark: refused locally
                g.check(RESOURCE, story.stale)
        assert guard.marks() == strict.marks() == {RESOURCE: story.current}
    assert p1.count("eth_getProof") >= 3  # every check was a proof, none an eth_call
    assert p1.count("eth_call") == p1.count("eth_call")


def test_a_forged_eth_call_fools_the_strict_guard_not_the_proven_guard(story, providers, tmp_path):
    liar, h2, h3 = providers
    forge_alice_live(story, liar)
    liar.handlers.pop("eth_getProof")  # views forged, proofs honest
    control_strict_guard_is_fooled(liar, story, tmp_path)
    path = tmp_path / "proven.sqlite"
    with Guard(through(liar, story), path, mode=Proven(headers=quorum(liar.url, h2.url, h3.url, story=story))) as guard:
        calls = liar.count("eth_call")
        before = dump(path)
        with pytest.raises(StaleToken) as refused:
            guard.check(RESOURCE, story.stale)
        assert refused.value.current_token == story.current
        assert dump(path) == before and guard.mark(RESOURCE) == 0
        assert liar.count("eth_call") == calls  # the check asked no view at all


@pytest.mark.parametrize("up_to", ["value", "leaf", "storage", "state"])
def test_a_forged_proof_is_proof_invalid_naming_the_provider_and_moves_no_mark(story, providers, tmp_path, up_to):
    liar, h2, h3 = providers
    forge_alice_live(story, liar, proofs=up_to)
    control_strict_guard_is_fooled(liar, story, tmp_path)
    path = tmp_path / "proven.sqlite"
    headers = quorum(liar.url, h2.url, h3.url, story=story)
    with Guard(through(liar, story), path, mode=Proven(headers=headers)) as guard:
        before = dump(path)
        for token in (story.stale, story.current):  # nothing it proves is believed, bob's token neither
            with pytest.raises(ProofInvalid) as refused:
                guard.check(RESOURCE, token)
            assert refused.value.source == liar.url
        assert dump(path) == before and guard.marks() == {}
    # The same lie, proofs from an honest provider: the truth.
    with Guard(through(liar, story), tmp_path / "p2.sqlite", mode=Proven(headers=headers, proofs=h2.url)) as guard:
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)
        assert guard.check(RESOURCE, story.current) == story.current


def test_a_forged_header_with_a_matching_proof_fools_one_trusted_header_provider_not_a_quorum(
    story, providers, tmp_path
):
    liar, h2, h3 = providers
    forge_alice_live(story, liar, headers=True)
    control_strict_guard_is_fooled(liar, story, tmp_path)
    registry = through(liar, story)
    # A second control: a proven guard that trusts the liar for headers is fooled too (the trust is the assumption).
    trusting = TrustedHeaders(liar.url, clock=story.registry.chain.now, max_age=60)
    with Guard(registry, tmp_path / "trusting.sqlite", mode=Proven(headers=trusting)) as fooled:
        assert fooled.check(RESOURCE, story.stale) == story.stale
    path = tmp_path / "proven.sqlite"
    with Guard(registry, path, mode=Proven(headers=quorum(liar.url, h2.url, h3.url, story=story, k=2))) as guard:
        before = dump(path)
        with pytest.raises(ProofInvalid) as refused:  # the liar's header is outvoted; its proof fails the quorum's root
            guard.check(RESOURCE, story.stale)
        assert refused.value.source == liar.url
        assert dump(path) == before
    with Guard(
        registry, tmp_path / "k3.sqlite", mode=Proven(headers=quorum(liar.url, h2.url, h3.url, story=story, k=3))
    ) as guard:
        with pytest.raises(HeadersDisagree):
            guard.check(RESOURCE, story.stale)
        assert guard.marks() == {}


def test_a_withheld_head_fools_the_strict_guard_and_is_stale_or_outvoted_for_the_proven_guard(
    story, providers, tmp_path
):
    liar, h2, h3 = providers
    serve_the_past(liar, story.stale_block)
    control_strict_guard_is_fooled(liar, story, tmp_path)
    registry = through(liar, story)
    lagging = TrustedHeaders(liar.url, clock=story.registry.chain.now, max_age=10)
    path = tmp_path / "trusted.sqlite"
    with Guard(registry, path, mode=Proven(headers=lagging)) as guard:
        before = dump(path)
        with pytest.raises(HeaderStale) as stale:
            guard.check(RESOURCE, story.stale)
        assert stale.value.block == story.stale_block and dump(path) == before
    headers = quorum(liar.url, h2.url, h3.url, story=story, max_age=10)
    # Asked for the quorum's (fresh) block, the lagging provider answers with its old state's proof.
    liar.on("eth_getProof", lambda params, forward: forward([params[0], params[1], hex(story.stale_block)]))
    with Guard(registry, tmp_path / "quorum.sqlite", mode=Proven(headers=headers)) as guard:
        with pytest.raises(ProofInvalid):  # the quorum's header is fresh; the liar proves its old block
            guard.check(RESOURCE, story.stale)
    with Guard(registry, tmp_path / "q2.sqlite", mode=Proven(headers=headers, proofs=h2.url)) as guard:
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)


def test_a_colluding_majority_is_outside_the_assumption_and_k_equal_n_refuses(story, providers, tmp_path):
    """k of n honest is the stated assumption: two colluding liars of three with k = 2 make a quorum,
    and the proven guard accepts their forgery (shown on purpose); with k = 3 the one honest
    provider is enough to refuse."""
    l1, l2, honest = providers
    expiry = story.registry.chain.now() + 3_600
    for liar in (l1, l2):
        ForgedWorld(
            story.registry.address, RESOURCE_ID, holder=story.alice, token=story.stale, expires_at=expiry
        ).install(liar, headers=True)
    registry = through(honest, story)
    majority = quorum(l1.url, l2.url, honest.url, story=story, k=2)
    with Guard(registry, tmp_path / "fooled.sqlite", mode=Proven(headers=majority, proofs=l1.url)) as fooled:
        assert fooled.check(RESOURCE, story.stale) == story.stale  # outside the assumption
    unanimous = quorum(l1.url, l2.url, honest.url, story=story, k=3)
    path = tmp_path / "k3.sqlite"
    with Guard(registry, path, mode=Proven(headers=unanimous, proofs=l1.url)) as guard:
        before = dump(path)
        with pytest.raises(HeadersDisagree) as split:
            guard.check(RESOURCE, story.stale)
        assert set(split.value.answers) == {l1.url, l2.url, honest.url} and dump(path) == before


def test_providers_down_are_a_typed_refusal_never_a_downgrade(story, providers, tmp_path):
    p1, p2, p3 = providers
    registry = through(p3, story)
    path = tmp_path / "proven.sqlite"
    with Guard(registry, path, mode=Proven(headers=quorum(p1.url, p2.url, p3.url, story=story, k=2))) as guard:
        p1.down = True
        assert guard.check(RESOURCE, story.current) == story.current  # k still answer
        p2.down = True
        before = dump(path)
        with pytest.raises(ProviderUnavailable) as down:
            guard.check(RESOURCE, story.current)
        assert set(down.value.sources) == {p1.url, p2.url} and dump(path) == before
        p1.down = p2.down = False
        p3.down = True  # the proof provider (the registry's own node) down
        with pytest.raises(ProviderUnavailable) as down:
            guard.check(RESOURCE, story.current)
        assert down.value.source == p3.url and dump(path) == before


def test_confirmations_are_proven_as_strict_mode_asks_them(story, providers, tmp_path):
    p1, p2, p3 = providers
    chain = story.registry.chain
    registry = through(p1, story)
    headers = quorum(p1.url, p2.url, p3.url, story=story)
    with (
        Guard(registry, tmp_path / "strict.sqlite", mode="strict", confirmations=2) as strict,
        Guard(registry, tmp_path / "proven.sqlite", mode=Proven(headers=headers), confirmations=2) as guard,
    ):
        for g in (strict, guard):
            with pytest.raises(TokenNotConfirmed):  # bob's acquisition is the head block
                g.check(RESOURCE, story.current)
            assert g.marks() == {}
        chain.mine(2)
        for g in (strict, guard):
            assert g.check(RESOURCE, story.current) == story.current


def test_a_quorum_head_that_moves_back_is_header_behind_and_a_real_rollback_latches(story, providers, tmp_path):
    """The k-th highest head can move back when providers fall behind: carol's token C, proven and
    accepted at block M, then reads as never issued at block M-1. That is not evidence of a rollback:
    HeaderBehind, no latch, and the check passes again once the providers catch up. The control: the
    same reading at a header no older than M (the chain really lost carol's acquisition, and grew
    past M) latches the store."""
    p1, p2, p3 = providers
    chain = story.registry.chain
    registry = through(p3, story)
    headers = quorum(p1.url, p2.url, p3.url, story=story)
    before_carol = chain.snapshot()
    carol = story.registry.connect(chain.accounts[3]).acquire("jobs/etl", ttl=600)
    path = tmp_path / "proven.sqlite"
    with Guard(registry, path, mode=Proven(headers=headers)) as guard:
        assert guard.check("jobs/etl", carol.token) == carol.token
        accepted_at = chain.block_number()
        serve_the_past(p1, accepted_at - 1)
        serve_the_past(p2, accepted_at - 1)
        before = dump(path)
        with pytest.raises(HeaderBehind) as behind:
            guard.check("jobs/etl", carol.token)
        assert (behind.value.block, behind.value.floor) == (accepted_at - 1, accepted_at)
        assert (behind.value.chain_token, behind.value.mark) == (0, carol.token)
        assert dump(path) == before  # no latch
        p1.honest()
        p2.honest()
        assert guard.check("jobs/etl", carol.token) == carol.token
        # The control: the chain loses carol's acquisition and grows past block M.
        chain.revert(before_carol)
        chain.mine(3)
        assert chain.block_number() > accepted_at
        with pytest.raises(ChainRolledBack):
            guard.check("jobs/etl", carol.token)
        with pytest.raises(ChainRolledBack):  # latched: every check, every resource
            guard.check(RESOURCE, story.current)


def test_a_forged_log_fools_the_follower_without_headers_not_the_one_with_them(story, providers, tmp_path, monkeypatch):
    """A provider invents a LeaseAcquired of token 999 for the resource in a real block. The control, a
    follow guard without headers that trusts the answer (no completeness check), raises its mark to
    999: bob's real token is refused from then on. (With the check, the block's bloom rules the log out:
    LogsIncomplete, nothing applied past the block.) With a header source the page is proven before it
    is written: ProofInvalid naming the log provider, the store untouched. The same invented log in a
    block of another history (a hash the source does not vouch for) is BlockNotVouched."""
    liar, h2, h3 = providers
    chain = story.registry.chain
    forged_block_hash: list[str | None] = [None]

    def invent(params, forward):
        logs = forward()
        out = []
        for log in logs:
            out.append(log)
            if log["topics"][1] == "0x" + RESOURCE_ID.hex() and int(log["topics"][2], 16) == story.current:
                fake = dict(
                    log, topics=[*log["topics"][:2], "0x" + (999).to_bytes(32, "big").hex(), *log["topics"][3:]]
                )
                fake["logIndex"] = hex(int(log["logIndex"], 16) + 1)
                if forged_block_hash[0] is not None:
                    fake["blockHash"] = forged_block_hash[0]
                out.append(fake)
        return out

    def follow_guard(name, **follow):
        return Guard(through(liar, story), tmp_path / name, mode=Follow(interval=3_600, **follow))

    # Each guard starts following before bob's block: a store that followed up to the story's first block.
    def rewind(path, block):
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'follow_block'", (str(block),))
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'follow_hash'",
                (chain.rpc.request("eth_getBlockByNumber", [hex(block), False])["hash"],),
            )

    liar.on("eth_getLogs", invent)
    with follow_guard("checked.sqlite") as checked:
        rewind(checked.path, story.stale_block)
        with pytest.raises(LogsIncomplete) as held:
            checked.sync()
        assert "rules out" in held.value.reason and checked.mark(RESOURCE) == 0
    with monkeypatch.context() as before_the_check:
        before_the_check.setattr(completeness, "doubt", lambda *args, **query: None)
        with follow_guard("control.sqlite") as fooled:
            rewind(fooled.path, story.stale_block)
            fooled.sync()
            assert fooled.mark(RESOURCE) == 999
            with pytest.raises(StaleToken):  # bob, the real holder, is refused
                fooled.check(RESOURCE, story.current)
    headers = quorum(liar.url, h2.url, h3.url, story=story)
    with follow_guard("proven.sqlite", headers=headers) as guard:
        rewind(guard.path, story.stale_block)
        before = dump(guard.path)
        with pytest.raises(ProofInvalid) as refused:
            guard.sync()
        assert refused.value.source == liar.url and "999" in refused.value.reason
        assert dump(guard.path) == before
        assert not guard.follow_status().healthy  # checks at the mark are proven meanwhile
        forged_block_hash[0] = "0x" + "ee" * 32
        with pytest.raises(BlockNotVouched):
            guard.sync()
        assert dump(guard.path) == before
        liar.handlers.pop("eth_getLogs")  # the provider tells the truth again: the follower catches up
        guard.sync()
        assert guard.mark(RESOURCE) == story.current and guard.follow_status().healthy
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)


def test_the_async_guard_is_the_proven_guard_awaited(story, providers, tmp_path):
    liar, h2, h3 = providers
    forge_alice_live(story, liar)
    path = tmp_path / "proven.sqlite"

    async def scenario():
        async with await AsyncGuard.open(
            through(liar, story), path, mode=Proven(headers=quorum(liar.url, h2.url, h3.url, story=story))
        ) as guard:
            assert guard.mode == "proven" and guard.headers is not None and guard.proof_provider is None
            before = dump(path)
            with pytest.raises(ProofInvalid) as refused:
                await guard.check(RESOURCE, story.stale)
            assert refused.value.source == liar.url and dump(path) == before
        async with await AsyncGuard.open(
            through(liar, story),
            tmp_path / "p2.sqlite",
            mode=Proven(headers=quorum(liar.url, h2.url, h3.url, story=story), proofs=h2.url),
        ) as guard:
            with pytest.raises(StaleToken):
                await guard.check(RESOURCE, story.stale)
            assert await guard.check(RESOURCE, story.current) == story.current
            assert await guard.marks() == {RESOURCE: story.current}

    asyncio.run(scenario())


def test_proven_mode_needs_headers_and_strict_mode_refuses_them(story, providers, tmp_path):
    """The proven mode needs a header source, proofs need one, strict mode takes none; nothing is opened.
    The keywords before 0.2 are refused the same way."""
    p1, _, _ = providers
    registry = through(p1, story)
    with pytest.raises(InvalidInput, match="header source"):
        Guard(registry, tmp_path / "a.sqlite", mode="proven")
    with pytest.raises(InvalidInput, match="header source"):
        Proven(None)
    with pytest.raises(InvalidInput, match="headers"):
        Mark(proofs=p1.url)
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInput, match="proven"):
        Guard(registry, tmp_path / "b.sqlite", mode="strict", headers=quorum(p1.url, story=story))
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInput, match="headers"):
        Guard(registry, tmp_path / "c.sqlite", mode="mark", proof_provider=p1.url)
    assert not list(tmp_path.glob("*.sqlite"))


def test_a_mark_guard_with_headers_proves_news_and_answers_at_the_mark_without_asking(story, providers, tmp_path):
    """A liar says token 999 is the resource's live token. The control, a mark guard on its word, takes
    999 as the mark: bob, the real holder, is refused from then on. With headers the news is proven:
    999 was never issued (UnknownToken), the mark does not move; bob's token is accepted, and at its
    mark answered from the store alone, as mark mode does."""
    liar, h2, h3 = providers
    chain = story.registry.chain
    ForgedWorld(
        story.registry.address, RESOURCE_ID, holder=story.alice, token=999, expires_at=chain.now() + 3_600
    ).install(liar)
    liar.handlers.pop("eth_getProof")
    registry = through(liar, story)
    with Guard(registry, tmp_path / "control.sqlite", mode="mark") as fooled:
        assert fooled.check(RESOURCE, 999) == 999
        with pytest.raises(StaleToken):
            fooled.check(RESOURCE, story.current)
    path = tmp_path / "proven.sqlite"
    with Guard(registry, path, mode=Mark(headers=quorum(liar.url, h2.url, h3.url, story=story))) as guard:
        before = dump(path)
        with pytest.raises(UnknownToken):
            guard.check(RESOURCE, 999)
        assert dump(path) == before
        assert guard.check(RESOURCE, story.current) == story.current
        proofs = liar.count("eth_getProof")
        assert guard.check(RESOURCE, story.current) == story.current  # at the mark: the store's answer
        assert liar.count("eth_getProof") == proofs


def test_a_provider_cannot_pass_an_account_off_as_a_contract_that_accepts_any_signature(story, providers, tmp_path):
    """Carol signs a request naming bob (an account) as its holder. A liar says bob has code and that
    his code accepts the signature (ERC-1271). The control, a strict guard through the liar, accepts
    carol's request as bob's. A proven guard proves bob's account first: no code, so only bob's own
    key could have signed (InvalidSignature), and nothing is recorded."""
    from chainfence import FencedRequest
    from chainfence.errors import InvalidSignature

    liar, h2, h3 = providers
    chain = story.registry.chain
    carol = chain.accounts[3]

    def code(params, forward):
        return "0x60806040" if params[0].lower() == story.bob.lower() else forward()

    def call(params, forward):
        if str(params[0].get("to", "")).lower() == story.bob.lower():
            return "0x1626ba7e" + "00" * 28  # isValidSignature's magic value
        return forward()

    liar.on("eth_getCode", code)
    liar.on("eth_call", call)
    body = b"report"
    request = FencedRequest.sign(
        story.registry.eip712_domain(),
        resource=RESOURCE,
        token=story.current,
        holder=story.bob,
        action="write",
        audience="reports",
        payload=body,
        key=chain.key_of(carol),
    )
    registry = through(liar, story)
    with Guard(
        registry, tmp_path / "strict.sqlite", mode="strict", requests=RequestPolicy(audience="reports")
    ) as fooled:
        assert fooled.check_request(request, body, action="write") == request
    path = tmp_path / "proven.sqlite"
    headers = quorum(liar.url, h2.url, h3.url, story=story)
    with Guard(registry, path, mode=Proven(headers=headers), requests=RequestPolicy(audience="reports")) as guard:
        before = dump(path)
        with pytest.raises(InvalidSignature):
            guard.check_request(request, body, action="write")
        assert dump(path) == before
