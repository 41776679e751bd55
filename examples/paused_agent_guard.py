"""A paused holder wakes with its old token: the guard in front of the resource refuses it.

The tutorial's second step (docs/tutorial/guard.md)."""

from datetime import UTC, datetime
from pathlib import Path

from chainfence import Chain, Guard, Registry, audit
from chainfence.errors import LeaseHeld, StaleToken

chain = Chain.embedded()  # in-process eth-tester chain, 10 funded accounts
registry = Registry.deploy(chain)  # max ttl defaults to one day
alice = registry.connect(chain.accounts[1])  # same registry, transactions sent as alice
bob = registry.connect(chain.accounts[2])

lease = alice.acquire("reports/daily", ttl=30)  # Lease: resource, token, holder, expires_at
try:
    bob.acquire("reports/daily", ttl=30)
except LeaseHeld as held:
    print(held)  # 'reports/daily' is held by 0x2B5A... with token 1 until 2026-11-22 12:03:37 UTC

# A new chain each run, so a new guard store: a guard refuses another registry's marks.
for old in Path().glob("guard.sqlite*"):
    old.unlink()
# The downstream service: one line before every protected write.
guard = Guard(registry, path="guard.sqlite")
guard.check("reports/daily", lease.token)  # accepted; the mark is now lease.token

chain.advance_time(31)  # dev chains only: alice's lease runs out
takeover = bob.acquire("reports/daily", ttl=30)  # a higher token
guard.check("reports/daily", takeover.token)  # accepted; the mark moves up
try:
    guard.check("reports/daily", lease.token)  # alice wakes up with her old token
except StaleToken as stale:
    print(f"rejected: {stale}")  # token 1 ... superseded by token 2

with bob.acquire("jobs/etl", ttl=60) as job:  # LeaseHeld if taken; released on exit
    registry.check_current("jobs/etl", job.token)  # its live lease, or the TokenNotCurrent that says why

for event in audit.history(registry, "reports/daily"):  # who held which token, when, and why
    reason = event.reason.name.lower() if event.reason is not None else "-"  # acquisitions: unheld, expired...
    print(datetime.fromtimestamp(event.block_timestamp, UTC), event.kind.value, event.token, event.holder, reason)
guard.close()
