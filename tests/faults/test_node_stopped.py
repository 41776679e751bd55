"""A node that does not answer: every public call that can touch the chain raises a chainfence error.

The README's promise: users never see a raw web3, eth-tester or requests
exception, and a node that does not answer is
:class:`~chainfence.errors.NodeUnreachable`. Each public call of the SDK is
one row of :data:`CALLS`, run against a node stopped in two ways:

``proxy``  the suite's JSON-RPC proxy with ``down = True``: the node runs, every
           request is read and dropped (the connection closes, no reply);
``anvil``  a real anvil process stopped: connection refused.

A third way, ``hung`` (a listener on the stopped node's port that accepts and
never answers: a black hole), costs the request timeout per request; it runs
only when ``CHAINFENCE_STOPPED_MODES`` names it (``proxy,anvil,hung``), to
measure how long each call takes to give up.

Everything a call needs (a registry, a lease, guards with marks, a signed
request, a deployment file) is made while the node still answers; then the
node goes down and the rows run. Rows in :data:`QUIET` are the calls that
answer without the chain (by design, each says why); they run with the node
down too, and through the proxy they must send nothing.

Adding a public call: one line in CALLS (or QUIET).
tests/unit/test_public_calls_table.py fails when a public method of Chain,
Registry, Lease, Guard, FencedStore, Rpc, Election, Leadership or Watch has no row.

Beyond the table: the retry rule seen at the proxy (a read is tried twice,
a send once); an acquisition meeting the stopped node after its send, in
each of the three places it can (OutcomeUnknown, NotConfirmed, the chain
error carrying the lease); the ASGI middleware's 503; the CLI's exit 5.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from chainfence import Chain, Election, FencedRequest, FencedStore, Guard, LeaseSet, Registry, Timeouts, audit
from chainfence._node.rpc import AsyncRpc, Rpc, connect_http
from chainfence._sdk.validate import resource_id
from chainfence.aio import (
    AsyncChain,
    AsyncElection,
    AsyncGuard,
    AsyncLeadership,
    AsyncLease,
    AsyncLeaseSet,
    AsyncRegistry,
)
from chainfence.audit import watchdog
from chainfence.audit.index import AuditIndex
from chainfence.deployment import Deployment, save
from chainfence.errors import (
    ChainfenceError,
    LeaseLost,
    LeaseSetLost,
    NodeUnreachable,
    NotConfirmed,
    NotSupported,
    OutcomeUnknown,
)
from chainfence.fenced_requests import http_action
from chainfence.guard import Follow, RequestPolicy
from chainfence.guard.admission import Admission
from chainfence.integrations.asgi import FencingMiddleware
from chainfence.integrations.sql import fenced_transaction
from chainfence.outcomes import reconcile
from chainfence.recipes.election import Watch
from tests.support.anvil import Anvil, dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import async_wait_until, wait_until
from tests.support.virtual_time import SteppedClock

RESOURCE = "jobs/held"  # acquired (and marked by every guard) while the node answered
FREE = "jobs/free"  # never held
LEADER = "jobs/leader"  # an election won (through the client chain) while the node answered
AUDIENCE = "reports-service"
ACTION = http_action("POST", "/reports", b"")
PAYLOAD = b"report"

#: The path of the proxy's URL, standing for a hosted provider's API key (never shown to HTTP clients).
SECRET_PATH = "/v3/api-key-0123456789abcdef"

#: Seconds a client here waits for one JSON-RPC reply. Only a black hole ever waits for it.
TIMEOUT = 1.0

MODES = [m.strip() for m in os.environ.get("CHAINFENCE_STOPPED_MODES", "proxy,anvil").split(",") if m.strip()]

#: Modules whose exceptions must never reach a caller.
FOREIGN = ("requests", "urllib3", "web3", "eth_tester", "eth_utils", "eth_abi", "eth_account", "http", "socket")


# ---------------------------------------------------------------------------
# The world the calls run in
# ---------------------------------------------------------------------------


class World:
    """A registry, a lease, a store, guards and a client chain, made while the node answered."""

    def __init__(self, mode: str, url: str, admin_url: str, directory: Path):
        self.mode = mode
        self.url = url
        self.directory = directory
        keys = dev_keys(4)
        self.keys = keys
        admin = Chain.connect(admin_url, private_keys=keys, timeouts=Timeouts(receipt=10, poll=0.01))
        registry = Registry.deploy(admin, max_ttl=3_600)
        self.address = registry.address
        holder = registry.connect(admin.accounts[1])
        self._lease = holder.acquire(RESOURCE, ttl=3_000)
        self.token = self._lease.token
        self.tx_hash = self._lease.tx_hash
        self.store_address = FencedStore.deploy(registry).address
        FencedStore(registry, self.store_address).write(self._lease, b"v1")
        self.deployment = save(Deployment.of(registry, rpc_url=url), directory / "deployment.json")

        self.chain = Chain.connect(
            url, private_keys=keys, timeouts=Timeouts(request=TIMEOUT, receipt=5, unreachable=0.3, poll=0.01)
        )
        self.accounts = self.chain.accounts
        self._cached = Registry.at(self.chain, self.address, sender=self.accounts[1])
        _ = self._cached.max_ttl, self._cached.identity()
        self.domain = self._cached.eip712_domain()
        # A term won while the node answered; its keep-alive's clock stands still (it never renews).
        # Account 3: no other row sends as it (a nonce this chain already knows changes what a send meets).
        self.election = Election(self._cached.connect(self.accounts[3]), LEADER, ttl=3_000, clock=SteppedClock())
        self.leadership = self.election.campaign()
        self.snapshot = self.chain.snapshot()
        self.next_time = self.chain.latest_time() + 1_000
        self.head = self.chain.block_number()
        self.audit_path = directory / "audit.sqlite"  # an audit index synced while the node answered
        with AuditIndex(self.audit_path) as index:
            index.sync(self._cached)

        self.guards: dict[str, Guard] = {}
        for name, mode_, cache_domain in (
            ("mark", "mark", True),
            ("strict", "strict", True),
            ("follow", "follow", True),
            ("follow-sync", "follow", True),
            ("follow-behind", "follow", True),
            ("domain-unread", "mark", False),
            ("exclusive", "mark", True),
        ):
            registry_ = self._cached
            if not cache_domain:  # a registry object that read its identity, not its EIP-712 domain
                registry_ = Registry(self.chain, self.address, sender=self.accounts[1])
                registry_.identity()
            guard = Guard(
                registry_,
                directory / f"{name}.sqlite",
                mode=Follow(interval=3_600) if mode_ == "follow" else mode_,
                requests=RequestPolicy(audience=AUDIENCE),
                exclusive=name == "exclusive",
            )
            guard.check(RESOURCE, self.token)  # the mark: this lease's token
            if cache_domain:
                guard.domain()
            self.guards[name] = guard
        # Admission: a guard whose on-chain answer for the holder was cached by a check, one opened on the
        # same marks that has asked nothing yet, and a local list.
        for name, admission, checked in (
            ("admission-cached", Admission.on_chain(), True),
            ("admission-unasked", Admission.on_chain(), False),
            ("admission-local", Admission.local([self.accounts[1]]), True),
        ):
            store = "admission-local.sqlite" if name == "admission-local" else "admission.sqlite"
            guard = Guard(
                self._cached, directory / store, admission=admission, requests=RequestPolicy(audience=AUDIENCE)
            )
            if checked:
                guard.check(RESOURCE, self.token)
            self.guards[name] = guard

    # -- fresh objects per call: nothing one row does reaches the next ----------

    def registry(self) -> Registry:
        """A registry object that has read nothing yet (max_ttl, identity, domain uncached)."""
        return Registry(self.chain, self.address, sender=self.accounts[1])

    def cached(self) -> Registry:
        """A registry object whose max_ttl, identity and EIP-712 domain were read while the node answered."""
        return self._cached.connect(self.accounts[1])

    def lease(self, *, cached: bool = True):
        lease = copy.copy(self._lease)
        lease.registry = self.cached() if cached else self.registry()
        return lease

    def signed(self, token: int) -> FencedRequest:
        """A request signed by the holder, locally (the domain was read while the node answered)."""
        return FencedRequest.sign(
            self.domain,
            resource=RESOURCE,
            token=token,
            holder=self.accounts[1],
            action=ACTION,
            audience=AUDIENCE,
            payload=PAYLOAD,
            key=self.keys[1],
            valid_for=3_000,
        )

    def new_guard(self, mode: str, *, cached: bool = True, store: str | None = None) -> Guard:
        path = self.directory / (store or f"new-{os.urandom(4).hex()}.sqlite")
        follow = Follow(interval=3_600) if mode == "follow" else mode
        return Guard(self.cached() if cached else self.registry(), path, mode=follow)

    def close(self) -> None:
        self.leadership._stop_keeping()
        for guard in self.guards.values():
            guard.close()


@contextmanager
def silent_listener(port: int):
    """A TCP listener on ``port`` that completes handshakes and never answers: a hung node."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(512)  # never accepted: the kernel queues the connections, nobody reads them
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


@pytest.fixture(scope="module", params=MODES)
def world(request, tmp_path_factory):
    """A world whose node is down (module-scoped: the rows only read it)."""
    mode = request.param
    directory = tmp_path_factory.mktemp(f"stopped-{mode}")
    node = Anvil().start()
    try:
        if mode == "proxy":
            with RpcProxy(node.url) as proxy:
                # A hosted provider's URL carries its API key in the path: the proxy takes any path.
                built = World(mode, proxy.url + SECRET_PATH, node.url, directory)
                built.proxy = proxy
                proxy.down = True
                yield built
                built.close()
        else:
            built = World(mode, node.url, node.url, directory)
            node.stop()
            if mode == "hung":
                with silent_listener(node.port):
                    yield built
            else:
                yield built
            built.close()
    finally:
        node.stop()


# ---------------------------------------------------------------------------
# Helpers for rows that need more than one expression
# ---------------------------------------------------------------------------


def enter_lease(w: World, **options: Any) -> None:
    """``with registry.acquire(...)``: the body must not run when the acquisition fails."""
    ran = []
    try:
        with w.cached().acquire(FREE, ttl=60, **options):
            ran.append(True)
    finally:
        assert ran == [], "the body ran without a lease"


