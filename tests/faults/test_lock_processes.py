"""`chainfence lock` with a forking command, signalled and killed at scripted moments, then a successor.

The command is the issue's ``sh -c 'writer; cleanup'``: a shell whose child
(tests/support/lock_writer.py) appends "<token> <n>" to a shared log every
few milliseconds. `lock` runs in a process of its own
(tests/support/lock_runner.py) whose keep-alive, and sentinel, count on a
clock the test writes to a file: a renewal falls due, or a safe deadline
passes, when the test says so. The chain is an anvil on a logical clock:
its time moves only when the test moves it, so "the lease is still live
on-chain" is checked, not hoped for.

Each scenario ends with a successor (another key) acquiring the resource
and writing its first line, and asks whether the old writer was gone
before that: every step is sequenced by what the processes write (pid
files, log lines, signal records) or by exit, never by a sleep. Each has a
control: the same steps against the naive `lock` (tests/support/naive_lock.py,
main before this fix), whose writer is still writing after the
successor's first line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from chainfence import Chain, Registry, Timeouts, cli
from chainfence.cli._supervisor import session_members
from chainfence.lease import LeaseStatus
from tests.support.anvil import Anvil, dev_keys
from tests.support.lock_writer import WRITER, alive, forking_command, log
from tests.support.lock_writer import writer as first_writer
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import wait_until

ROOT = Path(__file__).resolve().parents[2]
RUNNER = str(ROOT / "tests" / "support" / "lock_runner.py")
TTL = 30
GRACE = 5
#: The keep-alive's numbers for TTL and GRACE: a renewal is due at ttl/2; the safe deadline is
#: ttl - (grace + 1) - 2 after the acquisition's send, which `lock` read as a little before 0.
RENEWAL_DUE = TTL / 2
DEADLINE = TTL - (GRACE + 1) - 2


@pytest.fixture(scope="module")
def node():
    with Anvil(logical_clock=True) as anvil:
        yield anvil


@pytest.fixture(scope="module")
def direct(node):
    chain = Chain.connect(node.url, private_keys=dev_keys(4), timeouts=Timeouts(poll=0.005))
    return chain, Registry.deploy(chain, max_ttl=3_600)


#: Every `lock` process a test started: killed at its teardown if a failed assertion left it running (or stopped).
STARTED: list[Lock] = []


@pytest.fixture(autouse=True)
def no_process_left_behind():
    yield
    while STARTED:
        lock = STARTED.pop()
        if lock.proc.poll() is None:
            lock.proc.send_signal(signal.SIGCONT)
            lock.proc.kill()  # its sentinel then stops its command
        lock.wait()


class Lock:
    """One `chainfence lock` process (the runner), its files (``NAME.clock``, ``NAME.err``) and its command's."""

    def __init__(
        self,
        node,
        registry: Registry,
        tmp_path: Path,
        resource: str,
        *,
        naive: bool = False,
        command: list[str] | None = None,
        lock_args: tuple[str, ...] = (),
        runner_args: tuple[str, ...] = (),
        name: str = "lock",
        url: str | None = None,
        ttl: int = TTL,
    ):
        self.dir = tmp_path
        self.name = name
        self.resource = resource
        self.clock = tmp_path / f"{name}.clock"
        self.set_clock(0)
        if command is None:
            command = forking_command(tmp_path)
        env = {**os.environ, "CHAINFENCE_PRIVATE_KEY": dev_keys(4)[1], "PYTHONPATH": str(ROOT / "src")}
        for variable in ("CHAINFENCE_RPC_URL", "CHAINFENCE_REGISTRY", "CHAINFENCE_DEPLOYMENT"):
            env.pop(variable, None)
        self.out = open(tmp_path / f"{name}.out", "w")
        self.err = open(tmp_path / f"{name}.err", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                RUNNER,
                "--clock",
                str(self.clock),
                *(["--naive"] if naive else []),
                *runner_args,
                "--",
                "lock",
                resource,
                "--rpc-url",
                url or node.url,
                "--registry",
                registry.address,
                "--ttl",
                str(ttl),
                "--grace",
                str(GRACE),
                *lock_args,
                "--",
                *command,
            ],
            env=env,
            stdout=self.out,
            stderr=self.err,
            cwd=ROOT,
            start_new_session=True,
        )
        STARTED.append(self)

    def set_clock(self, seconds: float) -> None:
        temporary = self.clock.with_suffix(".tmp")
        temporary.write_text(repr(float(seconds)))
        temporary.replace(self.clock)

    def writer(self, *, besides: str | None = None) -> tuple[int, str]:
        """(pid, token) of the writer, once it has written its first line (not the writer of token ``besides``)."""
        wait_until(lambda: first_writer(self.dir, besides=besides), f"{self.name}'s writer wrote its first line")
        found = first_writer(self.dir, besides=besides)
        assert found is not None
        return found

    def wait(self) -> int:
        code = self.proc.wait(timeout=120)
        self.out.close()
        self.err.close()
        return code

    @property
    def stderr(self) -> str:
        return (self.dir / f"{self.name}.err").read_text()


