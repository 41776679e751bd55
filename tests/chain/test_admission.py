"""Services decide whom they accept: a stranger's genuine token and signed request are refused, and move nothing.

The attack, as issue 11 plays it: a stranger acquires a free resource (nothing
on-chain stops it where the namespace requires no admission) and writes through
a guard and a FencingMiddleware that trust the registry. With an admission
policy the guard refuses it (NotAdmitted, 403 at the middleware) and
records nothing; the control without admission accepts it. Both backends.
"""

from __future__ import annotations

import asyncio
import sqlite3

import httpx
import pytest
from eth_account import Account
from fastapi import FastAPI, Request

from chainfence import Admission, FencedRequest, Guard
from chainfence.errors import InvalidInput, NotAdmitted, StaleToken
from chainfence.guard import Follow, RequestPolicy
from chainfence.integrations.asgi import FencingMiddleware
from tests.support.wallet import AgentWallet

RESOURCE = "prod/db"
BODY = b'{"rows": 42}'
ACTION = "POST /db"
AUDIENCE = "db-service"


def store_state(path) -> tuple[list, list]:
    """Everything a check could record: the marks and the remembered requests, read from the file."""
    conn = sqlite3.connect(path)
    try:
        marks = conn.execute("SELECT resource_id, token, holder FROM marks ORDER BY resource_id").fetchall()
        seen = conn.execute("SELECT id FROM seen_requests ORDER BY id").fetchall()
        return marks, seen
    finally:
        conn.close()


def sign(lease, body=BODY, **options) -> FencedRequest:
    return lease.sign(body, action=ACTION, audience=AUDIENCE, **options)


def post(app: FastAPI, request: FencedRequest, body: bytes = BODY) -> httpx.Response:
    """POST the signed request to the app, in process (httpx's ASGI transport)."""

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://db-service") as client:
            return await client.post("/db", content=body, headers=request.to_headers())

    return asyncio.run(go())


def make_app(guard: Guard) -> tuple[FastAPI, list]:
    writes: list = []
    app = FastAPI()

    @app.post("/db")
    async def write(request: Request):
        writes.append((request.scope["chainfence"].holder, await request.body()))
        return {"ok": True}

    app.add_middleware(FencingMiddleware, guard=guard, audience=AUDIENCE, resource=RESOURCE)
    return app, writes


@pytest.fixture
def admitted_only_alice(registry, alice, tmp_path):
    path = tmp_path / "guard.sqlite"
    with Guard(
        registry, path=path, admission=Admission.local([alice.sender]), requests=RequestPolicy(audience=AUDIENCE)
    ) as guard:
        yield guard


# ---------------------------------------------------------------------------
# Guard.check
# ---------------------------------------------------------------------------


def test_a_stranger_s_current_token_is_refused_and_moves_no_mark(registry, alice, bob, admitted_only_alice):
    """Bob holds the current, live token; a guard admitting only Alice refuses it and records nothing."""
    guard = admitted_only_alice
    alice.release(RESOURCE, alice.acquire(RESOURCE, ttl=60).token)
    assert guard.mark(RESOURCE) == 0
    stranger = bob.acquire(RESOURCE, ttl=60)
    before = store_state(guard.path)
    with pytest.raises(NotAdmitted) as refused:
        guard.check(RESOURCE, stranger.token)
    assert store_state(guard.path) == before
    assert guard.mark(RESOURCE) == 0
    details = refused.value.details()
    assert details["holder"] == bob.sender and details["token"] == stranger.token
    assert details["admission"] == "local" and details["resource"] == RESOURCE
    assert refused.value.http_status == 403 and isinstance(refused.value, PermissionError)