def exit_lease(w: World) -> None:
    """Leaving ``with lease:`` releases it: a release that fails after a clean body is raised."""
    with w.lease():
        pass


def keep_until_lost(w: World) -> None:
    """``with lease.keep():`` while the node is down: each renewal fails and is retried until the safe
    deadline; then the lease is lost and leaving the block raises LeaseLost, caused by NodeUnreachable."""
    lease = w.lease()
    clock = SteppedClock()
    try:
        with lease.keep(clock=clock, since=0.0):
            clock.now = lease.ttl / 2  # the first renewal is due
            wait_until(lambda: lease.keeper.core.failures >= 1, "a renewal failed")
            clock.now = float(lease.ttl)
            wait_until(lambda: lease.keeper.core.lost, "the lease was given up")
    except LeaseLost as lost:
        assert lost.why == "deadline" and isinstance(lost.__cause__, NodeUnreachable), lost.__cause__
        assert "the node is unreachable: " in str(lost), str(lost)  # the loss says the node went, not just when
        raise


def set_keep_until_lost(w: World) -> None:
    """``with lease_set.keep():`` while the node is down: each renewMany fails and is retried until the
    shared safe deadline; then the set is lost (LeaseSetLost, caused by NodeUnreachable)."""
    leases = LeaseSet([w.lease()])
    clock = SteppedClock()
    try:
        with leases.keep(clock=clock, since=0.0):
            clock.now = leases[0].ttl / 2
            wait_until(lambda: leases.keeper.core.failures >= 1, "a renewal failed")
            clock.now = float(leases[0].ttl)
            wait_until(lambda: leases.keeper.core.lost, "the set was given up")
    except LeaseSetLost as lost:
        assert lost.why == "deadline" and isinstance(lost.__cause__, NodeUnreachable), lost.__cause__
        raise


def watch_until_it_fails(w: World) -> None:
    """``Election.watch``: the watch's thread meets the stopped node and ends; ``stop()`` raises its error."""
    watch = Election(w.registry(), RESOURCE, ttl=60).watch(lambda leader: None)
    wait_until(lambda: not watch.running, "the watch ended")
    watch.stop()


def leave_leadership(w: World) -> None:
    """Leaving ``with leadership:`` resigns: a resignation that fails after a clean body is raised."""
    with w.leadership:
        pass


def check_behind(w: World) -> int:
    """A follow guard whose follower just failed: checks at the mark go on-chain."""
    guard = w.guards["follow-behind"]
    with pytest.raises(NodeUnreachable):
        guard.sync()
    assert not guard.follow_status().healthy
    return guard.check(RESOURCE, w.token)


def follow_guard_starts_behind(w: World) -> None:
    """A follow guard opened while the node is down starts, with its follower behind (by design)."""
    guard = w.new_guard("follow")
    try:
        status = guard.follow_status()
        assert not status.healthy and status.last_error.startswith("NodeUnreachable"), status
    finally:
        guard.close()


def open_guard(w: World, mode: str, **options: Any) -> None:
    w.new_guard(mode, **options).close()


def fenced_sql(w: World, verify: Callable[[str, int], Any] | None = None) -> None:
    """A fenced SQL transaction with a token above the mark: nothing is written."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE reports (body TEXT)")
    conn.commit()
    try:
        with fenced_transaction(conn, w.registry(), RESOURCE, w.token, verify=verify) as cursor:
            cursor.execute("INSERT INTO reports VALUES ('late')")
    finally:
        assert conn.execute("SELECT count(*) FROM reports").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM chainfence_marks WHERE token > 0").fetchone() == (0,)
        conn.close()


def acquire_data(w: World) -> bytes:
    return w.cached()._encode("acquire", [FREE, 60])


def refuses_dev_control(w: World) -> None:
    with pytest.raises(NotSupported):
        w.chain.rpc.tester("mine_blocks", 1)


def refuses_async_dev_control(w: World) -> None:
    with pytest.raises(NotSupported):
        async_rpc("tester", "mine_blocks", 1)(w)


def enter_batched_lease(w: World) -> None:
    with w.cached().batched().lease(FREE, ttl=60):
        raise AssertionError("the body ran without a lease")


async def async_enter_batched_lease(w: World, chain: AsyncChain, registry: AsyncRegistry) -> None:
    async with registry.batched().lease(FREE, ttl=60):
        raise AssertionError("the body ran without a lease")


def batched(lease: Any, w: World) -> Any:
    """``lease`` as the batcher hands it out: its renewals and release go through the batcher."""
    lease._via = w.cached().batched()
    return lease


def aio(body: Callable[..., Any]) -> Callable[[World], Any]:
    """A row for chainfence.aio: ``body(w, chain, registry)`` awaited in a fresh event loop, over an
    asyncio view of the world's client chain and its cached registry."""

    def run(w: World) -> Any:
        async def main() -> Any:
            async with AsyncChain.over(w.chain, request_timeout=TIMEOUT) as chain:
                return await body(w, chain, AsyncRegistry(chain, w.cached()))

        return asyncio.run(main())

    return run


def async_rpc(method: str, *args: Any) -> Callable[[World], Any]:
    """A row for one AsyncRpc method over a fresh asyncio layer to the world's node."""

    def run(w: World) -> Any:
        async def main() -> Any:
            rpc = AsyncRpc.twin_of(w.chain.rpc, timeout=TIMEOUT)
            try:
                return await getattr(rpc, method)(*(a(w) if callable(a) else a for a in args))
            finally:
                await rpc.close()

        return asyncio.run(main())

    return run


async def async_enter_lease(w: World, chain: AsyncChain, registry: AsyncRegistry) -> None:
    ran = []
    try:
        async with await registry.acquire(FREE, ttl=60):
            ran.append(True)
    finally:
        assert ran == [], "the body ran without a lease"


async def async_exit_lease(w: World, chain: AsyncChain, registry: AsyncRegistry) -> None:
    async with AsyncLease(registry, w.lease()):
        pass


async def async_open_guard(w: World, registry: AsyncRegistry, mode: str = "mark") -> None:
    """``AsyncGuard.open`` on a fresh store, then closed (``async with``)."""
    async with await AsyncGuard.open(registry, w.directory / f"new-{os.urandom(4).hex()}.sqlite", mode=mode):
        pass


#: The settings an AsyncGuard reads off its guard.
GUARD_SETTINGS = (
    "registry",
    "mode",
    "path",
    "confirmations",
    "exclusive",
    "follow_interval",
    "max_lag",
    "audience",
    "max_request_age",
    "erc1271_gas",
    "admission",
    "headers",
    "proof_provider",
    "completeness",
    "rejection_log",
)


async def async_keep_until_lost(w: World, chain: AsyncChain, registry: AsyncRegistry) -> None:
    """``async with lease.keep():`` while the node is down: renewals fail until the safe deadline,
    then the body's task is cancelled and leaving the block raises LeaseLost caused by NodeUnreachable."""
    lease = AsyncLease(registry, w.lease())
    clock = SteppedClock()
    try:
        async with lease.keep(clock=clock, since=0.0):
            clock.now = lease.ttl / 2
            await async_wait_until(lambda: lease.keeper.core.failures >= 1, "a renewal failed")
            clock.now = float(lease.ttl)
            await asyncio.Event().wait()  # cancelled at the deadline
    except LeaseLost as lost:
        assert lost.why == "deadline" and isinstance(lost.__cause__, NodeUnreachable), lost.__cause__
        raise


async def async_set_keep_until_lost(w: World, chain: AsyncChain, registry: AsyncRegistry) -> None:
    leases = AsyncLeaseSet(registry, LeaseSet([w.lease()]))
    clock = SteppedClock()
    try:
        async with leases.keep(clock=clock, since=0.0):
            clock.now = leases[0].ttl / 2
            await async_wait_until(lambda: leases.keeper.core.failures >= 1, "a renewal failed")
            clock.now = float(leases[0].ttl)
            await asyncio.Event().wait()  # cancelled at the deadline
    except LeaseSetLost as lost:
        assert lost.why == "deadline" and isinstance(lost.__cause__, NodeUnreachable), lost.__cause__
        raise


async def async_exit_set(w: World, chain: AsyncChain, registry: AsyncRegistry) -> None:
    async with AsyncLeaseSet(registry, LeaseSet([w.lease()])):
        pass


def async_won(w: World, chain: AsyncChain) -> AsyncElection:
    """The world's election (won while the node answered), seen through asyncio."""
    return AsyncElection._from_core(w.election, chain)


async def async_watch_until_it_fails(w: World, chain: AsyncChain, registry: AsyncRegistry) -> None:
    """``AsyncElection.watch``: the watch's task meets the stopped node and ends; ``stop()`` raises its error."""
    watch = AsyncElection(AsyncRegistry(chain, w.registry()), RESOURCE, ttl=60).watch(lambda leader: None)
    await async_wait_until(lambda: not watch.running, "the watch ended")
    await watch.stop()


async def async_leave_leadership(w: World, chain: AsyncChain, registry: AsyncRegistry) -> None:
    """Leaving ``async with leadership:`` resigns: a resignation that fails after a clean body is raised."""
    async with AsyncLeadership(async_won(w, chain), w.leadership):
        pass


async def async_unstarted_watch(w: World, chain: AsyncChain, registry: AsyncRegistry, what: str) -> Any:
    watch = AsyncElection(AsyncRegistry(chain, w.registry()), FREE, ttl=60).watch(print)
    watch._task.cancel()  # never runs: nothing is asked of the node
    await asyncio.gather(watch._task, return_exceptions=True)
    return watch.running if what == "running" else await watch.stop()


def fresh_rpc(w: World) -> Rpc:
    """The layer over a provider that has asked nothing yet (nothing in web3's request cache)."""
    return Rpc(connect_http(w.url, timeout=TIMEOUT), embedded=False)


def block_hashes(w: World) -> list[str]:
    """Two block hashes: block_receipts asks them in one batch (one alone is not worth one)."""
    return ["0x" + "11" * 32, "0x" + "22" * 32]


