r"""Gaussian and Gamma calibration of ranking scores (Kweon, Kang and Yu, "Obtaining Calibrated
Probabilities with Personalized Ranking Models", AAAI 2022: the two parametric calibration
methods it proposes).

Both model the distribution of the recommender's score :math:`s` (here the logit) within each
class and turn it into a posterior by Bayes' rule, :math:`P(y=1 \mid s) =
\sigma\big(\ln \tfrac{\pi_1 f_1(s)}{\pi_0 f_0(s)}\big)`:

* **Gaussian calibration**: :math:`s \mid y \sim \mathcal N(\mu_y, \sigma_y^2)` gives a
  quadratic log-odds,

  .. math:: \tilde p = \sigma(a s^2 + b s + c), \qquad
            a = \tfrac{1}{2\sigma_0^2} - \tfrac{1}{2\sigma_1^2},\;
            b = \tfrac{\mu_1}{\sigma_1^2} - \tfrac{\mu_0}{\sigma_0^2},\;
            c = \tfrac{\mu_0^2}{2\sigma_0^2} - \tfrac{\mu_1^2}{2\sigma_1^2}
                + \ln\tfrac{\pi_1 \sigma_0}{\pi_0 \sigma_1}

  (Platt scaling is the equal-variance case ``a = 0``).
* **Gamma calibration**: the score shifted to be positive, :math:`x = s - o > 0`, with
  :math:`x \mid y \sim \mathrm{Gamma}(k_y, \theta_y)` gives

  .. math:: \tilde p = \sigma(a \ln x + b x + c), \qquad a = k_1 - k_0,\;
            b = \tfrac{1}{\theta_0} - \tfrac{1}{\theta_1},\;
            c = \ln\tfrac{\pi_1 \Gamma(k_0)\,\theta_0^{k_0}}{\pi_0 \Gamma(k_1)\,\theta_1^{k_1}}.

As in the paper, the parameters are not the moments of the two classes: :math:`(a, b, c)` are
fitted directly by (weighted) maximum likelihood, a logistic regression on the features
:math:`(s^2, s)` or :math:`(\ln x, x)`.

**Monotonicity constraint** (as the authors' official code, ``Utils/cal_method.py`` of
github.com/WonbinKweon/CalibratedRankingModels_AAAI2022, with ``const=True``, the setting of
its ``main.py``; the top-N calibration paper of Sato, RecSys 2024, §5, used the same code and its
``clogistic`` constrained logistic regression). The fit is restricted to maps whose log-odds
:math:`g` are non-decreasing on the score range :math:`[s_\mathrm{lo}, s_\mathrm{hi}]`, through
two linear constraints on the derivative at the ends of that range:

.. math:: g'(s_\mathrm{lo}) \ge 0,\quad g'(s_\mathrm{hi}) \ge 0, \qquad
          g'(s) = 2 a s + b \;\text{(Gaussian)}, \qquad
          g'(s) = a / x + b \;\text{(Gamma)}.

Both derivatives are monotone in :math:`s`, so the two ends suffice: the map keeps the
recommender's ranking on the whole range. The official code takes the range as arguments
(``smin``, ``smax``); here it is the range of the fitting scores (rows with positive weight),
or ``score_range=(lo, hi)``.

**The Gamma shift.** The official code feeds the Gamma features :math:`x = s - (s_\mathrm{min} -
\delta)` with a margin :math:`\delta > 0` (its ``shift``), so that the smallest score sits at
:math:`x = \delta` rather than at the pole of :math:`\ln x`, and it constrains the derivative at
:math:`x = \delta` and :math:`x = s_\mathrm{max} - s_\mathrm{min} + \delta`. Here the origin
:math:`o = s_\mathrm{lo} - \delta` uses :math:`\delta =` ``margin`` :math:`\times (s_\mathrm{hi}
- s_\mathrm{lo})` (default ``margin=0.1``), a margin relative to the range so that the fitted
probabilities do not change when the scores are rescaled (an absolute ``shift`` of the official
code is ``margin = shift / (smax - smin)``). The origin is stored in the params and ``predict``
applies the same one.

**Outside the score range** (test scores beyond the fitting range, where the quadratic may turn
down and :math:`\ln x` may be undefined) the log-odds continue linearly with their slope at the
nearer end, :math:`g(s) = g(s_c) + g'(s_c)(s - s_c)` with :math:`s_c` the score clipped to the
range. This is a departure from the paper, which applies its formula everywhere; inside the
range the two agree, and with it the map is non-decreasing for every input (the fit uses the
same extended features, so fit and predict are one model; ``predict`` clips the end slopes at
0, which the constraint guarantees up to float rounding). A ``score_range`` that covers every
score reproduces the paper's formula on all of them.

**Fit.** The log-odds are written in the equivalent coordinates :math:`g(s) = c_\mathrm{lo} +
d_\mathrm{lo}\,\phi_\mathrm{lo}(s) + d_\mathrm{hi}\,\phi_\mathrm{hi}(s)`, where :math:`d_\mathrm{lo},
d_\mathrm{hi}` are the end slopes :math:`g'(s_\mathrm{lo}), g'(s_\mathrm{hi})` and :math:`c_\mathrm{lo} =
g(s_\mathrm{lo})` (a linear, invertible change of :math:`(a, b, c)`), so that the two constraints are
the bounds :math:`d \ge 0`. The constrained maximum-likelihood fit is exact: damped Newton (``n_steps``
steps, then more until converged: ``calib_jax.calibrators._common.newton_logistic``) from the identity
:math:`\sigma(s)` solves the unconstrained problem, and when it violates a bound the problem is
solved on each face (one slope fixed at 0, then both) and the feasible solution with the smallest
loss is kept (the loss is convex, so this is the constrained optimum). The iterations run on the
two basis columns centred and scaled to unit weighted RMS (the raw columns can differ by orders of
magnitude, e.g. for a small Gamma margin), and the convergence check bounds the gradient of the
mean log loss in those coordinates. The fit is jit- and vmap-able. The official code's solvers
(scikit-learn's ``LogisticRegression`` unconstrained, ``clogistic`` with ``solver="ecos"``
constrained) add their default penalty on the coefficients (``C = 1``); the fit here is
unregularised maximum likelihood, as :mod:`~calib_jax.calibrators.platt`.

Fail-safe (:mod:`calib_jax.calibrators._failsafe`; never NaN): fewer than ``min_events``
effective rows in the minority class (a single class and ``n = 1`` included) give the smallest
change consistent with the data (the identity :math:`\sigma(s)` or a shift :math:`\sigma(s + b)`,
:func:`~calib_jax.calibrators._failsafe.consistent_shift`); a flat constrained optimum (both end
slopes 0: no increasing map fits better than a constant) or a fit that did not converge gives the
maximum-likelihood logit shift :math:`\sigma(s + b)`. ``params.fallback`` holds the reason code
and an eager call warns. Constant scores leave the shape unidentified: the slopes keep their
starting value 1 (the Newton damping) and the intercept fits the base rate.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import calib_jax.calibrators._failsafe as F
from calib_jax._src.eager import compiled
from calib_jax._src.validation import check_condition, check_logits
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import (
    ArrayLike,
    Context,
    KeyArg,
    bce_with_logits,
    check_newton_options,
    check_number_option,
    fit_shift,
    logistic_gradient,
    newton_logistic,
    prepare,
    weighted_mean,
)

__all__ = [
    "GaussianParams",
    "GammaParams",
    "fit_gaussian",
    "predict_gaussian",
    "fit_gamma",
    "predict_gamma",
    "GAUSSIAN",
    "GAMMA",
]


class GaussianParams(NamedTuple):
    """Fitted Gaussian calibration ``sigmoid(a s^2 + b s + c)`` on ``[lo, hi]``, linear beyond.

    Attributes:
      a, b, c: the coefficients of the log-odds :math:`a s^2 + b s + c` in the raw score.
      lo, hi: the score range of the monotonicity constraint (the end slopes
        :math:`2 a\\,\\mathrm{lo} + b` and :math:`2 a\\,\\mathrm{hi} + b` are :math:`\\ge 0`);
        beyond it the log-odds continue linearly with those slopes.
      fallback: int32 fail-safe code (0: accepted; 1: identity or consistent shift; 2, 3: a
        logit shift; see ``calib_jax.calibrators.FALLBACK_REASONS``).
    """

    a: jax.Array
    b: jax.Array
    c: jax.Array
    lo: jax.Array
    hi: jax.Array
    fallback: jax.Array


class GammaParams(NamedTuple):
    """Fitted Gamma calibration ``sigmoid(a ln x + b x + c)``, ``x = s - origin``, on ``[lo, hi]``.

    Attributes:
      a, b, c: the coefficients of the log-odds :math:`a \\ln x + b x + c`.
      lo, hi: the score range of the monotonicity constraint (the end slopes
        :math:`a / (\\mathrm{lo} - o) + b` and :math:`a / (\\mathrm{hi} - o) + b` are
        :math:`\\ge 0`); beyond it the log-odds continue linearly with those slopes.
      origin: the shift :math:`o` (``x = s - origin``; ``lo - origin`` is the margin
        :math:`\\delta > 0`).
      fallback: int32 fail-safe code (as :class:`GaussianParams`).
    """

    a: jax.Array
    b: jax.Array
    c: jax.Array
    lo: jax.Array
    hi: jax.Array
    origin: jax.Array
    fallback: jax.Array


# ------------------------------------------------------------------------------ shared pieces
def _score_range(z: jax.Array, w: jax.Array, score_range: jax.Array | None) -> tuple[jax.Array, jax.Array]:
    """The constraint's range: ``score_range`` or the range of the rows with positive weight."""
    if score_range is not None:
        return score_range[0], score_range[1]
    seen = w > 0
    any_seen = jnp.any(seen)
    lo = jnp.where(any_seen, jnp.min(jnp.where(seen, z, jnp.inf)), jnp.min(z))
    hi = jnp.where(any_seen, jnp.max(jnp.where(seen, z, -jnp.inf)), jnp.max(z))
    return lo, hi


