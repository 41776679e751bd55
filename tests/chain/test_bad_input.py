"""Bad input: a typed, clear error, and nothing changes on-chain."""

from __future__ import annotations

import pytest

from chainfence import Registry, audit
from chainfence.errors import (
    ContractNotFound,
    InvalidInput,
    InvalidMaxTtl,
    InvalidResourceName,
    InvalidTtl,
    UnknownAccount,
)

BAD_NAMES = [
    pytest.param("", id="empty"),
    pytest.param("x" * 129, id="129-bytes"),
    pytest.param("é" * 65, id="130-utf8-bytes"),
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param(b"reports/daily", id="bytes"),
    pytest.param(None, id="none"),
    pytest.param(7, id="int"),
]
BAD_TTLS = [
    pytest.param(0, id="zero"),
    pytest.param(-5, id="negative"),
    pytest.param(3_601, id="above-max"),
    pytest.param(1.5, id="float"),
    pytest.param(30.0, id="integral-float"),
    pytest.param("30", id="str"),
    pytest.param(True, id="bool"),
    pytest.param(None, id="none"),
]
BAD_TOKENS = [
    pytest.param(0, id="zero"),
    pytest.param(-1, id="negative"),
    pytest.param(2**256, id="too-wide"),
    pytest.param(1.0, id="float"),
    pytest.param("1", id="str"),
    pytest.param(True, id="bool"),
]
BAD_ADDRESSES = [
    pytest.param("0x1234", id="short"),
    pytest.param("not an address", id="text"),
    pytest.param("F39Fd6e51aad88F6F4ce6aB8827279cffFb92266", id="no-0x"),
    pytest.param("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92267", id="bad-checksum"),
    pytest.param(12345, id="int"),
    pytest.param(None, id="none"),
]


@pytest.fixture
def unchanged(chain, registry):
    """Assert after the test that no block was mined and the latest token did not move."""
    before = (chain.w3.eth.block_number, registry.latest_token())
    yield
    assert (chain.w3.eth.block_number, registry.latest_token()) == before


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_resource_names_are_refused_before_sending(alice, unchanged, name):
    with pytest.raises(InvalidResourceName) as refused:
        alice.acquire(name, ttl=10)
    assert isinstance(refused.value, ValueError), "input errors are ValueErrors too"
    assert str(refused.value)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_resource_names_are_refused_by_every_call(alice, registry, unchanged, name):
    for call in (
        lambda: alice.renew(name, 1, 10),
        lambda: alice.release(name, 1),
        lambda: registry.lease_of(name),
        lambda: registry.check_current(name, 1),
        lambda: registry.check_current(name, 1),
        # history(None) means "every resource"; any other bad name is refused.
        lambda: audit.history(registry, name if name is not None else ""),
    ):
        with pytest.raises(InvalidResourceName):
            call()


@pytest.mark.parametrize("ttl", BAD_TTLS)
def test_bad_ttls_are_refused(alice, unchanged, ttl):
    with pytest.raises(InvalidTtl) as refused:
        alice.acquire("r", ttl=ttl)
    assert "ttl" in str(refused.value)


@pytest.mark.parametrize("ttl", BAD_TTLS)
def test_bad_ttls_are_refused_on_renew(alice, ttl):
    lease = alice.acquire("r", ttl=10)
    with pytest.raises(InvalidTtl):
        alice.renew("r", lease.token, ttl)
    if ttl is not None:  # Lease.renew(ttl=None) means "the acquired ttl"
        with pytest.raises(InvalidTtl):
            lease.renew(ttl=ttl)
    assert lease.expires_at == alice.lease_of("r").expires_at


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_bad_tokens_are_refused(alice, registry, unchanged, token):
    for call in (
        lambda: alice.renew("r", token, 10),
        lambda: alice.release("r", token),
        lambda: registry.check_current("r", token),
        lambda: registry.check_current("r", token),
    ):
        with pytest.raises(InvalidInput):
            call()


@pytest.mark.parametrize("address", BAD_ADDRESSES)
def test_bad_addresses_are_refused(chain, registry, unchanged, address):
    with pytest.raises(InvalidInput):
        Registry.at(chain, address)
    with pytest.raises(InvalidInput):
        registry.connect(address)


def test_an_address_the_chain_holds_no_key_for_is_refused(registry, unchanged):
    with pytest.raises(UnknownAccount, match="no private key"):
        registry.connect("0x000000000000000000000000000000000000dEaD")


