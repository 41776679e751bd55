"""The tooz driver's promises tooz's own suite does not test: expiry, renewal, fencing tokens, URLs.

tooz's suite never lets a lock expire, never checks that a heartbeat keeps
one, and knows nothing of fencing tokens. These tests do, on both backends
(the embedded chain, and the session's logical-clock anvil through
``chainfence+http://``), moving chain time by hand: no sleeps, no wall clock.
"""

from __future__ import annotations

import json
import logging
import uuid

import pytest
import tooz.coordination as tooz_coordination  # in the dev extra: missing, the suite fails (never skips)

from chainfence import Chain, Registry, Timeouts
from chainfence.errors import InvalidInput
from chainfence.integrations.tooz import embedded_chain, member_account
from tests.conftest import BACKENDS

TTL = 30


@pytest.fixture(scope="module")
def anvil_tooz(anvil_node, anvil_chain):
    """A registry on the session's anvil and a funding key of the driver's own (its nonces are its own)."""
    from eth_account import Account

    registry = Registry.deploy(anvil_chain, max_ttl=3_600)
    funder = Account.create()
    anvil_chain.rpc.request("anvil_setBalance", [funder.address, hex(10**20)])
    return registry.address, funder.key.to_0x_hex()


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch) -> tuple[str, Chain]:
    """(coordinator URL, a chain whose clock the test moves), per backend."""
    if request.param == "embedded":
        name = f"driver-tests-{uuid.uuid4().hex[:8]}"
        return f"chainfence+embedded://{name}?timeout={TTL}", embedded_chain(name)[0]
    node, chain = request.getfixturevalue("anvil_node"), request.getfixturevalue("anvil_chain")
    address, key = request.getfixturevalue("anvil_tooz")
    monkeypatch.setenv("CHAINFENCE_TOOZ_DRIVER_KEY", key)
    host = node.url.split("://", 1)[1]
    url = f"chainfence+http://{host}?registry={address}&key_env=CHAINFENCE_TOOZ_DRIVER_KEY&timeout={TTL}&poll_latency=0.005"
    return url, chain


@pytest.fixture
def coordinators(backend):
    """A factory of started coordinators on the backend; all stopped after the test."""
    url, _ = backend
    started = []

    def make(member: bytes | None = None, *, url: str = url):
        coordinator = tooz_coordination.get_coordinator(url, member or uuid.uuid4().hex.encode())
        coordinator.start()
        started.append(coordinator)
        return coordinator

    yield make
    for coordinator in started:
        if coordinator.is_started:
            coordinator.stop()


def _name() -> bytes:
    return f"tooz/{uuid.uuid4().hex}".encode()


def test_a_lock_whose_heartbeat_stops_expires_and_the_next_holder_gets_a_higher_token(backend, coordinators, caplog):
    """No heartbeat for a ttl: the lease ends on-chain, another coordinator takes the lock with a higher
    fencing token, and the first one's lock knows it lost (is_still_owner, release, heartbeat: False)."""
    _, chain = backend
    name = _name()
    a, b = coordinators(), coordinators()
    first, second = a.get_lock(name), b.get_lock(name)
    assert first.acquire(blocking=False)
    assert not second.acquire(blocking=False)  # held: the registry refuses b's account
    chain.advance_time(TTL)  # a's heart never beat

    assert second.acquire(blocking=False)
    assert second.token > first.token
    assert not first.is_still_owner()
    with caplog.at_level(logging.WARNING, logger="chainfence.integrations.tooz"):
        a.heartbeat()  # finds the lease lost and drops it
    assert "heartbeat found the lease lost" in caplog.text
    assert first.token is None and not first.release()
    assert second.is_still_owner() and second.release()


def test_heartbeat_renews_held_leases_past_their_first_ttl(backend, coordinators, caplog):
    """The control: the same timeline with the coordinator's heartbeat in the middle. The lease outlives
    its first ttl, keeps its token, and another coordinator is refused until it is released."""
    _, chain = backend
    name = _name()
    a, b = coordinators(), coordinators()
    first, second = a.get_lock(name), b.get_lock(name)
    assert first.acquire(blocking=False)
    token = first.token
    chain.advance_time(5)
    with caplog.at_level(logging.WARNING, logger="chainfence.integrations.tooz"):
        assert a.heartbeat() == TTL / 2  # tooz's heart waits half of it: about four beats a ttl
        assert "late renewal" not in caplog.text  # renewed with 25 of 30 s left
        chain.advance_time(TTL - 10)
        assert a.heartbeat() == TTL / 2
    assert "late renewal" in caplog.text  # 10 of 30 s were left: a heart that beat too rarely
    chain.advance_time(TTL - 10)  # 45 s after the acquisition, 20 s after the last renewal

    assert not second.acquire(blocking=False)
    assert first.is_still_owner() and first.token == token
    assert first.release()
    assert second.acquire(blocking=False) and second.token > token
    assert second.release()


