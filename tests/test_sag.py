"""Tests of SAG / VR-SAG (calib_jax.calibrators.sag) against scipy/sklearn references."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import approx_fprime, minimize, minimize_scalar
from scipy.special import logsumexp
from sklearn.linear_model import LogisticRegression

from calib_jax import losses
from calib_jax.calibrators import CalibrationFallbackWarning, platt, sag, temperature
from calib_jax.calibrators._base import REGISTRY

STEPS = 40


@pytest.fixture(scope="module")
def data():
    """Two latent regimes with opposite miscalibration, readable from the embedding."""
    rng = np.random.default_rng(0)
    n, m = 1500, 4
    z = rng.normal(size=(n, m)).astype(np.float32)
    true = -1.5 + 1.0 * z[:, 0]
    o = np.where(z[:, 1] > 0, 1.6 * true + 0.8, 0.6 * true - 0.6).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-true))).astype(np.float32)
    return o, y, z


def test_registered():
    for name in ("sag_ts", "sag_ps", "vrsag_ts", "vrsag_ps"):
        assert REGISTRY[name].needs == ("embedding",)
    assert REGISTRY["vrsag_ps"].defaults["lam_v"] == 0.5
    assert REGISTRY["sag_ts"].defaults["lam_v"] == 0.0


def test_protocol_defaults_shape_the_params(data):
    o, y, z = data
    paper = sag.fit(o, y, context={"embedding": z}, n_steps=2)
    ref = sag.fit(o, y, context={"embedding": z}, protocol="reference", n_steps=2)
    assert paper.W.shape == (10, z.shape[1], 3) and ref.W.shape == (20, z.shape[1], 2)
    assert not bool(paper.hard) and bool(ref.hard)
    assert np.any(np.asarray(paper.b) != 0.0)          # the paper's head has a bias (eq. 3)
    np.testing.assert_array_equal(np.asarray(ref.b), 0.0)  # the reference head has none


def test_k1_ts_equals_temperature_scaling(data):
    o, y, z = data
    prm = sag.fit(o, y, context={"embedding": z}, n_groups=1, n_partitions=1, lam=0.0,
                  variant="ts", n_steps=STEPS)

    def nll(t):
        s = o.astype(np.float64) / t
        return np.mean(np.logaddexp(0, s) - y * s)

    t_ref = minimize_scalar(nll, bounds=(0.05, 20), method="bounded", options={"xatol": 1e-8}).x
    np.testing.assert_allclose(np.exp(prm.log_tau[0, 0]), t_ref, rtol=2e-3)
    np.testing.assert_allclose(
        sag.predict(prm, o, context={"embedding": z}), 1 / (1 + np.exp(-o / t_ref)), atol=2e-4
    )


def test_k1_ps_equals_platt(data):
    o, y, z = data
    prm = sag.fit(o, y, context={"embedding": z}, n_groups=1, n_partitions=1, lam=0.0,
                  variant="ps", n_steps=STEPS)
    lr = LogisticRegression(C=1e10, tol=1e-10, max_iter=1000).fit(o[:, None].astype(np.float64), y)
    ref = lr.predict_proba(o[:, None].astype(np.float64))[:, 1]
    np.testing.assert_allclose(1 / np.exp(prm.log_tau[0, 0]), lr.coef_[0, 0], rtol=2e-3)
    np.testing.assert_allclose(prm.beta[0, 0], lr.intercept_[0], atol=2e-3)
    np.testing.assert_allclose(sag.predict(prm, o, context={"embedding": z}), ref, atol=2e-4)


def test_reference_one_partition_one_group_is_temperature_scaling_on_the_holdout(data):
    """Reference protocol, P = K = 1: every hold-out row is in the one group, so the model is
    temperature scaling fitted on the hold-out (calibration) split."""
    o, y, z = data
    h, c = slice(0, 600), slice(600, None)
    prm = sag.fit(o[c], y[c], context={"embedding": z[c]}, protocol="reference", n_groups=1,
                  n_partitions=1, n_steps=5, holdout={"logits": o[h], "labels": y[h], "embedding": z[h]})
    ts = temperature.fit(o[h], y[h])
    np.testing.assert_allclose(sag.predict(prm, o, context={"embedding": z}),
                               temperature.predict(ts, o), rtol=1e-5, atol=1e-7)
    assert int(prm.fallback[0, 0]) == 0


def _np_objective(theta, o, y, z, m, K, lam, lam_v, head_bias, with_grad=False):
    """The eq.-11 objective with the reference normalisation, in plain NumPy (float64), and
    its gradient derived by hand (checked against finite differences in the test):
    with r_ik = q_ik s_ik / sum_j q_ij s_ij the posterior of group k given the label,
    d(-log sum_k q s)/dh_ik = q_ik - r_ik, and the variance term's derivative through q."""
    W = theta[:m * K].reshape(m, K)
    b = theta[m * K:m * K + K] if head_bias else np.zeros(K)
    log_tau = theta[-K:]
    n = len(o)
    h = z @ W + b
    lq = h - logsumexp(h, axis=1, keepdims=True)
    sgn = (2 * y - 1)[:, None]
    s = o[:, None] / np.exp(log_tau)[None, :]
    ll = -np.logaddexp(0.0, -sgn * s)
    mix = logsumexp(lq + ll, axis=1)
    nll = -np.mean(mix)
    q, p = np.exp(lq), 1 / (1 + np.exp(-o))
    mu = (q * p[:, None]).sum(0) / q.sum(0)
    d = (p[:, None] - mu[None, :]) ** 2 / n
    f = nll + lam * np.mean(W ** 2) + lam_v * np.sum(q * d)
    if not with_grad:
        return f
    r = np.exp(lq + ll - mix[:, None])                    # posterior over groups
    g_h = (q - r) / n + lam_v * q * (d - np.sum(q * d, axis=1, keepdims=True))
    sig_neg = 1 / (1 + np.exp(sgn * s))                   # 1 - sigmoid(sgn * s)
    g_tau = np.sum(r * sig_neg * sgn * s, axis=0) / n     # d/d log tau
    g_W = z.T @ g_h + 2 * lam * W / W.size
    parts = [g_W.ravel()] + ([g_h.sum(0)] if head_bias else []) + [g_tau]
    return f, np.concatenate(parts)


