"""The public names the README promises, and the package's hygiene."""

from __future__ import annotations

import inspect
import logging

import chainfence
from chainfence import Chain, Guard, Lease, Registry, errors


def test_all_is_sorted_and_complete():
    assert chainfence.__all__ == sorted(chainfence.__all__)
    for name in chainfence.__all__:
        assert hasattr(chainfence, name)
    assert errors.__all__ == sorted(errors.__all__)


def test_design_names_exist():
    from chainfence.errors import ChainfenceError, LeaseExpired, LeaseHeld, NotHolder, StaleToken  # noqa: F401

    for name in ("embedded", "connect", "advance_time"):
        assert callable(getattr(Chain, name))
    for name in (
        "deploy",
        "at",
        "connect",
        "acquire",
        "renew",
        "release",
        "latest_token",
        "lease_of",
        "check_current",
    ):
        assert callable(getattr(Registry, name)), name
    for name in ("renew", "release", "__enter__", "__exit__"):
        assert callable(getattr(Lease, name))
    assert "path" in inspect.signature(Guard).parameters
    assert callable(Guard.check)


def test_the_library_logger_has_a_null_handler_and_no_config():
    logger = logging.getLogger("chainfence")
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)
    assert logger.level == logging.NOTSET


def test_version_is_exposed():
    assert chainfence.__version__ == "0.1.0"
