"""The CLI under faults: a deployment file is never clobbered, a dying node never leaves it silent,
and an unknown outcome can be reconciled from the command line."""

from __future__ import annotations

import json
import threading

import pytest

from chainfence import cli
from chainfence.testing.anvil import dev_keys
from tests.integration.test_cli_node import as_json, run, shared_node  # noqa: F401 - the fixture
from tests.support.rpc_proxy import RpcProxy
from tests.support.sequencer import wait_until


def test_deploy_without_rpc_url_keeps_the_url_it_used(shared_node, tmp_path):  # noqa: F811
    """No --rpc-url: the URL comes from the deployment file, and the rewritten file keeps it."""
    work = tmp_path / "w"
    (work / ".chainfence").mkdir(parents=True)
    original = shared_node.workdir / ".chainfence" / "deployment.json"
    (work / ".chainfence" / "deployment.json").write_text(original.read_text())
    deployed = run(work, "deploy", "--force", "--json")
    assert deployed.returncode == 0, deployed.stderr
    record = json.loads((work / ".chainfence" / "deployment.json").read_text())
    assert record["rpc_url"] == shared_node.info["rpc_url"], "not null: the next commands can use it"
    assert run(work, "status", key=None).returncode == 0


def test_deploy_refuses_to_orphan_a_registry_that_is_still_there(shared_node):  # noqa: F811
    deployment = shared_node.workdir / ".chainfence" / "deployment.json"
    before = deployment.read_text()
    refused = run(shared_node.workdir, "deploy")
    assert refused.returncode == cli.EXIT_USAGE and "--force" in refused.stderr
    assert deployment.read_text() == before


def test_a_node_that_dies_after_the_send_gives_every_hash_and_the_nonce(shared_node, tmp_path):  # noqa: F811
    """The send reaches the node, then the node stops answering before its answer (on anvil's automine
    the answer would carry the receipt: eth_sendRawTransactionSync): the CLI reports OutcomeUnknown (exit 6)
    with every hash it signed for the nonce (the acquisition; and its cancellation, if the --timeout came
    before the sender gave the node up: which comes first depends on the machine) and the nonce, in
    words and in --json, and says how to reconcile; then `chainfence tx` against the node settles it."""
    url, registry = shared_node.info["rpc_url"], shared_node.info["registry"]
    with RpcProxy(url) as proxy:
        proxy.plan("eth_sendRawTransaction", "drop_reply_then_down")
        done = run(
            tmp_path,
            "acquire",
            "cli/dying",
            "--ttl",
            "60",
            "--json",
            "--timeout",
            "3",
            "--rpc-url",
            proxy.url,
            "--registry",
            registry,
        )
    assert done.returncode == cli.EXIT_OUTCOME, done.stderr
    error = json.loads(done.stdout)
    assert error["error"] == "OutcomeUnknown" and error["exit_code"] == cli.EXIT_OUTCOME
    hashes = error["tx_hashes"]
    assert len(hashes) in (1, 2) and len(set(hashes)) == len(hashes), hashes
    assert isinstance(error["nonce"], int) and error["sender"]
    assert all(tx in done.stderr for tx in hashes) and f"nonce {error['nonce']}" in done.stderr
    assert f"chainfence tx {' '.join(hashes)}" in done.stderr
    assert "Traceback" not in done.stderr

    settled = run(tmp_path, "tx", *error["tx_hashes"], "--json", "--rpc-url", url, "--registry", registry, key=None)
    assert settled.returncode == 0, settled.stderr
    verdict = as_json(settled)
    assert verdict["settled"] and verdict["lease"]["resource"] == "cli/dying" and verdict["lease"]["token"] >= 1


