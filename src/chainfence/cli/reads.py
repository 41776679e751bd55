"""The commands that only read: ``status``, ``verify``, ``stuck`` and ``tx``.

::

    chainfence status [NAME ...]                        # leases, or the registry itself
    chainfence verify NAME --token T                    # exit 0 only if T is current
    chainfence stuck [--renewals N] [--longer-than S]   # stuck, crashed and long holders
    chainfence tx HASH... [--nonce N --account A]       # what became of a transaction

None of them reads the signing key (a malformed ``CHAINFENCE_PRIVATE_KEY`` cannot break them). Nothing
here imports web3 at module level.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import TokenNotCurrent
from ._common import (
    EXIT_NOT_CURRENT,
    EXIT_OK,
    EXIT_OUTCOME,
    UsageError,
    add_command,
    connect,
    emit,
    non_negative_int,
    positive_int,
    table,
    target,
    token,
    when,
)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``status``, ``verify``, ``stuck`` and ``tx``."""
    status = add_command(
        subparsers,
        "status",
        parents=[common],
        example="chainfence status reports/daily jobs/etl",
        help="show resources' leases, or the registry",
    )
    status.add_argument(
        "resources",
        nargs="*",
        metavar="resource",
        help="resources to show, a claimed work item as WORKSET»ITEM (none: the registry itself)",
    )
    status.add_argument("--workset", help="the names are work items of this workset")
    status.set_defaults(run=_status)

    verify = add_command(
        subparsers,
        "verify",
        parents=[common],
        example="chainfence verify reports/daily --token 7 && echo current",
        help="exit 0 only if the token is current",
    )
    verify.add_argument(
        "resource", help="the resource's name (a claimed work item: WORKSET»ITEM, or ITEM with --workset)"
    )
    verify.add_argument("--token", type=token, required=True, help="the fencing token to check")
    verify.add_argument("--workset", help="RESOURCE is a work item of this workset")
    verify.set_defaults(run=_verify)

    stuck = add_command(
        subparsers,
        "stuck",
        parents=[common],
        example="chainfence stuck --renewals 3 --longer-than 3600",
        help="list leases alive but stuck, crashed (expired unreleased), or held too long",
        description="Reads the registry's events: leases renewed --renewals times in a row with an unchanged "
        "progress marker (alive but stuck), latest leases that expired without a release or completion "
        "(crashed holders), and with --longer-than, leases held longer than that many seconds.",
    )
    stuck.add_argument("--renewals", type=positive_int, default=3, help="renewals without progress (default 3)")
    stuck.add_argument("--longer-than", type=positive_int, help="also list leases held longer than this (seconds)")
    stuck.add_argument("--from-block", type=non_negative_int, help="first block to read (default: the deployment's)")
    stuck.add_argument("--index", help="read the events from this audit index (synced first) instead of the chain")
    stuck.set_defaults(run=_stuck)

    tx = add_command(
        subparsers,
        "tx",
        parents=[common],
        example="chainfence tx 0x5c50...e1 --json",
        help="what became of transactions (after a timeout or an unknown outcome)",
        description="Look up candidate transactions (a transaction and its cancellation share a nonce) and say "
        "whether one was mined, what it did (an acquisition: its lease), and whether that is final. Exit 0 "
        "when settled, 6 when not yet.",
    )
    tx.add_argument(
        "hashes", nargs="*", type=_tx_hash, metavar="HASH", help="transaction hashes (0x and 64 hex digits)"
    )
    tx.add_argument("--nonce", type=non_negative_int, help="the nonce the transactions used")
    tx.add_argument("--account", help="the account that sent them (default: the transactions' sender)")
    tx.set_defaults(run=_tx)


def _tx_hash(text: str) -> str:
    if len(text) != 66 or not text.startswith("0x"):
        raise argparse.ArgumentTypeError(f"a transaction hash is 0x and 64 hex digits, got {text!r}")
    try:
        bytes.fromhex(text[2:])
    except ValueError:
        raise argparse.ArgumentTypeError(f"a transaction hash is 0x and 64 hex digits, got {text!r}") from None
    return text.lower()


