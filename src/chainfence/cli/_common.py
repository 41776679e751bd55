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
import datetime
import functools
import itertools
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from ..errors import (
    AnvilNotFound,
    AuditIndexDiffers,
    AuditIndexMismatch,
    ChainfenceError,
    ChainRolledBack,
    ContractNotFound,
    ExtraNotInstalled,
    InvalidInput,
    LeaseHeld,
    LeaseLost,
    LockDelayed,
    NamespaceError,
    NodeUnreachable,
    NotAdmitted,
    NotConfirmed,
    NotHolder,
    NotLive,
    OutcomeUnknown,
    TokenNotCurrent,
    TransactionTimeout,
    WrongChain,
)

# ---------------------------------------------------------------------------
# Exit codes (documented in the README and in ``chainfence --help``: EPILOG)
# ---------------------------------------------------------------------------

EXIT_OK = 0
EXIT_ERROR = 1  # any other chainfence error
EXIT_USAGE = 2  # bad arguments or configuration (or a missing extra); nothing was sent
EXIT_HELD = 3  # someone else holds the lease
EXIT_NOT_CURRENT = 4  # the token is stale, unknown, expired, released, unconfirmed, or not yours
EXIT_CONNECTION = 5  # no node, wrong chain, rolled-back chain, no registry there, no anvil
EXIT_OUTCOME = 6  # a transaction timed out (cancelled) or its outcome is unknown: reconcile
EXIT_LOST = 7  # `lock`: the lease was lost while the command ran; the command's session was stopped
EXIT_NOTHING_TO_CLAIM = 8  # `claim`: every item is done or held live by others
EXIT_REFUSED = 9  # a namespace refused the caller: not its admin, already claimed, not admitted
EXIT_LOCK_DELAY = 10  # the resource's lease expired and its namespace's lock-delay still runs
EXIT_INDEX_MISMATCH = 11  # `audit`: the index file belongs to another registry, or is not an index
EXIT_INDEX_DIFFERS = 12  # `audit verify`: the index and the chain differ

#: Errors -> exit codes: the first row whose classes the error is an instance of decides (a LockDelayed
#: is a refusal of its own before it is a held lease); any other chainfence error is EXIT_ERROR.
EXIT_CODES: tuple[tuple[tuple[type[ChainfenceError], ...], int], ...] = (
    ((InvalidInput, ExtraNotInstalled), EXIT_USAGE),
    ((LeaseLost,), EXIT_LOST),
    ((NamespaceError, NotAdmitted), EXIT_REFUSED),
    ((LockDelayed,), EXIT_LOCK_DELAY),
    ((LeaseHeld,), EXIT_HELD),
    ((NotLive, TokenNotCurrent, NotHolder), EXIT_NOT_CURRENT),
    ((NodeUnreachable, WrongChain, ChainRolledBack, ContractNotFound, AnvilNotFound), EXIT_CONNECTION),
    ((TransactionTimeout, OutcomeUnknown, NotConfirmed), EXIT_OUTCOME),
    ((AuditIndexMismatch,), EXIT_INDEX_MISMATCH),
    ((AuditIndexDiffers,), EXIT_INDEX_DIFFERS),
)


def exit_code(error: ChainfenceError) -> int:
    """The documented exit code for a chainfence error."""
    for classes, code in EXIT_CODES:
        if isinstance(error, classes):
            return code
    return EXIT_ERROR


