"""``Registry.ending``: how a token's lease ended, read from the chain in the words of chainfence.endings.

A grant's acquisition says ``granted`` whatever came before it. Only a grant that revoked the lease in
its own transaction granted the lease away; a grant after a revoke, a release or an expiry found the
lease already ended, and the lease's own end is named. The control reads the successor's reason alone,
as the keep-alive, the MCP server and the tooz driver did, and names all four ``granted``.
"""

from __future__ import annotations

import pytest

from chainfence import Registry, audit, endings
from chainfence.endings import End
from chainfence.lease import AcquireReason

# On hardhat's node too; not on ganache, whose EVM lacks the MCOPY these paths use (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

NAME = "ops/db"


@pytest.fixture
def registry(chain, backend_registry):
    """Namespace ops assigned to carol (account 3) at deployment."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={"ops": chain.accounts[3]})


def _end_then_grant(chain, alice, bob, carol, how: str):
    lease = alice.acquire(NAME, ttl=60)
    if how == "revoked":
        carol.namespace("ops").revoke(NAME)
    elif how == "released":
        lease.release()
    elif how == "expired":
        chain.advance_time(61)
    if how != "live":
        assert alice.ending(NAME, lease.token) is End(how), "ended before the grant"
    granted = carol.namespace("ops").grant(NAME, bob.sender, ttl=60)
    assert granted.reason is AcquireReason.GRANTED and granted.previous_token == lease.token
    return lease


@pytest.mark.parametrize(
    ("how", "end"),
    [("live", End.GRANTED), ("revoked", End.REVOKED), ("released", End.RELEASED), ("expired", End.EXPIRED)],
)
def test_a_grant_names_granted_only_when_it_took_a_live_lease(chain, alice, bob, carol, how, end):
    lease = _end_then_grant(chain, alice, bob, carol, how)
    assert alice.ending(NAME, lease.token) is end
    assert alice.ending(NAME, lease.token + 1) is None, "the grantee's lease is live"


@pytest.mark.parametrize("how", ["revoked", "released", "expired"])
def test_control_the_successor_s_reason_alone_calls_every_grant_granted(chain, alice, bob, carol, how):
    lease = _end_then_grant(chain, alice, bob, carol, how)
    (successor,) = [e for e in audit.history(alice, NAME) if e.previous_token == lease.token]
    assert endings.of_successor(successor.reason) is End.GRANTED, "the naive reading"


def test_ending_of_a_token_never_issued_is_none_and_bad_input_is_typed(alice):
    from chainfence.errors import InvalidInput, InvalidResourceName

    assert alice.ending(NAME, 1) is None
    with pytest.raises(InvalidInput):
        alice.ending(NAME, 0)
    with pytest.raises(InvalidResourceName):
        alice.ending("", 1)
