"""batchCalls, the registry's group commit, audited as a contract on both backends.

The promise: each operation of a batch runs as its lone call would at that point of the transaction,
and one the lone call would refuse is skipped, logged with the very bytes the lone call reverts with
(``BatchOpRefused``), while the others go on. The differential test below builds one world with a
resource in each state a lone call refuses (held, lock-delayed, not admitted, over the namespace's
maxTtl, the sender's own live lease for an exclusive acquisition, stale, unknown, another's, released,
revoked, completed, expired, bad input), asks each lone call for its revert data (``eth_call`` as the
sender), then sends ONE batch of all of them with operations that go through interleaved: every
refusal is byte for byte the lone call's, every other operation landed with the lone call's events,
tokens are consecutive in order, and nothing was refused that should not be.

Each operation IS its lone call: the registry calls itself with ``delegatecall`` (issue 26), which keeps
``msg.sender``. The controls show what the batch is not: the all-or-nothing ``acquireMany`` reverts as a
whole on the same held resource, and a lone call made with a plain ``call`` by a contract (what a batch
calling itself with ``call``, or ``try this.acquire``, would do) makes that contract the holder.
"""

from __future__ import annotations

import pytest

from chainfence import LeaseSet
from chainfence._node import events as _events
from chainfence._node.reverts import decode as decode_revert
from chainfence._node.reverts import revert_data
from chainfence._sdk import names as _names
from chainfence.errors import InvalidClaimItems, LeaseHeld, RegistryOverflow, TransactionFailed, UnknownRevert
from tests.support.wallet import AgentWallet

# On hardhat's node too; not on ganache, whose EVM lacks the MCOPY these paths use (docs/nodes.md).
pytestmark = pytest.mark.nodes("hardhat")

ACQUIRE, EXCLUSIVE, RENEW, RELEASE = 0, 1, 2, 3
GAS = 8_000_000


def op(kind: int, *, name: str = "", resource: bytes = bytes(32), token: int = 0, ttl: int = 0) -> tuple:
    return (kind, name, resource, token, ttl)


def on(kind: int, name: str, token: int, ttl: int = 0) -> tuple:
    return op(kind, resource=_names.resource_id(name), token=token, ttl=ttl)


def lone_call(registry, sender: str, operation: tuple) -> tuple[str, list]:
    kind, name, resource, token, ttl = operation
    if kind == ACQUIRE:
        return "acquire", [name, ttl]
    if kind == EXCLUSIVE:
        return "acquireExclusive", [name, ttl]
    if kind == RENEW:
        return "renew", [resource, token, ttl]
    return "release", [resource, token]


def lone_revert(chain, registry, sender: str, operation: tuple) -> bytes | None:
    """The revert data of the lone call of ``operation`` sent by ``sender`` now (None: it would go through)."""
    function, args = lone_call(registry, sender, operation)
    try:
        chain.w3.eth.call({"from": sender, "to": registry.address, "data": registry._encode(function, args)})
    except Exception as reverted:
        data = revert_data(reverted)
        assert data is not None, f"{function}: not a revert: {reverted!r}"
        return data
    return None


def send_batch(chain, registry, sender: str, ops: list[tuple]):
    data = registry._encode("batchCalls", [ops])
    return chain.transact(sender, registry.address, data, gas=GAS)


def logs_of(registry, receipt) -> list[_events.RegistryLog]:
    entries = [_events.decode(log) for log in receipt["logs"] if log["address"] == registry.address]
    return [entry for entry in entries if entry is not None]


@pytest.fixture
def world(chain, registry):
    """alice sends the batches; bob holds what she cannot have; carol's address namespace has a maxTtl of 600
    and a lock-delay of 1,000 s; dave's admits nobody but bob."""
    alice, bob, carol, dave = (registry.connect(chain.accounts[i]) for i in (1, 2, 3, 4))
    c_ns, d_ns = carol.namespace().prefix, dave.namespace().prefix
    carol.namespace(c_ns).set_policy(max_ttl=600, lock_delay=1_000)
    dave.namespace(d_ns).set_policy(admission_required=True)
    dave.namespace(d_ns).admit([bob.sender])

    state: dict[str, object] = {"c_ns": c_ns, "d_ns": d_ns}
    bob.acquire("b/held", ttl=3_000)
    bob.acquire(f"{c_ns}/delayed", ttl=10)  # expires below, then its lock-delay runs
    alice.acquire("b/mine", ttl=3_000)
    alice.acquire("b/mine-again", ttl=3_000)
    bob.acquire("b/bobs-short", ttl=10)
    state["stale"] = alice.acquire("b/re", ttl=3_000).token
    state["re"] = alice.acquire("b/re", ttl=3_000).token  # fences off "stale"
    state["bobs"] = bob.lease_of("b/held").token
    released = alice.acquire("b/rel", ttl=3_000)
    released.release()
    state["released"] = released.token
    state["revoked"] = alice.acquire(f"{c_ns}/rev", ttl=600).token
    carol.namespace(c_ns).revoke(f"{c_ns}/rev")
    claim = alice.workset("b/work").claim(["i1"], ttl=3_000)
    claim.complete(b"done")
    state["completed"], state["item"] = claim.token, claim.resource_id
    state["expired"] = alice.acquire("b/short", ttl=10).token
    state["recorded"] = alice.acquire(f"{c_ns}/rec", ttl=600).token  # recorded: its renewals read the cap
    state["live"] = alice.acquire("b/live", ttl=3_000).token
    state["gone"] = alice.acquire("b/gone", ttl=3_000).token
    bob.acquire("b/released-before", ttl=30).release()
    chain.advance_time(100)  # the short ones and bob's "delayed" expired; the lock-delay (1,000 s) still runs
    return alice, bob, state


