"""Oracle ("sufficient information") metrics: scores compared with the true probabilities
π, available only in simulation ("Calibration is Grouping", VR-SAG; anonymous authors, under
review: Table 1 and Appendix C), and the Pearson / Spearman correlations between them.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax._src import validation as V
from calib_jax._src.metric_inputs import check_probs_oracle, clip_probs, weighted_mean
from calib_jax._src.ranks import average_ranks


def oracle_brier(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Oracle Brier score: the mean squared distance between scores and true probabilities.

    .. math:: \mathrm{Brier}^{\pi} = \frac{\sum_i v_i(\pi_i - p_i)^2}{\sum_i v_i}

    (unweighted: :math:`\frac1n\sum_i(\pi_i - p_i)^2`). Unlike the label Brier score it has no
    irreducible noise term, so it is 0 exactly when the scores are the true probabilities.
    Table 1 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review), where it
    is the reference the label-based metrics are ranked against.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      oracle: (n,) true probabilities :math:`\pi_i` in [0, 1] (known only in simulation).
      weights: optional (n,) non-negative row weights with a positive sum (a weight of k
        counts as k copies of the row).

    Returns:
      A scalar array, >= 0. Called eagerly, invalid input (NaN, a value outside [0, 1], a
      negative weight, mismatched lengths) raises ``ValueError`` naming the argument; under
      ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same checks make the result
      NaN (a length mismatch still raises while tracing).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.metrics import oracle_brier
      >>> p = jnp.array([0.2, 0.6]); pi = jnp.array([0.3, 0.4])
      >>> round(float(oracle_brier(p, pi)), 4)  # (0.1**2 + 0.2**2) / 2
      0.025
      >>> round(float(jax.jit(oracle_brier)(p, pi)), 4)
      0.025
    """
    p, t, w = check_probs_oracle(probs, oracle, weights)
    return weighted_mean((t - p) ** 2, w)


