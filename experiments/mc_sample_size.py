"""Fig 6a of "Calibration is Grouping": Spearman of ECE and LCCE with the oracle Brier against sample size.

The same trial keys (so the same model variants and, under ``pooled``, the same population
laws) are evaluated at every sample size n; for each n we report Spearman's coefficient
with the oracle Brier of ECE (eq. 2, absolute gaps) and ECE-sq (squared gaps) on 15
equal-width bins, ECE+ (equal mass), LCCE (eq. 12, squared gaps, K = 4 logit clusters,
restart averaged), LCCE-l1 (absolute gaps) and the seed-free LCCE-q.

Population designs (``designs``; :func:`calib_jax.montecarlo.make_design_trial`): ``fixed``
("Calibration is Grouping" §3.2: one population law from the seed, mean oracle CTR ``target_ctr`` = 3%;
variants, rows and labels vary per trial), ``pooled`` (App. C.1: the law is redrawn per
trial) and ``simulator`` (rows resampled from the ad-auction simulator's logs).

Intervals: per n and design, a 95% percentile bootstrap interval over trials for every
coefficient (B = ``n_boot``) and the paired differences LCCE - other metric (and LCCE-l1 -
other) on the same resamples (:func:`calib_jax.montecarlo.rank_consistency`).

Trials per size: ``n_trials``, capped by a row budget ``rows_per_size`` (trials at size n =
``min(n_trials, rows_per_size // n)``, at least ``min_trials``). At paper scale (sizes 10^3
to 10^6, ``n_trials`` = 2000, budget 3 x 10^8 rows) this gives 2000 trials up to
n = 10^5, 1000 at 3 x 10^5 and 300 at 10^6; the trials of a smaller count are the first
ones of a larger count (trial t always gets the key ``fold_in(key, t)``). Trials per chunk
are capped the same way (``chunk_rows``) to bound memory.

Run: ``python -m experiments.mc_sample_size [--smoke | --quick | --paper]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from calib_jax import montecarlo as mc
from calib_jax.plotting import plt
from calib_jax.plotting.heatmap import SIGN_NOTE, rho_curves
from experiments._mc import ANCHORS, design_summary, fmt_ci, trial_config
from experiments._study import Output, entry_point

METRICS = ["ece", "ece_sq", "ece_plus", "lcce", "lcce_l1", "lcce_quantile", "oracle_brier"]
_COMMON = {"designs": ["fixed", "pooled"], "target_ctr": 0.03, "simulator": "tiny", "n_boot": 1000,
           "rows_per_size": None, "min_trials": 50, "chunk_rows": 1_000_000}
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {**_COMMON, "sizes": [400, 800], "n_trials": 8, "chunk_size": 8, "checkpoint": False,
              "n_boot": 50, "min_trials": 3, "metrics": ["ece", "ece_sq", "lcce", "lcce_l1", "oracle_brier"]},
    "quick": {**_COMMON, "sizes": [1000, 3000, 10_000, 30_000], "n_trials": 100, "chunk_size": 25,
              "checkpoint": False, "metrics": METRICS},
    "paper": {**_COMMON, "sizes": [1000, 3000, 10_000, 30_000, 100_000, 300_000, 1_000_000],
              "n_trials": 2000, "rows_per_size": 300_000_000, "chunk_size": 50, "chunk_rows": 2_000_000,
              "checkpoint": True, "metrics": METRICS, "simulator": "default"},
}
#: the label metrics drawn in the figure
PLOTTED = ("ece", "ece_sq", "ece_plus", "lcce", "lcce_l1", "lcce_quantile", "field_ece")


def trials_at(n: int, config: Mapping[str, Any]) -> int:
    """Trials at sample size ``n``: ``n_trials`` within the row budget (module docstring)."""
    T = int(config["n_trials"])
    budget = config.get("rows_per_size")
    if budget:
        T = min(T, max(int(config["min_trials"]), int(budget) // int(n)))
    return T


def report(summary: Mapping[str, Any]) -> str:
    parts = []
    for design, s in summary["designs"].items():
        ends = [str(s["sizes"][0]), str(s["sizes"][-1])]
        diffs = [s["by_n"][n]["paired"].get("lcce - ece") for n in ends]
        parts.append(f"{design}: LCCE-ECE " + " -> ".join(
            f"n={n} {fmt_ci(d['diff'], d['lo'], d['hi'], signed=True)}" for n, d in zip(ends, diffs) if d))
    return " | ".join(parts)


def _one_design(design: str, config: Mapping[str, Any], out: Output,
                rows: list[list[Any]], paired_rows: list[list[Any]]) -> dict[str, Any]:
    seed = int(config["seed"])
    key = jax.random.key(seed)
    by_n: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for n in config["sizes"]:
        n = int(n)
        trial, panel, info = mc.make_design_trial(design, n, seed=seed, metrics=config["metrics"],
                                                  target_ctr=float(config["target_ctr"]),
                                                  simulator=config["simulator"])
        record = {**mc.panel_record(panel), "design": info}
        out.record.setdefault("designs", {})[design] = record
        names = list(panel.metrics)
        T = trials_at(n, config)
        chunk = max(1, min(int(config["chunk_size"]), int(config["chunk_rows"]) // n))
        values, _ = mc.run_trials(trial, key, T, chunk_size=chunk, progress=out.progress,
                                  checkpoint_dir=out.checkpoint_dir(config, design, f"n{n}"),
                                  config=trial_config(config, record, n=n,
                                                      drop=("sizes", "n_trials", "rows_per_size", "min_trials",
                                                            "chunk_size", "chunk_rows")))
        values = np.asarray(values, np.float64)
        if not np.all(np.isfinite(values)):
            raise FloatingPointError(f"non-finite metric values at n = {n}")
        rc = mc.rank_consistency(values, names, key=jax.random.fold_in(key, 7),
                                 anchors=[a for a in ANCHORS if a in names], n_boot=int(config["n_boot"]))
        rows += [[design, n, T, m, panel.label(m), rho, lo, hi] for m, rho, lo, hi in rc.rows(order=names)]
        paired_rows += [[design, n, T, *r] for r in rc.paired_rows()]
        by_n[str(n)] = design_summary(rc)
        counts[str(n)] = T
    return {"sizes": [int(n) for n in config["sizes"]], "n_trials": counts, "by_n": by_n}


def sample_size_figure(designs: Mapping[str, Mapping[str, Any]], title: str):
    """One panel per design: rho vs n with the 95% bands of the plotted metrics."""
    fig, axes = plt.subplots(1, len(designs), figsize=(5.2 * len(designs), 3.9), squeeze=False,
                             sharey=True)
    for i, (ax, (design, s)) in enumerate(zip(axes[0], designs.items())):
        ns = [str(n) for n in s["sizes"]]
        shown = [m for m in PLOTTED if m in s["by_n"][ns[0]]["rho"]]
        label = {m: mc.DISPLAY.get(m, m) for m in shown}
        rho_curves(s["sizes"], {label[m]: [s["by_n"][n]["rho"][m] for n in ns] for m in shown},
                   {label[m]: [s["by_n"][n]["interval"][m][0] for n in ns] for m in shown},
                   {label[m]: [s["by_n"][n]["interval"][m][1] for n in ns] for m in shown},
                   ax=ax, title=design, caption=None, xlabel="rows per trial n",
                   ylabel="Spearman rho with oracle Brier (95% CI)" if i == 0 else "")
    fig.suptitle(title, fontsize=10)
    fig.text(0.01, -0.02, SIGN_NOTE, fontsize=7, style="italic", va="top")
    return fig


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Fig 6a under every design of ``config["designs"]``: tables and one figure."""
    rows: list[list[Any]] = []
    paired_rows: list[list[Any]] = []
    designs = {d: _one_design(d, config, out, rows, paired_rows) for d in config["designs"]}
    out.table("spearman_vs_sample_size", ["design", "n", "n_trials", "metric", "label", "spearman_rho",
                                          "ci_low", "ci_high"], rows)
    out.table("paired_vs_sample_size", ["design", "n", "n_trials", "metric_a", "metric_b", "rho_a_minus_rho_b",
                                        "ci_low", "ci_high", "share_a_better"], paired_rows)
    T = sorted({t for s in designs.values() for t in s["n_trials"].values()})
    trials = f"{T[0]}" if len(T) == 1 else f"{T[0]}-{T[-1]}"
    out.figure(sample_size_figure(designs, f"Rank consistency vs sample size ({trials} trials per n, "
                                           f"95% bootstrap bands)"), "fig6a_spearman_vs_sample_size")
    return {"designs": designs}


main = entry_point(__name__)

if __name__ == "__main__":
    main()
