"""A log's transaction hash, which no receipts trie holds, as a provider tells it (issue 25).

The audit index keys its events by (block, transaction hash, log index) and tells a grant from a
revoke by it: a lease whose ``LeaseRevoked`` and the grant's ``LeaseAcquired`` share a transaction
ended ``granted``, one revoked in a transaction of its own ``revoked``. A block's ``receiptsRoot``
commits to its receipts' logs and order, not to their ``transactionHash``, nor to the hash an
``eth_getLogs`` answer gives each log; the settling of a block by its receipts compared only what
the logs say. So a provider could, in the receipts mode and under ``audit verify --proofs``:

- **split a grant**: answer the grant's ``LeaseRevoked`` with the hash of another transaction (the
  receipts honest): the block settled, and the index said bob's lease was ``revoked`` (an admin's
  act of its own) where the admin granted it away; ``verify --proofs`` passed;
- **rename a transaction**: answer the grant's logs and its receipt with a hash no transaction has:
  the block settled and the index held a transaction that does not exist.

Now the receipts' hashes are proven (``_node/completeness.receipts_steps``: the block's transactions,
each encoded as the transactions trie holds it, must hash to the header's ``transactionsRoot``, and
each receipt's ``transactionHash`` must be its transaction's), and a block settles only when the
answer puts each event in the transaction (hash and index) its receipts do: ``LogsIncomplete`` at
the block, nothing of it indexed, and the gap closes once the provider is honest. An index synced in
the bloom mode (which reads no receipts for a block its bloom does not doubt) takes the answer as it
is, as it takes a log's data: ``verify --proofs`` names the block. Controls: settled as before (the
places not compared, the receipts' hashes believed), the index believes the lie and ``verify
--proofs`` passes it.

Told by a lying provider: a loopback proxy in front of anvil, and in process on the embedded chain.
"""

from __future__ import annotations

import pytest

from chainfence._node import completeness
from chainfence.audit.index import AuditIndex
from chainfence.errors import AuditIndexDiffers, ChainError
from chainfence.proofs import ProvenReader, QuorumHeaders
from tests.support.follower_proxies import through
from tests.support.lying_proxy import LyingProxy

FAKE = "0x" + "5a" * 32  # no transaction's hash


def _number(value) -> int:
    return value if isinstance(value, int) else int(value, 16)


def _hex(value) -> str:
    return value if isinstance(value, str) else "0x" + bytes(value).hex()


class Grant:
    """bob holds a resource of alice's namespace; alice, its admin, grants it to carol: the revoke of bob's
    lease and carol's acquisition in one transaction."""

    def __init__(self, registry):
        chain = registry.chain
        self.registry = registry
        namespace = registry.connect(chain.accounts[1]).namespace()  # alice's own (her address's)
        bob = registry.connect(chain.accounts[2])
        self.resource = f"{namespace.prefix}/granted"
        self.bob = bob.acquire(self.resource, ttl=600)
        chain.mine(1)
        self.carol = namespace.grant(self.resource, chain.accounts[3], 600)
        self.block = self.carol.block_number
        chain.mine(1)


def splitting(liar, grant: Grant) -> None:
    """eth_getLogs answers the grant's LeaseRevoked with the hash of bob's acquisition (a real transaction,
    another one); the receipts are the node's."""
    revoked = "0x" + _events_topic("REVOKED")[2:]

    def logs(params, forward):
        answer = forward(params)
        for log in answer:
            if _number(log["blockNumber"]) == grant.block and log["topics"][0] == revoked:
                log["transactionHash"] = grant.bob.tx_hash
        return answer

    liar.on("eth_getLogs", logs)


def renaming(liar, grant: Grant) -> None:
    """The grant's transaction answered with a hash no transaction has, alike in eth_getLogs and in its
    receipt (every receipt method): the receipts still hash to the block's receiptsRoot."""

    def log(entry):
        if _number(entry["blockNumber"]) == grant.block:
            entry["transactionHash"] = FAKE
        return entry

    def receipt(found):
        if isinstance(found, dict) and _number(found["blockNumber"]) == grant.block:
            found["transactionHash"] = FAKE
            for entry in found["logs"]:
                log(entry)
        return found

    liar.on("eth_getLogs", lambda params, forward: [log(entry) for entry in forward(params)])
    liar.on("eth_getBlockReceipts", lambda params, forward: [receipt(r) for r in (forward(params) or [])] or None)
    liar.on("eth_getTransactionReceipt", lambda params, forward: receipt(forward(params)))


