"""Namespaces, policies, fenced revoke and grant, lock-delay and lease sets, attacked by strangers and
hostile admins on every backend (eth-tester and anvil).

A namespace has an admin by construction only (issue 17): the deployer's assignment, or an address
namespace ("0x" + the 40 lowercase hex digits of an address), which is its address's from the start.
Most tests run once for each kind (the ``gov`` fixture).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak

from chainfence import AcquireReason, EventKind, LeaseSet, LeaseStatus, Registry, audit
from chainfence._node import artifacts as _artifacts
from chainfence._sdk.names import namespace_id
from chainfence.errors import (
    DuplicateResource,
    InvalidNamespace,
    InvalidPolicy,
    InvalidResourceName,
    InvalidTtl,
    LeaseHeld,
    LeaseRevoked,
    LockDelayed,
    NotAdmitted,
    NotLive,
    NotNamespaceAdmin,
    NotPendingAdmin,
    StaleToken,
    TransactionFailed,
    UnknownRevert,
)
from chainfence.namespaces import address_namespace


@dataclass
class Gov:
    """A registry where ``alice`` administers namespace ``prefix``; ``bob``, ``carol`` are strangers to it."""

    kind: str
    prefix: str
    alice: Registry
    bob: Registry
    carol: Registry

    def name(self, rest: str) -> str:
        return f"{self.prefix}/{rest}"


@pytest.fixture(params=["assigned", "address"])
def gov(request, chain, registry) -> Gov:
    """'assigned': the deployer gave 'prod' to alice (account 1) in the constructor; 'address': alice's
    own address namespace in the shared registry, which nobody assigned and she never claimed."""
    accounts = chain.accounts
    if request.param == "assigned":
        base = Registry.deploy(chain, max_ttl=3_600, namespaces={"prod": accounts[1]})
        prefix = "prod"
    else:
        base = registry
        prefix = address_namespace(accounts[1])
    alice, bob, carol = (base.connect(accounts[i]) for i in (1, 2, 3))
    return Gov(request.param, prefix, alice, bob, carol)


def test_a_namespace_nobody_administers_stays_open_exactly_as_before(chain, alice, bob):
    """No admin: anyone acquires, any ttl up to the registry's, no lock-delay, nobody may revoke or grant."""
    lease = alice.acquire("open/db", ttl=3_600)
    chain.advance_time(3_601)
    assert bob.acquire("open/db", ttl=10).reason is AcquireReason.EXPIRED, "no lock-delay"
    assert alice.namespace("open").policy().admin is None
    for attempt in (
        lambda: alice.namespace("open").revoke("open/db"),
        lambda: alice.namespace("open").grant("open/db", alice.sender, 10),
    ):
        with pytest.raises(NotNamespaceAdmin):
            attempt()
    assert lease.token < bob.last_lease("open/db").token


def test_a_name_without_a_slash_can_never_be_administered(chain, alice, bob):
    with pytest.raises(InvalidNamespace):
        Registry.deploy(chain, max_ttl=600, namespaces={"a/b": alice.sender})
    bob.acquire("plain", ttl=60)
    with pytest.raises(InvalidResourceName, match="not in namespace"):
        alice.namespace("plain").revoke("plain")  # in no namespace: no namespace's admin reaches it (nothing sent)
    with pytest.raises(NotNamespaceAdmin):  # and the registry refuses it to anyone who asks
        chain.transact(alice.sender, alice.address, alice._encode("revoke", ["plain"]))


