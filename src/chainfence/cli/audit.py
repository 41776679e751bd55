"""``chainfence audit ...``: the audit index's commands.

::

    chainfence audit sync [--index F] [--max-blocks N] [--confirmations K] [--completeness receipts]
    chainfence audit history NAME          # the leases of a resource
    chainfence audit token T               # the lease a token belonged to
    chainfence audit holder ADDRESS        # the leases of a holder
    chainfence audit at NAME (--time T | --block B)   # who held NAME then
    chainfence audit current [--prefix P]  # live leases, with names
    chainfence audit takeovers [--from-block B] [--to-block B] [--since T] [--until T]
    chainfence audit completions [NAME] [range]
    chainfence audit resources [PREFIX]
    ... [--limit N] [--after CURSOR | --all]   # lists: a page of 100 rows; the next with the cursor printed
    chainfence audit verify [--proofs --headers URL...]   # exit 12 when the index and the chain differ
    chainfence audit timeline NAME... --out FILE.html [--since T] [--until T] [--rejections FILE]   # a picture

Queries read the index (default ``.chainfence/audit.sqlite``), synced first to
the newest block with ``--confirmations`` on top (default: 0 on dev chains, 3
elsewhere; blocks an earlier sync took with fewer are withdrawn, ``--no-sync``
included), and say how far behind the head it is; ``--live`` reads the chain
instead (an index in memory, synced from the deployment for this one answer). Imports stay inside the
functions: ``chainfence --help`` must not import web3.

Lists (history, holder, current, takeovers, completions, resources) print one page: ``--limit`` rows
(default 100, at most 10,000; read in as many of the index's pages as it takes), then, when there are
more, the cursor of the next page (``next`` under --json, a line on stderr otherwise) to pass back as
``--after``, as ``etcdctl get --limit`` and ``kubectl get --chunk-size``'s ``continue`` do; ``--all``
reads every page.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import AuditIndexDiffers, InvalidInput
from ._common import (
    EXIT_ERROR,
    EXIT_OK,
    Parser,
    Progress,
    add_command,
    completeness,
    completeness_option,
    connect,
    emit,
    exit_code,
    int_at_least,
    report,
    table,
    when,
)

#: Where the index lives unless --index says otherwise.
DEFAULT_INDEX = ".chainfence/audit.sqlite"

QUERIES = ("history", "token", "holder", "at", "current", "takeovers", "completions", "resources")

#: The queries that answer a page (the others answer one lease).
LISTS = ("history", "holder", "current", "takeovers", "completions", "resources")

#: The audit's page sizes (:mod:`chainfence.audit._pages`; not imported here: ``--help`` imports no web3;
#: ``tests/unit/test_audit_pages.py`` holds them equal): a page's default (--all's pages too) and most.
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``audit`` and its subcommands."""
    audit = add_command(
        subparsers,
        "audit",
        example="chainfence audit history reports/daily",
        help="who held what, when and why: a local index of the registry's events, and queries over it",
        description="Copy the registry's events into a local SQLite index (audit sync) and ask it who held "
        "which resource, under which token, when, and why it changed hands.",
    )
    sub = audit.add_subparsers(dest="audit_command", metavar="AUDIT_COMMAND", help="what to do (each has --help)")
    sub.required = True
    shared = Parser(add_help=False)
    shared.add_argument("--index", default=DEFAULT_INDEX, help=f"index file (default {DEFAULT_INDEX})")
    shared.add_argument(
        "--max-blocks",
        type=int_at_least(1),
        help="blocks per eth_getLogs request (default: 5000, halved when the provider refuses)",
    )
    checked = Parser(add_help=False)
    completeness_option(checked)
    query = Parser(add_help=False, parents=[checked])
    query.add_argument("--live", action="store_true", help="read the chain instead of the index")
    query.add_argument(
        "--no-sync", action="store_true", help="answer from the index as it is, without syncing it first"
    )
    parents = [common, shared]
    queries = [*parents, query]
    paged = Parser(add_help=False)
    paged.add_argument(
        "--limit",
        type=int_at_least(1, MAX_LIMIT),
        help=f"rows in the page (default {DEFAULT_LIMIT}; with --all, in each page read), at most {MAX_LIMIT}",
    )
    paged.add_argument(
        "--after", metavar="CURSOR", help="the page after this cursor (printed with the page before, as next)"
    )
    paged.add_argument("--all", action="store_true", help="every row, read a page at a time")
    lists = [*queries, paged]

    sync = add_command(
        sub,
        "sync",
        parents=[*parents, checked],
        example="chainfence audit sync --max-blocks 2000",
        help="bring the index up to the newest confirmed block",
    )
    sync.add_argument(
        "--to-block",
        type=int_at_least(0),
        help="stop at this block (default: the head less --confirmations: 0 on dev chains, 3 elsewhere)",
    )
    sync.set_defaults(run=_sync)
    verify = add_command(
        sub,
        "verify",
        parents=parents,
        example="chainfence audit verify || echo 'the index differs from the chain'",
        help="check the index against the chain (exit 12 when they differ)",
    )
    verify.add_argument(
        "--proofs",
        action="store_true",
        help="also check the index against headers no single provider controls: each indexed block vouched for "
        "and its receipts against the vouched receiptsRoot, every resource's latest lease proven with "
        "eth_getProof (needs --headers or --trusted-headers)",
    )
    verify.add_argument(
        "--headers",
        nargs="+",
        metavar="URL",
        help="--proofs: header providers, k of which must agree on each block's hash (independent operators)",
    )
    verify.add_argument("--quorum", type=int_at_least(1), help="--proofs: k for --headers (default: a majority)")
    verify.add_argument(
        "--trusted-headers", metavar="URL", help="--proofs: one endpoint you trust for headers (a light client)"
    )
    verify.set_defaults(run=_verify)
    history = add_command(
        sub,
        "history",
        parents=lists,
        example="chainfence audit history reports/daily --json",
        help="the leases of a resource, oldest first (a page: --limit, --after, --all)",
    )
    history.add_argument("name", help="the resource's name")
    token = add_command(
        sub, "token", parents=queries, example="chainfence audit token 7", help="the lease a fencing token belonged to"
    )
    token.add_argument("token", type=int_at_least(1), help="a fencing token")
    holder = add_command(
        sub,
        "holder",
        parents=lists,
        example="chainfence audit holder 0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF",
        help="the leases of a holder, oldest first (a page: --limit, --after, --all)",
    )
    holder.add_argument("address", help="the holder's account address (0x...)")
    at = add_command(
        sub,
        "at",
        parents=queries,
        example="chainfence audit at reports/daily --time 2026-11-22T12:03:07",
        help="who held a resource at a time or a block",
    )
    at.add_argument("name", help="the resource's name")
    moment = at.add_mutually_exclusive_group(required=True)
    moment.add_argument("--time", type=_time, help=TIME_HELP)
    moment.add_argument("--block", type=int_at_least(0), help="a block number")
    current = add_command(
        sub,
        "current",
        parents=lists,
        example="chainfence audit current --prefix reports/",
        help="live leases, with names",
    )
    current.add_argument("--prefix", help="only resources whose name starts with this")
    ranges = Parser(add_help=False)
    ranges.add_argument("--from-block", type=int_at_least(0), help="first block of the range")
    ranges.add_argument("--to-block", type=int_at_least(0), help="last block of the range")
    ranges.add_argument("--since", type=_time, help=TIME_HELP)
    ranges.add_argument("--until", type=_time, help=TIME_HELP)
    takeovers = add_command(
        sub,
        "takeovers",
        parents=[*lists, ranges],
        example="chainfence audit takeovers --since 2026-11-22T00:00:00 --json",
        help="resources changing hands",
    )
    takeovers.add_argument("--resource", help="only this resource")
    completions = add_command(
        sub,
        "completions",
        parents=[*lists, ranges],
        example="chainfence audit completions backfill/2026-11-01",
        help="completions and their digests",
    )
    completions.add_argument("name", nargs="?", help="only this resource (default: all)")
    resources = add_command(
        sub,
        "resources",
        parents=lists,
        example="chainfence audit resources reports/",
        help="resources by name prefix",
    )
    resources.add_argument("prefix", nargs="?", default="", help="the names' prefix (default: all)")
    for name in QUERIES:
        sub.choices[name].set_defaults(run=_query)
    timeline = add_command(
        sub,
        "timeline",
        parents=queries,
        example="chainfence audit timeline reports/daily jobs/etl --out timeline.html",
        help="draw the leases of resources over time (self-contained HTML)",
    )
    timeline.add_argument("names", nargs="+", metavar="NAME", help="the resources to draw, one lane each")
    timeline.add_argument("--out", required=True, help="the HTML file to write")
    timeline.add_argument("--title", default="chainfence lease timeline", help="the page's title")
    timeline.add_argument("--since", type=_time, help=f"draw from this time on ({TIME_HELP})")
    timeline.add_argument("--until", type=_time, help=f"draw up to this time ({TIME_HELP})")
    timeline.add_argument(
        "--rejections",
        metavar="FILE",
        help="a guard's rejections to overlay: the file Guard(rejection_log=FILE) writes (a JSON object a line), or "
        "a JSON list of them; each {resource, time, token, holder, reason}, time in unix seconds or ISO 8601",
    )
    timeline.set_defaults(run=_timeline)


