r"""Isotonic Line-Plot Scaling (ILPS), seeds/001 §4.1, eqs. 10-11.

The calibrated logit is a continuous piecewise-linear function of the uncalibrated logit
:math:`z` through the points :math:`(a_k, b_k)`, :math:`k = 1..K` (eq. 10):

.. math:: \eta(z) = b_k + (z - a_k)\,\frac{b_{k+1} - b_k}{a_{k+1} - a_k},
          \qquad z \in [a_k, a_{k+1}),

with fixed knots at :math:`\sigma(a_k) = k / (K + 1)` (the paper's choice, ``K = 100``), and
the knot values :math:`b` minimise the weighted log loss plus the monotonicity penalty of
eq. 11

.. math:: \frac{\sum_i v_i\,\ell(\eta(z_i), y_i)}{\sum_i v_i}
          + \lambda \sum_{k=1}^{K-1} (b_k - b_{k+1})_+ .

Choices the paper leaves open, fixed here:

* Outside :math:`[a_1, a_K]` (probabilities below ``1/(K+1)`` or above ``K/(K+1)``),
  ``extrapolate="linear"`` (default) continues the first/last segment with its slope
  clipped at 0, so the map stays monotone and still ranks extreme scores (important for CTR
  logits, which sit far below :math:`a_1 \approx -4.6`); ``"clamp"`` holds
  :math:`b_1` / :math:`b_K` constant.
* The loss is a weighted *mean*, so :math:`|\partial/\partial b_k| \le 1` and the default
  :math:`\lambda = 1` makes the hinge an exact penalty: violations of
  :math:`b_k \le b_{k+1}` do not pay at the optimum (up to optimiser tolerance).
* Start at the identity :math:`b_k = a_k`; knots without data keep it.
* Optimiser: ``optax.lbfgs`` (zoom line search), at most ``max_iter`` iterations.  The
  hinge :math:`(x)_+` is not differentiable at 0 and L-BFGS on the exact hinge oscillates
  (measured: the loss does not decrease after ~50 iterations), so by default the hinge is
  replaced by its softplus smoothing :math:`\tau \operatorname{softplus}(x / \tau)` with
  ``smoothing`` :math:`\tau = 10^{-3}`; it differs from :math:`(x)_+` by at most
  :math:`\tau \ln 2` per knot pair.  ``smoothing=0`` uses the exact hinge.  If the optimiser
  ends above the identity's objective, the identity is returned (``fallback = True``).
  ``fit`` is jit- and vmap-able (static ``n_knots``, ``max_iter``).

Edge cases: a single class in the labels (including ``n = 1``) returns the identity with
``fallback = True``; never NaN (log loss computed in log space).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from calib_jax._src.validation import check_choice, check_logits, check_positive_int
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import (
    ArrayLike,
    Context,
    KeyArg,
    bce_with_logits,
    has_both_classes,
    lbfgs_minimize,
    prepare,
    weighted_mean,
)

__all__ = ["ILPSParams", "knots", "fit", "predict", "calibrated_logit", "CALIBRATOR"]


@dataclasses.dataclass(frozen=True)
class ILPSParams:
    """Fitted ILPS map (pytree; ``extrapolate`` is static metadata).

    Attributes:
      knots: (K,) knot logits ``a_k = logit(k / (K + 1))``.
      values: (K,) calibrated logits ``b_k`` at the knots.
      fallback: True when the identity was returned because the labels had one class.
      extrapolate: ``"linear"`` or ``"clamp"``.
    """

    knots: jax.Array
    values: jax.Array
    fallback: jax.Array
    extrapolate: str = dataclasses.field(default="linear", metadata={"static": True})


jax.tree_util.register_dataclass(
    ILPSParams, data_fields=["knots", "values", "fallback"], meta_fields=["extrapolate"]
)


def knots(n_knots: int = 100, dtype: Any = None) -> jax.Array:
    r"""Knot logits :math:`a_k = \operatorname{logit}(k/(K+1))`, :math:`k = 1..K` (seeds/001 §4.1)."""
    k = jnp.arange(1, n_knots + 1, dtype=dtype or jnp.result_type(float))
    return jnp.log(k) - jnp.log(n_knots + 1 - k)


def _geometry(a: jax.Array, z: jax.Array, extrapolate: str
              ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Interval index ``j``, offset ``z - a_j`` and an outside-the-knots mask (independent of
    ``b``: computed once per fit)."""
    n_knots = a.shape[0]
    if extrapolate == "clamp":
        z = jnp.clip(z, a[0], a[-1])
    # Interval index straight from the knot construction sigma(a_k) = k / (K + 1).
    j = jnp.floor(jax.nn.sigmoid(z) * (n_knots + 1)).astype(jnp.int32) - 1
    j = jnp.clip(j, 0, n_knots - 2)
    return j, z - a[j], (z < a[0]) | (z > a[-1])


