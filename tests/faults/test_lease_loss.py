"""Losing a lease, as an agent sees it: renewals that come too late, old tokens, other people's leases."""

from __future__ import annotations

import pytest

from chainfence.errors import LeaseExpired, LeaseHeld, LeaseReleased, NotHolder, StaleToken


def heartbeat(lease, chain, *, interval: int, beats: int, pause_at: int | None = None, pause: int = 0):
    """Renew every `interval` seconds of chain time; optionally pause (GC) before one beat."""
    for beat in range(beats):
        chain.advance_time(interval + (pause if beat == pause_at else 0))
        lease.renew()


def test_renewing_at_half_the_ttl_keeps_the_lease(embedded):
    chain = embedded.chain
    lease = embedded.connect(chain.accounts[1]).acquire("job", ttl=30)
    heartbeat(lease, chain, interval=15, beats=6)
    assert lease.is_current()


def test_a_pause_longer_than_the_ttl_makes_the_next_renewal_fail(embedded):
    """The heartbeat wakes after its lease expired: renew raises LeaseExpired; the agent must re-acquire."""
    chain = embedded.chain
    agent = embedded.connect(chain.accounts[1])
    lease = agent.acquire("job", ttl=30)
    with pytest.raises(LeaseExpired):
        heartbeat(lease, chain, interval=15, beats=6, pause_at=2, pause=30)
    again = agent.acquire("job", ttl=30)
    assert again.token > lease.token


def test_a_pause_during_which_someone_took_over_makes_renewal_stale(embedded):
    chain = embedded.chain
    lease = embedded.connect(chain.accounts[1]).acquire("job", ttl=30)
    chain.advance_time(40)
    successor = embedded.connect(chain.accounts[2]).acquire("job", ttl=30)
    with pytest.raises(StaleToken) as stale:
        lease.renew()
    assert stale.value.current_token == successor.token
    with pytest.raises(StaleToken):
        lease.release()
    assert successor.is_current(), "the old holder's release must not free its successor's lease"


def test_a_non_holder_cannot_release_or_renew_someone_elses_lease(embedded):
    chain = embedded.chain
    lease = embedded.connect(chain.accounts[1]).acquire("job", ttl=30)
    intruder = embedded.connect(chain.accounts[2])
    with pytest.raises(NotHolder):
        intruder.release("job", lease.token)
    with pytest.raises(NotHolder):
        intruder.renew("job", lease.token, 30)
    with pytest.raises(LeaseHeld):
        intruder.acquire("job", ttl=30)
    assert lease.is_current()


def test_you_released_it_is_told_apart_from_you_lost_it(embedded):
    chain = embedded.chain
    agent = embedded.connect(chain.accounts[1])
    released = agent.acquire("a", ttl=30)
    released.release()
    lost = agent.acquire("b", ttl=30)
    chain.advance_time(30)
    with pytest.raises(LeaseReleased):
        released.renew()
    with pytest.raises(LeaseExpired):
        lost.renew()
