"""An agent in its own process, with its own key, for the multi-process tests on anvil.

    python -m tests.support.agent contend URL REGISTRY KEY_INDEX RESOURCE CYCLES GUARD COUNTER
    python -m tests.support.agent hold    URL REGISTRY KEY_INDEX RESOURCE TTL GUARD REPORT
    python -m tests.support.agent post    URL REGISTRY KEY_INDEX RESOURCE TTL SERVICE_URL
    python -m tests.support.agent churn   URL REGISTRY KEY_INDEX RESOURCE GUARD
    python -m tests.support.agent claimer URL REGISTRY KEY_INDEX WORKSET ITEMS
    python -m tests.support.agent naive   URL REGISTRY KEY_INDEX WORKSET ITEMS

``claimer``: a shell-agent loop driven one step per stdin line: ``claim`` claims
the next free item of WORKSET (ITEMS items ``item-000``...) live, in one
transaction, and prints it (or ``nothing``); ``complete`` completes the
item it holds and prints ``completed`` or the typed error that refused it.
It remembers nothing across restarts: a test SIGKILLs it and starts another.

``naive``: the control. ``read`` picks the first item whose plain lease
(``WORKSET/item``) is not released (a released one counts as done), from a
view; ``take`` then acquires it, completes it and releases it: read and
take are two transactions apart.

``churn``: forever: acquire (a new, higher token each time), check it at the
guard, print it once accepted. A test SIGKILLs it at random moments.

``contend``: CYCLES times: acquire RESOURCE (retrying while held), check the
token at the shared guard, then increment a counter in a shared SQLite file
by a deliberately non-atomic read-then-write (only mutual exclusion plus
fencing keeps it from losing updates), then release. Prints one JSON line
per cycle.

``hold``: acquire with TTL, write "part 1" to a shared report through the
guard (GUARD "-" means no guard: the unfenced control), print "holding",
then write the next part with the same token each time a line arrives on
stdin (printing "wrote"), until a write is rejected or stdin closes
("finished"). A test SIGSTOPs it while it waits for a line: a pause at a
known point, outside any SQLite transaction, that no clock decides.

``post``: the same with HTTP: acquire, POST signed part 1 to a fenced
service, then one more part per line on stdin, until refused or stdin
closes. Every answer is printed.
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import time

from chainfence import Chain, ChainfenceError, Guard, LeaseStatus, Registry, Timeouts
from chainfence.errors import LeaseHeld, TokenNotCurrent
from chainfence.testing.anvil import dev_keys


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def connect(url: str, address: str, key_index: int) -> Registry:
    chain = Chain.connect(url, private_key=dev_keys(20)[key_index], timeouts=Timeouts(receipt=60, poll=0.005))
    return Registry.at(chain, address)


def shared_db(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 30000")
    return db


def contend(registry: Registry, resource: str, cycles: int, guard_path: str, counter_path: str) -> None:
    guard = Guard(registry, path=guard_path)
    counter = shared_db(counter_path)
    for cycle in range(cycles):
        backoff = 0.002
        while True:
            try:
                lease = registry.acquire(resource, ttl=60)
                break
            except LeaseHeld:
                # Back off like a polite client: seven agents polling every few ms would take the CPU
                # the holder needs to finish, and on a loaded machine the workload would crawl.
                time.sleep(random.uniform(0, backoff))
                backoff = min(backoff * 2, 0.1)
        try:
            guard.check(resource, lease.token)
        except TokenNotCurrent as rejected:
            emit(cycle=cycle, token=lease.token, accepted=False, error=type(rejected).__name__)
            lease.release()
            continue
        (value,) = counter.execute("SELECT value FROM counter").fetchone()
        time.sleep(0.001)  # widen the window a lost update would need
        counter.execute("UPDATE counter SET value = ?", (value + 1,))
        lease.release()
        emit(cycle=cycle, token=lease.token, accepted=True, wrote=value + 1)


def hold(registry: Registry, resource: str, ttl: int, guard_path: str, report_path: str) -> None:
    guard = None if guard_path == "-" else Guard(registry, path=guard_path)
    report = shared_db(report_path)
    lease = registry.acquire(resource, ttl=ttl)

    def write(part: int) -> bool:
        if guard is not None:
            try:
                guard.check(resource, lease.token)
            except TokenNotCurrent as rejected:
                emit(event="rejected", part=part, token=lease.token, error=type(rejected).__name__)
                return False
        report.execute("UPDATE report SET content = ?, token = ?", (f"holder part {part}", lease.token))
        return True

    write(1)
    emit(event="holding", token=lease.token, expires_at=lease.expires_at)
    part = 1
    while sys.stdin.readline():  # the test says when the next write comes
        part += 1
        if not write(part):
            return
        emit(event="wrote", part=part, token=lease.token)
    emit(event="finished", token=lease.token)


def post(registry: Registry, resource: str, ttl: int, service: str) -> None:
    """Acquire, POST signed part 1 to a fenced HTTP service, then one more part per line on stdin."""
    import httpx

    lease = registry.acquire(resource, ttl=ttl)
    with httpx.Client(base_url=service, timeout=60) as client:
        part = 1
        while True:
            body = f"part {part} from token {lease.token}".encode()
            signed = lease.sign(body, action=f"POST /{resource}", audience="reports-service")
            response = client.post("/" + resource, content=body, headers=signed.to_headers())
            emit(
                event="posted",
                part=part,
                token=lease.token,
                status=response.status_code,
                error=response.json().get("error") if response.status_code != 200 else None,
                expires_at=lease.expires_at,
            )
            if response.status_code != 200 or not sys.stdin.readline():
                return
            part += 1


def churn(registry: Registry, resource: str, guard_path: str) -> None:
    guard = Guard(registry, path=guard_path)
    while True:
        lease = registry.acquire(resource, ttl=600)
        guard.check(resource, lease.token)
        emit(accepted=lease.token)


def claim_items(count: int) -> list[str]:
    return [f"item-{i:03d}" for i in range(count)]


def claimer(registry: Registry, workset: str, count: int) -> None:
    items = claim_items(count)
    lease = None
    emit(event="ready")
    for line in sys.stdin:
        step = line.strip()
        if step == "claim":
            lease = registry.workset(workset).claim(items, ttl=60)
            if lease is None:
                emit(event="nothing")
            else:
                emit(event="claimed", item=lease.item, token=lease.token, reason=lease.reason.name.lower())
        elif step == "complete":
            try:
                lease.complete(f"{lease.item} by token {lease.token}".encode())
            except ChainfenceError as refused:
                emit(event="refused", item=lease.item, token=lease.token, error=type(refused).__name__)
            else:
                emit(event="completed", item=lease.item, token=lease.token)
            lease = None


def naive(registry: Registry, workset: str, count: int) -> None:
    chosen = None
    emit(event="ready")
    for line in sys.stdin:
        step = line.strip()
        if step == "read":
            chosen = None
            for item in claim_items(count):
                info = registry.last_lease(f"{workset}/{item}")
                if info is None or info.status is not LeaseStatus.RELEASED:
                    chosen = item
                    break
            emit(event="read", item=chosen)
        elif step == "take":
            try:
                lease = registry.acquire(f"{workset}/{chosen}", ttl=60)
            except LeaseHeld:
                emit(event="held", item=chosen)
                continue
            lease.complete(f"{chosen} by token {lease.token}".encode())
            lease.release()
            emit(event="completed", item=chosen, token=lease.token)


def main(argv: list[str]) -> int:
    mode, url, address, key_index, resource = argv[:5]
    registry = connect(url, address, int(key_index))
    if mode == "contend":
        contend(registry, resource, int(argv[5]), argv[6], argv[7])
    elif mode == "hold":
        hold(registry, resource, int(argv[5]), argv[6], argv[7])
    elif mode == "post":
        post(registry, resource, int(argv[5]), argv[6])
    elif mode == "churn":
        churn(registry, resource, argv[5])
    elif mode == "claimer":
        claimer(registry, resource, int(argv[5]))
    elif mode == "naive":
        naive(registry, resource, int(argv[5]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
