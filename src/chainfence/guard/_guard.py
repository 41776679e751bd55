"""The :class:`Guard`: its modes, the check, the marks, the rollback latch, and its lifetime.

A check reads the resource's mark (memory for an ``exclusive`` guard, else
one SQLite read), accepts a token at a mark it trusts, and otherwise judges
the token (:meth:`Guard._judge`: on-chain when it is news, or always in
``strict`` mode, or while the follower is behind), asks the admission
(:mod:`._admission_cache`), and records the verdict (:meth:`Guard._record`:
one write transaction that re-reads the mark). What the chain says against
what the store accepted latches the store (:meth:`Guard._latch`).

The guard wires its collaborators: the store (:mod:`._store`), the
follower (:mod:`._follower`), the request checks (:mod:`._requests`) and
the admission cache. The modes and guarantees are told in
:mod:`chainfence.guard`.
"""

from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .._core import log as _log
from .._core import metrics as _metrics
from .._node import completeness as _completeness
from .._sdk import names as _names
from .._sdk import validate as _validate
from .._sdk.lease_state import LeaseStatus, judge
from .._sdk.rollback import Doubt
from ..endings import End
from ..errors import (
    ChainfenceError,
    ChainRolledBack,
    GuardError,
    HeaderBehind,
    InvalidInput,
    LeaseCompleted,
    LeaseReleased,
    LeaseRevoked,
    NotAdmitted,
    RequestRejected,
    StaleToken,
    TokenNotCurrent,
    UnknownToken,
)
from . import _config
from ._admission_cache import AdmissionCache
from ._config import DEFAULT_REQUESTS, MODES, Follow, Mark, Proven, RequestPolicy, Settings
from ._follower import Follower, FollowStatus, Page
from ._rejections import RejectionLog
from ._requests import RequestVerifier, remember_once
from ._store import IDENTITY_KEYS, MAX_STORED_TOKEN, READ_MARK, GuardStore
from ._verdict import Verdict
from .admission import Admission

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from .._node.headers import VerifiedHeader
    from ..fenced_requests import EIP712Domain, FencedRequest
    from ..lease import LeaseInfo
    from ..proofs import ProvenReader
    from ..registry import Registry

logger = _log.get("chainfence.guard")  # the guard's one logger, whichever module logs

#: What a guard refuses a write for (what ``rejection_log`` records): a token not current, a holder not
#: admitted, a request that failed its checks. Chain failures and bad arguments are no refusal of a write.
_REFUSALS = (TokenNotCurrent, NotAdmitted, RequestRejected)


def _accepted(verdict: Verdict) -> str:
    """How a check accepted a token, for the metrics: a new epoch, the chain asked, or the mark trusted."""
    return "new_mark" if verdict.raises else "verified" if verdict.fresh else "at_mark"


def _doubt(reason: str, **fields: Any) -> NoReturn:
    """The ``latch`` of a first look at the chain: evidence of a rollback, not yet believed."""
    raise Doubt(reason)


__all__ = ["MODES", "Guard"]

#: The error a token at its mark is refused with once the follower recorded how its lease ended.
_ENDED_ERRORS: dict[str, type[LeaseReleased | LeaseRevoked]] = {
    End.RELEASED.value: LeaseReleased,
    End.COMPLETED.value: LeaseCompleted,
    End.REVOKED.value: LeaseRevoked,
}

#: Bounds of the in-memory caches (LRU): names -> ids, exclusive marks, contract holders, admission answers.
_MAX_IDS = 100_000
_MAX_MEMO = 100_000
_MAX_CONTRACT_HOLDERS = 4_096
_MAX_ADMISSIONS = 16_384

#: Marks verified against the chain when a guard opens (the newest: what a rollback loses first).
_MARKS_VERIFIED_AT_OPEN = 8

#: Live guards of this process, for the fork handler.
_GUARDS: weakref.WeakSet[Guard] = weakref.WeakSet()


