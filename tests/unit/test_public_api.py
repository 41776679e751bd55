"""The public names the README promises, and the package's hygiene."""

from __future__ import annotations

import inspect
import json
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
    assert chainfence.__version__ == "0.2.0"


def test_dir_shows_the_public_names_and_nothing_the_package_uses_for_itself():
    """Issue 27: ``dir(chainfence)`` listed ``Any``, ``sys``, ``TYPE_CHECKING``, ``annotations``, ``_LAZY`` and
    every submodule loaded so far (``registry``, ``_core``, ...) beside the public names."""
    import subprocess
    import sys

    script = (
        "import json, chainfence\n"
        "first = dir(chainfence)\n"
        "chainfence.Registry, chainfence.Guard\n"
        "import chainfence.cli, chainfence.audit.timeline\n"
        "print(json.dumps([first, dir(chainfence)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    for listed in json.loads(done.stdout):
        public = [name for name in listed if not name.startswith("__")]
        assert public == sorted(chainfence.__all__), set(public) ^ set(chainfence.__all__)
        assert "__version__" in listed and "__doc__" in listed


def test_every_public_class_of_every_public_module_has_a_docstring():
    """Issue 27: FencingMiddleware had none (its API page was empty)."""
    import importlib
    import pkgutil

    missing = []
    for found in pkgutil.walk_packages(chainfence.__path__, "chainfence."):
        if any(part.startswith("_") for part in found.name.split(".")[1:]):
            continue
        try:
            module = importlib.import_module(found.name)
        except ImportError:  # an extra that is not installed here (its own tests say so)
            continue
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name, None)
            if inspect.isclass(value) and value.__module__ == module.__name__ and not (value.__doc__ or "").strip():
                missing.append(f"{found.name}.{name}")
    assert missing == []
