"""The naive `chainfence lock` (main at 465abf9, verbatim but for its imports), for the controls of tests/faults/test_lock_processes.py.

It runs CMD in chainfence's process group, signals only its direct child on a loss, forwards SIGINT
and SIGTERM through a handler that takes a lock the main thread holds while it starts CMD, has no
sentinel, and re-acquires its own key's live lease. ``install()`` makes ``chainfence lock`` this.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from chainfence.cli import _common, lock
from chainfence.errors import ChainfenceError, LeaseLost


def install() -> None:
    lock._lock = _cmd_lock  # what `chainfence lock` runs: bound when main() builds the parser


#: The monotonic clock `lock` keeps its lease's safe deadline with (the tests substitute theirs).
_CLOCK: Callable[[], float] = time.monotonic


def _child_env(lease: Any, registry: Any, url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        CHAINFENCE_RESOURCE=lease.resource,
        CHAINFENCE_TOKEN=str(lease.token),
        CHAINFENCE_HOLDER=lease.holder,
        CHAINFENCE_REGISTRY=registry.address,
        CHAINFENCE_CHAIN_ID=str(registry.chain.chain_id),
        CHAINFENCE_RPC_URL=url,
    )
    return env


def _exit_status(returncode: int) -> int:
    """A child's exit code as a shell reports it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def _cmd_lock(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from chainfence.keepalive import DEFAULT_BLOCK_TIME_MARGIN, DEFAULT_LATENCY_MARGIN, KeepAliveCore

    command = args.cmd
    if not command:
        raise _common.UsageError("no command to run: chainfence lock NAME [--ttl S] -- CMD [ARGS...]")
    margins = {
        # SIGKILL comes --grace after SIGTERM: the deadline leaves room for it, and a second for the kill.
        "latency_margin": args.grace + DEFAULT_LATENCY_MARGIN if args.latency_margin is None else args.latency_margin,
        "block_time_margin": DEFAULT_BLOCK_TIME_MARGIN if args.block_time_margin is None else args.block_time_margin,
    }
    KeepAliveCore(args.ttl, 0.0, **margins)  # a ttl the margins leave no time in is refused before acquiring
    chain, registry = _common.connect(args, needs_key=True)
    url = _common.rpc_url(args, _common.deployment(args))
    lease = registry.acquire(args.resource, ttl=args.ttl, confirmations=args.confirmations, wait=args.wait)
    state = threading.Lock()
    child: subprocess.Popen[bytes] | None = None
    lost: list[LeaseLost] = []
    killer: list[threading.Timer] = []

    def stop_child() -> None:  # with `state` held
        if child is None or child.poll() is not None:
            return
        child.send_signal(signal.SIGTERM)
        timer = threading.Timer(args.grace, lambda: child.poll() is None and child.kill())
        timer.daemon = True
        timer.start()
        killer.append(timer)

    def on_lost(error: LeaseLost) -> None:
        with state:
            lost.append(error)
            print(
                f"chainfence lock: {error}; stopping the command (SIGTERM, SIGKILL after {args.grace:g} s)",
                file=sys.stderr,
                flush=True,
            )
            stop_child()

    def forward(signum: int, frame: Any) -> None:
        with state:
            if child is not None and child.poll() is None:
                child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            with lease.keep(on_lost=on_lost, clock=_CLOCK, **margins):
                with state:
                    try:
                        child = subprocess.Popen(command, env=_child_env(lease, registry, url))
                    except OSError as exc:
                        raise _common.UsageError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
                    if lost:  # lost before the command even started
                        stop_child()
                returncode = child.wait()
        finally:
            for timer in killer:
                timer.cancel()
            if child is not None and child.poll() is None:  # chainfence itself failed: never leave it running
                child.kill()
                child.wait()
    except LeaseLost as error:
        _release_quietly(lease)
        print(f"chainfence lock: {error}", file=sys.stderr)
        return _common.lock_exit_code(_common.EXIT_LOST)
    except BaseException:
        _release_quietly(lease)
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    lease.release()
    return _exit_status(returncode)


def _release_quietly(lease: Any) -> None:
    """Free a lease that may be gone already (lost, or the node failing): a refusal is not news."""
    if lease.released:
        return
    try:
        lease.release()
    except ChainfenceError as error:
        print(
            f"chainfence lock: releasing token {lease.token} failed: {type(error).__name__}: {error}", file=sys.stderr
        )
