"""The public metrics and decompositions as eager calls on fresh data of one shape.

Shared by ``tests/test_eager_calls.py`` (each compiles once and keeps memory flat over 200
calls) and ``benchmarks/bench_eager.py`` (eager per-call time next to the jitted one).
``CALLS[name](data)`` calls one public function the way a user does; ``make_data`` draws
the inputs of call ``i`` (``n`` rows, ``K`` groups).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    "group_summary": lambda d: D.group_summary(d["p"], d["y"], d["g"], n_groups=K),
    "mse": lambda d: M.mse(d["p"], d["y"]),
    "accuracy": lambda d: M.accuracy(d["p"], d["y"], threshold=0.05),
    "acc_diff": lambda d: M.acc_diff(d["p"], d["pi"], d["y"]),
    "auc_diff": lambda d: M.auc_diff(d["p"], d["pi"], d["y"]),
    "bias": lambda d: M.bias(d["p"], d["y"]),
    "calibration_ratio": lambda d: M.calibration_ratio(d["p"], d["y"]),
    "calibration_ratio_by_group": lambda d: M.calibration_ratio_by_group(d["p"], d["y"], d["g"], n_groups=K),
    "normalized_entropy": lambda d: M.normalized_entropy(d["p"], d["y"]),
    "normalized_entropy_by_group": lambda d: M.normalized_entropy_by_group(d["p"], d["y"], d["g"], n_groups=K),
    "fit_logit_bias": lambda d: M.fit_logit_bias(d["o"], d["y"]),
    "gap_norm": lambda d: M.gap_norm(_group_stats(d["p"], d["y"], d["g"]), norm="l1"),
    "gauc": lambda d: M.gauc(d["p"], d["y"], d["u"]),
    "smooth_ece": lambda d: M.smooth_ece(d["p"], d["y"]),
    "cce_kuiper": lambda d: M.cumulative_calibration_error(d["p"], d["y"]),
    "cce_ks_sigma": lambda d: M.cumulative_calibration_error(d["p"], d["y"], statistic="ks", normalize=True),
    "debiased_ece_sq": lambda d: M.debiased_ece_sq(d["p"], d["y"]),
    "ece_sweep": lambda d: M.ece_sweep(d["p"], d["y"]),
    "ici": lambda d: M.ici(d["p"], d["y"]),
    "multicalibration_error": lambda d: M.multicalibration_error(d["p"], d["y"], d["g"][:, None], n_levels=K),
    "skce_block": lambda d: M.skce(d["p"], d["y"], estimator="block", block_size=64),
    "oracle_mae": lambda d: M.oracle_mae(d["p"], d["pi"]),
    "oracle_chebyshev": lambda d: M.oracle_chebyshev(d["p"], d["pi"]),
    "pearson": lambda d: M.pearson(d["p"], d["pi"]),
}
#: public metric and decomposition calls that CALLS leaves out, with the reason
#: (``tests/test_public_lists.py`` fails with the names of any other public call it misses)
NOT_CALLED: dict[str, str] = {}


def _group_stats(p: Any, y: Any, g: Any) -> Any:
    import calib_jax.groupstats as G

    return G.group_stats(p, y, g, n_groups=K)



# --------------------------------------------------------------------------- the rest of the
# public surface: partitions, group statistics, calibrators' fit + predict, the Monte Carlo
# panel.  ``LIBRARY_CALLS[name] = (call, jit_able, repeats)``: ``jit_able`` says whether
# ``jax.jit`` of the call is defined (isotonic, top-N, Neural Calibration and SAG fit on the
# host; the benchmark times their eager call alone), and ``repeats`` is how many eager calls
# the compile-once test makes (fewer for the trained heads, 50-500 ms a fit).  A call made of
# two public calls carries ``call.jitted``, the two jitted one by one, as its comparator.

_HIST_BINS = 256
_THRESHOLDS = np.array([-4.0, -3.0, -2.0], np.float32)


def _fit_predict(name: str, **hyper) -> Callable[[dict], Any]:
    from calib_jax import calibrators as C

    cal = C.get(name)
    hyper = {**cal.defaults, **hyper}

    def call(d: dict) -> Any:
        context = {"embedding": d["e"], "fields": d["f"], "ranks": d["r"]}
        params = cal.fit(d["o"], d["y"], key=d["k"], context=context, **hyper)
        return cal.predict(params, d["o"], context=context)

    fit = jax.jit(lambda o, y, k, context: cal.fit(o, y, key=k, context=context, **hyper))
    predict = jax.jit(lambda params, o, context: cal.predict(params, o, context=context))

    def jitted(d: dict) -> Any:  # the two public calls, each jitted on its own
        context = {"embedding": d["e"], "fields": d["f"], "ranks": d["r"]}
        return predict(fit(d["o"], d["y"], d["k"], context), d["o"], context)

    call.jitted = jitted  # type: ignore[attr-defined]
    return call


def make_library_data(rng: np.random.Generator, key: jax.Array, i: int, n: int = N) -> dict:
    """:func:`make_data` plus a calibrator's context: embedding (n, 4), fields (n, 2), ranks."""
    d = make_data(rng, key, i, n)
    d["e"] = rng.normal(size=(n, 4)).astype(np.float32)
    d["f"] = rng.integers(0, K, (n, 2)).astype(np.int32)
    d["r"] = rng.integers(1, 30, n).astype(np.int32)
    return d


