"""A guard that admits only Alice refuses a stranger's genuine, current token, and moves no mark.

The guide docs/howto/file-or-http.md."""

from pathlib import Path

from chainfence import Admission, Chain, Guard, Registry
from chainfence.errors import NotAdmitted

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice, stranger = (registry.connect(account) for account in chain.accounts[1:3])

# A new embedded chain each run, so a new guard store: a guard refuses a store that holds
# another registry's marks (GuardStoreMismatch) rather than mix two token spaces.
for old in Path().glob("admitted.sqlite*"):
    old.unlink()
guard = Guard(registry, path="admitted.sqlite", admission=Admission.local([alice.sender]))
lease = stranger.acquire("prod/db", ttl=60)  # genuine, current, live
try:
    guard.check("prod/db", lease.token)
except NotAdmitted as refused:  # 403 at the middleware; the mark did not move
    print(refused.admission, guard.mark("prod/db"))
guard.close()
