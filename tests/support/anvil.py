"""Start and stop a real anvil node on a free loopback port, for the test suite.

The binary comes from the project's own npm install of ``@foundry-rs/anvil``
(package.json, pinned): the platform package ships the native executable,
which we run directly (no node wrapper in between, so signals reach anvil).
"""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess
import time
from pathlib import Path

from eth_account import Account

ROOT = Path(__file__).resolve().parents[2]

#: anvil's default dev mnemonic; its accounts are funded at genesis.
MNEMONIC = "test test test test test test test test test test test junk"


class AnvilNotInstalled(RuntimeError):
    pass


def anvil_binary() -> str:
    """Path of the anvil executable: the npm platform package, else one on PATH."""
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}.get(platform.system(), "")
    machine = {"x86_64": "amd64", "AMD64": "amd64", "arm64": "arm64", "aarch64": "arm64"}.get(platform.machine(), "")
    name = "anvil.exe" if system == "win32" else "anvil"
    candidate = ROOT / "node_modules" / "@foundry-rs" / f"anvil-{system}-{machine}" / "bin" / name
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("anvil")
    if found:
        return found
    raise AnvilNotInstalled(
        f"anvil not found at {candidate} nor on PATH: run scripts/test.sh, or `npm install --no-save` "
        f"in {ROOT} (package.json pins @foundry-rs/anvil)"
    )


def dev_keys(count: int = 10) -> list[str]:
    """Private keys of anvil's default funded accounts."""
    Account.enable_unaudited_hdwallet_features()
    return [
        Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}").key.to_0x_hex() for i in range(count)
    ]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Anvil:
    """One anvil process on 127.0.0.1; ``url`` once started."""

    def __init__(self, *extra_args: str, hardfork: str = "prague", accounts: int = 10):
        self.extra_args = list(extra_args)
        self.hardfork = hardfork
        self.accounts = accounts
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> Anvil:
        binary = anvil_binary()
        for _attempt in range(5):
            self.port = free_port()
            args = [
                binary,
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--hardfork", self.hardfork,
                "--accounts", str(self.accounts),
                "--mnemonic", MNEMONIC,
                "--silent",
                *self.extra_args,
            ]  # fmt: skip
            self.process = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break  # exited: port taken between free_port() and bind, most likely
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                        return self
                except OSError:
                    time.sleep(0.02)
            stderr = self._stop_and_read()
            self.log.append(stderr)
        raise RuntimeError(f"anvil did not start on 127.0.0.1: {self.log[-1] if self.log else ''}")

    def stop(self) -> None:
        self._stop_and_read()

    def _stop_and_read(self) -> str:
        if self.process is None:
            return ""
        process, self.process = self.process, None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr is None:
            return ""
        with process.stderr:
            return process.stderr.read().decode(errors="replace")

    def __enter__(self) -> Anvil:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
