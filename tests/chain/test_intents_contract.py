"""performIntents, the registry's signed intents, attacked as a contract on both backends (issue 28).

The promise: anyone may submit an intent its holder signed (EIP-712, the registry's domain); the registry runs it
as the lone call its signer would have made (the signer the holder in the lease, in every event, for namespaces'
admission and lock-delay), with every check of that call; an intent cannot land twice, after its deadline, on
another registry or chain, or for another signer; a batch gives each intent its own outcome. Each attack below has
its control: the same intent, as it should be, landing; or what the registry would do without the check.
"""

from __future__ import annotations

import dataclasses

import pytest

from chainfence._node import events as _events
from chainfence._sdk import names as _names
from chainfence.errors import (
    IntentStale,
    InvalidSignature,
    LeaseHeld,
    LeaseReleased,
    LockDelayed,
    NotAdmitted,
    NotHolder,
    ReplayedRequest,
    RequestExpired,
    StaleToken,
    TransactionFailed,
    UnknownRevert,
)
from chainfence.fenced_requests import EIP712Domain
from chainfence.intents import Intent
from tests.support.intents import (
    GAS_BOMB,
    YES_WITH_A_TAIL,
    agent,
    deploy_runtime,
    events,
    perform,
    refusals,
    refused_digests,
)
from tests.support.wallet import AgentWallet


def far(chain) -> int:
    return chain.now() + 600


def acquire(chain, registry, who, name, ttl=30, *, exclusive=False, deadline=None, latest=None):
    if latest is None:
        last = registry.last_lease(name)
        latest = last.token if last is not None else 0
    intent = Intent.acquire(
        who.address, name, ttl, latest_token=latest, deadline=deadline or far(chain), exclusive=exclusive
    )
    return intent.sign(who, registry.eip712_domain())


def renew(chain, registry, who, name, ttl=60, *, progress=bytes(32)):
    lease = registry.last_lease(name)
    intent = Intent.renew(
        who.address,
        lease.resource_id,
        lease.token,
        ttl,
        latest_expiry=lease.expires_at,
        deadline=far(chain),
        progress=progress,
    )
    return intent.sign(who, registry.eip712_domain())


def release(chain, registry, who, name):
    lease = registry.last_lease(name)
    return Intent.release(who.address, lease.resource_id, lease.token, deadline=far(chain)).sign(
        who, registry.eip712_domain()
    )


# ---------------------------------------------------------------------------------------------------------------
# The signer is the holder, with every check of the lone call
# ---------------------------------------------------------------------------------------------------------------


def test_the_signer_holds_the_lease_and_is_named_by_every_event(chain, registry):
    """Acquire, renew (with a progress marker), complete and release, each signed by an agent with no gas and sent
    by a relayer: the lease, and LeaseAcquired/Renewed/Completed/Released, name the agent, never the relayer."""
    alice = agent("alice")
    relayer = chain.accounts[0]
    receipt = perform(chain, registry, [acquire(chain, registry, alice, "intents/one")])
    assert refusals(receipt, registry) == {}
    lease = registry.last_lease("intents/one")
    assert lease.holder == alice.address
    (acquired,) = events(receipt, _events.Kind.ACQUIRED)
    assert acquired.holder == alice.address != relayer
    assert chain.w3.eth.get_balance(alice.address) == 0, "the agent never paid"

    chain.advance_time(5)
    marker = b"\x07" * 32
    receipt = perform(chain, registry, [renew(chain, registry, alice, "intents/one", progress=marker)])
    (renewed,) = events(receipt, _events.Kind.RENEWED)
    assert (renewed.holder, renewed.progress, renewed.token) == (alice.address, marker, lease.token)

    done = Intent.complete(alice.address, lease.resource_id, lease.token, b"\x01" * 32, deadline=far(chain))
    receipt = perform(chain, registry, [done.sign(alice, registry.eip712_domain())])
    (completed,) = events(receipt, _events.Kind.COMPLETED)
    assert (completed.holder, completed.result_digest) == (alice.address, b"\x01" * 32)

    receipt = perform(chain, registry, [release(chain, registry, alice, "intents/one")])
    (released,) = events(receipt, _events.Kind.RELEASED)
    assert released.holder == alice.address
    assert registry.last_lease("intents/one").status.name == "RELEASED"


