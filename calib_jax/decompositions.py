r"""Exact decompositions of proper scores over a partition (SPEC §5).

Every function returns a named tuple whose terms add up to the score computed directly
(float64: ~1e-15; float32: ~1e-7 relative), plus the per-group terms.

* :func:`brier_grouping` — Brier = UNC + REL − RES + Δ for hard or soft groups
  (seeds/000 eq. 6 and Appendix A.2).
* :func:`murphy` — the classical three-term form (distinct forecast values, Δ = 0), or on
  probability bins with Δ reported (Appendix A.1).
* :func:`nll_grouping` — NLL = UNC + REL − RES + CURV − COV (Appendix B).
* :func:`corp` — CORP decomposition: isotonic recalibration, MCB − DSC + UNC
  (Dimitriadis, Gneiting & Jordan 2021), the modern anchor.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V
from calib_jax._src.eager import compiled
from calib_jax._src.pav import isotonic_fit_values
from calib_jax._src.ranks import tie_groups
from calib_jax.groupstats import (
    GroupSummary,
    _check_groups,
    _columns,
    _raw_stats,
    _safe_div,
    segment_sums,
    summarize,
)
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
    """Brier score = unc + rel − res + delta (seeds/000 eq. 6).

    Per-group arrays (K,): ``rel_k = w_k (μ_k − π_k)²``, ``res_k = w_k (π_k − ȳ)²``,
    ``delta_k = w_k (σ²_k − 2γ_k)``; ``groups`` holds the group summary (mass, μ, π, σ², γ).
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
    """NLL = unc + rel − res + curv − cov (seeds/000 Appendix B); per-group terms (K,)."""

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
    """CORP decomposition of a score: score = mcb − dsc + unc; ``recalibrated`` = PAV fit."""

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
    """
    p, y, w = _inputs(probs, labels, weights)
    g = _check_groups(groups, p.shape[0], n_groups)
    return _centred_summary(p, y, g, n_groups, w)


@functools.partial(jax.jit, static_argnames=("n_groups",))
def _centred_summary(p, y, g, n_groups, w) -> GroupSummary:
    s = summarize(_raw_stats(_columns(p, y, w), g, n_groups))
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
    var = _safe_div(m2, s.weight)
    cov = _safe_div(c2, s.weight)
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
    r"""Grouping decomposition of the Brier score (seeds/000 eq. 6, Appendix A.2).

    .. math::
        \frac1n\sum_i (y_i-p_i)^2 = \underbrace{\bar y(1-\bar y)}_{\rm UNC}
        + \underbrace{\sum_k w_k(\mu_k-\pi_k)^2}_{\rm REL}
        - \underbrace{\sum_k w_k(\pi_k-\bar y)^2}_{\rm RES}
        + \underbrace{\sum_k w_k(\sigma_k^2 - 2\gamma_k)}_{\Delta}

    exactly, for hard ids (n,) or soft memberships (n, K) (soft moments as in App. A.2).
    RES is the w-weighted variance of the group click rates around ȳ ("Var(π_k)" in the
    paper).  Δ is not sign-definite.
    """
    p, y, w = _inputs(probs, labels, weights)
    g = _check_groups(groups, p.shape[0], n_groups)
    return _brier_grouping_core(p, y, g, w, n_groups)


@functools.partial(jax.jit, static_argnames=("n_groups",))
def _brier_grouping_core(p, y, g, w, n_groups) -> BrierGrouping:
    s = _centred_summary(p, y, g, n_groups, w)
    return _brier_from_summary(_wmean((y - p) ** 2, w), s)


def murphy(probs: jax.Array, labels: jax.Array, *, n_bins: int | None = None,
           weights: jax.Array | None = None) -> BrierGrouping:
    r"""Murphy's decomposition Brier = UNC + REL − RES (seeds/000 Appendix A.1).

    With ``n_bins=None`` the partition is by distinct forecast values, so every group is
    constant, σ²_k = γ_k = 0 and Δ = 0 exactly (this needs one sort; the number of groups is
    the number of distinct values, padded to n).  With ``n_bins=M`` the partition is the M
    equal-width bins and Δ is reported rather than dropped — the binned three-term form is
    then not an identity.
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
    r"""Grouping decomposition of the negative log-likelihood (seeds/000 Appendix B).

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
    """
    p, y, w = _inputs(probs, labels, weights)
    e = 1e-12 if p.dtype == jnp.float64 else 1e-7
    e = e if eps is None else eps
    g = _check_groups(groups, p.shape[0], n_groups)
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
        assert n_groups is not None  # required for hard ids (checked by _check_groups)
        K = n_groups
        r = remainder(mu[g])
        rsum = segment_sums(v * r, g, K)
    else:
        r = remainder(jnp.broadcast_to(mu[None, :], g.shape))
        rsum = jnp.sum(g.astype(p.dtype) * v[:, None] * r, axis=0)
    R = _safe_div(rsum, s.weight)
    ybar = jnp.sum(s.mass * s.pi)
    rel_k = s.mass * _kl(s.pi, mu)
    res_k = s.mass * (_entropy(ybar) - _entropy(s.pi))
    curv_k = s.mass * R
    cov_k = s.mass * s.cov / (mu * (1.0 - mu))
    return _with_totals(NLLGrouping, score, _entropy(ybar), s,
                        rel_k=rel_k, res_k=res_k, curv_k=curv_k, cov_k=cov_k)


def corp(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
         score: str = "brier") -> CORP:
    r"""CORP decomposition (Dimitriadis, Gneiting & Jordan, PNAS 2021).

    Recalibrate with the (weighted) isotonic regression of y on p (pool-adjacent-violators,
    ties pooled), :math:`\hat p^{c}`; with the mean score :math:`\bar S`,

    .. math::
        \mathrm{MCB} = \bar S(p, y) - \bar S(\hat p^c, y),\quad
        \mathrm{DSC} = \bar S(\bar y, y) - \bar S(\hat p^c, y),\quad
        \mathrm{UNC} = \bar S(\bar y, y),

    and :math:`\bar S(p, y) = \mathrm{MCB} - \mathrm{DSC} + \mathrm{UNC}`.  ``score`` is
    ``"brier"`` or ``"nll"`` (PAV is optimal for every proper score at once).
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
