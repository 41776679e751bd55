"""The same SDK for asyncio (chainfence.aio): a lease kept by a task.

The guide docs/howto/asyncio.md."""

import asyncio

from chainfence.aio import AsyncChain, AsyncRegistry


async def main() -> None:
    async with AsyncChain.embedded() as chain:  # or: await AsyncChain.connect(url, private_key=key)
        agent = (await AsyncRegistry.deploy(chain)).connect(chain.accounts[1])
        async with await agent.acquire("reports/daily", ttl=30) as lease, lease.keep():
            lease.check()  # LeaseLost once the lease can no longer be trusted
            print(f"async write with token {lease.token}")  # on a loss, this task is cancelled
        print("released:", await agent.lease_of("reports/daily") is None)


asyncio.run(main())
