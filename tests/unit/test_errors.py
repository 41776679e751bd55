"""The exception tree: one class per contract error, one root, builtin bases where they fit."""

from __future__ import annotations

import inspect
import pickle
import re

import pytest

from chainfence import errors
from chainfence._node import artifacts as _artifacts
from chainfence.errors import (
    CONTRACT_ERRORS,
    ChainfenceError,
    InvalidInput,
    LeaseExpired,
    LeaseHeld,
    StaleToken,
    TokenNotCurrent,
)

ABI_ERRORS = {
    entry["name"]: entry
    for contract in _artifacts.SHIPPED
    for entry in _artifacts.abi(contract)
    if entry["type"] == "error"
}
REGISTRY_ERRORS = {entry["name"] for entry in _artifacts.abi("FencingRegistry") if entry["type"] == "error"}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_contract_error_has_exactly_one_python_class():
    """Each `error` in the shipped ABIs maps to a class, every mapped name is in an ABI, and the
    registry's own errors map to distinct classes (examples reuse them where they mean the same)."""
    assert set(ABI_ERRORS) == set(CONTRACT_ERRORS)
    registry_classes = [CONTRACT_ERRORS[name] for name in REGISTRY_ERRORS]
    assert len(set(registry_classes)) == len(registry_classes)


@pytest.mark.parametrize("name", sorted(ABI_ERRORS))
def test_each_class_accepts_its_error_arguments(name):
    """from_revert takes the ABI arguments as snake_case keywords (resource -> resource_id)."""
    cls = CONTRACT_ERRORS[name]
    params = inspect.signature(cls.__init__).parameters
    for arg in ABI_ERRORS[name]["inputs"]:
        keyword = "resource_id" if arg["name"] == "resource" else _snake(arg["name"])
        assert keyword in params, f"{cls.__name__} lacks {keyword!r} for {name}"


def test_every_error_derives_from_the_root():
    for name in errors.__all__:
        obj = getattr(errors, name)
        assert issubclass(obj, ChainfenceError), name


def test_input_errors_are_value_errors():
    assert issubclass(InvalidInput, ValueError)
    assert issubclass(errors.NodeUnreachable, ConnectionError)
    assert issubclass(errors.UnknownAccount, LookupError)


def test_one_clause_rejects_every_not_current_token():
    for cls in (errors.StaleToken, errors.UnknownToken, errors.LeaseExpired, errors.LeaseReleased):
        assert issubclass(cls, TokenNotCurrent)


def test_errors_survive_pickling_with_their_fields():
    """Errors cross process boundaries (multiprocessing, concurrent.futures) intact."""
    original = LeaseHeld(holder="0x" + "11" * 20, token=4, expires_at=99, resource="r", resource_id=b"\x01" * 32)
    copy = pickle.loads(pickle.dumps(original))
    assert type(copy) is LeaseHeld
    assert (copy.holder, copy.token, copy.expires_at, copy.resource) == (original.holder, 4, 99, "r")
    assert str(copy) == str(original)


def test_messages_name_the_resource_once_it_is_known():
    error = StaleToken(token=3, current_token=5, resource_id=b"\xab" * 32)
    assert "0xabab" in str(error)
    error.with_resource("reports/daily")
    assert "'reports/daily'" in str(error) and "3" in str(error) and "5" in str(error)


def test_expired_carries_when():
    """The time for programs (``expired_at``, ``details()``); a date for people, as ``status`` prints it."""
    error = LeaseExpired(token=3, expired_at=1234, resource="r")
    assert error.current_token == 3
    assert error.expired_at == error.details()["expired_at"] == 1234
    assert "expired at 1970-01-01 00:20:34 UTC" in str(error)


def test_the_exceptions_module_imports_no_web3():
    """errors.py stays importable alone (no CLI or provider libraries)."""
    source = inspect.getsource(errors)
    assert "import web3" not in source and "from web3" not in source
    assert "argparse" not in source
