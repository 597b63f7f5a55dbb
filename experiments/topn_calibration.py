"""Calibration of top-N recommendations: Original vs TNF (top-N calibration (Sato) §5).

Data: the simulator's fully observed mode
(:func:`calib_jax.data.simulator.simulate_full_matrix`, with a raised intercept so that
the preference rate of top-ranked items is in the tens of percent): every user x item pair
has an oracle click probability and a click drawn from it, like the KuaiRec small matrix.
The pairs are split 60/20/20 at random within each user (train / validation / test); the
five recommenders of the paper (``experiments._recommenders``: ItemKNN, MF, BPR, NCF and
LightGCN) are trained on the training pairs; items are ranked per user within each split by
the recommender's score.

Calibrators (``calib_jax.calibrators``): histogram binning (15 equal-mass bins, as in the
paper's appendix), isotonic regression, Platt scaling, beta calibration, and Gaussian and
Gamma calibration (Kweon, Kang & Yu, AAAI 2022; ``calib_jax.calibrators.ranking_scores``).
They take the recommender's score as a logit (ItemKNN's click score, a weighted mean of 0/1
clicks, through its logit, as the paper takes NCF's [0, 1] output through a logit for the
Gaussian and Gamma calibrations).

* **Original**: one calibrator fitted on every validation pair.
* **VAD** (Fan, Si & Zhang, ICLR 2023; ``calib_jax.calibrators.vad``): the Original
  calibrator's test predictions shrunk towards their mean logit by the variance-adjusting
  factor, estimated from ``vad_replicates`` more fits of the recommender, each on a random
  half of the training pairs (:func:`one_split`).
* **TNF** (top-N calibration (Sato) §4.2, ``calib_jax.calibrators.top_n``): the validation top-N of
  every user is cut into ``n_g`` rank groups; one calibrator per group, fitted with
  weights (1/r)^alpha; a test item ranked r in the top-N is calibrated by its group's calibrator.

Metrics: ECE@N (eq. 2) with the paper's adaptive bins (the largest count of equal-count bins,
up to ``max_bins``, whose label rates stay monotone: ``calib_jax.metrics.ece_at_n`` with
``strategy="sweep"``), RDECE@N (eq. 3; its bins are the ranks, so no bin rule applies), and
ECE@N with ``n_bins`` fixed equal-width bins as a sensitivity column
(``table_ece_at_n_fixed_bins``), on the test top-N (N = 20), mean ± std over repeated random
splits (each a fresh split, recommender and calibrator fit, so the repeats are independent
replicates); the claims "TNF lowers ECE@N" (than Original, and than VAD) get the paired
differences per repeat with their t-intervals (``paired_tnf_minus_original``,
``experiments._pipelines.paired_t_interval``); sensitivity to alpha and n_g (one
recommender, first split); ECE@N for N = 5..50. Vanilla (the sigmoid of the recommender's
logit; ItemKNN's score itself) is shown as a reference, with and without VAD.

Departures from the paper's protocol (§5.1 and Appendix A), each with its reason:

* **Data.** KuaiRec's small matrix (1,411 users x 3,327 items, fully observed) cannot be
  downloaded here; the stand-in is the simulator's fully observed matrix, 1,400 users x
  2,000 items at paper scale (2.8M pairs). The item count is cut to 2,000 so that the study
  stays within hours on a 2-core CPU; top-N calibration only looks at each user's 20 best
  items, and 2,000 items still leave every user 400 validation pairs. Table 1's ML-1M
  (one million five-star ratings) is not redistributable and not on this machine; its
  sibling MovieLens-100K (100,000 ratings of 943 users on 1,682 items, same scale and
  collection) is read from an installed ``recbole`` or a path the user names
  (``calib_jax.data.movielens``) and runs the same rating task (:func:`movielens_results`).
* **Recommenders.** The paper used Cornac (ItemKNN, MF, BPR) and Microsoft Recommenders (NCF,
  LightGCN) with their defaults. ItemKNN, BPR and LightGCN take those libraries' defaults
  (``experiments._recommenders.DEFAULTS``, each with the file it was read from) except: ItemKNN
  uses the plain cosine (Cornac's cosine over co-rating users makes every pair of co-clicked
  items similarity 1 on 0/1 clicks), BPR updates on summed mini-batches of 1,024 triples
  (Cornac updates per triple; the same test AUC at paper size, 0.658), and LightGCN trains
  ``rec_hyper["LightGCN"]["epochs"]`` epochs instead of 1,000 (12.6 s an epoch on one
  idle CPU core at paper size, dense propagation). MF and NCF are this project's log-loss models (Adam in optax),
  not Cornac's squared-error MF and Microsoft's sampled-negative NCF.
* **VAD replicates.** Half-samples of the training pairs, where the VAD paper bootstraps or
  retrains; ItemKNN has no randomness to retrain with (:func:`one_split`).
* **Sensitivity** (Fig 4): alpha and n_g are swept on the first split of one recommender
  (paper preset: NCF with beta calibration, the paper's KuaiRec pair), without intervals.
* **Intervals** (not in the paper): the paired t-interval over the 10 independent splits.

Time: the paper preset took 3.5 hours (12,440 s) on the 2-core machine beside another job
(2026-12-03: ItemKNN, MF, BPR and NCF 33 minutes for their 10 splits; LightGCN 14-19 minutes
a split, three fits of 20 epochs: the deployed model and two VAD half-samples; the MovieLens
task one minute). It
checkpoints every finished (recommender, split) (``checkpoint``), so a stopped run resumes
after it; the provenance's ``resumed`` names the checkpoints read and their commits.

The provenance records the seconds of each phase (``phase_seconds``: the matrix, recommender
training, calibrator fits and metrics, the sensitivity sweeps).

Run: ``python -m experiments.topn_calibration [--smoke | --quick | --paper] [--seed S]
[--out DIR]``.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax import calibrators as C
from calib_jax import metrics as M
from calib_jax._src import mappings
from calib_jax.calibrators import top_n as TNF
from calib_jax.calibrators import vad as VAD
from experiments import _pipelines as P
from experiments import _recommenders as R
from experiments._study import Output, PhaseClock, entry_point

QUICK: dict[str, Any] = {
    "n_users": 300, "n_items": 400, "sim": "tiny", "intercept": -1.5, "repeats": 3,
    "top_n": 20, "n_bins": 15, "max_bins": 100, "alpha": 1.0,
    "recommenders": ("ItemKNN", "MF", "BPR", "NCF", "LightGCN"), "epochs": 5, "batch_size": 512, "lr": 1e-2,
    "l2": 1e-6, "dim": 16,
    # the other recommenders' library defaults (experiments._recommenders.DEFAULTS), except:
    # ItemKNN's plain cosine (Cornac's co-rater cosine makes every co-clicked pair similarity 1
    # on 0/1 data) and LightGCN's epochs (1,000 are about 7 hours per split on two CPU cores)
    "rec_hyper": {"ItemKNN": {"similarity": "cosine_full"}, "LightGCN": {"epochs": 5}},
    "calibrators": ("histogram_binning", "isotonic", "platt", "beta", "gaussian", "gamma"),
    "vad_replicates": 2,
    "checkpoint": False,
    # the paper's Table 1 task on MovieLens-100K (calib_jax.data.movielens; skipped, and said so in
    # the provenance, where no copy is installed): rating prediction with ItemKNN and MF, the
    # non-parametric calibrators, ``movielens_max_ratings`` caps the ratings read (None: all)
    "movielens": True, "movielens_recommenders": ("ItemKNN", "MF"), "movielens_max_ratings": None,
    "alphas": (0.0, 0.2, 0.5, 1.0, 2.0, 3.0), "n_groups": (1, 2, 4, 5, 10, 20),
    "sweep_calibrator": "isotonic", "ns": (5, 10, 20, 30, 40, 50),
}
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {**QUICK, "n_users": 40, "n_items": 60, "repeats": 1, "recommenders": ("ItemKNN", "BPR"),
              "rec_hyper": {"ItemKNN": {"similarity": "cosine_full"}, "BPR": {"max_iter": 2}},
              "movielens_max_ratings": 4000,
              "epochs": 1, "batch_size": 256, "top_n": 5, "calibrators": ("platt", "isotonic"),
              "alphas": (0.0, 1.0), "n_groups": (1, 5), "ns": (5, 10)},
    "quick": QUICK,
    # the sensitivity sweeps of Fig 4 on the paper's KuaiRec pair (NCF, beta calibration)
    "paper": {**QUICK, "n_users": 1400, "n_items": 2000, "sim": "default", "repeats": 10,
              "epochs": 15, "rec_hyper": {"ItemKNN": {"similarity": "cosine_full"}, "LightGCN": {"epochs": 20}},
              "sweep_recommender": "NCF", "sweep_calibrator": "beta",
              # every finished (recommender, split) is checkpointed: a stopped run resumes after it
              "checkpoint": True},
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


@contextlib.contextmanager
def _known_logits() -> Iterator[None]:
    """Silence the calibrators' probabilities-not-logits hint: the recommenders' scores are logits
    by construction, and the validation top-N rows of a weak model can all fall in [0, 1]."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="every logit passed to the calibrator lies in",
                                category=UserWarning)
        yield


