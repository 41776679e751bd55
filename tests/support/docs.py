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


def fences(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block of a page, labelled or not, in page order: a block closes at
    the first line that is its opening fence's character repeated at least as often (CommonMark)."""
    found: list[tuple[str, str]] = []
    lines = text.splitlines()
    at = 0
    while at < len(lines):
        opened = re.match(r"\s{0,3}(`{3,}|~{3,})(.*)$", lines[at])
        if not opened:
            at += 1
            continue
        fence, info = opened.group(1), opened.group(2).strip()
        body: list[str] = []
        at += 1
        while at < len(lines) and not re.fullmatch(rf"\s{{0,3}}{fence[0]}{{{len(fence)},}}\s*", lines[at]):
            body.append(lines[at])
            at += 1
        found.append((info, "\n".join(body) + "\n"))
        at += 1
    return found


def shell_blocks(mark: str) -> list[tuple[Path, str]]:
    """(page, body) of every shell block (```sh, ```console, ```bash) whose mark is ``mark`` (``sh run``)."""
    return [
        (path, body)
        for path in pages()
        for info, body in fences(path.read_text(encoding="utf-8"))
        if info.split()[:1] and info.split()[0] in SHELL and info.split()[1:2] == [mark]
    ]


#: The info strings that say a block is shell (the first word; MyST and GitHub read the rest as nothing).
SHELL = ("sh", "bash", "console", "shell", "zsh")


def outputs_shown(source: str) -> list[tuple[Path, str]]:
    """(page, body) of every ```text output of SOURCE block (``examples/NAME.py``, ``chainfence demo``)."""
    return [
        (path, body)
        for path in pages()
        for info, body in fences(path.read_text(encoding="utf-8"))
        if info.strip() == f"text output of {source}"
    ]


def not_printed(shown: str, printed: str) -> list[str]:
    """The lines of an output block that ``printed`` does not hold in that order. A line's note after
    ``   <- `` (the page's, not the program's) may be left out, and a time (``2026-11-28 20:51:16``) or a
    count of seconds (``27 s``) stands for any: they change from run to run."""

    def pattern(line: str) -> str:
        parts = re.split(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\b\d+ s\b)", line.rstrip())
        return "".join(
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
            if re.fullmatch(r"\d{4}-.*", part)
            else r"\d+ s"
            if re.fullmatch(r"\d+ s", part)
            else re.escape(part)
            for part in parts
        )

    lines = printed.splitlines()
    missing, at = [], 0
    for line in filter(str.strip, shown.splitlines()):
        candidates = [pattern(line)]
        if "   <- " in line:
            candidates.append(pattern(line.split("   <- ", 1)[0]))
        found = next(
            (i for i in range(at, len(lines)) if any(re.fullmatch(c, lines[i].rstrip()) for c in candidates)), None
        )
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing
