"""A stand-in registry for guard tests that need no chain (unit layer, process races).

It answers the two questions a Guard asks of a registry: which token space
it is (``identity``) and what the latest lease of a resource is
(``last_lease``), from a table the test controls. It counts chain reads so
tests can prove the fast path asks nothing.
"""

from __future__ import annotations

from types import SimpleNamespace

from chainfence import LeaseInfo, LeaseStatus
from chainfence._validate import resource_id


class FakeRegistry:
    def __init__(self, address: str = "0x" + "ab" * 20, chain_id: int = 1337, genesis: str = "0x" + "00" * 32):
        self._identity = {"chain_id": str(chain_id), "genesis_hash": genesis, "registry": address}
        self.leases: dict[str, tuple[int, LeaseStatus]] = {}
        self.reads = 0
        self.address = address
        self.chain = SimpleNamespace(confirmations=0)

    def identity(self) -> dict[str, str]:
        return dict(self._identity)

    def issue(self, resource: str, token: int, status: LeaseStatus = LeaseStatus.LIVE) -> None:
        """Make ``token`` the latest of ``resource`` with ``status``, as an acquisition would."""
        self.leases[resource] = (token, status)

    def last_lease(self, resource: str, *, block: str | int = "latest") -> LeaseInfo | None:
        self.reads += 1
        if resource not in self.leases:
            return None
        token, status = self.leases[resource]
        return LeaseInfo(
            resource=resource,
            resource_id=resource_id(resource),
            holder="0x" + "11" * 20,
            token=token,
            expires_at=0 if status is LeaseStatus.RELEASED else 10_000,
            status=status,
        )
