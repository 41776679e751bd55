"""chainfence: fencing tokens issued on-chain, checked where the writes happen.

A lease decides who may try; the fencing token decides whose writes still
count. ::

    from chainfence import Chain, Registry, Guard

    chain = Chain.embedded()
    registry = Registry.deploy(chain)
    lease = registry.connect(chain.accounts[1]).acquire("reports/daily", ttl=30)
    guard = Guard(registry, path="guard.sqlite")
    guard.check("reports/daily", lease.token)     # raises StaleToken for a superseded holder
"""

import logging

from .admission import Admission
from .audit import EventKind, LeaseEvent
from .chain import Chain
from .election import Election, Leader, Leadership
from .errors import ChainfenceError
from .fenced_requests import FencedRequest
from .fenced_store import FencedStore
from .guard import Guard
from .lease import AcquireReason, Lease, LeaseInfo, LeaseSet, LeaseStatus
from .namespaces import NamespacePolicy
from .registry import Registry
from .watchdog import StuckLease, StuckReport

__all__ = [
    "AcquireReason",
    "Admission",
    "Chain",
    "ChainfenceError",
    "Election",
    "EventKind",
    "FencedRequest",
    "FencedStore",
    "Guard",
    "Leader",
    "Leadership",
    "Lease",
    "LeaseEvent",
    "LeaseInfo",
    "LeaseSet",
    "LeaseStatus",
    "NamespacePolicy",
    "Registry",
    "StuckLease",
    "StuckReport",
]

__version__ = "0.1.0"

# A library never configures logging: only the CLI adds handlers.
logging.getLogger(__name__).addHandler(logging.NullHandler())
