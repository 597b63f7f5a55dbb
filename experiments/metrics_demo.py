"""Metric panel and decompositions on a synthetic CTR population (the foundation demo).

A population with a categorical field ("media") and true CTRs π is scored by a model whose
logits are over-confident (temperature 0.7) and carry field-wise biases that cancel
globally.  The script computes every label-based and oracle metric of the library, the Brier
grouping decomposition on four partitions (equal-width bins, logit clusters, the field, a
soft partition), Murphy's decomposition, the NLL grouping decomposition and CORP, and
writes a table, a figure and provenance into figures/metrics_demo/.

    python -m experiments.metrics_demo [--smoke | --quick] [--set n=200000] [--seed 0] [--out DIR]

It has no paper scale: ``--paper`` runs the quick settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import decompositions as D
from calib_jax import io
from calib_jax import metrics as M
from calib_jax.partitions import assign_1d, kmeans_1d, uniform_bins
from calib_jax.plotting import plt
from experiments._study import Output, entry_point

N_FIELD = 8
PRESETS: dict[str, dict[str, Any]] = {"smoke": {"n": 5_000}, "quick": {"n": 200_000},
                                      "paper": {"n": 200_000}}


def make_population(key: jax.Array, n: int) -> dict[str, jax.Array]:
    """True CTRs with field main effects, a miscalibrated model, and clicks drawn from π."""
    k_f, k_x, k_y, k_e = jax.random.split(key, 4)
    field = jax.random.randint(k_f, (n,), 0, N_FIELD)
    effect = jnp.linspace(-0.8, 0.8, N_FIELD)
    x = jax.random.normal(k_x, (n,))
    true_logit = -3.4 + 0.9 * x + effect[field]
    oracle = jax.nn.sigmoid(true_logit)
    # model: over-confident, with opposite biases on even/odd media that cancel on average
    field_bias = jnp.where(field % 2 == 0, 0.35, -0.35)
    logits = (true_logit + 3.4) / 0.7 - 3.4 + field_bias + 0.3 * jax.random.normal(k_e, (n,))
    labels = jax.random.bernoulli(k_y, oracle).astype(jnp.float32)
    return {"field": field, "oracle": oracle, "logits": logits, "probs": jax.nn.sigmoid(logits), "labels": labels}


def metric_panel(pop: dict[str, jax.Array], key: jax.Array) -> dict[str, float]:
    p, y, o, t, f = pop["probs"], pop["labels"], pop["logits"], pop["oracle"], pop["field"]
    k1, k2, k3 = jax.random.split(key, 3)
    vals = {
        "brier": M.brier(p, y),
        "nll": M.nll_logits(o, y),
        "mae": M.mae(p, y),
        "ece": M.ece(p, y),
        "ece_quantile": M.ece(p, y, strategy="quantile"),
        "mce": M.ece(p, y, norm="max"),
        "lcce": M.lcce(o, y, key=k1),
        "lcce_deterministic": M.lcce(o, y, init="optimal"),
        "lcce_random": M.lcce_random(p, y, key=k2),
        "field_ece": M.field_ece(p, y, f, n_groups=N_FIELD),
        "field_rce": M.field_rce(p, y, f, n_groups=N_FIELD),
        "bias": M.bias(p, y),
        "abs_bias": M.abs_bias(p, y, f, n_groups=N_FIELD),
        "auc": M.auc(p, y),
        "calibrated_log_loss": M.calibrated_log_loss(o, y, key=k3),
        "oracle_brier": M.oracle_brier(p, t),
        "oracle_mae": M.oracle_mae(p, t),
        "oracle_kl": M.oracle_kl(p, t),
        "oracle_alpha_divergence": M.oracle_alpha_divergence(p, t),
        "oracle_chebyshev": M.oracle_chebyshev(p, t),
        "pearson": M.pearson(p, t),
        "spearman": M.spearman(p, t),
    }
    return {k: float(v) for k, v in vals.items()}


def decomposition_rows(pop: dict[str, jax.Array]) -> list[list[Any]]:
    p, y, o, f = pop["probs"], pop["labels"], pop["logits"], pop["field"]
    km = kmeans_1d(o, n_clusters=4, init="optimal")
    soft = jax.nn.softmax(jnp.stack([-(o - c) ** 2 for c in km.centroids], axis=1), axis=1)
    parts = {
        "15 equal-width bins": (uniform_bins(p, n_bins=15), 15),
        "4 logit clusters": (assign_1d(o, km.thresholds), 4),
        "media field": (f, N_FIELD),
        "soft logit clusters": (soft, None),
    }
    rows = []
    for name, (g, k) in parts.items():
        d = D.brier_grouping(p, y, g, n_groups=k)
        rows.append(["Brier grouping", name, d.score, d.unc, d.rel, d.res, d.delta, d.unc + d.rel - d.res + d.delta])
    m = D.murphy(p, y)
    rows.append(["Murphy", "distinct forecasts", m.score, m.unc, m.rel, m.res, m.delta,
                 m.unc + m.rel - m.res + m.delta])
    e = D.nll_grouping(p, y, parts["4 logit clusters"][0], n_groups=4)
    rows.append(["NLL grouping (CURV-COV as Δ)", "4 logit clusters", e.score, e.unc, e.rel, e.res, e.curv - e.cov,
                 e.unc + e.rel - e.res + e.curv - e.cov])
    c = D.corp(p, y)
    rows.append(["CORP (MCB, DSC)", "isotonic", c.score, c.unc, c.mcb, c.dsc, 0.0, c.mcb - c.dsc + c.unc])
    return [[r[0], r[1], *[float(v) for v in r[2:]]] for r in rows]


def plot_demo(pop: dict[str, jax.Array], rows: list[list[Any]]):
    p, y = np.asarray(pop["probs"]), np.asarray(pop["labels"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ids = np.asarray(uniform_bins(pop["probs"], n_bins=15))
    cnt = np.bincount(ids, minlength=15)
    keep = cnt > 0
    conf = np.bincount(ids, weights=p, minlength=15)[keep] / cnt[keep]
    acc = np.bincount(ids, weights=y, minlength=15)[keep] / cnt[keep]
    a1.plot([0, 1], [0, 1], "k--", lw=1)
    a1.plot(conf, acc, "o-", label="model")
    for c_, a_, n_ in zip(conf, acc, cnt[keep]):
        a1.annotate(f"{n_}", (c_, a_), fontsize=7, xytext=(3, -9), textcoords="offset points")
    a1.set(xlabel="mean score in bin", ylabel="click rate in bin", title="Reliability (15 bins, counts shown)")
    a1.set_xlim(0, max(conf.max(), acc.max()) * 1.1)
    a1.set_ylim(0, max(conf.max(), acc.max()) * 1.1)
    brier_rows = [r for r in rows if r[0] == "Brier grouping"]
    names = [r[1] for r in brier_rows]
    x = np.arange(len(names))
    for j, (lab, sign) in enumerate([("REL", 1), ("−RES", -1), ("Δ", 1)]):
        a2.bar(x + (j - 1) * 0.25, [sign * r[4 + j] for r in brier_rows], width=0.25, label=lab)
    a2.axhline(0, color="k", lw=0.8)
    a2.set_xticks(x, names, rotation=15, fontsize=8)
    a2.set(title="Brier = UNC + REL − RES + Δ per partition", ylabel="term")
    a2.legend()
    fig.tight_layout()
    return fig


def report(summary: Mapping[str, Any]) -> str:
    return "\n" + io.markdown_table(["metric", "value"], [[k, v] for k, v in summary["panel"].items()],
                                    digits=5)


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    key = jax.random.PRNGKey(config["seed"])
    k_pop, k_met = jax.random.split(key)
    pop = make_population(k_pop, config["n"])
    panel = metric_panel(pop, k_met)
    rows = decomposition_rows(pop)
    out.table("metrics", ["metric", "value"], [[k, v] for k, v in panel.items()], digits=5)
    out.table("decompositions",
              ["decomposition", "partition", "score", "UNC", "REL/MCB", "RES/DSC", "Δ", "sum of terms"],
              rows, digits=6)
    out.figure(plot_demo(pop, rows), "demo")
    return {"panel": panel, "decompositions": rows}



main = entry_point(__name__)

if __name__ == "__main__":
    main()
