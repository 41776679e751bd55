"""Nothing anyone can put on-chain stops a follower, an audit query or a restart.

Anyone can call the registry directly, so ``ResourceNamed`` can carry any
bytes: invalid UTF-8, control characters (terminal escapes, newlines, NUL),
bidi overrides that make one name look like another, 128 bytes of garbage.
The defence lives in the SDK (the contract checks only the length; a UTF-8
check on-chain would cost gas on every first acquisition and still let
control and bidi characters through): names read from the chain are
untrusted bytes, decoded only for display, escaped unambiguously; the SDK
itself publishes only printable names.
"""

from __future__ import annotations

import unicodedata

import pytest
from eth_abi import encode as abi_encode

from chainfence import Guard
from chainfence._names import display
from chainfence._node import artifacts as _artifacts
from chainfence.errors import InvalidResourceName

HOSTILE = [
    b"\xff\xfe",  # not UTF-8
    "reports/\u202eyliad".encode(),  # RIGHT-TO-LEFT OVERRIDE: renders as "reports/daily"
    "reports/daily\u200b".encode(),  # a zero-width space: looks exactly like "reports/daily"
    b"\x1b[2J\x1b[31mOWNED",  # terminal escapes (clear screen, red)
    b"line\nbreak\r\x00nul",  # newline, carriage return, NUL
    b"\\xff\\xfe",  # the text an escaped b"\xff\xfe" would show: must not collide
    b"\xff" * 128,  # the longest name, none of it UTF-8
]


def publish(registry, sender, name: bytes, ttl: int = 60):
    """Acquire ``name`` by calling the contract directly, as anyone can (no SDK validation)."""
    selector, _ = _artifacts.functions("FencingRegistry")["acquire"]
    data = selector + abi_encode(["bytes", "uint256"], [name, ttl])  # `string` and `bytes` encode alike
    return registry.chain.transact(sender, registry.address, data)


@pytest.mark.parametrize(
    "name", ["reports/\u202eyliad", "reports/daily\u200b", "\x1b[31mred", "a\nb", "nul\x00", " padded", "tab\there"]
)
def test_the_sdk_publishes_only_printable_names(alice, name):
    with pytest.raises(InvalidResourceName):
        alice.acquire(name, ttl=10)


def test_history_reads_every_hostile_name_and_shows_each_unambiguously(registry, alice, bob):
    for name in HOSTILE:
        publish(registry, bob.sender, name)
    honest = alice.acquire("reports/daily", ttl=60)
    events = registry.history()
    assert len(events) == len(HOSTILE) + 1
    shown = {event.resource_display for event in events}
    assert len(shown) == len(HOSTILE) + 1, "two different names displayed alike"
    for name, event in zip(HOSTILE, events[:-1], strict=True):
        printable = name == b"\\xff\\xfe"  # backslashes and letters: odd, but an honest name
        assert event.resource == (name.decode() if printable else None), "unfit names are never handed back as names"
        assert all(unicodedata.category(c)[0] not in "CZ" or c == " " for c in event.resource_display)
    assert events[-1].resource == events[-1].resource_display == "reports/daily"
    assert events[-1].token == honest.token
    assert display("reports/\u202eyliad".encode()) == "reports/\\u202eyliad"
    assert display(b"\xff\xfe") == "\\xff\\xfe" != display(b"\\xff\\xfe") == "\\\\xff\\\\xfe"


def test_a_follower_whose_store_is_behind_hostile_names_starts_and_keeps_following(registry, alice, bob, tmp_path):
    path = tmp_path / "follow.sqlite"
    Guard(registry, path=path, mode="follow", follow_interval=60).close()  # following from here on
    for name in HOSTILE:
        publish(registry, bob.sender, name)
    honest = alice.acquire("reports/daily", ttl=60)
    with Guard(registry, path=path, mode="follow", follow_interval=60) as guard:  # constructs, syncs
        assert guard.follow_status().healthy and guard.follow_status().last_error is None
        assert guard.mark("reports/daily") == honest.token
        marks = guard.marks()
    assert marks["reports/daily"] == honest.token
    assert "reports/\\u202eyliad" in marks and "\\xff\\xfe" in marks
    assert all(unicodedata.category(c)[0] != "C" for name in marks for c in name)


def test_control_the_generic_decoder_chokes_on_a_name_that_is_not_utf8(registry, bob):
    """What the follower and history() used before: web3's event decoder. It raises on the hostile
    name, for every caller, every time: the follower stalled and history() failed for every resource."""
    receipt = publish(registry, bob.sender, b"\xff\xfe")
    contract = registry.chain.w3.eth.contract(address=registry.address, abi=_artifacts.abi())
    named = contract.events.ResourceNamed()
    log = next(entry for entry in receipt["logs"] if bytes(entry["topics"][0]) == bytes.fromhex(named.topic[2:]))
    with pytest.raises(Exception) as failure:
        named.process_log(log)
    assert "utf" in repr(failure.value).lower() or "decod" in repr(failure.value).lower()


def test_the_watchdog_lists_holders_of_hostile_names_escaped(chain, registry, alice):
    """A crashed holder of a hostile name is listed, its name escaped for display, never decoded as a name;
    a hostile work item (claimed by a direct call with any bytes) is listed the same way."""
    for name in HOSTILE:
        publish(registry, alice.sender, name, ttl=10)
    selector, _ = _artifacts.functions("FencingRegistry")["claimNext"]
    claim = selector + abi_encode(["bytes", "bytes[]", "uint256"], [b"\xff/set", [b"\x1b[2Jitem"], 10])
    registry.chain.transact(alice.sender, registry.address, claim)
    chain.advance_time(11)
    crashed = registry.stuck().crashed
    assert sorted(entry.resource_display for entry in crashed) == sorted(
        [display(name) for name in HOSTILE] + [display(b"\xff/set") + "»" + display(b"\x1b[2Jitem")]
    )
    for entry in crashed:
        assert entry.resource is None or entry.resource.isprintable()
        assert entry.resource_display.isprintable() and "\x1b" not in entry.resource_display
