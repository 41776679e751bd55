"""A picture of who held what: the audit index's leases drawn as one self-contained HTML page.

The guide docs/howto/timeline.md (`chainfence audit timeline NAME... --out F.html` does the same).
"""

from pathlib import Path

from chainfence import AuditIndex, Chain, Registry
from chainfence.audit.timeline import render

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice = registry.connect(chain.accounts[1])
bob = registry.connect(chain.accounts[2])

alice.acquire("reports/daily", ttl=30).renew(progress=1)
chain.advance_time(31)  # alice's lease runs out: bob takes over
bob.acquire("reports/daily", ttl=30).release()
with alice.acquire("jobs/etl", ttl=60):
    chain.advance_time(10)

for old in Path().glob("timeline-audit.sqlite*"):  # a new embedded chain each run: a new index
    old.unlink()
with AuditIndex("timeline-audit.sqlite") as index:
    index.sync(registry)
    leases = index.timeline_leases(["reports/daily", "jobs/etl"])
page = Path("timeline.html")
page.write_text(render(leases, title="reports/daily and jobs/etl"), encoding="utf-8")
print(f"{len(leases)} leases drawn in {page} ({page.stat().st_size:,} bytes): open it in a browser")
