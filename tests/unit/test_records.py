"""Records (chainfence._core.records) are the dataclasses they replaced, to whoever uses them (issue #19: a
per-task CLI command imports neither dataclasses nor inspect).

Each record class is held to the frozen (or plain) dataclass its own annotations and defaults make: the
same ``__init__`` parameters, repr, equality, hash, frozenness, match args, and what ``dataclasses``'
functions read of it (``fields``, ``asdict``, ``astuple``, ``replace``, ``is_dataclass``). The control: a
plain class with the same ``__init__`` (no record) fails the same checks.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import pytest

from chainfence._core.records import record
from chainfence._node.completeness import Checked
from chainfence._node.events import Kind, RegistryLog
from chainfence._node.methods import Node
from chainfence._node.sending import InFlight
from chainfence._sdk.lease_state import LeaseInfo, LeaseStatus
from chainfence.chain import Timeouts
from chainfence.deployment import Deployment
from chainfence.endings import End, Part
from chainfence.guard import Follow, Mark
from chainfence.namespaces import NamespacePolicy

#: Each record, whether it is frozen, and arguments that build one (positionally).
RECORDS = [
    (LeaseInfo, True, ("jobs/a", b"\x01" * 32, "0x" + "ab" * 20, 7, 1_800_000_000, LeaseStatus.LIVE)),
    (Part, True, ("lock", "chainfence.cli.lock", {End.EXPIRED: "stops"}, True)),
    (RegistryLog, True, (Kind.ACQUIRED, b"\x02" * 32, 12, b"\x03" * 32, "0x" + "cd" * 32, 0, 7, "0x" + "ab" * 20)),
    (NamespacePolicy, True, ("ops", b"\x04" * 32, None, None, 0, 5, False)),
    (InFlight, True, ("0x" + "ab" * 20, {"nonce": 3}, "0x" + "ef" * 32, 3, True)),
    (Deployment, True, ("0x" + "ab" * 20, 31337, 1, None, 3600)),
    (Node, False, (False, True)),
    (Checked, True, (3, 9, 5, [], 6, "its logs are not all served yet", {})),
    (Timeouts, True, (5.0, 60.0, 300.0, None, 0.5)),
    (Follow, True, (2.0, 3.0, "bloom", None, None)),
    (Mark, True, (None, None)),
]


def twin_of(cls: type, frozen: bool) -> type:
    """The dataclass ``cls`` stands for: its annotations and defaults, in its module."""
    names = list(cls.__annotations__)
    namespace = {
        "__annotations__": dict(cls.__annotations__),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        **{name: cls.__dict__[name] for name in names if name in cls.__dict__},
    }
    return dataclasses.dataclass(frozen=frozen)(type(cls.__name__, (), namespace))


def _shape(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def check_like_a_dataclass(cls: type, frozen: bool, args: tuple) -> None:
    twin = twin_of(cls, frozen)
    assert _shape(inspect.signature(cls)) == _shape(inspect.signature(twin))
    ours, theirs = cls(*args), twin(*args)
    assert repr(ours) == repr(theirs)
    assert ours == cls(*args) and not ours != cls(*args)
    assert ours != theirs and (ours == tuple(args)) is False
    assert ours.__eq__(object()) is NotImplemented
    assert cls.__match_args__ == twin.__match_args__
    assert dataclasses.is_dataclass(cls) and dataclasses.is_dataclass(ours)
    assert [(f.name, f.type, f.default) for f in dataclasses.fields(ours)] == [
        (f.name, f.type, f.default) for f in dataclasses.fields(theirs)
    ]
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)
    first = dataclasses.fields(ours)[0].name
    changed = dataclasses.replace(ours, **{first: args[1]})
    assert type(changed) is cls and getattr(changed, first) == args[1]
    assert copy.copy(ours) == ours and copy.deepcopy(ours) == ours
    if frozen:
        hashable = all(isinstance(value, (str, bytes, int, type(None), LeaseStatus, Kind)) for value in args)
        if hashable:
            assert hash(ours) == hash(theirs) == hash(cls(*args))
        for name in (first, "something_else"):
            with pytest.raises(dataclasses.FrozenInstanceError) as refused:
                setattr(ours, name, 1)
            with pytest.raises(dataclasses.FrozenInstanceError) as theirs_refused:
                setattr(theirs, name, 1)
            assert str(refused.value) == str(theirs_refused.value)
            with pytest.raises(dataclasses.FrozenInstanceError):
                delattr(ours, first)
    else:
        with pytest.raises(TypeError):
            hash(ours)
        setattr(ours, first, args[1])
        assert getattr(ours, first) == args[1]


@pytest.mark.parametrize(("cls", "frozen", "args"), RECORDS, ids=[cls.__name__ for cls, _, _ in RECORDS])
def test_a_record_is_the_dataclass_it_replaced(cls, frozen, args):
    check_like_a_dataclass(cls, frozen, args)


@pytest.mark.parametrize(("cls", "frozen", "args"), RECORDS[:1], ids=["LeaseInfo"])
def test_a_record_pickles_as_a_dataclass(cls, frozen, args):
    ours = cls(*args)
    assert pickle.loads(pickle.dumps(ours)) == ours


def test_keywords_and_defaults_build_the_same_record():
    info = LeaseInfo(
        resource="jobs/a",
        resource_id=b"\x01" * 32,
        holder="0x" + "ab" * 20,
        token=7,
        expires_at=9,
        status=LeaseStatus.EXPIRED,
    )
    assert info.judged_at is None and info.expired_unmined is False
    with pytest.raises(TypeError):
        LeaseInfo("jobs/a", b"", "0x", 7)  # type: ignore[call-arg]


def test_a_subclass_may_add_attributes_of_its_own_but_not_change_fields():
    class Annotated(LeaseInfo):
        pass

    info = Annotated(*RECORDS[0][2])
    assert dataclasses.fields(info) == dataclasses.fields(LeaseInfo)
    info.note = "mine"  # type: ignore[attr-defined]
    assert info.note == "mine"  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.token = 9  # type: ignore[misc]


def test_the_check_fails_a_plain_class_with_the_same_init():
    """Control: without @record, the same __init__ is no dataclass twin (repr, equality, frozenness)."""

    class Plain:
        resource: str
        token: int

        def __init__(self, resource: str, token: int) -> None:
            self.__dict__.update(resource=resource, token=token)

    with pytest.raises(AssertionError):
        check_like_a_dataclass(Plain, True, ("jobs/a", 7))
    check_like_a_dataclass(record(Plain), True, ("jobs/a", 7))


def test_a_saved_deployment_file_holds_every_field(tmp_path):
    """deployment.save writes the record's fields (what dataclasses.asdict wrote before)."""
    import json

    from chainfence.deployment import load, save

    deployment = Deployment("0x" + "ab" * 20, 31337, 1, "0x" + "cd" * 32, 3600, "http://127.0.0.1:8545")
    path = save(deployment, tmp_path / "deployment.json")
    assert json.loads(path.read_text()) == dataclasses.asdict(deployment)
    loaded = load(path)
    assert loaded.registry.lower() == deployment.registry and loaded == dataclasses.replace(
        deployment, registry=loaded.registry
    )