def _fit_predict(name: str, z_fit, y_fit, w_fit, z_eval) -> np.ndarray:
    cal = C.get(name)
    with _known_logits():
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
    with _known_logits():
        params = TNF.fit(jnp.asarray(val["z"][mv]), jnp.asarray(val["y"][mv], jnp.float32),
                         context={"ranks": jnp.asarray(val["r"][mv])}, base=name, top_n=top_n,
                         n_rank_groups=n_groups, alpha=alpha, base_kwargs=_HYPER.get(name))
    return np.asarray(TNF.predict(params, jnp.asarray(test["z"]),
                                  context={"ranks": jnp.asarray(test["r"])}))


def _metrics(p: np.ndarray, test: Mapping[str, np.ndarray], top_n: int, n_bins: int, max_bins: int):
    """(ECE@N with the paper's adaptive bins, RDECE@N, ECE@N with ``n_bins`` fixed equal-width bins)."""
    p, y, r = jnp.asarray(p, jnp.float32), jnp.asarray(test["y"], jnp.float32), test["r"]
    return (float(M.ece_at_n(p, y, ranks=r, top_n=top_n, n_bins=max_bins, strategy="sweep")),
            float(M.rdece_at_n(p, y, ranks=r, top_n=top_n)),
            float(M.ece_at_n(p, y, ranks=r, top_n=top_n, n_bins=n_bins)))


