"""Namespaces and operators: an address namespace's admin sets a policy, admits, revokes and grants.

The guide docs/howto/namespaces.md.
"""

from datetime import UTC, datetime

from chainfence import AcquireReason, Chain, LeaseSet, Registry
from chainfence.errors import LeaseRevoked, LockDelayed, NotAdmitted

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice = registry.connect(chain.accounts[1])
bob = registry.connect(chain.accounts[2])

ops = registry.connect(chain.accounts[3])
team = ops.namespace()  # "0x" + ops's address: ops's by construction
prod = team.prefix
team.set_policy(max_ttl=600, lock_delay=30, admission_required=True)
team.admit([alice.sender])  # accounts or contracts
try:
    bob.acquire(f"{prod}/db", ttl=60)
except NotAdmitted as refused:
    print(f"refused: {refused.holder}")
stuck = alice.acquire(f"{prod}/db", ttl=600)
team.revoke(f"{prod}/db")  # ends it like a release, recorded
try:
    stuck.renew()
except LeaseRevoked:
    print("alice's token no longer counts anywhere")
granted = team.grant(f"{prod}/db", alice.sender, ttl=60)  # a new, higher token for a named holder
assert granted.reason is AcquireReason.GRANTED and granted.token > stuck.token
team.admit([bob.sender])
team.set_policy(max_ttl=0)  # only max_ttl changes: the rest stays
chain.advance_time(61)  # the grant expires: the lock-delay runs
try:
    bob.acquire(f"{prod}/db", ttl=60)  # only alice may, for 30 s
except LockDelayed as delayed:
    print(f"lock-delay until {datetime.fromtimestamp(delayed.until, UTC):%H:%M:%S} UTC")
job = bob.workset(f"{prod}/jobs").claim(["j1", "j2"], ttl=600)  # work items follow their workset's namespace
ops.workset(f"{prod}/jobs").revoke(job.item)  # (not team.revoke(f"{prod}/jobs/j1"): a plain name)
with LeaseSet.acquire(alice, [f"{prod}/db", f"{prod}/cache"], ttl=60) as both:  # one transaction, all or nothing
    print(both.tokens)  # consecutive tokens
    both.renew(60)  # renew (or release) the set at once
print(team.policy().admin == ops.sender)
