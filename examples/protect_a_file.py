"""Protect a file: every write goes through the guard first, so a paused holder's late write never lands.

The guide docs/howto/file-or-http.md. (The check and the write are two steps: a holder superseded between
them still lands that one write; docs/explanation/limits.md.)
"""

from pathlib import Path

from chainfence import Chain, Guard, Registry
from chainfence.errors import TokenNotCurrent

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice = registry.connect(chain.accounts[1])
bob = registry.connect(chain.accounts[2])

# A new embedded chain each run, so a new guard store: a guard refuses another registry's marks.
for old in Path().glob("file-guard.sqlite*"):
    old.unlink()
guard = Guard(registry, path="file-guard.sqlite", mode="strict")  # strict: the chain asked at every write
report = Path("report.txt")


def write(lease, text: str) -> None:
    guard.check("reports/daily", lease.token)  # TokenNotCurrent (StaleToken, LeaseExpired, ...) refuses it
    report.write_text(text, encoding="utf-8")


paused = alice.acquire("reports/daily", ttl=30)
write(paused, "alice's draft")
chain.advance_time(31)  # dev chains only: alice pauses past her lease
try:
    write(paused, "alice, after the pause")  # strict mode refuses her expired lease, successor or not
except TokenNotCurrent as refused:
    print("refused:", type(refused).__name__)
write(bob.acquire("reports/daily", ttl=30), "bob's report")
print("the file holds:", report.read_text(encoding="utf-8"))
guard.close()
