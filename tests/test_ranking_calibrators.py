"""Gaussian and Gamma calibration (calib_jax.calibrators.ranking_scores, Kweon, Kang and Yu,
AAAI 2022) against an independent constrained maximum-likelihood fit (scipy's SLSQP on the
paper's coefficients, float64), scikit-learn where the constraint is slack, and the Bayes
posteriors of the score models they assume; plus the checks every registered calibrator meets
(tests/test_calibrators.py, test_bad_inputs.py, test_failsafe.py, test_eager_calls.py and
test_sklearn_estimator.py list their calibrators by hand, so the two new entries are run
through the same checks here)."""

from __future__ import annotations

import warnings

import bad_inputs as B
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from scipy.stats import gamma as gamma_dist
from scipy.stats import norm
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from test_calibrators import EDGE
from test_eager_calls import _compilations_and_growth
from test_failsafe import _check_no_collapse, _synthetic_split

import calib_jax.calibrators._failsafe as F
from calib_jax.calibrators import REGISTRY, CalibrationFallbackWarning, SklearnCalibrator, top_n
from calib_jax.calibrators import ranking_scores as R

FITS = {"gaussian": R.fit_gaussian, "gamma": R.fit_gamma}
PREDICTS = {"gaussian": R.predict_gaussian, "gamma": R.predict_gamma}


# ---------------------------------------------------------------------------------------------- data
def _gaussian_scores(rng, n, *, pos=(1.0, 1.0), neg=(-1.0, 1.1), rate=0.2):
    y = (rng.random(n) < rate).astype(np.float32)
    s = np.where(y == 1, rng.normal(*pos, n), rng.normal(*neg, n)).astype(np.float32)
    return s, y


def _gamma_scores(rng, n, *, pos=(4.0, 1.0), neg=(2.0, 1.0), rate=0.3, offset=1.0):
    """Scores ``x - offset`` with ``x`` Gamma(shape, scale) per class."""
    y = (rng.random(n) < rate).astype(np.float32)
    x = np.where(y == 1, rng.gamma(*pos, n), rng.gamma(*neg, n))
    return (x - offset).astype(np.float32), y


# ------------------------------------------------------------------------ the independent reference
def _reference_fit(features, y, w, constraints):
    """Weighted mean log loss of ``sigmoid(features @ (a, b) + c)`` minimised by scipy's SLSQP in
    float64 subject to ``constraints @ (a, b, c) >= 0`` (the official code's linear constraints on
    the paper's coefficients; columns standardised for the optimiser and mapped back)."""
    X = np.asarray(features, np.float64)
    y, w = np.asarray(y, np.float64), np.asarray(w, np.float64)
    mu, sd = X.mean(0), X.std(0)
    sd[sd == 0] = 1.0
    Xs = np.column_stack([(X - mu) / sd, np.ones(len(y))])
    T = np.zeros((3, 3))                      # (a, b, c) = T @ beta
    T[0, 0], T[1, 1] = 1 / sd[0], 1 / sd[1]
    T[2] = [-mu[0] / sd[0], -mu[1] / sd[1], 1.0]

    def loss(beta):
        u = Xs @ beta
        return (np.sum(w * (np.logaddexp(0.0, u) - y * u)) / w.sum(),
                Xs.T @ (w * (expit(u) - y)) / w.sum())

    cons = ({"type": "ineq", "fun": lambda b: constraints @ (T @ b), "jac": lambda b: constraints @ T},)
    res = minimize(loss, np.zeros(3), jac=True, method="SLSQP", constraints=cons,
                   options={"ftol": 1e-15, "maxiter": 2000})
    assert res.success, res.message
    return T @ res.x


def _design(name, s, lo, hi, margin=0.1):
    """The paper's features and the official code's constraint matrix on (a, b, c), from the
    fitting range computed here (not read from the params)."""
    s = np.asarray(s, np.float64)
    if name == "gaussian":
        return np.column_stack([s * s, s]), np.array([[2 * lo, 1.0, 0.0], [2 * hi, 1.0, 0.0]]), None
    origin = lo - margin * (hi - lo)
    x = s - origin
    return (np.column_stack([np.log(x), x]),
            np.array([[1 / (lo - origin), 1.0, 0.0], [1 / (hi - origin), 1.0, 0.0]]), origin)


