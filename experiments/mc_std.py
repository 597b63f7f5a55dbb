"""Fig 4 of "Calibration is Grouping": Spearman, across configurations, of the metrics' standard deviations.

A *configuration* fixes the model; each is repeated ``n_repeats`` times on fresh rows and
labels. For configuration c and metric m let :math:`s_{cm}` be the standard deviation
(ddof = 1) of the metric over the repeats. Across configurations we report, for every
metric, Spearman's :math:`\\rho(s_{\\cdot m}, s_{\\cdot,\\mathrm{Brier}^*})` with the oracle
Brier's standard deviation (a metric that tracks the oracle Brier should also share its
second-order behaviour), its Spearman matrix, and, for reference, the Spearman of the
per-configuration *means* with the oracle Brier's mean.

Population designs (``designs``; :mod:`calib_jax.montecarlo.designs`):

* ``fixed`` — "Calibration is Grouping" §3.2: one population law drawn once from the seed
  (:func:`calib_jax.montecarlo.fixed_world`, mean oracle CTR ``target_ctr`` = 3%); a
  configuration is a model variant on that law, and the repeats redraw rows and labels.
* ``pooled`` — App. C.1: a configuration also draws its own population law (coefficients
  and base CTR 1-10%); the repeats redraw rows and labels from it.

Intervals: the coefficient of every metric's std gets a 95% percentile bootstrap interval
over configurations (B = ``n_boot`` resamples of the configurations), and LCCE (eq. 12) and
LCCE-l1 are compared with every other metric on the same resamples (paired difference of
the coefficients, its interval and the share of resamples where LCCE agrees better;
:func:`calib_jax.montecarlo.rank_consistency`). The rho of the means is a point estimate.

The helpers the Monte Carlo studies share live in ``experiments/_mc.py``.

Run: ``python -m experiments.mc_std [--smoke | --quick | --paper]`` (quick: 64
configurations x 8 repeats x n = 4000 per design; paper: 500 x 20 x n = 10^5, checkpointed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from calib_jax import montecarlo as mc
from experiments._mc import (
    ANCHORS,
    design_summary,
    design_world,
    headline_text,
    run_designs,
    trial_config,
    write_matrix,
)
from experiments._study import Output, entry_point

_COMMON = {"designs": ["fixed", "pooled"], "target_ctr": 0.03, "n_boot": 1000}
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {**_COMMON, "n": 500, "n_trials": 8, "n_repeats": 3, "chunk_size": 8, "checkpoint": False,
              "n_boot": 50, "metrics": ["ece", "ece_sq", "ece_plus", "lcce", "lcce_l1", "oracle_brier"]},
    "quick": {**_COMMON, "n": 4000, "n_trials": 64, "n_repeats": 8, "chunk_size": 16, "checkpoint": False,
              "metrics": None},
    "paper": {**_COMMON, "n": 100_000, "n_trials": 500, "n_repeats": 20, "chunk_size": 10,
              "checkpoint": True, "metrics": None},
}


# --------------------------------------------------------------- the study
def report(summary: Mapping[str, Any]) -> str:
    return "rho(std, Brier* std): " + " | ".join(f"{d}: {headline_text(s)}"
                                                 for d, s in summary["designs"].items())


def _one_design(design: str, config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    seed = int(config["seed"])
    panel = mc.panel_for(config["metrics"])
    world, info = design_world(design, seed, config["target_ctr"])
    record = {**mc.panel_record(panel), "design": info}
    out.record.setdefault("designs", {})[design] = record
    names = list(panel.metrics)
    trial = mc.make_repeated_trial(int(config["n"]), int(config["n_repeats"]),
                                   metrics=mc.metric_panel(panel), world=world)
    res = mc.run_trials(trial, jax.random.key(seed), int(config["n_trials"]),
                        chunk_size=int(config["chunk_size"]), progress=out.progress,
                        checkpoint_dir=out.checkpoint_dir(config, design),
                        config=trial_config(config, record))
    std = np.asarray(res["std"], np.float64)
    mean = np.asarray(res["mean"], np.float64)
    if not (np.all(np.isfinite(std)) and np.all(np.isfinite(mean))):
        raise FloatingPointError("non-finite metric values over the repeats")
    T = std.shape[0]
    rc = mc.rank_consistency(std, names, key=jax.random.fold_in(jax.random.key(seed), 7),
                             anchors=[a for a in ANCHORS if a in names], n_boot=int(config["n_boot"]))
    R_std = np.asarray(mc.spearman_matrix(std))
    R_mean = np.asarray(mc.spearman_matrix(mean))
    j = names.index(mc.REFERENCE)
    rows = [[m, panel.label(m), rho, lo, hi, float(R_mean[j, names.index(m)]),
             float(np.median(std[:, names.index(m)] / np.maximum(np.abs(mean[:, names.index(m)]), 1e-12)))]
            for m, rho, lo, hi in rc.rows()]
    out.table(f"spearman_std_{design}", ["metric", "label", "rho_std", "ci_low", "ci_high", "rho_mean",
                                         "median_cv"], rows)
    out.table(f"paired_std_{design}", ["metric_a", "metric_b", "rho_a_minus_rho_b", "ci_low", "ci_high",
                                       "share_a_better"], rc.paired_rows())
    write_matrix(out, design, config, R_std, names, table=f"spearman_matrix_std_{design}",
                 figure=f"fig4_spearman_std_{design}",
                 title=(f"Spearman of per-configuration std ({T} configurations x {config['n_repeats']} "
                        f"repeats, n = {config['n']:,}, <design>)"))
    out.npz(f"configurations_{design}.npz", std=std, mean=mean, names=np.array(names))
    return {"n_configurations": T, "info": info, **design_summary(rc, all_pairs=True),
            "rho_mean": {names[i]: float(R_mean[j, i]) for i in range(len(names)) if i != j}}


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Fig 4 under every design of ``config["designs"]``; tables, heatmaps, side-by-side table."""
    return run_designs(_one_design, config, out)


main = entry_point(__name__)

if __name__ == "__main__":
    main()
