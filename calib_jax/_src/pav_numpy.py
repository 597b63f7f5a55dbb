"""Weighted isotonic regression in NumPy (SciPy's compiled PAVA), with tied inputs pooled.

The host side of :mod:`calib_jax._src.pav`, kept free of JAX so that the ``calib-jax``
command's NumPy report path can use it without loading JAX.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import isotonic_regression

__all__ = ["np_isotonic_fit_values", "pool_ties"]


def pool_ties(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sort by ``x`` and pool tied abscissae (float64).

    Returns ``(order, tie_id, x_unique, w_sum, y_mean)``: the sort order, each sorted
    row's tie group, and per tie group its abscissa, total weight and weighted mean of y
    (0 where the group's weight is 0).
    """
    x = np.asarray(x)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    new = np.empty(xs.shape[0], bool)
    new[:1] = True
    new[1:] = xs[1:] != xs[:-1]
    tid = np.cumsum(new) - 1
    wsum = np.bincount(tid, weights=np.asarray(w, np.float64)[order])
    ysum = np.bincount(tid, weights=(np.asarray(w, np.float64) * np.asarray(y, np.float64))[order])
    ymean = np.divide(ysum, wsum, out=np.zeros_like(wsum), where=wsum > 0)
    return order, tid, xs[new], wsum, ymean


def np_isotonic_fit_values(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NumPy: fitted isotonic (non-decreasing in x) values at each input point, ties pooled."""
    order, tid, _, wsum, means = pool_ties(x, y, w)
    pos = wsum > 0
    fitted = np.zeros_like(wsum)
    if pos.any():
        fitted[pos] = isotonic_regression(means[pos], weights=wsum[pos], increasing=True).x
    # zero-weight tie groups take the value of the nearest group to their left (or right)
    if not pos.all():
        idx = np.where(pos, np.arange(len(pos)), -1)
        idx = np.maximum.accumulate(idx)
        first = np.argmax(pos)
        idx[idx < 0] = first
        fitted = fitted[idx]
    out = np.empty(np.shape(x)[0], np.float64)
    out[order] = fitted[tid]
    return out