def _panel_call() -> Callable[[dict], Any]:
    from calib_jax import montecarlo as mc

    panel = mc.metric_panel()

    def call(d: dict) -> Any:
        data = mc.variants.TrialData(d["o"], d["p"], d["y"], d["pi"], d["f"], d["g"], None)  # type: ignore[arg-type]  # the panel reads no variant
        return mc.evaluate(data, d["k"], panel)

    return call


def _kmeans_hist_call() -> Callable[[dict], Any]:
    import calib_jax.partitions as P

    def call(d: dict) -> Any:
        return P.kmeans_hist(P.histogram_1d(d["o"], n_bins=_HIST_BINS), n_clusters=4, key=d["k"])

    hist = jax.jit(lambda o: P.histogram_1d(o, n_bins=_HIST_BINS))
    kmeans = jax.jit(lambda h, k: P.kmeans_hist(h, n_clusters=4, key=k))
    call.jitted = lambda d: kmeans(hist(d["o"]), d["k"])  # type: ignore[attr-defined]
    return call


def _summarize_call() -> Callable[[dict], Any]:
    import calib_jax.groupstats as G

    def call(d: dict) -> Any:
        return G.summarize(G.group_stats(d["p"], d["y"], d["g"], n_groups=K))

    stats = jax.jit(lambda p, y, g: G.group_stats(p, y, g, n_groups=K))
    summarize = jax.jit(G.summarize)
    call.jitted = lambda d: summarize(stats(d["p"], d["y"], d["g"]))  # type: ignore[attr-defined]
    return call


def _library_calls() -> dict[str, tuple[Callable[[dict], Any], bool, int]]:
    import calib_jax.groupstats as G
    import calib_jax.partitions as P

    calls: dict[str, tuple[Callable[[dict], Any], bool, int]] = {
        "uniform_bins": (lambda d: P.uniform_bins(d["p"], n_bins=15), True, 200),
        "quantile_bins": (lambda d: P.quantile_bins(d["p"], n_bins=15), True, 200),
        "histogram_1d": (lambda d: P.histogram_1d(d["o"], n_bins=_HIST_BINS), True, 200),
        "kmeans_hist": (_kmeans_hist_call(), True, 200),
        "kmeans_1d_random": (lambda d: P.kmeans_1d(d["o"], n_clusters=4, key=d["k"]), True, 200),
        "kmeans_1d_quantile": (lambda d: P.kmeans_1d(d["o"], n_clusters=4, init="quantile"), True, 200),
        "kmeans_1d_optimal": (lambda d: P.kmeans_1d(d["o"], n_clusters=4, init="optimal"), True, 200),
        "assign_1d": (lambda d: P.assign_1d(d["o"], _THRESHOLDS), True, 200),  # type: ignore[arg-type]  # NumPy, as users pass
        "random_groups": (lambda d: P.random_groups(d["k"], d["o"].shape[0], n_groups=K), True, 200),
        "group_stats": (lambda d: G.group_stats(d["p"], d["y"], d["g"], n_groups=K), True, 200),
        "summarize": (_summarize_call(), True, 200),
        "montecarlo_evaluate": (_panel_call(), True, 50),
    }
    for name, jit_able, repeats in (
            ("temperature", True, 200), ("platt", True, 200), ("beta", True, 200),
            ("histogram_binning", True, 200), ("isotonic", False, 200), ("ilps", True, 50),
            ("neural_calibration", False, 5), ("sag_ts", False, 3), ("vrsag_ps", False, 3),
            ("top_n", False, 50)):
        hyper = {"n_steps": 20} if name.startswith(("sag", "vrsag")) else {}
        calls[f"{name}.fit+predict"] = (_fit_predict(name, **hyper), jit_able, repeats)
    return calls


LIBRARY_CALLS = _library_calls()
