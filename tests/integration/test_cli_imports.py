"""The commands a shell agent runs per task start like a tool: none loads web3, eth-account or py_ecc.

Issue #19: as whole processes, ``chainfence lock NAME -- true`` and ``chainfence
status NAME`` took about a second each, 57x and 67x etcdctl's time, and the
time was imports: ``eth_account`` loading py_ecc's BLS12-381 tables through
``eth_keyfile``, web3 and its providers, eth-abi and eth-utils (which load
pydantic). A URL and a key now go through the SDK's own node layer
(``chainfence._node``: lean HTTP, coincurve signing, its own ABI codec, keys,
checksums and result shapes), so these commands import none of them.

Structural, not timed (``scripts/bench_cli_vs_etcdctl.py`` measures time): each
command runs as users run it, ``python -X importtime -m chainfence ...``, against
the suite's anvil node, configured from the environment as a shell agent is,
and every module it imported is read from the interpreter's own report. The
control shows the same reading catches web3 and eth-account when they load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from chainfence import Registry
from chainfence.testing.anvil import dev_keys

#: Packages none of the per-task commands may import over a URL (the first four are issue #19's; the rest
#: are what brought pydantic, aiohttp, requests and cffi's C parser along, seconds between them).
FORBIDDEN = (
    "web3",
    "eth_account",
    "py_ecc",
    "eth_keyfile",
    "eth_abi",
    "eth_utils",
    "eth_keys",
    "eth_typing",
    "hexbytes",
    "pydantic",
    "aiohttp",
    "requests",
    "eth_tester",
    "pycparser",
)


#: Run before the command: at exit, the names of every module loaded are written to the file $MODULES_SEEN
#: names. ``-X importtime`` alone misses a module loaded with ``importlib.import_module`` (the CLI loads its
#: command's module so, and the package its public names), which reports only the imports inside it.
_SEEN_AT_EXIT = (
    "import atexit, os, sys\n"
    "atexit.register(lambda: open(os.environ['MODULES_SEEN'], 'w').write('\\n'.join(sorted(sys.modules))))\n"
)


def imported(argv: list[str], env: dict[str, str], *, code: str | None = None) -> tuple[int, str, set[str]]:
    """(exit status, stdout, every module imported) of ``python -X importtime -m chainfence ARGV``
    (or of ``-c code``): what ``-X importtime`` reports and what ``sys.modules`` holds at exit."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        seen = os.path.join(folder, "modules")
        run = (
            code
            or "import runpy, sys\nsys.argv[0] = 'chainfence'\nrunpy.run_module('chainfence', run_name='__main__')\n"
        )
        command = [sys.executable, "-X", "importtime", "-c", _SEEN_AT_EXIT + run, *([] if code else argv)]
        done = subprocess.run(
            command, env={**env, "MODULES_SEEN": seen}, capture_output=True, text=True, timeout=120, check=False
        )
        modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        if os.path.exists(seen):
            with open(seen, encoding="utf-8") as file:
                modules |= set(file.read().split())
    return done.returncode, done.stdout, modules


#: What none of the per-task commands loads either, over a URL (issue #19, each a measured share of a
#: command's start: docs/benchmarks/history.md, "Instructions per command"): logging (with traceback), datetime, shutil (with bz2, lzma),
#: pathlib, textwrap, socket (with selectors; plain HTTP goes through _socket), the idna codec (stringprep),
#: urllib.parse (with ipaddress), group commit, and the command modules of other commands. ``lock`` runs its
#: command with subprocess (which loads selectors and signal). The SDK's records are dataclasses and its
#: methods' signatures inspect's (``dataclasses`` and ``inspect`` load, with ``ast``, ``dis``, ``tokenize``,
#: ``linecache`` and ``copy``): docs/explanation/design.md, "One node stack, and where start-time work may live".
NOT_AT_START = (
    "logging",
    "traceback",
    "datetime",
    "shutil",
    "bz2",
    "lzma",
    "pathlib",
    "textwrap",
    "socket",
    "selectors",
    "subprocess",
    "signal",
    "encodings.idna",
    "stringprep",
    "urllib.parse",
    "ipaddress",
    "chainfence.deployment",
    *(f"chainfence.cli.{group}" for group in ("start", "audit", "ops", "node", "demo", "lock", "leases", "reads")),
    "chainfence.cli._supervisor",
)
#: What each command may load of NOT_AT_START: its own command module, and lock its supervisor and subprocess.
OWN = {
    "lock": frozenset({"chainfence.cli.lock", "chainfence.cli._supervisor", "subprocess", "selectors", "signal"}),
    **dict.fromkeys(("acquire", "renew", "release", "claim", "complete"), frozenset({"chainfence.cli.leases"})),
    **dict.fromkeys(("status", "verify"), frozenset({"chainfence.cli.reads"})),
}