def test_a_claim_intent_claims_for_its_signer_and_its_completion_marks_the_item_done(chain, registry):
    alice = agent("alice")
    domain = registry.eip712_domain()
    claim = Intent.claim(alice.address, "intents/jobs", ["j1", "j2"], 60, deadline=far(chain)).sign(alice, domain)
    receipt = perform(chain, registry, [claim])
    (acquired,) = events(receipt, _events.Kind.ACQUIRED)
    assert acquired.holder == alice.address
    assert acquired.resource_id == _names.item_id("intents/jobs", "j1")
    done = Intent.complete(alice.address, acquired.resource_id, acquired.token, b"\x02" * 32, deadline=far(chain))
    perform(chain, registry, [done.sign(alice, domain)])
    assert registry.last_lease(resource_id=acquired.resource_id).status.name == "DONE"


def test_the_lone_calls_checks_judge_the_signer(chain, registry):
    """A resource held by another is refused to the signer as to its lone call (LeaseHeld, naming the other);
    another's lease cannot be released by a signer (NotHolder, naming the signer); an exclusive acquisition of
    the signer's own live lease is refused (LeaseHeld naming the signer itself)."""
    alice, bob = agent("alice"), agent("bob")
    perform(chain, registry, [acquire(chain, registry, alice, "intents/held")])
    lease = registry.last_lease("intents/held")
    stolen = Intent.release(bob.address, lease.resource_id, lease.token, deadline=far(chain))
    receipt = perform(
        chain,
        registry,
        [
            acquire(chain, registry, bob, "intents/held"),
            stolen.sign(bob, registry.eip712_domain()),
            acquire(chain, registry, alice, "intents/held", exclusive=True),
        ],
    )
    found = refusals(receipt, registry)
    assert isinstance(found[0], LeaseHeld) and found[0].holder == alice.address
    assert isinstance(found[1], NotHolder) and found[1].account == bob.address
    assert isinstance(found[2], LeaseHeld) and found[2].holder == alice.address
    assert registry.last_lease("intents/held").holder == alice.address


def test_admission_and_lock_delay_judge_the_signer_not_the_relayer(chain):
    """A namespace that admits only the agent: the agent's intent, sent by a relayer the namespace does not admit,
    lands; another agent's is refused (NotAdmitted, naming that agent) though the relayer sent both. After the
    agent's lease expires, the lock-delay lets the agent (its expired holder) take it back, and refuses another."""
    from chainfence import Registry

    admin = chain.accounts[3]
    registry = Registry.deploy(chain, max_ttl=3_600, namespaces={"crew": admin})
    alice, bob = agent("alice"), agent("bob")
    crew = registry.connect(admin).namespace("crew")
    crew.set_policy(lock_delay=20, admission_required=True)
    crew.admit([alice.address, bob.address])
    receipt = perform(chain, registry, [acquire(chain, registry, alice, "crew/db", ttl=10)])
    assert refusals(receipt, registry) == {}
    assert not crew.is_admitted(chain.accounts[0]), "the relayer is not admitted"

    carol = agent("carol")
    receipt = perform(chain, registry, [acquire(chain, registry, carol, "crew/other")])
    (refused,) = refusals(receipt, registry).values()
    assert isinstance(refused, NotAdmitted) and refused.holder == carol.address

    chain.advance_time(11)  # alice's lease expired; the lock-delay runs for 20 s
    receipt = perform(
        chain,
        registry,
        [acquire(chain, registry, bob, "crew/db"), acquire(chain, registry, alice, "crew/db")],
    )
    found = refusals(receipt, registry)
    assert list(found) == [0] and isinstance(found[0], LockDelayed) and found[0].holder == alice.address
    assert registry.last_lease("crew/db").holder == alice.address


