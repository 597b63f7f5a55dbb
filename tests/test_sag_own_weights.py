"""SAG / VR-SAG heads fitted together, each on its own row weights (``sag.fit_many`` with
(H, n) ``weights``): how ``compare_calibrators`` can fit its ten D_val heads, each on its own
bootstrap draw, as one program.

* With the sequential solver each fit is ``sag.fit`` on its own weights, bit for bit, under
  both protocols.
* The lock-step evaluation with a weight row per problem gives each problem's value and
  gradient of the one-problem objective on its own weights (both batched paths: the kept
  softmax weights, and autodiff of the blocked objective above the memory limit).
* Lock-stepped together, the fits reach the objectives of the fits one by one (float32
  rounding of the batched sums, carried through a non-convex fit).
* Bad weights are refused by name.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calib_jax.calibrators import sag


def _log(n: int = 3000, m: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, m)).astype(np.float32)
    o = (2 * emb[:, 0]).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-emb[:, 0] - 0.5 * emb[:, 1]))).astype(np.float32)
    draws = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(3)]).astype(np.float32)
    return o, y, emb, draws


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")
@pytest.mark.parametrize("protocol", ["paper", "reference"])
def test_each_fit_equals_fit_on_its_own_weights_bit_for_bit(protocol):
    o, y, emb, draws = _log(n=10_000)
    keys = [jax.random.key(h) for h in range(3)]
    kw = dict(context={"embedding": emb}, n_steps=15, lam_v=0.5, protocol=protocol, n_partitions=2,
              solver="sequential")
    many = sag.fit_many(o, y, keys=keys, weights=draws, **kw)
    for h, key in enumerate(keys):
        one = sag.fit(o, y, key=key, weights=draws[h], **kw)
        for field, a, b in zip(sag.SAGParams._fields, many[h], one):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"fit {h}, {field}")
    # the rows matter: fit 1 on fit 0's weights is another fit
    shared = sag.fit_many(o, y, keys=keys, weights=draws[0], **kw)
    assert float(jnp.max(jnp.abs(shared[1].W - many[1].W))) > 1e-3


def test_the_batched_evaluation_reads_each_problems_own_weights(monkeypatch):
    """Six problems (three heads x two partitions), 12,000 rows in blocks of 4096 with a shorter last
    block, each with its own weights (zeros included): the batched value and gradient equal the
    one-problem objective's on that problem's weights."""
    rng = np.random.default_rng(5)
    n, m = 12000, 5
    z = rng.normal(size=(n, m)).astype(np.float32)
    o = jnp.asarray((1.5 * z[:, 0]).astype(np.float32))
    y = jnp.asarray((rng.random(n) < 1 / (1 + np.exp(-z[:, 0]))).astype(np.float32))
    v = jnp.asarray(rng.integers(0, 3, (3, n)).astype(np.float32))
    theta = sag.init_params(jax.random.key(1), m, n_groups=3, n_partitions=6)
    rows = jnp.asarray([0, 0, 1, 1, 2, 2], jnp.int32)
    data = (o, 2 * y - 1, jnp.asarray(z).T, jax.nn.sigmoid(o), v, jnp.float32(0.1), jnp.float32(0.5))
    vg = sag._value_and_grad_all(True, True)
    batched = jax.jit(jax.vmap(lambda t, r: vg(t, data, r)))
    kept = batched(theta, rows)
    monkeypatch.setattr(sag, "_KEEP_LIMIT_BYTES", 0)  # above the limit: autodiff of the blocked objective
    auto = jax.jit(jax.vmap(lambda t, r: vg(t, data, r)))(theta, rows)
    for p in range(6):
        one = jax.tree.map(lambda a, p=p: a[p], theta)
        value, grad = jax.value_and_grad(sag._objective)(one, *data[:4], v[rows[p]], *data[5:], True, True)
        for values, grads in (kept, auto):
            np.testing.assert_allclose(values[p], value, rtol=2e-6)
            for field in sag._Theta._fields:
                np.testing.assert_allclose(getattr(grads, field)[p], getattr(grad, field), rtol=1e-4, atol=1e-7,
                                           err_msg=f"problem {p}, {field}")


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")
def test_lockstep_fits_together_reach_the_objectives_of_fits_one_by_one():
    o, y, emb, draws = _log(n=10_000, m=6, seed=3)
    keys = [jax.random.key(h) for h in range(3)]
    kw = dict(context={"embedding": emb}, n_steps=60, lam_v=0.5, n_partitions=2)
    together = sag.fit_many(o, y, keys=keys, weights=draws, solver="lockstep", **kw)
    for h, key in enumerate(keys):
        one = sag.fit(o, y, key=key, weights=draws[h], **kw)
        v = jnp.asarray(draws[h])
        f = jax.vmap(lambda t, v=v: sag._objective(t, jnp.asarray(o), 2 * jnp.asarray(y) - 1, jnp.asarray(emb).T,
                                                   jax.nn.sigmoid(jnp.asarray(o)), v, 0.1, 0.5, False, True))
        reached = [f(sag._Theta(p.W, p.b, p.log_tau, p.beta)) for p in (together[h], one)]
        # the same algorithm on a non-convex objective; float32 rounding of the batched sums moves
        # the iterates in flat directions (as tests/test_lbfgs_lockstep.py: 1e-4 relative here)
        np.testing.assert_allclose(reached[0], reached[1], rtol=1e-4)


def test_bad_per_fit_weights_are_refused_by_name():
    o, y, emb, draws = _log(n=200)
    keys = [jax.random.key(h) for h in range(3)]
    kw = dict(context={"embedding": emb}, n_steps=2, n_partitions=1, n_groups=2)
    with pytest.raises(ValueError, match=r"`weights` has shape \(2, 200\).*\(3, 200\)"):
        sag.fit_many(o, y, keys=keys, weights=draws[:2], **kw)
    bad = draws.copy()
    bad[1, 7] = -1.0
    with pytest.raises(ValueError, match=r"`weights\[1\]` must be non-negative"):
        sag.fit_many(o, y, keys=keys, weights=bad, **kw)
    bad = draws.copy()
    bad[2] = 0.0
    with pytest.raises(ValueError, match=r"`weights\[2\]`"):
        sag.fit_many(o, y, keys=keys, weights=bad, **kw)
    bad = draws.copy()
    bad[0, 3] = np.nan
    with pytest.raises(ValueError, match=r"`weights\[0\]`"):
        sag.fit_many(o, y, keys=keys, weights=bad, **kw)
    with pytest.raises(ValueError, match="weights"):  # fit takes one row of weights
        sag.fit(o, y, key=keys[0], weights=draws, **kw)