def test_a_lock_not_held_has_no_heartbeat_and_no_token(coordinators):
    lock = coordinators().get_lock(_name())
    assert not lock.heartbeat() and lock.token is None and not lock.is_still_owner() and not lock.release()


def test_members_hold_as_accounts_of_their_own(backend, coordinators):
    """accounts=member (default): each member id is its own account, the same one on every start;
    accounts=key: the key's own account, whatever the member id."""
    url, _ = backend
    a, b = coordinators(b"member-a"), coordinators(b"member-b")
    assert a.account != b.account
    again = coordinators(b"member-a")
    assert again.account == a.account
    keyed = coordinators(b"member-c", url=url + "&accounts=key")
    assert keyed.account not in (a.account, b.account, again.account)


def test_member_account_derivation_is_fixed():
    """The derivation is part of the URL contract: a member's account must not change between releases."""
    from eth_account import Account

    key = Account.from_key("0x" + "11" * 32)
    assert member_account(key, b"worker-1").address == member_account(key, b"worker-1").address
    assert member_account(key, b"worker-1").address != member_account(key, b"worker-2").address
    assert member_account(key, b"worker-1").address != key.address


@pytest.mark.parametrize(
    "query, message",
    [
        ("key=0x" + "11" * 32, "never carries a key"),
        ("private_key=abc", "never carries a key"),
        ("nonsense=1", "unknown option"),
        ("accounts=everyone", "accounts must be"),
        ("timeout=0", "timeout must be at least 1"),
        ("fund=lots", "fund must be an integer"),
        ("key_env=A&keystore=/k.json", "exclusive"),
    ],
)
def test_bad_urls_are_refused_before_anything_is_read(query, message):
    with pytest.raises(InvalidInput, match=message):
        tooz_coordination.get_coordinator(f"chainfence+http://127.0.0.1:1?{query}", b"m")


def test_the_embedded_chain_takes_no_registry_or_key():
    with pytest.raises(InvalidInput, match="deploys its own registry"):
        tooz_coordination.get_coordinator("chainfence+embedded://x?registry=0x" + "00" * 20, b"m")


def test_a_missing_key_or_registry_is_named_at_start(anvil_node, monkeypatch):
    host = anvil_node.url.split("://", 1)[1]
    monkeypatch.delenv("CHAINFENCE_PRIVATE_KEY", raising=False)
    monkeypatch.delenv("CHAINFENCE_REGISTRY", raising=False)
    with pytest.raises(InvalidInput, match=r"set \$CHAINFENCE_PRIVATE_KEY"):
        tooz_coordination.get_coordinator(f"chainfence+http://{host}", b"m").start()
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", "0x" + "11" * 32)
    with pytest.raises(InvalidInput, match="no registry"):
        tooz_coordination.get_coordinator(f"chainfence+http://{host}", b"m").start()


def test_an_unreachable_node_is_tooz_connection_error():
    coordinator = tooz_coordination.get_coordinator("chainfence+http://127.0.0.1:1?registry=0x" + "00" * 20, b"m")
    with pytest.raises(tooz_coordination.ToozConnectionError) as caught:
        coordinator.start()
    assert type(caught.value.__cause__).__name__ == "NodeUnreachable"


def test_the_control_two_coordinators_on_one_account_do_not_exclude_each_other(backend, coordinators):
    """Why accounts=member is the default: under accounts=key two coordinators are one holder, and the
    registry lets a holder acquire again (with a new token), so both "get" the lock; only the fencing
    token tells the first one it was superseded. Distinct members on the same URL are refused."""
    url, _ = backend
    name = _name()
    one, two = coordinators(url=url + "&accounts=key"), coordinators(url=url + "&accounts=key")
    first, second = one.get_lock(name), two.get_lock(name)
    assert first.acquire(blocking=False)
    assert second.acquire(blocking=False)  # no exclusion: the same account re-acquired
    assert second.token > first.token and not first.is_still_owner()
    assert second.release()

    a, b = coordinators(), coordinators()
    assert a.get_lock(name).acquire(blocking=False)
    assert not b.get_lock(name).acquire(blocking=False)