@pytest.mark.parametrize("length", [1, 2, 31, 32, 33, 42, 63, 64, 95, 127])
def test_the_contract_finds_the_first_slash_wherever_it_falls(chain, alice, bob, length):
    """The contract's namespace of a name is its bytes before the first `/`, wherever that falls in the
    name's 32-byte words (the scan counts bytes with a multiplication, no loop over them): an admitted
    prefix of every length refuses a stranger, and near misses around it (a slash one byte late or one
    byte early, a byte that differs from `/` only in its top bit, no slash) stay open. 42 bytes not
    starting "0x" is an ordinary prefix (the filter's), not an address namespace."""
    prefix = "p" * (length - 1) + "q"
    governed = Registry.deploy(chain, max_ttl=600, namespaces={prefix: alice.sender})
    admin, stranger = governed.connect(alice.sender), governed.connect(bob.sender)
    admin.namespace(prefix).set_policy(admission_required=True)
    administered = (f"{prefix}/", f"{prefix}/x/y", f"{prefix}//", (f"{prefix}/" + "z" * 127)[:128])
    for name in (n for n in administered if len(n.encode()) <= 128):
        with pytest.raises(NotAdmitted):
            stranger.acquire(name, ttl=60)
    near_misses = (f"{prefix}x/y", f"{prefix}\u00af/", f"{prefix[:-1]}/q", prefix, f"{prefix}z")
    for name in (n for n in near_misses if len(n.encode()) <= 128):
        assert stranger.acquire(name, ttl=60).token > 0, name


# ----------------------------------------------------------------------
# Nobody gains power over what others already hold (issue 17)
# ----------------------------------------------------------------------


def test_nobody_can_claim_a_namespace_others_already_use(chain, alice, bob, carol):
    """The review's attack: carol claims 'reports', which bob already uses, then revokes bob's live lease
    and locks him out. There is no claim any more: the registry has no such function (its old selector
    reverts, mined), and every admin act of carol's on 'reports' is refused; bob's lease and the
    namespace's openness are untouched."""
    lease = bob.acquire("reports/daily", ttl=600)
    assert "claimNamespace" not in _artifacts.functions("FencingRegistry")
    old_claim = keccak(b"claimNamespace(string)")[:4] + abi_encode(["string"], ["reports"])
    with pytest.raises((TransactionFailed, UnknownRevert)):  # no function: reverted without data
        chain.transact(carol.sender, carol.address, old_claim, gas=200_000)
    _every_admin_act_is_refused(chain, carol, "reports", "reports/daily", admin=None)
    assert lease.is_current() and bob.namespace("reports").policy().admin is None
    chain.advance_time(601)
    after = carol.acquire("reports/daily", ttl=60)  # no lock-delay, no allowlist: still open to all
    assert after.reason is AcquireReason.EXPIRED


def _every_admin_act_is_refused(chain, stranger: Registry, prefix: str, name: str, *, admin: str | None) -> None:
    """Each admin function, through the SDK (refused by the preflight: nothing mined) and sent past the
    preflight (mined, reverted): refused, state unchanged."""
    attempts = {
        "setNamespacePolicy": lambda: stranger.namespace(prefix).set_policy(
            max_ttl=1, lock_delay=600, admission_required=True
        ),
        "setAdmission": lambda: stranger.namespace(prefix).admit([stranger.sender]),
        "transferNamespaceAdmin": lambda: stranger.namespace(prefix).transfer_admin(stranger.sender),
        "revoke": lambda: stranger.namespace(prefix).revoke(name),
        "grant": lambda: stranger.namespace(prefix).grant(name, stranger.sender, 60),
        "revokeItem": lambda: stranger.workset(name).revoke("item"),
        "grantItem": lambda: stranger.workset(name).grant("item", stranger.sender, 60),
    }
    block = chain.block_number()
    for function, attempt in attempts.items():
        with pytest.raises(NotNamespaceAdmin) as refused:
            attempt()
        assert refused.value.account == stranger.sender, function
        assert refused.value.admin == admin or (admin is None and int(refused.value.admin, 16) == 0), function
    with pytest.raises(NotPendingAdmin):
        stranger.namespace(prefix).accept_admin()
    assert chain.block_number() == block, "refused by the preflight: nothing mined"
    ns = namespace_id(prefix)
    raw = {
        "setNamespacePolicy": [ns, 1, 600, True, 7],
        "setAdmission": [ns, [stranger.sender], True],
        "transferNamespaceAdmin": [ns, stranger.sender],
        "revoke": [name],
        "grant": [name, stranger.sender, 60],
        "revokeItem": [name, "item"],
        "grantItem": [name, "item", stranger.sender, 60],
        "acceptNamespaceAdmin": [ns],
    }
    for function, args in raw.items():
        with pytest.raises((NotNamespaceAdmin, NotPendingAdmin)):
            chain.transact(stranger.sender, stranger.address, stranger._encode(function, args), gas=300_000)
    policy = stranger.namespace(prefix).policy()
    assert (policy.max_ttl, policy.lock_delay, policy.admission_required, policy.pending_admin) == (0, 0, False, None)
    assert not stranger.chain._run(stranger._view_steps("isListed", [ns, stranger.sender], ["bool"], block="latest"))[0]


