"""The downstream side: accept or reject work by fencing token, with durable high-water marks.

A service puts one line before every write it protects::

    guard = Guard(registry, path="guard.sqlite")

    def write_report(token, body):
        guard.check("reports/daily", token)     # raises TokenNotCurrent if stale
        storage.put("reports/daily", body)

The guard keeps, per resource, the highest token it has accepted (the
*mark*) in a SQLite file, with the holder of that token. Three modes, chosen
at construction:

``mark`` (default): local marks, the chain asked only about news.
    ``token == mark``: accepted, no chain call (same epoch, more writes).
    ``token < mark``: :class:`~chainfence.errors.StaleToken`, carrying both.
    ``token > mark``: asked of the chain; only the resource's current, live
    token becomes the new mark. A forged token, one issued for another
    resource, or one superseded, expired or released is rejected and the mark
    does not move. Cost: one SQLite read per check (a dict lookup with
    ``exclusive=True``), one ``eth_call`` per new epoch.
    Window: a holder whose lease ended is accepted (at its own mark) until a
    successor's token reaches the guard.

``strict``: every check asks the chain that the token is current (at the
    confirmed head when ``confirmations`` is set), besides the mark.
    Cost: one ``eth_call`` (plus one with confirmations) per check. Closes the
    window of ``mark``: an expired or superseded holder is rejected at once.

``follow``: ``mark``, plus a follower thread that reads the registry's
    ``LeaseAcquired`` events (``eth_getLogs`` by block range, every
    ``follow_interval`` seconds, confirmed blocks only) and raises marks as
    soon as a lease is issued, so a stale holder is rejected even before the
    new holder writes anything. Cost: one ``eth_getLogs`` per interval.
    Window: the follower's lag, exposed by :meth:`Guard.staleness` (seconds
    since the followed head was last brought up to date).

Guarantees in every mode (DESIGN.md, safety properties 3 and 4):

- a guard never accepts a token lower than one it accepted for that
  resource: marks only go up, are written with ``synchronous=FULL`` in WAL
  mode, and survive restarts and crashes;
- a guard never accepts a token the registry did not issue for that resource;
- check-and-record is atomic across threads and across processes sharing
  the file (``BEGIN IMMEDIATE`` around re-read, compare and write).

A check and the write that follows it are two steps: a holder superseded
between them can still complete that one write. Make the write itself
conditional on the token where that matters (:mod:`chainfence.sql` does it
in one database transaction; :class:`~chainfence.FencedStore` on-chain).

Reorgs: fencing tokens are a chain's counter, so a reorg can give the same
number to another holder. With ``confirmations=k`` (default: the chain's
setting; 0 on dev chains) a token becomes a mark only once the block that
issued it has ``k`` blocks on top (:class:`~chainfence.errors.TokenNotConfirmed`
until then). Reorgs deeper than ``k`` are outside what any ``k`` can promise.

Holder-signed requests (:meth:`Guard.check_request`): see
:mod:`chainfence.fenced_requests`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eth_utils import keccak

from . import _validate
from .errors import (
    ChainfenceError,
    ContractNotFound,
    GuardError,
    GuardStoreMismatch,
    InvalidInput,
    InvalidSignature,
    LeaseExpired,
    LeaseReleased,
    MalformedRequest,
    PayloadMismatch,
    ReplayedRequest,
    RequestExpired,
    SignerNotHolder,
    StaleToken,
    TokenNotConfirmed,
    UnknownToken,
)
from .lease import LeaseInfo, LeaseStatus

if TYPE_CHECKING:
    from .fenced_requests import EIP712Domain, FencedRequest
    from .registry import Registry

logger = logging.getLogger(__name__)

__all__ = ["MODES", "Guard"]

#: The guard modes (see the module docstring).
MODES = ("mark", "strict", "follow")

_SCHEMA_VERSION = "2"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS marks (
        resource_id BLOB PRIMARY KEY,   -- keccak256(utf8 name), as on-chain
        name        TEXT NOT NULL,      -- the name, or 0x<id> until the guard learns it
        token       INTEGER NOT NULL,   -- the highest token accepted (chain tokens fit 48 bits)
        accepted_at REAL NOT NULL,      -- wall-clock seconds, for operators only
        holder      TEXT                -- the holder of that token (schema 2)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS seen_requests (
        id       BLOB PRIMARY KEY,      -- the EIP-712 digest of an accepted fenced request
        deadline INTEGER NOT NULL       -- kept until this wall-clock second has passed
    ) WITHOUT ROWID""",
)

