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

Nothing here imports web3 or the registry at module level, so ``chainfence --help`` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._common import (
    EXIT_OK,
    NAME_RULES,
    UsageError,
    add_command,
    connect,
    emit,
    lease_document,
    non_negative_int,
    positive_int,
    publishable,
    waiting,
    when,
)

_ADDRESS = "0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF"

_ESCAPED = (
    "RESOURCE (and --workset) are written as chainfence shows names read from the chain (the resource column of "
    "`audit` and `stuck`, resource_display in their --json): \\u202e, \\x1b, \\xff for a byte that is not UTF-8, "
    "\\\\ for a backslash. Reaches a name anyone put on-chain with control or bidi characters or bytes that "
    "are not UTF-8, exactly"
)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``namespace`` (and its actions), ``revoke``, ``grant`` and ``acquire-many``."""
    namespace = add_command(
        subparsers,
        "namespace",
        example="chainfence namespace mine",
        help="your namespace; hand over and set the policy of a namespace",
    )
    actions = namespace.add_subparsers(dest="namespace_command", metavar="ACTION", help="what to do (each has --help)")
    actions.required = True
    mine = add_command(
        actions,
        "mine",
        parents=[common],
        example="chainfence namespace mine --json",
        help="the namespace your key administers by construction ('0x' + your address, lowercase) and its policy",
        description="An address namespace ('0x' and the 40 lowercase hex digits of an address) belongs to that "
        "address from the start: no claim, no storage until you set a policy. Put your resources "
        "under it (0x.../jobs) to govern them; other namespaces have an admin only if the deployer "
        "assigned them.",
    )
    mine.add_argument("--address", help="another address's namespace (no key needed)")
    mine.set_defaults(run=_show)
    transfer = add_command(
        actions,
        "transfer",
        parents=[common],
        example=f"chainfence namespace transfer prod {_ADDRESS}",
        help="offer the namespace to a new admin (step 1 of 2)",
    )
    transfer.add_argument("prefix", help="the namespace: the part of resource names before their first '/'")
    transfer.add_argument("new_admin", help="address that takes over when it runs `namespace accept`")
    transfer.set_defaults(run=_transfer)
    accept = add_command(
        actions,
        "accept",
        parents=[common],
        example="chainfence namespace accept prod",
        help="take over a namespace offered to you (step 2 of 2)",
    )
    accept.add_argument("prefix", help="the namespace offered to you")
    accept.set_defaults(run=_accept)
    policy = add_command(
        actions,
        "policy",
        example="chainfence namespace policy show prod --json",
        help="set or show a namespace's policy",
    )
    policy_actions = policy.add_subparsers(
        dest="policy_command", metavar="ACTION", help="set or show (each has --help)"
    )
    policy_actions.required = True
    show = add_command(
        policy_actions,
        "show",
        parents=[common],
        example="chainfence namespace policy show prod --json",
        help="admin, pending admin and policy",
    )
    show.add_argument("prefix", help="the namespace")
    show.set_defaults(run=_show)
    set_ = add_command(
        policy_actions,
        "set",
        parents=[common],
        example="chainfence namespace policy set prod --lock-delay 15   # max ttl, admission unchanged",
        help="set fields of the policy (admin only; the fields not given keep their values)",
    )
    set_.add_argument("prefix", help="the namespace (you must be its admin)")
    set_.add_argument("--max-ttl", type=non_negative_int, help="longest lease, seconds (0: the registry's)")
    set_.add_argument(
        "--lock-delay",
        type=non_negative_int,
        help="seconds after an expiry during which only the expired holder may acquire (0: none)",
    )
    set_.add_argument(
        "--admission",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only admitted holders may acquire (--no-admission: anyone)",
    )
    set_.set_defaults(run=_set_policy)
    admit = add_command(
        actions,
        "admit",
        parents=[common],
        example=f"chainfence namespace admit prod {_ADDRESS}",
        help="add holders to the allowlist (admin only)",
    )
    admit.add_argument("prefix", help="the namespace (you must be its admin)")
    admit.add_argument("holders", nargs="+", metavar="ADDRESS", help="accounts or contracts to admit")
    admit.add_argument("--remove", action="store_true", help="remove them instead")
    admit.set_defaults(run=_admit)

    revoke = add_command(
        subparsers,
        "revoke",
        parents=[common],
        example="chainfence revoke prod/db",
        help="end a live lease, as its namespace's admin",
    )
    revoke.add_argument(
        "resource", help="the resource whose live lease ends (a claimed item: WORKSET»ITEM, or ITEM with --workset)"
    )
    revoke.add_argument("--workset", help="RESOURCE is a work item of this workset: revoke its live claim")
    revoke.add_argument("--escaped", action="store_true", help=_ESCAPED)
    revoke.set_defaults(run=_revoke)
    grant = add_command(
        subparsers,
        "grant",
        parents=[common],
        example=f"chainfence grant prod/db {_ADDRESS} --ttl 60",
        help="issue a lease to a holder, as its namespace's admin",
    )
    grant.add_argument("resource", help="the resource to grant (a claimed item: WORKSET»ITEM, or ITEM with --workset)")
    grant.add_argument("--workset", help="RESOURCE is a work item of this workset: the holder gets it as a claim")
    grant.add_argument("holder", help="the account that gets the new token")
    grant.add_argument("--ttl", type=positive_int, required=True, help="lease length in seconds")
    grant.add_argument("--escaped", action="store_true", help=_ESCAPED)
    grant.set_defaults(run=_grant)
    many = add_command(
        subparsers,
        "acquire-many",
        parents=[common],
        example="chainfence acquire-many prod/db prod/cache --ttl 30 --json",
        help="acquire several resources in one transaction, all or nothing",
    )
    many.add_argument(
        "resources", nargs="+", metavar="NAME", help=f"the resources, each held with its own token ({NAME_RULES})"
    )
    many.add_argument("--ttl", type=positive_int, required=True, help="lease length in seconds")
    many.set_defaults(run=_acquire_many)


# ---------------------------------------------------------------------------
# namespace ...
# ---------------------------------------------------------------------------


def _action(args: argparse.Namespace) -> str:
    """The namespace action's words: "mine", "policy set", ..."""
    return args.namespace_command if args.namespace_command != "policy" else f"policy {args.policy_command}"


