"""Every public method that can touch the chain has a row in the node-stopped table.

tests/faults/test_node_stopped.py runs each row of its CALLS table with the
node down and checks the error class. A public method added later without a
row would escape that check: this test fails instead, until the method gets a
row, or a place below among the methods that never touch the chain.
"""

from __future__ import annotations

import functools
import inspect

import pytest

from chainfence import Chain, Election, FencedStore, Guard, Leadership, Lease, LeaseSet, Registry, audit, outcomes
from chainfence._node.rpc import AsyncRpc, Rpc
from chainfence.aio import (
    AsyncChain,
    AsyncElection,
    AsyncGuard,
    AsyncLeadership,
    AsyncLease,
    AsyncLeaseSet,
    AsyncRegistry,
    AsyncWatch,
)
from chainfence.audit import watchdog
from chainfence.audit.index import AuditIndex
from chainfence.batching import AsyncBatcher, Batcher
from chainfence.claims import AsyncWorkset, Workset
from chainfence.deployment import Deployment
from chainfence.integrations import sql
from chainfence.namespaces import AsyncNamespace, Namespace
from chainfence.recipes.election import Watch
from tests.faults.test_node_stopped import CALLS, QUIET

#: The classes whose public methods must all be in the table.
CLASSES = (
    Chain,
    Registry,
    Namespace,
    Workset,
    Lease,
    LeaseSet,
    Guard,
    FencedStore,
    Rpc,
    Election,
    Leadership,
    Watch,
    AsyncChain,
    AsyncRegistry,
    AsyncNamespace,
    AsyncWorkset,
    AsyncLease,
    AsyncLeaseSet,
    AsyncGuard,
    AsyncRpc,
    AsyncElection,
    AsyncLeadership,
    AsyncWatch,
    AuditIndex,
    Batcher,
    AsyncBatcher,
)

#: Public methods that never touch the chain, and why. Each has a QUIET row that calls it with
#: the node down and checks, through the proxy, that it sends nothing.
NEVER_TOUCH_THE_CHAIN = {
    "Chain.embedded": "builds an in-process chain; there is no node to reach",
    "Chain.add_account": "keeps a key in memory",
    "Chain.signer": "looks a key up in memory",
    "Chain.key_of": "looks a key up in memory",
    "Chain.use_relayer": "sets (or clears) the relayer lease operations go through, in memory",
    "Chain.is_dev": "decided at connect",
    "Registry.connect": "a view of the same registry with another sender; shares what was read",
    "Registry.namespace": "a handle on a namespace (the sender's address, spelled as one, by default)",
    "Registry.workset": "a handle on a workset",
    "Namespace.id": "keccak256 of the prefix",
    "Registry.batched": "finds or makes the sender's batcher (group commit); it asks nothing until a call is made",
    "Batcher.connect": "a view of its registry with another sender",
    "Batcher.chain": "its registry's chain",
    "Batcher.queued": "the length of its queue",
    "Batcher.waited": "its figures",
    "AsyncRegistry.batched": "finds or makes the sender's batcher",
    **{
        f"AsyncBatcher.{name}": "a setting, the length of its queue, or its figures"
        for name in ("sender", "max_items", "window", "queued", "batches", "operations", "largest", "waited")
    },
    **{f"LeaseSet.{name}": "a field of the set" for name in ("registry", "tokens", "resources", "expires_at")},
    "LeaseSet.check": "a clock reading and the renewer's verdict",
    "LeaseSet.safe_remaining": "a clock reading",
    "LeaseSet.keeper": "the running keep-alive, if any",
    "Lease.check": "a clock reading and the renewer's verdict",
    "Lease.safe_remaining": "a clock reading",
    "Lease.keeper": "the running keep-alive, if any",
    "Election.leadership": "the leadership this object won, if any",
    "Leadership.check": "a clock reading and the renewer's verdict",
    "Leadership.safe_remaining": "a clock reading",
    "Leadership.lost": "the renewer's verdict",
    "Leadership.expires_at": "the expiry as of the last confirmed renewal",
    "Watch.running": "whether the watch's thread runs",
    "Watch.stop": "stops the watch's thread; raises the error that ended it, if any",
    "Guard.mark": "reads the guard's store",
    "Guard.marks": "reads the guard's store",
    "Guard.staleness": "a clock reading",
    "Guard.follow_status": "the follower's last result",
    "Guard.close": "stops the follower, closes the store",
    "Guard.followed_block": "the follower's progress",
    "AsyncGuard.mark": "reads the guard's store",
    "AsyncGuard.marks": "reads the guard's store",
    "AsyncGuard.staleness": "a clock reading",
    "AsyncGuard.follow_status": "the follower's last result",
    "AsyncGuard.followed_block": "the follower's progress",
    "AsyncGuard.close": "stops the follower, closes the store",
    **{
        f"AsyncGuard.{name}": "a setting of the guard"
        for name in (
            "registry",
            "mode",
            "path",
            "confirmations",
            "exclusive",
            "follow_interval",
            "max_lag",
            "audience",
            "max_request_age",
            "erc1271_gas",
            "admission",
            "headers",
            "proof_provider",
            "completeness",
            "rejection_log",
        )
    },
    "Rpc.tester": "eth-tester's dev controls, in-process; a node's chain refuses them without a request",
    "AsyncChain.embedded": "builds an in-process chain; there is no node to reach",
    "AsyncChain.over": "wraps a chain; its provider asks nothing until used",
    "AsyncChain.aclose": "closes the HTTP session",
    "AsyncChain.accounts": "the wrapped chain's keys",
    "AsyncChain.chain_id": "read at connect",
    "AsyncChain.confirmations": "a setting",
    "AsyncChain.relayer": "a setting of the wrapped chain",
    "AsyncChain.use_relayer": "sets (or clears) the wrapped chain's relayer, in memory",
    "AsyncRegistry.connect": "a view of the same registry with another sender",
    "AsyncRegistry.address": "a setting",
    "AsyncRegistry.sender": "a setting",
    "AsyncRegistry.max_ttl": "read by at() and deploy(), never on access",
    "AsyncRegistry.namespace": "a handle on a namespace (the sender's address, spelled as one, by default)",
    "AsyncRegistry.workset": "a handle on a workset",
    "AsyncNamespace.prefix": "the handle's prefix",
    "AsyncNamespace.id": "keccak256 of the prefix",
    "AsyncWorkset.name": "the handle's name",
    "AsyncRegistry.deployed_block": "known when this object deployed the registry",
    **{
        f"AsyncElection.{name}": "a setting, or the leadership this object won"
        for name in ("name", "ttl", "confirmations", "leadership")
    },
    "AsyncLeadership.check": "a clock reading and the renewer's verdict",
    **{
        f"AsyncLeadership.{name}": "a field of the term, a clock reading, or the renewer's verdict"
        for name in (
            "safe_remaining",
            "lost",
            "expires_at",
            "lease",
            "name",
            "token",
            "holder",
            "since",
            "block_number",
            "resigned",
        )
    },
    "AsyncWatch.running": "whether the watch's task runs",
    "AsyncWatch.stop": "stops the watch's task; raises the error that ended it, if any",
    "AsyncLease.check": "a clock reading and the renewer's verdict",
    "AsyncLease.safe_remaining": "a clock reading",
    "AsyncLease.keeper": "the running keep-alive, if any",
    **{
        f"AsyncLease.{name}": "a field of the lease"
        for name in (
            "resource",
            "resource_id",
            "token",
            "holder",
            "expires_at",
            "ttl",
            "previous_token",
            "reason",
            "tx_hash",
            "block_number",
            "released",
            "completed",
            "workset",
            "item",
        )
    },
    "AsyncLeaseSet.check": "a clock reading and the renewer's verdict",
    "AsyncLeaseSet.safe_remaining": "a clock reading",
    "AsyncLeaseSet.keeper": "the running keep-alive, if any",
    **{
        f"AsyncLeaseSet.{name}": "a field of the set"
        for name in ("leases", "tokens", "resources", "expires_at", "released")
    },
    "AsyncRpc.twin_of": "builds a provider that asks nothing until used",
    "AsyncRpc.close": "closes the HTTP session",
    "AsyncRpc.tester": "eth-tester's dev controls, in-process; a node's chain refuses them without a request",
    "Rpc.close": "closes the transport's idle connections",
    **{
        f"AuditIndex.{name}": "reads (or closes) the index file"
        for name in (
            "history",
            "history_by_id",
            "lease",
            "leases_of",
            "holder_at",
            "current",
            "takeovers",
            "completions",
            "resources",
            "events",
            "pages",
            "every",
            "label",
            "close",
            "timeline_leases",
        )
    },
}

