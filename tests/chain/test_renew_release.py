"""renew() and release(): only the holder, only with the current token, only while live."""

from __future__ import annotations

import pytest

from chainfence import LeaseStatus
from chainfence.errors import (
    LeaseExpired,
    LeaseHeld,
    LeaseReleased,
    NotHolder,
    StaleToken,
    UnknownToken,
)

# On hardhat's node and ganache too (tests/conftest.py, docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


def test_renew_moves_expiry_to_block_time_plus_ttl(alice, chain, registry):
    """renew(ttl) sets expires_at = block time + ttl and the Lease object follows."""
    lease = alice.acquire("r", ttl=30)
    chain.advance_time(20)
    lease.renew(ttl=50)
    receipt_block = chain.w3.eth.get_block("latest")
    assert lease.expires_at == receipt_block["timestamp"] + 50
    assert registry.lease_of("r").expires_at == lease.expires_at
    assert lease.ttl == 50


def test_renew_defaults_to_the_acquired_ttl(alice, chain):
    lease = alice.acquire("r", ttl=30)
    lease.renew()
    assert lease.expires_at == chain.latest_time() + 30  # mined in the latest block


def test_renew_keeps_the_lease_alive_past_its_first_expiry(alice, bob, chain):
    """A lease renewed in time stays held past its original expiry."""
    lease = alice.acquire("r", ttl=30)
    original = lease.expires_at
    chain.advance_time(25)
    lease.renew(ttl=30)
    chain.advance_time(original + 5 - chain.now())
    with pytest.raises(LeaseHeld):
        bob.acquire("r", ttl=30)


def test_renew_after_expiry_fails_and_a_new_acquire_gets_a_new_token(alice, chain, registry):
    """After expiry renew raises LeaseExpired; acquiring again is the way back, with a new token."""
    lease = alice.acquire("r", ttl=10)
    chain.advance_time(10)
    with pytest.raises(LeaseExpired) as expired:
        lease.renew()
    assert expired.value.expired_at == lease.expires_at
    assert expired.value.token == lease.token
    again = alice.acquire("r", ttl=10)
    assert again.token == lease.token + 1


def test_renew_with_a_superseded_token_is_stale(alice, bob, chain):
    """The old holder renewing after someone else acquired gets StaleToken with the current token."""
    old = alice.acquire("r", ttl=10)
    chain.advance_time(11)
    new = bob.acquire("r", ttl=10)
    with pytest.raises(StaleToken) as stale:
        old.renew()
    assert (stale.value.token, stale.value.current_token) == (old.token, new.token)


def test_renew_by_a_non_holder_is_refused(alice, bob, registry):
    """Presenting the current token is not enough: only its holder may renew."""
    lease = alice.acquire("r", ttl=10)
    with pytest.raises(NotHolder) as refused:
        bob.renew("r", lease.token, 10)
    assert (refused.value.account, refused.value.holder) == (bob.sender, alice.sender)
    assert registry.lease_of("r").expires_at == lease.expires_at


def test_renew_with_a_token_never_issued_is_unknown(alice):
    lease = alice.acquire("r", ttl=10)
    with pytest.raises(UnknownToken) as unknown:
        alice.renew("r", lease.token + 100, 10)
    assert unknown.value.current_token == lease.token


def test_renew_after_release_says_released(alice):
    """Renewing a lease you released raises LeaseReleased (you closed it), not LeaseExpired."""
    lease = alice.acquire("r", ttl=10)
    lease.release()
    with pytest.raises(LeaseReleased):
        lease.renew()


def test_release_frees_the_resource_and_keeps_the_record(alice, registry):
    """After release nobody holds it; the last lease reads RELEASED with expiry 0."""
    lease = alice.acquire("r", ttl=60)
    lease.release()
    assert lease.released
    assert registry.lease_of("r") is None
    last = registry.last_lease("r")
    assert (last.status, last.token, last.holder, last.expires_at) == (
        LeaseStatus.RELEASED,
        lease.token,
        alice.sender,
        0,
    )
    with pytest.raises(LeaseReleased):
        registry.check_current("r", lease.token)


def test_release_with_an_old_token_never_frees_a_newer_lease(alice, bob, chain, registry):
    """A holder that lost its lease cannot release its successor's."""
    old = alice.acquire("r", ttl=10)
    chain.advance_time(11)
    new = bob.acquire("r", ttl=60)
    with pytest.raises(StaleToken):
        old.release()
    assert registry.check_current("r", new.token)
    assert registry.lease_of("r").holder == bob.sender


def test_release_by_a_non_holder_is_refused(alice, bob, registry):
    lease = alice.acquire("r", ttl=60)
    with pytest.raises(NotHolder):
        bob.release("r", lease.token)
    assert registry.check_current("r", lease.token)


def test_release_after_expiry_says_expired(alice, chain):
    """Releasing a lease that already ran out raises LeaseExpired: you lost it before you let go."""
    lease = alice.acquire("r", ttl=10)
    chain.advance_time(10)
    with pytest.raises(LeaseExpired):
        lease.release()


def test_second_release_says_released(alice):
    lease = alice.acquire("r", ttl=10)
    lease.release()
    with pytest.raises(LeaseReleased):
        lease.release()


def test_release_of_a_never_held_resource_is_unknown(alice):
    with pytest.raises(UnknownToken) as unknown:
        alice.release("never/held", 1)
    assert unknown.value.current_token == 0


# ---------------------------------------------------------------------------
# The context manager
# ---------------------------------------------------------------------------


def test_lease_context_manager_holds_during_the_body_and_releases_after(alice, registry):
    with alice.acquire("cm", ttl=60) as lease:
        assert registry.check_current("cm", lease.token)
    assert lease.released
    assert registry.lease_of("cm") is None


def test_lease_context_manager_never_runs_its_body_without_the_lease(alice, bob):
    """When the resource is held, LeaseHeld comes from the with statement and the body is skipped."""
    ran = []
    with alice.acquire("cm", ttl=60):
        with pytest.raises(LeaseHeld):
            with bob.acquire("cm", ttl=60):
                ran.append(True)
    assert ran == []


def test_lease_context_manager_releases_when_the_body_raises(alice, registry):
    with pytest.raises(KeyError):
        with alice.acquire("cm", ttl=60):
            raise KeyError("boom")
    assert registry.lease_of("cm") is None


def test_lease_expiring_inside_the_body_is_reported_on_exit(alice, chain):
    """A body that outlived its lease learns it: exit raises LeaseExpired instead of passing silently."""
    with pytest.raises(LeaseExpired):
        with alice.acquire("cm", ttl=10):
            chain.advance_time(15)


def test_body_exception_is_not_masked_by_a_failed_release(alice, chain):
    """If the body raised and release also fails, the body's exception wins, with a note."""
    with pytest.raises(RuntimeError) as raised:
        with alice.acquire("cm", ttl=10):
            chain.advance_time(15)
            raise RuntimeError("body failed")
    assert any("also failed" in note for note in raised.value.__notes__)


def test_lease_released_inside_the_body_is_not_released_twice(alice):
    with alice.acquire("cm", ttl=10) as lease:
        lease.release()
    assert lease.released
