"""An operator revokes a stuck holder: its later write is refused everywhere downstream.

The scenario (issue 11, "how it will be checked"): Alice holds ``prod/db`` with
a long lease and writes through every fence (guards in each mode, a fenced SQL
transaction, the on-chain FencedStore, a FencingMiddleware); then she is stuck
(paused: she takes no step) and the admin of namespace ``prod`` revokes her
lease. When she wakes, the same token writes again, and must be refused by
every fence that can know. The control runs the same steps without the revoke:
every write is accepted, so the refusals are the revoke's doing.

What each fence can know (and the two that cannot, asserted as documented):

- ``strict`` guard, ``fenced_transaction(strict=True)``, ``FencedStore``: they
  ask the chain at the write; the registry says LeaseRevoked.
- ``follow`` guard (shared and exclusive): its follower applies the
  ``LeaseRevoked`` event, records the end in its store, and refuses the token
  at its mark without a chain call; a ``mark`` guard sharing that store, and
  ``fenced_transaction(verify=follow_guard.check)``, refuse it too.
- FencingMiddleware over a strict or a follow guard: 409 LeaseRevoked.
- A ``mark`` guard on its own store, and a plain ``fenced_transaction``, judge
  the same epoch without the chain: they accept the revoked holder at its mark
  until a successor's token reaches them (their documented window); the
  successor's first write closes it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

import pytest

from chainfence import FencedStore, Guard, Registry
from chainfence.errors import LeaseRevoked, StaleToken, TokenNotCurrent
from chainfence.guard import Follow, RequestPolicy
from chainfence.integrations.sql import fenced_transaction
from tests.chain.test_admission import BODY, make_app, post, sign

RESOURCE = "prod/db"
NAMESPACE = "prod"


@dataclass
class Fences:
    guards: dict[str, Guard]
    sql: sqlite3.Connection
    store: FencedStore
    apps: dict[str, tuple] = field(default_factory=dict)


def open_fences(registry, tmp_path) -> Fences:
    guards = {
        "strict": Guard(
            registry, path=tmp_path / "strict.sqlite", mode="strict", requests=RequestPolicy(audience="db-service")
        ),
        "follow": Guard(
            registry,
            path=tmp_path / "follow.sqlite",
            mode=Follow(interval=3_600),
            requests=RequestPolicy(audience="db-service"),
        ),
        "follow-exclusive": Guard(
            registry, path=tmp_path / "follow-x.sqlite", mode=Follow(interval=3_600), exclusive=True
        ),
        "mark": Guard(registry, path=tmp_path / "mark.sqlite"),
    }
    # A mark guard sharing the follow guard's store reads what its follower recorded.
    guards["mark-on-follow-store"] = Guard(registry, path=tmp_path / "follow.sqlite")
    sql = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    sql.execute("CREATE TABLE rows (token INTEGER, body BLOB)")
    fences = Fences(guards, sql, FencedStore.deploy(registry))
    fences.apps = {mode: make_app(guards[mode]) for mode in ("strict", "follow")}
    return fences


def close(fences: Fences) -> None:
    for guard in fences.guards.values():
        guard.close()
    fences.sql.close()


def write_everywhere(fences: Fences, lease, follow_guard: Guard) -> dict[str, str]:
    """The holder writes through every fence; returns each fence's verdict ("accepted" or the error's name)."""
    outcome: dict[str, str] = {}

    def attempt(name, write):
        try:
            write()
        except TokenNotCurrent as refused:
            outcome[name] = type(refused).__name__
        else:
            outcome[name] = "accepted"

    for name, guard in fences.guards.items():
        attempt(f"guard[{name}]", lambda guard=guard: guard.check(RESOURCE, lease.token))

    def sql_write(**options):
        with fenced_transaction(fences.sql, follow_guard.registry, RESOURCE, lease.token, **options) as cur:
            cur.execute("INSERT INTO rows VALUES (?, ?)", (lease.token, BODY))

    attempt("sql[strict]", lambda: sql_write(strict=True))
    attempt("sql[verify=follow guard]", lambda: sql_write(table="marks_follow", verify=follow_guard.check))
    attempt("sql[plain]", lambda: sql_write(table="marks_plain"))
    attempt("FencedStore", lambda: fences.store.write(lease, b"v" + lease.token.to_bytes(4, "big")))
    for mode, (app, _writes) in fences.apps.items():
        answer = post(app, sign(lease))
        outcome[f"middleware[{mode}]"] = (
            "accepted" if answer.status_code == 200 else (f"{answer.status_code} {answer.json()['error']}")
        )
    return outcome


@pytest.fixture
def registry(chain, backend_registry):
    """This module's registry: the deployer assigned namespace 'prod' to Carol (account 3)."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={NAMESPACE: chain.accounts[3]})


