"""What every ``chainfence`` command shares: exit codes, options, configuration, output.

Each command module of :mod:`chainfence.cli` registers its commands with
:func:`add_command` (which records the command's example, shown at the end
of its ``--help``) and binds its handler with ``set_defaults(run=handler)``;
a handler takes the parsed arguments and the root parser and returns the exit
code. It connects with :func:`connect`, prints its answer with :func:`emit`
(text, or one JSON document under ``--json``) and raises: a
:class:`UsageError` or a :class:`~chainfence.errors.ChainfenceError` becomes
its exit code (:func:`exit_code`) in :func:`chainfence.cli.main`.

Nothing here imports web3, the chain or the registry at module level
(``chainfence --help`` and ``--version`` stay light): :func:`connect` imports
them when a command runs.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, NoReturn

from .._core.limits import MAX_NAME_LENGTH
from .._core.times import chain_time as show_time
from ..errors import (
    AuditIndexDiffers,
    AuditIndexMismatch,
    ChainfenceError,
    CommandNotFound,
    CommandNotRun,
    InvalidInput,
    LeaseHeld,
    LeaseLost,
    LockDelayed,
    NamespaceError,
    NodeUnreachable,
    TokenNotCurrent,
    TransactionInDoubt,
    UnverifiedAnswer,
)

# ---------------------------------------------------------------------------
# Exit codes (documented in the README and in ``chainfence --help``: EPILOG)
# ---------------------------------------------------------------------------

EXIT_OK = 0
EXIT_NOTHING_TO_CLAIM = 8  # `claim`: every item is done or held live by others (no error)
# Each error class carries its code (``exit_code``, chainfence.errors); these name them:
EXIT_ERROR = ChainfenceError.exit_code  # 1: any other chainfence error
EXIT_USAGE = InvalidInput.exit_code  # 2: bad arguments or configuration (or a missing extra); nothing was sent
EXIT_HELD = LeaseHeld.exit_code  # 3: someone else holds the lease
EXIT_NOT_CURRENT = TokenNotCurrent.exit_code  # 4: stale, unknown, expired, released, unconfirmed, or not yours
EXIT_CONNECTION = NodeUnreachable.exit_code  # 5: no node, wrong chain, rolled-back chain, no registry, no anvil
EXIT_OUTCOME = TransactionInDoubt.exit_code  # 6: a transaction timed out (cancelled) or its outcome is unknown
EXIT_LOST = LeaseLost.exit_code  # 7: `lock`: the lease was lost while the command ran; its session was stopped
EXIT_REFUSED = NamespaceError.exit_code  # 9: a namespace refused the caller: not its admin, taken, not admitted
EXIT_LOCK_DELAY = LockDelayed.exit_code  # 10: the lease expired and its namespace's lock-delay still runs
EXIT_INDEX_MISMATCH = AuditIndexMismatch.exit_code  # 11: `audit`: the index file is another registry's, or none
EXIT_INDEX_DIFFERS = AuditIndexDiffers.exit_code  # 12: `audit verify`: the index and the chain differ
EXIT_UNVERIFIED = UnverifiedAnswer.exit_code  # 13: the proven mode: an answer did not verify, or no proofs
# `chainfence lock` passes its command's code through; its own ends exit apart from it, as timeout(1) keeps
# 124-127: LOCK_OWN + the code above (103: held, 107: the lease was lost, 102: usage), and as a shell does:
EXIT_CANNOT_RUN = CommandNotRun.exit_code  # 126: `lock`: the command was found but cannot be run (not executable)
EXIT_NOT_FOUND = CommandNotFound.exit_code  # 127: `lock`: no such command
#: What ``chainfence lock`` adds to the code of each of its own ends (:func:`lock_exit_code`).
LOCK_OWN = 100


def lock_exit_code(code: int) -> int:
    """The code ``chainfence lock`` exits with for an end of its own whose code is ``code`` elsewhere: 100 +
    ``code``, apart from every code below 100 its command may exit with (the command's own pass through)."""
    return LOCK_OWN + code


def exit_code(error: ChainfenceError) -> int:
    """The documented exit code for a chainfence error: its class's ``exit_code``."""
    return error.exit_code


#: The end of ``chainfence --help`` (and of ``node --help`` and ``lock --help``).
EPILOG = """\
exit codes:
  0  success (verify: the token is current)
  1  other error
  2  usage or configuration error, bad input, a missing extra (nothing was sent)
  3  lease held by someone else (`chainfence lock` exits 103 for it: below)
  4  token not current: stale, unknown, expired, released, unconfirmed, or not yours
  5  connection problem: node unreachable, wrong chain, a chain that lost history (rolled back),
     a provider whose history keeps changing (audit sync), no registry at the address, no anvil
  6  transaction timed out (cancelled: nothing happened) or outcome unknown (reconcile: chainfence tx HASH...);
     `chainfence tx`: not settled yet
  7  the lease was lost (`chainfence lock` exits 107 for it: below)
  8  `claim`: nothing left to claim (every item is done or held by another agent)
  9  refused by a namespace: not its admin (or not the pending one), already claimed, holder not admitted
  10  lock-delay: the lease expired and only its holder may acquire until the delay ends (retry after it)
  11  `audit`: the index file belongs to another registry (or is not an audit index)
  12  `audit verify`: the index and the chain differ (what differs is listed on stderr)
  13  `verify --proven`: an answer did not verify: a provider's proof or header does not (stderr names it:
      a lying or lagging provider), the header providers disagree, the header they vouch for is stale or
      behind, or the proof provider serves no eth_getProof; nothing was judged (too few answering: 5)
  101-113  `chainfence lock`'s own ends: 100 + their code above, apart from every code its command exits
     with (as timeout(1) keeps 124-127): 102 usage (nothing ran), 103 held by anyone (this key included,
     unless --take-over), 105 connection, 109 namespace, 110 lock-delay, 101 other, and 107 the lease was
     lost while the command ran (expired, released, superseded, revoked, granted, rolled back, or no
     renewal confirmed before the safe deadline: stderr says which; every process of the command's
     session got SIGTERM, then SIGKILL after --grace). Any other code of `chainfence lock` is its
     command's own (128+N if a signal N ended it)
  126  `chainfence lock`: the command was found but cannot be run (not executable); nothing ran
  127  `chainfence lock`: no such command; nothing ran

environment: CHAINFENCE_RPC_URL, CHAINFENCE_REGISTRY, CHAINFENCE_DEPLOYMENT,
             CHAINFENCE_PRIVATE_KEY, CHAINFENCE_KEYSTORE_PASSWORD, CHAINFENCE_ANVIL,
             CHAINFENCE_METRICS_PORT (lock, node, mcp: --metrics-port),
             CHAINFENCE_RELAYER (--relayer: lease operations through `chainfence relay`, no gas needed)
  CHAINFENCE_RPC_URL is the node for every command: an http(s) URL, or on the node's machine the
  path of its IPC socket, ending in .ipc (`node` listens on its port and prints its socket); a comma
  list of them (or --endpoints a,b,c) is for the commands that send no transaction (status, verify,
  stuck, tx, audit, namespace mine, namespace policy show): they use the first endpoint that answers.
  The others refuse a list (exit 2).

output: --json, -w json or -o json print one JSON document (etcdctl -w, consul -format)
"""


class UsageError(Exception):
    """A configuration problem found before talking to the chain (exit 2, nothing sent)."""


# ---------------------------------------------------------------------------
# Parsers, options and examples
# ---------------------------------------------------------------------------


def usage_document(message: str) -> dict[str, Any]:
    """The JSON document a usage error prints under ``--json`` (the shape of ``ChainfenceError.details()``)."""
    return {"error": "UsageError", "message": message, "exit_code": Parser.usage_exit_code}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error also prints one JSON document on stdout when --json (or ``-w json``)
    was given, and an argument a subcommand does not know is that subcommand's error: its usage is
    printed (``chainfence status --bogus`` shows ``usage: chainfence status ...``), not the top level's."""

    #: Set by :func:`chainfence.cli.main`: whether the command line asks for JSON.
    json_errors: ClassVar[bool] = False
    #: Set by :func:`chainfence.cli.main`: the code a usage error exits with (``lock``'s own: 102).
    usage_exit_code: ClassVar[int] = EXIT_USAGE
    #: Set by :func:`add_command`: the description is wrapped to the terminal (at most 100 columns) when the
    #: help is formatted. Wrapping every command's when the parser was built cost a per-task command
    #: textwrap's import; the help reads the same.
    wrapped_description: bool = False

    def format_help(self) -> str:
        if not (self.wrapped_description and self.description):
            return super().format_help()
        import textwrap

        written = self.description
        self.description = textwrap.fill(written, width=max(40, min(100, _help_width())))
        try:
            return super().format_help()
        finally:
            self.description = written

    def error(self, message: str) -> NoReturn:
        if Parser.json_errors:
            print(json.dumps(usage_document(f"{self.prog}: {message}")))
        self.print_usage(sys.stderr)
        self.exit(Parser.usage_exit_code, f"{self.prog}: error: {message}\n")  # argparse's, with our code

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, except that arguments left over are this parser's error. argparse hands a subcommand
        what follows its name and lets the top level report what the subcommand did not know, with the top
        level's usage; here the subcommand that was given them reports them, with its own."""
        unknown = self.unknown_options(sys.argv[1:] if args is None else args)
        if unknown:  # before argparse's own checks: `-t 30` is not "--ttl is required"
            self.error(f"unrecognized arguments: {' '.join(unknown)}{self.suggestion(unknown[0])}")
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def unknown_options(self, args: Sequence[str]) -> list[str]:
        """The arguments of ``args`` (up to ``--``) that are written as options and are none of this parser's
        (``-t`` where it has ``--ttl``), abbreviations and attached values read as argparse reads them; none
        for a parser with subcommands (theirs are read by the subcommand's parser)."""
        if any(isinstance(action, argparse._SubParsersAction) for action in self._actions):
            return []
        options = self._option_string_actions
        unknown = []
        for token in args:
            if token == "--":
                break
            if not token.startswith("-") or token == "-" or self._negative_number_matcher.match(token):
                continue
            if token.startswith("--"):
                name = token.partition("=")[0]
                known = name in options or any(option.startswith(name) for option in options if option[:2] == "--")
            else:
                known = token in options or token[:2] in options
            if not known:
                unknown.append(token)
        return unknown

    def suggestion(self, option: str) -> str:
        """What ``option``, which this parser does not know, may have meant: its long options that start with
        a short option's letter (``-t``: ``--ttl``; required ones first, then the shortest), or spelled close to
        one (``--regsitry``)."""
        longs = sorted(
            {name for name in self._option_string_actions if name.startswith("--")},
            key=lambda name: (not self._option_string_actions[name].required, len(name), name),
        )
        name = option.partition("=")[0]
        if name.startswith("--"):
            import difflib

            close = difflib.get_close_matches(name, longs, n=3, cutoff=0.8)
            candidates = sorted(close, key=longs.index)
        else:
            candidates = [long for long in longs if long[2:3] == name[1:2]]
        if not candidates:
            return ""
        listed = candidates[0] if len(candidates) == 1 else f"{', '.join(candidates[:-1])} or {candidates[-1]}"
        return f" ({name} is no option of {self.prog}: did you mean {listed}?)"

    def subcommand(self, name: str) -> Parser:
        """This parser's subcommand ``name``."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                found: Parser = action.choices[name]
                return found
        raise KeyError(name)

    def takes_value(self, token: str) -> bool:
        """Whether ``token``, one of this parser's options as written on a command line, takes the next
        argument as its value (``--ttl`` 30, ``-w`` json) rather than none (``--json``, ``-vv``) or one
        of its own (``--ttl=30``, ``-wjson``). Abbreviations count as argparse reads them; an option this
        parser does not know takes none (argparse then reports it)."""
        actions = self._option_string_actions
        if token.startswith("--"):
            if "=" in token:
                return False
            if token in actions:
                return actions[token].nargs != 0
            matches = {id(action): action for option, action in actions.items() if option.startswith(token)}
            return len(matches) == 1 and next(iter(matches.values())).nargs != 0
        action = actions.get(token[:2])
        return action is not None and action.nargs != 0 and len(token) == 2

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse builds a formatter for every argument it adds (to check its metavar), and each one asks
        # shutil for the terminal's size: importing shutil and asking ~140 times cost a few ms of every
        # command's start. The width is the one shutil gives, asked once.
        return self.formatter_class(prog=self.prog, width=_help_width())  # type: ignore[call-arg]


@functools.cache
def _help_width() -> int:
    """The width argparse's help formatter takes by default: ``shutil.get_terminal_size().columns - 2``
    ($COLUMNS, else the terminal's, else 80), without importing shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # no stdout, or not a terminal
            columns = 80
    return columns - 2


@contextmanager
def translations_once() -> Iterator[None]:
    """While the parser is built, each of argparse's strings is translated once: argparse asks gettext
    for the same few ("show this help message and exit", ...) ~130 times for chainfence's parsers, and
    gettext looks for catalogs on disk each time (5 to 10 ms of every command's start)."""
    asked = argparse._  # type: ignore[attr-defined]
    argparse._ = functools.cache(asked)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._ = asked  # type: ignore[attr-defined]


#: One example per command, by the words that name it ("acquire", "namespace policy set", "audit history"):
#: each command's module gives it to :func:`add_command`, which shows it at the end of the command's --help.
EXAMPLES: dict[str, str] = {}

#: While a command line's parser is built (:func:`building_only`): the top-level subparsers and the one
#: command of them to build.
_ONLY: tuple[Any, str] | None = None


@contextmanager
def building_only(subparsers: Any, command: str) -> Iterator[None]:
    """While the parser of a command line naming ``command`` is built, :func:`add_command` builds that
    command alone among ``subparsers`` (the top level's): a group's other commands are handed an
    :class:`Unbuilt`. Their parsers (each a copy of the common options) were a twentieth of a per-task
    command's start; nothing reads them."""
    global _ONLY
    _ONLY = (subparsers, command)
    try:
        yield
    finally:
        _ONLY = None


class Unbuilt:
    """The stand-in :func:`add_command` hands a group for a command the command line does not name: every
    call that builds a parser (``add_argument``, argument groups, ``set_defaults``, subcommands) is taken
    and dropped."""

    def __getattr__(self, name: str) -> Callable[..., Unbuilt]:
        return self._taken

    def _taken(self, *args: Any, **kwargs: Any) -> Unbuilt:
        return self


def add_command(
    subparsers: Any,
    name: str,
    *,
    example: str,
    parents: Sequence[argparse.ArgumentParser] = (),
    epilog: str | None = None,
    **options: Any,
) -> argparse.ArgumentParser:
    """Add command ``name`` to ``subparsers`` (a ``add_subparsers()``), its ``example`` recorded in
    :data:`EXAMPLES` and shown first in its epilog; ``options`` go to ``add_parser``. Its ``--help`` opens
    with its ``description``, else with its one-line ``help`` (what the list of commands says of it),
    wrapped to the terminal (the epilog's layout is kept as written, so argparse wraps neither). While
    another command's parser is built (:func:`building_only`), an :class:`Unbuilt` stands in for it."""
    if isinstance(subparsers, Unbuilt) or (_ONLY is not None and subparsers is _ONLY[0] and name != _ONLY[1]):
        return Unbuilt()  # type: ignore[return-value]
    description = options.get("description") or options.get("help")
    if description:
        described = description[0].upper() + description[1:]
        options["description"] = described if described.endswith(".") else described + "."
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        parents=list(parents),
        epilog=f"example:\n  {example}\n" + (f"\n{epilog}" if epilog else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **options,
    )
    if description and isinstance(parser, Parser):
        parser.wrapped_description = True
    EXAMPLES[parser.prog.split(" ", 1)[1]] = example  # "chainfence namespace policy set" -> "namespace policy set"
    return parser


#: What a resource name may be, as the commands' help says it: the bound is the contract's
#: (:data:`chainfence._core.limits.MAX_NAME_LENGTH`), the rest what ``acquire`` publishes (``_names.publishable``).
NAME_RULES = f"1 to {MAX_NAME_LENGTH} bytes of UTF-8, printable, no whitespace at either end"


#: The largest integer an option takes (a block number, a time, a count, a ttl): what a node's u64 and
#: SQLite's integers hold. A fencing token (--token) goes up to 2**256 - 1.
MAX_OPTION_INT = 2**63 - 1


def int_at_least(minimum: int, maximum: int = MAX_OPTION_INT) -> Callable[[str], int]:
    """An option's integer type: from ``minimum`` to ``maximum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {text[:40]}{'...' if len(text) > 40 else ''}")
        return value

    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)
token = int_at_least(1, 2**256 - 1)


def seconds(text: str) -> float:
    """A finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, got {text}")
    return value


def timeout(text: str) -> float:
    """``--timeout``: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):  # NaN compares false
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text}")
    return value


def wait_seconds(text: str) -> float:
    """``--wait``: seconds, checked as ``acquire(wait=...)`` checks them."""
    from .._sdk import validate as _validate

    try:
        return _validate.wait(float(text))
    except ValueError as exc:  # not a number, or InvalidInput
        if isinstance(exc, InvalidInput):
            raise argparse.ArgumentTypeError(str(exc)) from None
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def completeness_option(parser: argparse.ArgumentParser) -> None:
    """``--completeness MODE``: how a sync checks that ``eth_getLogs`` left no registry event out."""
    parser.add_argument(
        "--completeness",
        metavar="MODE",
        default="bloom",
        help="how a sync checks that eth_getLogs left no registry event out: 'bloom' (default) reads a block's "
        "receipts where its logsBloom says the answer may lack an event (an event withheld beside an answered one "
        "of the same kind passes unseen); 'receipts' reads the receipts of every block whose bloom may hold one, "
        "against receiptsRoot (a request more per page with registry activity; nothing withheld passes)",
    )


def completeness(args: argparse.Namespace) -> str:
    """``--completeness``, checked before anything is opened or asked (InvalidInput: exit 2)."""
    from .._node.completeness import mode_of

    return mode_of(args.completeness, default="bloom")


def metrics_option(parser: argparse.ArgumentParser) -> None:
    """``--metrics-port PORT``: Prometheus metrics on 127.0.0.1:PORT/metrics while the command runs."""
    parser.add_argument(
        "--metrics-port",
        type=int_at_least(1, 65_535),
        metavar="PORT",
        default=None,
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics while this runs (default: "
        "$CHAINFENCE_METRICS_PORT, else none; needs the [metrics] extra; docs/metrics.md)",
    )


def serve_metrics(args: argparse.Namespace) -> Any:
    """Start the metrics server ``--metrics-port`` or ``$CHAINFENCE_METRICS_PORT`` names (None: neither)."""
    port = getattr(args, "metrics_port", None)
    if port is None:
        text = os.environ.get("CHAINFENCE_METRICS_PORT", "").strip()
        if not text:
            return None
        if not text.isdigit() or not 1 <= int(text) <= 65_535:
            raise UsageError(f"$CHAINFENCE_METRICS_PORT must be a port (1..65535), got {text!r}")
        port = int(text)
    from .._core.metrics import serve

    try:
        return serve(port)
    except OSError as busy:
        raise UsageError(f"cannot serve metrics on 127.0.0.1:{port}: {busy.strerror or busy}") from None


def verbosity_options() -> argparse.ArgumentParser:
    """A parent parser for -v/--verbose, so that it is accepted after a subcommand too
    (``chainfence status -v``) as well as before it."""
    parent = Parser(add_help=False)
    # Counted apart from the top-level -v (argparse would let one replace the other); main() adds them.
    parent.add_argument(
        "-v", "--verbose", action="count", dest="verbose_after", default=0, help="log lease changes (-v) and RPC (-vv)"
    )
    return parent


#: The output formats ``-w``/``--write-out`` and ``-o``/``--output`` take (etcdctl's ``-w json``, consul's
#: ``-format=json``): ``json`` is ``--json``, ``text`` the default.
OUTPUT_FORMATS = ("json", "text")


def output_options(parser: argparse.ArgumentParser, json_help: str = "print one JSON document") -> None:
    """Add ``--json`` and its spellings ``-w/--write-out FORMAT`` and ``-o/--output FORMAT`` to ``parser``:
    every command with ``--json`` has all of them (:func:`output_format` reads them)."""
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument(
        "-w",
        "--write-out",
        "-o",
        "--output",
        dest="output",
        choices=OUTPUT_FORMATS,
        metavar="FORMAT",
        help="output format: json (the same as --json) or text (the default), as etcdctl -w and consul -format",
    )


def output_format(args: argparse.Namespace) -> None:
    """Settle ``args.json`` from ``--json`` and ``-w``/``-o`` (a usage error when they disagree)."""
    output = getattr(args, "output", None)
    if output is None:
        return
    if args.json and output != "json":
        raise UsageError(f"--json and --output {output} disagree: give one of them")
    args.json = output == "json"


def wants_json(argv: Sequence[str]) -> bool:
    """Whether a command line (chainfence's part of it) asks for JSON: ``--json``, ``-w json``,
    ``-o json``, ``--write-out=json``, ``-ojson``, ...; read before parsing, so that a usage error is a
    JSON document too."""
    for position, token in enumerate(argv):
        if token == "--json":
            return True
        option, equals, value = token.partition("=")
        if token in ("-w", "-o", "--write-out", "--output"):
            value = argv[position + 1] if position + 1 < len(argv) else ""
        elif equals and option in ("--write-out", "--output"):
            pass
        elif token[:2] in ("-w", "-o") and not token.startswith("--"):
            value = token[2:]
        else:
            continue
        if value == "json":
            return True
    return False


#: What several endpoints are for. A command that sends no transaction (``status``, ``verify``, ``stuck``,
#: ``tx``, ``audit ...``, ``namespace policy show``, ``namespace mine``) connects to the first endpoint of
#: the list that answers, in order (failover when it starts; a node that fails later is not replaced).
#: Every other command talks to one node and refuses a list (:class:`~chainfence.errors.InvalidInput`,
#: exit 2): a transaction is followed, cancelled and reconciled on the node it was sent to.
ENDPOINTS_HELP = (
    "several JSON-RPC endpoints (http(s) URLs or IPC socket paths), comma-separated (default: "
    "$CHAINFENCE_RPC_URL, which may be such a list): commands that send no transaction use the first that "
    "answers; the others refuse a list"
)


def common_options() -> argparse.ArgumentParser:
    """The parent parser of every command that talks to a registry: where it is, the key, --json."""
    common = Parser(add_help=False, parents=[verbosity_options()])
    node = common.add_mutually_exclusive_group()
    node.add_argument(
        "--rpc-url",
        help="the node: an http(s) JSON-RPC URL, or the path of its IPC socket (ending in .ipc) on this machine "
        "(default: $CHAINFENCE_RPC_URL, else the deployment file)",
    )
    node.add_argument("--endpoints", metavar="URL,URL,...", help=ENDPOINTS_HELP)
    common.add_argument("--registry", help="registry address (default: $CHAINFENCE_REGISTRY, else the deployment file)")
    common.add_argument(
        "--deployment", help="deployment file (default: $CHAINFENCE_DEPLOYMENT or .chainfence/deployment.json)"
    )
    common.add_argument(
        "--keystore", help="encrypted key file; password from $CHAINFENCE_KEYSTORE_PASSWORD or a prompt"
    )
    common.add_argument(
        "--relayer",
        metavar="URL",
        help="send acquisitions, renewals, releases, completions and claims as intents the key signs and this "
        "relayer (`chainfence relay`) sends and pays for: the key needs no gas (default: $CHAINFENCE_RELAYER)",
    )
    common.add_argument(
        "--confirmations",
        type=non_negative_int,
        help="blocks on top before a transaction counts (default: 0 on dev chains, 3 elsewhere)",
    )
    common.add_argument(
        "--timeout",
        type=timeout,
        default=120.0,
        help="seconds to wait for a transaction to be mined, and as long again for its --confirmations (default 120)",
    )
    output_options(common)
    return common


# ---------------------------------------------------------------------------
# Configuration: flags, then the environment, then the deployment file
# ---------------------------------------------------------------------------


#: :data:`chainfence.deployment.DEFAULT_PATH`, as a string: the deployment module (and pathlib) is imported
#: only when a deployment file is there to read.
DEFAULT_DEPLOYMENT = os.path.join(".chainfence", "deployment.json")


def deployment(args: argparse.Namespace, *, must_exist: bool = True) -> Any:
    """The deployment file's record, or None when there is none at the default path. A file named
    explicitly (--deployment, $CHAINFENCE_DEPLOYMENT) must exist unless ``must_exist`` is False
    (`deploy` writes it)."""
    named = args.deployment or os.environ.get("CHAINFENCE_DEPLOYMENT")
    path = named or DEFAULT_DEPLOYMENT
    if os.path.exists(path):
        from ..deployment import load  # here: most commands run without a deployment file

        return load(path)
    if named and must_exist:
        from pathlib import Path

        where = "--deployment" if args.deployment else "$CHAINFENCE_DEPLOYMENT"
        raise UsageError(f"deployment file {str(Path(path))!r} ({where}) does not exist")
    return None


def load_key(args: argparse.Namespace) -> str | bytes | None:
    """The signing key: from the keystore file (--keystore) or $CHAINFENCE_PRIVATE_KEY, never the command line."""
    if args.keystore:
        from eth_account import Account

        try:
            with open(args.keystore, encoding="utf-8") as file:
                encrypted = json.load(file)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read keystore {args.keystore}: {exc}") from None
        password = os.environ.get("CHAINFENCE_KEYSTORE_PASSWORD")
        if password is None:
            if not sys.stdin.isatty():
                raise UsageError("keystore password: set CHAINFENCE_KEYSTORE_PASSWORD (no terminal to prompt on)")
            import getpass

            password = getpass.getpass(f"password for {args.keystore}: ")
        try:
            key: bytes = Account.decrypt(encrypted, password)
        except ValueError:
            raise UsageError(f"wrong password for keystore {args.keystore}") from None
        return key
    return os.environ.get("CHAINFENCE_PRIVATE_KEY") or None


#: Where one endpoint of a list ends and the next begins: a comma before the next ``http(s)://``, or before
#: a node's IPC socket path that starts with ``/`` or ``.`` (``.ipc`` ending it before the next comma).
#: A comma inside one URL's path or query is the URL's own.
_LIST = re.compile(r",\s*(?=https?://|[/.][^,]*\.ipc(?:,|$))", re.IGNORECASE)
#: A comma right after an IPC socket path ends it too (``anvil.ipc,other.ipc``).
_AFTER_SOCKET = re.compile(r"(?<=\.ipc),\s*")


def split_endpoints(text: str) -> list[str]:
    """``a,b,c`` (or ``a, b, c``) as its endpoints: each an ``http://`` or ``https://`` URL, or a node's
    IPC socket path (ending in ``.ipc``). A comma starts the next endpoint before ``http(s)://``, before a
    socket path that starts with ``/`` or ``.``, and right after a socket path; a comma elsewhere (in a
    URL's path or query, in a socket's file name) belongs to the endpoint it is in. Nothing else is
    stripped: whitespace anywhere else stays in the endpoint, which the URL check then refuses."""
    endpoints: list[str] = []
    for piece in _LIST.split(text):
        endpoints += [piece] if "://" in piece else _AFTER_SOCKET.split(piece)
    return endpoints


def endpoints(args: argparse.Namespace, record: Any) -> tuple[list[str], str]:
    """The node URLs the command line names, and where they came from: --rpc-url (one), --endpoints (a
    list), $CHAINFENCE_RPC_URL (one or a list), or the deployment file's (``record``), each checked."""
    from .._sdk import validate as _validate

    listed = getattr(args, "endpoints", None)
    if args.rpc_url is not None:
        urls, where = [args.rpc_url], "--rpc-url"
    elif listed is not None:
        urls, where = split_endpoints(listed), "--endpoints"
    elif os.environ.get("CHAINFENCE_RPC_URL"):
        urls, where = split_endpoints(os.environ["CHAINFENCE_RPC_URL"]), "$CHAINFENCE_RPC_URL"
    elif record is not None and record.rpc_url:
        urls, where = [record.rpc_url], "the deployment file's rpc_url"
    else:
        raise UsageError("no node: pass --rpc-url, set CHAINFENCE_RPC_URL, or run `chainfence node`")
    if len(urls) == 1:
        return [_validate.rpc_url(urls[0], where)], where
    return [_validate.rpc_url(url, f"{where} (endpoint {n} of {len(urls)})") for n, url in enumerate(urls, 1)], where


def rpc_url(args: argparse.Namespace, record: Any) -> str:
    """The node's URL, for a command that talks to one node: --rpc-url, $CHAINFENCE_RPC_URL, or the
    deployment file's (``record``). A list of endpoints is :class:`~chainfence.errors.InvalidInput` (exit 2)."""
    urls, where = endpoints(args, record)
    if len(urls) > 1:
        raise one_node_only(len(urls), where)
    return urls[0]


def one_node_only(count: int, where: str) -> InvalidInput:
    """The error of a command that talks to one node, given ``count`` endpoints (never their URLs)."""
    return InvalidInput(
        f"{where} names {count} endpoints, but this command talks to one node (a transaction is followed and "
        "reconciled on the node it was sent to; a node or a server runs against one): give one with --rpc-url. "
        "Several endpoints are for the commands that send no transaction (status, verify, stuck, tx, audit, "
        "namespace policy show): they use the first that answers",
        argument="url",
    )


def connect(
    args: argparse.Namespace,
    *,
    needs_key: bool,
    needs_registry: bool = True,
    wants_key: bool = False,
    failover: bool | None = None,
) -> tuple[Any, Any]:
    """The chain and registry (None without ``needs_registry``) the flags, environment and deployment file
    name. ``needs_key``: a command that signs (no key is a usage error); ``wants_key``: one that signs when a
    key is given (``mcp``). ``failover``: whether several endpoints may be given, the first that answers
    used (default: when the command signs nothing; see :data:`ENDPOINTS_HELP`)."""
    from ..chain import Chain, Timeouts
    from ..registry import Registry

    record = deployment(args, must_exist=needs_registry)
    urls, where = endpoints(args, record)
    if failover is None:
        failover = not (needs_key or wants_key)  # a command that sends no transaction
    if len(urls) > 1 and not failover:
        raise one_node_only(len(urls), where)
    # Read-only commands never read the key: a malformed CHAINFENCE_PRIVATE_KEY cannot break `status`.
    key = load_key(args) if needs_key or wants_key else None
    if needs_key and key is None:
        raise UsageError(
            "no signing key: set CHAINFENCE_PRIVATE_KEY or pass --keystore (never a key on the command line)"
        )
    # A relayer sends what this key signs: only for a command that signs.
    relayer = (getattr(args, "relayer", None) or os.environ.get("CHAINFENCE_RELAYER") or None) if key else None
    unreachable: list[NodeUnreachable] = []
    for url in urls:  # the first that answers (one, unless this command may fail over)
        try:
            chain = Chain.connect(
                url,
                private_key=key,
                confirmations=args.confirmations,
                timeouts=Timeouts(receipt=args.timeout, confirmation=args.timeout),
                relayer=relayer,
            )
            break
        except NodeUnreachable as silent:
            unreachable.append(silent)
    else:
        if len(unreachable) == 1:
            raise unreachable[0]
        raise NodeUnreachable(
            f"none of the {len(urls)} endpoints of {where} answers: "
            + "; ".join(f"{n}: {error}" for n, error in enumerate(unreachable, 1))
        )
    if not needs_registry:
        return chain, None
    address = args.registry or os.environ.get("CHAINFENCE_REGISTRY")
    if address:
        registry = Registry.at(chain, address)
    elif record is not None:
        registry = Registry.from_deployment(chain, record)
    else:
        raise UsageError(
            "no registry: pass --registry, set CHAINFENCE_REGISTRY, or run `chainfence node` / `chainfence deploy`"
        )
    return chain, registry


def target(args: argparse.Namespace) -> tuple[str, str]:
    """(name, display) of RESOURCE, or of work item RESOURCE of --workset (``workset»item``), checked
    before anything is asked of the node: a bad name is exit 2 with nothing sent."""
    from .._sdk import names as _names
    from .._sdk import validate as _validate

    workset = getattr(args, "workset", None)
    name = args.resource if workset is None else _names.item_name(workset, args.resource)
    _validate.resource_id(name)
    return name, _names.display_name(name)


def publishable(*names: str) -> None:
    """Check names a command would publish (``acquire``, ``lock``, ``acquire-many``) before anything is asked
    of the node: a name with whitespace at an end, a control character or over the length bound is exit 2
    with the SDK's message, with no node needed and nothing sent."""
    from .._sdk import names as _names

    for name in names:
        _names.publishable(name)


def utf8(text: str, what: str) -> bytes:
    """``text`` from the command line as UTF-8 (bytes the terminal sent that are not UTF-8 reach Python
    as lone surrogates: refused, exit 2)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8 text") from None


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def emit(
    args: argparse.Namespace,
    document: Any,
    text: str | Callable[[], str] | None,
    *,
    stream: Any = None,
    note: str | None = None,
) -> None:
    """A command's answer: ``document`` as one JSON line under --json, else ``text`` on stdout (or
    ``stream``) and ``note``, a line for people, on stderr. ``document`` and ``text`` may be functions,
    called only when printed (when making them reads the chain again, such as its time); a ``text`` of
    None prints nothing without --json."""
    if args.json:
        print(json.dumps(document() if callable(document) else document))
        return
    if callable(text):
        text = text()
    if text is not None:
        print(text, file=sys.stdout if stream is None else stream)
    if note is not None:
        print(note, file=sys.stderr)


def report(args: argparse.Namespace, document: dict[str, Any], lines: Sequence[str]) -> None:
    """A failure: ``document`` (with its ``exit_code``) as one JSON line on stdout under --json, and
    ``lines`` on stderr always."""
    if getattr(args, "json", False):
        print(json.dumps(document))
    for line in lines:
        print(line, file=sys.stderr)


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """Rows under headers, in columns as wide as their widest cell."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def when(chain_time: int | None, now: int | None = None) -> str:
    """A chain time (Unix seconds) in UTC, and how far it is from ``now`` when given; "-" for none (0)."""
    if not chain_time:
        return "-"
    stamp = show_time(chain_time)
    if now is None:
        return stamp
    delta = chain_time - now
    relative = f"in {delta} s" if delta > 0 else ("now" if delta == 0 else f"{-delta} s ago")
    return f"{stamp} ({relative})"


def lease_document(lease: Any) -> dict[str, Any]:
    """A lease just acquired, claimed or granted, as ``--json`` prints it."""
    return {
        "resource": lease.resource,
        "token": lease.token,
        "holder": lease.holder,
        "expires_at": lease.expires_at,
        "reason": lease.reason.name.lower(),
        "previous_token": lease.previous_token,
        "tx_hash": lease.tx_hash,
        "block_number": lease.block_number,
    }


# ---------------------------------------------------------------------------
# While a slow step runs (stderr, terminals only, never with --json)
# ---------------------------------------------------------------------------


@contextmanager
def spinner(message: str, enabled: bool) -> Iterator[None]:
    """A spinner on stderr while a slow step runs (terminals only)."""
    if not enabled or not sys.stderr.isatty():
        yield
        return
    done = threading.Event()

    def spin() -> None:
        for frame in itertools.cycle("|/-\\"):
            sys.stderr.write(f"\r{frame} {message}")
            sys.stderr.flush()
            if done.wait(0.1):
                break
        sys.stderr.write("\r" + " " * (len(message) + 2) + "\r")
        sys.stderr.flush()

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def waiting(chain: Any, args: argparse.Namespace, what: str) -> Any:
    """The spinner while a transaction of ``what`` is mined and confirmed."""
    k = chain.confirmations if args.confirmations is None else args.confirmations
    label = f"{what}: waiting for the transaction" + (f" and {k} confirmations" if k else "")
    return spinner(label, enabled=not args.json)


class Progress:
    """A progress bar on stderr, on a terminal only: ``bar(done, first, last)`` after each step."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self.drawn = False

    def __call__(self, done: int, first: int, last: int) -> None:
        if not self.enabled:
            return
        total = max(1, last - first + 1)
        fraction = min(1.0, (done - first + 1) / total)
        filled = int(fraction * 30)
        sys.stderr.write(f"\rsync [{'#' * filled}{'.' * (30 - filled)}] {fraction:6.1%}  block {done}/{last}")
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
