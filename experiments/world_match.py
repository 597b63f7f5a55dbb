"""The matched AdAuction-like world: a pilot that picks the simulator settings whose
baseline calibrators reproduce "Calibration is Grouping" Table 1's AdAuction column, before
any grouping method runs on them.

Why: the first AdAuction-like world (``experiments._datasets.ADAUCTION``) matched the
Uncal row only. Its miscalibration is the auction's selection bias, a level shift that one
temperature cannot remove, so temperature scaling left ECE at 0.023 where the paper's
leaves 0.006, and every ordering with TS sat in a regime the paper's data does not have.
The paper's TS and Platt rows are equal to 4 decimals (ECE 0.0062 and 0.0063), which says
its production score is off mainly in *scale*. The simulator's ``prod_logit_scale``
(:class:`calib_jax.data.simulator.SimulatorConfig`) adds exactly that: the production logit
is multiplied by s_p < 1 after its intercept is set, so at a 3% CTR the score
over-estimates about 1/s_p-fold and one temperature (T = s_p) undoes it.

Protocol (no grouping method is fitted here):

* every candidate in :data:`CANDIDATES` simulates a pilot log of ``n_chunks`` chunks with
  seed ``pilot_seed`` (the studies use seed 0: the pilot never sees their world's draw);
* on each of ``n_splits`` random splits, a "standard test set" of ``pool_frac`` of the log
  is drawn, 10% of it is D_ho (as in the tables), and the five baselines without groups
  (Uncal, histogram binning, isotonic, Platt, temperature) are fitted on D_ho and
  evaluated on the rest with ECE (15 equal-width bins, eq. 2), LCCE on the ECE scale
  (l1, K = 10 logit clusters, 4 restarts, eq. 12), Brier+ = E|pi - p| and RMSE
  = sqrt(E(pi - p)^2) against the oracle CTR, and AUC, plus the log's CTR;
* each value is compared with its target in :data:`TARGETS` (Table 1's AdAuction column,
  Table 5's Uncal AUC, Table 7's CTR) within the stated tolerance; a candidate's score is
  the number of targets missed, then the mean of |deviation| / tolerance; the lowest is chosen.

Table 1's printed "Brier" column is read as an RMSE: as printed it exceeds Brier+ on every
row, which a mean squared error of probabilities cannot (``experiments.printed_tables``).

Not targets, and why: the calibrated baselines' ECE and LCCE. The paper prints 0.0049-0.0063
(ECE) and 0.0090-0.0124 (LCCE) for every global calibrator, which on its test-set size is
far above the binned estimators' label-noise floor. With random D_ho / test splits of one
log, as the tables use, a monotone calibrator fitted on D_ho leaves ECE at that floor
(about 0.0015 on 210k evaluation rows) whatever the world's miscalibration; no simulator
setting moves it, so these cells are reported and not matched. The candidates were found by
hand on a pilot log of seed 0 (2026-11-27); this study reruns all of them on ``pilot_seed``
and chooses by the rule above.

Outputs in ``figures/world_match[_paper]/``: ``pilot`` (every candidate x baseline x
metric), ``targets`` (the chosen candidate against every target, with its tolerance and
whether it is met), ``candidates`` (settings and scores), ``results.json``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import metrics as M
from calib_jax.calibrators import REGISTRY
from calib_jax.data import simulator as simm
from experiments import printed_tables as printed
from experiments._datasets import production_logit
from experiments._study import Output, entry_point

STUDY = "world_match"

#: candidate simulator settings (keyword overrides of the simulator config); "adauction" is
#: the first AdAuction-like world, kept for comparison
CANDIDATES: dict[str, dict[str, Any]] = {
    "adauction": {"ad_error_std": 1.3, "prod_regime_shift": (0.5, 0.0, -0.5), "noise_std": 0.1,
                  "intercept": -4.95},
    "scale_0.8": {"prod_logit_scale": 0.8},
    "scale_0.75_low_error": {"prod_logit_scale": 0.75, "ad_error_std": 0.3, "noise_std": 0.1},
    "a": {"prod_logit_scale": 0.75, "ad_error_std": 0.3, "noise_std": 0.1, "prod_regime_shift": (0.4, 0.0, -0.4),
          "ad_quality_std": 0.9, "user_std": 0.6, "intercept": -5.4},
    "b": {"prod_logit_scale": 0.75, "ad_error_std": 0.4, "noise_std": 0.1, "prod_regime_shift": (0.4, 0.0, -0.4),
          "ad_quality_std": 0.9, "user_std": 0.6, "intercept": -5.75},
    "c": {"prod_logit_scale": 0.75, "ad_error_std": 0.5, "noise_std": 0.15, "prod_regime_shift": (0.4, 0.0, -0.4),
          "ad_quality_std": 1.0, "user_std": 0.6, "intercept": -5.8},
    "d": {"prod_logit_scale": 0.72, "ad_error_std": 0.4, "noise_std": 0.1, "prod_regime_shift": (0.6, 0.0, -0.6),
          "ad_quality_std": 1.0, "user_std": 0.7, "intercept": -5.9},
    "e": {"prod_logit_scale": 0.75, "ad_error_std": 0.3, "noise_std": 0.2, "prod_regime_shift": (0.5, 0.0, -0.5),
          "ad_quality_std": 1.0, "user_std": 0.6, "interaction_scale": 1.0, "intercept": -5.8},
    "f": {"prod_logit_scale": 0.72, "ad_error_std": 0.4, "noise_std": 0.1, "prod_regime_shift": (0.9, 0.0, -0.9),
          "ad_quality_std": 1.0, "user_std": 0.7, "intercept": -5.9},
    "g": {"prod_logit_scale": 0.72, "ad_error_std": 0.5, "noise_std": 0.2, "prod_regime_shift": (0.8, 0.0, -0.8),
          "ad_quality_std": 1.1, "user_std": 0.7, "intercept": -6.0},
    "h": {"prod_logit_scale": 0.7, "ad_error_std": 0.45, "noise_std": 0.1, "prod_regime_shift": (1.0, 0.0, -1.0),
          "ad_quality_std": 1.1, "user_std": 0.8, "intercept": -6.1},
}

BASELINES = (("Uncal", None), ("Histogram binning", "histogram_binning"), ("Isotonic regression", "isotonic"),
             ("Platt scaling", "platt"), ("Temperature scaling", "temperature"))
METRICS = ("ECE", "LCCE-l1", "Brier+", "RMSE", "AUC")

_GLOBAL = ("Histogram binning", "Isotonic regression", "Platt scaling", "Temperature scaling")
#: (method, metric) -> (paper value, tolerance, "rel" | "abs"): Table 1's AdAuction column
#: (``experiments.printed_tables.TABLE1``: ECE, LCCE, Brier+, Brier read as RMSE), Table 5's
#: Uncal AUC on AdAuction, Table 7's CTR (451K clicks / 15M exposures)
TARGETS: dict[tuple[str, str], tuple[float, float, str]] = {
    ("log", "CTR"): (printed.ADAUCTION_CLICKS / printed.ADAUCTION_EXPOSURES, 0.10, "rel"),
    **{("Uncal", k): (v, 0.10, "rel") for k, v in zip(("ECE", "LCCE-l1", "Brier+", "RMSE"), printed.TABLE1["Uncal"],
                                                        strict=True)},
    ("Uncal", "AUC"): (printed.TABLE5["Uncal"][0][1], 0.01, "abs"),
    **{(m, k): (printed.TABLE1[m][i], 0.30, "rel") for m in _GLOBAL for i, k in ((2, "Brier+"), (3, "RMSE"))},
    # temperature scaling removes most of the miscalibration: its ECE is within 0.005 of Platt's
    # (the paper: 0.0062 vs 0.0063)
    ("TS - Platt", "ECE"): (printed.TABLE1["Temperature scaling"][0] - printed.TABLE1["Platt scaling"][0], 0.005,
                            "abs"),
}
#: reported beside the pilot, not matched (see the module docstring): the printed ECE and LCCE
UNMATCHED: dict[tuple[str, str], float] = {
    (m, k): printed.TABLE1[m][i] for m in _GLOBAL for i, k in enumerate(("ECE", "LCCE-l1"))}

PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {"sim": "tiny", "n_chunks": 1, "candidates": ["c"], "n_splits": 1,
              "pool_frac": 0.6, "pilot_seed": 1, "lcce_restarts": 1},
    "quick": {"sim": "default", "n_chunks": 4, "candidates": list(CANDIDATES), "n_splits": 3,
              "pool_frac": 0.6, "pilot_seed": 1, "lcce_restarts": 4},
    "paper": {"sim": "default", "n_chunks": 12, "candidates": list(CANDIDATES), "n_splits": 5,
              "pool_frac": 0.6, "pilot_seed": 1, "lcce_restarts": 4},
}


def _sim_config(scale: str, n_chunks: int, settings: Mapping[str, Any]) -> simm.SimulatorConfig:
    make = {"tiny": simm.tiny_config, "default": simm.default_config}[scale]
    return make(n_chunks=n_chunks, **{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})


def baseline_values(logits: np.ndarray, labels: np.ndarray, oracle: np.ndarray, *, n_splits: int,
                    pool_frac: float, key: jax.Array, lcce_restarts: int) -> dict[str, dict[str, float]]:
    """Mean over ``n_splits`` splits of every metric of every baseline in :data:`BASELINES`:
    each split draws a standard test set of ``pool_frac`` of the rows, fits on its first 10%
    (D_ho) and evaluates on the rest."""
    n = len(labels)
    size = int(pool_frac * n)
    n_ho = int(round(0.1 * size))
    acc: dict[str, dict[str, list[float]]] = {}
    for s in range(n_splits):
        k_split, k_fit, k_lcce = jax.random.split(jax.random.fold_in(key, s), 3)
        rows = np.asarray(jax.random.permutation(k_split, n))[:size]
        ho, ev = np.sort(rows[:n_ho]), np.sort(rows[n_ho:])
        y, pi = jnp.asarray(labels[ev]), jnp.asarray(oracle[ev])
        for name, reg in BASELINES:
            if reg is None:
                p = jax.nn.sigmoid(jnp.asarray(logits[ev]))
            else:
                params = REGISTRY[reg].fit(logits[ho], labels[ho], key=k_fit)
                p = jnp.clip(jnp.asarray(REGISTRY[reg].predict(params, logits[ev]), jnp.float32), 0.0, 1.0)
            vals = {"ECE": M.ece(p, y),
                    "LCCE-l1": M.lcce(jnp.asarray(logits[ev]), y, probs=p, key=k_lcce, n_restarts=lcce_restarts,
                                      norm="l1"),
                    "Brier+": M.oracle_mae(p, pi), "RMSE": jnp.sqrt(M.oracle_brier(p, pi)), "AUC": M.auc(p, y)}
            for k, v in vals.items():
                acc.setdefault(name, {}).setdefault(k, []).append(float(v))
    return {m: {k: float(np.mean(v)) for k, v in d.items()} for m, d in acc.items()}


def compare(values: Mapping[str, Mapping[str, float]], ctr: float,
            targets: Mapping[tuple[str, str], tuple[float, float, str]] | None = None) -> list[dict[str, Any]]:
    """Every target of ``targets`` (default :data:`TARGETS`) against ``values`` (from
    :func:`baseline_values`) and the log's ``ctr``."""
    rows = []
    for (method, metric), (target, tol, kind) in (TARGETS if targets is None else targets).items():
        if method == "log":
            ours = ctr
        elif method == "TS - Platt":
            ours = values["Temperature scaling"][metric] - values["Platt scaling"][metric]
        else:
            ours = values[method][metric]
        dev = (ours - target) / target if kind == "rel" else ours - target
        rows.append(dict(method=method, metric=metric, paper=target, ours=ours, deviation=dev,
                         tolerance=tol, kind=kind, met=bool(abs(dev) <= tol)))
    return rows


