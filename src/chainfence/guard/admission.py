"""Whom a service accepts: the holders a :class:`~chainfence.Guard` lets write, beyond a current token.

A current token proves that the registry issued it, not that its holder is
someone the service trusts: on a resource nobody administers, any account
can acquire it when free. An admission policy narrows that down::

    guard = Guard(registry, path="guard.sqlite", admission=Admission.local([ALICE, BOB]))
    guard = Guard(registry, path="guard.sqlite", admission=Admission.on_chain())

``Admission.local(holders)``
    The service's own list of addresses, for every resource the guard
    checks. Costs a set lookup per check.

``Admission.on_chain()``
    The allowlist of the resource's namespace, as the registry keeps it
    (``registry.namespace(prefix).is_admitted``): the namespace's admin decides, on-chain, for
    every service at once. A resource without a namespace (no ``/`` in its
    name), or whose namespace does not require admission, admits everyone,
    exactly as the registry does when it is acquired.

Both judge the *holder of the token* as the registry records it, an
address: an account, or a contract (a multisig, an agent's wallet). To
admit a contract holder, list the contract's address, not its owners' keys:
a signed request from a contract holder is verified with ERC-1271 first,
then judged by the same rule. A holder not admitted gets
:class:`~chainfence.errors.NotAdmitted` (403 at
:class:`~chainfence.integrations.asgi.FencingMiddleware`), and nothing is recorded: the
mark does not move, the request is not remembered.

How soon an on-chain removal takes effect (the allowlist is cached per
namespace and holder, in memory):

- ``strict`` guard: read at every check (one more ``eth_call``), so at once.
- ``follow`` guard: read when a token first reaches the guard (a new epoch)
  and when a holder is first seen; the follower drops a namespace's cached
  answers when it applies any of that namespace's policy or admission
  events, so a removal takes effect once its block is followed (at most
  ``Follow(interval=)`` plus the confirmations), or at once while the follower
  is behind (checks then read the chain, as for tokens).
- ``mark`` guard: read at every new epoch; a holder removed on-chain keeps
  being accepted *at the mark it already has* until a newer token reaches
  the guard (or the guard restarts): the same window ``mark`` mode has for
  a lease that ended. Use ``follow`` or ``strict`` where that matters.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._sdk import validate as _validate
from ..errors import InvalidInput

__all__ = ["Admission"]


class Admission:
    """An admission policy for a :class:`~chainfence.Guard`: :meth:`local` or :meth:`on_chain`."""

    __slots__ = ("holders", "kind")

    #: The kinds of policy, as :class:`~chainfence.errors.NotAdmitted` names them (its ``admission``).
    KINDS = ("local", "on-chain")

    def __init__(self, kind: str, holders: Iterable[str] | None = None):
        """Prefer :meth:`local` and :meth:`on_chain`; ``holders`` only, and always, for ``"local"``."""
        if kind not in self.KINDS:
            raise InvalidInput(f"an admission is one of {', '.join(self.KINDS)}, got {kind!r}")
        if kind == "on-chain" and holders is not None:
            raise InvalidInput("an on-chain admission takes no holders: the namespace's admin lists them")
        listed: frozenset[str] | None = None
        if kind == "local":
            if isinstance(holders, (str, bytes)) or not isinstance(holders, Iterable):
                raise InvalidInput(f"holders must be a list of addresses, got {holders!r}")
            listed = frozenset(_validate.address(holder, "admitted holder") for holder in holders)
            if not listed:
                raise InvalidInput("an empty admission list would refuse every holder; list at least one address")
        self.kind = kind
        #: The local list (checksum addresses), or None for ``"on-chain"``.
        self.holders: frozenset[str] | None = listed

    @classmethod
    def local(cls, holders: Iterable[str]) -> Admission:
        """Admit exactly these holders (addresses of accounts or contracts), on every resource.

        Raises :class:`~chainfence.errors.InvalidInput` for an entry that is
        not an address, and for an
        empty list (it would refuse every write: almost certainly a mistake).
        """
        return cls("local", holders)

    @classmethod
    def on_chain(cls) -> Admission:
        """Admit whom the resource's namespace admits on-chain (everyone where it requires no admission)."""
        return cls("on-chain")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Admission) and (self.kind, self.holders) == (other.kind, other.holders)

    def __hash__(self) -> int:
        return hash((self.kind, self.holders))

    def __repr__(self) -> str:
        if self.kind == "local":
            return f"Admission.local({sorted(self.holders or ())!r})"
        return "Admission.on_chain()"
