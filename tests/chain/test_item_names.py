"""Claimed work items are named ``workset»item``: never displayed like a plain name, and reached by that name.

The attack (issue #17): the admin of namespace ``prod`` holds ``prod/db``; a stranger claims item ``db``
of the open workset ``prod`` (a workset without ``/`` is in no namespace). On-chain the item is
``keccak256(abi.encode("prod", "db"))``; the registry used to name it in a ``ResourceNamed`` carrying
``"prod/db"``, the very bytes of the administered resource's name. Displayed as those bytes, the stranger's
item passed for the administered resource in the history, the audit, ``stuck`` and the timeline. Each test
runs the naive display or lookup beside the SDK's, on both backends.

And for every reader but the SDK (issue 25, finding 20): a block explorer, ``cast`` or any indexer reads
the logs with the published ABI alone. The registry now names an item in ``ItemNamed(resource, workset,
item)``, never in ``ResourceNamed``: read raw, the stranger's claim publishes no resource name at all, and
``a/b/c`` is published once, by the resource of that name. The controls deploy the registry as it was
(tests/chain/data/FencingRegistry-items-joined.json) and read it the same raw way.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_utils import keccak

from chainfence import Guard, Registry, audit
from chainfence._sdk import names as _names
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.audit import EventKind, timeline, watchdog
from chainfence.audit.index import AuditIndex
from chainfence.errors import InvalidResourceName, LeaseReleased, UnknownToken

ADMINISTERED = "prod/db"
ITEM = "prod»db"  # item "db" of the open workset "prod"


@pytest.fixture
def registry(chain, backend_registry):
    """A registry whose namespaces are assigned at deployment (nobody can claim one later): prod to
    alice (account 1), ops to carol (account 3)."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={"prod": chain.accounts[1], "ops": chain.accounts[3]})


@pytest.fixture
def collision(registry, alice, bob):
    """alice administers namespace prod and holds prod/db; bob, a stranger, claims item db of workset prod."""
    held = alice.acquire(ADMINISTERED, ttl=600)
    claimed = bob.workset("prod").claim(["db"], ttl=30)
    assert (claimed.workset, claimed.item) == ("prod", "db")
    return held, claimed


def _naive(raw: bytes) -> str:
    """What the audit showed before: the bytes a ResourceNamed carried, escaped, and nothing else."""
    return _names.display(raw)


# ---------------------------------------------------------------------------
# A raw reader: the registry's logs decoded with the published ABI alone, as a block explorer, `cast` or any
# indexer would (issue 25, finding 20). Nothing of chainfence's SDK is used to read them.
# ---------------------------------------------------------------------------

#: The ABI the repository publishes for tools in other languages (scripts/build_contracts.py writes it).
PUBLISHED_ABI = Path(__file__).resolve().parents[2] / "abi" / "FencingRegistry.json"
#: The registry before finding 20 (commit 6840208): its creation code and event ABI, for the controls.
JOINED_NAMES = Path(__file__).resolve().parent / "data" / "FencingRegistry-items-joined.json"


def _raw_read(chain, address: str, events_abi: list[dict], from_block: int) -> list[tuple[str, dict]]:
    """Every log of ``address`` as (event name, {field: value}), decoded with ``events_abi`` and eth-abi only."""
    by_topic = {
        keccak(text=f"{event['name']}({','.join(field['type'] for field in event['inputs'])})"): event
        for event in events_abi
        if event["type"] == "event"
    }
    read = []
    for log in chain.w3.eth.get_logs({"address": address, "fromBlock": from_block, "toBlock": "latest"}):
        event = by_topic[bytes(log["topics"][0])]
        indexed = [field for field in event["inputs"] if field["indexed"]]
        data = [field for field in event["inputs"] if not field["indexed"]]
        fields = {
            field["name"]: abi_decode([field["type"]], bytes(topic))[0]
            for field, topic in zip(indexed, log["topics"][1:], strict=True)
        }
        values = abi_decode([field["type"] for field in data], bytes(log["data"]))
        fields.update(zip([field["name"] for field in data], values, strict=True))
        read.append((event["name"], fields))
    return read


def _resource_names(read: list[tuple[str, dict]]) -> list[tuple[bytes, str]]:
    """What a raw reader takes for resource names: each ResourceNamed's (resource, name)."""
    return [(fields["resource"], fields["name"]) for name, fields in read if name == "ResourceNamed"]


def _strings(read: list[tuple[str, dict]]) -> list[str]:
    return [value for _name, fields in read for value in fields.values() if isinstance(value, str)]


