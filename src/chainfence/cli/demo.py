"""``chainfence demo``: the failure fencing tokens exist for, run twice on the embedded chain.

Two agents share a report. Agent A takes the lease, starts writing, and
pauses past its lease (a GC pause, a laptop lid, a slow model call). Agent B
takes over with a higher token and writes the report. A wakes up, still
believing it holds the lease, and writes with its old token.

Run 1 protects the report with the lease alone: A's stale write lands on top
of B's and B's work is lost. Run 2 puts a :class:`~chainfence.Guard` in front
of the report: A's write is rejected with ``StaleToken`` and B's report
survives. The lease history of the resource, read back from the registry's
events, ends the demo.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..audit import EventKind, history
from ..chain import Chain
from ..errors import ChainfenceError, TokenNotCurrent
from ..guard import Guard
from ..lease import AcquireReason
from ..registry import Registry

RESOURCE = "reports/daily"


@dataclass
class ReportService:
    """The downstream resource: one report, overwritten by each accepted write.

    With a guard, every write presents its fencing token first.
    """

    guard: Guard | None
    content: str | None = None
    writes: list[tuple[str, int, bool, str]] = field(default_factory=list)

    def write(self, agent: str, token: int, text: str) -> tuple[bool, str]:
        if self.guard is not None:
            try:
                self.guard.check(RESOURCE, token)
            except TokenNotCurrent as rejected:
                why = f"{type(rejected).__name__}: {rejected}"
                self.writes.append((agent, token, False, why))
                return False, why
        self.content = text
        why = "guard: token is current" if self.guard is not None else "no fencing: every write is accepted"
        self.writes.append((agent, token, True, why))
        return True, why


@dataclass
class RunResult:
    fenced: bool
    final_content: str | None
    b_write_survived: bool
    tokens: dict[str, int]
    writes: list[tuple[str, int, bool, str]]


@dataclass
class DemoResult:
    unfenced: RunResult
    fenced: RunResult
    history: list[tuple[str, int, str, str]]


def _at(seconds: int) -> str:
    return f"{'t=+' + str(seconds) + 's':<7}"


class _Timeline:
    def __init__(self, out: TextIO, chain: Chain):
        self.out = out
        self.chain = chain
        self.start = chain.latest_time()

    def line(self, who: str, what: str, result: str = "") -> None:
        text = f"  {_at(self.chain.latest_time() - self.start)}  {who:<8} {what:<44} {result}".rstrip()
        print(text, file=self.out)

    def note(self, text: str) -> None:
        print(f"  {'':<7}  {'':<8} {text}", file=self.out)


def _run(out: TextIO, *, fenced: bool, ttl: int, pause: int, store: Path) -> tuple[RunResult, Registry, int]:
    chain = Chain.embedded(accounts=3)
    registry = Registry.deploy(chain)
    agent_a = registry.connect(chain.accounts[1])
    agent_b = registry.connect(chain.accounts[2])
    guard = Guard(registry, path=store) if fenced else None
    service = ReportService(guard)
    timeline = _Timeline(out, chain)
    print(f"  agent-A is {chain.accounts[1]}, agent-B is {chain.accounts[2]}", file=out)

    try:
        lease_a = agent_a.acquire(RESOURCE, ttl=ttl)
        timeline.line(
            "agent-A",
            f"acquire {RESOURCE} (ttl {ttl}s)",
            f"token {lease_a.token}, lease until t=+{lease_a.expires_at - timeline.start}s",
        )
        ok, _ = service.write("agent-A", lease_a.token, "A: draft, part 1 of 2")
        timeline.line("agent-A", f'write "part 1 of 2" with token {lease_a.token}', "accepted" if ok else "REJECTED")
        timeline.line("agent-A", f"...paused for {pause}s (GC, sleep, slow model call)...")

        chain.advance_time(pause)
        gone = registry.lease_of(RESOURCE) is None
        timeline.line(
            "chain",
            f"agent-A's lease expired at t=+{lease_a.expires_at - timeline.start}s",
            "(resource is free)" if gone else "",
        )

        lease_b = agent_b.acquire(RESOURCE, ttl=ttl)
        timeline.line(
            "agent-B",
            f"acquire {RESOURCE} (ttl {ttl}s)",
            f"token {lease_b.token} (previous token {lease_b.previous_token} {lease_b.reason.name.lower()})",
        )
        ok, _ = service.write("agent-B", lease_b.token, "B: complete report")
        timeline.line(
            "agent-B", f'write "complete report" with token {lease_b.token}', "accepted" if ok else "REJECTED"
        )

        timeline.line("agent-A", "wakes up, still believes it holds the lease")
        ok, why = service.write("agent-A", lease_a.token, "A: draft, part 2 of 2 (stale)")
        verdict = "accepted  <- overwrites agent-B's report" if ok else "REJECTED"
        timeline.line("agent-A", f'write "part 2 of 2" with token {lease_a.token}', verdict)
        if not ok:
            timeline.note(f"why: {why}")

        try:
            lease_a.renew()
        except ChainfenceError as refused:
            timeline.line(
                "agent-A", f"renew token {lease_a.token}", f"refused by the registry: {type(refused).__name__}"
            )
        else:  # pragma: no cover - the contract forbids it; the chain tests prove it
            raise AssertionError("the registry renewed a superseded lease")

        lease_b.release()
        timeline.line("agent-B", f"release token {lease_b.token}", "released")
    finally:
        if guard is not None:
            guard.close()

    survived = service.content == "B: complete report"
    print(f"  report now reads: {service.content!r}", file=out)
    if survived:
        print("  => agent-B's write survived: the stale holder was fenced off.", file=out)
    else:
        print("  => agent-B's write was LOST: a lock without fencing let the stale holder overwrite it.", file=out)
    result = RunResult(
        fenced=fenced,
        final_content=service.content,
        b_write_survived=survived,
        tokens={"agent-A": lease_a.token, "agent-B": lease_b.token},
        writes=service.writes,
    )
    return result, registry, timeline.start


def _history(out: TextIO, registry: Registry, start: int) -> list[tuple[str, int, str, str]]:
    accounts = registry.chain.accounts
    names = {accounts[1]: "agent-A", accounts[2]: "agent-B"}
    rows = []
    print(f"\nLease history of {RESOURCE!r}, read back from the registry's events:", file=out)
    print(f"  {'time':<7}  {'event':<9} {'token':>5}  {'holder':<8} detail", file=out)
    for event in history(registry, RESOURCE):
        holder = names.get(event.holder, event.holder)
        if event.kind is EventKind.ACQUIRED:
            assert event.reason is not None and event.expires_at is not None
            why = {
                AcquireReason.UNHELD: "resource was never held",
                AcquireReason.RELEASED: f"token {event.previous_token} was released",
                AcquireReason.EXPIRED: f"token {event.previous_token} had expired",
                AcquireReason.REACQUIRED: f"holder re-acquired over token {event.previous_token}",
            }[event.reason]
            detail = f"until t=+{event.expires_at - start}s; {why}"
        elif event.kind is EventKind.RENEWED:
            assert event.expires_at is not None
            detail = f"until t=+{event.expires_at - start}s"
        else:
            detail = ""
        print(
            f"  {_at(event.block_timestamp - start)}  {event.kind.value:<9} {event.token:>5}  {holder:<8} {detail}".rstrip(),
            file=out,
        )
        rows.append((event.kind.value, event.token, holder, detail))
    return rows


def run(out: TextIO, *, ttl: int = 30, pause: int = 45) -> DemoResult:
    """Run both halves of the demo, writing the timeline to ``out``."""
    if ttl < 1 or pause <= ttl:
        raise ValueError("the demo needs ttl >= 1 and a pause longer than the ttl")
    print("chainfence demo: a paused agent wakes up after its lease ran out", file=out)
    print("(embedded eth-tester chain; times are chain time since the run started)\n", file=out)

    with tempfile.TemporaryDirectory(prefix="chainfence-demo-") as tmp:
        print("Run 1: the report trusts the lease alone (no fencing)", file=out)
        unfenced, _, _ = _run(out, fenced=False, ttl=ttl, pause=pause, store=Path(tmp) / "unused.sqlite")
        print("\nRun 2: the same agents, the report behind a chainfence Guard", file=out)
        fenced, registry, start = _run(out, fenced=True, ttl=ttl, pause=pause, store=Path(tmp) / "guard.sqlite")
        history = _history(out, registry, start)
    return DemoResult(unfenced=unfenced, fenced=fenced, history=history)
