"""Holder-signed requests against a real registry: accepted once, from the holder, for this registry."""

from __future__ import annotations

import dataclasses
import time

import pytest
from eth_account import Account

from chainfence import FencedRequest, Guard, Registry
from chainfence.errors import (
    InvalidSignature,
    MalformedRequest,
    ReplayedRequest,
    RequestExpired,
    RequestMisdirected,
    StaleToken,
    TokenNotCurrent,
    UnknownToken,
)
from chainfence.guard import RequestPolicy
from tests.support.wallet import AgentWallet

BODY = b'{"report": "daily", "rows": 42}'
ACTION = "POST /reports/daily"
AUDIENCE = "reports-service"


def signed(guard, lease, agent, *, domain=None, **fields) -> FencedRequest:
    """A request signed with ``agent``'s key: by default for ``lease``, ``BODY``, in the guard's domain."""
    fields = {
        "resource": lease.resource,
        "token": lease.token,
        "holder": lease.holder,
        "payload": BODY,
        "action": ACTION,
        "audience": AUDIENCE,
        **fields,
    }
    return FencedRequest.sign(domain or guard.domain(), key=agent.chain.key_of(agent.sender), **fields)


def sign(lease, **options) -> FencedRequest:
    return lease.sign(BODY, action=ACTION, audience=AUDIENCE, **options)


def check(guard, request, body=BODY, **options):
    return guard.check_request(request, body, action=ACTION, **options)


@pytest.fixture
def guard(registry, tmp_path):
    with Guard(registry, path=tmp_path / "guard.sqlite", requests=RequestPolicy(audience=AUDIENCE)) as guard:
        yield guard


def test_a_request_signed_by_the_holder_is_accepted_once(alice, guard):
    lease = alice.acquire("reports/daily", ttl=60)
    request = lease.sign(BODY, action=ACTION, audience=AUDIENCE)
    assert check(guard, request, BODY) is request
    assert guard.mark("reports/daily") == lease.token
    with pytest.raises(ReplayedRequest):
        check(guard, request, BODY)


def test_a_replay_is_refused_after_the_guard_restarts(alice, registry, tmp_path):
    lease = alice.acquire("reports/daily", ttl=60)
    request = lease.sign(BODY, action=ACTION, audience=AUDIENCE)
    with Guard(registry, path=tmp_path / "g.sqlite", requests=RequestPolicy(audience=AUDIENCE)) as guard:
        check(guard, request, BODY)
    with Guard(registry, path=tmp_path / "g.sqlite", requests=RequestPolicy(audience=AUDIENCE)) as restarted:
        with pytest.raises(ReplayedRequest):
            check(restarted, request, BODY)


def test_two_requests_of_one_holder_are_distinct(alice, guard):
    lease = alice.acquire("reports/daily", ttl=60)
    check(guard, lease.sign(BODY, action=ACTION, audience=AUDIENCE), BODY)
    check(guard, lease.sign(BODY, action=ACTION, audience=AUDIENCE), BODY)  # a fresh nonce: not a replay


def test_another_body_is_refused(alice, guard):
    request = alice.acquire("reports/daily", ttl=60).sign(BODY, action=ACTION, audience=AUDIENCE)
    with pytest.raises(MalformedRequest) as refused:
        check(guard, request, BODY + b" ")
    assert refused.value.field == "payload"


def test_an_expired_request_is_refused(alice, guard):
    lease = alice.acquire("reports/daily", ttl=60)
    expired = signed(guard, lease, alice, deadline=int(time.time()) - 1)
    with pytest.raises(RequestExpired):
        check(guard, expired, BODY)


def test_a_request_whose_deadline_was_pushed_back_is_refused(alice, guard):
    """The deadline is signed: extending it after the fact breaks the signature."""
    request = alice.acquire("reports/daily", ttl=60).sign(BODY, action=ACTION, audience=AUDIENCE)
    extended = dataclasses.replace(request, deadline=request.deadline + 600)
    with pytest.raises(InvalidSignature):
        check(guard, extended, BODY)


