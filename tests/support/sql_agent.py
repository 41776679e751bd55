"""Agent processes appending rows to one SQLite file through the fence, forked from one zygote.

    python -m tests.support.sql_agent        (commands on stdin, events on stdout: one JSON object a line)

Starting an interpreter that imports web3 costs about 2 s of CPU, and the
multi-process SQL tests start a dozen agents on a loaded machine. So one
zygote process imports chainfence once and forks an agent per command::

    {"name": "a1", "url": ..., "registry": ..., "key": 3, "db": PATH, "resource": "ledger/a",
     "mode": "fenced", "ttl": 60, "seed": 7, "pause_before_write": false}

Every event is a line ``{"agent": NAME, "event": ..., ...}``: ``spawned``
(with its ``pid``) and ``exited`` (with its ``code``; -9 for SIGKILL) come
from the zygote, after the agent's own lines; the agent prints ``acquired``
(``token``), ``writing`` (``token``, ``row``: it is about to write the row),
``ack`` (``token``, ``row``: only once the row's commit has returned),
``rejected`` (``token``, ``error``), ``pausing`` (it is about to SIGSTOP
itself) and ``crashed`` (``error``). ``{"marker": N}`` makes the zygote print
``{"agent": null, "event": "marker", "n": N}``: every line an agent wrote
before the command arrived is ahead of it. Every event also carries ``at``,
the wall-clock time it was written: for reading a failure's log, never for
deciding anything.

An agent loops until it is killed: acquire its resource (retrying while
someone holds it), append 1 to 3 rows ``(resource, token, row)`` to the
shared file, release. ``fenced`` writes each row in ``fenced_transaction``;
``naive`` is the control: it checks the token on-chain
(``registry.check_current``), then inserts in a transaction of its own.
With ``pause_before_write`` it SIGSTOPs itself once, after its first
acquisition (and, naive, its check), just before its first write.

The test side is :class:`Zygote` and :class:`Run` below; :func:`violations`
checks a history.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

SCHEMA = (
    "CREATE TABLE rows (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, "
    "token INTEGER NOT NULL, row TEXT NOT NULL UNIQUE)"
)
INSERT = "INSERT INTO rows (resource, token, row) VALUES (?, ?, ?)"


def create_database(path: Path) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(SCHEMA)
    conn.close()
    return path


def violations(path: Path, acked: list[str]) -> list[str]:
    """What is wrong with the history in ``path``: acknowledged rows that are missing, and rows that
    committed (AUTOINCREMENT order) with a lower token than one already committed for their resource."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT resource, token, row FROM rows ORDER BY id").fetchall()
    finally:
        conn.close()
    present = {row for _, _, row in rows}
    problems = [f"acknowledged row {row} is not in the database" for row in acked if row not in present]
    highest: dict[str, int] = {}
    for resource, token, row in rows:
        if token < highest.get(resource, 0):
            problems.append(f"row {row} (token {token}) committed after token {highest[resource]} on {resource}")
        highest[resource] = max(highest.get(resource, 0), token)
    return problems


# ---------------------------------------------------------------------------
# Agent side (in the forked child)
# ---------------------------------------------------------------------------


def _emit(name: str | None, event: str, **fields: Any) -> None:
    # One write(2) of less than PIPE_BUF bytes: lines from several processes never interleave.
    os.write(1, (json.dumps({"agent": name, "event": event, "at": round(time.time(), 3), **fields}) + "\n").encode())


def _agent(spec: dict[str, Any]) -> None:
    from chainfence import Chain, Registry, Timeouts
    from chainfence.errors import ChainfenceError, LeaseHeld, TokenNotCurrent
    from chainfence.integrations.sql import fenced_transaction
    from chainfence.testing.anvil import dev_keys

    name, resource, ttl = spec["name"], spec["resource"], spec["ttl"]
    chain = Chain.connect(spec["url"], private_key=dev_keys(10)[spec["key"]], timeouts=Timeouts(receipt=60, poll=0.005))
    registry = Registry.at(chain, spec["registry"])
    db = sqlite3.connect(spec["db"], timeout=60, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 60000")
    rng = random.Random(spec["seed"])
    pause = spec.get("pause_before_write", False)

    def stop_here() -> bool:
        _emit(name, "pausing")
        os.kill(os.getpid(), signal.SIGSTOP)
        return False

    while True:
        while True:
            try:
                lease = registry.acquire(resource, ttl=ttl)
                break
            except LeaseHeld:
                time.sleep(rng.uniform(0.005, 0.02))
        _emit(name, "acquired", token=lease.token)
        for seq in range(rng.randint(1, 3)):
            row = f"{name}/{lease.token}/{seq}"
            _emit(name, "writing", token=lease.token, row=row)
            try:
                if spec["mode"] == "fenced":
                    pause = pause and stop_here()
                    with fenced_transaction(db, registry, resource, lease.token) as cur:
                        cur.execute(INSERT, (resource, lease.token, row))
                else:  # the control: check, then write in a transaction of its own
                    registry.check_current(resource, lease.token)
                    pause = pause and stop_here()
                    db.execute(INSERT, (resource, lease.token, row))
            except TokenNotCurrent as refused:
                _emit(name, "rejected", token=lease.token, error=type(refused).__name__)
                break
            _emit(name, "ack", token=lease.token, row=row)
        with contextlib.suppress(ChainfenceError):  # lost or expired meanwhile: nothing to release
            lease.release()


def _fork(spec: dict[str, Any]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the commands are the zygote's
        _agent(spec)
    except BaseException as error:
        traceback.print_exc()
        _emit(spec["name"], "crashed", error=repr(error))
        code = 1
    finally:
        os._exit(code)


def zygote() -> None:
    """Fork an agent per command line; report every exit; on EOF kill what is left and leave."""
    import chainfence.integrations.sql  # noqa: F401 - imported once, here, for every agent

    children: dict[int, str] = {}

    def reap(block: bool) -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            _emit(children.pop(pid), "exited", code=os.waitstatus_to_exitcode(status))

    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], 0.05)
        reap(block=False)
        if not ready:
            continue
        data = os.read(0, 65536)
        if not data:
            break
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            spec = json.loads(line)
            if "marker" in spec:  # every line an agent wrote before this command is ahead of it
                _emit(None, "marker", n=spec["marker"])
                continue
            pid = _fork(spec)
            children[pid] = spec["name"]
            _emit(spec["name"], "spawned", pid=pid)
    for pid in list(children):
        os.kill(pid, signal.SIGKILL)
    reap(block=True)


