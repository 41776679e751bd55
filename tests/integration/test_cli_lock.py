"""`chainfence lock NAME -- CMD`: a real child process under a kept-alive lease, on a real anvil.

The child (tests/support/lock_child.py) reports its environment, works
until the test tells it to finish, and reports a SIGTERM with the chain
time at that moment. The stalled-node tests run the CLI in this process
(its main thread, so it can take signals) with its keep-alive clock
replaced by one the test moves in step with anvil's logical clock; the
others run `python -m chainfence lock` as a user would.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chainfence import Chain, Registry, Timeouts, cli
from chainfence.cli import lock as _cli_lock
from chainfence.lease import LeaseStatus
from tests.support.anvil import Anvil, dev_keys
from tests.support.lock_child import finish
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import wait_until
from tests.support.virtual_time import WatchedClock

ROOT = Path(__file__).resolve().parents[2]
CHILD = str(ROOT / "tests" / "support" / "lock_child.py")
TTL = 30


@pytest.fixture(scope="module")
def node():
    with Anvil(logical_clock=True) as anvil:
        yield anvil


@pytest.fixture(scope="module")
def direct(node):
    chain = Chain.connect(node.url, private_keys=dev_keys(4), timeouts=Timeouts(poll=0.005))
    return chain, Registry.deploy(chain, max_ttl=3_600)


def lock_process(url: str, registry: Registry, *args: str, key: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "CHAINFENCE_PRIVATE_KEY": key or dev_keys(4)[1], "PYTHONPATH": str(ROOT / "src")}
    for name in ("CHAINFENCE_RPC_URL", "CHAINFENCE_REGISTRY", "CHAINFENCE_DEPLOYMENT"):
        env.pop(name, None)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chainfence",
            "lock",
            *args[:1],
            "--rpc-url",
            url,
            "--registry",
            registry.address,
            *args[1:],
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def read(path: Path) -> dict:
    wait_until(path.exists, f"{path.name} written")
    return json.loads(path.read_text())


def test_the_command_runs_with_the_lease_in_its_environment_and_its_exit_code_comes_back(node, direct, tmp_path):
    chain, registry = direct
    proc = lock_process(node.url, registry, "lock/normal", "--ttl", "30", "--", sys.executable, CHILD, str(tmp_path))
    started = read(tmp_path / "started.json")["env"]
    holder = chain.accounts[1]
    lease = registry.lease_of("lock/normal")
    assert lease is not None and lease.holder == holder
    assert started["CHAINFENCE_RESOURCE"] == "lock/normal" and started["CHAINFENCE_TOKEN"] == str(lease.token)
    assert started["CHAINFENCE_HOLDER"] == holder and started["CHAINFENCE_REGISTRY"] == registry.address
    assert started["CHAINFENCE_CHAIN_ID"] == str(chain.chain_id) and started["CHAINFENCE_RPC_URL"] == node.url
    assert started["CHAINFENCE_PRIVATE_KEY"] == dev_keys(4)[1], "the key stays where the CLI read it"
    finish(tmp_path, 3)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    last = registry.last_lease("lock/normal")
    assert last.token == lease.token and last.status is LeaseStatus.RELEASED


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_chainfence_goes_to_the_command_and_the_lease_is_released(node, direct, tmp_path, sig):
    """The child handles SIGTERM (exit 143); SIGINT ends it (a Python KeyboardInterrupt: 128 + 2)."""
    chain, registry = direct
    resource = f"lock/forward-{sig.name}"
    proc = lock_process(node.url, registry, resource, "--", sys.executable, CHILD, str(tmp_path))
    read(tmp_path / "started.json")
    proc.send_signal(sig)
    if sig == signal.SIGTERM:
        assert read(tmp_path / "terminated.json")["signal"] == signal.SIGTERM
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert registry.last_lease(resource).status is LeaseStatus.RELEASED


def test_a_held_resource_exits_103_and_the_command_never_runs(node, direct, tmp_path):
    chain, registry = direct
    registry.connect(chain.accounts[2]).acquire("lock/held", ttl=600)
    proc = lock_process(node.url, registry, "lock/held", "--", sys.executable, CHILD, str(tmp_path))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == cli.lock_exit_code(cli.EXIT_HELD), err
    assert not (tmp_path / "started.json").exists()


def test_a_command_s_own_exit_3_and_a_held_resource_exit_apart(node, direct, tmp_path):
    """Issue 27: `lock` exited 3 both when its command exited 3 and when the resource was held; its own ends
    now exit 100 + their code (103 held), the command's code passes through."""
    chain, registry = direct
    ran = tmp_path / "ran"
    command = ["--", "sh", "-c", f'echo ran >> "{ran}"; exit 3']
    own = lock_process(node.url, registry, "lock/apart", "--json", *command)
    out, err = own.communicate(timeout=120)
    assert own.returncode == 3 and ran.read_text() == "ran\n", err
    registry.connect(chain.accounts[2]).acquire("lock/apart", ttl=600)
    held = lock_process(node.url, registry, "lock/apart", "--json", *command)
    out, err = held.communicate(timeout=120)
    assert held.returncode == 103, err  # on main: 3, the command's own exit 3 above
    assert cli.lock_exit_code(cli.EXIT_HELD) == 103
    assert ran.read_text() == "ran\n", "the command did not run again"
    document = json.loads(out.splitlines()[-1])
    assert (document["error"], document["exit_code"]) == ("LeaseHeld", 103)


