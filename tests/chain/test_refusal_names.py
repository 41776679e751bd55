"""A refusal names what refused in the words the caller used (issue 19, item 4): `acquire_many` refused by
a namespace's allowlist names the namespace by its prefix and the resource of the set it met, as
`acquire` does, not by the namespace's hash; on both backends, sync and asyncio."""

from __future__ import annotations

import asyncio

import pytest

from chainfence import LeaseSet
from chainfence._sdk.names import namespace_id
from chainfence.aio import AsyncChain, AsyncLeaseSet, AsyncRegistry
from chainfence.errors import NotAdmitted

# On hardhat's node and ganache too (tests/conftest.py, docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


@pytest.fixture
def governed(chain, registry):
    """ops (account 3) requires admission in its address namespace; bob (account 2) is not admitted."""
    ops = registry.connect(chain.accounts[3])
    prefix = ops.namespace().prefix
    ops.namespace(prefix).set_policy(admission_required=True)
    return prefix, registry.connect(chain.accounts[2])


def _names_the_prefix(refused: NotAdmitted, prefix: str, bob: str) -> None:
    assert refused.namespace == namespace_id(prefix), "the registry's id is kept for programs"
    assert refused.namespace_name == prefix and refused.resource == f"{prefix}/db"
    assert str(refused) == f"{bob} is not admitted in namespace {prefix!r} ('{prefix}/db')"
    assert namespace_id(prefix).hex() not in str(refused)


def test_acquire_many_names_the_refusing_namespace_by_its_prefix(governed, chain):
    prefix, bob = governed
    with pytest.raises(NotAdmitted) as refused:
        LeaseSet.acquire(bob, ["free/one", f"{prefix}/db", f"{prefix}/cache"], ttl=60)
    _names_the_prefix(refused.value, prefix, bob.sender)
    assert bob.last_lease("free/one") is None, "all or nothing"


def test_control_acquire_names_it_so_and_the_registry_alone_gives_a_hash(governed, chain):
    """`acquire` named it (the SDK knew the one name); the registry's revert carries only the hash, which is
    what acquire_many said before: ``namespace 0x<keccak256(prefix)>``."""
    prefix, bob = governed
    with pytest.raises(NotAdmitted) as single:
        bob.acquire(f"{prefix}/db", ttl=60)
    _names_the_prefix(single.value, prefix, bob.sender)
    raw = NotAdmitted(holder=bob.sender, namespace=namespace_id(prefix))
    assert str(raw) == f"{bob.sender} is not admitted in namespace 0x{namespace_id(prefix).hex()}"


def test_async_acquire_many_names_it_too(governed, chain, registry):
    prefix, bob = governed

    async def body() -> NotAdmitted:
        async with AsyncChain.over(chain) as achain:
            abob = (await AsyncRegistry.at(achain, registry.address)).connect(achain.accounts[2])
            with pytest.raises(NotAdmitted) as refused:
                await AsyncLeaseSet.acquire(abob, ["free/two", f"{prefix}/db"], ttl=60)
            return refused.value

    _names_the_prefix(asyncio.run(asyncio.wait_for(body(), 120)), prefix, bob.sender)