def oracle_mae(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Brier⁺: the mean absolute distance between scores and true probabilities.

    .. math:: \mathrm{Brier}^{+} = \frac{\sum_i v_i|\pi_i - p_i|}{\sum_i v_i}

    (unweighted: :math:`\frac1n\sum_i|\pi_i - p_i|`). Table 1 and Appendix C of "Calibration
    is Grouping" (VR-SAG; anonymous authors, under review).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      oracle: (n,) true probabilities :math:`\pi_i` in [0, 1].
      weights: optional (n,) non-negative row weights with a positive sum.

    Returns:
      A scalar array, >= 0. Called eagerly, invalid input (NaN, a value outside [0, 1], a
      negative weight) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` /
      ``grad`` the same checks make the result NaN instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import oracle_mae
      >>> round(float(oracle_mae(jnp.array([0.2, 0.6]), jnp.array([0.3, 0.4]))), 4)  # (0.1 + 0.2) / 2
      0.15
    """
    p, t, w = check_probs_oracle(probs, oracle, weights)
    return weighted_mean(jnp.abs(t - p), w)


def oracle_kl(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None,
              eps: float | None = None) -> jax.Array:
    r"""Mean Bernoulli KL divergence :math:`\mathrm{KL}(\pi_i \| p_i)`.

    .. math:: \frac1n\sum_i \pi_i\log\frac{\pi_i}{p_i} + (1-\pi_i)\log\frac{1-\pi_i}{1-p_i}

    (a weighted mean with ``weights``). Appendix C of "Calibration is Grouping" (VR-SAG;
    anonymous authors, under review) prints only the first half, which is not a divergence
    between the two Bernoulli laws (it can be negative); the full divergence is used here
    (>= 0, = 0 iff p = π). ``0 log 0 = 0``; p is clipped to ``[eps, 1-eps]``.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      oracle: (n,) true probabilities :math:`\pi_i` in [0, 1] (not clipped).
      weights: optional (n,) non-negative row weights with a positive sum.
      eps: clip of ``probs`` (a static float); default 1e-7 in float32, 1e-12 in float64.

    Returns:
      A scalar array in nats, >= 0 (rounding below 0 is floored at 0 per row). Called eagerly,
      invalid input (NaN, a value outside [0, 1], a negative weight) raises ``ValueError``
      naming the argument; under ``jit`` / ``vmap`` / ``grad`` the same checks make the result
      NaN instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import oracle_kl
      >>> pi = jnp.array([0.3, 0.4])
      >>> round(float(oracle_kl(pi, pi)), 4)  # p = pi: no divergence
      0.0
      >>> round(float(oracle_kl(jnp.array([0.2, 0.6]), pi)), 4)
      0.0546
    """
    p, t, w = check_probs_oracle(probs, oracle, weights)
    pc = clip_probs(p, eps)
    xlogy = jax.scipy.special.xlogy
    kl = xlogy(t, t) - t * jnp.log(pc) + xlogy(1.0 - t, 1.0 - t) - (1.0 - t) * jnp.log1p(-pc)
    return weighted_mean(jnp.maximum(kl, 0.0), w)


def oracle_alpha_divergence(probs: jax.Array, oracle: jax.Array, *, alpha: float = 0.5,
                            weights: jax.Array | None = None, eps: float | None = None) -> jax.Array:
    r"""Mean Amari α-divergence between Bernoulli(π_i) and Bernoulli(p_i).

    .. math:: D_\alpha(\pi\|p) = \frac{1}{\alpha(\alpha-1)}\Bigl(\pi^\alpha p^{1-\alpha}
              + (1-\pi)^\alpha (1-p)^{1-\alpha} - 1\Bigr)

    (the Amari/Cichocki α-family for normalised measures; α → 1 gives KL(π‖p), α → 0 gives
    KL(p‖π), α = ½ gives 4 × the squared Hellinger distance). The formula printed in
    Appendix C of "Calibration is Grouping" (VR-SAG; anonymous authors, under review) is
    malformed (it is not zero at p = π); this is the divergence it names.

    Args:
      probs: (n,) predicted probabilities in [0, 1]; clipped to ``[eps, 1-eps]``.
      oracle: (n,) true probabilities :math:`\pi_i` in [0, 1].
      alpha: a Python float in (0, 1) (static; it cannot be a traced value). The limits are
        the two KL divergences: use :func:`oracle_kl`. The default ½ takes a faster path
        (square roots instead of powers).
      weights: optional (n,) non-negative row weights with a positive sum.
      eps: clip of ``probs`` (a static float); default 1e-7 in float32, 1e-12 in float64.

    Returns:
      A scalar array, >= 0 (0 iff p = π; rounding below 0 is floored at 0 per row). Called
      eagerly, invalid input (NaN, a value outside [0, 1], a negative weight, ``alpha``
      outside (0, 1)) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` /
      ``grad`` the value checks make the result NaN instead (a bad ``alpha`` still raises).

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import oracle_alpha_divergence
      >>> p = jnp.array([0.2, 0.6]); pi = jnp.array([0.3, 0.4])
      >>> round(float(oracle_alpha_divergence(pi, pi)), 4)  # zero at p = pi
      0.0
      >>> round(float(oracle_alpha_divergence(p, pi)), 4)  # close to KL(pi || p) = 0.0546
      0.0538
    """
    V.check_number_option(alpha, "alpha", "a number in (0, 1) (use oracle_kl for the limits)",
                          lambda v: 0.0 < v < 1.0)
    p, t, w = check_probs_oracle(probs, oracle, weights)
    pc = clip_probs(p, eps)
    a = alpha
    if a == 0.5:  # the default: sqrt is correctly rounded and 12x cheaper than pow (exp of log)
        s = jnp.sqrt(t) * jnp.sqrt(pc) + jnp.sqrt(1.0 - t) * jnp.sqrt(1.0 - pc)
    else:
        s = t**a * pc ** (1.0 - a) + (1.0 - t) ** a * (1.0 - pc) ** (1.0 - a)
    d = (s - 1.0) / (a * (a - 1.0))
    return weighted_mean(jnp.maximum(d, 0.0), w)


def oracle_chebyshev(probs: jax.Array, oracle: jax.Array) -> jax.Array:
    r"""Chebyshev distance :math:`\max_i |\pi_i - p_i|`: the worst row's distance from its
    true probability (Appendix C of "Calibration is Grouping", VR-SAG; anonymous authors,
    under review).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      oracle: (n,) true probabilities :math:`\pi_i` in [0, 1].

    Returns:
      A scalar array in [0, 1]. Called eagerly, invalid input (NaN, a value outside [0, 1])
      raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad`` the same
      checks make the result NaN instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import oracle_chebyshev
      >>> round(float(oracle_chebyshev(jnp.array([0.2, 0.6]), jnp.array([0.3, 0.4]))), 4)  # max(0.1, 0.2)
      0.2
    """
    p, t, _ = check_probs_oracle(probs, oracle, None)
    return jnp.max(jnp.abs(t - p))


def _pearson(a, b, w):
    ma, mb = weighted_mean(a, w), weighted_mean(b, w)
    da, db = a - ma, b - mb
    cov = weighted_mean(da * db, w)
    va, vb = weighted_mean(da * da, w), weighted_mean(db * db, w)
    # a constant input (every row of positive weight equal) has no correlation: its deviations
    # from its rounded mean are a few ulps, not 0, and two constants correlated to -1.0
    varies = _varies(a, w) & _varies(b, w) & (va > 0) & (vb > 0)
    # where va vb underflows (two spreads below ~3e-10 in float32: it gave inf) sqrt(va) sqrt(vb);
    # elsewhere sqrt(va vb), unclipped: the committed studies' bits (a clip of the ulp by which
    # rounding may pass 1 moved mc_spearman's one_minus_spearman rows in the fourth digit)
    prod = va * vb
    den = jnp.where(prod > jnp.finfo(prod.dtype).tiny, jnp.sqrt(jnp.where(varies, prod, 1.0)),
                    jnp.sqrt(jnp.where(varies, va, 1.0)) * jnp.sqrt(jnp.where(varies, vb, 1.0)))
    return jnp.where(varies, cov / den, 0.0)


def _varies(a, w):
    """Whether ``a`` takes two values on the rows of positive weight (exactly, not to rounding)."""
    live = jnp.ones(a.shape, bool) if w is None else w > 0
    return jnp.max(jnp.where(live, a, -jnp.inf)) > jnp.min(jnp.where(live, a, jnp.inf))


def pearson(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Pearson correlation between true probabilities π and scores p (higher is better).

    .. math:: r = \frac{\sum_i v_i (p_i - \bar p)(\pi_i - \bar\pi)}
                       {\sqrt{\sum_i v_i (p_i - \bar p)^2\,\sum_i v_i (\pi_i - \bar\pi)^2}}

    with weighted means :math:`\bar p, \bar\pi`. It measures how linearly the scores track
    the truth, not their calibration: scores that are any increasing affine map of π
    (e.g. :math:`p = \pi / 2`) get 1.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      oracle: (n,) true probabilities :math:`\pi_i` in [0, 1].
      weights: optional (n,) non-negative row weights with a positive sum.

    Returns:
      A scalar array in [-1, 1]; 0 when either input is constant (the correlation is
      undefined there). Called eagerly, invalid input (NaN, a value outside [0, 1], a negative
      weight) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``
      the same checks make the result NaN instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import pearson
      >>> round(float(pearson(jnp.array([0.1, 0.2, 0.3]), jnp.array([0.2, 0.4, 0.6]))), 4)  # pi = 2 p
      1.0
    """
    p, t, w = check_probs_oracle(probs, oracle, weights)
    return _pearson(p, t, w)


def spearman(probs: jax.Array, oracle: jax.Array) -> jax.Array:
    r"""Spearman rank correlation between π and p (average ranks for ties; higher is better).

    The Pearson correlation of the ranks of p and of π; equals ``scipy.stats.spearmanr``.
    Only the order matters, so any increasing map of π scores 1.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      oracle: (n,) true probabilities :math:`\pi_i` in [0, 1].

    Returns:
      A scalar array in [-1, 1]; 0 when either input is constant. Called eagerly, invalid
      input (NaN, a value outside [0, 1]) raises ``ValueError`` naming the argument; under
      ``jit`` / ``vmap`` the same checks make the result NaN instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import pearson, spearman
      >>> p = jnp.array([0.1, 0.2, 0.3]); pi = jnp.array([0.01, 0.04, 0.5])
      >>> round(float(spearman(p, pi)), 4), round(float(pearson(p, pi)), 4)  # same order, not linear
      (1.0, 0.892)
    """
    p, t, _ = check_probs_oracle(probs, oracle, None)
    return _pearson(average_ranks(p), average_ranks(t), None)
