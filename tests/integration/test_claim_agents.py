"""Task claims under fire: 8 agent processes, each with its own key, SIGKILLed at random (seeded)
over 50 items on a real anvil; every item must be completed exactly once, by its current claimant.

The agents are stepped one line at a time (``tests/support/agent.py claimer``): the schedule of
claims, completions, kills, restarts and expiries comes from a seeded RNG, not from the
machine's pace. The checker reads the registry's own events and final state, not what the
agents say. The control (``naive``: read the items' state, then acquire in a second
transaction) completes an item twice under a schedule that merely interleaves two agents.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import defaultdict

import pytest

from chainfence import EventKind, LeaseStatus, audit
from chainfence._sdk.names import item_id
from tests.integration.test_agents import ROOT, read_line, spawned  # noqa: F401 - spawned is a fixture

AGENTS = 8
ITEMS = 50
TTL = 60  # the claimer's ttl (tests/support/agent.py)


def items() -> list[str]:
    return [f"item-{i:03d}" for i in range(ITEMS)]


def start(spawned, registry, mode: str, key_index: int, workset: str) -> subprocess.Popen[str]:  # noqa: F811
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.agent",
            mode,
            registry.chain.w3.provider.endpoint_uri,
            registry.address,
            str(key_index),
            workset,
            str(ITEMS),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(process)
    assert read_line(process)["event"] == "ready"
    return process


def step(process: subprocess.Popen[str], line: str) -> dict:
    process.stdin.write(line + "\n")
    process.stdin.flush()
    return read_line(process)


@pytest.mark.timeout(1_800)
@pytest.mark.parametrize("seed", [8])
def test_eight_claimers_killed_at_random_complete_every_item_exactly_once(on_anvil, spawned, seed):  # noqa: F811
    rng = random.Random(seed)
    workset = f"jobs/{seed}"
    chain = on_anvil.chain
    first_block = chain.block_number() + 1
    agents = {index: start(spawned, on_anvil, "claimer", index + 1, workset) for index in range(AGENTS)}
    holding: dict[int, dict | None] = dict.fromkeys(agents)
    kills = restarts = expiries = refusals = 0
    said_completed: list[dict] = []

    def all_done() -> bool:
        statuses = [on_anvil.workset(workset).last_lease(item) for item in items()]
        return all(s is not None and s.status is LeaseStatus.DONE for s in statuses)

    for _ in range(2_000):  # a bound, far above what 50 items need
        index = rng.randrange(AGENTS)
        process = agents[index]
        roll = rng.random()
        # Kills are rarer than steps (each restart is a new Python process importing web3), and
        # still many: the assertion below requires at least 5 and at least one expiry.
        if holding[index] is not None and roll < 0.08:
            process.send_signal(signal.SIGKILL)  # mid-claim: no release, no goodbye
            process.wait()
            kills += 1
            agents[index] = start(spawned, on_anvil, "claimer", index + 1, workset)  # same key, no memory
            holding[index] = None
            restarts += 1
        elif holding[index] is not None and roll < 0.11:
            process.stdin.write("complete\n")  # killed while its completion is in flight
            process.stdin.flush()
            process.send_signal(signal.SIGKILL)
            process.wait()
            kills += 1
            agents[index] = start(spawned, on_anvil, "claimer", index + 1, workset)
            holding[index] = None
            restarts += 1
        elif roll < 0.14:
            chain.advance_time(TTL + 1)  # every live claim expires: crashed ones come free, no janitor
            expiries += 1
        elif holding[index] is None:
            answer = step(process, "claim")
            if answer["event"] == "claimed":
                holding[index] = answer
            else:
                assert answer["event"] == "nothing"
                if not any(holding.values()):
                    if all_done():
                        break
                    chain.advance_time(TTL + 1)  # only dead agents' claims are left: let them expire
                    expiries += 1
        else:
            answer = step(process, "complete")
            if answer["event"] == "completed":
                said_completed.append(answer)
            else:
                assert answer["event"] == "refused" and answer["error"] in ("StaleToken", "LeaseExpired"), answer
                refusals += 1
            holding[index] = None
    else:
        pytest.fail("the workload did not finish")

    # The registry's record: every item completed exactly once, by the token current at that moment.
    ids = {item_id(workset, item): item for item in items()}
    events = [e for e in audit.history(on_anvil, from_block=first_block) if e.resource_id in ids]
    completions: dict[str, list] = defaultdict(list)
    current: dict[str, int] = {}
    for event in events:
        item = ids[event.resource_id]
        if event.kind is EventKind.ACQUIRED:
            assert event.token > current.get(item, 0)
            current[item] = event.token
        elif event.kind is EventKind.COMPLETED:
            assert event.token == current[item], f"{item} completed by token {event.token}, not its current claim"
            completions[item].append(event)
    twice = {item: [e.token for e in found] for item, found in completions.items() if len(found) != 1}
    assert not twice, f"completed more than once: {twice}"
    assert set(completions) == set(items()), f"never completed: {sorted(set(items()) - set(completions))}"
    for item in items():
        final = on_anvil.workset(workset).last_lease(item)
        assert final.status is LeaseStatus.DONE and final.token == completions[item][0].token
    for said in said_completed:  # what the agents reported is what the chain recorded
        assert completions[said["item"]][0].token == said["token"]
    assert kills >= 5 and expiries >= 1, (kills, expiries)  # the schedule really attacked
    print(f"seed {seed}: {kills} kills, {restarts} restarts, {expiries} expiries, {refusals} refused completions")


def test_control_a_naive_read_then_acquire_completes_an_item_twice(on_anvil, spawned):  # noqa: F811
    """Two naive agents read the same free item before either takes it; the first completes and
    releases it, the second acquires the released resource and completes it again."""
    workset = "jobs/naive"
    first_block = on_anvil.chain.block_number() + 1
    a = start(spawned, on_anvil, "naive", 1, workset)
    b = start(spawned, on_anvil, "naive", 2, workset)
    assert step(a, "read")["item"] == step(b, "read")["item"] == "item-000"
    assert step(a, "take")["event"] == "completed"
    assert step(b, "take")["event"] == "completed"
    completed = [
        e
        for e in audit.history(on_anvil, f"{workset}/item-000", from_block=first_block)
        if e.kind is EventKind.COMPLETED
    ]
    assert len(completed) == 2, "the control must complete the item twice"
    for process in (a, b):
        os.kill(process.pid, signal.SIGKILL)
