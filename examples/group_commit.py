"""Nine agents in one process behind one account: their calls share transactions (registry.batched()).

The guide docs/howto/many-agents.md."""

import threading

from chainfence import Chain, Registry
from chainfence.errors import LeaseHeld

chain = Chain.embedded()
registry = Registry.deploy(chain)
registry.connect(chain.accounts[2]).acquire("jobs/busy", ttl=60)  # someone else holds this one
fleet = registry.connect(chain.accounts[1]).batched()  # one per account and settings: every agent shares it


def agent(name):
    try:
        with fleet.lease(name, ttl=30) as lease, lease.keep():  # acquired, renewed and released: batched
            print(name, "token", lease.token, "reason", lease.reason.name.lower())
    except LeaseHeld as held:  # refused for this agent alone, with the lone call's error
        print(name, "held by", held.holder)


agents = [threading.Thread(target=agent, args=(f"jobs/{i}",)) for i in range(8)]
agents.append(threading.Thread(target=agent, args=("jobs/busy",)))
for thread in agents:
    thread.start()
for thread in agents:
    thread.join()
print(fleet.operations, "operations in", fleet.batches, "transactions")
