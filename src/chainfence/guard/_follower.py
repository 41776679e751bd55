"""A guard's follow mode: marks raised from the registry's events, reorg checks, and the polling thread.

:meth:`Follower.sync` reads the registry's events from the block after the
one it applied last up to the confirmed head (``eth_getLogs`` in pages a
provider accepts), and applies each page in one store transaction: marks
raised by acquisitions, ends recorded for releases, revokes and claimed
items' completions, names learned, the progress saved. Before reading on,
it checks that the block it stopped at is still the chain's; if not, the
guard latches (:class:`~chainfence.errors.ChainRolledBack`). A ``follow``
guard runs it every ``Follow(interval=)`` seconds in a thread
(:meth:`Follower.start`); any guard may call ``Guard.sync()``. What a page
changed that the guard keeps in memory (an exclusive guard's marks, cached
admission answers) is handed back to it (``on_page``) once committed.

No block is passed whose logs were not checked against the block
(:func:`chainfence._node.completeness.check`), in the guard's
``completeness`` mode:

- ``"bloom"`` (the default without a header source): the block's
  ``logsBloom`` for the event kinds followed, and where it may hold one the
  answer lacks, or rules out one it holds, its receipts against
  ``receiptsRoot``. A log withheld beside an answered log of the same kind
  (address and topic) in the same block sets no bit the answered one did
  not: the block is not in doubt and that log is missed for good.
- ``"receipts"`` (the default with a header source): the receipts of every
  block whose bloom may hold an event kind followed (those of a page in one
  batch), against ``receiptsRoot``; the block passes only when the answer
  holds exactly the registry events of those kinds its receipts hold, so
  nothing withheld passes, whatever else the block holds. One more request
  a poll over blocks with such events (``docs/benchmarks/history.md``, "The
  completeness check's two modes, per poll").

A page is applied up to the block before the first that does not check
out, and the sync raises :class:`~chainfence.errors.LogsIncomplete` (the
block, where the follower stands, how far behind the head): a log backend
that lags or withholds delays the follower, which is then not up to date
(checks at the mark go on-chain), and the next sync takes the block up
again, so the gap closes by itself once the backend answers it.

With a header source (``Follow(headers=...)``, ``Mark(headers=...)``, ``Proven(headers)``), the follower
believes its provider's logs no more than the proven mode believes views:
the head it follows to is the header source's, every block hash it records
or compares is one the source vouches for, every log's block must be the
block the source vouches for at that height
(:meth:`~chainfence.proofs.QuorumHeaders.vouch`:
:class:`~chainfence.errors.BlockNotVouched` otherwise), and what a page
would write is proven first: one ``eth_getProof`` of every resource the page
raises or ends, at the page's last block, must show a token at least as high
as each acquisition logged (the same holder where it is the same token) and
each end logged as that lease's state, or a later lease
(:class:`~chainfence.errors.ProofInvalid` naming the log provider
otherwise). A page that fails any of it is not applied: the store is
untouched, the follower reports the error and checks at the mark are proven
meanwhile. The completeness check then reads the blooms and receipts roots
of the log provider's headers linked by their parent hashes to the one the
source vouches for at the page's last block (:func:`chainfence._node.headers.linked`),
so a provider that withholds logs cannot hide them by forging its blooms,
nor, in the receipts mode (this follower's default), by forging receipts:
they must hash to the vouched chain's ``receiptsRoot``. A log withheld
beside an answered one of the same kind in the same block is then caught
too. Told ``completeness="bloom"``, such a follower misses that log (no
bit of the bloom tells the two apart): a delayed mark, as a lagging
follower has, never a planted one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn, Protocol

from .. import endings
from .._core import log as _log
from .._core import metrics as _metrics
from .._node import completeness as _completeness
from .._node import events as _events
from .._node import headers as _headers
from .._sdk import names as _names
from .._sdk.lease_state import LeaseStatus
from ..endings import End
from ..errors import (
    ChainError,
    ChainfenceError,
    ChainRolledBack,
    ContractNotFound,
    GuardError,
    HeaderBehind,
    LogsIncomplete,
    ProofInvalid,
)
from ._store import GuardStore

if TYPE_CHECKING:
    from .._node.headers import VerifiedHeader
    from ..proofs import ProvenReader
    from ..registry import Registry

logger = _log.get("chainfence.guard")  # the guard's one logger, whichever module logs

__all__ = ["FollowStatus", "Follower", "Page"]


@dataclass(frozen=True)
class FollowStatus:
    """How far the follower of a ``follow`` guard has got, and whether checks rely on it."""

    followed_block: int | None
    staleness: float
    healthy: bool
    last_error: str | None


@dataclass(frozen=True)
class Page:
    """What one applied page changed: marks raised (resource id, token, holder), leases ended
    (resource id, token), namespaces whose policy or admissions changed."""

    raised: list[tuple[bytes, int, str | None]]
    ended: list[tuple[bytes, int]]
    namespaces: set[bytes]


class Latch(Protocol):
    """The guard's rollback latch: record that the chain lost history, and raise ChainRolledBack."""

    def __call__(
        self, reason: str, *, seen_token: int | None = ..., chain_token: int | None = ..., resource: str | None = ...
    ) -> NoReturn: ...


