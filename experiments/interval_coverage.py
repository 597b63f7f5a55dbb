"""Do the intervals of a calibration report cover the truth? Coverage of ECE, LCCE and a
reliability bin with few clicks, and the false-positive rates of the calibration tests.

Beyond the papers: what a practitioner needs before trusting an interval printed
beside a biased plug-in metric. Every simulated log has ``n_rows`` impressions with scores
:math:`p = \\sigma(z)`, :math:`z \\sim N(-1.5, 1)`; outcomes are drawn from the true rate
:math:`\\pi = \\sigma(0.8 z - 0.2)` (a model that is over-confident and slightly biased, in
the miscalibrated world) or from :math:`\\pi = p` (the calibrated world, for the tests).

The estimands are the population errors *on the partition the metric used*: ECE on 15
equal-width probability bins, LCCE on the 4 logit clusters of quantile-initialised k-means
fitted once on the log; each group's true gap is the mean of :math:`p - \\pi` over its rows.
The reliability bin is the lowest of 50 equal-mass bins (80 rows, about 4 clicks) and its
estimand the mean :math:`\\pi` of its rows. Row bootstrap (multinomial, ``n_boot``
resamples, partition fixed); intervals at 95%:

* ``percentile`` — the percentile interval of the plug-in (what ``evaluate`` reported
  before: it excluded its own estimate on small logs);
* ``basic`` — :math:`[2\\hat\\theta - q_{.975}, 2\\hat\\theta - q_{.025}]`;
* ``bias-corrected`` — :func:`calib_jax.bootstrap.debiased_gap` with
  :func:`calib_jax.bootstrap.bias_corrected_interval` (what ``evaluate`` reports now);
* the bin: the bootstrap percentile band against Clopper–Pearson and Jeffreys
  (:func:`calib_jax.inference.binomial_interval`).

The tests (:mod:`calib_jax.inference`) are run on calibrated logs (size at 5%) and on the
miscalibrated world (power).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import bootstrap as bs
from calib_jax import inference as T
from calib_jax.partitions import assign_1d, kmeans_1d
from experiments._study import Output, entry_point

STUDY = "interval_coverage"
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {"n_logs": 10, "n_rows": 4000, "n_boot": 50, "n_test_logs": 20, "corp_logs": 1, "seed": 0},
    "quick": {"n_logs": 500, "n_rows": 4000, "n_boot": 200, "n_test_logs": 2000, "corp_logs": 200, "seed": 0},
    "paper": {"n_logs": 2000, "n_rows": 4000, "n_boot": 500, "n_test_logs": 4000, "corp_logs": 500, "seed": 0},
}
LEVEL = 0.95
N_ECE_BINS, N_CLUSTERS, N_RELI_BINS = 15, 4, 50


def simulate(rng: np.random.Generator, n: int, calibrated: bool) -> tuple[np.ndarray, ...]:
    """One log: logits z, scores p, true rates pi and labels y (float32 scores, as models give)."""
    z = rng.normal(-1.5, 1.0, n)
    p = 1.0 / (1.0 + np.exp(-z))
    pi = p if calibrated else 1.0 / (1.0 + np.exp(-(0.8 * z - 0.2)))
    y = (rng.random(n) < pi).astype(np.float64)
    return z.astype(np.float32), p.astype(np.float32).astype(np.float64), pi, y


def _sums(counts: np.ndarray, ids: np.ndarray, k: int, p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Group sums (B, k) of weight, p and y for resample counts (B, n)."""
    onehot = np.eye(k)[ids]
    return counts @ onehot, counts @ (onehot * p[:, None]), counts @ (onehot * y[:, None])


def _plug(w, sp, sy, norm):
    m = w / w.sum(-1, keepdims=True)
    g = np.where(w > 0, (sp - sy) / np.where(w > 0, w, 1), 0)
    return np.sum(m * (np.abs(g) if norm == "l1" else g * g), -1)


