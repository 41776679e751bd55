"""The operator commands of ``chainfence``: namespaces, policies, revoke, grant, lease sets.

::

    chainfence namespace mine                           # your address namespace ("0x" + your address, lowercase)
    chainfence namespace transfer PREFIX NEW_ADMIN      # offer it; NEW_ADMIN runs `namespace accept`
    chainfence namespace accept PREFIX
    chainfence namespace policy set PREFIX [--max-ttl S] [--lock-delay S] [--admission | --no-admission]
                                                        # sets only the fields given
    chainfence namespace policy show PREFIX
    chainfence namespace admit PREFIX ADDRESS... [--remove]
    chainfence revoke NAME [--workset WS]               # as the namespace's admin: ends the live lease (claim)
    chainfence grant NAME HOLDER --ttl S [--workset WS] # as the namespace's admin: a new token for HOLDER
    chainfence acquire-many NAME... --ttl S             # all or nothing, one token each

Registered by :mod:`chainfence.cli` (``register``); nothing here imports
web3 or the registry at module level, so ``chainfence --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

__all__ = ["COMMANDS", "register"]


def register(commands: Any, common: argparse.ArgumentParser, positive_int: Callable[[str], int]) -> None:
    """Add the operator commands to ``commands`` (the ``chainfence`` subparsers)."""
    namespace = commands.add_parser("namespace", help="your namespace; hand over and set the policy of a namespace")
    ops = namespace.add_subparsers(dest="namespace_command", metavar="ACTION", help="what to do (each has --help)")
    ops.required = True
    mine = ops.add_parser(
        "mine",
        parents=[common],
        help="the namespace your key administers by construction ('0x' + your address, lowercase) and its policy",
    )
    mine.add_argument("--address", help="another address's namespace (no key needed)")
    transfer = ops.add_parser("transfer", parents=[common], help="offer the namespace to a new admin (step 1 of 2)")
    transfer.add_argument("prefix", help="the namespace: the part of resource names before their first '/'")
    transfer.add_argument("new_admin", help="address that takes over when it runs `namespace accept`")
    accept = ops.add_parser("accept", parents=[common], help="take over a namespace offered to you (step 2 of 2)")
    accept.add_argument("prefix", help="the namespace offered to you")
    policy = ops.add_parser("policy", help="set or show a namespace's policy")
    policy_ops = policy.add_subparsers(dest="policy_command", metavar="ACTION", help="set or show (each has --help)")
    policy_ops.required = True
    show = policy_ops.add_parser("show", parents=[common], help="admin, pending admin and policy")
    show.add_argument("prefix", help="the namespace")
    set_ = policy_ops.add_parser(
        "set", parents=[common], help="set fields of the policy (admin only; the fields not given keep their values)"
    )
    set_.add_argument("prefix", help="the namespace (you must be its admin)")
    set_.add_argument("--max-ttl", type=_non_negative, help="longest lease, seconds (0: the registry's)")
    set_.add_argument(
        "--lock-delay",
        type=_non_negative,
        help="seconds after an expiry during which only the expired holder may acquire (0: none)",
    )
    set_.add_argument(
        "--admission",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only admitted holders may acquire (--no-admission: anyone)",
    )
    admit = ops.add_parser("admit", parents=[common], help="add holders to the allowlist (admin only)")
    admit.add_argument("prefix", help="the namespace (you must be its admin)")
    admit.add_argument("holders", nargs="+", metavar="ADDRESS", help="accounts or contracts to admit")
    admit.add_argument("--remove", action="store_true", help="remove them instead")

    revoke = commands.add_parser("revoke", parents=[common], help="end a live lease, as its namespace's admin")
    revoke.add_argument(
        "resource", help="the resource whose live lease ends (a claimed item: WORKSET»ITEM, or ITEM with --workset)"
    )
    revoke.add_argument("--workset", help="RESOURCE is a work item of this workset: revoke its live claim")
    grant = commands.add_parser("grant", parents=[common], help="issue a lease to a holder, as its namespace's admin")
    grant.add_argument("resource", help="the resource to grant (a claimed item: WORKSET»ITEM, or ITEM with --workset)")
    grant.add_argument("--workset", help="RESOURCE is a work item of this workset: the holder gets it as a claim")
    grant.add_argument("holder", help="the account that gets the new token")
    grant.add_argument("--ttl", type=positive_int, required=True, help="lease length in seconds")
    many = commands.add_parser(
        "acquire-many", parents=[common], help="acquire several resources in one transaction, all or nothing"
    )
    many.add_argument("resources", nargs="+", metavar="NAME", help="the resources, each held with its own token")
    many.add_argument("--ttl", type=positive_int, required=True, help="lease length in seconds")
    for parser in (namespace, *ops.choices.values(), *policy_ops.choices.values(), revoke, grant, many):
        words = parser.prog.split(" ", 1)[1]  # "namespace policy set"
        if words == "namespace mine":
            parser.description = (
                "An address namespace ('0x' and the 40 lowercase hex digits of an address) belongs to that "
                "address from the start: no claim, no storage until you set a policy. Put your resources "
                "under it (0x.../jobs) to govern them; other namespaces have an admin only if the deployer "
                "assigned them."
            )
        parser.epilog = f"example:\n  {EXAMPLES[words]}\n"
        parser.formatter_class = argparse.RawDescriptionHelpFormatter


#: One example per operator command, shown at the end of its --help.
EXAMPLES = {
    "namespace": "chainfence namespace mine",
    "namespace mine": "chainfence namespace mine --json",
    "namespace transfer": "chainfence namespace transfer prod 0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF",
    "namespace accept": "chainfence namespace accept prod",
    "namespace policy": "chainfence namespace policy show prod --json",
    "namespace policy show": "chainfence namespace policy show prod --json",
    "namespace policy set": "chainfence namespace policy set prod --lock-delay 15   # max ttl, admission unchanged",
    "namespace admit": "chainfence namespace admit prod 0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF",
    "revoke": "chainfence revoke prod/db",
    "grant": "chainfence grant prod/db 0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF --ttl 60",
    "acquire-many": "chainfence acquire-many prod/db prod/cache --ttl 30 --json",
}


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an int >= 0, got {value}")
    return value


def _print(args: argparse.Namespace, document: dict[str, Any], text: str) -> None:
    print(json.dumps(document) if args.json else text)


def _cmd_namespace(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from . import EXIT_OK, _connect, _waiting

    action = args.namespace_command if args.namespace_command != "policy" else f"policy {args.policy_command}"
    read_only = action == "policy show" or (action == "mine" and args.address is not None)
    chain, registry = _connect(args, needs_key=not read_only)
    if action in ("policy show", "mine"):
        if action == "mine":
            args.prefix = registry.namespace_of(args.address)
        policy = registry.namespace_policy(args.prefix)
        document = policy.to_dict()
        lines = [f"namespace {args.prefix!r} (0x{policy.namespace.hex()})"]
        if action == "mine":
            lines.append(f"  an address namespace: its address governs the resources named {args.prefix}/...")
        lines.append(
            f"  admin               {policy.admin or '- (nobody: open to all; only the deployer assigns one)'}"
        )
        lines.append(f"  pending admin       {policy.pending_admin or '-'}")
        lines.append(f"  max ttl             {policy.max_ttl or 'the registry maximum'}")
        lines.append(f"  lock-delay          {policy.lock_delay} s")
        lines.append(f"  admission required  {'yes' if policy.admission_required else 'no'}")
        _print(args, document, "\n".join(lines))
        return EXIT_OK
    with _waiting(chain, args, f"namespace {action} {args.prefix}"):
        if action == "transfer":
            registry.transfer_namespace_admin(args.prefix, args.new_admin, confirmations=args.confirmations)
            document = {"pending_admin": args.new_admin}
            text = f"offered namespace {args.prefix!r} to {args.new_admin}: it takes over with `namespace accept`"
        elif action == "accept":
            registry.accept_namespace_admin(args.prefix, confirmations=args.confirmations)
            document, text = {"admin": registry.sender}, f"namespace {args.prefix!r}: admin is now {registry.sender}"
        elif action == "policy set":
            if args.max_ttl is None and args.lock_delay is None and args.admission is None:
                parser.error("namespace policy set: give at least one of --max-ttl, --lock-delay, --admission")
            # The event says the whole policy as it now stands: the fields not given kept their values.
            policy = registry._drive(
                registry._policy_set_steps(
                    args.prefix, args.max_ttl, args.lock_delay, args.admission, args.confirmations
                )
            )
            document = {
                "max_ttl": policy.max_ttl,
                "lock_delay": policy.lock_delay,
                "admission_required": policy.admission_required,
            }
            text = (
                f"namespace {args.prefix!r}: max ttl {policy.max_ttl or 'registry maximum'}, "
                f"lock-delay {policy.lock_delay} s, admission {'required' if policy.admission_required else 'open'}"
            )
        else:  # admit
            registry.admit(args.prefix, args.holders, admitted=not args.remove, confirmations=args.confirmations)
            document = {"holders": args.holders, "admitted": not args.remove}
            text = f"namespace {args.prefix!r}: {'removed' if args.remove else 'admitted'} {', '.join(args.holders)}"
    _print(args, {"namespace": args.prefix, "action": action, **document}, text)
    return EXIT_OK


def _cmd_revoke(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .. import _names
    from . import EXIT_OK, _connect, _waiting

    name = args.resource if args.workset is None else _names.item_name(args.workset, args.resource)
    item = _names.split_item(name)  # checked before anything is asked of the node
    chain, registry = _connect(args, needs_key=True)
    with _waiting(chain, args, f"revoke {_names.display_name(name)}"):
        token = registry.revoke(name, confirmations=args.confirmations)  # workset»item: revoke_item
    document: dict[str, Any] = {"resource": name, "revoked_token": token, "admin": registry.sender}
    if item is not None:
        document.update(workset=item[0], item=item[1])
    _print(args, document, f"revoked {_names.display_name(name)} token {token} (admin {registry.sender})")
    return EXIT_OK


def _cmd_grant(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .. import _names
    from . import EXIT_OK, _connect, _lease_json, _waiting, _when

    name = args.resource if args.workset is None else _names.item_name(args.workset, args.resource)
    _names.split_item(name)  # checked before anything is asked of the node
    chain, registry = _connect(args, needs_key=True)
    with _waiting(chain, args, f"grant {_names.display_name(name)}"):
        lease = registry.grant(
            name, args.holder, args.ttl, confirmations=args.confirmations
        )  # workset»item: grant_item
    extra = {} if lease.workset is None else {"workset": lease.workset, "item": lease.item}
    _print(
        args,
        {**_lease_json(lease), **extra, "admin": registry.sender},
        f"granted {_names.display_name(lease.resource)} to {lease.holder}: token {lease.token} (previous token "
        f"{lease.previous_token}), expires {_when(lease.expires_at, chain.now())}",
    )
    return EXIT_OK


def _cmd_acquire_many(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from . import EXIT_OK, _connect, _lease_json, _waiting, _when

    chain, registry = _connect(args, needs_key=True)
    with _waiting(chain, args, f"acquire {len(args.resources)} resources"):
        leases = registry.acquire_many(args.resources, args.ttl, confirmations=args.confirmations)
    if args.json:
        print(json.dumps({"leases": [_lease_json(lease) for lease in leases]}))
    else:
        print(f"acquired {len(leases)} resources in one transaction, expires {_when(leases.expires_at, chain.now())}")
        for lease in leases:
            print(f"  {lease.resource!r}: token {lease.token} ({lease.reason.name.lower()})")
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, argparse.ArgumentParser], int]] = {
    "namespace": _cmd_namespace,
    "revoke": _cmd_revoke,
    "grant": _cmd_grant,
    "acquire-many": _cmd_acquire_many,
}
