"""An agent with a key and no gas, its lease operations sent by `chainfence relay` (issue 28, item 2), both
backends: the lease is the agent's, every operation's outcome is the chain's (typed errors as for a lone call),
sync and asyncio alike, keep-alive included. Attacks on the relayer: tests/faults/test_relay_attacks.py."""

from __future__ import annotations

import asyncio

import pytest

from chainfence import LeaseSet, Registry
from chainfence.aio import AsyncChain, AsyncRegistry
from chainfence.audit import history as audit_history
from chainfence.errors import InsufficientFunds, LeaseHeld
from tests.support.relayers import agent_chain, agent_key, relay_running
from tests.support.sequencer import wait_until


@pytest.fixture
def relayed(chain, registry):
    """(the relay, its URL) of the test's registry, paid by the chain's first account."""
    with relay_running(registry, chain.accounts[0]) as running:
        yield running


def test_an_agent_without_gas_acquires_renews_completes_and_releases_through_a_relayer(chain, registry, relayed):
    relay, url = relayed
    key = agent_key("alice")
    agent = Registry.at(agent_chain(chain, key, url), registry.address).connect(key.address)
    assert chain.w3.eth.get_balance(key.address) == 0
    paid_before = chain.w3.eth.get_balance(relay.sender)

    lease = agent.acquire("relayed/one", ttl=30)
    assert (lease.holder, lease.resource) == (key.address, "relayed/one")
    assert registry.lease_of("relayed/one").holder == key.address
    first = lease.expires_at
    chain.advance_time(2)
    renewed = lease.renew(ttl=60, progress=b"step 1")
    assert registry.lease_of("relayed/one").expires_at == renewed.expires_at > first
    lease.complete(b"result")
    lease.release()
    assert registry.last_lease("relayed/one").status.name == "RELEASED"

    assert chain.w3.eth.get_balance(key.address) == 0, "the agent paid nothing"
    assert chain.w3.eth.get_balance(relay.sender) < paid_before, "the relayer paid"
    history = [(event.kind.value, event.holder) for event in audit_history(registry, "relayed/one")]
    assert history and all(holder == key.address for _, holder in history), history


def test_a_refusal_through_a_relayer_is_the_lone_calls_typed_error(chain, registry, relayed):
    """A resource another agent holds: LeaseHeld, naming that agent, as a lone acquire raises it (refused before
    signing where the node runs a call from an account with no funds; else by the registry, read from its log)."""
    _relay, url = relayed
    alice, bob = agent_key("alice"), agent_key("bob")
    Registry.at(agent_chain(chain, alice, url), registry.address).connect(alice.address).acquire("relayed/held", 60)
    rival = Registry.at(agent_chain(chain, bob, url), registry.address).connect(bob.address)
    with pytest.raises(LeaseHeld) as held:
        rival.acquire("relayed/held", ttl=30)
    assert held.value.holder == alice.address and held.value.resource == "relayed/held"


def test_a_claim_through_a_relayer_is_the_agents(chain, registry, relayed):
    _relay, url = relayed
    key = agent_key("carol")
    agent = Registry.at(agent_chain(chain, key, url), registry.address).connect(key.address)
    claim = agent.workset("relayed/jobs").claim(["a", "b"], ttl=30)
    assert (claim.item, claim.holder) == ("a", key.address)
    claim.complete(b"done")
    again = agent.workset("relayed/jobs").claim(["a", "b"], ttl=30)
    assert again.item == "b", "the completed item is done for good"


def test_asyncio_through_a_relayer(chain, registry, relayed):
    _relay, url = relayed
    key = agent_key("dave")

    async def main() -> None:
        achain = AsyncChain.over(agent_chain(chain, key, url))
        try:
            agent = (await AsyncRegistry.at(achain, registry.address)).connect(key.address)
            lease = await agent.acquire("relayed/async", ttl=30)
            assert lease.holder == key.address
            first = lease.expires_at
            renewed = await lease.renew(ttl=40)
            assert renewed.expires_at > first
            await lease.release()
        finally:
            await achain.aclose()

    asyncio.run(main())
    assert registry.last_lease("relayed/async").status.name == "RELEASED"


def test_a_kept_lease_is_renewed_through_the_relayer(chain, registry, relayed):
    """keep() renews through the relayer: the renewals land (the agent's), and the lease stays live past its
    first ttl while kept."""
    _relay, url = relayed
    key = agent_key("erin")
    agent = Registry.at(agent_chain(chain, key, url), registry.address).connect(key.address)
    lease = agent.acquire("relayed/kept", ttl=6)
    first = lease.expires_at
    chain.advance_time(2)  # chain time moves on, as on any chain that mines (the session's anvil is told to)
    with lease.keep(interval=0.5):
        wait_until(
            lambda: _expiry(registry, "relayed/kept") not in (None, first), "a renewal through the relayer landed"
        )
        lease.check()
    renewed = [e for e in audit_history(registry, "relayed/kept") if e.kind.value == "renewed"]
    assert renewed and renewed[0].holder == key.address


def test_what_is_no_lease_operation_still_needs_the_agents_gas(chain, registry, relayed):
    """A set (acquireMany) is no intent: sent as a transaction, the agent's own, which it cannot pay for."""
    _relay, url = relayed
    key = agent_key("frank")
    agent = Registry.at(agent_chain(chain, key, url), registry.address).connect(key.address)
    with pytest.raises(InsufficientFunds):
        LeaseSet.acquire(agent, ["relayed/s1", "relayed/s2"], ttl=30)


def _expiry(registry, name: str) -> int | None:
    lease = registry.lease_of(name)
    return None if lease is None else lease.expires_at


def test_an_election_through_a_relayer(chain, registry, relayed):
    """An agent without gas campaigns, leads (its term kept alive through the relayer) and resigns."""
    from chainfence.recipes.election import Election

    _relay, url = relayed
    key = agent_key("grace")
    agent = Registry.at(agent_chain(chain, key, url), registry.address).connect(key.address)
    election = Election(agent, "relayed/leader", ttl=30)
    with election.campaign(wait=0) as leadership:
        leader = election.leader()
        assert leader is not None and leader.holder == key.address == leadership.holder
        leadership.check()
    assert election.leader() is None, "resigned: the term was released through the relayer"