#: The end of ``chainfence --help`` (and of ``node --help`` and ``lock --help``).
EPILOG = """\
exit codes:
  0  success (verify: the token is current)
  1  other error
  2  usage or configuration error, bad input, a missing extra (nothing was sent)
  3  lease held by someone else (`lock`: by anyone, this key included, unless --take-over)
  4  token not current: stale, unknown, expired, released, unconfirmed, or not yours
  5  connection problem: node unreachable, wrong chain, a chain that lost history (rolled back),
     no registry at the address, no anvil
  6  transaction timed out (cancelled: nothing happened) or outcome unknown (reconcile: chainfence tx HASH...);
     `chainfence tx`: not settled yet
  7  `chainfence lock`: the lease was lost while the command ran (expired, released, superseded, revoked,
     granted, rolled back, or no renewal confirmed before the safe deadline: stderr says which); every process
     of the command's session got SIGTERM, then SIGKILL after --grace
  `chainfence lock` otherwise exits with the command's code (128+N if a signal N ended it)
  8  `claim`: nothing left to claim (every item is done or held by another agent)
  9  refused by a namespace: not its admin (or not the pending one), already claimed, holder not admitted
  10  lock-delay: the lease expired and only its holder may acquire until the delay ends (retry after it)
  11  `audit`: the index file belongs to another registry (or is not an audit index)
  12  `audit verify`: the index and the chain differ (what differs is listed on stderr)

environment: CHAINFENCE_RPC_URL, CHAINFENCE_REGISTRY, CHAINFENCE_DEPLOYMENT,
             CHAINFENCE_PRIVATE_KEY, CHAINFENCE_KEYSTORE_PASSWORD, CHAINFENCE_ANVIL
"""


class UsageError(Exception):
    """A configuration problem found before talking to the chain (exit 2, nothing sent)."""


# ---------------------------------------------------------------------------
# Parsers, options and examples
# ---------------------------------------------------------------------------


def usage_document(message: str) -> dict[str, Any]:
    """The JSON document a usage error prints under ``--json`` (the shape of ``ChainfenceError.details()``)."""
    return {"error": "UsageError", "message": message, "exit_code": EXIT_USAGE}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error also prints one JSON document on stdout when --json was given."""

    #: Set by :func:`chainfence.cli.main`: whether the command line asks for --json.
    json_errors: ClassVar[bool] = False

    def error(self, message: str) -> NoReturn:
        if Parser.json_errors:
            print(json.dumps(usage_document(f"{self.prog}: {message}")))
        super().error(message)

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse builds a formatter for every argument it adds (to check its metavar), and each one asks
        # shutil for the terminal's size: importing shutil and asking ~140 times cost a few ms of every
        # command's start (issue #19). The width is the one shutil gives, asked once.
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
    gettext looks for catalogs on disk each time (5 to 10 ms of every command's start, issue #19)."""
    asked = argparse._  # type: ignore[attr-defined]
    argparse._ = functools.cache(asked)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._ = asked  # type: ignore[attr-defined]


#: One example per command, by the words that name it ("acquire", "namespace policy set", "audit history"):
#: each command's module gives it to :func:`add_command`, which shows it at the end of the command's --help.
EXAMPLES: dict[str, str] = {}


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
    :data:`EXAMPLES` and shown first in its epilog; ``options`` go to ``add_parser``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        parents=list(parents),
        epilog=f"example:\n  {example}\n" + (f"\n{epilog}" if epilog else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **options,
    )
    EXAMPLES[parser.prog.split(" ", 1)[1]] = example  # "chainfence namespace policy set" -> "namespace policy set"
    return parser


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
    from .. import _validate
    from ..errors import InvalidWait

    try:
        return _validate.wait(float(text))
    except ValueError as exc:  # not a number, or InvalidWait
        if isinstance(exc, InvalidWait):
            raise argparse.ArgumentTypeError(str(exc)) from None
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def verbosity_options() -> argparse.ArgumentParser:
    """A parent parser for -v/--verbose, so that it is accepted after a subcommand too
    (``chainfence status -v``) as well as before it."""
    parent = Parser(add_help=False)
    # Counted apart from the top-level -v (argparse would let one replace the other); main() adds them.
    parent.add_argument(
        "-v", "--verbose", action="count", dest="verbose_after", default=0, help="log lease changes (-v) and RPC (-vv)"
    )
    return parent


