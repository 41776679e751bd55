"""The downstream side: accept or reject work by fencing token, with durable high-water marks.

A service puts one line before every write it protects::

    guard = Guard(registry, path="guard.sqlite")

    def write_report(token, body):
        guard.check("reports/daily", token)     # raises TokenNotCurrent if stale
        storage.put("reports/daily", body)

The guard keeps, per resource, the highest token it has accepted (the
*mark*) in a SQLite file (:mod:`chainfence.guard._store`), with the holder
of that token. Four modes, chosen at construction (``mode=``: a name, or a
value carrying the mode's settings, :mod:`chainfence.guard._config`):

``mark`` (default; :class:`Mark`): local marks, the chain asked only about news.
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

``follow`` (:class:`Follow`): ``mark``, plus a follower thread that reads the registry's
    ``LeaseAcquired`` events (``eth_getLogs`` in pages a provider accepts,
    every ``Follow(interval=)`` seconds, confirmed blocks only) and raises marks
    as soon as a lease is issued, so a stale holder is rejected even before
    the new holder writes anything. Nothing anyone can put on-chain stops it
    (names are read as untrusted bytes). While the follower is behind — its
    last attempt failed, or it has not caught up for ``Follow(max_lag=)`` seconds —
    checks at the mark are verified on-chain as in ``strict`` mode, so a
    follower in trouble never silently becomes ``mark`` mode; ``staleness()``
    and ``follow_status()`` report it.

``proven`` (:class:`Proven`): ``strict``, believing no provider.
    ``Guard(registry, path, mode=Proven(QuorumHeaders([...], k=...)))`` (or
    ``Proven(TrustedHeaders(url))``, one endpoint trusted for headers): every check
    proves the resource's lease slot with ``eth_getProof`` (from
    ``Proven(proofs=)``, default the registry's node; it need not be honest)
    against the header the source vouches for, and judges it as ``strict``
    does (:mod:`chainfence.proofs`). An answer that does not verify is a
    typed refusal that names the provider and moves no mark
    (:class:`~chainfence.errors.ProofInvalid`,
    :class:`~chainfence.errors.HeadersDisagree`,
    :class:`~chainfence.errors.HeaderStale`,
    :class:`~chainfence.errors.HeaderBehind`,
    :class:`~chainfence.errors.ProviderUnavailable`); eth-tester, which
    serves no proofs, is :class:`~chainfence.errors.ProofsNotServed` when
    the guard opens. With ``Mark(headers=)`` or ``Follow(headers=)``, the chain
    reads of ``mark`` and ``follow`` are proven too, and the follower follows the source's head,
    refuses logs from blocks it does not vouch for and proves a page before
    writing it (:mod:`chainfence.guard._follower`). Cost: each provider's
    head and one ``eth_getProof`` per check (``docs/benchmarks.md``, "Guard checks").

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
  :class:`~chainfence.errors.GuardError` (``forked_from``) instead of answering from a
  frozen copy of the owner's memory.

A check and the write that follows it are two steps: a holder superseded
between them can still complete that one write. Make the write itself
conditional on the token where that matters (:mod:`chainfence.integrations.sql` does it
in one database transaction; :class:`~chainfence.FencedStore` on-chain).

Reorgs: fencing tokens are a chain's counter, so a reorg can give the same
number to another holder. With ``confirmations=k`` (default: the chain's
setting; 0 on dev chains) a token becomes a mark only once the block that
issued it has ``k`` blocks on top (:class:`~chainfence.errors.TokenNotConfirmed`
until then). A reorg deeper than ``k`` is a rollback (above).

Holder-signed requests (:meth:`Guard.check_request`): see
:mod:`chainfence.fenced_requests`.

asyncio: :class:`AsyncGuard` (also ``chainfence.aio.AsyncGuard``) offers
every operation of a :class:`Guard`, awaited; the guard's own code runs in a
worker thread (see the class).

Admission (``admission=``): a guard can also require that the token's holder
be one the service accepts, from a local list or from the namespace's
on-chain allowlist (:mod:`chainfence.guard.admission`, and there how soon an
on-chain removal takes effect in each mode). A holder refused gets
:class:`~chainfence.errors.NotAdmitted`; nothing is recorded.

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

from ._async import AsyncGuard
from ._config import Follow, Mark, Proven, RequestPolicy
from ._follower import FollowStatus
from ._guard import MODES, Guard
from .admission import Admission

# Where each part lives: _guard (the Guard: modes, check, marks, the rollback latch, lifetime),
# _config (its settings as values: the modes, the request policy), _follower (follow mode), _requests (holder-signed requests, the replay table), _admission_cache
# (the admission policy's answers), _store (the SQLite file), _verdict (a check's finding), _async
# (AsyncGuard), admission (the Admission policy).
__all__ = ["MODES", "Admission", "AsyncGuard", "Follow", "FollowStatus", "Guard", "Mark", "Proven", "RequestPolicy"]
