"""The metrics' own rules: nothing imported or counted without them, bounded labels, every metric documented.

The values moving as lease events happen are tests/chain/test_metrics.py's; the endpoints of a running
agent, guard and node are tests/integration/test_metrics_endpoints.py's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chainfence._core import metrics as _metrics
from chainfence.errors import ExtraNotInstalled, InvalidInput, LeaseExpired, NodeUnreachable, StaleToken
from tests.support.scrape import scrape_in_process, series, value

ROOT = Path(__file__).resolve().parents[2]

#: A keep-alive's renewal, a waited acquisition, a release and a guard's checks on the embedded chain, in a
#: fresh interpreter; then what it imported and whether any hook counted. ``BLOCK`` (the first argument):
#: make prometheus_client unimportable, as without the extra, and record every attempt to import it.
_AGENT = r"""
import json, sys, tempfile, threading, time
attempts = []
if sys.argv[1] == "block":
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "prometheus_client":
                attempts.append(name)
                raise ImportError(f"no module named {name!r} (blocked: the extra is not installed)")
            return None
    sys.meta_path.insert(0, Block())
import chainfence
from chainfence import Chain, Guard, Registry
chain = Chain.embedded()
registry = Registry.deploy(chain).connect(chain.accounts[1])
lease = registry.acquire("agents/a", ttl=30)
class Clock:
    now = 0.0
    def __call__(self):
        return self.now
clock = Clock()
with lease.keep(clock=clock, since=0.0):
    clock.now = 15.0
    lease.keeper.wake()
    while lease.keeper.core.renewals < 1:
        time.sleep(0.01)
renewals = lease.keeper.core.renewals if lease.keeper else 1
lease.release()
waited = registry.acquire("agents/b", ttl=30, wait=5)
with tempfile.TemporaryDirectory() as directory:
    with Guard(registry, path=directory + "/guard.sqlite", exclusive=True) as guard:
        guard.check("agents/b", waited.token)
        guard.check("agents/b", waited.token)
from chainfence._core import metrics
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "prometheus_client")
error = None
try:
    import chainfence.metrics
    chainfence.metrics.enable()
except Exception as exc:
    error = [type(exc).__name__, str(exc)]
