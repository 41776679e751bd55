"""The registry and a guard against a pure-Python reference model (Hypothesis stateful testing).

Several accounts acquire, renew (with and without progress markers),
release and complete a few resources with arbitrary tokens and ttls, and
claim, renew, release and complete the items of a workset, while chain time
jumps around; guards in each mode check arbitrary tokens. Every outcome (success and its values, or the exact error class) must
match the model, and the safety properties must hold throughout:
tokens strictly increase, at most one live holder per resource (and per
work item) at any chain time (checked independently from the event log),
views agree with the model, the guard's marks never go down, no work item is
completed twice and every completion is by the item's current claim.

Namespaces (issues 11 and 17): a namespace has an admin by construction only.
"db" was assigned to one account by the deployer; each account's address
namespace ("0x" + its address, lowercase) is its own from the start (one of
the resources and the workset live in one); "reports", "jobs" and "deploy"
have no admin, ever (there is no claim). The accounts hand namespaces over,
set the fields of their policies (allowlist, maxTtl, lock-delay: each field
on its own, the others kept), admit and remove holders, revoke and grant
leases and work items, acquire exclusively and acquire several resources at
once, as admins and as strangers: every admin act by a non-admin must be
refused exactly as the model says (nobody acts outside what it administers,
an address keeps no power over its namespace once it handed it over), the
policies read back as the model holds them, and the history check covers
revokes and grants (a revoke or a grant's takeover ends the old lease).
``test_a_mutated_model_is_caught`` runs the machine against a model in which
address namespaces have no admin and requires the run to fail.

Timing: on the embedded chain every transaction is mined in a new block whose
timestamp is the pending block's, and views run at the latest block, so the
model knows the chain time of each operation exactly.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from chainfence import AcquireReason, Chain, EventKind, Guard, LeaseSet, LeaseStatus, Registry, audit
from chainfence._sdk import validate as _validate
from chainfence._sdk.names import item_id
from chainfence.errors import (
    ChainfenceError,
    InvalidTtl,
    LeaseCompleted,
    LeaseExpired,
    LeaseHeld,
    LeaseReleased,
    LeaseRevoked,
    LockDelayed,
    NotAdmitted,
    NothingToClaim,
    NotHolder,
    NotLive,
    NotNamespaceAdmin,
    NotPendingAdmin,
    StaleToken,
    TokenNotCurrent,
    UnknownToken,
)
from chainfence.guard import Follow
from chainfence.namespaces import address_namespace

# 30 examples x 40 steps of chain calls: about 100 s on this 2-core machine lightly loaded, over 300 s
# beside two busy loops and other suites: the suite-wide 300 s safety net would be a window to fit in.
pytestmark = pytest.mark.timeout(1_200)

ACCOUNTS = 3
MAX_TTL = 120
#: The account the deployer assigned namespace "db" to.
DB_ADMIN = 0

_SESSION: dict[str, object] = {}


def session() -> tuple[Chain, Registry]:
    if not _SESSION:
        chain = Chain.embedded(accounts=ACCOUNTS + 1)
        _SESSION["chain"] = chain
        _SESSION["registry"] = Registry.deploy(chain, max_ttl=MAX_TTL, namespaces={"db": chain.accounts[DB_ADMIN + 1]})
    return _SESSION["chain"], _SESSION["registry"]  # type: ignore[return-value]


# Start the chain at import: py-evm changes the recursion limit when first
# imported, which Hypothesis reports if it happens inside a test run; and the
# address namespaces below need the accounts.
_CHAIN, _REGISTRY = session()
#: Each account's address namespace: its own from the start.
OWN = [address_namespace(_CHAIN.accounts[i + 1]) for i in range(ACCOUNTS)]

RESOURCES = ["reports/daily", "db/primary", f"{OWN[1]}/deploy"]
#: The workset lives in account 1's address namespace: its items can be revoked and granted.
WORKSET = f"{OWN[1]}/model"
ITEMS = ["i0", "i1", "i2"]
#: Namespaces: the names' above, two that nobody administers, and every account's own.
PREFIXES = ["reports", "db", "jobs", *OWN]


@dataclass
class ModelLease:
    holder: int
    token: int
    expires_at: int
    released: bool = False
    claimed: bool = False
    done: bool = False
    revoked: bool = False

    def status(self, now: int) -> LeaseStatus:
        if self.done:
            return LeaseStatus.DONE
        if self.revoked:
            return LeaseStatus.REVOKED
        if self.released:
            return LeaseStatus.RELEASED
        return LeaseStatus.LIVE if now < self.expires_at else LeaseStatus.EXPIRED


class Model:
    """What the registry should do, in plain Python."""

    def __init__(self) -> None:
        self.latest = 0
        self.leases: dict[str, ModelLease] = {}
        self.marks: dict[str, int] = {}
        # By construction: the deployer's assignment and every address namespace. Never anything else.
        self.admins: dict[str, int] = {"db": DB_ADMIN, **{own: i for i, own in enumerate(OWN)}}
        self.pending: dict[str, int | None] = {}
        self.policies: dict[str, tuple[int, int, bool]] = {}  # prefix -> (max_ttl, lock_delay, admission)
        self.allowed: dict[str, set[int]] = {}
        self.recorded: set[str] = set()  # resources whose namespace the registry recorded

    # -- namespaces -----------------------------------------------------

    def policy_refusal(self, prefix: str, holder: int, ttl: int):
        """acquire/claim/grant: the policy's refusal for ``holder``, or None."""
        if prefix not in self.admins:
            return None
        max_ttl, _delay, admission = self.policies.get(prefix, (0, 0, False))
        if admission and holder not in self.allowed.get(prefix, set()):
            return NotAdmitted
        if max_ttl and ttl > max_ttl:
            return InvalidTtl
        return None

    def in_lock_delay(self, prefix: str, lease: ModelLease | None, account: int, now: int) -> bool:
        if prefix not in self.admins or lease is None or lease.released or lease.expires_at > now:
            return False
        return lease.holder != account and now < lease.expires_at + self.policies.get(prefix, (0, 0, False))[1]

    def record(self, prefix: str, resource: str) -> None:
        if prefix in self.admins and self.policies.get(prefix, (0, 0, False))[0]:
            self.recorded.add(resource)

    def require_admin(self, account: int, prefix: str | None):
        if prefix is None or self.admins.get(prefix) != account:
            return NotNamespaceAdmin
        return None

    def transfer(self, account: int, prefix: str, to: int):
        refused = self.require_admin(account, prefix)
        if refused:
            return refused
        self.pending[prefix] = to
        return to

    def accept(self, account: int, prefix: str):
        if self.pending.get(prefix) != account:
            return NotPendingAdmin
        self.pending[prefix] = None
        self.admins[prefix] = account
        return account

    def set_policy(self, account: int, prefix: str, changes: tuple[int | None, int | None, bool | None]):
        """Only the fields given (not None) change; the others keep their values."""
        refused = self.require_admin(account, prefix)
        if refused:
            return refused
        current = self.policies.get(prefix, (0, 0, False))
        self.policies[prefix] = tuple(old if new is None else new for old, new in zip(current, changes))
        return None

    def admit(self, account: int, prefix: str, holder: int, admitted: bool):
        refused = self.require_admin(account, prefix)
        if refused:
            return refused
        (self.allowed.setdefault(prefix, set()).add if admitted else self.allowed.setdefault(prefix, set()).discard)(
            holder
        )
        return admitted

    def revoke(self, account: int, resource: str, now: int, *, prefix: str | None = None):
        refused = self.require_admin(account, prefix or resource.split("/")[0])
        if refused:
            return refused
        lease = self.leases.get(resource)
        if lease is None or lease.status(now) is not LeaseStatus.LIVE:
            return NotLive
        lease.released = lease.revoked = True
        return lease.token

    def grant(self, account: int, resource: str, holder: int, ttl: int, now: int, *, item: bool = False):
        """A lease, or (``item``) a work item's claim, issued by the admin of its namespace (a work
        item's: its workset's); a done item is never reopened."""
        prefix = resource.split("/")[0]
        refused = self.require_admin(account, prefix) or self.policy_refusal(prefix, holder, ttl)
        if refused:
            return refused
        lease = self.leases.get(resource)
        if lease is not None and lease.done:
            return LeaseCompleted
        previous = lease.token if lease else 0
        self.record(prefix, resource)
        self.latest += 1
        self.leases[resource] = ModelLease(holder, self.latest, now + ttl, claimed=item)
        return (self.latest, now + ttl, AcquireReason.GRANTED, previous)

    def acquire_many(self, account: int, names: list[str], ttl: int, now: int):
        """All or nothing: the first refusal, in order, refuses the whole set (state untouched)."""
        saved = (self.latest, dict(self.leases), set(self.recorded))
        results = []
        for name in names:
            result = self.acquire(account, name, ttl, now)
            if isinstance(result, type):
                self.latest, self.leases, self.recorded = saved
                return result
            results.append(result)
        return results

    # -- leases ---------------------------------------------------------

    def acquire(self, account: int, resource: str, ttl: int, now: int, *, exclusive: bool = False):
        prefix = resource.split("/")[0]
        lease = self.leases.get(resource)
        # The registry's order (FencingRegistry._acquireRefusal): an exclusive acquisition meets the
        # caller's own live lease before the namespace's policy (admission, maxTtl) is read.
        if exclusive and lease is not None and lease.holder == account and lease.status(now) is LeaseStatus.LIVE:
            return LeaseHeld
        refused = self.policy_refusal(prefix, account, ttl)
        if refused:
            return refused
        if self.in_lock_delay(prefix, lease, account, now):
            return LockDelayed
        if lease is None:
            reason = AcquireReason.UNHELD
        elif lease.revoked:
            reason = AcquireReason.REVOKED
        elif lease.released:
            reason = AcquireReason.RELEASED
        elif lease.expires_at <= now:
            reason = AcquireReason.EXPIRED
        elif lease.holder == account and not exclusive:
            reason = AcquireReason.REACQUIRED
        else:
            return LeaseHeld
        previous = lease.token if lease else 0
        self.record(prefix, resource)
        self.latest += 1
        self.leases[resource] = ModelLease(account, self.latest, now + ttl)
        return (self.latest, now + ttl, reason, previous)

    def claim(self, account: int, items: list[str], ttl: int, now: int):
        prefix = WORKSET.split("/")[0]
        refused = self.policy_refusal(prefix, account, ttl)
        if refused:
            return refused
        for item in items:
            key = f"{WORKSET}/{item}"
            lease = self.leases.get(key)
            if lease is not None and lease.done:
                continue
            if self.in_lock_delay(prefix, lease, account, now):
                continue
            if lease is None:
                reason = AcquireReason.UNHELD
            elif lease.revoked:
                reason = AcquireReason.REVOKED
            elif lease.released:
                reason = AcquireReason.RELEASED
            elif lease.expires_at <= now:
                reason = AcquireReason.EXPIRED
            elif lease.holder == account:
                reason = AcquireReason.REACQUIRED
            else:
                continue
            previous = lease.token if lease else 0
            self.record(prefix, key)
            self.latest += 1
            self.leases[key] = ModelLease(account, self.latest, now + ttl, claimed=True)
            return (item, self.latest, now + ttl, reason, previous)
        return NothingToClaim

    def complete(self, account: int, resource: str, token: int, now: int):
        lease = self._require_holder(account, resource, token, now)
        if isinstance(lease, type):
            return lease
        if lease.claimed:  # a work item: done for good, its lease ended
            lease.done = lease.released = True
        return token

    def _require_holder(self, account: int, resource: str, token: int, now: int):
        lease = self.leases.get(resource)
        current = lease.token if lease else 0
        if token != current:
            return UnknownToken if token > current else StaleToken
        if lease.holder != account:
            return NotHolder
        if lease.revoked:
            return LeaseRevoked
        if lease.done:
            return LeaseCompleted
        if lease.released:
            return LeaseReleased
        if lease.expires_at <= now:
            return LeaseExpired
        return lease

    def renew(self, account: int, resource: str, token: int, ttl: int, now: int):
        lease = self._require_holder(account, resource, token, now)
        if isinstance(lease, type):
            return lease
        if resource in self.recorded:
            cap = self.policies.get(resource.split("/")[0], (0, 0, False))[0]
            if cap and ttl > cap:
                return InvalidTtl
        lease.expires_at = now + ttl
        return lease.expires_at

    def release(self, account: int, resource: str, token: int, now: int):
        lease = self._require_holder(account, resource, token, now)
        if isinstance(lease, type):
            return lease
        lease.released = True
        return None

    def guard_check(self, resource: str, token: int, now: int):
        mark = self.marks.get(resource, 0)
        if token == mark:
            return token
        if token < mark:
            return StaleToken
        lease = self.leases.get(resource)
        current = lease.token if lease else 0
        if token > current:
            return UnknownToken
        if token < current:
            return StaleToken
        status = lease.status(now)
        if status is LeaseStatus.RELEASED:
            return LeaseReleased
        if status is LeaseStatus.REVOKED:
            return LeaseRevoked
        if status is LeaseStatus.EXPIRED:
            return LeaseExpired
        self.marks[resource] = token
        return token