def test_one_refused_intent_refuses_only_itself(chain, registry):
    """A batch of five: a good acquisition, a forged one, another good one, an expired one, a third good one. The
    three go through, in order, with consecutive tokens; the two are logged with their own errors and digests."""
    alice, bob, carol, mallory = agent("alice"), agent("bob"), agent("carol"), agent("mallory")
    forged = dataclasses.replace(acquire(chain, registry, alice, "intents/b2"), signature=b"\x01" * 65)
    expired = acquire(chain, registry, mallory, "intents/b4", deadline=chain.now() - 1)
    batch = [
        acquire(chain, registry, alice, "intents/b1"),
        forged,
        acquire(chain, registry, bob, "intents/b3"),
        expired,
        acquire(chain, registry, carol, "intents/b5"),
    ]
    receipt = perform(chain, registry, batch)
    found = refusals(receipt, registry)
    assert sorted(found) == [1, 3]
    assert isinstance(found[1], InvalidSignature) and isinstance(found[3], RequestExpired)
    domain = registry.eip712_domain()
    assert refused_digests(receipt) == {1: forged.digest(domain), 3: expired.digest(domain)}
    tokens = [event.token for event in events(receipt, _events.Kind.ACQUIRED)]
    assert len(tokens) == 3 and tokens == list(range(tokens[0], tokens[0] + 3))
    holders = [registry.last_lease(n).holder for n in ("intents/b1", "intents/b3", "intents/b5")]
    assert holders == [alice.address, bob.address, carol.address]


# ---------------------------------------------------------------------------------------------------------------
# Hostile intents: each refused, with its control
# ---------------------------------------------------------------------------------------------------------------


def test_a_replayed_acquisition_is_refused_and_the_control_a_second_lone_call_would_fence_off_the_first(
    chain, registry
):
    """The same signed acquisition sent twice (in one batch, then again in another) lands once: the replays are
    refused (IntentStale: signed against latest token 0, now 1 or more) and the agent's token stays current.
    Control: what the guard prevents: the same acquisition made twice by a lone call re-acquires (reason
    Reacquired) and fences off the first token, which an agent holding it would find stale."""
    alice = agent("alice")
    intent = acquire(chain, registry, alice, "intents/replay")
    receipt = perform(chain, registry, [intent, intent])
    found = refusals(receipt, registry)
    assert list(found) == [1] and isinstance(found[1], IntentStale)
    token = registry.last_lease("intents/replay").token
    assert (found[1].guard, found[1].current) == (0, token)
    again = perform(chain, registry, [intent])
    assert isinstance(refusals(again, registry)[0], IntentStale)
    registry.check_current("intents/replay", token)  # still current: raises if not

    caller = registry.connect(chain.accounts[1])
    first = caller.acquire("intents/replay-control", ttl=30)
    caller.acquire("intents/replay-control", ttl=30)
    with pytest.raises(StaleToken):  # a second landing fences off the first
        registry.check_current("intents/replay-control", first.token)


def test_a_replayed_renewal_is_refused_and_a_late_one_never_lands(chain, registry):
    """A renewal lands once: sent again it is refused (IntentStale: signed against the expiry it moved). A renewal
    held back by a relayer past its lease's expiry is refused by the renewal's own checks (LeaseExpired), and one
    past its deadline by its deadline. Control: the same renewal sent in time lands."""
    alice = agent("alice")
    perform(chain, registry, [acquire(chain, registry, alice, "intents/renew", ttl=20)])
    chain.advance_time(2)
    intent = renew(chain, registry, alice, "intents/renew", ttl=20)
    receipt = perform(chain, registry, [intent])
    assert refusals(receipt, registry) == {}  # control: in time, it lands
    replayed = perform(chain, registry, [intent])
    assert isinstance(refusals(replayed, registry)[0], IntentStale)

    late = renew(chain, registry, alice, "intents/renew", ttl=20)
    chain.advance_time(21)  # the relayer held it past the lease's expiry
    refused = refusals(perform(chain, registry, [late]), registry)[0]
    assert type(refused).__name__ == "LeaseExpired"
    assert registry.last_lease("intents/renew").status.name == "EXPIRED"