def test_a_registry_address_without_code_is_refused(chain, unchanged):
    with pytest.raises(ContractNotFound):
        Registry.at(chain, "0x000000000000000000000000000000000000dEaD")


@pytest.mark.parametrize("max_ttl", [0, -1, 2**32, 1.5, None])
def test_bad_max_ttl_is_refused_at_deployment(chain, unchanged, max_ttl):
    with pytest.raises(InvalidMaxTtl):
        Registry.deploy(chain, max_ttl=max_ttl)


def test_bad_time_travel_is_refused(chain, unchanged):
    for seconds in (-1, 1.5, "10"):
        with pytest.raises(InvalidInput):
            chain.advance_time(seconds)


# The contract enforces its own bounds: callers that bypass the SDK's
# validation get the same typed errors, decoded from the revert.


def _raw(registry, function, args):
    return registry._encode(function, args)


@pytest.mark.parametrize(
    ("function", "args", "error", "fields"),
    [
        ("acquire", ["", 10], InvalidResourceName, {"length": 0, "max_length": 128}),
        ("acquire", ["x" * 129, 10], InvalidResourceName, {"length": 129, "max_length": 128}),
        ("acquire", ["r", 0], InvalidTtl, {"ttl": 0, "max_ttl": 3_600}),
        ("acquire", ["r", 3_601], InvalidTtl, {"ttl": 3_601, "max_ttl": 3_600}),
        ("acquire", ["r", 2**255], InvalidTtl, {"ttl": 2**255, "max_ttl": 3_600}),
    ],
)
def test_the_contract_refuses_bad_input_on_its_own(chain, registry, unchanged, function, args, error, fields):
    with pytest.raises(error) as refused:
        chain.transact(chain.accounts[1], registry.address, _raw(registry, function, args))
    for name, value in fields.items():
        assert getattr(refused.value, name) == value


def test_the_contract_refuses_token_zero_on_its_own(chain, registry, alice):
    from chainfence.errors import UnknownToken

    alice.acquire("r", ttl=10)
    with pytest.raises(UnknownToken):
        chain.transact(alice.sender, registry.address, _raw(registry, "release", [alice_id("r"), 0]))


def alice_id(name: str) -> bytes:
    from eth_utils import keccak

    return keccak(name.encode())


def test_the_constructor_refuses_a_bad_max_ttl(chain, unchanged):
    """Deploying the bytecode directly with max ttl 0 reverts with InvalidMaxTtl."""
    from chainfence._node import artifacts as _artifacts

    artifact = _artifacts.load()
    factory = chain.w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    data = bytes.fromhex(factory.constructor(0, [], []).data_in_transaction[2:])
    with pytest.raises(InvalidMaxTtl):
        chain.transact(chain.accounts[0], None, data)


def test_time_travel_past_the_embedded_chain_limit_is_a_typed_error(embedded):
    """eth-tester stops at the year 3017 (anvil goes further: see tests/integration): a typed error,
    not a raw provider exception, and the chain does not move."""
    chain = embedded.chain
    before = chain.now()
    with pytest.raises(InvalidInput, match="timestamp"):
        chain.set_next_block_time(2**60)
    with pytest.raises(InvalidInput, match="timestamp"):
        chain.advance_time(2**60)
    assert chain.now() == before


def test_from_deployment_without_a_file_says_what_to_do_in_python(chain, tmp_path, monkeypatch):
    """Issue 27: the message suggested `--registry / CHAINFENCE_REGISTRY`, which Python never reads."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHAINFENCE_DEPLOYMENT", raising=False)
    for argument, where in (
        ((), f"(the default, in the working directory {tmp_path}; $CHAINFENCE_DEPLOYMENT names another)"),
        ((tmp_path / "elsewhere.json",), ""),
    ):
        with pytest.raises(InvalidInput) as missing:
            Registry.from_deployment(chain, *argument)
        message = str(missing.value)
        path = argument[0] if argument else ".chainfence/deployment.json"
        assert message.startswith(f"no deployment file at {path}{' ' + where if where else ''}: "), message
        assert "Registry.from_deployment(chain, 'path/to/deployment.json')" in message
        assert "Registry.at(chain, '0x...')" in message
        assert "--registry" not in message and "CHAINFENCE_REGISTRY" not in message
    monkeypatch.setenv("CHAINFENCE_DEPLOYMENT", str(tmp_path / "named.json"))
    with pytest.raises(InvalidInput, match=r"named\.json \(\$CHAINFENCE_DEPLOYMENT\): "):
        Registry.from_deployment(chain)
