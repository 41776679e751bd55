"""A guard's follower against a log backend that lags or withholds (issue #20): loopback proxies in front of anvil.

The story: alice holds ``jobs/report`` (token A) and a ``follow`` guard has followed her acquisition (its
mark is A). Her lease runs out, bob takes the resource over (token B, in block N). The guard reads the
registry's logs through a provider whose ``eth_getLogs`` answers lag the head (hosted providers' log
indexes do), or leave block N out. Follow mode accepts a token at its mark while the follower is up to
date, so a follower that moved its cursor past block N without bob's acquisition accepts alice's
stale writes for good: the takeover is never read again.

- The follower checks every block's logs against the block (``_node/completeness``: its ``logsBloom``,
  then its receipts against ``receiptsRoot``) before its cursor passes it: at block N it stops, raises
  :class:`~chainfence.errors.LogsIncomplete` (the block, where it stands, how far behind), and is not up
  to date: checks at the mark go on-chain, as follow mode promises while its follower is behind, so
  alice is refused and bob accepted. Once the backend answers block N the next sync takes it up: the gap
  closes by itself. Control: the follower without the check (the follower before this) moves its
  cursor past block N and accepts alice's stale token, after the backend caught up too.
- With a header source (``headers=``), the blooms are the vouched headers' (the log provider's headers,
  linked by parent hashes to the block the source vouches for): a provider that withholds block N's
  logs and forges its header's bloom to match is refused. Control: a follower without a header source
  believes its provider's headers, and is fooled.
- ``AsyncGuard`` runs the same follower: the same outcomes, awaited.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from chainfence import Chain, Election, Registry, Timeouts
from chainfence._node import completeness
from chainfence.aio import AsyncChain, AsyncGuard, AsyncRegistry
from chainfence.errors import LeaseHeld, LogsIncomplete, ProofInvalid, StaleToken
from chainfence.guard import Follow
from chainfence.proofs import QuorumHeaders
from tests.faults.test_audit_integrity import lagging
from tests.support.anvil import dev_keys
from tests.support.follower_proxies import follow_block, follow_guard, through
from tests.support.lying_proxy import LyingProxy
from tests.support.virtual_time import SteppedClock, WaitClock

RESOURCE = "jobs/report"


class Takeover:
    """alice's token A followed by the guard, then bob's takeover B in block ``block``."""

    def __init__(self, registry: Registry):
        self.registry = registry
        self.chain = registry.chain
        self.alice = registry.connect(self.chain.accounts[1])
        self.bob = registry.connect(self.chain.accounts[2])

    def before(self, guard) -> None:
        """The guard follows from here; alice acquires and the guard follows it (its mark is A)."""
        guard.sync()
        self.stale = self.alice.acquire(RESOURCE, ttl=60).token
        guard.sync()
        assert guard.mark(RESOURCE) == self.stale and guard.follow_status().healthy

    def take_over(self) -> None:
        self.chain.advance_time(61)
        lease = self.bob.acquire(RESOURCE, ttl=600)
        self.current, self.block = lease.token, lease.block_number


def withholding(liar: LyingProxy, block: int) -> None:
    """eth_getLogs answered without block ``block``'s logs (as if it had none)."""

    def logs(params, forward):
        return [log for log in forward(params) if int(log["blockNumber"], 16) != block]

    liar.on("eth_getLogs", logs)


def forging_the_bloom(liar: LyingProxy, block: int) -> None:
    """Block ``block``'s header served with an empty logsBloom: the withheld logs are not even hinted at."""

    def header(params, forward):
        found = forward(params)
        if isinstance(found, dict) and int(found["number"], 16) == block:
            found = dict(found, logsBloom="0x" + "00" * 256)
        return found

    liar.on("eth_getBlockByNumber", header)


def the_follower_before_the_check(monkeypatch) -> None:
    """The follower as it was: every answer complete (no block is ever in doubt, none settled by receipts)."""
    monkeypatch.setattr(completeness, "doubt", lambda *args, **query: None)
    monkeypatch.setattr(completeness, "may_hold", lambda *args, **query: False)


