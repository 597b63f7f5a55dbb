"""The device isotonic fit (calib_jax._pav_device, not wired in yet) equals SciPy's PAV."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from calib_jax._pav import np_isotonic_fit_values
from calib_jax._pav_device import device_isotonic_fit_values


@pytest.mark.parametrize("n", [13, 48])
def test_device_isotonic_fit_equals_scipy(n):
    rng = np.random.default_rng(n)
    B = 40
    x = (rng.integers(0, rng.integers(2, 30, (B, 1)), (B, n)) / 7).astype(np.float32)  # ties
    y = np.where(np.arange(B)[:, None] % 2 == 0, rng.uniform(size=(B, n)) < 0.4,
                 rng.normal(size=(B, n))).astype(np.float32)
    w = rng.uniform(0, 2, (B, n)).astype(np.float32)
    w[::3] *= rng.uniform(size=(len(w[::3]), n)) < 0.7  # zero-weight points
    w[5] = 0.0  # all weights zero
    w[7] = 1.0
    got = np.asarray(jax.jit(device_isotonic_fit_values)(x, y, w))
    for b in range(B):
        np.testing.assert_allclose(got[b], np_isotonic_fit_values(x[b], y[b], w[b]), rtol=1e-5, atol=1e-6)