#: Where a row's owner lives: a class, or a module for module-level functions.
OWNERS = {cls.__name__: cls for cls in CLASSES} | {
    "Deployment": Deployment,
    "audit": audit,
    "outcomes": outcomes,
    "sql": sql,
    "watchdog": watchdog,
}


def public_methods(cls: type) -> set[str]:
    """``Class.name`` of every public method, classmethod, staticmethod and property of ``cls``."""
    kinds = (
        staticmethod,
        classmethod,
        property,
        functools.cached_property,
    )
    names = set()
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name)
        if inspect.isfunction(member) or isinstance(member, kinds):
            names.add(f"{cls.__name__}.{name}")
    return names


def rows() -> set[str]:
    return {row.method for row in (*CALLS, *QUIET)}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_public_method_has_a_row_or_never_touches_the_chain(cls):
    missing = public_methods(cls) - rows() - set(NEVER_TOUCH_THE_CHAIN)
    assert not missing, f"add a row to CALLS in tests/faults/test_node_stopped.py for {sorted(missing)}"


def test_methods_that_never_touch_the_chain_have_no_failing_row_and_a_quiet_one():
    called = {row.method for row in CALLS}
    quiet = {row.method for row in QUIET}
    assert not set(NEVER_TOUCH_THE_CHAIN) & called, "a method in CALLS does touch the chain"
    assert set(NEVER_TOUCH_THE_CHAIN) <= quiet, "each must be shown to answer with the node down"


def test_every_row_names_a_real_public_call():
    """No stale rows: a renamed or removed method must leave the table too."""
    for row in (*CALLS, *QUIET):
        owner, _, method = row.method.partition(".")
        assert owner in OWNERS, row.name
        if method:  # "Guard[...]": construction
            assert not method.startswith("_") and hasattr(OWNERS[owner], method), row.name
    assert len({row.name for row in (*CALLS, *QUIET)}) == len(CALLS) + len(QUIET), "row names must be unique"


def test_quiet_rows_say_why():
    assert all(row.why for row in QUIET)
    assert all(NEVER_TOUCH_THE_CHAIN.values())


def test_this_test_can_fail():
    """A class with an uncovered public method is reported."""

    class Extra(Chain):
        def brand_new(self) -> None: ...

    assert "Extra.brand_new" in public_methods(Extra) - rows()
