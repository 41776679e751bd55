"""A first lease: acquire a resource, see a second agent refused, release it, take it again.

The tutorial's first step (docs/tutorial/first-lease.md).
"""

from datetime import UTC, datetime

from chainfence import Chain, Registry
from chainfence.errors import LeaseHeld


def when(timestamp: int) -> str:
    """A chain time (seconds since the epoch, block timestamps) as people read it."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


chain = Chain.embedded()  # an in-process chain with 10 funded accounts (the [tester] extra)
registry = Registry.deploy(chain)  # the FencingRegistry contract, deployed on it
alice = registry.connect(chain.accounts[1])  # the same registry, transactions sent as alice
bob = registry.connect(chain.accounts[2])

lease = alice.acquire("reports/daily", ttl=30)
print(f"alice holds {lease.resource} with token {lease.token} until {when(lease.expires_at)}")
try:
    bob.acquire("reports/daily", ttl=30)
except LeaseHeld as held:
    print(f"bob is refused: held by alice ({held.holder == alice.sender}) until {when(held.expires_at)}")
lease.release()

with bob.acquire("reports/daily", ttl=30) as mine:  # acquired here, released at the end of the block
    print(f"bob holds it now with token {mine.token}: a higher token, a new epoch")
print("free again:", registry.lease_of("reports/daily") is None)
