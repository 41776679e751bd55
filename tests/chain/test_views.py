"""Views: latest token, current lease, is_current, the reverting check, deployment parameters."""

from __future__ import annotations

import pytest

from chainfence import LeaseStatus, Registry
from chainfence.errors import (
    ContractNotFound,
    InvalidInput,
    LeaseExpired,
    LeaseReleased,
    StaleToken,
    TokenNotCurrent,
    UnknownToken,
)
from tests.support.nodes import deploy_past_the_fork_check

# On hardhat's node and ganache too (tests/conftest.py); a test marked for hardhat alone needs what
# ganache lacks (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat", "ganache")


@pytest.mark.nodes("hardhat")
def test_fresh_registry_has_issued_nothing(chain):
    """A new deployment starts at latest token 0 with no lease on any resource."""
    fresh = Registry.deploy(chain, max_ttl=600)
    assert fresh.latest_token() == 0
    assert fresh.lease_of("anything") is None
    assert fresh.last_lease("anything") is None
    assert fresh.max_ttl == 600


def test_lease_of_shows_the_live_lease(alice, registry):
    lease = alice.acquire("r", ttl=60)
    info = registry.lease_of("r")
    assert (info.resource, info.holder, info.token, info.expires_at, info.status) == (
        "r",
        alice.sender,
        lease.token,
        lease.expires_at,
        LeaseStatus.LIVE,
    )
    assert info.resource_id == lease.resource_id


def test_lease_of_is_none_once_expired_but_last_lease_remembers(alice, chain, registry):
    lease = alice.acquire("r", ttl=10)
    chain.advance_time(10)
    assert registry.lease_of("r") is None
    last = registry.last_lease("r")
    assert (last.status, last.token, last.expires_at) == (LeaseStatus.EXPIRED, lease.token, lease.expires_at)


def test_is_current_only_for_the_live_latest_token(alice, bob, chain, registry):
    first = alice.acquire("r", ttl=10)
    assert registry.check_current("r", first.token)
    assert first.is_current()
    with pytest.raises(TokenNotCurrent):  # a token not issued yet is not current
        registry.check_current("r", first.token + 1)
    with pytest.raises(TokenNotCurrent):  # a token is current only for its own resource
        registry.check_current("other", first.token)
    chain.advance_time(10)
    with pytest.raises(LeaseExpired):
        registry.check_current("r", first.token)
    second = bob.acquire("r", ttl=10)
    with pytest.raises(StaleToken):  # superseded
        registry.check_current("r", first.token)
    second.release()
    with pytest.raises(LeaseReleased):
        registry.check_current("r", second.token)


def test_check_current_returns_the_lease_of_a_current_token(alice, registry):
    lease = alice.acquire("r", ttl=60)
    info = registry.check_current("r", lease.token)
    assert (info.holder, info.token, info.expires_at, info.status) == (
        alice.sender,
        lease.token,
        lease.expires_at,
        LeaseStatus.LIVE,
    )


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("unknown", UnknownToken),
        ("other-resource", UnknownToken),
        ("stale", StaleToken),
        ("expired", LeaseExpired),
        ("released", LeaseReleased),
    ],
)
def test_check_current_reverts_with_the_precise_reason(alice, bob, chain, registry, setup, expected):
    """The reverting check (for other contracts) names why a token is not current."""
    if setup == "other-resource":
        bob.acquire("s", ttl=10)  # token 1 for "s"
    lease = alice.acquire("r", ttl=10)
    token, resource = lease.token, "r"
    if setup == "unknown":
        token = lease.token + 5
    elif setup == "other-resource":
        resource = "s"  # the token was issued, but for "r", and is above the latest of "s"
    elif setup == "stale":
        chain.advance_time(10)
        bob.acquire("r", ttl=10)
    elif setup == "expired":
        chain.advance_time(10)
    elif setup == "released":
        lease.release()
    with pytest.raises(expected) as raised:
        registry.check_current(resource, token)
    assert isinstance(raised.value, TokenNotCurrent)
    assert raised.value.resource == resource


def test_registry_at_finds_the_deployment(chain, registry):
    found = Registry.at(chain, registry.address)
    assert found == registry
    assert found.max_ttl == registry.max_ttl


def test_registry_at_an_address_without_code_is_refused(chain):
    with pytest.raises(ContractNotFound, match="no contract code"):
        Registry.at(chain, chain.accounts[5])


def test_registry_at_other_code_is_refused(chain, registry):
    """Code that is not a FencingRegistry is refused, not trusted."""
    # Init code that returns a one-byte runtime (STOP): CODECOPY(0, 12, 1); RETURN(0, 1).
    init = bytes.fromhex("6001600c60003960016000f3" + "00")
    receipt = chain.transact(chain.accounts[0], None, init)
    with pytest.raises(ContractNotFound, match="not a FencingRegistry"):
        Registry.at(chain, receipt["contractAddress"])


def test_registry_at_accepts_lowercase_and_rejects_a_bad_checksum(chain, registry):
    assert Registry.at(chain, registry.address.lower()) == registry
    bad = registry.address[:2] + registry.address[2:].swapcase()
    if bad.lower() != bad and bad != registry.address:
        with pytest.raises(InvalidInput, match="checksum"):
            Registry.at(chain, bad)


def test_registries_with_the_same_address_on_one_chain_are_equal(registry):
    assert registry.connect(registry.chain.accounts[1]) == registry
    assert hash(registry.connect(registry.chain.accounts[1])) == hash(registry)


def test_a_lower_token_of_another_resource_reads_as_stale(alice, bob, registry):
    """The registry keeps only the latest token per resource, so a lower token issued for
    another resource is indistinguishable from a superseded one: rejected as stale."""
    r_lease = alice.acquire("r", ttl=10)
    bob.acquire("s", ttl=10)
    with pytest.raises(StaleToken):
        registry.check_current("s", r_lease.token)


def test_a_view_at_a_block_before_deployment_is_contract_not_found(chain):
    """Views at a historical block before the registry existed say so, not a decoding error. A registry
    deployed here, so that the block before it is recent: anvil keeps the state of only about the last
    4,000 blocks mined in a session (the session registry's block 0 may have none left:
    tests/faults/test_anvil_history.py)."""
    if chain._dev == "ganache":  # Registry.deploy refuses its Shanghai EVM (tests/support/nodes.py)
        registry = deploy_past_the_fork_check(chain, max_ttl=60)
    else:
        registry = Registry.deploy(chain, max_ttl=60)
    before = registry.deployment_block() - 1
    with pytest.raises(ContractNotFound, match=f"block {before}"):
        registry.latest_token(block=before)
    with pytest.raises(ContractNotFound):
        registry.last_lease("r", block=before)