def _span(lo: jax.Array, hi: jax.Array) -> jax.Array:
    """``hi - lo``, or 1 for an empty range (constant scores: every row sits at ``lo``)."""
    d = hi - lo
    return jnp.where(d > 0, d, jnp.ones_like(d))


def _gaussian_basis(s: jax.Array, lo: jax.Array, hi: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:math:`\\phi_\\mathrm{lo}, \\phi_\\mathrm{hi}`: value 0 at ``lo``, slopes (1, 0) at ``lo``
    and (0, 1) at ``hi``, quadratic inside the range and linear beyond it."""
    span = _span(lo, hi)
    sc = jnp.clip(s, lo, hi)
    t = (sc - lo) / span
    out = s - sc
    return span * (t - 0.5 * t * t) + (1.0 - t) * out, 0.5 * span * t * t + t * out


#: the largest Gamma margin (in ranges of the scores): the origin then lies a thousand ranges below
#: the smallest score, where the Gamma basis is already flat (at 1e6 the float32 fallback shift drifted, at 1e30 the
#: probabilities were NaN)
_MAX_MARGIN = 1e3


def _gamma_geometry(lo: jax.Array, hi: jax.Array, margin: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(origin, x_lo, x_hi): the shift and the ends of the range in ``x = s - origin``."""
    span = _span(lo, hi)
    x_lo = margin * span
    # x_hi = hi - origin, except for an empty range, whose (fictitious) unit length keeps the
    # end slopes' formulas defined (every score then sits at x_lo)
    return lo - x_lo, x_lo, x_lo + span


def _gamma_basis(s: jax.Array, lo: jax.Array, hi: jax.Array, margin: jax.Array) -> tuple[jax.Array, jax.Array]:
    """As :func:`_gaussian_basis` for the Gamma log-odds (``ln x`` and ``x`` inside the range)."""
    _, x1, x2 = _gamma_geometry(lo, hi, margin)
    span = x2 - x1
    sc = jnp.clip(s, lo, hi)
    dx = sc - lo            # x - x_lo, exactly 0 at lo (x - origin would round)
    x = x1 + dx
    out = s - sc
    r = jnp.log1p(dx / x1)  # ln(x / x_lo)
    phi_lo = (x1 / span) * (x2 * r - dx + (x2 / x - 1.0) * out)
    phi_hi = (x2 / span) * (dx - x1 * r + (1.0 - x1 / x) * out)
    return phi_lo, phi_hi


def _gaussian_coefficients(theta: jax.Array, lo: jax.Array, hi: jax.Array) -> tuple[jax.Array, ...]:
    """(a, b, c) of ``a s^2 + b s + c`` from (d_lo, d_hi, c_lo)."""
    d_lo, d_hi, c_lo = theta[0], theta[1], theta[2]
    a = (d_hi - d_lo) / (2.0 * _span(lo, hi))
    return a, d_lo - 2.0 * a * lo, c_lo - d_lo * lo + a * lo * lo


def _gamma_coefficients(theta: jax.Array, lo: jax.Array, hi: jax.Array, margin: jax.Array
                        ) -> tuple[jax.Array, ...]:
    """(a, b, c) of ``a ln x + b x + c`` from (d_lo, d_hi, c_lo)."""
    d_lo, d_hi, c_lo = theta[0], theta[1], theta[2]
    _, x1, x2 = _gamma_geometry(lo, hi, margin)
    span = x2 - x1
    a = (d_lo - d_hi) * x1 * x2 / span
    b = (d_hi * x2 - d_lo * x1) / span
    return a, b, c_lo - a * jnp.log(x1) - b * x1


def _fit_end_slopes(z, y, w, phi_lo, phi_hi, lo, n_steps: int, min_events
                    ) -> tuple[jax.Array, jax.Array]:
    """Weighted logistic regression of ``y`` on ``(phi_lo, phi_hi, 1)`` with the slopes >= 0,
    and its fail-safe: ((d_lo, d_hi, c_lo), fallback code).

    The Newton iterations run on the basis centred and scaled to unit weighted RMS (a positive
    scale keeps the bounds ``d >= 0``; the centring moves only the intercept): the raw columns
    can differ by orders of magnitude (a Gamma margin close to 0 makes ``phi_lo`` tiny), and
    the damping of a step is relative to the Hessian's trace."""
    one = jnp.ones_like(z)
    m_lo, m_hi = weighted_mean(phi_lo, w), weighted_mean(phi_hi, w)
    u_lo, u_hi = phi_lo - m_lo, phi_hi - m_hi
    r_lo, r_hi = jnp.sqrt(weighted_mean(u_lo * u_lo, w)), jnp.sqrt(weighted_mean(u_hi * u_hi, w))
    r_lo, r_hi = jnp.where(r_lo > 0, r_lo, 1.0), jnp.where(r_hi > 0, r_hi, 1.0)
    u_lo, u_hi = u_lo / r_lo, u_hi / r_hi
    # scaled coordinates: d = t / r, c_lo = t_c - t_lo m_lo / r_lo - t_hi m_hi / r_hi

    def unscale(t):
        return jnp.stack([t[0] / r_lo, t[1] / r_hi, t[2] - t[0] * m_lo / r_lo - t[1] * m_hi / r_hi])

    # the identity sigma(s): slopes (1, 1) in both families, g(s) = c_lo + (s - lo)
    identity = jnp.stack([jnp.ones((), z.dtype), jnp.ones((), z.dtype), lo.astype(z.dtype)])
    theta0 = jnp.stack([r_lo, r_hi, identity[2] + m_lo + m_hi])
    enough = F.enough_events(y, w, min_events)

    def solve(mask):
        cols = (u_lo * mask[0], u_hi * mask[1], one)
        return newton_logistic(cols, y, w, theta0 * mask, n_steps=n_steps, keep_going=enough) * mask

    def loss(t):
        return weighted_mean(bce_with_logits(t[0] * u_lo + t[1] * u_hi + t[2], y), w)

    def feasible(t):
        return (t[0] >= 0) & (t[1] >= 0)

    full_mask = jnp.ones(3, z.dtype)
    full = solve(full_mask)

    def on_faces(_):
        # a slope fixed at 0, the other free; then both fixed (a constant map, always feasible)
        masks = jnp.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], z.dtype)
        ts = jax.vmap(solve)(masks)
        losses = jax.vmap(loss)(ts)
        ok = jax.vmap(feasible)(ts) & jnp.isfinite(losses)
        best = jnp.argmin(jnp.where(ok, losses, jnp.inf))
        return ts[best], masks[best]

    t, mask = jax.lax.cond(feasible(full), lambda _: (full, full_mask), on_faces, None)
    grad = logistic_gradient((u_lo * mask[0], u_hi * mask[1], one), y, w, t)
    code = F.first_failure(
        (enough, F.TOO_FEW_EVENTS),
        (feasible(t) & (t[0] + t[1] > 0), F.REVERSES_RANKING),
        (jnp.all(jnp.isfinite(t)) & jnp.all(jnp.abs(grad) <= F.GRAD_TOL), F.NOT_CONVERGED),
    )
    shift = identity.at[2].add(fit_shift(z, y, w))
    safe = identity.at[2].add(F.consistent_shift(z, y, w))
    theta = jnp.where(code == F.OK, unscale(t), jnp.where(code == F.TOO_FEW_EVENTS, safe, shift))
    return theta, code