def test_a_stranger_has_no_power_over_an_address_namespace_or_an_assigned_one(chain, gov):
    """bob holds a lease in alice's namespace: carol, a stranger to it, cannot act there by any
    function; alice can (the control: the path works for the one who has the power)."""
    lease = gov.bob.acquire(gov.name("db"), ttl=600)
    _every_admin_act_is_refused(chain, gov.carol, gov.prefix, gov.name("db"), admin=gov.alice.sender)
    assert lease.is_current()
    assert gov.alice.namespace(gov.prefix).revoke(gov.name("db")) == lease.token  # control


def test_a_strangers_own_namespace_gives_it_nothing_outside(chain, alice, bob, carol):
    """carol governs her own address namespace with every policy on: bob's lease in 'reports' and his
    acquisitions there are untouched (no cap, no lock-delay, no allowlist reach across)."""
    mine = carol.namespace().prefix
    carol.namespace(mine).set_policy(max_ttl=5, lock_delay=600, admission_required=True)
    lease = bob.acquire("reports/daily", ttl=30)
    with pytest.raises(NotAdmitted):
        bob.acquire(f"{mine}/x", ttl=5)
    chain.advance_time(31)
    assert alice.acquire("reports/daily", ttl=600).reason is AcquireReason.EXPIRED
    assert not lease.is_current()


def test_an_address_owns_its_namespace_without_a_claim_or_storage(chain, registry, alice, bob):
    prefix = alice.namespace().prefix
    assert prefix == "0x" + bytes.fromhex(alice.sender[2:]).hex() and len(prefix) == 42
    assert address_namespace(alice.sender) == prefix
    ns = namespace_id(prefix)
    slot = keccak(abi_encode(["bytes32", "uint256"], [ns, 2]))  # _namespaces (slot 2) of it
    assert chain.w3.eth.get_storage_at(alice.address, slot) == bytes(32), "no storage until a policy"
    policy = bob.namespace(prefix).policy()
    assert (policy.admin, policy.max_ttl, policy.lock_delay, policy.admission_required) == (alice.sender, 0, 0, False)
    lease = bob.acquire(f"{prefix}/db", ttl=600)  # anyone may use it; alice governs it
    assert alice.namespace(prefix).revoke(f"{prefix}/db") == lease.token
    with pytest.raises(NotNamespaceAdmin) as refused:
        bob.namespace(prefix).revoke(f"{prefix}/db")
    assert refused.value.admin == alice.sender, "the SDK names the address as the admin"


def test_a_mis_cased_address_prefix_is_refused_by_the_sdk_because_it_belongs_to_nobody(chain, alice, bob):
    """'0x5AAE...' (checksummed) is not alice's namespace: on-chain it has no admin, ever. The SDK refuses
    to publish such a name (nothing sent) so nobody believes an open name is owned; the control sends one
    past the SDK and shows alice cannot govern it."""
    checksummed = alice.sender  # EIP-55: mixed case
    assert checksummed != checksummed.lower()
    for prefix in (checksummed, "0X" + checksummed[2:].upper()):
        name = f"{prefix}/db"
        with pytest.raises(InvalidResourceName, match="lowercase"):
            bob.acquire(name, ttl=60)
        with pytest.raises(InvalidNamespace, match="lowercase"):
            alice.namespace(prefix).set_policy(lock_delay=5)
    assert bob.last_lease(f"{alice.namespace().prefix}/db") is None
    name = f"{checksummed}/db"
    chain.transact(bob.sender, bob.address, bob._encode("acquire", [name, 60]))
    with pytest.raises(NotNamespaceAdmin):
        chain.transact(alice.sender, alice.address, alice._encode("revoke", [name]), gas=300_000)


