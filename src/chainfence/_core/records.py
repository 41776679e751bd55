"""Records: classes of named fields, compared, hashed and shown by them, as ``@dataclass`` makes them,
without importing :mod:`dataclasses`.

Importing ``dataclasses`` imports ``inspect`` (and ``ast``, ``dis``, ``tokenize`` with it), and a
dataclass compiles its methods from source when its module is imported: together a fifth of the
instructions of a per-task ``chainfence`` command (issue #19, docs/benchmarks.md). A record writes its
``__init__`` itself, as plain code (a decoded log is built thousands of times in an audit sync: no
generic argument binding); :func:`record` adds the rest, from the class's annotations in order:

- ``__repr__``, ``__eq__`` (same class, fields equal) and ``__match_args__``, as a dataclass's;
- frozen (the default): ``__hash__`` of the fields, and ``__setattr__``/``__delattr__`` raising
  ``dataclasses.FrozenInstanceError`` (the module is imported then, not before); not frozen: unhashable;
- ``__dataclass_fields__``, made the first time it is read (``dataclasses`` is imported then), so
  ``dataclasses.fields``, ``asdict``, ``astuple``, ``replace`` and ``is_dataclass`` treat a record as
  the dataclass it was.

``tests/unit/test_records.py`` holds every record to the dataclass its annotations describe: the same
``__init__`` signature, repr, equality, hash, frozenness and fields.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

__all__ = ["record"]


def record(cls: Any = None, *, frozen: bool = True) -> Any:
    """Make ``cls`` (whose ``__init__`` sets its annotated fields) a record: ``@record`` or
    ``@record(frozen=False)``."""

    def make(cls: Any) -> Any:
        _complete(cls, frozen)
        return cls

    return make if cls is None else make(cls)


def _fields(cls: type) -> tuple[str, ...]:
    """The fields: the class's own annotations, in order, ClassVars aside."""
    annotations: dict[str, Any] = cls.__annotations__  # a class's own (not its bases'), since Python 3.10
    return tuple(
        name for name, kind in annotations.items() if not str(kind).startswith(("ClassVar", "typing.ClassVar"))
    )


def _complete(cls: type, frozen: bool) -> None:
    names = _fields(cls)
    values = attrgetter(*names) if len(names) > 1 else (lambda self: (getattr(self, names[0]),) if names else ())

    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return bool(values(self) == values(other))  # tuples, as a dataclass compares them
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(values(self))

    made: dict[str, Any] = {"__repr__": __repr__, "__eq__": __eq__, "__match_args__": names}
    if frozen:
        made.update(
            __hash__=__hash__, __setattr__=_refuse(cls, names, "assign to"), __delattr__=_refuse(cls, names, "delete")
        )
    else:
        made["__hash__"] = None  # unhashable, as a dataclass with eq and not frozen
    made["__dataclass_fields__"] = _DataclassFields(cls, frozen)
    for name, value in made.items():
        if callable(value):
            value.__qualname__ = f"{cls.__qualname__}.{name}"
            value.__module__ = cls.__module__
        setattr(cls, name, value)


def _refuse(cls: type, names: tuple[str, ...], what: str) -> Callable[..., None]:
    """A frozen record's ``__setattr__`` or ``__delattr__``: a field (or anything, on the record's own
    class) is refused as a frozen dataclass refuses it; a subclass's other attributes are let through."""

    record: Any = cls

    def refuse(self: Any, name: str, *value: Any) -> None:
        if type(self) is record or name in names:
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot {what} field {name!r}")
        if value:
            super(record, self).__setattr__(name, *value)
        else:
            super(record, self).__delattr__(name)

    return refuse


class _DataclassFields:
    """``__dataclass_fields__`` of a record (and of its subclasses, as a dataclass's): the fields a
    ``@dataclass`` of the same annotations and defaults has, made when first read (then stored on the
    record's class in place of this descriptor)."""

    def __init__(self, cls: type, frozen: bool):
        self.cls = cls
        self.frozen = frozen

    def __get__(self, instance: Any, owner: type) -> dict[str, Any]:
        import dataclasses

        cls: Any = self.cls
        names = _fields(cls)
        annotations = cls.__annotations__
        defaults = {name: getattr(cls, name) for name in names if hasattr(cls, name)}
        twin: Any = type(
            cls.__name__,
            (),
            {"__annotations__": {name: annotations[name] for name in names}, "__module__": cls.__module__, **defaults},
        )
        fields: dict[str, Any] = dataclasses.dataclass(frozen=self.frozen)(twin).__dataclass_fields__
        type.__setattr__(cls, "__dataclass_fields__", fields)
        return fields
