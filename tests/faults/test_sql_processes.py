"""Agent processes appending rows to one SQLite file through fenced_transaction, on anvil.

Each agent has its own key and loops: acquire its resource, append rows
(each acknowledged only once its commit returned), release
(tests/support/sql_agent.py). The test stops holders with SIGSTOP until their
ttl has passed and another agent holds the resource, then lets them go on,
and SIGKILLs agents at random points. Afterwards, for every resource:

- every acknowledged row is in the database;
- in commit order (the AUTOINCREMENT id) the tokens never go back down.

The runs are sequenced by the agents' events, never by elapsed time. The
control is scripted: a holder that checks its token and then writes in a
transaction of its own, stopped between the two, misorders the history in
the same harness; the fenced agent, stopped at the same point, is refused.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from tests.support.sql_agent import Run, Zygote, create_database, violations

RESOURCES = ("ledger/a", "ledger/b")
TTL = 60
#: Funded anvil accounts the agents sign with (0 deploys; 1 and 2 are the other tests' agents).
KEYS = range(3, 10)


@pytest.fixture(scope="module")
def zygote():
    process = Zygote()
    yield process
    process.close()


@pytest.fixture
def run(on_anvil, zygote, tmp_path):
    """A run of agents on a fresh database; every agent is killed before the chain is reverted."""
    agents = Run(zygote, on_anvil, create_database(tmp_path / "ledger.sqlite"), ttl=TTL)
    yield agents
    agents.finish()


def test_paused_and_killed_agents_lose_no_acknowledged_write_and_never_go_back_in_token_order(
    run, on_anvil, anvil_chain, tmp_path
):
    """Four agents, two per resource, then four rounds in a random order: twice a holder that just
    committed is SIGSTOPped, its ttl passes, a new agent takes the resource over (and, when the
    sleeper was not inside a write, commits first), and the sleeper is SIGCONTed; twice an agent
    is SIGKILLed at a random moment after a commit and replaced. Then everyone is killed. The
    seed is in the failure message; CHAINFENCE_SQL_SEED replays it."""
    seed = int(os.environ.get("CHAINFENCE_SQL_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    keys = iter(KEYS)
    resource_of: dict[str, str] = {}
    key_of: dict[str, int] = {}

    def start(resource: str, key: int | None = None) -> str:
        name = f"agent{len(resource_of) + 1}"
        key_of[name] = next(keys) if key is None else key
        resource_of[name] = resource
        return run.spawn(name, key=key_of[name], resource=resource, seed=rng.randrange(2**32))

    def taken_over(resource: str, above: int):
        """An acquisition of ``resource`` with a token above ``above`` (so: after that moment)."""
        return lambda e: e["event"] == "acquired" and resource_of[e["agent"]] == resource and e["token"] > above

    def committed(resource: str, above: int):
        """A commit on ``resource`` with a token above ``above``."""
        return lambda e: e["event"] == "ack" and resource_of[e["agent"]] == resource and e["token"] > above

    for resource in RESOURCES:
        start(resource)
        start(resource)
    rounds = ["pause", "pause", "kill", "kill"]
    rng.shuffle(rounds)
    for kind in rounds:
        since = run.position()
        live = {name for name in resource_of if name not in run.exited}
        chosen = run.wait_for(lambda e, live=live: e["event"] == "ack" and e["agent"] in live, since)["agent"]
        resource = resource_of[chosen]
        if kind == "pause":
            # A holder that just committed sleeps through its ttl, wherever it is now; another
            # agent takes the resource over; then the sleeper goes on, with its old token.
            run.signal(chosen, signal.SIGSTOP)
            run.wait_stopped(chosen)
            run.barrier()
            inside = run.last_event_of(chosen)["event"] == "writing"  # may hold the write lock
            since, boundary = run.position(), on_anvil.latest_token()  # tokens above: issued from now on
            anvil_chain.advance_time(TTL + 1)
            successor = start(resource)  # an agent that is surely not waiting for the write lock
            if inside:  # nobody can commit before it goes on: wait for an acquisition only
                run.wait_for(taken_over(resource, boundary), since)
            else:  # a newer holder commits first: the sleeper's next write must be refused
                run.wait_for(committed(resource, boundary), since)
            run.signal(chosen, signal.SIGCONT)
            run.wait_for(lambda e, s=successor: e["agent"] == s and e["event"] in ("ack", "rejected"), since)
        else:
            time.sleep(rng.uniform(0, 0.03))  # a random point in whatever the agent does next
            run.signal(chosen, signal.SIGKILL)
            run.wait_for(lambda e, c=chosen: e["agent"] == c and e["event"] == "exited", since)
            boundary = on_anvil.latest_token()
            anvil_chain.advance_time(TTL + 1)  # its lease must not keep the resource for a whole ttl
            start(resource, key=key_of[chosen])  # a dead process's key is free again
            run.wait_for(taken_over(resource, boundary), since)
    run.finish()

    acked = run.acked()
    problems = violations(tmp_path / "ledger.sqlite", acked)
    assert problems == [], f"CHAINFENCE_SQL_SEED={seed}: {problems}"
    assert {resource_of[event["agent"]] for event in run.log if event["event"] == "ack"} == set(RESOURCES)


@pytest.mark.parametrize("mode", ["fenced", "naive"], ids=["fenced", "control-check-then-write"])
def test_a_holder_stopped_between_its_check_and_its_write_past_its_ttl(run, anvil_chain, tmp_path, mode):
    """Scripted. A acquires (naive: and checks its token on-chain), then stops just before its first
    write. Its ttl passes; B acquires and commits a row. A goes on and writes. Naive: A's row, with
    the lower token, commits after B's: the history goes back in token order. Fenced: A is refused
    (StaleToken) and the history is clean."""
    resource = RESOURCES[0]
    since = run.position()
    run.spawn("A", key=KEYS[0], resource=resource, mode=mode, pause_before_write=True)
    run.wait_for(lambda e: e["agent"] == "A" and e["event"] == "pausing", since)
    run.wait_stopped("A")
    anvil_chain.advance_time(TTL + 1)
    run.spawn("B", key=KEYS[1], resource=resource, mode=mode)
    b_ack = run.wait_for(lambda e: e["agent"] == "B" and e["event"] == "ack", since)
    since = run.position()
    run.signal("A", signal.SIGCONT)
    a_next = run.wait_for(lambda e: e["agent"] == "A" and e["event"] in ("ack", "rejected"), since)
    run.finish()

    a_token = next(e["token"] for e in run.events_of("A") if e["event"] == "acquired")
    assert a_token < b_ack["token"]
    problems = violations(tmp_path / "ledger.sqlite", run.acked())
    if mode == "naive":
        assert a_next["event"] == "ack", "the control must show the stale write landing"
        assert f"row A/{a_token}/0 (token {a_token}) committed after token {b_ack['token']} on {resource}" in problems
    else:
        assert (a_next["event"], a_next["error"]) == ("rejected", "StaleToken")
        assert problems == []
