"""The sender without a node: fee selection, replacement bumps, and what it makes of a node's answers.

The sender's logic is written once, as steps (chainfence._core.effects); each case that drives it runs
through both drivers: the blocking one and the asyncio one (over an async view of the same fake).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import ClassVar

import pytest
from eth_account import Account

from chainfence._core.effects import arun
from chainfence._node.sending import Sender
from chainfence.errors import NodeUnreachable, OutcomeUnknown, RpcError


class FakeRpc:
    """Answers fee questions; records sends; answers sends from a script."""

    embedded = False

    def __init__(self, base_fee=None, *, send_answers=(), known=(), lookup_failures=0):
        self.base_fee = base_fee
        self.lookup_failures = lookup_failures
        self.block_calls = 0
        self.sent: list[bytes] = []
        self.send_answers = list(send_answers)
        self.known = set(known)
        self.pool: dict[str, bytes] = {}

    def block(self, tag):
        self.block_calls += 1
        return {} if self.base_fee is None else {"baseFeePerGas": self.base_fee}

    def gas_price(self):
        return 7 * 10**9

    def max_priority_fee(self):
        return 2 * 10**9

    def nonce(self, address, block="pending"):
        return 7

    def send_raw(self, raw, *, sender=None):
        self.sent.append(bytes(raw))
        answer = self.send_answers.pop(0) if self.send_answers else None
        if answer == "deliver_then_timeout":
            self.known.add(_hash(raw))
            error = NodeUnreachable("read timed out")
            error.maybe_delivered = True
            raise error
        if isinstance(answer, str):
            raise RpcError(
                f"eth_sendRawTransaction failed: {answer}", method="eth_sendRawTransaction", rpc_message=answer
            )
        self.known.add(_hash(raw))

    def transaction(self, tx_hash):
        if self.lookup_failures:
            self.lookup_failures -= 1
            raise NodeUnreachable("the lookup timed out too")
        return {"hash": tx_hash} if tx_hash in self.known else None


def _hash(raw: bytes) -> str:
    from eth_utils import keccak

    return "0x" + keccak(raw).hex()


class AsyncView:
    """The fake's methods as coroutines: what the asyncio driver awaits (the fake's state is shared)."""

    def __init__(self, rpc):
        self._rpc = rpc

    def __getattr__(self, name):
        method = getattr(self._rpc, name)
        if not callable(method):
            return method

        async def call(*args, **kwargs):
            await asyncio.sleep(0)  # a real suspension point, as a request is
            return method(*args, **kwargs)

        return call


@pytest.fixture(params=["sync", "asyncio"])
def drive(request):
    """Run a sender's steps through one driver or the other; ``locked``: holding the sender's lock, as
    ``_sign_and_submit`` expects (``transact_steps`` takes it itself)."""

    def sync(s, steps, locked=True):
        if not locked:
            return s.run(steps)
        with s._lock(KEY.address):
            return s.run(steps)

    def on_asyncio(s, steps, locked=True):
        async def main():
            async def sleep(seconds):
                s._sleep(seconds)

            return await arun(steps, AsyncView(s.rpc), sleep=sleep, lock=lambda key: asyncio.Lock())

        assert inspect.isgenerator(steps)
        return asyncio.run(main())

    return sync if request.param == "sync" else on_asyncio


KEY = Account.from_key("0x" + "42" * 32)


def sender(base_fee, clock, rpc=None):
    return Sender(
        rpc or FakeRpc(base_fee),
        {KEY.address: KEY},
        1,
        receipt_timeout=1,
        poll_latency=0.01,
        confirmation_timeout=1,
        clock=clock,
        sleep=lambda s: None,
    )


TX = {
    "from": KEY.address,
    "to": KEY.address,
    "data": b"",
    "value": 0,
    "gas": 21_000,
    "chainId": 1,
    "maxFeePerGas": 10**9,
    "maxPriorityFeePerGas": 10**9,
}


def test_eip1559_fees_where_the_chain_has_a_base_fee(drive):
    s = sender(10 * 10**9, lambda: 0.0)
    fees = drive(s, s.fees_steps())
    assert fees == {"maxFeePerGas": 22 * 10**9, "maxPriorityFeePerGas": 2 * 10**9}


def test_legacy_gas_price_where_it_has_none(drive):
    s = sender(None, lambda: 0.0)
    assert drive(s, s.fees_steps()) == {"gasPrice": 7 * 10**9}


def test_a_fee_quote_is_reused_for_a_second_only(drive):
    now = [0.0]
    s = sender(10**9, lambda: now[0])
    drive(s, s.fees_steps())
    now[0] = 0.5
    drive(s, s.fees_steps())
    assert s.rpc.block_calls == 1
    now[0] = 1.5
    drive(s, s.fees_steps())
    assert s.rpc.block_calls == 2


def test_a_replacement_raises_every_fee_by_the_ten_percent_nodes_require():
    """Nodes accept a replacement only with every fee >= 110 % of the original's (+1 wei for tiny ones)."""
    for fees in ({"maxFeePerGas": 100, "maxPriorityFeePerGas": 10}, {"gasPrice": 10**12}):
        bumped = Sender.bump(fees)
        assert all(bumped[k] * 10 >= fees[k] * 11 for k in fees)
    assert Sender.bump({"maxPriorityFeePerGas": 1}) == {"maxPriorityFeePerGas": 2}


