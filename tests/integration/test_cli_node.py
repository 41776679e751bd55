"""`chainfence node` and the CLI end to end, as a user runs them: subprocesses, env vars, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chainfence import cli
from chainfence.testing.anvil import dev_keys, free_port
from tests.support.sequencer import wait_until

ROOT = Path(__file__).resolve().parents[2]


class Node:
    """`python -m chainfence node --json` in a working directory, in its own process group."""

    def __init__(self, workdir: Path, port: int):
        self.workdir = workdir
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.info: dict = {}

    def start(self) -> dict:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "chainfence", "node", "--port", str(self.port), "--json"],
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

    def stop(self) -> int:
        """Ctrl-C, as a terminal sends it to the whole foreground group."""
        os.killpg(self.process.pid, signal.SIGINT)
        code = self.process.wait(timeout=30)
        self.process.stdout.close()
        self.process.stderr.close()
        return code

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process.stdout.close()
        self.process.stderr.close()


@pytest.fixture
def node(tmp_path):
    """A node of the test's own (for tests that stop, kill or restart it)."""
    node = Node(tmp_path, free_port())
    node.start()
    yield node
    if node.process.poll() is None:
        node.stop()


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    """One node for the tests that only use it (each on resources of its own)."""
    node = Node(tmp_path_factory.mktemp("node"), free_port())
    node.start()
    yield node
    node.stop()


def run(
    workdir: Path, *args: str, key: int | None = 1, extra_env: dict | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    if key is not None:
        env["CHAINFENCE_PRIVATE_KEY"] = dev_keys(10)[key]
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "chainfence", *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
    )


def as_json(done: subprocess.CompletedProcess[str]):
    return json.loads(done.stdout)


def test_node_prints_url_and_registry_and_writes_the_deployment_file(node):
    info = node.info
    assert info["rpc_url"] == f"http://127.0.0.1:{node.port}"
    assert info["registry"].startswith("0x") and info["reused"] is False
    deployment = json.loads((node.workdir / ".chainfence" / "deployment.json").read_text())
    assert deployment["registry"] == info["registry"] and deployment["chain_id"] == 31337
    assert deployment["rpc_url"] == info["rpc_url"]
    assert node.stop() == 0


def test_the_node_answers_on_its_ipc_socket_as_on_its_url(shared_node):
    """`chainfence node` announces an IPC socket (``ipc_path``); the CLI takes it where it takes the URL."""
    path = shared_node.info["ipc_path"]
    assert path and path.endswith(".ipc")
    status = run(shared_node.workdir, "status", "--json", "--rpc-url", path, key=None)
    assert status.returncode == 0, status.stderr
    assert as_json(status)["registry"] == shared_node.info["registry"]


def test_cli_lease_lifecycle_reads_the_deployment_file_by_default(node):
    """No flags but the key in the environment: URL and registry come from .chainfence/deployment.json.

    The node's clock is the wall clock and each command is a process that imports web3 (seconds
    each on a loaded machine): the lease is taken for an hour, longer than the per-test timeout,
    so its expiry can never be what decides the test."""
    wd = node.workdir
    acquired = run(wd, "acquire", "reports/daily", "--ttl", "3600", "--json")
    assert acquired.returncode == 0, acquired.stderr
    lease = as_json(acquired)
    assert lease["token"] == 1 and lease["resource"] == "reports/daily" and lease["reason"] == "unheld"

    held = run(wd, "acquire", "reports/daily", "--ttl", "60", "--json", key=2)
    assert held.returncode == cli.EXIT_HELD
    assert as_json(held)["error"] == "LeaseHeld"

    status = as_json(run(wd, "status", "reports/daily", "never/held", "--json", key=None))
    assert [(s["resource"], s["status"], s["token"]) for s in status] == [
        ("reports/daily", "live", 1),
        ("never/held", "unheld", 0),
    ]
    assert run(wd, "verify", "reports/daily", "--token", "1", key=None).returncode == cli.EXIT_OK

    renewed = run(wd, "renew", "reports/daily", "--token", "1", "--ttl", "7200", "--json")
    assert renewed.returncode == 0 and as_json(renewed)["expires_at"] > lease["expires_at"]
    assert run(wd, "release", "reports/daily", "--token", "1").returncode == 0
    verify = run(wd, "verify", "reports/daily", "--token", "1", "--json", key=None)
    assert verify.returncode == cli.EXIT_NOT_CURRENT and as_json(verify)["reason"] == "LeaseReleased"
    again = run(wd, "release", "reports/daily", "--token", "1")
    assert again.returncode == cli.EXIT_NOT_CURRENT and "LeaseReleased" in again.stderr
    registry = as_json(run(wd, "status", "--json", key=None))
    assert registry["latest_token"] == 1 and registry["registry"] == node.info["registry"]


