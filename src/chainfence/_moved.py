"""Old import paths of modules that moved into their family's folder, kept working.

Until 0.2 the package was flat; ``chainfence.audit_index`` is now
``chainfence.audit.index``, and so on (:data:`MOVED`). A finder on
``sys.meta_path`` answers an import of an old path with the module at its new
one: the very same module object, so ``isinstance`` checks, monkeypatching and
pickled classes agree whichever path imported them. Nothing is imported until
someone asks for an old path.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

#: old dotted path -> new dotted path
MOVED: dict[str, str] = {
    "chainfence.admission": "chainfence.guard.admission",
    "chainfence.audit._completeness": "chainfence._node.completeness",
    "chainfence.audit_index": "chainfence.audit.index",
    "chainfence.demo": "chainfence.cli.demo",
    "chainfence.localnode": "chainfence.cli.node",
    "chainfence.timeline": "chainfence.audit.timeline",
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
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path already ran: nothing to execute."""


_ALIAS = _Alias()


def install() -> None:
    if _ALIAS not in sys.meta_path:
        sys.meta_path.append(_ALIAS)