def _show(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``namespace mine`` and ``namespace policy show``: the admin and policy of a namespace."""
    mine = args.namespace_command == "mine"
    # Another address's namespace, or any namespace's policy, is read without the key.
    _chain, registry = connect(args, needs_key=mine and args.address is None, failover=True)  # sends nothing
    if mine:
        from ..namespaces import address_namespace

        prefix = registry.namespace().prefix if args.address is None else address_namespace(args.address)
    else:
        prefix = args.prefix
    policy = registry.namespace(prefix).policy()
    lines = [f"namespace {prefix!r} (0x{policy.namespace.hex()})"]
    if mine:
        lines.append(f"  an address namespace: its address governs the resources named {prefix}/...")
    lines += [
        f"  admin               {policy.admin or '- (nobody: open to all; only the deployer assigns one)'}",
        f"  pending admin       {policy.pending_admin or '-'}",
        f"  max ttl             {policy.max_ttl or 'the registry maximum'}",
        f"  lock-delay          {policy.lock_delay} s",
        f"  admission required  {'yes' if policy.admission_required else 'no'}",
    ]
    emit(args, policy.to_dict(), "\n".join(lines))
    return EXIT_OK


def _changed(args: argparse.Namespace, document: dict[str, Any], text: str) -> int:
    """What a namespace action changed: ``{"namespace", "action", ...document}``, or ``text``."""
    emit(args, {"namespace": args.prefix, "action": _action(args), **document}, text)
    return EXIT_OK


def _transfer(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"namespace transfer {args.prefix}"):
        registry.namespace(args.prefix).transfer_admin(args.new_admin, confirmations=args.confirmations)
    return _changed(
        args,
        {"pending_admin": args.new_admin},
        f"offered namespace {args.prefix!r} to {args.new_admin}: it takes over with `namespace accept`",
    )


def _accept(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"namespace accept {args.prefix}"):
        registry.namespace(args.prefix).accept_admin(confirmations=args.confirmations)
    return _changed(args, {"admin": registry.sender}, f"namespace {args.prefix!r}: admin is now {registry.sender}")


def _set_policy(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.max_ttl is None and args.lock_delay is None and args.admission is None:
        parser.error("namespace policy set: give at least one of --max-ttl, --lock-delay, --admission")
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"namespace policy set {args.prefix}"):
        # The whole policy as the transaction left it: the fields not given kept their values.
        policy = registry.namespace(args.prefix).set_policy(
            max_ttl=args.max_ttl,
            lock_delay=args.lock_delay,
            admission_required=args.admission,
            confirmations=args.confirmations,
        )
    return _changed(
        args,
        {"max_ttl": policy.max_ttl, "lock_delay": policy.lock_delay, "admission_required": policy.admission_required},
        f"namespace {args.prefix!r}: max ttl {policy.max_ttl or 'registry maximum'}, "
        f"lock-delay {policy.lock_delay} s, admission {'required' if policy.admission_required else 'open'}",
    )


def _admit(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"namespace admit {args.prefix}"):
        registry.namespace(args.prefix).admit(args.holders, admitted=not args.remove, confirmations=args.confirmations)
    return _changed(
        args,
        {"holders": args.holders, "admitted": not args.remove},
        f"namespace {args.prefix!r}: {'removed' if args.remove else 'admitted'} {', '.join(args.holders)}",
    )


# ---------------------------------------------------------------------------
# revoke, grant, acquire-many
# ---------------------------------------------------------------------------


def _admin_target(args: argparse.Namespace) -> tuple[Any, tuple[Any, Any] | None, str]:
    """What ``revoke`` and ``grant`` act on, checked before anything is asked of the node: the resource's
    name (a ``str``; with --escaped, the bytes the registry holds), the (workset, item) of a work item,
    and the name as shown."""
    from .._sdk import names as _names

    if not args.escaped:
        name = args.resource if args.workset is None else _names.item_name(args.workset, args.resource)
        item = _names.split_item(name)
        if item is None:
            _names.held_name(name)
        return name, item, _names.display_name(name)
    target = _names.undisplay(args.resource)
    if args.workset is not None:
        workset = _names.undisplay(args.workset)
        if isinstance(workset, tuple) or isinstance(target, tuple):
            raise UsageError(
                f"with --workset, neither it nor RESOURCE may hold a bare {_names.ITEM_SEPARATOR} (one joins an "
                "item's workset and item: give WORKSET\u00bbITEM alone instead)"
            )
        target = (workset, target)
    if isinstance(target, tuple):
        shown = _names.display(target[0]) + _names.ITEM_SEPARATOR + _names.display(target[1])
        return shown, target, shown
    return target, None, _names.display(target)


def _prefix_of(name: str | bytes, registry: Any) -> str:
    """The namespace whose admin revokes and grants ``name``: its text before the first ``/``. A name
    without ``/`` is in no namespace, which nobody administers: refused as the registry refuses it
    (``NotNamespaceAdmin``, nothing sent); a prefix that is not UTF-8 names no namespace the SDK reaches
    (``InvalidNamespace``, exit 2)."""
    from .._sdk import names as _names
    from ..errors import InvalidNamespace, NotNamespaceAdmin

    raw = _names.held_name(name)
    if b"/" not in raw:
        raise NotNamespaceAdmin(namespace=bytes(32), account=registry.sender, admin="0x" + "00" * 20)
    prefix = raw.split(b"/", 1)[0]
    try:
        return prefix.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidNamespace(
            f"the namespace of {_names.display(raw)!r} is not UTF-8 text ({_names.display(prefix)!r}): "
            "no namespace handle reaches it"
        ) from None


def _named(name: Any, item: tuple[Any, Any] | None, shown: str) -> dict[str, Any]:
    """The resource (and work item) fields of ``revoke``'s and ``grant``'s --json answer."""
    from .._sdk import names as _names

    document: dict[str, Any] = {"resource": name if isinstance(name, str) else shown}
    if item is not None:
        workset, part = (_names.held_name(piece) for piece in item)
        document.update(workset=_names.held_label(workset), item=_names.held_label(part))
    return document


def _revoke(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, item, shown = _admin_target(args)
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"revoke {shown}"):
        if item is not None:
            token = registry.workset(item[0]).revoke(item[1], confirmations=args.confirmations)
        else:
            token = registry.namespace(_prefix_of(name, registry)).revoke(name, confirmations=args.confirmations)
    document = {**_named(name, item, shown), "revoked_token": token, "admin": registry.sender}
    emit(args, document, f"revoked {shown} token {token} (admin {registry.sender})")
    return EXIT_OK


def _grant(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    name, item, shown = _admin_target(args)
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"grant {shown}"):
        if item is not None:
            lease = registry.workset(item[0]).grant(item[1], args.holder, args.ttl, confirmations=args.confirmations)
        else:
            namespace = registry.namespace(_prefix_of(name, registry))
            lease = namespace.grant(name, args.holder, args.ttl, confirmations=args.confirmations)
    emit(
        args,
        {**lease_document(lease), **_named(name, item, shown), "admin": registry.sender},
        lambda: (
            f"granted {shown} to {lease.holder}: token {lease.token} (previous "
            f"token {lease.previous_token}), expires {when(lease.expires_at, chain.now())}"
        ),
    )
    return EXIT_OK


def _acquire_many(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    publishable(*args.resources)
    chain, registry = connect(args, needs_key=True)
    with waiting(chain, args, f"acquire {len(args.resources)} resources"):
        from ..recipes.lease_set import LeaseSet

        leases = LeaseSet.acquire(registry, args.resources, args.ttl, confirmations=args.confirmations)

    def text() -> str:
        lines = [f"acquired {len(leases)} resources in one transaction, expires {when(leases.expires_at, chain.now())}"]
        lines += [f"  {lease.resource!r}: token {lease.token} ({lease.reason.name.lower()})" for lease in leases]
        return "\n".join(lines)

    emit(args, {"leases": [lease_document(lease) for lease in leases]}, text)
    return EXIT_OK
