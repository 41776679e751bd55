"""Several resources held together, or none: LeaseSet.acquire, kept alive and released as a set.

The guide docs/howto/keep-alive.md ("Several resources at once").
"""

from chainfence import Chain, LeaseSet, Registry
from chainfence.errors import LeaseHeld

chain = Chain.embedded()
registry = Registry.deploy(chain)
agent = registry.connect(chain.accounts[1])
other = registry.connect(chain.accounts[2])

leases = LeaseSet.acquire(agent, ["db/users", "db/orders"], ttl=30)  # one transaction, all or nothing
with leases, leases.keep():  # one renewMany per interval, one shared safe deadline
    leases.check()  # LeaseSetLost (a LeaseLost) names the member that ended, and how
    print("holding", sorted(leases.tokens), "(consecutive tokens)")
    try:
        LeaseSet.acquire(other, ["db/orders", "db/invoices"], ttl=30)
    except LeaseHeld as held:  # db/orders is taken: nothing was acquired, db/invoices neither
        print(
            "the other agent is refused:",
            held.resource,
            "| db/invoices free:",
            registry.lease_of("db/invoices") is None,
        )
# leaving: the set is released; if a member had ended, the others are released and LeaseSetLost says which
print("released:", registry.lease_of("db/users") is None and registry.lease_of("db/orders") is None)