# ---------------------------------------------------------------------------
# Never twice: whatever the node answers, the SDK asks for its own hash first
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "nonce too low",
        "already known",
        "transaction already imported",
        "replacement transaction underpriced",
        "some wording of its own",
    ],
)
def test_a_refusal_of_bytes_the_node_already_has_is_success_not_a_new_nonce(answer, drive):
    """A copy of our bytes reached the node first (a late reply resent by anyone): whatever the node says
    to the second copy, the SDK finds its own hash and does not sign a second transaction."""
    rpc = FakeRpc(10**9, send_answers=["deliver_then_timeout", answer], lookup_failures=1)
    s = sender(10**9, lambda: 0.0, rpc)
    tx_hash, nonce = drive(s, s._sign_and_submit(KEY.address, dict(TX)))
    assert nonce == 7
    assert len(rpc.sent) == 2, "the bytes were resent once"
    assert len(set(rpc.sent)) == 1, "only identical bytes were ever sent"


def test_a_nonce_taken_by_another_transaction_is_resigned_with_the_next(drive):
    """'nonce too low' for bytes the node does not have: another process used the nonce; re-sign."""

    class Busy(FakeRpc):
        nonces: ClassVar[list[int]] = [7, 8]

        def nonce(self, address, block="pending"):
            return self.nonces.pop(0)

    rpc = Busy(10**9, send_answers=["nonce too low"])
    s = sender(10**9, lambda: 0.0, rpc)
    _tx_hash, nonce = drive(s, s._sign_and_submit(KEY.address, dict(TX)))
    assert nonce == 8
    assert len(set(rpc.sent)) == 2


def test_control_a_client_that_trusts_the_words_signs_twice():
    """The control: reading 'nonce too low' as another process's nonce (what the SDK did when web3's
    provider resent its bytes behind its back) signs a second transaction for one intent."""
    rpc = FakeRpc(10**9, send_answers=["deliver_then_timeout", "nonce too low"])
    first = KEY.sign_transaction(dict(TX, nonce=7))
    with pytest.raises(NodeUnreachable):
        rpc.send_raw(first.raw_transaction)
    try:
        rpc.send_raw(first.raw_transaction)  # the provider's own retry
    except RpcError as refused:
        assert "nonce too low" in refused.rpc_message
        rpc.send_raw(KEY.sign_transaction(dict(TX, nonce=8)).raw_transaction)  # "someone took it": re-sign
    assert len(rpc.known) == 2, "two transactions for one intent reached the node"


