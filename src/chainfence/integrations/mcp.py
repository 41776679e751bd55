"""``chainfence mcp``: leases and fencing tokens as Model Context Protocol tools, for LLM agents.

Built on the official MCP Python SDK (``pip install '.[mcp]'`` in a chainfence checkout)::

    from chainfence.integrations.mcp import build_server

    server = build_server(registry)      # registry.sender signs; None: the write tools refuse
    server.run()                         # stdio; or: chainfence mcp [--http --port N]

Tools: ``acquire`` (with ``wait``), ``renew`` (with a progress marker),
``release``, ``complete``, ``claim`` (the next free item of a workset),
``verify``, ``status``, ``history`` and ``leader`` (an election's leader).
Each has a JSON schema with bounds and a description written for a model;
each answers with a JSON object (``structuredContent``, the same JSON as
text).

Errors: a chainfence error reaches the model as a tool error
(``isError: true``) whose content is :meth:`ChainfenceError.details()
<chainfence.errors.ChainfenceError.details>` (``{"error": "LeaseHeld",
"message": ..., "holder": ..., "token": ..., "expires_at": ...}``), as JSON
text and as ``structuredContent``: never the SDK's generic "Error executing
tool". Arguments outside the schema are refused before anything is sent, as
``InvalidInput`` (``argument``: the first field that failed; the contract's
subclass for a name or a ttl: ``InvalidResourceName``, ``InvalidTtl``, ...)
with the fields that failed.

Keep-alive: **none**. The agent renews. A server that renewed on the
agent's behalf would keep the lease of an agent that crashed or hangs alive
for as long as the MCP client keeps the server running, which is the failure
leases exist to end: a lease through MCP lasts as long as the agent shows,
by calling ``renew``, that it is still working. Pick a ttl longer than the
agent's longest step between two tool calls. Nothing is released when the
session ends either: what the agent holds expires at its ttl (or the agent
releases it).

Sessions: leases are the chain's, not the server's. ``renew``, ``release``
and ``complete`` take the resource and the token, so a lease acquired in one
session (or by the CLI) can be renewed in another. A claimed work item's name
is ``workset»item`` (the ``resource`` string ``claim`` answers with, and what
``history`` and the audit print): every tool that takes a name accepts it, in
any session, or the item as ``resource`` with ``workset``. Claimed items are
leases in every sense here: ``verify``, ``status``, ``renew``, ``release``,
``complete`` and ``history`` reach them.

Ends and refusals (the part ``"mcp"`` of :mod:`chainfence.endings`): a tool
error about a lease that ended carries ``"ended"``, the way it ended in the
model's words (``expired``, ``released``, ``completed``, ``superseded``,
``revoked``, ``granted``, ``rolled_back``), read from the chain when the
revert alone cannot tell (a higher token: the successor's reason says
superseded or granted); ``verify`` answers ``current: false`` with ``ended``
and ``status`` shows ``ended`` for a lease that is over. A refused acquisition
(``acquire``, ``claim``) carries ``"refused"``: ``held``, ``lock_delayed`` or
``not_admitted``.

A tool call the client cancels or times out may still complete on the
chain: the acquisition is then the agent's (``status`` shows
``held_by_you``).
"""

import importlib.util
import json
import logging
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from .. import __version__, endings, errors
from .._sdk import names as _names
from .._sdk import validate as _validate
from ..audit import history as lease_history
from ..endings import End, Refusal
from ..errors import ChainfenceError, ChainRolledBack, InvalidInput, UnknownAccount
from ..registry import MAX_CLAIM_ITEMS, Registry

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_HISTORY",
    "MAX_NAME_CHARS",
    "MAX_STATUS_RESOURCES",
    "MAX_WAIT",
    "add_metrics_route",
    "build_server",
    "serve",
]

#: The longest ``wait`` a tool call may ask for: MCP clients time tool calls out (often after 60 s to
#: a few minutes); a longer wait is a loop of calls.
MAX_WAIT = 300

#: Most resources one ``status`` call reads.
MAX_STATUS_RESOURCES = 50

#: Most events one ``history`` call returns (the latest ones).
MAX_HISTORY = 200

#: A ``history`` position (``before``/``earlier``): an event's block, transaction hash and log index.
_POSITION = r"^[0-9]{1,19}:0x[0-9a-fA-F]{64}:[0-9]{1,19}$"
_MAX_POSITION = 19 + 1 + 66 + 1 + 19

