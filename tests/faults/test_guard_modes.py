"""Each guard mode against the paused holder who wakes before its successor's first write.

Mark mode's documented window: A's token still equals the mark, so A's late
write lands (the control). Strict mode asks the chain and rejects it; follow
mode learned of B's lease from the registry's events and rejects it, before
B has written anything.
"""

from __future__ import annotations

import time

import pytest

from chainfence import Guard
from chainfence.errors import LeaseExpired, StaleToken, TokenNotCurrent
from chainfence.guard import Follow
from tests.support.sequencer import wait_until

RESOURCE = "reports/daily"


def paused_holder_wakes_before_successor_writes(registry, guard, *, sync=None):
    chain = registry.chain
    a = registry.connect(chain.accounts[1]).acquire(RESOURCE, ttl=30)
    guard.check(RESOURCE, a.token)  # A writes part 1: the mark is A's token
    chain.advance_time(45)  # ...A is paused past its lease
    b = registry.connect(chain.accounts[2]).acquire(RESOURCE, ttl=30)
    if sync:
        sync()
    try:  # A wakes and writes BEFORE B's first write reaches the guard
        guard.check(RESOURCE, a.token)
    except TokenNotCurrent as rejected:
        return rejected, a, b
    return None, a, b


def test_control_mark_mode_accepts_the_late_write(embedded, tmp_path):
    with Guard(embedded, path=tmp_path / "g.sqlite", mode="mark") as guard:
        rejected, a, _ = paused_holder_wakes_before_successor_writes(embedded, guard)
    assert rejected is None, "the control must show mark mode's window"


def test_strict_mode_rejects_the_late_write(embedded, tmp_path):
    with Guard(embedded, path=tmp_path / "g.sqlite", mode="strict") as guard:
        rejected, a, b = paused_holder_wakes_before_successor_writes(embedded, guard)
    assert isinstance(rejected, StaleToken) and rejected.current_token == b.token


def test_strict_mode_rejects_an_expired_holder_even_with_no_successor(embedded, tmp_path):
    chain = embedded.chain
    with Guard(embedded, path=tmp_path / "g.sqlite", mode="strict") as guard:
        a = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=30)
        guard.check(RESOURCE, a.token)
        chain.advance_time(31)
        with pytest.raises(LeaseExpired):
            guard.check(RESOURCE, a.token)


def test_follow_mode_rejects_the_late_write_before_the_successor_writes(embedded, tmp_path):
    with Guard(embedded, path=tmp_path / "g.sqlite", mode=Follow(interval=60)) as guard:
        rejected, a, b = paused_holder_wakes_before_successor_writes(embedded, guard, sync=guard.sync)
        assert isinstance(rejected, StaleToken) and rejected.current_token == b.token
        assert guard.mark(RESOURCE) == b.token
        assert guard.check(RESOURCE, b.token) == b.token  # B's first write: accepted at the mark


def test_the_follower_thread_keeps_up_on_its_own(embedded, tmp_path):
    """No manual sync: the background follower raises the mark once it has followed the block of the
    new lease (waited for as an event, however slow the machine), and learns the resource's name."""
    chain = embedded.chain
    with Guard(embedded, path=tmp_path / "g.sqlite", mode=Follow(interval=0.02)) as guard:
        before = time.monotonic()
        b = embedded.connect(chain.accounts[2]).acquire(RESOURCE, ttl=30)
        wait_until(lambda: (guard.followed_block or 0) >= b.block_number, "the follower reached the lease's block")
        assert guard.mark(RESOURCE) == b.token
        # The sync that got there ended after the lease was mined, so after `before`.
        assert guard.staleness() <= time.monotonic() - before
        assert guard.marks() == {RESOURCE: b.token}, "the follower learns resource names from the events"


def test_a_follower_resumes_where_it_stopped(embedded, tmp_path):
    """The followed block is stored: leases issued while no guard ran are applied on restart."""
    chain = embedded.chain
    path = tmp_path / "g.sqlite"
    Guard(embedded, path=path, mode=Follow(interval=60)).close()
    b = embedded.connect(chain.accounts[2]).acquire(RESOURCE, ttl=30)  # while the service is down
    with Guard(embedded, path=path, mode=Follow(interval=60)) as guard:
        assert guard.mark(RESOURCE) == b.token
        assert guard.followed_block == chain.block_number()


def test_an_exclusive_follower_updates_its_memory_too(embedded, tmp_path):
    chain = embedded.chain
    with Guard(embedded, path=tmp_path / "g.sqlite", mode=Follow(interval=60), exclusive=True) as guard:
        a = embedded.connect(chain.accounts[1]).acquire(RESOURCE, ttl=30)
        guard.check(RESOURCE, a.token)
        chain.advance_time(31)
        b = embedded.connect(chain.accounts[2]).acquire(RESOURCE, ttl=30)
        guard.sync()
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, a.token)
        assert guard.check(RESOURCE, b.token) == b.token
