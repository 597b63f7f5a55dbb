"""Metric accuracy for pipeline comparisons (seeds/002 Definition 3, Eq. 8) for every metric.

A *pipeline* is a model-variant law on a fixed population (the "world" is drawn once from
the seed): a fixed distortion (logit noise, temperature, field or regime bias, monotone
non-linearity, selection bias) plus a *volatile* global logit bias ~ N(0, bias_sd^2) redrawn
every run — the run-to-run randomness of the final-layer bias that motivates the
Calibrated Log Loss.  Each run also draws fresh rows and labels.

For every pair (A, B) where A is better by construction we run both pipelines ``n_runs``
times and estimate, for every metric M of the panel, the accuracy of Eq. 8

    Acc(M) = 1/(N_A N_B) sum_i sum_j 1{M(A_i) < M(B_j)}   (ties 1/2)

(``calib_jax.montecarlo.metric_accuracy``).  The ground truth is the expected log loss of a
run under the oracle CTRs, mean_i H(pi_i, p_i) (column ``true_LL``): pipelines are ordered
by its mean over runs, and its own accuracy shows how separable the pair is.

Sign convention: every panel column is a loss (AUC, Pearson, Spearman as 1 - value).

Run: ``python -m experiments.metric_accuracy [--quick | --paper] [--seed S] [--out DIR]``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calib_jax import io as cio  # noqa: E402
from calib_jax import montecarlo as mc  # noqa: E402
from calib_jax.plotting import save_figure  # noqa: E402
from calib_jax.plotting.heatmap import SIGN_NOTE, annotated_heatmap  # noqa: E402
from experiments.mc_spearman import (  # noqa: E402
    build_parser,
    checkpoint_dir,
    config_from_args,
    enable_compile_cache,
    full_panel_config,
    jsonable_config,
    write_provenance,
)

STUDY = "metric_accuracy"
QUICK: dict[str, Any] = {"n": 10_000, "n_trials": 64, "chunk_size": 16, "checkpoint": False}
PAPER: dict[str, Any] = {"n": 100_000, "n_trials": 500, "chunk_size": 10, "checkpoint": True}

BASE = {"scale": 1.0, "bias_sd": 0.2, "field_amp": 0.0, "regime_amp": 0.0, "noise_sd": 0.3,
        "nonlinear": 0.0, "selection": 0.0}
#: pipelines: name -> overrides of BASE
PIPELINES: dict[str, dict[str, float]] = {
    "base": {},
    "noisier logits (0.45)": {"noise_sd": 0.45},
    "temperature (slope 0.8)": {"scale": 0.8},
    "field biases (0.3)": {"field_amp": 0.3},
    "regime bias (0.3)": {"regime_amp": 0.3},
    "non-linear (0.4)": {"nonlinear": 0.4},
    "selection bias (2.0)": {"selection": 2.0},
}
PAIRS = [("base", b) for b in PIPELINES if b != "base"]
_FIELDS = ("scale", "bias_sd", "field_amp", "regime_amp", "noise_sd", "nonlinear", "selection")


def pipeline_table() -> np.ndarray:
    return np.array([[{**BASE, **PIPELINES[p]}[f] for f in _FIELDS] for p in PIPELINES],
                    dtype=np.float32)


def make_accuracy_trial(n: int, world_key: jax.Array, metrics):
    """``key -> (values (P, M), true log loss (P,))``: one run of every pipeline."""
    table = jnp.asarray(pipeline_table())
    scenario, variant = mc.ScenarioConfig(), mc.VariantConfig()

    def trial(key):
        def one(p):
            k = jax.random.fold_in(key, p)
            kb, krows, kmet = jax.random.split(k, 3)
            s, bsd, fa, ra, ns, nl, sel = (table[p, i] for i in range(len(_FIELDS)))
            params = mc.VariantParams(scale=s, bias=bsd * jax.random.normal(kb), field_amp=fa,
                                      regime_amp=ra, noise_sd=ns, nonlinear=nl, selection=sel)
            d = mc.sample_trial_data(world_key, n, scenario, variant, params=params,
                                     row_key=krows)
            pi = d.oracle
            true_ll = -jnp.mean(pi * jax.nn.log_sigmoid(d.logits)
                                + (1.0 - pi) * jax.nn.log_sigmoid(-d.logits))
            return mc.evaluate(d, kmet, metrics), true_ll

        return jax.lax.map(one, jnp.arange(table.shape[0]))

    return trial


def run(config: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {**config, **full_panel_config(), "pipelines": {p: {**BASE, **o} for p, o in
                                                            PIPELINES.items()}}
    names = list(mc.PanelConfig().metrics)
    seed = int(config["seed"])
    world = jax.random.fold_in(jax.random.key(seed), 10**6)
    trial = make_accuracy_trial(int(config["n"]), world, mc.metric_panel(mc.PanelConfig()))
    values, true_ll = mc.run_trials(trial, jax.random.key(seed), int(config["n_trials"]),
                                    chunk_size=int(config["chunk_size"]),
                                    progress=bool(config.get("progress", True)),
                                    checkpoint_dir=checkpoint_dir(STUDY, config),
                                    config=jsonable_config(config))
    values = np.asarray(values, np.float64)  # (runs, P, M)
    true_ll = np.asarray(true_ll, np.float64)  # (runs, P)
    pidx = {p: i for i, p in enumerate(PIPELINES)}
    cols = ["true_LL", *names]
    acc = np.zeros((len(PAIRS), len(cols)))
    rows, flipped = [], []
    for r, (a, b) in enumerate(PAIRS):
        ia, ib = pidx[a], pidx[b]
        if true_ll[:, ia].mean() > true_ll[:, ib].mean():  # order by the ground truth
            ia, ib = ib, ia
            flipped.append(f"{a} vs {b}")
        acc[r, 0] = float(mc.metric_accuracy(true_ll[:, ia], true_ll[:, ib]))
        for j in range(len(names)):
            acc[r, j + 1] = float(mc.metric_accuracy(values[:, ia, j], values[:, ib, j]))
        rows.append([f"{list(PIPELINES)[ia]} < {list(PIPELINES)[ib]}", *map(float, acc[r])])
    cio.write_table(out_dir / "metric_accuracy", ["pair (A better)", *cols], rows)
    ll, cll = names.index("nll"), names.index("calibrated_log_loss")
    std_rows = [[p, float(values[:, i, ll].mean()), float(values[:, i, cll].mean()),
                 float(values[:, i, ll].std(ddof=1)), float(values[:, i, cll].std(ddof=1))]
                for p, i in pidx.items()]
    cio.write_table(out_dir / "ll_vs_cll_mean_std",
                    ["pipeline", "LL mean", "CLL mean", "LL std", "CLL std"], std_rows, digits=5)
    disp = ["true LL*", *[mc.DISPLAY[m] for m in names]]
    fig = annotated_heatmap(acc, [r[0] for r in rows], disp, vmin=0.0, vmax=1.0, cmap="viridis",
                            colorbar_label="accuracy (Eq. 8)",
                            title=(f"Metric accuracy, seeds/002 Eq. 8 ({config['n_trials']} runs "
                                   f"per pipeline, n = {config['n']:,})"),
                            caption=SIGN_NOTE + "; * = needs the oracle CTR")
    save_figure(fig, out_dir / "metric_accuracy")
    mean_acc = acc.mean(axis=0)
    summary = {"mean_accuracy": {c: float(mean_acc[j]) for j, c in enumerate(cols)},
               "ll_mean_accuracy": float(mean_acc[ll + 1]),
               "cll_mean_accuracy": float(mean_acc[cll + 1]),
               "pairs_flipped_by_ground_truth": flipped}
    write_provenance(out_dir, config, t0, extra={"summary": summary})
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser(STUDY, __doc__.splitlines()[0]).parse_args(argv)
    enable_compile_cache()
    summary = run(config_from_args(args, QUICK, PAPER), args.out)
    print(f"[{STUDY}] mean accuracy: LL {summary['ll_mean_accuracy']:.3f}, "
          f"CLL {summary['cll_mean_accuracy']:.3f}")
    return summary


if __name__ == "__main__":
    main()
