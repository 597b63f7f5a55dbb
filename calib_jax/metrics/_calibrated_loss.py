"""Calibrated Log Loss and Calibrated Quadratic Loss ("Calibration-then-Calculation", 2024): the loss on one
part of the test data after removing a global bias fitted on the other part.

Private module: the public surface is listed in :mod:`calib_jax.metrics`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src import validation as V
from calib_jax._src.eager import flag
from calib_jax._src.metric_inputs import check_logits_labels


def fit_logit_bias(logits: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
                   n_iter: int = 40) -> jax.Array:
    r"""The logit shift c* minimising the log loss of :math:`\sigma(o_i + c)`.

    Eq. 6 of "Calibration-then-Calculation" (2024).  The objective is convex in c with
    derivative :math:`\sum_i v_i(\sigma(o_i + c) - y_i)`, so c* solves
    :math:`\sum_i v_i \sigma(o_i + c) = \sum_i v_i y_i` (the bias-adjusted predictions are
    calibrated in the mean on this split).  Solved by a safeguarded Newton iteration (steps
    clipped to ±4, at most ``n_iter`` steps, stopping early at an exact fixed point, which
    returns what ``n_iter`` steps return: jit/vmap-able).  If all labels are 0 (1) the
    optimum is at -inf (+inf); the iteration then stops at a large finite shift.

    Args:
      logits: (n,) real, finite logits :math:`o_i`.
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative row weights :math:`v_i` with a positive sum.
      n_iter: the most Newton steps, a Python int >= 1 (static under ``jit``).

    Returns:
      A scalar array c* of the logits' dtype. Called eagerly, invalid input (NaN or infinite
      logits, a label other than 0/1, a negative weight) raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the same checks
      make the result NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import fit_logit_bias
      >>> o = jnp.zeros(4); y = jnp.array([0.0, 1.0, 1.0, 1.0])
      >>> round(float(fit_logit_bias(o, y)), 4)  # sigmoid(c) = 3/4: c = log 3
      1.0986
    """
    o = V.check_logits(logits, "logits")
    y = V.check_labels(labels, "labels")
    V.check_same_length(o.shape[0], labels=y)
    w = V.check_weights(weights, o.shape[0])
    v = jnp.ones_like(o) if w is None else w.astype(o.dtype)
    V.check_positive_int(n_iter, "n_iter")
    return _fit_bias_core(o, y.astype(o.dtype), v, n_iter=int(n_iter))


@functools.partial(jax.jit, static_argnames=("n_iter",))
def _fit_bias_core(o: jax.Array, y: jax.Array, v: jax.Array, *, n_iter: int) -> jax.Array:
    """Compiled Newton iteration of :func:`fit_logit_bias` (compiles once per shape)."""
    target = jnp.sum(v * y)

    def step(_, c):
        q = jax.nn.sigmoid(o + c)
        g = jnp.sum(v * q) - target
        h = jnp.sum(v * q * (1.0 - q))
        d = jnp.where(h > 0, g / jnp.where(h > 0, h, 1.0), jnp.sign(g) * 4.0)
        return c - jnp.clip(d, -4.0, 4.0)

    # Newton reaches a fixed point (c_t == c_{t-1} exactly) after a handful of steps, and
    # every later step returns it unchanged; or, in about one fit in five on float32 sums,
    # a last-ulp 2-cycle (c_t == c_{t-2}), after which the values alternate. The step is a
    # fixed function of c, so either way the value after ``n_iter`` steps is known once the
    # repeat is seen: stopping there returns bit for bit what ``n_iter`` steps return.
    def cond(state):
        t, c, prev, prev2 = state
        return (t < n_iter) & (c != prev) & (c != prev2)

    def body(state):
        t, c, prev, _ = state
        return t + 1, step(t, c), c, prev

    c0 = jnp.zeros((), o.dtype)
    t, c, prev, prev2 = jax.lax.while_loop(
        cond, body, (jnp.int32(1), step(0, c0), c0, jnp.full((), jnp.nan, o.dtype)))
    cycle = (c != prev) & (c == prev2) & ((n_iter - t) % 2 == 1)
    return jnp.where(cycle, prev, c)


def _split_mask(n, key, val_fraction, val_mask):
    if val_mask is not None:
        m = jnp.asarray(val_mask).astype(bool)
        if m.shape != (n,):
            raise ValueError(f"`val_mask` must have shape ({n},), got {m.shape}")
        if V.is_concrete(m):
            k = int(np.asarray(jax.device_get(m)).sum())
            if k == 0 or k == n:
                raise ValueError("`val_mask` must select a non-empty, proper subset")
        else:
            k = jnp.sum(m)
            flag((k == 0) | (k == n))
        return m
    if key is None:
        raise ValueError("pass `val_mask` or a `key` to draw the test-validation split")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must lie in (0, 1), got {val_fraction}")
    return jax.random.uniform(key, (n,)) < val_fraction


def _check_parts(m: jax.Array, v: jax.Array) -> None:
    """Both parts of the split carry weight: the shift is fitted on one and the loss averaged on
    the other, so an empty part (a split drawn with ``key`` on few rows, or zero weights) would
    give 0/0. ``ValueError`` on concrete input, NaN under a user's ``jit``."""
    V.check_condition((jnp.sum(v * m) <= 0) | (jnp.sum(v * (1 - m)) <= 0),
                      "the validation split left a part without rows of positive weight (pass more rows, "
                      "another `val_fraction` or `key`, or a `val_mask`)")


