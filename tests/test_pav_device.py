"""The device isotonic fit (calib_jax._src.pav_device, the accelerator branch of
calib_jax._src.pav.isotonic_fit_values) equals SciPy's PAV, and accelerators get no host call."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import calib_jax.decompositions as D
from calib_jax._src.pav import np_isotonic_fit_values
from calib_jax._src.pav_device import device_isotonic_fit_values


@pytest.mark.parametrize("n, B", [(13, 40), (48, 40), (1000, 4)])
def test_device_isotonic_fit_equals_scipy(n, B):
    rng = np.random.default_rng(n)
    x = (rng.integers(0, rng.integers(2, 30, (B, 1)), (B, n)) / 7).astype(np.float32)  # ties
    y = np.where(np.arange(B)[:, None] % 2 == 0, rng.uniform(size=(B, n)) < 0.4,
                 rng.normal(size=(B, n))).astype(np.float32)
    w = rng.uniform(0, 2, (B, n)).astype(np.float32)
    w[::3] *= rng.uniform(size=(len(w[::3]), n)) < 0.7  # zero-weight points
    w[-1] = 0.0  # all weights zero
    w[-2] = 1.0
    got = np.asarray(jax.jit(device_isotonic_fit_values)(x, y, w))
    for b in range(B):
        np.testing.assert_allclose(got[b], np_isotonic_fit_values(x[b], y[b], w[b]), rtol=1e-5, atol=1e-6)


def _corp_mcb(p, y):
    return D.corp(p, y).mcb


def test_accelerators_lower_corp_without_a_host_call():
    """``platform_dependent`` keeps SciPy's host call on the CPU only: exporting CORP for
    CUDA and TPU succeeds (a host callback cannot be exported) and names no callback, also
    under vmap; the CPU lowering has the host call."""
    spec = jax.ShapeDtypeStruct((64,), jnp.float32)
    for platform in ("cuda", "tpu"):
        module = export.export(jax.jit(_corp_mcb), platforms=(platform,))(spec, spec).mlir_module()
        assert "callback" not in module.lower()
    batch = jax.ShapeDtypeStruct((3, 64), jnp.float32)
    vmapped = export.export(jax.jit(jax.vmap(_corp_mcb)), platforms=("cuda",))(batch, batch)
    assert "callback" not in vmapped.mlir_module().lower()
    if jax.default_backend() == "cpu":  # elsewhere JAX refuses a CPU lowering before it looks
        with pytest.raises(NotImplementedError, match="host_callbacks"):
            export.export(jax.jit(_corp_mcb), platforms=("cpu",))(spec, spec)


def test_corp_on_the_device_branch_equals_the_host_branch(monkeypatch):
    """CORP computed with the accelerator branch (forced on the CPU) equals CORP with
    SciPy's PAV: every component and the recalibrated values, to float32 rounding."""
    rng = np.random.default_rng(3)
    p = np.round(rng.uniform(size=500), 2).astype(np.float32)  # ties
    y = (rng.uniform(size=500) < p ** 1.5).astype(np.float32)
    host = D.corp(p, y)
    from calib_jax._src import pav_device as _pav_device

    monkeypatch.setattr(D, "isotonic_fit_values", _pav_device.device_isotonic_fit_values)
    device = D.corp(p, y)
    for a, b in zip(device, host, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