def successor_writes(chain: Chain, registry: Registry, lock: Lock, old_token: str, *, expire: bool) -> str:
    """Bob acquires (after the old lease's expiry if ``expire``) and writes his first line; returns his token."""
    if expire:
        chain.advance_time(TTL + 1)
    bob = registry.connect(chain.accounts[2]).acquire(lock.resource, ttl=600)
    assert bob.token > int(old_token)
    with open(lock.dir / "log", "a") as file:
        file.write(f"{bob.token} successor\n")
    return str(bob.token)


def after_successor(directory: Path, old_token: str, new_token: str) -> list[tuple[str, str]]:
    """The old holder's lines written after the successor's first."""
    lines = log(directory)
    first = next(i for i, (token, _) in enumerate(lines) if token == new_token)
    return [line for line in lines[first:] if line[0] == old_token]


def stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------
# A loss: the whole group is stopped, not only the shell
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("naive", [False, True], ids=["lock", "control-naive"])
def test_a_loss_stops_the_writer_the_shell_forked_not_only_the_shell(node, direct, tmp_path, naive):
    """The lease is released behind `lock`'s back; its next renewal finds it: exit 107, whole session stopped."""
    chain, registry = direct
    resource = f"lock-proc/loss-{naive}"
    lock = Lock(node, registry, tmp_path, resource, naive=naive)
    writer, _ = lock.writer()
    lease = registry.lease_of(resource)
    registry.connect(chain.accounts[1]).release(resource, lease.token)  # the holder's key, another process
    lock.set_clock(RENEWAL_DUE)  # the renewal falls due: it finds the lease released
    assert lock.wait() == cli.lock_exit_code(cli.EXIT_LOST)
    assert "(released" in lock.stderr and (naive or "(released: it was released)" in lock.stderr)
    try:
        new = successor_writes(chain, registry, lock, str(lease.token), expire=False)
        if naive:  # the shell got SIGTERM; its child, the writer, goes on writing after exit 107
            wait_until(lambda: after_successor(tmp_path, str(lease.token), new), "the old writer writes again")
            return
        assert not alive(writer), "the writer was stopped before `lock` exited"
        assert after_successor(tmp_path, str(lease.token), new) == []
    finally:
        stop(writer)


