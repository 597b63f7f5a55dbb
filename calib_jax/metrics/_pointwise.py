"""Pointwise scores against 0/1 labels: Brier/MSE, MAE and the log loss.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax.metrics._common import _clip, _ol, _pl, _wmean


def brier(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Brier score :math:`\frac{1}{n}\sum_i (y_i - p_i)^2` (weighted mean if ``weights``)."""
    p, y, w = _pl(probs, labels, weights)
    return _wmean((y - p) ** 2, w)


def mse(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    """Mean squared error against labels (seeds/000 App. C "MSE"); identical to :func:`brier`."""
    return brier(probs, labels, weights=weights)


def mae(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Mean absolute error :math:`\frac{1}{n}\sum_i |y_i - p_i|` (seeds/000 App. C)."""
    p, y, w = _pl(probs, labels, weights)
    return _wmean(jnp.abs(y - p), w)


def nll(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
        eps: float | None = None) -> jax.Array:
    r"""Negative log-likelihood (log loss, seeds/000 eq. 1) from probabilities.

    .. math:: -\frac{1}{n}\sum_i y_i\log p_i + (1-y_i)\log(1-p_i)

    Probabilities are clipped to ``[eps, 1 - eps]`` (default 1e-7 in float32, 1e-12 in
    float64) so a confident wrong prediction costs a large finite amount.  Use
    :func:`nll_logits` for the exact value from logits.
    """
    p, y, w = _pl(probs, labels, weights)
    pc = _clip(p, eps)
    return _wmean(-(y * jnp.log(pc) + (1.0 - y) * jnp.log1p(-pc)), w)


def nll_logits(logits: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Exact log loss from logits: :math:`-\frac1n\sum_i y_i\log\sigma(o_i) + (1-y_i)\log\sigma(-o_i)`.

    Computed with ``log_sigmoid`` (never ``log(1 - sigmoid)``), exact for any finite logit.
    """
    o, y, w = _ol(logits, labels, weights)
    return _wmean(-(y * jax.nn.log_sigmoid(o) + (1.0 - y) * jax.nn.log_sigmoid(-o)), w)
