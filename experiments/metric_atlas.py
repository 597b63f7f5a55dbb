"""Beyond the paper: the rank-consistency atlas of calibration metrics against the oracle Brier.

"Calibration is Grouping" ranks LCCE against ECE, ECE+ and its own variants. This study adds the metrics
the field proposed since 2019 (``calib_jax.montecarlo.MODERN_METRICS``: smooth ECE,
cumulative calibration errors (KS, Kuiper, Kuiper in sigmas), the multicalibration error
over the media field, SKCE (block estimator), debiased squared ECE, ECE-sweep and ICI) and
asks the paper's question of all of them at once: across Monte Carlo trials, whose value
orders the models like the oracle Brier (Spearman rho with 95% percentile bootstrap
intervals over trials), under which population design, base CTR and sample size?

Every setting runs the same trials for every metric, so each comparison with LCCE (eq. 12)
is a paired bootstrap of ``rho(LCCE) - rho(other)`` on the same resampled trials (interval
and the share of resamples where LCCE is ahead). Settings are ``design@ctr/n`` strings:
``fixed`` holds one population law (the §3.2 protocol) at the target mean CTR; ``pooled``
redraws the population and its base CTR (1-10%) per trial (App. C.1), so its CTR is ``-``.

Outputs (``figures/metric_atlas[_paper]/``): ``atlas`` (rho [CI] per metric and setting),
``top5`` (the five label-based metrics closest to the oracle per setting), ``paired_vs_lcce``
(LCCE minus every metric, per setting) as CSV + Markdown, and ``atlas.png/pdf`` (a heatmap
of rho, metrics by setting).

Run: ``python -m experiments run metric_atlas [--smoke | --quick | --paper]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from calib_jax import montecarlo as mc
from calib_jax.plotting import plt
from calib_jax.plotting.heatmap import SIGN_NOTE
from experiments._study import Output, entry_point

#: the paper's label-based panel, our additions and the modern group; the oracle Brier is the
#: reference column
CLASSIC = ["brier", "nll", "ece", "ece_sq", "ece_plus", "mce", "gce_field", "lcce", "lcce_l1", "lcce_quantile",
           "lcce_optimal", "field_ece"]
METRICS = [*CLASSIC, *mc.MODERN_METRICS, "oracle_brier"]
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {"settings": ["fixed@0.03/600"], "n_trials": 8, "chunk_size": 8, "n_boot": 50,
              "checkpoint": False, "metrics": ["ece", "lcce", "smooth_ece", "cce_kuiper", "ici", "oracle_brier"]},
    "quick": {"settings": ["fixed@0.01/10000", "fixed@0.03/10000", "fixed@0.1/10000", "fixed@0.03/3000",
                           "pooled@-/10000"],
              "n_trials": 200, "chunk_size": 50, "n_boot": 1000, "checkpoint": False, "metrics": METRICS},
    "paper": {"settings": ["fixed@0.03/100000", "fixed@0.01/100000", "fixed@0.1/100000", "fixed@0.03/10000",
                           "pooled@-/100000"],
              "n_trials": 2000, "chunk_size": 50, "n_boot": 1000, "checkpoint": True, "metrics": METRICS},
}


def parse_setting(setting: str) -> tuple[str, float | None, int]:
    """``"fixed@0.03/10000"`` -> ("fixed", 0.03, 10000); ``"pooled@-/n"`` has no target CTR."""
    try:
        design, rest = setting.split("@")
        ctr, n = rest.split("/")
        return design, (None if ctr == "-" else float(ctr)), int(n)
    except ValueError:
        raise ValueError(f"`settings`: {setting!r} is not of the form design@ctr/n "
                         "(e.g. fixed@0.03/10000 or pooled@-/10000)") from None


def report(summary: Mapping[str, Any]) -> str:
    return "; ".join(f"{s}: " + ", ".join(f"{m} {r:.3f}" for m, r, *_ in v["top5"][:3])
                     for s, v in summary["settings"].items())


def run_setting(setting: str, config: Mapping[str, Any], out: Output) -> mc.RankConsistency:
    design, ctr, n = parse_setting(setting)
    seed = int(config["seed"])
    kw = {} if ctr is None else {"target_ctr": ctr}
    trial, panel, info = mc.make_design_trial(design, n, seed=seed, metrics=config["metrics"], **kw)
    record = {**mc.panel_record(panel), "design": info}
    out.record.setdefault("settings", {})[setting] = record
    values, _ = mc.run_trials(trial, jax.random.key(seed), int(config["n_trials"]),
                              chunk_size=int(config["chunk_size"]), progress=out.progress,
                              checkpoint_dir=out.checkpoint_dir(config, setting.replace("/", "_")),
                              config={**config, **record, "setting": setting})
    return mc.rank_consistency(np.asarray(values, np.float64), list(panel.metrics), n_boot=int(config["n_boot"]),
                               key=jax.random.fold_in(jax.random.key(seed), 7), anchors=("lcce",))


def _label_metrics(names: Sequence[str]) -> list[str]:
    return [m for m in names if not m.startswith(("oracle_", "one_minus_pearson", "one_minus_spearman"))]


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    settings = list(config["settings"])
    for s in settings:
        parse_setting(s)
    results = {s: run_setting(s, config, out) for s in settings}
    names = [m for m in results[settings[0]].names if m != "oracle_brier"]
    labels = _label_metrics(names)

    def cell(rc: mc.RankConsistency, m: str) -> str:
        lo, hi = rc.interval(m)
        return f"{rc.rho(m):.3f} [{lo:.3f}, {hi:.3f}]"

    out.table("atlas", ["metric", "label"] + settings,
              [[m, mc.DISPLAY.get(m, m)] + [cell(results[s], m) for s in settings] for m in names])
    summary: dict[str, Any] = {"settings": {}}
    top_rows, paired_rows = [], []
    for s, rc in results.items():
        ranked = sorted(labels, key=lambda m: -rc.rho(m))
        top_rows += [[s, i + 1, m, rc.rho(m), *rc.interval(m)] for i, m in enumerate(ranked[:5])]
        paired_rows += [[s, *r] for r in rc.paired_rows()]
        summary["settings"][s] = {**rc.summary(), "top5": [[m, rc.rho(m), *rc.interval(m)] for m in ranked[:5]],
                                  "best": ranked[0]}
    out.table("top5", ["setting", "rank", "metric", "spearman_rho", "ci_low", "ci_high"], top_rows)
    out.table("paired_vs_lcce", ["setting", "metric_a", "metric_b", "rho_a_minus_rho_b", "ci_low", "ci_high",
                                 "share_a_better"], paired_rows)

    rho = np.array([[results[s].rho(m) for s in settings] for m in labels])
    fig, ax = plt.subplots(figsize=(1.6 + 1.25 * len(settings), 0.8 + 0.32 * len(labels)))
    im = ax.imshow(rho, cmap="viridis", vmin=min(0.5, float(np.nanmin(rho))), vmax=1.0, aspect="auto")
    best = np.nanargmax(rho, axis=0)
    for i in range(len(labels)):
        for j in range(len(settings)):
            ax.text(j, i, f"{rho[i, j]:.3f}", ha="center", va="center", fontsize=7,
                    color="white" if rho[i, j] < 0.85 else "black",
                    fontweight="bold" if best[j] == i else "normal")
    ax.set_xticks(range(len(settings)), settings, rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(labels)), [mc.DISPLAY.get(m, m) for m in labels], fontsize=7)
    fig.colorbar(im, ax=ax, label="Spearman rho with oracle Brier")
    ax.set_title(f"Metric atlas ({config['n_trials']} trials per setting; bold: best)", fontsize=9)
    fig.text(0.01, -0.02, SIGN_NOTE, fontsize=6, style="italic", va="top")
    out.figure(fig, "atlas")
    return summary


main = entry_point(__name__)

if __name__ == "__main__":
    main()