#: Longest ``resource`` argument, in characters: a claimed item's name ``workset»item`` (two names of
#: up to 128 bytes each); a plain name is still held to 128 bytes of UTF-8 by the SDK's check.
MAX_NAME_CHARS = 2 * _validate.MAX_NAME_LENGTH + len(_names.ITEM_SEPARATOR)

_INSTRUCTIONS = """\
chainfence: leases on named resources, recorded on a blockchain, with fencing tokens.

Before working on a shared resource (a file, a table, a branch, a job), acquire its lease. The answer
carries a fencing TOKEN: pass this token with every write you make to the resource (the service that
checks it refuses writes carrying an older token, so an agent that lost its lease cannot overwrite the
work of the one that took over). Renew before expires_in runs out; release when done. If renew or verify
says the token is no longer current (StaleToken, LeaseExpired, LeaseReleased), STOP writing: someone else
may hold the resource now. Times are chain time (Unix seconds). Errors come back as JSON with an
"error" name and the details (LeaseHeld: who holds it, its token, when it expires).
"""

#: What the MCP tools do about each way a lease ends or an acquisition is refused (the model's part "mcp").
#: The server holds leases for agents but keeps none alive (the agent renews): it reports every way, by name.
PART = endings.declare(
    "mcp",
    __name__,
    {
        End.EXPIRED: "renew, release, complete: a tool error (LeaseExpired) with ended=expired; verify: current "
        "false, ended=expired; status: ended=expired. The agent stops writing and acquires again.",
        End.RELEASED: "a tool error (LeaseReleased) with ended=released; verify/status: ended=released.",
        End.COMPLETED: "a done item's renew, release or second complete: a tool error with ended=completed (read "
        "from the item's status: done); verify/status: ended=completed.",
        End.SUPERSEDED: "a tool error (StaleToken) with ended=superseded when the successor was a reacquisition "
        "(the reason it was issued for, read from the events); verify: ended=superseded.",
        End.REVOKED: "a tool error (LeaseRevoked) with ended=revoked; verify/status: ended=revoked.",
        End.GRANTED: "a tool error (StaleToken) with ended=granted: the successor's reason is granted; verify: "
        "ended=granted.",
        End.ROLLED_BACK: "a tool error (ChainRolledBack) with ended=rolled_back: the chain lost the token's "
        "history; the agent stops writing.",
        Refusal.HELD: "acquire (after its wait) and claim: a tool error (LeaseHeld: holder, token, expiry) with "
        "refused=held; claim answers claimed=false when every item is held or done.",
        Refusal.LOCK_DELAYED: "acquire and claim: a tool error (LockDelayed, with until) with "
        "refused=lock_delayed; the agent retries after `until`.",
        Refusal.NOT_ADMITTED: "acquire and claim: a tool error (NotAdmitted) with refused=not_admitted, at once "
        "(waiting cannot help).",
    },
    holds=True,
    waits=True,
)

_TOKEN_NOTE = (
    "The token is your fencing token: pass this token with every write to the resource, and stop writing "
    "once renew or verify says it is no longer current."
)

# ---------------------------------------------------------------------------
# Argument types: the JSON schema the model sees, with descriptions and bounds
# ---------------------------------------------------------------------------

_NAME = (
    "A resource name: 1 to 128 bytes of printable UTF-8 (no control, format or bidi characters; spaces inside "
    "only), e.g. 'reports/daily' or 'repo/main'."
)
#: The names of the tools that name a lease the registry already holds (verify, status, history, renew, release,
#: complete): what the SDK reads, any name the chain can hold that JSON can carry.
_HELD_NAME = (
    "A resource name as the registry holds it: 1 to 128 bytes of UTF-8, e.g. 'reports/daily' or 'repo/main'. "
    "Names acquired through this server are printable, but anyone can put a name on-chain with a transaction of "
    "their own: a name with control, escape or bidi characters (NUL, ESC, U+202E) is read exactly as given, so "
    "give such a name as it is (JSON escapes: '\\u202e'); answers show it escaped in `resource_display`. Text "
    "that is not UTF-8 (a lone surrogate) is refused."
)
_DISPLAY = (
    "The name as chainfence shows names read from the chain: control, format and bidi characters escaped "
    "(\\u202e, \\x1b), a backslash doubled; the same as `resource` for a printable name."
)
_ITEM_NAME = (
    " A work item taken with claim is named workset\u00bbitem (e.g. 'migrate/tables\u00bbusers'), exactly as claim "
    "returned it in `resource`; or pass the item here and its workset in `workset`."
)

