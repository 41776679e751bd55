"""A stand-in registry for guard tests that need no chain (unit layer, process races).

It answers the questions a Guard asks of a registry: which token space it is
(``identity``), whether a token is current (``check_current``), the latest
lease of a resource (``last_lease``) and the latest token (``latest_token``),
from a table the test controls. It counts chain reads so tests can prove the
fast path asks nothing.
"""

from __future__ import annotations

from types import SimpleNamespace

from chainfence import LeaseInfo, LeaseStatus
from chainfence._sdk.validate import resource_id
from chainfence._sdk.validate import resource_id as _resource_id
from chainfence.errors import LeaseExpired, LeaseReleased, StaleToken, UnknownToken

HOLDER = "0x" + "11" * 20


class FakeRegistry:
    def __init__(self, address: str = "0x" + "ab" * 20, chain_id: int = 1337, deployment_hash: str = "0x" + "00" * 32):
        self._identity = {
            "chain_id": str(chain_id),
            "registry": address,
            "deployment_block": "1",
            "deployment_hash": deployment_hash,
        }
        self.leases: dict[str, tuple[int, LeaseStatus]] = {}
        self.holders: dict[str, str] = {}
        self.reads = 0
        self.address = address
        self.chain = SimpleNamespace(confirmations=0)

    def identity(self) -> dict[str, str]:
        return dict(self._identity)

    def issue(self, resource: str, token: int, status: LeaseStatus = LeaseStatus.LIVE, holder: str = HOLDER) -> None:
        """Make ``token`` the latest of ``resource`` with ``status``, as an acquisition would."""
        self.leases[resource] = (token, status)
        self.holders[resource] = holder

    def latest_token(self, *, block=None) -> int:
        return max((token for token, _ in self.leases.values()), default=0)

    def last_lease(
        self, resource: str | None = None, *, resource_id: bytes | None = None, block=None
    ) -> LeaseInfo | None:
        if resource_id is not None:
            return self._last_lease_by_id(resource_id)
        self.reads += 1
        if resource not in self.leases:
            return None
        token, status = self.leases[resource]
        return LeaseInfo(
            resource=resource,
            resource_id=_resource_id(resource),
            holder=self.holders.get(resource, HOLDER),
            token=token,
            expires_at=0 if status is LeaseStatus.RELEASED else 10_000,
            status=status,
        )

    def _last_lease_by_id(self, resource_id_: bytes) -> LeaseInfo | None:
        for name in self.leases:
            if _resource_id(name) == resource_id_:
                return self.last_lease(name)
        return None

    def check_current(self, resource: str, token: int, *, block=None, confirmations: int = 0) -> LeaseInfo:
        info = self.last_lease(resource)
        rid = resource_id(resource)
        if info is None or token > info.token:
            raise UnknownToken(token=token, current_token=info.token if info else 0, resource=resource, resource_id=rid)
        if token < info.token:
            raise StaleToken(token=token, current_token=info.token, resource=resource, resource_id=rid)
        if info.status is LeaseStatus.RELEASED:
            raise LeaseReleased(token=token, resource=resource, resource_id=rid)
        if info.status is LeaseStatus.EXPIRED:
            raise LeaseExpired(token=token, expired_at=info.expires_at, resource=resource, resource_id=rid)
        return info
