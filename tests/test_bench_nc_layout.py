"""``benchmarks.bench_nc_layout``: its count of the transposes in an optimized program, on programs
with a known answer and on Neural Calibration's training step, one head against heads under vmap."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.bench_nc_layout import _copy_seconds, _optimized, transposing_copies


def test_counts_a_materialised_transpose_and_nothing_in_an_elementwise_program():
    x = jnp.zeros((64, 4, 8), jnp.float32)
    moved = _optimized(jax.jit(lambda a: jnp.transpose(a, (1, 0, 2)) + 1.0), x)
    plain = _optimized(jax.jit(lambda a: a * 2.0 + 1.0), x)
    assert transposing_copies(moved, 64 * 8) == {(4, 64, 8): 1}
    assert transposing_copies(plain, 1) == {}
    assert transposing_copies(moved, 64 * 4 * 8 + 1) == {}  # below the size asked for: not counted


def test_copy_timer_times_the_shape_it_names():
    assert 0.0 < _copy_seconds((3, 50, 2), 2) < 1.0


def test_heads_under_vmap_move_the_lookups_between_layouts_and_one_head_does_not():
    """The benchmark's finding at a small size: the vmapped training program of Neural
    Calibration transposes row-sized arrays, the single head's program does not."""
    from calib_jax.calibrators import ilps
    from calib_jax.calibrators import neural_calibration as ncal

    n, heads = 2048, 4
    rng = np.random.default_rng(0)
    x = jnp.asarray(np.stack([rng.integers(0, 30, n), rng.integers(0, 5, n)], axis=1).astype(np.int32))
    o = jnp.asarray(rng.normal(-2.0, 1.0, n).astype(np.float32))
    y = jnp.asarray((rng.random(n) < 0.1).astype(np.float32))
    model = ncal.FieldMLP(vocab_sizes=(30, 5), embed_dim=8, hidden=(32,))
    eta0 = ilps.fit(o, y, n_knots=20)
    mlp0 = model.init(jax.random.key(0), x[:1])
    kw = dict(knots=eta0.knots, o=o, y=y, x=x, lam=jnp.float32(1.0), lr=jnp.float32(3e-3),
              weight_decay=jnp.float32(1e-3), model=model, n_steps=3, extrapolate="linear")
    w = jnp.ones((heads, n), jnp.float32)
    one = jax.jit(lambda b, m, v: ncal._train(b, mlp0=m, v=v, v_stop=v, **kw)[0])
    many = jax.jit(jax.vmap(lambda b, m, v: ncal._train(b, mlp0=m, v=v, v_stop=v, **kw)[0]))
    stacked = (jnp.stack([eta0.values] * heads), jax.tree.map(lambda a: jnp.stack([a] * heads), mlp0))
    single = transposing_copies(_optimized(one, eta0.values, mlp0, w[0]), n * 8)
    batched = transposing_copies(_optimized(many, *stacked, w), n * 8)
    assert single == {}
    assert sum(batched.values()) > 0
    assert all(heads in shape and n in shape for shape in batched)
