"""The asyncio SDK offers every public operation of the sync one, name by name.

For each pair (``Registry``/``AsyncRegistry``, ``Namespace``/``AsyncNamespace``, ``Workset``/``AsyncWorkset``,
``Lease``/``AsyncLease``, ``LeaseSet``/``AsyncLeaseSet``,
``Election``/``AsyncElection``, ``Leadership``/``AsyncLeadership``, ``Watch``/``AsyncWatch``,
``Chain``/``AsyncChain``) the public names of a real object of each (methods, properties and the
instance's fields) are compared: a sync name without its asyncio twin fails here, unless it is listed
below with the reason. Twins take the same parameters, and a twin that asks the chain is awaited.
(``AsyncGuard`` is held to ``Guard`` by ``tests/unit/test_guard_surface.py``.)
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from chainfence import Election, Lease, LeaseSet, Registry
from chainfence.aio import (
    AsyncChain,
    AsyncElection,
    AsyncLeaseSet,
    AsyncRegistry,
)
from chainfence.batching import Batcher
from chainfence.claims import Workset
from chainfence.namespaces import Namespace

#: Sync names whose twin is missing on purpose, and why.
NO_TWIN = {
    ("Chain", "embedded"): "AsyncChain.embedded() is its twin under the same name (a classmethod): see below",
    ("Chain", "clock"): "the wall clock a non-dev chain's now() is floored at: the wrapped Chain's setting",
    ("Chain", "w3"): "the embedded chain's blocking web3.Web3, for what the SDK does not wrap: the wrapped Chain's",
    ("LeaseSet", "registry"): "the set's registry: AsyncLeaseSet's is the asyncio face that made it",
}

#: Names only the asyncio side has, and why.
ASYNC_ONLY = {
    "chain": "the wrapped sync object whose steps run (AsyncChain.chain, AsyncRegistry.chain: the AsyncChain)",
    "registry": "the sync Registry an AsyncRegistry runs (and an AsyncLease's or set's face)",
    "rpc": "the asyncio RPC layer",
    "aclose": "closes the asyncio transport (Chain closes with close())",
    "over": "an asyncio view of a Chain you already have",
    "lease": "the sync Lease an AsyncLease or AsyncLeadership wraps",
    "lease_set": "the sync LeaseSet an AsyncLeaseSet wraps",
    "election": "the sync Election an AsyncElection wraps",
    "leadership": "the sync Leadership an AsyncLeadership wraps",
    "watch": "the sync Watch's state an AsyncWatch wraps",
    "namespace": "the sync Namespace an AsyncNamespace wraps (on AsyncRegistry: the handle itself, a twin)",
    "workset": "the sync Workset an AsyncWorkset wraps (on AsyncRegistry: the handle itself, a twin)",
}


def public_names(obj: object) -> set[str]:
    names = {name for name in dir(type(obj)) if not name.startswith("_")}
    try:
        names |= {name for name in vars(obj) if not name.startswith("_")}
    except TypeError:  # __slots__
        pass
    return names


def missing_twins(pairs: list[tuple[object, object]]) -> list[str]:
    missing = []
    for sync, asynchronous in pairs:
        kind = type(sync).__name__
        for name in sorted(public_names(sync) - public_names(asynchronous)):
            if (kind, name) not in NO_TWIN:
                missing.append(f"{kind}.{name}")
    return missing


@pytest.fixture(scope="module")
def pairs() -> Any:
    """A real object of each class, sync and asyncio, on one embedded chain."""

    async def build() -> list[tuple[object, object]]:
        achain = AsyncChain.embedded()
        chain = achain.chain
        aregistry = await AsyncRegistry.deploy(achain)
        registry = aregistry.registry
        alease = await aregistry.acquire("faces/one", ttl=60)
        aset = await AsyncLeaseSet.acquire(aregistry, ["faces/a", "faces/b"], ttl=60)
        aelection = AsyncElection(aregistry, "faces/leader", ttl=60)
        aleadership = await aelection.campaign()
        awatch = aelection.watch(lambda change: None)
        election = Election(registry, "faces/leader2", ttl=60)
        leadership = election.campaign()
        watch = election.watch(lambda change: None)
        lease = registry.acquire("faces/two", ttl=60)
        lease_set = LeaseSet.acquire(registry, ["faces/c", "faces/d"], ttl=60)
        built = [
            (chain, achain),
            (registry, aregistry),
            (registry.namespace("faces"), aregistry.namespace("faces")),
            (registry.workset("faces/jobs"), aregistry.workset("faces/jobs")),
            (lease, alease),
            (lease_set, aset),
            (election, aelection),
            (leadership, aleadership),
            (watch, awatch),
        ]
        watch.stop()
        await awatch.stop() if inspect.iscoroutinefunction(awatch.stop) else awatch.stop()
        return built

    return asyncio.run(build())


def test_every_public_name_of_the_sync_sdk_has_its_asyncio_twin(pairs):
    assert missing_twins(pairs) == []


def test_the_asyncio_side_adds_only_what_it_says(pairs):
    added = sorted(
        f"{type(asynchronous).__name__}.{name}"
        for sync, asynchronous in pairs
        for name in public_names(asynchronous) - public_names(sync)
        if name not in ASYNC_ONLY
    )
    assert added == []


def test_twins_take_the_same_parameters(pairs):
    different = []
    for sync, asynchronous in pairs:
        for name in sorted(public_names(sync) & public_names(asynchronous)):
            ours = inspect.getattr_static(type(sync), name, None)
            theirs = inspect.getattr_static(type(asynchronous), name, None)
            ours = ours.__func__ if isinstance(ours, (classmethod, staticmethod)) else ours
            theirs = theirs.__func__ if isinstance(theirs, (classmethod, staticmethod)) else theirs
            if not (inspect.isfunction(ours) and inspect.isfunction(theirs)):
                continue
            described, twin = _parameters(ours), _parameters(theirs)
            if described != twin and not _forwards_everything(theirs):
                different.append(f"{type(sync).__name__}.{name}: {described} != {twin}")
    assert different == []


def _parameters(function: Any) -> list[tuple[str, Any, Any]]:
    """The parameters of ``function`` less the object or class it is bound to."""
    parameters = [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]
    return parameters[1:] if parameters and parameters[0][0] in ("self", "cls") else parameters


def _forwards_everything(function: Any) -> bool:
    kinds = {p.kind for p in inspect.signature(function).parameters.values()}
    return inspect.Parameter.VAR_POSITIONAL in kinds and inspect.Parameter.VAR_KEYWORD in kinds


def test_twins_that_ask_the_chain_are_awaited(pairs):
    """A sync method derived from steps (it asks the chain) has an awaited twin."""
    not_awaited = []
    for sync, asynchronous in pairs:
        for name in sorted(public_names(sync) & public_names(asynchronous)):
            ours = inspect.getattr_static(type(sync), name, None)
            ours = ours.__func__ if isinstance(ours, classmethod) else ours
            if getattr(ours, "__chainfence_face__", None) not in ("operation", "constructor"):
                continue
            theirs = inspect.getattr_static(type(asynchronous), name)
            theirs = theirs.__func__ if isinstance(theirs, classmethod) else theirs
            if not inspect.iscoroutinefunction(theirs):
                not_awaited.append(f"{type(asynchronous).__name__}.{name}")
    assert not_awaited == []


def test_control_a_sync_method_without_its_twin_fails(pairs):
    class Extra(Registry):
        def brand_new(self) -> None: ...

    registry = next(sync for sync, _ in pairs if type(sync) is Registry)
    extra = object.__new__(Extra)
    extra.__dict__.update(vars(registry))
    asynchronous = next(a for s, a in pairs if s is registry)
    assert missing_twins([(extra, asynchronous)]) == ["Extra.brand_new"]
    extra.new_field = 1
    assert missing_twins([(extra, asynchronous)]) == ["Extra.brand_new", "Extra.new_field"]


# -- a reader finds each public operation by its name ---------------------------------------------------------

#: The classes whose public operations are written out as a ``def`` of their name (issue 26: ``def acquire``
#: existed nowhere while ``Registry.acquire`` was generated from ``_acquire_steps``).
WRITTEN_OUT = (Registry, Namespace, Workset, LeaseSet, Lease, Batcher)


def operations(cls: type) -> dict[str, Any]:
    """``name -> function`` of every public method of ``cls`` that runs steps over the chain."""
    found = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name)
        function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if getattr(function, "__chainfence_steps__", None) is not None:
            found[name] = function
    return found


def not_written_out(classes: tuple[type, ...]) -> list[str]:
    """The operations that are no ``def`` of their own name in the source (a derived function's code is
    its factory's)."""
    return [
        f"{cls.__name__}.{name}"
        for cls in classes
        for name, function in operations(cls).items()
        if function.__code__.co_name != name or f"def {name}(" not in inspect.getsource(function)
    ]


def test_every_public_operation_is_a_def_of_its_name():
    assert all(operations(cls) for cls in WRITTEN_OUT)
    assert not_written_out(WRITTEN_OUT) == []


def test_each_written_out_operation_takes_its_steps_parameters():
    """The ``def`` and the steps it runs cannot drift apart: the asyncio twin runs the steps with the
    arguments the ``def`` was given."""
    different = []
    for cls in WRITTEN_OUT:
        for name, function in operations(cls).items():
            steps = function.__chainfence_steps__
            if _parameters(function) != _parameters(steps):
                different.append(f"{cls.__name__}.{name}: {_parameters(function)} != {_parameters(steps)}")
    assert different == []


def test_control_an_operation_derived_from_steps_is_not_written_out():
    from chainfence._core.faces import operation

    class Derived(Registry):
        def _extra_steps(self, resource: str) -> Any:
            yield from ()

        extra = operation(_extra_steps)

    assert not_written_out((Derived,)) == ["Derived.extra"]
