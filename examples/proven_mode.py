"""Believe no single provider: the guard proves the lease slot against headers a source vouches for.

Runs its own anvil (eth-tester serves no eth_getProof): `chainfence node`'s, or the project's npm install.
In production: QuorumHeaders([url_a, url_b, url_c], k=2) (independent providers), or TrustedHeaders at a
light client. The guide docs/howto/not-trusting-the-provider.md.
"""

from pathlib import Path

from chainfence import Chain, Guard, Registry
from chainfence.errors import StaleToken
from chainfence.guard import Proven
from chainfence.proofs import ProvenReader, TrustedHeaders
from chainfence.testing.anvil import AnvilProcess, dev_keys

with AnvilProcess() as node:  # a local node on a free port (stopped at the end)
    chain = Chain.connect(node.url, private_keys=dev_keys(3))
    registry = Registry.deploy(chain)
    alice = registry.connect(chain.accounts[1])
    bob = registry.connect(chain.accounts[2])
    headers = TrustedHeaders(node.url)  # here: the one node; or QuorumHeaders([url_a, url_b, url_c], k=2)

    for old in Path().glob("proven-guard.sqlite*"):  # a new chain each run: a new guard store
        old.unlink()
    guard = Guard(registry, "proven-guard.sqlite", mode=Proven(headers))  # every check proven
    paused = alice.acquire("reports/daily", ttl=30)
    guard.check("reports/daily", paused.token)
    chain.advance_time(31)
    takeover = bob.acquire("reports/daily", ttl=30)
    guard.check("reports/daily", takeover.token)
    try:
        guard.check("reports/daily", paused.token)  # StaleToken, LeaseExpired, ... as strict mode, proven
    except StaleToken as stale:
        print("refused, proven:", stale)
    guard.close()

    reader = ProvenReader(registry.address, headers=headers, provider=node.url)  # the library underneath
    print("token", takeover.token, "proven current:", reader.check("reports/daily", takeover.token) is not None)