Resource = Annotated[str, Field(description=_HELD_NAME + _ITEM_NAME, min_length=1, max_length=MAX_NAME_CHARS)]
#: acquire's: a plain name (a work item is taken with claim, never acquired by name).
PlainResource = Annotated[str, Field(description=_NAME, min_length=1, max_length=_validate.MAX_NAME_LENGTH)]
Token = Annotated[
    int,
    Field(
        strict=True,
        ge=1,
        le=_validate.MAX_TOKEN,
        description="The fencing token the lease was acquired (or claimed) with, as acquire or claim returned it.",
    ),
]
Ttl = Annotated[
    int,
    Field(
        strict=True,
        ge=1,
        le=2**32 - 1,
        description="Lease length in seconds of chain time (at most the registry's max_ttl, see status). "
        "Choose more than your longest step between two calls of renew.",
    ),
]
Workset = Annotated[
    str | None,
    Field(
        description="Only for a claimed work item given by its item name alone: the workset it was claimed "
        "from (`resource` is then the item). Leave it out when `resource` is the workset\u00bbitem name claim "
        "returned.",
        min_length=1,
        max_length=_validate.MAX_NAME_LENGTH,
    ),
]

#: Schema fields -> the chainfence error a bad value of that field is.
_FIELD_ERRORS: dict[str, type[InvalidInput]] = {
    "resource": errors.InvalidResourceName,
    "resources": errors.InvalidResourceName,
    "workset": errors.InvalidResourceName,
    "election": errors.InvalidResourceName,
    "ttl": errors.InvalidTtl,
    "items": errors.InvalidClaimItems,
}

# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


class LeaseResult(BaseModel):
    """A lease this server's account holds: what acquire and claim return."""

    resource: str = Field(
        description="The resource, as to pass back to renew, release and complete (a claimed item: workset\u00bbitem)."
    )
    token: int = Field(description="The fencing token. " + _TOKEN_NOTE)
    holder: str = Field(description="The account holding the lease: this server's account.")
    expires_at: int = Field(description="Chain time (Unix seconds) the lease ends unless renewed.")
    expires_in: int = Field(description="Seconds of chain time left when this answer was made.")
    ttl: int = Field(description="The lease length asked for, in seconds.")
    reason: str = Field(description="Why it changed hands: unheld, released, expired or reacquired.")
    previous_token: int = Field(description="The resource's token before this one (0: none).")
    tx_hash: str = Field(description="The acquiring transaction.")
    block_number: int = Field(description="The block it was mined in.")
    workset: str | None = Field(default=None, description="For a claimed work item: its workset.")
    item: str | None = Field(default=None, description="For a claimed work item: its name.")


class ClaimResult(BaseModel):
    claimed: bool = Field(description="False when every item is done or held by another agent: nothing to do.")
    workset: str
    item: str | None = Field(description="The item you now hold, or null.")
    lease: LeaseResult | None = Field(description="Its lease (token: your fencing token for the item), or null.")


class RenewResult(BaseModel):
    resource: str
    token: int = Field(description="The same token: renewing never changes it. " + _TOKEN_NOTE)
    expires_at: int = Field(description="The new expiry, chain time (Unix seconds).")
    expires_in: int = Field(description="Seconds of chain time left when this answer was made.")


class ReleaseResult(BaseModel):
    resource: str
    token: int
    released: bool = Field(description="True: the lease has ended; do not write with this token again.")


class CompleteResult(BaseModel):
    resource: str
    token: int
    result_digest: str = Field(description="The keccak256 of the result, as recorded on-chain (0x-hex).")
    done: bool = Field(description="True: the lease has ended with the result recorded (a claimed item is done).")


class VerifyResult(BaseModel):
    resource: str
    resource_display: str = Field(description=_DISPLAY)
    token: int
    current: bool = Field(description="True: the token is the resource's live token; writes with it are accepted.")
    holder: str | None = Field(default=None, description="Who holds the lease (when current).")
    expires_at: int | None = Field(default=None, description="Its expiry, chain time (when current).")
    reason: str | None = Field(
        default=None, description="Why not current: StaleToken, UnknownToken, LeaseExpired or LeaseReleased."
    )
    message: str | None = Field(default=None, description="The reason in words.")
    current_token: int | None = Field(default=None, description="The resource's latest token, when known.")
    ended: str | None = Field(
        default=None,
        description=(
            "How the token's lease ended: expired, released, completed, superseded, revoked, granted or rolled_back "
            "(null: current, or a token never issued for the resource)."
        ),
    )


