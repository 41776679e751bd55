"""A waiter does not poll in a tight loop: what it asks the node, counted at a proxy, per pause and per block.

The waiter runs on a WaitClock; between two of its pauses the test either
does nothing (an idle poll), mines a block with nothing for the resource,
or changes the resource. The proxy's log, cut at each pause, shows what
each poll cost: one request for a poll that found no new block, two for a
new block without an event of the resource, and one read more when the
block carries one. So the requests are bounded per poll and per block, and
the pause asked between polls is the chain's poll interval, never less.
"""

from __future__ import annotations

import logging
import os
import threading
from types import SimpleNamespace

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence._sdk import names as _names
from chainfence._sdk import waiting as _waiting
from chainfence._sdk.waiting import Pace, pace
from tests.support.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.virtual_time import WaitClock

NAME = "jobs/wait-rpc"

#: What the waiter does at each pause n (1-based), done by the test straight at the node.
IDLE, BLOCK, OTHER, RENEW, RELEASE = "idle", "block", "other", "renew", "release"
SCRIPT = [IDLE] * 10 + [BLOCK] * 10 + [OTHER] * 5 + [RENEW] + [IDLE] * 5 + [RELEASE]


def test_requests_while_waiting_are_bounded_per_poll_and_per_block(on_anvil, anvil_node):
    admin = on_anvil.chain
    alice = on_anvil.connect(admin.accounts[1])
    carol = on_anvil.connect(admin.accounts[3])
    held = alice.acquire(NAME, ttl=3_000)
    with RpcProxy(anvil_node.url) as proxy:
        chain = Chain.connect(proxy.url, private_keys=[dev_keys(10)[2]], timeouts=Timeouts(receipt=30, poll=0.005))
        bob = Registry(chain, on_anvil.address, sender=chain.accounts[0])
        _ = bob.max_ttl
        cuts: list[int] = []

        def on_sleep(n):
            cuts.append(len(proxy.log))
            step = SCRIPT[n - 1]
            if step == BLOCK:
                admin.mine(1)
            elif step == OTHER:
                carol.acquire(f"jobs/other-{n}", ttl=60)
            elif step == RENEW:
                held.renew(3_000)
            elif step == RELEASE:
                held.release()

        clock = WaitClock(on_sleep=on_sleep).install(bob)
        started = len(proxy.log)
        lease = bob.acquire(NAME, ttl=60, wait=600)
        assert lease.token == held.token + 1 + 5  # carol's five tokens came in between
        assert len(clock.sleeps) == len(SCRIPT)
        assert all(seconds == pace(chain).poll == 0.05 for seconds in clock.sleeps), "a poll interval each"
        log = [method for method, _params, _fault in proxy.log]

    between = [log[a:b] for a, b in zip(cuts, cuts[1:])]  # what poll n (after pause n) asked, n = 1..
    for n, (step, asked) in enumerate(zip(SCRIPT, between), start=1):
        if step == IDLE:
            assert asked == ["eth_getBlockByNumber"], (n, asked)
        elif step in (BLOCK, OTHER):
            assert asked == ["eth_getBlockByNumber", "eth_getLogs"], (n, asked)
        elif step == RENEW:  # the resource's event: read the lease again (eth_call + pending block, batched)
            assert asked == ["eth_getBlockByNumber", "eth_getLogs", "eth_call+eth_getBlockByNumber"], (n, asked)
    before_waiting = log[started : cuts[0]]
    assert len(before_waiting) <= 6, before_waiting  # the refused preflight, the head, one read
    blocks = SCRIPT.count(BLOCK) + SCRIPT.count(OTHER) + SCRIPT.count(RENEW)
    assert cuts[-1] - cuts[0] <= len(SCRIPT) + 2 * blocks


