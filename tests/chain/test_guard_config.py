"""``Guard`` and ``AsyncGuard.open`` take their settings as values; the keywords before 0.2 still work.

Each old keyword warns, naming what replaces it, pointed at the caller's line, and opens the guard the
new form opens: the same settings, and the same verdicts (a token accepted, a stale one refused, a signed
request judged by the same policy), on both backends. With ``headers=`` the proven guard: on anvil the
same proven verdicts; on eth-tester, which serves no proofs, the same refusal (``ProofsNotServed``).
Every value here differs from the default, so a keyword dropped on the way shows. Giving a group in both
forms is ``InvalidInput``, and nothing is opened.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from chainfence import Guard
from chainfence.aio import AsyncGuard
from chainfence.errors import InvalidInput, ProofsNotServed, RequestRejected, StaleToken
from chainfence.guard import Follow, Mark, Proven, RequestPolicy
from chainfence.proofs import TrustedHeaders

NAME = "config/guarded"
ACTION = "POST /reports"


def trusted(chain):
    return TrustedHeaders(chain, clock=chain.now, max_age=3_600)


def cases(chain):
    """(old keyword, the old call's keywords, the new call's keywords, what the warning names)."""
    headers = trusted(chain)
    return [
        ("follow_interval", {"mode": "follow", "follow_interval": 7.0}, {"mode": Follow(interval=7.0)}, "Follow"),
        ("max_lag", {"mode": "follow", "max_lag": 12.5}, {"mode": Follow(max_lag=12.5)}, "Follow"),
        (
            "completeness",
            {"mode": "follow", "completeness": "receipts"},
            {"mode": Follow(completeness="receipts")},
            "Follow",
        ),
        ("audience", {"audience": "svc"}, {"requests": RequestPolicy(audience="svc")}, "RequestPolicy"),
        ("max_request_age", {"max_request_age": 60}, {"requests": RequestPolicy(max_age=60)}, "RequestPolicy"),
        ("erc1271_gas", {"erc1271_gas": 50_000}, {"requests": RequestPolicy(erc1271_gas=50_000)}, "RequestPolicy"),
        ("headers", {"mode": "proven", "headers": headers}, {"mode": Proven(headers)}, "Proven"),
        ("headers", {"headers": headers}, {"mode": Mark(headers=headers)}, "Proven"),
        ("headers", {"mode": "follow", "headers": headers}, {"mode": Follow(headers=headers)}, "Proven"),
        (
            "proof_provider",
            {"mode": "proven", "headers": headers, "proof_provider": chain},
            {"mode": Proven(headers, proofs=chain)},
            "Proven",
        ),
    ]


def settings(guard) -> tuple:
    return (
        guard.mode,
        guard.follow_interval,
        guard.max_lag,
        guard.completeness,
        guard.headers,
        guard.proof_provider,
        guard.audience,
        guard.max_request_age,
        guard.erc1271_gas,
        guard.confirmations,
        guard.exclusive,
    )


def verdicts(guard, lease, stale) -> tuple:
    """What the guard says of the holder's token, of a stale one, and of signed requests."""
    accepted = guard.check(NAME, lease.token)
    try:
        guard.check(NAME, stale)
        refused = None
    except StaleToken as error:
        refused = (type(error).__name__, error.current_token)
    request = lease.sign(b"body", action=ACTION, audience="svc", valid_for=120)
    try:
        guard.check_request(request, b"body", action=ACTION, audience=None if guard.audience else "svc")
        signed = "accepted"
    except RequestRejected as error:  # max_age below the request's deadline: MalformedRequest
        signed = type(error).__name__
    return accepted, refused, signed, guard.marks()


def opened(open_guard, story):
    """(settings, verdicts) of the guard ``open_guard()`` opens, or the name of its refusal."""
    try:
        guard = open_guard()
    except ProofsNotServed as refused:
        return type(refused).__name__
    with guard:
        return settings(guard), verdicts(guard, *story)


@pytest.fixture
def story(registry, alice, bob, chain):
    """Alice's lease ran out and bob holds the resource now: alice's token is stale."""
    first = alice.acquire(NAME, ttl=10)
    chain.advance_time(11)
    return bob.acquire(NAME, ttl=600), first.token


def test_each_old_keyword_warns_and_opens_the_guard_the_new_form_opens(registry, story, tmp_path):
    chain = registry.chain
    for index, (old, before, after, named) in enumerate(cases(chain)):

        def old_form(path=tmp_path / f"old-{index}.sqlite", before=before):
            return Guard(registry, path, **before)

        def new_form(path=tmp_path / f"new-{index}.sqlite", after=after):
            return Guard(registry, path, **after)

        with pytest.warns(DeprecationWarning) as seen:
            was = opened(old_form, story)
        said = [str(w.message) for w in seen]
        assert any(re.search(rf"Guard\({old}=\.\.\.\) is deprecated.*use .*{named}\(", one) for one in said), said
        assert {w.filename for w in seen} == {__file__}, "the warning points at the caller's line"
        assert was == opened(new_form, story), old
        if chain.rpc.embedded and "headers" in before:
            assert was == "ProofsNotServed"
        else:
            plain = opened(lambda path=tmp_path / f"plain-{index}.sqlite": Guard(registry, path), story)
            assert was != plain, old


def test_async_guard_open_takes_the_old_keywords_the_same_way(registry, story, tmp_path):
    chain = registry.chain

    async def both(before, after, index):
        with pytest.warns(DeprecationWarning) as seen:
            try:
                old = await AsyncGuard.open(registry, tmp_path / f"aold-{index}.sqlite", **before)
            except ProofsNotServed:
                old = None
        assert {w.filename for w in seen} == {__file__}
        try:
            new = await AsyncGuard.open(registry, tmp_path / f"anew-{index}.sqlite", **after)
        except ProofsNotServed:
            new = None
        if old is None or new is None:
            assert old is new is None and chain.rpc.embedded
            return
        try:
            assert settings(old) == settings(new)
            assert await old.check(NAME, story[0].token) == await new.check(NAME, story[0].token)
        finally:
            await old.close()
            await new.close()

    async def every():
        for index, (_, before, after, _) in enumerate(cases(chain)):
            await both(before, after, index)

    asyncio.run(every())


def test_a_group_given_both_ways_is_refused_and_nothing_is_opened(registry, tmp_path):
    path = tmp_path / "g.sqlite"
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInput, match=re.escape("mode=Follow(...), not also")):
        Guard(registry, path, mode=Follow(interval=2), follow_interval=3)
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInput, match="requests=RequestPolicy"):
        Guard(registry, path, requests=RequestPolicy(audience="a"), audience="b")
    with pytest.raises(TypeError, match="'follow_intreval'"):
        Guard(registry, path, follow_intreval=3)
    with pytest.raises(InvalidInput, match="requests must be a RequestPolicy"):
        Guard(registry, path, requests={"audience": "a"})
    with pytest.raises(InvalidInput, match="mode must be"):
        Guard(registry, path, mode="optimistic")
    assert not path.exists()


def test_a_follow_value_s_defaults_resolve_as_the_keywords_did(registry, tmp_path):
    with Guard(registry, tmp_path / "g.sqlite", mode=Follow(interval=4)) as guard:
        assert settings(guard)[:4] == ("follow", 4.0, 12.0, "bloom")
        assert guard._follower._max_lag == 12.0
    with (
        pytest.warns(DeprecationWarning),
        Guard(registry, tmp_path / "h.sqlite", mode="follow", follow_interval=4) as old,
    ):
        assert settings(old)[:4] == ("follow", 4.0, 12.0, "bloom")
