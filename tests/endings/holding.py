"""What the holder-side scenarios of the matrix share: a world with a namespace admin, and each way a lease ends.

Every scenario here is the same story, told for one part (``keep``,
``aio.keep``, ``claims``, ``lease_set``) and one way (:mod:`chainfence.endings`):

1. alice holds a lease (a plain lease, a claimed item, or a set) in namespace
   ``prod``, whose admin is carol (assigned at deployment), and keeps it alive
   on a :class:`~tests.support.virtual_time.SteppedClock` the test moves;
2. the lease ends that way on-chain (:func:`end`), or, for the local ends, the
   renewer cannot renew (:func:`break_renewals`);
3. the keep-alive's clock reaches the next renewal (or the safe deadline), and
   the scenario checks that the loss names the way: ``on_lost`` ran once with
   it, ``check()`` raises it, leaving the block raises it.

Chain time moves only with ``chain.advance_time`` and the keep-alive's clock
only when the test sets it: no wall-clock window anywhere.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Any

import pytest

from chainfence import Chain, Registry
from chainfence.endings import End, LocalEnd
from chainfence.errors import LeaseLost, NodeUnreachable
from tests.support.sequencer import async_wait_until, wait_until
from tests.support.virtual_time import SteppedClock

NAMESPACE = "prod"
TTL = 30
#: When the first renewal is due (half the ttl) and when the safe deadline passes (ttl - 1 - 2).
DUE, DEADLINE = 15.0, 27.0


@dataclass
class World:
    chain: Chain
    registry: Registry  # the deployer's view
    alice: Registry  # the holder
    bob: Registry  # another account: a successor
    carol: Registry  # the admin of namespace ``prod``

    @classmethod
    def on(cls, chain: Chain) -> World:
        """A registry whose namespace ``prod`` belongs to carol from deployment, on the test's chain."""
        accounts = chain.accounts
        registry = Registry.deploy(chain, max_ttl=3_600, namespaces={NAMESPACE: accounts[3]})
        return cls(chain, registry, *(registry.connect(accounts[i]) for i in (1, 2, 3)))


def end(way: enum.Enum, w: World, lease: Any, *, snapshot: Any = None) -> None:
    """Make ``lease`` (a chainfence Lease: a plain lease, a claimed item, a set's member) end ``way`` on-chain,
    the way the world does it to a holder that is not looking."""
    if way is End.EXPIRED:
        w.chain.advance_time(TTL + 1)
    elif way is End.RELEASED:  # another process of the same holder
        w.alice._drive(w.alice._release_by_id_steps(lease.resource, lease.resource_id, lease.token, None))
    elif way is End.COMPLETED:  # another process of the same claimant
        w.alice._drive(
            w.alice._complete_by_id_steps(lease.resource, lease.resource_id, lease.token, b"done elsewhere", None)
        )
    elif way is End.SUPERSEDED:  # the holder acquires again (a restarted agent): its past self is fenced off
        if lease.item is not None:
            w.alice.workset(lease.workset).claim([lease.item], TTL)
        else:
            w.alice.acquire(lease.resource, TTL)
    elif way is End.REVOKED:
        if lease.item is not None:
            w.carol.workset(lease.workset).revoke(lease.item)
        else:
            w.carol.namespace(NAMESPACE).revoke(lease.resource)
    elif way is End.GRANTED:
        if lease.item is not None:
            w.carol.workset(lease.workset).grant(lease.item, w.bob.sender, TTL)
        else:
            w.carol.namespace(NAMESPACE).grant(lease.resource, w.bob.sender, TTL)
    elif way is End.ROLLED_BACK:  # the chain loses the history that issued it (a dev node restarted)
        w.chain.revert(snapshot)
    else:  # pragma: no cover
        raise AssertionError(way)


def acquire_after(w: World, lease: Any) -> Any:
    """bob acquires the resource once it is free: the successor whose acquisition names the way."""
    if lease.item is not None:
        return w.bob.workset(lease.workset).claim([lease.item], TTL)
    return w.bob.acquire(lease.resource, TTL)


def failure(way: enum.Enum) -> BaseException:
    """What every renewal meets for a local end: a node that does not answer, or a bug."""
    return NodeUnreachable("no node answers") if way is LocalEnd.DEADLINE else RuntimeError("a bug in the renewer")