def test_a_stopped_node_is_tooz_connection_error_from_every_lock_call(monkeypatch):
    """With the node gone, each call that needs the chain raises tooz's ToozConnectionError (what tooz
    code catches) caused by chainfence's NodeUnreachable, never a raw web3 or requests exception."""
    from tests.support.anvil import Anvil, dev_keys

    node = Anvil().start()
    try:
        registry = Registry.deploy(Chain.connect(node.url, private_keys=dev_keys(1), timeouts=Timeouts(poll=0.005)))
        monkeypatch.setenv("CHAINFENCE_TOOZ_STOPPED_KEY", dev_keys(10)[8])
        host = node.url.split("://", 1)[1]
        url = f"chainfence+http://{host}?registry={registry.address}&key_env=CHAINFENCE_TOOZ_STOPPED_KEY"
        coordinator = tooz_coordination.get_coordinator(url, b"stopped")
        coordinator.start()
        held, free = coordinator.get_lock(b"stopped/held"), coordinator.get_lock(b"stopped/free")
        assert held.acquire(blocking=False)
    finally:
        node.stop()
    calls = {
        "acquire": lambda: free.acquire(blocking=False),
        "release": held.release,
        "lock.heartbeat": held.heartbeat,
        "is_still_owner": held.is_still_owner,
        "break_": held.break_,
        "coordinator.heartbeat": coordinator.heartbeat,
        "start": lambda: tooz_coordination.get_coordinator(url, b"another").start(),
    }
    for what, call in calls.items():
        with pytest.raises(tooz_coordination.ToozConnectionError) as caught:
            call()
        assert type(caught.value.__cause__).__name__ == "NodeUnreachable", what


def test_a_keystore_key_and_a_timeout_above_the_registry_s_max(anvil_node, anvil_tooz, tmp_path, monkeypatch):
    """keystore=PATH (password from the environment) signs as the key it holds; a timeout the registry
    cannot grant is refused at start, before anything is sent."""
    from eth_account import Account

    address, key = anvil_tooz
    keystore = tmp_path / "key.json"
    keystore.write_text(json.dumps(Account.encrypt(key, "pw", kdf="pbkdf2", iterations=2)))
    monkeypatch.setenv("CHAINFENCE_KEYSTORE_PASSWORD", "pw")
    host = anvil_node.url.split("://", 1)[1]
    url = f"chainfence+http://{host}?registry={address}&keystore={keystore}&accounts=key"
    coordinator = tooz_coordination.get_coordinator(url, b"keystore")
    coordinator.start()
    try:
        assert coordinator.account == Account.from_key(key).address
    finally:
        coordinator.stop()
    monkeypatch.setenv("CHAINFENCE_KEYSTORE_PASSWORD", "wrong")
    with pytest.raises(InvalidInput, match="cannot open keystore"):
        tooz_coordination.get_coordinator(url, b"keystore").start()
    with pytest.raises(InvalidInput, match="above the registry's max ttl"):
        tooz_coordination.get_coordinator(f"chainfence+embedded://max?timeout={86_400 + 1}", b"m").start()


def test_stop_releases_what_the_coordinator_holds(coordinators):
    """tooz's drivers release on stop: another coordinator gets the lock at once, the stopped one's lock
    holds nothing (no token, nothing to renew, not an owner)."""
    name = _name()
    a, b = coordinators(), coordinators()
    lock = a.get_lock(name)
    assert lock.acquire(blocking=False)
    a.stop()
    assert lock.token is None and not lock.heartbeat() and not lock.is_still_owner() and not lock.release()
    assert b.get_lock(name).acquire(blocking=False)


def test_a_timed_acquire_of_a_held_lock_returns_false_and_spends_nothing(backend, coordinators):
    """acquire(blocking=0.2) while another coordinator holds the lock: False at the deadline, and the
    waiter's account sent nothing (its nonce is unchanged). Once the holder's lease has expired, a
    waiting acquire takes it with a higher token."""
    _, chain = backend
    name = _name()
    a, b = coordinators(), coordinators()
    first, second = a.get_lock(name), b.get_lock(name)
    assert first.acquire(blocking=False)
    nonce = chain.rpc.nonce(b.account)
    assert not second.acquire(blocking=0.2)  # the outcome, not the time, is what is checked
    assert chain.rpc.nonce(b.account) == nonce
    chain.advance_time(TTL)
    assert second.acquire(timeout=60)  # 60 s: a safety net; the lease has already expired
    assert second.token > first.token
