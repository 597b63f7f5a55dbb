r"""The metric panel of ``calib-jax evaluate``, computed from streamed statistics.

Every quantity is a function of the :class:`~calib_jax.logs.accumulate.Accumulator` tables,
evaluated on each replicate at once (arrays of shape (R,) = 1 + B): replicate 0 is the
estimate, replicates 1..B give the 95% percentile interval (:mod:`calib_jax.bootstrap`).

Exact (equal to :mod:`calib_jax.metrics` / :mod:`calib_jax.decompositions` on the whole log
in memory, up to float rounding): Brier, NLL, MAE, bias, ECE and MCE (equal-width bins),
GCE / Field-ECE / Field-RCE / abs_bias per field, the bias per field value, the Brier
grouping on bins and fields, and the oracle metrics (Brier⁺ = ``oracle_mae``, oracle Brier,
full Bernoulli KL, Chebyshev, Pearson).

The production panel: normalized entropy and the calibration ratio, overall (exact) and per
field level; the biased gap norms also carry their bias-corrected replicates
(:func:`calib_jax.bootstrap.debiased_gap`) for the report's intervals. The calibration tests
(Spiegelhalter, Hosmer–Lemeshow, Cox, CORP; :func:`calibration_tests`) run on the log itself.

From the fine logit histogram (bounded error, see :mod:`calib_jax.logs.accumulate`): AUC
(with ``auc_bound``), ECE⁺ (equal-mass bins), LCCE (deterministic quantile-initialised
1-D k-means on the histogram), the Brier grouping on the LCCE clusters, Murphy on the fine
bins and CORP (isotonic fit constant on fine bins).

All of it is NumPy in float64 (the model fits and tests of :mod:`calib_jax.logs.cellstats`
included): a report from an engine's statistics never loads JAX.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calib_jax.logs.accumulate import FIELD_COLS, FIELD_STATS, ORACLE_SCALARS, SCALARS, Accumulator
from calib_jax.logs.cellstats import (
    CORP_RESAMPLES,
    cluster_ids,
    corp_test_cells,
    cox,
    debiased_gap,
    hosmer_lemeshow,
    spiegelhalter,
)
from calib_jax.logs.downsampling import kept_probability

__all__ = ["compute_panel", "interval", "brier_terms", "field_metrics", "field_metric_replicates", "FIELD_METRICS",
           "oracle_metrics", "ORACLE_METRICS"]


def _div(a: Any, b: Any) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape), where=b != 0)


def _nan_div(a: Any, b: Any) -> np.ndarray:
    """``a / b``, NaN (undefined) where ``b`` is 0."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.divide(a, b, out=np.full(np.broadcast(a, b).shape, np.nan), where=b != 0)


def interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float | None, float | None]:
    """``(estimate, lo, hi)`` from replicate values (R,): replicate 0 and percentiles of 1..B."""
    v = np.asarray(values, np.float64)
    est = float(v[0])
    reps = v[1:][np.isfinite(v[1:])]
    if reps.size < 2:
        return est, None, None
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return est, float(lo), float(hi)


def _group(tab: np.ndarray, k: int, s: int = 3) -> dict[str, np.ndarray]:
    """Group sums (R, K) from a (R, K*2*s) per-(group, label) table of [1, p, p², ...]."""
    t = tab.reshape(tab.shape[0], k, 2, s)
    return {"w": t[..., 0, 0] + t[..., 1, 0], "sp": t[..., 0, 1] + t[..., 1, 1], "sy": t[..., 1, 0],
            "spp": t[..., 0, 2] + t[..., 1, 2], "spy": t[..., 1, 1]}


