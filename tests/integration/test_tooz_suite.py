"""tooz's own suite, ``tooz.tests.test_coordination``, against the chainfence driver on anvil.

tooz proves each of its drivers with one shipped suite, pointed at the
backend by ``TOOZ_TEST_URL``. This test starts an anvil node of its own
(``break_`` moves its clock: the session's node is not touched), deploys a
registry, and runs the suite unchanged in a child process
(tests/support/tooz_suite.py, stdlib unittest, as tooz's CI runs it) with a
``chainfence+http://`` URL. Every lock test must pass; the only skips allowed
are the features the driver declares not implemented (groups, membership,
capabilities, watchers, elections, shared locks), each checked by its reason.
The counts are printed (``pytest -s``) and recorded in the README's "tooz".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from chainfence import Chain, Registry
from tests.support.anvil import ROOT, Anvil, dev_keys

pytest.importorskip("tooz", reason="the tooz extra is in the dev extra; scripts/test.sh installs it")

#: Safety net for the whole child run (it takes about 15 s here), never what the test measures.
SUITE_TIMEOUT = 600

#: Every test of the suite about locks and heartbeats: each must pass.
LOCK_TESTS = {
    "test_acquire_twice_no_deadlock_releasing",
    "test_ensure_acquire_release_return",
    "test_get_lock",
    "test_get_lock_concurrency_locking2",
    "test_get_lock_concurrency_locking_same_lock",
    "test_get_lock_concurrency_locking_two_lock_process",
    "test_get_lock_concurrency_locking_two_lock_thread1",
    "test_get_lock_concurrency_locking_two_lock_thread2",
    "test_get_lock_context_check_value",
    "test_get_lock_context_fails",
    "test_get_lock_locked_twice",
    "test_get_lock_multiple_coords",
    "test_get_lock_release_broken",
    "test_get_lock_serial_locking_two_lock_process",
    "test_get_lock_twice_locked_one_released_two",
    "test_get_lock_twice_locked_twice",
    "test_get_multiple_locks_with_same_coord",
    "test_heartbeat",
    "test_heartbeat_lock_not_acquired",
    "test_heartbeat_loop",
    "test_lock_context_manager_acquire_argument",
    "test_lock_context_manager_acquire_argument_release_within",
    "test_lock_context_manager_acquire_argument_return_value",
    "test_lock_context_manager_acquire_argument_timeout",
    "test_lock_context_manager_acquire_no_argument",
}

#: The reasons a test may skip, by kind (the driver's tooz.NotImplemented messages, and tooz's own).
SKIP_KINDS = {
    # tooz's base driver raises NotImplemented("not implemented") for groups, members, capabilities and
    # elections; the driver raises its own for watchers.
    "groups/members/elections": (
        "not implemented",
        "groups are not implemented by the chainfence driver",
        "elections are not implemented by the chainfence driver",
        "This test only works with coordinators that have the ability to destroy groups.",  # tooz's own skip
    ),
    "shared locks": ("chainfence leases are exclusive: shared locks are not implemented",),
}
#: Skipped tests whose names say "lock": the shared-lock ones, and nothing else.
SHARED_LOCK_TESTS = {
    "test_get_shared_lock",
    "test_get_shared_lock_locking_same_lock_twice",
    "test_get_shared_lock_locking_two_lock",
    "test_get_lock_locking_exclusive_and_shared",
    "test_get_lock_locking_shared_and_exclusive",
}


def _kind(reason: str) -> str | None:
    for kind, reasons in SKIP_KINDS.items():
        if reason in reasons:
            return kind
    return None


@pytest.fixture(scope="module")
def tooz_node():
    """An anvil of the suite's own (wall clock: tooz's suite sleeps in real time) with a registry."""
    with Anvil() as node:
        chain = Chain.connect(node.url, private_keys=dev_keys(1), poll_latency=0.005)
        registry = Registry.deploy(chain, max_ttl=3_600)
        yield node, registry.address


def test_tooz_suite_passes_every_lock_test(tooz_node):
    """Every lock and heartbeat test of tooz.tests.test_coordination passes against chainfence+http on
    anvil, nothing fails or errors, and every skip is a declared not-implemented feature."""
    node, registry = tooz_node
    host = node.url.split("://", 1)[1]
    env = dict(
        os.environ,
        CHAINFENCE_TOOZ_KEY=dev_keys(10)[9],  # the funding key; each coordinator derives its own account
        TOOZ_TEST_URL=f"chainfence+http://{host}?registry={registry}&key_env=CHAINFENCE_TOOZ_KEY&poll_latency=0.005",
        PYTHONPATH=str(ROOT),
    )
    child = subprocess.run(
        [sys.executable, "-m", "tests.support.tooz_suite"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=SUITE_TIMEOUT,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-4000:]
    outcome = json.loads(child.stdout.strip().splitlines()[-1])

    def name(test_id: str) -> str:
        return test_id.rsplit(".", 1)[1]

    problems = outcome["failures"] + outcome["errors"]
    assert not problems, "\n\n".join(f"{test_id}\n{trace}" for test_id, trace in problems)
    assert not outcome["unexpected_successes"]
    passed = {name(t) for t in outcome["passed"]}
    assert LOCK_TESTS <= passed, f"lock tests that did not pass: {sorted(LOCK_TESTS - passed)}"
    kinds = Counter()
    for test_id, reason in outcome["skipped"]:
        kind = _kind(reason)
        assert kind is not None, f"{test_id} skipped for an undeclared reason: {reason}"
        assert "lock" not in name(test_id) or name(test_id) in SHARED_LOCK_TESTS, f"a lock test skipped: {test_id}"
        kinds[kind] += 1
    assert kinds["shared locks"] == len(SHARED_LOCK_TESTS)
    print(
        f"\ntooz {_tooz_version()} test_coordination on anvil: {len(passed)} passed, "
        f"{len(outcome['skipped'])} skipped ({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items()))}), "
        f"0 failed, 0 errors; the suite ran {outcome['seconds']} s"
    )


def _tooz_version() -> str:
    from importlib.metadata import version

    return version("tooz")