def test_a_revoke_stops_the_command_at_the_next_renewal_and_the_exit_says_revoked(node, direct, tmp_path):
    """An admin revokes a stuck holder: `lock` stops its command at its next renewal, not at the safe
    deadline, and says "revoked" (stderr, and --json's document with exit code 107)."""
    chain, _ = direct
    registry = Registry.deploy(chain, max_ttl=3_600, namespaces={"ops": chain.accounts[3]})
    lock = Lock(node, registry, tmp_path, "ops/report", lock_args=("--json",))
    writer, token = lock.writer()
    registry.connect(chain.accounts[3]).namespace("ops").revoke("ops/report")
    assert alive(writer), "until its next renewal"
    lock.set_clock(RENEWAL_DUE)
    assert lock.wait() == cli.lock_exit_code(cli.EXIT_LOST)
    assert not alive(writer)
    assert f"lost the lease of token {token} on 'ops/report' (revoked: the namespace's admin revoked it)" in lock.stderr
    assert "releasing" not in lock.stderr, "a lease the chain ended is not released again"
    document = json.loads((tmp_path / "lock.out").read_text().splitlines()[-1])
    ended = document["command"]  # how the command ended, beside the loss that stopped it (issue 27)
    assert ended["pid"] > 0 and ended["exit_code"] == 128 + signal.Signals[ended["signal"]], ended
    assert (document["error"], document["why"], document["exit_code"]) == (
        "LeaseLost",
        "revoked",
        cli.lock_exit_code(cli.EXIT_LOST),
    )


# ---------------------------------------------------------------------------
# Two `lock`s with one key and one name: never both commands at once
# ---------------------------------------------------------------------------


def interleaved(directory: Path, first: str, second: str) -> bool:
    """Whether the first holder wrote after the second's first line."""
    return bool(after_successor(directory, first, second)) if any(t == second for t, _ in log(directory)) else False


@pytest.mark.parametrize("naive", [False, True], ids=["lock", "control-naive"])
def test_a_second_lock_of_the_same_key_exits_103_naming_the_holder(node, direct, tmp_path, naive):
    chain, registry = direct
    resource = f"lock-proc/same-key-{naive}"
    first = Lock(node, registry, tmp_path, resource, naive=naive, name="first")
    writer, token = first.writer()
    second = Lock(node, registry, tmp_path, resource, naive=naive, name="second")
    try:
        if naive:  # it re-acquires its own key's live lease: both commands write at once
            other, new = second.writer(besides=token)
            wait_until(lambda: interleaved(tmp_path, token, new), "the first writer writes after the second began")
            stop(other)
            return
        assert second.wait() == cli.lock_exit_code(cli.EXIT_HELD)
        assert f"is held by {chain.accounts[1]} with token {token}" in second.stderr
        assert "held by this key" in second.stderr and "--take-over" in second.stderr
        assert {t for t, _ in log(tmp_path)} == {token}, "the second command never ran"
        assert registry.lease_of(resource).token == int(token)
    finally:
        for lock in (first, second):
            lock.proc.kill()
            lock.wait()
        stop(writer)


def test_a_second_lock_of_the_same_key_with_wait_runs_once_the_first_is_done(node, direct, tmp_path):
    chain, registry = direct
    resource = "lock-proc/same-key-wait"
    first = Lock(node, registry, tmp_path, resource, name="first")
    writer, token = first.writer()
    with RpcProxy(node.url) as proxy:
        second = Lock(node, registry, tmp_path, resource, name="second", url=proxy.url, lock_args=("--wait", "300"))
        # its first attempt's preflight (on anvil an eth_call batched with anvil_getAutomine): refused, LeaseHeld; it waits
        proxy.wait_completed("anvil_getAutomine", 1)
        assert {t for t, _ in log(tmp_path)} == {token}
        first.proc.send_signal(signal.SIGTERM)  # forwarded: the command ends, the first `lock` releases
        assert first.wait() == 128 + signal.SIGTERM
        other, new = second.writer(besides=token)
        assert not alive(writer)
        assert int(new) > int(token) and after_successor(tmp_path, token, new) == []
        second.proc.send_signal(signal.SIGTERM)
        assert second.wait() == 128 + signal.SIGTERM
    assert not alive(other)


