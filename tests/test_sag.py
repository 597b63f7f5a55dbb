"""Tests of SAG / VR-SAG (calib_jax.calibrators.sag) against scipy/sklearn references."""

from __future__ import annotations

import jax
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


def _np_objective(theta, o, y, z, m, K, lam, lam_v, head_bias):
    """The eq.-11 objective with the reference normalisation, in plain NumPy (float64)."""
    W = theta[:m * K].reshape(m, K)
    b = theta[m * K:m * K + K] if head_bias else np.zeros(K)
    log_tau = theta[-K:]
    h = z @ W + b
    lq = h - logsumexp(h, axis=1, keepdims=True)
    s = o[:, None] / np.exp(log_tau)[None, :]
    ll = -np.logaddexp(0.0, -(2 * y - 1)[:, None] * s)
    nll = -np.mean(logsumexp(lq + ll, axis=1))
    q, p = np.exp(lq), 1 / (1 + np.exp(-o))
    mu = (q * p[:, None]).sum(0) / q.sum(0)
    var = np.sum(q * (p[:, None] - mu[None, :]) ** 2) / len(o)
    return nll + lam * np.mean(W ** 2) + lam_v * var


@pytest.mark.parametrize("protocol, head_bias", [("paper", True), ("reference", False)])
def test_soft_fit_matches_a_scipy_minimisation_of_the_numpy_objective(data, protocol, head_bias):
    """The head + temperatures minimise eq. 11 with wd * mean(W^2): our L-BFGS optimum equals
    scipy's L-BFGS-B on a hand-written NumPy objective from the same start."""
    o, y, z = data
    o, y, z = o[:400].astype(np.float64), y[:400].astype(np.float64), z[:400, :3].astype(np.float64)
    m, K, lam, lam_v = 3, 2, 0.1, 0.5
    init = sag.init_params(jax.random.key(1), m, n_groups=K, n_partitions=1, head_bias=head_bias)
    prm = sag.fit(o.astype(np.float32), y.astype(np.float32), context={"embedding": z.astype(np.float32)},
                  protocol="paper", head_bias=head_bias, n_groups=K, n_partitions=1, lam=lam,
                  lam_v=lam_v, n_steps=100, init=init, min_support=0.0, min_events=0.0)
    x0 = np.concatenate([np.asarray(init.W[0]).ravel()]
                        + ([np.asarray(init.b[0])] if head_bias else []) + [np.asarray(init.log_tau[0])])
    args = (o, y, z, m, K, lam, lam_v, head_bias)
    ref = minimize(_np_objective, x0, args=args, method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000})
    ours = np.concatenate([np.asarray(prm.W[0]).ravel()]
                          + ([np.asarray(prm.b[0])] if head_bias else []) + [np.asarray(prm.log_tau[0])])
    f_ours = _np_objective(ours, *args)
    assert f_ours <= ref.fun + 1e-6                      # at least as good as scipy from the same start
    grad = approx_fprime(ours, _np_objective, 1e-7, *args)
    assert np.max(np.abs(grad)) < 1e-4                   # a stationary point of the NumPy objective
    polish = minimize(_np_objective, ours, args=args, method="L-BFGS-B",
                      options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000})
    assert polish.fun >= f_ours - 1e-6                   # scipy cannot improve on it


@pytest.fixture(scope="module")
def sag_vs_vrsag(data):
    o, y, z = data
    init = sag.init_params(jax.random.key(3), z.shape[1], n_groups=3, n_partitions=3)
    kw = dict(context={"embedding": z}, n_groups=3, n_partitions=3, lam=1e-3, n_steps=STEPS,
              init=init, variant="ps")
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


def test_vmapped_partitions_equal_sequential_fits(data, sag_vs_vrsag):
    o, y, z = data
    init, p_all, _ = sag_vs_vrsag
    for p in range(3):
        one = sag.fit(o, y, context={"embedding": z}, n_groups=3, n_partitions=1, lam=1e-3,
                      lam_v=0.0, n_steps=STEPS, variant="ps",
                      init=jax.tree.map(lambda a, p=p: a[p:p + 1], init))
        q_all = sag.memberships(p_all, z)[p]
        np.testing.assert_allclose(sag.memberships(one, z)[0], q_all, atol=2e-3)
        np.testing.assert_allclose(one.log_tau[0], p_all.log_tau[p], atol=2e-3)
        np.testing.assert_allclose(one.beta[0], p_all.beta[p], atol=2e-3)


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


# ------------------------------------------------------------------ experiment smoke tests
# Each runs the whole study on the tiny simulator (backbone trained once and cached).


@pytest.mark.slow
def test_ablation_and_grouping_smoke(tmp_path):
    from experiments import ablation, grouping

    rows = ablation.main(["--smoke", "--out", str(tmp_path / "ablation"), "--no-progress"])["rows"]
    assert {r[0] for r in rows} == {"simulator"}  # the smoke preset's one world
    assert {r[1] for r in rows} == {"partitions", "groups", "lam_v"}
    assert (tmp_path / "ablation" / "fig2.png").exists()
    rows = grouping.main(["--smoke", "--out", str(tmp_path / "grouping"), "--no-progress"])["rows"]
    assert (tmp_path / "grouping" / "fig7.pdf").exists()
    # within-group variance never exceeds the total variance (law of total variance)
    total = [r for r in rows if r[0].startswith("none")][0]
    for r in rows:
        assert r[3] <= total[3] * (1 + 1e-5) and r[4] <= total[4] * (1 + 1e-5)


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
