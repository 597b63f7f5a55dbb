"""The lock-step L-BFGS (``calibrators/_lbfgs.py``): B problems minimised by one batched
evaluation at a time, each problem running the sequential driver's algorithm at its own pace.

* Each problem's iterates, objectives and evaluation count are those of the sequential
  driver run on it alone (in float64, to 1e-12: only the rounding of the batched arithmetic
  differs), and the fit makes as many batched evaluations as its longest problem makes
  evaluations: no problem waits for another's line search.
* In float32 each problem reaches the sequential driver's objective to float32 rounding, and a
  stopped problem stays where it stopped.
* SAG's ``solver="lockstep"`` fits (the library's default) reach the sequential fits'
  objectives (1e-4 relative on a small log; the parameters differ in the objective's flat
  directions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import calib_jax.calibrators._lbfgs as L
from calib_jax.calibrators import sag


def _rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def _starts(b: int = 4) -> jax.Array:
    return jnp.asarray(np.random.default_rng(0).normal(size=(b, 6)).astype(np.float32))


def _convex_counted(calls: list):
    """A strictly convex objective of 6 entries whose last 6 entries (held fixed) set each
    problem's conditioning; each evaluation appends to ``calls`` (once per problem under vmap)."""

    def f(x):
        jax.debug.callback(lambda _: calls.append(1), x[0])
        a, c = x[6:], jnp.arange(6.0, dtype=x.dtype)
        return (jnp.sum(jax.lax.stop_gradient(a) * (x[:6] - c) ** 2) + jax.nn.logsumexp(x[:6])
                + 0.1 * jnp.sum(x[:6] ** 4))

    return f


@pytest.mark.parametrize("n_steps", [8, 40])
def test_each_problem_runs_the_sequential_algorithm_at_its_own_pace(n_steps):
    """In float64, where the batched arithmetic's rounding is far below the line search's
    tolerances, every problem of the lock-step fit makes the sequential driver's iterations:
    the same iterates (to 1e-12), objectives and number of evaluations; and the fit makes
    as many batched evaluations as its slowest problem makes evaluations (problems that need
    fewer do not wait, and the others are not evaluated again for them)."""
    calls: list = []
    f = _convex_counted(calls)
    with jax.enable_x64(True):
        scales = jnp.asarray(np.random.default_rng(1).uniform(0.5, 20.0, size=(4, 6)))
        x0 = jnp.concatenate([jnp.zeros((4, 6)), scales], axis=1)
        x_lock, v_lock, passes, evals = jax.jit(lambda a: L.minimize_lockstep(f, a, n_steps, counts=True))(x0)
        batched = len(calls) / x0.shape[0]  # a vmapped callback runs once per problem
        own = []
        for i in range(4):
            calls.clear()
            x, v = jax.jit(lambda a: L.minimize(f, a, n_steps))(x0[i])
            own.append(len(calls))
            np.testing.assert_allclose(x_lock[i], x, rtol=0, atol=1e-12)
            np.testing.assert_allclose(v_lock[i], v, rtol=1e-12)
    assert len(set(own)) > 1  # the problems need different numbers of evaluations
    assert batched == int(passes) + 1 == max(own)
    assert list(np.asarray(evals)) == own


