"""Admission by the namespace's on-chain allowlist: the registry refuses a squatter, guards refuse a stranger's
genuine token, and a removal from the allowlist takes effect as documented per mode. Both backends.

Namespace ``prod`` was assigned to Carol (its admin) by the deployer; she requires admission and admits
Alice. Bob is the stranger. ``open/...`` is a namespace nobody administers: the control, open to all as
before.
"""

from __future__ import annotations

import pytest

from chainfence import Admission, Guard, Registry
from chainfence.errors import NotAdmitted
from chainfence.guard import Follow, RequestPolicy
from chainfence.namespaces import Namespace
from tests.chain.test_admission import AUDIENCE, make_app, post, sign, store_state

RESOURCE = "prod/db"


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: the deployer assigned 'prod' to Carol (account 3)."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={"prod": chain.accounts[3]})


@pytest.fixture
def admin(carol, alice):
    carol.namespace("prod").set_policy(admission_required=True)
    carol.namespace("prod").admit([alice.sender])
    return carol


def open_guard(registry, tmp_path, mode) -> Guard:
    return Guard(
        registry,
        path=tmp_path / f"{mode}.sqlite",
        mode=Follow(interval=3_600) if mode == "follow" else mode,
        requests=RequestPolicy(audience=AUDIENCE),
        admission=Admission.on_chain(),
    )


def test_a_stranger_cannot_squat_a_free_resource_of_an_administered_namespace(registry, bob, admin):
    latest = registry.latest_token()
    with pytest.raises(NotAdmitted) as refused:
        bob.acquire(RESOURCE, ttl=60)
    assert refused.value.holder == bob.sender
    assert registry.last_lease(RESOURCE) is None and registry.latest_token() == latest
    # Control: where nobody administers the namespace, the stranger takes the resource as before.
    assert bob.acquire("open/db", ttl=60).holder == bob.sender


@pytest.mark.parametrize("mode", ["mark", "strict", "follow"])
def test_a_stranger_holding_from_before_the_policy_is_refused_by_guard_and_middleware(
    registry, alice, bob, carol, tmp_path, mode
):
    """Bob took prod/db while the namespace was open; the admin then required admission without him."""
    alice.release(RESOURCE, alice.acquire(RESOURCE, ttl=60).token)  # tokens above 1
    stranger = bob.acquire(RESOURCE, ttl=600)
    carol.namespace("prod").set_policy(admission_required=True)
    carol.namespace("prod").admit([alice.sender])
    assert registry.lease_of(RESOURCE).holder == bob.sender  # a policy never evicts a live holder
    with open_guard(registry, tmp_path, mode) as guard:
        if mode == "follow":
            guard.sync()
        before = store_state(guard.path)
        with pytest.raises(NotAdmitted) as refused:
            guard.check(RESOURCE, stranger.token)
        assert refused.value.admission == "on-chain" and refused.value.namespace_name == "prod"
        assert isinstance(refused.value, NotAdmitted)
        app, writes = make_app(guard)
        answer = post(app, sign(stranger))
        assert answer.status_code == 403 and answer.json()["error"] == "NotAdmitted"
        assert writes == [] and store_state(guard.path) == before
        # Control: the same guard without the namespace's policy accepts him.
    with Guard(
        registry, path=tmp_path / "open.sqlite", mode=mode, requests=RequestPolicy(audience=AUDIENCE)
    ) as open_guard_:
        assert open_guard_.check(RESOURCE, stranger.token) == stranger.token


@pytest.mark.parametrize("mode", ["mark", "strict", "follow"])
def test_an_admitted_holder_passes_and_open_names_admit_everyone(registry, alice, bob, admin, tmp_path, mode):
    lease = alice.acquire(RESOURCE, ttl=60)
    other = bob.acquire("open/db", ttl=60)
    bare = bob.acquire("nonamespace", ttl=60)
    with open_guard(registry, tmp_path, mode) as guard:
        for _ in range(2):  # a new epoch, then at the mark
            assert guard.check(RESOURCE, lease.token) == lease.token
            assert guard.check("open/db", other.token) == other.token
            assert guard.check("nonamespace", bare.token) == bare.token
        app, writes = make_app(guard)
        assert post(app, sign(lease)).status_code == 200


@pytest.mark.parametrize("removed", [True, False], ids=["removed", "control"])
def test_a_removal_from_the_allowlist_takes_effect_as_documented_per_mode(registry, alice, admin, tmp_path, removed):
    lease = alice.acquire(RESOURCE, ttl=600)
    guards = {mode: open_guard(registry, tmp_path, mode) for mode in ("mark", "strict", "follow")}
    try:
        for guard in guards.values():
            guard.check(RESOURCE, lease.token)  # the holder's mark, its admission cached
        if removed:
            admin.namespace("prod").admit([alice.sender], admitted=False)
        assert registry.lease_of(RESOURCE).token == lease.token  # the lease itself stays live

        def verdicts() -> dict[str, str]:
            found = {}
            for mode, guard in guards.items():
                try:
                    guard.check(RESOURCE, lease.token)
                    found[mode] = "accepted"
                except NotAdmitted:
                    found[mode] = "refused"
            return found

        # Before the follower's next poll: strict reads at every check; follow and mark answer from the cache.
        assert verdicts() == (
            {"mark": "accepted", "strict": "refused", "follow": "accepted"}
            if removed
            else dict.fromkeys(guards, "accepted")
        )
        guards["follow"].sync()  # the poll applies NamespaceAdmissionSet: the namespace's answers are dropped
        assert verdicts() == (
            {"mark": "accepted", "strict": "refused", "follow": "refused"}
            if removed
            else dict.fromkeys(guards, "accepted")
        )
        if removed:  # re-admitted: a cached refusal is never trusted, the chain is asked again
            admin.namespace("prod").admit([alice.sender])
            assert verdicts() == dict.fromkeys(guards, "accepted")
    finally:
        for guard in guards.values():
            guard.close()


def test_an_answer_read_while_the_follower_drops_the_namespace_is_not_kept(
    registry, alice, admin, tmp_path, monkeypatch
):
    """Timeline: a check asks isAdmitted (the chain still says yes); the admin removes Alice; the follower
    applies it and drops the namespace's answers; the check's old 'yes' arrives. It admits that one check
    (it was true when read) but is not cached: the next check asks again and is refused."""
    lease = alice.acquire(RESOURCE, ttl=600)
    with open_guard(registry, tmp_path, "follow") as guard:  # nothing cached yet
        real = Namespace.is_admitted
        asked = []

        def late_answer(namespace, holder, **options):
            answer = real(namespace, holder, **options)  # read before the removal: True
            admin.namespace("prod").admit([alice.sender], admitted=False)
            guard.sync()  # the follower applies the removal meanwhile
            asked.append(answer)
            return answer

        monkeypatch.setattr(Namespace, "is_admitted", late_answer)
        assert guard.check(RESOURCE, lease.token) == lease.token and asked == [True]
        monkeypatch.setattr(Namespace, "is_admitted", real)
        with pytest.raises(NotAdmitted):
            guard.check(RESOURCE, lease.token)
