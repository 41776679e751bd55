"""acquire(): tokens, holders, expiry, reasons; against every backend."""

from __future__ import annotations

import pytest

from chainfence import AcquireReason, LeaseStatus, audit
from chainfence.errors import LeaseExpired, LeaseHeld, StaleToken

# On hardhat's node and ganache too (tests/conftest.py); a test marked for hardhat alone needs what
# ganache lacks (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


def block_time(registry, lease) -> int:
    return registry.chain.w3.eth.get_block(lease.block_number)["timestamp"]


def test_first_acquisition_issues_token_one_to_the_sender(registry, alice):
    """The first acquisition of a registry gets token 1, held by its sender until block time + ttl."""
    assert registry.latest_token() == 0
    lease = alice.acquire("reports/daily", ttl=30)
    assert lease.token == 1
    assert lease.holder == alice.sender
    assert lease.expires_at == block_time(registry, lease) + 30
    assert lease.reason is AcquireReason.UNHELD
    assert lease.previous_token == 0
    assert registry.latest_token() == 1


def test_tokens_strictly_increase_across_resources_and_accounts(alice, bob, carol, registry):
    """Every acquisition, of any resource by anyone, gets latest + 1."""
    tokens = [
        alice.acquire("a", ttl=10).token,
        bob.acquire("b", ttl=10).token,
        carol.acquire("c", ttl=10).token,
        alice.acquire("b2", ttl=10).token,
    ]
    assert tokens == [1, 2, 3, 4]
    assert registry.latest_token() == 4


def test_acquire_of_a_live_lease_by_another_reverts_with_the_holder(alice, bob, registry):
    """LeaseHeld names the holder, its token and expiry, and changes nothing."""
    lease = alice.acquire("reports/daily", ttl=60)
    before = registry.chain.w3.eth.block_number
    with pytest.raises(LeaseHeld) as held:
        bob.acquire("reports/daily", ttl=60)
    error = held.value
    assert (error.holder, error.token, error.expires_at) == (alice.sender, lease.token, lease.expires_at)
    assert error.resource == "reports/daily"
    assert "reports/daily" in str(error) and alice.sender in str(error)
    assert registry.chain.w3.eth.block_number == before, "a refused acquire must not be mined"
    assert registry.latest_token() == lease.token
    assert registry.lease_of("reports/daily").holder == alice.sender


def test_reacquire_by_the_holder_issues_a_new_token_and_fences_the_old(alice, registry):
    """The holder acquiring again gets a new token; its previous token stops being current."""
    first = alice.acquire("jobs/etl", ttl=60)
    second = alice.acquire("jobs/etl", ttl=60)
    assert second.token > first.token
    assert second.reason is AcquireReason.REACQUIRED
    assert second.previous_token == first.token
    assert registry.check_current("jobs/etl", second.token)
    with pytest.raises(StaleToken):
        registry.check_current("jobs/etl", first.token)
    with pytest.raises(StaleToken) as stale:
        first.renew()
    assert stale.value.current_token == second.token


def test_acquire_after_expiry_passes_the_resource_on(alice, bob, chain, registry):
    """Once chain time reaches expires_at, anyone may acquire; the reason says it expired."""
    first = alice.acquire("reports/daily", ttl=20)
    chain.advance_time(25)
    second = bob.acquire("reports/daily", ttl=20)
    assert second.token == first.token + 1
    assert second.reason is AcquireReason.EXPIRED
    assert second.previous_token == first.token
    assert registry.lease_of("reports/daily").holder == bob.sender


@pytest.mark.nodes("hardhat")
def test_lease_is_live_until_the_second_before_expiry(alice, bob, chain, registry):
    """Live for now < expires_at: a block at expires_at - 1 still sees it, one at expires_at does not."""
    lease = alice.acquire("edge", ttl=10)
    chain.advance_time(lease.expires_at - 1 - chain.now())
    assert chain.now() == lease.expires_at - 1
    assert registry.check_current("edge", lease.token)
    chain.advance_time(1)
    assert chain.now() == lease.expires_at
    with pytest.raises(LeaseExpired):
        registry.check_current("edge", lease.token)
    assert registry.last_lease("edge").status is LeaseStatus.EXPIRED


@pytest.mark.nodes("hardhat")
def test_acquire_mined_exactly_at_expiry_succeeds(alice, bob, chain):
    """A transaction in the block whose timestamp equals expires_at finds the lease expired."""
    lease = alice.acquire("edge", ttl=10)
    chain.set_next_block_time(lease.expires_at)
    taken = bob.acquire("edge", ttl=10)
    assert taken.reason is AcquireReason.EXPIRED
    assert chain.w3.eth.get_block(taken.block_number)["timestamp"] == lease.expires_at


@pytest.mark.nodes("hardhat")
def test_acquire_mined_one_second_before_expiry_is_refused(alice, bob, chain):
    """A transaction in the block at expires_at - 1 still finds the lease live."""
    lease = alice.acquire("edge", ttl=10)
    chain.set_next_block_time(lease.expires_at - 1)
    with pytest.raises(LeaseHeld):
        bob.acquire("edge", ttl=10)


def test_acquire_after_release_records_the_release(alice, bob):
    """Acquiring a released resource says so, and names the released token."""
    first = alice.acquire("reports/daily", ttl=60)
    first.release()
    second = bob.acquire("reports/daily", ttl=60)
    assert second.reason is AcquireReason.RELEASED
    assert second.previous_token == first.token


def test_the_holder_may_be_any_account_the_chain_holds(registry, chain):
    """connect() takes any account with a key; the lease holder is that account."""
    for account in chain.accounts[4:7]:
        lease = registry.connect(account).acquire(f"r/{account}", ttl=5)
        assert lease.holder == account


def test_unicode_names_hash_as_utf8(alice, registry):
    """A resource is keccak256 of its UTF-8 name; non-ASCII names work and round-trip through events."""
    lease = alice.acquire("rapports/quotidien-été", ttl=5)
    from eth_utils import keccak

    assert lease.resource_id == keccak("rapports/quotidien-été".encode())
    assert audit.history(registry, "rapports/quotidien-été")[0].resource == "rapports/quotidien-été"


def test_longest_allowed_name_is_accepted(alice):
    """A 128-byte name is the maximum the contract accepts."""
    name = "n" * 128
    assert alice.acquire(name, ttl=5).resource == name