#: What a chain time option takes, as its help says it.
TIME_HELP = (
    "chain time: unix seconds, ISO 8601 (2026-11-22T12:03:07: UTC unless it says), or a time of day alone "
    "(14:02, 14:02:30): today's, in this machine's local time unless it says (14:02Z, 14:02+01:00)"
)


def _time(text: str) -> int:
    """A chain time option (:data:`TIME_HELP`): unix seconds; ISO 8601, UTC unless it says; or a time of day
    alone, on this machine's date today, in its local time unless it says (as ``date -d 14:02`` reads it)."""
    if text.isascii() and text.isdigit():
        if len(text) > 18:  # above 2**63 - 1: no chain time, and more than SQLite holds
            raise argparse.ArgumentTypeError(f"not a chain time: {text[:40]}... (unix seconds)")
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        try:
            of_day = datetime.time.fromisoformat(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not unix seconds, an ISO 8601 time or a time of day (14:02): {text!r}"
            ) from None
        moment = datetime.datetime.combine(datetime.date.today(), of_day)
        if moment.tzinfo is None:
            moment = moment.astimezone()  # the local time zone, its offset on that day
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    try:
        return max(0, int(moment.timestamp()))
    except (OverflowError, ValueError, OSError):
        raise argparse.ArgumentTypeError(f"not a chain time: {text!r}") from None