print(json.dumps({"loaded": loaded, "attempts": attempts, "live": metrics.live is not None, "error": error}))
"""


def _run_agent(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _AGENT, mode], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_the_extra_nothing_tries_to_import_prometheus_client_and_enable_says_which_extra():
    """import chainfence, a keep-alive's renewal, a waited acquisition, a release and guard checks: no attempt
    to import prometheus_client, no hook counted; asking for the metrics then is ExtraNotInstalled."""
    seen = _run_agent("block")
    assert seen["loaded"] == [] and seen["live"] is False
    # The control: the blocker sees an import when one is made (enable's), and refuses it as a missing extra would.
    assert seen["attempts"] == ["prometheus_client"]
    assert seen["error"] == [
        "ExtraNotInstalled",
        "Prometheus metrics needs the [metrics] extra: pip install '.[metrics]' in a chainfence checkout"
        " (no module 'prometheus_client')",
    ]


def test_with_the_extra_installed_nothing_is_imported_or_counted_until_enabled():
    seen = _run_agent("installed")
    assert seen["loaded"] == [] and seen["attempts"] == []
    assert seen["error"] is None  # the control: enable() then imports it and counts from then on


def test_each_hook_returns_at_once_while_metrics_are_off(monkeypatch):
    """With ``live`` None every hook returns before it touches its arguments (None would fail them)."""
    monkeypatch.setattr(_metrics, "live", None)
    assert _metrics.rpc_started() is None
    for hook, args in [
        (_metrics.renewal, (None, None)),
        (_metrics.lease_ended, (None, None)),
        (_metrics.waited, (None, None)),
        (_metrics.guard_accepted, (None,)),
        (_metrics.guard_refused, (None,)),
        (_metrics.follower_synced, (None, None)),
        (_metrics.batch_sent, (None, None, None)),
        (_metrics.rpc_done, (None, None, None, None)),
        (_metrics.audit_page, (None, None, None)),
        (_metrics.audit_synced, (None, None, None)),
        (_metrics.node_token, (None,)),
    ]:
        assert hook(*args) is None, hook.__name__


def test_labels_are_bounded_whatever_the_sdk_is_given():
    """Many methods, reasons, kinds and errors the closed sets do not name: each folds into 'other', so the
    series stop growing after the first of them."""
    before = series(scrape_in_process())
    for number in range(200):
        _metrics.rpc_done((f"custom_method{number}",), 0.0, None)
        _metrics.rpc_done((f"custom_method{number}", "eth_call"), 0.0, None, [NodeUnreachable("down"), None])
        _metrics.lease_ended(f"reason{number}")
        _metrics.renewal(f"outcome{number}", 1.0)
        _metrics.waited(0.5, f"outcome{number}")
        _metrics.guard_accepted(f"reason{number}")
        _metrics.guard_refused(type(f"Error{number}", (StaleToken,), {})(token=1, current_token=2))
        _metrics.follower_synced(f"outcome{number}", 3)
        _metrics.batch_sent([f"kind{number}"], f"outcome{number}", [LeaseExpired(token=1, expired_at=0)])
        _metrics.audit_synced(f"outcome{number}", 5, 6)
    grown = series(scrape_in_process()) - before
    labels = {dict(key[1]).get(label) for key in grown for label in ("method", "reason", "outcome", "kind")}
    assert not {v for v in labels if v and re.search(r"\d", v)}, sorted(v for v in labels if v)
    assert len(series(scrape_in_process())) == len(before | grown)
    again = series(scrape_in_process())
    for number in range(200, 400):  # the same calls with new values: not one series more
        _metrics.rpc_done((f"custom_method{number}",), 0.0, None)
        _metrics.lease_ended(f"reason{number}")
        _metrics.guard_refused(type(f"Error{number}", (StaleToken,), {})(token=1, current_token=2))
    assert series(scrape_in_process()) == again
    samples = scrape_in_process()
    assert value(samples, "chainfence_rpc_requests_total", method="other") >= 400
    assert value(samples, "chainfence_rpc_errors_total", method="other", kind="NodeUnreachable") >= 200
    assert value(samples, "chainfence_guard_checks_total", verdict="rejected", reason="other") >= 400


def test_control_a_label_taken_as_given_would_grow_without_bound():
    """The fold is what bounds them: the method names as given are 200 values."""
    given = {f"custom_method{number}" for number in range(200)}
    assert len({_metrics._one_of(method, _metrics.RPC_METHODS) for method in given}) == 1
    assert len(given) == 200


def test_names_follow_prometheus_conventions():
    for name, kind, labels, help_text in _metrics.METRICS:
        assert re.fullmatch(r"chainfence_[a-z_]+", name), name
        assert help_text and help_text.endswith("."), name
        assert (kind == "counter") == name.endswith("_total"), name
        if kind == "histogram":
            assert re.search(r"_(seconds|operations)$", name), name
        assert not {"resource", "holder", "token", "name", "address"} & set(labels), name
    assert len({m[0] for m in _metrics.METRICS}) == len(_metrics.METRICS)


def test_every_metric_is_on_the_docs_page_with_its_labels_and_a_query():
    page = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    for name, _kind, labels, _help in _metrics.METRICS:
        section = page.split(f"### `{name}`", 1)
        assert len(section) == 2, f"docs/metrics.md has no section for {name}"
        body = section[1].split("\n### ", 1)[0]
        for label in labels:
            assert f"`{label}`" in body, f"{name}: label {label} undocumented"
        assert "```promql" in body, f"{name}: no example query"
        base = name.removesuffix("_total")
        assert base in body.split("```promql", 1)[1], f"{name}: its query does not use it"
    documented = set(re.findall(r"^### `(chainfence_[a-z_]+)`", page, flags=re.M))
    assert documented == {m[0] for m in _metrics.METRICS}


def test_enable_with_another_registry_is_refused_and_serve_checks_its_port():
    from prometheus_client import CollectorRegistry

    import chainfence.metrics

    chainfence.metrics.enable()
    with pytest.raises(InvalidInput):
        chainfence.metrics.enable(CollectorRegistry())
    for port in (-1, 70_000, "9464", True):
        with pytest.raises(InvalidInput):
            chainfence.metrics.serve(port)  # type: ignore[arg-type]
    assert issubclass(ExtraNotInstalled, ImportError)


def test_serve_answers_the_text_format_on_a_port_of_its_own():
    import chainfence.metrics
    from tests.support.scrape import scrape

    server = chainfence.metrics.serve(0)
    try:
        _metrics.node_token(41)
        assert value(scrape(server.url), "chainfence_node_latest_token") == 41
        _metrics.node_token(42)
        assert value(scrape(server.url), "chainfence_node_latest_token") == 42
    finally:
        server.close()


def test_checks_at_the_mark_counted_from_many_threads_are_all_in_the_next_scrape():
    """The hot path's per-thread counts: none lost, and handed to the counter before it is read (the
    registry collects the flusher first)."""
    import threading

    before = value(scrape_in_process(), "chainfence_guard_checks_total", verdict="accepted", reason="at_mark")
    start = threading.Barrier(8)

    def count():
        start.wait()
        for _ in range(5_000):
            _metrics.guard_accepted("at_mark")

    threads = [threading.Thread(target=count) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = value(scrape_in_process(), "chainfence_guard_checks_total", verdict="accepted", reason="at_mark")
    assert after - before == 40_000
    # Finished threads' counts stay: the next scrape neither loses nor repeats them.
    assert value(scrape_in_process(), "chainfence_guard_checks_total", verdict="accepted", reason="at_mark") == after


_BLOCKED_CLI = r"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "prometheus_client":
            raise ImportError(name)
        return None
sys.meta_path.insert(0, Block())
from chainfence.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_command_asked_for_metrics_without_the_extra_exits_2_naming_it_before_anything_starts(tmp_path):
    from chainfence.testing.anvil import free_port

    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_CLI, "node", "--dir", str(tmp_path), "--metrics-port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "ExtraNotInstalled" in done.stderr and "pip install '.[metrics]'" in done.stderr
    assert not (tmp_path / "anvil-state.json").exists()  # no node was started


@pytest.mark.parametrize("given", ["abc", "0", "70000"])
def test_a_bad_metrics_port_in_the_environment_is_a_usage_error(given, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    env["CHAINFENCE_METRICS_PORT"] = given
    done = subprocess.run(
        [sys.executable, "-m", "chainfence", "node", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert f"$CHAINFENCE_METRICS_PORT must be a port (1..65535), got {given!r}" in done.stderr
    assert not (tmp_path / "anvil-state.json").exists()
