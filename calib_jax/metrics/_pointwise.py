"""Pointwise scores against 0/1 labels: Brier/MSE, MAE and the log loss.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calib_jax._src.metric_inputs import check_logits_labels, check_probs_labels, clip_probs, weighted_mean


def brier(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Brier score :math:`\frac{1}{n}\sum_i (y_i - p_i)^2` (weighted mean if ``weights``).

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights with a positive sum (a weight of k counts
        as k copies): the score is then :math:`\sum_i v_i (y_i - p_i)^2 / \sum_i v_i`.

    Returns:
      A scalar array in [0, 1] (0 for perfect 0/1 predictions). Called eagerly, invalid input
      (NaN, a probability outside [0, 1], a label other than 0/1, a negative weight, mismatched
      lengths) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``,
      where values cannot raise, the same checks make the result NaN (shape errors still raise
      while tracing).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.metrics import brier
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> round(float(brier(p, y)), 4)  # (0.01 + 0.64 + 0.04 + 0.01) / 4
      0.175
      >>> bool(jnp.isnan(jax.jit(brier)(p, y.at[0].set(0.5))))  # a label of 0.5 under jit: NaN
      True
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    return weighted_mean((y - p) ** 2, w)


def mse(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Mean squared error against labels; identical to :func:`brier`.

    The "MSE" column of "Calibration is Grouping" (VR-SAG; anonymous authors, under review),
    App. C: :math:`\frac{1}{n}\sum_i (y_i - p_i)^2`, kept as its own name so that tables can
    use the paper's label.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights with a positive sum (weighted mean).

    Returns:
      A scalar array, equal to ``brier(probs, labels, weights=weights)``. Same checks as
      :func:`brier`: eagerly, invalid input raises ``ValueError`` naming the argument; under
      ``jit`` / ``vmap`` / ``grad`` it makes the result NaN instead.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import mse
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> round(float(mse(p, y)), 4)  # (0.01 + 0.64 + 0.04 + 0.01) / 4, as brier
      0.175
    """
    return brier(probs, labels, weights=weights)


def mae(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Mean absolute error :math:`\frac{1}{n}\sum_i |y_i - p_i|`.

    The "MAE" column of "Calibration is Grouping" (VR-SAG; anonymous authors, under review),
    App. C.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights with a positive sum (weighted mean).

    Returns:
      A scalar array in [0, 1]. Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a negative weight) raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same checks
      make the result NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import mae
      >>> p = jnp.array([0.1, 0.2, 0.8, 0.9]); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> round(float(mae(p, y)), 4)  # (0.1 + 0.8 + 0.2 + 0.1) / 4
      0.3
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    return weighted_mean(jnp.abs(y - p), w)


def nll(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
        eps: float | None = None) -> jax.Array:
    r"""Negative log-likelihood (log loss) from probabilities.

    .. math:: -\frac{1}{n}\sum_i y_i\log p_i + (1-y_i)\log(1-p_i)

    Eq. 1 of "Calibration is Grouping" (VR-SAG; anonymous authors, under review).
    Probabilities are clipped to ``[eps, 1 - eps]`` (default 1e-7 in float32, 1e-12 in
    float64) so a confident wrong prediction costs a large finite amount.  Use
    :func:`nll_logits` for the exact value from logits.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights with a positive sum (weighted mean).
      eps: clip level, a small positive float below 1/2, or ``None`` for the dtype's default
        above. Not checked.

    Returns:
      A non-negative scalar array (natural log, nats per row). Called eagerly, invalid input
      (NaN, a probability outside [0, 1], a label other than 0/1, a negative weight) raises
      ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where values
      cannot raise, the same checks make the result NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import nll
      >>> p = jnp.array([0.5, 0.5]); y = jnp.array([0.0, 1.0])
      >>> round(float(nll(p, y)), 4)  # log 2 for each row
      0.6931
    """
    p, y, w = check_probs_labels(probs, labels, weights)
    pc = clip_probs(p, eps)
    return weighted_mean(-(y * jnp.log(pc) + (1.0 - y) * jnp.log1p(-pc)), w)


def nll_logits(logits: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None) -> jax.Array:
    r"""Exact log loss from logits: :math:`-\frac1n\sum_i y_i\log\sigma(o_i) + (1-y_i)\log\sigma(-o_i)`.

    Computed with ``log_sigmoid`` (never ``log(1 - sigmoid)``), exact for any finite logit;
    no clipping, unlike :func:`nll`.

    Args:
      logits: (n,) real, finite logits :math:`o_i` (the score is :math:`\sigma(o_i)`).
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights with a positive sum (weighted mean).

    Returns:
      A non-negative scalar array (nats per row). Called eagerly, invalid input (a NaN or
      infinite logit, a label other than 0/1, a negative weight) raises ``ValueError`` naming
      the argument; under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same
      checks make the result NaN.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from calib_jax.metrics import nll_logits
      >>> o = jnp.array([0.0, 20.0]); y = jnp.array([1.0, 0.0])
      >>> round(float(nll_logits(o, y)), 4)  # (log 2 + 20) / 2: no clipping at 1 - 1e-7
      10.3466
      >>> round(float(jax.jit(nll_logits)(o, y)), 4)
      10.3466
    """
    o, y, w = check_logits_labels(logits, labels, weights)
    return weighted_mean(-(y * jax.nn.log_sigmoid(o) + (1.0 - y) * jax.nn.log_sigmoid(-o)), w)
