"""The documentation site (docs/): it builds with warnings as errors, and reads right in a browser.

The build runs once per test session (``python -m sphinx -W --keep-going``, into a temporary directory;
xdist's workers share it through a lock file), the same build ``scripts/bench_docs.py`` times: the test prints
its CPU time and asserts none (on a loaded machine the same build took 15 to 71 s). Headless Chromium
(Debian's ``chromium``: the timeline's browser test's fixture) then opens the generated reference pages
and the front page: the API pages show the docstrings' roles as links, never as raw ``:class:`` text,
and every internal link of every page leads to a page and an anchor that exist.
"""

from __future__ import annotations

import fcntl
import html.parser
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.integration.test_timeline_browser import chromium, run_chromium  # noqa: F401 (a fixture)
from tests.support.scripts import script

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


build = script("bench_docs").build  # the one build of the site, timed there, checked here


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> tuple[Path, dict]:
    """The site built once for the session: (its directory, the build's record)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out, record = shared / "docs-site", shared / "docs-site.json"
    with open(shared / "docs-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            record.write_text(json.dumps(build(DOCS, out)))
    return out, json.loads(record.read_text())


def test_the_site_builds_with_warnings_as_errors(site):
    out, record = site
    assert record["returncode"] == 0, f"the docs build failed (warnings are errors):\n{record['stderr'][-6000:]}"
    assert (out / "index.html").exists()
    print(f"docs build: {record['cpu']:.1f} s CPU, {record['wall']:.1f} s wall (timed by scripts/bench_docs.py)")


def test_control_a_docstring_reference_to_nothing_fails_the_build(tmp_path):
    """The same configuration and extension on a page whose reference names no chainfence object: the build
    fails and names it (without the resolver's check it would render as plain code and pass)."""
    source = tmp_path / "docs"
    source.mkdir()
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    shutil.copytree(DOCS / "_ext", source / "_ext")
    (source / "index.rst").write_text(
        "Control\n=======\n\n.. py:module:: chainfence.lease\n\n.. autoclass:: chainfence.lease.Lease\n   :no-members:\n\n"
        "See :class:`LeaseThatIsNot` and :class:`Lease`.\n",
        encoding="utf-8",
    )
    conf = (source / "conf.py").read_text(encoding="utf-8")
    (source / "conf.py").write_text(conf.replace("ROOT = DOCS.parent", f"ROOT = Path({str(ROOT)!r})"), encoding="utf-8")
    record = build(source, tmp_path / "out")
    assert record["returncode"] != 0
    named = re.findall(r"unresolved reference to a chainfence name: (\S+)", record["stderr"])
    assert "LeaseThatIsNot" in named and "Lease" not in named, record["stderr"][-3000:]


# ---------------------------------------------------------------------------
# Reading the built pages
# ---------------------------------------------------------------------------


class Page(html.parser.HTMLParser):
    """A page's links, its element ids and its visible text (scripts and styles left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        if tag == "a" and values.get("href"):
            self.links.append(values["href"] or "")
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def read(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


ROLE = re.compile(r":(class|func|meth|mod|attr|data|exc|obj|doc|ref):`")


def built_pages(out: Path) -> dict[Path, Page]:
    return {path: read(path.read_text(encoding="utf-8")) for path in out.rglob("*.html")}


def broken_links(pages: dict[Path, Page], out: Path) -> list[str]:
    broken = []
    for path, page in pages.items():
        for href in page.links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("mailto:"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if target not in pages:
                if not target.exists():
                    broken.append(f"{path.relative_to(out)}: {href} (no such file)")
                continue
            if parts.fragment and parts.fragment not in pages[target].ids:
                broken.append(f"{path.relative_to(out)}: {href} (no such anchor)")
    return broken


def test_every_internal_link_of_every_page_resolves(site):
    out, record = site
    assert record["returncode"] == 0
    pages = built_pages(out)
    assert len(pages) > 40
    assert broken_links(pages, out) == []


def test_control_a_broken_link_and_a_missing_anchor_are_found(site, tmp_path):
    out, _ = site
    copy = tmp_path / "site"
    shutil.copytree(out, copy)
    index = copy / "index.html"
    text = index.read_text(encoding="utf-8")
    index.write_text(
        text.replace("</body>", '<a href="reference/nope.html">x</a><a href="reference/errors.html#nope">y</a></body>'),
        encoding="utf-8",
    )
    found = broken_links(built_pages(copy), copy)
    assert found == [
        "index.html: reference/nope.html (no such file)",
        "index.html: reference/errors.html#nope (no such anchor)",
    ]


def test_no_page_shows_a_raw_role(site):
    out, _ = site
    raw = {
        str(path.relative_to(out)): ROLE.findall(" ".join(page.text))
        for path, page in built_pages(out).items()
        if ROLE.search(" ".join(page.text))
    }
    assert raw == {}


# ---------------------------------------------------------------------------
# In the browser
# ---------------------------------------------------------------------------


def dom(chromium: str, profile: Path, page: Path) -> Page:  # noqa: F811 (the fixture's name)
    result = run_chromium(chromium, profile, "--dump-dom", page.as_uri())
    return read(result.stdout)


def test_the_api_pages_render_the_docstrings_roles_as_links(chromium, site, tmp_path):  # noqa: F811
    """The registry's page as Chromium builds it: the docstrings' text with no raw role, and their
    references (``:class:`Lease```, ``:class:`~chainfence.errors.LeaseHeld```) as links into the API."""
    out, record = site
    assert record["returncode"] == 0
    page = dom(chromium, tmp_path / "profile", out / "reference" / "api" / "chainfence.registry.html")
    text = " ".join(page.text)
    assert "Registry" in text and "acquire" in text
    assert not ROLE.search(text), ROLE.findall(text)
    targets = {link.split("#", 1)[1] for link in page.links if "#" in link}
    for documented in ("chainfence.lease.Lease", "chainfence.errors.LeaseHeld", "chainfence.chain.Chain"):
        assert documented in targets, f"no link to {documented}"
    assert "chainfence.registry.Registry.acquire" in page.ids
    api = out / "reference" / "api"
    as_built = built_pages(out) | {(api / "chainfence.registry.html").resolve(): page}
    assert [link for link in broken_links(as_built, out) if link.startswith("reference/api/chainfence.registry")] == []


def test_the_reference_pages_are_generated_in_the_browser(chromium, site, tmp_path):  # noqa: F811
    """The CLI, exit codes, errors and contract pages as Chromium builds them, each from the code."""
    from chainfence import errors
    from chainfence.cli import _common

    out, _ = site
    profile = tmp_path / "profile"
    cli = " ".join(dom(chromium, profile, out / "reference" / "cli.html").text)
    for command in ("acquire", "lock", "audit", "namespace", "deploy", "--ttl"):
        assert command in cli
    codes = " ".join(dom(chromium, profile, out / "reference" / "exit-codes.html").text)
    for name, value in vars(_common).items():
        if name.startswith("EXIT_") and isinstance(value, int):
            assert name in codes
    tree = dom(chromium, profile, out / "reference" / "errors.html")
    tree_text = " ".join(tree.text)
    for name in errors.__all__:
        assert name in tree_text
    assert "exit 3, HTTP 409" in tree_text  # LeaseHeld, from its class
    contract = "".join(dom(chromium, profile, out / "reference" / "contract.html").text)
    assert "acquire(string name, uint256 ttl)" in contract and "checkCurrent" in contract
    assert "Someone else holds a live lease" in contract  # the NatSpec of FencingRegistryLeaseHeld
