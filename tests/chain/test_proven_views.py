"""The proven mode against strict mode, on both backends: the same verdict for every state of a lease
(anvil), or a typed refusal where the node cannot prove anything (eth-tester serves no eth_getProof)."""

from __future__ import annotations

import pytest

from chainfence.errors import HeaderInvalid, ProofsNotServed, TokenNotCurrent
from chainfence.proofs import ProvenReader, TrustedHeaders


def reader_for(registry):
    chain = registry.chain
    return ProvenReader(registry.address, headers=TrustedHeaders(chain, clock=chain.now, max_age=3_600), provider=chain)


def verdict(fn):
    try:
        info = fn()
    except TokenNotCurrent as exc:
        return type(exc).__name__, exc.token, exc.current_token
    return "live", info.holder, info.token, info.expires_at


def test_the_proven_mode_on_each_backend(registry, alice, bob):
    if registry.chain.rpc.embedded:
        embedded_says_it_cannot_prove(registry, alice)
    else:
        every_state_is_judged_as_strict_mode_judges_it(registry, alice, bob)


def embedded_says_it_cannot_prove(registry, alice):
    lease = alice.acquire("reports/daily", ttl=30)
    reader = reader_for(registry)
    with pytest.raises(ProofsNotServed) as refused:  # said before any header is asked for
        reader.check("reports/daily", lease.token)
    assert refused.value.source == "embedded"
    # Nor could it vouch for a header: eth-tester serves extraData padded to 32 bytes (py-evm's is
    # empty), so its blocks do not hash to their hashes. Typed, never believed.
    with pytest.raises(HeaderInvalid):
        reader.header()


def every_state_is_judged_as_strict_mode_judges_it(registry, alice, bob):
    chain = registry.chain
    reader = reader_for(registry)
    name = "reports/daily"

    def same(token):
        assert verdict(lambda: reader.check(name, token)) == verdict(lambda: registry.check_current(name, token))

    same(1)  # never held: UnknownToken
    first = alice.acquire(name, ttl=30)
    same(first.token)  # live
    same(first.token + 1)  # unknown
    chain.advance_time(31)
    same(first.token)  # expired
    second = bob.acquire(name, ttl=60)
    same(first.token)  # stale
    same(second.token)
    bob.release(name, second.token)
    same(second.token)  # released
    info = reader.lease_at(name)
    strict = registry.last_lease(name)
    assert (info.holder, info.token, info.expires_at, info.status) == (
        strict.holder,
        strict.token,
        strict.expires_at,
        strict.status,
    )