def _send(chain, sender: str, to: str, signature: str, types: list[str], args: list) -> dict:
    return chain.transact(sender, to, keccak(text=signature)[:4] + abi_encode(types, args))


def test_a_raw_reader_never_sees_a_strangers_item_as_a_resource_name(registry, collision):
    """bob (a stranger to prod's allowlist) claims item db of the open workset prod. Read with the published
    ABI alone, the only resource name is alice's prod/db, hashing to its own resource; bob's item is an
    ItemNamed, workset "prod" and item "db" apart, and nothing his claim logged contains a '/' (the mark of
    a name in a namespace). Control: test_control_the_registry_before_named_a_strangers_item_prod_db."""
    held, claimed = collision
    events_abi = json.loads(PUBLISHED_ABI.read_text())
    read = _raw_read(registry.chain, registry.address, events_abi, registry.deployment_block())
    assert _resource_names(read) == [(held.resource_id, "prod/db")]
    assert all(keccak(text=name) == resource for resource, name in _resource_names(read))
    items = [fields for name, fields in read if name == "ItemNamed"]
    assert items == [{"resource": claimed.resource_id, "workset": "prod", "item": "db"}]
    # Everything bob's claim logged (its transaction's logs are the two about his item), read raw.
    assert len(registry.chain.w3.eth.get_transaction_receipt(claimed.tx_hash)["logs"]) == 2
    bobs = [entry for entry in read if entry[1].get("resource") == claimed.resource_id]
    assert [name for name, _fields in bobs] == ["ItemNamed", "LeaseAcquired"]
    assert all("/" not in text for text in _strings(bobs)), _strings(bobs)


def test_three_ids_never_publish_one_resource_name(registry, alice, bob, carol):
    """The resource a/b/c, item c of workset a/b and item b/c of workset a: three ids. A raw reader sees one
    resource named a/b/c (the resource's) and two items, each with its workset and item apart.
    Control: test_control_the_registry_before_published_a_b_c_three_times."""
    plain = alice.acquire("a/b/c", ttl=60)
    first = bob.workset("a/b").claim(["c"], ttl=60)
    second = carol.workset("a").claim(["b/c"], ttl=60)
    assert len({plain.resource_id, first.resource_id, second.resource_id}) == 3
    read = _raw_read(
        registry.chain, registry.address, json.loads(PUBLISHED_ABI.read_text()), registry.deployment_block()
    )
    assert _resource_names(read) == [(plain.resource_id, "a/b/c")]
    assert [fields for name, fields in read if name == "ItemNamed"] == [
        {"resource": first.resource_id, "workset": "a/b", "item": "c"},
        {"resource": second.resource_id, "workset": "a", "item": "b/c"},
    ]


