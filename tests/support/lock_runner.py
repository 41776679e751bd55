"""`chainfence lock` as a process of its own, with the clock the test moves: for tests that signal it.

    python lock_runner.py [--clock FILE] [--naive] [--sigterm-in-popen [DIR]] [--sigterm-in-keep]
                          [--sigkill-in-preexec [--then-await-sigterm]] [--announce-keeping-handlers]
                          [--break-renewals] [--dump FILE] -- lock NAME ... -- CMD

``--clock FILE``: `lock`'s keep-alive and its sentinel count on the number in FILE (seconds; the test
rewrites it), so a renewal falls due, or a safe deadline passes, when the test says and not before.
``--naive``: run the naive `lock` of tests/support/naive_lock.py (the controls). ``--sigterm-in-popen``:
`lock` sends itself SIGTERM as it starts the command (inside ``subprocess.Popen``, before the fork),
the moment the naive version deadlocks at; with DIR, once the command has started and written
DIR/writer-*.pid (tests/support/lock_writer.py: its handlers are set), before Popen returns.
``--sigterm-in-keep``: `lock` sends itself SIGTERM once it holds the lease, before the command starts.
``--sigkill-in-preexec``: the command, forked but not yet exec'd (after `lock`'s own preexec_fn, if any),
SIGKILLs `lock`: `lock` dies the moment its command starts; with ``--then-await-sigterm`` it then closes
its descriptors (as ``close_fds`` does next: the sentinel reads EOF) and waits before its exec for the
sentinel's SIGTERM (:func:`await_sigterm`). ``--announce-keeping-handlers``: the command's preexec_fn is
main's before the fix (it tells the sentinel its session but keeps `lock`'s signal handlers until the
exec), for the control. ``--break-renewals``: every renewal
fails as if the node did not answer. ``--dump FILE``: SIGUSR2 writes every thread's stack to FILE
(faulthandler, which runs even while the main thread is stuck), so a test can see where it is stuck;
FILE.ready appears once it does, FILE.sigterm just before the SIGTERM of ``--sigterm-in-popen``.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def await_sigterm() -> None:
    """In the command, forked and not yet exec'd: close every descriptor past stderr, as Popen's close_fds is
    about to (the sentinel's pipe with them: `lock` is dead, so the sentinel reads EOF now and stops the
    session), then wait for the sentinel's SIGTERM. Under the default action it ends this process here;
    a handler inherited from `lock` catches it (recorded, then passed on) and the command goes on to exec."""
    came: list[int] = []
    inherited = signal.getsignal(signal.SIGTERM)
    if inherited == signal.SIG_IGN:
        return
    if callable(inherited):  # before the descriptors close: the SIGTERM may come the moment they do

        def caught(signum, frame):
            came.append(signum)
            inherited(signum, frame)

        signal.signal(signal.SIGTERM, caught)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    deadline = time.monotonic() + 60  # a safety net: the sentinel signals at once on EOF
    while not came and time.monotonic() < deadline:
        time.sleep(0.005)


class FileClock:
    """Seconds read from a file the test writes (atomically: a temporary file, then a rename)."""

    def __init__(self, path: str):
        self.path = Path(path)

    def __call__(self) -> float:
        try:
            return float(self.path.read_text())
        except (OSError, ValueError):
            return 0.0


def main(argv: list[str]) -> int:
    split = argv.index("--")
    options, rest = argv[:split], argv[split + 1 :]
    from chainfence import cli
    from chainfence.cli import lock as _cli_lock

    if "--clock" in options:
        clock = FileClock(options[options.index("--clock") + 1])
        _cli_lock._CLOCK = _cli_lock._SENTINEL_CLOCK = clock
    if "--naive" in options:
        from tests.support import naive_lock

        naive_lock.install()
        if "--clock" in options:
            naive_lock._CLOCK = clock
    if "--sigterm-in-popen" in options:
        real = subprocess.Popen
        after = options[options.index("--sigterm-in-popen") + 1 :][:1]
        started = Path(after[0]) if after and not after[0].startswith("--") else None

        def sigterm() -> None:
            if "--dump" in options:  # the test probes the stacks from now on
                Path(options[options.index("--dump") + 1] + ".sigterm").touch()
            os.kill(os.getpid(), signal.SIGTERM)

        def popen(*args, **kwargs):
            if started is None:
                sigterm()
            child = real(*args, **kwargs)
            if started is not None:
                while not any(started.glob("writer-*.pid")):
                    time.sleep(0.005)
                sigterm()
            return child

        subprocess.Popen = popen  # type: ignore[misc]
    if "--announce-keeping-handlers" in options:  # the control: main's announce, before the fix
        from chainfence.cli._supervisor import Sentinel

        def announce_only(self):
            os.write(self.fd, b"s %d\n" % os.getpid())

        Sentinel.announce = announce_only  # type: ignore[method-assign]
    if "--sigkill-in-preexec" in options:  # the command, forked, not yet exec'd, kills `lock` (SIGKILL)
        real_popen = subprocess.Popen
        gate = "--then-await-sigterm" in options

        def popen_killing(*args, **kwargs):
            before = kwargs.get("preexec_fn")

            def preexec():
                if before is not None:
                    before()
                os.kill(os.getppid(), signal.SIGKILL)
                if gate:
                    await_sigterm()

            return real_popen(*args, **{**kwargs, "preexec_fn": preexec})

        subprocess.Popen = popen_killing  # type: ignore[misc]
    if "--break-renewals" in options:  # every renewal meets a node that does not answer
        from chainfence.errors import NodeUnreachable
        from chainfence.lease import Lease

        def broken(self, ttl):
            raise NodeUnreachable("no node answers (lock_runner --break-renewals)")

        Lease._kept_renew_steps = broken  # type: ignore[method-assign]
    if "--sigterm-in-keep" in options:  # once the lease is held, before the command starts
        from chainfence.lease import Lease

        keep = Lease.keep

        def keep_signalled(self, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            return keep(self, **kwargs)

        Lease.keep = keep_signalled  # type: ignore[method-assign]
    if "--dump" in options:
        dump = open(options[options.index("--dump") + 1], "w")
        faulthandler.register(signal.SIGUSR2, file=dump, all_threads=True, chain=False)
        Path(dump.name + ".ready").touch()  # SIGUSR2 dumps from now on (before, it would end the process)
    return cli.main(rest)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main(sys.argv[1:]))