class ResourceState(BaseModel):
    resource: str
    resource_display: str = Field(description=_DISPLAY)
    status: str = Field(
        description="unheld (never held), live, expired, released, revoked, or done (a completed item)."
    )
    token: int = Field(description="The latest token (0: never held).")
    holder: str | None
    expires_at: int = Field(description="Chain time the latest lease ends or ended (0: released or never held).")
    expires_in: int | None = Field(description="Seconds of chain time left, for a live lease.")
    held_by_you: bool = Field(description="True when the live lease is this server's account's.")
    no_block_since: bool = Field(description="Expired by chain time although no block was mined since.")
    ended: str | None = Field(
        default=None,
        description=("How the latest lease ended: expired, released, completed or revoked (null: live or never held)."),
    )


class StatusResult(BaseModel):
    registry: str
    chain_id: int
    chain_time: int = Field(description="The chain's time now (Unix seconds): what expiries are judged by.")
    account: str | None = Field(description="This server's signing account (null: read-only, no key).")
    max_ttl: int = Field(description="The longest ttl the registry accepts, in seconds.")
    latest_token: int = Field(description="The highest token the registry has issued.")
    resources: list[ResourceState]


class HistoryEvent(BaseModel):
    kind: str = Field(description="acquired, renewed, released or completed.")
    token: int
    holder: str
    expires_at: int | None
    reason: str | None = Field(description="For acquisitions: unheld, released, expired or reacquired.")
    previous_token: int | None
    progress: str | None = Field(description="For renewals: the progress marker (0x-hex), if one was given.")
    result_digest: str | None
    block_number: int
    block_timestamp: int = Field(description="Chain time of the event's block.")
    tx_hash: str


class HistoryResult(BaseModel):
    resource: str
    resource_display: str = Field(description=_DISPLAY)
    total: int = Field(description="How many events the resource has.")
    events: list[HistoryEvent] = Field(description="The latest events (before `before`, if given), oldest first.")
    earlier: str | None = Field(
        description="Pass it as `before` to read the events before these; null when these start at the first."
    )


class LeaderInfo(BaseModel):
    holder: str
    token: int = Field(description="The leader's fencing token for this term.")
    since: int = Field(description="Chain time the term began.")
    expires_at: int
    block_number: int


class LeaderResult(BaseModel):
    election: str
    leader: LeaderInfo | None = Field(description="The current leader, or null when the seat is empty.")
    held_by_you: bool


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------


class _Server(MCPServer):
    """MCPServer whose argument-validation failures are chainfence's typed InvalidInput errors."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            return _error_result(_invalid_arguments(name, exc.__cause__))


def _invalid_arguments(tool: str, problem: ValidationError) -> InvalidInput:
    fields = [
        {"field": ".".join(str(part) for part in error["loc"]), "problem": error["msg"]} for error in problem.errors()
    ]
    first = str(problem.errors()[0]["loc"][0]) if problem.errors() else ""
    cls = _FIELD_ERRORS.get(first, InvalidInput)
    summary = "; ".join(f"{f['field']}: {f['problem']}" for f in fields)
    error = cls(f"{tool}: invalid arguments (nothing was sent): {summary}", argument=first or None)
    vars(error)["fields"] = fields  # a detail of the error (ChainfenceError.details() lists its attributes)
    return error


_UNREAD = object()  # _error_result: no reading of the chain was made, classify the error alone


def _error_result(error: ChainfenceError, ended: Any = _UNREAD) -> CallToolResult:
    details = error.details()
    refused = endings.refusal(error)
    if refused is not None:
        details["refused"] = refused.value
    if ended is _UNREAD:
        ended = endings.from_error(error)
    if ended is not None and refused is None:
        details["ended"] = ended.value
    logger.info("tool error %s: %s", details["error"], details["message"])
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(details))], structured_content=details, is_error=True
    )


class _LeaseEnded(Exception):
    """A lease operation's refusal, with the way the lease ended as read from the chain."""

    def __init__(self, error: ChainfenceError, ended: End | None):
        super().__init__(str(error))
        self.error, self.ended = error, ended


