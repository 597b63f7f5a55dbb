"""Metric accuracy for pipeline comparisons ("Calibration-then-Calculation" Definition 3, Eq. 8) for every metric.

A *pipeline* is a law of models on one fixed population (the fixed design's world, mean
oracle CTR ``target_ctr``; :mod:`calib_jax.montecarlo.designs`): a fixed distortion (logit
noise, temperature, field or regime bias, monotone non-linearity) plus a *volatile* global
logit bias ~ N(0, bias_sd^2) redrawn for every model — the run-to-run randomness of the
final-layer bias that motivates the Calibrated Log Loss ("Calibration-then-Calculation" §3).

Protocol of "Calibration-then-Calculation" Appendix B: in each *round* one test set is drawn (rows and labels,
fixed for the round); every pipeline is "trained" ``n_runs`` times (a new model each time:
new volatile bias, new noise, new field-bias signs) and every model is scored on that same
test set. For every pair (A, B), A better by construction, and every metric M of the panel
the round's accuracy is Eq. 8,

    Acc(M) = 1/(N_A N_B) sum_i sum_j 1{M(A_i) < M(B_j)}   (ties 1/2),

and the study reports the mean over independent rounds with a 95% interval (normal, from
the standard error over rounds), and the paired difference Acc(CLL) - Acc(LL) over rounds.
The ground truth is the expected log loss of a model under the oracle CTRs on the round's
rows, mean_i H(pi_i, p_i) (column ``true_LL``); pipelines are ordered by its mean.

Departure (named): the auction-selection pipeline of the other Monte Carlo studies is left
out, because selection changes *which* rows are logged and so cannot share a fixed test set.

Sign convention: every panel column is a loss (AUC, Pearson, Spearman as 1 - value).

Run: ``python -m experiments.metric_accuracy [--smoke | --quick | --paper]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import montecarlo as mc
from calib_jax.plotting.heatmap import SIGN_NOTE, annotated_heatmap
from experiments._study import Output, entry_point

PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {"n": 500, "n_rounds": 4, "n_runs": 3, "chunk_size": 4, "checkpoint": False,
              "target_ctr": 0.03, "metrics": list(mc.SMALL_PANEL)},
    "quick": {"n": 10_000, "n_rounds": 40, "n_runs": 8, "chunk_size": 8, "checkpoint": False,
              "target_ctr": 0.03, "metrics": None},
    "paper": {"n": 100_000, "n_rounds": 100, "n_runs": 10, "chunk_size": 2, "checkpoint": True,
              "target_ctr": 0.03, "metrics": None},
}

BASE = {"scale": 1.0, "bias_sd": 0.2, "field_amp": 0.0, "regime_amp": 0.0, "noise_sd": 0.3,
        "nonlinear": 0.0}
#: pipelines: name -> overrides of BASE
PIPELINES: dict[str, dict[str, float]] = {
    "base": {},
    "noisier logits (0.45)": {"noise_sd": 0.45},
    "temperature (slope 0.8)": {"scale": 0.8},
    "field biases (0.3)": {"field_amp": 0.3},
    "regime bias (0.3)": {"regime_amp": 0.3},
    "non-linear (0.4)": {"nonlinear": 0.4},
}
PAIRS = [("base", b) for b in PIPELINES if b != "base"]
_FIELDS = ("scale", "bias_sd", "field_amp", "regime_amp", "noise_sd", "nonlinear")
#: the columns the study's question is about (appended to a ``metrics`` setting that lacks them)
REQUIRED = ("nll", "calibrated_log_loss")


def pipeline_table() -> np.ndarray:
    return np.array([[{**BASE, **PIPELINES[p]}[f] for f in _FIELDS] for p in PIPELINES], dtype=np.float32)


def make_round(n: int, n_runs: int, world: mc.FixedWorld, metrics, scenario=mc.ScenarioConfig()):
    """``key -> (values (P, R, M), true log loss (P, R))``: one round of "Calibration-then-Calculation" App. B —
    one test set (rows and labels), every pipeline's ``n_runs`` models scored on it."""
    table = jnp.asarray(pipeline_table())
    P = table.shape[0]

    def one_round(key):
        k_rows, k_lab, k_models, k_metric = jax.random.split(key, 4)
        pop = mc.sample_population(world.key, n, scenario, row_key=k_rows, intercept=world.intercept)
        labels = jax.random.bernoulli(k_lab, pop.oracle).astype(pop.eta.dtype)

        def model(pr):
            p = pr // n_runs
            k = jax.random.fold_in(k_models, pr)
            kb, kapply, knoise = jax.random.split(k, 3)
            s, bsd, fa, ra, ns, nl = (table[p, i] for i in range(len(_FIELDS)))
            params = mc.VariantParams(scale=s, bias=bsd * jax.random.normal(kb), field_amp=fa,
                                      regime_amp=ra, noise_sd=ns, nonlinear=nl, selection=jnp.zeros(()))
            o = mc.apply_variant(kapply, pop, params, scenario.n_media, row_key=knoise)
            d = mc.TrialData(logits=o, probs=jax.nn.sigmoid(o), labels=labels, oracle=pop.oracle,
                             fields=pop.fields, regime=pop.regime, params=params)
            true_ll = -jnp.mean(pop.oracle * jax.nn.log_sigmoid(o) + (1.0 - pop.oracle) * jax.nn.log_sigmoid(-o))
            # one metric key per round: the Calibrated Log Loss's test-validation split (and
            # LCCE's restarts) are part of the round's test set, shared by every model
            return mc.evaluate(d, k_metric, metrics), true_ll

        vals, tll = jax.lax.map(model, jnp.arange(P * n_runs))
        return vals.reshape(P, n_runs, -1), tll.reshape(P, n_runs)

    return one_round


