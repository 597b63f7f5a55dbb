r"""Variance-adjusting debiasing (VAD) of Fan, Si and Zhang, "Calibration Matters" (ICLR 2023;
full reference in docs/references.bib).

**Maximization bias.** A recommender shows the items it scores highest. Even when every
prediction is unbiased, :math:`\mathbb E[\hat s_i] = s_i`, the predictions of the *selected*
items are biased upwards: selection by :math:`\hat s = s + \varepsilon` favours items whose
estimation noise :math:`\varepsilon` happened to be positive, so the top-N lists of a
calibrated model are over-predicted. The bias grows with the noise variance relative to the
spread of the predictions, and with a covariate shift between the data the model was fitted on
and the data it ranks.

**VAD** (the meta-algorithm of the paper's Fig. 1) removes it by regressing every prediction
towards the mean, in logit space, by the share of its variance that is signal: with
:math:`\hat s_i` the (calibrated) logit of row :math:`i` of the target data,

.. math:: \tilde s_i = \lambda\,\hat s_i + (1 - \lambda)\,\bar s, \qquad
          \lambda = 1 - \frac{\hat\sigma^2_\varepsilon}{\hat\sigma^2_{\hat s}},

where :math:`\bar s` is the mean logit over the target rows, :math:`\hat\sigma^2_{\hat s}` the
variance of the deployed model's logits over them and :math:`\hat\sigma^2_\varepsilon` the
variance of a prediction across re-estimates of the model (the paper obtains these by
bootstrapping the training data or by retraining). Under a Gaussian model of signal and noise
this is the conditional mean :math:`\mathbb E[s \mid \hat s]`, which selection by :math:`\hat s`
cannot bias; for :math:`0 < \lambda \le 1` it is increasing, so the ranking is unchanged, and it is
one affine map of the logit, so it costs nothing at serving time.

**The estimator** is that of the authors' reference code (github.com/tofuwen/VAD,
``VAD_util.py``: ``calculate_lambda`` and ``prediction_transformation``). From the logits
:math:`P_{ik}` of :math:`K \ge 2` replicate models on :math:`n` target rows, the noise variance is
the residual variance of the additive two-way layout (row effects: the items; column effects:
a replicate's overall offset, which moves every prediction alike and does not change a ranking),

.. math:: \hat\sigma^2_\varepsilon = \frac{K}{K - 1}\,\frac{1}{nK}\sum_{i,k}
          \big(P_{ik} - \bar P_{\cdot k} - \bar P_{i \cdot} + \bar P_{\cdot\cdot}\big)^2,

and :math:`\hat\sigma^2_{\hat s}` is the population variance (``ddof = 0``) of the deployed
model's logits on the same rows. When the deployed predictions were calibrated on held-in data
(a calibrator fitted on the validation split), the reference code divides by the factor of that
data, :math:`\lambda = \lambda_\text{target} / \lambda_\text{validation}`: the calibrator has already
shrunk its predictions as much as the validation data call for (``validation_replicates``).
The shrinkage can also be done on probabilities (``space="probability"``, the code's second
variant): :math:`\tilde p_i = \lambda \hat p_i + (1 - \lambda) \bar p` with :math:`\lambda` from
probabilities.

**Departures.** (1) :math:`\lambda` is clipped to :math:`[0, 1]` (the reference code does not
clip): a negative value, noise variance above the spread of the predictions (possible with few
replicates), would reverse the ranking, and 0 already means "the predictions are noise: predict
the mean". (2) A target sample whose logits do not vary gives :math:`\lambda = 1` (the map is the
identity there anyway), and a validation factor of 0 leaves the target factor undivided, so the
result is never NaN. (3) Probabilities of exactly 0 or 1 (an isotonic or histogram calibrator)
are clipped to :math:`[10^{-6}, 1 - 10^{-6}]` before their logit is taken. (4) The reference code
estimates the mean :math:`\bar s` on a held-out tenth of the target sample; here it is the mean over
``reference_probs`` (default: the rows being debiased).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from calib_jax._src.eager import compiled
from calib_jax._src.validation import (
    as_float_array,
    check_choice,
    check_condition,
    check_logits,
    check_probs,
    check_same_length,
)

__all__ = ["shrinkage_factor", "debias", "vad"]

_SPACES = ("logit", "probability")
#: probabilities are clipped to [EPS, 1 - EPS] before their logit is taken
EPS = 1e-6


def _replicates(x: Any, name: str) -> jax.Array:
    arr = as_float_array(x, name, ndim=2)
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` is empty")
    if arr.shape[1] < 2:
        raise ValueError(f"`{name}` must hold K >= 2 replicate columns (n, K), got shape {tuple(arr.shape)}")
    return arr


def _logit(p: jax.Array) -> jax.Array:
    q = jnp.clip(p, EPS, 1.0 - EPS)
    return jnp.log(q) - jnp.log1p(-q)


def _factor(P: jax.Array, s: jax.Array) -> jax.Array:
    """Fan et al.'s factor ``1 - noise / spread`` (reference code), clipped to [0, 1]."""
    k = P.shape[1]
    resid = P - jnp.mean(P, axis=0, keepdims=True) - jnp.mean(P, axis=1, keepdims=True) + jnp.mean(P)
    noise = jnp.mean(resid * resid) * (k / (k - 1))
    spread = jnp.mean((s - jnp.mean(s)) ** 2)
    lam = jnp.where(spread > 0, 1.0 - noise / jnp.where(spread > 0, spread, 1.0), 1.0)
    return jnp.clip(lam, 0.0, 1.0)


