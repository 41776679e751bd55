"""The 0.2 surface of a registry, counted, so that it cannot regrow unnoticed (issue 26, item 2).

``Registry`` had 43 public methods in 0.1, assembled from four mixins. In 0.2 it keeps construction,
``connect``, the lease operations, the views and two handles; namespaces and worksets are handles
(``registry.namespace(prefix)``, ``registry.workset(name)``), sets a recipe (``LeaseSet.acquire``),
history and the watchdog the audit's. A name added to any of these classes fails here until it is
added below, on purpose; the names 0.2 retired are served until 0.3 (``tests/chain/test_retired_names.py``)
but are no attributes: ``dir()``, ``help()`` and the reference do not show them.
"""

from __future__ import annotations

import inspect

import pytest

from chainfence import Registry
from chainfence._sdk.retired import ASYNC_REGISTRY, REGISTRY
from chainfence.aio import AsyncRegistry
from chainfence.claims import AsyncWorkset, Workset
from chainfence.namespaces import AsyncNamespace, Namespace

#: ``Registry``'s public names (its class's; an instance adds its fields ``chain``, ``address``,
#: ``sender``, ``deployed_block``).
REGISTRY_NAMES = {
    # construction
    "deploy",
    "at",
    "from_deployment",
    "connect",
    "batched",
    # handles
    "namespace",
    "workset",
    # lease operations
    "acquire",
    "renew",
    "release",
    "complete",
    # a transaction read back
    "lease_from_tx",
    "batch_items",
    "batch_item",
    # views
    "latest_token",
    "lease_of",
    "last_lease",
    "check_current",
    "ending",
    "identity",
    "deployment_block",
    "eip712_domain",
    "max_ttl",
}
#: ``AsyncRegistry``'s: the same, and the fields it mirrors as properties (an instance adds ``chain``, the
#: ``AsyncChain``, and ``registry``, the ``Registry`` it runs).
ASYNC_REGISTRY_NAMES = REGISTRY_NAMES | {"address", "sender", "deployed_block"}
NAMESPACE_NAMES = {
    "id",
    "policy",
    "is_admitted",
    "set_policy",
    "admit",
    "transfer_admin",
    "accept_admin",
    "revoke",
    "grant",
}
WORKSET_NAMES = {"claim", "last_lease", "renew", "release", "complete", "revoke", "grant"}
#: The names 0.2 retired from both registries (served until 0.3, never attributes).
RETIRED = {
    "namespace_of",
    "namespace_policy",
    "is_admitted",
    "transfer_namespace_admin",
    "accept_namespace_admin",
    "set_policy",
    "admit",
    "revoke",
    "grant",
    "claim",
    "item_lease",
    "renew_item",
    "release_item",
    "complete_item",
    "revoke_item",
    "grant_item",
    "acquire_many",
    "history",
    "stuck",
    "lease",
    "is_current",
    "last_lease_by_id",
}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


@pytest.mark.parametrize(
    ("cls", "names"),
    [
        (Registry, REGISTRY_NAMES),
        (AsyncRegistry, ASYNC_REGISTRY_NAMES),
        (Namespace, NAMESPACE_NAMES),
        (AsyncNamespace, NAMESPACE_NAMES | {"prefix"}),
        (Workset, WORKSET_NAMES),
        (AsyncWorkset, WORKSET_NAMES | {"name"}),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else "",
)
def test_the_public_surface_is_exactly_this(cls, names):
    assert public(cls) == names


def test_the_registry_has_about_twenty_names_and_lost_the_43_of_0_1():
    assert len(REGISTRY_NAMES) == 23 and len(ASYNC_REGISTRY_NAMES) == 26
    assert not RETIRED & public(Registry) and not RETIRED & public(AsyncRegistry)


def test_the_retired_names_are_the_tables_and_no_attribute_shows_them():
    assert set(REGISTRY) == set(ASYNC_REGISTRY) == RETIRED
    for name in RETIRED:
        assert inspect.getattr_static(Registry, name, None) is None
        assert inspect.getattr_static(AsyncRegistry, name, None) is None


def test_control_a_method_added_is_counted():
    class Grown(Registry):
        def brand_new(self) -> None: ...

    assert public(Grown) - REGISTRY_NAMES == {"brand_new"}
