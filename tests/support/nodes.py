"""The suite's other node implementations: hardhat's node (EDR, hardhat 3.x) and ganache (7.9.x).

Both come from the project's npm install (package.json pins ``hardhat`` and
``ganache``; scripts/_env.sh installs them) and are started and stopped like
the suite's anvil (:class:`chainfence.testing.anvil.AnvilProcess`: a free
loopback port, a process group of their own, SIGINT then SIGKILL), with the
accounts of the dev mnemonic anvil uses, so :func:`dev_keys` signs for all three.

hardhat 3 needs Node >= 22.13. It runs on, in order: ``$CHAINFENCE_NODE``,
the Node 22 that scripts/_env.sh installs from the npm registry when the
machine's is older (requirements/node22, pinned), or ``node`` on ``PATH`` when
it is new enough. ganache runs on the machine's ``node``.

Clock: like the suite's anvil, both run on a logical clock, so no test's
chain-time arithmetic depends on how fast the machine runs it. ganache has
one of its own (``--miner.timestampIncrement 1``: each block one second after
the previous one). hardhat's node stamps each block with the wall clock (plus
what time travel added) and has no such option: it runs under libfaketime
(Debian's ``faketime``; scripts/_env.sh installs it) with the wall clock
frozen, so each block is one second after the previous one unless a test
moves time (``evm_setNextBlockTimestamp``, ``evm_increaseTime``), as on the
embedded chain. Timers of the node process itself run on the monotonic clock,
which is left alone.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from chainfence import Chain, Registry
from chainfence._node import artifacts
from chainfence._node.abi import encode as abi_encode
from chainfence.errors import AnvilNotFound
from chainfence.testing.anvil import DEV_MNEMONIC, AnvilProcess

ROOT = Path(__file__).resolve().parents[2]

__all__ = [
    "GANACHE_VERSION",
    "HARDHAT_VERSION",
    "NODE22_VERSION",
    "NODE_FOR_HARDHAT",
    "GanacheProcess",
    "HardhatProcess",
    "deploy_past_the_fork_check",
    "hardhat_node_binary",
    "libfaketime",
]

#: The versions package.json pins (tests/unit/test_npm_lock.py holds the lock to them).
HARDHAT_VERSION = "3.18.0"
GANACHE_VERSION = "7.9.2"
#: The oldest Node hardhat 3 runs on, and the one requirements/node22 pins.
NODE_FOR_HARDHAT = (22, 13, 0)
NODE22_VERSION = "22.23.3"

#: Seconds a node may take to accept connections (ganache takes ~4 s on an idle machine).
START_TIMEOUT = 90.0

#: The frozen wall clock hardhat's node runs on, and ganache's genesis time (2025-01-01 00:00:00 UTC).
GENESIS = "2025-01-01 00:00:00"
GENESIS_TIMESTAMP = 1_735_689_600


def node_version(node: str) -> tuple[int, ...] | None:
    """``node --version`` as numbers, None when it does not run."""
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    found = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)\s*", done.stdout)
    return tuple(int(part) for part in found.groups()) if done.returncode == 0 and found else None


def hardhat_node_binary() -> str:
    """A Node >= 22.13 for hardhat (see the module's docstring), or :class:`AnvilNotFound` saying how to get one."""
    candidates = [
        os.environ.get("CHAINFENCE_NODE", ""),
        str(ROOT / "requirements" / "node22" / "node_modules" / ".bin" / "node"),
    ]
    candidates.append(shutil.which("node") or "")
    seen = []
    for candidate in candidates:
        if not candidate or not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        version = node_version(candidate)
        if version is not None and version >= NODE_FOR_HARDHAT:
            return candidate
        seen.append(f"{candidate} ({'.'.join(map(str, version)) if version else 'does not run'})")
    raise AnvilNotFound(
        "hardhat 3 needs Node >= 22.13; found "
        + (", ".join(seen) or "none")
        + f". scripts/test.sh installs Node {NODE22_VERSION} from the npm registry into requirements/node22 "
        "(npm ci --prefix requirements/node22), or set CHAINFENCE_NODE to a node >= 22.13"
    )


def libfaketime() -> str:
    """The path of libfaketime's multi-threaded library (Debian's ``faketime``), or :class:`AnvilNotFound`."""
    explicit = os.environ.get("CHAINFENCE_LIBFAKETIME")
    found = [explicit] if explicit else []
    found += sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")) + sorted(
        glob.glob("/usr/lib/faketime/libfaketimeMT.so.1")
    )
    for path in found:
        if os.path.isfile(path):
            return path
    raise AnvilNotFound(
        "libfaketime not found: hardhat's node runs on a frozen wall clock (the suite's logical clock). "
        "scripts/test.sh installs it (as root: apt-get install -y faketime); or set CHAINFENCE_LIBFAKETIME"
    )


