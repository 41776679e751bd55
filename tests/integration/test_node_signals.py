"""`chainfence node` stops on SIGINT/SIGTERM whenever the signal lands.

Its main loop waits on a ``threading.Event``; a signal handler that sets that
event takes the event's lock, and a signal that lands while the main thread
itself holds that lock (inside ``Event.wait``) deadlocks the process: Ctrl-C
then never stops the node. Seen in the suite as ``Node.stop()`` timing out
with the node's process asleep on a futex, one thread, SIGINT handled.
The trap below lands the signal exactly there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from chainfence.testing.anvil import free_port

ROOT = Path(__file__).resolve().parents[2]

#: Runs serve() in the main thread with a stop event whose first wait signals the process while holding
#: the event's lock: the handler runs at the next bytecode, with the lock held.
TRAP = textwrap.dedent(
    """
    import os, signal, sys, threading
    from pathlib import Path
    from chainfence.cli import node

    class Trap(threading.Event):
        sprung = False

        def wait(self, timeout=None):
            if not Trap.sprung:
                Trap.sprung = True
                with self._cond:
                    print("signalling", flush=True)
                    os.kill(os.getpid(), signal.SIGINT)
            return super().wait(timeout)

    if sys.argv[3] == "naive":  # the handler as it was: it sets the event
        install = signal.signal
        signal.signal = lambda sig, handler: install(sig, lambda *_: stop.set())
    stop = Trap()
    node.serve(directory=Path(sys.argv[1]), port=int(sys.argv[2]), max_ttl=3600, as_json=True, out=sys.stdout, stop=stop)
    print("stopped", flush=True)
    """
)


def run_trap(tmp_path: Path, handler: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-c", TRAP, str(tmp_path / ".chainfence"), str(free_port()), handler],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_a_signal_that_lands_while_the_loop_holds_its_event_lock_stops_the_node(tmp_path):
    trap = run_trap(tmp_path, "fixed")
    try:
        out, err = trap.communicate(timeout=120)  # a safety net: the node stops within a loop turn
    finally:
        if trap.poll() is None:
            os.killpg(trap.pid, signal.SIGKILL)
            trap.communicate()
    assert trap.returncode == 0, err
    assert out.splitlines()[-2:] == ["signalling", "stopped"], out


def test_control_a_handler_that_sets_the_event_deadlocks_the_node(tmp_path):
    """The handler as it was (``stop.set()``): the process never gets past the signal."""
    trap = run_trap(tmp_path, "naive")
    try:
        assert trap.stdout is not None
        for line in trap.stdout:  # the announcement, then the trap's line
            if line.strip() == "signalling":
                break
        try:
            trap.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        assert trap.poll() is None, "a deadlock never ends: the node is still there"
    finally:
        os.killpg(trap.pid, signal.SIGKILL)  # its anvil dies with it (PDEATHSIG)
        trap.communicate()