class Guard:
    """Per-resource high-water marks of one registry's fencing tokens, kept in a SQLite file.

    ::

        Guard(registry, "guard.sqlite")                                    # mark mode
        Guard(registry, "guard.sqlite", mode=Follow(interval=0.5), exclusive=True)
        Guard(registry, "guard.sqlite", mode=Proven(QuorumHeaders([a, b, c], k=2)))

    Args:
        registry: the registry whose tokens this guard judges.
        path: the store file; created if missing. Several processes may share
            it, unless one of them opened it ``exclusive``.
        mode: ``"mark"`` (the default), ``"strict"``, ``"follow"``, or a mode value with its settings:
            :class:`~chainfence.guard.Mark`, :class:`~chainfence.guard.Follow` (the follower's interval,
            lag and completeness check), :class:`~chainfence.guard.Proven` (the header source); see
            :mod:`chainfence.guard`.
        confirmations: blocks on top of an issuing block before its token may
            become a mark (default: the chain's setting).
        exclusive: this guard owns the store (no other guard, in any process,
            may open it: enforced with a lock file) and keeps the marks in
            memory too: a check at the mark is a dict lookup.
        timeout: seconds to wait for another process's write lock.
        admission: whom to accept as a token's holder
            (:class:`~chainfence.Admission`): ``Admission.local([...])``,
            ``Admission.on_chain()``, or None (default: any holder).
        requests: what signed requests must be (:class:`~chainfence.guard.RequestPolicy`: the
            audience, the furthest deadline, the ERC-1271 gas; see :meth:`check_request`).
        rejection_log: a file to record every refused write in, one JSON line each (resource, time,
            token, holder, reason: what ``chainfence audit timeline --rejections FILE`` draws; see
            :mod:`chainfence.guard._rejections`), or None (default: none recorded).

    The keywords before 0.2 (``follow_interval``, ``max_lag``, ``completeness``, ``headers``,
    ``proof_provider``, ``audience``, ``max_request_age``, ``erc1271_gas``) still work until 0.3, with a
    ``DeprecationWarning`` naming what replaces each (CHANGELOG.md).

    The settings are kept as attributes (read, not changed): ``mode`` (its name), ``confirmations``,
    ``exclusive``, ``path``, ``admission``, ``rejection_log``; the mode's ``follow_interval``, ``max_lag`` and
    ``completeness`` (defaults resolved), ``headers`` and ``proof_provider``; the request policy's
    ``audience``, ``max_request_age`` and ``erc1271_gas``.

    Raises :class:`~chainfence.errors.GuardStoreMismatch` if the file holds
    marks of another registry (other chain, address or deployment).
    """

    def __init__(
        self,
        registry: Registry,
        path: str | os.PathLike[str],
        *,
        mode: str | Mark | Follow | Proven = "mark",
        confirmations: int | None = None,
        exclusive: bool = False,
        timeout: float = 30.0,
        admission: Admission | None = None,
        requests: RequestPolicy = DEFAULT_REQUESTS,
        rejection_log: str | os.PathLike[str] | None = None,
        **deprecated: Any,
    ):
        given = _config.settings(mode, requests, deprecated, call="Guard", stacklevel=2)
        self._setup(registry, path, given, confirmations, exclusive, timeout, admission, rejection_log)

    @classmethod
    def _from_settings(
        cls,
        registry: Registry,
        path: str | os.PathLike[str],
        given: Settings,
        *,
        confirmations: int | None,
        exclusive: bool,
        timeout: float,
        admission: Admission | None,
        rejection_log: str | os.PathLike[str] | None = None,
    ) -> Guard:
        """A guard of settings already checked (``AsyncGuard.open`` checks them on the event loop, where
        a deprecated keyword's warning points at its caller, and builds the guard in a worker thread)."""
        guard = cls.__new__(cls)
        guard._setup(registry, path, given, confirmations, exclusive, timeout, admission, rejection_log)
        return guard

    def _setup(
        self,
        registry: Registry,
        path: str | os.PathLike[str],
        given: Settings,
        confirmations: int | None,
        exclusive: bool,
        timeout: float,
        admission: Admission | None,
        rejection_log: str | os.PathLike[str] | None = None,
    ) -> None:
        if admission is not None and not isinstance(admission, Admission):
            raise InvalidInput(
                f"admission must be an Admission (Admission.local or .on_chain) or None, got {admission!r}"
            )
        if not isinstance(path, (str, os.PathLike)) or str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise InvalidInput(f"a guard needs a file path (marks must survive restarts), got {path!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise InvalidInput(f"timeout must be a positive number of seconds, got {timeout!r}")
        if rejection_log is not None and (not isinstance(rejection_log, (str, os.PathLike)) or not str(rejection_log)):
            raise InvalidInput(f"rejection_log must be a file path or None, got {rejection_log!r}")
        if confirmations is None:
            confirmations = registry.chain.confirmations
        if isinstance(confirmations, bool) or not isinstance(confirmations, int) or confirmations < 0:
            raise InvalidInput(f"confirmations must be an int >= 0, got {confirmations!r}")
        mode, headers, proof_provider = given.mode, given.headers, given.proofs
        checked_by = _completeness.mode_of(given.completeness, default="bloom" if headers is None else "receipts")
        # Settings.
        self.registry = registry
        self.mode = mode
        self.confirmations = confirmations
        self.exclusive = bool(exclusive)
        self.path = Path(path)
        self.follow_interval = float(given.interval)
        self.max_lag = float(given.max_lag) if given.max_lag is not None else max(5.0, 3 * self.follow_interval)
        self.audience = given.requests.audience
        self.max_request_age = given.requests.max_age
        self.erc1271_gas = given.requests.erc1271_gas
        self.admission = admission
        self.headers = headers
        self.proof_provider = proof_provider
        self.completeness: str = checked_by
        #: Where the refusals are recorded, one JSON line each (:mod:`._rejections`), or None.
        self.rejection_log = Path(rejection_log) if rejection_log is not None else None
        self._rejections = RejectionLog(self.rejection_log) if self.rejection_log is not None else None
        # Collaborators.
        self._reader: ProvenReader | None = None
        if headers is not None:
            from ..proofs import ProvenReader  # here: a guard without headers never loads the proof code

            self._reader = ProvenReader(
                registry.address,
                headers=headers,
                provider=registry.chain if proof_provider is None else proof_provider,
            )
        self._store = GuardStore(self.path, timeout=float(timeout))
        self._follower = Follower(
            registry,
            self._store,
            confirmations=confirmations,
            max_lag=self.max_lag,
            follow_admissions=admission is not None and admission.holders is None,
            latch=self._latch,
            on_page=self._followed,
            proven=self._reader,
            completeness=checked_by,
        )
        self._requests = RequestVerifier(registry, max_contract_holders=_MAX_CONTRACT_HOLDERS, proven=self._reader)
        self._admission_cache = AdmissionCache(registry, admission, max_answers=_MAX_ADMISSIONS, max_names=_MAX_IDS)
        # Memory: names -> ids, and an exclusive guard's marks: resource id -> (mark, holder),
        # mirroring the store (LRU-bounded).
        self._ids: dict[str, bytes] = {}
        self._memo: OrderedDict[bytes, tuple[int, str | None]] = OrderedDict()
        # Trust: why the store stopped trusting the chain, once it did; mark mode with nothing to doubt
        # (no rollback seen, not a forked copy): every mark is trusted.
        self._rolled_back: str | None = None
        self._plain_mark_mode = mode == "mark"
        # The process that opened it (a forked copy must not answer from the owner's memory).
        self._owner_pid = os.getpid()
        self._forked = False
        self._open()

    def _open(self) -> None:
        """Take the store (lock file, schema, identity), load an exclusive guard's memory, check that the
        chain still reaches what the store accepted, and start following."""
        try:
            if self._reader is not None:
                self._reader.require_proofs()  # ProofsNotServed (eth-tester) before anything else
            self._store.lock(exclusive=self.exclusive)
            identity = {key: value for key, value in self.registry.identity().items() if key in IDENTITY_KEYS}
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
        if self.mode == "follow":
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
        :class:`~chainfence.errors.NotAdmitted` for a token whose holder
        it does not accept. A rejection never moves the mark. Chain errors
        propagate (fail closed), as :class:`~chainfence.errors.ChainError`
        subclasses.
        """
        resource_id = self._ids.get(resource) if resource.__class__ is str else None
        if resource_id is not None and token.__class__ is int:
            if self.exclusive:
                memo = self._memo.get(resource_id)
                if (  # the condition of _remembers, inline: the hot path (a call costs half as much again)
                    memo is not None
                    and memo[0] == token
                    and (self._plain_mark_mode or self._trusts_marks())
                    and (self.admission is None or self._admission_cache.admits_known(resource, memo[1]))
                ):
                    if _metrics.live is not None:
                        _metrics.live.at_mark.inc()
                    return token  # an owned store, same epoch: two dict lookups
            elif self._trusts_marks():
                row = self._store.conn().execute(READ_MARK, (resource_id,)).fetchone()
                if (
                    row is not None
                    and row[0] == token
                    and row[2] is None
                    and row[3] is None
                    and (self.admission is None or self._admission_cache.admits_known(resource, row[1]))
                ):
                    _metrics.guard_accepted("at_mark")
                    return token  # same epoch: one SQLite read
        try:
            verdict = self._judge(resource, token)
            self._admission_cache.admit(verdict)
            self._record(verdict)
        except Exception as refused:
            _metrics.guard_refused(refused)
            if self._rejections is not None and isinstance(refused, _REFUSALS):
                self._rejections.record(resource, token, None, refused)
            raise
        _metrics.guard_accepted(_accepted(verdict))
        return token

    def _remembers(self, resource: str, token: int) -> bool:
        """An exclusive guard's fast path, in memory only: ``token`` is the mark it remembers for
        ``resource``, trusted and admitted (False: judge it). :meth:`check` tests the same, inline;
        ``AsyncGuard.check`` asks this on the event loop."""
        resource_id = self._ids.get(resource) if resource.__class__ is str else None
        if resource_id is None or token.__class__ is not int:
            return False
        memo = self._memo.get(resource_id)
        return (
            memo is not None
            and memo[0] == token
            and (self._plain_mark_mode or self._trusts_marks())
            and (self.admission is None or self._admission_cache.admits_known(resource, memo[1]))
        )

    def _trusts_marks(self) -> bool:
        """Whether a token at its mark may be accepted without asking the chain."""
        if self._forked:
            self._adopt_fork()
        if self.mode in ("strict", "proven") or self._rolled_back is not None:
            return False
        if self.mode == "follow":
            return self._follower.up_to_date()
        return True

    def _judge(self, resource: str, token: int) -> Verdict:
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
            return Verdict(resource, resource_id, token, mark, holder)
        # News (or strict, or a follower in trouble): the chain must vouch for the token.
        if token > MAX_STORED_TOKEN:
            # No registry token is this large (tokens are 48-bit on-chain): never issued.
            raise UnknownToken(token=token, current_token=0, resource=resource, resource_id=resource_id)
        if self._reader is not None:
            info, block = self._verify_proven(resource, resource_id, token, mark, holder)
            return Verdict(resource, resource_id, token, mark, info.holder, fresh=True, block=block)
        info = self._verify_on_chain(resource, resource_id, token, mark, holder)
        return Verdict(resource, resource_id, token, mark, info.holder, fresh=True)

    def _verify_on_chain(
        self, resource: str, resource_id: bytes, token: int, mark: int, stored_holder: str | None
    ) -> LeaseInfo:
        """The registry's verdict on ``token``, and the rollback checks. Evidence of a rollback is believed
        (latched) only once the chain, asked again, says so too (:mod:`chainfence._sdk.rollback`: anvil
        answers a read at ``latest`` from the block before while it mines)."""
        try:
            return self._ask_chain(resource, token, mark, stored_holder, latch=_doubt)
        except Doubt as doubt:
            logger.warning("guard %s: %s; asking the chain again before believing it", self.path, doubt)
        return self._ask_chain(resource, token, mark, stored_holder, latch=self._latch)

    def _ask_chain(
        self, resource: str, token: int, mark: int, stored_holder: str | None, *, latch: Callable[..., NoReturn]
    ) -> LeaseInfo:
        """One look of :meth:`_verify_on_chain`; evidence of a rollback goes to ``latch``."""
        registry = self.registry
        try:
            info = registry.check_current(resource, token, confirmations=self.confirmations)
        except TokenNotCurrent as refused:
            chain_token = getattr(refused, "current_token", None)
            if chain_token is not None and chain_token < mark:
                latch(
                    f"{resource!r} reads token {chain_token} on-chain, below the mark {mark} this store accepted",
                    seen_token=mark,
                    chain_token=chain_token,
                    resource=resource,
                )
            logger.info("guard rejected token resource=%s token=%d: %s", resource, token, type(refused).__name__)
            raise
        except ChainRolledBack as lost:
            latch(str(lost), seen_token=lost.seen_token, chain_token=lost.chain_token, resource=resource)
        if token == mark and stored_holder is not None and info.holder != stored_holder:
            latch(
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
                latch(
                    f"the registry's latest token is {latest}, below token {high} this store accepted",
                    seen_token=high,
                    chain_token=latest,
                    resource=resource,
                )
        return info

    def _verify_proven(
        self, resource: str, resource_id: bytes, token: int, mark: int, stored_holder: str | None
    ) -> tuple[LeaseInfo, int]:
        """:meth:`_verify_on_chain` with nothing believed from a provider: the resource's lease slot
        (and, for a new epoch, the registry's latest token) proven at the header source's current
        header, judged as strict mode judges it; with ``confirmations=k``, the same token and holder
        proven at the block ``k`` below that header. Returns (the lease, the header's block).

        An answer that does not verify raises before anything is judged (UnverifiedAnswer,
        ProviderUnavailable, ProofsNotServed): nothing recorded. Evidence of a rollback (the proven
        token below the mark; the registry's latest below the store's highest mark) latches the store
        only when proven at a header no older than the one at which the store last raised a mark from
        a proof (``GuardStore.proven_block``): a header source whose k-th highest head moved back is
        :class:`~chainfence.errors.HeaderBehind`, refused, not a rollback. The same token number with
        another holder latches at any header (two histories)."""
        reader = self._reader
        assert reader is not None
        header = reader.headers.current()
        if token > mark:
            proven = reader.leases([resource_id], header=header)
            info, latest = proven.leases[0], proven.latest_token
        else:
            info, latest = reader.lease_at(resource_id, header=header), None
        vouched = f"block {header.number} (proven; header vouched by {', '.join(header.vouched_by)})"
        try:
            judge(info, token, resource=resource, resource_id=resource_id)
        except TokenNotCurrent as refused:
            if info.token < mark:
                self._latch_if_proven_after(
                    header,
                    f"{resource!r} reads token {info.token} at {vouched}, below the mark {mark} this store accepted",
                    seen_token=mark,
                    chain_token=info.token,
                    resource=resource,
                )
            logger.info("guard rejected token resource=%s token=%d: %s", resource, token, type(refused).__name__)
            raise
        if token == mark and stored_holder is not None and info.holder != stored_holder:
            self._latch(
                f"token {token} of {resource!r} is held by {info.holder} at {vouched}, but this store accepted it "
                f"from {stored_holder}: the number was issued twice",
                seen_token=mark,
                chain_token=token,
                resource=resource,
            )
        if latest is not None:
            high = self._store.high_token()
            if latest < high and header.number >= self._proven_floor():
                self._latch(
                    f"the registry's latest token is {latest} at {vouched}, below token {high} this store accepted",
                    seen_token=high,
                    chain_token=latest,
                    resource=resource,
                )
        if self.confirmations:
            reader.require_confirmed(resource, token, info.holder, header=header, confirmations=self.confirmations)
        return info, header.number

    def _proven_floor(self) -> int:
        """The highest trusted header's block at which this store raised a mark from a proof (0: none)."""
        return GuardStore.proven_block(self._store.conn())

    def _latch_if_proven_after(
        self, header: VerifiedHeader, reason: str, *, seen_token: int, chain_token: int, resource: str | None
    ) -> None:
        """Latch on evidence proven at ``header`` if it is no older than the store's proven marks; else
        raise HeaderBehind (the header source's head moved back: no evidence of anything)."""
        floor = self._proven_floor()
        if header.number >= floor:
            self._latch(reason, seen_token=seen_token, chain_token=chain_token, resource=resource)
        logger.warning("guard %s: %s, at a header older than block %d: refused, not latched", self.path, reason, floor)
        raise HeaderBehind(
            block=header.number, floor=floor, chain_token=chain_token, mark=seen_token, resource=resource
        )

    def _record(self, verdict: Verdict, also: Callable[[sqlite3.Connection], None] | None = None) -> None:
        """Record the verdict (raise the mark), and run ``also`` (a request's replay record) in the same
        transaction: both, or nothing."""
        if not verdict.raises and also is None:
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
                if verdict.block is not None:
                    GuardStore.raise_proven_block(conn, verdict.block)
            if also is not None:
                also(conn)
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

    # ------------------------------------------------------------------
    # Holder-signed requests (the checks: ._requests)
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
        payload is the signed one (:class:`~chainfence.errors.MalformedRequest`),
        the deadline has not passed and is not too far
        (:class:`~chainfence.errors.RequestExpired`,
        :class:`~chainfence.errors.MalformedRequest`); the token passes this
        guard's mode (``TokenNotCurrent``) and is held by the named holder
        (``RequestMisdirected``, ``field="holder"``); the signature is that
        holder's — recovered locally for an account, and only then, for a
        contract holder, ERC-1271 with a gas cap
        (:class:`~chainfence.errors.InvalidSignature`); the holder passes the
        guard's admission, if any (:class:`~chainfence.errors.NotAdmitted`);
        the request was never accepted before, across restarts and clock steps
        (:class:`~chainfence.errors.ReplayedRequest`). The mark and the
        request are then recorded in one transaction.
        """
        try:
            signed = self._requests.read(
                request,
                payload,
                action=action,
                audience=self.audience if audience is None else audience,
                resource=resource,
                max_age=self.max_request_age,
            )
            verdict = self._judge(request.resource, request.token)
            self._requests.require_holder(signed, verdict, gas=self.erc1271_gas)
            self._admission_cache.admit(verdict)
            self._record(verdict, also=lambda conn: remember_once(conn, signed.digest, request.deadline))
        except Exception as refused:
            _metrics.guard_refused(refused)
            if self._rejections is not None and isinstance(refused, _REFUSALS):
                where = getattr(request, "resource", None)
                self._rejections.record(
                    where, getattr(request, "token", None), getattr(request, "holder", None), refused
                )
            raise
        _metrics.guard_accepted(_accepted(verdict))
        return request

    def domain(self) -> EIP712Domain:
        """The registry's EIP-712 domain (ERC-5267), read once."""
        return self._requests.domain()

    # ------------------------------------------------------------------
    # Follow mode (the follower: ._follower)
    # ------------------------------------------------------------------

    def sync(self) -> int:
        """Bring the marks up to the confirmed head from the registry's events; returns that block.

        The follower thread calls this every ``follow_interval`` seconds in
        ``follow`` mode; call it yourself for a deterministic catch-up. Pages
        through ``eth_getLogs`` within the provider's limits; each page is
        applied and recorded in one transaction, so a crash resumes where it
        stopped. Raises :class:`~chainfence.errors.ChainRolledBack` (and
        latches the store) if a block it applied was replaced. With
        ``headers``, up to the header source's head, and a page is applied
        only once its blocks are vouched for and its marks proven
        (:class:`~chainfence.errors.BlockNotVouched`,
        :class:`~chainfence.errors.ProofInvalid` otherwise, nothing written).
        Every block's logs are checked against the block (its ``logsBloom``,
        then its receipts) before the follower passes it: at one the log
        provider's answer lacks logs of (a lagging or withholding log
        backend), what came before is applied and
        :class:`~chainfence.errors.LogsIncomplete` says where the follower
        stands and how far behind; until a sync passes the block, checks at
        the mark go on-chain.
        """
        self._require_usable()
        return self._follower.sync()

    @property
    def followed_block(self) -> int | None:
        """The block the follower last brought the marks up to (None: it never did in this process)."""
        return self._follower.followed_block

    def staleness(self) -> float:
        """Seconds since the follower last brought the marks up to the confirmed head (inf if never)."""
        return self._follower.staleness()

    def follow_status(self) -> FollowStatus:
        """The follower's progress, and whether checks at the mark currently rely on it."""
        return self._follower.status(following=self.mode == "follow")

    def _followed(self, page: Page) -> None:
        """What a page the follower applied changes in memory: an exclusive guard's marks (raised, or
        forgotten when their lease ended: refused at the mark from the store), admission answers."""
        if self.exclusive:
            for resource_id, token, holder in page.raised:
                self._remember(resource_id, token, holder)
        for resource_id, token in page.ended:
            memo = self._memo.get(resource_id)
            if memo is not None and memo[0] == token:
                self._memo.pop(resource_id, None)  # an exclusive guard must no longer answer it from memory
        for namespace_id in page.namespaces:
            self._admission_cache.forget(namespace_id)

    def _start_follower(self) -> None:
        self._follower.start(self.follow_interval, name=f"chainfence-follow-{self.path.name}")

    # ------------------------------------------------------------------
    # Rollbacks: the latch
    # ------------------------------------------------------------------

    def _check_continuity_at_open(self) -> None:
        """At open: the chain must still reach every token this store accepted, and the newest marks
        (what a crash or a reorg loses first) must still belong to the holders they were accepted from.

        A few reads per open; a latch found here is logged and every check then raises.
        """
        high = self._store.high_token()
        if not high or self._store.meta(self._store.conn(), "rolled_back") is not None:
            return
        if self._reader is not None:
            self._check_proven_continuity_at_open(high)
            return
        try:
            try:
                self._check_continuity(high, latch=_doubt)
            except Doubt as doubt:  # believed only if the chain, asked again, says so too (as in a check)
                logger.warning("guard %s: %s; asking the chain again before believing it", self.path, doubt)
                self._check_continuity(high, latch=self._latch)
        except ChainRolledBack as lost:
            logger.error("guard %s: %s", self.path, lost)

    def _check_continuity(self, high: int, *, latch: Callable[..., NoReturn]) -> None:
        """One look of :meth:`_check_continuity_at_open`; evidence of a rollback goes to ``latch``."""
        latest = self.registry.latest_token(block="latest")
        if latest < high:
            latch(
                f"the registry's latest token is {latest}, below token {high} this store accepted",
                seen_token=high,
                chain_token=latest,
            )
        for resource_id, name, token, holder in self._store.newest_marks(_MARKS_VERIFIED_AT_OPEN):
            info = self.registry.last_lease(resource_id=resource_id, block="latest")
            chain_token, chain_holder = (info.token, info.holder) if info is not None else (0, None)
            where = name or "0x" + resource_id.hex()
            if chain_token < token or (chain_token == token and holder is not None and chain_holder != holder):
                latch(
                    f"{where} reads token {chain_token} held by {chain_holder} on-chain; this store accepted "
                    f"token {token} from {holder}",
                    seen_token=token,
                    chain_token=chain_token,
                    resource=name,
                )

    def _check_proven_continuity_at_open(self, high: int) -> None:
        """:meth:`_check_continuity_at_open`, proven: the newest marks and the registry's latest token in
        one proof at the header source's current header. A header older than the store's proven marks
        says nothing of them (no latch); the same token with another holder latches at any header."""
        reader = self._reader
        assert reader is not None
        newest = self._store.newest_marks(_MARKS_VERIFIED_AT_OPEN)
        try:
            proven = reader.leases([resource_id for resource_id, *_ in newest])
            header = proven.header
            recent = header.number >= self._proven_floor()
            at = f"block {header.number} (proven)"
            if recent and proven.latest_token < high:
                self._latch(
                    f"the registry's latest token is {proven.latest_token} at {at}, below token {high} this store "
                    "accepted",
                    seen_token=high,
                    chain_token=proven.latest_token,
                )
            for (resource_id, name, token, holder), info in zip(newest, proven.leases):
                unheld = info.status is LeaseStatus.UNHELD
                chain_token, chain_holder = (0, None) if unheld else (info.token, info.holder)
                where = name or "0x" + resource_id.hex()
                issued_twice = chain_token == token and holder is not None and chain_holder != holder
                if issued_twice or (recent and chain_token < token):
                    self._latch(
                        f"{where} reads token {chain_token} held by {chain_holder} at {at}; this store accepted "
                        f"token {token} from {holder}",
                        seen_token=token,
                        chain_token=chain_token,
                        resource=name,
                    )
        except ChainRolledBack as lost:
            logger.error("guard %s: %s", self.path, lost)

    def _latch(
        self, reason: str, *, seen_token: int | None = None, chain_token: int | None = None, resource: str | None = None
    ) -> NoReturn:
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
    # Lifetime, fork
    # ------------------------------------------------------------------

    def close(self) -> None:
        """Stop the follower, close the store's connections (from every thread). Marks stay on disk."""
        self._follower.stop()
        self._store.close()
        if self._rejections is not None:
            self._rejections.close()

    def _after_fork_in_child(self) -> None:
        """Run in a forked child (os.register_at_fork). Its memory is a frozen copy of the owner's."""
        self._forked, self._plain_mark_mode = True, False
        self._memo = OrderedDict()
        self._follower.after_fork_in_child()  # no follower runs here yet: checks at the mark go on-chain
        self._store.after_fork()

    def _adopt_fork(self) -> None:
        """First use in a forked child: a shared guard carries on (its store is on disk, its follower
        restarts); an exclusive one cannot (its memory is a frozen copy of the owner's)."""
        self._require_usable()
        with self._follower.lock:
            if not self._forked:
                return
            self._forked = False
            self._owner_pid = os.getpid()
            if self.mode == "follow":
                self._start_follower()

    def _require_usable(self) -> None:
        if self._forked and self.exclusive and os.getpid() != self._owner_pid:
            raise GuardError(
                f"this exclusive guard on {str(self.path)!r} was opened in process {self._owner_pid}; "
                f"process {os.getpid()} is a fork of it and must open its own guard",
                forked_from=self._owner_pid,
            )

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Guard {str(self.path)!r} mode={self.mode} registry={self.registry.address}>"

    # Tests and tools of the 0.1 series reached for this.
    def _conn(self) -> Any:
        self._require_usable()
        return self._store.conn()


def _after_fork_in_child() -> None:
    for guard in list(_GUARDS):
        guard._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
