"""A local chain in one command: anvil on loopback, state on disk, the registry deployed.

``chainfence node`` runs :func:`serve`. The anvil binary comes from, in order:
``--anvil``, ``$CHAINFENCE_ANVIL``, a ``node_modules`` (the project's own
``npm install`` of ``@foundry-rs/anvil``, pinned) in the working directory or
any parent, or beside the installed package (an editable install in a
checkout), or ``anvil`` on ``PATH``. The npm package's node wrapper
(``node_modules/.bin/anvil``) is resolved to the native binary it ships, or
refused at once naming it; anvil runs in a process group of its own, which a
stop, or a failed start, ends whole.

State: anvil loads and dumps ``<dir>/anvil-state.json`` (every
``state_interval`` seconds, default 1, and on a clean stop), so leases,
tokens and the registry survive any number of restarts. A SIGKILL (of
anvil, or of this process: anvil dies with it) loses what happened since
the last save: acquisitions, renewals and releases of that interval are
gone, and their token numbers will be issued again, to whoever acquires
next. ``chainfence node`` keeps the highest token it saw in
``<dir>/node.json`` and says so on the next start when the chain came back
behind it; guards and fenced SQL transactions that accepted a lost token
refuse the re-issued numbers with :class:`~chainfence.errors.ChainRolledBack`.
anvil rewrites its state file in place, so a crash during a save can tear
it; ``chainfence node`` keeps the last complete save beside it
(``anvil-state.last-complete.json``) and starts from that one, saying so.

The node also answers on an IPC socket (``<dir>/anvil.ipc``, or a short
path in the temporary directory when that one is too long for a Unix socket),
announced as ``ipc_path``: from the same machine,
``Chain.connect(ipc_path)`` and ``CHAINFENCE_RPC_URL=<ipc_path>`` skip HTTP.

anvil's settings (:data:`NODE_HARDFORK`, :data:`NODE_OPTIONS`) are chosen by
measurement (``docs/benchmarks/history.md``, "The node `chainfence node` starts"):
anvil 1.7.1 spends time on every block in proportion to its state, and on
Prague the block-hash history contract (EIP-2935) adds a storage slot with
every block; historical states kept on disk cost more again. So the node runs
the Cancun rules (the registry is compiled for Cancun; gas figures are the
same) and keeps the last 256 states in memory, none on disk: reads at a block
more than 256 blocks back fail on this node.

The deployment file (``<dir>/deployment.json``) names the registry; on
restart it is reused when the node still has that registry (same chain id,
code at the address, same deployment block and hash). A new registry is
deployed only when the file is missing or the node provably lacks that
deployment (another chain, no code there, another deployment at the same
address: a wiped state); the replaced file is kept beside it. Any other
failure stops the node instead of replacing a registry people rely on.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from .._core import metrics as _metrics
from ..errors import ContractNotFound, NodeUnreachable, WrongChain
from ..testing.anvil import (
    ANVIL_VERSION,
    DEV_MNEMONIC,
    AnvilProcess,
    dev_keys,
    find_anvil,
    free_port,
    port_is_free,
    remove_dead_socket,
)

__all__ = [
    "ANVIL_VERSION",
    "DEV_MNEMONIC",
    "NODE_HARDFORK",
    "NODE_OPTIONS",
    "AnvilProcess",
    "dev_keys",
    "find_anvil",
    "free_port",
    "ipc_path",
    "node_process",
    "port_is_free",
    "serve",
]

#: The rules anvil runs for ``chainfence node`` (see the module docstring): Prague's block-hash history
#: contract grows anvil's state, and with it the time of every block, by a slot a block.
NODE_HARDFORK = "cancun"

#: anvil's options for ``chainfence node`` beyond the port, state and IPC socket (see the module docstring):
#: the last 256 states in memory, none written to disk.
NODE_OPTIONS: tuple[str, ...] = ("--prune-history", "256")

#: Longest IPC socket path used in the node's directory (Unix sockets take at most 107 bytes).
_MAX_SOCKET_PATH = 100


def ipc_path(directory: Path) -> str | None:
    """Where the node's IPC socket goes: ``<directory>/anvil.ipc``, or, if that path is too long for a Unix
    socket, ``chainfence-node-<hash of the directory>.ipc`` in the temporary directory; None where the
    platform has no Unix sockets."""
    if not hasattr(socket, "AF_UNIX") or os.name == "nt":
        return None
    path = str(directory.resolve() / "anvil.ipc")
    if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
        return path
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.fsencode(directory.resolve())).hexdigest()[:16]
    return str(Path(tempfile.gettempdir()) / f"chainfence-node-{digest}.ipc")


def node_process(
    binary: str, *, port: int, state: Path | None, state_interval: int = 1, ipc: str | None, die_with_parent: bool
) -> AnvilProcess:
    """anvil as ``chainfence node`` runs it (benchmarks start the same node through this)."""
    if ipc is not None:
        remove_dead_socket(ipc)
    return AnvilProcess(
        binary,
        port=port,
        state=state,
        state_interval=state_interval,
        hardfork=NODE_HARDFORK,
        extra_args=NODE_OPTIONS,
        ipc=ipc,
        die_with_parent=die_with_parent,
    )


def serve(
    *,
    directory: Path,
    port: int,
    max_ttl: int,
    anvil: str | None = None,
    as_json: bool = False,
    out: TextIO,
    stop: threading.Event | None = None,
    state_interval: int = 1,
) -> None:
    """Run a local node until SIGINT/SIGTERM (or ``stop`` is set); see the module docstring."""
    from ..chain import Chain, Timeouts
    from ..deployment import Deployment, load, save
    from ..registry import Registry

    binary = find_anvil(anvil)
    directory.mkdir(parents=True, exist_ok=True)
    state_path = directory / "anvil-state.json"
    deployment_path = directory / "deployment.json"
    backup = _StateBackup(state_path)
    notices = [notice] if (notice := backup.restore()) else []
    node = node_process(
        binary,
        port=port,
        state=state_path,
        state_interval=state_interval,
        ipc=ipc_path(directory),
        die_with_parent=True,
    )
    node.start()
    stop = stop or threading.Event()
    # The handler only records the signal: setting ``stop`` takes the event's lock, which the main thread
    # holds at moments inside ``stop.wait``; a signal landing then deadlocked the node (Ctrl-C never stopped
    # it). The loop below looks at ``signalled`` at every turn.
    signalled: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: signalled.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        keys = dev_keys(10)
        chain = Chain.connect(node.url, private_keys=keys, timeouts=Timeouts(poll=0.02))
        registry, reused, replaced = None, False, None
        if deployment_path.exists():
            try:
                registry = Registry.from_deployment(chain, deployment_path)
                reused = True
            except (WrongChain, ContractNotFound) as gone:
                # This node provably lacks that registry (a wiped or foreign state): keep the old
                # file for the record, deploy afresh. Other errors propagate: never replace a
                # registry people rely on because of a hiccup.
                replaced = deployment_path.with_name(f"deployment.replaced-{int(time.time())}.json")
                os.replace(deployment_path, replaced)
                registry = None
                notices.append(
                    f"the registry in {deployment_path} is not on this node ({gone}); "
                    f"deploying a new one (the old file is now {replaced.name})"
                )
        if registry is None:
            registry = Registry.deploy(chain, max_ttl=max_ttl)
            save(Deployment.of(registry, rpc_url=node.url), deployment_path)
        deployment = load(deployment_path)
        if deployment.rpc_url != node.url:  # same chain, other port this time
            save(Deployment(**{**deployment.__dict__, "rpc_url": node.url}), deployment_path)
        journal = _Journal(directory / "node.json", registry.address)
        latest = registry.latest_token()
        lost = journal.highest - latest if reused and journal.highest > latest else 0
        journal.record(latest)
        _metrics.node_token(latest)
        info = {
            "rpc_url": node.url,
            "ipc_path": node.ipc_path,
            "chain_id": chain.chain_id,
            "registry": registry.address,
            "reused": reused,
            "latest_token": latest,
            "lost_tokens": lost,
            "replaced_deployment_file": str(replaced) if replaced else None,
            "notices": notices,
            "deployment_file": str(deployment_path),
            "state_file": str(state_path),
            "state_interval": state_interval,
            "accounts": [{"address": a, "private_key": k} for a, k in zip(chain.accounts, keys)],
        }
        _announce(info, as_json=as_json, out=out)
        while not signalled and not stop.wait(0.2):
            if not node.alive():
                node.stop()  # ends what is left of its process group and collects its stderr
                said = node.stderr.strip()[-500:] or "nothing on stderr"
                raise NodeUnreachable(f"anvil exited unexpectedly with code {node.returncode}: {said}")
            backup.refresh()
            try:
                # At an explicit block: no rollback check here (a deliberate evm_revert is not a crash).
                now_latest = registry.latest_token(block="latest")
                _metrics.node_token(now_latest)
                journal.record(now_latest)
            except NodeUnreachable:
                pass  # stopping
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        node.stop()
        backup.refresh()  # the save anvil made on its way out
        if not as_json:
            print(f"stopped; state saved to {state_path}", file=out, flush=True)


def _complete(path: Path) -> bool:
    """Whether ``path`` holds a whole JSON document (anvil's saves are JSON)."""
    try:
        json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return True


class _StateBackup:
    """The last complete state anvil saved, kept beside the state file.

    anvil rewrites ``anvil-state.json`` in place (the file passes through size
    0): a crash during a save leaves it torn, and anvil then refuses to start
    on it. After each save this copies the file, if it is complete, to
    ``anvil-state.last-complete.json`` (written aside and renamed, fsynced);
    before a start a torn state file is set aside and the copy put back.
    """

    def __init__(self, state: Path):
        self.state = state
        self.copy = state.with_name("anvil-state.last-complete.json")
        self._seen: tuple[int, int] | None = None

    def restore(self) -> str | None:
        """Before anvil starts: replace a torn state file by the last complete save; says what it did."""
        if not self.state.exists() or _complete(self.state):
            return None
        torn = self.state.with_name(f"anvil-state.torn-{int(time.time())}.json")
        os.replace(self.state, torn)
        if _complete(self.copy):
            self._write(self.state, self.copy.read_bytes())
            return (
                f"the state file was torn by a crash during a save (kept as {torn.name}); starting from the last "
                f"complete save, {self.copy.name}"
            )
        return f"the state file was torn by a crash during a save (kept as {torn.name}) and no complete save exists: starting empty"

    def refresh(self) -> None:
        """After a save: keep a copy of the state file if it changed and is complete."""
        try:
            stat = self.state.stat()
        except OSError:
            return
        key = (stat.st_mtime_ns, stat.st_size)
        if key == self._seen:
            return
        try:
            data = self.state.read_bytes()
            json.loads(data)
        except (OSError, ValueError):
            return  # read mid-save: the next look will see the whole file
        self._write(self.copy, data)
        self._seen = key

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)