def test_an_intent_after_its_deadline_never_lands_and_at_its_deadline_it_does(chain, registry):
    alice, bob = agent("alice"), agent("bob")
    deadline = chain.now() + 5
    late = acquire(chain, registry, alice, "intents/late", deadline=deadline)
    on_time = acquire(chain, registry, bob, "intents/on-time", deadline=deadline)
    chain.set_next_block_time(deadline)
    assert refusals(perform(chain, registry, [on_time]), registry) == {}  # control: at its deadline, it lands
    chain.set_next_block_time(deadline + 1)
    refused = refusals(perform(chain, registry, [late]), registry)[0]
    assert isinstance(refused, RequestExpired) and refused.deadline == deadline
    assert registry.last_lease("intents/late") is None


def test_an_intent_signed_for_another_registry_or_chain_is_refused(chain, registry):
    """The same intent signed in another registry's domain, or in this registry's domain on another chain id, is
    not this registry's: InvalidSignature. Control: signed in this registry's own domain, it lands."""
    from chainfence import Registry

    alice = agent("alice")
    other = Registry.deploy(chain, max_ttl=3_600)
    domain = registry.eip712_domain()
    intent = Intent.acquire(alice.address, "intents/domain", 30, latest_token=0, deadline=far(chain))
    wrong_registry = intent.sign(alice, other.eip712_domain())
    wrong_chain = intent.sign(alice, dataclasses.replace(domain, chain_id=domain.chain_id + 1))
    wrong_version = intent.sign(alice, dataclasses.replace(domain, version="1"))
    receipt = perform(chain, registry, [wrong_registry, wrong_chain, wrong_version])
    found = refusals(receipt, registry)
    assert sorted(found) == [0, 1, 2] and all(isinstance(e, InvalidSignature) for e in found.values())
    assert found[0].holder == alice.address and found[0].digest == intent.digest(domain)
    assert registry.last_lease("intents/domain") is None
    assert refusals(perform(chain, registry, [intent.sign(alice, domain)]), registry) == {}  # control
    assert isinstance(domain, EIP712Domain)


def test_an_intent_for_another_signer_is_refused(chain, registry):
    """Mallory signs an intent naming Alice as its holder, and takes Alice's signed intent and names herself (or
    changes its name): each is InvalidSignature, and nothing is held by anyone. Control: Alice's own lands."""
    alice, mallory = agent("alice"), agent("mallory")
    domain = registry.eip712_domain()
    as_alice = Intent.acquire(alice.address, "intents/who", 30, latest_token=0, deadline=far(chain)).sign(
        mallory, domain
    )
    alices = acquire(chain, registry, alice, "intents/who")
    taken = dataclasses.replace(alices, holder=mallory.address)
    renamed = dataclasses.replace(alices, name="intents/whom")
    receipt = perform(chain, registry, [as_alice, taken, renamed])
    assert all(isinstance(e, InvalidSignature) for e in refusals(receipt, registry).values())
    assert len(refusals(receipt, registry)) == 3
    assert registry.last_lease("intents/who") is None and registry.last_lease("intents/whom") is None
    assert refusals(perform(chain, registry, [alices]), registry) == {}  # control
    assert registry.last_lease("intents/who").holder == alice.address


