"""Lost replies, lost requests, stuck transactions: one intent never yields two leases.

Runs against the suite's anvil node through a proxy that loses messages on
cue (tests/support/rpc_proxy.py). Each scenario names the fault; the control
shows what a naive "it failed, send again" client does with the same fault.
"""

from __future__ import annotations

import pytest
from eth_account import Account

from chainfence import AcquireReason, Chain, Registry, Timeouts
from chainfence.errors import (
    InsufficientFunds,
    NodeUnreachable,
    OutcomeUnknown,
    TransactionTimeout,
    WrongChain,
)
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.virtual_time import SteppedClock

RESOURCE = "jobs/nightly"


@pytest.fixture
def proxy(anvil_node, on_anvil):
    with RpcProxy(anvil_node.url) as proxy:
        yield proxy


def agent_via(proxy, on_anvil, key_index=6, receipt=120.0):
    # request: a safety net; every fault here hangs up at once, none waits for a timeout.
    chain = Chain.connect(
        proxy.url, private_key=dev_keys(10)[key_index], timeouts=Timeouts(request=60, receipt=receipt, poll=0.01)
    )
    return Registry.at(chain, on_anvil.address)


def nonce_of(registry) -> int:
    return registry.chain.w3.eth.get_transaction_count(registry.sender)


def test_lost_reply_to_send_yields_exactly_one_lease(proxy, on_anvil):
    """The node got the acquisition but the reply was lost: the SDK finds it by hash and waits for it."""
    agent = agent_via(proxy, on_anvil)
    before_token, before_nonce = on_anvil.latest_token(), nonce_of(agent)
    proxy.plan("eth_sendRawTransaction", "drop_reply")
    lease = agent.acquire(RESOURCE, ttl=60)
    assert lease.token == before_token + 1 == on_anvil.latest_token()
    assert nonce_of(agent) == before_nonce + 1, "exactly one transaction was mined"
    sends = proxy.sent("eth_sendRawTransaction")
    assert len({tuple(p) for p, _ in sends}) == 1, "only identical bytes were ever sent"


def test_control_a_naive_retry_after_a_lost_reply_acquires_twice(proxy, on_anvil):
    """The control: re-signing with the next nonce after a lost reply lands BOTH transactions, and the
    first lease (a ghost its owner thinks failed) holds the resource until the second fences it."""
    agent = agent_via(proxy, on_anvil)
    w3 = agent.chain.w3
    key = Account.from_key(dev_keys(10)[6])
    data = agent._encode("acquire", [RESOURCE, 60])
    before = on_anvil.latest_token()
    nonce = w3.eth.get_transaction_count(key.address)
    fees = agent.chain._sender.fees()
    proxy.plan("eth_sendRawTransaction", "drop_reply")
    for attempt in range(2):
        tx = {
            "to": agent.address,
            "data": data,
            "gas": 200_000,
            "nonce": nonce + attempt,
            "chainId": agent.chain.chain_id,
            **fees,
        }
        try:
            w3.eth.send_raw_transaction(key.sign_transaction(tx).raw_transaction)
            break
        except Exception:
            continue  # "it failed": the naive client signs a new one
    w3.eth.wait_for_transaction_receipt(key.sign_transaction(dict(tx)).hash, timeout=60)
    assert on_anvil.latest_token() == before + 2, "two acquisitions for one intent"


def test_lost_request_is_resent_as_the_same_bytes(proxy, on_anvil):
    """The request never reached the node: the SDK resends the identical signed transaction."""
    agent = agent_via(proxy, on_anvil)
    before_nonce = nonce_of(agent)
    proxy.plan("eth_sendRawTransaction", "drop_request")
    lease = agent.acquire(RESOURCE, ttl=60)
    assert lease.reason is AcquireReason.UNHELD
    assert nonce_of(agent) == before_nonce + 1
    sends = proxy.sent("eth_sendRawTransaction")
    assert [fault for _, fault in sends] == ["drop_request", None]
    assert sends[0][0] == sends[1][0]


def test_a_node_that_goes_silent_after_taking_the_transaction_reports_outcome_unknown(proxy, on_anvil):
    """Reply lost, and every lookup lost too: the SDK cannot know, says so with the hash, and the
    caller reconciles later with lease_from_tx instead of acquiring blindly again."""
    agent = agent_via(proxy, on_anvil)
    proxy.plan("eth_sendRawTransaction", "drop_reply", *["drop_request"] * 10)
    proxy.plan("eth_getTransactionByHash", *["drop_request"] * 10)
    with pytest.raises(OutcomeUnknown) as unknown:
        agent.acquire(RESOURCE, ttl=60)
    assert unknown.value.tx_hash and unknown.value.nonce is not None
    lease = on_anvil.lease_from_tx(unknown.value.tx_hash)
    assert lease is not None and lease.holder == agent.sender and lease.resource == RESOURCE
    assert on_anvil.lease_of(RESOURCE).token == lease.token


