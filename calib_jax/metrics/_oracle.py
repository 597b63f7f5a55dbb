"""Oracle ("sufficient information") metrics: scores compared with the true probabilities
π, available only in simulation (seeds/000 Table 1 and Appendix C), and the Pearson /
Spearman correlations between them.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax._src.ranks import average_ranks
from calib_jax.metrics._common import _clip, _po, _wmean


def oracle_brier(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Oracle Brier score :math:`\frac1n\sum_i(\pi_i - p_i)^2` against true probabilities (Table 1)."""
    p, t, w = _po(probs, oracle, weights)
    return _wmean((t - p) ** 2, w)


def oracle_mae(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Brier⁺ :math:`\frac1n\sum_i|\pi_i - p_i|` (seeds/000 Table 1 and App. C)."""
    p, t, w = _po(probs, oracle, weights)
    return _wmean(jnp.abs(t - p), w)


def oracle_kl(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None,
              eps: float | None = None) -> jax.Array:
    r"""Mean Bernoulli KL divergence :math:`\mathrm{KL}(\pi_i \| p_i)`.

    .. math:: \frac1n\sum_i \pi_i\log\frac{\pi_i}{p_i} + (1-\pi_i)\log\frac{1-\pi_i}{1-p_i}

    seeds/000 App. C prints only the first half, which is not a divergence between the two
    Bernoulli laws (it can be negative); we use the full divergence (≥ 0, = 0 iff p = π).
    ``0 log 0 = 0``; p is clipped to ``[eps, 1-eps]``.
    """
    p, t, w = _po(probs, oracle, weights)
    pc = _clip(p, eps)
    xlogy = jax.scipy.special.xlogy
    kl = xlogy(t, t) - t * jnp.log(pc) + xlogy(1.0 - t, 1.0 - t) - (1.0 - t) * jnp.log1p(-pc)
    return _wmean(jnp.maximum(kl, 0.0), w)


def oracle_alpha_divergence(probs: jax.Array, oracle: jax.Array, *, alpha: float = 0.5,
                            weights: jax.Array | None = None, eps: float | None = None) -> jax.Array:
    r"""Mean Amari α-divergence between Bernoulli(π_i) and Bernoulli(p_i).

    .. math:: D_\alpha(\pi\|p) = \frac{1}{\alpha(\alpha-1)}\Bigl(\pi^\alpha p^{1-\alpha}
              + (1-\pi)^\alpha (1-p)^{1-\alpha} - 1\Bigr)

    (the Amari/Cichocki α-family for normalised measures; α → 1 gives KL(π‖p), α → 0 gives
    KL(p‖π), α = ½ gives 4 × the squared Hellinger distance).  The formula printed in
    seeds/000 App. C is malformed (it is not zero at p = π); this is the divergence it names.
    ``alpha`` must lie in (0, 1) (the limits are the two KL divergences: :func:`oracle_kl`).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha} (use oracle_kl for the limits)")
    p, t, w = _po(probs, oracle, weights)
    pc = _clip(p, eps)
    a = alpha
    if a == 0.5:  # the default: sqrt is correctly rounded and 12x cheaper than pow (exp of log)
        s = jnp.sqrt(t) * jnp.sqrt(pc) + jnp.sqrt(1.0 - t) * jnp.sqrt(1.0 - pc)
    else:
        s = t**a * pc ** (1.0 - a) + (1.0 - t) ** a * (1.0 - pc) ** (1.0 - a)
    d = (s - 1.0) / (a * (a - 1.0))
    return _wmean(jnp.maximum(d, 0.0), w)


def oracle_chebyshev(probs: jax.Array, oracle: jax.Array) -> jax.Array:
    r"""Chebyshev distance :math:`\max_i |\pi_i - p_i|` (seeds/000 App. C)."""
    p, t, _ = _po(probs, oracle, None)
    return jnp.max(jnp.abs(t - p))


def _pearson(a, b, w):
    ma, mb = _wmean(a, w), _wmean(b, w)
    da, db = a - ma, b - mb
    cov = _wmean(da * db, w)
    va, vb = _wmean(da * da, w), _wmean(db * db, w)
    den = jnp.sqrt(va * vb)
    return jnp.where(den > 0, cov / jnp.where(den > 0, den, 1.0), 0.0)


def pearson(probs: jax.Array, oracle: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Pearson correlation between true probabilities π and scores p (higher is better).

    Returns 0 when either input is constant (the correlation is undefined there).
    """
    p, t, w = _po(probs, oracle, weights)
    return _pearson(p, t, w)


def spearman(probs: jax.Array, oracle: jax.Array) -> jax.Array:
    r"""Spearman rank correlation between π and p (average ranks for ties; higher is better).

    Equals ``scipy.stats.spearmanr``; 0 when either input is constant.
    """
    p, t, _ = _po(probs, oracle, None)
    return _pearson(average_ranks(p), average_ranks(t), None)
