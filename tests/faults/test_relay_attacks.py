"""A relayer that needs no trust (issue 28, items 2 and 4), attacked on both backends.

A hostile relayer (tests/support/relayers.py: it answers what it likes and sends what it was handed only when
the test says, as often and in whatever order) drops, delays past the deadline, duplicates, reorders and lies;
the real one (chainfence relay) crashes and restarts, and is flooded by one key's valid intents. Each costs the
agent liveness at most: it never believes a lease it does not hold, never holds one twice, keeps nothing alive
past what the chain says. Each attack has its control: the naive client or relayer it defeats, failing.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import urllib.request

import pytest

from chainfence import Registry
from chainfence._node import events as _events
from chainfence._sdk import names as _names
from chainfence.errors import (
    IntentStale,
    LeaseLost,
    RelayerRefused,
    RequestExpired,
    StaleToken,
    TransactionTimeout,
)
from chainfence.integrations.relay import Limits, Relay, intent_gas
from chainfence.intents import Intent
from tests.support.relayers import HostileRelayer, agent_chain, agent_key, relay_running

VALID_FOR = 30


@pytest.fixture
def hostile(chain, registry):
    relayer = HostileRelayer(registry, chain.accounts[0])
    yield relayer
    relayer.close()


def agent_of(chain, registry, label: str, url: str):
    key = agent_key(label)
    agent_side = agent_chain(chain, key, None)
    agent_side.use_relayer(url, valid_for=VALID_FOR)
    return key, Registry.at(agent_side, registry.address).connect(key.address)


def in_thread(function, *args, **kwargs):
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(function, *args, **kwargs)
    pool.shutdown(wait=False)
    return future


def naive_acquire(relayer_url: str, intent: Intent) -> dict:
    """What a client that believes its relayer does: hand the intent over and take the answer as the outcome."""
    body = json.dumps({"intents": [intent.to_json()]}).encode()
    request = urllib.request.Request(relayer_url + "/v1/intents", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


# ---------------------------------------------------------------------------------------------------------------
# Drops, delays past the deadline, lies: the agent never believes a lease it does not hold
# ---------------------------------------------------------------------------------------------------------------


def test_a_dropped_intent_ends_in_nothing_happened_and_the_control_believes_the_relayers_accepted(
    chain, registry, hostile
):
    """The relayer answers "accepted" and never sends: once a block past the intent's deadline is mined, the
    agent gets TransactionTimeout (nothing happened; the registry refuses the intent from then on), and holds
    nothing. Control: a client that takes the relayer's "accepted" for an acquisition believes it holds a lease
    the chain never gave it."""
    key, agent = agent_of(chain, registry, "drop", hostile.url)
    pending = in_thread(agent.acquire, "attacks/drop", ttl=30)
    (intent,) = hostile.wait_for(1)
    chain.advance_time(VALID_FOR + 2)  # a block past the deadline is mined
    with pytest.raises(TransactionTimeout):
        pending.result(timeout=120)
    assert registry.last_lease("attacks/drop") is None
    # Sent now, past its deadline, it is refused: it never lands.
    receipt = hostile.send([intent])
    (refused,) = [log for log in map(_events.decode, receipt["logs"]) if log and log.kind.value == "IntentRefused"]
    assert registry.last_lease("attacks/drop") is None

    answer = naive_acquire(hostile.url, intent)  # control
    assert answer["status"] == "accepted", "the naive client would take this for its lease"
    assert refused.holder == key.address


def test_an_intent_delayed_past_its_deadline_never_lands(chain, registry, hostile):
    """The relayer holds the acquisition, lets chain time pass its deadline, then sends it: the registry refuses
    it (RequestExpired, logged for its digest) and the agent raises that; nothing is held. Control: the same
    intent sent before its deadline lands."""
    _key, agent = agent_of(chain, registry, "late", hostile.url)
    pending = in_thread(agent.acquire, "attacks/late", ttl=30)
    (intent,) = hostile.wait_for(1)
    chain.set_next_block_time(intent.deadline + 1)
    hostile.send([intent])
    with pytest.raises((RequestExpired, TransactionTimeout)):
        pending.result(timeout=120)
    assert registry.last_lease("attacks/late") is None

    _key2, other = agent_of(chain, registry, "on-time", hostile.url)  # control: in time, it lands
    pending = in_thread(other.acquire, "attacks/late", ttl=30)
    in_time = [i for i in hostile.wait_for(2) if i.holder == _key2.address]
    hostile.send(in_time)
    assert pending.result(timeout=120).holder == _key2.address


def test_a_lying_relayer_is_never_believed_and_the_control_that_reads_its_transaction_is(chain, registry, hostile):
    """The relayer answers "landed" with a real transaction: another agent's acquisition of the same resource.
    The agent reads the chain, finds no acquisition of its own (that resource, its holder, its guard), and, once
    the deadline passed, raises TransactionTimeout: never a lease. Control: a client that reads the relayer's
    transaction and takes its LeaseAcquired believes it holds the other agent's token."""
    rival = registry.connect(chain.accounts[1])
    theirs = rival.acquire("attacks/lie", ttl=600)
    hostile.answer = lambda intent: (200, {"status": "landed", "tx": theirs.tx_hash, "token": theirs.token})
    _key, agent = agent_of(chain, registry, "lied-to", hostile.url)
    chain.advance_time(601)  # the rival's lease is over: the agent's acquisition would be taken, if sent
    pending = in_thread(agent.acquire, "attacks/lie", ttl=30)
    (intent,) = hostile.wait_for(1)
    chain.advance_time(VALID_FOR + 2)  # a block past the deadline is mined
    with pytest.raises(TransactionTimeout):
        pending.result(timeout=120)

    answer = naive_acquire(hostile.url, intent)  # control
    receipt = chain.w3.eth.get_transaction_receipt(answer["tx"])
    believed = next(log for log in map(_events.decode, receipt["logs"]) if log and log.kind.value == "LeaseAcquired")
    assert believed.token == theirs.token and believed.holder != intent.holder, "the naive client's false lease"


