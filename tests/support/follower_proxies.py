"""What the follower and audit fault tests share: a registry reached through a proxy (the ``liar`` and
``honest_pair`` fixtures of tests/faults/conftest.py), a follow-mode guard, its stored cursor, and two
registry events mined in one block (the shape a bloom cannot count)."""

from __future__ import annotations

import sqlite3

from eth_account import Account

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence.guard import Follow
from tests.support.anvil import dev_keys


def through(registry: Registry, url: str) -> Registry:
    return Registry.at(Chain.connect(url, timeouts=Timeouts(poll=0.01)), registry.address)


def follow_guard(registry: Registry, path, **follow) -> Guard:
    """A follow-mode guard that polls only when told (``sync()``); ``follow``: further settings of its
    :class:`~chainfence.guard.Follow` (``completeness``, ``headers``)."""
    return Guard(registry, path, mode=Follow(interval=3_600, **follow))


def follow_block(path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'follow_block'").fetchone()[0])


def in_one_block(registry: Registry, names: list[str], accounts=(7, 8)) -> int:
    """One acquisition of each name, from different accounts (raw transactions from keys the SDK does not
    send from here), mined in one block: the registry's LeaseAcquired logs in separate transactions of
    that block. Returns the block."""
    chain = registry.chain
    chain.rpc.request("evm_setAutomine", [False])
    try:
        for account, name in zip(accounts, names, strict=True):
            signer = Account.from_key(dev_keys(10)[account])
            tx = {
                "to": registry.address,
                "data": registry._encode("acquire", [name, 600]),
                "gas": 300_000,
                "maxFeePerGas": 10**11,
                "maxPriorityFeePerGas": 10**9,
                "nonce": chain.rpc.nonce(signer.address, "pending"),
                "chainId": chain.chain_id,
                "value": 0,
            }
            raw = signer.sign_transaction(tx).raw_transaction
            chain.rpc.request("eth_sendRawTransaction", ["0x" + raw.hex()])
        chain.rpc.request("evm_mine", [])
    finally:
        chain.rpc.request("evm_setAutomine", [True])
    block = chain.block_number()
    receipts = chain.rpc.request("eth_getBlockReceipts", [hex(block)])
    assert len(receipts) == len(names) and all(int(r["status"], 16) == 1 for r in receipts), "all mined there"
    return block
