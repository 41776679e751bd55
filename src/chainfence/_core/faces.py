"""Faces: a chain operation written once, as steps, offered blocking and awaited.

Every operation that touches the chain is a generator of effects (:mod:`chainfence._core.effects`)
whose name ends in ``_steps``; the public method of the sync SDK is a plain ``def`` of its name
that runs them (marked with :func:`drives`, so a reader finds ``def renew`` where ``renew`` is
offered), and its asyncio twin is derived from the same steps here, never written twice::

    class Lease(SyncFace):
        def _renew_steps(self, ttl: int | None = None, *, progress: Any = None) -> Steps[Lease]:
            ...

        @drives(_renew_steps)
        def renew(self, ttl: int | None = None, *, progress: Any = None) -> Lease:
            \"\"\"Extend this lease ...\"\"\"
            return self._drive(self._renew_steps(ttl, progress=progress))   # blocking, over the chain's driver

    class AsyncLease(AsyncFace[Lease], core=Lease):
        renew = awaiting(Lease.renew)          # await lease.renew(...): the same steps over asyncio

(:func:`operation` derives the blocking method from the steps instead, for the classes that still
write it so.)

A derived method is a plain function with the steps' parameters and docstring (``help()`` and
:func:`inspect.signature` show them); its result is the face's: a :class:`~chainfence.Lease` the
steps return becomes an ``AsyncLease`` on the asyncio face (each twin registers the sync class it
wraps: ``core=Lease``), and so does one an exception carries (``error.lease``). Streams (steps that
emit: an election's changes) become a generator and an async generator (:func:`streaming`,
:func:`astreaming`); what needs no chain (a local check, a field) is mirrored (:func:`local`,
:func:`mirrored`). What is genuinely one face's own (context managers, the keep-alive runners,
``watch``) is written on that face, over the same core.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, ClassVar, Concatenate, Generic, Literal, ParamSpec, Protocol, TypeVar, overload

from .effects import Steps, astream, primed_steps, stream

__all__ = [
    "AsyncDriver",
    "AsyncFace",
    "SyncFace",
    "aconstructor",
    "astreaming",
    "awaiting",
    "constructor",
    "drives",
    "local",
    "mirrored",
    "operation",
    "streaming",
]

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
C = TypeVar("C")
Core = TypeVar("Core")

#: The attribute naming the steps a derived method runs, and the kind of derivation.
STEPS = "__chainfence_steps__"
KIND = "__chainfence_face__"

#: The twin of each sync class (``Lease`` -> ``AsyncLease``), registered by the twins themselves.
_TWINS: dict[type, type[AsyncFace[Any]]] = {}


class AsyncDriver(Protocol):
    """What an asyncio face runs its steps with: an :class:`~chainfence.aio.AsyncChain` (its sync
    ``chain`` holds the keys, the nonces and the settings; ``_run`` drives steps over asyncio)."""

    @property
    def chain(self) -> Any: ...

    async def _run(self, steps: Steps[Any]) -> Any: ...


def require_driver(chain: object) -> AsyncDriver:
    """``chain`` if it is an asyncio chain (an ``AsyncChain``), else :class:`~chainfence.errors.InvalidInput`."""
    from ..errors import InvalidInput

    run = getattr(chain, "_run", None)
    if not callable(run) or not inspect.iscoroutinefunction(run) or not hasattr(chain, "chain"):
        raise InvalidInput(f"chain must be an AsyncChain, got {type(chain).__name__}")
    return chain  # type: ignore[return-value]


class SyncFace:
    """A class of the sync SDK: its chain operations run over the chain's blocking driver (:meth:`_drive`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _name_derived(cls)

    def _drive(self, steps: Steps[R]) -> R:
        """Run ``steps`` to their result over the blocking driver of this object's chain."""
        raise NotImplementedError


