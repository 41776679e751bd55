"""Progress markers and the stuck-holder watchdog: a heartbeat is not proof of progress.

The guide docs/howto/keep-alive.md ("Progress, and finding stuck holders").
"""

from chainfence import Chain, Registry
from chainfence.audit import watchdog

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice = registry.connect(chain.accounts[1])

lease = alice.acquire("jobs/etl", ttl=60)
lease.renew(progress=b"step-1")  # bytes, 1-32 (right-padded); or an int counter; or a str (its keccak256)
lease.renew(progress=17)
report = watchdog.stuck(registry, renewals=3, longer_than=3_600)  # stuck, crashed (expired unreleased), held too long
print("so far:", len(report.stuck), "stuck,", len(report.crashed), "crashed,", len(report.long_held), "held too long")
for _ in range(3):  # renewed three more times, the marker unchanged: alive, but stuck
    lease.renew(progress=17)
report = watchdog.stuck(registry, renewals=3)
print("stuck:", [(stuck.resource, stuck.token) for stuck in report.stuck])
