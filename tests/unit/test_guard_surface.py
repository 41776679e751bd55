"""AsyncGuard offers every public operation of Guard, name by name: a Guard method, property or setting
without its asyncio twin fails here.

A twin takes the same arguments (the same names, kinds and defaults) and is a coroutine where the Guard
reads its store or the chain; clock readings (``staleness``, ``follow_status``) and settings are plain.
The constructor's twin is ``AsyncGuard.open`` (``Guard(...)`` opens the store and reads the chain), and
``with`` is ``async with``.
"""

from __future__ import annotations

import inspect

import pytest

from chainfence import Admission, Guard
from chainfence.aio import AsyncGuard
from chainfence.errors import ChainRolledBack, NotAdmitted
from tests.support.fakes import FakeRegistry

#: Guard names whose twin has another name.
TWIN_NAMES = {"__init__": "open", "__enter__": "__aenter__", "__exit__": "__aexit__"}

#: What only the asyncio side has, and why.
ASYNC_ONLY = {"guard": "the Guard whose code runs"}

#: Twins that are not awaited: they neither read the store nor ask the chain.
NOT_AWAITED = {"staleness": "a clock reading", "follow_status": "the follower's last result"}


def public_names(obj: object) -> set[str]:
    """The public names of ``obj``: of its class (methods, properties) and of the instance (settings)."""
    names = {name for name in dir(type(obj)) if not name.startswith("_")}
    return names | {name for name in vars(obj) if not name.startswith("_")}


@pytest.fixture
def guards(tmp_path):
    with Guard(FakeRegistry(), tmp_path / "g.sqlite") as guard:
        yield guard, AsyncGuard(guard)


def surfaces(sync: Guard, asynchronous: AsyncGuard) -> tuple[set[str], set[str]]:
    """(the Guard's names as their twins are called, the AsyncGuard's names)."""
    sync_names = public_names(sync) | {name for name in ("__init__", "__enter__", "__exit__") if hasattr(sync, name)}
    twins = {TWIN_NAMES.get(name, name) for name in sync_names}
    return twins, public_names(asynchronous) | {"__aenter__", "__aexit__"} & set(dir(asynchronous))


def test_every_public_name_of_a_guard_has_its_asyncio_twin(guards):
    twins, async_names = surfaces(*guards)
    missing = twins - async_names
    assert not missing, f"AsyncGuard lacks the twins of {sorted(missing)}"


def test_the_asyncio_side_adds_only_what_it_says(guards):
    twins, async_names = surfaces(*guards)
    assert async_names - twins == set(ASYNC_ONLY)


def test_twins_take_the_same_arguments():
    for name, twin_name in sorted({**{n: n for n in dir(Guard) if not n.startswith("_")}, **TWIN_NAMES}.items()):
        method = inspect.getattr_static(Guard, name)
        if isinstance(method, property) or not callable(method):
            continue
        twin = inspect.getattr_static(AsyncGuard, twin_name)
        twin = twin.__func__ if isinstance(twin, classmethod) else twin
        sync_params = list(inspect.signature(method).parameters.values())[1:]  # less self
        async_params = list(inspect.signature(twin).parameters.values())[1:]  # less self, or cls for open()
        described = [(p.name, p.kind, p.default) for p in sync_params]
        assert described == [(p.name, p.kind, p.default) for p in async_params], name


def test_twins_are_awaited_where_the_guard_reads_its_store_or_the_chain():
    for name in [n for n in dir(Guard) if not n.startswith("_")] + ["open", "__aenter__", "__aexit__"]:
        member = inspect.getattr_static(AsyncGuard, name)
        if isinstance(member, property):
            continue
        function = member.__func__ if isinstance(member, classmethod) else member
        assert inspect.iscoroutinefunction(function) == (name not in NOT_AWAITED), name


def test_this_test_can_fail(tmp_path):
    """A Guard subclass with a method AsyncGuard lacks is reported, and so is a new setting."""

    class Extra(Guard):
        def brand_new(self) -> None: ...

    with Extra(FakeRegistry(), tmp_path / "g.sqlite") as guard:
        guard.new_setting = 1
        twins, async_names = surfaces(guard, AsyncGuard(guard))
    assert twins - async_names == {"brand_new", "new_setting"}


def test_the_loop_accepts_only_what_the_guard_accepts_from_memory(tmp_path):
    """AsyncGuard.check answers on the loop when the exclusive guard's memory says the token is its mark
    (``Guard._remembers``, the condition ``Guard.check`` tests inline); in every other case the guard's
    own check runs. Never a token the guard would not accept at once."""
    registry = FakeRegistry()
    registry.issue("r", 3)
    with Guard(registry, tmp_path / "g.sqlite", exclusive=True) as guard:
        assert not guard._remembers("r", 3), "never judged: the chain must vouch for it first"
        guard.check("r", 3)
        assert guard._remembers("r", 3)
        assert not any(guard._remembers(*other) for other in (("r", 2), ("r", 4), ("other", 3), ("r", 3.0)))
        with pytest.raises(ChainRolledBack):
            guard._latch("a test's rollback")
        assert not guard._remembers("r", 3), "a latched store trusts no mark"
    stranger = Admission.local(["0x" + "22" * 20])
    with Guard(registry, tmp_path / "h.sqlite", exclusive=True, admission=stranger) as guard:
        with pytest.raises(NotAdmitted):
            guard.check("r", 3)
        assert not guard._remembers("r", 3)
