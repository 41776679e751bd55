"""Old import paths of modules that moved, and old names of methods, kept working for one minor version.

In 0.2 the tree became the layer map (the README's "Layout"): ``chainfence.sql`` is now
``chainfence.integrations.sql``, ``chainfence._effects`` is ``chainfence._core.effects``, and so on
(:data:`MOVED`; CHANGELOG.md lists each). A finder on ``sys.meta_path`` answers an import of an old
path with the module at its new one, the very same module object (so ``isinstance`` checks,
monkeypatching and pickled classes agree whichever path imported them), and a ``DeprecationWarning``
naming the new path, pointed at the line that imported the old one. The old paths go in 0.3. Nothing
is imported until someone asks for an old path.

Methods that left a class in 0.2 (``Registry.claim`` is ``registry.workset(name).claim``, ...) are
:class:`Retired` names: a class's ``__getattr__`` (:func:`retired`) serves each from its table with a
``DeprecationWarning`` naming the replacement, pointed at the caller's line. They are not attributes of
the class, so ``dir()``, ``help()`` and the reference do not show them, and a type checker refuses them
(the ``__getattr__`` is defined for the interpreter only). They go in 0.3 too.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Mapping
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

#: old dotted path -> new dotted path
MOVED: dict[str, str] = {
    "chainfence._block_times": "chainfence._sdk.block_times",
    "chainfence._contract": "chainfence._sdk.contract",
    "chainfence._effects": "chainfence._core.effects",
    "chainfence._election_observer": "chainfence.recipes._election_observer",
    "chainfence._faces": "chainfence._core.faces",
    "chainfence._interrupted": "chainfence._sdk.interrupted",
    "chainfence._lease_history": "chainfence.audit._history",
    "chainfence._lease_state": "chainfence._sdk.lease_state",
    "chainfence._limits": "chainfence._core.limits",
    "chainfence._log": "chainfence._core.log",
    "chainfence._moved": "chainfence._core.moved",
    "chainfence._names": "chainfence._sdk.names",
    "chainfence._records": "chainfence._core.records",
    "chainfence._rollback": "chainfence._sdk.rollback",
    "chainfence._stuck": "chainfence.audit.watchdog",
    "chainfence._times": "chainfence._core.times",
    "chainfence._validate": "chainfence._sdk.validate",
    "chainfence._waiting": "chainfence._sdk.waiting",
    "chainfence.admission": "chainfence.guard.admission",
    "chainfence.asgi": "chainfence.integrations.asgi",
    "chainfence.audit._completeness": "chainfence._node.completeness",
    "chainfence.audit_index": "chainfence.audit.index",
    "chainfence.demo": "chainfence.cli.demo",
    "chainfence.election": "chainfence.recipes.election",
    "chainfence.fenced_store": "chainfence.integrations.fenced_store",
    "chainfence.lease_set": "chainfence.recipes.lease_set",
    "chainfence.localnode": "chainfence.cli.node",
    "chainfence.mcp_server": "chainfence.integrations.mcp",
    "chainfence.sql": "chainfence.integrations.sql",
    "chainfence.timeline": "chainfence.audit.timeline",
    "chainfence.tooz_driver": "chainfence.integrations.tooz",
    "chainfence.watchdog": "chainfence.audit.watchdog",
}


class _Alias:
    """A meta path finder and loader (the protocol, not ``importlib.abc``'s classes: importing that module
    imports ``importlib.resources``, a tenth of what a CLI command may take, issue #19)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", self))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new} in chainfence 0.2: import {new} (the old path goes in 0.3)",
            DeprecationWarning,
            stacklevel=_importer_level(),
        )
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # the import system gives the module the old path's spec next
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path already ran: only its own spec is put back."""
        assert module.__spec__ is not None
        module.__spec__ = module.__spec__.loader_state


def keyword(call: str, old: str, new: str, *, stacklevel: int) -> None:
    """Warn that the keyword ``old`` of ``call`` is deprecated (it keeps working until 0.3), naming what
    replaces it (``new``: the new form, as a caller writes it). ``stacklevel``: as for ``warnings.warn``,
    counted from the caller of this function."""
    warnings.warn(
        f"{call}({old}=...) is deprecated in chainfence 0.2 and goes in 0.3: use {new}",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def _importer_level() -> int:
    """The ``stacklevel`` of the code that imports an old path, for a warning raised in ``create_module``:
    ``warnings`` skips the import system's frozen frames itself, not ``importlib.import_module``'s."""
    level = 2
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name == importlib.__file__:
            level += 1
        elif not ("importlib" in name and "_bootstrap" in name):
            break
        frame = frame.f_back
    return level


_ALIAS = _Alias()


def install() -> None:
    if _ALIAS not in sys.meta_path:
        sys.meta_path.append(_ALIAS)


class Retired(NamedTuple):
    """A method a class had before 0.2, served until 0.3 (:func:`retired`)."""

    #: What to write instead, as the warning (and CHANGELOG.md) says it: ``"registry.workset(name).claim(items, ttl)"``.
    replacement: str
    #: The old method's behaviour for an object: ``serve(obj)`` is what ``obj.<old name>`` gave.
    serve: Callable[[Any], Any]


def retired(obj: object, name: str, table: Mapping[str, Retired]) -> Any:
    """``obj.<name>`` for a name ``obj``'s class no longer has: served from ``table`` with a
    ``DeprecationWarning`` naming its replacement, or the usual ``AttributeError``. A class's
    ``__getattr__`` calls this (only for names its instances lack)."""
    entry = table.get(name)
    if entry is None:
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    warnings.warn(
        f"{type(obj).__name__}.{name} is deprecated since chainfence 0.2 and goes in 0.3: use {entry.replacement}",
        DeprecationWarning,
        stacklevel=3,  # the caller's line: retired() <- __getattr__ <- the caller
    )
    return entry.serve(obj)
