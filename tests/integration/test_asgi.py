"""A FastAPI app behind FencingMiddleware, served by uvicorn on loopback, called with httpx."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request

from chainfence import FencedRequest, Guard, Timeouts
from chainfence.integrations.asgi import FencingMiddleware
from chainfence.testing.anvil import free_port
from tests.support.sequencer import wait_until

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = "reports/daily"
AUDIENCE = "reports-service"
ACTION = "POST /reports/daily"


def sign(lease, body, *, action=ACTION, audience=AUDIENCE):
    return lease.sign(body, action=action, audience=audience)


def make_app(guard: Guard, audience: str = AUDIENCE) -> tuple[FastAPI, dict]:
    store: dict = {"body": None, "writes": []}
    app = FastAPI()

    @app.post("/reports/daily")
    async def write_report(request: Request):
        fenced: FencedRequest = request.scope["chainfence"]
        store["body"] = (await request.body()).decode()
        store["writes"].append(fenced.token)
        return {"ok": True, "token": fenced.token, "holder": fenced.holder}

    @app.get("/health")
    async def health():
        return {"ok": True}

    app.add_middleware(
        FencingMiddleware,
        guard=guard,
        audience=audience,
        resource=lambda scope: RESOURCE if scope["path"] == "/reports/daily" else None,
    )
    return app, store


class Server:
    """uvicorn on 127.0.0.1:<free port> in a thread."""

    def __init__(self, app):
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: self.server.started or not self.thread.is_alive(), "uvicorn started")
        if not self.server.started:
            raise RuntimeError("uvicorn did not start")
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def service(embedded, tmp_path):
    guard = Guard(embedded, path=tmp_path / "guard.sqlite")
    app, store = make_app(guard)
    with Server(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        yield client, store
    guard.close()


def post(client, lease_or_request, body=b"report", headers=None, *, url="/reports/daily"):
    if headers is None:
        request = sign(lease_or_request, body) if hasattr(lease_or_request, "sign") else lease_or_request
        headers = request.to_headers()
    return client.post(url, content=body, headers=headers)


def test_the_holder_writes_and_the_app_sees_the_verified_request(service, embedded):
    client, store = service
    lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
    response = post(client, lease, b"the report")
    assert response.status_code == 200, response.text
    assert response.json() == {"ok": True, "token": lease.token, "holder": lease.holder}
    assert store["body"] == "the report"


def test_unfenced_routes_pass_through(service):
    client, _ = service
    assert client.get("/health").json() == {"ok": True}


@pytest.mark.parametrize(
    ("case", "status", "error"),
    [
        ("no-headers", 400, "MalformedRequest"),
        ("bad-token-header", 400, "MalformedRequest"),
        ("other-body", 400, "MalformedRequest"),
        ("foreign-signature", 401, "InvalidSignature"),
        ("non-holder", 403, "RequestMisdirected"),  # field "holder" (SignerNotHolder in 0.1)
        ("other-resource", 403, "RequestMisdirected"),
        ("other-method", 403, "RequestMisdirected"),
        ("other-query", 403, "RequestMisdirected"),
        ("other-service", 403, "RequestMisdirected"),
        ("replay", 409, "ReplayedRequest"),
        ("stale", 409, "StaleToken"),
    ],
)
def test_refusals_have_the_documented_status(service, embedded, case, status, error):
    client, store = service
    chain = embedded.chain
    alice, bob = embedded.connect(chain.accounts[1]), embedded.connect(chain.accounts[2])
    lease = alice.acquire(RESOURCE, ttl=10)
    body = b"report"
    request = sign(lease, body)
    headers = request.to_headers()
    if case == "no-headers":
        headers = {}
    elif case == "bad-token-header":
        headers["Chainfence-Token"] = "seven"
    elif case == "other-body":
        body = b"tampered"
    elif case == "foreign-signature":
        headers = FencedRequest.sign(
            embedded.eip712_domain(),
            resource=RESOURCE,
            token=lease.token,
            holder=lease.holder,
            action=ACTION,
            audience=AUDIENCE,
            payload=body,
            key=chain.key_of(bob.sender),
        ).to_headers()
    elif case == "non-holder":
        headers = FencedRequest.sign(
            embedded.eip712_domain(),
            resource=RESOURCE,
            token=lease.token,
            holder=bob.sender,
            action=ACTION,
            audience=AUDIENCE,
            payload=body,
            key=chain.key_of(bob.sender),
        ).to_headers()
    elif case == "other-resource":
        other = bob.acquire("reports/weekly", ttl=10)
        headers = sign(other, body).to_headers()
    elif case == "other-method":
        headers = sign(lease, body, action="PUT /reports/daily").to_headers()
    elif case == "other-query":
        headers = sign(lease, body, action="POST /reports/daily?dry_run=1").to_headers()
    elif case == "other-service":
        headers = sign(lease, body, audience="billing-service").to_headers()
    elif case == "replay":
        assert post(client, None, body, headers).status_code == 200
    elif case == "stale":
        assert post(client, None, body, headers).status_code == 200
        chain.advance_time(11)
        newer = bob.acquire(RESOURCE, ttl=60)
        assert post(client, newer, body).status_code == 200
        headers = sign(lease, body).to_headers()
    writes_before = list(store["writes"])
    response = post(client, None, body, headers)
    assert response.status_code == status, response.text
    assert response.json()["error"] == error
    assert store["writes"] == writes_before, "a refused request never reaches the app"


def test_a_request_accepted_by_one_service_is_refused_by_another_fenced_by_the_same_resource(embedded, tmp_path):
    """Two services fence their writes by one resource; a request signed for the first, replayed at the
    second (same resource, same token, valid signature), is refused there: it names its audience."""
    guards = [Guard(embedded, path=tmp_path / f"{name}.sqlite") for name in ("reports", "billing")]
    (app_a, store_a), (app_b, store_b) = make_app(guards[0], "reports-service"), make_app(guards[1], "billing-service")
    with (
        Server(app_a) as a,
        Server(app_b) as b,
        httpx.Client(base_url=a.url, timeout=60) as ca,
        httpx.Client(base_url=b.url, timeout=60) as cb,
    ):
        lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
        headers = sign(lease, b"pay").to_headers()
        assert post(ca, None, b"pay", headers).status_code == 200
        refused = post(cb, None, b"pay", headers)
    for guard in guards:
        guard.close()
    assert (refused.status_code, refused.json()["error"]) == (403, "RequestMisdirected")
    assert store_b["writes"] == [] and store_a["writes"] == [lease.token]


def test_the_middleware_answers_503_when_the_chain_cannot_be_asked(anvil_node, on_anvil, tmp_path):
    """The node stops answering: a fenced request gets 503 (fail closed), never a 500 or a pass."""
    from chainfence import Chain, Registry
    from tests.support.anvil import dev_keys
    from tests.support.rpc_proxy import RpcProxy

    with RpcProxy(anvil_node.url) as proxy:
        # request_timeout: a safety net; the stopped node hangs up at once, it does not make the SDK wait.
        registry = Registry.at(
            Chain.connect(proxy.url, private_keys=dev_keys(3), timeouts=Timeouts(request=60)), on_anvil.address
        )
        guard = Guard(registry, path=tmp_path / "guard.sqlite", mode="strict")
        app, store = make_app(guard)
        lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=60)
        with Server(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            proxy.down = True
            response = post(client, lease, b"report")
        guard.close()
    assert response.status_code == 503, response.text
    assert response.json()["error"] == "NodeUnreachable"
    assert store["writes"] == []


def test_an_oversized_body_is_refused(embedded, tmp_path):
    guard = Guard(embedded, path=tmp_path / "g.sqlite")
    app, _ = make_app(guard)
    app.user_middleware[0].kwargs["max_body"] = 10
    with Server(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
        response = post(client, lease, b"x" * 11)
    guard.close()
    assert response.status_code == 413


def test_real_agents_through_a_pause(on_anvil, tmp_path):
    """An agent process posts a signed part; it is SIGSTOPped past its lease; another agent takes over
    and posts; SIGCONT: its next post is refused with 409 and the report keeps the successor's write.

    Sequenced by the agent's output and input, not by its pace: it is stopped while it waits for the
    line that lets it post again, and gets that line only after SIGCONT."""
    guard = Guard(on_anvil, path=tmp_path / "guard.sqlite")
    app, store = make_app(guard)
    with Server(app) as server:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.agent",
                "post",
                on_anvil.chain.w3.provider.endpoint_uri,
                on_anvil.address,
                "1",
                RESOURCE,
                "5",
                server.url,
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = agent.stdout.readline()
        assert line, agent.stderr.read()
        first = json.loads(line)
        assert first["status"] == 200, first
        os.kill(agent.pid, signal.SIGSTOP)
        try:
            chain = on_anvil.chain
            chain.advance_time(first["expires_at"] - chain.now() + 5)
            successor = on_anvil.connect(chain.accounts[2]).acquire(RESOURCE, ttl=60)
            with httpx.Client(base_url=server.url, timeout=60) as client:
                assert post(client, successor, b"successor's report").status_code == 200
        finally:
            os.kill(agent.pid, signal.SIGCONT)
        out, err = agent.communicate("post part 2\n", timeout=60)
    guard.close()
    last = json.loads(out.splitlines()[-1])
    assert (last["part"], last["status"], last["error"]) == (2, 409, "StaleToken"), err
    assert store["body"] == "successor's report"
    assert store["writes"][-1] == successor.token


def test_a_guard_that_cannot_judge_answers_503_without_its_store_path(embedded, tmp_path):
    """A closed (or forked, or unusable) guard: 503, fail closed, and the body does not reveal the store's path."""
    guard = Guard(embedded, path=tmp_path / "secret-store.sqlite")
    app, store = make_app(guard)
    lease = embedded.connect(embedded.chain.accounts[1]).acquire(RESOURCE, ttl=60)
    guard.close()
    with Server(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        response = post(client, lease, b"report")
    assert (response.status_code, response.json()["error"]) == (503, "GuardError")
    assert "secret-store" not in response.text and store["writes"] == []


def test_a_middleware_without_an_audience_is_refused_typed(embedded, tmp_path):
    """Neither ``audience=`` nor a guard with one: ``InvalidInput`` naming the argument, before any request."""
    from chainfence.errors import InvalidInput

    guard = Guard(embedded, path=tmp_path / "g.sqlite")
    try:
        assert guard.audience is None
        with pytest.raises(InvalidInput) as refused:
            FencingMiddleware(FastAPI(), guard=guard, resource="reports")
        assert refused.value.argument == "audience" and "audience=" in str(refused.value)
    finally:
        guard.close()
