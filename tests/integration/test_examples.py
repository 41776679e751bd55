"""Every file in examples/ runs as written, on the embedded chain (the proven mode's on an anvil of its own),
from a directory of its own, and prints what its guide says it prints.

The docs include these files (``literalinclude``): what a reader copies is what runs here.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from tests.support import docs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
    return capsys.readouterr().out


def check_scheduled_job(out: str) -> None:
    assert out.splitlines() == [
        "machine-a: writing the report for 2026-11-28 with token 1",
        "machine-b: the report for 2026-11-28 is done or running elsewhere: not run again",
    ]


def check_first_lease(out: str) -> None:
    lines = out.splitlines()
    assert lines[0].startswith("alice holds reports/daily with token 1 until ") and lines[0].endswith(" UTC")
    assert lines[1].startswith("bob is refused: held by alice (True) until ")
    assert lines[2:] == ["bob holds it now with token 2: a higher token, a new epoch", "free again: True"]


def check_paused_agent_guard(out: str) -> None:
    assert "held by" in out and "rejected: token 1" in out and "acquired" in out
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00"  # times people read (issue 27)
    history = [line.split()[2:] for line in out.splitlines() if re.match(rf"{stamp} (acquired|released) ", line)]
    assert [row[-1] for row in history if row[0] == "acquired"][:2] == ["unheld", "expired"]


def check_keep_alive(out: str) -> None:
    assert "write part 1 with token 1" in out and "write part 2 with token 1" in out and "lost" not in out


def check_lease_set(out: str) -> None:
    assert out.splitlines() == [
        "holding [1, 2] (consecutive tokens)",
        "the other agent is refused: db/orders | db/invoices free: True",
        "released: True",
    ]


def check_group_commit(out: str) -> None:
    """Nine agents behind one account: eight acquire, keep and release through the batcher, each with its own
    token; the ninth, on a resource someone else holds, is refused alone."""
    lines = out.splitlines()
    tokens = [int(line.split()[2]) for line in lines if " token " in line]
    assert len(tokens) == 8 and len(set(tokens)) == 8
    assert all(" reason unheld" in line for line in lines[:-1] if "token" in line)
    assert sum(line.startswith("jobs/busy held by 0x") for line in lines) == 1
    words = lines[-1].split()  # "17 operations in 3 transactions"
    assert int(words[0]) == 17 and 1 <= int(words[3]) <= 17, lines[-1]


def check_wait(out: str) -> None:
    assert out.splitlines() == ["bob got it when alice released it: token 2 after 1", "bob runs jobs/etl with token 3"]


def check_election(out: str) -> None:
    assert out.splitlines() == [
        "leader: None",
        "alice leads with token 1",
        "bob leads with token 2",
        "a late write with token 1 is refused",
        "terms: [1, None, 2, None]",
    ]


def check_asyncio_lease(out: str) -> None:
    assert "async write with token 1" in out and "released: True" in out


def check_signed_requests(out: str) -> None:
    assert out.strip() == "409 ReplayedRequest"


def check_admission(out: str) -> None:
    assert out.strip() == "local 0"  # refused by the local list; the mark did not move


def check_protect_a_file(out: str) -> None:
    assert out.splitlines() == ["refused: LeaseExpired", "the file holds: bob's report"]


def check_fastapi_service(out: str) -> None:
    assert out.splitlines() == [
        "alice: {'written_with_token': 1}",
        "bob: {'written_with_token': 2}",
        "alice, late: 409 StaleToken",
        "a plain GET: {'body': \"bob's report\"}",
    ]


def check_sql_sqlite(out: str) -> None:
    assert out.splitlines() == [
        "refused: token 1 for 'reports/daily' is stale: token 2 superseded it",
        "the table holds: bob, the whole report",
    ]


def check_progress_watchdog(out: str) -> None:
    assert out.splitlines() == ["so far: 0 stuck, 0 crashed, 0 held too long", "stuck: [('jobs/etl', 1)]"]


def check_audit(out: str) -> None:
    lines = out.splitlines()
    assert lines[0].startswith("token 1: alice from ") and lines[0].endswith("issued because unheld, ended expired")
    assert lines[1].startswith("token 2: bob from ") and lines[1].endswith("issued because expired, ended released")
    assert lines[2:] == [
        "who held it then: alice True with token 1",
        "and once it had expired: None",
        "takeovers: [(2, 'EXPIRED')]",
    ]


def check_timeline(out: str) -> None:
    assert out.startswith("3 leases drawn in timeline.html (")


def check_namespaces(out: str) -> None:
    lines = out.splitlines()
    assert lines[0].startswith("refused: 0x") and lines[1] == "alice's token no longer counts anywhere"
    assert lines[2].startswith("lock-delay until ") and lines[2].endswith(" UTC")
    assert lines[3:] == ["[4, 5]", "True"]


def check_tooz_lock(out: str) -> None:
    lines = out.splitlines()
    assert lines[0].startswith("worker-1 holds it with fencing token ") and lines[1] == "worker-2 got it: True"


def check_proven_mode(out: str) -> None:
    assert out.splitlines() == [
        "refused, proven: token 1 for 'reports/daily' is stale: token 2 superseded it",
        "token 2 proven current: True",
    ]


CHECKS = {name.removeprefix("check_"): check for name, check in globals().items() if name.startswith("check_")}


def test_every_example_has_its_check():
    assert sorted(path.stem for path in EXAMPLES.glob("*.py")) == sorted(CHECKS)


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=pytest.mark.anvil) if name == "proven_mode" else name for name in sorted(CHECKS)],
)
def test_the_example_runs_as_written(name, tmp_path, monkeypatch, capsys):
    out = run(name, tmp_path, monkeypatch, capsys)
    CHECKS[name](out)
    # What a page shows as this file's output (```text output of examples/NAME.py) is what it printed.
    for page, shown in docs.outputs_shown(f"examples/{name}.py"):
        assert docs.not_printed(shown, out) == [], f"{page.name} shows what examples/{name}.py does not print"


def test_the_pages_show_the_output_of_examples_that_exist():
    shown = {
        info.removeprefix("text output of ")
        for path in docs.pages()
        for info, _ in docs.fences(path.read_text(encoding="utf-8"))
        if info.startswith("text output of ")
    }
    assert {"examples/first_lease.py", "examples/scheduled_job.py", "examples/keep_alive.py"} <= shown
    assert all((docs.ROOT / source).is_file() for source in shown if source.startswith("examples/"))


def test_control_an_output_block_the_example_does_not_print_is_found():
    printed = "alice holds reports/daily with token 1 until 2026-11-28 21:00:01 UTC\nfree again: True\n"
    assert docs.not_printed("alice holds reports/daily with token 1 until 2026-11-28 20:51:16 UTC\n", printed) == []
    assert docs.not_printed(
        "free again: True\nalice holds reports/daily with token 1 until 2026-11-28 20:51:16 UTC\n", printed
    ) == ["alice holds reports/daily with token 1 until 2026-11-28 20:51:16 UTC"]
    assert docs.not_printed("free again: False   <- a note\n", printed) == ["free again: False   <- a note"]
    assert docs.not_printed("free again: True   <- a note\n", printed) == []


@pytest.mark.parametrize(
    "name", ["paused_agent_guard", "election", "signed_requests", "admission", "fastapi_service", "protect_a_file"]
)
def test_an_example_with_a_guard_file_runs_twice(name, tmp_path, monkeypatch, capsys):
    """Each run starts a new embedded chain; the example starts its guard store anew rather than meet the last
    run's (a guard refuses another registry's store: GuardStoreMismatch)."""
    for _ in range(2):
        run(name, tmp_path, monkeypatch, capsys)


def test_control_a_lease_alone_lets_the_scheduled_job_run_twice(tmp_path, monkeypatch, capsys):
    """The scheduled job's firings with a lease instead of a claim: the second, after the first released,
    acquires token 2 and writes the report again (what the guide's claim refuses)."""
    from chainfence import Chain, Registry

    chain = Chain.embedded()
    registry = Registry.deploy(chain)
    written = []
    for machine in (registry.connect(chain.accounts[1]), registry.connect(chain.accounts[2])):
        with machine.acquire("nightly-report/2026-11-28", ttl=600) as lease:
            written.append(lease.token)
    assert written == [1, 2], "both firings wrote the report"
