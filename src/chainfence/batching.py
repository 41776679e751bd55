"""Group commit for fleets: many agents in one process acquire, renew and release through shared transactions.

::

    batcher = registry.batched()                  # one per (registry, sender): every agent of the process
    lease = batcher.acquire("jobs/a", ttl=30)     # from any thread (or task: AsyncRegistry.batched())
    with batcher.lease("jobs/b", ttl=30) as lease, lease.keep():
        ...                                       # its renewals and its release are batched too

Concurrent calls are gathered into one ``batchCalls`` transaction of the registry
(``contracts/IFencingRegistry.sol``), each with its own outcome: an acquisition
gets its own :class:`~chainfence.Lease` (its token, holder, ``LeaseAcquired``
event and reason), a renewal its expiry, a release its ``LeaseReleased``; an
operation the lone call would refuse raises, for that caller only, the very
error the lone call raises (:class:`~chainfence.errors.LeaseHeld`,
:class:`~chainfence.errors.LockDelayed`, :class:`~chainfence.errors.NotAdmitted`,
:class:`~chainfence.errors.StaleToken`, ...): the others go on.

Design (the answers; ``docs/guarantees.md`` holds the promises beside their tests):

- **Group commit, not a timer.** The first call into an idle batcher starts a
  worker, which sends what is queued at once. While a transaction is in
  flight, new calls queue; when it settles, the worker sends everything
  queued (up to ``max_items``, the registry's 64) as the next one. An agent
  therefore waits for at most the transaction in flight and its own: two
  blocks' worth. ``window=`` adds a pause before each send, to gather more
  where blocks are rare; the default (0) never waits on a clock.
- **The worker is nobody's.** It is a daemon thread of its own, running the
  steps over the chain's blocking driver, whoever called first: a thread, or
  an asyncio task of any loop (which only awaits its outcome, never blocking
  the loop). A batch carries the calls of threads and of tasks of several
  loops, so no caller's loop may own its send: a worker that was a task of
  the first caller's loop was cancelled with that loop's teardown
  (``asyncio.run`` ending) while its transaction was in flight, failing every
  caller in it, a thread that was never interrupted included, with a bare
  ``CancelledError`` and leaving their leases live; and it stood still, with
  every later call queued behind it, once that loop stopped without closing
  (``asyncio.Runner().run``, ``loop.run_until_complete``). A blocking call
  made on a loop's thread is served too (it blocks that loop meanwhile, as
  any blocking call does).
- **The next batch waits for the callers just settled.** Agents call again
  as soon as a call returns (acquire, work, release, acquire): the worker
  takes the next batch once every caller of the settled transaction is back
  from its wait, so that their next calls join it instead of waiting for it
  in flight (with threads, a woken caller runs only when the GIL and the OS
  let it: taking the next batch at once left a share of them a transaction
  behind, at twice the latency). A caller that does not come back (its
  loop stopped) holds the next batch back for at most as long as the
  settled transaction took.
- **Whose holder.** The registry's ``msg.sender`` is the holder of every
  operation in a batch: a batch groups the calls of *one sender*
  (``registry.batched()`` batches the calls of ``registry.sender``). Agents
  holding different keys get one batcher each; a batch never acts for
  another account (no delegation is designed: it would let one key hold
  leases in another's name).
- **Not all or nothing.** Each operation runs as its lone call would at that
  point of the transaction, in the order queued; one the lone call would
  refuse is skipped and logged (``BatchOpRefused``, carrying the lone call's
  revert data, decoded here into the same typed error). The same resource
  twice in one batch is acted on twice, in order (a second acquisition by
  the sender re-acquires it, as two lone calls would).
- **Never twice, never silently.** Each call is taken from the queue once,
  under a lock, into exactly one transaction, sent through the chain's
  never-twice sender (:mod:`chainfence._node.sending`: late replies
  reconciled by hash, a cancellation on timeout, confirmations followed).
  When the transaction fails as a whole (mined with status 0, never mined,
  its outcome unknown, the node unreachable), every caller in it gets its own
  copy of that typed error, naming the transaction; nothing is resent.
- **No preflight, a gas bound instead.** A batch never reverts for an
  operation's sake, so a preflight could refuse only what the local checks
  already refuse; it would also underestimate the gas of operations that are
  refused at the estimate and go through when mined. The gas limit is
  :func:`gas_bound` of the operations (each kind's worst case, asserted in
  ``tests/chain/test_gas.py``); the sender pays for what is used. A refused
  operation costs its ``BatchOpRefused`` log (a lone call refused at its
  preflight costs nothing).
- **A batch fits the chain.** The worker takes as many queued operations as
  the latest block's gas limit holds at that bound (read with the fee quote
  the transaction carries); the rest go in the next batch. A batch the node
  refuses because the sender cannot pay for its gas limit (nothing was sent)
  goes back to the queue once the balance is read, and is taken again as
  what the balance pays for. An operation that cannot go even alone is
  refused for its caller only, typed (:class:`~chainfence.errors.InsufficientFunds`,
  or a :class:`~chainfence.errors.ChainError` naming the block's gas limit):
  a batch of N of which k fit is never N failures.
- **Interrupted callers.** A caller interrupted (``asyncio`` cancellation,
  ``KeyboardInterrupt``) while its operation is still queued withdraws it:
  nothing is sent for it. Once its transaction is on its way, the worker
  carries on (the other operations are not abandoned); the caller waits for
  the outcome, shielded, and releases a lease it acquired
  (:mod:`chainfence._sdk.interrupted`, as an interrupted lone acquisition does),
  then its interrupt goes on with a note naming what became of it.
- **Leases as any other.** A batched acquisition returns a plain
  :class:`~chainfence.Lease` whose renewals and release go through the
  batcher (``renew(progress=...)`` and ``complete`` are sent alone): ``keep()``,
  ``check()``, ``with lease:``, the guard and the audit see the very events a
  lone call logs.
"""

from __future__ import annotations

import enum
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, NamedTuple, TypeVar

from . import keepalive as _keepalive
from ._core import log as _log
from ._core import metrics as _metrics
from ._core.effects import RPC, Shielded, Signal, Sleep, Steps, Until
from ._core.faces import AsyncDriver, AsyncFace, SyncFace, awaiting, drives, local, mirrored
from ._node import artifacts as _artifacts
from ._node import events as _events
from ._node import reverts as _reverts
from ._node import sending as _sending
from ._node.abi import decode as abi_decode
from ._node.rlp import keccak256
from ._sdk import names as _names
from ._sdk import validate as _validate
from ._sdk.contract import MAX_MANY, RegistryContract
from ._sdk.interrupted import settle_steps
from .endings import End, Refusal, declare
from .errors import (
    ChainError,
    ChainfenceError,
    ChainRolledBack,
    InsufficientFunds,
    InvalidInput,
    LeaseError,
    NamespaceError,
    NodeUnreachable,
    NotConfirmed,
    OutcomeUnknown,
    TokenNotCurrent,
    TransactionFailed,
    TransactionTimeout,
)
from .lease import AsyncLease, Lease

logger = _log.get("chainfence.registry")

R = TypeVar("R")

__all__ = [
    "KINDS",
    "MAX_ITEMS",
    "AsyncBatchItem",
    "AsyncBatcher",
    "BatchItem",
    "Batcher",
    "batch_items_steps",
    "decode_batch",
    "encode_batch",
    "gas_bound",
    "is_batch",
    "items_of",
    "select_item",
]

#: Most operations one batch transaction carries (the registry's bound).
MAX_ITEMS = MAX_MANY

