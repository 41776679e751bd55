"""An HTTP API behind FencingMiddleware: writes need a current token, signed by its holder; reads pass.

Needs FastAPI (and httpx for its TestClient, which plays the client here). The guide docs/howto/file-or-http.md.
"""

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from chainfence import Chain, Guard, Registry
from chainfence.guard import RequestPolicy
from chainfence.integrations.asgi import FencingMiddleware

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice = registry.connect(chain.accounts[1])
bob = registry.connect(chain.accounts[2])

# A new embedded chain each run, so a new guard store: a guard refuses a store that holds
# another registry's marks (GuardStoreMismatch) rather than mix two token spaces.
for old in Path().glob("api-guard.sqlite*"):
    old.unlink()
guard = Guard(registry, path="api-guard.sqlite", mode="strict", requests=RequestPolicy(audience="reports-service"))
report = {"body": ""}

app = FastAPI()


@app.get("/reports/daily")
def read_report() -> dict:
    return report


@app.post("/reports/daily")
async def write_report(request: Request) -> dict:
    verified = request.scope["chainfence"]  # the request the guard accepted: its token and holder
    report["body"] = (await request.body()).decode()
    return {"written_with_token": verified.token}


def fenced(scope) -> str | None:
    """The resource a request writes to: writes only (a GET is not fenced), on the report's path."""
    if scope["method"] in ("POST", "PUT", "PATCH", "DELETE") and scope["path"] == "/reports/daily":
        return "reports/daily"
    return None


app.add_middleware(FencingMiddleware, guard=guard, audience="reports-service", resource=fenced)
client = TestClient(app)


def post(lease, body: bytes):
    signed = lease.sign(body, action="POST /reports/daily", audience="reports-service")
    return client.post("/reports/daily", content=body, headers=signed.to_headers())


paused = alice.acquire("reports/daily", ttl=30)
print("alice:", post(paused, b"alice's draft").json())
chain.advance_time(31)  # dev chains only: alice pauses past her lease
takeover = bob.acquire("reports/daily", ttl=30)
print("bob:", post(takeover, b"bob's report").json())
late = post(paused, b"alice, late")
print("alice, late:", late.status_code, late.json()["error"])
print("a plain GET:", client.get("/reports/daily").json())
guard.close()