@pytest.mark.parametrize("protocol, head_bias", [("paper", True), ("reference", False)])
def test_soft_fit_matches_a_scipy_minimisation_of_the_numpy_objective(protocol, head_bias):
    """The head + temperatures minimise eq. 11 with wd * mean(W^2) on 10^4 rows, full batch:
    our float32 L-BFGS optimum equals a float64 scipy L-BFGS-B minimisation of a hand-written
    NumPy objective from the same start, to 1e-5 in the loss."""
    rng = np.random.default_rng(5)
    n = 10_000
    z = rng.normal(size=(n, 3))
    true = -1.5 + 1.0 * z[:, 0]
    o = np.where(z[:, 1] > 0, 1.6 * true + 0.8, 0.6 * true - 0.6)
    y = (rng.random(n) < 1 / (1 + np.exp(-true))).astype(np.float64)
    o, z = o.astype(np.float32).astype(np.float64), z.astype(np.float32).astype(np.float64)
    m, K, lam, lam_v = 3, 2, 0.1, 0.5
    init = sag.init_params(jax.random.key(1), m, n_groups=K, n_partitions=1, head_bias=head_bias)
    prm = sag.fit(o.astype(np.float32), y.astype(np.float32), context={"embedding": z.astype(np.float32)},
                  protocol="paper", head_bias=head_bias, n_groups=K, n_partitions=1, lam=lam,
                  lam_v=lam_v, n_steps=100, init=init, min_support=0.0, min_events=0.0)
    x0 = np.concatenate([np.asarray(init.W[0]).ravel()]
                        + ([np.asarray(init.b[0])] if head_bias else []) + [np.asarray(init.log_tau[0])])
    args = (o, y, z, m, K, lam, lam_v, head_bias)
    grad_args = (*args, True)
    _, g0 = _np_objective(x0, *grad_args)
    np.testing.assert_allclose(g0, approx_fprime(x0, _np_objective, 1e-6, *args), atol=1e-6)
    ref = minimize(_np_objective, x0, args=grad_args, jac=True, method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000})
    ours = np.concatenate([np.asarray(prm.W[0]).ravel()]
                          + ([np.asarray(prm.b[0])] if head_bias else []) + [np.asarray(prm.log_tau[0])])
    f_ours = _np_objective(ours, *args)
    assert abs(f_ours - ref.fun) <= 1e-5, (f_ours, ref.fun)  # the same minimum as scipy's
    grad = approx_fprime(ours, _np_objective, 1e-7, *args)
    assert np.max(np.abs(grad)) < 1e-4                   # a stationary point of the NumPy objective
    polish = minimize(_np_objective, ours, args=grad_args, jac=True, method="L-BFGS-B",
                      options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000})
    assert polish.fun >= f_ours - 1e-5                   # scipy cannot improve on it


