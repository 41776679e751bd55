"""Agents as separate processes, each with its own key, against a real anvil node.

Contention (the lock-set workload), a holder paused with SIGSTOP past its
lease, a holder killed with SIGKILL mid-lease. Each checker reads the
registry's own event log, not what the agents claim.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from chainfence import AcquireReason, EventKind, Guard, audit
from chainfence.errors import LeaseHeld

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = "db/primary"


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[str]]]:
    """The agents a test starts: killed and their pipes closed at teardown, also when the test failed
    or timed out (leaked pipes would fail a later test with ResourceWarnings)."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def spawn(spawned, on_anvil, mode: str, key_index: int, *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.agent",
            mode,
            on_anvil.chain.w3.provider.endpoint_uri,
            on_anvil.address,
            str(key_index),
            RESOURCE,
            *args,
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(process)
    return process


def read_line(process: subprocess.Popen[str], timeout: float = 60.0) -> dict:
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()))
    reader.start()
    reader.join(timeout)
    if not line or not line[0]:
        process.kill()
        raise AssertionError(f"agent said nothing; stderr: {process.stderr.read()}")
    return json.loads(line[0])


def finish(process: subprocess.Popen[str]) -> tuple[list[dict], str]:
    out, err = process.communicate(timeout=600)  # a safety net: the test's own timeout comes first
    return [json.loads(line) for line in out.splitlines() if line.strip()], err


def make_db(path: Path, ddl: str, *rows: str) -> Path:
    db = sqlite3.connect(path)
    db.execute(ddl)
    for row in rows:
        db.execute(row)
    db.commit()
    db.close()
    return path


# Half a minute on an idle 2-core machine and a few under load: the suite-wide 300 s safety net
# would be a window this workload has to fit in.
@pytest.mark.timeout(1_200)
def test_eight_contending_agents_keep_tokens_monotonic_leases_exclusive_and_lose_no_update(on_anvil, tmp_path, spawned):
    """8 processes x 25 cycles of acquire -> guarded non-atomic counter increment -> release, on ONE
    resource. From the chain's event log: tokens strictly increase, each acquisition is released
    before the next begins (no two live leases overlap in chain time). From the counter: no lost update."""
    agents, cycles = 8, 25
    guard_path = tmp_path / "guard.sqlite"
    Guard(on_anvil, path=guard_path).close()
    counter = make_db(
        tmp_path / "counter.sqlite", "CREATE TABLE counter (value INTEGER)", "INSERT INTO counter VALUES (0)"
    )
    first_block = on_anvil.chain.block_number() + 1

    processes = [
        spawn(spawned, on_anvil, "contend", i + 1, str(cycles), str(guard_path), str(counter)) for i in range(agents)
    ]
    results = [finish(p) for p in processes]
    for process, (_, err) in zip(processes, results):
        assert process.returncode == 0, err

    records = [r for lines, _ in results for r in lines]
    accepted = [r for r in records if r["accepted"]]
    assert len(records) == agents * cycles
    assert len(accepted) == agents * cycles, "with exclusive leases every guarded write is accepted"

    (value,) = sqlite3.connect(counter).execute("SELECT value FROM counter").fetchone()
    assert value == len(accepted), f"lost updates: {len(accepted) - value}"

    events = audit.history(on_anvil, RESOURCE, from_block=first_block)
    acquisitions = [e for e in events if e.kind is EventKind.ACQUIRED]
    tokens = [e.token for e in acquisitions]
    assert len(tokens) == agents * cycles
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), "tokens strictly increase"
    assert sorted(r["token"] for r in records) == tokens

    # Exclusivity in chain time: the log must read acquire(t1) release(t1) acquire(t2) release(t2) ...
    live = None
    for event in events:
        if event.kind is EventKind.ACQUIRED:
            assert live is None, f"token {event.token} acquired while token {live.token} was live"
            assert event.reason is AcquireReason.RELEASED or event.token == tokens[0]
            live = event
        elif event.kind is EventKind.RELEASED:
            assert live is not None and event.token == live.token and event.holder == live.holder
            assert event.block_timestamp <= live.expires_at, "released while still live"
            live = None
    assert live is None
    with Guard(on_anvil, path=guard_path) as guard:
        assert guard.mark(RESOURCE) == tokens[-1]


@pytest.mark.parametrize("fenced", [True, False], ids=["guard", "unfenced-control"])
def test_a_holder_stopped_with_sigstop_past_its_lease_cannot_overwrite_its_successor(
    on_anvil, tmp_path, fenced, spawned
):
    """A real pause: the holder process is SIGSTOPped, chain time passes its expiry, another agent
    acquires and writes, SIGCONT, and the holder writes again with its old token. Behind the guard
    the stale write is rejected; the unfenced control shows it landing on top of the successor's.

    Sequenced by the holder's output and input, not by its pace: it is stopped while it waits for
    the line that lets it write again, and gets that line only after SIGCONT."""
    guard_path = tmp_path / "guard.sqlite"
    Guard(on_anvil, path=guard_path).close()
    report = make_db(
        tmp_path / "report.sqlite",
        "CREATE TABLE report (content TEXT, token INTEGER)",
        "INSERT INTO report VALUES ('', 0)",
    )
    holder = spawn(spawned, on_anvil, "hold", 1, "5", str(guard_path) if fenced else "-", str(report))
    holding = read_line(holder)
    assert holding["event"] == "holding"
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        chain = on_anvil.chain
        chain.advance_time(holding["expires_at"] - chain.now() + 5)  # the lease runs out while it is stopped
        successor = on_anvil.connect(chain.accounts[2]).acquire(RESOURCE, ttl=60)
        assert successor.reason is AcquireReason.EXPIRED and successor.token > holding["token"]
        with Guard(on_anvil, path=guard_path) as guard:
            if fenced:
                guard.check(RESOURCE, successor.token)
            db = sqlite3.connect(report)
            db.execute("UPDATE report SET content = 'successor', token = ?", (successor.token,))
            db.commit()
            db.close()
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    holder.stdin.write("write part 2\n")  # it wakes and writes with the token it still believes in
    holder.stdin.flush()
    lines, err = finish(holder)  # closes stdin: no part 3
    final = sqlite3.connect(report).execute("SELECT content, token FROM report").fetchone()
    if fenced:
        assert lines[-1]["event"] == "rejected" and lines[-1]["error"] == "StaleToken", (lines, err)
        assert final == ("successor", successor.token)
    else:
        assert [line["event"] for line in lines] == ["wrote", "finished"], (lines, err)
        assert final == ("holder part 2", holding["token"]), "the control must show the stale holder overwriting"


def test_a_holder_killed_mid_lease_frees_the_resource_at_expiry_with_a_higher_token(on_anvil, tmp_path, spawned):
    report = make_db(
        tmp_path / "report.sqlite",
        "CREATE TABLE report (content TEXT, token INTEGER)",
        "INSERT INTO report VALUES ('', 0)",
    )
    holder = spawn(spawned, on_anvil, "hold", 1, "20", "-", str(report))
    holding = read_line(holder)
    holder.kill()  # SIGKILL: no release, no goodbye
    finish(holder)
    chain = on_anvil.chain
    successor_agent = on_anvil.connect(chain.accounts[2])
    with pytest.raises(LeaseHeld) as held:
        successor_agent.acquire(RESOURCE, ttl=60)
    assert held.value.token == holding["token"]
    chain.advance_time(holding["expires_at"] - chain.now())
    successor = successor_agent.acquire(RESOURCE, ttl=60)
    assert successor.reason is AcquireReason.EXPIRED
    assert successor.token > holding["token"] and successor.previous_token == holding["token"]
