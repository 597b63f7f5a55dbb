r"""Beta calibration (Kull, Silva Filho and Flach, AISTATS 2017), computed from logits.

The three-parameter beta calibration map is a logistic regression on the features
:math:`\ln p` and :math:`-\ln(1 - p)` of the uncalibrated probability :math:`p = \sigma(z)`:

.. math:: \tilde p = \sigma\big(a \ln p - b \ln(1 - p) + c\big),
          \qquad \ln p = \log\sigma(z), \quad -\ln(1 - p) = \operatorname{softplus}(z),

(Kull et al. 2017, eq. 6 and §3.2).  Both features are computed from the logit with
``jax.nn.log_sigmoid`` / ``softplus``, so they are exact for any finite logit (no clipping
of ``p`` as ``betacal`` does).  ``(a, b, c)`` minimise the weighted log loss by damped
Newton, ``n_steps`` steps then more until converged (the problem is a 3-parameter convex
logistic regression, where Newton is both faster and more precise than L-BFGS), starting
from the identity ``(1, 1, 0)``.

The map is monotone non-decreasing when ``a, b >= 0``.  Like the reference implementation
``betacal`` (``parameters="abm"``), when the unconstrained fit gives ``a < 0`` the model is
refitted with ``a = 0``; otherwise, when it gives ``b < 0``, with ``b = 0``.

Fail-safe (:mod:`calib_jax.calibrators._failsafe`; never NaN): fewer than ``min_events``
effective rows in the minority class (a single class and ``n = 1`` included) return the
smallest change consistent with the data (the identity ``(1, 1, 0)`` or a shift ``(1, 1, c)``,
:func:`~calib_jax.calibrators._failsafe.consistent_shift`); a flat map (``a = b = 0`` after
the refit rule) or a fit that did not converge returns the logit shift ``(1, 1, c)``
matching the mean rate (with ``a = b = 1`` the map is :math:`\sigma(z + c)`, since
:math:`\ln p - \ln(1 - p) = z`). ``params.fallback`` holds the reason code and an eager
call warns.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import calib_jax.calibrators._failsafe as F
from calib_jax._src.eager import compiled
from calib_jax._src.validation import check_logits
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import (
    ArrayLike,
    Context,
    KeyArg,
    check_newton_options,
    fit_shift,
    logistic_gradient,
    newton_logistic,
    prepared_fit,
)

__all__ = ["BetaParams", "fit", "predict", "CALIBRATOR"]


class BetaParams(NamedTuple):
    """Fitted beta calibration ``sigmoid(a ln p - b ln(1 - p) + c)``.

    Attributes:
      a, b: non-negative coefficients of ``ln p`` and ``-ln(1 - p)``.
      c: intercept.
      fallback: int32 fail-safe code (0: accepted; 1: identity; 2, 3: a logit shift; see
        ``calib_jax.calibrators._failsafe.REASONS``).
    """

    a: jax.Array
    b: jax.Array
    c: jax.Array
    fallback: jax.Array


def _features(z: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jax.nn.log_sigmoid(z), jax.nn.softplus(z)


@partial(jax.jit, static_argnames=("n_steps",))
def _fit(z, y, w, n_steps: int, min_events: jax.Array) -> BetaParams:
    f1, f2 = _features(z)
    one = jnp.ones_like(z)
    theta0 = jnp.array([1.0, 1.0, 0.0], dtype=z.dtype)
    enough = F.enough_events(y, w, min_events)
    full = newton_logistic((f1, f2, one), y, w, theta0, n_steps=n_steps, keep_going=enough)

    # betacal's rule: drop the feature whose coefficient came out negative and refit.
    mask = jnp.where(
        full[0] < 0,
        jnp.array([0.0, 1.0, 1.0], z.dtype),
        jnp.where(full[1] < 0, jnp.array([1.0, 0.0, 1.0], z.dtype), jnp.ones(3, z.dtype)),
    )

    def refit(_):
        cols = (f1 * mask[0], f2 * mask[1], one)
        return newton_logistic(cols, y, w, theta0 * mask, n_steps=n_steps, keep_going=enough) * mask

    theta = jax.lax.cond(jnp.any(mask == 0), refit, lambda _: full, None)
    grad = logistic_gradient((f1 * mask[0], f2 * mask[1], one), y, w, theta)
    code = F.first_failure(
        (enough, F.TOO_FEW_EVENTS),
        ((theta[0] >= 0) & (theta[1] >= 0) & (theta[0] + theta[1] > 0), F.REVERSES_RANKING),
        (jnp.all(jnp.isfinite(theta)) & jnp.all(jnp.abs(grad) <= F.GRAD_TOL), F.NOT_CONVERGED),
    )
    # a = b = 1 makes a ln p - b ln(1 - p) = z: the shift sigmoid(z + c)
    shift = jnp.array([1.0, 1.0, 0.0], z.dtype).at[2].set(fit_shift(z, y, w))
    safe = jnp.array([1.0, 1.0, 0.0], z.dtype).at[2].set(F.consistent_shift(z, y, w))
    theta = jnp.where(code == F.OK, theta, jnp.where(code == F.TOO_FEW_EVENTS, safe, shift))
    return BetaParams(a=theta[0], b=theta[1], c=theta[2], fallback=code)


@public_entry
def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, n_steps: int = 16, min_events: float = F.MIN_EVENTS) -> BetaParams:
    r"""Fit beta calibration :math:`\sigma(a \ln p - b \ln(1-p) + c)` with :math:`p=\sigma(z)`.

    Args:
      logits: (n,) uncalibrated logits.
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative weights (weight ``k`` == the row repeated ``k`` times).
      key, context: unused (protocol compatibility).
      n_steps: Newton steps always taken per (re)fit (static); then at most 48 more until
        the squared Newton decrement is below 1e-10. Logits of spread 300 (probabilities
        saturated far beyond float32) still stop short there and fall back (code 2).
      min_events: fail-safe threshold on the minority class's effective count.

    Returns:
      :class:`BetaParams` (scalars ``a, b >= 0``, ``c`` and the int32 ``fallback`` code;
      batched under ``vmap``). The fit is jit- and vmap-able (``n_steps`` static;
      ``min_events`` may be traced). Called eagerly, invalid input (NaN or inf logits, a label
      other than 0/1, a negative weight) raises ``ValueError`` naming the argument; under
      ``jit`` / ``vmap`` the same checks make ``a``, ``b`` and ``c`` NaN instead (the
      ``fallback`` code is returned as computed).

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators.beta import fit
      >>> rng = np.random.default_rng(0)
      >>> z = rng.normal(0.0, 2.0, 5000).astype(np.float32)
      >>> y = (rng.random(5000) < 1 / (1 + np.exp(-z / 2))).astype(np.float32)  # truth: sigma(z / 2)
      >>> p = fit(z, y)       # sigma(z / 2) is a = b = 1/2, c = 0, since ln p - ln(1 - p) = z
      >>> round(float(p.a), 1), round(float(p.b), 1), abs(float(p.c)) < 0.1, int(p.fallback)
      (0.5, 0.5, True, 0)
    """
    del key, context
    params = prepared_fit(logits, labels, weights, _fit, check_newton_options(n_steps, min_events), min_events)
    F.warn_if_fallback("beta calibration", params.fallback,
                       fallback="the smallest logit shift consistent with the data (too few events) or the "
                                "maximum-likelihood shift sigmoid(z + c)")
    return params


def predict(params: BetaParams, logits: Any, *, context: dict[str, Any] | None = None
            ) -> jax.Array:
    r"""Calibrated probabilities :math:`\sigma(a \log\sigma(z) + b\,\operatorname{softplus}(z) + c)`
    (Kull, Silva Filho and Flach, "Beta Calibration" (AISTATS 2017), eq. 6, with
    the features :math:`\ln p = \log\sigma(z)` and :math:`-\ln(1 - p) = \operatorname{softplus}(z)`
    computed from the logits).

    Args:
      params: a fitted :class:`BetaParams` (scalars ``a``, ``b``, ``c``).
      logits: (n,) uncalibrated logits, real.
      context: unused (protocol compatibility).

    Returns:
      (n,) probabilities in [0, 1], in the logits' float dtype. jit- and vmap-able (``params``
      may be traced too). Called eagerly, NaN or inf logits raise ``ValueError`` naming
      ``logits``; under ``jit`` / ``vmap`` the same check makes the output NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.beta import BetaParams, predict
      >>> half = jnp.float32(0.5)        # a = b = 1/2, c = 0: (ln p - ln(1 - p)) / 2 = z / 2
      >>> params = BetaParams(a=half, b=half, c=jnp.float32(0.0), fallback=jnp.int32(0))
      >>> [round(float(p), 4) for p in predict(params, jnp.array([0.0, 2.0, -4.0]))]  # sigma(z / 2)
      [0.5, 0.7311, 0.1192]
    """
    del context
    z = check_logits(logits, "logits")
    f1, f2 = _features(z)
    return jax.nn.sigmoid(params.a * f1 + params.b * f2 + params.c)


# Eager predicts run one compiled program each (calib_jax._src.eager): the checks of the inputs and
# the map; under a user's jit / vmap it is the function above (fit: _common.prepared_fit).
predict = public_entry(compiled(predict))


CALIBRATOR = register(Calibrator(name="beta", fit=fit, predict=predict, monotone=True))
