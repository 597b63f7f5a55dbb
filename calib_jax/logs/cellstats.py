r"""The report's model-fitting statistics on weighted cells, in NumPy (float64, no JAX).

``calib-jax evaluate`` on an engine's statistics never holds the log's rows: it holds cells
(fine logit bins by label, with their weights and sums) and replicate tables of a few
thousand numbers. Everything the report computes from them is NumPy, so the command never
loads JAX for them (about half a second of its fixed cost, and a second of tracing). The
library's JAX functions are the references, checked in ``tests/test_cli_cellstats.py``:

* :func:`cluster_ids` — the LCCE clusters: :func:`calib_jax.partitions.kmeans_hist` with
  ``init="quantile"`` (Lloyd on the histogram, seeded at the (k + 1/2)/K quantiles) and
  :func:`calib_jax.partitions.assign_1d`, per replicate;
* :func:`debiased_gap` — :func:`calib_jax.bootstrap.debiased_gap`;
* :func:`spiegelhalter`, :func:`hosmer_lemeshow`, :func:`cox` —
  :func:`calib_jax.inference.spiegelhalter_z`, :func:`calib_jax.inference.hosmer_lemeshow`,
  :func:`calib_jax.inference.cox_calibration`;
* :func:`corp_test_cells` — :func:`calib_jax.inference.corp_test`, its null drawn with NumPy.

All work in float64 (the library's functions run in JAX's default float32), so the report's
numbers are the float64 values of the same formulas. Host code; not jit-able.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from calib_jax.logs.accumulate import seed_word

__all__ = ["cluster_ids", "debiased_gap", "spiegelhalter", "hosmer_lemeshow", "cox", "CoxFit", "corp_test_cells",
           "CORP_RESAMPLES"]

#: null draws of the CORP test in the report
CORP_RESAMPLES = 500


def _f64(x: Any) -> np.ndarray:
    return np.asarray(x, np.float64)


def cluster_ids(weight: Any, mean: Any, *, n_clusters: int, n_iter: int = 300) -> np.ndarray:
    r"""The 1-D k-means cluster of every histogram bin, per replicate.

    For each row r: centroids seeded at the bins holding the :math:`(k+\tfrac12)/K` weight
    quantiles, then Lloyd's iterations on the bins (weight :math:`w_{rh}`, position
    :math:`x_{rh}`) until the sorted centroids stop changing (at most ``n_iter``): a bin
    belongs to cluster :math:`\#\{j : t_j \le x_{rh}\}` with thresholds :math:`t_j` the
    midpoints of consecutive centroids, and a centroid moves to its cluster's weighted mean
    (an empty cluster keeps its centroid). Lloyd 1982, "Least squares quantization in PCM",
    IEEE Trans. Inf. Theory 28; the grouping of the LCCE metric, eq. 12 and §2.5 of
    "Calibration is Grouping" (VR-SAG; anonymous authors, under review).

    Args:
      weight: (R, H) non-negative bin weights.
      mean: (R, H) bin positions (logit means), non-decreasing along each row.
      n_clusters: K >= 1.
      n_iter: at most this many Lloyd iterations.

    Returns:
      (R, H) int64 cluster ids in ``[0, K)``.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.cellstats import cluster_ids
      >>> x = np.array([[0.0, 0.1, 0.2, 1.0, 1.1, 1.2]]); w = np.ones_like(x)
      >>> cluster_ids(w, x, n_clusters=2).tolist()
      [[0, 0, 0, 1, 1, 1]]
    """
    w, x = _f64(weight), _f64(mean)
    R, H = w.shape
    K = int(n_clusters)
    cdf = np.cumsum(w, axis=1)
    targets = cdf[:, -1:] * (np.arange(K) + 0.5) / K
    seed_bin = np.minimum(np.sum(cdf[:, None, :] < targets[:, :, None], axis=2), H - 1)  # searchsorted, left
    c = np.sort(np.take_along_axis(x, seed_bin, axis=1), axis=1)

    def assign(xr: np.ndarray, cr: np.ndarray) -> np.ndarray:
        t = 0.5 * (cr[:, 1:] + cr[:, :-1])
        return np.sum(xr[:, :, None] >= t[:, None, :], axis=2)

    active = np.arange(R)
    for _ in range(int(n_iter)):
        if not active.size:
            break
        ids = assign(x[active], c[active]) + K * np.arange(active.size)[:, None]
        sw = np.bincount(ids.ravel(), w[active].ravel(), K * active.size).reshape(-1, K)
        sx = np.bincount(ids.ravel(), (w[active] * x[active]).ravel(), K * active.size).reshape(-1, K)
        new = np.sort(np.where(sw > 0, sx / np.where(sw > 0, sw, 1.0), c[active]), axis=1)
        moved = np.any(new != c[active], axis=1)
        c[active] = new
        active = active[moved]
    return assign(x, c).astype(np.int64)


def debiased_gap(weight: Any, sum_p: Any, sum_y: Any, norm: str = "l1") -> np.ndarray:
    r"""A gap-norm calibration error with its plug-in bias removed, from group sums.

    With masses :math:`m_k = n_k/\sum_j n_j`, gaps :math:`\hat g_k = (S^p_k - S^y_k)/n_k`
    and :math:`\hat s_k^2 = \bar y_k(1-\bar y_k)/(n_k-1)` (0 for :math:`n_k \le 1`):
    :math:`\sum_k m_k(\hat g_k^2 - \hat s_k^2)` (ℓ2) or
    :math:`\sum_k m_k(2|\hat g_k| - \mathbb E|N(\hat g_k, \hat s_k^2)|)` (ℓ1), as
    :func:`calib_jax.bootstrap.debiased_gap` (Kumar, Liang & Ma 2019, "Verified Uncertainty
    Calibration", NeurIPS, the debiased squared error; Efron & Tibshirani 1993, "An
    Introduction to the Bootstrap", ch. 10, for the ℓ1 bias correction).

    Args:
      weight, sum_p, sum_y: (..., K) group weights, sums of scores and of labels.
      norm: ``"l1"`` or ``"l2"``.

    Returns:
      (...,) the debiased error (may be negative when every gap is within its noise).

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.cellstats import debiased_gap
      >>> w = np.array([100., 100.]); sp = np.array([20., 50.]); sy = np.array([20., 40.])
      >>> round(float(debiased_gap(w, sp, sy, "l2")), 5)  # plug-in 0.005
      0.00298
    """
    if norm not in ("l1", "l2"):
        raise ValueError(f"`norm` must be 'l1' or 'l2', got {norm!r}")
    w, sp, sy = _f64(weight), _f64(sum_p), _f64(sum_y)
    safe = np.where(w > 0, w, 1.0)
    m = w / np.maximum(np.sum(w, axis=-1, keepdims=True), 1e-30)
    g = np.where(w > 0, (sp - sy) / safe, 0.0)
    ybar = np.where(w > 0, sy / safe, 0.0)
    s2 = np.where(w > 1, ybar * (1.0 - ybar) / np.where(w > 1, w - 1.0, 1.0), 0.0)
    if norm == "l2":
        return np.sum(m * (g * g - s2), axis=-1)
    from scipy.special import ndtr

    s = np.sqrt(np.maximum(s2, 0.0))
    safe_s = np.where(s > 0, s, 1.0)
    folded = np.where(s > 0, s * math.sqrt(2.0 / math.pi) * np.exp(-0.5 * (g / safe_s) ** 2)
                      + g * (1.0 - 2.0 * ndtr(-g / safe_s)), np.abs(g))
    return np.sum(m * (2.0 * np.abs(g) - folded), axis=-1)


def spiegelhalter(p: Any, y: Any, w: Any) -> tuple[float, float]:
    r"""Spiegelhalter's Z on weighted rows, and its two-sided normal p-value.

    :math:`Z = \sum_i w_i (y_i - p_i)(1 - 2p_i) \big/ \sqrt{\sum_i w_i (1-2p_i)^2 p_i(1-p_i)}`
    (Spiegelhalter 1986, "Probabilistic prediction in patient management and clinical
    trials", Statistics in Medicine 5), as :func:`calib_jax.inference.spiegelhalter_z`.

    Args:
      p: (n,) probabilities; y: (n,) labels (0/1); w: (n,) frequency weights.

    Returns:
      ``(z, p_value)``. ``ValueError`` when the denominator is 0 (every score 0, 1/2 or 1).

    Example:
      >>> from calib_jax.logs.cellstats import spiegelhalter
      >>> z, pv = spiegelhalter([0.2, 0.2, 0.8, 0.8], [0, 0, 1, 1], [1, 1, 1, 1])
      >>> round(z, 4), round(pv, 4)
      (-1.0, 0.3173)
    """
    p, y, w = _f64(p), _f64(y), _f64(w)
    num = float(np.sum(w * (y - p) * (1.0 - 2.0 * p)))
    var = float(np.sum(w * (1.0 - 2.0 * p) ** 2 * p * (1.0 - p)))
    if not var > 0:
        raise ValueError("`probs` are all 0, 1/2 or 1: Spiegelhalter's Z has no variance")
    z = num / math.sqrt(var)
    return z, math.erfc(abs(z) / math.sqrt(2.0))


def hosmer_lemeshow(p: Any, y: Any, w: Any, groups: Any, n_groups: int) -> tuple[float, float, float]:
    r"""The Hosmer–Lemeshow statistic on given risk groups, with :math:`\chi^2` p-value.

    :math:`\hat C = \sum_g (O_g - E_g)^2 / (E_g(1 - E_g/n_g))` over the non-empty groups with
    a positive denominator, referred to :math:`\chi^2` with (non-empty groups) degrees of
    freedom: scores fixed before these labels (Hosmer & Lemeshow 1980, "Goodness of fit
    tests for the multiple logistic regression model", Communications in Statistics A 9), as
    :func:`calib_jax.inference.hosmer_lemeshow` with ``ddof=0``. A group whose scores are all 0
    (or all 1) but whose labels are not makes the statistic :math:`+\infty` and the p-value 0.

    Args:
      p, y, w: (n,) probabilities, labels, frequency weights.
      groups: (n,) group ids in ``[0, n_groups)``.
      n_groups: the number of groups.

    Returns:
      ``(statistic, df, p_value)``.

    Example:
      >>> from calib_jax.logs.cellstats import hosmer_lemeshow
      >>> stat, df, pv = hosmer_lemeshow([0.2, 0.2, 0.8, 0.8], [0, 1, 1, 1], [1, 1, 1, 1], [0, 0, 1, 1], 2)
      >>> round(stat, 4), df, round(pv, 4)
      (1.625, 2.0, 0.4437)
    """
    from scipy.special import chdtrc

    p, y, w = _f64(p), _f64(y), _f64(w)
    g = np.asarray(groups, np.int64)
    # O_g - E_g and n_g - E_g summed directly: no cancellation near p = 1
    n_g, gap, e, e_not = (np.bincount(g, v, n_groups) for v in (w, w * (y - p), w * p, w * (1.0 - p)))
    den = e * e_not / np.where(n_g > 0, n_g, 1.0)
    ok = (n_g > 0) & (den > 0)
    stat = float(np.sum(np.where(ok, gap**2 / np.where(ok, den, 1.0), 0.0)))
    if np.any((n_g > 0) & ~(den > 0) & (gap != 0)):  # labels the scores call impossible
        stat = math.inf
    df = float(np.sum(n_g > 0))
    return stat, df, float(chdtrc(df, stat))


class CoxFit(NamedTuple):
    """Cox's logistic recalibration of weighted rows (:func:`cox`).

    Attributes:
      intercept, slope: the fit of :math:`\\sigma(a + b z)`.
      in_the_large: the intercept with the slope fixed at 1.
      statistic: the likelihood-ratio statistic against (0, 1).
      p_value: its :math:`\\chi^2_2` upper tail, :math:`e^{-\\Lambda/2}`.
      converged: whether the gradient vanished at a maximum.
      separated: whether the logit separates the labels (every click at or above every
        non-click, or the reverse): no maximum-likelihood fit exists, so not ``converged``.

    Example:
      >>> from calib_jax.logs.cellstats import CoxFit
      >>> CoxFit(0.0, 1.0, 0.0, 0.0, 1.0, True).slope
      1.0
    """

    intercept: float
    slope: float
    in_the_large: float
    statistic: float
    p_value: float
    converged: bool
    separated: bool = False


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _loglik_gain(theta: np.ndarray, z: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Σ w [ℓ(a + b z) − ℓ(z)], summed term by term."""
    eta = theta[0] + theta[1] * z
    return float(np.sum(w * (y * (eta - z) - (np.logaddexp(0.0, eta) - np.logaddexp(0.0, z)))))


def _separated(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> bool:
    """Whether the logit separates the labels on the rows of positive weight (completely or at a
    tie): the logistic likelihood then has no maximum."""
    live = w > 0
    z1, z0 = z[live & (y == 1)], z[live & (y == 0)]
    return bool(z1.size and z0.size and (z0.max() <= z1.min() or z1.max() <= z0.min()))


def cox(z: Any, y: Any, w: Any, *, n_iter: int = 30) -> CoxFit:
    r"""Cox's calibration intercept and slope on weighted rows, and their likelihood-ratio test.

    Maximum likelihood of :math:`P(y=1\mid z) = \sigma(a + bz)` on the logits :math:`z` by
    Newton's method from :math:`(0, 1)` (a step that lowers the likelihood is halved, as
    :func:`calib_jax.inference.cox_calibration`);
    :math:`\Lambda = 2\sum_i w_i[y_i(\hat a + \hat b z_i - z_i) - \log\frac{1 + e^{\hat a +
    \hat b z_i}}{1 + e^{z_i}}] \sim \chi^2_2` under calibration (Cox 1958, "Two further
    applications of a model for binary regression", Biometrika 45).

    Args:
      z: (n,) logits; y: (n,) labels; w: (n,) frequency weights.
      n_iter: Newton iterations.

    Returns:
      :class:`CoxFit`. ``ValueError`` for one class only, or a single logit value on the rows
      of positive weight (the slope is not identifiable).

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.cellstats import cox
      >>> rng = np.random.default_rng(0); z = rng.normal(-1, 1, 20000)
      >>> y = (rng.random(20000) < 1 / (1 + np.exp(-0.5 * z))).astype(float)
      >>> r = cox(z, y, np.ones_like(z))
      >>> round(r.slope, 1), r.p_value < 1e-6
      (0.5, True)
    """
    z, y, w = _f64(z), _f64(y), _f64(w)
    sy, sw = float(np.sum(w * y)), float(np.sum(w))
    if not 0 < sy < sw:
        raise ValueError("`labels` contains a single class: Cox's recalibration diverges")
    pos = w > 0
    if not np.max(z[pos]) > np.min(z[pos]):
        raise ValueError("`probs` take a single value (on the rows of positive weight): Cox's slope is not "
                         "identifiable")
    X = np.stack([np.ones_like(z), z], axis=1)
    theta = np.array([0.0, 1.0])
    for _ in range(int(n_iter)):
        q = _sigmoid(X @ theta)
        grad = X.T @ (w * (y - q))
        hess = (X * (w * q * (1.0 - q))[:, None]).T @ X + 1e-9 * sw * np.eye(2)
        step = np.linalg.solve(hess, grad)
        new = theta + step
        theta = new if _loglik_gain(new, z, y, w) >= _loglik_gain(theta, z, y, w) else theta + 0.5 * step
    grad = X.T @ (w * (y - _sigmoid(X @ theta)))
    # labels the score separates (every click at or above every non-click, or below) have no
    # maximum-likelihood fit: the gradient fades as the slope grows without bound
    separated = _separated(z, y, w)
    converged = bool(np.max(np.abs(grad)) <= 1e-3 * max(sw, 1.0) ** 0.5) and not separated
    a = 0.0
    for _ in range(int(n_iter)):
        q1 = _sigmoid(a + z)
        a += float(np.sum(w * (y - q1))) / max(float(np.sum(w * q1 * (1.0 - q1))), 1e-30)
    stat = 2.0 * max(_loglik_gain(theta, z, y, w), 0.0)
    return CoxFit(float(theta[0]), float(theta[1]), a, stat, math.exp(-0.5 * stat), converged, separated)


def corp_test_cells(p: np.ndarray, y: np.ndarray, w: np.ndarray, *, n_resamples: int = CORP_RESAMPLES,
                    seed: int = 0) -> tuple[float, float]:
    r"""The CORP resampling test of calibration on weighted cells: ``(MCB, p-value)``.

    The statistic is CORP's Brier miscalibration
    :math:`\mathrm{MCB} = \bar S(p) - \bar S(\hat p^{\mathrm{PAV}})` (Dimitriadis, Gneiting &
    Jordan 2021, "Stable reliability diagrams for probabilistic classifiers", PNAS 118,
    eq. 4), with :math:`\hat p^{\mathrm{PAV}}` the isotonic recalibration of the rates on
    :math:`p` (ties pooled); the null redraws a cell of weight :math:`w` with
    :math:`\mathrm{Binomial}(w, p)` clicks, and the p-value is
    :math:`(1 + \#\{\mathrm{MCB}^* \ge \mathrm{MCB}\})/(1 + B)`. The same statistic and null as
    :func:`calib_jax.inference.corp_test`, drawn by NumPy's generator seeded with ``seed``
    instead of JAX keys; rows of weight 0 add nothing.

    Args:
      p: (n,) probabilities; y: (n,) click rates in [0, 1]; w: (n,) whole-number weights.
      n_resamples: null draws B.
      seed: the seed of the null draws.

    Returns:
      ``(MCB, p_value)``.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.cellstats import corp_test_cells
      >>> p = np.array([0.1, 0.1, 0.9, 0.9]); y = np.array([0.0, 1.0, 0.0, 1.0])
      >>> mcb, pv = corp_test_cells(p, y, np.array([90.0, 10.0, 10.0, 90.0]), n_resamples=99)
      >>> round(mcb, 6), 0 < pv <= 1
      (0.0, True)
    """
    from scipy.optimize import isotonic_regression

    from calib_jax._src.pav_numpy import pool_ties

    kept = np.asarray(w) > 0
    p64, w64, y = _f64(p)[kept], _f64(w)[kept], _f64(y)[kept]
    rng = np.random.default_rng([seed_word(seed), 0x636F7270])  # "corp"
    clicks = rng.binomial(np.round(w64).astype(np.int64), np.clip(p64, 0.0, 1.0), size=(int(n_resamples), p64.size))
    sw = float(np.sum(w64))
    order, tid, _, wsum, _ = pool_ties(p64, np.zeros_like(p64), w64)  # once: p is the same in every draw

    def mcb(rate: np.ndarray) -> float:  # CORP's MCB: PAV of the rates on p (ties pooled)
        ymean = np.bincount(tid, weights=(w64 * rate)[order]) / wsum
        pc = np.empty_like(p64)
        pc[order] = isotonic_regression(ymean, weights=wsum, increasing=True).x[tid]
        return float(np.sum(w64 * ((rate - p64) ** 2 - (rate - pc) ** 2)) / sw)

    stat = mcb(y)
    null = np.array([mcb(c / w64) for c in clicks])
    return stat, float((1.0 + np.sum(null >= stat - 1e-12 * abs(stat))) / (1.0 + n_resamples))
