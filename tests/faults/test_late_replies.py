"""A late reply never makes one acquire land two acquisitions.

The proxy forwards ``eth_sendRawTransaction`` at once (the node takes the
transaction) and answers only after the client gave up waiting: the reply is
late by construction, whatever the machine's speed. Only that request has a
short timeout (``time_out_only``); every other one has a 60 s safety net, so
an ordinary request a loaded machine answers slowly is never taken for a lost
one. Run on automine (anvil's default: the transaction is mined before the
reply) and on interval mining (``anvil --block-time 1``: it waits in the
pool).

The control is the client the SDK used to be: web3's ``HTTPProvider`` with
its default retries resends the same bytes by itself after the timeout, the
node answers the copy with "nonce too low" (or "already known"), and a client
that reads that as "another process took my nonce" signs again — two
acquisitions for one intent.
"""

from __future__ import annotations

import pytest
from eth_account import Account
from web3 import Web3

from chainfence import Chain, Registry, Timeouts
from tests.support.anvil import Anvil, dev_keys
from tests.support.rpc_proxy import RpcProxy, time_out_only

RESOURCE = "jobs/late"


@pytest.fixture(scope="module")
def interval_node():
    """An anvil that mines a block every second, whatever arrives (a chain with real block times)."""
    with Anvil(extra_args=("--block-time", "1")) as node:
        yield node


@pytest.fixture(params=["automine", "interval"])
def node_and_registry(request, anvil_node, anvil_session):
    if request.param == "automine":
        chain, registry = anvil_session
        snapshot = chain.snapshot()
        yield anvil_node, registry
        chain.revert(snapshot)
        return
    node = request.getfixturevalue("interval_node")
    chain = Chain.connect(node.url, private_keys=dev_keys(10), timeouts=Timeouts(poll=0.05))
    yield node, Registry.deploy(chain, max_ttl=3_600)


def test_a_late_reply_to_an_acquisition_lands_exactly_one(node_and_registry):
    node, registry = node_and_registry
    with RpcProxy(node.url) as proxy:
        agent_chain = Chain.connect(proxy.url, private_key=dev_keys(10)[5], timeouts=Timeouts(request=60, poll=0.05))
        time_out_only(agent_chain.w3, "eth_sendRawTransaction", 1.0)  # the late one: the client gives up
        agent = Registry.at(agent_chain, registry.address)
        nonce_before = registry.chain.rpc.nonce(agent.sender, "latest")
        before = registry.latest_token()
        proxy.plan("eth_sendRawTransaction", "late_reply")
        lease = agent.acquire(RESOURCE, ttl=3_600)  # live until lease_of below, however slow (wall-clock node)
        sends = proxy.sent("eth_sendRawTransaction")
    assert sends[0][1] == "late_reply", "the reply to the send really was late"
    assert registry.latest_token() == before + 1 == lease.token, "exactly one acquisition"
    assert registry.chain.rpc.nonce(agent.sender, "latest") == nonce_before + 1, "exactly one transaction mined"
    assert len({tuple(params) for params, _ in sends}) == 1, "only identical bytes were ever sent"
    assert registry.lease_of(RESOURCE).holder == agent.sender


def test_control_a_provider_that_resends_and_a_client_that_trusts_the_words_acquire_twice(node_and_registry):
    node, registry = node_and_registry
    key = Account.from_key(dev_keys(10)[6])
    with RpcProxy(node.url) as proxy:
        # web3's default HTTPProvider: resends on a timeout, even eth_sendRawTransaction.
        w3 = Web3(Web3.HTTPProvider(proxy.url, request_kwargs={"timeout": 60}))
        time_out_only(w3, "eth_sendRawTransaction", 1.0)  # the late one: the provider gives up, then resends
        data = registry._encode("acquire", [RESOURCE, 60])
        before = registry.latest_token()
        nonce = w3.eth.get_transaction_count(key.address, "pending")
        base = {
            "to": registry.address,
            "data": data,
            "gas": 300_000,
            "chainId": w3.eth.chain_id,
            "maxFeePerGas": 10 * 10**9,
            "maxPriorityFeePerGas": 10**9,
        }
        proxy.plan("eth_sendRawTransaction", "late_reply")
        hashes = []
        for attempt in range(2):
            signed = key.sign_transaction(dict(base, nonce=nonce + attempt))
            hashes.append(signed.hash)
            try:
                w3.eth.send_raw_transaction(signed.raw_transaction)
                break
            except Exception as refused:
                assert any(word in str(refused).lower() for word in ("nonce", "known", "imported")), refused
                continue  # "someone else used my nonce": sign again with the next one
        for tx_hash in hashes:
            w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
        copies = [params for params, _ in proxy.sent("eth_sendRawTransaction")]
    assert len(copies) >= 3 and copies[0] == copies[1], "the provider resent the first bytes by itself"
    assert registry.latest_token() == before + 2, "two acquisitions for one intent"
