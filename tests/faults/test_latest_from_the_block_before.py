"""A node that answers a read at ``latest`` from the block before the head, once: not a rollback.

anvil 1.7.1 does it while it mines under load: it resolves ``latest`` to the
head's number, moves the head, then reads that number's stored state, so a
read sent after another can come back one block older
(``scripts/anvil_latest.py``: 10 to 22 of about 6,400 sequential reads
beside five busy loops; ``docs/benchmarks/history.md``, "anvil's latest"). A guard
worker of ``test_guard_processes.py``'s race saw token 4, then token 3,
and raised ``ChainRolledBack``; a guard that latched on it would refuse
every token for good. The read after such an answer resolves the moved
head: it is at least as new as the first.

Here a proxy in front of the session's anvil plays that answer on cue
(``behind``: the next ``eth_call`` at ``latest`` is asked at the head's
parent, where the token is one lower), and each reader that judges a
rollback from a read at ``latest`` is put through it: the SDK's reads
(its memory of the tokens it saw), a guard's check and its opening (its
store's marks), a fenced SQL transaction (its table's marks). Each must
read again and go on, unlatched. Controls: the same reader with one look,
main's before this fix, believes the answer (``ChainRolledBack``, the guard
latched); and a node that answers from the block before for good (a lost
block) is still a rollback, raised and latched.
"""

from __future__ import annotations

import sqlite3

import pytest

from chainfence import Chain, Guard, Registry, Timeouts
from chainfence._node.rlp import keccak256 as keccak
from chainfence._sdk.contract import RegistryContract
from chainfence.errors import ChainRolledBack
from chainfence.guard._guard import Guard as GuardImpl
from chainfence.integrations.sql import _Fence, fenced_transaction

RESOURCE = "latest/behind"
#: once: anvil's answer while it mines, with the fix; naive: the same with main's one look; lost: every read.
CASES = ["once", "control-naive-once", "control-lost-for-good"]


#: The registry's two reads a rollback is judged from.
LEASE_OF = "0x" + keccak(b"leaseOf(bytes32)")[:4].hex()
LATEST_TOKEN = "0x" + keccak(b"latestToken()")[:4].hex()


class Behind:
    """The proxy's cue: the next ``times`` ``eth_call`` of ``selector`` at ``latest`` (every one: None)
    are answered from the head's parent block; ``served`` counts those answered so."""

    def __init__(self, liar, selector: str, *, times: int | None):
        self.liar, self.selector, self.left, self.served = liar, selector, times, 0
        liar.on("eth_call", self)

    def __call__(self, params, forward):
        call, block = params[0], params[1] if len(params) > 1 else "latest"
        data = call.get("data") or call.get("input") or ""
        if block == "latest" and data.startswith(self.selector) and (self.left is None or self.left > 0):
            if self.left is not None:
                self.left -= 1
            self.served += 1
            head = int(self.liar.node("eth_blockNumber", []), 16)
            return forward([call, hex(head - 1), *params[2:]])
        return forward(params)


def play(liar, case: str, selector: str) -> Behind:
    return Behind(liar, selector, times=None if case == "control-lost-for-good" else 1)


@pytest.fixture
def naive(request, monkeypatch):
    """Whether this case runs main's one look: each reader's single read, believed."""
    if request.node.callspec.params["case"] != "control-naive-once":
        return False
    monkeypatch.setattr(RegistryContract, "_lease_info_steps", RegistryContract._read_lease_info_steps)
    monkeypatch.setattr(Registry, "latest_token", lambda self, **kw: self._drive(self._read_latest_token_steps(**kw)))

    def verify_once(self, resource, resource_id, token, mark, stored_holder):
        return self._ask_chain(resource, token, mark, stored_holder, latch=self._latch)

    def continuity_once(self):
        high = self._store.high_token()
        if high and self._store.meta(self._store.conn(), "rolled_back") is None:
            try:
                self._check_continuity(high, latch=self._latch)
            except ChainRolledBack:
                pass

    monkeypatch.setattr(GuardImpl, "_verify_on_chain", verify_once)
    monkeypatch.setattr(GuardImpl, "_check_continuity_at_open", continuity_once)
    monkeypatch.setattr(_Fence, "_ask_chain", lambda self, m, h, hi: self._ask_chain_once(m, h, hi, doubt=False))
    return True


def through(liar, registry: Registry) -> Registry:
    """The registry as a reader behind the proxy sees it: a Chain of its own (its own memory of tokens)."""
    return Registry.at(Chain.connect(liar.url, timeouts=Timeouts(poll=0.005)), registry.address)