def test_the_deployer_cannot_assign_an_address_shaped_prefix(chain, alice):
    prefix = alice.namespace().prefix
    for shaped in (prefix, "0x" + "g" * 40):
        with pytest.raises(InvalidNamespace, match="address"):
            Registry.deploy(chain, max_ttl=600, namespaces={shaped: alice.sender})
    # Past the SDK: the constructor itself refuses (the deployment reverts).
    bytecode = bytes.fromhex(_artifacts.load()["bytecode"][2:])
    data = bytecode + abi_encode(["uint256", "string[]", "address[]"], [600, [prefix], [alice.sender]])
    with pytest.raises(InvalidNamespace):
        chain.transact(alice.sender, None, data, gas=4_000_000)


def test_a_namespace_assigned_twice_is_refused_at_deployment(chain, alice, bob):
    from chainfence.errors import NamespaceTaken

    bytecode = bytes.fromhex(_artifacts.load()["bytecode"][2:])
    data = bytecode + abi_encode(
        ["uint256", "string[]", "address[]"], [600, ["prod", "prod"], [alice.sender, bob.sender]]
    )
    with pytest.raises(NamespaceTaken):
        chain.transact(alice.sender, None, data, gas=4_000_000)


# ----------------------------------------------------------------------
# Hand-over
# ----------------------------------------------------------------------


def test_the_hand_over_takes_two_steps_and_passes_the_role_as_it_was(chain, gov):
    """Policy and allowlist unchanged; the old admin (an address namespace's own address included) loses
    every power; only the offered account may accept."""
    alice, bob, carol = gov.alice, gov.bob, gov.carol
    alice.namespace(gov.prefix).set_policy(max_ttl=300, lock_delay=20, admission_required=True)
    alice.namespace(gov.prefix).admit([carol.sender])
    alice.namespace(gov.prefix).transfer_admin(bob.sender)
    assert alice.namespace(gov.prefix).policy().pending_admin == bob.sender
    assert alice.namespace(gov.prefix).policy().admin == alice.sender, "still alice's until bob accepts"
    with pytest.raises(NotPendingAdmin):
        carol.namespace(gov.prefix).accept_admin()
    bob.namespace(gov.prefix).accept_admin()
    policy = bob.namespace(gov.prefix).policy()
    assert (policy.admin, policy.pending_admin) == (bob.sender, None)
    assert (policy.max_ttl, policy.lock_delay, policy.admission_required) == (300, 20, True), "as it was"
    assert bob.namespace(gov.prefix).is_admitted(carol.sender) and not bob.namespace(gov.prefix).is_admitted(
        alice.sender
    )
    lease = carol.acquire(gov.name("db"), ttl=60)
    for attempt in (
        lambda: alice.namespace(gov.prefix).set_policy(lock_delay=5),
        lambda: alice.namespace(gov.prefix).admit([alice.sender]),
        lambda: alice.namespace(gov.prefix).revoke(gov.name("db")),
        lambda: alice.namespace(gov.prefix).grant(gov.name("db"), alice.sender, 60),
        lambda: alice.namespace(gov.prefix).transfer_admin(alice.sender),
    ):
        with pytest.raises(NotNamespaceAdmin) as refused:
            attempt()
        assert refused.value.admin == bob.sender
    with pytest.raises(NotPendingAdmin):
        alice.namespace(gov.prefix).accept_admin()
    assert bob.namespace(gov.prefix).revoke(gov.name("db")) == lease.token
    moved = [e for e in _namespace_events(bob, gov.prefix) if e.kind.name == "ADMIN_TRANSFERRED"]
    assert (moved[-1].admin, moved[-1].new_admin) == (alice.sender, bob.sender), "the event names the old admin"


def _namespace_events(registry: Registry, prefix: str) -> list:
    from chainfence._node import events as _events

    logs = registry.chain.rpc.logs(
        {
            "address": registry.address,
            "fromBlock": 0,
            "toBlock": "latest",
            "topics": [None, "0x" + namespace_id(prefix).hex()],
        }
    )
    return [event for event in (_events.decode(log) for log in logs) if event is not None]


