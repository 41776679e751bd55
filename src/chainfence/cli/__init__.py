"""The ``chainfence`` command.

::

    chainfence node                       # local anvil, state on disk, registry deployed
    chainfence deploy [--max-ttl S]
    chainfence acquire NAME --ttl S [--wait S]   # --wait: wait up to S seconds for a held lease
    chainfence renew NAME --token T --ttl S [--progress MARKER]
    chainfence release NAME --token T
    chainfence status [NAME ...]
    chainfence verify NAME --token T      # exit 0 only if T is current
    chainfence stuck [--renewals N] [--longer-than S]   # stuck, crashed and long holders
    chainfence claim WORKSET ITEM... --ttl S            # the next free item; exit 8 when none is left
    chainfence complete NAME --token T [--workset WS] [--result TEXT]
    chainfence tx HASH... [--nonce N --account A]   # what became of a transaction
    chainfence lock NAME [--ttl S] [--wait S] [--grace S] -- CMD ARGS...   # run CMD holding the lease
    chainfence mcp [--http --port N]     # Model Context Protocol tools for agents (extra: chainfence[mcp])
    chainfence audit sync|verify|history|token|holder|at|current|takeovers|completions|resources ...
    chainfence namespace mine|transfer|accept|policy set|policy show|admit ...    # see _cli_ops
    chainfence revoke NAME | grant NAME HOLDER --ttl S | acquire-many NAME... --ttl S
    chainfence demo

Configuration, flags first, then the environment, then the deployment file
(``--deployment``, ``$CHAINFENCE_DEPLOYMENT`` or ``.chainfence/deployment.json``):
``--rpc-url`` / ``CHAINFENCE_RPC_URL``, ``--registry`` / ``CHAINFENCE_REGISTRY``.
The signing key comes only from ``CHAINFENCE_PRIVATE_KEY`` or a keystore file
(``--keystore``, password from ``CHAINFENCE_KEYSTORE_PASSWORD`` or a prompt),
never from the command line. ``--json`` prints one JSON document for scripts.

Only this module configures logging handlers.
"""

from __future__ import annotations

import argparse
import datetime
import getpass
import itertools
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import (
    AnvilNotFound,
    ChainfenceError,
    ChainRolledBack,
    ContractNotFound,
    ExtraNotInstalled,
    InvalidInput,
    LeaseHeld,
    LeaseLost,
    NodeUnreachable,
    NotConfirmed,
    NotHolder,
    OutcomeUnknown,
    TokenNotCurrent,
    TransactionTimeout,
    WrongChain,
)

#: Exit codes (documented in the README and in ``chainfence --help``).
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

_EPILOG = """\
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


def exit_code(error: ChainfenceError) -> int:
    """The documented exit code for a chainfence error."""
    if isinstance(error, (InvalidInput, ExtraNotInstalled)):
        return EXIT_USAGE
    if isinstance(error, LeaseLost):
        return EXIT_LOST
    from ..errors import LockDelayed, NamespaceError, NotAdmitted, NotLive

    if isinstance(error, (NamespaceError, NotAdmitted)):
        return EXIT_REFUSED
    if isinstance(error, LockDelayed):
        return EXIT_LOCK_DELAY
    if isinstance(error, LeaseHeld):
        return EXIT_HELD
    if isinstance(error, NotLive):
        return EXIT_NOT_CURRENT
    if isinstance(error, (TokenNotCurrent, NotHolder)):
        return EXIT_NOT_CURRENT
    if isinstance(error, (NodeUnreachable, WrongChain, ChainRolledBack, ContractNotFound, AnvilNotFound)):
        return EXIT_CONNECTION
    if isinstance(error, (TransactionTimeout, OutcomeUnknown, NotConfirmed)):
        return EXIT_OUTCOME
    from ..errors import AuditIndexDiffers, AuditIndexMismatch

    if isinstance(error, AuditIndexMismatch):
        return EXIT_INDEX_MISMATCH
    if isinstance(error, AuditIndexDiffers):
        return EXIT_INDEX_DIFFERS
    return EXIT_ERROR


# ---------------------------------------------------------------------------
# Argument parsing
# ---------------------------------------------------------------------------


def _tx_hash(text: str) -> str:
    if len(text) != 66 or not text.startswith("0x"):
        raise argparse.ArgumentTypeError(f"a transaction hash is 0x and 64 hex digits, got {text!r}")
    try:
        bytes.fromhex(text[2:])
    except ValueError:
        raise argparse.ArgumentTypeError(f"a transaction hash is 0x and 64 hex digits, got {text!r}") from None
    return text.lower()


#: The largest integer an option takes (a block number, a time, a count, a ttl): what a node's u64 and
#: SQLite's integers hold. A fencing token (--token) goes up to 2**256 - 1.
MAX_OPTION_INT = 2**63 - 1


def _int_at_least(minimum: int, maximum: int = MAX_OPTION_INT) -> Callable[[str], int]:
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


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)
_token = _int_at_least(1, 2**256 - 1)
_port = _int_at_least(1, 65_535)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, got {text}")
    return value


def _timeout(text: str) -> float:
    """``--timeout``: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):  # NaN compares false
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text}")
    return value