@pytest.fixture(scope="module")
def sag_vs_vrsag(data):
    o, y, z = data
    init = sag.init_params(jax.random.key(3), z.shape[1], n_groups=3, n_partitions=3)
    # the sequential solver: the bit-for-bit contract of the partitions below is its own
    kw = dict(context={"embedding": z}, n_groups=3, n_partitions=3, lam=1e-3, n_steps=STEPS,
              init=init, variant="ps", solver="sequential")
    return init, sag.fit(o, y, lam_v=0.0, **kw), sag.fit(o, y, lam_v=20.0, **kw)


def test_variance_penalty_reduces_within_group_variance(data, sag_vs_vrsag):
    o, y, z = data
    _, p_sag, p_vr = sag_vs_vrsag
    p_unc = 1 / (1 + np.exp(-o))
    wv = lambda prm: [float(losses.within_group_variance(p_unc, q))
                      for q in sag.memberships(prm, z)]
    v_sag, v_vr = wv(p_sag), wv(p_vr)
    assert np.all(np.array(v_vr) < np.array(v_sag)), (v_sag, v_vr)
    assert np.mean(v_vr) < 0.8 * np.mean(v_sag)


def test_grouping_beats_global_calibration(data, sag_vs_vrsag):
    o, y, z = data
    _, p_sag, _ = sag_vs_vrsag
    lr = LogisticRegression(C=1e10).fit(o[:, None].astype(np.float64), y)
    p_platt = lr.predict_proba(o[:, None].astype(np.float64))[:, 1]
    p = np.asarray(sag.predict(p_sag, o, context={"embedding": z}), np.float64)
    nll = lambda p: -np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))
    assert nll(p) < nll(p_platt) - 0.005


def test_partitions_equal_sequential_fits_bit_for_bit(data, sag_vs_vrsag):
    """With the sequential solver the P partitions of one fit are P independent L-BFGS runs: each
    equals the fit of that partition alone (one compiled lax.map body, so bit for bit on the
    CPU; the lock-step solver's batched sums round otherwise, tests/test_lbfgs_lockstep.py)."""
    o, y, z = data
    init, p_all, _ = sag_vs_vrsag
    for p in range(3):
        one = sag.fit(o, y, context={"embedding": z}, n_groups=3, n_partitions=1, lam=1e-3,
                      lam_v=0.0, n_steps=STEPS, variant="ps", solver="sequential",
                      init=jax.tree.map(lambda a, p=p: a[p:p + 1], init))
        for f in ("W", "b", "log_tau", "beta"):
            np.testing.assert_array_equal(getattr(one, f)[0], getattr(p_all, f)[p], err_msg=f)


@pytest.mark.parametrize("protocol, max_rows", [pytest.param("paper", None, marks=pytest.mark.slow),
                                                ("reference", None),
                                                pytest.param("paper", 700, marks=pytest.mark.slow)])
