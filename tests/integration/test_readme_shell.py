"""The documentation's shell snippets (the README's and the site's pages) run as written, against a
`chainfence node` of their own.

A fenced block whose info string is ``sh run`` (GitHub reads the first word) is a snippet a reader can
paste into a terminal where `chainfence node` runs in another one, in the same directory: each is run
here by bash with ``-e`` (every line must succeed, unless the snippet itself says what to do on a
failure), in the node's working directory, with the venv's ``chainfence`` on ``PATH`` and no
``CHAINFENCE_*`` variable but what the snippet sets (the node's deployment file names the node and the
registry). Commands a snippet leaves to the reader (``do-the-work``) are stubs on ``PATH``.

The Python snippet that needs a node (``Chain.connect``, in docs/howto/real-chain.md) runs here too, with the
node's URL.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chainfence.testing.anvil import dev_keys
from tests.integration.test_cli_node import node  # noqa: F401 - a fixture: a fresh `chainfence node`
from tests.support import docs

pytestmark = pytest.mark.anvil


def shell_blocks() -> list[str]:
    return docs.blocks("sh run")


def block(marker: str) -> str:
    return docs.block("sh run", marker)


def python_block(marker: str) -> str:
    return docs.block("python", marker)


def bash(script: str, workdir: Path, stubs: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["PATH"] = os.pathsep.join([str(stubs), str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=workdir, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture
def stubs(tmp_path) -> Path:
    """Commands the snippets leave to the reader: `do-the-work ITEM` records ITEM and succeeds."""
    folder = tmp_path / "stubs"
    folder.mkdir()
    work = folder / "do-the-work"
    work.write_text(f'#!/bin/sh\necho "$1" >> {tmp_path / "worked.txt"}\n')
    work.chmod(0o755)
    return folder


def test_every_runnable_block_has_its_test():
    markers = ("chainfence acquire reports/daily --ttl 60", "claimed=$(chainfence claim backfill")
    assert len(shell_blocks()) == len(markers)
    for marker in markers:
        block(marker)


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
