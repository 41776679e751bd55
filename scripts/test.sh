#!/usr/bin/env bash
# Set up everything the test suite needs (pinned Python dev dependencies in .venv,
# the pinned npm solc, anvil, forge, hardhat and ganache in node_modules (and Node 22
# for hardhat where the machine's is older), Debian's chromium for the timeline's
# browser test and faketime for the suite's hardhat node (tests/support/nodes.py),
# and a Python >= 3.12 venv for the tests of 3.12-only behaviour
# when one is on the machine), run the code checks (scripts/check: ruff and mypy; a failure stops here)
# and then the full suite.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
# The suite runs in three pytest-xdist workers (most tests wait on nodes and processes: on a 2-core
# machine with two busy loops beside it, 3 workers took 12 min, 2 workers 17 min);
# CHAINFENCE_TEST_WORKERS=0 runs it in one process. The 30 slowest tests are listed at the end
# (--durations): where a slow run's time went, from CI's log alone.
source "$(dirname "$0")/_env.sh"
setup_python dev -e ".[dev]"
setup_node
setup_faketime
setup_chromium
setup_python312
"$ROOT/scripts/check"
exec "$VENV/bin/python" -m pytest -n "${CHAINFENCE_TEST_WORKERS:-3}" --durations=30 "$@"