def calibrated_log_loss(logits: jax.Array, labels: jax.Array, *, key: jax.Array | None = None,
                        val_fraction: float = 0.5, val_mask: jax.Array | None = None,
                        weights: jax.Array | None = None) -> jax.Array:
    r"""Calibrated Log Loss: the log loss after removing a global bias fitted on held-out rows.

    §3 and Algorithm 1 of "Calibration-then-Calculation" (2024).
    Split the test data into a test-validation part :math:`D_v` (``val_mask``, or a random
    ``val_fraction`` drawn with ``key``) and the rest :math:`D_r`; fit one logit shift c* on
    :math:`D_v` (:func:`fit_logit_bias`) and return the log loss of :math:`\sigma(o_i + c^*)`
    on :math:`D_r`.  Removing the volatile global bias lowers the metric's variance across
    training runs.

    Args:
      logits: (n,) real, finite logits :math:`o_i`.
      labels: (n,) labels in {0, 1}.
      key: a JAX PRNG key that draws the split (each row joins :math:`D_v` with probability
        ``val_fraction``); required unless ``val_mask`` is given, ignored when it is. It may
        be traced.
      val_fraction: the expected share of rows in :math:`D_v`, a Python float in (0, 1)
        (checked in Python, so not traced).
      val_mask: optional (n,) mask, true (non-zero) on the rows of :math:`D_v`; it must
        select a non-empty, proper subset.
      weights: optional (n,) non-negative row weights with a positive sum (they weight both
        the fit and the loss).

    Returns:
      A non-negative scalar array (nats per row of :math:`D_r`). Called eagerly, invalid input
      (NaN or infinite logits, a label other than 0/1, a negative weight, a mask selecting no
      row or every row, a missing ``key``/``val_mask``, ``val_fraction`` outside (0, 1))
      raises ``ValueError`` naming the argument; under ``jit`` / ``vmap`` / ``grad``, where
      values cannot raise, the value checks make the result NaN (shape errors, a missing
      ``key`` and a bad ``val_fraction`` still raise while tracing). A split that leaves
      either part without rows of positive weight (possible when drawn with ``key`` on a
      handful of rows) is invalid input too.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import calibrated_log_loss
      >>> o = jnp.array([0.0, 0.0, 0.0, 0.0, 1.0, -1.0]); y = jnp.array([0.0, 1.0, 1.0, 1.0, 1.0, 0.0])
      >>> m = jnp.array([True, True, True, True, False, False])  # c* = log 3 on the first four rows
      >>> # (-log sigmoid(1 + log 3) - log sigmoid(1 - log 3)) / 2 on the last two
      >>> round(float(calibrated_log_loss(o, y, val_mask=m)), 4)
      0.4297
    """
    o, y, w = check_logits_labels(logits, labels, weights)
    n = o.shape[0]
    m = _split_mask(n, key, val_fraction, val_mask).astype(o.dtype)
    v = jnp.ones_like(o) if w is None else w
    _check_parts(m, v)
    return _cll_core(o, y.astype(o.dtype), v, m)


