"""The ``chainfence`` command.

Exit codes: 0 success, 1 a chainfence error (message on stderr), 2 usage error.
Only this module configures logging handlers.
"""

from __future__ import annotations

import argparse
import logging
import sys

from . import __version__
from .errors import ChainfenceError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chainfence",
        description="Fencing tokens issued on-chain: leases on named resources, guards that reject stale holders.",
    )
    parser.add_argument("--version", action="version", version=f"chainfence {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log lease changes (-v) and RPC (-vv)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    demo = commands.add_parser(
        "demo",
        help="run the paused-agent scenario on the embedded chain, with and without a guard",
        description="Agent A pauses past its lease, agent B takes over, A wakes and writes with its old "
        "token: once without fencing (B's write is lost), once behind a Guard (A is rejected).",
    )
    demo.add_argument("--ttl", type=_positive_int, default=30, help="lease length in seconds (default 30)")
    demo.add_argument("--pause", type=_positive_int, default=45, help="agent A's pause in seconds; must exceed the ttl (default 45)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(
            level=logging.DEBUG if args.verbose > 1 else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
    try:
        if args.command == "demo":
            if args.pause <= args.ttl:
                parser.error(f"--pause ({args.pause}) must be longer than --ttl ({args.ttl})")
            from .demo import run

            result = run(sys.stdout, ttl=args.ttl, pause=args.pause)
            ok = result.fenced.b_write_survived and not result.unfenced.b_write_survived
            return EXIT_OK if ok else EXIT_ERROR
    except ChainfenceError as exc:
        print(f"chainfence: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error of ours. Point
        # stdout at devnull so the interpreter's final flush stays quiet.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse rejects it first
    return EXIT_USAGE  # pragma: no cover
