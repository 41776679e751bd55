"""Every reference to a section of a page names a heading that page has (issue 27: when the dated notebook
moved from docs/benchmarks.md to docs/benchmarks/history.md, about fifty comments, docstrings and rows still
sent readers to docs/benchmarks.md for text that was no longer there).

The forms that occur, in the code (comments and docstrings, wrapped over lines), the scripts and the pages:

- ``docs/x.md``, "Heading" (or ``docs/x.md, "Heading"``, ``docs/x.md ("Heading")``, ``under "Heading"``);
- {doc}`target`, "Heading" (a page's MyST cross-reference, relative to the page or from docs/);
- [text](x.md), "Heading" and [text](x.md#anchor) (a markdown link, relative to the page);
- docs/x.md#anchor.

The quoted heading is the heading's text or its start (``"anvil's latest"`` for "anvil's latest: one read
answered from the block before, while it mines"); an anchor is a heading's slug (MyST's and GitHub's).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: The levels of heading that get an anchor on the site (docs/conf.py's ``myst_heading_anchors``).
ANCHORED_LEVELS = 3

QUOTED = r"[\"“](?P<heading>[^\"”]{2,120}?)[.,;]?[\"”]"
#: After a reference: the quoted heading, as ``, "H"``, ``: "H"``, `` ("H")`` or ``, under "H"``.
SECTION = rf"(?:[,:]\s*(?:under\s+|section\s+)?{QUOTED}|\s+\({QUOTED.replace('heading', 'heading2')})"
REFERENCES = {
    "path": re.compile(rf"(?<![\w/.-])(?P<path>docs/[\w./-]+\.md)(?:#(?P<anchor>[\w-]+))?[`'\"]*(?:{SECTION})?"),
    "doc": re.compile(rf"\{{doc\}}`(?:[^`<]*<)?(?P<doc>[^`<>]+)>?`(?:{SECTION})?"),
    "link": re.compile(rf"\]\((?P<link>[^)\s#]+\.md)(?:#(?P<anchor>[\w-]+))?\)(?:{SECTION})?"),
}


class Reference(NamedTuple):
    source: str  # the file that cites
    page: Path  # the page cited
    heading: str | None
    anchor: str | None


def sources() -> list[Path]:
    """Where references are written: the package, the tests, the scripts, the pages and the top-level notes."""
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]
    found += sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    found += sorted(path for path in (ROOT / "scripts").iterdir() if path.is_file())
    return [path for path in found if path != Path(__file__)]


def flat(text: str, suffix: str) -> str:
    """The text with its line breaks, and the comment markers that open a wrapped line, read as one space."""
    marker = r"(?:#:?(?!#)|//+|\*(?!\*))?" if suffix != ".md" else ""
    return re.sub(rf"[ \t]*\n[ \t]*{marker}[ \t]*", " ", text)


def references(path: Path, text: str | None = None, bare: bool = False) -> list[Reference]:
    """The references of a file that name a section (``bare``: those that name none as well)."""
    text = flat(text if text is not None else path.read_text(encoding="utf-8"), path.suffix)
    found = []
    for kind, pattern in REFERENCES.items():
        for hit in pattern.finditer(text):
            heading = hit.group("heading") or hit.group("heading2")
            anchor = hit.groupdict().get("anchor")
            if kind == "path":
                page = ROOT / hit.group("path")
            elif kind == "doc":
                target = hit.group("doc").strip()
                base = DOCS if target.startswith("/") else path.parent
                page = (base / f"{target.lstrip('/')}.md").resolve()
            else:
                link = hit.group("link")
                if link.startswith(("http:", "https:")):
                    continue
                page = (path.parent / link).resolve()
            if bare or heading is not None or anchor is not None:
                source = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
                found.append(Reference(source, page, heading, anchor))
    return found


def headings(page: Path) -> list[tuple[int, str]]:
    """(level, text) of each ATX heading outside fenced blocks."""
    found, fence = [], None
    for line in page.read_text(encoding="utf-8").splitlines():
        opened = re.match(r"\s*(`{3,}|~{3,})", line)
        if opened:
            if fence is None:
                fence = opened.group(1)
            elif line.strip().startswith(fence) and line.strip() == line.strip()[0] * len(line.strip()):
                fence = None
            continue
        heading = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if fence is None and heading:
            found.append((len(heading.group(1)), heading.group(2)))
    return found


def slug(text: str) -> str:
    """A heading's anchor as MyST (``github_slugify``) and GitHub make it, from its text as rendered."""
    shown = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", shown.strip().lower()).replace(" ", "-")