accounts = st.integers(0, ACCOUNTS - 1)
resources = st.sampled_from(RESOURCES)
ttls = st.integers(1, MAX_TTL)
#: A token relative to the resource's current one: older, current, or not issued yet.
token_offsets = st.sampled_from([-3, -1, 0, 0, 0, 1, 50])
items = st.sampled_from(ITEMS)
#: The order an agent lists the workset's items in, and how many it lists.
item_lists = st.permutations(ITEMS).flatmap(lambda order: st.integers(1, len(order)).map(lambda n: list(order[:n])))
markers = st.one_of(st.none(), st.integers(1, 3))
prefixes = st.sampled_from(PREFIXES)
#: (max_ttl, lock_delay, admission_required), each None (keep it) or a value, at least one given: small
#: caps and delays so they bite within a run.
policy_changes = st.tuples(
    st.sampled_from([None, None, 0, 30, 90]),
    st.sampled_from([None, None, 0, 10, 60]),
    st.sampled_from([None, None, True, False]),
).filter(lambda changes: any(value is not None for value in changes))
#: Distinct names, in an order, for acquire_many (a name without '/' too: in no namespace).
name_sets = st.permutations(RESOURCES + ["plain"]).flatmap(
    lambda order: st.integers(1, 3).map(lambda n: list(order[:n]))
)


class RegistryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.chain, registry = session()
        self.snapshot = self.chain.snapshot()
        self.agents = [registry.connect(self.chain.accounts[i + 1]) for i in range(ACCOUNTS)]
        self.registry = registry
        self.model = Model()
        self.tmp = tempfile.TemporaryDirectory(prefix="chainfence-model-")
        self.guard = Guard(registry, path=Path(self.tmp.name) / "guard.sqlite")
        self.marks_seen: dict[str, int] = {}
        # The other modes, checked for the safety properties rather than against the model's
        # exact answers: never below an accepted token, never a token not issued for the resource.
        self.strict = Guard(registry, path=Path(self.tmp.name) / "strict.sqlite", mode="strict")
        self.follow = Guard(registry, path=Path(self.tmp.name) / "follow.sqlite", mode=Follow(interval=3_600))
        self.accepted: dict[str, dict[str, int]] = {"strict": {}, "follow": {}}
        self.issued: dict[int, str] = {}  # token -> resource it was issued for
        self.item_ids = {item_id(WORKSET, item): f"{WORKSET}/{item}" for item in ITEMS}
        self.steps = 0

    def teardown(self) -> None:
        try:
            self.check_history()
        finally:
            self.guard.close()
            self.strict.close()
            self.follow.close()
            self.tmp.cleanup()
            self.chain.revert(self.snapshot)

    # -- helpers --------------------------------------------------------

    def next_block_time(self) -> int:
        return self.chain.now()  # the embedded chain's now is the next block's time

    def token_for(self, resource: str, offset: int) -> int:
        lease = self.model.leases.get(resource)
        return max(1, (lease.token if lease else 0) + offset)

    def expect(self, predicted, action):
        """Run `action`; it must raise exactly the predicted error class, or succeed if none predicted."""
        if isinstance(predicted, type) and issubclass(predicted, ChainfenceError):
            try:
                action()
            except ChainfenceError as error:
                assert type(error) is predicted, f"expected {predicted.__name__}, got {error!r}"
                return None
            raise AssertionError(f"expected {predicted.__name__}, the operation succeeded")
        return action()

    # -- rules ----------------------------------------------------------

    @rule(account=accounts, resource=resources, ttl=ttls)
    def acquire(self, account, resource, ttl):
        at = self.next_block_time()
        predicted = self.model.acquire(account, resource, ttl, at)
        lease = self.expect(predicted, lambda: self.agents[account].acquire(resource, ttl=ttl))
        if lease is not None:
            token, expires_at, reason, previous = predicted
            self.issued[token] = resource
            assert (lease.token, lease.expires_at, lease.reason, lease.previous_token) == (
                token,
                expires_at,
                reason,
                previous,
            )
            assert self.chain.latest_time() == at

    @rule(account=accounts, resource=resources, offset=token_offsets, ttl=ttls, marker=markers)
    def renew(self, account, resource, offset, ttl, marker):
        token = self.token_for(resource, offset)
        predicted = self.model.renew(account, resource, token, ttl, self.next_block_time())
        expires_at = self.expect(predicted, lambda: self.agents[account].renew(resource, token, ttl, progress=marker))
        if expires_at is not None:
            assert expires_at == predicted

    @rule(account=accounts, resource=resources, offset=token_offsets)
    def complete(self, account, resource, offset):
        token = self.token_for(resource, offset)
        predicted = self.model.complete(account, resource, token, self.next_block_time())
        self.expect(predicted, lambda: self.agents[account].complete(resource, token, b"result"))

    @rule(account=accounts, listed=item_lists, ttl=ttls)
    def claim(self, account, listed, ttl):
        at = self.next_block_time()
        predicted = self.model.claim(account, listed, ttl, at)
        if predicted is NothingToClaim:
            assert self.agents[account].workset(WORKSET).claim(listed, ttl) is None
            return
        lease = self.expect(predicted, lambda: self.agents[account].workset(WORKSET).claim(listed, ttl))
        if lease is None:
            return
        item, token, expires_at, reason, previous = predicted
        self.issued[token] = f"{WORKSET}/{item}"
        assert (lease.item, lease.token, lease.expires_at, lease.reason, lease.previous_token) == (
            item,
            token,
            expires_at,
            reason,
            previous,
        )

    @rule(account=accounts, item=items, offset=token_offsets, ttl=ttls, marker=markers)
    def renew_item(self, account, item, offset, ttl, marker):
        key = f"{WORKSET}/{item}"
        token = self.token_for(key, offset)
        predicted = self.model.renew(account, key, token, ttl, self.next_block_time())
        # An item's claim is renewed through its id (what Lease.renew and `chainfence renew --workset` do).
        self.expect(
            predicted,
            lambda: self.agents[account]._drive(
                self.agents[account]._renew_by_id_steps(key, item_id(WORKSET, item), token, ttl, marker, None)
            ),
        )

    @rule(account=accounts, item=items, offset=token_offsets)
    def release_item(self, account, item, offset):
        key = f"{WORKSET}/{item}"
        token = self.token_for(key, offset)
        predicted = self.model.release(account, key, token, self.next_block_time())
        self.expect(
            predicted,
            lambda: self.agents[account]._drive(
                self.agents[account]._release_by_id_steps(key, item_id(WORKSET, item), token, None)
            ),
        )

    @rule(account=accounts, item=items, offset=token_offsets)
    def complete_item(self, account, item, offset):
        key = f"{WORKSET}/{item}"
        token = self.token_for(key, offset)
        predicted = self.model.complete(account, key, token, self.next_block_time())
        self.expect(predicted, lambda: self.agents[account].workset(WORKSET).complete(item, token, b"result"))

    @rule(account=accounts, resource=resources, offset=token_offsets)
    def release(self, account, resource, offset):
        token = self.token_for(resource, offset)
        predicted = self.model.release(account, resource, token, self.next_block_time())
        self.expect(predicted, lambda: self.agents[account].release(resource, token))

    # -- namespaces: admins and strangers --------------------------------

    @initialize(policy=st.tuples(st.sampled_from([0, 90]), st.sampled_from([10, 60]), st.just(False)))
    def a_namespace_with_a_policy(self, policy):
        """'db' (assigned to DB_ADMIN at deployment) starts with a lock-delay, so runs reach it; the
        address namespaces start with no policy; 'reports', 'jobs' and 'deploy' stay open for good."""
        admin = DB_ADMIN
        self.model.set_policy(admin, "db", policy)
        self.agents[admin].namespace("db").set_policy(
            max_ttl=policy[0], lock_delay=policy[1], admission_required=policy[2]
        )

    @rule(account=accounts, prefix=prefixes, to=accounts)
    def transfer_admin(self, account, prefix, to):
        predicted = self.model.transfer(account, prefix, to)
        self.expect(predicted, lambda: self.agents[account].namespace(prefix).transfer_admin(self.agents[to].sender))

    @rule(account=accounts, prefix=prefixes)
    def accept_admin(self, account, prefix):
        predicted = self.model.accept(account, prefix)
        self.expect(predicted, lambda: self.agents[account].namespace(prefix).accept_admin())

    @rule(account=accounts, prefix=prefixes, changes=policy_changes)
    def set_policy(self, account, prefix, changes):
        predicted = self.model.set_policy(account, prefix, changes)
        max_ttl, lock_delay, admission = changes
        self.expect(
            predicted,
            lambda: (
                self.agents[account]
                .namespace(prefix)
                .set_policy(max_ttl=max_ttl, lock_delay=lock_delay, admission_required=admission)
            ),
        )

    @rule(account=accounts, prefix=prefixes, holder=accounts, admitted=st.booleans())
    def admit(self, account, prefix, holder, admitted):
        predicted = self.model.admit(account, prefix, holder, admitted)
        self.expect(
            predicted,
            lambda: self.agents[account].namespace(prefix).admit([self.agents[holder].sender], admitted=admitted),
        )

    @rule(account=accounts, resource=resources)
    def revoke(self, account, resource):
        predicted = self.model.revoke(account, resource, self.next_block_time())
        revoked = self.expect(
            predicted, lambda: self.agents[account].namespace(resource.split("/")[0]).revoke(resource)
        )
        if revoked is not None:
            assert revoked == predicted

    @rule(account=accounts, resource=resources, holder=accounts, ttl=ttls)
    def grant(self, account, resource, holder, ttl):
        at = self.next_block_time()
        predicted = self.model.grant(account, resource, holder, ttl, at)
        lease = self.expect(
            predicted,
            lambda: (
                self.agents[account].namespace(resource.split("/")[0]).grant(resource, self.agents[holder].sender, ttl)
            ),
        )
        if lease is not None:
            token, expires_at, reason, previous = predicted
            self.issued[token] = resource
            assert (lease.token, lease.expires_at, lease.reason, lease.previous_token, lease.holder) == (
                token,
                expires_at,
                reason,
                previous,
                self.agents[holder].sender,
            )

    @rule(account=accounts, item=items)
    def revoke_item(self, account, item):
        key = f"{WORKSET}/{item}"
        predicted = self.model.revoke(account, key, self.next_block_time(), prefix=WORKSET.split("/")[0])
        revoked = self.expect(predicted, lambda: self.agents[account].workset(WORKSET).revoke(item))
        if revoked is not None:
            assert revoked == predicted

    @rule(account=accounts, item=items, holder=accounts, ttl=ttls)
    def grant_item(self, account, item, holder, ttl):
        key = f"{WORKSET}/{item}"
        at = self.next_block_time()
        predicted = self.model.grant(account, key, holder, ttl, at, item=True)
        lease = self.expect(
            predicted, lambda: self.agents[account].workset(WORKSET).grant(item, self.agents[holder].sender, ttl)
        )
        if lease is not None:
            token, expires_at, reason, previous = predicted
            self.issued[token] = key
            assert (lease.item, lease.token, lease.expires_at, lease.reason, lease.previous_token, lease.holder) == (
                item,
                token,
                expires_at,
                reason,
                previous,
                self.agents[holder].sender,
            )

    @rule(account=accounts, resource=resources, ttl=ttls)
    def acquire_exclusive(self, account, resource, ttl):
        at = self.next_block_time()
        predicted = self.model.acquire(account, resource, ttl, at, exclusive=True)
        lease = self.expect(predicted, lambda: self.agents[account].acquire(resource, ttl=ttl, exclusive=True))
        if lease is not None:
            token, expires_at, reason, previous = predicted
            self.issued[token] = resource
            assert (lease.token, lease.expires_at, lease.reason, lease.previous_token) == (
                token,
                expires_at,
                reason,
                previous,
            )

    @rule(account=accounts, names=name_sets, ttl=ttls)
    def acquire_many(self, account, names, ttl):
        predicted = self.model.acquire_many(account, names, ttl, self.next_block_time())
        leases = self.expect(predicted, lambda: LeaseSet.acquire(self.agents[account], names, ttl))
        if leases is not None:
            for name, lease, (token, expires_at, reason, previous) in zip(names, leases, predicted):
                self.issued[token] = name
                assert (lease.resource, lease.token, lease.expires_at, lease.reason, lease.previous_token) == (
                    name,
                    token,
                    expires_at,
                    reason,
                    previous,
                )

    @rule(account=accounts, offset=st.sampled_from([0, 1, 9, 30]), ttl=ttls)
    def acquire_just_after_expiry(self, account, offset, ttl):
        """Contend for 'db/primary' (its namespace starts with a lock-delay) right after its lease runs
        out: where lock-delays and expired re-acquisitions bite."""
        resource = "db/primary"
        lease = self.model.leases.get(resource)
        if lease is not None and not lease.released and lease.expires_at > self.chain.now():
            self.chain.set_next_block_time(lease.expires_at + offset)
        self.acquire(account, resource, ttl)

    @rule(seconds=st.one_of(st.integers(0, 5), st.integers(20, 150)))
    def time_passes(self, seconds):
        self.chain.advance_time(seconds)

    @rule(resource=resources, offset=token_offsets)
    def guard_check(self, resource, offset):
        token = self.token_for(resource, offset)
        now = self.chain.now()
        predicted = self.model.guard_check(resource, token, now)
        accepted = self.expect(predicted, lambda: self.guard.check(resource, token))
        if accepted is not None:
            assert accepted == predicted
        for mode, guard in (("strict", self.strict), ("follow", self.follow)):
            try:
                guard.check(resource, token)
            except TokenNotCurrent:
                continue
            previous = self.accepted[mode].get(resource, 0)
            assert token >= previous, f"{mode} accepted {token} after {previous}"
            assert self.issued.get(token) == resource, f"{mode} accepted a token not issued for {resource}"
            if mode == "strict":
                lease = self.model.leases[resource]
                assert lease.token == token and lease.status(now) is LeaseStatus.LIVE
            self.accepted[mode][resource] = token

    @rule()
    def follower_catches_up(self):
        self.follow.sync()
        for resource, lease in self.model.leases.items():
            if resource in RESOURCES:  # work items are not guarded by name
                assert self.follow.mark(resource) >= lease.token

    # -- invariants -----------------------------------------------------

    @invariant()
    def latest_token_matches(self):
        assert self.registry.latest_token() == self.model.latest

    @invariant()
    def views_match_the_model(self):
        now = self.chain.now()
        for resource in RESOURCES + ["plain"]:
            expected = self.model.leases.get(resource)
            info = self.registry.last_lease(resource)
            if expected is None:
                assert info is None
                continue
            assert (info.holder, info.token, info.status) == (
                self.chain.accounts[expected.holder + 1],
                expected.token,
                expected.status(now),
            )
            assert info.expires_at == (0 if expected.released else expected.expires_at)
        for item in ITEMS:
            expected = self.model.leases.get(f"{WORKSET}/{item}")
            info = self.registry.workset(WORKSET).last_lease(item)
            if expected is None:
                assert info is None
                continue
            assert (info.holder, info.token, info.status) == (
                self.chain.accounts[expected.holder + 1],
                expected.token,
                expected.status(now),
            )
        # lease_of is last_lease filtered by liveness: asked of one resource per step, in turn.
        resource = RESOURCES[self.steps % len(RESOURCES)]
        self.steps += 1
        expected = self.model.leases.get(resource)
        live = self.registry.lease_of(resource)
        assert (live is not None) == (expected is not None and expected.status(now) is LeaseStatus.LIVE)

    @invariant()
    def policies_match_the_model(self):
        """Every namespace's admin, pending admin and policy read back as the model holds them: an open
        namespace has no admin, an address namespace its address until it is handed over."""
        # One namespace per step, in turn (each read is an eth_call): a wrong policy lasts until rewritten.
        self.policy_steps = getattr(self, "policy_steps", -1) + 1
        for prefix in [PREFIXES[self.policy_steps % len(PREFIXES)]]:
            policy = self.registry.namespace(prefix).policy()
            admin = self.model.admins.get(prefix)
            pending = self.model.pending.get(prefix)
            expected = (
                None if admin is None else self.agents[admin].sender,
                None if pending is None else self.agents[pending].sender,
                *self.model.policies.get(prefix, (0, 0, False)),
            )
            assert (
                policy.admin,
                policy.pending_admin,
                policy.max_ttl,
                policy.lock_delay,
                policy.admission_required,
            ) == expected, prefix

    @invariant()
    def guard_marks_never_go_down(self):
        marks = self.guard.marks()
        assert marks == dict(self.model.marks.items())
        for resource, mark in marks.items():
            assert mark >= self.marks_seen.get(resource, 0)
        self.marks_seen = marks

    def check_history(self):
        """From the event log alone: tokens are 1..latest, each issued once, in order, and no two
        holders' leases of one resource are ever live at the same chain time."""
        events = audit.history(self.registry)
        tokens = [e.token for e in events if e.kind is EventKind.ACQUIRED]
        assert tokens == list(range(1, self.model.latest + 1))
        for resource_id in [_validate.resource_id(r) for r in RESOURCES + ["plain"]] + list(self.item_ids):
            end = None  # chain time the current lease stops being live
            holder = None
            current = None
            completions = 0
            resource = self.item_ids.get(resource_id, resource_id.hex())
            for e in (e for e in events if e.resource_id == resource_id):
                if e.kind is EventKind.COMPLETED:
                    assert e.token == current, f"{resource}: completed by {e.token}, not its current token {current}"
                    completions += 1
                    if resource_id in self.item_ids:
                        assert completions == 1, f"work item {resource} completed twice"
                        end = min(end, e.block_timestamp)  # a claim's completion ends it
                    continue
                if e.kind is EventKind.GRANTED:
                    assert e.token == current and e.admin is not None
                    continue
                if e.kind is EventKind.ACQUIRED:
                    current = e.token
                if e.kind is EventKind.ACQUIRED:
                    if holder is not None and e.holder != holder:
                        assert end is not None and e.block_timestamp >= end, (
                            f"{resource}: {e.holder} acquired at {e.block_timestamp} while {holder} held it until {end}"
                        )
                    holder, end = e.holder, e.expires_at
                elif e.kind is EventKind.RENEWED:
                    end = e.expires_at
                else:  # released, or revoked by the namespace's admin (also a grant's takeover)
                    if e.kind is EventKind.REVOKED:
                        assert e.token == current, f"{resource}: revoked {e.token}, not its current token {current}"
                        end = min(end, e.block_timestamp)
                        holder = None  # ended before the next token: the grantee may start now
                        continue
                    end = min(end, e.block_timestamp)


TestRegistryModel = RegistryMachine.TestCase
# Examples and steps come from the profile (tests/conftest.py): HYPOTHESIS_PROFILE=thorough runs 300.


class _UnownedAddressModel(Model):
    """A mutation: a model in which an address namespace is not its address's (as when admins came only
    from the deployer or from claims). The registry gives it to its address: the machine must notice."""

    def __init__(self) -> None:
        super().__init__()
        self.admins = {"db": DB_ADMIN}


def test_a_mutated_model_is_caught():
    """The state machine is able to fail: against a model where address namespaces have no admin it
    finds a difference (the policy read back, or an owner's act the mutant predicts refused). No
    shrinking: the first failing run is enough."""

    class Mutant(RegistryMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = _UnownedAddressModel()

    with pytest.raises(AssertionError):
        run_state_machine_as_test(
            Mutant,
            settings=settings(
                max_examples=20,
                stateful_step_count=30,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
                print_blob=False,
            ),
        )
