"""`chainfence node`'s anvil: the settings chosen by measurement (docs/benchmarks/history.md, "The node
`chainfence node` starts"), and its IPC socket."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

from chainfence.cli import node as cli_node
from chainfence.testing.anvil import remove_dead_socket


def test_the_node_runs_anvil_with_the_measured_settings_and_an_ipc_socket(tmp_path):
    process = cli_node.node_process("anvil", port=8545, state=None, ipc=str(tmp_path / "a.ipc"), die_with_parent=False)
    args = process._args()
    assert args[args.index("--hardfork") + 1] == cli_node.NODE_HARDFORK == "cancun"
    assert args[args.index("--prune-history") + 1] == "256"
    assert args[args.index("--ipc") + 1] == str(tmp_path / "a.ipc")


def test_the_socket_goes_in_the_node_directory_or_a_short_path_when_that_is_too_long():
    short = cli_node.ipc_path(Path("/tmp/node"))
    assert short == str(Path("/tmp/node").resolve() / "anvil.ipc")
    deep = Path("/tmp") / ("d" * 120)
    long_one = cli_node.ipc_path(deep)
    assert long_one is not None and long_one.endswith(".ipc") and len(long_one.encode()) <= 100
    assert long_one == cli_node.ipc_path(deep), "the same directory, the same socket"
    assert long_one != cli_node.ipc_path(Path("/tmp") / ("e" * 120))


def test_a_socket_file_a_dead_node_left_is_removed_and_a_live_one_is_not():
    # A short directory: a Unix socket's path has at most 107 bytes, and pytest-xdist's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="cf-") as short:
        _stale_and_live(Path(short))


def _stale_and_live(tmp_path: Path) -> None:
    dead = str(tmp_path / "dead.ipc")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as left:
        left.bind(dead)  # the file stays after close: nobody listens on it any more
    remove_dead_socket(dead)
    assert not Path(dead).exists()
    live = str(tmp_path / "live.ipc")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listening:
        listening.bind(live)
        listening.listen(1)
        remove_dead_socket(live)
        assert Path(live).exists()
