"""The fast paths behind the Monte Carlo engine change speed, never results.

* Threefry lowered unrolled on the CPU (``calib_jax._src.threefry``) gives the bits of JAX's
  default rolled lowering for every draw the simulator and the panel use.
* The host calls (``calib_jax._src.host_call``) behind the CPU sorts and PAV fits equal NumPy
  under ``jit`` and ``vmap`` (several host devices: ``tests/test_montecarlo_engine.py``);
  the tie bounds computed on the host equal the scans of the accelerator path, and one
  program sorts one array once.
* ``calib_jax._src.fusion.materialize`` is the identity, bit for bit, under ``jit`` and ``vmap``.
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
import pytest

from calib_jax._src.fusion import materialize
from calib_jax._src.host_call import host_call
from calib_jax._src.pav import isotonic_fit_values, np_isotonic_fit_values
from calib_jax._src.sorting import argsort, argsort_small_ints, argsort_with_ties, tie_bounds

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
    from calib_jax._src.threefry import unrolled_threefry_on_cpu
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


@pytest.mark.parametrize("n", [1, 2, 1000, 1 << 21, (1 << 21) + 1])
def test_packed_host_sort_equals_stable_argsort_on_both_packings(n):
    """Up to 2^21 rows the packed words are sorted as float64, above as uint64."""
    from calib_jax._src.sorting import F64_PACK_ROWS, np_argsort_with_ties_1d

    assert F64_PACK_ROWS == 1 << 21
    rng = np.random.default_rng(n)
    x = rng.normal(size=n).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32)
    x[rng.integers(0, n, size=min(n, 64))] = rng.choice(special, size=min(n, 64))
    x[:: max(n // 50, 1)] = x[0]  # a tie group spread over the array
    order, first, last = np_argsort_with_ties_1d(x)
    np.testing.assert_array_equal(order, np.argsort(_as_sorted(x), kind="stable"))
    xs = _as_sorted(x)[order]
    np.testing.assert_array_equal(xs[first], xs)
    np.testing.assert_array_equal(xs[last], xs)
    assert np.all(xs[first[1:] - 1][first[1:] > 0] < xs[1:][first[1:] > 0])  # runs start at a change


def _as_sorted(x: np.ndarray) -> np.ndarray:
    """x with every value as the sorts compare it: -0.0 and the subnormals +0.0, every NaN one NaN."""
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0.0), x)


@pytest.mark.parametrize("n", [1, 2, 1000, 70_001])
def test_packed_argsort_is_the_host_sort_bit_for_bit(n):
    """The CUDA/ROCm branch (one sort of 64-bit words) gives the CPU branch's order and tie
    bounds, eager and jitted (the host call used to keep subnormals apart eagerly and flush them
    under jit), which is NumPy's stable order of the values as compared (signed zeros and
    subnormals one value, every NaN one value sorted last) and jnp.argsort's on the CPU; under
    jit, vmap and with x64 off or on."""
    from calib_jax._src import sorting
    from calib_jax._src.sorting import packed_argsort

    rng = np.random.default_rng(n)
    x = rng.normal(size=(3, n)).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-39, 3.4e38, -3.4e38],
                       np.float32)
    x[:, rng.integers(0, n, size=min(n, 64))] = rng.choice(special, size=(3, min(n, 64)))
    x[:, :: max(n // 50, 1)] = x[:, :1]  # a tie group spread over the array
    want = np.argsort(_as_sorted(x), axis=-1, kind="stable")
    runs = [jax.jit(packed_argsort)(x), jax.jit(jax.vmap(packed_argsort))(x), packed_argsort(jnp.asarray(x)),
            jax.jit(argsort)(x), argsort(jnp.asarray(x)), jnp.argsort(jnp.asarray(x), axis=-1, stable=True)]
    with jax.enable_x64(True):
        runs.append(jax.jit(packed_argsort)(x))
    for k, got in enumerate(runs):
        np.testing.assert_array_equal(np.asarray(got).astype(np.int64), want, err_msg=str(k))
    host = jax.jit(jax.vmap(sorting._host_argsort_with_ties))(x)
    for h, d in zip(host, jax.jit(jax.vmap(sorting._packed_argsort_with_ties))(x), strict=True):
        np.testing.assert_array_equal(np.asarray(h), np.asarray(d))
    for h, d in zip(host, sorting._np_argsort_with_ties(x), strict=True):  # eager NumPy, no flushing thread
        np.testing.assert_array_equal(np.asarray(h), d)
    for bad in (jnp.zeros(3, jnp.int32), jnp.float32(1.0)):
        with pytest.raises(ValueError, match="float32|axis"):
            packed_argsort(bad)


@pytest.mark.parametrize("top", [50, 70_000])  # radix (16-bit codes) and merge-sort paths
def test_small_int_argsort_is_numpys_stable_argsort_under_jit_and_vmap(top):
    codes = np.random.default_rng(3).integers(0, top, (3, 2000)).astype(np.int32)
    ref = np.argsort(codes, axis=-1, kind="stable")
    np.testing.assert_array_equal(argsort_small_ints(jnp.asarray(codes[0])), ref[0])
    np.testing.assert_array_equal(jax.jit(jax.vmap(argsort_small_ints))(jnp.asarray(codes)), ref)
    np.testing.assert_array_equal(jnp.argsort(jnp.asarray(codes), axis=-1, stable=True), ref)  # accelerator path


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


@pytest.mark.slow
def test_host_tie_bounds_equal_the_accelerator_scans():
    # 50 random draws over 5 sizes (1 and 2 rows, and 7, 33 and 89, none a power of two) through
    # one jitted function: each size compiles once (a fresh jax.jit(jax.vmap(...)) per draw, or a
    # fresh random size per draw, compiled anew every draw)
    rng = np.random.default_rng(3)
    batched = jax.jit(jax.vmap(argsort_with_ties))
    for n in np.repeat([1, 2, 7, 33, 89], 10):
        n = int(n)
        x = (rng.integers(-4, int(rng.integers(1, 12)), size=(2, n)) * 0.5).astype(np.float32)
        x[0, rng.integers(0, n, size=2)] = -0.0  # -0.0 == 0.0: one tie group with 0.0
        order, first, last = batched(x)
        for i in range(2):
            xs = x[i][np.asarray(order[i])]
            assert np.all(np.diff(xs) >= 0)
            same = xs[:, None] == xs[None, :]
            pos = np.arange(n)
            # first/last: the smallest and largest sorted position holding an equal value
            want_first = np.where(same, pos[None, :], n).min(axis=1)
            want_last = np.where(same, pos[None, :], -1).max(axis=1)
            np.testing.assert_array_equal(np.asarray(first[i]), want_first)
            np.testing.assert_array_equal(np.asarray(last[i]), want_last)
            f2, l2 = tie_bounds(jnp.asarray(xs))
            np.testing.assert_array_equal(np.asarray(f2), want_first)
            np.testing.assert_array_equal(np.asarray(l2), want_last)
            # equal values keep their index order
            for v in np.unique(xs):
                idx = np.asarray(order[i])[xs == v]
                assert np.all(np.diff(idx) > 0)


def test_one_host_sort_per_array_in_a_program():
    from calib_jax import metrics as M

    if jax.default_backend() != "cpu":
        return
    p = jnp.linspace(0.01, 0.99, 200)
    y = (jnp.arange(200) % 3 == 0).astype(jnp.float32)
    hlo = jax.jit(lambda p, y: (M.auc(p, y), M.ece(p, y, strategy="quantile"), M.spearman(p, p * p))
                  ).lower(p, y).compile().as_text()
    # AUC, ECE+ and Spearman's ranks of p share one host sort; Spearman's p*p is the second
    assert hlo.count("xla_ffi_python_cpu_callback") == 2


def test_materialize_is_the_identity():
    rng = np.random.default_rng(4)
    a = rng.normal(size=(3, 8)).astype(np.float32)
    b = rng.normal(size=(3, 2, 5)).astype(np.float32)
    b[0, 0, 0] = -0.0
    for got in (materialize(a[0], b[0]), jax.jit(materialize)(a[0], b[0]),
                [x[0] for x in jax.vmap(materialize)(a, b)]):
        np.testing.assert_array_equal(np.asarray(got[0]).view(np.uint32), a[0].view(np.uint32))
        np.testing.assert_array_equal(np.asarray(got[1]).view(np.uint32), b[0].view(np.uint32))
    assert materialize() == ()