def test_a_deadline_too_far_away_is_refused(alice, guard):
    lease = alice.acquire("reports/daily", ttl=60)
    far = lease.sign(BODY, action=ACTION, audience=AUDIENCE, valid_for=10 * 3_600)
    with pytest.raises(MalformedRequest, match="deadline"):
        check(guard, far, BODY)


def test_a_request_signed_by_someone_else_naming_the_holder_is_refused(alice, bob, guard):
    lease = alice.acquire("reports/daily", ttl=60)
    forged = signed(guard, lease, bob)
    with pytest.raises(InvalidSignature) as refused:
        check(guard, forged, BODY)
    assert refused.value.http_status == 401


def test_a_non_holder_signing_as_himself_is_refused(alice, bob, guard):
    """Bob signs honestly as Bob, with Alice's (public) token: valid signature, wrong holder."""
    lease = alice.acquire("reports/daily", ttl=60)
    own = signed(guard, lease, bob, holder=bob.sender)
    with pytest.raises(RequestMisdirected) as refused:
        check(guard, own, BODY)
    assert refused.value.http_status == 403
    assert (refused.value.field, refused.value.signed, refused.value.expected) == ("holder", bob.sender, alice.sender)


def test_a_request_for_another_resource_is_refused(alice, bob, guard):
    """Alice's token for "reports/daily" presented for "reports/weekly" (held by Bob)."""
    lease = alice.acquire("reports/daily", ttl=60)
    bob.acquire("reports/weekly", ttl=60)
    wrong = signed(guard, lease, alice, resource="reports/weekly")
    with pytest.raises(TokenNotCurrent):
        check(guard, wrong, BODY)


def test_a_request_signed_for_another_registry_is_refused(alice, chain, guard):
    """The domain binds the registry address: a signature made for registry B is worthless at A."""
    other = Registry.deploy(chain, max_ttl=3_600)
    lease = alice.acquire("reports/daily", ttl=60)
    for_other = signed(guard, lease, alice, domain=other.eip712_domain())
    with pytest.raises(InvalidSignature):
        check(guard, for_other, BODY)


def test_a_request_signed_for_another_chain_is_refused(alice, guard):
    lease = alice.acquire("reports/daily", ttl=60)
    domain = dataclasses.replace(guard.domain(), chain_id=guard.domain().chain_id + 1)
    cross_chain = signed(guard, lease, alice, domain=domain)
    with pytest.raises(InvalidSignature):
        check(guard, cross_chain, BODY)


def test_a_stale_holder_signing_its_old_token_is_refused(alice, bob, chain, guard):
    old = alice.acquire("reports/daily", ttl=10)
    check(guard, old.sign(BODY, action=ACTION, audience=AUDIENCE), BODY)
    chain.advance_time(11)
    new = bob.acquire("reports/daily", ttl=60)
    check(guard, new.sign(BODY, action=ACTION, audience=AUDIENCE), BODY)
    with pytest.raises(StaleToken):
        check(guard, old.sign(BODY, action=ACTION, audience=AUDIENCE), BODY)


def test_a_forged_token_in_a_signed_request_is_refused_and_moves_nothing(alice, guard):
    lease = alice.acquire("reports/daily", ttl=60)
    guard.check(lease.resource, lease.token)
    forged = signed(guard, lease, alice, token=lease.token + 1000)
    with pytest.raises(UnknownToken):
        check(guard, forged, BODY)
    assert guard.mark(lease.resource) == lease.token


def test_a_rejected_request_can_be_resent_once_fixed(alice, guard):
    """Only accepted requests are remembered: a refusal does not burn the request."""
    lease = alice.acquire("reports/daily", ttl=60)
    request = lease.sign(BODY, action=ACTION, audience=AUDIENCE)
    with pytest.raises(MalformedRequest):
        check(guard, request, b"other")
    assert check(guard, request, BODY) is request


