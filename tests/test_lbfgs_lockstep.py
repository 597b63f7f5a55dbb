"""The lock-step L-BFGS (``calibrators/_lbfgs.py``): the same algorithm as the sequential
driver, every iteration one evaluation of the objective for the whole batch.

* Its line search, run on one problem without ``vmap``, gives optax's zoom line search's
  iterates bit for bit (the two-pass iteration changes where the evaluation happens, not what
  is evaluated).
* Batched, each problem reaches the sequential driver's objective to float32 rounding, a
  stopped problem stays where it stopped, and every line-search iteration is one batched
  evaluation.
* SAG's ``solver="lockstep"`` fits reach the sequential fits' objectives (1e-4 relative on a
  small log; the parameters differ in the objective's flat directions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import calib_jax.calibrators._lbfgs as L
from calib_jax.calibrators import sag


def _rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def _starts(b: int = 4) -> jax.Array:
    return jnp.asarray(np.random.default_rng(0).normal(size=(b, 6)).astype(np.float32))


@pytest.mark.default_codegen
def test_the_lockstep_line_search_is_optax_zoom_bit_for_bit():
    def run(x, linesearch):
        opt = optax.chain(optax.scale_by_lbfgs(memory_size=100), optax.scale(-1.0), linesearch)
        value, grad = jax.value_and_grad(_rosenbrock)(x)
        state = optax.tree.set(opt.init(x), value=value, grad=grad)

        def step(carry, _):
            x, state = carry
            value, grad = optax.tree.get(state, "value"), optax.tree.get(state, "grad")
            updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=_rosenbrock)
            x = optax.apply_updates(x, updates)
            return (x, state), x

        return jax.lax.scan(step, (x, state), None, length=25)[1]

    for x0 in _starts(3):
        reference = jax.jit(lambda x: run(x, optax.scale_by_zoom_linesearch(max_linesearch_steps=25)))(x0)
        np.testing.assert_array_equal(jax.jit(lambda x: run(x, L._lockstep_zoom()))(x0), reference)


def test_batched_problems_reach_the_sequential_optima_with_one_evaluation_per_iteration():
    calls = []
    scales = jnp.asarray(np.random.default_rng(1).uniform(0.5, 20.0, size=(4, 6)).astype(np.float32))

    def counted(x):  # strictly convex, a different conditioning per problem (its last 6 entries)
        jax.debug.callback(lambda _: calls.append(1), x[0])
        a, c = x[6:], jnp.arange(6.0)
        return jnp.sum(jax.lax.stop_gradient(a) * (x[:6] - c) ** 2) + jax.nn.logsumexp(x[:6])

    x0 = jnp.concatenate([jnp.zeros((4, 6)), scales], axis=1)
    x_lock, v_lock = jax.jit(lambda a: L.minimize_lockstep(counted, a, 40))(x0)
    batched_evals = len(calls) / x0.shape[0]  # a vmapped callback runs once per problem
    calls.clear()
    singles = [jax.jit(lambda a: L.minimize(counted, a, 40))(x0[i]) for i in range(4)]
    assert v_lock.shape == (4, 40)
    for i, (x, v) in enumerate(singles):
        np.testing.assert_allclose(x_lock[i, :6], x[:6], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(v_lock[i, -1], v[-1], rtol=1e-6)
    # one batched evaluation per iteration: at least the slowest problem's own count, far
    # fewer than the problems' evaluations summed
    assert len(calls) / x0.shape[0] <= batched_evals < len(calls)


def test_a_stopped_problem_stays_where_it_stopped():
    x0 = jnp.stack([jnp.ones(6), _starts(1)[0]])  # the first starts at the minimum: gradient 0
    x, values = jax.jit(lambda a: L.minimize_lockstep(_rosenbrock, a, 15))(x0)
    np.testing.assert_array_equal(x[0], jnp.ones(6))
    assert float(jnp.max(jnp.abs(values[0]))) == 0.0
    assert float(values[1, -1]) < float(_rosenbrock(x0[1]))


@pytest.mark.parametrize("variant", ["ts", "ps"])
def test_sag_lockstep_fits_reach_the_sequential_objectives(variant):
    rng = np.random.default_rng(3)
    n, m = 2000, 8
    z = rng.normal(size=(n, m)).astype(np.float32)
    o = jnp.asarray((2 * z[:, 0]).astype(np.float32))
    y = jnp.asarray((rng.random(n) < 1 / (1 + np.exp(-z[:, 0] - 0.5 * z[:, 1]))).astype(np.float32))
    theta0 = sag.init_params(jax.random.key(0), m, n_groups=3, n_partitions=4)
    stop = sag.StopRule(*(jnp.asarray(a, jnp.float32) for a in sag.StopRule.torch(60)))
    kw = dict(lam=jnp.float32(0.1), lam_v=jnp.float32(0.5), stop=stop, n_steps=60, use_beta=variant == "ps",
              head_bias=True)
    _, v_seq = sag._fit_soft(theta0, o, y, jnp.asarray(z).T, jnp.ones(n), **kw)
    _, v_lock = sag._fit_soft(theta0, o, y, jnp.asarray(z).T, jnp.ones(n), solver="lockstep", **kw)
    # the same algorithm on a non-convex objective: float32 rounding of the batched sums moves
    # the iterates in flat directions, and the objectives reached agree to 1e-4 here (2,000
    # rows, 60 steps; 1e-7 at 20,000 rows and 100 steps)
    np.testing.assert_allclose(v_lock[:, -1], v_seq[:, -1], rtol=1e-4)
    fitted = sag.fit(np.asarray(o), np.asarray(y), context={"embedding": z}, variant=variant, n_partitions=2,
                     n_steps=20, solver="lockstep")
    assert fitted.W.shape == (2, m, 3)
    with pytest.raises(ValueError, match="solver"):
        sag.fit(np.asarray(o), np.asarray(y), context={"embedding": z}, solver="parallel")


def test_the_blocked_objective_of_all_partitions_equals_each_partitions_objective():
    """SAG's lock-step evaluation (every partition, rows in blocks, the last block shorter)
    gives each partition's value and gradient of the one-partition objective."""
    rng = np.random.default_rng(5)
    n, m = 12000, 6
    z = rng.normal(size=(n, m)).astype(np.float32)
    o = jnp.asarray((1.5 * z[:, 0]).astype(np.float32))
    y = jnp.asarray((rng.random(n) < 1 / (1 + np.exp(-z[:, 0]))).astype(np.float32))
    v = jnp.asarray(rng.uniform(0.5, 2.0, n).astype(np.float32))
    theta = sag.init_params(jax.random.key(1), m, n_groups=3, n_partitions=3)
    data = (o, 2 * y - 1, jnp.asarray(z).T, jax.nn.sigmoid(o), v, jnp.float32(0.1), jnp.float32(0.5))
    for use_beta in (False, True):
        vg = sag._value_and_grad_all(use_beta, True)
        values, grads = jax.jit(jax.vmap(lambda t, vg=vg: vg(t, data, None)))(theta)  # the batched rule: blocks of 4096
        blocked = sag._objective_all(theta, *data, use_beta, True, block=1024)  # 11 blocks of 1024 and one of 736
        for p in range(3):
            one = jax.tree.map(lambda a, p=p: a[p], theta)
            value, grad = jax.value_and_grad(sag._objective)(one, *data, use_beta, True)
            np.testing.assert_allclose(values[p], value, rtol=2e-6)
            np.testing.assert_allclose(blocked[p], value, rtol=2e-6)
            for field in ("W", "b", "log_tau", "beta"):
                np.testing.assert_allclose(getattr(grads, field)[p], getattr(grad, field), rtol=1e-4, atol=1e-7)