def test_a_malleable_copy_of_a_signature_is_refused(chain, registry):
    """(r, n - s, v ^ 1) recovers the same key: accepted, it would be a second signature of one intent. The
    registry requires low s (EIP-2): refused. Control: the original lands."""
    alice = agent("alice")
    intent = acquire(chain, registry, alice, "intents/malleable")
    n = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
    r, s, v = intent.signature[:32], int.from_bytes(intent.signature[32:64], "big"), intent.signature[64]
    copy = dataclasses.replace(intent, signature=r + (n - s).to_bytes(32, "big") + bytes([55 - v]))
    assert isinstance(refusals(perform(chain, registry, [copy]), registry)[0], InvalidSignature)
    assert refusals(perform(chain, registry, [intent]), registry) == {}


def test_a_spent_nonce_is_refused_and_a_refused_claim_spends_none(chain, registry):
    """A completion and a claim spend a nonce: sent again, ReplayedRequest. A claim refused by its lone call (no
    item free) spends nothing: it lands later with the same nonce, once an item is free."""
    alice, bob = agent("alice"), agent("bob")
    domain = registry.eip712_domain()
    first = Intent.claim(alice.address, "intents/n", ["only"], 60, deadline=far(chain), nonce=7).sign(alice, domain)
    receipt = perform(chain, registry, [first, first])
    found = refusals(receipt, registry)
    assert list(found) == [1] and isinstance(found[1], ReplayedRequest) and found[1].nonce == 7
    blocked = Intent.claim(bob.address, "intents/n", ["only"], 60, deadline=far(chain), nonce=7).sign(bob, domain)
    assert type(refusals(perform(chain, registry, [blocked]), registry)[0]).__name__ == "NothingToClaim"
    bits = chain.w3.eth.call({"to": registry.address, "data": registry._encode("usedNonceBits", [bob.address, 0])})
    assert int.from_bytes(bits, "big") == 0, "the refused claim spent no nonce"
    chain.advance_time(61)
    assert refusals(perform(chain, registry, [blocked]), registry) == {}, "the refused claim kept its nonce"


def test_a_released_intent_cannot_release_again(chain, registry):
    alice = agent("alice")
    perform(chain, registry, [acquire(chain, registry, alice, "intents/rel")])
    intent = release(chain, registry, alice, "intents/rel")
    assert refusals(perform(chain, registry, [intent]), registry) == {}
    assert isinstance(refusals(perform(chain, registry, [intent]), registry)[0], LeaseReleased)
    perform(chain, registry, [acquire(chain, registry, alice, "intents/rel")])
    refused = refusals(perform(chain, registry, [intent]), registry)[0]
    assert isinstance(refused, StaleToken), "a new lease of the same holder is not the old release's"


# ---------------------------------------------------------------------------------------------------------------
# Contract holders (ERC-1271)
# ---------------------------------------------------------------------------------------------------------------


def test_a_contract_holder_signs_through_its_owner_key(chain, registry):
    """An AgentWallet (ERC-1271: its owner's ECDSA signature) holds the lease its owner signed for; the same
    signature naming another wallet of the same owner is refused (the holder is in the signed digest)."""
    from eth_account import Account

    owner_key = Account.from_key(chain.key_of(chain.accounts[2]).key)
    wallet = AgentWallet(registry, chain.accounts[2])
    twin = AgentWallet(registry, chain.accounts[2])
    domain = registry.eip712_domain()
    intent = Intent.acquire(wallet.address, "intents/wallet", 30, latest_token=0, deadline=far(chain))
    signed = intent.sign(owner_key, domain)
    as_twin = dataclasses.replace(signed, holder=twin.address)
    receipt = perform(chain, registry, [as_twin, signed])
    found = refusals(receipt, registry)
    assert list(found) == [0] and isinstance(found[0], InvalidSignature)
    assert registry.last_lease("intents/wallet").holder == wallet.address