def _status(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.workset is not None and not args.resources:
        raise UsageError("--workset names the items to show: chainfence status ITEM... --workset WORKSET")
    chain, registry = connect(args, needs_key=False)
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
        emit(args, info, table([[k.replace("_", " "), str(v)] for k, v in info.items()], ["field", "value"]))
        return EXIT_OK
    from .. import _names, _validate

    names = [name if args.workset is None else _names.item_name(args.workset, name) for name in args.resources]
    for name in names:  # every name checked before the first is read: a bad one is exit 2
        _validate.resource_id(name)
    rows: list[dict[str, Any]] = []
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
    shown = [
        [
            _names.display_name(row["resource"]),
            row["status"] + (" (no block since)" if row["no_block_since"] else ""),
            str(row["token"] or "-"),
            row["holder"] or "-",
            when(row["expires_at"], now),
        ]
        for row in rows
    ]
    emit(args, rows, table(shown, ["resource", "status", "token", "holder", "expires"]))
    return EXIT_OK


def _verify(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = target(args)
    chain, registry = connect(args, needs_key=False)
    try:
        lease = registry.check_current(name, args.token)
    except TokenNotCurrent as not_current:
        document = {
            "resource": name,
            "token": args.token,
            "current": False,
            "reason": type(not_current).__name__,
            **not_current.details(),
        }
        emit(args, document, f"NOT current: {not_current}")
        return EXIT_NOT_CURRENT
    emit(
        args,
        {
            "resource": name,
            "token": args.token,
            "current": True,
            "holder": lease.holder,
            "expires_at": lease.expires_at,
        },
        lambda: (
            f"current: token {args.token} of {shown}, held by {lease.holder}, "
            f"expires {when(lease.expires_at, chain.now())}"
        ),
    )
    return EXIT_OK


def _stuck(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    _chain, registry = connect(args, needs_key=False)
    index = None
    if args.index:
        from ..audit.index import AuditIndex

        index = AuditIndex(args.index)
    report = registry.stuck(
        renewals=args.renewals, longer_than=args.longer_than, from_block=args.from_block, index=index
    )

    def text() -> str:
        rows = []
        for entry in [*report.stuck, *report.crashed, *report.long_held]:
            detail = {
                "stuck": f"{entry.unchanged_renewals} renewals, marker 0x{(entry.progress or b'').hex()[:16]}...",
                "crashed": f"expired {when(entry.expires_at, report.judged_at)}, never released",
                "long_held": f"held {entry.held_for} s",
            }[entry.kind]
            rows.append([entry.kind, entry.resource_display, str(entry.token), entry.holder, detail])
        if not rows:
            held_too_long = " or held too long" if args.longer_than else ""
            return f"nothing stuck, crashed{held_too_long} (blocks {report.from_block}..{report.to_block})"
        return table(rows, ["finding", "resource", "token", "holder", "detail"])

    emit(args, report.to_dict(), text)
    return EXIT_OK


def _tx(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..outcomes import reconcile

    if not args.hashes and (args.nonce is None or args.account is None):
        raise UsageError("give transaction hashes, or --nonce and --account")
    _chain, registry = connect(args, needs_key=False)
    verdict = reconcile(registry, args.hashes, nonce=args.nonce, sender=args.account, confirmations=args.confirmations)

    def text() -> str:
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
        lines = [table(rows, ["transaction", "state", "action", "nonce", "block"])] if rows else []
        if verdict.nonce_state is not None:
            lines.append(f"nonce: {verdict.nonce_state}")
        lines.append(("settled: " if verdict.settled else "NOT settled: ") + verdict.summary)
        return "\n".join(lines)

    emit(args, verdict.to_dict(), text)
    return EXIT_OK if verdict.settled else EXIT_OUTCOME
