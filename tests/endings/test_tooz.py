"""The tooz driver: a lock's lease ends every way the model has, and the heartbeat finds it and names it
(``lock.lost``); a blocking acquire is refused every way, by name; on both backends (the embedded chain,
and the session's anvil through ``chainfence+http://``).

Each test works in a namespace of its own (``ns<random>/lock``), administered by a registry object of the
test's chain (account 0): revokes, grants, lock-delays and allowlists. Waits run on a WaitClock installed
on the coordinator's registry.
"""

from __future__ import annotations

import logging
import uuid

import pytest
import tooz
import tooz.coordination as tooz_coordination

from chainfence import Registry
from chainfence._sdk.names import address_namespace
from chainfence.endings import End, Refusal
from chainfence.errors import NotAdmitted
from chainfence.integrations.tooz import embedded_chain
from tests.conftest import BACKENDS
from tests.endings.matrix import covers
from tests.support.virtual_time import WaitClock

TTL = 30
DELAY = 60


@pytest.fixture(scope="module")
def anvil_tooz(anvil_node, anvil_chain):
    """A funding key of the driver's own on the session's anvil (its nonces are its own)."""
    from eth_account import Account

    funder = Account.create()
    anvil_chain.rpc.request("anvil_setBalance", [funder.address, hex(10**20)])
    return funder.key.to_0x_hex()


class Backend:
    """A coordinator URL, the test's chain and registry, and a namespace account 0 administers: on the embedded
    chain (a chain of the test's own) account 0's address namespace; on anvil a namespace the deployer (account
    0) assigned itself in a registry of the test's own (policies set here must not reach other tests)."""

    def __init__(self, url, chain, address, namespace):
        self.url, self.chain, self.address, self.namespace = url, chain, address, namespace
        self.started: list = []
        self.name = f"{namespace}/lock".encode()
        self.resource = self.name.decode()

    def coordinator(self):
        coordinator = tooz_coordination.get_coordinator(self.url, uuid.uuid4().hex.encode())
        coordinator.start()
        self.started.append(coordinator)
        return coordinator

    def admin(self) -> Registry:
        """The namespace's admin: account 0."""
        return Registry.at(self.chain, self.address).connect(self.chain.accounts[0])


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    if request.param == "embedded":
        name = f"endings-{uuid.uuid4().hex[:8]}"
        chain, registry = embedded_chain(name)
        made = Backend(
            f"chainfence+embedded://{name}?timeout={TTL}", chain, registry.address, address_namespace(chain.accounts[0])
        )
    else:
        node, chain = request.getfixturevalue("anvil_node"), request.getfixturevalue("anvil_chain")
        key = request.getfixturevalue("anvil_tooz")
        monkeypatch.setenv("CHAINFENCE_TOOZ_DRIVER_KEY", key)
        namespace = "ns" + uuid.uuid4().hex[:12]
        registry = Registry.deploy(chain, max_ttl=3_600, namespaces={namespace: chain.accounts[0]})
        host = node.url.split("://", 1)[1]
        made = Backend(
            f"chainfence+http://{host}?registry={registry.address}&key_env=CHAINFENCE_TOOZ_DRIVER_KEY&timeout={TTL}"
            "&poll_latency=0.005",
            chain,
            registry.address,
            namespace,
        )
    yield made
    for coordinator in made.started:
        if coordinator.is_started:
            coordinator.stop()


def held(backend):
    """A started coordinator and its lock, held."""
    coordinator = backend.coordinator()
    lock = coordinator.get_lock(backend.name)
    assert lock.acquire(blocking=False)
    return coordinator, lock


def beat_and_find(coordinator, lock, caplog, why: str) -> None:
    """The heartbeat finds the lease ended: the lock is dropped and says how, as the WARNING does."""
    token = lock.token
    with caplog.at_level(logging.WARNING, logger="chainfence.integrations.tooz"):
        assert coordinator.heartbeat() == TTL / 2  # no error: a lost lease is not a failure of the beat
    assert lock.lost == why and lock.token is None
    assert not lock.is_still_owner() and not lock.release()
    assert f"token={token} why={why}" in caplog.text


# ---------------------------------------------------------------------------
# Every way the lease of a held lock ends
# ---------------------------------------------------------------------------


@covers("tooz", End.EXPIRED)
def test_a_lock_whose_lease_expired_is_found_lost_by_the_heartbeat(backend, caplog):
    coordinator, lock = held(backend)
    backend.chain.advance_time(TTL)  # the heart never beat in time
    beat_and_find(coordinator, lock, caplog, "expired")


@covers("tooz", End.RELEASED)
def test_a_lock_released_by_another_process_of_its_account_is_found_lost(backend, caplog):
    coordinator, lock = held(backend)
    coordinator._registry.release(lock.resource, lock.token)  # what another process of the member would do
    beat_and_find(coordinator, lock, caplog, "released")


@covers("tooz", End.COMPLETED)
def test_a_result_completed_under_the_locks_token_ends_nothing(backend):
    coordinator, lock = held(backend)
    token = lock.token
    lock.lease.complete(b"done for now")
    assert coordinator.heartbeat() == TTL / 2
    assert lock.token == token and lock.lost is None and lock.is_still_owner()
    assert lock.release()