def vad_predict(p: np.ndarray, split: Mapping[str, Any], *, calibrated: bool) -> np.ndarray:
    """VAD (Fan, Si & Zhang, ICLR 2023) on the test rows: shrink ``p`` towards its mean logit by
    the factor of the recommender's half-sample replicates on the test rows, divided by that on
    the validation rows when ``p`` comes from a calibrator fitted there
    (:func:`calib_jax.calibrators.vad.vad`)."""
    val, test = split["val"], split["test"]
    kw = {"validation_replicates": val["rep"], "validation_logits": val["z"]} if calibrated else {}
    return np.asarray(VAD.vad(np.clip(p, 0.0, 1.0), test["rep"], test["z"], **kw), np.float64)


def rec_hyper(cfg: Mapping[str, Any], rec: str) -> dict[str, Any]:
    """The hyper-parameters the study passes to ``experiments._recommenders.train``: MF and NCF
    take the preset's ``dim``, ``epochs``, ``batch_size``, ``lr`` and ``l2``; every model then
    ``rec_hyper[rec]``."""
    base = ({k: cfg[k] for k in ("dim", "epochs", "batch_size", "lr", "l2")} if rec in ("MF", "NCF") else {})
    return {**base, **cfg.get("rec_hyper", {}).get(rec, {})}


def _as_logit(rec: str, s: np.ndarray) -> np.ndarray:
    """ItemKNN's click score is a weighted mean of 0/1 clicks in [0, 1]: its logit (clipped at
    1e-4) is what the calibrators take; the other models' scores are logits already."""
    if rec != "ItemKNN":
        return s.astype(np.float64)
    q = np.clip(s, 1e-4, 1 - 1e-4)
    return np.log(q / (1 - q))