def test_a_lagging_log_backend_delays_the_follower_and_checks_go_on_chain_meanwhile(on_anvil, liar, tmp_path, caplog):
    story = Takeover(on_anvil)
    path = tmp_path / "follow.sqlite"
    with follow_guard(through(on_anvil, liar.url), path) as guard:
        story.before(guard)
        lagging(liar, behind=3)
        story.take_over()
        head = story.chain.block_number()
        with caplog.at_level(logging.WARNING, logger="chainfence.guard"), pytest.raises(LogsIncomplete) as held:
            guard.sync()
        assert (held.value.block, held.value.followed, held.value.head) == (story.block, story.block - 1, head)
        assert held.value.behind == head - story.block + 1 and held.value.source == liar.url
        assert "its receipts hold 1 registry events, the answer 0" in held.value.reason
        assert f"waits at block {story.block - 1}" in caplog.text
        status = guard.follow_status()
        assert not status.healthy and "LogsIncomplete" in status.last_error
        assert status.followed_block == follow_block(path) == story.block - 1, "the cursor stands before the block"
        # Meanwhile the follower is behind: checks at the mark go on-chain (follow mode's promise).
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)
        assert guard.check(RESOURCE, story.current) == story.current
        story.chain.mine(3)  # the log backend reaches bob's block (it stays three behind the head)
        assert guard.sync() == story.chain.block_number()
        assert guard.follow_status().healthy and guard.mark(RESOURCE) == story.current, "the gap closed by itself"
        with pytest.raises(StaleToken):
            guard.check(RESOURCE, story.stale)


def test_control_a_follower_that_trusts_the_answer_accepts_the_stale_holder_for_good(
    on_anvil, liar, tmp_path, monkeypatch
):
    story = Takeover(on_anvil)
    the_follower_before_the_check(monkeypatch)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "follow.sqlite") as guard:
        story.before(guard)
        lagging(liar, behind=3)
        story.take_over()
        assert guard.sync() == story.chain.block_number(), "the cursor moved past bob's block"
        assert guard.follow_status().healthy
        assert guard.check(RESOURCE, story.stale) == story.stale, "alice's stale write is accepted"
        story.chain.mine(3)
        guard.sync()
        liar.honest()  # the backend catches up, and even tells the whole truth from now on
        guard.sync()
        assert guard.mark(RESOURCE) == story.stale
        assert guard.check(RESOURCE, story.stale) == story.stale, "for good: the takeover is never read again"


def test_a_backend_that_withholds_a_block_holds_the_follower_there_until_it_answers(on_anvil, liar, tmp_path):
    story = Takeover(on_anvil)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "follow.sqlite") as guard:
        story.before(guard)
        story.take_over()
        withholding(liar, story.block)
        for more in (0, 2, 5):  # however long it withholds, and however far the head moves on
            story.chain.mine(more)
            with pytest.raises(LogsIncomplete) as held:
                guard.sync()
            assert held.value.block == story.block and held.value.followed == story.block - 1
            assert held.value.behind == story.chain.block_number() - (story.block - 1)
            assert not guard.follow_status().healthy
            with pytest.raises(StaleToken):
                guard.check(RESOURCE, story.stale)
        liar.honest()
        assert guard.sync() == story.chain.block_number()
        assert guard.mark(RESOURCE) == story.current and guard.follow_status().healthy


def test_control_a_follower_that_trusts_the_answer_passes_the_withheld_block(on_anvil, liar, tmp_path, monkeypatch):
    story = Takeover(on_anvil)
    the_follower_before_the_check(monkeypatch)
    with follow_guard(through(on_anvil, liar.url), tmp_path / "follow.sqlite") as guard:
        story.before(guard)
        story.take_over()
        withholding(liar, story.block)
        guard.sync()
        liar.honest()
        guard.sync()
        assert guard.check(RESOURCE, story.stale) == story.stale


def quorum(chain: Chain, *urls: str) -> QuorumHeaders:
    return QuorumHeaders(list(urls), clock=chain.now, max_age=60)


def test_a_follower_with_headers_checks_against_the_vouched_blooms(on_anvil, liar, honest_pair, tmp_path, monkeypatch):
    """The provider withholds bob's block's logs and serves its header with an empty bloom. A follower
    without headers believes the header: fooled (the control; its assumption is an honest header). A
    follower with a header source checks the bloom of a header linked to one the source vouches for:
    the forged one does not hash (ProofInvalid, served "header", naming the provider); with honest headers, the bloom
    shows the withheld logs (LogsIncomplete). Nothing is applied past the block either way."""
    h2, h3 = honest_pair
    story = Takeover(on_anvil)
    with (
        follow_guard(through(on_anvil, liar.url), tmp_path / "plain.sqlite") as fooled,
        follow_guard(
            through(on_anvil, liar.url),
            tmp_path / "proven.sqlite",
            headers=quorum(story.chain, liar.url, h2.url, h3.url),
        ) as guard,
    ):
        story.before(fooled)
        guard.sync()
        assert guard.mark(RESOURCE) == story.stale
        story.take_over()
        withholding(liar, story.block)
        forging_the_bloom(liar, story.block)
        fooled.sync()  # the control: no doubt in an empty bloom
        assert fooled.check(RESOURCE, story.stale) == story.stale
        with pytest.raises(ProofInvalid) as refused:
            guard.sync()
        assert (refused.value.served, refused.value.source, refused.value.block) == ("header", liar.url, story.block)
        assert follow_block(guard.path) < story.block and not guard.follow_status().healthy
        with pytest.raises(StaleToken):  # checks at the mark are proven meanwhile
            guard.check(RESOURCE, story.stale)
        liar.handlers.pop("eth_getBlockByNumber")  # honest headers, logs still withheld
        with pytest.raises(LogsIncomplete) as held:
            guard.sync()
        assert held.value.block == story.block
        liar.honest()
        guard.sync()
        assert guard.mark(RESOURCE) == story.current and guard.follow_status().healthy