def test_take_over_fences_the_first_whose_command_is_stopped_at_its_next_renewal(node, direct, tmp_path):
    chain, registry = direct
    resource = "lock-proc/take-over"
    first = Lock(node, registry, tmp_path, resource, name="first")
    writer, token = first.writer()
    second = Lock(node, registry, tmp_path, resource, name="second", lock_args=("--take-over",))
    other, new = second.writer(besides=token)
    assert int(new) > int(token)
    first.set_clock(RENEWAL_DUE)  # the first's renewal meets the higher token: superseded
    assert first.wait() == cli.lock_exit_code(cli.EXIT_LOST)
    assert "(superseded: a higher token was issued for the resource)" in first.stderr
    assert not alive(writer)
    assert alive(other), "the second command runs on"
    second.proc.send_signal(signal.SIGTERM)
    assert second.wait() == 128 + signal.SIGTERM
    assert registry.last_lease(resource).status is LeaseStatus.RELEASED


# ---------------------------------------------------------------------------
# `lock` dies: its sentinel stops the command before the lease can end on-chain
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("naive", [False, True], ids=["lock", "control-naive"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_lock_killed_while_the_command_writes(node, direct, tmp_path, sig, naive):
    """SIGKILL: the sentinel sees the pipe close and stops the session at once, the lease still live on-chain.
    SIGHUP: forwarded to the command's group (once); the command ends, `lock` releases and exits 129."""
    chain, registry = direct
    resource = f"lock-proc/{sig.name}-{naive}"
    lock = Lock(node, registry, tmp_path, resource, naive=naive)
    writer, _ = lock.writer()
    lease = registry.lease_of(resource)
    lock.proc.send_signal(sig)
    code = lock.wait()
    try:
        if naive:
            assert code == -sig  # killed, its command left running
            new = successor_writes(chain, registry, lock, str(lease.token), expire=True)
            wait_until(lambda: after_successor(tmp_path, str(lease.token), new), "the old writer writes again")
            return
        wait_until(lambda: not alive(writer), "the writer is stopped")
        if sig == signal.SIGKILL:
            assert code == -signal.SIGKILL
            on_chain = registry.last_lease(resource)
            assert on_chain.live and on_chain.token == lease.token, "stopped while the lease was still live"
            assert "is gone: its sentinel stops the command" in lock.stderr
        else:
            assert code == 128 + signal.SIGHUP
            assert (tmp_path / f"signals-{lease.token}").read_text().split() == ["HUP"], "forwarded once"
            assert registry.last_lease(resource).status is LeaseStatus.RELEASED
        new = successor_writes(chain, registry, lock, str(lease.token), expire=sig == signal.SIGKILL)
        assert after_successor(tmp_path, str(lease.token), new) == []
    finally:
        stop(writer)


@pytest.mark.parametrize("naive", [False, True], ids=["lock", "control-naive"])
def test_lock_killed_the_moment_its_command_starts(node, direct, tmp_path, naive):
    """SIGKILL between the command's fork and its exec (the command does it, in its preexec_fn): the command
    told the sentinel its session before, so the sentinel stops it; the naive `lock`'s command runs on."""
    chain, registry = direct
    resource = f"lock-proc/killed-at-start-{naive}"
    lock = Lock(node, registry, tmp_path, resource, naive=naive, runner_args=("--sigkill-in-preexec",))
    assert lock.wait() == -signal.SIGKILL
    lease = registry.last_lease(resource)
    try:
        if naive:
            writer, token = lock.writer()
            new = successor_writes(chain, registry, lock, token, expire=True)
            wait_until(lambda: after_successor(tmp_path, token, new), "the old writer writes again")
            stop(writer)
            return
        wait_until(lambda: "its sentinel stops the command (session" in lock.stderr, "the sentinel took over")
        sid = int(lock.stderr.split("(session ", 1)[1].split(")", 1)[0])
        wait_until(lambda: not session_members(sid), "no process of the command's session is left")
        assert lease.live and lease.token == registry.last_lease(resource).token, "stopped while live on-chain"
        new = successor_writes(chain, registry, lock, str(lease.token), expire=True)
        assert after_successor(tmp_path, str(lease.token), new) == []
    finally:
        found = first_writer(tmp_path, besides=None)
        if found is not None and found[1] == str(lease.token):
            stop(found[0])


@pytest.mark.parametrize("kept", [False, True], ids=["lock", "control-handlers-kept"])
def test_the_sentinel_s_sigterm_between_the_command_s_fork_and_exec_is_not_caught_by_lock_s_handlers(
    node, direct, tmp_path, kept
):
    """The interleaving behind the loaded run's failure of the test above, held open: `lock` is SIGKILLed
    in its command's preexec_fn, the command closes its descriptors (as close_fds does just before the
    exec) so the sentinel reads EOF and sends its SIGTERM, and the command waits for that SIGTERM before
    it execs. Until the exec the command is a copy of `lock`, whose handlers only record a signal: the
    command must meet the SIGTERM with its default action (it dies, never having run). Control: main's
    preexec_fn, which kept `lock`'s handlers: the SIGTERM is caught and lost, the command execs and runs
    on, and nothing stops it until the sentinel's SIGKILL --grace later (never, on this frozen clock)."""
    chain, registry = direct
    resource = f"lock-proc/term-before-exec-{kept}"
    runner = ("--sigkill-in-preexec", "--then-await-sigterm") + (("--announce-keeping-handlers",) if kept else ())
    lock = Lock(node, registry, tmp_path, resource, runner_args=runner)
    assert lock.wait() == -signal.SIGKILL
    lease = registry.last_lease(resource)
    try:
        wait_until(lambda: "its sentinel stops the command (session" in lock.stderr, "the sentinel took over")
        sid = int(lock.stderr.split("(session ", 1)[1].split(")", 1)[0])
        wait_until(lambda: not session_members(sid) or log(tmp_path), "the session ends, or its command runs")
        if kept:
            wait_until(lambda: first_writer(tmp_path), "the command, exec'd after the SIGTERM, writes")
            assert session_members(sid), "a process of the command's session runs on after the sentinel's SIGTERM"
            return
        assert not session_members(sid)
        assert log(tmp_path) == [] and not list(tmp_path.glob("writer-*.pid")), "the command never ran"
        assert lease.live and lease.token == registry.last_lease(resource).token, "stopped while live on-chain"
    finally:
        found = first_writer(tmp_path, besides=None)
        if found is not None:
            stop(found[0])


@pytest.mark.parametrize("naive", [False, True], ids=["lock", "control-naive"])
def test_lock_killed_while_it_stops_a_stubborn_leftover(node, direct, tmp_path, naive):
    """The command's shell exits and leaves a writer behind that ignores SIGTERM. `lock` stops it before it
    releases (the naive one released at once); killed while it waits out --grace, its sentinel finishes the
    job: SIGKILL --grace after it took over, by its clock, the lease still live on-chain."""
    chain, registry = direct
    resource = f"lock-proc/leftover-{naive}"
    # The shell leaves once the writer has written (its handlers are set by then).
    script = f'"{sys.executable}" "{WRITER}" "$0" --ignore TERM & until [ -s "$0/log" ]; do sleep 0.01; done'
    lock = Lock(node, registry, tmp_path, resource, naive=naive, command=["sh", "-c", script, str(tmp_path)])
    writer, _ = lock.writer()
    lease = registry.last_lease(resource)  # the naive lock may have released it already
    try:
        if naive:
            assert lock.wait() == 0  # the shell exited 0: the lease is released, the writer writes on
            assert registry.last_lease(resource).status is LeaseStatus.RELEASED
            new = successor_writes(chain, registry, lock, str(lease.token), expire=False)
            wait_until(lambda: after_successor(tmp_path, str(lease.token), new), "the old writer writes again")
            return
        signals = tmp_path / f"signals-{lease.token}"
        wait_until(signals.exists, "`lock` sent the leftover writer SIGTERM")
        assert registry.last_lease(resource).live, "not released while a process of the command runs"
        lock.proc.kill()
        assert lock.wait() == -signal.SIGKILL
        wait_until(lambda: "its sentinel stops the command" in lock.stderr, "the sentinel took over")
        assert alive(writer), "SIGTERM ignored: it runs until the SIGKILL"
        lock.set_clock(GRACE)  # --grace later, by the sentinel's clock
        wait_until(lambda: not alive(writer), "the sentinel killed the writer")
        on_chain = registry.last_lease(resource)
        assert on_chain.live and on_chain.token == lease.token
        new = successor_writes(chain, registry, lock, str(lease.token), expire=True)
        assert after_successor(tmp_path, str(lease.token), new) == []
    finally:
        stop(writer)


@pytest.mark.parametrize("naive", [False, True], ids=["lock", "control-naive"])
def test_a_frozen_lock_s_sentinel_stops_the_command_at_the_safe_deadline(node, direct, tmp_path, naive):
    """SIGSTOP freezes `lock` (no renewal can be sent); its sentinel stops the command when the last safe
    deadline passes, the lease still live on-chain. Resumed, `lock` says so and exits 107."""
    chain, registry = direct
    resource = f"lock-proc/frozen-{naive}"
    lock = Lock(node, registry, tmp_path, resource, naive=naive)
    writer, _ = lock.writer()
    lease = registry.lease_of(resource)
    try:
        lock.proc.send_signal(signal.SIGSTOP)
        lock.set_clock(DEADLINE + 1)  # the safe deadline passes (and the half second it leaves `lock`); frozen
        if naive:
            new = successor_writes(chain, registry, lock, str(lease.token), expire=True)
            wait_until(lambda: after_successor(tmp_path, str(lease.token), new), "the old writer writes again")
            lock.proc.kill()
            lock.wait()
            return
        wait_until(lambda: not alive(writer), "the sentinel stopped the writer")
        on_chain = registry.last_lease(resource)
        assert on_chain.live and on_chain.token == lease.token, "stopped while the lease was still live"
        lock.proc.send_signal(signal.SIGCONT)
        assert lock.wait() == cli.lock_exit_code(cli.EXIT_LOST)
        assert "(deadline: no renewal was confirmed before the local safe deadline)" in lock.stderr
        # Its own freeze, not the node's fault (issue 27: the loss says what the node did, when it did)
        assert "did not answer the renewal" not in lock.stderr and "is unreachable" not in lock.stderr
        new = successor_writes(chain, registry, lock, str(lease.token), expire=True)
        assert after_successor(tmp_path, str(lease.token), new) == []
    finally:
        stop(writer)


def test_at_its_own_deadline_lock_stops_the_command_and_the_sentinel_stays_quiet(node, direct, tmp_path):
    """No renewal gets through; the safe deadline passes by the clock both processes read. `lock` stops the
    command and tells its sentinel, which would act only half a second later: one SIGTERM, one message."""
    chain, registry = direct
    resource = "lock-proc/deadline"
    lock = Lock(node, registry, tmp_path, resource, runner_args=("--break-renewals",))
    writer, token = lock.writer()
    lock.set_clock(DEADLINE)
    assert lock.wait() == cli.lock_exit_code(cli.EXIT_LOST)
    assert "(deadline: no renewal was confirmed before the local safe deadline)" in lock.stderr
    assert "sentinel" not in lock.stderr
    assert (tmp_path / f"signals-{token}").read_text().split() == ["TERM"]
    assert not alive(writer)
    assert registry.last_lease(resource).status is LeaseStatus.RELEASED, "given up while live, then released"


# ---------------------------------------------------------------------------
# Signals: recorded by handlers that take no lock, forwarded once
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("moment", ["before-fork", "after-start"])
def test_a_sigterm_while_the_command_starts_is_forwarded_once(node, direct, tmp_path, moment):
    """`lock` sends itself SIGTERM inside subprocess.Popen, before the fork or once the command runs (its
    handlers set) but before Popen returns: no deadlock; the command gets it once and ends; released."""
    chain, registry = direct
    resource = f"lock-proc/term-at-start-{moment}"
    when = ("--sigterm-in-popen",) + ((str(tmp_path),) if moment == "after-start" else ())
    lock = Lock(node, registry, tmp_path, resource, command=[sys.executable, WRITER, str(tmp_path)], runner_args=when)
    assert lock.wait() == 128 + signal.SIGTERM, lock.stderr
    last = registry.last_lease(resource)
    assert last.status is LeaseStatus.RELEASED
    if moment == "after-start":
        assert (tmp_path / f"signals-{last.token}").read_text().split() == ["TERM"]


def test_a_sigterm_once_the_lease_is_held_but_before_the_command_starts_means_it_never_starts(node, direct, tmp_path):
    chain, registry = direct
    resource = "lock-proc/term-before-start"
    lock = Lock(node, registry, tmp_path, resource, runner_args=("--sigterm-in-keep",))
    assert lock.wait() == 128 + signal.SIGTERM, lock.stderr
    assert not (tmp_path / "log").exists(), "the command never started"
    assert registry.last_lease(resource).status is LeaseStatus.RELEASED


@pytest.mark.parametrize("moment", ["before-fork", "after-start"])
def test_control_the_naive_lock_deadlocks_on_a_sigterm_while_the_command_starts(node, direct, tmp_path, moment):
    """The naive handler takes the lock the main thread holds around Popen: the main thread waits on itself."""
    chain, registry = direct
    dump = tmp_path / "stacks"
    when = ("--sigterm-in-popen",) + ((str(tmp_path),) if moment == "after-start" else ())
    lock = Lock(
        node,
        registry,
        tmp_path,
        f"lock-proc/term-at-start-naive-{moment}",
        naive=True,
        command=[sys.executable, WRITER, str(tmp_path)],
        runner_args=(*when, "--dump", str(dump)),
    )

    def stuck_in_forward() -> bool:
        lock.proc.send_signal(signal.SIGUSR2)  # faulthandler: every thread's stack, even a blocked main thread's
        threads = (dump.read_text() if dump.exists() else "").split("\n\n")
        # One thread, inside the handler `forward` (waiting for `state`), called while _cmd_lock holds `state`.
        return any("in forward" in stack and "in _cmd_lock" in stack for stack in threads)

    writer = None
    try:
        wait_until(Path(f"{dump}.ready").exists, "the runner dumps stacks on SIGUSR2")
        wait_until(Path(f"{dump}.sigterm").exists, "the runner sends itself SIGTERM")  # probe only from then on
        wait_until(stuck_in_forward, "a thread is inside the SIGTERM handler, under _cmd_lock")
        assert lock.proc.poll() is None
        if moment == "before-fork":
            assert not (tmp_path / "log").exists(), "the command never started"
        else:
            writer, _ = lock.writer()
            assert not list(tmp_path.glob("signals-*")), "the command never got the SIGTERM"
    finally:
        lock.proc.kill()
        lock.wait()
        if writer is not None:
            stop(writer)


def test_a_terminal_s_ctrl_c_reaches_the_command_once(node, direct, tmp_path):
    """A terminal sends SIGINT to its foreground process group: `lock` (and not its command, in a session of
    its own, nor its sentinel) gets it, and forwards it once. The writer ignores it; SIGTERM ends it."""
    chain, registry = direct
    resource = "lock-proc/ctrl-c"
    lock = Lock(node, registry, tmp_path, resource, command=[sys.executable, WRITER, str(tmp_path), "--ignore", "INT"])
    writer, _ = lock.writer()
    token = log(tmp_path)[0][0]
    signals = tmp_path / f"signals-{token}"
    os.killpg(lock.proc.pid, signal.SIGINT)  # the runner is its process group's leader, as a shell's job is
    wait_until(signals.exists, "the writer got SIGINT")
    lock.proc.send_signal(signal.SIGTERM)
    assert lock.wait() == 128 + signal.SIGTERM
    assert signals.read_text().split() == ["INT", "TERM"]
    assert not alive(writer)
