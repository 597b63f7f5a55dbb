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

import calib_jax.decompositions as D
import calib_jax.metrics as M

N = 2000
K = 5


def _data(rng: np.random.Generator, key: jax.Array, i: int):
    o = rng.normal(-3.0, 1.0, N).astype(np.float32)
    p = (1.0 / (1.0 + np.exp(-o))).astype(np.float32)
    y = (rng.uniform(size=N) < p).astype(np.float32)
    return {"o": o, "p": p, "y": y, "pi": (0.9 * p).astype(np.float32),
            "g": rng.integers(0, K, N).astype(np.int32), "q": rng.dirichlet(np.ones(3), N).astype(np.float32),
            "u": rng.integers(0, 50, N).astype(np.int32), "k": jax.random.fold_in(key, i)}


CALLS = {
    "brier": lambda d: M.brier(d["p"], d["y"]),
    "nll": lambda d: M.nll(d["p"], d["y"]),
    "nll_logits": lambda d: M.nll_logits(d["o"], d["y"]),
    "mae": lambda d: M.mae(d["p"], d["y"]),
    "ece": lambda d: M.ece(d["p"], d["y"]),
    "ece_quantile": lambda d: M.ece(d["p"], d["y"], strategy="quantile"),
    "gce_hard": lambda d: M.gce(d["p"], d["y"], d["g"], n_groups=K),
    "gce_soft": lambda d: M.gce(d["p"], d["y"], d["q"]),
    "lcce_random": lambda d: M.lcce(d["o"], d["y"], key=d["k"]),
    "lcce_quantile": lambda d: M.lcce(d["o"], d["y"], init="quantile"),
    "lcce_optimal": lambda d: M.lcce(d["o"], d["y"], init="optimal"),
    "lcce_subsample": lambda d: M.lcce(d["o"], d["y"], key=d["k"], subsample=500),
    "lcce_random_groups": lambda d: M.lcce_random(d["p"], d["y"], key=d["k"]),
    "field_ece": lambda d: M.field_ece(d["p"], d["y"], d["g"], n_groups=K),
    "field_rce": lambda d: M.field_rce(d["p"], d["y"], d["g"], n_groups=K),
    "abs_bias": lambda d: M.abs_bias(d["p"], d["y"], d["g"], n_groups=K),
    "auc": lambda d: M.auc(d["p"], d["y"]),
    "ece_at_n": lambda d: M.ece_at_n(d["p"], d["y"], users=d["u"], top_n=5),
    "rdece_at_n": lambda d: M.rdece_at_n(d["p"], d["y"], users=d["u"], top_n=5),
    "calibrated_log_loss": lambda d: M.calibrated_log_loss(d["o"], d["y"], key=d["k"]),
    "calibrated_quadratic_loss": lambda d: M.calibrated_quadratic_loss(d["p"], d["y"], key=d["k"]),
    "oracle_brier": lambda d: M.oracle_brier(d["p"], d["pi"]),
    "oracle_kl": lambda d: M.oracle_kl(d["p"], d["pi"]),
    "oracle_alpha": lambda d: M.oracle_alpha_divergence(d["p"], d["pi"]),
    "spearman": lambda d: M.spearman(d["p"], d["pi"]),
    "brier_grouping": lambda d: D.brier_grouping(d["p"], d["y"], d["g"], n_groups=K),
    "murphy": lambda d: D.murphy(d["p"], d["y"]),
    "nll_grouping": lambda d: D.nll_grouping(d["p"], d["y"], d["g"], n_groups=K),
    "corp": lambda d: D.corp(d["p"], d["y"]),
}


class _CompileCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Compiling" in record.getMessage():
            self.count += 1


@pytest.mark.parametrize("name", list(CALLS))
def test_eager_calls_compile_once_and_memory_stays_flat(name):
    fn, rng, key = CALLS[name], np.random.default_rng(0), jax.random.key(0)
    for i in range(3):  # warm-up: the first call compiles
        jax.block_until_ready(fn(_data(rng, key, i)))
    counter, logger = _CompileCounter(), logging.getLogger("jax")
    logger.addHandler(counter)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with jax.log_compiles(True):
            for i in range(3, 203):
                jax.block_until_ready(fn(_data(rng, key, i)))
    finally:
        logger.removeHandler(counter)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    assert counter.count == 0, f"{name}: {counter.count} compilations in 200 eager calls"
    assert grown_mb < 20, f"{name}: peak RSS grew {grown_mb:.1f} MB over 200 calls"
