"""AsyncGuard on both backends: every operation of the Guard, awaited, over an AsyncRegistry.

The guard's own code runs (in a worker thread): the same marks, the same refusals, and a rejected write
moves no mark. An exclusive guard answers a token at the mark it remembers on the loop. A cancelled
``open`` leaves nothing open (control: a naive ``to_thread(Guard, ...)`` leaves an exclusive store locked).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from chainfence import Admission, Guard, Registry
from chainfence.aio import AsyncChain, AsyncGuard, AsyncRegistry
from chainfence.errors import GuardError, InvalidInput, NotAdmitted, ReplayedRequest, StaleToken, UnknownToken
from chainfence.guard import Follow, FollowStatus, RequestPolicy
from tests.support.sequencer import async_wait_until

# On hardhat's node too (tests/conftest.py); ganache runs most of these, left out for the suite's time
# (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

NAME = "aio/guarded"
BODY = b"report"
ACTION = "POST /reports"
AUDIENCE = "reports-service"


def run(registry: Registry, body):
    """Run ``body(async_registry)`` in a fresh event loop, over an AsyncRegistry of ``registry``."""

    async def main():
        async with AsyncChain.over(registry.chain) as achain:
            return await asyncio.wait_for(body(await AsyncRegistry.at(achain, registry.address)), 120)

    return asyncio.run(main())


def test_an_opened_async_guard_checks_marks_and_closes(chain, registry, alice, bob, tmp_path):
    """open -> check (the mark rises) -> a stale token refused with the mark unmoved -> mark, marks,
    settings -> async with closes the store."""
    old = alice.acquire(NAME, ttl=30)

    async def body(registry):
        async with await AsyncGuard.open(
            registry, tmp_path / "g.sqlite", requests=RequestPolicy(audience=AUDIENCE)
        ) as guard:
            assert guard.registry is registry and guard.mode == "mark" and guard.audience == AUDIENCE
            assert (guard.path, guard.exclusive, guard.confirmations) == (tmp_path / "g.sqlite", False, 0)
            assert await guard.check(NAME, old.token) == old.token
            chain.advance_time(31)
            new = bob.acquire(NAME, ttl=30)
            assert await guard.check(NAME, new.token) == new.token
            with pytest.raises(StaleToken):
                await guard.check(NAME, old.token)
            with pytest.raises(UnknownToken):
                await guard.check("aio/never-held", new.token)
            assert await guard.mark(NAME) == new.token, "a rejected write moved no mark"
            assert await guard.marks() == {NAME: new.token}
        return guard

    guard = run(registry, body)
    with pytest.raises(GuardError, match="closed"):
        guard.guard.mark(NAME)


def test_signed_requests_and_the_domain(chain, registry, alice, tmp_path):
    lease = alice.acquire(NAME, ttl=60)
    domain = registry.eip712_domain()

    async def body(registry):
        async with await AsyncGuard.open(
            registry, tmp_path / "g.sqlite", requests=RequestPolicy(audience=AUDIENCE)
        ) as guard:
            assert await guard.domain() == domain
            request = lease.sign(BODY, action=ACTION, audience=AUDIENCE)
            assert await guard.check_request(request, BODY, action=ACTION) is request
            with pytest.raises(ReplayedRequest):
                await guard.check_request(request, BODY, action=ACTION)
            assert await guard.mark(NAME) == lease.token

    run(registry, body)


def test_follow_mode_sync_and_status(chain, registry, alice, bob, tmp_path):
    """A follow guard's sync (awaited) raises the mark to a successor's token before it writes: the old
    holder is refused at once; the follower's status, staleness and block read as the guard's."""
    old = alice.acquire(NAME, ttl=30)

    async def body(registry):
        opened = AsyncGuard.open(registry, tmp_path / "g.sqlite", mode=Follow(interval=3_600))
        async with await opened as guard:
            assert await guard.check(NAME, old.token) == old.token
            chain.advance_time(31)
            new = bob.acquire(NAME, ttl=30)
            block = await guard.sync()
            assert guard.followed_block == block >= new.block_number
            status = guard.follow_status()
            assert isinstance(status, FollowStatus) and status.healthy and status.followed_block == block
            assert guard.staleness() <= guard.max_lag and guard.follow_interval == 3_600
            with pytest.raises(StaleToken):
                await guard.check(NAME, old.token)
            assert await guard.mark(NAME) == new.token

    run(registry, body)


def test_an_exclusive_guard_answers_at_the_mark_on_the_loop(chain, registry, alice, tmp_path, monkeypatch):
    """Memory only: no worker thread for a token at the mark (a token above it still goes to one)."""
    import chainfence.guard._async as async_module

    lease = alice.acquire(NAME, ttl=60)
    threads = []
    real = asyncio.to_thread

    async def counted(function, *args, **kwargs):
        threads.append(getattr(function, "__name__", repr(function)))
        return await real(function, *args, **kwargs)

    monkeypatch.setattr(async_module.asyncio, "to_thread", counted)

    async def body(registry):
        async with await AsyncGuard.open(registry, tmp_path / "g.sqlite", exclusive=True) as guard:
            assert await guard.check(NAME, lease.token) == lease.token  # news: judged in a thread
            judged = list(threads)
            for _ in range(3):
                assert await guard.check(NAME, lease.token) == lease.token
            assert threads == judged, "a check at the remembered mark went to a thread"

    run(registry, body)
    assert threads[0] == "build" and threads.count("check") == 1


def test_a_holder_the_admission_refuses_moves_no_mark(chain, registry, alice, tmp_path):
    lease = alice.acquire(NAME, ttl=60)

    async def body(registry):
        admission = Admission.local([chain.accounts[2]])
        async with await AsyncGuard.open(registry, tmp_path / "g.sqlite", admission=admission) as guard:
            assert guard.admission == admission
            with pytest.raises(NotAdmitted):
                await guard.check(NAME, lease.token)
            assert await guard.mark(NAME) == 0

    run(registry, body)


def test_a_wrapped_guard_stays_the_callers(chain, registry, alice, tmp_path):
    """AsyncGuard(guard) runs that guard; its registry is the guard's."""
    lease = alice.acquire(NAME, ttl=60)
    guard = Guard(registry, tmp_path / "g.sqlite")

    async def body(_registry):
        wrapped = AsyncGuard(guard)
        assert wrapped.registry is guard.registry and repr(guard) in repr(wrapped)
        return await wrapped.check(NAME, lease.token)

    try:
        assert run(registry, body) == lease.token
        assert guard.mark(NAME) == lease.token
    finally:
        guard.close()


