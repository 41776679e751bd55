"""A guard copied by fork() (gunicorn --preload, multiprocessing's fork start) never answers from a frozen copy.

An ``exclusive`` guard answers checks at the mark from memory. A forked child
gets a copy of that memory (and of the store's lock) while the parent moves
on: the child would accept a token the parent already superseded. The child
must either see the store or be refused with a typed error.
"""

from __future__ import annotations

import json
import os

import pytest

from chainfence import Guard
from chainfence import guard as guard_module
from tests.support.fakes import FakeRegistry

pytestmark = pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")


def in_child(after_parent_moved, action) -> dict:
    """Fork; the child waits until ``after_parent_moved()`` ran in the parent, then runs ``action`` and
    reports what happened. Sequenced by a pipe, not by time."""
    go_read, go_write = os.pipe()
    result_read, result_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.read(go_read, 1)
            try:
                outcome = {"accepted": action()}
            except Exception as error:
                outcome = {
                    "error": type(error).__name__,
                    "message": str(error),
                    "forked_from": getattr(error, "forked_from", None),
                }
            os.write(result_write, json.dumps(outcome).encode())
        finally:
            os._exit(0)
    after_parent_moved()
    os.write(go_write, b"x")
    data = b""
    while chunk := os.read(result_read, 65536):
        data += chunk
        if data.endswith(b"}"):
            break
    os.waitpid(pid, 0)
    for fd in (go_read, go_write, result_read, result_write):
        os.close(fd)
    return json.loads(data)


def supersede(registry, guard):
    registry.issue("r", 2)
    assert guard.check("r", 2) == 2  # the parent moves on: token 1 is now stale


def test_a_forked_exclusive_guard_refuses_to_answer_in_the_child(tmp_path):
    registry = FakeRegistry()
    registry.issue("r", 1)
    with Guard(registry, path=tmp_path / "g.sqlite", exclusive=True) as guard:
        guard.check("r", 1)
        outcome = in_child(lambda: supersede(registry, guard), lambda: guard.check("r", 1))
        assert guard.check("r", 2) == 2, "the parent's guard is unaffected"
    assert outcome["error"] == "GuardError" and outcome["forked_from"] == os.getpid(), outcome


def test_control_without_the_fork_handler_the_child_accepts_a_superseded_token(tmp_path, monkeypatch):
    monkeypatch.setattr(guard_module.Guard, "_after_fork_in_child", lambda self: None)
    registry = FakeRegistry()
    registry.issue("r", 1)
    with Guard(registry, path=tmp_path / "g.sqlite", exclusive=True) as guard:
        guard.check("r", 1)
        outcome = in_child(lambda: supersede(registry, guard), lambda: guard.check("r", 1))
    assert outcome == {"accepted": 1}, "the frozen copy accepted token 1 after the parent accepted 2"


def test_a_forked_shared_guard_reads_the_store_in_the_child(tmp_path):
    """A guard that does not own its store carries on in the child, on new connections: it sees the
    parent's newer mark and refuses the stale token."""
    registry = FakeRegistry()
    registry.issue("r", 1)
    with Guard(registry, path=tmp_path / "g.sqlite") as guard:
        guard.check("r", 1)
        outcome = in_child(lambda: supersede(registry, guard), lambda: guard.check("r", 1))
    assert outcome["error"] == "StaleToken", outcome