def _reported(fn: Any) -> Any:
    """Run a tool body; a chainfence error becomes a tool error carrying its details (and the way a
    lease ended, or an acquisition was refused, in the model's words)."""
    import functools

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _LeaseEnded as lost:
            return _error_result(lost.error, lost.ended)
        except ChainfenceError as error:
            return _error_result(error)

    return run


def _position(event: Any) -> str:
    """A history event's position, as ``before`` takes it: ``block:tx_hash:log_index``."""
    return f"{event.block_number}:{event.tx_hash.lower()}:{event.log_index}"


def _name(resource: str, workset: str | None) -> str:
    """The name a tool acts on: ``resource``, or work item ``resource`` of ``workset`` (``workset»item``),
    checked (a bad one is a typed InvalidInput, nothing sent)."""
    name = resource if workset is None else _names.item_name(workset, resource)
    _validate.resource_id(name)
    return name


def _ended(registry: Registry, name: str, token: int, error: ChainfenceError | None) -> End | None:
    """How lease ``token`` of ``name`` ended, in the model's words: what the refusal says
    (:func:`chainfence.endings.from_error`), refined from the chain where a refusal cannot tell (its
    latest lease's status: a done item is ``completed``; a higher token: the reason its successor was
    issued for, ``granted`` or ``superseded``, ...). None: a token never issued for ``name``."""
    end = endings.from_error(error) if error is not None else None
    if end is End.ROLLED_BACK:
        return end
    try:
        return registry.ending(name, token)
    except ChainfenceError:
        return end  # the refusal's own word: the node failed the refinement


def _lease_op(registry: Registry, name: str, token: int, op: Any) -> Any:
    """Run ``op`` (renew, release, complete of lease ``token`` of ``name``); a refusal that ends the lease
    comes back naming how it ended."""
    try:
        return op()
    except (errors.TokenNotCurrent, errors.NotHolder) as refused:
        raise _LeaseEnded(refused, _ended(registry, name, token, refused)) from refused
    except ChainRolledBack as refused:
        raise _LeaseEnded(refused, End.ROLLED_BACK) from refused


class _Session:
    """The server's account (None: read-only)."""

    def __init__(self, registry: Registry):
        self.registry = registry

    def sender(self) -> str:
        if self.registry.sender is None:
            raise UnknownAccount(
                "this MCP server has no signing key, so it can only read: set CHAINFENCE_PRIVATE_KEY "
                "(or --keystore with CHAINFENCE_KEYSTORE_PASSWORD) in the server's configuration"
            )
        return self.registry.sender


def _lease_result(lease: Any, now: int) -> LeaseResult:
    return LeaseResult(
        resource=lease.resource,
        token=lease.token,
        holder=lease.holder,
        expires_at=lease.expires_at,
        expires_in=max(0, lease.expires_at - now),
        ttl=lease.ttl,
        reason=lease.reason.name.lower(),
        previous_token=lease.previous_token,
        tx_hash=lease.tx_hash,
        block_number=lease.block_number,
        workset=lease.workset,
        item=lease.item,
    )


def _progress(value: int | str | None) -> bytes | int | str | None:
    """A progress marker from JSON: an int counter, 0x-hex bytes, or text (hashed)."""
    if isinstance(value, str) and value.startswith("0x"):
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            raise InvalidInput(f"progress is not hex: {value!r:.80}", argument="progress", value=value) from None
    return value


