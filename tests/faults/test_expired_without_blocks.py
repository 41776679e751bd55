"""No lease looks live after it ended, even when no block was mined since.

On anvil with automine, time only reaches the latest block when a
transaction is mined: ``evm_increaseTime`` without ``evm_mine`` is exactly
"5 seconds passed and nobody sent anything". A view at the latest block
still runs at the old timestamp and calls the lease live, while the next
transaction (a renew, a competitor's acquire) finds it expired. The SDK
judges at the pending block's time — and, on chains that are not dev chains,
never before the verifier's own clock — so every view, guard and CLI command
agrees with the next transaction.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chainfence import AcquireReason, Chain, Guard, LeaseStatus, Registry, Timeouts
from chainfence.errors import LeaseExpired
from tests.conftest import isolated
from tests.support.anvil import Anvil, dev_keys
from tests.support.rpc_proxy import RpcProxy
from tests.support.virtual_time import WaitClock

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = "reports/quiet"


@pytest.fixture(scope="module")
def wallclock_node():
    """An anvil whose clock runs with real time, as every anvil does outside this suite (the session's
    node keeps a logical clock): between transactions its pending block's time moves on."""
    with Anvil() as node:
        chain = Chain.connect(node.url, private_keys=dev_keys(3), timeouts=Timeouts(poll=0.005))
        yield node, Registry.deploy(chain, max_ttl=3_600)


@pytest.fixture
def anvil_node(wallclock_node):
    return wallclock_node[0]


@pytest.fixture
def on_anvil(wallclock_node):
    registry = wallclock_node[1]
    with isolated(registry.chain):
        yield registry


@pytest.fixture
def expired_unmined(on_anvil):
    """A 3-second lease, then 5 seconds of chain time with no block mined."""
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=3)
    on_anvil.chain._rpc("evm_increaseTime", [5])
    latest = on_anvil.chain.latest_time()
    assert latest < lease.expires_at <= on_anvil.chain.now(), "the latest block still predates the expiry"
    return lease


def test_views_report_the_lease_expired(on_anvil, expired_unmined):
    lease = expired_unmined
    last = on_anvil.last_lease(RESOURCE)
    assert (last.status, last.expired_unmined) == (LeaseStatus.EXPIRED, True)
    assert on_anvil.lease_of(RESOURCE) is None
    with pytest.raises(LeaseExpired, match="no block since") as expired:
        on_anvil.check_current(RESOURCE, lease.token)
    assert expired.value.no_block_since and expired.value.judged_at >= lease.expires_at


def test_control_a_view_at_the_latest_block_calls_it_live(on_anvil, expired_unmined):
    """What every view said before: the latest block's timestamp predates the expiry."""
    assert on_anvil.check_current(RESOURCE, expired_unmined.token, block="latest")
    assert on_anvil.last_lease(RESOURCE, block="latest").status is LeaseStatus.LIVE


def test_the_views_agree_with_the_next_transactions(on_anvil, expired_unmined):
    """Renew refuses (LeaseExpired) and a competitor's acquire succeeds: the views said so first."""
    with pytest.raises(LeaseExpired):
        expired_unmined.renew()
    taken = on_anvil.connect(on_anvil.chain.accounts[2]).acquire(RESOURCE, ttl=30)
    assert taken.token == expired_unmined.token + 1


def test_a_strict_guard_refuses_the_holder_with_no_window(on_anvil, expired_unmined, tmp_path):
    """Strict mode: the only window is between check and write; not 'until the next block'."""
    with Guard(on_anvil, path=tmp_path / "strict.sqlite", mode="strict") as strict:
        with pytest.raises(LeaseExpired, match="no block since"):
            strict.check(RESOURCE, expired_unmined.token)
        assert strict.mark(RESOURCE) == 0


def test_control_a_strict_check_at_the_latest_block_accepts_the_expired_holder(on_anvil, expired_unmined):
    info = on_anvil.check_current(RESOURCE, expired_unmined.token, block="latest")
    assert info.status is LeaseStatus.LIVE, "the old strict check: accepted, a whole block interval late"


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINFENCE_")}
    return subprocess.run(
        [sys.executable, "-m", "chainfence.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_cli_says_expired_and_why(anvil_node, on_anvil, expired_unmined):
    where = ["--rpc-url", anvil_node.url, "--registry", on_anvil.address]
    verify = cli("verify", RESOURCE, "--token", str(expired_unmined.token), *where)
    assert verify.returncode == 4, verify.stdout + verify.stderr
    assert "no block since" in verify.stdout
    status = cli("status", RESOURCE, *where, "--json")
    row = json.loads(status.stdout)[0]
    assert (row["status"], row["no_block_since"]) == ("expired", True)
    table = cli("status", RESOURCE, *where)
    assert "expired (no block since)" in table.stdout


def test_on_a_chain_that_is_not_a_dev_chain_the_verifiers_clock_counts_too(anvil_node, on_anvil, tmp_path):
    """A node with no pending block and sparse blocks: the verifier's own clock passing the expiry is
    enough. The node looks like geth (not a dev chain) through the proxy, which also refuses 'pending'."""
    lease = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=30)
    with RpcProxy(anvil_node.url) as proxy:
        proxy.client_version, proxy.no_pending = "Geth/v1.14.11-stable/linux-amd64/go1.22.5", True
        chain = Chain.connect(proxy.url, confirmations=0)
        assert not chain.is_dev
        verifier = Registry.at(chain, on_anvil.address)
        chain.clock = lambda: lease.expires_at - 10  # the verifier's clock says: 10 s to go
        assert verifier.check_current(RESOURCE, lease.token)
        chain.clock = lambda: lease.expires_at + 1  # ...and now it has passed, with no block since
        assert chain.latest_time() < lease.expires_at
        with pytest.raises(LeaseExpired, match="no block since"):
            verifier.check_current(RESOURCE, lease.token)
        with Guard(verifier, path=tmp_path / "g.sqlite", mode="strict") as strict, pytest.raises(LeaseExpired):
            strict.check(RESOURCE, lease.token)
        assert verifier.check_current(RESOURCE, lease.token, block="latest"), "the control: the chain alone says live"
    assert on_anvil.check_current(RESOURCE, lease.token), "anvil's own (dev) clock has not reached the expiry"


def test_a_waiter_wakes_at_the_expiry_with_no_block_mined(on_anvil):
    """No block and no event come: the waiter's only cue is the lease's expiry, counted on its clock
    from the chain time it read the lease at. It then reads the lease expired (pending block's time)
    and takes it in the very next block."""
    held = on_anvil.connect(on_anvil.chain.accounts[1]).acquire(RESOURCE, ttl=3)
    bob = on_anvil.connect(on_anvil.chain.accounts[2])

    def on_sleep(n):
        if n == 1:
            on_anvil.chain._rpc("evm_increaseTime", [5])  # chain time passes the expiry; nothing mined

    clock = WaitClock(on_sleep=on_sleep).install(bob)
    lease = bob.acquire(RESOURCE, ttl=60, wait=600)
    assert lease.reason is AcquireReason.EXPIRED and lease.previous_token == held.token
    assert lease.block_number == held.block_number + 1, "no block came between: the expiry woke it"
    assert clock.now_ <= 3 + 1, "it woke at the expiry (3 s of its clock), not at the end of its wait"
    assert len(clock.pauses) == 1, "a random pause before sending: other waiters woke at the same expiry"