@jax.jit
def _cll_core(o: jax.Array, y: jax.Array, v: jax.Array, m: jax.Array) -> jax.Array:
    """Compiled body of :func:`calibrated_log_loss`: bias on the split ``m``, loss on the rest."""
    c = _fit_bias_core(o, y, v * m, n_iter=40)
    oc = o + c
    ll = -(y * jax.nn.log_sigmoid(oc) + (1.0 - y) * jax.nn.log_sigmoid(-oc))
    r = v * (1.0 - m)
    return jnp.sum(r * ll) / jnp.sum(r)


def calibrated_quadratic_loss(preds: jax.Array, targets: jax.Array, *, key: jax.Array | None = None,
                              val_fraction: float = 0.5, val_mask: jax.Array | None = None,
                              weights: jax.Array | None = None) -> jax.Array:
    r"""Calibrated Quadratic Loss: the squared error after removing a mean shift fitted on held-out rows.

    §3 of "Calibration-then-Calculation" (2024): fit an additive shift on the
    test-validation part, :math:`b^* = \overline{(t - \hat t)}_{D_v}`, and return
    :math:`\overline{(t_i - \hat t_i - b^*)^2}` on the rest.  Targets may be any real numbers.

    Args:
      preds: (n,) real, finite predictions :math:`\hat t_i`.
      targets: (n,) real, finite targets :math:`t_i`.
      key: a JAX PRNG key that draws the split (each row joins :math:`D_v` with probability
        ``val_fraction``); required unless ``val_mask`` is given, ignored when it is. It may
        be traced.
      val_fraction: the expected share of rows in :math:`D_v`, a Python float in (0, 1)
        (checked in Python, so not traced).
      val_mask: optional (n,) mask, true (non-zero) on the rows of :math:`D_v`; it must
        select a non-empty, proper subset.
      weights: optional (n,) non-negative row weights with a positive sum (weighted means
        for both :math:`b^*` and the loss).

    Returns:
      A non-negative scalar array. Called eagerly, invalid input (a NaN or infinite value, a
      negative weight, a mask selecting no row or every row, a missing ``key``/``val_mask``,
      ``val_fraction`` outside (0, 1)) raises ``ValueError`` naming the argument; under
      ``jit`` / ``vmap`` / ``grad``, where values cannot raise, the value checks make the
      result NaN (shape errors, a missing ``key`` and a bad ``val_fraction`` still raise while
      tracing). A split that leaves either part without rows of positive weight (possible
      when drawn with ``key`` on a handful of rows) is invalid input too.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.metrics import calibrated_quadratic_loss
      >>> f = jnp.array([1.0, 2.0, 3.0, 4.0]); t = jnp.array([2.0, 3.0, 3.0, 6.0])
      >>> m = jnp.array([True, True, False, False])  # b* = mean(1, 1) = 1 on the first two rows
      >>> round(float(calibrated_quadratic_loss(f, t, val_mask=m)), 4)  # ((0 - 1)**2 + (2 - 1)**2) / 2
      1.0
    """
    f = V.as_float_array(preds, "preds")
    t = V.as_float_array(targets, "targets")
    n = f.shape[0]
    V.check_same_length(n, targets=t)
    w = V.check_weights(weights, n)
    m = _split_mask(n, key, val_fraction, val_mask).astype(f.dtype)
    v = jnp.ones_like(f) if w is None else w
    _check_parts(m, v)
    b = jnp.sum(v * m * (t - f)) / jnp.sum(v * m)
    r = v * (1.0 - m)
    return jnp.sum(r * (t - f - b) ** 2) / jnp.sum(r)