def build_server(registry: Registry, *, name: str = "chainfence") -> MCPServer:
    """An MCP server whose tools act on ``registry`` as ``registry.sender`` (None: read-only).

    Run it with ``server.run()`` (stdio), or connect the SDK's ``Client(server)`` to it in-process.
    """
    if not isinstance(registry, Registry):
        raise InvalidInput(f"registry must be a chainfence Registry, got {type(registry).__name__}")
    session = _Session(registry)
    chain = registry.chain
    # MCPServer's constructor calls logging.basicConfig(); a library configures no logging, so the
    # root logger is put back as it was (the CLI configures it, with -v).
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        server = _Server(name, instructions=_INSTRUCTIONS, version=__version__, log_level="WARNING")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(
        name="acquire",
        annotations=writes,
        description=(
            "Acquire the lease on a named resource before working on it, so that no other agent works on it at the "
            "same time. Returns the lease: its fencing token, holder (you), and expiry (chain time). "
            + _TOKEN_NOTE
            + " If another agent holds the resource, this fails with LeaseHeld (holder, token, expires_at): try "
            "again later, or pass `wait` to wait up to that many seconds for it to become free. Acquiring a "
            "resource you already hold gives you a new token and fences off the old one. If this call is "
            "cancelled or times out, the acquisition may still have happened: call status to see."
        ),
    )
    @_reported
    def acquire(
        resource: PlainResource,
        ttl: Ttl,
        wait: Annotated[
            float,
            Field(
                strict=True,
                ge=0,
                le=MAX_WAIT,
                description=(
                    "Seconds to wait for the resource while another agent holds it (0: do not wait, fail at once "
                    f"with LeaseHeld). At most {MAX_WAIT}; keep it under your client's tool-call timeout."
                ),
            ),
        ] = 0,
    ) -> LeaseResult:
        session.sender()
        lease = registry.acquire(resource, ttl, wait=wait or None)
        return _lease_result(lease, chain.now())

    @server.tool(
        name="renew",
        annotations=writes,
        description=(
            "Extend a lease you hold to now + ttl, keeping the same token. Call it before expires_in runs out, "
            "with a progress marker (a counter or a short text of where the work stands) so that a watchdog can "
            "tell working from stuck. Fails with StaleToken, LeaseExpired or LeaseReleased when the token is no "
            "longer current: then stop writing with it (acquire again, and redo the work the new token covers)."
        ),
    )
    @_reported
    def renew(
        resource: Resource,
        token: Token,
        ttl: Ttl,
        progress: Annotated[
            Annotated[int, Field(strict=True)] | str | None,
            Field(
                description=(
                    "Optional progress marker recorded with the renewal: an integer counter (1 or more), 0x-hex "
                    "(1 to 32 bytes), or any text (its keccak256 is recorded). The same marker renewal after renewal "
                    "reads as stuck."
                )
            ),
        ] = None,
        workset: Workset = None,
    ) -> RenewResult:
        session.sender()
        marker = _progress(progress)
        name = _name(resource, workset)
        expires_at = _lease_op(registry, name, token, lambda: registry.renew(name, token, ttl, progress=marker))
        return RenewResult(
            resource=name, token=token, expires_at=expires_at, expires_in=max(0, expires_at - chain.now())
        )

    @server.tool(
        name="release",
        annotations=writes,
        description=(
            "End a lease you hold, so that another agent can take the resource at once. Only this token's lease "
            "ends: an old token never frees a newer lease. After releasing, make no more writes with the token."
        ),
    )
    @_reported
    def release(resource: Resource, token: Token, workset: Workset = None) -> ReleaseResult:
        session.sender()
        name = _name(resource, workset)
        _lease_op(registry, name, token, lambda: registry.release(name, token))
        return ReleaseResult(resource=name, token=token, released=True)

    @server.tool(
        name="complete",
        annotations=writes,
        description=(
            "Record the result of the work done under a lease you hold and end the lease. For an item from "
            "claim, this marks the item done for good: no claim hands it out again. Refused (StaleToken, "
            "LeaseExpired, ...) if the token is no longer current: then the result is not recorded."
        ),
    )
    @_reported
    def complete(
        resource: Resource,
        token: Token,
        result: Annotated[
            str,
            Field(
                max_length=100_000,
                description=(
                    "The result as text (a summary, a commit id, a file's hash): its keccak256 is recorded on-chain."
                ),
            ),
        ] = "",
        workset: Workset = None,
    ) -> CompleteResult:
        session.sender()
        name = _name(resource, workset)
        try:
            data = result.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                "complete: result is not valid UTF-8 text (a lone surrogate?); nothing was sent"
            ) from None
        digest = _lease_op(registry, name, token, lambda: registry.complete(name, token, data))
        return CompleteResult(resource=name, token=token, result_digest="0x" + digest.hex(), done=True)

    @server.tool(
        name="claim",
        annotations=writes,
        description=(
            "Take the next item of a shared list of work (a workset) that no agent holds or has finished, in one "
            "step: for splitting work between agents. Returns the item and its lease (" + _TOKEN_NOTE + ") or "
            "claimed=false when nothing is left. Finish the item with complete (resource and token as returned); "
            "renew it like any lease. An item you already hold comes back to you under a new token. An item whose "
            "claimant stopped renewing is free again once its lease expires."
        ),
    )
    @_reported
    def claim(
        workset: Annotated[
            str,
            Field(
                min_length=1,
                max_length=_validate.MAX_NAME_LENGTH,
                description=("The name of the set of work shared by the agents, e.g. 'migrate/tables'. " + _NAME),
            ),
        ],
        items: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=_validate.MAX_NAME_LENGTH)]],
            Field(
                min_length=1,
                max_length=MAX_CLAIM_ITEMS,
                description=f"All the items of the workset (1 to {MAX_CLAIM_ITEMS} distinct names), in the order to "
                "hand them out; every agent passes the same list.",
            ),
        ],
        ttl: Ttl,
    ) -> ClaimResult:
        session.sender()
        lease = registry.workset(workset).claim(items, ttl)
        if lease is None:
            return ClaimResult(claimed=False, workset=workset, item=None, lease=None)
        return ClaimResult(claimed=True, workset=workset, item=lease.item, lease=_lease_result(lease, chain.now()))

    @server.tool(
        name="verify",
        annotations=reads,
        description=(
            "Check whether a fencing token is still the current one of its resource (its lease live, not "
            "superseded, expired or released). Use it before an irreversible step, or to check a token another "
            "agent handed you. current=false comes with the reason; it is an answer, not an error. Reads only."
        ),
    )
    @_reported
    def verify(resource: Resource, token: Token, workset: Workset = None) -> VerifyResult:
        name = _name(resource, workset)
        try:
            info = registry.check_current(name, token)
        except errors.TokenNotCurrent as no:
            ended = _ended(registry, name, token, no)
            return VerifyResult(
                resource=name,
                resource_display=_names.display_name(name),
                token=token,
                current=False,
                reason=type(no).__name__,
                message=str(no),
                current_token=getattr(no, "current_token", None),
                ended=ended.value if ended else None,
            )
        except ChainRolledBack as no:
            raise _LeaseEnded(no, End.ROLLED_BACK) from no
        return VerifyResult(
            resource=name,
            resource_display=_names.display_name(name),
            token=token,
            current=True,
            holder=info.holder,
            expires_at=info.expires_at,
        )

    @server.tool(
        name="status",
        annotations=reads,
        description=(
            "Show who holds each of the named resources (status, token, holder, expiry, whether it is yours), "
            "the chain's time, this server's account and the registry's limits (max_ttl). With no resources, "
            "only the registry. Reads only."
        ),
    )
    @_reported
    def status(
        resources: Annotated[
            list[Resource],
            Field(max_length=MAX_STATUS_RESOURCES, description=f"Resource names (0 to {MAX_STATUS_RESOURCES})."),
        ] = [],  # noqa: B006 - pydantic copies defaults
        workset: Annotated[
            str | None,
            Field(
                description="The names are work items of this workset (leave out for workset\u00bbitem names).",
                min_length=1,
                max_length=_validate.MAX_NAME_LENGTH,
            ),
        ] = None,
    ) -> StatusResult:
        names = [_name(resource, workset) for resource in resources]  # every name checked before any read
        now = chain.now()
        states = []
        for resource in names:
            last = registry.last_lease(resource)
            live = last if last is not None and last.live else None
            ended = endings.of_status(last.status) if last is not None else None
            states.append(
                ResourceState(
                    resource=resource,
                    resource_display=_names.display_name(resource),
                    ended=ended.value if ended else None,
                    status="unheld" if last is None else last.status.name.lower(),
                    token=last.token if last else 0,
                    holder=last.holder if last else None,
                    expires_at=last.expires_at if last else 0,
                    expires_in=max(0, live.expires_at - now) if live is not None else None,
                    held_by_you=live is not None and live.holder == registry.sender,
                    no_block_since=bool(last and last.expired_unmined),
                )
            )
        return StatusResult(
            registry=registry.address,
            chain_id=chain.chain_id,
            chain_time=now,
            account=registry.sender,
            max_ttl=registry.max_ttl,
            latest_token=registry.latest_token(),
            resources=states,
        )

    @server.tool(
        name="history",
        annotations=reads,
        description=(
            "The lease history of a resource, from the registry's events: who acquired it with which token and "
            "why (unheld, released, expired, reacquired), renewals with their progress markers, releases and "
            "completions, with chain times. Use it to see what happened before you took over. The latest "
            "`limit` events; to read further back, pass the answer's `earlier` as `before`. Reads only."
        ),
    )
    @_reported
    def history(
        resource: Resource,
        limit: Annotated[
            int,
            Field(
                strict=True,
                ge=1,
                le=MAX_HISTORY,
                description=(f"How many of the latest events to return (1 to {MAX_HISTORY})."),
            ),
        ] = 50,
        workset: Workset = None,
        before: Annotated[
            str | None,
            Field(
                strict=True,
                max_length=_MAX_POSITION,
                pattern=_POSITION,
                description="The events before this position (the `earlier` of a previous answer): the next "
                "page back. Omit it for the latest events.",
            ),
        ] = None,
    ) -> HistoryResult:
        resource = _name(resource, workset)
        events = lease_history(registry, resource)
        end = len(events)
        if before is not None:
            # A position names one event (block, transaction, log index): events logged since do not move it.
            found = next((i for i, event in enumerate(events) if _position(event) == before.lower()), None)
            if found is None:
                raise errors.StaleCursor(
                    f"history: no event of {resource!r} is at {before} any more (the chain reorganised): "
                    "read the latest events again"
                )
            end = found
        start = max(0, end - limit)
        shown = [
            HistoryEvent(
                kind=event.kind.value,
                token=event.token,
                holder=event.holder,
                expires_at=event.expires_at,
                reason=event.reason.name.lower() if event.reason is not None else None,
                previous_token=event.previous_token,
                progress="0x" + event.progress.hex() if event.progress else None,
                result_digest="0x" + event.result_digest.hex() if event.result_digest else None,
                block_number=event.block_number,
                block_timestamp=event.block_timestamp,
                tx_hash=event.tx_hash,
            )
            for event in events[start:end]
        ]
        earlier = _position(events[start]) if start > 0 else None
        return HistoryResult(
            resource=resource,
            resource_display=_names.display_name(resource),
            total=len(events),
            events=shown,
            earlier=earlier,
        )

    @server.tool(
        name="leader",
        annotations=reads,
        description=(
            "Who leads an election: the holder of the live lease on the election's name, with its fencing token "
            "for this term, or null when nobody leads. To run for leader, acquire the election's name (with wait "
            "to wait for the seat) and renew it while you lead; release it to resign. Reads only."
        ),
    )
    @_reported
    def leader(
        election: Annotated[
            str,
            Field(
                min_length=1,
                max_length=_validate.MAX_NAME_LENGTH,
                description=("The election's name (a resource name), e.g. 'billing/leader'."),
            ),
        ],
    ) -> LeaderResult:
        from ..recipes.election import Election

        # ttl only matters to campaigning, which this read never does.
        current = Election(registry, election, ttl=60).leader()
        if current is None:
            return LeaderResult(election=election, leader=None, held_by_you=False)
        info = LeaderInfo(
            holder=current.holder,
            token=current.token,
            since=current.since,
            expires_at=current.expires_at,
            block_number=current.block_number,
        )
        return LeaderResult(election=election, leader=info, held_by_you=current.holder == registry.sender)

    return server