def score(rows: Sequence[Mapping[str, Any]]) -> tuple[int, float]:
    """(targets missed, mean |deviation| / tolerance): lower is better, compared in that order."""
    missed = sum(not r["met"] for r in rows)
    return missed, float(np.mean([abs(r["deviation"]) / r["tolerance"] for r in rows]))


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run the pilot of every candidate; write the tables; return the summary."""
    names = list(config["candidates"])
    unknown = sorted(set(names) - set(CANDIDATES))
    if unknown:
        raise ValueError(f"`candidates`: unknown {unknown}; known: {sorted(CANDIDATES)}")
    key = jax.random.key(int(config["pilot_seed"]))
    results: dict[str, Any] = {}
    pilot_rows, cand_rows = [], []
    for name in names:
        t0 = time.perf_counter()
        cfg = _sim_config(config["sim"], int(config["n_chunks"]), CANDIDATES[name])
        imp = simm.simulate(cfg, key)
        logits = production_logit(imp.pctr)
        labels = np.asarray(imp.click, np.float32)
        oracle = np.asarray(imp.oracle, np.float32)
        values = baseline_values(logits, labels, oracle, n_splits=int(config["n_splits"]),
                                 pool_frac=float(config["pool_frac"]), key=jax.random.fold_in(key, 7),
                                 lcce_restarts=int(config["lcce_restarts"]))
        ctr = float(labels.mean())
        rows = compare(values, ctr)
        missed, dev = score(rows)
        results[name] = dict(values=values, ctr=ctr, rows=rows, missed=missed, mean_deviation=dev,
                             impressions=len(labels), seconds=time.perf_counter() - t0)
        for m, d in values.items():
            pilot_rows.append([name, m, *(d[k] for k in METRICS)])
        cand_rows.append([name, missed, len(rows), dev, ctr, len(labels),
                          ", ".join(f"{k}={v}" for k, v in CANDIDATES[name].items())])
        if out.progress:
            print(f"[{STUDY}] {name}: {missed}/{len(rows)} targets missed, mean deviation {dev:.3f}", flush=True)
    chosen = min(names, key=lambda nm: (results[nm]["missed"], results[nm]["mean_deviation"]))
    out.table("pilot", ["candidate", "method", *METRICS], pilot_rows, digits=4)
    out.table("candidates", ["candidate", "targets missed", "targets", "mean deviation", "CTR", "impressions",
                             "settings"], cand_rows, digits=4)
    trows = [[r["method"], r["metric"], r["paper"], r["ours"], r["deviation"], r["tolerance"], r["kind"],
              "yes" if r["met"] else "no"] for r in results[chosen]["rows"]]
    trows += [[m, k, v, results[chosen]["values"][m][k], float("nan"), float("nan"), "not matched", "-"]
              for (m, k), v in UNMATCHED.items()]
    out.table("targets", ["method", "metric", "paper", "ours", "deviation", "tolerance", "kind", "met"], trows,
              digits=4)
    summary = {"chosen": chosen, "settings": {k: list(v) if isinstance(v, tuple) else v
                                              for k, v in CANDIDATES[chosen].items()},
               "missed": {nm: r["missed"] for nm, r in results.items()},
               "targets": results[chosen]["rows"], "candidates": results}
    out.json("results.json", summary)
    return summary


def report(summary: Mapping[str, Any]) -> str:
    r = summary["targets"]
    return (f"chosen {summary['chosen']}: {sum(x['met'] for x in r)}/{len(r)} targets met "
            f"({', '.join(f'{k}={v}' for k, v in summary['settings'].items())})")


main = entry_point(__name__)
