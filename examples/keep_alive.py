"""lease.keep(): renewed in the background, the work stopped before the lease can end on-chain.

The tutorial's third step and the keep-alive guide (docs/howto/keep-alive.md)."""

from chainfence import Chain, Registry
from chainfence.errors import LeaseLost

chain = Chain.embedded()
agent = Registry.deploy(chain).connect(chain.accounts[1])


def stop_the_work(lost: LeaseLost) -> None:  # runs in the renewer thread: cancel, signal, set a flag
    print(f"lost {lost.resource} ({lost.why})")


with agent.acquire("reports/daily", ttl=30) as lease, lease.keep(on_lost=stop_the_work):
    for part in ("part 1", "part 2"):
        lease.check()  # LeaseLost once the lease can no longer be trusted
        print(f"write {part} with token {lease.token} ({lease.safe_remaining():.0f} s safe)")
# leaving keep(): the renewer stops for good (never a renewal after exit); then the lease is released
