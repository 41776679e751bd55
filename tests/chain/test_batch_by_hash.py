"""A batch transaction read back by its hash: each caller learns its own operation's outcome, never another's.

Group commit puts several callers' operations in one ``batchCalls`` transaction. When the reply is lost
(``OutcomeUnknown``) or the process restarts, a caller holds only the hash: ``registry.batch_item(hash,
item=i)``, ``registry.lease_from_tx(hash, item=i | resource=name)``, ``reconcile(..., item=i)`` and
``chainfence tx HASH --item i`` read that operation's own outcome from the transaction and its receipt: an
acquisition's lease (its own token, holder, reason, event), a renewal's expiry, or the typed refusal of
that operation alone. The control: reading the receipt's first ``LeaseAcquired`` as "the lease" (what
``lease_from_tx`` does for a lone acquisition) hands every caller the first item's lease.

Both backends. Which calls share a transaction is fixed by the send gate (tests/support/gates.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from chainfence import Lease, Registry
from chainfence._node.sending import Sender
from chainfence._sdk.lease_state import AcquireReason
from chainfence._sdk.names import resource_id
from chainfence.aio import AsyncChain, AsyncLease, AsyncRegistry
from chainfence.batching import AsyncBatchItem, BatchItem
from chainfence.errors import InvalidInput, LeaseHeld, OutcomeUnknown, StaleToken
from chainfence.outcomes import reconcile
from tests.chain.test_batching import gathered
from tests.support.gates import SendGate
from tests.support.sequencer import wait_until

# On hardhat's node too; not on ganache, whose EVM lacks the MCOPY these paths use (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")


def lose_every_receipt(monkeypatch) -> None:
    """The node takes (and mines) each transaction, then its replies are lost: the sender can establish
    nothing, as when the node stops answering after the send (``OutcomeUnknown``, every candidate hash)."""

    def lost(self, hashes, timeout, *, sender, nonce, **watching):
        raise OutcomeUnknown(
            f"the node stopped answering while transaction {hashes[0]} was in flight",
            tx_hashes=hashes,
            nonce=nonce,
            sender=sender,
        )
        yield  # pragma: no cover - makes this steps

    monkeypatch.setattr(Sender, "_await_receipt", lost)


@pytest.fixture
def mixed(chain, registry, alice, bob, monkeypatch) -> dict[str, Any]:
    """One batch of alice's, behind a pilot's: two free acquisitions, one of a name bob holds (refused), a
    renewal of a live lease, a release with a stale token (refused). Returns each caller's result."""
    bob.acquire("h/held", ttl=600)
    kept = alice.acquire("h/kept", ttl=60)
    stale = alice.acquire("h/stale", ttl=60)
    alice.acquire("h/stale", ttl=60)  # re-acquired: the first token is stale
    batcher = alice.batched()
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    results = gathered(
        batcher,
        {
            "pilot": lambda: batcher.acquire("h/pilot", ttl=60),
            "free-1": lambda: batcher.acquire("h/free-1", ttl=60),
            "held": lambda: batcher.acquire("h/held", ttl=60),
            "renew": lambda: batcher.renew("h/kept", kept.token, 120),
            "stale": lambda: batcher.release("h/stale", stale.token),
            "free-2": lambda: batcher.acquire("h/free-2", ttl=90),
        },
        gate,
    )
    monkeypatch.undo()
    results["tx"] = results["free-1"].tx_hash
    return results


def test_each_item_of_a_batch_read_by_hash_is_its_own_outcome(chain, registry, alice, bob, mixed):
    tx = mixed["tx"]
    items = registry.batch_items(tx, resource="h/kept")
    assert all(isinstance(item, BatchItem) for item in items) and [item.item for item in items] == list(range(5))
    assert sorted(item.kind for item in items) == ["acquire", "acquire", "acquire", "release", "renew"]
    # The calls were queued in the order the threads ran: match each by its resource, then check it all.
    by_resource = {item.resource: item for item in items}
    assert set(by_resource) == {"h/free-1", "h/held", "h/kept", "0x" + resource_id("h/stale").hex(), "h/free-2"}
    for name in ("h/free-1", "h/free-2"):
        mine, read = mixed[name.removeprefix("h/")], by_resource[name]
        assert isinstance(read.lease, Lease) and read.error is None
        assert (
            read.lease.token,
            read.lease.holder,
            read.lease.reason,
            read.lease.tx_hash,
            read.lease.block_number,
        ) == (
            mine.token,
            alice.sender,
            AcquireReason.UNHELD,
            tx,
            mine.block_number,
        )
        assert read.lease.ttl == mine.ttl and read.lease.expires_at == mine.expires_at
        assert registry.batch_item(tx, item=read.item).lease.token == mine.token
        assert registry.lease_from_tx(tx, resource=name).token == mine.token
        assert registry.lease_from_tx(tx, item=read.item).token == mine.token
    held = by_resource["h/held"]
    assert held.lease is None and isinstance(held.error, LeaseHeld) and held.error.holder == bob.sender
    with pytest.raises(LeaseHeld) as refused:
        registry.batch_item(tx, resource="h/held").result()
    assert refused.value.resource == "h/held"
    assert registry.lease_from_tx(tx, resource="h/held") is None, "its acquisition was refused: no lease"
    assert by_resource["h/kept"].expires_at == mixed["renew"] and by_resource["h/kept"].result() == mixed["renew"]
    stale = registry.batch_item(tx, resource="h/stale")
    assert isinstance(stale.error, StaleToken) and isinstance(mixed["stale"], StaleToken)
    assert stale.resource == "h/stale" and stale.token == mixed["stale"].token