def _events_topic(kind: str) -> str:
    from chainfence._node import events

    return events.topic(getattr(events.Kind, kind))


LIES = {"split": splitting, "renamed": renaming}
#: Why the block does not settle, by lie.
WHY = {
    "split": "the answer puts its events in other transactions than its receipts do",
    "renamed": f"receipt 0 names transaction {FAKE}, but its transaction hashes to",
}


def indexed(index: AuditIndex, block: int) -> list[tuple[str, str]]:
    return index._conn.execute(
        "SELECT kind, tx_hash FROM events WHERE block = ? ORDER BY log_index", (block,)
    ).fetchall()


def naive_settle(monkeypatch) -> None:
    """Settling as before: the events' places (transaction hash and index) not compared, and the receipts'
    hashes believed as they read."""
    monkeypatch.setattr(completeness, "placed", lambda entry: completeness.content(entry))
    monkeypatch.setattr(completeness, "receipts_hashes_steps", _unchecked)


def _unchecked(header, receipts, *, block=None):
    return None
    yield  # steps, as the real one


# ---------------------------------------------------------------------------
# The audit sync, receipts mode
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lie", sorted(LIES))
def test_the_receipts_mode_sync_refuses_a_grant_told_in_other_transactions(lied, tmp_path, lie):
    registry, liar, lied_to = lied
    grant = Grant(registry)
    LIES[lie](liar, grant)
    index = AuditIndex(tmp_path / "audit.sqlite")
    result = index.sync(lied_to, completeness="receipts")
    assert result.held_at == grant.block, result
    assert WHY[lie] in result.held_because, result.held_because
    assert index.lease(grant.carol.token) is None and indexed(index, grant.block) == [], "nothing of it indexed"
    assert index.lease(grant.bob.token).ended is None
    liar.honest()
    index.sync(lied_to, completeness="receipts")
    assert index.lease(grant.bob.token).ended == "granted"
    assert {tx for _kind, tx in indexed(index, grant.block)} == {grant.carol.tx_hash}
    index.verify(registry)


@pytest.mark.parametrize("lie", sorted(LIES))
def test_control_settled_as_before_the_index_believes_the_lie(lied, tmp_path, lie, monkeypatch):
    registry, liar, lied_to = lied
    naive_settle(monkeypatch)
    grant = Grant(registry)
    LIES[lie](liar, grant)
    index = AuditIndex(tmp_path / "audit.sqlite")
    assert index.sync(lied_to, completeness="receipts").held_at is None, "settled by its receipts"
    if lie == "split":
        assert index.lease(grant.bob.token).ended == "revoked", "a grant read as a revoke of its own"
    else:
        assert {tx for _kind, tx in indexed(index, grant.block)} == {FAKE}, "a transaction that does not exist"


# ---------------------------------------------------------------------------
# audit verify --proofs, an index synced in the bloom mode
# ---------------------------------------------------------------------------


@pytest.fixture
def proofs(on_anvil, liar):
    """A proof reader over three honest header providers, its proofs through the liar."""
    with LyingProxy(liar.upstream) as b, LyingProxy(liar.upstream) as c:
        headers = QuorumHeaders([liar.upstream, b.url, c.url], k=2)
        yield ProvenReader(on_anvil.address, headers=headers, provider=liar.url)
        headers.close()


@pytest.mark.parametrize("lie", sorted(LIES))
def test_verify_with_proofs_names_the_block_a_bloom_sync_took_from_the_lie(on_anvil, liar, proofs, tmp_path, lie):
    grant = Grant(on_anvil)
    LIES[lie](liar, grant)
    index = AuditIndex(tmp_path / "audit.sqlite")
    lied_to = through(on_anvil, liar.url)
    assert index.sync(lied_to).held_at is None, "the bloom mode takes an answer its bloom does not doubt"
    with pytest.raises(AuditIndexDiffers) as differs:
        index.verify(lied_to, proofs=proofs)
    assert any(f"block {grant.block}:" in difference for difference in differs.value.differences), differs.value


