"""Classic calibrators against independent references (scipy, scikit-learn, betacal,
plain NumPy) and their invariances (weights == repeated rows, vmap == loop, AUC)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, log_expit

from calib_jax.calibrators import (
    REGISTRY,
    CalibrationFallbackWarning,
    beta,
    histogram,
    ilps,
    isotonic,
    platt,
    temperature,
)

N = 2000


def _data(rng, n=N, scale=2.0, link=lambda z: z / 2.3 - 0.2):
    z = rng.normal(size=n) * scale
    y = (rng.uniform(size=n) < expit(link(z))).astype(np.float64)
    # float32-representable logits so the float32 library and float64 references see the
    # same inputs.
    return z.astype(np.float32).astype(np.float64), y


def _nll(p, y):
    p = np.clip(np.asarray(p, np.float64), 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


# ---------------------------------------------------------------------------------------
# Temperature: scipy bounded scalar minimisation of the same NLL in float64.
@pytest.mark.parametrize("true_t", [0.3, 1.0, 2.3, 8.0])
def test_temperature_matches_scipy(rng, true_t):
    z, y = _data(rng, link=lambda z: z / true_t)

    def nll(t):
        u = z / t
        return -np.mean(y * log_expit(u) + (1 - y) * log_expit(-u))

    ref = minimize_scalar(nll, bounds=(0.01, 100.0), method="bounded",
                          options={"xatol": 1e-10}).x
    params = temperature.fit(z, y)
    assert not bool(params.fallback)
    np.testing.assert_allclose(float(params.temperature), ref, rtol=2e-5)


# Platt: scikit-learn LogisticRegression with a huge C (no effective ridge).
def test_platt_matches_sklearn_logistic_regression(rng):
    from sklearn.linear_model import LogisticRegression

    z, y = _data(rng, link=lambda z: 0.6 * z - 0.4)
    lr = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(z[:, None], y)
    params = platt.fit(z, y)
    np.testing.assert_allclose(float(params.a), lr.coef_[0, 0], atol=2e-5)
    np.testing.assert_allclose(float(params.b), lr.intercept_[0], atol=2e-5)
    np.testing.assert_allclose(np.asarray(platt.predict(params, z)),
                               lr.predict_proba(z[:, None])[:, 1], atol=1e-5)


def test_platt_smoothed_targets_match_scipy(rng):
    z, y = _data(rng)
    npos, nneg = y.sum(), (1 - y).sum()
    t = np.where(y > 0, (npos + 1) / (npos + 2), 1 / (nneg + 2))

    def loss(th):
        u = th[0] * z + th[1]
        return -np.mean(t * log_expit(u) + (1 - t) * log_expit(-u))

    ref = minimize(loss, np.array([1.0, 0.0]), method="BFGS", options={"gtol": 1e-10}).x
    params = platt.fit(z, y, smooth_targets=True)
    np.testing.assert_allclose([float(params.a), float(params.b)], ref, atol=5e-5)


# Beta: the betacal package (Kull et al.'s reference implementation).
@pytest.mark.parametrize(
    "link, dropped",
    [
        (lambda z: 0.7 * z - 0.3, None),
        (lambda z: np.where(z > 0, 2.0 * z, 0.2 * z), "a"),
        (lambda z: np.where(z > 0, 0.2 * z, 1.5 * z), "b"),
    ],
)
def test_beta_matches_betacal(rng, link, dropped):
    from betacal import BetaCalibration

    z, y = _data(rng, link=link)
    ref = BetaCalibration("abm").fit(expit(z), y)
    a_ref, b_ref, _ = ref.calibrator_.map_
    params = beta.fit(z, y)
    ours = np.asarray(beta.predict(params, z), np.float64)
    theirs = ref.predict(expit(z))
    # betacal stops at scikit-learn's default tol=1e-4: compare predictions loosely and the
    # objective tightly (ours may only be better).
    np.testing.assert_allclose(ours, theirs, atol=2e-3)
    assert _nll(ours, y) <= _nll(theirs, y) + 1e-6
    assert (float(params.a) == 0.0) == (a_ref == 0) == (dropped == "a")
    assert (float(params.b) == 0.0) == (b_ref == 0) == (dropped == "b")


# ---------------------------------------------------------------------------------------
# Isotonic: scikit-learn IsotonicRegression(out_of_bounds="clip").
def test_isotonic_matches_sklearn_with_ties_and_weights(rng):
    from sklearn.isotonic import IsotonicRegression

    z, y = _data(rng)
    z = np.round(z, 1)  # many ties
    w = rng.integers(0, 4, size=z.shape[0]).astype(np.float64)
    z_new = np.linspace(-9.0, 9.0, 777).astype(np.float32).astype(np.float64)
    for weights in (None, w):
        ref = IsotonicRegression(out_of_bounds="clip").fit(z, y, sample_weight=weights)
        params = isotonic.fit(z, y, weights=weights)
        got = np.asarray(isotonic.predict(params, z_new))
        np.testing.assert_allclose(got, ref.predict(z_new), atol=1e-6)
        assert np.all(np.diff(got) >= 0)
        step = isotonic.fit(z, y, weights=weights, interpolation="step")
        keep = weights is None or None
        zs = z if keep else z[w > 0]
        np.testing.assert_allclose(np.asarray(isotonic.predict(step, zs)), ref.predict(zs),
                                   atol=1e-6)


def test_isotonic_prob_space_matches_sklearn_on_probabilities_x64(rng):
    from sklearn.isotonic import IsotonicRegression

    z, y = _data(rng)
    z_new = np.linspace(-8.0, 8.0, 501)
    with jax.enable_x64(True):
        params = isotonic.fit(z, y, x_space="prob")
        got = np.asarray(isotonic.predict(params, jnp.asarray(z_new)))
    ref = IsotonicRegression(out_of_bounds="clip").fit(expit(z), y).predict(expit(z_new))
    np.testing.assert_allclose(got, ref, atol=1e-10)


def test_isotonic_fit_refuses_tracing(rng):
    z, y = _data(rng, n=50)
    with pytest.raises(ValueError, match="concrete"):
        jax.jit(lambda a, b: isotonic.fit(a, b).y_knots)(z, y)
    params = isotonic.fit(z, y)
    out = jax.jit(isotonic.predict)(params, jnp.asarray(z))  # predict is jit-able
    assert np.all(np.isfinite(np.asarray(out)))


# ---------------------------------------------------------------------------------------
# Histogram binning: naive NumPy loop.
def _hist_reference(p, y, w, edges, p_new, empty):
    m = len(edges) - 1
    idx = np.clip(np.searchsorted(edges[1:-1], p, side="right"), 0, m - 1)
    idx_new = np.clip(np.searchsorted(edges[1:-1], p_new, side="right"), 0, m - 1)
    out = np.empty_like(p_new)
    for i, (b, q) in enumerate(zip(idx_new, p_new)):
        mask = idx == b
        if w[mask].sum() > 0:
            out[i] = np.sum(w[mask] * y[mask]) / np.sum(w[mask])
        else:
            out[i] = q if empty == "identity" else 0.5 * (edges[b] + edges[b + 1])
    return out


@pytest.mark.parametrize("empty", ["identity", "center"])
def test_histogram_uniform_matches_numpy(rng, empty):
    z, y = _data(rng, scale=0.5)  # concentrated scores: empty extreme bins
    w = rng.uniform(0.5, 2.0, size=z.shape[0])
    params = histogram.fit(z, y, weights=w, n_bins=20, empty=empty)
    edges = np.linspace(0, 1, 21)
    z_new = np.linspace(-7, 7, 301)
    ref = _hist_reference(expit(z), y, w, edges, expit(z_new), empty)
    np.testing.assert_allclose(np.asarray(histogram.predict(params, z_new)), ref, atol=1e-6)
    assert bool(np.any(np.asarray(params.empty)))


def test_histogram_quantile_bins_equal_mass(rng):
    z, y = _data(rng)
    params = histogram.fit(z, y, n_bins=10, strategy="quantile")
    edges = np.asarray(params.edges, np.float64)
    ref_edges = np.quantile(expit(z), np.arange(1, 10) / 10, method="inverted_cdf")
    np.testing.assert_allclose(edges[1:-1], ref_edges, rtol=1e-6)
    counts = np.bincount(np.clip(np.searchsorted(edges[1:-1], np.asarray(jax.nn.sigmoid(z)),
                                                 side="right"), 0, 9), minlength=10)
    assert counts.min() >= N // 10 - 1 and counts.max() <= N // 10 + 1


# ---------------------------------------------------------------------------------------
# ILPS: constrained reference with scipy SLSQP (b_k <= b_{k+1}) on a small knot grid.
@pytest.mark.parametrize("solver", ilps.SOLVERS)
def test_ilps_matches_constrained_scipy_fit(rng, solver):
    z, y = _data(rng, link=lambda z: np.where(z > 0, 0.5 * z, 1.4 * z) - 0.3)
    k = 8
    a = np.asarray(ilps.knots(k), np.float64)
    params = ilps.fit(z, y, n_knots=k, solver=solver)
    assert not bool(params.fallback)

    def eta(b):
        j = np.clip(np.searchsorted(a, z, side="right") - 1, 0, k - 2)
        s = (b[1:] - b[:-1]) / (a[1:] - a[:-1])
        s_j = np.where((z < a[0]) | (z > a[-1]), np.maximum(s[j], 0), s[j])
        return b[j] + (z - a[j]) * s_j

    def loss(b):
        u = eta(b)
        return -np.mean(y * log_expit(u) + (1 - y) * log_expit(-u))

    cons = {"type": "ineq", "fun": lambda b: b[1:] - b[:-1]}
    ref = minimize(loss, a, method="SLSQP", constraints=[cons], options={"ftol": 1e-12,
                                                                          "maxiter": 500})
    b = np.asarray(params.values, np.float64)
    assert np.all(np.diff(b) >= -1e-4)
    assert loss(b) <= ref.fun + 2e-4
    np.testing.assert_allclose(np.asarray(ilps.predict(params, z)), expit(eta(b)), atol=1e-5)


def test_ilps_default_grid_improves_on_raw_and_is_monotone(rng):
    z, y = _data(rng, link=lambda z: np.where(z > 0, 0.4 * z, 1.2 * z))
    params = ilps.fit(z, y)
    a = np.asarray(params.knots, np.float64)
    np.testing.assert_allclose(expit(a), np.arange(1, 101) / 101, rtol=1e-5)
    grid = np.linspace(-15, 15, 2001)
    out = np.asarray(ilps.predict(params, grid))
    assert np.all(np.diff(out) >= -1e-6)
    assert _nll(ilps.predict(params, z), y) < _nll(expit(z), y) - 0.01
    assert float(ilps.predict(params, np.array([-30.0]))[0]) < float(
        ilps.predict(params, np.array([-20.0]))[0])


def _ilps_objective64(b, a, z, y, lam=1.0, tau=1e-3):
    """Eq. 11 with the softplus hinge, in float64 NumPy: the reference the fits are judged by."""
    j = np.clip(np.searchsorted(a, z, side="right") - 1, 0, len(a) - 2)
    s = (b[1:] - b[:-1]) / (a[1:] - a[:-1])
    u = b[j] + (z - a[j]) * np.where((z < a[0]) | (z > a[-1]), np.maximum(s[j], 0), s[j])
    data = np.mean(y * np.logaddexp(0, -u) + (1 - y) * np.logaddexp(0, u))
    return data + lam * np.sum(tau * np.logaddexp(0, (b[:-1] - b[1:]) / tau))


@pytest.mark.parametrize("extrapolate", ["linear", "clamp"])
def test_ilps_newton_hessian_equals_autodiff(rng, extrapolate):
    """The damped-Newton solver's tridiagonal Hessian, assembled from each row's two knot
    coefficients and each hinge's curvature, is JAX's automatic Hessian of the objective
    (weighted rows, a random point with violated and satisfied hinges)."""
    from calib_jax.calibrators._common import bce_with_logits, weighted_mean

    z = jnp.asarray(rng.normal(-1, 2.5, 400), jnp.float32)
    y = jnp.asarray(rng.uniform(size=400) < 0.3, jnp.float32)
    w = jnp.asarray(rng.uniform(0.5, 2.0, 400), jnp.float32)
    a = ilps.knots(12, jnp.float32)
    geom = ilps._geometry(a, z, extrapolate)
    lam, tau = jnp.float32(1.0), jnp.float32(0.1)

    def loss(b):
        data = weighted_mean(bce_with_logits(ilps._eta_from(b, a, *geom), y), w)
        return data + lam * jnp.sum(tau * jax.nn.softplus((b[:-1] - b[1:]) / tau))

    b = a + jnp.asarray(rng.normal(0, 0.3, 12), jnp.float32)
    np.testing.assert_allclose(np.asarray(ilps._hessian(b, a, geom, w / jnp.sum(w), lam, tau)),
                               np.asarray(jax.hessian(loss)(b)), atol=5e-6)


def test_ilps_newton_reaches_the_gradient_tolerance_where_lbfgs_stops_short(rng):
    """On 20,000 simulated CTR-like logits, L-BFGS's 300
    iterations stop above the objective that the Newton solver reaches within its gradient
    tolerance (judged in float64 by the NumPy objective), and the Newton fit stays monotone."""
    z = rng.normal(-3.0, 1.2, 20_000).astype(np.float32).astype(np.float64)
    y = (rng.uniform(size=z.size) < expit(0.8 * z - 0.3 + 0.2 * np.sin(2 * z))).astype(np.float64)
    fits = {s: ilps.fit(z, y, solver=s) for s in ilps.SOLVERS}
    a = np.asarray(ilps.knots(100), np.float64)
    obj = {s: _ilps_objective64(np.asarray(p.values, np.float64), a, z, y) for s, p in fits.items()}
    assert obj["newton"] < obj["lbfgs"] - 1e-6, obj
    assert obj["newton"] < _ilps_objective64(a, a, z, y)  # below the identity's objective
    b = np.asarray(fits["newton"].values, np.float64)
    assert np.all(np.diff(b) >= -1e-3) and not bool(fits["newton"].fallback)
    with pytest.raises(ValueError, match="solver"):
        ilps.fit(z, y, solver="adam")


@pytest.mark.slow
def test_ilps_weights_equal_repeated_rows_and_clamp(rng):
    z, y = _data(rng, n=300)
    w = rng.integers(0, 4, size=z.shape[0])
    kw = {"n_knots": 20, "max_iter": 1000}
    p_w = ilps.fit(z, y, weights=w.astype(np.float64), **kw)
    p_r = ilps.fit(np.repeat(z, w), np.repeat(y, w), **kw)
    grid = np.linspace(-6, 6, 97)
    np.testing.assert_allclose(np.asarray(ilps.predict(p_w, grid)),
                               np.asarray(ilps.predict(p_r, grid)), atol=1e-4)
    clamp = ilps.fit(z, y, extrapolate="clamp", **kw)
    far = np.asarray(ilps.predict(clamp, np.array([-30.0, -20.0, 20.0, 30.0])))
    assert far[0] == far[1] and far[2] == far[3]


# ---------------------------------------------------------------------------------------
# Invariances shared by all calibrators.
FITS = {
    "temperature": {},
    "platt": {},
    "beta": {},
    "histogram_binning": {"n_bins": 10},
    "histogram_binning_q": {"n_bins": 10, "strategy": "quantile"},
    "isotonic": {},
    "ilps": {},
}


def _cal(name):
    return REGISTRY["histogram_binning" if name.startswith("histogram") else name]


@pytest.mark.parametrize("name", [k for k in FITS if k != "ilps"])  # ilps: slow test above
def test_weights_equal_repeated_rows(rng, name):
    z, y = _data(rng)
    w = rng.integers(0, 4, size=z.shape[0])
    cal = _cal(name)
    p_w = cal.fit(z, y, weights=w.astype(np.float64), **FITS[name])
    p_r = cal.fit(np.repeat(z, w), np.repeat(y, w), **FITS[name])
    grid = np.linspace(-6, 6, 97)
    atol = 1e-5
    np.testing.assert_allclose(np.asarray(cal.predict(p_w, grid)),
                               np.asarray(cal.predict(p_r, grid)), atol=atol)


@pytest.mark.parametrize("name", ["temperature", "platt", "beta"])
def test_strictly_monotone_calibrators_keep_auc(rng, name):
    from sklearn.metrics import roc_auc_score

    z, y = _data(rng)
    cal = REGISTRY[name]
    p = np.asarray(cal.predict(cal.fit(z, y), z), np.float64)
    assert roc_auc_score(y, p) == pytest.approx(roc_auc_score(y, z), abs=1e-12)


@pytest.mark.parametrize("name", ["isotonic", "ilps"])
def test_monotone_calibrators_preserve_order(rng, name):
    z, y = _data(rng)
    cal = REGISTRY[name]
    params = cal.fit(z, y, **FITS[name])
    order = np.argsort(z)
    p = np.asarray(cal.predict(params, z), np.float64)[order]
    assert np.all(np.diff(p) >= -1e-6)  # non-decreasing; pooled blocks create ties
    assert cal.monotone


@pytest.mark.parametrize("mod", [temperature, platt])
def test_vmapped_fit_equals_loop(rng, mod):
    trials = [_data(rng, link=lambda z, s=s: z / s) for s in (0.7, 1.5, 2.3, 4.0)]
    zs = jnp.asarray(np.stack([t[0] for t in trials]), jnp.float32)
    ys = jnp.asarray(np.stack([t[1] for t in trials]), jnp.float32)
    batched = jax.jit(jax.vmap(mod.fit))(zs, ys)
    for i in range(len(trials)):
        single = mod.fit(zs[i], ys[i])
        for leaf_b, leaf_s in zip(jax.tree.leaves(batched), jax.tree.leaves(single)):
            np.testing.assert_allclose(np.asarray(leaf_b[i]), np.asarray(leaf_s), rtol=1e-5,
                                       atol=1e-6)


@pytest.mark.parametrize(
    "name",
    ["temperature", "platt", "beta", "histogram_binning",
     # ilps: ~10 s of compilation; its eager and jitted fits agree to 1e-5 only when both are
     # compiled by the default fusion emitters (0.05 apart in a knot under the older ones)
     pytest.param("ilps", marks=[pytest.mark.slow, pytest.mark.default_codegen])],
)
def test_fit_is_jittable(rng, name):
    z, y = _data(rng)
    kw = FITS[name]
    cal = REGISTRY[name]
    eager = cal.fit(z, y, **kw)
    jitted = jax.jit(lambda a, b: cal.fit(a, b, **kw))(jnp.asarray(z), jnp.asarray(y))
    for u, v in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Edge cases: never NaN; identity fallback is reported.
EDGE = {
    # (length 8 where the case allows it, to share compiled fits between cases)
    "single_class": (np.array([-1.0, 0.5, 2.0, 3.0, -4.0, 0.0, 1.0, 7.0]), np.ones(8)),
    "constant_logits": (np.full(8, 0.7), np.array([0, 1, 1, 0, 1, 1, 0, 0.0])),
    "huge_logits": (np.array([-80.0, -60.0, -55.0, 55.0, 60.0, 90.0, 1.0, -1.0]),
                    np.array([0, 0, 1, 1, 1, 1, 0, 1.0])),
    "n1": (np.array([0.3]), np.array([1.0])),
    "n2": (np.array([-0.5, 0.5]), np.array([0.0, 1.0])),
}


def _edge_params():
    for name in FITS:
        for case in EDGE:
            # ilps compiles for ~10 s per input length: the length-1/2 cases run as slow tests
            slow = name == "ilps" and case in ("n1", "n2")
            yield pytest.param(name, case, marks=pytest.mark.slow if slow else ())


#: calibrators with a fail-safe event threshold (set to 0 here so the fitting code itself runs
#: on the 8-row edge cases; tests/test_failsafe.py covers the thresholds)
FAILSAFE = ("temperature", "platt", "beta")


@pytest.mark.parametrize("name, case", list(_edge_params()))
def test_edge_cases_never_nan(name, case):
    z, y = EDGE[case]
    cal = _cal(name)
    kw = dict(FITS[name])
    expect_warning = name in FAILSAFE and case in ("single_class", "n1")
    if name in FAILSAFE:
        kw["min_events"] = 0.0
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", CalibrationFallbackWarning)
        params = cal.fit(z, y, **kw)
    if expect_warning:  # other edge cases may fall back too (flat or non-converged fits)
        assert any(issubclass(w.category, CalibrationFallbackWarning) for w in seen)
    grid = np.array([-100.0, -60.0, -3.0, 0.0, 0.7, 3.0, 60.0, 100.0])
    out = np.asarray(cal.predict(params, grid))
    assert np.all(np.isfinite(out)) and np.all((out >= 0) & (out <= 1))
    if case in ("single_class", "n1") and hasattr(params, "fallback"):
        # the fallback is the identity or a logit shift sigma(z + b) onto the Wilson interval
        # of the observed rate: either way it keeps the ranking and the logit gaps
        assert bool(params.fallback)
        inner = (out > 1e-6) & (out < 1 - 1e-6)
        shift = np.log(out[inner]) - np.log1p(-out[inner]) - grid[inner]
        assert inner.sum() >= 3 and np.ptp(shift) < 1e-4, shift


def test_invalid_input_raises_naming_argument():
    z = np.array([0.1, 0.2, 0.3])
    y = np.array([0.0, 1.0, 1.0])
    for name in FITS:
        cal = _cal(name)
        with pytest.raises(ValueError, match="logits"):
            cal.fit(np.array([0.1, np.nan, 0.3]), y)
        with pytest.raises(ValueError, match="labels"):
            cal.fit(z, np.array([0.0, 2.0, 1.0]))
        with pytest.raises(ValueError, match="labels"):
            cal.fit(z, np.array([0.0, 1.0]))
        with pytest.raises(ValueError, match="weights"):
            cal.fit(z, y, weights=np.array([1.0, -1.0, 1.0]))
        with pytest.raises(ValueError, match="logits"):
            cal.fit(np.array([]), np.array([]))


_INF, _NAN = float("inf"), float("nan")


@pytest.mark.parametrize("name, option, value, match", [
    # the Newton-step calibrators: 2.5 steps were 2, True was 1, infinity an OverflowError in int()
    *[(n, "n_steps", v, "`n_steps` must be") for n in ("temperature", "platt", "beta", "gaussian", "gamma")
      for v in (2.5, True, _INF, "12")],
    # a NaN or infinite threshold made every fit fall back; -1 meant 0; text and True were numbers
    *[(n, "min_events", v, "`min_events` must be a finite number >= 0")
      for n in ("temperature", "platt", "beta", "gaussian", "gamma", "mcgrad") for v in (_NAN, _INF, -1.0, True, "1")],
    ("platt", "smooth_targets", "no", "`smooth_targets` must be True or False"),  # "no" is true
    ("gamma", "margin", 1e30, "`margin` must be a finite number in \\(0, 1e3\\]"),  # NaN probabilities
    ("gamma", "margin", True, "`margin`"),
    *[("ilps", o, v, f"`{o}` must be a finite number >= 0") for o in ("lam", "tol", "smoothing")
      for v in (_INF, True, "1")],  # an infinite lam or tol returned the start
    ("neural_calibration", "lr", _NAN, "`lr` must be a finite number > 0"),  # the MLP stayed at its start
    ("neural_calibration", "lr", 0.0, "`lr`"), ("neural_calibration", "weight_decay", _INF, "`weight_decay`"),
    ("neural_calibration", "hidden", 32, "`hidden` must be a sequence"),  # a TypeError in `for h in hidden`
    ("neural_calibration", "hidden", (2.5,), "`hidden` must be a Python int"),  # read as 2
    ("neural_calibration", "stop_frac", "0.2", "`stop_frac` must be a number in \\[0, 1\\)"),
])
def test_an_option_that_is_no_number_of_its_kind_is_refused_by_name(name, option, value, match):
    rng = np.random.default_rng(0)
    z = rng.normal(size=200).astype(np.float32)
    y = (rng.uniform(size=200) < expit(z)).astype(np.float32)
    context = {"fields": rng.integers(0, 3, (200, 2)), "embedding": rng.normal(size=(200, 3)).astype(np.float32)}
    if name == "mcgrad":
        pytest.importorskip("mcgrad")
    with pytest.raises(ValueError, match=match):
        REGISTRY[name].fit(z, y, key=jax.random.key(0), context=context, **{option: value})


def test_a_traced_threshold_is_still_taken_under_jit():
    rng = np.random.default_rng(1)
    z = jnp.asarray(rng.normal(size=400) * 2, jnp.float32)
    y = jnp.asarray(rng.uniform(size=400) < expit(np.asarray(z)), jnp.float32)
    jitted = jax.jit(lambda m: platt.fit(z, y, min_events=m).a)(jnp.float32(1.0))
    assert float(jitted) == pytest.approx(float(platt.fit(z, y, min_events=1.0).a), rel=1e-6)


def test_registry_records():
    for name in ("temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps"):
        assert REGISTRY[name].name == name
    assert not REGISTRY["histogram_binning"].monotone


def test_ilps_fit_under_jit_turns_bad_input_into_nan_like_the_other_jitable_fits():
    """ILPS's fit checked its inputs only eagerly: under jit a label of 2 was used as given and
    a finite fit came back. It now runs its checks as one compiled program, as temperature,
    Platt, beta and histogram binning do."""
    from calib_jax.calibrators import ilps

    rng = np.random.default_rng(0)
    z = rng.normal(size=200).astype(np.float32)
    y = (rng.random(200) < 1 / (1 + np.exp(-z))).astype(np.float32)
    eager = ilps.fit(z, y, n_knots=5)
    jitted = jax.jit(lambda a, b: ilps.fit(a, b, n_knots=5))(z, y)
    # bit-equal on the CPU; on a GPU fusion reorders float32 sums (2 ulp seen on an H100)
    np.testing.assert_allclose(np.asarray(jitted.values), np.asarray(eager.values), rtol=1e-6, atol=1e-6)
    bad = jnp.asarray(y).at[0].set(2.0)
    assert np.isnan(np.asarray(jax.jit(lambda a, b: ilps.fit(a, b, n_knots=5))(z, bad).values)).all()
    with pytest.raises(ValueError, match="`labels`"):
        ilps.fit(z, bad, n_knots=5)


def test_a_fit_inside_jit_on_closed_over_logits_runs():
    """The probabilities warning read min / max of the logits with float(): inside a user's jit,
    on a concrete array closed over by the jitted function, those were tracers and the fit
    failed with a ConcretizationTypeError (found by the CUDA-export test in make test-slow)."""
    from calib_jax.calibrators import histogram

    p = jnp.linspace(0.01, 0.9, 200)
    o, y = jnp.log(p / (1 - p)), (jnp.arange(200) % 3 == 0).astype(jnp.float32)
    eager = histogram.fit(o, y).values
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda y: histogram.fit(o, y).values)(y)), np.asarray(eager))
    with pytest.warns(UserWarning, match="look like probabilities"):
        jax.jit(lambda y: histogram.fit(p, y).values)(y)
