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
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import socket
import subprocess
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
    "port_is_free",
    "remove_dead_socket",
]

#: anvil's default mnemonic: its accounts are funded at genesis. Public test keys: never use them elsewhere.
DEV_MNEMONIC = "test test test test test test test test test test test junk"

#: The anvil version package.json pins.
ANVIL_VERSION = "1.7.1"

_HOW_TO_GET_ANVIL = (
    "anvil not found. Get it with one of:\n"
    "  npm install --no-save          (in a chainfence checkout: package.json pins @foundry-rs/anvil "
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


def find_anvil(explicit: str | None = None, *, start: Path | None = None) -> str:
    """Path of an anvil executable (see the module docstring for the search order)."""
    for candidate in (explicit, os.environ.get("CHAINFENCE_ANVIL")):
        if candidate:
            if Path(candidate).is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
            raise AnvilNotFound(f"{candidate} is not an executable anvil binary")
    name = "anvil.exe" if platform.system() == "Windows" else "anvil"
    for directory in _search_roots(start):
        binary = directory / "node_modules" / "@foundry-rs" / _platform_package() / "bin" / name
        if binary.is_file():
            return str(binary)
    on_path = shutil.which("anvil")
    if on_path:
        return on_path
    raise AnvilNotFound(_HOW_TO_GET_ANVIL)


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


def _listener_is(pid: int, port: int) -> bool:
    """Whether the socket listening on 127.0.0.1:``port`` is process ``pid``'s.

    A connection alone does not say so: when two processes pick the same free port at once, the
    second anvil fails to bind and exits, but until it does the first one answers on the port, and
    both callers would share one node (each other's snapshots, reverts and blocks). On Linux the
    listening socket's inode is looked up in ``/proc/net/tcp`` and among ``pid``'s descriptors;
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
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in descriptors:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
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


class AnvilProcess:
    """One anvil process on 127.0.0.1 (a free port unless ``port`` is given)."""

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
        self.binary = binary or find_anvil()
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
        self.stderr = ""

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
        return args + self.extra_args

    def start(self, timeout: float = 60.0) -> AnvilProcess:
        attempts = 1 if self.requested_port else 5
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
                preexec_fn=_die_with_parent if self.die_with_parent and platform.system() == "Linux" else None,
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break  # exited: a port race, most likely
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                        pass
                    if _listener_is(self.process.pid, self.port) and (
                        self.ipc_path is None or _listening(self.ipc_path)
                    ):
                        return self
                except OSError:
                    pass
                time.sleep(0.02)
            self.stop()
        raise NodeUnreachable(f"anvil did not start on 127.0.0.1: {self.stderr.strip()[-500:]}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """Stop anvil with SIGINT (it saves its state first), SIGKILL if it does not exit in time."""
        if self.process is None:
            return
        process, self.process = self.process, None
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr is not None:
            with process.stderr:
                self.stderr = process.stderr.read().decode(errors="replace")
        if self.ipc_path is not None:
            remove_dead_socket(self.ipc_path)  # anvil leaves its socket file behind when it exits

    def kill(self) -> None:
        """SIGKILL: no chance to save state (what a crash looks like)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            if self.process.stderr is not None:
                self.process.stderr.close()
            self.process = None

    def __enter__(self) -> AnvilProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
