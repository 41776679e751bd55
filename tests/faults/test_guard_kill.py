"""A guard process SIGKILLed at random moments, restarted each time, never accepts a lower token.

The worker (tests/support/agent.py churn) loops acquire -> guard.check ->
report. Kills land anywhere: during the chain call, between verification
and the SQLite commit, inside the commit, after it; each round kills only
after the worker reported some acceptances, so progress is certain. After each kill the
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
import threading
import time
from pathlib import Path

import pytest

from chainfence import Guard
from chainfence.errors import StaleToken

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = "jobs/churn"


def read_accepted(worker: subprocess.Popen[str], timeout: float = 60.0) -> int:
    """The next token the worker reports accepted (fails the test if it says nothing)."""
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(worker.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not line or not line[0]:
        worker.kill()
        raise AssertionError(f"the worker reported nothing; stderr: {worker.stderr.read()}")
    return json.loads(line[0])["accepted"]


def test_random_kills_never_lose_a_mark_or_accept_a_lower_token(on_anvil, tmp_path):
    """Sequenced by the worker's reports, not by its pace: each round waits for a random number of
    acceptances (so every round kills a worker that demonstrably made progress), then kills it after
    a random extra delay, so the kill lands at varying points of the next cycle. No assertion depends
    on where it lands."""
    store = tmp_path / "guard.sqlite"
    Guard(on_anvil, path=store).close()
    rng = random.Random(20261121)
    reported = 0
    for _round in range(10):
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.agent",
                "churn",
                on_anvil.chain.w3.provider.endpoint_uri,
                on_anvil.address,
                "3",
                RESOURCE,
                str(store),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen = [read_accepted(worker) for _ in range(rng.randint(1, 4))]  # it is up and accepting
        time.sleep(rng.uniform(0.0, 0.3))  # where the kill lands: anywhere in the cycles that follow
        os.kill(worker.pid, signal.SIGKILL)
        out, _ = worker.communicate()
        accepted = seen + [json.loads(line)["accepted"] for line in out.splitlines() if line.strip()]
        assert accepted == sorted(set(accepted)) and accepted[0] > reported, "each acceptance is a new, higher token"
        reported = accepted[-1]

        integrity = sqlite3.connect(store).execute("PRAGMA integrity_check").fetchone()[0]
        assert integrity == "ok"
        with Guard(on_anvil, path=store) as guard:
            mark = guard.mark(RESOURCE)
            assert mark >= reported, "a reported acceptance was lost"
            assert mark <= on_anvil.latest_token(), "a mark the chain never issued"
            for lower in {1, max(1, mark - 1)} - {mark}:
                with pytest.raises(StaleToken):
                    guard.check(RESOURCE, lower)
