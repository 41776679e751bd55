"""Every attack on every surface where a service checks a token: each lie, beside the strict surface it fools.

Surfaces: the reader (``ProvenReader.check``), ``Guard(mode="proven")``,
``AsyncGuard``, ``fenced_transaction(headers=...)``, ``FencingMiddleware``
over a proven guard, ``chainfence verify --proven``. Each is asked about
one token of the story (tests/support/proven.py: alice's A stale, bob's B
current) and its answer reduced to a word: ``"accepted"``, or the name of
the error it refused with (for the middleware, the JSON body's ``error``;
for the CLI, ``--json``'s ``error`` or ``reason``).

Each attack says what the proven surfaces must answer, and the control:
the same surface in strict mode, asked through the lying provider, is
fooled (accepts alice's stale token), or for providers that are down, the
one provider still up alone would have answered (a downgrade the proven
mode never makes). Which provider stands where is the attack's: the
registry's own connection (what strict mode and the guard's follower ask),
the header providers (k of them must agree), the proof provider.

A colluding majority of the header providers is outside the stated
assumption (k of n honest): at k = 2 of 3 the proven surfaces accept
their forgery, and this test says so on purpose; at k = 3 they refuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from chainfence import FencedRequest, Guard, cli
from chainfence.aio import AsyncGuard
from chainfence.errors import ChainfenceError
from chainfence.guard import Proven
from chainfence.integrations.asgi import FencingMiddleware
from chainfence.integrations.sql import fenced_transaction
from chainfence.proofs import ProvenReader, QuorumHeaders, TrustedHeaders
from tests.support.forgery import ForgedWorld
from tests.support.proven import (
    RESOURCE,
    RESOURCE_ID,
    Story,
    forge_alice_live,
    fork_where_alice_renewed,
    serve_the_past,
    strict_through,
)

AUDIENCE = "reports-service"


@dataclass
class Setup:
    """Where each provider stands in one attack."""

    registry_url: str  # the registry's own connection: strict mode's provider, the guard's logs and identity
    header_urls: list[str] = field(default_factory=list)  # the quorum
    k: int | None = None
    trusted: str | None = None  # or one endpoint trusted for headers
    proof_url: str | None = None  # default: the registry's connection
    max_age: float = 60

    def headers(self, story: Story):
        if self.trusted is not None:
            return TrustedHeaders(self.trusted, clock=story.registry.chain.now, max_age=self.max_age)
        return QuorumHeaders(self.header_urls, k=self.k, clock=story.registry.chain.now, max_age=self.max_age)


# ---------------------------------------------------------------------------
# The surfaces: each answers "accepted" or the name of its refusal
# ---------------------------------------------------------------------------


def outcome(ask: Callable[[], object]) -> str:
    try:
        ask()
    except ChainfenceError as refused:
        return type(refused).__name__
    return "accepted"


class Surfaces:
    def __init__(self, story: Story, tmp_path, clock_url: str):
        self.story = story
        self.tmp_path = tmp_path
        self.clock_url = clock_url  # the verifier's clock: the honest node's chain time (a logical clock)

    def _path(self, what: str):
        return self.tmp_path / f"{what}-{uuid.uuid4().hex[:8]}.sqlite"

    # -- the reader ---------------------------------------------------------------------------------

    def reader(self, setup: Setup, token: int, *, proven: bool = True) -> str:
        registry = strict_through(setup.registry_url, self.story)
        if not proven:
            return outcome(lambda: registry.check_current(RESOURCE, token))
        reader = ProvenReader(
            registry.address, headers=setup.headers(self.story), provider=setup.proof_url or setup.registry_url
        )
        return outcome(lambda: reader.check(RESOURCE, token))

    # -- the guard ------------------------------------------------------------------------------------

    def guard(self, setup: Setup, token: int, *, proven: bool = True) -> str:
        registry = strict_through(setup.registry_url, self.story)
        options = self._guard_options(setup, proven)
        try:
            guard = Guard(registry, self._path("guard"), **options)
        except ChainfenceError as refused:
            return type(refused).__name__
        with guard:
            return outcome(lambda: guard.check(RESOURCE, token))

    def _guard_options(self, setup: Setup, proven: bool) -> dict:
        if not proven:
            return {"mode": "strict"}
        return {"mode": Proven(setup.headers(self.story), proofs=setup.proof_url)}

    def async_guard(self, setup: Setup, token: int, *, proven: bool = True) -> str:
        registry = strict_through(setup.registry_url, self.story)
        options = self._guard_options(setup, proven)

        async def ask() -> str:
            try:
                guard = await AsyncGuard.open(registry, self._path("async"), **options)
            except ChainfenceError as refused:
                return type(refused).__name__
            async with guard:
                try:
                    await guard.check(RESOURCE, token)
                except ChainfenceError as refused:
                    return type(refused).__name__
                return "accepted"

        return asyncio.run(ask())

    # -- fenced_transaction ----------------------------------------------------------------------------

    def sql(self, setup: Setup, token: int, *, proven: bool = True) -> str:
        registry = strict_through(setup.registry_url, self.story)
        path = self._path("app")
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE reports (body TEXT)")
            conn.execute("INSERT INTO reports VALUES ('nothing yet')")
        options = {"headers": setup.headers(self.story), "proof_provider": setup.proof_url} if proven else {}
        conn = sqlite3.connect(path)

        def write() -> None:
            with fenced_transaction(conn, registry, RESOURCE, token, strict=True, **options) as cur:
                cur.execute("UPDATE reports SET body = 'written'")

        try:
            said = outcome(write)
            (body,) = conn.execute("SELECT body FROM reports").fetchone()
        finally:
            conn.close()
        assert (body == "written") == (said == "accepted"), (said, body)  # a refusal writes nothing
        return said

    # -- the middleware --------------------------------------------------------------------------------

    def middleware(self, setup: Setup, token: int, *, proven: bool = True) -> str:
        story = self.story
        registry = strict_through(setup.registry_url, story)
        try:
            guard = Guard(registry, self._path("asgi"), **self._guard_options(setup, proven))
        except ChainfenceError as refused:
            return type(refused).__name__
        holder = story.alice if token == story.stale else story.bob

        async def app(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"written"})

        body = b"report"
        request = FencedRequest.sign(
            story.registry.eip712_domain(),
            resource=RESOURCE,
            token=token,
            holder=holder,
            action="POST /reports/daily",
            audience=AUDIENCE,
            payload=body,
            key=story.registry.chain.key_of(holder),
        )

        async def post() -> httpx.Response:
            middleware = FencingMiddleware(app, guard=guard, audience=AUDIENCE, resource=RESOURCE)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=middleware), base_url="http://s") as client:
                return await client.post("/reports/daily", content=body, headers=request.to_headers())

        with guard:
            answer = asyncio.run(post())
        if answer.status_code == 200:
            return "accepted"
        document = answer.json()
        assert answer.status_code == (409 if document["error"].endswith(("Token", "Expired")) else 503), document
        return document["error"]

    # -- chainfence verify -----------------------------------------------------------------------------

    def cli(self, setup: Setup, token: int, *, proven: bool = True) -> str:
        flags: list[str] = []
        if proven:
            flags = ["--proven", "--max-age", str(setup.max_age), "--clock-rpc", self.clock_url]
            if setup.trusted is not None:
                flags += ["--trusted-headers", setup.trusted]
            else:
                flags += ["--headers", *setup.header_urls]
                if setup.k is not None:
                    flags += ["--quorum", str(setup.k)]
            if setup.proof_url is not None:
                flags += ["--proof-rpc", setup.proof_url]
        argv = ["verify", RESOURCE, "--token", str(token), "--rpc-url", setup.registry_url]
        argv += ["--registry", self.story.registry.address, "--json", *flags]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
        document = json.loads(out.getvalue())
        if code == cli.EXIT_OK:
            return "accepted"
        if code == cli.EXIT_NOT_CURRENT:
            return document["reason"]
        expected = cli.EXIT_CONNECTION if document["error"] == "ProviderUnavailable" else cli.EXIT_UNVERIFIED
        assert code == expected, (code, document, err.getvalue())
        return document["error"]


SURFACES = ["reader", "guard", "async_guard", "sql", "middleware", "cli"]


@pytest.fixture
def surfaces(story, tmp_path, monkeypatch, anvil_node) -> Surfaces:
    for name in ("CHAINFENCE_RPC_URL", "CHAINFENCE_REGISTRY", "CHAINFENCE_DEPLOYMENT", "CHAINFENCE_PRIVATE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return Surfaces(story, tmp_path, anvil_node.url)


# ---------------------------------------------------------------------------
# The attacks: (setup, the token asked about, what the proven surfaces answer, the control's setup)
# ---------------------------------------------------------------------------


@dataclass
class Attack:
    setup: Setup
    token: int
    proven: set[str]  # what the proven surface may answer
    control: Setup | None  # strict mode here accepts the token (None: no control applies)


@contextlib.contextmanager
def attack(name: str, story: Story, providers, anvil_node) -> Iterator[list[Attack]]:
    liar, h2, h3 = providers
    quorum = [liar.url, h2.url, h3.url]
    through_liar = Setup(liar.url, quorum, k=2)
    if name == "honest":
        yield [
            Attack(through_liar, story.stale, {"StaleToken"}, None),
            Attack(through_liar, story.current, {"accepted"}, None),
        ]
    elif name == "forged_views":  # eth_call and eth_getStorageAt lie; proofs are honest
        forge_alice_live(story, liar)
        liar.handlers.pop("eth_getProof")
        yield [Attack(through_liar, story.stale, {"StaleToken"}, through_liar)]
    elif name == "forged_proofs":  # the proof re-hashed up to a new state root
        forge_alice_live(story, liar, proofs="state")
        yield [
            Attack(through_liar, story.stale, {"ProofInvalid"}, through_liar),
            Attack(Setup(liar.url, quorum, k=2, proof_url=h2.url), story.stale, {"StaleToken"}, through_liar),
        ]
    elif name == "forged_header":  # a forged header with a matching forged proof, from one provider
        forge_alice_live(story, liar, headers=True)
        yield [
            Attack(through_liar, story.stale, {"ProofInvalid"}, through_liar),
            Attack(Setup(liar.url, quorum, k=3), story.stale, {"HeadersDisagree"}, through_liar),
            # The trust is the assumption: one trusted header endpoint that lies is believed.
            Attack(Setup(liar.url, trusted=liar.url), story.stale, {"accepted"}, through_liar),
        ]
    elif name == "stale_block":  # a provider that serves an old block as its latest
        serve_the_past(liar, story.stale_block)
        liar.on("eth_getProof", lambda params, forward: forward([params[0], params[1], hex(story.stale_block)]))
        lagging = Setup(liar.url, quorum, k=2, max_age=10)
        yield [
            Attack(lagging, story.stale, {"ProofInvalid"}, lagging),
            Attack(Setup(liar.url, trusted=liar.url, max_age=10), story.stale, {"HeaderStale"}, lagging),
            Attack(Setup(liar.url, quorum, k=2, proof_url=h2.url, max_age=10), story.stale, {"StaleToken"}, lagging),
        ]
    elif name == "fork":  # one provider serves another branch, where alice renewed
        with fork_where_alice_renewed(story, anvil_node) as (fork, _):
            on_fork = Setup(fork.url, [fork.url, h2.url, h3.url], k=2)
            yield [Attack(on_fork, story.stale, {"ProofInvalid"}, on_fork)]
    elif name == "majority":  # two colluding liars of three: outside the assumption at k = 2
        expiry = story.registry.chain.now() + 3_600
        for each in (liar, h2):
            ForgedWorld(
                story.registry.address, RESOURCE_ID, holder=story.alice, token=story.stale, expires_at=expiry
            ).install(each, headers=True)
        yield [
            Attack(through_liar, story.stale, {"accepted"}, through_liar),  # on purpose: k of n honest is assumed
            Attack(Setup(liar.url, quorum, k=3, proof_url=h3.url), story.stale, {"HeadersDisagree"}, through_liar),
        ]
    elif name == "down":  # two of three header providers down; the registry's node is up
        liar.down = h2.down = True
        up = Setup(h3.url, quorum, k=2)
        yield [Attack(up, story.current, {"ProviderUnavailable"}, up)]
    else:  # pragma: no cover
        raise AssertionError(name)


ATTACKS = ["honest", "forged_views", "forged_proofs", "forged_header", "stale_block", "fork", "majority", "down"]


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("name", ATTACKS)
def test_each_attack_on_each_surface(name, surface, surfaces, story, providers, anvil_node):
    ask = getattr(surfaces, surface)
    with attack(name, story, providers, anvil_node) as cases:
        for case in cases:
            if case.control is not None:
                assert ask(case.control, case.token, proven=False) == "accepted", "the control must be fooled"
            said = ask(case.setup, case.token)
            assert said in case.proven, (name, surface, case.setup, said)