#: Gas limit of a batch: the transaction's own cost (21,000 intrinsic, the dispatcher, the loop, the
#: counter's write, its very first included) plus each operation's worst case (:func:`gas_bound`).
#: tests/chain/test_gas.py holds them to measurement (scripts/gas_report.py): the least gas limit of a
#: batch of the dearest items of each kind (an exclusive first acquisition in an address namespace under
#: every policy check, with a 128-byte name: 57,300 gas an item, 112,200 the first; a renewal reading its
#: namespace's maxTtl: 13,200; a release: 9,900), 1 and 64 of them, stays under the bound, and the bound of
#: 64 stays within 25 % of the gas they use (it was twice the dearest acquisition, more for renewals and
#: releases).
GAS_BASE = 60_000
GAS_PER_OPERATION = {"acquire": 66_000, "renew": 16_000, "release": 11_000}
#: What each byte of a name may add to an acquisition: calldata (16), its first ``ResourceNamed`` log
#: (8), hashing it twice, copying it and scanning it for its namespace (22.6 measured).
GAS_PER_NAME_BYTE = 26

#: Least time (seconds) the worker waits for the callers of a settled transaction to come back.
_MIN_COHORT_WAIT = 0.001


class _Kind(enum.IntEnum):
    """``IFencingRegistry.BatchKind``."""

    ACQUIRE = 0
    ACQUIRE_EXCLUSIVE = 1
    RENEW = 2
    RELEASE = 3


_QUEUED, _SENT, _DONE, _WITHDRAWN = "queued", "sent", "done", "withdrawn"


class _Item:
    """One operation of a batch: what it asks (the fields of ``IFencingRegistry.BatchOp``) and the name the
    caller knows its resource by."""

    __slots__ = ("kind", "name", "resource", "resource_id", "token", "ttl")

    def __init__(self, kind: _Kind, resource: str, resource_id: bytes, token: int, ttl: int):
        self.kind = kind
        self.resource = resource
        self.resource_id = resource_id
        self.token = token
        self.ttl = ttl
        #: The name sent to the registry (acquisitions only).
        self.name = resource if kind in (_Kind.ACQUIRE, _Kind.ACQUIRE_EXCLUSIVE) else ""

    @property
    def acquires(self) -> bool:
        return self.kind in (_Kind.ACQUIRE, _Kind.ACQUIRE_EXCLUSIVE)

    def what(self) -> str:
        if self.acquires:
            return f"the acquisition of {self.resource!r}"
        verb = "renewal" if self.kind is _Kind.RENEW else "release"
        return f"the {verb} of {self.resource!r} (token {self.token})"

    def encoded(self) -> tuple[int, str, bytes, int, int]:
        """``IFencingRegistry.BatchOp``: (kind, name, resource, token, ttl)."""
        if self.acquires:
            return int(self.kind), self.name, b"\0" * 32, 0, self.ttl
        return int(self.kind), "", self.resource_id, self.token, self.ttl if self.kind is _Kind.RENEW else 0


class _Op(_Item):
    """One caller's operation: what it asks, and the signal its outcome is set on."""

    __slots__ = ("abandoned", "cohort", "gone", "orphan", "outcome", "queued_at", "signal", "since", "state")

    def __init__(self, kind: _Kind, resource: str, resource_id: bytes, token: int, ttl: int):
        super().__init__(kind, resource, resource_id, token, ttl)
        self.signal = Signal()
        self.state = _QUEUED
        #: keepalive.lease_clock() when queued: no later than the send, so a keep-alive's safe deadline
        #: counted from it is never late.
        self.queued_at = _keepalive.lease_clock()
        #: The batcher's ``batches`` when this was queued (its wait, in transactions, is counted from it).
        self.since = 0
        #: The settled transaction's callers the worker waits for before it takes the next batch, while this
        #: op's caller has not come back from its wait (:meth:`Batcher._back`).
        self.cohort: _Cohort | None = None
        #: The caller no longer waits for this op's outcome (it came back, or was interrupted).
        self.gone = False
        #: The caller gave up on it while its transaction was in flight (interrupted twice): the worker
        #: releases what it acquired.
        self.abandoned = False
        #: Queued by the batcher itself (the release of an abandoned acquisition): nobody waits for it.
        self.orphan = False
        #: (value, error) once settled: set under the batcher's lock, with ``state`` done.
        self.outcome: tuple[Any, BaseException | None] | None = None

    def settle(self, value: Any, error: BaseException | None) -> None:
        """Set the outcome; the batcher's lock must be held (see :meth:`Batcher._settle`)."""
        self.state = _DONE
        self.outcome = (value, error)


class _Cohort:
    """The callers of one settled transaction that have not come back from their wait yet; ``back`` is set
    when the last one has."""

    __slots__ = ("back", "count")

    def __init__(self) -> None:
        self.count = 0
        self.back = Signal()


def encode_batch(ops: list[tuple[int, str, bytes, int, int]]) -> bytes:
    """The calldata of ``batchCalls(ops)``, each op ``(kind, name, resource, token, ttl)``, encoded by hand
    (byte for byte eth_abi's: tests/unit/test_batching.py): eth_abi's generic encoder took about 0.4 ms
    an operation, most of a batch's own time in the client. Arguments are checked by the caller."""
    selector = _artifacts.functions("FencingRegistry")["batchCalls"][0]
    heads: list[bytes] = []
    tails: list[bytes] = []
    offset = 32 * len(ops)  # element offsets count from the start of the array's contents (after its length)
    for kind, name, resource, token, ttl in ops:
        data = name.encode()
        element = b"".join(
            (
                kind.to_bytes(32, "big"),
                _TUPLE_HEAD.to_bytes(32, "big"),  # the name's offset within the element: after its five words
                bytes(resource).rjust(32, b"\0"),
                token.to_bytes(32, "big"),
                ttl.to_bytes(32, "big"),
                len(data).to_bytes(32, "big"),
                data,
                bytes(-len(data) % 32),
            )
        )
        heads.append(offset.to_bytes(32, "big"))
        tails.append(element)
        offset += len(element)
    return b"".join((selector, (32).to_bytes(32, "big"), len(ops).to_bytes(32, "big"), *heads, *tails))


#: Bytes of a BatchOp's head: kind, the name's offset, resource, token, ttl.
_TUPLE_HEAD = 5 * 32


class _Room(NamedTuple):
    """What a batch may spend: the latest block's gas limit, and the gas the sender's balance pays for at
    ``price`` (wei a gas) when it was read (None: not known)."""

    block: int | None
    funds: int | None
    price: int

    @property
    def limit(self) -> int:
        return min(each for each in (self.block, self.funds, 2**256) if each is not None)

    def refusal(self, op: _Item, need: int, sender: str) -> BaseException | None:
        """Why ``op`` (``need`` gas at its bound) cannot be sent even alone, typed; None if it can."""
        alone = GAS_BASE + need
        if self.block is not None and alone > self.block:
            return ChainError(
                f"{op.what()} needs up to {alone:,} gas in a batch of its own, above the block gas limit "
                f"{self.block:,}: it cannot be sent (nothing was)"
            )
        if self.funds is not None and alone > self.funds:
            return InsufficientFunds(
                f"{sender} cannot pay for {op.what()}: up to {alone:,} gas at {self.price:,} wei a gas, and its "
                f"balance pays for {self.funds:,} (nothing was sent)",
                account=sender,
            )
        return None


def _bound_of(op: _Item) -> tuple[str, int]:
    """``op`` as :func:`gas_bound` counts it: its kind and its name's length in bytes."""
    return "acquire" if op.acquires else op.kind.name.lower(), len(op.name.encode())


def _gas_of(op: _Item) -> int:
    """What ``op`` may add to a batch's gas limit (see :func:`gas_bound`)."""
    return gas_bound([_bound_of(op)]) - GAS_BASE