def test_fit_many_equals_sequential_fits(data, protocol, max_rows):
    """With the sequential solver, H fits in one program equal H calls of fit with the same keys,
    bit for bit on CPU (support checks and the reference protocol's hold-out stage included)."""
    o, y, z = data
    keys = jax.random.split(jax.random.key(11), 3)
    kw = dict(context={"embedding": z}, n_groups=2, n_partitions=2, n_steps=8, protocol=protocol,
              variant="ps", lam_v=0.5, max_rows=max_rows, solver="sequential")
    many = sag.fit_many(o, y, keys=keys, **kw)
    assert len(many) == 3
    for h in range(3):
        one = sag.fit(o, y, key=keys[h], **kw)
        for f, a, b in zip(one._fields, one, many[h]):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"fit {h}: {f}")
    assert not np.array_equal(np.asarray(many[0].W), np.asarray(many[1].W))
    with pytest.raises(ValueError, match="keys"):
        sag.fit_many(o, y, keys=[], **kw)
    with pytest.raises(ValueError, match="`key`"):
        sag.fit_many(o, y, keys=keys, key=keys[0], **kw)


@pytest.mark.parametrize("variant, head_bias, weighted", [("ps", True, True), ("ts", False, False)])
def test_fast_objective_equals_the_public_losses(data, variant, head_bias, weighted):
    """The fit's objective (ratio-of-sums mixture, transposed layout) is eq. 11 as the public
    ``losses`` compose it, in value and gradient; also far in the tails, where the
    sigmoid floor must not change anything that float32 can see."""
    import jax.numpy as jnp

    o, y, z = (jnp.asarray(a) for a in data)
    v = (jnp.asarray(np.random.default_rng(1).uniform(0.2, 3.0, len(o)), jnp.float32)
         if weighted else jnp.ones_like(o))
    theta = jax.tree.map(lambda a: a[0], sag.init_params(jax.random.key(2), z.shape[1],
                                                         n_groups=3, n_partitions=1))
    theta = theta._replace(beta=jnp.array([0.3, -0.2, 0.1]), log_tau=jnp.array([0.1, 0.5, -0.4]))
    lam, lam_v = jnp.float32(0.1), jnp.float32(0.5)
    use_beta = variant == "ps"

    def public(t):
        b = t.b if head_bias else jax.lax.stop_gradient(t.b)
        lq = jax.nn.log_softmax(jnp.matmul(z, t.W, precision="highest") + b[None, :], axis=1)
        beta = t.beta if use_beta else None
        return (losses.grouped_nll(o, y, lq, jnp.exp(t.log_tau), beta, weights=v)
                + losses.l2_penalty(t.W, lam=lam, reduction="mean")
                + losses.variance_penalty(jax.nn.sigmoid(o), jnp.exp(lq), lam_v=lam_v, weights=v))

    def fast(t, scale=1.0):
        return sag._objective(t, o * scale, 2 * y - 1, z.T, jax.nn.sigmoid(o * scale), v, lam,
                              lam_v, use_beta, head_bias)

    def one_loss(t):  # the packaged objective, group logits as its one membership convention
        b = t.b if head_bias else jax.lax.stop_gradient(t.b)
        return losses.vrsag_loss(o, y, jnp.matmul(z, t.W, precision="highest") + b[None, :], jnp.exp(t.log_tau), t.beta if use_beta else None,
                                 head_weights=t.W, lam=lam, lam_v=lam_v, weights=v)

    (f_ref, g_ref), (f_new, g_new) = jax.value_and_grad(public)(theta), jax.value_and_grad(fast)(theta)
    f_one, g_one = jax.value_and_grad(one_loss)(theta)
    np.testing.assert_allclose(f_new, f_ref, rtol=2e-6)
    np.testing.assert_allclose(f_one, f_ref, rtol=2e-6)
    for name, a, b, c in zip(theta._fields, g_new, g_ref, g_one):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-7, err_msg=name)
        np.testing.assert_allclose(c, b, rtol=1e-4, atol=2e-7, err_msg=name)
    # eagerly (concrete arrays) the same number as under grad
    np.testing.assert_allclose(float(one_loss(theta)), f_ref, rtol=2e-6)
    # logits 40x larger: sigmoid arguments reach |x| ~ 300, mostly clipped at -80 for one
    # group only; the loss stays finite and matches where another group explains the label
    f_big = fast(theta, 40.0)
    assert np.isfinite(float(f_big))
