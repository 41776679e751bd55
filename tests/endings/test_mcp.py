"""Part "mcp" (chainfence.integrations.mcp): every way a lease ends, and every refusal, comes back to the agent
as a tool error or answer that names it in the model's words (``ended`` / ``refused``).

The agents are in-memory MCP clients of servers built on the ``alice``/``bob`` registries, so every
scenario runs on both backends. ``carol`` administers the namespaces the admin's ways need. The revert
alone does not tell every end: after a grant or a reacquisition the old token meets ``StaleToken`` both
times, and a done item's token reads like a released one; the server reads the chain to name them.
"""

from __future__ import annotations

import pytest

from chainfence import Registry
from chainfence.endings import End, Refusal
from chainfence.integrations.mcp import build_server
from tests.endings.matrix import covers
from tests.integration.test_mcp import _call, drive


@pytest.fixture
def registry(chain, backend_registry):
    """A registry whose admin ways' namespaces are carol's (account 3), assigned at deployment."""
    namespaces = dict.fromkeys(("mcprev", "mcpgrant", "mcpdelay", "mcpadm", "mcpctl"), chain.accounts[3])
    return Registry.deploy(chain, max_ttl=3_600, namespaces=namespaces)


def _acquire(agent, resource, ttl=60):
    async def go():
        error, lease = await _call(agent, "acquire", {"resource": resource, "ttl": ttl})
        assert not error, lease
        return lease

    return go()


@covers("mcp", End.EXPIRED)
def test_an_expired_lease_is_named_expired_by_renew_verify_and_status(chain, alice):
    async def script(a):
        lease = await _acquire(a, "mcpend/expired", ttl=10)
        chain.advance_time(11)
        error, late = await _call(a, "renew", {"resource": "mcpend/expired", "token": lease["token"], "ttl": 10})
        assert error and (late["error"], late["ended"]) == ("LeaseExpired", "expired")
        _, verdict = await _call(a, "verify", {"resource": "mcpend/expired", "token": lease["token"]})
        assert (verdict["current"], verdict["ended"]) == (False, "expired")
        _, status = await _call(a, "status", {"resources": ["mcpend/expired"]})
        assert status["resources"][0]["ended"] == "expired"

    drive(script, build_server(alice))


@covers("mcp", End.RELEASED)
def test_a_released_lease_is_named_released(alice):
    async def script(a, a_again):
        lease = await _acquire(a, "mcpend/released")
        error, _ = await _call(a_again, "release", {"resource": "mcpend/released", "token": lease["token"]})
        assert not error
        error, late = await _call(a, "renew", {"resource": "mcpend/released", "token": lease["token"], "ttl": 60})
        assert error and (late["error"], late["ended"]) == ("LeaseReleased", "released")
        _, verdict = await _call(a, "verify", {"resource": "mcpend/released", "token": lease["token"]})
        assert verdict["ended"] == "released"

    drive(script, build_server(alice), build_server(alice))


@covers("mcp", End.COMPLETED)
def test_a_completed_item_is_named_completed_not_released(alice):
    async def script(a):
        _, claimed = await _call(a, "claim", {"workset": "mcpend/work", "items": ["i1"], "ttl": 60})
        item = claimed["lease"]
        assert item["resource"] == "mcpend/work\u00bbi1"
        error, _ = await _call(a, "complete", {"resource": item["resource"], "token": item["token"], "result": "ok"})
        assert not error
        error, late = await _call(a, "renew", {"resource": item["resource"], "token": item["token"], "ttl": 60})
        assert error and late["ended"] == "completed", late
        error, again = await _call(a, "complete", {"resource": "i1", "workset": "mcpend/work", "token": item["token"]})
        assert error and again["ended"] == "completed"
        _, verdict = await _call(a, "verify", {"resource": item["resource"], "token": item["token"]})
        assert (verdict["current"], verdict["ended"]) == (False, "completed")
        _, status = await _call(a, "status", {"resources": [item["resource"]]})
        assert (status["resources"][0]["status"], status["resources"][0]["ended"]) == ("done", "completed")

    drive(script, build_server(alice))


@covers("mcp", End.SUPERSEDED)
def test_a_reacquired_lease_is_named_superseded(alice):
    async def script(a):
        first = await _acquire(a, "mcpend/again")
        second = await _acquire(a, "mcpend/again")  # a restarted agent, same key
        assert second["token"] > first["token"]
        error, late = await _call(a, "renew", {"resource": "mcpend/again", "token": first["token"], "ttl": 60})
        assert error and (late["error"], late["ended"]) == ("StaleToken", "superseded")
        _, verdict = await _call(a, "verify", {"resource": "mcpend/again", "token": first["token"]})
        assert verdict["ended"] == "superseded"

    drive(script, build_server(alice))


