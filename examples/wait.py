"""Wait for a held resource without paying gas: acquire(..., wait=) returns once the holder lets go.

The guide docs/howto/wait.md.
"""

import threading

from chainfence import Chain, Registry

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice = registry.connect(chain.accounts[1])
bob = registry.connect(chain.accounts[2])

held = alice.acquire("reports/daily", ttl=300)
threading.Timer(0.5, held.release).start()  # alice finishes a little later, in another thread
lease = bob.acquire("reports/daily", ttl=30, wait=60)  # LeaseHeld if still held after 60 s; sends nothing meanwhile
print(f"bob got it when alice released it: token {lease.token} after {held.token}")
lease.release()

with bob.acquire("jobs/etl", ttl=60, wait=300) as job:  # waits (here: free at once), runs the body, releases
    print(f"bob runs jobs/etl with token {job.token}")
