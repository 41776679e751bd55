"""Signed intents driven from tests: agents with keys and no gas, a relayer that sends ``performIntents``,
each intent's outcome read from the receipt, and raw contracts (gas bombs) deployed from their bytecode."""

from __future__ import annotations

from typing import Any

from eth_account import Account
from eth_utils import keccak

from chainfence import Chain, Registry
from chainfence._node import events as _events
from chainfence._node.formats import raw_logs
from chainfence._node.reverts import decode as decode_revert
from chainfence.errors import ChainfenceError
from chainfence.intents import Intent


def agent(label: str) -> Any:
    """An agent's account (a key, no gas): the same for the same label on every run."""
    return Account.from_key(keccak(f"chainfence test agent {label}".encode()))


def perform(
    chain: Chain, registry: Registry, intents: list[Intent], *, gas: int = 8_000_000, sender: str | None = None
):
    """Send ``intents`` in one ``performIntents`` from ``sender`` (default: the chain's first account); the receipt."""
    data = registry._encode("performIntents", [[intent.abi() for intent in intents]])
    return chain.transact(sender or chain.accounts[0], registry.address, data, gas=gas)


def refusals(receipt: Any, registry: Registry) -> dict[int, ChainfenceError]:
    """Each refused intent's error, by its index in the batch (from the receipt's IntentRefused logs)."""
    found = {}
    for log in raw_logs(receipt):
        decoded = _events.decode(log)
        if decoded is None or decoded.kind is not _events.Kind.INTENT_REFUSED:
            continue
        assert log["address"].lower() == registry.address.lower()
        found[decoded.index] = decode_revert(decoded.refusal)
    return found


def refused_digests(receipt: Any) -> dict[int, bytes]:
    """Each refused intent's digest (as the registry logged it), by index."""
    found = {}
    for log in raw_logs(receipt):
        decoded = _events.decode(log)
        if decoded is not None and decoded.kind is _events.Kind.INTENT_REFUSED:
            found[decoded.index] = decoded.resource_id
    return found


def events(receipt: Any, kind: _events.Kind) -> list[_events.RegistryLog]:
    """The receipt's registry events of ``kind``, decoded."""
    decoded = (_events.decode(log) for log in raw_logs(receipt))
    return [event for event in decoded if event is not None and event.kind is kind]


def deploy_runtime(chain: Chain, runtime: bytes, *, sender: str | None = None) -> str:
    """Deploy a contract whose runtime code is ``runtime`` (init code: copy it to memory and return it)."""
    assert len(runtime) < 256
    init = bytes([0x60, len(runtime), 0x80, 0x60, 0x0B, 0x60, 0x00, 0x39, 0x60, 0x00, 0xF3]) + runtime
    return chain.transact(sender or chain.accounts[0], None, init)["contractAddress"]


#: Runtime code that loops until its gas is gone (JUMPDEST PUSH1 0 JUMP): an ERC-1271 check that never answers.
GAS_BOMB = bytes.fromhex("5b600056")

#: Runtime code that answers ERC-1271's magic value for anything, followed by 64 KiB of returned zeros
#: (MSTORE the magic at 0, RETURN 0..0x10000): a permissive wallet whose answer is a return-data bomb.
YES_WITH_A_TAIL = bytes.fromhex("631626ba7e60e01b60005262010000" + "6000f3")