def test_an_address_namespace_handed_back_returns_to_its_address(chain, registry, alice, bob):
    prefix = alice.namespace().prefix
    alice.namespace(prefix).transfer_admin(bob.sender)
    bob.namespace(prefix).accept_admin()
    bob.namespace(prefix).transfer_admin(alice.sender)
    alice.namespace(prefix).accept_admin()
    alice.namespace(prefix).set_policy(lock_delay=5)
    with pytest.raises(NotNamespaceAdmin):
        bob.namespace(prefix).set_policy(lock_delay=6)


# ----------------------------------------------------------------------
# Policies
# ----------------------------------------------------------------------


def test_set_policy_changes_only_what_it_names(chain, gov):
    """The review's defect: set_policy("prod", lock_delay=60) turned admission off and cleared max-ttl."""
    alice = gov.alice
    alice.namespace(gov.prefix).set_policy(max_ttl=300, admission_required=True)
    alice.namespace(gov.prefix).set_policy(lock_delay=60)
    policy = alice.namespace(gov.prefix).policy()
    assert (policy.max_ttl, policy.lock_delay, policy.admission_required) == (300, 60, True)
    alice.namespace(gov.prefix).set_policy(admission_required=False)
    alice.namespace(gov.prefix).set_policy(max_ttl=0)
    policy = alice.namespace(gov.prefix).policy()
    assert (policy.max_ttl, policy.lock_delay, policy.admission_required) == (0, 60, False)
    with pytest.raises(InvalidPolicy):
        alice.namespace(gov.prefix).set_policy()  # names nothing: nothing sent
    # Control: the whole-policy write the old set_policy sent (every field, the unnamed ones 0).
    alice.namespace(gov.prefix).set_policy(max_ttl=300, admission_required=True)
    whole = alice._encode("setNamespacePolicy", [namespace_id(gov.prefix), 0, 60, False, 7])
    chain.transact(alice.sender, alice.address, whole)
    policy = alice.namespace(gov.prefix).policy()
    assert (policy.max_ttl, policy.admission_required) == (0, False), "the naive write resets the others"


def test_set_policy_returns_the_policy_its_transaction_left(chain, gov):
    """What `chainfence namespace policy set` prints (it called the private _set_policy for it): the
    fields not named are the ones already set, read at the transaction's block."""
    alice = gov.alice
    first = alice.namespace(gov.prefix).set_policy(max_ttl=300, admission_required=True)
    assert first == alice.namespace(gov.prefix).policy()
    assert (first.name, first.admin, first.max_ttl, first.admission_required) == (gov.prefix, alice.sender, 300, True)
    second = alice.namespace(gov.prefix).set_policy(lock_delay=60)
    assert second == alice.namespace(gov.prefix).policy()
    assert (second.max_ttl, second.lock_delay, second.admission_required) == (300, 60, True)


def test_two_policy_changes_of_different_fields_never_undo_each_other(chain, gov):
    """Why a mask in the contract rather than a read-and-merge in the SDK: two writers (two operator
    scripts sharing the admin key) each change one field; a merge computed from a policy read before
    the other's change lands writes the old value back (the control). The mask merges on-chain."""
    alice = gov.alice
    # Control: read, then the other change lands, then write the merged policy back.
    read = alice.namespace(gov.prefix).policy()
    alice.namespace(gov.prefix).set_policy(admission_required=True)  # the other writer
    merged = alice._encode(
        "setNamespacePolicy", [namespace_id(gov.prefix), read.max_ttl, 30, read.admission_required, 7]
    )
    chain.transact(alice.sender, alice.address, merged)
    assert alice.namespace(gov.prefix).policy().admission_required is False, "the merge undid the other change"
    # The mask: each names its own field, in whichever order they land.
    alice.namespace(gov.prefix).set_policy(admission_required=True)
    alice.namespace(gov.prefix).set_policy(lock_delay=45)
    policy = alice.namespace(gov.prefix).policy()
    assert (policy.lock_delay, policy.admission_required) == (45, True)


