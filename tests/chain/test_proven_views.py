"""The proven mode against strict mode, on both backends: the same verdict for every state of a lease
(anvil), or a typed refusal where the node cannot prove anything (eth-tester serves no eth_getProof)."""

from __future__ import annotations

import pytest

from chainfence import Guard
from chainfence.errors import ProofInvalid, ProofsNotServed, TokenNotCurrent
from chainfence.guard import Proven
from chainfence.proofs import ProvenReader, TrustedHeaders

# On hardhat's node and ganache too (tests/conftest.py, docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


def reader_for(registry):
    chain = registry.chain
    return ProvenReader(registry.address, headers=TrustedHeaders(chain, clock=chain.now, max_age=3_600), provider=chain)


def verdict(fn):
    try:
        info = fn()
    except TokenNotCurrent as exc:
        return type(exc).__name__, exc.token, exc.current_token
    if isinstance(info, int):  # a guard's check returns the token
        return "accepted", info
    return "live", info.holder, info.token, info.expires_at


def test_the_proven_mode_on_each_backend(registry, alice, bob):
    if registry.chain.rpc.embedded:
        embedded_says_it_cannot_prove(registry, alice)
    else:
        every_state_is_judged_as_strict_mode_judges_it(registry, alice, bob)


def trusted(chain):
    return TrustedHeaders(chain, clock=chain.now, max_age=3_600)


def test_the_proven_guard_on_each_backend(registry, alice, bob, tmp_path):
    """eth-tester: a proven guard refuses to open (ProofsNotServed), and leaves no store held. anvil: at
    every step of a lease's life the proven guard says what a strict guard says, and its marks follow."""
    chain = registry.chain
    if chain.rpc.embedded:
        with pytest.raises(ProofsNotServed):
            Guard(registry, tmp_path / "proven.sqlite", mode=Proven(headers=trusted(chain)))
        with Guard(registry, tmp_path / "proven.sqlite", exclusive=True):  # the store was let go
            pass
        return
    name = "reports/daily"
    with (
        Guard(registry, tmp_path / "strict.sqlite", mode="strict") as strict,
        Guard(registry, tmp_path / "proven.sqlite", mode=Proven(headers=trusted(chain))) as proven,
    ):

        def same(token):
            assert verdict(lambda: proven.check(name, token)) == verdict(lambda: strict.check(name, token))
            assert proven.marks() == strict.marks()

        same(1)
        first = alice.acquire(name, ttl=30)
        same(first.token)
        same(first.token + 1)
        chain.advance_time(31)
        same(first.token)  # expired, no block since
        second = bob.acquire(name, ttl=60)
        same(first.token)
        same(second.token)
        bob.release(name, second.token)
        same(second.token)


def embedded_says_it_cannot_prove(registry, alice):
    lease = alice.acquire("reports/daily", ttl=30)
    reader = reader_for(registry)
    with pytest.raises(ProofsNotServed) as refused:  # said before any header is asked for
        reader.check("reports/daily", lease.token)
    assert refused.value.source == "embedded"
    # Nor could it vouch for a header: eth-tester serves extraData padded to 32 bytes (py-evm's is
    # empty), so its blocks do not hash to their hashes. Typed, never believed.
    with pytest.raises(ProofInvalid, match="the header"):
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