def gas_bound(kinds_and_names: list[tuple[str, int]]) -> int:
    """The gas limit of a batch of operations, each ``(kind, name length in bytes)`` ("acquire", "renew",
    "release"): every operation at its dearest, so that no state reached between the send and the
    block can make the batch run out of gas."""
    return GAS_BASE + sum(GAS_PER_OPERATION[kind] + GAS_PER_NAME_BYTE * length for kind, length in kinds_and_names)


class Batcher(SyncFace):
    """Group commit for the calls of one sender (see the module docstring): get it with
    :meth:`Registry.batched <chainfence.Registry.batched>`, share it between the agents (threads)
    that send as that account.

    :meth:`acquire`, :meth:`renew` and :meth:`release` take the arguments of the registry's lone
    calls and give each caller the lone call's result or typed error; the leases they return
    renew and release through the batcher.
    """

    def __init__(self, registry: RegistryContract, *, max_items: int = MAX_ITEMS, window: float = 0.0):
        if isinstance(max_items, bool) or not isinstance(max_items, int) or not 1 <= max_items <= MAX_ITEMS:
            raise InvalidInput(f"max_items must be an int from 1 to {MAX_ITEMS}, got {max_items!r}")
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not 0 <= window <= 10:
            raise InvalidInput(f"window must be 0 to 10 seconds, got {window!r}")
        #: The registry, sending as the account whose calls this batcher groups.
        self.registry = registry
        #: The account every operation is sent as, and the holder of every lease acquired.
        self.sender = registry._require_sender()
        self.max_items = max_items
        self.window = float(window)
        self._mutex = threading.Lock()
        self._queue: deque[_Op] = deque()
        self._working = False
        self._worker: Any = None
        #: Batch transactions settled, operations they carried, the largest batch: figures for a
        #: benchmark or a test (``batches`` counts blocks' worth: each batch is one transaction).
        self.batches = 0
        self.operations = 0
        self.largest = 0
        self._waited: dict[int, int] = {}
        self._clock = time.monotonic
        #: The gas the sender's balance pays for, read after the node refused a batch it could not pay for:
        #: the next batch is fitted to it (then it is forgotten); and whether the batch in flight was.
        self._funds: int | None = None
        self._fitted = False

    # -- what a lease asks of what it was acquired through (chainfence.lease.LeaseRegistry) ----------

    @property
    def chain(self) -> Any:
        return self.registry.chain

    def _drive(self, steps: Steps[R]) -> R:
        return self.registry._drive(steps)

    def connect(self, account: Any) -> Any:
        return self.registry.connect(account)

    def _renew_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, ttl: int, progress: Any, confirmations: int | None
    ) -> Steps[int]:
        if progress is not None or confirmations is not None:  # a marker, or a depth of its own: sent alone
            return (
                yield from self.registry._renew_by_id_steps(resource, resource_id, token, ttl, progress, confirmations)
            )
        token = _validate.token(token)
        ttl = _validate.ttl(ttl, (yield from self.registry._max_ttl_steps()))
        return (yield from self._submit_steps(_Op(_Kind.RENEW, resource, resource_id, token, ttl)))  # type: ignore[no-any-return]

    def _release_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, confirmations: int | None
    ) -> Steps[None]:
        if confirmations is not None:
            yield from self.registry._release_by_id_steps(resource, resource_id, token, confirmations)
            return
        token = _validate.token(token)
        yield from self._submit_steps(_Op(_Kind.RELEASE, resource, resource_id, token, 0))
        _metrics.lease_ended("released")

    def _complete_by_id_steps(
        self, resource: str, resource_id: bytes, token: int, result: bytes, confirmations: int | None
    ) -> Steps[bytes]:
        return (yield from self.registry._complete_by_id_steps(resource, resource_id, token, result, confirmations))

    def _token_is_current_steps(
        self, resource: str, token: int, *, block: str | int | None = None, resource_id: bytes | None = None
    ) -> Steps[bool]:
        return (yield from self.registry._token_is_current_steps(resource, token, block=block, resource_id=resource_id))

    def _successor_end_steps(self, resource_id: bytes, token: int, from_block: int) -> Steps[End]:
        return (yield from self.registry._successor_end_steps(resource_id, token, from_block))

    def _eip712_domain_steps(self) -> Any:
        return (yield from self.registry._eip712_domain_steps())

    # -- the operations ------------------------------------------------------------------------------

    def _acquire_steps(self, resource: str, ttl: int, *, exclusive: bool = False) -> Steps[Lease]:
        """The steps of :meth:`acquire`."""
        name = _validate.publishable(resource)
        if not isinstance(exclusive, bool):
            raise InvalidInput(f"exclusive must be a bool, got {type(exclusive).__name__} {exclusive!r}")
        ttl = _validate.ttl(ttl, (yield from self.registry._max_ttl_steps()))
        kind = _Kind.ACQUIRE_EXCLUSIVE if exclusive else _Kind.ACQUIRE
        lease: Lease = yield from self._submit_steps(_Op(kind, resource, keccak256(name), 0, ttl))
        logger.info(
            "acquired resource=%s token=%d holder=%s expires_at=%d reason=%s tx=%s (batched)",
            resource,
            lease.token,
            lease.holder,
            lease.expires_at,
            lease.reason.name.lower(),
            lease.tx_hash,
        )
        return lease

    @drives(_acquire_steps)
    def acquire(self, resource: str, ttl: int, *, exclusive: bool = False) -> Lease:
        """:meth:`Registry.acquire <chainfence.Registry.acquire>`, in a transaction shared with the other
        calls queued meanwhile: the lease (its own token, holder, event and reason), or the typed
        error the lone call raises (:class:`~chainfence.errors.LeaseHeld`,
        :class:`~chainfence.errors.LockDelayed`, :class:`~chainfence.errors.NotAdmitted`, ...) for
        this call only. ``exclusive=True``: the sender's own live lease refuses it too. Bad input
        raises at once (nothing queued). The lease renews and releases through this batcher.
        """
        return self._drive(self._acquire_steps(resource, ttl, exclusive=exclusive))

    def _renew_steps(self, resource: str, token: int, ttl: int) -> Steps[int]:
        """The steps of :meth:`renew`."""
        resource_id = _validate.resource_id(resource)
        expires_at: int = yield from self._renew_by_id_steps(resource, resource_id, token, ttl, None, None)
        logger.info("renewed resource=%s token=%d expires_at=%d (batched)", resource, token, expires_at)
        return expires_at

    @drives(_renew_steps)
    def renew(self, resource: str, token: int, ttl: int) -> int:
        """:meth:`Registry.renew <chainfence.Registry.renew>` (without a progress marker), batched: the
        new expiry, or the lone call's typed error for this call only."""
        return self._drive(self._renew_steps(resource, token, ttl))

    def _release_steps(self, resource: str, token: int) -> Steps[None]:
        """The steps of :meth:`release`."""
        resource_id = _validate.resource_id(resource)
        yield from self._release_by_id_steps(resource, resource_id, token, None)
        logger.info("released resource=%s token=%d (batched)", resource, token)

    @drives(_release_steps)
    def release(self, resource: str, token: int) -> None:
        """:meth:`Registry.release <chainfence.Registry.release>`, batched: an old token never frees a
        newer lease; the lone call's typed error for this call only."""
        self._drive(self._release_steps(resource, token))

    @contextmanager
    def lease(self, resource: str, ttl: int, *, exclusive: bool = False) -> Iterator[Lease]:
        """``with batcher.lease(name, ttl) as lease:`` acquire (batched), run the body, release (batched)."""
        with self.acquire(resource, ttl, exclusive=exclusive) as lease:
            yield lease

    @property
    def queued(self) -> int:
        """Operations waiting for the next transaction (not yet sent)."""
        with self._mutex:
            return len(self._queue)

    @property
    def waited(self) -> dict[int, int]:
        """How many transactions each operation waited for, its own included (1: it went out in the next
        one; 2: one was in flight when it was queued), as ``{transactions: operations}``: the latency of
        group commit in blocks' worth, counted by the batcher itself (operations whose transaction failed
        as a whole are not counted)."""
        with self._mutex:
            return dict(sorted(self._waited.items()))

    # -- a caller: queue, wait, and what an interrupt leaves --------------------------------------

    def _submit_steps(self, op: _Op) -> Steps[Any]:
        try:
            if self._enqueue(op):
                yield from self._start_steps()
            return (yield Until(op.signal))
        except BaseException as interrupt:
            self._back(op)
            if _sending.interrupted(interrupt):
                yield from self._interrupted_steps(op, interrupt)
            raise
        finally:
            self._back(op)

    def _start_steps(self) -> Steps[None]:
        """Start the worker (this caller queued into an idle batcher): a thread of its own, whatever the
        caller's driver (see "The worker is nobody's" in the module docstring). A worker that cannot start
        fails what is queued, each caller with a typed error (nothing was sent). An interrupt that lands
        while the worker starts (a thread's start waits for it) leaves it unknown whether it runs: another
        is started (two workers are harmless: each takes its own operations from the queue), and the
        interrupt goes on to the caller's own cleanup."""
        try:
            self._worker = self._spawn()
        except BaseException as failed:
            if not _sending.interrupted(failed):
                self._not_started(failed)
                return
            try:
                self._worker = self._spawn()
            except BaseException as again:
                self._not_started(again)
            raise
        return
        yield  # pragma: no cover - steps, as the caller's driver runs them

    def _spawn(self) -> threading.Thread:
        """A daemon thread running the worker's steps over the chain's blocking driver, started."""
        worker = threading.Thread(
            target=self.registry._drive,
            args=(self._work_steps(),),
            name=f"chainfence-batcher-{self.sender}",
            daemon=True,
        )
        worker.start()
        return worker

    def _back(self, op: _Op) -> None:
        """``op``'s caller no longer waits for it (its outcome came, or it was interrupted): one less for the
        worker to wait for before the next batch. A caller on an event loop is counted back once its task
        has run on to its next wait (a callback of its loop: the task's step ends first), so that an agent
        that calls again at once has queued that call when the worker takes the next batch."""
        with self._mutex:
            op.gone = True
            cohort, op.cohort = op.cohort, None
            if cohort is None:
                return
            cohort.count -= 1
            last = cohort.count == 0
        if last:
            _after_this_step(cohort.back.set)

    def _enqueue(self, op: _Op) -> bool:
        """Queue ``op``; True when no worker runs and the caller must start one. A worker that ended without
        saying so counts as none: the next caller starts another, instead of waiting for it forever."""
        with self._mutex:
            op.since = self.batches
            self._queue.append(op)
            if self._working and not _ended(self._worker):
                return False
            self._working = True
            self._worker = None  # being started (the caller sets it): alive until then
            return True

    def _not_started(self, failed: BaseException) -> None:
        """The worker could not be started: what is queued is failed (nothing was sent for it)."""
        with self._mutex:
            self._working = False
            orphans = list(self._queue)
            self._queue.clear()
        self._settle(
            orphans,
            [
                (
                    None,
                    ChainError(
                        f"{op.what()}: the batcher's worker could not start ({type(failed).__name__}): nothing was sent"
                    ),
                )
                for op in orphans
            ],
        )

    def _settle(self, ops: list[_Op], outcomes: list[tuple[Any, BaseException | None]]) -> list[_Op]:
        """Settle each op with its outcome: under the lock (a caller interrupted meanwhile sees either its
        outcome or that it must give up on it), then wake each caller. Returns the releases queued for
        acquisitions whose callers gave up on them (:meth:`_abandon`)."""
        releases: list[_Op] = []
        with self._mutex:
            for op, (value, error) in zip(ops, outcomes, strict=True):
                op.settle(value, error)
                if not op.abandoned:
                    continue
                lease = value if isinstance(value, Lease) else getattr(error, "lease", None)
                if isinstance(lease, Lease):
                    releases.append(self._orphan_release(lease))
                elif op.acquires and isinstance(error, OutcomeUnknown):
                    logger.error("%s, abandoned by its interrupted caller: %s", op.what(), _said(error))
        for op in ops:
            assert op.outcome is not None
            op.signal.set(*op.outcome)
            if op.orphan:
                _log_orphan(op)
        return releases

    def _orphan_release(self, lease: Lease) -> _Op:
        """Queue (the lock held) the release of ``lease``, acquired for a caller that gave up on it."""
        release = _Op(_Kind.RELEASE, lease.resource, lease.resource_id, lease.token, 0)
        release.orphan = release.gone = True
        release.since = self.batches
        self._queue.append(release)
        logger.warning(
            "the acquisition of %r was abandoned by its interrupted caller: releasing its token %d (tx %s)",
            lease.resource,
            lease.token,
            lease.tx_hash,
        )
        return release

    def _abandon(self, op: _Op) -> tuple[Any, BaseException | None] | None:
        """``op``'s caller gives up waiting (interrupted again): its outcome if it came already, else None,
        and the worker will release what it acquires."""
        with self._mutex:
            if op.outcome is not None:
                return op.outcome
            op.abandoned = True
            return None

    def _withdraw(self, op: _Op) -> bool:
        """Take ``op`` back if no transaction carries it yet (True: nothing will be sent for it)."""
        with self._mutex:
            if op.state != _QUEUED:
                return False
            self._queue.remove(op)
            op.state = _WITHDRAWN
            return True

    def _interrupted_steps(self, op: _Op, interrupt: BaseException) -> Steps[None]:
        """``op``'s caller was interrupted: withdraw it, or wait (shielded) for its transaction's outcome
        and release what it acquired; a note on ``interrupt`` says what became of it (with the transaction
        and the operation's item when it is not known)."""
        what = op.what()
        if self._withdraw(op):
            interrupt.add_note(f"chainfence: {what} was interrupted before its batch was sent: nothing was sent for it")
            return
        try:
            value, error = yield Shielded(_outcome_steps(op))
        except BaseException as again:
            outcome = self._abandon(op)
            if outcome is None:
                note = (
                    f"{what} was interrupted again ({type(again).__name__}) while its batch transaction was in "
                    "flight: the batcher settles it for the other operations"
                    + ("; what it acquires is released again by the batcher" if op.acquires else "")
                )
            else:
                value, error = outcome
                lease = value if isinstance(value, Lease) else getattr(error, "lease", None)
                if isinstance(lease, Lease):
                    interrupt.lease = lease  # type: ignore[attr-defined]
                note = f"{what} was interrupted again ({type(again).__name__}) as its outcome came: " + (
                    f"token {lease.token} (tx {lease.tx_hash}) was acquired and not released: it is this "
                    "exception's `lease`; release it"
                    if isinstance(lease, Lease)
                    else _said(error)
                )
            logger.error("%s", note)
            interrupt.add_note(f"chainfence: {note}")
            return
        lease = value if isinstance(value, Lease) else getattr(error, "lease", None)
        if isinstance(lease, Lease):  # acquired (with an error too: not deep enough, unchecked): release it
            yield from settle_steps(self.registry, interrupt, what, [lease], lambda _receipt: [])
            if error is not None:
                interrupt.add_note(f"chainfence: its batch said {type(error).__name__}: {error}")
            return
        if isinstance(error, OutcomeUnknown) and op.acquires:
            yield from self._reconcile_steps(op, error, interrupt)
            return
        interrupt.add_note(f"chainfence: {what} was interrupted after its batch transaction was sent: {_said(error)}")

    def _reconcile_steps(self, op: _Op, unknown: OutcomeUnknown, interrupt: BaseException) -> Steps[None]:
        """An interrupted acquisition whose batch's outcome is unknown: read its own item by hash (shielded),
        release its lease if the batch was mined, else say where to look."""
        what, item = op.what(), unknown.item
        where = ", ".join(f"registry.batch_item({tx_hash!r}, item={item})" for tx_hash in unknown.tx_hashes)
        try:
            found = yield Shielded(_item_lease_steps(self.registry, unknown.tx_hashes, item))
        except BaseException as failed:  # the node still does not answer, or a second interrupt
            found = None
            why = f"{type(failed).__name__}: {failed}"
        else:
            why = "not mined (yet)"
        if found is not None:
            yield from settle_steps(self.registry, interrupt, what, [found], lambda _receipt: [])
            return
        interrupt.add_note(
            f"chainfence: {what} was interrupted after its batch transaction was sent, and the batch's outcome is "
            f"unknown ({why}): it may hold a lease; look it up before acquiring again ({where}; nonce "
            f"{unknown.nonce} of {unknown.sender}) and release it"
        )

    # -- the worker: take what is queued, send it as one transaction, settle every caller -------------

    def _work_steps(self) -> Steps[None]:
        try:
            while True:
                if self.queued < self.max_items:
                    # The window, or a bare yield: the callers just settled run once before the next batch
                    # is taken, so that one that calls again at once joins it instead of the one after.
                    yield Sleep(self.window)
                room, self._funds = (yield from self._room_steps()), None
                batch = self._take(room)
                if not batch:
                    return
                self._fitted = room is not None and room.funds is not None
                started = self._clock()
                cohort = yield from self._commit_steps(batch)
                if cohort is not None:
                    # The next batch is taken once the callers just settled are back from their wait: a
                    # caller that calls again at once (the usual agent: acquire, work, release, acquire)
                    # then joins it rather than the one after. A caller that does not come back (its loop
                    # stopped) holds the next batch back for at most the time this one took.
                    try:
                        yield Until(cohort.back, timeout=max(self._clock() - started, _MIN_COHORT_WAIT))
                    except TimeoutError:
                        pass
        except BaseException as stopped:
            self._stopped(stopped)
            raise

    def _room_steps(self) -> Steps[_Room | None]:
        """What the next batch may spend (None: nothing is queued, or it cannot be known now: the send says).
        The latest block's gas limit comes with the fee quote the transaction will carry (cached: no
        request more, mostly); the gas the sender's balance pays is known only after the node refused a
        batch it could not pay for (:meth:`_commit_steps` reads the balance then)."""
        if not self.queued:
            return None
        sender = self.chain._sender
        try:
            fees = yield from sender.fees_steps()
        except ChainfenceError:
            return None
        return _Room(sender._block_gas_limit, self._funds, fees.get("maxFeePerGas", fees.get("gasPrice", 0)))

    def _take(self, room: _Room | None = None) -> list[_Op]:
        """The next batch: up to ``max_items`` queued operations, in order, as many as ``room`` holds at their
        :func:`gas_bound` (none: the worker stops). An operation that cannot go even alone (its bound
        above the block's gas limit, or above what the sender's balance pays) is refused, for its caller
        only, with a typed error (nothing is sent for it); the ones behind it go on."""
        unfit: list[tuple[_Op, BaseException]] = []
        with self._mutex:
            batch: list[_Op] = []
            gas = GAS_BASE
            while self._queue and len(batch) < self.max_items:
                op = self._queue[0]
                need = _gas_of(op)
                refusal = room.refusal(op, need, self.sender) if room is not None else None
                if refusal is not None:
                    self._queue.popleft()
                    op.state = _SENT
                    unfit.append((op, refusal))
                    continue
                if room is not None and gas + need > room.limit:
                    break  # it goes in the next batch
                self._queue.popleft()
                op.state = _SENT
                batch.append(op)
                gas += need
            if not batch:
                self._working = False
        if unfit:
            self._settle([op for op, _error in unfit], [(None, error) for _op, error in unfit])
        return batch

    def _requeue(self, batch: list[_Op]) -> None:
        """Put ``batch`` back at the head of the queue, in order (nothing of it was sent)."""
        with self._mutex:
            for op in reversed(batch):
                op.state = _QUEUED
                self._queue.appendleft(op)

    def _stopped(self, stopped: BaseException) -> None:
        """The worker stopped on an error of its own: what is still queued is failed, nothing sent."""
        with self._mutex:
            self._working = False
            left = list(self._queue)
            self._queue.clear()
        self._settle(
            left,
            [
                (
                    None,
                    ChainError(
                        f"{op.what()}: the batcher's worker was stopped ({type(stopped).__name__}): nothing was sent"
                    ),
                )
                for op in left
            ],
        )

    def _commit_steps(self, batch: list[_Op]) -> Steps[_Cohort | None]:
        """Send ``batch`` and settle each caller. A batch the node refused because the sender cannot pay for
        its gas limit (nothing was sent: the sender asks for its own hash before it believes the words)
        goes back to the queue once the balance is read, to be taken again as what it pays for
        (:meth:`_take`); refused again as taken so, it fails as a whole."""
        try:
            outcomes = yield from self._send_steps(batch)
        except BaseException as failed:  # the transaction as a whole: each caller its own copy
            if isinstance(failed, InsufficientFunds) and not self._fitted:
                funds = yield from self._funds_steps()
                if funds is not None:
                    self._funds = funds
                    self._requeue(batch)
                    _metrics.batch_sent(_kinds(batch), "requeued")
                    return None
            _metrics.batch_sent(_kinds(batch), "failed")
            self._settle(batch, [(None, _own_copy(failed, op, batch)) for op in batch])
            if _sending.interrupted(failed):
                raise
            return None
        cohort = _Cohort()
        with self._mutex:
            for op in batch:
                waited = self.batches - op.since
                self._waited[waited] = self._waited.get(waited, 0) + 1
                if not op.gone:
                    op.cohort = cohort
                    cohort.count += 1
        _metrics.batch_sent(_kinds(batch), "mined", [error for _value, error in outcomes])
        self._settle(batch, outcomes)
        return cohort if cohort.count else None

    def _funds_steps(self) -> Steps[int | None]:
        """The gas the sender's balance pays for at the fee the next batch carries (None: not known)."""
        try:
            fees = yield from self.chain._sender.fees_steps()
            balance = yield RPC.balance(self.sender, "pending")
        except ChainfenceError:
            return None
        price = fees.get("maxFeePerGas", fees.get("gasPrice", 0))
        return int(balance) // price if price > 0 else None

    def _send_steps(self, batch: list[_Op]) -> Steps[list[tuple[Any, BaseException | None]]]:
        registry = self.registry
        seen = registry._seen()
        before = {id(op): seen.before(op.resource_id) for op in batch if op.acquires}
        data = encode_batch([op.encoded() for op in batch])
        gas = gas_bound([_bound_of(op) for op in batch])
        unconfirmed: NotConfirmed | None = None
        try:
            receipt = yield from registry.chain._transact_steps(self.sender, registry.address, data, gas=gas)
        except NotConfirmed as shallow:  # mined, not deep enough in time: each caller learns it, with its lease
            if shallow.receipt is None or shallow.receipt["status"] != 1:
                raise
            receipt, unconfirmed = shallow.receipt, shallow
        outcomes = self._outcomes(batch, receipt)
        with self._mutex:
            self.batches += 1
            self.operations += len(batch)
            self.largest = max(self.largest, len(batch))
        k = self.chain.confirmations
        for index, (op, (value, error)) in enumerate(zip(batch, outcomes, strict=True)):
            if not isinstance(value, Lease):
                if unconfirmed is not None:  # not final yet, a refusal neither: a reorg may mine it otherwise
                    own = _own_copy(unconfirmed, op, batch)
                    if error is not None:
                        own.__cause__ = error
                        own.add_note(f"chainfence: {op.what()} was refused as the transaction was mined: {error}")
                    outcomes[index] = (None, own)
                continue
            value._sent_at = op.queued_at
            value._via = self
            if unconfirmed is not None:
                own = _own_copy(unconfirmed, op, batch)
                own.lease = value  # type: ignore[attr-defined]
                outcomes[index] = (None, own)
                continue
            try:
                seen.lease(
                    before[id(op)], value.resource_id, value.token, value.holder, op.resource, issued=True, record=True
                )
            except ChainRolledBack as rolled_back:
                rolled_back.lease = value
                outcomes[index] = (None, rolled_back)
                continue
            if k:  # as a lone acquisition: the lease may have ended while the batch got deep enough
                try:
                    yield from registry._check_token_steps(op.resource, value.token)
                except TokenNotCurrent as lost:
                    lost.add_note(f"acquired in block {value.block_number}, lost before {k} confirmations")
                    outcomes[index] = (None, lost)
                except ChainError as unchecked:
                    unchecked.lease = value
                    unchecked.add_note(
                        f"token {value.token} was acquired (tx {value.tx_hash}) but could not be checked afterwards; "
                        "the error's `lease` is it: release it or use it"
                    )
                    outcomes[index] = (None, unchecked)
        return outcomes

    def _outcomes(self, batch: list[_Op], receipt: Any) -> list[tuple[Any, BaseException | None]]:
        return _read_outcomes(self.registry, batch, receipt, self.sender)

    def __repr__(self) -> str:
        return f"<Batcher {self.registry.address} sender={self.sender} queued={self.queued} batches={self.batches}>"


