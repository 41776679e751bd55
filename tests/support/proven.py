"""The proven mode's attack story, shared by every test that attacks a surface of it.

On the session's anvil: alice acquires ``reports/daily`` (token A, 30 s), her
lease runs out, bob takes it over (token B). Alice's token A is stale: a
service must refuse her write. Three loopback providers
(:class:`~tests.support.lying_proxy.LyingProxy`) stand in front of anvil,
honest until a test makes them lie (:func:`forge_alice_live`, :func:`serve_the_past`,
``down``).

Clock: the verifier's clock is the session anvil's chain time read directly
(``chain.now`` through the honest connection): the suite's anvil runs a
logical clock (tests/support/anvil.py), so the wall clock would say nothing.

The fixtures (``story``, ``providers``) are registered for the whole suite by tests/conftest.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence._node.rlp import keccak256
from chainfence.errors import StaleToken
from chainfence.proofs import ProvenReader, QuorumHeaders
from tests.support.anvil import Anvil, dev_keys
from tests.support.forgery import ForgedWorld
from tests.support.lying_proxy import LyingProxy

RESOURCE = "reports/daily"
RESOURCE_ID = keccak256(RESOURCE.encode())


@dataclass
class Story:
    registry: Registry  # the honest view (direct connection to anvil)
    alice: str
    bob: str
    stale: int  # alice's token A
    current: int  # bob's token B
    stale_block: int  # the block where A was live
    stale_expiry: int


@pytest.fixture
def story(on_anvil) -> Story:
    chain = on_anvil.chain
    alice, bob = chain.accounts[1], chain.accounts[2]
    lease_a = on_anvil.connect(alice).acquire(RESOURCE, ttl=30)
    stale_block = chain.block_number()
    chain.advance_time(31)
    lease_b = on_anvil.connect(bob).acquire(RESOURCE, ttl=600)
    with pytest.raises(StaleToken):  # the truth: A is stale
        on_anvil.check_current(RESOURCE, lease_a.token)
    return Story(on_anvil, alice, bob, lease_a.token, lease_b.token, stale_block, lease_a.expires_at)


@pytest.fixture
def providers(anvil_node):
    """Three providers in front of the session's anvil, honest until told otherwise."""
    with LyingProxy(anvil_node.url) as p1, LyingProxy(anvil_node.url) as p2, LyingProxy(anvil_node.url) as p3:
        yield p1, p2, p3


def strict_through(provider_url: str, story: Story) -> Registry:
    """Strict mode through one provider: what a service checks with today."""
    return Registry.at(Chain.connect(provider_url, timeouts=Timeouts(poll=0.01)), story.registry.address)


def quorum(*urls, story: Story, **options) -> QuorumHeaders:
    options.setdefault("max_age", 60)
    return QuorumHeaders(list(urls), clock=story.registry.chain.now, **options)


def proven(story: Story, headers, provider_url: str) -> ProvenReader:
    return ProvenReader(story.registry.address, headers=headers, provider=provider_url)


def forge_alice_live(story: Story, liar: LyingProxy, *, headers: bool = False, proofs: str = "state") -> ForgedWorld:
    """The liar's world: A is alice's, live for another hour."""
    world = ForgedWorld(
        story.registry.address,
        RESOURCE_ID,
        holder=story.alice,
        token=story.stale,
        expires_at=story.registry.chain.now() + 3_600,
    )
    world.install(liar, headers=headers, proofs=proofs)
    return world


def serve_the_past(liar: LyingProxy, block: int) -> None:
    """A lagging (or head-withholding) provider: every 'latest' and 'pending' is ``block``."""
    old = hex(block)

    def at_old(position):
        def handler(params, forward):
            params = list(params)
            if len(params) > position and params[position] in ("latest", "pending", "safe", "finalized"):
                params[position] = old
            return forward(params)

        return handler

    liar.on("eth_call", at_old(1))
    liar.on("eth_getStorageAt", at_old(2))
    liar.on("eth_getProof", at_old(2))
    liar.on("eth_getBlockByNumber", at_old(0))
    liar.on("eth_blockNumber", lambda params, forward: old)


@contextlib.contextmanager
def fork_where_alice_renewed(story: Story, anvil_node) -> Iterator[tuple[Anvil, Registry]]:
    """A second node forked from the chain before bob's takeover: on its branch alice renewed (her
    token A live for an hour), and it grew to the honest chain's height. A real chain: every header
    hashes right; only the hash k independent providers vouch for tells it apart."""
    fork_args = ("--fork-url", anvil_node.url, "--fork-block-number", str(story.stale_block))
    with Anvil(extra_args=fork_args) as fork:
        on_fork = Registry.at(
            Chain.connect(fork.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.01)), story.registry.address
        )
        # The branch's clock stands where the chain stood then (alice's lease still live there).
        on_fork.chain._rpc("evm_setNextBlockTimestamp", [story.stale_expiry - 20])
        on_fork.connect(story.alice).renew(RESOURCE, story.stale, ttl=3_600)
        head = story.registry.chain.block_number()
        while on_fork.chain.block_number() < head:
            on_fork.chain.mine(1)
        yield fork, on_fork