def test_lbfgs_stops_by_torchs_rules_and_runs_every_step_without_them():
    """The L-BFGS driver stops as torch.optim.LBFGS does (the reference's optimiser): on a quadratic,
    once the gradient is below tol_grad nothing is evaluated any more; with the rules off
    every iteration evaluates; the evaluation budget caps a fit that would go on."""
    import jax.numpy as jnp

    calls = []
    target = jnp.arange(1.0, 6.0)

    def f(x):
        jax.debug.callback(lambda _: calls.append(1), x[0])
        return jnp.sum((x - target) ** 2 * jnp.arange(1.0, 6.0))

    x, values = jax.jit(lambda x0: sag.minimize(f, x0, 40))(jnp.zeros(5))
    np.testing.assert_allclose(x, target, rtol=1e-6)
    stopped = len(calls)
    assert stopped < 40 and float(values[-1]) == float(values[-2])

    def rosenbrock(x):  # not solved in 15 iterations
        jax.debug.callback(lambda _: calls.append(1), x[0])
        return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    calls.clear()
    jax.block_until_ready(jax.jit(lambda x0: sag.minimize(rosenbrock, x0, 15, sag.StopRule(0.0, 0.0, jnp.inf)))(jnp.zeros(5)))
    assert len(calls) >= 16                           # every iteration evaluates (rules off)
    calls.clear()
    jax.block_until_ready(jax.jit(lambda x0: sag.minimize(rosenbrock, x0, 15, sag.StopRule(0.0, 0.0, 6.0)))(jnp.zeros(5)))
    assert len(calls) < 6 + 25 and len(calls) < 16    # the budget stops after the step that reaches it
    with pytest.raises(ValueError, match="max_evals"):
        sag.fit(np.zeros(20, np.float32), np.tile([0.0, 1.0], 10).astype(np.float32),
                context={"embedding": np.ones((20, 2), np.float32)}, max_evals=0)


@pytest.mark.parametrize("protocol", [pytest.param("paper", marks=pytest.mark.slow), "reference"])  # CI time
def test_predict_is_the_partition_average_of_eq8(data, protocol):
    """predict (fused, groups unrolled) equals eq. 8 written with the public memberships,
    soft (paper) and arg-max (reference), also when ``hard`` is traced."""
    o, y, z = data
    prm = sag.fit(o, y, context={"embedding": z}, protocol=protocol, n_groups=3, n_partitions=4,
                  n_steps=5, min_support=0.0, min_events=0.0)
    q = np.asarray(sag.memberships(prm, z), np.float64)                      # (P, n, K)
    s = o[None, :, None] / np.exp(np.asarray(prm.log_tau, np.float64))[:, None, :] + np.asarray(prm.beta)[:, None, :]
    ref = np.mean(np.sum(q / (1 + np.exp(-s)), axis=2), axis=0)
    np.testing.assert_allclose(sag.predict(prm, o, context={"embedding": z}), ref, rtol=2e-6, atol=1e-7)
    traced = jax.jit(lambda p_: sag._predict(p_, jax.numpy.asarray(o), jax.numpy.asarray(z)))(prm)
    np.testing.assert_allclose(traced, ref, rtol=2e-6, atol=1e-7)


def test_deterministic_per_key(data):
    o, y, z = data
    kw = dict(context={"embedding": z}, n_groups=3, n_partitions=3, lam=1e-3, n_steps=STEPS)
    a = sag.fit(o, y, key=jax.random.key(7), **kw)
    b = sag.fit(o, y, key=jax.random.key(7), **kw)
    c = sag.fit(o, y, key=jax.random.key(8), **kw)
    for x, x2 in zip(a, b):
        np.testing.assert_array_equal(x, x2)
    assert not np.allclose(a.W, c.W)


