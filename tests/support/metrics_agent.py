"""An agent in its own process that serves its metrics, driven one step per stdin line.

    python -m tests.support.metrics_agent URL REGISTRY KEY_INDEX RESOURCE

Serves ``chainfence.metrics.serve(0)`` and prints ``{"metrics": URL}``; acquires RESOURCE (ttl 60) and
keeps it alive on a clock the test moves: each ``renew`` line moves that clock to the next renewal, waits
until the keep-alive has confirmed it, and prints ``renewed N``; ``release`` leaves the keep-alive,
releases the lease and prints ``released``; stdin closed ends it. Each line printed is an event the
test scrapes after: nothing here waits on the wall clock but for the renewal it asked for.
"""

from __future__ import annotations

import json
import sys
import time

from chainfence import Chain, Registry, Timeouts
from chainfence.metrics import serve
from tests.support.anvil import dev_keys


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def main(url: str, address: str, key_index: str, resource: str) -> None:
    server = serve(0)
    print(json.dumps({"metrics": server.url}), flush=True)
    chain = Chain.connect(url, private_key=dev_keys(20)[int(key_index)], timeouts=Timeouts(receipt=60, poll=0.005))
    registry = Registry.at(chain, address)
    lease = registry.acquire(resource, ttl=60)
    print("acquired", flush=True)
    clock = Clock()
    with lease.keep(clock=clock, since=0.0):
        keeper = lease.keeper
        for line in sys.stdin:
            if line.strip() == "renew":
                renewed = keeper.core.renewals + 1
                clock.now = keeper.core.due
                keeper.wake()
                while keeper.core.renewals < renewed:
                    time.sleep(0.01)
                print(f"renewed {keeper.core.renewals}", flush=True)
            elif line.strip() == "release":
                break
    lease.release()
    print("released", flush=True)
    for _line in sys.stdin:
        pass
    server.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
