"""The public metrics and decompositions as eager calls on fresh data of one shape.

Shared by ``tests/test_eager_calls.py`` (each compiles once and keeps memory flat over 200
calls) and ``benchmarks/bench_eager.py`` (eager per-call time next to the jitted one).
``CALLS[name](data)`` calls one public function the way a user does; ``make_data`` draws
the inputs of call ``i`` (``n`` rows, ``K`` groups).
"""

from __future__ import annotations

import jax
import numpy as np

import calib_jax.decompositions as D
import calib_jax.metrics as M

N = 2000
K = 5


def make_data(rng: np.random.Generator, key: jax.Array, i: int, n: int = N) -> dict:
    o = rng.normal(-3.0, 1.0, n).astype(np.float32)
    p = (1.0 / (1.0 + np.exp(-o))).astype(np.float32)
    y = (rng.uniform(size=n) < p).astype(np.float32)
    return {"o": o, "p": p, "y": y, "pi": (0.9 * p).astype(np.float32),
            "g": rng.integers(0, K, n).astype(np.int32), "q": rng.dirichlet(np.ones(3), n).astype(np.float32),
            "u": rng.integers(0, 50, n).astype(np.int32), "k": jax.random.fold_in(key, i)}


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