def test_an_item_is_named_in_the_abi_encoding_of_its_two_parts(registry, bob, carol):
    """claimNext writes its ItemNamed by hand (tests the compiler's encoder would pass anyway): its data is,
    byte for byte, abi.encode(workset, item), padding included, at every length around a word's edge; and
    grantItem's (the compiler's encoder) is the same."""
    topic = keccak(text="ItemNamed(bytes32,string,string)")
    for number, (workset_length, item_length) in enumerate([(1, 1), (31, 32), (32, 33), (33, 31), (64, 1), (128, 128)]):
        workset, item = f"{number}" + "w" * (workset_length - 1), "é" * (item_length // 2) + "i" * (item_length % 2)
        for lease in (
            bob.workset(workset).claim([item], ttl=30),
            carol.workset(f"ops/{number}").grant(item, bob.sender, 30),
        ):
            parts = (workset, item) if lease.workset == workset else (f"ops/{number}", item)
            logs = registry.chain.w3.eth.get_transaction_receipt(lease.tx_hash)["logs"]
            (named,) = [log for log in logs if bytes(log["topics"][0]) == topic]
            assert [bytes(t) for t in named["topics"][1:]] == [lease.resource_id]
            assert bytes(named["data"]) == abi_encode(["string", "string"], list(parts)), (number, parts)


def _deploy_joined(chain, prefixes: dict[str, str]) -> tuple[str, list[dict], int]:
    """The registry before finding 20, deployed raw: (address, its event ABI, its block)."""
    before = json.loads(JOINED_NAMES.read_text())
    args = abi_encode(["uint256", "string[]", "address[]"], [3_600, list(prefixes), list(prefixes.values())])
    receipt = chain.transact(chain.accounts[0], None, bytes.fromhex(before["bytecode"][2:]) + args)
    return receipt["contractAddress"], before["events"], receipt["blockNumber"]


def test_control_the_registry_before_named_a_strangers_item_prod_db(chain):
    """The control, on the registry as it was: the same claim by the same stranger, read the same raw way,
    publishes a second resource name prod/db, beside the administered resource's, that does not even hash
    to its id: a raw reader takes bob for a holder of prod/db."""
    alice, bob = chain.accounts[1], chain.accounts[2]
    address, events_abi, block = _deploy_joined(chain, {"prod": alice})
    _send(chain, alice, address, "acquire(string,uint256)", ["string", "uint256"], ["prod/db", 600])
    _send(
        chain,
        bob,
        address,
        "claimNext(string,string[],uint256)",
        ["string", "string[]", "uint256"],
        ["prod", ["db"], 30],
    )
    named = _resource_names(_raw_read(chain, address, events_abi, block))
    assert [name for _resource, name in named] == ["prod/db", "prod/db"]
    assert named[1][0] == _names.item_id("prod", "db") != keccak(text="prod/db")
    assert not all(keccak(text=name) == resource for resource, name in named)


def test_control_the_registry_before_published_a_b_c_three_times(chain):
    alice, bob, carol = chain.accounts[1], chain.accounts[2], chain.accounts[3]
    address, events_abi, block = _deploy_joined(chain, {})
    claim = "claimNext(string,string[],uint256)"
    _send(chain, alice, address, "acquire(string,uint256)", ["string", "uint256"], ["a/b/c", 60])
    _send(chain, bob, address, claim, ["string", "string[]", "uint256"], ["a/b", ["c"], 60])
    _send(chain, carol, address, claim, ["string", "string[]", "uint256"], ["a", ["b/c"], 60])
    named = _resource_names(_raw_read(chain, address, events_abi, block))
    assert [name for _resource, name in named] == ["a/b/c"] * 3
    assert len({resource for resource, _name in named}) == 3


def test_a_strangers_item_is_never_displayed_like_the_administered_resource(chain, registry, bob, collision):
    held, claimed = collision
    shown = {event.resource_id: event.resource_display for event in audit.history(registry)}
    assert claimed.resource == ITEM
    assert shown[held.resource_id] == "prod/db" and shown[claimed.resource_id] == "prod»db"
    names = {event.resource_id: event.resource for event in audit.history(registry)}
    assert names[claimed.resource_id] == ITEM, "the name an audit returns is the one that reaches the item"

    index = AuditIndex(":memory:")
    index.sync(registry)
    by_id = {record.resource_id: record for record in index.resources()}
    assert by_id[held.resource_id].resource_display == "prod/db" and not by_id[held.resource_id].claimed_item
    assert by_id[claimed.resource_id].resource_display == "prod»db" and by_id[claimed.resource_id].claimed_item
    assert {r.resource_display for r in index.current()} == {"prod/db", "prod»db"}
    assert [r.resource_display for r in index.resources("prod/")] == ["prod/db"], "prod/ lists names, not items"
    assert [r.resource_display for r in index.resources("prod»")] == ["prod»db"]
    assert [r.resource_display for r in index.current(prefix="prod»d")] == ["prod»db"]
    bob.complete(ITEM, claimed.token, b"done")
    index.sync(registry)
    assert [c.resource_display for c in index.completions()] == ["prod»db"]

    # stuck(): a crashed claimant of an item is listed as the item (bob claims another item and vanishes).
    crashed = bob.workset("prod").claim(["cache"], ttl=10)
    chain.advance_time(11)
    report = watchdog.stuck(registry)
    assert [(e.resource, e.resource_display) for e in report.crashed] == [("prod»cache", "prod»cache")]
    assert crashed.token == report.crashed[0].token
    index.sync(registry)
    assert [(e.resource_display) for e in watchdog.stuck(registry, index=index).crashed] == ["prod»cache"]

    # The timeline draws two lanes, the item's with its » (a plain name's never has one bare).
    lanes = timeline.layout(index.timeline_leases([ADMINISTERED, ITEM])).lanes
    assert sorted(lane.name for lane in lanes) == ["prod/db", "prod»db"]


def test_every_lookup_reaches_an_item_by_the_name_it_is_shown_by(chain, registry, alice, bob, collision, tmp_path):
    held, claimed = collision
    token = claimed.token
    # The control: the name the audit used to print reaches the administered resource, not the item.
    assert registry.last_lease("prod/db").token == held.token != token
    with pytest.raises(UnknownToken):
        registry.check_current("prod/db", token)  # above the administered resource's token: never issued for it
    # By its name: views, history, renew, release, claim again and complete, all public.
    assert registry.check_current(ITEM, token).holder == bob.sender
    assert registry.last_lease(ITEM).token == token
    assert registry.workset("prod").last_lease("db").token == token
    assert [e.kind for e in audit.history(registry, ITEM)] == [EventKind.ACQUIRED]
    assert bob.renew(ITEM, token, 60, progress=1) > 0
    assert bob.workset("prod").renew("db", token, 60) > 0
    with Guard(registry, path=tmp_path / "guard.sqlite") as guard:
        assert guard.check(ITEM, token) == token
    bob.workset("prod").release("db", token)
    with pytest.raises(LeaseReleased):
        registry.check_current(ITEM, token)
    again = bob.workset("prod").claim(["db"], ttl=60)
    assert again.resource == ITEM and again.token > token
    bob.release(ITEM, again.token)
    third = bob.workset("prod").claim(["db"], ttl=60)
    bob.complete(ITEM, third.token, b"rows: 3")
    assert registry.last_lease(ITEM).status.name == "DONE"

    index = AuditIndex(":memory:")
    index.sync(registry)
    assert [r.token for r in index.history(ITEM)] == [token, again.token, third.token]
    assert [r.token for r in index.history("prod/db")] == [held.token]
    assert [c.token for c in index.completions(resource=ITEM)] == [third.token]
    assert index.holder_at(ITEM, block=third.block_number).token == third.token
    assert [lease.token for lease in index.timeline_leases([ITEM])] == [token, again.token, third.token]

    # asyncio: the same names.
    async def run():
        achain = AsyncChain.over(chain)
        try:
            aregistry = await AsyncRegistry.at(achain, registry.address)
            return (await aregistry.last_lease(ITEM)).token
        finally:
            await achain.aclose()

    assert asyncio.run(run()) == third.token


def test_no_plain_name_can_pass_for_an_item(registry, alice):
    """'»' is refused in a plain name (so in worksets and items too), and escaped when the chain holds one."""
    for bad in ("prod»db", "»", "a»"):
        with pytest.raises(InvalidResourceName, match="reserved for claimed work items"):
            alice.acquire(bad, ttl=10)
    with pytest.raises(InvalidResourceName):
        alice.workset("prod»x").claim(["db"], ttl=10)
    with pytest.raises(InvalidResourceName):
        alice.workset("prod").claim(["d»b"], ttl=10)
    for malformed in ("a»b»c", "»db", "prod»", "x" * 129 + "»y"):
        with pytest.raises(InvalidResourceName):
            registry.last_lease(malformed)
    # A name with » published by a direct call (the contract checks only lengths) displays escaped.
    from eth_abi import encode

    from chainfence._node import artifacts as _artifacts

    selector, _ = _artifacts.functions("FencingRegistry")["acquire"]
    registry.chain.transact(
        alice.sender, registry.address, selector + encode(["bytes", "uint256"], ["prod»db".encode(), 10])
    )
    hostile = [e for e in audit.history(registry) if e.resource_display.startswith("prod")]
    assert [e.resource_display for e in hostile] == ["prod\\u00bbdb"] and hostile[0].resource is None


def test_the_admin_revokes_and_grants_an_item_by_its_name(registry, alice, bob, carol):
    """revoke/grant take the item's name as they take a resource's (revoke_item/grant_item underneath);
    the control: the contract's workset/item string is a plain resource, with no live lease."""
    from chainfence.errors import LeaseRevoked, NotLive

    claim = bob.workset("ops/jobs").claim(["j1"], ttl=60)
    assert claim.resource == "ops/jobs»j1"
    with pytest.raises(NotLive):
        carol.namespace("ops").revoke("ops/jobs/j1")  # the naive name: a plain resource nobody holds
    assert carol.namespace("ops").revoke(claim.resource) == claim.token
    with pytest.raises(LeaseRevoked):
        bob.renew(claim.resource, claim.token, 60)
    granted = carol.namespace("ops").grant("ops/jobs»j1", alice.sender, 60)
    assert (granted.resource, granted.workset, granted.item) == ("ops/jobs»j1", "ops/jobs", "j1")
    assert registry.check_current("ops/jobs»j1", granted.token).holder == alice.sender
    alice.complete(granted.resource, granted.token, b"done")
    assert registry.workset("ops/jobs").last_lease("j1").status.name == "DONE"