@pytest.mark.parametrize(
    "code, ending",
    [
        ("import sys; print('hi', flush=True); sys.exit(3)", {"exit_code": 3, "signal": None}),
        (
            "import os, signal; print('hi', flush=True); os.kill(os.getpid(), signal.SIGTERM)",
            {"exit_code": 143, "signal": "SIGTERM"},
        ),
    ],
    ids=["exit-3", "SIGTERM"],
)
def test_json_says_last_how_the_command_ended(node, direct, tmp_path, code, ending):
    """Issue 27: `lock --json` printed nothing once its command ended (scripts tested for an empty stdout);
    its last line on stdout now says how it ended, under which lease, and what lock exits with."""
    chain, registry = direct
    resource = f"lock/json-end-{ending['exit_code']}"
    proc = lock_process(node.url, registry, resource, "--json", "--", sys.executable, "-c", code)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == ending["exit_code"], err
    *commands, last = out.splitlines()
    assert commands == ["hi"], "the command's own output comes first, as it wrote it"
    document = json.loads(last)  # on main: "hi" was the last line
    lease = registry.last_lease(resource)
    assert lease.status is LeaseStatus.RELEASED
    assert document == {
        "resource": resource,
        "token": lease.token,
        "holder": lease.holder,
        "command": {"pid": document["command"]["pid"], **ending},
        "exit_code": ending["exit_code"],
    }
    assert isinstance(document["command"]["pid"], int) and document["command"]["pid"] > 0


#: A command that says each SIGINT and SIGTERM it gets on stdout and goes on (ignoring both), or, with
#: "dies-on-term", dies of its SIGTERM once it said it.
STUBBORN = """
import os, signal, sys
dies = sys.argv[1] == "dies-on-term"
def said(signum, frame):
    name = signal.Signals(signum).name
    print(name, flush=True)
    if dies and signum == signal.SIGTERM:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
signal.signal(signal.SIGINT, said)
signal.signal(signal.SIGTERM, said)
print("ready", flush=True)
while True:
    signal.pause()
"""


class Lines:
    """The lines of a process's stdout, as they come (a thread reads them), each waited for in turn."""

    def __init__(self, stream):
        import queue

        self.queue: queue.Queue[str | None] = queue.Queue()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def next(self) -> str | None:
        return self.queue.get(timeout=120)  # a bound for a failing run, never a synchronisation

    def rest(self) -> list[str]:
        self.thread.join(120)
        found = []
        while not self.queue.empty():
            line = self.queue.get()
            if line is not None:
                found.append(line)
        return found


@pytest.mark.parametrize("presses", [2, 3], ids=["twice-SIGTERM", "thrice-SIGKILL"])
def test_a_second_ctrl_c_stops_a_command_that_ignores_the_first(node, direct, tmp_path, presses):
    """Issue 27: each SIGINT to `lock` was forwarded and nothing more, so a command that ignores SIGINT ran on
    however often Ctrl-C was pressed. The first is forwarded; the second stops the command's session (SIGTERM,
    SIGKILL after --grace); a third SIGKILLs it at once. Each press waits for the command to say what the one
    before did (--grace 600: a SIGKILL comes from the third press only)."""
    chain, registry = direct
    resource = f"lock/ctrl-c-{presses}"
    mode = "dies-on-term" if presses == 2 else "ignores-term"
    proc = lock_process(
        node.url,
        registry,
        resource,
        "--grace",
        "600",
        "--latency-margin",
        "5",
        "--json",
        "--",
        sys.executable,
        "-c",
        STUBBORN,
        mode,
    )
    lines = Lines(proc.stdout)
    try:
        assert lines.next() == "ready"
        proc.send_signal(signal.SIGINT)
        assert lines.next() == "SIGINT", "the first Ctrl-C is the command's"
        proc.send_signal(signal.SIGINT)
        assert lines.next() == "SIGTERM", "the second stops it (on main: forwarded, 'SIGINT' again)"
        if presses == 3:
            proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 128 + (signal.SIGTERM if presses == 2 else signal.SIGKILL)
        err = proc.stderr.read()
        assert "SIGINT again: stopping the command's session" in err
        assert ("SIGINT again: SIGKILL to the command's session" in err) == (presses == 3)
        document = json.loads(lines.rest()[-1])
        assert document["command"]["signal"] == ("SIGTERM" if presses == 2 else "SIGKILL")
    finally:  # a failing run leaves nothing behind: killed, `lock`'s sentinel stops the command's session
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        lines.thread.join(120)  # its stdout ends once the command's session is gone
        proc.stdout.close()
        proc.stderr.close()
    assert registry.last_lease(resource).status is LeaseStatus.RELEASED


