"""Fig 6b and Table 6 of "Calibration is Grouping": LCCE against clusters, restarts and clustering subsample.

**Fig 6b (the K x R grid).** On every trial (model variant, rows and labels, as in Fig 3) we
evaluate LCCE (eq. 12, :math:`\\sum_j w_j(\\mu_j - \\pi_j)^2` on K k-means clusters of the
logits; k-means++ seeding, averaged over R restarts, the paper's form) for a grid of cluster
counts K and restart counts R, the seed-free variants (quantile-seeded Lloyd, optimal 1-D
k-means), LCCE with centroids from a random subsample of the logits (App. H.1), and ECE
(eq. 2). Under each population design (``designs``: ``fixed``, "Calibration is Grouping" §3.2, one
population law from the seed with mean oracle CTR ``target_ctr`` = 3%; ``pooled``, App. C.1,
the law redrawn per trial; :mod:`calib_jax.montecarlo.designs`) every column's Spearman
coefficient with the oracle Brier gets a 95% percentile bootstrap interval over trials
(B = ``n_boot``), and LCCE (K = 4, R = 4) is compared with every other column on the same
resamples (:func:`calib_jax.montecarlo.rank_consistency`). Outputs:

* ``fig6b_lcce_grid`` (table: design, K, R, rho, interval) and ``fig6b_lcce_grid_<design>``
  (heatmap of rho);
* ``spearman_lcce_variants`` and ``paired_lcce``: every column, and LCCE - every column;
* ``restart_noise``: how much two independent evaluations of the restart-averaged LCCE on
  the *same* data differ (median relative difference), for R = 1 and R = 4, against the
  seed-free variants (0 by construction): the restart noise the deterministic forms remove.

**Table 6 (centroids from a subsample).** A separate run of ``table6_trials`` trials with
``table6_n`` rows under ``table6_design`` (the paper's table is one dataset: ``fixed``)
evaluates, on each trial, LCCE (K = 4, R = 4) with the centroids estimated from
``table6_subsamples`` logits drawn with replacement, and from all rows. The l2 and l1 gaps
of one subsample size use the same key, hence the same clusters. ``table6_subsample``
reports per subsample size the mean over trials of LCCE on both scales, each with a 95%
*percentile bootstrap* interval of the mean over trials (B = ``n_boot``): eq. 12 (squared
gaps), the ECE scale as the root of eq. 12, and the l1 gap :math:`\\sum_j w_j|\\mu_j - \\pi_j|`
(``lcce_metric(..., norm="l1")``); the median over trials of the relative deviation from the
full-data value on each scale; the Spearman coefficient (eq. 12) with the oracle Brier; and
the paper's value ("Calibration is Grouping" App. H.1: 1e2 0.012309877, 1e3 0.021076037, 1e4 0.020131670,
1e5 0.019488912, 1e6 0.019336675, 1e7 0.019336664; its 1e7 row is shown next to our
full-data row).

The paper's printed LCCE values are on the ECE scale (its Table 1 prints Uncal ECE 0.0339
next to LCCE 0.0342), not squared gaps; the printed numbers do not say whether they are the
l1 gap or the root of eq. 12 (the two are equal when all clusters have the same gap, and
the root is the larger otherwise), so both are shown. Our values are means over model
variants of one synthetic population, not the paper's model on AdAuction: compare the shape
of the column (the deviation from the full-data value shrinking with the subsample) more
than its level.

Run: ``python -m experiments.mc_lcce_sensitivity [--smoke | --quick | --paper]`` (quick: grid
at n = 10^4, Table 6 at n = 10^5; paper: grid at n = 10^5 with subsamples 1e2..1e5, Table 6
at n = 10^6 with subsamples 1e2..1e6; checkpointed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import metrics as M
from calib_jax import montecarlo as mc
from calib_jax.plotting.heatmap import annotated_heatmap
from experiments._mc import design_summary, design_world, fmt_ci, headline_text, trial_config
from experiments._study import Output, entry_point

_COMMON = {"designs": ["fixed", "pooled"], "target_ctr": 0.03, "n_boot": 1000, "table6_design": "fixed"}
PRESETS: dict[str, dict[str, Any]] = {
    # the smoke runs one design (each compiles its own trial program; mc_spearman's smoke runs both)
    "smoke": {**_COMMON, "designs": ["fixed"], "n": 800, "n_trials": 8, "chunk_size": 8, "checkpoint": False,
              "n_boot": 50, "clusters": [2, 4], "restarts": [1, 4], "subsamples": [100],
              "table6_n": 2000, "table6_subsamples": [100, 1000], "table6_trials": 8, "table6_chunk_size": 8},
    "quick": {**_COMMON, "n": 10_000, "n_trials": 100, "chunk_size": 25, "checkpoint": False,
              "clusters": [2, 4, 8, 16], "restarts": [1, 4], "subsamples": [100, 1000, 3000],
              "table6_n": 100_000, "table6_subsamples": [100, 1000, 10_000, 100_000], "table6_trials": 50,
              "table6_chunk_size": 10},
    "paper": {**_COMMON, "n": 100_000, "n_trials": 2000, "chunk_size": 25, "checkpoint": True,
              "clusters": [2, 3, 4, 6, 8, 12, 16], "restarts": [1, 2, 4, 8],
              "subsamples": [100, 1000, 10_000, 100_000],
              "table6_n": 1_000_000, "table6_subsamples": [100, 1000, 10_000, 100_000, 1_000_000],
              "table6_trials": 200, "table6_chunk_size": 4},
}
#: "Calibration is Grouping" App. H.1, Table 6: LCCE (ECE scale) with centroids from a subsample of this size
PAPER_TABLE6 = {100: 0.012309877, 1000: 0.021076037, 10_000: 0.020131670, 100_000: 0.019488912,
                1_000_000: 0.019336675, 10_000_000: 0.019336664}
#: the settings of the Table 6 run (left out of the grid run's checkpoint hash, and back)
TABLE6_KEYS = ("table6_design", "table6_n", "table6_subsamples", "table6_trials", "table6_chunk_size")
GRID_KEYS = ("designs", "n", "n_trials", "chunk_size", "clusters", "restarts", "subsamples")


def build_columns(config: Mapping[str, Any]) -> dict[str, mc.MetricFn]:
    """The columns of the grid run (each gets its own key: ``*_again`` re-evaluates on the
    same data with another key)."""
    cols: dict[str, Any] = {}
    for K in config["clusters"]:
        for R in config["restarts"]:
            cols[f"K{K}_R{R}"] = mc.lcce_metric(n_clusters=K, n_restarts=R)
    panel = mc.metric_panel(mc.PanelConfig(metrics=("ece", "lcce", "lcce_quantile", "lcce_optimal",
                                                    "oracle_brier")))
    cols["lcce"] = panel["lcce"]  # K = 4, R = 4: the paper's form, the anchor
    cols["lcce_again"] = mc.lcce_metric(n_clusters=4, n_restarts=4)
    cols["K4_R1_ref"] = mc.lcce_metric(n_clusters=4, n_restarts=1)
    cols["K4_R1_again"] = mc.lcce_metric(n_clusters=4, n_restarts=1)
    cols["lcce_quantile"] = panel["lcce_quantile"]
    cols["lcce_optimal"] = panel["lcce_optimal"]
    for S in config["subsamples"]:
        cols[f"K4_R4_sub{S}"] = mc.lcce_metric(n_clusters=4, n_restarts=4, subsample=int(S))
    cols["ece"] = panel["ece"]
    cols["oracle_brier"] = panel["oracle_brier"]
    return cols


def grid_figure(grid: np.ndarray, Ks: Sequence[int], Rs: Sequence[int], T: int, n: int, what: str = ""):
    """Heatmap of rho(K, R); the colour range is the data range (all values are close)."""
    lo, hi = float(np.min(grid)), float(np.max(grid))
    pad = max(0.005, 0.1 * (hi - lo))
    return annotated_heatmap(grid, [f"K={K}" for K in Ks], [f"R={R}" for R in Rs],
                             vmin=lo - pad, vmax=hi + pad, cmap="viridis", fmt="{:.3f}",
                             title=f"LCCE: Spearman with oracle Brier ({T} trials, n={n:,}{what})",
                             caption="rows: clusters K; columns: k-means++ restarts averaged R")


def make_table6_trial(n: int, sizes: Sequence[int], world: mc.FixedWorld | None):
    """``key -> (values (2 (len(sizes) + 1),), oracle Brier)``: for each subsample size and
    then all rows, LCCE (K = 4, R = 4) with l2 (eq. 12) and l1 gaps on the same clusters."""
    fns = [{g: mc.lcce_metric(n_clusters=4, n_restarts=4, subsample=None if S is None else int(S), norm=g)
            for g in ("l2", "l1")} for S in [*sizes, None]]

    def trial(key):
        k_data, k_metric = jax.random.split(key)
        d = mc.sample_trial_data(k_data, n, world=world)
        vals = [f[g](d, jax.random.fold_in(k_metric, j)) for j, f in enumerate(fns) for g in ("l2", "l1")]
        return jnp.stack(vals), M.oracle_brier(d.probs, d.oracle)

    return trial


def _mean_ci(x: np.ndarray, counts: np.ndarray, level: float = 0.95) -> list[float]:
    """Mean over trials and its percentile bootstrap interval (``counts``: (B, T) resamples)."""
    lo, hi = mc.percentile_interval(counts @ x / x.shape[0], level)
    return [float(x.mean()), float(lo), float(hi)]


def table6(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Table 6: LCCE on both scales per subsample size (module docstring)."""
    seed = int(config["seed"])
    design, n = config["table6_design"], int(config["table6_n"])
    sizes = [int(S) for S in config["table6_subsamples"]]
    world, info = design_world(design, seed, config["target_ctr"])
    record = {"scenario": mc.ScenarioConfig().to_dict(), "variant": mc.VariantConfig().to_dict(), "design": info,
              "lcce": {"n_clusters": 4, "n_restarts": 4, "subsample_draw": "uniform with replacement"}}
    out.record["table6"] = record
    values, ref = mc.run_trials(make_table6_trial(n, sizes, world), jax.random.key(seed),
                                int(config["table6_trials"]), chunk_size=int(config["table6_chunk_size"]),
                                progress=out.progress, checkpoint_dir=out.checkpoint_dir(config, "table6"),
                                config=trial_config(config, record, drop=GRID_KEYS))
    v = np.asarray(values, np.float64).reshape(-1, len(sizes) + 1, 2)  # (T, size, [l2, l1])
    if not np.all(np.isfinite(v)):
        raise FloatingPointError("non-finite LCCE values in Table 6")
    T = v.shape[0]
    scales = {"eq12": v[..., 0], "root": np.sqrt(v[..., 0]), "l1": v[..., 1]}
    kb = jax.random.fold_in(jax.random.key(seed), 8)
    counts = np.asarray(mc.bootstrap_counts(kb, int(config["n_boot"]), T), np.float64)
    rc = mc.rank_consistency(np.column_stack([v[..., 0], np.asarray(ref, np.float64)]),
                             [*map(str, sizes), "all", "oracle_brier"], key=kb, anchors=(),
                             n_boot=int(config["n_boot"]))
    rows, by_size = [], {}
    for i, S in enumerate([*sizes, None]):
        label = "all" if S is None else str(S)
        paper_at = 10_000_000 if S is None else S
        rel = {k: float(np.median(np.abs(x[:, i] - x[:, -1]) / np.maximum(x[:, -1], 1e-12)))
               for k, x in scales.items()}
        means = {k: _mean_ci(x[:, i], counts) for k, x in scales.items()}
        paper = PAPER_TABLE6.get(paper_at)
        rows.append([f"all (n = {n:,})" if S is None else str(S), *means["eq12"], *means["root"], *means["l1"],
                     rel["eq12"], rel["root"], rel["l1"], rc.rho(label), *rc.interval(label),
                     "" if paper is None else paper, "" if paper is None else f"1e{len(str(paper_at)) - 1}"])
        by_size[label] = {"mean": means, "median_rel_dev": rel, "rho": rc.rho(label),
                          "interval": list(rc.interval(label)), "paper": paper}
    out.table("table6_subsample",
              ["subsample", "eq12_mean", "eq12_ci_low", "eq12_ci_high", "root_eq12_mean", "root_ci_low",
               "root_ci_high", "l1_mean", "l1_ci_low", "l1_ci_high", "median_rel_dev_eq12",
               "median_rel_dev_root", "median_rel_dev_l1", "spearman_rho", "rho_ci_low", "rho_ci_high",
               "paper_lcce_ece_scale", "paper_subsample"], rows, digits=6)
    return {"design": design, "n": n, "n_trials": T, "interval": "percentile bootstrap of the mean over trials",
            "by_subsample": by_size}