def test_each_refusal_is_the_lone_calls_revert_byte_for_byte_and_the_others_go_on(chain, registry, world):
    alice, bob, s = world
    c_ns, d_ns = s["c_ns"], s["d_ns"]
    refused = {
        "held": op(ACQUIRE, name="b/held", ttl=60),
        "lock-delayed": op(ACQUIRE, name=f"{c_ns}/delayed", ttl=60),
        "not admitted": op(ACQUIRE, name=f"{d_ns}/closed", ttl=60),
        "over the namespace's maxTtl": op(ACQUIRE, name=f"{c_ns}/capped", ttl=700),
        "exclusive, the sender's own live lease": op(EXCLUSIVE, name="b/mine", ttl=60),
        "empty name": op(ACQUIRE, name="", ttl=60),
        "name of 129 bytes": op(ACQUIRE, name="n" * 129, ttl=60),
        "ttl 0": op(ACQUIRE, name="b/ttl0", ttl=0),
        "ttl over the registry's": op(ACQUIRE, name="b/ttlmax", ttl=3_601),
        "renew: stale": on(RENEW, "b/re", s["stale"], 60),
        "renew: unknown": on(RENEW, "b/re", s["re"] + 10_000, 60),
        "renew: token 0": on(RENEW, "b/re", 0, 60),
        "renew: another's": on(RENEW, "b/held", s["bobs"], 60),
        "renew: released": on(RENEW, "b/rel", s["released"], 60),
        "renew: revoked": on(RENEW, f"{c_ns}/rev", s["revoked"], 60),
        "renew: completed": op(RENEW, resource=s["item"], token=s["completed"], ttl=60),
        "renew: expired": on(RENEW, "b/short", s["expired"], 60),
        "renew: over the recorded namespace's maxTtl": on(RENEW, f"{c_ns}/rec", s["recorded"], 700),
        "renew: ttl 0 (checked before the token)": on(RENEW, "b/rel", s["released"], 0),
        "release: stale": on(RELEASE, "b/re", s["stale"]),
        "release: another's": on(RELEASE, "b/held", s["bobs"]),
        "release: released": on(RELEASE, "b/rel", s["released"]),
        "release: revoked": on(RELEASE, f"{c_ns}/rev", s["revoked"]),
        "release: completed": op(RELEASE, resource=s["item"], token=s["completed"]),
        "release: expired": on(RELEASE, "b/short", s["expired"]),
    }
    going = {
        "acquire: never held": op(ACQUIRE, name="b/fresh", ttl=60),
        "acquire: released before": op(ACQUIRE, name="b/released-before", ttl=60),
        "acquire: expired (no lock-delay)": op(ACQUIRE, name="b/bobs-short", ttl=60),
        "acquire: the sender's own live lease (re-acquired)": op(ACQUIRE, name="b/mine-again", ttl=60),
        "acquire: admitted nowhere it needs to be, capped within": op(ACQUIRE, name=f"{c_ns}/within", ttl=600),
        "renew: live": on(RENEW, "b/live", s["live"], 120),
        "release: live": on(RELEASE, "b/gone", s["gone"]),
    }
    touched = {o[1] or o[2] for o in going.values()}
    assert not touched & {o[1] or o[2] for o in refused.values()}, "each operation on a resource of its own"
    expected = {label: lone_revert(chain, registry, alice.sender, o) for label, o in refused.items()}
    assert all(data is not None for data in expected.values())
    assert all(lone_revert(chain, registry, alice.sender, o) is None for o in going.values())

    labels = [label for pair in zip(refused, [*going, *[None] * len(refused)]) for label in pair if label]
    labels += [label for label in going if label not in labels]
    ops = [{**refused, **going}[label] for label in labels]
    assert len(ops) == len(refused) + len(going) <= 64
    before = registry.latest_token()
    receipt = send_batch(chain, registry, alice.sender, ops)
    assert receipt["status"] == 1

    logs = logs_of(registry, receipt)
    refusals = {entry.index: entry for entry in logs if entry.kind is _events.Kind.REFUSED}
    assert sorted(refusals) == [i for i, label in enumerate(labels) if label in refused], "exactly the refused ones"
    for index, entry in refusals.items():
        label = labels[index]
        assert entry.refusal == expected[label], f"{label}: {decode_revert(entry.refusal)!r}"
        assert entry.holder == alice.sender
        assert not isinstance(decode_revert(entry.refusal), UnknownRevert)
    acquired = [entry for entry in logs if entry.kind is _events.Kind.ACQUIRED]
    acquiring = [label for label in labels if label.startswith("acquire:")]
    assert [entry.token for entry in acquired] == list(range(before + 1, before + 1 + len(acquiring)))
    assert [entry.resource_id for entry in acquired] == [_names.resource_id(going[label][1]) for label in acquiring]
    assert all(entry.holder == alice.sender for entry in acquired)
    assert registry.latest_token() == before + len(acquiring)
    reasons = {label: entry.reason for label, entry in zip(acquiring, acquired)}
    assert reasons["acquire: never held"] == 0 and reasons["acquire: released before"] == 1
    assert reasons["acquire: expired (no lock-delay)"] == 2
    assert reasons["acquire: the sender's own live lease (re-acquired)"] == 3
    assert [e.kind for e in logs if e.kind is _events.Kind.NAMED] == [_events.Kind.NAMED] * 2  # fresh, within
    assert registry.lease_of("b/live").expires_at >= chain.now() + 100
    assert registry.lease_of("b/gone") is None
    assert registry.lease_of("b/held").holder == bob.sender, "a refused operation changed nothing"


