"""Round trips per per-task command, counted at a proxy: more requests fail here, not in a benchmark.

Issue #19: a shell agent runs one command per task, each a fresh process that knows nothing of the
node yet. Each request is a round trip to the node (and, on a busy machine, a wait for it to be
scheduled), so a command asks what it needs in as few as it can:

- connecting: the node's client version and chain id in one JSON-RPC batch, then the registry's code
  and its maxTtl (an immutable, what every ttl is checked against before anything is sent) in another;
- status and verify of a live lease: the read itself, batched with the pending block's time, which
  the text output's "expires in N s" reuses;
- the commands that send a transaction: the sender's preflight, fee quote, nonce and send (the
  sender's own rules, ``tests/chain/test_round_trips.py``), and no read of maxTtl of their own.

Each command runs as users run it, a process of the ``chainfence`` entry point configured from the
environment, through :class:`~tests.support.rpc_proxy.RpcProxy` (kept-alive connections) in front of
the suite's anvil. The control shows the same counting sees the requests the commands made before:
the identity and the code asked one at a time, and maxTtl read on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chainfence import Registry
from chainfence.testing.anvil import dev_keys
from tests.support.rpc_proxy import RpcProxy

pytestmark = pytest.mark.anvil

ENTRY = str(Path(sys.executable).with_name("chainfence"))
CONNECT = ["web3_clientVersion+eth_chainId", "eth_getCode+eth_call"]
#: The sender's own requests for a first transaction (preflight, fee quote, nonce, send): at most.
FIRST_SEND = 5


class Through:
    """Processes run with the environment of a shell agent whose node is a proxy to the suite's anvil."""

    def __init__(self, proxy: RpcProxy, env: dict[str, str]):
        self.proxy = proxy
        self.env = env

    def run(self, argv: list[str]) -> tuple[list[str], str]:
        """(the requests the process made, by method; its stdout)."""
        start = len(self.proxy.log)
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return [method for method, _params, _fault in self.proxy.log[start:]], done.stdout

    def command(self, *argv: str) -> tuple[list[str], str]:
        return self.run([ENTRY, *argv])

    def script(self, code: str) -> tuple[list[str], str]:
        return self.run([sys.executable, "-c", code])


@pytest.fixture
def through(on_anvil: Registry):
    with RpcProxy(on_anvil.chain.rpc.transport.url, keep_alive=True) as proxy:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
        env.update(
            CHAINFENCE_RPC_URL=proxy.url,
            CHAINFENCE_REGISTRY=on_anvil.address,
            CHAINFENCE_PRIVATE_KEY=dev_keys(10)[8],
        )
        yield Through(proxy, env)


def test_each_per_task_command_asks_what_it_needs_in_few_round_trips(through):
    seen: dict[str, list[str]] = {}

    def run(*argv: str) -> str:
        seen[argv[0]], out = through.command(*argv)
        return out

    lease = json.loads(run("acquire", "jobs/trips", "--ttl", "60", "--json"))
    token = str(lease["token"])
    run("status", "jobs/trips")
    run("verify", "jobs/trips", "--token", token)
    run("renew", "jobs/trips", "--token", token, "--ttl", "60", "--json")
    run("release", "jobs/trips", "--token", token)
    claimed = json.loads(run("claim", "trips-ws", "a", "b", "--ttl", "60", "--json"))
    run("complete", claimed["item"], "--workset", "trips-ws", "--token", str(claimed["token"]))
    run("lock", "jobs/trips-lock", "--ttl", "60", "--", "true")

    assert {name: methods[:2] for name, methods in seen.items()} == dict.fromkeys(seen, CONNECT)
    assert seen["status"] == [*CONNECT, "eth_call+eth_getBlockByNumber"]
    assert seen["verify"] == [*CONNECT, "eth_call+eth_getBlockByNumber"]
    for name in ("acquire", "renew", "release", "claim", "complete", "lock"):
        after = seen[name][2:]
        assert "eth_call" not in after, f"{name} read maxTtl (or something else) on its own: {seen[name]}"
        sends = 2 if name == "lock" else 1  # lock releases after its command
        assert after.count("eth_sendRawTransactionSync") == sends, seen[name]
        assert len(after) <= FIRST_SEND + 2 * (sends - 1), seen[name]


def test_control_the_counting_sees_requests_asked_one_at_a_time(through):
    """What the commands asked before (the identity and the code one at a time, maxTtl on its own), asked
    by a script through the same proxy, is counted as such: the checks above can fail."""
    code = (
        "import os\n"
        "from chainfence._node.rpc import Rpc, connect_node\n"
        "rpc = Rpc(connect_node(os.environ['CHAINFENCE_RPC_URL'], timeout=10))\n"
        "address = os.environ['CHAINFENCE_REGISTRY']\n"
        "rpc.client_version(), rpc.chain_id(), rpc.code(address)\n"
        "rpc.call({'to': address, 'data': bytes.fromhex('f42f49fd')})\n"
    )
    methods, _ = through.script(code)
    assert methods == ["web3_clientVersion", "eth_chainId", "eth_getCode", "eth_call"]
    assert methods[:2] != CONNECT