def settle(kept: Any, clock: SteppedClock) -> None:
    """Wait until the renewer thread decided at the clock's reading with no renewal in flight."""
    keeper = kept.keeper
    wait_until(lambda: keeper.evaluated_at == clock.now and keeper.core.in_flight is None, f"acted at {clock.now}")


def keep_until_lost(
    kept: Any,
    way: enum.Enum,
    w: World,
    subject: Any,
    monkeypatch: pytest.MonkeyPatch,
    *,
    snapshot: Any = None,
    successor: bool = False,
) -> tuple[list[LeaseLost], LeaseLost, LeaseLost]:
    """``with kept.keep():`` (a Lease or a LeaseSet), end ``subject`` ``way``, let the renewal find it.

    Returns (every on_lost error, check()'s error, the error leaving the block raised)."""
    clock = SteppedClock()
    lost: list[LeaseLost] = []
    with pytest.raises(LeaseLost) as at_exit:
        with kept.keep(clock=clock, since=0.0, on_lost=lost.append):
            settle(kept, clock)
            if isinstance(way, LocalEnd):
                error = failure(way)

                def broken(ttl: Any) -> int:
                    raise error

                monkeypatch.setattr(kept, "_kept_renew_steps", broken)
            else:
                end(way, w, subject, snapshot=snapshot)
                if successor:
                    acquire_after(w, subject)
            clock.now = DUE
            if way is LocalEnd.DEADLINE:
                wait_until(lambda: kept.keeper.core.failures >= 1, "a renewal failed and is retried")
                clock.now = DEADLINE
            wait_until(lambda: lost, "on_lost ran")
            with pytest.raises(LeaseLost) as checked:
                kept.check()
    return lost, checked.value, at_exit.value


async def akeep_until_lost(
    kept: Any, way: enum.Enum, w: World, subject: Any, *, snapshot: Any = None, successor: bool = False
) -> tuple[list[LeaseLost], LeaseLost, LeaseLost, list[str]]:
    """:func:`keep_until_lost` for an AsyncLease / AsyncLeaseSet: the body waits until it is cancelled.

    Returns (on_lost errors, check()'s error, the error leaving the block raised, what the body reached)."""
    clock = SteppedClock()
    lost: list[LeaseLost] = []
    reached: list[str] = []
    with pytest.raises(LeaseLost) as at_exit:
        async with kept.keep(clock=clock, since=0.0, on_lost=lost.append):
            keeper = kept.keeper
            await async_wait_until(lambda: keeper.evaluated_at == clock.now, "the keep-alive acted")
            if isinstance(way, LocalEnd):
                error = failure(way)

                async def broken(ttl: Any) -> int:
                    raise error

                keeper._renew_call = broken
            else:
                await asyncio.to_thread(end, way, w, subject, snapshot=snapshot)
                if successor:
                    await asyncio.to_thread(acquire_after, w, subject)
            clock.now = DUE
            if way is LocalEnd.DEADLINE:
                await async_wait_until(lambda: keeper.core.failures >= 1, "a renewal failed and is retried")
                clock.now = DEADLINE
            reached.append("waiting")
            await asyncio.Event().wait()  # the work: runs until the keep-alive cancels it
            reached.append("past the loss")
    with pytest.raises(LeaseLost) as checked:
        kept.check()
    return lost, checked.value, at_exit.value, reached


def assert_lost(
    lost: list[LeaseLost], checked: LeaseLost, at_exit: LeaseLost, why: str, *, resource: str, token: int
) -> None:
    """on_lost ran exactly once; it, check() and the block's exit all name the same end of the same lease."""
    assert [error.why for error in lost] == [why], lost
    for error in (lost[0], checked, at_exit):
        assert (error.resource, error.token, error.why) == (resource, token, why), error


def run_async(chain: Chain, body: Any) -> Any:
    """``body(achain)`` in a fresh event loop over an asyncio view of ``chain`` (120 s safety net)."""
    from chainfence.aio import AsyncChain

    async def main() -> Any:
        async with AsyncChain.over(chain) as achain:
            return await asyncio.wait_for(body(achain), 120)

    return asyncio.run(main())