@partial(jax.jit, static_argnames=("n_steps",))
def _fit_gaussian(z, y, w, score_range, n_steps: int, min_events) -> GaussianParams:
    lo, hi = _score_range(z, w, score_range)
    phi_lo, phi_hi = _gaussian_basis(z, lo, hi)
    theta, code = _fit_end_slopes(z, y, w, phi_lo, phi_hi, lo, n_steps, min_events)
    a, b, c = _gaussian_coefficients(theta, lo, hi)
    return GaussianParams(a=a, b=b, c=c, lo=lo, hi=hi, fallback=code)


@partial(jax.jit, static_argnames=("n_steps",))
def _fit_gamma(z, y, w, score_range, margin, n_steps: int, min_events) -> GammaParams:
    lo, hi = _score_range(z, w, score_range)
    phi_lo, phi_hi = _gamma_basis(z, lo, hi, margin)
    theta, code = _fit_end_slopes(z, y, w, phi_lo, phi_hi, lo, n_steps, min_events)
    a, b, c = _gamma_coefficients(theta, lo, hi, margin)
    origin, _, _ = _gamma_geometry(lo, hi, margin)
    return GammaParams(a=a, b=b, c=c, lo=lo, hi=hi, origin=origin, fallback=code)


def _checked_range(score_range: Any, dtype: Any) -> jax.Array | None:
    if score_range is None:
        return None
    r = jnp.asarray(score_range)
    if r.shape != (2,):
        raise ValueError(f"`score_range` must be two numbers (lo, hi), got shape {tuple(r.shape)}")
    r = r.astype(dtype)
    check_condition(~(jnp.all(jnp.isfinite(r)) & (r[0] < r[1])),
                    "`score_range` must be two finite numbers lo < hi")
    return r