@pytest.mark.parametrize("lie", sorted(LIES))
def test_control_verify_reading_the_receipts_as_before_passes_the_lie(
    on_anvil, liar, proofs, tmp_path, lie, monkeypatch
):
    naive_settle(monkeypatch)
    grant = Grant(on_anvil)
    LIES[lie](liar, grant)
    index = AuditIndex(tmp_path / "audit.sqlite")
    lied_to = through(on_anvil, liar.url)
    index.sync(lied_to)
    assert index.verify(lied_to, proofs=proofs) >= 3, "every check passes"


# ---------------------------------------------------------------------------
# The receipts' hashes against the transactions trie
# ---------------------------------------------------------------------------


def test_receipts_whose_hash_is_not_their_transactions_do_not_settle_a_block(lied):
    registry, liar, lied_to = lied
    grant = Grant(registry)
    renaming(liar, grant)
    header = lied_to.chain.rpc.blocks([grant.block], raw=True)[0]
    with pytest.raises(ChainError, match=f"block {grant.block}: receipt 0 names transaction {FAKE}, but its"):
        completeness.receipts(lied_to.chain, header)
    liar.honest()
    found = completeness.receipts(lied_to.chain, header)
    assert [_hex(receipt["transactionHash"]) for receipt in found][-1] == grant.carol.tx_hash


def test_the_sdks_transactions_hash_to_the_blocks_transactions_root(lied):
    """The SDK's own transactions (dynamic-fee), as each node sends them (the in-process chain: snake_case
    fields): the block's transactions hash to its root, each to its hash."""
    registry, _liar, lied_to = lied
    grant = Grant(registry)
    header = lied_to.chain.rpc.blocks([grant.block], raw=True)[0]
    hashes = completeness.transaction_hashes(lied_to.chain, header)
    assert "0x" + hashes[-1].hex() == grant.carol.tx_hash


def test_every_transaction_type_anvil_mines_hashes_to_its_transactions_root(on_anvil):
    """Legacy, access-list, dynamic-fee, a creation and set-code (EIP-7702) transactions, sent raw and mined
    in one block: encoded as the transactions trie holds them, they hash to the header's root, each to its
    hash. (Blob transactions, type 3, are encoded by the spec's field list: no node here mines one.)"""
    from eth_account import Account

    from chainfence.testing.anvil import dev_keys

    chain = on_anvil.chain
    key = dev_keys(10)[8]
    sender = Account.from_key(key).address
    nonce = chain.rpc.nonce(sender, "pending")
    base = {"to": sender, "value": 1, "gas": 100_000, "chainId": chain.chain_id}
    dynamic = {"maxFeePerGas": 3 * 10**9, "maxPriorityFeePerGas": 10**9}
    transactions = [
        {**base, "gasPrice": 3 * 10**9},
        {**base, "gasPrice": 3 * 10**9, "accessList": [{"address": sender, "storageKeys": ["0x" + "01" * 32]}]},
        {**base, **dynamic, "accessList": [{"address": sender, "storageKeys": []}]},
        {**base, **dynamic, "to": None, "value": 0, "data": "0x6000"},
    ]
    authorization = Account.from_key(key).sign_authorization(
        {"chainId": chain.chain_id, "address": "0x" + "22" * 20, "nonce": nonce + len(transactions) + 1}
    )
    transactions.append({**base, **dynamic, "authorizationList": [authorization]})
    chain.rpc.request("evm_setAutomine", [False])
    try:
        sent = []
        for offset, transaction in enumerate(transactions):
            signed = Account.sign_transaction({**transaction, "nonce": nonce + offset}, key)
            sent.append(chain.rpc.request("eth_sendRawTransaction", ["0x" + signed.raw_transaction.hex()]))
        chain.rpc.request("evm_mine", [])
    finally:
        chain.rpc.request("evm_setAutomine", [True])
    header = chain.rpc.blocks([chain.block_number()], raw=True)[0]
    kinds = [tx["type"] for tx in chain.rpc.request("eth_getBlockByHash", [header["hash"], True])["transactions"]]
    assert sorted(kinds) == ["0x0", "0x1", "0x2", "0x2", "0x4"], kinds
    hashes = completeness.transaction_hashes(chain, header)
    assert sorted("0x" + h.hex() for h in hashes) == sorted(sent)
