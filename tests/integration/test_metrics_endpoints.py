"""Scrapes of running processes, read with prometheus_client's text-format parser: an agent keeping a lease
alive (``chainfence.metrics.serve``), ``chainfence lock`` (``CHAINFENCE_METRICS_PORT``), ``chainfence node
--metrics-port``, a guarded service (``FencingMiddleware(metrics_path=...)``) and ``chainfence mcp --http``.

Each scrape follows an event the process reported (a line it printed, an HTTP answer, a tool's result), and
checks that the values moved with it; none waits on the wall clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from mcp.client import Client

from chainfence import Guard
from chainfence.deployment import Deployment, save
from chainfence.integrations.asgi import FencingMiddleware
from chainfence.testing.anvil import dev_keys, free_port, port_is_free
from tests.support.scrape import scrape, value
from tests.support.sequencer import wait_until

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anvil


def moved(before, after, name, **labels) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def sends(samples) -> float:
    """Transactions sent (a node with EIP-7966 takes them with eth_sendRawTransactionSync)."""
    return sum(
        value(samples, "chainfence_rpc_requests_total", method=method)
        for method in ("eth_sendRawTransaction", "eth_sendRawTransactionSync")
    )


def read_line(process: subprocess.Popen[str], timeout: float = 120.0) -> str:
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()))
    reader.start()
    reader.join(timeout)
    if not line or not line[0]:
        process.kill()
        raise AssertionError(f"the process said nothing; stderr: {process.stderr.read()[-3000:]}")
    return line[0].strip()


@pytest.fixture
def spawned():
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_an_agent_keeping_a_lease_alive(spawned, on_anvil, anvil_node):
    agent = subprocess.Popen(
        [sys.executable, "-m", "tests.support.metrics_agent", anvil_node.url, on_anvil.address, "5", "metrics/agent"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(agent)
    url = json.loads(read_line(agent))["metrics"]
    assert read_line(agent) == "acquired"
    acquired = scrape(url)
    assert sends(acquired) >= 1
    assert value(acquired, "chainfence_keepalive_renewals_total", outcome="confirmed") == 0
    for count in (1, 2):
        agent.stdin.write("renew\n")
        agent.stdin.flush()
        assert read_line(agent) == f"renewed {count}"
        renewed = scrape(url)
        assert value(renewed, "chainfence_keepalive_renewals_total", outcome="confirmed") == count
        assert value(renewed, "chainfence_keepalive_renewal_margin_seconds_count") == count
        # Renewed when due (the clock moved to it): the whole interval's worth of the window was left.
        assert value(renewed, "chainfence_keepalive_renewal_margin_seconds_sum") == pytest.approx(27.0 * count)
    assert value(renewed, "chainfence_leases_ended_total", reason="released") == 0
    agent.stdin.write("release\n")
    agent.stdin.flush()
    assert read_line(agent) == "released"
    released = scrape(url)
    assert value(released, "chainfence_leases_ended_total", reason="released") == 1
    assert sends(released) > sends(renewed)
    agent.stdin.close()
    assert agent.wait(timeout=60) == 0


def test_chainfence_lock_serves_its_metrics_on_the_port_the_environment_names(on_anvil, anvil_node, tmp_path):
    save(Deployment.of(on_anvil, rpc_url=anvil_node.url), tmp_path / ".chainfence" / "deployment.json")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env.update(CHAINFENCE_PRIVATE_KEY=dev_keys(10)[6], CHAINFENCE_METRICS_PORT=str(port))
    # CMD prints what it was given of the port (nothing: lock keeps it for itself), then waits for a line.
    command = (
        "import os, sys; print(os.environ.get('CHAINFENCE_METRICS_PORT', 'unset'), flush=True); sys.stdin.readline()"
    )
    lock = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chainfence",
            "lock",
            "metrics/lock",
            "--ttl",
            "60",
            "--",
            sys.executable,
            "-c",
            command,
        ],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert read_line(lock) == "unset"  # CMD runs under the lease: it was acquired
        held = scrape(f"http://127.0.0.1:{port}/metrics")
        assert sends(held) == 1
        assert value(held, "chainfence_leases_ended_total", reason="released") == 0
        lock.stdin.write("done\n")
        lock.stdin.flush()
        assert lock.wait(timeout=120) == 0, lock.stderr.read()
        assert port_is_free(port)  # the server ended with the command
    finally:
        if lock.poll() is None:
            lock.kill()
            lock.wait()
        for stream in (lock.stdin, lock.stdout, lock.stderr):
            stream.close()


def test_chainfence_node_serves_the_latest_token_and_its_requests(spawned, tmp_path):
    from chainfence import Chain, Registry

    port, metrics_port = free_port(), free_port()
    node = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chainfence",
            "node",
            "--port",
            str(port),
            "--json",
            "--metrics-port",
            str(metrics_port),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    spawned.append(node)
    info = json.loads(read_line(node))
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    started = scrape(url)
    assert value(started, "chainfence_node_latest_token") == info["latest_token"] == 0
    assert sends(started) >= 1  # the deploy
    chain = Chain.connect(info["rpc_url"], private_key=info["accounts"][1]["private_key"])
    lease = Registry.at(chain, info["registry"]).acquire("metrics/node", ttl=60)
    # The node reads the latest token at every turn of its loop: the scrape shows it once it has.
    wait_until(lambda: value(scrape(url), "chainfence_node_latest_token") == lease.token, "the node saw the token")
    later = scrape(url)
    assert moved(started, later, "chainfence_rpc_requests_total", method="eth_call") >= 1
    os.killpg(node.pid, signal.SIGINT)  # as Ctrl-C: the node stops, its metrics server with it
    assert node.wait(timeout=60) == 0
    assert port_is_free(metrics_port)


AUDIENCE = "metrics-service"


class Served:
    """uvicorn on 127.0.0.1:<free port> in a thread."""

    def __init__(self, app):
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: self.server.started or not self.thread.is_alive(), "uvicorn started")
        assert self.server.started
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


def test_a_guarded_service_serves_its_verdicts(on_anvil, tmp_path):
    app = FastAPI()

    @app.post("/reports")
    async def write(request: Request):
        return {"token": request.scope["chainfence"].token}

    guard = Guard(on_anvil, path=tmp_path / "guard.sqlite")
    app.add_middleware(
        FencingMiddleware,
        guard=guard,
        audience=AUDIENCE,
        resource=lambda scope: "metrics/service" if scope["path"] == "/reports" else None,
        metrics_path="/metrics",
    )
    holder = on_anvil.connect(on_anvil.chain.accounts[3])
    lease = holder.acquire("metrics/service", ttl=60)
    with Served(app) as served, httpx.Client(base_url=served.url, timeout=60) as client:
        before = scrape(f"{served.url}/metrics")
        signed = lease.sign(b"one", action="POST /reports", audience=AUDIENCE)
        assert client.post("/reports", content=b"one", headers=signed.to_headers()).status_code == 200
        accepted = scrape(f"{served.url}/metrics")
        assert moved(before, accepted, "chainfence_guard_checks_total", verdict="accepted", reason="new_mark") == 1
        replayed = client.post("/reports", content=b"one", headers=signed.to_headers())
        assert replayed.status_code == 409 and replayed.json()["error"] == "ReplayedRequest"
        refused = scrape(f"{served.url}/metrics")
        assert (
            moved(accepted, refused, "chainfence_guard_checks_total", verdict="rejected", reason="ReplayedRequest") == 1
        )
        assert client.post("/metrics").status_code != 200  # only GET is the metrics; the rest is the app's
    guard.close()
    lease.release()


def test_a_middleware_asked_for_metrics_checks_the_path(on_anvil, tmp_path):
    from chainfence.errors import InvalidInput

    with Guard(on_anvil, path=tmp_path / "guard.sqlite") as guard:
        with pytest.raises(InvalidInput):
            FencingMiddleware(FastAPI(), guard=guard, audience=AUDIENCE, resource="r", metrics_path="metrics")


def test_chainfence_mcp_over_http_serves_metrics_beside_its_tools(on_anvil, anvil_node, tmp_path):
    save(Deployment.of(on_anvil, rpc_url=anvil_node.url), tmp_path / ".chainfence" / "deployment.json")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["CHAINFENCE_PRIVATE_KEY"] = dev_keys(10)[4]
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "chainfence", "mcp", "--http", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        wait_until(lambda: not port_is_free(port) or server.poll() is not None, "the server listens", timeout=120)
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        url = f"http://127.0.0.1:{port}/metrics"
        before = scrape(url)

        async def main():
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                result = await client.call_tool("acquire", {"resource": "metrics/mcp", "ttl": 600})
                assert not result.is_error, result
                token = result.structured_content["token"]
                result = await client.call_tool("release", {"resource": "metrics/mcp", "token": token})
                assert not result.is_error, result

        anyio.run(main)
        after = scrape(url)
        assert sends(after) - sends(before) == 2  # the acquisition and the release
        assert moved(before, after, "chainfence_leases_ended_total", reason="released") == 1
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