class Follower:
    """The follow state of one guard: the block it reached, when, the last error, and its thread.

    ``follow_admissions``: also read the namespaces' policy and admission events (the guard admits
    by the on-chain allowlists). ``max_lag``: seconds without a successful sync after which the
    follower is no longer :meth:`up_to_date`. ``proven``: the guard's proof reader, whose header
    source vouches for every block the follower applies (see the module docstring). ``completeness``:
    the completeness check's mode, ``"bloom"`` or ``"receipts"`` (see the module docstring).
    """

    def __init__(
        self,
        registry: Registry,
        store: GuardStore,
        *,
        confirmations: int,
        max_lag: float,
        follow_admissions: bool,
        latch: Latch,
        on_page: Callable[[Page], None],
        proven: ProvenReader | None = None,
        completeness: str = "bloom",
    ):
        self._registry = registry
        self._proven = proven
        self._completeness = _completeness.mode_of(completeness, default="bloom")
        self._store = store
        self._confirmations = confirmations
        self._max_lag = max_lag
        self._follow_admissions = follow_admissions
        self._latch = latch
        self._on_page = on_page
        self.followed_block: int | None = None
        self._synced_at: float | None = None
        self.last_error: str | None = None
        #: Held through a sync (one at a time), and while a forked child adopts the guard.
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_pid = os.getpid()

    # -- progress -------------------------------------------------------------------------------

    def sync(self) -> int:
        """Bring the marks up to the confirmed head; returns that block (see ``Guard.sync``)."""
        with self.lock:
            try:
                block = self._sync()
            except ChainfenceError as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, LogsIncomplete):
                    _metrics.follower_synced("logs_incomplete", exc.behind)
                else:
                    _metrics.follower_synced("rolled_back" if isinstance(exc, ChainRolledBack) else "error", None)
                raise
            self.last_error = None
            self._synced_at = time.monotonic()
            self.followed_block = block
            _metrics.follower_synced("ok", 0)  # at the confirmed head it read
            return block

    def staleness(self) -> float:
        """Seconds since the follower last brought the marks up to the confirmed head (inf if never)."""
        return float("inf") if self._synced_at is None else time.monotonic() - self._synced_at

    def up_to_date(self) -> bool:
        """Whether the follower is up to date enough for checks at the mark to trust it."""
        return self.last_error is None and self.staleness() <= self._max_lag

    def status(self, *, following: bool) -> FollowStatus:
        """The progress; ``healthy`` when the guard ``following`` (follow mode) relies on an up-to-date one."""
        return FollowStatus(
            followed_block=self.followed_block,
            staleness=self.staleness(),
            healthy=following and self.up_to_date(),
            last_error=self.last_error,
        )

    # -- the thread -----------------------------------------------------------------------------

    def start(self, interval: float, name: str) -> None:
        """Sync every ``interval`` seconds in a daemon thread until :meth:`stop`."""
        self._stop = threading.Event()
        self._thread_pid = os.getpid()
        self._thread = threading.Thread(target=self._follow, args=(interval,), name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (not from itself, nor in a forked child, where it does not run)."""
        self._stop.set()
        thread = self._thread
        if (
            thread is not None
            and thread is not threading.current_thread()
            and thread.is_alive()
            and os.getpid() == self._thread_pid
        ):
            thread.join()

    def after_fork_in_child(self) -> None:
        """In a forked child: no thread runs here, nothing was synced here yet (checks go on-chain)."""
        self._thread = None
        self._synced_at = None
        self.lock = threading.Lock()

    def _follow(self, interval: float) -> None:
        stop = self._stop
        while not stop.wait(interval):
            try:
                self.sync()
            except ChainRolledBack as lost:
                logger.error("guard follower stopped: %s", lost)
                return
            except GuardError:
                return  # closed
            except LogsIncomplete:
                pass  # logged where it was found, with how far behind: checks go on-chain, the next poll retries
            except ChainfenceError as exc:  # the node hiccuped: checks go on-chain, the next poll retries
                logger.warning("guard follower could not sync (staleness %.1f s): %s", self.staleness(), exc)

    # -- one sync -------------------------------------------------------------------------------

    def _sync(self) -> int:
        chain = self._registry.chain
        store = self._store
        trusted: VerifiedHeader | None = None
        if self._proven is not None:
            trusted = self._proven.headers.current()  # the newest block the header source vouches for
            head = trusted.number - self._confirmations
        else:
            head = chain.confirmed_block(self._confirmations)
        conn = store.conn()
        start = GuardStore.meta(conn, "follow_block")
        if start is None:
            # First follow of this store: from the head on. Earlier tokens
            # still reach the marks when presented, verified on-chain.
            self._save_progress(head, self._block_hash(head))
            return int(head)
        block = int(start)
        self._require_unchanged(block, GuardStore.meta(conn, "follow_hash"), head)
        kinds = [
            _events.Kind.ACQUIRED,
            *_events.NAMING_KINDS,
            _events.Kind.REVOKED,
            _events.Kind.RELEASED,
            _events.Kind.COMPLETED,
        ]
        if self._follow_admissions:  # on-chain admission: follow the allowlists
            kinds += [_events.Kind.ADMISSION_SET, _events.Kind.POLICY_SET, _events.Kind.ADMIN_TRANSFERRED]
        try:
            for first, last, logs in _events.fetch(
                chain,
                self._registry.address,
                kinds=kinds,
                from_block=block + 1,
                to_block=head,
            ):
                completed = self._completed_claims(logs)
                if trusted is not None:  # what the provider invented is refused first, naming it (ProofInvalid)
                    self._vouch(logs, trusted)
                    self._prove_page(logs, last, trusted, completed)
                checked = self._check(first, last, logs, kinds)  # then what it left out: applied up to there
                if checked.end >= first:
                    end_hash = "0x" + _completeness.block_hash(checked.headers[checked.end]).hex()
                    self._apply(checked.logs, checked.end, end_hash, completed, proven_at=last)
                    block = checked.end
                if checked.held is not None:
                    # The answer lacks logs this block has: stand before it. The next sync asks for it again.
                    raise LogsIncomplete(
                        block=checked.held,
                        followed=block,
                        head=head,
                        source=self._log_provider(),
                        reason=checked.why or "",
                    )
        except LogsIncomplete as behind:
            # Held before a block, or a page refused whole by the reading (an answer holding a log the query
            # cannot have: another block's, one that does not read): nothing of it applied, the follower
            # stands where it is, and the next sync asks again.
            self.followed_block = block
            logger.warning("guard follower: %s", behind)  # the error says where it waits, and why
            raise
        return block

    def _check(
        self, first: int, last: int, logs: list[_events.RegistryLog], kinds: list[_events.Kind]
    ) -> _completeness.Checked:
        """How far the page's answer is complete (:func:`chainfence._node.completeness.check`): against the
        node's headers, or, with a header source, against headers linked by their parent hashes to the one
        it vouches for at the page's last block (a provider that withholds logs cannot forge the blooms)."""
        chain = self._registry.chain
        headers = None
        if self._proven is not None:
            numbers = list(range(first, last + 1))
            anchor = self._proven.headers.at(last)
            found = chain.rpc.blocks(numbers, raw=True)
            if any(header is None for header in found):
                raise ChainError(f"the node has no block in {first}..{last} (reorganised away while reading?)")
            headers = dict(zip(numbers, _headers.linked(found, anchor, provider=self._log_provider()), strict=True))
        return _completeness.check(
            chain, self._registry.address, first, last, logs, kinds=kinds, headers=headers, mode=self._completeness
        )

    def _vouch(self, logs: list[_events.RegistryLog], trusted: VerifiedHeader) -> None:
        """Every log's block is one the header source vouches for (BlockNotVouched: another history)."""
        assert self._proven is not None
        for number, block_hash in sorted({(entry.block_number, entry.block_hash) for entry in logs}):
            self._proven.headers.vouch(number, block_hash, head=trusted)

    def _completed_claims(self, logs: list[_events.RegistryLog]) -> set[tuple[bytes, int]]:
        """The completions in ``logs`` that ended their lease: a claimed work item's (it reads done at that
        block). A plain lease's completion records a result and ends nothing. One read per completion,
        before the page is applied (no chain call inside the store's write transaction); proven at the
        completion's block when the follower has a header source."""
        done: set[tuple[bytes, int]] = set()
        for entry in logs:
            if entry.kind is not _events.Kind.COMPLETED or entry.token is None:
                continue
            if self._proven is not None:
                try:
                    proven = self._proven.lease_at(
                        entry.resource_id, header=self._proven.headers.at(entry.block_number)
                    )
                except ContractNotFound:
                    continue
                info = None if proven.status is LeaseStatus.UNHELD else proven
            else:
                info = self._registry.last_lease(resource_id=entry.resource_id, block=entry.block_number)
            if info is not None and info.token == entry.token and endings.of_status(info.status) is End.COMPLETED:
                done.add((entry.resource_id, entry.token))
        return done

    def _prove_page(
        self,
        logs: list[_events.RegistryLog],
        last: int,
        trusted: VerifiedHeader,
        completed: set[tuple[bytes, int]],
    ) -> None:
        """Refuse a page the proofs do not bear out (see the module docstring): what the page would write,
        proven at its last block (every log's block was vouched for first: :meth:`_vouch`)."""
        proven = self._proven
        assert proven is not None
        headers = proven.headers
        claims: dict[bytes, list[_events.RegistryLog]] = {}
        for entry in logs:
            if entry.token is None:
                continue
            ends = entry.kind in (_events.Kind.RELEASED, _events.Kind.REVOKED) or (
                entry.kind is _events.Kind.COMPLETED and (entry.resource_id, entry.token) in completed
            )
            if entry.kind is _events.Kind.ACQUIRED or ends:
                claims.setdefault(entry.resource_id, []).append(entry)
        if not claims:
            return
        at = headers.at(last)
        state = proven.leases(list(claims), header=at)
        expected = {
            _events.Kind.RELEASED: LeaseStatus.RELEASED,
            _events.Kind.REVOKED: LeaseStatus.REVOKED,
            _events.Kind.COMPLETED: LeaseStatus.DONE,
        }
        for (resource_id, entries), lease in zip(claims.items(), state.leases):
            for entry in entries:
                token = entry.token
                assert token is not None
                if lease.token < token:
                    why = f"token {token}, but the proven lease holds token {lease.token}"
                elif lease.token > token:
                    continue  # a later lease: it fences this one off, whatever the log says of it
                elif entry.kind is _events.Kind.ACQUIRED:
                    if entry.holder is None or entry.holder.lower() == lease.holder.lower():
                        continue
                    why = f"token {token} acquired by {entry.holder}, but the proven holder is {lease.holder}"
                elif lease.status is expected[entry.kind]:
                    continue
                else:
                    why = (
                        f"token {token} ended ({entry.kind.name.lower()}), but the proven lease is {lease.status.name}"
                    )
                reason = (
                    f"a log in block {entry.block_number} (tx {entry.tx_hash}) says of resource "
                    f"0x{resource_id.hex()} {why} at block {last}"
                )
                logger.warning("guard follower refused a page: %s", reason)
                raise ProofInvalid(source=self._log_provider(), block=last, block_hash=at.hash_hex, reason=reason)

    def _log_provider(self) -> str:
        from .._node.jsonrpc import name_of_chain

        return name_of_chain(self._registry.chain)

    def _block_hash(self, number: int, *, fresh: bool = False) -> str:
        if self._proven is not None:
            return self._proven.headers.at(number, fresh=fresh).hash_hex
        found = self._registry.chain.rpc.block(number)
        if found is None:
            raise ChainError(f"the node has no block {number}")
        return "0x" + bytes(found["hash"]).hex()

    def _require_unchanged(self, block: int, stored_hash: str | None, head: int) -> None:
        """Latch the store if the block the follower stopped at is no longer the chain's."""
        if block > head:
            if self._proven is not None:
                # The header source's head is behind the block applied (a provider behind or down): wait.
                raise HeaderBehind(
                    f"the header source's head less {self._confirmations} confirmations is block {head}, below "
                    f"block {block}, which the follower applied: a provider behind or down; the follower waits",
                    block=head,
                    floor=block,
                )
            self._latch(f"the chain's confirmed head {head} is below block {block}, which the follower applied")
        if stored_hash is not None and self._block_hash(block, fresh=True) != stored_hash:
            self._latch(
                f"block {block}, which the follower applied, was replaced on-chain "
                f"(a reorg deeper than {self._confirmations} confirmations, or a node that lost its state)"
            )

    def _save_progress(self, block: int, block_hash: str) -> None:
        with self._store.write() as conn:
            GuardStore.set_meta(conn, "follow_block", str(block))
            GuardStore.set_meta(conn, "follow_hash", block_hash)

    def _apply(
        self,
        logs: list[_events.RegistryLog],
        last: int,
        last_hash: str,
        completed: set[tuple[bytes, int]],
        *,
        proven_at: int,
    ) -> None:
        """One page of events: raise marks, record ended leases, learn names, and record the progress, atomically.

        ``last`` is the block the page's logs are complete up to (the follower's progress), ``proven_at``
        the block at which a follower with a header source proved them (the page's last block, at or above).

        Every way a lease ends, by name (:mod:`chainfence.endings`):

        - an acquisition raises the mark: the lease it followed (superseded, expired, granted away, ...)
          is fenced off, its token refused below the mark (``StaleToken``);
        - a release, a revoke, and a claimed item's completion (``completed``: those that ended their
          lease) end their token's lease here: the mark is raised to that token if it was lower (older
          tokens are fenced off as by an acquisition) and the end is recorded, so that the token is
          refused at its mark by every guard on this store (``LeaseReleased``, ``LeaseRevoked``,
          ``LeaseCompleted``). A grant over a live lease is its revoke and the grantee's acquisition;
        - a plain lease's completion ends nothing; an expiry emits nothing (it is known at the next
          acquisition, or by the chain for a token above the mark);
        - a rollback of a block this follower applied latches the store (:meth:`_require_unchanged`).

        Namespace events drop the cached on-chain admission answers of their namespace (``on_page``).
        """
        raised: list[tuple[bytes, int, str | None]] = []
        ended: list[tuple[bytes, int, End]] = []
        namespaces: set[bytes] = set()
        # A name hashes to its resource (a claimed item's, as workset»item): a log claiming otherwise is not believed.
        names = {
            entry.resource_id: found[1]
            for entry in logs
            if entry.kind in _events.NAMING_KINDS
            and (found := _names.named(entry.resource_id, entry.name, entry.workset, entry.item)) is not None
        }
        with self._store.write() as conn:
            for resource_id, name in names.items():
                GuardStore.name_resource(conn, resource_id, name)
            for entry in logs:
                if entry.kind in (_events.Kind.ADMISSION_SET, _events.Kind.POLICY_SET, _events.Kind.ADMIN_TRANSFERRED):
                    namespaces.add(entry.resource_id)  # a namespace event's first topic is the namespace id
                    continue
                if entry.token is None:
                    continue
                if entry.kind is _events.Kind.ACQUIRED:
                    end = None  # a new lease: the mark rises, the one before is fenced off
                elif entry.kind is _events.Kind.RELEASED:
                    end = End.RELEASED
                elif entry.kind is _events.Kind.REVOKED:
                    end = End.REVOKED
                elif entry.kind is _events.Kind.COMPLETED:
                    if (entry.resource_id, entry.token) not in completed:
                        continue  # a plain lease's completion: a result recorded, the lease goes on
                    end = End.COMPLETED
                else:
                    continue
                current, _holder, _rolled, _ended = GuardStore.read_mark(conn, entry.resource_id)
                if entry.token > current:
                    GuardStore.raise_mark(
                        conn, entry.resource_id, entry.token, entry.holder, names.get(entry.resource_id)
                    )
                    raised.append((entry.resource_id, entry.token, entry.holder))
                if end is not None and entry.token >= current:
                    GuardStore.end_lease(conn, entry.resource_id, entry.token, end.value)
                    ended.append((entry.resource_id, entry.token, end))
            # Names of resources raised in this page whose ResourceNamed came earlier stay NULL
            # until a check names them: a name is for people, never needed to fence.
            GuardStore.set_meta(conn, "follow_block", str(last))
            GuardStore.set_meta(conn, "follow_hash", last_hash)
            if self._proven is not None and raised:
                GuardStore.raise_proven_block(conn, proven_at)  # these marks were proven at that block
        for resource_id, token, _holder in raised:
            logger.info("guard followed new token resource=0x%s token=%d", resource_id.hex()[:16], token)
        for resource_id, token, end in ended:
            logger.info("guard followed %s lease resource=0x%s token=%d", end.value, resource_id.hex()[:16], token)
        self._on_page(Page(raised, [(resource_id, token) for resource_id, token, _end in ended], namespaces))


endings.declare(
    "guard.follower",
    __name__,
    {
        End.EXPIRED: "no event: the expired holder is accepted at its mark until a successor's acquisition is "
        "followed (the mark rises: StaleToken); a token above the mark is asked of the chain (LeaseExpired)",
        End.RELEASED: "the release's end is recorded: its token is refused at its mark (LeaseReleased) by every "
        "guard on the store",
        End.COMPLETED: "a claimed item's completion (it reads done at that block) is recorded against the item's "
        "id (LeaseCompleted at its mark; a guard checks names, and an item is not reachable by its display "
        "name); a plain lease's completion records a result and ends nothing: its token stays accepted",
        End.SUPERSEDED: "the reacquisition raises the mark: the old token is StaleToken",
        End.REVOKED: "the revoke's end is recorded: LeaseRevoked at its mark, by every guard on the store",
        End.GRANTED: "the grant's revoke ends the old token and its acquisition raises the mark: the old token is "
        "StaleToken, the grantee's accepted",
        End.ROLLED_BACK: "a block the follower applied that the chain replaced latches the store: "
        "ChainRolledBack from every check, in every process, until an operator starts a new store",
    },
    watches=True,
)