def _paper_probs(name, coef, s, origin):
    s = np.asarray(s, np.float64)
    a, b, c = coef
    if name == "gaussian":
        return expit(a * s * s + b * s + c)
    return expit(a * np.log(s - origin) + b * (s - origin) + c)


#: (family, scenario): data and which end's constraint binds at the optimum (None: both slack)
SCENARIOS = {
    ("gaussian", "slack"): (lambda rng: _gaussian_scores(rng, 6000), {}, None),
    # negatives wider than positives: the log-odds are concave and turn down before the top score
    ("gaussian", "binds_hi"): (lambda rng: _gaussian_scores(rng, 6000, neg=(-1.0, 1.5)), {}, 1),
    # positives wider: convex log-odds that rise again below the bottom score
    ("gaussian", "binds_lo"): (lambda rng: _gaussian_scores(rng, 6000, pos=(1.0, 1.8), neg=(-1.0, 1.0)), {}, 0),
    # a = 4 - 2 > 0, b = 1/1 - 1/1.5 > 0: increasing everywhere
    ("gamma", "slack"): (lambda rng: _gamma_scores(rng, 6000, pos=(4.0, 1.5)), {}, None),
    # a = k1 - k0 > 0, b = 1/theta0 - 1/theta1 < 0: the log-odds peak inside the scores
    ("gamma", "binds_hi"): (lambda rng: _gamma_scores(rng, 6000, neg=(2.0, 1.5)), {}, 1),
    # a < 0, b > 0: the log-odds fall near the origin (a small margin puts the bottom there)
    ("gamma", "binds_lo"): (lambda rng: _gamma_scores(rng, 6000, pos=(1.0, 4.0), neg=(2.0, 1.0)),
                            {"margin": 0.01}, 0),
}


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("family, scenario", list(SCENARIOS))
def test_fit_equals_the_constrained_maximum_likelihood_of_scipy(family, scenario, weighted):
    make, hyper, binds = SCENARIOS[(family, scenario)]
    rng = np.random.default_rng(2 * list(SCENARIOS).index((family, scenario)) + weighted)
    s, y = make(rng)
    w = rng.uniform(0.2, 3.0, s.shape[0]).astype(np.float32) if weighted else np.ones_like(s)
    prm = FITS[family](s, y, weights=w if weighted else None, **hyper)
    assert int(prm.fallback) == F.OK
    lo, hi = float(s.min()), float(s.max())
    assert (float(prm.lo), float(prm.hi)) == (lo, hi)
    X, A, origin = _design(family, s, lo, hi, **hyper)
    if family == "gamma":
        np.testing.assert_allclose(float(prm.origin), origin, rtol=1e-6, atol=1e-6)
    ref = _reference_fit(X, y, w, A)
    slack = A @ ref
    if binds is None:
        assert np.all(slack > 0.05), slack
    else:  # the scenario is what it says: that end's constraint is active, the other is not
        assert abs(slack[binds]) < 1e-6 and slack[1 - binds] > 0.05, slack
    ours = np.array([float(prm.a), float(prm.b), float(prm.c)])
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)  # measured: 3.4e-7
    grid = np.linspace(lo, hi, 401)
    np.testing.assert_allclose(np.asarray(PREDICTS[family](prm, grid), np.float64),
                               _paper_probs(family, ref, grid, origin), atol=2e-6)


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_slack_fit_equals_scikit_learn_logistic_regression_with_sample_weight(family):
    """Where the constraint does not bind, the fit is plain weighted logistic regression on the
    paper's features (scikit-learn, a negligible ridge: C = 1e10, lbfgs to tol 1e-12)."""
    rng = np.random.default_rng(11)
    s, y = _gaussian_scores(rng, 5000) if family == "gaussian" else _gamma_scores(rng, 5000, pos=(4.0, 1.5))
    w = rng.uniform(0.2, 3.0, s.shape[0])
    prm = FITS[family](s, y, weights=w.astype(np.float32))
    X, _, origin = _design(family, s, float(s.min()), float(s.max()))
    mu, sd = X.mean(0), X.std(0)
    lr = LogisticRegression(C=1e10, tol=1e-12, max_iter=10_000).fit((X - mu) / sd, y, sample_weight=w)
    p_ref = lr.predict_proba((X - mu) / sd)[:, 1]
    np.testing.assert_allclose(np.asarray(PREDICTS[family](prm, s), np.float64), p_ref, atol=2e-6)