# ---------------------------------------------------------------------------
# Test side
# ---------------------------------------------------------------------------


class Zygote:
    """The zygote process and the events it forwards, in arrival order."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.sql_agent"], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.events.put(json.loads(line))
        self.events.put({"agent": None, "event": "zygote-exited"})

    def send(self, spec: dict[str, Any]) -> None:
        self.process.stdin.write((json.dumps(spec) + "\n").encode())
        self.process.stdin.flush()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self._reader.join(timeout=60)
        self.process.stdout.close()


class Run:
    """One test's agents: spawn them, signal them, and wait for their events in order.

    Waiting is by event, never by time: ``wait_for`` returns the first event at or after a
    position in the log that matches; its timeout only turns a hang into a failure.
    """

    HANG = 120.0

    def __init__(self, zygote: Zygote, registry: Any, db: Path, ttl: int):
        self._zygote = zygote
        self._base = {
            "url": registry.chain.w3.provider.endpoint_uri,
            "registry": registry.address,
            "db": str(db),
            "ttl": ttl,
        }
        self.log: list[dict[str, Any]] = []
        self.pids: dict[str, int] = {}
        self.exited: set[str] = set()

    def position(self) -> int:
        return len(self.log)

    def spawn(
        self,
        name: str,
        *,
        key: int,
        resource: str,
        mode: str = "fenced",
        seed: int = 0,
        pause_before_write: bool = False,
    ) -> str:
        since = self.position()
        self._zygote.send(
            {
                **self._base,
                "name": name,
                "key": key,
                "resource": resource,
                "mode": mode,
                "seed": seed,
                "pause_before_write": pause_before_write,
            }
        )
        self.pids[name] = self.wait_for(lambda e: e["agent"] == name and e["event"] == "spawned", since)["pid"]
        return name

    def wait_for(self, match: Callable[[dict[str, Any]], bool], since: int) -> dict[str, Any]:
        index = since
        deadline = time.monotonic() + self.HANG
        while True:
            while index < len(self.log):
                event = self.log[index]
                index += 1
                if match(event):
                    return event
            try:
                event = self._zygote.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"hang: no awaited event in {self.HANG} s; last events: {self.log[-8:]}") from None
            if event["event"] == "crashed":
                raise AssertionError(f"agent {event['agent']} crashed: {event['error']}")
            if event["event"] == "zygote-exited":
                raise AssertionError("the zygote exited")
            if event["event"] == "exited":
                self.exited.add(event["agent"])
            self.log.append(event)

    def barrier(self) -> None:
        """Until every event an agent wrote before this call is in the log."""
        since, marker = self.position(), self.position()
        self._zygote.send({"marker": marker})
        self.wait_for(lambda e: e["event"] == "marker" and e["n"] == marker, since)

    def last_event_of(self, name: str) -> dict[str, Any]:
        return self.events_of(name)[-1]

    def signal(self, name: str, signum: int) -> None:
        os.kill(self.pids[name], signum)

    def wait_stopped(self, name: str) -> None:
        """Until ``name`` is in state T (it SIGSTOPped itself after printing ``pausing``)."""
        stat = Path(f"/proc/{self.pids[name]}/stat")
        deadline = time.monotonic() + self.HANG
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "T":
            if time.monotonic() > deadline:
                raise AssertionError(f"hang: {name} never stopped")
            time.sleep(0.001)

    def finish(self) -> None:
        """SIGKILL every agent still alive and collect every event up to their exits."""
        alive = [name for name in self.pids if name not in self.exited]
        for name in alive:
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile: its event is on its way
                os.kill(self.pids[name], signal.SIGKILL)
        for name in alive:
            self.wait_for(lambda e, n=name: e["agent"] == n and e["event"] == "exited", 0)

    def acked(self) -> list[str]:
        return [event["row"] for event in self.log if event["event"] == "ack"]

    def events_of(self, name: str) -> list[dict[str, Any]]:
        return [event for event in self.log if event["agent"] == name]


if __name__ == "__main__":
    zygote()