def test_a_contract_holder_signs_through_erc1271(registry, chain, guard):
    """An AgentWallet holds the lease; its owner's key signs; the guard asks the wallet (ERC-1271)."""
    owner = chain.accounts[4]
    wallet = AgentWallet(registry, owner)
    lease = wallet.acquire("agents/wallet-job", ttl=60)
    assert lease.holder == wallet.address
    request = lease.sign(BODY, action=ACTION, audience=AUDIENCE, key=chain.key_of(owner))
    assert check(guard, request, BODY) is request
    stranger = lease.sign(BODY, action=ACTION, audience=AUDIENCE, key=Account.create().key)
    with pytest.raises(InvalidSignature, match="does not accept"):
        check(guard, stranger, BODY)


def test_requests_round_trip_through_http_headers(alice, guard):
    lease = alice.acquire("rapports/été", ttl=60)
    request = lease.sign(BODY, action=ACTION, audience=AUDIENCE)
    headers = {k.lower(): v for k, v in request.to_headers().items()}  # as a server sees them
    assert all(v.isascii() for v in headers.values())
    parsed = FencedRequest.from_headers(headers)
    assert parsed == request
    assert check(guard, parsed, BODY) == request


# ---------------------------------------------------------------------------
# Bound to an action and an audience; a refusal changes nothing
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "audience", "field"),
    [
        ("PUT /reports/daily", AUDIENCE, "action"),  # another method
        ("POST /reports/daily?overwrite=1", AUDIENCE, "action"),  # another query
        ("POST /reports/weekly", AUDIENCE, "action"),  # another path
        (ACTION, "billing-service", "audience"),  # another service fenced by the same resource
    ],
)
def test_a_request_is_accepted_only_for_the_action_and_audience_it_was_signed_for(
    alice, guard, action, audience, field
):
    lease = alice.acquire("reports/daily", ttl=60)
    request = sign(lease)
    with pytest.raises(RequestMisdirected) as refused:
        guard.check_request(request, BODY, action=action, audience=audience)
    assert refused.value.field == field and refused.value.expected == (action if field == "action" else audience)
    assert refused.value.http_status == 403
    assert guard.mark("reports/daily") == 0, "a refusal records nothing"
    assert check(guard, request) is request, "and does not burn the request for its real use"


def test_a_relabelled_request_does_not_verify(alice, guard):
    """Changing the action or audience in transit (the headers) breaks the signature."""
    lease = alice.acquire("reports/daily", ttl=60)
    relabelled = dataclasses.replace(sign(lease), action="DELETE /reports/daily")
    with pytest.raises(InvalidSignature):
        guard.check_request(relabelled, BODY, action="DELETE /reports/daily")


def test_a_request_signed_by_a_non_holder_moves_no_mark(alice, bob, guard):
    """Bob signs Alice's (public) token as himself: RequestMisdirected (field "holder"), and the mark did not move."""
    lease = alice.acquire("reports/daily", ttl=60)
    with pytest.raises(RequestMisdirected, match="held by"):
        check(guard, signed(guard, lease, bob, holder=bob.sender))
    assert guard.mark("reports/daily") == 0


def test_a_request_is_never_accepted_twice_when_the_clock_steps_back(alice, guard, monkeypatch):
    """Accepted, then pruned once its deadline is long gone, then the verifier's clock steps back (an NTP
    step, a VM restored from a snapshot) to before the deadline: the replay is still refused."""
    import chainfence.guard._requests as guard_module

    lease = alice.acquire("reports/daily", ttl=3_600)
    now = time.time()
    request = sign(lease, valid_for=120)
    check(guard, request)
    later = (int(now) + 3_600) // 64 * 64 + 64  # a multiple of 64: this check prunes
    monkeypatch.setattr(guard_module.time, "time", lambda: later)
    check(guard, sign(lease, valid_for=60))  # signed "now": valid at `later`? sign with the faked clock
    assert (
        guard._conn()
        .execute("SELECT COUNT(*) FROM seen_requests WHERE deadline = ?", (request.deadline,))
        .fetchone()[0]
        == 0
    ), "pruned"
    monkeypatch.setattr(guard_module.time, "time", lambda: now)  # the clock steps back
    with pytest.raises(RequestExpired, match="forgets"):
        check(guard, request)