def test_a_node_that_never_answers_is_outcome_unknown_once_it_may_have_the_bytes(drive):
    rpc = FakeRpc(10**9, send_answers=["deliver_then_timeout"])

    def silent(tx_hash):
        error = NodeUnreachable("down")
        error.maybe_delivered = True
        raise error

    rpc.transaction = silent
    rpc.send_answers += ["deliver_then_timeout"] * 5
    s = sender(10**9, lambda: 0.0, rpc)
    with pytest.raises(OutcomeUnknown) as unknown:
        drive(s, s._sign_and_submit(KEY.address, dict(TX)))
    assert unknown.value.nonce == 7 and unknown.value.tx_hashes


def test_nonce_too_low_on_the_very_first_send_is_checked_against_our_own_hash(drive):
    """What web3's provider did behind the SDK's back: it resent the bytes after a late reply and
    returned the second copy's "nonce too low" as the answer to the first send. The SDK asks for
    its own hash before believing the nonce is someone else's."""

    class ProviderResent(FakeRpc):
        def send_raw(self, raw, *, sender=None):
            self.sent.append(bytes(raw))
            self.known.add(_hash(raw))  # the first copy landed
            raise RpcError("eth_sendRawTransaction failed: nonce too low", rpc_message="nonce too low")

    rpc = ProviderResent(10**9)
    s = sender(10**9, lambda: 0.0, rpc)
    _tx_hash, nonce = drive(s, s._sign_and_submit(KEY.address, dict(TX)))
    assert nonce == 7 and len(set(rpc.sent)) == 1


def test_a_node_that_hangs_is_given_up_after_unreachable_timeout_not_after_every_resend(drive):
    """Each send and lookup waits out the request timeout on a node that accepts connections and never
    answers: the resends stop once the node has been silent for unreachable_timeout."""
    now = [0.0]

    class Hung(FakeRpc):
        def send_raw(self, raw, *, sender=None):
            self.sent.append(bytes(raw))
            now[0] += 10.0  # the request timeout, waited out
            error = NodeUnreachable("read timed out")
            error.maybe_delivered = True
            raise error

        def transaction(self, tx_hash):
            now[0] += 20.0  # a read: tried twice
            raise NodeUnreachable("read timed out")

    rpc = Hung(10**9)
    s = Sender(
        rpc,
        {KEY.address: KEY},
        1,
        receipt_timeout=120,
        poll_latency=0.01,
        confirmation_timeout=1,
        unreachable_timeout=10,
        clock=lambda: now[0],
        sleep=lambda seconds: None,
    )
    with pytest.raises(OutcomeUnknown):
        drive(s, s._sign_and_submit(KEY.address, dict(TX)))
    assert len(rpc.sent) == 1, "no resend into a node that has been silent for unreachable_timeout"


# ---------------------------------------------------------------------------
# Settling: the receipt wait and the cancellation, through both drivers
# ---------------------------------------------------------------------------


class Chainlike(FakeRpc):
    """Mines on cue: ``mine(hash)`` gives a transaction a receipt in the next block."""

    def __init__(self):
        super().__init__(10**9)
        self.head = 10
        self.receipts: dict[str, dict] = {}

    def mine(self, tx_hash: str) -> None:
        from hexbytes import HexBytes

        self.head += 1
        self.receipts[tx_hash] = {
            "transactionHash": HexBytes(tx_hash),
            "blockNumber": self.head,
            "blockHash": HexBytes(b"\x01" * 32),
            "status": 1,
            "gasUsed": 21_000,
            "logs": [],
        }

    def receipt(self, tx_hash):
        return self.receipts.get(tx_hash)

    def block_number(self):
        return self.head

    def call(self, tx, block="latest", *, resource=None):
        return b""


def _hash_of_send(rpc, index):
    return _hash(rpc.sent[index])