class AsyncFace(Generic[Core]):
    """A class of the asyncio SDK: the twin of a sync class (``core=``), whose object it wraps (``_core``)
    and whose steps it runs over the asyncio driver of its chain (:meth:`_drive`)."""

    #: The sync class this one is the twin of.
    _core_type: ClassVar[type]

    def __init_subclass__(cls, core: type | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if core is not None:
            cls._core_type = core
            _TWINS[core] = cls
        _name_derived(cls)

    @property
    def _core(self) -> Core:
        """The sync object this face wraps (its state is shared: fields, keep-alive, loss)."""
        raise NotImplementedError

    @property
    def _driver(self) -> AsyncDriver:
        """The asyncio chain this face runs its steps over."""
        raise NotImplementedError

    async def _drive(self, steps: Steps[R]) -> R:
        return await self._driver._run(steps)  # type: ignore[no-any-return]

    @classmethod
    def _from_core(cls, core: Any, driver: AsyncDriver) -> Any:
        """The twin of ``core`` on ``driver`` (each twin says how it is built)."""
        raise NotImplementedError

    @classmethod
    def _ready_steps(cls, core: Any) -> Steps[None]:
        """What a constructor's core still needs read before this face hands it out (nothing, by default:
        a face whose views must never block reads here what its sync twin reads lazily)."""
        return
        yield  # pragma: no cover - makes this a generator

    def _twin(self, value: Any) -> Any:
        """``value`` as this face hands it out: the face itself for its own core, a sync object's twin
        (a Lease's AsyncLease, ...), lists element by element; anything else as it is."""
        return twin_of(value, self._driver, own=(self._core, self))


def twin_of(value: Any, driver: AsyncDriver, *, own: tuple[Any, Any] | None = None) -> Any:
    if own is not None and value is own[0]:
        return own[1]
    if isinstance(value, list):
        return [twin_of(item, driver, own=own) for item in value]
    for kind in type(value).__mro__:
        twin = _TWINS.get(kind)
        if twin is not None:
            return twin._from_core(value, driver)
    return value


def _handed_over(error: BaseException, driver: AsyncDriver) -> None:
    """An error that hands the caller what the steps acquired (``error.lease``: a cancelled acquisition
    whose lease could not be released, a chain error after the acquisition) hands it as the asyncio face's."""
    handed = getattr(error, "lease", None)
    if handed is not None and type(handed) in _TWINS:
        error.lease = twin_of(handed, driver)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------
# The derivations
# ----------------------------------------------------------------------


def operation(steps: Callable[Concatenate[C, P], Steps[R]]) -> Callable[Concatenate[C, P], R]:
    """The blocking method that runs ``steps`` (a ``*_steps`` method) over the object's chain."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._drive(steps(self, *args, **kwargs))

    dressed: Callable[Concatenate[C, P], R] = _dressed(method, steps, "operation", returns=_result_of)
    return dressed


def drives(steps: Callable[..., Steps[Any]]) -> Callable[[F], F]:
    """Mark a public method written out as a plain ``def`` (its signature, its docstring and one line
    that runs ``steps`` over the object's driver) as running ``steps``: its asyncio twin
    (:func:`awaiting`, :func:`aconstructor`) runs the same steps. The method itself is left as it is,
    so a reader finds ``def acquire`` where ``acquire`` is offered; ``tests/unit/test_faces.py`` holds
    its parameters equal to the steps'. Under ``@classmethod`` for a constructor."""

    def mark(method: F) -> F:
        setattr(method, STEPS, steps)
        setattr(method, KIND, "operation")
        return method

    return mark


def constructor(steps: Callable[..., Steps[R]]) -> Any:
    """A blocking classmethod (``Registry.deploy(chain, ...)``) that runs ``steps(cls, chain, ...)``
    over ``chain``'s driver."""

    def method(cls: type, chain: Any, *args: Any, **kwargs: Any) -> Any:
        return chain._run(steps(cls, chain, *args, **kwargs))

    return classmethod(_dressed(method, steps, "constructor", returns=_result_of))


def streaming(steps: Callable[Concatenate[C, P], Steps[Any]]) -> Callable[Concatenate[C, P], Iterator[Any]]:
    """A method returning a generator of what ``steps`` emit, each run over the blocking driver. The
    checks before the steps' first effect raise at the call."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return stream(primed_steps(steps(self, *args, **kwargs)), self._drive)

    dressed: Callable[Concatenate[C, P], Iterator[Any]] = _dressed(method, steps, "stream", returns="Iterator[Any]")
    return dressed


@overload
def awaiting(op: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]: ...
@overload
def awaiting(
    op: Callable[Concatenate[Any, P], Any], returns: Literal["self"]
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, Any]]: ...
@overload
def awaiting(
    op: Callable[Concatenate[Any, P], Any], returns: type[T], *, optional: Literal[False] = False
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]: ...
@overload
def awaiting(
    op: Callable[Concatenate[Any, P], Any], returns: type[T], *, optional: Literal[True]
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T | None]]: ...
def awaiting(op: Callable[..., Any], returns: type | str | None = None, *, optional: bool = False) -> Any:
    """The coroutine method of an asyncio twin that runs the steps of ``op`` (a method derived with
    :func:`operation`) over asyncio, on the face's core, and hands out the face's objects.

    ``returns`` names the twin a result becomes (for type checkers and ``help()``; at run time every
    registered sync class becomes its twin, and the face's own core the face itself: ``"self"``);
    ``optional``: the result may be None."""
    steps = _steps_of(op)

    async def method(self: AsyncFace[Any], *args: Any, **kwargs: Any) -> Any:
        try:
            result = await self._drive(steps(self._core, *args, **kwargs))
        except BaseException as error:
            _handed_over(error, self._driver)
            raise
        return self._twin(result)

    return _dressed(method, op, "awaiting", returns=lambda signature: _returned(signature, returns, optional))


def aconstructor(op: Any) -> Any:
    """The asyncio classmethod (``AsyncRegistry.deploy(chain, ...)``) of a constructor (a classmethod
    whose steps take the class and what it is built on): ``chain`` is an asyncio chain, and the steps
    run over it on its sync ``chain``; or an asyncio face (``AsyncLeaseSet.acquire(registry, ...)``),
    and they run over its driver on the sync object it wraps."""
    function = getattr(op, "__func__", op)  # a classmethod, or one read from its class (bound to it)
    steps = _steps_of(function)

    async def method(cls: type[AsyncFace[Any]], chain: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(chain, AsyncFace):
            driver, on = chain._driver, chain._core
        else:
            driver = require_driver(chain)
            on = driver.chain
        try:
            core = await driver._run(steps(cls._core_type, on, *args, **kwargs))
            await driver._run(cls._ready_steps(core))
        except BaseException as error:
            _handed_over(error, driver)
            raise
        return cls._from_core(core, driver)

    return classmethod(_dressed(method, function, "awaiting", returns=None))


def astreaming(op: Callable[Concatenate[Any, P], Any]) -> Callable[Concatenate[Any, P], AsyncIterator[Any]]:
    """The asyncio twin of a :func:`streaming` method: an async generator of what the same steps emit."""
    steps = _steps_of(op)

    def method(self: AsyncFace[Any], *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        emitted = astream(primed_steps(steps(self._core, *args, **kwargs)), self._drive)
        return _twins_of(emitted, self)

    dressed: Callable[Concatenate[Any, P], AsyncIterator[Any]] = _dressed(
        method, op, "astream", returns="AsyncIterator[Any]"
    )
    return dressed


async def _twins_of(emitted: AsyncIterator[Any], face: AsyncFace[Any]) -> AsyncIterator[Any]:
    try:
        async for value in emitted:
            yield face._twin(value)
    finally:
        await emitted.aclose()  # type: ignore[attr-defined]


def local(op: Callable[Concatenate[Any, P], Any]) -> Callable[Concatenate[Any, P], Any]:
    """The asyncio twin of a method that never touches the chain (a local check, a view of what is
    known): called on the face's core, its result handed out as the face's."""

    def method(self: AsyncFace[Any], *args: Any, **kwargs: Any) -> Any:
        return self._twin(op(self._core, *args, **kwargs))

    dressed: Callable[Concatenate[Any, P], Any] = _dressed(method, op, "local", returns=None)
    return dressed


def mirrored(name: str, doc: str | None = None) -> Any:
    """A read-only property of an asyncio twin mirroring the core's attribute ``name`` (a field, a
    property that asks nothing of the chain), handed out as the face's."""

    def get(self: AsyncFace[Any]) -> Any:
        return self._twin(getattr(self._core, name))

    get.__name__ = name
    return property(get, doc=doc or f"The {name} of the object this face wraps (no chain call).")


# ----------------------------------------------------------------------
# What a derived method shows: the steps' parameters, docstring and (unwrapped) result
# ----------------------------------------------------------------------


def _steps_of(op: Callable[..., Any]) -> Callable[..., Steps[Any]]:
    steps = getattr(op, STEPS, None)
    if steps is None:
        raise TypeError(f"{op!r} is not derived from steps (operation, streaming or constructor)")
    return steps  # type: ignore[no-any-return]


def _dressed(
    method: Any, source: Any, kind: str, *, returns: str | Callable[[inspect.Signature], str | None] | None
) -> Any:
    """``method`` with the parameters, docstring and module of ``source`` (the steps, or the sync method
    a twin derives from), marked with its steps and its kind. Its signature (``__signature__``) is the
    source's, with the result ``returns`` names (or works out from the source's signature)."""
    steps = getattr(source, STEPS, source)
    signature = inspect.signature(source)
    shown = returns(signature) if callable(returns) else returns
    method.__signature__ = signature if shown is None else signature.replace(return_annotation=shown)
    method.__wrapped__ = source
    method.__doc__ = source.__doc__
    method.__module__ = source.__module__
    name = _public_name(source.__name__)
    method.__name__ = method.__qualname__ = name
    setattr(method, STEPS, steps)
    setattr(method, KIND, kind)
    return method


def _public_name(name: str) -> str:
    """``_renew_steps`` -> ``renew`` (the class a derived method lands in renames it to its attribute)."""
    if name.endswith("_steps"):
        name = name[: -len("_steps")].lstrip("_")
    return name


def _name_derived(cls: type) -> None:
    """Derived methods take the name and qualified name of the attribute they are bound to; an asyncio
    twin's constructor (:func:`aconstructor`) shows that it returns the twin."""
    for attribute, value in list(vars(cls).items()):
        function: Any = value.__func__ if isinstance(value, classmethod) else value
        kind = getattr(function, KIND, None)
        if kind is not None:
            function.__name__ = attribute
            function.__qualname__ = f"{cls.__qualname__}.{attribute}"
        if kind == "awaiting" and isinstance(value, classmethod):
            function.__signature__ = function.__signature__.replace(return_annotation=cls.__name__)


def _result_of(signature: inspect.Signature) -> str | None:
    """The result a blocking face returns: ``R`` for steps annotated ``-> Steps[R]``."""
    annotation = signature.return_annotation
    if isinstance(annotation, str) and annotation.startswith("Steps[") and annotation.endswith("]"):
        return annotation[len("Steps[") : -1]
    return None


def _returned(signature: inspect.Signature, returns: type | str | None, optional: bool) -> str | None:
    """The result an asyncio twin shows: the twin ``returns`` names, else what the sync method shows."""
    if returns == "self":
        return None
    if returns is not None:  # the twin's class, or its name (a class loaded later: AsyncBatchItem)
        name = returns if isinstance(returns, str) else returns.__name__
        return f"{name} | None" if optional else name
    annotation = signature.return_annotation
    return annotation if isinstance(annotation, str) else None