def test_a_relayer_that_withholds_renewals_makes_keep_alive_fail_closed(chain, registry, hostile):
    """The relayer sends the acquisition and then no renewal: keep() gives the lease up (LeaseLost) on its local
    safe deadline, before the chain's expiry, though the relayer said each renewal was accepted. Control: a
    keeper that believes the relayer's "accepted" keeps working past the lease's expiry on the chain."""
    key, agent = agent_of(chain, registry, "starved", hostile.url)
    pending = in_thread(agent.acquire, "attacks/starved", ttl=6)
    (acquisition,) = hostile.wait_for(1)
    hostile.send([acquisition])
    lease = pending.result(timeout=120)
    chain.advance_time(1)  # a renewal can move the expiry
    lost = threading.Event()
    with pytest.raises(LeaseLost), lease.keep(interval=0.5, on_lost=lambda error: lost.set()):
        hostile.wait_for(2)  # a renewal was handed over; the relayer sits on it
        assert lost.wait(60), "the keep-alive never gave the lease up"
        lease.check()
    assert registry.lease_of("attacks/starved") is not None, "given up while the chain still said live"

    renewal = next(i for i in hostile.distinct() if i.kind.name == "RENEW")
    assert naive_acquire(hostile.url, renewal)["status"] == "accepted"  # control: the naive keeper renews on this
    chain.advance_time(10)
    assert registry.lease_of("attacks/starved") is None, "the naive keeper's lease is over on the chain"


# ---------------------------------------------------------------------------------------------------------------
# Duplicates and reorders: nothing lands twice, no renewal lands out of turn
# ---------------------------------------------------------------------------------------------------------------