def _package_script(package: str, relative: str) -> str:
    script = ROOT / "node_modules" / package / relative
    if not script.is_file():
        raise AnvilNotFound(
            f"{script} not found: the project's npm install (scripts/test.sh, `npm ci`: package.json pins {package}) "
            "is missing or incomplete"
        )
    return str(script)


class _RpcMixin:
    url: str

    def request(self, method: str, params: list) -> object:
        """One JSON-RPC request to the node; an error reply raises ``RuntimeError``."""
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            reply = json.loads(response.read())
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return reply.get("result")


class HardhatProcess(_RpcMixin, AnvilProcess):
    """hardhat's node (``hardhat node``: EDR) on 127.0.0.1, its wall clock frozen (see the module's docstring)."""

    name = "hardhat"

    def __init__(self, *, accounts: int = 10, hardfork: str = "prague", port: int | None = None):
        super().__init__(hardhat_node_binary(), port=port, accounts=accounts, hardfork=hardfork)
        self.cli = _package_script("hardhat", "dist/src/cli.js")
        # hardhat 3 runs only from a project that installs it and reads its config as ESM: the suite's
        # config (tests/support/hardhat) takes the network from the environment, and writes what hardhat
        # writes (cache/, artifacts/build-info) to a scratch directory, not the checkout.
        self.config = ROOT / "tests" / "support" / "hardhat" / "hardhat.config.js"
        self.scratch = Path(tempfile.mkdtemp(prefix="cf-hardhat-"))
        network = {
            "chainId": 31337,
            "hardfork": hardfork,
            "accounts": {"mnemonic": DEV_MNEMONIC, "count": accounts},
        }
        self.env = {
            **os.environ,
            "LD_PRELOAD": libfaketime(),
            "FAKETIME": GENESIS,  # no "@": frozen there
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "HARDHAT_DISABLE_TELEMETRY": "true",
            "CHAINFENCE_HARDHAT_NETWORK": json.dumps(network),
            "CHAINFENCE_HARDHAT_SCRATCH": str(self.scratch),
            "NODE_NO_WARNINGS": "1",
        }

    def _args(self) -> list[str]:
        return [
            self.binary,
            self.cli,
            "--config",
            str(self.config),
            "node",
            "--hostname",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]

    def start(self, timeout: float = START_TIMEOUT) -> HardhatProcess:
        super().start(timeout=timeout)
        self.request("hardhat_setLoggingEnabled", [False])  # `hardhat node` logs every request otherwise
        return self

    def stop(self, timeout: float = 15.0) -> None:
        super().stop(timeout)
        shutil.rmtree(self.scratch, ignore_errors=True)


class GanacheProcess(_RpcMixin, AnvilProcess):
    """ganache on 127.0.0.1, on its own logical clock (one second a block from :data:`GENESIS`)."""

    name = "ganache"

    def __init__(self, *, accounts: int = 10, hardfork: str = "shanghai", port: int | None = None):
        node = shutil.which("node")
        if node is None:
            raise AnvilNotFound("node not found: ganache runs on Node.js (install Node >= 18)")
        super().__init__(node, port=port, accounts=accounts, hardfork=hardfork)
        self.cli = _package_script("ganache", "dist/node/cli.js")

    def _args(self) -> list[str]:
        return [
            self.binary,
            self.cli,
            "--server.host",
            "127.0.0.1",
            "--server.port",
            str(self.port),
            "--server.ws",
            "false",
            "--chain.hardfork",
            self.hardfork,
            "--chain.time",
            GENESIS.replace(" ", "T") + "Z",
            "--miner.timestampIncrement",
            "1",
            "--wallet.mnemonic",
            DEV_MNEMONIC,
            "--wallet.totalAccounts",
            str(self.accounts),
            "--logging.quiet",
        ]


def deploy_past_the_fork_check(chain: Chain, *, max_ttl: int) -> Registry:
    """A registry on a node whose EVM predates the registry's fork (ganache 7: Shanghai), deployed as another
    tool would (one contract-creation transaction of the shipped bytecode), then opened with
    :meth:`Registry.at`. :meth:`Registry.deploy` refuses such a node (``NotSupported(fork="cancun")``): the paths that
    use MCOPY die there on "invalid opcode" (docs/nodes.md lists them). The suite's ganache subset runs on
    this registry, and only through the paths that use no MCOPY."""
    data = bytes.fromhex(artifacts.load()["bytecode"][2:]) + abi_encode(
        ["uint256", "string[]", "address[]"], [max_ttl, [], []]
    )
    receipt = chain.transact(chain.accounts[0], None, data)
    registry = Registry.at(chain, receipt["contractAddress"])
    registry.deployed_block = receipt["blockNumber"]
    return registry
