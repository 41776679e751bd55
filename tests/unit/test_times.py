"""chain_time writes what datetime wrote (it no longer imports datetime: a per-task command's start, issue #19)."""

from __future__ import annotations

import datetime
import random

import pytest

from chainfence._core.times import chain_time


def _with_datetime(seconds: object) -> str:
    """The formatter as it was, on datetime."""
    try:
        moment = datetime.datetime.fromtimestamp(int(seconds), datetime.UTC)  # type: ignore[call-overload]
    except (OverflowError, ValueError, OSError, TypeError):
        return f"chain time {seconds}"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


EDGES = [
    0,
    1,
    -1,
    1_795_554_531,
    253_402_300_799,  # 9999-12-31 23:59:59, the last second datetime writes
    253_402_300_800,  # year 10000: a number
    -62_135_596_800,  # 0001-01-01
    -62_135_596_801,  # year 0: a number
    2**31,
    -(2**31),
    2**63,
    -(2**63),
    10**30,
    1.5,
    "12",
    "x",
    None,
    float("nan"),
    float("inf"),
    9.9e300,
]


@pytest.mark.parametrize("seconds", EDGES, ids=repr)
def test_edges_are_written_as_datetime_wrote_them(seconds):
    assert chain_time(seconds) == _with_datetime(seconds)


def test_any_second_of_the_calendar_and_beyond_it_is_written_as_datetime_wrote_it():
    draw = random.Random(19)
    for _ in range(5_000):
        seconds = draw.randint(-(2**38), 2**38)
        assert chain_time(seconds) == _with_datetime(seconds), seconds
