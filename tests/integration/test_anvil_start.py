"""Starting anvil (``AnvilProcess``, ``chainfence node``): the npm wrapper, wrappers that fork, and failures.

The path a user who ran ``npm install @foundry-rs/anvil`` finds first is
``node_modules/.bin/anvil``: a node script that starts the platform package's
native binary as its child. The listening socket is then not the started
process's; a start must neither mistake that for another node on the port
nor, when it gives up, leave the child anvil running. Every start failure
names its cause, and one that cannot succeed fails at once.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from chainfence import Chain
from chainfence.errors import AnvilNotFound, NodeUnreachable
from chainfence.testing import anvil as helpers
from chainfence.testing.anvil import AnvilProcess, find_anvil
from tests.integration.test_cli_node import Node, anvil_pid
from tests.support.anvil import ROOT, Anvil, free_port
from tests.support.sequencer import wait_until

PLATFORM_PACKAGE = helpers._platform_package()
WRAPPER = ROOT / "node_modules" / ".bin" / "anvil"
NATIVE = ROOT / "node_modules" / "@foundry-rs" / PLATFORM_PACKAGE / "bin" / "anvil"


def group_members(group: int) -> list[int]:
    """Live processes (zombies aside) of process group ``group``, read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat_line[stat_line.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == group:
            members.append(int(entry.name))
    return members


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def forking_wrapper(directory: Path) -> Path:
    """A wrapper that runs anvil as its child rather than exec'ing it, as the npm wrapper and many shims do
    (the status line keeps the shell from exec'ing its last command)."""
    return script(directory / "anvil-shim", f'"{NATIVE}" "$@"\nstatus=$?\nexit $status\n')


@pytest.fixture
def started(monkeypatch):
    """The processes each start launched (their pids are their process groups)."""
    pids: list[int] = []
    popen = subprocess.Popen

    def recorded(*args, **kwargs):
        process = popen(*args, **kwargs)
        pids.append(process.pid)
        return process

    monkeypatch.setattr(helpers.subprocess, "Popen", recorded)
    return pids


# -- the npm package's wrapper ---------------------------------------------------------------------


def test_the_npm_wrapper_in_chainfence_anvil_runs_the_native_binary_it_ships(monkeypatch):
    monkeypatch.setenv("CHAINFENCE_ANVIL", str(WRAPPER))
    node = AnvilProcess()
    assert Path(node.binary).resolve() == NATIVE.resolve(), "resolved before anything starts"
    with node:
        assert Path(f"/proc/{node.process.pid}/exe").resolve() == NATIVE.resolve()
        assert Chain.connect(node.url).chain_id == 31337


def test_the_npm_wrapper_first_on_path_runs_the_native_binary_it_ships(monkeypatch, tmp_path):
    node_js = shutil.which("node")
    assert node_js is not None
    monkeypatch.delenv("CHAINFENCE_ANVIL", raising=False)
    monkeypatch.setattr(helpers, "_search_roots", lambda start: [tmp_path])  # no node_modules to find first
    monkeypatch.setenv("PATH", os.pathsep.join([str(WRAPPER.parent), str(Path(node_js).parent)]))
    assert Path(shutil.which("anvil") or "").resolve() == WRAPPER.resolve(), "the wrapper is what PATH names"
    assert Path(find_anvil()).resolve() == NATIVE.resolve()
    with AnvilProcess() as node:
        assert Chain.connect(node.url).chain_id == 31337


def test_chainfence_node_runs_with_the_npm_wrapper_in_chainfence_anvil(monkeypatch, tmp_path):
    monkeypatch.setenv("CHAINFENCE_ANVIL", str(WRAPPER))
    node = Node(tmp_path, free_port())
    info = node.start()
    try:
        assert info["rpc_url"] == f"http://127.0.0.1:{node.port}"
        assert Path(f"/proc/{anvil_pid(node)}/exe").resolve() == NATIVE.resolve()
    finally:
        assert node.stop() == 0


def test_a_wrapper_whose_native_binary_is_missing_is_refused_at_once_naming_it(tmp_path, started):
    """An npm install that lacks the platform package (an `--omit=optional` install, another platform's
    node_modules): refused before anything starts, naming the binary to point at; with the package
    installed beside it, the same wrapper resolves to its binary."""
    package = tmp_path / "node_modules" / "@foundry-rs" / "anvil"
    package.mkdir(parents=True)
    for name in ("bin.mjs", "const.mjs", "package.json"):
        shutil.copy(WRAPPER.resolve().parent / name, package / name)
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "anvil").symlink_to("../@foundry-rs/anvil/bin.mjs")
    with pytest.raises(AnvilNotFound) as refused:
        AnvilProcess(str(bin_dir / "anvil"))
    assert f"node_modules/@foundry-rs/{PLATFORM_PACKAGE}/bin/anvil" in str(refused.value)
    assert "CHAINFENCE_ANVIL" in str(refused.value) and started == []

    (package.parent / PLATFORM_PACKAGE).symlink_to(NATIVE.parents[1], target_is_directory=True)
    assert AnvilProcess(str(bin_dir / "anvil")).binary == str(package.parent / PLATFORM_PACKAGE / "bin" / "anvil")


