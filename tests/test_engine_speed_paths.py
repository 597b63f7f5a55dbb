"""The fast paths behind the Monte Carlo engine change speed, never results.

* Threefry lowered unrolled on the CPU (``calib_jax._threefry``) gives the bits of JAX's
  default rolled lowering for every draw the simulator and the panel use.
* The host calls (``calib_jax._host_call``) behind the CPU sorts and PAV fits equal NumPy
  under ``jit`` and ``vmap`` (several host devices: ``tests/test_montecarlo_engine.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from calib_jax._host_call import host_call
from calib_jax._pav import isotonic_fit_values, np_isotonic_fit_values
from calib_jax._sorting import argsort

ROOT = Path(__file__).resolve().parents[1]

_DRAWS = textwrap.dedent("""
    import sys, jax, jax.numpy as jnp, numpy as np
    def draws(key):
        k = jax.random.split(key, 8)
        return dict(bits=jax.random.bits(k[0], (1001,)), uniform=jax.random.uniform(k[1], (7, 33)),
                    normal=jax.random.normal(k[2], (513,)), gumbel=jax.random.gumbel(k[3], (64, 3)),
                    bernoulli=jax.random.bernoulli(k[4], 0.3, (999,)),
                    categorical=jax.random.categorical(k[5], jnp.arange(5.0), shape=(300,)),
                    fold=jax.random.key_data(jax.random.fold_in(k[6], 12345)),
                    perm=jax.random.permutation(k[7], 257))
    key = jax.random.key(2026)
    default = jax.jit(draws)(key)                          # JAX's rolled CPU lowering
    from calib_jax._threefry import unrolled_threefry_on_cpu
    assert unrolled_threefry_on_cpu()
    unrolled = jax.jit(lambda k: draws(k))(key)            # a new function: compiled unrolled
    vmapped = jax.jit(jax.vmap(draws))(jax.random.split(key, 3))
    np.savez(sys.argv[1], **{f"d_{k}": v for k, v in default.items()},
             **{f"u_{k}": v for k, v in unrolled.items()}, **{f"v_{k}": v for k, v in vmapped.items()})
""")


def test_unrolled_threefry_gives_the_default_bits(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("CALIB_JAX_UNROLLED_THREEFRY", None)
    subprocess.run([sys.executable, "-c", _DRAWS, str(tmp_path / "d.npz")], check=True, cwd=ROOT,
                   env=env, timeout=300)
    with np.load(tmp_path / "d.npz") as z:
        names = [k[2:] for k in z if k.startswith("d_")]
        assert len(names) == 8
        for k in names:
            np.testing.assert_array_equal(z[f"u_{k}"], z[f"d_{k}"], err_msg=k)


def test_host_argsort_matches_numpy_under_jit_and_vmap():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 50)).astype(np.float32)
    x[..., ::7] = 0.25  # ties keep their index order (stable)
    want = np.argsort(x, axis=-1, kind="stable")
    np.testing.assert_array_equal(np.asarray(jax.jit(argsort)(x)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(jax.vmap(argsort)))(x)), want)
    np.testing.assert_array_equal(np.asarray(jax.vmap(argsort, in_axes=1, out_axes=1)(x)), want)


def test_host_pav_broadcasts_unbatched_arguments_under_vmap():
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(5, 40)).astype(np.float32)
    y = (rng.uniform(size=(5, 40)) < x).astype(np.float32)
    w = rng.uniform(0.5, 2.0, size=40).astype(np.float32)  # shared weights, not batched
    got = jax.jit(jax.vmap(isotonic_fit_values, in_axes=(0, 0, None)))(x, y, w)
    for i in range(5):
        np.testing.assert_allclose(np.asarray(got[i]), np_isotonic_fit_values(x[i], y[i], w),
                                   rtol=1e-6, atol=1e-7)


def _two_outputs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return a + b, (a * b).sum(axis=-1)


def test_host_call_returns_several_outputs_eagerly_and_traced():
    a = jnp.arange(6.0).reshape(2, 3)
    b = jnp.ones(3)
    shapes = [jax.ShapeDtypeStruct((2, 3), jnp.float32), jax.ShapeDtypeStruct((2,), jnp.float32)]
    eager = host_call(_two_outputs, shapes, a, jnp.broadcast_to(b, (2, 3)))
    traced = jax.jit(lambda u, v: host_call(_two_outputs, shapes, u, jnp.broadcast_to(v, (2, 3))))(a, b)
    for e, t, want in zip(eager, traced, _two_outputs(np.asarray(a), np.ones((2, 3))), strict=True):
        np.testing.assert_array_equal(np.asarray(e), want)
        np.testing.assert_array_equal(np.asarray(t), want)