def test_a_refusal_in_the_batch_is_the_error_the_sdk_raises_for_the_lone_call(chain, registry, world):
    """Decoded, the logged refusal is the typed error a lone SDK call raises (its class and fields)."""
    alice, bob, _ = world
    receipt = send_batch(chain, registry, alice.sender, [op(ACQUIRE, name="b/held", ttl=60)])
    (entry,) = logs_of(registry, receipt)
    with pytest.raises(LeaseHeld) as lone:
        alice.acquire("b/held", ttl=60)
    batched = decode_revert(entry.refusal)
    assert type(batched) is LeaseHeld
    assert batched.details() == {**lone.value.details(), "resource": None, "message": batched.details()["message"]}
    assert (batched.holder, batched.token, batched.expires_at) == (bob.sender, lone.value.token, lone.value.expires_at)


def test_the_same_resource_twice_is_acted_on_twice_in_order(chain, registry, alice, bob):
    """Two acquisitions of one name by one sender: the second re-acquires (reason Reacquired), as two lone
    calls mined one after the other would; then a release of the first token is stale, of the second goes."""
    receipt = send_batch(chain, registry, alice.sender, [op(ACQUIRE, name="d/twice", ttl=60)] * 2)
    first, second = (e for e in logs_of(registry, receipt) if e.kind is _events.Kind.ACQUIRED)
    assert (first.reason, second.reason, second.previous_token) == (0, 3, first.token)
    receipt = send_batch(
        chain, registry, alice.sender, [on(RELEASE, "d/twice", first.token), on(RELEASE, "d/twice", second.token)]
    )
    kinds = [e.kind for e in logs_of(registry, receipt)]
    assert kinds == [_events.Kind.REFUSED, _events.Kind.RELEASED]


def test_bad_batches_revert_whole_and_change_nothing(chain, registry, alice):
    """Only an empty batch or one of more than 64 operations reverts (InvalidClaimItems, the InvalidItems revert); nothing is done."""
    before = registry.latest_token()
    for ops in ([], [op(ACQUIRE, name=f"e/{i}", ttl=60) for i in range(65)]):
        data = registry._encode("batchCalls", [ops])
        with pytest.raises(InvalidClaimItems):
            chain.call(registry.address, data)
        with pytest.raises((InvalidClaimItems, TransactionFailed)):
            chain.transact(alice.sender, registry.address, data, gas=GAS)
    assert registry.latest_token() == before and registry.lease_of("e/0") is None


def test_a_batch_that_runs_out_of_gas_lands_nothing(chain, registry, alice, bob):
    """Out of gas mid-batch: the whole transaction is undone (status 0), even the operations before."""
    before = registry.latest_token()
    ops = [op(ACQUIRE, name=f"g/{i}", ttl=60) for i in range(8)]
    with pytest.raises(TransactionFailed):
        chain.transact(alice.sender, registry.address, registry._encode("batchCalls", [ops]), gas=120_000)
    assert registry.latest_token() == before
    assert all(registry.lease_of(f"g/{i}") is None for i in range(8))


