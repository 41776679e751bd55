"""The documentation's shell snippets (the README's and the site's pages) run as written, against a
`chainfence node` of their own.

A fenced block whose info string is ``sh run`` (GitHub and MyST read the first word) is a snippet a reader
can paste into a terminal where `chainfence node` runs in another one, in the same directory: each is run
here by bash with ``-e`` (every line must succeed, unless the snippet itself says what to do on a
failure), in the node's working directory, with the venv's ``chainfence`` on ``PATH`` and no
``CHAINFENCE_*`` variable but what the snippet sets and what its page tells the reader to set (the node's
deployment file names the node and the registry). Commands a snippet leaves to the reader
(``do-the-work``, ``write-the-report``) are stubs on ``PATH``. Each block has its test (``RUNS``).

Two other marks are run here too, as close to as written as a test can: ``sh server`` (``chainfence
node``, in a terminal of its own: started with the same words on a free port) and ``sh real-chain`` (a
provider and a funded key: against an anvil of the test's own that mines a block a second, the
placeholders filled in, the same flags). Why the other marks cannot run: tests/unit/test_docs_blocks.py.

The Python snippet that needs a node (``Chain.connect``, in docs/howto/real-chain.md) runs here too, with the
node's URL.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from eth_account import Account

from chainfence import Chain, Registry
from chainfence.testing.anvil import AnvilProcess, dev_keys, free_port
from tests.integration.test_cli_node import node  # noqa: F401 - a fixture: a fresh `chainfence node`
from tests.support import docs

pytestmark = pytest.mark.anvil


def shell_blocks(mark: str = "run") -> list[str]:
    return [body for _, body in docs.shell_blocks(mark)]


def block(marker: str, mark: str = "run") -> str:
    (found,) = [body for body in shell_blocks(mark) if marker in body]
    return found


def python_block(marker: str) -> str:
    return docs.block("python", marker)


def bash(script: str, workdir: Path, stubs: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    """``script`` as a reader's terminal runs it; ``environment``: what the page tells the reader to set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["PATH"] = os.pathsep.join([str(stubs), str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(environment)
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=workdir, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture
def stubs(tmp_path) -> Path:
    """Commands the snippets leave to the reader: `do-the-work ITEM` records ITEM, `write-the-report` records
    that it ran; both succeed."""
    folder = tmp_path / "stubs"
    folder.mkdir()
    work = folder / "do-the-work"
    work.write_text(f'#!/bin/sh\necho "$1" >> {tmp_path / "worked.txt"}\n')
    work.chmod(0o755)
    report = folder / "write-the-report"
    report.write_text(f'#!/bin/sh\necho "report written" >> {tmp_path / "reports.txt"}\n')
    report.chmod(0o755)
    return folder


#: Each ```sh run block, by a line it holds, and the test that runs it.
RUNS = {
    "chainfence acquire reports/daily --ttl 60": "test_the_cli_walkthrough_runs_as_written",
    "claimed=$(chainfence claim backfill": "test_the_claim_idiom_exits_with_claims_code",
    "chainfence lock reports/daily --ttl 60 ./write-the-report.sh": "test_the_shell_agents_lock_runs_its_script",
    "claimed=$(chainfence claim nightly-report": "test_the_cron_line_runs_the_job_once",
    "chainfence audit history reports/daily": "test_the_audit_commands_answer_after_the_walkthrough",
    'chainfence audit verify --proofs --headers "$A" "$B" "$C"': "test_the_audit_commands_answer_after_the_walkthrough",
    "chainfence audit timeline reports/daily jobs/etl": "test_the_timeline_block_draws_the_walkthroughs_leases",
    'chainfence namespace policy set "$ns"': "test_the_namespace_commands_run_in_order",
    '--trusted-headers "$LIGHT_CLIENT"': "test_the_proven_verify_block_proves_a_token",
}


