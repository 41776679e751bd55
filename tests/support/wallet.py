"""The example AgentWallet (an ERC-1271 contract account) driven from tests."""

from __future__ import annotations

from chainfence import Registry
from chainfence._node import artifacts as _artifacts


class AgentWallet:
    """A deployed AgentWallet owned by ``owner`` (an account the chain holds a key for)."""

    def __init__(self, registry: Registry, owner: str):
        self.registry = registry
        self.chain = registry.chain
        self.owner = owner
        artifact = _artifacts.load("AgentWallet")
        factory = self.chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
        data = bytes.fromhex(factory.constructor(owner).data_in_transaction[2:])
        self.address = self.chain.transact(owner, None, data)["contractAddress"]
        self._contract = self.chain.w3.eth.contract(address=self.address, abi=artifact["abi"])

    def execute(self, target: str, data: bytes, *, sender: str | None = None, resource: str | None = None):
        call = bytes.fromhex(self._contract.encode_abi("execute", [target, data])[2:])
        return self.chain.transact(sender or self.owner, self.address, call, resource=resource)

    def acquire(self, resource: str, ttl: int):
        """Acquire ``resource`` with the wallet as the holder; returns the Lease."""
        receipt = self.execute(
            self.registry.address, self.registry._encode("acquire", [resource, ttl]), resource=resource
        )
        return self.registry._lease_from_receipt(receipt, resource=resource, ttl=ttl)
