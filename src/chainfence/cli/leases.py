"""The holder's commands: ``acquire``, ``renew``, ``release``, ``claim`` and ``complete``.

::

    chainfence acquire NAME --ttl S [--wait S]             # prints the lease's fencing token
    chainfence renew NAME --token T --ttl S [--progress MARKER]
    chainfence release NAME --token T
    chainfence claim WORKSET ITEM... --ttl S                # the next free item; exit 8 when none is left
    chainfence complete NAME --token T [--workset WS] [--result TEXT]

Each signs with the key from the environment or a keystore (:func:`._common.connect`). A claimed work
item is named ``WORKSET»ITEM``, or ITEM with ``--workset``. Nothing here imports web3 at module level.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import InvalidInput
from ._common import (
    EXIT_NOTHING_TO_CLAIM,
    EXIT_OK,
    NAME_RULES,
    UsageError,
    add_command,
    connect,
    emit,
    lease_document,
    positive_int,
    publishable,
    target,
    token,
    utf8,
    wait_seconds,
    waiting,
    when,
)

_ITEM_HELP = "the resource's name (a claimed work item: WORKSET»ITEM, or ITEM with --workset)"


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``acquire``, ``renew``, ``release``, ``claim`` and ``complete``."""
    acquire = add_command(
        subparsers,
        "acquire",
        parents=[common],
        example="chainfence acquire reports/daily --ttl 30 --wait 60 --json",
        help="acquire a lease; prints its fencing token",
    )
    acquire.add_argument("resource", help=f"the resource's name ({NAME_RULES}), e.g. reports/daily")
    acquire.add_argument("--ttl", type=positive_int, required=True, help="lease length in seconds")
    acquire.add_argument(
        "--wait",
        type=wait_seconds,
        default=0.0,
        metavar="S",
        help="if the lease is held, wait up to S seconds for it to become free (default 0: exit 3 at once)",
    )
    acquire.set_defaults(run=_acquire)

    renew = add_command(
        subparsers,
        "renew",
        parents=[common],
        example="chainfence renew reports/daily --token 7 --ttl 30 --progress step-2",
        help="extend a live lease you hold",
    )
    renew.add_argument("resource", help=_ITEM_HELP)
    renew.add_argument("--token", type=token, required=True, help="your lease's fencing token")
    renew.add_argument("--ttl", type=positive_int, required=True, help="new lease length in seconds, from now")
    renew.add_argument("--workset", help="renew the claim on work item RESOURCE of this workset")
    renew.add_argument(
        "--progress",
        type=_progress,
        help="progress marker recorded with the renewal: 0x-hex (1-32 bytes), a decimal counter, or any text (hashed)",
    )
    renew.set_defaults(run=_renew)

    release = add_command(
        subparsers,
        "release",
        parents=[common],
        example="chainfence release reports/daily --token 7",
        help="end a lease you hold",
    )
    release.add_argument("resource", help=_ITEM_HELP)
    release.add_argument("--token", type=token, required=True, help="your lease's fencing token")
    release.add_argument("--workset", help="release the claim on work item RESOURCE of this workset")
    release.set_defaults(run=_release)

    claim = add_command(
        subparsers,
        "claim",
        parents=[common],
        example="read item token < <(chainfence claim backfill 2026-11-01 2026-11-02 --ttl 300)",
        help="claim the next free item of a set of work; prints the item and its token",
        description="Claims, in one transaction, the first of the items that is free (never claimed, released, "
        "expired, or held by you: a restarted agent gets its own item back under a new token) and not done. "
        "Prints 'ITEM TOKEN' (for `read item token` in a shell); exit 8 when nothing is left to claim. "
        "Finish with `chainfence complete ITEM --workset WORKSET --token TOKEN`.",
    )
    claim.add_argument("workset", help="the set of work's name")
    claim.add_argument("items", nargs="*", metavar="item", help="the items to choose from, in order")
    claim.add_argument("--items-file", help="read the items from this file, one per line ('-': stdin)")
    claim.add_argument("--ttl", type=positive_int, required=True, help="claim length in seconds")
    claim.set_defaults(run=_claim)

    complete = add_command(
        subparsers,
        "complete",
        parents=[common],
        example="chainfence complete 2026-11-01 --workset backfill --token 9 --result 'rows: 42'",
        help="record a result for a lease you hold (a claimed item: mark it done)",
    )
    complete.add_argument("resource", help="resource name (a claimed work item: WORKSET»ITEM, or ITEM with --workset)")
    complete.add_argument("--token", type=token, required=True, help="your lease's fencing token")
    complete.add_argument("--workset", help="RESOURCE is a work item of this workset: completing marks it done")
    complete.add_argument("--result", default="", help="the result, as text (its keccak256 is recorded)")
    complete.set_defaults(run=_complete)