def test_the_contract_refuses_a_policy_that_names_no_field_or_an_unknown_one(chain, gov):
    for fields in (0, 8, 15):
        data = gov.alice._encode("setNamespacePolicy", [namespace_id(gov.prefix), 0, 0, False, fields])
        with pytest.raises(InvalidPolicy):
            chain.transact(gov.alice.sender, gov.alice.address, data, gas=200_000)


def test_admission_refuses_strangers_and_a_policy_never_evicts_a_live_holder(chain, gov):
    alice, bob, carol = gov.alice, gov.bob, gov.carol
    lease = carol.acquire(gov.name("db"), ttl=60)
    alice.namespace(gov.prefix).set_policy(admission_required=True)
    assert lease.is_current(), "a policy change does not evict"
    alice.namespace(gov.prefix).admit([bob.sender])
    assert bob.namespace(gov.prefix).is_admitted(bob.sender) and not bob.namespace(gov.prefix).is_admitted(carol.sender)
    with pytest.raises(NotAdmitted) as refused:
        carol.acquire(gov.name("other"), ttl=60)
    assert refused.value.holder == carol.sender and refused.value.namespace == namespace_id(gov.prefix)
    with pytest.raises(NotAdmitted):
        LeaseSet.acquire(carol, ["free-name", gov.name("other")], ttl=60)
    with pytest.raises(NotAdmitted):
        alice.namespace(gov.prefix).grant(gov.name("other"), carol.sender, 60)
    assert bob.acquire(gov.name("other"), ttl=60).token > lease.token
    alice.namespace(gov.prefix).admit([bob.sender], admitted=False)
    with pytest.raises(NotAdmitted):
        bob.acquire(gov.name("third"), ttl=60)


def test_max_ttl_holds_acquisitions_grants_and_renewals(chain, gov):
    alice, bob = gov.alice, gov.bob
    with pytest.raises(InvalidPolicy):
        alice.namespace(gov.prefix).set_policy(max_ttl=alice.max_ttl + 1)
    alice.namespace(gov.prefix).set_policy(max_ttl=30)
    with pytest.raises(InvalidTtl) as refused:
        bob.acquire(gov.name("db"), ttl=31)
    assert refused.value.max_ttl == 30
    lease = bob.acquire(gov.name("db"), ttl=30)
    with pytest.raises(InvalidTtl):
        lease.renew(31)
    lease.renew(30)
    with pytest.raises(InvalidTtl):
        alice.namespace(gov.prefix).grant(gov.name("db"), bob.sender, 31)


def test_revoke_fences_the_holder_and_the_next_acquisition_says_revoked(chain, gov):
    alice, bob, carol = gov.alice, gov.bob, gov.carol
    stuck = bob.acquire(gov.name("db"), ttl=600)
    revoked = alice.namespace(gov.prefix).revoke(gov.name("db"))
    assert revoked == stuck.token
    info = carol.last_lease(gov.name("db"))
    assert info.status is LeaseStatus.REVOKED and not stuck.is_current()
    for attempt in (stuck.renew, stuck.release, lambda: stuck.complete(b"late write")):
        with pytest.raises(LeaseRevoked):
            attempt()
    with pytest.raises(NotLive):
        alice.namespace(gov.prefix).revoke(gov.name("db"))
    nxt = carol.acquire(gov.name("db"), ttl=60)  # no lock-delay after a revoke, even with one set
    assert nxt.reason is AcquireReason.REVOKED and nxt.token > stuck.token and nxt.previous_token == stuck.token
    events = audit.history(alice, gov.name("db"))
    revoke = next(e for e in events if e.kind is EventKind.REVOKED)
    assert (revoke.token, revoke.holder, revoke.admin) == (stuck.token, bob.sender, alice.sender)


