"""Who held a resource at a given time, and why: the audit index over the registry's events.

The guide docs/howto/audit.md.
"""

from datetime import UTC, datetime
from pathlib import Path

from chainfence import AuditIndex, Chain, Registry

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice = registry.connect(chain.accounts[1])
bob = registry.connect(chain.accounts[2])

first = alice.acquire("reports/daily", ttl=30)
chain.advance_time(31)  # alice's lease runs out
second = bob.acquire("reports/daily", ttl=30)  # bob takes over: reason "expired"
second.release()

for old in Path().glob("audit.sqlite*"):  # a new embedded chain each run: a new index
    old.unlink()
index = AuditIndex("audit.sqlite")
index.sync(registry)  # incremental: only the blocks it lacks
for lease in index.history("reports/daily"):  # its tokens: who, since when, why, how it ended (a page of 100)
    since = datetime.fromtimestamp(lease.acquired_at, UTC).strftime("%H:%M:%S")
    who = "alice" if lease.holder == alice.sender else "bob"
    print(f"token {lease.token}: {who} from {since}, issued because {lease.reason.name.lower()}, ended {lease.ended}")
at = index.holder_at("reports/daily", time=first.expires_at - 1)  # the last second of alice's lease
print("who held it then: alice", at.holder == alice.sender, "with token", at.token)
print("and once it had expired:", index.holder_at("reports/daily", time=first.expires_at + 1))
print("takeovers:", [(t.token, t.reason.name) for t in index.takeovers()])
index.close()