@pytest.mark.parametrize(("block_time", "poll"), [(12.0, 6.0), (2.0, 1.0), (0.25, 0.25), (0.0, 0.25), (60.0, 6.0)])
def test_on_a_chain_that_is_not_a_dev_chain_the_poll_interval_is_half_a_block_within_bounds(block_time, poll):
    blocks = {100: {"number": 100, "timestamp": 10_000}, 68: {"number": 68, "timestamp": int(10_000 - 32 * block_time)}}

    def block(which):
        return blocks[100 if which == "latest" else which]

    fake = _Fake(block)
    assert pace(fake) == Pace(poll=poll, jitter=poll / 2)
    assert fake.asked == 2 and pace(fake) == Pace(poll=poll, jitter=poll / 2) and fake.asked == 2, "once per chain"


class _Fake:
    """A chain that is not a dev chain, with two blocks to estimate its block time from."""

    is_dev = False

    def __init__(self, block):
        self.asked = 0

        def counted(which):
            self.asked += 1
            return block(which)

        self.rpc = SimpleNamespace(embedded=False, block=counted)


def test_a_node_that_stops_while_a_waiter_waits_is_node_unreachable(on_anvil, anvil_node):
    """The waiter does not wait out its wait against a dead node, nor leak a transport exception."""
    from chainfence.errors import NodeUnreachable

    alice = on_anvil.connect(on_anvil.chain.accounts[1])
    alice.acquire(NAME, ttl=3_000)
    with RpcProxy(anvil_node.url) as proxy:
        chain = Chain.connect(proxy.url, private_keys=[dev_keys(10)[2]], timeouts=Timeouts(request=5))
        bob = Registry(chain, on_anvil.address, sender=chain.accounts[0])

        def on_sleep(n):
            if n == 3:
                proxy.down = True

        clock = WaitClock(on_sleep=on_sleep).install(bob)
        with pytest.raises(NodeUnreachable):
            bob.acquire(NAME, ttl=60, wait=600)
        assert len(clock.sleeps) == 3


def _reverted_acquisitions(chain, address: str, first: int) -> int:
    """Acquisitions sent to the registry from block ``first`` on that were mined and reverted (each paid gas)."""
    from chainfence._node import artifacts as _artifacts

    acquire = _artifacts.functions("FencingRegistry")["acquire"][0]
    reverted = 0
    for number in range(first, chain.block_number() + 1):
        for tx_hash in chain.rpc.block(number)["transactions"]:
            tx = chain.rpc.transaction(tx_hash)
            if tx["to"] and tx["to"].lower() == address.lower() and bytes(tx["input"][:4]) == acquire:
                reverted += chain.rpc.receipt(tx_hash)["status"] == 0
    return reverted


class _Said(logging.Handler):
    """Sets ``event`` when the waiting module logs a line starting with ``start``."""

    def __init__(self, start: str, event: threading.Event):
        super().__init__(logging.DEBUG)
        self.start, self.event = start, event

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.start):
            self.event.set()


