"""A writer for `chainfence lock` tests: appends lines with its lease's token to a shared log until stopped.

    python lock_writer.py DIR [--ignore TERM,HUP,...]

Writes DIR/writer-<token>.pid (its pid; the token from CHAINFENCE_TOKEN,
"none" without one), then appends "<token> <n>" to DIR/log, one line every
few milliseconds, forever. Each signal it receives is appended to
DIR/signals-<token> ("TERM", "HUP", ...); signals named in --ignore are
recorded and otherwise ignored, the others end it as they would by default.

Run as ``sh -c 'python lock_writer.py DIR; echo cleanup $CHAINFENCE_TOKEN >> DIR/log'``
(:func:`forking_command`) it is the forking command of the issue: a shell whose child does the writing.
The tests read what it wrote with :func:`log`, :func:`writer` and :func:`alive`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

WRITER = str(Path(__file__).resolve())


def forking_command(directory: Path, *writer_args: str) -> list[str]:
    """``sh -c 'writer; cleanup'``: the shell forks the writer and waits for it."""
    script = f'"{sys.executable}" "{WRITER}" "$0" {" ".join(writer_args)}; echo cleanup $CHAINFENCE_TOKEN >> "$0/log"'
    return ["sh", "-c", script, str(directory)]


def log(directory: Path) -> list[tuple[str, str]]:
    """The shared log's lines as (token, rest)."""
    path = directory / "log"
    if not path.exists():
        return []
    return [tuple(line.split(" ", 1)) for line in path.read_text().splitlines() if " " in line]  # type: ignore[misc]


def writer(directory: Path, *, besides: str | None = None) -> tuple[int, str] | None:
    """(pid, token) of the first writer (not of token ``besides``) that wrote a line, else None."""
    token = next((t for t, _ in log(directory) if t != besides), None)
    path = directory / f"writer-{token}.pid"
    if token is None or not path.exists():
        return None
    return int(path.read_text()), token


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not reaped by its new parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


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