@contextmanager
def _opened(args: argparse.Namespace) -> Iterator[tuple[Any, Any]]:
    """The registry and the index (--live: one in memory), closed after."""
    from ..audit.index import AuditIndex

    mode = completeness(args) if getattr(args, "completeness", None) is not None else "bloom"  # refused first
    _chain, registry = connect(args, needs_key=False)
    if getattr(args, "live", False):
        index = AuditIndex(":memory:", completeness=mode)
    else:
        path = Path(args.index)
        if path.parent and not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        index = AuditIndex(path, completeness=mode)
    try:
        yield registry, index
    finally:
        index.close()


def _sync(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    with _opened(args) as (registry, index):  # a bad --completeness is refused before anything is opened
        bar = Progress(not args.json)
        try:
            # Confirmations: --confirmations, else the chain's (0 on dev chains, 3 elsewhere).
            result = index.sync(
                registry,
                to_block=args.to_block,
                max_blocks=args.max_blocks,
                progress=bar,
            )
        finally:
            bar.close()
        status = index.status(registry.chain)
        rewound = f"; rewound to block {result.rewound_to} after a reorg" if result.rewound_to is not None else ""
        held = (
            f"; not past block {result.held_at} yet ({result.held_because}): the next sync takes it up"
            if result.held_at is not None
            else ""
        )
        emit(
            args,
            {**result.to_dict(), "status": status.to_dict()},
            f"indexed blocks {result.from_block}..{result.to_block}: {result.events} events in {result.pages} pages"
            + rewound
            + held,
        )
    return EXIT_OK


def _bring_up(index: Any, registry: Any, args: argparse.Namespace) -> Any:
    """Before a query: sync (unless --no-sync) to the newest block with the confirmations asked for; with
    --no-sync, read no new block, but still withdraw blocks with fewer confirmations (every read honours them)."""
    if args.live or not args.no_sync:
        return index.sync(registry, max_blocks=args.max_blocks)  # in the index's mode: --completeness
    synced = index.status().synced_block
    if synced is not None:
        return index.sync(registry, to_block=synced, max_blocks=args.max_blocks)
    return None


def _header_source(args: argparse.Namespace) -> Any:
    """--proofs: the header source the flags name (a typed usage error when none or both)."""
    from ..proofs import QuorumHeaders, TrustedHeaders
    from ._common import UsageError

    if args.headers and args.trusted_headers:
        raise UsageError("--proofs: give --headers (a quorum) or --trusted-headers (one endpoint), not both")
    if args.trusted_headers:
        if args.quorum is not None:
            raise UsageError("--quorum goes with --headers")
        return TrustedHeaders(args.trusted_headers)
    if args.headers:
        return QuorumHeaders(args.headers, k=args.quorum)
    raise UsageError(
        "--proofs needs a header source no single provider controls: --headers URL URL URL [--quorum K] "
        "or --trusted-headers URL"
    )


def _verify(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ._common import UsageError

    if not args.proofs and (args.headers or args.trusted_headers or args.quorum is not None):
        raise UsageError("--headers, --quorum and --trusted-headers go with --proofs")
    with _opened(args) as (registry, index):
        reader = None
        if args.proofs:
            from ..proofs import ProvenReader

            reader = ProvenReader(registry.address, headers=_header_source(args), provider=registry.chain)
        try:
            checked = index.verify(registry, max_blocks=args.max_blocks, proofs=reader)
        except AuditIndexDiffers as differs:
            code = exit_code(differs)
            lines = [f"chainfence audit verify: the index differs from the chain ({args.index}):"]
            report(
                args, {**differs.details(), "exit_code": code}, lines + [f"  {line}" for line in differs.differences]
            )
            return code
        finally:
            if reader is not None:
                reader.headers.close()
        proven = " (and the header source's headers, receipts and proofs)" if reader is not None else ""
        emit(
            args,
            lambda: {
                "checked": checked,
                "proofs": reader is not None,
                "status": index.status(registry.chain).to_dict(),
            },
            f"the index matches the chain{proven}: {checked} events checked",
        )
    return EXIT_OK


def _query(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """history, token, holder, at, current, takeovers, completions, resources: from the index, synced first
    (unless --no-sync), or from the chain (--live)."""
    with _opened(args) as (registry, index):
        result = _bring_up(index, registry, args)
        status = index.status(registry.chain)
        answer, following = _answer(index, args, registry.chain)
        behind = f"{status.behind} blocks behind the head ({status.head_block})" if status.behind else "at the head"
        confirmations = registry.chain.confirmations
        if confirmations:
            behind += f", {confirmations} confirmations asked"
        if result is not None and result.held_at is not None:
            behind += f"; the node's logs of block {result.held_at} are not all served yet"
        source = "the chain (--live)" if args.live else args.index
        note = f"-- from {source}: blocks up to {status.synced_block}, {behind}"
        if getattr(args, "time", None) is not None:  # `at --time`: the moment asked, as it was read
            note += f"\n-- at {when(args.time)}"
        if following is not None:
            note += f"\n-- more rows: the next page with --after {following} (or read every page with --all)"
        document = {"status": status.to_dict(), "result": _document(answer)}
        if args.audit_command in LISTS:
            document["next"] = following
        emit(args, document, lambda: _text(answer, args), note=note)
    # A token the index does not hold: exit 1 for a person (--json says "result": null, and exits 0).
    return EXIT_OK if answer is not None or args.json else EXIT_ERROR


def _timeline(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..audit.timeline import render

    with _opened(args) as (registry, index):
        _bring_up(index, registry, args)
        status = index.status(registry.chain)
        leases = index.timeline_leases(args.names)
        page = render(
            leases,
            rejections=_rejections(args.rejections),
            title=args.title,
            now=status.as_of,
            resources=args.names,  # a lane each, a lease on it or not
            since=args.since,
            until=args.until,
        )
        try:
            Path(args.out).write_text(page, encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"cannot write {args.out}: {exc}") from None
        drawn = {_plain(lease.resource) for lease in leases}
        empty = [name for name in args.names if name not in drawn]
        emit(
            args,
            {"out": args.out, "leases": len(leases), "empty": empty, "status": status.to_dict()},
            f"{args.out}: {len(leases)} lease{'s' * (len(leases) != 1)} of {len(args.names)} "
            f"resource{'s' * (len(args.names) != 1)}"
            + (f"; none on {', '.join(repr(name) for name in empty)}" if empty else ""),
        )
    return EXIT_OK


def _plain(resource: Any) -> str:
    """A timeline lease's resource as the command line names it (a claimed item as ``workset»item``)."""
    if isinstance(resource, tuple):
        from .._sdk.names import ITEM_SEPARATOR

        return ITEM_SEPARATOR.join(_plain(part) for part in resource)
    return resource.decode("utf-8", "replace") if isinstance(resource, bytes) else str(resource)


def _rejections(path: str | None) -> list[Any]:
    """``--rejections FILE``: what ``Guard(rejection_log=FILE)`` wrote (one JSON object a line), or a JSON
    list of such objects; ``time`` in unix seconds, or a string :func:`_time` reads (ISO 8601)."""
    from ..audit.timeline import Rejection

    if path is None:
        return []
    try:
        text = Path(path).read_text(encoding="utf-8")
        if text.lstrip().startswith("["):
            entries = json.loads(text)
        else:  # JSON Lines, as a guard records them
            entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read rejections from {path}: {exc}") from None
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise InvalidInput(f"{path}: expected JSON objects, one a line, or a JSON list of them")
    wanted = {"resource", "time", "token", "holder", "reason"}
    rejections = []
    for number, entry in enumerate(entries, 1):
        unknown = set(entry) - wanted
        if unknown:
            raise InvalidInput(f"{path}: unknown field(s) {sorted(unknown)} in rejection {number}")
        missing = {"resource", "time", "token"} - set(entry)
        if missing:
            raise InvalidInput(f"{path}: rejection {number} lacks {', '.join(sorted(missing))}")
        if isinstance(entry.get("time"), str):
            try:
                entry = {**entry, "time": _time(entry["time"])}
            except argparse.ArgumentTypeError as bad:
                raise InvalidInput(f"{path}: rejection {number}: {bad}") from None
        rejections.append(Rejection(**entry))
    return rejections


def _answer(index: Any, args: argparse.Namespace, chain: Any) -> tuple[Any, str | None]:
    """The answer, and for a list the cursor of its next page (None: no more)."""
    command = args.audit_command
    if command == "token":
        return index.lease(args.token), None
    if command == "at":
        block_time = None
        if args.block is not None:
            found = chain.rpc.block(args.block)
            block_time = int(found["timestamp"]) if found is not None else None
        lease = index.holder_at(args.name, time=args.time, block=args.block, block_time=block_time)
        return ([lease] if lease is not None else []), None
    query, arguments = _listing(index, args)
    if args.all:
        return list(index.every(query, limit=args.limit or DEFAULT_LIMIT, after=args.after, **arguments)), None
    # --limit rows, in as many of the index's pages as it takes: a page of a listing whose rows are rare
    # (takeovers among first acquisitions) may hold fewer than asked, even none, and say that more follow.
    limit: int = args.limit or DEFAULT_LIMIT
    rows: list[Any] = []
    cursor = args.after
    while True:
        page = query(limit=limit - len(rows), after=cursor, **arguments)
        rows.extend(page)
        cursor = page.next
        if cursor is None or len(rows) >= limit:
            return rows, cursor


def _listing(index: Any, args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The list query a command asks and its arguments (without the page's)."""
    command = args.audit_command
    if command == "history":
        return index.history, {"resource": args.name}
    if command == "holder":
        return index.leases_of, {"holder": args.address}
    if command == "current":
        return index.current, {"prefix": args.prefix}
    if command == "takeovers":
        return index.takeovers, {
            "from_block": args.from_block,
            "to_block": args.to_block,
            "since": args.since,
            "until": args.until,
            "resource": args.resource,
        }
    if command == "completions":
        return index.completions, {
            "resource": args.name,
            "from_block": args.from_block,
            "to_block": args.to_block,
            "since": args.since,
            "until": args.until,
        }
    return index.resources, {"prefix": args.prefix}


def _document(answer: Any) -> Any:
    if answer is None:
        return None
    if isinstance(answer, list):
        return [item.to_dict() for item in answer]
    return answer.to_dict()


def _ended(lease: Any) -> str:
    if lease.ended is None:
        return f"{lease.status} (expires {when(lease.expires_at)})"
    by = f" by {lease.ended_by}" if lease.ended_by else ""
    return f"{lease.ended}{by} {when(lease.ended_at)}"


def _reason(reason: Any) -> str:
    return reason.name.lower() if hasattr(reason, "name") else str(reason)


def _text(answer: Any, args: argparse.Namespace) -> str:
    command = args.audit_command
    if answer is None:
        return f"token {args.token} is not in the index"
    items = answer if isinstance(answer, list) else [answer]
    if not items:
        return "nothing found"
    if command in ("history", "token", "holder", "at", "current"):
        rows = []
        for lease in items:
            reason = _reason(lease.reason)
            if lease.granted_by:
                reason += f" (granted by {lease.granted_by})"
            renewals = str(lease.renewals)
            if lease.renewals:
                renewals += f", last {when(lease.last_renewed_at)}"
            if lease.markers:
                renewals += f", {lease.markers} markers (0x{lease.last_marker.hex()[:12]}..)"
            rows.append(
                [
                    lease.resource_display,
                    str(lease.token),
                    lease.holder,
                    when(lease.acquired_at),
                    reason,
                    renewals,
                    _ended(lease),
                ]
            )
        return table(rows, ["resource", "token", "holder", "acquired", "reason", "renewals", "ended"])
    if command == "takeovers":
        rows = [
            [
                t.resource_display,
                when(t.at),
                f"{t.previous_holder} (#{t.previous_token}, {t.previous_ended or '-'})",
                f"{t.holder} (#{t.token})",
                _reason(t.reason),
            ]
            for t in items
        ]
        return table(rows, ["resource", "at", "from", "to", "reason"])
    if command == "completions":
        rows = [[c.resource_display, str(c.token), c.holder, when(c.at), "0x" + c.digest.hex()] for c in items]
        return table(rows, ["resource", "token", "holder", "at", "digest"])
    rows = [
        [r.resource_display, str(r.leases), str(r.latest_token or "-"), "item" if r.claimed_item else ""] for r in items
    ]
    return table(rows, ["resource", "leases", "latest token", ""])
