"""The commands that only read: ``status``, ``verify``, ``stuck`` and ``tx``.

::

    chainfence status [NAME ...]                        # leases, or the registry itself
    chainfence verify NAME --token T                    # exit 0 only if T is current
    chainfence verify NAME --token T --proven --headers URL1 URL2 URL3 --quorum 2
                                                        # ... proven: believing no single provider
    chainfence stuck [--renewals N] [--longer-than S]   # stuck, crashed and long holders
    chainfence tx HASH... [--nonce N --account A]       # what became of a transaction

None of them reads the signing key (a malformed ``CHAINFENCE_PRIVATE_KEY`` cannot break them). Nothing
here imports web3 at module level.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from ..errors import TokenNotCurrent
from ._common import (
    EXIT_NOT_CURRENT,
    EXIT_OK,
    EXIT_OUTCOME,
    UsageError,
    add_command,
    completeness,
    completeness_option,
    connect,
    emit,
    non_negative_int,
    positive_int,
    table,
    target,
    timeout,
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
    proven = verify.add_argument_group(
        "proven mode",
        "judge the token by the registry's lease slot proven with eth_getProof against a header that no single "
        "provider controls: k of the --headers providers agreeing on it, or the one --trusted-headers endpoint "
        "(a light client such as Helios, your own node). Exit 13 when the answers do not verify (a provider "
        "lied or lags: its proof or header does not verify, the header providers disagree, or the header they "
        "vouch for is stale); 5 when too few providers answer. Never a fall back to one provider.",
    )
    proven.add_argument("--proven", action="store_true", help="believe no single provider (needs a header source)")
    proven.add_argument(
        "--headers",
        nargs="+",
        action="extend",
        metavar="URL",
        help="header providers for the quorum, independent operators (URL URL ..., a comma-separated list, or "
        "the option repeated)",
    )
    proven.add_argument(
        "--quorum", type=positive_int, metavar="K", help="header providers that must agree (default: a majority)"
    )
    proven.add_argument("--trusted-headers", metavar="URL", help="one endpoint trusted for headers (a light client)")
    proven.add_argument(
        "--proof-rpc",
        metavar="URL",
        help="where eth_getProof is asked (default: the node of --rpc-url; need not be honest)",
    )
    proven.add_argument(
        "--header-depth",
        type=_depth,
        default=0,
        metavar="N|finalized",
        help="judge at the k-th highest head less N blocks, or at the finalized block (default 0)",
    )
    proven.add_argument(
        "--max-age",
        type=timeout,
        metavar="S",
        help="refuse a header older than S seconds by the verifier's clock (default 60 + 12 per block of depth; "
        "1800 with finalized)",
    )
    proven.add_argument(
        "--clock-rpc",
        metavar="URL",
        help="the verifier's clock: this node's pending block time, for a dev chain whose time is moved by hand "
        "(default: this machine's clock; never a provider's, which could hold its time back with its head)",
    )
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
    completeness_option(stuck)
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
    tx.add_argument(
        "--item",
        type=non_negative_int,
        help="a batch transaction (group commit): the position of your operation in it (an OutcomeUnknown's item)",
    )
    tx.add_argument(
        "--resource", help="a batch transaction: your operation's resource (with --item, checked against it)"
    )
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
    if not args.resources:
        now = chain.now()
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
    from .._sdk import names as _names
    from .._sdk import validate as _validate

    names = [name if args.workset is None else _names.item_name(args.workset, name) for name in args.resources]
    for name in names:  # every name checked before the first is read: a bad one is exit 2
        _validate.resource_id(name)
    rows: list[dict[str, Any]] = []
    judged: list[int] = []  # the chain times live leases were judged at, read with them
    for name in names:
        last = registry.last_lease(name)
        if last is not None and last.judged_at is not None:
            judged.append(last.judged_at)
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

    def shown() -> str:
        # Expiries are shown beside the chain time a live lease was judged at (read with it), else the
        # chain's time now: asked only for the text, and only when no read said it.
        now = judged[0] if judged else chain.now()
        cells = [
            [
                _names.display_name(row["resource"]),
                row["status"] + (" (no block since)" if row["no_block_since"] else ""),
                str(row["token"] or "-"),
                row["holder"] or "-",
                when(row["expires_at"], now),
            ]
            for row in rows
        ]
        return table(cells, ["resource", "status", "token", "holder", "expires"])

    emit(args, rows, shown)
    return EXIT_OK


def _depth(text: str) -> int | str:
    if text == "finalized":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of blocks >= 0 or 'finalized', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a number of blocks >= 0 or 'finalized', got {text!r}")
    return value


#: A comma that starts another URL (a comma inside a URL's path or query stays in it): the same rule as
#: the CLI's other endpoint lists.
_URL_LIST = re.compile(r",\s*(?=https?://)", re.IGNORECASE)


def _header_urls(args: argparse.Namespace) -> list[str]:
    """The --headers URLs (several, comma lists, or the option repeated), checked; a usage error before
    anything is sent."""
    from .._sdk import validate as _validate

    urls = [url.strip() for given in args.headers or [] for url in _URL_LIST.split(given.strip()) if url.strip()]
    for url in urls:
        _validate.rpc_url(url, "--headers")
    if len(set(urls)) != len(urls):
        raise UsageError("--headers lists a provider twice: one provider is one vote")
    return urls


def _proven_options(args: argparse.Namespace) -> tuple[list[str], str | None] | None:
    """(the quorum's URLs, the trusted endpoint) of a proven verify, or None for a plain one; every mistake
    in them is a usage error (exit 2), never a verify that quietly believes one provider."""
    given = [
        flag
        for flag, value in (
            ("--headers", args.headers),
            ("--quorum", args.quorum),
            ("--trusted-headers", args.trusted_headers),
            ("--proof-rpc", args.proof_rpc),
            ("--max-age", args.max_age),
            ("--clock-rpc", args.clock_rpc),
        )
        if value is not None
    ] + (["--header-depth"] if args.header_depth != 0 else [])
    if not args.proven:
        if given:
            raise UsageError(f"{', '.join(given)} configure the proven mode: add --proven")
        return None
    urls = _header_urls(args)
    from .._sdk import validate as _validate

    if args.clock_rpc is not None:
        _validate.rpc_url(args.clock_rpc, "--clock-rpc")
    if args.trusted_headers is not None:
        _validate.rpc_url(args.trusted_headers, "--trusted-headers")
        if urls or args.quorum is not None:
            raise UsageError("--trusted-headers is one endpoint trusted for headers: not with --headers or --quorum")
        return [], args.trusted_headers
    if not urls:
        raise UsageError(
            "--proven needs a header source: --headers URL URL URL (k of them agreeing: --quorum K) "
            "or --trusted-headers URL"
        )
    if args.quorum is not None and args.quorum > len(urls):
        raise UsageError(f"--quorum {args.quorum} is more than the {len(urls)} --headers providers")
    return urls, None


def _verify(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, shown = target(args)
    proven = _proven_options(args)
    chain, registry = connect(args, needs_key=False)
    header = None
    try:
        if proven is None:
            lease = registry.check_current(name, args.token)
        else:
            lease, header = _proven_check(args, chain, registry, name, *proven)
    except TokenNotCurrent as not_current:
        refusal = {
            "resource": name,
            "token": args.token,
            "current": False,
            "reason": type(not_current).__name__,
            **not_current.details(),
        }
        emit(args, refusal, f"NOT current: {not_current}")
        return EXIT_NOT_CURRENT
    document: dict[str, Any] = {
        "resource": name,
        "token": args.token,
        "current": True,
        "holder": lease.holder,
        "expires_at": lease.expires_at,
    }
    proof = ""
    if header is not None:
        document["proven"] = {"block": header.number, "hash": header.hash_hex, "vouched_by": list(header.vouched_by)}
        proof = (
            f"\nproven at block {header.number} ({header.hash_hex}), header vouched by {', '.join(header.vouched_by)}"
        )
    emit(
        args,
        document,
        lambda: (
            f"current: token {args.token} of {shown}, held by {lease.holder}, "
            # the chain time the lease was judged live at, read with it (else asked now)
            f"expires {when(lease.expires_at, lease.judged_at or chain.now())}" + proof
        ),
    )
    return EXIT_OK


def _proven_check(
    args: argparse.Namespace, chain: Any, registry: Any, name: str, urls: list[str], trusted: str | None
) -> tuple[Any, Any]:
    """The token judged by a proof against a header from the configured source: (the lease, the header)."""
    import time

    from ..proofs import ProvenReader, QuorumHeaders, TrustedHeaders

    # The verifier's clock: this machine's, never the (untrusted) provider's: a provider that withholds
    # its head would hold its time back with it. A dev chain whose time is moved by hand: --clock-rpc.
    clock: Any = time.time
    if args.clock_rpc is not None:
        from ..chain import Chain

        clock = Chain.connect(args.clock_rpc).now
    options: dict[str, Any] = {"confirmations": args.header_depth, "clock": clock}
    if args.max_age is not None:
        options["max_age"] = args.max_age
    headers = (
        TrustedHeaders(trusted, **options) if trusted is not None else QuorumHeaders(urls, k=args.quorum, **options)
    )
    try:
        reader = ProvenReader(registry.address, headers=headers, provider=args.proof_rpc or chain)
        header = reader.header()
        return reader.check(name, args.token, header=header), header
    finally:
        headers.close()


def _stuck(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    mode = completeness(args)  # a bad mode is refused before anything is opened or asked
    _chain, registry = connect(args, needs_key=False)
    index = None
    if args.index:
        from ..audit.index import AuditIndex

        index = AuditIndex(args.index, completeness=mode)
    from ..audit.watchdog import stuck

    report = stuck(
        registry, renewals=args.renewals, longer_than=args.longer_than, from_block=args.from_block, index=index
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
    verdict = reconcile(
        registry,
        args.hashes,
        nonce=args.nonce,
        sender=args.account,
        confirmations=args.confirmations,
        item=args.item,
        resource=args.resource,
    )

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
