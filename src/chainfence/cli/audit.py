"""``chainfence audit ...``: the audit index's commands (registered by :mod:`chainfence.cli`).

::

    chainfence audit sync [--index F] [--max-blocks N] [--confirmations K]
    chainfence audit history NAME          # every lease of a resource
    chainfence audit token T               # the lease a token belonged to
    chainfence audit holder ADDRESS        # every lease of a holder
    chainfence audit at NAME (--time T | --block B)   # who held NAME then
    chainfence audit current [--prefix P]  # live leases, with names
    chainfence audit takeovers [--from-block B] [--to-block B] [--since T] [--until T]
    chainfence audit completions [NAME] [range]
    chainfence audit resources [PREFIX]
    chainfence audit verify                # exit 12 when the index and the chain differ
    chainfence audit timeline NAME... --out FILE.html [--rejections FILE.json]   # a picture of the leases

Queries read the index (default ``.chainfence/audit.sqlite``) and say how far
behind the head it is; ``--live`` reads the chain instead (an index in memory,
synced from the deployment for this one answer). Imports stay inside the
functions: ``chainfence --help`` must not import web3.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import Any

#: Where the index lives unless --index says otherwise.
DEFAULT_INDEX = ".chainfence/audit.sqlite"

QUERIES = ("history", "token", "holder", "at", "current", "takeovers", "completions", "resources")


def register(commands: Any, common: argparse.ArgumentParser, int_at_least: Any) -> None:
    """Add ``audit`` and its subcommands to the ``chainfence`` parser."""
    audit = commands.add_parser(
        "audit",
        help="who held what, when and why: a local index of the registry's events, and queries over it",
        description="Copy the registry's events into a local SQLite index (audit sync) and ask it who held "
        "which resource, under which token, when, and why it changed hands.",
    )
    sub = audit.add_subparsers(dest="audit_command", metavar="AUDIT_COMMAND", help="what to do (each has --help)")
    sub.required = True
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--index", default=DEFAULT_INDEX, help=f"index file (default {DEFAULT_INDEX})")
    shared.add_argument(
        "--max-blocks",
        type=int_at_least(1),
        help="blocks per eth_getLogs request (default: 5000, halved when the provider refuses)",
    )
    query = argparse.ArgumentParser(add_help=False)
    query.add_argument("--live", action="store_true", help="read the chain instead of the index")
    query.add_argument(
        "--no-sync", action="store_true", help="answer from the index as it is, without syncing it first"
    )
    parents = [common, shared]

    sync = sub.add_parser("sync", parents=parents, help="bring the index up to the chain's head")
    sync.add_argument("--to-block", type=int_at_least(0), help="stop at this block (default: the head)")
    sub.add_parser("verify", parents=parents, help="check the index against the chain (exit 12 when they differ)")
    history = sub.add_parser("history", parents=[*parents, query], help="every lease of a resource")
    history.add_argument("name", help="the resource's name")
    token = sub.add_parser("token", parents=[*parents, query], help="the lease a fencing token belonged to")
    token.add_argument("token", type=int_at_least(1), help="a fencing token")
    holder = sub.add_parser("holder", parents=[*parents, query], help="every lease of a holder")
    holder.add_argument("address", help="the holder's account address (0x...)")
    at = sub.add_parser("at", parents=[*parents, query], help="who held a resource at a time or a block")
    at.add_argument("name", help="the resource's name")
    when = at.add_mutually_exclusive_group(required=True)
    when.add_argument("--time", type=_time, help="chain time: unix seconds or ISO 8601 (UTC unless it says)")
    when.add_argument("--block", type=int_at_least(0), help="a block number")
    current = sub.add_parser("current", parents=[*parents, query], help="live leases, with names")
    current.add_argument("--prefix", help="only resources whose name starts with this")
    ranges = argparse.ArgumentParser(add_help=False)
    ranges.add_argument("--from-block", type=int_at_least(0), help="first block of the range")
    ranges.add_argument("--to-block", type=int_at_least(0), help="last block of the range")
    ranges.add_argument("--since", type=_time, help="chain time: unix seconds or ISO 8601")
    ranges.add_argument("--until", type=_time, help="chain time: unix seconds or ISO 8601")
    takeovers = sub.add_parser("takeovers", parents=[*parents, query, ranges], help="resources changing hands")
    takeovers.add_argument("--resource", help="only this resource")
    completions = sub.add_parser("completions", parents=[*parents, query, ranges], help="completions and their digests")
    completions.add_argument("name", nargs="?", help="only this resource (default: all)")
    resources = sub.add_parser("resources", parents=[*parents, query], help="resources by name prefix")
    resources.add_argument("prefix", nargs="?", default="", help="the names' prefix (default: all)")
    timeline = sub.add_parser(
        "timeline", parents=[*parents, query], help="draw the leases of resources over time (self-contained HTML)"
    )
    timeline.add_argument("names", nargs="+", metavar="NAME", help="the resources to draw, one lane each")
    timeline.add_argument("--out", required=True, help="the HTML file to write")
    timeline.add_argument("--title", default="chainfence lease timeline", help="the page's title")
    timeline.add_argument(
        "--rejections", help="a guard's rejections to overlay: a JSON list of {resource, time, token, holder, reason}"
    )
    for name, command in sub.choices.items():
        command.epilog = f"example:\n  {EXAMPLES[name]}\n"
        command.formatter_class = argparse.RawDescriptionHelpFormatter


#: One example per ``chainfence audit`` subcommand, shown at the end of its --help.
EXAMPLES = {
    "sync": "chainfence audit sync --max-blocks 2000",
    "verify": "chainfence audit verify || echo 'the index differs from the chain'",
    "history": "chainfence audit history reports/daily --json",
    "token": "chainfence audit token 7",
    "holder": "chainfence audit holder 0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF",
    "at": "chainfence audit at reports/daily --time 2026-11-22T12:03:07",
    "current": "chainfence audit current --prefix reports/",
    "takeovers": "chainfence audit takeovers --since 2026-11-22T00:00:00 --json",
    "completions": "chainfence audit completions backfill/2026-11-01",
    "resources": "chainfence audit resources reports/",
    "timeline": "chainfence audit timeline reports/daily jobs/etl --out timeline.html",
}


def _time(text: str) -> int:
    if text.isascii() and text.isdigit():
        if len(text) > 18:  # above 2**63 - 1: no chain time, and more than SQLite holds
            raise argparse.ArgumentTypeError(f"not a chain time: {text[:40]}... (unix seconds)")
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not unix seconds or an ISO 8601 time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    try:
        return max(0, int(moment.timestamp()))
    except (OverflowError, ValueError, OSError):
        raise argparse.ArgumentTypeError(f"not a chain time: {text!r}") from None


class _Progress:
    """A progress bar on stderr, on a terminal only."""

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


def _open(args: argparse.Namespace, *, live: bool):
    from pathlib import Path

    from ..audit.index import AuditIndex

    if live:
        return AuditIndex(":memory:")
    path = Path(args.index)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    return AuditIndex(path)


def _when(stamp: int | None) -> str:
    if stamp is None:
        return "-"
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _short(address: str | None) -> str:
    return "-" if address is None else address


def run(args: argparse.Namespace, connect: Any, table: Any) -> int:
    """Run ``chainfence audit <command>``; returns the exit code."""
    from ..errors import AuditIndexDiffers

    live = getattr(args, "live", False)
    _chain, registry = connect(args, needs_key=False)
    index = _open(args, live=live)
    try:
        command = args.audit_command
        if command == "sync":
            bar = _Progress(not args.json)
            try:
                result = index.sync(
                    registry,
                    to_block=args.to_block,
                    max_blocks=args.max_blocks,
                    progress=bar,
                    confirmations=args.confirmations or 0,
                )
            finally:
                bar.close()
            status = index.status(registry.chain)
            if args.json:
                print(json.dumps({**result.to_dict(), "status": status.to_dict()}))
            else:
                print(
                    f"indexed blocks {result.from_block}..{result.to_block}: {result.events} events in "
                    f"{result.pages} pages"
                    + (f"; rewound to block {result.rewound_to} after a reorg" if result.rewound_to is not None else "")
                )
            return 0
        if command == "verify":
            try:
                checked = index.verify(registry, max_blocks=args.max_blocks)
            except AuditIndexDiffers as differs:
                if args.json:
                    print(json.dumps({**differs.details(), "exit_code": 12}))
                print(f"chainfence audit verify: the index differs from the chain ({args.index}):", file=sys.stderr)
                for line in differs.differences:
                    print(f"  {line}", file=sys.stderr)
                return 12
            if args.json:
                print(json.dumps({"checked": checked, "status": index.status(registry.chain).to_dict()}))
            else:
                print(f"the index matches the chain: {checked} events checked")
            return 0
        if live or not args.no_sync:
            index.sync(registry, max_blocks=args.max_blocks)
        status = index.status(registry.chain)
        if command == "timeline":
            return _timeline(index, args, status)
        answer = _query(index, args, registry.chain)
        if args.json:
            print(json.dumps({"status": status.to_dict(), "result": _json(answer)}))
            return 0
        _print(answer, args, table)
        behind = f"{status.behind} blocks behind the head ({status.head_block})" if status.behind else "at the head"
        source = "the chain (--live)" if live else args.index
        print(f"-- from {source}: blocks up to {status.synced_block}, {behind}", file=sys.stderr)
        return 0 if answer is not None else 1
    finally:
        index.close()


def _rejections(path: str | None) -> list[Any]:
    from pathlib import Path

    from ..audit.timeline import Rejection
    from ..errors import InvalidInput

    if path is None:
        return []
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read rejections from {path}: {exc}") from None
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise InvalidInput(f"{path}: expected a JSON list of objects")
    wanted = {"resource", "time", "token", "holder", "reason"}
    rejections = []
    for entry in entries:
        unknown = set(entry) - wanted
        if unknown:
            raise InvalidInput(f"{path}: unknown field(s) {sorted(unknown)} in a rejection")
        rejections.append(Rejection(**entry))
    return rejections


def _timeline(index: Any, args: argparse.Namespace, status: Any) -> int:
    from pathlib import Path

    from ..audit.timeline import render
    from ..errors import InvalidInput

    leases = index.timeline_leases(args.names)
    page = render(leases, rejections=_rejections(args.rejections), title=args.title, now=status.as_of)
    try:
        Path(args.out).write_text(page, encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot write {args.out}: {exc}") from None
    if args.json:
        print(json.dumps({"out": args.out, "leases": len(leases), "status": status.to_dict()}))
    else:
        print(f"{args.out}: {len(leases)} leases of {len(args.names)} resource(s)")
    return 0


def _query(index: Any, args: argparse.Namespace, chain: Any = None) -> Any:
    command = args.audit_command
    if command == "history":
        return index.history(args.name)
    if command == "token":
        return index.lease(args.token)
    if command == "holder":
        return index.leases_of(args.address)
    if command == "at":
        block_time = None
        if args.block is not None and chain is not None:
            found = chain.rpc.block(args.block)
            block_time = int(found["timestamp"]) if found is not None else None
        lease = index.holder_at(args.name, time=args.time, block=args.block, block_time=block_time)
        return [lease] if lease is not None else []
    if command == "current":
        return index.current(prefix=args.prefix)
    if command == "takeovers":
        return index.takeovers(
            from_block=args.from_block,
            to_block=args.to_block,
            since=args.since,
            until=args.until,
            resource=args.resource,
        )
    if command == "completions":
        return index.completions(
            resource=args.name, from_block=args.from_block, to_block=args.to_block, since=args.since, until=args.until
        )
    return index.resources(args.prefix)


def _json(answer: Any) -> Any:
    if answer is None:
        return None
    if isinstance(answer, list):
        return [item.to_dict() for item in answer]
    return answer.to_dict()


def _ended(lease: Any) -> str:
    if lease.ended is None:
        return f"{lease.status} (expires {_when(lease.expires_at)})"
    by = f" by {lease.ended_by}" if lease.ended_by else ""
    return f"{lease.ended}{by} {_when(lease.ended_at)}"


def _print(answer: Any, args: argparse.Namespace, table: Any) -> None:
    command = args.audit_command
    if answer is None:
        print(f"token {args.token} is not in the index")
        return
    items = answer if isinstance(answer, list) else [answer]
    if not items:
        print("nothing found")
        return
    if command in ("history", "token", "holder", "at", "current"):
        rows = []
        for lease in items:
            reason = lease.reason.name.lower() if hasattr(lease.reason, "name") else str(lease.reason)
            if lease.granted_by:
                reason += f" (granted by {lease.granted_by})"
            renewals = str(lease.renewals)
            if lease.renewals:
                renewals += f", last {_when(lease.last_renewed_at)}"
            if lease.markers:
                renewals += f", {lease.markers} markers (0x{lease.last_marker.hex()[:12]}..)"
            rows.append(
                [
                    lease.resource_display,
                    str(lease.token),
                    lease.holder,
                    _when(lease.acquired_at),
                    reason,
                    renewals,
                    _ended(lease),
                ]
            )
        print(table(rows, ["resource", "token", "holder", "acquired", "reason", "renewals", "ended"]))
    elif command == "takeovers":
        rows = [
            [
                t.resource_display,
                _when(t.at),
                f"{t.previous_holder} (#{t.previous_token}, {t.previous_ended or '-'})",
                f"{t.holder} (#{t.token})",
                t.reason.name.lower() if hasattr(t.reason, "name") else str(t.reason),
            ]
            for t in items
        ]
        print(table(rows, ["resource", "at", "from", "to", "reason"]))
    elif command == "completions":
        rows = [[c.resource_display, str(c.token), c.holder, _when(c.at), "0x" + c.digest.hex()] for c in items]
        print(table(rows, ["resource", "token", "holder", "at", "digest"]))
    else:
        rows = [
            [r.resource_display, str(r.leases), str(r.latest_token or "-"), "item" if r.claimed_item else ""]
            for r in items
        ]
        print(table(rows, ["resource", "leases", "latest token", ""]))