def report(summary: Mapping[str, Any]) -> str:
    parts = [f"{d}: {headline_text(s)}; restart noise R=1 {s['restart_noise_R1']:.4f}, "
             f"R=4 {s['restart_noise_R4']:.4f}" for d, s in summary["designs"].items()]
    t6 = summary["table6"]["by_subsample"]
    full = t6["all"]["mean"]
    parts.append(f"Table 6 all rows: root eq12 {fmt_ci(*full['root'])}, l1 {fmt_ci(*full['l1'])} "
                 f"(paper 1e7: {PAPER_TABLE6[10_000_000]:.4f})")
    return " | ".join(parts)


def _one_design(design: str, config: Mapping[str, Any], out: Output, grid_rows: list[list[Any]],
                variant_rows: list[list[Any]], paired_rows: list[list[Any]],
                noise_rows: list[list[Any]]) -> dict[str, Any]:
    seed = int(config["seed"])
    world, info = design_world(design, seed, config["target_ctr"])
    record = {"scenario": mc.ScenarioConfig().to_dict(), "variant": mc.VariantConfig().to_dict(), "design": info}
    out.record.setdefault("designs", {})[design] = record
    cols = build_columns(config)
    names = list(cols)
    values, _ = mc.run_trials(mc.make_trial(int(config["n"]), metrics=cols, world=world), jax.random.key(seed),
                              int(config["n_trials"]), chunk_size=int(config["chunk_size"]),
                              progress=out.progress, checkpoint_dir=out.checkpoint_dir(config, design),
                              config=trial_config(config, record, drop=TABLE6_KEYS))
    v = np.asarray(values, np.float64)
    if not np.all(np.isfinite(v)):
        raise FloatingPointError("non-finite LCCE values")
    T = v.shape[0]
    rc = mc.rank_consistency(v, names, key=jax.random.fold_in(jax.random.key(seed), 7), anchors=("lcce",),
                             n_boot=int(config["n_boot"]))
    col = {m: i for i, m in enumerate(names)}
    Ks, Rs = config["clusters"], config["restarts"]
    grid = np.array([[rc.rho(f"K{K}_R{R}") for R in Rs] for K in Ks])
    grid_rows += [[design, int(K), int(R), rc.rho(f"K{K}_R{R}"), *rc.interval(f"K{K}_R{R}")] for K in Ks for R in Rs]
    what = {"fixed": f", fixed population, CTR {config['target_ctr']:.1%}", "pooled": ", pooled populations"}[design]
    out.figure(grid_figure(grid, Ks, Rs, T, int(config["n"]), what), f"fig6b_lcce_grid_{design}")

    full = v[:, col["lcce"]]

    def rel_to_full(m: str) -> float | str:
        if m in ("ece", "oracle_brier"):
            return ""
        return float(np.median(np.abs(v[:, col[m]] - full) / np.maximum(full, 1e-12)))

    variant_rows += [[design, m, mc.DISPLAY.get(m, m), rho, lo, hi, float(v[:, col[m]].mean()), rel_to_full(m)]
                     for m, rho, lo, hi in rc.rows(order=names)]
    paired_rows += [[design, *r] for r in rc.paired_rows()]

    def noise(a: str, b: str) -> float:
        x, y = v[:, col[a]], v[:, col[b]]
        return float(np.median(np.abs(x - y) / np.maximum(0.5 * (x + y), 1e-12)))

    noise_r1, noise_r4 = noise("K4_R1_ref", "K4_R1_again"), noise("lcce", "lcce_again")
    noise_rows += [[design, label, x, rc.rho(m), *rc.interval(m)] for label, x, m in (
        ("K4 R=1 (random restarts)", noise_r1, "K4_R1_ref"), ("K4 R=4 (paper)", noise_r4, "lcce"),
        ("K4 quantile-seeded (seed-free)", 0.0, "lcce_quantile"),
        ("K4 optimal 1-D k-means (seed-free)", 0.0, "lcce_optimal"))]
    return {"n_trials": T, "info": info, **design_summary(rc), "grid_rho": grid.tolist(),
            "restart_noise_R1": noise_r1, "restart_noise_R4": noise_r4,
            "median_rel_diff_quantile_vs_R4": rel_to_full("lcce_quantile"),
            "median_rel_diff_optimal_vs_R4": rel_to_full("lcce_optimal")}


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Fig 6b under every design of ``config["designs"]``, then Table 6."""
    grid_rows: list[list[Any]] = []
    variant_rows: list[list[Any]] = []
    paired_rows: list[list[Any]] = []
    noise_rows: list[list[Any]] = []
    designs = {d: _one_design(d, config, out, grid_rows, variant_rows, paired_rows, noise_rows)
               for d in config["designs"]}
    out.table("fig6b_lcce_grid", ["design", "K", "R", "spearman_rho", "ci_low", "ci_high"], grid_rows)
    out.table("spearman_lcce_variants", ["design", "column", "label", "spearman_rho", "ci_low", "ci_high", "mean",
                                         "median_rel_dev_from_lcce"], variant_rows, digits=5)
    out.table("paired_lcce", ["design", "metric_a", "metric_b", "rho_a_minus_rho_b", "ci_low", "ci_high",
                              "share_a_better"], paired_rows)
    out.table("restart_noise", ["design", "lcce variant", "median_rel_diff_between_two_evaluations",
                                "spearman_rho", "ci_low", "ci_high"], noise_rows, digits=5)
    return {"designs": designs, "table6": table6(config, out)}


main = entry_point(__name__)

if __name__ == "__main__":
    main()
