r"""Isotonic regression calibration: exact weighted pool-adjacent-violators (PAV).

The calibration map is the non-decreasing step function :math:`g` minimising the weighted
squared error (Zadrozny and Elkan, "Transforming Classifier Scores into Accurate Multiclass
Probability Estimates", KDD 2002)

.. math:: \min_{g\ \text{non-decreasing}} \sum_i v_i \big(g(x_i) - y_i\big)^2,

whose solution pools adjacent blocks into their weighted label mean.  Rows with equal
score :math:`x_i` are pooled first (weights summed, labels averaged), exactly as
scikit-learn's ``IsotonicRegression`` does, so the fit equals scikit-learn's to rounding
and a weight ``k`` is the same as ``k`` repeated rows.

``x_space`` chooses the abscissa: ``"logit"`` (default; no saturation for large logits) or
``"prob"`` (:math:`x = \sigma(z)`, the textbook/scikit-learn convention of fitting on
probabilities; the two give the same fitted values but interpolate differently between
knots).  In float32 the probability scale resolves knots near 0 and 1 poorly (on 10^6
rows we measured deviations up to 2e-3 from scikit-learn's float64 interpolation on
probabilities, against 3e-8 in logit space): prefer ``"logit"``, or enable x64.
``interpolation="linear"`` interpolates linearly between the fitted knots and clips
outside them (scikit-learn's ``out_of_bounds="clip"``); ``"step"`` returns the value
of the block containing the score (right-continuous; clipped outside).

Implementation note: PAV is sequential.  ``fit`` runs eagerly on the host: NumPy for
sorting and pooling ties and ``scipy.optimize.isotonic_regression`` (a compiled PAV) for
the pooling, then keeps only the first and last knot of every constant block.  ``fit`` is
therefore NOT jit-able or vmap-able (the number of knots depends on the data); ``predict``
is a pure JAX function (``jnp.interp``) and is jit-able.  Zero-weight rows are dropped.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import isotonic_regression
from scipy.special import expit

from calib_jax._src.eager import compiled
from calib_jax._src.pav import pool_ties
from calib_jax._src.validation import check_choice, check_logits, is_concrete
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import ArrayLike, Context, KeyArg, prepare

__all__ = ["IsotonicParams", "fit", "predict", "pav", "CALIBRATOR"]


@dataclasses.dataclass(frozen=True)
class IsotonicParams:
    """Fitted isotonic map (a pytree: knots are leaves, options are static metadata).

    Attributes:
      x_knots: (K,) increasing abscissae (block boundaries) in ``x_space``.
      y_knots: (K,) non-decreasing fitted probabilities at the knots.
      x_space: ``"logit"`` or ``"prob"`` (static).
      interpolation: ``"linear"`` or ``"step"`` (static).
    """

    x_knots: jax.Array
    y_knots: jax.Array
    x_space: str = dataclasses.field(default="logit", metadata={"static": True})
    interpolation: str = dataclasses.field(default="linear", metadata={"static": True})


jax.tree_util.register_dataclass(
    IsotonicParams, data_fields=["x_knots", "y_knots"], meta_fields=["x_space", "interpolation"]
)


def pav(x: Any, y: Any, w: Any | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Weighted isotonic regression of ``y`` on ``x`` with ties in ``x`` pooled (NumPy).

    Solves :math:`\min_{g \uparrow} \sum_i w_i (g(x_i) - y_i)^2` by pool-adjacent-violators
    (``scipy.optimize.isotonic_regression``) after pooling rows with equal ``x`` (weights
    summed, responses averaged). Runs on the host in float64; not jit-able.

    Args:
      x: (n,) abscissae, real (any order; ties are pooled).
      y: (n,) responses, real (labels in {0, 1} for calibration).
      w: optional (n,) non-negative weights; zero-weight rows are ignored.

    Returns:
      ``(x_k, g_k)``, two float64 NumPy arrays of the same length K: the first and last
      distinct ``x`` of every constant block of the PAV solution, increasing, with its fitted
      value (non-decreasing) -- enough to rebuild the step function and scikit-learn's linear
      interpolation exactly. With responses in [0, 1] the values are clipped to [0, 1].

    Raises:
      ValueError: when no row has a positive weight.

    Example:
      >>> from calib_jax.calibrators.isotonic import pav
      >>> xk, gk = pav([1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0])
      >>> xk.tolist(), gk.tolist()  # the violating pair (1, 0) at x = 2, 3 is pooled to 1/2
      ([1.0, 2.0, 3.0, 4.0], [0.0, 0.5, 0.5, 1.0])
      >>> xk, gk = pav([1.0, 2.0, 3.0], [1.0, 0.0, 0.0], [1.0, 1.0, 2.0])  # one block: 1 / (1 + 1 + 2)
      >>> xk.tolist(), gk.tolist()  # only its first and last x are kept
      ([1.0, 3.0], [0.25, 0.25])
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(x) if w is None else np.asarray(w, dtype=np.float64)
    if not np.all(w > 0):
        keep = w > 0
        x, y, w = x[keep], y[keep], w[keep]
    if x.size == 0:
        raise ValueError("`weights` leave no row with positive weight")
    _, _, xu, wu, yu = pool_ties(x, y, w)
    res = isotonic_regression(yu, weights=wu, increasing=True)
    blocks = np.asarray(res.blocks)
    keep_idx = np.unique(np.concatenate([blocks[:-1], blocks[1:] - 1]))
    return xu[keep_idx], np.clip(res.x[keep_idx], 0.0, 1.0) if _is_binary(y) else res.x[keep_idx]


def _is_binary(y: np.ndarray) -> bool:
    return bool(y.size) and float(y.min()) >= 0.0 and float(y.max()) <= 1.0


@public_entry
def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, x_space: str = "logit", interpolation: str = "linear") -> IsotonicParams:
    r"""Fit the isotonic calibration map by weighted PAV (eager; not jit-able):
    :math:`\min_{g \uparrow} \sum_i v_i (g(x_i) - y_i)^2` (Zadrozny and Elkan, "Transforming
    Classifier Scores into Accurate Multiclass Probability Estimates", KDD 2002).

    Args:
      logits: (n,) uncalibrated logits (concrete arrays).
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative weights (weight ``k`` == ``k`` repeated rows).
      key, context: unused.
      x_space: ``"logit"`` or ``"prob"`` (fit and interpolate on ``sigmoid(logits)``).
      interpolation: ``"linear"`` (clip outside) or ``"step"``.

    Returns:
      :class:`IsotonicParams` with K knots (``x_knots``, ``y_knots`` (K,) in JAX's default
      float dtype; ``x_space`` and ``interpolation`` as given). A single fitting row
      (``n = 1``) or a single class gives a constant map; never NaN. Runs on the host (NumPy
      and SciPy); not jit- or vmap-able, since K depends on the data.

    Raises:
      ValueError: on invalid input (NaN or inf logits, a label other than 0/1, a negative
        weight, a bad option, no row of positive weight), or when called under ``jit`` /
        ``vmap`` tracing.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.isotonic import fit, predict
      >>> z = jnp.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]); y = jnp.array([0.0, 0.0, 1.0, 0.0, 1.0, 1.0])
      >>> params = fit(z, y)              # the violating pair (1, 0) at z = 0, 1 is pooled to 1/2
      >>> params.x_knots.tolist(), params.y_knots.tolist()
      ([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.5, 0.5, 1.0, 1.0])
      >>> [round(float(p), 4) for p in predict(params, jnp.array([1.5, 10.0]))]  # linear, then clipped
      [0.75, 1.0]
    """
    del key, context
    x_space = check_choice(x_space, "x_space", ("logit", "prob"))
    interpolation = check_choice(interpolation, "interpolation", ("linear", "step"))
    for name, a in (("logits", logits), ("labels", labels), ("weights", weights)):
        if a is not None and not is_concrete(a):
            raise ValueError(
                f"isotonic.fit needs concrete `{name}`: PAV is sequential and runs on the host "
                "(it cannot be traced by jit/vmap); call it outside jit"
            )
    prepare(logits, labels, weights)  # validation only
    x = np.asarray(jax.device_get(logits), dtype=np.float64)
    y = np.asarray(jax.device_get(labels), dtype=np.float64)
    w = None if weights is None else np.asarray(jax.device_get(weights), dtype=np.float64)
    if x_space == "prob":
        x = expit(x)
    xk, yk = pav(x, y, w)
    dtype = np.dtype(jnp.result_type(float))
    return IsotonicParams(  # cast on the host: a device cast compiles once per knot count
        x_knots=jax.device_put(xk.astype(dtype)),
        y_knots=jax.device_put(yk.astype(dtype)),
        x_space=x_space,
        interpolation=interpolation,
    )


def _padded(params: IsotonicParams) -> IsotonicParams:
    """The same map with its knots padded to the next power of two by repeating the last
    knot (concrete knots only): ``predict`` then compiles once per power of two rather than
    once per knot count, which changes with every fit.  The values are unchanged: a repeated
    last knot is past every ``x`` the interpolation or the step lookup can tell apart from it
    (both clip at the last knot)."""
    xk, yk = params.x_knots, params.y_knots
    if not (is_concrete(xk) and is_concrete(yk)) or xk.ndim != 1 or xk.shape != yk.shape or xk.shape[0] == 0:
        return params
    k = xk.shape[0]
    pad = (1 << (k - 1).bit_length()) - k
    if pad == 0:
        return params
    xh, yh = np.asarray(xk), np.asarray(yk)
    return dataclasses.replace(params, x_knots=jax.device_put(np.concatenate([xh, np.repeat(xh[-1:], pad)])),
                               y_knots=jax.device_put(np.concatenate([yh, np.repeat(yh[-1:], pad)])))


@public_entry
def predict(params: IsotonicParams, logits: Any, *, context: dict[str, Any] | None = None
            ) -> jax.Array:
    r"""Evaluate :math:`g(x)` at ``logits`` (linear between knots or step; clipped outside
    :math:`[x_1, x_K]`).  jit-able; an eager call runs one compiled program per power of two
    of the knot count.

    Args:
      params: a fitted :class:`IsotonicParams`; :math:`x` is the logit, or
        :math:`\sigma(z)` when ``params.x_space == "prob"``.
      logits: (n,) uncalibrated logits, real.
      context: unused (protocol compatibility).

    Returns:
      (n,) fitted probabilities (in [0, 1] for a map fitted on labels): ``"linear"``
      interpolates between the knots, ``"step"`` takes the value of the last knot at or
      left of :math:`x`; both hold the end values outside the knots. jit- and vmap-able
      (the knot count is a shape, so each new count traces again). Called eagerly, NaN or
      inf logits raise ``ValueError`` naming ``logits``; under ``jit`` / ``vmap`` the same
      check makes the output NaN.

    Example:
      >>> import dataclasses
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.isotonic import IsotonicParams, predict
      >>> params = IsotonicParams(x_knots=jnp.array([0.0, 1.0]), y_knots=jnp.array([0.2, 0.6]))
      >>> z = jnp.array([-1.0, 0.5, 2.0])
      >>> [round(float(p), 4) for p in predict(params, z)]  # clipped, halfway, clipped
      [0.2, 0.4, 0.6]
      >>> step = dataclasses.replace(params, interpolation="step")
      >>> [round(float(p), 4) for p in predict(step, z)]
      [0.2, 0.2, 0.6]
    """
    del context
    # tracers and lists take the plain path inside the wrapper; the padding changes no value
    return _predict_compiled(_padded(params), logits)


def _predict(params: IsotonicParams, logits: Any) -> jax.Array:
    z = check_logits(logits, "logits")
    x = jax.nn.sigmoid(z) if params.x_space == "prob" else z
    xk, yk = params.x_knots.astype(x.dtype), params.y_knots.astype(x.dtype)
    if params.interpolation == "linear":
        return jnp.interp(x, xk, yk)
    idx = jnp.clip(jnp.searchsorted(xk, x, side="right") - 1, 0, xk.shape[0] - 1)
    return yk[idx]


_predict_compiled = compiled(_predict)

CALIBRATOR = register(Calibrator(name="isotonic", fit=fit, predict=predict, monotone=True))