def _race_of_two_processes(on_anvil, anvil_node) -> tuple[dict[str, object], int]:
    """Two waiters that share nothing in the SDK (a Chain each: as two processes) both see a release.
    Waiter A's preflight has run (the resource free) and its reply is held at a proxy, so its
    transaction is not yet sent, when waiter B sees the release too; A's reply is let go once B says it
    waits for the turn, or B has its lease. Each releases what it gets once A's transaction has reached
    the node. Returns each one's token (or
    error) and the acquisitions mined reverted. Sequenced by events, never by time."""
    name = f"jobs/turns-{os.getpid()}"  # a resource no other test worker's waiters share a turn with
    admin = on_anvil.chain
    alice = on_anvil.connect(admin.accounts[1])
    held = alice.acquire(name, ttl=3_000)
    a_waiting, b_waiting, released, b_may_look = (threading.Event() for _ in range(4))
    b_in_turn_or_done = threading.Event()
    results: dict[str, object] = {}
    logger = logging.getLogger("chainfence._sdk.waiting")
    said = _Said("waiting: another process's waiter is sending", b_in_turn_or_done)
    level = logger.level
    logger.addHandler(said)
    logger.setLevel(logging.DEBUG)

    finish = threading.Event()  # a winner holds its lease until A's transaction has reached the node

    def waiter(label, registry, on_sleep, done=None):
        WaitClock(on_sleep=on_sleep).install(registry)
        try:
            lease = registry.acquire(name, ttl=600, wait=600)
            results[label] = lease.token
            if done is not None:
                done.set()
            assert finish.wait(120)
            lease.release()
        except BaseException as error:
            results[label] = error
        finally:
            if done is not None:
                done.set()

    def a_sleeps(n):
        if n == 1:
            a_waiting.set()
            assert released.wait(120)

    def b_sleeps(n):
        if n == 1:
            b_waiting.set()
            assert b_may_look.wait(120)

    try:
        with RpcProxy(anvil_node.url) as proxy:
            a_chain = Chain.connect(proxy.url, private_keys=[dev_keys(10)[2]], timeouts=Timeouts(poll=0.005))
            b_chain = Chain.connect(anvil_node.url, private_keys=[dev_keys(10)[3]], timeouts=Timeouts(poll=0.005))
            a = Registry(a_chain, on_anvil.address, sender=a_chain.accounts[0])
            b = Registry(b_chain, on_anvil.address, sender=b_chain.accounts[0])
            threads = [
                threading.Thread(target=waiter, args=("a", a, a_sleeps)),
                threading.Thread(target=waiter, args=("b", b, b_sleeps, b_in_turn_or_done)),
            ]
            for thread in threads:
                thread.start()
            assert a_waiting.wait(120) and b_waiting.wait(120), "both wait, the lease known held"
            b_in_turn_or_done.clear()  # their first sends (refused) may have waited for each other's turn
            first = admin.block_number() + 1
            proxy.plan("eth_call+anvil_getAutomine+eth_getBalance", "hold_reply")  # A's next preflight
            held.release()
            released.set()
            proxy.wait_holding(1)  # A's preflight ran at the node (free) and A waits for its reply
            b_may_look.set()
            assert b_in_turn_or_done.wait(120), "B waits for A's turn (or, unfixed, has its lease)"
            proxy.let_go()
            proxy.wait_completed("eth_sendRawTransaction", 1)  # A's acquisition, mined (won, or reverted)
            finish.set()
            for thread in threads:
                thread.join(120)
                assert not thread.is_alive()
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)
    assert all(isinstance(token, int) for token in results.values()), results
    return results, _reverted_acquisitions(admin, on_anvil.address, first)


def test_waiters_of_two_processes_take_turns_and_the_loser_sends_nothing(on_anvil, anvil_node):
    """Issue 25, finding 21: B waits for A's turn (a lock file of this machine's) instead of passing its
    own preflight while A's transaction is on its way: A's acquisition is mined, B's preflight then sees
    A's lease and sends nothing; B gets the lease once A releases it. No acquisition is mined reverted
    (on main: 1, B having won the moment)."""
    results, reverted = _race_of_two_processes(on_anvil, anvil_node)
    assert reverted == 0, "no acquisition was mined reverted"
    assert results["a"] < results["b"], "A, whose preflight ran first, got the lease first"


def test_control_without_a_turn_across_processes_the_loser_pays_for_a_revert(on_anvil, anvil_node, monkeypatch):
    """Control: the same race with each waiter in its process's turn only (no turn file: what main did).
    B passes its preflight while A's transaction is on its way and wins; A's acquisition is mined and
    reverts (it paid gas), then A waits again and gets the lease after B."""
    monkeypatch.setattr(_waiting, "_turns_directory", lambda: None)
    results, reverted = _race_of_two_processes(on_anvil, anvil_node)
    assert reverted == 1, "A's acquisition was mined reverted"
    assert results["b"] < results["a"]