def test_grant_takes_over_a_live_lease_through_the_fenced_path(chain, gov):
    alice, bob, carol = gov.alice, gov.bob, gov.carol
    old = bob.acquire(gov.name("db"), ttl=600)
    granted = alice.namespace(gov.prefix).grant(gov.name("db"), carol.sender, 60)
    assert granted.reason is AcquireReason.GRANTED and granted.token > old.token
    assert granted.previous_token == old.token and granted.holder == carol.sender
    with pytest.raises(StaleToken):
        old.renew()
    kinds = [(e.kind, e.token) for e in audit.history(alice, gov.name("db"))]
    assert kinds[-3:] == [
        (EventKind.REVOKED, old.token),
        (EventKind.ACQUIRED, granted.token),
        (EventKind.GRANTED, granted.token),
    ]
    granted.renew()  # the grantee holds it like any lease


def test_nobody_but_the_expired_holder_may_acquire_during_the_lock_delay(chain, gov):
    alice, bob, carol = gov.alice, gov.bob, gov.carol
    alice.namespace(gov.prefix).set_policy(lock_delay=100)
    lease = bob.acquire(gov.name("db"), ttl=10)
    chain.advance_time(11)
    with pytest.raises(LockDelayed) as delayed:
        carol.acquire(gov.name("db"), ttl=10)
    assert delayed.value.until == lease.expires_at + 100 and delayed.value.holder == bob.sender
    with pytest.raises(LockDelayed):
        LeaseSet.acquire(carol, [gov.name("db")], ttl=10)
    with pytest.raises(LockDelayed):
        carol.acquire(gov.name("db"), ttl=10, exclusive=True)
    again = bob.acquire(gov.name("db"), ttl=10)  # the expired holder itself (Consul #430)
    assert again.reason is AcquireReason.EXPIRED and again.token > lease.token
    again.release()
    assert carol.acquire(gov.name("db"), ttl=10).reason is AcquireReason.RELEASED, "no delay after a release"


def test_the_lock_delay_ends_at_its_time(chain, gov):
    gov.alice.namespace(gov.prefix).set_policy(lock_delay=50)
    lease = gov.bob.acquire(gov.name("db"), ttl=10)
    chain.set_next_block_time(lease.expires_at + 50)
    assert gov.carol.acquire(gov.name("db"), ttl=10).reason is AcquireReason.EXPIRED


def test_a_work_item_follows_its_worksets_namespace(chain, gov):
    """claimNext applies the workset's namespace policy (an address namespace's too)."""
    gov.alice.namespace(gov.prefix).set_policy(admission_required=True)
    with pytest.raises(NotAdmitted):
        gov.bob.workset(gov.name("jobs")).claim(["i1"], ttl=60)
    gov.alice.namespace(gov.prefix).admit([gov.bob.sender])
    claim = gov.bob.workset(gov.name("jobs")).claim(["i1"], ttl=60)
    assert gov.alice.workset(gov.name("jobs")).revoke("i1") == claim.token


# ----------------------------------------------------------------------
# Sets
# ----------------------------------------------------------------------


def test_acquire_many_is_all_or_nothing_with_consecutive_tokens(chain, alice, bob):
    bob.acquire("held/b", ttl=600)
    latest = alice.latest_token()
    with pytest.raises(LeaseHeld) as held:
        LeaseSet.acquire(alice, ["set/a", "held/b", "set/c"], ttl=60)
    assert held.value.resource == "held/b"
    assert alice.latest_token() == latest and alice.lease_of("set/a") is None
    with pytest.raises(DuplicateResource):
        LeaseSet.acquire(alice, ["set/a", "set/a"], ttl=60)
    leases = LeaseSet.acquire(alice, ["set/a", "set/c", "plain"], ttl=60)
    assert leases.tokens == [latest + 1, latest + 2, latest + 3]
    leases.renew(120)
    assert all(lease.is_current() for lease in leases)
    with leases:
        pass
    assert all(alice.last_lease(name).status is LeaseStatus.RELEASED for name in ["set/a", "set/c", "plain"])


