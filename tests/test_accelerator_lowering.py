"""The hot loops lower for CUDA and TPU from this CPU machine, with no host callback.

On the CPU the sorts (``calib_jax._src.sorting``) and the isotonic fits (``calib_jax._src.pav``)
call NumPy and SciPy on the host; on GPU/TPU they run ``lax.sort`` and the hull-merge PAV on the
device. The platform is picked when a program is lowered (``jax.lax.platform_dependent``), so
one jitted program serves every backend and a GPU program can be exported from a CPU host.
Until 2026-12-05 the sorts chose their path from ``jax.default_backend()`` while tracing: a
program traced on this machine held the CPU's host call and could not be lowered for an
accelerator. ``jax.export`` refuses a host callback and any custom call without a
compatibility guarantee, so an export for CUDA and TPU that succeeds shows that the loop has no
host round trip and no CPU-only kernel there; the CPU lowering of the same program keeps its
host sorts (the control).

The loops: a Monte Carlo chunk of the Spearman study's panel (every metric of the fixed design,
under the engine's ``shard_map``), the compiled VR-SAG fit (both solvers), one split's metrics
of ``compare_calibrators`` and its row bootstrap's replicates. Every public call that runs under
``jit`` (the metrics, decompositions and losses of ``tests/bad_inputs.py`` and its jit-able
fits) is exported for CUDA the same way; before the change 11 of them (AUC, the quantile-binned
ECE, Spearman's correlation, the multicalibration error, GAUC, Hosmer-Lemeshow, Murphy's
decomposition among them) failed to export.
"""

from __future__ import annotations

import warnings

import bad_inputs as B
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from test_transfer_guard import _sag_problem  # the same small VR-SAG problem as the transfer guard's

from calib_jax import bootstrap as boot
from calib_jax import metrics as M
from calib_jax import montecarlo as mc
from calib_jax._src.sorting import argsort, argsort_small_ints, argsort_with_ties
from calib_jax.calibrators import sag
from calib_jax.montecarlo import engine

ACCELERATORS = ("cuda", "tpu")
#: the fits of ``tests/bad_inputs.py`` that run on the host by design (PAV, SAG's stopping and
#: fallback logic, Neural Calibration's and top-n's host loops): their compiled inner loops are
#: checked below or in their own tests
HOST_FITS = ("isotonic.fit", "sag_ts.fit", "vrsag_ps.fit", "neural_calibration.fit", "top_n.fit")


def _module(fn, platform: str, *args, **kwargs) -> str:
    return export.export(fn, platforms=(platform,))(*args, **kwargs).mlir_module()


def _assert_lowers_without_host_calls(fn, *args) -> None:
    for platform in ACCELERATORS:
        module = _module(fn, platform, *args)
        assert "callback" not in module.lower(), platform
    if jax.default_backend() == "cpu":  # the control: the CPU program keeps its host sorts
        text = fn.lower(*args).as_text()
        assert "xla_ffi_python_cpu_callback" in text


def test_the_sorts_pick_their_path_when_lowered():
    x = jax.ShapeDtypeStruct((5, 40), jnp.float32)
    codes = jax.ShapeDtypeStruct((40,), jnp.int32)
    for fn, arg in ((argsort, x), (lambda v: argsort_with_ties(v), x), (argsort_small_ints, codes)):
        program = jax.jit(jax.vmap(fn) if arg is x else fn)
        for platform in ACCELERATORS:
            module = _module(program, platform, arg)
            assert "stablehlo.sort" in module and "callback" not in module.lower()
        if jax.default_backend() == "cpu":
            text = program.lower(arg).as_text()
            assert "xla_ffi_python_cpu_callback" in text and "stablehlo.sort" not in text


