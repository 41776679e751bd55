"""`chainfence node` restarts and crashes: the registry stays, lost history is detected, never trusted.

- Any number of clean restarts (Ctrl-C) keeps the registry, the deployment
  file and the token counter. (anvil rebuilds block 0 on every state reload,
  sometimes with a new hash: a registry is identified by its deployment
  block, never by the genesis block.)
- A SIGKILL loses what happened since the last state save. The tests run
  the node with ``--state-interval 3600`` so that the loss is certain (the
  only save is the clean stop before): an acquisition made after it is
  lost, its token number is issued again to someone else, and every party
  that saw the lost token refuses to believe the new chain: strict guards at
  once, any guard on open, the SDK on its next read, the node on restart.
"""

from __future__ import annotations

import json

import pytest

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence.errors import ChainRolledBack
from chainfence.testing.anvil import dev_keys, free_port
from tests.integration.test_cli_node import Node, as_json, run


class SlowSavingNode(Node):
    """`chainfence node` that saves its state only when stopped cleanly."""

    def start(self) -> dict:
        import subprocess
        import sys
        import threading

        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "chainfence",
                "node",
                "--port",
                str(self.port),
                "--json",
                "--state-interval",
                "3600",
            ],
            cwd=self.workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.process.stdout.readline()))
        reader.start()
        reader.join(60)
        if not line or not line[0]:
            self.process.kill()
            raise AssertionError(f"node did not start: {self.process.stderr.read()}")
        self.info = json.loads(line[0])
        return self.info


def test_any_number_of_clean_restarts_keeps_the_registry_and_its_tokens(tmp_path):
    node = Node(tmp_path, free_port())
    first = node.start()
    deployment = (tmp_path / ".chainfence" / "deployment.json").read_text()
    tokens = []
    try:
        for restart in range(4):
            tokens.append(as_json(run(tmp_path, "acquire", f"r/{restart}", "--ttl", "3600", "--json"))["token"])
            assert node.stop() == 0
            info = node.start()
            assert info["reused"] is True, f"restart {restart + 1} deployed a new registry"
            assert info["registry"] == first["registry"] and info["latest_token"] == tokens[-1]
            assert info["lost_tokens"] == 0
            assert (tmp_path / ".chainfence" / "deployment.json").read_text() == deployment
    finally:
        node.stop()
    assert tokens == [1, 2, 3, 4], "the counter never started again"


@pytest.fixture
def crashed(tmp_path):
    """A node, a lease acquired after its last save, guards and an SDK that saw it; then SIGKILL and a
    restart: the acquisition is gone. Yields what the test needs."""
    node = SlowSavingNode(tmp_path, free_port())
    node.start()
    assert node.stop() == 0  # the save that the crash falls back to
    info = node.start()

    def party(key_index):  # each party in a process of its own: its own Chain, its own memory
        return Registry.at(
            Chain.connect(info["rpc_url"], private_key=dev_keys(3)[key_index], timeouts=Timeouts(poll=0.01)),
            info["registry"],
        )

    alice, bob, registry = party(1), party(2), party(0)
    lost = alice.acquire("reports/daily", ttl=3600)
    strict = Guard(registry, path=tmp_path / "strict.sqlite", mode="strict")
    marks = Guard(registry, path=tmp_path / "marks.sqlite")
    strict.check("reports/daily", lost.token)
    marks.check("reports/daily", lost.token)
    assert alice.lease_of("reports/daily").holder == alice.sender  # the SDK saw it
    journal = tmp_path / ".chainfence" / "node.json"
    while json.loads(journal.read_text())["highest_token"] < lost.token:  # the node has seen it too
        pass
    node.kill()
    restarted = node.start()
    try:
        yield {
            "node": restarted,
            "registry": registry,
            "alice": alice,
            "bob": bob,
            "lost": lost,
            "strict": strict,
            "marks": marks,
            "path": tmp_path,
        }
    finally:
        strict.close()
        marks.close()
        node.stop()