def _read_outcomes(
    registry: RegistryContract, items: Sequence[_Item], receipt: Any, holder: str
) -> list[tuple[Any, BaseException | None]]:
    """Each operation's outcome, read from the registry's logs in ``receipt`` in order: its lone call's
    events (an acquisition's lease, a renewal's expiry, a release's None), or its ``BatchOpRefused``
    decoded into the lone call's error. ``holder``: the batch's sender, the holder of what it acquired.
    Logs that do not match the operations are a ChainError: nothing is guessed."""
    tx_hash = receipt["transactionHash"].to_0x_hex()
    logs = [
        entry
        for entry in (_events.decode(log) for log in receipt["logs"] if log["address"] == registry.address)
        if entry is not None
    ]
    outcomes: list[tuple[Any, BaseException | None]] = []
    position = 0

    def take(kind: _events.Kind, item: _Item) -> _events.RegistryLog:
        nonlocal position
        entry = logs[position] if position < len(logs) else None
        if entry is None or entry.kind is not kind or entry.resource_id != item.resource_id:
            raise ChainError(
                f"batch transaction {tx_hash} logged events that do not match its operations (at {item.what()}): "
                "look it up before acting again"
            )
        position += 1
        return entry

    for index, item in enumerate(items):
        entry = logs[position] if position < len(logs) else None
        if entry is not None and entry.kind is _events.Kind.REFUSED and entry.index == index:
            take(_events.Kind.REFUSED, item)
            error = _reverts.decode(entry.refusal or b"")
            if isinstance(error, LeaseError):
                error.with_resource(item.resource)
            outcomes.append((None, error))
        elif item.acquires:
            if entry is not None and entry.kind is _events.Kind.NAMED:
                take(_events.Kind.NAMED, item)
            acquired = take(_events.Kind.ACQUIRED, item)
            if acquired.holder != holder:
                raise ChainError(f"batch transaction {tx_hash} acquired {item.resource!r} for {acquired.holder}")
            lease = Lease._from_event(registry, acquired, receipt, resource=item.resource, ttl=item.ttl)
            outcomes.append((lease, None))
        elif item.kind is _Kind.RENEW:
            outcomes.append((take(_events.Kind.RENEWED, item).expires_at, None))
        else:
            take(_events.Kind.RELEASED, item)
            outcomes.append((None, None))
    if position != len(logs):
        raise ChainError(f"batch transaction {tx_hash} logged more events than its operations account for")
    return outcomes


