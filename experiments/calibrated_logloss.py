"""Calibrated Log Loss vs Log Loss for pipeline comparisons (seeds/002 §5 and Appendix B).

The metric-accuracy protocol of seeds/002 Eq. 8: run pipeline A (the better one by
construction) and pipeline B ``n_reps`` times each, and report the fraction of (A_i, B_j)
pairs in which a metric ranks A better.  Three settings:

(a) synthetic linear regression, Quadratic Loss (QL) vs Calibrated Quadratic Loss (CQL),
    A uses all 20 features, B drops the last one (Appendix B.1, Tables 7-8);
(b) synthetic logistic regression, Log Loss (LL) vs Calibrated Log Loss (CLL), same
    feature split (Appendix B.2, Tables 9-10), with ECE and LCCE added;
(c) small flax CTR pipelines on the ad-auction simulator that differ in features,
    architecture, batch norm, dropout and L2 weight, each trained once per seed
    (§5.3, Tables 1-6 and 11-12), with ECE and LCCE added.

In (a) and (b) the randomness is the training and test sample (re-drawn every run, as in
the paper); in (c) the data are fixed and the randomness is the initialisation and the
data order.  The LL of a run is computed on the whole test set (test-validation + rest),
the CLL on the rest after fitting one logit bias on the test-validation part (§3), as in
the paper.  Because the CLL is evaluated on half as many rows, the tables add "LL rest"
(QL rest): the plain loss on the same rows as the CLL, which separates the effect of the
bias correction from the effect of the smaller evaluation set.  In (c) the ground truth is
the Log Loss, as in the paper: in every comparison A is the pipeline with the lower mean LL.
LCCE is the deterministic variant (``init="quantile"``): seed-free and cheap under vmap.
The synthetic coefficients of the paper are not legible in the source text; the ones used
here are in the config and in ``provenance.json``.

Run: ``python -m experiments.calibrated_logloss [--quick | --paper] [--seed S] [--out DIR]``.
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

from calib_jax import metrics as M  # noqa: E402
from experiments import _pipelines as P  # noqa: E402

STUDY = "calibrated_logloss"

QUICK: dict[str, Any] = {
    "synthetic": {
        "d": 20, "n_train": 1000, "n_test": 20000, "tv_frac": 0.5,
        "rounds": 4, "n_reps": 30,
        "linear": {"intercept": 1.0, "noise_sd": 2.0, "beta_hi": 1.0, "beta_lo": 0.4},
        "logistic": {"intercept": -0.5, "beta_hi": 0.5, "beta_lo": 0.25},
        "ece_bins": 15, "lcce_clusters": 4,
    },
    "ctr": {
        "n_reps": 6, "batch_size": 256, "lr": 3e-3, "emb_dim": 8, "hidden": (64, 32),
        "tv_frac": 0.5,
        "sim_scale": "quick", "max_rows": 40000, "ece_bins": 15, "lcce_clusters": 4,
    },
}
PAPER: dict[str, Any] = {
    "synthetic": {**QUICK["synthetic"], "n_test": 50000, "rounds": 20, "n_reps": 100},
    "ctr": {**QUICK["ctr"], "n_reps": 30, "sim_scale": "paper", "max_rows": 400000},
}

# Pipelines of §5.3 as CTRNet knobs (see experiments._pipelines.CTRNet); A is the expected winner.
CTR_PIPELINES: dict[str, dict[str, Any]] = {
    "baseline": {},
    "remove dense": {"drop_dense": True},
    "remove sparse": {"drop_fields": ("position", "creative")},
    "smaller size": {"widths": (8, 4)},
    "BN": {"bn": 1.0},
    "dropout p=0.7": {"dropout": 0.7},
    "L2 1e-5": {"l2": 1e-5},
    "L2 1e-4": {"l2": 1e-4},
    "L2 1e-3": {"l2": 1e-3},
}
CTR_COMPARISONS: list[tuple[str, str]] = [
    ("baseline", "remove dense"),
    ("baseline", "remove sparse"),
    ("baseline", "smaller size"),
    ("BN", "baseline"),
    ("baseline", "dropout p=0.7"),
    ("baseline", "L2 1e-5"),
    ("baseline", "L2 1e-4"),
    ("baseline", "L2 1e-3"),
]


# --------------------------------------------------------------------------------------
# metric adapters (calib_jax.metrics)
# --------------------------------------------------------------------------------------


def _cll(logits: jax.Array, labels: jax.Array, tv_mask: jax.Array) -> jax.Array:
    return M.calibrated_log_loss(logits, labels, val_mask=tv_mask)


def _cql(preds: jax.Array, targets: jax.Array, tv_mask: jax.Array) -> jax.Array:
    return M.calibrated_quadratic_loss(preds, targets, val_mask=tv_mask)


def _ece(probs: jax.Array, labels: jax.Array, n_bins: int) -> jax.Array:
    return M.ece(probs, labels, n_bins=n_bins)


def _lcce(logits: jax.Array, labels: jax.Array, key: jax.Array, n_clusters: int) -> jax.Array:
    # the deterministic (quantile-initialised) LCCE: seed-free, and cheap to compile under vmap
    del key
    return M.lcce(logits, labels, n_clusters=n_clusters, init="quantile")


# --------------------------------------------------------------------------------------
# (a), (b) synthetic regressions
# --------------------------------------------------------------------------------------


def _beta(cfg: Mapping[str, Any], d: int) -> jax.Array:
    return jnp.linspace(cfg["beta_hi"], cfg["beta_lo"], d)


def synthetic_run(key: jax.Array, cfg: Mapping[str, Any], kind: str) -> dict[str, jax.Array]:
    """One run of pipelines A and B on fresh training and test samples (Appendix B).

    Returns scalar metrics ``{"A/QL", "A/CQL", "B/QL", ...}`` (linear) or
    ``{"A/LL", "A/CLL", "A/ECE", "A/LCCE", ...}`` (logistic).
    """
    d, n_tr, n_te = cfg["d"], cfg["n_train"], cfg["n_test"]
    sub = cfg[kind]
    beta = _beta(sub, d)
    k_tr, k_te, k_ytr, k_yte, k_l = jax.random.split(key, 5)
    out: dict[str, jax.Array] = {}
    n_tv = int(round(cfg["tv_frac"] * n_te))
    tv = jnp.arange(n_te) < n_tv
    # A and B share nothing but the distribution: each gets its own sample (the pairs of
    # Eq. 8 are independent runs).
    for name, k_off in (("A", 0), ("B", 1)):
        kk = [jax.random.fold_in(k, k_off) for k in (k_tr, k_te, k_ytr, k_yte, k_l)]
        x_tr = jax.random.normal(kk[0], (n_tr, d))
        x_te = jax.random.normal(kk[1], (n_te, d))
        f_tr = sub["intercept"] + x_tr @ beta
        f_te = sub["intercept"] + x_te @ beta
        cols = d if name == "A" else d - 1
        if kind == "linear":
            y_tr = f_tr + sub["noise_sd"] * jax.random.normal(kk[2], (n_tr,))
            y_te = f_te + sub["noise_sd"] * jax.random.normal(kk[3], (n_te,))
            w = P.fit_linear(x_tr[:, :cols], y_tr)
            pred = P.predict_affine(w, x_te[:, :cols])
            out[f"{name}/QL"] = jnp.mean((y_te - pred) ** 2)
            out[f"{name}/QL rest"] = jnp.mean(jnp.where(tv, 0.0, (y_te - pred) ** 2)) / (
                1.0 - n_tv / n_te)
            out[f"{name}/CQL"] = _cql(pred, y_te, tv)
        else:
            y_tr = jax.random.bernoulli(kk[2], jax.nn.sigmoid(f_tr)).astype(jnp.float32)
            y_te = jax.random.bernoulli(kk[3], jax.nn.sigmoid(f_te)).astype(jnp.float32)
            w = P.fit_logistic(x_tr[:, :cols], y_tr)
            z = P.predict_affine(w, x_te[:, :cols])
            out[f"{name}/LL"] = M.nll_logits(z, y_te)
            out[f"{name}/LL rest"] = M.nll_logits(z, y_te, weights=1.0 - tv.astype(z.dtype))
            out[f"{name}/CLL"] = _cll(z, y_te, tv)
            out[f"{name}/ECE"] = _ece(jax.nn.sigmoid(z), y_te, cfg["ece_bins"])
            out[f"{name}/LCCE"] = _lcce(z, y_te, kk[4], cfg["lcce_clusters"])
    return out


def synthetic_study(key: jax.Array, cfg: Mapping[str, Any], kind: str) -> dict[str, np.ndarray]:
    """``rounds`` rounds of ``n_reps`` runs (vmapped); arrays of shape (rounds, n_reps)."""
    run = jax.jit(jax.vmap(lambda k: synthetic_run(k, cfg, kind)))
    res: dict[str, list[np.ndarray]] = {}
    for r in range(cfg["rounds"]):
        keys = jax.random.split(jax.random.fold_in(key, r), cfg["n_reps"])
        for k, v in run(keys).items():
            res.setdefault(k, []).append(np.asarray(v))
    return {k: np.stack(v) for k, v in res.items()}


def accuracy_rows(res: Mapping[str, np.ndarray], metrics: Sequence[str]) -> tuple[list, list]:
    """Accuracy table (mean ± s.e. over rounds) and A's mean/std table (averaged over rounds)."""
    acc_row, stat_row = [], []
    for m in metrics:
        a, b = res[f"A/{m}"], res[f"B/{m}"]
        acc = np.asarray(jax.vmap(P.metric_accuracy)(jnp.asarray(a), jnp.asarray(b)))
        se = acc.std(ddof=1) / np.sqrt(acc.size) if acc.size > 1 else 0.0
        acc_row += [float(acc.mean()), float(se)]
        stat_row += [float(a.mean()), float(a.std(axis=1, ddof=1).mean())]
    return acc_row, stat_row