# -- a wrapper that forks: its whole process group is the node -------------------------------------


def test_a_wrapper_that_forks_anvil_starts_and_stops_with_its_whole_process_group(tmp_path):
    node = AnvilProcess(str(forking_wrapper(tmp_path)))
    node.start()
    group = node.process.pid
    assert len(group_members(group)) == 2, "the shell and the anvil it forked"
    assert Chain.connect(node.url).chain_id == 31337
    node.stop()
    # No process of the group (the shell and the anvil it forked) is left. The port is not checked: once
    # freed, another worker's node may take it (a loaded run saw one listening there, the group empty).
    assert group_members(group) == []


def test_a_killed_wrapper_takes_the_anvil_it_forked_with_it(tmp_path):
    node = AnvilProcess(str(forking_wrapper(tmp_path)))
    node.start()
    group = node.process.pid
    node.kill()
    # No process of the group (the shell and the anvil it forked) is left. The port is not checked: once
    # freed, another worker's node may take it (a loaded run saw one listening there, the group empty).
    assert group_members(group) == []


def test_control_killing_only_the_started_process_orphans_the_anvil_it_forked(tmp_path):
    """The naive stop (SIGKILL to the started process alone, as `kill()` did): the forked anvil lives on,
    listening on the node's port, with nobody left to stop it."""
    node = AnvilProcess(str(forking_wrapper(tmp_path)))
    node.start()
    group = node.process.pid
    try:
        node.process.kill()
        node.process.wait()
        assert group_members(group), "the forked anvil outlived its wrapper"
        assert accepts(node.port), "and still listens on the node's port"
    finally:
        os.killpg(group, signal.SIGKILL)
        wait_until(lambda: not group_members(group), "the orphan is gone")
        node.process.stderr.close()
        node.process = None


# -- failures: at once, with their cause, leaving nothing behind -----------------------------------


def test_an_anvil_that_exits_fails_the_start_at_once_with_its_exit_code_and_stderr(started):
    node = Anvil(extra_args=("--no-such-flag",))
    with pytest.raises(NodeUnreachable) as failed:
        node.start()
    message = str(failed.value)
    assert "exited with code 2" in message and "unexpected argument '--no-such-flag'" in message, message
    assert len(started) == 1, "no retry: another port would not change the arguments"
    assert group_members(started[0]) == []


def test_a_start_that_times_out_says_so_and_leaves_no_process_of_its_group(tmp_path, started):
    """A binary that never listens, and forks a child that ignores SIGINT (as a non-interactive shell's
    background jobs do): the failure names the check that failed, and nothing of the group survives."""
    never = script(tmp_path / "never-listens", "sleep 600 &\nwait\n")
    node = AnvilProcess(str(never))
    with pytest.raises(NodeUnreachable) as failed:
        node.start(timeout=1)
    message = str(failed.value)
    assert re.search(r"accepted no connection on 127\.0\.0\.1:\d+ within 1 s", message), message
    assert "nothing on stderr" in message
    assert len(started) == 1
    assert group_members(started[0]) == []


def test_control_a_start_that_stops_only_the_started_process_leaves_its_child_behind(tmp_path):
    """The naive failure path (SIGINT, then SIGKILL, to the started process alone): its child lives on."""
    never = script(tmp_path / "never-listens", "sleep 600 &\nwait\n")
    node = AnvilProcess(str(never))
    node.process = subprocess.Popen(  # started as `start` starts it, in a group of its own
        [str(never)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    group = node.process.pid
    wait_until(lambda: len(group_members(group)) == 2, "the shell forked its child")
    try:
        node.process.send_signal(signal.SIGINT)
        node.process.wait(timeout=60)
        assert group_members(group), "the child outlived the started process"
    finally:
        os.killpg(group, signal.SIGKILL)
        wait_until(lambda: not group_members(group), "the orphan is gone")
        node.process.stderr.close()
        node.process = None