def _kinds(batch: list[_Op]) -> list[str]:
    """Each operation's kind as the metrics name it (an exclusive acquisition is an acquisition)."""
    return ["acquire" if op.acquires else op.kind.name.lower() for op in batch]


def _outcome_steps(op: _Op) -> Steps[tuple[Any, BaseException | None]]:
    """Wait for ``op``'s outcome: (value, None), or (None, its error) without raising it."""
    try:
        value = yield Until(op.signal)
    except Exception as error:
        return None, error
    return value, None


def _said(error: BaseException | None) -> str:
    """What became of an operation, in words, from its error (None: it went through)."""
    if error is None:
        return "it went through"
    if isinstance(error, OutcomeUnknown):
        where = ", ".join(f"registry.batch_item({tx_hash!r}, item={error.item})" for tx_hash in error.tx_hashes)
        return f"its batch's outcome is unknown ({error}): look it up before acting again ({where})"
    if isinstance(error, NotConfirmed):
        return f"its batch was mined, not yet final ({error})"
    if isinstance(error, TransactionTimeout):
        return f"its batch was cancelled: nothing happened ({error})"
    if isinstance(error, (TransactionFailed, NodeUnreachable)):
        return f"its batch failed as a whole: nothing happened for it ({type(error).__name__}: {error})"
    if isinstance(error, (LeaseError, NamespaceError)):
        return f"it was refused ({type(error).__name__}: {error})"
    return f"it failed ({type(error).__name__}: {error})"


