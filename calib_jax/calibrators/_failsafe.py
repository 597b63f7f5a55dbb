r"""Fail-safe fits: detect a calibration fit that the data cannot support, and fall back.

A calibrator fitted on too little signal must not silently make predictions worse than the
model it calibrates (issue seen on the Open Bandit sample: per-group Platt fits on groups
without clicks predicted 0.5% of the observed rate, and a Platt slope fitted on noise
reversed the ranking). Every parametric calibrator checks, after its fit:

* **events** — the minority class carries at least ``min_events`` effective rows
  (:math:`\min(\sum_i v_i y_i, \sum_i v_i (1-y_i)) \ge` ``min_events``; the
  "ten events per parameter" rule of logistic regression, Peduzzi et al. 1996);
* **convergence** — the parameters are finite and the gradient of the mean log loss at
  them is below ``GRAD_TOL`` in every coordinate;
* **ranking** — the fitted map is increasing in the logit (a slope :math:`\le 0`, or a flat
  map, would reverse or erase the backbone's ranking).

A failed check replaces the fit by a simpler one the data do support, and records why in the
params' ``fallback`` code:

* too few events — the smallest change consistent with the data (:func:`consistent_shift`):
  the identity when the model's mean rate lies inside the 95% Wilson interval of the
  observed rate, else the logit shift :math:`\sigma(z + b)` that moves the mean onto the
  nearer end of that interval (Platt, beta; temperature scaling has no shift and keeps the
  identity, as App. F of "Calibration is Grouping" (VR-SAG; anonymous authors, under review)
  does for empty groups);
* a flat or decreasing map, or no convergence, with enough events — the maximum-likelihood
  shift that matches the mean rate (Platt, beta) or the identity (temperature).

Eager calls on concrete data also emit a :class:`CalibrationFallbackWarning` that says why;
under ``jit``/``vmap`` (Monte Carlo trials) the same fallback happens through ``jnp.where``
and the code is the only record.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src.validation import is_concrete
from calib_jax.calibrators._common import fit_shift, weighted_mean

# frames of calib_jax and of JAX (its wrappers, when a fit is reached through them)
_INTERNAL = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
             os.path.dirname(os.path.abspath(jax.__file__)) + os.sep)

__all__ = [
    "OK",
    "TOO_FEW_EVENTS",
    "NOT_CONVERGED",
    "REVERSES_RANKING",
    "REASONS",
    "MIN_EVENTS",
    "GRAD_TOL",
    "CalibrationFallbackWarning",
    "minority_events",
    "enough_events",
    "wilson_interval",
    "consistent_shift",
    "first_failure",
    "warn_if_fallback",
]

OK, TOO_FEW_EVENTS, NOT_CONVERGED, REVERSES_RANKING = 0, 1, 2, 3
#: human-readable reason of each fallback code
REASONS = {
    OK: "fit accepted",
    TOO_FEW_EVENTS: "too few events (clicks or non-clicks) to fit it",
    NOT_CONVERGED: "the fit did not converge (non-finite parameters or a large gradient)",
    REVERSES_RANKING: "the fitted map is flat or decreasing in the logit (it would reverse or erase the ranking)",
}
#: default minimum effective count of the minority class
MIN_EVENTS = 10.0
#: largest accepted |gradient| of the mean log loss at the fitted parameters
GRAD_TOL = 1e-3


class CalibrationFallbackWarning(UserWarning):
    """A calibrator replaced a fit the data could not support by a simpler one.

    A ``UserWarning`` subclass, emitted only by eager calls on concrete data (under ``jit`` /
    ``vmap`` the fallback still happens and the params' ``fallback`` code is the only record).
    Its message names the calibrator, the reason (:data:`REASONS`) and what replaced the fit.
    Filter it like any warning, e.g. ``warnings.simplefilter("error", CalibrationFallbackWarning)``
    to make a fallback an error.

    Example:
      >>> import warnings
      >>> import jax.numpy as jnp
      >>> from calib_jax.calibrators import CalibrationFallbackWarning, temperature
      >>> z = jnp.array([-1.0, 0.0, 1.0, 2.0]); y = jnp.array([0.0, 1.0, 0.0, 1.0])
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     params = temperature.fit(z, y)          # 2 clicks: fewer than min_events = 10
      >>> [w.category is CalibrationFallbackWarning for w in caught]
      [True]
      >>> int(params.fallback), float(params.beta)  # code 1 (too few events): the identity, T = 1
      (1, 1.0)
    """


def minority_events(y: jax.Array, w: jax.Array) -> jax.Array:
    """Effective count of the minority class, :math:`\\min(\\sum v y, \\sum v (1 - y))`."""
    return jnp.minimum(jnp.sum(w * y), jnp.sum(w * (1.0 - y)))


def enough_events(y: jax.Array, w: jax.Array, min_events: jax.Array) -> jax.Array:
    """The events check: the minority class's effective count is at least ``min_events``
    (at least 1e-12, so ``min_events = 0`` still asks for both classes)."""
    return minority_events(y, w) >= jnp.maximum(min_events, 1e-12)


def wilson_interval(k: jax.Array, n: jax.Array, z: float = 1.959964) -> tuple[jax.Array, jax.Array]:
    r"""Wilson score interval of a rate with ``k`` events in ``n`` (effective) trials.

    .. math:: \frac{\hat p + \frac{z^2}{2n} \pm z\sqrt{\frac{\hat p(1-\hat p)}{n}
              + \frac{z^2}{4n^2}}}{1 + z^2/n}

    (Wilson 1927). Unlike the Wald or a bootstrap interval it stays informative at 0 or n
    events, the case the fail-safe meets.
    """
    n = jnp.maximum(n, 1e-12)
    p = k / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / den
    half = z * jnp.sqrt(jnp.maximum(p * (1.0 - p) / n + z * z / (4.0 * n * n), 0.0)) / den
    return jnp.clip(centre - half, 0.0, 1.0), jnp.clip(centre + half, 0.0, 1.0)


def consistent_shift(z: jax.Array, y: jax.Array, w: jax.Array) -> jax.Array:
    r"""The logit shift ``b`` of the smallest change consistent with the data: 0 when the
    model's weighted mean rate :math:`\bar\sigma(z)` lies in the Wilson interval of the
    observed rate, else the shift that moves it onto the nearer end of the interval."""
    lo, hi = wilson_interval(jnp.sum(w * y), jnp.sum(w))
    mean = weighted_mean(jax.nn.sigmoid(z), w)
    target = jnp.clip(mean, lo, hi)
    return jnp.where(target == mean, jnp.zeros((), z.dtype), fit_shift(z, jnp.full_like(z, target), w))


def first_failure(*checks: tuple[jax.Array, int]) -> jax.Array:
    """The code of the first failed check (``(ok, code)`` pairs in order), or :data:`OK`."""
    code = jnp.asarray(OK, jnp.int32)
    for ok, c in reversed(checks):
        code = jnp.where(ok, code, jnp.asarray(c, jnp.int32))
    return code


def caller_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by this function's caller that points at
    the first frame outside calib_jax (and JAX): the user's line, however deep the call went."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame = frame.f_back
        level += 1
    return level


def warn_if_fallback(name: str, code: jax.Array, *, fallback: str) -> None:
    """Warn (eager calls only) when ``code`` (a scalar or an array of codes, e.g. one per
    group) holds a fallback; ``fallback`` names what replaced the fit. The warning points at
    the user's call (:func:`caller_stacklevel`)."""
    if not is_concrete(code):
        return
    codes = np.asarray(jax.device_get(code)).ravel()
    bad = codes[codes != OK]
    if bad.size == 0:
        return
    reasons = sorted({REASONS.get(int(c), f"code {int(c)}") for c in bad})
    where = "" if codes.size == 1 else f" ({bad.size} of {codes.size} groups)"
    warnings.warn(f"{name}: {'; '.join(reasons)}{where}; fell back to {fallback}",
                  CalibrationFallbackWarning, stacklevel=caller_stacklevel())
