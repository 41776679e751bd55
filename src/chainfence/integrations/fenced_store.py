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

from .._node import artifacts as _artifacts
from .._node.abi import decode as abi_decode
from .._node.abi import encode as abi_encode
from .._node.addresses import to_checksum_address
from .._node.rlp import keccak256
from .._sdk import validate as _validate
from ..errors import ContractNotFound, InvalidInput
from ..lease import Lease
from ..registry import Registry

__all__ = ["FencedStore"]


class FencedStore:
    """A deployed FencedStore guarded by ``registry``."""

    def __init__(self, registry: Registry, address: str):
        self.registry = registry
        self.chain = registry.chain
        self.address = _validate.address(address, "store address")

    @classmethod
    def deploy(cls, registry: Registry, *, sender: Any = None) -> FencedStore:
        artifact = _artifacts.load("FencedStore")
        data = bytes.fromhex(artifact["bytecode"][2:]) + abi_encode(["address"], [registry.address])
        deployer = registry.chain.signer(sender if sender is not None else registry.chain.accounts[0])
        receipt = registry.chain.transact(deployer, None, data)
        return cls(registry, receipt["contractAddress"])

    @classmethod
    def at(cls, registry: Registry, address: str) -> FencedStore:
        store = cls(registry, address)
        if not registry.chain.rpc.code(store.address):
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
        """Every accepted write (``Written`` events), oldest first (an example: one unpaged query)."""
        topic = "0x" + keccak256(b"Written(bytes32,uint256,address,bytes32)").hex()
        logs = self.chain.rpc.logs({"address": self.address, "fromBlock": 0, "toBlock": "latest", "topics": [topic]})
        writes = []
        for log in sorted(logs, key=lambda entry: (entry["blockNumber"], entry["logIndex"])):
            key, token, writer = (bytes(t) for t in log["topics"][1:4])
            writes.append(
                {
                    "key": key,
                    "token": int.from_bytes(token, "big"),
                    "writer": to_checksum_address(writer[12:]),
                    "value": bytes(abi_decode(["bytes32"], bytes(log["data"]))[0]),
                }
            )
        return writes
