"""A guard in its own process, for the multi-process fault tests.

    python -m tests.support.guard_worker once   URL REGISTRY STORE RESOURCE TOKEN [--pause-after-verify] [--naive]
    python -m tests.support.guard_worker race   URL REGISTRY STORE RESOURCE

Prints JSON lines on stdout. ``once`` checks one token; with
``--pause-after-verify`` it prints ``{"event": "verified"}`` once the chain
vouched for the token and waits for a line on stdin before recording it (the
window in which another process may raise the mark). ``--naive`` swaps in a
guard that records without re-reading the mark under the write lock: the
control that shows what the real guard prevents.

``race`` repeatedly reads the chain's current token and checks it and an
older one, logging the monotonic-clock start and end of each check, until a
line arrives on stdin; then it prints the log. Each time it sees a higher
current token it prints ``{"event": "seen", "token": T}`` once it has
checked it, so a test can sequence the chain's moves by the workers'
progress instead of by wall-clock windows.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence.errors import StaleToken, TokenNotCurrent
from chainfence.guard._store import GuardStore


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def pause_after_verify(guard: Guard) -> None:
    verify = guard._verify_on_chain

    def paused(*args, **kwargs):
        info = verify(*args, **kwargs)
        emit(event="verified")
        sys.stdin.readline()
        return info

    guard._verify_on_chain = paused  # type: ignore[method-assign]


class NaiveGuard(Guard):
    """check-then-set without atomicity: read the mark, verify, then overwrite it unconditionally."""

    def check(self, resource, token):
        from chainfence._sdk.validate import resource_id as rid

        resource_id = rid(resource)
        conn = self._conn()
        mark, _holder, _rolled_back, _ended = GuardStore.read_mark(conn, resource_id)
        if token == mark:
            return token
        if token < mark:
            raise StaleToken(token=token, current_token=mark, resource=resource)
        self._verify_on_chain(resource, resource_id, token, mark, None)
        conn.execute(
            "INSERT OR REPLACE INTO marks (resource_id, token, holder, name, accepted_at) VALUES (?, ?, NULL, ?, 0)",
            (resource_id, token, resource),
        )
        return token


def main(argv: list[str]) -> int:
    mode, url, address, store, resource = argv[:5]
    registry = Registry.at(Chain.connect(url, timeouts=Timeouts(poll=0.005)), address)
    if mode == "once":
        token = int(argv[5])
        guard_cls = NaiveGuard if "--naive" in argv else Guard
        guard = guard_cls(registry, path=store)
        if "--pause-after-verify" in argv:
            pause_after_verify(guard)
        try:
            guard.check(resource, token)
        except TokenNotCurrent as rejected:
            emit(event="result", accepted=False, error=type(rejected).__name__, mark=guard.mark(resource))
        else:
            emit(event="result", accepted=True, mark=guard.mark(resource))
        if "--hang" in argv:  # wait to be killed, holding the store open
            time.sleep(600)
        return 0
    if mode == "race":
        guard = Guard(registry, path=store)
        stop = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
        log = []
        seen = 0
        emit(event="ready")
        while not stop.is_set():
            current = registry.last_lease(resource).token
            for token in (current, max(1, current - 2)):
                start = time.monotonic_ns()
                try:
                    guard.check(resource, token)
                    verdict = "accepted"
                except TokenNotCurrent as rejected:
                    verdict = type(rejected).__name__
                log.append((start, time.monotonic_ns(), token, verdict))
            if current > seen:
                seen = current
                emit(event="seen", token=current)
        emit(event="log", log=log)
        return 0
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
