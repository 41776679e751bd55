"""The part x way matrix of :mod:`chainfence.endings`: which test attacks which cell.

Every scenario test of this folder says which part and which ways it covers::

    @covers("keep", End.REVOKED)
    def test_keep_stops_the_work_at_the_revoke(alice, ...): ...

``test_matrix_complete.py`` imports every test module here and fails unless
every declared part (:func:`chainfence.endings.parts`) has a test for every
way it must handle, and every part the model promises is declared.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

#: (part, way) -> the tests that cover it ("module::name").
COVERED: dict[tuple[str, enum.Enum], list[str]] = {}


def covers(part: str, *ways: enum.Enum) -> Callable[[F], F]:
    """Record that the decorated test attacks ``part`` under each of ``ways``."""
    if not ways:
        raise ValueError("covers() needs at least one way")

    def mark(test: F) -> F:
        for way in ways:
            COVERED.setdefault((part, way), []).append(f"{test.__module__}::{test.__name__}")
        return test

    return mark
