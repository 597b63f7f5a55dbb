"""calib_jax._src.linalg.spd_solve against NumPy, and no LAPACK call in the vmapped fits.

JAX 0.10's batched LAPACK solve blocks XLA:CPU pool threads while its pieces run; two such
solves in one program deadlocked the seeds/002 study on 2 host devices (calib_jax/_src/linalg.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calib_jax._src.linalg import spd_solve


def _spd(rng, batch, d):
    m = rng.normal(size=(batch, d, d))
    return (m @ np.swapaxes(m, -1, -2) + 0.5 * np.eye(d)).astype(np.float32)


@pytest.mark.parametrize("d", [1, 2, 3, 7, 21])
def test_spd_solve_matches_numpy_float64(d):
    rng = np.random.default_rng(d)
    a = _spd(rng, 32, d)
    b = rng.normal(size=(32, d)).astype(np.float32)
    got = np.asarray(jax.jit(jax.vmap(spd_solve))(a, b))
    ref = np.linalg.solve(a.astype(np.float64), b.astype(np.float64)[..., None])[..., 0]
    scale = np.abs(ref).max(axis=1, keepdims=True)
    # LU in float32 (jnp.linalg.solve) is as far from the float64 answer: ~1e-7 * condition
    lu = np.asarray(jax.vmap(jnp.linalg.solve)(a, b))
    assert np.max(np.abs(got - ref) / scale) <= max(4 * np.max(np.abs(lu - ref) / scale), 2e-6)
    # only the lower triangle is read
    upper_noise = np.triu(rng.normal(size=(d, d)), 1).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(spd_solve(jnp.asarray(a[0] + upper_noise), b[0])),
                                  np.asarray(spd_solve(jnp.asarray(a[0]), b[0])))


def test_spd_solve_not_positive_definite_is_non_finite_and_shapes_are_checked():
    assert not np.all(np.isfinite(np.asarray(spd_solve(jnp.array([[1.0, 2.0], [2.0, 1.0]]), jnp.ones(2)))))
    with pytest.raises(ValueError, match="a must be"):
        spd_solve(jnp.ones((2, 3)), jnp.ones(2))
    with pytest.raises(ValueError, match="b"):
        spd_solve(jnp.eye(2), jnp.ones(3))


def _hlo(fn, *args) -> str:
    return jax.jit(fn).lower(*args).as_text()


def test_vmapped_fits_make_no_lapack_call():
    from calib_jax.calibrators import beta, platt, temperature
    from experiments import _pipelines as P

    z = jnp.linspace(-3.0, 1.0, 256)
    y = (jnp.arange(256) % 7 == 0).astype(jnp.float32)
    zb, yb = jnp.stack([z, z + 0.1]), jnp.stack([y, y])
    for mod in (platt, temperature, beta):
        text = _hlo(jax.vmap(lambda zz, yy, m=mod: m.fit(zz, yy)), zb, yb)
        assert "lapack" not in text, mod.__name__
    x = jax.random.normal(jax.random.key(0), (2, 64, 5))
    yl = jnp.stack([jnp.arange(64.0) % 2] * 2)
    assert "lapack" not in _hlo(jax.vmap(P.fit_linear), x, yl)
    assert "lapack" not in _hlo(jax.vmap(P.fit_logistic), x, yl)
    # the guard itself: jnp.linalg.solve does lower to LAPACK on the CPU
    if jax.default_backend() == "cpu":
        assert "lapack" in _hlo(jax.vmap(jnp.linalg.solve), jnp.stack([jnp.eye(3)] * 2), jnp.ones((2, 3)))