def two_tokens(registry: Registry) -> tuple[int, int]:
    """Alice acquires, then acquires again: a lower and a higher token, the higher one in the head block."""
    alice = registry.connect(registry.chain.accounts[1])
    return alice.acquire(RESOURCE, ttl=300).token, alice.acquire(RESOURCE, ttl=300).token


@pytest.mark.parametrize("case", CASES)
def test_the_sdk_reads_again_a_token_below_one_it_saw(on_anvil, liar, case, naive):
    low, high = two_tokens(on_anvil)
    reader = through(liar, on_anvil)
    assert reader.last_lease(RESOURCE).token == high and reader.latest_token() == high  # seen
    for selector, read in ((LEASE_OF, lambda: reader.last_lease(RESOURCE).token), (LATEST_TOKEN, reader.latest_token)):
        cue = play(liar, case, selector)
        if case == "once":
            assert read() == high
            assert cue.served == 1, "the read was answered from the block before, once"
        else:
            with pytest.raises(ChainRolledBack) as lost:
                read()
            assert (lost.value.seen_token, lost.value.chain_token) == (high, low)
        liar.honest()


@pytest.mark.parametrize("case", CASES)
def test_a_strict_guard_latches_only_on_what_the_chain_says_twice(on_anvil, liar, tmp_path, case, naive):
    """Guard B (its own process's memory: behind the proxy) opened before guard A accepted the higher
    token: A's mark is news to it. B's check at the mark is answered from the block before: below the mark."""
    low, high = two_tokens(on_anvil)
    store = tmp_path / "guard.sqlite"
    b = Guard(through(liar, on_anvil), path=store, mode="strict")
    with Guard(on_anvil, path=store) as a:
        assert a.check(RESOURCE, high) == high
        cue = play(liar, case, LEASE_OF)
        try:
            if case == "once":
                assert b.check(RESOURCE, high) == high
                assert cue.served == 1, "its check was answered from the block before, once"
                assert a.check(RESOURCE, high) == high, "the store is not latched"
                return
            with pytest.raises(ChainRolledBack, match=f"reads token {low} on-chain, below the mark {high}"):
                b.check(RESOURCE, high)
            liar.honest()
            with pytest.raises(ChainRolledBack, match="no longer trusts the chain"):
                a.check(RESOURCE, high)  # latched, for every process of the store
        finally:
            b.close()


@pytest.mark.parametrize("case", CASES)
def test_a_guard_opening_latches_only_on_what_the_chain_says_twice(on_anvil, liar, tmp_path, case, naive):
    """A store whose highest mark is the head block's token, opened behind the proxy: its continuity check
    reads the registry's latest token from the block before."""
    low, high = two_tokens(on_anvil)
    store = tmp_path / "guard.sqlite"
    with Guard(on_anvil, path=store) as a:
        assert a.check(RESOURCE, high) == high
    cue = play(liar, case, LATEST_TOKEN)
    with Guard(through(liar, on_anvil), path=store) as b:
        liar.honest()
        assert cue.served >= 1, "its opening read the latest token from the block before"
        if case == "once":
            assert b.check(RESOURCE, high) == high
            return
        with pytest.raises(ChainRolledBack, match=f"latest token is {low}, below token {high} this store accepted"):
            b.check(RESOURCE, high)


@pytest.mark.parametrize("case", CASES)
def test_a_fenced_transaction_refuses_only_on_what_the_chain_says_twice(on_anvil, liar, tmp_path, case, naive):
    """The marks table holds the head block's token (written through the fence directly); a strict fence
    behind the proxy writes with it again and is answered from the block before: below the mark."""
    low, high = two_tokens(on_anvil)
    path = tmp_path / "ledger.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE log (token INTEGER, body TEXT)")
    conn.commit()

    def write(registry: Registry, body: str) -> None:
        with fenced_transaction(conn, registry, RESOURCE, high, strict=True) as cur:
            cur.execute("INSERT INTO log VALUES (?, ?)", (high, body))

    try:
        write(on_anvil, "direct")
        cue = play(liar, case, LEASE_OF)
        if case == "once":
            write(through(liar, on_anvil), "behind the proxy")
            assert cue.served == 1, "its check was answered from the block before, once"
            assert [body for (body,) in conn.execute("SELECT body FROM log")] == ["direct", "behind the proxy"]
            return
        with pytest.raises(ChainRolledBack, match=f"has token {low} on-chain, below the mark {high}"):
            write(through(liar, on_anvil), "behind the proxy")
        assert [body for (body,) in conn.execute("SELECT body FROM log")] == ["direct"], "nothing written"
    finally:
        conn.close()