def test_a_duplicated_intent_lands_once_and_the_control_a_client_that_signs_again_claims_twice(
    chain, registry, hostile
):
    """The relayer sends the agent's claim three times in one transaction and again in another: it lands once
    (the others refused for their spent nonce) and the agent gets that one item, its token current. Control: a
    client that signs a new intent for each retry (a new nonce), as a naive retry does, claims again when both
    are sent: the agent's own claim is fenced off twice (its token no longer current)."""
    key, agent = agent_of(chain, registry, "dup", hostile.url)
    pending = in_thread(agent.workset("attacks/jobs").claim, ["a", "b", "c"], ttl=30)
    (claim,) = hostile.wait_for(1)
    first = hostile.send([claim, claim, claim])
    hostile.send([claim])
    got = pending.result(timeout=120)
    acquired = [log for log in map(_events.decode, first["logs"]) if log and log.kind.value == "LeaseAcquired"]
    assert len(acquired) == 1 and got.item == "a" and got.holder == key.address
    held = [registry.last_lease(_names.item_name("attacks/jobs", item)) for item in "abc"]
    assert [lease.holder if lease else None for lease in held] == [key.address, None, None]

    domain = registry.eip712_domain()  # control: two signatures of "the same" claim, two nonces
    deadline = chain.now() + VALID_FOR
    retries = [
        Intent.claim(key.address, "attacks/jobs", ["a", "b", "c"], 30, deadline=deadline, nonce=n).sign(key, domain)
        for n in (101, 102)
    ]
    registry.check_current(got.resource, got.token)  # current: raises if not
    hostile.send(retries)
    now_held = registry.last_lease(got.resource)
    assert now_held.token == got.token + 2, "each naive retry claimed again"
    with pytest.raises(StaleToken):  # the agent's own claim was fenced off
        registry.check_current(got.resource, got.token)


def test_reordered_renewals_never_shorten_the_lease_and_the_control_of_lone_renewals_does(chain, registry, hostile):
    """Two renewals of one lease (ttl 10) signed against the same expiry (ttl 20, then ttl 40), sent by the
    relayer in the other order: the later one lands, the earlier one is refused (IntentStale): the lease keeps the
    longer expiry. Control: the same two renewals as lone calls, the earlier arriving last, shorten it."""
    key, agent = agent_of(chain, registry, "reorder", hostile.url)
    pending = in_thread(agent.acquire, "attacks/reorder", ttl=10)
    (acquisition,) = hostile.wait_for(1)
    hostile.send([acquisition])
    lease = pending.result(timeout=120)
    chain.advance_time(2)
    short = in_thread(agent.renew, "attacks/reorder", lease.token, ttl=20)
    hostile.wait_for(2)
    long = in_thread(agent.renew, "attacks/reorder", lease.token, ttl=40)
    renewals = [i for i in hostile.wait_for(3) if i.kind.name == "RENEW"]
    assert [i.ttl for i in renewals] == [20, 40]
    hostile.send([renewals[1], renewals[0]])  # reordered
    assert long.result(timeout=120) > 0
    with pytest.raises(IntentStale):
        short.result(timeout=120)
    longest = registry.lease_of("attacks/reorder").expires_at

    holder = registry.connect(chain.accounts[2])  # control: lone renewals arriving out of order
    mine = holder.acquire("attacks/reorder-control", ttl=10)
    chain.advance_time(2)
    holder.renew("attacks/reorder-control", mine.token, ttl=40)
    holder.renew("attacks/reorder-control", mine.token, ttl=20)
    assert registry.lease_of("attacks/reorder-control").expires_at < longest, "the older renewal shortened it"


# ---------------------------------------------------------------------------------------------------------------
# The real relayer: a crash and restart, a flood
# ---------------------------------------------------------------------------------------------------------------