def test_a_stuck_transaction_is_cancelled_and_the_mined_cancellation_means_nothing_happened(drive):
    """No receipt within receipt_timeout: a no-op with the same nonce goes out; once it is mined,
    TransactionTimeout names both hashes and the nonce."""
    from chainfence.errors import TransactionTimeout

    rpc = Chainlike()
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        if len(rpc.sent) == 2 and _hash_of_send(rpc, 1) not in rpc.receipts:
            rpc.mine(_hash_of_send(rpc, 1))  # the cancellation is mined

    s = Sender(
        rpc,
        {KEY.address: KEY},
        1,
        receipt_timeout=1,
        poll_latency=0.1,
        confirmation_timeout=1,
        clock=lambda: now[0],
        sleep=sleep,
    )
    with pytest.raises(TransactionTimeout) as timeout:
        drive(s, s.transact_steps(KEY.address, dict(TX), gas=21_000, confirmations=0), locked=False)
    assert timeout.value.nonce == 7 and len(timeout.value.tx_hashes) == 2
    assert len(rpc.sent) == 2 and rpc.sent[0] != rpc.sent[1], "the original, then its cancellation"


def test_a_stuck_transaction_mined_after_all_is_returned(drive):
    """The original is mined while its cancellation is out: the caller gets the original's receipt."""
    rpc = Chainlike()
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        if len(rpc.sent) == 2 and not rpc.receipts:
            rpc.mine(_hash_of_send(rpc, 0))  # the original wins the nonce

    s = Sender(
        rpc,
        {KEY.address: KEY},
        1,
        receipt_timeout=1,
        poll_latency=0.1,
        confirmation_timeout=1,
        clock=lambda: now[0],
        sleep=sleep,
    )
    receipt = drive(s, s.transact_steps(KEY.address, dict(TX), gas=21_000, confirmations=0), locked=False)
    assert receipt["transactionHash"].to_0x_hex() == _hash_of_send(rpc, 0)


def test_a_cancelled_task_forgets_the_nonce_it_may_have_used():
    """asyncio cancels a task at an await: cancelled while its send is in flight, the sender forgets
    the cached nonce (the node may hold that transaction), as it does for any error in doubt."""

    class Hanging(FakeRpc):
        def __init__(self):
            super().__init__(10**9)
            self.sending = asyncio.Event()

    rpc = Hanging()
    s = sender(10**9, lambda: 0.0, rpc)

    class View(AsyncView):
        async def send_raw(self, raw, *, sender=None):
            rpc.sent.append(bytes(raw))
            rpc.sending.set()
            await asyncio.Event().wait()  # never answered

    async def main():
        async def sleep(seconds):
            pass

        task = asyncio.create_task(
            arun(s._sign_and_submit(KEY.address, dict(TX)), View(rpc), sleep=sleep, lock=lambda key: asyncio.Lock())
        )
        await rpc.sending.wait()
        assert s._next_nonce == {KEY.address: 7}, "the nonce was read and cached"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert KEY.address not in s._next_nonce, "in doubt: the next send asks the node"


def test_a_receipt_not_there_at_once_is_asked_again_after_a_millisecond_then_less_and_less_often(drive):
    """A node that answers the send before its block is indexed (anvil automine): the second look
    comes 1 ms later, not a whole poll latency later, and the gaps double up to the poll latency."""
    rpc = Chainlike()
    now, gaps = [0.0], []

    def sleep(seconds):
        now[0] += seconds
        gaps.append(seconds)
        if len(gaps) == 9:
            rpc.mine(_hash_of_send(rpc, 0))

    s = Sender(
        rpc,
        {KEY.address: KEY},
        1,
        receipt_timeout=60,
        poll_latency=0.1,
        confirmation_timeout=1,
        clock=lambda: now[0],
        sleep=sleep,
    )
    drive(s, s.transact_steps(KEY.address, dict(TX), gas=21_000, confirmations=0), locked=False)
    assert gaps == [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.1, 0.1]
