"""The example on-chain fenced key-value store (``contracts/examples/FencedStore.sol``) from Python.

::

    store = FencedStore.deploy(registry)
    lease = agent.acquire("reports/daily", ttl=30)
    store.write(lease, b"v1")           # as the lease's holder, with its token
    store.read("reports/daily")         # -> (value, token that wrote it)

A write by a holder whose lease was superseded reverts on-chain and raises
the registry's own error (:class:`~chainfence.errors.StaleToken`, ...): the
store asks the registry's ``checkCurrent`` and keeps its own per-key fence.
"""

from __future__ import annotations

from typing import Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from web3 import Web3

from . import _artifacts, _validate
from .errors import ChainError, ContractNotFound, InvalidInput
from .lease import Lease
from .registry import Registry

__all__ = ["FencedStore"]


class FencedStore:
    """A deployed FencedStore guarded by ``registry``."""

    def __init__(self, registry: Registry, address: str):
        self.registry = registry
        self.chain = registry.chain
        self.address = _validate.address(address, "store address")
        self._contract = self.chain.w3.eth.contract(address=self.address, abi=_artifacts.abi("FencedStore"))

    @classmethod
    def deploy(cls, registry: Registry, *, sender: Any = None) -> FencedStore:
        artifact = _artifacts.load("FencedStore")
        factory = registry.chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
        data = bytes.fromhex(factory.constructor(registry.address).data_in_transaction[2:])
        deployer = registry.chain.signer(sender if sender is not None else registry.chain.accounts[0])
        receipt = registry.chain.transact(deployer, None, data)
        return cls(registry, receipt["contractAddress"])

    @classmethod
    def at(cls, registry: Registry, address: str) -> FencedStore:
        store = cls(registry, address)
        if not registry.chain.w3.eth.get_code(store.address):
            raise ContractNotFound(f"no contract code at {store.address}")
        return store

    def write(self, lease: Lease, value: bytes) -> Any:
        """Write ``value`` (up to 32 bytes) under the lease's resource, as its holder, with its token.

        Returns the receipt. Raises the registry's error if the token is no
        longer current, :class:`~chainfence.errors.StaleToken` if the store has
        seen a higher token for the key, :class:`~chainfence.errors.NotHolder`
        if the sender does not hold it.
        """
        return self.write_raw(lease.holder, lease.resource, lease.token, value)

    def write_raw(self, sender: str, resource: str, token: int, value: bytes) -> Any:
        """Write as ``sender`` with an explicit token (what a stale or foreign writer would do)."""
        resource_id = _validate.resource_id(resource)
        token = _validate.token(token)
        if not isinstance(value, (bytes, bytearray)) or len(value) > 32:
            raise InvalidInput("value must be at most 32 bytes")
        data = self._encode("write", [resource_id, token, bytes(value).ljust(32, b"\0")])
        return self.chain.transact(sender, self.address, data, resource=resource)

    def read(self, resource: str) -> tuple[bytes, int]:
        """(value, the token that wrote it); (32 zero bytes, 0) if never written."""
        resource_id = _validate.resource_id(resource)
        raw = self.chain.call(self.address, self._encode("read", [resource_id]))
        if not raw:
            raise ContractNotFound(f"no FencedStore code at {self.address}")
        value, fence = abi_decode(["bytes32", "uint256"], raw)
        return bytes(value), fence

    @staticmethod
    def _encode(function: str, args: list[Any]) -> bytes:
        selector, types = _artifacts.functions("FencedStore")[function]
        return selector + abi_encode(types, args)

    def history(self) -> list[dict[str, Any]]:
        """Every accepted write (``Written`` events), oldest first."""
        event = self._contract.events.Written()
        try:
            logs = self.chain.w3.eth.get_logs({"address": self.address, "fromBlock": 0, "topics": [event.topic]})
        except Exception as exc:  # pragma: no cover - node failure
            raise ChainError(f"cannot read the store's events: {exc}") from exc
        return [
            {
                "key": bytes(args["key"]),
                "token": args["token"],
                "writer": Web3.to_checksum_address(args["writer"]),
                "value": bytes(args["value"]),
            }
            for args in (event.process_log(log)["args"] for log in logs)
        ]