@pytest.mark.parametrize("variant", ["ts", "ps"])
def test_groups_without_support_take_the_global_calibrator(data, sag_vs_vrsag, variant):
    o, y, z = data
    init, fitted, _ = sag_vs_vrsag
    # every group below the support threshold -> the global calibrator of the variant
    with pytest.warns(CalibrationFallbackWarning, match="9 of 9 groups"):
        glob = sag.fit(o, y, context={"embedding": z}, n_groups=3, n_partitions=3, lam=1e-3,
                       n_steps=STEPS, init=init, min_support=1e9, variant=variant)
    assert np.all(np.asarray(glob.fallback) == 1)
    ref = (platt.predict(platt.fit(o, y), o) if variant == "ps"
           else temperature.predict(temperature.fit(o, y), o))
    np.testing.assert_allclose(sag.predict(glob, o, context={"embedding": z}), ref, rtol=1e-5, atol=1e-7)
    sup = sag.group_support(fitted, z)
    assert sup.shape == (3, 3) and np.all(np.asarray(sup) > 0)
    np.testing.assert_allclose(np.asarray(sup).sum(1), len(o), rtol=1e-4)


def test_reference_protocol_fits_platt_per_group_on_the_holdout(data):
    o, y, z = data
    h = slice(0, 700)
    prm = sag.fit(o[700:], y[700:], context={"embedding": z[700:]}, n_groups=3, n_partitions=3,
                  lam=1e-3, n_steps=STEPS, protocol="reference", variant="ps", key=jax.random.key(0),
                  holdout={"logits": o[h], "labels": y[h], "embedding": z[h]}, min_events=0.0,
                  min_support=0.0)
    assert bool(prm.hard)
    q = np.asarray(sag.memberships(prm, z))
    assert set(np.unique(q)) <= {0.0, 1.0}
    # each group's (tau, beta) is the Platt fit on its hold-out rows (sklearn reference)
    g = q[0, h].argmax(1)
    checked = 0
    for k in range(3):
        rows = g == k
        if rows.sum() < 50 or len(np.unique(y[h][rows])) < 2:
            continue
        lr = LogisticRegression(C=1e10, tol=1e-10).fit(o[h][rows, None].astype(np.float64), y[h][rows])
        np.testing.assert_allclose(prm.beta[0, k], lr.intercept_[0], atol=5e-3)
        np.testing.assert_allclose(np.exp(-prm.log_tau[0, k]), lr.coef_[0, 0], rtol=5e-3)
        checked += 1
    assert checked >= 1


def test_bad_input_raises(data):
    o, y, z = data
    with pytest.raises(ValueError, match="embedding"):
        sag.fit(o, y)
    with pytest.raises(ValueError, match="embedding"):
        sag.fit(o, y, context={"embedding": z[:10]})
    with pytest.raises(ValueError, match="variant"):
        sag.fit(o, y, context={"embedding": z}, variant="xx")
    with pytest.raises(ValueError, match="protocol"):
        sag.fit(o, y, context={"embedding": z}, protocol="soft")
    with pytest.raises(ValueError, match="labels"):
        sag.fit(o, y + 2, context={"embedding": z})
    with pytest.raises(ValueError, match="lam_v"):
        sag.fit(o, y, context={"embedding": z}, lam_v=-1.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(lam=float("inf")), "`lam` must be a finite number >= 0"),  # the fit returned its random initial heads
    (dict(lam_v=float("inf")), "`lam_v`"), (dict(lam=True), "`lam`"), (dict(lam="0.1"), "`lam`"),
    (dict(tau_init=float("inf")), "`tau_init` must be a finite number > 0"),  # 0.5 for every row
    (dict(tau_init="1.5"), "`tau_init`"), (dict(min_support=float("inf")), "`min_support`"),
    (dict(tol_grad=float("inf")), "`tol_grad`"), (dict(max_evals=float("nan")), "`max_evals` must be a number >= 1"),
    (dict(head_bias="no"), "`head_bias` must be True or False"),  # "no" is true: a head with a bias
    (dict(standardize="no"), "`standardize` must be True or False")])
