"""tooz's own suite, ``tooz.tests.test_coordination``, against the chainfence driver on anvil.

tooz proves each of its drivers with one shipped suite, pointed at the
backend by ``TOOZ_TEST_URL``. This test starts an anvil node of its own
(``break_`` moves its clock: the session's node is not touched), deploys a
registry, and runs the suite unchanged in a child process
(tests/support/tooz_suite.py, stdlib unittest, as tooz's CI runs it) with a
``chainfence+http://`` URL. Every lock test must pass; the only skips allowed
are the features the driver declares not implemented (groups, membership,
capabilities, watchers, elections, shared locks), each checked by its reason.
The suite runs once more on ``chainfence+embedded://``, where the one test
that needs a second process to see the chain fails, as the driver declares.
The counts are printed (``pytest -s``) and recorded in the README's "tooz".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
import tooz  # noqa: F401 - in the dev extra: a missing tooz fails the suite, it never skips it

from chainfence import Chain, Registry, Timeouts
from tests.support.anvil import ROOT, Anvil, dev_keys

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
    # embedded only: tooz skips its unreachable-host test for a driver that does not claim hosts
    "not across hosts": ("This driver is not distributed across hosts",),
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
        chain = Chain.connect(node.url, private_keys=dev_keys(1), timeouts=Timeouts(poll=0.005))
        registry = Registry.deploy(chain, max_ttl=3_600)
        yield node, registry.address


def _run_suite(url: str) -> dict:
    env = dict(os.environ, CHAINFENCE_TOOZ_KEY=dev_keys(10)[9], TOOZ_TEST_URL=url, PYTHONPATH=str(ROOT))
    child = subprocess.run(
        [sys.executable, "-m", "tests.support.tooz_suite"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT,
    )
    assert child.returncode == 0, child.stderr[-4000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


def _name(test_id: str) -> str:
    return test_id.rsplit(".", 1)[1]


def _check(outcome: dict, *, must_pass: set[str], expected_failures: set[str] = frozenset()) -> str:
    """Assert the outcome; return a line with its counts."""
    problems = [(t, trace) for t, trace in outcome["failures"] + outcome["errors"] if _name(t) not in expected_failures]
    assert not problems, "\n\n".join(f"{test_id}\n{trace}" for test_id, trace in problems)
    assert {_name(t) for t, _ in outcome["failures"] + outcome["errors"]} == expected_failures
    assert not outcome["unexpected_successes"]
    passed = {_name(t) for t in outcome["passed"]}
    assert must_pass <= passed, f"tests that did not pass: {sorted(must_pass - passed)}"
    kinds: Counter[str] = Counter()
    for test_id, reason in outcome["skipped"]:
        kind = _kind(reason)
        assert kind is not None, f"{test_id} skipped for an undeclared reason: {reason}"
        assert "lock" not in _name(test_id) or _name(test_id) in SHARED_LOCK_TESTS, f"a lock test skipped: {test_id}"
        kinds[kind] += 1
    assert kinds["shared locks"] == len(SHARED_LOCK_TESTS)
    failed = len(outcome["failures"]) + len(outcome["errors"])
    return (
        f"tooz {_tooz_version()} test_coordination: {len(passed)} passed, {len(outcome['skipped'])} skipped "
        f"({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items()))}), {failed} failed; "
        f"the suite ran {outcome['seconds']} s"
    )


def test_tooz_suite_passes_every_lock_test(tooz_node):
    """Every lock and heartbeat test of tooz.tests.test_coordination passes against chainfence+http on
    anvil, nothing fails or errors, and every skip is a declared not-implemented feature."""
    node, registry = tooz_node
    host = node.url.split("://", 1)[1]
    # CHAINFENCE_TOOZ_KEY is the funding key; each coordinator derives its own account from it.
    url = f"chainfence+http://{host}?registry={registry}&key_env=CHAINFENCE_TOOZ_KEY&poll_latency=0.005"
    # On a node the unreachable-host test runs too (the driver claims DISTRIBUTED_ACROSS_HOSTS).
    print("\non anvil:", _check(_run_suite(url), must_pass=LOCK_TESTS | {"test_connection_error_bad_host"}))


#: The embedded chain lives in one process: tooz's test that a lock held here is refused in another
#: process cannot pass there (the child has a chain of its own), and the driver does not claim it
#: (its characteristics leave out DISTRIBUTED_ACROSS_PROCESSES and _HOSTS).
EMBEDDED_LIMITS = {"test_get_lock_concurrency_locking_two_lock_process"}


def test_tooz_suite_on_the_embedded_chain_holds_within_a_process():
    """The same suite on chainfence+embedded://: every lock test passes but the one that needs another
    process to see this process's chain, which fails, as declared."""
    print(
        "\nembedded:",
        _check(
            _run_suite("chainfence+embedded://tooz-suite"),
            must_pass=LOCK_TESTS - EMBEDDED_LIMITS,
            expected_failures=EMBEDDED_LIMITS,
        ),
    )


def _tooz_version() -> str:
    from importlib.metadata import version

    return version("tooz")
