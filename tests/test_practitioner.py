"""The practitioner's panel (NE, calibration ratio, GAUC) and the calibration tests with
p-values, each against an independent reference: NumPy formulas written from torchrec's
definitions, scikit-learn's AUC per user, probcal's tests, SciPy's binomial intervals.
Weights are frequency weights: integer weights must equal the duplicated rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import probcal.metrics as pm
import pytest
import scipy.stats as st
from backend import OPTIMIZED
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import roc_auc_score

import calib_jax as cj
from calib_jax import bootstrap as bs
from calib_jax import inference as T
from calib_jax.decompositions import corp
from calib_jax.metrics._practitioner import USER_WEIGHTS


def _log(n=3000, seed=0, slope=1.0, users=200):
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.5, 1.0, n)
    p = 1 / (1 + np.exp(-z))
    y = (rng.random(n) < 1 / (1 + np.exp(-slope * z))).astype(np.float64)
    w = rng.integers(1, 4, n).astype(np.float64)
    u = rng.integers(0, users, n)
    return p, y, w, u


def _dup(w, *arrays):
    idx = np.repeat(np.arange(len(w)), w.astype(int))
    return [a[idx] for a in arrays]


# ------------------------------------------------------------------ panel


def _torchrec_ne(p, y, w, eta=1e-7):
    """torchrec's NE: cross-entropy sum / weight / entropy of the mean label."""
    pc = np.clip(p, eta, 1 - eta)
    ce = -np.sum(w * (y * np.log(pc) + (1 - y) * np.log(1 - pc)))
    m = np.sum(w * y) / np.sum(w)
    return ce / np.sum(w) / -(m * np.log(m) + (1 - m) * np.log(1 - m))


def test_ne_and_calibration_ratio_match_torchrec_formulas_with_weights():
    p, y, w, u = _log()
    np.testing.assert_allclose(cj.metrics.normalized_entropy(p, y, weights=w), _torchrec_ne(p, y, w), rtol=2e-5)
    np.testing.assert_allclose(cj.metrics.normalized_entropy(p, y), _torchrec_ne(p, y, np.ones_like(p)), rtol=2e-5)
    np.testing.assert_allclose(cj.metrics.calibration_ratio(p, y, weights=w),
                               np.sum(w * p) / np.sum(w * y), rtol=1e-5)
    # frequency weights: equal to the duplicated rows
    pd, yd = _dup(w, p, y)
    np.testing.assert_allclose(cj.metrics.normalized_entropy(p, y, weights=w),
                               cj.metrics.normalized_entropy(pd, yd), rtol=2e-5)
    # PCOC is 1 + bias
    np.testing.assert_allclose(cj.metrics.calibration_ratio(p, y), 1 + cj.metrics.bias(p, y), rtol=1e-5)


def test_per_level_ne_and_ratio():
    p, y, w, _ = _log(n=2000)
    g = np.arange(2000) % 7
    y[g == 6] = 0.0  # a level without a click: both undefined there
    ne = cj.metrics.normalized_entropy_by_group(p, y, g, n_groups=8, weights=w)
    cr = cj.metrics.calibration_ratio_by_group(p, y, g, n_groups=8, weights=w)
    for k in range(6):
        m = g == k
        np.testing.assert_allclose(ne.value[k], _torchrec_ne(p[m], y[m], w[m]), rtol=2e-5)
        np.testing.assert_allclose(cr.value[k], np.sum(w[m] * p[m]) / np.sum(w[m] * y[m]), rtol=1e-5)
        np.testing.assert_allclose(ne.weight[k], w[m].sum(), rtol=1e-6)
    assert not bool(ne.defined[6]) and np.isnan(ne.value[6]) and not bool(cr.defined[6])
    assert not bool(ne.defined[7]) and float(ne.weight[7]) == 0.0  # empty level


def _gauc_reference(s, y, u, w, user_weight="impressions"):
    num = den = 0.0
    skipped = 0
    for uu in np.unique(u):
        m = u == uu
        if y[m].min() == y[m].max():
            skipped += 1
            continue
        a = roc_auc_score(y[m], s[m], sample_weight=w[m])
        om = {"impressions": w[m].sum(), "clicks": (w[m] * y[m]).sum(), "equal": 1.0}[user_weight]
        num += om * a
        den += om
    return num / den, skipped


@pytest.mark.parametrize("user_weight", USER_WEIGHTS)
def test_gauc_matches_sklearn_per_user(user_weight):
    p, y, w, u = _log(n=4000, users=300)
    s = np.round(p, 2)  # ties within users
    u = u * 1000 - 50_000  # any integers
    ref, skipped = _gauc_reference(s, y, u, w, user_weight)
    r = cj.metrics.gauc(s, y, u, weights=w, user_weight=user_weight)
    np.testing.assert_allclose(r.value, ref, rtol=1e-5)
    assert int(r.skipped) == skipped and int(r.users) == len(np.unique(u)) - skipped
    # jit: the same number
    jr = jax.jit(lambda a, b, c, d: cj.metrics.gauc(a, b, c, weights=d, user_weight=user_weight))(s, y, u, w)
    np.testing.assert_allclose(jr.value, r.value, rtol=1e-6)