# ----------------------------------------------------------------------- the posterior of the model
def test_gaussian_fit_recovers_the_bayes_posterior_of_two_gaussians():
    rng = np.random.default_rng(3)
    (m1, s1), (m0, s0), rate = (1.0, 1.0), (-1.0, 1.1), 0.2
    s, y = _gaussian_scores(rng, 60_000, pos=(m1, s1), neg=(m0, s0), rate=rate)
    prm = R.fit_gaussian(s, y)
    grid = np.linspace(*np.quantile(s, [0.01, 0.99]), 200)   # measured max error: 0.003
    truth = rate * norm.pdf(grid, m1, s1) / (rate * norm.pdf(grid, m1, s1) + (1 - rate) * norm.pdf(grid, m0, s0))
    assert np.max(np.abs(np.asarray(R.predict_gaussian(prm, grid)) - truth)) < 0.02
    # the coefficients are the Bayes ones: a = 1/(2 s0^2) - 1/(2 s1^2), b = m1/s1^2 - m0/s0^2
    assert float(prm.a) == pytest.approx(1 / (2 * s0**2) - 1 / (2 * s1**2), abs=0.02)
    assert float(prm.b) == pytest.approx(m1 / s1**2 - m0 / s0**2, abs=0.03)


def test_gamma_fit_recovers_the_bayes_posterior_of_two_gammas():
    rng = np.random.default_rng(4)
    (k1, t1), (k0, t0), rate, offset = (4.0, 1.0), (2.0, 1.0), 0.3, 1.0
    s, y = _gamma_scores(rng, 60_000, pos=(k1, t1), neg=(k0, t0), rate=rate, offset=offset)
    margin = float((s.min() + offset) / np.ptp(s))   # the origin -offset of the draws
    prm = R.fit_gamma(s, y, margin=margin)
    assert float(prm.origin) == pytest.approx(-offset, abs=1e-5)
    grid = np.linspace(*np.quantile(s, [0.01, 0.99]), 200)
    x = grid + offset
    f1, f0 = gamma_dist.pdf(x, k1, scale=t1), gamma_dist.pdf(x, k0, scale=t0)
    truth = rate * f1 / (rate * f1 + (1 - rate) * f0)
    assert np.max(np.abs(np.asarray(R.predict_gamma(prm, grid)) - truth)) < 0.02  # measured: 0.004
    assert float(prm.a) == pytest.approx(k1 - k0, abs=0.1)           # a = k1 - k0
    assert float(prm.b) == pytest.approx(1 / t0 - 1 / t1, abs=0.05)  # b = 1/theta0 - 1/theta1


