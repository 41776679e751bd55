"""Run tooz's shipped suite (``tooz.tests.test_coordination``) and print its outcome as JSON.

Run as a child process by tests/integration/test_tooz_suite.py, with
``TOOZ_TEST_URL`` (how tooz's suite picks its backend) naming a chainfence
URL. Stdlib unittest runs the suite as tooz's own CI does (testtools test
cases, no pytest plugins or warning filters of ours in the way). The last
line of stdout is one JSON object: test ids that passed, skipped (with the
reason), failed and errored (with the traceback), and the seconds it took.
"""

from __future__ import annotations

import json
import sys
import time
import unittest

SUITE = "tooz.tests.test_coordination"


class _Collecting(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.passed: list[str] = []

    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        self.passed.append(test.id())

    def startTest(self, test: unittest.TestCase) -> None:
        super().startTest(test)
        print(f"running {test.id()}", file=sys.stderr, flush=True)


def main() -> int:
    names = sys.argv[1:] or [SUITE]
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = _Collecting()
    started = time.monotonic()
    suite.run(result)
    outcome = {
        "seconds": round(time.monotonic() - started, 1),
        "passed": result.passed,
        "skipped": [[test.id(), reason] for test, reason in result.skipped],
        "failures": [[test.id(), trace] for test, trace in result.failures],
        "errors": [[test.id(), trace] for test, trace in result.errors],
        "unexpected_successes": [test.id() for test in result.unexpectedSuccesses],
    }
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
