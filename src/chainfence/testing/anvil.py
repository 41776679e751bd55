"""An anvil node on loopback, for tests and local runs: found, started, stopped (as kazoo ships
``kazoo.testing``).

    from chainfence.testing.anvil import AnvilProcess, dev_keys

    with AnvilProcess() as node:                      # a free port on 127.0.0.1
        chain = Chain.connect(node.url, private_keys=dev_keys(3))

The anvil binary comes from, in order: the ``explicit`` path (``--anvil``),
``$CHAINFENCE_ANVIL``, a ``node_modules`` (the project's own ``npm install`` of
``@foundry-rs/anvil``, pinned) in the working directory or any parent, or
beside the installed package (an editable install in a checkout), or
``anvil`` on ``PATH``. ``chainfence node`` (:mod:`chainfence.cli.node`)
builds a persistent local chain on it.

The npm package's ``node_modules/.bin/anvil`` (what ``PATH`` or
``$CHAINFENCE_ANVIL`` name after ``npm install @foundry-rs/anvil``) is a node
script that starts the platform package's native binary as its child: it is
resolved to that binary (:func:`native_anvil`), or refused at once, naming the
binary to use, when the platform package is missing. Any other wrapper that
forks anvil works too: anvil starts in a process group of its own, a listener
anywhere in that group is the node's, and stopping or failing ends the whole
group.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from eth_account import Account

from ..errors import AnvilNotFound, NodeUnreachable

__all__ = [
    "ANVIL_VERSION",
    "DEV_MNEMONIC",
    "AnvilProcess",
    "dev_keys",
    "find_anvil",
    "free_port",
    "native_anvil",
    "port_is_free",
    "remove_dead_socket",
]

#: anvil's default mnemonic: its accounts are funded at genesis. Public test keys: never use them elsewhere.
DEV_MNEMONIC = "test test test test test test test test test test test junk"

_SIGKILL = getattr(signal, "SIGKILL", 9)

#: The anvil version package.json pins.
ANVIL_VERSION = "1.7.1"

_HOW_TO_GET_ANVIL = (
    "anvil not found. Get it with one of:\n"
    "  npm ci                         (in a chainfence checkout: package-lock.json pins @foundry-rs/anvil "
    f"{ANVIL_VERSION})\n"
    f"  npm install -E @foundry-rs/anvil@{ANVIL_VERSION}   (in this directory)\n"
    "  foundryup                      (https://getfoundry.sh)\n"
    "or point --anvil / CHAINFENCE_ANVIL at the binary."
)


def _platform_package() -> str:
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}.get(platform.system(), "unknown")
    machine = {"x86_64": "amd64", "AMD64": "amd64", "arm64": "arm64", "aarch64": "arm64"}.get(
        platform.machine(), "unknown"
    )
    return f"anvil-{system}-{machine}"


def _search_roots(start: Path | None) -> list[Path]:
    """The working directory and its parents, then the package's own location and its parents
    (a checkout installed with ``pip install -e .``)."""
    roots: list[Path] = []
    for origin in (start or Path.cwd(), Path(__file__).parent):
        here = origin.resolve()
        roots += [here, *here.parents]
    return roots


def _binary_name() -> str:
    return "anvil.exe" if platform.system() == "Windows" else "anvil"


def find_anvil(explicit: str | None = None, *, start: Path | None = None) -> str:
    """Path of an anvil executable (see the module docstring for the search order); the npm wrapper is
    resolved to the native binary it would start (:func:`native_anvil`)."""
    for candidate in (explicit, os.environ.get("CHAINFENCE_ANVIL")):
        if candidate:
            if Path(candidate).is_file() and os.access(candidate, os.X_OK):
                return native_anvil(str(candidate))
            raise AnvilNotFound(f"{candidate} is not an executable anvil binary")
    for directory in _search_roots(start):
        binary = directory / "node_modules" / "@foundry-rs" / _platform_package() / "bin" / _binary_name()
        if binary.is_file():
            return str(binary)
    on_path = shutil.which("anvil")
    if on_path:
        return native_anvil(on_path)
    raise AnvilNotFound(_HOW_TO_GET_ANVIL)


def _is_npm_wrapper(package: Path) -> bool:
    """Whether ``package`` is the directory of the npm package ``@foundry-rs/anvil`` (its node wrapper's)."""
    try:
        with open(package / "package.json", "rb") as file:
            manifest = json.loads(file.read(64 * 1024))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("name") == "@foundry-rs/anvil"


def native_anvil(path: str) -> str:
    """The native anvil behind ``path``: ``path`` itself, or, when it is the npm package's wrapper
    (``node_modules/.bin/anvil``, a link to ``@foundry-rs/anvil/bin.mjs``), the platform package's binary
    that wrapper would start as its child.

    Why resolve rather than run the wrapper: with the wrapper, the node is a node.js process plus its
    child, signals reach anvil only if the wrapper forwards them, and a SIGKILL of the wrapper (a crash)
    leaves anvil running; the native binary is one process that stops when told. The binary is looked
    up where the wrapper looks (node's module resolution from the package, then the wrapper's fallback
    locations). Raises :class:`AnvilNotFound`, naming the binary to use, when it is not there.
    """
    script = Path(path).resolve()
    package = script.parent
    if script.name != "bin.mjs" or not _is_npm_wrapper(package):
        return path
    relative = Path("@foundry-rs") / _platform_package() / "bin" / _binary_name()
    candidates = [
        directory / "node_modules" / relative
        for directory in (package, *package.parents)
        if directory.name != "node_modules"
    ]
    candidates += [package.parent / "dist" / _binary_name(), package / _binary_name()]  # the wrapper's fallbacks
    for binary in candidates:
        if binary.is_file() and os.access(binary, os.X_OK):
            return str(binary)
    raise AnvilNotFound(
        f"{path} is the npm package's node wrapper (@foundry-rs/anvil); the native binary it starts, "
        f"node_modules/{relative.as_posix()}, is not installed beside it (an install without optional "
        f"dependencies, or another platform's node_modules). Install it (npm install -E "
        f"@foundry-rs/{_platform_package()}@{ANVIL_VERSION}) and point --anvil / CHAINFENCE_ANVIL at "
        f"node_modules/{relative.as_posix()}"
    )


def dev_keys(count: int = 10) -> list[str]:
    """Private keys of anvil's funded dev accounts (public knowledge: dev chains only)."""
    Account.enable_unaudited_hdwallet_features()
    return [
        Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}").key.to_0x_hex() for i in range(count)
    ]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` (connections in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _group_members(group: int) -> list[int] | None:
    """The live processes of process group ``group`` (zombies aside: a container's init may never reap
    them), from ``/proc``; None where there is no ``/proc``."""
    if not Path("/proc/self/stat").exists():
        return None
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                line = file.read().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        fields = line[line.rfind(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(group):
            members.append(int(entry))
    return members


def _group_alive(group: int) -> bool:
    """Whether any process of process group ``group`` still runs."""
    members = _group_members(group)
    if members is not None:
        return bool(members)
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _listener_is(pid: int, port: int) -> bool:
    """Whether the socket listening on 127.0.0.1:``port`` belongs to process ``pid`` or a process of its
    group (``pid`` leads the group it was started in: a wrapper's child anvil is the node too).

    A connection alone does not say so: when two processes pick the same free port at once, the
    second anvil fails to bind and exits, but until it does the first one answers on the port, and
    both callers would share one node (each other's snapshots, reverts and blocks). On Linux the
    listening socket's inode is looked up in ``/proc/net/tcp`` and among the group's descriptors;
    elsewhere the answer is only "the process is still running"."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        return True
    wanted = f"0100007F:{port:04X}"
    inodes = {
        fields[9]
        for fields in (line.split() for line in table.read_text().splitlines()[1:])
        if len(fields) > 9 and fields[1] == wanted and fields[3] == "0A"  # 0A: LISTEN
    }
    for member in {pid, *(_group_members(pid) or [])}:
        try:
            descriptors = os.listdir(f"/proc/{member}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                target = os.readlink(f"/proc/{member}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return True
    return False


def _listening(path: str) -> bool:
    """Whether something accepts connections on the Unix socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        try:
            s.connect(path)
        except OSError:
            return False
    return True


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, between fork and exec
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def remove_dead_socket(path: str) -> None:
    """Unlink the Unix socket file at ``path`` if nothing accepts on it (a stopped or dead node's).

    anvil does not remove its ``--ipc`` socket when it exits, and a file left there stops the next
    anvil from listening on that path. A socket someone still listens on, or any other file, stays.
    """
    import stat

    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return
    except OSError:
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(path)
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # nobody listens


def _end_group(process: subprocess.Popen[bytes], *, hard: bool, timeout: float) -> int:
    """End ``process`` and every process of the group it leads (a wrapper's child anvil outlives a wrapper
    that is stopped alone): SIGINT (``hard``: SIGKILL) to the group, SIGKILL to what is left after
    ``timeout`` seconds. Returns the started process's exit code."""
    group = process.pid if os.name == "posix" else None

    def signal_all(sig: int) -> None:
        if group is None:
            if process.poll() is None and sig == _SIGKILL:
                process.kill()
            elif process.poll() is None:
                process.send_signal(sig)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)  # the group exists while a member lives: its id is not reused before

    deadline = time.monotonic() + timeout
    if process.poll() is None or (group is not None and _group_alive(group)):
        signal_all(_SIGKILL if hard else signal.SIGINT)
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        signal_all(_SIGKILL)
        process.wait()
    while group is not None and _group_alive(group):
        if time.monotonic() >= deadline:
            signal_all(_SIGKILL)
            if time.monotonic() >= deadline + 30:
                break  # a process stuck in the kernel: nothing more to do from here
        time.sleep(0.01)
    return process.returncode


def _drain(process: subprocess.Popen[bytes], limit: int = 64 * 1024) -> str:
    """The last ``limit`` bytes ``process`` wrote to its stderr pipe, then the pipe closed; never waits for
    a writer that outlived it (a child that left the group)."""
    if process.stderr is None:
        return ""
    with process.stderr:
        if os.name != "posix":
            return process.stderr.read()[-limit:].decode(errors="replace")
        fd = process.stderr.fileno()
        os.set_blocking(fd, False)
        kept = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            kept = (kept + chunk)[-limit:]
    return kept.decode(errors="replace")


class AnvilProcess:
    """One anvil process on 127.0.0.1 (a free port unless ``port`` is given).

    Another local node that forks no daemon (the suite's hardhat and ganache, tests/support/nodes.py)
    starts and stops the same way: a subclass names it (``name``), builds its command line (``_args``)
    and may give it an environment of its own (``env``)."""

    #: What the node is called in the errors of :meth:`start`.
    name = "anvil"

    def __init__(
        self,
        binary: str | None = None,
        *,
        port: int | None = None,
        state: Path | None = None,
        state_interval: int = 1,
        hardfork: str = "prague",
        accounts: int = 10,
        extra_args: tuple[str, ...] = (),
        die_with_parent: bool = False,
        ipc: str | Path | None = None,
    ):
        self.binary = native_anvil(binary) if binary else find_anvil()
        #: The IPC socket anvil also answers on (``--ipc``), if asked for one: a path for
        #: :meth:`Chain.connect <chainfence.Chain.connect>` (Unix sockets: at most 107 bytes).
        self.ipc_path: str | None = str(ipc) if ipc is not None else None
        #: Linux: anvil gets SIGKILL when the thread that started it dies (a crash of
        #: `chainfence node` is then a crash of its chain, never an orphan on the port).
        self.die_with_parent = die_with_parent
        self.requested_port = port
        self.port = port or 0
        self.state = state
        self.state_interval = state_interval
        self.hardfork = hardfork
        self.accounts = accounts
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        #: What anvil wrote to stderr, and its exit code, once stopped (or once a start failed).
        self.stderr = ""
        self.returncode: int | None = None
        #: The environment the node starts with (None: this process's).
        self.env: dict[str, str] | None = None
        #: The directory anvil persists the states it evicts from memory into (``--cache-path``), made for
        #: this process and removed when it stops: by default anvil writes them under
        #: ``~/.foundry/anvil/tmp`` and never removes them (gigabytes from a test session).
        self._cache: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _args(self) -> list[str]:
        args = [
            self.binary,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--hardfork",
            self.hardfork,
            "--accounts",
            str(self.accounts),
            "--mnemonic",
            DEV_MNEMONIC,
            "--silent",
        ]
        if self.state is not None:
            args += ["--state", str(self.state), "--state-interval", str(self.state_interval)]
        if self.ipc_path is not None:
            args += ["--ipc", self.ipc_path]
        self._remove_cache()
        self._cache = tempfile.mkdtemp(prefix="chainfence-anvil-cache-")
        args += ["--cache-path", self._cache]
        return args + self.extra_args

    def _remove_cache(self) -> None:
        if self._cache is not None:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None

    def start(self, timeout: float = 60.0) -> AnvilProcess:
        """Start anvil and return once it accepts connections on its port (and its IPC socket, if any)
        from a process of its own group.

        anvil runs in a new session, its own process group, which :meth:`stop` and :meth:`kill` end as a
        whole. A failure raises :class:`NodeUnreachable` saying why (anvil's exit code and stderr,
        another process on the port, or the check that did not pass within ``timeout`` seconds) and
        leaves no process of the group behind. Only a port lost to another process is retried, on
        another free port (up to 5 starts); anything else fails at once."""
        attempts = 1 if self.requested_port else 5
        reason = ""
        for _attempt in range(attempts):
            if not self.requested_port:
                self.port = free_port()
            elif not port_is_free(self.port):
                raise NodeUnreachable(f"port {self.port} on 127.0.0.1 is in use: pick another with --port")
            self.process = subprocess.Popen(
                self._args(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=os.name == "posix",
                preexec_fn=_die_with_parent if self.die_with_parent and platform.system() == "Linux" else None,
            )
            reason, port_lost = self._await_ready(timeout)
            if not reason:
                return self
            self.kill()  # a node that never started has nothing to save
            port_lost = port_lost or "Address already in use" in self.stderr
            reason = f"{reason}; {self._stderr_tail()}"
            if not port_lost or self.requested_port:
                break
        raise NodeUnreachable(f"{self.name} did not start on 127.0.0.1:{self.port}: {reason}")

    def _await_ready(self, timeout: float) -> tuple[str, bool]:
        """Wait for the started process to serve; ``("", False)`` when it does, else why not and whether
        the port was lost to another process (worth a retry on another port)."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        answered = False
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                return f"it exited with code {code}", False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
            except OSError:
                pass
            else:
                answered = True
                if not _listener_is(self.process.pid, self.port):
                    return f"another process (not one of {self.name}'s process group) listens on port {self.port}", True
                if self.ipc_path is None or _listening(self.ipc_path):
                    return "", False
            time.sleep(0.02)
        if answered:
            return f"its IPC socket {self.ipc_path} accepted no connection within {timeout:g} s", False
        return f"it accepted no connection on 127.0.0.1:{self.port} within {timeout:g} s", False

    def _stderr_tail(self) -> str:
        tail = self.stderr.strip()[-500:]
        return f"its stderr: {tail}" if tail else "nothing on stderr"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """Stop anvil's process group with SIGINT (anvil saves its state first), SIGKILL if any process
        of it is left after ``timeout`` seconds."""
        if self.process is None:
            return
        process, self.process = self.process, None
        self.returncode = _end_group(process, hard=False, timeout=timeout)
        self.stderr = _drain(process)
        self._remove_cache()
        if self.ipc_path is not None:
            remove_dead_socket(self.ipc_path)  # anvil leaves its socket file behind when it exits

    def kill(self) -> None:
        """SIGKILL to anvil's whole process group: no chance to save state (what a crash looks like)."""
        if self.process is None:
            return
        process, self.process = self.process, None
        self.returncode = _end_group(process, hard=True, timeout=15.0)
        self.stderr = _drain(process)
        self._remove_cache()

    def __enter__(self) -> AnvilProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