def test_panel_errors_name_the_problem():
    with pytest.raises(ValueError, match="single class"):
        cj.metrics.normalized_entropy(np.array([.2, .3]), np.array([0., 0.]))
    with pytest.raises(ValueError, match="no click"):
        cj.metrics.calibration_ratio(np.array([.2, .3]), np.array([0., 0.]))
    with pytest.raises(ValueError, match="GAUC is undefined"):
        cj.metrics.gauc(np.array([.2, .3]), np.array([0., 1.]), np.array([0, 1]))
    with pytest.raises(ValueError, match="users"):
        cj.metrics.gauc(np.array([.2, .3]), np.array([0., 1.]), np.array([0.5, 1]))
    with pytest.raises(ValueError, match="user_weight"):
        cj.metrics.gauc(np.array([.2, .3]), np.array([0., 1.]), np.array([0, 0]), user_weight="rows")
    # under jit a failed check is NaN, never a plausible number
    assert np.isnan(jax.jit(cj.metrics.normalized_entropy)(jnp.array([.2, .3]), jnp.array([0., 0.])))


# ------------------------------------------------------------------ tests


def test_spiegelhalter_matches_probcal_and_duplicated_rows():
    p, y, w, _ = _log(slope=0.8)
    r = T.spiegelhalter_z(p, y)
    ref = pm.spiegelhalter_z(y, p)
    np.testing.assert_allclose([r.z, r.p_value], [ref.z, ref.p_value], rtol=2e-4, atol=1e-7)
    pd, yd = _dup(w, p, y)
    rw, refd = T.spiegelhalter_z(p, y, weights=w), pm.spiegelhalter_z(yd, pd)
    np.testing.assert_allclose([rw.z, rw.p_value], [refd.z, refd.p_value], rtol=2e-4, atol=1e-7)


def test_hosmer_lemeshow_matches_probcal_and_numpy():
    p, y, w, _ = _log(n=3000, slope=0.9)
    for ddof in (0, 2):
        r, ref = T.hosmer_lemeshow(p, y, ddof=ddof), pm.hosmer_lemeshow(y, p, ddof=ddof)
        np.testing.assert_allclose([r.statistic, r.df, r.p_value], [ref.statistic, ref.df, ref.p_value],
                                   rtol=2e-4)
    # weights with explicit groups: the classical formula with n_g = sum of weights
    g = np.minimum((p * 20).astype(int), 9)
    r = T.hosmer_lemeshow(p, y, weights=w, groups=g)
    n_g, o, e = (np.bincount(g, x, 10) for x in (w, w * y, w * p))
    keep = n_g > 0
    stat = np.sum((o - e)[keep] ** 2 / (e[keep] * (1 - e[keep] / n_g[keep])))
    np.testing.assert_allclose(r.statistic, stat, rtol=2e-5)
    assert int(r.df) == keep.sum()
    np.testing.assert_allclose(r.p_value, st.chi2.sf(stat, keep.sum()), rtol=2e-4)
    pd, yd, gd = _dup(w, p, y, g)
    np.testing.assert_allclose(T.hosmer_lemeshow(pd, yd, groups=gd).statistic, stat, rtol=2e-5)


def test_cox_matches_probcal_and_duplicated_rows():
    p, y, w, _ = _log(n=4000, slope=0.7)
    r = T.cox_calibration(p, y)
    ref = pm.calibration_test(y, p)
    assert bool(r.converged)
    np.testing.assert_allclose([r.intercept, r.slope], [ref.alpha, ref.beta], atol=2e-4)
    np.testing.assert_allclose(r.statistic, ref.statistic, rtol=1e-3)
    np.testing.assert_allclose(r.in_the_large, pm.calibration_intercept(y, p), atol=2e-4)
    pd, yd = _dup(w, p, y)
    rw, refd = T.cox_calibration(p, y, weights=w), pm.calibration_test(yd, pd)
    np.testing.assert_allclose([rw.intercept, rw.slope], [refd.alpha, refd.beta], atol=2e-4)
    np.testing.assert_allclose(rw.statistic, refd.statistic, rtol=1e-3)


def _np_mcb(p, y, w):
    fit = IsotonicRegression(out_of_bounds="clip").fit(p, y, sample_weight=w).predict(p)
    return np.sum(w * ((y - p) ** 2 - (y - fit) ** 2)) / np.sum(w)


