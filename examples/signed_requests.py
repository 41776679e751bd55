"""A holder signs a request for one action and one service; the guard accepts it once.

The guide docs/howto/file-or-http.md."""

from pathlib import Path

from chainfence import Chain, FencedRequest, Guard, Registry
from chainfence.errors import RequestRejected
from chainfence.guard import RequestPolicy

chain = Chain.embedded()
registry = Registry.deploy(chain)
lease = registry.connect(chain.accounts[1]).acquire("reports/daily", ttl=60)

body = b'{"rows": 42}'
request = lease.sign(body, action="POST /reports/daily", audience="reports-service")
headers = request.to_headers()  # Chainfence-Token, Chainfence-Action, Chainfence-Signature, ...

# A new embedded chain each run, so a new guard store: a guard refuses a store that holds
# another registry's marks (GuardStoreMismatch) rather than mix two token spaces.
for old in Path().glob("service.sqlite*"):
    old.unlink()
guard = Guard(registry, path="service.sqlite", mode="strict", requests=RequestPolicy(audience="reports-service"))
received = FencedRequest.from_headers(headers)  # MalformedRequest if a header is missing or bad
guard.check_request(received, body, action="POST /reports/daily")  # accepted once
try:
    guard.check_request(received, body, action="POST /reports/daily")
except RequestRejected as refused:  # ReplayedRequest, durably (also after a restart)
    print(refused.http_status, type(refused).__name__)
guard.close()
