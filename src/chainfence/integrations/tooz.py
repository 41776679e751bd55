"""A tooz coordination driver whose locks are chainfence leases.

Installed with the ``[tooz]`` extra and loaded by tooz through its
``tooz.backends`` entry points; nothing else in chainfence imports this
module (it imports tooz)::

    coordinator = tooz.coordination.get_coordinator(
        "chainfence+http://127.0.0.1:8545?registry=0x5FbD...&key_env=CHAINFENCE_PRIVATE_KEY",
        b"worker-1",
    )
    coordinator.start(start_heart=True)      # the heart renews held leases
    with coordinator.get_lock(b"reports/daily") as lock:
        write(report, fencing_token=lock.token)

URLs
----
``chainfence+http://HOST:PORT/PATH?...`` and ``chainfence+https://...`` talk
to that JSON-RPC node (the path is part of the node's URL);
``chainfence+embedded://NAME?...`` uses an in-process eth-tester chain, one
per NAME per process, with a registry the driver deploys on it (tests and
demos; other processes cannot see it). Query parameters:

``registry``
    the FencingRegistry's address (default ``$CHAINFENCE_REGISTRY``); not
    taken by the embedded chain.
``key_env``
    the name of the environment variable holding the hex private key
    (default ``CHAINFENCE_PRIVATE_KEY``), or ``keystore=PATH`` with the
    password in ``$CHAINFENCE_KEYSTORE_PASSWORD`` (or ``password_env=VAR``).
    A key itself is never accepted in a URL (``key``, ``private_key``:
    refused). The embedded chain signs with its first dev account.
``accounts``
    ``member`` (default): each coordinator holds its leases as its own
    account, derived from the key and its member id
    (``keccak256("chainfence.tooz.member\\0" ‖ key ‖ member_id)``), so that
    coordinators sharing one URL exclude each other; ``start()`` tops the
    member's account up to ``fund`` wei (default 10**16; embedded 10**18)
    from the key's account, ``fund=0`` never sends. ``key``: the coordinator signs with the
    key itself (one key per coordinator is then the operator's job: two
    coordinators on one key are one holder, and the registry lets a holder
    re-acquire, with a new token).
``timeout``
    the lease ttl in seconds (default 30, at most the registry's max ttl):
    a lock whose holder stops heartbeating ends this long after its last
    acquisition or renewal.
``prefix``
    prepended to every lock name (``prefix=tooz/`` puts them in the
    ``tooz`` namespace of a registry that has namespaces).
``chain_id``, ``confirmations``
    as :meth:`chainfence.Chain.connect` takes them; ``poll_latency``: its
    ``Timeouts(poll=...)`` (:class:`chainfence.Timeouts`).

Semantics (those of tooz's other drivers)
-----------------------------------------
- ``get_lock(name)`` is an exclusive lock on the resource ``prefix + name``
  (bytes are UTF-8). ``acquire(blocking=False)`` tries once;
  ``acquire()`` waits until it gets the lease; ``acquire(blocking=5)`` or
  ``acquire(timeout=5)`` waits up to 5 s (this machine's monotonic clock),
  then returns False. Waiting sends nothing: see
  :meth:`chainfence.Registry.acquire`'s ``wait``.
- Within one coordinator a name is held by at most one lock object: a
  second object (or a second ``acquire`` of the same object) is refused or
  waits, as the registry would refuse another account. The lock is not
  reentrant: a blocking second ``acquire`` in the holding thread waits for
  a release that thread will not make (give it a timeout).
- A blocking ``acquire`` waits out a namespace's lock-delay after an
  expiry too (by chain time); ``acquire(blocking=False)`` refused by a
  lock-delay returns False like one refused by a live holder. A namespace
  that does not admit the coordinator's account is a ``tooz.ToozError``
  at once (``NotAdmitted``, its ``__cause__``): waiting cannot help.
- ``release()`` returns True when it ended the lease, False when this lock
  did not hold it (never acquired, released already, held by another lock
  object) or the lease had already ended (it was lost: ``lock.lost``).
- ``coordinator.heartbeat()`` renews every lease the coordinator holds and
  returns ``timeout / 2``: tooz's heart then beats every quarter ttl or so.
  A lease found ended is dropped with a WARNING naming how it ended, and
  ``lock.lost`` keeps that name (:class:`chainfence.endings.End`:
  ``expired``, ``released``, ``superseded``, ``revoked``, ``granted``,
  ``rolled_back``); a completion (``lock.lease.complete(result)``) ends
  nothing, the lock is kept. A renewal made with less than half the ttl
  left logs a WARNING (late); a chain error that says nothing about the
  lease (the node did not answer) is raised, and the next beat retries.
- ``lock.token`` is the fencing token of the lease held (None when not
  held): pass it downstream to a :class:`chainfence.Guard`. A lock that
  stopped heartbeating may have been taken over with a higher token.
- ``lock.is_still_owner()`` asks the registry whether the token is live.
- ``lock.break_()`` (tooz's test hook) lets the lease expire by moving
  chain time, on dev chains only; elsewhere it raises ``tooz.NotImplemented``
  (only its holder or its expiry ends a lease). Shared locks, groups,
  membership and elections raise ``tooz.NotImplemented``.
- Chain failures reach tooz's caller as ``tooz.ToozError`` (a node that does
  not answer: ``ToozConnectionError``) whose ``__cause__`` is the
  chainfence error. Bad input (a malformed URL or option, a bad lock name or
  timeout, a missing key) is :class:`ToozInvalidInput`: a ``tooz.ToozError``
  and a :class:`chainfence.errors.InvalidInput` (the SDK's own, naming the
  ``argument``, is its ``__cause__``), never a bare ``ValueError``. A URL
  that tooz itself cannot split (an unclosed ``[``) fails in
  ``tooz.coordination.get_coordinator`` before any driver is chosen, with
  tooz's own ``ValueError``, as for every tooz driver.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlunsplit

import tooz
import tooz.coordination
import tooz.locking
import tooz.utils
from eth_account import Account
from eth_utils.crypto import keccak

from .. import endings
from .._core import log as _log
from .._sdk import validate as _validate
from ..chain import DEFAULT_TIMEOUTS, Chain, Timeouts
from ..endings import End, Refusal
from ..errors import ChainfenceError, InvalidInput, LeaseError, NodeUnreachable, TokenNotCurrent
from ..registry import Registry

__all__ = ["ChainfenceDriver", "ChainfenceLock", "ToozInvalidInput", "embedded_chain", "member_account"]

logger = _log.get(__name__)

#: Options a URL (or ``get_coordinator``'s keyword arguments) may carry.
OPTIONS = frozenset(
    {
        "registry",
        "key_env",
        "keystore",
        "password_env",
        "accounts",
        "fund",
        "timeout",
        "prefix",
        "chain_id",
        "confirmations",
        "poll_latency",
    }
)
DEFAULT_TIMEOUT = 30
DEFAULT_FUND = 10**16
#: The longest single wait handed to the registry; an endless ``acquire()`` waits in such steps.
_WAIT_STEP = 3_600.0
_MEMBER_DOMAIN = b"chainfence.tooz.member\x00"

_shared_lock = threading.Lock()
_chains: dict[tuple[str, int | None, int | None, float | None], Chain] = {}
_embedded: dict[str, tuple[Chain, Registry]] = {}


def embedded_chain(name: str = "") -> tuple[Chain, Registry]:
    """The in-process chain and registry of ``chainfence+embedded://NAME`` (made on first use).

    For tests and demos: ``chain.advance_time(...)`` lets a lease expire.
    """
    with _shared_lock:
        if name not in _embedded:
            chain = Chain.embedded()
            _embedded[name] = (chain, Registry.deploy(chain, max_ttl=86_400))
        return _embedded[name]


def _connected(url: str, chain_id: int | None, confirmations: int | None, poll: float | None) -> Chain:
    """One Chain per node per process: coordinators of a process share its per-account nonce locks."""
    key = (url, chain_id, confirmations, poll)
    with _shared_lock:
        chain = _chains.get(key)
    if chain is not None:
        return chain
    timeouts = DEFAULT_TIMEOUTS if poll is None else Timeouts(poll=poll)
    chain = Chain.connect(url, chain_id=chain_id, confirmations=confirmations, timeouts=timeouts)
    with _shared_lock:
        return _chains.setdefault(key, chain)


class ToozInvalidInput(tooz.ToozError, InvalidInput):
    """Bad input to the tooz driver: a ``tooz.ToozError`` (what tooz's callers catch) that is also a
    chainfence :class:`~chainfence.errors.InvalidInput`; the precise error is its ``__cause__``."""

    def __init__(self, message: str, cause: BaseException | None = None):
        tooz.ToozError.__init__(self, message, cause)


def _invalid(exc: InvalidInput) -> ToozInvalidInput:
    if isinstance(exc, ToozInvalidInput):
        return exc
    error = ToozInvalidInput(f"{type(exc).__name__}: {exc}", exc)
    error.__cause__ = exc
    return error


def _tooz_error(exc: ChainfenceError, what: str) -> tooz.ToozError:
    cls = tooz.coordination.ToozConnectionError if isinstance(exc, NodeUnreachable) else tooz.ToozError
    error = cls(f"{what}: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


class _Config:
    """A coordinator URL's settings, checked (nothing is read from the environment or the chain yet)."""

    def __init__(self, parsed_url: Any, options: dict[str, Any]):
        scheme = parsed_url.scheme
        if scheme not in ("chainfence+http", "chainfence+https", "chainfence+embedded"):
            raise InvalidInput(f"not a chainfence tooz URL scheme: {scheme!r}")
        values = {k: (v[-1] if isinstance(v, (list, tuple)) and v else v) for k, v in options.items()}
        for secret in ("key", "private_key", "password"):
            if secret in values:
                raise InvalidInput(
                    f"a tooz URL never carries a key or password ({secret}=...): name the environment variable "
                    "that holds it (key_env=VAR, password_env=VAR) or a keystore file (keystore=PATH)"
                )
        unknown = sorted(set(values) - OPTIONS)
        if unknown:
            raise InvalidInput(f"unknown option(s) in the tooz URL: {', '.join(unknown)} (known: {sorted(OPTIONS)})")
        self.embedded = scheme == "chainfence+embedded"
        self.name = parsed_url.netloc + parsed_url.path
        self.node_url = (
            None
            if self.embedded
            else _validate.rpc_url(
                urlunsplit((scheme.split("+", 1)[1], parsed_url.netloc, parsed_url.path, "", "")), "the tooz URL's node"
            )
        )
        if self.embedded and ("registry" in values or "key_env" in values or "keystore" in values):
            raise InvalidInput("chainfence+embedded:// deploys its own registry and signs with its dev accounts")
        self.registry = values.get("registry")
        if "key_env" in values and "keystore" in values:
            raise InvalidInput("key_env and keystore are exclusive: one key per coordinator")
        self.key_env = values.get("key_env", "CHAINFENCE_PRIVATE_KEY")
        self.keystore = values.get("keystore")
        self.password_env = values.get("password_env", "CHAINFENCE_KEYSTORE_PASSWORD")
        self.accounts = values.get("accounts", "member")
        if self.accounts not in ("member", "key"):
            raise InvalidInput(f"accounts must be 'member' or 'key', got {self.accounts!r}")
        # The embedded chain's preflight reserves a fixed 30M gas ceiling: 0.03 ETH at its 1 gwei.
        self.fund = self._int(values, "fund", 10**18 if self.embedded else DEFAULT_FUND, low=0)
        self.timeout: int = cast(int, self._int(values, "timeout", DEFAULT_TIMEOUT, low=1))
        self.prefix = values.get("prefix", "")
        self.chain_id = self._int(values, "chain_id", None, low=1)
        self.confirmations = self._int(values, "confirmations", None, low=0)
        poll = values.get("poll_latency")
        try:
            self.poll_latency = None if poll is None else float(poll)
        except ValueError:
            raise InvalidInput(f"poll_latency must be a number of seconds, got {poll!r}") from None
        if self.poll_latency is not None and not 0 < self.poll_latency <= 60:
            raise InvalidInput(f"poll_latency must be above 0 and at most 60 seconds, got {poll!r}")

    @staticmethod
    def _int(values: dict[str, Any], name: str, default: int | None, *, low: int) -> int | None:
        raw = values.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise InvalidInput(f"{name} must be an integer, got {raw!r}") from None
        if value < low:
            raise InvalidInput(f"{name} must be at least {low}, got {value}")
        return value

    def key(self) -> Any:
        """The configured key (a LocalAccount), read from the environment or the keystore now."""
        if self.keystore is not None:
            password = os.environ.get(self.password_env)
            if password is None:
                raise InvalidInput(f"keystore {self.keystore}: set ${self.password_env} to its password")
            try:
                encrypted = json.loads(Path(self.keystore).read_text(encoding="utf-8"))
                return Account.from_key(Account.decrypt(encrypted, password))
            except (OSError, ValueError) as exc:
                raise InvalidInput(f"cannot open keystore {self.keystore}: {type(exc).__name__}") from None
        raw = os.environ.get(self.key_env)
        if not raw:
            raise InvalidInput(f"no signing key: set ${self.key_env} (or pass key_env=VAR or keystore=PATH)")
        try:
            return Account.from_key(raw)
        except Exception:
            raise InvalidInput(f"${self.key_env} is not a valid secp256k1 private key (32 bytes, hex)") from None


def member_account(key: Any, member_id: bytes) -> Any:
    """The account a coordinator with ``member_id`` holds its leases as, under ``accounts=member``."""
    return Account.from_key(keccak(_MEMBER_DOMAIN + bytes(key.key) + member_id))


class ChainfenceLock(tooz.locking.Lock):
    """An exclusive tooz lock backed by a chainfence lease (see the module docstring)."""

    def __init__(self, name: bytes, resource: str, coordinator: ChainfenceDriver):
        super().__init__(name)
        self.resource = resource
        self._coordinator = coordinator
        self._op = threading.Lock()  # serialises this lock's renew and release
        self.lease: Any = None  # the chainfence Lease while held
        self.expires_at: int | None = None
        #: How the last lease this lock held was found ended (``"revoked"``, ``"expired"``, ...: the
        #: words of :class:`chainfence.endings.End`), None while held or after a release of its own.
        self.lost: str | None = None

    @property
    def token(self) -> int | None:
        """The fencing token of the lease this lock holds, or None."""
        lease = self.lease
        return None if lease is None else lease.token

    def acquire(self, blocking: Any = True, shared: bool = False, timeout: float | None = None) -> bool:
        if shared:
            raise tooz.NotImplemented("chainfence leases are exclusive: shared locks are not implemented")
        try:
            blocking, timeout = tooz.utils.convert_blocking(blocking, timeout)
        except (TypeError, ValueError):
            raise _invalid(InvalidInput(f"blocking is a bool or a number of seconds, got {blocking!r}")) from None
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout
        ):  # a number, not NaN (NaN != NaN); a negative one tries once, as tooz's other drivers do
            raise _invalid(InvalidInput(f"a lock's timeout is a number of seconds, got {timeout!r}"))
        wait = 0.0 if not blocking else (None if timeout is None else max(0.0, float(timeout)))
        deadline = None if wait is None else time.monotonic() + wait
        coordinator = self._coordinator
        registry = coordinator._require_started()
        if not coordinator._reserve(self, deadline):
            return False
        try:
            while True:
                remaining = _WAIT_STEP if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    lease = registry.acquire(
                        self.resource, coordinator.timeout, wait=min(remaining, _WAIT_STEP) or None
                    )
                    break
                except LeaseError as refused:
                    kind = endings.refusal(refused)
                    if kind is None or kind is Refusal.NOT_ADMITTED:
                        raise  # not a refusal for now, or one only the namespace's admin can end: ToozError
                    # held, lock_delayed: passes with chain time (waited out by the registry): try again
                    if deadline is not None and time.monotonic() >= deadline:
                        coordinator._unreserve(self)
                        return False
        except ChainfenceError as exc:
            coordinator._unreserve(self)
            raise _tooz_error(exc, f"acquiring {self.resource!r}") from exc
        except BaseException:
            coordinator._unreserve(self)
            raise
        with self._op:
            self.lease, self.expires_at, self.lost = lease, lease.expires_at, None
        return True

    def release(self) -> bool:
        with self._op:
            lease = self.lease
            if lease is None or not self._coordinator._owns(self):
                return False
            try:
                self._coordinator._registry.release(self.resource, lease.token)
            except ChainfenceError as exc:
                if not self._ended(lease, exc, "release"):
                    raise _tooz_error(exc, f"releasing {self.resource!r}") from exc
                return False
            self._drop()
            return True

    def heartbeat(self) -> bool:
        """Renew the lease for the coordinator's timeout; False if not held (or found ended, then dropped)."""
        with self._op:
            lease = self.lease
            if lease is None:
                return False
            ttl, before = self._coordinator.timeout, self.expires_at
            try:
                self.expires_at = self._coordinator._registry.renew(self.resource, lease.token, ttl)
            except ChainfenceError as exc:
                if not self._ended(lease, exc, "heartbeat"):
                    raise _tooz_error(exc, f"renewing {self.resource!r}") from exc
                return False
            # Chain time of the renewal (its expiry less the ttl) against the expiry it extended: a heart
            # that beats on time (about four beats a ttl) renews with more than half the ttl left.
            left = before - (cast(int, self.expires_at) - ttl) if before is not None else ttl
            if left < ttl / 2:
                logger.warning(
                    "late renewal resource=%s token=%d: %d s of the %d s lease were left",
                    self.resource,
                    lease.token,
                    left,
                    ttl,
                )
            return True

    def is_still_owner(self) -> bool:
        lease, registry = self.lease, self._coordinator._registry
        if lease is None or registry is None:
            return False
        try:
            registry.check_current(self.resource, lease.token)
        except TokenNotCurrent:
            return False
        except ChainfenceError as exc:
            raise _tooz_error(exc, f"checking {self.resource!r}") from exc
        return True

    def break_(self) -> bool:
        """End the resource's live lease, whoever holds it, by letting it expire: dev chains only.

        tooz uses ``break_`` in tests "to simulate an out of band operation
        that breaks the lock". The registry knows one such operation: expiry.
        On a dev chain (anvil, the embedded chain) this moves chain time to
        the lease's expiry, so every lease that ends by then ends too; the
        holder's release then returns False and the next acquisition gets a
        higher token. Elsewhere it raises ``tooz.NotImplemented``: only its
        holder's release or its expiry ends a lease. False if nobody holds it.
        """
        chain = self._coordinator._require_started().chain
        if not chain.is_dev:
            raise tooz.NotImplemented("a chainfence lease ends only by its holder's release or its expiry")
        registry = self._coordinator._registry
        try:
            live = registry.lease_of(self.resource)
            if live is None:
                return False
            chain.advance_time(max(0, live.expires_at - chain.now()))
        except ChainfenceError as exc:
            raise _tooz_error(exc, f"breaking {self.resource!r}") from exc
        logger.warning("broke resource=%s token=%d by moving chain time to its expiry", self.resource, live.token)
        return True

    def _ended(self, lease: Any, error: ChainfenceError, what: str) -> bool:
        """Whether ``error`` (of a renewal or release of ``lease``) says the lease ended; if so, drop the lock
        and name the end (:mod:`chainfence.endings`) in ``lost`` and a WARNING. A higher token is named by its
        successor's acquisition (a grant, a revoke and then an acquisition, the holder's reacquisition, ...)."""
        end = endings.from_error(error)
        if end is None:
            return False  # transient (the node did not answer, ...): the lease may still be ours
        if end is End.SUPERSEDED:
            registry = self._coordinator._registry
            end = registry.chain._run(registry._successor_end_steps(lease.resource_id, lease.token, lease.block_number))
        # Every way, by name: each ends this lock's hold; only the words differ.
        reaction = {
            End.EXPIRED: "it ran out on-chain (no renewal in time)",
            End.RELEASED: "it was released elsewhere (another process of this account)",
            End.COMPLETED: "its work item was completed",
            End.SUPERSEDED: "this account acquired the resource again elsewhere",
            End.REVOKED: "the namespace's admin revoked it",
            End.GRANTED: "the namespace's admin granted the resource to another lease",
            End.ROLLED_BACK: "the chain no longer has the block that issued it",
        }[end]
        logger.warning(
            "%s found the lease lost resource=%s token=%d why=%s: %s (%s: %s)",
            what,
            self.resource,
            lease.token,
            end.value,
            reaction,
            type(error).__name__,
            error,
        )
        self._drop()
        self.lost = end.value
        return True

    def _drop(self) -> None:
        self.lease = self.expires_at = None
        self._coordinator._unreserve(self)


