"""The package's loggers, with :mod:`logging` imported only once something could receive a record.

Every module logs through ``logger = _log.get(__name__)``, which stands for
``logging.getLogger(__name__)``. Until some code of the process imports
``logging``, nobody can have configured a handler, a level or a filter: a
record would reach only the ``NullHandler`` the package puts on its
``chainfence`` logger, and go nowhere. So until then a call drops the record
without importing ``logging``, its ``traceback``, ``linecache``, ``tokenize``
and ``string``: a start-time lever the foundation keeps (docs/explanation/design.md, "One node stack, and where start-time work may
live", has its measured cost). From the moment ``logging`` is imported
(an application configuring it, the CLI's ``-v``, pytest), each call is the
``logging.Logger``'s own, the caller's file and line included (``stacklevel``),
and the ``chainfence`` logger has its ``NullHandler`` (:func:`null_handler`).

``tests/unit/test_log.py`` holds both halves: nothing is imported or emitted
before, and after, a record carries what ``logging.getLogger`` would have
given it.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["Logger", "get", "null_handler"]

#: The package's root logger, which carries the NullHandler (a library never configures logging).
ROOT = "chainfence"

_null_handled = False


def null_handler() -> None:
    """Put a ``NullHandler`` on the ``chainfence`` logger, once per process (``logging`` imported here)."""
    global _null_handled
    if not _null_handled:
        import logging

        logging.getLogger(ROOT).addHandler(logging.NullHandler())
        _null_handled = True


class Logger:
    """``logging.getLogger(name)``, made when a record could be handled (see the module docstring)."""

    __slots__ = ("_logger", "name")

    def __init__(self, name: str):
        self.name = name
        self._logger: Any = None

    def _target(self) -> Any:
        logger = self._logger
        if logger is None:
            if "logging" not in sys.modules:
                return None  # nobody imported logging: no handler exists, the record would go nowhere
            null_handler()
            logger = self._logger = sys.modules["logging"].getLogger(self.name)
        return logger

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        logger = self._target()
        if logger is not None:
            logger.debug(msg, *args, **_from_caller(kwargs))

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        logger = self._target()
        if logger is not None:
            logger.info(msg, *args, **_from_caller(kwargs))

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        logger = self._target()
        if logger is not None:
            logger.warning(msg, *args, **_from_caller(kwargs))

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        logger = self._target()
        if logger is not None:
            logger.error(msg, *args, **_from_caller(kwargs))

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        logger = self._target()
        if logger is not None:
            logger.error(msg, *args, exc_info=exc_info, **_from_caller(kwargs))

    def __repr__(self) -> str:
        return f"<chainfence logger {self.name!r}>"


def _from_caller(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with ``stacklevel`` one higher: the record names the caller's line, not this module's."""
    kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
    return kwargs


def get(name: str) -> Logger:
    """The logger of module ``name`` (what ``logging.getLogger(name)`` gives, once ``logging`` is imported)."""
    return Logger(name)
