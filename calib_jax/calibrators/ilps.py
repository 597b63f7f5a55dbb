r"""Isotonic Line-Plot Scaling (ILPS): Pan, Ao, Tang, Lu, Liu, Xiao and He, "Field-aware Calibration"
(WWW 2020), §4.1, eqs. 10-11.

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
* The hinge :math:`(x)_+` is not differentiable at 0 and L-BFGS on the exact hinge
  oscillates (measured: the loss does not decrease after ~50 iterations), so by default it
  is replaced by its softplus smoothing :math:`\tau \operatorname{softplus}(x / \tau)`
  with ``smoothing`` :math:`\tau = 10^{-3}`; it differs from :math:`(x)_+` by at most
  :math:`\tau \ln 2` per knot pair.  ``smoothing=0`` uses the exact hinge (the Newton
  solver then sees no curvature from it).
* Solver: ``solver="lbfgs"`` (the default) is ``optax.lbfgs`` (zoom line search, memory
  10) for at most ``max_iter`` iterations; ``solver="newton"`` is damped Newton with the
  exact Hessian, which is tridiagonal (each row's calibrated logit combines two
  neighbouring knot values and each hinge couples two neighbours), a small ridge for the
  knots no row reaches, and backtracking to a sufficient decrease.  Both stop when the
  gradient norm falls below ``tol`` or after ``max_iter`` steps.  The smoothed hinge makes
  the problem ill-conditioned (curvature :math:`1/\tau` at an active hinge, almost none
  elsewhere): on simulated CTR logits (2,000 to 200,000 rows, 100 knots, 2026-12-08)
  L-BFGS needed 160 to 16,000 iterations to reach the tolerance, and at the default
  ``max_iter = 300`` it stopped with the objective up to 1e-3 above the converged value
  and, at 200,000 rows, probabilities up to 10% from the converged fit's (in the sparsely
  populated upper tail).  Newton reached the
  tolerance in 19 to 115 steps, 1.5 to 11 times faster than those 300 L-BFGS steps at
  10,000 to 200,000 rows (slower at 2,000: 0.05 s against 0.04 s on 2 CPU cores).
  L-BFGS stays the default because its early stop is, in effect, the only regularisation
  of the tails: where a tail's rows all carry one label, eq. 11 has no finite optimum there
  (separation), and the converged fit drives the end knots towards infinity.  Measured on
  2,000 simulated rows with no click among the 26 below :math:`a_1` (true logit
  :math:`1.2 z` there): Newton put :math:`b_1` and :math:`b_2` near -19, probability
  4e-9 at logit -5 where the truth is 2.5e-3 and L-BFGS gives 5.7e-3; on another draw the
  end segment became so steep that logits -20 and -30 both got probability exactly 0 in
  float32.  Newton suits large logs whose tails hold both labels (at 200,000 rows the
  converged fits of the two solvers reached the same objective within 5e-7 and
  probabilities within 3%); the committed studies ran L-BFGS.
* If the solver ends above the identity's objective, the identity is returned
  (``fallback = True``).  ``fit`` is jit- and vmap-able (static ``n_knots``, ``max_iter``,
  ``extrapolate`` and ``solver``).

Edge cases: a single class in the labels (including ``n = 1``) returns the identity with
``fallback = True``; never NaN (log loss computed in log space).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src.eager import compiled
from calib_jax._src.precision import MATMUL
from calib_jax._src.validation import check_choice, check_logits, check_positive_int
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import (
    ArrayLike,
    Context,
    KeyArg,
    bce_with_logits,
    check_number_option,
    has_both_classes,
    lbfgs_minimize,
    prepare,
    weighted_mean,
)

__all__ = ["ILPSParams", "SOLVERS", "knots", "fit", "predict", "calibrated_logit", "CALIBRATOR"]

#: the solvers of :func:`fit`: optax L-BFGS (the default) and damped Newton
SOLVERS = ("lbfgs", "newton")


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
    r"""Knot logits :math:`a_k = \operatorname{logit}(k/(K+1))`, :math:`k = 1..K` (Pan et al.,
    "Field-aware Calibration" (WWW 2020), §4.1): the knots sit at evenly spaced probabilities.

    Args:
      n_knots: number of knots K, an int >= 1 (static under ``jit``; the paper uses 100).
      dtype: float dtype of the result (default: JAX's default float, float32 unless x64).

    Returns:
      (K,) increasing logits, symmetric about 0. jit-able with ``n_knots`` static.

    Example:
      >>> from calib_jax.calibrators.ilps import knots
      >>> [round(float(a), 4) for a in knots(3)]  # logit(1/4), logit(1/2), logit(3/4) = -ln 3, 0, ln 3
      [-1.0986, 0.0, 1.0986]
    """
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


def _coefficients(b: jax.Array, a: jax.Array, j: jax.Array, dz: jax.Array, outside: jax.Array
                  ) -> jax.Array:
    """The weight ``c`` of ``b[j + 1]`` in each row's calibrated logit at ``b``:
    ``eta = (1 - c) b[j] + c b[j + 1]`` (``c = dz / (a[j+1] - a[j])``, or 0 where the
    extrapolated slope is clipped at 0). :func:`_eta_from` is this combination."""
    slope_positive = b[j + 1] > b[j]
    return jnp.where(outside & ~slope_positive, 0.0, dz / (a[j + 1] - a[j]))


def _hessian(b: jax.Array, a: jax.Array, geom: tuple, v: jax.Array, lam: jax.Array, tau: jax.Array
             ) -> jax.Array:
    r"""The Hessian of eq. 11's smoothed objective at ``b`` (``v``: the row weights over their
    total). Each row's calibrated logit is :math:`(1 - c) b_j + c\, b_{j+1}`
    (:func:`_coefficients`), so its log loss adds :math:`v\,p(1 - p)` times
    :math:`((1 - c)^2, c^2)` to the diagonal at ``j``, ``j + 1`` and :math:`(1 - c) c` off
    it; each softplus hinge :math:`\tau\,\mathrm{softplus}((b_k - b_{k+1})/\tau)` adds
    :math:`\lambda s(1 - s)/\tau` (:math:`s` its sigmoid) to both diagonal entries and
    subtracts it off the diagonal. Tridiagonal; returned dense (K, K)."""
    j, dz, outside = geom
    n_knots = b.shape[0]
    c = _coefficients(b, a, j, dz, outside)
    p = jax.nn.sigmoid(_eta_from(b, a, j, dz, outside))
    h = v * p * (1.0 - p)
    diag = jnp.zeros(n_knots, b.dtype).at[j].add(h * (1.0 - c) ** 2).at[j + 1].add(h * c * c)
    off = jnp.zeros(n_knots - 1, b.dtype).at[j].add(h * (1.0 - c) * c)
    safe_tau = jnp.where(tau > 0, tau, 1.0)
    x = (b[:-1] - b[1:]) / safe_tau
    q = jnp.where(tau > 0, lam * jax.nn.sigmoid(x) * jax.nn.sigmoid(-x) / safe_tau, 0.0)
    diag = diag.at[:-1].add(q).at[1:].add(q)
    off = off - q
    rows = jnp.arange(n_knots - 1)
    return jnp.diag(diag).at[rows, rows + 1].set(off).at[rows + 1, rows].set(off)


def _newton(loss: Callable[[jax.Array], jax.Array], a: jax.Array, geom: tuple, w: jax.Array, lam: jax.Array,
            tau: jax.Array, max_iter: int, tol: jax.Array) -> jax.Array:
    r"""Damped Newton on the smoothed objective of eq. 11 from the identity :math:`b = a`:
    each step solves :math:`(H + \mu I) d = -g` with the exact Hessian :math:`H`
    (:func:`_hessian`) and :math:`\mu = 10^{-6}(1 + \max_k H_{kk})` for the knots that no
    row and no active hinge touches, then halves the step until the objective decreases
    enough (Armijo, at most 40 halvings). Stops when the gradient norm falls below ``tol``,
    after ``max_iter`` steps, or when no halving decreases the objective (float32's flat
    floor); returns the knot values."""
    n_knots = a.shape[0]
    value_and_grad = jax.value_and_grad(loss)
    total = jnp.sum(w)
    v = w / jnp.where(total > 0, total, 1.0)

    def cond(carry):
        _, value, g, k, stalled = carry
        return (k < max_iter) & (jnp.linalg.norm(g) >= tol) & ~stalled & jnp.isfinite(value)

    def body(carry):
        b, value, g, k, _ = carry
        H = _hessian(b, a, geom, v, lam, tau)
        d = -jnp.linalg.solve(H + 1e-6 * (1.0 + jnp.max(jnp.diag(H))) * jnp.eye(n_knots, dtype=b.dtype), g)
        slope = jnp.vdot(g, d, precision=MATMUL)

        def shrink(state):
            t, _, _ = state
            t = 0.5 * t
            trial = loss(b + t * d)
            return t, trial, trial <= value + 1e-4 * t * slope

        def keep_shrinking(state):
            t, _, accepted = state
            return ~accepted & (t > 2.0 ** -40)

        # the full step, judged by Armijo's rule, or where float32 cannot resolve the objective's
        # decrease (its change within a few units of its last digit) by a smaller gradient
        first, g_first = value_and_grad(b + d)
        flat = jnp.abs(first - value) <= 8 * jnp.finfo(b.dtype).eps * jnp.abs(value)
        full = (first <= value + 1e-4 * slope) | (flat & (jnp.linalg.norm(g_first) < jnp.linalg.norm(g)))
        t, trial, accepted = jax.lax.while_loop(keep_shrinking, shrink, (jnp.asarray(1.0, b.dtype), first, full))
        accepted = accepted & (slope < 0) & jnp.isfinite(trial)
        b_new = jnp.where(accepted, b + t * d, b)
        # the gradient at the new point: the full step's is known, a shortened step's is computed
        g_new = jax.lax.cond(accepted & ~full, lambda: jax.grad(loss)(b_new), lambda: jnp.where(accepted, g_first, g))
        return b_new, jnp.where(accepted, trial, value), g_new, k + 1, ~accepted

    value0, g0 = value_and_grad(a)
    return jax.lax.while_loop(cond, body, (a, value0, g0, jnp.asarray(0), jnp.asarray(False)))[0]


@partial(jax.jit, static_argnames=("n_knots", "max_iter", "extrapolate", "solver"))
def _fit(z, y, w, lam, tau, n_knots: int, max_iter: int, tol, extrapolate: str, solver: str) -> ILPSParams:
    a = knots(n_knots, z.dtype)

    def penalty(x):
        smooth = tau * jax.nn.softplus(x / jnp.where(tau > 0, tau, 1.0))
        return jnp.where(tau > 0, smooth, jax.nn.relu(x))

    geom = _geometry(a, z, extrapolate)

    def loss(b):
        data = weighted_mean(bce_with_logits(_eta_from(b, a, *geom), y), w)
        return data + lam * jnp.sum(penalty(b[:-1] - b[1:]))

    if solver == "newton":
        b = _newton(loss, a, geom, w, lam, tau, max_iter, tol)
    else:
        b = lbfgs_minimize(loss, a, max_iter=max_iter, tol=tol)
    ok = has_both_classes(y, w) & jnp.all(jnp.isfinite(b)) & (loss(b) <= loss(a))
    b = jnp.where(ok, b, a)
    return ILPSParams(knots=a, values=b, fallback=~ok, extrapolate=extrapolate)


@public_entry
def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, n_knots: int = 100, lam: float = 1.0, max_iter: int = 300, tol: float = 1e-6,
        smoothing: float = 1e-3, extrapolate: str = "linear", solver: str = "lbfgs") -> ILPSParams:
    r"""Fit ILPS (Pan et al., "Field-aware Calibration" (WWW 2020), eq. 11) with optax L-BFGS:
    :math:`\min_b \overline{\ell}(\eta_b(z), y) + \lambda \sum_k (b_k - b_{k+1})_+`.

    Args:
      logits: (n,) uncalibrated logits, real.
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative weights (weight ``k`` == ``k`` repeated rows).
      key, context: unused (protocol compatibility).
      n_knots: number of knots ``K``, an int >= 2 (static; the paper uses 100).
      lam: monotonicity penalty weight ``lambda >= 0`` (1, the default, makes the hinge an
        exact penalty for the mean log loss).
      max_iter: iteration cap of the solver, an int >= 1 (static).
      tol: stop when the gradient norm falls below ``tol >= 0``.
      smoothing: softplus temperature ``tau >= 0`` of the hinge (0 = exact hinge).
      extrapolate: outside :math:`[a_1, a_K]`, ``"linear"`` continues the end segments with
        their slopes clipped at 0; ``"clamp"`` holds :math:`b_1` / :math:`b_K` (static).
      solver: ``"lbfgs"`` (default: ``optax.lbfgs``, which at ``max_iter = 300`` often
        stops before the gradient tolerance, and so does not chase a tail of one label
        towards infinity) or ``"newton"`` (damped Newton with the exact tridiagonal
        Hessian, which reaches the tolerance); see the module notes (static).

    Returns:
      :class:`ILPSParams`: ``knots`` and ``values`` (K,), the boolean ``fallback`` (True when
      the identity :math:`b = a` was returned: one class only, a non-finite fit, or an
      objective above the identity's) and ``extrapolate``. The fit is jit- and vmap-able
      (``n_knots``, ``max_iter``, ``extrapolate`` and ``solver`` static; ``lam``, ``tol`` and
      ``smoothing`` may be traced). Called eagerly, invalid input (NaN or inf logits, a label
      other than 0/1, a negative weight, a bad option) raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` only shapes and options are checked: NaN input gives
      the identity with ``fallback = True``, and labels outside {0, 1} are used as given.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators.ilps import calibrated_logit, fit
      >>> rng = np.random.default_rng(0)
      >>> z = rng.normal(0.0, 2.0, 2000).astype(np.float32)
      >>> y = (rng.random(2000) < 1 / (1 + np.exp(-z / 2))).astype(np.float32)  # truth: eta(z) = z / 2
      >>> params = fit(z, y, n_knots=5)
      >>> params.values.shape, bool(params.fallback)
      ((5,), False)
      >>> [round(float(v)) for v in calibrated_logit(params, np.array([-2.0, 0.0, 2.0], np.float32))]
      [-1, 0, 1]
    """
    del key, context
    n_knots = check_positive_int(n_knots, "n_knots")
    if n_knots < 2:
        raise ValueError(f"`n_knots` must be >= 2, got {n_knots}")
    max_iter = check_positive_int(max_iter, "max_iter")
    extrapolate = check_choice(extrapolate, "extrapolate", ("linear", "clamp"))
    solver = check_choice(solver, "solver", SOLVERS)
    for name, v in (("lam", lam), ("smoothing", smoothing), ("tol", tol)):
        # finite too: an infinite `lam` returned the identity (fallback, no warning), an infinite `tol`
        # the optimiser's start, and text or a boolean was read as a number
        check_number_option(v, name, "a finite number >= 0", lambda x: 0.0 <= x < np.inf, traced_ok=True)
    return _checked_fit(logits, labels, weights, lam, smoothing, tol, n_knots=n_knots, max_iter=max_iter,
                        extrapolate=extrapolate, solver=solver)


def _checked_fit_plain(logits: Any, labels: Any, weights: Any, lam: Any, smoothing: Any, tol: Any, *,
                       n_knots: int, max_iter: int, extrapolate: str, solver: str = "lbfgs") -> ILPSParams:
    """The input checks and the fit: under a user's ``jit`` a failed check makes the fitted
    values NaN (:mod:`calib_jax._src.eager`), as for the other jit-able fits."""
    z, y, w = prepare(logits, labels, weights)
    dt = z.dtype
    return _fit(z, y, w, jnp.asarray(lam, dt), jnp.asarray(smoothing, dt), n_knots, max_iter,
                jnp.asarray(tol, dt), extrapolate, solver)


#: an eager call runs the checks and the fit as one compiled program (the sizes and the
#: extrapolation are its static part)
_checked_fit = compiled(_checked_fit_plain)


@public_entry
def predict(params: ILPSParams, logits: Any, *, context: dict[str, Any] | None = None
            ) -> jax.Array:
    r"""Calibrated probabilities :math:`\sigma(\eta(z))` (eq. 10 of Pan et al., "Field-aware Calibration", WWW 2020).

    Args:
      params: a fitted :class:`ILPSParams`.
      logits: (n,) uncalibrated logits, real.
      context: unused (protocol compatibility).

    Returns:
      (n,) probabilities in [0, 1], non-decreasing in the logit when ``params.values`` is
      (as a fit returns it up to optimiser tolerance). jit- and vmap-able. Called eagerly,
      NaN or inf logits raise ``ValueError`` naming ``logits``; under ``jit`` / ``vmap`` they
      are not checked and give NaN in their own rows.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.ilps import ILPSParams, knots, predict
      >>> a = knots(3)
      >>> params = ILPSParams(knots=a, values=2 * a, fallback=jnp.asarray(False))  # eta(z) = 2 z
      >>> [round(float(p), 4) for p in predict(params, jnp.array([0.5, 3.0]))]  # sigma(1), sigma(6)
      [0.7311, 0.9975]
    """
    del context
    z = check_logits(logits, "logits")
    return jax.nn.sigmoid(_eta(params.values.astype(z.dtype), params.knots.astype(z.dtype), z,
                               params.extrapolate))


def calibrated_logit(params: ILPSParams, logits: Any) -> jax.Array:
    r""":math:`\eta(z)` itself, the calibrated logit of eq. 10 (used by Neural Calibration,
    Pan et al., "Field-aware Calibration" (WWW 2020), §4).

    Args:
      params: a fitted :class:`ILPSParams`.
      logits: (n,) uncalibrated logits, real.

    Returns:
      (n,) calibrated logits: linear interpolation of the knot values, extended outside the
      knots as ``params.extrapolate`` says. jit- and vmap-able. Called eagerly, NaN or inf
      logits raise ``ValueError`` naming ``logits``; under ``jit`` / ``vmap`` they are not
      checked and give NaN in their own rows.

    Example:
      >>> import dataclasses
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.ilps import ILPSParams, calibrated_logit, knots
      >>> a = knots(3)                                 # -ln 3, 0, ln 3
      >>> params = ILPSParams(knots=a, values=2 * a, fallback=jnp.asarray(False))  # eta(z) = 2 z
      >>> [round(float(v), 4) for v in calibrated_logit(params, jnp.array([0.5, 3.0]))]
      [1.0, 6.0]
      >>> clamp = dataclasses.replace(params, extrapolate="clamp")  # held at b_K = 2 ln 3 past a_K
      >>> [round(float(v), 4) for v in calibrated_logit(clamp, jnp.array([0.5, 3.0]))]
      [1.0, 2.1972]
    """
    z = check_logits(logits, "logits")
    return _eta(params.values.astype(z.dtype), params.knots.astype(z.dtype), z, params.extrapolate)


CALIBRATOR = register(Calibrator(name="ilps", fit=fit, predict=predict, monotone=True))
