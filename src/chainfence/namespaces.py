"""Namespaces: who administers which resources, and the policy they set.

A resource name's namespace is its text before the first ``/``
(``prod/db`` is in ``prod``); a name without ``/`` is in no namespace and
always open. On-chain a namespace is ``keccak256(prefix)``. A namespace
nobody administers behaves as if namespaces did not exist. A namespace has
an admin by construction only: an *address namespace* (``"0x"`` and the 40
lowercase hex digits of an address: :meth:`Registry.namespace_of
<chainfence.Registry.namespace_of>`) is its address's from the start, and
any other only if the deployer assigned it
(``Registry.deploy(..., namespaces={"prod": admin})``). Nobody can claim an
unassigned namespace, so nobody gains power over leases others already
hold. The admin sets its :class:`NamespacePolicy` and may revoke and grant
leases and work items in it, and in no other namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NamespacePolicy"]

_ZERO = "0x" + "00" * 20


@dataclass(frozen=True)
class NamespacePolicy:
    """A namespace's admin and policy, as the registry reads it.

    ``admin`` is None when nobody administers the namespace (then the rest is
    the open default); ``pending_admin`` the account offered the role, if any.
    ``max_ttl`` 0 means the registry's maximum; ``lock_delay`` is seconds after
    an expiry during which only the expired holder may acquire;
    ``admission_required`` means only allowlisted holders may acquire or be granted.
    """

    name: str
    namespace: bytes
    admin: str | None
    pending_admin: str | None
    max_ttl: int
    lock_delay: int
    admission_required: bool

    @property
    def administered(self) -> bool:
        return self.admin is not None

    def to_dict(self) -> dict[str, object]:
        return {
            "namespace": self.name,
            "id": "0x" + self.namespace.hex(),
            "admin": self.admin,
            "pending_admin": self.pending_admin,
            "max_ttl": self.max_ttl,
            "lock_delay": self.lock_delay,
            "admission_required": self.admission_required,
        }


def _or_none(address: str) -> str | None:
    return None if int(address, 16) == 0 else address