@pytest.fixture
def automine_off(anvil_chain):
    """The session's anvil mines only when told (``admin.mine()``); automine again afterwards."""
    yield lambda on: anvil_chain._rpc("evm_setAutomine", [on])
    anvil_chain._rpc("evm_setAutomine", [True])
    anvil_chain._rpc("evm_mine", [])


def _sends_while_a_release_is_pending(on_anvil, anvil_node, automine) -> int:
    """A block-time chain (anvil mining only when told): A wins a handover while B waits for A's turn;
    A's receipt comes with the next block, then A releases (its release pending: not yet in a block)
    while B's first request in the turn is held at B's proxy. Let go, B either reads the lease as mined
    (A's, live) and goes back to waiting, or preflights at the pending block, where A's release counts
    as done, and sends an acquisition that only the block's order can tell from a revert. Returns the
    acquisitions B sent while A's release was pending. Sequenced by the proxies and the log."""
    from tests.support.sequencer import wait_until

    name = f"jobs/pending-{os.getpid()}"
    admin = on_anvil.chain
    alice = on_anvil.connect(admin.accounts[1])
    held = alice.acquire(name, ttl=3_000)
    a_waiting, b_waiting, released, b_may_look, finish = (threading.Event() for _ in range(5))
    b_in_turn, b_lost = threading.Event(), threading.Event()
    results: dict[str, object] = {}
    logger = logging.getLogger("chainfence._sdk.waiting")
    handlers = [
        _Said("waiting: another process's waiter is sending", b_in_turn),
        _Said("waiting: another acquisition came first", b_lost),
    ]
    level = logger.level
    for handler in handlers:
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)

    def waiter(label, registry, on_sleep):
        WaitClock(on_sleep=on_sleep).install(registry)
        try:
            lease = registry.acquire(name, ttl=600, wait=600)
            results[label] = lease.token
            assert finish.wait(120)
            lease.release()
        except BaseException as error:
            results[label] = error

    def a_sleeps(n):
        if n == 1:
            a_waiting.set()
            assert released.wait(120)

    def b_sleeps(n):
        if n == 1:
            b_waiting.set()
            assert b_may_look.wait(120)

    try:
        with RpcProxy(anvil_node.url) as pa, RpcProxy(anvil_node.url) as pb:
            a_chain = Chain.connect(pa.url, private_keys=[dev_keys(10)[2]], timeouts=Timeouts(poll=0.005))
            b_chain = Chain.connect(pb.url, private_keys=[dev_keys(10)[3]], timeouts=Timeouts(poll=0.005))
            a = Registry(a_chain, on_anvil.address, sender=a_chain.accounts[0])
            b = Registry(b_chain, on_anvil.address, sender=b_chain.accounts[0])
            threads = [
                threading.Thread(target=waiter, args=("a", a, a_sleeps)),
                threading.Thread(target=waiter, args=("b", b, b_sleeps)),
            ]
            for thread in threads:
                thread.start()
            assert a_waiting.wait(120) and b_waiting.wait(120), "both wait, the lease known held"
            b_in_turn.clear()  # their first sends (refused) may have waited for each other's turn
            held.release()  # mined at once; from here on, a block only when the test mines one
            automine(False)
            pa.plan("eth_call+anvil_getAutomine+eth_getBalance", "hold_reply")  # A's preflight
            released.set()
            pa.wait_holding(1)  # A is in the turn, its preflight answered (free), its transaction unsent
            b_may_look.set()
            assert b_in_turn.wait(120), "B waits for A's turn"
            pb.stall()  # B's first request once it has the turn
            pa.let_go()
            pa.wait_completed("eth_sendRawTransaction", 1)  # A's acquisition, in the pool
            admin.mine(1)  # A's receipt: A leaves the turn, B takes it and asks (held)
            pb.wait_held(1)
            finish.set()  # A releases: pending, not mined
            pa.wait_completed("eth_sendRawTransaction", 2)
            pb.resume()
            wait_until(
                lambda: b_lost.is_set() or pb.completed_count("eth_sendRawTransaction") > 0,
                "B went back to waiting, or sent",
            )
            sent = pb.completed_count("eth_sendRawTransaction")
            automine(True)
            admin.mine(1)  # A's release (and what B sent) in a block
            for thread in threads:
                thread.join(120)
                assert not thread.is_alive()
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
        logger.setLevel(level)
    assert all(isinstance(token, int) for token in results.values()), results
    return sent


