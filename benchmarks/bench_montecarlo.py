"""Benchmark: the Fig 3 metric panel per Monte Carlo trial, calib_jax vs NumPy/scipy/sklearn.

* calib_jax: the whole panel (``calib_jax.montecarlo.metric_panel()``) jitted and vmapped
  over a chunk of trials (compile time reported separately);
* reference: a straightforward per-trial Python loop over NumPy / scipy / scikit-learn /
  ckmeans implementations of the same panel (sklearn ``KMeans`` for the restart-averaged
  LCCE, ``ckmeans`` for the optimal one, ``roc_auc_score``, ``scipy.stats.spearmanr``,
  ``scipy.optimize.brentq`` for the calibrated-log-loss bias, ``np.bincount`` for all
  group statistics).

The engine is timed as a study runs it, with every CPU core as a host device
(``experiments._study.use_every_cpu_core``); the panel comparison runs on one device.
Both sides see the same trial data (drawn once by ``calib_jax.montecarlo.sample_trial_data``;
data generation is not timed here).  Then the end-to-end engine (data + panel) is timed
at n = 10^5 to estimate the paper-scale Fig 3 study (5000 trials), and peak RSS is
measured in fresh subprocesses as the number of trials grows (chunking bounds it).

    python -m benchmarks.bench_montecarlo [--n 100000] [--trials 16] [--ref-trials 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import io as cio
from calib_jax import montecarlo as mc

OUT = Path(__file__).resolve().parent / "results"


# ------------------------------------------------------------------ NumPy reference panel
def _gaps(ids, p, y, K, norm):
    cnt = np.bincount(ids, minlength=K).astype(float)
    sp = np.bincount(ids, weights=p, minlength=K)
    sy = np.bincount(ids, weights=y, minlength=K)
    ok = cnt > 0
    gap = np.zeros(K)
    gap[ok] = sp[ok] / cnt[ok] - sy[ok] / cnt[ok]
    w = cnt / cnt.sum()
    if norm == "l2":
        return float(np.sum(w * gap**2))
    if norm == "l1":
        return float(np.sum(w * np.abs(gap)))
    return float(np.max(np.abs(gap[ok])))


def _kmeans_gce(o, p, y, labels_):
    K = int(labels_.max()) + 1
    return _gaps(labels_, p, y, K, "l2")


def numpy_panel(o, y, pi, field, rng, n_levels, n_bins=15):
    """The Fig 3 panel computed with NumPy / scipy / scikit-learn (one trial)."""
    import ckmeans
    from scipy.optimize import brentq
    from scipy.special import expit, log_expit
    from scipy.stats import spearmanr
    from sklearn.cluster import KMeans
    from sklearn.metrics import roc_auc_score

    p = expit(o)
    out = {}
    out["brier"] = np.mean((y - p) ** 2)
    out["nll"] = -np.mean(y * log_expit(o) + (1 - y) * log_expit(-o))
    out["mae"] = np.mean(np.abs(y - p))
    ub = np.minimum((p * n_bins).astype(int), n_bins - 1)
    out["ece"] = _gaps(ub, p, y, n_bins, "l1")
    srt = np.sort(p)
    thr = srt[(np.arange(1, n_bins) * len(p)) // n_bins]
    qb = np.searchsorted(thr, p, side="right")
    out["ece_plus"] = _gaps(qb, p, y, n_bins, "l1")
    out["mce"] = _gaps(ub, p, y, n_bins, "max")
    out["gce_field"] = _gaps(field, p, y, n_levels, "l2")
    X = o[:, None]
    out["lcce"] = np.mean([_kmeans_gce(o, p, y, KMeans(4, n_init=1, random_state=int(
        rng.integers(1 << 30))).fit(X).labels_) for _ in range(4)])
    init = np.quantile(o, (np.arange(4) + 0.5) / 4)[:, None]
    km = KMeans(4, init=init, n_init=1).fit(X)
    out["lcce_quantile"] = _kmeans_gce(o, p, y, km.labels_)
    cl = ckmeans.ckmeans(o, 4)
    cuts = np.array([c[0] for c in cl[1:]])
    out["lcce_optimal"] = _gaps(np.searchsorted(cuts, o, side="right"), p, y, len(cl), "l2")
    out["lcce_random"] = _gaps(rng.integers(0, 4, len(o)), p, y, 4, "l1")
    out["field_ece"] = _gaps(field, p, y, n_levels, "l1")
    cnt = np.bincount(field, minlength=n_levels).astype(float)
    sy = np.bincount(field, weights=y, minlength=n_levels)
    sp = np.bincount(field, weights=p, minlength=n_levels)
    out["field_rce"] = np.sum(cnt * np.abs(sy - sp) / (sy + 0.01 * cnt + 1e-300)) / cnt.sum()
    out["abs_global_bias"] = abs(p.mean() / y.mean() - 1)
    ok = sy > 0
    out["abs_bias"] = np.sum(cnt[ok] * np.abs(sp[ok] / sy[ok] - 1)) / cnt[ok].sum()
    out["one_minus_auc"] = 1 - roc_auc_score(y, p)
    val = rng.random(len(o)) < 0.5
    c = brentq(lambda c: np.sum(expit(o[val] + c)) - np.sum(y[val]), -30, 30)
    oc = o[~val] + c
    out["calibrated_log_loss"] = -np.mean(y[~val] * log_expit(oc) + (1 - y[~val]) * log_expit(-oc))
    out["oracle_brier"] = np.mean((pi - p) ** 2)
    out["oracle_mae"] = np.mean(np.abs(pi - p))
    pc = np.clip(p, 1e-7, 1 - 1e-7)
    out["oracle_kl"] = np.mean(pi * np.log(pi / pc) + (1 - pi) * np.log((1 - pi) / (1 - pc)))
    out["oracle_alpha"] = np.mean((np.sqrt(pi * pc) + np.sqrt((1 - pi) * (1 - pc)) - 1) / -0.25)
    out["oracle_chebyshev"] = np.max(np.abs(pi - p))
    out["one_minus_pearson"] = 1 - np.corrcoef(pi, p)[0, 1]
    out["one_minus_spearman"] = 1 - spearmanr(pi, p).statistic
    return out


# ----------------------------------------------------------------------------- helpers
def _peak_rss_child(n: int, n_trials: int, chunk: int) -> float:
    code = (
        "import resource, jax; from calib_jax import montecarlo as mc;"
        f"t = mc.make_trial({n});"
        f"mc.run_trials(t, jax.random.key(0), {n_trials}, chunk_size={chunk}, progress=False);"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    env = dict(os.environ)
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path.home() / ".cache" / "calib_jax" / "xla"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       check=True, cwd=Path(__file__).resolve().parents[1])
    return float(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="rows per trial")
    ap.add_argument("--trials", type=int, default=16, help="trials per calib_jax chunk")
    ap.add_argument("--ref-trials", type=int, default=3, help="trials of the NumPy loop")
    ap.add_argument("--mem-n", type=int, default=10_000, help="rows per trial, memory probe")
    ap.add_argument("--mem-trials", default="32,128,512", help="trial counts, memory probe")
    ap.add_argument("--no-mem", action="store_true")
    args = ap.parse_args([] if argv is None else argv)
    from experiments._study import use_every_cpu_core

    use_every_cpu_core()  # the engine runs as in a study: one host device per core
    jax.config.update("jax_compilation_cache_dir",
                      str(Path.home() / ".cache" / "calib_jax" / "xla"))
    n, T = args.n, args.trials
    res: dict = {"n": n, "trials_per_chunk": T, "devices": [str(d) for d in jax.devices()]}

    keys = mc.trial_keys(jax.random.key(0), jnp.arange(T))
    data = jax.jit(jax.vmap(lambda k: mc.sample_trial_data(k, n)))(keys)
    jax.block_until_ready(data)
    panel = mc.metric_panel()
    names = list(panel)
    f = jax.jit(jax.vmap(lambda d, k: mc.evaluate(d, k, panel)))
    t0 = time.perf_counter()
    vals = jax.block_until_ready(f(data, keys))
    res["jax_compile_plus_first_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    vals = jax.block_until_ready(f(data, keys))
    res["jax_panel_s_per_trial"] = (time.perf_counter() - t0) / T

    rng = np.random.default_rng(0)
    ref_times, ref_vals = [], []
    n_levels = mc.PanelConfig().n_levels
    for t in range(min(args.ref_trials, T)):
        o = np.asarray(data.logits[t], np.float64)
        y = np.asarray(data.labels[t], np.float64)
        pi = np.asarray(data.oracle[t], np.float64)
        fld = np.asarray(data.fields[t, :, 0])
        t0 = time.perf_counter()
        ref_vals.append(numpy_panel(o, y, pi, fld, rng, n_levels))
        ref_times.append(time.perf_counter() - t0)
    res["numpy_panel_s_per_trial"] = float(np.mean(ref_times))
    res["speedup"] = res["numpy_panel_s_per_trial"] / res["jax_panel_s_per_trial"]
    # agreement of the deterministic columns (sanity: the two panels compute the same thing)
    det = ["brier", "nll", "mae", "ece", "ece_plus", "mce", "gce_field", "field_ece",
           "field_rce", "abs_global_bias", "abs_bias", "one_minus_auc", "oracle_brier",
           "oracle_mae", "oracle_kl", "oracle_alpha", "oracle_chebyshev", "one_minus_pearson",
           "one_minus_spearman", "lcce_optimal"]
    jv = np.asarray(vals[0])
    res["max_rel_diff_deterministic_columns"] = {
        m: float(abs(jv[names.index(m)] - ref_vals[0][m]) / max(abs(ref_vals[0][m]), 1e-12))
        for m in det}

    # end-to-end engine (data + panel) at this n -> paper-scale estimate
    trial = mc.make_trial(n)
    mc.run_trials(trial, jax.random.key(1), T, chunk_size=T, progress=False)  # compile
    t0 = time.perf_counter()
    mc.run_trials(trial, jax.random.key(2), 2 * T, chunk_size=T, progress=False)
    per = (time.perf_counter() - t0) / (2 * T)
    res["engine_s_per_trial"] = per
    res["paper_fig3_estimate_s"] = per * 5000

    if not args.no_mem:
        res["peak_rss_mb"] = {}
        for nt in [int(x) for x in args.mem_trials.split(",")]:
            res["peak_rss_mb"][nt] = _peak_rss_child(args.mem_n, nt, 32)
        res["peak_rss_n"] = args.mem_n

    OUT.mkdir(parents=True, exist_ok=True)
    rows = [
        ["calib_jax panel, jit+vmap (s/trial)", res["jax_panel_s_per_trial"]],
        ["NumPy/scipy/sklearn loop (s/trial)", res["numpy_panel_s_per_trial"]],
        ["speed-up", res["speedup"]],
        ["calib_jax compile + first chunk (s)", res["jax_compile_plus_first_s"]],
        ["engine incl. data generation (s/trial)", res["engine_s_per_trial"]],
        ["paper Fig 3 estimate, 5000 trials (s)", res["paper_fig3_estimate_s"]],
    ]
    for nt, mb in res.get("peak_rss_mb", {}).items():
        rows.append([f"peak RSS, {nt} trials x n={args.mem_n} (MB)", mb])
    cio.write_table(OUT / "bench_montecarlo", ["quantity", f"value (n = {n})"], rows)
    cio.write_json(OUT / "bench_montecarlo.json", res)
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
