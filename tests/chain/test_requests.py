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
    PayloadMismatch,
    ReplayedRequest,
    RequestExpired,
    SignerNotHolder,
    StaleToken,
    TokenNotCurrent,
    UnknownToken,
)
from tests.support.wallet import AgentWallet

BODY = b'{"report": "daily", "rows": 42}'
ACTION = "POST /reports/daily"
AUDIENCE = "reports-service"


def signed(guard, lease, agent, *, domain=None, **fields) -> FencedRequest:
    """A request signed with ``agent``'s key: by default for ``lease``, ``BODY``, in the guard's domain."""
    fields = {"resource": lease.resource, "token": lease.token, "holder": lease.holder, "payload": BODY,
              "action": ACTION, "audience": AUDIENCE, **fields}  # fmt: skip
    return FencedRequest.sign(domain or guard.domain(), key=agent.chain.key_of(agent.sender), **fields)


def sign(lease, **options) -> FencedRequest:
    return lease.sign(BODY, action=ACTION, audience=AUDIENCE, **options)


def check(guard, request, body=BODY, **options):
    return guard.check_request(request, body, action=ACTION, **options)


@pytest.fixture
def guard(registry, tmp_path):
    with Guard(registry, path=tmp_path / "guard.sqlite", audience=AUDIENCE) as guard:
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
    with Guard(registry, path=tmp_path / "g.sqlite", audience=AUDIENCE) as guard:
        check(guard, request, BODY)
    with Guard(registry, path=tmp_path / "g.sqlite", audience=AUDIENCE) as restarted:
        with pytest.raises(ReplayedRequest):
            check(restarted, request, BODY)


def test_two_requests_of_one_holder_are_distinct(alice, guard):
    lease = alice.acquire("reports/daily", ttl=60)
    check(guard, lease.sign(BODY, action=ACTION, audience=AUDIENCE), BODY)
    check(guard, lease.sign(BODY, action=ACTION, audience=AUDIENCE), BODY)  # a fresh nonce: not a replay


def test_another_body_is_refused(alice, guard):
    request = alice.acquire("reports/daily", ttl=60).sign(BODY, action=ACTION, audience=AUDIENCE)
    with pytest.raises(PayloadMismatch):
        check(guard, request, BODY + b" ")


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
    assert refused.value.status == 401


def test_a_non_holder_signing_as_himself_is_refused(alice, bob, guard):
    """Bob signs honestly as Bob, with Alice's (public) token: valid signature, wrong holder."""
    lease = alice.acquire("reports/daily", ttl=60)
    own = signed(guard, lease, bob, holder=bob.sender)
    with pytest.raises(SignerNotHolder) as refused:
        check(guard, own, BODY)
    assert refused.value.status == 403


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
    with pytest.raises(PayloadMismatch):
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