def test_cli_human_output_is_a_table(shared_node):
    run(shared_node.workdir, "acquire", "jobs/etl", "--ttl", "3600")  # still live at the next command
    table = run(shared_node.workdir, "status", "jobs/etl", key=None).stdout.splitlines()
    assert table[0].split() == ["resource", "status", "token", "holder", "expires"]
    assert table[2].split()[:2] == ["jobs/etl", "live"]


@pytest.mark.parametrize(
    ("args", "key", "code", "says"),
    [
        (["acquire", "r", "--ttl", "0"], 1, cli.EXIT_USAGE, "must be >= 1"),
        (["acquire", "r", "--ttl", "999999999"], 1, cli.EXIT_USAGE, "ttl must be 1 to 86400"),
        (["acquire", "", "--ttl", "5"], 1, cli.EXIT_USAGE, "must not be empty"),
        (["acquire", "r", "--ttl", "5"], None, cli.EXIT_USAGE, "CHAINFENCE_PRIVATE_KEY"),
        (["acquire", "r", "--ttl", "5", "--private-key", "0x01"], 1, cli.EXIT_USAGE, "unrecognized arguments"),
        (["acquire", "r", "--ttl", "5", "--wait", "-1"], 1, cli.EXIT_USAGE, "wait must be None or a number"),
        (["acquire", "r", "--ttl", "5", "--wait", "nan"], 1, cli.EXIT_USAGE, "wait must be None or a number"),
        (["acquire", "r", "--ttl", "5", "--wait", "soon"], 1, cli.EXIT_USAGE, "not a number of seconds"),
        (["verify", "never", "--token", "3"], None, cli.EXIT_NOT_CURRENT, "never issued"),
        (
            ["status", "--registry", "0x000000000000000000000000000000000000dEaD"],
            None,
            cli.EXIT_CONNECTION,
            "no contract code",
        ),
        (["status", "--registry", "0x1234"], None, cli.EXIT_USAGE, "20-byte"),
    ],
)
def test_cli_errors_have_distinct_exit_codes_and_clear_messages(shared_node, args, key, code, says):
    done = run(shared_node.workdir, *args, key=key)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert says in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_cli_without_a_node_is_a_connection_error(tmp_path):
    done = run(
        tmp_path,
        "status",
        "--rpc-url",
        f"http://127.0.0.1:{free_port()}",
        "--registry",
        "0x000000000000000000000000000000000000dEaD",
        key=None,
    )
    assert done.returncode == cli.EXIT_CONNECTION and "NodeUnreachable" in done.stderr


def test_cli_without_any_configuration_says_what_to_do(tmp_path):
    done = run(tmp_path, "status", key=None)
    assert done.returncode == cli.EXIT_USAGE and "chainfence node" in done.stderr


