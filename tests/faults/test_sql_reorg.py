"""Fenced SQL transactions against a chain that reorganises or rolls back, on anvil.

A reorg, or a rollback (a dev node killed inside its state-save interval, a
reorg deeper than the confirmations), is simulated with anvil's
snapshot/revert, as in test_reorg.py: ``evm_revert`` drops every block after
the snapshot and the blocks mined next form the new history. Fencing tokens
are the registry's counter, so the new history can hand a number already
used to another holder. Confirmations keep a token from counting before its
block is deep enough; the marks table notices a chain that went back below
what it has seen.
"""

from __future__ import annotations

import sqlite3

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence.errors import ChainRolledBack, TokenNotConfirmed
from chainfence.integrations.sql import fenced_transaction
from tests.support.anvil import Anvil, dev_keys

RESOURCE = "ledger/main"
OTHER = "ledger/other"


class Ledger:
    """A SQLite file with an append-only log, written through the fence."""

    def __init__(self, path):
        self.path = path
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT, token INTEGER, body TEXT)")
        conn.commit()
        conn.close()

    def write(self, registry, token, body, resource=RESOURCE, **options) -> None:
        conn = sqlite3.connect(self.path)
        try:
            with fenced_transaction(conn, registry, resource, token, **options) as cur:
                cur.execute("INSERT INTO log (resource, token, body) VALUES (?, ?, ?)", (resource, token, body))
        finally:
            conn.close()

    def bodies(self) -> list[str]:
        conn = sqlite3.connect(self.path)
        try:
            return [body for (body,) in conn.execute("SELECT body FROM log ORDER BY id")]
        finally:
            conn.close()

    def marks(self) -> dict[str, tuple[int, str | None]]:
        conn = sqlite3.connect(self.path)
        try:
            rows = conn.execute("SELECT name, token, holder FROM chainfence_marks")
            return {name: (token, holder) for name, token, holder in rows}
        finally:
            conn.close()


@pytest.fixture(scope="module")
def anvil_node():
    """An anvil of this module's own. Its tests read the registry's state k blocks below the head, down
    to the deployment block; the session's node, after thousands of blocks and reverts from the whole
    suite, once answered such a read with BlockOutOfRangeError (its oldest states were gone)."""
    with Anvil(logical_clock=True) as node:
        yield node


@pytest.fixture(scope="module")
def anvil_chain(anvil_node):
    return Chain.connect(anvil_node.url, private_keys=dev_keys(10), timeouts=Timeouts(receipt=30, poll=0.005))


@pytest.fixture(scope="module")
def anvil_session(anvil_chain):
    return anvil_chain, Registry.deploy(anvil_chain, max_ttl=3_600)


@pytest.fixture
def ledger(tmp_path):
    return Ledger(tmp_path / "ledger.sqlite")


@pytest.fixture
def alice(on_anvil):
    return on_anvil.connect(on_anvil.chain.accounts[1])


@pytest.fixture
def bob(on_anvil):
    return on_anvil.connect(on_anvil.chain.accounts[2])


def reader(anvil_node, on_anvil, confirmations: int) -> Registry:
    """The registry as seen through a chain configured with ``confirmations`` (no keys: reads only)."""
    return Registry.at(
        Chain.connect(anvil_node.url, confirmations=confirmations, timeouts=Timeouts(poll=0.005)), on_anvil.address
    )


# --- confirmations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("confirmations", "how"),
    [(2, "argument"), (2, "chain-setting"), (0, "argument")],
    ids=["confirmed-by-argument", "confirmed-by-chain-setting", "control-unconfirmed"],
)
def test_a_token_orphaned_by_a_reorg_shallower_than_k_never_writes(
    anvil_node, on_anvil, anvil_chain, alice, bob, ledger, confirmations, how
):
    """Alice acquires token t; a reorg drops her block; Bob acquires and gets the same number t; k blocks
    are mined on top. With k = 2 Alice's write was refused (TokenNotConfirmed) and only Bob's landed. The
    control (k = 0) let Alice's orphaned t write, then Bob's t: two holders' writes under one token."""
    if how == "argument":
        registry, options = on_anvil, {"confirmations": confirmations}
    else:
        registry, options = reader(anvil_node, on_anvil, confirmations), {}
    fork_point = anvil_chain.snapshot()
    orphan = alice.acquire(RESOURCE, ttl=600)
    try:
        ledger.write(registry, orphan.token, "alice", **options)
    except TokenNotConfirmed as refused:
        assert (refused.token, refused.confirmations) == (orphan.token, confirmations)
    anvil_chain.revert(fork_point)  # the reorg
    canonical = bob.acquire(RESOURCE, ttl=600)
    assert canonical.token == orphan.token, "the counter rolled back: the same number, another holder"
    anvil_chain.mine(2)
    ledger.write(registry, canonical.token, "bob", **options)

    if confirmations:
        assert ledger.bodies() == ["bob"], "the orphaned token wrote"
        assert ledger.marks() == {RESOURCE: (canonical.token, bob.sender)}
    else:
        assert ledger.bodies() == ["alice", "bob"], "the control must show the orphaned token writing"


