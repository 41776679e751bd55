"""A guard process SIGKILLed at random moments, restarted each time, never accepts a lower token.

The worker (tests/support/agent.py churn) loops acquire -> guard.check ->
report. Kills land anywhere: during the chain call, between verification
and the SQLite commit, inside the commit, after it. After each kill the
store must open cleanly, hold every mark the worker reported (durable), no
mark the chain never issued (no phantom), and refuse anything below it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chainfence import Guard
from chainfence.errors import StaleToken

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = "jobs/churn"


def test_random_kills_never_lose_a_mark_or_accept_a_lower_token(on_anvil, tmp_path):
    store = tmp_path / "guard.sqlite"
    Guard(on_anvil, path=store).close()
    rng = random.Random(20261121)
    reported = 0
    for _round in range(10):
        worker = subprocess.Popen(
            [sys.executable, "-m", "tests.support.agent", "churn", on_anvil.chain.w3.provider.endpoint_uri,
             on_anvil.address, "3", RESOURCE, str(store)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        first = worker.stdout.readline()  # it is up and accepting
        assert first, worker.stderr.read()
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(worker.pid, signal.SIGKILL)
        out, _ = worker.communicate()
        accepted = [json.loads(line)["accepted"] for line in [first, *out.splitlines()] if line.strip()]
        reported = max([reported, *accepted])

        integrity = sqlite3.connect(store).execute("PRAGMA integrity_check").fetchone()[0]
        assert integrity == "ok"
        with Guard(on_anvil, path=store) as guard:
            mark = guard.mark(RESOURCE)
            assert mark >= reported, "a reported acceptance was lost"
            assert mark <= on_anvil.latest_token(), "a mark the chain never issued"
            for lower in {1, max(1, mark - 1)} - {mark}:
                with pytest.raises(StaleToken):
                    guard.check(RESOURCE, lower)
    assert reported > 10, "the worker should have made progress between kills"
