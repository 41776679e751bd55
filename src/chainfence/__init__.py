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

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ._core import log as _log
from ._core import moved as _moved

__all__ = [
    "AcquireReason",
    "Admission",
    "AuditIndex",
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
    "TermEnded",
    "Timeouts",
]

__version__ = "0.2.0"

# Each public name and the module it lives in. ``import chainfence`` imports
# none of them (and so not web3): a name is imported the first time it is
# asked for (PEP 562), so `chainfence --version` and `--help` stay fast.
_LAZY = {
    "AcquireReason": ".lease",
    "Admission": ".guard.admission",
    "AuditIndex": ".audit.index",
    "Chain": ".chain",
    "ChainfenceError": ".errors",
    "Election": ".recipes.election",
    "EventKind": ".audit",
    "FencedRequest": ".fenced_requests",
    "FencedStore": ".integrations.fenced_store",
    "Guard": ".guard",
    "Leader": ".recipes.election",
    "Leadership": ".recipes.election",
    "Lease": ".lease",
    "LeaseEvent": ".audit",
    "LeaseInfo": ".lease",
    "LeaseSet": ".recipes.lease_set",
    "LeaseStatus": ".lease",
    "NamespacePolicy": ".namespaces",
    "Registry": ".registry",
    "StuckLease": ".audit.watchdog",
    "StuckReport": ".audit.watchdog",
    "TermEnded": ".recipes.election",
    "Timeouts": ".chain",
}

if TYPE_CHECKING:  # type checkers and IDEs see the names as plain imports
    from .audit import EventKind, LeaseEvent
    from .audit.index import AuditIndex
    from .audit.watchdog import StuckLease, StuckReport
    from .chain import Chain, Timeouts
    from .errors import ChainfenceError
    from .fenced_requests import FencedRequest
    from .guard import Guard
    from .guard.admission import Admission
    from .integrations.fenced_store import FencedStore
    from .lease import AcquireReason, Lease, LeaseInfo, LeaseStatus
    from .namespaces import NamespacePolicy
    from .recipes.election import Election, Leader, Leadership, TermEnded
    from .recipes.lease_set import LeaseSet
    from .registry import Registry


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # next time, a plain attribute
    return value


def __dir__() -> list[str]:
    """The public names, ``__version__`` and the module's own dunders: not what the package imports for
    itself (``sys``, ``Any``, ``TYPE_CHECKING``), its private helpers, nor the submodules loaded since."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__") and name.endswith("__"))})


# Modules that moved keep their old import paths until 0.3, with a DeprecationWarning (chainfence._core.moved).
_moved.install()

# A library never configures logging: only the CLI adds handlers. The package's logger gets its
# NullHandler now if logging is imported, else when it is (chainfence._core.log, docs/explanation/design.md).
if "logging" in sys.modules:
    _log.null_handler()