def _wait_seconds(text: str) -> float:
    """``--wait``: seconds, checked as ``acquire(wait=...)`` checks them."""
    from .. import _validate
    from ..errors import InvalidWait

    try:
        return _validate.wait(float(text))
    except ValueError as exc:  # not a number, or InvalidWait
        if isinstance(exc, InvalidWait):
            raise argparse.ArgumentTypeError(str(exc)) from None
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def _progress(text: str) -> bytes | int | str:
    """A --progress marker: 0x-hex bytes, a decimal counter, or text (hashed by the SDK)."""
    from .. import _validate

    value: bytes | int | str = text
    if text.startswith("0x"):
        try:
            value = bytes.fromhex(text[2:])
        except ValueError:
            raise argparse.ArgumentTypeError(f"not hex: {text!r}") from None
    elif text.isascii() and text.isdigit():
        value = int(text)
    try:
        _validate.progress(value)
    except InvalidInput as bad:
        raise argparse.ArgumentTypeError(str(bad)) from None
    return value


#: Set by main(): whether the command line asks for --json, so that usage errors print JSON too.
_JSON_ERRORS = False


def usage_error_json(message: str) -> str:
    """The JSON document a usage error prints under ``--json`` (the shape of ``ChainfenceError.details()``)."""
    return json.dumps({"error": "UsageError", "message": message, "exit_code": EXIT_USAGE})


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error also prints one JSON document on stdout when --json was given."""

    def error(self, message: str):  # type: ignore[override]
        if _JSON_ERRORS:
            print(usage_error_json(f"{self.prog}: {message}"))
        super().error(message)


#: One example per command, shown at the end of its --help (tests/unit/test_cli_help.py checks every
#: command has one). A command added in its own module adds its line here.
EXAMPLES: dict[str, str] = {
    "demo": "chainfence demo --ttl 10 --pause 25",
    "node": "chainfence node --port 8545 --dir .chainfence",
    "deploy": "chainfence deploy --rpc-url http://127.0.0.1:8545 --max-ttl 3600",
    "acquire": "chainfence acquire reports/daily --ttl 30 --wait 60 --json",
    "renew": "chainfence renew reports/daily --token 7 --ttl 30 --progress step-2",
    "release": "chainfence release reports/daily --token 7",
    "status": "chainfence status reports/daily jobs/etl",
    "verify": "chainfence verify reports/daily --token 7 && echo current",
    "stuck": "chainfence stuck --renewals 3 --longer-than 3600",
    "claim": "read item token < <(chainfence claim backfill 2026-11-01 2026-11-02 --ttl 300)",
    "complete": "chainfence complete 2026-11-01 --workset backfill --token 9 --result 'rows: 42'",
    "tx": "chainfence tx 0x5c50...e1 --json",
    "lock": "chainfence lock reports/daily --ttl 30 -- ./make-report.sh",
    "mcp": "chainfence mcp        # in an MCP client's config: command chainfence, args [mcp]",
    "audit": "chainfence audit history reports/daily",
}


def verbosity_options() -> argparse.ArgumentParser:
    """A parent parser for -v/--verbose, so that it is accepted after a subcommand too
    (``chainfence status -v``) as well as before it."""
    parent = _Parser(add_help=False)
    # Counted apart from the top-level -v (argparse would let one replace the other); main() adds them.
    parent.add_argument(
        "-v", "--verbose", action="count", dest="verbose_after", default=0, help="log lease changes (-v) and RPC (-vv)"
    )
    return parent


def _finish_help(commands: Any) -> None:
    """Every command's --help ends with an example (and keeps the epilog it had)."""
    for name, command in commands.choices.items():
        example = EXAMPLES.get(name)
        if example and "example:" not in (command.epilog or ""):
            command.epilog = f"example:\n  {example}\n" + (f"\n{command.epilog}" if command.epilog else "")
            command.formatter_class = argparse.RawDescriptionHelpFormatter