def test_a_node_that_never_answers_means_nothing_was_sent(proxy, on_anvil):
    agent = agent_via(proxy, on_anvil)
    before = on_anvil.latest_token()
    proxy.plan("eth_sendRawTransaction", *["drop_request"] * 10)
    proxy.plan("eth_getTransactionByHash", *["drop_request"] * 10)
    with pytest.raises((NodeUnreachable, OutcomeUnknown)):
        agent.acquire(RESOURCE, ttl=60)
    assert on_anvil.latest_token() == before


@pytest.fixture
def automine_off(anvil_chain):
    anvil_chain._rpc("evm_setAutomine", [False])
    try:
        yield
    finally:
        anvil_chain._rpc("evm_setAutomine", [True])
        anvil_chain._rpc("evm_mine", [])


def test_a_stuck_acquisition_is_cancelled_and_nothing_happens(proxy, on_anvil, automine_off):
    """Not mined within the timeout: the SDK replaces it by a no-op with the same nonce; once that is
    mined the acquisition can never execute, and the caller is told so.

    The SDK counts its waits in polls (tests/support/virtual_time.py) and the block is mined at its
    first pause after the node answered the cancellation: inside its wait, however slow the machine."""
    agent = agent_via(proxy, on_anvil, key_index=7, receipt=0.5)
    before = on_anvil.latest_token()
    sends_before = proxy.completed_count("eth_sendRawTransaction")
    mined = []

    def mine_once_the_cancellation_is_out():
        # The node has answered both (original, then cancellation): the pool holds the cancellation.
        if proxy.completed_count("eth_sendRawTransaction") == sends_before + 2 and not mined:
            on_anvil.chain._rpc("evm_mine", [])
            mined.append(True)

    SteppedClock(on_sleep=mine_once_the_cancellation_is_out).install(agent.chain)
    with pytest.raises(TransactionTimeout) as timeout:
        agent.acquire(RESOURCE, ttl=60)
    assert mined
    assert len(timeout.value.tx_hashes) == 2
    assert on_anvil.latest_token() == before
    assert on_anvil.lease_from_tx(timeout.value.tx_hash) is None


def test_a_stuck_acquisition_that_lands_after_all_is_returned(proxy, on_anvil, automine_off):
    """The cancellation is lost on its way and the original is mined late: the caller gets its lease.

    Sequenced at the SDK's pauses between polls (tests/support/virtual_time.py): once the node has the
    original, the next send (the cancellation) is planned to be lost; once it was, a block is mined."""
    agent = agent_via(proxy, on_anvil, key_index=8, receipt=0.5)
    sends_before = len(proxy.sent("eth_sendRawTransaction"))
    planned, mined = [], []

    def lose_the_cancellation_then_mine():
        sends = len(proxy.sent("eth_sendRawTransaction")) - sends_before
        if sends == 1 and not planned:  # the node has the original
            proxy.plan("eth_sendRawTransaction", "drop_request")  # whatever comes next: the cancellation
            planned.append(True)
        elif sends == 2 and not mined:  # the cancellation was lost on its way
            on_anvil.chain._rpc("evm_mine", [])
            mined.append(True)

    SteppedClock(on_sleep=lose_the_cancellation_then_mine).install(agent.chain)
    lease = agent.acquire(RESOURCE, ttl=60)
    assert mined
    assert lease.token == on_anvil.latest_token()
    faults = [fault for _, fault in proxy.sent("eth_sendRawTransaction")[sends_before:]]
    assert faults == [None, "drop_request"], "the original went through, the cancellation was lost"


def test_neither_the_stuck_transaction_nor_its_cancellation_mined_is_outcome_unknown(
    on_anvil, anvil_node, automine_off
):
    agent = Registry.at(
        Chain.connect(anvil_node.url, private_key=dev_keys(10)[7], timeouts=Timeouts(receipt=0.3, poll=0.01)),
        on_anvil.address,
    )
    with pytest.raises(OutcomeUnknown) as unknown:
        agent.acquire(RESOURCE, ttl=60)
    assert len(unknown.value.tx_hashes) == 2
    on_anvil.chain._rpc("evm_mine", [])  # now one of them lands; reconciliation tells which
    outcomes = [on_anvil.lease_from_tx(h) for h in unknown.value.tx_hashes]
    assert outcomes.count(None) >= 1
    assert on_anvil.chain.w3.eth.get_transaction_count(agent.sender) >= unknown.value.nonce + 1


def test_a_sender_without_funds_gets_a_typed_error_and_sends_nothing(anvil_node, on_anvil):
    broke = Account.create()
    chain = Chain.connect(anvil_node.url, private_key=broke.key, timeouts=Timeouts(poll=0.01))
    before = on_anvil.latest_token()
    with pytest.raises(InsufficientFunds) as refused:
        Registry.at(chain, on_anvil.address).acquire(RESOURCE, ttl=60)
    assert refused.value.account == broke.address
    assert on_anvil.latest_token() == before


def test_a_node_of_another_chain_is_refused(anvil_node):
    with pytest.raises(WrongChain, match="31337"):
        Chain.connect(anvil_node.url, chain_id=1)
