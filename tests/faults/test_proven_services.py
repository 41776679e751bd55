"""The proven mode where services check tokens: ``fenced_transaction(headers=...)``, ``FencingMiddleware``
over a proven guard, and ``chainfence verify --proven``, each behind lying providers.

The story (tests/support/proven.py): alice's token A is stale, bob's B is
current. Each test first shows the control, the same surface in strict mode
through the lying provider, accepting alice's stale write (the SQL row is
written, the app answers 200, ``verify`` exits 0); then the proven surface
with headers from a quorum in which the honest are k: a typed refusal that
names the provider (nothing written; 503 with the reason; exit 13), or the
true verdict read through the lie.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3

import httpx
import pytest

from chainfence import FencedRequest, Guard, cli
from chainfence.errors import (
    HeaderBehind,
    HeadersDisagree,
    HeaderStale,
    InvalidInput,
    ProofInvalid,
    ProviderUnavailable,
    StaleToken,
)
from chainfence.guard import Proven
from chainfence.integrations.asgi import FencingMiddleware
from chainfence.integrations.sql import fenced_transaction
from chainfence.proofs import TrustedHeaders
from tests.support.proven import RESOURCE, forge_alice_live, quorum, serve_the_past, strict_through

# ---------------------------------------------------------------------------
# fenced_transaction
# ---------------------------------------------------------------------------


class Table:
    """An application table on SQLite, written only through the fence."""

    def __init__(self, path):
        self.path = path
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE reports (day TEXT PRIMARY KEY, body TEXT)")
            conn.execute("INSERT INTO reports VALUES ('2026-11-21', 'nothing yet')")

    def write(self, registry, token, body, **options):
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            with fenced_transaction(conn, registry, RESOURCE, token, strict=True, **options) as cur:
                cur.execute("UPDATE reports SET body = ? WHERE day = '2026-11-21'", (body,))
        finally:
            conn.close()

    def state(self):
        with sqlite3.connect(self.path) as conn:
            (body,) = conn.execute("SELECT body FROM reports").fetchone()
            row = conn.execute("SELECT token FROM chainfence_marks").fetchone()
        return body, 0 if row is None else row[0]


def test_fenced_transactions_through_liars(story, providers, tmp_path):
    liar, h2, h3 = providers
    forge_alice_live(story, liar)
    registry = strict_through(liar.url, story)
    # The control: strict mode through the liar commits alice's stale write.
    fooled = Table(tmp_path / "control.sqlite")
    fooled.write(registry, story.stale, "alice, stale")
    assert fooled.state() == ("alice, stale", story.stale)
    table = Table(tmp_path / "app.sqlite")
    headers = quorum(liar.url, h2.url, h3.url, story=story)
    for token in (story.stale, story.current):  # the liar's proofs: nothing it proves is believed
        with pytest.raises(ProofInvalid) as refused:
            table.write(registry, token, "never", headers=headers)
        assert refused.value.source == liar.url
    assert table.state() == ("nothing yet", 0)
    # Proofs from an honest provider: the truth, through the same lying registry connection.
    with pytest.raises(StaleToken):
        table.write(registry, story.stale, "alice, stale", headers=headers, proof_provider=h2.url)
    table.write(registry, story.current, "bob", headers=headers, proof_provider=h2.url)
    assert table.state() == ("bob", story.current)


def test_a_forged_header_fools_a_fence_trusting_its_provider_not_one_asking_a_quorum(story, providers, tmp_path):
    liar, h2, h3 = providers
    forge_alice_live(story, liar, headers=True)
    registry = strict_through(liar.url, story)
    trusting = Table(tmp_path / "trusting.sqlite")  # the trust is the assumption: fooled
    trusting.write(registry, story.stale, "alice", headers=TrustedHeaders(liar.url, clock=story.registry.chain.now))
    assert trusting.state() == ("alice", story.stale)
    table = Table(tmp_path / "app.sqlite")
    with pytest.raises(ProofInvalid):
        table.write(registry, story.stale, "never", headers=quorum(liar.url, h2.url, h3.url, story=story, k=2))
    with pytest.raises(HeadersDisagree):
        table.write(registry, story.stale, "never", headers=quorum(liar.url, h2.url, h3.url, story=story, k=3))
    assert table.state() == ("nothing yet", 0)


def test_a_fence_refuses_stale_heads_providers_down_and_a_head_behind_its_mark(story, providers, tmp_path):
    p1, p2, p3 = providers
    registry = strict_through(p3.url, story)
    table = Table(tmp_path / "app.sqlite")
    headers = quorum(p1.url, p2.url, p3.url, story=story, max_age=10)
    table.write(registry, story.current, "bob", headers=headers)
    serve_the_past(p1, story.stale_block)
    serve_the_past(p2, story.stale_block)
    with pytest.raises(HeaderStale):  # a lagging majority: the k-th head is old by the clock
        table.write(registry, story.current, "bob again", headers=headers)
    # Behind, but fresh enough: block A's state has no bob; the table's mark is bob's token.
    with pytest.raises(HeaderBehind) as behind:
        table.write(registry, story.current, "bob again", headers=quorum(p1.url, p2.url, p3.url, story=story))
    assert (behind.value.chain_token, behind.value.mark, behind.value.floor) == (story.stale, story.current, None)
    p1.honest()
    p2.down = True
    p1.down = True
    with pytest.raises(ProviderUnavailable) as down:
        table.write(registry, story.current, "bob again", headers=headers)
    assert set(down.value.sources) == {p1.url, p2.url}
    assert table.state() == ("bob", story.current)
    with pytest.raises(InvalidInput):
        table.write(registry, story.current, "x", proof_provider=p1.url)  # proofs without a header source


# ---------------------------------------------------------------------------
# FencingMiddleware
# ---------------------------------------------------------------------------

AUDIENCE = "reports-service"


def fenced_app(guard):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"written"})

    return FencingMiddleware(app, guard=guard, audience=AUDIENCE, resource=RESOURCE)


def post(story, middleware, holder, token):
    registry = story.registry
    body = b"report"
    request = FencedRequest.sign(
        registry.eip712_domain(),
        resource=RESOURCE,
        token=token,
        holder=holder,
        action="POST /reports/daily",
        audience=AUDIENCE,
        payload=body,
        key=registry.chain.key_of(holder),
    )

    async def send():
        transport = httpx.ASGITransport(app=middleware)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            return await client.post("/reports/daily", content=body, headers=request.to_headers())

    return asyncio.run(send())


def test_the_middleware_over_a_proven_guard_answers_503_with_the_reason(story, providers, tmp_path):
    liar, h2, h3 = providers
    forge_alice_live(story, liar)
    registry = strict_through(liar.url, story)
    with Guard(registry, tmp_path / "strict.sqlite", mode="strict") as strict:  # the control: 200 for alice
        assert post(story, fenced_app(strict), story.alice, story.stale).status_code == 200
    headers = quorum(liar.url, h2.url, h3.url, story=story)
    with Guard(registry, tmp_path / "proven.sqlite", mode=Proven(headers=headers)) as guard:
        answer = post(story, fenced_app(guard), story.alice, story.stale)
        assert answer.status_code == 503
        document = answer.json()
        assert document["error"] == "ProofInvalid" and document["provider"] == liar.url
        assert liar.url in document["message"] and isinstance(document["block"], int)
        assert guard.marks() == {}
    with Guard(
        registry, tmp_path / "k3.sqlite", mode=Proven(headers=quorum(liar.url, h2.url, h3.url, story=story, k=3))
    ) as guard:
        forge_alice_live(story, liar, headers=True)
        answer = post(story, fenced_app(guard), story.alice, story.stale)
        assert (answer.status_code, answer.json()["error"]) == (503, "HeadersDisagree")
    liar.honest()
    with Guard(registry, tmp_path / "honest.sqlite", mode=Proven(headers=headers)) as guard:
        app = fenced_app(guard)
        assert post(story, app, story.alice, story.stale).status_code == 409
        assert post(story, app, story.bob, story.current).status_code == 200
        serve_the_past(h2, story.stale_block)
        serve_the_past(h3, story.stale_block)
        stale = quorum(liar.url, h2.url, h3.url, story=story, max_age=10)
    with Guard(registry, tmp_path / "stale.sqlite", mode=Proven(headers=stale)) as guard:
        answer = post(story, fenced_app(guard), story.bob, story.current)
        assert (answer.status_code, answer.json()["error"]) == (503, "HeaderStale")
        h2.down = h3.down = True
        answer = post(story, fenced_app(guard), story.bob, story.current)
        assert (answer.status_code, answer.json()["error"]) == (503, "ProviderUnavailable")
        assert set(answer.json()["providers"]) == {h2.url, h3.url}
        assert guard.marks() == {}


# ---------------------------------------------------------------------------
# chainfence verify --proven
# ---------------------------------------------------------------------------


@pytest.fixture
def verify(monkeypatch, tmp_path, capsys, anvil_node):
    """``chainfence verify`` in process: (exit code, the --json document)."""
    for name in ("CHAINFENCE_RPC_URL", "CHAINFENCE_REGISTRY", "CHAINFENCE_DEPLOYMENT", "CHAINFENCE_PRIVATE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)

    def run(story, rpc_url, token, *flags):
        if "--proven" in flags:  # the verifier's clock: the honest node's (the suite's anvil runs a logical clock)
            flags = (*flags, "--clock-rpc", anvil_node.url)
        capsys.readouterr()
        code = cli.main(
            ["verify", RESOURCE, "--token", str(token), "--rpc-url", rpc_url, "--registry", story.registry.address]
            + ["--json", *flags]
        )
        out = capsys.readouterr().out.strip()
        return code, (json.loads(out) if out else None)

    return run


def test_verify_proven_through_liars(story, providers, verify):
    liar, h2, h3 = providers
    forge_alice_live(story, liar)
    # The control: plain verify through the liar says alice's stale token is current.
    assert verify(story, liar.url, story.stale)[0] == cli.EXIT_OK
    quorum_flags = ["--proven", "--headers", f"{liar.url},{h2.url}", "--headers", h3.url, "--quorum", "2"]
    code, document = verify(story, liar.url, story.stale, *quorum_flags)
    assert code == cli.EXIT_UNVERIFIED == 13
    assert document["error"] == "ProofInvalid" and document["source"] == liar.url
    code, document = verify(story, liar.url, story.stale, *quorum_flags, "--proof-rpc", h2.url)
    assert code == cli.EXIT_NOT_CURRENT and document["reason"] == "StaleToken"
    code, document = verify(story, liar.url, story.current, *quorum_flags, "--proof-rpc", h2.url)
    assert code == cli.EXIT_OK and document["current"] and document["proven"]["vouched_by"]
    # A forged header with its matching proof: one trusted header provider is fooled, the quorum is not.
    forge_alice_live(story, liar, headers=True)
    assert verify(story, liar.url, story.stale, "--proven", "--trusted-headers", liar.url)[0] == cli.EXIT_OK
    assert verify(story, liar.url, story.stale, *quorum_flags)[0] == cli.EXIT_UNVERIFIED
    code, document = verify(story, h2.url, story.stale, *quorum_flags[:-2], "--quorum", "3")
    assert code == cli.EXIT_UNVERIFIED and document["error"] == "HeadersDisagree"
    # A lagging majority: stale by the clock; providers down: exit 5, naming them.
    liar.honest()
    serve_the_past(liar, story.stale_block)
    serve_the_past(h2, story.stale_block)
    code, document = verify(story, h3.url, story.current, *quorum_flags, "--max-age", "10")
    assert code == cli.EXIT_UNVERIFIED and document["error"] == "HeaderStale"
    liar.down = h2.down = True
    code, document = verify(story, h3.url, story.current, *quorum_flags)
    assert code == cli.EXIT_CONNECTION and document["error"] == "ProviderUnavailable"
    assert set(document["sources"]) == {liar.url, h2.url}


def test_verify_proven_refuses_a_half_configured_header_source(story, providers, verify):
    p1, p2, _ = providers
    for flags in (
        ["--proven"],  # no header source: never a silent downgrade to the one --rpc-url
        ["--headers", p1.url],  # a header source without --proven
        ["--proven", "--headers", p1.url, "--quorum", "2"],  # k above n
        ["--proven", "--headers", f"{p1.url},{p1.url}"],  # one provider, two votes
        ["--proven", "--trusted-headers", p1.url, "--headers", p2.url],
        ["--proven", "--headers", "not a url"],
    ):
        code, document = verify(story, p1.url, story.current, *flags)
        assert code == cli.EXIT_USAGE, flags
    assert p1.count("eth_getProof") == 0