def test_a_relayer_that_crashes_sends_again_what_it_took_and_nothing_lands_twice(chain, registry, tmp_path):
    """The relayer takes three acquisitions, journals them and crashes before sending; restarted on its journal,
    it sends them: each lands once. It crashes again after sending and before writing that down; restarted, it
    finds them landed (the registry would refuse each) and sends nothing. Control: a restart that sends the
    journal again unchecked pays for three refused intents (the registry's guard keeps them from landing twice;
    the check keeps the relayer from paying)."""
    journal = tmp_path / "relay.jsonl"
    domain = registry.eip712_domain()
    keys = [agent_key(f"crash{i}") for i in range(3)]
    intents = [
        Intent.acquire(k.address, f"attacks/crash{i}", 30, latest_token=0, deadline=chain.now() + 600).sign(k, domain)
        for i, k in enumerate(keys)
    ]
    first = Relay(registry.connect(chain.accounts[0]), journal=journal)
    for intent in intents:
        assert first.take(json.dumps({"intents": [intent.to_json()]}).encode())[0] == 200
    # crash: no worker ever ran, nothing was sent
    assert all(registry.last_lease(f"attacks/crash{i}") is None for i in range(3))

    second = Relay(registry.connect(chain.accounts[0]), journal=journal)
    assert second.pending() == 3
    assert second.send_once() == 3
    holders = [registry.last_lease(f"attacks/crash{i}").holder for i in range(3)]
    assert holders == [k.address for k in keys]
    tokens = [registry.last_lease(f"attacks/crash{i}").token for i in range(3)]
    # crash after the send, before "settled" was written: the journal loses its last lines
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(line for line in lines if '"settled"' not in line) + "\n")

    third = Relay(registry.connect(chain.accounts[0]), journal=journal)
    assert third.pending() == 0, "landed intents are not sent again"
    assert [registry.last_lease(f"attacks/crash{i}").token for i in range(3)] == tokens

    data = registry._encode("performIntents", [[intent.abi() for intent in intents]])  # control: resent unchecked
    receipt = chain.transact(chain.accounts[0], registry.address, data, gas=1_000_000)
    refused = [log for log in map(_events.decode, receipt["logs"]) if log and log.kind.value == "IntentRefused"]
    assert len(refused) == 3 and receipt["gasUsed"] > 40_000, "the unchecked restart paid for three refusals"
    assert [registry.last_lease(f"attacks/crash{i}").token for i in range(3)] == tokens


def test_a_flood_of_one_keys_valid_intents_is_held_to_its_rate_and_cap_and_the_control_without_limits_is_not(
    chain, registry
):
    """One agent hands the relayer a flood of valid intents (acquisitions of free names): after its rate (5 a
    minute) each is refused (429, RelayerRefused through the SDK), what it was charged stays under its spend
    cap, and another agent is still served. Control: a relayer without limits takes the whole flood and spends
    past that cap for the one key."""
    cap = 5 * intent_gas(Intent.acquire(agent_key("x").address, "x", 1, latest_token=0, deadline=1))
    domain = registry.eip712_domain()
    flooder = agent_key("flooder")

    def flood(count: int) -> list[bytes]:
        deadline = chain.now() + 600
        return [
            json.dumps(
                {
                    "intents": [
                        Intent.acquire(flooder.address, f"attacks/flood{n}", 30, latest_token=0, deadline=deadline)
                        .sign(flooder, domain)
                        .to_json()
                    ]
                }
            ).encode()
            for n in range(count)
        ]

    relay = Relay(registry.connect(chain.accounts[0]), limits=Limits(rate=5, spend_cap=cap + 1))
    answers = [relay.take(body)[0] for body in flood(40)]
    assert answers.count(200) == 5 and set(answers[5:]) == {429}
    assert relay.spent(flooder.address) <= cap + 1
    with relay_running(registry, chain.accounts[0], limits=Limits(rate=5, spend_cap=cap + 1)) as (_served, url):
        key, other = agent_of(chain, registry, "bystander", url)
        assert other.acquire("attacks/bystander", ttl=30).holder == key.address
        flooded = agent_chain(chain, flooder, None)
        flooded.use_relayer(url)
        flooding = Registry.at(flooded, registry.address).connect(flooder.address)
        for n in range(5):
            flooding.acquire(f"attacks/flooded{n}", ttl=30)
        with pytest.raises(RelayerRefused) as refused:
            flooding.acquire("attacks/flooded-more", ttl=30)
        assert refused.value.relayer_status == 429

    unlimited = Relay(registry.connect(chain.accounts[0]), limits=Limits(rate=1_000_000, spend_cap=10**12))
    answers = [unlimited.take(body)[0] for body in flood(40)]  # control
    assert answers.count(200) == 40 and unlimited.spent(flooder.address) > cap