def one_split(mat, rec: str, cfg: Mapping[str, Any], key: jax.Array) -> dict[str, Any]:
    """Train a recommender on a random 60/20/20 split; return val/test score tables.

    With ``vad_replicates`` K >= 2, K more fits of the recommender, each on a random half of the
    training rows drawn without replacement, give VAD's replicate logits (``rep``, (n, K)) on the
    validation and test rows: the spread of half-sample estimates drawn without replacement
    estimates the sampling variance of the full-sample one (the finite-population correction
    1/m - 1/n equals 1/n at m = n/2), and unlike retraining with another seed it gives ItemKNN,
    which has no randomness, a variance too.
    """
    n_u, n_i = mat.oracle.shape
    uu, ii = np.meshgrid(np.arange(n_u), np.arange(n_i), indexing="ij")
    uu, ii = uu.ravel(), ii.ravel()
    y = mat.click.ravel().astype(np.float32)
    k_split, k_train, k_rep = jax.random.split(key, 3)
    # per-user stratified 60/20/20 split: every user has the same number of items in each
    # part, so array shapes (and compiled calibrator fits) are the same for every repeat
    pos = np.argsort(np.asarray(jax.random.uniform(k_split, (n_u, n_i))), axis=1)
    pos = np.argsort(pos, axis=1).ravel()  # position of each item in its user's permutation
    a, b = int(round(0.6 * n_i)), int(round(0.8 * n_i))
    masks = {"train": pos < a, "val": (pos >= a) & (pos < b), "test": pos >= b}
    hp = rec_hyper(cfg, rec)
    tr = np.flatnonzero(masks["train"])
    fitted = R.train(rec, k_train, n_u, n_i, uu[tr], ii[tr], y[tr], **hp)
    replicates = []
    for k in range(int(cfg.get("vad_replicates", 0))):
        half = np.sort(np.asarray(jax.random.permutation(jax.random.fold_in(k_rep, k), tr.size))[: tr.size // 2])
        rows = tr[half]
        replicates.append(R.train(rec, jax.random.fold_in(k_rep, 1000 + k), n_u, n_i, uu[rows], ii[rows], y[rows],
                                  **hp))
    out: dict[str, Any] = {}
    for part_name in ("val", "test"):
        m = masks[part_name]
        z = _as_logit(rec, R.score(fitted, uu[m], ii[m]))
        out[part_name] = {"z": z, "y": y[m], "u": uu[m], "oracle": mat.oracle.ravel()[m],
                          "r": P.rank_within_user(uu[m], z)}
        if replicates:
            out[part_name]["rep"] = np.stack([_as_logit(rec, R.score(f, uu[m], ii[m])) for f in replicates], 1)
    t = out["test"]
    out["auc"] = float(M.auc(jax.nn.sigmoid(jnp.asarray(t["z"], jnp.float32)),
                             jnp.asarray(t["y"], jnp.float32)))
    return out


#: the rating task's calibrators: the non-parametric ones, as the paper (§5.1: the parametric
#: ones map scores to [0, 1] probabilities and are not applied to five-scale ratings)
RATING_CALIBRATORS = ("histogram_binning", "isotonic")


def rating_calibrator(name: str, x: np.ndarray, t: np.ndarray, w: np.ndarray | None) -> Any:
    """A calibrator of rescaled ratings (targets in [0, 1], not 0/1 labels), as a function of the
    prediction: ``histogram_binning``, 15 equal-count bins of the fitting predictions, each
    predicting its (weighted) mean target (the paper's Appendix A); ``isotonic``, scikit-learn's
    weighted isotonic regression (pool adjacent violators), clipped outside the fitting range.
    ``calib_jax.calibrators`` fits 0/1 labels; these two take real targets."""
    if name == "isotonic":
        from sklearn.isotonic import IsotonicRegression

        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(x, t, sample_weight=w)
        return lambda q: iso.predict(q)
    v = np.ones_like(x) if w is None else w
    order = np.argsort(x, kind="stable")
    cuts = np.array_split(order, min(15, x.size))
    upper = np.array([x[c].max() for c in cuts])
    means = np.array([np.sum(v[c] * t[c]) / max(np.sum(v[c]), 1e-300) for c in cuts])
    return lambda q: means[np.minimum(np.searchsorted(upper, q, side="left"), len(cuts) - 1)]


def _rating_tnf(name: str, val: Mapping[str, np.ndarray], test: Mapping[str, np.ndarray], *, top_n: int,
                n_groups: int, alpha: float) -> np.ndarray:
    """TNF on ratings (top-N calibration (Sato) §4.2): one rating calibrator per rank group of
    the validation top-N (``calib_jax.calibrators.top_n.rank_groups``), fitted with weights
    (1/r)^alpha; a test row in the top-N goes through its group's calibrator, the others through
    the calibrator fitted on every validation row (they never enter ECE@N)."""
    out = rating_calibrator(name, val["x"], val["t"], None)(test["x"])
    gv = np.asarray(TNF.rank_groups(jnp.asarray(val["r"]), top_n=top_n, n_rank_groups=n_groups))
    gt = np.asarray(TNF.rank_groups(jnp.asarray(test["r"]), top_n=top_n, n_rank_groups=n_groups))
    for g in range(n_groups):
        mv, mt = (val["r"] <= top_n) & (gv == g), (test["r"] <= top_n) & (gt == g)
        if mv.sum() >= 2 and mt.any():
            w = (1.0 / val["r"][mv]) ** alpha
            out[mt] = rating_calibrator(name, val["x"][mv], val["t"][mv], w)(test["x"][mt])
    return out


def _rating_metrics(q: np.ndarray, test: Mapping[str, np.ndarray], top_n: int, n_bins: int, max_bins: int):
    """``_metrics`` on rescaled ratings (``soft_labels``): adaptive ECE@N, RDECE@N, fixed-bin ECE@N."""
    p, t, r = jnp.asarray(np.clip(q, 0, 1), jnp.float32), jnp.asarray(test["t"], jnp.float32), test["r"]
    return (float(M.ece_at_n(p, t, ranks=r, top_n=top_n, n_bins=max_bins, strategy="sweep", soft_labels=True)),
            float(M.rdece_at_n(p, t, ranks=r, top_n=top_n, soft_labels=True)),
            float(M.ece_at_n(p, t, ranks=r, top_n=top_n, n_bins=n_bins, soft_labels=True)))


def movielens_repeat(data: Any, rec: str, cfg: Mapping[str, Any], key: jax.Array) -> dict[str, Any]:
    """One split of the paper's rating task (§5.1, Table 1) on MovieLens: ratings rescaled to
    [0, 1] by (r - 1) / 4, a random 60/20/20 split of the ratings
    (``calib_jax.data.movielens.paper_split``), the recommender trained on the training ratings
    (ItemKNN on the five-star ratings, Cornac's defaults; MF's log loss on the rescaled ones),
    items ranked per user within the validation and the test ratings by the prediction; Vanilla
    (the prediction itself), the non-parametric calibrators fitted on the validation ratings
    (Original), VAD on them (probability space: the ratings are not probabilities), and TNF.
    Returns ``{(calibrator, method): (ECE@N, RDECE@N, fixed-bin ECE@N)}``."""
    from calib_jax.data import movielens

    k_split, k_train, k_rep = jax.random.split(key, 3)
    tr, va, te = movielens.paper_split(k_split, data.rating.size)
    t_all = (data.rating - 1.0) / 4.0
    n_u, n_i = len(data.user_ids), len(data.item_ids)
    hp = rec_hyper(cfg, rec)

    def fit(rows: np.ndarray, k: jax.Array) -> Any:
        target = data.rating[rows] if rec == "ItemKNN" else t_all[rows]
        return R.train(rec, k, n_u, n_i, data.user[rows], data.item[rows], target, **hp)

    def predict(model: Any, rows: np.ndarray) -> np.ndarray:
        s = R.score(model, data.user[rows], data.item[rows])
        return np.clip((s - 1.0) / 4.0 if rec == "ItemKNN" else 1.0 / (1.0 + np.exp(-s)), 0.0, 1.0)

    model = fit(tr, k_train)
    def half(k: int) -> np.ndarray:  # a random half of the training ratings, drawn without replacement
        return tr[np.sort(np.asarray(jax.random.permutation(jax.random.fold_in(k_rep, k), tr.size))[: tr.size // 2])]

    reps = [fit(half(k), jax.random.fold_in(k_rep, 1000 + k)) for k in range(int(cfg.get("vad_replicates", 0)))]
    parts = {}
    for name, rows in (("val", va), ("test", te)):
        x = predict(model, rows)
        parts[name] = {"x": x, "t": t_all[rows], "r": P.rank_within_user(data.user[rows], x)}
        if reps:
            q = np.clip(np.stack([predict(m, rows) for m in reps], 1), 1e-4, 1 - 1e-4)
            parts[name]["rep"] = np.log(q / (1 - q))
    val, test = parts["val"], parts["test"]
    N, nb, mb, alpha = cfg["top_n"], cfg["n_bins"], int(cfg["max_bins"]), cfg["alpha"]

    def vad(q: np.ndarray, calibrated: bool) -> np.ndarray:
        qc = np.clip(test["x"], 1e-4, 1 - 1e-4)
        kw: dict[str, Any] = {}
        if calibrated:
            qv = np.clip(val["x"], 1e-4, 1 - 1e-4)
            kw = {"validation_replicates": val["rep"], "validation_logits": np.log(qv / (1 - qv))}
        return np.asarray(VAD.vad(np.clip(q, 0, 1), test["rep"], np.log(qc / (1 - qc)), space="probability", **kw))

    res: dict[tuple[str, str], tuple[float, float, float]] = {}
    res[("vanilla", "original")] = _rating_metrics(test["x"], test, N, nb, mb)
    if reps:
        res[("vanilla", "VAD")] = _rating_metrics(vad(test["x"], False), test, N, nb, mb)
    for cal in RATING_CALIBRATORS:
        q = rating_calibrator(cal, val["x"], val["t"], None)(test["x"])
        res[(cal, "original")] = _rating_metrics(q, test, N, nb, mb)
        if reps:
            res[(cal, "VAD")] = _rating_metrics(vad(q, True), test, N, nb, mb)
        res[(cal, "TNF")] = _rating_metrics(
            _rating_tnf(cal, val, test, top_n=N, n_groups=max(N // 5, 1), alpha=alpha), test, N, nb, mb)
    return {"results": res, "info": {}}


def movielens_results(cfg: Mapping[str, Any], out: Output, key: jax.Array, clock: PhaseClock
                      ) -> dict[tuple[str, str, str], list[tuple[float, float, float]]] | None:
    """:func:`movielens_repeat` for every MovieLens recommender and split, each checkpointed; None
    (and the reason in the provenance's ``movielens``) where no MovieLens-100K copy is installed."""
    from calib_jax.data import movielens

    try:
        data = movielens.load()
    except FileNotFoundError as e:
        out.record["movielens"] = f"not run: {e}"
        print(f"[topn_calibration] MovieLens not run: {e}", flush=True)
        return None
    cap = cfg["movielens_max_ratings"]
    if cap is not None and cap < data.rating.size:
        data = data._replace(user=data.user[:cap], item=data.item[:cap], rating=data.rating[:cap],
                             timestamp=data.timestamp[:cap])
    out.record["movielens"] = {"source": data.source, "ratings": int(data.rating.size),
                               "users": int(np.unique(data.user).size), "items": int(np.unique(data.item).size)}
    res: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {}
    for rec_i, rec in enumerate(cfg["movielens_recommenders"]):
        for rep in range(cfg["repeats"]):
            with clock("movielens"):
                # keyed as the simulator's repeats, and by the ratings read
                done = out.checkpointed(cfg, "repeats", "recommenders", f"ML-{rec}-{rep}",
                                        [rec, rec_i, rep, int(data.rating.size)],
                                        functools.partial(movielens_repeat, data, rec, cfg,
                                                          jax.random.fold_in(key, 50_000 + 1000 * rec_i + rep)))
            assert done is not None
            if "resumed_from_checkpoint" in done["info"]:
                out.record.setdefault("resumed", {})[f"ML-100K/{rec}/{rep}"] = {
                    k: done["info"][k] for k in ("resumed_from_checkpoint", "git_commit")}
            for (cal, m), v in done["results"].items():
                res.setdefault((rec, cal, m), []).append(v)
    return res


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run the study; write the tables and figures through ``out``."""
    cfg = config
    seed = int(cfg["seed"])
    clock = PhaseClock()
    out.record["phase_seconds"] = clock.seconds
    with clock("matrix"):
        mat = make_matrix(cfg, seed)
    N, nb, alpha = cfg["top_n"], cfg["n_bins"], cfg["alpha"]
    mb = int(cfg["max_bins"])
    use_vad = int(cfg.get("vad_replicates", 0)) >= 2
    ng_default = max(N // 5, 1)
    key = jax.random.key(seed)
    results: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {}
    sens_a: dict[tuple[str, float], list[tuple[float, float, float]]] = {}
    sens_g: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    by_n: dict[tuple[str, str, int], list[float]] = {}
    aucs: dict[str, list[float]] = {}
    sweep = cfg["sweep_calibrator"]
    sweep_rec = cfg.get("sweep_recommender") or cfg["recommenders"][0]
    if sweep_rec not in cfg["recommenders"]:
        raise ValueError(f"sweep_recommender: {sweep_rec!r} is not one of recommenders {cfg['recommenders']}")
    def one_repeat(rec: str, rec_i: int, rep: int) -> dict[str, Any]:
        """One split of one recommender: its metrics per (calibrator, method), its sensitivity
        and ECE@N-vs-N points, and its test AUC."""
        res: dict[tuple[str, str], tuple[float, float, float]] = {}
        sa: dict[float, tuple[float, float, float]] = {}
        sg: dict[int, tuple[float, float, float]] = {}
        bn: dict[tuple[str, int], float] = {}
        t0 = time.perf_counter()
        mappings.release_compiled_if_near_limit()  # between repeats: XLA:CPU segfaults at the mapping cap
        with clock("training"):
            s = one_split(mat, rec, cfg, jax.random.fold_in(key, 1000 * rec_i + rep))
        val, test = s["val"], s["test"]
        with clock("calibration"):
            vanilla = 1.0 / (1.0 + np.exp(-test["z"]))
            res[("vanilla", "original")] = _metrics(vanilla, test, N, nb, mb)
            if use_vad:
                res[("vanilla", "VAD")] = _metrics(vad_predict(vanilla, s, calibrated=False), test, N, nb, mb)
            original = {}
            for cal in cfg["calibrators"]:
                original[cal] = _fit_predict(cal, val["z"], val["y"], None, test["z"])
                res[(cal, "original")] = _metrics(original[cal], test, N, nb, mb)
                if use_vad:
                    res[(cal, "VAD")] = _metrics(vad_predict(original[cal], s, calibrated=True), test, N, nb, mb)
                p_tnf = tnf_predict(cal, val, test, top_n=N, n_groups=ng_default, alpha=alpha)
                res[(cal, "TNF")] = _metrics(p_tnf, test, N, nb, mb)
        with clock("sensitivity"):
            if rec == sweep_rec and rep == 0:  # sensitivity (one recommender, its first split)
                for a in cfg["alphas"]:
                    sa[a] = _metrics(tnf_predict(sweep, val, test, top_n=N, n_groups=ng_default, alpha=a),
                                     test, N, nb, mb)
                for g in cfg["n_groups"]:
                    sg[g] = _metrics(tnf_predict(sweep, val, test, top_n=N, n_groups=g, alpha=alpha),
                                     test, N, nb, mb)
        with clock("by_n"):
            for n in cfg["ns"]:
                p = tnf_predict(sweep, val, test, top_n=n, n_groups=max(n // 5, 1), alpha=alpha)
                bn[("TNF", n)] = _metrics(p, test, n, nb, mb)[0]
                bn[("original", n)] = _metrics(original[sweep], test, n, nb, mb)[0]
        return {"results": res, "sens_a": sa, "sens_g": sg, "by_n": bn, "auc": s["auc"],
                "info": {"seconds": time.perf_counter() - t0}}

    for rec_i, rec in enumerate(cfg["recommenders"]):
        for rep in range(cfg["repeats"]):
            # keyed by the configuration without the recommender list, the recommender, its
            # position and the repeat (the split's PRNG key): a stopped paper run resumes here
            done = out.checkpointed(cfg, "repeats", "recommenders", f"{rec}-{rep}", [rec, rec_i, rep],
                                    functools.partial(one_repeat, rec, rec_i, rep))
            assert done is not None
            if "resumed_from_checkpoint" in done["info"]:
                out.record.setdefault("resumed", {})[f"{rec}/{rep}"] = {
                    k: done["info"][k] for k in ("resumed_from_checkpoint", "git_commit")}
            aucs.setdefault(rec, []).append(done["auc"])
            for (cal, m), v in done["results"].items():
                results.setdefault((rec, cal, m), []).append(v)
            for a, v in done["sens_a"].items():
                sens_a.setdefault((rec, a), []).append(v)
            for g, v in done["sens_g"].items():
                sens_g.setdefault((rec, g), []).append(v)
            for (m, n), x in done["by_n"].items():
                by_n.setdefault((rec, m, n), []).append(x)

    def ms(v, j):
        return P.summarise([x[j] for x in v])

    methods = ("original", "VAD", "TNF") if use_vad else ("original", "TNF")
    nan2 = [float("nan"), float("nan")]
    summary: dict[str, Any] = {}

    def tables(res: Mapping[tuple[str, str, str], list[tuple[float, float, float]]], recs: Any, cals: Any,
               data: str, prefix: str) -> None:
        """The ECE@N tables, the paired TNF differences and the summary entries of one data set."""
        rows, fixed_rows = [], []
        paired: list[list[Any]] = []
        for rec in recs:
            for cal in ("vanilla", *cals):
                got = {m: res.get((rec, cal, m), []) for m in methods}
                row = [rec, cal]
                for j in (0, 1):  # adaptive-bin ECE@N, then RDECE@N, each Original / VAD / TNF
                    for m in methods:
                        row += [*ms(got[m], j)] if got[m] else nan2
                rows.append(row)
                fixed_rows.append([rec, cal, *[x for m in methods for x in (ms(got[m], 2) if got[m] else nan2)]])
                t = got["TNF"]
                if not t:
                    continue
                entry: dict[str, Any] = {"data": data}
                for m in methods:
                    entry[f"ECE@N {m}"] = ms(got[m], 0)[0]
                    entry[f"RDECE@N {m}"] = ms(got[m], 1)[0]
                    entry[f"ECE@N({nb} bins) {m}"] = ms(got[m], 2)[0]
                for j, metric in enumerate(("ECE@N", "RDECE@N")):
                    for base in methods[:-1]:
                        d = P.paired_t_interval([x[j] for x in t], [x[j] for x in got[base]])  # same splits
                        entry[f"{metric} TNF - {base}"] = d
                        paired.append([rec, cal, metric, f"TNF - {base}", d["diff"], d["lo"], d["hi"], d["n"]])
                summary[f"{prefix}{rec}/{cal}"] = entry
        name = "" if not prefix else "_" + prefix.strip("/").lower().replace("-", "")
        head = [f"{metric} {m}" for metric in (f"ECE@{N}", f"RDECE@{N}") for m in methods]
        out.table(f"table_ece_at_n{name}", ["recommender", "calibrator", *[h for x in head for h in (x, "std")]],
                  rows)
        out.table(f"table_ece_at_n_fixed_bins{name}",
                  ["recommender", "calibrator", *[h for m in methods for h in (f"ECE@{N} {nb} bins {m}", "std")]],
                  fixed_rows)
        out.table(f"paired_tnf_minus_original{name}", ["recommender", "calibrator", "metric", "comparison",
                                                       "difference", "ci_low", "ci_high", "repeats"], paired, digits=6)

    tables(results, cfg["recommenders"], cfg["calibrators"], "simulated user x item matrix", "")
    if cfg["movielens"]:
        ml = movielens_results(cfg, out, key, clock)
        if ml is not None:
            tables(ml, cfg["movielens_recommenders"], RATING_CALIBRATORS, "MovieLens-100K ratings", "ML-100K/")
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
