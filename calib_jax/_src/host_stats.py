"""Interval ends computed on the host in NumPy and SciPy (float64), free of JAX.

The public functions live in :mod:`calib_jax.bootstrap` (:func:`percentile_interval`,
:func:`bias_corrected_interval`) and :mod:`calib_jax.inference` (the host path of
:func:`binomial_interval`); they are defined here so that the ``calib-jax`` command's report,
which needs only these, does not load JAX.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["percentile_interval", "bias_corrected_interval", "beta_parameters", "binomial_ends"]

#: SciPy's inverse (Boost's ``ibeta_inv``) is kept where its tail probability is this close,
#: relatively, to the target; elsewhere the host bisects on the tail probability itself
#: (SciPy 1.17 returns 1.9e-06 for the 2.5% quantile of Beta(1000, 1e9), above its 97.5%
#: quantile, 1.06e-06)
_HOST_RTOL = 1e-8


def percentile_interval(replicates: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The ``(1-level)/2`` and ``(1+level)/2`` quantiles of ``replicates`` along axis 0.

    Quantiles use NumPy's default (linear interpolation between order statistics).

    Args:
      replicates: (B, ...) array-like of bootstrap replicates (B resamples first).
      level: coverage, a float in (0, 1).

    Returns:
      ``(lo, hi)``, two float64 NumPy arrays of shape ``replicates.shape[1:]`` (0-d for a
      (B,) input). Runs on the host (NumPy); not jit-able. A ``level`` outside (0, 1), or no
      replicates, raises ``ValueError``. A NaN among a column's replicates (a resample where
      the statistic is undefined) makes that column's ends NaN: it is not dropped, which would
      narrow the interval to the resamples where the statistic happens to exist.

    Example:
      >>> import numpy as np
      >>> from calib_jax.bootstrap import percentile_interval
      >>> lo, hi = percentile_interval(np.arange(101.0), level=0.9)  # the 5% and 95% points
      >>> round(float(lo), 4), round(float(hi), 4)
      (5.0, 95.0)
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1), got {level!r}")
    r = np.asarray(replicates, np.float64)
    if r.ndim == 0 or r.shape[0] == 0:
        raise ValueError(f"`replicates` must hold at least one resample along axis 0, got shape {r.shape}")
    return (np.quantile(r, (1.0 - level) / 2.0, axis=0),
            np.quantile(r, (1.0 + level) / 2.0, axis=0))


def beta_parameters(k: Any, n: Any, method: str) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """Beta parameters ``((a, b) of the lower end, (a, b) of the upper end)``, elementwise."""
    if method == "clopper-pearson":
        return (k, n - k + 1.0), (k + 1.0, n - k)
    return (k + 0.5, n - k + 0.5), (k + 0.5, n - k + 0.5)


def _bits_bisect_np(root_above, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bisection over float64 bit patterns (ordered as the values are, for x >= 0): after 64
    steps ``lo`` and ``hi`` are adjacent floats around the root of the monotone predicate
    ``root_above(x)`` (true while the root lies above x)."""
    ilo, ihi = lo.astype(np.float64).view(np.int64), hi.astype(np.float64).view(np.int64)
    for _ in range(64):
        imid = ilo + (ihi - ilo) // 2
        up = root_above(imid.view(np.float64))
        ilo, ihi = np.where(up, imid, ilo), np.where(up, ihi, imid)
    return ilo.view(np.float64), ihi.view(np.float64)