def one_log(rng: np.random.Generator, key: jax.Array, n: int, n_boot: int) -> dict[str, Any]:
    z, p, pi, y = simulate(rng, n, calibrated=False)
    counts = np.asarray(bs.resample_counts(key, n, n_boot), np.float64)
    ones = np.ones((1, n))
    out: dict[str, Any] = {}
    km = kmeans_1d(jnp.asarray(z), n_clusters=N_CLUSTERS, init="quantile")
    parts = {"ece": (np.minimum((p * N_ECE_BINS).astype(int), N_ECE_BINS - 1), N_ECE_BINS, "l1"),
             "lcce": (np.asarray(assign_1d(jnp.asarray(z), km.thresholds)), N_CLUSTERS, "l2")}
    for name, (ids, k, norm) in parts.items():
        w, sp, sy = _sums(ones, ids, k, p, y)
        wb, spb, syb = _sums(counts, ids, k, p, y)
        gap = np.bincount(ids, p - pi, k)
        truth = (np.sum(np.abs(gap)) / n if norm == "l1" else
                 float(np.sum(gap ** 2 / np.maximum(np.bincount(ids, minlength=k), 1))) / n)
        plug = float(_plug(w, sp, sy, norm)[0])
        reps = _plug(wb, spb, syb, norm)
        bc = float(bs.debiased_gap(w, sp, sy, norm)[0])
        bc_reps = np.asarray(bs.debiased_gap(wb, spb, syb, norm))
        q_lo, q_hi = np.quantile(reps, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
        lo, hi = bs.bias_corrected_interval(plug, bc, bc_reps, level=LEVEL)
        out[name] = {"truth": truth, "plug": plug, "bc": max(bc, 0.0),
                     "percentile": (q_lo, q_hi), "basic": (max(2 * plug - q_hi, 0), max(2 * plug - q_lo, 0)),
                     "bias-corrected": (float(lo), float(hi))}
    # the reliability bin with few events: the lowest of 50 equal-mass bins
    order = np.argsort(p, kind="stable")
    rows = order[: n // N_RELI_BINS]
    k_, n_ = float(y[rows].sum()), float(len(rows))
    boot = counts[:, rows]
    rates = np.where(boot.sum(1) > 0, (boot @ y[rows]) / np.maximum(boot.sum(1), 1), np.nan)
    cp = T.binomial_interval(k_, n_)
    jf = T.binomial_interval(k_, n_, method="jeffreys")
    out["bin"] = {"truth": float(pi[rows].mean()), "plug": k_ / n_, "clicks": k_,
                  "percentile": tuple(np.nanquantile(rates, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])),
                  "clopper-pearson": (float(cp.lo), float(cp.hi)), "jeffreys": (float(jf.lo), float(jf.hi))}
    return out


def coverage(logs: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for quantity in ("ece", "lcce", "bin"):
        methods = [m for m in logs[0][quantity] if isinstance(logs[0][quantity][m], tuple)]
        truth = np.array([g[quantity]["truth"] for g in logs])
        est_key = "bc" if quantity != "bin" else "plug"
        for m in methods:
            lo = np.array([g[quantity][m][0] for g in logs])
            hi = np.array([g[quantity][m][1] for g in logs])
            est = np.array([g[quantity]["plug" if m in ("percentile", "basic") or quantity == "bin" else est_key]
                            for g in logs])
            cov = float(np.mean((lo <= truth) & (truth <= hi)))
            se = float(np.sqrt(cov * (1 - cov) / len(logs)))
            rows.append([quantity, m, len(logs), cov, se, float(np.mean(hi - lo)),
                         float(np.mean((est < lo) | (est > hi))), float(np.mean(truth)), float(np.mean(est))])
    return rows


def _tests(rng: np.random.Generator, n_logs: int, corp_logs: int, n: int, calibrated: bool) -> dict[str, float]:
    rej: dict[str, list[bool]] = {"spiegelhalter": [], "hosmer_lemeshow (ddof 0)": [],
                                  "hosmer_lemeshow (ddof 2)": [], "cox": [], "corp": []}
    for i in range(n_logs):
        _, p, _, y = simulate(rng, n, calibrated)
        rej["spiegelhalter"].append(float(T.spiegelhalter_z(p, y).p_value) < 0.05)
        rej["hosmer_lemeshow (ddof 0)"].append(float(T.hosmer_lemeshow(p, y).p_value) < 0.05)
        rej["hosmer_lemeshow (ddof 2)"].append(float(T.hosmer_lemeshow(p, y, ddof=2).p_value) < 0.05)
        rej["cox"].append(float(T.cox_calibration(p, y).p_value) < 0.05)
        if i < corp_logs:
            rej["corp"].append(float(T.corp_test(p, y, key=jax.random.key(i), n_resamples=199).p_value) < 0.05)
    return {k: float(np.mean(v)) for k, v in rej.items()} | {"n_logs": n_logs, "corp_logs": corp_logs}


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    rng = np.random.default_rng(config["seed"])
    key = jax.random.key(config["seed"])
    t0 = time.perf_counter()
    logs = [one_log(rng, jax.random.fold_in(key, i), config["n_rows"], config["n_boot"])
            for i in range(config["n_logs"])]
    t1 = time.perf_counter()
    cov = coverage(logs)
    header = ["quantity", "method", "logs", "coverage", "coverage_se", "mean_width", "share_excluding_estimate",
              "mean_truth", "mean_estimate"]
    out.table("coverage", header, cov, digits=4)
    size = _tests(rng, config["n_test_logs"], config["corp_logs"], config["n_rows"], calibrated=True)
    power = _tests(rng, min(config["n_test_logs"], 200), min(config["corp_logs"], 50), config["n_rows"],
                   calibrated=False)
    names = [k for k in size if k not in ("n_logs", "corp_logs")]
    out.table("tests", ["test", "size_at_5pct", "size_logs", "power", "power_logs"],
              [[k, size[k], size["corp_logs"] if k == "corp" else size["n_logs"], power[k],
                power["corp_logs"] if k == "corp" else power["n_logs"]] for k in names], digits=4)
    out.record["phase_seconds"] = {"coverage": t1 - t0, "tests": time.perf_counter() - t1}
    return {"coverage": {f"{r[0]}:{r[1]}": {"coverage": r[3], "se": r[4], "excludes_estimate": r[6]}
                         for r in cov},
            "size": size, "power": power}


def report(summary: Mapping[str, Any]) -> str:
    c = summary["coverage"]
    return ("coverage at 95%: " + ", ".join(f"{k} {v['coverage']:.3f}" for k, v in c.items())
            + "; size at 5%: " + ", ".join(f"{k} {v:.3f}" for k, v in summary["size"].items()
                                           if k not in ("n_logs", "corp_logs")))


main = entry_point(__name__)

if __name__ == "__main__":
    main()