def test_control_a_follower_with_headers_but_without_the_check_passes_the_withheld_block(
    on_anvil, liar, honest_pair, tmp_path, monkeypatch
):
    """Vouching for every log's block and proving every page do not see a log that was never answered."""
    h2, h3 = honest_pair
    story = Takeover(on_anvil)
    the_follower_before_the_check(monkeypatch)
    with follow_guard(
        through(on_anvil, liar.url), tmp_path / "proven.sqlite", headers=quorum(story.chain, liar.url, h2.url, h3.url)
    ) as guard:
        story.before(guard)
        story.take_over()
        withholding(liar, story.block)
        guard.sync()
        liar.honest()
        guard.sync()
        assert guard.follow_status().healthy
        assert guard.check(RESOURCE, story.stale) == story.stale


def test_the_async_guard_follows_the_same_way(on_anvil, liar, tmp_path):
    story = Takeover(on_anvil)

    async def scenario():
        async with await AsyncGuard.open(
            through(on_anvil, liar.url), tmp_path / "follow.sqlite", mode=Follow(interval=3_600)
        ) as guard:
            await guard.sync()
            story.stale = story.alice.acquire(RESOURCE, ttl=60).token
            await guard.sync()
            lagging(liar, behind=3)
            story.take_over()
            with pytest.raises(LogsIncomplete) as held:
                await guard.sync()
            assert held.value.block == story.block
            assert not guard.follow_status().healthy
            with pytest.raises(StaleToken):
                await guard.check(RESOURCE, story.stale)
            story.chain.mine(3)
            await guard.sync()
            assert guard.follow_status().healthy and await guard.mark(RESOURCE) == story.current

    asyncio.run(scenario())


# ---------------------------------------------------------------------------
# The other readers that keep a cursor: an election's observer, a waiter
# ---------------------------------------------------------------------------

SEAT = "billing/leader"


def term(leader) -> tuple[str, int] | None:
    return None if leader is None else (leader.holder, leader.token)


def observed_through(liar: LyingProxy, registry: Registry, on_sleep) -> list:
    """What ``observe(timeout=1)`` reports through ``liar`` (one virtual second of polls, on a WaitClock whose
    ``on_sleep(n)`` runs at the observer's n-th pause), starting with alice as the leader."""
    reader = through(registry, liar.url)
    WaitClock(on_sleep=on_sleep).install(reader)
    return [term(change) for change in Election(reader, SEAT, ttl=30).observe(timeout=1.0)]


class Handover:
    """alice leads; at the observer's first pause she resigns and bob is elected (two blocks), while the log
    backend lags three blocks; at its 8th pause three blocks are mined (the backend reaches both)."""

    def __init__(self, registry: Registry, liar: LyingProxy):
        self.chain = registry.chain
        self.liar = liar
        self.alice = Election(registry.connect(self.chain.accounts[1]), SEAT, ttl=30, clock=SteppedClock())
        self.bob = Election(registry.connect(self.chain.accounts[2]), SEAT, ttl=30, clock=SteppedClock())
        self.a = self.alice.campaign()

    def __call__(self, pause: int) -> None:
        if pause == 1:
            lagging(self.liar, behind=3)
            self.a.resign()
            self.b = self.bob.campaign()
        if pause == 8:
            self.chain.mine(3)


def test_an_observer_behind_a_lagging_log_backend_reports_the_handover_late_not_never(on_anvil, liar, caplog):
    story = Handover(on_anvil, liar)
    with caplog.at_level(logging.WARNING, logger="chainfence.recipes.election"):
        seen = observed_through(liar, on_anvil, story)
    alice, bob = story.alice.registry.sender, story.bob.registry.sender
    assert seen == [(alice, story.a.token), None, (bob, story.b.token)]
    assert f"election={SEAT}: waits at block" in caplog.text
    story.b.resign()