def _log_orphan(op: _Op) -> None:
    assert op.outcome is not None
    _value, error = op.outcome
    if error is None:
        logger.warning(
            "released %r token %d again (its acquisition's caller had given up on it)", op.resource, op.token
        )
    else:
        logger.error(
            "could not release %r token %d, acquired for a caller that gave up on it: %s: %s",
            op.resource,
            op.token,
            type(error).__name__,
            error,
        )


def _after_this_step(callback: Any) -> None:
    """``callback()`` once the current task's step ends, on an event loop running in this thread (a soon
    callback of the loop); at once elsewhere."""
    asyncio = sys.modules.get("asyncio")  # not imported: no loop runs (issue #19: the CLI imports this module)
    if asyncio is not None:
        try:
            asyncio.get_running_loop().call_soon(callback)
        except RuntimeError:
            pass
        else:
            return
    callback()


def _ended(worker: Any) -> bool:
    """Whether ``worker`` (its thread; None while it is being started; an asyncio task where a test starts
    it as one) has ended."""
    if worker is None:
        return False
    done = getattr(worker, "done", None)  # an asyncio task
    if done is not None:
        return bool(done())
    return not worker.is_alive()  # a thread


def _item_lease_steps(registry: RegistryContract, tx_hashes: Sequence[str], item: int | None) -> Steps[Lease | None]:
    """The lease item ``item`` of whichever of ``tx_hashes`` is a mined batch acquired, or None."""
    for tx_hash in tx_hashes:
        items = yield from batch_items_steps(registry, tx_hash)
        if items is not None and item is not None and 0 <= item < len(items):
            lease: Lease | None = items[item].lease
            return lease
    return None