def test_a_token_becomes_a_mark_only_once_its_block_is_k_deep(on_anvil, anvil_chain, alice, ledger):
    """TokenNotConfirmed, nothing written, at depth 0 and 1; the write lands at depth 2."""
    lease = alice.acquire(RESOURCE, ttl=600)
    for _ in range(2):
        with pytest.raises(TokenNotConfirmed):
            ledger.write(on_anvil, lease.token, "too early", confirmations=2)
        assert ledger.bodies() == [] and ledger.marks() == {}
        anvil_chain.mine(1)
    ledger.write(on_anvil, lease.token, "deep enough", confirmations=2)
    assert ledger.bodies() == ["deep enough"]
    assert ledger.marks() == {RESOURCE: (lease.token, alice.sender)}


def test_a_registry_younger_than_the_confirmed_head_confirms_nothing(anvil_chain, on_anvil, ledger):
    """The confirmed block predates the registry's deployment (ContractNotFound there): not confirmed."""
    young = Registry.deploy(anvil_chain, max_ttl=600)
    lease = young.connect(anvil_chain.accounts[1]).acquire(RESOURCE, ttl=600)
    with pytest.raises(TokenNotConfirmed):
        ledger.write(young, lease.token, "too early", confirmations=5)
    assert ledger.bodies() == []


# --- a chain that rolled back ------------------------------------------------------------------


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "control-mark-only"])
def test_strict_detects_a_token_number_reissued_to_another_holder(on_anvil, anvil_chain, alice, bob, ledger, strict):
    """Alice's t became the mark; the chain rolls back; Bob is issued the same number t. To the mark
    alone Bob's t is Alice's epoch (the control accepts it: two holders, one token). strict asks the
    chain every time and compares the holder stored with the mark: ChainRolledBack, nothing written."""
    fork_point = anvil_chain.snapshot()
    first = alice.acquire(RESOURCE, ttl=600)
    ledger.write(on_anvil, first.token, "alice")
    assert ledger.marks() == {RESOURCE: (first.token, alice.sender)}
    anvil_chain.revert(fork_point)  # the rollback
    second = bob.acquire(RESOURCE, ttl=600)
    assert second.token == first.token

    if strict:
        with pytest.raises(ChainRolledBack) as rolled_back:
            ledger.write(on_anvil, second.token, "bob", strict=True)
        error = rolled_back.value
        assert (error.seen_token, error.chain_token, error.resource) == (first.token, second.token, RESOURCE)
        assert ledger.bodies() == ["alice"]
    else:
        ledger.write(on_anvil, second.token, "bob")
        assert ledger.bodies() == ["alice", "bob"], "the control must show the re-issued number writing"


def test_a_new_epoch_on_a_chain_whose_latest_token_fell_below_the_marks_is_refused(
    on_anvil, anvil_chain, alice, bob, ledger
):
    """The marks table has seen token t + 1 (on another resource); the chain rolls back to before t;
    Bob's new t on this resource would pass every per-resource test, but the registry's latest token
    is below what this database has seen: ChainRolledBack, nothing written."""
    fork_point = anvil_chain.snapshot()
    alice.acquire(OTHER, ttl=600)
    again = alice.acquire(OTHER, ttl=600)  # re-acquired: t + 1
    ledger.write(on_anvil, again.token, "alice on other", resource=OTHER)
    anvil_chain.revert(fork_point)
    lease = bob.acquire(RESOURCE, ttl=600)
    assert lease.token == again.token - 1

    with pytest.raises(ChainRolledBack) as rolled_back:
        ledger.write(on_anvil, lease.token, "bob")
    assert (rolled_back.value.seen_token, rolled_back.value.chain_token) == (again.token, lease.token)
    assert ledger.bodies() == ["alice on other"]
    assert ledger.marks() == {OTHER: (again.token, alice.sender)}


def test_a_resource_whose_chain_token_fell_below_its_mark_is_a_rollback_not_a_bad_token(
    on_anvil, anvil_chain, alice, bob, ledger
):
    """The mark of the resource is Alice's t; the chain rolls back to before t and moves on elsewhere
    (t and t + 1 go to other resources). A token above the mark now meets a resource whose on-chain
    token (0) is below the mark: the chain lost history, which is what the error must say."""
    fork_point = anvil_chain.snapshot()
    first = alice.acquire(RESOURCE, ttl=600)
    ledger.write(on_anvil, first.token, "alice")
    anvil_chain.revert(fork_point)
    bob.acquire(OTHER, ttl=600)
    elsewhere = bob.acquire("ledger/third", ttl=600)  # t + 1, issued for another resource
    with pytest.raises(ChainRolledBack) as rolled_back:
        ledger.write(on_anvil, elsewhere.token, "misrouted")
    assert (rolled_back.value.seen_token, rolled_back.value.chain_token) == (first.token, 0)
    assert ledger.bodies() == ["alice"]


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "control-mark-only"])
def test_strict_refuses_a_mark_the_chain_no_longer_has(on_anvil, anvil_chain, alice, ledger, strict):
    """Alice's t is the mark; the chain rolls back to before t. Alice writes again with t: the mark
    alone accepts (same epoch, no chain call); strict sees the resource's on-chain token below it."""
    fork_point = anvil_chain.snapshot()
    lease = alice.acquire(RESOURCE, ttl=600)
    ledger.write(on_anvil, lease.token, "alice 1")
    anvil_chain.revert(fork_point)
    if strict:
        with pytest.raises(ChainRolledBack):
            ledger.write(on_anvil, lease.token, "alice 2", strict=True)
        assert ledger.bodies() == ["alice 1"]
    else:
        ledger.write(on_anvil, lease.token, "alice 2")
        assert ledger.bodies() == ["alice 1", "alice 2"], "the control must show the mark alone accepting"
