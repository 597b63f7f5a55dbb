r"""Exact decompositions of proper scores over a partition.

Every function returns a named tuple whose terms add up to the score computed directly
(float64: ~1e-15; float32: ~1e-7 relative), plus the per-group terms.

* :func:`brier_grouping` — Brier = UNC + REL − RES + Δ for hard or soft groups
  ("Calibration is Grouping" (VR-SAG; anonymous authors, under review), eq. 6 and Appendix A.2).
* :func:`murphy` — the classical three-term form (distinct forecast values, Δ = 0; Murphy,
  "A New Vector Partition of the Probability Score", J. Applied Meteorology 1973), or on
  probability bins with Δ reported (VR-SAG paper, Appendix A.1).
* :func:`nll_grouping` — NLL = UNC + REL − RES + CURV − COV (VR-SAG paper, Appendix B).
* :func:`corp` — CORP decomposition: isotonic recalibration, MCB − DSC + UNC
  (Dimitriadis, Gneiting and Jordan, "Stable Reliability Diagrams for Probabilistic
  Classifiers", PNAS 2021), the modern anchor.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V
from calib_jax._src.arrays import safe_div, stat_columns
from calib_jax._src.eager import compiled
from calib_jax._src.metric_inputs import check_eps
from calib_jax._src.pav import isotonic_fit_values
from calib_jax._src.ranks import tie_groups
from calib_jax._src.validation import check_groups
from calib_jax.groupstats import GroupSummary, raw_group_stats, segment_sums, summarize
from calib_jax.partitions import uniform_bins

__all__ = [
    "BrierGrouping",
    "NLLGrouping",
    "CORP",
    "brier_grouping",
    "murphy",
    "nll_grouping",
    "corp",
    "group_summary",
]


class BrierGrouping(NamedTuple):
    r"""Brier score = unc + rel − res + delta: the terms of :func:`brier_grouping`.

    "Calibration is Grouping" (VR-SAG; anonymous authors, under review), eq. 6.

    Returned by :func:`brier_grouping` and :func:`murphy`. Scalars are 0-d arrays; per-group
    terms have shape (K,) and sum to their totals. A NamedTuple of arrays, so it passes
    through ``jit`` / ``vmap`` like any pytree.

    Attributes:
      score: the Brier score, the (weighted) mean of :math:`(y_i - p_i)^2`.
      unc: uncertainty :math:`\bar y(1 - \bar y)` of the overall label rate.
      rel: reliability (miscalibration) :math:`\sum_k` ``rel_k`` (>= 0).
      res: resolution :math:`\sum_k` ``res_k`` (>= 0).
      delta: within-group term Δ = :math:`\sum_k` ``delta_k`` (any sign; 0 when every group
        holds one forecast value).
      rel_k: (K,) ``w_k (μ_k − π_k)²``: group mass times squared gap of mean score and label rate.
      res_k: (K,) ``w_k (π_k − ȳ)²``.
      delta_k: (K,) ``w_k (σ²_k − 2γ_k)`` from the within-group score variance and
        score-label covariance.
      groups: the :class:`~calib_jax.groupstats.GroupSummary` (mass, μ, π, σ², γ, weight)
        the terms were computed from.
    """

    score: jax.Array
    unc: jax.Array
    rel: jax.Array
    res: jax.Array
    delta: jax.Array
    rel_k: jax.Array
    res_k: jax.Array
    delta_k: jax.Array
    groups: GroupSummary


class NLLGrouping(NamedTuple):
    r"""NLL = unc + rel − res + curv − cov: the terms of :func:`nll_grouping`.

    "Calibration is Grouping" (VR-SAG; anonymous authors, under review), Appendix B.

    Returned by :func:`nll_grouping`. Scalars are 0-d arrays; per-group terms have shape (K,)
    and sum to their totals.

    Attributes:
      score: mean negative log-likelihood of the (clipped) scores (weighted mean).
      unc: entropy :math:`H(\bar y)` of the overall label rate (nats).
      rel: :math:`\sum_k w_k\,\mathrm{KL}(\pi_k \| \mu_k)` (>= 0).
      res: :math:`H(\bar y) - \sum_k w_k H(\pi_k)` (>= 0).
      curv: :math:`\sum_k w_k R_k`, the mean Bregman remainder of the per-label loss around
        each group's mean score (>= 0).
      cov: :math:`\sum_k w_k \gamma_k / (\mu_k(1-\mu_k))` (any sign).
      rel_k: (K,) per-group terms of ``rel``, :math:`w_k\,\mathrm{KL}(\pi_k \| \mu_k)`.
      res_k: (K,) per-group terms of ``res``, :math:`w_k (H(\bar y) - H(\pi_k))`.
      curv_k: (K,) per-group terms of ``curv``, :math:`w_k R_k`.
      cov_k: (K,) per-group terms of ``cov``, :math:`w_k \gamma_k / (\mu_k(1-\mu_k))`.
      groups: the :class:`~calib_jax.groupstats.GroupSummary` of the clipped scores.
    """

    score: jax.Array
    unc: jax.Array
    rel: jax.Array
    res: jax.Array
    curv: jax.Array
    cov: jax.Array
    rel_k: jax.Array
    res_k: jax.Array
    curv_k: jax.Array
    cov_k: jax.Array
    groups: GroupSummary


class CORP(NamedTuple):
    r"""CORP decomposition of a score: score = mcb − dsc + unc; ``recalibrated`` = PAV fit.

    Returned by :func:`corp`.

    Attributes:
      score: mean score :math:`\bar S(p, y)` of the forecasts (0-d array).
      mcb: miscalibration :math:`\bar S(p, y) - \bar S(\hat p^c, y)` (>= 0).
      dsc: discrimination :math:`\bar S(\bar y, y) - \bar S(\hat p^c, y)` (>= 0).
      unc: uncertainty :math:`\bar S(\bar y, y)` of the constant forecast :math:`\bar y`.
      recalibrated: (n,) the isotonic (PAV) recalibration :math:`\hat p^c` of each row, in the
        input order.
    """

    score: jax.Array
    mcb: jax.Array
    dsc: jax.Array
    unc: jax.Array
    recalibrated: jax.Array


def _inputs(probs, labels, weights):
    return V.check_sample(probs, labels, weights, scores_kind="probs")


def _with_totals(cls, score, unc, groups, **terms_k):
    """``cls(score, unc, groups)`` with every per-group term ``<name>_k`` of ``terms_k`` and
    its total ``<name> = sum_k <name>_k``."""
    totals = {name.removesuffix("_k"): jnp.sum(t) for name, t in terms_k.items()}
    return cls(score=score, unc=unc, groups=groups, **totals, **terms_k)


def group_summary(probs: jax.Array, labels: jax.Array, groups: jax.Array, *,
                  n_groups: int | None = None, weights: jax.Array | None = None) -> GroupSummary:
    r"""Per-group mass, mean score, label rate, variance and covariance, in two passes.

    The first pass gives :math:`w_k, \mu_k, \pi_k`; the second accumulates the centred
    moments :math:`\sum v q (p-\mu_k)^2` and :math:`\sum v q (p-\mu_k)(y-\pi_k)` directly,
    avoiding the cancellation of :math:`E[p^2]-\mu^2` in float32 (use
    :func:`calib_jax.groupstats.summarize` on merged one-pass statistics when the data is
    sharded or streamed).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      groups: (n,) int hard group ids in ``[0, n_groups)``, or (n, K) soft memberships
        (non-negative, rows summing to 1).
      n_groups: number of groups K (static under ``jit``); required for hard ids, optional
        (must equal K) for soft memberships. With hard ids, more than 2^26 groups and more
        than 16 a row raise ``ValueError`` (sparse ids: make them dense with ``np.unique``).
      weights: optional (n,) non-negative row weights (a weight of k counts as k copies).

    Returns:
      A :class:`~calib_jax.groupstats.GroupSummary` of (K,) arrays: ``mass`` (sums to 1),
      ``mu``, ``pi``, ``var`` (>= 0), ``cov`` and the raw ``weight``; empty groups get zeros.
      Called eagerly, invalid input (NaN, a probability outside [0, 1], a label other than
      0/1, a negative weight, a group id outside ``[0, n_groups)`` or soft memberships whose
      rows do not sum to 1) raises ``ValueError`` naming the argument; under ``jit`` /
      ``vmap`` / ``grad``, where values cannot raise, the same checks make every floating
      output NaN. Shape errors and a missing ``n_groups`` for hard ids still raise while
      tracing.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.decompositions import group_summary
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> s = group_summary(p, y, jnp.array([0, 0, 1, 1]), n_groups=2)
      >>> [round(float(m), 4) for m in s.mu], [round(float(r), 4) for r in s.pi]
      ([0.15, 0.85], [0.5, 1.0])
      >>> [round(float(v), 4) for v in s.var], [round(float(c), 4) for c in s.cov]  # (±0.05)², ±0.05·±0.5
      ([0.0025, 0.0025], [0.025, 0.0])
    """
    p, y, w = _inputs(probs, labels, weights)
    g = check_groups(groups, p.shape[0], n_groups)
    return _centred_summary(p, y, g, n_groups, w)


@functools.partial(jax.jit, static_argnames=("n_groups",))
def _centred_summary(p, y, g, n_groups, w) -> GroupSummary:
    s = summarize(raw_group_stats(stat_columns(p, y, w), g, n_groups))
    v = jnp.ones_like(p) if w is None else w
    if g.ndim == 1:
        dp = p - s.mu[g]
        dy = y - s.pi[g]
        m = segment_sums(jnp.stack([v * dp * dp, v * dp * dy], axis=1), g, n_groups)
        m2, c2 = m[:, 0], m[:, 1]
    else:
        dp = p[:, None] - s.mu[None, :]
        dy = y[:, None] - s.pi[None, :]
        q = g.astype(p.dtype) * v[:, None]
        m2 = jnp.sum(q * dp * dp, axis=0)
        c2 = jnp.sum(q * dp * dy, axis=0)
    var = safe_div(m2, s.weight)
    cov = safe_div(c2, s.weight)
    return s._replace(var=var, cov=cov)


def _wmean(x, w):
    return jnp.mean(x) if w is None else jnp.sum(w * x) / jnp.sum(w)


def _brier_from_summary(score, s: GroupSummary) -> BrierGrouping:
    ybar = jnp.sum(s.mass * s.pi)
    rel_k = s.mass * (s.mu - s.pi) ** 2
    res_k = s.mass * (s.pi - ybar) ** 2
    delta_k = s.mass * (s.var - 2.0 * s.cov)
    return _with_totals(BrierGrouping, score, ybar * (1.0 - ybar), s,
                        rel_k=rel_k, res_k=res_k, delta_k=delta_k)


def brier_grouping(probs: jax.Array, labels: jax.Array, groups: jax.Array, *,
                   n_groups: int | None = None, weights: jax.Array | None = None) -> BrierGrouping:
    r"""Grouping decomposition of the Brier score.

    "Calibration is Grouping" (VR-SAG; anonymous authors, under review), eq. 6 and Appendix A.2.

    .. math::
        \frac1n\sum_i (y_i-p_i)^2 = \underbrace{\bar y(1-\bar y)}_{\rm UNC}
        + \underbrace{\sum_k w_k(\mu_k-\pi_k)^2}_{\rm REL}
        - \underbrace{\sum_k w_k(\pi_k-\bar y)^2}_{\rm RES}
        + \underbrace{\sum_k w_k(\sigma_k^2 - 2\gamma_k)}_{\Delta}

    exactly, for hard ids (n,) or soft memberships (n, K) (soft moments as in App. A.2).
    RES is the w-weighted variance of the group click rates around ȳ ("Var(π_k)" in the
    paper).  Δ is not sign-definite.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      groups: (n,) int hard group ids in ``[0, n_groups)``, or (n, K) soft memberships
        (non-negative, rows summing to 1).
      n_groups: number of groups K (static under ``jit``); required for hard ids, optional
        (must equal K) for soft memberships. With hard ids, more than 2^26 groups and more
        than 16 a row raise ``ValueError`` (sparse ids: make them dense with ``np.unique``).
      weights: optional (n,) non-negative row weights (a weight of k counts as k copies).

    Returns:
      A :class:`BrierGrouping`: the score, its four terms (0-d arrays) and the per-group terms
      (K,). Called eagerly, invalid input (NaN, a probability outside [0, 1], a label other
      than 0/1, a negative weight, a group id outside ``[0, n_groups)`` or soft memberships
      whose rows do not sum to 1) raises ``ValueError`` naming the argument; under ``jit`` /
      ``vmap`` / ``grad``, where values cannot raise, the same checks make every floating
      output NaN. Shape errors and a missing ``n_groups`` for hard ids still raise while
      tracing.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.decompositions import brier_grouping
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> g = jnp.array([0, 0, 1, 1])
      >>> r = brier_grouping(p, y, g, n_groups=2)
      >>> round(float(r.score), 4), round(float(r.unc + r.rel - r.res + r.delta), 4)  # (.01+.64+.04+.01)/4
      (0.175, 0.175)
      >>> round(float(r.rel), 4), round(float(r.res), 4), round(float(r.delta), 4)  # .5·.35² + .5·.15², ...
      (0.0725, 0.0625, -0.0225)
      >>> f = jax.jit(lambda p: brier_grouping(p, y, g, n_groups=2).score)
      >>> bool(jnp.isnan(f(p.at[0].set(jnp.nan))))  # under jit a NaN input gives NaN, not a number
      True
    """
    p, y, w = _inputs(probs, labels, weights)
    g = check_groups(groups, p.shape[0], n_groups)
    return _brier_grouping_core(p, y, g, w, n_groups)


@functools.partial(jax.jit, static_argnames=("n_groups",))
def _brier_grouping_core(p, y, g, w, n_groups) -> BrierGrouping:
    s = _centred_summary(p, y, g, n_groups, w)
    return _brier_from_summary(_wmean((y - p) ** 2, w), s)


def murphy(probs: jax.Array, labels: jax.Array, *, n_bins: int | None = None,
           weights: jax.Array | None = None) -> BrierGrouping:
    r"""Murphy's decomposition Brier = UNC + REL − RES.

    "Calibration is Grouping" (VR-SAG; anonymous authors, under review), Appendix A.1.

    With ``n_bins=None`` the partition is by distinct forecast values, so every group is
    constant, σ²_k = γ_k = 0 and Δ = 0 exactly (this needs one sort; the number of groups is
    the number of distinct values, padded to n).  With ``n_bins=M`` the partition is the M
    equal-width bins and Δ is reported rather than dropped — the binned three-term form is
    then not an identity. Murphy, "A New Vector Partition of the Probability Score"
    (Journal of Applied Meteorology 1973).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      n_bins: ``None`` (default) for one group per distinct forecast value, or an int M >= 1
        for M equal-width bins (:func:`calib_jax.partitions.uniform_bins`); static under
        ``jit``.
      weights: optional (n,) non-negative row weights (a weight of k counts as k copies).

    Returns:
      A :class:`BrierGrouping`. With ``n_bins=None`` the per-group arrays have shape (n,)
      (groups past the number of distinct values are empty, with zero terms) and ``delta`` is
      exactly 0; with ``n_bins=M`` they have shape (M,). Called eagerly, invalid input (NaN, a
      probability outside [0, 1], a label other than 0/1, a negative weight, a bad ``n_bins``)
      raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad`` the same
      value checks make every floating output NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.decompositions import murphy
      >>> p = jnp.array([0.2, 0.2, 0.8, 0.8]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> r = murphy(p, y)  # groups {0.2: rate 1/2}, {0.8: rate 1}
      >>> round(float(r.score), 4), round(float(r.unc), 4), round(float(r.rel), 4), round(float(r.res), 4)
      (0.19, 0.1875, 0.065, 0.0625)
      >>> float(r.delta), r.rel_k.shape  # distinct values: no within-group term; padded to n groups
      (0.0, (4,))
    """
    p, y, w = _inputs(probs, labels, weights)
    n = p.shape[0]
    if n_bins is None:
        order, tid = tie_groups(p)
        g = jnp.zeros((n,), jnp.int32).at[order].set(tid)
        s = _centred_summary(p, y, g, n, w)
        s = s._replace(var=jnp.zeros_like(s.var))  # exactly 0: constant forecasts per group
        s = s._replace(cov=jnp.zeros_like(s.cov))
    else:
        V.check_positive_int(n_bins, "n_bins")
        s = _centred_summary(p, y, uniform_bins(p, n_bins=n_bins), n_bins, w)
    return _brier_from_summary(_wmean((y - p) ** 2, w), s)


def _entropy(t):
    # weighted means of 0/1 labels can round a hair outside [0, 1]; clip before the logs
    t = jnp.clip(t, 0.0, 1.0)
    return -(jax.scipy.special.xlogy(t, t) + jax.scipy.special.xlogy(1.0 - t, 1.0 - t))


def _kl(a, b):
    """Bernoulli KL(a || b), 0 log 0 = 0; b must lie strictly inside (0, 1)."""
    a = jnp.clip(a, 0.0, 1.0)
    return (jax.scipy.special.xlogy(a, a) - a * jnp.log(b)
            + jax.scipy.special.xlogy(1.0 - a, 1.0 - a) - (1.0 - a) * jnp.log1p(-b))


def nll_grouping(probs: jax.Array, labels: jax.Array, groups: jax.Array, *,
                 n_groups: int | None = None, weights: jax.Array | None = None,
                 eps: float | None = None) -> NLLGrouping:
    r"""Grouping decomposition of the negative log-likelihood.

    "Calibration is Grouping" (VR-SAG; anonymous authors, under review), Appendix B.

    .. math::
        \mathrm{NLL} = \underbrace{H(\bar y)}_{\rm UNC}
        + \underbrace{\sum_k w_k\,\mathrm{KL}(\pi_k\|\mu_k)}_{\rm REL}
        - \underbrace{\Bigl(H(\bar y) - \sum_k w_k H(\pi_k)\Bigr)}_{\rm RES}
        + \underbrace{\sum_k w_k R_k}_{\rm CURV}
        - \underbrace{\sum_k w_k \frac{\gamma_k}{\mu_k(1-\mu_k)}}_{\rm COV}

    where :math:`R_k = E_k[\phi_Y(p) - \phi_Y(\mu_k) - \phi_Y'(\mu_k)(p-\mu_k)] \ge 0` is the
    Bregman remainder of the convex per-label loss :math:`\phi_Y` (computed here point by
    point, not as a residual, so the identity is a genuine check).  Scores are clipped to
    ``[eps, 1-eps]`` first (as in :func:`calib_jax.metrics.nll`); the decomposition is exact
    for the clipped scores.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      groups: (n,) int hard group ids in ``[0, n_groups)``, or (n, K) soft memberships
        (non-negative, rows summing to 1).
      n_groups: number of groups K (static under ``jit``); required for hard ids, optional
        (must equal K) for soft memberships. With hard ids, more than 2^26 groups and more
        than 16 a row raise ``ValueError`` (sparse ids: make them dense with ``np.unique``).
      weights: optional (n,) non-negative row weights (a weight of k counts as k copies).
      eps: clip of the scores to ``[eps, 1 - eps]`` before the logs, a float in (0, 1/2)
        (another value raises ``ValueError`` naming ``eps``); ``None`` (default) gives 1e-7 in
        float32 and 1e-12 in float64.

    Returns:
      An :class:`NLLGrouping`: the score, its five terms (0-d arrays, nats) and the per-group
      terms (K,). Called eagerly, invalid input (NaN, a probability outside [0, 1], a label other
      than 0/1, a negative weight, a group id outside ``[0, n_groups)`` or soft memberships
      whose rows do not sum to 1) raises ``ValueError`` naming the argument; under ``jit`` /
      ``vmap`` / ``grad``, where values cannot raise, the same checks make every floating
      output NaN. Shape errors and a missing ``n_groups`` for hard ids still raise while
      tracing.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.decompositions import nll_grouping
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> r = nll_grouping(p, y, jnp.array([0, 0, 1, 1]), n_groups=2)
      >>> round(float(r.score), 4), round(float(r.unc + r.rel - r.res + r.curv - r.cov), 4)
      (0.5108, 0.5108)
      >>> round(float(r.unc), 4), round(float(r.curv), 4), round(float(r.cov), 4)  # unc = H(3/4)
      (0.5623, 0.0127, 0.098)
    """
    p, y, w = _inputs(probs, labels, weights)
    e = check_eps(eps)
    e = (1e-12 if p.dtype == jnp.float64 else 1e-7) if e is None else e
    g = check_groups(groups, p.shape[0], n_groups)
    return _nll_grouping_core(p, y, g, w, e, n_groups)


@functools.partial(jax.jit, static_argnames=("n_groups",))
def _nll_grouping_core(p, y, g, w, e, n_groups) -> NLLGrouping:
    p = jnp.clip(p, e, 1.0 - e)
    s = _centred_summary(p, y, g, n_groups, w)
    v = jnp.ones_like(p) if w is None else w
    mu = jnp.clip(s.mu, e, 1.0 - e)
    phi = -(y * jnp.log(p) + (1.0 - y) * jnp.log1p(-p))
    score = jnp.sum(v * phi) / jnp.sum(v)

    def remainder(m):  # per point, for group means m broadcast against p
        phim = -(y[..., None] * jnp.log(m) + (1.0 - y[..., None]) * jnp.log1p(-m)) if m.ndim == 2 \
            else -(y * jnp.log(m) + (1.0 - y) * jnp.log1p(-m))
        yy = y[..., None] if m.ndim == 2 else y
        pp = p[..., None] if m.ndim == 2 else p
        dphi = -yy / m + (1.0 - yy) / (1.0 - m)
        ph = phi[..., None] if m.ndim == 2 else phi
        return ph - phim - dphi * (pp - m)

    if g.ndim == 1:
        assert n_groups is not None  # required for hard ids (checked by check_groups)
        K = n_groups
        r = remainder(mu[g])
        rsum = segment_sums(v * r, g, K)
    else:
        r = remainder(jnp.broadcast_to(mu[None, :], g.shape))
        rsum = jnp.sum(g.astype(p.dtype) * v[:, None] * r, axis=0)
    R = safe_div(rsum, s.weight)
    ybar = jnp.sum(s.mass * s.pi)
    rel_k = s.mass * _kl(s.pi, mu)
    res_k = s.mass * (_entropy(ybar) - _entropy(s.pi))
    curv_k = s.mass * R
    cov_k = s.mass * s.cov / (mu * (1.0 - mu))
    return _with_totals(NLLGrouping, score, _entropy(ybar), s,
                        rel_k=rel_k, res_k=res_k, curv_k=curv_k, cov_k=cov_k)


def corp(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
         score: str = "brier") -> CORP:
    r"""CORP decomposition (Dimitriadis, Gneiting and Jordan, "Stable Reliability Diagrams for
    Probabilistic Classifiers", PNAS 2021).

    Recalibrate with the (weighted) isotonic regression of y on p (pool-adjacent-violators,
    ties pooled), :math:`\hat p^{c}`; with the mean score :math:`\bar S`,

    .. math::
        \mathrm{MCB} = \bar S(p, y) - \bar S(\hat p^c, y),\quad
        \mathrm{DSC} = \bar S(\bar y, y) - \bar S(\hat p^c, y),\quad
        \mathrm{UNC} = \bar S(\bar y, y),

    and :math:`\bar S(p, y) = \mathrm{MCB} - \mathrm{DSC} + \mathrm{UNC}`.  ``score`` is
    ``"brier"`` or ``"nll"`` (PAV is optimal for every proper score at once).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights (a weight of k counts as k copies), used
        both in the PAV fit and in the means.
      score: ``"brier"`` (squared error) or ``"nll"`` (log loss, scores clipped to
        ``[eps, 1 - eps]`` with eps 1e-7 in float32, 1e-12 in float64); static under ``jit``.

    Returns:
      A :class:`CORP` of 0-d arrays ``score``, ``mcb``, ``dsc``, ``unc`` and the (n,) PAV fit
      ``recalibrated``. Called eagerly, invalid input (NaN, a probability outside [0, 1], a
      label other than 0/1, a negative weight, an unknown ``score``) raises ``ValueError``
      naming the argument; under ``jit`` / ``vmap`` / ``grad`` the same value checks make
      every output NaN (an unknown ``score`` still raises while tracing).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.decompositions import corp
      >>> p = jnp.array([0.1, 0.3, 0.6, 0.9]); y = jnp.array([1.0, 0.0, 1.0, 1.0])
      >>> r = corp(p, y)  # PAV pools the first two rows (labels 1, 0 out of order) to 1/2
      >>> [round(float(v), 4) for v in r.recalibrated]
      [0.5, 0.5, 1.0, 1.0]
      >>> round(float(r.mcb), 4), round(float(r.dsc), 4), round(float(r.unc), 4)  # .2675 - .125, ...
      (0.1425, 0.0625, 0.1875)
    """
    p, y, w = _inputs(probs, labels, weights)
    V.check_choice(score, "score", ("brier", "nll"))
    v = jnp.ones_like(p) if w is None else w
    pc = isotonic_fit_values(p, y, v)
    ybar = _wmean(y, w)

    def S(q):
        if score == "brier":
            return _wmean((y - q) ** 2, w)
        e = 1e-12 if p.dtype == jnp.float64 else 1e-7
        qc = jnp.clip(q, e, 1.0 - e)
        return _wmean(-(y * jnp.log(qc) + (1.0 - y) * jnp.log1p(-qc)), w)

    s, sc, su = S(p), S(pc), S(jnp.full_like(p, ybar))
    return CORP(score=s, mcb=s - sc, dsc=su - sc, unc=su, recalibrated=pc)


# Eager calls run one compiled computation each (calib_jax._src.eager); inside a user's jit / vmap
# they are the functions above, unchanged.
brier_grouping = compiled(brier_grouping)
murphy = compiled(murphy)
nll_grouping = compiled(nll_grouping)
corp = compiled(corp)
group_summary = compiled(group_summary)