def _own_copy(error: BaseException, op: _Op, batch: list[_Op]) -> BaseException:
    """A copy of ``error`` (the whole transaction's) for one caller of ``batch``, noted so; an error naming
    the transaction (OutcomeUnknown, NotConfirmed, TransactionTimeout) says which item is the caller's
    (``item``), so that it can learn its own outcome by hash (:meth:`Registry.batch_item`)."""
    index = next(position for position, each in enumerate(batch) if each is op)
    import copy  # here: only a failed batch copies its error (issue #19: the CLI's registry imports this module)

    try:
        own = copy.copy(error)
    except Exception:  # an exception class that cannot be copied: the one instance, shared
        own = error
    else:
        own.__cause__, own.__context__ = error.__cause__, error.__context__
        own.__traceback__ = error.__traceback__
        notes = getattr(error, "__notes__", None)
        if notes is not None:
            own.__notes__ = list(notes)
        if isinstance(own, (OutcomeUnknown, NotConfirmed, TransactionTimeout)):
            own.item = index
            tx_hash = own.tx_hash or ""
            own.add_note(
                f"chainfence: {op.what()} is item {index} of batch transaction {tx_hash}: its own outcome is "
                f"registry.batch_item({tx_hash!r}, item={index}) (chainfence tx {tx_hash} --item {index})"
            )
    if len(batch) > 1:
        own.add_note(
            f"chainfence: {op.what()} was one of {len(batch)} operations of one batch transaction: its outcome"
        )
    return own


# ----------------------------------------------------------------------
# A batch transaction read back by its hash: each item's own outcome
# ----------------------------------------------------------------------

#: The kinds of operation, as :attr:`BatchItem.kind` names them.
KINDS = ("acquire", "acquire_exclusive", "renew", "release")


class BatchItem:
    """What one operation of a mined ``batchCalls`` transaction came to, read back from the chain by the
    transaction's hash (:meth:`Registry.batch_item <chainfence.Registry.batch_item>`): an agent whose
    batch's reply was lost, or a process restarted, learns its own operation's outcome, never another's.

    ``item`` is its position in the batch (what :attr:`OutcomeUnknown.item
    <chainfence.errors.OutcomeUnknown>` names). An acquisition's ``lease`` is its own (token, holder,
    reason, ``LeaseAcquired`` event); a renewal's ``expires_at`` its new expiry; ``error`` the typed
    refusal the lone call raises (:class:`~chainfence.errors.LeaseHeld`,
    :class:`~chainfence.errors.StaleToken`, ...) when the registry refused that operation alone.
    :meth:`result` gives the lease (or the expiry, or None for a release), or raises the refusal.
    """

    __slots__ = ("error", "expires_at", "item", "kind", "lease", "resource", "resource_id", "token", "ttl", "tx_hash")

    def __init__(
        self,
        *,
        tx_hash: str,
        item: int,
        kind: str,
        resource: str,
        resource_id: bytes,
        token: int,
        ttl: int,
        lease: Lease | None = None,
        expires_at: int | None = None,
        error: BaseException | None = None,
    ):
        #: The batch transaction.
        self.tx_hash = tx_hash
        #: The operation's position in the batch (0 first).
        self.item = item
        #: "acquire", "acquire_exclusive", "renew" or "release".
        self.kind = kind
        #: The resource's name (an acquisition's, from the transaction; for a renewal or a release the
        #: name the caller gave, else the id in hex: the transaction carries only the id).
        self.resource = resource
        self.resource_id = resource_id
        #: The token a renewal or a release named (an acquisition's: its lease's token, 0 if refused).
        self.token = token
        #: The ttl asked (acquisitions and renewals).
        self.ttl = ttl
        #: An acquisition's lease (None if it was refused).
        self.lease = lease
        #: A renewal's new expiry (None if it was refused).
        self.expires_at = expires_at
        #: The registry's refusal of this operation alone, typed as the lone call's; None if it went through.
        self.error = error

    @property
    def refused(self) -> bool:
        """Whether the registry refused this operation (see :attr:`error`)."""
        return self.error is not None

    def result(self) -> Any:
        """The lease (an acquisition), the new expiry (a renewal) or None (a release); raises the typed
        refusal instead if the registry refused this operation."""
        if self.error is not None:
            raise self.error
        if self.kind in ("acquire", "acquire_exclusive"):
            return self.lease
        return self.expires_at

    def __repr__(self) -> str:
        outcome = (
            f"refused: {type(self.error).__name__}"
            if self.error is not None
            else f"token {self.lease.token}"
            if self.lease is not None
            else "done"
        )
        return f"<BatchItem {self.tx_hash} item {self.item}: {self.kind} {self.resource!r}, {outcome}>"


class AsyncBatchItem(AsyncFace[BatchItem], core=BatchItem):
    """:class:`BatchItem` as the asyncio SDK hands it out: its ``lease`` an :class:`~chainfence.aio.AsyncLease`."""

    def __init__(self, driver: Any, item: BatchItem):
        self._item = item
        self._on = driver

    @property
    def _core(self) -> BatchItem:
        return self._item

    @property
    def _driver(self) -> AsyncDriver:
        return self._on  # type: ignore[no-any-return]

    @classmethod
    def _from_core(cls, core: BatchItem, driver: AsyncDriver) -> AsyncBatchItem:
        return cls(driver, core)

    tx_hash = mirrored("tx_hash")
    item = mirrored("item")
    kind = mirrored("kind")
    resource = mirrored("resource")
    resource_id = mirrored("resource_id")
    token = mirrored("token")
    ttl = mirrored("ttl")
    lease = mirrored("lease")
    expires_at = mirrored("expires_at")
    error = mirrored("error")
    refused = mirrored("refused")
    result = local(BatchItem.result)

    def __repr__(self) -> str:
        return "<Async" + repr(self._item)[1:]


#: ``IFencingRegistry.BatchOp[]`` with the name read as bytes (a name on chain need not be UTF-8).
_BATCH_OPS = ["(uint8,bytes,bytes32,uint256,uint256)[]"]


def decode_batch(data: bytes) -> list[tuple[int, bytes, bytes, int, int]]:
    """The operations of ``batchCalls`` calldata (selector included), each ``(kind, name, resource, token,
    ttl)`` with the name as bytes: the inverse of :func:`encode_batch`. Anything else raises ChainError."""
    if data[:4] != _artifacts.functions("FencingRegistry")["batchCalls"][0]:
        raise ChainError("not a batchCalls transaction")
    try:
        (ops,) = abi_decode(_BATCH_OPS, data[4:])
    except ValueError as bad:
        raise ChainError(f"batchCalls calldata that does not decode: {bad}") from None
    if any(kind >= len(KINDS) for kind, *_rest in ops):
        raise ChainError("batchCalls calldata with an operation of an unknown kind")
    return [(kind, bytes(name), bytes(resource), token, ttl) for kind, name, resource, token, ttl in ops]


def batch_items_steps(registry: RegistryContract, tx_hash: str, *, resource: str | None = None) -> Steps[Any]:
    """Every operation of the ``batchCalls`` transaction ``tx_hash`` sent to ``registry``, with its own
    outcome read from the receipt (a list of :class:`BatchItem`, in order), or None when there is nothing
    to read: not mined (yet), mined reverted (status 0: none of its operations did anything), or not a
    batch of this registry. ``resource``: the name renewals and releases of that resource are shown by."""
    tx_hash = _tx_hash(tx_hash)
    if resource is not None:
        _resource_id(resource)
    receipt = yield RPC.receipt(tx_hash)
    if receipt is None:
        return None
    tx = yield RPC.transaction(tx_hash)
    return items_of(registry, tx_hash, receipt, tx, resource=resource)


def is_batch(tx: Any) -> bool:
    """Whether ``tx`` (a transaction as the node gives it) calls ``batchCalls``."""
    return bytes(tx.get("input") or b"")[:4] == _artifacts.functions("FencingRegistry")["batchCalls"][0]


