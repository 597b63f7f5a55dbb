"""The examples in the docstrings of every module of the log engine (``calib_jax.logs``) and of
the command (``calib_jax.cli``) run as written (the API reference's docstring check,
docs/test_docstrings.py, covers the public entry points, not every module beneath them)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

pytest.importorskip("duckdb")
import calib_jax.cli as cli  # noqa: E402
import calib_jax.cli.commands as commands  # noqa: E402
import calib_jax.logs as logs  # noqa: E402

MODULES = sorted(m.name for package in (logs, cli, commands)
                 for m in pkgutil.iter_modules(package.__path__, package.__name__ + "."))


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"


def test_the_new_modules_have_examples():
    for name in ("calib_jax.logs.comparison", "calib_jax.logs.gauc", "calib_jax.logs.engines"):
        assert doctest.testmod(importlib.import_module(name), verbose=False).attempted > 0, name