def test_open_refuses_what_is_not_a_registry(tmp_path):
    async def body():
        with pytest.raises(InvalidInput, match="AsyncRegistry or a Registry"):
            await AsyncGuard.open(object(), tmp_path / "g.sqlite")

    asyncio.run(body())


# ---------------------------------------------------------------------------
# A cancelled open
# ---------------------------------------------------------------------------


class Paused:
    """The registry's identity read (the first thing a guard asks when it opens) held until released."""

    def __init__(self, registry: Registry, monkeypatch):
        self.entered, self.release = threading.Event(), threading.Event()
        real = registry.identity

        def identity():
            self.entered.set()
            assert self.release.wait(30)
            return real()

        monkeypatch.setattr(registry, "identity", identity)


def closes(monkeypatch) -> threading.Event:
    """An event set once a Guard was closed."""
    closed, real = threading.Event(), Guard.close

    def close(self):
        real(self)
        closed.set()

    monkeypatch.setattr(Guard, "close", close)
    return closed


async def cancel_while_opening(opening, paused: Paused) -> None:
    task = asyncio.ensure_future(opening)
    assert await asyncio.to_thread(paused.entered.wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    paused.release.set()


def test_a_cancelled_open_leaves_the_store_free(chain, registry, tmp_path, monkeypatch):
    closed = closes(monkeypatch)
    path = tmp_path / "g.sqlite"

    async def body(registry):
        paused = Paused(registry.registry, monkeypatch)
        await cancel_while_opening(AsyncGuard.open(registry, path, exclusive=True), paused)
        assert await asyncio.to_thread(closed.wait, 30), "the guard built after the cancellation was closed"
        monkeypatch.undo()
        async with await AsyncGuard.open(registry, path, exclusive=True) as guard:
            assert guard.exclusive

    run(registry, body)


def test_control_a_naive_cancelled_open_leaves_the_store_locked(chain, registry, tmp_path, monkeypatch):
    path = tmp_path / "g.sqlite"
    built = []

    async def naive_open(registry):
        def build():
            built.append(Guard(registry.registry, path, exclusive=True))

        await asyncio.to_thread(build)

    async def body(registry):
        paused = Paused(registry.registry, monkeypatch)
        await cancel_while_opening(naive_open(registry), paused)
        await async_wait_until(lambda: built, "the worker thread built the guard nobody will receive")
        monkeypatch.undo()
        with pytest.raises(GuardError, match="in use"):
            await AsyncGuard.open(registry, path, exclusive=True)

    try:
        run(registry, body)
    finally:
        for guard in built:
            guard.close()


def test_a_guard_handed_over_as_the_open_was_cancelled_is_closed():
    """The other order: the worker delivered the guard, then the awaiting task was cancelled."""
    from chainfence.guard._async import _Opening

    closed = threading.Event()

    class Built:
        def close(self):
            closed.set()

    opening = _Opening()
    built = Built()
    assert opening.deliver(built) is built
    opening.abandon()
    assert closed.wait(30)
    late = _Opening()
    late.abandon()
    assert late.deliver(Built()) is None, "a guard built after the cancellation is closed by its builder"
