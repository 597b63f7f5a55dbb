"""Weighted isotonic regression (pool adjacent violators) with tied inputs pooled.

On the CPU the pooling runs in SciPy's compiled PAVA (``scipy.optimize.isotonic_regression``)
through a host call (``calib_jax._src.host_call``): PAV is sequential, and on the CPU a host
call costs no transfer and is 10-20x faster than the parallel formulation (0.02-0.04 s
against 0.4 s at n = 10^5). On GPU/TPU the same function runs
:func:`calib_jax._src.pav_device.device_isotonic_fit_values` (the greatest convex minorant by
hull merges, jit-able, no host round trip); ``jax.lax.platform_dependent`` picks the branch
when the program is lowered, so one jitted function serves both.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._src.host_call import host_call
from calib_jax._src.pav_device import device_isotonic_fit_values
from calib_jax._src.pav_numpy import np_isotonic_fit_values, pool_ties

__all__ = ["isotonic_fit_values", "host_isotonic_fit_values", "np_isotonic_fit_values", "pool_ties"]


def _batched(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    x, y, w = np.asarray(x), np.asarray(y), np.asarray(w)
    if x.ndim == 1:
        return np_isotonic_fit_values(x, y, w).astype(x.dtype)
    m = x.shape[-1]
    rows = zip(x.reshape(-1, m), y.reshape(-1, m), w.reshape(-1, m))
    flat = [np_isotonic_fit_values(a, b, c) for a, b, c in rows]
    return np.stack(flat).reshape(x.shape).astype(x.dtype)


def isotonic_fit_values(x: jax.Array, y: jax.Array, w: jax.Array) -> jax.Array:
    r"""Fitted values of the weighted isotonic regression of y on x (jit/vmap-able): the
    minimiser of :math:`\sum_i w_i (y_i - f_i)^2` over f non-decreasing in x, tied x pooled
    (Barlow et al. 1972, Thm 1.1). SciPy on the host on the CPU, on the device elsewhere
    (module docstring); the two agree to float32 rounding (``tests/test_pav_device.py``)."""
    x, y, w = jnp.broadcast_arrays(x, y, w)
    return jax.lax.platform_dependent(x, y, w, cpu=host_isotonic_fit_values,
                                      default=device_isotonic_fit_values)


def host_isotonic_fit_values(x: jax.Array, y: jax.Array, w: jax.Array) -> jax.Array:
    """:func:`isotonic_fit_values` through SciPy's PAVA on the host, on every backend."""
    return host_call(_batched_tuple, [jax.ShapeDtypeStruct(x.shape, x.dtype)], x, y, w)[0]


def _batched_tuple(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray]:
    # under a user's jit, NaN in the data reaches the host unchecked: the traced input checks
    # make the public call's result NaN (calib_jax._src.eager), so NumPy's warnings are noise here
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return (_batched(x, y, w),)