# --------------------------------------------------------------------------------- the model's shape
@pytest.mark.parametrize("binding", [False, True], ids=["slack", "binding"])
@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_map_is_non_decreasing_everywhere_and_keeps_the_auc(family, binding):
    """Non-decreasing on the range and, through the linear continuation, beyond it, also where
    the constraint binds (the unconstrained optimum would turn down inside the range)."""
    rng = np.random.default_rng(5)
    if family == "gaussian":
        s, y = _gaussian_scores(rng, 4000, neg=(-1.0, 1.6 if binding else 1.1))
    else:
        s, y = _gamma_scores(rng, 4000, neg=(2.0, 1.5)) if binding else _gamma_scores(rng, 4000, pos=(4.0, 1.5))
    prm = FITS[family](s, y)
    wide = np.linspace(-200.0, 200.0, 40_001)
    p = np.asarray(PREDICTS[family](prm, wide), np.float64)
    inside = (wide >= float(prm.lo)) & (wide <= float(prm.hi))
    steps = np.diff(p)
    assert np.all(np.isfinite(p)) and np.all(steps[~inside[1:] & ~inside[:-1]] >= 0)  # the continuation
    assert np.all(steps >= -1e-7)  # inside: float32 rounding of the formula where the slope is ~0
    # the ranking of the fitting rows is kept: exactly where the map is strictly increasing; where
    # an end slope is 0, float32 can merge the probabilities of neighbouring scores there
    p_fit = np.asarray(PREDICTS[family](prm, s), np.float64)
    assert roc_auc_score(y, p_fit) == pytest.approx(roc_auc_score(y, s), abs=1e-5 if binding else 1e-12)
    assert REGISTRY[family].monotone


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_score_range_sets_the_constraint_range_and_the_linear_continuation(family):
    rng = np.random.default_rng(6)
    s, y = _gaussian_scores(rng, 3000) if family == "gaussian" else _gamma_scores(rng, 3000)
    lo, hi = float(np.quantile(s, 0.1)), float(np.quantile(s, 0.9))
    prm = FITS[family](s, y, score_range=(lo, hi))
    assert (float(prm.lo), float(prm.hi)) == pytest.approx((lo, hi))
    # beyond [lo, hi] the log-odds are linear in the score, with the end slopes (>= 0)
    t = np.array([hi + 1.0, hi + 2.0, hi + 3.0, lo - 3.0, lo - 2.0, lo - 1.0])
    g = np.log(np.asarray(PREDICTS[family](prm, t), np.float64))
    g = g - np.log1p(-np.exp(g))
    assert g[1] - g[0] == pytest.approx(g[2] - g[1], abs=1e-4) and g[1] - g[0] >= 0
    assert g[4] - g[3] == pytest.approx(g[5] - g[4], abs=1e-4) and g[4] - g[3] >= 0