def common_options() -> argparse.ArgumentParser:
    """The parent parser of every command that talks to a registry: where it is, the key, --json."""
    common = Parser(add_help=False, parents=[verbosity_options()])
    common.add_argument("--rpc-url", help="JSON-RPC endpoint (default: $CHAINFENCE_RPC_URL, else the deployment file)")
    common.add_argument("--registry", help="registry address (default: $CHAINFENCE_REGISTRY, else the deployment file)")
    common.add_argument(
        "--deployment", help="deployment file (default: $CHAINFENCE_DEPLOYMENT or .chainfence/deployment.json)"
    )
    common.add_argument(
        "--keystore", help="encrypted key file; password from $CHAINFENCE_KEYSTORE_PASSWORD or a prompt"
    )
    common.add_argument(
        "--confirmations",
        type=non_negative_int,
        help="blocks on top before a transaction counts (default: 0 on dev chains, 3 elsewhere)",
    )
    common.add_argument(
        "--timeout", type=timeout, default=120.0, help="seconds to wait for a transaction to be mined (default 120)"
    )
    common.add_argument("--json", action="store_true", help="print one JSON document")
    return common


# ---------------------------------------------------------------------------
# Configuration: flags, then the environment, then the deployment file
# ---------------------------------------------------------------------------


def deployment(args: argparse.Namespace, *, must_exist: bool = True) -> Any:
    """The deployment file's record, or None when there is none at the default path. A file named
    explicitly (--deployment, $CHAINFENCE_DEPLOYMENT) must exist unless ``must_exist`` is False
    (`deploy` writes it)."""
    from ..deployment import default_path, load

    named = args.deployment or os.environ.get("CHAINFENCE_DEPLOYMENT")
    path = Path(args.deployment) if args.deployment else default_path()
    if path.exists():
        return load(path)
    if named and must_exist:
        where = "--deployment" if args.deployment else "$CHAINFENCE_DEPLOYMENT"
        raise UsageError(f"deployment file {str(path)!r} ({where}) does not exist")
    return None


def load_key(args: argparse.Namespace) -> str | bytes | None:
    """The signing key: from the keystore file (--keystore) or $CHAINFENCE_PRIVATE_KEY, never the command line."""
    if args.keystore:
        from eth_account import Account

        try:
            encrypted = json.loads(Path(args.keystore).read_text(encoding="utf-8"))
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


def rpc_url(args: argparse.Namespace, record: Any) -> str:
    """The node's URL: --rpc-url, $CHAINFENCE_RPC_URL, or the deployment file's (``record``)."""
    from .. import _validate

    if args.rpc_url is not None:
        url, where = args.rpc_url, "--rpc-url"
    elif os.environ.get("CHAINFENCE_RPC_URL"):
        url, where = os.environ["CHAINFENCE_RPC_URL"], "$CHAINFENCE_RPC_URL"
    else:
        url, where = (record.rpc_url if record else None), "the deployment file's rpc_url"
    if not url:
        raise UsageError("no node: pass --rpc-url, set CHAINFENCE_RPC_URL, or run `chainfence node`")
    return _validate.rpc_url(url, where)


def connect(
    args: argparse.Namespace, *, needs_key: bool, needs_registry: bool = True, wants_key: bool = False
) -> tuple[Any, Any]:
    """The chain and registry (None without ``needs_registry``) the flags, environment and deployment file
    name. ``needs_key``: a command that signs (no key is a usage error); ``wants_key``: one that signs when a
    key is given (``mcp``)."""
    from ..chain import Chain
    from ..registry import Registry

    record = deployment(args, must_exist=needs_registry)
    url = rpc_url(args, record)
    # Read-only commands never read the key: a malformed CHAINFENCE_PRIVATE_KEY cannot break `status`.
    key = load_key(args) if needs_key or wants_key else None
    if needs_key and key is None:
        raise UsageError(
            "no signing key: set CHAINFENCE_PRIVATE_KEY or pass --keystore (never a key on the command line)"
        )
    chain = Chain.connect(url, private_key=key, confirmations=args.confirmations, receipt_timeout=args.timeout)
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
    from .. import _names, _validate

    workset = getattr(args, "workset", None)
    name = args.resource if workset is None else _names.item_name(workset, args.resource)
    _validate.resource_id(name)
    return name, _names.display_name(name)


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
    stamp = datetime.datetime.fromtimestamp(chain_time, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
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