def _in_space(x: jax.Array, space: str) -> jax.Array:
    return x if space == "logit" else jax.nn.sigmoid(x)


def _checked_factor(replicates: Any, logits: Any, space: str, rep_name: str, name: str) -> jax.Array:
    P = _replicates(replicates, rep_name)
    s = check_logits(logits, name)
    check_same_length(P.shape[0], **{name: s})
    dtype = jnp.result_type(P.dtype, s.dtype)
    return _factor(_in_space(P.astype(dtype), space), _in_space(s.astype(dtype), space))


def shrinkage_factor(replicate_logits: Any, logits: Any, *, space: str = "logit") -> jax.Array:
    r"""VAD's shrinkage factor :math:`\lambda = 1 - \hat\sigma^2_\varepsilon / \hat\sigma^2_{\hat s}`
    (Fan, Si and Zhang, "Calibration Matters", ICLR 2023, the VAD algorithm of Fig. 1; the estimator of
    the authors' reference code, module docstring):

    .. math:: \hat\sigma^2_\varepsilon = \frac{1}{n (K - 1)}\sum_{i,k}
              (P_{ik} - \bar P_{\cdot k} - \bar P_{i\cdot} + \bar P_{\cdot\cdot})^2, \qquad
              \hat\sigma^2_{\hat s} = \frac1n \sum_i (\hat s_i - \bar s)^2,

    clipped to [0, 1] (1 when the logits do not vary).

    Args:
      replicate_logits: (n, K), ``K >= 2``: the logits of K re-estimated models (bootstrap
        resamples of the training data, or retrainings) on the n target rows; finite.
      logits: (n,) the deployed model's logits on the same rows; finite.
      space: ``"logit"`` (default) or ``"probability"`` (both arrays mapped by the sigmoid
        first).

    Returns:
      Scalar :math:`\lambda \in [0, 1]` in the inputs' float dtype. jit- and vmap-able
      (``space`` static). Called eagerly, NaN or inf values, a replicate array that is not 2-D
      with ``K >= 2`` columns, mismatched lengths or an unknown ``space`` raise ``ValueError``
      naming the argument; under ``jit`` the value checks make the result NaN instead.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators.vad import shrinkage_factor
      >>> s = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])            # spread: variance 2
      >>> noise = np.array([[0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [-0.5, 0.5], [0.0, 0.0]])
      >>> P = s[:, None] + noise                                 # two replicates around s
      >>> round(float(shrinkage_factor(P, s)), 4)   # noise: 2/1 * mean(noise**2) = 0.4; 1 - 0.4 / 2
      0.8
    """
    check_choice(space, "space", _SPACES)
    return _checked_factor(replicate_logits, logits, space, "replicate_logits", "logits")


shrinkage_factor = compiled(shrinkage_factor)


def debias(probs: Any, factor: Any, *, reference_probs: Any = None, space: str = "logit") -> jax.Array:
    r"""Shrink predictions towards their mean by VAD's factor (Fan, Si and Zhang, "Calibration
    Matters", ICLR 2023, Fig. 1; the reference code's ``prediction_transformation``):

    .. math:: \tilde p_i = \sigma\big(\lambda\,\operatorname{logit}\hat p_i
              + (1 - \lambda)\,\overline{\operatorname{logit}\hat p}\big) \quad\text{(logit space)},
              \qquad \tilde p_i = \lambda \hat p_i + (1 - \lambda)\,\bar{\hat p}
              \quad\text{(probability space)},

    with the mean over ``reference_probs`` (default ``probs``). For :math:`\lambda > 0` the map is
    increasing (the ranking is kept).

    Args:
      probs: (n,) the predictions to debias (e.g. a calibrator's probabilities on the target
        rows), in [0, 1]; clipped to :math:`[10^{-6}, 1 - 10^{-6}]` before a logit is taken.
      factor: scalar :math:`\lambda \ge 0`, finite (:func:`shrinkage_factor`).
      reference_probs: optional (m,) probabilities whose mean (of logits) is the centre
        :math:`\bar s` (the reference code uses a held-out part of the target sample).
      space: ``"logit"`` (default) or ``"probability"``.

    Returns:
      (n,) debiased probabilities in [0, 1], in the inputs' float dtype. jit- and vmap-able
      (``space`` static). Called eagerly, probabilities outside [0, 1] or NaN, a negative or
      non-finite ``factor`` or an unknown ``space`` raise ``ValueError`` naming the argument;
      under ``jit`` the value checks make the result NaN instead.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators.vad import debias
      >>> p = 1 / (1 + np.exp(-np.array([-2.0, 0.0, 2.0])))   # logits -2, 0, 2 (mean 0)
      >>> q = debias(p, 0.5)                                   # logits -1, 0, 1
      >>> [round(float(v), 4) for v in q]
      [0.2689, 0.5, 0.7311]
    """
    check_choice(space, "space", _SPACES)
    p = check_probs(probs, "probs")
    lam = as_float_array(factor, "factor", ndim=0)
    check_condition(lam < 0, "`factor` must be >= 0")
    return _debias(p, lam, reference_probs, space)