def items_of(
    registry: RegistryContract, tx_hash: str, receipt: Any, tx: Any, *, resource: str | None = None
) -> list[BatchItem] | None:
    """:func:`batch_items_steps` once the receipt and the transaction are read."""
    if tx is None or receipt is None or receipt["status"] != 1 or tx.get("to") != registry.address or not is_batch(tx):
        return None
    named = _resource_id(resource) if resource is not None else None
    items: list[_Item] = []
    for kind, name, resource_id, token, ttl in decode_batch(bytes(tx["input"])):
        if kind in (_Kind.ACQUIRE, _Kind.ACQUIRE_EXCLUSIVE):
            shown = _names.decode(name) or _names.display(name)
            resource_id = keccak256(name)
        else:
            shown = resource if resource is not None and resource_id == named else "0x" + resource_id.hex()
        items.append(_Item(_Kind(kind), shown, resource_id, token, ttl))
    outcomes = _read_outcomes(registry, items, receipt, _validate.address(tx["from"], "sender"))
    read = []
    for index, (item, (value, error)) in enumerate(zip(items, outcomes, strict=True)):
        lease = value if isinstance(value, Lease) else None
        read.append(
            BatchItem(
                tx_hash=tx_hash,
                item=index,
                kind=KINDS[item.kind],
                resource=item.resource,
                resource_id=item.resource_id,
                token=lease.token if lease is not None else item.token,
                ttl=item.ttl,
                lease=lease,
                expires_at=value if item.kind is _Kind.RENEW and error is None else None,
                error=error,
            )
        )
    return read


def select_item(
    items: list[BatchItem], tx_hash: str, *, item: int | None, resource: str | None, acquisitions: bool = False
) -> BatchItem:
    """The one operation the caller asks for: ``item`` (its position, which :attr:`OutcomeUnknown.item
    <chainfence.errors.OutcomeUnknown>` gives), or the only one on ``resource`` (an acquisition only,
    with ``acquisitions``), or the only one of the batch. Anything that could name another's is refused
    with :class:`~chainfence.errors.InvalidInput`: never a guess."""
    if item is not None:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < len(items):
            raise InvalidInput(f"item must be an int from 0 to {len(items) - 1} (the batch {tx_hash}), got {item!r}")
        chosen = items[item]
        if resource is not None and chosen.resource_id != _resource_id(resource):
            raise InvalidInput(
                f"item {item} of batch {tx_hash} is {chosen.kind} of {chosen.resource!r}, not of {resource!r}"
            )
        return chosen
    candidates = [
        each
        for each in items
        if (resource is None or each.resource_id == _resource_id(resource))
        and (not acquisitions or each.kind in ("acquire", "acquire_exclusive"))
    ]
    if len(candidates) == 1:
        return candidates[0]
    what = "acquisitions" if acquisitions else "operations"
    if not candidates:
        on = f" of {resource!r}" if resource is not None else ""
        raise InvalidInput(f"batch {tx_hash} holds no {what}{on}")
    positions = ", ".join(str(each.item) for each in candidates)
    on = f" of {resource!r}" if resource is not None else ""
    raise InvalidInput(f"batch {tx_hash} holds {len(candidates)} {what}{on} (items {positions}): say which with item=")


def _resource_id(resource: str) -> bytes:
    return _validate.resource_id(resource)


def _tx_hash(value: object) -> str:
    """A transaction hash as 0x and 64 lower-case hex digits (given so, or as its 32 bytes)."""
    if isinstance(value, (bytes, bytearray)) and len(value) == 32:
        return "0x" + bytes(value).hex()
    if not isinstance(value, str) or len(value) != 66 or not value.startswith("0x"):
        raise InvalidInput(f"a transaction hash is 0x and 64 hex digits, got {value!r}")
    try:
        bytes.fromhex(value[2:])
    except ValueError:
        raise InvalidInput(f"a transaction hash is 0x and 64 hex digits, got {value!r}") from None
    return value.lower()


# ----------------------------------------------------------------------
# One batcher per (chain, registry, sender, settings): every agent of the process shares it
# ----------------------------------------------------------------------

_SHARED_LOCK = threading.Lock()


def batcher_of(registry: RegistryContract, *, max_items: int = MAX_ITEMS, window: float = 0.0) -> Batcher:
    """The batcher of ``registry``'s sender with these settings (made on first use, then shared)."""
    batcher = Batcher(registry, max_items=max_items, window=window)  # checks the arguments first
    key = (registry.address, batcher.sender, batcher.max_items, batcher.window)
    with _SHARED_LOCK:
        table: dict[Any, Batcher] = registry.chain.__dict__.setdefault("_batchers", {})
        return table.setdefault(key, batcher)


class AsyncBatcher(AsyncFace[Batcher], core=Batcher):
    """:class:`Batcher` for asyncio tasks (:meth:`AsyncRegistry.batched
    <chainfence.aio.AsyncRegistry.batched>`): the same steps, awaited; leases come back as
    :class:`~chainfence.aio.AsyncLease`."""

    def __init__(self, chain: Any, batcher: Batcher):
        #: The :class:`~chainfence.aio.AsyncChain` the steps run over.
        self.chain = chain
        #: The batcher whose queue, worker and figures this face shares.
        self.batcher = batcher

    @property
    def _core(self) -> Batcher:
        return self.batcher

    @property
    def _driver(self) -> AsyncDriver:
        return self.chain  # type: ignore[no-any-return]

    @classmethod
    def _from_core(cls, core: Batcher, driver: AsyncDriver) -> AsyncBatcher:
        return cls(driver, core)

    sender = mirrored("sender")
    max_items = mirrored("max_items")
    window = mirrored("window")
    queued = mirrored("queued")
    batches = mirrored("batches")
    operations = mirrored("operations")
    largest = mirrored("largest")
    waited = mirrored("waited")

    acquire = awaiting(Batcher.acquire, AsyncLease)
    renew = awaiting(Batcher.renew)
    release = awaiting(Batcher.release)

    @asynccontextmanager
    async def lease(self, resource: str, ttl: int, *, exclusive: bool = False) -> AsyncIterator[AsyncLease]:
        """``async with batcher.lease(name, ttl) as lease:`` acquire (batched), run the body, release (batched)."""
        async with await self.acquire(resource, ttl, exclusive=exclusive) as lease:
            yield lease

    def __repr__(self) -> str:
        return "<Async" + repr(self.batcher)[1:]


declare(
    "batching",
    __name__,
    {
        Refusal.HELD: "a batched acquisition of a resource someone else holds live (or, exclusive, the sender "
        "itself): that caller alone gets LeaseHeld, the lone call's error; the others in its transaction go on",
        Refusal.LOCK_DELAYED: "an expired lease's lock-delay still runs: that caller alone gets LockDelayed "
        "(its `until`); no wait, the batcher never retries",
        Refusal.NOT_ADMITTED: "the namespace does not admit the sender: that caller alone gets NotAdmitted",
        End.EXPIRED: "a batched renewal or release of an expired lease: that caller gets LeaseExpired "
        "(from_error: expired); a kept lease's keep-alive loses it (why='expired')",
        End.RELEASED: "released already (by this holder or through the lone path): LeaseReleased for that caller",
        End.COMPLETED: "a completed work item's lease: LeaseCompleted for that caller",
        End.SUPERSEDED: "the sender re-acquired the resource (a higher token): StaleToken for the old token's "
        "caller; an earlier operation of the same batch can be the one that re-acquired it",
        End.REVOKED: "the namespace's admin revoked it: LeaseRevoked for that caller",
        End.GRANTED: "the admin granted the resource to another: StaleToken for that caller (Registry.ending "
        "and the keep-alive name it granted)",
        End.ROLLED_BACK: "the chain forgot the token: UnknownToken above the resource's latest for that caller "
        "(from_error: rolled_back)",
    },
    holds=True,
    waits=True,
)