def _prepared(logits: Any, labels: Any, weights: Any, score_range: Any, margin: Any,
              core: Callable[..., Any], n_steps: int, min_events: Any) -> Any:
    """Check the sample and the options, then run ``core`` (the jitted fit)."""
    z, y, w = prepare(logits, labels, weights)
    r = _checked_range(score_range, z.dtype)
    extra: tuple[jax.Array, ...] = ()
    if margin is not None:
        m = jnp.asarray(margin, z.dtype)
        check_condition(~(jnp.isfinite(m) & (m > 0) & (m <= _MAX_MARGIN)),
                        "`margin` must be a finite number in (0, 1e3]")
        extra = (m,)
    return core(z, y, w, r, *extra, n_steps, jnp.asarray(min_events, z.dtype))


#: an eager call runs the checks and the fit as one compiled program (calib_jax._src.eager)
_prepared_fit = compiled(_prepared)


def _range_arg(score_range: Any) -> Any:
    # a tuple of numbers would send the compiled call down its plain path: pass an array
    if score_range is None or isinstance(score_range, jax.Array):
        return score_range
    return jnp.asarray(score_range, dtype=jnp.result_type(float))


# ------------------------------------------------------------------------------ Gaussian
@public_entry
def fit_gaussian(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None,
                 key: KeyArg = None, context: Context = None, n_steps: int = 16,
                 min_events: float = F.MIN_EVENTS, score_range: Any = None) -> GaussianParams:
    r"""Fit Gaussian calibration :math:`\sigma(a s^2 + b s + c)` by constrained weighted maximum
    likelihood (Kweon, Kang and Yu, "Obtaining Calibrated Probabilities with Personalized
    Ranking Models", AAAI 2022, its Gaussian calibration).

    .. math:: \min_{a, b, c}\ \frac{\sum_i v_i\,[\operatorname{softplus}(g_i) - y_i g_i]}{\sum_i v_i},
              \quad g_i = a s_i^2 + b s_i + c, \quad
              \text{s.t. } 2 a s_\mathrm{lo} + b \ge 0,\ 2 a s_\mathrm{hi} + b \ge 0,

    the monotonicity constraint of the authors' official code (module docstring); scores beyond
    :math:`[s_\mathrm{lo}, s_\mathrm{hi}]` enter through the linear continuation of the log-odds.

    Args:
      logits: (n,) the recommender's scores (logits or any real score).
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative weights (weight ``k`` == the row repeated ``k``
        times; TNF passes its rank weights here).
      key, context: unused (protocol compatibility).
      n_steps: Newton steps always taken per (constrained) solve (static); then at most 48
        more until the squared Newton decrement is below 1e-10.
      min_events: fail-safe threshold on the minority class's effective count.
      score_range: optional ``(lo, hi)``, ``lo < hi``, the range on which the map must be
        non-decreasing (the official code's ``smin``, ``smax``); default the range of the
        logits with positive weight.

    Returns:
      :class:`GaussianParams` (scalars ``a, b, c``, ``lo, hi`` and the int32 ``fallback``
      code; batched under ``vmap``). jit- and vmap-able (``n_steps`` static). Called eagerly,
      invalid input (NaN or inf logits, a label other than 0/1, a negative weight, a
      ``score_range`` that is not two finite numbers ``lo < hi``) raises ``ValueError``
      naming the argument; under ``jit`` / ``vmap`` the same checks make the floating
      parameters NaN instead.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators.ranking_scores import fit_gaussian
      >>> rng = np.random.default_rng(0)       # 20% positives, scores ~ N(1, 1); negatives ~ N(-1, 1.1^2)
      >>> y = (rng.random(20000) < 0.2).astype(np.float32)
      >>> s = np.where(y == 1, rng.normal(1.0, 1.0, 20000), rng.normal(-1.0, 1.1, 20000)).astype(np.float32)
      >>> p = fit_gaussian(s, y)   # Bayes: a = (1/1.21 - 1)/2 = -0.087, b = 1 + 1/1.21 = 1.83, c = -1.38
      >>> round(float(p.a), 2), round(float(p.b), 2), round(float(p.c), 1), int(p.fallback)
      (-0.09, 1.83, -1.4, 0)
    """
    del key, context
    params = _prepared_fit(logits, labels, weights, _range_arg(score_range), None, _fit_gaussian,
                           check_newton_options(n_steps, min_events), min_events)
    F.warn_if_fallback("Gaussian calibration", params.fallback,
                       fallback="the smallest logit shift consistent with the data (too few events) or the "
                                "maximum-likelihood shift sigmoid(s + b)")
    return params