def _extreme_problem():
    """Rows in blocks of 512 with a shorter last one, weights with zeros, heads scaled up and
    temperatures down so that some sigmoid arguments sit on the -80 floor."""
    rng = np.random.default_rng(11)
    n, m, B = 2300, 7, 4
    z = rng.normal(size=(n, m)).astype(np.float32)
    o = rng.normal(-3.0, 4.0, n).astype(np.float32)
    y = (rng.random(n) < 0.1).astype(np.float32)
    v = rng.integers(0, 3, n).astype(np.float32)
    theta = sag.init_params(jax.random.key(2), m, n_groups=3, n_partitions=B)
    theta = theta._replace(W=5.0 * theta.W, log_tau=theta.log_tau - 3.0,
                           beta=jnp.asarray(rng.normal(0, 0.5, theta.beta.shape), jnp.float32))
    assert np.mean(np.abs(o[:, None] / np.exp(np.asarray(theta.log_tau[0]))[None, :]) > 80) > 0.01
    return theta, (o, 2 * y - 1, z.T, 1 / (1 + np.exp(-o)), v, 0.1, 0.5)


def _both_gradients(theta, data, use_beta, head_bias, dtype):
    th = jax.tree.map(lambda a: jnp.asarray(a, dtype), theta)
    d = tuple(jnp.asarray(a, dtype) for a in data)
    auto = jax.vmap(jax.value_and_grad(
        lambda t: sag._objective_all(jax.tree.map(lambda a: a[None], t), *d, use_beta, head_bias, block=512)[0]))(th)
    kept = sag._value_and_grad_stored(th, *d, use_beta, head_bias, block=512)
    return jax.tree.map(np.asarray, auto), jax.tree.map(np.asarray, kept)


