"""Protect a SQL table: each write commits only in a transaction that checks the token, in token order.

SQLite here; a psycopg 3 connection to PostgreSQL 13+ works the same (its placeholder is %s).
The guide docs/howto/sql.md.
"""

import sqlite3

from chainfence import Chain, Registry
from chainfence.errors import StaleToken
from chainfence.integrations.sql import fenced_transaction

chain = Chain.embedded()
registry = Registry.deploy(chain)
alice = registry.connect(chain.accounts[1])
bob = registry.connect(chain.accounts[2])

conn = sqlite3.connect(":memory:", isolation_level=None)  # outside any transaction: the fence opens its own
conn.execute("CREATE TABLE reports (day TEXT PRIMARY KEY, body TEXT)")
conn.execute("INSERT INTO reports VALUES ('2026-11-28', '')")


def write(lease, body: str) -> None:
    ph = "?" if isinstance(conn, sqlite3.Connection) else "%s"  # the driver's placeholder: sqlite3 ?, psycopg %s
    with fenced_transaction(conn, registry, "reports/daily", lease.token) as cur:  # sqlite3 or psycopg 3
        cur.execute(f"UPDATE reports SET body = {ph} WHERE day = {ph}", (body, "2026-11-28"))


paused = alice.acquire("reports/daily", ttl=30)
write(paused, "alice, part 1")
chain.advance_time(31)  # dev chains only: alice pauses past her lease
takeover = bob.acquire("reports/daily", ttl=30)
write(takeover, "bob, the whole report")
try:
    write(paused, "alice, part 2")  # alice wakes up and writes with her old token
except StaleToken as stale:
    print("refused:", stale)
print("the table holds:", conn.execute("SELECT body FROM reports").fetchone()[0])