# --------------------------------------------------------------------------------------
# (c) flax CTR pipelines on the simulator
# --------------------------------------------------------------------------------------


def load_ctr_data(cfg: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
    """Logged simulator impressions split 80/20 (chronologically) into train and test."""
    tab = P.simulator_table(seed=seed, scale=cfg["sim_scale"], max_rows=cfg["max_rows"])
    n = tab["y"].shape[0]
    n_tr = int(0.8 * n)
    out: dict[str, np.ndarray] = {"cardinalities": tab["cardinalities"],
                                  "field_names": tab["field_names"]}
    for k in ("fields", "dense", "y"):
        out[f"train_{k}"], out[f"test_{k}"] = tab[k][:n_tr], tab[k][n_tr:]
    return out


def pipeline_hp(net: P.CTRNet, spec: Mapping[str, Any], field_names: Sequence[str]) -> dict:
    """Translate a pipeline spec of :data:`CTR_PIPELINES` into CTRNet knobs."""
    names = list(field_names)
    fm = np.ones(len(names), np.float32)
    for f in spec.get("drop_fields", ()):
        fm[names.index(f)] = 0.0
    widths = spec.get("widths", net.hidden)
    return P.default_hp(
        net,
        field_mask=jnp.asarray(fm),
        dense_mask=jnp.asarray(0.0 if spec.get("drop_dense") else 1.0),
        width_mask=tuple((jnp.arange(h) < w).astype(jnp.float32) for h, w in zip(net.hidden, widths)),
        bn=jnp.asarray(float(spec.get("bn", 0.0))),
        dropout=jnp.asarray(float(spec.get("dropout", 0.0))),
        l2=jnp.asarray(float(spec.get("l2", 0.0))),
    )


def ctr_study(key: jax.Array, names: Sequence[str], data: Mapping[str, np.ndarray],
              cfg: Mapping[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """Train every pipeline ``n_reps`` times (one vmap over pipelines x seeds); metrics per run.

    Different seeds change the initialisation, the data order and the dropout masks; the
    training and test data are the same for every run (as in seeds/002 §5.3).
    """
    f_tr, d_tr = jnp.asarray(data["train_fields"]), jnp.asarray(data["train_dense"])
    f_te, d_te = jnp.asarray(data["test_fields"]), jnp.asarray(data["test_dense"])
    y_tr, y_te = jnp.asarray(data["train_y"]), jnp.asarray(data["test_y"])
    net = P.CTRNet(cardinalities=tuple(int(c) for c in data["cardinalities"]),
                   emb_dim=cfg["emb_dim"], hidden=tuple(cfg["hidden"]))
    train = P.make_ctr_trainer(net, n_train=int(y_tr.shape[0]), batch_size=cfg["batch_size"],
                               lr=cfg["lr"])
    n_te, reps = int(y_te.shape[0]), cfg["n_reps"]
    # one fixed random test-validation half (the test rows are in time order)
    tv = jax.random.uniform(jax.random.fold_in(key, 999), (n_te,)) < cfg["tv_frac"]
    hps = P.stack_hp([pipeline_hp(net, CTR_PIPELINES[nm], data["field_names"])
                      for nm in names for _ in range(reps)])
    keys = jnp.stack([jax.random.fold_in(key, 1000 * i + r)
                      for i in range(len(names)) for r in range(reps)])

    def logits(k, hp):
        return P.ctr_logits(net, train(k, hp, f_tr, d_tr, y_tr), hp, f_te, d_te)

    def metrics(z, k):
        return {
            "LL": M.nll_logits(z, y_te),
            "LL rest": M.nll_logits(z, y_te, weights=1.0 - tv.astype(z.dtype)),
            "CLL": _cll(z, y_te, tv),
            "ECE": _ece(jax.nn.sigmoid(z), y_te, cfg["ece_bins"]),
            "LCCE": _lcce(z, y_te, jax.random.fold_in(k, 7), cfg["lcce_clusters"]),
        }

    # two programs (training, metrics): XLA compiles them much faster than one fused program
    zs = jax.jit(jax.vmap(logits))(keys, hps)
    res = jax.jit(jax.vmap(metrics))(zs, keys)
    return {nm: {m: np.asarray(v).reshape(len(names), reps)[i] for m, v in res.items()}
            for i, nm in enumerate(names)}


# --------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------

SYN_METRICS = {"linear": ("QL", "QL rest", "CQL"),
               "logistic": ("LL", "LL rest", "CLL", "ECE", "LCCE")}
CTR_METRICS = ("LL", "LL rest", "CLL", "ECE", "LCCE")


def _plot_distributions(res: Mapping[str, Mapping[str, np.ndarray]], pairs, out: Path) -> None:
    from calib_jax.plotting import plt, save_figure

    fig, axes = plt.subplots(len(pairs), 2, figsize=(8, 2.4 * len(pairs)), squeeze=False)
    for row, (a, b) in enumerate(pairs):
        for col, m in enumerate(("LL", "CLL")):
            ax = axes[row, col]
            for name in (a, b):
                ax.hist(res[name][m], bins=15, alpha=0.6, label=name)
            ax.set_title(f"{m}: {a} vs {b}", fontsize=9)
            ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out)


def run(config: Mapping[str, Any], out_dir: Path, *, seed: int = 0,
        parts: Sequence[str] = ("linear", "logistic", "ctr")) -> dict[str, Any]:
    """Run the study and write tables, figures and provenance into ``out_dir``."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    key = jax.random.key(seed)
    tables: dict[str, tuple] = {}
    summary: dict[str, Any] = {}

    for idx, kind in enumerate(("linear", "logistic")):
        if kind not in parts:
            continue
        cfg = config["synthetic"]
        res = synthetic_study(jax.random.fold_in(key, idx), cfg, kind)
        metrics = SYN_METRICS[kind]
        acc_row, stat_row = accuracy_rows(res, metrics)
        tables[f"{kind}_accuracy"] = (
            ["pipeline A", "pipeline B"] + [f"{m} {s}" for m in metrics for s in ("acc", "acc s.e.")],
            [[f"{cfg['d']} features", f"{cfg['d'] - 1} features", *acc_row]])
        tables[f"{kind}_mean_std"] = (
            [f"{m} {s}" for m in metrics for s in ("mean", "std")], [stat_row])
        summary[kind] = {"accuracy": dict(zip(metrics, acc_row[::2])),
                         "std": dict(zip(metrics, stat_row[1::2]))}

    if "ctr" in parts:
        cfg = config["ctr"]
        data = load_ctr_data(cfg, seed)
        needed = sorted({n for pair in CTR_COMPARISONS for n in pair})
        res_ctr = ctr_study(jax.random.fold_in(key, 100), needed, data, cfg)
        rows, pairs = [], []
        for a, b in CTR_COMPARISONS:
            # the ground truth is the Log Loss (seeds/002 §5.3): A is the pipeline with the
            # lower mean LL over its runs, whatever the expected winner was
            if res_ctr[b]["LL"].mean() < res_ctr[a]["LL"].mean():
                a, b = b, a
            pairs.append((a, b))
            rows.append([a, b] + [float(P.metric_accuracy(jnp.asarray(res_ctr[a][m]),
                                                          jnp.asarray(res_ctr[b][m])))
                                  for m in CTR_METRICS])
        tables["ctr_accuracy"] = (["pipeline A", "pipeline B"] + [f"{m} acc" for m in CTR_METRICS],
                                  rows)
        tables["ctr_mean_std"] = (
            ["pipeline"] + [f"{m} {s}" for m in CTR_METRICS for s in ("mean", "std")],
            [[name] + [v for m in CTR_METRICS for v in P.summarise(res_ctr[name][m])]
             for name in needed])
        summary["ctr"] = {f"{a} vs {b}": dict(zip(CTR_METRICS, r[2:]))
                          for (a, b), r in zip(pairs, rows)}
        _plot_distributions(res_ctr, [("BN", "baseline"), ("baseline", "L2 1e-3")],
                            out_dir / "ctr_ll_vs_cll")

    P.write_outputs(out_dir, config, tables, seed=seed, t0=t0, extra={"summary": summary})
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = P.build_parser(STUDY, __doc__.splitlines()[0])
    args = parser.parse_args(argv)
    config = PAPER if args.scale == "paper" else QUICK
    return run(config, args.out, seed=args.seed)


if __name__ == "__main__":
    main()