def predict_gaussian(params: GaussianParams, logits: Any, *, context: dict[str, Any] | None = None
                     ) -> jax.Array:
    r"""Calibrated probabilities of Gaussian calibration (Kweon, Kang and Yu, "Obtaining
    Calibrated Probabilities with Personalized Ranking Models", AAAI 2022, its Gaussian
    calibration), with the linear continuation beyond the fitted range:

    .. math:: \tilde p = \sigma\big(g(s_c) + g'(s_c)\,(s - s_c)\big), \quad
              g(s) = a s^2 + b s + c, \quad s_c = \min(\max(s, \mathrm{lo}), \mathrm{hi})

    (:math:`\sigma(a s^2 + b s + c)` for scores inside ``[lo, hi]``).

    Args:
      params: a fitted :class:`GaussianParams`.
      logits: (n,) the recommender's scores, real.
      context: unused (protocol compatibility).

    Returns:
      (n,) probabilities in [0, 1], non-decreasing in the score when the params satisfy the
      constraint (every fit does), in the logits' float dtype. jit- and vmap-able. Called
      eagerly, NaN or inf logits raise ``ValueError`` naming ``logits``; under ``jit`` /
      ``vmap`` the same check makes the output NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.ranking_scores import GaussianParams, predict_gaussian
      >>> f = jnp.float32
      >>> params = GaussianParams(a=f(-0.25), b=f(1.0), c=f(0.0), lo=f(-2.0), hi=f(2.0), fallback=jnp.int32(0))
      >>> s = jnp.array([0.0, 2.0, 4.0])   # g(0) = 0, g(2) = 1; beyond hi: g(2) + g'(2) * 2 = 1
      >>> [round(float(p), 4) for p in predict_gaussian(params, s)]
      [0.5, 0.7311, 0.7311]
    """
    del context
    s = check_logits(logits, "logits")
    sc = jnp.clip(s, params.lo, params.hi)
    g = (params.a * sc + params.b) * sc + params.c
    slope = jnp.maximum(2.0 * params.a * sc + params.b, 0.0)  # >= 0 by the constraint; rounding
    return jax.nn.sigmoid(g + slope * (s - sc))