@pytest.fixture
def admin(registry, carol):
    return carol


@pytest.mark.parametrize("revoked", [True, False], ids=["revoked", "control"])
def test_a_revoked_stuck_holder_s_later_write_is_refused_by_every_fence_that_can_know(
    registry, alice, admin, tmp_path, revoked
):
    fences = open_fences(registry, tmp_path)
    try:
        follow = fences.guards["follow"]
        stuck = alice.acquire(RESOURCE, ttl=3_600)
        first = write_everywhere(fences, stuck, follow)
        assert set(first.values()) == {"accepted"}, first
        # Alice is stuck: she takes no step from here until she writes again.
        if revoked:
            assert admin.namespace(NAMESPACE).revoke(RESOURCE) == stuck.token
        for guard in fences.guards.values():
            if guard.mode == "follow":
                guard.sync()  # the follower's poll, run now (deterministic)
        marks_before = {name: guard.marks() for name, guard in fences.guards.items()}
        later = write_everywhere(fences, stuck, follow)
        if not revoked:
            assert set(later.values()) == {"accepted"}, later
            return
        assert later == {
            "guard[strict]": "LeaseRevoked",
            "guard[follow]": "LeaseRevoked",
            "guard[follow-exclusive]": "LeaseRevoked",
            "guard[mark]": "accepted",  # on its own, mark mode cannot know (documented window)
            "guard[mark-on-follow-store]": "LeaseRevoked",  # it reads what the follower recorded
            "sql[strict]": "LeaseRevoked",
            "sql[verify=follow guard]": "LeaseRevoked",
            "sql[plain]": "accepted",  # the same epoch at its mark, no chain call (documented window)
            "FencedStore": "LeaseRevoked",
            "middleware[strict]": "409 LeaseRevoked",
            "middleware[follow]": "409 LeaseRevoked",
        }, later
        assert {name: guard.marks() for name, guard in fences.guards.items()} == marks_before  # refusals move nothing
        assert fences.store.read(RESOURCE)[1] == stuck.token
    finally:
        close(fences)


def test_the_windows_of_mark_mode_close_with_the_successor_s_first_write(registry, alice, bob, admin, tmp_path):
    """After the revoke, the next acquisition gets a higher token; once it writes, the stuck holder is stale
    at the mark guard and the plain SQL fence too."""
    fences = open_fences(registry, tmp_path)
    try:
        stuck = alice.acquire(RESOURCE, ttl=3_600)
        mark_guard = fences.guards["mark"]
        mark_guard.check(RESOURCE, stuck.token)
        with fenced_transaction(fences.sql, registry, RESOURCE, stuck.token) as cur:
            cur.execute("INSERT INTO rows VALUES (?, ?)", (stuck.token, BODY))
        admin.namespace(NAMESPACE).revoke(RESOURCE)
        successor = bob.acquire(RESOURCE, ttl=60)
        assert successor.token > stuck.token
        mark_guard.check(RESOURCE, successor.token)
        with fenced_transaction(fences.sql, registry, RESOURCE, successor.token) as cur:
            cur.execute("INSERT INTO rows VALUES (?, ?)", (successor.token, BODY))
        with pytest.raises(StaleToken):
            mark_guard.check(RESOURCE, stuck.token)
        with pytest.raises(StaleToken), fenced_transaction(fences.sql, registry, RESOURCE, stuck.token) as cur:
            cur.execute("INSERT INTO rows VALUES (?, ?)", (stuck.token, b"late"))
        assert fences.sql.execute("SELECT token FROM rows").fetchall() == [(stuck.token,), (successor.token,)]
    finally:
        close(fences)


def test_a_follower_fences_off_a_revoked_token_it_never_saw_written(registry, alice, admin, tmp_path):
    """The stuck holder never wrote here: the follower's LeaseRevoked makes its token the mark, ended."""
    with Guard(registry, path=tmp_path / "f.sqlite", mode=Follow(interval=3_600)) as guard:
        alice.release(RESOURCE, alice.acquire(RESOURCE, ttl=60).token)  # an older token, to be fenced off
        stuck = alice.acquire(RESOURCE, ttl=3_600)
        admin.namespace(NAMESPACE).revoke(RESOURCE)
        guard.sync()
        assert guard.mark(RESOURCE) == stuck.token
        with pytest.raises(LeaseRevoked):
            guard.check(RESOURCE, stuck.token)
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, stuck.token - 1)