def test_every_runnable_block_has_its_test():
    blocks = shell_blocks()
    for body in blocks:
        held = [marker for marker in RUNS if marker in body]
        assert len(held) == 1, f"a ```sh run block with no test here (or two): {body.splitlines()[0]}"
    assert len(blocks) == len(RUNS)
    assert all(callable(globals().get(name)) for name in RUNS.values())


def walkthrough(node, stubs) -> str:  # noqa: F811
    """The tutorial's walkthrough, run first where a page says "after its walkthrough"."""
    done = bash(block("chainfence acquire reports/daily --ttl 60"), node.workdir, stubs)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_cli_walkthrough_runs_as_written(node, stubs):  # noqa: F811
    walkthrough = block("chainfence acquire reports/daily --ttl 60")
    key = re.search(r"export CHAINFENCE_PRIVATE_KEY=(0x[0-9a-f]{64})", walkthrough).group(1)
    assert key == dev_keys(10)[1] and key in str(node.info["accounts"]), "a key `chainfence node` prints"
    done = bash(walkthrough, node.workdir, stubs)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "acquired 'reports/daily': token 1" in out
    assert "current: token 1 of reports/daily" in out
    assert "released reports/daily token 1" in out
    assert "writing under token 2" in out, "lock ran the command given without --"
    assert out.rstrip().splitlines()[-5] == "acquired 'reports/daily': token 3"


def test_the_claim_idiom_exits_with_claims_code(node, stubs, tmp_path):  # noqa: F811
    """Run for two items three times: two agents' work, then exit 8 (nothing left), as the comment says."""
    idiom = block("claimed=$(chainfence claim backfill")
    env_key = f"export CHAINFENCE_PRIVATE_KEY={dev_keys(10)[1]}\n"
    codes = [bash(env_key + idiom, node.workdir, stubs).returncode for _ in range(3)]
    assert codes == [0, 0, 8]
    assert (tmp_path / "worked.txt").read_text().split() == ["2026-11-01", "2026-11-02"]


def test_control_reading_claims_output_straight_into_read_exits_1(node, stubs):  # noqa: F811
    """The idiom the README had: `||` sees read's status (1 at the end of its input), not claim's 8."""
    naive = (
        f"export CHAINFENCE_PRIVATE_KEY={dev_keys(10)[1]}\n"
        "read item token < <(chainfence claim backfill only-one --ttl 600) || exit  # exit 8: nothing left\n"
        'chainfence complete "$item" --workset backfill --token "$token" --result ok\n'
    )
    codes = [bash(naive, node.workdir, stubs).returncode for _ in range(2)]
    assert codes == [0, 1]


def test_the_chain_connect_example_runs_against_a_node(node, monkeypatch):  # noqa: F811
    """As written but for the node's URL (the README's is anvil's default port), in the node's directory."""
    example = python_block("chain = Chain.connect(")
    assert '"http://127.0.0.1:8545"' in example
    monkeypatch.chdir(node.workdir)
    monkeypatch.setenv("CHAINFENCE_PRIVATE_KEY", dev_keys(10)[1])
    namespace: dict = {}
    exec(compile(example.replace("http://127.0.0.1:8545", node.info["rpc_url"]), "README.md", "exec"), namespace)
    assert namespace["registry"].address == node.info["registry"]
    # Control: as the README had it, after the walkthrough's imports (Chain, Registry) but without `import os`.
    bare = (
        "from chainfence import Chain, Registry\nchain = Chain.connect(" + example.split("chain = Chain.connect(", 1)[1]
    )
    with pytest.raises(NameError, match="'os'"):
        exec(compile(bare.replace("http://127.0.0.1:8545", node.info["rpc_url"]), "README.md", "exec"), {})


def key(index: int = 1) -> str:
    return dev_keys(10)[index]


def providers(node) -> dict[str, str]:  # noqa: F811
    """Three URLs of the node, as three providers' (a header source counts a provider once, by its URL)."""
    port = node.info["rpc_url"].rsplit(":", 1)[1]
    return {"A": f"http://127.0.0.1:{port}", "B": f"http://localhost:{port}", "C": f"http://127.0.0.1:{port}/c"}