@covers("tooz", End.SUPERSEDED)
def test_a_lock_whose_account_acquired_the_resource_again_elsewhere_is_found_lost(backend, caplog):
    coordinator, lock = held(backend)
    again = coordinator._registry.acquire(lock.resource, TTL)  # a restarted process of the same member
    assert again.token > lock.token
    beat_and_find(coordinator, lock, caplog, "superseded")


@covers("tooz", End.REVOKED)
def test_a_revoked_lock_is_found_lost_at_the_next_heartbeat(backend, caplog):
    coordinator, lock = held(backend)
    assert backend.admin().namespace(backend.namespace).revoke(backend.resource) == lock.token
    beat_and_find(coordinator, lock, caplog, "revoked")


@covers("tooz", End.GRANTED)
def test_a_lock_whose_resource_was_granted_to_another_is_found_lost_at_the_next_heartbeat(backend, caplog):
    coordinator, lock = held(backend)
    other = backend.coordinator()
    granted = backend.admin().namespace(backend.namespace).grant(backend.resource, other.account, TTL)
    assert granted.token > lock.token
    beat_and_find(coordinator, lock, caplog, "granted")


@covers("tooz", End.ROLLED_BACK)
def test_a_lock_the_chain_forgot_is_found_lost_at_the_next_heartbeat(backend, caplog):
    coordinator = backend.coordinator()
    snapshot = backend.chain.snapshot()
    lock = coordinator.get_lock(backend.name)
    assert lock.acquire(blocking=False)
    backend.chain.revert(snapshot)  # the block that issued the lock's token is gone
    # The revert rewound the member's nonce too, and only the reverting Chain forgets its cached nonces: on a
    # shared anvil the member's next transaction (its stop's) would be queued behind a nonce the chain never
    # reaches, for good, and hold every later test of the node (a CI run's cascade).
    coordinator._registry.chain._sender.forget_nonces()
    beat_and_find(coordinator, lock, caplog, "rolled_back")


def test_a_node_that_does_not_answer_is_a_failed_beat_not_a_lost_lock(backend, monkeypatch):
    """The control for "found lost": an error that says nothing about the lease is raised (tooz's heart
    beats again), and the lock is kept."""
    from chainfence.errors import NodeUnreachable

    coordinator, lock = held(backend)
    token = lock.token

    def down(*args, **kwargs):
        raise NodeUnreachable("the node is down")

    monkeypatch.setattr(coordinator._registry, "renew", down)
    with pytest.raises(tooz.ToozError):
        coordinator.heartbeat()
    assert lock.token == token and lock.lost is None


# ---------------------------------------------------------------------------
# Every way a blocking acquire is refused for now
# ---------------------------------------------------------------------------


@covers("tooz", Refusal.HELD)
def test_a_blocking_acquire_waits_for_the_holder_and_takes_the_lock_at_its_release(backend):
    _, first = held(backend)
    first_token = first.token
    waiter = backend.coordinator()
    WaitClock(on_sleep=lambda n: first.release() if n == 2 else None).install(waiter._registry)
    second = waiter.get_lock(backend.name)
    assert second.acquire(blocking=True)
    assert second.lease.previous_token == first_token and second.token > first_token
    assert second.is_still_owner() and second.release()


@covers("tooz", Refusal.LOCK_DELAYED)
def test_a_blocking_acquire_waits_out_the_lock_delay(backend):
    admin = backend.admin()
    admin.namespace(backend.namespace).set_policy(lock_delay=DELAY)
    _, first = held(backend)
    expires_at, first_token = first.expires_at, first.token
    backend.chain.advance_time(expires_at - backend.chain.now())  # expired: the lock-delay runs until +60 s
    waiter = backend.coordinator()
    second = waiter.get_lock(backend.name)
    assert not second.acquire(blocking=False), "refused for now: False, as for a live holder (not a ToozError)"

    def on_sleep(n):
        if n == 2:
            backend.chain.advance_time(expires_at + DELAY - backend.chain.now())

    WaitClock(on_sleep=on_sleep).install(waiter._registry)
    assert second.acquire(blocking=True)
    assert second.lease.previous_token == first_token
    assert second.lease.expires_at - TTL >= expires_at + DELAY
    assert second.release()


@covers("tooz", Refusal.NOT_ADMITTED)
def test_an_acquire_the_namespace_does_not_admit_is_a_tooz_error_at_once(backend):
    admin = backend.admin()
    admin.namespace(backend.namespace).set_policy(admission_required=True)
    refused = backend.coordinator()
    clock = WaitClock().install(refused._registry)
    with pytest.raises(tooz.ToozError, match="NotAdmitted") as raised:
        refused.get_lock(backend.name).acquire(blocking=True)
    assert isinstance(raised.value.__cause__, NotAdmitted)
    assert clock.sleeps == [], "no waiting: only the admin can admit"
    admin.namespace(backend.namespace).admit([refused.account])
    lock = refused.get_lock(backend.name)
    assert lock.acquire(blocking=False) and lock.release()
