"""Sphinx configuration of the calib_jax documentation site.

Built by ``make docs`` (offline, warnings are errors, tutorials executed at every build).
Sphinx + MyST-NB + the book theme, as optax and flax use: the docstrings are Google-style
reStructuredText with ``.. math::`` blocks, which autodoc and napoleon render as written, and
MyST-NB executes the Markdown tutorials as notebooks, so a stale example fails the build.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from sphinx.util.parallel import make_chunks

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

project = "calib_jax"
author = "the calib_jax developers"
copyright = "2026, the calib_jax developers"  # noqa: A001

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxcontrib.bibtex",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
root_doc = "index"

# API reference: members in source order, signatures without the module path
autodoc_default_options = {"members": True, "member-order": "bysource", "undoc-members": False}
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
add_module_names = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes:" as fields: NamedTuple fields are not described twice


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out what scikit-learn adds to the estimator (``set_fit_request`` and friends)."""
    module = getattr(obj, "__module__", "") or ""
    if module.startswith("sklearn"):
        return True
    return None


def _spread_tutorials_over_workers(app, env, docnames):
    """Reorder the pages to read so that ``sphinx-build -j N`` executes the tutorials side by side.

    Sphinx reads the sorted page names in consecutive chunks, one worker per chunk
    (``sphinx.util.parallel.make_chunks``). The tutorials sort last, so all of them fell in one
    chunk and ran one after the other while the other worker read the API pages (the site took
    225 s, of which 149 s were the six tutorials run in turn; 2026-12-07). The tutorials are dealt
    in turn to the first ``N`` chunks and the other pages fill the places left, in their order.
    """
    nproc = app.parallel
    tutorials = [name for name in docnames if name.startswith("tutorials/")]
    if nproc <= 1 or len(tutorials) < 2:
        return
    others = [name for name in docnames if not name.startswith("tutorials/")]
    chunks = make_chunks(list(docnames), nproc)
    streams = min(nproc, len(chunks))
    if any(len(chunk) < -(-len(tutorials) // streams) for chunk in chunks[:streams]):
        return
    slots: list[list[str | None]] = [[None] * len(chunk) for chunk in chunks]
    for i, name in enumerate(tutorials):
        slots[i % streams][i // streams] = name
    remaining = iter(others)
    docnames[:] = [name if name is not None else next(remaining) for chunk in slots for name in chunk]


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("env-before-read-docs", _spread_tutorials_over_workers)
    # MathJax served from the site (offline). sphinx-mathjax-offline only copies its files after
    # the build and sets ``mathjax_path``, but it does not declare itself safe for parallel
    # reading, which would keep `sphinx-build -j` (the Makefile) from executing the tutorials
    # side by side; set up from here, it is not counted as an extension
    importlib.import_module("sphinx-mathjax-offline").setup(app)

# tutorials: executed at every build, a failing cell fails the build
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

bibtex_bibfiles = ["references.bib"]
bibtex_default_style = "plain"

html_theme = "sphinx_book_theme"
html_title = "calib_jax"
html_theme_options = {"show_toc_level": 2, "use_download_button": False}
html_static_path: list[str] = []

# the results page links to committed files outside the site (figures, CSVs): plain links
suppress_warnings = ["myst.xref_missing", "myst-nb.lexer"]