def binomial_ends(k: np.ndarray, n: np.ndarray, level: float, method: str) -> tuple[np.ndarray, np.ndarray]:
    """Float64 ends on the host: SciPy's Beta quantiles, each checked against its own tail
    probability (``betainc`` below, ``betaincc`` above) and bisected on it where the inverse
    is off; ``lo <= k/n <= hi``."""
    from scipy import special as sp

    half = (1.0 - level) / 2.0
    k, n = np.broadcast_arrays(np.asarray(k, np.float64), np.asarray(n, np.float64))
    phat = np.divide(k, n, out=np.zeros(k.shape), where=n > 0)
    (al, bl), (ah, bh) = beta_parameters(k, n, method)
    lo, hi = np.zeros(k.shape), np.ones(k.shape)
    want_lo, want_hi = (k > 0) & (n > 0), (k < n) & (n > 0)
    with np.errstate(all="ignore"):
        if want_lo.any():
            a, b, top = al[want_lo], bl[want_lo], phat[want_lo]
            x = np.clip(sp.betaincinv(a, b, half), 0.0, top)
            off = ~(np.abs(sp.betainc(a, b, x) - half) <= _HOST_RTOL * half)
            if off.any():
                ao, bo = a[off], b[off]
                x[off] = _bits_bisect_np(lambda m: sp.betainc(ao, bo, m) < half, np.zeros(ao.shape), top[off])[0]
            lo[want_lo] = x
        if want_hi.any():
            a, b, bottom = ah[want_hi], bh[want_hi], phat[want_hi]
            x = np.clip(sp.betainccinv(a, b, half), bottom, 1.0)
            off = ~(np.abs(sp.betaincc(a, b, x) - half) <= _HOST_RTOL * half)
            if off.any():
                ao, bo = a[off], b[off]
                x[off] = _bits_bisect_np(lambda m: sp.betaincc(ao, bo, m) > half, bottom[off], np.ones(ao.shape))[1]
            hi[want_hi] = x
    return lo, hi


def bias_corrected_interval(plug_in: Any, corrected: Any, corrected_replicates: Any, *,
                            level: float = 0.95, lower: float | None = 0.0
                            ) -> tuple[np.ndarray, np.ndarray]:
    r"""The interval of a bias-corrected estimate :math:`\tilde\theta` from its bootstrap
    replicates :math:`\tilde\theta^{*b}`: their percentile interval moved by the estimated bias,

    .. math:: \big[\tilde\theta^*_{(\alpha/2)} - (\hat\theta - \tilde\theta),\;
              \tilde\theta^*_{(1-\alpha/2)} - (\hat\theta - \tilde\theta)\big],

    clipped below at ``lower`` (0 for an error that cannot be negative). In the bootstrap world
    the plug-in :math:`\hat\theta` is the truth and :math:`\tilde\theta^*` is centred on it, so
    the interval is centred on :math:`\tilde\theta` and contains it whenever
    :math:`\hat\theta` lies between the replicates' quantiles. The plain percentile interval
    of a positively biased plug-in (ECE, LCCE) is centred above the estimate and can exclude
    it; measured coverage of both: ``experiments/interval_coverage.py``.

    Args:
      plug_in: the plug-in estimate :math:`\hat\theta` (scalar or array).
      corrected: the bias-corrected estimate :math:`\tilde\theta` (e.g. :func:`calib_jax.bootstrap.debiased_gap`).
      corrected_replicates: (B, ...) :math:`\tilde\theta^{*b}` on the bootstrap resamples.
      level: coverage, a float in (0, 1).
      lower: clip of both ends (``None``: no clip).

    Returns:
      ``(lo, hi)`` as float64 NumPy arrays of shape ``corrected_replicates.shape[1:]``
      (broadcast with ``plug_in`` and ``corrected``). Runs on the host (NumPy); not
      jit-able. A ``level`` outside (0, 1) raises ``ValueError``.

    Example:
      >>> import numpy as np
      >>> from calib_jax.bootstrap import bias_corrected_interval
      >>> reps = np.linspace(0.02, 0.06, 101)  # replicates of the corrected estimate
      >>> lo, hi = bias_corrected_interval(0.05, 0.03, reps)  # bias 0.02: [0.021, 0.059] - 0.02
      >>> round(float(lo), 4), round(float(hi), 4)
      (0.001, 0.039)
    """
    lo, hi = percentile_interval(corrected_replicates, level)
    shift = np.asarray(plug_in, np.float64) - np.asarray(corrected, np.float64)
    lo, hi = lo - shift, hi - shift
    if lower is not None:
        lo, hi = np.maximum(lo, lower), np.maximum(hi, lower)
    return lo, hi