def test_a_waiter_that_waited_for_the_turn_reads_the_lease_as_mined_before_sending(on_anvil, anvil_node, automine_off):
    """Issue 25, finding 21, with a block time: the waiter that waited for another process's turn sends
    nothing while the winner's release is only pending (seen on anvil --block-time 1: its acquisition
    was ordered before the release in one block, and reverted)."""
    assert _sends_while_a_release_is_pending(on_anvil, anvil_node, automine_off) == 0


def test_control_a_waiter_that_preflights_at_once_sends_beside_a_pending_release(
    on_anvil, anvil_node, automine_off, monkeypatch
):
    """Control: with the read after the wait left out, B's preflight at the pending block counts A's
    pending release as done, and B sends an acquisition whose fate only the block's order decides."""
    monkeypatch.setattr(_waiting, "_still_free_steps", lambda read, free: iter(()))
    assert _sends_while_a_release_is_pending(on_anvil, anvil_node, automine_off) == 1


def _held_turn(path: str) -> int:
    """Another process's waiter in the turn at ``path``, stopped there (its flock held, never given back):
    a descriptor of this process's own, which ``flock`` counts apart from the waiter's."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize("patience", [5, None], ids=["bounded", "control-unbounded"])
def test_a_turn_held_by_a_stopped_process_is_waited_for_only_so_long(tmp_path, monkeypatch, patience):
    """A waiter whose turn another process holds and never gives back (stopped by SIGSTOP or a debugger
    in its send) waits ``patience`` polls, then goes on without the turn (a revert at worst: the turn
    only saves a loser its revert). The steps are driven by hand, poll by poll. Control: a turn waited
    for unboundedly (what the turn did first) is still asked for after 1,000 polls, past any ``wait``."""
    monkeypatch.setattr(_waiting, "_TURNS_DIRECTORY", str(tmp_path))
    path = _waiting.turn_path("31337:waiting-turn:0xabc:00")
    assert path is not None and path.startswith(str(tmp_path))
    held = _held_turn(path)
    try:
        steps = _waiting._take_turn_steps(path, 0.01, patience)
        polls = 0
        try:
            effect = next(steps)
            while polls < 1_000:
                assert isinstance(effect, _waiting.Sleep)
                polls += 1
                effect = steps.send(None)
        except StopIteration as done:
            assert patience is not None, "an unbounded turn never gives up"
            assert done.value == (None, True) and polls == patience
            return
        assert patience is None, f"still waiting for the turn after {polls} polls"
        steps.close()
    finally:
        os.close(held)


def test_a_waiter_goes_on_past_a_turn_held_for_good_and_gets_the_free_resource(on_anvil, tmp_path, monkeypatch):
    """On anvil, through the registry: the resource is free, but another process's waiter stopped while it
    held the resource's turn. The waiter reads the lease as mined once the turn's patience is spent, then
    acquires it: its ``wait`` is never spent on a turn nobody gives back."""
    monkeypatch.setattr(_waiting, "_TURNS_DIRECTORY", str(tmp_path))
    chain = on_anvil.chain
    name = f"jobs/turn-held-{os.getpid()}"
    key = f"{chain.chain_id}:{_waiting.turn_key(on_anvil.address, _names.resource_id(name))}"
    path = _waiting.turn_path(key)
    assert path is not None
    held = _held_turn(path)
    try:
        lease = on_anvil.connect(chain.accounts[1]).acquire(name, ttl=60, wait=600)
        assert lease.holder == chain.accounts[1] and on_anvil.last_lease(name).token == lease.token
        lease.release()
    finally:
        os.close(held)
