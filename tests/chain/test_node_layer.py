"""The node layer over a real chain, on both backends: the asyncio layer is the sync one's twin.

Each method of :mod:`chainfence._node.methods` runs on :class:`~chainfence._node.rpc.Rpc`
and on :class:`~chainfence._node.rpc.AsyncRpc` (over the asyncio twin of the
chain's transport: web3's ``AsyncHTTPProvider`` to anvil, the same in-process
eth-tester). Here both answer alike, the asyncio one has the dev controls
too, the node layer names no resource while the chain does, and a ``Web3``
the caller built is a transport like any other.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chainfence import Registry
from chainfence._node.rpc import AsyncRpc, Rpc
from chainfence.errors import LeaseHeld

# On hardhat's node and ganache too (tests/conftest.py, docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


def test_both_layers_answer_alike_over_the_same_chain(registry: Registry):
    """The sync layer and its asyncio twin, over either backend, give equal results for each read."""
    chain = registry.chain
    lease = registry.connect(chain.accounts[1]).acquire("twins/one", ttl=60)
    query = {"address": registry.address, "fromBlock": 0, "toBlock": lease.block_number}
    reads = [
        ("block", (lease.block_number,)),
        ("blocks", ([lease.block_number - 1, lease.block_number],)),
        ("receipt", (lease.tx_hash,)),
        ("transaction", (lease.tx_hash,)),
        ("logs", (query,)),
        ("code", (registry.address,)),
        ("nonce", (chain.accounts[1], "latest")),
        ("chain_id", ()),
        ("call", ({"to": registry.address, "data": registry._encode("latestToken", [])}, lease.block_number)),
    ]

    async def twin() -> list[Any]:
        rpc = AsyncRpc.twin_of(chain.rpc, timeout=30)
        try:
            return [await getattr(rpc, method)(*args) for method, args in reads]
        finally:
            await rpc.close()

    assert asyncio.run(twin()) == [getattr(chain.rpc, method)(*args) for method, args in reads]


def test_the_asyncio_layer_has_the_dev_controls(registry: Registry):
    """``AsyncRpc`` runs the embedded chain's dev controls and a node's dev requests, as ``Rpc`` does."""
    chain = registry.chain
    before = chain.block_number()

    async def mine_two() -> None:
        rpc = AsyncRpc.twin_of(chain.rpc, timeout=30)
        try:
            if rpc.embedded:
                await rpc.tester("mine_blocks", 2)
            else:
                await rpc.request("evm_mine", [])
                await rpc.request("evm_mine", [])
        finally:
            await rpc.close()

    asyncio.run(mine_two())
    assert chain.block_number() == before + 2


def test_the_node_layer_names_no_resource_the_chain_does(alice: Registry, bob: Registry):
    """A refused acquisition: the revert carries only the name's hash; the node layer leaves it so,
    and the chain (which the caller told the name) adds it on the way up."""
    name = "named/by-chain"
    alice.acquire(name, ttl=600)
    chain = bob.chain
    call = {"from": bob.sender, "to": bob.address, "data": bob._encode("acquire", [name, 60])}
    with pytest.raises(LeaseHeld) as bare:
        chain.rpc.call(call, "pending")
    assert bare.value.resource is None and bare.value.resource_id is not None
    with pytest.raises(LeaseHeld) as named:
        chain.call(bob.address, call["data"], block="pending", resource=name)
    assert named.value.resource == name
    with pytest.raises(LeaseHeld) as sent:
        chain.transact(bob.sender, bob.address, call["data"], resource=name)
    assert sent.value.resource == name and name in str(sent.value)


def test_a_plain_web3_provider_is_a_transport_too(anvil_node):
    """A ``Web3`` the caller built: its provider carries the layer's requests (raw, no web3 formatters)."""
    from web3 import Web3

    rpc = Rpc(Web3(Web3.HTTPProvider(anvil_node.url)))
    assert type(rpc.transport).__name__ == "ProviderTransport"
    head = rpc.block_number()
    assert rpc.block(head)["number"] == head and rpc.blocks([head - 1, head])[1]["number"] == head