def test_tx_says_not_settled_while_the_transaction_is_pending(shared_node, tmp_path):  # noqa: F811
    from chainfence import Chain

    url, registry = shared_node.info["rpc_url"], shared_node.info["registry"]
    chain = Chain.connect(url)
    chain._dev_rpc("evm_setAutomine", [False])
    try:
        from eth_account import Account

        from tests.support.anvil import dev_keys

        key = Account.from_key(dev_keys(10)[7])
        fees = {"maxFeePerGas": 10 * 10**9, "maxPriorityFeePerGas": 10**9}
        nonce = chain.rpc.nonce(key.address, "pending")
        pending = key.sign_transaction(
            {"to": key.address, "value": 0, "gas": 21_000, "nonce": nonce, "chainId": chain.chain_id, **fees}
        )
        chain.rpc.send_raw(pending.raw_transaction)
        waiting = run(tmp_path, "tx", pending.hash.to_0x_hex(), "--rpc-url", url, "--registry", registry, key=None)
        assert waiting.returncode == cli.EXIT_OUTCOME and "NOT settled" in waiting.stdout
        by_nonce = run(
            tmp_path,
            "tx",
            "--nonce",
            str(nonce),
            "--account",
            key.address,
            "--rpc-url",
            url,
            "--registry",
            registry,
            key=None,
        )
        assert by_nonce.returncode == cli.EXIT_OUTCOME and "nonce: pending" in by_nonce.stdout
    finally:
        chain._dev_rpc("evm_setAutomine", [True])
        chain.mine()
    mined = run(tmp_path, "tx", pending.hash.to_0x_hex(), "--rpc-url", url, "--registry", registry, key=None)
    assert mined.returncode == 0 and "settled" in mined.stdout and "cancellation" in mined.stdout


@pytest.mark.parametrize("args", [["tx"], ["tx", "0x1234"], ["tx", "--nonce", "1"]])
def test_tx_with_bad_input_is_a_usage_error(shared_node, args):  # noqa: F811
    done = run(shared_node.workdir, *args, key=None)
    assert done.returncode == cli.EXIT_USAGE, done.stderr
    assert "Traceback" not in done.stderr


def test_confirmations_a_node_never_mines_end_at_the_timeout_saying_why(tmp_path):
    """``--confirmations 2`` against a node that mines only when it is sent a transaction (anvil's automine,
    as ``chainfence node`` runs it): the command ends at ``--timeout`` with NotConfirmed (exit 6), saying that
    no block came on top and what to ask for there. Control: the SDK with its default bound on the
    confirmations (600 s, the CLI's too before) is still waiting once the command has ended, without a word,
    and returns only when blocks are mined on top."""
    from chainfence import Chain, Registry, Timeouts
    from chainfence.testing.anvil import AnvilProcess

    with AnvilProcess() as anvil:
        done = run(
            tmp_path, "deploy", "--confirmations", "2", "--timeout", "2", "--no-write", "--json", "--rpc-url", anvil.url
        )
        assert done.returncode == cli.EXIT_OUTCOME, done.stderr
        error = as_json(done)
        assert error["error"] == "NotConfirmed" and error["confirmations"] == 2 and error["tx_hashes"]
        assert "no block came on top" in error["notes"][0] and "0 confirmations" in error["notes"][0]
        assert "no block came on top" in done.stderr and "Traceback" not in done.stderr

        chain = Chain.connect(anvil.url, private_key=dev_keys(3)[2], confirmations=2, timeouts=Timeouts(receipt=2))
        deployed: list[object] = []
        control = threading.Thread(target=lambda: deployed.append(Registry.deploy(chain)), daemon=True)
        control.start()
        wait_until(lambda: chain.block_number() >= 2, "the control's deployment mined")
        finished = run(
            tmp_path, "deploy", "--confirmations", "2", "--timeout", "2", "--no-write", "--json", "--rpc-url", anvil.url
        )
        assert finished.returncode == cli.EXIT_OUTCOME, finished.stderr
        # The command mined its own deployment on top of the control's (one block): the control still lacks one.
        assert control.is_alive() and not deployed, "the control waits on: nothing bounds it but 600 s"
        chain.mine()
        control.join(60)
        assert not control.is_alive() and deployed, "one more block on top: the control's deployment is 2 deep"
