"""Every public function's docstring is complete, and its example runs and prints what it says.

Run by ``make docs`` (``pytest -n 2 docs/test_docstrings.py``, after the HTML build), so by
``make test`` too. A public object is a function or class listed in a public module's
``__all__`` (or its public names where it has none) and defined in calib_jax. Its docstring
must have

* ``Args:`` (when it takes arguments) with shapes and domains, ``Returns:`` (or ``Yields:``),
  and an ``Example:`` of ``>>>`` lines that is executed here as a doctest with its own imports;
* in the array layers (metrics, decompositions, group statistics, partitions, bootstrap,
  inference, losses) a word on what ``jit`` does to the function (input checks, static sizes);
* for a class, an example or its ``Attributes:``/``Args:``.

The examples run here rather than in Sphinx's doctest builder because that builder runs them one
after another in one process; these are independent tests that pytest-xdist spreads over the
cores (each first eager call compiles, so the examples cost compile time, not arithmetic). The
module docstrings' examples run too.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

#: the public modules: every module the API reference documents, then calib_jax itself (whose
#: re-exports are met first in their layer)
MODULES = (*sorted({m for page in sorted((Path(__file__).parent / "api").glob("*.md"))
                    for m in re.findall(r"^\.\. automodule:: (\S+)", page.read_text(), re.M)}), "calib_jax")
#: layers whose functions are meant to be called under jit / vmap, so say what jit does
ARRAY_LAYERS = ("calib_jax.metrics", "calib_jax.decompositions", "calib_jax.groupstats",
                "calib_jax.partitions", "calib_jax.bootstrap", "calib_jax.inference", "calib_jax.losses")


def _public_objects() -> Iterator[tuple[str, str, object]]:
    seen: set[int] = set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name)
            if not (inspect.isroutine(obj) or inspect.isclass(obj)):
                continue
            if not (getattr(obj, "__module__", "") or "").startswith("calib_jax") or id(obj) in seen:
                continue
            seen.add(id(obj))
            yield module_name, name, obj


#: "layer.name" (as the API reference lists it) -> the object
OBJECTS = {f"{module.removeprefix('calib_jax.')}.{name}": obj for module, name, obj in _public_objects()}


def _takes_arguments(obj: object) -> bool:
    try:
        params = inspect.signature(obj).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return any(p.name not in {"self", "cls"} for p in params.values())


def _run_examples(doc: str, name: str) -> None:
    test = doctest.DocTestParser().get_doctest(doc, {}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append)
    if runner.failures:
        pytest.fail(f"{name}: {runner.failures} failing example(s)\n" + "".join(report), pytrace=False)


@pytest.mark.parametrize("qualname", sorted(OBJECTS))
def test_docstring_is_complete_and_its_example_runs(qualname):
    obj = OBJECTS[qualname]
    module = obj.__module__  # type: ignore[attr-defined]
    doc = inspect.getdoc(obj) or ""
    missing = []
    if inspect.isclass(obj):
        if not any(s in doc for s in (">>>", "Attributes:", "Args:")):
            missing.append("an example, Attributes: or Args:")
    else:
        if _takes_arguments(obj) and "Args:" not in doc:
            missing.append("Args:")
        if "Returns:" not in doc and "Yields:" not in doc:
            missing.append("Returns:")
        if "Example" not in doc or ">>>" not in doc:
            missing.append("Example: with >>> lines")
        if module.startswith(ARRAY_LAYERS) and "jit" not in doc:
            missing.append("what jit does")
    assert not missing, f"{qualname}: the docstring lacks {', '.join(missing)}"
    if ">>>" in doc:
        _run_examples(doc, qualname)


@pytest.mark.parametrize("module_name", [m for m in MODULES if ">>>" in (importlib.import_module(m).__doc__ or "")])
def test_module_examples_run(module_name):
    _run_examples(inspect.getdoc(importlib.import_module(module_name)) or "", module_name)