@covers("mcp", End.REVOKED)
def test_a_revoked_lease_is_named_revoked(alice, carol):

    async def script(a):
        lease = await _acquire(a, "mcprev/db")
        carol.namespace("mcprev").revoke("mcprev/db")
        error, late = await _call(a, "renew", {"resource": "mcprev/db", "token": lease["token"], "ttl": 60})
        assert error and (late["error"], late["ended"]) == ("LeaseRevoked", "revoked")
        _, status = await _call(a, "status", {"resources": ["mcprev/db"]})
        assert status["resources"][0]["ended"] == "revoked"

    drive(script, build_server(alice))


@covers("mcp", End.GRANTED)
def test_a_lease_granted_away_is_named_granted_not_superseded(alice, bob, carol):

    async def script(a):
        lease = await _acquire(a, "mcpgrant/db")
        carol.namespace("mcpgrant").grant("mcpgrant/db", bob.sender, ttl=60)
        error, late = await _call(a, "renew", {"resource": "mcpgrant/db", "token": lease["token"], "ttl": 60})
        assert error and late["error"] == "StaleToken" and late["ended"] == "granted", late
        _, verdict = await _call(a, "verify", {"resource": "mcpgrant/db", "token": lease["token"]})
        assert verdict["ended"] == "granted"

    drive(script, build_server(alice))


def _raw_snapshot(chain):
    """A snapshot taken behind the SDK's back (Chain.revert would forget the tokens seen: a deliberate rollback)."""
    if chain._eth_tester is not None:
        return lambda: chain.rpc.tester("take_snapshot"), lambda s: chain.rpc.tester("revert_to_snapshot", s)
    return lambda: chain.rpc.request("evm_snapshot", []), lambda s: chain.rpc.request("evm_revert", [s])


@covers("mcp", End.ROLLED_BACK)
def test_a_token_the_chain_lost_is_named_rolled_back(chain, alice):
    take, restore = _raw_snapshot(chain)

    async def script(a):
        before = take()
        lease = await _acquire(a, "mcpend/lost")
        restore(before)  # the chain forgets the acquisition (a dev node that lost its last second)
        error, late = await _call(a, "renew", {"resource": "mcpend/lost", "token": lease["token"], "ttl": 60})
        assert error and late["ended"] == "rolled_back", late
        error, verdict = await _call(a, "verify", {"resource": "mcpend/lost", "token": lease["token"]})
        assert error and (verdict["error"], verdict["ended"]) == ("ChainRolledBack", "rolled_back")

    drive(script, build_server(alice))


@covers("mcp", Refusal.HELD)
def test_a_held_resource_is_refused_as_held(alice, bob):
    async def script(a, b):
        await _acquire(b, "mcpend/held")
        error, refused = await _call(a, "acquire", {"resource": "mcpend/held", "ttl": 60})
        assert error and (refused["error"], refused["refused"]) == ("LeaseHeld", "held")
        assert "ended" not in refused

    drive(script, build_server(alice), build_server(bob))


@covers("mcp", Refusal.LOCK_DELAYED)
def test_a_lock_delayed_resource_is_refused_as_lock_delayed(chain, alice, bob, carol):
    carol.namespace("mcpdelay").set_policy(lock_delay=300)

    async def script(a, b):
        await _acquire(b, "mcpdelay/db", ttl=10)
        chain.advance_time(11)  # expired, but the lock-delay runs for 300 s more
        error, refused = await _call(a, "acquire", {"resource": "mcpdelay/db", "ttl": 60})
        assert error and (refused["error"], refused["refused"]) == ("LockDelayed", "lock_delayed")

    drive(script, build_server(alice), build_server(bob))


@covers("mcp", Refusal.NOT_ADMITTED)
def test_a_stranger_is_refused_as_not_admitted_by_acquire_and_claim(alice, carol):
    carol.namespace("mcpadm").set_policy(admission_required=True)

    async def script(a):
        error, refused = await _call(a, "acquire", {"resource": "mcpadm/db", "ttl": 60})
        assert error and (refused["error"], refused["refused"]) == ("NotAdmitted", "not_admitted")
        error, refused = await _call(a, "claim", {"workset": "mcpadm/jobs", "items": ["j1"], "ttl": 60})
        assert error and refused["refused"] == "not_admitted", refused

    drive(script, build_server(alice))


def test_control_the_refusal_alone_names_a_grant_superseded(alice, bob, carol):
    """The naive reading (endings.from_error on the refusal, nothing read from the chain) names a grant
    wrongly: what the server would say without asking the chain what came next."""
    import pytest

    from chainfence import endings
    from chainfence.errors import TokenNotCurrent

    lease = alice.acquire("mcpctl/db", ttl=60)
    carol.namespace("mcpctl").grant("mcpctl/db", bob.sender, ttl=60)
    with pytest.raises(TokenNotCurrent) as granted:
        alice.renew("mcpctl/db", lease.token, 60)
    assert endings.from_error(granted.value) is End.SUPERSEDED  # it was granted away
