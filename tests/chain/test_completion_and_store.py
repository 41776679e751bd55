"""Fenced completion on the registry, and the example FencedStore: stale holders revert on-chain."""

from __future__ import annotations

import pytest
from eth_utils import keccak

from chainfence import EventKind, FencedStore, audit
from chainfence.errors import LeaseExpired, NotHolder, StaleToken, UnknownToken

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")


def test_a_current_holder_completes_and_audit_lists_it(alice, registry):
    lease = alice.acquire("jobs/etl", ttl=60)
    digest = lease.complete(b"42 rows loaded")
    assert digest == keccak(b"42 rows loaded")
    (event,) = [e for e in audit.history(registry, "jobs/etl") if e.kind is EventKind.COMPLETED]
    assert (event.token, event.holder, event.result_digest) == (lease.token, alice.sender, digest)
    assert registry.check_current("jobs/etl", lease.token), "completing does not end the lease"


def test_a_32_byte_result_is_recorded_as_given(alice):
    lease = alice.acquire("jobs/etl", ttl=60)
    assert lease.complete(b"\x11" * 32) == b"\x11" * 32


def test_a_stale_completion_reverts_and_records_nothing(alice, bob, chain, registry):
    """The paused worker finishes after its successor took over: its completion is refused."""
    old = alice.acquire("jobs/etl", ttl=10)
    chain.advance_time(11)
    new = bob.acquire("jobs/etl", ttl=60)
    with pytest.raises(StaleToken) as stale:
        old.complete(b"stale result")
    assert stale.value.current_token == new.token
    new.complete(b"fresh result")
    completions = [e for e in audit.history(registry, "jobs/etl") if e.kind is EventKind.COMPLETED]
    assert [(e.token, e.result_digest) for e in completions] == [(new.token, keccak(b"fresh result"))]


def test_completion_after_expiry_or_by_someone_else_is_refused(alice, bob, chain):
    lease = alice.acquire("jobs/etl", ttl=10)
    with pytest.raises(NotHolder):
        bob.complete("jobs/etl", lease.token, b"not mine")
    chain.advance_time(10)
    with pytest.raises(LeaseExpired):
        lease.complete(b"too late")


@pytest.fixture
def store(registry):
    return FencedStore.deploy(registry)


def test_the_holder_writes_the_store(alice, store):
    lease = alice.acquire("kv/config", ttl=60)
    store.write(lease, b"v1")
    value, fence = store.read("kv/config")
    assert value.rstrip(b"\0") == b"v1" and fence == lease.token


def test_a_stale_holder_write_reverts_on_chain(alice, bob, chain, store):
    """The on-chain version of the paused-holder scenario: the registry's error bubbles up typed."""
    old = alice.acquire("kv/config", ttl=10)
    store.write(old, b"v1")
    chain.advance_time(11)
    new = bob.acquire("kv/config", ttl=60)
    store.write(new, b"v2")
    with pytest.raises(StaleToken):
        store.write(old, b"stale")
    assert store.read("kv/config") == (b"v2".ljust(32, b"\0"), new.token)
    assert [w["token"] for w in store.history()] == [old.token, new.token]


def test_a_current_token_presented_by_a_non_holder_reverts(alice, bob, store):
    lease = alice.acquire("kv/config", ttl=60)
    with pytest.raises(NotHolder) as refused:
        store.write_raw(bob.sender, "kv/config", lease.token, b"sneaky")
    assert (refused.value.account, refused.value.holder) == (bob.sender, alice.sender)


def test_a_forged_token_reverts(alice, store):
    lease = alice.acquire("kv/config", ttl=60)
    with pytest.raises(UnknownToken):
        store.write_raw(alice.sender, "kv/config", lease.token + 7, b"forged")
    assert store.read("kv/config")[1] == 0