def test_control_an_observer_that_trusts_the_answer_reports_alice_leading_while_bob_leads(on_anvil, liar, monkeypatch):
    story = Handover(on_anvil, liar)
    the_follower_before_the_check(monkeypatch)
    seen = observed_through(liar, on_anvil, story)
    assert seen == [(story.alice.registry.sender, story.a.token)], "the resignation and bob's term never reported"
    assert Election(on_anvil, SEAT, ttl=30).leader().holder == story.bob.registry.sender
    story.b.resign()


def waiter_through(liar: LyingProxy, registry: Registry, on_sleep) -> tuple[Registry, WaitClock]:
    bob = Registry.at(Chain.connect(liar.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.01)), registry.address)
    bob = bob.connect(bob.chain.accounts[2])
    return bob, WaitClock(on_sleep=on_sleep).install(bob)


def test_a_waiter_behind_a_withholding_log_backend_reads_the_lease_again(on_anvil, liar):
    """alice releases at the waiter's first pause, in a block whose logs the backend withholds: the
    block's bloom shows a release of the resource the answer lacks, and the waiter reads the lease
    again: free, it acquires at once (its clock: a few polls, not the 3 s it would wait)."""
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=600)

    def release(pause):
        if pause == 1:
            withholding(liar, lease.registry.chain.block_number() + 1)
            lease.release()

    bob, clock = waiter_through(liar, on_anvil, release)
    got = bob.acquire(RESOURCE, ttl=60, wait=3)
    assert got.token == lease.token + 1 and clock.now() < 1.0


def test_control_a_waiter_that_trusts_the_answer_waits_out_its_wait(on_anvil, liar, monkeypatch):
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=600)

    def release(pause):
        if pause == 1:
            withholding(liar, lease.registry.chain.block_number() + 1)
            lease.release()

    the_follower_before_the_check(monkeypatch)
    bob, clock = waiter_through(liar, on_anvil, release)
    with pytest.raises(LeaseHeld):  # the resource was free from the first pause on
        bob.acquire(RESOURCE, ttl=60, wait=3)
    assert clock.now() >= 3


def test_an_asyncio_waiter_behind_a_withholding_log_backend_reads_the_lease_again(on_anvil, liar):
    """The same steps on the asyncio driver: the receipts that settle the block are asked of the AsyncRpc."""
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=600)

    def release(pause):
        if pause == 1:
            withholding(liar, lease.registry.chain.block_number() + 1)
            lease.release()

    async def scenario():
        chain = Chain.connect(liar.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.01))
        async with AsyncChain.over(chain) as achain:
            bob = (await AsyncRegistry.at(achain, on_anvil.address)).connect(chain.accounts[2])
            clock = WaitClock(on_sleep=release).install(bob.registry)
            got = await bob.acquire(RESOURCE, ttl=60, wait=3)
            assert got.token == lease.token + 1 and clock.now() < 1.0
        assert liar.count("eth_getBlockReceipts") >= 1, "the block in doubt was settled by its receipts"

    asyncio.run(scenario())


def test_an_observer_held_while_the_term_is_due_still_sleeps_between_polls(on_anvil, liar):
    """alice renews in a block whose logs the backend withholds, then the observer's clock reaches her old
    expiry: it may not judge the expiry past the held block (the renewal may be there), nor poll back to
    back waiting for it. Every poll sleeps; the lie is lifted after 60 answers, whatever happened."""
    chain = on_anvil.chain
    alice = Election(on_anvil.connect(chain.accounts[1]), SEAT, ttl=30, clock=SteppedClock())
    term_a = alice.campaign()
    answers = [0]

    def withheld(params, forward):
        answers[0] += 1
        if answers[0] > 60:
            liar.honest()
        return [log for log in forward(params) if int(log["blockNumber"], 16) != renewed_in[0]]

    renewed_in = [None]

    def script(pause):
        if pause == 1:
            renewed_in[0] = chain.block_number() + 1
            liar.on("eth_getLogs", withheld)
            term_a.lease.renew()
        if pause == 2:
            clock.now_ += 30  # the observer's clock reaches the expiry alice had before renewing

    reader = through(on_anvil, liar.url)
    clock = WaitClock(on_sleep=script).install(reader)
    seen = [term(change) for change in Election(reader, SEAT, ttl=30).observe(timeout=31.0)]
    assert seen == [(alice.registry.sender, term_a.token)], "no expiry reported: she renewed"
    # One eth_getLogs to find alice's election, one a poll, each after a sleep but the last look's.
    assert liar.count("eth_getLogs") <= len(clock.sleeps) + 2, "polls back to back"
    term_a.resign()
