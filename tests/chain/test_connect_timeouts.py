"""``Chain.connect``'s waits are one value, ``timeouts=Timeouts(...)``; the keywords before 0.2 still work.

Each old keyword (``request_timeout``, ``receipt_timeout``, ``confirmation_timeout``,
``unreachable_timeout``, ``poll_latency``) warns, naming the :class:`~chainfence.Timeouts` field that
replaces it, pointed at the caller's line, and builds the very chain the new form builds (the sender's
waits, the transport's request timeout), sync and asyncio, against the suite's anvil node. Each value
here differs from the default, so a keyword dropped on the way shows. A bad value is ``InvalidInput``
naming the field, before anything is asked of a node.
"""

from __future__ import annotations

import asyncio
import dataclasses
import warnings

import pytest

from chainfence import Chain, Timeouts
from chainfence.aio import AsyncChain
from chainfence.errors import InvalidInput
from tests.support.anvil import dev_keys

#: Each old keyword, the field it became, and a value that is not the default.
OLD = [
    ("request_timeout", "request", 7.0),
    ("receipt_timeout", "receipt", 33.0),
    ("confirmation_timeout", "confirmation", 44.0),
    ("unreachable_timeout", "unreachable", 0.7),
    ("poll_latency", "poll", 0.02),
]


def waits(chain: Chain) -> tuple[float, ...]:
    """What the timeouts became in a connected chain."""
    sender = chain._sender
    return (
        chain.rpc.transport.timeout,
        sender.receipt_timeout,
        sender.confirmation_timeout,
        sender.unreachable_timeout,
        sender.poll_latency,
    )


def test_the_defaults_are_the_old_keywords_defaults():
    assert Timeouts() == Timeouts(request=10.0, receipt=120.0, confirmation=600.0, unreachable=None, poll=0.1)
    assert all(getattr(Timeouts(), field) != value for _, field, value in OLD), "the values below are not defaults"


@pytest.mark.parametrize(("old", "field", "value"), OLD)
def test_each_old_keyword_warns_and_builds_the_chain_the_new_form_builds(anvil_node, old, field, value):
    key = dev_keys(1)[0]
    with pytest.warns(DeprecationWarning, match=rf"connect\({old}=\.\.\.\) is deprecated.*Timeouts\({field}=") as seen:
        before = Chain.connect(anvil_node.url, key, **{old: value})
    assert [w.filename for w in seen] == [__file__], "the warning points at the caller's line"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = Chain.connect(anvil_node.url, key, timeouts=Timeouts(**{field: value}))
    assert waits(before) == waits(after) != waits(Chain.connect(anvil_node.url, key))


def test_every_old_keyword_at_once_is_one_timeouts(anvil_node):
    with pytest.warns(DeprecationWarning) as seen:
        before = Chain.connect(anvil_node.url, **{old: value for old, _, value in OLD})
    assert len(seen) == len(OLD)
    after = Chain.connect(anvil_node.url, timeouts=Timeouts(**{field: value for _, field, value in OLD}))
    assert waits(before) == waits(after) == (7.0, 33.0, 44.0, 0.7, 0.02)


@pytest.mark.parametrize(("old", "field", "value"), OLD)
def test_asyncio_connect_takes_them_the_same_way(anvil_node, old, field, value):
    async def both():
        with pytest.warns(DeprecationWarning, match=rf"{old}=.*Timeouts\({field}=") as seen:
            before = await AsyncChain.connect(anvil_node.url, **{old: value})
        assert [w.filename for w in seen] == [__file__]
        after = await AsyncChain.connect(anvil_node.url, timeouts=Timeouts(**{field: value}))
        try:
            return waits(before.chain), waits(after.chain)
        finally:
            await before.aclose()
            await after.aclose()

    before, after = asyncio.run(both())
    assert before == after


def test_old_and_new_together_is_refused_before_anything_is_asked():
    with pytest.raises(InvalidInput, match=r"timeouts=Timeouts\(\.\.\.\), not also as receipt_timeout="):
        Chain.connect("http://127.0.0.1:1", timeouts=Timeouts(request=5), receipt_timeout=3)


def test_an_unknown_keyword_is_a_type_error_and_a_bad_timeouts_invalid_input():
    with pytest.raises(TypeError, match="'recept_timeout'"):
        Chain.connect("http://127.0.0.1:1", recept_timeout=3)
    with pytest.raises(InvalidInput, match="timeouts must be a Timeouts"):
        Chain.connect("http://127.0.0.1:1", timeouts=30)


@pytest.mark.parametrize("field", ["request", "receipt", "confirmation", "unreachable", "poll"])
@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), True, "10"])
def test_a_bad_wait_is_invalid_input_naming_its_field(field, bad):
    with pytest.raises(InvalidInput, match=rf"Timeouts\.{field} must be a positive, finite number") as refused:
        Timeouts(**{field: bad})
    assert refused.value.argument == f"timeouts.{field}"


def test_a_bad_old_keyword_is_refused_as_before(anvil_node):
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInput, match=r"Timeouts\.receipt"):
        Chain.connect(anvil_node.url, receipt_timeout=0)


def test_timeouts_are_a_frozen_value():
    timeouts = Timeouts(receipt=300)
    assert repr(timeouts) == "Timeouts(request=10.0, receipt=300, confirmation=600.0, unreachable=None, poll=0.1)"
    assert timeouts == Timeouts(receipt=300) and hash(timeouts) == hash(Timeouts(receipt=300))
    with pytest.raises(dataclasses.FrozenInstanceError):
        timeouts.receipt = 1  # type: ignore[misc]
    assert dataclasses.replace(timeouts, poll=0.5) == Timeouts(receipt=300, poll=0.5)
    with pytest.raises(InvalidInput):
        dataclasses.replace(timeouts, poll=0)
