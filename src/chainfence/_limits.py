"""Bounds the registry contract enforces, stated once, importing nothing.

The SDK checks names against :data:`MAX_NAME_LENGTH` (:mod:`chainfence._names`), the proven reader
does too (:mod:`chainfence.proofs`), and the CLI's ``--help`` states it: a module that imports nothing,
so that ``chainfence acquire --help`` can say the bound without loading the SDK.
"""

from __future__ import annotations

__all__ = ["MAX_NAME_LENGTH"]

#: Longest resource name, in bytes of UTF-8: the contract's ``_MAX_NAME_LENGTH`` (its ``maxNameLength()``).
MAX_NAME_LENGTH = 128
