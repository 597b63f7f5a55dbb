"""Calibration of top-N recommendations: Original vs TNF (top-N calibration (Sato) §5).

Data: the simulator's fully observed mode
(:func:`calib_jax.data.simulator.simulate_full_matrix`, with a raised intercept so that
the preference rate of top-ranked items is in the tens of percent): every user x item pair
has an oracle click probability and a click drawn from it, like the KuaiRec small matrix.
The pairs are split 60/20/20 at random within each user (train / validation / test); two
recommenders are trained with optax on the training pairs (biased matrix factorisation and
a neural collaborative filter); items are ranked per user within each split by the
recommender's score.

Calibrators (``calib_jax.calibrators``): histogram binning (15 equal-mass bins, as in the
paper's appendix), isotonic regression, Platt scaling and beta calibration.

* **Original**: one calibrator fitted on every validation pair.
* **TNF** (top-N calibration (Sato) §4.2, ``calib_jax.calibrators.top_n``): the validation top-N of
  every user is cut into ``n_g`` rank groups; one calibrator per group, fitted with
  weights :math:`(1/r)^\\alpha`; a test item ranked r in the top-N is calibrated by its group's calibrator.

Metrics: ECE@N (eq. 2) and RDECE@N (eq. 3) from ``calib_jax.metrics`` on the test top-N
(N = 20), mean ± std over repeated random splits (each a fresh split, recommender and
calibrator fit, so the repeats are independent replicates); the claim "TNF lowers ECE@N"
gets the paired difference TNF − original per repeat with its t-interval
(``paired_tnf_minus_original``, ``experiments._pipelines.paired_t_interval``); sensitivity to alpha and n_g (first
recommender, first split); ECE@N for N = 5..50. Vanilla (the sigmoid of the recommender's
logit) is shown as a reference.

Departures from the paper's protocol (§5.1 and Appendix A), each with its reason:

* **Data.** KuaiRec's small matrix (1,411 users x 3,327 items, fully observed) cannot be
  downloaded here; the stand-in is the simulator's fully observed matrix, 1,400 users x
  2,000 items at paper scale (2.8M pairs). The item count is cut to 2,000 so that the whole
  study (20 recommender trainings) finishes in under 30 minutes on a 2-core CPU (1,093 s
  measured; the full item count would add about two thirds to the training). Top-N
  calibration only looks at each user's 20 best items, and 2,000 items still leave every
  user 400 validation pairs. ML-1M (five-star ratings, Table 1) has no stand-in: the study covers the implicit-feedback
  task (Table 2) only.
* **Recommenders.** MF (biased matrix factorisation) and NCF, trained with Adam in optax;
  the paper used Cornac's and Microsoft Recommenders' defaults for ItemKNN, MF, BPR, NCF and
  LightGCN. Their default hyper-parameters are not reproduced; the same two models are used
  for every calibrator, so the TNF-minus-original comparison is paired.
* **Calibrators.** Histogram binning (15 equal-mass bins, as Appendix A), isotonic, Platt
  and beta calibration; Gaussian and Gamma calibration and the VAD baseline are not built.
* **ECE@N bins.** A fixed 15 equal-mass bins; the paper's main tables pick the largest bin
  count that keeps the reliability curve monotone, and its footnote 7 reports that a fixed
  count gave similar results.
* **Sensitivity** (Fig 4): alpha and n_g are swept on the first split of one recommender
  (paper preset: NCF with beta calibration, the paper's KuaiRec pair), without intervals.
* **Intervals** (not in the paper): the paired t-interval over the 10 independent splits.

The provenance records the seconds of each phase (``phase_seconds``: the matrix, recommender
training, calibrator fits and metrics, the sensitivity sweeps).

Run: ``python -m experiments.topn_calibration [--smoke | --quick | --paper] [--seed S]
[--out DIR]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import calibrators as C
from calib_jax import metrics as M
from calib_jax._src import mappings
from calib_jax.calibrators import top_n as TNF
from experiments import _pipelines as P
from experiments._study import Output, PhaseClock, entry_point

QUICK: dict[str, Any] = {
    "n_users": 300, "n_items": 400, "sim": "tiny", "intercept": -1.5, "repeats": 3,
    "top_n": 20, "n_bins": 15, "alpha": 1.0, "recommenders": ("MF", "NCF"), "epochs": 5, "batch_size": 512, "lr": 1e-2,
    "l2": 1e-6, "dim": 16,
    "calibrators": ("histogram_binning", "isotonic", "platt", "beta"),
    "alphas": (0.0, 0.2, 0.5, 1.0, 2.0, 3.0), "n_groups": (1, 2, 4, 5, 10, 20),
    "sweep_calibrator": "isotonic", "ns": (5, 10, 20, 30, 40, 50),
}
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {**QUICK, "n_users": 40, "n_items": 60, "repeats": 1, "recommenders": ("MF",),
              "epochs": 1, "batch_size": 256, "top_n": 5, "calibrators": ("platt", "isotonic"),
              "alphas": (0.0, 1.0), "n_groups": (1, 5), "ns": (5, 10)},
    "quick": QUICK,
    # the sensitivity sweeps of Fig 4 on the paper's KuaiRec pair (NCF, beta calibration)
    "paper": {**QUICK, "n_users": 1400, "n_items": 2000, "sim": "default", "repeats": 10,
              "epochs": 15, "sweep_recommender": "NCF", "sweep_calibrator": "beta"},
}

_HYPER = {"histogram_binning": {"n_bins": 15, "strategy": "quantile"}}


def make_matrix(cfg: Mapping[str, Any], seed: int):
    """The fully observed oracle matrix (users x items) from the simulator."""
    from calib_jax.data import simulator as sim

    if cfg["sim"] == "tiny":
        scfg = sim.tiny_config(n_ads=max(cfg["n_items"], 300),
                               n_users=max(cfg["n_users"], 2000), n_advertisers=30,
                               intercept=cfg["intercept"])
    else:
        scfg = sim.default_config(intercept=cfg["intercept"])
    return sim.simulate_full_matrix(scfg, jax.random.key(seed), cfg["n_users"], cfg["n_items"])


def _fit_predict(name: str, z_fit, y_fit, w_fit, z_eval) -> np.ndarray:
    cal = C.get(name)
    params = cal.fit(jnp.asarray(z_fit), jnp.asarray(y_fit, jnp.float32),
                     weights=None if w_fit is None else jnp.asarray(w_fit, jnp.float32),
                     **_HYPER.get(name, {}))
    return np.asarray(cal.predict(params, jnp.asarray(z_eval)))


def tnf_predict(name: str, val: Mapping[str, np.ndarray], test: Mapping[str, np.ndarray], *,
                top_n: int, n_groups: int, alpha: float) -> np.ndarray:
    """Top-N focused calibration (top-N calibration (Sato) §4.2) via ``calib_jax.calibrators.top_n``.

    Fitted on the validation top-N rows (rank groups, weights (1/r)^alpha); every test row
    goes through its rank group's calibrator (rows outside the top-N never enter ECE@N).
    """
    mv = val["r"] <= top_n
    params = TNF.fit(jnp.asarray(val["z"][mv]), jnp.asarray(val["y"][mv], jnp.float32),
                     context={"ranks": jnp.asarray(val["r"][mv])}, base=name, top_n=top_n,
                     n_rank_groups=n_groups, alpha=alpha, base_kwargs=_HYPER.get(name))
    return np.asarray(TNF.predict(params, jnp.asarray(test["z"]),
                                  context={"ranks": jnp.asarray(test["r"])}))


def _metrics(p: np.ndarray, test: Mapping[str, np.ndarray], top_n: int, n_bins: int):
    p, y, r = jnp.asarray(p, jnp.float32), jnp.asarray(test["y"], jnp.float32), test["r"]
    return (float(M.ece_at_n(p, y, ranks=r, top_n=top_n, n_bins=n_bins)),
            float(M.rdece_at_n(p, y, ranks=r, top_n=top_n)))


def one_split(mat, rec: str, cfg: Mapping[str, Any], key: jax.Array) -> dict[str, Any]:
    """Train a recommender on a random 60/20/20 split; return val/test score tables."""
    n_u, n_i = mat.oracle.shape
    uu, ii = np.meshgrid(np.arange(n_u), np.arange(n_i), indexing="ij")
    uu, ii = uu.ravel(), ii.ravel()
    y = mat.click.ravel().astype(np.float32)
    k_split, k_train = jax.random.split(key)
    # per-user stratified 60/20/20 split: every user has the same number of items in each
    # part, so array shapes (and compiled calibrator fits) are the same for every repeat
    pos = np.argsort(np.asarray(jax.random.uniform(k_split, (n_u, n_i))), axis=1)
    pos = np.argsort(pos, axis=1).ravel()  # position of each item in its user's permutation
    a, b = int(round(0.6 * n_i)), int(round(0.8 * n_i))
    masks = {"train": pos < a, "val": (pos >= a) & (pos < b), "test": pos >= b}
    model = (P.MF(n_u, n_i, dim=cfg["dim"]) if rec == "MF"
             else P.NCF(n_u, n_i, dim=cfg["dim"]))
    m = masks["train"]
    params = P.train_recommender(model, k_train, jnp.asarray(uu[m]), jnp.asarray(ii[m]),
                                 jnp.asarray(y[m]), epochs=cfg["epochs"],
                                 batch_size=cfg["batch_size"], lr=cfg["lr"], l2=cfg["l2"])
    out = {}
    for part_name in ("val", "test"):
        m = masks[part_name]
        z = np.asarray(model.apply({"params": params}, jnp.asarray(uu[m]), jnp.asarray(ii[m])))
        out[part_name] = {"z": z.astype(np.float64), "y": y[m], "u": uu[m],
                          "oracle": mat.oracle.ravel()[m],
                          "r": P.rank_within_user(uu[m], z)}
    t = out["test"]
    out["auc"] = float(M.auc(jax.nn.sigmoid(jnp.asarray(t["z"], jnp.float32)),
                             jnp.asarray(t["y"], jnp.float32)))
    return out


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run the study; write the tables and figures through ``out``."""
    cfg = config
    seed = int(cfg["seed"])
    clock = PhaseClock()
    out.record["phase_seconds"] = clock.seconds
    with clock("matrix"):
        mat = make_matrix(cfg, seed)
    N, nb, alpha = cfg["top_n"], cfg["n_bins"], cfg["alpha"]
    ng_default = max(N // 5, 1)
    key = jax.random.key(seed)
    results: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    sens_a: dict[tuple[str, float], list[tuple[float, float]]] = {}
    sens_g: dict[tuple[str, int], list[tuple[float, float]]] = {}
    by_n: dict[tuple[str, str, int], list[float]] = {}
    aucs: dict[str, list[float]] = {}
    sweep = cfg["sweep_calibrator"]
    sweep_rec = cfg.get("sweep_recommender") or cfg["recommenders"][0]
    if sweep_rec not in cfg["recommenders"]:
        raise ValueError(f"sweep_recommender: {sweep_rec!r} is not one of recommenders {cfg['recommenders']}")
    for rec_i, rec in enumerate(cfg["recommenders"]):
        for rep in range(cfg["repeats"]):
            mappings.release_compiled_if_near_limit()  # between repeats: XLA:CPU segfaults at the mapping cap
            with clock("training"):
                s = one_split(mat, rec, cfg, jax.random.fold_in(key, 1000 * rec_i + rep))
            val, test = s["val"], s["test"]
            aucs.setdefault(rec, []).append(s["auc"])
            with clock("calibration"):
                vanilla = 1.0 / (1.0 + np.exp(-test["z"]))
                results.setdefault((rec, "vanilla", "original"), []).append(_metrics(vanilla, test, N, nb))
                original = {}
                for cal in cfg["calibrators"]:
                    original[cal] = _fit_predict(cal, val["z"], val["y"], None, test["z"])
                    results.setdefault((rec, cal, "original"), []).append(
                        _metrics(original[cal], test, N, nb))
                    p_tnf = tnf_predict(cal, val, test, top_n=N, n_groups=ng_default, alpha=alpha)
                    results.setdefault((rec, cal, "TNF"), []).append(_metrics(p_tnf, test, N, nb))
            with clock("sensitivity"):
                if rec == sweep_rec and rep == 0:  # sensitivity (one recommender, its first split)
                    for a in cfg["alphas"]:
                        p = tnf_predict(sweep, val, test, top_n=N, n_groups=ng_default, alpha=a)
                        sens_a.setdefault((rec, a), []).append(_metrics(p, test, N, nb))
                    for g in cfg["n_groups"]:
                        p = tnf_predict(sweep, val, test, top_n=N, n_groups=g, alpha=alpha)
                        sens_g.setdefault((rec, g), []).append(_metrics(p, test, N, nb))
            with clock("by_n"):
                for n in cfg["ns"]:
                    p = tnf_predict(sweep, val, test, top_n=n, n_groups=max(n // 5, 1), alpha=alpha)
                    by_n.setdefault((rec, "TNF", n), []).append(_metrics(p, test, n, nb)[0])
                    by_n.setdefault((rec, "original", n), []).append(
                        _metrics(original[sweep], test, n, nb)[0])

    def ms(v, j):
        return P.summarise([x[j] for x in v])

    rows = []
    paired: list[list[Any]] = []
    summary: dict[str, Any] = {}
    for rec in cfg["recommenders"]:
        for cal in ("vanilla", *cfg["calibrators"]):
            o = results[(rec, cal, "original")]
            t = results.get((rec, cal, "TNF"))
            row = [rec, cal, *ms(o, 0)]
            row += [*ms(t, 0)] if t else [float("nan"), float("nan")]
            row += [*ms(o, 1)]
            row += [*ms(t, 1)] if t else [float("nan"), float("nan")]
            rows.append(row)
            if t:
                summary[f"{rec}/{cal}"] = {"ECE@N original": row[2], "ECE@N TNF": row[4],
                                           "RDECE@N original": row[6], "RDECE@N TNF": row[8]}
                for j, metric in enumerate(("ECE@N", "RDECE@N")):
                    d = P.paired_t_interval([x[j] for x in t], [x[j] for x in o])
                    summary[f"{rec}/{cal}"][f"{metric} TNF - original"] = d
                    paired.append([rec, cal, metric, d["diff"], d["lo"], d["hi"], d["n"]])
    out.table("table_ece_at_n",
              ["recommender", "calibrator", f"ECE@{N} original", "std", f"ECE@{N} TNF", "std",
               f"RDECE@{N} original", "std", f"RDECE@{N} TNF", "std"], rows)
    out.table("paired_tnf_minus_original", ["recommender", "calibrator", "metric", "tnf_minus_original",
                                            "ci_low", "ci_high", "repeats"], paired, digits=6)
    out.table("recommender_auc", ["recommender", "test AUC", "std"],
              [[r, *P.summarise(v)] for r, v in aucs.items()])
    out.table("sensitivity_alpha", ["recommender", "alpha", f"ECE@{N}", f"RDECE@{N}"],
              [[r, a, ms(v, 0)[0], ms(v, 1)[0]] for (r, a), v in sens_a.items()])
    out.table("sensitivity_n_groups", ["recommender", "n_g", f"ECE@{N}", f"RDECE@{N}"],
              [[r, g, ms(v, 0)[0], ms(v, 1)[0]] for (r, g), v in sens_g.items()])
    out.table("ece_vs_n", ["recommender", "method", "N", "ECE@N", "std"],
              [[r, m, n, *P.summarise(v)] for (r, m, n), v in by_n.items()])
    _plots(cfg, sens_a, sens_g, by_n, out)
    return summary


def report(summary: Mapping[str, Any]) -> str:
    better = sum(v["ECE@N TNF"] < v["ECE@N original"] for v in summary.values())
    return f"TNF lowers ECE@N in {better}/{len(summary)} recommender x calibrator pairs"


def _plots(cfg, sens_a, sens_g, by_n, out: Output) -> None:
    from calib_jax.plotting import plt

    N = cfg["top_n"]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax, sens, label in ((axes[0], sens_a, "alpha"), (axes[1], sens_g, "n_g")):
        xs = sorted({k[1] for k in sens})
        rec = next(iter(sens))[0]
        for j, mname in enumerate((f"ECE@{N}", f"RDECE@{N}")):
            ax.plot(xs, [np.mean([v[j] for v in sens[(rec, x)]]) for x in xs], "o-", label=mname)
        ax.set_xlabel(label)
        ax.set_title(f"TNF sensitivity ({rec}, {cfg['sweep_calibrator']})", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out.figure(fig, "sensitivity")

    recs = sorted({k[0] for k in by_n})
    fig, axes = plt.subplots(1, len(recs), figsize=(4 * len(recs), 3), squeeze=False)
    for ax, rec in zip(axes[0], recs):
        for m in ("original", "TNF"):
            ns = sorted(k[2] for k in by_n if k[0] == rec and k[1] == m)
            ax.plot(ns, [np.mean(by_n[(rec, m, n)]) for n in ns], "o-", label=m)
        ax.set_xlabel("N")
        ax.set_ylabel("ECE@N")
        ax.set_title(f"{rec}, {cfg['sweep_calibrator']}", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out.figure(fig, "ece_vs_n")


main = entry_point(__name__)

if __name__ == "__main__":
    main()
