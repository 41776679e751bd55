"""Guards in separate processes sharing one SQLite store, against a real anvil node.

The interleaving test pauses one process between "the chain vouched for my
token" and "record it", lets the chain and a second process move on, then
resumes it: the real guard refuses to lower the mark; a naive check-then-set
guard (the control) lowers it, which is the bug the atomic re-read prevents.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chainfence import Guard
from chainfence.errors import StaleToken

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = "reports/daily"


class Worker:
    def __init__(self, registry, store, *args: str):
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.guard_worker",
                args[0],
                registry.chain.w3.provider.endpoint_uri,
                registry.address,
                str(store),
                RESOURCE,
                *args[1:],
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def read(self, timeout: float = 60.0) -> dict:
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()))
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            self.process.kill()
            raise AssertionError(f"worker said nothing; stderr: {self.process.stderr.read()}")
        return json.loads(result[0])

    def resume(self) -> None:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def finish(self) -> None:
        self.process.wait(timeout=60)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            stream.close()

    def reap(self) -> None:
        """Killed if still running, waited for, its pipes closed: whatever the test's outcome."""
        if self.process.poll() is None:
            self.process.kill()
        self.finish()


@pytest.fixture
def spawn():
    """Starts workers (``spawn(registry, store, *args)``) and reaps every one at the test's end, passed or
    failed: a failed test's workers must not run on into the next test (nor be collected there)."""
    started: list[Worker] = []

    def start(registry, store, *args: str) -> Worker:
        worker = Worker(registry, store, *args)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.reap()


def supersede(registry, old_lease):
    """The holder of `old_lease` releases; another agent acquires: a higher token is now current."""
    old_lease.release()
    return registry.connect(registry.chain.accounts[2]).acquire(RESOURCE, ttl=300)


@pytest.mark.parametrize("naive", [False, True], ids=["guard", "naive-control"])
def test_a_process_resuming_after_a_newer_token_was_recorded_cannot_lower_the_mark(on_anvil, tmp_path, naive, spawn):
    store = tmp_path / "guard.sqlite"
    first = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=300)
    Guard(on_anvil, path=store).close()  # create the store once, bound to this registry

    flags = ["--pause-after-verify"] + (["--naive"] if naive else [])
    slow = spawn(on_anvil, store, "once", str(first.token), *flags)
    assert slow.read()["event"] == "verified"  # P1: the chain vouched for token 1; P1 now stalls

    second = supersede(on_anvil, first)
    fast = spawn(on_anvil, store, "once", str(second.token))
    assert fast.read() == {"event": "result", "accepted": True, "mark": second.token}
    fast.finish()

    slow.resume()
    result = slow.read()
    slow.finish()
    with Guard(on_anvil, path=store) as guard:
        final_mark = guard.mark(RESOURCE)
    if naive:
        # The control demonstrates the race: the mark went DOWN to the superseded token.
        assert result["accepted"] is True
        assert final_mark == first.token < second.token
    else:
        assert result == {"event": "result", "accepted": False, "error": "StaleToken", "mark": second.token}
        assert final_mark == second.token


def test_racing_processes_never_accept_a_token_below_one_already_accepted(on_anvil, tmp_path, spawn):
    """Three processes check the chain's current token (and an older one) while the chain issues new
    tokens. Checked: each process's accepted tokens never go down; once any process has accepted t, no
    check that starts later accepts anything below t; the final mark is the highest accepted token.

    Sequenced by events, not by a wall-clock window: the chain issues its next token only once every
    worker reported checking the previous one, so the race covers every token however slow the
    machine (a worker spends seconds importing web3 on a loaded one)."""
    store = tmp_path / "guard.sqlite"
    agent = on_anvil.connect(on_anvil.chain.accounts[1])
    first = agent.acquire(RESOURCE, ttl=300)
    Guard(on_anvil, path=store).close()
    workers = [spawn(on_anvil, store, "race") for _ in range(3)]
    for w in workers:
        assert w.read()["event"] == "ready"
    rounds = 25
    token = first.token
    for _ in range(rounds):
        token = agent.acquire(RESOURCE, ttl=300).token  # re-acquire: a new, higher token each time
        for w in workers:
            while (line := w.read())["token"] < token:
                assert line["event"] == "seen"
    for w in workers:
        w.resume()  # any line on stdin: stop and print the log
    logs = [w.read()["log"] for w in workers]
    for w in workers:
        w.finish()

    accepted = [(end, token) for log in logs for (_, end, token, verdict) in log if verdict == "accepted"]
    assert len({token for _, token in accepted}) >= rounds, "every issued token was checked by some worker"
    for log in logs:
        mine = [token for (_, _, token, verdict) in log if verdict == "accepted"]
        assert mine == sorted(mine), "a process saw the mark go down"
    all_checks = [(start, token, verdict) for log in logs for (start, _, token, verdict) in log]
    accepted.sort()
    best_before = []  # running max of accepted tokens by completion time
    top = 0
    for end, token in accepted:
        top = max(top, token)
        best_before.append((end, top))
    import bisect

    ends = [end for end, _ in best_before]
    for start, token, verdict in all_checks:
        i = bisect.bisect_left(ends, start) - 1
        if i >= 0 and verdict == "accepted":
            assert token >= best_before[i][1], f"token {token} accepted after {best_before[i][1]} was"
    with Guard(on_anvil, path=store) as guard:
        assert guard.mark(RESOURCE) == max(token for _, token in accepted)


def test_a_guard_killed_between_verify_and_record_leaves_the_store_intact(on_anvil, tmp_path, spawn):
    """SIGKILL in the window between the chain check and the write: no mark is recorded, the store
    opens cleanly, and the token is accepted by the next guard if it is still current."""
    store = tmp_path / "guard.sqlite"
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=300)
    Guard(on_anvil, path=store).close()
    victim = spawn(on_anvil, store, "once", str(lease.token), "--pause-after-verify")
    assert victim.read()["event"] == "verified"
    os.kill(victim.process.pid, signal.SIGKILL)
    victim.finish()
    with Guard(on_anvil, path=store) as guard:
        assert guard.mark(RESOURCE) == 0
        assert guard.check(RESOURCE, lease.token) == lease.token


def test_a_mark_recorded_by_a_process_killed_right_after_survives(on_anvil, tmp_path, spawn):
    """The mark is durable when check() returns: a SIGKILL afterwards does not lose it."""
    store = tmp_path / "guard.sqlite"
    agent = on_anvil.connect(on_anvil.chain.accounts[1])
    old = agent.acquire(RESOURCE, ttl=300)
    new = agent.acquire(RESOURCE, ttl=300)
    Guard(on_anvil, path=store).close()
    victim = spawn(on_anvil, store, "once", str(new.token), "--hang")
    assert victim.read()["accepted"] is True
    os.kill(victim.process.pid, signal.SIGKILL)
    victim.finish()
    with Guard(on_anvil, path=store) as guard:
        assert guard.mark(RESOURCE) == new.token
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, old.token)