def test_control_pruning_without_a_horizon_accepts_the_replay(alice, guard, monkeypatch):
    import chainfence.guard._requests as guard_module

    lease = alice.acquire("reports/daily", ttl=3_600)
    now = time.time()
    request = sign(lease, valid_for=120)
    check(guard, request)
    conn = guard._conn()
    conn.execute("DELETE FROM seen_requests")  # what pruning did before: forget, and remember nothing
    monkeypatch.setattr(guard_module.time, "time", lambda: now)
    assert check(guard, request) is request, "accepted twice"


def test_a_contract_holder_s_code_runs_only_after_the_cheap_checks_and_with_a_gas_cap(registry, chain, guard):
    owner = chain.accounts[4]
    wallet = AgentWallet(registry, owner)
    old = wallet.acquire("agents/job", ttl=60)
    calls = []
    real_call = chain.call

    def spy(to, data, **kwargs):
        if to == wallet.address:
            calls.append(kwargs.get("gas"))
        return real_call(to, data, **kwargs)

    chain.call = spy
    try:
        assert check(guard, sign(old, key=chain.key_of(owner)))
        assert calls == [guard.erc1271_gas], "the holder's code ran once, with the gas cap"
        new = wallet.acquire("agents/job", ttl=60)  # re-acquire: `old` is superseded...
        guard.check("agents/job", new.token)  # ...and the guard has seen it
        with pytest.raises(StaleToken):
            check(guard, sign(old, key=chain.key_of(owner)))
        assert len(calls) == 1, "a stale token is refused before the holder's code runs"
    finally:
        del chain.call


def test_a_claim_with_a_long_item_name_signs_requests_its_guard_accepts(alice, guard):
    """A claimed item's name is workset»item, up to 257 bytes: a request names it so (the old length
    check took at most 128 bytes, so a claimant of a long item could not sign at all)."""
    claim = alice.workset("w" * 100).claim(["i" * 100], ttl=60)
    assert len(claim.resource.encode()) == 202
    request = claim.sign(BODY, action=ACTION, audience=AUDIENCE)
    assert check(guard, request, BODY) is request
    assert guard.mark(claim.resource) == claim.token


def test_a_guard_records_refused_requests_and_writes_for_the_timeline(registry, alice, bob, chain, tmp_path):
    """Issue 27: the timeline's rejections overlay needed a hand-made file. Guard(rejection_log=) records each
    refusal, a request's with its signer; `audit timeline --rejections` reads it, and the page draws each on
    its resource's lane."""
    import json

    from chainfence.audit.timeline import render
    from chainfence.cli.audit import _rejections
    from tests.support.svg_dom import Page

    log = tmp_path / "rejections.jsonl"
    with Guard(
        registry, path=tmp_path / "logged.sqlite", requests=RequestPolicy(audience=AUDIENCE), rejection_log=log
    ) as guard:
        first = alice.acquire("reports/daily", ttl=30)
        stale = sign(first)
        chain.advance_time(31)
        second = bob.acquire("reports/daily", ttl=60)
        accepted = sign(second)
        assert check(guard, accepted).token == second.token
        with pytest.raises(StaleToken):
            check(guard, stale)
        with pytest.raises(StaleToken):
            guard.check("reports/daily", first.token)
        with pytest.raises(ReplayedRequest):
            check(guard, accepted)  # once only
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["resource"], line["token"], line["holder"]) for line in lines] == [
        ("reports/daily", first.token, alice.sender),  # the request's signer
        ("reports/daily", first.token, None),  # a bare token names no sender
        ("reports/daily", second.token, bob.sender),
    ]
    assert [line["reason"].split(":")[0] for line in lines] == ["StaleToken", "StaleToken", "ReplayedRequest"]
    page = Page(render([], rejections=_rejections(str(log)), now=max(line["time"] for line in lines)))
    marks = page.kind("rejection")
    assert sum(int(mark.attrs.get("data-count", "1")) for mark in marks) == 3
    assert {mark.attrs["data-resource"] for mark in marks} == {"reports/daily"}
