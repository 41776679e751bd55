"""Two processes sending as one account: the batch's nonce is resynchronised, and a dropped batch is said at once.

Each process has its own sender (its nonce counter, its lock); here the second "process" is a second
``Chain`` over the same node with the same key, which shares nothing with the first but the node (both
backends). Two kinds of collision:

- **At the send.** The other process's transaction takes the nonce the batch was about to use, again and
  again (a busy process does, in turns): the node says the nonce is used, the sender asks for its own hash
  (not there), reads the account's nonce afresh and signs again, after a random pause that doubles. The
  batch lands once; every caller gets its lease. Before: three attempts back to back, then every caller of
  the batch got ``ChainError: could not find a free nonce`` (and on the embedded chain py-evm's refusal was
  not even read as a used nonce).
- **After the send.** The node took the batch, then dropped it: the other process's transaction took its
  nonce (here the node never had ours: a send the node answered and lost). Waiting for its receipt, the
  sender looks every second whether the nonce was used by a transaction that is not its own: then the batch
  can never be mined, and, as when the nonce is taken at the send, it is signed again with a fresh nonce
  (one intent, never two): it lands once, within that second. Dropped every time, after its attempts every
  caller gets ``TransactionTimeout`` (nothing happened, safe to retry). Before: the receipt timeout waited
  out, a cancellation refused ("nonce too low"), the timeout waited out again, then ``OutcomeUnknown``.

Sequenced by the sends themselves and by a clock that moves only when the sender sleeps, each thread's
apart (``ThreadClock``). The controls: the sender with three attempts and no pause, and without the
look at the nonce.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chainfence import Chain, Lease, Registry
from chainfence._node import sending
from chainfence._node.rlp import keccak256
from chainfence.errors import ChainError, OutcomeUnknown, TransactionTimeout
from tests.chain.test_batching import gathered
from tests.support.gates import SendGate
from tests.support.virtual_time import SteppedClock

TAKES = 5  # times in a row the other process takes the nonce the batch is about to use


def other_process(chain: Chain, registry: Registry, sender: str) -> Registry:
    """``sender``'s registry in a second process: a Chain of its own over the same node, with the same key."""
    own = Chain(chain.rpc, [chain._signers[sender]], dev=chain._dev, chain_id=chain.chain_id)
    return Registry.at(own, registry.address).connect(sender)


