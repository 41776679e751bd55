"""Fenced requests without a chain: the EIP-712 encoding, recovery, and the header format."""

from __future__ import annotations

import dataclasses

import pytest
from eth_account import Account
from eth_utils import keccak

from chainfence import FencedRequest
from chainfence.errors import InvalidInput, InvalidSignature, MalformedRequest
from chainfence.fenced_requests import HEADERS, EIP712Domain, http_action

DOMAIN = EIP712Domain("FencingRegistry", "2", 31337, "0x5FbDB2315678afecb367f032d93F642f64180aa3")
KEY = Account.from_key("0x" + "42" * 32)


def request(**overrides) -> FencedRequest:
    fields = {
        "resource": "reports/daily",
        "token": 7,
        "holder": KEY.address,
        "action": "POST /reports/daily",
        "audience": "reports-service",
        "payload": b"body",
        "key": KEY,
        **overrides,
    }
    return FencedRequest.sign(DOMAIN, **fields)


def test_the_signature_is_standard_eip712_typed_data():
    """Same bytes as eth-account's sign_typed_data over the documented types: wallets can sign these."""
    ours = request(nonce=5, deadline=1_900_000_000)
    message = {
        "types": {
            "EIP712Domain": [
                {"name": n, "type": t}
                for n, t in (
                    ("name", "string"),
                    ("version", "string"),
                    ("chainId", "uint256"),
                    ("verifyingContract", "address"),
                )
            ],
            "FencedRequest": [
                {"name": n, "type": t}
                for n, t in (
                    ("resource", "bytes32"),
                    ("token", "uint256"),
                    ("holder", "address"),
                    ("action", "string"),
                    ("audience", "string"),
                    ("payloadDigest", "bytes32"),
                    ("nonce", "uint256"),
                    ("deadline", "uint256"),
                )
            ],
        },
        "primaryType": "FencedRequest",
        "domain": {
            "name": "FencingRegistry",
            "version": "2",
            "chainId": 31337,
            "verifyingContract": DOMAIN.verifying_contract,
        },
        "message": {
            "resource": keccak(b"reports/daily"),
            "token": 7,
            "holder": KEY.address,
            "action": "POST /reports/daily",
            "audience": "reports-service",
            "payloadDigest": keccak(b"body"),
            "nonce": 5,
            "deadline": 1_900_000_000,
        },
    }
    assert Account.sign_typed_data(KEY.key, full_message=message).signature == ours.signature
    assert ours.recover(DOMAIN) == KEY.address


def test_the_action_and_the_audience_are_signed():
    """A request re-labelled with another action or audience no longer recovers its signer."""
    signed = request()
    for relabelled in (
        dataclasses.replace(signed, action="DELETE /reports/daily"),
        dataclasses.replace(signed, action="POST /reports/daily?all=1"),
        dataclasses.replace(signed, audience="billing-service"),
    ):
        assert relabelled.recover(DOMAIN) != KEY.address


def test_a_version_1_domain_is_refused_when_signing():
    with pytest.raises(InvalidInput, match="version 1"):
        FencedRequest.sign(
            dataclasses.replace(DOMAIN, version="1"),
            resource="r",
            token=1,
            holder=KEY.address,
            action="a",
            audience="b",
            payload=b"",
            key=KEY,
        )


def test_a_version_1_request_says_so():
    headers = request().to_headers()
    del headers[HEADERS["action"]], headers[HEADERS["audience"]]
    with pytest.raises(MalformedRequest, match="version 1"):
        FencedRequest.from_headers(headers)


@pytest.mark.parametrize(
    ("method", "path", "query", "action"),
    [
        ("post", "/reports/daily", b"", "POST /reports/daily"),
        ("GET", "/r%2Fx", b"a=1&b=%20", "GET /r%2Fx?a=1&b=%20"),
    ],
)
def test_http_actions_are_method_path_and_query(method, path, query, action):
    assert http_action(method, path, query) == action


def test_another_domain_recovers_someone_else():
    signed = request()
    for other in (
        dataclasses.replace(DOMAIN, chain_id=1),
        dataclasses.replace(DOMAIN, verifying_contract="0x" + "11" * 20),
    ):
        assert signed.recover(other) != KEY.address


def test_a_malleable_high_s_signature_is_refused():
    signed = request()
    n = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
    r, s, v = signed.signature[:32], int.from_bytes(signed.signature[32:64], "big"), signed.signature[64]
    twin = dataclasses.replace(signed, signature=r + (n - s).to_bytes(32, "big") + bytes([55 - v]))
    with pytest.raises(InvalidSignature, match="malleable"):
        twin.recover(DOMAIN)


def test_headers_round_trip():
    signed = request(resource="rapports/été", action="PUT /rapports/%C3%A9t%C3%A9?x=1", audience="service été")
    assert FencedRequest.from_headers(signed.to_headers()) == signed


@pytest.mark.parametrize("field", sorted(HEADERS))
def test_a_missing_header_is_malformed(field):
    headers = request().to_headers()
    del headers[HEADERS[field]]
    with pytest.raises(MalformedRequest, match=HEADERS[field]):
        FencedRequest.from_headers(headers)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("token", "seven"),
        ("token", "0"),
        ("holder", "0x1234"),
        ("payload_digest", "0xabcd"),
        ("payload_digest", "abcd" * 16),
        ("signature", "0x"),
        ("signature", "0x" + "00" * 2049),
        ("nonce", "zz"),
        ("deadline", "soon"),
        ("resource", ""),
        ("resource", "%FF%FE"),
        ("action", "%FF"),
        ("audience", "x" * 3000),
    ],
)
def test_a_bad_header_is_malformed(field, value):
    headers = request().to_headers()
    headers[HEADERS[field]] = value
    with pytest.raises(MalformedRequest):
        FencedRequest.from_headers(headers)