def test_the_shell_agents_lock_runs_its_script(node, stubs, tmp_path):  # noqa: F811
    """`./write-the-report.sh` is the reader's script: here one that records the token it was given."""
    script = node.workdir / "write-the-report.sh"
    script.write_text(f'#!/bin/sh\necho "$CHAINFENCE_RESOURCE $CHAINFENCE_TOKEN" > {tmp_path / "lock.txt"}\n')
    script.chmod(0o755)
    done = bash(block("./write-the-report.sh"), node.workdir, stubs)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "lock.txt").read_text().split() == ["reports/daily", "1"]


def test_the_cron_line_runs_the_job_once(node, stubs, tmp_path):  # noqa: F811
    """Fired twice (two machines, or a retry after it succeeded): the report is written once; the second
    firing exits 8 and runs nothing, as the page says."""
    cron = block("claimed=$(chainfence claim nightly-report")
    codes = [bash(cron, node.workdir, stubs, CHAINFENCE_PRIVATE_KEY=key()).returncode for _ in range(2)]
    assert codes == [0, 8]
    assert (tmp_path / "reports.txt").read_text().splitlines() == ["report written"]


def test_control_a_lease_instead_of_a_claim_runs_the_job_twice(node, stubs, tmp_path):  # noqa: F811
    """The failure the page starts from: under `lock`, the second firing after the first finished runs too."""
    leased = "chainfence lock nightly-report --ttl 600 write-the-report\n"
    codes = [bash(leased, node.workdir, stubs, CHAINFENCE_PRIVATE_KEY=key()).returncode for _ in range(2)]
    assert codes == [0, 0]
    assert (tmp_path / "reports.txt").read_text().splitlines() == ["report written"] * 2


def test_the_audit_commands_answer_after_the_walkthrough(node, stubs):  # noqa: F811
    walkthrough(node, stubs)
    done = bash(block("chainfence audit history reports/daily"), node.workdir, stubs)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("indexed blocks 1..")
    holder = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
    assert holder == Account.from_key(key()).address, "the page's holder is dev account 1, the walkthrough's"
    rows = re.findall(r"^reports/daily +(\d+) +(0x\w+) ", out, re.M)
    assert rows[:3] == [("1", holder), ("2", holder), ("3", holder)], out  # history: the walkthrough's leases
    assert "the index matches the chain" in out
    assert (node.workdir / "leases.html").stat().st_size > 0
    proven = bash(block("--proofs --headers"), node.workdir, stubs, **providers(node))
    assert proven.returncode == 0, proven.stderr
    assert "the index matches the chain (and the header source's headers, receipts and proofs)" in proven.stdout


def test_the_timeline_block_draws_the_walkthroughs_leases(node, stubs):  # noqa: F811
    walkthrough(node, stubs)
    done = bash(block("chainfence audit timeline reports/daily jobs/etl"), node.workdir, stubs)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("timeline.html: 3 leases of 2 resources"), done.stdout
    assert "<svg" in (node.workdir / "timeline.html").read_text()


def test_the_namespace_commands_run_in_order(node, stubs):  # noqa: F811
    commands = block('chainfence namespace policy set "$ns"')
    ns = re.search(r"^ns=(0x[0-9a-f]{40})", commands, re.M).group(1)
    peer = re.search(r"^peer=(0x[0-9a-fA-F]{40})", commands, re.M).group(1)
    assert ns == Account.from_key(key(1)).address.lower() and peer == Account.from_key(key(2)).address
    done = bash(commands, node.workdir, stubs)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"granted {ns}/db to {peer}: token " in out
    assert f"revoked {ns}/jobs»j1 token " in out
    assert f"offered namespace '{ns}' to {peer}" in out