def test_a_set_renews_nothing_when_one_lease_was_lost_and_releases_what_it_still_can(chain, gov):
    """renewMany is all or nothing; the set's release releases the live members and says which ended
    (tests/endings/test_lease_set.py attacks every way)."""
    from chainfence.errors import LeaseSetLost

    leases = LeaseSet.acquire(gov.bob, [gov.name("a"), gov.name("b")], ttl=600)
    gov.alice.namespace(gov.prefix).revoke(gov.name("b"))
    with pytest.raises(LeaseRevoked) as lost:
        leases.renew()
    assert lost.value.resource == gov.name("b")
    assert leases[0].is_current(), "a was not renewed, and is still live"
    with pytest.raises(LeaseSetLost) as ended:
        leases.release()
    assert ended.value.ended == {gov.name("b"): "revoked"} and ended.value.released == (gov.name("a"),)
    assert not leases[0].is_current(), "a was released"


def test_a_revoked_holder_is_refused_everywhere_it_writes(chain, registry, alice, bob, tmp_path):
    """The operator's revoke reaches every fence: the registry's check, a guard in each mode that reads
    the chain, and a contract that asks the registry (FencedStore); control: before the revoke they accept."""
    from chainfence import FencedStore, Guard

    name = f"{alice.namespace().prefix}/db"
    stuck = bob.acquire(name, ttl=600)
    store = FencedStore.deploy(registry)
    guard = Guard(registry, path=tmp_path / "guard.sqlite", mode="strict")
    try:
        guard.check(name, stuck.token)  # control: accepted while live
        store.write(stuck, b"v1")
        alice.namespace().revoke(name)
        with pytest.raises(LeaseRevoked):
            registry.check_current(name, stuck.token)
        with pytest.raises(LeaseRevoked):
            guard.check(name, stuck.token)
        with pytest.raises(LeaseRevoked):
            store.write(stuck, b"late")
    finally:
        guard.close()


def _holders(count: int) -> list[str]:
    """``count`` distinct addresses nobody has admitted yet."""
    return ["0x" + f"{0xAD0000 + i:040x}" for i in range(count)]


def test_admit_of_the_most_holders_admits_them_all(chain, registry, alice):
    """Issue 25, finding 17: ``admit`` of the 512 holders it accepts admits them all (it ran out of the
    5,000,000 gas every dev-chain transaction gets), in transactions that each stay under that
    ceiling, and removes them all the same way."""
    from chainfence._node.sending import DEV_GAS_LIMIT
    from chainfence.namespaces import ADMISSION_CHUNK

    prefix = alice.namespace().prefix
    alice.namespace(prefix).set_policy(admission_required=True)  # is_admitted reads the allowlist
    holders = _holders(512)
    first = chain.block_number() + 1
    alice.namespace(prefix).admit(holders)
    blocks = range(first, chain.block_number() + 1)
    receipts = [chain.rpc.receipt(tx) for number in blocks for tx in chain.rpc.block(number)["transactions"]]
    assert [r["status"] for r in receipts] == [1] * -(-512 // ADMISSION_CHUNK)
    assert max(r["gasUsed"] for r in receipts) < 3_300_000 < DEV_GAS_LIMIT, "a full chunk fits the dev ceiling"
    assert all(alice.namespace(prefix).is_admitted(holder) for holder in holders)
    alice.namespace(prefix).admit(holders, admitted=False)
    assert not any(alice.namespace(prefix).is_admitted(holder) for holder in holders)


def test_control_one_transaction_of_512_holders_runs_out_of_the_dev_ceiling(chain, registry, alice):
    """Control: the 512 holders in one ``setAdmission`` with the ceiling the SDK gives a dev-chain
    transaction (what ``admit`` sent before) is mined out of gas, and admits nobody."""
    from chainfence._node.sending import DEV_GAS_LIMIT

    prefix = alice.namespace().prefix
    alice.namespace(prefix).set_policy(admission_required=True)
    holders = _holders(512)
    data = registry._encode("setAdmission", [namespace_id(prefix), holders, True])
    with pytest.raises(TransactionFailed) as failed:
        chain.transact(alice.sender, registry.address, data, gas=DEV_GAS_LIMIT)
    assert failed.value.receipt["gasUsed"] == DEV_GAS_LIMIT
    assert not alice.namespace(prefix).is_admitted(holders[0])
