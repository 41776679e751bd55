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

from chainfence import Guard, audit
from chainfence._node import artifacts as _artifacts
from chainfence._node.rlp import keccak256 as keccak
from chainfence._sdk.names import display, item_id
from chainfence.audit import watchdog
from chainfence.errors import InvalidResourceName, NotLive
from chainfence.guard import Follow

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
    events = audit.history(registry)
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
    Guard(registry, path=path, mode=Follow(interval=60)).close()  # following from here on
    for name in HOSTILE:
        publish(registry, bob.sender, name)
    honest = alice.acquire("reports/daily", ttl=60)
    with Guard(registry, path=path, mode=Follow(interval=60)) as guard:  # constructs, syncs
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
    crashed = watchdog.stuck(registry).crashed
    assert sorted(entry.resource_display for entry in crashed) == sorted(
        [display(name) for name in HOSTILE] + [display(b"\xff/set") + "»" + display(b"\x1b[2Jitem")]
    )
    for entry in crashed:
        assert entry.resource is None or entry.resource.isprintable()
        assert entry.resource_display.isprintable() and "\x1b" not in entry.resource_display


def _hostile_in(namespace: str) -> list[bytes]:
    """The hostile names, each under ``namespace/`` (and cut to the contract's 128 bytes)."""
    return [(namespace + "/").encode() + name[: 127 - len(namespace)] for name in HOSTILE]


def _shown(registry, raw: bytes) -> str:
    """What an operator reads of the resource named ``raw``: its ``resource_display`` in history."""
    return next(event.resource_display for event in audit.history(registry) if event.resource_id == keccak(raw))


def test_the_admin_revokes_and_grants_every_hostile_name_the_registry_holds(chain, registry, alice, bob):
    """Issue 25, finding 16: ``revoke`` could not end a lease on a name with bidi controls or bytes that
    are not UTF-8 (it took only a str the SDK would publish). The admin now passes back exactly what the
    audit showed (``undisplay``), or the bytes, or the str as it is, and reaches every name the registry
    holds; ``grant`` takes them too, and ``acquire`` still refuses them."""
    from chainfence._sdk.names import undisplay

    namespace = alice.namespace().prefix
    names = _hostile_in(namespace)
    tokens = {}
    for raw in names:
        publish(registry, bob.sender, raw)
        tokens[raw] = registry.latest_token()
    for raw in names:
        target = undisplay(_shown(registry, raw))
        assert target == raw, "what the operator read names the resource exactly"
        assert alice.namespace().revoke(target) == tokens[raw]
        with pytest.raises(NotLive):
            alice.namespace().revoke(target)
    bidi = (namespace + "/reports/\u202eyliad").encode()
    publish(registry, bob.sender, bidi)
    assert alice.namespace().revoke(bidi.decode()) == registry.latest_token(), "a str with a bidi control, as it is"

    granted = alice.namespace().grant(names[0], carol := chain.accounts[3], 60)
    assert granted.holder == carol and granted.reason.name == "GRANTED" and granted.previous_token == tokens[names[0]]
    assert granted.resource_id == keccak(names[0]) and granted.resource == display(names[0])
    alice.namespace().grant(bidi, alice.sender, 60).release()  # a lease on a hostile name ends as any other

    latest, head = registry.latest_token(), chain.block_number()
    never = (namespace + "/never\u202e").encode()
    with pytest.raises(InvalidResourceName, match="never held"):
        alice.namespace().grant(never, alice.sender, 60)
    with pytest.raises(InvalidResourceName):
        alice.acquire(bidi.decode(), ttl=60)
    assert (registry.latest_token(), chain.block_number()) == (latest, head), "nothing was sent"


def test_the_admin_revokes_and_grants_a_hostile_work_item(chain, registry, alice, bob):
    """The same for a claimed item whose workset and item are hostile: ``revoke_item`` and ``grant_item``
    take their bytes, and the CLI's escaped ``workset»item`` undisplays to them."""
    from chainfence._sdk.names import undisplay

    namespace = alice.namespace().prefix
    workset, item = (namespace + "/\u202eset").encode(), b"\x1b[2J\xff"
    selector, _ = _artifacts.functions("FencingRegistry")["claimNext"]
    claim = selector + abi_encode(["bytes", "bytes[]", "uint256"], [workset, [item], 60])
    registry.chain.transact(bob.sender, registry.address, claim)
    claimed = registry.latest_token()
    shown = next(event.resource_display for event in audit.history(registry) if event.token == claimed)
    assert undisplay(shown) == (workset, item)
    shown_workset, shown_item = undisplay(shown)
    assert alice.workset(shown_workset).revoke(shown_item) == claimed
    lease = alice.workset(workset).grant(item, alice.sender, 60)
    assert lease.token > claimed and lease.resource_id == item_id(workset, item)
    lease.complete(b"done")


def test_control_the_name_as_shown_is_another_resource_and_the_sdk_took_only_a_str(registry, alice, bob):
    """Control (the unfixed paths): the escaped text an operator read, passed back as a name, reaches
    another resource (``NotLive``), and the lease stays live; a name that is not UTF-8 has no str."""
    raw = _hostile_in(alice.namespace().prefix)[0]  # namespace/ + b"\xff\xfe"
    publish(registry, bob.sender, raw)
    with pytest.raises(NotLive):
        alice.namespace().revoke(_shown(registry, raw))
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    assert bob.last_lease(_shown(registry, raw)) is None, "the shown text names a resource never held"
    history = [event for event in audit.history(registry) if event.resource_id == keccak(raw)]
    assert [event.kind.value for event in history] == ["acquired"], "the hostile lease was not revoked"