def _parser() -> argparse.ArgumentParser:
    verbosity = verbosity_options()
    common = _Parser(add_help=False, parents=[verbosity])
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
        type=_non_negative_int,
        help="blocks on top before a transaction counts (default: 0 on dev chains, 3 elsewhere)",
    )
    common.add_argument(
        "--timeout", type=_timeout, default=120.0, help="seconds to wait for a transaction to be mined (default 120)"
    )
    common.add_argument("--json", action="store_true", help="print one JSON document")

    parser = _Parser(
        prog="chainfence",
        description="Fencing tokens issued on-chain: leases on named resources, guards that reject stale holders.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"chainfence {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log lease changes (-v) and RPC (-vv)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    demo = commands.add_parser(
        "demo",
        parents=[verbosity],
        help="run the paused-agent scenario on the embedded chain, with and without a guard",
        description="Agent A pauses past its lease, agent B takes over, A wakes and writes with its old "
        "token: once without fencing (B's write is lost), once behind a Guard (A is rejected).",
    )
    demo.add_argument("--ttl", type=_positive_int, default=30, help="lease length in seconds (default 30)")
    demo.add_argument(
        "--pause", type=_positive_int, default=45, help="agent A's pause in seconds; must exceed the ttl (default 45)"
    )

    node = commands.add_parser(
        "node",
        parents=[verbosity],
        help="run a local anvil node with the registry deployed; state persists across restarts",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    node.add_argument("--port", type=_port, default=8545, help="loopback port (default 8545)")
    node.add_argument("--dir", default=".chainfence", help="state and deployment files (default .chainfence)")
    node.add_argument("--max-ttl", type=_positive_int, default=86_400, help="max ttl of a new registry (default 86400)")
    node.add_argument("--anvil", help="anvil binary (default: $CHAINFENCE_ANVIL, node_modules, PATH)")
    node.add_argument("--json", action="store_true", help="print the node's details as one JSON line")
    node.add_argument(
        "--state-interval",
        type=_positive_int,
        default=1,
        help="seconds between state saves (default 1); a crash loses what happened since the last one",
    )

    deploy = commands.add_parser("deploy", parents=[common], help="deploy a new registry and write the deployment file")
    deploy.add_argument("--max-ttl", type=_positive_int, default=86_400, help="longest lease, seconds (default 86400)")
    deploy.add_argument("--no-write", action="store_true", help="do not write the deployment file")
    deploy.add_argument(
        "--force",
        action="store_true",
        help="replace a deployment file whose registry is still on this chain (its users would start over at token 1)",
    )

    acquire = commands.add_parser("acquire", parents=[common], help="acquire a lease; prints its fencing token")
    acquire.add_argument("resource", help="the resource's name (any text up to 256 bytes, e.g. reports/daily)")
    acquire.add_argument("--ttl", type=_positive_int, required=True, help="lease length in seconds")
    acquire.add_argument(
        "--wait",
        type=_wait_seconds,
        default=0.0,
        metavar="S",
        help="if the lease is held, wait up to S seconds for it to become free (default 0: exit 3 at once)",
    )

    renew = commands.add_parser("renew", parents=[common], help="extend a live lease you hold")
    renew.add_argument(
        "resource", help="the resource's name (a claimed work item: WORKSET»ITEM, or ITEM with --workset)"
    )
    renew.add_argument("--token", type=_token, required=True, help="your lease's fencing token")
    renew.add_argument("--ttl", type=_positive_int, required=True, help="new lease length in seconds, from now")
    renew.add_argument("--workset", help="renew the claim on work item RESOURCE of this workset")
    renew.add_argument(
        "--progress",
        type=_progress,
        help="progress marker recorded with the renewal: 0x-hex (1-32 bytes), a decimal counter, or any text (hashed)",
    )

    release = commands.add_parser("release", parents=[common], help="end a lease you hold")
    release.add_argument(
        "resource", help="the resource's name (a claimed work item: WORKSET»ITEM, or ITEM with --workset)"
    )
    release.add_argument("--token", type=_token, required=True, help="your lease's fencing token")
    release.add_argument("--workset", help="release the claim on work item RESOURCE of this workset")

    claim = commands.add_parser(
        "claim",
        parents=[common],
        help="claim the next free item of a set of work; prints the item and its token",
        description="Claims, in one transaction, the first of the items that is free (never claimed, released, "
        "expired, or held by you: a restarted agent gets its own item back under a new token) and not done. "
        "Prints 'ITEM TOKEN' (for `read item token` in a shell); exit 8 when nothing is left to claim. "
        "Finish with `chainfence complete ITEM --workset WORKSET --token TOKEN`.",
    )
    claim.add_argument("workset", help="the set of work's name")
    claim.add_argument("items", nargs="*", metavar="item", help="the items to choose from, in order")
    claim.add_argument("--items-file", help="read the items from this file, one per line ('-': stdin)")
    claim.add_argument("--ttl", type=_positive_int, required=True, help="claim length in seconds")

    complete = commands.add_parser(
        "complete", parents=[common], help="record a result for a lease you hold (a claimed item: mark it done)"
    )
    complete.add_argument("resource", help="resource name (a claimed work item: WORKSET»ITEM, or ITEM with --workset)")
    complete.add_argument("--token", type=_token, required=True, help="your lease's fencing token")
    complete.add_argument("--workset", help="RESOURCE is a work item of this workset: completing marks it done")
    complete.add_argument("--result", default="", help="the result, as text (its keccak256 is recorded)")

    status = commands.add_parser("status", parents=[common], help="show resources' leases, or the registry")
    status.add_argument(
        "resources",
        nargs="*",
        metavar="resource",
        help="resources to show, a claimed work item as WORKSET»ITEM (none: the registry itself)",
    )
    status.add_argument("--workset", help="the names are work items of this workset")

    verify = commands.add_parser("verify", parents=[common], help="exit 0 only if the token is current")
    verify.add_argument(
        "resource", help="the resource's name (a claimed work item: WORKSET»ITEM, or ITEM with --workset)"
    )
    verify.add_argument("--token", type=_token, required=True, help="the fencing token to check")
    verify.add_argument("--workset", help="RESOURCE is a work item of this workset")

    stuck = commands.add_parser(
        "stuck",
        parents=[common],
        help="list leases alive but stuck, crashed (expired unreleased), or held too long",
        description="Reads the registry's events: leases renewed --renewals times in a row with an unchanged "
        "progress marker (alive but stuck), latest leases that expired without a release or completion "
        "(crashed holders), and with --longer-than, leases held longer than that many seconds.",
    )
    stuck.add_argument("--renewals", type=_positive_int, default=3, help="renewals without progress (default 3)")
    stuck.add_argument("--longer-than", type=_positive_int, help="also list leases held longer than this (seconds)")
    stuck.add_argument("--from-block", type=_non_negative_int, help="first block to read (default: the deployment's)")
    stuck.add_argument("--index", help="read the events from this audit index (synced first) instead of the chain")

    tx = commands.add_parser(
        "tx",
        parents=[common],
        help="what became of transactions (after a timeout or an unknown outcome)",
        description="Look up candidate transactions (a transaction and its cancellation share a nonce) and say "
        "whether one was mined, what it did (an acquisition: its lease), and whether that is final. Exit 0 "
        "when settled, 6 when not yet.",
    )
    tx.add_argument(
        "hashes", nargs="*", type=_tx_hash, metavar="HASH", help="transaction hashes (0x and 64 hex digits)"
    )
    tx.add_argument("--nonce", type=_non_negative_int, help="the nonce the transactions used")
    tx.add_argument("--account", help="the account that sent them (default: the transactions' sender)")

    lock = commands.add_parser(
        "lock",
        parents=[common],
        help="run a command while holding a lease, kept alive; stop it if the lease is lost",
        usage="chainfence lock NAME [--ttl S] [--wait S] [--take-over] [--grace S] [options] -- CMD [ARGS...]",
        description="A mutex for commands. Acquire NAME (exclusively: while any lease on it is live, this key's "
        "own included, exit 3, or wait with --wait), run CMD in a session of its own with CHAINFENCE_RESOURCE, "
        "CHAINFENCE_TOKEN, CHAINFENCE_HOLDER, CHAINFENCE_REGISTRY, CHAINFENCE_CHAIN_ID and CHAINFENCE_RPC_URL in "
        "its environment (the key stays in CHAINFENCE_PRIVATE_KEY, inherited), renew the lease in the background, "
        "and when CMD exits stop what is left of its session, release the lease and exit with CMD's code. If the "
        "lease is lost (expired, released, superseded, revoked, granted away, rolled back, or no renewal confirmed "
        "before the safe deadline), every process of CMD's session gets SIGTERM, then SIGKILL after --grace, and "
        "chainfence exits 7 naming the end. If chainfence itself dies (any signal, SIGKILL included) or freezes, "
        "a sentinel process stops CMD's session before the lease can end on-chain. SIGINT, SIGTERM, SIGHUP, "
        "SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to chainfence go to CMD's process group, once each.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lock.add_argument("resource", help="the resource's name")
    lock.add_argument("--ttl", type=_positive_int, default=30, help="lease length in seconds (default 30)")
    lock.add_argument(
        "--wait",
        type=_wait_seconds,
        default=0.0,
        help="seconds to wait for a held resource to become free (default 0: fail at once with exit 3)",
    )
    lock.add_argument(
        "--take-over",
        action="store_true",
        help="acquire even while this key holds NAME live (another `chainfence lock` of it): a new token fences "
        "the first off, whose command is stopped at its next renewal (default: exit 3, or wait with --wait)",
    )
    lock.add_argument(
        "--grace",
        type=_seconds,
        default=5.0,
        help="seconds between SIGTERM and SIGKILL when the lease is lost (default 5)",
    )
    lock.add_argument(
        "--latency-margin",
        type=_seconds,
        default=None,
        help="seconds taken off the safe deadline for CMD to stop (default: --grace + 1, so that even a CMD that "
        "ignores SIGTERM is killed before the lease can end on-chain)",
    )
    lock.add_argument(
        "--block-time-margin",
        type=_seconds,
        default=None,
        help="seconds a block's timestamp may lag its transaction's send, plus clock drift (default 2)",
    )
    from . import audit as _cli_audit  # argparse only: no web3

    _cli_audit.register(commands, common, _int_at_least)
    # CMD and its arguments follow `--`: main() splits them off before parsing (argparse would read
    # CMD's options as chainfence's).
    from . import ops as _cli_ops  # no web3 there: --help stays light

    _cli_ops.register(commands, common, _positive_int)

    mcp = commands.add_parser(
        "mcp",
        parents=[common],
        help="serve leases as Model Context Protocol tools for LLM agents (stdio)",
        description="Serve the Model Context Protocol on stdin/stdout (for an MCP client's configuration: "
        "command `chainfence`, args `mcp`, the key in env CHAINFENCE_PRIVATE_KEY), or with --http on "
        "127.0.0.1:PORT/mcp. Tools: acquire, renew, release, complete, claim, verify, status, history, leader. "
        "Without a key only the reading tools work. Needs the extra: pip install 'chainfence[mcp]'.",
    )
    mcp.add_argument(
        "--http", action="store_true", help="serve streamable HTTP on 127.0.0.1 (loopback only) instead of stdio"
    )
    mcp.add_argument("--port", type=_port, default=8000, help="port for --http (default 8000)")

    _finish_help(commands)
    return parser


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------


class _Usage(Exception):
    """A configuration problem found before talking to the chain (exit 2)."""


def _deployment(args: argparse.Namespace, *, must_exist: bool = True):
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
        raise _Usage(f"deployment file {str(path)!r} ({where}) does not exist")
    return None


def _load_key(args: argparse.Namespace) -> str | bytes | None:
    if args.keystore:
        from eth_account import Account

        try:
            encrypted = json.loads(Path(args.keystore).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise _Usage(f"cannot read keystore {args.keystore}: {exc}") from None
        password = os.environ.get("CHAINFENCE_KEYSTORE_PASSWORD")
        if password is None:
            if not sys.stdin.isatty():
                raise _Usage("keystore password: set CHAINFENCE_KEYSTORE_PASSWORD (no terminal to prompt on)")
            password = getpass.getpass(f"password for {args.keystore}: ")
        try:
            return Account.decrypt(encrypted, password)
        except ValueError:
            raise _Usage(f"wrong password for keystore {args.keystore}") from None
    return os.environ.get("CHAINFENCE_PRIVATE_KEY") or None


def _rpc_url(args: argparse.Namespace, deployment: Any) -> str:
    from .. import _validate

    if args.rpc_url is not None:
        url, where = args.rpc_url, "--rpc-url"
    elif os.environ.get("CHAINFENCE_RPC_URL"):
        url, where = os.environ["CHAINFENCE_RPC_URL"], "$CHAINFENCE_RPC_URL"
    else:
        url, where = (deployment.rpc_url if deployment else None), "the deployment file's rpc_url"
    if not url:
        raise _Usage("no node: pass --rpc-url, set CHAINFENCE_RPC_URL, or run `chainfence node`")
    return _validate.rpc_url(url, where)


def _connect(args: argparse.Namespace, *, needs_key: bool, needs_registry: bool = True, wants_key: bool = False):
    """The chain and registry the flags, environment and deployment file name. ``needs_key``: a command
    that signs (no key is a usage error); ``wants_key``: one that signs when a key is given (``mcp``)."""
    from ..chain import Chain
    from ..registry import Registry

    deployment = _deployment(args, must_exist=needs_registry)
    url = _rpc_url(args, deployment)
    # Read-only commands never read the key: a malformed CHAINFENCE_PRIVATE_KEY cannot break `status`.
    key = _load_key(args) if needs_key or wants_key else None
    if needs_key and key is None:
        raise _Usage("no signing key: set CHAINFENCE_PRIVATE_KEY or pass --keystore (never a key on the command line)")
    chain = Chain.connect(url, private_key=key, confirmations=args.confirmations, receipt_timeout=args.timeout)
    if not needs_registry:
        return chain, None
    address = args.registry or os.environ.get("CHAINFENCE_REGISTRY")
    if address:
        registry = Registry.at(chain, address)
    elif deployment is not None:
        registry = Registry.from_deployment(chain, deployment)
    else:
        raise _Usage(
            "no registry: pass --registry, set CHAINFENCE_REGISTRY, or run `chainfence node` / `chainfence deploy`"
        )
    return chain, registry


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def _when(chain_time: int, now: int) -> str:
    if chain_time == 0:
        return "-"
    stamp = datetime.datetime.fromtimestamp(chain_time, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    delta = chain_time - now
    relative = f"in {delta} s" if delta > 0 else ("now" if delta == 0 else f"{-delta} s ago")
    return f"{stamp} ({relative})"


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


@contextmanager
def _spinner(message: str, enabled: bool) -> Iterator[None]:
    """A spinner on stderr while a slow step runs (terminals only; never with --json)."""
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


def _waiting(chain: Any, args: argparse.Namespace, what: str):
    k = chain.confirmations if args.confirmations is None else args.confirmations
    label = f"{what}: waiting for the transaction" + (f" and {k} confirmations" if k else "")
    return _spinner(label, enabled=not args.json)


def _lease_json(lease: Any) -> dict[str, Any]:
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
# Commands
# ---------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.pause <= args.ttl:
        parser.error(f"--pause ({args.pause}) must be longer than --ttl ({args.ttl})")
    from .demo import run

    result = run(sys.stdout, ttl=args.ttl, pause=args.pause)
    return EXIT_OK if result.fenced.b_write_survived and not result.unfenced.b_write_survived else EXIT_ERROR


def _cmd_node(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .node import serve

    serve(
        directory=Path(args.dir),
        port=args.port,
        max_ttl=args.max_ttl,
        anvil=args.anvil,
        as_json=args.json,
        out=sys.stdout,
        state_interval=args.state_interval,
    )
    return EXIT_OK


def _cmd_deploy(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..deployment import Deployment, default_path, save
    from ..errors import ContractNotFound, WrongChain
    from ..registry import Registry

    path = Path(args.deployment) if args.deployment else default_path()
    chain, _ = _connect(args, needs_key=True, needs_registry=False)
    existing = _deployment(args, must_exist=False) if not args.no_write else None
    if existing is not None and not args.force:
        try:
            Registry.from_deployment(chain, existing)
        except (WrongChain, ContractNotFound):
            pass  # the file names a registry this chain does not have: replacing it loses nothing
        else:
            raise _Usage(
                f"{path} names registry {existing.registry}, which is on this chain: deploying another would send "
                "its users to a new token space starting at 1. Pass --force to replace the file, or --no-write"
            )
    with _waiting(chain, args, "deploy"):
        registry = Registry.deploy(chain, max_ttl=args.max_ttl)
    # The URL this command reached the node at, whichever way it was given.
    record = Deployment.of(registry, rpc_url=_rpc_url(args, existing or _deployment(args, must_exist=False)))
    written = None if args.no_write else save(record, path)
    if args.json:
        print(json.dumps({**record.__dict__, "deployment_file": str(written) if written else None}))
    else:
        print(
            f"deployed registry {registry.address} on chain {chain.chain_id} in block {record.block} (max ttl {args.max_ttl} s)"
        )
        if written:
            print(f"wrote {written}")
    return EXIT_OK


def _cmd_acquire(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    chain, registry = _connect(args, needs_key=True)
    what = f"acquire {args.resource}" + (f" (waiting up to {args.wait:g} s while it is held)" if args.wait else "")
    with _waiting(chain, args, what):
        lease = registry.acquire(args.resource, ttl=args.ttl, confirmations=args.confirmations, wait=args.wait)
    if args.json:
        print(json.dumps(_lease_json(lease)))
    else:
        print(f"acquired {lease.resource!r}: token {lease.token}")
        print(f"  holder   {lease.holder}")
        print(f"  expires  {_when(lease.expires_at, chain.now())}")
        print(f"  reason   {lease.reason.name.lower()} (previous token {lease.previous_token})")
        print(f"  tx       {lease.tx_hash} (block {lease.block_number})")
    return EXIT_OK


def _cmd_renew(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = _target(args)
    chain, registry = _connect(args, needs_key=True)
    with _waiting(chain, args, f"renew {shown}"):
        expires_at = registry.renew(
            name, args.token, args.ttl, progress=args.progress, confirmations=args.confirmations
        )
    if args.json:
        print(json.dumps({"resource": name, "token": args.token, "expires_at": expires_at}))
    else:
        print(f"renewed {shown} token {args.token}: expires {_when(expires_at, chain.now())}")
    return EXIT_OK


def _cmd_release(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = _target(args)
    chain, registry = _connect(args, needs_key=True)
    with _waiting(chain, args, f"release {shown}"):
        registry.release(name, args.token, confirmations=args.confirmations)
    if args.json:
        print(json.dumps({"resource": name, "token": args.token, "released": True}))
    else:
        print(f"released {shown} token {args.token}")
    return EXIT_OK


def _target(args: argparse.Namespace) -> tuple[str, str]:
    """(name, display) of RESOURCE, or of work item RESOURCE of --workset (``workset»item``), checked
    before anything is asked of the node: a bad name is exit 2 with nothing sent."""
    from .. import _names, _validate

    workset = getattr(args, "workset", None)
    name = args.resource if workset is None else _names.item_name(workset, args.resource)
    _validate.resource_id(name)
    return name, _names.display_name(name)


def _cmd_claim(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    items = list(args.items)
    if args.items_file is not None:
        try:
            if args.items_file == "-":
                text = sys.stdin.read()
            else:
                text = Path(args.items_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as problem:
            raise _Usage(f"cannot read --items-file: {problem}") from None
        items += [line.strip() for line in text.splitlines() if line.strip()]
    if not items:
        raise _Usage("no items: name them, or pass --items-file")
    chain, registry = _connect(args, needs_key=True)
    with _waiting(chain, args, f"claim {args.workset}"):
        lease = registry.claim(args.workset, items, ttl=args.ttl, confirmations=args.confirmations)
    if lease is None:
        if args.json:
            print(json.dumps({"workset": args.workset, "item": None, "count": len(items)}))
        else:
            print(f"chainfence claim: nothing left to claim in {args.workset!r} ({len(items)} items)", file=sys.stderr)
        return EXIT_NOTHING_TO_CLAIM
    if args.json:
        print(json.dumps({**_lease_json(lease), "workset": lease.workset, "item": lease.item}))
    else:
        print(f"{lease.item} {lease.token}")
    return EXIT_OK


def _cmd_complete(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = _target(args)
    result = _utf8(args.result, "--result")
    chain, registry = _connect(args, needs_key=True)
    with _waiting(chain, args, f"complete {shown}"):
        digest = registry.complete(name, args.token, result, confirmations=args.confirmations)
    if args.json:
        print(json.dumps({"resource": name, "token": args.token, "result_digest": "0x" + digest.hex()}))
    else:
        print(f"completed {shown} token {args.token}: result 0x{digest.hex()}")
    return EXIT_OK


def _utf8(text: str, what: str) -> bytes:
    """``text`` from the command line as UTF-8 (bytes the terminal sent that are not UTF-8 reach Python
    as lone surrogates: refused, exit 2)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8 text") from None


def _cmd_stuck(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    _chain, registry = _connect(args, needs_key=False)
    index = None
    if args.index:
        from ..audit.index import AuditIndex

        index = AuditIndex(args.index)
    report = registry.stuck(
        renewals=args.renewals, longer_than=args.longer_than, from_block=args.from_block, index=index
    )
    if args.json:
        print(json.dumps(report.to_dict()))
        return EXIT_OK
    rows = []
    for entry in [*report.stuck, *report.crashed, *report.long_held]:
        detail = {
            "stuck": f"{entry.unchanged_renewals} renewals, marker 0x{(entry.progress or b'').hex()[:16]}...",
            "crashed": f"expired {_when(entry.expires_at, report.judged_at)}, never released",
            "long_held": f"held {entry.held_for} s",
        }[entry.kind]
        rows.append([entry.kind, entry.resource_display, str(entry.token), entry.holder, detail])
    if not rows:
        print(
            f"nothing stuck, crashed{' or held too long' if args.longer_than else ''} (blocks {report.from_block}..{report.to_block})"
        )
    else:
        print(_table(rows, ["finding", "resource", "token", "holder", "detail"]))
    return EXIT_OK


def _cmd_audit(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from . import audit as _cli_audit

    return _cli_audit.run(args, _connect, _table)


def _cmd_status(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.workset is not None and not args.resources:
        raise _Usage("--workset names the items to show: chainfence status ITEM... --workset WORKSET")
    chain, registry = _connect(args, needs_key=False)
    now = chain.now()
    if not args.resources:
        info = {
            "registry": registry.address,
            "chain_id": chain.chain_id,
            "block": chain.block_number(),
            "chain_time": now,
            "latest_token": registry.latest_token(),
            "max_ttl": registry.max_ttl,
        }
        if args.json:
            print(json.dumps(info))
        else:
            print(_table([[k.replace("_", " "), str(v)] for k, v in info.items()], ["field", "value"]))
        return EXIT_OK
    from .. import _names, _validate

    names = [name if args.workset is None else _names.item_name(args.workset, name) for name in args.resources]
    for name in names:  # every name checked before the first is read: a bad one is exit 2
        _validate.resource_id(name)
    rows = []
    for name in names:
        last = registry.last_lease(name)
        rows.append(
            {
                "resource": name,
                "status": "unheld" if last is None else last.status.name.lower(),
                "token": last.token if last else 0,
                "holder": last.holder if last else None,
                "expires_at": last.expires_at if last else 0,
                # Expired by chain time now although the latest block still shows it live.
                "no_block_since": bool(last and last.expired_unmined),
            }
        )
    if args.json:
        print(json.dumps(rows))
    else:
        table = [
            [
                _names.display_name(r["resource"]),
                r["status"] + (" (no block since)" if r["no_block_since"] else ""),
                str(r["token"] or "-"),
                r["holder"] or "-",
                _when(r["expires_at"], now),
            ]
            for r in rows
        ]
        print(_table(table, ["resource", "status", "token", "holder", "expires"]))
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = _target(args)
    chain, registry = _connect(args, needs_key=False)
    try:
        lease = registry.check_current(name, args.token)
    except TokenNotCurrent as not_current:
        if args.json:
            print(
                json.dumps(
                    {
                        "resource": name,
                        "token": args.token,
                        "current": False,
                        "reason": type(not_current).__name__,
                        **not_current.details(),
                    }
                )
            )
        else:
            print(f"NOT current: {not_current}")
        return EXIT_NOT_CURRENT
    if args.json:
        print(
            json.dumps(
                {
                    "resource": name,
                    "token": args.token,
                    "current": True,
                    "holder": lease.holder,
                    "expires_at": lease.expires_at,
                }
            )
        )
    else:
        print(
            f"current: token {args.token} of {shown}, held by {lease.holder}, "
            f"expires {_when(lease.expires_at, chain.now())}"
        )
    return EXIT_OK


def _cmd_tx(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..outcomes import reconcile

    if not args.hashes and (args.nonce is None or args.account is None):
        raise _Usage("give transaction hashes, or --nonce and --account")
    _chain, registry = _connect(args, needs_key=False)
    verdict = reconcile(registry, args.hashes, nonce=args.nonce, sender=args.account, confirmations=args.confirmations)
    if args.json:
        print(json.dumps(verdict.to_dict()))
    else:
        rows = [
            [
                tx.tx_hash,
                tx.state,
                tx.action or "-",
                "-" if tx.nonce is None else str(tx.nonce),
                "-" if tx.block_number is None else f"{tx.block_number} ({tx.confirmations} deep)",
            ]
            for tx in verdict.transactions
        ]
        if rows:
            print(_table(rows, ["transaction", "state", "action", "nonce", "block"]))
        if verdict.nonce_state is not None:
            print(f"nonce: {verdict.nonce_state}")
        print(("settled: " if verdict.settled else "NOT settled: ") + verdict.summary)
    return EXIT_OK if verdict.settled else EXIT_OUTCOME


def _cmd_mcp(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        from ..mcp_server import serve
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] != "mcp":
            raise
        raise _Usage("the MCP server needs the mcp extra: pip install 'chainfence[mcp]'") from None
    _chain, registry = _connect(args, needs_key=False, wants_key=True)  # without a key it only reads
    serve(registry, transport="streamable-http" if args.http else "stdio", port=args.port)
    return EXIT_OK


def _cmd_lock(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from . import lock as _cli_lock  # the lock itself: sentinel, sessions, signals (see its docstring)

    command = args.cmd
    if not command:
        raise _Usage("no command to run: chainfence lock NAME [--ttl S] -- CMD [ARGS...]")
    # A ttl the margins leave no time in is refused before anything is sent.
    _cli_lock.check(args.ttl, args.grace, args.latency_margin, args.block_time_margin)
    # Forked first, before web3 is imported and before any thread: a small copy, quick to fork.
    sentinel = _cli_lock.Sentinel.start(args.grace)
    try:
        _chain, registry = _connect(args, needs_key=True)
        url = _rpc_url(args, _deployment(args))

        def on_lost(error: LeaseLost) -> None:  # stderr said it when the command was stopped
            if args.json:
                print(json.dumps({**error.details(), "exit_code": EXIT_LOST}))

        return _cli_lock.run(
            registry,
            args.resource,
            command,
            ttl=args.ttl,
            wait=args.wait,
            grace=args.grace,
            latency_margin=args.latency_margin,
            block_time_margin=args.block_time_margin,
            confirmations=args.confirmations,
            take_over=args.take_over,
            url=url,
            on_lost=on_lost,
            sentinel=sentinel,
        )
    except _cli_lock.CommandNotRun as error:
        raise _Usage(str(error)) from None
    finally:
        sentinel.close()


_COMMANDS: dict[str, Callable[[argparse.Namespace, argparse.ArgumentParser], int]] = {
    "demo": _cmd_demo,
    "node": _cmd_node,
    "deploy": _cmd_deploy,
    "acquire": _cmd_acquire,
    "renew": _cmd_renew,
    "release": _cmd_release,
    "status": _cmd_status,
    "verify": _cmd_verify,
    "stuck": _cmd_stuck,
    "claim": _cmd_claim,
    "complete": _cmd_complete,
    "tx": _cmd_tx,
    "lock": _cmd_lock,
    "mcp": _cmd_mcp,
    "audit": _cmd_audit,
}


def _command(name: str) -> Callable[[argparse.Namespace, argparse.ArgumentParser], int]:
    from . import ops as _cli_ops

    return _COMMANDS.get(name) or _cli_ops.COMMANDS[name]


def main(argv: list[str] | None = None) -> int:
    global _JSON_ERRORS
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    # `chainfence lock NAME [options] -- CMD ARGS...`: everything after the first `--` is the command.
    split = argv.index("--") if "--" in argv else len(argv)
    _JSON_ERRORS = "--json" in argv[:split]
    args = parser.parse_args(argv[:split]) if "lock" in argv[:split] else parser.parse_args(argv)
    if args.command == "lock":
        args.cmd = argv[split + 1 :]
    elif split < len(argv) and "lock" in argv[:split]:
        args = parser.parse_args(argv)  # `lock` was an argument of another command
    args.verbose += getattr(args, "verbose_after", 0)
    if args.verbose:
        logging.basicConfig(
            level=logging.DEBUG if args.verbose > 1 else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
    try:
        return _command(args.command)(args, parser)
    except _Usage as problem:
        if getattr(args, "json", False):
            print(usage_error_json(f"chainfence {args.command}: {problem}"))
        print(f"chainfence {args.command}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except ChainfenceError as error:
        code = exit_code(error)
        if getattr(args, "json", False):
            print(json.dumps({**error.details(), "exit_code": code}))
        print(f"chainfence {args.command}: {type(error).__name__}: {error}", file=sys.stderr)
        for note in getattr(error, "__notes__", ()):
            print(f"  {note}", file=sys.stderr)
        hashes = getattr(error, "tx_hashes", ())
        if isinstance(error, (OutcomeUnknown, NotConfirmed)) and hashes:
            print(f"  transactions: {' '.join(hashes)} (nonce {error.nonce} of {error.sender})", file=sys.stderr)
            print(f"  reconcile before acting again: chainfence tx {' '.join(hashes)}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error of ours. Point
        # stdout at devnull so the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


if __name__ == "__main__":  # python -m chainfence.cli, as well as python -m chainfence
    sys.exit(main())