@pytest.mark.parametrize("use_beta,head_bias", [(True, True), (False, False)])
def test_the_hand_derived_gradient_equals_autodiff_of_the_blocked_objective(use_beta, head_bias, monkeypatch):
    """The lock-step evaluation's hand-derived value and gradient (the softmax weights kept
    between a forward and a backward pass) are ``jax.value_and_grad`` of the blocked objective:
    equal to 1e-12 in float64, and in float32 as close to the float64 gradient as autodiff's
    float32 gradient is (within 4 times its error: on this deliberately ill-conditioned problem
    both are off by about 1e-4 of the largest entry). Above the memory limit the batched rule
    differentiates the blocked objective instead, to the same accuracy."""
    theta, data = _extreme_problem()
    with jax.enable_x64(True):
        (auto_v, auto_g), (kept_v, kept_g) = _both_gradients(theta, data, use_beta, head_bias, jnp.float64)
    np.testing.assert_allclose(kept_v, auto_v, rtol=1e-12)
    for a, k in zip(auto_g, kept_g):
        np.testing.assert_allclose(k, a, rtol=0, atol=1e-12 * np.max(np.abs(a)) + 1e-300)
    (auto32_v, auto32_g), (kept32_v, kept32_g) = _both_gradients(theta, data, use_beta, head_bias, jnp.float32)
    np.testing.assert_allclose(kept32_v, auto_v, rtol=1e-6)
    candidates = [kept32_g]
    if use_beta:  # the lock-step rule's two paths (the kept one, and autodiff above the memory limit)
        vg = sag._value_and_grad_all(use_beta, head_bias)
        d32 = tuple(jnp.asarray(a, jnp.float32) for a in data)
        candidates.append(jax.jit(jax.vmap(lambda t: vg(t, d32, None)))(theta)[1])
        monkeypatch.setattr(sag, "_KEEP_LIMIT_BYTES", 0)
        candidates.append(jax.jit(jax.vmap(lambda t: vg(t, d32, None)))(theta)[1])
    for field, truth, auto32, *found in zip(sag._Theta._fields, auto_g, auto32_g, *candidates):
        scale = np.max(np.abs(truth)) + 1e-30
        bound = 4 * np.max(np.abs(auto32 - truth)) + 1e-6 * scale
        for g in found:
            assert np.max(np.abs(np.asarray(g) - truth)) <= bound, field