def _progress(text: str) -> bytes | int | str:
    """A --progress marker: 0x-hex bytes, a decimal counter, or text (hashed by the SDK)."""
    from .._sdk import validate as _validate

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


def _acquire(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    publishable(args.resource)
    chain, registry = connect(args, needs_key=True)
    what = f"acquire {args.resource}" + (f" (waiting up to {args.wait:g} s while it is held)" if args.wait else "")
    with waiting(chain, args, what):
        lease = registry.acquire(args.resource, ttl=args.ttl, confirmations=args.confirmations, wait=args.wait)
    emit(
        args,
        lease_document(lease),
        lambda: "\n".join(
            [
                f"acquired {lease.resource!r}: token {lease.token}",
                f"  holder   {lease.holder}",
                f"  expires  {when(lease.expires_at, chain.now())}",
                f"  reason   {lease.reason.name.lower()} (previous token {lease.previous_token})",
                f"  tx       {lease.tx_hash} (block {lease.block_number})",
            ]
        ),
    )
    return EXIT_OK


def _renew(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = target(args)
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"renew {shown}"):
        expires_at = registry.renew(
            name, args.token, args.ttl, progress=args.progress, confirmations=args.confirmations
        )
    emit(
        args,
        {"resource": name, "token": args.token, "expires_at": expires_at},
        lambda: f"renewed {shown} token {args.token}: expires {when(expires_at, chain.now())}",
    )
    return EXIT_OK


def _release(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = target(args)
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"release {shown}"):
        registry.release(name, args.token, confirmations=args.confirmations)
    emit(args, {"resource": name, "token": args.token, "released": True}, f"released {shown} token {args.token}")
    return EXIT_OK


def _claim(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    items = list(args.items)
    if args.items_file is not None:
        try:
            if args.items_file == "-":
                text = sys.stdin.read()
            else:
                with open(args.items_file, encoding="utf-8") as file:
                    text = file.read()
        except (OSError, UnicodeDecodeError) as problem:
            raise UsageError(f"cannot read --items-file: {problem}") from None
        items += [line.strip() for line in text.splitlines() if line.strip()]
    if not items:
        raise UsageError("no items: name them, or pass --items-file")
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"claim {args.workset}"):
        lease = registry.workset(args.workset).claim(items, ttl=args.ttl, confirmations=args.confirmations)
    if lease is None:
        emit(
            args,
            {"workset": args.workset, "item": None, "count": len(items)},
            f"chainfence claim: nothing left to claim in {args.workset!r} ({len(items)} item{'s' * (len(items) != 1)})",
            stream=sys.stderr,
        )
        return EXIT_NOTHING_TO_CLAIM
    emit(
        args,
        {**lease_document(lease), "workset": lease.workset, "item": lease.item},
        f"{lease.item} {lease.token}",
    )
    return EXIT_OK


def _complete(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = target(args)
    result = utf8(args.result, "--result")
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"complete {shown}"):
        digest = registry.complete(name, args.token, result, confirmations=args.confirmations)
    emit(
        args,
        {"resource": name, "token": args.token, "result_digest": "0x" + digest.hex()},
        f"completed {shown} token {args.token}: result 0x{digest.hex()}",
    )
    return EXIT_OK