def forbidden(modules: set[str], names: tuple[str, ...] = FORBIDDEN) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in names))


@pytest.fixture
def agent_env(on_anvil: Registry) -> dict[str, str]:
    """The environment of a shell agent: the node's URL, the registry, a key; nothing else of chainfence's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env.update(
        CHAINFENCE_RPC_URL=on_anvil.chain.rpc.transport.url,
        CHAINFENCE_REGISTRY=on_anvil.address,
        CHAINFENCE_PRIVATE_KEY=dev_keys(10)[7],
    )
    return env


def test_every_per_task_command_imports_neither_web3_nor_eth_account_nor_py_ecc(agent_env, tmp_path):
    """acquire, status, verify, renew, release, claim, complete and lock -- CMD, each in its own process."""
    seen: dict[str, set[str]] = {}

    def run(name: str, *argv: str) -> str:
        status, out, modules = imported(list(argv), agent_env)
        assert status == 0, f"{name} exited {status}"
        assert "chainfence.cli" in modules and "chainfence._node.rpc" in modules, "the check sees the imports"
        seen[name] = modules
        return out

    lease = json.loads(run("acquire", "acquire", "jobs/imports", "--ttl", "60", "--json"))
    token = str(lease["token"])
    run("status", "status", "jobs/imports")
    run("verify", "verify", "jobs/imports", "--token", token)
    run("renew", "renew", "jobs/imports", "--token", token, "--ttl", "60")
    run("release", "release", "jobs/imports", "--token", token)
    claimed = json.loads(run("claim", "claim", "imports-ws", "a", "b", "--ttl", "60", "--json"))
    run("complete", "complete", claimed["item"], "--workset", "imports-ws", "--token", str(claimed["token"]))
    marker = tmp_path / "ran"
    run("lock", "lock", "jobs/imports-lock", "--ttl", "60", "--", "touch", str(marker))
    assert marker.exists(), "lock ran its command"
    assert {name: forbidden(modules) for name, modules in seen.items()} == {name: [] for name in seen}
    assert {name: sorted(set(forbidden(modules, NOT_AT_START)) - OWN[name]) for name, modules in seen.items()} == {
        name: [] for name in seen
    }
    assert all(OWN[name] & modules for name, modules in seen.items()), "the check sees the command's own module"


def test_control_the_reading_catches_web3_and_eth_account_when_they_load(agent_env):
    """The naive path (a ``Web3`` for the node, eth-account for the key, as the SDK did before issue #19) is
    caught by the same reading: the check above can fail."""
    naive = (
        "import os\n"
        "from chainfence import Chain\n"
        "from eth_account import Account\n"
        "chain = Chain.connect(os.environ['CHAINFENCE_RPC_URL'], private_key=os.environ['CHAINFENCE_PRIVATE_KEY'])\n"
        "chain.w3.eth.chain_id\n"
        "Account.from_key(os.environ['CHAINFENCE_PRIVATE_KEY'])\n"
    )
    status, _, modules = imported([], agent_env, code=naive)
    assert status == 0
    assert {"web3", "eth_account", "py_ecc", "eth_keyfile"} <= {m.split(".")[0] for m in forbidden(modules)}


def test_control_the_reading_catches_what_a_command_should_not_load_at_start(agent_env):
    """What the per-task commands loaded before issue 19's start-up work (datetime, logging, a module
    imported through importlib, which -X importtime does not report) is caught by the same reading."""
    naive = "import datetime, logging, importlib\nimportlib.import_module('chainfence.cli.audit')\n"
    status, _, modules = imported([], agent_env, code=naive)
    assert status == 0
    assert {"datetime", "logging", "chainfence.cli.audit"} <= set(forbidden(modules, NOT_AT_START))


def test_a_url_and_a_key_alone_load_no_eth_library(agent_env):
    """The SDK itself, as a script uses it over a URL: connect, read, acquire, release."""
    code = (
        "import os\n"
        "from chainfence import Chain, Registry\n"
        "chain = Chain.connect(os.environ['CHAINFENCE_RPC_URL'], private_key=os.environ['CHAINFENCE_PRIVATE_KEY'])\n"
        "registry = Registry.at(chain, os.environ['CHAINFENCE_REGISTRY'])\n"
        "lease = registry.acquire('jobs/imports-sdk', ttl=60)\n"
        "assert registry.lease_of('jobs/imports-sdk').token == lease.token\n"
        "lease.release()\n"
    )
    status, _, modules = imported([], agent_env, code=code)
    assert status == 0
    assert forbidden(modules) == []
