"""Chain.connect against a real anvil node started by the suite on a free loopback port."""

from __future__ import annotations

import time

import pytest

from chainfence import Chain, Registry, Timeouts
from chainfence.errors import InvalidInput, NodeUnreachable, NotSupported, UnknownAccount
from tests.support.anvil import Anvil, dev_keys, free_port


def test_the_node_is_local(anvil_node):
    assert anvil_node.url.startswith("http://127.0.0.1:")


def test_connect_signs_locally_with_the_given_keys(anvil_node, on_anvil):
    keys = dev_keys(3)
    chain = Chain.connect(anvil_node.url, private_key=keys[2], timeouts=Timeouts(poll=0.005))
    assert chain.accounts == [on_anvil.chain.accounts[2]]
    assert chain.is_dev and chain.chain_id == 31337
    lease = Registry.at(chain, on_anvil.address).acquire("signed/locally", ttl=30)
    assert lease.holder == chain.accounts[0]


def test_an_unreachable_node_is_a_typed_error_and_fast(monkeypatch):
    """Refused connections are not retried with backoff: at most the SDK's one read retry, and no
    sleep in between (counted, not timed, so a loaded machine cannot make it pass or fail)."""
    from chainfence._node import lean_http
    from chainfence._node.rpc import _READ_ATTEMPTS

    attempts: list[tuple[str, int]] = []
    sleeps: list[float] = []
    connect = lean_http._plain_connection  # how the SDK's transport opens each plain-http connection it tries

    def counted_connect(host, port, *args, **kwargs):
        attempts.append((host, port))
        return connect(host, port, *args, **kwargs)

    real_sleep = time.sleep

    def recorded_sleep(seconds):
        sleeps.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(lean_http, "_plain_connection", counted_connect)
    monkeypatch.setattr(time, "sleep", recorded_sleep)
    with pytest.raises(NodeUnreachable, match="127.0.0.1"):
        Chain.connect(f"http://127.0.0.1:{free_port()}", timeouts=Timeouts(request=2))
    assert 1 <= len(attempts) <= _READ_ATTEMPTS, attempts
    assert sleeps == [], "no backoff between attempts"


@pytest.mark.parametrize("url", ["127.0.0.1:8545", "ws://127.0.0.1:8545", "", None])
def test_a_malformed_url_is_refused(url):
    with pytest.raises(InvalidInput):
        Chain.connect(url)


def test_a_bad_private_key_is_refused_without_echoing_it(anvil_node):
    secret = "0x" + "zz" * 32
    with pytest.raises(InvalidInput) as refused:
        Chain.connect(anvil_node.url, private_key=secret)
    assert secret not in str(refused.value)


def test_a_chain_without_keys_reads_but_cannot_send(anvil_node, on_anvil):
    reader = Chain.connect(anvil_node.url)
    registry = Registry.at(reader, on_anvil.address)
    assert registry.latest_token() == on_anvil.latest_token()
    assert registry.sender is None
    with pytest.raises(UnknownAccount):
        registry.acquire("r", ttl=5)


def test_a_nonce_taken_by_another_sender_of_the_same_key_is_resynchronised(anvil_node, on_anvil, caplog):
    """Two Chain objects share one key (two processes, say): the second one's cached nonce goes stale,
    the node refuses it, and the SDK resynchronises once and sends."""
    key = dev_keys(5)[4]
    first = Registry.at(Chain.connect(anvil_node.url, private_key=key, timeouts=Timeouts(poll=0.005)), on_anvil.address)
    second = Registry.at(
        Chain.connect(anvil_node.url, private_key=key, timeouts=Timeouts(poll=0.005)), on_anvil.address
    )
    second.acquire("n/0", ttl=5)  # caches its next nonce
    first.acquire("n/1", ttl=5)  # uses that nonce behind second's back
    caplog.set_level("DEBUG", logger="chainfence.chain")
    lease = second.acquire("n/2", ttl=5)  # stale cache -> "nonce too low" -> resync -> sent
    assert lease.token == on_anvil.latest_token()
    assert any("resynchronising" in record.getMessage() for record in caplog.records)


def test_time_travel_is_refused_on_a_chain_that_is_not_a_dev_chain(anvil_node):
    chain = Chain.connect(anvil_node.url)
    chain._dev = None  # what a testnet or mainnet node looks like to the SDK
    for call in (lambda: chain.advance_time(5), chain.snapshot, lambda: chain.set_next_block_time(2**40)):
        with pytest.raises(NotSupported):
            call()


