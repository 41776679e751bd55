"""Events: emitted on every state change, indexed for audit by resource, token and holder."""

from __future__ import annotations

import pytest

from chainfence import AcquireReason, EventKind, audit
from chainfence._node import events as _events

# On hardhat's node and ganache too (tests/conftest.py, docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


def test_every_state_change_emits_one_event_in_order(alice, bob, chain, registry):
    """acquire, renew, release, re-acquire, takeover after expiry: one event each, in chain order."""
    first = alice.acquire("r", ttl=10)
    first.renew(ttl=20)
    first.release()
    second = bob.acquire("r", ttl=10)
    third = bob.acquire("r", ttl=10)
    chain.advance_time(11)
    fourth = alice.acquire("r", ttl=10)

    events = audit.history(registry, "r")
    assert [(e.kind, e.token) for e in events] == [
        (EventKind.ACQUIRED, first.token),
        (EventKind.RENEWED, first.token),
        (EventKind.RELEASED, first.token),
        (EventKind.ACQUIRED, second.token),
        (EventKind.ACQUIRED, third.token),
        (EventKind.ACQUIRED, fourth.token),
    ]
    acquired = [e for e in events if e.kind is EventKind.ACQUIRED]
    assert [(e.reason, e.previous_token) for e in acquired] == [
        (AcquireReason.UNHELD, 0),
        (AcquireReason.RELEASED, first.token),
        (AcquireReason.REACQUIRED, second.token),
        (AcquireReason.EXPIRED, third.token),
    ]
    assert events[1].expires_at == first.expires_at
    assert all(e.resource == "r" for e in events)


def test_event_fields_match_the_lease_and_the_block(alice, chain, registry):
    lease = alice.acquire("r", ttl=10)
    (event,) = audit.history(registry, "r")
    block = chain.w3.eth.get_block(lease.block_number)
    assert (event.holder, event.token, event.expires_at, event.resource_id) == (
        alice.sender,
        lease.token,
        lease.expires_at,
        lease.resource_id,
    )
    assert (event.block_number, event.block_timestamp, event.tx_hash) == (
        lease.block_number,
        block["timestamp"],
        lease.tx_hash,
    )


def test_history_filters_on_each_indexed_field(alice, bob, registry):
    a1 = alice.acquire("x", ttl=10)
    b1 = bob.acquire("y", ttl=10)
    a2 = alice.acquire("z", ttl=10)
    assert [e.token for e in audit.history(registry, "y")] == [b1.token]
    assert [e.token for e in audit.history(registry, holder=alice.sender)] == [a1.token, a2.token]
    assert [e.resource for e in audit.history(registry, token=a2.token)] == ["z"]
    assert [e.token for e in audit.history(registry, "x", holder=bob.sender)] == []
    assert {e.resource for e in audit.history(registry)} == {"x", "y", "z"}


def test_resource_name_is_published_once(alice, chain, registry):
    """ResourceNamed is emitted on the first acquisition of a resource only."""
    alice.acquire("named", ttl=1)
    chain.advance_time(2)
    alice.acquire("named", ttl=1)
    logs = _events.fetch_all(
        chain, registry.address, kinds=[_events.Kind.NAMED], from_block=0, to_block=chain.block_number()
    )
    assert [entry.name for entry in logs].count(b"named") == 1


def test_refused_operations_emit_nothing(alice, bob, registry):
    alice.acquire("r", ttl=60)
    before = len(audit.history(registry))
    for attempt in (lambda: bob.acquire("r", ttl=60), lambda: bob.release("r", 1), lambda: bob.renew("r", 1, 5)):
        try:
            attempt()
        except Exception:
            pass
    assert len(audit.history(registry)) == before