def test_an_admitted_holder_passes_and_a_later_stranger_token_is_still_refused(
    registry, alice, bob, chain, admitted_only_alice
):
    guard = admitted_only_alice
    lease = alice.acquire(RESOURCE, ttl=5)
    assert guard.check(RESOURCE, lease.token) == lease.token
    assert guard.check(RESOURCE, lease.token) == lease.token  # at the mark
    chain.advance_time(10)
    stranger = bob.acquire(RESOURCE, ttl=60)
    before = store_state(guard.path)
    with pytest.raises(NotAdmitted):
        guard.check(RESOURCE, stranger.token)
    assert store_state(guard.path) == before and guard.mark(RESOURCE) == lease.token


def test_control_without_admission_the_stranger_writes(registry, bob, tmp_path):
    """The attack succeeds against a guard that trusts the registry alone."""
    stranger = bob.acquire(RESOURCE, ttl=60)
    with Guard(registry, path=tmp_path / "open.sqlite") as guard:
        assert guard.check(RESOURCE, stranger.token) == stranger.token
        assert guard.mark(RESOURCE) == stranger.token


@pytest.mark.parametrize("exclusive", [False, True], ids=["shared", "exclusive"])
def test_a_stranger_whose_token_the_follower_made_the_mark_is_refused_at_the_mark(
    registry, alice, bob, tmp_path, exclusive
):
    """The follower raises marks for every acquisition; a check at such a mark still asks the admission."""
    with Guard(
        registry,
        path=tmp_path / "f.sqlite",
        mode=Follow(interval=3_600),
        exclusive=exclusive,
        admission=Admission.local([alice.sender]),
    ) as guard:
        alice.release(RESOURCE, alice.acquire(RESOURCE, ttl=60).token)
        stranger = bob.acquire(RESOURCE, ttl=60)
        guard.sync()
        assert guard.mark(RESOURCE) == stranger.token  # fencing still counts the stranger's token
        before = store_state(guard.path)
        for _ in range(2):
            with pytest.raises(NotAdmitted):
                guard.check(RESOURCE, stranger.token)
        assert store_state(guard.path) == before
        with pytest.raises(StaleToken):  # and Alice's older tokens stay fenced off
            guard.check(RESOURCE, stranger.token - 1)


@pytest.mark.parametrize("mode", ["mark", "strict"])
def test_another_guard_s_mark_from_a_stranger_is_refused_at_the_mark(registry, bob, tmp_path, mode):
    """A mark recorded by a guard without admission (same store) does not admit its holder here."""
    path = tmp_path / "shared.sqlite"
    stranger = bob.acquire(RESOURCE, ttl=60)
    with Guard(registry, path=path) as open_guard:
        open_guard.check(RESOURCE, stranger.token)
    with Guard(registry, path=path, mode=mode, admission=Admission.local([registry.chain.accounts[1]])) as guard:
        with pytest.raises(NotAdmitted):
            guard.check(RESOURCE, stranger.token)


# ---------------------------------------------------------------------------
# Guard.check_request and FencingMiddleware
# ---------------------------------------------------------------------------


def test_a_stranger_s_signed_request_is_refused_and_not_remembered(registry, alice, bob, admitted_only_alice, tmp_path):
    guard = admitted_only_alice
    stranger = bob.acquire(RESOURCE, ttl=60)
    request = sign(stranger)
    before = store_state(guard.path)
    with pytest.raises(NotAdmitted, match="not in this service's list"):
        guard.check_request(request, BODY, action=ACTION)
    assert store_state(guard.path) == before
    # Not remembered: a guard without admission on the same store still takes it, once (the control).
    with Guard(registry, path=guard.path, requests=RequestPolicy(audience=AUDIENCE)) as open_guard:
        assert open_guard.check_request(request, BODY, action=ACTION) == request


def test_an_admitted_holder_s_signed_request_passes(alice, admitted_only_alice):
    lease = alice.acquire(RESOURCE, ttl=60)
    request = sign(lease)
    assert admitted_only_alice.check_request(request, BODY, action=ACTION) == request
    assert admitted_only_alice.mark(RESOURCE) == lease.token