# ------------------------------------------------------------------- jit, vmap, weights, edge cases
@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_jit_and_vmap_equal_the_eager_loop(family):
    rng = np.random.default_rng(7)
    draws = [(_gaussian_scores if family == "gaussian" else _gamma_scores)(rng, 1500) for _ in range(3)]
    S, Y = jnp.asarray(np.stack([d[0] for d in draws])), jnp.asarray(np.stack([d[1] for d in draws]))
    fit = FITS[family]
    batched = jax.jit(jax.vmap(fit))(S, Y)
    jitted = jax.jit(fit)(S[0], Y[0])
    for i in range(len(draws)):
        single = fit(S[i], Y[i])
        for b, e in zip(jax.tree.leaves(batched), jax.tree.leaves(single)):
            np.testing.assert_allclose(np.asarray(b[i]), np.asarray(e), rtol=1e-5, atol=1e-6)
    for j, e in zip(jax.tree.leaves(jitted), jax.tree.leaves(fit(S[0], Y[0]))):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-5, atol=1e-6)
    predict = PREDICTS[family]
    grid = jnp.linspace(-10.0, 20.0, 64)
    out = jax.vmap(predict, in_axes=(0, None))(batched, grid)
    for i in range(len(draws)):
        one = jax.tree.map(lambda leaf, i=i: leaf[i], batched)
        np.testing.assert_allclose(np.asarray(out[i]), np.asarray(predict(one, grid)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_weights_equal_repeated_rows(family):
    rng = np.random.default_rng(8)
    s, y = _gaussian_scores(rng, 2000) if family == "gaussian" else _gamma_scores(rng, 2000)
    w = rng.integers(0, 4, size=s.shape[0])       # zero-weight rows leave the fit (and its range)
    p_w = FITS[family](s, y, weights=w.astype(np.float64))
    p_r = FITS[family](np.repeat(s, w), np.repeat(y, w))
    grid = np.linspace(-6, 6, 97)
    np.testing.assert_allclose(np.asarray(PREDICTS[family](p_w, grid)),
                               np.asarray(PREDICTS[family](p_r, grid)), atol=1e-5)


@pytest.mark.parametrize("case", list(EDGE))
@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_edge_cases_never_nan(family, case):
    """tests/test_calibrators.py's edge cases (one class, constant scores, huge scores, n = 1, 2)
    with ``min_events=0`` so that the fitting code itself runs on them."""
    z, y = EDGE[case]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", CalibrationFallbackWarning)
        params = FITS[family](z, y, min_events=0.0)
    if case in ("single_class", "n1"):
        assert any(issubclass(w.category, CalibrationFallbackWarning) for w in seen)
    assert all(np.all(np.isfinite(np.asarray(leaf))) for leaf in jax.tree.leaves(params))
    grid = np.array([-100.0, -60.0, -3.0, 0.0, 0.7, 3.0, 60.0, 100.0])
    out = np.asarray(PREDICTS[family](params, grid))
    assert np.all(np.isfinite(out)) and np.all((out >= 0) & (out <= 1)) and np.all(np.diff(out) >= 0)
    if case in ("single_class", "n1"):  # the identity or a logit shift sigma(s + b)
        assert int(params.fallback) == F.TOO_FEW_EVENTS
        inner = (out > 1e-6) & (out < 1 - 1e-6)
        shift = np.log(out[inner]) - np.log1p(-out[inner]) - grid[inner]
        assert inner.sum() >= 3 and np.ptp(shift) < 1e-4, shift


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_constant_scores_fit_the_base_rate(family):
    z = np.full(400, 0.7, np.float32)
    y = (np.arange(400) % 4 == 0).astype(np.float32)
    prm = FITS[family](z, y)
    assert int(prm.fallback) == F.OK
    np.testing.assert_allclose(np.asarray(PREDICTS[family](prm, z)), 0.25, rtol=1e-5)


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_a_decreasing_signal_falls_back_to_a_shift_that_keeps_the_ranking(family):
    rng = np.random.default_rng(9)
    s, y = _gaussian_scores(rng, 3000) if family == "gaussian" else _gamma_scores(rng, 3000)
    with pytest.warns(CalibrationFallbackWarning, match="flat or decreasing"):
        prm = FITS[family](-s, y)
    assert int(prm.fallback) == F.REVERSES_RANKING
    p = np.asarray(PREDICTS[family](prm, -s), np.float64)
    np.testing.assert_allclose(p.mean(), y.mean(), rtol=1e-4)     # the maximum-likelihood shift
    np.testing.assert_allclose(np.log(p / (1 - p)) + s, np.log(p[0] / (1 - p[0])) + s[0], atol=1e-4)


# ------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_invalid_input_raises_naming_the_argument(family):
    fit = FITS[family]
    z, y = np.array([0.1, 0.2, 0.3]), np.array([0.0, 1.0, 1.0])
    for kwargs, name in (
        (dict(logits=np.array([0.1, np.nan, 0.3]), labels=y), "logits"),
        (dict(logits=z, labels=np.array([0.0, 2.0, 1.0])), "labels"),
        (dict(logits=z, labels=np.array([0.0, 1.0])), "labels"),
        (dict(logits=z, labels=y, weights=np.array([1.0, -1.0, 1.0])), "weights"),
        (dict(logits=np.array([]), labels=np.array([])), "logits"),
        (dict(logits=z, labels=y, score_range=(1.0, 1.0)), "score_range"),
        (dict(logits=z, labels=y, score_range=(0.0, np.inf)), "score_range"),
        (dict(logits=z, labels=y, score_range=(0.0, 1.0, 2.0)), "score_range"),
    ):
        logits, labels = kwargs.pop("logits"), kwargs.pop("labels")
        with pytest.raises(ValueError, match=f"`{name}`"):
            fit(logits, labels, **kwargs)
    if family == "gamma":
        for margin in (0.0, -0.5, np.nan):
            with pytest.raises(ValueError, match="`margin`"):
                fit(z, y, margin=margin)
    with pytest.raises(ValueError, match="`logits`"):
        PREDICTS[family](fit(z, y, min_events=0.0), np.array([0.0, np.inf]))


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_a_bad_value_in_any_argument_raises_naming_it_at_every_size(family):
    """The property of tests/test_bad_inputs.py (one NaN, inf or out-of-domain value at a random
    row of any argument raises ``ValueError`` naming it) at one row and above 4096 rows (where
    XLA:CPU's vectorised reductions once dropped NaN)."""
    args = {"logits": ("logits", "logits"), "labels": ("labels", "labels"), "weights": ("weights", "weights")}
    case = B.Case(f"{family}.fit", lambda logits, labels, weights: FITS[family](logits, labels, weights=weights),
                  args, min_n=1)
    for n in (1, 4097):
        rng = np.random.default_rng(n)
        arrays = B.valid_arrays(case, n, rng)
        for arg, (role, msg) in case.args.items():
            for value in B.bad_values(role):
                bad = B.corrupt(arrays, case, arg, value, int(rng.integers(n)))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with pytest.raises(ValueError, match=f"`{msg}`"):
                        case.call(**bad)


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_under_jit_a_bad_value_gives_nan_parameters(family):
    rng = np.random.default_rng(10)
    s, y = _gaussian_scores(rng, 500)
    f = jax.jit(FITS[family])
    assert all(np.all(np.isfinite(np.asarray(v))) for v in jax.tree.leaves(f(s, y)))
    nan_logit, bad_label = s.copy(), y.copy()
    nan_logit[17], bad_label[17] = np.nan, 2.0
    for bad_s, bad_y in ((nan_logit, y), (s, bad_label)):
        out = f(bad_s, bad_y)
        floats = [np.asarray(v) for v in jax.tree.leaves(out) if np.issubdtype(np.asarray(v).dtype, np.floating)]
        assert all(np.all(np.isnan(v)) for v in floats)
    out = jax.jit(lambda r: FITS[family](s, y, score_range=r))(jnp.array([1.0, 0.0]))
    assert np.isnan(float(out.a))


# -------------------------------------------------------------------- fail-safe, eager, estimator, TNF
@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_low_signal_fits_fall_back_instead_of_collapsing(family):
    """tests/test_failsafe.py's synthetic log: a 150-row calibration split with a few clicks."""
    rng = np.random.default_rng(7)
    cal, test = _synthetic_split(rng, 150), _synthetic_split(rng, 6000)
    with pytest.warns(CalibrationFallbackWarning, match="too few events"):
        prm = FITS[family](cal.logits, cal.labels)
    assert int(prm.fallback) == F.TOO_FEW_EVENTS
    p_cal = np.asarray(PREDICTS[family](prm, cal.logits))
    p_test = np.asarray(PREDICTS[family](prm, test.logits))
    _check_no_collapse(family, p_cal, cal.labels, p_test, test.labels, np.asarray(jax.nn.sigmoid(test.logits)))


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_eager_fit_and_predict_compile_once(family):
    def make(rng, key, i):
        return _gaussian_scores(rng, 3000)

    def call(d):
        return PREDICTS[family](FITS[family](*d), d[0])

    count, grown_mb = _compilations_and_growth(call, make, 20)
    assert count == 0, f"{family}: {count} compilations in 20 eager calls"
    assert grown_mb < 20


@pytest.mark.parametrize("family", ["gaussian", "gamma"])
def test_registry_scikit_learn_estimator_and_tnf_base(family):
    cal = REGISTRY[family]
    assert cal.name == family and cal.fit is FITS[family] and cal.predict is PREDICTS[family]
    assert cal.monotone and cal.needs == ()
    rng = np.random.default_rng(12)
    s, y = _gaussian_scores(rng, 3000)
    est = SklearnCalibrator(family, score_column=0).fit(s[:, None], y)
    np.testing.assert_allclose(est.predict_proba(s[:, None])[:, 1],
                               np.asarray(cal.predict(cal.fit(s, y), s)), rtol=1e-5, atol=1e-7)
    # TNF (top-N calibration, Sato): one fit per rank group with weights (1/r)^alpha
    ranks = rng.integers(1, 21, s.shape[0])
    prm = top_n.fit(s, y, context={"ranks": ranks}, base=family, top_n=20, n_rank_groups=2, alpha=1.0)
    rows = ranks <= 10
    direct = cal.fit(s[rows], y[rows], weights=(1.0 / ranks[rows]).astype(np.float32))
    for u, v in zip(jax.tree.leaves(prm.groups[0]), jax.tree.leaves(direct)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-6)
    p = np.asarray(top_n.predict(prm, s, context={"ranks": ranks}))
    np.testing.assert_allclose(p[rows], np.asarray(cal.predict(direct, s[rows])), rtol=1e-5, atol=1e-7)