def test_an_erc1271_gas_bomb_costs_the_batch_its_stipend_and_refuses_only_itself(chain, registry):
    """A contract holder whose isValidSignature loops until its gas is gone: its intent is refused
    (InvalidSignature) after at most the 50,000-gas stipend, and the good intents around it land. A holder that
    answers yes with 64 KiB of return data behind the answer is believed (its policy) and costs the batch no
    copy of them. Control: the naive check, forwarding all the gas a transaction has to isValidSignature (an
    eth_call with the block's gas), burns all of it: one such intent would sink any batch."""
    alice, bob = agent("alice"), agent("bob")
    bomb = deploy_runtime(chain, GAS_BOMB)
    yes = deploy_runtime(chain, YES_WITH_A_TAIL)
    bombed = Intent.acquire(bomb, "intents/bomb", 30, latest_token=0, deadline=far(chain))
    bombed = dataclasses.replace(bombed, signature=b"\x01" * 65)
    permissive = Intent.acquire(yes, "intents/yes", 30, latest_token=0, deadline=far(chain))
    permissive = dataclasses.replace(permissive, signature=b"\x02" * 65)
    good = [acquire(chain, registry, alice, "intents/g1"), acquire(chain, registry, bob, "intents/g2")]
    alone = perform(chain, registry, [good[0]])["gasUsed"]
    receipt = perform(chain, registry, [good[1], bombed, permissive])
    found = refusals(receipt, registry)
    assert list(found) == [1] and isinstance(found[1], InvalidSignature)
    assert registry.last_lease("intents/g2").holder == bob.address
    assert registry.last_lease("intents/yes").holder == yes
    # The bomb cost its stipend and change; the tail cost nothing to copy.
    assert receipt["gasUsed"] - 2 * alone < 50_000 + 60_000, receipt["gasUsed"]

    probe = {"to": bomb, "data": bytes.fromhex("1626ba7e") + bytes(64), "gas": 5_000_000}
    with pytest.raises(Exception) as burnt:  # control: the naive check gives it everything
        chain.w3.eth.call(probe)
    assert "gas" in str(burnt.value).lower() or "revert" in str(burnt.value).lower() or burnt.value


def test_a_sender_cannot_starve_a_contract_holders_check_into_a_refusal(chain, registry):
    """With too little gas left for a contract holder's full stipend, the whole batch reverts (nothing done)
    rather than refusing that intent as unsigned: a relayer cannot make a good contract-held intent look forged.
    Control: with enough gas, the same batch lands it."""
    from eth_account import Account

    owner_key = Account.from_key(chain.key_of(chain.accounts[2]).key)
    wallet = AgentWallet(registry, chain.accounts[2])
    intent = Intent.acquire(wallet.address, "intents/starve", 30, latest_token=0, deadline=far(chain))
    signed = intent.sign(owner_key, registry.eip712_domain())
    with pytest.raises((TransactionFailed, UnknownRevert)):
        perform(chain, registry, [signed], gas=60_000)
    assert registry.last_lease("intents/starve") is None
    assert refusals(perform(chain, registry, [signed]), registry) == {}
    assert registry.last_lease("intents/starve").holder == wallet.address


def test_the_registry_itself_cannot_be_named_as_a_holder(chain, registry):
    """An intent naming the registry as its holder (the one address whose calls the registry reads a holder
    from) is refused: no key signs for it and it answers no isValidSignature."""
    intent = Intent.acquire(registry.address, "intents/self", 30, latest_token=0, deadline=far(chain))
    forged = dataclasses.replace(intent, signature=b"\x03" * 65)
    assert isinstance(refusals(perform(chain, registry, [forged]), registry)[0], InvalidSignature)
    assert registry.last_lease("intents/self") is None


def test_a_lone_call_is_untouched_by_the_holder_rule(chain, registry):
    """ERC-2771's rule reads an appended holder only when the registry calls itself: a lone call with 20 extra
    bytes of calldata naming another account still acts for its sender."""
    alice = registry.connect(chain.accounts[1])
    data = alice._encode("acquire", ["intents/appended", 30]) + bytes.fromhex(chain.accounts[2][2:])
    chain.transact(chain.accounts[1], registry.address, data)
    assert registry.last_lease("intents/appended").holder == chain.accounts[1]