# Eager predicts run one compiled program each (calib_jax._src.eager).
predict_gaussian = public_entry(compiled(predict_gaussian))


# ------------------------------------------------------------------------------ Gamma
@public_entry
def fit_gamma(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None,
              key: KeyArg = None, context: Context = None, n_steps: int = 16,
              min_events: float = F.MIN_EVENTS, score_range: Any = None, margin: float = 0.1
              ) -> GammaParams:
    r"""Fit Gamma calibration :math:`\sigma(a \ln x + b x + c)`, :math:`x = s - o`, by
    constrained weighted maximum likelihood (Kweon, Kang and Yu, "Obtaining Calibrated
    Probabilities with Personalized Ranking Models", AAAI 2022, its Gamma calibration).

    .. math:: \min_{a, b, c}\ \frac{\sum_i v_i\,[\operatorname{softplus}(g_i) - y_i g_i]}{\sum_i v_i},
              \quad g_i = a \ln x_i + b x_i + c, \quad
              \text{s.t. } \frac{a}{x_\mathrm{lo}} + b \ge 0,\ \frac{a}{x_\mathrm{hi}} + b \ge 0,

    with :math:`o = s_\mathrm{lo} - \delta`, :math:`\delta = \text{margin}\,(s_\mathrm{hi} -
    s_\mathrm{lo})`, :math:`x_\mathrm{lo} = \delta` and :math:`x_\mathrm{hi} = s_\mathrm{hi} - o`
    (the official code's shift and constraint; module docstring). Scores beyond the range enter
    through the linear continuation of the log-odds.

    Args:
      logits: (n,) the recommender's scores (logits or any real score).
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative weights (weight ``k`` == the row repeated ``k`` times).
      key, context: unused (protocol compatibility).
      n_steps: Newton steps always taken per (constrained) solve (static); then at most 48
        more until the squared Newton decrement is below 1e-10.
      min_events: fail-safe threshold on the minority class's effective count.
      score_range: optional ``(lo, hi)``, ``lo < hi`` (the official code's ``smin``, ``smax``);
        default the range of the logits with positive weight.
      margin: the shift's margin :math:`\delta` as a fraction of the range, a finite number in
        (0, 1e3] (the smallest score sits at ``x = margin * (hi - lo)``).

    Returns:
      :class:`GammaParams` (scalars ``a, b, c``, ``lo, hi``, ``origin`` and the int32
      ``fallback`` code; batched under ``vmap``). jit- and vmap-able (``n_steps`` static).
      Called eagerly, invalid input (NaN or inf logits, a label other than 0/1, a negative
      weight, a bad ``score_range`` or ``margin``) raises ``ValueError`` naming the argument;
      under ``jit`` / ``vmap`` the same checks make the floating parameters NaN instead.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators.ranking_scores import fit_gamma
      >>> rng = np.random.default_rng(0)     # x = s + 1: positives ~ Gamma(4, 1), negatives ~ Gamma(2, 1),
      >>> y = (rng.random(20000) < 0.3).astype(np.float32)
      >>> x = np.where(y == 1, rng.gamma(4.0, 1.0, 20000), rng.gamma(2.0, 1.0, 20000))
      >>> s = (x - 1.0).astype(np.float32)   # so a = 4 - 2 = 2 and b = 1/1 - 1/1 = 0
      >>> p = fit_gamma(s, y, margin=float((s.min() + 1.0) / np.ptp(s)))   # origin o = -1, as drawn
      >>> round(float(p.origin), 3), round(float(p.a), 1), abs(float(p.b)) < 0.05, int(p.fallback)
      (-1.0, 2.0, True, 0)
    """
    del key, context
    # the margin as an array: one compiled program for every value (a float would be static);
    # checked here where it can be read (text and booleans were taken as numbers, and a margin of
    # 1e30 ranges pushed the scores' squares past float32: NaN probabilities), in the fit under jit
    check_number_option(margin, "margin", "a finite number in (0, 1e3]",
                        lambda v: 0.0 < v <= _MAX_MARGIN, traced_ok=True)
    params = _prepared_fit(logits, labels, weights, _range_arg(score_range),
                           jnp.asarray(margin, dtype=jnp.result_type(float)), _fit_gamma,
                           check_newton_options(n_steps, min_events), min_events)
    F.warn_if_fallback("Gamma calibration", params.fallback,
                       fallback="the smallest logit shift consistent with the data (too few events) or the "
                                "maximum-likelihood shift sigmoid(s + b)")
    return params


