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


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_members)
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