def test_an_option_that_fits_nothing_or_something_else_is_refused_by_name(data, kwargs, match):
    o, y, z = data
    with pytest.raises(ValueError, match=match):
        sag.fit(o, y, context={"embedding": z}, n_steps=2, **kwargs)


def test_an_infinite_max_evals_is_no_cap():  # the study's sag_stop="none" and the benchmarks' every-step fits
    assert sag.SAGConfig.resolve(max_evals=float("inf")).stop.max_evals == float("inf")


def test_the_penalties_may_be_traced_values_of_a_jitted_caller():
    cfg = jax.jit(lambda lam: sag.SAGConfig.resolve(lam=lam, lam_v=lam).lam_v > 0)(jnp.float32(0.1))
    assert bool(cfg)
    with pytest.raises(ValueError, match="`tau_init` must be a concrete number"):
        jax.jit(lambda t: sag.SAGConfig.resolve(tau_init=t).n_steps)(jnp.float32(1.5))


def test_max_rows_fits_on_a_uniform_subset(data):
    """``max_rows`` fits exactly the model one gets from the explicit subset of rows."""
    o, y, z = data
    k = jax.random.key(3)
    kw = dict(n_groups=2, n_partitions=2, lam=1e-3, n_steps=10, standardize=False, min_support=0.0,
              min_events=0.0)
    sub = sag.fit(o, y, key=k, context={"embedding": z}, max_rows=500, **kw)
    rows = np.asarray(jax.random.choice(jax.random.fold_in(k, 1), len(o), (500,), replace=False))
    assert len(np.unique(rows)) == 500
    ref = sag.fit(o[rows], y[rows], key=k, context={"embedding": z[rows]}, **kw)
    for a, b in zip(sub[:4], ref[:4]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="max_rows"):
        sag.fit(o, y, key=k, context={"embedding": z}, max_rows=0, **kw)


def test_the_examples_of_the_groups_module_run():
    """The private module of the heads' memberships, the second stage and the fail-safe checks
    (not in the API reference's docstring check, which covers the public modules)."""
    import doctest

    import calib_jax.calibrators._sag_groups as G

    result = doctest.testmod(G, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 6 and result.failed == 0, result


def test_standardize_centres_and_scales_with_the_weighted_moments(data):
    """``standardize=True`` reads weights as repeated rows, as the rest of the fit does: the centre
    and scale are the plain moments of the repeated embedding (NumPy, float64), and fit_many's
    per-fit weights standardise each fit with its own moments (each fit equals fit's, bit for bit)."""
    o, y, z = data
    counts = np.random.default_rng(4).integers(1, 4, len(o))
    kw = dict(context={"embedding": z}, n_groups=2, n_partitions=1, n_steps=3, standardize=True,
              min_support=0.0, min_events=0.0)
    weighted = sag.fit(o, y, weights=counts.astype(np.float32), **kw)
    repeated = np.repeat(z, counts, axis=0).astype(np.float64)
    np.testing.assert_allclose(weighted.z_mean, repeated.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weighted.z_scale, repeated.std(0), rtol=1e-5)
    unweighted = sag.fit(o, y, **kw)
    np.testing.assert_allclose(unweighted.z_mean, z.astype(np.float64).mean(0), rtol=1e-5, atol=1e-6)
    keys = jax.random.split(jax.random.key(5), 2)
    rows = np.stack([counts, counts[::-1]]).astype(np.float32)
    many = sag.fit_many(o, y, keys=keys, weights=rows, **kw)
    assert not np.allclose(many[0].z_mean, many[1].z_mean)
    for h in range(2):
        one = sag.fit(o, y, key=keys[h], weights=rows[h], **kw)
        for f, a, b in zip(one._fields, one, many[h]):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"fit {h}: {f}")