def test_the_proven_verify_block_proves_a_token(node, stubs):  # noqa: F811
    acquired = bash(
        "chainfence acquire reports/daily --ttl 600 --json", node.workdir, stubs, CHAINFENCE_PRIVATE_KEY=key()
    )
    token = str(json.loads(acquired.stdout)["token"])
    env = {**providers(node), "LIGHT_CLIENT": node.info["rpc_url"], "TOKEN": token}
    done = bash(block('--trusted-headers "$LIGHT_CLIENT"'), node.workdir, stubs, **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(f"current: token {token} of reports/daily") == 2
    assert done.stdout.count("proven at block ") == 2
    # Control: a token that is not current is refused, proven, whoever asks.
    stale = bash(block('--trusted-headers "$LIGHT_CLIENT"'), node.workdir, stubs, **{**env, "TOKEN": "7"})
    assert stale.returncode != 0


# ---------------------------------------------------------------------------
# ```sh server: `chainfence node`, in a terminal of its own
# ---------------------------------------------------------------------------


def test_the_server_blocks_start_the_node_they_describe(tmp_path):
    """Each ```sh server block is `chainfence node` with what its comment says it does: started with the
    same words and a free port (the page's is anvil's default, 8545), it says anvil is up on 127.0.0.1, that
    the state is kept in .chainfence/, that the registry is deployed; Ctrl-C stops it and saves the state."""
    servers = shell_blocks("server")
    assert len(servers) == 2 and len(set(servers)) == 1, "node.md and the tutorial start it alike"
    command, said = servers[0].strip().split("#", 1)
    assert command.split() == ["chainfence", "node"]
    assert "anvil on 127.0.0.1:8545" in said and "state in .chainfence/" in said and "registry deployed" in said
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    process = subprocess.Popen(
        [*command.split(), "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        lines: list[str] = []
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Ctrl-C to stop"):
                break
        out = "\n".join(lines)
        assert f"chainfence node: anvil on http://127.0.0.1:{port}" in out, out
        assert "(deployed, recorded in .chainfence/deployment.json)" in out
        assert "state: .chainfence/anvil-state.json" in out
    finally:
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=60)
        process.stdout.close()
        process.stderr.close()
    assert code == 0
    assert (tmp_path / ".chainfence" / "anvil-state.json").is_file()


# ---------------------------------------------------------------------------
# ```sh real-chain: a provider and a funded key
# ---------------------------------------------------------------------------


def filled_in(script: str, url: str, private_key: str) -> str:
    """A real-chain block with its placeholders filled in: the provider's URL, the key (nothing else)."""
    script = re.sub(r"^export CHAINFENCE_RPC_URL=\S+", f"export CHAINFENCE_RPC_URL={url}", script, flags=re.M)
    return re.sub(
        r"^export CHAINFENCE_PRIVATE_KEY=\S+", f"export CHAINFENCE_PRIVATE_KEY={private_key}", script, flags=re.M
    )


def test_the_real_chain_blocks_run_against_an_anvil_of_their_own(tmp_path, stubs):
    """The key, its address to fund, then `chainfence deploy` with the page's flags: on an anvil that mines a
    block a second (so that --confirmations 3 is reached as on a real chain), from an empty directory."""
    key_block, deploy_block = shell_blocks("real-chain")
    assert "https://your-provider.example/" in key_block and "CHAINFENCE_PRIVATE_KEY=0x..." in key_block
    assert deploy_block.split("#")[0].split() == ["chainfence", "deploy", "--max-ttl", "3600", "--confirmations", "3"]
    with AnvilProcess(extra_args=("--block-time", "1")) as anvil:
        exports = filled_in(key_block, anvil.url, key(3))
        shown = bash(exports, tmp_path, stubs)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.strip() == Account.from_key(key(3)).address, "the account to fund"
        deployed = bash(exports + deploy_block, tmp_path, stubs)
        assert deployed.returncode == 0, deployed.stderr
        deployment = json.loads((tmp_path / ".chainfence" / "deployment.json").read_text())
        assert deployment["registry"] in deployed.stdout
        registry = Registry.at(Chain.connect(anvil.url), deployment["registry"])
        assert registry.max_ttl == 3600
    # Control: as written, the block names no node that answers (a placeholder), and no key.
    assert bash(key_block, tmp_path, stubs).returncode != 0
