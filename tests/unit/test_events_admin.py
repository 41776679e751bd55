"""The events issue #11 adds (revokes, grants, namespaces) decode now, from hand-built logs, and the
audit index places revoked and granted leases in their history with the admin who acted."""

from __future__ import annotations

import ast
from pathlib import Path

from eth_abi import encode
from eth_utils import keccak

import chainfence
from chainfence._node import events as _events
from chainfence.audit._projection import apply as _apply
from chainfence.audit.index import AuditIndex

RESOURCE = keccak(b"prod/db")
NAMESPACE = keccak(b"prod")
HOLDER = "0x" + "11" * 20
OTHER = "0x" + "22" * 20
ADMIN = "0x" + "aa" * 20


def word(value) -> bytes:
    if isinstance(value, int):
        return value.to_bytes(32, "big")
    if isinstance(value, str):
        return bytes.fromhex(value[2:]).rjust(32, b"\0")
    return value


def log(signature: str, *topics, data: bytes = b"", block: int = 7, index: int = 0) -> dict:
    return {
        "topics": [keccak(text=signature), *(word(t) for t in topics)],
        "data": data,
        "blockNumber": block,
        "blockHash": b"\x01" * 32,
        "transactionHash": b"\x02" * 32,
        "logIndex": index,
    }


def test_revoked_and_granted_decode_with_their_admin():
    revoked = _events.decode(
        log("LeaseRevoked(bytes32,uint256,address,address)", RESOURCE, 5, HOLDER, data=encode(["address"], [ADMIN]))
    )
    assert revoked.kind is _events.Kind.REVOKED and revoked.token == 5 and revoked.holder.lower() == HOLDER
    assert revoked.admin.lower() == ADMIN
    granted = _events.decode(
        log("LeaseGranted(bytes32,uint256,address,address)", RESOURCE, 6, OTHER, data=encode(["address"], [ADMIN]))
    )
    assert granted.kind is _events.Kind.GRANTED and granted.admin.lower() == ADMIN


def test_namespace_events_decode():
    named = _events.decode(log("NamespaceNamed(bytes32,string)", NAMESPACE, data=encode(["bytes"], [b"\xffprod"])))
    assert named.kind is _events.Kind.NAMESPACE_NAMED and named.name == b"\xffprod", "any bytes, kept as bytes"
    policy = _events.decode(
        log(
            "NamespacePolicySet(bytes32,address,uint256,uint256,bool)",
            NAMESPACE,
            ADMIN,
            data=encode(["uint256", "uint256", "bool"], [600, 30, True]),
        )
    )
    assert (policy.max_ttl, policy.lock_delay, policy.admission_required) == (600, 30, True)
    admission = _events.decode(
        log(
            "NamespaceAdmissionSet(bytes32,address,bool,address)",
            NAMESPACE,
            HOLDER,
            data=encode(["bool", "address"], [True, ADMIN]),
        )
    )
    assert admission.admitted is True and admission.admin.lower() == ADMIN and admission.holder.lower() == HOLDER
    started = _events.decode(log("NamespaceAdminTransferStarted(bytes32,address,address)", NAMESPACE, ADMIN, OTHER))
    done = _events.decode(log("NamespaceAdminTransferred(bytes32,address,address)", NAMESPACE, ADMIN, OTHER))
    assert (
        (started.admin.lower(), started.new_admin.lower())
        == (ADMIN, OTHER)
        == (done.admin.lower(), done.new_admin.lower())
    )


def test_malformed_admin_events_are_skipped_not_raised():
    assert (
        _events.decode(log("LeaseRevoked(bytes32,uint256,address,address)", RESOURCE, 5, HOLDER, data=b"\x01")) is None
    )
    assert _events.decode(log("LeaseRevoked(bytes32,uint256,address,address)", RESOURCE, 5)) is None  # a topic short
    bad_address = "0x" + "ff" * 32
    assert (
        _events.decode(
            log(
                "LeaseGranted(bytes32,uint256,address,address)",
                RESOURCE,
                6,
                bad_address,
                data=encode(["address"], [ADMIN]),
            )
        )
        is None
    )


def test_the_index_records_a_revoke_and_a_grant_with_the_admin():
    index = AuditIndex(":memory:")
    acquired = "LeaseAcquired(bytes32,uint256,address,uint256,uint256,uint8)"
    entries = [
        log(acquired, RESOURCE, 1, HOLDER, data=encode(["uint256"] * 3, [1_000, 0, 0]), block=1),
        log(
            "LeaseRevoked(bytes32,uint256,address,address)",
            RESOURCE,
            1,
            HOLDER,
            data=encode(["address"], [ADMIN]),
            block=2,
        ),
        log(acquired, RESOURCE, 2, OTHER, data=encode(["uint256"] * 3, [2_000, 1, 5]), block=3),
        log(
            "LeaseGranted(bytes32,uint256,address,address)",
            RESOURCE,
            2,
            OTHER,
            data=encode(["address"], [ADMIN]),
            block=3,
            index=1,
        ),
    ]
    with index._write() as conn:
        for number, entry in enumerate(entries):
            _apply(conn, _events.decode(entry), 100 + number)
    first, second = index.history_by_id(RESOURCE)
    assert (first.ended, first.ended_by.lower(), first.successor) == ("revoked", ADMIN, 2)
    assert (second.reason, second.granted_by.lower(), second.previous_token) == (5, ADMIN, 1)


def test_registry_logs_are_decoded_in_one_module():
    """No second copy: outside the node layer (_node/events.py) nothing builds event topics or decodes registry
    logs' topics."""
    src = Path(chainfence.__file__).resolve().parent
    for path in sorted(src.rglob("*.py")):
        if path.relative_to(src).parts[0] == "_node" or path.name == "fenced_store.py":
            continue  # the node layer (its one decoder: _node/events.py), and the FencedStore contract's own event
        text = path.read_text()
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not node.value.startswith(
                    (
                        "LeaseAcquired(",
                        "LeaseRenewed(",
                        "LeaseReleased(",
                        "ResourceNamed(",
                        "LeaseCompleted(",
                        "LeaseRevoked(",
                        "LeaseGranted(",
                    )
                ), path.name
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Constant)
                and node.value.value == "topics"
            ):
                raise AssertionError(f"{path.name} reads a log's topics itself")
        assert '["topics"]' not in text, f"{path.name} reads a log's topics itself"


def test_a_decoded_log_is_a_record_that_cannot_change():
    """A log is a named tuple (start time: docs/explanation/design.md): its fields cannot be set, it hashes
    by value, and ``index`` (a refused operation's place, named as the event's argument) is the field, not
    ``tuple.index``."""
    refused = _events.decode(
        log(
            "BatchOpRefused(bytes32,address,uint256,bytes)",
            RESOURCE,
            HOLDER,
            data=encode(["uint256", "bytes"], [3, b"\x01"]),
        )
    )
    assert refused.kind is _events.Kind.REFUSED and refused.index == 3 and refused.refusal == b"\x01"
    try:
        refused.token = 9  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("a decoded log took a new token")
    assert hash(refused) == hash(refused._replace()) and refused == refused._replace()
    assert refused != refused._replace(index=4)