def test_corp_test_statistic_and_p_value_against_numpy():
    p, y, w, _ = _log(n=800, slope=0.8)
    key = jax.random.key(3)
    r = T.corp_test(p, y, key=key, n_resamples=50)
    np.testing.assert_allclose(r.mcb, _np_mcb(p, y, np.ones_like(p)), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(r.mcb, corp(p, y).mcb, rtol=1e-4, atol=1e-7)
    # the p-value from the same null draws, recomputed with scikit-learn's isotonic regression
    pj = jnp.asarray(p, jnp.float32)
    null = [_np_mcb(p, np.asarray(jax.random.binomial(k, jnp.ones_like(pj), pj), np.float64), np.ones_like(p))
            for k in jax.random.split(key, 50)]
    np.testing.assert_allclose(r.p_value, (1 + np.sum(np.array(null) >= float(r.mcb) - 1e-7)) / 51, atol=1e-6)
    # frequency weights: the statistic of the duplicated rows
    pd, yd = _dup(w, p, y)
    np.testing.assert_allclose(T.corp_test(p, y, weights=w, key=key, n_resamples=5).mcb,
                               _np_mcb(pd, yd, np.ones_like(pd)), rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError, match="integers"):
        T.corp_test(p, y, weights=w + 0.5, key=key, n_resamples=5)


@pytest.mark.parametrize("method", ["clopper-pearson", "jeffreys"])
def test_binomial_interval_matches_scipy(method):
    n = np.array([0, 1, 7, 40, 40, 40, 40, 1000, 1000])
    k = np.array([0, 1, 3, 0, 1, 17, 40, 2, 998])
    r = T.binomial_interval(k, n, method=method, level=0.9)
    for i, (kk, nn) in enumerate(zip(k, n, strict=True)):
        if nn == 0:
            lo, hi = 0.0, 1.0
        elif method == "clopper-pearson":
            lo, hi = st.binomtest(int(kk), int(nn)).proportion_ci(0.9, method="exact")
        else:
            lo, hi = st.beta.ppf([0.05, 0.95], kk + 0.5, nn - kk + 0.5)
            lo, hi = (0.0 if kk == 0 else lo), (1.0 if kk == nn else hi)
        np.testing.assert_allclose([r.lo[i], r.hi[i]], [lo, hi], atol=2e-6)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        T.binomial_interval(5, 3)
    with pytest.raises(ValueError, match="method"):
        T.binomial_interval(1, 3, method="wald")


def test_tests_are_jit_and_vmap_able():
    p, y, _, _ = _log(n=500)
    P = jnp.stack([jnp.asarray(p, jnp.float32)] * 3)
    Y = jnp.stack([jnp.asarray(y, jnp.float32), 1 - jnp.asarray(y, jnp.float32), jnp.asarray(y, jnp.float32)])
    z = jax.vmap(lambda a, b: T.spiegelhalter_z(a, b).z)(P, Y)
    np.testing.assert_allclose(z[0], T.spiegelhalter_z(p, y).z, rtol=1e-5)
    np.testing.assert_allclose(z[2], z[0])
    hl = jax.vmap(lambda a, b: T.hosmer_lemeshow(a, b).statistic)(P, Y)
    np.testing.assert_allclose(hl[0], T.hosmer_lemeshow(p, y).statistic, rtol=1e-5)
    cx = jax.jit(jax.vmap(lambda a, b: T.cox_calibration(a, b).slope))(P, Y)
    np.testing.assert_allclose(cx[0], T.cox_calibration(p, y).slope, rtol=1e-4)


def _size(reject, n_logs):
    rate = float(np.mean(reject))
    return rate, abs(rate - 0.05) <= 0.02


@pytest.mark.optimized_codegen  # tests/conftest.py: its programs run long at LLVM level 0
def test_false_positive_rate_on_calibrated_logs_is_nominal():
    """On 2000 calibrated logs (y ~ Bernoulli(p)) each test rejects at 5% within +-2 points
    (the binomial standard error of a rate over 2000 logs is 0.5 points); Hosmer-Lemeshow
    with the in-sample ddof=2 on these out-of-sample scores rejects too often."""
    n_logs, n = 2000, 2000
    key = jax.random.key(11)
    kz, ky = jax.random.split(key)
    P = jax.nn.sigmoid(jax.random.normal(kz, (n_logs, n)) - 1.5)
    Y = (jax.random.uniform(ky, (n_logs, n)) < P).astype(jnp.float32)
    pz = jax.jit(jax.vmap(lambda a, b: T.spiegelhalter_z(a, b).p_value))(P, Y)
    hl0 = jax.jit(jax.vmap(lambda a, b: T.hosmer_lemeshow(a, b).p_value))(P, Y)
    hl2 = jax.jit(jax.vmap(lambda a, b: T.hosmer_lemeshow(a, b, ddof=2).p_value))(P, Y)
    cox = jax.jit(jax.vmap(lambda a, b: T.cox_calibration(a, b).p_value))(P, Y)
    rates = {name: _size(np.asarray(v) < 0.05, n_logs) for name, v in
             (("spiegelhalter", pz), ("hosmer_lemeshow", hl0), ("cox", cox))}
    assert all(ok for _, ok in rates.values()), rates
    assert float(np.mean(np.asarray(hl2) < 0.05)) > 0.08


@pytest.mark.slow
def test_corp_test_size_and_power():
    """The CORP test on 400 calibrated logs of 500 rows (B = 99 null draws each) rejects at
    5% within +-2.5 points (binomial s.e. 1.1 points); on logs over-predicted by
    p -> p^1.3 it rejects most of the time."""
    n_logs, n = 400, 500
    rng = np.random.default_rng(5)
    # one program called 450 times: compiled at the default LLVM level (tests/backend.py)
    test = jax.jit(lambda p, y, k: T.corp_test(p, y, key=k, n_resamples=99).p_value, compiler_options=OPTIMIZED)
    rej, power = [], []
    for i in range(n_logs):
        p = 1 / (1 + np.exp(-rng.normal(-1.0, 1.0, n)))
        y = (rng.random(n) < p).astype(np.float64)
        rej.append(float(test(p, y, jax.random.key(i))) < 0.05)
        if i < 50:
            y2 = (rng.random(n) < p ** 1.3).astype(np.float64)
            power.append(float(test(p, y2, jax.random.key(i))) < 0.05)
    assert abs(np.mean(rej) - 0.05) <= 0.025, np.mean(rej)
    assert np.mean(power) > 0.6, np.mean(power)


def test_debiased_gap_matches_numpy_and_removes_the_plug_in_bias():
    """The l2 form is Kumar et al.'s unbiased estimator: on 4000 logs of one fixed partition
    its mean equals the true squared gap within 3 standard errors, while the plug-in's mean is
    above it. The l1 form corrects to first order only: with gaps below their noise (60 rows per
    group) it removes more than half of the plug-in's bias (measured: 57%), not all of it."""
    rng = np.random.default_rng(0)
    n_logs, k, n_k = 4000, 6, 60
    pi = np.array([0.05, 0.1, 0.2, 0.3, 0.5, 0.7])
    p = pi + np.array([0.0, 0.01, -0.02, 0.0, 0.05, -0.01])
    sy = rng.binomial(n_k, pi, size=(n_logs, k)).astype(float)
    w = np.full((n_logs, k), float(n_k))
    sp = w * p
    l2, l1 = np.asarray(bs.debiased_gap(w, sp, sy, "l2")), np.asarray(bs.debiased_gap(w, sp, sy, "l1"))
    g = (sp - sy) / w
    yb = sy / w
    np.testing.assert_allclose(l2, np.mean(g * g - yb * (1 - yb) / (n_k - 1), axis=1), rtol=1e-5, atol=1e-9)
    true2, true1 = np.mean((p - pi) ** 2), np.mean(np.abs(p - pi))
    assert abs(l2.mean() - true2) < 3 * l2.std() / np.sqrt(n_logs)
    assert np.mean(g * g, axis=1).mean() > true2 + 10 * l2.std() / np.sqrt(n_logs)
    plug1 = np.mean(np.abs(g), axis=1)
    assert abs(l1.mean() - true1) < 0.5 * (plug1.mean() - true1)
    lo, hi = bs.bias_corrected_interval(0.02, 0.015, np.array([0.01, 0.02, 0.03]), level=0.5)
    np.testing.assert_allclose([lo, hi], [0.015 - 0.005, 0.025 - 0.005])


@pytest.mark.optimized_codegen  # tests/conftest.py: its programs run long at LLVM level 0
@pytest.mark.slow
def test_report_intervals_cover_the_truth_on_simulated_logs():
    """Coverage of the 95% intervals on 200 simulated 4000-row logs (the committed study,
    figures/interval_coverage, has 500+): the bias-corrected intervals of ECE and LCCE cover
    the population error on the metric's partition, the percentile interval of the biased
    plug-in ECE does not, and Clopper-Pearson covers a reliability bin with ~3 clicks."""
    from experiments import interval_coverage as ic

    rng = np.random.default_rng(1)
    logs = [ic.one_log(rng, jax.random.key(i), 4000, 100) for i in range(200)]
    cov = {(r[0], r[1]): r[3] for r in ic.coverage(logs)}
    assert cov[("ece", "bias-corrected")] >= 0.92, cov
    assert cov[("lcce", "bias-corrected")] >= 0.90, cov
    assert cov[("ece", "percentile")] < 0.75, cov
    assert cov[("bin", "clopper-pearson")] >= 0.95, cov