debias = compiled(debias)


def _debias(p: jax.Array, lam: jax.Array, reference_probs: Any, space: str) -> jax.Array:
    ref = p if reference_probs is None else check_probs(reference_probs, "reference_probs")
    dtype = jnp.result_type(p.dtype, ref.dtype, lam.dtype)
    p, ref, lam = p.astype(dtype), ref.astype(dtype), lam.astype(dtype)
    if space == "probability":
        return lam * p + (1.0 - lam) * jnp.mean(ref)
    return jax.nn.sigmoid(lam * _logit(p) + (1.0 - lam) * jnp.mean(_logit(ref)))


def vad(probs: Any, replicate_logits: Any, logits: Any, *, validation_replicates: Any = None,
        validation_logits: Any = None, reference_probs: Any = None, space: str = "logit") -> jax.Array:
    r"""Variance-adjusting debiasing of a recommender's (calibrated) predictions (Fan, Si and
    Zhang, "Calibration Matters", ICLR 2023, the VAD algorithm of Fig. 1, as in the authors'
    reference code):

    .. math:: \tilde p_i = \sigma\big(\lambda\,\operatorname{logit}\hat p_i
              + (1 - \lambda)\,\overline{\operatorname{logit}\hat p}\big), \qquad
              \lambda = \frac{\lambda_\text{target}}{\lambda_\text{validation}}, \quad
              \lambda_\bullet = 1 - \frac{\hat\sigma^2_\varepsilon}{\hat\sigma^2_{\hat s}}

    (:func:`shrinkage_factor` on the target rows, and on the calibration rows when
    ``validation_replicates`` are given, else :math:`\lambda_\text{validation} = 1`; then
    :func:`debias`). Apply it to every candidate row and take the top-N afterwards, or to the
    top-N rows only: the map is increasing, so the top-N are the same.

    Args:
      probs: (n,) the predictions to debias on the target rows (e.g. a calibrator's output).
      replicate_logits: (n, K), ``K >= 2``: the uncalibrated logits of K re-estimated models
        (bootstrap resamples or retrainings of the recommender) on the same rows.
      logits: (n,) the deployed recommender's uncalibrated logits on the same rows.
      validation_replicates: optional (m, K) replicate logits on the rows the calibrator was
        fitted on (with ``validation_logits``, (m,)): divides by their factor.
      validation_logits: optional (m,) the deployed model's logits on those rows.
      reference_probs: optional (r,) probabilities whose mean logit is the centre (default
        ``probs``).
      space: ``"logit"`` (default) or ``"probability"``.

    Returns:
      (n,) debiased probabilities in [0, 1] (never NaN). jit- and vmap-able (``space``
      static). Called eagerly, invalid input raises ``ValueError`` naming the argument (as
      :func:`shrinkage_factor` and :func:`debias`; one of the two validation arrays without the
      other too); under ``jit`` the value checks make the result NaN instead.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators.vad import vad
      >>> s = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
      >>> noise = np.array([[0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [-0.5, 0.5], [0.0, 0.0]])
      >>> p = 1 / (1 + np.exp(-s))                  # calibrated as they stand; lambda = 0.8
      >>> q = vad(p, s[:, None] + noise, s)          # logits 0.8 * s: the top item drops
      >>> round(float(p[-1]), 4), round(float(q[-1]), 4)
      (0.8808, 0.832)
    """
    check_choice(space, "space", _SPACES)
    if (validation_replicates is None) != (validation_logits is None):
        missing = "validation_logits" if validation_logits is None else "validation_replicates"
        raise ValueError(f"`{missing}` is required with the other validation argument")
    p = check_probs(probs, "probs")
    lam = _checked_factor(replicate_logits, logits, space, "replicate_logits", "logits")
    check_same_length(p.shape[0], logits=check_logits(logits, "logits"))
    if validation_replicates is not None:
        lam_val = _checked_factor(validation_replicates, validation_logits, space, "validation_replicates",
                                  "validation_logits")
        lam = jnp.where(lam_val > 0, lam / jnp.where(lam_val > 0, lam_val, 1.0), lam)
    return _debias(p, lam, reference_probs, space)


vad = compiled(vad)