# ---------------------------------------------------------------------------------------------------------------
# Hostile intents handed to the real relayer
# ---------------------------------------------------------------------------------------------------------------


def test_hostile_intents_are_refused_by_the_relayer_before_it_pays(chain, registry):
    """Handed to the relayer: an intent past its deadline, one signed for another registry, one signed by a key
    that is not its holder's, and one of a contract holder whose ERC-1271 check loops until its gas is gone: each
    is refused (422) and nothing is charged or queued. A replay of a landed intent is taken (its signature is
    its holder's) and refused by the registry, charged to that holder. Control: the gas bomb sent unchecked (what
    a relayer that did not ask the registry first would send) costs the batch its whole stipend."""
    from tests.support.intents import GAS_BOMB, deploy_runtime

    relay = Relay(registry.connect(chain.accounts[0]))
    domain = registry.eip712_domain()
    other = Registry.deploy(chain, max_ttl=3_600)
    alice, mallory = agent_key("h-alice"), agent_key("h-mallory")
    bomb = deploy_runtime(chain, GAS_BOMB)
    deadline = chain.now() + 600

    def body(intent: Intent) -> bytes:
        return json.dumps({"intents": [intent.to_json()]}).encode()

    late = Intent.acquire(alice.address, "attacks/h1", 30, latest_token=0, deadline=chain.now() - 1).sign(alice, domain)
    foreign = Intent.acquire(alice.address, "attacks/h2", 30, latest_token=0, deadline=deadline).sign(
        alice, other.eip712_domain()
    )
    forged = Intent.acquire(alice.address, "attacks/h3", 30, latest_token=0, deadline=deadline).sign(mallory, domain)
    bombed = Intent.acquire(bomb, "attacks/h4", 30, latest_token=0, deadline=deadline)
    bombed = Intent(**{**bombed.__dict__, "signature": b"\x01" * 65})
    for hostile_intent in (late, foreign, forged, bombed):
        status, answer = relay.take(body(hostile_intent))
        assert status == 422, (status, answer)
    assert relay.pending() == 0 and relay.spent(alice.address) == 0 and relay.spent(bomb) == 0

    mine = Intent.acquire(alice.address, "attacks/h5", 30, latest_token=0, deadline=deadline).sign(alice, domain)
    assert relay.take(body(mine))[0] == 200 and relay.send_once() == 1
    landed = registry.last_lease("attacks/h5")
    assert landed.holder == alice.address
    assert relay.take(body(mine))[0] == 200, "a replay is signed by its holder: taken, for the registry to judge"
    charged = relay.spent(alice.address)
    assert relay.send_once() == 1
    assert registry.last_lease("attacks/h5").token == landed.token, "the replay did not land"
    assert relay.status(mine.digest(domain))["status"] == "refused"
    assert relay.spent(alice.address) <= charged, "the refused replay was charged to its holder, at its share"

    closed = Relay(registry.connect(chain.accounts[0]), limits=Limits(allow=frozenset({mallory.address.lower()})))
    other_key = Intent.acquire(alice.address, "attacks/h6", 30, latest_token=0, deadline=deadline).sign(alice, domain)
    assert closed.take(body(other_key))[0] == 403, "an allowlist closes the relayer to other keys"

    data = registry._encode("performIntents", [[bombed.abi()]])  # control: unchecked
    receipt = chain.transact(chain.accounts[0], registry.address, data, gas=500_000)
    assert receipt["gasUsed"] > 50_000, "the unchecked gas bomb burnt its stipend"