class ChainfenceDriver(tooz.coordination.CoordinationDriver):
    """tooz coordinator over a chainfence registry: locks only (see the module docstring)."""

    CHARACTERISTICS: tuple[Any, ...] = (
        tooz.coordination.Characteristics.DISTRIBUTED_ACROSS_THREADS,
        tooz.coordination.Characteristics.DISTRIBUTED_ACROSS_PROCESSES,
        tooz.coordination.Characteristics.DISTRIBUTED_ACROSS_HOSTS,
    )

    def __init__(self, member_id: bytes, parsed_url: Any, options: dict[str, Any]):
        super().__init__(member_id, parsed_url, options)
        try:
            self._config = _Config(parsed_url, options)
        except InvalidInput as bad:
            raise _invalid(bad) from bad
        if self._config.embedded:  # an in-process chain is no more than threads of one process
            self.CHARACTERISTICS = (tooz.coordination.Characteristics.DISTRIBUTED_ACROSS_THREADS,)
        self.timeout = self._config.timeout
        self._registry: Any = None
        self.account: str | None = None
        self._reserved = threading.Condition()
        self._owners: dict[str, ChainfenceLock] = {}

    # -- lifecycle ------------------------------------------------------------

    def _start(self) -> None:
        config = self._config
        try:
            if config.embedded:
                chain, registry = embedded_chain(config.name)
                key = chain.key_of(chain.accounts[0])
            else:
                # The node first: an unreachable one is the error to report, whatever else is missing.
                chain = _connected(
                    cast(str, config.node_url), config.chain_id, config.confirmations, config.poll_latency
                )
                key = config.key()
                address = config.registry or os.environ.get("CHAINFENCE_REGISTRY")
                if not address:
                    raise InvalidInput("no registry: pass registry=0x... in the URL or set $CHAINFENCE_REGISTRY")
                registry = Registry.at(chain, address)
            if config.timeout > registry.max_ttl:
                raise InvalidInput(f"timeout={config.timeout} is above the registry's max ttl ({registry.max_ttl} s)")
            funder = chain.add_account(key)
            holder = funder
            if config.accounts == "member":
                member_id = self._member_id
                member = member_account(key, member_id.encode() if isinstance(member_id, str) else bytes(member_id))
                holder = chain.add_account(member)
                self._fund(chain, funder, holder)
        except InvalidInput as bad:
            raise _invalid(bad) from bad
        except ChainfenceError as exc:
            raise _tooz_error(exc, "starting the chainfence coordinator") from exc
        self._registry = registry.connect(holder)
        self.account = holder
        logger.info("coordinator started member=%r account=%s registry=%s", self._member_id, holder, registry.address)

    def _fund(self, chain: Chain, funder: str, member: str) -> None:
        want = self._config.fund
        if not want:
            return
        raw = chain.rpc.request("eth_getBalance", [member, "latest"])
        balance = int(raw, 16) if isinstance(raw, str) else int(raw)
        if balance >= want:
            return
        # A plain value transfer through the SDK's one sending path (preflight, nonce lock, no blind resend).
        call = {"from": funder, "to": member, "data": b"", "value": want - balance}
        chain._sender.transact(funder, call, gas=None, confirmations=chain.confirmations)
        logger.info("funded member account=%s wei=%d from=%s", member, want - balance, funder)

    def _stop(self) -> None:
        with self._reserved:
            held = [lock for lock in self._owners.values() if lock.lease is not None]
        for lock in held:
            try:
                lock.release()
            except tooz.ToozError as exc:
                logger.warning("stop could not release resource=%s (it ends at its expiry): %s", lock.resource, exc)
            lock.lease = lock.expires_at = None  # a stopped coordinator holds nothing it could renew
        with self._reserved:
            self._owners.clear()
            self._reserved.notify_all()
        self._registry = None

    def _require_started(self) -> Any:
        registry = self._registry
        if registry is None:
            raise tooz.ToozError("the coordinator is not started")
        return registry

    # -- groups: not implemented (tooz's base class raises for the rest) --------

    def watch_join_group(self, group_id: bytes, callback: Any) -> None:
        raise tooz.NotImplemented("groups are not implemented by the chainfence driver")

    def watch_leave_group(self, group_id: bytes, callback: Any) -> None:
        raise tooz.NotImplemented("groups are not implemented by the chainfence driver")

    def watch_elected_as_leader(self, group_id: bytes, callback: Any) -> None:
        raise tooz.NotImplemented("elections are not implemented by the chainfence driver")

    # -- locks ----------------------------------------------------------------

    def get_lock(self, name: bytes) -> ChainfenceLock:
        try:
            return self._get_lock(name)
        except InvalidInput as bad:
            raise _invalid(bad) from bad

    def _get_lock(self, name: bytes) -> ChainfenceLock:
        if isinstance(name, str):
            name = name.encode()
        if not isinstance(name, bytes) or not name:
            raise InvalidInput(f"a lock name is non-empty bytes or str, got {name!r}")
        try:
            resource = self._config.prefix + name.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"a lock name must be UTF-8, got {name!r}") from None
        _validate.publishable(resource)
        return ChainfenceLock(name, resource, self)

    def heartbeat(self) -> float:
        """Renew every held lease; seconds until the next beat is due (tooz's heart waits half of it)."""
        with self._reserved:
            held = [lock for lock in self._owners.values() if lock.lease is not None]
        failed: tooz.ToozError | None = None
        for lock in held:  # every lock gets its renewal, even after another's failed
            try:
                lock.heartbeat()
            except tooz.ToozError as exc:
                failed = failed or exc
        if failed is not None:
            raise failed  # tooz's heart logs it and beats again a second later
        return self.timeout / 2

    def _reserve(self, lock: ChainfenceLock, deadline: float | None) -> bool:
        """Claim ``lock.resource`` for ``lock`` within this coordinator, waiting until ``deadline``."""
        with self._reserved:
            while lock.resource in self._owners:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._reserved.wait(remaining)
            self._owners[lock.resource] = lock
            return True

    def _unreserve(self, lock: ChainfenceLock) -> None:
        with self._reserved:
            if self._owners.get(lock.resource) is lock:
                del self._owners[lock.resource]
                self._reserved.notify_all()

    def _owns(self, lock: ChainfenceLock) -> bool:
        with self._reserved:
            return self._owners.get(lock.resource) is lock