def test_control_acquire_many_is_all_or_nothing_on_the_same_held_resource(chain, registry, alice, bob):
    """What batchCalls is not: acquireMany with one held name reverts, and the free names are not taken."""
    bob.acquire("c/held", ttl=600)
    with pytest.raises(LeaseHeld):
        LeaseSet.acquire(alice, ["c/free", "c/held"], ttl=60)
    assert registry.lease_of("c/free") is None
    receipt = send_batch(
        chain, registry, alice.sender, [op(ACQUIRE, name="c/free", ttl=60), op(ACQUIRE, name="c/held", ttl=60)]
    )
    assert [e.kind for e in logs_of(registry, receipt)][-2:] == [_events.Kind.ACQUIRED, _events.Kind.REFUSED]
    assert registry.lease_of("c/free").holder == alice.sender


def test_an_operation_of_no_known_kind_reverts_the_whole_batch(chain, registry, alice):
    """Malformed input (a kind past Release) is refused by the ABI decoder: the whole batch reverts, nothing done."""
    before = registry.latest_token()
    ops = [op(ACQUIRE, name="k/first", ttl=60), (4, "", bytes(32), 0, 0)]
    with pytest.raises((TransactionFailed, UnknownRevert)):
        send_batch(chain, registry, alice.sender, ops)
    assert registry.latest_token() == before and registry.lease_of("k/first") is None


def test_a_token_past_48_bits_refuses_each_acquisition_of_a_batch_alone(on_anvil):
    """Issue 26: each operation of a batch IS its lone call (the registry delegatecalls itself), so every refusal
    of the lone call is the operation's own, this one too: with the counter at 2**48 - 1 (set on anvil), an
    acquisition's next token does not fit its 48 bits; the batch logs the lone call's FencingRegistryUint48Overflow
    for it and the renewal beside it lands. The batch that mirrored the lone calls' checks had no mirror for this
    one: the whole batch reverted, renewal included. Control: the lone acquisition reverts with the same bytes."""
    registry = on_anvil
    chain = registry.chain
    alice = registry.connect(chain.accounts[1])
    lease = alice.acquire("t/renewed", ttl=600)
    counter_slot = 1  # `_counter`, the registry's second state variable: bits 0..47 the latest token
    filter_bits = int.from_bytes(chain.w3.eth.get_storage_at(registry.address, counter_slot), "big") >> 48 << 48
    value = filter_bits | ((1 << 48) - 1)
    chain.rpc.request(
        "anvil_setStorageAt", [registry.address, hex(counter_slot), "0x" + value.to_bytes(32, "big").hex()]
    )
    assert registry.latest_token() == (1 << 48) - 1

    acquisition = op(ACQUIRE, name="t/past", ttl=60)
    lone = lone_revert(chain, registry, alice.sender, acquisition)
    assert isinstance(decode_revert(lone), RegistryOverflow) and decode_revert(lone).value == 1 << 48
    renewal = on(RENEW, "t/renewed", lease.token, 600)
    receipt = send_batch(chain, registry, alice.sender, [acquisition, renewal])
    assert receipt["status"] == 1, "the batch went on"
    refused, renewed = logs_of(registry, receipt)
    assert (refused.kind, refused.index, refused.refusal) == (_events.Kind.REFUSED, 0, lone)
    assert refused.resource_id == _names.resource_id("t/past")
    assert renewed.kind is _events.Kind.RENEWED and renewed.token == lease.token
    assert registry.latest_token() == (1 << 48) - 1 and registry.lease_of("t/past") is None


def test_control_a_lone_call_made_by_a_contract_is_held_by_that_contract(chain, registry, alice):
    """What the batch's delegatecall avoids, shown: a lone acquisition sent by a contract with a plain CALL (the
    example AgentWallet's `execute`; a batch calling itself with `call` or `try this.acquire(...)` would do the
    same) has the contract as `msg.sender`, so the contract holds the lease, not the account that signed the
    transaction. In a batch the signer holds it (the differential test checks every operation)."""
    wallet = AgentWallet(registry, alice.sender)
    lease = wallet.acquire("ctl/through-a-call", ttl=60)
    assert lease.holder.lower() == wallet.address.lower() != alice.sender.lower()
    receipt = send_batch(chain, registry, alice.sender, [op(ACQUIRE, name="ctl/in-a-batch", ttl=60)])
    (acquired,) = [entry for entry in logs_of(registry, receipt) if entry.kind is _events.Kind.ACQUIRED]
    assert acquired.holder == alice.sender
