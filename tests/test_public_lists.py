"""Every list that must name each public metric or call, checked against its source.

The lists kept by hand (the bad-input table, the Monte Carlo panel's name groups and
display labels, the claims ledger's copies of those groups) fail here with the missing
names, instead of silently leaving a new metric out.
"""

from __future__ import annotations

import inspect

import bad_inputs as B
import pytest

from calib_jax import decompositions, inference, metrics
from calib_jax import montecarlo as mc
from experiments import claims

#: the public modules whose every array-taking call the bad-input table must hold
TABLED = (metrics, decompositions, inference)


def _public_calls(mod) -> set[str]:
    return {n for n in mod.__all__ if callable(getattr(mod, n)) and not inspect.isclass(getattr(mod, n))}


@pytest.mark.parametrize("mod", TABLED, ids=lambda m: m.__name__)
def test_the_bad_input_table_holds_every_public_call(mod):
    tabled = {c.name for c in B.CASES} | {c.name.split(".")[0] for c in B.SCALAR_CASES}
    missing = sorted(_public_calls(mod) - tabled - set(B.NOT_IN_TABLE))
    assert not missing, f"add these public calls of {mod.__name__} to tests/bad_inputs.py CASES (or NOT_IN_TABLE " \
                        f"with the reason): {missing}"
    stale = sorted(n for n in B.NOT_IN_TABLE if not any(n in m.__all__ for m in TABLED))
    assert not stale, f"NOT_IN_TABLE names no public call: {stale}"


def test_the_panel_computes_every_listed_metric_and_labels_it():
    listed = mc.LABEL_METRICS + mc.MODERN_METRICS + mc.ORACLE_METRICS
    assert len(set(listed)) == len(listed), "a metric is in two of the panel's groups"
    computed = set(mc.metric_panel(mc.panel_for(None, modern=True)))
    assert computed == set(listed), (f"listed, not computed: {sorted(set(listed) - computed)}; "
                                     f"computed, not listed: {sorted(computed - set(listed))}")
    assert set(mc.DISPLAY) == set(listed), (f"no display label: {sorted(set(listed) - set(mc.DISPLAY))}; "
                                            f"label of no metric: {sorted(set(mc.DISPLAY) - set(listed))}")


def test_the_ledgers_metric_groups_are_the_panels():
    assert claims.LABEL == mc.LABEL_METRICS, "experiments/claims.py LABEL is a stale copy of LABEL_METRICS"
    assert claims.MODERN == mc.MODERN_METRICS, "experiments/claims.py MODERN is a stale copy of MODERN_METRICS"
    assert set(claims.OURS) <= set(mc.LABEL_METRICS)


def test_the_eager_call_list_calls_every_public_metric():
    """``benchmarks/eager_calls.CALLS`` (compile-once test and eager benchmark) calls each public
    metric and decomposition, or names it in ``NOT_CALLED`` with the reason."""
    import re

    from benchmarks import eager_calls

    source = inspect.getsource(eager_calls)
    for mod, alias in ((metrics, "M"), (decompositions, "D")):
        called = set(re.findall(rf"\b{alias}\.(\w+)\(", source))
        missing = sorted(_public_calls(mod) - called - set(eager_calls.NOT_CALLED))
        assert not missing, f"add these public calls of {mod.__name__} to benchmarks/eager_calls.py CALLS " \
                            f"(or NOT_CALLED with the reason): {missing}"
