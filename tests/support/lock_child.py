"""The command `chainfence lock` runs in the tests: it reports its environment, works until told, reports SIGTERM.

    python lock_child.py DIR [CHAIN_URL] [--ignore-term]

Writes DIR/started.json (its pid and CHAINFENCE_* environment), then works
until DIR/finish appears (its content is the exit code). On SIGTERM it
writes DIR/terminated.json with the chain time of CHAIN_URL's pending block
(read directly, not through any proxy) and exits 143; with --ignore-term it
records the signal and carries on (until SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path


def chain_time(url: str | None) -> int | None:
    if not url:
        return None
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": ["pending", False]})
    request = urllib.request.Request(url, data=body.encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return int(json.loads(response.read())["result"]["timestamp"], 16)


def write(path: Path, data: dict) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data))
    temporary.replace(path)  # the test never reads half a file


def finish(directory: Path, code: int) -> None:
    """Tell the child in ``directory`` its work is done and to exit ``code``: written whole, then renamed
    into place, so the child that sees the file never reads it half written (it polls for it)."""
    temporary = directory / "finish.tmp"
    temporary.write_text(str(code))
    temporary.replace(directory / "finish")


def main() -> int:
    directory = Path(sys.argv[1])
    url = next((a for a in sys.argv[2:] if not a.startswith("--")), None)
    ignore = "--ignore-term" in sys.argv

    def on_term(signum, frame):
        write(directory / "terminated.json", {"signal": signum, "chain_time": chain_time(url)})
        if not ignore:
            sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    env = {k: v for k, v in os.environ.items() if k.startswith("CHAINFENCE_")}
    write(directory / "started.json", {"pid": os.getpid(), "env": env})
    finish = directory / "finish"
    while not finish.exists():  # the work: until the test says it is done
        time.sleep(0.01)
    return int(finish.read_text())


if __name__ == "__main__":
    sys.exit(main())