endings.declare(
    "tooz",
    __name__,
    {
        End.EXPIRED: "heartbeat and release find it (LeaseExpired): the lock is dropped, lock.lost == 'expired', "
        "a WARNING names it; the next holder's token is higher",
        End.RELEASED: "released elsewhere by this account: dropped at the next heartbeat, lock.lost == 'released'",
        End.COMPLETED: "a plain lease's completion (lock.lease.complete) ends nothing: the heartbeat keeps it",
        End.SUPERSEDED: "this account acquired it again elsewhere: dropped, lock.lost == 'superseded'",
        End.REVOKED: "dropped at the next heartbeat, lock.lost == 'revoked'",
        End.GRANTED: "dropped at the next heartbeat, lock.lost == 'granted' (read off the grant's acquisition)",
        End.ROLLED_BACK: "dropped at the next heartbeat, lock.lost == 'rolled_back' (the chain forgot its token)",
        Refusal.HELD: "a blocking acquire waits (no gas) as acquire(wait=) does; blocking=False or a timeout "
        "that passes returns False",
        Refusal.LOCK_DELAYED: "a blocking acquire waits out the lock-delay by chain time; blocking=False or a "
        "timeout that passes returns False",
        Refusal.NOT_ADMITTED: "tooz.ToozError at once, naming NotAdmitted (its __cause__)",
    },
    holds=True,
    waits=True,
)