def problem(reference: Reference) -> str | None:
    cited = f"{reference.source} -> {reference.page.relative_to(ROOT) if reference.page.is_relative_to(ROOT) else reference.page}"
    if not reference.page.is_file():
        return f"{cited}: no such page"
    titles = headings(reference.page)
    if reference.heading is not None:
        said = " ".join(reference.heading.split())
        if not any(t == said or (t.startswith(said) and not t[len(said)].isalnum()) for _, t in titles):
            return f'{cited}: no heading "{said}"'
    if reference.anchor is not None:
        levels = ANCHORED_LEVELS if reference.page.is_relative_to(DOCS) else 6
        if reference.anchor not in {slug(t) for level, t in titles if level <= levels}:
            return f"{cited}: no heading with the anchor #{reference.anchor}"
    return None


def all_references() -> list[Reference]:
    return [reference for path in sources() for reference in references(path)]


def test_every_cited_section_is_a_heading_of_the_page_named():
    found = all_references()
    assert len(found) >= 30, "the forms above are still found"
    assert [p for p in map(problem, found) if p] == []


def test_the_benchmark_notebook_is_cited_where_its_text_is():
    """The figures a comment cites from the notebook are cited there, with the section they are in."""
    cited = [r for r in all_references() if r.page == DOCS / "benchmarks" / "history.md"]
    assert len(cited) >= 20
    assert all(r.heading is not None for r in cited)


#: Files about the benchmark pages as a whole (or the site's table of contents), which cite no one figure.
WHOLE_PAGES = {
    "README.md",
    "CHANGELOG.md",
    "docs/benchmarks.md",
    "docs/benchmarks/history.md",
    "tests/unit/test_benchmarks_page.py",
    "tests/unit/test_docs_blocks.py",
    "scripts/plot_benchmarks.py",
}


def test_a_figure_cited_from_the_benchmark_pages_names_its_section():
    """Both pages are long (the notebook near 3,000 lines): a comment that cites a figure names the section it is
    in, so that this test can hold the citation to the page when sections move again."""
    pages = {DOCS / "benchmarks.md", DOCS / "benchmarks" / "history.md"}
    bare = [
        r.source
        for path in sources()
        for r in references(path, bare=True)
        if r.page in pages and r.heading is None and r.anchor is None and r.source not in WHOLE_PAGES
    ]
    assert bare == []


def test_control_a_moved_section_is_found_in_every_form(tmp_path):
    """The citations of before (the sections that moved to the notebook) are found, in each form and wrapped."""
    old = (
        '# measurement (``docs/benchmarks.md``, "The node `chainfence node`\n'
        '# starts"): anvil 1.7.1 ...\n'
        '(see docs/benchmarks.md, "Test suite").\n'
        '{doc}`/explanation/design`, "The layers of before"\n'
        "[the guarantees](../guarantees.md#no-such-anchor)\n"
        '`docs/benchmarks/history.md` ("anvil\'s latest") and [notes](x.md), "Anything"\n'
    )
    page = tmp_path / "page.py"
    page.write_text(old, encoding="utf-8")
    found = references(page)
    assert [(r.heading, r.anchor) for r in found] == [
        ("The node `chainfence node` starts", None),
        ("Test suite", None),
        ("anvil's latest", None),
        ("The layers of before", None),
        (None, "no-such-anchor"),
        ("Anything", None),
    ]
    problems = [problem(r._replace(source="page.py")) for r in found]
    assert [p is not None for p in problems] == [True, True, False, True, True, True]
    assert "no such page" in str(problems[-1])
    # The same citations, pointed where the text is now, pass.
    assert problem(found[0]._replace(page=DOCS / "benchmarks" / "history.md")) is None
    assert problem(found[1]._replace(page=DOCS / "benchmarks.md", heading="The test suite")) is None
    # A citation that names no section is found as such.
    page.write_text("estimate (``docs/benchmarks.md``): the ceiling\n", encoding="utf-8")
    assert references(page) == [] and [r.heading for r in references(page, bare=True)] == [None]


def test_control_a_heading_inside_a_code_block_is_not_a_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```\n# before (main): a comment in a transcript\n```\n## Real\n", encoding="utf-8")
    assert headings(page) == [(1, "Title"), (2, "Real")]
    assert slug("The node `chainfence node` starts: what keeps anvil's time flat") == (
        "the-node-chainfence-node-starts-what-keeps-anvils-time-flat"
    )
