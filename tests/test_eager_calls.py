"""Eager calls of the public metrics compile once and keep memory flat (SPEC §2 calling style).

After a warm-up call, calling a metric or decomposition eagerly on fresh data of the same
shape must compile nothing new: every public function validates its concrete inputs and then
runs module-level compiled cores whose static arguments are declared. Before this test,
``lcce`` and ``calibrated_log_loss`` compiled on every call (fresh closures under vmap and
fori_loop), 200 compilations in 200 calls.
"""

from __future__ import annotations

import logging
import resource

import jax
import numpy as np
import pytest

from benchmarks.eager_calls import CALLS
from benchmarks.eager_calls import make_data as _data


class _CompileCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Compiling" in record.getMessage():
            self.count += 1


def _compilations_and_growth(fn, make, repeats: int) -> tuple[int, float]:
    """Compilations and peak-RSS growth (MB) over ``repeats`` eager calls of ``fn`` on fresh
    data of one shape, after three warm-up calls (the first one compiles)."""
    rng, key = np.random.default_rng(0), jax.random.key(0)
    for i in range(3):
        jax.block_until_ready(fn(make(rng, key, i)))
    counter, logger = _CompileCounter(), logging.getLogger("jax")
    logger.addHandler(counter)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with jax.log_compiles(True):
            for i in range(3, 3 + repeats):
                jax.block_until_ready(fn(make(rng, key, i)))
    finally:
        logger.removeHandler(counter)
    return counter.count, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024


#: eager calls per metric after the warm-up: a recompilation shows on the first of them, and a
#: leak of 200 kB a call passes the 20 MB bound (the list grew to every public metric: 53 calls)
REPEATS = 100


#: calls whose repeated runs cost more at LLVM level 0 than compiling them at level 1
#: (tests/conftest.py): smooth_ece 132 -> 70 ms a call, 14 -> 9 CPU-s in all; kmeans_1d_optimal's
#: 200 calls 9.4 -> 3.6 CPU-s; ILPS's fits (every name starting "ilps.")
_LONG_RUNNING = {"smooth_ece", "kmeans_1d_optimal"}


def _names(calls) -> list:
    """The parameters of a test over ``calls``: the long-running ones marked ``optimized_codegen``."""
    return [pytest.param(n, marks=pytest.mark.optimized_codegen) if n in _LONG_RUNNING or n.startswith("ilps.")
            else n for n in calls]


@pytest.mark.parametrize("name", _names(CALLS))
def test_eager_calls_compile_once_and_memory_stays_flat(name):
    count, grown_mb = _compilations_and_growth(CALLS[name], _data, REPEATS)
    assert count == 0, f"{name}: {count} compilations in {REPEATS} eager calls"
    assert grown_mb < 20, f"{name}: peak RSS grew {grown_mb:.1f} MB over {REPEATS} calls"


# ---- the rest of the public surface: partitions, group statistics, calibrators' fit and
# predict, the Monte Carlo panel (issue 15 item 7). Before this test, an eager kmeans_1d
# compiled 3 programs a call (1.4 s at n = 10^4), an isotonic fit + predict 1 (0.2 s), a
# top-N fit 5 (5.9 s: every rank group's row count was a new shape) and montecarlo.evaluate
# 2 (0.66 s).

from benchmarks.eager_calls import LIBRARY_CALLS, make_library_data  # noqa: E402

#: compilations allowed after the warm-up: isotonic predict compiles once per power of two
#: of the knot count (at most log2(n) programs; the knot count changes from fit to fit)
_ALLOWED = {"isotonic.fit+predict": 2}


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")  # few events per group
@pytest.mark.parametrize("name", _names(LIBRARY_CALLS))
def test_library_eager_calls_compile_once_and_memory_stays_flat(name):
    fn, _, repeats = LIBRARY_CALLS[name]
    count, grown_mb = _compilations_and_growth(fn, make_library_data, repeats)
    assert count <= _ALLOWED.get(name, 0), f"{name}: {count} compilations in {repeats} eager calls"
    assert grown_mb < 20, f"{name}: peak RSS grew {grown_mb:.1f} MB over {repeats} calls"


@pytest.mark.parametrize("name", ["kmeans_1d_random", "kmeans_1d_optimal", "kmeans_hist", "histogram_1d",
                                  "random_groups", "group_stats", "montecarlo_evaluate"])
def test_library_eager_calls_equal_jit_bit_for_bit(name):
    """The compiled eager path is the function's own program: the same bits as ``jax.jit``
    of the call (and as the op-by-op plain path up to float32 rounding)."""
    fn = LIBRARY_CALLS[name][0]
    d = make_library_data(np.random.default_rng(1), jax.random.key(1), 0)
    eager = jax.tree_util.tree_leaves(fn(d))
    jitted = jax.tree_util.tree_leaves(jax.jit(fn)(d))
    for a, b in zip(eager, jitted, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_kmeans_1d_eager_rejects_bad_input_naming_the_argument():
    from calib_jax import partitions as P

    x = np.random.default_rng(0).normal(size=200).astype(np.float32)
    x[3] = np.nan
    with pytest.raises(ValueError, match="`x`"):
        P.kmeans_1d(x, n_clusters=3, init="quantile")
    with pytest.raises(ValueError, match="`key` is required"):
        P.kmeans_1d(np.abs(x[4:]), n_clusters=3)


def test_evaluate_eager_rejects_bad_trial_data():
    from calib_jax import montecarlo as mc

    d = make_library_data(np.random.default_rng(2), jax.random.key(2), 0)
    panel = mc.metric_panel(mc.panel_for(["brier", "ece", "lcce_quantile"]))
    good = mc.variants.TrialData(d["o"], d["p"], d["y"], d["pi"], d["f"], d["g"], None)
    assert np.all(np.isfinite(np.asarray(mc.evaluate(good, d["k"], panel))))
    bad = good._replace(labels=d["y"] * 2)
    with pytest.raises(ValueError, match="0 or 1"):
        mc.evaluate(bad, d["k"], panel)


def test_isotonic_padded_knots_predict_the_same_map():
    """Padding the knots to a power of two by repeating the last knot leaves every
    prediction unchanged (linear and step interpolation, inside, on and outside the knots)."""
    from calib_jax.calibrators import isotonic

    rng = np.random.default_rng(3)
    o = rng.normal(size=500).astype(np.float32)
    y = (rng.uniform(size=500) < 1 / (1 + np.exp(-o))).astype(np.float32)
    for interpolation in ("linear", "step"):
        prm = isotonic.fit(o, y, interpolation=interpolation)
        k = prm.x_knots.shape[0]
        assert k & (k - 1), "the test needs a knot count that is not a power of two"
        xs = np.concatenate([o, np.asarray(prm.x_knots), [-50.0, 50.0]]).astype(np.float32)
        eager = np.asarray(isotonic.predict(prm, xs))
        plain = np.asarray(jax.jit(isotonic.predict)(prm, xs))  # unpadded knots, traced
        np.testing.assert_array_equal(eager, plain)

