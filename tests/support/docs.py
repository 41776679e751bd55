"""The documentation's text for the tests that hold it to the code: the README (the front page) and every
page of the site (docs/**/*.md), and their fenced blocks."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The README first, then the site's pages (files whose name starts with ``_`` are fragments they include)."""
    return [README, *sorted(path for path in DOCS.rglob("*.md") if not path.name.startswith("_"))]


def page(relative: str) -> str:
    """A page's text, by its path under the repository (``docs/howto/sql.md``)."""
    return (ROOT / relative).read_text(encoding="utf-8")


def blocks(info: str, text: str | None = None) -> list[str]:
    """The fenced blocks whose info string is ``info`` (``python``, ``sh run``, ``json``), in page order."""
    texts = [text] if text is not None else [path.read_text(encoding="utf-8") for path in pages()]
    return [block for each in texts for block in re.findall(rf"```{re.escape(info)}\n(.*?)```", each, flags=re.S)]


def block(info: str, marker: str, text: str | None = None) -> str:
    """The one block of kind ``info`` that contains ``marker``."""
    (found,) = [each for each in blocks(info, text) if marker in each]
    return found