#: Keys of `meta` that bind a store to one registry.
_IDENTITY_KEYS = ("chain_id", "genesis_hash", "registry")

#: SQLite INTEGER is signed 64-bit; chain-verified tokens fit in 48 bits.
_MAX_STORED_TOKEN = 2**63 - 1

#: Blocks per eth_getLogs request of the follower.
_FOLLOW_CHUNK = 2_000

#: ERC-1271 isValidSignature(bytes32,bytes) selector, also its "valid" answer.
_ERC1271_MAGIC = bytes.fromhex("1626ba7e")


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
        max_request_age: the furthest in the future a signed request's
            deadline may be, in seconds (bounds the replay store).
        timeout: seconds to wait for another process's write lock.

    Raises :class:`~chainfence.errors.GuardStoreMismatch` if the file holds
    marks of another registry (other chain, address or genesis block).
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
        max_request_age: int = 3_600,
        timeout: float = 30.0,
    ):
        if not isinstance(path, (str, os.PathLike)) or str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise InvalidInput(f"a guard needs a file path (marks must survive restarts), got {path!r}")
        if mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        for name, value in (("timeout", timeout), ("follow_interval", follow_interval)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise InvalidInput(f"{name} must be a positive number of seconds, got {value!r}")
        if isinstance(max_request_age, bool) or not isinstance(max_request_age, int) or max_request_age < 1:
            raise InvalidInput(f"max_request_age must be an int >= 1, got {max_request_age!r}")
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
        self.max_request_age = max_request_age
        self._timeout = float(timeout)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        #: Exclusive guards: resource name -> (mark, holder), mirroring the store.
        self._memo: dict[str, tuple[int, str | None]] = {}
        self._ids: dict[str, bytes] = {}
        self._domain: EIP712Domain | None = None
        self._contract_holders: dict[str, bool] = {}
        self._lock_file: Any = None
        self._identity = {key: value for key, value in registry.identity().items() if key in _IDENTITY_KEYS}
        self._take_store_lock()
        try:
            self._bind()
            if self.exclusive:
                for name, token, holder in self._conn().execute("SELECT name, token, holder FROM marks"):
                    self._memo[name] = (token, holder)
        except BaseException:
            self.close()
            raise
        self.followed_block: int | None = None
        self._synced_at: float | None = None
        self._follow_lock = threading.Lock()
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        if mode == "follow":
            self.sync()
            self._follower = threading.Thread(target=self._follow, name=f"chainfence-follow-{self.path.name}", daemon=True)
            self._follower.start()

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
        :class:`~chainfence.errors.TokenNotConfirmed`. A rejection never moves
        the mark. Chain errors propagate (fail closed).
        """
        memo = self._memo.get(resource)
        if memo is not None and memo[0] == token and token.__class__ is int and self.mode != "strict":
            return token  # exclusive store, same epoch: the fast path
        return self._check(resource, token)[0]

    def _check(self, resource: str, token: int) -> tuple[int, str | None]:
        """check() returning (token, holder of token if known)."""
        resource_id = self._resource_id(resource)
        token = _validate.token(token)
        conn = self._conn()

        mark, holder = self._read_mark(conn, resource_id)
        if token < mark:
            raise StaleToken(token=token, current_token=mark, resource=resource, resource_id=resource_id)
        if token == mark and self.mode != "strict":
            return token, holder

        # News (or strict): the chain must vouch for the token, and, with
        # confirmations, the block that issued it must be deep enough.
        info = self._verify_on_chain(resource, resource_id, token)
        if self.confirmations:
            self._require_confirmed(resource, resource_id, token)
        if token == mark:
            return token, info.holder
        if token > _MAX_STORED_TOKEN:  # pragma: no cover - the contract stores tokens in 48 bits
            raise GuardError(f"token {token} does not fit the guard's store")

        with self._write(conn):
            current, _ = self._read_mark(conn, resource_id)
            if token < current:
                # Another thread or process recorded a newer token meanwhile.
                raise StaleToken(token=token, current_token=current, resource=resource, resource_id=resource_id)
            if token > current:
                self._raise_mark(conn, resource_id, resource, token, info.holder)
        if self.exclusive:
            self._remember(resource, token, info.holder)
        logger.info("guard accepted new token resource=%s token=%d previous_mark=%d", resource, token, mark)
        return token, info.holder

    def mark(self, resource: str) -> int:
        """The highest token accepted for ``resource`` (0 if none)."""
        return self._read_mark(self._conn(), self._resource_id(resource))[0]

    def marks(self) -> dict[str, int]:
        """Every resource's mark, by name."""
        rows = self._conn().execute("SELECT name, token FROM marks ORDER BY name").fetchall()
        return {name: token for name, token in rows}

    # ------------------------------------------------------------------
    # Holder-signed requests
    # ------------------------------------------------------------------

    def check_request(self, request: FencedRequest, payload: bytes) -> FencedRequest:
        """Accept a holder-signed request once, or raise a RequestRejected / TokenNotCurrent.

        In order: the payload is the signed one (:class:`~chainfence.errors.PayloadMismatch`),
        the deadline has not passed and is not too far (:class:`~chainfence.errors.RequestExpired`,
        :class:`~chainfence.errors.MalformedRequest`), the signature is the
        named holder's, in this registry's EIP-712 domain, ERC-1271 for
        contract holders (:class:`~chainfence.errors.InvalidSignature`), the
        token passes this guard's mode (``TokenNotCurrent``), the named holder
        holds that token (:class:`~chainfence.errors.SignerNotHolder`), and
        the request was never accepted before, across restarts
        (:class:`~chainfence.errors.ReplayedRequest`). Only a request that
        passes every step is remembered.
        """
        from .fenced_requests import FencedRequest

        if not isinstance(request, FencedRequest):
            raise MalformedRequest(f"expected a FencedRequest, got {type(request).__name__}")
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
        self._verify_signature(request, digest)

        _, holder = self._check(request.resource, request.token)
        if holder is None:  # a mark recorded before holders were stored (schema 1)
            info = self.registry.last_lease(request.resource)
            holder = info.holder if info is not None and info.token == request.token else None
        if holder != request.holder:
            raise SignerNotHolder(
                f"{request.holder} signed for token {request.token} of {request.resource!r}, held by {holder}"
            )

        conn = self._conn()
        with self._write(conn):
            try:
                conn.execute("INSERT INTO seen_requests (id, deadline) VALUES (?, ?)", (digest, request.deadline))
            except sqlite3.IntegrityError:
                raise ReplayedRequest(f"request 0x{digest.hex()[:16]}... was already accepted") from None
            if int(now) % 64 == 0:  # now and then, forget requests whose deadline is long gone
                conn.execute("DELETE FROM seen_requests WHERE deadline < ?", (int(now) - 60,))
        return request

    def domain(self) -> EIP712Domain:
        """The registry's EIP-712 domain (ERC-5267), read once."""
        if self._domain is None:
            self._domain = self.registry.eip712_domain()
        return self._domain

    def _verify_signature(self, request: FencedRequest, digest: bytes) -> None:
        if self._is_contract(request.holder):
            data = _ERC1271_MAGIC + _encode_bytes32_bytes(digest, request.signature)
            try:
                answer = self.registry.chain.call(request.holder, data)
            except ChainfenceError as exc:
                raise InvalidSignature(f"the holder contract {request.holder} refused the signature: {exc}") from None
            if answer[:4] != _ERC1271_MAGIC:
                raise InvalidSignature(f"the holder contract {request.holder} does not accept this signature")
            return
        signer = request.recover(self.domain(), digest=digest)
        if signer != request.holder:
            raise InvalidSignature(
                f"signed by {signer}, not by the holder it names ({request.holder}): "
                "a foreign key, or a request signed for another registry or chain"
            )

    def _is_contract(self, address: str) -> bool:
        known = self._contract_holders.get(address)
        if known is None:
            known = bool(self.registry.chain.w3.eth.get_code(address))
            self._contract_holders[address] = known
        return known

    # ------------------------------------------------------------------
    # Follow mode
    # ------------------------------------------------------------------

    def sync(self) -> int:
        """Bring the marks up to the confirmed head from the registry's events; returns that block.

        The follower thread calls this every ``follow_interval`` seconds in
        ``follow`` mode; call it yourself for a deterministic catch-up.
        """
        with self._follow_lock:
            chain = self.registry.chain
            head = chain.confirmed_block(self.confirmations)
            conn = self._conn()
            start = self._meta(conn, "follow_block")
            if start is None:
                # First follow of this store: from the head on. Earlier tokens
                # still reach the marks when presented, verified on-chain.
                self._set_meta(conn, "follow_block", str(head))
                self.followed_block = head
                self._synced_at = time.monotonic()
                return head
            block = int(start)
            while block < head:
                end = min(head, block + _FOLLOW_CHUNK)
                self._apply_events(conn, block + 1, end)
                block = end
            self.followed_block = block
            self._synced_at = time.monotonic()
            return block

    def staleness(self) -> float:
        """Seconds since the follower last brought the marks up to the confirmed head (inf if never)."""
        return float("inf") if self._synced_at is None else time.monotonic() - self._synced_at

    def _apply_events(self, conn: sqlite3.Connection, first: int, last: int) -> None:
        contract = self.registry._contract
        acquired, named = contract.events.LeaseAcquired(), contract.events.ResourceNamed()
        topics = {bytes.fromhex(acquired.topic[2:]): acquired, bytes.fromhex(named.topic[2:]): named}
        logs = self.registry.chain.w3.eth.get_logs(
            {"address": self.registry.address, "fromBlock": first, "toBlock": last, "topics": [[e.topic for e in (acquired, named)]]}
        )
        decoded = []
        for log in sorted(logs, key=lambda entry: (entry["blockNumber"], entry["logIndex"])):
            event = topics[bytes(log["topics"][0])]
            decoded.append((event, event.process_log(log)["args"]))
        # Names first, outside the write transaction (a lookup is an RPC):
        # from this range's ResourceNamed events, the store, or the chain.
        names = {bytes(args["resource"]): args["name"] for event, args in decoded if event is named}
        for _event, args in decoded:
            resource_id = bytes(args["resource"])
            if resource_id not in names:
                stored = self._name_of(conn, resource_id)
                names[resource_id] = (self._lookup_name(resource_id) if stored.startswith("0x") else None) or stored
        raised: list[tuple[str, int, str]] = []
        with self._write(conn):
            for event, args in decoded:
                if event is named:
                    continue
                resource_id = bytes(args["resource"])
                name = names[resource_id]
                current, _ = self._read_mark(conn, resource_id)
                if args["token"] > current:
                    self._raise_mark(conn, resource_id, name, args["token"], args["holder"])
                    raised.append((name, args["token"], args["holder"]))
            self._set_meta(conn, "follow_block", str(last))
        for name, token, holder in raised:
            if self.exclusive:
                self._remember(name, token, holder)
            logger.info("guard followed new token resource=%s token=%d", name, token)

    def _lookup_name(self, resource_id: bytes) -> str | None:
        """The name a resource was published under (its ResourceNamed event), if any."""
        named = self.registry._contract.events.ResourceNamed()
        logs = self.registry.chain.w3.eth.get_logs(
            {"address": self.registry.address, "fromBlock": 0, "toBlock": "latest",
             "topics": [named.topic, "0x" + resource_id.hex()]}
        )  # fmt: skip
        return named.process_log(logs[0])["args"]["name"] if logs else None

    def _follow(self) -> None:
        while not self._stop.wait(self.follow_interval):
            try:
                self.sync()
            except Exception as exc:  # the node hiccuped: staleness grows, the next poll retries
                logger.warning("guard follower could not sync (staleness %.1f s): %s", self.staleness(), exc)

    # ------------------------------------------------------------------
    # Chain verification
    # ------------------------------------------------------------------

    def _verify_on_chain(self, resource: str, resource_id: bytes, token: int) -> LeaseInfo:
        """The lease of ``token`` if it is the current, live token of the resource at the latest block."""
        info = self.registry.last_lease(resource)
        if info is None:
            raise UnknownToken(token=token, current_token=0, resource=resource, resource_id=resource_id)
        if token == info.token and info.status is LeaseStatus.LIVE:
            return info
        logger.info(
            "guard rejected token resource=%s token=%d chain_token=%d status=%s",
            resource,
            token,
            info.token,
            info.status.name.lower(),
        )
        if token > info.token:
            raise UnknownToken(token=token, current_token=info.token, resource=resource, resource_id=resource_id)
        if token < info.token:
            raise StaleToken(token=token, current_token=info.token, resource=resource, resource_id=resource_id)
        if info.status is LeaseStatus.RELEASED:
            raise LeaseReleased(token=token, resource=resource, resource_id=resource_id)
        raise LeaseExpired(token=token, expired_at=info.expires_at, resource=resource, resource_id=resource_id)

    def _require_confirmed(self, resource: str, resource_id: bytes, token: int) -> None:
        """Raise unless the block that issued ``token`` has ``confirmations`` blocks on top.

        Tokens are per-chain counters: a reorg can hand the same number to
        another holder. Only a token issued at or below the confirmed head may
        become a mark.
        """
        block = self.registry.chain.confirmed_block(self.confirmations)
        try:
            confirmed = self.registry.last_lease(resource, block=block)
        except ContractNotFound:
            confirmed = None  # the confirmed head predates the registry: nothing is confirmed yet
        if confirmed is None or confirmed.token < token:
            logger.info("guard deferred unconfirmed token resource=%s token=%d", resource, token)
            raise TokenNotConfirmed(
                token=token, confirmations=self.confirmations, resource=resource, resource_id=resource_id
            )

    # ------------------------------------------------------------------
    # Store
    # ------------------------------------------------------------------

    def close(self) -> None:
        """Stop the follower, close the store's connections (from every thread). Marks stay on disk."""
        self._stop_follower()
        with self._connections_lock:
            self._closed = True
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the flock
            self._lock_file = None

    def _stop_follower(self) -> None:
        stop = getattr(self, "_stop", None)
        follower = getattr(self, "_follower", None)
        if stop is not None:
            stop.set()
        if follower is not None and follower is not threading.current_thread():
            follower.join()

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
            if len(self._ids) < 100_000:
                self._ids[resource] = cached
        return cached

    def _remember(self, resource: str, token: int, holder: str | None) -> None:
        previous = self._memo.get(resource)
        if previous is None or previous[0] < token:
            self._memo[resource] = (token, holder)

    def _take_store_lock(self) -> None:
        """Exclusive guards own the store: a lock file held for the guard's life (flock)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: exclusivity is the caller's promise
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(f"{self.path}.lock", "a+")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(self._lock_file.fileno(), (fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            self._lock_file = None
            raise GuardError(
                f"{str(self.path)!r} is in use by "
                + ("another guard" if self.exclusive else "a guard that owns it (exclusive=True)")
            ) from None

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise GuardError(f"guard {str(self.path)!r} is closed")
        if os.getpid() != self._pid:
            # A forked child must not use its parent's SQLite handles.
            self._local = threading.local()
            self._connections = []
            self._pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            # FULL: a mark is on disk before check() returns, power loss included.
            conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise GuardError(f"cannot open guard store {str(self.path)!r}: {exc}") from exc
        return conn

    def _bind(self) -> None:
        """Create or migrate the schema and tie the store to this registry, or refuse a foreign store."""
        conn = self._conn()
        try:
            with self._write(conn):
                for statement in _SCHEMA:  # one at a time: executescript() would COMMIT first
                    conn.execute(statement)
                stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                if not stored:
                    conn.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [*self._identity.items(), ("schema_version", _SCHEMA_VERSION)],
                    )
                    return
                if stored.get("schema_version") == "1":
                    # Schema 1 (chainfence 0.1 foundation) had no holder column.
                    conn.execute("ALTER TABLE marks ADD COLUMN holder TEXT")
                    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (_SCHEMA_VERSION,))
        except sqlite3.DatabaseError as exc:
            raise GuardError(f"{str(self.path)!r} is not a usable guard store: {exc}") from exc
        differs = sorted(k for k in _IDENTITY_KEYS if stored.get(k) != self._identity[k])
        if differs:
            raise GuardStoreMismatch(
                f"{str(self.path)!r} holds marks of another registry ({', '.join(differs)} differ: "
                f"store has {', '.join(f'{k}={stored.get(k)}' for k in differs)})"
            )

    @staticmethod
    def _read_mark(conn: sqlite3.Connection, resource_id: bytes) -> tuple[int, str | None]:
        row = conn.execute("SELECT token, holder FROM marks WHERE resource_id = ?", (resource_id,)).fetchone()
        return (0, None) if row is None else (row[0], row[1])

    @staticmethod
    def _raise_mark(conn: sqlite3.Connection, resource_id: bytes, name: str, token: int, holder: str | None) -> None:
        conn.execute(
            "INSERT INTO marks (resource_id, name, token, accepted_at, holder) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (resource_id) DO UPDATE SET token = excluded.token, accepted_at = excluded.accepted_at, "
            "holder = excluded.holder, "
            "name = CASE WHEN excluded.name LIKE '0x%' THEN marks.name ELSE excluded.name END "
            "WHERE excluded.token > marks.token",
            (resource_id, name, token, time.time(), holder),
        )

    @staticmethod
    def _name_of(conn: sqlite3.Connection, resource_id: bytes) -> str:
        row = conn.execute("SELECT name FROM marks WHERE resource_id = ?", (resource_id,)).fetchone()
        return row[0] if row is not None else "0x" + resource_id.hex()

    @staticmethod
    def _meta(conn: sqlite3.Connection, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def _set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        statement = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        if conn.in_transaction:
            conn.execute(statement, (key, value))
        else:
            with self._write(conn):
                conn.execute(statement, (key, value))

    def _write(self, conn: sqlite3.Connection) -> _WriteTransaction:
        return _WriteTransaction(conn)


def _encode_bytes32_bytes(word: bytes, data: bytes) -> bytes:
    """ABI encoding of (bytes32, bytes): the arguments of isValidSignature."""
    padded = data + b"\0" * (-len(data) % 32)
    return word + (64).to_bytes(32, "big") + len(data).to_bytes(32, "big") + padded


class _WriteTransaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error): takes the write lock up front,
    so a read-compare-write inside it cannot interleave with another writer."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self._conn.execute("BEGIN IMMEDIATE")
        return self._conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._conn.execute("COMMIT")
        else:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
