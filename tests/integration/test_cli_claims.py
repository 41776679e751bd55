"""`chainfence claim`, `complete`, `renew --progress` and `stuck` as a shell script uses them."""

from __future__ import annotations

import subprocess

from tests.integration.test_cli_node import as_json, run, shared_node  # noqa: F401 - shared_node is a fixture

EXIT_NOTHING_TO_CLAIM = 8


def test_a_shell_agent_claims_completes_and_gets_exit_8_when_nothing_is_left(shared_node, tmp_path):  # noqa: F811
    workdir = shared_node.workdir
    first = run(workdir, "claim", "cli/batch", "a", "b", "--ttl", "60")
    assert first.returncode == 0, first.stderr
    item, token = first.stdout.split()
    assert item == "a" and int(token) > 0
    again = run(workdir, "claim", "cli/batch", "a", "b", "--ttl", "60")  # restarted, no memory: its own item back
    assert again.stdout.split()[0] == "a" and int(again.stdout.split()[1]) > int(token)
    stale = run(workdir, "complete", "a", "--workset", "cli/batch", "--token", token, "--result", "x")
    assert stale.returncode == 4 and "StaleToken" in stale.stderr, "the superseded incarnation's completion is refused"
    token = again.stdout.split()[1]
    assert (
        run(
            workdir, "renew", "a", "--workset", "cli/batch", "--token", token, "--ttl", "60", "--progress", "3"
        ).returncode
        == 0
    )
    done = run(workdir, "complete", "a", "--workset", "cli/batch", "--token", token, "--result", "42", "--json")
    assert done.returncode == 0, done.stderr
    items = tmp_path / "items.txt"
    items.write_text("a\nb\n")
    other = run(workdir, "claim", "cli/batch", "--items-file", str(items), "--ttl", "60", key=2)
    assert other.stdout.split()[0] == "b"
    nothing = run(workdir, "claim", "cli/batch", "a", "b", "--ttl", "60", "--json", key=3)
    assert nothing.returncode == EXIT_NOTHING_TO_CLAIM and as_json(nothing)["item"] is None


def test_stuck_lists_a_holder_renewing_without_progress(shared_node):  # noqa: F811
    workdir = shared_node.workdir
    token = str(as_json(run(workdir, "acquire", "cli/stuck", "--ttl", "600", "--json", key=4))["token"])
    for _ in range(3):
        renewed = run(workdir, "renew", "cli/stuck", "--token", token, "--ttl", "600", "--progress", "row 17", key=4)
        assert renewed.returncode == 0, renewed.stderr
    report = as_json(run(workdir, "stuck", "--renewals", "2", "--json"))
    assert [(e["resource"], e["token"], e["unchanged_renewals"]) for e in report["stuck"]] == [
        ("cli/stuck", int(token), 2)
    ]
    human = run(workdir, "stuck", "--renewals", "2")
    assert "cli/stuck" in human.stdout and human.returncode == 0


def test_bad_claim_and_progress_input_exit_2_and_send_nothing(shared_node):  # noqa: F811
    workdir = shared_node.workdir
    cases: list[subprocess.CompletedProcess[str]] = [
        run(workdir, "claim", "cli/bad", "--ttl", "60"),
        run(workdir, "claim", "cli/bad", "a", "a", "--ttl", "60"),
        run(workdir, "claim", "cli/bad", "a\u202e", "--ttl", "60"),
        run(workdir, "claim", "cli/bad", "a", "--ttl", "0"),
        run(workdir, "renew", "x", "--token", "1", "--ttl", "60", "--progress", "0x"),
        run(workdir, "renew", "x", "--token", "1", "--ttl", "60", "--progress", "0x" + "00" * 32),
        run(workdir, "stuck", "--renewals", "0"),
    ]
    for done in cases:
        assert done.returncode == 2, (done.args, done.stderr)
    after = as_json(run(workdir, "claim", "cli/bad", "a", "--ttl", "60", "--json"))
    assert after["item"] == "a" and after["reason"] == "unheld", "no bad claim took anything"


def test_nothing_left_of_one_item_says_one_item(shared_node):  # noqa: F811
    """Issue 27: "(1 items)"."""
    workdir = shared_node.workdir
    claimed = run(workdir, "claim", "cli/one", "only", "--ttl", "60", "--json")
    token = str(as_json(claimed)["token"])
    assert run(workdir, "complete", "only", "--workset", "cli/one", "--token", token).returncode == 0
    for items, said in ((["only"], "(1 item)"), (["only", "only-too"], None)):
        nothing = run(workdir, "claim", "cli/one", *items, "--ttl", "60")
        if said is None:  # a second item is free: claimed, not "nothing left"
            assert nothing.returncode == 0 and nothing.stdout.split()[0] == "only-too"
        else:
            assert nothing.returncode == EXIT_NOTHING_TO_CLAIM
            assert nothing.stderr.strip() == f"chainfence claim: nothing left to claim in 'cli/one' {said}"
    again = run(workdir, "claim", "cli/one", "only", "only-too", "--ttl", "60", key=2)
    assert again.returncode == EXIT_NOTHING_TO_CLAIM and "(2 items)" in again.stderr
