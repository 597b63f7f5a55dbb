"""Beyond the paper: where does clustering in logit space help? Rank consistency vs base CTR.

The fixed design of Fig 1 (one population law, variants, rows and labels varying per trial;
:mod:`calib_jax.montecarlo.designs`) is repeated with the population's mean oracle CTR at
0.5%, 1%, 3%, 10% and 30%. For every CTR we report the Spearman correlation with the oracle
Brier of ECE (eq. 2) and ECE-sq, ECE+ (equal mass), LCCE (eq. 12; k-means++ restarts) and
LCCE-l1, the seed-free LCCE-q (quantile init) and LCCE-opt (optimal 1-D k-means), Field-ECE
(over the media field) and the oracle metrics, each with a 95% bootstrap interval
over trials, and the paired difference LCCE - ECE with its interval.

"Calibration is Grouping" argues for clustering in logit space because at a low CTR almost every
prediction falls into ECE's first equal-width bin; the sweep measures where that argument
bites and where it does not.

Run: ``python -m experiments.mc_ctr_sweep [--smoke | --quick | --paper]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from calib_jax import montecarlo as mc
from calib_jax.plotting import plt
from calib_jax.plotting.heatmap import SIGN_NOTE
from experiments._study import Output, entry_point

METRICS = ["ece", "ece_sq", "ece_plus", "lcce", "lcce_l1", "lcce_quantile", "lcce_optimal", "field_ece",
           "oracle_mae", "oracle_kl", "oracle_chebyshev", "one_minus_spearman", "oracle_brier"]
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {"ctrs": [0.03, 0.3], "n": 600, "n_trials": 8, "chunk_size": 8, "n_boot": 50,
              "checkpoint": False, "metrics": ["ece", "lcce", "lcce_quantile", "oracle_brier"]},
    "quick": {"ctrs": [0.005, 0.01, 0.03, 0.1, 0.3], "n": 10_000, "n_trials": 200, "chunk_size": 50,
              "n_boot": 1000, "checkpoint": False, "metrics": METRICS},
    "paper": {"ctrs": [0.005, 0.01, 0.03, 0.1, 0.3], "n": 100_000, "n_trials": 2000, "chunk_size": 50,
              "n_boot": 1000, "checkpoint": True, "metrics": METRICS},
}
#: the label-based metrics drawn in the figure
PLOTTED = ("ece", "ece_sq", "ece_plus", "lcce", "lcce_l1", "lcce_quantile", "field_ece")


def report(summary: Mapping[str, Any]) -> str:
    return "; ".join(f"CTR {c}: LCCE-ECE {d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"
                     for c, d in summary["lcce_minus_ece"].items())


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    seed = int(config["seed"])
    rows: list[list[Any]] = []
    paired_rows: list[list[Any]] = []
    by_ctr: dict[str, Any] = {}
    for ctr in config["ctrs"]:
        trial, panel, info = mc.make_design_trial("fixed", int(config["n"]), seed=seed,
                                                  metrics=config["metrics"], target_ctr=float(ctr))
        record = {**mc.panel_record(panel), "design": info}
        out.record.setdefault("ctrs", {})[str(ctr)] = record
        names = list(panel.metrics)
        values, _ = mc.run_trials(trial, jax.random.key(seed), int(config["n_trials"]),
                                  chunk_size=int(config["chunk_size"]), progress=out.progress,
                                  checkpoint_dir=out.checkpoint_dir(config, f"ctr{ctr}"),
                                  config={**config, **record, "ctr": ctr})
        rc = mc.rank_consistency(np.asarray(values, np.float64), names, n_boot=int(config["n_boot"]),
                                 key=jax.random.fold_in(jax.random.key(seed), 7), anchors=("lcce",))
        rows += [[float(ctr), m, panel.label(m), rho, lo, hi] for m, rho, lo, hi in rc.rows(order=names)]
        paired_rows += [[float(ctr), *r] for r in rc.paired_rows()]
        by_ctr[str(ctr)] = rc.summary()
    out.table("spearman_vs_ctr", ["target_ctr", "metric", "label", "spearman_rho", "ci_low", "ci_high"], rows)
    out.table("paired_lcce_vs_ctr", ["target_ctr", "metric_a", "metric_b", "rho_a_minus_rho_b", "ci_low",
                                     "ci_high", "share_a_better"], paired_rows)

    ctrs = [float(c) for c in config["ctrs"]]
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    for m in [m for m in PLOTTED if m in by_ctr[str(config["ctrs"][0])]["rho"]]:
        r = np.array([by_ctr[str(c)]["rho"][m] for c in config["ctrs"]])
        lo, hi = np.array([by_ctr[str(c)]["interval"][m] for c in config["ctrs"]]).T
        line, = ax.plot(ctrs, r, marker="o", label=mc.DISPLAY.get(m, m), lw=2.0 if m.startswith("lcce") else 1.2)
        ax.fill_between(ctrs, lo, hi, color=line.get_color(), alpha=0.12)
    ax.set_xscale("log")
    ax.set_xlabel("mean oracle CTR of the (fixed) population")
    ax.set_ylabel("Spearman rho with oracle Brier (95% CI)")
    ax.set_title(f"Rank consistency vs base CTR ({config['n_trials']} trials x n = {config['n']:,} per CTR)",
                 fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.text(0.01, -0.02, SIGN_NOTE, fontsize=7, style="italic", va="top")
    out.figure(fig, "ctr_sweep")
    lcce_ece = {c: s["paired"]["lcce - ece"] for c, s in by_ctr.items() if "lcce - ece" in s["paired"]}
    return {"by_ctr": by_ctr, "lcce_minus_ece": lcce_ece}


main = entry_point(__name__)

if __name__ == "__main__":
    main()