def test_wait_takes_the_resource_once_its_holder_releases_it(node, direct, tmp_path):
    """--wait waits while held (acquire(wait=)): the test releases B's lease only after the CLI was refused once."""
    chain, registry = direct
    held = registry.connect(chain.accounts[2]).acquire("lock/wait", ttl=600)
    with RpcProxy(node.url) as proxy:
        proc = lock_process(
            proxy.url, registry, "lock/wait", "--wait", "300", "--", sys.executable, CHILD, str(tmp_path)
        )
        # the first attempt's preflight (on anvil an eth_call batched with anvil_getAutomine): refused, LeaseHeld
        proxy.wait_completed("anvil_getAutomine", 1)
        assert not (tmp_path / "started.json").exists()
        held.release()
        started = read(tmp_path / "started.json")["env"]
        assert int(started["CHAINFENCE_TOKEN"]) > held.token
        finish(tmp_path, 0)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


@pytest.mark.parametrize(
    "args",
    [
        ["lock/bad"],  # no command
        ["lock/bad", "--"],  # still no command
        ["lock/bad", "--ttl", "0", "--", "true"],
        ["lock/bad", "--ttl", "abc", "--", "true"],
        ["lock/bad", "--ttl", "3", "--", "true"],  # the margins (1 + 2 s) leave no safe time
        ["lock/bad", "--grace", "-1", "--", "true"],
        ["lock/bad", "--wait", "nan", "--", "true"],
        ["lock/bad", "--ttl", "999999", "--", "true"],  # above the registry's max ttl
    ],
)
def test_bad_input_is_a_usage_error_and_changes_nothing_on_chain(node, direct, tmp_path, args):
    chain, registry = direct
    before = registry.latest_token()
    proc = lock_process(node.url, registry, *args)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == cli.lock_exit_code(cli.EXIT_USAGE), err
    assert "Traceback" not in err
    assert registry.latest_token() == before
    assert registry.lease_of("lock/bad") is None, "nothing left held"


@pytest.mark.parametrize("kind", ["missing", "not-executable", "a-directory"])
def test_a_command_that_cannot_run_exits_as_a_shell_says_it(node, direct, tmp_path, kind):
    """Issue 27: a missing command exited 2 (a usage error) where sh, env and timeout(1) exit 127; one that is
    not executable 126. Nothing ran, and the lease is released."""
    chain, registry = direct
    command = {
        "missing": str(tmp_path / "no-such-command"),
        "not-executable": str(tmp_path / "plain.txt"),
        "a-directory": str(tmp_path),
    }[kind]
    (tmp_path / "plain.txt").write_text("echo ran\n")
    resource = f"lock/cannot-run-{kind}"
    proc = lock_process(node.url, registry, resource, "--json", "--", command, "arg")
    out, err = proc.communicate(timeout=120)
    expected, name = (127, "CommandNotFound") if kind == "missing" else (126, "CommandNotRun")
    assert proc.returncode == expected, err  # on main: 2
    assert (cli.EXIT_NOT_FOUND, cli.EXIT_CANNOT_RUN) == (127, 126)
    assert f"chainfence lock: cannot run {command!r}: " in err and "Traceback" not in err
    document = json.loads(out.splitlines()[-1])
    assert (document["error"], document["exit_code"]) == (name, expected)
    last = registry.last_lease(resource)
    assert last is not None and last.status is LeaseStatus.RELEASED, "acquired, nothing ran, released"
    # as a shell says them
    shell = subprocess.run(["sh", "-c", '"$0" arg', command], capture_output=True, timeout=60)
    assert shell.returncode == expected


# ---------------------------------------------------------------------------
# A stalled node: the CLI in this process, its clock moved in step with the chain's
# ---------------------------------------------------------------------------