def _eta_from(b: jax.Array, a: jax.Array, j: jax.Array, dz: jax.Array, outside: jax.Array
              ) -> jax.Array:
    slope = (b[1:] - b[:-1]) / (a[1:] - a[:-1])
    s = slope[j]
    s = jnp.where(outside, jnp.maximum(s, 0.0), s)
    return b[j] + dz * s


def _eta(b: jax.Array, a: jax.Array, z: jax.Array, extrapolate: str) -> jax.Array:
    return _eta_from(b, a, *_geometry(a, z, extrapolate))


@partial(jax.jit, static_argnames=("n_knots", "max_iter", "extrapolate"))
def _fit(z, y, w, lam, tau, n_knots: int, max_iter: int, tol, extrapolate: str) -> ILPSParams:
    a = knots(n_knots, z.dtype)

    def penalty(x):
        smooth = tau * jax.nn.softplus(x / jnp.where(tau > 0, tau, 1.0))
        return jnp.where(tau > 0, smooth, jax.nn.relu(x))

    geom = _geometry(a, z, extrapolate)

    def loss(b):
        data = weighted_mean(bce_with_logits(_eta_from(b, a, *geom), y), w)
        return data + lam * jnp.sum(penalty(b[:-1] - b[1:]))

    b = lbfgs_minimize(loss, a, max_iter=max_iter, tol=tol)
    ok = has_both_classes(y, w) & jnp.all(jnp.isfinite(b)) & (loss(b) <= loss(a))
    b = jnp.where(ok, b, a)
    return ILPSParams(knots=a, values=b, fallback=~ok, extrapolate=extrapolate)


@public_entry
def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, n_knots: int = 100, lam: float = 1.0, max_iter: int = 300, tol: float = 1e-6,
        smoothing: float = 1e-3, extrapolate: str = "linear") -> ILPSParams:
    r"""Fit ILPS (seeds/001 eq. 11) with optax L-BFGS:
    :math:`\min_b \overline{\ell}(\eta_b(z), y) + \lambda \sum_k (b_k - b_{k+1})_+`.

    Args:
      logits: (n,) uncalibrated logits.
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative weights (weight ``k`` == ``k`` repeated rows).
      key, context: unused.
      n_knots: number of knots ``K`` (static; the paper uses 100).
      lam: monotonicity penalty weight ``lambda``.
      max_iter: L-BFGS iteration cap (static).
      tol: stop when the gradient norm falls below ``tol``.
      smoothing: softplus temperature ``tau`` of the hinge (0 = exact hinge).
      extrapolate: ``"linear"`` or ``"clamp"`` outside the knots.

    Returns:
      :class:`ILPSParams`.
    """
    del key, context
    n_knots = check_positive_int(n_knots, "n_knots")
    if n_knots < 2:
        raise ValueError(f"`n_knots` must be >= 2, got {n_knots}")
    max_iter = check_positive_int(max_iter, "max_iter")
    extrapolate = check_choice(extrapolate, "extrapolate", ("linear", "clamp"))
    for name, v in (("lam", lam), ("smoothing", smoothing), ("tol", tol)):
        if isinstance(v, int | float) and not v >= 0:
            raise ValueError(f"`{name}` must be non-negative, got {v}")
    z, y, w = prepare(logits, labels, weights)
    dt = z.dtype
    return _fit(z, y, w, jnp.asarray(lam, dt), jnp.asarray(smoothing, dt), n_knots, max_iter,
                jnp.asarray(tol, dt), extrapolate)


@public_entry
def predict(params: ILPSParams, logits: Any, *, context: dict[str, Any] | None = None
            ) -> jax.Array:
    r"""Calibrated probabilities :math:`\sigma(\eta(z))` (eq. 10)."""
    del context
    z = check_logits(logits, "logits")
    return jax.nn.sigmoid(_eta(params.values.astype(z.dtype), params.knots.astype(z.dtype), z,
                               params.extrapolate))


def calibrated_logit(params: ILPSParams, logits: Any) -> jax.Array:
    r""":math:`\eta(z)` itself (used by Neural Calibration, seeds/001 §4)."""
    z = check_logits(logits, "logits")
    return _eta(params.values.astype(z.dtype), params.knots.astype(z.dtype), z, params.extrapolate)


CALIBRATOR = register(Calibrator(name="ilps", fit=fit, predict=predict, monotone=True))