def the_other_takes_the_nonce(monkeypatch, chain: Chain, other: Registry, sender: str, takes: int) -> list[str]:
    """Before each of ``sender``'s batch sends (``eth_sendRawTransaction`` through this process's sender), the
    other process acquires a resource: its transaction takes the nonce the batch was signed with. ``takes``
    times; returns what the other acquired."""
    took: list[str] = []
    original = chain.rpc.send_raw
    inside: list[bool] = []

    def send_raw(raw: bytes, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("sender") == sender and not inside and len(took) < takes:
            inside.append(True)
            try:
                name = f"other/{len(took)}"
                other.acquire(name, ttl=600)
                took.append(name)
            finally:
                inside.pop()
        return original(raw, *args, **kwargs)

    monkeypatch.setattr(chain.rpc, "send_raw", send_raw)
    return took


def batch_while_the_other_takes_nonces(chain, registry, alice, monkeypatch) -> tuple[dict[str, Any], list[str]]:
    other = other_process(chain, registry, alice.sender)
    batcher = alice.batched()
    monkeypatch.setattr(alice.chain._sender, "_sleep", SteppedClock().sleep)  # pauses counted, not waited
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    calls = {"pilot": lambda: batcher.acquire("n/pilot", ttl=600)}
    calls |= {f"n/{i}": (lambda i=i: batcher.acquire(f"n/{i}", ttl=600)) for i in range(4)}

    took: list[list[str]] = []

    def before_open() -> None:  # the pilot's batch is at the door; the four queued: the next batch collides
        took.append(the_other_takes_the_nonce(monkeypatch, chain, other, alice.sender, TAKES))

    results = gathered(batcher, calls, gate, before_open=before_open)
    return results, took[0]


def test_the_batch_resynchronises_its_nonce_however_often_another_process_takes_it(chain, registry, alice, monkeypatch):
    results, took = batch_while_the_other_takes_nonces(chain, registry, alice, monkeypatch)
    assert len(took) == TAKES, took
    leases = [results[f"n/{i}"] for i in range(4)]
    assert all(isinstance(lease, Lease) for lease in leases), leases
    assert len({lease.tx_hash for lease in leases}) == 1, "one batch, landed once"
    assert all(registry.lease_of(f"n/{i}").token == leases[i].token for i in range(4))
    assert all(registry.lease_of(name).holder == alice.sender for name in took), "the other's went through too"


def test_control_three_attempts_back_to_back_lose_to_a_busy_process(chain, registry, alice, monkeypatch):
    monkeypatch.setattr(sending, "_NONCE_ATTEMPTS", 3)
    monkeypatch.setattr(sending, "_NONCE_PAUSE", 0.0)
    results, _took = batch_while_the_other_takes_nonces(chain, registry, alice, monkeypatch)
    errors = [results[f"n/{i}"] for i in range(4)]
    assert all(type(error) is ChainError and "could not find a free nonce" in str(error) for error in errors), errors
    assert all(registry.lease_of(f"n/{i}") is None for i in range(4))


# ---------------------------------------------------------------------------
# Dropped after the node took it
# ---------------------------------------------------------------------------

RECEIPT_TIMEOUT = 30.0


class ThreadClock:
    """A clock for the sender that moves only when it sleeps, each thread's apart (tests/support/virtual_time's
    SteppedClock, per thread): the batch's worker waits in its own time, which no other thread sending
    through the same chain (a worker a test before left finishing) can move."""

    def __init__(self) -> None:
        self._now: dict[int, float] = {}

    def __call__(self) -> float:
        return self._now.get(threading.get_ident(), 0.0)

    def sleep(self, seconds: float) -> None:
        ident = threading.get_ident()
        self._now[ident] = self._now.get(ident, 0.0) + seconds

    def of(self, ident: int) -> float:
        """How long the thread ``ident`` has waited."""
        return self._now.get(ident, 0.0)


def dropped_batch(
    chain, registry, alice, monkeypatch, *, every_time: bool = False
) -> tuple[dict[str, Any], float, bytes]:
    """The batch's send is answered and lost (the node never has it), and the other process's transaction
    takes its nonce; the sender waits for the batch's receipt under a clock that moves only as it sleeps."""
    other = other_process(chain, registry, alice.sender)
    batcher = alice.batched()
    clock = ThreadClock()
    monkeypatch.setattr(alice.chain._sender, "_clock", clock)
    monkeypatch.setattr(alice.chain._sender, "_sleep", clock.sleep)
    monkeypatch.setattr(alice.chain._sender, "receipt_timeout", RECEIPT_TIMEOUT)
    monkeypatch.setattr(alice.chain._sender, "poll_latency", 0.5)
    gate = SendGate(monkeypatch, chain.rpc, alice.sender)
    original = chain.rpc.send_raw
    dropped: list[bytes] = []

    inside: list[bool] = []  # the other process's own sends (on the embedded chain, through this rpc too)
    worker: list[int] = []

    def send_raw(raw: bytes, *args: Any, **kwargs: Any) -> Any:
        ours = kwargs.get("sender") == alice.sender and not inside
        if ours and (every_time or not dropped) and gate.open.is_set():
            dropped.append(bytes(raw))
            worker.append(threading.get_ident())  # the batch's worker, sending
            inside.append(True)
            try:
                other.acquire(f"other/took-{len(dropped)}", ttl=600)  # its transaction takes the nonce
            finally:
                inside.pop()
            return None  # "accepted", and never mined: the node dropped it
        return original(raw, *args, **kwargs)

    calls = {"pilot": lambda: batcher.acquire("d/pilot", ttl=600)}
    calls |= {f"d/{i}": (lambda i=i: batcher.acquire(f"d/{i}", ttl=600)) for i in range(3)}
    results = gathered(batcher, calls, gate, before_open=lambda: monkeypatch.setattr(chain.rpc, "send_raw", send_raw))
    assert dropped, "the batch's send was answered and dropped"
    return results, clock.of(worker[0]), dropped[0]


def test_a_dropped_batch_is_seen_at_once_and_signed_again_with_a_fresh_nonce(chain, registry, alice, monkeypatch):
    """Within a second of waiting the sender sees the batch's nonce used by a transaction that is not its own
    and the batch not mined: it can never be. As when the nonce is taken at the send, the batch is signed
    again with the account's fresh nonce: it lands once, and every caller gets its lease."""
    results, waited, dropped = dropped_batch(chain, registry, alice, monkeypatch)
    leases = [results[f"d/{i}"] for i in range(3)]
    assert all(isinstance(lease, Lease) for lease in leases), leases
    assert waited < RECEIPT_TIMEOUT / 2, f"seen after {waited} s of waiting, not a receipt timeout"
    assert len({lease.tx_hash for lease in leases}) == 1, "one batch, landed once"
    assert chain.rpc.receipt("0x" + keccak256(dropped).hex()) is None, "the dropped bytes were never mined"
    assert leases[0].tx_hash != "0x" + keccak256(dropped).hex()
    assert all(registry.lease_of(f"d/{i}").token == leases[i].token for i in range(3))


def test_a_batch_dropped_every_time_ends_in_transaction_timeout(chain, registry, alice, monkeypatch):
    """Dropped as often as the sender signs it again (the other process takes every nonce it gets, after the
    node took the batch): after its attempts, every caller gets TransactionTimeout: nothing happened."""
    monkeypatch.setattr(sending, "_NONCE_ATTEMPTS", 2)
    results, waited, _dropped = dropped_batch(chain, registry, alice, monkeypatch, every_time=True)
    errors = [results[f"d/{i}"] for i in range(3)]
    assert all(isinstance(error, TransactionTimeout) for error in errors), errors
    assert "used by another transaction" in str(errors[0]) and errors[0].nonce is not None
    assert waited < RECEIPT_TIMEOUT / 2, waited
    assert all(registry.lease_of(f"d/{i}") is None for i in range(3))


def test_control_without_the_look_at_the_nonce_a_dropped_batch_waits_twice_the_timeout(
    chain, registry, alice, monkeypatch
):
    def never_taken(self, hashes, *, sender, nonce, confirmations):
        return False, None
        yield  # pragma: no cover

    monkeypatch.setattr(sending.Sender, "_taken_steps", never_taken)
    results, waited, _dropped = dropped_batch(chain, registry, alice, monkeypatch)
    errors = [results[f"d/{i}"] for i in range(3)]
    assert all(isinstance(error, OutcomeUnknown) for error in errors), errors
    assert waited >= 2 * RECEIPT_TIMEOUT, waited


@pytest.fixture(autouse=True)
def _forget_the_other_process(chain):
    yield
    chain._sender.forget_nonces()  # the other process's transactions moved the account's nonce