def test_the_restarted_node_says_what_was_lost(crashed):
    assert crashed["node"]["reused"] is True and crashed["node"]["latest_token"] == crashed["lost"].token - 1
    assert crashed["node"]["lost_tokens"] == 1


def test_a_strict_guard_refuses_the_reissued_number(crashed):
    reissued = crashed["bob"].acquire("reports/daily", ttl=3600)
    assert reissued.token == crashed["lost"].token, "the same number, another holder"
    with pytest.raises(ChainRolledBack):
        crashed["strict"].check("reports/daily", reissued.token)
    with pytest.raises(ChainRolledBack):  # latched: every token, every resource, from now on
        crashed["strict"].check("reports/daily", reissued.token)


def test_a_guard_opened_on_the_store_refuses_everything(crashed):
    reissued = crashed["bob"].acquire("reports/daily", ttl=3600)
    service = Registry.at(Chain.connect(crashed["node"]["rpc_url"]), crashed["registry"].address)  # a restarted service
    with Guard(service, path=crashed["path"] / "fresh.sqlite") as fresh:
        assert fresh.check("reports/daily", reissued.token) == reissued.token, "a new store trusts the new chain"
    crashed["marks"].close()
    with Guard(service, path=crashed["path"] / "marks.sqlite") as reopened:
        with pytest.raises(ChainRolledBack, match="accepted token"):
            reopened.check("reports/daily", reissued.token)


def test_control_a_mark_guard_that_stays_open_accepts_the_reissued_number_at_its_mark(crashed):
    """Mark mode answers at the mark without the chain: it cannot see the rollback until its next chain
    read (a new epoch, a restart). That is its documented window, and why the latch exists."""
    reissued = crashed["bob"].acquire("reports/daily", ttl=3600)
    assert crashed["marks"].check("reports/daily", reissued.token) == reissued.token


def test_the_sdk_that_saw_the_lost_lease_refuses_the_new_chain(crashed):
    with pytest.raises(ChainRolledBack):
        crashed["alice"].latest_token()  # below the token it saw issued
    crashed["bob"].acquire("reports/daily", ttl=3600)
    with pytest.raises(ChainRolledBack):
        crashed["alice"].lease_of("reports/daily")  # its token number, another holder


def test_a_state_file_torn_by_a_crash_during_a_save_falls_back_to_the_last_complete_save(tmp_path):
    """anvil rewrites its state file in place; a SIGKILL during a save leaves it empty or cut short,
    and anvil refuses to start on it. The node starts from the last complete save instead, and says so.
    (The tear is made by hand after the kill: the same bytes a crash mid-save leaves, without racing
    the save for them.)"""
    node = Node(tmp_path, free_port())
    first = node.start()
    token = as_json(run(tmp_path, "acquire", "before-the-tear", "--ttl", "3600", "--json"))["token"]
    assert node.stop() == 0  # a clean stop saves, and the node keeps that save aside
    state = tmp_path / ".chainfence" / "anvil-state.json"
    assert (tmp_path / ".chainfence" / "anvil-state.last-complete.json").read_bytes() == state.read_bytes()
    state.write_bytes(state.read_bytes()[: len(state.read_bytes()) // 3])  # torn mid-save
    info = node.start()
    try:
        assert info["reused"] is True and info["registry"] == first["registry"] and info["latest_token"] == token
        assert list((tmp_path / ".chainfence").glob("anvil-state.torn-*.json")), "the torn file is kept"
        assert any("torn" in notice for notice in info["notices"]), "and the node says so"
    finally:
        node.stop()


def test_control_anvil_refuses_to_start_on_a_torn_state_file(tmp_path):
    """What `chainfence node` did before it kept a complete save aside: anvil exits at once."""
    import subprocess

    from tests.support.anvil import anvil_binary

    state = tmp_path / "anvil-state.json"
    state.write_bytes(b'{"block": {"number": "0x')
    done = subprocess.run(
        [anvil_binary(), "--port", str(free_port()), "--state", str(state)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "state" in done.stderr
