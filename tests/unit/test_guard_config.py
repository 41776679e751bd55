"""A guard's settings as values: ``Mark``, ``Follow``, ``Proven`` and ``RequestPolicy`` refuse what a guard
would refuse, before any store is opened, with ``InvalidInput`` naming the field; they are frozen and
compared by value; a mode's name is its default value (``"follow"`` is ``Follow()``)."""

from __future__ import annotations

import dataclasses
import inspect
import math

import pytest

from chainfence import Guard
from chainfence.errors import InvalidInput
from chainfence.guard import Follow, Mark, Proven, RequestPolicy, _config
from chainfence.proofs import TrustedHeaders
from tests.support.fakes import FakeRegistry

HEADERS = TrustedHeaders("http://127.0.0.1:1")


@pytest.mark.parametrize(
    ("build", "argument"),
    [
        (lambda: Follow(interval=0), "mode.interval"),
        (lambda: Follow(interval=-1), "mode.interval"),
        (lambda: Follow(interval=math.inf), "mode.interval"),
        (lambda: Follow(interval=math.nan), "mode.interval"),
        (lambda: Follow(interval=True), "mode.interval"),
        (lambda: Follow(interval="1"), "mode.interval"),
        (lambda: Follow(max_lag=0), "mode.max_lag"),
        (lambda: Follow(max_lag=math.nan), "mode.max_lag"),
        (lambda: Follow(completeness="all"), "mode.completeness"),
        (lambda: Follow(headers="http://127.0.0.1:1"), "mode.headers"),
        (lambda: Follow(proofs="http://127.0.0.1:1"), "mode.proofs"),
        (lambda: Mark(headers=object()), "mode.headers"),
        (lambda: Mark(proofs="http://127.0.0.1:1"), "mode.proofs"),
        (lambda: Proven(None), "mode.headers"),
        (lambda: Proven("http://127.0.0.1:1"), "mode.headers"),
        (lambda: RequestPolicy(audience=""), "requests.audience"),
        (lambda: RequestPolicy(audience=b"svc"), "requests.audience"),
        (lambda: RequestPolicy(max_age=0), "requests.max_age"),
        (lambda: RequestPolicy(max_age=1.5), "requests.max_age"),
        (lambda: RequestPolicy(erc1271_gas=0), "requests.erc1271_gas"),
        (lambda: RequestPolicy(erc1271_gas=True), "requests.erc1271_gas"),
    ],
)
def test_a_bad_setting_is_invalid_input_naming_its_field(build, argument):
    with pytest.raises(InvalidInput) as refused:
        build()
    assert refused.value.argument == argument


def test_an_endless_max_lag_is_allowed():
    assert Follow(max_lag=math.inf).max_lag == math.inf


def test_the_values_are_frozen_and_compared_by_value():
    follow = Follow(interval=0.5, completeness="receipts")
    assert follow == Follow(0.5, None, "receipts") and hash(follow) == hash(Follow(0.5, None, "receipts"))
    assert repr(follow) == "Follow(interval=0.5, max_lag=None, completeness='receipts', headers=None, proofs=None)"
    assert repr(RequestPolicy()) == "RequestPolicy(audience=None, max_age=3600, erc1271_gas=200000)"
    assert Proven(HEADERS) == Proven(headers=HEADERS) != Mark(headers=HEADERS)
    for value, field in ((follow, "interval"), (RequestPolicy(), "audience"), (Mark(), "headers")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)
    assert dataclasses.replace(follow, max_lag=9) == Follow(0.5, 9, "receipts")
    with pytest.raises(InvalidInput):
        dataclasses.replace(follow, interval=0)


def settings(guard: Guard) -> tuple:
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
    )


@pytest.mark.parametrize(("name", "value"), [("mark", Mark()), ("follow", Follow())])
def test_a_mode_s_name_is_its_default_value(name, value):
    def given(mode):
        return _config.settings(mode, _config.DEFAULT_REQUESTS, {}, call="Guard", stacklevel=1)

    assert given(name) == given(value)
    assert given(name).mode == name


def test_a_mark_guard_by_name_and_by_value_are_the_same_guard(tmp_path):
    registry = FakeRegistry()
    with (
        Guard(registry, tmp_path / "by-name.sqlite", mode="mark") as by_name,
        Guard(registry, tmp_path / "by-value.sqlite", mode=Mark()) as by_value,
    ):
        assert settings(by_name) == settings(by_value) == ("mark", 1.0, 5.0, "bloom", None, None, None, 3_600, 200_000)


def test_the_signature_is_short_and_the_async_twin_takes_the_same():
    from chainfence.aio import AsyncGuard

    described = [(p.name, p.kind, p.default) for p in inspect.signature(Guard).parameters.values()]
    assert [name for name, *_ in described] == [
        "registry",
        "path",
        "mode",
        "confirmations",
        "exclusive",
        "timeout",
        "admission",
        "requests",
        "rejection_log",  # issue 27: the refusals the timeline draws
        "deprecated",
    ]
    twin = [(p.name, p.kind, p.default) for p in inspect.signature(AsyncGuard.open).parameters.values()]
    assert twin == described
