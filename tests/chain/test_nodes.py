"""What each node implementation offers, and what the SDK makes of it (issue 29, docs/nodes.md).

- Dev controls through what the node has: ``advance_time`` moves ``now()`` by exactly its seconds on
  anvil and hardhat (hardhat never mines two blocks in the same second, so the block goes one second
  before the target); ganache has no ``evm_setNextBlockTimestamp``, so its clock moves by an offset
  (``evm_increaseTime``) and ``set_next_block_time`` is ``NotSupported`` (typed, nothing moved).
- A node whose EVM lacks MCOPY (ganache 7: Shanghai) is refused at deploy (``NotSupported`` naming the fork),
  before anything is sent; the control deploys past the check and shows a claim dying on it.
- hardhat answers the send of a transaction that reverts with the revert, although it mined it: the
  SDK finds it in its block and reports it as every node's status-0 transaction.
"""

from __future__ import annotations

import pytest
from eth_account import Account

from chainfence import Registry
from chainfence.errors import LeaseHeld, NotSupported, RpcError, UnknownRevert
from tests.support.anvil import dev_keys
from tests.support.nodes import deploy_past_the_fork_check

pytestmark = pytest.mark.nodes("hardhat", "ganache")


def on(*nodes: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("node_chain", nodes, indirect=True)


@on("anvil", "hardhat")
def test_advance_time_moves_now_by_exactly_its_seconds(node_chain):
    before = node_chain.now()
    assert node_chain.advance_time(17) == before + 17 == node_chain.now()
    assert node_chain.latest_time() <= before + 17


@on("hardhat")
def test_control_a_block_mined_at_the_target_on_hardhat_puts_now_one_second_past_it(node_chain):
    """The rule anvil's clock allows (mine at the target) is one second off on hardhat's node: its next
    block is always after its latest, so now() lands at target + 1."""
    target = node_chain.now() + 17
    node_chain.rpc.request("evm_setNextBlockTimestamp", [target])
    node_chain.rpc.request("evm_mine", [])
    assert node_chain.now() == target + 1


@on("ganache")
def test_advance_time_on_ganache_moves_its_clock_by_an_offset(node_chain):
    before, latest = node_chain.now(), node_chain.latest_time()
    after = node_chain.advance_time(100)
    assert after == node_chain.now() >= before + 100
    assert node_chain.latest_time() >= latest + 100, "a block was mined at the new time"


@on("ganache")
def test_set_next_block_time_on_ganache_is_not_supported_and_moves_nothing(node_chain):
    head, now = node_chain.block_number(), node_chain.now()
    with pytest.raises(NotSupported) as refused:
        node_chain.set_next_block_time(now + 50)
    assert "evm_setNextBlockTimestamp" in str(refused.value) and "ganache" in str(refused.value)
    assert (node_chain.block_number(), node_chain.now()) == (head, now)


@on("ganache")
def test_control_ganache_answers_evm_set_next_block_timestamp_as_an_unknown_method(node_chain):
    """The control: asked directly (not through a dev control), the node's answer is a JSON-RPC error, which
    reached the caller of ``advance_time`` as an untyped ``RpcError`` before."""
    with pytest.raises(RpcError) as refused:
        node_chain.rpc.request("evm_setNextBlockTimestamp", [node_chain.now() + 50])
    assert "does not exist" in refused.value.rpc_message


@on("ganache")
def test_deploy_on_a_node_without_mcopy_is_refused_naming_the_fork_and_sends_nothing(node_chain):
    deployer = node_chain.accounts[0]
    head, nonce = node_chain.block_number(), node_chain.rpc.request("eth_getTransactionCount", [deployer, "latest"])
    with pytest.raises(NotSupported) as refused:
        Registry.deploy(node_chain, max_ttl=3_600)
    assert (refused.value.fork, refused.value.instruction) == ("cancun", "MCOPY")
    assert "cancun" in str(refused.value) and "nothing was deployed" in str(refused.value)
    assert node_chain.block_number() == head
    assert node_chain.rpc.request("eth_getTransactionCount", [deployer, "latest"]) == nonce


@on("ganache")
def test_control_past_the_fork_check_a_claim_dies_on_ganache(node_chain, backend_registry_on_node):
    """The control: the registry deployed past the check (as another tool would) takes leases there, but a
    claim's first lease of an item names it with MCOPY and dies on "invalid opcode", untyped."""
    registry = backend_registry_on_node
    alice = registry.connect(node_chain.accounts[1])
    alice.acquire("plain/lease", ttl=60)  # no MCOPY on this path
    with pytest.raises(UnknownRevert):
        alice.workset("work/set").claim(["a", "b"], ttl=60)


@on("anvil", "hardhat")
def test_deploy_on_a_cancun_node_passes_the_fork_check(node_chain):
    registry = Registry.deploy(node_chain, max_ttl=60)
    assert registry.connect(node_chain.accounts[1]).acquire("fresh", ttl=60).token == 1


@on("hardhat")
def test_control_hardhat_answers_the_send_of_a_reverting_transaction_with_the_revert(
    node_chain, backend_registry_on_node
):
    """What the sender handles (tests/chain/test_failed_transactions.py runs on hardhat): hardhat mines a
    transaction that reverts and answers its eth_sendRawTransaction with the revert, not its hash. The
    SDK before raised that revert from the send, as if nothing had been mined."""
    registry = backend_registry_on_node
    registry.connect(node_chain.accounts[1]).acquire("r", ttl=60)
    bob = Account.from_key(dev_keys(3)[2])
    tx = {
        "type": 2,
        "chainId": node_chain.chain_id,
        "nonce": int(node_chain.rpc.request("eth_getTransactionCount", [bob.address, "latest"]), 16),
        "to": registry.address,
        "data": registry._encode("acquire", ["r", 60]),
        "gas": 200_000,
        "maxFeePerGas": 10**11,
        "maxPriorityFeePerGas": 1,
    }
    head = node_chain.block_number()
    with pytest.raises(LeaseHeld):
        node_chain.rpc.request("eth_sendRawTransaction", [bob.sign_transaction(tx).raw_transaction.to_0x_hex()])
    assert node_chain.block_number() == head + 1, "hardhat mined it all the same"
    node_chain._sender.forget_nonces()  # bob's nonce moved behind the chain's back


@pytest.fixture
def backend_registry_on_node(node_chain):
    """A registry on the test's node, deployed the way the suite's session registry is there."""
    if node_chain._dev == "ganache":
        return deploy_past_the_fork_check(node_chain, max_ttl=3_600)
    return Registry.deploy(node_chain, max_ttl=3_600)