def test_control_the_receipts_first_acquisition_is_another_callers_lease(chain, registry, mixed):
    """What a by-hash reader that knows only lone acquisitions would do: the receipt's first LeaseAcquired.
    For the second acquisition's caller, that is the first's lease: another token, another resource."""
    tx = mixed["tx"]
    receipt = chain.rpc.receipt(tx)
    second = mixed["free-2"] if mixed["free-1"].token < mixed["free-2"].token else mixed["free-1"]
    naive = registry._lease_from_receipt(receipt, resource=second.resource, ttl=second.ttl)
    assert naive is not None and naive.token != second.token, "the naive reading hands out another's token"
    assert naive.resource_id != resource_id(second.resource)
    assert registry.lease_from_tx(tx, resource=second.resource).token == second.token


def test_a_choice_that_is_not_one_item_is_refused_never_guessed(chain, registry, alice, mixed):
    tx = mixed["tx"]
    with pytest.raises(InvalidInput, match="3 acquisitions"):
        registry.lease_from_tx(tx)  # two acquisitions went through, one was refused: three in all
    with pytest.raises(InvalidInput, match="5 operations"):
        registry.batch_item(tx)
    with pytest.raises(InvalidInput, match="no operations of 'h/other'"):
        registry.batch_item(tx, resource="h/other")
    with pytest.raises(InvalidInput, match="not of 'h/free-1'"):
        registry.batch_item(
            tx, item=next(i.item for i in registry.batch_items(tx) if i.resource == "h/held"), resource="h/free-1"
        )
    for bad in (-1, 5, True, "0"):
        with pytest.raises(InvalidInput):
            registry.batch_item(tx, item=bad)
    with pytest.raises(InvalidInput):
        registry.batch_items("0x1234")
    lone = alice.acquire("h/lone", ttl=60)
    assert registry.batch_items(lone.tx_hash) is None and registry.batch_item(lone.tx_hash, item=0) is None
    assert registry.lease_from_tx(lone.tx_hash, resource="h/lone").token == lone.token
    with pytest.raises(InvalidInput, match="not 'h/free-1'"):
        registry.lease_from_tx(lone.tx_hash, resource="h/free-1")
    with pytest.raises(InvalidInput, match="not a batch"):
        registry.lease_from_tx(lone.tx_hash, item=1)


def test_the_same_resource_twice_in_one_batch_is_told_apart_by_item(chain, registry, alice, monkeypatch):
    """alice releases "h/twice" and acquires it again in one transaction: by resource the choice is two
    operations (refused); by item, each its own."""
    first = alice.acquire("h/twice", ttl=60)
    batcher = alice.batched()
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    results = gathered(
        batcher,
        {
            "pilot": lambda: batcher.acquire("h/pilot-2", ttl=60),
            "release": lambda: batcher.release("h/twice", first.token),
            "again": lambda: batcher.acquire("h/twice", ttl=60),
        },
        gate,
    )
    again = results["again"]
    items = registry.batch_items(again.tx_hash, resource="h/twice")
    with pytest.raises(InvalidInput, match="items 0, 1"):
        registry.batch_item(again.tx_hash, resource="h/twice")
    acquisition = next(item for item in items if item.kind == "acquire")
    assert registry.batch_item(again.tx_hash, item=acquisition.item).lease.token == again.token
    assert registry.lease_from_tx(again.tx_hash, resource="h/twice").token == again.token, "the only acquisition"