def test_cli_deploy_writes_a_deployment_the_next_commands_use(shared_node, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    deployed = run(
        other, "deploy", "--max-ttl", "600", "--json", extra_env={"CHAINFENCE_RPC_URL": shared_node.info["rpc_url"]}
    )
    assert deployed.returncode == 0, deployed.stderr
    record = as_json(deployed)
    assert record["registry"] != shared_node.info["registry"] and record["max_ttl"] == 600
    acquired = run(other, "acquire", "r", "--ttl", "601", extra_env={"CHAINFENCE_RPC_URL": shared_node.info["rpc_url"]})
    assert acquired.returncode == cli.EXIT_USAGE and "600" in acquired.stderr


def test_cli_reads_a_keystore_with_the_password_from_the_environment(shared_node, tmp_path):
    from eth_account import Account

    keystore = tmp_path / "key.json"
    keystore.write_text(json.dumps(Account.encrypt(dev_keys(10)[3], "s3cret")))
    ok = run(
        shared_node.workdir,
        "acquire",
        "ks",
        "--ttl",
        "60",
        "--keystore",
        str(keystore),
        "--json",
        key=None,
        extra_env={"CHAINFENCE_KEYSTORE_PASSWORD": "s3cret"},
    )
    assert ok.returncode == 0, ok.stderr
    assert as_json(ok)["holder"] == Account.from_key(dev_keys(10)[3]).address
    wrong = run(
        shared_node.workdir,
        "acquire",
        "ks2",
        "--ttl",
        "60",
        "--keystore",
        str(keystore),
        key=None,
        extra_env={"CHAINFENCE_KEYSTORE_PASSWORD": "nope"},
    )
    assert wrong.returncode == cli.EXIT_USAGE and "wrong password" in wrong.stderr


def test_node_restart_keeps_every_lease_and_token(node):
    wd = node.workdir
    for name in ("a", "b", "c"):
        assert run(wd, "acquire", name, "--ttl", "3600").returncode == 0
    before = as_json(run(wd, "status", "a", "b", "c", "--json", key=None))
    assert node.stop() == 0

    info = node.start()
    assert info["reused"] is True and info["latest_token"] == 3
    assert as_json(run(wd, "status", "a", "b", "c", "--json", key=None)) == before
    assert as_json(run(wd, "acquire", "d", "--ttl", "60", "--json"))["token"] == 4


def anvil_pid(node: Node) -> int:
    """The anvil process `chainfence node` started (its only child)."""
    children = [
        int(pid)
        for task in Path(f"/proc/{node.process.pid}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]
    assert len(children) == 1, children
    return children[0]


def stopped(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] in "Tt"


def saved_block(state_file: Path) -> int | None:
    """The newest block in anvil's state file, or None while it is absent or being rewritten."""
    try:
        return int(json.loads(state_file.read_text())["best_block_number"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # anvil rewrites the file in place: a read can see it half written


def freeze_anvil_once_saved(node: Node, block: int) -> None:
    """SIGSTOP the node's anvil at a moment when its state file is complete and holds ``block``.

    anvil saves every second by rewriting the file in place, so a SIGKILL that lands during a
    save leaves a truncated file (which anvil then refuses to load). Freezing it first and
    looking at the file makes the crash land between two saves, after the one that matters."""
    pid = anvil_pid(node)
    state_file = node.workdir / node.info["state_file"]  # relative to the node's directory
    deadline = time.monotonic() + 60  # not a window: a safety net; anvil saves every second
    while True:
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: stopped(pid), "anvil stopped")
        saved = saved_block(state_file)
        if saved is not None and saved >= block:
            return
        os.kill(pid, signal.SIGCONT)
        assert time.monotonic() < deadline, f"anvil never saved block {block} (saved: {saved})"
        time.sleep(0.05)  # let anvil run on to its next save


def test_node_killed_with_sigkill_restarts_from_its_last_saved_state(node):
    """A crash (SIGKILL of node and anvil) after a state save keeps what that save holds.

    Sequenced by the save itself, not by a wait of "two saves' worth" of seconds: the crash comes
    once the state file on disk holds the acquisition's block."""
    wd = node.workdir
    acquired = run(wd, "acquire", "survivor", "--ttl", "3600", "--json")
    assert acquired.returncode == 0, acquired.stderr
    freeze_anvil_once_saved(node, as_json(acquired)["block_number"])
    node.kill()
    info = node.start()
    assert info["latest_token"] == 1
    status = as_json(run(wd, "status", "survivor", "--json", key=None))
    assert status[0]["status"] == "live" and status[0]["token"] == 1


def test_node_without_anvil_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    from chainfence.testing import anvil as localnode

    monkeypatch.setattr(localnode, "_search_roots", lambda start: [tmp_path])
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CHAINFENCE_ANVIL", raising=False)
    assert cli.main(["node", "--dir", str(tmp_path / ".chainfence")]) == cli.EXIT_CONNECTION
    err = capsys.readouterr().err
    assert "anvil not found" in err and "npm install" in err


def test_node_refuses_a_port_in_use(shared_node, tmp_path):
    other = tmp_path / "second"
    other.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "chainfence", "node", "--port", str(shared_node.port)],
        cwd=other,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == cli.EXIT_CONNECTION and "in use" in done.stderr


def test_cli_acquire_wait_takes_the_lease_once_the_holder_releases(shared_node):
    """`acquire --wait` blocks while the lease is held (it logs that it waits), and exits 0 with the
    next token once the holder releases; a wait that ends first exits 3 with the holder."""
    wd = shared_node.workdir
    held = as_json(run(wd, "acquire", "jobs/wait-cli", "--ttl", "3600", "--json"))
    short = run(wd, "acquire", "jobs/wait-cli", "--ttl", "60", "--wait", "0.2", "--json", key=2)
    assert short.returncode == cli.EXIT_HELD, short.stderr
    assert as_json(short)["holder"] == held["holder"] and as_json(short)["token"] == held["token"]

    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["CHAINFENCE_PRIVATE_KEY"] = dev_keys(10)[2]
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chainfence",
            "-v",
            "acquire",
            "jobs/wait-cli",
            "--ttl",
            "60",
            "--wait",
            "600",
            "--json",
        ],
        cwd=wd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as waiter:
        try:
            waiting = threading.Event()
            errors: list[str] = []

            def read_stderr():
                for line in waiter.stderr:
                    errors.append(line)
                    if "waiting resource=jobs/wait-cli" in line:
                        waiting.set()

            reader = threading.Thread(target=read_stderr, daemon=True)
            reader.start()
            assert waiting.wait(120), "the waiter never said it was waiting: " + "".join(errors)
            assert waiter.poll() is None
            assert run(wd, "release", "jobs/wait-cli", "--token", str(held["token"])).returncode == 0
            waiter.wait(timeout=120)  # its output is one short JSON document: the pipe cannot fill
            out = waiter.stdout.read()
            reader.join(timeout=60)
        finally:
            if waiter.poll() is None:
                waiter.kill()
    assert waiter.returncode == 0, "".join(errors)
    lease = json.loads(out)
    assert lease["token"] == held["token"] + 1 and lease["reason"] == "released"