def signed_cancel(w: World) -> bytes:
    key = Account.from_key(w.keys[0])
    tx = {"to": key.address, "value": 0, "gas": 21_000, "nonce": 10**6, "chainId": w.chain.chain_id, "gasPrice": 10**9}
    return bytes(key.sign_transaction(tx).raw_transaction)


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A public call that must fail with ``raises`` (exactly that class) while the node is down."""

    name: str  # "Owner.method" or "Owner.method[variant]"; "Owner[variant]" for construction
    run: Callable[[World], Any]
    raises: type[ChainfenceError] = NodeUnreachable

    @property
    def method(self) -> str:
        return self.name.split("[")[0]


@dataclass(frozen=True)
class Quiet:
    """A public call that answers without the chain (``why``), so it works while the node is down.

    ``asks``: it does try the chain and carries on by design (through the proxy it sends something).
    """

    name: str
    run: Callable[[World], Any]
    why: str
    asks: bool = field(default=False)

    @property
    def method(self) -> str:
        return self.name.split("[")[0]


CALLS: list[Call] = [
    # -- Chain ---------------------------------------------------------------
    Call("Chain.connect", lambda w: Chain.connect(w.url, timeouts=Timeouts(request=TIMEOUT))),
    Call("Chain.now", lambda w: w.chain.now()),
    Call("Chain.latest_time", lambda w: w.chain.latest_time()),
    Call("Chain.call_now", lambda w: w.chain.call_now(w.address, bytes.fromhex("bc1c8b9b"))),
    Call("Chain.block_number", lambda w: w.chain.block_number()),
    Call("Chain.confirmed_block", lambda w: w.chain.confirmed_block()),
    Call("Chain.confirmed_block[confirmations=2]", lambda w: w.chain.confirmed_block(2)),
    Call("Chain.advance_time", lambda w: w.chain.advance_time(5)),
    Call("Chain.mine", lambda w: w.chain.mine()),
    Call("Chain.snapshot", lambda w: w.chain.snapshot()),
    Call("Chain.revert", lambda w: w.chain.revert(w.snapshot)),
    Call("Chain.set_next_block_time", lambda w: w.chain.set_next_block_time(w.next_time)),
    Call("Chain.call", lambda w: w.chain.call(w.address, w.cached()._encode("latestToken", []))),
    Call("Chain.transact", lambda w: w.chain.transact(w.accounts[1], w.address, acquire_data(w))),
    Call(
        "Chain.transact[gas=, no preflight]",
        lambda w: w.chain.transact(w.accounts[1], w.address, acquire_data(w), gas=200_000),
    ),
    # -- Registry ------------------------------------------------------------
    Call("Registry.deploy", lambda w: Registry.deploy(w.chain)),
    Call("Registry.at", lambda w: Registry.at(w.chain, w.address)),
    Call("Registry.from_deployment", lambda w: Registry.from_deployment(w.chain, w.deployment)),
    Call("Registry.acquire[down before the send]", lambda w: w.cached().acquire(FREE, ttl=60)),
    Call("Registry.acquire[max_ttl uncached]", lambda w: w.registry().acquire(FREE, ttl=60)),
    Call("Registry.acquire[wait, free]", lambda w: w.cached().acquire(FREE, ttl=60, wait=5)),
    Call("Registry.acquire[wait, held]", lambda w: w.cached().connect(w.accounts[2]).acquire(RESOURCE, ttl=60, wait=5)),
    Call("Registry.renew", lambda w: w.cached().renew(RESOURCE, w.token, 60)),
    Call("Registry.renew[progress]", lambda w: w.cached().renew(RESOURCE, w.token, 60, progress=b"step 2")),
    Call("Registry.release", lambda w: w.cached().release(RESOURCE, w.token)),
    Call("watchdog.stuck[fresh registry]", lambda w: watchdog.stuck(w.registry(), longer_than=1)),
    Call("Workset.claim", lambda w: w.cached().workset("batch").claim(["a", "b"], 60)),
    Call("Workset.claim[max_ttl uncached]", lambda w: w.registry().workset("batch").claim(["a"], 60)),
    Call("Workset.last_lease", lambda w: w.registry().workset("batch").last_lease("a")),
    Call("Workset.complete", lambda w: w.cached().workset("batch").complete("a", w.token, b"done")),
    Call("Workset.renew", lambda w: w.cached().workset("batch").renew("a", w.token, 30)),
    Call("Workset.release", lambda w: w.cached().workset("batch").release("a", w.token)),
    Call("watchdog.stuck[identity cached]", lambda w: watchdog.stuck(w.cached())),
    Call("Registry.complete", lambda w: w.cached().complete(RESOURCE, w.token, b"done")),
    Call("Registry.acquire[with block]", enter_lease),
    Call("Registry.acquire[with block, wait]", lambda w: enter_lease(w, wait=5)),
    Call("Registry.lease_of", lambda w: w.registry().lease_of(RESOURCE)),
    Call("Registry.last_lease", lambda w: w.registry().last_lease(RESOURCE)),
    Call("Registry.last_lease[resource_id]", lambda w: w.registry().last_lease(resource_id=resource_id(RESOURCE))),
    Call("Registry.last_lease[block=]", lambda w: w.registry().last_lease(RESOURCE, block=w.head)),
    Call("Registry.check_current", lambda w: w.registry().check_current(RESOURCE, w.token)),
    Call(
        "Registry.check_current[confirmations=2]",
        lambda w: w.registry().check_current(RESOURCE, w.token, confirmations=2),
    ),
    Call("Registry.latest_token", lambda w: w.registry().latest_token()),
    Call("Registry.latest_token[block=latest]", lambda w: w.registry().latest_token(block="latest")),
    Call("Registry.max_ttl", lambda w: w.registry().max_ttl),
    Call("Registry.eip712_domain", lambda w: w.registry().eip712_domain()),
    Call("Registry.identity", lambda w: w.registry().identity()),
    Call("Registry.deployment_block", lambda w: w.registry().deployment_block()),
    Call("audit.history[fresh registry]", lambda w: audit.history(w.registry())),
    Call("audit.history[identity cached]", lambda w: audit.history(w.cached())),
    Call("audit.history[resource]", lambda w: audit.history(w.cached(), RESOURCE)),
    Call("audit.history[holder]", lambda w: audit.history(w.cached(), holder=w.accounts[1])),
    Call("audit.history[token]", lambda w: audit.history(w.cached(), token=w.token)),
    Call("audit.history[from_block, to_block]", lambda w: audit.history(w.cached(), from_block=0, to_block=w.head)),
    Call(
        "audit.history[every filter]",
        lambda w: audit.history(
            w.cached(), RESOURCE, holder=w.accounts[1], token=w.token, from_block=0, to_block=w.head
        ),
    ),
    Call("Registry.lease_from_tx", lambda w: w.registry().lease_from_tx(w.tx_hash)),
    Call("Registry.batch_items", lambda w: w.registry().batch_items(w.tx_hash)),
    Call("Registry.batch_item", lambda w: w.registry().batch_item(w.tx_hash, item=0)),
    Call("LeaseSet.acquire", lambda w: LeaseSet.acquire(w.cached(), [FREE, "ops/other"], 60)),
    Call("Namespace.transfer_admin", lambda w: w.cached().namespace("ops").transfer_admin(w.accounts[2])),
    Call("Namespace.accept_admin", lambda w: w.cached().namespace("ops").accept_admin()),
    Call("Namespace.set_policy", lambda w: w.cached().namespace("ops").set_policy(max_ttl=60)),
    Call("Namespace.set_policy[max_ttl uncached]", lambda w: w.registry().namespace("ops").set_policy(lock_delay=5)),
    Call("Namespace.admit", lambda w: w.cached().namespace("ops").admit([w.accounts[2]])),
    Call("Namespace.policy", lambda w: w.registry().namespace("ops").policy()),
    Call("Namespace.is_admitted", lambda w: w.registry().namespace("ops").is_admitted(w.accounts[2])),
    Call("Namespace.revoke", lambda w: w.cached().namespace("ops").revoke("ops/x")),
    Call("Namespace.grant", lambda w: w.cached().namespace("ops").grant("ops/x", w.accounts[2], 60)),
    Call("Workset.revoke", lambda w: w.cached().workset("ops/batch").revoke("a")),
    Call("Workset.grant", lambda w: w.cached().workset("ops/batch").grant("a", w.accounts[2], 60)),
    Call("Registry.ending", lambda w: w.registry().ending("jobs/a", 1)),
    # -- Batcher (registry.batched(): group commit) -----------------------------
    Call("Batcher.acquire", lambda w: w.cached().batched().acquire(FREE, ttl=60)),
    Call("Batcher.acquire[exclusive]", lambda w: w.cached().batched().acquire(FREE, ttl=60, exclusive=True)),
    Call("Batcher.renew", lambda w: w.cached().batched().renew(RESOURCE, w.token, 60)),
    Call("Batcher.release", lambda w: w.cached().batched().release(RESOURCE, w.token)),
    Call("Batcher.lease", enter_batched_lease),
    Call("Lease.renew[through a batcher]", lambda w: batched(w.lease(), w).renew()),
    Call("Lease.release[through a batcher]", lambda w: batched(w.lease(), w).release()),
    Call("AsyncBatcher.acquire", aio(lambda w, c, r: r.batched().acquire(FREE, ttl=60))),
    Call("AsyncBatcher.renew", aio(lambda w, c, r: r.batched().renew(RESOURCE, w.token, 60))),
    Call("AsyncBatcher.release", aio(lambda w, c, r: r.batched().release(RESOURCE, w.token))),
    Call("AsyncBatcher.lease", aio(async_enter_batched_lease)),
    # -- Lease ---------------------------------------------------------------
    Call("Lease.renew", lambda w: w.lease().renew()),
    Call("Lease.renew[progress]", lambda w: w.lease().renew(progress=7)),
    Call("Lease.release", lambda w: w.lease().release()),
    Call("Lease.complete", lambda w: w.lease().complete(b"done")),
    Call("Lease.is_current", lambda w: w.lease().is_current()),
    Call("Lease.sign", lambda w: w.lease(cached=False).sign(PAYLOAD, action=ACTION, audience=AUDIENCE)),
    Call("Lease[leaving the with block]", exit_lease),
    Call("Lease.keep", keep_until_lost, raises=LeaseLost),
    # -- LeaseSet ------------------------------------------------------------
    Call("LeaseSet.renew", lambda w: LeaseSet([w.lease()]).renew()),
    Call("LeaseSet.release", lambda w: LeaseSet([w.lease()]).release()),
    Call("LeaseSet[leaving the with block]", lambda w: LeaseSet([w.lease()]).__exit__(None, None, None)),
    Call("LeaseSet.keep", set_keep_until_lost, raises=LeaseSetLost),
    # -- Election, Leadership ------------------------------------------------
    Call("Election.campaign", lambda w: Election(w.cached(), FREE, ttl=60).campaign()),
    Call(
        "Election.campaign[wait, held]",
        lambda w: Election(w.cached().connect(w.accounts[2]), RESOURCE, ttl=60).campaign(wait=5),
    ),
    Call("Election.campaign[max_ttl uncached]", lambda w: Election(w.registry(), FREE, ttl=60).campaign(wait=0)),
    Call("Election.leader", lambda w: Election(w.registry(), RESOURCE, ttl=60).leader()),
    Call("Election.observe", lambda w: next(Election(w.registry(), RESOURCE, ttl=60).observe(timeout=5))),
    Call("Election.watch", watch_until_it_fails),
    Call("Election.resign", lambda w: w.election.resign()),
    Call("Leadership.resign", lambda w: w.leadership.resign()),
    Call("Leadership.is_current", lambda w: w.leadership.is_current()),
    Call("Leadership[leaving the with block]", leave_leadership),
    # -- Guard ---------------------------------------------------------------
    Call("Guard[mark, registry unread]", lambda w: open_guard(w, "mark", cached=False)),
    Call("Guard[strict, registry unread]", lambda w: open_guard(w, "strict", cached=False)),
    Call("Guard[follow, registry unread]", lambda w: open_guard(w, "follow", cached=False)),
    Call("Guard[mark, reopening a store with marks]", lambda w: open_guard(w, "mark", store="mark.sqlite")),
    Call("Guard.check[mark, above the mark]", lambda w: w.guards["mark"].check(RESOURCE, w.token + 1)),
    Call("Guard.check[strict, at the mark]", lambda w: w.guards["strict"].check(RESOURCE, w.token)),
    Call("Guard.check[strict, above the mark]", lambda w: w.guards["strict"].check(RESOURCE, w.token + 1)),
    Call("Guard.check[follow, above the mark]", lambda w: w.guards["follow"].check(RESOURCE, w.token + 1)),
    Call("Guard.check[follow, at the mark, follower behind]", check_behind),
    Call(
        "Guard.check_request[mark, above the mark]",
        lambda w: w.guards["mark"].check_request(w.signed(w.token + 1), PAYLOAD, action=ACTION),
    ),
    Call(
        "Guard.check_request[strict]",
        lambda w: w.guards["strict"].check_request(w.signed(w.token), PAYLOAD, action=ACTION),
    ),
    Call(
        "Guard.check_request[domain unread]",
        lambda w: w.guards["domain-unread"].check_request(w.signed(w.token), PAYLOAD, action=ACTION),
    ),
    Call("Guard.sync", lambda w: w.guards["follow-sync"].sync()),
    Call("Guard.domain", lambda w: w.guards["domain-unread"].domain()),
    Call(
        "Guard.check[on-chain admission, answer not cached]",
        lambda w: w.guards["admission-unasked"].check(RESOURCE, w.token),
    ),
    # -- outcomes, FencedStore, sql --------------------------------------------
    Call("audit.history", lambda w: audit.history(w.registry(), RESOURCE)),
    Call("watchdog.stuck", lambda w: watchdog.stuck(w.cached(), renewals=1, longer_than=1)),
    Call("watchdog.stuck[index]", lambda w: watchdog.stuck(w.cached(), index=AuditIndex(w.audit_path))),
    Call("audit.history[index]", lambda w: audit.history(w.cached(), RESOURCE, index=AuditIndex(w.audit_path))),
    Call("AuditIndex.sync", lambda w: AuditIndex(w.audit_path).sync(w.cached())),
    Call("AuditIndex.sync[new file]", lambda w: AuditIndex(":memory:").sync(w.registry())),
    Call("AuditIndex.verify", lambda w: AuditIndex(w.audit_path).verify(w.cached())),
    Call("AuditIndex.status[with a chain]", lambda w: AuditIndex(w.audit_path).status(w.chain)),
    Call("Deployment.of", lambda w: Deployment.of(w.registry(), rpc_url=w.url)),
    Call("outcomes.reconcile", lambda w: reconcile(w.cached(), [w.tx_hash])),
    Call("outcomes.reconcile[nonce and sender]", lambda w: reconcile(w.cached(), [], nonce=0, sender=w.accounts[1])),
    Call("FencedStore.deploy", lambda w: FencedStore.deploy(w.cached())),
    Call("FencedStore.at", lambda w: FencedStore.at(w.cached(), w.store_address)),
    Call("FencedStore.write", lambda w: FencedStore(w.cached(), w.store_address).write(w.lease(), b"v2")),
    Call(
        "FencedStore.write_raw",
        lambda w: FencedStore(w.cached(), w.store_address).write_raw(w.accounts[1], RESOURCE, w.token, b"v2"),
    ),
    Call("FencedStore.read", lambda w: FencedStore(w.cached(), w.store_address).read(RESOURCE)),
    Call("FencedStore.history", lambda w: FencedStore(w.cached(), w.store_address).history()),
    Call("sql.fenced_transaction[above the mark]", fenced_sql),
    Call("sql.fenced_transaction[verify=strict guard]", lambda w: fenced_sql(w, w.guards["strict"].check)),
    # -- Rpc: the one layer every call above goes through ----------------------
    Call("Rpc.chain_id", lambda w: fresh_rpc(w).chain_id()),
    Call("Rpc.client_version", lambda w: fresh_rpc(w).client_version()),
    # Asked before, it is asked again: web3's cache keeps only the chain id (connect_http).
    Call("Rpc.client_version[asked before]", lambda w: w.chain.rpc.client_version()),
    Call("Rpc.identify", lambda w: fresh_rpc(w).identify()),
    Call("Rpc.request", lambda w: w.chain.rpc.request("evm_mine", [])),
    Call("Rpc.block_number", lambda w: w.chain.rpc.block_number()),
    Call("Rpc.block", lambda w: w.chain.rpc.block("latest")),
    Call("Rpc.blocks", lambda w: w.chain.rpc.blocks([1, 2, 3])),
    Call("Rpc.pending_timestamp", lambda w: w.chain.rpc.pending_timestamp()),
    Call("Rpc.call", lambda w: w.chain.rpc.call({"to": w.address, "data": w.cached()._encode("latestToken", [])})),
    Call(
        "Rpc.call_and_pending_timestamp",
        lambda w: w.chain.rpc.call_and_pending_timestamp(
            {"to": w.address, "data": w.cached()._encode("latestToken", [])}
        ),
    ),
    Call(
        "Rpc.estimate_gas",
        lambda w: w.chain.rpc.estimate_gas(
            {"from": w.accounts[1], "to": w.address, "data": acquire_data(w)}, "pending"
        ),
    ),
    Call(
        "Rpc.dev_preflight",
        lambda w: w.chain.rpc.dev_preflight(
            {"from": w.accounts[1], "to": w.address, "data": acquire_data(w)}, "anvil_getAutomine"
        ),
    ),
    Call("Rpc.code", lambda w: w.chain.rpc.code(w.address)),
    Call("Rpc.code_and_call", lambda w: w.chain.rpc.code_and_call(w.address, {"to": w.address, "data": b""})),
    Call("Rpc.nonce", lambda w: w.chain.rpc.nonce(w.accounts[1])),
    Call("Rpc.balance", lambda w: w.chain.rpc.balance(w.accounts[1])),
    Call("Rpc.logs", lambda w: w.chain.rpc.logs({"address": w.address, "fromBlock": 0, "toBlock": w.head})),
    Call("Rpc.send_raw", lambda w: w.chain.rpc.send_raw(signed_cancel(w))),
    Call("Rpc.send_raw_sync", lambda w: w.chain.rpc.send_raw_sync(signed_cancel(w))),
    Call("Rpc.transaction", lambda w: w.chain.rpc.transaction(w.tx_hash)),
    Call("Rpc.receipt", lambda w: w.chain.rpc.receipt(w.tx_hash)),
    Call("Rpc.traced_revert", lambda w: w.chain.rpc.traced_revert(w.tx_hash)),
    Call("Rpc.block_receipts", lambda w: w.chain.rpc.block_receipts(block_hashes(w))),
    Call("Rpc.whole_blocks", lambda w: w.chain.rpc.whole_blocks(block_hashes(w))),
    Call("Rpc.gas_price", lambda w: w.chain.rpc.gas_price()),
    Call("Rpc.max_priority_fee", lambda w: w.chain.rpc.max_priority_fee()),
    # -- chainfence.aio: the same steps over AsyncRpc --------------------------
    Call("AsyncChain.connect", lambda w: asyncio.run(AsyncChain.connect(w.url, timeouts=Timeouts(request=TIMEOUT)))),
    Call("AsyncChain.now", aio(lambda w, c, r: c.now())),
    Call("AsyncChain.latest_time", aio(lambda w, c, r: c.latest_time())),
    Call("AsyncChain.block_number", aio(lambda w, c, r: c.block_number())),
    Call("AsyncChain.confirmed_block", aio(lambda w, c, r: c.confirmed_block())),
    Call("AsyncChain.call", aio(lambda w, c, r: c.call(w.address, w.cached()._encode("latestToken", [])))),
    Call("AsyncChain.call_now", aio(lambda w, c, r: c.call_now(w.address, bytes.fromhex("bc1c8b9b")))),
    Call("AsyncChain.transact", aio(lambda w, c, r: c.transact(w.accounts[1], w.address, acquire_data(w)))),
    Call("AsyncChain.advance_time", aio(lambda w, c, r: c.advance_time(5))),
    Call("AsyncChain.mine", aio(lambda w, c, r: c.mine())),
    Call("AsyncChain.snapshot", aio(lambda w, c, r: c.snapshot())),
    Call("AsyncChain.revert", aio(lambda w, c, r: c.revert(w.snapshot))),
    Call("AsyncChain.set_next_block_time", aio(lambda w, c, r: c.set_next_block_time(w.next_time))),
    Call("AsyncRegistry.deploy", aio(lambda w, c, r: AsyncRegistry.deploy(c))),
    Call("AsyncRegistry.at", aio(lambda w, c, r: AsyncRegistry.at(c, w.address))),
    Call("AsyncRegistry.acquire", aio(lambda w, c, r: r.acquire(FREE, ttl=60))),
    Call(
        "AsyncRegistry.acquire[wait, held]",
        aio(lambda w, c, r: r.connect(w.accounts[2]).acquire(RESOURCE, ttl=60, wait=5)),
    ),
    Call("AsyncWorkset.claim", aio(lambda w, c, r: r.workset("batch").claim(["a", "b"], 60))),
    Call("AsyncLeaseSet.acquire", aio(lambda w, c, r: AsyncLeaseSet.acquire(r, [FREE, "ops/other"], 60))),
    Call("AsyncRegistry.renew", aio(lambda w, c, r: r.renew(RESOURCE, w.token, 60))),
    Call("AsyncRegistry.release", aio(lambda w, c, r: r.release(RESOURCE, w.token))),
    Call("AsyncRegistry.complete", aio(lambda w, c, r: r.complete(RESOURCE, w.token, b"done"))),
    Call("AsyncRegistry.acquire[async with]", aio(async_enter_lease)),
    Call("AsyncRegistry.lease_from_tx", aio(lambda w, c, r: r.lease_from_tx(w.tx_hash))),
    Call("AsyncRegistry.batch_items", aio(lambda w, c, r: r.batch_items(w.tx_hash))),
    Call("AsyncRegistry.batch_item", aio(lambda w, c, r: r.batch_item(w.tx_hash, item=0))),
    Call("AsyncRegistry.latest_token", aio(lambda w, c, r: r.latest_token())),
    Call("AsyncRegistry.lease_of", aio(lambda w, c, r: r.lease_of(RESOURCE))),
    Call("AsyncRegistry.last_lease", aio(lambda w, c, r: r.last_lease(RESOURCE))),
    Call("AsyncRegistry.check_current", aio(lambda w, c, r: r.check_current(RESOURCE, w.token))),
    Call("AsyncRegistry.identity", aio(lambda w, c, r: AsyncRegistry(c, w.registry()).identity())),
    Call("AsyncRegistry.from_deployment", aio(lambda w, c, r: AsyncRegistry.from_deployment(c, w.deployment))),
    Call(
        "watchdog.stuck[an AsyncRegistry]",
        aio(lambda w, c, r: watchdog.stuck(AsyncRegistry(c, w.registry()), longer_than=1)),
    ),
    Call("audit.history[an AsyncRegistry]", aio(lambda w, c, r: audit.history(AsyncRegistry(c, w.registry())))),
    Call("audit.history[an AsyncRegistry, resource]", aio(lambda w, c, r: audit.history(r, RESOURCE))),
    Call("AsyncRegistry.ending", aio(lambda w, c, r: AsyncRegistry(c, w.registry()).ending("jobs/a", 1))),
    Call("AsyncWorkset.last_lease", aio(lambda w, c, r: r.workset("batch").last_lease("a"))),
    Call("AsyncWorkset.complete", aio(lambda w, c, r: r.workset("batch").complete("a", w.token, b"done"))),
    Call("AsyncWorkset.renew", aio(lambda w, c, r: r.workset("batch").renew("a", w.token, 30))),
    Call("AsyncWorkset.release", aio(lambda w, c, r: r.workset("batch").release("a", w.token))),
    Call("AsyncRegistry.last_lease[resource_id]", aio(lambda w, c, r: r.last_lease(resource_id=resource_id(RESOURCE)))),
    Call("AsyncRegistry.eip712_domain", aio(lambda w, c, r: AsyncRegistry(c, w.registry()).eip712_domain())),
    Call("AsyncRegistry.deployment_block", aio(lambda w, c, r: AsyncRegistry(c, w.registry()).deployment_block())),
    Call(
        "AsyncNamespace.transfer_admin",
        aio(lambda w, c, r: r.namespace("ops").transfer_admin(w.accounts[2])),
    ),
    Call("AsyncNamespace.accept_admin", aio(lambda w, c, r: r.namespace("ops").accept_admin())),
    Call("AsyncNamespace.set_policy", aio(lambda w, c, r: r.namespace("ops").set_policy(max_ttl=60))),
    Call(
        "AsyncNamespace.set_policy[max_ttl uncached]",
        aio(lambda w, c, r: AsyncRegistry(c, w.registry()).namespace("ops").set_policy(lock_delay=5)),
    ),
    Call("AsyncNamespace.admit", aio(lambda w, c, r: r.namespace("ops").admit([w.accounts[2]]))),
    Call("AsyncNamespace.policy", aio(lambda w, c, r: r.namespace("ops").policy())),
    Call("AsyncNamespace.is_admitted", aio(lambda w, c, r: r.namespace("ops").is_admitted(w.accounts[2]))),
    Call("AsyncNamespace.revoke", aio(lambda w, c, r: r.namespace("ops").revoke("ops/x"))),
    Call("AsyncNamespace.grant", aio(lambda w, c, r: r.namespace("ops").grant("ops/x", w.accounts[2], 60))),
    Call("AsyncWorkset.revoke", aio(lambda w, c, r: r.workset("ops/batch").revoke("a"))),
    Call("AsyncWorkset.grant", aio(lambda w, c, r: r.workset("ops/batch").grant("a", w.accounts[2], 60))),
    Call(
        "AsyncLease.sign",
        aio(
            lambda w, c, r: AsyncLease(AsyncRegistry(c, w.registry()), w.lease(cached=False)).sign(
                PAYLOAD, action=ACTION, audience=AUDIENCE
            )
        ),
    ),
    Call("AsyncElection.campaign", aio(lambda w, c, r: AsyncElection(r, FREE, ttl=60).campaign())),
    Call(
        "AsyncElection.campaign[wait, held]",
        aio(lambda w, c, r: AsyncElection(r.connect(w.accounts[2]), RESOURCE, ttl=60).campaign(wait=5)),
    ),
    Call("AsyncElection.leader", aio(lambda w, c, r: AsyncElection(r, RESOURCE, ttl=60).leader())),
    Call(
        "AsyncElection.observe",
        aio(lambda w, c, r: anext(AsyncElection(AsyncRegistry(c, w.registry()), RESOURCE, ttl=60).observe(timeout=5))),
    ),
    Call("AsyncElection.watch", aio(async_watch_until_it_fails)),
    Call("AsyncElection.resign", aio(lambda w, c, r: async_won(w, c).resign())),
    Call("AsyncLeadership.resign", aio(lambda w, c, r: AsyncLeadership(async_won(w, c), w.leadership).resign())),
    Call(
        "AsyncLeadership.is_current",
        aio(lambda w, c, r: AsyncLeadership(async_won(w, c), w.leadership).is_current()),
    ),
    Call("AsyncLeadership[leaving the async with block]", aio(async_leave_leadership)),
    Call("AsyncLease.renew", aio(lambda w, c, r: AsyncLease(r, w.lease()).renew())),
    Call("AsyncLease.release", aio(lambda w, c, r: AsyncLease(r, w.lease()).release())),
    Call("AsyncLease.complete", aio(lambda w, c, r: AsyncLease(r, w.lease()).complete(b"done"))),
    Call("AsyncLease.is_current", aio(lambda w, c, r: AsyncLease(r, w.lease()).is_current())),
    Call("AsyncLease[leaving the async with block]", aio(async_exit_lease)),
    Call("AsyncLease.keep", aio(async_keep_until_lost), raises=LeaseLost),
    Call("AsyncLeaseSet.renew", aio(lambda w, c, r: AsyncLeaseSet(r, LeaseSet([w.lease()])).renew())),
    Call("AsyncLeaseSet.release", aio(lambda w, c, r: AsyncLeaseSet(r, LeaseSet([w.lease()])).release())),
    Call("AsyncLeaseSet[leaving the async with block]", aio(async_exit_set)),
    Call("AsyncLeaseSet.keep", aio(async_set_keep_until_lost), raises=LeaseSetLost),
    Call("AsyncGuard.check[strict]", lambda w: asyncio.run(AsyncGuard(w.guards["strict"]).check(RESOURCE, w.token))),
    Call(
        "AsyncGuard.check_request[strict]",
        lambda w: asyncio.run(AsyncGuard(w.guards["strict"]).check_request(w.signed(w.token), PAYLOAD, action=ACTION)),
    ),
    Call("AsyncGuard.sync", lambda w: asyncio.run(AsyncGuard(w.guards["follow-sync"]).sync())),
    Call(
        "AsyncGuard.open[mark, registry unread]",
        aio(lambda w, c, r: async_open_guard(w, AsyncRegistry(c, w.registry()))),
    ),
    Call("AsyncGuard.domain", lambda w: asyncio.run(AsyncGuard(w.guards["domain-unread"]).domain())),
    Call("AsyncRpc.request", async_rpc("request", "evm_mine", [])),
    Call("AsyncRpc.chain_id", async_rpc("chain_id")),
    Call("AsyncRpc.client_version", async_rpc("client_version")),
    Call("AsyncRpc.identify", async_rpc("identify")),
    Call("AsyncRpc.block_number", async_rpc("block_number")),
    Call("AsyncRpc.block", async_rpc("block", "latest")),
    Call("AsyncRpc.blocks", async_rpc("blocks", [1, 2, 3])),
    Call("AsyncRpc.pending_timestamp", async_rpc("pending_timestamp")),
    Call(
        "AsyncRpc.call", async_rpc("call", lambda w: {"to": w.address, "data": w.cached()._encode("latestToken", [])})
    ),
    Call(
        "AsyncRpc.call_and_pending_timestamp",
        async_rpc(
            "call_and_pending_timestamp", lambda w: {"to": w.address, "data": w.cached()._encode("latestToken", [])}
        ),
    ),
    Call(
        "AsyncRpc.estimate_gas",
        async_rpc(
            "estimate_gas", lambda w: {"from": w.accounts[1], "to": w.address, "data": acquire_data(w)}, "pending"
        ),
    ),
    Call(
        "AsyncRpc.dev_preflight",
        async_rpc(
            "dev_preflight",
            lambda w: {"from": w.accounts[1], "to": w.address, "data": acquire_data(w)},
            "anvil_getAutomine",
        ),
    ),
    Call("AsyncRpc.code", async_rpc("code", lambda w: w.address)),
    Call("AsyncRpc.code_and_call", async_rpc("code_and_call", lambda w: w.address, lambda w: {"to": w.address})),
    Call("AsyncRpc.nonce", async_rpc("nonce", lambda w: w.accounts[1])),
    Call("AsyncRpc.balance", async_rpc("balance", lambda w: w.accounts[1])),
    Call("AsyncRpc.logs", async_rpc("logs", lambda w: {"address": w.address, "fromBlock": 0, "toBlock": w.head})),
    Call("AsyncRpc.send_raw", async_rpc("send_raw", signed_cancel)),
    Call("AsyncRpc.send_raw_sync", async_rpc("send_raw_sync", signed_cancel)),
    Call("AsyncRpc.transaction", async_rpc("transaction", lambda w: w.tx_hash)),
    Call("AsyncRpc.receipt", async_rpc("receipt", lambda w: w.tx_hash)),
    Call("AsyncRpc.traced_revert", async_rpc("traced_revert", lambda w: w.tx_hash)),
    Call("AsyncRpc.block_receipts", async_rpc("block_receipts", block_hashes)),
    Call("AsyncRpc.whole_blocks", async_rpc("whole_blocks", block_hashes)),
    Call("AsyncRpc.gas_price", async_rpc("gas_price")),
    Call("AsyncRpc.max_priority_fee", async_rpc("max_priority_fee")),
]

NEW_KEY = "0x" + "42" * 32

QUIET: list[Quiet] = [
    *(
        Quiet(
            f"AuditIndex.{name}",
            (lambda call: lambda w: call(AuditIndex(w.audit_path), w))(call),
            "reads the index file",
        )
        for name, call in (
            ("status", lambda i, w: i.status()),
            ("history", lambda i, w: i.history(RESOURCE)),
            ("history_by_id", lambda i, w: i.history_by_id(resource_id(RESOURCE))),
            ("lease", lambda i, w: i.lease(w.token)),
            ("leases_of", lambda i, w: i.leases_of(w.accounts[1])),
            ("holder_at", lambda i, w: i.holder_at(RESOURCE, block=w.head)),
            ("current", lambda i, w: i.current()),
            ("takeovers", lambda i, w: i.takeovers()),
            ("completions", lambda i, w: i.completions()),
            ("resources", lambda i, w: i.resources("jobs/")),
            ("events", lambda i, w: i.events()),
            ("pages", lambda i, w: list(i.pages(i.takeovers))),
            ("every", lambda i, w: list(i.every(i.events))),
            ("label", lambda i, w: i.label(resource_id(RESOURCE))),
            ("close", lambda i, w: i.close()),
            ("timeline_leases", lambda i, w: i.timeline_leases([RESOURCE])),
        )
    ),
    Quiet("Chain.embedded", lambda w: Chain.embedded(accounts=1), "an in-process chain: no node"),
    Quiet("Chain.add_account", lambda w: w.chain.add_account(NEW_KEY), "keeps a key in memory"),
    Quiet("Chain.signer", lambda w: w.chain.signer(w.accounts[1]), "looks the key up in memory"),
    Quiet("Chain.key_of", lambda w: w.chain.key_of(w.accounts[1]), "looks the key up in memory"),
    Quiet("Chain.use_relayer", lambda w: w.chain.use_relayer(None), "sets (or clears) the relayer in memory"),
    Quiet("Chain.is_dev", lambda w: w.chain.is_dev, "decided at connect"),
    Quiet("Registry.connect", lambda w: w.cached().connect(w.accounts[2]), "a view of the same registry"),
    Quiet("Registry.batched", lambda w: w.cached().batched(), "finds or makes the sender's batcher; asks nothing"),
    Quiet("Batcher.connect", lambda w: w.cached().batched().connect(w.accounts[2]), "a view of its registry"),
    Quiet("Batcher.chain", lambda w: w.cached().batched().chain, "its registry's chain"),
    Quiet("Batcher.queued", lambda w: w.cached().batched().queued, "its queue's length"),
    Quiet("Batcher.waited", lambda w: w.cached().batched().waited, "its figures"),
    Quiet("AsyncRegistry.batched", aio(lambda w, c, r: _value(r.batched())), "finds or makes the sender's batcher"),
    *(
        Quiet(
            f"AsyncBatcher.{name}",
            aio(lambda w, c, r, name=name: _value(getattr(r.batched(), name))),
            "a setting, its queue's length, or its figures",
        )
        for name in ("sender", "max_items", "window", "queued", "batches", "operations", "largest", "waited")
    ),
    Quiet("Registry.namespace", lambda w: w.cached().namespace().prefix, "'0x' + the sender's address, lowercase"),
    Quiet("Registry.workset", lambda w: w.cached().workset("batch").name, "a handle: asks nothing"),
    Quiet("Namespace.id", lambda w: w.cached().namespace("ops").id, "keccak256 of the prefix"),
    Quiet(
        "Lease.sign[domain read before]",
        lambda w: w.lease().sign(PAYLOAD, action=ACTION, audience=AUDIENCE),
        "signs locally once the registry's domain was read",
    ),
    Quiet("Lease.check", lambda w: w.lease().check(), "a clock reading: the safe deadline has not passed"),
    Quiet("Lease.safe_remaining", lambda w: w.lease().safe_remaining(), "a clock reading"),
    Quiet("Lease.keeper", lambda w: w.lease().keeper, "the running keep-alive, if any"),
    *(
        Quiet(f"LeaseSet.{name}", lambda w, name=name: getattr(LeaseSet([w.lease()]), name), "a field of the set")
        for name in ("registry", "tokens", "resources", "expires_at")
    ),
    Quiet(
        "LeaseSet.check", lambda w: LeaseSet([w.lease()]).check(), "a clock reading: the safe deadline has not passed"
    ),
    Quiet("LeaseSet.safe_remaining", lambda w: LeaseSet([w.lease()]).safe_remaining(), "a clock reading"),
    Quiet("LeaseSet.keeper", lambda w: LeaseSet([w.lease()]).keeper, "the running keep-alive, if any"),
    Quiet(
        "Election.resign[never won]",
        lambda w: Election(w.registry(), LEADER, ttl=60).resign(),
        "this object holds no leadership: nothing to read or send",
    ),
    Quiet("Election.leadership", lambda w: w.election.leadership, "the leadership this object won"),
    Quiet("Leadership.check", lambda w: w.leadership.check(), "a clock reading: the safe deadline has not passed"),
    Quiet("Leadership.safe_remaining", lambda w: w.leadership.safe_remaining(), "a clock reading"),
    Quiet("Leadership.lost", lambda w: w.leadership.lost, "the renewer's verdict"),
    Quiet("Leadership.expires_at", lambda w: w.leadership.expires_at, "as of the last confirmed renewal"),
    Quiet(
        "Watch.running", lambda w: Watch(Election(w.registry(), FREE, ttl=60), print).running, "whether its thread runs"
    ),
    Quiet(
        "Watch.stop",
        lambda w: Watch(Election(w.registry(), FREE, ttl=60), print).stop(),
        "stops its thread (never started here)",
    ),
    Quiet(
        "Guard[mark, fresh store]",
        lambda w: open_guard(w, "mark"),
        "identity read before, no marks to check against the chain",
    ),
    Quiet(
        "Guard[strict, fresh store]",
        lambda w: open_guard(w, "strict"),
        "identity read before, no marks to check against the chain",
    ),
    Quiet(
        "Guard[follow, fresh store]",
        follow_guard_starts_behind,
        "its first sync fails and the follower retries; checks go on-chain meanwhile",
        asks=True,
    ),
    Quiet(
        "Guard.check[mark, at the mark]",
        lambda w: w.guards["mark"].check(RESOURCE, w.token),
        "mark mode accepts the token at the mark from the store (its documented window)",
    ),
    Quiet(
        "Guard.check[follow, at the mark, follower healthy]",
        lambda w: w.guards["follow"].check(RESOURCE, w.token),
        "the follower synced within max_lag: the mark is trusted",
    ),
    Quiet(
        "Guard.check_request[mark, at the mark]",
        lambda w: w.guards["mark"].check_request(w.signed(w.token), PAYLOAD, action=ACTION),
        "mark mode, token at the mark, holder and domain known",
    ),
    Quiet("Guard.mark", lambda w: w.guards["strict"].mark(RESOURCE), "reads the store"),
    Quiet("Guard.marks", lambda w: w.guards["strict"].marks(), "reads the store"),
    Quiet("Guard.staleness", lambda w: w.guards["follow"].staleness(), "a clock reading"),
    Quiet("Guard.follow_status", lambda w: w.guards["follow"].follow_status(), "the follower's last result"),
    Quiet("Guard.followed_block", lambda w: w.guards["follow"].followed_block, "the follower's progress"),
    Quiet("Guard.close", lambda w: w.new_guard("mark").close(), "closes the store"),
    Quiet(
        "Guard.check[on-chain admission, answer cached]",
        lambda w: w.guards["admission-cached"].check(RESOURCE, w.token),
        "mark mode at the mark; the namespace's answer for this holder cached by an earlier check",
    ),
    Quiet(
        "Guard.check[local admission, at the mark]",
        lambda w: w.guards["admission-local"].check(RESOURCE, w.token),
        "mark mode at the mark; the holder looked up in the local list",
    ),
    Quiet("Rpc.tester", refuses_dev_control, "the embedded chain's dev controls; a node's chain refuses them unasked"),
    Quiet(
        "Rpc.chain_id[asked before]",
        lambda w: w.chain.rpc.chain_id(),
        "web3's request cache answers eth_chainId once asked (connect_http)",
    ),
    Quiet("AsyncChain.embedded", lambda w: AsyncChain.embedded(accounts=1), "an in-process chain: no node"),
    Quiet(
        "AsyncChain.over", aio(lambda w, c, r: asyncio.sleep(0)), "wraps the chain; builds a provider that asks nothing"
    ),
    Quiet("AsyncChain.aclose", aio(lambda w, c, r: c.aclose()), "closes the HTTP session"),
    Quiet("AsyncChain.accounts", aio(lambda w, c, r: _value(c.accounts)), "the wrapped chain's keys"),
    Quiet("AsyncChain.chain_id", aio(lambda w, c, r: _value(c.chain_id)), "read at connect"),
    Quiet("AsyncChain.confirmations", aio(lambda w, c, r: _value(c.confirmations)), "a setting"),
    Quiet("AsyncChain.add_account", aio(lambda w, c, r: _value(c.add_account(NEW_KEY))), "keeps a key in memory"),
    Quiet("AsyncChain.signer", aio(lambda w, c, r: _value(c.signer(w.accounts[1]))), "looks the key up in memory"),
    Quiet("AsyncChain.key_of", aio(lambda w, c, r: _value(c.key_of(w.accounts[1]))), "looks the key up in memory"),
    Quiet("AsyncChain.relayer", aio(lambda w, c, r: _value(c.relayer)), "the wrapped chain's setting"),
    Quiet(
        "AsyncChain.use_relayer",
        aio(lambda w, c, r: _value(c.use_relayer(None))),
        "sets (or clears) the relayer in memory",
    ),
    Quiet("AsyncChain.is_dev", aio(lambda w, c, r: _value(c.is_dev)), "decided at connect"),
    Quiet(
        "AsyncRegistry.connect", aio(lambda w, c, r: _value(r.connect(w.accounts[2]))), "a view of the same registry"
    ),
    Quiet("AsyncRegistry.address", aio(lambda w, c, r: _value(r.address)), "a setting"),
    Quiet("AsyncRegistry.sender", aio(lambda w, c, r: _value(r.sender)), "a setting"),
    Quiet("AsyncRegistry.max_ttl", aio(lambda w, c, r: _value(r.max_ttl)), "read at at() or deploy()"),
    Quiet("AsyncRegistry.namespace", aio(lambda w, c, r: _value(r.namespace().prefix)), "the sender's namespace"),
    Quiet("AsyncRegistry.workset", aio(lambda w, c, r: _value(r.workset("batch").name)), "a handle: asks nothing"),
    Quiet("AsyncWorkset.name", aio(lambda w, c, r: _value(r.workset("batch").name)), "the handle's name"),
    Quiet("AsyncNamespace.prefix", aio(lambda w, c, r: _value(r.namespace("ops").prefix)), "the handle's prefix"),
    Quiet("AsyncNamespace.id", aio(lambda w, c, r: _value(r.namespace("ops").id)), "keccak256 of the prefix"),
    Quiet("AsyncRegistry.deployed_block", aio(lambda w, c, r: _value(r.deployed_block)), "known if it deployed"),
    *(
        Quiet(
            f"AsyncElection.{field_}",
            aio(lambda w, c, r, f=field_: _value(getattr(AsyncElection(r, FREE, ttl=60), f))),
            "a setting of the election, or the leadership it won",
        )
        for field_ in ("name", "ttl", "confirmations", "leadership")
    ),
    Quiet(
        "AsyncElection.resign[never won]",
        aio(lambda w, c, r: AsyncElection(r, LEADER, ttl=60).resign()),
        "this object holds no leadership: nothing to read or send",
    ),
    Quiet(
        "AsyncLeadership.check",
        aio(lambda w, c, r: _value(AsyncLeadership(async_won(w, c), w.leadership).check())),
        "a clock reading: the safe deadline has not passed",
    ),
    *(
        Quiet(
            f"AsyncLeadership.{field_}",
            aio(lambda w, c, r, f=field_: _value(getattr(AsyncLeadership(async_won(w, c), w.leadership), f))),
            "a field of the term, a clock reading, or the renewer's verdict",
        )
        for field_ in (
            "safe_remaining",
            "lost",
            "expires_at",
            "lease",
            "name",
            "token",
            "holder",
            "since",
            "block_number",
            "resigned",
        )
    ),
    Quiet(
        "AsyncWatch.running",
        aio(lambda w, c, r: async_unstarted_watch(w, c, r, "running")),
        "whether its task runs",
    ),
    Quiet(
        "AsyncWatch.stop",
        aio(lambda w, c, r: async_unstarted_watch(w, c, r, "stop")),
        "stops its task (cancelled before it asked anything here)",
    ),
    Quiet(
        "AsyncLease.check",
        aio(lambda w, c, r: _value(AsyncLease(r, w.lease()).check())),
        "a clock reading: the safe deadline has not passed",
    ),
    Quiet(
        "AsyncLease.safe_remaining",
        aio(lambda w, c, r: _value(AsyncLease(r, w.lease()).safe_remaining())),
        "a clock reading",
    ),
    Quiet("AsyncLease.keeper", aio(lambda w, c, r: _value(AsyncLease(r, w.lease()).keeper)), "the running keep-alive"),
    *(
        Quiet(
            f"AsyncLease.{field_}",
            aio(lambda w, c, r, f=field_: _value(getattr(AsyncLease(r, w.lease()), f))),
            "a field of the lease, read when it was acquired",
        )
        for field_ in (
            "resource",
            "resource_id",
            "token",
            "holder",
            "expires_at",
            "ttl",
            "previous_token",
            "reason",
            "tx_hash",
            "block_number",
            "released",
            "completed",
            "workset",
            "item",
        )
    ),
    Quiet(
        "AsyncLeaseSet.check",
        aio(lambda w, c, r: _value(AsyncLeaseSet(r, LeaseSet([w.lease()])).check())),
        "a clock reading: the safe deadline has not passed",
    ),
    Quiet(
        "AsyncLeaseSet.safe_remaining",
        aio(lambda w, c, r: _value(AsyncLeaseSet(r, LeaseSet([w.lease()])).safe_remaining())),
        "a clock reading",
    ),
    Quiet(
        "AsyncLeaseSet.keeper",
        aio(lambda w, c, r: _value(AsyncLeaseSet(r, LeaseSet([w.lease()])).keeper)),
        "the running keep-alive",
    ),
    *(
        Quiet(
            f"AsyncLeaseSet.{field_}",
            aio(lambda w, c, r, f=field_: _value(getattr(AsyncLeaseSet(r, LeaseSet([w.lease()])), f))),
            "a field of the set",
        )
        for field_ in ("leases", "tokens", "resources", "expires_at", "released")
    ),
    Quiet(
        "AsyncGuard.check[mark, at the mark]",
        lambda w: asyncio.run(AsyncGuard(w.guards["mark"]).check(RESOURCE, w.token)),
        "mark mode accepts the token at the mark from the store, in a worker thread",
    ),
    Quiet(
        "AsyncGuard.check[exclusive, at the mark]",
        lambda w: asyncio.run(AsyncGuard(w.guards["exclusive"]).check(RESOURCE, w.token)),
        "an exclusive guard accepts the token at the mark from memory, on the loop",
    ),
    Quiet(
        "AsyncGuard.open[mark, fresh store]",
        aio(lambda w, c, r: async_open_guard(w, r)),
        "identity read before, no marks to check against the chain",
    ),
    Quiet("AsyncGuard.mark", lambda w: asyncio.run(AsyncGuard(w.guards["strict"]).mark(RESOURCE)), "reads the store"),
    Quiet("AsyncGuard.marks", lambda w: asyncio.run(AsyncGuard(w.guards["strict"]).marks()), "reads the store"),
    Quiet("AsyncGuard.staleness", lambda w: AsyncGuard(w.guards["follow"]).staleness(), "a clock reading"),
    Quiet(
        "AsyncGuard.follow_status", lambda w: AsyncGuard(w.guards["follow"]).follow_status(), "the follower's result"
    ),
    Quiet("AsyncGuard.followed_block", lambda w: AsyncGuard(w.guards["follow"]).followed_block, "the follower's"),
    Quiet("AsyncGuard.close", lambda w: asyncio.run(AsyncGuard(w.new_guard("mark")).close()), "closes the store"),
    *(
        Quiet(f"AsyncGuard.{name}", lambda w, name=name: getattr(AsyncGuard(w.guards["mark"]), name), "a setting")
        for name in GUARD_SETTINGS
    ),
    Quiet("AsyncRpc.twin_of", lambda w: AsyncRpc.twin_of(w.chain.rpc, timeout=TIMEOUT), "builds a provider"),
    Quiet("AsyncRpc.close", async_rpc("close"), "closes the HTTP session"),
    Quiet("AsyncRpc.tester", refuses_async_dev_control, "the embedded chain's dev controls; refused unasked"),
    Quiet("Rpc.close", lambda w: fresh_rpc(w).close(), "closes the idle connections"),
]


async def _value(value: Any) -> Any:
    return value


def _foreign(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in FOREIGN or type(exc).__module__ == "builtins"


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.name)
def test_a_call_that_needs_the_chain_raises_node_unreachable(world, call):
    """With the node down, the call raises exactly its chainfence class; nothing foreign escapes."""
    with pytest.raises(Exception) as caught:
        call.run(world)
    error = caught.value
    assert not _foreign(error), f"{call.name} leaked {type(error).__module__}.{type(error).__name__}: {error}"
    assert isinstance(error, ChainfenceError) and type(error).__module__ == "chainfence.errors"
    assert type(error) is call.raises, f"{call.name} raised {type(error).__name__}: {error}"


@pytest.mark.parametrize("call", QUIET, ids=lambda c: c.name)
def test_a_call_that_needs_no_chain_answers_while_the_node_is_down(world, call):
    """Quiet calls answer with the node down; through the proxy they send nothing (unless they ask and carry on)."""
    proxy = getattr(world, "proxy", None)
    sent_before = len(proxy.log) if proxy else 0
    call.run(world)
    if proxy is not None and not call.asks:
        assert proxy.log[sent_before:] == [], f"{call.name} asked the node: {call.why}?"


# ---------------------------------------------------------------------------
# The retry rule of the one layer: reads once more, sends never
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("world", ["proxy"], indirect=True)
@pytest.mark.parametrize(
    ("what", "run", "requests_sent"),
    [
        ("a read", lambda w: w.chain.rpc.block_number(), 2),
        ("eth_sendRawTransaction", lambda w: w.chain.rpc.send_raw(signed_cancel(w)), 1),
        (
            "the preflight (eth_estimateGas; on anvil eth_call+anvil_getAutomine+eth_getBalance)",
            lambda w: w.cached().acquire(FREE, ttl=60),
            1,
        ),
        ("a dev-chain request", lambda w: w.chain.rpc.request("evm_mine", []), 1),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_reads_are_retried_once_and_sends_never(world, what, run, requests_sent):
    """Through the proxy: a read that fails in transit is tried twice in all; a send exactly once."""
    before = len(world.proxy.log)
    with pytest.raises(NodeUnreachable):
        run(world)
    assert len(world.proxy.log) - before == requests_sent


def test_a_send_that_may_have_left_says_so(world):
    """``maybe_delivered``: a refused connection never carried the request; a dropped one may have."""
    with pytest.raises(NodeUnreachable) as caught:
        world.chain.rpc.send_raw(signed_cancel(world))
    assert caught.value.maybe_delivered is (world.mode != "anvil")


# ---------------------------------------------------------------------------
# Down after the send: the outcome is unknown, never "unreachable"
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["proxy", "anvil"])
def test_acquire_when_the_node_stops_after_taking_the_transaction_is_outcome_unknown(mode, tmp_path):
    """The node accepted the acquisition, then stopped answering before it was mined.

    NodeUnreachable would tell the caller "nothing was sent"; but the node holds
    the transaction and may mine it (it does, below, once the proxy is back).
    So the SDK says OutcomeUnknown with the hash and the nonce, for reconciling.
    """
    node = Anvil().start()
    try:
        admin = Chain.connect(node.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.01))
        registry = Registry.deploy(admin, max_ttl=3_600)
        admin.rpc.request("evm_setAutomine", [False])  # the acquisition waits in the pool
        with RpcProxy(node.url) as proxy:
            url = proxy.url if mode == "proxy" else node.url
            chain = Chain.connect(
                url,
                private_keys=dev_keys(3)[1:2],
                timeouts=Timeouts(request=TIMEOUT, receipt=30, unreachable=0.3, poll=0.01),
            )
            agent = Registry.at(chain, registry.address)
            _ = agent.max_ttl

            def stop_once_the_node_has_it():
                if mode == "proxy":
                    proxy.wait_completed("eth_sendRawTransaction", 1)
                    proxy.down = True
                else:
                    while not _count(admin.rpc.request("txpool_status", [])["pending"]):
                        threading.Event().wait(0.005)
                    node.stop()

            stopper = threading.Thread(target=stop_once_the_node_has_it)
            stopper.start()
            with pytest.raises(ChainfenceError) as caught:
                agent.acquire(FREE, ttl=60)
            stopper.join(30)
            error = caught.value
            assert type(error) is OutcomeUnknown, f"{type(error).__name__}: {error}"
            assert len(error.tx_hashes) == 1 and error.nonce == 0 and error.sender == chain.accounts[0]
            if mode == "proxy":  # the node is back: the transaction it held is mined after all
                proxy.down = False
                admin.mine()
                lease = registry.lease_from_tx(error.tx_hash)
                assert lease is not None and lease.resource == FREE and lease.holder == chain.accounts[0]
    finally:
        node.stop()


def test_acquire_when_the_node_stops_while_confirming_is_not_confirmed_with_the_lease():
    """Mined (its receipt seen), then the node stops before the block is deep enough: NotConfirmed,
    carrying the lease it created (the outcome is known: it was mined; its depth is not)."""
    node = Anvil().start()
    try:
        admin = Chain.connect(node.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.01))
        registry = Registry.deploy(admin, max_ttl=3_600)
        with RpcProxy(node.url) as proxy:
            chain = Chain.connect(
                proxy.url,
                private_keys=dev_keys(3)[1:2],
                confirmations=1,
                timeouts=Timeouts(request=TIMEOUT, confirmation=30, unreachable=0.3, poll=0.01),
            )
            agent = Registry.at(chain, registry.address)
            _ = agent.max_ttl
            heads_before = proxy.completed_count("eth_blockNumber")

            def stop_once_confirming():
                proxy.wait_completed("eth_blockNumber", heads_before + 1)  # the depth wait's first read
                proxy.down = True

            stopper = threading.Thread(target=stop_once_confirming)
            stopper.start()
            with pytest.raises(ChainfenceError) as caught:
                agent.acquire(FREE, ttl=60)
            stopper.join(30)
        error = caught.value
        assert type(error) is NotConfirmed, f"{type(error).__name__}: {error}"
        assert error.lease is not None and error.lease.token == registry.latest_token()
    finally:
        node.stop()


def test_acquire_when_the_node_stops_after_the_confirmations_keeps_the_lease():
    """The acquisition is mined and confirmed; the node stops before the final "still current?" read.

    The node is unreachable (NodeUnreachable is the truth), but the lease
    exists on-chain until its ttl: the error carries it (``lease``), as
    NotConfirmed does, so the caller can release it instead of leaving a
    ghost lease behind.
    """
    node = Anvil().start()
    try:
        admin = Chain.connect(node.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.01))
        registry = Registry.deploy(admin, max_ttl=3_600)
        with RpcProxy(node.url) as proxy:
            chain = Chain.connect(
                proxy.url,
                private_keys=dev_keys(3)[1:2],
                confirmations=1,
                timeouts=Timeouts(request=TIMEOUT, confirmation=30, poll=0.01),
            )
            agent = Registry.at(chain, registry.address)
            _ = agent.max_ttl
            # The first read after the send is the check: a JSON-RPC batch (the lease and the clock in one
            # round trip), or a plain eth_call where batches are refused. Lose either, and its retry. (The
            # preflight is a batch too, eth_call+anvil_getAutomine+eth_getBalance: it goes through.)
            proxy.plan("eth_call+eth_getBlockByNumber", "drop_request", "drop_request")
            proxy.plan("eth_call", "drop_request", "drop_request")

            def confirm_once_mined():
                proxy.wait_completed("eth_sendRawTransaction", 1)
                admin.mine()  # one block on top: the acquisition is 1 deep

            miner = threading.Thread(target=confirm_once_mined)
            miner.start()
            with pytest.raises(ChainfenceError) as caught:
                agent.acquire(FREE, ttl=60)
            miner.join(30)
        error = caught.value
        assert type(error) is NodeUnreachable, f"{type(error).__name__}: {error}"
        lease = getattr(error, "lease", None)
        assert lease is not None, "the acquired lease was lost with the error"
        assert (lease.resource, lease.holder) == (FREE, chain.accounts[0])
        assert registry.lease_of(FREE).token == lease.token
    finally:
        node.stop()


def _count(value: int | str) -> int:
    return int(value, 16) if isinstance(value, str) else int(value)


# ---------------------------------------------------------------------------
# A black hole: the request timeout, then the same error
# ---------------------------------------------------------------------------


def test_a_node_that_accepts_connections_and_never_answers_is_unreachable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with silent_listener(port) as url, pytest.raises(ChainfenceError) as caught:
        Chain.connect(url, timeouts=Timeouts(request=0.2))
    assert type(caught.value) is NodeUnreachable, caught.value


# ---------------------------------------------------------------------------
# The ASGI middleware: 503, never 500
# ---------------------------------------------------------------------------


async def _asgi(app, request: FencedRequest, body: bytes) -> tuple[int, dict]:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.to_headers().items()]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/reports",
        "raw_path": b"/reports",
        "query_string": b"",
        "headers": headers,
    }
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict] = []

    async def receive():
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


@pytest.mark.parametrize("guard_name", ["strict", "domain-unread"])
def test_the_middleware_answers_503_with_the_node_down(world, guard_name):
    """A fenced route whose guard must ask the chain answers 503 with a JSON body; the app never runs.

    The body is for the service's HTTP clients: it names the error, never the node's URL (a hosted
    provider's carries its API key) nor the transport's own words; those go to the service's log.
    """
    ran = []

    async def app(scope, receive, send):  # pragma: no cover - must not run
        ran.append(scope)

    middleware = FencingMiddleware(app, guard=world.guards[guard_name], resource=RESOURCE, audience=AUDIENCE)
    status, body = asyncio.run(_asgi(middleware, world.signed(world.token), PAYLOAD))
    assert (status, body["error"]) == (503, "NodeUnreachable"), body
    assert ran == []
    host_port = world.url.split("//", 1)[1].split("/", 1)[0]
    for private in (SECRET_PATH, host_port, host_port.split(":")[1], "Connection"):
        assert private not in body["message"], body


# ---------------------------------------------------------------------------
# The CLI: exit 5, one line on stderr, no traceback
# ---------------------------------------------------------------------------

CLI = {
    "status": ["status", RESOURCE],
    "verify": ["verify", RESOURCE, "--token", "1"],
    "acquire": ["acquire", FREE, "--ttl", "60"],
    "tx": ["tx", "0x" + "ab" * 32],
    "audit": ["audit", "history", RESOURCE, "--index", "audit-cli.sqlite"],
}


@pytest.fixture(scope="module")
def cli_runs(world):
    """The CLI commands against the stopped anvil, run side by side (each is a Python start-up:
    about a second of CPU, so only the stopped node, not every way of being down)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["CHAINFENCE_PRIVATE_KEY"] = world.keys[1]
    processes = {
        name: subprocess.Popen(
            [sys.executable, "-m", "chainfence.cli", *args, "--rpc-url", world.url, "--registry", world.address],
            cwd=world.directory,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in CLI.items()
    }
    return {name: (p.wait(120), *p.communicate()) for name, p in processes.items()}


@pytest.mark.parametrize("world", ["anvil"], indirect=True)
@pytest.mark.parametrize("command", list(CLI))
def test_the_cli_exits_5_with_one_line_naming_the_error(cli_runs, command):
    code, out, err = cli_runs[command]
    assert "Traceback" not in err, err
    assert code == 5, (code, out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"chainfence {CLI[command][0]}: NodeUnreachable: "), err