def predict_gamma(params: GammaParams, logits: Any, *, context: dict[str, Any] | None = None
                  ) -> jax.Array:
    r"""Calibrated probabilities of Gamma calibration (Kweon, Kang and Yu, "Obtaining Calibrated
    Probabilities with Personalized Ranking Models", AAAI 2022, its Gamma calibration), with the
    linear continuation beyond the fitted range:

    .. math:: \tilde p = \sigma\big(g(s_c) + g'(s_c)\,(s - s_c)\big), \quad
              g(s) = a \ln(s - o) + b (s - o) + c, \quad s_c = \min(\max(s, \mathrm{lo}), \mathrm{hi})

    (:math:`\sigma(a \ln x + b x + c)` for scores inside ``[lo, hi]``; ``ln`` is never taken of a
    non-positive ``x``).

    Args:
      params: a fitted :class:`GammaParams`.
      logits: (n,) the recommender's scores, real.
      context: unused (protocol compatibility).

    Returns:
      (n,) probabilities in [0, 1], non-decreasing in the score when the params satisfy the
      constraint (every fit does), in the logits' float dtype. jit- and vmap-able. Called
      eagerly, NaN or inf logits raise ``ValueError`` naming ``logits``; under ``jit`` /
      ``vmap`` the same check makes the output NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators.ranking_scores import GammaParams, predict_gamma
      >>> f = jnp.float32                  # a = 1, b = 0, c = 0: sigma(ln x) = x / (1 + x), x = s + 1
      >>> params = GammaParams(a=f(1.0), b=f(0.0), c=f(0.0), lo=f(0.0), hi=f(3.0), origin=f(-1.0),
      ...                      fallback=jnp.int32(0))
      >>> [round(float(p), 4) for p in predict_gamma(params, jnp.array([0.0, 1.0, 3.0]))]
      [0.5, 0.6667, 0.8]
    """
    del context
    s = check_logits(logits, "logits")
    sc = jnp.clip(s, params.lo, params.hi)
    x = (sc - params.lo) + (params.lo - params.origin)
    g = params.a * jnp.log(x) + params.b * x + params.c
    slope = jnp.maximum(params.a / x + params.b, 0.0)  # >= 0 by the constraint; rounding
    return jax.nn.sigmoid(g + slope * (s - sc))


predict_gamma = public_entry(compiled(predict_gamma))


GAUSSIAN = register(Calibrator(name="gaussian", fit=fit_gaussian, predict=predict_gaussian, monotone=True))
GAMMA = register(Calibrator(name="gamma", fit=fit_gamma, predict=predict_gamma, monotone=True))
