"""The ``chainfence`` command.

::

    chainfence demo | node | deploy | mcp                             # start something          (start.py)
    chainfence acquire | renew | release | claim | complete            # hold leases, claim work (leases.py)
    chainfence status | verify | stuck | tx                            # read only                (reads.py)
    chainfence lock NAME [--ttl S] [--wait S] [--grace S] [--] CMD ARGS... # CMD under a lease (lock.py)
    chainfence audit sync|verify|history|token|holder|at|current|takeovers|completions|resources|timeline ...
                                                                       # the audit index          (audit.py)
    chainfence namespace mine|transfer|accept|policy set|policy show|admit ...
    chainfence revoke | grant | acquire-many                           # operators                (ops.py)
    chainfence relay [--port N] [--journal FILE]                       # a relayer: agents need no gas (relay.py)
    chainfence help [COMMAND...]                                       # COMMAND's --help          (here)

Each module registers its commands (``register(subparsers, common)``, each bound to its handler with
``set_defaults(run=...)``, each with its example); :mod:`._common` holds what they share: exit codes,
options, connecting, output (text or ``--json``). This module builds the parser from them and runs
the command: :func:`main`.

Configuration, flags first, then the environment, then the deployment file
(``--deployment``, ``$CHAINFENCE_DEPLOYMENT`` or ``.chainfence/deployment.json``):
``--rpc-url`` / ``--endpoints`` / ``CHAINFENCE_RPC_URL`` (one URL, or a comma list for the commands
that send no transaction: :data:`._common.ENDPOINTS_HELP`), ``--registry`` / ``CHAINFENCE_REGISTRY``.
The signing key comes only from ``CHAINFENCE_PRIVATE_KEY`` or a keystore file
(``--keystore``, password from ``CHAINFENCE_KEYSTORE_PASSWORD`` or a prompt),
never from the command line. ``--json`` (or ``-w json``, ``-o json``) prints one JSON document for scripts.
An argument a subcommand does not know is reported with that subcommand's usage (:class:`._common.Parser`).

Only this module configures logging handlers.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys
from types import ModuleType
from typing import NoReturn

from .. import __version__
from ..errors import ChainfenceError, NotConfirmed, OutcomeUnknown
from ._common import (
    EPILOG,
    EXIT_CANNOT_RUN,
    EXIT_CONNECTION,
    EXIT_ERROR,
    EXIT_HELD,
    EXIT_INDEX_DIFFERS,
    EXIT_INDEX_MISMATCH,
    EXIT_LOCK_DELAY,
    EXIT_LOST,
    EXIT_NOT_CURRENT,
    EXIT_NOT_FOUND,
    EXIT_NOTHING_TO_CLAIM,
    EXIT_OK,
    EXIT_OUTCOME,
    EXIT_REFUSED,
    EXIT_UNVERIFIED,
    EXIT_USAGE,
    LOCK_OWN,
    Parser,
    UsageError,
    building_only,
    common_options,
    exit_code,
    lock_exit_code,
    output_format,
    report,
    translations_once,
    usage_document,
    wants_json,
)

__all__ = [
    "EXIT_CANNOT_RUN",
    "EXIT_CONNECTION",
    "EXIT_ERROR",
    "EXIT_HELD",
    "EXIT_INDEX_DIFFERS",
    "EXIT_INDEX_MISMATCH",
    "EXIT_LOCK_DELAY",
    "EXIT_LOST",
    "EXIT_NOTHING_TO_CLAIM",
    "EXIT_NOT_CURRENT",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_OUTCOME",
    "EXIT_REFUSED",
    "EXIT_UNVERIFIED",
    "EXIT_USAGE",
    "LOCK_OWN",
    "exit_code",
    "lock_exit_code",
    "main",
    "run",
]

#: The command modules (of this package), in the order ``chainfence --help`` lists their commands.
GROUPS = ("start", "leases", "reads", "lock", "audit", "ops", "relay")

#: The module that registers each command. A command line that names one builds that module's commands
#: only: importing every module and building all 44 parsers took a fifth of a per-task command's start
#: (docs/explanation/design.md). ``tests/unit/test_cli_structure.py`` checks it against what the
#: modules register.
REGISTERED_BY = {
    **dict.fromkeys(("demo", "node", "deploy", "mcp"), "start"),
    **dict.fromkeys(("acquire", "renew", "release", "claim", "complete"), "leases"),
    **dict.fromkeys(("status", "verify", "stuck", "tx"), "reads"),
    "lock": "lock",
    "audit": "audit",
    **dict.fromkeys(("namespace", "revoke", "grant", "acquire-many"), "ops"),
    "relay": "relay",
}


def group(name: str) -> ModuleType:
    """The command module ``name`` (one of :data:`GROUPS`), imported."""
    return importlib.import_module(f"{__name__}.{name}")


def _parser(command: str | None = None) -> Parser:
    """The parser of every command; with ``command`` (a word of :data:`REGISTERED_BY`), of that command
    only, its module alone imported (the top level reads a command line naming ``command`` alike: it has no
    option that takes a value, and lists the commands only in its --help and when the word is none of
    them)."""
    with translations_once():
        return _build_parser(command)


def _build_parser(command: str | None) -> Parser:
    parser = Parser(
        prog="chainfence",
        description="Fencing tokens issued on-chain: leases on named resources, guards that reject stale holders.\n"
        "`chainfence help COMMAND` (or `chainfence COMMAND --help`) tells more of a command.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"chainfence {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log lease changes (-v) and RPC (-vv)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    common = common_options()
    if command in REGISTERED_BY:
        with building_only(commands, command):
            group(REGISTERED_BY[command]).register(commands, common)
    else:
        for name in GROUPS:
            group(name).register(commands, common)
    return parser


def split_lock(argv: list[str], lock: Parser) -> tuple[list[str], list[str]]:
    """``argv`` of ``chainfence [-v] lock ...`` as (chainfence's arguments, CMD and its arguments).

    ``lock [OPTIONS] NAME [OPTIONS] [--] CMD [ARGS...]``, as etcdctl's ``lock NAME cmd args``: after
    ``lock``, the options (those that take a value with it: ``--ttl 30``) and NAME are chainfence's;
    the first argument after NAME that does not start with ``-`` begins CMD, and everything from there
    on is CMD's, ``--`` and options included (``lock jobs/a grep -v x`` runs ``grep -v x``). A ``--``
    before CMD ends chainfence's arguments: what follows it is CMD, even when it starts with ``-``.
    """
    position = argv.index("lock") + 1
    named = False
    while position < len(argv):
        token = argv[position]
        if token == "--":
            return argv[:position], argv[position + 1 :]
        if token.startswith("-") and token != "-":
            position += 2 if lock.takes_value(token) else 1
        elif not named:
            named, position = True, position + 1
        else:
            return argv[:position], argv[position:]
    return argv, []


def help_words(argv: list[str]) -> list[str]:
    """``chainfence [-v] help [COMMAND...]`` as the command line it means: ``chainfence COMMAND... --help``
    (``help`` alone: ``chainfence --help``). Any other command line is returned as it is."""
    if _command_word(argv) != "help":
        return argv
    position = argv.index("help")
    words = argv[position + 1 :]
    while words[:1] == ["help"]:  # `help help`: the top level's
        words = words[1:]
    return [*argv[:position], *words, "--help"]


def _command_word(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first argument that is no top-level option (none takes a value)."""
    for token in argv:
        if token == "--":
            return None
        if not token.startswith("-"):
            return token
    return None


_FREEZING_AT_EXIT = False


def _no_last_collection() -> None:
    """Freeze every object at exit (``gc.freeze``), registered once per process.

    At exit the interpreter collects all the objects of the few hundred modules a command loaded, to find
    no garbage among them: about 7% of a whole ``chainfence status`` (docs/explanation/design.md).
    Frozen objects are still torn down by reference counting (module globals cleared, files closed); only
    unreachable reference cycles are left uncollected, their finalizers unrun, which Python never
    promises at exit."""
    global _FREEZING_AT_EXIT
    if not _FREEZING_AT_EXIT:
        atexit.register(gc.freeze)
        _FREEZING_AT_EXIT = True


#: The cyclic garbage collector's first threshold while a command runs: it looks for cycles after this
#: many more container objects were made than freed (Python's default: 700). A command builds its
#: modules' objects at start, none of them garbage, and the default ran about fifty collections through
#: them: 3% of a per-task command. A long-running one (``lock`` over a long command, ``audit
#: sync``) still collects, less often.
COLLECT_EVERY = 50_000


def run() -> NoReturn:
    """The ``chainfence`` command (the console script, ``python -m chainfence``): :func:`main` on the
    command line, then the process's exit, without the interpreter's teardown when nothing needs it.

    Once a command returned, what is left of the interpreter's exit is freeing every object of the
    modules it loaded, one by one: 4% of a per-task command's instructions. So when only
    the main thread is left, the output is flushed, the exit functions run (``atexit``: logging's last
    flush, finalizers registered for exit) and the process exits with the command's code (``os._exit``),
    as it would have after the teardown. Otherwise (another thread still runs, or the output cannot be
    flushed: a closed pipe) it exits as Python does (``sys.exit``), the same code, the same messages.
    """
    import threading

    code = main()
    if threading.active_count() == 1:
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
        except Exception:
            sys.exit(code)
        atexit._run_exitfuncs()
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
        except Exception:
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` (default: the process's command line) and return its exit code."""
    _no_last_collection()
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], COLLECT_EVERY), *thresholds[1:])
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    finally:
        gc.set_threshold(*thresholds)


def _main(argv: list[str]) -> int:
    argv = help_words(argv)
    word = _command_word(argv)
    parser = _parser(word)
    if word == "lock":
        ours, command = split_lock(argv, parser.subcommand("lock"))
    else:
        ours, command = argv, []
    # Usage errors print JSON too when JSON was asked for (in chainfence's arguments, not CMD's).
    Parser.json_errors = wants_json(ours[: ours.index("--")] if "--" in ours else ours)
    Parser.usage_exit_code = lock_exit_code(EXIT_USAGE) if word == "lock" else EXIT_USAGE  # lock's own: apart
    args = parser.parse_args(ours)
    if args.command == "lock":
        args.cmd = command
    args.verbose += getattr(args, "verbose_after", 0)
    if args.verbose:
        import logging  # here: a command without -v logs nowhere, and imports no logging (chainfence._core.log)

        logging.basicConfig(
            level=logging.DEBUG if args.verbose > 1 else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
    try:
        output_format(args)
        code: int = args.run(args, parser)
        return code
    except UsageError as problem:
        message = f"chainfence {args.command}: {problem}"
        report(args, usage_document(message), [message])
        return Parser.usage_exit_code
    except ChainfenceError as error:
        code = exit_code(error) if args.command != "lock" else lock_exit_code(exit_code(error))
        lines = [f"chainfence {args.command}: {type(error).__name__}: {error}"]
        lines += [f"  {note}" for note in getattr(error, "__notes__", ())]
        hashes = getattr(error, "tx_hashes", ())
        if isinstance(error, (OutcomeUnknown, NotConfirmed)) and hashes:
            lines.append(f"  transactions: {' '.join(hashes)} (nonce {error.nonce} of {error.sender})")
            lines.append(f"  reconcile before acting again: chainfence tx {' '.join(hashes)}")
        report(args, {**error.details(), "exit_code": code}, lines)
        return code
    except KeyboardInterrupt:
        import signal  # here: building its enums is a cost of every command's start

        return 128 + signal.SIGINT  # as a shell reports a command SIGINT ended
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error of ours. Point
        # stdout at devnull so the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR if args.command != "lock" else lock_exit_code(EXIT_ERROR)


if __name__ == "__main__":  # python -m chainfence.cli, as well as python -m chainfence
    run()
