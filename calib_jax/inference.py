r"""Statistical inference on calibration: tests with p-values, exact intervals for a click rate.

"Is this model miscalibrated, and how sure are we?" Each test states its null hypothesis
and its reference distribution; each returns a ``NamedTuple`` of arrays, so every test is
jit- and vmap-able (the resampling test takes a PRNG key).

* :func:`spiegelhalter_z` — Spiegelhalter's Z, from the Brier score (normal).
* :func:`hosmer_lemeshow` — Hosmer–Lemeshow's Ĉ on equal-mass risk groups (chi-square with
  the degrees of freedom stated).
* :func:`cox_calibration` — Cox's logistic recalibration, intercept and slope, with the
  likelihood-ratio test of (0, 1) (chi-square, 2 df).
* :func:`corp_test` — a resampling test with CORP's miscalibration MCB as the statistic.
* :func:`binomial_interval` — Clopper–Pearson or Jeffreys intervals for a rate, per bin of a
  reliability diagram: exact where bootstrap bands collapse (a bin whose labels are all 0).

Weights are frequency weights, as everywhere in calib_jax (:mod:`calib_jax.bootstrap`): a row
of integer weight ``w`` is ``w`` copies of the row, each an independent Bernoulli outcome
under the null, so every statistic equals the one of the duplicated rows (tested against
probcal on duplicated rows). For survey or importance weights, whose null variances involve
:math:`\sum v_i^2`, use a package built for them (e.g. probcal's Rao–Scott corrected tests).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from calib_jax._src import validation as V
from calib_jax._src.eager import compiled
from calib_jax._src.host_stats import beta_parameters, binomial_ends
from calib_jax._src.metric_inputs import check_eps, clip_probs
from calib_jax._src.pav import isotonic_fit_values
from calib_jax.groupstats import segment_sums
from calib_jax.partitions import quantile_bins

__all__ = [
    "SpiegelhalterResult",
    "HosmerLemeshowResult",
    "CoxResult",
    "CORPTestResult",
    "BinomialInterval",
    "spiegelhalter_z",
    "hosmer_lemeshow",
    "cox_calibration",
    "corp_test",
    "binomial_interval",
]


class SpiegelhalterResult(NamedTuple):
    r"""``z`` (standard normal under calibration) and its two-sided ``p_value``.

    Returned by :func:`spiegelhalter_z`.

    Attributes:
      z: 0-d array, Spiegelhalter's Z (positive when the Brier score exceeds its expectation
        under calibration).
      p_value: 0-d array, :math:`2\,(1 - \Phi(|z|))`.
    """

    z: jax.Array
    p_value: jax.Array


class HosmerLemeshowResult(NamedTuple):
    r"""Ĉ, its degrees of freedom (non-empty groups − ``ddof``) and the chi-square p-value.

    Returned by :func:`hosmer_lemeshow`.

    Attributes:
      statistic: 0-d array, the Hosmer–Lemeshow Ĉ (>= 0).
      df: 0-d float array, the degrees of freedom: non-empty groups minus ``ddof``.
      p_value: 0-d array, the chi-square upper tail of ``statistic`` at ``df`` (``df > 0``:
        :func:`hosmer_lemeshow` refuses a ``ddof`` that leaves none).
    """

    statistic: jax.Array
    df: jax.Array
    p_value: jax.Array


class CoxResult(NamedTuple):
    """Cox's recalibration :math:`\\mathrm{logit}\\,P(y=1) = a + b\\,\\mathrm{logit}(p)`.

    Attributes:
      intercept, slope: the maximum-likelihood ``a`` and ``b`` (calibrated: 0 and 1; a slope
        below 1 means over-confident scores).
      in_the_large: the intercept with the slope fixed at 1 (calibration in the large, on the
        log-odds scale; > 0 means under-prediction).
      statistic: the likelihood-ratio statistic of ``(a, b) = (0, 1)``.
      p_value: its chi-square (2 df) p-value.
      converged: whether Newton's method reached a gradient below tolerance.
    """

    intercept: jax.Array
    slope: jax.Array
    in_the_large: jax.Array
    statistic: jax.Array
    p_value: jax.Array
    converged: jax.Array


class CORPTestResult(NamedTuple):
    r"""CORP's ``mcb`` on the data and the resampling ``p_value`` from ``n_resamples`` draws.

    Returned by :func:`corp_test`.

    Attributes:
      mcb: 0-d array, CORP's Brier miscalibration of the forecasts on the data (>= 0).
      p_value: 0-d array, :math:`(1 + \#\{b : \mathrm{MCB}^*_b \ge \mathrm{MCB}\})/(1 + B)`,
        in ``[1/(1+B), 1]``.
    """

    mcb: jax.Array
    p_value: jax.Array


class BinomialInterval(NamedTuple):
    """``lo`` and ``hi`` of a rate's interval (arrays of the shape of ``k``).

    Returned by :func:`binomial_interval`.

    Attributes:
      lo: lower ends in [0, 1], of the broadcast shape of ``k`` and ``n``.
      hi: upper ends in [0, 1], same shape (``lo <= hi``).
    """

    lo: jax.Array
    hi: jax.Array


def _sample(probs, labels, weights):
    p, y, w = V.check_sample(probs, labels, weights, scores_kind="probs")
    return p, y, (jnp.ones_like(p) if w is None else w)


def spiegelhalter_z(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None
                    ) -> SpiegelhalterResult:
    r"""Spiegelhalter's Z test of calibration.

    .. math::

        Z = \frac{\sum_i v_i\,(y_i - p_i)(1 - 2p_i)}
                 {\sqrt{\sum_i v_i\,(1-2p_i)^2\,p_i(1-p_i)}}

    The numerator is the Brier score minus its expectation under :math:`y_i \sim
    \mathrm{Bernoulli}(p_i)`, the denominator its standard deviation; Z is asymptotically
    N(0, 1) under calibration (Spiegelhalter 1986, "Probabilistic prediction in patient
    management and clinical trials", Statistics in Medicine 5). The p-value is
    two-sided. Errors of opposite sign in different score regions can cancel: a small Z is
    not a proof of calibration.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) 0/1 labels.
      weights: optional (n,) frequency weights.

    Returns:
      :class:`SpiegelhalterResult`. When every ``p`` is 0, 1/2 or 1 the variance is 0 and
      the test is undefined: a ``ValueError`` (NaN under ``jit``).

    Example:
      >>> import numpy as np, calib_jax as cj
      >>> r = cj.inference.spiegelhalter_z(np.array([.1, .3, .8]), np.array([0., 1., 1.]))
      >>> round(float(r.z), 3)
      0.207
    """
    p, y, v = _sample(probs, labels, weights)
    num = jnp.sum(v * (y - p) * (1.0 - 2.0 * p))
    var = jnp.sum(v * (1.0 - 2.0 * p) ** 2 * p * (1.0 - p))
    V.check_condition(~(var > 0), "`probs` are all 0, 1/2 or 1: Spiegelhalter's Z has no variance")
    z = num / jnp.sqrt(jnp.where(var > 0, var, 1.0))
    return SpiegelhalterResult(z, 2.0 * jax.scipy.stats.norm.sf(jnp.abs(z)))


def hosmer_lemeshow(probs: jax.Array, labels: jax.Array, *, n_groups: int = 10, ddof: int = 0,
                    weights: jax.Array | None = None, groups: jax.Array | None = None
                    ) -> HosmerLemeshowResult:
    r"""The Hosmer–Lemeshow test on equal-mass risk groups.

    .. math::

        \hat C = \sum_{g:\,n_g>0} \frac{(O_g - E_g)^2}{n_g\,\bar p_g(1-\bar p_g)},\quad
        O_g = \sum_{i\in g} v_i y_i,\ E_g = \sum_{i\in g} v_i p_i = n_g\bar p_g,\
        n_g = \sum_{i\in g} v_i

    (Hosmer & Lemeshow 1980, "Goodness of fit tests for the multiple logistic regression
    model", Communications in Statistics A 9, the Ĉ statistic). Groups are the ``n_groups``
    equal-weight quantile groups of ``p`` (:func:`calib_jax.partitions.quantile_bins`; tied
    scores share a group, so some groups can be empty and are not counted). The reference
    distribution is :math:`\chi^2` with (non-empty groups − ``ddof``) degrees of freedom:
    ``ddof=0`` for scores fixed before seeing these labels (a model evaluated on a test log,
    the usual case here; Hosmer, Lemeshow & Sturdivant 2013, "Applied Logistic Regression"), ``ddof=2`` for a
    logistic model fitted on the same rows (the original setting). ``ddof=2`` on a test log
    rejects a calibrated model too often (measured: 11% at 5%, ``experiments/interval_coverage``).
    The chi-square approximation needs a few expected clicks per group (the usual rule: at
    least 5); with rarer events prefer :func:`corp_test`, whose null is drawn, not approximated.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) 0/1 labels.
      n_groups: number of risk groups G (static; default 10, the deciles of risk).
      ddof: degrees of freedom subtracted from the number of non-empty groups, a static int
        in ``[0, n_groups)``.
      weights: optional (n,) frequency weights.
      groups: optional (n,) group ids in ``[0, n_groups)`` to use instead of the quantiles.

    Returns:
      :class:`HosmerLemeshowResult`; a group whose :math:`\bar p_g` is 0 or 1 adds nothing when
      its labels agree with it (no click, or every row clicked), and makes the statistic
      :math:`+\infty` and the p-value 0 when they do not: labels its scores call impossible.
      Called eagerly, invalid input (NaN, a probability outside [0, 1], a label other than
      0/1, a negative weight, a group id outside ``[0, n_groups)``, a bad ``n_groups``, a
      negative ``ddof`` or one at or above ``n_groups`` or the number of non-empty
      groups: negative or zero degrees of freedom) raises ``ValueError`` naming the argument;
      under ``jit`` / ``vmap`` the same value checks make all three fields NaN (``n_groups``
      and ``ddof`` are static Python ints: their own checks raise while tracing).

    Example:
      >>> import numpy as np, calib_jax as cj
      >>> p = np.linspace(0.05, 0.95, 40); y = (np.arange(40) % 3 == 0).astype(float)
      >>> r = cj.inference.hosmer_lemeshow(p, y, n_groups=4)
      >>> int(r.df), round(float(r.statistic), 2)
      (4, 24.45)
    """
    p, y, v = _sample(probs, labels, weights)
    n_groups = V.check_positive_int(n_groups, "n_groups")
    if isinstance(ddof, bool) or not isinstance(ddof, int | np.integer):
        raise ValueError(f"`ddof` must be a Python int, got {type(ddof).__name__}")
    if ddof < 0:
        raise ValueError(f"`ddof` must be >= 0, got {ddof}")
    if ddof >= n_groups:
        raise ValueError(f"`ddof`={ddof} must be below `n_groups`={n_groups}: the chi-square would have "
                         f"{n_groups - ddof} degrees of freedom")
    g = (quantile_bins(p, n_bins=n_groups, weights=None if weights is None else v)
         if groups is None else V.check_hard_groups(groups, p.shape[0], n_groups))
    s = segment_sums(jnp.stack([v, v * (y - p), v * p, v * (1.0 - p)], axis=1), g, n_groups)
    n_g, gap, e, e_not = s[:, 0], s[:, 1], s[:, 2], s[:, 3]
    # O_g - E_g summed as sum v (y - p), and E_g (n_g - E_g) / n_g with n_g - E_g summed as
    # sum v (1 - p): both differences cancelled in float32 for scores near 1 (8.52 for 8.09 at
    # p = 1 - 1e-5, which the statistic of 1 - p and 1 - y gives)
    den = e * e_not / jnp.where(n_g > 0, n_g, 1.0)
    ok = (n_g > 0) & (den > 0)
    stat = jnp.sum(jnp.where(ok, gap**2 / jnp.where(ok, den, 1.0), 0.0))
    # a group whose scores are all 0 (or all 1) but whose labels are not: labels the scores call
    # impossible, so the statistic is infinite (it used to add nothing: p = 1 for p = 1 - y)
    impossible = jnp.any((n_g > 0) & ~(den > 0) & (gap != 0))  # every p 0 (or 1): y - p exact
    stat = jnp.where(impossible, jnp.inf, stat)
    df = (jnp.sum(n_g > 0) - int(ddof)).astype(p.dtype)
    V.check_condition(~(df > 0), f"`ddof`={int(ddof)} is at or above the number of non-empty groups (tied "
                                 "scores leave groups empty): the chi-square has no degrees of freedom")
    pv = jnp.where(df > 0, jax.scipy.stats.chi2.sf(stat, jnp.maximum(df, 1.0)), jnp.nan)
    return HosmerLemeshowResult(stat, df, pv)


def _loglik_gain(theta, z, y, v):
    """Σ v [ℓ(a + b z) − ℓ(z)]: the log-likelihood over the null, summed term by term so that
    float32 does not cancel two large totals."""
    eta = theta[0] + theta[1] * z
    return jnp.sum(v * (y * (eta - z) - (jax.nn.softplus(eta) - jax.nn.softplus(z))))


@functools.partial(jax.jit, static_argnames=("n_iter",))
def _cox_fit(z, y, v, *, n_iter: int):
    X = jnp.stack([jnp.ones_like(z), z], axis=1)
    scale = jnp.sum(v)

    def newton(theta, _):
        eta = X @ theta
        q = jax.nn.sigmoid(eta)
        grad = X.T @ (v * (y - q))
        hess = (X * (v * q * (1.0 - q))[:, None]).T @ X + 1e-9 * scale * jnp.eye(2, dtype=z.dtype)
        step = jnp.linalg.solve(hess, grad)
        # keep the step only if it does not lower the (concave) likelihood: Newton on the
        # logistic likelihood can overshoot far from the optimum
        new = theta + step
        up = _loglik_gain(new, z, y, v) >= _loglik_gain(theta, z, y, v)
        return jnp.where(up, new, theta + 0.5 * step), None

    theta0 = jnp.array([0.0, 1.0], z.dtype)
    theta, _ = jax.lax.scan(newton, theta0, None, length=n_iter)
    q = jax.nn.sigmoid(X @ theta)
    grad = X.T @ (v * (y - q))
    # labels the score separates (every click at or above every non-click, or below) have no
    # maximum-likelihood fit: the gradient fades as the slope grows without bound (slope 45.9,
    # "converged", for p = (.3, .4, .6, .7) and y = (0, 0, 1, 1))
    live = v > 0
    top0 = jnp.max(jnp.where(live & (y == 0), z, -jnp.inf))
    low1 = jnp.min(jnp.where(live & (y == 1), z, jnp.inf))
    top1 = jnp.max(jnp.where(live & (y == 1), z, -jnp.inf))
    low0 = jnp.min(jnp.where(live & (y == 0), z, jnp.inf))
    separated = (top0 <= low1) | (top1 <= low0)
    converged = (jnp.max(jnp.abs(grad)) <= 1e-3 * jnp.maximum(scale, 1.0) ** 0.5) & ~separated

    def newton1(a, _):
        q1 = jax.nn.sigmoid(a + z)
        return a + jnp.sum(v * (y - q1)) / jnp.maximum(jnp.sum(v * q1 * (1.0 - q1)), 1e-30), None

    a1, _ = jax.lax.scan(newton1, jnp.zeros((), z.dtype), None, length=n_iter)
    return theta, a1, converged


def cox_calibration(probs: jax.Array, labels: jax.Array, *, weights: jax.Array | None = None,
                    n_iter: int = 30, eps: float | None = None) -> CoxResult:
    r"""Cox's calibration intercept and slope, and their likelihood-ratio test.

    Fit the logistic recalibration :math:`P(y=1\mid p) = \sigma(a + b\,z)`,
    :math:`z = \mathrm{logit}(p)`, by maximum likelihood; a calibrated model has
    :math:`(a, b) = (0, 1)` (Cox 1958, "Two further applications of a model for binary
    regression", Biometrika 45). The test statistic is

    .. math::

        \Lambda = 2\sum_i v_i\Big[y_i(\hat a + \hat b z_i - z_i)
            - \log\frac{1+e^{\hat a + \hat b z_i}}{1 + e^{z_i}}\Big]
            \;\sim\; \chi^2_2 \text{ under calibration,}

    and ``in_the_large`` is the intercept of the fit with the slope fixed at 1 (offset
    :math:`z`).

    Args:
      probs: (n,) predicted probabilities, clipped to ``[eps, 1 - eps]`` before the logit.
      labels: (n,) 0/1 labels with both classes present.
      weights: optional (n,) frequency weights.
      n_iter: Newton iterations (static), each halved when it would lower the likelihood;
        ``converged`` reports whether the gradient vanished at a maximum. Labels the score
        separates (every click at or above every non-click, or the reverse) have none: the
        slope grows without bound, and ``converged`` is False (the statistic is at its limit,
        the intercept and slope are where the iterations stopped).
      eps: the clip, a number in (0, 1/2) (default 1e-7 in float32, 1e-12 in float64);
        another value raises ``ValueError`` naming ``eps``.

    Returns:
      :class:`CoxResult`. One class only (the fit diverges) or a single score value (the
      slope is not identifiable, e.g. a constant baseline model): ``ValueError`` (NaN under
      ``jit``).

    Example:
      >>> import numpy as np, calib_jax as cj
      >>> rng = np.random.default_rng(0); z = rng.normal(-1, 1, 20000)
      >>> y = (rng.random(20000) < 1 / (1 + np.exp(-0.5 * z))).astype(float)
      >>> r = cj.inference.cox_calibration(1 / (1 + np.exp(-z)), y)
      >>> round(float(r.slope), 1), bool(r.p_value < 1e-6)
      (0.5, True)
    """
    p, y, v = _sample(probs, labels, weights)
    sy, sw = jnp.sum(v * y), jnp.sum(v)
    V.check_condition((sy <= 0) | (sy >= sw), "`labels` contains a single class: Cox's recalibration diverges")
    pc = clip_probs(p, check_eps(eps))
    z = jnp.log(pc) - jnp.log1p(-pc)
    pos = v > 0
    V.check_condition(~(jnp.max(jnp.where(pos, z, -jnp.inf)) > jnp.min(jnp.where(pos, z, jnp.inf))),
                      "`probs` take a single value (on the rows of positive weight): Cox's slope is not "
                      "identifiable")
    theta, a1, converged = _cox_fit(z, y, v, n_iter=V.check_positive_int(n_iter, "n_iter"))
    stat = 2.0 * jnp.maximum(_loglik_gain(theta, z, y, v), 0.0)
    return CoxResult(theta[0], theta[1], a1, stat, jax.scipy.stats.chi2.sf(stat, 2.0), converged)


def _mcb(p, ybar, v):
    """CORP's Brier miscalibration on rows with rates ``ybar`` (fractional labels allowed):
    mean (ybar − p)² − mean (ybar − PAV)²; the rows' within-row variance cancels."""
    pc = isotonic_fit_values(p, ybar, v)
    return jnp.sum(v * ((ybar - p) ** 2 - (ybar - pc) ** 2)) / jnp.sum(v)


@functools.partial(jax.jit, static_argnames=("n_resamples",))
def _corp_null(key, p, v, *, n_resamples):
    keys = jax.random.split(key, n_resamples)

    def one(k):
        clicks = jax.random.binomial(k, v, p)
        return _mcb(p, clicks / jnp.where(v > 0, v, 1.0), v)

    return jax.lax.map(one, keys, batch_size=min(n_resamples, 32))


#: :func:`corp_test` counts a null statistic within this many float32 steps of the Brier score
#: (of which the miscalibration is a difference) as a tie with the observed one
CORP_TIE_ULPS = 32


def corp_test(probs: jax.Array, labels: jax.Array, *, key: jax.Array, n_resamples: int = 1000,
              weights: jax.Array | None = None) -> CORPTestResult:
    r"""A resampling test of calibration with CORP's miscalibration as the statistic.

    The statistic is the Brier miscalibration of the CORP decomposition,
    :math:`\mathrm{MCB} = \bar S(p, y) - \bar S(\hat p^{\,c}, y)` with :math:`\hat p^{\,c}` the
    isotonic (PAV) recalibration of y on p (Dimitriadis, Gneiting & Jordan 2021, "Stable
    reliability diagrams for probabilistic classifiers", PNAS 118;
    :func:`calib_jax.decompositions.corp`). Its null distribution is drawn as that paper
    draws its consistency bands: outcomes redrawn from the forecasts themselves,
    :math:`y^*_i \sim \mathrm{Bernoulli}(p_i)` (a row of weight :math:`v_i` gets
    :math:`\mathrm{Binomial}(v_i, p_i)` clicks), and

    .. math:: \text{p-value} = \frac{1 + \#\{b : \mathrm{MCB}^*_b \ge \mathrm{MCB}\}}{1 + B}.

    A null statistic within :data:`CORP_TIE_ULPS` float32 steps of the Brier score
    :math:`\bar S(p, y)` below MCB counts as a tie (so as :math:`\ge`): a resample that redraws
    the observed labels has the observed MCB, computed in another order.

    Unlike Spiegelhalter's Z and Cox's test it has power against any non-monotone-in-p
    miscalibration, with no binning.

    Args:
      probs: (n,) predicted probabilities in [0, 1].
      labels: (n,) 0/1 labels.
      key: PRNG key of the null draws (resample b uses ``jax.random.split(key, B)[b]``): one
        ``jax.random.key`` (or a legacy ``jax.random.PRNGKey``); anything else (a seed, a float
        array, a batch of keys) raises ``ValueError`` naming ``key``, also under ``jit`` (the
        key's type is static).
      n_resamples: B (static).
      weights: optional (n,) integer frequency weights.

    Returns:
      :class:`CORPTestResult`. Called eagerly, invalid input (NaN, a probability outside
      [0, 1], a label other than 0/1, a negative or non-integer weight, a bad
      ``n_resamples``) raises ``ValueError`` naming the argument; under ``jit`` / ``vmap``
      the same value checks make both fields NaN. ``n_resamples`` is static; ``key`` may be
      traced (e.g. ``vmap`` over keys).

    Example:
      >>> import jax, numpy as np, calib_jax as cj
      >>> rng = np.random.default_rng(1); p = rng.uniform(0.05, 0.5, 2000)
      >>> y = (rng.random(2000) < p ** 1.5).astype(float)  # over-predicted
      >>> r = cj.inference.corp_test(p, y, key=jax.random.key(0), n_resamples=200)
      >>> float(r.p_value) < 0.01
      True
    """
    p, y, v = _sample(probs, labels, weights)
    B = V.check_positive_int(n_resamples, "n_resamples")
    key = V.check_key(key)
    if weights is not None:
        V.check_condition(~jnp.all(v == jnp.round(v)),
                          "`weights` of corp_test are frequency weights and must be integers")
    stat = _mcb(p, y, v)
    null = _corp_null(key, p, v, n_resamples=B)
    # a resample that redraws the observed labels has the observed MCB, but computed by another
    # program (the null's batched map) its float32 rounding differs: a tie is a null value within
    # CORP_TIE_ULPS float32 steps of the Brier score that MCB is a difference of (at most that
    # score), where 1e-12 of MCB, below one float32 step, made the p-value depend on how the
    # input was passed (36/51 for a list, 35/51 for a float32 array)
    brier = jnp.sum(v * (y - p) ** 2) / jnp.sum(v)
    tie = CORP_TIE_ULPS * jnp.finfo(stat.dtype).eps * brier
    pv = (1.0 + jnp.sum(null >= stat - tie)) / (1.0 + B)
    return CORPTestResult(stat, pv)


# ---------------------------------------------------------------------------- binomial intervals
#: float32 device path: ``a + b`` up to this uses jax.scipy.special.betainc; above it
#: Temme's uniform asymptotic expansion, or the gamma limit where a or b is below 1
_F32_BETAINC_MAX = 2000.0


def _round_outward(x: np.ndarray, dtype: Any, up: bool) -> np.ndarray:
    """``x`` in ``dtype``, rounded down (``up=False``) or up, so that the stored interval
    contains the float64 one."""
    r = np.asarray(x.astype(dtype))
    off = (r < x) if up else (r > x)
    return np.where(off, np.nextafter(r, np.asarray(np.inf if up else -np.inf, dtype)), r).astype(dtype)


def _bits_bisect(root_above, lo: jax.Array, hi: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:func:`_bits_bisect_np` traced (32 steps in float32, 64 in float64)."""
    wide = lo.dtype == jnp.float64
    itype, steps = (jnp.int64, 64) if wide else (jnp.int32, 32)

    def step(carry, _):
        ilo, ihi = carry
        imid = ilo + (ihi - ilo) // 2
        up = root_above(jax.lax.bitcast_convert_type(imid, lo.dtype))
        return (jnp.where(up, imid, ilo), jnp.where(up, ihi, imid)), None

    start = (jax.lax.bitcast_convert_type(lo, itype), jax.lax.bitcast_convert_type(hi, itype))
    (ilo, ihi), _ = jax.lax.scan(step, start, None, length=steps)
    return jax.lax.bitcast_convert_type(ilo, lo.dtype), jax.lax.bitcast_convert_type(ihi, lo.dtype)


def _log1p_minus_x(u):
    """``log(1 + u) - u`` without cancellation: its series for ``|u| < 1/4`` (18 terms)."""
    small = jnp.abs(u) < 0.25
    us = jnp.where(small, u, 0.0)
    s = jnp.zeros_like(u)
    for j in range(19, 1, -1):  # sum_{j>=2} (-1)^(j+1) u^j / j = u^2 * (-1/2 + u/3 - u^2/4 + ...)
        s = s * us + (1.0 if j % 2 else -1.0) / j
    return jnp.where(small, s * us * us, jnp.log1p(jnp.maximum(u, -1.0)) - u)


def _tails_f32(x, a, b):
    """``(I_x(a, b), 1 - I_x(a, b))`` in float32 (both small tails without cancellation).

    ``a + b <= 2000``: ``jax.scipy.special.betainc``. Above, where float32's log-gamma of the
    normalising constant loses the tail: the gamma limit ``I_x(a, b) ~ P(a, x (b + (a-1)/2))``
    where ``a < 1`` (mirrored where ``b < 1``), else the uniform asymptotic expansion in
    ``eta`` with its first coefficient ``c0`` (DLMF 8.18.9-8.18.12; Temme 1996, "Special
    Functions: An Introduction to the Classical Functions of Mathematical Physics", §11.3.3).
    """
    from jax.scipy import special as jsp

    r = a + b
    small = r <= _F32_BETAINC_MAX
    gam_a = ~small & (a < 1.0)
    gam_b = ~small & ~gam_a & (b < 1.0)
    # the incomplete beta itself (small counts); the upper tail from the mirrored function
    p_beta = jsp.betainc(a, b, x)
    q_beta = jsp.betainc(b, a, 1.0 - x)
    # gamma limits (one parameter below 1, the other large)
    ya = x * (b + 0.5 * (a - 1.0))
    yb = (1.0 - x) * (a + 0.5 * (b - 1.0))
    sa, sb = jnp.where(gam_a, a, 1.0), jnp.where(gam_b, b, 1.0)
    p_gam_a, q_gam_a = jsp.gammainc(sa, ya), jsp.gammaincc(sa, ya)
    p_gam_b, q_gam_b = jsp.gammaincc(sb, yb), jsp.gammainc(sb, yb)
    # Temme: -eta^2/2 = x0 log(x/x0) + y0 log((1-x)/y0), y0 = 1 - x0 = b/(a+b), eta of the sign
    # of x - x0; the offset from the mean is taken on the side of the smaller of x0 and y0
    # (x - x0, or y0 - (1 - x) where x0 > 1/2), so float32 does not lose it to 1 - x0
    x0, y0 = a / r, b / r
    t = jnp.where(x0 <= 0.5, x - x0, y0 - (1.0 - x))
    h = x0 * _log1p_minus_x(t / x0) + y0 * _log1p_minus_x(-t / y0)
    eta = jnp.sign(t) * jnp.sqrt(jnp.maximum(-2.0 * h, 0.0))
    sd = jnp.sqrt(x0 * y0)
    moved = jnp.abs(eta) > 1e-12
    c0 = jnp.where(moved, 1.0 / jnp.where(moved, eta, 1.0) - sd / jnp.where(moved, t, 1.0),
                   (y0 - x0) / (3.0 * sd))
    corr = jnp.exp(r * h) / jnp.sqrt(2.0 * jnp.pi * r) * c0
    p_tem = 0.5 * jsp.erfc(-eta * jnp.sqrt(0.5 * r)) + corr
    q_tem = 0.5 * jsp.erfc(eta * jnp.sqrt(0.5 * r)) - corr
    p = jnp.where(small, p_beta, jnp.where(gam_a, p_gam_a, jnp.where(gam_b, p_gam_b, p_tem)))
    q = jnp.where(small, q_beta, jnp.where(gam_a, q_gam_a, jnp.where(gam_b, q_gam_b, q_tem)))
    return p, q


def _tails(x, a, b):
    """``(I_x(a, b), 1 - I_x(a, b))``: float64 ``betainc``, or :func:`_tails_f32`."""
    if x.dtype == jnp.float64:
        return jax.scipy.special.betainc(a, b, x), jax.scipy.special.betainc(b, a, 1.0 - x)
    return _tails_f32(x, a, b)


@functools.partial(jax.jit, static_argnames=("level", "method"))
def _binomial_interval(k, n, *, level, method):
    half = (1.0 - level) / 2.0
    k, n = jnp.broadcast_arrays(k, n)
    valid = jnp.isfinite(k) & jnp.isfinite(n) & (k >= 0) & (k <= n)
    has_lo, has_hi = valid & (k > 0), valid & (k < n)
    phat = jnp.where(valid & (n > 0), k / jnp.where(n > 0, n, 1.0), 0.0)
    (al, bl), (ah, bh) = beta_parameters(k, n, method)
    al, bl = jnp.where(has_lo, al, 1.0), jnp.where(has_lo, bl, 1.0)
    ah, bh = jnp.where(has_hi, ah, 1.0), jnp.where(has_hi, bh, 1.0)
    zero, one = jnp.zeros_like(phat), jnp.ones_like(phat)
    lo = _bits_bisect(lambda x: _tails(x, al, bl)[0] < half, zero, phat)[0]
    hi = _bits_bisect(lambda x: _tails(x, ah, bh)[1] > half, phat, one)[1]
    lo, hi = jnp.where(has_lo, lo, 0.0), jnp.where(has_hi, hi, 1.0)
    poison = jnp.where(jnp.all(valid), 1.0, jnp.nan).astype(lo.dtype)
    return BinomialInterval(lo * poison, hi * poison)


def binomial_interval(k: ArrayLike, n: ArrayLike, *, level: float = 0.95,
                      method: str = "clopper-pearson") -> BinomialInterval:
    r"""Exact interval for a rate from ``k`` successes in ``n`` trials (elementwise).

    * ``"clopper-pearson"`` (Clopper & Pearson 1934, "The use of confidence or fiducial limits
      illustrated in the case of the binomial", Biometrika 26):
      :math:`[B_{\alpha/2}(k, n-k+1),\ B_{1-\alpha/2}(k+1, n-k)]`, with :math:`B_q(a, b)`
      the q-quantile of Beta(a, b), 0 at k = 0 and 1 at k = n. Coverage is at least
      ``level`` for every rate.
    * ``"jeffreys"``: the quantiles of Beta(k + ½, n − k + ½), with the same ends at
      k = 0 and k = n (Brown, Cai & DasGupta 2001, "Interval estimation for a binomial
      proportion", Statistical Science 16): shorter, coverage close to ``level`` on
      average.

    Both stay informative where bootstrap bands collapse: a reliability bin of 40 rows and no
    click gets [0, 0.088] (Clopper–Pearson), not [0, 0]. Non-integer ``k`` and ``n`` (weighted
    counts) are allowed; the interval is then that of the Beta quantiles at those values.
    Every interval satisfies ``0 <= lo <= k/n <= hi <= 1`` (for Jeffreys at a ``level``
    below about 1/2, where the posterior quantiles can both lie on one side of k/n, the
    nearer end is moved to k/n).

    Precision. Each end is the root of the Beta tail probability
    :math:`I_x(a, b) = \alpha/2` (lower end) or :math:`1 - I_x(a, b) = \alpha/2` (upper end):

    * Concrete inputs (an eager call): float64 on the host. SciPy's quantile
      (``scipy.special.betaincinv`` / ``betainccinv``) is checked against its own tail
      probability and, where it is off by more than 1e-8 relatively (SciPy returns an
      inverted interval for k = 1000, n = 10^9), replaced by a bisection on the tail
      probability to the last float64 bit. The result is then rounded outward to the
      result dtype (float32 unless x64 is enabled), so the returned interval contains the
      float64 one. Tested against SciPy's Beta quantiles for k and n up to 10^9: within
      1e-6 of the interval's width.
    * Under ``jit`` / ``vmap`` with x64 enabled: a bisection over the float64 bit patterns
      of ``jax.scipy.special.betainc``; within 1e-5 of the interval's width of SciPy's
      ends for counts up to 10^9 (tested).
    * Under ``jit`` without x64: float32 throughout. ``k`` and ``n`` above 2^24 are
      themselves rounded to float32; ``a + b <= 2000`` uses float32 ``betainc``, larger
      counts Temme's uniform asymptotic expansion (Temme 1996, "Special Functions: An
      Introduction to the Classical Functions of Mathematical Physics", §11.3.3; DLMF
      8.18.9) or its gamma limit, because float32 ``betainc`` loses the tails there (its
      intervals were inverted at 10^8 trials). The ends are within 1% of the interval's
      width of SciPy's, or within a few float32 ulps of the end where the width is below
      float32's resolution (a rate near 1 at 10^9 trials). ``lo <= k/n <= hi`` and the
      clipping to [0, 1] hold exactly in every case.

    Args:
      k: successes (any shape), ``0 <= k <= n``.
      n: trials, broadcastable with ``k``; ``n = 0`` gives [0, 1].
      level: coverage in (0, 1).
      method: ``"clopper-pearson"`` or ``"jeffreys"``.

    Returns:
      :class:`BinomialInterval` of the broadcast shape. Called eagerly, a NaN or infinite
      ``k`` or ``n``, ``n < 0``, ``k < 0`` or ``k > n`` raises ``ValueError`` naming the
      argument; under ``jit`` / ``vmap`` the same checks make both fields NaN (every
      element, as the other checked functions do).

    Example:
      >>> import calib_jax as cj
      >>> r = cj.inference.binomial_interval(0, 40)
      >>> round(float(r.lo), 3), round(float(r.hi), 3)
      (0.0, 0.088)
      >>> r = cj.inference.binomial_interval(5 * 10**8, 10**9)  # exact at 10^9 trials
      >>> round(float(r.lo), 6), round(float(r.hi), 6)
      (0.499969, 0.500031)
    """
    method = V.check_choice(method, "method", ("clopper-pearson", "jeffreys"))
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must lie in (0, 1), got {level!r}")
    if not (V.is_concrete(k) and V.is_concrete(n)):
        kk = jnp.asarray(k, jnp.result_type(float))
        return _binomial_interval(kk, jnp.asarray(n, kk.dtype), level=float(level), method=method)
    a_k = np.asarray(jax.device_get(k), np.float64)
    a_n = np.asarray(jax.device_get(n), np.float64)
    for name, v in (("k", a_k), ("n", a_n)):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"`{name}` contains {int(np.sum(~np.isfinite(v)))} NaN/inf value(s)")
    try:
        np.broadcast_shapes(a_k.shape, a_n.shape)
    except ValueError:
        raise ValueError(f"`k` of shape {a_k.shape} and `n` of shape {a_n.shape} do not broadcast together") from None
    if np.any(a_n < 0):
        raise ValueError(f"`n` must be >= 0, got minimum {float(np.min(a_n)):.6g}")
    if np.any(a_k < 0) or np.any(a_k > a_n):
        raise ValueError("`k` must satisfy 0 <= k <= n")
    lo, hi = binomial_ends(a_k, a_n, float(level), method)
    dtype = jnp.result_type(float)
    return BinomialInterval(jnp.asarray(_round_outward(lo, dtype, up=False)),
                            jnp.asarray(_round_outward(hi, dtype, up=True)))


spiegelhalter_z = compiled(spiegelhalter_z)
hosmer_lemeshow = compiled(hosmer_lemeshow)
cox_calibration = compiled(cox_calibration)
corp_test = compiled(corp_test)