def run_stalled(
    node, direct, tmp_path, monkeypatch, resource: str, *child_args: str, grace: str = "10", down: bool = False
):
    """Run `lock` in this thread; a driver stalls the node once the child runs (``down``: its proxy drops
    every request, as a dead node's port would) and moves chain time and the keep-alive clock together, one
    second at a time, until the child reports its SIGTERM."""
    chain, registry = direct
    clock = WatchedClock()
    monkeypatch.setattr(_cli_lock, "_CLOCK", clock)
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(4)[1])
    for name in ("CHAINFENCE_RPC_URL", "CHAINFENCE_REGISTRY"):
        monkeypatch.delenv(name, raising=False)
    terminated = tmp_path / "terminated.json"
    seen: dict = {}
    # The safe deadline's second: ttl - latency margin (--grace + 1 s) - block time margin (2 s). The CLI
    # counts from the acquisition's send, a few real milliseconds before its keep-alive read this clock.
    deadline = math.ceil(TTL - float(grace) - 1 - 2)

    with RpcProxy(node.url) as proxy:

        def drive():
            try:
                read(tmp_path / "started.json")
                seen["lease"] = registry.lease_of(resource)
                seen["proxy"] = proxy.url
                start = seen["lease"].expires_at - TTL
                if down:
                    proxy.down = True
                else:
                    proxy.stall()
                for second in range(1, TTL + 5):
                    chain.set_next_block_time(start + second)
                    chain.mine()
                    clock.now = float(second)
                    clock.wait_read(float(second), unless=terminated.exists)
                    if second == TTL // 2 and not down:
                        proxy.wait_held(1)  # the renewal went out; the node does not answer
                    if second == TTL // 2 and down:  # a renewal went out and was dropped
                        wait_until(lambda: any(fault == "drop_request" for *_, fault in proxy.log), "a dropped renewal")
                    if terminated.exists() or second >= deadline:
                        wait_until(terminated.exists, "the child got SIGTERM")
                        break
                seen["on_chain_at_stop"] = registry.last_lease(resource)
            finally:
                proxy.down = False
                proxy.resume()  # let the CLI's release through

        driver = threading.Thread(target=drive)
        driver.start()
        code = cli.main(
            [
                "lock",
                resource,
                "--ttl",
                str(TTL),
                "--grace",
                grace,
                "--rpc-url",
                proxy.url,
                "--registry",
                registry.address,
                "--",
                sys.executable,
                CHILD,
                str(tmp_path),
                node.url,
                *child_args,
            ]
        )
        driver.join(120)
    return code, seen, json.loads(terminated.read_text())


def test_a_stalled_node_stops_the_command_before_the_lease_ends_on_chain(node, direct, tmp_path, monkeypatch, capsys):
    code, seen, terminated = run_stalled(node, direct, tmp_path, monkeypatch, "lock/stalled")
    lease = seen["lease"]
    assert code == cli.lock_exit_code(cli.EXIT_LOST)
    assert terminated["signal"] == signal.SIGTERM
    assert terminated["chain_time"] < lease.expires_at, "the child was stopped before the on-chain expiry"
    # The safe deadline: ttl - latency margin (--grace 10 + 1 s, room for the SIGKILL) - block time margin (2 s).
    assert terminated["chain_time"] <= lease.expires_at - 13
    at_stop = seen["on_chain_at_stop"]
    assert at_stop.live and at_stop.token == lease.token and at_stop.expires_at == lease.expires_at
    err = capsys.readouterr().err
    assert "lost the lease" in err
    # Issue 27: the loss names the node that did not answer (on main: only "no renewal confirmed ...").
    assert re.search(rf"; the node at {re.escape(seen['proxy'])} did not answer the renewal sent \d+ s before", err), (
        err
    )


def test_a_dead_node_is_named_as_unreachable_when_the_lease_is_lost(node, direct, tmp_path, monkeypatch, capsys):
    """Issue 27: a lease lost to a node that stopped answering said "deadline: no renewal confirmed" and no
    more; it now says the node at which URL was unreachable, and why."""
    code, seen, terminated = run_stalled(node, direct, tmp_path, monkeypatch, "lock/dead-node", down=True)
    assert code == cli.lock_exit_code(cli.EXIT_LOST) and terminated["signal"] == signal.SIGTERM
    assert terminated["chain_time"] < seen["lease"].expires_at, "stopped before the on-chain expiry"
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "lost the lease" in line]
    assert said and "(deadline: " in said[0], err
    assert "(deadline: no renewal was confirmed before the local safe deadline)" in said[0]
    assert f"; the node at {seen['proxy']} is unreachable: the node did not answer " in said[0], said[0]


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace_period(node, direct, tmp_path, monkeypatch):
    code, seen, terminated = run_stalled(
        node, direct, tmp_path, monkeypatch, "lock/stubborn", "--ignore-term", grace="0.2"
    )
    # SIGTERM at the deadline, 0.2 + 1 + 2 s before the expiry: the SIGKILL, 0.2 s later, also comes before it.
    assert code == cli.lock_exit_code(cli.EXIT_LOST) and terminated["chain_time"] <= seen["lease"].expires_at - 3
    pid = json.loads((tmp_path / "started.json").read_text())["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed (SIGKILL) and reaped by the CLI
