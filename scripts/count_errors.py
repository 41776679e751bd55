#!/usr/bin/env python3
"""The exception tree counted (issue 26, item 3): public classes, the contract-mapped ones, lines.

    PYTHONPATH=src python scripts/count_errors.py        # the figures
    PYTHONPATH=src python scripts/count_errors.py -v     # and every class: M = maps a contract error

Counted from the module, not by eye: a public class is one named in ``chainfence.errors.__all__``; a
contract-mapped one is a value of ``CONTRACT_ERRORS`` (``FencingRegistry``'s errors, and the example
contracts' that mean the same); a Python-only leaf is a public class with no public subclass that maps
no contract error. The folded names (``_FOLDED``, served until 0.3) are no classes and are not counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

from chainfence import errors


def figures() -> dict[str, int]:
    public = [getattr(errors, name) for name in errors.__all__]
    mapped = set(errors.CONTRACT_ERRORS.values())
    leaves = [cls for cls in public if cls not in mapped and not any(sub in public for sub in cls.__subclasses__())]
    text = Path(errors.__file__).read_text()
    return {
        "public exception classes": len(public),
        "contract-mapped classes": len(mapped),
        "Python-only classes": len(public) - len(mapped),
        "Python-only leaves": len(leaves),
        "class statements": sum(line.startswith("class ") for line in text.splitlines()),
        "lines": len(text.splitlines()),
        "folded names served": len([name for name in errors._FOLDED if not name.startswith("_")]),
    }


def main() -> None:
    for name, value in figures().items():
        print(f"{name}: {value}")
    if "-v" in sys.argv[1:]:
        mapped = set(errors.CONTRACT_ERRORS.values())
        for name in errors.__all__:
            cls = getattr(errors, name)
            print(f"{'M' if cls in mapped else ' '} {name} ({cls.__mro__[1].__name__})")


if __name__ == "__main__":
    main()
