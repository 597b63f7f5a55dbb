"""The examples in the docstrings of ``calib_jax.cli`` run as written (the API reference's
docstring check, docs/test_docstrings.py, covers the library's public modules, not the command's)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

pytest.importorskip("duckdb")
import calib_jax.cli as cli  # noqa: E402

MODULES = sorted(m.name for m in pkgutil.iter_modules(cli.__path__, "calib_jax.cli."))


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"


def test_the_new_modules_have_examples():
    for name in ("calib_jax.cli.compare", "calib_jax.cli.gauc", "calib_jax.cli.engines"):
        assert doctest.testmod(importlib.import_module(name), verbose=False).attempted > 0, name
