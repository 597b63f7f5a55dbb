"""Fig 1 and Fig 3 of "Calibration is Grouping": Spearman rank consistency of every metric with the oracle Brier.

Each Monte Carlo trial draws a model variant (global temperature/bias, field-wise opposite
biases, a latent-regime bias, logit noise, a monotone non-linear distortion, selection-bias
over-estimation; :mod:`calib_jax.montecarlo.variants`), rows and labels, and evaluates the
whole metric panel (``calib_jax.montecarlo.panel``). Across trials every metric is ranked and its Spearman
correlation with the oracle Brier score reported, with a 95% percentile bootstrap interval
over trials (B = 1000), next to paired comparisons of LCCE (eq. 12, squared gaps) and
LCCE-l1 (absolute gaps) against every other metric on the same resamples
(:func:`calib_jax.montecarlo.rank_consistency`).

Population designs (``designs``; :mod:`calib_jax.montecarlo.designs`):

* ``fixed`` — "Calibration is Grouping" §3.2, the protocol of Fig 1: one AdAuction-like population law
  (mean oracle CTR ``target_ctr`` = 3%) drawn once from the seed; variants, rows and labels
  vary per trial. The default, and the headline.
* ``pooled`` — App. C.1's "varying data distributions": coefficients and base CTR (1-10%)
  redrawn per trial, all pooled into one correlation.
* ``simulator`` — trials resampled from the ad-auction simulator's logs (the registry entry
  ``mc_spearman_simulator``).

Both norms are in every table: ECE (eq. 2, absolute gaps) and ECE-sq (squared gaps) on 15
equal-width bins; LCCE (eq. 12, squared gaps) and LCCE-l1 (absolute gaps) on K = 4 logit
clusters, because the choice of norm moves the comparison as much as the partition does.

Sign convention: every column is a loss; AUC, Pearson and Spearman with the oracle enter
as ``1 - value`` (see ``calib_jax.montecarlo.panel``).

Your own metric: ``--set "metrics=['ece', 'lcce', 'my_metrics:logit_ece']"`` puts a metric defined
outside the package (``module:function`` importable from the working directory, or
``path/to/file.py:function``; a label-based ``f(probs, labels, *, weights=None)`` or a
:class:`calib_jax.montecarlo.PanelMetric`) in the panel beside the built-in columns; it is
compared pairwise with every other column, and its source's SHA-256 is in the provenance
and the checkpoint hash.

Run: ``python -m experiments.mc_spearman [--smoke | --quick | --paper]`` (quick: 300 trials x
n = 10^4 per design; paper: 5000 trials x n = 10^5, checkpointed and resumable).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from calib_jax import montecarlo as mc
from calib_jax.plotting.heatmap import SIGN_NOTE, annotated_heatmap, correlation_bars
from experiments._study import Output, entry_point

_COMMON = {"target_ctr": 0.03, "simulator": "tiny", "metrics": None, "n_boot": 1000}
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {**_COMMON, "n": 600, "n_trials": 8, "chunk_size": 8, "checkpoint": False,
              "designs": ["fixed", "pooled"], "n_boot": 50,
              "metrics": [*mc.SMALL_PANEL[:-1], "ece_sq", "lcce_l1", "oracle_brier"]},
    "quick": {**_COMMON, "n": 10_000, "n_trials": 300, "chunk_size": 50, "checkpoint": False,
              "designs": ["fixed", "pooled"]},
    "paper": {**_COMMON, "n": 100_000, "n_trials": 5000, "chunk_size": 50, "checkpoint": True,
              "designs": ["fixed", "pooled"], "simulator": "default"},
}
#: metrics compared pairwise against every other one (and so is every user metric)
ANCHORS = ("lcce", "lcce_l1")
#: the comparisons the headline reports (LCCE vs ECE under both norms)
HEADLINE = (("lcce", "ece"), ("lcce_l1", "ece"), ("lcce", "ece_sq"), ("lcce", "ece_plus"))


def _fmt(x: float, lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(x)} [{f.format(lo)}, {f.format(hi)}]"


def report(summary: Mapping[str, Any]) -> str:
    parts = []
    for design, s in summary["designs"].items():
        line = f"{design}: "
        line += ", ".join(f"{m} {_fmt(s['rho'][m], *s['interval'][m])}" for m in ("lcce", "ece") if m in s["rho"])
        for key in ("lcce - ece", "lcce_l1 - ece"):
            if key in s["paired"]:
                d = s["paired"][key]
                line += f"; {key} {_fmt(d['diff'], d['lo'], d['hi'], signed=True)}"
        line += f"; best label metric {s['best_label_metric']} ({s['best_label_rho']:.3f})"
        parts.append(line)
    return "\n  ".join(["Spearman with the oracle Brier [95% CI]:", *parts])


def _one_design(design: str, config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    seed = int(config["seed"])
    trial, panel_cfg, info = mc.make_design_trial(
        design, int(config["n"]), seed=seed, metrics=config["metrics"],
        target_ctr=float(config["target_ctr"]), simulator=config["simulator"])
    record = {**mc.panel_record(panel_cfg), "design": info}
    out.record.setdefault("designs", {})[design] = record
    names = list(panel_cfg.metrics)
    values, ref = mc.run_trials(
        trial, jax.random.key(seed), int(config["n_trials"]), chunk_size=int(config["chunk_size"]),
        progress=out.progress, checkpoint_dir=out.checkpoint_dir(config, design),
        config={**config, **record})
    values = np.asarray(values, dtype=np.float64)
    T = values.shape[0]
    if not np.all(np.isfinite(values)):
        bad = [names[j] for j in np.where(~np.isfinite(values).all(axis=0))[0]]
        raise FloatingPointError(f"non-finite metric values in columns {bad}")
    rc = mc.rank_consistency(values, names, key=jax.random.fold_in(jax.random.key(seed), 7),
                             anchors=[*(a for a in ANCHORS if a in names), *(c.name for c in panel_cfg.custom)],
                             n_boot=int(config["n_boot"]))
    R = np.asarray(mc.spearman_matrix(values))

    group = {m: panel_cfg.needs(m) for m in names}
    j_ref = names.index(mc.REFERENCE)
    rows = [[m, panel_cfg.label(m), group[m], rho, lo, hi, float(values[:, names.index(m)].mean()),
             float(values[:, names.index(m)].std(ddof=1))] for m, rho, lo, hi in rc.rows()]
    out.table(f"spearman_{design}", ["metric", "label", "needs", "spearman_rho", "ci_low", "ci_high",
                                     "mean", "std"], rows)
    out.table(f"paired_{design}", ["metric_a", "metric_b", "rho_a_minus_rho_b", "ci_low", "ci_high",
                                   "share_a_better"], rc.paired_rows())
    out.table(f"spearman_matrix_{design}", ["metric", *names],
              [[names[i], *map(float, R[i])] for i in range(len(names))])
    out.npz(f"trials_{design}.npz", values=values, names=np.array(names), oracle_brier=np.asarray(ref))

    what = {"fixed": f"fixed population, CTR {config['target_ctr']:.1%}", "pooled": "pooled populations",
            "simulator": "simulator logs"}[design]
    out.figure(annotated_heatmap(R, panel_cfg.labels,
                                 title=f"Spearman across {T} trials (n = {config['n']:,}, {what})",
                                 caption=SIGN_NOTE + "; * = needs the oracle CTR"),
               f"fig3_spearman_matrix_{design}")
    keep = [i for i in range(len(names)) if i != j_ref]
    rho = rc.boot.rho[keep]
    err = np.stack([rho - rc.boot.lo[keep], rc.boot.hi[keep] - rho])
    out.figure(correlation_bars(rho, [panel_cfg.label(names[i]) for i in keep], err=err,
                                highlight=("LCCE", "LCCE-l1", "LCCE-q", "LCCE-opt"),
                                title=f"Spearman with the oracle Brier, 95% bootstrap CI ({T} trials, {what})"),
               f"fig1_spearman_with_oracle_brier_{design}")

    label_only = [m for m in names if group[m] == "label"]
    best = max(label_only, key=rc.rho)
    s = rc.summary()
    return {"n_trials": T, "info": info, "labels": dict(zip(names, panel_cfg.labels, strict=True)),
            "best_label_metric": best, "best_label_rho": rc.rho(best),
            "rho": s["rho"], "interval": s["interval"],
            "paired": {f"{a} - {b}": s["paired"][f"{a} - {b}"] for a, b in HEADLINE
                       if f"{a} - {b}" in s["paired"]},
            "paired_all": s["paired"], "n_boot": s["n_boot"]}


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run Fig 1/3 under every design of ``config["designs"]``; write tables and figures."""
    designs = {d: _one_design(d, config, out) for d in config["designs"]}
    metrics = list(next(iter(designs.values()))["rho"])
    header = ["metric", "label"] + [f"{d} rho [95% CI]" for d in designs]
    labels = next(iter(designs.values()))["labels"]
    rows = [[m, labels[m]] + [_fmt(s["rho"][m], *s["interval"][m]) for s in designs.values()]
            for m in metrics]
    out.table("designs_side_by_side", header, rows)
    return {"designs": designs}


main = entry_point(__name__)

if __name__ == "__main__":
    main()