class _Journal:
    """The highest token ``chainfence node`` has seen from its registry, on disk (``node.json``).

    Written (and fsynced) whenever it rises, read on the next start: a
    reloaded state below it lost acquisitions to a crash.
    """

    def __init__(self, path: Path, registry: str):
        self.path = path
        self.registry = registry
        self.highest = 0
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("registry") == registry:
                self.highest = int(data.get("highest_token", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            self.highest = 0

    def record(self, latest: int) -> None:
        """The chain's latest token now (after a start: even if lower, once reported)."""
        if latest == self.highest and self.path.exists():
            return
        self.highest = latest
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump({"registry": self.registry, "highest_token": self.highest}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)


def _announce(info: dict[str, Any], *, as_json: bool, out: TextIO) -> None:
    if as_json:
        print(json.dumps(info), file=out, flush=True)
        return
    how = "found in" if info["reused"] else "deployed, recorded in"
    lines = [
        *info["notices"],
        f"chainfence node: anvil on {info['rpc_url']} (chain {info['chain_id']})",
        f"registry {info['registry']} ({how} {info['deployment_file']}); latest token {info['latest_token']}",
    ]
    if info["lost_tokens"]:
        lines.append(
            f"WARNING: the saved state is behind the last run by {info['lost_tokens']} token(s) (a crash before the "
            "last save): those acquisitions are gone and their numbers will be issued again; guards that "
            "accepted them refuse with ChainRolledBack"
        )
    lines += [
        (
            f"state: {info['state_file']} (saved every {info['state_interval']} s and on stop; a crash loses what came after "
            "the last save)"
        ),
        "",
        "funded dev accounts (anvil's public test keys: never use them on a real chain):",
    ]
    for account in info["accounts"][:4]:
        lines.append(f"  {account['address']}  CHAINFENCE_PRIVATE_KEY={account['private_key']}")
    lines += [
        "",
        f"export CHAINFENCE_RPC_URL={info['rpc_url']}",
        f"export CHAINFENCE_REGISTRY={info['registry']}",
    ]
    if info["ipc_path"]:
        lines.append(f"from this machine, its IPC socket skips HTTP: CHAINFENCE_RPC_URL={info['ipc_path']}")
    lines.append("Ctrl-C to stop.")
    print("\n".join(lines), file=out, flush=True)