def test_the_middleware_answers_403_to_a_stranger_and_lets_the_admitted_holder_write(
    registry, alice, bob, chain, admitted_only_alice
):
    guard = admitted_only_alice
    app, writes = make_app(guard)
    stranger = bob.acquire(RESOURCE, ttl=5)
    before = store_state(guard.path)
    answer = post(app, sign(stranger))
    assert answer.status_code == 403 and answer.json()["error"] == "NotAdmitted"
    assert writes == [] and store_state(guard.path) == before
    chain.advance_time(10)
    lease = alice.acquire(RESOURCE, ttl=60)
    answer = post(app, sign(lease))
    assert answer.status_code == 200, answer.text
    assert writes == [(alice.sender, BODY)]


def test_control_the_middleware_without_admission_lets_the_stranger_write(registry, bob, tmp_path):
    with Guard(registry, path=tmp_path / "open.sqlite", requests=RequestPolicy(audience=AUDIENCE)) as guard:
        app, writes = make_app(guard)
        stranger = bob.acquire(RESOURCE, ttl=60)
        answer = post(app, sign(stranger))
        assert answer.status_code == 200 and writes == [(bob.sender, BODY)]


def test_a_contract_holder_is_admitted_by_its_own_address_not_its_owner_s(registry, chain, tmp_path):
    """Admission judges the holder the registry records: the wallet, whose owner's key signs (ERC-1271)."""
    owner = chain.accounts[4]
    wallet = AgentWallet(registry, owner)
    lease = wallet.acquire(RESOURCE, ttl=60)
    request = lease.sign(BODY, action=ACTION, audience=AUDIENCE, key=chain.key_of(owner))
    with Guard(
        registry,
        path=tmp_path / "owner.sqlite",
        admission=Admission.local([owner]),
        requests=RequestPolicy(audience=AUDIENCE),
    ) as guard:
        with pytest.raises(NotAdmitted) as refused:
            guard.check_request(request, BODY, action=ACTION)
        assert refused.value.holder == wallet.address
        assert guard.mark(RESOURCE) == 0
    with Guard(
        registry,
        path=tmp_path / "wallet.sqlite",
        admission=Admission.local([wallet.address]),
        requests=RequestPolicy(audience=AUDIENCE),
    ) as guard:
        assert guard.check_request(request, BODY, action=ACTION) == request
        forged = lease.sign(BODY, action=ACTION, audience=AUDIENCE, key=Account.create().key)
        with pytest.raises(Exception, match="does not accept"):  # the signature is judged before admission
            guard.check_request(forged, BODY, action=ACTION)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "holders, error",
    [
        ([], InvalidInput),
        (["0x1234"], InvalidInput),
        ("0x" + "ab" * 20, InvalidInput),
        (None, InvalidInput),
        (["0x" + "aB" * 20], InvalidInput),
    ],
    ids=["empty", "short", "a bare string", "none", "bad checksum"],
)
def test_a_malformed_local_list_is_refused(holders, error):
    with pytest.raises(error):
        Admission.local(holders)


def test_an_admission_built_directly_is_checked_as_the_named_ones_are(alice):
    assert Admission("local", [alice.sender]) == Admission.local([alice.sender])
    for kind, holders in (("local", None), ("local", []), ("on-chain", [alice.sender]), ("anyone", None)):
        with pytest.raises(InvalidInput):
            Admission(kind, holders)


def test_a_guard_refuses_an_admission_that_is_not_one(registry, tmp_path):
    with pytest.raises(InvalidInput, match="admission must be"):
        Guard(registry, path=tmp_path / "g.sqlite", admission=["0x" + "ab" * 20])
    assert not (tmp_path / "g.sqlite").exists()


def test_admissions_compare_and_print_as_built(alice):
    assert Admission.local([alice.sender.lower()]) == Admission.local([alice.sender])
    assert Admission.on_chain() == Admission.on_chain() != Admission.local([alice.sender])
    assert repr(Admission.on_chain()) == "Admission.on_chain()"
    assert alice.sender in repr(Admission.local([alice.sender]))
