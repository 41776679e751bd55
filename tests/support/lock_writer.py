"""A writer for `chainfence lock` tests: appends lines with its lease's token to a shared log until stopped.

    python lock_writer.py DIR [--ignore TERM,HUP,...]

Writes DIR/writer-<token>.pid (its pid; the token from CHAINFENCE_TOKEN,
"none" without one), then appends "<token> <n>" to DIR/log, one line every
few milliseconds, forever. Each signal it receives is appended to
DIR/signals-<token> ("TERM", "HUP", ...); signals named in --ignore are
recorded and otherwise ignored, the others end it as they would by default.

Run as ``sh -c 'python lock_writer.py DIR; echo cleanup $CHAINFENCE_TOKEN >> DIR/log'``
it is the forking command of the issue: a shell whose child does the writing.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def append(path: Path, line: str) -> None:
    with open(path, "a") as file:
        file.write(line + "\n")


def main() -> int:
    directory = Path(sys.argv[1])
    ignore = set()
    if "--ignore" in sys.argv:
        ignore = {name for name in sys.argv[sys.argv.index("--ignore") + 1].split(",") if name}
    token = os.environ.get("CHAINFENCE_TOKEN", "none")
    signals = directory / f"signals-{token}"

    def on_signal(signum, frame):
        name = signal.Signals(signum).name.removeprefix("SIG")
        append(signals, name)
        if name not in ignore:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)  # die of it, as by default

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1):
        signal.signal(sig, on_signal)
    pid_file = directory / f"writer-{token}.pid"
    pid_file.with_suffix(".tmp").write_text(str(os.getpid()))
    pid_file.with_suffix(".tmp").replace(pid_file)
    n = 0
    while True:
        append(directory / "log", f"{token} {n}")
        n += 1
        time.sleep(0.005)


if __name__ == "__main__":
    sys.exit(main())
