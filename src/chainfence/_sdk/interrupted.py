"""Interrupted acquisitions: settle the transaction, release what it took, then let the interrupt go on.

An interrupt (``KeyboardInterrupt``, ``asyncio.CancelledError``) that lands
in an acquisition, a claim or a lease set's once its transaction may
have reached the node must not leave a lease behind that nobody knows of.
:func:`settle_steps` runs, shielded from the caller's further cancellations
(:class:`~chainfence._core.effects.Shielded`): it settles the transaction (a
cancellation with its nonce is sent if it is not mined: whichever the chain
mines decides), releases what it acquired, and notes on the interrupt what
became of it. A lease that cannot be released is handed to the caller as
the interrupt's ``lease``. A second interrupt stops the cleanup: the note
then says what may be left live and how to find it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._core import log as _log
from .._core.effects import Shielded, Steps
from .._node import sending as _sending
from ..endings import End
from ..errors import ChainfenceError, TokenNotCurrent
from ..lease import Lease
from .contract import RegistryContract

logger = _log.get("chainfence.registry")

__all__ = ["settle_steps"]

#: Releases several leases, as much as it can: returns the ended ones and how (``release_what_remains``).
ReleaseMany = Callable[[Sequence[Lease]], Steps[tuple[dict[Lease, End], list[str]]]]


class _Abandoned:
    """What an interrupted acquisition left, as its cleanup learns it."""

    def __init__(
        self,
        what: str,
        flight: _sending.InFlight | None,
        leases: list[Lease] | None,
        handed: Callable[[list[Lease]], Any],
    ):
        self.what = what
        self.flight = flight
        self.leases = leases
        self._handed = handed

    @property
    def tx_hash(self) -> str:
        return self.leases[0].tx_hash if self.leases else self.flight.tx_hash  # type: ignore[union-attr]

    def handed(self) -> Any:
        """What the caller is handed: the lease, or the set."""
        assert self.leases
        return self._handed(self.leases)

    def left_undone(self, again: BaseException) -> str:
        how = (
            "interrupted again"
            if _sending.interrupted(again)
            else f"its cleanup failed ({type(again).__name__}: {again})"
        )
        if self.leases:
            tokens = [lease.token for lease in self.leases]
            return (
                f"{self.what} was {how} while its lease(s) {tokens} (transaction {self.tx_hash}) were being released: "
                "they may be live until they expire; this exception's `lease` is what was acquired: release it"
            )
        flight = self.flight
        assert flight is not None
        return (
            f"{self.what} was {how} before transaction {flight.tx_hash} (nonce {flight.nonce} of {flight.sender}) "
            "was settled: it may hold a lease until it expires; look it up before acquiring again "
            f"(registry.lease_from_tx({flight.tx_hash!r}), chainfence reconcile) and release what it holds"
        )


def settle_steps(
    registry: RegistryContract,
    interrupt: BaseException,
    what: str,
    acquired: list[Lease],
    leases_of: Callable[[Any], list[Lease]],
    *,
    handed: Callable[[list[Lease]], Any] = lambda leases: leases[0],
    release_many: ReleaseMany | None = None,
) -> Steps[None]:
    """An interrupt landed in ``what`` (an acquisition, a claim, a lease set's): if its transaction
    may have reached the node, settle it and release what it acquired, shielded from the caller's
    further cancellations, then note on ``interrupt`` the hash and what became of it.

    ``acquired``: the leases already known (the receipt was read); else the transaction the
    interrupt carries (``_sending.in_flight``) is settled first and ``leases_of(receipt)`` are its
    leases. ``handed(leases)`` is what the caller gets as the interrupt's ``lease`` when they cannot
    be released (the lease, or a set); ``release_many`` releases several (a set's). The caller
    re-raises ``interrupt``; structured concurrency is kept (a cancellation stays a cancellation).
    """
    flight = _sending.in_flight(interrupt)
    if not acquired and flight is None:
        return  # nothing reached the node
    state = _Abandoned(what, flight, list(acquired) or None, handed)
    logger.warning(
        "%s was interrupted (%s) after transaction %s reached the node: settling it and releasing what it "
        "acquired before the interrupt goes on (interrupt again to leave it)",
        what,
        type(interrupt).__name__,
        state.tx_hash,
    )
    try:
        note = yield Shielded(_abandon_steps(registry, interrupt, state, leases_of, release_many))
    except BaseException as again:
        note = state.left_undone(again)
        if state.leases:
            interrupt.lease = state.handed()  # type: ignore[attr-defined]
        logger.error("%s", note)
    else:
        logger.warning("%s", note)
    interrupt.add_note(f"chainfence: {note}")


def _abandon_steps(
    registry: RegistryContract,
    interrupt: BaseException,
    state: _Abandoned,
    leases_of: Callable[[Any], list[Lease]],
    release_many: ReleaseMany | None,
) -> Steps[str]:
    if state.leases is None:
        flight = state.flight
        assert flight is not None
        try:
            receipt = yield from registry.chain._sender.abandon_steps(flight)
        except ChainfenceError as unknown:
            return (
                f"{state.what}: transaction {flight.tx_hash} (nonce {flight.nonce} of {flight.sender}) may hold "
                f"a lease: its outcome could not be established ({type(unknown).__name__}: {unknown}); look it up "
                "before acquiring again (chainfence reconcile) and release what it holds"
            )
        if receipt is None:
            return (
                f"{state.what}: transaction {flight.tx_hash} was cancelled (nonce {flight.nonce}): nothing was acquired"
            )
        if receipt["status"] != 1:
            return f"{state.what}: transaction {flight.tx_hash} was mined reverted: nothing was acquired"
        state.leases = [lease for lease in leases_of(receipt) if lease is not None]
        if not state.leases:  # pragma: no cover - a successful acquisition always logs one
            return f"{state.what}: transaction {flight.tx_hash} was mined but acquired nothing"
    leases = state.leases
    tokens = [lease.token for lease in leases]
    try:
        if len(leases) == 1 or release_many is None:
            lease = leases[0]
            yield from registry._release_by_id_steps(lease.resource, lease.resource_id, lease.token, None)
            ended: dict[Lease, End] = {}
        else:
            ended, _released = yield from release_many(leases)
    except TokenNotCurrent as gone:
        return f"{state.what}: transaction {state.tx_hash} acquired token {tokens[0]}, which had ended ({gone})"
    except ChainfenceError as failed:
        interrupt.lease = state.handed()  # type: ignore[attr-defined]
        return (
            f"{state.what}: transaction {state.tx_hash} acquired token(s) {tokens}, which could not be released "
            f"({type(failed).__name__}: {failed}): it is this exception's `lease`; release it"
        )
    for lease in leases:
        lease.released = lease not in ended
    ends = f" ({', '.join(f'{lease.resource!r} had ended: {end}' for lease, end in ended.items())})" if ended else ""
    return f"{state.what}: transaction {state.tx_hash} acquired token(s) {tokens}; released again{ends}"