def test_a_lost_reply_names_each_callers_item_and_reconcile_gives_it_its_own_outcome(
    chain, registry, alice, bob, monkeypatch
):
    """The batch is mined but every reply is lost: each caller gets OutcomeUnknown naming the transaction and
    its own item. reconcile (and the CLI's `tx --item`) with that item gives each caller its own outcome: its
    lease, or its typed refusal; without one, the verdict says to give it."""
    bob.acquire("u/held", ttl=600)
    batcher = alice.batched()
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    results = gathered(
        batcher,
        {
            "pilot": lambda: batcher.acquire("u/pilot", ttl=60),
            "a": lambda: batcher.acquire("u/a", ttl=60),
            "held": lambda: batcher.acquire("u/held", ttl=60),
            "b": lambda: batcher.acquire("u/b", ttl=60),
        },
        gate,
        before_open=lambda: lose_every_receipt(monkeypatch),
    )
    monkeypatch.undo()
    errors = {label: results[label] for label in ("a", "held", "b")}
    assert all(isinstance(error, OutcomeUnknown) for error in errors.values()), errors
    assert len({error.tx_hash for error in errors.values()}) == 1
    assert sorted(error.item for error in errors.values()) == [0, 1, 2]
    assert all(f"item={error.item}" in "".join(error.__notes__) for error in errors.values())
    # The node took the batch; only the replies were lost. anvil mines what it takes a moment later (on a
    # loaded machine, after the callers gave up): until then reconcile rightly says "still pending".
    sent = errors["a"].tx_hash
    wait_until(lambda: chain.rpc.receipt(sent) is not None, "the node mines the batch it took")
    for label in ("a", "b"):
        error = errors[label]
        verdict = reconcile(registry, error.tx_hashes, nonce=error.nonce, sender=error.sender, item=error.item)
        assert verdict.settled and verdict.item is not None and verdict.item.item == error.item
        lease = verdict.lease
        assert lease is not None and lease.resource == f"u/{label}" and lease.holder == alice.sender
        assert registry.lease_of(f"u/{label}").token == lease.token, "the very lease the chain holds"
        assert f"item {error.item}" in verdict.summary
    error = errors["held"]
    verdict = reconcile(registry, error.tx_hashes, nonce=error.nonce, sender=error.sender, item=error.item)
    assert verdict.lease is None and isinstance(verdict.item.error, LeaseHeld) and "refused" in verdict.summary
    assert verdict.to_dict()["item"]["refused"].startswith("LeaseHeld")
    blind = reconcile(registry, error.tx_hashes, nonce=error.nonce, sender=error.sender)
    assert blind.lease is None and blind.item is None and "give item=" in blind.summary
    with pytest.raises(InvalidInput):
        reconcile(registry, error.tx_hashes, item=-1)


def test_the_cli_tx_command_reads_one_item(on_anvil, anvil_node, monkeypatch, capsys):
    """``chainfence tx HASH --item N``: that operation's outcome; without --item, the verdict says to give it."""
    from chainfence.cli import main

    chain = on_anvil.chain
    agent, other = (on_anvil.connect(chain.accounts[i]) for i in (1, 2))
    other.acquire("c/held", ttl=600)
    batcher = agent.batched()
    gate = SendGate(monkeypatch, chain.rpc, agent.sender)
    results = gathered(
        batcher,
        {
            "pilot": lambda: batcher.acquire("c/pilot", ttl=60),
            "free": lambda: batcher.acquire("c/free", ttl=60),
            "held": lambda: batcher.acquire("c/held", ttl=60),
        },
        gate,
    )
    tx = results["free"].tx_hash
    held = on_anvil.batch_item(tx, resource="c/held")
    common = ["--rpc-url", anvil_node.url, "--registry", on_anvil.address, "--json"]
    assert main(["tx", tx, "--item", str(held.item), *common]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["item"]["item"] == held.item and out["item"]["refused"].startswith("LeaseHeld") and out["lease"] is None
    assert main(["tx", tx, "--resource", "c/free", *common]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lease"]["token"] == results["free"].token and out["item"]["refused"] is None
    assert main(["tx", tx, *common]) == 0
    assert "give item=" in json.loads(capsys.readouterr().out)["summary"]


def test_the_asyncio_face_reads_items_as_its_own(chain, registry, mixed):
    tx = mixed["tx"]

    async def body():
        async with AsyncChain.over(chain) as achain:
            areg = await AsyncRegistry.at(achain, registry.address)
            free = await areg.batch_item(tx, resource="h/free-1")
            lease = await areg.lease_from_tx(tx, resource="h/free-2")
            items = await areg.batch_items(tx)
            return free, lease, items

    free, lease, items = asyncio.run(body())
    assert isinstance(free, AsyncBatchItem) and isinstance(free.lease, AsyncLease)
    assert free.lease.token == mixed["free-1"].token and free.result().token == mixed["free-1"].token
    assert isinstance(lease, AsyncLease) and lease.token == mixed["free-2"].token
    assert [type(item) for item in items] == [AsyncBatchItem] * 5


def test_registry_at_from_another_process_reads_the_same(chain, registry, mixed):
    """A restarted process: a new Registry object over the same chain, knowing only the hash."""
    fresh = Registry.at(chain, registry.address)
    assert fresh.lease_from_tx(mixed["tx"], resource="h/free-2").token == mixed["free-2"].token