@pytest.mark.parametrize("case", [c for c in B.CASES if c.name not in HOST_FITS], ids=lambda c: c.name)
def test_every_jit_able_public_call_lowers_for_cuda(case):
    arrays = B.valid_arrays(case, 64, np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fits' probability-scale warnings on random logits
        module = _module(jax.jit(case.call), "cuda", **arrays)
    assert "callback" not in module.lower()


def test_the_device_sorts_equal_the_host_sorts():
    """Both branches give the same orders and tie bounds (ties keep their index order)."""
    from calib_jax._src import sorting

    rng = np.random.default_rng(5)
    x = np.round(rng.normal(size=(3, 300)), 1).astype(np.float32)  # many ties
    codes = rng.integers(0, 7, 300).astype(np.int32)
    host = jax.jit(jax.vmap(sorting._host_argsort_with_ties))(x)
    device = jax.jit(jax.vmap(sorting._device_argsort_with_ties))(x)
    for h, d in zip(host, device, strict=True):
        np.testing.assert_array_equal(np.asarray(h), np.asarray(d))
    np.testing.assert_array_equal(np.asarray(host[0]), np.argsort(x, axis=-1, kind="stable"))
    np.testing.assert_array_equal(np.asarray(jax.jit(sorting._host_argsort_small_ints)(codes)),
                                  np.asarray(jnp.argsort(codes, stable=True)))


def test_a_monte_carlo_chunk_lowers_for_accelerators():
    trial, _, _ = mc.make_design_trial("fixed", 200, seed=0, target_ctr=0.05)
    fn, _, _ = engine._compiled_chunk(trial, jax.random.key(0), (), 4, tuple(jax.devices()[:1]), 2)
    _assert_lowers_without_host_calls(fn, jax.random.key(0), jnp.arange(4, dtype=jnp.int32), ())


@pytest.mark.parametrize("solver", ["sequential", "lockstep"])
def test_a_vrsag_fit_lowers_for_accelerators(solver):
    theta0, data, stop = _sag_problem(n=128, K=3)
    fit = jax.jit(lambda th, o, y, zt, v, lam, lam_v, stop: sag._fit_soft(
        th, o, y, zt, v, lam, lam_v, stop, n_steps=3, use_beta=True, head_bias=True, solver=solver))
    for platform in ACCELERATORS:
        assert "callback" not in _module(fit, platform, theta0, *data, stop).lower()


def _split(n: int = 300):
    rng = np.random.default_rng(1)
    o = rng.normal(-1.5, 1.0, n).astype(np.float32)
    oracle = (1 / (1 + np.exp(-o))).astype(np.float32)
    y = (rng.random(n) < oracle).astype(np.float32)
    p = np.sort(np.clip(oracle * 1.1, 0.0, 1.0)).astype(np.float32)
    g = rng.integers(0, 3, (n, 2)).astype(np.int32)
    return p, o, y, g, oracle


@pytest.mark.parametrize("presorted", [False, True])
def test_a_splits_metrics_lower_for_accelerators(presorted):
    from experiments import _compare_eval as ce

    stat = ce.metric_function(3, 1, True, presorted, (0, 7), 3)
    p, o, y, g, oracle = _split()
    program = jax.jit(lambda *a: ce._eval_jit(stat, *a))
    _assert_lowers_without_host_calls(program, p, o, y, g, oracle, np.ones(len(p), np.float32))


def test_the_row_bootstraps_replicates_lower_for_accelerators():
    from experiments import _compare_eval as ce

    stat = ce.metric_function(3, 1, True, True, (0, 7), 3)
    p, o, y, g, oracle = _split()
    counts = boot.resample_counts(jax.random.key(1), len(p), 4, dtype=jnp.uint8)
    program = jax.jit(lambda args, w, c, order: boot._replicates_given(stat, args, w, c, order, batch=2))
    _assert_lowers_without_host_calls(program, (p, o, y, g, oracle), jnp.ones(len(p), jnp.float32), counts,
                                      jnp.arange(len(p), dtype=jnp.int32))


def test_the_cpu_programs_host_sorts_match_their_references():
    """The CPU program computes what the host sorts compute: AUC, the quantile-binned ECE and
    Spearman's correlation under ``jit`` equal their NumPy/SciPy references on tied scores."""
    from scipy import stats
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(2)
    p = np.round(rng.uniform(0.01, 0.99, 400), 2).astype(np.float32)
    y = (rng.uniform(size=400) < p).astype(np.float32)
    auc, rho = jax.jit(lambda p, y: (M.auc(p, y), M.spearman(p, y)))(p, y)
    np.testing.assert_allclose(float(auc), roc_auc_score(y, p), rtol=1e-6)
    np.testing.assert_allclose(float(rho), stats.spearmanr(p, y).statistic, rtol=1e-5)
