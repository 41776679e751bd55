"""Sphinx configuration of chainfence's documentation site (docs/: ``python -m sphinx docs OUT``).

Sphinx with MyST: the pages are the repository's markdown as it is (``guarantees.md``, the guides), and the
reference is generated from the code: the API from the docstrings (autodoc: their ``:class:`` and
``:func:`` roles become links), the CLI from its argparse parser (sphinx-argparse), exit codes, the error
tree and the contract's NatSpec by this site's own extension (``_ext/chainfence_docs.py``).
``tests/unit/test_docs_site.py`` builds it with warnings as errors and reads it in Chromium.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "src"))  # the checkout's package, whatever is installed
sys.path.insert(0, str(DOCS / "_ext"))

project = "chainfence"
author = "chainfence developers"
copyright = "chainfence developers (MIT)"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
    "chainfence_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "**/README.md", "**/_*.md", "benchmarks/history.md"]
templates_path: list[str] = []

# MyST: headings get anchors (``page.md#a-heading`` links), ::: fences, definition lists.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# Autodoc: the docstrings are reStructuredText; a bare `name` in them is a Python reference, as in code.
default_role = "py:obj"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_inherit_docstrings = False
add_module_names = False
python_use_unqualified_type_names = True

html_theme = "alabaster"
html_title = "chainfence"
html_theme_options = {
    "description": "Fencing tokens issued on-chain, checked where the writes happen.",
    "fixed_sidebar": True,
    "page_width": "1180px",
    "show_relbars": True,
}
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False
# No search index: the site has no script the tests do not need (and the index is most of the build's writing).
html_use_index = True

# The docstrings' "Args:", "Returns:", "Attributes:" sections are Google style.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