def _accuracy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Eq. 8 per round: a, b (rounds, runs) -> (rounds,), ties one half."""
    d = a[:, :, None] - b[:, None, :]
    return np.mean(np.where(d < 0, 1.0, np.where(d == 0, 0.5, 0.0)), axis=(1, 2))


def _mean_ci(x: np.ndarray) -> tuple[float, float, float]:
    m = float(np.mean(x))
    se = float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")
    return m, m - 1.96 * se, m + 1.96 * se


def report(summary: Mapping[str, Any]) -> str:
    d = summary["cll_minus_ll"]
    return (f"mean accuracy over pairs: LL {summary['ll_mean_accuracy']:.3f}, CLL {summary['cll_mean_accuracy']:.3f}; "
            f"CLL - LL {d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] ({summary['n_rounds']} rounds)")


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    metrics = config["metrics"]
    if metrics is not None:  # the study compares these two: always in the panel, after the user's columns
        metrics = [*metrics, *(m for m in REQUIRED if m not in metrics)]
    panel = mc.panel_for(metrics)
    names = list(panel.metrics)
    seed = int(config["seed"])
    world = mc.fixed_world(mc.world_key(seed), target_ctr=float(config["target_ctr"]))
    record = {**mc.panel_record(panel), "pipelines": {p: {**BASE, **o} for p, o in PIPELINES.items()},
              "design": {"design": "fixed", "target_ctr": float(config["target_ctr"]),
                         "intercept": float(np.asarray(world.intercept))}}
    out.record.update(record)
    one_round = make_round(int(config["n"]), int(config["n_runs"]), world, mc.metric_panel(panel))
    values, true_ll = mc.run_trials(one_round, jax.random.key(seed), int(config["n_rounds"]),
                                    chunk_size=int(config["chunk_size"]), progress=out.progress,
                                    checkpoint_dir=out.checkpoint_dir(config), config={**config, **record})
    values = np.asarray(values, np.float64)  # (rounds, P, R, M)
    true_ll = np.asarray(true_ll, np.float64)  # (rounds, P, R)
    pidx = {p: i for i, p in enumerate(PIPELINES)}
    cols = ["true_LL", *names]
    acc = np.zeros((len(PAIRS), len(cols), values.shape[0]))  # pair x metric x round
    labels, flipped = [], []
    for r, (a, b) in enumerate(PAIRS):
        ia, ib = pidx[a], pidx[b]
        if true_ll[:, ia].mean() > true_ll[:, ib].mean():  # order by the ground truth
            ia, ib = ib, ia
            flipped.append(f"{a} vs {b}")
        labels.append(f"{list(PIPELINES)[ia]} < {list(PIPELINES)[ib]}")
        acc[r, 0] = _accuracy(true_ll[:, ia], true_ll[:, ib])
        for j in range(len(names)):
            acc[r, j + 1] = _accuracy(values[:, ia, :, j], values[:, ib, :, j])
    mean = acc.mean(axis=2)
    rows = [[labels[r], c, *_mean_ci(acc[r, j])] for r in range(len(PAIRS)) for j, c in enumerate(cols)]
    out.table("metric_accuracy_long", ["pair (A better)", "metric", "accuracy", "ci_low", "ci_high"], rows)
    out.table("metric_accuracy", ["pair (A better)", *cols], [[labels[r], *map(float, mean[r])]
                                                              for r in range(len(PAIRS))])
    ll, cll = names.index("nll") + 1, names.index("calibrated_log_loss") + 1
    diff = acc[:, cll].mean(axis=0) - acc[:, ll].mean(axis=0)  # per round, averaged over pairs
    per_pair = [[labels[r], *_mean_ci(acc[r, ll]), *_mean_ci(acc[r, cll]), *_mean_ci(acc[r, cll] - acc[r, ll])]
                for r in range(len(PAIRS))]
    out.table("ll_vs_cll_accuracy", ["pair (A better)", "LL acc", "LL lo", "LL hi", "CLL acc", "CLL lo", "CLL hi",
                                     "CLL - LL", "lo", "hi"], per_pair)
    std_rows = [[p, float(values[:, i, :, ll - 1].mean()), float(values[:, i, :, cll - 1].mean()),
                 float(values[:, i, :, ll - 1].std(axis=1, ddof=1).mean()),
                 float(values[:, i, :, cll - 1].std(axis=1, ddof=1).mean())] for p, i in pidx.items()]
    out.table("ll_vs_cll_mean_std", ["pipeline", "LL mean", "CLL mean", "LL std within round",
                                     "CLL std within round"], std_rows, digits=5)
    disp = ["true LL*", *panel.labels]
    fig = annotated_heatmap(mean, labels, disp, vmin=0.0, vmax=1.0, cmap="viridis",
                            colorbar_label="accuracy (Eq. 8)",
                            title=(f"Metric accuracy, Calibration-then-Calculation Eq. 8 "
                                   f"({config['n_rounds']} rounds x "
                                   f"{config['n_runs']} runs per pipeline, n = {config['n']:,})"),
                            caption=SIGN_NOTE + "; * = needs the oracle CTR")
    out.figure(fig, "metric_accuracy")
    m_all = acc.mean(axis=(0, 2))
    d_mean, d_lo, d_hi = _mean_ci(diff)
    return {"n_rounds": int(values.shape[0]),
            "mean_accuracy": {c: float(m_all[j]) for j, c in enumerate(cols)},
            "ll_mean_accuracy": float(m_all[ll]), "cll_mean_accuracy": float(m_all[cll]),
            "cll_minus_ll": {"mean": d_mean, "lo": d_lo, "hi": d_hi},
            "pairs_flipped_by_ground_truth": flipped}


main = entry_point(__name__)

if __name__ == "__main__":
    main()