def serve(
    registry: Registry,
    *,
    transport: Literal["stdio", "streamable-http"] = "stdio",
    port: int = 8000,
    metrics: bool | None = None,
) -> None:
    """Run the server until the client closes it (stdio) or the process is stopped (HTTP, 127.0.0.1 only).

    Over HTTP, ``GET /metrics`` answers chainfence's Prometheus metrics (:mod:`chainfence.metrics`) when
    ``metrics`` is True, or None (the default) and the ``[metrics]`` extra is installed."""
    server = build_server(registry)
    if transport == "stdio":
        server.run("stdio")
    else:
        if metrics or (metrics is None and importlib.util.find_spec("prometheus_client") is not None):
            add_metrics_route(server)
        server.run("streamable-http", host="127.0.0.1", port=port)


def add_metrics_route(server: MCPServer) -> None:
    """``GET /metrics`` on ``server``'s own HTTP server: the metrics in Prometheus' text format (enabled now)."""
    from starlette.requests import Request
    from starlette.responses import Response

    from .._core.metrics import enable, exposition

    enable()

    async def metrics_endpoint(request: Request) -> Response:
        body, content_type = exposition()
        return Response(body, headers={"Content-Type": content_type})

    route: Any = server.custom_route  # the SDK's decorator is untyped
    route("/metrics", methods=["GET"], include_in_schema=False)(metrics_endpoint)