def _regroup(g: dict[str, np.ndarray], ids: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Sum groups (R, H) into ``k`` coarser groups by per-replicate ids (R, H)."""
    r = ids.shape[0]
    flat = (ids + k * np.arange(r)[:, None]).ravel()
    return {name: np.bincount(flat, weights=a.ravel(), minlength=r * k).reshape(r, k) for name, a in g.items()}


def _gap(g: dict[str, np.ndarray], norm: str) -> np.ndarray:
    w = g["w"]
    mass = _div(w, w.sum(axis=1, keepdims=True))
    gap = _div(g["sp"] - g["sy"], w)
    if norm == "l1":
        return np.sum(mass * np.abs(gap), axis=1)
    if norm == "l2":
        return np.sum(mass * gap * gap, axis=1)
    return np.max(np.where(w > 0, np.abs(gap), 0.0), axis=1)


def brier_terms(g: dict[str, np.ndarray], brier: np.ndarray) -> dict[str, np.ndarray]:
    r"""Brier grouping ("Calibration is Grouping", eq. 6): Brier = UNC + REL − RES + Δ from group sums.

    :math:`\mathrm{UNC}=\bar y(1-\bar y)`, :math:`\mathrm{REL}=\sum_k w_k(\mu_k-\pi_k)^2`,
    :math:`\mathrm{RES}=\sum_k w_k(\pi_k-\bar y)^2`,
    :math:`\Delta=\sum_k w_k(\sigma^2_k-2\gamma_k)` (as :func:`calib_jax.decompositions.brier_grouping`).
    """
    w = g["w"]
    W = w.sum(axis=1, keepdims=True)
    mass = _div(w, W)
    mu, pi = _div(g["sp"], w), _div(g["sy"], w)
    var = _div(g["spp"], w) - mu * mu
    cov = _div(g["spy"], w) - mu * pi
    ybar = np.sum(mass * pi, axis=1)
    unc = ybar * (1 - ybar)
    rel = np.sum(mass * (mu - pi) ** 2, axis=1)
    res = np.sum(mass * (pi - ybar[:, None]) ** 2, axis=1)
    delta = np.sum(mass * (var - 2 * cov), axis=1)
    return {"brier": brier, "unc": unc, "rel": rel, "res": res, "delta": delta,
            "residual": brier - (unc + rel - res + delta)}


def _lcce_clusters(acc: Accumulator, hg: dict[str, np.ndarray], osum: np.ndarray) -> np.ndarray:
    """Cluster id (R, H) of every fine bin: k-means on the histogram per replicate
    (:func:`calib_jax.logs.cellstats.cluster_ids`); an empty bin sits at its centre."""
    s = acc.settings
    H, L = s.hist_bins, s.logit_range
    centre = -L + (np.arange(H) + 0.5) * (2 * L / H)
    w = hg["w"]
    mean = np.where(w > 0, _div(osum, w), centre[None, :])
    return cluster_ids(w, mean, n_clusters=s.n_clusters)


def _quantile_blocks(w: np.ndarray, m: int) -> np.ndarray:
    """Equal-mass block (R, H) of every fine bin: the block of its mid cumulative weight."""
    c = np.cumsum(w, axis=1)
    mid = c - 0.5 * w
    return np.clip(np.floor(m * _div(mid, c[:, -1:])), 0, m - 1).astype(np.int64)


def _corp(hg: dict[str, np.ndarray], brier: np.ndarray) -> dict[str, np.ndarray]:
    from calib_jax._src.pav_numpy import np_isotonic_fit_values

    R, H = hg["w"].shape
    src = np.empty(R)
    ybar = np.empty(R)
    for r in range(R):
        w, sy = hg["w"][r], hg["sy"][r]
        keep = w > 0
        if not keep.any():  # a bootstrap replicate that drew no row: undefined
            src[r] = ybar[r] = np.nan
            continue
        rate = _div(sy[keep], w[keep])
        fit = np_isotonic_fit_values(np.arange(H)[keep].astype(np.float64), rate, w[keep])
        W = w.sum()
        src[r] = np.sum(w[keep] * fit ** 2 - 2 * fit * sy[keep] + sy[keep]) / W if W > 0 else 0.0
        ybar[r] = sy.sum() / W if W > 0 else 0.0
    unc = ybar * (1 - ybar)
    return {"brier": brier, "mcb": brier - src, "dsc": unc - src, "unc": unc}


def compute_panel(acc: Accumulator) -> dict[str, Any]:
    """All metrics, per-field tables, decompositions and reliability data, per replicate.

    Returns a dict with ``metrics`` (name -> (R,) array), ``notes`` (name -> str),
    ``fields`` (name -> dict of (R,) metrics and per-level arrays), ``decompositions``
    (name -> dict of (R,) terms), ``reliability`` (per equal-mass bin arrays (R, M)) and
    ``bounds`` (stated error bounds of the histogram-based numbers).
    """
    s = acc.settings
    names = list(SCALARS) + (list(ORACLE_SCALARS) if s.oracle else [])
    sc = {k: acc.scal[:, i] for i, k in enumerate(names)}
    W = sc["w"]
    with np.errstate(invalid="ignore", divide="ignore"):
        m: dict[str, np.ndarray] = {}
        notes: dict[str, str] = {}
        m["weight"] = W
        m["ctr"] = _div(sc["wy"], W)
        m["mean_score"] = _div(sc["wp"], W)
        m["bias"] = np.where(sc["wy"] > 0, _div(sc["wp"], sc["wy"]) - 1.0, np.nan)
        notes["bias"] = "mean(p)/mean(y) - 1 (0 = unbiased, > 0 over-prediction)"
        rel = _group(acc.rel, s.n_bins)
        m["ece"] = _gap(rel, "l1")
        corrected: dict[str, np.ndarray] = {"ece": _debiased(rel, "l1")}
        notes["ece"] = f"{s.n_bins} equal-width bins, exact"
        hg = _group(acc.hist[:, :], s.hist_bins, 4)
        osum = acc.hist.reshape(acc.R, s.hist_bins, 2, 4)[..., 3].sum(axis=2)
        qb = _quantile_blocks(hg["w"], s.n_bins)
        qg = _regroup(hg, qb, s.n_bins)
        m["ece_plus"] = _gap(qg, "l1")
        corrected["ece_plus"] = _debiased(qg, "l1")
        notes["ece_plus"] = f"ECE+ : {s.n_bins} equal-mass bins, edges on the fine logit grid"
        m["mce"] = _gap(rel, "max")
        notes["mce"] = "largest gap over non-empty equal-width bins, exact"
        m["brier"] = _div(sc["brier"], W)
        m["nll"] = _div(sc["nll"], W)
        m["ne"] = _nan_div(m["nll"], _entropy(m["ctr"]))
        notes["ne"] = "log loss / entropy of the click rate (He et al. 2014; < 1 beats the base rate)"
        m["calibration_ratio"] = _nan_div(sc["wp"], sc["wy"])
        notes["calibration_ratio"] = "sum p / sum y (PCOC; 1 = calibrated in the large)"
        m["mae"] = _div(sc["mae"], W)
        h = acc.hist.reshape(acc.R, s.hist_bins, 2, 4)
        neg, pos = h[..., 0, 0], h[..., 1, 0]
        below = np.cumsum(neg, axis=1) - neg
        P, N = pos.sum(axis=1), neg.sum(axis=1)
        ok = (P > 0) & (N > 0)
        m["auc"] = np.where(ok, _div(np.sum(pos * (below + 0.5 * neg), axis=1), P * N), np.nan)
        auc_bound = float(_div(0.5 * np.sum(pos[0] * neg[0]), P[0] * N[0])) if ok[0] else float("nan")
        notes["auc"] = (f"fine-histogram AUC, |error| <= {auc_bound:.2e}" if ok[0] else
                        "undefined: the log has " + ("no click" if P[0] <= 0 else "only clicks"))
        if not sc["wy"][0] > 0:
            notes["bias"] = "undefined: the log has no click (mean(y) = 0)"
            notes["calibration_ratio"] = "undefined: the log has no click (sum y = 0)"
        if not 0 < sc["wy"][0] < W[0]:
            notes["ne"] = "undefined: the log has one class only (the entropy of the click rate is 0)"
        cl = _lcce_clusters(acc, hg, osum)
        cg = _regroup(hg, cl, s.n_clusters)
        m["lcce"] = _gap(cg, "l2")
        corrected["lcce"] = _debiased(cg, "l2")
        notes["lcce"] = f"{s.n_clusters} logit clusters (deterministic quantile k-means on the fine histogram)"
        if s.oracle:
            om, onotes = oracle_metrics(acc)
            m.update(om)
            notes.update(onotes)
        fields: dict[str, Any] = {}
        dec: dict[str, dict[str, np.ndarray]] = {
            "brier_bins": brier_terms(rel, m["brier"]),
            "brier_clusters": brier_terms(cg, m["brier"]),
            "murphy_fine": brier_terms(hg, m["brier"]),
            "corp": _corp(hg, m["brier"]),
        }
        for f in s.fields:
            k = len(acc.vocab[f])
            cap = acc.fld[f].shape[1] // FIELD_COLS
            g = {n_: a[:, :k] for n_, a in _group(acc.fld[f], cap, FIELD_STATS).items()}
            level_nll = acc.fld[f].reshape(acc.R, cap, 2, FIELD_STATS)[:, :k, :, 3].sum(axis=2)
            fm = _field_sums_metrics(g)
            gone = ~(g["w"].sum(axis=1) > 0)  # a replicate of this field's table with no weight
            corrected[f"gce:{f}"] = np.where(gone, np.nan, _debiased(g, "l2"))
            corrected[f"field_ece:{f}"] = np.where(gone, np.nan, _debiased(g, "l1"))
            fm = {name: np.where(gone, np.nan, val) for name, val in fm.items()}
            for name, val in fm.items():
                m[f"{name}:{f}"] = val
            if not np.any(g["sy"][0] > 0):
                notes[f"abs_bias:{f}"] = f"undefined: no level of {f} has a click"
            fields[f] = {
                "levels": acc.levels(f),
                "weight": g["w"], "mean_p": _div(g["sp"], g["w"]), "ctr": _div(g["sy"], g["w"]),
                "bias": np.where(g["sy"] > 0, _div(g["sp"], g["sy"]) - 1, np.nan),
                "calibration_ratio": np.where(g["sy"] > 0, _div(g["sp"], g["sy"]), np.nan),
                # normalized entropy of the level against its own click rate (undefined: one class)
                "ne": _level_ne(level_nll, g["w"], g["sy"]),
                "gap": _div(g["sp"] - g["sy"], g["w"]),
                "metrics": fm,  # by field object, not by a key built from its name
            }
            if s.scheme == "cells" and s.n_boot > 0:
                # each field's cells draw their own bootstrap counts: its decomposition takes
                # the Brier score from its own table (sum v (y - p)² = sy - 2 spy + spp)
                fb = _div(np.sum(g["sy"] - 2 * g["spy"] + g["spp"], axis=1), g["w"].sum(axis=1))
            else:
                fb = m["brier"]
            dec[f"brier_field:{f}"] = brier_terms(g, fb)
        # reliability: equal-mass bins of the log, fixed across replicates
        ids0 = np.broadcast_to(qb[0], qb.shape)
        rg = _regroup(hg, np.ascontiguousarray(ids0), s.n_bins)
        reli = {"weight": rg["w"], "mean_p": _div(rg["sp"], rg["w"]), "ctr": _div(rg["sy"], rg["w"])}
    # a bootstrap replicate whose resample drew no weight defines no metric: NaN, left out of
    # the intervals (panel.interval keeps the finite replicates); replicate 0 is the log itself
    empty = ~(W > 0)
    if empty.any():
        def undefined(x: np.ndarray) -> np.ndarray:
            return np.where(empty.reshape((-1,) + (1,) * (x.ndim - 1)), np.nan, x)

        m = {k: undefined(v) if k != "weight" else v for k, v in m.items()}
        corrected = {k: undefined(v) for k, v in corrected.items()}
        dec = {d: {t: undefined(v) for t, v in terms.items()} for d, terms in dec.items()}
        fields = {f: {k: (undefined(v) if isinstance(v, np.ndarray) and k != "weight" else
                          {n_: undefined(a) for n_, a in v.items()} if k == "metrics" else v) for k, v in t.items()}
                  for f, t in fields.items()}
        reli = {k: (undefined(v) if k != "weight" else v) for k, v in reli.items()}
    return {"negative_rate": s.negative_rate, "negative_rate_column": s.negative_rate_column, "metrics": m,
            "notes": notes, "fields": fields, "decompositions": dec,
            "reliability": reli, "corrected": corrected, "tests": calibration_tests(acc, hg),
            "bounds": {"auc": auc_bound, "logit_bin_width": 2 * s.logit_range / s.hist_bins}}


#: the oracle metrics of :func:`oracle_metrics`, in the report's order
ORACLE_METRICS = ("oracle_brier", "oracle_mae", "oracle_kl", "oracle_chebyshev", "oracle_pearson")


def oracle_metrics(acc: Accumulator) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    r"""The oracle metrics of a simulated log, per replicate, from an accumulator that collected
    an oracle CTR :math:`\pi` (``settings.oracle``), exactly as :func:`compute_panel` reports
    them for ``evaluate --oracle`` ("Calibration is Grouping", VR-SAG; anonymous authors, under
    review: Table 1 and Appendix C; the in-memory metrics are :mod:`calib_jax.metrics`').

    With weights :math:`v`, :math:`W = \sum v` and the model's probability :math:`p`:

    .. math::

        \text{oracle Brier} = \frac{\sum v(\pi - p)^2}{W},\quad
        \text{Brier}^+ = \frac{\sum v|\pi - p|}{W},\quad
        \mathrm{KL} = \frac{1}{W}\sum v\Big[\pi\ln\frac{\pi}{p} + (1-\pi)\ln\frac{1-\pi}{1-p}\Big],

    the Chebyshev distance :math:`\max|\pi - p|` over the rows of positive weight (under the cell
    bootstrap a replicate's maximum is drawn from the log's 32 largest gaps,
    :mod:`calib_jax.logs.accumulate`), and the
    weighted Pearson correlation of :math:`p` and :math:`\pi`,
    :math:`\mathrm{cov}_v(p, \pi) / \sqrt{\mathrm{var}_v(p)\,\mathrm{var}_v(\pi)}` from the sums of
    :math:`v\,[p,\ \pi,\ p^2,\ \pi^2,\ p\pi]`, undefined (NaN) where either variance is
    below :math:`10^{-9}` of its mean square (a constant score or oracle: raw sums in double precision
    cannot tell a smaller variance from 0). KL clips
    :math:`p` to :math:`[10^{-12}, 1 - 10^{-12}]`, with :math:`0 \ln 0 = 0`.

    Args:
      acc: an :class:`~calib_jax.logs.accumulate.Accumulator` with ``settings.oracle`` and its
        replicate tables (:meth:`~calib_jax.logs.accumulate.Accumulator.replicated`).

    Returns:
      ``(metrics, notes)``: :data:`ORACLE_METRICS` -> (R,) float64, and the report's note of
      each metric that has one.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.accumulate import Accumulator, Chunk, Settings
      >>> acc = Accumulator(Settings(oracle=True, n_boot=0))
      >>> p, pi = np.array([0.2, 0.4]), np.array([0.3, 0.3])
      >>> acc.update(Chunk(p=p, o=np.log(p / (1 - p)), y=np.array([0.0, 1.0]), v=np.ones(2),
      ...                  keep=np.ones(2, bool), fields={}, oracle=pi))
      >>> m, _ = oracle_metrics(acc)
      >>> [round(float(m[k][0]), 4) for k in ("oracle_brier", "oracle_mae", "oracle_chebyshev")]
      [0.01, 0.1, 0.1]
    """
    if not acc.settings.oracle:
        raise ValueError("the accumulator holds no oracle sums (Settings(oracle=True))")
    names = list(SCALARS) + list(ORACLE_SCALARS)
    sc = {k: acc.scal[:, i] for i, k in enumerate(names)}
    W = sc["w"]
    m: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        m["oracle_brier"] = _div(sc["oracle_brier"], W)
        m["oracle_mae"] = _div(sc["oracle_mae"], W)
        m["oracle_kl"] = _div(sc["oracle_kl"], W)
        m["oracle_chebyshev"] = acc.oracle_max
        mp, mpi = _div(sc["wp"], W), _div(sc["wpi"], W)
        cov = _div(sc["wppi"], W) - mp * mpi
        vp = _div(sc["wpp"], W) - mp * mp
        vpi = _div(sc["wpipi"], W) - mpi * mpi
        # a variance within the raw sums' rounding of 0 is 0: a constant score gave vp ~ 1e-17 and
        # a correlation of 1.0 with a constant oracle
        varies = (vp > _VARIANCE_TOL * _div(sc["wpp"], W)) & (vpi > _VARIANCE_TOL * _div(sc["wpipi"], W))
        m["oracle_pearson"] = np.where(varies, _nan_div(cov, np.sqrt(np.where(varies, vp * vpi, 1.0))), np.nan)
    notes = {"oracle_mae": "Brier+ : mean |pi - p|", "oracle_kl": "full Bernoulli KL(pi || p)",
             "oracle_pearson": "Pearson correlation of p and pi (higher is better)"}
    if not np.isfinite(m["oracle_pearson"][0]):
        notes["oracle_pearson"] = ("undefined on this log: the score or the oracle is constant (a correlation "
                                   "needs both to vary)")
    return m, notes


#: a variance from raw sums below this share of the mean square is read as 0: double-precision sums
#: of p and p^2 cannot resolve a smaller one (the cancellation of E[p^2] - E[p]^2)
_VARIANCE_TOL = 1e-9


def _entropy(q: np.ndarray) -> np.ndarray:
    """Binary entropy in nats, 0 at q in {0, 1}."""
    from scipy.special import entr

    return entr(q) + entr(1.0 - q)


def _level_ne(nll: np.ndarray, w: np.ndarray, sy: np.ndarray) -> np.ndarray:
    """Per-level normalized entropy (R, K): mean log loss / entropy of the level's click rate;
    NaN where the level has no row or one class only."""
    ent = _entropy(_div(sy, w))
    ok = (w > 0) & (ent > 0)
    return np.where(ok, _div(nll, np.where(ok, w * ent, 1.0)), np.nan)


def _field_sums_metrics(g: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A field's metrics that are sums over its levels (:func:`field_metrics`), from its level
    sums ``g`` (each (R, K)); a replicate without weight is not masked here."""
    return {
        "gce": _gap(g, "l2"),
        "field_ece": _gap(g, "l1"),
        "field_rce": _div(np.sum(g["w"] * _div(np.abs(g["sy"] - g["sp"]), g["sy"] + 0.01 * g["w"]),
                                 axis=1), g["w"].sum(axis=1)),
        # levels without a click have no bias; with no clicked level at all it is undefined
        "abs_bias": _nan_div(np.sum(np.where(g["sy"] > 0, g["w"] * np.abs(_div(g["sp"], g["sy"]) - 1), 0),
                                    axis=1), np.sum(np.where(g["sy"] > 0, g["w"], 0), axis=1)),
    }


#: the per-field metrics of :func:`field_metrics` (each a sum over the field's levels)
FIELD_METRICS = ("gce", "field_ece", "field_rce", "abs_bias")


def field_metrics(table: np.ndarray, n_levels: int) -> dict[str, np.ndarray]:
    r"""A field's metrics that are sums over its levels, per replicate, from its level table,
    exactly as :func:`compute_panel` computes them for ``evaluate --field`` (the ``fields`` part).

    With level k's weight :math:`W_k = \sum v`, score sum :math:`P_k = \sum v p` and click
    sum :math:`Y_k = \sum v y`, :math:`W = \sum_k W_k`, and :math:`K^+` the levels with a click:

    .. math::

        \mathrm{GCE} = \sum_k \tfrac{W_k}{W} \Big(\tfrac{P_k - Y_k}{W_k}\Big)^2,\quad
        \text{Field-ECE} = \sum_k \tfrac{W_k}{W} \Big|\tfrac{P_k - Y_k}{W_k}\Big|,\quad
        \text{Field-RCE} = \sum_k \tfrac{W_k}{W} \frac{|Y_k - P_k|}{Y_k + 0.01\,W_k},

    .. math::

        |\text{bias}| = \frac{\sum_{k \in K^+} W_k\,|P_k / Y_k - 1|}{\sum_{k \in K^+} W_k}

    (Field-ECE and Field-RCE: Pan et al., "Field-aware Calibration",
    WWW 2020, eqs. 5 and 6, the RCE with
    the 0.01 W smoothing that keeps a level without clicks finite). A replicate whose table has
    no weight defines none of them (NaN); :math:`|\text{bias}|` is NaN where no level has a click.

    Args:
      table: (R, K' * 2 * 4) per (level, label) sums :math:`\sum v\,[1,\ p,\ p^2,\ \ell]`
        (label 0 then 1 within a level, K' >= ``n_levels`` level slots; the layout of an
        accumulator's field table, :data:`~calib_jax.logs.accumulate.FIELD_COLS` per level).
      n_levels: K, the levels in use (the first K slots).

    Returns:
      ``{"gce", "field_ece", "field_rce", "abs_bias"}`` -> (R,) float64.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.panel import field_metrics
      >>> # two levels, one replicate: level 0 has 10 rows (4 clicks) scored 0.3, level 1 has
      >>> # 10 rows (2 clicks) scored 0.2; sums per (level, label): [w, w p, w p², w nll]
      >>> t = np.array([[6, 1.8, .54, 0, 4, 1.2, .36, 0, 8, 1.6, .32, 0, 2, .4, .08, 0]], float)
      >>> {k: round(float(v[0]), 4) for k, v in field_metrics(t, 2).items()}
      {'gce': 0.005, 'field_ece': 0.05, 'field_rce': 0.122, 'abs_bias': 0.125}
    """
    tab = np.asarray(table, np.float64)
    cap = tab.shape[1] // FIELD_COLS if tab.ndim == 2 else -1
    if tab.ndim != 2 or tab.shape[1] != cap * FIELD_COLS or not 0 <= n_levels <= cap:
        raise ValueError(f"`table` must be (R, K' * {FIELD_COLS}) with K' >= n_levels, got shape {tab.shape} and "
                         f"n_levels={n_levels}")
    with np.errstate(invalid="ignore", divide="ignore"):
        g = {n_: a[:, :n_levels] for n_, a in _group(tab, cap, FIELD_STATS).items()}
        gone = ~(g["w"].sum(axis=1) > 0)
        return {name: np.where(gone, np.nan, val) for name, val in _field_sums_metrics(g).items()}


def field_metric_replicates(table: np.ndarray, n_levels: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    r"""A field's metrics per replicate and the bias-corrected replicates of its gap norms, as
    :func:`compute_panel` computes both for ``evaluate --field`` (the report's ``value`` of GCE
    and Field-ECE is the corrected one, :math:`\sum_k \tfrac{W_k}{W}|g_k|` with each level's
    plug-in bias removed, :func:`calib_jax.logs.cellstats.debiased_gap`; the metrics' formulas
    are :func:`field_metrics`').

    Args:
      table: (R, K' * 2 * 4) per (level, label) sums, as :func:`field_metrics` takes it.
      n_levels: K, the levels in use.

    Returns:
      ``(metrics, corrected)``: :func:`field_metrics`' dict, and ``{"gce", "field_ece"}`` ->
      (R,) corrected values (NaN where a replicate's table has no weight).

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.panel import field_metric_replicates
      >>> t = np.array([[6, 1.8, .54, 0, 4, 1.2, .36, 0, 8, 1.6, .32, 0, 2, .4, .08, 0]], float)
      >>> m, c = field_metric_replicates(t, 2)
      >>> round(float(m["field_ece"][0]), 4), sorted(c)
      (0.05, ['field_ece', 'gce'])
    """
    metrics = field_metrics(table, n_levels)
    tab = np.asarray(table, np.float64)
    cap = tab.shape[1] // FIELD_COLS
    with np.errstate(invalid="ignore", divide="ignore"):
        g = {n_: a[:, :n_levels] for n_, a in _group(tab, cap, FIELD_STATS).items()}
        gone = ~(g["w"].sum(axis=1) > 0)
        corrected = {"gce": np.where(gone, np.nan, _debiased(g, "l2")),
                     "field_ece": np.where(gone, np.nan, _debiased(g, "l1"))}
    return metrics, corrected


def _debiased(g: dict[str, np.ndarray], norm: str) -> np.ndarray:
    """The gap norm with its plug-in bias removed (:func:`calib_jax.logs.cellstats.debiased_gap`), (R,)."""
    return debiased_gap(g["w"], g["sp"], g["sy"], norm)


def calibration_tests(acc: Accumulator, hg: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Spiegelhalter's Z, Hosmer-Lemeshow and Cox's test on the log (replicate 0), from the fine
    logit histogram: each (fine bin, label) cell is one row at the cell's mean score (mean logit
    for Cox) with the cell's weight as a frequency weight. Within a fine bin scores differ by
    at most a bin width in logit, so the statistics equal the row-level ones up to that spread;
    HL's groups are the 10 equal-mass groups on the fine grid. Weights are read as impression
    counts (frequency weights); the CORP resampling test runs when they are whole numbers,
    with both label cells of a fine bin at the bin's mean score (PAV pools them, as the CORP
    decomposition of the report pools the fine bins). A test undefined on the log (one class;
    a constant score for Cox's slope) has null numbers and the reason in its note, as have all
    of them for a log whose kept-negative rate is a column (``settings.negative_rate_column``).

    A negatively downsampled log (``settings.negative_rate`` = w) is tested on its kept rows,
    which are independent Bernoulli draws: a kept row of population probability p clicks with
    probability p' = p / (p + (1 - p) w) (:func:`calib_jax.logs.downsampling.kept_probability`).
    So each cell's score becomes p' (its logit ``logit(p) - ln w``) and a non-click cell's
    weight is multiplied back by w; weighing the kept non-clicks 1/w as impressions would
    count each of them 1/w times and shrink every p-value."""
    s = acc.settings
    h = acc.hist.reshape(acc.R, s.hist_bins, 2, 4)[0]  # (H, label, [w, sp, spp, so])
    w = h[..., 0].ravel()
    keep = w > 0
    if not keep.any():
        return []
    if s.negative_rate_column is not None:  # the kept rows' scores p' differ row by row within a cell
        why = (f"not computed: the negatives' rate varies by row (column {s.negative_rate_column!r}), and the kept "
               "rows' probabilities p / (p + (1 - p) w) are not in the cells; give one --negative-rate for them")
        return [{"test": name, "statistic": None, "df": None, "p_value": None, "null": "", "note": why}
                for name in ("spiegelhalter_z", "hosmer_lemeshow", "cox", "corp")]
    # every (fine bin, label) cell is a row, the empty ones with weight 0 at the bin's centre
    centre = np.repeat(-s.logit_range + (np.arange(s.hist_bins) + 0.5) * (2 * s.logit_range / s.hist_bins), 2)
    o: Any = np.where(keep, _div(h[..., 3], h[..., 0]).ravel(), centre)  # Any: the tests take array-likes
    p: Any = np.where(keep, _div(h[..., 1], h[..., 0]).ravel(), 1.0 / (1.0 + np.exp(-centre)))
    y: Any = np.broadcast_to(np.array([0.0, 1.0]), (s.hist_bins, 2)).ravel().copy()
    rate = s.negative_rate
    if rate is not None:  # the kept rows: scores p', non-clicks at their own weight (docstring)
        w = np.where(y == 0, w * rate, w)
        # counts of rows stay whole numbers: (n / rate) * rate is n up to the sum's rounding
        w = np.where(np.abs(w - np.rint(w)) <= 1e-9 * np.maximum(w, 1.0), np.rint(w), w)
        p, o = kept_probability(p, rate), o - np.log(rate)
        blocks: Any = np.repeat(_quantile_blocks(w.reshape(1, s.hist_bins, 2).sum(axis=2), 10)[0], 2)
    else:
        blocks = np.repeat(_quantile_blocks(hg["w"][:1], 10)[0], 2)
    if not (0 < float(np.sum(w * y)) < float(np.sum(w))):
        return []
    out: list[dict[str, Any]] = []

    def undefined(name: str, err: ValueError) -> None:
        out.append({"test": name, "statistic": None, "df": None, "p_value": None, "null": "",
                    "note": f"undefined on this log: {err}"})

    with np.errstate(all="ignore"):
        try:
            z, pz = spiegelhalter(p, y, w)
        except ValueError as err:
            undefined("spiegelhalter_z", err)
        else:
            out.append({"test": "spiegelhalter_z", "statistic": z, "df": None,
                        "p_value": pz, "null": "N(0, 1), two-sided",
                        "note": "Spiegelhalter 1986: Brier score against its expectation"})
        hl_stat, hl_df, hl_p = hosmer_lemeshow(p, y, w, blocks, 10)
        e_g, n_g = np.bincount(blocks, w * p, 10), np.bincount(blocks, w, 10)
        fewest = float(np.min(e_g[n_g > 0])) if np.any(n_g > 0) else 0.0  # over the groups holding rows
        impossible = ("; infinite: a group's scores are all 0 (or all 1) and its labels are not, labels "
                      "the scores call impossible, so p = 0" if hl_stat == np.inf else "")
        out.append({"test": "hosmer_lemeshow", "statistic": hl_stat, "df": hl_df,
                    "p_value": hl_p, "null": f"chi2({int(hl_df)})",
                    "note": "10 equal-mass groups; df = groups (scores fixed before these labels); fewest "
                            f"expected clicks in a group {fewest:.3g} (the chi-square approximation wants >= 5)"
                            + impossible})
        filled = np.flatnonzero(h[..., 0].sum(axis=1) > 0)  # fine logit bins holding weight
        try:
            if filled.size < 2:  # the two label cells of one bin differ in their score by rounding only
                raise ValueError("every score lies in one fine logit bin (a constant score): Cox's slope "
                                 "is not identifiable")
            cx = cox(o, y, w)
            if not all(np.isfinite(x) for x in (cx.statistic, cx.p_value, cx.intercept, cx.slope)):
                raise ValueError("the fit gave no finite intercept and slope (scores nearly constant)")
        except ValueError as err:
            undefined("cox", err)
        else:
            out.append({"test": "cox", "statistic": cx.statistic, "df": 2.0, "p_value": cx.p_value,
                        "null": "chi2(2): intercept 0 and slope 1",
                        "note": f"intercept {cx.intercept:.4g}, slope {cx.slope:.4g}, "
                                f"in the large {cx.in_the_large:.4g}"
                                + ("; the score separates the labels: no maximum-likelihood fit exists (the "
                                   "slope grows without bound)" if cx.separated else
                                   "" if cx.converged else "; Newton did not converge")})
        if np.all(w == np.round(w)):  # frequency weights: the null draws are Binomial(count, p)
            # both label cells of a fine bin at the bin's mean score, so PAV pools them as it
            # pools tied rows: at their own means (equal up to rounding for a constant score)
            # PAV ordered the clicked cell above the other and read it as resolution (MCB
            # 0.088 and p = 0.002 for a calibrated constant score)
            if rate is None:
                hw = h[..., 0].sum(axis=1)
                p_bin = np.repeat(np.where(hw > 0, _div(h[..., 1].sum(axis=1), hw),
                                           1.0 / (1.0 + np.exp(-centre[::2]))), 2)
            else:  # the kept rows' mean p' of the bin
                hw = w.reshape(s.hist_bins, 2).sum(axis=1)
                p_bin = np.repeat(np.where(hw > 0, _div((w * p).reshape(s.hist_bins, 2).sum(axis=1), hw),
                                           p[::2]), 2)
            mcb, pv = corp_test_cells(p_bin, y, w, n_resamples=CORP_RESAMPLES, seed=acc.settings.seed)
            out.append({"test": "corp", "statistic": mcb, "df": None, "p_value": pv,
                        "null": f"{CORP_RESAMPLES} redraws y ~ Bernoulli(p) (NumPy, seed {acc.settings.seed})",
                        "note": "CORP miscalibration MCB (Dimitriadis et al. 2021) against its null draws"})
    if rate is not None:
        for t in out:
            t["note"] += f"; on the kept rows (negatives kept at rate {rate:.6g}, scores p / (p + {rate:.6g} (1 - p)))"
    return out


#: the panel's table helpers under public names, for the per-slice report (:mod:`calib_jax.logs.slicing`)
safe_div = _div
ratio_or_nan = _nan_div
entropy = _entropy
group_table = _group
gap = _gap