def test_an_expiry_beyond_40_bits_is_refused_not_truncated(on_anvil):
    """Near the end of 40-bit time (year 36,812; anvil gets there, eth-tester stops at 3017) an
    expiry that would not fit reverts with RegistryOverflow, on acquire and on renew, rather than
    spilling into the flag or token bits."""
    from chainfence.errors import RegistryOverflow

    chain = on_anvil.chain
    alice = on_anvil.connect(chain.accounts[1])
    chain.set_next_block_time(2**40 - 1_000)
    lease = alice.acquire("far/future", ttl=100)
    assert lease.expires_at == 2**40 - 900
    with pytest.raises(RegistryOverflow):
        lease.renew(ttl=3_600)
    with pytest.raises(RegistryOverflow):
        alice.acquire("far/future2", ttl=3_600)
    assert on_anvil.lease_of("far/future").token == lease.token


def test_two_nodes_started_on_the_same_free_port_at_once_each_get_their_own(anvil_node, monkeypatch):
    """Two processes (xdist workers) that pick the same free port at once: the second anvil fails to bind
    and exits, but until it does the first one answers on that port. Starting must not take that answer
    for its own node: it retries on another port, and each caller has a node of its own."""
    from chainfence.testing import anvil as helpers

    ports = iter([anvil_node.port])
    real_free_port = helpers.free_port
    monkeypatch.setattr(helpers, "free_port", lambda: next(ports, None) or real_free_port())
    second = Anvil()
    with second:
        assert second.port != anvil_node.port and second.alive()
        assert helpers._listener_is(second.process.pid, second.port)


def test_control_a_connection_alone_takes_the_other_workers_node_for_its_own(anvil_node, monkeypatch):
    """The control: readiness judged by a connection, as before: the second caller gets the first node's
    port while its own anvil dies of the taken port."""
    from chainfence.testing import anvil as helpers

    owns = helpers._listener_is
    monkeypatch.setattr(helpers, "free_port", lambda: anvil_node.port)
    monkeypatch.setattr(helpers, "_listener_is", lambda pid, port: True)
    second = Anvil()
    # Its own process has not failed yet (here: one that never binds), the first node answers the port.
    monkeypatch.setattr(second, "_args", lambda: ["sleep", "600"])
    try:
        second.start()
        assert second.port == anvil_node.port, "it took the first node's port for its own"
        assert not owns(second.process.pid, second.port), "and the node answering there is not its process"
    finally:
        second.stop()


def test_a_stopped_node_leaves_no_socket_file_and_a_killed_one_is_cleared_at_the_next_start():
    """anvil leaves its ``--ipc`` socket file behind when it exits: ``stop()`` removes it (a suite run
    used to leave hundreds). The control, ``kill()`` (a crash), leaves it, and the next start on that
    path removes it because nobody listens on it."""
    from pathlib import Path

    from chainfence.testing.anvil import remove_dead_socket
    from tests.support.anvil import ipc_path

    path = ipc_path()
    node = Anvil(ipc=path).start()
    assert Path(path).is_socket()
    node.stop()
    assert not Path(path).exists(), "stop() removes the socket anvil left"

    crashed = Anvil(ipc=path).start()
    crashed.kill()
    assert Path(path).is_socket(), "control: anvil itself leaves its socket file behind"
    remove_dead_socket(path)  # what `chainfence node` does before each start
    assert not Path(path).exists()
    with Anvil(ipc=path) as again:
        assert Path(again.ipc_path).is_socket()
    assert not Path(path).exists()


def evicting(node) -> None:
    """Mine enough blocks that anvil moves states out of memory onto disk."""
    chain = Chain.connect(node.url)
    for _ in range(1_500):
        chain.rpc.transport.request("evm_mine", [])


@pytest.mark.parametrize("end", ["stop", "kill"])
def test_an_anvil_leaves_no_state_cache_behind(tmp_path, end):
    """anvil persists the states it evicts from memory under ``~/.foundry/anvil/tmp`` and never removes
    them (28 GB of them on the development machine after a day of test sessions): the node is given a
    cache directory of its own, removed when it stops or is killed."""
    import os

    node = Anvil()
    node.env = {**os.environ, "HOME": str(tmp_path)}
    with node:
        cache = node._cache
        assert cache is not None and os.path.isdir(cache)
        evicting(node)
        assert os.listdir(cache), "anvil persisted evicted states there"
        if end == "kill":
            node.kill()
    assert not os.path.exists(cache), "the node's cache directory is removed"
    assert not list((tmp_path / ".foundry" / "anvil" / "tmp").glob("*")), "nothing under ~/.foundry"


def test_control_an_anvil_left_to_its_default_cache_leaves_a_directory_in_home(tmp_path, monkeypatch):
    import os

    from chainfence.testing.anvil import AnvilProcess

    real = AnvilProcess._args

    def without_cache_path(self):
        args = real(self)
        at = args.index("--cache-path")
        return args[:at] + args[at + 2 :]

    monkeypatch.setattr(AnvilProcess, "_args", without_cache_path)
    node = Anvil()
    node.env = {**os.environ, "HOME": str(tmp_path)}
    with node:
        evicting(node)
    assert list((tmp_path / ".foundry" / "anvil" / "tmp").glob("anvil-state-*")), "anvil's default leaves one"