def test_batched_problems_reach_the_sequential_optima_in_float32():
    calls = []
    scales = jnp.asarray(np.random.default_rng(1).uniform(0.5, 20.0, size=(4, 6)).astype(np.float32))

    def counted(x):  # strictly convex, a different conditioning per problem (its last 6 entries)
        jax.debug.callback(lambda _: calls.append(1), x[0])
        a, c = x[6:], jnp.arange(6.0)
        return jnp.sum(jax.lax.stop_gradient(a) * (x[:6] - c) ** 2) + jax.nn.logsumexp(x[:6])

    x0 = jnp.concatenate([jnp.zeros((4, 6)), scales], axis=1)
    x_lock, v_lock = jax.jit(lambda a: L.minimize_lockstep(counted, a, 40))(x0)
    batched_evals = len(calls) / x0.shape[0]  # a vmapped callback runs once per problem
    singles, own = [], []
    for i in range(4):
        calls.clear()
        singles.append(jax.jit(lambda a: L.minimize(counted, a, 40))(x0[i]))
        own.append(len(calls))
    assert v_lock.shape == (4, 40)
    for i, (x, v) in enumerate(singles):
        np.testing.assert_allclose(x_lock[i, :6], x[:6], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(v_lock[i, -1], v[-1], rtol=1e-6)
    # about as many batched evaluations as the slowest problem's own (float32 rounding may
    # move a line search by an evaluation), far fewer than all of theirs
    assert abs(batched_evals - max(own)) <= 2 and batched_evals < sum(own) / 2


def test_a_stopped_problem_stays_where_it_stopped():
    x0 = jnp.stack([jnp.ones(6), _starts(1)[0]])  # the first starts at the minimum: gradient 0
    x, values = jax.jit(lambda a: L.minimize_lockstep(_rosenbrock, a, 15))(x0)
    np.testing.assert_array_equal(x[0], jnp.ones(6))
    assert float(jnp.max(jnp.abs(values[0]))) == 0.0
    assert float(values[1, -1]) < float(_rosenbrock(x0[1]))


@pytest.mark.parametrize("variant", ["ts", "ps"])
def test_sag_lockstep_fits_reach_the_sequential_objectives(variant):
    rng = np.random.default_rng(3)
    n, m = 20_000, 8
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
    # the iterates in flat directions. At 20,000 rows and 60 steps the objectives reached agreed
    # to at most 1.1e-5 relative over seeds 3, 7 and 8, both variants, at LLVM levels 0 and 1;
    # at 2,000 rows one seed's partition in six split by up to 2.5e-4, with the gradient's terms
    # accumulated in either pass (2026-12-04), so the small size tests the rounding, not the fit
    np.testing.assert_allclose(v_lock[:, -1], v_seq[:, -1], rtol=1e-4)
    fitted = sag.fit(np.asarray(o), np.asarray(y), context={"embedding": z}, variant=variant, n_partitions=2,
                     n_steps=20, solver="lockstep")
    assert fitted.W.shape == (2, m, 3)
    # the library's default since 2026-12-05: a fit that names no solver is the lock-step fit
    default = sag.fit(np.asarray(o), np.asarray(y), context={"embedding": z}, variant=variant, n_partitions=2,
                      n_steps=20)
    assert sag.DEFAULT_SOLVER == "lockstep" == sag.SAGConfig.resolve().solver
    for field, a, b in zip(sag.SAGParams._fields, default, fitted):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=field)
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
        values, grads = jax.jit(jax.vmap(lambda t, vg=vg: vg(t, data, None)))(theta)  # the batched rule: blocks of 8192
        blocked = sag._objective_all(theta, *data, use_beta, True, block=1024)  # 11 blocks of 1024 and one of 736
        for p in range(3):
            one = jax.tree.map(lambda a, p=p: a[p], theta)
            value, grad = jax.value_and_grad(sag._objective)(one, *data, use_beta, True)
            np.testing.assert_allclose(values[p], value, rtol=2e-6)
            np.testing.assert_allclose(blocked[p], value, rtol=2e-6)
            for field in ("W", "b", "log_tau", "beta"):
                np.testing.assert_allclose(getattr(grads, field)[p], getattr(grad, field), rtol=1e-4, atol=1e-7)
        # the embedding also given in rows, as the lock-step fit passes it: the same bits
        with_rows = jax.jit(jax.vmap(lambda t, vg=vg: vg(t, data + (jnp.asarray(z),), None)))(theta)
        for a, b in zip(jax.tree.leaves((values, grads)), jax.tree.leaves(with_rows)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


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

    def both(th, d):  # one compiled program, as in the lock-step fit (run op by op, each op compiled on its own)
        auto = jax.vmap(jax.value_and_grad(
            lambda t: sag._objective_all(jax.tree.map(lambda a: a[None], t), *d, use_beta, head_bias, block=512)[0]))(th)
        return auto, sag._value_and_grad_stored(th, *d, use_beta, head_bias, block=512)

    auto, kept = jax.jit(both)(th, d)
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
