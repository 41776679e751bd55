"""The SDK's own work per acquisition and release, counted (issue #19): what it no longer does, on both backends.

A call's Python is on its critical path as much as the node's round trips are: these count the pieces
that each lever took away, never time.

- the receipt the send returns is read, not formatted: no log of it is built in web3's shape
  (``chainfence._node.formats.LazyReceipt``), and only the registry's event of interest is decoded
  (not the ``ResourceNamed`` a first acquisition logs beside it);
- a name's id and its check are remembered: acquiring and releasing the same name again hashes it no more.

The controls: a receipt read in full (``Chain.transact``'s, for whoever asks) still formats every log,
and a name the SDK has not seen is hashed.
"""

from __future__ import annotations

from chainfence._node import events, formats
from chainfence._sdk import names as _names


def counted(monkeypatch, module, name: str) -> list:
    """Each call of ``module.name`` from now on (its first argument)."""
    calls: list = []
    function = getattr(module, name)

    def counting(*args, **kwargs):
        calls.append(args[0] if args else None)
        return function(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_an_acquisition_and_a_release_build_no_log_and_decode_one_event_each(alice, monkeypatch):
    built = counted(monkeypatch, formats, "_log_entry")
    decoded = counted(monkeypatch, events, "_decode_as")
    lease = alice.acquire("jobs/call-work/first", ttl=60)  # a first acquisition: ResourceNamed and LeaseAcquired
    assert built == [] and len(decoded) == 1
    alice.release(lease.resource, lease.token)
    assert built == [] and len(decoded) == 2
    assert lease.token > 0 and alice.lease_of("jobs/call-work/first") is None


def test_control_a_receipt_read_in_full_formats_every_log(alice, monkeypatch):
    data = alice._encode("acquire", ["jobs/call-work/control", 60])
    receipt = alice.chain.transact(alice.sender, alice.address, data)
    built = counted(monkeypatch, formats, "_log_entry")
    logs = receipt["logs"]
    assert len(built) == len(logs) == 2  # ResourceNamed and LeaseAcquired, in web3's shape once read
    assert logs[1]["address"] == alice.address and logs[1]["topics"][0].to_0x_hex() == events.topic(
        events.Kind.ACQUIRED
    )


def test_a_name_is_hashed_once_however_often_it_is_acquired_and_released(alice, monkeypatch):
    name = "jobs/call-work/hashed-once"
    hashed = counted(monkeypatch, _names, "keccak")
    for _ in range(3):
        lease = alice.acquire(name, ttl=60)
        alice.release(name, lease.token)
    assert hashed.count(name.encode()) <= 1


def test_control_a_name_not_seen_before_is_hashed(alice, monkeypatch):
    _names._remembered_id.cache_clear()
    hashed = counted(monkeypatch, _names, "keccak")
    lease = alice.acquire("jobs/call-work/new", ttl=60)
    alice.release(lease.resource, lease.token)
    assert hashed.count(b"jobs/call-work/new") == 1
