"""Two candidates, one leader at a time; a deposed leader's late write is refused by the guard.

The guide docs/howto/election.md."""

from pathlib import Path

from chainfence import Chain, Election, Guard, Registry
from chainfence.errors import StaleToken

chain = Chain.embedded()
registry = Registry.deploy(chain)
# A new embedded chain each run, so a new guard store: a guard refuses a store that holds
# another registry's marks (GuardStoreMismatch) rather than mix two token spaces.
for old in Path().glob("billing-guard.sqlite*"):
    old.unlink()
guard = Guard(registry, path="billing-guard.sqlite")  # where the leader's writes land
alice = Election(registry.connect(chain.accounts[1]), "billing/leader", ttl=30)
bob = Election(registry.connect(chain.accounts[2]), "billing/leader", ttl=30)

changes = bob.observe(timeout=0)  # the leader now, then each change (timeout=0: up to the next look)
print("leader:", next(changes))  # None: nobody leads yet
with alice.campaign(on_lost=lambda lost: print("stepping down:", lost.why)) as leadership:
    leadership.check()  # LeaseLost once the term can no longer be trusted
    guard.check("billing/leader", leadership.token)  # fence every write with the term's token
    print(f"alice leads with token {leadership.token}")
# leaving the block: alice's keep-alive stops for good, then she resigns
deposed = leadership.token
with bob.campaign(wait=60) as leadership:  # waits (no gas) until elected
    guard.check("billing/leader", leadership.token)
    print(f"bob leads with token {leadership.token}")
    try:
        guard.check("billing/leader", deposed)  # alice, deposed, writes late
    except StaleToken:
        print(f"a late write with token {deposed} is refused")
print("terms:", [None if leader is None else leader.token for leader in changes])
guard.close()
