"""The downstream side: accept or reject work by fencing token, with durable high-water marks.

A service puts one line before every write it protects::

    guard = Guard(registry, path="guard.sqlite")

    def write_report(token, body):
        guard.check("reports/daily", token)     # raises TokenNotCurrent if stale
        storage.put("reports/daily", body)

The guard keeps, per resource, the highest token it has accepted (the
*mark*) in a SQLite file (:mod:`chainfence.guard._store`), with the holder
of that token. Three modes, chosen at construction:

``mark`` (default): local marks, the chain asked only about news.
    ``token == mark``: accepted, no chain call (same epoch, more writes).
    ``token < mark``: :class:`~chainfence.errors.StaleToken`, carrying both.
    ``token > mark``: asked of the chain; only the resource's current, live
    token becomes the new mark. A forged token, one issued for another
    resource, or one superseded, expired or released is rejected and the mark
    does not move. Cost: one SQLite read per check (a dict lookup with
    ``exclusive=True``), two ``eth_call`` and a block read per new epoch.
    Window: a holder whose lease ended is accepted (at its own mark) until a
    successor's token reaches the guard.

``strict``: every check asks the chain that the token is current now,
    besides the mark: current, live by :meth:`Chain.now <chainfence.Chain.now>`
    (the pending block's time or the verifier's clock, not the latest
    block's: a lease that ran out is refused even when no block was mined
    since), and issued in a block ``confirmations`` deep. Cost: one
    ``eth_call`` and a block read per check (plus two with confirmations).
    No window beyond the one between the check and the write it guards.

``follow``: ``mark``, plus a follower thread that reads the registry's
    ``LeaseAcquired`` events (``eth_getLogs`` in pages a provider accepts,
    every ``follow_interval`` seconds, confirmed blocks only) and raises marks
    as soon as a lease is issued, so a stale holder is rejected even before
    the new holder writes anything. Nothing anyone can put on-chain stops it
    (names are read as untrusted bytes). While the follower is behind — its
    last attempt failed, or it has not caught up for ``max_lag`` seconds —
    checks at the mark are verified on-chain as in ``strict`` mode, so a
    follower in trouble never silently becomes ``mark`` mode; ``staleness()``
    and ``follow_status()`` report it.

Guarantees in every mode (each has a test that tries to break it):

- a guard never accepts a token lower than one it accepted for that
  resource: marks only go up, are written with ``synchronous=FULL`` in WAL
  mode, and survive restarts and crashes;
- a guard never accepts a token the registry did not issue for that resource;
- check-and-record is atomic across threads and across processes sharing
  the file (``BEGIN IMMEDIATE`` around re-read, compare and write);
- a rejection changes nothing: every check (signature, holder, replay,
  deadline for signed requests) runs before anything is recorded, and the
  mark and the request are recorded in one transaction;
- a rolled-back chain (the registry's state below a token this store
  accepted, a token number that turns up with another holder, a block the
  follower applied that was replaced) latches the store: every check raises
  :class:`~chainfence.errors.ChainRolledBack` from then on, in every process,
  across restarts, until an operator starts a new store. ``mark`` mode
  notices at its next chain read (a new epoch, a restart, the follower),
  ``strict`` at the next check;
- an ``exclusive`` guard used in a process forked from its owner raises
  :class:`~chainfence.errors.GuardForked` instead of answering from a
  frozen copy of the owner's memory.

A check and the write that follows it are two steps: a holder superseded
between them can still complete that one write. Make the write itself
conditional on the token where that matters (:mod:`chainfence.sql` does it
in one database transaction; :class:`~chainfence.FencedStore` on-chain).

Reorgs: fencing tokens are a chain's counter, so a reorg can give the same
number to another holder. With ``confirmations=k`` (default: the chain's
setting; 0 on dev chains) a token becomes a mark only once the block that
issued it has ``k`` blocks on top (:class:`~chainfence.errors.TokenNotConfirmed`
until then). A reorg deeper than ``k`` is a rollback (above).

Holder-signed requests (:meth:`Guard.check_request`): see
:mod:`chainfence.fenced_requests`.

Admission (``admission=``): a guard can also require that the token's holder
be one the service accepts, from a local list or from the namespace's
on-chain allowlist (:mod:`chainfence.guard.admission`, and there how soon an
on-chain removal takes effect in each mode). A holder refused gets
:class:`~chainfence.errors.HolderNotAdmitted`; nothing is recorded.

Ended leases: when a lease ends early by an event — its holder releases it
(``LeaseReleased``), completes its claimed work item (``LeaseCompleted``),
or a namespace's admin revokes it (``LeaseRevoked``, also the first half of
a grant over a live lease) — a ``strict`` guard refuses its token at the
next check (the chain says so); a ``follow`` guard's follower records the
end in the store once the block is followed, and from then on every guard
on that store, in every mode, refuses the token at its mark
(:class:`~chainfence.errors.LeaseReleased`,
:class:`~chainfence.errors.LeaseCompleted`,
:class:`~chainfence.errors.LeaseRevoked`). An acquisition (a successor after
an expiry, a reacquisition, a grant) raises the mark: the token before is
stale. An expiry emits no event: a ``follow`` guard accepts an expired
holder at its mark until a successor's acquisition is followed, as ``mark``
mode does. A ``mark`` guard on its own cannot know of any end: it refuses
the holder once a successor's token reaches it, or at once if the ended
token was never its mark (a token above the mark is always asked of the
chain).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eth_utils import keccak

from .. import _names, _validate, endings
from .._node import events as _events
from ..endings import End
from ..errors import (
    ActionMismatch,
    AudienceMismatch,
    ChainError,
    ChainfenceError,
    ChainRolledBack,
    GuardError,
    GuardForked,
    HolderNotAdmitted,
    InvalidInput,
    InvalidSignature,
    LeaseCompleted,
    LeaseReleased,
    LeaseRevoked,
    MalformedRequest,
    NodeUnreachable,
    PayloadMismatch,
    ReplayedRequest,
    RequestExpired,
    ResourceMismatch,
    SignerNotHolder,
    StaleToken,
    TokenNotCurrent,
    UnknownToken,
)
from ._store import IDENTITY_KEYS, MAX_STORED_TOKEN, READ_MARK, GuardStore
from .admission import Admission

if TYPE_CHECKING:
    from ..fenced_requests import EIP712Domain, FencedRequest
    from ..registry import Registry

logger = logging.getLogger(__name__)

__all__ = ["MODES", "FollowStatus", "Guard"]

#: The error a token at its mark is refused with once the follower recorded how its lease ended.
_ENDED_ERRORS: dict[str, type[TokenNotCurrent]] = {
    End.RELEASED.value: LeaseReleased,
    End.COMPLETED.value: LeaseCompleted,
    End.REVOKED.value: LeaseRevoked,
}

#: The guard modes (see the module docstring).
MODES = ("mark", "strict", "follow")

#: ERC-1271 isValidSignature(bytes32,bytes) selector, also its "valid" answer.
_ERC1271_MAGIC = bytes.fromhex("1626ba7e")

#: Bounds of the in-memory caches (LRU): names -> ids, exclusive marks, contract holders.
_MAX_IDS = 100_000
_MAX_MEMO = 100_000
_MAX_CONTRACT_HOLDERS = 4_096
_MAX_ADMISSIONS = 16_384

#: Marks verified against the chain when a guard opens (the newest: what a rollback loses first).
_MARKS_VERIFIED_AT_OPEN = 8

#: Requests whose deadline passed this long ago are pruned from the replay store.
_PRUNE_AFTER = 60

#: Live guards of this process, for the fork handler.
_GUARDS: weakref.WeakSet[Guard] = weakref.WeakSet()


@dataclass(frozen=True)
class FollowStatus:
    """How far the follower of a ``follow`` guard has got, and whether checks rely on it."""

    followed_block: int | None
    staleness: float
    healthy: bool
    last_error: str | None


class _Verdict:
    """What a check found, before anything is recorded (a plain slotted class: one per check)."""

    __slots__ = ("fresh", "holder", "mark", "resource", "resource_id", "token")

    def __init__(
        self, resource: str, resource_id: bytes, token: int, mark: int, holder: str | None, fresh: bool = False
    ):
        self.resource = resource
        self.resource_id = resource_id
        self.token = token
        self.mark = mark
        self.holder = holder  # the holder of ``token``, from the chain or the store
        self.fresh = fresh  # the chain was asked about the token in this check

    @property
    def raises(self) -> bool:
        return self.token > self.mark


class Guard:
    """Per-resource high-water marks of one registry's fencing tokens, kept in a SQLite file.

    Args:
        registry: the registry whose tokens this guard judges.
        path: the store file; created if missing. Several processes may share
            it, unless one of them opened it ``exclusive``.
        mode: ``"mark"``, ``"strict"`` or ``"follow"`` (module docstring).
        confirmations: blocks on top of an issuing block before its token may
            become a mark (default: the chain's setting).
        exclusive: this guard owns the store (no other guard, in any process,
            may open it: enforced with a lock file) and keeps the marks in
            memory too: a check at the mark is a dict lookup.
        follow_interval: seconds between the follower's polls (mode ``follow``).
        max_lag: seconds without a successful follow after which checks at
            the mark are verified on-chain (default ``max(5, 3 * follow_interval)``).
        audience: the name of the service this guard protects; signed
            requests must have been signed for it (see :meth:`check_request`).
        max_request_age: the furthest in the future a signed request's
            deadline may be, in seconds (bounds the replay store).
        erc1271_gas: the gas an ERC-1271 holder's ``isValidSignature`` may burn.
        timeout: seconds to wait for another process's write lock.
        admission: whom to accept as a token's holder
            (:class:`~chainfence.Admission`): ``Admission.local([...])``,
            ``Admission.on_chain()``, or None (default: any holder).

    Raises :class:`~chainfence.errors.GuardStoreMismatch` if the file holds
    marks of another registry (other chain, address or deployment).
    """

    def __init__(
        self,
        registry: Registry,
        path: str | os.PathLike[str],
        *,
        mode: str = "mark",
        confirmations: int | None = None,
        exclusive: bool = False,
        follow_interval: float = 1.0,
        max_lag: float | None = None,
        audience: str | None = None,
        max_request_age: int = 3_600,
        erc1271_gas: int = 200_000,
        timeout: float = 30.0,
        admission: Admission | None = None,
    ):
        if admission is not None and not isinstance(admission, Admission):
            raise InvalidInput(
                f"admission must be an Admission (Admission.local or .on_chain) or None, got {admission!r}"
            )
        if not isinstance(path, (str, os.PathLike)) or str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise InvalidInput(f"a guard needs a file path (marks must survive restarts), got {path!r}")
        if mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        for name, value in (("timeout", timeout), ("follow_interval", follow_interval), ("max_lag", max_lag)):
            if value is None and name == "max_lag":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise InvalidInput(f"{name} must be a positive number of seconds, got {value!r}")
        for name, value in (("max_request_age", max_request_age), ("erc1271_gas", erc1271_gas)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{name} must be an int >= 1, got {value!r}")
        if audience is not None and (not isinstance(audience, str) or not audience):
            raise InvalidInput(f"audience must be a non-empty str, got {audience!r}")
        if confirmations is None:
            confirmations = registry.chain.confirmations
        if isinstance(confirmations, bool) or not isinstance(confirmations, int) or confirmations < 0:
            raise InvalidInput(f"confirmations must be an int >= 0, got {confirmations!r}")
        self.registry = registry
        self.mode = mode
        self.confirmations = confirmations
        self.exclusive = bool(exclusive)
        self.path = Path(path)
        self.follow_interval = float(follow_interval)
        self.max_lag = float(max_lag) if max_lag is not None else max(5.0, 3 * self.follow_interval)
        self.audience = audience
        self.max_request_age = max_request_age
        self.erc1271_gas = erc1271_gas
        self.admission = admission
        #: Admission.on_chain(): (namespace id, holder) -> the registry's answer (LRU-bounded).
        self._admitted: OrderedDict[tuple[bytes, str], bool] = OrderedDict()
        self._admitted_lock = threading.Lock()
        self._admission_epoch = 0  # bumped by every invalidation: an answer read across one is not cached
        #: The fast paths' copy: (resource name, holder) pairs admitted (cleared whole by any invalidation).
        self._admitted_pairs: set[tuple[str, str | None]] = set()
        self._namespaces: dict[str, tuple[str, bytes] | None] = {}
        self._store = GuardStore(self.path, timeout=float(timeout))
        self._owner_pid = os.getpid()
        self._forked = False
        #: Exclusive guards: resource id -> (mark, holder), mirroring the store (LRU-bounded).
        self._memo: OrderedDict[bytes, tuple[int, str | None]] = OrderedDict()
        self._ids: dict[str, bytes] = {}
        self._domain: EIP712Domain | None = None
        self._contract_holders: OrderedDict[str, bool] = OrderedDict()
        self._lock_file: Any = None
        self._rolled_back: str | None = None
        #: mark mode with nothing to doubt (no rollback seen, not a forked copy): every mark is trusted.
        self._plain_mark_mode = mode == "mark"
        self.followed_block: int | None = None
        self._synced_at: float | None = None
        self._follow_error: str | None = None
        self._follow_lock = threading.Lock()
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        self._take_store_lock()
        try:
            identity = {key: value for key, value in registry.identity().items() if key in IDENTITY_KEYS}
            self._store.bind(identity)
            if self.exclusive:
                for resource_id, _name, token, holder in self._store.marks():
                    self._memo[resource_id] = (token, holder)
                for resource_id in self._store.ended_at_mark():  # refused at the mark: never from memory
                    self._memo.pop(resource_id, None)
            self._check_continuity_at_open()
        except BaseException:
            self.close()
            raise
        _GUARDS.add(self)
        if mode == "follow":
            try:
                self.sync()
            except ChainRolledBack as lost:  # latched: every check raises it; the guard still opens
                logger.error("guard %s: %s", self.path, lost)
            except ChainfenceError as exc:  # the follower retries; checks go on-chain meanwhile
                logger.warning("guard follower could not sync at start: %s", exc)
            self._start_follower()

    # ------------------------------------------------------------------
    # Checking tokens
    # ------------------------------------------------------------------

    def check(self, resource: str, token: int) -> int:
        """Accept ``token`` for a write to ``resource`` or raise; returns the token.

        Raises :class:`~chainfence.errors.StaleToken` (with ``current_token``,
        the mark) below the mark; above it (or always, in ``strict`` mode),
        the registry's verdict: :class:`~chainfence.errors.UnknownToken`,
        ``StaleToken``, :class:`~chainfence.errors.LeaseExpired`,
        :class:`~chainfence.errors.LeaseReleased` or
        :class:`~chainfence.errors.TokenNotConfirmed`; at the mark,
        :class:`~chainfence.errors.LeaseRevoked` once a follower saw the lease
        revoked. With an admission policy,
        :class:`~chainfence.errors.HolderNotAdmitted` for a token whose holder
        it does not accept. A rejection never moves the mark. Chain errors
        propagate (fail closed), as :class:`~chainfence.errors.ChainError`
        subclasses.
        """
        resource_id = self._ids.get(resource) if resource.__class__ is str else None
        if resource_id is not None and token.__class__ is int:
            if self.exclusive:
                memo = self._memo.get(resource_id)
                if (
                    memo is not None
                    and memo[0] == token
                    and (self._plain_mark_mode or self._trusts_marks())
                    and (self.admission is None or self._admits_known(resource, memo[1]))
                ):
                    return token  # an owned store, same epoch: two dict lookups
            elif self._trusts_marks():
                row = self._store.conn().execute(READ_MARK, (resource_id,)).fetchone()
                if (
                    row is not None
                    and row[0] == token
                    and row[2] is None
                    and row[3] is None
                    and (self.admission is None or self._admits_known(resource, row[1]))
                ):
                    return token  # same epoch: one SQLite read
        verdict = self._judge(resource, token)
        self._admit(verdict)
        self._record(verdict)
        return token

    def _trusts_marks(self) -> bool:
        """Whether a token at its mark may be accepted without asking the chain."""
        if self._forked:
            self._adopt_fork()
        if self.mode == "strict" or self._rolled_back is not None:
            return False
        if self.mode == "follow":
            return self._following()
        return True

    def _judge(self, resource: str, token: int) -> _Verdict:
        """Everything a check needs to decide, read and verified; nothing recorded."""
        if self._forked:
            self._require_usable()
        resource_id = self._resource_id(resource)
        if token.__class__ is not int or not 0 < token <= MAX_STORED_TOKEN:
            token = _validate.token(token)
        mark, holder, rolled_back, ended = GuardStore.read_mark(self._store.conn(), resource_id)
        if rolled_back is not None:
            self._rolled_back, self._plain_mark_mode = rolled_back, False
            raise ChainRolledBack(f"guard store {str(self.path)!r} no longer trusts the chain: {rolled_back}")
        if token < mark:
            raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)
        if token == mark and ended is not None:
            # The follower saw this lease end (released, completed, revoked), in a confirmed block.
            logger.info("guard rejected token resource=%s token=%d: %s", resource, token, ended)
            raise _ENDED_ERRORS.get(ended, LeaseRevoked)(token=token, resource=resource, resource_id=resource_id)
        if token == mark and self._trusts_marks():
            return _Verdict(resource, resource_id, token, mark, holder)
        # News (or strict, or a follower in trouble): the chain must vouch for the token.
        if token > MAX_STORED_TOKEN:
            # No registry token is this large (tokens are 48-bit on-chain): never issued.
            raise UnknownToken(token=token, current_token=0, resource=resource, resource_id=resource_id)
        info = self._verify_on_chain(resource, resource_id, token, mark, holder)
        return _Verdict(resource, resource_id, token, mark, info.holder, fresh=True)

    def _verify_on_chain(
        self, resource: str, resource_id: bytes, token: int, mark: int, stored_holder: str | None
    ) -> Any:
        registry = self.registry
        try:
            info = registry.check_current(resource, token, confirmations=self.confirmations)
        except TokenNotCurrent as refused:
            chain_token = getattr(refused, "current_token", None)
            if chain_token is not None and chain_token < mark:
                self._latch(
                    f"{resource!r} reads token {chain_token} on-chain, below the mark {mark} this store accepted",
                    seen_token=mark,
                    chain_token=chain_token,
                    resource=resource,
                )
            logger.info("guard rejected token resource=%s token=%d: %s", resource, token, type(refused).__name__)
            raise
        except ChainRolledBack as lost:
            self._latch(str(lost), seen_token=lost.seen_token, chain_token=lost.chain_token, resource=resource)
        if token == mark and stored_holder is not None and info.holder != stored_holder:
            self._latch(
                f"token {token} of {resource!r} is held by {info.holder} on-chain, but this store accepted it "
                f"from {stored_holder}: the number was issued twice",
                seen_token=mark,
                chain_token=token,
                resource=resource,
            )
        if token > mark:
            # A new epoch: also make sure the chain has not lost tokens this store accepted elsewhere.
            high = self._store.high_token()
            latest = registry.latest_token(block="latest")
            if latest < high:
                self._latch(
                    f"the registry's latest token is {latest}, below token {high} this store accepted",
                    seen_token=high,
                    chain_token=latest,
                    resource=resource,
                )
        return info

    # ------------------------------------------------------------------
    # Admission
    # ------------------------------------------------------------------

    def _namespace(self, resource: str) -> tuple[str, bytes] | None:
        """(namespace, its on-chain id keccak256(prefix bytes)), or None for a name without one."""
        known = self._namespaces.get(resource, False)
        if known is False:
            prefix = _names.namespace_prefix(resource)
            known = None if prefix is None else (prefix, _names.namespace_id(prefix))
            if len(self._namespaces) < _MAX_IDS:
                self._namespaces[resource] = known
        return known

    def _admits_known(self, resource: str, holder: str | None) -> bool:
        """Whether the admission accepts ``holder`` without asking anything (False: go and find out)."""
        admission = self.admission
        if admission is None:
            return True
        if admission.holders is not None:
            return holder in admission.holders
        return (resource, holder) in self._admitted_pairs

    def _admit(self, verdict: _Verdict) -> None:
        """Raise HolderNotAdmitted unless the admission accepts the token's holder; records nothing."""
        admission = self.admission
        if admission is None:
            return
        holder = verdict.holder
        if holder is None:  # a mark recorded without its holder: ask the chain
            info = self.registry.last_lease(verdict.resource)
            holder = info.holder if info is not None and info.token == verdict.token else None
            verdict.holder = holder
        if admission.holders is not None:
            if holder not in admission.holders:
                self._refuse(verdict, holder, "local", None)
            return
        namespace = self._namespace(verdict.resource)
        if namespace is None:  # no namespace: open to all, as on-chain
            self._note_admitted(verdict.resource, holder, self._admission_epoch)
            return
        key = (namespace[1], holder or "")
        epoch = self._admission_epoch
        if not verdict.fresh and self._admitted.get(key) is True:
            self._note_admitted(verdict.resource, holder, epoch)
            return  # cached; dropped by the follower when the namespace's admissions change
        admitted = holder is not None and bool(self.registry.is_admitted(verdict.resource, holder))
        with self._admitted_lock:
            if epoch == self._admission_epoch:  # else the follower dropped answers meanwhile: this one may be old
                self._admitted[key] = admitted
                self._admitted.move_to_end(key)
                if len(self._admitted) > _MAX_ADMISSIONS:
                    self._admitted.popitem(last=False)
        if admitted:
            self._note_admitted(verdict.resource, holder, epoch)
        else:
            with self._admitted_lock:
                self._admitted_pairs.discard((verdict.resource, holder))
            self._refuse(verdict, holder, "on-chain", namespace)

    def _note_admitted(self, resource: str, holder: str | None, epoch: int) -> None:
        """Let the fast paths accept ``holder`` on ``resource`` unasked, unless answers were dropped since ``epoch``."""
        with self._admitted_lock:
            if epoch == self._admission_epoch:
                if len(self._admitted_pairs) >= _MAX_ADMISSIONS:
                    self._admitted_pairs.clear()
                self._admitted_pairs.add((resource, holder))

    def _refuse(
        self, verdict: _Verdict, holder: str | None, admission: str, namespace: tuple[str, bytes] | None
    ) -> None:
        logger.info(
            "guard refused holder resource=%s token=%d holder=%s admission=%s",
            verdict.resource,
            verdict.token,
            holder,
            admission,
        )
        raise HolderNotAdmitted(
            holder=holder or "an unknown holder",
            token=verdict.token,
            admission=admission,
            namespace=namespace[1] if namespace else None,
            namespace_name=namespace[0] if namespace else None,
            resource=verdict.resource,
            resource_id=verdict.resource_id,
        )

    def _forget_admissions(self, namespace_id: bytes) -> None:
        """Drop the cached on-chain answers of one namespace (its admissions or policy changed)."""
        with self._admitted_lock:
            self._admission_epoch += 1
            self._admitted_pairs.clear()
            for key in [key for key in self._admitted if key[0] == namespace_id]:
                del self._admitted[key]

    def _record(self, verdict: _Verdict, request: tuple[bytes, int] | None = None) -> None:
        """Record the verdict (raise the mark; remember the request) in one transaction, or nothing."""
        if not verdict.raises and request is None:
            return
        with self._store.write() as conn:
            current, _holder, rolled_back, _ended = GuardStore.read_mark(conn, verdict.resource_id)
            if rolled_back is not None:
                raise ChainRolledBack(f"guard store {str(self.path)!r} no longer trusts the chain: {rolled_back}")
            if verdict.token < current:
                # Another thread or process recorded a newer token meanwhile.
                raise StaleToken(
                    token=verdict.token,
                    current_token=current,
                    resource=verdict.resource,
                    resource_id=verdict.resource_id,
                )
            if verdict.token > current:
                GuardStore.raise_mark(
                    conn, verdict.resource_id, verdict.token, verdict.holder, _names.display_name(verdict.resource)
                )
            if request is not None:
                digest, deadline = request
                now = int(time.time())
                horizon = GuardStore.replay_horizon(conn)
                if deadline <= horizon:
                    # Its record may have been pruned: whatever the clock says now, it is over.
                    raise RequestExpired(
                        f"the request's deadline {deadline} is at or before {horizon}, the point up to which "
                        "this store forgets accepted requests (the clock stepped back?)"
                    )
                if not GuardStore.remember_request(conn, digest, deadline):
                    raise ReplayedRequest(f"request 0x{digest.hex()[:16]}... was already accepted")
                if now % 64 == 0:  # now and then, forget requests whose deadline is long gone
                    self._store.prune_requests(conn, now - _PRUNE_AFTER)
        if verdict.raises:
            if self.exclusive:
                self._remember(verdict.resource_id, verdict.token, verdict.holder)
            logger.info(
                "guard accepted new token resource=%s token=%d previous_mark=%d",
                verdict.resource,
                verdict.token,
                verdict.mark,
            )

    def mark(self, resource: str) -> int:
        """The highest token accepted for ``resource`` (0 if none)."""
        self._require_usable()
        return GuardStore.read_mark(self._store.conn(), self._resource_id(resource))[0]

    def marks(self) -> dict[str, int]:
        """Every resource's mark, by name (an escaped name, or the 0x id when the name is unknown)."""
        self._require_usable()
        rows = self._store.marks()
        return dict(sorted(((name or "0x" + rid.hex()), token) for rid, name, token, _holder in rows))

    # ------------------------------------------------------------------
    # Holder-signed requests
    # ------------------------------------------------------------------

    def check_request(
        self,
        request: FencedRequest,
        payload: bytes,
        *,
        action: str,
        audience: str | None = None,
        resource: str | None = None,
    ) -> FencedRequest:
        """Accept a holder-signed request once, or raise a RequestRejected / TokenNotCurrent.

        ``action`` is what the request is used for here (an HTTP request's
        ``"METHOD /path?query"``, or an application's action name), and
        ``audience`` the service verifying it (default: the guard's
        ``audience``); ``resource``, when given, the resource this endpoint is
        fenced by. The request must have been signed for exactly these.

        Checked in this order, cheap and local first, and nothing is recorded
        unless every check passes: the request names this resource, action
        and audience (:class:`~chainfence.errors.RequestMisdirected`), the
        payload is the signed one (:class:`~chainfence.errors.PayloadMismatch`),
        the deadline has not passed and is not too far
        (:class:`~chainfence.errors.RequestExpired`,
        :class:`~chainfence.errors.MalformedRequest`); the token passes this
        guard's mode (``TokenNotCurrent``) and is held by the named holder
        (:class:`~chainfence.errors.SignerNotHolder`); the signature is that
        holder's — recovered locally for an account, and only then, for a
        contract holder, ERC-1271 with a gas cap
        (:class:`~chainfence.errors.InvalidSignature`); the holder passes the
        guard's admission, if any (:class:`~chainfence.errors.HolderNotAdmitted`);
        the request was never accepted before, across restarts and clock steps
        (:class:`~chainfence.errors.ReplayedRequest`). The mark and the
        request are then recorded in one transaction.
        """
        from ..fenced_requests import FencedRequest

        if not isinstance(request, FencedRequest):
            raise MalformedRequest(f"expected a FencedRequest, got {type(request).__name__}")
        audience = self.audience if audience is None else audience
        if not isinstance(action, str) or not action:
            raise InvalidInput("check_request needs the action the request is used for (e.g. 'POST /reports')")
        if not isinstance(audience, str) or not audience:
            raise InvalidInput("check_request needs the audience: Guard(..., audience=...) or audience=")
        if resource is not None and request.resource != resource:
            raise ResourceMismatch(
                f"this endpoint is fenced by {resource!r}; the request was signed for {request.resource!r}"
            )
        if request.action != action:
            raise ActionMismatch(f"the request was signed for {request.action!r}, not {action!r}")
        if request.audience != audience:
            raise AudienceMismatch(f"the request was signed for audience {request.audience!r}, not {audience!r}")
        if not isinstance(payload, (bytes, bytearray)) or keccak(bytes(payload)) != request.payload_digest:
            raise PayloadMismatch("the payload is not the one the holder signed")
        now = time.time()
        if request.deadline < now:
            raise RequestExpired(f"the request's deadline {request.deadline} has passed (now {int(now)})")
        if request.deadline > now + self.max_request_age:
            raise MalformedRequest(
                f"the request's deadline is more than {self.max_request_age} s away; sign with a nearer one"
            )
        domain = self.domain()
        digest = request.digest(domain)
        try:
            signed_by_holder_key = request.recover(domain, digest=digest) == request.holder
        except InvalidSignature:
            signed_by_holder_key = False  # not an account's signature; a contract holder may still accept it

        verdict = self._judge(request.resource, request.token)
        holder = verdict.holder
        if holder is None:  # a mark recorded without its holder: ask the chain
            info = self.registry.last_lease(request.resource)
            holder = info.holder if info is not None and info.token == request.token else None
        if holder != request.holder:
            raise SignerNotHolder(
                f"{request.holder} signed for token {request.token} of {request.resource!r}, held by {holder}"
            )
        if not signed_by_holder_key:
            self._verify_contract_signature(request, digest)
        verdict.holder = holder
        self._admit(verdict)
        self._record(verdict, request=(digest, request.deadline))
        return request

    def domain(self) -> EIP712Domain:
        """The registry's EIP-712 domain (ERC-5267), read once."""
        if self._domain is None:
            self._domain = self.registry.eip712_domain()
        return self._domain

    def _verify_contract_signature(self, request: FencedRequest, digest: bytes) -> None:
        """ERC-1271, for a holder that is a contract; its code runs with at most ``erc1271_gas``."""
        if not self._is_contract(request.holder):
            raise InvalidSignature(
                f"not signed by the key of the holder it names ({request.holder}): "
                "a foreign key, or a request signed for another registry or chain"
            )
        data = _ERC1271_MAGIC + _encode_bytes32_bytes(digest, request.signature)
        try:
            answer = self.registry.chain.call(request.holder, data, gas=self.erc1271_gas)
        except NodeUnreachable:
            raise
        except ChainfenceError as exc:
            raise InvalidSignature(f"the holder contract {request.holder} refused the signature: {exc}") from None
        if answer[:4] != _ERC1271_MAGIC:
            raise InvalidSignature(f"the holder contract {request.holder} does not accept this signature")

    def _is_contract(self, address: str) -> bool:
        known = self._contract_holders.get(address)
        if known is None:
            known = bool(self.registry.chain.rpc.code(address))
            self._contract_holders[address] = known
            if len(self._contract_holders) > _MAX_CONTRACT_HOLDERS:
                self._contract_holders.popitem(last=False)
        return known

    # ------------------------------------------------------------------
    # Follow mode
    # ------------------------------------------------------------------

    def sync(self) -> int:
        """Bring the marks up to the confirmed head from the registry's events; returns that block.

        The follower thread calls this every ``follow_interval`` seconds in
        ``follow`` mode; call it yourself for a deterministic catch-up. Pages
        through ``eth_getLogs`` within the provider's limits; each page is
        applied and recorded in one transaction, so a crash resumes where it
        stopped. Raises :class:`~chainfence.errors.ChainRolledBack` (and
        latches the store) if a block it applied was replaced.
        """
        self._require_usable()
        with self._follow_lock:
            try:
                block = self._sync()
            except ChainfenceError as exc:
                self._follow_error = f"{type(exc).__name__}: {exc}"
                raise
            self._follow_error = None
            self._synced_at = time.monotonic()
            self.followed_block = block
            return block

    def _sync(self) -> int:
        chain = self.registry.chain
        store = self._store
        head = chain.confirmed_block(self.confirmations)
        conn = store.conn()
        start = GuardStore.meta(conn, "follow_block")
        if start is None:
            # First follow of this store: from the head on. Earlier tokens
            # still reach the marks when presented, verified on-chain.
            self._save_progress(head, self._block_hash(head))
            return head
        block = int(start)
        self._require_unchanged(block, GuardStore.meta(conn, "follow_hash"), head)
        kinds = [
            _events.Kind.ACQUIRED,
            _events.Kind.NAMED,
            _events.Kind.REVOKED,
            _events.Kind.RELEASED,
            _events.Kind.COMPLETED,
        ]
        if self.admission is not None and self.admission.holders is None:  # on-chain: follow the allowlists
            kinds += [_events.Kind.ADMISSION_SET, _events.Kind.POLICY_SET, _events.Kind.ADMIN_TRANSFERRED]
        for _first, last, logs in _events.fetch(
            chain,
            self.registry.address,
            kinds=kinds,
            from_block=block + 1,
            to_block=head,
        ):
            self._apply(logs, last, self._block_hash(last), self._completed_claims(logs))
            block = last
        return block

    def _completed_claims(self, logs: list[_events.RegistryLog]) -> set[tuple[bytes, int]]:
        """The completions in ``logs`` that ended their lease: a claimed work item's (it reads done at that
        block). A plain lease's completion records a result and ends nothing. One read per completion,
        before the page is applied (no chain call inside the store's write transaction)."""
        done: set[tuple[bytes, int]] = set()
        for entry in logs:
            if entry.kind is not _events.Kind.COMPLETED or entry.token is None:
                continue
            info = self.registry.last_lease_by_id(entry.resource_id, block=entry.block_number)
            if info is not None and info.token == entry.token and endings.of_status(info.status) is End.COMPLETED:
                done.add((entry.resource_id, entry.token))
        return done

    def _block_hash(self, number: int) -> str:
        found = self.registry.chain.rpc.block(number)
        if found is None:
            raise ChainError(f"the node has no block {number}")
        return "0x" + bytes(found["hash"]).hex()

    def _require_unchanged(self, block: int, stored_hash: str | None, head: int) -> None:
        """Latch the store if the block the follower stopped at is no longer the chain's."""
        if block > head:
            self._latch(f"the chain's confirmed head {head} is below block {block}, which the follower applied")
        if stored_hash is not None and self._block_hash(block) != stored_hash:
            self._latch(
                f"block {block}, which the follower applied, was replaced on-chain "
                f"(a reorg deeper than {self.confirmations} confirmations, or a node that lost its state)"
            )

    def _save_progress(self, block: int, block_hash: str) -> None:
        with self._store.write() as conn:
            GuardStore.set_meta(conn, "follow_block", str(block))
            GuardStore.set_meta(conn, "follow_hash", block_hash)

    def _apply(
        self, logs: list[_events.RegistryLog], last: int, last_hash: str, completed: set[tuple[bytes, int]]
    ) -> None:
        """One page of events: raise marks, record ended leases, learn names, and record the progress, atomically.

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

        Namespace events drop the cached on-chain admission answers of their namespace.
        """
        raised: list[tuple[bytes, int, str | None]] = []
        ended: list[tuple[bytes, int, End]] = []
        namespaces: set[bytes] = set()
        # A name hashes to its resource (a claimed item's, as workset»item): a log claiming otherwise is not believed.
        names = {
            entry.resource_id: _names.label(entry.resource_id, entry.name)[1]
            for entry in logs
            if entry.kind is _events.Kind.NAMED
            and entry.name is not None
            and (keccak(entry.name) == entry.resource_id or _names.item_parts(entry.name, entry.resource_id))
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
        for resource_id, token, holder in raised:
            if self.exclusive:
                self._remember(resource_id, token, holder)
            logger.info("guard followed new token resource=0x%s token=%d", resource_id.hex()[:16], token)
        for resource_id, token, end in ended:
            memo = self._memo.get(resource_id)
            if memo is not None and memo[0] == token:
                self._memo.pop(resource_id, None)  # an exclusive guard must no longer answer it from memory
            logger.info("guard followed %s lease resource=0x%s token=%d", end.value, resource_id.hex()[:16], token)
        for namespace_id in namespaces:
            self._forget_admissions(namespace_id)

    def staleness(self) -> float:
        """Seconds since the follower last brought the marks up to the confirmed head (inf if never)."""
        return float("inf") if self._synced_at is None else time.monotonic() - self._synced_at

    def follow_status(self) -> FollowStatus:
        """The follower's progress, and whether checks at the mark currently rely on it."""
        return FollowStatus(
            followed_block=self.followed_block,
            staleness=self.staleness(),
            healthy=self.mode == "follow" and self._following(),
            last_error=self._follow_error,
        )

    def _following(self) -> bool:
        """Whether the follower is up to date enough for checks at the mark to trust it."""
        return self._follow_error is None and self.staleness() <= self.max_lag

    def _start_follower(self) -> None:
        self._stop = threading.Event()
        self._follower = threading.Thread(target=self._follow, name=f"chainfence-follow-{self.path.name}", daemon=True)
        self._follower.start()

    def _adopt_fork(self) -> None:
        """First use in a forked child: a shared guard carries on (its store is on disk, its follower
        restarts); an exclusive one cannot (its memory is a frozen copy of the owner's)."""
        self._require_usable()
        with self._follow_lock:
            if not self._forked:
                return
            self._forked = False
            self._owner_pid = os.getpid()
            if self.mode == "follow":
                self._start_follower()

    def _follow(self) -> None:
        stop = self._stop
        while not stop.wait(self.follow_interval):
            try:
                self.sync()
            except ChainRolledBack as lost:
                logger.error("guard follower stopped: %s", lost)
                return
            except GuardError:
                return  # closed
            except ChainfenceError as exc:  # the node hiccuped: checks go on-chain, the next poll retries
                logger.warning("guard follower could not sync (staleness %.1f s): %s", self.staleness(), exc)

    # ------------------------------------------------------------------
    # Rollbacks
    # ------------------------------------------------------------------

    def _check_continuity_at_open(self) -> None:
        """At open: the chain must still reach every token this store accepted, and the newest marks
        (what a crash or a reorg loses first) must still belong to the holders they were accepted from.

        A few reads per open; a latch found here is logged and every check then raises.
        """
        high = self._store.high_token()
        if not high or self._store.meta(self._store.conn(), "rolled_back") is not None:
            return
        try:
            latest = self.registry.latest_token(block="latest")
            if latest < high:
                self._latch(
                    f"the registry's latest token is {latest}, below token {high} this store accepted",
                    seen_token=high,
                    chain_token=latest,
                )
            for resource_id, name, token, holder in self._store.newest_marks(_MARKS_VERIFIED_AT_OPEN):
                info = self.registry.last_lease_by_id(resource_id, block="latest")
                chain_token, chain_holder = (info.token, info.holder) if info is not None else (0, None)
                where = name or "0x" + resource_id.hex()
                if chain_token < token or (chain_token == token and holder is not None and chain_holder != holder):
                    self._latch(
                        f"{where} reads token {chain_token} held by {chain_holder} on-chain; this store accepted "
                        f"token {token} from {holder}",
                        seen_token=token,
                        chain_token=chain_token,
                        resource=name,
                    )
        except ChainRolledBack as lost:
            logger.error("guard %s: %s", self.path, lost)

    def _latch(
        self, reason: str, *, seen_token: int | None = None, chain_token: int | None = None, resource: str | None = None
    ) -> None:
        """Record that the chain lost history this store relied on, and raise ChainRolledBack."""
        self._rolled_back, self._plain_mark_mode = reason, False
        self._memo.clear()
        self._store.latch_rollback(reason)
        logger.error("guard %s no longer trusts the chain: %s", self.path, reason)
        raise ChainRolledBack(
            f"{reason}: the same token numbers may go to other holders; this store refuses every token from now "
            "on (start a new store once the chain is trusted again)",
            seen_token=seen_token,
            chain_token=chain_token,
            resource=resource,
        )

    # ------------------------------------------------------------------
    # Store, lifetime, fork
    # ------------------------------------------------------------------

    def close(self) -> None:
        """Stop the follower, close the store's connections (from every thread). Marks stay on disk."""
        self._stop_follower()
        self._store.close()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the flock (once no forked copy holds it either)
            self._lock_file = None

    def _stop_follower(self) -> None:
        stop = getattr(self, "_stop", None)
        follower = getattr(self, "_follower", None)
        if stop is not None:
            stop.set()
        if (
            follower is not None
            and follower is not threading.current_thread()
            and follower.is_alive()
            and os.getpid() == self._owner_pid
        ):
            follower.join()

    def _after_fork_in_child(self) -> None:
        """Run in a forked child (os.register_at_fork). Its memory is a frozen copy of the owner's."""
        self._forked, self._plain_mark_mode = True, False
        self._memo = OrderedDict()
        self._follower = None
        self._synced_at = None  # no follower runs here yet: checks at the mark go on-chain
        self._follow_lock = threading.Lock()
        self._store.after_fork()

    def _require_usable(self) -> None:
        if self._forked and self.exclusive and os.getpid() != self._owner_pid:
            raise GuardForked(
                f"this exclusive guard on {str(self.path)!r} was opened in process {self._owner_pid}; "
                f"process {os.getpid()} is a fork of it and must open its own guard"
            )

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Guard {str(self.path)!r} mode={self.mode} registry={self.registry.address}>"

    def _resource_id(self, resource: str) -> bytes:
        cached = self._ids.get(resource) if resource.__class__ is str else None
        if cached is None:
            cached = _validate.resource_id(resource)
            if len(self._ids) < _MAX_IDS:
                self._ids[resource] = cached
        return cached

    def _remember(self, resource_id: bytes, token: int, holder: str | None) -> None:
        previous = self._memo.get(resource_id)
        if previous is None or previous[0] < token:
            self._memo[resource_id] = (token, holder)
            self._memo.move_to_end(resource_id)
            if len(self._memo) > _MAX_MEMO:
                self._memo.popitem(last=False)

    def _take_store_lock(self) -> None:
        """Exclusive guards own the store: a lock file held for the guard's life (flock)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: exclusivity is the caller's promise
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(f"{self.path}.lock", "a+")
        try:
            fcntl.flock(self._lock_file.fileno(), (fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            self._lock_file = None
            raise GuardError(
                f"{str(self.path)!r} is in use by "
                + ("another guard" if self.exclusive else "a guard that owns it (exclusive=True)")
            ) from None

    # Tests and tools of the 0.1 series reached for these.
    def _conn(self) -> Any:
        self._require_usable()
        return self._store.conn()


def _after_fork_in_child() -> None:
    for guard in list(_GUARDS):
        guard._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _encode_bytes32_bytes(word: bytes, data: bytes) -> bytes:
    """ABI encoding of (bytes32, bytes): the arguments of isValidSignature."""
    padded = data + b"\0" * (-len(data) % 32)
    return word + (64).to_bytes(32, "big") + len(data).to_bytes(32, "big") + padded


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
